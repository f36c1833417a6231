// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The kernel checks: does the running kernel support Rust modules, with a build tree
//! to build peermem against (`kernel-rust`), and is it a release peermem supports
//! (`kernel-release`)?

use std::io::Read;

use super::{Check, Host, Verdict};
use crate::Root;

/// The repository's `SUPPORTED_KERNELS`: the one list of the Linux releases peermem
/// supports (`VERSION.PATCHLEVEL` lines, `#` comments).
pub const SUPPORTED_KERNELS_FILE: &str = include_str!("../../../../SUPPORTED_KERNELS");

/// The releases of [`SUPPORTED_KERNELS_FILE`], `(version, patchlevel)`, in its order.
///
/// # Panics
///
/// If a line is neither a comment nor `VERSION.PATCHLEVEL` (a broken repository;
/// the tests read the file).
pub fn supported_kernels() -> Vec<(u32, u32)> {
    SUPPORTED_KERNELS_FILE
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (v, p) = l.split_once('.').unwrap_or((l, ""));
            match (v.parse(), p.parse()) {
                (Ok(v), Ok(p)) => (v, p),
                _ => panic!("SUPPORTED_KERNELS: `{l}` is not VERSION.PATCHLEVEL"),
            }
        })
        .collect()
}

/// The supported releases as text: `7.0, 7.2, 7.3`.
pub fn supported_list() -> String {
    supported_kernels()
        .iter()
        .map(|(v, p)| format!("{v}.{p}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `VERSION.PATCHLEVEL` of a kernel release string (`7.0.0-34-generic` -> `(7, 0)`,
/// `7.3.4+deb13-amd64` -> `(7, 3)`, `6.14.0-rust` -> `(6, 14)`).
pub fn release_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.splitn(3, '.');
    let v = parts.next()?.parse().ok()?;
    let p: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((v, p.parse().ok()?))
}

/// A kernel configuration (`.config` text) and where it was read.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file it came from (`/boot/config-<release>`, `/proc/config.gz`, ...).
    pub path: String,
    /// Its text.
    pub text: String,
}

impl Config {
    /// The running kernel's configuration: `/boot/config-<release>` (what
    /// distributions install), else `/proc/config.gz` (kernels built with
    /// `CONFIG_IKCONFIG_PROC`), else the build tree's `.config`.
    pub fn find(root: &Root, release: &str) -> Option<Config> {
        let boot = format!("/boot/config-{release}");
        if let Some(text) = root.read(&boot) {
            return Some(Config { path: boot, text });
        }
        if let Some(text) = root.read_bytes("/proc/config.gz").ok().and_then(gunzip) {
            return Some(Config {
                path: "/proc/config.gz".to_owned(),
                text,
            });
        }
        let build = format!("/lib/modules/{release}/build/.config");
        root.read(&build).map(|text| Config { path: build, text })
    }

    /// The value of `CONFIG_<name>`, quotes removed; the last assignment wins, as in
    /// Kconfig. `None` if unset (`# CONFIG_<name> is not set`, or absent).
    pub fn get(&self, name: &str) -> Option<String> {
        let key = format!("CONFIG_{name}=");
        self.text
            .lines()
            .filter_map(|l| l.strip_prefix(&key))
            .next_back()
            .map(|v| {
                v.strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(v)
                    .to_owned()
            })
    }

    /// Whether `CONFIG_<name>=y`.
    pub fn yes(&self, name: &str) -> bool {
        self.get(name).as_deref() == Some("y")
    }
}

/// `bytes` decompressed (gzip), as text; `None` if they are not gzip.
fn gunzip(bytes: Vec<u8>) -> Option<String> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// Whether the host is Ubuntu running one of Ubuntu's kernels: `ID=ubuntu` in
/// `/etc/os-release` and a release of Ubuntu's form `A.B.C-ABI-FLAVOUR`
/// (`7.0.0-34-generic`), whose packages are named after the release
/// (`linux-headers-7.0.0-34-generic`, `linux-lib-rust-7.0.0-34-generic`).
fn ubuntu_kernel(h: &Host<'_>, release: &str) -> bool {
    let ubuntu = h.root.read("/etc/os-release").is_some_and(|t| {
        t.lines()
            .any(|l| l.trim() == "ID=ubuntu" || l.trim() == "ID=\"ubuntu\"")
    });
    let mut parts = release.splitn(3, '-');
    let (Some(version), Some(abi), Some(flavour)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    ubuntu
        && version.split('.').count() == 3
        && version.split('.').all(|n| n.parse::<u32>().is_ok())
        && abi.parse::<u32>().is_ok()
        && !flavour.is_empty()
        && flavour
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// What an out-of-tree Rust module takes from the kernel's build tree (`rust/`): the
/// metadata of the crates scripts/Makefile.build's `rust_common_cmd` hands every
/// module (`--extern pin_init --extern kernel`, and `core`, which they depend on) and
/// the `macros` proc-macro (`module!`), all built by rust/Makefile in 7.0 and 7.3.
/// Ubuntu ships them in `linux-lib-rust-<release>`
/// (`/usr/src/linux-lib-rust-<release>/rust/`), which the headers' `rust` link
/// points to (debian/scripts/link-lib-rust).
pub const RUST_BUILD_FILES: [&str; 4] = [
    "rust/libcore.rmeta",
    "rust/libkernel.rmeta",
    "rust/libpin_init.rmeta",
    "rust/libmacros.so",
];

/// From Linux 7.3 on, modules also get `--extern zerocopy --extern zerocopy_derive`
/// (7.3's scripts/Makefile.build; rust/Makefile builds both).
const RUST_BUILD_FILES_7_3: [&str; 2] = ["rust/libzerocopy.rmeta", "rust/libzerocopy_derive.so"];

/// The Rust files a Linux `version` build tree must hold.
pub fn rust_build_files(version: Option<(u32, u32)>) -> Vec<&'static str> {
    let mut files = RUST_BUILD_FILES.to_vec();
    if version.is_some_and(|v| v >= (7, 3)) {
        files.extend(RUST_BUILD_FILES_7_3);
    }
    files
}

/// `kernel-rust`: the kernel is built with `CONFIG_RUST=y`, and its build tree holds
/// what an out-of-tree Rust module is built against.
pub fn kernel_rust(h: &Host<'_>) -> Check {
    const ID: &str = "kernel-rust";
    let fix = "boot a kernel built with CONFIG_RUST=y (and install its build tree)";
    let rust = if let Some(config) = &h.config {
        if !config.yes("RUST") {
            let mut detail = format!(
                "the kernel has no Rust support: CONFIG_RUST is not set in {}",
                config.path
            );
            if config.get("RUSTC_VERSION").as_deref() == Some("0") {
                detail.push_str(" (CONFIG_RUSTC_VERSION=0: it was built without a Rust compiler)");
            }
            return Check::new(ID, Verdict::Fail, detail).fix(fix);
        }
        format!("CONFIG_RUST=y (from {})", config.path)
    } else if let Some(ks) = &h.kallsyms {
        // Rust v0-mangled symbols start with `_R` (`_RNvNtCs..._6kernel...`).
        let rusty = ks.lines().any(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|s| s.starts_with("_RN") || s.starts_with("_RI"))
        });
        if !rusty {
            return Check::new(
                ID,
                Verdict::Fail,
                "the kernel has no Rust support: no Rust-mangled (_RN...) symbols in \
                 /proc/kallsyms and no kernel config file",
            )
            .fix(fix);
        }
        "Rust symbols in /proc/kallsyms (no kernel config file found)".to_owned()
    } else if h.module(super::NATIVE) {
        return Check::new(
            ID,
            Verdict::Ok,
            "the peermem module is loaded, so the kernel supports Rust modules",
        );
    } else {
        return Check::new(
            ID,
            Verdict::Warn,
            "could not tell: no /boot/config-<release>, no /proc/config.gz, /proc/kallsyms \
             unreadable",
        )
        .fix("run as root, or check that the kernel config has CONFIG_RUST=y");
    };
    let Some(release) = h.release.as_deref() else {
        return Check::new(ID, Verdict::Ok, rust);
    };
    build_tree(h, release, rust)
}

/// The Rust half of `kernel-rust`: `/lib/modules/<release>/build` and its `rust/`.
fn build_tree(h: &Host<'_>, release: &str, rust: String) -> Check {
    const ID: &str = "kernel-rust";
    let build = format!("/lib/modules/{release}/build");
    let ubuntu = ubuntu_kernel(h, release);
    // peermem built elsewhere and loaded works; only rebuilding needs the tree.
    let verdict = if h.ours_loaded() {
        Verdict::Warn
    } else {
        Verdict::Fail
    };
    if !h.root.is_dir(&build) {
        let check = Check::new(
            ID,
            verdict,
            format!("{rust}, but the kernel's build tree {build} is missing"),
        );
        return if ubuntu {
            check.fix(format!(
                "apt install linux-headers-{release} linux-lib-rust-{release}"
            ))
        } else {
            check.fix(format!(
                "install the build tree (headers) of kernel {release}, with its Rust \
                 files ({}), at {build}",
                rust_build_files(release_version(release)).join(", ")
            ))
        };
    }
    let missing: Vec<&str> = rust_build_files(release_version(release))
        .into_iter()
        .filter(|f| !h.root.exists(&format!("{build}/{f}")))
        .collect();
    if missing.is_empty() {
        return Check::new(
            ID,
            Verdict::Ok,
            format!(
                "{rust}; {build} has the kernel's Rust crates (rust/*.rmeta, rust/libmacros.so)"
            ),
        );
    }
    let dangling =
        if h.root.is_link(&format!("{build}/rust")) && !h.root.exists(&format!("{build}/rust")) {
            " (its rust link is dangling)"
        } else {
            ""
        };
    let detail = format!(
        "{rust}, but the build tree {build} lacks the Rust files out-of-tree Rust modules \
         are built against{dangling}: {}",
        missing.join(", ")
    );
    let check = Check::new(ID, verdict, detail);
    if ubuntu {
        check.fix(format!("apt install linux-lib-rust-{release}"))
    } else {
        check.fix(format!(
            "install the kernel's Rust build files into {build}/rust (from the kernel's own \
             build: `make` leaves them in rust/; make mrproper deletes them)"
        ))
    }
}

/// `kernel-release`: the running kernel is one of [`SUPPORTED_KERNELS_FILE`]'s.
pub fn kernel_release(h: &Host<'_>) -> Check {
    const ID: &str = "kernel-release";
    let list = supported_list();
    let Some(release) = h.release.as_deref() else {
        return Check::new(
            ID,
            Verdict::Warn,
            format!("cannot read /proc/sys/kernel/osrelease; peermem supports Linux {list}"),
        )
        .fix("check the kernel release with uname -r");
    };
    let Some((v, p)) = release_version(release) else {
        return Check::new(
            ID,
            Verdict::Warn,
            format!("kernel release `{release}` does not start with VERSION.PATCHLEVEL; peermem supports Linux {list}"),
        )
        .fix("check the kernel release with uname -r");
    };
    if supported_kernels().contains(&(v, p)) {
        Check::new(
            ID,
            Verdict::Ok,
            format!("Linux {v}.{p} ({release}): peermem supports Linux {list}"),
        )
    } else {
        Check::new(
            ID,
            Verdict::Fail,
            format!("Linux {v}.{p} ({release}) is not supported: peermem supports Linux {list}"),
        )
        .fix(format!(
            "boot a Linux {list} kernel built with CONFIG_RUST=y (Ubuntu 26.04's generic \
             kernel is Linux 7.0)"
        ))
    }
}
