// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `toolchain`: are the compilers that built the kernel installed?
//!
//! The rules are scripts/kernel-toolchain's, which picks the compilers the Makefile
//! builds peermem with; keep the two in step:
//!
//! - the C compiler and linker must have the kernel's major version
//!   (`CONFIG_CLANG_VERSION` / `CONFIG_GCC_VERSION`, `CONFIG_LLD_VERSION`): a versioned
//!   name (`clang-19`, `ld.lld-19`, `gcc-15`) first, else the unversioned one if its
//!   major version matches; LLVM's other tools (`llvm-ar`, ...) with the same suffix
//!   when the kernel links with ld.lld;
//! - rustc must print the kernel's `CONFIG_RUSTC_VERSION_TEXT` exactly (its crates'
//!   metadata name the compiler build), among `rustc` and `rustc-<1.minor>` in the
//!   search path (never a rustup proxy), `/usr/lib/rust-<1.minor>/bin/rustc` (Debian
//!   and Ubuntu's versioned packages), and every installed rustup toolchain.
//!
//! On a live host the tools are searched in `$PEERMEM_TOOLCHAIN_PATH`, else `$PATH`
//! (as kernel-toolchain does), and asked `--version`. A recorded
//! tree records each installed tool `NAME` as `/NAME-version.txt` (what
//! `NAME --version` prints; for gcc, what `gcc -dumpversion` prints is taken from it),
//! and rustup's toolchains as `/rustup-toolchain-list.txt` (`rustup toolchain list`)
//! with `/rustup-TOOLCHAIN-rustc-version.txt` for each.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::kernel::Config;
use super::{Check, Host, Verdict};
use crate::Root;

/// Where tools are looked for: directories searched as on a live host, or the
/// recorded files of a tree.
struct Tools<'a> {
    /// The recorded tree; `None`: search `dirs`, run what is found.
    recorded: Option<&'a Root>,
    dirs: Vec<PathBuf>,
    /// Whether `/usr/lib/rust-<1.minor>/bin/rustc` is a candidate (kernel-toolchain
    /// looks there unless given PEERMEM_TOOLCHAIN_PATH).
    usr_lib: bool,
}

/// A tool found: how to name it, and what it prints for `--version`.
struct Tool {
    path: String,
    version: String,
}

impl Tools<'_> {
    fn new(root: &Root) -> Tools<'_> {
        if !root.is_live() {
            return Tools {
                recorded: Some(root),
                dirs: Vec::new(),
                usr_lib: false,
            };
        }
        // kernel-toolchain searches PEERMEM_TOOLCHAIN_PATH where it is set, else PATH.
        let given = std::env::var_os("PEERMEM_TOOLCHAIN_PATH");
        let usr_lib = given.is_none();
        let dirs = given
            .or_else(|| std::env::var_os("PATH"))
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        Tools {
            recorded: None,
            dirs,
            usr_lib,
        }
    }

    /// `path --version`, first line kept whole (rustc's is the one compared).
    fn ask(path: &Path, arg: &str) -> Option<String> {
        let out = Command::new(path).arg(arg).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Every `name` in the search directories that is an executable file, in order.
    fn all(&self, name: &str) -> Vec<Tool> {
        if let Some(root) = self.recorded {
            return root
                .read_trimmed(&format!("/{name}-version.txt"))
                .map(|version| Tool {
                    path: name.to_owned(),
                    version,
                })
                .into_iter()
                .collect();
        }
        self.dirs
            .iter()
            .filter(|d| !d.as_os_str().is_empty())
            .map(|d| d.join(name))
            .filter(|p| is_executable(p))
            .filter_map(|p| {
                let version = Self::ask(&p, "--version").unwrap_or_default();
                Some(Tool {
                    path: p.to_str()?.to_owned(),
                    version,
                })
            })
            .collect()
    }

    /// The first of `names` found (kernel-toolchain's `find_tool`).
    fn find(&self, names: &[&str]) -> Option<Tool> {
        names.iter().find_map(|n| self.all(n).into_iter().next())
    }

    /// A rustc at an absolute path (live hosts only).
    fn at(&self, path: &str) -> Option<Tool> {
        if self.recorded.is_some() || !is_executable(Path::new(path)) {
            return None;
        }
        Some(Tool {
            path: path.to_owned(),
            version: Self::ask(Path::new(path), "--version").unwrap_or_default(),
        })
    }

    /// The rustc of each installed rustup toolchain.
    fn rustup_rustcs(&self) -> Vec<Tool> {
        if let Some(root) = self.recorded {
            let list = root.read("/rustup-toolchain-list.txt").unwrap_or_default();
            return list
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter_map(|tc| {
                    let version = root.read_trimmed(&format!("/rustup-{tc}-rustc-version.txt"))?;
                    Some(Tool {
                        path: format!("rustup toolchain {tc}"),
                        version,
                    })
                })
                .collect();
        }
        let Some(rustup) = self.all("rustup").into_iter().next() else {
            return Vec::new();
        };
        let Ok(out) = Command::new(&rustup.path)
            .args(["toolchain", "list"])
            .output()
        else {
            return Vec::new();
        };
        let list = String::from_utf8_lossy(&out.stdout);
        list.lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter_map(|tc| {
                let out = Command::new(&rustup.path)
                    .args(["which", "--toolchain", tc, "rustc"])
                    .output()
                    .ok()?;
                let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                self.at(&path)
            })
            .collect()
    }

    /// Whether the tool at `path` is a rustup proxy (it answers for whatever toolchain
    /// the directory it runs in selects: never taken as the compiler).
    fn is_rustup_proxy(&self, tool: &Tool) -> bool {
        self.recorded.is_none()
            && std::fs::canonicalize(&tool.path)
                .ok()
                .and_then(|p| p.file_name().map(|n| n == "rustup"))
                .unwrap_or(false)
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first `x.y.z` (or `x.y`) in `text`.
fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|w| w.split('.').filter(|p| !p.is_empty()).count() >= 2)
        .map(|w| w.trim_matches('.').to_owned())
}

/// The major version in a version text (`Ubuntu clang version 19.1.1` -> `19`).
fn major_in(text: &str) -> Option<u32> {
    version_in(text)?.split('.').next()?.parse().ok()
}

/// Kconfig's version number's major (`190107` -> 19).
fn major(config: &Config, name: &str) -> u32 {
    config
        .get(name)
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0)
        / 10000
}

/// What is missing of the C compiler and linker, and what was found.
fn c_toolchain(config: &Config, tools: &Tools<'_>, missing: &mut Vec<String>) -> Option<String> {
    if config.yes("CC_IS_CLANG") {
        let m = major(config, "CLANG_VERSION");
        let lld = config.yes("LD_IS_LLD");
        let lm = major(config, "LLD_VERSION");
        let versioned = format!("clang-{m}");
        let (suffix, found) = if let Some(t) = tools.find(&[&versioned]) {
            (format!("-{m}"), Some(t))
        } else if let Some(t) = tools
            .find(&["clang"])
            .filter(|t| major_in(&t.version) == Some(m))
        {
            (String::new(), Some(t))
        } else {
            let other = tools.find(&["clang"]).map(|t| t.version);
            missing.push(format!(
                "clang {m} (Debian package clang-{m}; found: {})",
                other.as_deref().unwrap_or("none")
            ));
            (format!("-{m}"), None)
        };
        if lld {
            let lld_found = if suffix.is_empty() {
                tools
                    .find(&["ld.lld"])
                    .is_some_and(|t| major_in(&t.version) == Some(lm))
            } else {
                tools.find(&[&format!("ld.lld-{lm}")]).is_some()
            };
            if !lld_found {
                missing.push(format!("ld.lld {lm} (Debian package lld-{lm})"));
            }
            let absent: Vec<String> = [
                "llvm-ar",
                "llvm-nm",
                "llvm-objcopy",
                "llvm-objdump",
                "llvm-readelf",
                "llvm-strip",
            ]
            .iter()
            .map(|t| format!("{t}{suffix}"))
            .filter(|t| tools.find(&[t]).is_none())
            .collect();
            if !absent.is_empty() {
                missing.push(format!("{} (Debian package llvm-{m})", absent.join(" ")));
            }
        }
        found.map(|t| t.path)
    } else if config.yes("CC_IS_GCC") {
        let m = major(config, "GCC_VERSION");
        if let Some(t) = tools.find(&[&format!("gcc-{m}")]) {
            Some(t.path)
        } else if let Some(t) = tools.find(&["gcc"]).filter(|t| {
            // kernel-toolchain asks `gcc -dumpversion` (`12`, or `12.2.0`) and keeps
            // what precedes the first dot; a recorded tree has --version's text.
            let dump = if tools.recorded.is_none() {
                Tools::ask(Path::new(&t.path), "-dumpversion")
            } else {
                version_in(&t.version)
            };
            dump.as_deref()
                .and_then(|d| d.split('.').next()?.trim().parse::<u32>().ok())
                == Some(m)
        }) {
            Some(t.path)
        } else {
            missing.push(format!("gcc {m} (Debian package gcc-{m})"));
            None
        }
    } else {
        missing.push(
            "a C compiler: the kernel's configuration names none (CONFIG_CC_IS_CLANG / \
             CONFIG_CC_IS_GCC)"
                .to_owned(),
        );
        None
    }
}

/// The rustc the kernel wants: its version text, its `1.x.y`, its `1.x`.
fn wanted_rustc(config: &Config) -> Option<(String, String, String)> {
    let text = config.get("RUSTC_VERSION_TEXT").unwrap_or_default();
    let num = config
        .get("RUSTC_VERSION")
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|&n| n > 0);
    let ver = match num {
        Some(n) => format!("1.{}.{}", n / 100 % 100, n % 100),
        None => text
            .strip_prefix("rustc ")
            .and_then(|t| t.split_whitespace().next())
            .unwrap_or("")
            .to_owned(),
    };
    if ver.is_empty() {
        return None;
    }
    let minor = ver
        .rsplit_once('.')
        .map_or(ver.clone(), |(m, _)| m.to_owned());
    Some((text, ver, minor))
}

/// The number in `rustc X.Y.Z (...)`.
fn rustc_number(version: &str) -> Option<&str> {
    version.strip_prefix("rustc ")?.split_whitespace().next()
}

/// Out-of-tree Rust modules need the compilers the kernel was built with.
pub fn toolchain(h: &Host<'_>) -> Check {
    let Some(config) = &h.config else {
        return Check::new(ID, Verdict::NotApplicable, "no kernel configuration found");
    };
    check(config, &Tools::new(h.root))
}

/// The `toolchain` check for a kernel configured as `config`, the tools searched in
/// `dirs` and run as on a live host (as kernel-toolchain with PEERMEM_TOOLCHAIN_PATH
/// set to `dirs`, and `$PATH` holding them).
pub fn toolchain_in(config: &Config, dirs: Vec<PathBuf>) -> Check {
    check(
        config,
        &Tools {
            recorded: None,
            dirs,
            usr_lib: false,
        },
    )
}

const ID: &str = "toolchain";

fn check(config: &Config, tools: &Tools<'_>) -> Check {
    if !config.yes("RUST") {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            "the kernel has no Rust support (see kernel-rust)",
        );
    }
    let Some((want_text, want_ver, want_minor)) = wanted_rustc(config) else {
        return Check::new(
            ID,
            Verdict::NotApplicable,
            "the kernel configuration names no rustc (CONFIG_RUSTC_VERSION_TEXT)",
        );
    };
    let mut missing = Vec::new();
    let cc = c_toolchain(config, tools, &mut missing);

    let mut candidates: Vec<Tool> = ["rustc".to_owned(), format!("rustc-{want_minor}")]
        .iter()
        .flat_map(|n| tools.all(n))
        .filter(|t| !tools.is_rustup_proxy(t))
        .collect();
    // Debian's and Ubuntu's versioned rustc packages; kernel-toolchain looks there
    // unless given its own search path.
    if tools.usr_lib {
        candidates.extend(tools.at(&format!("/usr/lib/rust-{want_minor}/bin/rustc")));
    }
    candidates.extend(tools.rustup_rustcs());
    let matches = |t: &Tool| {
        if want_text.is_empty() {
            rustc_number(&t.version) == Some(want_ver.as_str())
        } else {
            t.version == want_text
        }
    };
    let want_name = if want_text.is_empty() {
        format!("rustc {want_ver}")
    } else {
        want_text.clone()
    };
    let found = candidates.iter().find(|t| matches(t));
    if found.is_none() {
        let seen: Vec<String> = candidates
            .iter()
            .map(|t| format!("{}: {}", t.path, t.version))
            .collect();
        let hint = if want_text.is_empty()
            || ["built from a source tarball", "Debian", "debian", "Ubuntu"]
                .iter()
                .any(|w| want_text.contains(w))
        {
            format!(
                "the distribution's rustc {want_ver} package (Debian: rustc-web or \
                 rustc-{want_minor}; Ubuntu: rustc-{want_minor})"
            )
        } else {
            format!("rustup toolchain install {want_ver}")
        };
        missing.push(format!(
            "rustc {want_ver}, the kernel's build: {want_name} ({hint}); found: {}",
            if seen.is_empty() {
                "none".to_owned()
            } else {
                seen.join(", ")
            }
        ));
    }
    if missing.is_empty() {
        let rustc = found.map_or(String::new(), |t| t.path.clone());
        Check::new(
            ID,
            Verdict::Ok,
            format!(
                "the kernel's compilers are installed: {want_name} ({rustc}){}",
                cc.map_or(String::new(), |c| format!(", {c}"))
            ),
        )
    } else {
        Check::new(
            ID,
            Verdict::Warn,
            format!(
                "the kernel was built with compilers that are not installed: missing {}",
                missing.join("; missing ")
            ),
        )
        .fix(
            "install the compilers the kernel was built with (its configuration names them): \
             scripts/kernel-toolchain --explain /lib/modules/$(uname -r)/build names them and \
             the make variables (LLVM=, CC=, RUSTC=) to build with",
        )
    }
}
