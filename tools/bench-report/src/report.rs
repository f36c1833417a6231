// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The comparison table, the targets (PASS/FAIL) and the CSV.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::parse::{human_size, median, Key, Mode, Results, Strategy};
use Strategy::{Floor, Peermem, Reference};

/// 64 KiB.
pub const SIZE_64K: u64 = 65536;
/// 2 MiB.
pub const SIZE_2M: u64 = 2097152;
/// 64 MiB.
pub const SIZE_64M: u64 = 67108864;
/// The sizes of the `latency` group.
pub const LATENCY_SIZES: [u64; 3] = [SIZE_64K, SIZE_2M, SIZE_64M];
/// The scaling points judged against the 1000-live figure of the same boot: every
/// 64 KiB page of an H100's 128 GiB BAR1, and of an H200's 256 GiB.
pub const WHOLE_BAR1: [u64; 2] = [2_097_152, 4_194_304];

const EPS: f64 = 1e-9;

/// What peermem's figure is held to.
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// At most this many times the reference's figure of the same key.
    VsRef(f64),
    /// At most this many times the floor's.
    VsFloor(f64),
    /// Below the reference's.
    BelowRef,
    /// At most this figure.
    Most(f64),
}
use Bound::{BelowRef, Most, VsFloor, VsRef};

/// A target on peermem's `metric` of `group` at `size` and `cost` µs: every bound
/// holds on the medians of all runs, or, with `turns`, on the median over the turns
/// of the ratio within each turn.
struct Spec {
    group: &'static str,
    metric: &'static str,
    size: u64,
    cost: u64,
    bounds: Vec<Bound>,
    turns: bool,
}

/// The targets of issue 50 and those of earlier issues that still stand, as data:
/// each is judged by [`judge`].
fn specs(mode: Mode) -> Vec<Spec> {
    let mut table = Vec::new();
    // No pin cost: at most the reference's pair, and within 10 % of the floor's.
    for size in LATENCY_SIZES {
        for metric in ["op_mean_ns", "op_p99_ns"] {
            for turns in [false, true] {
                let bounds = vec![VsRef(1.0), VsFloor(1.1)];
                table.push(("latency", metric, size, 0, bounds, turns));
            }
        }
    }
    let one = |group, metric, size, cost, bound| (group, metric, size, cost, vec![bound], false);
    let (lat, mem) = ("latency", "memory");
    // Module bytes at 64 KiB, indexed by the mode: 128 persistent, 256 callback.
    let module_64k = [128.0, 256.0][mode as usize];
    table.extend([
        // A 50 µs pin: the pair's mean where the floor (0.50) leaves room, and at
        // 64 MiB, where the driver's work on 1024 pages weighs as much as a pin, the
        // floor's.
        one(lat, "op_mean_ns", SIZE_64K, 50, VsRef(0.52)),
        one(lat, "op_mean_ns", SIZE_2M, 50, VsRef(0.52)),
        one(lat, "op_mean_ns", SIZE_64M, 50, VsFloor(1.05)),
        one(mem, "bytes_per_reg_module", SIZE_64K, 0, Most(module_64k)),
        one(mem, "bytes_per_reg_total", SIZE_64K, 0, VsRef(1.0)),
        one(mem, "bytes_per_reg_total", SIZE_64M, 0, BelowRef),
        one(mem, "bytes_per_reg_module", SIZE_64M, 0, VsRef(0.1)),
        one(lat, "sg_entries", SIZE_64M, 0, VsRef(0.01)),
        one("huge", "bytes_module", 64 << 30, 0, VsRef(0.01)),
    ]);
    // The total at 64 KiB is persistent mode's only.
    let total_64k = |t: &(_, _, u64, _, _, _)| t.1 == "bytes_per_reg_total" && t.2 == SIZE_64K;
    table.retain(|t| mode == Mode::Persistent || !total_64k(t));
    let spec = |(group, metric, size, cost, bounds, turns)| Spec {
        group,
        metric,
        size,
        cost,
        bounds,
        turns,
    };
    table.into_iter().map(spec).collect()
}

/// The unit of a metric's figures, with its space.
fn unit(metric: &str) -> &'static str {
    if metric.ends_with("_ns") {
        " ns"
    } else if metric.starts_with("bytes") {
        " B"
    } else {
        ""
    }
}

/// A ratio as printed: three decimals, or two significant digits below 0.01.
fn ratio(q: f64) -> String {
    match q {
        q if q != 0.0 && q.abs() < 0.01 => format!("{q:.1e}"),
        q => format!("{q:.3}"),
    }
}

/// A value as printed: integers without decimals, others with two.
pub fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The comparison table: one line per figure, peermem, reference, their ratio.
pub fn table(results: &Results) -> String {
    let head = "group metric size cost_us live peermem reference ratio".split(' ');
    let mut lines = vec![head.map(String::from).collect::<Vec<_>>()];
    for key in results.keys() {
        let (p, r) = (results.get(Peermem, key), results.get(Reference, key));
        let opt = |v: Option<f64>| v.map_or("-".into(), format_value);
        let q = p.zip(r.filter(|r| *r != 0.0)).map(|(p, r)| p / r);
        lines.push(vec![
            key.group.clone(),
            key.metric.clone(),
            human_size(key.size),
            key.cost_us.to_string(),
            key.live.to_string(),
            opt(p),
            opt(r),
            q.map_or("-".into(), |q| format!("{q:.3}")),
        ]);
    }
    let mut widths = [0; 8];
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for line in &lines {
        let mut text = String::new();
        for (i, (cell, w)) in line.iter().zip(widths).enumerate() {
            // Text columns left-aligned, numbers right-aligned.
            let _ = match i < 3 {
                true => write!(text, "{cell:<w$}  "),
                false => write!(text, "{cell:>w$}  "),
            };
        }
        let _ = writeln!(out, "{}", text.trim_end());
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
        let (name, figure) = (name.into(), figure.into());
        Target { name, pass, figure }
    }

    /// A target whose figure the log lacks: a FAIL, "not measured (`what`)".
    pub fn missing(name: impl Into<String>, what: &str) -> Self {
        Target::new(name, false, format!("not measured ({what})"))
    }
}

/// The turns of `key`'s figure: its rows in log order, a turn ending where a strategy
/// comes again (a pairs boot times each strategy once a turn, within a second or two,
/// at one speed of the host: scripts/bench-rounds); a figure per strategy.
fn turns(results: &Results, key: &Key) -> Vec<[Option<f64>; 3]> {
    let mut turns = vec![[None; 3]];
    for row in results.rows().iter().filter(|r| &r.key == key) {
        if turns
            .last()
            .is_some_and(|t| t[row.strategy as usize].is_some())
        {
            turns.push([None; 3]);
        }
        turns.last_mut().expect("a turn")[row.strategy as usize] = Some(row.value);
    }
    turns
}

/// The median over `turns` of `of` ÷ `to` within a turn, and the number of turns
/// that had both.
fn turn_ratio(turns: &[[Option<f64>; 3]], of: Strategy, to: Strategy) -> Option<(f64, usize)> {
    let q: Vec<f64> = turns
        .iter()
        .filter_map(|t| Some(t[of as usize]? / t[to as usize].filter(|v| *v > 0.0)?))
        .collect();
    let n = q.len();
    (n > 0).then(|| (median(q), n))
}

impl Bound {
    /// The bound in a target's name, figures in `unit`.
    fn text(&self, unit: &str) -> String {
        match self {
            VsRef(x) => format!("<= {x} x reference"),
            VsFloor(x) => format!("<= {x} x floor"),
            BelowRef => "< reference".into(),
            Most(x) => format!("<= {x}{unit}"),
        }
    }
}

/// Judges one [`Spec`].
fn judge(results: &Results, spec: &Spec) -> Target {
    let u = unit(spec.metric);
    let mut name = format!("{} {} {}", human_size(spec.size), spec.group, spec.metric);
    if spec.group == "latency" {
        let _ = write!(name, ", {} us pin cost", spec.cost);
    }
    let bounds: Vec<String> = spec.bounds.iter().map(|b| b.text(u)).collect();
    let _ = write!(name, ": peermem {}", bounds.join(", "));
    if spec.turns {
        name.push_str(" (turn by turn)");
    }
    let Some((key, p)) = results.find(Peermem, spec.group, spec.metric, spec.size, spec.cost)
    else {
        return Target::missing(name, "peermem");
    };
    let turns = turns(results, key);
    let (mut pass, mut parts, mut n) = (true, Vec::new(), 0);
    for b in &spec.bounds {
        let (s, limit) = match *b {
            VsRef(x) => (Reference, x),
            VsFloor(x) => (Floor, x),
            BelowRef => (Reference, 1.0),
            Most(x) => {
                pass &= p <= x + EPS;
                continue;
            }
        };
        let Some(o) = results.get(s, key).filter(|o| *o > 0.0) else {
            return Target::missing(name, s.as_str());
        };
        if let BelowRef = b {
            pass &= p < o;
            parts.push(format!("reference {}{u}", format_value(o)));
        } else if spec.turns {
            let Some((q, turns)) = turn_ratio(&turns, Peermem, s) else {
                return Target::missing(name, &format!("no turn with {}", s.as_str()));
            };
            pass &= q <= limit + EPS;
            n = turns;
            parts.push(format!("{q:.3} x {}", s.as_str()));
        } else {
            pass &= p / o <= limit + EPS;
            let (q, o) = (ratio(p / o), format_value(o));
            parts.push(format!("{q} x {} ({o}{u})", s.as_str()));
        }
    }
    let mut figure = match spec.turns {
        true => format!("{} (median over {n} turns)", parts.join(", ")),
        false if parts.is_empty() => format!("peermem {}{u}", format_value(p)),
        false => format!("peermem {}{u}: {}", format_value(p), parts.join(", ")),
    };
    // Where the floor stands, from the same run: what the target leaves a client.
    let (f, r) = (results.get(Floor, key), results.get(Reference, key));
    match (spec.turns, f, turn_ratio(&turns, Floor, Reference)) {
        (true, _, Some((q, _))) => {
            let _ = write!(figure, "; floor {q:.3} x reference");
        }
        (false, Some(f), _) if !spec.bounds.iter().any(|b| matches!(b, VsFloor(_))) => {
            let _ = write!(figure, "; floor {}{u}", format_value(f));
            if let Some(r) = r.filter(|r| *r > 0.0) {
                let _ = write!(figure, " = {} x reference", ratio(f / r));
            }
        }
        _ => {}
    }
    Target::new(name, pass, figure)
}

/// Checks that every latency `pins_per_reg` of `strategy` equals `want`.
fn pins_target(results: &Results, strategy: Strategy, want: f64) -> Target {
    let name = format!(
        "{} pins per registration = {want:.2} (latency, every size and cost)",
        strategy.as_str()
    );
    let values: Vec<(&Key, f64)> = results
        .keys_of("latency", "pins_per_reg")
        .filter_map(|k| Some((k, results.get(strategy, k)?)))
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
        .map(|(k, v)| format!("{v:.2} at {}/{}us", human_size(k.size), k.cost_us))
        .collect();
    let mut figure = match bad.is_empty() {
        true => format!("{want:.2} in all {} configurations", values.len()),
        false => format!("off: {}", bad.join(", ")),
    };
    if !missing.is_empty() {
        let _ = write!(figure, "; not measured at {}", missing.join(", "));
    }
    Target::new(name, bad.is_empty() && missing.is_empty(), figure)
}

/// peermem's `op_ns` at `live` ÷ at 1000 live <= `limit`, on the medians of all runs.
fn scaling_target(results: &Results, live: u64, limit: f64) -> Target {
    let name = format!("scaling: peermem op_ns at {live} live / at 1000 live <= {limit}");
    let at = |l| results.get(Peermem, &Key::new("scaling", "op_ns", SIZE_64K, 0, l));
    match (at(1000).filter(|lo| *lo > 0.0), at(live)) {
        (Some(lo), Some(hi)) => Target::new(
            name,
            hi / lo <= limit + EPS,
            format!(
                "{} ns / {} ns = {:.2}",
                format_value(hi),
                format_value(lo),
                hi / lo
            ),
        ),
        (None, _) => Target::missing(name, "live=1000"),
        (_, None) => Target::missing(name, &format!("live={live}")),
    }
}

/// peermem's `op_ns` at `live` <= 1.5 x the 1000-live figure of the same boot, in
/// every boot that measured a point above 100000 live (rounds 1 to 3,
/// scripts/bench-rounds). A boot without either point fails the target.
fn scaling_per_boot(results: &Results, live: u64) -> Target {
    let name = format!(
        "scaling: peermem op_ns at {live} live <= 1.5 x at 1000 live of the same boot, \
         every boot above 100000 live"
    );
    let mut boots: BTreeMap<usize, BTreeMap<u64, f64>> = BTreeMap::new();
    for r in results.rows() {
        if r.strategy == Peermem && r.key.group == "scaling" && r.key.metric == "op_ns" {
            boots.entry(r.load).or_default().insert(r.key.live, r.value);
        }
    }
    boots.retain(|_, b| b.keys().any(|l| *l > 100_000));
    if boots.is_empty() {
        return Target::missing(name, "no boot above 100000 live");
    }
    let mut ratios = Vec::new();
    for (i, b) in boots.values().enumerate() {
        match (b.get(&1000).filter(|lo| **lo > 0.0), b.get(&live)) {
            (Some(lo), Some(hi)) => ratios.push(hi / lo),
            (lo, _) => {
                let l = if lo.is_none() { 1000 } else { live };
                let what = format!("live={l} in boot {} of {}", i + 1, boots.len());
                return Target::missing(name, &what);
            }
        }
    }
    let worst = ratios.iter().copied().fold(0.0, f64::max);
    let list: Vec<String> = ratios.iter().map(|q| format!("{q:.2}")).collect();
    let (n, s) = (ratios.len(), if ratios.len() == 1 { "" } else { "s" });
    let figure = format!("{} in {n} boot{s} (worst {worst:.2})", list.join(", "));
    Target::new(name, worst <= 1.5 + EPS, figure)
}

/// Evaluates every target of a run in `mode`.
pub fn evaluate(results: &Results, mode: Mode) -> Vec<Target> {
    let mut targets = vec![
        pins_target(results, Peermem, 1.0),
        pins_target(results, Reference, 2.0),
    ];
    if mode == Mode::Callback {
        // Only callback pins are shared.
        let name = "peermem covered re-registration pins = 0 (reuse)";
        targets.push(
            match results.find(Peermem, "reuse", "pins_per_reg", SIZE_64K, 0) {
                Some((_, v)) => Target::new(name, v.abs() <= 0.005, format!("{v:.2} pins")),
                None => Target::missing(name, "reuse pins_per_reg"),
            },
        );
    }
    targets.extend(specs(mode).iter().map(|s| judge(results, s)));
    targets.push(scaling_target(results, 100_000, 2.0));
    targets.extend(WHOLE_BAR1.map(|live| scaling_per_boot(results, live)));
    targets
}

/// The targets as printed: `PASS  name: figure`, and the count.
pub fn format_targets(targets: &[Target]) -> String {
    let mut out = String::new();
    for t in targets {
        let verdict = if t.pass { "PASS" } else { "FAIL" };
        let _ = writeln!(out, "{verdict}  {}: {}", t.name, t.figure);
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

    /// A callback-mode log with every figure at its target's limit; peermem's figures
    /// but its pins and its 1000-live op times `b`.
    fn at_limits(b: f64) -> String {
        let mut rows = String::from(
            "\
floor,latency,op_mean_ns,67108864,50,0,100
peermem,reuse,pins_per_reg,65536,0,1,0
peermem,memory,bytes_per_reg_module,65536,0,20000,256
reference,memory,bytes_per_reg_module,65536,0,20000,128
peermem,memory,bytes_per_reg_total,65536,0,20000,848
reference,memory,bytes_per_reg_total,65536,0,20000,848
peermem,memory,bytes_per_reg_total,67108864,0,20000,82943
reference,memory,bytes_per_reg_total,67108864,0,20000,82944
peermem,memory,bytes_per_reg_module,67108864,0,20000,3312
reference,memory,bytes_per_reg_module,67108864,0,20000,33120
peermem,latency,sg_entries,67108864,0,0,10.24
reference,latency,sg_entries,67108864,0,0,1024
peermem,huge,bytes_module,68719476736,0,1,336199.68
reference,huge,bytes_module,68719476736,0,1,33619968
peermem,scaling,op_ns,65536,0,1000,1000
peermem,scaling,op_ns,65536,0,100000,2000
peermem,scaling,op_ns,65536,0,2097152,1500
peermem,scaling,op_ns,65536,0,4194304,1500
",
        );
        for size in LATENCY_SIZES {
            let costly = if size == SIZE_64M {
                [105, 153]
            } else {
                [52, 100]
            };
            for (s, pins, costly) in [("peermem", 1, costly[0]), ("reference", 2, costly[1])] {
                let _ = writeln!(rows, "{s},latency,pins_per_reg,{size},50,0,{pins}");
                let _ = writeln!(rows, "{s},latency,op_mean_ns,{size},50,0,{costly}");
            }
            for (s, m) in Strategy::ALL.iter().flat_map(|s| [(s, "mean"), (s, "p99")]) {
                let v = if *s == Floor { 1000 } else { 1100 };
                let _ = writeln!(rows, "{},latency,op_{m}_ns,{size},0,0,{v}", s.as_str());
            }
        }
        let line = |l: &str| {
            let (key, v) = l.rsplit_once(',').unwrap();
            let mut v: f64 = v.parse().unwrap();
            if l.starts_with("peermem,") && !l.contains("pins") && !key.ends_with(",1000") {
                v *= b;
            }
            format!("PEERMEM-BENCH,{key},{v}\n")
        };
        rows.lines().map(line).collect()
    }

    fn eval(log: &str, mode: Mode) -> Vec<Target> {
        evaluate(&Results::new(parse_log(log).rows), mode)
    }

    #[test]
    fn every_target_holds_at_its_limit_and_fails_just_over_it() {
        let targets = eval(&at_limits(1.0), Mode::Callback);
        assert_eq!(targets.len(), 26);
        assert!(
            targets.iter().all(|t| t.pass),
            "{}",
            format_targets(&targets)
        );
        let t = &targets[3];
        assert_eq!(
            t.name,
            "64 KiB latency op_mean_ns, 0 us pin cost: peermem <= 1 x reference, <= 1.1 x floor"
        );
        assert_eq!(
            t.figure,
            "peermem 1100 ns: 1.000 x reference (1100 ns), 1.100 x floor (1000 ns)"
        );
        assert_eq!(
            targets[4].figure,
            "1.000 x reference, 1.100 x floor (median over 1 turns); floor 0.909 x reference"
        );
        assert_eq!(targets[17].figure, "peermem 105 ns: 1.050 x floor (100 ns)");
        assert_eq!(
            targets[18].name,
            "64 KiB memory bytes_per_reg_module: peermem <= 256 B"
        );
        assert_eq!(targets[19].figure, "peermem 82943 B: reference 82944 B");
        assert_eq!(
            targets[22].figure,
            "peermem 336199.68 B: 0.010 x reference (33619968 B)"
        );
        assert_eq!(targets[23].figure, "2000 ns / 1000 ns = 2.00");
        assert_eq!(targets[24].figure, "1.50 in 1 boot (worst 1.50)");
        // Just over: all but the counts of pins fail.
        let over = eval(&at_limits(1.0001), Mode::Callback);
        let passed: Vec<&str> = over
            .iter()
            .filter(|t| t.pass)
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(passed.len(), 3, "{passed:?}");
        assert!(passed.iter().all(|n| n.contains("pins")), "{passed:?}");
    }

    #[test]
    fn persistent_mode_has_no_reuse_and_its_own_memory_targets() {
        let targets = eval(&at_limits(1.0), Mode::Persistent);
        assert_eq!(targets.len(), 26);
        assert!(targets.iter().all(|t| !t.name.contains("reuse")));
        let failed: Vec<&Target> = targets.iter().filter(|t| !t.pass).collect();
        // 256 B is callback mode's limit, not persistent mode's.
        assert_eq!(failed.len(), 1);
        assert_eq!(
            failed[0].name,
            "64 KiB memory bytes_per_reg_module: peermem <= 128 B"
        );
        let total = &targets[18];
        assert_eq!(
            total.name,
            "64 KiB memory bytes_per_reg_total: peermem <= 1 x reference"
        );
        assert!(total.pass);
    }

    #[test]
    fn turn_by_turn_takes_the_median_of_each_turns_ratio() {
        // The second turn at twice the host's speed: on the medians of all runs peermem
        // is 22 against 23 (0.957 x), turn by turn 1.05, 1.2 and 0.957 x.
        let turns = [
            [("peermem", 21), ("reference", 20), ("floor", 20)],
            [("reference", 40), ("floor", 40), ("peermem", 48)],
            [("floor", 23), ("peermem", 22), ("reference", 23)],
        ];
        let log: String = turns
            .iter()
            .flatten()
            .map(|(s, v)| format!("PEERMEM-BENCH,{s},latency,op_mean_ns,65536,0,0,{v}\n"))
            .collect();
        let t = eval(&log, Mode::Callback);
        assert!(t[3].pass, "{:?}", t[3]);
        assert!(!t[4].pass);
        assert_eq!(
            t[4].figure,
            "1.050 x reference, 1.050 x floor (median over 3 turns); floor 1.000 x reference"
        );
    }

    #[test]
    fn missing_figures_fail_as_not_measured() {
        let targets = eval(
            "PEERMEM-BENCH,peermem,latency,op_mean_ns,65536,0,0,1\n",
            Mode::Callback,
        );
        assert_eq!(targets.len(), 26);
        assert!(targets.iter().all(|t| !t.pass));
        let figures: Vec<&str> = targets.iter().map(|t| t.figure.as_str()).collect();
        assert_eq!(figures[0], "not measured (no latency pins_per_reg rows)");
        assert_eq!(figures[3], "not measured (reference)");
        assert_eq!(figures[5], "not measured (peermem)");
        assert_eq!(figures[23], "not measured (live=1000)");
        assert_eq!(figures[24], "not measured (no boot above 100000 live)");
        // A size missing from the pins rows fails even if the others are right.
        let partial: String = at_limits(1.0)
            .lines()
            .filter(|l| !l.contains("pins_per_reg,67108864"))
            .map(|l| format!("{l}\n"))
            .collect();
        let t = &eval(&partial, Mode::Callback)[0];
        assert_eq!(
            (t.pass, t.figure.as_str()),
            (
                false,
                "1.00 in all 2 configurations; not measured at 64 MiB"
            )
        );
    }

    #[test]
    fn table_and_csv() {
        let log = "[ 1.0] PEERMEM-BENCH,peermem,latency,reg_mean_ns,65536,50,0,55000.50\n\
                   noise\n\
                   PEERMEM-BENCH,reference-persistent,latency,reg_mean_ns,65536,50,0,100000\n\
                   PEERMEM-BENCH,reference,odd,unknown_metric,1,2,3,7\n";
        let results = Results::new(parse_log(log).rows);
        let t = table(&results);
        let lines: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0][0], "group");
        let cells = [
            "latency",
            "reg_mean_ns",
            "64",
            "KiB",
            "50",
            "0",
            "55000.50",
            "100000",
            "0.550",
        ];
        assert_eq!(lines[1], cells);
        assert_eq!(lines[2][6..], ["-", "7", "-"]);
        assert_eq!(
            csv(&results),
            "strategy,group,metric,size_bytes,pin_cost_us,live,value\n\
             peermem,latency,reg_mean_ns,65536,50,0,55000.50\n\
             reference-persistent,latency,reg_mean_ns,65536,50,0,100000\n\
             reference,odd,unknown_metric,1,2,3,7\n"
        );
    }
}
