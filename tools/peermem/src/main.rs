// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem`: inspect the peermem GPUDirect RDMA module and check a host for it.
//!
//! ```text
//! peermem status [--json | --prometheus [--textfile-dir DIR]] [--root DIR]
//! peermem doctor [--json] [--root DIR] [--nvidia-smi-output FILE | --no-nvidia-smi]
//!                [--env FILE] [--verbs-lib LIB] [--require-peer-memory]
//! peermem agent run --module-file FILE [--param N=V]... [--metrics-addr ADDR] [--grace S]
//! peermem agent probe|stop [--module NAME]
//! peermem --version
//! ```
//!
//! Exit codes: 0 success (doctor: no FAIL that counts); 1 doctor found one, or a debugfs file
//! did not parse; 2 the module's debugfs directory is missing; 64 bad usage; 77 a file
//! only root may read (run as root). `status --prometheus` exits 0 where the module's
//! debugfs files cannot be read (missing or root's), printing `peermem_up 0`.
//!
//! The options are defined in `peermem_tool::cli`; `tools/cli-docs` makes the manual
//! pages and shell completions from them.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::Parser;
use peermem_tool::cli::{AgentCmd, Cli, Cmd, Common, EXIT_NOPERM, EXIT_USAGE};
use peermem_tool::{agent, doctor, nvml, nvsmi, status, verbs, Root};

/// The GPU facts for doctor, from wherever the options say: a recorded
/// `nvidia-smi -q` output, else (on the live host) NVML, else `nvidia-smi -q`.
fn gpu_facts(
    file: Option<&Path>,
    skip: bool,
    root: &Root,
) -> Result<Option<nvsmi::Report>, String> {
    if skip {
        return Ok(None);
    }
    if let Some(f) = file {
        return std::fs::read(f)
            .map(|b| Some(nvsmi::parse(&String::from_utf8_lossy(&b))))
            .map_err(|e| format!("{}: {e}", f.display()));
    }
    if let Some(text) = root.read("/nvidia-smi-q.txt") {
        return Ok(Some(nvsmi::parse(&text)));
    }
    if !root.is_live() {
        return Ok(None);
    }
    // NVML is a shared library loaded with dlopen, which a statically linked binary
    // cannot do safely: the library brings the host's libc.so.6 into a process whose
    // libc is the build machine's, and any version difference crashes it (a static
    // build from Debian 12's glibc 2.36 died of SIGFPE on the lent H200 host's Ubuntu
    // 24.04, glibc 2.39). Static builds ask nvidia-smi, a separate process.
    if !cfg!(target_feature = "crt-static") {
        if let Ok(report) = nvml::query() {
            return Ok(Some(report));
        }
    }
    match nvsmi::query("nvidia-smi", nvsmi::TIMEOUT) {
        Ok(text) => Ok(Some(nvsmi::parse(&text))),
        Err(nvsmi::QueryError::NotFound) => Ok(None),
        Err(e) => {
            eprintln!("peermem: {e}; its checks are skipped");
            Ok(None)
        }
    }
}

/// Prometheus text: to standard output, or written atomically into `textfile_dir` as
/// `peermem.prom` (a temporary file there, renamed over it).
fn emit_prometheus(text: &str, textfile_dir: Option<&Path>) -> ExitCode {
    let Some(dir) = textfile_dir else {
        print!("{text}");
        return ExitCode::SUCCESS;
    };
    let tmp = dir.join(format!(".peermem.prom.{}", std::process::id()));
    let done = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, text))
        .and_then(|()| std::fs::rename(&tmp, dir.join("peermem.prom")));
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            eprintln!("peermem: cannot write {}/peermem.prom: {e}", dir.display());
            ExitCode::from(1)
        }
    }
}

fn status(common: &Common, prometheus: bool, textfile_dir: Option<&Path>) -> ExitCode {
    let root = Root::new(&common.root);
    match status::read(&root) {
        Ok(s) => {
            if prometheus {
                let core = status::read_core(&root);
                return emit_prometheus(
                    &status::render_prometheus(&s, status::loaded_module(&root), &core),
                    textfile_dir,
                );
            } else if common.json {
                println!("{}", status::render_json(&s));
            } else {
                print!("{}", status::render_text(&s));
            }
            ExitCode::SUCCESS
        }
        // A textfile collector wants metrics and a cron job that goes on whenever
        // the module is not there to read: `peermem_up 0`, the reason on stderr.
        Err(e) if prometheus && status::prometheus_down(&e) => {
            eprintln!("peermem: {e}");
            let core = status::read_core(&root);
            emit_prometheus(
                &status::render_prometheus_down(status::loaded_module(&root), &core),
                textfile_dir,
            )
        }
        Err(e) => {
            eprintln!("peermem: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn doctor(
    common: &Common,
    smi_file: Option<&Path>,
    no_smi: bool,
    env_file: Option<&Path>,
    verbs_lib: Option<&Path>,
    require_peer_memory: bool,
) -> ExitCode {
    let root = Root::new(&common.root);
    let gpus = match gpu_facts(smi_file, no_smi, &root) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("peermem: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let env = match env_file {
        Some(f) => match std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| doctor::Env::parse(&t))
        {
            Ok(env) => env,
            Err(e) => {
                eprintln!("peermem: --env {}: {e}", f.display());
                return ExitCode::from(EXIT_USAGE);
            }
        },
        None => doctor::Env::current(),
    };
    // libibverbs is loaded with dlopen, which a statically linked build cannot do
    // safely (as NVML, above).
    let nics = match verbs_lib {
        Some(lib) => verbs::probe(&lib.to_string_lossy()),
        None if !root.is_live() => Err(doctor::unprobed(&root)),
        None if cfg!(target_feature = "crt-static") => {
            Err("a statically linked build cannot load libibverbs".to_owned())
        }
        None => verbs::probe(verbs::DEFAULT_LIB),
    };
    let mut report = doctor::run_full(&root, gpus, &env, &nics);
    if require_peer_memory {
        report.require_peer_memory();
    }
    if let Some(why) = doctor::permission_denied(&root) {
        eprintln!("peermem: {why}");
        return ExitCode::from(EXIT_NOPERM);
    }
    if common.json {
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

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout and succeed; every other error is bad usage.
            let _ = e.print();
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(EXIT_USAGE),
            };
        }
    };
    match cli.command {
        Cmd::Status {
            common,
            prometheus,
            textfile_dir,
        } => status(&common, prometheus, textfile_dir.as_deref()),
        Cmd::Doctor {
            common,
            nvidia_smi_output,
            no_nvidia_smi,
            env,
            verbs_lib,
            require_peer_memory,
        } => doctor(
            &common,
            nvidia_smi_output.as_deref(),
            no_nvidia_smi,
            env.as_deref(),
            verbs_lib.as_deref(),
            require_peer_memory,
        ),
        Cmd::Agent(cmd) => ExitCode::from(agent_cmd(cmd)),
    }
}

/// The module `agent run` recorded as this container's ([`agent::OWNED_FILE`]), when it
/// is the one `name` asks for: probe and stop then go by its srcversion too.
fn owned_or(name: &str) -> Option<agent::ModuleFile> {
    agent::read_owned().filter(|m| m.name == name)
}

fn agent_cmd(cmd: AgentCmd) -> u8 {
    match cmd {
        AgentCmd::Run {
            module_file,
            params,
            metrics_addr,
            grace,
            reload_after,
            root,
        } => agent::run(
            &Root::new(root),
            &agent::RunConfig {
                file: module_file,
                params,
                metrics_addr,
                grace: Duration::from_secs(grace),
                interval: Duration::from_secs(1),
                reload_after: Duration::from_secs(reload_after),
            },
        ),
        AgentCmd::Probe { module, root } => {
            let root = Root::new(root);
            let probed = match owned_or(&module) {
                Some(ours) => agent::probe_owned(&root, &ours),
                None => agent::probe(&root, &module),
            };
            match probed {
                Ok(detail) => {
                    println!("{detail}");
                    0
                }
                Err(why) => {
                    println!("not ready: {why}");
                    1
                }
            }
        }
        AgentCmd::Stop {
            module,
            grace,
            root,
        } => {
            let (root, grace) = (Root::new(root), Duration::from_secs(grace));
            let unloaded = match owned_or(&module) {
                Some(ours) => agent::unload_owned(&root, &ours, grace),
                None => agent::unload(&root, &module, grace),
            };
            match unloaded {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("peermem agent: {e}");
                    1
                }
            }
        }
    }
}
