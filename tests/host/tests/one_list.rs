// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The supported kernel releases are one list, `SUPPORTED_KERNELS`, and every release
//! difference lives in `src/compat.rs` (and Kbuild, which sets its cfg).

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The releases of `SUPPORTED_KERNELS`, in order.
fn supported() -> Vec<String> {
    read("SUPPORTED_KERNELS")
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The list as a sentence writes it: "7.0 and 7.3" (three: "7.0, 7.1 and 7.3").
fn spoken(list: &[String]) -> String {
    match list {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[test]
fn the_list_is_releases_oldest_first() {
    let list = supported();
    assert!(!list.is_empty(), "SUPPORTED_KERNELS lists no release");
    let parsed: Vec<(u32, u32)> = list
        .iter()
        .map(|r| {
            let (a, b) = r
                .split_once('.')
                .unwrap_or_else(|| panic!("{r}: not VERSION.PATCHLEVEL"));
            (a.parse().expect("VERSION"), b.parse().expect("PATCHLEVEL"))
        })
        .collect();
    assert!(
        parsed.windows(2).all(|w| w[0] < w[1]),
        "not oldest first: {list:?}"
    );
}

#[test]
fn readme_states_the_list() {
    let readme = read("README.md");
    let section = readme
        .split("\n## Supported kernels\n")
        .nth(1)
        .expect("README.md has a \"## Supported kernels\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let want = format!("Linux **{}**", spoken(&supported()));
    assert!(
        section.contains(&want),
        "README.md's \"Supported kernels\" does not say {want:?}"
    );
}

#[test]
fn kbuild_reads_the_list() {
    let kbuild = read("Kbuild");
    assert!(
        kbuild.contains("$(src)/SUPPORTED_KERNELS"),
        "Kbuild does not read SUPPORTED_KERNELS"
    );
}

#[test]
fn the_test_bed_builds_only_supported_releases() {
    let env = read("scripts/kernel-env");
    let line = env
        .lines()
        .find(|l| l.starts_with("PEERMEM_KERNEL_RELEASES=("))
        .expect("scripts/kernel-env sets PEERMEM_KERNEL_RELEASES");
    let list = supported();
    let inner = line
        .trim_start_matches("PEERMEM_KERNEL_RELEASES=(")
        .trim_end_matches(')');
    for rel in inner.split_whitespace() {
        assert!(
            list.iter().any(|s| s == rel),
            "the test bed builds {rel}, not in SUPPORTED_KERNELS"
        );
    }
    // The oldest supported release is the one the hosts run: the test bed builds it.
    assert!(
        inner.split_whitespace().any(|r| r == list[0]),
        "the test bed does not build {}",
        list[0]
    );
}

/// Every file of the module's source under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).expect("src/ is readable") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p
            .extension()
            .is_some_and(|x| x == "rs" || x == "c" || x == "h")
        {
            out.push(p);
        }
    }
}

#[test]
fn no_version_test_outside_compat() {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    sources(&root().join("include"), &mut files);
    assert!(files.len() > 10, "found only {} source files", files.len());
    let tests = ["peermem_kernel_", "LINUX_VERSION_CODE", "KERNEL_VERSION("];
    for f in files.iter().filter(|f| !f.ends_with("src/compat.rs")) {
        let text = fs::read_to_string(f).expect("a source file is readable");
        for t in tests {
            assert!(
                !text.contains(t),
                "{}: a kernel version test ({t}) outside src/compat.rs",
                f.display()
            );
        }
    }
}
