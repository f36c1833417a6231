// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The root every file access goes through.

use std::path::{Path, PathBuf};

/// A filesystem root: `/` on a live host, a recorded tree in tests (`--root DIR`).
#[derive(Clone, Debug)]
pub struct Root {
    base: PathBuf,
}

impl Root {
    /// A root at `base`.
    pub fn new(base: impl Into<PathBuf>) -> Self {
        Root { base: base.into() }
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

    /// The contents of `abs`, or `None` if it cannot be read. Invalid UTF-8 is replaced.
    pub fn read(&self, abs: &str) -> Option<String> {
        std::fs::read(self.path(abs))
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The contents of `abs`, trimmed, or `None` if it cannot be read.
    pub fn read_trimmed(&self, abs: &str) -> Option<String> {
        self.read(abs).map(|s| s.trim().to_owned())
    }

    /// Whether `abs` exists (following links, as sysfs needs).
    pub fn exists(&self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// Whether `abs` is a directory.
    pub fn is_dir(&self, abs: &str) -> bool {
        self.path(abs).is_dir()
    }

    /// The names in directory `abs`, sorted; empty if it is missing or unreadable.
    pub fn list(&self, abs: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(abs))
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
