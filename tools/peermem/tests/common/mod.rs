// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What the test files share: the recorded trees of tests/fixtures, scratch copies of
//! them, the binary, and the report of `peermem doctor` read one check at a time.
//!
//! Each test file that says `mod common;` compiles its own copy, and none uses all of
//! it: hence `dead_code` is allowed here.
#![allow(dead_code)]

use std::ops::Deref;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use peermem_tool::doctor::{self, Check, Report, Verdict};
use peermem_tool::Root;

/// tests/fixtures/`case`: a recorded tree (a fake root), or a file below one.
pub fn fixture(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(case)
}

/// tests/fixtures/nvidia-smi/`name`: a recorded `nvidia-smi -q`.
pub fn smi(name: &str) -> String {
    std::fs::read_to_string(fixture("nvidia-smi").join(name)).unwrap()
}

/// A test's scratch directory, removed when dropped (a failed removal fails the test,
/// unless it has failed already).
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh empty directory, `name` unique within its test file.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "peermem-{}-{}-{name}",
            env!("CARGO_CRATE_NAME"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// A scratch copy of fixture `case`.
    pub fn copy_of(case: &str, name: &str) -> Self {
        let dir = Self::new(name);
        copy_tree(&fixture(case), &dir);
        dir
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let removed = std::fs::remove_dir_all(&self.0);
        if !std::thread::panicking() {
            removed.unwrap_or_else(|e| panic!("removing {}: {e}", self.0.display()));
        }
    }
}

/// `from` copied to `to` (files, directories and symbolic links as they are).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let t = e.file_type().unwrap();
        if t.is_symlink() {
            symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if t.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The file at `abs` (absolute, as on the host) of the tree at `dir`, with its
/// directories.
pub fn write(dir: &Path, abs: &str, contents: impl AsRef<[u8]>) {
    let p = dir.join(abs.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, contents).unwrap();
}

/// `peermem args...`, run to its end.
pub fn peermem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_peermem"))
        .args(args)
        .output()
        .unwrap()
}

/// `path` as a command-line argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// `text` parsed as JSON (objects keep their key order).
pub fn parse(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// An object's keys, in order.
pub fn keys(v: &serde_json::Value) -> Vec<&str> {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"));
    obj.keys().map(String::as_str).collect()
}

/// Doctor on the tree at `dir`, taking nvidia-smi output from the tree
/// (/nvidia-smi-q.txt, as the binary does; none where the tree has none).
pub fn run_at(dir: &Path) -> Report {
    let root = Root::new(dir);
    let text = root.read("/nvidia-smi-q.txt");
    doctor::run(&root, text.as_deref())
}

/// Doctor on fixture `case`, nvidia-smi output from the tree.
pub fn run(case: &str) -> Report {
    run_at(&fixture(case))
}

/// Doctor on fixture `case` with the nvidia-smi output `smi` in place of the tree's.
pub fn run_smi(case: &str, smi: Option<&str>) -> Report {
    doctor::run(&Root::new(fixture(case)), smi)
}

/// The check `id` of `r`.
#[track_caller]
pub fn check<'a>(r: &'a Report, id: &str) -> &'a Check {
    r.get(id).unwrap_or_else(|| panic!("no check {id}"))
}

/// The verdict of check `id`.
#[track_caller]
pub fn verdict(r: &Report, id: &str) -> Verdict {
    check(r, id).verdict
}

/// The detail of check `id`.
#[track_caller]
pub fn detail<'a>(r: &'a Report, id: &str) -> &'a str {
    &check(r, id).detail
}

/// The check `id` of `r`, asserting that its verdict is `want`.
#[track_caller]
pub fn expect<'a>(r: &'a Report, id: &str, want: Verdict) -> &'a Check {
    let c = check(r, id);
    assert_eq!(c.verdict, want, "{c:?}");
    c
}

/// The fix of check `c`, which must have one.
#[track_caller]
pub fn fix(c: &Check) -> &str {
    c.fix.as_deref().unwrap_or_else(|| panic!("no fix: {c:?}"))
}

/// The check `id` of `r`, asserting that it fails and is the first check that does.
#[track_caller]
pub fn first_fail<'a>(r: &'a Report, id: &str) -> &'a Check {
    let c = expect(r, id, Verdict::Fail);
    assert_eq!(r.first_fail().map(|c| c.id), Some(id), "{r:?}");
    c
}

/// The check `id` of `r`, asserting its verdict and, word for word, its detail.
#[track_caller]
pub fn expect_detail<'a>(r: &'a Report, id: &str, want: Verdict, detail: &str) -> &'a Check {
    let c = expect(r, id, want);
    assert_eq!(c.detail, detail);
    c
}
