// SPDX-License-Identifier: GPL-2.0 OR MIT

//! End-to-end runs of `bench-report` on the recorded console log.

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

fn report(log: &Path, out: &Path) -> (i32, String, String) {
    let (log, out) = (log.display().to_string(), out.display().to_string());
    run_args(&[&log, "--out", &out])
}

/// Decodes a PNG file (checksums included): its size and RGB pixels.
fn decode_png(path: &Path) -> (u32, u32, Vec<u8>) {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader
        .next_frame(&mut pixels)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        (frame.color_type, frame.bit_depth),
        (png::ColorType::Rgb, png::BitDepth::Eight),
        "{}",
        path.display()
    );
    pixels.truncate(frame.buffer_size());
    (frame.width, frame.height, pixels)
}

#[test]
fn fixture_passes_every_target_and_writes_outputs() {
    let out = scratch("pass");
    let (code, stdout, stderr) = report(Path::new(FIXTURE), &out);
    assert_eq!(code, EXIT_PASS, "{stdout}\n{stderr}");
    // The truncated row is reported, with its line number.
    assert!(
        stderr.contains("console.log:122: ignored malformed row"),
        "{stderr}"
    );
    let line = |start: &str| {
        let want: Vec<&str> = start.split_whitespace().collect();
        stdout
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|cells| cells.starts_with(&want))
            .unwrap_or_else(|| panic!("no line {start}"))
    };
    assert_eq!(
        line("latency  reg_mean_ns    64 MiB  50"),
        [
            "latency",
            "reg_mean_ns",
            "64",
            "MiB",
            "50",
            "0",
            "236020.80",
            "1010245.10",
            "0.234"
        ]
    );
    assert_eq!(line("reuse")[4..], ["0", "1", "0", "2", "0.000"]);
    assert!(stdout.contains("PASS  SG entries at 64 MiB: peermem <= 1/100 of reference: peermem 4 entries vs reference 1024 entries: ratio 0.004 (limit 0.01)"));
    assert!(stdout.contains("PASS  scaling: peermem op_ns at 100000 live / at 1000 live <= 2: 7402.30 ns / 5120.40 ns = 1.45"));
    assert!(stdout.contains("PASS  0 us pin cost, 64 KiB: peermem op_p99_ns (register+deregister) <= 1 x reference: peermem 8210.50 ns vs reference 15373.30 ns: ratio 0.534 (limit 1)"), "{stdout}");
    assert!(stdout.contains("PASS  scaling: peermem op_ns at 2097152 live / at 1000 live <= 1.5: 7650.20 ns / 5120.40 ns = 1.49"), "{stdout}");
    assert!(
        stdout.contains(
            "PASS  module bytes per live registration at 64 KiB: peermem <= 256 B: peermem 248 B"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "PASS  module bytes per live registration at 64 KiB: peermem <= 320 B: peermem 248 B"
        ),
        "{stdout}"
    );
    // Each mode has its section, persistent (the default) first; only callback mode has
    // the reuse target.
    let persistent = stdout
        .find("== persistent mode ==")
        .expect("persistent section");
    let callback = stdout
        .find("== callback mode ==")
        .expect("callback section");
    assert!(persistent < callback);
    assert!(stdout.contains("Targets (persistent mode):"));
    assert!(!stdout[..callback].contains("reuse"));
    assert!(stdout.contains("22/22 targets passed"));
    assert!(stdout.contains("23/23 targets passed"));
    assert!(stdout.contains("Both modes: 45/45 targets passed"));
    assert!(stdout.contains("PASS  64 GiB registration: peermem module memory <= 1/100 of reference: peermem 4096 B vs reference 33619968 B"), "{stdout}");

    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    // 6 configurations x 2 strategies x 9 metrics, + 4 reg_max_ns, + 2 reuse,
    // + 8 scaling, + 12 memory, + 2 huge, + 1 floor.
    assert_eq!(lines.len(), 1 + 108 + 4 + 2 + 8 + 12 + 2 + 1);
    assert_eq!(
        lines[0],
        "strategy,group,metric,size_bytes,pin_cost_us,live,value"
    );
    assert_eq!(lines[1], "peermem,latency,reg_mean_ns,65536,0,0,4210.5");
    assert!(lines.contains(&"reference,latency,reg_max_ns,65536,50,0,337512"));
    assert_eq!(
        lines[lines.len() - 1],
        "floor,latency,op_mean_ns,67108864,50,0,336770.5"
    );
    // Persistent mode's outputs in their own folder, the rows named as printed.
    let csv = std::fs::read_to_string(out.join("persistent/results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 108 + 4 + 8 + 12 + 2 + 1);
    assert_eq!(
        lines[1],
        "peermem-persistent,latency,reg_mean_ns,65536,0,0,4210.5"
    );
    assert!(out.join("persistent/pairs.png").exists());

    for name in [
        "latency.png",
        "pairs.png",
        "pins.png",
        "scaling.png",
        "sg_memory.png",
    ] {
        let (w, h, pixels) = decode_png(&out.join(name));
        assert_eq!((w, h), (WIDTH, HEIGHT), "{name}");
        // Both series are drawn in their colours (bars or lines, and the legend).
        for c in [PEERMEM, REFERENCE] {
            let rgb = [c.0, c.1, c.2];
            let n = pixels.chunks(3).filter(|p| *p == rgb).count();
            assert!(n > 500, "{name}: {n} pixels of {rgb:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_floor_is_printed_and_drawn() {
    let dir = scratch("floor");
    let fixture = std::fs::read_to_string(FIXTURE).unwrap();
    // The floor at each latency configuration: 0.9 x the reference's pair.
    let mut log = fixture.clone();
    for line in fixture.lines() {
        let Some(row) = line
            .split("PEERMEM-BENCH,reference,latency,op_mean_ns,")
            .nth(1)
        else {
            continue;
        };
        let (key, value) = row.rsplit_once(',').unwrap();
        let value: f64 = value.parse().unwrap();
        log.push_str(&format!(
            "PEERMEM-BENCH,floor,latency,op_mean_ns,{key},{:.1}\n",
            value * 0.9
        ));
    }
    let path = dir.join("console.log");
    std::fs::write(&path, log).unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = report(&path, &out);
    assert_eq!(code, EXIT_PASS, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("\nFloor (one pin and nothing of its own"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "\n0 us pin cost, 64 KiB, op_mean_ns <= 1 x reference: floor 10643 ns = 0.900 x \
             reference: leaves 1183 ns to a client's own work"
        ),
        "{stdout}"
    );
    // The floor's bars and legend in pairs.png; none in a plot without it.
    let floor_pixels = |name: &str| {
        let (_, _, pixels) = decode_png(&out.join(name));
        let rgb = [FLOOR.0, FLOOR.1, FLOOR.2];
        pixels.chunks(3).filter(|p| *p == rgb).count()
    };
    assert!(floor_pixels("pairs.png") > 500);
    assert_eq!(floor_pixels("latency.png"), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missed_target_exits_1() {
    let dir = scratch("fail");
    let log = std::fs::read_to_string(FIXTURE).unwrap().replace(
        "PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,100000,7402.3",
        "PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,100000,10250.0",
    );
    let path = dir.join("console.log");
    std::fs::write(&path, log).unwrap();
    let (code, stdout, _) = report(&path, &dir.join("out"));
    assert_eq!(code, EXIT_FAIL);
    assert!(stdout.contains("FAIL  scaling: peermem op_ns at 100000 live / at 1000 live <= 2: 10250 ns / 5120.40 ns = 2.00"), "{stdout}");
    assert!(stdout.contains("22/23 targets passed"));
    assert!(stdout.contains("Both modes: 44/45 targets passed"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_mode_missing_from_the_log_fails() {
    let dir = scratch("one-mode");
    let log: String = std::fs::read_to_string(FIXTURE)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("-persistent,"))
        .map(|l| format!("{l}\n"))
        .collect();
    let path = dir.join("console.log");
    std::fs::write(&path, log).unwrap();
    let (code, stdout, _) = report(&path, &dir.join("out"));
    assert_eq!(code, EXIT_FAIL);
    assert!(
        stdout.contains("FAIL  persistent mode: not measured (no rows)"),
        "{stdout}"
    );
    assert!(stdout.contains("23/23 targets passed"), "{stdout}");
    assert!(
        stdout.contains("Both modes: 23/24 targets passed"),
        "{stdout}"
    );
    assert!(!dir.join("out/persistent").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_rows_or_no_log_exits_2() {
    let dir = scratch("bad");
    let path = dir.join("empty.log");
    std::fs::write(&path, "[    1.0] Linux booted\nno benchmark here\n").unwrap();
    let (code, stdout, stderr) = report(&path, &dir.join("out"));
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(stdout.is_empty());
    assert!(stderr.contains("no PEERMEM-BENCH rows"), "{stderr}");
    assert!(!dir.join("out").exists());
    let (code, _, stderr) = report(&dir.join("missing.log"), &dir.join("out"));
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(stderr.contains("missing.log"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs with `args`: (exit code, stdout, stderr).
fn run_args(args: &[&str]) -> (i32, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let code = run(&args, &mut o, &mut e);
    (
        code,
        String::from_utf8(o).unwrap(),
        String::from_utf8(e).unwrap(),
    )
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
