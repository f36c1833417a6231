// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem`: inspect the peermem GPUDirect RDMA module and check a host for it.
//!
//! ```text
//! peermem status [--json] [--root DIR]
//! peermem doctor [--json] [--root DIR] [--nvidia-smi-output FILE | --no-nvidia-smi]
//! ```
//!
//! Exit codes: 0 success (doctor: no FAIL); 1 doctor found a FAIL, or a debugfs file
//! did not parse; 2 the module's debugfs directory is missing; 64 bad usage.

use std::process::{Command, ExitCode};

use peermem_tool::{doctor, status, Root};

const USAGE: &str = "\
usage: peermem status [--json] [--root DIR]
       peermem doctor [--json] [--root DIR] [--nvidia-smi-output FILE | --no-nvidia-smi]
       peermem --version

status   the module's live pins and counters (from /sys/kernel/debug/peermem; needs root)
doctor   checks this host for peermem and GPUDirect RDMA; the last line names the first
         thing to fix. Exits 1 if a check FAILs.

--root DIR               read every file under DIR instead of / (recorded trees)
--json                   machine-readable output
--nvidia-smi-output FILE use FILE as `nvidia-smi -q` output (default: <root>/nvidia-smi-q.txt
                         if present, else run nvidia-smi -q when --root is /)
--no-nvidia-smi          skip the nvidia-smi checks";

struct Options {
    command: String,
    json: bool,
    root: String,
    smi_file: Option<String>,
    no_smi: bool,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        command: String::new(),
        json: false,
        root: "/".to_owned(),
        smi_file: None,
        no_smi: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag {
            "--json" => o.json = true,
            "--no-nvidia-smi" => o.no_smi = true,
            "--root" => o.root = value("--root")?,
            "--nvidia-smi-output" => o.smi_file = Some(value("--nvidia-smi-output")?),
            "-h" | "--help" => o.command = "help".to_owned(),
            "-V" | "--version" => o.command = "version".to_owned(),
            _ if !a.starts_with('-') && o.command.is_empty() => o.command = a.clone(),
            _ => return Err(format!("unexpected argument `{a}`")),
        }
    }
    if o.command.is_empty() {
        return Err("no command given".to_owned());
    }
    Ok(o)
}

/// `nvidia-smi -q` output for doctor, from wherever the options say.
fn nvidia_smi(o: &Options, root: &Root) -> Result<Option<String>, String> {
    if o.no_smi {
        return Ok(None);
    }
    if let Some(f) = &o.smi_file {
        return std::fs::read(f)
            .map(|b| Some(String::from_utf8_lossy(&b).into_owned()))
            .map_err(|e| format!("{f}: {e}"));
    }
    if let Some(text) = root.read("/nvidia-smi-q.txt") {
        return Ok(Some(text));
    }
    if !root.is_live() {
        return Ok(None);
    }
    Ok(Command::new("nvidia-smi")
        .arg("-q")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse_args(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("peermem: {e}\n{USAGE}");
            return ExitCode::from(64);
        }
    };
    let root = Root::new(&o.root);
    match o.command.as_str() {
        "help" => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        "version" => {
            println!("peermem {}", peermem_tool::peermem_version());
            ExitCode::SUCCESS
        }
        "status" => match status::read(&root) {
            Ok(s) => {
                if o.json {
                    println!("{}", status::render_json(&s));
                } else {
                    print!("{}", status::render_text(&s));
                }
                ExitCode::SUCCESS
            }
            Err(e @ status::StatusError::NoDebugfs { .. }) => {
                eprintln!("peermem: {e}");
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("peermem: {e}");
                ExitCode::from(1)
            }
        },
        "doctor" => {
            let smi = match nvidia_smi(&o, &root) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("peermem: {e}");
                    return ExitCode::from(64);
                }
            };
            let report = doctor::run(&root, smi.as_deref());
            if o.json {
                println!("{}", report.render_json());
            } else {
                print!("{}", report.render_text());
            }
            if report.ready() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        other => {
            eprintln!("peermem: unknown command `{other}`\n{USAGE}");
            ExitCode::from(64)
        }
    }
}
