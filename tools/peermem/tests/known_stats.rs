// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The counter names are declared once, in the module's src/stats.rs (`Stats::COUNTERS`,
//! then `refused_` and the `name` of each of `Refusal::REASONS`): `peermem status` knows exactly those,
//! in the `stats` file's order.

use std::fs;
use std::path::Path;

use peermem_tool::status::KNOWN_STATS;

/// The body of the const table `name` (from its `=` to its `];`).
fn table<'a>(src: &'a str, name: &str) -> &'a str {
    let start = src
        .find(&format!("const {name}"))
        .unwrap_or_else(|| panic!("src/stats.rs has no const {name}"));
    let rest = &src[start..];
    let body = &rest[..rest.find("];").unwrap_or_else(|| panic!("{name}: no `];`"))];
    &body[body.find('=').unwrap_or_else(|| panic!("{name}: no `=`"))..]
}

/// The quoted strings of `body`, in order.
fn quoted(body: &str) -> Vec<String> {
    body.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The strings given as `field: "..."` in `body`, in order.
fn fields(body: &str, field: &str) -> Vec<String> {
    body.split(&format!("{field}: "))
        .skip(1)
        .filter_map(|rest| quoted(rest).into_iter().next())
        .collect()
}

#[test]
fn the_status_tool_knows_exactly_the_modules_counters() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../src/stats.rs");
    let src = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let counters = quoted(table(&src, "COUNTERS"));
    let refusals = fields(table(&src, "REASONS"), "name");
    assert!(!counters.is_empty(), "no counter found in Stats::COUNTERS");
    assert!(!refusals.is_empty(), "no refusal found in Refusal::REASONS");
    let module: Vec<String> = counters
        .into_iter()
        .chain(refusals.iter().map(|r| format!("refused_{r}")))
        .collect();
    let tool: Vec<String> = KNOWN_STATS.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(
        tool, module,
        "tools/peermem/src/status.rs KNOWN_STATS must list src/stats.rs's counters, in order"
    );
}
