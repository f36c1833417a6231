// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The command line of `peermem`, as clap definitions: the binary parses it, and
//! `tools/cli-docs` generates the manual pages and shell completions from it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Exit code of bad usage (EX_USAGE), also for an unreadable `--nvidia-smi-output`.
pub const EXIT_USAGE: u8 = 64;

/// Exit code of a file that only root may read (EX_NOPERM): run as root.
pub const EXIT_NOPERM: u8 = 77;

const EXIT_CODES: &str = "\
Exit status:
  0   success (doctor: no check FAILed)
  1   doctor: a check FAILed; status: a debugfs file did not parse
  2   status: the module's debugfs directory is missing
  64  bad usage, or an unreadable --nvidia-smi-output file
  77  permission denied reading a file only root may read: run as root
status --prometheus exits 0 instead of 2 or 77, printing peermem_up 0";

/// Inspect the peermem GPUDirect RDMA module and check a host for it.
#[derive(Debug, Parser)]
#[command(
    name = "peermem",
    version = crate::peermem_version(),
    propagate_version = true,
    subcommand_required = true,
    arg_required_else_help = true,
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Cmd,
}

/// What `status` and `doctor` share.
#[derive(Debug, Args)]
pub struct Common {
    /// Machine-readable output (JSON)
    #[arg(long)]
    pub json: bool,
    /// Read every file under DIR instead of / (recorded trees)
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// The module's live pins and counters (from /sys/kernel/debug/peermem; needs root)
    Status {
        /// `--json`, `--root`.
        #[command(flatten)]
        common: Common,
        /// Prometheus text format for node_exporter's textfile collector: peermem_up,
        /// peermem's counters (peermem_*) and the peer-memory core's (peermem_core_*).
        /// Where the module's debugfs files cannot be read (module not loaded, debugfs
        /// not mounted, not root), peermem_up 0, the reason on stderr, and exit 0
        #[arg(long, conflicts_with = "json")]
        prometheus: bool,
        /// With --prometheus: write DIR/peermem.prom instead of standard output,
        /// atomically (a temporary file in DIR renamed over it), as node_exporter's
        /// textfile collector wants; peermem-metrics.service runs this
        #[arg(long, value_name = "DIR", requires = "prometheus")]
        textfile_dir: Option<PathBuf>,
    },
    /// Checks this host for peermem and GPUDirect RDMA
    ///
    /// One OK/WARN/FAIL/N/A line per check, in the order things depend on each other;
    /// the last line names the first thing to fix. Exits 1 if a check FAILs (where
    /// jobs use dma-buf, a check of the peer-memory path only with
    /// --require-peer-memory).
    Doctor {
        /// `--json`, `--root`.
        #[command(flatten)]
        common: Common,
        /// Use FILE as `nvidia-smi -q` output (default: <root>/nvidia-smi-q.txt if
        /// present, else, when --root is /, NVML (libnvidia-ml.so.1; not in statically
        /// linked builds), else nvidia-smi -q, killed after 10 s)
        #[arg(long, value_name = "FILE", conflicts_with = "no_nvidia_smi")]
        nvidia_smi_output: Option<PathBuf>,
        /// Skip the GPU checks (BAR1, MIG, confidential compute: NVML or nvidia-smi)
        #[arg(long)]
        no_nvidia_smi: bool,
        /// Decide the GPU memory paths (gpu-memory-path) for a job whose environment is
        /// FILE (NAME=VALUE lines, as `env` prints them) instead of this shell's
        #[arg(long, value_name = "FILE")]
        env: Option<PathBuf>,
        /// Probe the NICs' dma-buf support through this libibverbs (default, when
        /// --root is / and the build is not statically linked: libibverbs.so.1)
        #[arg(long, value_name = "LIB")]
        verbs_lib: Option<PathBuf>,
        /// Count the peer-memory checks (the module, its core, its kernel) also where
        /// every library registers GPU memory through dma-buf, which needs no peermem:
        /// for hosts that must serve ibv_reg_mr on GPU memory (perftest, MPI, NCCL's
        /// GIN)
        #[arg(long)]
        require_peer_memory: bool,
    },
    /// The entrypoint of a container that loads peermem into its node's kernel
    /// (a Kubernetes DaemonSet beside the GPU and Network Operators; docs/fleet.md)
    #[command(subcommand)]
    Agent(AgentCmd),
}

/// `peermem agent` subcommands.
#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Waits for the GPU driver and the RDMA peer-memory core, loads the module, loads
    /// it again whenever it leaves the host and they are back, serves /metrics; on
    /// SIGTERM unloads it, retrying while registrations are live (never forced).
    /// Refuses to start (exit 3) where another peer-memory client is loaded
    Run {
        /// The module file to load (its name, version and srcversion are read from it)
        #[arg(long, value_name = "FILE")]
        module_file: PathBuf,
        /// A module parameter, NAME=VALUE (repeatable)
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Serve GET /metrics and /healthz on ADDR (host:port)
        #[arg(long, value_name = "ADDR")]
        metrics_addr: Option<String>,
        /// Seconds an unload is retried after SIGTERM while registrations are live
        #[arg(long, value_name = "SECONDS", default_value_t = 25)]
        grace: u64,
        /// After someone else unloaded the module: seconds to wait for the RDMA core or
        /// the GPU driver to be reloaded (an openibd restart, a driver upgrade) before
        /// loading it again anyway
        #[arg(long, value_name = "SECONDS", default_value_t = 300)]
        reload_after: u64,
        /// Read every file under DIR instead of / (the host's /sys, /proc, /run);
        /// insmod and rmmod still act on the running kernel
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
    },
    /// Readiness and liveness: exit 0 when the module is loaded and registered
    /// (initialised: /sys/module/NAME/initstate is live) and, in the container of
    /// `agent run`, is that agent's own (the srcversion of its module file), else 1
    Probe {
        /// The module's name
        #[arg(long, value_name = "NAME", default_value = "nvidia_peermem")]
        module: String,
        /// Read every file under DIR instead of /
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
    },
    /// The preStop hook: unloads the module, retrying while registrations are live
    /// until the grace period ends (never forced); exit 1 if it is still loaded then.
    /// In the container of `agent run`, a module of that name that is not the agent's
    /// own is left loaded
    Stop {
        /// The module's name
        #[arg(long, value_name = "NAME", default_value = "nvidia_peermem")]
        module: String,
        /// Seconds to retry
        #[arg(long, value_name = "SECONDS", default_value_t = 25)]
        grace: u64,
        /// Read every file under DIR instead of /; rmmod still acts on the running kernel
        #[arg(long, value_name = "DIR", default_value = "/")]
        root: PathBuf,
    },
}
