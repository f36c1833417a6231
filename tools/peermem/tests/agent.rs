// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem agent` on recorded host trees: what it waits for, what it refuses, its
//! probe, its module file and its /metrics server. Its loads and unloads run against
//! a real kernel in the dev-VM plan (tests/qemu/plans/test.sh, suite peermem_agent).

mod common;

use std::io::{Read, Write};
use std::path::Path;

use common::{arg, peermem, write, Scratch};
use peermem_tool::agent::{self, ModuleFile, DRIVER_CTR_READY, MOFED_CTR_READY};
use peermem_tool::Root;

/// A module image whose `.modinfo` holds `fields` (`key=value`).
fn module_with_modinfo(fields: &[&str]) -> Vec<u8> {
    use object::write::Object;
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let id = obj.add_section(Vec::new(), b".modinfo".to_vec(), SectionKind::ReadOnlyData);
    let data: Vec<u8> = fields.iter().flat_map(|f| f.bytes().chain([0])).collect();
    obj.append_section_data(id, &data, 1);
    obj.write().unwrap()
}

fn ours() -> ModuleFile {
    ModuleFile {
        name: "nvidia_peermem".to_owned(),
        version: Some("0.1.0".to_owned()),
        srcversion: Some("0123456789ABCDEF0123456".to_owned()),
    }
}

fn loaded(dir: &Path, name: &str, srcversion: &str, version: &str) {
    write(
        dir,
        &format!("/sys/module/{name}/srcversion"),
        format!("{srcversion}\n"),
    );
    write(
        dir,
        &format!("/sys/module/{name}/version"),
        format!("{version}\n"),
    );
    write(dir, &format!("/sys/module/{name}/initstate"), "live\n");
    write(dir, &format!("/sys/module/{name}/refcnt"), "0\n");
}

#[test]
fn module_file_fields_come_from_modinfo() {
    let elf = module_with_modinfo(&[
        "version=0.1.0",
        "license=Dual MIT/GPL",
        "srcversion=0123456789ABCDEF0123456",
        "name=nvidia_peermem",
        "vermagic=7.3.4+deb13-amd64 SMP preempt mod_unload modversions",
    ]);
    assert_eq!(ModuleFile::parse(&elf), Some(ours()));
    assert_eq!(
        ModuleFile::parse(&module_with_modinfo(&["license=GPL"])),
        None
    );
    assert_eq!(ModuleFile::parse(b"not a module"), None);
    let dir = Scratch::new("modinfo");
    let err = ModuleFile::read(&dir.join("missing.ko")).unwrap_err();
    assert!(err.contains("missing.ko"), "{err}");
}

#[test]
fn waits_for_the_gpu_driver_from_either_source() {
    let dir = Scratch::new("gpu");
    let root = Root::new(&*dir);
    let err = agent::gpu_driver(&root).unwrap_err();
    assert_eq!(
        err,
        format!("the GPU driver: nvidia is not loaded and there is no {DRIVER_CTR_READY}")
    );
    std::fs::create_dir_all(dir.join("sys/module/nvidia")).unwrap();
    assert_eq!(agent::gpu_driver(&root).unwrap(), "nvidia is loaded");
    write(&dir, DRIVER_CTR_READY, "");
    assert!(agent::gpu_driver(&root)
        .unwrap()
        .contains("driver container is ready"));
}

/// The Network Operator's readiness file alone is not enough: the core must export
/// the peer-memory API now (it stays while an openibd restart reloads the stack).
#[test]
fn waits_for_a_core_that_exports_the_peer_memory_api() {
    let dir = Scratch::new("core");
    let root = Root::new(&*dir);
    write(&dir, MOFED_CTR_READY, "");
    write(
        &dir,
        "/proc/kallsyms",
        "ffffffff81000000 T _stext\nffffffffc0a01000 t ib_dealloc_pd\t[ib_core]\n",
    );
    let err = agent::rdma_core(&root).unwrap_err();
    assert!(
        err.contains("no loaded module exports ib_register_peer_memory_client"),
        "{err}"
    );
    write(
        &dir,
        "/proc/kallsyms",
        "ffffffff81000000 T _stext\nffffffffc0a01234 T ib_register_peer_memory_client\t[ib_uverbs]\n",
    );
    let ok = agent::rdma_core(&root).unwrap();
    assert!(
        ok.starts_with(
            "the RDMA peer-memory core is loaded ([ib_uverbs]) and the Network Operator's"
        ),
        "{ok}"
    );
    std::fs::remove_file(dir.join(&MOFED_CTR_READY[1..])).unwrap();
    assert_eq!(
        agent::rdma_core(&root).unwrap(),
        "the RDMA peer-memory core is loaded ([ib_uverbs])"
    );
}

/// Another client, or our name from other sources, refuses the start; our own module
/// from an earlier run of the container is adopted.
#[test]
fn refuses_beside_another_peer_memory_client() {
    let dir = Scratch::new("conflict");
    let root = Root::new(&*dir);
    assert_eq!(agent::conflict(&root, &ours()), None);
    loaded(&dir, "nvidia_peermem", "0123456789ABCDEF0123456", "0.1.0");
    assert_eq!(
        agent::conflict(&root, &ours()),
        None,
        "our own, loaded before"
    );
    loaded(
        &dir,
        "nvidia_peermem",
        "FEDCBA9876543210FEDCBA9",
        "580.95.05",
    );
    let why = agent::conflict(&root, &ours()).unwrap();
    assert!(
        why.starts_with("the host already has nvidia_peermem loaded (version 580.95.05, srcversion FEDCBA9876543210FEDCBA9), not this container's module: two peer-memory clients cannot run together."),
        "{why}"
    );
    std::fs::remove_dir_all(dir.join("sys/module/nvidia_peermem")).unwrap();
    loaded(&dir, "peermem", "0123456789ABCDEF0123456", "0.1.0");
    let why = agent::conflict(&root, &ours()).unwrap();
    assert!(why.contains("systemctl disable --now peermem"), "{why}");
    std::fs::remove_dir_all(dir.join("sys/module/peermem")).unwrap();
    std::fs::create_dir_all(dir.join("sys/module/nv_peer_mem")).unwrap();
    let why = agent::conflict(&root, &ours()).unwrap();
    assert!(
        why.starts_with("the host already has nv_peer_mem loaded (version unknown"),
        "{why}"
    );
}

#[test]
fn the_probe_wants_a_live_module() {
    let dir = Scratch::new("probe");
    let root = Root::new(&*dir);
    assert_eq!(
        agent::probe(&root, "nvidia_peermem").unwrap_err(),
        "nvidia_peermem is not loaded"
    );
    write(&dir, "/sys/module/nvidia_peermem/initstate", "coming\n");
    assert_eq!(
        agent::probe(&root, "nvidia_peermem").unwrap_err(),
        "nvidia_peermem is coming, not live"
    );
    loaded(&dir, "nvidia_peermem", "0123456789ABCDEF0123456", "0.1.0");
    write(&dir, "/sys/module/nvidia_peermem/refcnt", "2\n");
    assert_eq!(
        agent::probe(&root, "nvidia_peermem").unwrap(),
        "nvidia_peermem is loaded and registered with the peer-memory core (references: 2)"
    );
    assert_eq!(agent::live_registrations(&root, "nvidia_peermem"), Some(2));
    // The command: exit 0 ready, 1 not.
    let out = peermem(&["agent", "probe", "--root", arg(&dir)]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = peermem(&["agent", "probe", "--module", "peermem", "--root", arg(&dir)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "not ready: peermem is not loaded\n"
    );
}

/// `agent run` with a module file that is not one, or beside another client: exit 3,
/// the reason in its log, nothing loaded.
#[test]
fn run_refuses_to_start() {
    let dir = Scratch::new("run");
    write(&dir, "/image/nvidia-peermem.ko", "not a module");
    let file = dir.join("image/nvidia-peermem.ko");
    let run = || {
        peermem(&[
            "agent",
            "run",
            "--module-file",
            arg(&file),
            "--root",
            arg(&dir),
        ])
    };
    let out = run();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refusing to start:"),
        "{out:?}"
    );
    std::fs::write(
        &file,
        module_with_modinfo(&["srcversion=0123456789ABCDEF0123456", "name=nvidia_peermem"]),
    )
    .unwrap();
    loaded(&dir, "peermem", "AAAA", "0.0.9");
    let out = run();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("refusing to start: the host already has peermem loaded (version 0.0.9"),
        "{log}"
    );
}

/// GET over a fresh connection: (status line, body).
fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.lines().next().unwrap_or_default().to_owned();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// /metrics: the module's counters and the agent's own (load failures, a foreign
/// module); /healthz: ready only for this container's module, with the last load's
/// failure while it is not loaded.
#[test]
fn serves_metrics_and_health() {
    let dir = Scratch::new("metrics");
    let health = std::sync::Arc::new(std::sync::Mutex::new(agent::Health::default()));
    let addr = agent::serve(Root::new(&*dir), ours(), health.clone(), "127.0.0.1:0").unwrap();
    let (status, body) = get(addr, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.lines().any(|l| l == "peermem_up 0"), "{body}");
    assert!(
        body.lines()
            .any(|l| l == "peermem_agent_load_failures_total 0"),
        "{body}"
    );
    assert!(
        body.lines().any(|l| l == "peermem_agent_foreign_module 0"),
        "{body}"
    );
    let (status, body) = get(addr, "/healthz");
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert_eq!(body, "nvidia_peermem is not loaded\n");
    {
        let mut h = health.lock().unwrap();
        h.load_failures = 3;
        h.load_error = Some("the module was built for another kernel".to_owned());
    }
    let (_, body) = get(addr, "/healthz");
    assert_eq!(
        body,
        "nvidia_peermem is not loaded: the module was built for another kernel\n"
    );
    let (_, body) = get(addr, "/metrics");
    assert!(
        body.lines()
            .any(|l| l == "peermem_agent_load_failures_total 3"),
        "{body}"
    );
    loaded(&dir, "nvidia_peermem", "0123456789ABCDEF0123456", "0.1.0");
    let (status, _) = get(addr, "/healthz");
    assert_eq!(status, "HTTP/1.1 200 OK");
    // Another build's module of that name: not ready, whatever its state.
    loaded(
        &dir,
        "nvidia_peermem",
        "FEDCBA9876543210FEDCBA9",
        "580.95.05",
    );
    let (status, body) = get(addr, "/healthz");
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert!(body.starts_with("the host's nvidia_peermem (version 580.95.05, srcversion FEDCBA9876543210FEDCBA9) is not this container's module"), "{body}");
    let (status, _) = get(addr, "/other");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

/// Whose module of its name is loaded: this container's only with its file's
/// srcversion; a poll reads another build's as foreign (never adopted: not Loaded),
/// and the watch neither loads nor holds while it is there, and loads once it is gone.
#[test]
fn a_module_of_another_build_is_never_adopted() {
    let dir = Scratch::new("owner");
    let root = Root::new(&*dir);
    assert_eq!(agent::owner(&root, &ours()), agent::Owner::NotLoaded);
    loaded(&dir, "nvidia_peermem", "0123456789ABCDEF0123456", "0.1.0");
    assert_eq!(agent::owner(&root, &ours()), agent::Owner::Ours);
    let mut w = agent::Watch::default();
    let t = std::time::Instant::now();
    let s = Sample::read(&root, &ours(), &w);
    assert!(matches!(s, Sample::Loaded(_)), "{s:?}");
    assert_eq!(w.poll(s, t, RELOAD_AFTER), Poll::Loaded);
    // NVIDIA's loaded in its place (ours unloaded by someone, theirs loaded after).
    loaded(
        &dir,
        "nvidia_peermem",
        "FEDCBA9876543210FEDCBA9",
        "580.95.05",
    );
    let why = match agent::owner(&root, &ours()) {
        agent::Owner::Foreign(why) => why,
        o => panic!("{o:?}"),
    };
    assert_eq!(
        why,
        "the host's nvidia_peermem (version 580.95.05, srcversion FEDCBA9876543210FEDCBA9) is \
         not this container's module (srcversion 0123456789ABCDEF0123456)"
    );
    let s = Sample::read(&root, &ours(), &w);
    assert_eq!(s, Sample::Foreign(why.clone()));
    assert_eq!(w.poll(s, t, RELOAD_AFTER), Poll::Foreign);
    assert_eq!(agent::probe_owned(&root, &ours()).unwrap_err(), why);
    // The probe by name alone (outside the agent's container) still says live.
    assert!(agent::probe(&root, "nvidia_peermem").is_ok());
    // A file without a srcversion owns nothing.
    let anonymous = ModuleFile {
        srcversion: None,
        ..ours()
    };
    assert!(matches!(
        agent::owner(&root, &anonymous),
        agent::Owner::Foreign(_)
    ));
    // Gone: loaded at once (no hold: it was not ours that went away).
    std::fs::remove_dir_all(dir.join("sys/module/nvidia_peermem")).unwrap();
    let s = Sample::read(&root, &ours(), &w);
    assert_eq!(w.poll(s, t, RELOAD_AFTER), Poll::Load);
}

/// `agent probe` and `agent stop` in the agent's container (the file it recorded):
/// a module of another build is not ready and is left loaded by the preStop hook
/// (exit 0, saying so; no rmmod).
#[test]
fn probe_and_stop_go_by_the_owned_module() {
    let dir = Scratch::new("owned");
    let owned = dir.join("owned");
    std::fs::write(&owned, "nvidia_peermem 0123456789ABCDEF0123456\n").unwrap();
    loaded(
        &dir,
        "nvidia_peermem",
        "FEDCBA9876543210FEDCBA9",
        "580.95.05",
    );
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_peermem"))
            .args(args)
            .env("PEERMEM_AGENT_OWNED", &owned)
            .output()
            .unwrap()
    };
    let out = run(&["agent", "probe", "--root", arg(&dir)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(
        "not ready: the host's nvidia_peermem (version 580.95.05, srcversion FEDCBA9876543210FEDCBA9) is not this container's module"
    ), "{out:?}");
    let out = run(&["agent", "stop", "--grace=1", "--root", arg(&dir)]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("leaving it loaded: the host's nvidia_peermem"),
        "{out:?}"
    );
    assert!(dir.join("sys/module/nvidia_peermem").is_dir());
    loaded(&dir, "nvidia_peermem", "0123456789ABCDEF0123456", "0.1.0");
    let out = run(&["agent", "probe", "--root", arg(&dir)]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// A failing load is retried after 1 s, doubling to 5 min; its cause is said once,
/// again only when it changes; a success starts over. insmod's words name the cause.
#[test]
fn a_failing_load_backs_off_and_says_its_cause_once() {
    let mut b = agent::Backoff::default();
    let t = std::time::Instant::now();
    assert!(b.due(t));
    let first = b
        .failed("the module was built for another kernel", t)
        .unwrap();
    assert!(
        first.starts_with(
            "the module was built for another kernel; retrying with a backoff up to 300 s"
        ),
        "{first}"
    );
    assert!(!b.due(t));
    assert!(b.due(t + std::time::Duration::from_secs(1)));
    let mut delays = vec![b.delay().as_secs()];
    for _ in 0..10 {
        assert_eq!(b.failed("the module was built for another kernel", t), None);
        delays.push(b.delay().as_secs());
    }
    assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    assert!(b
        .failed("a symbol the module needs is missing", t)
        .is_some());
    b.reset();
    assert!(b.due(t));
    assert_eq!(
        agent::load_cause("insmod: ERROR: could not insert module x.ko: Invalid module format"),
        "the module was built for another kernel (invalid module format: another release or \
         configuration than this node's)"
    );
    assert!(agent::load_cause(
        "insmod: ERROR: could not insert module x.ko: Unknown symbol in module"
    )
    .starts_with("a symbol the module needs is missing"));
    assert!(agent::load_cause(
        "insmod: ERROR: could not insert module x.ko: Key was rejected by service"
    )
    .starts_with("the kernel refused the module's signature"));
}

// ---- the hold-off after an external unload (agent::Watch) ---------------------------

use agent::{Loads, Poll, Sample};

fn loads(l: &[(&str, u64)]) -> Loads {
    l.iter().map(|(m, i)| (m.to_string(), *i)).collect()
}
fn core_a() -> Loads {
    loads(&[("ib_core", 100), ("nvidia", 7)])
}
fn core_b() -> Loads {
    loads(&[("ib_core", 200), ("nvidia", 7)])
}
fn no_core() -> Loads {
    loads(&[("nvidia", 7)])
}
const RELOAD_AFTER: std::time::Duration = std::time::Duration::from_secs(300);

/// Polls `w` with each sample at `t` plus its seconds, and checks each answer.
fn polls(w: &mut agent::Watch, t: std::time::Instant, steps: Vec<(Sample, u64, Poll)>) {
    for (i, (sample, secs, want)) in steps.into_iter().enumerate() {
        let at = t + std::time::Duration::from_secs(secs);
        assert_eq!(w.poll(sample, at, RELOAD_AFTER), want, "step {i}");
    }
}

/// An openibd restart that ends between two polls: the module went away and the core
/// is a new load already. The agent loads the module at once. (It compared with the
/// providers of the poll that found the module gone, the new core's, and waited 300 s
/// for a reload that had happened: part fleet's "openibd restart" under load.)
#[test]
fn a_restart_between_two_polls_loads_at_once() {
    let mut w = agent::Watch::default();
    polls(
        &mut w,
        std::time::Instant::now(),
        vec![
            (Sample::Loaded(core_a()), 0, Poll::Loaded),
            (Sample::Gone(core_b()), 0, Poll::WentAwayReload),
        ],
    );
}

/// The restart seen step by step: held while the old core is there and while none is,
/// loaded once the new one is.
#[test]
fn held_until_the_core_is_a_new_load() {
    let t = std::time::Instant::now();
    let s = std::time::Duration::from_secs(1);
    let mut w = agent::Watch::default();
    assert_eq!(
        w.poll(Sample::Loaded(core_a()), t, RELOAD_AFTER),
        Poll::Loaded
    );
    assert_eq!(
        w.poll(Sample::Gone(core_a()), t + s, RELOAD_AFTER),
        Poll::WentAway
    );
    assert_eq!(
        w.poll(Sample::Gone(core_a()), t + 2 * s, RELOAD_AFTER),
        Poll::Hold
    );
    assert_eq!(
        w.poll(Sample::Gone(no_core()), t + 3 * s, RELOAD_AFTER),
        Poll::Hold
    );
    assert_eq!(
        w.poll(Sample::Gone(core_b()), t + 4 * s, RELOAD_AFTER),
        Poll::Load
    );
    // Loaded again by the agent, a later unload compares with the new core.
    w.loaded_anew(core_b());
    assert_eq!(
        w.poll(Sample::Gone(core_b()), t + 5 * s, RELOAD_AFTER),
        Poll::WentAway
    );
}

/// Neither provider reloaded: held for reload_after, then loaded.
#[test]
fn held_no_longer_than_reload_after() {
    let t = std::time::Instant::now();
    let mut w = agent::Watch::default();
    assert_eq!(
        w.poll(Sample::Loaded(core_a()), t, RELOAD_AFTER),
        Poll::Loaded
    );
    assert_eq!(
        w.poll(Sample::Gone(core_a()), t, RELOAD_AFTER),
        Poll::WentAway
    );
    assert_eq!(
        w.poll(
            Sample::Gone(core_a()),
            t + RELOAD_AFTER - std::time::Duration::from_secs(1),
            RELOAD_AFTER
        ),
        Poll::Hold
    );
    assert_eq!(
        w.poll(Sample::Gone(core_a()), t + RELOAD_AFTER, RELOAD_AFTER),
        Poll::Load
    );
}

/// At start nothing is held: the module is loaded as soon as the providers are there.
#[test]
fn nothing_held_at_start() {
    let t = std::time::Instant::now();
    let mut w = agent::Watch::default();
    assert_eq!(w.poll(Sample::Gone(no_core()), t, RELOAD_AFTER), Poll::Load);
}

/// A provider seen before and missing from a later loaded poll (read while it was
/// being reloaded) keeps the load seen before; one never seen never counts as
/// reloaded: the unload is held until a provider seen is a new load.
#[test]
fn an_unread_binding_keeps_the_one_seen_before() {
    let t = std::time::Instant::now();
    polls(
        &mut agent::Watch::default(),
        t,
        vec![
            (Sample::Loaded(core_a()), 0, Poll::Loaded),
            (Sample::Loaded(no_core()), 0, Poll::Loaded),
            (Sample::Gone(core_a()), 0, Poll::WentAway),
        ],
    );
    polls(
        &mut agent::Watch::default(),
        t,
        vec![
            (Sample::Loaded(Loads::new()), 0, Poll::Loaded),
            (Sample::Gone(core_b()), 0, Poll::WentAway),
        ],
    );
}

/// The host tree of a loaded nvidia_peermem bound to nvidia and to ib_core (each
/// lists it among its holders), beside a module it is not bound to.
fn bound_host(dir: &Path) {
    loaded(dir, "nvidia_peermem", "0123456789ABCDEF0123456", "0.1.0");
    for m in ["nvidia", "ib_core"] {
        write(dir, &format!("/sys/module/{m}/holders/nvidia_peermem"), "");
    }
    write(dir, "/sys/module/ib_uverbs/holders/rdma_ucm", "");
}

/// What a poll reads while the module is loaded: the modules that list it among their
/// holders (not its file's `depends=`, which a build without the drivers'
/// Module.symvers leaves empty: Debian's own kernel's agent scenario held the reload
/// 300 s), and of those only the loads it is bound to, not a provider loaded anew
/// while the poll reads (an openibd restart that ran between the probe and the read:
/// the new ib_core does not list the module among its holders). Taken for the
/// module's, the new core's load would not count as a reload once the module was
/// found gone, and the agent held off 300 s (part fleet's "openibd restart: the pod is
/// ready again" failed in CI).
#[test]
fn a_poll_reads_the_providers_the_module_is_bound_to() {
    let dir = Scratch::new("bound");
    bound_host(&dir);
    let root = Root::new(&*dir);
    let nvidia = agent::instance(&root, "nvidia").unwrap();
    let core_a = agent::instance(&root, "ib_core").unwrap();
    let mut w = agent::Watch::default();
    let sample = Sample::read(&root, &ours(), &w);
    assert_eq!(
        sample,
        Sample::Loaded(loads(&[("ib_core", core_a), ("nvidia", nvidia)]))
    );
    let t = std::time::Instant::now();
    assert_eq!(w.poll(sample, t, RELOAD_AFTER), Poll::Loaded);

    // The core reloaded under the loaded module (as seen by a slow poll): its new
    // /sys/module directory does not list the module. (The old directory is kept
    // aside so that the new one has another inode, as sysfs gives each load.)
    std::fs::rename(dir.join("sys/module/ib_core"), dir.join("unloaded-ib_core")).unwrap();
    write(&dir, "/sys/module/ib_core/initstate", "live\n");
    let core_b = agent::instance(&root, "ib_core").unwrap();
    assert_ne!(core_a, core_b);
    let sample = Sample::read(&root, &ours(), &w);
    assert_eq!(sample, Sample::Loaded(loads(&[("nvidia", nvidia)])));
    assert_eq!(w.poll(sample, t, RELOAD_AFTER), Poll::Loaded);

    // Then found gone: the core is a new load, loaded again at once.
    std::fs::remove_dir_all(dir.join("sys/module/nvidia_peermem")).unwrap();
    let sample = Sample::read(&root, &ours(), &w);
    assert_eq!(
        sample,
        Sample::Gone(loads(&[("ib_core", core_b), ("nvidia", nvidia)]))
    );
    assert_eq!(w.poll(sample, t, RELOAD_AFTER), Poll::WentAwayReload);
}
