// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `gpu-product`: is each GPU a product NVIDIA supports GPUDirect RDMA on?
//!
//! NVIDIA supports GPUDirect RDMA on its data-center and professional GPUs (brands
//! NVIDIA, Tesla, Quadro, NVIDIA RTX, ...), not on GeForce: there
//! `nvidia_p2p_get_pages` refuses the memory (`-EINVAL`), so every registration of GPU
//! memory fails whatever the peer-memory client. The brand is nvidia-smi's `Product
//! Brand` (NVML's `nvmlDeviceGetBrand`), the name its `Product Name`.

use super::{Check, Host, Verdict};
use crate::nvsmi::Gpu;

/// Whether `g` is a GeForce: its brand (`GeForce`, `GeForce RTX`), or, where no brand
/// is reported, its name (`NVIDIA GeForce RTX 4090`, `GeForce GTX 1080 Ti`).
pub fn is_geforce(g: &Gpu) -> bool {
    let starts = |s: &str, p: &str| s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p);
    if let Some(b) = &g.brand {
        return starts(b.trim(), "GeForce");
    }
    g.name
        .as_deref()
        .map(str::trim)
        .is_some_and(|n| starts(n, "GeForce") || starts(n, "NVIDIA GeForce"))
}

fn describe(g: &Gpu) -> String {
    let name = g.name.as_deref().unwrap_or("(no product name)");
    match &g.brand {
        Some(b) => format!("{}: {name} (brand {b})", g.bus_id),
        None => format!("{}: {name}", g.bus_id),
    }
}

pub(super) fn gpu_product(h: &Host<'_>) -> Check {
    const ID: &str = "gpu-product";
    let Some(smi) = &h.smi else {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            "no GPU facts (neither NVML nor nvidia-smi answered, or --no-nvidia-smi)",
        );
    };
    if smi.gpus.is_empty() {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            "no GPU listed (by NVML or nvidia-smi)",
        );
    }
    let (geforce, other): (Vec<&Gpu>, Vec<&Gpu>) = smi.gpus.iter().partition(|g| is_geforce(g));
    let list = |gs: &[&Gpu]| {
        gs.iter()
            .map(|g| describe(g))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if geforce.is_empty() {
        return Check::new(
            ID,
            Verdict::Ok,
            format!("{}: a data-center or professional GPU", list(&other)),
        );
    }
    let why = "NVIDIA supports GPUDirect RDMA on data-center and professional GPUs, not \
               GeForce (nvidia_p2p_get_pages refuses GeForce memory with -EINVAL)";
    let fix = "use a data-center (H100, H200, A100, L40S, ...) or professional (NVIDIA RTX, \
               Quadro) GPU for GPUDirect RDMA; on GeForce, applications must stage \
               transfers through host memory (NCCL and UCX do so when GPUDirect RDMA is \
               unavailable)";
    if other.is_empty() {
        Check::new(
            ID,
            Verdict::Fail,
            format!("{}: GeForce: {why}", list(&geforce)),
        )
        .fix(fix)
    } else {
        Check::new(
            ID,
            Verdict::Warn,
            format!(
                "{}: GeForce: {why}; GPUDirect RDMA works on the others ({})",
                list(&geforce),
                list(&other)
            ),
        )
        .fix(fix)
    }
}
