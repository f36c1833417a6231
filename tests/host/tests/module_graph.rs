// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The module's files form layers without cycles (docs/architecture.md, "Layers").
//!
//! Every `use` path and every `crate::`/`super::` path in code of `src/**/*.rs` is
//! resolved to the file of the module it names (through `pub(...) use` re-exports of
//! a child's items), which gives a graph of files. The test fails, printing the cycle,
//! when:
//!
//! - the files form a cycle; a child's use of its own ancestors is not an edge (a
//!   child lives in its parent's namespace), but a use of a sibling through the
//!   parent's re-export is;
//! - the crate's top-level modules (a directory module counts as one) form a cycle;
//! - a top-level module imports one of a higher layer of the table in
//!   docs/architecture.md, or is missing from it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A module path below the crate root: `["nv_p2p", "pin"]`.
type ModPath = Vec<String>;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other,
}

/// The tokens of Rust source that matter for paths: comments, strings and character
/// literals are skipped.
fn lex(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                toks.push(Tok::Ident("r".into()));
                i += 1;
                continue;
            }
            j += 1;
            let end: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&end) {
                j += 1;
            }
            i = j + end.len();
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push(Tok::Ident(src[s..i].to_owned()));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push(Tok::Other);
        } else {
            i += 1;
            toks.push(match c {
                b':' if b.get(i) == Some(&b':') => {
                    i += 1;
                    Tok::PathSep
                }
                b'{' => Tok::Open,
                b'}' => Tok::Close,
                b',' => Tok::Comma,
                b';' => Tok::Semi,
                b'*' => Tok::Star,
                _ => Tok::Other,
            });
        }
    }
    toks
}

/// The paths of a use tree starting at `toks[*i]`, up to its `;`.
fn use_tree(toks: &[Tok], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*i) {
            Some(Tok::Ident(s)) if s == "as" => {
                *i += 2;
            }
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
            }
            Some(Tok::PathSep) => *i += 1,
            Some(Tok::Star) => {
                path.push("*".into());
                *i += 1;
            }
            Some(Tok::Open) => {
                *i += 1;
                loop {
                    match toks.get(*i) {
                        Some(Tok::Close) => {
                            *i += 1;
                            break;
                        }
                        Some(Tok::Comma) => *i += 1,
                        None => return,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
                return;
            }
            _ => {
                if path.len() > prefix.len() {
                    out.push(path);
                }
                return;
            }
        }
    }
}

/// One path named in a file, with the inline modules it was named in.
struct Named {
    inline: Vec<String>,
    path: Vec<String>,
    /// Named by a `pub(...) use` (a re-export).
    reexport: bool,
}

/// Every path a file names, and the modules it declares (`mod x;`).
fn scan(src: &str) -> (Vec<Named>, Vec<String>) {
    let toks = lex(src);
    let mut named = Vec::new();
    let mut children = Vec::new();
    // Inline modules open, each with the brace depth it opened at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Open => {
                depth += 1;
                i += 1;
            }
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(k) if k == "mod" => {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    match toks.get(i + 2) {
                        Some(Tok::Semi) if inline.is_empty() => children.push(name.clone()),
                        Some(Tok::Open) => {
                            inline.push((name.clone(), depth + 1));
                        }
                        _ => {}
                    }
                }
                i += 2;
            }
            Tok::Ident(k) if k == "use" => {
                // `pub(crate) use`: `pub`, `(`, `crate`, `)` came before.
                let reexport = (1..=4).any(|back| {
                    i >= back && matches!(&toks[i - back], Tok::Ident(p) if p == "pub")
                });
                i += 1;
                let mut paths = Vec::new();
                use_tree(&toks, &mut i, &[], &mut paths);
                let here: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
                named.extend(paths.into_iter().map(|path| Named {
                    inline: here.clone(),
                    path,
                    reexport,
                }));
            }
            Tok::Ident(k)
                if (k == "crate" || k == "super") && toks.get(i + 1) == Some(&Tok::PathSep) =>
            {
                let mut path = vec![k.clone()];
                i += 1;
                while toks.get(i) == Some(&Tok::PathSep) {
                    match toks.get(i + 1) {
                        Some(Tok::Ident(s)) => {
                            path.push(s.clone());
                            i += 2;
                        }
                        _ => break,
                    }
                }
                named.push(Named {
                    inline: inline.iter().map(|(n, _)| n.clone()).collect(),
                    path,
                    reexport: false,
                });
            }
            _ => i += 1,
        }
    }
    (named, children)
}

struct Crate {
    /// Each module file: its path, source file and what it names.
    files: BTreeMap<ModPath, (PathBuf, Vec<Named>)>,
}

impl Crate {
    fn load() -> Crate {
        let mut files = BTreeMap::new();
        let mut todo = vec![(ModPath::new(), root().join("src/peermem.rs"))];
        while let Some((m, file)) = todo.pop() {
            let src =
                fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let (named, children) = scan(&src);
            let dir = if m.is_empty() {
                root().join("src")
            } else {
                file.with_extension("")
            };
            for c in children {
                let mut cm = m.clone();
                cm.push(c.clone());
                todo.push((cm, dir.join(format!("{c}.rs"))));
            }
            files.insert(m, (file, named));
        }
        Crate { files }
    }

    /// The name a file re-exports as `name`, as the path it re-exports.
    fn reexport(&self, m: &ModPath, name: &str) -> Option<ModPath> {
        let (_, named) = self.files.get(m)?;
        named
            .iter()
            .filter(|n| n.reexport && n.inline.is_empty())
            .find(|n| n.path.last().map(String::as_str) == Some(name))
            .and_then(|n| self.resolve(m, &[], &n.path))
    }

    /// The file of the module a path named in file `m` (inside its inline modules
    /// `inline`) resolves to; `None` for another crate.
    fn resolve(&self, m: &ModPath, inline: &[String], path: &[String]) -> Option<ModPath> {
        // The module the path starts from, inline modules included.
        let mut cur: Vec<String> = m.iter().chain(inline).cloned().collect();
        let mut segs = path.iter().peekable();
        match segs.peek().map(|s| s.as_str()) {
            Some("crate") => {
                cur.clear();
                segs.next();
            }
            Some("super") => {
                while segs.peek().map(|s| s.as_str()) == Some("super") {
                    cur.pop()?;
                    segs.next();
                }
            }
            Some("self") => {
                segs.next();
            }
            Some(first) => {
                let mut child = m.clone();
                child.push(first.to_owned());
                if !inline.is_empty() || !self.files.contains_key(&child) {
                    // Another crate (`kernel`, `core`), or an item of an inline module.
                    return None;
                }
            }
            None => return None,
        }
        // Down to the deepest module file the path names.
        let mut file: ModPath = cur.clone();
        while !self.files.contains_key(&file) {
            file.pop();
        }
        for s in segs {
            let mut next = file.clone();
            next.push(s.clone());
            if self.files.contains_key(&next) {
                file = next;
            } else {
                if file != *m {
                    if let Some(target) = self.reexport(&file, s) {
                        return Some(target);
                    }
                }
                break;
            }
        }
        Some(file)
    }

    /// Edges between files: what each file names, but its own ancestors.
    fn edges(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut g: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for (m, (_, named)) in &self.files {
            let out = g.entry(m.clone()).or_default();
            for n in named {
                if let Some(t) = self.resolve(m, &n.inline, &n.path) {
                    if t != *m && !m.starts_with(&t) {
                        out.insert(t);
                    }
                }
            }
        }
        g
    }
}

fn show(m: &ModPath) -> String {
    if m.is_empty() {
        "src/peermem.rs".into()
    } else {
        format!("src/{}.rs", m.join("/"))
    }
}

/// Every elementary cycle found by a depth-first search (one per back edge).
fn cycles(g: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    fn dfs(
        g: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        n: &ModPath,
        stack: &mut Vec<ModPath>,
        done: &mut BTreeSet<ModPath>,
        out: &mut Vec<Vec<ModPath>>,
    ) {
        stack.push(n.clone());
        for t in g.get(n).into_iter().flatten() {
            if let Some(pos) = stack.iter().position(|s| s == t) {
                let mut c = stack[pos..].to_vec();
                c.push(t.clone());
                out.push(c);
            } else if !done.contains(t) {
                dfs(g, t, stack, done, out);
            }
        }
        stack.pop();
        done.insert(n.clone());
    }
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    for n in g.keys() {
        if !done.contains(n) {
            dfs(g, n, &mut Vec::new(), &mut done, &mut out);
        }
    }
    out
}

/// The layers of docs/architecture.md's table, lowest first, with the top-level
/// modules each lists (`name.rs`, or a directory module `name/`).
fn layers() -> Vec<(String, BTreeSet<String>)> {
    let doc = fs::read_to_string(root().join("docs/architecture.md")).expect("architecture.md");
    let table = doc
        .split("## Layers")
        .nth(1)
        .expect("architecture.md has no Layers section");
    let mut out = Vec::new();
    for line in table.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        if cols.len() < 4 || cols[1] == "layer" || cols[1].starts_with("---") {
            continue;
        }
        // Top-level names only: what is not inside parentheses.
        let mut depth = 0;
        let mut top = String::new();
        for ch in cols[2].chars() {
            match ch {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ if depth == 0 => top.push(ch),
                _ => {}
            }
        }
        let names = top
            .split('`')
            .skip(1)
            .step_by(2)
            .filter_map(|s| s.strip_suffix(".rs").or_else(|| s.strip_suffix('/')))
            .filter(|s| !s.contains('/'))
            .map(str::to_owned)
            .collect();
        out.push((cols[1].to_owned(), names));
    }
    out
}

#[test]
fn files_import_without_cycles() {
    let k = Crate::load();
    let found = cycles(&k.edges());
    let text: Vec<String> = found
        .iter()
        .map(|c| c.iter().map(show).collect::<Vec<_>>().join(" -> "))
        .collect();
    assert!(
        text.is_empty(),
        "import cycles between files:\n  {}",
        text.join("\n  ")
    );
}

/// The top-level module a file belongs to.
fn top(m: &ModPath) -> ModPath {
    m.iter().take(1).cloned().collect()
}

#[test]
fn modules_import_without_cycles() {
    let k = Crate::load();
    let mut g: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, tos) in k.edges() {
        let out = g.entry(top(&from)).or_default();
        for t in tos {
            if top(&t) != top(&from) && !t.is_empty() {
                out.insert(top(&t));
            }
        }
    }
    let text: Vec<String> = cycles(&g)
        .iter()
        .map(|c| {
            c.iter()
                .map(|m| m.join("/"))
                .collect::<Vec<_>>()
                .join(" -> ")
        })
        .collect();
    assert!(
        text.is_empty(),
        "import cycles between modules:\n  {}",
        text.join("\n  ")
    );
}

#[test]
fn imports_point_down_the_layers() {
    let k = Crate::load();
    let layers = layers();
    assert!(
        layers.len() >= 3,
        "architecture.md: no layer table ({layers:?})"
    );
    let layer_of = |m: &str| layers.iter().position(|(_, names)| names.contains(m));
    let mut bad = Vec::new();
    for m in k.files.keys().filter(|m| m.len() == 1) {
        if layer_of(&m[0]).is_none() {
            bad.push(format!(
                "{} is in no layer of docs/architecture.md",
                show(m)
            ));
        }
    }
    for (from, tos) in k.edges() {
        let (Some(f), Some(lf)) = (from.first(), from.first().and_then(|f| layer_of(f))) else {
            continue;
        };
        for t in tos {
            let Some(tt) = t.first() else { continue };
            if tt == f {
                continue;
            }
            if let Some(lt) = layer_of(tt) {
                if lt > lf {
                    bad.push(format!(
                        "{} ({}) imports {} ({}), a higher layer",
                        show(&from),
                        layers[lf].0,
                        show(&t),
                        layers[lt].0
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "layer violations:\n  {}", bad.join("\n  "));
}

/// The counters stand below what they count (issue #62): `stats.rs` imports nothing of
/// the pins' and the core's wrappers, the client or the registry, only the foundations
/// and the C glue (its rate limit); which error is which refusal is the client's.
#[test]
fn counters_import_nothing_they_count() {
    let k = Crate::load();
    let layers = layers();
    let foundations = &layers[0].1;
    let stats = vec!["stats".to_owned()];
    let edges = k.edges();
    let tos = edges.get(&stats).expect("src/stats.rs in the graph");
    let bad: Vec<String> = tos
        .iter()
        .filter_map(|t| t.first())
        .filter(|t| !foundations.contains(*t) && !["glue", "bindings"].contains(&t.as_str()))
        .cloned()
        .collect();
    assert!(bad.is_empty(), "src/stats.rs imports {bad:?}");
    assert!(
        foundations.contains("compat"),
        "the first layer is not the foundations: {layers:?}"
    );
}

/// The logic layer's files with `unsafe` are those docs/architecture.md names in its
/// paragraph on them.
#[test]
fn logic_unsafe_is_what_the_doc_says() {
    let k = Crate::load();
    let layers = layers();
    let logic = &layers
        .iter()
        .find(|(name, _)| name.starts_with("logic"))
        .expect("architecture.md: no logic layer")
        .1;
    let mut found = BTreeSet::new();
    for (m, (file, _)) in &k.files {
        if m.first().is_some_and(|t| logic.contains(t)) {
            let src = fs::read_to_string(file).expect("a source file");
            if lex(&src).contains(&Tok::Ident("unsafe".into())) {
                found.insert(format!("{}.rs", m.join("/")));
            }
        }
    }
    let doc = fs::read_to_string(root().join("docs/architecture.md")).expect("architecture.md");
    let para = doc
        .split("\n\n")
        .find(|p| p.starts_with("The logic layer calls no foreign function"))
        .expect("architecture.md: no paragraph on the logic layer's unsafe");
    let named: BTreeSet<String> = para
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.ends_with(".rs") && !s.contains("tests/"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        found, named,
        "the logic layer's files with `unsafe` (left) are not those docs/architecture.md names (right)"
    );
}
