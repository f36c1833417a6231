// SPDX-License-Identifier: GPL-2.0 OR MIT

//! End-to-end runs of `bench-report` on a recorded console log: three rounds of the
//! boots of scripts/bench-rounds (each with the scaling points above 100000 live) and,
//! in the first, the pairs boot of each mode, three turns.

use std::path::{Path, PathBuf};

use bench_report::plot::{FLOOR, HEIGHT, PEERMEM, REFERENCE, WIDTH};
use bench_report::{run, EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/console.log");

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bench-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs with `args`: (exit code, stdout, stderr).
fn run_args(args: &[&str]) -> (i32, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let code = run(&args, &mut o, &mut e);
    let text = |v| String::from_utf8(v).unwrap();
    (code, text(o), text(e))
}

/// The report of the fixture changed by `edit`, written into a scratch folder `name`.
fn report_of(name: &str, edit: impl Fn(&str) -> String) -> (i32, String, String, PathBuf) {
    let dir = scratch(name);
    let log = dir.join("console.log");
    std::fs::write(&log, edit(&std::fs::read_to_string(FIXTURE).unwrap())).unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = run_args(&[log.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    (code, stdout, stderr, out)
}

/// The number of pixels of colour `c` in the PNG file at `path` (8-bit RGB, of the
/// plots' size).
fn pixels_of(path: &Path, c: plotters::style::RGBColor) -> usize {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((frame.width, frame.height), (WIDTH, HEIGHT));
    assert_eq!(
        (frame.color_type, frame.bit_depth),
        (png::ColorType::Rgb, png::BitDepth::Eight)
    );
    pixels[..frame.buffer_size()]
        .chunks(3)
        .filter(|p| *p == [c.0, c.1, c.2])
        .count()
}

#[test]
fn fixture_passes_every_target_and_writes_outputs() {
    let (code, stdout, stderr, out) = report_of("pass", str::to_string);
    assert_eq!(code, EXIT_PASS, "{stdout}\n{stderr}");
    // The row cut by other console output is reported, with its line number.
    assert!(
        stderr.contains("console.log:14: ignored malformed row"),
        "{stderr}"
    );
    let cells = |start: &str| {
        let want: Vec<&str> = start.split_whitespace().collect();
        let mut lines = stdout.lines().map(|l| l.split_whitespace().collect());
        lines
            .rfind(|c: &Vec<&str>| c.starts_with(&want))
            .expect(start)
    };
    assert_eq!(cells("reuse")[4..], ["0", "1", "0", "2", "0.000"]);
    assert_eq!(
        cells("scaling op_ns 64 KiB 0 4194304")[6..],
        ["1800", "1750", "1.029"]
    );
    for line in [
        "PASS  peermem covered re-registration pins = 0 (reuse): 0.00 pins",
        // The medians of all runs (the host three times slower in the second turn) ...
        "PASS  64 KiB latency op_mean_ns, 0 us pin cost: peermem <= 1 x reference, <= 1.1 x \
         floor: peermem 1927.80 ns: 0.918 x reference (2100 ns), 1.080 x floor (1785 ns)",
        // ... and turn by turn, where the floor's room shows.
        "PASS  64 KiB latency op_mean_ns, 0 us pin cost: peermem <= 1 x reference, <= 1.1 x \
         floor (turn by turn): 0.900 x reference, 1.059 x floor (median over 3 turns); floor \
         0.850 x reference",
        "PASS  64 MiB latency op_mean_ns, 50 us pin cost: peermem <= 1.05 x floor: peermem \
         133875 ns: 1.037 x floor (129150 ns)",
        "PASS  64 KiB latency op_mean_ns, 50 us pin cost: peermem <= 0.52 x reference: peermem \
         110313 ns: 0.518 x reference (213150 ns); floor 107100 ns = 0.502 x reference",
        "PASS  64 KiB memory bytes_per_reg_module: peermem <= 128 B: peermem 128 B; floor 128 B \
         = 1.000 x reference",
        "PASS  64 KiB memory bytes_per_reg_module: peermem <= 256 B: peermem 248 B",
        "PASS  64 KiB memory bytes_per_reg_total: peermem <= 1 x reference: peermem 840 B: 0.991 \
         x reference (848 B)",
        "PASS  64 GiB huge bytes_module: peermem <= 0.01 x reference: peermem 1248 B: 3.7e-5 x \
         reference (33619968 B)",
        "PASS  scaling: peermem op_ns at 4194304 live <= 1.5 x at 1000 live of the same boot, \
         every boot above 100000 live: 1.44, 1.42, 1.42 in 3 boots (worst 1.44)",
    ] {
        assert!(stdout.contains(line), "{line}\n{stdout}");
    }
    // Each mode has its section, persistent (the default) first; only callback mode has
    // the reuse target.
    let persistent = stdout.find("== persistent mode ==").unwrap();
    let callback = stdout.find("== callback mode ==").unwrap();
    assert!(persistent < callback);
    assert!(!stdout[..callback].contains("reuse"));
    assert_eq!(stdout.matches("26/26 targets passed").count(), 2);
    assert!(stdout.contains("Both modes: 52/52 targets passed"));

    // Every row of a mode, in log order, named as printed.
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 453);
    assert_eq!(
        lines[0],
        "strategy,group,metric,size_bytes,pin_cost_us,live,value"
    );
    assert_eq!(
        lines[1],
        "peermem,memory,bytes_per_reg_total,65536,0,20000,976"
    );
    let csv = std::fs::read_to_string(out.join("persistent/results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 444);
    assert_eq!(
        lines[1],
        "peermem-persistent,memory,bytes_per_reg_total,65536,0,20000,840"
    );

    for dir in [out.clone(), out.join("persistent")] {
        for name in [
            "latency.png",
            "pairs.png",
            "pins.png",
            "scaling.png",
            "sg_memory.png",
        ] {
            // Both clients are drawn in their colours (bars, and the legend).
            for c in [PEERMEM, REFERENCE] {
                let n = pixels_of(&dir.join(name), c);
                assert!(n > 500, "{name}: {n} pixels of {c:?}");
            }
        }
        // The floor's bars and legend in pairs.png; none in a plot without it.
        assert!(pixels_of(&dir.join("pairs.png"), FLOOR) > 500);
        assert_eq!(pixels_of(&dir.join("latency.png"), FLOOR), 0);
    }
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}

#[test]
fn a_same_boot_scaling_ratio_fails_in_one_repetition_though_the_medians_pass() {
    // The second round's callback-mode boot of peermem: 1100 ns at 1000 live instead
    // of 1200, against 1700 at 4194304 live in the same boot.
    let (code, stdout, _, out) = report_of("boot", |log| {
        log.replace(
            "PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,1000,1200\n",
            "PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,1000,1100\n",
        )
    });
    assert_eq!(code, EXIT_FAIL);
    // The medians of the three boots: 1800 ns against 1250 ns, 1.44 x.
    let callback = &stdout[stdout.find("== callback mode ==").unwrap()..];
    assert!(callback.contains("0     1000      1250"), "{callback}");
    assert!(callback.contains("0  4194304      1800"), "{callback}");
    assert!(
        callback.contains(
            "FAIL  scaling: peermem op_ns at 4194304 live <= 1.5 x at 1000 live of the same \
             boot, every boot above 100000 live: 1.44, 1.55, 1.42 in 3 boots (worst 1.55)"
        ),
        "{callback}"
    );
    assert!(callback.contains(
        "PASS  scaling: peermem op_ns at 2097152 live <= 1.5 x at 1000 live of the same boot, \
         every boot above 100000 live: 1.36, 1.50, 1.35 in 3 boots (worst 1.50)"
    ));
    assert!(stdout.contains("Both modes: 51/52 targets passed"));
    let _ = std::fs::remove_dir_all(out.parent().unwrap());

    // A boot that measured above 100000 live but not the point: not measured.
    let (code, stdout, _, out) = report_of("point", |log| {
        let point = "PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,4194304,1850\n";
        log.lines()
            .filter(|l| !format!("{l}\n").ends_with(point))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    assert_eq!(code, EXIT_FAIL);
    assert!(
        stdout.contains("every boot above 100000 live: not measured (live=4194304 in boot 3 of 3)"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}

#[test]
fn a_pair_within_the_reference_but_not_within_10_percent_of_the_floor_fails() {
    // The callback-mode floor's 64 KiB pair without pin cost 15 % faster in every turn.
    let floor = "PEERMEM-BENCH,floor,latency,op_mean_ns,65536,0,0,";
    let (code, stdout, _, out) = report_of("floor", |log| {
        let faster = |l: &str| match l.split_once(floor) {
            Some((at, v)) => format!("{at}{floor}{:.1}", v.parse::<f64>().unwrap() * 0.85),
            None => l.to_string(),
        };
        log.lines().map(|l| faster(l) + "\n").collect()
    });
    assert_eq!(code, EXIT_FAIL);
    let callback = &stdout[stdout.find("== callback mode ==").unwrap()..];
    for line in [
        "FAIL  64 KiB latency op_mean_ns, 0 us pin cost: peermem <= 1 x reference, <= 1.1 x \
         floor: peermem 1927.80 ns: 0.918 x reference (2100 ns), 1.271 x floor (1517.20 ns)",
        "FAIL  64 KiB latency op_mean_ns, 0 us pin cost: peermem <= 1 x reference, <= 1.1 x \
         floor (turn by turn): 0.900 x reference, 1.246 x floor (median over 3 turns); floor \
         0.723 x reference",
    ] {
        assert!(callback.contains(line), "{line}\n{callback}");
    }
    assert!(stdout.contains("Both modes: 50/52 targets passed"));
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}

#[test]
fn a_mode_missing_from_the_log_fails() {
    let (code, stdout, _, out) = report_of("one-mode", |log| {
        let callback = log.lines().filter(|l| !l.contains("-persistent,"));
        callback.map(|l| format!("{l}\n")).collect()
    });
    assert_eq!(code, EXIT_FAIL);
    assert!(
        stdout.contains("FAIL  persistent mode: not measured (no rows)"),
        "{stdout}"
    );
    assert!(stdout.contains("26/26 targets passed"), "{stdout}");
    assert!(
        stdout.contains("Both modes: 26/27 targets passed"),
        "{stdout}"
    );
    assert!(!out.join("persistent").exists());
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}

#[test]
fn no_rows_or_no_log_exits_2() {
    let (code, stdout, stderr, out) = report_of("bad", |_| "[    1.0] Linux booted\n".into());
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(stdout.is_empty());
    assert!(stderr.contains("no PEERMEM-BENCH rows"), "{stderr}");
    assert!(!out.exists());
    let missing = out.with_file_name("missing.log");
    let (code, _, stderr) = run_args(&[missing.to_str().unwrap()]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(stderr.contains("missing.log"));
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}

#[test]
fn bad_usage_exits_2_and_help_and_version_exit_0() {
    for args in [
        &[][..],
        &["a.log", "b.log"],
        &["--bogus", "a.log"],
        &["a.log", "--out"],
    ] {
        let (code, stdout, stderr) = run_args(args);
        assert_eq!(code, EXIT_BAD_INPUT, "{args:?}");
        assert!(stdout.is_empty(), "{args:?}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    }
    let (code, stdout, _) = run_args(&["--help"]);
    assert_eq!(code, EXIT_PASS);
    assert!(
        stdout.contains("Usage: bench-report [OPTIONS] <LOG>"),
        "{stdout}"
    );
    assert!(stdout.contains("--out <DIR>"), "{stdout}");
    let (code, stdout, _) = run_args(&["--version"]);
    assert_eq!(code, EXIT_PASS);
    assert_eq!(
        stdout,
        format!("bench-report {}\n", env!("CARGO_PKG_VERSION"))
    );
}
