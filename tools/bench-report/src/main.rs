// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `bench-report LOG [--out DIR]`: the peermem benchmark report (`--help`, `--version`).
//!
//! Exit codes: 0 every target PASSes; 1 a target FAILs (or was not measured);
//! 2 bad input (usage, unreadable log, no benchmark rows, outputs not written).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = bench_report::run(&args, &mut std::io::stdout(), &mut std::io::stderr());
    ExitCode::from(code as u8)
}
