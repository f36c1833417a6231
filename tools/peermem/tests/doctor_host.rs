// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The host checks of `peermem doctor` (`symbol-errors`, `gpu-product`, `hca`,
//! `boot-load`, `pcie-path`) on recorded trees, each with its good and bad verdicts.
//!
//! The base tree is tests/fixtures/healthy-h100 (an Ubuntu 26.04 H100 host, see
//! tests/doctor.rs), whose sysfs was written (by hand, not dumped from one machine) in
//! the layout Linux gives a GPU and a ConnectX-7 below one PCIe switch, as on H100
//! servers that pair each GPU with a NIC behind a Broadcom PEX89000-series switch; the
//! vendor, device and class ids are those products' own:
//!
//! ```text
//! /sys/devices/pci0000:15                         host bridge (NUMA node 0)
//!   0000:15:01.0                                  root port (8086:352a, class 0x060400)
//!     0000:16:00.0                                switch upstream port (1000:c030)
//!       0000:17:00.0                              switch downstream port (1000:c030)
//!         0000:18:00.0                            H100 SXM5 (10de:2330, class 0x030200)
//!       0000:17:01.0                              switch downstream port
//!         0000:19:00.0                            ConnectX-7 (15b3:1021, class 0x020700)
//!           infiniband/mlx5_0                     ports/1: 4: ACTIVE, 5: LinkUp
//! ```
//!
//! with `/sys/bus/pci/devices/<bdf>` and `/sys/class/infiniband/mlx5_0` as relative
//! links into it (as sysfs makes them), `driver` links to `/sys/bus/pci/drivers/*`, and
//! the downstream ports' `config` (4096 bytes: AER at 0x100, ACS at 0x138 with every
//! control bit clear, as on bare metal with the IOMMU in passthrough and ACS off in
//! firmware). The variants below change that tree the way the named host differs.

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::{
    check, expect, expect_detail, first_fail, fix, fixture, run, run_at, run_smi, smi, write,
    Scratch,
};
use peermem_tool::doctor::{self, Acs, Verdict};

/// The healthy-h100 tree's downstream-port configuration space, with ACS control
/// `ctl` (the capability sits at 0x138; its control register at 0x13e).
fn dsp_config(dir: &Path, bdf: &str, ctl: u16) {
    let config = std::fs::read(config_of(dir, bdf)).unwrap();
    assert_eq!(doctor::acs_control(&config), Acs::Control(0), "{bdf}");
    dsp_config_any(dir, bdf, ctl);
}

/// `dsp_config` without the check that ACS starts clear.
fn dsp_config_any(dir: &Path, bdf: &str, ctl: u16) {
    let p = config_of(dir, bdf);
    let mut config = std::fs::read(&p).unwrap();
    config[0x13e..0x140].copy_from_slice(&ctl.to_le_bytes());
    std::fs::write(&p, config).unwrap();
}

/// The configuration space of PCI function `bdf` in the tree at `dir`.
fn config_of(dir: &Path, bdf: &str) -> PathBuf {
    dir.join("sys/bus/pci/devices").join(bdf).join("config")
}

/// A PCI function at `/sys/devices/<path>` with its ids and NUMA node, and its
/// `/sys/bus/pci/devices` link (relative, as sysfs makes it).
fn function(dir: &Path, path: &str, ids: (&str, &str, &str), numa: i32) {
    let d = format!("/sys/devices/{path}");
    write(dir, &format!("{d}/vendor"), format!("{}\n", ids.0));
    write(dir, &format!("{d}/device"), format!("{}\n", ids.1));
    write(dir, &format!("{d}/class"), format!("{}\n", ids.2));
    write(dir, &format!("{d}/numa_node"), format!("{numa}\n"));
    let bdf = path.rsplit('/').next().unwrap();
    std::fs::create_dir_all(dir.join("sys/bus/pci/devices")).unwrap();
    let link = dir.join("sys/bus/pci/devices").join(bdf);
    let _ = std::fs::remove_file(&link);
    symlink(format!("../../../devices/{path}"), link).unwrap();
}

/// A ConnectX-7 at `/sys/devices/<path>` (NUMA node `numa`) with its RDMA device
/// `name`, port 1 in `state`.
fn connectx(dir: &Path, name: &str, path: &str, numa: i32, state: (&str, &str)) {
    function(dir, path, CX7, numa);
    rdma_device(dir, name, path, state);
}

/// RDMA device `name` of the PCI function at `/sys/devices/<path>`, port 1 in `state`.
fn rdma_device(dir: &Path, name: &str, path: &str, state: (&str, &str)) {
    let d = format!("/sys/devices/{path}/infiniband/{name}");
    let bdf = path.rsplit('/').next().unwrap();
    std::fs::create_dir_all(dir.join(d.trim_start_matches('/'))).unwrap();
    symlink(
        format!("../../../{bdf}"),
        dir.join(d.trim_start_matches('/')).join("device"),
    )
    .unwrap();
    write(dir, &format!("{d}/ports/1/state"), format!("{}\n", state.0));
    write(
        dir,
        &format!("{d}/ports/1/phys_state"),
        format!("{}\n", state.1),
    );
    write(dir, &format!("{d}/ports/1/link_layer"), "InfiniBand\n");
    std::fs::create_dir_all(dir.join("sys/class/infiniband")).unwrap();
    symlink(
        format!("../../devices/{path}/infiniband/{name}"),
        dir.join("sys/class/infiniband").join(name),
    )
    .unwrap();
}

const CX7: (&str, &str, &str) = ("0x15b3", "0x1021", "0x020700");
const PEX: (&str, &str, &str) = ("0x1000", "0xc030", "0x060400");
const ROOT_PORT: (&str, &str, &str) = ("0x8086", "0x352a", "0x060400");
/// An InfiniBand port's `state` and `phys_state` with its link up and a subnet manager.
const ACTIVE: (&str, &str) = ("4: ACTIVE", "5: LinkUp");

// ---- symbol-errors ----------------------------------------------------------------

/// healthy-h100's /dmesg.txt: the boot log of that host (the kernel command line,
/// the PCI enumeration lines of the switch port, GPU and ConnectX-7 as Linux 7.0
/// prints them, mlx5_core's firmware line, NVRM's banner as /proc/driver/nvidia/version
/// reads, and peermem's own "loaded" line).
#[test]
fn a_clean_kernel_log_has_no_symbol_errors() {
    expect_detail(
        &run("healthy-h100"),
        "symbol-errors",
        Verdict::Ok,
        "the kernel log has no symbol version or unknown-symbol errors for peermem or nvidia_peermem",
    );
}

/// The lines the module loader prints (Linux 7.0/7.3 kernel/module/version.c
/// `check_version`: "%s: disagrees about version of symbol %s"; kernel/module/main.c
/// `simplify_symbols`: "%s: Unknown symbol %s (err %d)", -EINVAL after a version
/// mismatch since `resolve_symbol` answers ERR_PTR(-EINVAL)): nvidia-peermem.ko
/// built against the upstream kernel's ib_core Module.symvers while MOFED's ib_core is
/// loaded, then the module refused; /sys/module/nvidia_peermem is absent.
#[test]
fn a_symbol_version_mismatch_fails_naming_symbol_and_module() {
    let dir = Scratch::copy_of("healthy-h100", "crc");
    std::fs::remove_dir_all(dir.join("sys/module/nvidia_peermem")).unwrap();
    let mut log = std::fs::read_to_string(dir.join("dmesg.txt")).unwrap();
    log = log.replace(
        "[   12.630845] nvidia_peermem: peermem 0.1.0 loaded: persistent pins\n",
        "[   12.630845] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client\n\
         [   12.630851] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)\n\
         [   12.630907] nvidia_peermem: disagrees about version of symbol ib_unregister_peer_memory_client\n\
         [   12.630910] nvidia_peermem: Unknown symbol ib_unregister_peer_memory_client (err -22)\n",
    );
    std::fs::write(dir.join("dmesg.txt"), log).unwrap();
    let r = run_at(&dir);
    let c = expect_detail(
        &r,
        "symbol-errors",
        Verdict::Fail,
        "the kernel refused symbols: nvidia_peermem: disagrees about version of symbol \
         ib_register_peer_memory_client; nvidia_peermem: disagrees about version of symbol \
         ib_unregister_peer_memory_client",
    );
    let fix = fix(c);
    assert!(fix.contains("packaging/find-symvers"), "{fix}");
    assert!(fix.contains("KBUILD_EXTRA_SYMBOLS"), "{fix}");
    // healthy-h100's core is MOFED 25.04's ib_uverbs: the fix names it.
    assert!(
        fix.starts_with("the module was built against another ib_uverbs or nvidia.ko"),
        "{fix}"
    );
    // The module is not loaded: that fails first, symbol-errors says why.
    first_fail(&r, "peermem-module");
    let ids: Vec<&str> = r.checks.iter().map(|c| c.id).collect();
    let at = ids.iter().position(|i| *i == "peermem-module").unwrap();
    assert_eq!(ids[at..at + 2], ["peermem-module", "symbol-errors"]);
}

/// `insmod` of peermem.ko without nvidia.ko loaded: nvidia_p2p_get_pages is exported by
/// nobody (-ENOENT), as dmesg shows it; the other lines are /dev/kmsg records
/// (`priority,sequence,microseconds,flags;message`), which the tool reads on a live
/// host.
#[test]
fn an_unknown_symbol_fails_naming_the_provider() {
    let dir = Scratch::copy_of("healthy-h100", "unknown");
    write(
        &dir,
        "/dmesg.txt",
        "4,1577,12630845,-;peermem: Unknown symbol nvidia_p2p_get_pages (err -2)\n\
         4,1578,12630850,-;peermem: Unknown symbol nvidia_p2p_put_pages (err -2)\n\
         [   12.630851] gdrdrv: Unknown symbol nvidia_p2p_get_pages (err -2)\n",
    );
    let r = run_at(&dir);
    let c = expect_detail(
        &r,
        "symbol-errors",
        Verdict::Fail,
        "the kernel refused symbols: peermem: Unknown symbol nvidia_p2p_get_pages (err -2); \
         peermem: Unknown symbol nvidia_p2p_put_pages (err -2)",
    );
    assert!(fix(c).contains("modprobe nvidia"));
    // The core's module as peer-memory-core finds it: MOFED 25.04's ib_uverbs.
    assert!(fix(c).contains("modprobe ib_uverbs"), "{c:?}");
    assert!(!fix(c).contains("modprobe ib_core"), "{c:?}");
    // No loaded module exports the core and no Module.symvers names one: both modules
    // that may carry it, and the check that names it.
    without_core_exports(&dir);
    let r = run_at(&dir);
    let f = fix(expect(&r, "symbol-errors", Verdict::Fail)).to_owned();
    assert!(
        f.contains(
            "ib_uverbs on MOFED/DOCA-OFED 25.04 and later and on the in-box cores, ib_core on \
             MOFED/DOCA-OFED 24.04 and earlier; peermem doctor's peer-memory-core names it"
        ),
        "{f}"
    );
    assert!(!f.contains("modprobe ib_core"), "{f}");
}

/// The tree at `dir` with no module exporting the peer-memory core's symbols
/// (/proc/kallsyms without them, ib_uverbs not loaded).
fn without_core_exports(dir: &std::path::Path) {
    let p = dir.join("proc/kallsyms");
    let s: String = std::fs::read_to_string(&p)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("_peer_memory_client"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(p, s).unwrap();
    let _ = std::fs::remove_dir_all(dir.join("sys/module/ib_uverbs"));
}

/// healthy-dev-vm records no kernel log (no /dmesg.txt).
#[test]
fn no_recorded_log_is_not_applicable() {
    expect_detail(
        &run("healthy-dev-vm"),
        "symbol-errors",
        Verdict::NotApplicable,
        "no kernel log recorded (/dmesg.txt)",
    );
}

// ---- gpu-product ------------------------------------------------------------------

/// healthy-h100's `nvidia-smi -q` (Product Name "NVIDIA H100 80GB HBM3", Product Brand
/// "NVIDIA") and the lent H200's, recorded on that host (Product Brand "NVIDIA").
#[test]
fn data_center_gpus_are_fine() {
    expect_detail(
        &run("healthy-h100"),
        "gpu-product",
        Verdict::Ok,
        "00000000:18:00.0: NVIDIA H100 80GB HBM3 (brand NVIDIA): a data-center or professional GPU",
    );
    expect_detail(
        &run("lent-h200-6.18"),
        "gpu-product",
        Verdict::Ok,
        "00000000:00:06.0: NVIDIA H200 (brand NVIDIA): a data-center or professional GPU",
    );
}

/// tests/fixtures/nvidia-smi/geforce-rtx-4090.txt: `nvidia-smi -q` of a GeForce RTX
/// 4090 (device 0x2684, Ada Lovelace, Product Brand "GeForce", 32 GiB BAR1 with
/// Resizable BAR), the fields as the H200 host's output lays them out.
#[test]
fn geforce_is_refused_with_the_reason() {
    let r = run_smi("healthy-h100", Some(&smi("geforce-rtx-4090.txt")));
    let c = expect_detail(
        &r,
        "gpu-product",
        Verdict::Fail,
        "00000000:01:00.0: NVIDIA GeForce RTX 4090 (brand GeForce): GeForce: NVIDIA supports \
         GPUDirect RDMA on data-center and professional GPUs, not GeForce \
         (nvidia_p2p_get_pages refuses GeForce memory with -EINVAL)",
    );
    assert!(fix(c).contains("data-center"));
    first_fail(&r, "gpu-product");
}

/// Without a brand (older nvidia-smi), the product name decides; a host with a
/// GeForce beside a data-center GPU warns.
#[test]
fn geforce_by_name_beside_a_data_center_gpu_warns() {
    let smi = "Driver Version : 580.65.06\n\
               GPU 00000000:18:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n\
               GPU 00000000:65:00.0\n    Product Name : NVIDIA GeForce RTX 3090\n";
    let r = run_smi("healthy-h100", Some(smi));
    let c = expect(&r, "gpu-product", Verdict::Warn);
    assert!(
        c.detail
            .starts_with("00000000:65:00.0: NVIDIA GeForce RTX 3090: GeForce: "),
        "{c:?}"
    );
    assert!(c
        .detail
        .ends_with("GPUDirect RDMA works on the others (00000000:18:00.0: NVIDIA H100 80GB HBM3)"));
    let r = run_smi("healthy-h100", None);
    expect(&r, "gpu-product", Verdict::NotApplicable);
}

// ---- hca --------------------------------------------------------------------------

/// healthy-h100's mlx5_0: /sys/class/infiniband/mlx5_0 -> the ConnectX-7's
/// infiniband/mlx5_0, `device` -> ../../../0000:19:00.0, `driver` -> mlx5_core, port 1
/// `4: ACTIVE` / `5: LinkUp` / `InfiniBand` (what an NDR port with a subnet manager
/// reads).
#[test]
fn an_active_connectx_port_is_fine() {
    expect_detail(
        &run("healthy-h100"),
        "hca",
        Verdict::Ok,
        "mlx5_0 (0000:19:00.0, mlx5_core): port 1 ACTIVE (LinkUp, InfiniBand)",
    );
}

/// An InfiniBand port with its link up but no subnet manager on the fabric stays
/// `2: INIT` with phys_state `5: LinkUp` (what ibstat shows as "State: Initializing,
/// Physical state: LinkUp"); a second HCA without a cable reads `1: DOWN`, `2: Polling`.
#[test]
fn ports_not_active_warn_with_their_states() {
    let dir = Scratch::copy_of("healthy-h100", "hca-init");
    let port = "sys/class/infiniband/mlx5_0/ports/1";
    write(&dir, &format!("/{port}/state"), "2: INIT\n");
    let r = run_at(&dir);
    let c = expect_detail(
        &r,
        "hca",
        Verdict::Warn,
        "no port is ACTIVE: mlx5_0 (0000:19:00.0, mlx5_core): port 1 INIT (LinkUp)",
    );
    let hint = fix(c);
    assert!(
        hint.starts_with("bring the link up on mlx5_0 port 1: INIT (phys_state 5: LinkUp)"),
        "{hint}"
    );
    assert!(hint.contains("subnet manager"), "{hint}");
    // One port up, another HCA down: still a warning, naming the one down.
    write(&dir, &format!("/{port}/state"), "4: ACTIVE\n");
    let usp = "pci0000:15/0000:15:01.0/0000:16:00.0";
    function(&dir, &format!("{usp}/0000:17:02.0"), PEX, 0);
    let hca = format!("{usp}/0000:17:02.0/0000:1a:00.0");
    connectx(&dir, "mlx5_1", &hca, 0, ("1: DOWN", "2: Polling"));
    let r = run_at(&dir);
    let c = expect_detail(
        &r,
        "hca",
        Verdict::Warn,
        "mlx5_0 (0000:19:00.0, mlx5_core): port 1 ACTIVE (LinkUp, InfiniBand); \
         mlx5_1 (0000:1a:00.0): port 1 DOWN (Polling)",
    );
    assert!(fix(c).starts_with("bring the link up on mlx5_1 port 1: DOWN (phys_state 2: Polling)"));
}

/// healthy-dev-vm: the QEMU dev VM with the fake nvidia.ko and peer-memory core, and
/// no RDMA device (no /sys/class/infiniband).
#[test]
fn no_rdma_device_fails() {
    let r = run("healthy-dev-vm");
    let c = expect_detail(
        &r,
        "hca",
        Verdict::Fail,
        "no RDMA device: /sys/class/infiniband is empty or missing (ibv_devices lists nothing)",
    );
    assert!(fix(c).contains("modprobe mlx5_ib"));
}

/// Soft-RoCE: `rdma link add rxe0 type rxe netdev enp0s3` makes
/// /sys/devices/virtual/infiniband/rxe0 (no PCI parent, a `parent` file naming the
/// netdev, an Ethernet port).
#[test]
fn only_software_rdma_fails() {
    let dir = Scratch::copy_of("healthy-dev-vm", "rxe");
    let d = "/sys/devices/virtual/infiniband/rxe0";
    write(&dir, &format!("{d}/parent"), "enp0s3\n");
    write(&dir, &format!("{d}/ports/1/state"), "4: ACTIVE\n");
    write(&dir, &format!("{d}/ports/1/phys_state"), "5: LinkUp\n");
    write(&dir, &format!("{d}/ports/1/link_layer"), "Ethernet\n");
    std::fs::create_dir_all(dir.join("sys/class/infiniband")).unwrap();
    symlink(
        "../../devices/virtual/infiniband/rxe0",
        dir.join("sys/class/infiniband/rxe0"),
    )
    .unwrap();
    let r = run_at(&dir);
    expect_detail(
        &r,
        "hca",
        Verdict::Fail,
        "no HCA: only software RDMA devices (rxe0), which cannot DMA to GPU memory",
    );
    expect(&r, "pcie-path", Verdict::NotApplicable);
}

// ---- boot-load --------------------------------------------------------------------

/// healthy-h100 has peermem-dropin-dkms installed: /etc/modules-load.d/peermem.conf as
/// scripts/deb writes it (a comment line, then `nvidia-peermem`).
#[test]
fn the_packages_boot_entry_is_found() {
    expect_detail(
        &run("healthy-h100"),
        "boot-load",
        Verdict::Ok,
        "/etc/modules-load.d/peermem.conf loads nvidia-peermem",
    );
    // A distribution's file under /usr/lib naming nvidia_peermem counts too.
    let dir = Scratch::copy_of("healthy-h100", "boot-usr-lib");
    std::fs::remove_dir_all(dir.join("etc/modules-load.d")).unwrap();
    write(
        &dir,
        "/usr/lib/modules-load.d/nvidia-peermem.conf",
        "nvidia_peermem\n",
    );
    let r = run_at(&dir);
    assert_eq!(
        check(&r, "boot-load").detail,
        "/usr/lib/modules-load.d/nvidia-peermem.conf loads nvidia_peermem"
    );
}

/// A module loaded by hand (`modprobe nvidia-peermem`) with no boot entry, or one
/// commented out (`#nvidia-peermem`).
#[test]
fn no_boot_entry_warns() {
    let dir = Scratch::copy_of("healthy-h100", "boot-none");
    write(
        &dir,
        "/etc/modules-load.d/peermem.conf",
        "# peermem-dropin-dkms: load the GPUDirect RDMA peer-memory client at boot.\n#nvidia-peermem\n",
    );
    write(
        &dir,
        "/etc/modules-load.d/modules.conf",
        "# /etc/modules\nloop\n",
    );
    let r = run_at(&dir);
    let c = expect(&r, "boot-load", Verdict::Warn);
    assert!(
        c.detail
            .ends_with("names peermem or nvidia-peermem: the module is gone after a reboot"),
        "{c:?}"
    );
    assert!(
        c.detail
            .starts_with("peermem.service is not enabled and no "),
        "{c:?}"
    );
    assert!(
        fix(c).starts_with("systemctl enable peermem.service"),
        "{c:?}"
    );
    assert!(
        fix(c).contains("echo nvidia-peermem > /etc/modules-load.d/peermem.conf"),
        "{c:?}"
    );
    assert!(r.ready());
}

/// The Debian packages ship peermem.service and enable it (scripts/deb): the unit as
/// packaging/systemd/peermem.service.in makes it for the drop-in, with the wants link
/// of multi-user.target. The unit present but not enabled is no boot entry.
#[test]
fn the_packages_unit_is_the_boot_entry() {
    let dir = Scratch::copy_of("healthy-h100", "boot-unit");
    std::fs::remove_dir_all(dir.join("etc/modules-load.d")).unwrap();
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/systemd/peermem.service.in"
    ))
    .unwrap()
    .replace("@MODULE@", "nvidia-peermem")
    .replace("@MODNAME@", "nvidia_peermem");
    write(&dir, "/usr/lib/systemd/system/peermem.service", &unit);
    write(&dir, "/usr/lib/systemd/system/openibd.service", "[Unit]\n");
    let r = run_at(&dir);
    let c = expect(&r, "boot-load", Verdict::Warn);
    assert!(
        c.detail.starts_with("peermem.service is not enabled"),
        "{c:?}"
    );
    std::fs::create_dir_all(dir.join("etc/systemd/system/multi-user.target.wants")).unwrap();
    std::os::unix::fs::symlink(
        "/usr/lib/systemd/system/peermem.service",
        dir.join("etc/systemd/system/multi-user.target.wants/peermem.service"),
    )
    .unwrap();
    expect_detail(
        &run_at(&dir),
        "boot-load",
        Verdict::Ok,
        "peermem.service (/usr/lib/systemd/system/peermem.service, enabled) loads \
         nvidia_peermem after openibd and the GPU driver, and stops it before them",
    );
}

/// A module loaded at boot by modules-load.d (make install's entry, or NVIDIA's
/// nvidia-peermem set up by hand) on a host with MOFED's openibd: `openibd restart`
/// fails while it holds the peer-memory core's module (MOFED 25.04's ib_uverbs in
/// healthy-h100; both candidates where no loaded module exports the core), and the fix
/// names the unit. Without openibd the entry is fine.
#[test]
fn modules_load_beside_openibd_warns() {
    let dir = Scratch::copy_of("healthy-h100", "boot-openibd");
    write(&dir, "/lib/systemd/system/openibd.service", "[Unit]\n");
    let r = run_at(&dir);
    let c = expect(&r, "boot-load", Verdict::Warn);
    assert!(
        c.detail.starts_with(
            "/etc/modules-load.d/peermem.conf loads nvidia-peermem, outside peermem.service"
        ),
        "{c:?}"
    );
    assert!(
        c.detail
            .ends_with("`systemctl restart openibd` fails while the module holds ib_uverbs"),
        "{c:?}"
    );
    assert!(fix(c).contains("peermem.service"), "{c:?}");
    without_core_exports(&dir);
    let r = run_at(&dir);
    let c = expect(&r, "boot-load", Verdict::Warn);
    assert!(
        c.detail.ends_with(
            "fails while the module holds the peer-memory core's module (ib_uverbs or ib_core)"
        ),
        "{c:?}"
    );
}

// ---- core-symbols -----------------------------------------------------------------

/// A MOFED upgrade after peermem was built, the module unreadable as ELF: on a kernel with symbol versions (the Ubuntu layout of
/// healthy-h100, CONFIG_MODVERSIONS=y) a MOFED Module.symvers newer than the installed
/// module warns and names the rebuild; older, OK. Without symbol
/// versions (Debian's kernel) no rebuild is needed, whatever the times.
#[test]
fn a_mofed_upgrade_after_the_build_warns_where_symbols_are_versioned() {
    use std::time::{Duration, SystemTime};
    let dir = Scratch::copy_of("healthy-h100", "core-symbols");
    let module = "/lib/modules/7.0.0-34-generic/updates/dkms/nvidia-peermem.ko";
    let symvers = "/usr/src/ofa_kernel/x86_64/7.0.0-34-generic/Module.symvers";
    write(&dir, module, "module");
    write(&dir, symvers, "0x12345678\tib_register_peer_memory_client\tdrivers/infiniband/core/ib_core\tEXPORT_SYMBOL\t\n");
    let touch = |abs: &str, t: SystemTime| {
        std::fs::File::options()
            .write(true)
            .open(dir.join(&abs[1..]))
            .unwrap()
            .set_modified(t)
            .unwrap();
    };
    let now = SystemTime::now();
    touch(module, now - Duration::from_secs(3600));
    touch(symvers, now);
    let r = run_at(&dir);
    let c = expect(&r, "core-symbols", Verdict::Warn);
    assert!(
        c.detail.starts_with(&format!(
            "MOFED/DOCA-OFED's {symvers} is newer than {module}"
        )),
        "{c:?}"
    );
    assert!(
        fix(c).starts_with("dkms build --force -m peermem-dropin -v "),
        "{c:?}"
    );
    touch(symvers, now - Duration::from_secs(7200));
    expect_detail(
        &run_at(&dir),
        "core-symbols",
        Verdict::Ok,
        &format!("{module} was built after MOFED/DOCA-OFED's {symvers}"),
    );
    // The same host on a kernel without symbol versions.
    touch(symvers, now);
    let config = "/boot/config-7.0.0-34-generic";
    let text = std::fs::read_to_string(dir.join(&config[1..])).unwrap();
    write(
        &dir,
        config,
        text.replace("CONFIG_MODVERSIONS=y", "# CONFIG_MODVERSIONS is not set"),
    );
    let r = run_at(&dir);
    let c = expect(&r, "core-symbols", Verdict::Ok);
    assert!(c.detail.starts_with("the kernel checks no symbol versions (CONFIG_MODVERSIONS is not set in /boot/config-7.0.0-34-generic)"), "{c:?}");
}

/// A module file (an x86-64 ELF relocatable object) whose version tables record
/// `crcs`: the extended tables (`__version_ext_crcs`, `__version_ext_names`) as
/// modpost writes them with CONFIG_EXTENDED_MODVERSIONS, else `__versions`'s 64-byte
/// entries.
fn module_with_versions(extended: bool, crcs: &[(&str, u32)]) -> Vec<u8> {
    use object::write::Object;
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let mut section = |name: &str, data: Vec<u8>| {
        let id = obj.add_section(
            Vec::new(),
            name.as_bytes().to_vec(),
            SectionKind::ReadOnlyData,
        );
        obj.append_section_data(id, &data, 8);
    };
    if extended {
        section(
            "__version_ext_crcs",
            crcs.iter().flat_map(|(_, c)| c.to_le_bytes()).collect(),
        );
        section(
            "__version_ext_names",
            crcs.iter()
                .flat_map(|(n, _)| n.bytes().chain([0]))
                .collect(),
        );
    } else {
        let mut table = Vec::new();
        for (name, crc) in crcs {
            let mut entry = u64::from(*crc).to_le_bytes().to_vec();
            entry.extend(name.bytes());
            entry.resize(64, 0);
            table.extend(entry);
        }
        section("__versions", table);
    }
    obj.write().unwrap()
}

/// Both table formats read back as written; a file that is not ELF reads as `None`,
/// one without tables as empty.
#[test]
fn module_symbol_versions_are_read_from_either_table() {
    let crcs = [
        ("module_layout", 0x0bad_cafe),
        ("ib_register_peer_memory_client", 0x1234_5678),
        ("ib_unregister_peer_memory_client", 0x9abc_def0),
    ];
    for extended in [true, false] {
        let read = doctor::module_crcs(&module_with_versions(extended, &crcs)).unwrap();
        assert_eq!(read.len(), 3, "extended {extended}: {read:?}");
        for (name, crc) in crcs {
            assert_eq!(read.get(name), Some(&crc), "extended {extended}: {name}");
        }
    }
    // Compressed as dkms and the distributions compress modules: xz (Debian's), zstd
    // (Ubuntu's) and gzip.
    let elf = module_with_versions(true, &crcs);
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut elf.as_slice(), &mut xz).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &elf).unwrap();
    let gz = gz.finish().unwrap();
    // zstd as Ubuntu's kmod and dkms compress (the zstd command: scripts/setup).
    let zst = {
        use std::io::Write as _;
        let mut child = std::process::Command::new("zstd")
            .args(["-q", "-c", "-19"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("zstd (scripts/setup installs it)");
        child.stdin.take().unwrap().write_all(&elf).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        out.stdout
    };
    for (path, bytes) in [
        ("m.ko", elf.clone()),
        ("m.ko.xz", xz),
        ("m.ko.zst", zst),
        ("m.ko.gz", gz),
    ] {
        assert_eq!(
            doctor::module_image(path, bytes).as_ref(),
            Some(&elf),
            "{path}"
        );
    }
    assert_eq!(doctor::module_image("m.ko.xz", b"not xz".to_vec()), None);
    assert_eq!(doctor::module_image("m.ko.zst", b"not zstd".to_vec()), None);
    assert_eq!(doctor::module_image("m.ko.bz2", elf.clone()), None);
    assert_eq!(doctor::module_crcs(b"not an ELF file"), None);
    assert!(doctor::module_crcs(&module_with_versions(false, &[]))
        .unwrap()
        .is_empty());
    let symvers = "0x1234abcd\tib_register_peer_memory_client\tib_core\tEXPORT_SYMBOL\t\n\
                   0x00000001\tib_unregister_peer_memory_client\tib_core\tEXPORT_SYMBOL\t\n";
    assert_eq!(
        doctor::symvers_crc(symvers, "ib_register_peer_memory_client"),
        Some(0x1234_abcd)
    );
    assert_eq!(
        doctor::symvers_crc(symvers, "ib_unregister_peer_memory_client"),
        Some(1)
    );
    assert_eq!(doctor::symvers_crc(symvers, "ib_register"), None);
    // The exporting module: the module path's base name (MOFED's and the kernel's
    // Module.symvers give a path; a bare name is its own).
    assert_eq!(
        doctor::symvers_exporter(symvers, "ib_register_peer_memory_client"),
        Some("ib_core")
    );
    let inbox =
        "0x1\tib_register_peer_memory_client\tdrivers/infiniband/core/ib_uverbs\tEXPORT_SYMBOL\t\n";
    assert_eq!(
        doctor::symvers_exporter(inbox, "ib_register_peer_memory_client"),
        Some("ib_uverbs")
    );
    assert_eq!(doctor::symvers_exporter(inbox, "ib_register"), None);
}

/// With symbol versions, the CRCs the installed module records are compared with
/// MOFED's Module.symvers, whatever the files' times: equal, OK; one differing (a MOFED
/// upgrade without a rebuild), FAIL naming the symbol, both CRCs and the rebuild; a
/// module built without MOFED's Module.symvers records none and loads over any ib_core.
#[test]
fn core_symbols_compares_the_module_crcs_with_mofed_symvers() {
    let dir = Scratch::copy_of("healthy-h100", "core-symbols-crc");
    // Compressed, as Debian's dkms installs it.
    let module = "/lib/modules/7.0.0-34-generic/updates/dkms/nvidia-peermem.ko.xz";
    let symvers = "/usr/src/ofa_kernel/x86_64/7.0.0-34-generic/Module.symvers";
    write(
        &dir,
        symvers,
        "0x1c2d3e4f\tib_register_peer_memory_client\tdrivers/infiniband/core/ib_core\tEXPORT_SYMBOL\t\n\
         0x5a6b7c8d\tib_unregister_peer_memory_client\tdrivers/infiniband/core/ib_core\tEXPORT_SYMBOL\t\n",
    );
    let xz = |elf: Vec<u8>| {
        let mut out = Vec::new();
        lzma_rs::xz_compress(&mut elf.as_slice(), &mut out).unwrap();
        out
    };
    let built = |register: u32| {
        xz(module_with_versions(
            true,
            &[
                ("ib_register_peer_memory_client", register),
                ("ib_unregister_peer_memory_client", 0x5a6b_7c8d),
                ("kmalloc_caches", 7),
            ],
        ))
    };
    write(&dir, module, built(0x1c2d_3e4f));
    expect_detail(
        &run_at(&dir),
        "core-symbols",
        Verdict::Ok,
        &format!(
            "{module} records the symbol versions of MOFED/DOCA-OFED's {symvers} for \
             ib_register_peer_memory_client and ib_unregister_peer_memory_client"
        ),
    );
    write(&dir, module, built(0x0102_0304));
    let r = run_at(&dir);
    let c = expect_detail(
        &r,
        "core-symbols",
        Verdict::Fail,
        &format!(
            "{module} was built against another peer-memory core than MOFED/DOCA-OFED's {symvers}: \
             the symbol versions differ for ib_register_peer_memory_client (the module \
             records 0x01020304, ib_core exports 0x1c2d3e4f); the kernel refuses to load \
             it (\"disagrees about version of symbol\")"
        ),
    );
    assert!(
        fix(c).starts_with("dkms build --force -m peermem-dropin -v "),
        "{c:?}"
    );
    write(
        &dir,
        module,
        xz(module_with_versions(false, &[("kmalloc_caches", 7)])),
    );
    expect_detail(
        &run_at(&dir),
        "core-symbols",
        Verdict::Ok,
        &format!(
            "{module} records no symbol version for ib_register_peer_memory_client and \
             ib_unregister_peer_memory_client (built without MOFED's Module.symvers): it \
             loads over any peer-memory core that exports them"
        ),
    );
}

// ---- module-file ------------------------------------------------------------------

/// A module's ELF image with a `.modinfo` of `fields` (`key=value` entries).
fn module_with_modinfo(fields: &[(&str, &str)]) -> Vec<u8> {
    use object::write::Object;
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let id = obj.add_section(Vec::new(), b".modinfo".to_vec(), SectionKind::ReadOnlyData);
    let data: Vec<u8> = fields
        .iter()
        .flat_map(|(k, v)| format!("{k}={v}").into_bytes().into_iter().chain([0]))
        .collect();
    obj.append_section_data(id, &data, 1);
    obj.write().unwrap()
}

/// healthy-h100 with `file` (under /lib/modules/<release>/) as the nvidia-peermem.ko
/// modules.dep lists, xz-compressed as Debian's dkms leaves it.
fn with_module_file(name: &str, fields: &[(&str, &str)]) -> Scratch {
    let dir = Scratch::copy_of("healthy-h100", name);
    let rel = "7.0.0-34-generic";
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut module_with_modinfo(fields).as_slice(), &mut xz).unwrap();
    let p = dir.join(format!(
        "lib/modules/{rel}/updates/dkms/nvidia-peermem.ko.xz"
    ));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, xz).unwrap();
    write(
        &dir,
        &format!("/lib/modules/{rel}/modules.dep"),
        "kernel/drivers/infiniband/core/ib_core.ko.zst:\n\
         updates/dkms/nvidia-peermem.ko.xz: kernel/drivers/video/nvidia.ko\n",
    );
    dir
}

/// The file modprobe loads is named, with whose it is: peermem's drop-in (its author)
/// is OK; NVIDIA's own (the driver's version) where the drop-in package is installed
/// FAILs (the next load is NVIDIA's), the fix the dkms command that installs the
/// drop-in over it; without the drop-in package a WARN naming the package.
#[test]
fn the_file_modprobe_loads_is_named_with_whose_it_is() {
    let file = "/lib/modules/7.0.0-34-generic/updates/dkms/nvidia-peermem.ko.xz";
    let v = peermem_tool::peermem_version();
    let dir = with_module_file(
        "module-file-dropin",
        &[
            ("version", v),
            ("author", "peermem developers"),
            ("name", "nvidia_peermem"),
        ],
    );
    expect_detail(
        &run_at(&dir),
        "module-file",
        Verdict::Ok,
        &format!("modprobe nvidia-peermem loads {file}: peermem's drop-in {v}"),
    );

    let dir = with_module_file(
        "module-file-nvidia",
        &[("version", "580.65.06"), ("name", "nvidia_peermem")],
    );
    let driver = run_at(&dir)
        .checks
        .iter()
        .find(|c| c.id == "driver-version")
        .unwrap()
        .detail
        .clone();
    assert!(driver.contains("580.65.06"), "{driver}");
    let c = expect(&run_at(&dir), "module-file", Verdict::Warn).clone();
    assert_eq!(
        c.detail,
        format!(
            "modprobe nvidia-peermem loads {file} (version 580.65.06: NVIDIA's own, its \
             version the driver's); peermem's drop-in is not installed"
        )
    );
    std::fs::create_dir_all(dir.join(format!("usr/src/peermem-dropin-{v}"))).unwrap();
    let r = run_at(&dir);
    let c = expect(&r, "module-file", Verdict::Fail);
    assert_eq!(
        c.detail,
        format!(
            "modprobe nvidia-peermem loads {file} (version 580.65.06: NVIDIA's own, its \
             version the driver's), not peermem's drop-in, which is installed \
             (peermem-dropin {v})"
        )
    );
    assert!(fix(c).starts_with(&format!(
        "dkms install --force -m peermem-dropin -v {v} -k 7.0.0-34-generic"
    )));
    // It comes before the module's own check: the load would take that file.
    first_fail(&r, "module-file");
}

// ---- other-kernels ----------------------------------------------------------------

/// A second kernel installed on the Debian 13 host (a newer 7.3, image and headers)
/// before a reboot: dkms could not build peermem for it without its Rust build files, so the
/// check fails naming the kernel and the commands (its source, then dkms); with the
/// Rust build files, dkms; with the module installed, OK. A kernel image without a
/// build tree warns; the running kernel and kernels without Rust are not looked at.
#[test]
fn an_installed_kernel_without_the_module_fails() {
    let dir = Scratch::copy_of("debian-13-lib-rust", "other-kernels");
    expect_detail(
        &run_at(&dir),
        "other-kernels",
        Verdict::Ok,
        "no other kernel with Rust support is installed",
    );
    let k = "7.3.9+deb13-amd64";
    write(&dir, &format!("/boot/vmlinuz-{k}"), "image");
    write(
        &dir,
        &format!("/usr/src/linux-headers-{k}/.config"),
        "CONFIG_X86_64=y\nCONFIG_RUST=y\n",
    );
    std::os::unix::fs::symlink(
        format!("../../../usr/src/linux-headers-{k}"),
        dir.join(format!("lib/modules/{k}/build")),
    )
    .or_else(|_| {
        std::fs::create_dir_all(dir.join(format!("lib/modules/{k}")))?;
        std::os::unix::fs::symlink(
            format!("../../../usr/src/linux-headers-{k}"),
            dir.join(format!("lib/modules/{k}/build")),
        )
    })
    .unwrap();
    let r = run_at(&dir);
    let c = expect(&r, "other-kernels", Verdict::Fail);
    assert_eq!(
        c.detail,
        format!("no peermem module for installed kernel {k}: after a reboot into it GPUDirect RDMA is gone")
    );
    assert_eq!(
        fix(c),
        format!(
            "for {k}: its Rust build files are missing: apt install linux-source-7.3 (the \
             version of linux-headers-{k}) && dkms autoinstall -k {k}"
        )
    );
    write(
        &dir,
        &format!("/usr/src/linux-headers-{k}/rust/libkernel.rmeta"),
        "",
    );
    let r = run_at(&dir);
    assert!(
        fix(expect(&r, "other-kernels", Verdict::Fail))
            .starts_with(&format!("for {k}: dkms autoinstall -k {k}")),
        "{:?}",
        check(&r, "other-kernels")
    );
    write(
        &dir,
        &format!("/lib/modules/{k}/updates/dkms/nvidia-peermem.ko"),
        "",
    );
    expect_detail(
        &run_at(&dir),
        "other-kernels",
        Verdict::Ok,
        &format!("peermem is installed for {k}"),
    );
    // An image whose headers are not installed; and a kernel without Rust, ignored.
    write(&dir, "/boot/vmlinuz-7.3.8+deb13-amd64", "image");
    std::fs::create_dir_all(dir.join("lib/modules/7.3.8+deb13-amd64")).unwrap();
    write(&dir, "/lib/modules/6.12.48+deb13-amd64/vmlinuz", "image");
    write(
        &dir,
        "/lib/modules/6.12.48+deb13-amd64/build/.config",
        "CONFIG_X86_64=y\n",
    );
    let r = run_at(&dir);
    let c = expect(&r, "other-kernels", Verdict::Warn);
    assert_eq!(
        c.detail,
        "installed kernel 7.3.8+deb13-amd64 has no build tree: dkms cannot build peermem for it"
    );
}

/// A kernel of a release outside SUPPORTED_KERNELS (Debian's former 7.2 backports
/// kernel, image and headers with Rust): dkms skips it, so no dkms command can help;
/// the check warns, naming its release and the supported ones, and the fix is booting
/// one of those. With its headers, its Rust build files or none, the same.
#[test]
fn an_installed_kernel_of_an_unsupported_release_warns_without_dkms_advice() {
    let dir = Scratch::copy_of("debian-13-lib-rust", "other-kernels-unsupported");
    let k = "7.2.12+deb13-amd64";
    write(&dir, &format!("/boot/vmlinuz-{k}"), "image");
    write(
        &dir,
        &format!("/lib/modules/{k}/build/.config"),
        "CONFIG_X86_64=y\nCONFIG_RUST=y\n",
    );
    let list = peermem_tool::doctor::supported_list();
    assert!(!list.contains("7.2"), "SUPPORTED_KERNELS lists 7.2: {list}");
    let r = run_at(&dir);
    let c = expect(&r, "other-kernels", Verdict::Warn);
    assert_eq!(
        c.detail,
        format!(
            "installed kernel {k} (Linux 7.2) is of a release peermem does not support \
             (Linux {list}): dkms skips it, and after a reboot into it GPUDirect RDMA is gone"
        )
    );
    assert_eq!(
        fix(c),
        format!(
            "boot a Linux {list} kernel (make it the default boot entry); the other may stay \
             installed"
        )
    );
    assert!(!fix(c).contains("dkms"));
}

// ---- pcie-path --------------------------------------------------------------------

/// healthy-h100's PCIe layout (top of this file): GPU 18:00.0 and HCA 19:00.0 on two
/// downstream ports of one switch, ACS control 0 on both ports.
#[test]
fn gpu_and_hca_below_one_switch_without_acs_redirection_are_fine() {
    expect_detail(
        &run("healthy-h100"),
        "pcie-path",
        Verdict::Ok,
        "GPU 0000:18:00.0 - mlx5_0 (0000:19:00.0): PIX (at most one PCIe switch between \
         them), no ACS redirection at 0000:17:00.0, 0000:17:01.0",
    );
}

/// With a translating IOMMU, Linux enables on every downstream port the ACS controls it
/// supports among Source Validation, P2P Request Redirect, P2P Completion Redirect and
/// Upstream Forwarding (drivers/pci/pci.c `pci_std_enable_acs`): control 0x001d, which
/// lspci shows as `ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+
/// EgressCtrl- DirectTrans-`.
#[test]
fn acs_redirection_on_the_switch_ports_warns_naming_them() {
    let dir = Scratch::copy_of("healthy-h100", "acs");
    dsp_config(&dir, "0000:17:00.0", 0x001d);
    dsp_config(&dir, "0000:17:01.0", 0x001d);
    let r = run_at(&dir);
    let c = expect_detail(
        &r,
        "pcie-path",
        Verdict::Warn,
        "GPU 0000:18:00.0 - mlx5_0 (0000:19:00.0): PIX (at most one PCIe switch between \
         them), 0000:17:00.0 ACSCtl SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ \
         EgressCtrl- DirectTrans-, 0000:17:01.0 ACSCtl SrcValid+ TransBlk- ReqRedir+ \
         CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-; ACS redirects peer-to-peer \
         traffic to the root complex at 0000:17:00.0, 0000:17:01.0",
    );
    let fix = fix(c);
    assert!(
        fix.contains("setpci -s 0000:17:00.0 ECAP_ACS+0x6.w=0000; setpci -s 0000:17:01.0 ECAP_ACS+0x6.w=0000"),
        "{fix}"
    );
    assert!(fix.contains("BIOS"), "{fix}");
    // Source Validation alone redirects nothing.
    dsp_config_any(&dir, "0000:17:00.0", 0x0001);
    dsp_config_any(&dir, "0000:17:01.0", 0x0001);
    expect(&run_at(&dir), "pcie-path", Verdict::Ok);
    // Not root: sysfs gives the first 64 bytes of config only.
    for bdf in ["0000:17:00.0", "0000:17:01.0"] {
        let p = config_of(&dir, bdf);
        let head = std::fs::read(&p).unwrap()[..64].to_vec();
        std::fs::write(&p, head).unwrap();
    }
    let r = run_at(&dir);
    let c = expect(&r, "pcie-path", Verdict::Ok);
    assert!(
        c.detail.ends_with(
            "; ACS of 0000:17:00.0, 0000:17:01.0 not checked: their extended configuration \
             space cannot be read (only root reads past the first 64 bytes of config)"
        ),
        "{c:?}"
    );
}

/// A two-socket server whose only ConnectX-7 hangs off the other socket's root port
/// (host bridge pci0000:97, NUMA node 1): nvidia-smi topo -m says SYS.
#[test]
fn an_hca_on_the_other_socket_is_sys() {
    let dir = Scratch::copy_of("healthy-h100", "sys");
    std::fs::remove_file(dir.join("sys/class/infiniband/mlx5_0")).unwrap();
    function(&dir, "pci0000:97/0000:97:01.0", ROOT_PORT, 1);
    connectx(
        &dir,
        "mlx5_1",
        "pci0000:97/0000:97:01.0/0000:98:00.0",
        1,
        ACTIVE,
    );
    let r = run_at(&dir);
    let c = expect_detail(
        &r,
        "pcie-path",
        Verdict::Warn,
        "GPU 0000:18:00.0 - mlx5_1 (0000:98:00.0): SYS (between NUMA nodes, over the CPU interconnect)",
    );
    assert!(fix(c).starts_with("GPU 0000:18:00.0 - mlx5_1: SYS: peer traffic crosses the CPU"));
    // The same host bridge numbers on one NUMA node: NODE.
    write(
        &dir,
        "/sys/devices/pci0000:97/0000:97:01.0/0000:98:00.0/numa_node",
        "0\n",
    );
    assert!(check(&run_at(&dir), "pcie-path")
        .detail
        .contains(": NODE ("));
    // With mlx5_0 back below the GPU's switch, the nearest HCA is taken.
    symlink(
        "../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0/infiniband/mlx5_0",
        dir.join("sys/class/infiniband/mlx5_0"),
    )
    .unwrap();
    let r = run_at(&dir);
    let c = expect(&r, "pcie-path", Verdict::Ok);
    assert!(c.detail.contains("- mlx5_0 (0000:19:00.0): PIX"), "{c:?}");
}

/// The lent H200 VM (Firecracker) puts every device on the root bus: the GPU at
/// 0000:00:06.0 (its nvidia-smi -q), an HCA passed through beside it at 0000:00:07.0;
/// both below host bridge pci0000:00, no bridge between: PHB.
#[test]
fn functions_on_the_root_bus_are_phb() {
    let dir = Scratch::new("phb");
    function(
        &dir,
        "pci0000:00/0000:00:06.0",
        ("0x10de", "0x2335", "0x030200"),
        -1,
    );
    connectx(&dir, "mlx5_0", "pci0000:00/0000:00:07.0", -1, ACTIVE);
    expect_detail(
        &run_at(&dir),
        "pcie-path",
        Verdict::Warn,
        "GPU 0000:00:06.0 - mlx5_0 (0000:00:07.0): PHB (through the CPU's PCIe host bridge)",
    );
}

/// Two levels of switches (a GPU tray's PEX switch below the board's, as DGX A100
/// trays pair GPUs and NICs): PXB; ACS is read on every port below the common one.
#[test]
fn two_switch_levels_are_pxb() {
    let dir = Scratch::copy_of("healthy-h100", "pxb");
    std::fs::remove_file(dir.join("sys/class/infiniband/mlx5_0")).unwrap();
    let dsp = "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0";
    function(&dir, dsp, PEX, 0);
    function(&dir, &format!("{dsp}/0000:1b:00.0"), PEX, 0);
    function(&dir, &format!("{dsp}/0000:1b:00.0/0000:1c:00.0"), PEX, 0);
    let hca = format!("{dsp}/0000:1b:00.0/0000:1c:00.0/0000:1d:00.0");
    connectx(&dir, "mlx5_2", &hca, 0, ACTIVE);
    let r = run_at(&dir);
    let c = expect(&r, "pcie-path", Verdict::Ok);
    assert!(
        c.detail.starts_with(
            "GPU 0000:18:00.0 - mlx5_2 (0000:1d:00.0): PXB (several PCIe switches between \
             them, below one host bridge), no ACS redirection at 0000:17:00.0; ACS of \
             0000:17:02.0, 0000:1b:00.0, 0000:1c:00.0 not checked"
        ),
        "{c:?}"
    );
}

/// healthy-h100's downstream-port `config`: the type-1 header (1000:c030, class
/// 0x060400), PCI Express capability at 0x40, and the extended chain AER (0x100) ->
/// ACS (0x138, capability 0x007f, control 0) -> Secondary PCI Express (0x148).
#[test]
fn acs_capability_is_found_in_the_extended_chain() {
    let config = std::fs::read(fixture(
        "healthy-h100/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/config",
    ))
    .unwrap();
    assert_eq!(config.len(), 4096);
    assert_eq!(&config[..4], &[0x00, 0x10, 0x30, 0xc0]);
    assert_eq!(doctor::acs_control(&config), Acs::Control(0));
    assert_eq!(doctor::acs_control(&config[..64]), Acs::Unreadable);
    // A chain without ACS.
    let mut none = vec![0u8; 4096];
    none[0x100..0x104].copy_from_slice(&(0x0001u32 | 2 << 16).to_le_bytes());
    assert_eq!(doctor::acs_control(&none), Acs::Absent);
    // A chain that loops on itself ends.
    none[0x100..0x104].copy_from_slice(&(0x0001u32 | 2 << 16 | 0x100 << 20).to_le_bytes());
    assert_eq!(doctor::acs_control(&none), Acs::Absent);
    assert_eq!(
        doctor::acs_flags(0x001d),
        "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    );
    assert!(doctor::acs_redirects(0x0004));
    assert!(doctor::acs_redirects(0x0020));
    assert!(!doctor::acs_redirects(0x0013));
}

// ---- order --------------------------------------------------------------------------

/// healthy-h100, every check OK: the checks run in the order of `CHECK_IDS`, the order
/// things depend on each other: the kernel, the GPU driver, the RDMA core (its
/// peer-memory core, the HCA), then the module over them, then the platform.
#[test]
fn checks_run_in_dependency_order() {
    let r = run("healthy-h100");
    let ids: Vec<&str> = r.checks.iter().map(|c| c.id).collect();
    let table: Vec<&str> = peermem_tool::doctor::CHECK_IDS
        .iter()
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(ids, table);
    let pos = |id: &str| ids.iter().position(|i| *i == id).unwrap();
    for module in ["peermem-module", "app-detection", "client-registered"] {
        for before in ["kernel-rust", "nvidia-driver", "peer-memory-core", "hca"] {
            assert!(pos(before) < pos(module), "{before} after {module}");
        }
    }
}

/// Each check's `peer_memory` is CHECK_IDS' (only the peer-memory path needs it): the
/// module's and its kernel's and core's checks are, the GPU driver's, the HCA's and
/// the platform's are not.
#[test]
fn each_check_says_whether_only_peer_memory_needs_it() {
    let r = run("healthy-h100");
    let peer: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| c.peer_memory)
        .map(|c| c.id)
        .collect();
    for id in [
        "kernel-rust",
        "peer-memory-core",
        "peermem-module",
        "app-detection",
        "boot-load",
    ] {
        assert!(peer.contains(&id), "{id}");
    }
    for id in [
        "nvidia-driver",
        "hca",
        "iommu",
        "pcie-path",
        "gpu-memory-path",
    ] {
        assert!(!peer.contains(&id), "{id}");
    }
}

/// docs/install.md's "Checking a host: peermem doctor" table lists every check, in the
/// order doctor runs them.
#[test]
fn the_install_guide_lists_every_check_in_order() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/install.md"
    ))
    .unwrap();
    let section = &doc[doc
        .find("\n## Checking a host: peermem doctor\n")
        .expect("the section exists")..];
    let listed: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split_once('`').map(|(id, _)| id))
        .collect();
    let r = run("healthy-h100");
    let ids: Vec<&str> = r.checks.iter().map(|c| c.id).collect();
    assert_eq!(listed, ids);
}
