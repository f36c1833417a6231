// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The comparison table, the targets (PASS/FAIL) and the CSV.

use std::fmt::Write as _;

use crate::parse::{human_size, median, Key, Mode, Results, Strategy};

/// Sizes of the latency group.
pub const LATENCY_SIZES: [u64; 3] = [65536, 2097152, 67108864];
/// 64 KiB.
pub const SIZE_64K: u64 = 65536;
/// 2 MiB.
pub const SIZE_2M: u64 = 2097152;
/// 64 MiB.
pub const SIZE_64M: u64 = 67108864;
/// 64 GiB: half an H100's BAR1, one registration (`huge` rows).
pub const SIZE_64G: u64 = 64 << 30;
/// Pin cost (µs) of the costly latency run.
pub const COSTLY_PIN_US: u64 = 50;
/// Every 64 KiB page of an H100's 128 GiB BAR1: the largest scaling point of `make bench`.
pub const WHOLE_BAR1_PAGES: u64 = 2_097_152;
/// Every 64 KiB page of an H200's 256 GiB BAR1: the bench kit's largest point
/// (`run-bench --scale 4194304`), judged where the run measured it.
pub const WHOLE_H200_BAR1_PAGES: u64 = 4_194_304;
/// The module-memory budget of one live 64 KiB registration in `mode` (issue 38: 256 B
/// in persistent mode, 320 B in callback mode, whose pins can be shared).
pub fn small_reg_bytes(mode: Mode) -> u64 {
    match mode {
        Mode::Persistent => 256,
        Mode::Callback => 320,
    }
}

const EPS: f64 = 1e-9;

/// The registration time target at each latency size: metric, pin cost, limit (as a
/// multiple of the reference's figure).
const REG_TARGETS: [(&str, u64, f64); 1] = [("reg_mean_ns", COSTLY_PIN_US, 0.55)];

/// Module bytes per live registration against the baseline's: size, limit (as a
/// multiple of the reference's figure), and the limit in words.
const MEMORY_TARGETS: [(u64, f64, &str); 1] = [(SIZE_64M, 0.1, "1/10 of ")];

/// Sizes at which all the memory a live registration holds (client, driver and core)
/// must be below the reference's (issue 38).
const TOTAL_MEMORY_SIZES: [u64; 2] = [SIZE_64K, SIZE_64M];

/// A registration's whole cost against the baseline, at each latency size: register +
/// deregister, mean and 99th percentile, at zero pin cost (a client's own overhead
/// against the reference's).
const OP_TARGETS: [(&str, u64, f64); 2] = [("op_mean_ns", 0, 1.0), ("op_p99_ns", 0, 1.0)];

/// The pair's mean with a costly pin against the reference's, at the sizes where the
/// floor leaves room below it.
const COSTLY_OP_TARGET: (&str, u64, f64) = ("op_mean_ns", COSTLY_PIN_US, 0.55);
/// The sizes of [`COSTLY_OP_TARGET`].
const COSTLY_OP_SIZES: [u64; 2] = [SIZE_64K, SIZE_2M];
/// At 64 MiB the floor itself is about 0.55 x the reference with a costly pin: the
/// pair's mean there must be within 5 % of the floor measured in the same run.
const COSTLY_FLOOR_SLACK: f64 = 1.05;

/// peermem / reference, where both exist and the reference is not zero.
pub fn ratio(peermem: Option<f64>, reference: Option<f64>) -> Option<f64> {
    match (peermem, reference) {
        (Some(p), Some(r)) if r != 0.0 => Some(p / r),
        _ => None,
    }
}

/// A value as printed in the table: integers without decimals, others with two.
pub fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(format_value).unwrap_or_else(|| "-".to_string())
}

/// The comparison table: one line per figure, peermem, reference, ratio.
pub fn table(results: &Results) -> String {
    let mut lines: Vec<[String; 8]> = vec![[
        "group".into(),
        "metric".into(),
        "size".into(),
        "cost_us".into(),
        "live".into(),
        "peermem".into(),
        "reference".into(),
        "ratio".into(),
    ]];
    for key in results.keys() {
        let p = results.get(Strategy::Peermem, key);
        let r = results.get(Strategy::Reference, key);
        lines.push([
            key.group.clone(),
            key.metric.clone(),
            human_size(key.size),
            key.cost_us.to_string(),
            key.live.to_string(),
            opt(p),
            opt(r),
            ratio(p, r)
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    let mut widths = [0usize; 8];
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for line in &lines {
        let mut text = String::new();
        for (i, cell) in line.iter().enumerate() {
            // Text columns left-aligned, numbers right-aligned.
            if i < 3 {
                let _ = write!(text, "{cell:<w$}  ", w = widths[i]);
            } else {
                let _ = write!(text, "{cell:>w$}  ", w = widths[i]);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// One target and its outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// What is required.
    pub name: String,
    /// Whether it holds.
    pub pass: bool,
    /// The measured figure, or `not measured`.
    pub figure: String,
}

impl Target {
    fn new(name: impl Into<String>, pass: bool, figure: impl Into<String>) -> Self {
        Target {
            name: name.into(),
            pass,
            figure: figure.into(),
        }
    }

    /// A target whose figure the log lacks: a FAIL, "not measured (`what`)".
    pub fn missing(name: impl Into<String>, what: &str) -> Self {
        Target::new(name, false, format!("not measured ({what})"))
    }
}

/// Checks that every latency `pins_per_reg` of `strategy` equals `want`.
fn pins_target(results: &Results, strategy: Strategy, want: f64) -> Target {
    let name = format!(
        "{} pins per registration = {want:.2} (latency, every size and cost)",
        strategy.as_str()
    );
    let values: Vec<(Key, f64)> = results
        .keys_of("latency", "pins_per_reg")
        .filter_map(|k| results.get(strategy, k).map(|v| (k.clone(), v)))
        .collect();
    if values.is_empty() {
        return Target::missing(name, "no latency pins_per_reg rows");
    }
    let missing: Vec<String> = LATENCY_SIZES
        .iter()
        .filter(|s| !values.iter().any(|(k, _)| k.size == **s))
        .map(|s| human_size(*s))
        .collect();
    let bad: Vec<String> = values
        .iter()
        .filter(|(_, v)| (v - want).abs() > 0.005)
        .map(|(k, v)| format!("{:.2} at {}/{}us", v, human_size(k.size), k.cost_us))
        .collect();
    let min = values.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    let max = values.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
    let mut figure = if min == max {
        format!("{min:.2} in all {} configurations", values.len())
    } else {
        format!("{min:.2}..{max:.2}; off: {}", bad.join(", "))
    };
    if !missing.is_empty() {
        figure.push_str(&format!("; not measured at {}", missing.join(", ")));
    }
    Target::new(name, bad.is_empty() && missing.is_empty(), figure)
}

/// Finds one figure for both strategies: exact key first, then any row of the same
/// group, metric and size (and cost when given), preferring matching `live`.
pub fn pair(
    results: &Results,
    group: &str,
    metric: &str,
    size: u64,
    cost: Option<u64>,
) -> (Option<f64>, Option<f64>) {
    let keys: Vec<&Key> = results
        .keys_of(group, metric)
        .filter(|k| k.size == size && cost.is_none_or(|c| k.cost_us == c))
        .collect();
    // A key both strategies measured.
    for k in &keys {
        if let (Some(p), Some(r)) = (
            results.get(Strategy::Peermem, k),
            results.get(Strategy::Reference, k),
        ) {
            return (Some(p), Some(r));
        }
    }
    let any = |s| keys.iter().rev().find_map(|k| results.get(s, k));
    (any(Strategy::Peermem), any(Strategy::Reference))
}

/// Evaluates a `peermem <= limit * reference` target.
fn ratio_target(
    name: String,
    (p, r): (Option<f64>, Option<f64>),
    limit: f64,
    unit: &str,
) -> Target {
    match (p, r) {
        (Some(p), Some(r)) if r > 0.0 => {
            let q = p / r;
            Target::new(
                name,
                q <= limit + EPS,
                format!(
                    "peermem {} {unit} vs reference {} {unit}: ratio {q:.3} (limit {limit})",
                    format_value(p),
                    format_value(r)
                ),
            )
        }
        (Some(_), Some(r)) => Target::new(name, false, format!("reference is {r}: no ratio")),
        (None, _) => Target::missing(name, "peermem"),
        (_, None) => Target::missing(name, "reference"),
    }
}

/// Evaluates `peermem op_ns at <live> live / at 1000 live <= limit` (scaling).
fn scaling_target(results: &Results, live: u64, limit: f64) -> Target {
    let name = format!("scaling: peermem op_ns at {live} live / at 1000 live <= {limit}");
    let at = |l| {
        results
            .keys_of("scaling", "op_ns")
            .filter(|k| k.live == l)
            .find_map(|k| results.get(Strategy::Peermem, k))
    };
    match (at(1000), at(live)) {
        (Some(lo), Some(hi)) if lo > 0.0 => {
            let q = hi / lo;
            Target::new(
                name,
                q <= limit + EPS,
                format!("{} ns / {} ns = {q:.2}", format_value(hi), format_value(lo)),
            )
        }
        (Some(lo), Some(_)) => Target::new(name, false, format!("op_ns at 1000 live is {lo}")),
        (None, _) => Target::missing(name, "live=1000"),
        (_, None) => Target::missing(name, &format!("live={live}")),
    }
}

/// Evaluates a latency target at `size`: peermem's `metric` (named `what`) with a pin
/// cost of `cost` µs <= `limit` x the reference's.
fn time_target(
    results: &Results,
    size: u64,
    (metric, cost, limit): (&str, u64, f64),
    what: &str,
) -> Target {
    ratio_target(
        format!(
            "{cost} us pin cost, {}: peermem {what} <= {limit} x reference",
            human_size(size)
        ),
        pair(results, "latency", metric, size, Some(cost)),
        limit,
        "ns",
    )
}

/// Evaluates `peermem <= slack * floor` for the pair's mean with a costly pin at
/// `size`.
fn floor_target(results: &Results, size: u64) -> Target {
    let (metric, cost, _) = COSTLY_OP_TARGET;
    let name = format!(
        "{cost} us pin cost, {}: peermem {metric} (register+deregister) within {:.0} % of the floor",
        human_size(size),
        (COSTLY_FLOOR_SLACK - 1.0) * 100.0
    );
    let key = results
        .keys_of("latency", metric)
        .find(|k| k.size == size && k.cost_us == cost);
    let get = |s| key.and_then(|k| results.get(s, k));
    match (get(Strategy::Peermem), get(Strategy::Floor)) {
        (Some(p), Some(f)) if f > 0.0 => Target::new(
            name,
            p <= COSTLY_FLOOR_SLACK * f + EPS,
            format!(
                "peermem {} ns vs floor {} ns: {:.3} x the floor (limit {COSTLY_FLOOR_SLACK})",
                format_value(p),
                format_value(f),
                p / f
            ),
        ),
        (Some(_), Some(f)) => Target::new(name, false, format!("floor is {f}: no ratio")),
        (None, _) => Target::missing(name, "peermem"),
        (_, None) => Target::missing(name, "floor"),
    }
}

/// Evaluates every target of a run in `mode`.
pub fn evaluate(results: &Results, mode: Mode) -> Vec<Target> {
    let mut targets = vec![
        pins_target(results, Strategy::Peermem, 1.0),
        pins_target(results, Strategy::Reference, 2.0),
    ];

    if mode == Mode::Callback {
        // Only callback pins are shared.
        let name = "peermem covered re-registration pins = 0 (reuse)";
        let reuse = results
            .keys_of("reuse", "pins_per_reg")
            .find_map(|k| results.get(Strategy::Peermem, k));
        targets.push(match reuse {
            Some(v) => Target::new(name, v.abs() <= 0.005, format!("{v:.2} pins")),
            None => Target::missing(name, "reuse pins_per_reg"),
        });
    }

    for size in LATENCY_SIZES {
        for target in REG_TARGETS {
            targets.push(time_target(results, size, target, "reg_mean"));
        }
    }

    targets.push(scaling_target(results, 100_000, 2.0));
    let sg = {
        let at0 = pair(results, "latency", "sg_entries", SIZE_64M, Some(0));
        if at0.0.is_some() && at0.1.is_some() {
            at0
        } else {
            pair(results, "latency", "sg_entries", SIZE_64M, None)
        }
    };
    targets.push(ratio_target(
        "SG entries at 64 MiB: peermem <= 1/100 of reference".to_string(),
        sg,
        0.01,
        "entries",
    ));

    for (size, limit, text) in MEMORY_TARGETS {
        let name = format!(
            "module bytes per live registration at {}: peermem <= {text}reference",
            human_size(size)
        );
        targets.push(ratio_target(
            name,
            pair(results, "memory", "bytes_per_reg_module", size, None),
            limit,
            "B",
        ));
    }

    // Issue 38: everything a live registration holds, below the reference's.
    for size in TOTAL_MEMORY_SIZES {
        let name = format!(
            "total bytes per live registration at {} (client, driver, core): peermem < reference",
            human_size(size)
        );
        let (p, r) = pair(results, "memory", "bytes_per_reg_total", size, None);
        targets.push(match (p, r) {
            (Some(p), Some(r)) => Target::new(
                name,
                p < r,
                format!(
                    "peermem {} B vs reference {} B",
                    format_value(p),
                    format_value(r)
                ),
            ),
            (None, _) => Target::missing(name, "peermem"),
            (_, None) => Target::missing(name, "reference"),
        });
    }

    // A registration's whole cost against the baseline: register + deregister, mean
    // and 99th percentile, at zero pin cost (peermem's own overhead against the
    // reference's), and the mean with a costly pin.
    for size in LATENCY_SIZES {
        for target in OP_TARGETS {
            let what = format!("{} (register+deregister)", target.0);
            targets.push(time_target(results, size, target, &what));
        }
        if COSTLY_OP_SIZES.contains(&size) {
            let what = format!("{} (register+deregister)", COSTLY_OP_TARGET.0);
            targets.push(time_target(results, size, COSTLY_OP_TARGET, &what));
        } else {
            targets.push(floor_target(results, size));
        }
    }

    targets.push(ratio_target(
        "64 GiB registration: peermem module memory <= 1/100 of reference".to_string(),
        pair(results, "huge", "bytes_module", SIZE_64G, None),
        0.01,
        "B",
    ));

    // Issue 14: a whole H100 BAR1 of live 64 KiB registrations, and their memory.
    targets.push(scaling_target(results, WHOLE_BAR1_PAGES, 1.5));
    let budget = small_reg_bytes(mode);
    let name = format!("module bytes per live registration at 64 KiB: peermem <= {budget} B");
    let bytes = pair(results, "memory", "bytes_per_reg_module", SIZE_64K, None).0;
    targets.push(match bytes {
        Some(b) => Target::new(
            name,
            b <= budget as f64 + EPS,
            format!("peermem {} B", format_value(b)),
        ),
        None => Target::missing(name, "peermem"),
    });
    // Issue 31: a whole H200 BAR1, where the run reached it (the bench kit's --scale).
    if results
        .keys_of("scaling", "op_ns")
        .any(|k| k.live == WHOLE_H200_BAR1_PAGES)
    {
        targets.push(scaling_target(results, WHOLE_H200_BAR1_PAGES, 1.5));
    }
    targets
}

/// Where the floor (the baseline's floor mode: one pin, nothing of its own beyond the
/// reference's context and SG table) stands against each time target, measured in the
/// same run: how much of the target it leaves to a client's own work, and how much
/// peermem spends above it. Empty when the log has no floor rows.
pub fn floor_lines(results: &Results, mode: Mode) -> String {
    let mut out = String::new();
    for size in LATENCY_SIZES {
        let costly = COSTLY_OP_SIZES.contains(&size).then_some(COSTLY_OP_TARGET);
        for (metric, cost, limit) in REG_TARGETS.into_iter().chain(OP_TARGETS).chain(costly) {
            let key = results
                .keys_of("latency", metric)
                .find(|k| k.size == size && k.cost_us == cost);
            let label = format!(
                "{cost} us pin cost, {}, {metric} <= {limit} x reference",
                human_size(size)
            );
            floor_line(
                &mut out,
                results,
                key,
                &label,
                "ns",
                "work",
                Bound::Times(limit),
            );
        }
    }
    let key = |size| {
        results
            .keys_of("memory", "bytes_per_reg_module")
            .find(move |k| k.size == size)
    };
    for (size, limit, _) in MEMORY_TARGETS {
        let label = format!(
            "module bytes per live registration at {} <= {limit} x reference",
            human_size(size)
        );
        floor_line(
            &mut out,
            results,
            key(size),
            &label,
            "B",
            "records",
            Bound::Times(limit),
        );
    }
    let budget = small_reg_bytes(mode);
    let label = format!(
        "module bytes per live registration at {} <= {budget} B",
        human_size(SIZE_64K)
    );
    let bound = Bound::Absolute(budget as f64);
    floor_line(
        &mut out,
        results,
        key(SIZE_64K),
        &label,
        "B",
        "records",
        bound,
    );
    out
}

/// The pairs without pin cost compared turn by turn: each turn of a pairs boot times
/// peermem, the reference and the floor within a second or two of each other
/// (scripts/bench-rounds), so the ratio of two figures of one turn is taken at one speed
/// of the host, which moves over seconds. Rows of a figure are split into turns in log
/// order, a turn ending where a strategy comes again. One line per figure that has
/// turns with both clients: the median over them of peermem ÷ reference and floor ÷
/// reference. Shown beside the targets, which are judged on the medians of all runs.
pub fn paired_lines(results: &Results) -> String {
    let mut out = String::new();
    for size in LATENCY_SIZES {
        for (metric, cost, _) in OP_TARGETS {
            let key = Key::new("latency", metric, size, cost, 0);
            let mut turns: Vec<[Option<f64>; 3]> = Vec::new();
            let mut turn = [None; 3];
            for row in results.rows().iter().filter(|r| r.key == key) {
                let slot = row.strategy as usize;
                if turn[slot].is_some() {
                    turns.push(std::mem::take(&mut turn));
                }
                turn[slot] = Some(row.value);
            }
            turns.push(turn);
            let ratios = |of: Strategy| -> Vec<f64> {
                turns
                    .iter()
                    .filter_map(|t| {
                        let r = t[Strategy::Reference as usize].filter(|r| *r > 0.0)?;
                        Some(t[of as usize]? / r)
                    })
                    .collect()
            };
            let peermem = ratios(Strategy::Peermem);
            if peermem.is_empty() {
                continue;
            }
            let n = peermem.len();
            let _ = write!(
                out,
                "{cost} us pin cost, {}, {metric}: peermem {:.3} x reference",
                human_size(size),
                median(peermem)
            );
            let floor = ratios(Strategy::Floor);
            if !floor.is_empty() {
                let _ = write!(out, ", floor {:.3} x", median(floor));
            }
            let _ = writeln!(out, " (median over {n} turns)");
        }
    }
    out
}

/// What a target allows: a multiple of the reference's figure, or a fixed figure.
#[derive(Clone, Copy)]
enum Bound {
    Times(f64),
    Absolute(f64),
}

/// One line of [`floor_lines`]: the floor's figure at `key` against the target
/// `label` (`bound`), in `unit`; what it leaves to a client's own `what`, and how far
/// peermem is from it. Nothing without a floor figure.
fn floor_line(
    out: &mut String,
    results: &Results,
    key: Option<&Key>,
    label: &str,
    unit: &str,
    what: &str,
    bound: Bound,
) {
    let Some((key, f)) = key.and_then(|k| Some((k, results.get(Strategy::Floor, k)?))) else {
        return;
    };
    let _ = write!(out, "{label}: floor {} {unit}", format_value(f));
    let limit = match bound {
        Bound::Absolute(limit) => limit,
        Bound::Times(times) => {
            let Some(r) = results.get(Strategy::Reference, key).filter(|r| *r > 0.0) else {
                let _ = writeln!(out, ", no reference figure");
                return;
            };
            let _ = write!(out, " = {:.3} x reference", f / r);
            times * r
        }
    };
    let room = limit - f;
    if room >= 0.0 {
        let _ = write!(out, ": leaves {room:.0} {unit} to a client's own {what}");
    } else {
        let _ = write!(
            out,
            ": out of reach for a client that pins once, by {:.0} {unit}",
            -room
        );
    }
    match results.get(Strategy::Peermem, key) {
        Some(p) if p >= f => {
            let _ = writeln!(out, "; peermem {:.0} {unit} above the floor", p - f);
        }
        Some(p) => {
            let _ = writeln!(out, "; peermem {:.0} {unit} below it", f - p);
        }
        None => {
            let _ = writeln!(out);
        }
    }
}

/// The targets as printed: `PASS  name: figure`.
pub fn format_targets(targets: &[Target]) -> String {
    let mut out = String::new();
    for t in targets {
        let _ = writeln!(
            out,
            "{}  {}: {}",
            if t.pass { "PASS" } else { "FAIL" },
            t.name,
            t.figure
        );
    }
    let passed = targets.iter().filter(|t| t.pass).count();
    let _ = writeln!(out, "{passed}/{} targets passed", targets.len());
    out
}

/// `results.csv`: a header and every row in log order.
pub fn csv(results: &Results) -> String {
    let mut out = String::from("strategy,group,metric,size_bytes,pin_cost_us,live,value\n");
    for row in results.rows() {
        let k = &row.key;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{}",
            row.label(),
            k.group,
            k.metric,
            k.size,
            k.cost_us,
            k.live,
            row.value_text
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_log;

    const GOOD: &str = "\
PEERMEM-BENCH,peermem,latency,pins_per_reg,65536,0,0,1.00
PEERMEM-BENCH,reference,latency,pins_per_reg,65536,0,0,2.00
PEERMEM-BENCH,peermem,latency,pins_per_reg,2097152,50,0,1.00
PEERMEM-BENCH,reference,latency,pins_per_reg,2097152,50,0,2.00
PEERMEM-BENCH,peermem,latency,pins_per_reg,67108864,50,0,1
PEERMEM-BENCH,reference,latency,pins_per_reg,67108864,50,0,2
PEERMEM-BENCH,peermem,reuse,pins_per_reg,65536,0,1,0.00
PEERMEM-BENCH,reference,reuse,pins_per_reg,65536,0,1,2.00
PEERMEM-BENCH,peermem,latency,reg_mean_ns,65536,50,0,55000
PEERMEM-BENCH,reference,latency,reg_mean_ns,65536,50,0,100000
PEERMEM-BENCH,peermem,latency,reg_mean_ns,2097152,50,0,60000
PEERMEM-BENCH,reference,latency,reg_mean_ns,2097152,50,0,130000
PEERMEM-BENCH,peermem,latency,reg_mean_ns,67108864,50,0,200000
PEERMEM-BENCH,reference,latency,reg_mean_ns,67108864,50,0,1000000
PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,1000,5000
PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,100000,10000
PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,2097152,7500
PEERMEM-BENCH,peermem,latency,sg_entries,67108864,0,0,10.24
PEERMEM-BENCH,reference,latency,sg_entries,67108864,0,0,1024
PEERMEM-BENCH,peermem,memory,bytes_per_reg_module,67108864,0,64,3328
PEERMEM-BENCH,reference,memory,bytes_per_reg_module,67108864,0,64,33280
PEERMEM-BENCH,peermem,memory,bytes_per_reg_module,65536,0,4096,256
PEERMEM-BENCH,reference,memory,bytes_per_reg_module,65536,0,4096,644
PEERMEM-BENCH,peermem,latency,op_mean_ns,65536,0,0,20000
PEERMEM-BENCH,reference,latency,op_mean_ns,65536,0,0,20000
PEERMEM-BENCH,peermem,latency,op_p99_ns,65536,0,0,30000
PEERMEM-BENCH,reference,latency,op_p99_ns,65536,0,0,30000
PEERMEM-BENCH,peermem,latency,op_mean_ns,65536,50,0,110000
PEERMEM-BENCH,reference,latency,op_mean_ns,65536,50,0,200000
PEERMEM-BENCH,peermem,latency,op_mean_ns,2097152,0,0,20000
PEERMEM-BENCH,reference,latency,op_mean_ns,2097152,0,0,40000
PEERMEM-BENCH,peermem,latency,op_p99_ns,2097152,0,0,30000
PEERMEM-BENCH,reference,latency,op_p99_ns,2097152,0,0,60000
PEERMEM-BENCH,peermem,latency,op_mean_ns,2097152,50,0,100000
PEERMEM-BENCH,reference,latency,op_mean_ns,2097152,50,0,250000
PEERMEM-BENCH,peermem,latency,op_mean_ns,67108864,0,0,20000
PEERMEM-BENCH,reference,latency,op_mean_ns,67108864,0,0,90000
PEERMEM-BENCH,peermem,latency,op_p99_ns,67108864,0,0,30000
PEERMEM-BENCH,reference,latency,op_p99_ns,67108864,0,0,90000
PEERMEM-BENCH,peermem,latency,op_mean_ns,67108864,50,0,100000
PEERMEM-BENCH,reference,latency,op_mean_ns,67108864,50,0,900000
PEERMEM-BENCH,floor,latency,op_mean_ns,67108864,50,0,95238.096
PEERMEM-BENCH,peermem,memory,bytes_per_reg_total,65536,0,4096,1000
PEERMEM-BENCH,reference,memory,bytes_per_reg_total,65536,0,4096,1000.5
PEERMEM-BENCH,peermem,memory,bytes_per_reg_total,67108864,0,64,50000
PEERMEM-BENCH,reference,memory,bytes_per_reg_total,67108864,0,64,83000
PEERMEM-BENCH,peermem,huge,bytes_module,68719476736,0,1,335544.32
PEERMEM-BENCH,reference,huge,bytes_module,68719476736,0,1,33554432
";

    fn eval(log: &str) -> Vec<Target> {
        evaluate(&Results::new(parse_log(log).rows), Mode::Callback)
    }

    #[test]
    fn ratio_needs_both_and_nonzero_reference() {
        assert_eq!(ratio(Some(1.0), Some(4.0)), Some(0.25));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(4.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
    }

    #[test]
    fn all_targets_pass_at_their_limits() {
        let targets = eval(GOOD);
        assert_eq!(targets.len(), 23);
        for t in &targets {
            assert!(t.pass, "{t:?}");
        }
        assert_eq!(targets[0].figure, "1.00 in all 3 configurations");
        assert_eq!(targets[2].figure, "0.00 pins");
        assert!(
            targets[3].figure.contains("ratio 0.550"),
            "{}",
            targets[3].figure
        );
        assert_eq!(targets[6].figure, "10000 ns / 5000 ns = 2.00");
        assert!(targets[7].figure.contains("ratio 0.010"));
        assert!(targets[8].figure.contains("ratio 0.100"));
        assert!(targets[9]
            .name
            .starts_with("total bytes per live registration at 64 KiB"));
        assert_eq!(targets[9].figure, "peermem 1000 B vs reference 1000.50 B");
        assert!(targets[10].name.contains("at 64 MiB"));
        assert!(targets[11]
            .name
            .contains("0 us pin cost, 64 KiB: peermem op_mean_ns"));
        assert!(targets[11].figure.contains("ratio 1.000"));
        assert!(targets[12].name.contains("op_p99_ns"));
        assert!(targets[13]
            .name
            .contains("50 us pin cost, 64 KiB: peermem op_mean_ns"));
        assert!(targets[13].figure.contains("ratio 0.550"));
        assert!(targets[16].name.contains("50 us pin cost, 2 MiB"));
        assert_eq!(
            targets[19].name,
            "50 us pin cost, 64 MiB: peermem op_mean_ns (register+deregister) within 5 % of the floor"
        );
        assert_eq!(
            targets[19].figure,
            "peermem 100000 ns vs floor 95238.10 ns: 1.050 x the floor (limit 1.05)"
        );
        assert!(targets[20].name.starts_with("64 GiB registration"));
        assert!(
            targets[20].figure.contains("ratio 0.010"),
            "{}",
            targets[20].figure
        );
        assert_eq!(targets[21].figure, "7500 ns / 5000 ns = 1.50");
        assert_eq!(
            targets[22].name,
            "module bytes per live registration at 64 KiB: peermem <= 320 B"
        );
        assert_eq!(targets[22].figure, "peermem 256 B");
    }

    #[test]
    fn persistent_mode_has_no_reuse_and_a_smaller_budget() {
        let log = GOOD.replace("65536,0,4096,256\n", "65536,0,4096,257\n");
        let targets = evaluate(&Results::new(parse_log(&log).rows), Mode::Persistent);
        assert_eq!(targets.len(), 22);
        assert!(targets.iter().all(|t| !t.name.contains("reuse")));
        let last = targets.last().unwrap();
        assert_eq!(
            last.name,
            "module bytes per live registration at 64 KiB: peermem <= 256 B"
        );
        assert!(!last.pass);
        assert!(targets[..21].iter().all(|t| t.pass));
        // The same figure is within the callback mode's budget.
        assert!(eval(&log).last().unwrap().pass);
    }

    #[test]
    fn a_whole_h200_bar1_is_judged_where_measured() {
        assert_eq!(eval(GOOD).len(), 23);
        let log = format!("{GOOD}PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,4194304,7600\n");
        let t = eval(&log);
        assert_eq!(t.len(), 24);
        assert_eq!(
            t[23].name,
            "scaling: peermem op_ns at 4194304 live / at 1000 live <= 1.5"
        );
        assert!(!t[23].pass);
        assert_eq!(t[23].figure, "7600 ns / 5000 ns = 1.52");
    }

    #[test]
    fn targets_fail_just_over_their_limits() {
        let log = GOOD
            .replace(
                "pins_per_reg,2097152,50,0,1.00",
                "pins_per_reg,2097152,50,0,1.50",
            )
            .replace(
                "reuse,pins_per_reg,65536,0,1,0.00",
                "reuse,pins_per_reg,65536,0,1,1",
            )
            .replace("65536,50,0,55000", "65536,50,0,55001")
            .replace("0,100000,10000", "0,100000,10001")
            .replace("0,2097152,7500", "0,2097152,7501")
            .replace(
                "sg_entries,67108864,0,0,10.24",
                "sg_entries,67108864,0,0,11",
            )
            .replace("67108864,0,64,3328\n", "67108864,0,64,3329\n")
            .replace("65536,0,4096,1000\n", "65536,0,4096,1000.5\n")
            .replace("65536,0,4096,256\n", "65536,0,4096,321\n")
            .replace(
                "op_mean_ns,65536,0,0,20000\nPEERMEM-BENCH,ref",
                "op_mean_ns,65536,0,0,20001\nPEERMEM-BENCH,ref",
            )
            .replace(
                "op_p99_ns,65536,0,0,30000\nPEERMEM-BENCH,ref",
                "op_p99_ns,65536,0,0,30001\nPEERMEM-BENCH,ref",
            )
            .replace(
                "op_mean_ns,65536,50,0,110000",
                "op_mean_ns,65536,50,0,110001",
            )
            .replace(
                "op_mean_ns,67108864,50,0,100000",
                "op_mean_ns,67108864,50,0,100001",
            )
            .replace(
                "bytes_module,68719476736,0,1,335544.32",
                "bytes_module,68719476736,0,1,335545",
            );
        let targets = eval(&log);
        let pass: Vec<bool> = targets.iter().map(|t| t.pass).collect();
        assert_eq!(
            pass,
            vec![
                false, true, false, false, true, true, false, false, false, false, true, false,
                false, false, true, true, true, true, true, false, false, false, false
            ]
        );
        assert_eq!(targets[0].figure, "1.00..1.50; off: 1.50 at 2 MiB/50us");
        assert_eq!(targets[2].figure, "1.00 pins");
        assert_eq!(targets[6].figure, "10001 ns / 5000 ns = 2.00");
        assert_eq!(
            targets[9].figure,
            "peermem 1000.50 B vs reference 1000.50 B"
        );
        assert_eq!(targets[21].figure, "7501 ns / 5000 ns = 1.50");
        assert_eq!(targets[22].figure, "peermem 321 B");
    }

    #[test]
    fn missing_figures_fail_as_not_measured() {
        let targets = eval("PEERMEM-BENCH,peermem,latency,reg_mean_ns,65536,50,0,1\n");
        assert_eq!(targets.len(), 23);
        assert!(targets.iter().all(|t| !t.pass));
        assert_eq!(
            targets[0].figure,
            "not measured (no latency pins_per_reg rows)"
        );
        assert_eq!(targets[3].figure, "not measured (reference)");
        assert_eq!(targets[4].figure, "not measured (peermem)");
        assert_eq!(targets[6].figure, "not measured (live=1000)");
        assert_eq!(targets[19].figure, "not measured (peermem)");
        assert_eq!(targets[22].figure, "not measured (peermem)");
        let log = "PEERMEM-BENCH,peermem,latency,op_mean_ns,67108864,50,0,1\n";
        assert_eq!(eval(log)[19].figure, "not measured (floor)");
        // A size missing from the pins rows fails even if the others are right.
        let partial = GOOD
            .lines()
            .filter(|l| !l.contains("pins_per_reg,67108864"))
            .collect::<Vec<_>>()
            .join("\n");
        let targets = eval(&partial);
        assert!(!targets[0].pass);
        assert_eq!(
            targets[0].figure,
            "1.00 in all 2 configurations; not measured at 64 MiB"
        );
    }

    #[test]
    fn table_lists_each_figure_once_with_ratio() {
        let results = Results::new(
            parse_log(
                "PEERMEM-BENCH,peermem,latency,reg_mean_ns,65536,50,0,55000\n\
                 PEERMEM-BENCH,reference,latency,reg_mean_ns,65536,50,0,100000\n\
                 PEERMEM-BENCH,peermem,latency,weird_metric,2097152,0,0,1.5\n",
            )
            .rows,
        );
        let t = table(&results);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("group"));
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "latency",
                "reg_mean_ns",
                "64",
                "KiB",
                "50",
                "0",
                "55000",
                "100000",
                "0.550"
            ]
        );
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(cells[2..4], ["2", "MiB"]);
        assert_eq!(cells[6..], ["1.50", "-", "-"]);
    }

    #[test]
    fn floor_lines_say_what_each_target_leaves() {
        let log = "\
PEERMEM-BENCH,peermem,latency,op_mean_ns,65536,0,0,24000
PEERMEM-BENCH,reference,latency,op_mean_ns,65536,0,0,16000
PEERMEM-BENCH,floor,latency,op_mean_ns,65536,0,0,14000
PEERMEM-BENCH,floor,latency,op_mean_ns,65536,0,0,15000
PEERMEM-BENCH,floor,latency,op_mean_ns,65536,0,0,14500
PEERMEM-BENCH,peermem,latency,op_mean_ns,67108864,50,0,250000
PEERMEM-BENCH,reference,latency,op_mean_ns,67108864,50,0,400000
PEERMEM-BENCH,floor,latency,op_mean_ns,67108864,50,0,240000
PEERMEM-BENCH,floor,latency,op_p99_ns,2097152,0,0,50000
PEERMEM-BENCH,peermem,latency,op_p99_ns,67108864,0,0,90000
PEERMEM-BENCH,reference,latency,op_p99_ns,67108864,0,0,120000
PEERMEM-BENCH,floor,latency,op_p99_ns,67108864,0,0,100000
PEERMEM-BENCH,peermem,memory,bytes_per_reg_module,65536,0,4096,416
PEERMEM-BENCH,reference,memory,bytes_per_reg_module,65536,0,4096,128
PEERMEM-BENCH,floor,memory,bytes_per_reg_module,65536,0,4096,128
";
        let lines = floor_lines(&Results::new(parse_log(log).rows), Mode::Callback);
        // The median of the floor's runs (14500) against 1.0 x 16000.
        assert_eq!(
            lines,
            "0 us pin cost, 64 KiB, op_mean_ns <= 1 x reference: floor 14500 ns = 0.906 x \
             reference: leaves 1500 ns to a client's own work; peermem 9500 ns above the floor\n\
             0 us pin cost, 2 MiB, op_p99_ns <= 1 x reference: floor 50000 ns, no reference \
             figure\n\
             0 us pin cost, 64 MiB, op_p99_ns <= 1 x reference: floor 100000 ns = 0.833 x \
             reference: leaves 20000 ns to a client's own work; peermem 10000 ns below it\n\
             module bytes per live registration at 64 KiB <= 320 B: floor 128 B: leaves 192 B to \
             a client's own records; peermem 288 B above the floor\n"
        );
        // Only the floor rows make lines: a log without them prints none.
        assert_eq!(
            floor_lines(&Results::new(parse_log(GOOD).rows), Mode::Callback),
            ""
        );
    }

    #[test]
    fn paired_lines_compare_within_each_turn() {
        // Three turns, each in its own order, the second at half the host's speed: the
        // medians of all runs put peermem at 24 against 21 (1.143 x), turn by turn it is
        // 1.2, 1.2 and 1.095 x.
        let turns = [
            [("peermem", 24), ("reference", 20), ("floor", 18)],
            [("reference", 40), ("floor", 36), ("peermem", 48)],
            [("floor", 19), ("peermem", 23), ("reference", 21)],
        ];
        let mut log: String = turns
            .iter()
            .flatten()
            .map(|(s, v)| format!("PEERMEM-BENCH,{s},latency,op_mean_ns,65536,0,0,{v}\n"))
            .collect();
        // A figure without the reference's makes no line.
        log.push_str("PEERMEM-BENCH,peermem,latency,op_p99_ns,65536,0,0,50\n");
        assert_eq!(
            paired_lines(&Results::new(parse_log(&log).rows)),
            "0 us pin cost, 64 KiB, op_mean_ns: peermem 1.200 x reference, floor 0.900 x \
             (median over 3 turns)\n"
        );
        // No turn with both clients: no line.
        assert_eq!(paired_lines(&Results::new(parse_log("").rows)), "");
    }

    #[test]
    fn csv_keeps_every_row_and_value_text() {
        let log = "[ 1.0] PEERMEM-BENCH,peermem,latency,reg_mean_ns,65536,0,0,4210.50\n\
                   noise\n\
                   PEERMEM-BENCH,reference,odd,unknown_metric,1,2,3,7\n";
        let csv = csv(&Results::new(parse_log(log).rows));
        assert_eq!(
            csv,
            "strategy,group,metric,size_bytes,pin_cost_us,live,value\n\
             peermem,latency,reg_mean_ns,65536,0,0,4210.50\n\
             reference,odd,unknown_metric,1,2,3,7\n"
        );
    }
}
