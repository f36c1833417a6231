// SPDX-License-Identifier: GPL-2.0 OR MIT

//! GPU facts from NVML: the conversions to nvidia-smi's units and words, and, on a
//! host with an NVIDIA driver, the same facts as `nvidia-smi -q` gives.

use std::time::Duration;

use peermem_tool::{nvml, nvsmi};

#[test]
fn nvml_values_read_as_nvidia_smi_prints_them() {
    // H200's BAR1, 262144 MiB, and one used MiB plus a little (nvidia-smi rounds down).
    assert_eq!(nvml::mib(262_144 * 1024 * 1024), 262_144);
    assert_eq!(nvml::mib(1024 * 1024 + 4096), 1);
    assert_eq!(nvml::mib(1024 * 1024 - 1), 0);
    assert_eq!(nvml::mig_word(1), "Enabled");
    assert_eq!(nvml::mig_word(0), "Disabled");
}

/// Where NVML loads (a host with NVIDIA's driver), its facts are nvidia-smi's: the
/// same driver, GPUs, BAR1 sizes and MIG modes. Elsewhere NVML must fail to load,
/// and so must nvidia-smi (the doctor then has no GPU facts).
#[test]
fn nvml_agrees_with_nvidia_smi() {
    let smi = nvsmi::query("nvidia-smi", Duration::from_secs(30));
    let report = match nvml::query() {
        Ok(r) => r,
        Err(e) => {
            assert!(e.starts_with("NVML: "), "{e}");
            assert!(smi.is_err(), "nvidia-smi answers where NVML does not: {e}");
            eprintln!("no NVML here ({e}): nothing to compare");
            return;
        }
    };
    let smi = nvsmi::parse(&smi.expect("nvidia-smi -q answers where NVML does"));
    assert_eq!(report.driver_version, smi.driver_version);
    assert_eq!(report.gpus.len(), smi.gpus.len());
    for (n, s) in report.gpus.iter().zip(&smi.gpus) {
        assert_eq!(n.bus_id, s.bus_id);
        assert_eq!(n.name, s.name);
        assert_eq!(n.bar1_total_mib, s.bar1_total_mib, "{}", n.bus_id);
        // Used and free move with the GPU's work: within a MiB of each other.
        for (a, b) in [
            (n.bar1_used_mib, s.bar1_used_mib),
            (n.bar1_free_mib, s.bar1_free_mib),
        ] {
            let (a, b) = (a.unwrap(), b.unwrap());
            assert!(a.abs_diff(b) <= 1, "{}: {a} vs {b}", n.bus_id);
        }
        if s.mig_current.as_deref() != Some("N/A") {
            assert_eq!(n.mig_current, s.mig_current, "{}", n.bus_id);
        }
    }
}
