// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The five plots: `latency.png`, `pairs.png`, `pins.png`, `scaling.png`,
//! `sg_memory.png`, drawn with plotters on a bitmap, their text in a TrueType font
//! ([`FONT`]).

use std::error::Error;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::parse::{human_size, Results, Strategy};
use crate::report::{pair, SIZE_64K, SIZE_64M};

/// Image width.
pub const WIDTH: u32 = 800;
/// Image height.
pub const HEIGHT: u32 = 500;

/// peermem's colour (blue).
pub const PEERMEM: RGBColor = RGBColor(31, 119, 180);
/// The reference's colour (orange).
pub const REFERENCE: RGBColor = RGBColor(255, 127, 14);
/// The floor's colour (green).
pub const FLOOR: RGBColor = RGBColor(44, 160, 44);
/// Grid lines.
const GRID: RGBColor = RGBColor(225, 225, 225);
/// Axes and axis text.
const DARK: RGBColor = RGBColor(60, 60, 60);

/// The font of every text: DejaVu Sans from Debian's fonts-dejavu-core (installed by
/// scripts/setup). The environment variable `BENCH_REPORT_FONT` names another
/// TrueType or OpenType file.
pub const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// The family the font is registered as.
const FAMILY: &str = "sans-serif";

/// The whole image of a plot.
pub type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
/// What drawing returns.
pub type PlotResult<T = ()> = Result<T, Box<dyn Error>>;
/// A plot: draws `results` on an image of [`WIDTH`] x [`HEIGHT`].
pub type Plot = fn(&Results, &Area) -> PlotResult;

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
        // Steps of 1, 2 or 5 times a power of ten: those plotters puts ticks at.
        let step = [1.0, 2.0, 5.0, 10.0]
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

    /// The value at the bottom of the axis.
    pub fn bottom(&self) -> f64 {
        match *self {
            Scale::Linear { .. } => 0.0,
            Scale::Log { lo, .. } => 10f64.powi(lo),
        }
    }

    /// The value at the top of the axis.
    pub fn top(&self) -> f64 {
        match *self {
            Scale::Linear { max, .. } => max,
            Scale::Log { hi, .. } => 10f64.powi(hi),
        }
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

/// The font file: `$BENCH_REPORT_FONT`, or [`FONT`].
fn font_path() -> PathBuf {
    std::env::var_os("BENCH_REPORT_FONT").map_or_else(|| FONT.into(), PathBuf::from)
}

/// Loads the font and registers it with plotters, once per process.
pub fn load_font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    let load = || {
        let path = font_path();
        let bytes = std::fs::read(&path).map_err(|e| {
            let hint = "install fonts-dejavu-core, or name a font in BENCH_REPORT_FONT";
            format!("font {}: {e} ({hint})", path.display())
        })?;
        // plotters keeps registered fonts for the life of the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
            .map_err(|_| format!("font {}: not a TrueType or OpenType font", path.display()))
    };
    LOADED.get_or_init(load).clone()
}

/// Renders `plot` into RGB bytes, row by row.
pub fn render(plot: Plot, results: &Results) -> PlotResult<Vec<u8>> {
    load_font()?;
    let mut pixels = vec![0; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, HEIGHT)).into_drawing_area();
        plot(results, &root)?;
        root.present()?;
    }
    Ok(pixels)
}

/// Writes `plot` as a PNG file.
pub fn write_png(plot: Plot, results: &Results, path: &Path) -> PlotResult {
    load_font()?;
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    plot(results, &root)?;
    root.present()?;
    Ok(())
}

/// The text style of `size` pixels in `color`.
fn font(size: u32, color: RGBColor) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&color)
}

/// One data series of a plot.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Colour.
    pub color: RGBColor,
    /// One value per category (`None`: not measured).
    pub values: Vec<Option<f64>>,
}

/// A chart of one panel: title, room for tick labels and the axis description, a
/// mesh with grid lines at the y ticks. `ticks` bounds the number of (x, y) ticks.
fn chart<'a, 'b, X, Y>(
    area: &'a Area<'b>,
    title: &str,
    ylabel: &str,
    xlabel: &str,
    x: X,
    y: Y,
    ticks: (usize, usize),
) -> PlotResult<ChartContext<'a, BitMapBackend<'b>, Cartesian2d<X, Y>>>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_right(8)
        .x_label_area_size(44)
        .y_label_area_size(62);
    if title.is_empty() {
        builder.margin_top(24);
    } else {
        builder.margin_top(4).caption(title, font(13, BLACK));
    }
    let mut chart = builder.build_cartesian_2d(x, y)?;
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .max_light_lines(0)
        .bold_line_style(GRID)
        .axis_style(DARK)
        .label_style(font(11, DARK))
        .axis_desc_style(font(12, DARK))
        .x_label_formatter(&|v| compact(*v))
        .y_label_formatter(&|v| compact(*v))
        .x_labels(ticks.0)
        .y_labels(ticks.1)
        .y_desc(ylabel);
    if !xlabel.is_empty() {
        mesh.x_desc(xlabel);
    }
    mesh.draw()?;
    Ok(chart)
}

/// Marks an empty chart in the middle of its plotting area.
fn not_measured<X: Ranged, Y: Ranged>(
    chart: &ChartContext<'_, BitMapBackend<'_>, Cartesian2d<X, Y>>,
) -> PlotResult {
    let plotting = chart.plotting_area().strip_coord_spec();
    let (w, h) = plotting.dim_in_pixel();
    let style = font(12, DARK).pos(Pos::new(HPos::Center, VPos::Center));
    plotting.draw(&Text::new(
        "not measured",
        (w as i32 / 2, h as i32 / 2),
        style,
    ))?;
    Ok(())
}

/// A grouped bar panel. Category labels may hold `\n` for a second line.
pub fn bar_panel(
    area: &Area,
    title: &str,
    ylabel: &str,
    categories: &[String],
    series: &[Series],
    scale: Scale,
    label: &dyn Fn(f64) -> String,
) -> PlotResult {
    let bars = Bars {
        title,
        ylabel,
        categories,
        series,
        label,
    };
    let ticks = scale.ticks();
    let y_ticks = ticks.len();
    let range = scale.bottom()..scale.top();
    match scale {
        // plotters puts the ticks of a linear axis at round steps, as Scale does.
        Scale::Linear { .. } => draw_bars(area, &bars, RangedCoordf64::from(range), y_ticks),
        Scale::Log { .. } => {
            let y = range.log_scale().with_key_points(ticks);
            draw_bars(area, &bars, y, y_ticks)
        }
    }
}

/// What a bar panel shows.
struct Bars<'a> {
    title: &'a str,
    ylabel: &'a str,
    categories: &'a [String],
    series: &'a [Series],
    label: &'a dyn Fn(f64) -> String,
}

/// [`bar_panel`] on the linear or logarithmic y axis `y` with `y_ticks` ticks.
fn draw_bars<Y: Ranged<ValueType = f64> + ValueFormatter<f64>>(
    area: &Area,
    bars: &Bars<'_>,
    y: Y,
    y_ticks: usize,
) -> PlotResult {
    let Bars {
        title,
        ylabel,
        categories,
        series,
        label,
    } = *bars;
    // One unit of x per category; no x ticks, the categories are written below.
    let x = 0.0..categories.len().max(1) as f64;
    let chart = chart(
        area,
        title,
        ylabel,
        "",
        RangedCoordf64::from(x),
        y,
        (0, y_ticks),
    )?;
    if categories.is_empty() {
        return not_measured(&chart);
    }
    let Range {
        start: base,
        end: top,
    } = chart.y_range();
    let bar_w = 0.7 / series.len().max(1) as f64;
    for (i, cat) in categories.iter().enumerate() {
        let gx = i as f64 + (1.0 - bar_w * series.len() as f64) / 2.0;
        for (j, s) in series.iter().enumerate() {
            let (x0, x1) = (gx + bar_w * j as f64, gx + bar_w * (j + 1) as f64);
            let at = ((x0 + x1) / 2.0, base);
            match s.values.get(i).copied().flatten() {
                Some(v) => {
                    let v_top = v.min(top);
                    if v_top > base {
                        let mut bar = Rectangle::new([(x0, base), (x1, v_top)], s.color.filled());
                        bar.set_margin(0, 0, 1, 1);
                        chart.plotting_area().draw(&bar)?;
                    }
                    let width =
                        chart.backend_coord(&(x1, base)).0 - chart.backend_coord(&(x0, base)).0;
                    value_label(&chart, (at.0, v_top.max(base)), width, &label(v))?;
                }
                None => {
                    let style = font(11, DARK)
                        .transform(FontTransform::Rotate270)
                        .pos(Pos::new(HPos::Left, VPos::Center));
                    chart
                        .plotting_area()
                        .draw(&(EmptyElement::at(at) + Text::new("n/a", (0, -4), style)))?;
                }
            }
        }
        let style = font(11, BLACK).pos(Pos::new(HPos::Center, VPos::Top));
        for (k, line) in cat.split('\n').enumerate() {
            let text = Text::new(line.to_owned(), (0, 6 + 14 * k as i32), style.clone());
            chart
                .plotting_area()
                .draw(&(EmptyElement::at((i as f64 + 0.5, base)) + text))?;
        }
    }
    Ok(())
}

/// A bar's value at its top `at`: above the bar, or inside it (in white) where the
/// chart has no room above; turned on its side where it is wider than the bar.
fn value_label<X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &ChartContext<'_, BitMapBackend<'_>, Cartesian2d<X, Y>>,
    at: (f64, f64),
    bar_width: i32,
    text: &str,
) -> PlotResult {
    let style = font(11, BLACK);
    let (w, h) = chart.plotting_area().estimate_text_size(text, &style)?;
    let (w, h) = (w as i32, h as i32);
    let room = chart.backend_coord(&at).1 - chart.plotting_area().get_pixel_range().1.start;
    let sideways = w > bar_width + 4;
    let above = room > if sideways { w } else { h } + 4;
    let (style, offset) = match (sideways, above) {
        (false, true) => (style.pos(Pos::new(HPos::Center, VPos::Bottom)), -3),
        (false, false) => (
            style.color(&WHITE).pos(Pos::new(HPos::Center, VPos::Top)),
            3,
        ),
        (true, true) => (
            style
                .transform(FontTransform::Rotate270)
                .pos(Pos::new(HPos::Left, VPos::Center)),
            -3,
        ),
        (true, false) => (
            style
                .color(&WHITE)
                .transform(FontTransform::Rotate270)
                .pos(Pos::new(HPos::Right, VPos::Center)),
            3,
        ),
    };
    let text = Text::new(text.to_owned(), (0, offset), style);
    chart.plotting_area().draw(&(EmptyElement::at(at) + text))?;
    Ok(())
}

/// A line panel with a log x axis at `xs`.
pub fn line_panel(
    area: &Area,
    title: &str,
    ylabel: &str,
    xlabel: &str,
    xs: &[f64],
    series: &[Series],
) -> PlotResult {
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .copied()
        .fold(0.0, f64::max);
    let scale = Scale::linear(max);
    // Decades around the x values, with a margin so that the end points show whole.
    let (lo, hi) = if xs.is_empty() {
        (0.0, 1.0)
    } else {
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
        (lo, hi)
    };
    let pad = 0.05 * (hi - lo);
    let decades: Vec<f64> = (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect();
    let x_ticks = decades.len();
    let x = (10f64.powf(lo - pad)..10f64.powf(hi + pad))
        .log_scale()
        .with_key_points(decades);
    let y = scale.bottom()..scale.top();
    let ticks = (x_ticks, scale.ticks().len());
    let mut chart = chart(
        area,
        title,
        ylabel,
        xlabel,
        x,
        RangedCoordf64::from(y),
        ticks,
    )?;
    if xs.is_empty() {
        return not_measured(&chart);
    }
    for (j, s) in series.iter().enumerate() {
        let points: Vec<(f64, f64)> = xs
            .iter()
            .zip(&s.values)
            .filter_map(|(x, v)| v.map(|v| (*x, v)))
            .collect();
        chart.draw_series(LineSeries::new(points.clone(), s.color.stroke_width(3)))?;
        // peermem's labels below its points, the reference's above.
        let (offset, v_pos) = if j == 0 {
            (9, VPos::Top)
        } else {
            (-9, VPos::Bottom)
        };
        let style = font(11, BLACK).pos(Pos::new(HPos::Center, v_pos));
        chart.draw_series(points.iter().map(|&(x, v)| {
            EmptyElement::at((x, v))
                + Rectangle::new([(-4, -4), (4, 4)], s.color.filled())
                + Text::new(compact(v), (0, offset), style.clone())
        }))?;
    }
    Ok(())
}

/// A legend box at the image's top right.
pub fn legend(root: &Area, series: &[(String, RGBColor)]) -> PlotResult {
    let style = font(12, BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let mut text_w = 0;
    for (name, _) in series {
        text_w = text_w.max(root.estimate_text_size(name, &style)?.0 as i32);
    }
    let (w, h) = (text_w + 32, 16 * series.len() as i32 + 8);
    let (x0, y0) = (WIDTH as i32 - w - 12, 8);
    root.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        WHITE.filled(),
    ))?;
    root.draw(&Rectangle::new([(x0, y0), (x0 + w, y0 + h)], DARK))?;
    for (i, (name, color)) in series.iter().enumerate() {
        let y = y0 + 5 + 16 * i as i32;
        root.draw(&Rectangle::new(
            [(x0 + 6, y), (x0 + 17, y + 8)],
            color.filled(),
        ))?;
        root.draw(&Text::new(name.as_str(), (x0 + 24, y + 4), style.clone()))?;
    }
    Ok(())
}

/// A white image with the plot's title and subtitle; returns the area below them.
fn start<'b>(root: &Area<'b>, title: &str, subtitle: &str) -> PlotResult<Area<'b>> {
    root.fill(&WHITE)?;
    root.draw(&Text::new(title, (14, 8), font(22, BLACK)))?;
    root.draw(&Text::new(subtitle, (14, 36), font(12, DARK)))?;
    Ok(root.margin(60, 10, 10, 10))
}

fn both() -> Vec<(String, RGBColor)> {
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
pub fn latency(results: &Results, root: &Area) -> PlotResult {
    let title = (
        "Registration latency",
        "mean register time in us (log scale); p/r = peermem / reference",
    );
    by_size_and_cost(
        results,
        root,
        title,
        "reg_mean_ns",
        "register mean (us)",
        false,
    )
}

/// `pairs.png`: the mean of a register+deregister pair by size, one panel per pin
/// cost, with the floor (what a client that pins once cannot go below).
pub fn pairs(results: &Results, root: &Area) -> PlotResult {
    let title = (
        "Register + deregister, and the floor",
        "mean pair time in us (log scale); p/r = peermem / reference, f/r = floor / reference",
    );
    by_size_and_cost(results, root, title, "op_mean_ns", "pair mean (us)", true)
}

/// A latency `metric` by size, one panel per pin cost, peermem beside the reference
/// (and the floor, with `floor`).
fn by_size_and_cost(
    results: &Results,
    root: &Area,
    (title, subtitle): (&str, &str),
    metric: &str,
    axis: &str,
    floor: bool,
) -> PlotResult {
    let body = start(root, title, subtitle)?;
    let keys: Vec<_> = results.keys_of("latency", metric).collect();
    let costs = distinct(keys.iter().map(|k| k.cost_us).collect());
    let sizes = distinct(keys.iter().map(|k| k.size).collect());
    let costs = if costs.is_empty() { vec![0] } else { costs };
    let get = |size, cost| pair(results, "latency", metric, size, Some(cost));
    let floor_at = |size, cost| {
        keys.iter()
            .filter(|k| floor && k.size == size && k.cost_us == cost)
            .find_map(|k| results.get(Strategy::Floor, k))
    };
    let all: Vec<f64> = costs
        .iter()
        .flat_map(|cost| sizes.iter().map(move |s| (*s, *cost)))
        .flat_map(|(s, cost)| {
            let (p, r) = get(s, cost);
            [p, r, floor_at(s, cost)]
        })
        .flatten()
        .map(|v| v / 1000.0)
        .collect();
    let scale = Scale::log(all);
    let panels = body.split_evenly((1, costs.len()));
    let us = |v: Option<f64>| v.map(|v| v / 1000.0);
    let mut names = both();
    if floor {
        names.push(("floor (one pin, nothing else)".into(), FLOOR));
    }
    for (cost, area) in costs.iter().zip(&panels) {
        let (mut pv, mut rv, mut fv, mut cats) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for size in &sizes {
            let (p, r) = get(*size, *cost);
            let f = floor_at(*size, *cost);
            pv.push(us(p));
            rv.push(us(r));
            fv.push(us(f));
            let mut cat = format!("{}\n{}", human_size(*size), ratio_line(p, r));
            if floor {
                cat = format!("{cat}\n{}", ratio_line(f, r).replace("p/r", "f/r"));
            }
            cats.push(cat);
        }
        let mut bars = series(pv, rv);
        if floor {
            bars.push(Series {
                name: "floor".into(),
                color: FLOOR,
                values: fv,
            });
        }
        bar_panel(
            area,
            &format!("pin cost {cost} us"),
            axis,
            &cats,
            &bars,
            scale,
            &compact,
        )?;
    }
    legend(root, &names)
}

/// `pins.png`: pins per registration (latency configurations) and per covered
/// re-registration (reuse).
pub fn pins(results: &Results, root: &Area) -> PlotResult {
    let body = start(
        root,
        "Pins per registration",
        "latency runs (size / pin cost) and a covered re-registration (reuse)",
    )?;
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
    bar_panel(
        &body,
        "",
        "pins per registration",
        &cats,
        &series(pv, rv),
        Scale::linear(max),
        &|v| format!("{v:.2}"),
    )?;
    legend(root, &both())
}

/// `scaling.png`: cost of one register+deregister against live registrations.
pub fn scaling(results: &Results, root: &Area) -> PlotResult {
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
    let body = start(
        root,
        "Scaling with live registrations",
        &format!("mean ns per register+deregister of 64 KiB{growth}"),
    )?;
    let xs: Vec<f64> = lives.iter().map(|l| *l as f64).collect();
    line_panel(
        &body,
        "",
        "register+deregister (ns)",
        "live registrations (log scale)",
        &xs,
        &series(pv, rv),
    )?;
    legend(root, &both())
}

/// Looks up (peermem, reference) at a size.
type PairAt<'a> = dyn Fn(u64) -> (Option<f64>, Option<f64>) + 'a;

/// `sg_memory.png`: SG entries and module bytes per registration at 64 KiB and 64 MiB.
pub fn sg_memory(results: &Results, root: &Area) -> PlotResult {
    let body = start(
        root,
        "SG entries and module memory",
        "per registration, 64 KiB and 64 MiB (log scale)",
    )?;
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
    let panels: [(&str, &str, &PairAt); 2] = [
        ("SG entries", "SG entries per registration", &sg),
        ("module bytes per live registration", "bytes", &mem),
    ];
    for ((title, ylabel, get), area) in panels.iter().zip(&body.split_evenly((1, 2))) {
        let (mut pv, mut rv, mut cats) = (Vec::new(), Vec::new(), Vec::new());
        for size in sizes {
            let (p, r) = get(size);
            pv.push(p);
            rv.push(r);
            cats.push(format!("{}\n{}", human_size(size), ratio_line(p, r)));
        }
        let scale = Scale::log(pv.iter().chain(&rv).flatten().copied());
        bar_panel(area, title, ylabel, &cats, &series(pv, rv), scale, &compact)?;
    }
    legend(root, &both())
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
    fn plotters_ticks_a_linear_axis_where_scale_does() {
        for max in [
            0.0, 0.3, 1.0, 2.0, 7.0, 10.0, 13.0, 99.0, 2.9, 1234.5, 11800.0, 86800.0,
        ] {
            let scale = Scale::linear(max);
            let ticks = scale.ticks();
            let axis = RangedCoordf64::from(scale.bottom()..scale.top());
            let drawn = axis.key_points(ticks.len());
            assert_eq!(drawn.len(), ticks.len(), "{max}: {drawn:?} {ticks:?}");
            for (d, t) in drawn.iter().zip(&ticks) {
                assert!(
                    (d - t).abs() < 1e-9 * scale.top(),
                    "{max}: {drawn:?} {ticks:?}"
                );
            }
        }
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
        let pixels = render(pins, &results).unwrap();
        assert_eq!(pixels.len(), (WIDTH * HEIGHT * 3) as usize);
        let count = |c: RGBColor| {
            let rgb = [c.0, c.1, c.2];
            pixels.chunks(3).filter(|p| *p == rgb).count()
        };
        // The reference's bar is twice as tall as peermem's, and as wide.
        let (p, r) = (count(PEERMEM), count(REFERENCE));
        // Each colour also fills one legend swatch of 12 x 9 pixels.
        let (p, r) = ((p - 108) as f64, (r - 108) as f64);
        assert!(p > 1000.0, "{p}");
        assert!((r / p - 2.0).abs() < 0.02, "{p} {r}");
    }
}
