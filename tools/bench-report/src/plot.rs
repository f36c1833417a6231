// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The four plots: `latency.png`, `pins.png`, `scaling.png`, `sg_memory.png`.

use crate::canvas::{Canvas, Rgb, BLACK, DARK, GRID, WHITE};
use crate::font;
use crate::parse::{human_size, Results, Strategy};
use crate::report::{pair, SIZE_64K, SIZE_64M};

/// Image width.
pub const WIDTH: usize = 800;
/// Image height.
pub const HEIGHT: usize = 500;

/// peermem's colour (blue).
pub const PEERMEM: Rgb = [31, 119, 180];
/// The reference's colour (orange).
pub const REFERENCE: Rgb = [255, 127, 14];

/// A compact number: `0`, `4.2`, `516`, `1024`, `33.3k`, `1.5M`.
pub fn compact(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let (n, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e4 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let text = match n.abs() {
        a if a >= 100.0 => format!("{n:.0}"),
        a if a >= 10.0 => format!("{n:.1}"),
        _ => format!("{n:.2}"),
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text}{suffix}")
}

/// A vertical value axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// From 0 to `max`, ticks every `step`.
    Linear {
        /// Top of the axis.
        max: f64,
        /// Tick spacing.
        step: f64,
    },
    /// From 10^lo to 10^hi.
    Log {
        /// Lowest decade.
        lo: i32,
        /// Highest decade.
        hi: i32,
    },
}

impl Scale {
    /// A linear axis from 0 that fits `max` with room for labels above.
    pub fn linear(max: f64) -> Self {
        let max = if max > 0.0 { max * 1.15 } else { 1.0 };
        let raw = max / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        Scale::Linear {
            max: (max / step).ceil() * step,
            step,
        }
    }

    /// A log axis covering the positive values, with room above the largest.
    pub fn log(values: impl IntoIterator<Item = f64>) -> Self {
        let pos: Vec<f64> = values.into_iter().filter(|v| *v > 0.0).collect();
        if pos.is_empty() {
            return Scale::Log { lo: 0, hi: 1 };
        }
        let min = pos.iter().copied().fold(f64::INFINITY, f64::min);
        let max = pos.iter().copied().fold(0.0, f64::max);
        // Half the smallest value, so that a bar at an exact power of ten shows.
        let lo = (min / 2.0).log10().floor() as i32;
        let hi = ((max * 2.0).log10().ceil() as i32).max(lo + 1);
        Scale::Log { lo, hi }
    }

    /// Position of `v` as a fraction of the axis (0 bottom, 1 top), clamped.
    pub fn frac(&self, v: f64) -> f64 {
        let f = match *self {
            Scale::Linear { max, .. } => v / max,
            Scale::Log { lo, hi } => {
                if v <= 0.0 {
                    0.0
                } else {
                    (v.log10() - lo as f64) / (hi - lo) as f64
                }
            }
        };
        f.clamp(0.0, 1.0)
    }

    /// Tick values.
    pub fn ticks(&self) -> Vec<f64> {
        match *self {
            Scale::Linear { max, step } => {
                let n = (max / step).round() as i64;
                (0..=n).map(|i| i as f64 * step).collect()
            }
            Scale::Log { lo, hi } => (lo..=hi).map(|e| 10f64.powi(e)).collect(),
        }
    }
}

/// One data series of a plot.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Colour.
    pub color: Rgb,
    /// One value per category (`None`: not measured).
    pub values: Vec<Option<f64>>,
}

/// A rectangle of the image.
#[derive(Clone, Copy, Debug)]
pub struct Rect {
    /// Left.
    pub x0: i64,
    /// Top.
    pub y0: i64,
    /// Right (exclusive).
    pub x1: i64,
    /// Bottom (exclusive).
    pub y1: i64,
}

/// Where data go inside a panel, after room for title, ticks and labels.
fn inner(area: Rect) -> Rect {
    Rect {
        x0: area.x0 + 62,
        y0: area.y0 + 24,
        x1: area.x1 - 8,
        y1: area.y1 - 44,
    }
}

/// Marks an empty chart inside its plot rectangle `r`.
fn not_measured(c: &mut Canvas, r: Rect) {
    c.text_centered(
        (r.x0 + r.x1) / 2,
        (r.y0 + r.y1) / 2,
        "not measured",
        1,
        DARK,
    );
}

/// Frame, grid, y ticks, panel title and y label; returns the inner rectangle.
fn axes(c: &mut Canvas, area: Rect, title: &str, ylabel: &str, scale: Scale) -> Rect {
    let r = inner(area);
    c.text_centered((r.x0 + r.x1) / 2, area.y0 + 4, title, 1, BLACK);
    for t in scale.ticks() {
        let y = r.y1 - 1 - (scale.frac(t) * (r.y1 - r.y0 - 1) as f64).round() as i64;
        c.fill(r.x0, y, r.x1, y + 1, GRID);
        c.fill(r.x0 - 4, y, r.x0, y + 1, DARK);
        c.text_right(r.x0 - 7, y - 3, &compact(t), 1, DARK);
    }
    c.fill(r.x0, r.y0, r.x0 + 1, r.y1, DARK);
    c.fill(r.x0, r.y1 - 1, r.x1, r.y1, DARK);
    c.text_vertical(area.x0 + 2, (r.y0 + r.y1) / 2, ylabel, 1, DARK);
    r
}

fn y_of(r: Rect, scale: Scale, v: f64) -> i64 {
    r.y1 - 1 - (scale.frac(v) * (r.y1 - r.y0 - 1) as f64).round() as i64
}

/// A grouped bar panel. Category labels may hold `\n` for a second line.
#[allow(clippy::too_many_arguments)]
pub fn bar_panel(
    c: &mut Canvas,
    area: Rect,
    title: &str,
    ylabel: &str,
    categories: &[String],
    series: &[Series],
    scale: Scale,
    label: &dyn Fn(f64) -> String,
) {
    let r = axes(c, area, title, ylabel, scale);
    if categories.is_empty() {
        not_measured(c, r);
        return;
    }
    let group_w = (r.x1 - r.x0) / categories.len() as i64;
    let bar_w = ((group_w * 7 / 10) / series.len().max(1) as i64).max(2);
    for (i, cat) in categories.iter().enumerate() {
        let gx = r.x0 + group_w * i as i64 + (group_w - bar_w * series.len() as i64) / 2;
        for (j, s) in series.iter().enumerate() {
            let x = gx + bar_w * j as i64;
            let base = r.y1 - 1;
            match s.values.get(i).copied().flatten() {
                Some(v) => {
                    let top = y_of(r, scale, v);
                    if top < base {
                        c.fill(x + 1, top, x + bar_w - 1, base, s.color);
                    }
                    let text = label(v);
                    let w = font::text_width(&text, 1) as i64;
                    let tx = x + bar_w / 2;
                    if w > bar_w + 4 && top - 10 < r.y0 + 2 {
                        // No room above a tall, narrow bar: label inside, in white.
                        c.text_vertical(tx - 3, top + w / 2 + 4, &text, 1, WHITE);
                    } else if w > bar_w + 4 {
                        c.text_vertical(tx - 3, top - w / 2 - 3, &text, 1, BLACK);
                    } else {
                        c.text_centered(tx, top - 10, &text, 1, BLACK);
                    }
                }
                None => c.text_vertical(x + bar_w / 2 - 3, base - 24, "n/a", 1, DARK),
            }
        }
        let cx = r.x0 + group_w * i as i64 + group_w / 2;
        for (k, line) in cat.split('\n').enumerate() {
            c.text_centered(cx, r.y1 + 6 + 11 * k as i64, line, 1, BLACK);
        }
    }
}

/// A line panel with a log x axis at `xs`.
pub fn line_panel(
    c: &mut Canvas,
    area: Rect,
    title: &str,
    ylabel: &str,
    xlabel: &str,
    xs: &[f64],
    series: &[Series],
) {
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .copied()
        .fold(0.0, f64::max);
    let scale = Scale::linear(max);
    let r = axes(c, area, title, ylabel, scale);
    c.text_centered((r.x0 + r.x1) / 2, r.y1 + 24, xlabel, 1, DARK);
    if xs.is_empty() {
        not_measured(c, r);
        return;
    }
    let lo = xs
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .log10()
        .floor();
    let hi = xs
        .iter()
        .copied()
        .fold(0.0, f64::max)
        .log10()
        .ceil()
        .max(lo + 1.0);
    let pad = 30;
    let x_of = |v: f64| {
        r.x0 + pad + (((v.log10() - lo) / (hi - lo)) * (r.x1 - r.x0 - 2 * pad) as f64) as i64
    };
    let mut e = lo;
    while e <= hi {
        let x = x_of(10f64.powf(e));
        c.fill(x, r.y1, x + 1, r.y1 + 4, DARK);
        c.text_centered(x, r.y1 + 7, &compact(10f64.powf(e)), 1, DARK);
        e += 1.0;
    }
    for (j, s) in series.iter().enumerate() {
        let points: Vec<(i64, i64, f64)> = xs
            .iter()
            .zip(&s.values)
            .filter_map(|(x, v)| v.map(|v| (x_of(*x), y_of(r, scale, v), v)))
            .collect();
        for w in points.windows(2) {
            c.line(w[0].0, w[0].1, w[1].0, w[1].1, 3, s.color);
        }
        for (x, y, v) in &points {
            c.fill(x - 4, y - 4, x + 5, y + 5, s.color);
            // peermem's labels below its points, the reference's above.
            let dy = if j == 0 { 9 } else { -17 };
            c.text_centered(*x, y + dy, &compact(*v), 1, BLACK);
        }
    }
}

/// A legend box at the image's top right.
pub fn legend(c: &mut Canvas, series: &[(String, Rgb)]) {
    let w = series
        .iter()
        .map(|(n, _)| font::text_width(n, 1) as i64)
        .max()
        .unwrap_or(0)
        + 30;
    let h = 14 * series.len() as i64 + 8;
    let (x0, y0) = (c.width as i64 - w - 12, 8);
    c.fill(x0, y0, x0 + w, y0 + h, WHITE);
    c.outline(x0, y0, x0 + w, y0 + h, DARK);
    for (i, (name, color)) in series.iter().enumerate() {
        let y = y0 + 5 + 14 * i as i64;
        c.fill(x0 + 6, y, x0 + 18, y + 9, *color);
        c.text(x0 + 24, y + 1, name, 1, BLACK);
    }
}

fn start(title: &str, subtitle: &str) -> Canvas {
    let mut c = Canvas::new(WIDTH, HEIGHT);
    c.text(14, 10, title, 2, BLACK);
    c.text(14, 32, subtitle, 1, DARK);
    c
}

fn both() -> Vec<(String, Rgb)> {
    vec![
        ("peermem".into(), PEERMEM),
        ("reference (nvidia-peermem)".into(), REFERENCE),
    ]
}

fn series(p: Vec<Option<f64>>, r: Vec<Option<f64>>) -> Vec<Series> {
    vec![
        Series {
            name: "peermem".into(),
            color: PEERMEM,
            values: p,
        },
        Series {
            name: "reference".into(),
            color: REFERENCE,
            values: r,
        },
    ]
}

fn distinct<T: PartialOrd + Copy>(mut v: Vec<T>) -> Vec<T> {
    v.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    v.dedup_by(|a, b| a == b);
    v
}

fn ratio_line(p: Option<f64>, r: Option<f64>) -> String {
    crate::report::ratio(p, r)
        .map(|q| {
            if q < 0.1 {
                format!("p/r {q:.3}")
            } else {
                format!("p/r {q:.2}")
            }
        })
        .unwrap_or_default()
}

/// `latency.png`: registration mean latency by size, one panel per pin cost.
pub fn latency(results: &Results) -> Canvas {
    let mut c = start(
        "Registration latency",
        "mean register time in us (log scale); p/r = peermem / reference",
    );
    let keys: Vec<_> = results.keys_of("latency", "reg_mean_ns").collect();
    let costs = distinct(keys.iter().map(|k| k.cost_us).collect());
    let sizes = distinct(keys.iter().map(|k| k.size).collect());
    let costs = if costs.is_empty() { vec![0] } else { costs };
    let get = |size, cost| pair(results, "latency", "reg_mean_ns", size, Some(cost));
    let all: Vec<f64> = costs
        .iter()
        .flat_map(|cost| sizes.iter().map(move |s| (*s, *cost)))
        .flat_map(|(s, cost)| {
            let (p, r) = get(s, cost);
            [p, r]
        })
        .flatten()
        .map(|v| v / 1000.0)
        .collect();
    let scale = Scale::log(all);
    let panel_w = (WIDTH as i64 - 20) / costs.len() as i64;
    for (i, cost) in costs.iter().enumerate() {
        let (mut pv, mut rv, mut cats) = (Vec::new(), Vec::new(), Vec::new());
        for size in &sizes {
            let (p, r) = get(*size, *cost);
            pv.push(p.map(|v| v / 1000.0));
            rv.push(r.map(|v| v / 1000.0));
            cats.push(format!("{}\n{}", human_size(*size), ratio_line(p, r)));
        }
        let area = Rect {
            x0: 10 + panel_w * i as i64,
            y0: 60,
            x1: 10 + panel_w * (i as i64 + 1),
            y1: HEIGHT as i64 - 10,
        };
        bar_panel(
            &mut c,
            area,
            &format!("pin cost {cost} us"),
            "register mean (us)",
            &cats,
            &series(pv, rv),
            scale,
            &compact,
        );
    }
    legend(&mut c, &both());
    c
}

/// `pins.png`: pins per registration (latency configurations) and per covered
/// re-registration (reuse).
pub fn pins(results: &Results) -> Canvas {
    let mut c = start(
        "Pins per registration",
        "latency runs (size / pin cost) and a covered re-registration (reuse)",
    );
    let (mut pv, mut rv, mut cats) = (Vec::new(), Vec::new(), Vec::new());
    for k in results.keys_of("latency", "pins_per_reg") {
        pv.push(results.get(Strategy::Peermem, k));
        rv.push(results.get(Strategy::Reference, k));
        cats.push(format!("{}\n{} us", human_size(k.size), k.cost_us));
    }
    for k in results.keys_of("reuse", "pins_per_reg") {
        pv.push(results.get(Strategy::Peermem, k));
        rv.push(results.get(Strategy::Reference, k));
        cats.push("re-register\n(covered)".into());
    }
    let max = pv.iter().chain(&rv).flatten().copied().fold(2.0, f64::max);
    let area = Rect {
        x0: 10,
        y0: 60,
        x1: WIDTH as i64 - 10,
        y1: HEIGHT as i64 - 10,
    };
    bar_panel(
        &mut c,
        area,
        "",
        "pins per registration",
        &cats,
        &series(pv, rv),
        Scale::linear(max),
        &|v| format!("{v:.2}"),
    );
    legend(&mut c, &both());
    c
}

/// `scaling.png`: cost of one register+deregister against live registrations.
pub fn scaling(results: &Results) -> Canvas {
    let keys: Vec<_> = results.keys_of("scaling", "op_ns").collect();
    let lives = distinct(keys.iter().map(|k| k.live).filter(|l| *l > 0).collect());
    let at = |s, live| {
        keys.iter()
            .filter(|k| k.live == live)
            .find_map(|k| results.get(s, k))
    };
    let pv: Vec<_> = lives.iter().map(|l| at(Strategy::Peermem, *l)).collect();
    let rv: Vec<_> = lives.iter().map(|l| at(Strategy::Reference, *l)).collect();
    let growth = match (pv.first().copied().flatten(), pv.last().copied().flatten()) {
        (Some(a), Some(b)) if a > 0.0 && lives.len() > 1 => format!(
            "; peermem grows x{:.2} from {} to {} live",
            b / a,
            lives[0],
            lives[lives.len() - 1]
        ),
        _ => String::new(),
    };
    let mut c = start(
        "Scaling with live registrations",
        &format!("mean ns per register+deregister of 64 KiB{growth}"),
    );
    let area = Rect {
        x0: 10,
        y0: 60,
        x1: WIDTH as i64 - 10,
        y1: HEIGHT as i64 - 10,
    };
    let xs: Vec<f64> = lives.iter().map(|l| *l as f64).collect();
    line_panel(
        &mut c,
        area,
        "",
        "register+deregister (ns)",
        "live registrations (log scale)",
        &xs,
        &series(pv, rv),
    );
    legend(&mut c, &both());
    c
}

/// Looks up (peermem, reference) at a size.
type PairAt<'a> = dyn Fn(u64) -> (Option<f64>, Option<f64>) + 'a;

/// `sg_memory.png`: SG entries and module bytes per registration at 64 KiB and 64 MiB.
pub fn sg_memory(results: &Results) -> Canvas {
    let mut c = start(
        "SG entries and module memory",
        "per registration, 64 KiB and 64 MiB (log scale)",
    );
    let sizes = [SIZE_64K, SIZE_64M];
    let sg = |size| {
        let at0 = pair(results, "latency", "sg_entries", size, Some(0));
        if at0.0.is_some() || at0.1.is_some() {
            at0
        } else {
            pair(results, "latency", "sg_entries", size, None)
        }
    };
    let mem = |size| pair(results, "memory", "bytes_per_reg_module", size, None);
    let half = (WIDTH as i64 - 20) / 2;
    let panels: [(&str, &str, &PairAt); 2] = [
        ("SG entries", "SG entries per registration", &sg),
        ("module bytes per live registration", "bytes", &mem),
    ];
    for (i, (title, ylabel, get)) in panels.iter().enumerate() {
        let (mut pv, mut rv, mut cats) = (Vec::new(), Vec::new(), Vec::new());
        for size in sizes {
            let (p, r) = get(size);
            pv.push(p);
            rv.push(r);
            cats.push(format!("{}\n{}", human_size(size), ratio_line(p, r)));
        }
        let scale = Scale::log(pv.iter().chain(&rv).flatten().copied());
        let area = Rect {
            x0: 10 + half * i as i64,
            y0: 60,
            x1: 10 + half * (i as i64 + 1),
            y1: HEIGHT as i64 - 10,
        };
        bar_panel(
            &mut c,
            area,
            title,
            ylabel,
            &cats,
            &series(pv, rv),
            scale,
            &compact,
        );
    }
    legend(&mut c, &both());
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_log;

    #[test]
    fn compact_numbers() {
        assert_eq!(compact(0.0), "0");
        assert_eq!(compact(0.1), "0.1");
        assert_eq!(compact(4.2), "4.2");
        assert_eq!(compact(1.0), "1");
        assert_eq!(compact(516.0), "516");
        assert_eq!(compact(1024.0), "1024");
        assert_eq!(compact(33280.0), "33.3k");
        assert_eq!(compact(100000.0), "100k");
        assert_eq!(compact(1.5e6), "1.5M");
    }

    #[test]
    fn scales() {
        assert_eq!(
            Scale::linear(2.0),
            Scale::Linear {
                max: 2.5,
                step: 0.5
            }
        );
        assert_eq!(Scale::log([4.2, 905.0]), Scale::Log { lo: 0, hi: 4 });
        assert_eq!(Scale::log([1.0, 1024.0]), Scale::Log { lo: -1, hi: 4 });
        assert_eq!(Scale::log([0.0]), Scale::Log { lo: 0, hi: 1 });
        let s = Scale::Log { lo: 0, hi: 4 };
        assert_eq!(s.frac(100.0), 0.5);
        assert_eq!(s.frac(0.0), 0.0);
        assert_eq!(s.ticks(), vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
    }

    #[test]
    fn bars_are_drawn_in_series_colours() {
        let results = crate::parse::Results::new(
            parse_log(
                "PEERMEM-BENCH,peermem,latency,pins_per_reg,65536,0,0,1\n\
                 PEERMEM-BENCH,reference,latency,pins_per_reg,65536,0,0,2\n",
            )
            .rows,
        );
        let c = pins(&results);
        assert_eq!((c.width, c.height), (WIDTH, HEIGHT));
        let count = |col: Rgb| c.pixels.chunks(3).filter(|p| *p == col).count();
        // The reference's bar is twice as tall as peermem's, and as wide.
        let (p, r) = (count(PEERMEM), count(REFERENCE));
        // Each colour also fills one legend swatch of 12 x 9 pixels.
        let (p, r) = ((p - 108) as f64, (r - 108) as f64);
        assert!((r / p - 2.0).abs() < 0.02, "{p} {r}");
    }
}
