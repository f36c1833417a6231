// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The facts `peermem doctor` takes from `nvidia-smi -q`: per GPU, product name and
//! brand, BAR1 usage, MIG mode and confidential-compute state.
//!
//! `nvidia-smi -q` prints `Key : value` lines and value-less section headers, nested
//! by indentation; each GPU starts with an unindented `GPU <bus id>` line. Its format is
//! not guaranteed stable, so the parser only looks for a few well-known keys and
//! ignores everything else.

/// What one GPU's section says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gpu {
    /// The PCI bus id from the `GPU 00000000:18:00.0` line.
    pub bus_id: String,
    /// `Product Name`, if given.
    pub name: Option<String>,
    /// `Product Brand` (`NVIDIA`, `GeForce`, `Quadro`, ...), if given.
    pub brand: Option<String>,
    /// BAR1 total, used and free, MiB (`BAR1 Memory Usage`).
    pub bar1_total_mib: Option<u64>,
    /// BAR1 used, MiB.
    pub bar1_used_mib: Option<u64>,
    /// BAR1 free, MiB.
    pub bar1_free_mib: Option<u64>,
    /// `MIG Mode` / `Current` (`Enabled`, `Disabled`, `N/A`).
    pub mig_current: Option<String>,
    /// Confidential-compute state, as written (`On`, `Off`, ...), if the output says.
    pub cc: Option<String>,
}

impl Gpu {
    /// Whether MIG is currently enabled.
    pub fn mig_enabled(&self) -> bool {
        self.mig_current
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("enabled"))
    }

    /// Whether confidential compute is on.
    pub fn cc_on(&self) -> bool {
        self.cc.as_deref().is_some_and(is_on)
    }
}

/// The whole output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// `Driver Version`, if given.
    pub driver_version: Option<String>,
    /// System-wide confidential-compute state, if given outside any GPU section.
    pub cc: Option<String>,
    /// The GPUs, in output order.
    pub gpus: Vec<Gpu>,
}

impl Report {
    /// Whether confidential compute is on, system-wide or on any GPU.
    pub fn cc_on(&self) -> bool {
        self.cc.as_deref().is_some_and(is_on) || self.gpus.iter().any(Gpu::cc_on)
    }

    /// Whether any confidential-compute state was reported at all.
    pub fn cc_known(&self) -> bool {
        self.cc.is_some() || self.gpus.iter().any(|g| g.cc.is_some())
    }
}

fn is_on(v: &str) -> bool {
    let v = v.trim();
    v.eq_ignore_ascii_case("on") || v.eq_ignore_ascii_case("enabled")
}

fn mib(v: &str) -> Option<u64> {
    v.split_whitespace().next()?.parse().ok()
}

/// Splits `Key   : value` at the first colon followed by a space or the line's end (bus
/// ids such as `00000000:18:00.0` contain colons that are not separators).
fn split(line: &str) -> (&str, Option<&str>) {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') {
            return (line[..i].trim(), Some(line[i + 1..].trim()));
        }
    }
    (line.trim(), None)
}

/// Whether a key (within its section) names the confidential-compute state.
fn is_cc_key(section: &str, key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    let s = section.to_ascii_lowercase();
    if s.contains("protected memory") || k.contains("protected memory") {
        return false;
    }
    let section_is_cc = s.contains("confidential compute") || s.contains("conf compute");
    k.contains("confidential compute")
        || matches!(
            k.as_str(),
            "cc mode" | "cc state" | "cc status" | "conf compute mode"
        )
        || (section_is_cc && matches!(k.as_str(), "mode" | "state" | "status"))
}

/// Parses `nvidia-smi -q` output.
pub fn parse(text: &str) -> Report {
    let mut report = Report::default();
    // Open section headers: (indent, name).
    let mut stack: Vec<(usize, String)> = Vec::new();
    for raw in text.lines() {
        if raw.trim().is_empty() {
            continue;
        }
        let indent = raw.len() - raw.trim_start().len();
        let (key, value) = split(raw);
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let value = match value {
            Some(v) if !v.is_empty() => v,
            _ => {
                if indent == 0 && key.starts_with("GPU ") {
                    report.gpus.push(Gpu {
                        bus_id: key["GPU ".len()..].trim().to_owned(),
                        ..Gpu::default()
                    });
                }
                stack.push((indent, key.to_owned()));
                continue;
            }
        };
        let in_gpu = stack.first().is_some_and(|(_, n)| n.starts_with("GPU "));
        let section = stack.last().map_or("", |(_, n)| n.as_str());
        if !in_gpu {
            if key == "Driver Version" {
                report.driver_version = Some(value.to_owned());
            } else if is_cc_key(section, key) {
                report.cc = Some(value.to_owned());
            }
            continue;
        }
        let Some(gpu) = report.gpus.last_mut() else {
            continue;
        };
        match (section, key) {
            ("BAR1 Memory Usage", "Total") => gpu.bar1_total_mib = mib(value),
            ("BAR1 Memory Usage", "Used") => gpu.bar1_used_mib = mib(value),
            ("BAR1 Memory Usage", "Free") => gpu.bar1_free_mib = mib(value),
            ("MIG Mode", "Current") => gpu.mig_current = Some(value.to_owned()),
            (_, "Product Name") if stack.len() == 1 => gpu.name = Some(value.to_owned()),
            (_, "Product Brand") if stack.len() == 1 => gpu.brand = Some(value.to_owned()),
            _ if is_cc_key(section, key) => gpu.cc = Some(value.to_owned()),
            _ => {}
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE_GPU: &str = "\
==============NVSMI LOG==============

Timestamp                                 : Mon Jan  5 10:00:00 2026
Driver Version                            : 580.65.06
CUDA Version                              : 13.0

Attached GPUs                             : 1
GPU 00000000:18:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    MIG Mode
        Current                           : Disabled
        Pending                           : Disabled
    FB Memory Usage
        Total                             : 81559 MiB
        Used                              : 0 MiB
        Free                              : 81008 MiB
    BAR1 Memory Usage
        Total                             : 131072 MiB
        Used                              : 1 MiB
        Free                              : 131071 MiB
    Conf Compute Protected Memory Usage
        Total                             : 0 MiB
";

    #[test]
    fn parses_bar1_mig_and_driver() {
        let r = parse(ONE_GPU);
        assert_eq!(r.driver_version.as_deref(), Some("580.65.06"));
        assert_eq!(r.gpus.len(), 1);
        let g = &r.gpus[0];
        assert_eq!(g.bus_id, "00000000:18:00.0");
        assert_eq!(g.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(g.bar1_total_mib, Some(131072));
        assert_eq!(g.bar1_used_mib, Some(1));
        assert_eq!(g.bar1_free_mib, Some(131071));
        assert!(!g.mig_enabled());
        assert!(!r.cc_known());
        assert!(!r.cc_on());
    }

    #[test]
    fn confidential_compute_keys() {
        let on = "Driver Version : 550.90.07\nGPU 00000000:01:00.0\n    Confidential Compute Mode      : On\n";
        let r = parse(on);
        assert_eq!(r.gpus[0].cc.as_deref(), Some("On"));
        assert!(r.cc_on());
        let sec = "GPU 00000000:01:00.0\n    Confidential Compute\n        CC State                : OFF\n";
        let r = parse(sec);
        assert!(r.cc_known());
        assert!(!r.cc_on());
        let global = "CC Status : ON\nGPU 00000000:01:00.0\n    Product Name : X\n";
        assert!(parse(global).cc_on());
    }

    #[test]
    fn split_keeps_bus_ids_whole() {
        assert_eq!(
            split("GPU 00000000:18:00.0"),
            ("GPU 00000000:18:00.0", None)
        );
        assert_eq!(split("    Total    : 1 MiB"), ("Total", Some("1 MiB")));
        assert_eq!(split("Header:"), ("Header", Some("")));
    }
}

/// How long `nvidia-smi -q` may run: a GPU that has fallen off the bus, or a driver
/// stuck in a GPU reset, can keep it waiting for minutes.
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Why [`query`] gave no output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryError {
    /// The program is not installed (not found).
    NotFound,
    /// The program is there but could not be started (not executable, not a program
    /// this system runs, ...): the system's reason.
    NotStarted(String),
    /// It exited with a failure status.
    Failed(std::process::ExitStatus),
    /// It ran past the timeout and was killed.
    TimedOut(std::time::Duration),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::NotFound => f.write_str("nvidia-smi is not installed"),
            QueryError::NotStarted(why) => write!(f, "nvidia-smi could not be started ({why})"),
            QueryError::Failed(s) => write!(f, "nvidia-smi -q failed ({s})"),
            QueryError::TimedOut(t) => write!(
                f,
                "nvidia-smi -q did not finish within {} s and was killed",
                t.as_secs()
            ),
        }
    }
}

/// Runs `program -q` and returns what it printed, killing it if it runs past
/// `timeout`.
pub fn query(
    program: impl AsRef<std::ffi::OsStr>,
    timeout: std::time::Duration,
) -> Result<String, QueryError> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    let mut child = Command::new(program)
        .arg("-q")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => QueryError::NotFound,
            _ => QueryError::NotStarted(e.to_string()),
        })?;
    // Read on a thread so that a full pipe cannot stall the child. The thread is not
    // waited for after a kill: a grandchild may still hold the pipe open.
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        let _ = tx.send(out);
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(QueryError::TimedOut(timeout));
            }
        }
    };
    if !status.success() {
        return Err(QueryError::Failed(status));
    }
    let left = deadline.saturating_duration_since(Instant::now());
    let out = rx
        .recv_timeout(left.max(std::time::Duration::from_millis(100)))
        .map_err(|_| QueryError::TimedOut(timeout))?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}
