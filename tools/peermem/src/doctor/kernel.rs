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

/// The supported releases as text: `7.0, 7.3`.
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

/// The `ID` of `/etc/os-release` (`ubuntu`, `debian`), quotes removed.
fn os_id(h: &Host<'_>) -> Option<String> {
    let text = h.root.read("/etc/os-release")?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("ID="))
        .next_back()
        .map(|v| v.trim_matches('"').trim_matches('\'').to_owned())
}

/// Whether `text` is `A.B.C`, three numbers.
fn three_numbers(text: &str) -> bool {
    text.split('.').count() == 3 && text.split('.').all(|n| n.parse::<u32>().is_ok())
}

/// Whether `text` is a kernel flavour (`generic`, `amd64`, `cloud-amd64`).
fn flavour(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whose packages hold the running kernel's build files.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Distro {
    /// Ubuntu and one of its kernels: `ID=ubuntu` in `/etc/os-release` and a release
    /// of Ubuntu's form `A.B.C-ABI-FLAVOUR` (`7.0.0-34-generic`), whose packages are
    /// named after the release: `linux-headers-7.0.0-34-generic` (with
    /// scripts/target.json, a file of the flavour tree) and
    /// `linux-lib-rust-7.0.0-34-generic` (the crates, in
    /// `/usr/src/linux-lib-rust-<release>/rust/`, which the headers' `rust` link points
    /// to: debian/scripts/link-lib-rust).
    Ubuntu,
    /// Debian and one of its kernels: `ID=debian` and a release of Debian's form
    /// `A.B.C+SUFFIX-FLAVOUR` (`7.3.4+deb13-amd64`, trixie-backports'), with
    /// `linux-headers-<release>` and no package of Rust build files: peermem's
    /// `make lib-rust` builds them from `linux-source-<V.P>`.
    Debian,
    /// Anything else (a self-built kernel, another distribution).
    Other,
}

/// The [`Distro`] of the host running kernel `release`.
fn distro(h: &Host<'_>, release: &str) -> Distro {
    match os_id(h).as_deref() {
        Some("ubuntu") => {
            let mut parts = release.splitn(3, '-');
            let (Some(version), Some(abi), Some(rest)) = (parts.next(), parts.next(), parts.next())
            else {
                return Distro::Other;
            };
            if three_numbers(version) && abi.parse::<u32>().is_ok() && flavour(rest) {
                Distro::Ubuntu
            } else {
                Distro::Other
            }
        }
        Some("debian") => {
            let Some((version, rest)) = release.split_once('-') else {
                return Distro::Other;
            };
            let Some((numbers, suffix)) = version.split_once('+') else {
                return Distro::Other;
            };
            let suffix_ok = !suffix.is_empty()
                && suffix
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
            if three_numbers(numbers) && suffix_ok && flavour(rest) {
                Distro::Debian
            } else {
                Distro::Other
            }
        }
        _ => Distro::Other,
    }
}

/// The crates every out-of-tree Rust module is built against, in every release
/// peermem supports: what rust/Makefile builds for modules (`core` and the crates
/// `kernel` depends on) and the crates scripts/Makefile.build's `rust_common_cmd`
/// hands every module (`--extern pin_init --extern kernel`). `macros` and
/// `pin_init_internal` are proc macros. As peermem's Kbuild checks them.
pub const RUST_CRATES: [&str; 10] = [
    "core",
    "compiler_builtins",
    "ffi",
    "bindings",
    "uapi",
    "build_error",
    "macros",
    "pin_init",
    "pin_init_internal",
    "kernel",
];

/// The files of [`RUST_CRATES`] in the build tree ([`rust_crate_file`]).
pub const RUST_BUILD_FILES: [&str; 10] = [
    "rust/libcore.rmeta",
    "rust/libcompiler_builtins.rmeta",
    "rust/libffi.rmeta",
    "rust/libbindings.rmeta",
    "rust/libuapi.rmeta",
    "rust/libbuild_error.rmeta",
    "rust/libmacros.so",
    "rust/libpin_init.rmeta",
    "rust/libpin_init_internal.so",
    "rust/libkernel.rmeta",
];

/// The target specification rustc builds x86 kernel code for (arch/x86/Makefile:
/// `--target=$(objtree)/scripts/target.json`, generated by scripts/Makefile);
/// without it rustc stops: `target file ".../scripts/target.json" does not exist`.
pub const TARGET_JSON: &str = "scripts/target.json";

/// The file of crate `name` in the build tree: `rust/lib<name>.so` for a proc macro
/// (`macros`, or a name ending in `_internal` or `_derive`), else
/// `rust/lib<name>.rmeta`.
pub fn rust_crate_file(name: &str) -> String {
    if name == "macros" || name.ends_with("_internal") || name.ends_with("_derive") {
        format!("rust/lib{name}.so")
    } else {
        format!("rust/lib{name}.rmeta")
    }
}

/// The crates named by `--extern NAME` in `makefile` (a scripts/Makefile.build), in
/// order, once each: 7.0's `pin_init` and `kernel`; 7.3's also `zerocopy` and
/// `zerocopy_derive`. An option before the name (`--extern force:alloc`) and a path
/// after it (`NAME=PATH`) are dropped; what is not a crate name (a make variable) is
/// skipped, as are comments.
pub fn module_externs(makefile: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for line in makefile.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        while let Some(w) = words.next() {
            let arg = match w.strip_prefix("--extern") {
                Some("") => words.next(),
                Some(rest) => rest.strip_prefix('='),
                None => None,
            };
            let Some(arg) = arg else { continue };
            let name = arg.split('=').next().unwrap_or(arg);
            let name = name.rsplit(':').next().unwrap_or(name);
            let crate_name = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if crate_name && !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
        }
    }
    names
}

/// The files a build tree must hold to build an out-of-tree Rust module, as peermem's
/// Kbuild checks them: [`RUST_BUILD_FILES`], the file of each crate `makefile` (the
/// tree's scripts/Makefile.build) names with `--extern` (`None`, unreadable: only
/// [`RUST_CRATES`], which hold 7.0's and 7.3's `pin_init` and `kernel`), and on x86
/// [`TARGET_JSON`].
pub fn rust_build_files(makefile: Option<&str>, x86: bool) -> Vec<String> {
    let mut files: Vec<String> = RUST_BUILD_FILES.iter().map(|f| (*f).to_owned()).collect();
    for name in makefile.map(module_externs).unwrap_or_default() {
        let file = rust_crate_file(&name);
        if !files.contains(&file) {
            files.push(file);
        }
    }
    if x86 {
        files.push(TARGET_JSON.to_owned());
    }
    files
}

/// Whether the kernel is x86 (`CONFIG_X86`, `CONFIG_X86_64` or `CONFIG_X86_32`; with
/// no configuration, whether the build tree has arch/x86).
fn x86(h: &Host<'_>, build: &str) -> bool {
    match &h.config {
        Some(c) => c.yes("X86") || c.yes("X86_64") || c.yes("X86_32"),
        None => h.root.is_dir(&format!("{build}/arch/x86")),
    }
}

/// The fix on a Debian host: its headers, then the Rust build files from the
/// kernel's sources with peermem's `make lib-rust` (docs/install.md).
fn debian_fix(release: &str, headers: bool) -> String {
    let source = release_version(release).map_or_else(
        || "linux-source".to_owned(),
        |(v, p)| format!("linux-source-{v}.{p}"),
    );
    let headers = if headers {
        format!("linux-headers-{release} ")
    } else {
        String::new()
    };
    format!(
        "apt install {headers}{source}, then run `sudo make lib-rust` in peermem's source \
         tree (it builds the kernel's Rust build files from {source}; docs/install.md)"
    )
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

/// The Rust half of `kernel-rust`: `/lib/modules/<release>/build`, its `rust/` and
/// (x86) its `scripts/target.json`.
fn build_tree(h: &Host<'_>, release: &str, rust: String) -> Check {
    const ID: &str = "kernel-rust";
    let build = format!("/lib/modules/{release}/build");
    let distro = distro(h, release);
    let x86 = x86(h, &build);
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
        return match distro {
            Distro::Ubuntu => check.fix(format!(
                "apt install linux-headers-{release} linux-lib-rust-{release}"
            )),
            Distro::Debian => check.fix(debian_fix(release, true)),
            Distro::Other => check.fix(format!(
                "install the build tree (headers) of kernel {release}, with its Rust \
                 files ({}), at {build}",
                rust_build_files(None, x86).join(", ")
            )),
        };
    }
    let makefile = h.root.read(&format!("{build}/scripts/Makefile.build"));
    let missing: Vec<String> = rust_build_files(makefile.as_deref(), x86)
        .into_iter()
        .filter(|f| !h.root.exists(&format!("{build}/{f}")))
        .collect();
    if missing.is_empty() {
        let target = if x86 { " and scripts/target.json" } else { "" };
        return Check::new(
            ID,
            Verdict::Ok,
            format!(
                "{rust}; {build} has the kernel's Rust crates (rust/*.rmeta, \
                 rust/libmacros.so){target}"
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
    let no_target = missing.iter().any(|f| f == TARGET_JSON);
    let no_crates = missing.iter().any(|f| f != TARGET_JSON);
    match distro {
        // Ubuntu: the crates are linux-lib-rust's, target.json the headers'.
        Distro::Ubuntu => {
            let headers = format!(
                "apt install --reinstall linux-headers-{release} (scripts/target.json is \
                 the headers package's)"
            );
            check.fix(match (no_crates, no_target) {
                (true, true) => format!("apt install linux-lib-rust-{release}; {headers}"),
                (true, false) => format!("apt install linux-lib-rust-{release}"),
                _ => headers,
            })
        }
        Distro::Debian => check.fix(debian_fix(release, false)),
        Distro::Other => {
            let target = if x86 {
                format!(" and {build}/{TARGET_JSON}")
            } else {
                String::new()
            };
            check.fix(format!(
                "install the kernel's Rust build files into {build}/rust{target} (from the \
                 kernel's own build: `make` leaves them there; make mrproper deletes them)"
            ))
        }
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
