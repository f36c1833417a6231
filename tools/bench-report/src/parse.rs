// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Parsing of `PEERMEM-BENCH,...` rows out of a serial console log.
//!
//! A row is `PEERMEM-BENCH,<strategy>,<group>,<metric>,<size_bytes>,<pin_cost_us>,<live>,<value>`.
//! Anything before the marker on a line (a printk timestamp) is ignored; lines without
//! it are noise. A line with the marker that does not parse is kept in
//! [`Parsed::rejected`] for a warning. Each load of the benchmark driver ends with a
//! `PEERMEM-BENCH-DONE,<strategy>,<failures>` line, which numbers the loads ([`Row::load`]).

use std::collections::HashMap;

/// The marker that starts every benchmark row.
pub const MARKER: &str = "PEERMEM-BENCH,";
/// The line that ends each load of the driver (tests/bench/peermem_bench.c).
pub const DONE: &str = "PEERMEM-BENCH-DONE,";

/// Which client (or the floor) produced a row; the discriminant indexes a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    /// peermem.
    Peermem,
    /// The baseline client costed as nvidia-peermem (tests/bench/peermem_baseline.c).
    Reference,
    /// The baseline's floor mode: one pin, nothing of its own beyond the reference's.
    Floor,
}

impl Strategy {
    /// Every strategy, in the order of a turn's slots.
    pub const ALL: [Strategy; 3] = [Strategy::Peermem, Strategy::Reference, Strategy::Floor];

    /// The name in the console rows and the CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Peermem => "peermem",
            Strategy::Reference => "reference",
            Strategy::Floor => "floor",
        }
    }
}

/// The client mode: the strategy's name carries `-persistent` in persistent mode (the
/// default of both clients), nothing in callback mode (`persistent_api_support=0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Persistent pins.
    Persistent,
    /// Callback pins, which peermem shares.
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

    fn suffix(self) -> &'static str {
        match self {
            Mode::Persistent => "-persistent",
            Mode::Callback => "",
        }
    }
}

/// What one figure measures: everything in a row but the strategy and the value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// `latency`, `phase`, `reuse`, `scaling`, `memory`, `huge` (or another, kept).
    pub group: String,
    /// The metric, e.g. `op_mean_ns`.
    pub metric: String,
    /// Registration size in bytes.
    pub size: u64,
    /// Simulated pin (and unpin) cost in microseconds.
    pub cost_us: u64,
    /// Live registrations while measuring.
    pub live: u64,
}

impl Key {
    /// Builds a key.
    pub fn new(group: &str, metric: &str, size: u64, cost_us: u64, live: u64) -> Self {
        let (group, metric) = (group.to_string(), metric.to_string());
        Key {
            group,
            metric,
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
    /// The value as printed, for the CSV.
    pub value_text: String,
    /// The load of the driver it came from: the number of [`DONE`] lines before it.
    /// A boot's scaling series is one load (scripts/bench-rounds).
    pub load: usize,
}

impl Row {
    /// The strategy's name as printed, `-persistent` included.
    pub fn label(&self) -> String {
        format!("{}{}", self.strategy.as_str(), self.mode.suffix())
    }
}

/// A parsed log.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// Every valid row, in log order.
    pub rows: Vec<Row>,
    /// Lines with the marker that did not parse: 1-based line number and reason.
    pub rejected: Vec<(usize, String)>,
}

fn parse_int(field: &str, what: &str) -> Result<u64, String> {
    field
        .parse::<u64>()
        .map_err(|_| format!("{what} `{field}` is not a non-negative integer"))
}

/// Parses the fields after [`MARKER`] (`strategy,group,metric,size,cost,live,value`).
pub fn parse_row(fields: &str) -> Result<Row, String> {
    let parts: Vec<&str> = fields.split(',').map(str::trim).collect();
    let [name, group, metric, size, cost, live, value_text] = parts[..] else {
        return Err(format!(
            "expected 7 fields after the marker, found {}",
            parts.len()
        ));
    };
    let (client, mode) = match name.strip_suffix(Mode::Persistent.suffix()) {
        Some(client) => (client, Mode::Persistent),
        None => (name, Mode::Callback),
    };
    let strategy = Strategy::ALL
        .into_iter()
        .find(|s| s.as_str() == client)
        .ok_or_else(|| format!("unknown strategy `{name}`"))?;
    for (what, field) in [("group", group), ("metric", metric)] {
        let token = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
        if field.is_empty() || !field.bytes().all(token) {
            return Err(format!("bad {what} `{field}`"));
        }
    }
    let decimal = |b: u8| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E');
    let value = value_text
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && value_text.bytes().all(decimal))
        .ok_or_else(|| format!("value `{value_text}` is not a finite decimal"))?;
    Ok(Row {
        strategy,
        mode,
        key: Key::new(
            group,
            metric,
            parse_int(size, "size_bytes")?,
            parse_int(cost, "pin_cost_us")?,
            parse_int(live, "live")?,
        ),
        value,
        value_text: value_text.to_string(),
        load: 0,
    })
}

/// Parses a whole console log.
pub fn parse_log(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut load = 0;
    for (index, line) in text.lines().enumerate() {
        if line.contains(DONE) {
            load += 1;
        }
        let Some(at) = line.find(MARKER) else {
            continue;
        };
        match parse_row(line[at + MARKER.len()..].trim_end()) {
            Ok(row) => parsed.rows.push(Row { load, ..row }),
            Err(reason) => parsed.rejected.push((index + 1, reason)),
        }
    }
    parsed
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

/// Rows indexed for lookup: a figure printed more than once (each round boots every
/// client again) is the median of its values.
#[derive(Clone, Debug, Default)]
pub struct Results {
    rows: Vec<Row>,
    index: HashMap<(Strategy, Key), f64>,
    order: Vec<Key>,
}

impl Results {
    /// Indexes `rows` (kept in their order for the CSV).
    pub fn new(rows: Vec<Row>) -> Self {
        let mut values: HashMap<(Strategy, Key), Vec<f64>> = HashMap::new();
        let mut order = Vec::new();
        for row in &rows {
            if !order.contains(&row.key) {
                order.push(row.key.clone());
            }
            let key = (row.strategy, row.key.clone());
            values.entry(key).or_default().push(row.value);
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

    /// One figure: the median of its runs.
    pub fn get(&self, strategy: Strategy, key: &Key) -> Option<f64> {
        self.index.get(&(strategy, key.clone())).copied()
    }

    /// The keys of `group` and `metric`, in order of first appearance.
    pub fn keys_of<'a>(&'a self, group: &'a str, metric: &'a str) -> impl Iterator<Item = &'a Key> {
        self.order
            .iter()
            .filter(move |k| k.group == group && k.metric == metric)
    }

    /// The first key of `group`, `metric`, `size` and `cost` (any live count) that
    /// `strategy` measured, and its figure.
    pub fn find(
        &self,
        s: Strategy,
        group: &str,
        metric: &str,
        size: u64,
        cost: u64,
    ) -> Option<(&Key, f64)> {
        self.order
            .iter()
            .filter(|k| {
                k.group == group && k.metric == metric && k.size == size && k.cost_us == cost
            })
            .find_map(|k| Some((k, self.get(s, k)?)))
    }
}

/// Sizes as people say them: `64 KiB`, `2 MiB`, `64 MiB`; other sizes in bytes.
pub fn human_size(bytes: u64) -> String {
    for (unit, name) in [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
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
    fn parses_rows_with_timestamps_and_noise_and_numbers_the_loads() {
        let log = "\
[    0.000000] Linux version 6.12.0 (builder@host)
[   12.345678] PEERMEM-BENCH,peermem,latency,reg_mean_ns,65536,0,0,4210.5\r
random noise PEERMEM-BENCH,reference-persistent,latency,pins_per_reg,2097152,50,0,2.00
[   12.4] PEERMEM-BENCH-DONE,peermem,0
PEERMEM-BENCH,peermem,scaling,op_ns,65536,0,100000,7400
[   13.1] PEERMEM-BENCH,peermem,latency,reg_mean
[   13.2] PEERMEM-BENCH,nvidia,latency,reg_mean_ns,65536,0,0,1
[   13.3] PEERMEM-BENCH,peermem,latency,reg_mean_ns,65536,0,0,fast
";
        let parsed = parse_log(log);
        assert_eq!(parsed.rows.len(), 3);
        let r = &parsed.rows[0];
        assert_eq!(
            (r.strategy, r.mode, r.load),
            (Strategy::Peermem, Mode::Callback, 0)
        );
        assert_eq!(r.key, Key::new("latency", "reg_mean_ns", 65536, 0, 0));
        assert_eq!((r.value, r.value_text.as_str()), (4210.5, "4210.5"));
        let r = &parsed.rows[1];
        assert_eq!(
            (r.strategy, r.mode),
            (Strategy::Reference, Mode::Persistent)
        );
        assert_eq!(r.label(), "reference-persistent");
        assert_eq!(r.key, Key::new("latency", "pins_per_reg", 2097152, 50, 0));
        assert_eq!((parsed.rows[2].key.live, parsed.rows[2].load), (100000, 1));
        let lines: Vec<usize> = parsed.rejected.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, vec![6, 7, 8]);
        assert!(parsed.rejected[0].1.contains("7 fields"));
        assert!(parsed.rejected[1].1.contains("unknown strategy"));
        assert!(parsed.rejected[2].1.contains("fast"));
    }

    #[test]
    fn rejects_non_finite_and_negative_fields() {
        for bad in ["x,0,0,inf", "x,0,0,NaN", "x,0,0,0x1", "x,-1,0,1"] {
            assert!(
                parse_row(&format!("peermem,latency,{bad}")).is_err(),
                "{bad}"
            );
        }
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
        assert_eq!((results.rows().len(), results.keys().len()), (6, 3));
        assert_eq!(results.keys()[2].group, "c");
        let get = |g| results.get(Strategy::Peermem, &Key::new(g, "m", 1, 0, 0));
        // Two runs: the mean of both; three: the middle one, not the last or the mean.
        assert_eq!(
            (get("a"), get("b"), get("c")),
            (Some(1.5), Some(5.0), Some(4.0))
        );
        assert_eq!(results.find(Strategy::Reference, "a", "m", 1, 0), None);
    }

    #[test]
    fn humanises_sizes() {
        let sizes = [65536, 2097152, 67108864, 1 << 30, 4097, 0].map(human_size);
        assert_eq!(
            sizes,
            ["64 KiB", "2 MiB", "64 MiB", "1 GiB", "4097 B", "0 B"]
        );
    }
}
