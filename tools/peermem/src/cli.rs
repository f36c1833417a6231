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
    /// One OK/WARN/FAIL/N/A line per check; the last line names the first thing to
    /// fix. Exits 1 if a check FAILs.
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
    },
}
