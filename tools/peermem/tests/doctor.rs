// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem doctor` on recorded trees (tests/fixtures/<case>/: a fake root).

use std::path::PathBuf;

use peermem_tool::doctor::{self, Report, Verdict};
use peermem_tool::Root;
use serde_json::json;

fn fixture(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(case)
}

fn smi(name: &str) -> String {
    std::fs::read_to_string(fixture("nvidia-smi").join(name)).unwrap()
}

/// Doctor on a tree, taking nvidia-smi output from the tree (as the binary does).
fn run(case: &str) -> Report {
    let root = Root::new(fixture(case));
    let text = root.read("/nvidia-smi-q.txt");
    doctor::run(&root, text.as_deref())
}

fn verdict(r: &Report, id: &str) -> Verdict {
    r.get(id).unwrap_or_else(|| panic!("no check {id}")).verdict
}

fn detail<'a>(r: &'a Report, id: &str) -> &'a str {
    &r.get(id).unwrap().detail
}

/// `text` parsed as JSON (objects keep their key order).
fn parse(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The check `id` of a parsed JSON report.
fn json_check<'a>(v: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    let checks = v["checks"].as_array().expect("checks is an array");
    checks
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {v}"))
}

#[test]
fn dev_vm_with_fakes_is_ready_but_warns_about_detection() {
    let r = run("healthy-dev-vm");
    assert_eq!(verdict(&r, "kernel-rust"), Verdict::Ok);
    assert!(detail(&r, "kernel-rust").contains("kallsyms"), "{r:?}");
    assert_eq!(verdict(&r, "peermem-module"), Verdict::Ok);
    assert_eq!(
        detail(&r, "peermem-module"),
        "peermem 0.1.0 loaded (persistent_api_support=1, peerdirect_support=0)"
    );
    // Only peermem is loaded and no memory_peers: applications will not see it.
    assert_eq!(verdict(&r, "app-detection"), Verdict::Warn);
    assert!(r
        .get("app-detection")
        .unwrap()
        .fix
        .as_deref()
        .unwrap()
        .contains("make dropin"));
    assert_eq!(verdict(&r, "nvidia-driver"), Verdict::Ok);
    assert_eq!(verdict(&r, "driver-version"), Verdict::NotApplicable);
    assert_eq!(verdict(&r, "persistent-api"), Verdict::NotApplicable);
    assert_eq!(verdict(&r, "peer-memory-core"), Verdict::Ok);
    assert_eq!(
        detail(&r, "peer-memory-core"),
        "ib_register_peer_memory_client found (module [ib_core])"
    );
    assert_eq!(verdict(&r, "iommu"), Verdict::Ok);
    assert!(detail(&r, "iommu").starts_with("no IOMMU"));
    for id in ["bar1", "mig", "confidential-compute"] {
        assert_eq!(verdict(&r, id), Verdict::NotApplicable, "{id}");
    }
    assert!(r.ready());
    assert!(r
        .summary()
        .starts_with("verdict: ready, 1 warning(s); first: app-detection"));
    assert_eq!(verdict(&r, "pin-mode"), Verdict::Ok);
    assert!(detail(&r, "pin-mode").starts_with("persistent pins (persistent_api_support=1"));
    assert_eq!(verdict(&r, "module-signature"), Verdict::Ok);
    assert!(detail(&r, "module-signature").contains("not enforced"));
    // No kernel configuration in the recorded tree: nothing to compare compilers with.
    assert_eq!(verdict(&r, "toolchain"), Verdict::NotApplicable);
    assert_eq!(r.checks.len(), 14);
}

#[test]
fn enforced_signatures_and_an_unsigned_module_fail() {
    let r = run("sig-enforced-unsigned");
    assert_eq!(verdict(&r, "module-signature"), Verdict::Fail);
    let c = r.get("module-signature").unwrap();
    assert!(c.detail.contains("module.sig_enforce=Y"), "{c:?}");
    assert!(c
        .detail
        .contains("/lib/modules/7.3.0-peermem-dev/updates/peermem.ko is not signed"));
    let fix = c.fix.as_deref().unwrap();
    assert!(
        fix.contains("mokutil --import") && fix.contains("sign-file"),
        "{fix}"
    );
    assert!(!r.ready());
}

#[test]
fn a_signed_module_under_lockdown_is_fine() {
    let r = run("sig-enforced-signed");
    assert_eq!(verdict(&r, "module-signature"), Verdict::Ok);
    let d = detail(&r, "module-signature");
    assert!(
        d.contains("lockdown [integrity]") && d.contains("nvidia-peermem.ko is signed"),
        "{d}"
    );
}

#[test]
fn secure_boot_with_a_compressed_module_says_how_to_check() {
    let r = run("secure-boot-compressed");
    assert_eq!(verdict(&r, "module-signature"), Verdict::Warn);
    assert!(detail(&r, "module-signature").contains("Secure Boot on"));
    assert!(r
        .get("module-signature")
        .unwrap()
        .fix
        .as_deref()
        .unwrap()
        .contains("modinfo"));
}

#[test]
fn compilers_other_than_the_kernels_are_named() {
    let r = run("toolchain-mismatch");
    assert_eq!(verdict(&r, "toolchain"), Verdict::Warn);
    let d = detail(&r, "toolchain");
    assert!(d.contains("rustc 1.88.0 (found: 1.85.0)"), "{d}");
    assert!(d.contains("clang 20 (found: 19.1.7)"), "{d}");
    // The H100 host has what its kernel was built with.
    let r = run("healthy-h100");
    assert_eq!(
        detail(&r, "toolchain"),
        "rustc 1.85.0, as the kernel was built with"
    );
}

#[test]
fn callback_mode_warns_about_the_lock_hazard() {
    let r = run("callback-mode");
    assert_eq!(verdict(&r, "pin-mode"), Verdict::Warn);
    let c = r.get("pin-mode").unwrap();
    assert!(c.detail.contains("can deadlock nvidia.ko"), "{c:?}");
    assert!(c.detail.contains("/sys/module/peermem/parameters"), "{c:?}");
    assert!(c
        .fix
        .as_deref()
        .unwrap()
        .contains("persistent_api_support=1"));
    // A warning, not a failure: the host still works.
    assert!(r.ready());
}

#[test]
fn pin_mode_is_read_from_debugfs_where_sysfs_has_no_parameters() {
    let r = run("callback-mode-debugfs");
    assert_eq!(verdict(&r, "pin-mode"), Verdict::Warn);
    assert!(detail(&r, "pin-mode").contains("/sys/kernel/debug/peermem/params"));
    // Nothing says which mode: not applicable.
    let r = run("status-empty");
    assert_eq!(verdict(&r, "pin-mode"), Verdict::NotApplicable);
}

#[test]
fn h100_with_dropin_is_ready() {
    let r = run("healthy-h100");
    let not_ok: Vec<_> = r
        .checks
        .iter()
        .filter(|c| c.verdict != Verdict::Ok)
        .collect();
    assert!(not_ok.is_empty(), "{not_ok:#?}");
    assert_eq!(
        detail(&r, "kernel-rust"),
        "CONFIG_RUST=y (from /boot/config-6.14.0-rust)"
    );
    assert!(detail(&r, "peermem-module").contains("peermem's drop-in build"));
    assert_eq!(
        detail(&r, "app-detection"),
        "applications detect GPUDirect RDMA through /sys/module/nvidia_peermem/version"
    );
    assert!(detail(&r, "nvidia-driver").contains("open kernel modules"));
    assert_eq!(
        detail(&r, "driver-version"),
        "driver 580.65.06: page-table version 2.x, supported (515 and later)"
    );
    assert!(detail(&r, "iommu").contains("passthrough"));
    assert_eq!(
        detail(&r, "bar1"),
        "00000000:18:00.0: BAR1 131072 MiB, 1 MiB used, 131071 MiB free"
    );
    assert_eq!(detail(&r, "mig"), "MIG disabled");
    assert_eq!(
        detail(&r, "confidential-compute"),
        "confidential compute off"
    );
    assert_eq!(r.summary(), "verdict: ready");
}

#[test]
fn proprietary_driver_fails_first() {
    let r = run("proprietary-driver");
    assert_eq!(verdict(&r, "nvidia-driver"), Verdict::Fail);
    assert!(detail(&r, "nvidia-driver").contains("taint 'POE'"));
    assert!(!r.ready());
    assert_eq!(r.first_fail().unwrap().id, "nvidia-driver");
    assert!(r
        .summary()
        .contains("a Rust module cannot use the proprietary nvidia.ko"));
}

#[test]
fn missing_peer_memory_core_fails() {
    let r = run("missing-core");
    assert_eq!(verdict(&r, "peer-memory-core"), Verdict::Fail);
    assert!(detail(&r, "peer-memory-core").contains("upstream kernel"));
    assert_eq!(r.first_fail().unwrap().id, "peer-memory-core");
    assert!(r.summary().contains("install MOFED/DOCA-OFED"));
}

#[test]
fn nvidias_own_nvidia_peermem_is_recognised() {
    let r = run("nvidia-own-peermem");
    assert_eq!(verdict(&r, "peermem-module"), Verdict::Warn);
    assert!(
        detail(&r, "peermem-module").contains("NVIDIA's own module (its version is the driver's)"),
        "{}",
        detail(&r, "peermem-module")
    );
    // Applications do detect it: it is NVIDIA's, but GPUDirect RDMA works.
    assert_eq!(verdict(&r, "app-detection"), Verdict::Ok);
    assert!(r.ready());
}

#[test]
fn unknown_nvidia_peermem_without_debugfs_is_probably_nvidias() {
    let dir = std::env::temp_dir().join(format!("peermem-doctor-{}", std::process::id()));
    let m = dir.join("sys/module/nvidia_peermem");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(m.join("version"), "575.57.08\n").unwrap();
    let r = doctor::run(&Root::new(&dir), None);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(verdict(&r, "peermem-module"), Verdict::Warn);
    assert!(detail(&r, "peermem-module").contains("probably NVIDIA's own module"));
}

#[test]
fn driver_510_is_unsupported() {
    let r = run("old-driver-510");
    assert_eq!(verdict(&r, "driver-version"), Verdict::Fail);
    assert!(detail(&r, "driver-version").starts_with("driver 510.108.03 is older than 515"));
    assert_eq!(verdict(&r, "persistent-api"), Verdict::NotApplicable);
    assert_eq!(r.first_fail().unwrap().id, "driver-version");
}

#[test]
fn driver_530_has_no_persistent_api() {
    let r = run("driver-530");
    assert_eq!(verdict(&r, "driver-version"), Verdict::Ok);
    assert!(detail(&r, "driver-version").contains("530.30.02: page-table version 1.x"));
    assert_eq!(verdict(&r, "persistent-api"), Verdict::Warn);
    assert!(detail(&r, "persistent-api").contains("no persistent pin API"));
    assert!(r.ready());
}

#[test]
fn nvidia_smi_mig_enabled_warns() {
    let root = Root::new(fixture("healthy-h100"));
    let r = doctor::run(&root, Some(&smi("mig-enabled.txt")));
    assert_eq!(verdict(&r, "mig"), Verdict::Warn);
    assert_eq!(detail(&r, "mig"), "MIG enabled on 00000000:18:00.0");
    assert!(r.ready());
}

#[test]
fn nvidia_smi_confidential_compute_fails_persistent_mode() {
    let root = Root::new(fixture("healthy-h100"));
    let r = doctor::run(&root, Some(&smi("cc-on.txt")));
    assert_eq!(verdict(&r, "confidential-compute"), Verdict::Fail);
    assert!(r.summary().contains("persistent_api_support=0"));
}

#[test]
fn nvidia_smi_small_bar1_warns() {
    let root = Root::new(fixture("healthy-h100"));
    let r = doctor::run(&root, Some(&smi("bar1-small.txt")));
    assert_eq!(verdict(&r, "bar1"), Verdict::Warn);
    assert_eq!(
        detail(&r, "bar1"),
        "00000000:18:00.0: BAR1 256 MiB, 230 MiB used, 26 MiB free (nearly exhausted) (small BAR1: large registrations fail)"
    );
}

#[test]
fn empty_root_fails_on_the_module_first() {
    let r = doctor::run(
        &Root::new(fixture("status-no-debugfs").join("nowhere")),
        None,
    );
    assert_eq!(verdict(&r, "kernel-rust"), Verdict::Warn);
    assert_eq!(r.first_fail().unwrap().id, "peermem-module");
    assert_eq!(verdict(&r, "nvidia-driver"), Verdict::Fail);
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
               "detail": "CONFIG_RUST=y (from /boot/config-6.14.0-rust)", "fix": null})
    );
    let failed = json_check(&v, "nvidia-driver");
    assert_eq!(failed["verdict"], json!("FAIL"));
    assert_eq!(
        failed["fix"].as_str(),
        r.get("nvidia-driver").unwrap().fix.as_deref()
    );
}

/// What `peermem doctor --json` prints: `{"ready", "verdict", "checks"}`, each check
/// `{"id", "verdict", "detail", "fix"}` with the same results as the library's report.
#[test]
fn json_output_has_the_documented_shape() {
    let bin = env!("CARGO_BIN_EXE_peermem");
    for case in [
        "healthy-h100",
        "healthy-dev-vm",
        "proprietary-driver",
        "driver-530",
    ] {
        let out = std::process::Command::new(bin)
            .args(["doctor", "--json", "--root"])
            .arg(fixture(case))
            .output()
            .unwrap();
        let v = parse(&String::from_utf8_lossy(&out.stdout));
        let top: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(top, ["ready", "verdict", "checks"], "{case}");
        let want = run(case);
        assert_eq!(v["ready"], json!(want.ready()), "{case}");
        assert_eq!(out.status.code(), Some(if want.ready() { 0 } else { 1 }));
        assert_eq!(v["verdict"], json!(want.summary()), "{case}");
        let checks = v["checks"].as_array().expect("checks is an array");
        assert_eq!(checks.len(), want.checks.len(), "{case}");
        for (c, w) in checks.iter().zip(&want.checks) {
            let keys: Vec<&str> = c.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, ["id", "verdict", "detail", "fix"], "{case}: {c}");
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
    let bin = env!("CARGO_BIN_EXE_peermem");
    let status = |args: &[&str]| std::process::Command::new(bin).args(args).output().unwrap();
    let root = |case: &str| fixture(case).to_string_lossy().into_owned();
    let ok = status(&["doctor", "--root", &root("healthy-h100")]);
    assert_eq!(ok.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&ok.stdout).ends_with("verdict: ready\n"));
    let fail = status(&["doctor", "--root", &root("proprietary-driver")]);
    assert_eq!(fail.status.code(), Some(1));
    let mig = fixture("nvidia-smi/mig-enabled.txt");
    let out = status(&[
        "doctor",
        "--json",
        "--root",
        &root("healthy-h100"),
        "--nvidia-smi-output",
        &mig.to_string_lossy(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v = parse(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(json_check(&v, "mig")["verdict"], json!("WARN"));
    assert_eq!(v["ready"], json!(true));
    let usage = status(&["frobnicate"]);
    assert_eq!(usage.status.code(), Some(64));
}
