// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The root every file access goes through.

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};

/// A filesystem root: `/` on a live host, a recorded tree in tests (`--root DIR`).
///
/// It remembers every path it could not read for want of permission (`EACCES`,
/// `EPERM`): on a live host that means "run as root", which `status` and `doctor`
/// say instead of taking the file for missing.
#[derive(Clone, Debug)]
pub struct Root {
    base: PathBuf,
    /// Paths (absolute, as on the host) that answer `EACCES` whatever the tree holds:
    /// how tests show a non-root user's view while running as root.
    deny: Vec<String>,
    denied: RefCell<Vec<String>>,
}

impl Root {
    /// A root at `base`.
    pub fn new(base: impl Into<PathBuf>) -> Self {
        Root {
            base: base.into(),
            deny: Vec::new(),
            denied: RefCell::new(Vec::new()),
        }
    }

    /// This root, where `abs` and everything under it cannot be read (`EACCES`), as
    /// for a user other than root.
    pub fn deny(mut self, abs: &str) -> Self {
        self.deny.push(abs.trim_end_matches('/').to_owned());
        self
    }

    /// Whether this is the live host's root (`/`), where running programs such as
    /// `nvidia-smi` makes sense.
    pub fn is_live(&self) -> bool {
        self.base == Path::new("/")
    }

    /// Where the host's absolute path `abs` lies under this root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.base.join(abs.trim_start_matches('/'))
    }

    /// The paths that could not be read for want of permission so far, in order.
    pub fn denied(&self) -> Vec<String> {
        self.denied.borrow().clone()
    }

    /// `result`, remembering `abs` when it failed for want of permission.
    fn note<T>(&self, abs: &str, result: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &result {
            if is_permission(e) {
                let mut denied = self.denied.borrow_mut();
                if !denied.iter().any(|d| d == abs) {
                    denied.push(abs.to_owned());
                }
            }
        }
        result
    }

    /// `EACCES` if `abs` lies under a denied path.
    fn check(&self, abs: &str) -> io::Result<()> {
        let hit = self
            .deny
            .iter()
            .any(|d| abs == d || (abs.starts_with(d.as_str()) && abs[d.len()..].starts_with('/')));
        if hit {
            Err(io::Error::from_raw_os_error(EACCES))
        } else {
            Ok(())
        }
    }

    /// The bytes of `abs`, or the error.
    pub fn read_bytes(&self, abs: &str) -> io::Result<Vec<u8>> {
        let r = self.check(abs).and_then(|()| std::fs::read(self.path(abs)));
        self.note(abs, r)
    }

    /// The contents of `abs`, or `None` if it cannot be read. Invalid UTF-8 is replaced.
    pub fn read(&self, abs: &str) -> Option<String> {
        self.read_bytes(abs)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The contents of `abs`, trimmed, or `None` if it cannot be read.
    pub fn read_trimmed(&self, abs: &str) -> Option<String> {
        self.read(abs).map(|s| s.trim().to_owned())
    }

    /// What `abs` is (following links, as sysfs needs), or the error.
    fn metadata(&self, abs: &str) -> io::Result<std::fs::Metadata> {
        let r = self
            .check(abs)
            .and_then(|()| std::fs::metadata(self.path(abs)));
        self.note(abs, r)
    }

    /// Whether `abs` exists (following links, as sysfs needs).
    pub fn exists(&self, abs: &str) -> bool {
        self.metadata(abs).is_ok()
    }

    /// Whether `abs` is a directory.
    pub fn is_dir(&self, abs: &str) -> bool {
        self.metadata(abs).is_ok_and(|m| m.is_dir())
    }

    /// Whether `abs` itself (not what it points to) is a symbolic link, dangling or not.
    pub fn is_link(&self, abs: &str) -> bool {
        self.check(abs).is_ok()
            && std::fs::symlink_metadata(self.path(abs)).is_ok_and(|m| m.file_type().is_symlink())
    }

    /// Where `abs` leads once every symbolic link is followed, as an absolute host
    /// path (`/sys/bus/pci/devices/0000:18:00.0` -> `/sys/devices/pci0000:15/...`);
    /// `None` if it does not exist or leads out of this root.
    pub fn resolve(&self, abs: &str) -> Option<String> {
        self.check(abs).ok()?;
        let real = self.note(abs, std::fs::canonicalize(self.path(abs))).ok()?;
        let base = std::fs::canonicalize(&self.base).ok()?;
        let rel = real.strip_prefix(&base).ok()?;
        Some(format!("/{}", rel.to_str()?))
    }

    /// When `abs` (followed, as [`Root::exists`]) was last modified.
    pub fn modified(&self, abs: &str) -> Option<std::time::SystemTime> {
        self.metadata(abs).ok()?.modified().ok()
    }

    /// The names in directory `abs`, sorted; empty if it is missing or unreadable.
    pub fn list(&self, abs: &str) -> Vec<String> {
        let rd = self
            .check(abs)
            .and_then(|()| std::fs::read_dir(self.path(abs)));
        let mut names: Vec<String> = self
            .note(abs, rd)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// Linux's `EACCES`.
const EACCES: i32 = 13;

/// Whether `e` says the caller lacks permission (`EACCES`, `EPERM`).
pub fn is_permission(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
}
