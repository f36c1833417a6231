// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `peermem status --prometheus`: the node_exporter textfile-collector rendering of
//! peermem's debugfs counters and the peer-memory core's client counters.

mod common;

use std::path::Path;

use common::{arg, fixture, peermem, write, Scratch};
use peermem_tool::status::{self, CoreClient};
use peermem_tool::Root;

fn render(dir: &Path) -> String {
    let root = Root::new(dir);
    let s = status::read(&root).unwrap();
    status::render_prometheus(&s, status::loaded_module(&root), &status::read_core(&root))
}

/// Asserts that fixture `case` renders as `want`, which `validate` takes for `samples`
/// samples.
#[track_caller]
fn assert_renders(case: &str, samples: usize, want: &str) {
    let text = render(&fixture(case));
    assert_eq!(text, want);
    assert_eq!(validate(&text), samples);
}

/// Whether `name` is a valid metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn metric_name(name: &str) -> bool {
    let mut c = name.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

/// Checks `text` line by line against the Prometheus text format: `# HELP name text`
/// and `# TYPE name counter|gauge|untyped` once per metric, both before its samples;
/// samples `name{label="value",...} value`, label names `[a-zA-Z_][a-zA-Z0-9_]*`; a
/// counter's name ends in `_total`; a metric's samples are together; the text ends with
/// a newline. Returns the number of samples.
fn validate(text: &str) -> usize {
    use std::collections::HashMap;
    assert!(text.is_empty() || text.ends_with('\n'), "no final newline");
    let mut help: HashMap<&str, usize> = HashMap::new();
    let mut kind: HashMap<&str, &str> = HashMap::new();
    let mut done: Vec<&str> = Vec::new();
    let mut current: Option<&str> = None;
    let mut samples = 0;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, doc) = rest.split_once(' ').expect("HELP has text");
            assert!(metric_name(name), "line {n}: bad name {name}");
            assert!(!doc.trim().is_empty(), "line {n}: empty HELP");
            assert!(
                help.insert(name, n).is_none(),
                "line {n}: second HELP for {name}"
            );
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, k) = rest.split_once(' ').expect("TYPE has a type");
            assert!(metric_name(name), "line {n}: bad name {name}");
            assert!(
                ["counter", "gauge", "untyped"].contains(&k),
                "line {n}: type {k}"
            );
            assert!(help.contains_key(name), "line {n}: TYPE before HELP");
            assert!(
                kind.insert(name, k).is_none(),
                "line {n}: second TYPE for {name}"
            );
            if k == "counter" {
                assert!(name.ends_with("_total"), "line {n}: counter {name}");
            }
            continue;
        }
        assert!(!line.starts_with('#'), "line {n}: stray comment {line}");
        let (series, value) = line.rsplit_once(' ').expect("sample has a value");
        value
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("line {n}: value {value}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').expect("labels close")),
            None => (series, ""),
        };
        assert!(metric_name(name), "line {n}: bad name {name}");
        assert!(help.contains_key(name), "line {n}: {name} has no HELP");
        assert!(kind.contains_key(name), "line {n}: {name} has no TYPE");
        if current != Some(name) {
            assert!(
                !done.contains(&name),
                "line {n}: {name}'s samples are split"
            );
            if let Some(c) = current {
                done.push(c);
            }
            current = Some(name);
        }
        if !labels.is_empty() {
            for pair in labels.split("\",") {
                let (l, v) = pair.split_once("=\"").expect("label=\"value\"");
                assert!(
                    metric_name(l) && !l.contains(':'),
                    "line {n}: label name {l}"
                );
                assert!(!v.trim_end_matches('"').contains('"') || v.contains("\\\""));
            }
        }
        samples += 1;
    }
    samples
}

/// status-empty: the module just loaded (every counter 0, as its debugfs `stats`
/// prints them in its order, sg_lists_now included); `peermem_up 1` first; no
/// /sys/module in the tree, so no module label.
#[test]
fn a_fresh_module_renders_every_counter() {
    assert_renders(
        "status-empty",
        18,
        "\
# HELP peermem_up Whether peermem's debugfs counters could be read (1), or not (0: the module is not loaded, debugfs is not mounted, or its files cannot be read; peermem status says why on stderr)
# TYPE peermem_up gauge
peermem_up 1
# HELP peermem_registrations_total Registrations of GPU memory peermem claimed
# TYPE peermem_registrations_total counter
peermem_registrations_total 0
# HELP peermem_releases_total Registrations released
# TYPE peermem_releases_total counter
peermem_releases_total 0
# HELP peermem_pins_total GPU pins made (one nvidia.ko pin each)
# TYPE peermem_pins_total counter
peermem_pins_total 0
# HELP peermem_pin_reuses_total Registrations served by an existing pin
# TYPE peermem_pin_reuses_total counter
peermem_pin_reuses_total 0
# HELP peermem_invalidations_total Invalidations delivered to the peer-memory core
# TYPE peermem_invalidations_total counter
peermem_invalidations_total 0
# HELP peermem_free_callbacks_total Free callbacks received from nvidia.ko
# TYPE peermem_free_callbacks_total counter
peermem_free_callbacks_total 0
# HELP peermem_pins_now GPU pins alive now
# TYPE peermem_pins_now gauge
peermem_pins_now 0
# HELP peermem_sg_lists_now SG lists built by dma_map and not yet freed
# TYPE peermem_sg_lists_now gauge
peermem_sg_lists_now 0
# HELP peermem_bytes_pinned_now Bytes of GPU memory pinned now
# TYPE peermem_bytes_pinned_now gauge
peermem_bytes_pinned_now 0
# HELP peermem_bytes_pinned_peak Most bytes of GPU memory pinned at once
# TYPE peermem_bytes_pinned_peak gauge
peermem_bytes_pinned_peak 0
# HELP peermem_refused_bad_range_total Registrations refused: zero length or an overflowing range
# TYPE peermem_refused_bad_range_total counter
peermem_refused_bad_range_total 0
# HELP peermem_refused_bar1_exhausted_total Registrations refused: GPU BAR1 space exhausted (ENOMEM)
# TYPE peermem_refused_bar1_exhausted_total counter
peermem_refused_bar1_exhausted_total 0
# HELP peermem_refused_pin_failed_total Registrations refused: nvidia.ko refused to pin the memory
# TYPE peermem_refused_pin_failed_total counter
peermem_refused_pin_failed_total 0
# HELP peermem_refused_not_pci_total Registrations refused: the RDMA device is not a PCI function
# TYPE peermem_refused_not_pci_total counter
peermem_refused_not_pci_total 0
# HELP peermem_refused_dma_map_failed_total Registrations refused: nvidia.ko could not map the GPU pages for the RDMA device
# TYPE peermem_refused_dma_map_failed_total counter
peermem_refused_dma_map_failed_total 0
# HELP peermem_refused_freed_total Registrations refused: the GPU memory was freed during registration
# TYPE peermem_refused_freed_total counter
peermem_refused_freed_total 0
# HELP peermem_refused_no_memory_total Registrations refused: out of memory for peermem's bookkeeping
# TYPE peermem_refused_no_memory_total counter
peermem_refused_no_memory_total 0
",
    );
}

/// status-unknown-counter: a newer module's `stats` with counters this tool does not
/// know (future_counter, refused_new_reason): exported untyped, under their own names.
#[test]
fn unknown_counters_are_untyped() {
    assert_renders(
        "status-unknown-counter",
        7,
        "\
# HELP peermem_up Whether peermem's debugfs counters could be read (1), or not (0: the module is not loaded, debugfs is not mounted, or its files cannot be read; peermem status says why on stderr)
# TYPE peermem_up gauge
peermem_up 1
# HELP peermem_registrations_total Registrations of GPU memory peermem claimed
# TYPE peermem_registrations_total counter
peermem_registrations_total 5
# HELP peermem_pins_total GPU pins made (one nvidia.ko pin each)
# TYPE peermem_pins_total counter
peermem_pins_total 4
# HELP peermem_bytes_pinned_now Bytes of GPU memory pinned now
# TYPE peermem_bytes_pinned_now gauge
peermem_bytes_pinned_now 0
# HELP peermem_refused_bar1_exhausted_total Registrations refused: GPU BAR1 space exhausted (ENOMEM)
# TYPE peermem_refused_bar1_exhausted_total counter
peermem_refused_bar1_exhausted_total 2
# HELP peermem_future_counter peermem debugfs counter future_counter (not known to this peermem tool)
# TYPE peermem_future_counter untyped
peermem_future_counter 17
# HELP peermem_refused_new_reason peermem debugfs counter refused_new_reason (not known to this peermem tool)
# TYPE peermem_refused_new_reason untyped
peermem_refused_new_reason 1
",
    );
}

/// healthy-h100: the drop-in loaded (/sys/module/nvidia_peermem), two live pins; the
/// samples carry {module="nvidia_peermem"}.
#[test]
fn samples_name_the_loaded_module() {
    let text = render(&fixture("healthy-h100"));
    assert!(text.contains(
        "# TYPE peermem_bytes_pinned_now gauge\npeermem_bytes_pinned_now{module=\"nvidia_peermem\"} 3145728\n"
    ));
    assert!(text.contains("\npeermem_registrations_total{module=\"nvidia_peermem\"} 3\n"));
    assert!(text.contains("\n# TYPE peermem_up gauge\npeermem_up{module=\"nvidia_peermem\"} 1\n"));
    assert_eq!(validate(&text), 1 + 16);
    assert!(!text.contains("peermem_core_"));
}

/// An older MOFED core (before 24.04) shows /sys/kernel/mm/memory_peers/<client>/:
/// `version` and the counters of its `ib_peer_memory_statistics` (num_alloc_mrs,
/// num_dealloc_mrs, num_reg_pages, num_dereg_pages, num_reg_bytes, num_dereg_bytes,
/// num_free_callbacks; docs/abi.md 2.3). peermem's drop-in registers nv_mem and
/// nv_mem_nc with its own version; the figures match healthy-h100's stats (3
/// registrations of 1, 2 and 1 MiB, one released; one SG entry each, and
/// num_dereg_pages reads 0 as the core counts it).
#[test]
fn the_cores_client_counters_are_labelled_by_client() {
    let dir = Scratch::copy_of("healthy-h100", "core-clients");
    for (client, values) in [
        ("nv_mem", [3u64, 1, 3, 0, 4194304, 1048576, 0]),
        ("nv_mem_nc", [0, 0, 0, 0, 0, 0, 0]),
    ] {
        let d = format!("/sys/kernel/mm/memory_peers/{client}");
        write(&dir, &format!("{d}/version"), "0.1.0\n");
        for ((file, _), v) in status::CORE_COUNTERS.iter().zip(values) {
            write(&dir, &format!("{d}/{file}"), format!("{v}\n"));
        }
    }
    let root = Root::new(&*dir);
    let core = status::read_core(&root);
    assert_eq!(
        core[0],
        CoreClient {
            name: "nv_mem".to_owned(),
            version: Some("0.1.0".to_owned()),
            counters: vec![
                ("num_alloc_mrs", 3),
                ("num_dealloc_mrs", 1),
                ("num_reg_pages", 3),
                ("num_dereg_pages", 0),
                ("num_reg_bytes", 4194304),
                ("num_dereg_bytes", 1048576),
                ("num_free_callbacks", 0),
            ],
        }
    );
    let text = render(&dir);
    // The binary prints the same.
    let out = peermem(&["status", "--prometheus", "--root", arg(&dir)]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), text);
    let core_part = &text[text.find("# HELP peermem_core_").unwrap()..];
    assert_eq!(
        core_part,
        "\
# HELP peermem_core_client_info A client registered with the peer-memory core (/sys/kernel/mm/memory_peers), with its version
# TYPE peermem_core_client_info gauge
peermem_core_client_info{client=\"nv_mem\",version=\"0.1.0\"} 1
peermem_core_client_info{client=\"nv_mem_nc\",version=\"0.1.0\"} 1
# HELP peermem_core_alloc_mrs_total Regions the peer-memory core mapped through this client
# TYPE peermem_core_alloc_mrs_total counter
peermem_core_alloc_mrs_total{client=\"nv_mem\"} 3
peermem_core_alloc_mrs_total{client=\"nv_mem_nc\"} 0
# HELP peermem_core_dealloc_mrs_total Mapped regions the peer-memory core unmapped or invalidated
# TYPE peermem_core_dealloc_mrs_total counter
peermem_core_dealloc_mrs_total{client=\"nv_mem\"} 1
peermem_core_dealloc_mrs_total{client=\"nv_mem_nc\"} 0
# HELP peermem_core_reg_pages_total SG table entries of the regions the core mapped
# TYPE peermem_core_reg_pages_total counter
peermem_core_reg_pages_total{client=\"nv_mem\"} 3
peermem_core_reg_pages_total{client=\"nv_mem_nc\"} 0
# HELP peermem_core_dereg_pages_total SG table entries the core counted at unmapping
# TYPE peermem_core_dereg_pages_total counter
peermem_core_dereg_pages_total{client=\"nv_mem\"} 0
peermem_core_dereg_pages_total{client=\"nv_mem_nc\"} 0
# HELP peermem_core_reg_bytes_total Bytes of the regions the core mapped
# TYPE peermem_core_reg_bytes_total counter
peermem_core_reg_bytes_total{client=\"nv_mem\"} 4194304
peermem_core_reg_bytes_total{client=\"nv_mem_nc\"} 0
# HELP peermem_core_dereg_bytes_total Bytes of the regions the core unmapped
# TYPE peermem_core_dereg_bytes_total counter
peermem_core_dereg_bytes_total{client=\"nv_mem\"} 1048576
peermem_core_dereg_bytes_total{client=\"nv_mem_nc\"} 0
# HELP peermem_core_free_callbacks_total Invalidations the client asked the core for
# TYPE peermem_core_free_callbacks_total counter
peermem_core_free_callbacks_total{client=\"nv_mem\"} 0
peermem_core_free_callbacks_total{client=\"nv_mem_nc\"} 0
"
    );
    assert_eq!(validate(&text), 1 + 16 + 2 + 14);
}

#[test]
fn the_validator_rejects_what_prometheus_rejects() {
    let bad = [
        "peermem_x 1\n",                                           // no HELP/TYPE
        "# HELP 1x h\n# TYPE 1x gauge\n1x 1\n",                    // bad name
        "# HELP a_total h\n# TYPE a_total counter\na_total one\n", // bad value
        "# HELP a h\n# TYPE a counter\na 1\n",                     // counter without _total
        "# TYPE a gauge\n# HELP a h\na 1\n",                       // TYPE before HELP
        "# HELP a h\n# TYPE a gauge\n# HELP b h\n# TYPE b gauge\na 1\nb 1\na 2\n", // split
    ];
    for text in bad {
        let r = std::panic::catch_unwind(|| validate(text));
        assert!(r.is_err(), "accepted: {text}");
    }
    assert_eq!(
        validate("# HELP a h\n# TYPE a gauge\na{l=\"v\"} 1\na{l=\"w\"} 2\n"),
        2
    );
}

#[test]
fn prometheus_and_json_exclude_each_other() {
    let out = peermem(&[
        "status",
        "--prometheus",
        "--json",
        "--root",
        arg(&fixture("status-empty")),
    ]);
    assert_eq!(out.status.code(), Some(64));
}

/// status-not-loaded: a host where debugfs is mounted (other entries there) and
/// nvidia.ko and ib_core are loaded, but no peermem module. A textfile collector
/// still gets exposition text, `peermem_up 0`, and exit 0 (a cron job's `&& mv`
/// goes ahead); the reason is one line on stderr.
#[test]
fn a_host_without_the_module_exports_peermem_up_0() {
    let out = peermem(&[
        "status",
        "--prometheus",
        "--root",
        arg(&fixture("status-not-loaded")),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(validate(&stdout), 1, "{stdout}");
    assert!(
        stdout.contains("\n# TYPE peermem_up gauge\npeermem_up 0\n"),
        "{stdout}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("peermem: "), "{stderr}");
    assert!(stderr.contains("not loaded"), "{stderr}");
}

/// The other ways the counters cannot be read give `peermem_up 0` too, labelled with
/// the module where /sys/module shows it: debugfs not mounted (status-no-debugfs,
/// peermem loaded), a file only root may read (injected through the root; the binary
/// as a user other than root is tests/status.rs's), a file missing. The peer-memory
/// core's clients are still exported. A file that does not parse still fails (exit 1,
/// no metrics).
#[test]
fn unreadable_counters_are_peermem_up_0_too() {
    let out = peermem(&[
        "status",
        "--prometheus",
        "--root",
        arg(&fixture("status-no-debugfs")),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(validate(&stdout), 1, "{stdout}");
    assert!(
        stdout.ends_with("\n# TYPE peermem_up gauge\npeermem_up{module=\"peermem\"} 0\n"),
        "{stdout}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("debugfs is not mounted"), "{stderr}");

    let denied = Root::new(fixture("healthy-dev-vm")).deny("/sys/kernel/debug");
    let e = status::read(&denied).unwrap_err();
    assert!(status::prometheus_down(&e), "{e}");

    let dir = Scratch::copy_of("status-empty", "no-pins");
    std::fs::remove_file(dir.join("sys/kernel/debug/peermem/pins")).unwrap();
    write(&dir, "/sys/kernel/mm/memory_peers/nv_mem/version", "2.0\n");
    write(
        &dir,
        "/sys/kernel/mm/memory_peers/nv_mem/num_alloc_mrs",
        "4\n",
    );
    let out = peermem(&["status", "--prometheus", "--root", arg(&dir)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(validate(&stdout), 3, "{stdout}");
    assert!(stdout.contains("\npeermem_up 0\n"), "{stdout}");
    assert!(
        stdout.contains("\npeermem_core_client_info{client=\"nv_mem\",version=\"2.0\"} 1\n"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("\npeermem_core_alloc_mrs_total{client=\"nv_mem\"} 4\n"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));

    let out = peermem(&[
        "status",
        "--prometheus",
        "--root",
        arg(&fixture("status-bad-pins")),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}

/// `--textfile-dir DIR` writes what standard output would carry into DIR/peermem.prom
/// (made where missing), replacing an older file whole and leaving no temporary file;
/// also with the module gone (`peermem_up 0`). A directory that cannot be written is
/// exit 1 with the path named. peermem-metrics.service runs this.
#[test]
fn textfile_dir_gets_the_metrics_atomically() {
    let scratch = Scratch::new("textfile");
    let dir = scratch.join("node-exporter");
    for case in ["status-empty", "status-not-loaded"] {
        let want = peermem(&["status", "--prometheus", "--root", arg(&fixture(case))]);
        write(&scratch, "/node-exporter/peermem.prom", "stale\n");
        let out = peermem(&[
            "status",
            "--prometheus",
            "--root",
            arg(&fixture(case)),
            "--textfile-dir",
            arg(&dir),
        ]);
        assert_eq!(out.status.code(), Some(0), "{case}: {out:?}");
        assert!(out.stdout.is_empty(), "{case}: {out:?}");
        let got = std::fs::read(dir.join("peermem.prom")).unwrap();
        assert_eq!(got, want.stdout, "{case}");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["peermem.prom"], "{case}");
    }
    // A file where the directory should be: nothing can be written there.
    write(&scratch, "/blocked", "a file\n");
    let out = peermem(&[
        "status",
        "--prometheus",
        "--root",
        arg(&fixture("status-empty")),
        "--textfile-dir",
        arg(&scratch.join("blocked")),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("blocked/peermem.prom"), "{stderr}");
    // Without --prometheus it is bad usage.
    let out = peermem(&["status", "--textfile-dir", arg(&dir)]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
}
