// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Parsing of `PEERMEM-BENCH,...` rows out of a serial console log.
//!
//! A row is `PEERMEM-BENCH,<strategy>,<group>,<metric>,<size_bytes>,<pin_cost_us>,<live>,<value>`.
//! Anything before the marker on a line (a printk timestamp, other console output) is
//! ignored; lines without the marker are noise. A line that carries the marker but does
//! not parse is recorded in [`Parsed::rejected`] so that the caller can warn about it.

use std::collections::HashMap;

/// The marker that starts every benchmark row.
pub const MARKER: &str = "PEERMEM-BENCH,";

/// Which pinning strategy produced a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    /// peermem's own strategy (one pin per registration, pin reuse).
    Peermem,
    /// The baseline client costed as nvidia-peermem (tests/bench/peermem_baseline.c).
    Reference,
    /// The baseline's floor mode: one pin and nothing of its own beyond the
    /// reference's context and SG table.
    Floor,
}

impl Strategy {
    /// The name used in the console rows and the CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Peermem => "peermem",
            Strategy::Reference => "reference",
            Strategy::Floor => "floor",
        }
    }

    /// Parses a strategy name as printed by the benchmark module.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "peermem" => Some(Strategy::Peermem),
            "reference" => Some(Strategy::Reference),
            "floor" => Some(Strategy::Floor),
            _ => None,
        }
    }
}

/// The client mode a row was measured in: the strategy's name carries `-persistent` in
/// persistent mode (the default of both clients), nothing in callback mode
/// (`persistent_api_support=0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Persistent pins: the default of peermem and of the reference.
    Persistent,
    /// Callback pins (`persistent_api_support=0`), which peermem shares.
    Callback,
}

impl Mode {
    /// Both modes, in the order the report prints them.
    pub const ALL: [Mode; 2] = [Mode::Persistent, Mode::Callback];

    /// The mode's name in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Persistent => "persistent",
            Mode::Callback => "callback",
        }
    }

    /// What a strategy's name carries after the client in this mode.
    fn suffix(self) -> &'static str {
        match self {
            Mode::Persistent => "-persistent",
            Mode::Callback => "",
        }
    }
}

/// What one figure measures: everything in a row except strategy and value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// `latency`, `reuse`, `scaling`, `memory` (or an unknown group, kept as is).
    pub group: String,
    /// The metric name, e.g. `reg_mean_ns`.
    pub metric: String,
    /// Registration size in bytes.
    pub size: u64,
    /// Simulated pin (and unpin) cost in microseconds.
    pub cost_us: u64,
    /// Live registrations while measuring (0 or 1 where not relevant).
    pub live: u64,
}

impl Key {
    /// Builds a key from string slices.
    pub fn new(group: &str, metric: &str, size: u64, cost_us: u64, live: u64) -> Self {
        Key {
            group: group.to_string(),
            metric: metric.to_string(),
            size,
            cost_us,
            live,
        }
    }
}

/// One benchmark row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The strategy measured.
    pub strategy: Strategy,
    /// The mode it was measured in.
    pub mode: Mode,
    /// What was measured.
    pub key: Key,
    /// The value.
    pub value: f64,
    /// The value exactly as printed, so that the CSV does not reformat it.
    pub value_text: String,
}

impl Row {
    /// The strategy's name as printed: the client, and `-persistent` in persistent mode.
    pub fn label(&self) -> String {
        format!("{}{}", self.strategy.as_str(), self.mode.suffix())
    }
}

/// The result of parsing a log.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// Every valid row, in log order.
    pub rows: Vec<Row>,
    /// Lines that carried the marker but did not parse: 1-based line number and reason.
    pub rejected: Vec<(usize, String)>,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn parse_int(field: &str, what: &str) -> Result<u64, String> {
    field
        .parse::<u64>()
        .map_err(|_| format!("{what} `{field}` is not a non-negative integer"))
}

/// Parses the fields after [`MARKER`] (`strategy,group,metric,size,cost,live,value`).
pub fn parse_row(fields: &str) -> Result<Row, String> {
    let parts: Vec<&str> = fields.split(',').map(str::trim).collect();
    if parts.len() != 7 {
        return Err(format!(
            "expected 7 fields after the marker, found {}",
            parts.len()
        ));
    }
    let (name, mode) = match parts[0].strip_suffix(Mode::Persistent.suffix()) {
        Some(name) => (name, Mode::Persistent),
        None => (parts[0], Mode::Callback),
    };
    let strategy =
        Strategy::from_name(name).ok_or_else(|| format!("unknown strategy `{}`", parts[0]))?;
    for (what, field) in [("group", parts[1]), ("metric", parts[2])] {
        if !is_token(field) {
            return Err(format!("bad {what} `{field}`"));
        }
    }
    let size = parse_int(parts[3], "size_bytes")?;
    let cost_us = parse_int(parts[4], "pin_cost_us")?;
    let live = parse_int(parts[5], "live")?;
    let value_text = parts[6];
    let value = value_text
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("value `{value_text}` is not a finite decimal"))?;
    if !value_text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
    {
        return Err(format!("value `{value_text}` is not a decimal"));
    }
    Ok(Row {
        strategy,
        mode,
        key: Key::new(parts[1], parts[2], size, cost_us, live),
        value,
        value_text: value_text.to_string(),
    })
}

/// Parses a whole console log.
pub fn parse_log(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for (index, line) in text.lines().enumerate() {
        let Some(at) = line.find(MARKER) else {
            continue;
        };
        let rest = line[at + MARKER.len()..].trim_end_matches(['\r', ' ', '\t']);
        match parse_row(rest) {
            Ok(row) => parsed.rows.push(row),
            Err(reason) => parsed.rejected.push((index + 1, reason)),
        }
    }
    parsed
}

/// Rows indexed for lookup. A figure printed more than once (`make bench` boots each
/// client several times, interleaved) reports the median of its values.
#[derive(Clone, Debug, Default)]
pub struct Results {
    rows: Vec<Row>,
    index: HashMap<(Strategy, Key), f64>,
    order: Vec<Key>,
}

/// The median of `v` (the mean of the two middle values for an even count); `v` is
/// not empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Results {
    /// Indexes `rows` (kept in their order for the CSV).
    pub fn new(rows: Vec<Row>) -> Self {
        let mut values: HashMap<(Strategy, Key), Vec<f64>> = HashMap::new();
        let mut order = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for row in &rows {
            values
                .entry((row.strategy, row.key.clone()))
                .or_default()
                .push(row.value);
            if seen.insert(row.key.clone()) {
                order.push(row.key.clone());
            }
        }
        let index = values.into_iter().map(|(k, v)| (k, median(v))).collect();
        Results { rows, index, order }
    }

    /// All rows in log order.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// Distinct keys in order of first appearance.
    pub fn keys(&self) -> &[Key] {
        &self.order
    }

    /// The value of one figure (the median of its runs).
    pub fn get(&self, strategy: Strategy, key: &Key) -> Option<f64> {
        self.index.get(&(strategy, key.clone())).copied()
    }

    /// Keys of `group`/`metric` (in order of first appearance).
    pub fn keys_of<'a>(&'a self, group: &'a str, metric: &'a str) -> impl Iterator<Item = &'a Key> {
        self.order
            .iter()
            .filter(move |k| k.group == group && k.metric == metric)
    }
}

/// Sizes as people say them: `64 KiB`, `2 MiB`, `64 MiB`; other sizes in bytes.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_with_timestamps_and_noise() {
        let log = "\
[    0.000000] Linux version 6.12.0 (builder@host)
[   12.345678] PEERMEM-BENCH,peermem,latency,reg_mean_ns,65536,0,0,4210.5\r
random noise PEERMEM-BENCH,reference,latency,pins_per_reg,2097152,50,0,2.00
PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,100000,7400
[   13.000001] peermem: module loaded
[   13.1] PEERMEM-BENCH,peermem,latency,reg_mean
[   13.2] PEERMEM-BENCH,nvidia,latency,reg_mean_ns,65536,0,0,1
[   13.3] PEERMEM-BENCH,peermem,latency,reg_mean_ns,65536,0,0,fast
";
        let parsed = parse_log(log);
        assert_eq!(parsed.rows.len(), 3);
        let r = &parsed.rows[0];
        assert_eq!(r.strategy, Strategy::Peermem);
        assert_eq!(r.key, Key::new("latency", "reg_mean_ns", 65536, 0, 0));
        assert_eq!(r.value, 4210.5);
        assert_eq!(r.value_text, "4210.5");
        let r = &parsed.rows[1];
        assert_eq!(r.strategy, Strategy::Reference);
        assert_eq!(r.key, Key::new("latency", "pins_per_reg", 2097152, 50, 0));
        assert_eq!(r.value, 2.0);
        assert_eq!(parsed.rows[2].key.live, 100000);
        let lines: Vec<usize> = parsed.rejected.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, vec![6, 7, 8]);
        assert!(parsed.rejected[0].1.contains("7 fields"));
        assert!(parsed.rejected[1].1.contains("unknown strategy"));
        assert!(parsed.rejected[2].1.contains("fast"));
    }

    #[test]
    fn rejects_non_finite_and_negative_fields() {
        assert!(parse_row("peermem,latency,x,65536,0,0,inf").is_err());
        assert!(parse_row("peermem,latency,x,65536,0,0,NaN").is_err());
        assert!(parse_row("peermem,latency,x,-1,0,0,1").is_err());
        assert!(parse_row("peermem,lat ency,x,1,0,0,1").is_err());
        assert_eq!(
            parse_row("peermem,memory,m,1,0,0,1e3").unwrap().value,
            1000.0
        );
    }

    #[test]
    fn repeated_figures_report_their_median_and_order_is_kept() {
        let parsed = parse_log(
            "PEERMEM-BENCH,peermem,a,m,1,0,0,1\n\
             PEERMEM-BENCH,peermem,b,m,1,0,0,5\n\
             PEERMEM-BENCH,peermem,c,m,1,0,0,7\n\
             PEERMEM-BENCH,peermem,a,m,1,0,0,2\n\
             PEERMEM-BENCH,peermem,c,m,1,0,0,1\n\
             PEERMEM-BENCH,peermem,c,m,1,0,0,4\n",
        );
        let results = Results::new(parsed.rows);
        assert_eq!(results.rows().len(), 6);
        assert_eq!(results.keys().len(), 3);
        assert_eq!(results.keys()[0].group, "a");
        assert_eq!(results.keys()[2].group, "c");
        let get = |g| results.get(Strategy::Peermem, &Key::new(g, "m", 1, 0, 0));
        // Two runs: the mean of both; three: the middle one, not the last or the mean.
        assert_eq!(get("a"), Some(1.5));
        assert_eq!(get("b"), Some(5.0));
        assert_eq!(get("c"), Some(4.0));
        assert_eq!(
            results.get(Strategy::Reference, &Key::new("a", "m", 1, 0, 0)),
            None
        );
    }

    #[test]
    fn humanises_sizes() {
        assert_eq!(human_size(65536), "64 KiB");
        assert_eq!(human_size(2097152), "2 MiB");
        assert_eq!(human_size(67108864), "64 MiB");
        assert_eq!(human_size(1 << 30), "1 GiB");
        assert_eq!(human_size(4097), "4097 B");
        assert_eq!(human_size(0), "0 B");
    }
}
