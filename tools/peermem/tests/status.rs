// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem status`: parsing the module's debugfs files, rendering, exit codes.

mod common;

use common::{fixture, keys, parse};
use peermem_tool::status::{self, Pin, Status, StatusError, Value, KNOWN_STATS};
use peermem_tool::Root;
use serde_json::json;

/// `s` rendered as JSON, parsed, after asserting its top level: `schema_version`
/// (peermem_tool::JSON_SCHEMA_VERSION, which is 1), `pins`, `stats`, in that order.
#[track_caller]
fn json_of(s: &Status) -> serde_json::Value {
    let v = parse(&status::render_json(s));
    assert_eq!(keys(&v), ["schema_version", "pins", "stats"]);
    assert_eq!(
        v["schema_version"],
        json!(peermem_tool::JSON_SCHEMA_VERSION)
    );
    assert_eq!(v["schema_version"], json!(1));
    v
}

#[test]
fn parses_live_pins_and_counters() {
    let s = status::read(&Root::new(fixture("healthy-dev-vm"))).unwrap();
    assert_eq!(
        s.pins,
        vec![
            Pin {
                id: 7,
                tgid: 1234,
                mode: "callback".into(),
                start: 0x7f00_0000_0000,
                end: 0x7f00_0010_0000,
                bytes: 1_048_576,
                users: 2,
                state: "live".into(),
                space: None,
            },
            Pin {
                id: 9,
                tgid: 1250,
                mode: "persistent".into(),
                start: 0x7f20_0000_0000,
                end: 0x7f20_0020_0000,
                bytes: 2_097_152,
                users: 1,
                state: "freed".into(),
                space: None,
            },
        ]
    );
    assert_eq!(s.stats.entries.len(), 16);
    assert_eq!(s.stats.get("registrations"), Some(3));
    assert_eq!(s.stats.get("pin_reuses"), Some(1));
    assert_eq!(s.stats.get("bytes_pinned_peak"), Some(4_194_304));
    assert_eq!(s.stats.get("refused_no_memory"), Some(0));
    assert_eq!(s.stats.unknown().count(), 0);
}

#[test]
fn empty_pins_is_header_only() {
    let s = status::read(&Root::new(fixture("status-empty"))).unwrap();
    assert!(s.pins.is_empty());
    assert_eq!(s.stats.get("pins_now"), Some(0));
    let text = status::render_text(&s);
    assert!(text.starts_with("peermem: 0 live pins, 0 B pinned (peak 0 B)\n\nno pins\n"));
    let v = json_of(&s);
    assert_eq!(v["pins"], json!([]));
    // Every counter the module writes, in its order, as numbers.
    assert_eq!(keys(&v["stats"]), KNOWN_STATS);
    for name in KNOWN_STATS {
        assert_eq!(v["stats"][name], json!(0), "{name}");
    }
}

#[test]
fn unknown_counters_are_kept_in_order() {
    let s = status::read(&Root::new(fixture("status-unknown-counter"))).unwrap();
    let names: Vec<&str> = s.stats.entries.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "registrations",
            "pins",
            "bytes_pinned_now",
            "refused_bar1_exhausted",
            "future_counter",
            "refused_new_reason"
        ]
    );
    assert_eq!(s.stats.get("future_counter"), Some(17));
    assert_eq!(
        s.stats.unknown().collect::<Vec<_>>(),
        ["future_counter", "refused_new_reason"]
    );
    let text = status::render_text(&s);
    assert!(text.contains("  future_counter          17\n"), "{text}");
    assert!(text.contains("2 registration(s) refused because GPU BAR1 space ran out"));
    let v = parse(&status::render_json(&s));
    let names: Vec<&str> = s.stats.entries.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(keys(&v["stats"]), names);
    assert_eq!(v["stats"]["future_counter"], json!(17));
    assert_eq!(v["stats"]["refused_new_reason"], json!(1));
}

#[test]
fn non_numeric_values_are_kept_as_text() {
    let s = status::parse_stats("registrations 1\nmode callback\n\n# comment\n").unwrap();
    assert_eq!(
        s.entries[1],
        ("mode".to_owned(), Value::Text("callback".into()))
    );
    assert_eq!(s.get("mode"), None);
    let v = parse(&status::render_json(&status::Status {
        pins: vec![],
        stats: s,
    }));
    assert_eq!(keys(&v["stats"]), ["registrations", "mode"]);
    assert_eq!(v["stats"]["registrations"], json!(1));
    assert_eq!(v["stats"]["mode"], json!("callback"));
}

#[test]
fn malformed_lines_are_reported_with_their_line() {
    match status::read(&Root::new(fixture("status-bad-pins"))) {
        Err(StatusError::Parse(e)) => {
            assert_eq!(e.file, "pins");
            assert_eq!(e.line, 2);
            assert!(e.what.contains("expected 8 or 9 fields"), "{}", e.what);
        }
        other => panic!("{other:?}"),
    }
    let e = status::parse_stats("registrations\n").unwrap_err();
    assert_eq!((e.file, e.line), ("stats", 1));
    let e = status::parse_pins("1 2 callback 0xzz 0x10 16 1 live\n").unwrap_err();
    assert!(e.what.contains("start `0xzz` is not a number"));
}

#[test]
fn text_table_shows_pins() {
    let s = status::read(&Root::new(fixture("healthy-dev-vm"))).unwrap();
    let text = status::render_text(&s);
    assert!(text.starts_with("peermem: 2 live pins, 3.0 MiB pinned (peak 4.0 MiB)\n"));
    assert!(text.contains("     7     1234  -                 callback   0x7f0000000000     0x7f0000100000          1.0 MiB     2  live\n"), "{text}");
    assert!(text.contains("  registrations           3\n"), "{text}");
}

#[test]
fn json_has_pins_and_stats() {
    let s = status::read(&Root::new(fixture("healthy-dev-vm"))).unwrap();
    let v = json_of(&s);
    let pins = v["pins"].as_array().unwrap();
    assert_eq!(pins.len(), 2);
    // Addresses are hex strings; a pin without an address space has "".
    assert_eq!(
        keys(&pins[0]),
        ["id", "tgid", "mode", "start", "end", "bytes", "users", "state", "space"]
    );
    assert_eq!(
        pins[0],
        json!({"id": 7, "tgid": 1234, "mode": "callback", "start": "0x7f0000000000",
               "end": "0x7f0000100000", "bytes": 1048576, "users": 2, "state": "live",
               "space": ""})
    );
    assert_eq!(pins[1]["id"], json!(9));
    assert_eq!(pins[1]["state"], json!("freed"));
    assert_eq!(keys(&v["stats"])[..2], ["registrations", "releases"]);
    assert_eq!(v["stats"]["registrations"], json!(3));
    assert_eq!(v["stats"]["releases"], json!(1));
}

#[test]
fn json_shows_the_address_space() {
    let pins =
        status::parse_pins("3 77 callback 0x10000 0x30000 131072 2 live 00a1b2c3\n").unwrap();
    let v = parse(&status::render_json(&status::Status {
        pins,
        stats: Default::default(),
    }));
    assert_eq!(v["pins"][0]["space"], json!("00a1b2c3"));
    assert_eq!(v["pins"][0]["start"], json!("0x10000"));
    assert_eq!(v["stats"], json!({}));
}

#[test]
fn missing_debugfs_dir() {
    match status::read(&Root::new(fixture("status-no-debugfs"))) {
        Err(
            e @ StatusError::NoDebugfs {
                debugfs_mounted: false,
            },
        ) => {
            assert!(e
                .to_string()
                .contains("mount -t debugfs none /sys/kernel/debug"));
        }
        other => panic!("{other:?}"),
    }
    // debugfs mounted (other entries there) but no peermem directory.
    match status::read(&Root::new(fixture("nvidia-own-peermem"))) {
        Err(
            e @ StatusError::NoDebugfs {
                debugfs_mounted: true,
            },
        ) => {
            assert!(e.to_string().contains("not loaded"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn binary_exit_codes() {
    let bin = env!("CARGO_BIN_EXE_peermem");
    let run = |case: &str, json: bool| {
        let mut c = std::process::Command::new(bin);
        c.arg("status").arg("--root").arg(fixture(case));
        if json {
            c.arg("--json");
        }
        c.output().unwrap()
    };
    let missing = run("status-no-debugfs", false);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("debugfs is not mounted"));
    let ok = run("status-empty", true);
    assert_eq!(ok.status.code(), Some(0));
    let v = parse(&String::from_utf8_lossy(&ok.stdout));
    assert_eq!(keys(&v), ["schema_version", "pins", "stats"]);
    assert_eq!(v["schema_version"], json!(1));
    assert_eq!(v["pins"], json!([]));
    assert_eq!(v["stats"]["pins_now"], json!(0));
    assert_eq!(run("status-bad-pins", false).status.code(), Some(1));
}

#[test]
fn the_address_space_column_is_read_when_present() {
    let text = "# id tgid mode start end bytes users state space\n\
                3 77 callback 0x7f0000000000 0x7f0000020000 131072 2 live 00a1b2c3d4e5f607\n";
    let pins = peermem_tool::status::parse_pins(text).expect("parses");
    assert_eq!(pins.len(), 1);
    assert_eq!(pins[0].space.as_deref(), Some("00a1b2c3d4e5f607"));
    assert_eq!(pins[0].users, 2);
    // Ten fields is not a format the module writes.
    assert!(
        peermem_tool::status::parse_pins(&format!("{} extra\n", text.lines().nth(1).unwrap()))
            .is_err()
    );
}

/// As a user other than root, debugfs (mode 0700) cannot be entered: that is
/// "run as root", not "debugfs is not mounted". The error is injected through the
/// root, so the test also runs as root.
#[test]
fn permission_denied_is_not_a_missing_module() {
    let root = Root::new(fixture("healthy-dev-vm")).deny("/sys/kernel/debug");
    match status::read(&root) {
        Err(e @ StatusError::PermissionDenied { .. }) => {
            assert_eq!(e.exit_code(), 77);
            let text = e.to_string();
            assert!(
                text.starts_with("permission denied reading /sys/kernel/debug/peermem:"),
                "{text}"
            );
            assert!(text.contains("run peermem status as root"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // Only the files denied: the directory is there, its files are not readable.
    let root = Root::new(fixture("healthy-dev-vm")).deny("/sys/kernel/debug/peermem/stats");
    match status::read(&root) {
        Err(StatusError::PermissionDenied { path }) => {
            assert_eq!(path, "/sys/kernel/debug/peermem/stats");
        }
        other => panic!("{other:?}"),
    }
    // The other errors keep their exit codes.
    let missing = status::read(&Root::new(fixture("status-no-debugfs"))).unwrap_err();
    assert_eq!(missing.exit_code(), 2);
    let bad = status::read(&Root::new(fixture("status-bad-pins"))).unwrap_err();
    assert_eq!(bad.exit_code(), 1);
}

/// The binary as a user other than root on a tree whose debugfs is mode 000 (exit 77;
/// with --prometheus, `peermem_up 0` and exit 0): as root, through setpriv (util-linux) to uid/gid 65534; skipped where neither works.
#[test]
fn binary_exits_77_without_permission() {
    let Some(argv) = unprivileged() else {
        eprintln!("skipped: running as root and no setpriv to drop privileges");
        return;
    };
    let dir = std::env::temp_dir().join(format!("peermem-status-noperm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let debug = dir.join("sys/kernel/debug/peermem");
    std::fs::create_dir_all(&debug).unwrap();
    std::fs::write(debug.join("stats"), "pins_now 0\n").unwrap();
    std::fs::write(
        debug.join("pins"),
        "# id tgid mode start end bytes users state\n",
    )
    .unwrap();
    let mode = |p: &std::path::Path, m: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    mode(&dir.join("sys/kernel/debug"), 0o000);
    let as_user = |args: &[&str]| {
        std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .args(args)
            .output()
            .unwrap()
    };
    let out = as_user(&["status", "--root", dir.to_str().unwrap()]);
    let doctor = as_user(&["doctor", "--no-nvidia-smi", "--root", dir.to_str().unwrap()]);
    let prometheus = as_user(&["status", "--prometheus", "--root", dir.to_str().unwrap()]);
    mode(&dir.join("sys/kernel/debug"), 0o755);
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{stderr}");
    assert!(
        stderr.contains("permission denied reading /sys/kernel/debug/peermem"),
        "{stderr}"
    );
    assert!(!stderr.contains("not mounted"), "{stderr}");
    let stderr = String::from_utf8_lossy(&doctor.stderr);
    assert_eq!(doctor.status.code(), Some(77), "{stderr}");
    assert!(stderr.contains("run it as root"), "{stderr}");
    assert!(doctor.stdout.is_empty());
    // --prometheus: peermem_up 0 and exit 0, the same reason on stderr.
    let stderr = String::from_utf8_lossy(&prometheus.stderr);
    assert_eq!(prometheus.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("permission denied reading /sys/kernel/debug/peermem"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&prometheus.stdout).ends_with("\npeermem_up 0\n"));
}

/// The command line that runs the binary as a user other than root (the binary
/// itself, or setpriv and the binary), if there is one.
fn unprivileged() -> Option<Vec<String>> {
    let bin = env!("CARGO_BIN_EXE_peermem").to_owned();
    let uid = std::process::Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some(vec![bin]);
    }
    let argv: Vec<String> = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([bin])
    .collect();
    let works = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    works.then_some(argv)
}
