// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The command line: `--version`, `--help`, and bad usage exiting 64.

use std::process::{Command, Output};

fn peermem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_peermem"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn version_is_the_repository_version() {
    for flag in ["--version", "-V"] {
        let out = peermem(&[flag]);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(
            text(&out.stdout),
            format!("peermem {}\n", peermem_tool::peermem_version())
        );
    }
    assert_eq!(
        text(&peermem(&["doctor", "--version"]).stdout),
        format!("peermem-doctor {}\n", peermem_tool::peermem_version())
    );
}

#[test]
fn help_names_the_commands_and_options() {
    let out = peermem(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for word in [
        "status",
        "doctor",
        "Exit status:",
        "64  bad usage",
        "77  permission denied",
    ] {
        assert!(help.contains(word), "{word}: {help}");
    }
    let help = text(&peermem(&["help", "doctor"]).stdout);
    for option in [
        "--json",
        "--root <DIR>",
        "--nvidia-smi-output <FILE>",
        "--no-nvidia-smi",
    ] {
        assert!(help.contains(option), "{option}: {help}");
    }
}

#[test]
fn bad_usage_exits_64() {
    let cases: [&[&str]; 6] = [
        &[],
        &["frobnicate"],
        &["status", "--bogus"],
        &["status", "--root"],
        &["status", "--no-nvidia-smi"],
        &["doctor", "--no-nvidia-smi", "--nvidia-smi-output", "x"],
    ];
    for args in cases {
        let out = peermem(args);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        // No command at all prints the help; everything else an error.
        let err = text(&out.stderr);
        assert!(
            err.starts_with("error: ") || err.contains("Usage: peermem <COMMAND>"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn an_unreadable_nvidia_smi_file_exits_64() {
    let out = peermem(&[
        "doctor",
        "--root",
        "/nonexistent",
        "--nvidia-smi-output",
        "/nonexistent/q.txt",
    ]);
    assert_eq!(out.status.code(), Some(64));
    assert!(text(&out.stderr).starts_with("peermem: /nonexistent/q.txt: "));
}

#[test]
fn options_take_inline_values() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/healthy-h100");
    let out = peermem(&["doctor", &format!("--root={root}")]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).ends_with("verdict: ready\n"));
}
