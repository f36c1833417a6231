// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `bench-report`: turns the peermem benchmark's console log (the `PEERMEM-BENCH` rows
//! of peermem, the reference and the floor, tests/bench) into a report: it [`parse`]s
//! the rows, prints a comparison table and the [`report`] targets (PASS/FAIL) of each
//! mode, and writes `results.csv` and five PNG [`plot`]s.

pub mod parse;
pub mod plot;
pub mod report;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::Parser;

/// Exit code: every target passed.
pub const EXIT_PASS: i32 = 0;
/// Exit code: a target failed or was not measured.
pub const EXIT_FAIL: i32 = 1;
/// Exit code: bad usage, unreadable log, no rows, or outputs not written.
pub const EXIT_BAD_INPUT: i32 = 2;

const EXIT_CODES: &str = "\
Exit status:
  0  every target PASSes
  1  a target FAILs or was not measured
  2  bad usage, unreadable log, no PEERMEM-BENCH rows, or outputs not written";

/// Turns the peermem benchmark's console log into a table, PASS/FAIL targets, a CSV
/// and PNG plots.
#[derive(Debug, PartialEq, Parser)]
#[command(name = "bench-report", version, after_help = EXIT_CODES)]
pub struct Options {
    /// The console log (PEERMEM-BENCH rows among other output)
    pub log: PathBuf,
    /// Where results.csv and the plots go
    #[arg(long, value_name = "DIR", default_value = "docs/bench")]
    pub out: PathBuf,
}

/// Parses the arguments (without the program name).
pub fn parse_args(args: &[String]) -> Result<Options, clap::Error> {
    Options::try_parse_from(std::iter::once("bench-report").chain(args.iter().map(String::as_str)))
}

/// Writes `results.csv` and the plots into `dir`; returns the paths written.
pub fn write_outputs(results: &parse::Results, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let csv = dir.join("results.csv");
    std::fs::write(&csv, report::csv(results))?;
    let mut written = vec![csv];
    let plots: [(&str, plot::Plot); 5] = [
        ("latency.png", plot::latency),
        ("pairs.png", plot::pairs),
        ("pins.png", plot::pins),
        ("scaling.png", plot::scaling),
        ("sg_memory.png", plot::sg_memory),
    ];
    for (name, draw) in plots {
        let path = dir.join(name);
        plot::write_png(draw, results, &path)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        written.push(path);
    }
    Ok(written)
}

/// Runs the whole report; returns the exit code.
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let opts = match parse_args(args) {
        Ok(o) => o,
        // --help and --version.
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = write!(out, "{e}");
            return EXIT_PASS;
        }
        Err(e) => {
            let _ = write!(err, "{e}");
            return EXIT_BAD_INPUT;
        }
    };
    let bytes = match std::fs::read(&opts.log) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(err, "bench-report: {}: {e}", opts.log.display());
            return EXIT_BAD_INPUT;
        }
    };
    // Serial consoles can carry stray non-UTF-8 bytes.
    let parsed = parse::parse_log(&String::from_utf8_lossy(&bytes));
    for (line, reason) in &parsed.rejected {
        let _ = writeln!(
            err,
            "bench-report: {}:{line}: ignored malformed row: {reason}",
            opts.log.display()
        );
    }
    if parsed.rows.is_empty() {
        let _ = writeln!(
            err,
            "bench-report: {}: no {} rows",
            opts.log.display(),
            parse::MARKER.trim_end_matches(',')
        );
        return EXIT_BAD_INPUT;
    }
    // Each mode on its own: its table, targets and outputs (callback mode in DIR,
    // persistent mode, the default, in DIR/persistent). A mode the log lacks FAILs.
    let (mut targets, mut written) = (Vec::new(), Vec::new());
    for mode in parse::Mode::ALL {
        let mut rows = parsed.rows.clone();
        rows.retain(|r| r.mode == mode);
        let name = mode.as_str();
        let _ = writeln!(out, "== {name} mode ==\n");
        if rows.is_empty() {
            let t = report::Target::missing(format!("{name} mode"), "no rows");
            let _ = writeln!(out, "{}", report::format_targets(std::slice::from_ref(&t)));
            targets.push(t);
            continue;
        }
        let results = parse::Results::new(rows);
        let mode_targets = report::evaluate(&results, mode);
        let table = report::table(&results);
        let list = report::format_targets(&mode_targets);
        let _ = writeln!(out, "{table}\nTargets ({name} mode):\n{list}");
        let dir = match mode {
            parse::Mode::Callback => opts.out.clone(),
            parse::Mode::Persistent => opts.out.join("persistent"),
        };
        match write_outputs(&results, &dir) {
            Ok(paths) => written.extend(paths),
            Err(e) => {
                let _ = writeln!(err, "bench-report: writing {}: {e}", dir.display());
                return EXIT_BAD_INPUT;
            }
        }
        targets.extend(mode_targets);
    }
    let passed = targets.iter().filter(|t| t.pass).count();
    let _ = writeln!(out, "Both modes: {passed}/{} targets passed", targets.len());
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    let _ = writeln!(out, "\nwrote {}", names.join(", "));
    if targets.iter().all(|t| t.pass) {
        EXIT_PASS
    } else {
        EXIT_FAIL
    }
}
