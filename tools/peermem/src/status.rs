// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem status`: the module's debugfs files, parsed and rendered.
//!
//! The module writes two files under `/sys/kernel/debug/peermem/` (the same directory
//! for `peermem.ko` and the drop-in `nvidia-peermem.ko`):
//!
//! - `stats`: one `name value` per line. Names the tool does not know are kept.
//! - `pins`: a `#` header, then one line per live pin:
//!   `id tgid mode start end bytes users state [space]` (`space`, a hex identifier of
//!   the address space, since module version 0.1.0's debugfs revision 2).

use std::fmt::{self, Write};

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::Root;

/// Where the module's debugfs files live on a host.
pub const DEBUGFS_DIR: &str = "/sys/kernel/debug/peermem";

/// The counters the module is known to write, in its order; the rest are kept as-is.
/// The module declares them in src/stats.rs (`Stats::COUNTERS`, then `refused_` and
/// the name of each of `Refusal::REASONS`); tests/known_stats.rs keeps this list equal to that one.
pub const KNOWN_STATS: [&str; 17] = [
    "registrations",
    "releases",
    "pins",
    "pin_reuses",
    "invalidations",
    "free_callbacks",
    "pins_now",
    "sg_lists_now",
    "bytes_pinned_now",
    "bytes_pinned_peak",
    "refused_bad_range",
    "refused_bar1_exhausted",
    "refused_pin_failed",
    "refused_not_pci",
    "refused_dma_map_failed",
    "refused_freed",
    "refused_no_memory",
];

/// A counter's value: a number, or text kept as written if a future module writes one.
/// In JSON, a number or a string.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// A u64 counter.
    Num(u64),
    /// Anything else, kept verbatim.
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Num(n) => write!(f, "{n}"),
            Value::Text(t) => f.write_str(t),
        }
    }
}

/// The counters, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `(name, value)` pairs, in the order the module wrote them.
    pub entries: Vec<(String, Value)>,
}

/// In JSON, an object of the counters in file order.
impl Serialize for Stats {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (name, value) in &self.entries {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl Stats {
    /// A numeric counter by name.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.entries.iter().find_map(|(n, v)| match v {
            Value::Num(x) if n == name => Some(*x),
            _ => None,
        })
    }

    /// The counters whose names the tool does not know.
    pub fn unknown(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !KNOWN_STATS.contains(n))
    }
}

/// One live pin of GPU memory. In JSON, addresses are hex strings (JSON numbers lose
/// precision above 2^53) and a missing address space is `""`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pin {
    /// The module's id for the pin.
    pub id: u64,
    /// The process (thread group) that owns the GPU memory.
    pub tgid: u64,
    /// `callback` or `persistent`.
    pub mode: String,
    /// First byte pinned (64 KiB aligned).
    #[serde(serialize_with = "hex")]
    pub start: u64,
    /// One past the last byte pinned.
    #[serde(serialize_with = "hex")]
    pub end: u64,
    /// Bytes pinned.
    pub bytes: u64,
    /// Registrations sharing the pin.
    pub users: u64,
    /// `live`, or `freed` (the owner freed the memory; the pin waits for its users).
    pub state: String,
    /// The address space (mm and thread group) the pin belongs to, as the module
    /// identifies it; absent from older modules' files.
    #[serde(serialize_with = "empty_if_none")]
    pub space: Option<String>,
}

fn hex<S: Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{value:#x}"))
}

fn empty_if_none<S: Serializer>(value: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(value.as_deref().unwrap_or(""))
}

/// A line of a debugfs file that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The file (`stats` or `pins`).
    pub file: &'static str,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} line {}: {}", self.file, self.line, self.what)
    }
}

/// Parses the `stats` file. Blank lines and `#` comments are skipped.
pub fn parse_stats(text: &str) -> Result<Stats, ParseError> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(name), Some(value), None) = (words.next(), words.next(), words.next()) else {
            return Err(ParseError {
                file: "stats",
                line: i + 1,
                what: format!("expected `name value`, got `{line}`"),
            });
        };
        let value = value
            .parse()
            .map_or_else(|_| Value::Text(value.to_owned()), Value::Num);
        entries.push((name.to_owned(), value));
    }
    Ok(Stats { entries })
}

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses the `pins` file: `#` lines are headers, the rest are pins.
pub fn parse_pins(text: &str) -> Result<Vec<Pin>, ParseError> {
    let mut pins = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |what: String| ParseError {
            file: "pins",
            line: i + 1,
            what,
        };
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() != 8 && w.len() != 9 {
            return Err(err(format!(
                "expected 8 or 9 fields (id tgid mode start end bytes users state [space]), got {}",
                w.len()
            )));
        }
        let num = |idx: usize, name: &str| {
            number(w[idx]).ok_or_else(|| err(format!("{name} `{}` is not a number", w[idx])))
        };
        pins.push(Pin {
            id: num(0, "id")?,
            tgid: num(1, "tgid")?,
            mode: w[2].to_owned(),
            start: num(3, "start")?,
            end: num(4, "end")?,
            bytes: num(5, "bytes")?,
            users: num(6, "users")?,
            state: w[7].to_owned(),
            space: w.get(8).map(|s| (*s).to_owned()),
        });
    }
    Ok(pins)
}

/// What `peermem status` shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Status {
    /// Live pins.
    pub pins: Vec<Pin>,
    /// Counters.
    pub stats: Stats,
}

/// Why the status could not be read.
#[derive(Debug)]
pub enum StatusError {
    /// The debugfs directory is missing: the module is not loaded, or debugfs is not
    /// mounted.
    NoDebugfs {
        /// Whether debugfs itself looks mounted (`/sys/kernel/debug` is not empty).
        debugfs_mounted: bool,
    },
    /// A file could not be read for want of permission (`EACCES`, `EPERM`): debugfs
    /// is root's.
    PermissionDenied {
        /// The path (as on the host) that could not be read.
        path: String,
    },
    /// A file of the directory is missing or unreadable.
    Unreadable(&'static str),
    /// A file did not parse.
    Parse(ParseError),
}

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatusError::NoDebugfs {
                debugfs_mounted: true,
            } => write!(
                f,
                "{DEBUGFS_DIR} does not exist: the peermem module is not loaded \
                 (modprobe peermem, or nvidia-peermem for the drop-in build), \
                 or the loaded nvidia_peermem is NVIDIA's own module"
            ),
            StatusError::NoDebugfs {
                debugfs_mounted: false,
            } => write!(
                f,
                "{DEBUGFS_DIR} does not exist: debugfs is not mounted \
                 (mount -t debugfs none /sys/kernel/debug, as root), \
                 or the peermem module is not loaded"
            ),
            StatusError::PermissionDenied { path } => write!(
                f,
                "permission denied reading {path}: the module's debugfs files are root's; \
                 run peermem status as root (sudo peermem status)"
            ),
            StatusError::Unreadable(file) => {
                write!(f, "cannot read {DEBUGFS_DIR}/{file} (debugfs needs root)")
            }
            StatusError::Parse(e) => write!(f, "{DEBUGFS_DIR}/{e}"),
        }
    }
}

impl StatusError {
    /// The exit status `peermem status` ends with: 77 (EX_NOPERM) for
    /// [`StatusError::PermissionDenied`], 2 for [`StatusError::NoDebugfs`], else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            StatusError::PermissionDenied { .. } => crate::cli::EXIT_NOPERM,
            StatusError::NoDebugfs { .. } => 2,
            StatusError::Unreadable(_) | StatusError::Parse(_) => 1,
        }
    }
}

/// Reads and parses the module's debugfs files under `root`.
pub fn read(root: &Root) -> Result<Status, StatusError> {
    let denied = || {
        root.denied()
            .into_iter()
            .next()
            .map(|path| StatusError::PermissionDenied { path })
    };
    if !root.is_dir(DEBUGFS_DIR) {
        if let Some(e) = denied() {
            return Err(e);
        }
        let debugfs_mounted = !root.list("/sys/kernel/debug").is_empty();
        if let Some(e) = denied() {
            return Err(e);
        }
        return Err(StatusError::NoDebugfs { debugfs_mounted });
    }
    let file = |name: &'static str| {
        root.read(&format!("{DEBUGFS_DIR}/{name}"))
            .ok_or_else(|| denied().unwrap_or(StatusError::Unreadable(name)))
    };
    let stats = file("stats")?;
    let pins = file("pins")?;
    Ok(Status {
        pins: parse_pins(&pins).map_err(StatusError::Parse)?,
        stats: parse_stats(&stats).map_err(StatusError::Parse)?,
    })
}

/// `bytes` in the largest binary unit that keeps it at least 1 (`1.0 MiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The human rendering: a summary line, the pin table, the counters, and hints for
/// refusals.
pub fn render_text(s: &Status) -> String {
    let mut out = String::new();
    let now = s.stats.get("bytes_pinned_now");
    let peak = s.stats.get("bytes_pinned_peak");
    let _ = write!(
        out,
        "peermem: {} live pin{}",
        s.pins.len(),
        if s.pins.len() == 1 { "" } else { "s" }
    );
    if let Some(now) = now {
        let _ = write!(out, ", {} pinned", human_bytes(now));
    }
    if let Some(peak) = peak {
        let _ = write!(out, " (peak {})", human_bytes(peak));
    }
    out.push_str("\n\n");
    if s.pins.is_empty() {
        out.push_str("no pins\n");
    } else {
        let _ = writeln!(
            out,
            "{:>6} {:>8}  {:<16}  {:<10} {:<18} {:<18} {:>12} {:>5}  STATE",
            "ID", "TGID", "SPACE", "MODE", "START", "END", "BYTES", "USERS"
        );
        for p in &s.pins {
            let _ = writeln!(
                out,
                "{:>6} {:>8}  {:<16}  {:<10} {:<18} {:<18} {:>12} {:>5}  {}",
                p.id,
                p.tgid,
                p.space.as_deref().unwrap_or("-"),
                p.mode,
                format!("{:#x}", p.start),
                format!("{:#x}", p.end),
                human_bytes(p.bytes),
                p.users,
                p.state
            );
        }
    }
    out.push_str("\ncounters:\n");
    let width = s
        .stats
        .entries
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(0);
    for (name, value) in &s.stats.entries {
        let _ = writeln!(out, "  {name:<width$}  {value}");
    }
    if let Some(n @ 1..) = s.stats.get("refused_bar1_exhausted") {
        let _ = writeln!(
            out,
            "\nnote: {n} registration(s) refused because GPU BAR1 space ran out \
             (ENOMEM): check `nvidia-smi -q` (BAR1 Memory Usage), pin less, or enable \
             a large BAR1 / Resizable BAR"
        );
    }
    if let Some(n @ 1..) = s.stats.get("refused_not_pci") {
        let _ = writeln!(
            out,
            "\nnote: {n} registration(s) refused because the RDMA device is not a PCI \
             function (software RDMA such as rxe/siw cannot DMA to GPU memory)"
        );
    }
    out
}

/// The JSON rendering: `{"schema_version":1,"pins":[...],"stats":{...}}`. Addresses
/// are hex strings (JSON numbers lose precision above 2^53); counters are numbers.
pub fn render_json(s: &Status) -> String {
    #[derive(Serialize)]
    struct Json<'a> {
        schema_version: u32,
        #[serde(flatten)]
        status: &'a Status,
    }
    let json = Json {
        schema_version: crate::JSON_SCHEMA_VERSION,
        status: s,
    };
    serde_json::to_string(&json).expect("a status serializes to JSON")
}

/// Where the MOFED/DOCA-OFED peer-memory core shows each registered client
/// (`nv_mem`, `nv_mem_nc`, ...): a `version` file and counters (older cores; docs/abi.md
/// 2.3).
pub const MEMORY_PEERS_DIR: &str = "/sys/kernel/mm/memory_peers";

/// The peer-memory core's counters of each client, in the order it declares them.
pub const CORE_COUNTERS: [(&str, &str); 7] = [
    (
        "num_alloc_mrs",
        "Regions the peer-memory core mapped through this client",
    ),
    (
        "num_dealloc_mrs",
        "Mapped regions the peer-memory core unmapped or invalidated",
    ),
    (
        "num_reg_pages",
        "SG table entries of the regions the core mapped",
    ),
    (
        "num_dereg_pages",
        "SG table entries the core counted at unmapping",
    ),
    ("num_reg_bytes", "Bytes of the regions the core mapped"),
    ("num_dereg_bytes", "Bytes of the regions the core unmapped"),
    (
        "num_free_callbacks",
        "Invalidations the client asked the core for",
    ),
];

/// One client of the peer-memory core, from its memory_peers directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreClient {
    /// The client's name (`nv_mem`).
    pub name: String,
    /// Its `version` file.
    pub version: Option<String>,
    /// The counters present, `(file name, value)`, in [`CORE_COUNTERS`] order.
    pub counters: Vec<(&'static str, u64)>,
}

/// The peer-memory core's clients under `root`, in name order.
pub fn read_core(root: &Root) -> Vec<CoreClient> {
    root.list(MEMORY_PEERS_DIR)
        .into_iter()
        .filter(|n| root.is_dir(&format!("{MEMORY_PEERS_DIR}/{n}")))
        .map(|name| {
            let dir = format!("{MEMORY_PEERS_DIR}/{name}");
            CoreClient {
                version: root.read_trimmed(&format!("{dir}/version")),
                counters: CORE_COUNTERS
                    .iter()
                    .filter_map(|(file, _)| {
                        let v = root.read_trimmed(&format!("{dir}/{file}"))?;
                        Some((*file, v.parse().ok()?))
                    })
                    .collect(),
                name,
            }
        })
        .collect()
}

/// Which peermem module writes the debugfs files: `peermem` or `nvidia_peermem`
/// (the drop-in), by `/sys/module`; `None` if neither (or both) is loaded.
pub fn loaded_module(root: &Root) -> Option<&'static str> {
    match (
        root.is_dir("/sys/module/peermem"),
        root.is_dir("/sys/module/nvidia_peermem"),
    ) {
        (true, false) => Some("peermem"),
        (false, true) => Some("nvidia_peermem"),
        _ => None,
    }
}

/// How peermem's known counters are exported: the `stats` name, whether it is a gauge
/// (else a counter, named with `_total`), and its help text.
const STAT_HELP: [(&str, bool, &str); 17] = [
    (
        "registrations",
        false,
        "Registrations of GPU memory peermem claimed",
    ),
    ("releases", false, "Registrations released"),
    ("pins", false, "GPU pins made (one nvidia.ko pin each)"),
    (
        "pin_reuses",
        false,
        "Registrations served by an existing pin",
    ),
    (
        "invalidations",
        false,
        "Invalidations delivered to the peer-memory core",
    ),
    (
        "free_callbacks",
        false,
        "Free callbacks received from nvidia.ko",
    ),
    ("pins_now", true, "GPU pins alive now"),
    (
        "sg_lists_now",
        true,
        "SG lists built by dma_map and not yet freed",
    ),
    ("bytes_pinned_now", true, "Bytes of GPU memory pinned now"),
    (
        "bytes_pinned_peak",
        true,
        "Most bytes of GPU memory pinned at once",
    ),
    (
        "refused_bad_range",
        false,
        "Registrations refused: zero length or an overflowing range",
    ),
    (
        "refused_bar1_exhausted",
        false,
        "Registrations refused: GPU BAR1 space exhausted (ENOMEM)",
    ),
    (
        "refused_pin_failed",
        false,
        "Registrations refused: nvidia.ko refused to pin the memory",
    ),
    (
        "refused_not_pci",
        false,
        "Registrations refused: the RDMA device is not a PCI function",
    ),
    (
        "refused_dma_map_failed",
        false,
        "Registrations refused: nvidia.ko could not map the GPU pages for the RDMA device",
    ),
    (
        "refused_freed",
        false,
        "Registrations refused: the GPU memory was freed during registration",
    ),
    (
        "refused_no_memory",
        false,
        "Registrations refused: out of memory for peermem's bookkeeping",
    ),
];

/// `name` made a valid metric-name part: every character outside `[a-zA-Z0-9_]`
/// becomes `_`.
fn metric_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `v` as a label value (backslash, quote and newline escaped).
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric family: HELP, TYPE, then its samples (`{labels} value`).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// The help text of `peermem_up`.
const UP_HELP: &str = "Whether peermem's debugfs counters could be read (1), or not (0: \
                       the module is not loaded, debugfs is not mounted, or its files \
                       cannot be read; peermem status says why on stderr)";

/// Whether `status --prometheus` prints [`render_prometheus_down`] and exits 0 on this
/// error: the counters cannot be read (the module is not loaded, debugfs is not
/// mounted, or a file cannot be read, root's or missing). A file that did not parse
/// stays an error.
pub fn prometheus_down(e: &StatusError) -> bool {
    match e {
        StatusError::NoDebugfs { .. }
        | StatusError::PermissionDenied { .. }
        | StatusError::Unreadable(_) => true,
        StatusError::Parse(_) => false,
    }
}

/// The node_exporter textfile-collector rendering (Prometheus text format 0.0.4):
/// `peermem_up 1`; peermem's counters as `peermem_<name>_total` (counters) or
/// `peermem_<name>` (gauges), labelled `{module="..."}` when the loaded module is
/// known; counters the tool does not know as `untyped`; and the peer-memory core's
/// clients' counters as `peermem_core_<name>_total{client="..."}` with
/// `peermem_core_client_info` (its version). Non-numeric values are left out.
pub fn render_prometheus(s: &Status, module: Option<&str>, core: &[CoreClient]) -> String {
    render_prometheus_with(Some(s), module, core)
}

/// The rendering where the module's counters cannot be read (see
/// [`prometheus_down`]): `peermem_up 0` (labelled as [`render_prometheus`] labels),
/// then the peer-memory core's clients as there (the core's own sysfs files, read
/// without peermem's debugfs).
pub fn render_prometheus_down(module: Option<&str>, core: &[CoreClient]) -> String {
    render_prometheus_with(None, module, core)
}

fn render_prometheus_with(s: Option<&Status>, module: Option<&str>, core: &[CoreClient]) -> String {
    let mut out = String::new();
    let labels = module
        .map(|m| format!("{{module=\"{}\"}}", label_value(m)))
        .unwrap_or_default();
    family(
        &mut out,
        "peermem_up",
        "gauge",
        UP_HELP,
        &[(labels.clone(), u64::from(s.is_some()))],
    );
    let entries = s.map_or(&[][..], |s| &s.stats.entries[..]);
    for (name, value) in entries {
        let Value::Num(v) = value else { continue };
        let sample = [(labels.clone(), *v)];
        match STAT_HELP.iter().find(|(n, _, _)| n == name) {
            Some((_, true, help)) => {
                family(&mut out, &format!("peermem_{name}"), "gauge", help, &sample)
            }
            Some((_, false, help)) => family(
                &mut out,
                &format!("peermem_{name}_total"),
                "counter",
                help,
                &sample,
            ),
            None => family(
                &mut out,
                &format!("peermem_{}", metric_part(name)),
                "untyped",
                &format!("peermem debugfs counter {name} (not known to this peermem tool)"),
                &sample,
            ),
        }
    }
    let info: Vec<(String, u64)> = core
        .iter()
        .map(|c| {
            (
                format!(
                    "{{client=\"{}\",version=\"{}\"}}",
                    label_value(&c.name),
                    label_value(c.version.as_deref().unwrap_or(""))
                ),
                1,
            )
        })
        .collect();
    if !info.is_empty() {
        family(
            &mut out,
            "peermem_core_client_info",
            "gauge",
            "A client registered with the peer-memory core (/sys/kernel/mm/memory_peers), with its version",
            &info,
        );
    }
    for (file, help) in CORE_COUNTERS {
        let samples: Vec<(String, u64)> = core
            .iter()
            .filter_map(|c| {
                let (_, v) = c.counters.iter().find(|(f, _)| *f == file)?;
                Some((format!("{{client=\"{}\"}}", label_value(&c.name)), *v))
            })
            .collect();
        if !samples.is_empty() {
            let name = file.trim_start_matches("num_");
            family(
                &mut out,
                &format!("peermem_core_{name}_total"),
                "counter",
                help,
                &samples,
            );
        }
    }
    out
}
