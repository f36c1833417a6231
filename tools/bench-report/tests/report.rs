// SPDX-License-Identifier: GPL-2.0 OR MIT

//! End-to-end runs of `bench-report` on the recorded console log.

use std::path::{Path, PathBuf};

use bench_report::{png, run, EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/console.log");

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bench-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn report(log: &Path, out: &Path) -> (i32, String, String) {
    let args = vec![
        log.display().to_string(),
        "--out".to_string(),
        out.display().to_string(),
    ];
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let code = run(&args, &mut o, &mut e);
    (
        code,
        String::from_utf8(o).unwrap(),
        String::from_utf8(e).unwrap(),
    )
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[test]
fn fixture_passes_every_target_and_writes_outputs() {
    let out = scratch("pass");
    let (code, stdout, stderr) = report(Path::new(FIXTURE), &out);
    assert_eq!(code, EXIT_PASS, "{stdout}\n{stderr}");
    // The truncated row is reported, with its line number.
    assert!(
        stderr.contains("console.log:98: ignored malformed row"),
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
    assert!(stdout.contains("10/10 targets passed"));

    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    // 6 configurations x 2 strategies x 7 metrics, + 4 reg_max_ns, + 2 reuse,
    // + 6 scaling, + 12 memory.
    assert_eq!(lines.len(), 1 + 84 + 4 + 2 + 6 + 12);
    assert_eq!(
        lines[0],
        "strategy,group,metric,size_bytes,pin_cost_us,live,value"
    );
    assert_eq!(lines[1], "peermem,latency,reg_mean_ns,65536,0,0,4210.5");
    assert!(lines.contains(&"reference,latency,reg_max_ns,65536,50,0,337512"));
    assert_eq!(
        lines[lines.len() - 1],
        "reference,memory,bytes_per_reg_module,67108864,0,64,33280"
    );

    for name in ["latency.png", "pins.png", "scaling.png", "sg_memory.png"] {
        let data = std::fs::read(out.join(name)).unwrap();
        assert_eq!(data[..8], png::SIGNATURE, "{name}");
        assert_eq!(&data[12..16], b"IHDR");
        assert_eq!((be32(&data[16..]), be32(&data[20..])), (800, 500), "{name}");
        assert_eq!(
            be32(&data[29..]),
            png::crc32(&[&data[12..29]]),
            "{name} IHDR CRC"
        );
        assert_eq!(&data[data.len() - 8..data.len() - 4], b"IEND");
    }
    let _ = std::fs::remove_dir_all(&out);
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
    assert!(stdout.contains("9/10 targets passed"));
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
    let (mut o, mut e) = (Vec::new(), Vec::new());
    assert_eq!(run(&[], &mut o, &mut e), EXIT_BAD_INPUT);
    assert!(String::from_utf8(e)
        .unwrap()
        .contains("usage: bench-report"));
    let _ = std::fs::remove_dir_all(&dir);
}
