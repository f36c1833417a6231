// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The module's `use` lists are vertical, one item per line, as the kernel's coding
//! guidelines ask (Documentation/rust/coding-guidelines.rst, "Imports"): rustfmt keeps
//! that layout when the last item of a list carries an empty `//` comment.

use std::fs;
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).expect("src/ is readable") {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn use_lists_have_one_item_per_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut bad = Vec::new();
    for f in files {
        let text = fs::read_to_string(&f).expect("a source file is readable");
        let mut in_use = false;
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("").trim_end();
            let t = code.trim_start();
            let starts = t.starts_with("use ") || (t.starts_with("pub") && t.contains(" use "));
            if starts {
                in_use = true;
            }
            if !in_use {
                continue;
            }
            // An item after an opening brace, or a comma that is not the line's last.
            let after_brace = code
                .find('{')
                .is_some_and(|i| !code[i + 1..].trim().is_empty());
            let inner_comma = code.find(',').is_some_and(|i| i + 1 < code.len());
            if after_brace || inner_comma {
                bad.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
            if code.ends_with(';') {
                in_use = false;
            }
        }
    }
    assert!(
        bad.is_empty(),
        "use lists with more than one item on a line (see Documentation/rust/coding-guidelines.rst):\n  {}",
        bad.join("\n  ")
    );
}
