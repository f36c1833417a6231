// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem doctor`'s provider, client registration and GPU memory paths
//! (`peer-memory-core`, `client-registered`, `gpu-memory-path` and the `path` lines):
//! each rule of docs/abi.md 7 both ways, on copies of the healthy H100 tree made to
//! differ in one fact, with the NICs answered by tests/stub/libibverbs.c.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{arg, parse, write, Scratch};
use serde_json::Value;

/// tests/stub/libibverbs.c built into `dir`.
fn stub(dir: &Path) -> PathBuf {
    let so = dir.join("libibverbs.so.1");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/stub/libibverbs.c");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
        .arg(&so)
        .arg(&src)
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

/// The healthy H100 tree, with what CUDA's dma-buf needs (CONFIG_DMA_SHARED_BUFFER=y;
/// open modules 580 it has) and an RDMA core with dma-buf (ib_umem_dmabuf_get).
fn host(name: &str) -> Scratch {
    let dir = Scratch::copy_of("healthy-h100", name);
    append(
        &dir,
        "/boot/config-7.0.0-34-generic",
        "CONFIG_DMA_SHARED_BUFFER=y\n",
    );
    append(
        &dir,
        "/proc/kallsyms",
        "ffffffffc0a02000 T ib_umem_dmabuf_get\t[ib_core]\n",
    );
    dir
}

fn append(dir: &Path, abs: &str, text: &str) {
    let p = dir.join(abs.trim_start_matches('/'));
    let mut s = std::fs::read_to_string(&p).unwrap();
    s.push_str(text);
    std::fs::write(p, s).unwrap();
}

/// `peermem doctor --json` on `dir`, its NICs `devices` (the stub's
/// PEERMEM_STUB_DEVICES), the job's environment `env` (lines of a --env file).
/// Returns the JSON and the stub's call counts.
fn doctor(dir: &Path, devices: &str, env: &str) -> (Value, String) {
    let (v, calls, _) = doctor_run(dir, devices, env, &[]);
    (v, calls)
}

/// [`doctor`] with `extra` arguments: also its exit status.
fn doctor_run(
    dir: &Path,
    devices: &str,
    env: &str,
    extra: &[&str],
) -> (Value, String, Option<i32>) {
    let so = stub(dir);
    let env_file = dir.join("job.env");
    std::fs::write(&env_file, env).unwrap();
    let log = dir.join("stub.log");
    let mut args = vec![
        "doctor",
        "--json",
        "--root",
        arg(dir),
        "--verbs-lib",
        arg(&so),
        "--env",
        arg(&env_file),
    ];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_peermem"))
        .args(&args)
        .env("PEERMEM_STUB_DEVICES", devices)
        .env("PEERMEM_STUB_LOG", &log)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        parse(&text),
        std::fs::read_to_string(&log).unwrap_or_default(),
        out.status.code(),
    )
}

/// The path of `library` on `nic`, with its reasons.
fn path(v: &Value, library: &str, nic: &str) -> (String, String) {
    let d = v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["library"] == library && d["nic"] == nic)
        .unwrap_or_else(|| panic!("no path for {library} on {nic}: {}", v["paths"]));
    let why: Vec<&str> = d["why"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    (d["path"].as_str().unwrap().to_owned(), why.join("; "))
}

fn paths3(v: &Value, nic: &str) -> [String; 3] {
    ["nccl", "ucx", "libfabric"].map(|l| path(v, l, nic).0)
}

fn detail(v: &Value, id: &str) -> String {
    check(v, id)["detail"].as_str().unwrap().to_owned()
}

fn check<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}"))
}

#[test]
fn dmabuf_everywhere_when_every_fact_allows_it() {
    let dir = host("all-dmabuf");
    let (v, calls) = doctor(&dir, "mlx5_0=EBADF", "");
    assert_eq!(v["schema_version"], 3);
    assert_eq!(paths3(&v, "mlx5_0"), ["dma-buf", "dma-buf", "dma-buf"]);
    let (_, why) = path(&v, "nccl", "mlx5_0");
    assert!(
        why.contains("mlx5_0: the dma-buf probe answered EBADF"),
        "{why}"
    );
    let c = check(&v, "gpu-memory-path");
    assert_eq!(c["verdict"], "OK");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains("peermem is not used by default"),
        "{detail}"
    );
    assert!(
        detail.contains("GIN/GDAKI") && detail.contains("ibv_reg_mr directly"),
        "{detail}"
    );
    // Every device opened was closed, every protection domain freed.
    assert_eq!(
        calls.trim(),
        "list=1 free=1 open=1 close=1 pd=1 dealloc=1 mr=1 dereg=0"
    );
}

#[test]
fn a_nic_without_dmabuf_takes_peer_memory() {
    for answer in ["EOPNOTSUPP", "EPROTONOSUPPORT"] {
        let dir = host(&format!("nic-{answer}"));
        let (v, _) = doctor(&dir, &format!("mlx5_0={answer}"), "");
        assert_eq!(
            paths3(&v, "mlx5_0"),
            ["peer-memory", "peer-memory", "peer-memory"],
            "{answer}"
        );
        let (_, why) = path(&v, "libfabric", "mlx5_0");
        assert!(why.contains("falls back to ibv_reg_mr"), "{why}");
        let (_, why) = path(&v, "nccl", "mlx5_0");
        assert!(
            why.contains("/sys/module/nvidia_peermem/version exists"),
            "{why}"
        );
        assert_eq!(check(&v, "gpu-memory-path")["verdict"], "OK");
    }
}

#[test]
fn nccl_and_ucx_read_other_answers_differently() {
    // NCCL counts every answer but EOPNOTSUPP and EPROTONOSUPPORT as support; UCX only
    // success and EBADF.
    let dir = host("einval");
    let (v, calls) = doctor(&dir, "mlx5_0=22,mlx5_1=OK", "");
    assert_eq!(path(&v, "nccl", "mlx5_0").0, "dma-buf");
    assert_eq!(path(&v, "ucx", "mlx5_0").0, "peer-memory");
    assert_eq!(path(&v, "nccl", "mlx5_1").0, "dma-buf");
    assert_eq!(path(&v, "ucx", "mlx5_1").0, "dma-buf");
    // The region a successful probe registered was deregistered.
    assert_eq!(
        calls.trim(),
        "list=1 free=1 open=2 close=2 pd=2 dealloc=2 mr=2 dereg=1"
    );
}

#[test]
fn one_line_per_library_and_nic() {
    let dir = host("two-nics");
    let so = stub(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_peermem"))
        .args([
            "doctor",
            "--root",
            arg(&dir),
            "--verbs-lib",
            arg(&so),
            "--env",
            "/dev/null",
        ])
        .env("PEERMEM_STUB_DEVICES", "mlx5_0=EBADF,mlx5_1=EOPNOTSUPP")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("path ")).collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("nccl") && l.contains("mlx5_0") && l.contains("dma-buf")),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("nccl") && l.contains("mlx5_1") && l.contains("peer memory")),
        "{text}"
    );
}

#[test]
fn each_variable_switches_its_library_to_peer_memory() {
    for (env, library) in [
        ("NCCL_DMABUF_ENABLE=0", "nccl"),
        ("export UCX_CUDA_COPY_DMABUF=\"no\"", "ucx"),
        ("FI_VERBS_USE_DMABUF=0", "libfabric"),
        ("FI_HMEM_CUDA_USE_DMABUF='0'", "libfabric"),
    ] {
        let dir = host(&format!("env-{library}-{}", env.len()));
        let (v, _) = doctor(
            &dir,
            "mlx5_0=EBADF",
            &format!("# a job's environment\n{env}\n"),
        );
        for l in ["nccl", "ucx", "libfabric"] {
            let (p, why) = path(&v, l, "mlx5_0");
            if l == library {
                assert_eq!(p, "peer-memory", "{env}: {l}: {why}");
                let name = env.trim_start_matches("export ").split('=').next().unwrap();
                assert!(why.contains(name), "{env}: {why}");
            } else {
                assert_eq!(p, "dma-buf", "{env}: {l}: {why}");
            }
        }
    }
}

#[test]
fn ucx_gpu_direct_rdma_no_is_no_gpudirect() {
    let dir = host("ucx-no");
    let (v, _) = doctor(&dir, "mlx5_0=EOPNOTSUPP", "UCX_IB_GPU_DIRECT_RDMA=no\n");
    let (p, why) = path(&v, "ucx", "mlx5_0");
    assert_eq!(p, "none", "{why}");
    assert!(why.contains("UCX_IB_GPU_DIRECT_RDMA=no"), "{why}");
    let c = check(&v, "gpu-memory-path");
    assert_eq!(c["verdict"], "WARN");
    assert!(
        c["detail"].as_str().unwrap().contains("ucx on mlx5_0"),
        "{c}"
    );
}

#[test]
fn cuda_without_dmabuf_takes_peer_memory() {
    // The proprietary driver, a driver before 515, a kernel without
    // CONFIG_DMA_SHARED_BUFFER: each alone.
    type Change = fn(&Path);
    let cases: [(&str, Change, &str); 3] = [
        (
            "proprietary",
            |d| write(d, "/sys/module/nvidia/taint", "POE\n"),
            "proprietary GPU driver",
        ),
        (
            "driver-510",
            |d| write(d, "/sys/module/nvidia/version", "510.47.03\n"),
            "dma-buf needs 515 or later",
        ),
        (
            "no-dma-shared-buffer",
            |d| {
                let p = d.join("boot/config-7.0.0-34-generic");
                let text = std::fs::read_to_string(&p).unwrap();
                let text = text.replace(
                    "CONFIG_DMA_SHARED_BUFFER=y",
                    "# CONFIG_DMA_SHARED_BUFFER is not set",
                );
                std::fs::write(p, text).unwrap();
            },
            "no CONFIG_DMA_SHARED_BUFFER",
        ),
    ];
    for (name, change, reason) in cases {
        let dir = host(name);
        change(&dir);
        let (v, _) = doctor(&dir, "mlx5_0=EBADF", "");
        assert_eq!(
            paths3(&v, "mlx5_0"),
            ["peer-memory", "peer-memory", "peer-memory"],
            "{name}"
        );
        let (_, why) = path(&v, "nccl", "mlx5_0");
        assert!(why.contains(reason), "{name}: {why}");
    }
}

#[test]
fn libfabric_needs_the_core_s_dmabuf() {
    let dir = Scratch::copy_of("healthy-h100", "no-umem-dmabuf");
    append(
        &dir,
        "/boot/config-7.0.0-34-generic",
        "CONFIG_DMA_SHARED_BUFFER=y\n",
    );
    let (v, _) = doctor(&dir, "mlx5_0=EBADF", "");
    let (p, why) = path(&v, "libfabric", "mlx5_0");
    assert_eq!(p, "peer-memory");
    assert!(why.contains("no ib_umem_dmabuf_get"), "{why}");
    assert_eq!(path(&v, "nccl", "mlx5_0").0, "dma-buf");
}

#[test]
fn no_peer_memory_and_no_dmabuf_is_gpu_direct_rdma_disabled() {
    let dir = host("disabled");
    std::fs::remove_dir_all(dir.join("sys/module/nvidia_peermem")).unwrap();
    let (v, _) = doctor(&dir, "mlx5_0=EOPNOTSUPP", "");
    let (p, why) = path(&v, "nccl", "mlx5_0");
    assert_eq!(p, "none");
    assert!(why.contains("GPU Direct RDMA Disabled"), "{why}");
    assert_eq!(check(&v, "gpu-memory-path")["verdict"], "WARN");
    // libfabric sees the core's export and still takes ibv_reg_mr.
    assert_eq!(path(&v, "libfabric", "mlx5_0").0, "peer-memory");
}

#[test]
fn nics_unprobed_without_libibverbs_say_why() {
    let dir = host("no-verbs");
    let out = Command::new(env!("CARGO_BIN_EXE_peermem"))
        .args([
            "doctor",
            "--json",
            "--root",
            arg(&dir),
            "--verbs-lib",
            "/nonexistent/libibverbs.so.1",
            "--env",
            "/dev/null",
        ])
        .output()
        .unwrap();
    let v = parse(&String::from_utf8_lossy(&out.stdout));
    let d = check(&v, "gpu-memory-path")["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        d.contains("NICs not probed: cannot load /nonexistent/libibverbs.so.1"),
        "{d}"
    );
    // Without a NIC's answer neither NCCL nor UCX is judged to take dma-buf.
    assert_eq!(path(&v, "nccl", "-").0, "peer-memory");
}

#[test]
fn a_bad_env_file_is_a_usage_error() {
    let dir = host("bad-env");
    let env = dir.join("bad.env");
    std::fs::write(&env, "NCCL_DMABUF_ENABLE=0\nthis is not an assignment\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_peermem"))
        .args(["doctor", "--root", arg(&dir), "--env", arg(&env)])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(i32::from(peermem_tool::cli::EXIT_USAGE))
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: not NAME=VALUE"), "{err}");
}

#[test]
fn provider_mofed_or_in_box() {
    // healthy-h100 has MOFED 25.04, whose ib_uverbs exports the API and has a version.
    let dir = host("provider-mofed");
    let (v, _) = doctor(&dir, "", "");
    let d = detail(&v, "peer-memory-core");
    assert!(
        d.ends_with("(module [ib_uverbs]): provided by MOFED/DOCA-OFED ib_uverbs 25.04-0.6.1"),
        "{d}"
    );
    // An ib_core exporting it (MOFED up to 24.04's shape, and the project's core
    // double's) without a version, modules.dep naming the kernel's own file: in-box.
    let dir = host("provider-inbox");
    std::fs::remove_file(dir.join("sys/module/ib_core/version")).unwrap();
    exports(&dir, Some("ib_core"), &[]);
    write(
        &dir,
        "/lib/modules/7.0.0-34-generic/modules.dep",
        "kernel/drivers/infiniband/core/ib_core.ko.zst:\n",
    );
    let (v, _) = doctor(&dir, "", "");
    let d = detail(&v, "peer-memory-core");
    assert!(
        d.ends_with("provided by the kernel's own ib_core (in-box peer_mem, kernel/drivers/infiniband/core/ib_core.ko.zst)"),
        "{d}"
    );
}

/// The tree at `dir` with the peer-memory core's exports in module `core` in
/// /proc/kallsyms (`Some("")`: built into the kernel; `None`: exported by nothing), and
/// /sys/module/ib_uverbs as `loaded` says: absent, or a fresh load with no version and
/// no holders (ib_core is left as it is).
fn exports(dir: &Path, core: Option<&str>, loaded: &[&str]) {
    let p = dir.join("proc/kallsyms");
    let mut s: String = std::fs::read_to_string(&p)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("_peer_memory_client"))
        .map(|l| format!("{l}\n"))
        .collect();
    match core {
        Some("") => s.push_str(
            "ffffffff81c01230 T ib_register_peer_memory_client\n\
             ffffffff81c01560 T ib_unregister_peer_memory_client\n",
        ),
        Some(m) => s.push_str(&format!(
            "ffffffffc0b01230 T ib_register_peer_memory_client\t[{m}]\n\
             ffffffffc0b01560 T ib_unregister_peer_memory_client\t[{m}]\n"
        )),
        None => {}
    }
    std::fs::write(p, s).unwrap();
    let uverbs = dir.join("sys/module/ib_uverbs");
    if uverbs.exists() {
        std::fs::remove_dir_all(&uverbs).unwrap();
    }
    if loaded.contains(&"ib_uverbs") {
        std::fs::create_dir_all(uverbs.join("holders")).unwrap();
    }
}

/// A `Module.symvers` naming `module` (drivers/infiniband/core/`module`) as the exporter
/// of the peer-memory core's symbols.
fn symvers_naming(module: &str) -> String {
    format!(
        "0x0bc1a2d3\tib_register_device\tdrivers/infiniband/core/ib_core\tEXPORT_SYMBOL\t\n\
         0x1c2d3e4f\tib_register_peer_memory_client\tdrivers/infiniband/core/{module}\tEXPORT_SYMBOL\t\n\
         0x5a6b7c8d\tib_unregister_peer_memory_client\tdrivers/infiniband/core/{module}\tEXPORT_SYMBOL\t\n"
    )
}

/// The `peer-memory-core` check of the host in `dir`, which must fail: its detail and
/// its fix.
fn failing_core_check(dir: &Path) -> (String, String) {
    let (v, _) = doctor(dir, "", "");
    let c = check(&v, "peer-memory-core");
    assert_eq!(c["verdict"], "FAIL", "{c}");
    let text = |k: &str| c[k].as_str().unwrap().to_owned();
    (text("detail"), text("fix"))
}

/// Doctor's `client-registered` is OK: nvidia_peermem holds ib_uverbs, the core's module.
fn assert_registered_with_ib_uverbs(v: &Value) {
    let c = check(v, "client-registered");
    assert_eq!(c["verdict"], "OK", "{c}");
    let d = c["detail"].as_str().unwrap();
    assert!(
        d.starts_with("nvidia_peermem is registered with ib_uverbs (it holds ib_uverbs;"),
        "{d}"
    );
}

/// The peer-memory API is ib_uverbs' and ib_uverbs is not loaded, ib_core is: the fix
/// loads ib_uverbs, not ib_core (docs/abi.md 8). On an in-box core (Ubuntu's trees by
/// flavour, NV-Kernels, openEuler) the kernel's Module.symvers names it; on MOFED/
/// DOCA-OFED 25.04 and later MOFED's does, which is read instead of the kernel's.
#[test]
fn core_module_not_loaded_names_ib_uverbs() {
    let kernels = "/lib/modules/7.0.0-34-generic/build/Module.symvers";
    let mofeds = "/usr/src/ofa_kernel/default/Module.symvers";
    for (name, mofed) in [
        ("inbox-uverbs-unloaded", false),
        ("mofed-uverbs-unloaded", true),
    ] {
        let dir = host(name);
        exports(&dir, None, &[]);
        let (symvers, whose) = if mofed {
            // The kernel's own, naming another module, is not read where MOFED's is.
            write(&dir, kernels, symvers_naming("ib_core"));
            (mofeds, "MOFED/DOCA-OFED's")
        } else {
            std::fs::remove_file(dir.join("sys/module/ib_core/version")).unwrap();
            (kernels, "the kernel's")
        };
        write(&dir, symvers, symvers_naming("ib_uverbs"));
        let (d, f) = failing_core_check(&dir);
        assert_eq!(
            d,
            format!(
                "no loaded module exports ib_register_peer_memory_client: {whose} \
                 {symvers} names ib_uverbs as its exporter, and ib_uverbs is not loaded"
            )
        );
        assert!(f.starts_with("modprobe ib_uverbs"), "{f}");
        assert_eq!(f.contains("systemctl restart openibd"), mofed, "{f}");
        assert!(!f.contains("modprobe ib_core"), "{f}");
    }
}

/// MOFED/DOCA-OFED up to 24.04 exported the API from ib_core: with nothing loaded, its
/// Module.symvers names ib_core and the fix loads it.
#[test]
fn mofed_24_core_not_loaded_names_ib_core() {
    let dir = host("mofed-core-unloaded");
    std::fs::remove_dir_all(dir.join("sys/module/ib_core")).unwrap();
    exports(&dir, None, &[]);
    let symvers = "/usr/src/ofa_kernel/x86_64/7.0.0-34-generic/Module.symvers";
    write(&dir, symvers, symvers_naming("ib_core"));
    let (d, f) = failing_core_check(&dir);
    assert!(
        d.ends_with(&format!(
            "{symvers} names ib_core as its exporter, and ib_core is not loaded"
        )),
        "{d}"
    );
    assert!(f.starts_with("modprobe ib_core"), "{f}");
}

/// No loaded module exports the API and no Module.symvers names its exporter: the
/// check fails without naming a provider it cannot know; the fix names both modules
/// that may carry the core, and the way out where neither does.
#[test]
fn no_exporter_anywhere_claims_nothing() {
    let dir = host("no-exporter");
    std::fs::remove_file(dir.join("sys/module/ib_core/version")).unwrap();
    exports(&dir, None, &[]);
    let (d, f) = failing_core_check(&dir);
    assert!(!d.contains("upstream"), "{d}");
    assert!(d.contains("ib_uverbs is not loaded"), "{d}");
    assert!(d.contains("no Module.symvers names its exporter"), "{d}");
    assert!(f.starts_with("modprobe ib_uverbs"), "{f}");
    for part in [
        "ib_uverbs (MOFED/DOCA-OFED 25.04 and later, and the in-box cores",
        "ib_core (MOFED/DOCA-OFED 24.04 and earlier)",
        "install MOFED/DOCA-OFED",
        "dma-buf",
    ] {
        assert!(f.contains(part), "{part}: {f}");
    }
    // ib_uverbs loaded too and neither exporting: no peer-memory core in this RDMA core.
    exports(&dir, None, &["ib_uverbs"]);
    let (d, f) = failing_core_check(&dir);
    assert!(
        d.starts_with("ib_core and ib_uverbs are loaded and neither exports"),
        "{d}"
    );
    assert!(!f.contains("modprobe"), "{f}");
}

/// The in-box core loaded: the kernel's own ib_uverbs (no version, modules.dep's file
/// under kernel/) exports the API and the client holds it.
#[test]
fn in_box_ib_uverbs_provides_and_holds_the_client() {
    let dir = host("inbox-uverbs");
    std::fs::remove_file(dir.join("sys/module/ib_core/version")).unwrap();
    exports(&dir, Some("ib_uverbs"), &["ib_uverbs"]);
    let _ = std::fs::remove_file(dir.join("sys/module/ib_core/holders/nvidia_peermem"));
    write(&dir, "/sys/module/ib_uverbs/holders/nvidia_peermem", "");
    write(
        &dir,
        "/lib/modules/7.0.0-34-generic/modules.dep",
        "kernel/drivers/infiniband/core/ib_core.ko.zst:\n\
         kernel/drivers/infiniband/core/ib_uverbs.ko.zst: kernel/drivers/infiniband/core/ib_core.ko.zst\n",
    );
    let (v, _) = doctor(&dir, "", "");
    let c = check(&v, "peer-memory-core");
    assert_eq!(c["verdict"], "OK", "{c}");
    assert_eq!(
        c["detail"],
        "ib_register_peer_memory_client found (module [ib_uverbs]): provided by the kernel's \
         own ib_uverbs (in-box peer_mem, kernel/drivers/infiniband/core/ib_uverbs.ko.zst)"
    );
    assert_registered_with_ib_uverbs(&v);
}

/// A core built into the kernel (kallsyms names no module) is the in-box peer_mem in
/// vmlinux, not a module's.
#[test]
fn built_in_core_names_no_module() {
    let dir = host("built-in");
    exports(&dir, Some(""), &[]);
    let (v, _) = doctor(&dir, "", "");
    let c = check(&v, "peer-memory-core");
    assert_eq!(c["verdict"], "OK", "{c}");
    assert_eq!(
        c["detail"],
        "ib_register_peer_memory_client found (no module): built into the kernel (in-box \
         peer_mem)"
    );
}

#[test]
fn loaded_but_not_registered_fails() {
    // Registered: the client holds the core's module, MOFED 25.04's ib_uverbs
    // (healthy-h100 records the link).
    let dir = host("registered");
    let (v, _) = doctor(&dir, "", "");
    assert_registered_with_ib_uverbs(&v);
    // Loaded without a reference on the core (NCCL issue 1939).
    let dir = host("not-registered");
    std::fs::remove_file(dir.join("sys/module/ib_uverbs/holders/nvidia_peermem")).unwrap();
    let (v, _) = doctor(&dir, "", "");
    let c = check(&v, "client-registered");
    assert_eq!(c["verdict"], "FAIL", "{c}");
    let d = c["detail"].as_str().unwrap();
    assert!(
        d.contains("loaded but not registered") && d.contains("NCCL issue 1939"),
        "{d}"
    );
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains("dkms build --force peermem-dropin/"),
        "{c}"
    );
    assert_eq!(v["ready"], false);
}

#[test]
fn no_rdma_device_is_no_path() {
    let dir = host("no-nic");
    let (v, calls) = doctor(&dir, "", "");
    assert_eq!(paths3(&v, "-"), ["none", "none", "none"]);
    assert!(path(&v, "libfabric", "-").1.contains("no RDMA device"));
    assert_eq!(check(&v, "gpu-memory-path")["verdict"], "N/A");
    assert_eq!(
        calls.trim(),
        "list=1 free=1 open=0 close=0 pd=0 dealloc=0 mr=0 dereg=0"
    );
}

/// [`doctor_run`] for an empty job environment: the JSON and the exit status.
fn doctor_exit(dir: &Path, devices: &str, extra: &[&str]) -> (Value, Option<i32>) {
    let (v, _, code) = doctor_run(dir, devices, "", extra);
    (v, code)
}

/// A host on an upstream kernel whose jobs all take dma-buf: no peer-memory core, no
/// peermem. Peer memory is not what they use: the verdict says so and the host is
/// ready (exit 0), the peer-memory checks printed but not counted; the GPU driver's
/// and the platform's still count. `--require-peer-memory` counts them: not ready,
/// the first to fix the core (it comes before the module that needs it).
#[test]
fn a_dmabuf_host_does_not_need_peer_memory_unless_required() {
    let dir = host("dmabuf-no-peermem");
    std::fs::remove_dir_all(dir.join("sys/module/nvidia_peermem")).unwrap();
    let kallsyms = dir.join("proc/kallsyms");
    let upstream: String = std::fs::read_to_string(&kallsyms)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("peer_memory"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&kallsyms, upstream).unwrap();
    let (v, code) = doctor_exit(&dir, "mlx5_0=EBADF", &[]);
    assert_eq!(paths3(&v, "mlx5_0"), ["dma-buf", "dma-buf", "dma-buf"]);
    assert_eq!(check(&v, "peermem-module")["verdict"], "FAIL");
    assert_eq!(check(&v, "peer-memory-core")["verdict"], "FAIL");
    assert_eq!(code, Some(0), "{}", v["verdict"]);
    assert_eq!(v["ready"], true);
    assert_eq!(v["peer_memory_needed"], false);
    assert_eq!(v["fix_first"], Value::Null);
    let verdict = v["verdict"].as_str().unwrap();
    assert!(
        verdict.contains(
            "NCCL, UCX and libfabric register GPU memory through dma-buf: peer memory \
             (peermem) is not what jobs use here and is not needed"
        ),
        "{verdict}"
    );
    assert!(
        verdict.contains("not counted: peer-memory-core, peermem-module"),
        "{verdict}"
    );
    assert!(
        verdict.contains("--require-peer-memory counts them"),
        "{verdict}"
    );

    let (v, code) = doctor_exit(&dir, "mlx5_0=EBADF", &["--require-peer-memory"]);
    assert_eq!(code, Some(1));
    assert_eq!(v["ready"], false);
    assert_eq!(v["peer_memory_needed"], true);
    assert_eq!(v["fix_first"], "peer-memory-core");
    assert!(v["verdict"]
        .as_str()
        .unwrap()
        .starts_with("verdict: not ready; fix first: peer-memory-core: "));

    // A check that is not peer memory's still counts: without the GPU driver, not
    // ready, whatever the path.
    std::fs::remove_dir_all(dir.join("sys/module/nvidia")).unwrap();
    let (v, code) = doctor_exit(&dir, "mlx5_0=EBADF", &[]);
    assert_eq!(code, Some(1));
    assert_eq!(v["fix_first"], "nvidia-driver");
}
