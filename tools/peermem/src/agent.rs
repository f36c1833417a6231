// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem agent`: the entrypoint of a container that loads peermem into its node's
//! kernel, beside NVIDIA's GPU Operator and the Network Operator (docs/fleet.md).
//!
//! - `agent run` waits for the GPU driver and the RDMA peer-memory core, loads the
//!   module file (under the drop-in name by default), loads it again whenever it
//!   disappears from the host (an `openibd restart` by the Network Operator's driver
//!   container unloads `nvidia_peermem` first, then reloads the RDMA stack) and the
//!   providers are back, serves `/metrics`, and on SIGTERM unloads it: refused while
//!   registrations are live, retried until the grace period ends, never forced.
//! - `agent probe`: readiness and liveness: the module loaded, its initialisation
//!   finished (`/sys/module/<name>/initstate` "live"). peermem's init registers with
//!   the peer-memory core and fails the load when the core refuses, so a live module
//!   is a registered client.
//! - `agent stop`: the preStop hook: the same unload as on SIGTERM.
//!
//! It refuses to start where another peer-memory client is loaded (a packaged
//! peermem, NVIDIA's nvidia-peermem, Mellanox's nv_peer_mem): never two clients. After
//! the start, every poll, every report of ready and every unload first checks that the
//! module of that name on the host is this container's ([`owner`]: the srcversion of
//! its module file): one of another build, loaded later (by the GPU Operator, a
//! packaged boot load, an admin), is never adopted, reported ready or unloaded. A load
//! that fails is said once per cause and retried with a backoff ([`Backoff`]), not
//! every second. Every file is read under a [`Root`] (the host's `/sys`, `/proc` and
//! `/run` as the DaemonSet mounts them); what the agent owns is recorded in the
//! container ([`OWNED_FILE`]) for `agent probe` and `agent stop`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object::{Object, ObjectSection};

use crate::status;
use crate::Root;

/// Written by the GPU Operator's driver container once nvidia.ko is loaded.
pub const DRIVER_CTR_READY: &str = "/run/nvidia/validations/.driver-ctr-ready";
/// Written by the Network Operator's MOFED/DOCA driver container once its RDMA stack
/// is loaded.
pub const MOFED_CTR_READY: &str = "/run/mellanox/drivers/.driver-ready";
/// Peer-memory clients other than peermem's: two cannot be loaded together.
pub const PEER_CLIENTS: [&str; 3] = ["nvidia_peermem", "peermem", "nv_peer_mem"];

/// What a module file declares (its `.modinfo` section).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleFile {
    /// `name=`: the module's name once loaded (`nvidia_peermem`, `peermem`).
    pub name: String,
    /// `version=`.
    pub version: Option<String>,
    /// `srcversion=`: the checksum of its sources, also in `/sys/module/<name>/`.
    pub srcversion: Option<String>,
}

impl ModuleFile {
    /// Reads `path` (an uncompressed `.ko`).
    pub fn read(path: &Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&bytes).ok_or_else(|| format!("{}: not a kernel module", path.display()))
    }

    /// The `.modinfo` fields of an ELF module image.
    pub fn parse(elf: &[u8]) -> Option<Self> {
        let file = object::File::parse(elf).ok()?;
        let info = file.section_by_name(".modinfo")?.data().ok()?;
        let field = |key: &str| {
            info.split(|&c| c == 0).find_map(|kv| {
                let kv = std::str::from_utf8(kv).ok()?;
                kv.strip_prefix(key)?.strip_prefix('=').map(str::to_owned)
            })
        };
        Some(ModuleFile {
            name: field("name")?,
            version: field("version"),
            srcversion: field("srcversion"),
        })
    }
}

/// Where `agent run` records the module it owns (`NAME SRCVERSION`, its module file's),
/// in the container's own file system: `agent probe` and `agent stop`, run in the same
/// container, read it. `PEERMEM_AGENT_OWNED` overrides the path.
pub const OWNED_FILE: &str = "/tmp/peermem-agent.owned";

fn owned_path() -> PathBuf {
    std::env::var_os("PEERMEM_AGENT_OWNED").map_or_else(|| PathBuf::from(OWNED_FILE), PathBuf::from)
}

/// Records `m` as the module this container owns.
pub fn record_owned(m: &ModuleFile) -> Result<(), String> {
    let p = owned_path();
    let line = format!("{} {}\n", m.name, m.srcversion.as_deref().unwrap_or("-"));
    std::fs::write(&p, line).map_err(|e| format!("{}: {e}", p.display()))
}

/// The module `agent run` recorded as this container's, if it runs here.
pub fn read_owned() -> Option<ModuleFile> {
    let text = std::fs::read_to_string(owned_path()).ok()?;
    let mut w = text.split_whitespace();
    let name = w.next()?.to_owned();
    let srcversion = w.next().filter(|s| *s != "-").map(str::to_owned);
    Some(ModuleFile {
        name,
        version: None,
        srcversion,
    })
}

/// Whose module of `ours`'s name the host has loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// None is loaded.
    NotLoaded,
    /// This container's: the srcversion of its module file.
    Ours,
    /// Another build's; the words that say whose, for the log and the probe.
    Foreign(String),
}

/// Whose module of `ours`'s name is loaded: this container's only when the host's
/// srcversion is its file's (a file without one owns nothing).
pub fn owner(root: &Root, ours: &ModuleFile) -> Owner {
    let dir = format!("/sys/module/{}", ours.name);
    if !root.is_dir(&dir) {
        return Owner::NotLoaded;
    }
    let srcversion = root.read_trimmed(&format!("{dir}/srcversion"));
    if srcversion.is_some() && srcversion == ours.srcversion {
        return Owner::Ours;
    }
    let version = root
        .read_trimmed(&format!("{dir}/version"))
        .unwrap_or_else(|| "unknown".to_owned());
    Owner::Foreign(format!(
        "the host's {} (version {version}, srcversion {}) is not this container's module \
         (srcversion {})",
        ours.name,
        srcversion.as_deref().unwrap_or("unknown"),
        ours.srcversion.as_deref().unwrap_or("unknown")
    ))
}

/// [`probe`] of this container's module: not ready while the module of its name is
/// another build's.
pub fn probe_owned(root: &Root, ours: &ModuleFile) -> Result<String, String> {
    match owner(root, ours) {
        Owner::Foreign(why) => Err(why),
        Owner::NotLoaded | Owner::Ours => probe(root, &ours.name),
    }
}

/// Is the GPU driver there? `Ok(how it is known)`, `Err(what is missing)`.
pub fn gpu_driver(root: &Root) -> Result<String, String> {
    if root.exists(DRIVER_CTR_READY) {
        Ok(format!(
            "the GPU Operator's driver container is ready ({DRIVER_CTR_READY})"
        ))
    } else if root.is_dir("/sys/module/nvidia") {
        Ok("nvidia is loaded".to_owned())
    } else {
        Err(format!(
            "the GPU driver: nvidia is not loaded and there is no {DRIVER_CTR_READY}"
        ))
    }
}

/// The module that exports `symbol` now (`[built in]` for the kernel), from
/// `/proc/kallsyms`.
fn exporter(root: &Root, symbol: &str) -> Option<String> {
    root.read("/proc/kallsyms").and_then(|k| {
        k.lines()
            .find(|l| l.split_whitespace().nth(2) == Some(symbol))
            .map(|l| {
                l.split_whitespace()
                    .nth(3)
                    .unwrap_or("[built in]")
                    .to_owned()
            })
    })
}

/// Which load of module `name` is on the host now: the inode of its `/sys/module`
/// directory, which sysfs numbers anew at each load. `None`: not loaded.
pub fn instance(root: &Root, name: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(root.path(&format!("/sys/module/{name}")))
        .ok()
        .map(|m| m.ino())
}

/// Loads of modules by name: the inode of each one's `/sys/module` directory.
pub type Loads = std::collections::BTreeMap<String, u64>;

/// The loads on the host now of the modules named in `names` (those loaded).
pub fn loads_of<'a>(root: &Root, names: impl IntoIterator<Item = &'a String>) -> Loads {
    names
        .into_iter()
        .filter_map(|m| instance(root, m).map(|i| (m.clone(), i)))
        .collect()
}

/// The modules module `user` is bound to, and which load of each: those whose
/// `/sys/module/<module>/holders` lists `user` (the kernel links each module whose
/// symbols `user` resolved at its load, weak references included: the peer-memory
/// core's module and nvidia). Each directory is opened once and both its inode and its
/// holders are read through that descriptor, so a load returned is one `user` held: a
/// provider reloaded while this reads (an openibd restart between the probe and this
/// call) is not taken for the one the module was bound to.
pub fn bound_providers(root: &Root, user: &str) -> Loads {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    root.list("/sys/module")
        .into_iter()
        .filter(|m| m != user)
        .filter_map(|m| {
            let dir = std::fs::File::open(root.path(&format!("/sys/module/{m}"))).ok()?;
            let ino = dir.metadata().ok()?.ino();
            let holder = format!("/proc/self/fd/{}/holders/{user}", dir.as_raw_fd());
            std::fs::symlink_metadata(holder).ok().map(|_| (m, ino))
        })
        .collect()
}

/// Is the RDMA peer-memory core there? `Ok(how it is known)`, `Err(what is missing)`.
/// The Network Operator's readiness file alone is not enough: it is written once the
/// stack loaded, and stays while an `openibd restart` reloads it.
pub fn rdma_core(root: &Root) -> Result<String, String> {
    match exporter(root, "ib_register_peer_memory_client") {
        Some(module) if root.exists(MOFED_CTR_READY) => Ok(format!(
            "the RDMA peer-memory core is loaded ({module}) and the Network Operator's driver \
             container is ready ({MOFED_CTR_READY})"
        )),
        Some(module) => Ok(format!("the RDMA peer-memory core is loaded ({module})")),
        None => Err(
            "the RDMA peer-memory core: no loaded module exports ib_register_peer_memory_client \
             (/proc/kallsyms)"
                .to_owned(),
        ),
    }
}

/// Another peer-memory client on the host, or `ours` loaded from another file: why
/// the agent refuses to start. `ours` loaded from the same sources (the same
/// srcversion: this container's earlier run) is adopted.
pub fn conflict(root: &Root, ours: &ModuleFile) -> Option<String> {
    PEER_CLIENTS.iter().find_map(|&name| {
        let dir = format!("/sys/module/{name}");
        if !root.is_dir(&dir) {
            return None;
        }
        let srcversion = root.read_trimmed(&format!("{dir}/srcversion"));
        if name == ours.name && srcversion.is_some() && srcversion == ours.srcversion {
            return None;
        }
        let version = root
            .read_trimmed(&format!("{dir}/version"))
            .unwrap_or_else(|| "unknown".to_owned());
        Some(format!(
            "the host already has {name} loaded (version {version}, srcversion {}), not this \
             container's module: two peer-memory clients cannot run together. Unload it first \
             (a packaged peermem: systemctl disable --now peermem; NVIDIA's or another: rmmod \
             {name}), or keep this DaemonSet off the node",
            srcversion.as_deref().unwrap_or("unknown")
        ))
    })
}

/// Readiness and liveness of module `name`: `Ok(detail)` when it is loaded and its
/// initialisation finished, which means it registered with the peer-memory core.
pub fn probe(root: &Root, name: &str) -> Result<String, String> {
    match root
        .read_trimmed(&format!("/sys/module/{name}/initstate"))
        .as_deref()
    {
        Some("live") => {
            let refs = root
                .read_trimmed(&format!("/sys/module/{name}/refcnt"))
                .unwrap_or_else(|| "?".to_owned());
            Ok(format!(
                "{name} is loaded and registered with the peer-memory core (references: {refs})"
            ))
        }
        Some(state) => Err(format!("{name} is {state}, not live")),
        None => Err(format!("{name} is not loaded")),
    }
}

/// The live registrations of loaded module `name` (each holds a module reference).
pub fn live_registrations(root: &Root, name: &str) -> Option<u64> {
    root.read_trimmed(&format!("/sys/module/{name}/refcnt"))?
        .parse()
        .ok()
}

/// `/metrics`: peermem's counters and the core's, as `peermem status --prometheus`.
pub fn metrics(root: &Root) -> String {
    let core = status::read_core(root);
    let module = status::loaded_module(root);
    match status::read(root) {
        Ok(s) => status::render_prometheus(&s, module, &core),
        Err(_) => status::render_prometheus_down(module, &core),
    }
}

/// What the agent's loop knows beyond the host's files, for `/healthz` and `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Health {
    /// Why the last load failed, while it has not succeeded since.
    pub load_error: Option<String>,
    /// Loads that failed since the agent started.
    pub load_failures: u64,
    /// A module of its name that is not this container's holds the host.
    pub foreign: Option<String>,
}

/// The agent's own lines of `/metrics`.
pub fn health_metrics(h: &Health) -> String {
    format!(
        "# HELP peermem_agent_load_failures_total Loads of the module that failed since the agent started.\n\
         # TYPE peermem_agent_load_failures_total counter\n\
         peermem_agent_load_failures_total {}\n\
         # HELP peermem_agent_foreign_module 1 while a module of its name that is not this container's is loaded.\n\
         # TYPE peermem_agent_foreign_module gauge\n\
         peermem_agent_foreign_module {}\n",
        h.load_failures,
        u8::from(h.foreign.is_some())
    )
}

/// Readiness: [`probe_owned`], and while the module is not loaded the last load's
/// failure.
pub fn ready(root: &Root, ours: &ModuleFile, h: &Health) -> Result<String, String> {
    probe_owned(root, ours).map_err(|e| match &h.load_error {
        Some(load) if owner(root, ours) == Owner::NotLoaded => format!("{e}: {load}"),
        _ => e,
    })
}

/// Serves `GET /metrics` (and `GET /healthz`: [`ready`]) on `addr` from a thread of its
/// own. Returns the address bound (`addr` may ask for port 0).
pub fn serve(
    root: Root,
    ours: ModuleFile,
    health: Arc<std::sync::Mutex<Health>>,
    addr: &str,
) -> Result<std::net::SocketAddr, String> {
    let server =
        tiny_http::Server::http(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| format!("{addr} is not an IP address"))?;
    std::thread::spawn(move || {
        for request in server.incoming_requests() {
            let h = health.lock().map(|h| h.clone()).unwrap_or_default();
            let (code, text) = match (request.method(), request.url()) {
                (tiny_http::Method::Get, "/metrics") => (200, metrics(&root) + &health_metrics(&h)),
                (tiny_http::Method::Get, "/healthz") => match ready(&root, &ours, &h) {
                    Ok(d) => (200, d + "\n"),
                    Err(e) => (503, e + "\n"),
                },
                _ => (404, "not found: GET /metrics or /healthz\n".to_owned()),
            };
            let header = tiny_http::Header::from_bytes(
                "Content-Type",
                "text/plain; version=0.0.4; charset=utf-8",
            )
            .expect("a valid header");
            let _ = request.respond(
                tiny_http::Response::from_string(text)
                    .with_status_code(code)
                    .with_header(header),
            );
        }
    });
    Ok(bound)
}

/// Prints one line of the agent's log (standard error: the container's log).
fn say(msg: &str) {
    eprintln!("peermem agent: {msg}");
}

/// Unloads module `name` (rmmod, never forced), retrying while registrations hold it,
/// until `grace` has passed. `Ok` once it is gone.
pub fn unload(root: &Root, name: &str, grace: Duration) -> Result<(), String> {
    let deadline = Instant::now() + grace;
    let mut said = None;
    loop {
        if !root.is_dir(&format!("/sys/module/{name}")) {
            return Ok(());
        }
        let out = Command::new("rmmod")
            .arg(name)
            .output()
            .map_err(|e| format!("cannot run rmmod: {e}"))?;
        if out.status.success() {
            say(&format!("unloaded {name}"));
            return Ok(());
        }
        let live = live_registrations(root, name).unwrap_or(0);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "{name} is still loaded after the grace period ({} s): {live} live registration(s) \
                 hold it ({}); it is never forced out: deregister them (end the jobs using GPU \
                 memory with RDMA), then rmmod {name}",
                grace.as_secs(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        if said != Some(live) {
            say(&format!(
                "cannot unload {name} yet: {live} live registration(s); retrying until they end \
                 ({} s of the grace period left; never forced)",
                left.as_secs()
            ));
            said = Some(live);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// [`unload`] of this container's module only: one of another build of that name is
/// left loaded, saying so (`Ok`: nothing of this container's is left).
pub fn unload_owned(root: &Root, ours: &ModuleFile, grace: Duration) -> Result<(), String> {
    match owner(root, ours) {
        Owner::NotLoaded => Ok(()),
        Owner::Foreign(why) => {
            say(&format!("leaving it loaded: {why}"));
            Ok(())
        }
        Owner::Ours => unload(root, &ours.name, grace),
    }
}

/// When to try a load again after failures: 1 s after the first, doubling to 5 min;
/// a cause is said once, when it first appears or changes.
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    delay: Duration,
    next: Option<Instant>,
    cause: Option<String>,
}

/// The longest wait between two loads.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);

impl Backoff {
    /// Whether a load may be tried at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.next.is_none_or(|n| now >= n)
    }

    /// A load failed at `now` with `cause`: the next is due after the delay, doubled.
    /// Returns the line to say where the cause is new.
    pub fn failed(&mut self, cause: &str, now: Instant) -> Option<String> {
        self.delay = if self.delay.is_zero() {
            Duration::from_secs(1)
        } else {
            (self.delay * 2).min(BACKOFF_MAX)
        };
        self.next = Some(now + self.delay);
        if self.cause.as_deref() == Some(cause) {
            return None;
        }
        self.cause = Some(cause.to_owned());
        Some(format!(
            "{cause}; retrying with a backoff up to {} s, said again only if the cause changes",
            BACKOFF_MAX.as_secs()
        ))
    }

    /// The current delay (the wait after the last failure).
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// A load succeeded: the next failure starts again at 1 s.
    pub fn reset(&mut self) {
        *self = Backoff::default();
    }
}

/// What an insmod failure means on this node, from its words (insmod's, which carry
/// the kernel's errno).
pub fn load_cause(stderr: &str) -> &'static str {
    if stderr.contains("Invalid module format") {
        "the module was built for another kernel (invalid module format: another release \
         or configuration than this node's)"
    } else if stderr.contains("Unknown symbol") {
        "a symbol the module needs is missing (unknown symbol: the GPU driver or the RDMA \
         core is not the one it was built against)"
    } else if stderr.contains("Key was rejected") || stderr.contains("Required key not available") {
        "the kernel refused the module's signature (Secure Boot or module.sig_enforce: sign \
         it with a key the node trusts)"
    } else if stderr.contains("File exists") {
        "a module of that name is loaded already"
    } else {
        "insmod failed"
    }
}

/// Loads `file` with `params`.
fn load(file: &Path, params: &[String]) -> Result<(), String> {
    let out = Command::new("insmod")
        .arg(file)
        .args(params)
        .output()
        .map_err(|e| format!("cannot run insmod: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: insmod {}: {} (the kernel log says more: dmesg | grep peermem)",
            load_cause(&String::from_utf8_lossy(&out.stderr)),
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// How `agent run` behaves.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The module file to load.
    pub file: PathBuf,
    /// Its parameters (`persistent_api_support=0`, ...).
    pub params: Vec<String>,
    /// Where `/metrics` is served (`None`: not served).
    pub metrics_addr: Option<String>,
    /// How long an unload is retried after SIGTERM.
    pub grace: Duration,
    /// How often the providers and the module are looked at.
    pub interval: Duration,
    /// After the module was unloaded by someone else, how long the agent waits for
    /// the core or the driver to be reloaded before loading it again anyway.
    pub reload_after: Duration,
}

/// What one poll of the agent's loop found (`Watch::poll`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// The module is loaded.
    Loaded,
    /// Not loaded, and not to be loaded yet: it was unloaded by someone else and
    /// none of the providers it was bound to has been reloaded since (or this poll
    /// found it gone).
    WentAway,
    /// It went away since the last poll, and a provider has been reloaded already:
    /// load it.
    WentAwayReload,
    /// Not loaded, and still held off.
    Hold,
    /// Not loaded: load it (when the providers are there).
    Load,
    /// A module of its name that is not this container's is loaded: neither adopted
    /// nor loaded over.
    Foreign,
}

/// What one poll read of the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sample {
    /// The module is loaded, bound to these loads of its providers (`bound_providers`).
    Loaded(Loads),
    /// The module is not loaded; the loads now of the providers it was last seen bound
    /// to (`loads_of`).
    Gone(Loads),
    /// A module of its name is loaded that is not this container's ([`owner`]): whose.
    Foreign(String),
}

impl Sample {
    /// Reads the state of this container's module `ours` on `root`, and the providers
    /// of `watch`'s.
    pub fn read(root: &Root, ours: &ModuleFile, watch: &Watch) -> Self {
        match owner(root, ours) {
            Owner::Foreign(why) => Sample::Foreign(why),
            Owner::Ours if probe(root, &ours.name).is_ok() => {
                Sample::Loaded(bound_providers(root, &ours.name))
            }
            Owner::Ours | Owner::NotLoaded => Sample::Gone(loads_of(root, watch.seen.keys())),
        }
    }
}

/// The agent's view of its module from one poll to the next.
///
/// Unloaded by someone else, the module is loaded again only once a module it was
/// bound to (the RDMA core's, nvidia) is a new load (another `/sys/module` directory
/// than the one it was bound to), or after `reload_after`. An openibd restart unloads
/// nvidia_peermem first and the RDMA core next: loaded again in between, the module
/// would hold the core and fail the restart (doca-driver-build PR 481). The providers
/// compared against are those the module was last seen bound to, not those of the
/// poll that found it gone: a restart that finished between two polls has reloaded
/// the core already, and waits for no other reload.
#[derive(Debug, Default)]
pub struct Watch {
    loaded: bool,
    /// The providers' loads the module was last seen bound to.
    seen: Loads,
    /// Unloaded by someone else: the providers' loads it was bound to, and when it was
    /// found gone.
    held: Option<(Loads, Instant)>,
}

impl Watch {
    /// One poll at `now` that read `sample`.
    pub fn poll(&mut self, sample: Sample, now: Instant, reload_after: Duration) -> Poll {
        let current = match sample {
            Sample::Loaded(bound) => {
                self.loaded(bound);
                return Poll::Loaded;
            }
            Sample::Foreign(_) => {
                // Ours is not on the host; once the other goes, it is loaded at once.
                self.loaded = false;
                self.held = None;
                return Poll::Foreign;
            }
            Sample::Gone(current) => current,
        };
        let went_away = std::mem::replace(&mut self.loaded, false);
        if went_away {
            self.held = Some((self.seen.clone(), now));
        }
        if let Some((then, since)) = &self.held {
            let reloaded = current
                .iter()
                .any(|(m, ino)| then.get(m).is_some_and(|t| t != ino));
            if reloaded || now.saturating_duration_since(*since) >= reload_after {
                self.held = None;
            }
        }
        match (went_away, self.held.is_some()) {
            (true, true) => Poll::WentAway,
            (true, false) => Poll::WentAwayReload,
            (false, true) => Poll::Hold,
            (false, false) => Poll::Load,
        }
    }

    /// The module is loaded (found so), bound to the providers' loads `bound`. A
    /// provider seen before and missing from `bound` (read while it was being
    /// reloaded) keeps the load seen before.
    pub fn loaded(&mut self, bound: Loads) {
        self.loaded = true;
        self.seen.extend(bound);
        self.held = None;
    }

    /// The agent loaded the module, bound to `bound`: the providers seen before
    /// are forgotten.
    pub fn loaded_anew(&mut self, bound: Loads) {
        self.seen.clear();
        self.loaded(bound);
    }
}

/// Exit status of `agent run` refusing to start (another client, a bad module file).
pub const EXIT_REFUSED: u8 = 3;

/// `agent run`: returns the exit status.
pub fn run(root: &Root, cfg: &RunConfig) -> u8 {
    let module = match ModuleFile::read(&cfg.file) {
        Ok(m) => m,
        Err(e) => {
            say(&format!("refusing to start: {e}"));
            return EXIT_REFUSED;
        }
    };
    let name = module.name.clone();
    say(&format!(
        "peermem {} agent: module {name} (version {}) from {}",
        crate::peermem_version(),
        module.version.as_deref().unwrap_or("unknown"),
        cfg.file.display()
    ));
    if let Some(why) = conflict(root, &module) {
        say(&format!("refusing to start: {why}"));
        return EXIT_REFUSED;
    }
    if let Err(e) = record_owned(&module) {
        say(&format!(
            "cannot record the module this container owns ({e}): agent probe and agent stop \
             will go by its name only"
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            say(&format!("cannot handle signal {sig}: {e}"));
            return 1;
        }
    }
    let health = Arc::new(std::sync::Mutex::new(Health::default()));
    if let Some(addr) = &cfg.metrics_addr {
        match serve(root.clone(), module.clone(), Arc::clone(&health), addr) {
            Ok(bound) => say(&format!("serving /metrics and /healthz on {bound}")),
            Err(e) => {
                say(&e);
                return 1;
            }
        }
    }
    let update = |f: &dyn Fn(&mut Health)| {
        if let Ok(mut h) = health.lock() {
            f(&mut h);
        }
    };
    let mut watch = Watch::default();
    let mut waiting: Option<(String, Instant)> = None;
    let mut backoff = Backoff::default();
    let mut foreign_said: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        let sample = Sample::read(root, &module, &watch);
        let foreign = match &sample {
            Sample::Foreign(why) => Some(why.clone()),
            _ => None,
        };
        // Said once per change: another build's module came, or went.
        if foreign != foreign_said {
            match &foreign {
                Some(why) => say(&format!(
                    "not adopting it, not loading over it, not ready while it is loaded: {why}"
                )),
                None if foreign_said.is_some() => say(&format!(
                    "the other build's {name} is gone: loading this container's"
                )),
                None => {}
            }
            update(&|h| h.foreign = foreign.clone());
            foreign_said = foreign;
        }
        let poll = watch.poll(sample, Instant::now(), cfg.reload_after);
        if poll == Poll::WentAway || poll == Poll::WentAwayReload {
            say(&format!(
                "{name} was unloaded from the host (an openibd restart, a driver upgrade): \
                 loading it again once the RDMA core or the GPU driver has been reloaded, \
                 or in {} s",
                cfg.reload_after.as_secs()
            ));
        }
        if (poll == Poll::Load || poll == Poll::WentAwayReload) && backoff.due(Instant::now()) {
            match gpu_driver(root).and_then(|g| rdma_core(root).map(|c| (g, c))) {
                Ok((gpu, core)) => match load(&cfg.file, &cfg.params) {
                    Ok(()) => {
                        say(&format!("loaded {name}: {gpu}; {core}"));
                        watch.loaded_anew(bound_providers(root, &name));
                        waiting = None;
                        backoff.reset();
                        update(&|h| h.load_error = None);
                    }
                    Err(e) => {
                        if let Some(line) = backoff.failed(&e, Instant::now()) {
                            say(&line);
                        }
                        update(&|h| {
                            h.load_failures += 1;
                            h.load_error = Some(e.clone());
                        });
                    }
                },
                Err(missing) => {
                    // Said when it changes, and every 30 s while it lasts.
                    let again = match &waiting {
                        Some((m, at)) => *m != missing || at.elapsed() >= Duration::from_secs(30),
                        None => true,
                    };
                    if again {
                        say(&format!("waiting for {missing}"));
                        waiting = Some((missing, Instant::now()));
                    }
                }
            }
        }
        sleep_unless(&stop, cfg.interval);
    }
    say(&format!("stopping: unloading {name}"));
    match unload_owned(root, &module, cfg.grace) {
        Ok(()) => 0,
        Err(e) => {
            say(&e);
            1
        }
    }
}

/// Sleeps for `d`, waking early once `stop` is set.
fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
    }
}
