// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The five plots: `latency.png`, `pairs.png`, `pins.png`, `scaling.png`,
//! `sg_memory.png`, each one or two panels of grouped bars drawn by [`bars`] with
//! plotters on a bitmap, their text in a TrueType font ([`FONT`]).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::parse::{human_size, Key, Results, Strategy};
use crate::report::{SIZE_64K, SIZE_64M};

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
const GRID: RGBColor = RGBColor(225, 225, 225);
const DARK: RGBColor = RGBColor(60, 60, 60);

/// The font of every text: DejaVu Sans from Debian's fonts-dejavu-core (installed by
/// scripts/setup); `BENCH_REPORT_FONT` names another TrueType or OpenType file.
pub const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const FAMILY: &str = "sans-serif";

/// The whole image of a plot.
pub type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
/// What drawing returns.
pub type PlotResult<T = ()> = Result<T, Box<dyn Error>>;
/// A plot: draws `results` on an image of [`WIDTH`] x [`HEIGHT`].
pub type Plot = fn(&Results, &Area) -> PlotResult;

/// A compact number: `0`, `4.2`, `516`, `1024`, `33.3k`, `1.5M`.
pub fn compact(v: f64) -> String {
    let (n, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e4 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let digits = match n.abs() {
        a if a >= 100.0 => 0,
        a if a >= 10.0 => 1,
        _ => 2,
    };
    let text = format!("{n:.digits$}");
    let text = match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.'),
        false => &text,
    };
    format!("{text}{suffix}")
}

/// Loads the font and registers it with plotters, once per process.
pub fn load_font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    let load = || {
        let path = std::env::var_os("BENCH_REPORT_FONT").map_or_else(|| FONT.into(), PathBuf::from);
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
    let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, HEIGHT)).into_drawing_area();
    plot(results, &root)?;
    root.present()?;
    drop(root);
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

fn font(size: u32, color: RGBColor) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&color)
}

fn color(s: Strategy) -> (RGBColor, &'static str) {
    match s {
        Strategy::Peermem => (PEERMEM, "peermem"),
        Strategy::Reference => (REFERENCE, "reference (nvidia-peermem)"),
        Strategy::Floor => (FLOOR, "floor (one pin, nothing else)"),
    }
}

/// One panel of grouped bars: a group per category (its label may hold `\n`), a bar
/// per strategy (`None`: not measured).
pub struct Panel {
    /// The panel's title, or empty.
    pub title: String,
    /// The categories' labels.
    pub cats: Vec<String>,
    /// Each strategy's value per category.
    pub bars: Vec<(Strategy, Vec<Option<f64>>)>,
}

/// Draws `panels` side by side under the plot's title and a legend, on one y axis,
/// logarithmic with `log`, from 0 otherwise.
pub fn bars(root: &Area, title: [&str; 3], panels: &[Panel], log: bool) -> PlotResult {
    let [title, subtitle, ylabel] = title;
    root.fill(&WHITE)?;
    root.draw(&Text::new(title, (14, 8), font(22, BLACK)))?;
    root.draw(&Text::new(subtitle, (14, 36), font(12, DARK)))?;
    let values = || {
        let all = panels
            .iter()
            .flat_map(|p| p.bars.iter().flat_map(|b| b.1.iter().flatten()));
        all.copied().filter(|v| *v > 0.0)
    };
    let max = values().fold(0.0, f64::max);
    let body = root.margin(60, 10, 10, 10);
    for (panel, area) in panels.iter().zip(body.split_evenly((1, panels.len()))) {
        if log {
            // Decades from half the least value, with room above the tallest bar for
            // its label (1 to 10 where nothing was measured).
            let min = values().fold(f64::INFINITY, f64::min);
            let (min, max) = if max > 0.0 { (min, max) } else { (2.0, 2.5) };
            let lo = (min / 2.0).log10().floor() as i32;
            let hi = ((max * 4.0).log10().ceil() as i32).max(lo + 1);
            let decades: Vec<f64> = (lo..=hi).map(|e| 10f64.powi(e)).collect();
            let y = (decades[0]..decades[decades.len() - 1]).log_scale();
            panel_on(&area, panel, ylabel, y.with_key_points(decades))?;
        } else {
            let top = if max > 0.0 { max * 1.3 } else { 1.0 };
            panel_on(&area, panel, ylabel, RangedCoordf64::from(0.0..top))?;
        }
    }
    // The legend at the image's top right.
    let style = font(12, BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let names: Vec<_> = panels[0].bars.iter().map(|b| color(b.0)).collect();
    let mut w = 0;
    for (_, name) in &names {
        w = w.max(root.estimate_text_size(name, &style)?.0 as i32 + 32);
    }
    let (x0, y0, h) = (WIDTH as i32 - w - 12, 8, 16 * names.len() as i32 + 8);
    let frame = [(x0, y0), (x0 + w, y0 + h)];
    root.draw(&Rectangle::new(frame, WHITE.filled()))?;
    root.draw(&Rectangle::new(frame, DARK))?;
    for (i, (c, name)) in names.iter().enumerate() {
        let y = y0 + 5 + 16 * i as i32;
        root.draw(&Rectangle::new([(x0 + 6, y), (x0 + 17, y + 8)], c.filled()))?;
        root.draw(&Text::new(*name, (x0 + 24, y + 4), style.clone()))?;
    }
    Ok(())
}

/// One [`Panel`] in `area`, on the y axis `y`.
fn panel_on<Y>(area: &Area, panel: &Panel, ylabel: &str, y: Y) -> PlotResult
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_right(8)
        .x_label_area_size(44)
        .y_label_area_size(62);
    match panel.title.is_empty() {
        true => builder.margin_top(24),
        false => builder.margin_top(4).caption(&panel.title, font(13, BLACK)),
    };
    let x = RangedCoordf64::from(0.0..panel.cats.len().max(1) as f64);
    let mut chart = builder.build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .max_light_lines(0)
        .bold_line_style(GRID)
        .axis_style(DARK)
        .label_style(font(11, DARK))
        .axis_desc_style(font(12, DARK))
        .y_label_formatter(&|v| compact(*v))
        .y_desc(ylabel)
        .draw()?;
    let plot = chart.plotting_area();
    let (base, top) = (chart.y_range().start, chart.y_range().end);
    if panel.cats.is_empty() {
        let centre = Pos::new(HPos::Center, VPos::Center);
        plot.draw(&Text::new(
            "not measured",
            (0.5, (base + top) / 2.0),
            font(12, DARK).pos(centre),
        ))?;
        return Ok(());
    }
    let w = 0.7 / panel.bars.len() as f64;
    let up = |c: RGBColor| font(11, c).transform(FontTransform::Rotate270);
    for (i, cat) in panel.cats.iter().enumerate() {
        for (j, (s, values)) in panel.bars.iter().enumerate() {
            let x0 = i as f64 + 0.15 + w * j as f64;
            let mid = x0 + w / 2.0;
            let (v, text) = match values.get(i).copied().flatten() {
                Some(v) => (v.clamp(base, top), compact(v)),
                None => (base, "n/a".into()),
            };
            if v > base {
                let mut bar = Rectangle::new([(x0, base), (x0 + w, v)], color(*s).0.filled());
                bar.set_margin(0, 0, 1, 1);
                plot.draw(&bar)?;
            }
            // The value above its bar, turned on its side.
            let style = up(BLACK).pos(Pos::new(HPos::Left, VPos::Center));
            plot.draw(&(EmptyElement::at((mid, v)) + Text::new(text, (0, -4), style)))?;
        }
        let style = font(11, BLACK).pos(Pos::new(HPos::Center, VPos::Top));
        for (k, line) in cat.split('\n').enumerate() {
            let text = Text::new(line.to_owned(), (0, 6 + 14 * k as i32), style.clone());
            plot.draw(&(EmptyElement::at((i as f64 + 0.5, base)) + text))?;
        }
    }
    Ok(())
}

/// `p/r 0.53`: `of` ÷ `to`, where both exist.
fn ratio_line(tag: &str, of: Option<f64>, to: Option<f64>) -> String {
    match (of, to.filter(|r| *r != 0.0)) {
        (Some(p), Some(r)) if p / r < 0.1 => format!("{tag} {:.3}", p / r),
        (Some(p), Some(r)) => format!("{tag} {:.2}", p / r),
        _ => String::new(),
    }
}

/// A `latency` metric by size, one panel per pin cost, in µs on a log axis, with the
/// floor where `floor`.
fn by_size(results: &Results, metric: &str, floor: bool) -> Vec<Panel> {
    let keys: Vec<_> = results.keys_of("latency", metric).collect();
    let mut costs: Vec<u64> = keys.iter().map(|k| k.cost_us).collect();
    let mut sizes: Vec<u64> = keys.iter().map(|k| k.size).collect();
    for v in [&mut costs, &mut sizes] {
        v.sort_unstable();
        v.dedup();
    }
    let mut strategies = vec![Strategy::Peermem, Strategy::Reference];
    if floor {
        strategies.push(Strategy::Floor);
    }
    let find = |s, size, cost| results.find(s, "latency", metric, size, cost);
    let us = |s, size, cost| find(s, size, cost).map(|f| f.1 / 1000.0);
    let cost_list = if costs.is_empty() { vec![0] } else { costs };
    cost_list
        .into_iter()
        .map(|cost| {
            let cats = sizes.iter().map(|&size| {
                let [p, r, f] = Strategy::ALL.map(|s| us(s, size, cost));
                let mut cat = format!("{}\n{}", human_size(size), ratio_line("p/r", p, r));
                if floor {
                    cat = format!("{cat}\n{}", ratio_line("f/r", f, r));
                }
                cat
            });
            let bars = strategies
                .iter()
                .map(|&s| (s, sizes.iter().map(|&size| us(s, size, cost)).collect()));
            Panel {
                title: format!("pin cost {cost} us"),
                cats: cats.collect(),
                bars: bars.collect(),
            }
        })
        .collect()
}

/// `latency.png`: registration mean latency by size, one panel per pin cost.
pub fn latency(results: &Results, root: &Area) -> PlotResult {
    let title = [
        "Registration latency",
        "mean register time in us (log scale); p/r = peermem / reference",
        "register mean (us)",
    ];
    bars(root, title, &by_size(results, "reg_mean_ns", false), true)
}

/// `pairs.png`: the mean of a register+deregister pair by size, one panel per pin
/// cost, with the floor (what a client that pins once cannot go below).
pub fn pairs(results: &Results, root: &Area) -> PlotResult {
    let title = [
        "Register + deregister, and the floor",
        "mean pair time in us (log scale); p/r = peermem / reference, f/r = floor / reference",
        "pair mean (us)",
    ];
    bars(root, title, &by_size(results, "op_mean_ns", true), true)
}

/// The figures of `keys` for peermem and the reference, in one panel.
fn both(results: &Results, cats: Vec<String>, keys: &[&Key]) -> Panel {
    let of = |s| (s, keys.iter().map(|k| results.get(s, k)).collect());
    Panel {
        title: String::new(),
        cats,
        bars: vec![of(Strategy::Peermem), of(Strategy::Reference)],
    }
}

/// `pins.png`: pins per registration (latency configurations) and per covered
/// re-registration (reuse).
pub fn pins(results: &Results, root: &Area) -> PlotResult {
    let keys: Vec<_> = results
        .keys_of("latency", "pins_per_reg")
        .chain(results.keys_of("reuse", "pins_per_reg"))
        .collect();
    let cats = keys.iter().map(|k| match k.group.as_str() {
        "reuse" => "re-register\n(covered)".to_string(),
        _ => format!("{}\n{} us", human_size(k.size), k.cost_us),
    });
    let title = [
        "Pins per registration",
        "latency runs (size / pin cost) and a covered re-registration (reuse)",
        "pins per registration",
    ];
    bars(root, title, &[both(results, cats.collect(), &keys)], false)
}

/// `scaling.png`: cost of one register+deregister against live registrations.
pub fn scaling(results: &Results, root: &Area) -> PlotResult {
    let mut keys: Vec<_> = results.keys_of("scaling", "op_ns").collect();
    keys.sort_by_key(|k| k.live);
    let cats = keys.iter().map(|k| compact(k.live as f64)).collect();
    let title = [
        "Scaling with live registrations",
        "mean ns per register+deregister of 64 KiB, by live registrations (medians)",
        "register+deregister (ns)",
    ];
    bars(root, title, &[both(results, cats, &keys)], false)
}

/// `sg_memory.png`: SG entries and module bytes per registration at 64 KiB and 64 MiB.
pub fn sg_memory(results: &Results, root: &Area) -> PlotResult {
    let panel = |title: &str, group, metric| {
        let keys: Vec<_> = [SIZE_64K, SIZE_64M]
            .into_iter()
            .filter_map(|size| {
                let find = |s| results.find(s, group, metric, size, 0);
                Some(
                    find(Strategy::Reference)
                        .or_else(|| find(Strategy::Peermem))?
                        .0,
                )
            })
            .collect();
        let cats = keys.iter().map(|k| {
            let (p, r) = (
                results.get(Strategy::Peermem, k),
                results.get(Strategy::Reference, k),
            );
            format!("{}\n{}", human_size(k.size), ratio_line("p/r", p, r))
        });
        Panel {
            title: title.into(),
            ..both(results, cats.collect(), &keys)
        }
    };
    let panels = [
        panel("SG entries per registration", "latency", "sg_entries"),
        panel(
            "module bytes per live registration",
            "memory",
            "bytes_per_reg_module",
        ),
    ];
    let title = [
        "SG entries and module memory",
        "per registration, 64 KiB and 64 MiB (log scale)",
        "per registration",
    ];
    bars(root, title, &panels, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_log;

    #[test]
    fn compact_numbers() {
        let v = [
            0.0, 0.1, 4.2, 1.0, 516.0, 1024.0, 33280.0, 1e5, 1.5e6, 2097152.0,
        ];
        let want = [
            "0", "0.1", "4.2", "1", "516", "1024", "33.3k", "100k", "1.5M", "2.1M",
        ];
        assert_eq!(v.map(compact), want);
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
        let count = |c: RGBColor| pixels.chunks(3).filter(|p| *p == [c.0, c.1, c.2]).count();
        // Each colour fills one legend swatch of 12 x 9 pixels; the reference's bar is
        // twice as tall as peermem's, and as wide.
        let (p, r) = (
            (count(PEERMEM) - 108) as f64,
            (count(REFERENCE) - 108) as f64,
        );
        assert!(p > 1000.0, "{p}");
        assert!((r / p - 2.0).abs() < 0.02, "{p} {r}");
    }
}
