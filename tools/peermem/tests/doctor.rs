// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem doctor` on recorded trees (tests/fixtures/<case>/: a fake root).

mod common;

use common::{
    arg, check, detail, expect, expect_detail, first_fail, fix, fixture, keys, parse, peermem, run,
    run_at, run_smi, smi, verdict, write, Scratch,
};
use peermem_tool::doctor::{self, Verdict};
use peermem_tool::Root;
use serde_json::json;

/// The check `id` of a parsed JSON report.
fn json_check<'a>(v: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    let checks = v["checks"].as_array().expect("checks is an array");
    checks
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {v}"))
}

#[test]
fn dev_vm_with_fakes_has_no_hca_and_warns_about_detection() {
    let r = run("healthy-dev-vm");
    // The module was built on the host: the VM has no build tree to rebuild it.
    let c = expect(&r, "kernel-rust", Verdict::Warn);
    assert!(
        c.detail.starts_with("Rust symbols in /proc/kallsyms"),
        "{r:?}"
    );
    assert!(
        c.detail
            .ends_with("/lib/modules/7.3.0-peermem-dev/build is missing"),
        "{r:?}"
    );
    assert_eq!(
        expect(&r, "peermem-module", Verdict::Ok).detail,
        "peermem 0.1.0 loaded (persistent_api_support=1, peerdirect_support=0)"
    );
    // Only peermem is loaded and no memory_peers: applications will not see it.
    assert!(fix(expect(&r, "app-detection", Verdict::Warn)).contains("make dropin"));
    assert_eq!(verdict(&r, "nvidia-driver"), Verdict::Ok);
    assert_eq!(verdict(&r, "driver-version"), Verdict::NotApplicable);
    assert_eq!(verdict(&r, "persistent-api"), Verdict::NotApplicable);
    assert_eq!(verdict(&r, "peer-memory-core"), Verdict::Ok);
    assert_eq!(
        detail(&r, "peer-memory-core"),
        "ib_register_peer_memory_client found (module [ib_core]): provided by ib_core without a \
         version, so not MOFED's: the kernel's own (in-box peer_mem)"
    );
    assert_eq!(verdict(&r, "iommu"), Verdict::Ok);
    assert!(detail(&r, "iommu").starts_with("no IOMMU"));
    for id in ["bar1", "mig", "confidential-compute"] {
        assert_eq!(verdict(&r, id), Verdict::NotApplicable, "{id}");
    }
    // The VM has the fakes but no HCA: GPUDirect RDMA has no device to reach.
    first_fail(&r, "hca");
    assert!(!r.ready());
    assert_eq!(r.first_warn().unwrap().id, "kernel-rust");
    assert_eq!(verdict(&r, "boot-load"), Verdict::Warn);
    for id in ["symbol-errors", "gpu-product", "pcie-path"] {
        assert_eq!(verdict(&r, id), Verdict::NotApplicable, "{id}");
    }
    assert_eq!(verdict(&r, "pin-mode"), Verdict::Ok);
    assert!(detail(&r, "pin-mode").starts_with("persistent pins (persistent_api_support=1"));
    assert_eq!(verdict(&r, "module-signature"), Verdict::Ok);
    assert!(detail(&r, "module-signature").contains("not enforced"));
    // No kernel configuration in the recorded tree: nothing to compare compilers with.
    assert_eq!(verdict(&r, "toolchain"), Verdict::NotApplicable);
    assert_eq!(verdict(&r, "kernel-release"), Verdict::Ok);
    assert_eq!(r.checks.len(), 25);
}

#[test]
fn enforced_signatures_and_an_unsigned_module_fail() {
    let r = run("sig-enforced-unsigned");
    let c = expect(&r, "module-signature", Verdict::Fail);
    assert!(c.detail.contains("module.sig_enforce=Y"), "{c:?}");
    assert!(c
        .detail
        .contains("/lib/modules/7.3.0-peermem-dev/updates/peermem.ko is not signed"));
    let fix = fix(c);
    assert!(
        fix.contains("mokutil --import") && fix.contains("sign-file"),
        "{fix}"
    );
    assert!(!r.ready());
}

#[test]
fn a_signed_module_under_lockdown_is_fine() {
    let r = run("sig-enforced-signed");
    let d = &expect(&r, "module-signature", Verdict::Ok).detail;
    assert!(
        d.contains("lockdown [integrity]") && d.contains("nvidia-peermem.ko is signed"),
        "{d}"
    );
}

#[test]
fn secure_boot_with_a_compressed_module_says_how_to_check() {
    let r = run("secure-boot-compressed");
    let c = expect(&r, "module-signature", Verdict::Warn);
    assert!(c.detail.contains("Secure Boot on"));
    assert!(fix(c).contains("modinfo"));
}

#[test]
fn compilers_other_than_the_kernels_are_named() {
    let r = run("toolchain-mismatch");
    let d = &expect(&r, "toolchain", Verdict::Warn).detail;
    // The version the kernel was built with, and the one found.
    assert!(
        d.contains("missing rustc 1.88.0, the kernel's build: rustc 1.88.0 (6b00bc388 2025-06-23)"),
        "{d}"
    );
    assert!(
        d.contains("found: rustc: rustc 1.85.0 (4d91de4e4 2025-02-17)"),
        "{d}"
    );
    assert!(
        d.contains("clang 20 (Debian package clang-20; found: Debian clang version 19.1.7"),
        "{d}"
    );
    assert!(d.contains("ld.lld 20 (Debian package lld-20)"), "{d}");
    // The H100 host has what its kernel was built with: Ubuntu's rustc-1.93 and gcc-15.
    let r = run("healthy-h100");
    assert_eq!(
        detail(&r, "toolchain"),
        "the kernel's compilers are installed: rustc 1.93.1 (01f6ddf75 2026-02-11) \
         (built from a source tarball) (rustc-1.93), gcc-15"
    );
}

/// Recorded from the project's dev kernel (tests/toolchain/clang19-rustc196.config:
/// Linux 7.3.4 built with Debian's clang 19 and rustc-web 1.96) on Debian 12 with
/// Debian's versioned LLVM packages only (clang-19, lld-19, llvm-19: `clang-19`,
/// `ld.lld-19`, `llvm-ar-19`, ..., no unversioned `clang`) and rustc-web's
/// /usr/bin/rustc; version texts as those packages print them (the kernel's
/// CONFIG_CC_VERSION_TEXT, and tests/runner/logs' "Debian LLD 19.1.7").
#[test]
fn versioned_clang_is_found_as_kernel_toolchain_finds_it() {
    let r = run("toolchain-clang-19-only");
    assert_eq!(
        expect(&r, "toolchain", Verdict::Ok).detail,
        "the kernel's compilers are installed: rustc 1.96.0 (ac68faa20 2026-05-25) \
         (built from a source tarball) (rustc), clang-19"
    );
}

#[test]
fn a_rustc_of_another_build_is_not_the_kernels() {
    // The same version number from another build (rustup's) does not load the
    // kernel's crates: kernel-toolchain wants the exact version text.
    let dir = Scratch::copy_of("toolchain-clang-19-only", "rustc-other-build");
    write(
        &dir,
        "/rustc-version.txt",
        "rustc 1.96.0 (ac68faa20 2026-05-25)\n",
    );
    let r = run_at(&dir);
    let c = expect(&r, "toolchain", Verdict::Warn);
    assert!(
        c.detail
            .contains("found: rustc: rustc 1.96.0 (ac68faa20 2026-05-25)"),
        "{}",
        c.detail
    );
    // A rustup toolchain with the kernel's very build is taken.
    write(
        &dir,
        "/rustup-toolchain-list.txt",
        "stable-x86_64-unknown-linux-gnu (default)\n1.96-x86_64-unknown-linux-gnu\n",
    );
    write(
        &dir,
        "/rustup-1.96-x86_64-unknown-linux-gnu-rustc-version.txt",
        "rustc 1.96.0 (ac68faa20 2026-05-25) (built from a source tarball)\n",
    );
    let r = run_at(&dir);
    assert_eq!(verdict(&r, "toolchain"), Verdict::Ok);
    assert!(detail(&r, "toolchain").contains("(rustup toolchain 1.96-x86_64-unknown-linux-gnu)"));
}

#[test]
fn callback_mode_warns_about_the_lock_hazard() {
    let r = run("callback-mode");
    let c = expect(&r, "pin-mode", Verdict::Warn);
    assert!(c.detail.contains("can deadlock nvidia.ko"), "{c:?}");
    assert!(c.detail.contains("/sys/module/peermem/parameters"), "{c:?}");
    assert!(fix(c).contains("persistent_api_support=1"));
    // A warning, not a failure: only the dev VM's missing HCA fails.
    first_fail(&r, "hca");
    assert!(r
        .checks
        .iter()
        .all(|c| c.verdict != Verdict::Fail || c.id == "hca"));
}

#[test]
fn pin_mode_is_read_from_debugfs_where_sysfs_has_no_parameters() {
    let r = run("callback-mode-debugfs");
    let c = expect(&r, "pin-mode", Verdict::Warn);
    assert!(c.detail.contains("/sys/kernel/debug/peermem/params"));
    // Nothing says which mode: not applicable.
    let r = run("status-empty");
    assert_eq!(verdict(&r, "pin-mode"), Verdict::NotApplicable);
}

/// An Ubuntu 26.04 H100 host on Ubuntu's GA kernel 7.0.0-34-generic, with
/// linux-headers-7.0.0-34-generic and linux-lib-rust-7.0.0-34-generic installed:
/// /etc/os-release as Ubuntu 26.04 ships it; /boot/config-7.0.0-34-generic with the
/// compiler lines of Ubuntu's 7.0 kernels (gcc "x86_64-linux-gnu-gcc (Ubuntu
/// 15.2.0-16ubuntu1) 15.2.0", as 7.0.0-29-generic's banner reads; rustc 1.93.1 from a
/// source tarball, Ubuntu's rustc-1.93, with which users build against
/// linux-lib-rust-7.0.0-15-generic); /lib/modules/7.0.0-34-generic/build ->
/// /usr/src/linux-headers-7.0.0-34-generic (the fixture's links are relative to stay
/// inside it), its .config, scripts/target.json (the flavour tree's own, as
/// scripts/ubuntu-tree lays it out), and rust -> ../linux-lib-rust-7.0.0-34-generic/rust
/// (Ubuntu's debian/scripts/link-lib-rust) holding the crates rust/Makefile of Linux
/// 7.0 builds; no scripts/Makefile.build (so doctor asks for the crates every 7.x
/// module gets); Ubuntu's gcc, gcc-15 and rustc-1.93 installed. The driver, module and
/// `nvidia-smi -q` files are the former 6.14 fixture's (tests/fixtures/kernel-6.14).
/// driver-530, missing-core, nvidia-own-peermem, old-driver-510 and
/// proprietary-driver run on the same Ubuntu layout. All six have the same PCIe and
/// RDMA sysfs (a GPU and a ConnectX-7 below one PCIe switch: tests/doctor_host.rs);
/// healthy-h100 also has peermem-dropin-dkms's /etc/modules-load.d/peermem.conf and its
/// boot log as /dmesg.txt.
#[test]
fn h100_with_dropin_is_ready() {
    let r = run("healthy-h100");
    // The recorded tree has no module file nor MOFED Module.symvers to compare (file
    // times do not survive git: tests/doctor_host.rs makes them).
    let not_ok: Vec<_> = r
        .checks
        .iter()
        .filter(|c| c.verdict != Verdict::Ok && !["core-symbols", "module-file"].contains(&c.id))
        .collect();
    assert!(not_ok.is_empty(), "{not_ok:#?}");
    assert_eq!(verdict(&r, "core-symbols"), Verdict::NotApplicable);
    // The recorded tree has no modules.dep (doctor_host's module-file tests write one).
    assert_eq!(verdict(&r, "module-file"), Verdict::NotApplicable);
    for (id, want) in [
        (
            "kernel-rust",
            "CONFIG_RUST=y (from /boot/config-7.0.0-34-generic); \
             /lib/modules/7.0.0-34-generic/build has the kernel's Rust crates \
             (rust/*.rmeta, rust/libmacros.so) and scripts/target.json",
        ),
        (
            "kernel-release",
            "Linux 7.0 (7.0.0-34-generic): peermem supports Linux 7.0, 7.3",
        ),
        (
            "app-detection",
            "applications detect GPUDirect RDMA through /sys/module/nvidia_peermem/version",
        ),
        (
            "driver-version",
            "driver 580.65.06: page-table version 2.x, supported (515 and later)",
        ),
        (
            "bar1",
            "00000000:18:00.0: BAR1 131072 MiB, 1 MiB used, 131071 MiB free",
        ),
        ("mig", "MIG disabled"),
        ("confidential-compute", "confidential compute off"),
    ] {
        assert_eq!(detail(&r, id), want, "{id}");
    }
    for (id, part) in [
        ("peermem-module", "peermem's drop-in build"),
        ("nvidia-driver", "open kernel modules"),
        ("iommu", "passthrough"),
    ] {
        assert!(detail(&r, id).contains(part), "{id}: {}", detail(&r, id));
    }
    assert_eq!(r.summary(), "verdict: ready");
}

#[test]
fn proprietary_driver_fails_first() {
    let r = run("proprietary-driver");
    let c = first_fail(&r, "nvidia-driver");
    assert!(c.detail.contains("taint 'POE'"), "{c:?}");
    assert!(!r.ready());
    assert!(r
        .summary()
        .contains("a Rust module cannot use the proprietary nvidia.ko"));
}

/// missing-core: MOFED 25.04's ib_core loaded, its ib_uverbs (the exporter from 25.04
/// on) not, and no Module.symvers to name the exporter: the check fails, claiming no
/// provider, and its fix names both modules that may carry the core and the way out.
/// With MOFED's Module.symvers installed naming ib_uverbs, it names ib_uverbs.
#[test]
fn missing_peer_memory_core_fails() {
    let r = run("missing-core");
    let c = first_fail(&r, "peer-memory-core");
    assert_eq!(
        c.detail,
        "no loaded module exports ib_register_peer_memory_client: ib_core 25.04-0.6.1 \
         (MOFED/DOCA-OFED's) is loaded and does not export it, ib_uverbs is not loaded, and \
         no Module.symvers names its exporter (neither MOFED/DOCA-OFED's \
         (/usr/src/ofa_kernel) nor the kernel's \
         (/lib/modules/7.0.0-34-generic/build/Module.symvers))"
    );
    assert!(fix(c).starts_with("modprobe ib_uverbs: "), "{c:?}");
    assert!(r.summary().contains("install MOFED/DOCA-OFED"));
    assert!(r.summary().contains("use dma-buf"));

    let dir = Scratch::copy_of("missing-core", "missing-core-symvers");
    write(
        &dir,
        "/usr/src/ofa_kernel/x86_64/7.0.0-34-generic/Module.symvers",
        "0x1c2d3e4f\tib_register_peer_memory_client\tdrivers/infiniband/core/ib_uverbs\tEXPORT_SYMBOL\t\n",
    );
    let r = run_at(&dir);
    let c = first_fail(&r, "peer-memory-core");
    assert_eq!(
        c.detail,
        "no loaded module exports ib_register_peer_memory_client: MOFED/DOCA-OFED's \
         /usr/src/ofa_kernel/x86_64/7.0.0-34-generic/Module.symvers names ib_uverbs as its \
         exporter, and ib_uverbs is not loaded"
    );
    assert_eq!(
        fix(c),
        "modprobe ib_uverbs (systemctl restart openibd loads it too, as openibd does at boot)"
    );
}

#[test]
fn nvidias_own_nvidia_peermem_is_recognised() {
    let r = run("nvidia-own-peermem");
    let c = expect(&r, "peermem-module", Verdict::Warn);
    assert!(
        c.detail
            .contains("NVIDIA's own module (its version is the driver's)"),
        "{}",
        c.detail
    );
    // Applications do detect it: it is NVIDIA's, but GPUDirect RDMA works.
    assert_eq!(verdict(&r, "app-detection"), Verdict::Ok);
    assert!(r.ready());
}

#[test]
fn unknown_nvidia_peermem_without_debugfs_is_probably_nvidias() {
    let dir = Scratch::new("unknown-nvidia-peermem");
    write(&dir, "/sys/module/nvidia_peermem/version", "575.57.08\n");
    let r = run_at(&dir);
    let c = expect(&r, "peermem-module", Verdict::Warn);
    assert!(c.detail.contains("probably NVIDIA's own module"));
}

#[test]
fn driver_510_is_unsupported() {
    let r = run("old-driver-510");
    let c = first_fail(&r, "driver-version");
    assert!(
        c.detail.starts_with("driver 510.108.03 is older than 515"),
        "{c:?}"
    );
    assert_eq!(verdict(&r, "persistent-api"), Verdict::NotApplicable);
}

#[test]
fn driver_530_has_no_persistent_api() {
    let r = run("driver-530");
    for (id, want, part) in [
        (
            "driver-version",
            Verdict::Ok,
            "530.30.02: page-table version 1.x",
        ),
        ("persistent-api", Verdict::Warn, "no persistent pin API"),
    ] {
        assert!(expect(&r, id, want).detail.contains(part), "{id}");
    }
    assert!(r.ready());
}

#[test]
fn nvidia_smi_mig_enabled_warns() {
    let r = run_smi("healthy-h100", Some(&smi("mig-enabled.txt")));
    expect_detail(&r, "mig", Verdict::Warn, "MIG enabled on 00000000:18:00.0");
    assert!(r.ready());
}

#[test]
fn nvidia_smi_confidential_compute_fails_persistent_mode() {
    let r = run_smi("healthy-h100", Some(&smi("cc-on.txt")));
    assert_eq!(verdict(&r, "confidential-compute"), Verdict::Fail);
    assert!(r.summary().contains("persistent_api_support=0"));
}

#[test]
fn nvidia_smi_small_bar1_warns() {
    let r = run_smi("healthy-h100", Some(&smi("bar1-small.txt")));
    expect_detail(
        &r,
        "bar1",
        Verdict::Warn,
        "00000000:18:00.0: BAR1 256 MiB, 230 MiB used, 26 MiB free (nearly exhausted) \
         (small BAR1: large registrations fail)",
    );
}

/// Nothing installed: the GPU driver is what to fix first, then the HCA, then the
/// module, which loads over them (dependency order), whose fix is installing the
/// package whose unit loads it.
#[test]
fn empty_root_fails_on_the_gpu_driver_first_not_the_module() {
    let r = run_at(&fixture("status-no-debugfs/nowhere"));
    assert_eq!(verdict(&r, "kernel-rust"), Verdict::Warn);
    assert_eq!(verdict(&r, "kernel-release"), Verdict::Warn);
    first_fail(&r, "nvidia-driver");
    let fails: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .map(|c| c.id)
        .collect();
    assert_eq!(
        fails,
        ["nvidia-driver", "hca", "peermem-module", "app-detection"]
    );
    assert!(fix(check(&r, "peermem-module")).starts_with("install peermem's package"));
    assert!(r
        .summary()
        .starts_with("verdict: not ready; fix first: nvidia-driver: "));
}

#[test]
fn text_and_json_rendering() {
    let r = run("proprietary-driver");
    let text = r.render_text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("OK    kernel-rust"));
    assert!(text.contains(&format!(
        "\nFAIL  {:<20} nvidia.ko is the proprietary build",
        "nvidia-driver"
    )));
    assert!(lines
        .last()
        .unwrap()
        .starts_with("verdict: not ready; fix first: nvidia-driver: "));
    let v = parse(&r.render_json());
    assert_eq!(v["ready"], json!(false));
    assert_eq!(v["verdict"], json!(r.summary()));
    assert!(r
        .summary()
        .starts_with("verdict: not ready; fix first: nvidia-driver"));
    assert_eq!(
        v["checks"][0],
        json!({"id": "kernel-rust", "verdict": "OK",
               "detail": "CONFIG_RUST=y (from /boot/config-7.0.0-34-generic); \
                          /lib/modules/7.0.0-34-generic/build has the kernel's Rust crates \
                          (rust/*.rmeta, rust/libmacros.so) and scripts/target.json",
               "fix": null, "peer_memory": true})
    );
    assert_eq!(v["fix_first"], json!("nvidia-driver"));
    let failed = json_check(&v, "nvidia-driver");
    assert_eq!(failed["verdict"], json!("FAIL"));
    assert_eq!(
        failed["fix"].as_str(),
        check(&r, "nvidia-driver").fix.as_deref()
    );
}

/// What `peermem doctor --json` prints: `{"schema_version", "ready", "verdict",
/// "fix_first", "first_warning", "peer_memory_needed", "checks", "paths",
/// "path_facts"}`, each check `{"id", "verdict", "detail", "fix", "peer_memory"}` with
/// the same results as the library's report.
#[test]
fn json_output_has_the_documented_shape() {
    for case in [
        "healthy-h100",
        "healthy-dev-vm",
        "proprietary-driver",
        "driver-530",
    ] {
        let out = peermem(&["doctor", "--json", "--root", arg(&fixture(case))]);
        let v = parse(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(
            keys(&v),
            [
                "schema_version",
                "ready",
                "verdict",
                "fix_first",
                "first_warning",
                "peer_memory_needed",
                "checks",
                "paths",
                "path_facts"
            ],
            "{case}"
        );
        assert_eq!(v["schema_version"], json!(3), "{case}");
        let want = run(case);
        assert_eq!(v["ready"], json!(want.ready()), "{case}");
        assert_eq!(out.status.code(), Some(if want.ready() { 0 } else { 1 }));
        assert_eq!(v["verdict"], json!(want.summary()), "{case}");
        assert_eq!(
            v["fix_first"],
            json!(want.first_fail().map(|c| c.id)),
            "{case}"
        );
        assert_eq!(
            v["first_warning"],
            json!(want.first_warn().map(|c| c.id)),
            "{case}"
        );
        assert_eq!(
            v["peer_memory_needed"],
            json!(want.peer_memory_needed),
            "{case}"
        );
        let checks = v["checks"].as_array().expect("checks is an array");
        assert_eq!(checks.len(), want.checks.len(), "{case}");
        for (c, w) in checks.iter().zip(&want.checks) {
            assert_eq!(
                keys(c),
                ["id", "verdict", "detail", "fix", "peer_memory"],
                "{case}: {c}"
            );
            assert_eq!(c["peer_memory"], json!(w.peer_memory));
            assert_eq!(c["id"], json!(w.id));
            assert!(
                ["OK", "WARN", "FAIL", "N/A"].contains(&c["verdict"].as_str().unwrap()),
                "{c}"
            );
            assert_eq!(c["verdict"], json!(w.verdict.word()));
            assert_eq!(c["detail"], json!(w.detail));
            assert!(c["fix"].is_null() || c["fix"].is_string(), "{c}");
            assert_eq!(c["fix"], json!(w.fix));
        }
    }
}

#[test]
fn binary_exit_codes() {
    let h100 = fixture("healthy-h100");
    let ok = peermem(&["doctor", "--root", arg(&h100)]);
    assert_eq!(ok.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&ok.stdout).ends_with("verdict: ready\n"));
    let fail = peermem(&["doctor", "--root", arg(&fixture("proprietary-driver"))]);
    assert_eq!(fail.status.code(), Some(1));
    let mig = fixture("nvidia-smi/mig-enabled.txt");
    let out = peermem(&[
        "doctor",
        "--json",
        "--root",
        arg(&h100),
        "--nvidia-smi-output",
        arg(&mig),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v = parse(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(json_check(&v, "mig")["verdict"], json!("WARN"));
    assert_eq!(v["ready"], json!(true));
    let usage = peermem(&["frobnicate"]);
    assert_eq!(usage.status.code(), Some(64));
}

/// The releases `kernel-release` accepts are SUPPORTED_KERNELS' lines, read at
/// compile time: the tool holds no list of its own.
#[test]
fn supported_kernels_are_the_repository_list() {
    let file = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../SUPPORTED_KERNELS"
    ))
    .unwrap();
    let want: Vec<String> = file
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let have: Vec<String> = doctor::supported_kernels()
        .iter()
        .map(|(v, p)| format!("{v}.{p}"))
        .collect();
    assert_eq!(have, want);
    assert_eq!(doctor::supported_list(), want.join(", "));
}

#[test]
fn release_strings_give_version_and_patchlevel() {
    for (release, want) in [
        ("7.0.0-34-generic", Some((7, 0))),
        ("6.14.0-rust", Some((6, 14))),
        ("7.3.4+deb13-amd64", Some((7, 3))),
        ("6.18.44-fc-v657-gpu", Some((6, 18))),
        ("7.3.4", Some((7, 3))),
        ("7.1-rc3", Some((7, 1))),
        ("generic", None),
        ("7", None),
    ] {
        assert_eq!(doctor::release_version(release), want, "{release}");
    }
}

/// The former healthy-h100 fixture, as it was: a self-built 6.14.0-rust kernel with
/// CONFIG_RUST=y, rustc 1.85 and Ubuntu's clang 19 (tests/fixtures/kernel-6.14).
/// Linux 6.14 is no release peermem supports: the host is not ready.
#[test]
fn an_unsupported_kernel_fails_with_the_supported_list() {
    let r = run("kernel-6.14");
    let c = first_fail(&r, "kernel-release");
    assert_eq!(
        c.detail,
        "Linux 6.14 (6.14.0-rust) is not supported: peermem supports Linux 7.0, 7.3"
    );
    assert!(fix(c).contains("Linux 7.0, 7.3"));
    assert!(!r.ready());
    // Its build tree is not recorded; the loaded module makes that a warning.
    assert_eq!(verdict(&r, "kernel-rust"), Verdict::Warn);
    // Right after kernel-rust.
    assert_eq!(r.checks[0].id, "kernel-rust");
    assert_eq!(r.checks[1].id, "kernel-release");
}

/// Linux 7.1 lies between supported releases but is not one: the test bed neither
/// builds nor tests it. healthy-h100 with its release changed to a 7.1 kernel's.
#[test]
fn linux_7_1_is_not_supported() {
    let dir = Scratch::copy_of("healthy-h100", "linux-7.1");
    write(&dir, "/proc/sys/kernel/osrelease", "7.1.0-rust\n");
    let r = run_at(&dir);
    let c = expect_detail(
        &r,
        "kernel-release",
        Verdict::Fail,
        "Linux 7.1 (7.1.0-rust) is not supported: peermem supports Linux 7.0, 7.3",
    );
    assert!(fix(c).contains("boot a Linux 7.0, 7.3 kernel"));
    assert!(!r.ready());
}

/// Recorded on the lent GPU host (2026-11-26): Ubuntu 24.04 userland under a
/// 6.18.44-fc-v657-gpu kernel built without Rust (gcc 15.3.0, CONFIG_RUSTC_VERSION=0,
/// no CONFIG_RUST line at all), whose only configuration is /proc/config.gz
/// (CONFIG_IKCONFIG_PROC=y; no /boot/config-*, no /lib/modules/<release>). The
/// config.gz, os-release, cmdline and `nvidia-smi -q` are the host's own files.
#[test]
fn a_kernel_without_rust_is_named_from_proc_config_gz() {
    let r = run("lent-h200-6.18");
    let c = first_fail(&r, "kernel-rust");
    assert_eq!(
        c.detail,
        "the kernel has no Rust support: CONFIG_RUST is not set in /proc/config.gz \
         (CONFIG_RUSTC_VERSION=0: it was built without a Rust compiler)"
    );
    assert!(fix(c).contains("CONFIG_RUST=y"));
    assert!(expect(&r, "kernel-release", Verdict::Fail)
        .detail
        .starts_with("Linux 6.18 (6.18.44-fc-v657-gpu) is not supported"));
    // Its compilers do not matter: there is no Rust to build against.
    assert_eq!(verdict(&r, "toolchain"), Verdict::NotApplicable);
    // Its `nvidia-smi -q` (an H200 on driver 580.159.04) parses.
    assert_eq!(
        detail(&r, "bar1"),
        "00000000:00:06.0: BAR1 262144 MiB, 1 MiB used, 262143 MiB free"
    );
    assert_eq!(detail(&r, "mig"), "MIG disabled");
    assert_eq!(verdict(&r, "driver-version"), Verdict::Ok);
}

/// Ubuntu 26.04, 7.0.0-34-generic with linux-headers-7.0.0-34-generic but not
/// linux-lib-rust-7.0.0-34-generic: /lib/modules/7.0.0-34-generic/build ->
/// /usr/src/linux-headers-7.0.0-34-generic, whose rust -> ../linux-lib-rust-
/// 7.0.0-34-generic/rust dangles (Ubuntu's debian/scripts/link-lib-rust; the
/// package split of LP: #2015867). Compiler lines of the kernel's config: gcc
/// "x86_64-linux-gnu-gcc (Ubuntu 15.2.0-16ubuntu1) 15.2.0" (the 7.0.0-29-generic
/// kernel's own banner) and rustc 1.93.1 (what Ubuntu 26.04's 7.0 kernels were built
/// with, as users building against linux-lib-rust-7.0.0-15-generic report).
#[test]
fn ubuntu_without_lib_rust_names_the_package() {
    let r = run("ubuntu-26.04-no-lib-rust");
    let c = first_fail(&r, "kernel-rust");
    assert!(
        c.detail
            .contains("/lib/modules/7.0.0-34-generic/build lacks the Rust files"),
        "{c:?}"
    );
    assert!(c.detail.contains("(its rust link is dangling)"), "{c:?}");
    assert!(
        c.detail.ends_with(
            ": rust/libcore.rmeta, rust/libcompiler_builtins.rmeta, rust/libffi.rmeta, \
             rust/libbindings.rmeta, rust/libuapi.rmeta, rust/libbuild_error.rmeta, \
             rust/libmacros.so, rust/libpin_init.rmeta, rust/libpin_init_internal.so, \
             rust/libkernel.rmeta"
        ),
        "{c:?}"
    );
    assert_eq!(
        c.fix.as_deref(),
        Some("apt install linux-lib-rust-7.0.0-34-generic")
    );
    // The same host with the package installed.
    let r = run("ubuntu-26.04-lib-rust");
    for id in ["kernel-rust", "kernel-release", "toolchain"] {
        expect(&r, id, Verdict::Ok);
    }
}

/// The same Ubuntu 26.04 host with neither linux-headers nor linux-lib-rust.
#[test]
fn ubuntu_without_headers_names_both_packages() {
    let r = run("ubuntu-26.04-no-headers");
    let c = expect(&r, "kernel-rust", Verdict::Fail);
    assert!(
        c.detail
            .ends_with("the kernel's build tree /lib/modules/7.0.0-34-generic/build is missing"),
        "{c:?}"
    );
    assert_eq!(
        c.fix.as_deref(),
        Some("apt install linux-headers-7.0.0-34-generic linux-lib-rust-7.0.0-34-generic")
    );
}

/// Ubuntu's scripts/target.json is the headers' (linux-headers-<release>, a file of
/// the flavour tree: scripts/ubuntu-tree), not linux-lib-rust's: without it rustc
/// cannot build for x86 (`target file ".../scripts/target.json" does not exist`).
#[test]
fn ubuntu_without_target_json_names_the_headers_package() {
    let dir = Scratch::copy_of("ubuntu-26.04-lib-rust", "no-target-json");
    std::fs::remove_file(dir.join("usr/src/linux-headers-7.0.0-34-generic/scripts/target.json"))
        .unwrap();
    let r = run_at(&dir);
    let c = expect(&r, "kernel-rust", Verdict::Fail);
    assert!(c.detail.ends_with(": scripts/target.json"), "{c:?}");
    let fix = fix(c);
    assert!(fix.contains("linux-headers-7.0.0-34-generic"), "{fix}");
    assert!(!fix.contains("linux-lib-rust"), "{fix}");
    // Only x86 builds against target.json (arch/x86/Makefile): the same tree
    // configured for arm64 needs none.
    for f in [
        "boot/config-7.0.0-34-generic",
        "usr/src/linux-headers-7.0.0-34-generic/.config",
    ] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        let arm = text
            .replace("CONFIG_X86_64=y\n", "")
            .replace("CONFIG_X86=y\n", "CONFIG_ARM64=y\n");
        std::fs::write(dir.join(f), arm).unwrap();
    }
    expect(&run_at(&dir), "kernel-rust", Verdict::Ok);
}

/// The fix of a Debian host whose kernel's Rust build files are missing: Debian
/// ships none, peermem's `make lib-rust` builds them from the kernel's sources.
const DEBIAN_LIB_RUST_FIX: &str = "apt install linux-source-7.3, then run `sudo make lib-rust` \
     in peermem's source tree (it builds the kernel's Rust build files from \
     linux-source-7.3; docs/install.md)";

/// A Debian 13 (trixie) host on the trixie-backports kernel 7.3.4+deb13-amd64
/// (CONFIG_RUST=y; built with gcc-14, "x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19)
/// 14.2.0", and rustc 1.85.1) with linux-headers-7.3.4+deb13-amd64 installed, which
/// has no Rust build files: /lib/modules/7.3.4+deb13-amd64/build ->
/// /usr/src/linux-headers-7.3.4+deb13-amd64 (the fixture's links are relative to stay
/// inside it), its .config, and scripts -> ../../lib/linux-kbuild-7.3/scripts (the
/// linux-kbuild-7.3 package), whose Makefile.build is an excerpt of Linux 7.3's
/// (tests/fixtures/makefile-build/7.3: `--extern pin_init --extern kernel --extern
/// zerocopy --extern zerocopy_derive`). gcc-14 and rustc 1.85.1 installed. No GPU,
/// driver or module files: only the kernel checks are judged.
#[test]
fn debian_13_without_rust_files_names_lib_rust() {
    let r = run("debian-13-no-lib-rust");
    let c = first_fail(&r, "kernel-rust");
    assert!(
        c.detail.starts_with(
            "CONFIG_RUST=y (from /boot/config-7.3.4+deb13-amd64), but the build tree \
             /lib/modules/7.3.4+deb13-amd64/build lacks the Rust files out-of-tree Rust \
             modules are built against: rust/libcore.rmeta, "
        ),
        "{c:?}"
    );
    for f in [
        "rust/libkernel.rmeta",
        "rust/libmacros.so",
        "rust/libpin_init_internal.so",
        "rust/libzerocopy.rmeta",
        "rust/libzerocopy_derive.so",
    ] {
        assert!(c.detail.contains(f), "{f}: {c:?}");
    }
    assert!(c.detail.ends_with(", scripts/target.json"), "{c:?}");
    assert_eq!(c.fix.as_deref(), Some(DEBIAN_LIB_RUST_FIX));
    expect_detail(
        &r,
        "kernel-release",
        Verdict::Ok,
        "Linux 7.3 (7.3.4+deb13-amd64): peermem supports Linux 7.0, 7.3",
    );
    expect(&r, "toolchain", Verdict::Ok);
}

/// The same Debian 13 host after `sudo make lib-rust`: the kernel's crates in the
/// headers tree's rust/ (the ten every module gets and 7.3's zerocopy and
/// zerocopy_derive), scripts/target.json through the scripts link, in
/// /usr/lib/linux-kbuild-7.3/scripts.
#[test]
fn debian_13_with_lib_rust_builds() {
    let r = run("debian-13-lib-rust");
    expect_detail(
        &r,
        "kernel-rust",
        Verdict::Ok,
        "CONFIG_RUST=y (from /boot/config-7.3.4+deb13-amd64); \
         /lib/modules/7.3.4+deb13-amd64/build has the kernel's Rust crates (rust/*.rmeta, \
         rust/libmacros.so) and scripts/target.json",
    );
    expect(&r, "kernel-release", Verdict::Ok);
    expect(&r, "toolchain", Verdict::Ok);
}

/// Debian 13 without linux-headers: the headers package, then lib-rust.
#[test]
fn debian_without_headers_names_the_headers_package() {
    let dir = Scratch::copy_of("debian-13-no-lib-rust", "debian-no-headers");
    std::fs::remove_file(dir.join("lib/modules/7.3.4+deb13-amd64/build")).unwrap();
    let r = run_at(&dir);
    let c = expect(&r, "kernel-rust", Verdict::Fail);
    assert!(
        c.detail
            .ends_with("the kernel's build tree /lib/modules/7.3.4+deb13-amd64/build is missing"),
        "{c:?}"
    );
    assert_eq!(
        fix(c),
        "apt install linux-headers-7.3.4+deb13-amd64 linux-source-7.3, then run `sudo make \
         lib-rust` in peermem's source tree (it builds the kernel's Rust build files from \
         linux-source-7.3; docs/install.md)"
    );
}

/// The crates a module is built against are the build tree's scripts/Makefile.build's
/// `--extern`s, whatever the release: 7.3's names zerocopy and zerocopy_derive (a
/// proc macro: its .so), 7.0's does not (tests/fixtures/makefile-build/).
#[test]
fn the_build_trees_makefile_names_the_crates() {
    let debian_rust = "usr/src/linux-headers-7.3.4+deb13-amd64/rust";
    // A 7.3 tree without zerocopy_derive's proc macro.
    let dir = Scratch::copy_of("debian-13-lib-rust", "no-zerocopy-derive");
    std::fs::remove_file(dir.join(debian_rust).join("libzerocopy_derive.so")).unwrap();
    let r = run_at(&dir);
    let c = expect(&r, "kernel-rust", Verdict::Fail);
    assert!(
        c.detail
            .ends_with("built against: rust/libzerocopy_derive.so"),
        "{c:?}"
    );
    assert_eq!(c.fix.as_deref(), Some(DEBIAN_LIB_RUST_FIX));
    // A tree whose Makefile.build is 7.0's: no zerocopy files needed.
    let dir = Scratch::copy_of("debian-13-lib-rust", "makefile-7.0");
    std::fs::copy(
        fixture("makefile-build/7.0"),
        dir.join("usr/lib/linux-kbuild-7.3/scripts/Makefile.build"),
    )
    .unwrap();
    for f in ["libzerocopy.rmeta", "libzerocopy_derive.so"] {
        std::fs::remove_file(dir.join(debian_rust).join(f)).unwrap();
    }
    expect(&run_at(&dir), "kernel-rust", Verdict::Ok);
    // Ubuntu's 7.0 tree with 7.0's Makefile.build is fine; with one naming zerocopy
    // (as 7.3's does), the zerocopy files are missing.
    let dir = Scratch::copy_of("ubuntu-26.04-lib-rust", "ubuntu-makefile");
    let makefile = dir.join("usr/src/linux-headers-7.0.0-34-generic/scripts/Makefile.build");
    std::fs::copy(fixture("makefile-build/7.0"), &makefile).unwrap();
    expect(&run_at(&dir), "kernel-rust", Verdict::Ok);
    std::fs::copy(fixture("makefile-build/7.3"), &makefile).unwrap();
    let r = run_at(&dir);
    let c = expect(&r, "kernel-rust", Verdict::Fail);
    assert!(
        c.detail
            .ends_with(": rust/libzerocopy.rmeta, rust/libzerocopy_derive.so"),
        "{c:?}"
    );
    assert_eq!(
        c.fix.as_deref(),
        Some("apt install linux-lib-rust-7.0.0-34-generic")
    );
}

/// Elsewhere than Ubuntu (the lent host's os-release with ID=ubuntu, but a kernel
/// release of no Ubuntu package; or a Debian host), the files are named, no package.
#[test]
fn non_ubuntu_hosts_are_told_the_missing_files() {
    let dir = Scratch::copy_of("ubuntu-26.04-no-lib-rust", "non-ubuntu");
    std::fs::copy(
        fixture("toolchain-clang-19-only/etc/os-release"),
        dir.join("etc/os-release"),
    )
    .unwrap();
    let r = run_at(&dir);
    let c = expect(&r, "kernel-rust", Verdict::Fail);
    let fix = fix(c);
    assert!(!fix.contains("apt install"), "{fix}");
    assert!(
        fix.contains("/lib/modules/7.0.0-34-generic/build/rust"),
        "{fix}"
    );
    assert!(c.detail.contains("rust/libkernel.rmeta"), "{c:?}");
}

/// A loaded peermem was built elsewhere: a missing build tree only stops rebuilding.
#[test]
fn a_missing_build_tree_warns_when_peermem_is_loaded() {
    let dir = Scratch::copy_of("ubuntu-26.04-no-headers", "loaded-no-headers");
    std::fs::create_dir_all(dir.join("sys/module/peermem")).unwrap();
    assert_eq!(verdict(&run_at(&dir), "kernel-rust"), Verdict::Warn);
}

/// /proc/config.gz is read when there is no /boot/config-<release>: the Ubuntu
/// host's configuration, gzipped, as a kernel with CONFIG_IKCONFIG_PROC shows it.
#[test]
fn proc_config_gz_is_read() {
    let dir = Scratch::copy_of("ubuntu-26.04-lib-rust", "config-gz");
    let config = dir.join("boot/config-7.0.0-34-generic");
    let text = std::fs::read(&config).unwrap();
    std::fs::remove_file(&config).unwrap();
    let gz = std::process::Command::new("gzip")
        .arg("-c")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(&text)?;
            child.wait_with_output()
        })
        .unwrap();
    std::fs::write(dir.join("proc/config.gz"), gz.stdout).unwrap();
    let r = run_at(&dir);
    assert!(expect(&r, "kernel-rust", Verdict::Ok)
        .detail
        .starts_with("CONFIG_RUST=y (from /proc/config.gz)"));
    expect(&r, "toolchain", Verdict::Ok);
}

/// A user other than root cannot enter debugfs: doctor says to run it as root instead
/// of judging the module from what it could not read. Injected through the root, so
/// the test also runs as root.
#[test]
fn permission_denied_asks_for_root() {
    let root = Root::new(fixture("healthy-h100")).deny("/sys/kernel/debug");
    let _ = doctor::run(&root, None);
    let why = doctor::permission_denied(&root).expect("a denial is reported");
    assert!(
        why.starts_with("permission denied reading /sys/kernel/debug/peermem"),
        "{why}"
    );
    assert!(
        why.contains("run it as root (sudo peermem doctor)"),
        "{why}"
    );
    // As root, nothing is denied.
    let root = Root::new(fixture("healthy-h100"));
    let _ = doctor::run(&root, None);
    assert_eq!(doctor::permission_denied(&root), None);
}

/// A self-built kernel's tree: the toolchain-clang-19-only host (Debian 12, the dev
/// kernel 7.3.4 built in /usr/src/linux-source-7.3, Debian's linux-source-7.3
/// unpacked; `make modules_install` links /lib/modules/7.3.4/build there), whose
/// scripts/Makefile.build is 7.3's. Its release is no Debian package's: the files are
/// named, no package.
#[test]
fn a_self_built_7_3_tree_needs_what_its_makefile_names() {
    let dir = Scratch::copy_of("toolchain-clang-19-only", "zerocopy");
    let tree = dir.join("usr/src/linux-source-7.3");
    std::fs::create_dir_all(tree.join("rust")).unwrap();
    std::fs::create_dir_all(tree.join("scripts")).unwrap();
    std::fs::copy(
        fixture("makefile-build/7.3"),
        tree.join("scripts/Makefile.build"),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("lib/modules/7.3.4")).unwrap();
    std::os::unix::fs::symlink(
        "../../../usr/src/linux-source-7.3",
        dir.join("lib/modules/7.3.4/build"),
    )
    .unwrap();
    for f in doctor::RUST_BUILD_FILES {
        std::fs::write(tree.join(f), "").unwrap();
    }
    let r = run_at(&dir);
    let c = check(&r, "kernel-rust").clone();
    for f in [
        "rust/libzerocopy.rmeta",
        "rust/libzerocopy_derive.so",
        "scripts/target.json",
    ] {
        std::fs::write(tree.join(f), "").unwrap();
    }
    let fixed = run_at(&dir);
    assert_eq!(c.verdict, Verdict::Fail, "{c:?}");
    assert!(
        c.detail
            .ends_with(": rust/libzerocopy.rmeta, rust/libzerocopy_derive.so, scripts/target.json"),
        "{c:?}"
    );
    let fix = fix(&c);
    assert!(!fix.contains("apt"), "{fix}");
    assert!(
        fix.contains(
            "/lib/modules/7.3.4/build/rust and /lib/modules/7.3.4/build/scripts/target.json"
        ),
        "{fix}"
    );
    assert_eq!(verdict(&fixed, "kernel-rust"), Verdict::Ok);
    assert_eq!(verdict(&fixed, "kernel-release"), Verdict::Ok);
}

/// The list of files, as peermem's Kbuild computes it: the fixed crates, each
/// `--extern` of scripts/Makefile.build (proc macros by name: `macros`, `*_internal`,
/// `*_derive`), scripts/target.json on x86.
#[test]
fn rust_build_files_follow_the_makefiles_externs() {
    let files: Vec<String> = doctor::RUST_CRATES
        .iter()
        .map(|c| doctor::rust_crate_file(c))
        .collect();
    assert_eq!(files, doctor::RUST_BUILD_FILES);
    for (name, file) in [
        ("kernel", "rust/libkernel.rmeta"),
        ("macros", "rust/libmacros.so"),
        ("pin_init_internal", "rust/libpin_init_internal.so"),
        ("zerocopy_derive", "rust/libzerocopy_derive.so"),
        ("zerocopy", "rust/libzerocopy.rmeta"),
    ] {
        assert_eq!(doctor::rust_crate_file(name), file, "{name}");
    }
    let read = |v: &str| std::fs::read_to_string(fixture("makefile-build").join(v)).unwrap();
    let (m70, m73) = (read("7.0"), read("7.3"));
    assert_eq!(doctor::module_externs(&m70), ["pin_init", "kernel"]);
    assert_eq!(
        doctor::module_externs(&m73),
        ["pin_init", "kernel", "zerocopy", "zerocopy_derive"]
    );
    // Options and paths are not names; make variables and comments are skipped.
    assert_eq!(
        doctor::module_externs(
            "\t--extern force:alloc --extern=ffi=rust/libffi.rmeta --extern $(x) \\\n\
             # --extern commented\n\t--extern kernel --extern kernel\n"
        ),
        ["alloc", "ffi", "kernel"]
    );
    // No Makefile.build (or 7.0's): the fixed crates, pin_init and kernel among them.
    assert_eq!(
        doctor::rust_build_files(None, false),
        doctor::RUST_BUILD_FILES
    );
    assert_eq!(
        doctor::rust_build_files(Some(&m70), false),
        doctor::RUST_BUILD_FILES
    );
    let mut want: Vec<&str> = doctor::RUST_BUILD_FILES.to_vec();
    want.extend([
        "rust/libzerocopy.rmeta",
        "rust/libzerocopy_derive.so",
        doctor::TARGET_JSON,
    ]);
    assert_eq!(doctor::rust_build_files(Some(&m73), true), want);
}
