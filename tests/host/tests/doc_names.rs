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
//!   In `a::b::item` (any depth, `crate::` or not; a path relative to a comment's own
//!   module too), where `a::b` names module files of src/ (`a/b.rs`, `a/b/`), `item`
//!   must be defined in or brought in by them, and in `a::b::Type::member`, `member`
//!   must be `Type`'s; a path beginning with a crate module that names no module and
//!   no item of it is stale. Other lower-case names (`get_pages`, `udelay()`) are
//!   checked only where a sentence places them (below): most name kernel C.
//!   `EXTERNAL_NAMES` lists the external CamelCase names the code does not use.
//! - A placement (issue #62: a name can exist and the sentence still be false): where
//!   a sentence says where a name is, in one of the forms `placements` reads, the
//!   file must hold it: `X` in `path` (the file's code uses it), `X` defined in /
//!   lives in / written in `path` and `path`: `X` (the file defines it),
//!   `Type`'s methods in `a` and `b` (every impl block of `Type` is in those files).
//!
//! The failure lists every stale name and false placement with its file and line.

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

/// `CallbackPin`, `NvP2p`: an upper-case letter, a lower-case one, letters and digits.
fn camel(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() > 1
        && b[0].is_ascii_uppercase()
        && b[1].is_ascii_lowercase()
        && b.iter().all(u8::is_ascii_alphanumeric)
}

/// The identifiers among `toks`.
fn idents(toks: &[String]) -> HashSet<String> {
    toks.iter().filter(|x| is_ident(x)).cloned().collect()
}

/// The names a Rust file defines (each name after a defining keyword) and the names
/// its `use` items bring into its namespace.
fn rust_defs(t: &[String]) -> (HashSet<String>, HashSet<String>) {
    let (mut defs, mut uses) = (HashSet::new(), HashSet::new());
    let mut i = 0;
    while i + 1 < t.len() {
        match t[i].as_str() {
            "fn" | "struct" | "enum" | "union" | "trait" | "const" | "static" | "type" | "mod" => {
                defs.insert(t[i + 1].clone());
            }
            "macro_rules" if t[i + 1] == "!" => {
                defs.extend(t.get(i + 2).cloned());
            }
            "use" => {
                let end = t[i..]
                    .iter()
                    .position(|x| x == ";")
                    .map_or(t.len(), |e| i + e);
                uses.extend(idents(&t[i + 1..end]));
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    (defs, uses)
}

/// What the Rust code defines: the members of each type and trait (fields, variants,
/// items of its impls), and the traits each type implements.
#[derive(Default)]
struct Items {
    members: HashMap<String, HashSet<String>>,
    /// The structs, enums, unions and traits.
    defined: HashSet<String>,
    traits_of: HashMap<String, HashSet<String>>,
    /// The types with an impl block (inherent or of a trait) in this code.
    implemented: HashSet<String>,
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
            } else {
                self.implemented.insert(owner.clone());
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
/// each with the line it opens on and the text between it and the span before it in
/// the block (`None` for the block's first); a span may wrap onto the next line.
fn spans(block: &[(usize, &str)], out: &mut Vec<Span>) {
    let (mut open, mut gap): (Option<(usize, String)>, Option<String>) = (None, None);
    for &(n, line) in block {
        for (k, part) in line.split('`').enumerate() {
            if k > 0 {
                match open.take() {
                    Some((line, text)) => {
                        let before = gap.replace(String::new());
                        out.push(Span { line, text, before });
                    }
                    None => open = Some((n, String::new())),
                }
            }
            let text = match (&mut open, &mut gap) {
                (Some((_, text)), _) | (None, Some(text)) => text,
                (None, None) => continue,
            };
            text.push_str(if k == 0 { " " } else { "" });
            text.push_str(part);
        }
    }
}

/// A backticked span: its line, its text, the text since the span before it.
struct Span {
    line: usize,
    text: String,
    before: Option<String>,
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
    /// Per code file: the names it defines (Rust: after `fn`, `struct`, `enum`,
    /// `union`, `trait`, `const`, `static`, `type`, `mod`, `macro_rules!`; other
    /// code: its identifiers).
    defs: HashMap<String, HashSet<String>>,
    /// Per Rust file: the names its `use` items bring into its namespace.
    uses: HashMap<String, HashSet<String>>,
    /// Per code file: the identifiers of its code (comments and literals left out).
    code_ids: HashMap<String, HashSet<String>>,
    /// Per Rust file: its types' members and impl blocks.
    file_items: HashMap<String, Items>,
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
                t.file_items.entry(f.clone()).or_default().read(&toks);
            }
            t.code_ids.insert(f.clone(), idents(&toks));
            if rust {
                let (defs, uses) = rust_defs(&toks);
                t.defs.insert(f.clone(), defs);
                t.uses.insert(f.clone(), uses);
            } else {
                t.defs.insert(f.clone(), idents(&toks));
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
    fn names(&self) -> Vec<(String, Span)> {
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
            names.extend(s.into_iter().map(|s| (f.clone(), s)));
        }
        names
    }

    /// The files of src/ that hold module `a::b::c` (`a/b/c.rs` and `a/b/c/`, from
    /// the crate's root or below it: a comment may name a module relative to its own),
    /// or `None`. Only lower-case segments name modules.
    fn module_files(&self, segs: &[&str]) -> Option<Vec<String>> {
        if segs
            .iter()
            .any(|s| !s.starts_with(|c: char| c.is_ascii_lowercase()))
        {
            return None;
        }
        let m = segs.join("/");
        let (file, dir) = (format!("/{m}.rs"), format!("/{m}/"));
        let files: Vec<String> = self
            .files
            .iter()
            .filter(|f| f.starts_with("src/") && f.ends_with(".rs"))
            .filter(|f| f.ends_with(&file) || f.contains(&dir))
            .cloned()
            .collect();
        (!files.is_empty()).then_some(files)
    }

    /// The code files a path of ours names (a file, or the files of a folder; a `.rs`
    /// path or module folder relative to src/ as `check` resolves it), or `None`
    /// where it names no code file of ours.
    fn path_files(&self, p: &str) -> Option<Vec<String>> {
        let p = p.trim_end_matches('/');
        let ours = self.top.contains(p.split('/').next().unwrap_or(""));
        let (file, dir) = (format!("/{p}"), format!("/{p}/"));
        let files: Vec<String> = self
            .files
            .iter()
            .filter(|f| self.defs.contains_key(*f))
            .filter(|f| match ours {
                true => *f == p || f.starts_with(&format!("{p}/")),
                false => f.starts_with("src/") && (f.ends_with(&file) || f.contains(&dir)),
            })
            .cloned()
            .collect();
        (!files.is_empty() && !EXTERNAL_PATHS.contains(&p)).then_some(files)
    }

    /// Whether some impl or definition of `ty` in `files` has `m` (a file that is not
    /// Rust: whether its code has both).
    fn has_member(&self, files: &[String], ty: &str, m: &str) -> bool {
        files.iter().any(|f| match self.file_items.get(f) {
            Some(i) => i.members.get(ty).is_some_and(|s| s.contains(m)),
            None => self.defs[f].contains(ty) && self.defs[f].contains(m),
        })
    }

    /// Why the placement of `name` in the files of `targets` is false, or `None` (also
    /// where `name` is not an item, or a target names no code of ours).
    fn check_placed(&self, name: &str, targets: &[&str], how: Placed) -> Option<String> {
        let mut files = Vec::new();
        for t in targets {
            files.extend(self.path_files(t)?);
        }
        let n = name.strip_prefix('&').unwrap_or(name);
        let n = n.split_once('(').map_or(n, |(h, _)| h);
        let segs: Vec<&str> = n
            .split("::")
            .map(|s| s.split('<').next().unwrap_or(s))
            .collect();
        if segs.iter().any(|s| !is_ident(s)) {
            return None;
        }
        let place = targets
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(" and ");
        if how == Placed::Methods {
            let ty = segs[segs.len() - 1];
            let mut outside: Vec<&String> = self
                .file_items
                .iter()
                .filter(|(f, i)| i.implemented.contains(ty) && !files.contains(f))
                .map(|(f, _)| f)
                .collect();
            outside.sort();
            return (!outside.is_empty())
                .then(|| format!("`{ty}` also has methods in {outside:?}"));
        }
        if how == Placed::Used {
            let ids = |f: &String| &self.code_ids[f];
            // (`Type::method` is used as `x.method()`: the last name is what is there.)
            let x = segs[segs.len() - 1];
            let used = files.iter().any(|f| ids(f).contains(x));
            return (!used).then(|| format!("no `{x}` in the code of {place}"));
        }
        let ok = match segs[..] {
            [.., ty, m] if camel(ty) => self.has_member(&files, ty, m),
            [.., item] => files.iter().any(|f| self.defs[f].contains(item)),
            [] => true,
        };
        (!ok).then(|| format!("not defined in {place}"))
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
        let segs: Vec<&str> = segs.into_iter().skip_while(|s| *s == "crate").collect();
        // `a::b::item...`: the longest leading module path that names files of src/.
        let module = (1..segs.len())
            .rev()
            .find_map(|k| Some((k, self.module_files(&segs[..k])?)));
        if let Some((k, files)) = module {
            let path = segs[..k].join("::");
            return match segs[k..] {
                [item, ..]
                    if !files
                        .iter()
                        .any(|f| self.defs[f].contains(item) || self.uses[f].contains(item)) =>
                {
                    Some(format!("module `{path}` defines no `{item}`"))
                }
                [ty, m, ..] if camel(ty) && !self.items.has(ty, m) => {
                    Some(format!("`{path}::{ty}` has no member `{m}`"))
                }
                _ => None,
            };
        }
        let items = &self.items;
        match segs[..] {
            [a] if camel(a) && !self.known(a) => Some("not in the code".into()),
            [m, b, ..] if self.modules.contains_key(m) => {
                Some(format!("src/{m} has no module or item `{b}`"))
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
        .filter_map(|(f, s)| {
            Some(format!(
                "{f}:{}: `{}`: {}",
                s.line,
                s.text,
                tree.check(&s.text)?
            ))
        })
        .collect();
    let list = stale.iter().cloned().collect::<Vec<_>>().join("\n");
    assert!(
        stale.is_empty(),
        "{} stale backticked names:\n{list}",
        stale.len()
    );
}

/// What a sentence says of a name and a file.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Placed {
    /// `` `name` in `path` `` (also `, in`, `(in`): the file's code uses it (its last
    /// name: a method is called without its type).
    Used,
    /// `` `name` defined in `path` `` (or `is in`, `lives in`, `written in`, `kept
    /// in`), and `` `path`: `name` ``: the file defines it.
    Defined,
    /// `` `Type`'s methods in `path` ``: every impl block of the type is there.
    Methods,
}

/// The placements a span list makes: (the placed span's index, the targets' indices,
/// what is said). Any target list may go on: `` in `a`, `b` and `c` ``; a colon's
/// list of names too: `` `path`: `a`, `b` and `c` ``.
fn placements(spans: &[Span]) -> Vec<(usize, Vec<usize>, Placed)> {
    let gap = |i: usize| spans[i].before.as_deref().map(str::trim);
    let joins = |i: usize| matches!(gap(i), Some("," | "and" | ", and" | "or"));
    let path = |i: usize| {
        let t: &str = &spans[i].text;
        t.contains('/')
            || t.rsplit_once('.')
                .is_some_and(|(_, e)| EXTENSIONS.contains(&e))
    };
    // The list that starts at span i: paths, or (after a colon) names.
    let list = |i: usize, paths: bool| {
        let mut t = vec![i];
        while t
            .last()
            .is_some_and(|&j| j + 1 < spans.len() && joins(j + 1) && path(j + 1) == paths)
        {
            t.push(t[t.len() - 1] + 1);
        }
        t
    };
    let mut out = Vec::new();
    for i in 1..spans.len() {
        let Some(g) = gap(i) else { continue };
        let g = g.trim_start_matches([',', '(']).trim();
        let words: Vec<&str> = g.split_whitespace().collect();
        let verbs = ["is", "are", "lives", "live", "defined", "written", "kept"];
        match words[..] {
            ["in"] => out.push((i - 1, list(i, true), Placed::Used)),
            [v, "in"] if verbs.contains(&v) => out.push((i - 1, list(i, true), Placed::Defined)),
            ["'s" | "’s", "methods", "in"] => out.push((i - 1, list(i, true), Placed::Methods)),
            _ if g == ":" => {
                for placed in list(i, false) {
                    out.push((placed, vec![i - 1], Placed::Defined));
                }
            }
            _ => {}
        }
    }
    out
}

/// Every sentence that places a name in a file of ours (`X` in `path`, `path`: `X`,
/// `Type`'s methods in `path`) is true of the code.
#[test]
fn placed_names_are_where_they_are_said_to_be() {
    let tree = Tree::load();
    let mut by_file: Vec<(String, Vec<Span>)> = Vec::new();
    for (f, s) in tree.names() {
        match by_file.last_mut() {
            Some((g, v)) if *g == f => v.push(s),
            _ => by_file.push((f, vec![s])),
        }
    }
    let (mut checked, mut wrong) = (0, BTreeSet::new());
    for (f, spans) in &by_file {
        for (placed, targets, how) in placements(spans) {
            let t: Vec<&str> = targets.iter().map(|&j| spans[j].text.as_str()).collect();
            let s = &spans[placed];
            if targets
                .iter()
                .any(|&j| tree.path_files(&spans[j].text).is_none())
            {
                continue;
            }
            checked += 1;
            if std::env::var_os("PEERMEM_DOC_TRACE").is_some() {
                eprintln!("{f}:{}: `{}` in {t:?} ({how:?})", s.line, s.text);
            }
            if let Some(why) = tree.check_placed(&s.text, &t, how) {
                wrong.insert(format!("{f}:{}: `{}` in {t:?}: {why}", s.line, s.text));
            }
        }
    }
    eprintln!("{checked} placements checked");
    assert!(checked >= 10, "only {checked} placements checked");
    let list = wrong.iter().cloned().collect::<Vec<_>>().join("\n");
    assert!(
        wrong.is_empty(),
        "{} names placed where they are not:\n{list}",
        wrong.len()
    );
}

/// The placement check tells a true placement from a false one, in each form.
#[test]
fn the_placement_check_tells_true_from_false() {
    let tree = Tree::load();
    use Placed::*;
    let cases = [
        ("check_page_table", &["nv_p2p/error.rs"][..], Defined, true),
        ("check_page_table", &["nv_p2p/pin.rs"][..], Defined, false),
        ("check_page_table", &["nv_p2p/state.rs"][..], Used, false),
        (
            "CallbackPin::unmap",
            &["src/nv_p2p/mapping.rs"][..],
            Defined,
            true,
        ),
        ("CallbackPin::unmap", &["nv_p2p/pin.rs"][..], Defined, false),
        ("PinState", &["nv_p2p/"][..], Defined, true),
        ("CallbackPin", &["nv_p2p/pin.rs"][..], Methods, false),
        (
            "NvP2p",
            &["nv_p2p/driver.rs", "nv_p2p/pin.rs", "nv_p2p/persistent.rs"][..],
            Methods,
            true,
        ),
        ("PEERMEM_KUNIT", &["Kbuild"][..], Used, true),
        ("NO_SUCH_VARIABLE", &["Kbuild"][..], Used, false),
    ];
    for (name, targets, how, holds) in cases {
        let why = tree.check_placed(name, targets, how);
        assert_eq!(
            why.is_none(),
            holds,
            "`{name}` in {targets:?} ({how:?}): {why:?}"
        );
    }
    let text = "`a` in `src/x.rs`, `b`'s methods in `c.rs` and `d/`; `e.rs`: `f`, `g` and `h`";
    let mut spans = Vec::new();
    self::spans(&[(1, text)], &mut spans);
    let p = placements(&spans);
    let d = Defined;
    assert_eq!(
        p,
        [
            (0, vec![1], Used),
            (2, vec![3, 4], Methods),
            (6, vec![5], d),
            (7, vec![5], d),
            (8, vec![5], d)
        ]
    );
    // Nested module paths, lower-case items among them.
    for n in [
        "nv_p2p::pin::no_such_fn",
        "nv_p2p::no_such_mod::x",
        "client::user::NoSuch",
    ] {
        assert!(tree.check(n).is_some(), "`{n}` passes");
    }
    for n in [
        "nv_p2p::error::check_page_table",
        "pin::CallbackPin::unmap",
        "crate::registry::PinKey",
    ] {
        assert_eq!(tree.check(n), None, "`{n}`");
    }
}

/// The check itself: it flags what no longer exists and passes what does.
#[test]
fn the_check_tells_stale_from_live() {
    let tree = Tree::load();
    let stale = "src/no_such.rs tests/fakes/no_such/ no_such.rs NoSuchType \
                 CallbackPin::no_such_fn Client<NoSuchMode> registry::no_such_item";
    for n in stale.split(' ') {
        assert!(tree.check(n).is_some(), "`{n}` passes");
    }
    let live = "src/client/user.rs tests/fakes/ client/user.rs CallbackPin CallbackPin::unmap \
                PinError::Freed Client<Persistent> &DmaMapping registry::PinKey \
                /sys/module/peermem drivers/infiniband/core/peer_mem.c Arc::as_ptr";
    for n in live.split(' ') {
        assert_eq!(tree.check(n), None, "`{n}`");
    }
}
