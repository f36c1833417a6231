// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem doctor`: is this host ready for peermem and for applications to use it?
//!
//! Each check reads files under a [`Root`] (plus, optionally, GPU facts from NVML or
//! `nvidia-smi -q`) and gives one [`Verdict`]. The report names the first thing to
//! fix, by its id: checks run in the order things depend on each other (the kernel,
//! the GPU driver, the RDMA core, then the module over them, then the platform).
//! Where every library registers GPU memory through dma-buf, the checks that only the
//! peer-memory path needs ([`Check::peer_memory`]) do not count unless asked
//! ([`Report::require_peer_memory`]): the host is ready without peermem.

mod gpu;
mod kernel;
mod logs;
mod modversions;
mod path;
mod pcie;
mod rdma;
mod toolchain;

pub use gpu::is_geforce;
pub use kernel::{
    module_externs, release_version, rust_build_files, rust_crate_file, supported_kernels,
    supported_list, Config, RUST_BUILD_FILES, RUST_CRATES, SUPPORTED_KERNELS_FILE, TARGET_JSON,
};
pub use logs::{kernel_log, DMESG_FILE};
pub use modversions::{modinfo_field, module_crcs, module_image, symvers_crc, symvers_exporter};
pub use pcie::{acs_control, acs_flags, acs_redirects, Acs, Level, ACS_CAP_ID};
pub use toolchain::toolchain_in;

use std::fmt::{self, Write};

use serde::{Serialize, Serializer};

use crate::nvsmi;
use crate::status::DEBUGFS_DIR;
use crate::version::DriverVersion;
use crate::{peermem_version, Root};
pub use path::{Decision, Env, NicAnswers, Path as GpuPath, ENV_VARS};

/// A check's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Fine.
    Ok,
    /// Works, but something deserves attention.
    Warn,
    /// peermem (or GPUDirect RDMA) cannot work until this is fixed.
    Fail,
    /// Could not be checked here (no data).
    NotApplicable,
}

impl Verdict {
    /// The word printed for it.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Ok => "OK",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
            Verdict::NotApplicable => "N/A",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// In JSON, the printed word (`"OK"`, `"WARN"`, `"FAIL"`, `"N/A"`).
impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.word())
    }
}

/// One check's result; in JSON,
/// `{"id":..,"verdict":..,"detail":..,"fix":..|null,"peer_memory":..}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// A stable identifier (`kernel-rust`, `nvidia-driver`, ...), one of [`CHECK_IDS`].
    pub id: &'static str,
    /// The verdict.
    pub verdict: Verdict,
    /// What was found, and how it was decided.
    pub detail: String,
    /// What to do about it (for WARN and FAIL).
    pub fix: Option<String>,
    /// Only the peer-memory path needs this (peermem, its build, its core): on a host
    /// whose jobs register GPU memory through dma-buf it does not count.
    pub peer_memory: bool,
}

/// Every check's id, in the order the checks run, with whether only the peer-memory
/// path needs it (the kernel's Rust support and release, the persistent pin API, the
/// peer-memory core and everything about the module are peermem's; the GPU driver,
/// the HCA and the platform are GPUDirect RDMA's, whichever path it takes).
pub const CHECK_IDS: [(&str, bool); 25] = [
    ("kernel-rust", true),
    ("kernel-release", true),
    ("nvidia-driver", false),
    ("driver-version", false),
    ("persistent-api", true),
    ("gpu-product", false),
    ("peer-memory-core", true),
    ("hca", false),
    ("module-file", true),
    ("peermem-module", true),
    ("symbol-errors", true),
    ("app-detection", true),
    ("client-registered", true),
    ("core-symbols", true),
    ("pin-mode", true),
    ("module-signature", true),
    ("boot-load", true),
    ("other-kernels", true),
    ("toolchain", true),
    ("iommu", false),
    ("pcie-path", false),
    ("bar1", false),
    ("mig", false),
    ("confidential-compute", false),
    ("gpu-memory-path", false),
];

impl Check {
    fn new(id: &'static str, verdict: Verdict, detail: impl Into<String>) -> Self {
        let peer_memory = CHECK_IDS.iter().any(|&(i, p)| i == id && p);
        Check {
            id,
            verdict,
            detail: detail.into(),
            fix: None,
            peer_memory,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// Every check's result, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The checks, in the order they ran.
    pub checks: Vec<Check>,
    /// The registration path of GPU memory per library and NIC (`gpu-memory-path`).
    pub paths: Vec<Decision>,
    /// The facts the paths were decided from.
    pub path_facts: Option<path::Facts>,
    /// Whether the checks of the peer-memory path count: false only where every
    /// library registers GPU memory through dma-buf, until
    /// [`Report::require_peer_memory`].
    pub peer_memory_needed: bool,
}

impl Report {
    /// A check by id.
    pub fn get(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// Counts the peer-memory path's checks even where jobs use dma-buf (`peermem
    /// doctor --require-peer-memory`: a host that must serve `ibv_reg_mr` on GPU
    /// memory, perftest, MPI or NCCL's GIN).
    pub fn require_peer_memory(&mut self) {
        self.peer_memory_needed = true;
    }

    /// The checks the verdict counts.
    fn counted(&self) -> impl Iterator<Item = &Check> {
        self.checks
            .iter()
            .filter(|c| self.peer_memory_needed || !c.peer_memory)
    }

    /// The first failed check that counts: the first thing to fix.
    pub fn first_fail(&self) -> Option<&Check> {
        self.counted().find(|c| c.verdict == Verdict::Fail)
    }

    /// The first warning that counts.
    pub fn first_warn(&self) -> Option<&Check> {
        self.counted().find(|c| c.verdict == Verdict::Warn)
    }

    /// Whether no check that counts failed.
    pub fn ready(&self) -> bool {
        self.first_fail().is_none()
    }

    /// The final verdict line.
    pub fn summary(&self) -> String {
        let describe = |c: &Check| match &c.fix {
            Some(fix) => format!("{}: {}", c.id, fix),
            None => format!("{}: {}", c.id, c.detail),
        };
        let mut line = if let Some(c) = self.first_fail() {
            format!("verdict: not ready; fix first: {}", describe(c))
        } else if let Some(c) = self.first_warn() {
            let n = self
                .counted()
                .filter(|c| c.verdict == Verdict::Warn)
                .count();
            format!("verdict: ready, {n} warning(s); first: {}", describe(c))
        } else {
            "verdict: ready".to_owned()
        };
        if !self.peer_memory_needed {
            let uncounted: Vec<&str> = self
                .checks
                .iter()
                .filter(|c| c.peer_memory && matches!(c.verdict, Verdict::Fail | Verdict::Warn))
                .map(|c| c.id)
                .collect();
            line.push_str(
                "; NCCL, UCX and libfabric register GPU memory through dma-buf: peer memory \
                 (peermem) is not what jobs use here and is not needed",
            );
            if !uncounted.is_empty() {
                let _ = write!(
                    line,
                    " (not counted: {}; --require-peer-memory counts them)",
                    uncounted.join(", ")
                );
            }
        }
        line
    }

    /// The human rendering: one verdict line per check (with its fix indented below),
    /// then the final verdict line.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let _ = writeln!(out, "{:<4}  {:<20} {}", c.verdict.word(), c.id, c.detail);
            if let (Some(fix), Verdict::Warn | Verdict::Fail) = (&c.fix, c.verdict) {
                let _ = writeln!(out, "{:<4}  {:<20}   -> {}", "", "", fix);
            }
        }
        out.push_str(&path::render(&self.paths));
        out.push_str(&self.summary());
        out.push('\n');
        out
    }

    /// The JSON rendering:
    /// `{"schema_version":3,"ready":..,"verdict":"..","fix_first":id|null,
    /// "first_warning":id|null,"peer_memory_needed":..,"checks":[{..}],
    /// "paths":[{"library":..,"nic":..,"path":..,"why":[..]}],"path_facts":{..}}`.
    pub fn render_json(&self) -> String {
        #[derive(Serialize)]
        struct Json<'a> {
            schema_version: u32,
            ready: bool,
            verdict: String,
            fix_first: Option<&'static str>,
            first_warning: Option<&'static str>,
            peer_memory_needed: bool,
            checks: &'a [Check],
            paths: &'a [Decision],
            path_facts: &'a Option<path::Facts>,
        }
        let json = Json {
            schema_version: crate::DOCTOR_JSON_SCHEMA_VERSION,
            ready: self.ready(),
            verdict: self.summary(),
            fix_first: self.first_fail().map(|c| c.id),
            first_warning: self.first_warn().map(|c| c.id),
            peer_memory_needed: self.peer_memory_needed,
            checks: &self.checks,
            paths: &self.paths,
            path_facts: &self.path_facts,
        };
        serde_json::to_string(&json).expect("a report serializes to JSON")
    }
}

/// The peer-memory client module names (drop-in and native).
const NATIVE: &str = "peermem";
const DROPIN: &str = "nvidia_peermem";

/// The paths applications probe to detect GPUDirect RDMA (docs/abi.md 4).
pub const DETECTION_PATHS: [&str; 4] = [
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/kernel/mm/memory_peers/nvidia-peermem/version",
    "/sys/module/nvidia_peermem/version",
];

/// Which peer-memory client module is loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Client {
    /// None.
    None,
    /// Our `peermem`.
    Native,
    /// Our drop-in `nvidia_peermem`.
    Dropin,
    /// NVIDIA's own `nvidia_peermem` (C); `certain` is false when it is a guess.
    Nvidia {
        /// Whether the version proves it (equal to the driver's) rather than suggests it.
        certain: bool,
    },
    /// Our `peermem` and an `nvidia_peermem` together: they claim the same client name.
    Both,
}

/// What the checks share: the files read once.
struct Host<'a> {
    root: &'a Root,
    /// The running kernel's release (`/proc/sys/kernel/osrelease`).
    release: Option<String>,
    /// The running kernel's configuration, if one is found.
    config: Option<kernel::Config>,
    kallsyms: Option<String>,
    driver: Option<(DriverVersion, String)>,
    smi: Option<nvsmi::Report>,
    /// The kernel log, or why it could not be read.
    log: Result<String, String>,
}

impl Host<'_> {
    /// Whether a peermem module (ours, native or drop-in) is loaded.
    fn ours_loaded(&self) -> bool {
        matches!(
            self.client(),
            Client::Native | Client::Dropin | Client::Both
        )
    }

    fn module(&self, name: &str) -> bool {
        self.root.is_dir(&format!("/sys/module/{name}"))
    }

    fn module_version(&self, name: &str) -> Option<String> {
        self.root
            .read_trimmed(&format!("/sys/module/{name}/version"))
            .filter(|v| !v.is_empty())
    }

    fn kallsyms_has(&self, symbol: &str) -> Option<&str> {
        self.kallsyms.as_deref()?.lines().find(|l| {
            let mut w = l.split_whitespace();
            w.nth(2) == Some(symbol)
        })
    }

    fn client(&self) -> Client {
        let native = self.module(NATIVE);
        let dropin = self.module(DROPIN);
        match (native, dropin) {
            (false, false) => Client::None,
            (true, true) => Client::Both,
            (true, false) => Client::Native,
            (false, true) => {
                let v = self.module_version(DROPIN);
                let driver = self.driver.as_ref().map(|(_, s)| s.as_str());
                if v.is_some() && v.as_deref() == driver {
                    Client::Nvidia { certain: true }
                } else if self.root.is_dir(DEBUGFS_DIR) || v.as_deref() == Some(peermem_version()) {
                    Client::Dropin
                } else {
                    Client::Nvidia { certain: false }
                }
            }
        }
    }
}

/// The driver version: `/sys/module/nvidia/version`, else `/proc/driver/nvidia/version`,
/// else nvidia-smi's `Driver Version`; with where it came from.
fn driver_version(root: &Root, smi: Option<&nvsmi::Report>) -> Option<(DriverVersion, String)> {
    if let Some(v) = root
        .read_trimmed("/sys/module/nvidia/version")
        .and_then(|s| DriverVersion::parse(&s).map(|v| (v, s)))
    {
        return Some(v);
    }
    if let Some(v) = root
        .read("/proc/driver/nvidia/version")
        .and_then(|t| DriverVersion::parse_nvrm(&t))
    {
        return Some((v, v.to_string()));
    }
    let s = smi?.driver_version.clone()?;
    DriverVersion::parse(&s).map(|v| (v, s))
}

/// After [`run`]: if a file could not be read for want of permission, what to tell
/// the user (the checks took such files for missing, so their verdicts mislead).
pub fn permission_denied(root: &Root) -> Option<String> {
    let denied = root.denied();
    let first = denied.first()?;
    let more = match denied.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Some(format!(
        "permission denied reading {first}{more}: peermem doctor reads files only root \
         may read; run it as root (sudo peermem doctor)"
    ))
}

/// Runs every check. `smi` is `nvidia-smi -q` output, if any.
pub fn run(root: &Root, smi: Option<&str>) -> Report {
    run_with(root, smi.map(nvsmi::parse))
}

/// Runs every check, with the GPU facts `gpus` (from NVML or `nvidia-smi -q`), if any,
/// deciding the paths for an empty environment with no NIC probed.
pub fn run_with(root: &Root, gpus: Option<nvsmi::Report>) -> Report {
    run_full(root, gpus, &Env::default(), &Err(unprobed(root)))
}

/// Why the NICs were not probed where nothing says how.
pub fn unprobed(root: &Root) -> String {
    if root.is_live() {
        "not probed".to_owned()
    } else {
        "--root is not this host".to_owned()
    }
}

/// Runs every check, with the GPU facts `gpus`, and decides the registration paths for
/// a job's environment `env` and the NICs' answers `nics` to the dma-buf probe.
pub fn run_full(root: &Root, gpus: Option<nvsmi::Report>, env: &Env, nics: &NicAnswers) -> Report {
    let smi = gpus;
    let release = root.read_trimmed("/proc/sys/kernel/osrelease");
    let host = Host {
        root,
        config: release
            .as_deref()
            .and_then(|r| kernel::Config::find(root, r)),
        release,
        kallsyms: root.read("/proc/kallsyms"),
        driver: driver_version(root, smi.as_ref()),
        smi,
        log: logs::kernel_log(root),
    };
    // In the order of CHECK_IDS: what the module needs before the module.
    let mut checks = vec![
        kernel::kernel_rust(&host),
        kernel::kernel_release(&host),
        nvidia_driver(&host),
    ];
    checks.extend(nvidia_version(&host));
    checks.push(gpu::gpu_product(&host));
    checks.push(peer_memory_core(&host));
    checks.push(rdma::hca(&host));
    checks.push(module_file(&host));
    checks.push(peermem_module(&host));
    checks.push(logs::symbol_errors(&host));
    checks.push(app_detection(&host));
    checks.push(client_registered(&host));
    checks.push(core_symbols(&host));
    checks.push(pin_mode(&host));
    checks.push(module_signature(&host));
    checks.push(boot_load(&host));
    checks.push(other_kernels(&host));
    checks.push(toolchain::toolchain(&host));
    checks.push(iommu(&host));
    checks.push(pcie::pcie_path(&host));
    checks.extend(smi_checks(&host));
    let facts = path::facts(&host, env);
    let paths = path::decide(&facts, env, nics);
    checks.push(path::check(&paths, &facts, nics));
    let dma_buf_only = !paths.is_empty() && paths.iter().all(|d| d.path == GpuPath::DmaBuf);
    Report {
        checks,
        paths,
        path_facts: Some(facts),
        peer_memory_needed: !dma_buf_only,
    }
}

/// Where systemd-modules-load reads the modules to load at boot, in its order.
pub const MODULES_LOAD_DIRS: [&str; 4] = [
    "/etc/modules-load.d",
    "/run/modules-load.d",
    "/usr/lib/modules-load.d",
    "/lib/modules-load.d",
];

/// Where systemd reads unit files, in its order (the admin's first).
pub const UNIT_DIRS: [&str; 3] = [
    "/etc/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// The module an enabled `peermem.service` loads (its `ExecStart=` modprobe), with
/// where the unit lives; `None` when the unit is absent or not enabled for
/// multi-user.target.
fn boot_unit(h: &Host<'_>) -> Option<(String, String)> {
    let wants = h.root.list("/etc/systemd/system/multi-user.target.wants");
    if !wants.iter().any(|w| w == "peermem.service") {
        return None;
    }
    unit_file(h)
}

/// The module `peermem.service` loads (its `ExecStart=` modprobe) and where the unit
/// lives, enabled or not; `None` when no unit is installed.
fn unit_file(h: &Host<'_>) -> Option<(String, String)> {
    UNIT_DIRS.iter().find_map(|dir| {
        let file = format!("{dir}/peermem.service");
        let text = h.root.read(&file)?;
        let module = text.lines().find_map(|l| {
            let cmd = l.trim().strip_prefix("ExecStart=")?;
            let mut words = cmd.split_whitespace();
            words.next().filter(|w| w.ends_with("/modprobe"))?;
            words.find(|w| !w.starts_with('-')).map(str::to_owned)
        })?;
        Some((module, file))
    })
}

/// The author peermem's modules carry (`MODULE_AUTHOR`).
const PEERMEM_AUTHOR: &str = "peermem developers";

/// The installed drop-in dkms packages' versions (`/usr/src/peermem-dropin-<version>`).
fn dropin_packages(h: &Host<'_>) -> Vec<String> {
    h.root
        .list("/usr/src")
        .into_iter()
        .filter_map(|n| n.strip_prefix("peermem-dropin-").map(str::to_owned))
        .collect()
}

/// `module-file`: the file `modprobe nvidia-peermem` loads for the running kernel (the
/// one `modules.dep` lists: depmod has applied its search order and overrides), and
/// whose it is (its `.modinfo`: peermem's author, else NVIDIA's, whose version is the
/// driver's). NVIDIA's driver packages install their own nvidia-peermem.ko, of the
/// driver's higher version, where dkms puts the drop-in: where the drop-in package is
/// installed but NVIDIA's file is the one, the next load is NVIDIA's module: FAIL,
/// with the command that installs the drop-in over it.
fn module_file(h: &Host<'_>) -> Check {
    const ID: &str = "module-file";
    let Some(rel) = h.release.as_deref() else {
        return Check::new(ID, Verdict::NotApplicable, "the kernel release is unknown");
    };
    let Some(dep) = h.root.read(&format!("/lib/modules/{rel}/modules.dep")) else {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            format!("no /lib/modules/{rel}/modules.dep"),
        );
    };
    let dropin = dropin_packages(h);
    let entry = dep.lines().find_map(|l| {
        let f = l.split(':').next()?;
        let base = f.rsplit('/').next()?;
        let name = base.split(".ko").next()?;
        (name == "nvidia-peermem" || name == "nvidia_peermem").then(|| f.to_owned())
    });
    let Some(entry) = entry else {
        return match dropin.first() {
            Some(v) => Check::new(
                ID,
                Verdict::Fail,
                format!(
                    "peermem's drop-in package is installed (peermem-dropin {v}) but \
                     /lib/modules/{rel} has no nvidia-peermem.ko: modprobe nvidia-peermem \
                     finds nothing"
                ),
            )
            .fix(format!(
                "dkms install -m peermem-dropin -v {v} -k {rel} (if it fails: \
                 /var/lib/dkms/peermem-dropin/{v}/build/make.log)"
            )),
            None => Check::new(
                ID,
                Verdict::NotApplicable,
                format!("no nvidia-peermem.ko for {rel} (no drop-in installed)"),
            ),
        };
    };
    let file = if entry.starts_with('/') {
        entry
    } else {
        format!("/lib/modules/{rel}/{entry}")
    };
    let elf = h
        .root
        .read_bytes(&file)
        .ok()
        .and_then(|bytes| module_image(&file, bytes));
    let Some(elf) = elf else {
        return Check::new(
            ID,
            Verdict::Warn,
            format!("modprobe nvidia-peermem loads {file}, which cannot be read as a module"),
        )
        .fix(format!("check with: modinfo {file}"));
    };
    let version = modinfo_field(&elf, "version").unwrap_or_else(|| "(no version)".to_owned());
    if modinfo_field(&elf, "author").as_deref() == Some(PEERMEM_AUTHOR) {
        return Check::new(
            ID,
            Verdict::Ok,
            format!("modprobe nvidia-peermem loads {file}: peermem's drop-in {version}"),
        );
    }
    foreign_module_file(h, &file, &version, &dropin, rel)
}

/// [`module_file`] where the file is not peermem's: NVIDIA's (its version the
/// driver's), or another's.
fn foreign_module_file(
    h: &Host<'_>,
    file: &str,
    version: &str,
    dropin: &[String],
    rel: &str,
) -> Check {
    const ID: &str = "module-file";
    let driver = h.driver.as_ref().map(|(_, s)| s.as_str());
    let whose = if Some(version) == driver {
        "NVIDIA's own, its version the driver's"
    } else {
        "not peermem's: NVIDIA's own or another's"
    };
    match dropin.first() {
        Some(v) => Check::new(
            ID,
            Verdict::Fail,
            format!(
                "modprobe nvidia-peermem loads {file} (version {version}: {whose}), not \
                 peermem's drop-in, which is installed (peermem-dropin {v})"
            ),
        )
        .fix(format!(
            "dkms install --force -m peermem-dropin -v {v} -k {rel} (dkms keeps the other \
             file and puts it back when peermem-dropin is removed), then systemctl restart \
             peermem.service"
        )),
        None => Check::new(
            ID,
            Verdict::Warn,
            format!(
                "modprobe nvidia-peermem loads {file} (version {version}: {whose}); \
                 peermem's drop-in is not installed"
            ),
        )
        .fix(
            "install peermem's drop-in package (peermem-dropin-dkms): dkms installs it over \
             that file, which comes back when the drop-in is removed",
        ),
    }
}

/// How to load the module: through `peermem.service` where it is installed (a load
/// outside it makes `systemctl restart openibd` fail, boot-load); else install the
/// package that brings it, or modprobe where there is none.
fn load_fix(h: &Host<'_>) -> String {
    match unit_file(h) {
        Some((module, file)) => {
            let enable = if boot_unit(h).is_some() {
                String::new()
            } else {
                " and systemctl enable peermem.service (it is not enabled: gone after a reboot)"
                    .to_owned()
            };
            format!(
                "systemctl start peermem.service ({file}: it loads {module} after openibd \
                 and the GPU driver){enable}"
            )
        }
        None => "install peermem's package (docs/install.md: its peermem.service loads the \
                 module after openibd and the GPU driver), then systemctl start \
                 peermem.service; without it: modprobe nvidia-peermem (peermem for the \
                 native build)"
            .to_owned(),
    }
}

/// Is a peermem module loaded at boot, and so that MOFED's `openibd restart` works?
/// The Debian packages and `make install` enable `peermem.service` (loaded after
/// openibd, unloaded before it stops); an admin may list the module in modules-load.d
/// instead. A module loaded outside the unit on a host with MOFED's openibd makes
/// `systemctl restart openibd` fail: openibd cannot unload the peer-memory core's
/// module (ib_uverbs from MOFED/DOCA-OFED 25.04 on, ib_core before) while the client
/// holds it.
fn boot_load(h: &Host<'_>) -> Check {
    const ID: &str = "boot-load";
    let mut found = Vec::new();
    for dir in MODULES_LOAD_DIRS {
        for name in h.root.list(dir) {
            if !name.ends_with(".conf") {
                continue;
            }
            let file = format!("{dir}/{name}");
            let text = h.root.read(&file).unwrap_or_default();
            for line in text.lines().map(str::trim) {
                if line.starts_with('#') || line.starts_with(';') {
                    continue;
                }
                if [NATIVE, DROPIN, "nvidia-peermem"].contains(&line) {
                    found.push(format!("{file} loads {line}"));
                }
            }
        }
    }
    let openibd = UNIT_DIRS
        .iter()
        .find(|d| h.root.exists(&format!("{d}/openibd.service")));
    if let Some((module, file)) = boot_unit(h) {
        found.insert(
            0,
            format!(
                "peermem.service ({file}, enabled) loads {module} after openibd and the GPU \
                 driver, and stops it before them"
            ),
        );
        return Check::new(ID, Verdict::Ok, found.join("; "));
    }
    if found.is_empty() {
        return Check::new(
            ID,
            Verdict::Warn,
            format!(
                "peermem.service is not enabled and no {} file names peermem or \
                 nvidia-peermem: the module is gone after a reboot",
                MODULES_LOAD_DIRS.map(|d| format!("{d}/*.conf")).join(", ")
            ),
        )
        .fix(
            "systemctl enable peermem.service (make install and the Debian packages install \
             and enable it); without it: echo nvidia-peermem > \
             /etc/modules-load.d/peermem.conf (or peermem for the native build)",
        );
    }
    if let Some(dir) = openibd {
        let core = core_module(h).unwrap_or(CORE_MODULES);
        return Check::new(
            ID,
            Verdict::Warn,
            format!(
                "{}, outside peermem.service, and MOFED's openibd is installed \
                 ({dir}/openibd.service): `systemctl restart openibd` fails while the \
                 module holds {core}",
                found.join("; ")
            ),
        )
        .fix(
            "install peermem's Debian package (its peermem.service stops the module before \
             openibd stops and loads it after); or rmmod the module before every openibd \
             restart and modprobe it after",
        );
    }
    Check::new(ID, Verdict::Ok, found.join("; "))
}

/// The other installed kernels a reboot may start: each with a kernel image, Rust
/// support and a build tree must have peermem's module, or GPUDirect RDMA is gone after
/// the reboot into it. dkms builds it when the kernel's headers are installed; on
/// Debian its Rust build files need the kernel's source (packaging/dkms-pre-build),
/// and without it the build fails: FAIL, naming the kernel and the commands. A kernel
/// with an image but no build tree cannot get the module: WARN. A kernel of a release
/// outside [`SUPPORTED_KERNELS_FILE`] never gets it (dkms skips it: the dkms.conf
/// BUILD_EXCLUSIVE_KERNEL scripts/install writes from that list): WARN, and the fix is
/// booting a supported one, never a dkms command.
fn other_kernels(h: &Host<'_>) -> Check {
    const ID: &str = "other-kernels";
    let running = h.release.as_deref().unwrap_or("");
    let ubuntu = h
        .root
        .read("/etc/os-release")
        .is_some_and(|t| t.lines().any(|l| l.trim() == "ID=ubuntu"));
    let (mut fails, mut warns, mut good) = (Vec::new(), Vec::new(), Vec::new());
    let mut unsupported = Vec::new();
    for k in h.root.list("/lib/modules") {
        let image = h.root.exists(&format!("/boot/vmlinuz-{k}"))
            || h.root.exists(&format!("/lib/modules/{k}/vmlinuz"));
        if k == running || !image {
            continue;
        }
        match release_version(&k) {
            Some(vp) if supported_kernels().contains(&vp) => {}
            Some((v, p)) => {
                unsupported.push(format!("{k} (Linux {v}.{p})"));
                continue;
            }
            None => {
                unsupported.push(k);
                continue;
            }
        }
        let build = format!("/lib/modules/{k}/build");
        let Some(config) = h.root.read(&format!("{build}/.config")) else {
            warns.push(k);
            continue;
        };
        if !config.lines().any(|l| l == "CONFIG_RUST=y") {
            continue;
        }
        if module_for(h.root, &k).is_some() {
            good.push(k);
            continue;
        }
        let rust = h
            .root
            .exists(&format!("{build}/{}", rust_crate_file("kernel")));
        let fix = match (rust, ubuntu) {
            (true, _) => format!(
                "dkms autoinstall -k {k} (if it fails: /var/lib/dkms/peermem*/*/build/make.log)"
            ),
            (false, true) => {
                format!("apt install linux-lib-rust-{k} && dkms autoinstall -k {k}")
            }
            (false, false) => {
                let series: Vec<&str> = k.split(['.', '-', '+']).take(2).collect();
                format!(
                    "its Rust build files are missing: apt install linux-source-{} (the \
                     version of linux-headers-{k}) && dkms autoinstall -k {k}",
                    series.join(".")
                )
            }
        };
        fails.push((k, fix));
    }
    if let Some((k, fix)) = fails.first() {
        let all: Vec<&str> = fails.iter().map(|(k, _)| k.as_str()).collect();
        return Check::new(
            ID,
            Verdict::Fail,
            format!(
                "no peermem module for installed kernel {}: after a reboot into it \
                 GPUDirect RDMA is gone",
                all.join(", ")
            ),
        )
        .fix(format!("for {k}: {fix}"));
    }
    if !warns.is_empty() {
        return Check::new(
            ID,
            Verdict::Warn,
            format!(
                "installed kernel {} has no build tree: dkms cannot build peermem for it",
                warns.join(", ")
            ),
        )
        .fix(format!(
            "install its headers (Debian, Ubuntu: linux-headers-{}); dkms then builds it",
            warns[0]
        ));
    }
    if !unsupported.is_empty() {
        let list = supported_list();
        return Check::new(
            ID,
            Verdict::Warn,
            format!(
                "installed kernel {} is of a release peermem does not support (Linux \
                 {list}): dkms skips it, and after a reboot into it GPUDirect RDMA is gone",
                unsupported.join(", ")
            ),
        )
        .fix(format!(
            "boot a Linux {list} kernel (make it the default boot entry); the other may \
             stay installed"
        ));
    }
    if good.is_empty() {
        return Check::new(
            ID,
            Verdict::Ok,
            "no other kernel with Rust support is installed",
        );
    }
    Check::new(
        ID,
        Verdict::Ok,
        format!("peermem is installed for {}", good.join(", ")),
    )
}

fn params(h: &Host<'_>, module: &str) -> String {
    let p = |name: &str| {
        h.root
            .read_trimmed(&format!("/sys/module/{module}/parameters/{name}"))
    };
    match (p("persistent_api_support"), p("peerdirect_support")) {
        (None, None) => String::new(),
        (a, b) => format!(
            " (persistent_api_support={}, peerdirect_support={})",
            a.as_deref().unwrap_or("?"),
            b.as_deref().unwrap_or("?")
        ),
    }
}

/// Where an installed module file may be, for the running kernel.
fn installed_module(h: &Host<'_>) -> Option<String> {
    module_for(h.root, h.release.as_deref()?)
}

/// Where peermem's module (either name) is installed for kernel `rel`, if it is.
fn module_for(root: &Root, rel: &str) -> Option<String> {
    for dir in ["updates/dkms", "updates", "extra"] {
        for name in ["peermem", "nvidia-peermem"] {
            for ext in ["ko", "ko.xz", "ko.zst", "ko.gz"] {
                let path = format!("/lib/modules/{rel}/{dir}/{name}.{ext}");
                if root.exists(&path) {
                    return Some(path);
                }
            }
        }
    }
    None
}

/// The kernel checks module signatures: `module.sig_enforce=1`, lockdown
/// (integrity or confidentiality, which require signed modules), or Secure Boot
/// (whose distribution kernels lock down). Returns why, or `None`.
fn signatures_enforced(h: &Host<'_>) -> Option<String> {
    if h.root
        .read_trimmed("/sys/module/module/parameters/sig_enforce")
        .as_deref()
        == Some("Y")
    {
        return Some("module.sig_enforce=Y".to_owned());
    }
    if let Some(l) = h.root.read("/sys/kernel/security/lockdown") {
        let mode = l
            .split_whitespace()
            .find(|w| w.starts_with('['))
            .unwrap_or("");
        if mode == "[integrity]" || mode == "[confidentiality]" {
            return Some(format!("kernel lockdown {mode}"));
        }
    }
    // The efivar: four attribute bytes, then 1 when Secure Boot is on.
    let sb = h
        .root
        .read("/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e0a9b6cc5768");
    if sb.is_some_and(|v| v.as_bytes().get(4) == Some(&1)) {
        return Some("Secure Boot on".to_owned());
    }
    None
}

/// Signed modules only, on hosts that enforce signatures (Secure Boot machines).
fn module_signature(h: &Host<'_>) -> Check {
    const ID: &str = "module-signature";
    const MAGIC: &str = "~Module signature appended~\n";
    let enforced = signatures_enforced(h);
    let file = installed_module(h);
    let signed = file.as_deref().map(|f| {
        if f.ends_with(".ko") {
            h.root.read(f).map(|t| t.ends_with(MAGIC))
        } else {
            None // compressed: the signature sits inside
        }
    });
    let fix = "sign the module: with dkms, name an enrolled MOK key in /etc/dkms/framework.conf \
               (mok_signing_key, mok_certificate; enroll the certificate with \
               mokutil --import and reboot) and rebuild; or sign it with the kernel's own key: \
               /lib/modules/$(uname -r)/build/scripts/sign-file sha256 KEY CERT MODULE";
    match (enforced, file, signed.flatten()) {
        (Some(why), Some(f), Some(false)) => Check::new(
            ID,
            Verdict::Fail,
            format!("the kernel enforces module signatures ({why}) and {f} is not signed"),
        )
        .fix(fix),
        (Some(why), Some(f), Some(true)) => Check::new(
            ID,
            Verdict::Ok,
            format!("the kernel enforces module signatures ({why}); {f} is signed"),
        ),
        (Some(why), Some(f), None) => Check::new(
            ID,
            Verdict::Warn,
            format!(
                "the kernel enforces module signatures ({why}); {f} is compressed, so its \
                 signature cannot be checked here"
            ),
        )
        .fix("check with: modinfo -F signer MODULE (empty: unsigned)"),
        (Some(why), None, _) => Check::new(
            ID,
            Verdict::Warn,
            format!(
                "the kernel enforces module signatures ({why}); no installed peermem module \
                 found under /lib/modules/<release>/{{updates,extra}}"
            ),
        )
        .fix(fix),
        (None, _, _) => Check::new(
            ID,
            Verdict::Ok,
            "module signatures are not enforced (module.sig_enforce, lockdown, Secure Boot)",
        ),
    }
}

/// The loaded module's `persistent_api_support`: its sysfs parameter, else the
/// `params` file in peermem's debugfs directory.
fn persistent_api_support(h: &Host<'_>) -> Option<(String, String)> {
    for m in [NATIVE, DROPIN] {
        let path = format!("/sys/module/{m}/parameters/persistent_api_support");
        if let Some(v) = h.root.read_trimmed(&path) {
            return Some((v, path));
        }
    }
    let path = format!("{DEBUGFS_DIR}/params");
    let text = h.root.read(&path)?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == "persistent_api_support").then(|| (v.trim().to_owned(), path.clone()))
    })
}

/// Callback mode has a lock cycle between nvidia.ko and the peer-memory core that no
/// client can break (docs/pin-state-machine.md, "The hazard"): say so.
fn pin_mode(h: &Host<'_>) -> Check {
    const ID: &str = "pin-mode";
    match persistent_api_support(h) {
        None => Check::new(
            ID,
            Verdict::NotApplicable,
            "no loaded peermem module shows its persistent_api_support",
        ),
        Some((v, path)) if v == "0" || v == "N" => Check::new(
            ID,
            Verdict::Warn,
            format!(
                "callback pins (persistent_api_support=0, from {path}): a registration racing \
                 a free of the same GPU buffer can deadlock nvidia.ko (the peer-memory core \
                 maps under its region lock while nvidia.ko runs the free callback under its \
                 API lock, and the callback's invalidation waits for that region lock)"
            ),
        )
        .fix("use the default persistent mode (persistent_api_support=1) unless the application needs invalidation; make applications deregister GPU buffers before freeing them"),
        Some((v, path)) => Check::new(
            ID,
            Verdict::Ok,
            format!("persistent pins (persistent_api_support={v}, from {path}): no free callbacks"),
        ),
    }
}

fn peermem_module(h: &Host<'_>) -> Check {
    const ID: &str = "peermem-module";
    let version = |m| {
        h.module_version(m)
            .unwrap_or_else(|| "(no version)".to_owned())
    };
    match h.client() {
        Client::None => {
            Check::new(ID, Verdict::Fail, "no peer-memory client module is loaded").fix(load_fix(h))
        }
        Client::Native => Check::new(
            ID,
            Verdict::Ok,
            format!("peermem {} loaded{}", version(NATIVE), params(h, NATIVE)),
        ),
        Client::Dropin => Check::new(
            ID,
            Verdict::Ok,
            format!(
                "nvidia_peermem {} loaded: peermem's drop-in build{}",
                version(DROPIN),
                params(h, DROPIN)
            ),
        ),
        Client::Nvidia { certain } => Check::new(
            ID,
            Verdict::Warn,
            if certain {
                format!(
                    "nvidia_peermem {} loaded: NVIDIA's own module (its version is the driver's)",
                    version(DROPIN)
                )
            } else {
                format!(
                    "nvidia_peermem {} loaded, and no {DEBUGFS_DIR}: probably NVIDIA's own \
                     module (or debugfs is not mounted)",
                    version(DROPIN)
                )
            },
        )
        .fix(
            "to use peermem: install its drop-in over it (module-file says which file \
             modprobe loads and how), then systemctl restart peermem.service",
        ),
        Client::Both => Check::new(
            ID,
            Verdict::Fail,
            "both peermem and nvidia_peermem are loaded: they register the same client (nv_mem)",
        )
        .fix("unload one: rmmod peermem, or rmmod nvidia_peermem"),
    }
}

fn app_detection(h: &Host<'_>) -> Check {
    const ID: &str = "app-detection";
    let found: Vec<&str> = DETECTION_PATHS
        .iter()
        .copied()
        .filter(|p| h.root.exists(p))
        .collect();
    if !found.is_empty() {
        return Check::new(
            ID,
            Verdict::Ok,
            format!(
                "applications detect GPUDirect RDMA through {}",
                found.join(", ")
            ),
        );
    }
    if h.module(NATIVE) {
        return Check::new(
            ID,
            Verdict::Warn,
            "peermem is loaded but applications (NCCL, UCX, Open MPI) will not detect \
             GPUDirect RDMA: no /sys/kernel/mm/memory_peers and no /sys/module/nvidia_peermem/version",
        )
        .fix("use the drop-in build: make dropin, install nvidia-peermem.ko, modprobe nvidia-peermem");
    }
    Check::new(
        ID,
        Verdict::Fail,
        "applications will not detect GPUDirect RDMA: none of the memory_peers version \
         files, nor /sys/module/nvidia_peermem/version, exists",
    )
    .fix(load_fix(h))
}

fn nvidia_driver(h: &Host<'_>) -> Check {
    const ID: &str = "nvidia-driver";
    if !h.module("nvidia") {
        return Check::new(ID, Verdict::Fail, "nvidia.ko is not loaded")
            .fix("install and load NVIDIA's open kernel modules (modprobe nvidia)");
    }
    let taint = h
        .root
        .read_trimmed("/sys/module/nvidia/taint")
        .unwrap_or_default();
    let nvrm = h
        .root
        .read("/proc/driver/nvidia/version")
        .unwrap_or_default();
    if taint.contains('P') {
        return Check::new(
            ID,
            Verdict::Fail,
            format!("nvidia.ko is the proprietary build (taint '{taint}' has P)"),
        )
        .fix("a Rust module cannot use the proprietary nvidia.ko: install NVIDIA's open kernel modules (nvidia-open / -m=kernel-open)");
    }
    let how = if nvrm.contains("Open Kernel Module") {
        "open kernel modules (per /proc/driver/nvidia/version)".to_owned()
    } else if taint.is_empty() {
        "open or GPL-compatible build (no taint)".to_owned()
    } else {
        format!("open or GPL-compatible build (taint '{taint}', no P)")
    };
    Check::new(ID, Verdict::Ok, format!("nvidia.ko loaded: {how}"))
}

fn nvidia_version(h: &Host<'_>) -> Vec<Check> {
    let Some((v, _)) = h.driver else {
        let why = if h.module("nvidia") {
            "the driver version is unknown (no /sys/module/nvidia/version, /proc/driver/nvidia/version or nvidia-smi)"
        } else {
            "no driver loaded"
        };
        return vec![
            Check::new("driver-version", Verdict::NotApplicable, why),
            Check::new("persistent-api", Verdict::NotApplicable, why),
        ];
    };
    let version = if v.supported() {
        Check::new(
            "driver-version",
            Verdict::Ok,
            format!(
                "driver {v}: page-table version {}.x, supported (515 and later)",
                v.page_table_major()
            ),
        )
    } else {
        Check::new(
            "driver-version",
            Verdict::Fail,
            format!("driver {v} is older than 515: its P2P structures are not supported"),
        )
        .fix("install NVIDIA's open kernel modules 535.14 or later (515 at the very least)")
    };
    let persistent = if v.has_persistent_api() {
        Check::new(
            "persistent-api",
            Verdict::Ok,
            format!("driver {v} has the persistent pin API (nvidia_p2p_get_pages_persistent)"),
        )
    } else if v.supported() {
        Check::new(
            "persistent-api",
            Verdict::Warn,
            format!(
                "driver {v} has no persistent pin API (535.14 and later, or 525.105.17 up to \
                 530): persistent pins use nvidia_p2p_get_pages with a NULL callback, and \
                 unpinning after the owner freed the memory is unsafe on these drivers"
            ),
        )
        .fix("upgrade the driver to 535.14 or later")
    } else {
        Check::new(
            "persistent-api",
            Verdict::NotApplicable,
            format!("driver {v} is not supported"),
        )
    };
    vec![version, persistent]
}

/// Where MOFED/DOCA-OFED's packages put the `Module.symvers` of their RDMA modules
/// (ib_core, ib_uverbs, ...) for kernel `rel` (as nvidia-peermem's build and
/// packaging/find-symvers look for it).
fn mofed_symvers(h: &Host<'_>, rel: &str) -> Option<String> {
    [
        format!("/usr/src/ofa_kernel/x86_64/{rel}/Module.symvers"),
        format!("/usr/src/ofa_kernel/{rel}/Module.symvers"),
        "/usr/src/ofa_kernel/default/Module.symvers".to_owned(),
    ]
    .into_iter()
    .find(|p| h.root.exists(p))
}

/// The core's symbols peermem imports.
const CORE_SYMBOLS: [&str; 2] = [
    "ib_register_peer_memory_client",
    "ib_unregister_peer_memory_client",
];

/// Does a MOFED/DOCA-OFED upgrade (a new peer-memory core, the kernel unchanged) need
/// peermem rebuilt? Only where the kernel checks symbol versions (`CONFIG_MODVERSIONS`):
/// there a module built against the old core fails to load ("disagrees about version of
/// symbol ib_register_peer_memory_client") once the CRCs changed. The check compares
/// the CRCs the installed module records (decompressed where dkms compressed it) with
/// those of MOFED's `Module.symvers`; a module it cannot read is judged by time: a MOFED `Module.symvers`
/// newer than the module says an upgrade happened since the build.
fn core_symbols(h: &Host<'_>) -> Check {
    const ID: &str = "core-symbols";
    let Some(config) = &h.config else {
        return Check::new(ID, Verdict::NotApplicable, "no kernel configuration found");
    };
    if !config.yes("MODVERSIONS") {
        return Check::new(
            ID,
            Verdict::Ok,
            format!(
                "the kernel checks no symbol versions (CONFIG_MODVERSIONS is not set in {}): \
                 a MOFED/DOCA-OFED upgrade needs no rebuild of peermem while its \
                 peer-memory core exports ib_register_peer_memory_client",
                config.path
            ),
        );
    }
    let (Some(rel), Some(module)) = (h.release.as_deref(), installed_module(h)) else {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            "CONFIG_MODVERSIONS=y, but no installed peermem module to compare",
        );
    };
    let Some(symvers) = mofed_symvers(h, rel) else {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            "CONFIG_MODVERSIONS=y, but no MOFED/DOCA-OFED Module.symvers under /usr/src/ofa_kernel",
        );
    };
    let package = if module.contains("nvidia-peermem") {
        "peermem-dropin"
    } else {
        "peermem"
    };
    let rebuild = format!(
        "dkms build --force -m {package} -v {v} -k {rel} && dkms install --force -m {package} -v {v} -k {rel} (or make && make install)",
        v = peermem_version()
    );
    let recorded = h
        .root
        .read_bytes(&module)
        .ok()
        .and_then(|bytes| module_image(&module, bytes))
        .and_then(|elf| module_crcs(&elf));
    if let (Some(recorded), Some(text)) = (recorded, h.root.read(&symvers)) {
        let mut differ = Vec::new();
        let mut unversioned = Vec::new();
        for sym in CORE_SYMBOLS {
            match (recorded.get(sym), symvers_crc(&text, sym)) {
                (Some(&built), Some(now)) if built != now => differ.push(format!(
                    "{sym} (the module records 0x{built:08x}, {} exports 0x{now:08x})",
                    symvers_exporter(&text, sym).unwrap_or("the core")
                )),
                (None, Some(_)) => unversioned.push(sym),
                _ => {}
            }
        }
        if !differ.is_empty() {
            return Check::new(
                ID,
                Verdict::Fail,
                format!(
                    "{module} was built against another peer-memory core than MOFED/DOCA-OFED's \
                     {symvers}: the symbol versions differ for {}; the kernel refuses to \
                     load it (\"disagrees about version of symbol\")",
                    differ.join(", ")
                ),
            )
            .fix(rebuild);
        }
        let detail = if unversioned.is_empty() {
            format!(
                "{module} records the symbol versions of MOFED/DOCA-OFED's {symvers} \
                 for {}",
                CORE_SYMBOLS.join(" and ")
            )
        } else {
            format!(
                "{module} records no symbol version for {} (built without MOFED's \
                 Module.symvers): it loads over any peer-memory core that exports them",
                unversioned.join(" and ")
            )
        };
        return Check::new(ID, Verdict::Ok, detail);
    }
    match (h.root.modified(&module), h.root.modified(&symvers)) {
        (Some(built), Some(mofed)) if mofed > built => Check::new(
            ID,
            Verdict::Warn,
            format!(
                "MOFED/DOCA-OFED's {symvers} is newer than {module}: MOFED was upgraded \
                     since peermem was built, and with CONFIG_MODVERSIONS=y a changed symbol \
                     version fails its next load"
            ),
        )
        .fix(rebuild),
        _ => Check::new(
            ID,
            Verdict::Ok,
            format!("{module} was built after MOFED/DOCA-OFED's {symvers}"),
        ),
    }
}

/// The module that provides the peer-memory API (kallsyms' `[module]`), if any.
fn core_module<'h>(h: &'h Host<'_>) -> Option<&'h str> {
    h.kallsyms_has("ib_register_peer_memory_client")?
        .split_whitespace()
        .nth(3)
        .map(|m| m.trim_start_matches('[').trim_end_matches(']'))
}

/// The modules that may carry the peer-memory core, where doctor cannot tell which.
const CORE_MODULES: &str = "the peer-memory core's module (ib_uverbs or ib_core)";

/// The module that would export the peer-memory API where no loaded one does: the one
/// a `Module.symvers` names for `ib_register_peer_memory_client`, MOFED/DOCA-OFED's
/// where it is installed (its modules replace the kernel's), else the kernel's own
/// (`/lib/modules/<release>/build/Module.symvers`). The module, the file, and whether
/// the file is MOFED's.
fn symvers_core(h: &Host<'_>) -> Option<(String, String, bool)> {
    let rel = h.release.as_deref()?;
    let (file, mofed) = match mofed_symvers(h, rel) {
        Some(f) => (f, true),
        None => (format!("/lib/modules/{rel}/build/Module.symvers"), false),
    };
    let text = h.root.read(&file)?;
    let module = symvers_exporter(&text, "ib_register_peer_memory_client")?;
    (module != "vmlinux").then(|| (module.to_owned(), file, mofed))
}

/// The peer-memory core's module as doctor finds it: the loaded one exporting the API,
/// else the one a `Module.symvers` names ([`symvers_core`]); `None` where neither says.
fn core_module_name(h: &Host<'_>) -> Option<String> {
    core_module(h)
        .map(str::to_owned)
        .or_else(|| symvers_core(h).map(|(m, _, _)| m))
}

/// Who provides peer-memory core module `m`: MOFED/DOCA-OFED (its modules have a
/// version, and are installed in updates/), or the distribution's own (the in-box
/// peer_mem.c of Ubuntu's, NV-Kernels' or openEuler's trees, linked into ib_uverbs;
/// docs/abi.md 8).
fn core_provider(h: &Host<'_>, m: &str) -> String {
    if let Some(v) = h.module_version(m) {
        return format!("MOFED/DOCA-OFED {m} {v}");
    }
    let file = h.release.as_deref().and_then(|r| {
        let dep = h.root.read(&format!("/lib/modules/{r}/modules.dep"))?;
        dep.lines().find_map(|l| {
            let f = l.split(':').next()?;
            let base = f.rsplit('/').next()?;
            (base.split('.').next() == Some(m)).then(|| f.to_owned())
        })
    });
    match file {
        Some(f) if f.starts_with("updates/") || f.starts_with("extra/") => {
            format!("an out-of-tree {m} without a version ({f})")
        }
        Some(f) => format!("the kernel's own {m} (in-box peer_mem, {f})"),
        None => {
            format!("{m} without a version, so not MOFED's: the kernel's own (in-box peer_mem)")
        }
    }
}

/// Is the peer-memory API (`ib_register_peer_memory_client`) there, and who provides
/// it? MOFED/DOCA-OFED export it from ib_core up to 24.04 and from ib_uverbs from 25.04
/// on; the in-box cores from the kernel's own ib_uverbs (docs/abi.md 8). Where no
/// loaded module exports it, the module a `Module.symvers` names is the one to load.
fn peer_memory_core(h: &Host<'_>) -> Check {
    const ID: &str = "peer-memory-core";
    let Some(_) = h.kallsyms else {
        return Check::new(ID, Verdict::Warn, "cannot read /proc/kallsyms")
            .fix("run peermem doctor as root");
    };
    if let Some(m) = core_module(h) {
        return Check::new(
            ID,
            Verdict::Ok,
            format!(
                "ib_register_peer_memory_client found (module [{m}]): provided by {}",
                core_provider(h, m)
            ),
        );
    }
    if h.kallsyms_has("ib_register_peer_memory_client").is_some() {
        return Check::new(
            ID,
            Verdict::Ok,
            "ib_register_peer_memory_client found (no module): built into the kernel (in-box peer_mem)",
        );
    }
    if let Some((m, file, mofed)) = symvers_core(h) {
        if !h.module(&m) {
            let whose = if mofed {
                "MOFED/DOCA-OFED's"
            } else {
                "the kernel's"
            };
            let fix = if mofed {
                format!(
                    "modprobe {m} (systemctl restart openibd loads it too, as openibd does at \
                     boot)"
                )
            } else {
                format!("modprobe {m}")
            };
            return Check::new(
                ID,
                Verdict::Fail,
                format!(
                    "no loaded module exports ib_register_peer_memory_client: {whose} {file} \
                     names {m} as its exporter, and {m} is not loaded"
                ),
            )
            .fix(fix);
        }
        return Check::new(
            ID,
            Verdict::Fail,
            format!(
                "{m} is loaded but exports no ib_register_peer_memory_client, though {file} \
                 names it as the exporter: the loaded {m} is not the build {file} describes"
            ),
        )
        .fix(if mofed {
            format!(
                "load MOFED/DOCA-OFED's {m}: systemctl restart openibd (or rmmod {m} && \
                 modprobe {m}), and check that modinfo {m} names a file under updates/"
            )
        } else {
            format!("load the kernel's own {m} (rmmod {m} && modprobe {m})")
        });
    }
    let searched = match h.release.as_deref() {
        Some(rel) => format!(
            "neither MOFED/DOCA-OFED's (/usr/src/ofa_kernel) nor the kernel's \
             (/lib/modules/{rel}/build/Module.symvers)"
        ),
        None => "the running kernel's release is unknown".to_owned(),
    };
    let (core, uverbs) = (h.module("ib_core"), h.module("ib_uverbs"));
    if core && uverbs {
        return Check::new(
            ID,
            Verdict::Fail,
            format!(
                "ib_core and ib_uverbs are loaded and neither exports \
                 ib_register_peer_memory_client, and no Module.symvers names its exporter \
                 ({searched}): this RDMA core has no peer-memory core, as the upstream \
                 kernel's has none"
            ),
        )
        .fix(
            "install MOFED/DOCA-OFED (before building the GPU driver), or use dma-buf \
             (ibv_reg_dmabuf_mr)",
        );
    }
    let loaded = match (core, h.module_version("ib_core")) {
        (true, Some(v)) => {
            format!("ib_core {v} (MOFED/DOCA-OFED's) is loaded and does not export it, ")
        }
        (true, None) => "ib_core is loaded and does not export it, ".to_owned(),
        (false, _) => "ib_core is not loaded, ".to_owned(),
    };
    Check::new(
        ID,
        Verdict::Fail,
        format!(
            "no loaded module exports ib_register_peer_memory_client: {loaded}ib_uverbs is \
             not loaded, and no Module.symvers names its exporter ({searched})"
        ),
    )
    .fix(
        "modprobe ib_uverbs: the peer-memory core is in ib_uverbs (MOFED/DOCA-OFED 25.04 and \
         later, and the in-box cores of Ubuntu's, NV-Kernels' and openEuler's kernels) or in \
         ib_core (MOFED/DOCA-OFED 24.04 and earlier), and ib_uverbs loads ib_core; if \
         neither exports ib_register_peer_memory_client then, the kernel's RDMA core is the \
         upstream one: install MOFED/DOCA-OFED (before building the GPU driver), or use \
         dma-buf (ibv_reg_dmabuf_mr)",
    )
}

/// Is the loaded peer-memory client registered with the core? A client registers by
/// calling the core's exports, so it holds a reference on the core's module
/// (`/sys/module/<core>/holders/<client>`). A client module loaded without one was
/// built without the core's symbols and registered nothing: "GPU Direct RDMA
/// Disabled" in NCCL (NCCL issue 1939).
fn client_registered(h: &Host<'_>) -> Check {
    const ID: &str = "client-registered";
    let client = [DROPIN, NATIVE, "nv_peer_mem"]
        .into_iter()
        .find(|m| h.module(m));
    let Some(client) = client else {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            "no peer-memory client module is loaded",
        );
    };
    let Some(core) = core_module(h) else {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            format!("{client} is loaded; no peer-memory core module to register with (peer-memory-core)"),
        );
    };
    let holders = format!("/sys/module/{core}/holders");
    if !h.root.is_dir(&holders) {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            format!("{client} is loaded; {holders} cannot be read"),
        );
    }
    let seen = DETECTION_PATHS
        .iter()
        .filter(|p| h.root.exists(p))
        .copied()
        .collect::<Vec<_>>();
    if h.root.exists(&format!("{holders}/{client}")) {
        return Check::new(
            ID,
            Verdict::Ok,
            format!(
                "{client} is registered with {core} (it holds {core}; applications see {})",
                if seen.is_empty() {
                    "none of their paths".to_owned()
                } else {
                    seen.join(", ")
                }
            ),
        );
    }
    let fix = if matches!(h.client(), Client::Nvidia { .. }) {
        format!(
            "rebuild NVIDIA's nvidia-peermem against the peer-memory core's sources (MOFED/DOCA-OFED's /usr/src/ofa_kernel, or the kernel's own RDMA core), then rmmod {client} && modprobe {client}; or use peermem's drop-in instead (docs/install.md)"
        )
    } else {
        format!(
            "rebuild against the core: dkms build --force peermem-dropin/{v} -k $(uname -r) && dkms install --force peermem-dropin/{v} -k $(uname -r), then rmmod {client} && modprobe {client}",
            v = peermem_version()
        )
    };
    Check::new(
        ID,
        Verdict::Fail,
        format!(
            "{client} is loaded but not registered with the peer-memory core: it holds no reference on {core}, so it was built without the core's symbols and registered no client; NCCL reports \"GPU Direct RDMA Disabled\" (NCCL issue 1939)"
        ),
    )
    .fix(fix)
}

fn iommu(h: &Host<'_>) -> Check {
    const ID: &str = "iommu";
    let units = h.root.list("/sys/class/iommu");
    if units.is_empty() {
        return Check::new(ID, Verdict::Ok, "no IOMMU: DMA addresses are bus addresses");
    }
    let cmdline = h.root.read("/proc/cmdline").unwrap_or_default();
    let pt_cmdline = cmdline
        .split_whitespace()
        .any(|w| w == "iommu=pt" || w == "iommu.passthrough=1");
    let groups = h.root.list("/sys/kernel/iommu_groups");
    let types: Vec<String> = groups
        .iter()
        .filter_map(|g| {
            h.root
                .read_trimmed(&format!("/sys/kernel/iommu_groups/{g}/type"))
        })
        .collect();
    let all_identity = !types.is_empty() && types.iter().all(|t| t == "identity");
    if all_identity || (types.is_empty() && pt_cmdline) {
        let how = if all_identity {
            "every IOMMU group has type identity"
        } else {
            "iommu passthrough on the kernel command line"
        };
        return Check::new(
            ID,
            Verdict::Ok,
            format!("IOMMU on ({}) in passthrough mode: {how}", units.join(", ")),
        );
    }
    Check::new(
        ID,
        Verdict::Warn,
        format!(
            "IOMMU on ({}) and translating: DMA addresses are IOVAs; GPUDirect RDMA needs \
             passthrough, or ACS/ATS set up so peer traffic is routed",
            units.join(", ")
        ),
    )
    .fix("boot with iommu=pt (or intel_iommu=on iommu=pt / amd_iommu=on iommu=pt), or configure ACS/ATS")
}

/// The free BAR1 below which pins are refused: the driver keeps 36 MiB in reserve.
const BAR1_RESERVE_MIB: u64 = 36;

fn smi_checks(h: &Host<'_>) -> Vec<Check> {
    let Some(smi) = &h.smi else {
        let why = "no GPU facts (neither NVML nor nvidia-smi answered, or --no-nvidia-smi)";
        return ["bar1", "mig", "confidential-compute"]
            .into_iter()
            .map(|id| Check::new(id, Verdict::NotApplicable, why))
            .collect();
    };
    if smi.gpus.is_empty() {
        let why = "no GPU listed (by NVML or nvidia-smi)";
        return ["bar1", "mig", "confidential-compute"]
            .into_iter()
            .map(|id| Check::new(id, Verdict::NotApplicable, why))
            .collect();
    }

    // BAR1: the resource each pin spends (docs/abi.md 1.5).
    let mut bar1 = Vec::new();
    let mut bar1_verdict = Verdict::Ok;
    for g in &smi.gpus {
        let (Some(total), used, free) = (g.bar1_total_mib, g.bar1_used_mib, g.bar1_free_mib) else {
            bar1.push(format!("{}: no BAR1 figures", g.bus_id));
            continue;
        };
        let free = free.or_else(|| used.map(|u| total.saturating_sub(u)));
        let mut line = format!("{}: BAR1 {total} MiB", g.bus_id);
        if let Some(u) = used {
            let _ = write!(line, ", {u} MiB used");
        }
        if let Some(f) = free {
            let _ = write!(line, ", {f} MiB free");
            if f <= BAR1_RESERVE_MIB + total / 10 {
                bar1_verdict = Verdict::Warn;
                line.push_str(" (nearly exhausted)");
            }
        }
        if total <= 256 {
            bar1_verdict = Verdict::Warn;
            line.push_str(" (small BAR1: large registrations fail)");
        }
        bar1.push(line);
    }
    let mut bar1 = Check::new("bar1", bar1_verdict, bar1.join("; "));
    if bar1.verdict == Verdict::Warn {
        bar1 = bar1.fix(
            "pins are refused with ENOMEM when BAR1 runs out: enable a large BAR1 / Resizable BAR, \
             pin less, and watch refused_bar1_exhausted in `peermem status`",
        );
    }

    let mig_on: Vec<&str> = smi
        .gpus
        .iter()
        .filter(|g| g.mig_enabled())
        .map(|g| g.bus_id.as_str())
        .collect();
    let mig = if !mig_on.is_empty() {
        Check::new(
            "mig",
            Verdict::Warn,
            format!("MIG enabled on {}", mig_on.join(", ")),
        )
        .fix("GPUDirect RDMA on MIG instances needs CUDA/driver support for the instance; disable MIG (nvidia-smi -mig 0) if registrations fail")
    } else if smi.gpus.iter().any(|g| g.mig_current.is_some()) {
        Check::new("mig", Verdict::Ok, "MIG disabled")
    } else {
        Check::new("mig", Verdict::NotApplicable, "no MIG mode reported")
    };

    let cc = if smi.cc_on() {
        let persistent = [NATIVE, DROPIN].iter().find_map(|m| {
            h.root.read_trimmed(&format!(
                "/sys/module/{m}/parameters/persistent_api_support"
            ))
        });
        if persistent.as_deref() == Some("0") {
            Check::new(
                "confidential-compute",
                Verdict::Warn,
                "confidential compute is on; peermem runs with persistent_api_support=0 (callback pins)",
            )
            .fix("callback pins only: persistent pins are not supported under confidential compute")
        } else {
            Check::new(
                "confidential-compute",
                Verdict::Fail,
                "confidential compute is on: the persistent pin API is not supported",
            )
            .fix("load peermem with persistent_api_support=0 (modprobe peermem persistent_api_support=0), or turn confidential compute off")
        }
    } else if smi.cc_known() {
        Check::new(
            "confidential-compute",
            Verdict::Ok,
            "confidential compute off",
        )
    } else {
        Check::new(
            "confidential-compute",
            Verdict::NotApplicable,
            "no confidential-compute state reported",
        )
    };
    vec![bar1, mig, cc]
}
