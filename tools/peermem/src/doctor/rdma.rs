// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `hca`: is there an RDMA device (HCA) with an active port?
//!
//! Each RDMA device the kernel knows is a directory `/sys/class/infiniband/<dev>`
//! (what `ibv_devices` lists): `device` links to the PCI function of a hardware HCA
//! (software devices, rxe and siw, have none), and `ports/<n>/state` and
//! `ports/<n>/phys_state` read `4: ACTIVE` and `5: LinkUp` on a port that carries
//! traffic (`1: DOWN`, `2: INIT` and `3: Disabled`, `2: Polling` otherwise: the
//! numbers are the InfiniBand port and physical states).

use super::{Check, Host, Verdict};
use crate::Root;

/// Where RDMA devices are listed.
pub const IB_CLASS: &str = "/sys/class/infiniband";

/// An RDMA device.
#[derive(Clone, Debug)]
pub struct RdmaDevice {
    /// `mlx5_0`.
    pub name: String,
    /// The resolved sysfs path of its PCI function (`/sys/devices/pci0000:15/...`),
    /// if it is one.
    pub pci: Option<String>,
    /// The driver bound to the PCI function (`mlx5_core`).
    pub driver: Option<String>,
    /// `(port, state, phys_state, link_layer)`.
    pub ports: Vec<(String, String, String, String)>,
}

impl RdmaDevice {
    /// The PCI address (`0000:19:00.0`) of its function.
    pub fn bdf(&self) -> Option<&str> {
        self.pci.as_deref().and_then(|p| p.rsplit('/').next())
    }
}

/// `4: ACTIVE` -> `ACTIVE`.
fn word(state: &str) -> &str {
    state.split_once(": ").map_or(state, |(_, w)| w).trim()
}

/// The RDMA devices under `root`, in name order.
pub fn devices(root: &Root) -> Vec<RdmaDevice> {
    root.list(IB_CLASS)
        .into_iter()
        .map(|name| {
            let dir = format!("{IB_CLASS}/{name}");
            let pci = root
                .resolve(&format!("{dir}/device"))
                .filter(|p| p.starts_with("/sys/devices/") && p.contains("/pci"));
            let driver = root
                .resolve(&format!("{dir}/device/driver"))
                .and_then(|p| p.rsplit('/').next().map(str::to_owned));
            let ports = root
                .list(&format!("{dir}/ports"))
                .into_iter()
                .map(|p| {
                    let f = |file: &str| {
                        root.read_trimmed(&format!("{dir}/ports/{p}/{file}"))
                            .unwrap_or_else(|| "?".to_owned())
                    };
                    (p.clone(), f("state"), f("phys_state"), f("link_layer"))
                })
                .collect();
            RdmaDevice {
                name,
                pci,
                driver,
                ports,
            }
        })
        .collect()
}

pub(super) fn hca(h: &Host<'_>) -> Check {
    const ID: &str = "hca";
    let devs = devices(h.root);
    if devs.is_empty() {
        return Check::new(
            ID,
            Verdict::Fail,
            format!("no RDMA device: {IB_CLASS} is empty or missing (ibv_devices lists nothing)"),
        )
        .fix(
            "install the HCA and load its RDMA driver (modprobe mlx5_ib for ConnectX, after \
             mlx5_core), or install MOFED/DOCA-OFED, which loads it",
        );
    }
    let mut parts = Vec::new();
    let mut down = Vec::new();
    let mut software = Vec::new();
    let mut active = 0;
    for d in &devs {
        let Some(bdf) = d.bdf() else {
            software.push(d.name.clone());
            parts.push(format!("{}: software RDMA (no PCI device)", d.name));
            continue;
        };
        let mut ports = Vec::new();
        for (p, state, phys, layer) in &d.ports {
            if word(state) == "ACTIVE" {
                active += 1;
                ports.push(format!("port {p} ACTIVE ({}, {layer})", word(phys)));
            } else {
                ports.push(format!("port {p} {} ({})", word(state), word(phys)));
                down.push(format!(
                    "{} port {p}: {} (phys_state {phys})",
                    d.name,
                    word(state)
                ));
            }
        }
        if ports.is_empty() {
            ports.push("no ports".to_owned());
        }
        let driver = d
            .driver
            .as_deref()
            .map(|dr| format!(", {dr}"))
            .unwrap_or_default();
        parts.push(format!("{} ({bdf}{driver}): {}", d.name, ports.join(", ")));
    }
    let detail = parts.join("; ");
    if software.len() == devs.len() {
        return Check::new(
            ID,
            Verdict::Fail,
            format!(
                "no HCA: only software RDMA devices ({}), which cannot DMA to GPU memory",
                software.join(", ")
            ),
        )
        .fix("install an HCA (ConnectX) and load its RDMA driver (modprobe mlx5_ib), or install MOFED/DOCA-OFED");
    }
    if !down.is_empty() {
        let none = if active == 0 {
            "no port is ACTIVE: "
        } else {
            ""
        };
        return Check::new(ID, Verdict::Warn, format!("{none}{detail}")).fix(format!(
            "bring the link up on {}: check the cable and the switch; on InfiniBand a port \
             stays INIT until a subnet manager (opensm, or the switch's) configures it; \
             on Ethernet (RoCE), ip link set <netdev> up",
            down.join(", ")
        ));
    }
    Check::new(ID, Verdict::Ok, detail)
}
