// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `pcie-path`: how far apart are each GPU and its nearest HCA on PCIe, and do the
//! bridges between them redirect peer-to-peer traffic (ACS)?
//!
//! A PCI function's sysfs directory lies below its bridges:
//! `/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0` is
//! host bridge `pci0000:15`, root port `15:01.0`, a switch's upstream port `16:00.0`,
//! its downstream port `17:00.0`, and the function `18:00.0`
//! (`/sys/bus/pci/devices/<bdf>` links there). Below a root port, switch ports
//! alternate: upstream port, downstream ports, upstream port of the next switch...
//!
//! The distance is named as `nvidia-smi topo -m` names it:
//!
//! - `PIX`: through at most one PCIe switch;
//! - `PXB`: through several switches, not through the host bridge;
//! - `PHB`: through the host bridge (the CPU's root complex);
//! - `NODE`: between host bridges of one NUMA node;
//! - `SYS`: between NUMA nodes, over the CPU interconnect (UPI, Infinity Fabric).
//!
//! ACS (PCIe extended capability 0x000D) on a switch's downstream ports can send peer
//! traffic up to the root complex instead of across the switch: its control register
//! (capability + 6) has P2P Request Redirect (bit 2), P2P Completion Redirect (bit 3)
//! and P2P Egress Control (bit 5). The register lies in the extended configuration
//! space, which only root reads (others read the first 64 bytes of `config`).

use std::fmt::Write;

use super::rdma;
use super::{Check, Host, Verdict};
use crate::Root;

/// Where PCI functions are listed.
const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// ACS's extended capability ID.
pub const ACS_CAP_ID: u16 = 0x000d;

/// ACS control bits, lspci's names, and whether they redirect peer traffic.
const ACS_BITS: [(u16, &str, bool); 7] = [
    (1 << 0, "SrcValid", false),
    (1 << 1, "TransBlk", false),
    (1 << 2, "ReqRedir", true),
    (1 << 3, "CmpltRedir", true),
    (1 << 4, "UpstreamFwd", false),
    (1 << 5, "EgressCtrl", true),
    (1 << 6, "DirectTrans", false),
];

/// What a function's configuration space says of ACS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acs {
    /// The extended space is not there to read (under 4096 bytes: not root, or not
    /// PCI Express).
    Unreadable,
    /// No ACS capability.
    Absent,
    /// The ACS control register.
    Control(u16),
}

/// The ACS control register in `config` (a function's configuration space).
pub fn acs_control(config: &[u8]) -> Acs {
    if config.len() < 4096 {
        return Acs::Unreadable;
    }
    let u32_at =
        |o: usize| u32::from_le_bytes([config[o], config[o + 1], config[o + 2], config[o + 3]]);
    let mut off = 0x100usize;
    // At most (4096 - 256) / 4 capabilities: a loop in the chain ends too.
    for _ in 0..960 {
        let header = u32_at(off);
        if header == 0 || header == 0xffff_ffff {
            return Acs::Absent;
        }
        if header & 0xffff == u32::from(ACS_CAP_ID) {
            return Acs::Control(u16::from_le_bytes([config[off + 6], config[off + 7]]));
        }
        let next = (header >> 20) as usize & 0xffc;
        if next < 0x100 || next + 8 > config.len() {
            return Acs::Absent;
        }
        off = next;
    }
    Acs::Absent
}

/// The control register as lspci prints it (`SrcValid+ TransBlk- ReqRedir+ ...`).
pub fn acs_flags(ctl: u16) -> String {
    ACS_BITS
        .iter()
        .map(|(bit, name, _)| format!("{name}{}", if ctl & bit != 0 { '+' } else { '-' }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether ACS control `ctl` redirects or blocks peer traffic.
pub fn acs_redirects(ctl: u16) -> bool {
    ACS_BITS
        .iter()
        .any(|(bit, _, redirects)| *redirects && ctl & bit != 0)
}

/// A PCI function: its address and the sysfs path components from its host bridge
/// (`pci0000:15`) down to itself.
#[derive(Clone, Debug)]
struct Function {
    bdf: String,
    path: String,
    chain: Vec<String>,
}

impl Function {
    fn at(path: &str) -> Option<Function> {
        let parts: Vec<&str> = path.split('/').collect();
        let host = parts
            .iter()
            .position(|p| p.starts_with("pci") && p.contains(':'))?;
        let chain: Vec<String> = parts[host..].iter().map(|s| (*s).to_owned()).collect();
        if chain.len() < 2 {
            return None;
        }
        Some(Function {
            bdf: chain[chain.len() - 1].clone(),
            path: path.to_owned(),
            chain,
        })
    }

    /// The sysfs directory of `chain[i]`.
    fn dir(&self, i: usize) -> String {
        let below = self.chain.len() - 1 - i;
        let mut p = self.path.as_str();
        for _ in 0..below {
            p = p.rsplit_once('/').map_or(p, |(a, _)| a);
        }
        p.to_owned()
    }
}

/// The distance between two functions, as nvidia-smi names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// At most one PCIe switch.
    Pix,
    /// Several switches, below one host bridge.
    Pxb,
    /// Through the host bridge.
    Phb,
    /// Between host bridges of one NUMA node.
    Node,
    /// Between NUMA nodes.
    Sys,
}

impl Level {
    /// nvidia-smi's word.
    pub fn word(self) -> &'static str {
        match self {
            Level::Pix => "PIX",
            Level::Pxb => "PXB",
            Level::Phb => "PHB",
            Level::Node => "NODE",
            Level::Sys => "SYS",
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            Level::Pix => "at most one PCIe switch between them",
            Level::Pxb => "several PCIe switches between them, below one host bridge",
            Level::Phb => "through the CPU's PCIe host bridge",
            Level::Node => "between two host bridges of one NUMA node",
            Level::Sys => "between NUMA nodes, over the CPU interconnect",
        }
    }
}

/// The path between two functions: its distance, and the bridges below their common
/// ancestor (those whose ACS decides whether peer traffic crosses the switch).
struct Path {
    level: Level,
    /// `(bdf, sysfs dir)` of each bridge below the common ancestor, when the common
    /// ancestor is a switch.
    bridges: Vec<(String, String)>,
}

fn numa(root: &Root, f: &Function) -> Option<i64> {
    root.read_trimmed(&format!("{}/numa_node", f.path))?
        .parse()
        .ok()
}

fn path(root: &Root, a: &Function, b: &Function) -> Path {
    if a.chain[0] != b.chain[0] {
        let level = match (numa(root, a), numa(root, b)) {
            (Some(x), Some(y)) if x != y && x >= 0 && y >= 0 => Level::Sys,
            _ => Level::Node,
        };
        return Path {
            level,
            bridges: Vec::new(),
        };
    }
    let k = a
        .chain
        .iter()
        .zip(&b.chain)
        .take_while(|(x, y)| x == y)
        .count();
    if k == 1 {
        return Path {
            level: Level::Phb,
            bridges: Vec::new(),
        };
    }
    // The switches on the path: each bridge below the root port (index 1) is an
    // upstream port (even index) or a downstream port (odd index) of the switch whose
    // upstream port is its parent.
    let mut switches: Vec<&str> = Vec::new();
    let mut on_path: Vec<(&Function, usize)> = vec![(a, k - 1)];
    on_path.extend((k..a.chain.len() - 1).map(|i| (a, i)));
    on_path.extend((k..b.chain.len() - 1).map(|i| (b, i)));
    for &(f, i) in &on_path {
        if i < 2 {
            continue;
        }
        let usp = if i % 2 == 0 {
            &f.chain[i]
        } else {
            &f.chain[i - 1]
        };
        if !switches.contains(&usp.as_str()) {
            switches.push(usp);
        }
    }
    let level = if switches.len() <= 1 {
        Level::Pix
    } else {
        Level::Pxb
    };
    let bridges = on_path[1..]
        .iter()
        .map(|&(f, i)| (f.chain[i].clone(), f.dir(i)))
        .collect();
    Path { level, bridges }
}

/// The NVIDIA GPUs (vendor 0x10de, class 0x0300xx VGA or 0x0302xx 3D controller).
fn gpus(root: &Root) -> Vec<Function> {
    root.list(PCI_DEVICES)
        .into_iter()
        .filter(|bdf| {
            let f = |file: &str| root.read_trimmed(&format!("{PCI_DEVICES}/{bdf}/{file}"));
            f("vendor").as_deref() == Some("0x10de")
                && f("class").is_some_and(|c| c.starts_with("0x0302") || c.starts_with("0x0300"))
        })
        .filter_map(|bdf| Function::at(&root.resolve(&format!("{PCI_DEVICES}/{bdf}"))?))
        .collect()
}

pub(super) fn pcie_path(h: &Host<'_>) -> Check {
    const ID: &str = "pcie-path";
    let gpus = gpus(h.root);
    let hcas: Vec<(String, Function)> = rdma::devices(h.root)
        .into_iter()
        .filter_map(|d| Some((d.name.clone(), Function::at(d.pci.as_deref()?)?)))
        .collect();
    if gpus.is_empty() || hcas.is_empty() {
        let what = match (gpus.is_empty(), hcas.is_empty()) {
            (true, true) => "no NVIDIA GPU and no HCA",
            (true, false) => "no NVIDIA GPU",
            _ => "no HCA",
        };
        return Check::new(
            ID,
            Verdict::NotApplicable,
            format!("{what} on PCI ({PCI_DEVICES}, {})", rdma::IB_CLASS),
        );
    }
    let mut lines = Vec::new();
    let mut far = Vec::new();
    let mut redirecting: Vec<String> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    for g in &gpus {
        let (name, hca, p) = hcas
            .iter()
            .map(|(n, f)| (n, f, path(h.root, g, f)))
            .min_by_key(|(_, _, p)| p.level)
            .expect("hcas is not empty");
        let mut line = format!(
            "GPU {} - {name} ({}): {} ({})",
            g.bdf,
            hca.bdf,
            p.level.word(),
            p.level.meaning()
        );
        if p.level >= Level::Phb {
            far.push(format!("GPU {} - {name}: {}", g.bdf, p.level.word()));
        }
        let mut acs = Vec::new();
        let mut clear = Vec::new();
        for (bdf, dir) in &p.bridges {
            let Ok(config) = h.root.read_bytes(&format!("{dir}/config")) else {
                if !unreadable.contains(bdf) {
                    unreadable.push(bdf.clone());
                }
                continue;
            };
            match acs_control(&config) {
                Acs::Unreadable => {
                    if !unreadable.contains(bdf) {
                        unreadable.push(bdf.clone());
                    }
                }
                Acs::Absent => {}
                Acs::Control(ctl) if acs_redirects(ctl) => {
                    acs.push(format!("{bdf} ACSCtl {}", acs_flags(ctl)));
                    if !redirecting.contains(bdf) {
                        redirecting.push(bdf.clone());
                    }
                }
                Acs::Control(_) => clear.push(bdf.as_str()),
            }
        }
        if !clear.is_empty() {
            let _ = write!(line, ", no ACS redirection at {}", clear.join(", "));
        }
        if !acs.is_empty() {
            let _ = write!(line, ", {}", acs.join(", "));
        }
        lines.push(line);
    }
    let mut detail = lines.join("; ");
    if !unreadable.is_empty() {
        let _ = write!(
            detail,
            "; ACS of {} not checked: their extended configuration space cannot be read \
             (only root reads past the first 64 bytes of config)",
            unreadable.join(", ")
        );
    }
    let mut fixes = Vec::new();
    if !redirecting.is_empty() {
        let _ = write!(
            detail,
            "; ACS redirects peer-to-peer traffic to the root complex at {}",
            redirecting.join(", ")
        );
        fixes.push(format!(
            "disable ACS redirection on {} (bare metal with the IOMMU off or in \
             passthrough only: a translating IOMMU relies on it): as root, {} (again after \
             every boot), or the platform's BIOS setting for PCIe ACS",
            redirecting.join(", "),
            redirecting
                .iter()
                .map(|b| format!("setpci -s {b} ECAP_ACS+0x6.w=0000"))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if !far.is_empty() {
        fixes.push(format!(
            "{}: peer traffic crosses the CPU (lower bandwidth, and some root complexes \
             forward peer-to-peer poorly): put GPU and HCA under one PCIe switch, or have \
             applications use the nearest HCA per GPU (NCCL_IB_HCA, UCX_NET_DEVICES)",
            far.join(", ")
        ));
    }
    if fixes.is_empty() {
        Check::new(ID, Verdict::Ok, detail)
    } else {
        Check::new(ID, Verdict::Warn, detail).fix(fixes.join("; "))
    }
}
