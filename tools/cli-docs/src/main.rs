// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `cli-docs DIR`: the manual pages and shell completions of the project's
//! command-line tools, generated from their clap definitions (`make cli-docs` writes
//! them into build/cli-docs).
//!
//! - `DIR/man/`: `peermem.1` and a page per subcommand (`peermem-status.1`, ...),
//!   `bench-report.1`;
//! - `DIR/completions/`: bash (`peermem.bash`), zsh (`_peermem`) and fish
//!   (`peermem.fish`) completions, and the same for `bench-report`.
//!
//! It names every file written, one per line.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use clap_complete::Shell;

/// Generates the manual pages and shell completions of the project's tools.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Where the pages (DIR/man) and completions (DIR/completions) go
    dir: PathBuf,
}

/// The shells completions are made for.
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// The tools' command lines.
fn tools() -> Vec<clap::Command> {
    vec![
        peermem_tool::cli::Cli::command(),
        bench_report::Options::command(),
    ]
}

/// Writes every page and completion into `dir`; returns the files, sorted.
fn generate(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let (man, completions) = (dir.join("man"), dir.join("completions"));
    std::fs::create_dir_all(&man)?;
    std::fs::create_dir_all(&completions)?;
    let mut written = Vec::new();
    for cmd in tools() {
        clap_mangen::generate_to(cmd.clone(), &man)?;
        let name = cmd.get_name().to_owned();
        for shell in SHELLS {
            written.push(clap_complete::generate_to(
                shell,
                &mut cmd.clone(),
                &name,
                &completions,
            )?);
        }
    }
    for page in std::fs::read_dir(&man)? {
        written.push(page?.path());
    }
    written.sort();
    Ok(written)
}

fn main() -> ExitCode {
    let args = Args::parse();
    match generate(&args.dir) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cli-docs: {}: {e}", args.dir.display());
            ExitCode::FAILURE
        }
    }
}
