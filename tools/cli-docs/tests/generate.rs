// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `cli-docs DIR` writes the manual pages and completions, and they name the tools'
//! subcommands and options.

use std::path::PathBuf;
use std::process::Command;

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cli-docs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn man_pages_and_completions_name_the_subcommands() {
    let dir = scratch();
    let out = Command::new(env!("CARGO_BIN_EXE_cli-docs"))
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8(out.stdout).unwrap();
    let read = |rel: &str| {
        let path = dir.join(rel);
        assert!(
            listed.lines().any(|l| path == std::path::Path::new(l)),
            "{rel} not listed in {listed}"
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"))
    };

    // roff escapes hyphens as \-.
    let man = read("man/peermem.1");
    assert!(man.starts_with(".ie \\n(.g"), "{man}");
    assert!(man.contains(".TH peermem 1"), "{man}");
    assert!(man.contains("peermem\\-status(1)"), "{man}");
    assert!(man.contains("peermem\\-doctor(1)"), "{man}");
    assert!(man.contains("64  bad usage"), "{man}");
    let doctor = read("man/peermem-doctor.1");
    for option in [
        "\\-\\-json",
        "\\-\\-root",
        "\\-\\-nvidia\\-smi\\-output",
        "\\-\\-no\\-nvidia\\-smi",
    ] {
        assert!(doctor.contains(option), "{option}: {doctor}");
    }
    assert!(read("man/peermem-status.1").contains("\\-\\-json"));

    let bash = read("completions/peermem.bash");
    assert!(bash.contains("complete -F _peermem"), "{bash}");
    assert!(bash.contains("status doctor"), "{bash}");
    assert!(bash.contains("--nvidia-smi-output"), "{bash}");
    assert!(read("completions/_peermem").contains("#compdef peermem"));
    assert!(read("completions/peermem.fish").contains("doctor"));

    let bench = read("man/bench-report.1");
    assert!(bench.contains("\\-\\-out"), "{bench}");
    assert!(read("completions/bench-report.bash").contains("--out"));
    let _ = std::fs::remove_dir_all(&dir);
}
