// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The GPU facts `peermem doctor` needs, from NVML (`libnvidia-ml.so.1`, loaded at run
//! time through `nvml-wrapper`): the same [`nvsmi::Report`] that `nvidia-smi -q`'s
//! output gives, without running a program or parsing text whose format may change.
//! Where NVML cannot be loaded or answers nothing, doctor falls back to nvidia-smi.

use nvml_wrapper::enum_wrappers::device::Brand;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use crate::nvsmi::{Gpu, Report};

/// NVML's `NVML_DEVICE_MIG_ENABLE` (nvml.h): the value of an enabled MIG mode.
const MIG_ENABLE: u32 = 1;

/// MiB in `bytes` (NVML counts bytes; nvidia-smi prints MiB, rounded down).
pub fn mib(bytes: u64) -> u64 {
    bytes / (1024 * 1024)
}

/// A MIG mode as nvidia-smi prints it.
pub fn mig_word(mode: u32) -> &'static str {
    if mode == MIG_ENABLE {
        "Enabled"
    } else {
        "Disabled"
    }
}

/// A product brand as nvidia-smi prints it (`Product Brand`).
pub fn brand_word(brand: &Brand) -> &'static str {
    match brand {
        Brand::Unknown => "Unknown",
        Brand::Quadro => "Quadro",
        Brand::Tesla => "Tesla",
        Brand::NVS => "NVS",
        Brand::GRID => "GRID",
        Brand::GeForce => "GeForce",
        Brand::Titan => "Titan",
        Brand::VApps => "NVIDIA Virtual Applications",
        Brand::VPC => "NVIDIA Virtual PC",
        Brand::VCS => "NVIDIA Virtual Compute Server",
        Brand::VWS => "NVIDIA RTX Virtual Workstation",
        Brand::CloudGaming | Brand::VGaming => "NVIDIA Cloud Gaming",
        Brand::QuadroRTX => "Quadro RTX",
        Brand::NvidiaRTX => "NVIDIA RTX",
        Brand::Nvidia => "NVIDIA",
        Brand::GeForceRTX => "GeForce RTX",
        Brand::TitanRTX => "Titan RTX",
    }
}

/// `Ok(None)` for an answer NVML does not have for this device (`NotSupported`),
/// as nvidia-smi prints `N/A`.
fn optional<T>(r: Result<T, NvmlError>) -> Result<Option<T>, NvmlError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The facts of every GPU, from NVML; the error if NVML cannot be loaded or
/// initialized (no NVIDIA driver), or a query fails.
pub fn query() -> Result<Report, String> {
    let nvml = Nvml::init().map_err(|e| format!("NVML: {e}"))?;
    let err = |e: NvmlError| format!("NVML: {e}");
    let mut report = Report {
        driver_version: optional(nvml.sys_driver_version()).map_err(err)?,
        cc: None,
        gpus: Vec::new(),
    };
    for i in 0..nvml.device_count().map_err(err)? {
        let d = nvml.device_by_index(i).map_err(err)?;
        let bar1 = optional(d.bar1_memory_info()).map_err(err)?;
        report.gpus.push(Gpu {
            bus_id: d.pci_info().map_err(err)?.bus_id,
            name: optional(d.name()).map_err(err)?,
            brand: optional(d.brand())
                .map_err(err)?
                .map(|b| brand_word(&b).to_owned()),
            bar1_total_mib: bar1.as_ref().map(|b| mib(b.total)),
            bar1_used_mib: bar1.as_ref().map(|b| mib(b.used)),
            bar1_free_mib: bar1.as_ref().map(|b| mib(b.free)),
            mig_current: optional(d.mig_mode())
                .map_err(err)?
                .map(|m| mig_word(m.current).to_owned()),
            // Confidential compute is a system setting that older drivers and GPUs
            // cannot report in several ways: any failure is "not reported".
            cc: d
                .is_cc_enabled()
                .ok()
                .map(|on| if on { "On" } else { "Off" }.to_owned()),
        });
    }
    Ok(report)
}
