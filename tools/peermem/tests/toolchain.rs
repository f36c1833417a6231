// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The `toolchain` check searching for the kernel's compilers as on a live host: stub
//! tools in scratch directories, and the kernel configurations of
//! scripts/kernel-toolchain's own tests (tests/toolchain/*.config), so that the two
//! follow the same rules.

mod common;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use common::Scratch;
use peermem_tool::doctor::{self, Check, Config, Verdict};

/// scripts/kernel-toolchain's test configuration `name`.
fn config(name: &str) -> Config {
    let path = format!(
        "{}/../../tests/toolchain/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    Config {
        text: std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        path,
    }
}

/// A fresh scratch directory with a `bin` directory in it, and that `bin`.
fn scratch(name: &str) -> (Scratch, PathBuf) {
    let dir = Scratch::new(name);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    (dir, bin)
}

/// The `toolchain` check of `cfg` searching `bin`, asserting its verdict.
#[track_caller]
fn toolchain(cfg: &Config, bin: &Path, want: Verdict) -> Check {
    let c = doctor::toolchain_in(cfg, vec![bin.to_owned()]);
    assert_eq!(c.verdict, want, "{c:?}");
    c
}

/// An executable script at `path` that prints `version` for `--version`.
fn tool(path: &Path, version: &str) {
    script(path, version, None);
}

/// A gcc at `path` that prints `version` for `--version` and `dump` for
/// `-dumpversion`.
fn gcc(path: &Path, version: &str, dump: &str) {
    script(path, version, Some(dump));
}

/// An executable script at `path` that prints `version` for `--version` (and
/// `-dumpversion`, as gcc does, when `dump` is given).
fn script(path: &Path, version: &str, dump: Option<&str>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let dump = dump.map_or(String::new(), |d| {
        format!("[ \"$1\" = -dumpversion ] && {{ echo '{d}'; exit 0; }}\n")
    });
    std::fs::write(
        path,
        format!("#!/bin/sh\n{dump}[ \"$1\" = --version ] && echo '{version}'\nexit 0\n"),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// LLVM 19 in `bin`: `clang{suffix}` printing `clang`, and `ld.lld{suffix}` and
/// LLVM's other tools (`llvm-ar{suffix}`, ...) printing their versions as `vendor`'s
/// build does ("Debian " for Debian's, "" for LLVM's own).
fn llvm_19(bin: &Path, suffix: &str, clang: &str, vendor: &str) {
    tool(&bin.join(format!("clang{suffix}")), clang);
    tool(
        &bin.join(format!("ld.lld{suffix}")),
        &format!("{vendor}LLD 19.1.7 (compatible with GNU linkers)"),
    );
    for t in [
        "llvm-ar",
        "llvm-nm",
        "llvm-objcopy",
        "llvm-objdump",
        "llvm-readelf",
        "llvm-strip",
    ] {
        tool(
            &bin.join(format!("{t}{suffix}")),
            &format!("{vendor}LLVM version 19.1.7"),
        );
    }
}

/// A rustup with the toolchains `(name, rustc --version)` under `dir/toolchains`,
/// and its `rustc` proxy beside it in `bin`.
fn rustup(dir: &Path, toolchains: &[(&str, &str)]) {
    let bin = dir.join("bin");
    let mut list = String::new();
    for (name, version) in toolchains {
        tool(&dir.join(format!("toolchains/{name}/bin/rustc")), version);
        list.push_str(name);
        list.push('\n');
    }
    std::fs::write(dir.join("list"), list).unwrap();
    std::fs::write(
        bin.join("rustup"),
        format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             toolchain) cat '{list}' ;;\n\
             which) echo '{tc}'/\"$3\"/bin/rustc ;;\n\
             --version) echo 'rustup 1.28.2 (e4f3ad6f8 2025-04-28)' ;;\n\
             esac\n",
            list = dir.join("list").display(),
            tc = dir.join("toolchains").display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(bin.join("rustup"), std::fs::Permissions::from_mode(0o755)).unwrap();
    symlink("rustup", bin.join("rustc")).unwrap();
}

/// The dev kernel (Debian clang 19, rustc-web 1.96) on a host with only Debian's
/// versioned LLVM names and rustup: clang-19 is the kernel's clang; rustup's 1.96.0
/// is another build than the kernel's (built from a source tarball), and the rustc
/// proxy is never taken; Debian's rustc-1.96 prints the kernel's text.
#[test]
fn versioned_names_rustup_and_debian_rustc() {
    let (dir, bin) = scratch("versioned");
    // Debian 12's versioned LLVM 19 packages: clang-19, lld-19, llvm-19.
    llvm_19(
        &bin,
        "-19",
        "Debian clang version 19.1.7 (3~deb12u1)",
        "Debian ",
    );
    rustup(
        &dir,
        &[
            (
                "stable-x86_64-unknown-linux-gnu",
                "rustc 1.95.0 (59807616e 2026-04-14)",
            ),
            (
                "1.96.0-x86_64-unknown-linux-gnu",
                "rustc 1.96.0 (ac68faa20 2026-05-25)",
            ),
        ],
    );
    let cfg = config("clang19-rustc196.config");
    let c = toolchain(&cfg, &bin, Verdict::Warn);
    assert!(!c.detail.contains("clang"), "{c:?}");
    assert!(
        c.detail.contains(
            "missing rustc 1.96.0, the kernel's build: rustc 1.96.0 (ac68faa20 2026-05-25) \
             (built from a source tarball) (the distribution's rustc 1.96.0 package"
        ),
        "{c:?}"
    );
    let toolchains = dir.join("toolchains");
    assert!(
        c.detail.contains(&format!(
            "{}/1.96.0-x86_64-unknown-linux-gnu/bin/rustc: rustc 1.96.0 (ac68faa20 2026-05-25)",
            toolchains.display()
        )),
        "{c:?}"
    );
    assert!(
        !c.detail.contains(&format!("{}/rustc:", bin.display())),
        "{c:?}"
    );
    tool(
        &bin.join("rustc-1.96"),
        "rustc 1.96.0 (ac68faa20 2026-05-25) (built from a source tarball)",
    );
    let c = toolchain(&cfg, &bin, Verdict::Ok);
    assert!(
        c.detail.ends_with(&format!(
            "({}/rustc-1.96), {}/clang-19",
            bin.display(),
            bin.display()
        )),
        "{c:?}"
    );
    // Without ld.lld-19 the linker is missing, as kernel-toolchain says.
    std::fs::remove_file(bin.join("ld.lld-19")).unwrap();
    let c = toolchain(&cfg, &bin, Verdict::Warn);
    assert!(
        c.detail
            .contains("missing ld.lld 19 (Debian package lld-19)"),
        "{c:?}"
    );
}

/// An unversioned clang counts only with the kernel's major version, and then LLVM's
/// other tools are looked for without a suffix.
#[test]
fn unversioned_clang_must_have_the_kernels_major() {
    let (_dir, bin) = scratch("unversioned");
    tool(
        &bin.join("clang"),
        "Debian clang version 16.0.6 (15~deb12u1)",
    );
    tool(
        &bin.join("rustc"),
        "rustc 1.96.0 (ac68faa20 2026-05-25) (built from a source tarball)",
    );
    let cfg = config("clang19-rustc196.config");
    let c = toolchain(&cfg, &bin, Verdict::Warn);
    assert!(
        c.detail.contains(
            "missing clang 19 (Debian package clang-19; found: Debian clang version 16.0.6"
        ),
        "{c:?}"
    );
    llvm_19(&bin, "", "clang version 19.1.7", "");
    let c = toolchain(&cfg, &bin, Verdict::Ok);
    assert!(
        c.detail.ends_with(&format!("{}/clang", bin.display())),
        "{c:?}"
    );
}

/// A GCC-built kernel whose rustc is rustup's 1.96.0: gcc-12 or a gcc whose
/// -dumpversion is 12, and the rustup toolchain that prints the kernel's text.
#[test]
fn gcc_and_a_rustup_toolchain() {
    let (dir, bin) = scratch("gcc12");
    gcc(
        &bin.join("gcc"),
        "gcc (Debian 12.2.0-14+deb12u1) 12.2.0",
        "12",
    );
    rustup(
        &dir,
        &[(
            "1.96.0-x86_64-unknown-linux-gnu",
            "rustc 1.96.0 (ac68faa20 2026-05-25)",
        )],
    );
    let cfg = config("gcc12-rustup196.config");
    let c = toolchain(&cfg, &bin, Verdict::Ok);
    assert!(
        c.detail.ends_with(&format!("{}/gcc", bin.display())),
        "{c:?}"
    );
    // A gcc of another major version is not the kernel's.
    gcc(&bin.join("gcc"), "gcc (Debian 14.2.0-19) 14.2.0", "14");
    let c = toolchain(&cfg, &bin, Verdict::Warn);
    assert!(
        c.detail.contains("missing gcc 12 (Debian package gcc-12)"),
        "{c:?}"
    );
    // A kernel without Rust has nothing to compare.
    let c = doctor::toolchain_in(&config("gcc12-no-rust.config"), Vec::new());
    assert_eq!(c.verdict, Verdict::NotApplicable);
}
