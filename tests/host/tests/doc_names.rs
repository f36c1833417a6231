// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Docs that cannot drift (issue #50): every backticked name in README.md, docs/*.md,
//! docs/bench/*.md and the `//` comments of src/**/*.rs that names a file of the
//! repository or an item of its code must still exist. The rule:
//!
//! - A path (only `[A-Za-z0-9_.+@/-]`, with a `/` or a known extension) is checked when
//!   its first component is a top-level entry of the repository (the output folders
//!   .gitignore names, build/ and target/, excepted): the file or folder must exist.
//!   A path naming another component (`/sys/...`, `../shared`, `drivers/...` of the
//!   kernel) is not ours, except a `.rs` path (`client/user.rs`, `compat.rs`), which
//!   names the module's files relative to src/: some file of the tree must end in it.
//!   `EXTERNAL_PATHS` lists the outside files whose first component is also ours.
//! - An item (`Type`, `Type<Arg>`, `Type::member`, `module::item`, with an optional
//!   leading `&` or trailing `(...)`) is checked against the code of the tree: every
//!   text file outside docs and the outputs, comments stripped, so a comment cannot
//!   vouch for itself. A CamelCase name must be an identifier of that code. In
//!   `Type::member`, where the Rust code defines `Type` (struct, enum, trait), `member`
//!   must be its field, variant, or an item of an impl of it or of a trait it
//!   implements; an external type's member need only be an identifier of the code.
//!   In `module::item` of a crate module, `item` must occur in that module's files.
//!   Lower-case names (`get_pages`, `udelay()`) are not checked: most name kernel C.
//!   `EXTERNAL_NAMES` lists the external CamelCase names the code does not use.
//!
//! The failure lists every stale name with its file and line.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Outside files whose first component (scripts/, tools/) is also one of ours.
const EXTERNAL_PATHS: &[&str] = &[
    "scripts/Makefile.build", // install.md: the kernel's, read by the kernel-rust check
    "scripts/Makefile.warn",  // testing.md: the kernel's W=e branch
    "scripts/target.json",    // install.md: the kernel's, made by its make prepare
    "scripts/sign-file",      // install.md: the kernel's signing tool
    "scripts/gendwarfksyms/dwarf.c", // abi.md: the kernel's CRC generator
    "tools/rmmod.c",          // abi.md: kmod's rmmod, where openibd's facts were read
];

/// External CamelCase names a comment explains, which no code of the tree uses.
const EXTERNAL_NAMES: &[&str] = &[
    "Opaque", // device.rs: what the kernel crate's pci::Device wraps
];

/// Extensions that make a backticked word a path.
const EXTENSIONS: &[&str] = &[
    "rs", "c", "h", "sh", "md", "toml", "py", "json", "conf", "txt",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file below `dir` (relative to the root), the output folders and .git skipped.
fn walk(dir: &Path, skip: &HashSet<String>, out: &mut Vec<String>) {
    for e in fs::read_dir(root().join(dir)).expect("a readable folder") {
        let e = e.expect("a directory entry");
        let name = dir.join(e.file_name()).to_string_lossy().into_owned();
        if skip.contains(&name) || name == ".git" {
            continue;
        }
        if e.file_type().expect("a file type").is_dir() {
            walk(Path::new(&name), skip, out);
        } else {
            out.push(name);
        }
    }
}

/// The tokens (identifiers, single punctuation characters) of `src`, without its
/// comments and, in C and Rust, its string and character literals.
fn tokens(src: &str, c_like: bool) -> Vec<String> {
    let (b, mut code, mut i) = (src.as_bytes(), Vec::new(), 0);
    let line = |r: &[u8]| r.iter().position(|&c| c == b'\n').unwrap_or(r.len());
    while i < b.len() {
        let r = &b[i..];
        let skip = match r[0] {
            b'/' if c_like && r.get(1) == Some(&b'/') => line(r),
            b'/' if c_like && r.get(1) == Some(&b'*') => r
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(r.len(), |p| p + 2),
            b'"' if c_like => {
                let mut j = 1;
                while j < r.len() && r[j] != b'"' {
                    j += if r[j] == b'\\' { 2 } else { 1 };
                }
                j + 1
            }
            b'\'' if c_like && r.get(1) == Some(&b'\\') => 4,
            b'\'' if c_like && r.get(2) == Some(&b'\'') => 3,
            b'#' if !c_like && (i == 0 || b[i - 1].is_ascii_whitespace()) => line(r),
            c => {
                code.push(c);
                i += 1;
                continue;
            }
        };
        code.push(b' ');
        i += skip;
    }
    let code = String::from_utf8_lossy(&code);
    let mut toks: Vec<String> = Vec::new();
    let mut word = false;
    for c in code.chars() {
        let w = c.is_alphanumeric() || c == '_';
        match toks.last_mut() {
            Some(t) if w && word => t.push(c),
            _ if !c.is_whitespace() => toks.push(c.to_string()),
            _ => {}
        }
        word = w;
    }
    toks
}

fn is_ident(t: &str) -> bool {
    t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `GpuPin`, `NvP2p`: an upper-case letter, a lower-case one, letters and digits.
fn camel(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() > 1
        && b[0].is_ascii_uppercase()
        && b[1].is_ascii_lowercase()
        && b.iter().all(u8::is_ascii_alphanumeric)
}

/// What the Rust code defines: the members of each type and trait (fields, variants,
/// items of its impls), and the traits each type implements.
#[derive(Default)]
struct Items {
    members: HashMap<String, HashSet<String>>,
    /// The structs, enums, unions and traits.
    defined: HashSet<String>,
    traits_of: HashMap<String, HashSet<String>>,
}

impl Items {
    fn read(&mut self, t: &[String]) {
        let mut i = 0;
        while i + 1 < t.len() {
            let kw = t[i].as_str();
            let owner = match kw {
                "struct" | "enum" | "union" | "trait" => t[i + 1].clone(),
                "impl" => self.impl_type(&t[i + 1..]),
                _ => {
                    i += 1;
                    continue;
                }
            };
            if kw != "impl" {
                self.defined.insert(owner.clone());
            }
            let Some(open) = t[i..].iter().position(|x| x == "{" || x == ";") else {
                break;
            };
            let set = self.members.entry(owner).or_default();
            let (mut depth, mut j) = (0, i + open);
            while j < t.len() && t[i + open] == "{" {
                match t[j].as_str() {
                    "{" | "(" | "[" => depth += 1,
                    "}" | ")" | "]" => depth -= 1,
                    _ => {}
                }
                let prev = t[j - 1].as_str();
                let colon = |k: usize| t.get(k).is_some_and(|n| n == ":");
                let field = colon(j + 1) && !colon(j + 2);
                let variant = kw == "enum" && matches!(prev, "{" | "," | "]");
                let item = matches!(prev, "fn" | "const" | "type");
                if item || (depth == 1 && is_ident(&t[j]) && (field || variant)) {
                    set.insert(t[j].clone());
                }
                if depth == 0 {
                    break;
                }
                j += 1;
            }
            i = j.max(i + 1);
        }
    }

    /// The type of `impl<..> [Trait<..> for] Type<..> {`; records the trait.
    fn impl_type(&mut self, t: &[String]) -> String {
        let (mut angle, mut name, mut tr) = (0, "", None);
        for x in t.iter().map(String::as_str) {
            match x {
                "<" => angle += 1,
                ">" => angle -= 1,
                "for" if angle == 0 => tr = Some(name),
                "{" | ";" | "where" if angle == 0 => break,
                _ if angle == 0 && is_ident(x) => name = x,
                _ => {}
            }
        }
        if let Some(tr) = tr {
            let set = self.traits_of.entry(name.to_owned()).or_default();
            set.insert(tr.to_owned());
        }
        name.to_owned()
    }

    fn has(&self, ty: &str, m: &str) -> bool {
        let of = |t: &str| self.members.get(t).is_some_and(|s| s.contains(m));
        let mut traits = self.traits_of.get(ty).into_iter().flatten();
        of(ty) || traits.any(|t| of(t))
    }
}

/// The backticked spans of a block of lines (a paragraph, a run of comment lines),
/// each with the line it opens on; a span may wrap onto the next line.
fn spans(block: &[(usize, &str)], out: &mut Vec<(usize, String)>) {
    let mut open: Option<(usize, String)> = None;
    for &(n, line) in block {
        for (k, part) in line.split('`').enumerate() {
            if k > 0 {
                match open.take() {
                    Some(span) => out.push(span),
                    None => open = Some((n, String::new())),
                }
            }
            if let Some((_, text)) = &mut open {
                text.push_str(if k == 0 { " " } else { "" });
                text.push_str(part);
            }
        }
    }
}

/// The repository as the check sees it: its top-level entries and files (outputs left
/// out), the identifiers and items of its code, and the tokens of each crate module's
/// files (`src/client.rs` and `src/client/`).
#[derive(Default)]
struct Tree {
    top: HashSet<String>,
    files: Vec<String>,
    ids: HashSet<String>,
    items: Items,
    modules: HashMap<String, HashSet<String>>,
}

impl Tree {
    fn load() -> Self {
        let ignore = fs::read_to_string(root().join(".gitignore")).expect(".gitignore");
        let outputs: HashSet<String> = ignore
            .lines()
            .filter_map(|l| l.strip_suffix('/'))
            .filter(|l| !l.contains('/') && !l.starts_with('#'))
            .map(str::to_owned)
            .collect();
        let mut t = Tree::default();
        walk(Path::new(""), &outputs, &mut t.files);
        for f in &t.files {
            t.top.insert(f.split('/').next().unwrap_or("").to_owned());
            if f.ends_with(".md") || f.starts_with("docs/") || f.starts_with("LICENSE") {
                continue;
            }
            let Ok(text) = fs::read_to_string(root().join(f)) else {
                continue;
            };
            let rust = f.ends_with(".rs");
            let toks = tokens(&text, rust || f.ends_with(".c") || f.ends_with(".h"));
            if rust {
                t.items.read(&toks);
            }
            let module = f
                .strip_prefix("src/")
                .and_then(|m| m.split(['/', '.']).next());
            if let Some(m) = module {
                let set = t.modules.entry(m.into()).or_default();
                set.extend(toks.iter().cloned());
            }
            t.ids.extend(toks.into_iter().filter(|x| is_ident(x)));
        }
        t
    }

    /// Every backticked span of the docs and of the module's comments: file, line, text.
    fn names(&self) -> Vec<(String, usize, String)> {
        let mut names = Vec::new();
        for f in &self.files {
            let dir = f.rsplit_once('/').map_or("", |(d, _)| d);
            let doc =
                f == "README.md" || (f.ends_with(".md") && matches!(dir, "docs" | "docs/bench"));
            let rust = f.starts_with("src/") && f.ends_with(".rs");
            if !(doc || rust) {
                continue;
            }
            let text = fs::read_to_string(root().join(f)).expect("a readable file");
            // Blocks: paragraphs outside code fences; runs of `//` comment lines.
            let (mut blocks, mut block, mut fenced) = (Vec::new(), Vec::new(), false);
            for (n, line) in text.lines().enumerate() {
                let fence = doc && line.trim_start().starts_with("```");
                fenced ^= fence;
                let part = match doc {
                    true if fence || fenced || line.trim().is_empty() => None,
                    true => Some(line),
                    false => line.trim_start().strip_prefix("//"),
                };
                match part {
                    Some(p) => block.push((n + 1, p)),
                    None => blocks.push(std::mem::take(&mut block)),
                }
            }
            blocks.push(block);
            let mut s = Vec::new();
            blocks.iter().for_each(|b| spans(b, &mut s));
            names.extend(s.into_iter().map(|(l, s)| (f.clone(), l, s)));
        }
        names
    }

    fn known(&self, id: &str) -> bool {
        self.ids.contains(id) || EXTERNAL_NAMES.contains(&id)
    }

    /// Why `name` is stale, or `None`.
    fn check(&self, name: &str) -> Option<String> {
        let path_chars = |c: char| c.is_ascii_alphanumeric() || "_.+@/-".contains(c);
        let ext = name
            .rsplit_once('.')
            .is_some_and(|(_, e)| EXTENSIONS.contains(&e));
        if name.chars().all(path_chars) && (name.contains('/') || ext) {
            let p = name.trim_end_matches('/');
            if self.top.contains(p.split('/').next().unwrap_or("")) {
                let ok = EXTERNAL_PATHS.contains(&p) || root().join(p).exists();
                return (!ok).then(|| "no such file or folder".into());
            }
            let tail = format!("/{p}");
            let ok = !p.ends_with(".rs") || self.files.iter().any(|f| f.ends_with(&tail));
            return (!ok).then(|| "no file of the tree ends so".into());
        }
        // An item: `&A<B>::c(...)`.
        let n = name.strip_prefix('&').unwrap_or(name);
        let n = n.split_once('(').map_or(n, |(h, _)| h);
        let mut segs = Vec::new();
        for seg in n.split("::") {
            let (head, args) = seg.split_once('<').unwrap_or((seg, ""));
            let arg_chars = |c: char| c.is_ascii_alphanumeric() || "_<>, :".contains(c);
            if !is_ident(head) || !args.chars().all(arg_chars) {
                return None;
            }
            let mut args = args.split(|c: char| !c.is_ascii_alphanumeric() && c != '_');
            if let Some(a) = args.find(|a| camel(a) && !self.known(a)) {
                return Some(format!("no `{a}` in the code"));
            }
            segs.push(head);
        }
        let items = &self.items;
        match segs[..] {
            [a] if camel(a) && !self.known(a) => Some("not in the code".into()),
            [.., m, b] if self.modules.get(m).is_some_and(|s| !s.contains(b)) => {
                Some(format!("src/{m} has no `{b}`"))
            }
            [.., a, b] if camel(a) && items.defined.contains(a) && !items.has(a, b) => {
                Some(format!("`{a}` has no member `{b}`"))
            }
            [.., a, b] if camel(a) && !items.defined.contains(a) => {
                let bad = [a, b].into_iter().find(|x| !self.known(x));
                bad.map(|x| format!("no `{x}` in the code"))
            }
            _ => None,
        }
    }
}

#[test]
fn backticked_names_exist() {
    let tree = Tree::load();
    let names = tree.names();
    assert!(names.len() > 1000, "only {} backticked names", names.len());
    let stale: BTreeSet<String> = names
        .iter()
        .filter_map(|(f, line, name)| Some(format!("{f}:{line}: `{name}`: {}", tree.check(name)?)))
        .collect();
    let list = stale.iter().cloned().collect::<Vec<_>>().join("\n");
    assert!(
        stale.is_empty(),
        "{} stale backticked names:\n{list}",
        stale.len()
    );
}

/// The check itself: it flags what no longer exists and passes what does.
#[test]
fn the_check_tells_stale_from_live() {
    let tree = Tree::load();
    let stale = "src/no_such.rs tests/fakes/no_such/ no_such.rs NoSuchType \
                 GpuPin::no_such_fn Client<NoSuchMode> registry::no_such_item";
    for n in stale.split(' ') {
        assert!(tree.check(n).is_some(), "`{n}` passes");
    }
    let live = "src/client/user.rs tests/fakes/ client/user.rs GpuPin GpuPin::unmap \
                PinError::Freed Client<Persistent> &DmaMapping registry::PinKey \
                /sys/module/peermem drivers/infiniband/core/peer_mem.c Arc::as_ptr";
    for n in live.split(' ') {
        assert_eq!(tree.check(n), None, "`{n}`");
    }
}
