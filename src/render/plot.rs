//! Renders `conference_progress.png`, the progress chart of a research conference.
//!
//! The final report needs a picture of how the metric evolved: one line per
//! researcher over the conference's global iteration index, the best branch's
//! validated metric (a black step line: the baseline, then best after each round's
//! peer review and knowledge transfer), the target as a horizontal line and light
//! vertical lines at round boundaries, each round labelled, under a title. Researchers'
//! readings are claims nobody has re-measured yet, so they are drawn as markers, never as the
//! best: filled where the attempt was kept, hollow where it was reverted (or rejected). One
//! wild reading must not squash the rest into a line, so the y-range holds the readings
//! within three interquartile ranges of the others (and every validated value): what falls
//! outside is left out and the chart says how many ([`off_the_chart`]). It exists as its own
//! module so the synthesis code only assembles a [`PlotData`] and gets PNG bytes back.
//!
//! plotters is built without system fonts (feature `ab_glyph`), so DejaVu Sans
//! is embedded from `assets/` and registered once; the RGB buffer is encoded by
//! the `png` crate (compressed: the chart is stored in the state tree every
//! round, so its size matters).

use std::sync::OnceLock;

use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

/// One researcher's attempts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlotSeries {
    /// Legend label, e.g. "Researcher A".
    pub label: String,
    /// (global 1-based iteration index of the conference, metric); `None` = crashed attempt.
    pub points: Vec<(f64, Option<f64>)>,
    /// The x positions of the points whose attempt was kept (drawn filled).
    pub kept: Vec<f64>,
}

/// Everything the progress chart shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlotData {
    /// The chart's title.
    pub title: String,
    /// Metric name, used as the y-axis label.
    pub metric: String,
    /// Whether lower is better (decides the direction of the best-so-far envelope).
    pub minimize: bool,
    /// Target value, drawn as a horizontal dashed line.
    pub target: Option<f64>,
    /// One series per researcher.
    pub series: Vec<PlotSeries>,
    /// Baseline metric; the envelope starts from it.
    pub baseline: Option<f64>,
    /// x positions of round boundaries (e.g. 4.5), drawn as light vertical lines.
    pub round_boundaries: Vec<f64>,
    /// (x, best) at the end of each round, after knowledge transfer: a combination of findings
    /// can beat every single attempt, and the envelope shows it.
    pub round_bests: Vec<(f64, f64)>,
}

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 800;
const FONT: &str = "sans-serif";

/// Okabe-Ito palette without black (black is the envelope); yellow last since
/// it is the least legible on white.
const SERIES_COLORS: [RGBColor; 7] = [
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0xF0, 0xE4, 0x42), // yellow
];
const ENVELOPE_COLOR: RGBColor = RGBColor(0, 0, 0);
const TARGET_COLOR: RGBColor = RGBColor(0x55, 0x55, 0x55);
const ROUND_COLOR: RGBColor = RGBColor(0xDD, 0xDD, 0xDD);

fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(
            FONT,
            FontStyle::Normal,
            include_bytes!("../../assets/DejaVuSans.ttf"),
        )
        .is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(anyhow!(
            "failed to load embedded font assets/DejaVuSans.ttf"
        ))
    }
}

fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("rendering progress plot: {e}")
}

/// Values beyond this size are left out of the chart, as non-finite ones are: a worst-score
/// sentinel like `f64::MAX` would make every range and tick computation overflow to infinity
/// (plotters then never finishes laying out the axis).
const MAX_PLOTTED: f64 = 1e300;

fn plottable(v: &f64) -> bool {
    v.is_finite() && v.abs() <= MAX_PLOTTED
}

/// The fences beyond which a reading is wild: three interquartile ranges outside the middle
/// half of `values` (the range at least a tenth of the median's size, so a metric that reads
/// the same every time still lets a real change in). None for fewer than 4 values.
fn fences(values: &[f64]) -> Option<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(plottable).collect();
    if v.len() < 4 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    let (q1, median, q3) = (at(0.25), at(0.5), at(0.75));
    let iqr = (q3 - q1).max(median.abs() * 0.1).max(1e-12);
    Some((q1 - 3.0 * iqr, q3 + 3.0 * iqr))
}

/// The values the y-range always holds: the baseline, each round's validated best, the target.
fn validated_values(data: &PlotData) -> Vec<f64> {
    data.round_bests
        .iter()
        .filter(|(x, _)| plottable(x))
        .map(|p| p.1)
        .chain(data.target)
        .chain(data.baseline)
        .filter(plottable)
        .collect()
}

/// The readings the chart leaves out as wild, (series label, x, metric) each: beyond the
/// fences of every reading and validated value, and beyond every validated value.
pub fn off_the_chart(data: &PlotData) -> Vec<(String, f64, f64)> {
    let validated = validated_values(data);
    let mut values: Vec<f64> = all_points(data).iter().map(|p| p.1).collect();
    values.extend(&validated);
    let Some((lo, hi)) = fences(&values) else {
        return vec![];
    };
    let lo = validated.iter().copied().fold(lo, f64::min);
    let hi = validated.iter().copied().fold(hi, f64::max);
    data.series
        .iter()
        .flat_map(|s| s.points.iter().map(move |p| (s, p)))
        .filter_map(|(s, &(x, y))| match y {
            Some(y) if plottable(&x) && plottable(&y) && !(lo..=hi).contains(&y) => {
                Some((s.label.clone(), x, y))
            }
            _ => None,
        })
        .collect()
}

/// All plottable (x, metric) points of all series, sorted by x (stable).
fn all_points(data: &PlotData) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = data
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter_map(|&(x, y)| match y {
            Some(y) if plottable(&x) && plottable(&y) => Some((x, y)),
            _ => None,
        })
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// The best branch's validated metric as a step line: the baseline from `x_start`, then each
/// round's best from the round's end, held until `x_end`. Researchers' readings never enter it.
fn best_line(data: &PlotData, x_start: f64, x_end: f64) -> Vec<(f64, f64)> {
    let mut bests: Vec<(f64, f64)> = data
        .round_bests
        .iter()
        .copied()
        .filter(|(x, y)| plottable(x) && plottable(y))
        .collect();
    bests.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut steps: Vec<(f64, f64)> = Vec::with_capacity(bests.len() * 2 + 2);
    if let Some(b) = data.baseline.filter(plottable) {
        steps.push((x_start.min(bests.first().map_or(x_start, |p| p.0)), b));
    }
    for (x, b) in bests {
        // Only corners: collinear extra vertices make thick lines wobble.
        match steps.last() {
            Some(&(_, prev)) if prev == b => continue,
            Some(&(_, prev)) => steps.push((x, prev)),
            None => {}
        }
        steps.push((x, b));
    }
    if let Some(&(x, b)) = steps.last() {
        if x_end > x {
            steps.push((x_end, b));
        }
    }
    steps
}

/// Pads a range so it is never empty and the data does not touch the frame.
fn padded(lo: f64, hi: f64, min_span: f64) -> (f64, f64) {
    let (lo, hi) = if hi - lo < 1e-12 {
        let half = (lo.abs() * 0.05).max(min_span / 2.0);
        (lo - half, hi + half)
    } else {
        (lo, hi)
    };
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

fn fmt_x(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{}", x.round() as i64)
    } else {
        format!("{x:.1}")
    }
}

fn fmt_y(y: &f64, span: f64) -> String {
    let decimals = if span <= 0.0 {
        2
    } else {
        (1.0 - span.log10().floor()).clamp(0.0, 8.0) as usize
    };
    format!("{y:.decimals$}")
}

/// Renders the progress chart and returns the PNG file's bytes.
pub fn render_png(data: &PlotData) -> Result<Vec<u8>> {
    ensure_font()?;
    let (w, h) = (WIDTH, HEIGHT);
    let mut buf = vec![0u8; (w * h * 3) as usize];
    draw(data, &mut buf, (w, h))?;
    encode_png_rgb(w, h, &buf)
}

/// The chart's coordinate system: f64 on both axes, drawn into an RGB buffer.
type Chart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws the whole chart into `buf`: frame and mesh, round boundaries, target, each
/// researcher's readings, the best line, "no data" when there is none, and the legend.
/// Returns the plotting area's pixel ranges (x, y), which everything but the axes stays in.
fn draw(data: &PlotData, buf: &mut [u8], size: (u32, u32)) -> Result<PixelArea> {
    draw_aggregating_above(data, buf, size, MAX_DRAWN_READINGS)
}

/// [`draw`], aggregating the readings when there are more than `max_drawn` (the benchmark
/// compares with drawing every one).
fn draw_aggregating_above(
    data: &PlotData,
    buf: &mut [u8],
    size: (u32, u32),
    max_drawn: usize,
) -> Result<PixelArea> {
    let wild = off_the_chart(data);
    let is_wild = |s: &PlotSeries, x: f64| wild.iter().any(|w| w.0 == s.label && w.1 == x);
    let points: Vec<(f64, f64)> = data
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(move |p| (s, p)))
        .filter_map(|(s, &(x, y))| y.map(|y| (s, x, y)))
        .filter(|&(s, x, y)| plottable(&x) && plottable(&y) && !is_wild(s, x))
        .map(|(_, x, y)| (x, y))
        .collect();
    let (x_lo, x_hi) = x_range(data);
    let (y_lo, y_hi) = y_range(data, &points);
    let y_span = y_hi - y_lo;

    let root = BitMapBackend::with_buffer(buf, size).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let root = root.margin(20, 20, 20, 30);
    let mut chart = ChartBuilder::on(&root)
        .caption(&data.title, (FONT, 26))
        .x_label_area_size(60)
        .y_label_area_size(100)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(plot_err)?;
    draw_mesh(&mut chart, data, (x_lo, x_hi), y_span)?;
    // Round boundaries first, so everything else is drawn over them.
    draw_round_boundaries(&mut chart, data, (x_lo, x_hi), (y_lo, y_hi))?;
    if let Some(t) = data.target.filter(plottable) {
        draw_target(&mut chart, t, (x_lo, x_hi), y_span)?;
    }
    let aggregated = points.len() > max_drawn;
    for (i, s) in data.series.iter().enumerate() {
        if aggregated {
            draw_readings_aggregated(&mut chart, i, s, (x_lo, x_hi), &|x| is_wild(s, x))?;
        } else {
            draw_readings(&mut chart, i, s, &|x| is_wild(s, x))?;
        }
    }
    let has_best_line = draw_best_line(&mut chart, data, x_lo)?;
    if points.is_empty() {
        draw_no_data(&root, &chart)?;
    }
    if !wild.is_empty() {
        draw_left_out(&root, &chart, wild.len())?;
    }
    let has_legend = !data.series.is_empty() || has_best_line || data.target.is_some();
    if has_legend {
        draw_legend(&mut chart, data.minimize)?;
    }
    let area = chart.plotting_area().get_pixel_range();
    drop(chart);
    root.present().map_err(plot_err)?;
    Ok(area)
}

/// The pixel ranges (x, y) of the plotting area.
type PixelArea = (std::ops::Range<i32>, std::ops::Range<i32>);

/// The padded x range: every attempt (crashed ones too) and round boundaries.
fn x_range(data: &PlotData) -> (f64, f64) {
    let xs = data
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(data.round_boundaries.iter().copied())
        .filter(plottable);
    let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    let (x_lo, x_hi) = if x_lo.is_finite() {
        (x_lo.min(1.0), x_hi.max(1.0))
    } else {
        (1.0, 1.0)
    };
    padded(x_lo, x_hi, 2.0)
}

/// The padded y range: the readings `points`, the round bests, the target and the baseline.
fn y_range(data: &PlotData, points: &[(f64, f64)]) -> (f64, f64) {
    let mut best_points = points.to_vec();
    best_points.extend(
        data.round_bests
            .iter()
            .filter(|(x, y)| plottable(x) && plottable(y)),
    );
    let ys = best_points
        .iter()
        .map(|p| p.1)
        .chain(data.target)
        .chain(data.baseline)
        .filter(plottable);
    let (y_lo, y_hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    });
    if y_lo.is_finite() {
        padded(y_lo, y_hi, 1e-3)
    } else {
        (0.0, 1.0)
    }
}

/// Axes, grid lines, tick labels and axis descriptions.
fn draw_mesh(
    chart: &mut Chart,
    data: &PlotData,
    (x_lo, x_hi): (f64, f64),
    y_span: f64,
) -> Result<()> {
    let x_ticks = ((x_hi - x_lo).round() as usize + 1).clamp(2, 12);
    let y_label = if data.metric.trim().is_empty() {
        "metric"
    } else {
        data.metric.as_str()
    };
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xEE, 0xEE, 0xEE))
        .axis_style(BLACK)
        .x_labels(x_ticks)
        .y_labels(8)
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&|y| fmt_y(y, y_span))
        .x_desc("iteration")
        .y_desc(y_label)
        .label_style((FONT, 18))
        .axis_desc_style((FONT, 22))
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

/// At most this many round boundaries are drawn and labelled (every k-th beyond).
const MAX_ROUNDS_MARKED: usize = 24;

/// A light vertical line at each round boundary, across the y range, and each round's name at
/// the top where it begins.
fn draw_round_boundaries(
    chart: &mut Chart,
    data: &PlotData,
    (x_lo, x_hi): (f64, f64),
    (y_lo, y_hi): (f64, f64),
) -> Result<()> {
    let boundaries: Vec<f64> = data
        .round_boundaries
        .iter()
        .copied()
        .filter(plottable)
        .collect();
    // Every k-th round when there are many, so lines and labels stay apart.
    let every = boundaries.len().div_ceil(MAX_ROUNDS_MARKED).max(1);
    for &bx in boundaries.iter().skip(every - 1).step_by(every) {
        chart
            .draw_series(LineSeries::new(
                [(bx, y_lo), (bx, y_hi)],
                ROUND_COLOR.stroke_width(2),
            ))
            .map_err(plot_err)?;
    }
    if data.series.iter().all(|s| s.points.is_empty()) {
        return Ok(());
    }
    let nudge = (x_hi - x_lo) * 0.005;
    let font = (FONT, 16).into_font().color(&RGBColor(0x66, 0x66, 0x66));
    let right_edge = chart.plotting_area().get_pixel_range().0.end;
    let starts = std::iter::once(x_lo).chain(boundaries);
    let mut labels = Vec::new();
    for (i, x) in starts.enumerate().step_by(every) {
        let text = format!("round {}", i + 1);
        let (width, _) = chart
            .plotting_area()
            .estimate_text_size(&text, &font)
            .map_err(plot_err)?;
        // A label that would run past the plotting area is left out.
        if chart.backend_coord(&(x + nudge, y_hi)).0 + width as i32 <= right_edge {
            labels.push(Text::new(text, (x + nudge, y_hi), font.clone()));
        }
    }
    chart.draw_series(labels).map_err(plot_err)?;
    Ok(())
}

/// "N readings off the chart", grey, at the foot of the plotting area.
fn draw_left_out(root: &DrawingArea<BitMapBackend, Shift>, chart: &Chart, n: usize) -> Result<()> {
    let (px, py) = chart.plotting_area().get_pixel_range();
    let style = TextStyle::from((FONT, 18).into_font()).color(&RGBColor(0x55, 0x55, 0x55));
    let text = format!(
        "{n} reading{} off the chart (wild, far from the rest)",
        if n == 1 { "" } else { "s" }
    );
    root.draw_text(&text, &style, (px.start + 10, py.end - 30))
        .map_err(plot_err)?;
    Ok(())
}

/// The target `t` as a dashed horizontal line across the x range, with its legend entry.
fn draw_target<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    t: f64,
    (x_lo, x_hi): (f64, f64),
    y_span: f64,
) -> Result<()> {
    chart
        .draw_series(DashedLineSeries::new(
            [(x_lo, t), (x_hi, t)],
            10,
            6,
            TARGET_COLOR.stroke_width(2),
        ))
        .map_err(plot_err)?
        .label(format!("target ({})", fmt_y(&t, y_span)))
        .legend(|(x, y)| {
            EmptyElement::at((x, y))
                + PathElement::new([(0, 0), (8, 0)], TARGET_COLOR.stroke_width(2))
                + PathElement::new([(13, 0), (20, 0)], TARGET_COLOR.stroke_width(2))
        });
    Ok(())
}

/// Above this many readings each researcher's readings are drawn aggregated
/// ([`draw_readings_aggregated`]): a marker per reading and a line through them all turn a
/// chart of thousands into a solid smear, and cost time at every round end.
const MAX_DRAWN_READINGS: usize = 600;
/// The columns the x range is cut into when readings are aggregated (about 5 pixels each).
const BINS: usize = 200;
/// At most this many kept readings are marked per researcher when readings are aggregated
/// (evenly spaced among them, the last one always).
const MAX_KEPT_MARKERS: usize = 100;

/// One column of aggregated readings: (x from, x to, lowest, median, highest).
type Bin = (f64, f64, f64, f64, f64);

/// `readings` (x, metric) cut into [`BINS`] columns over `(x_lo, x_hi)`: the lowest, median and
/// highest reading in each column that has one, left to right.
fn bins(readings: &[(f64, f64)], (x_lo, x_hi): (f64, f64)) -> Vec<Bin> {
    let width = (x_hi - x_lo) / BINS as f64;
    let mut columns: Vec<Vec<f64>> = vec![Vec::new(); BINS];
    for &(x, y) in readings {
        let i = (((x - x_lo) / width).floor().max(0.0) as usize).min(BINS - 1);
        columns[i].push(y);
    }
    columns
        .into_iter()
        .enumerate()
        .filter(|(_, ys)| !ys.is_empty())
        .map(|(i, mut ys)| {
            ys.sort_by(f64::total_cmp);
            let from = x_lo + width * i as f64;
            (
                from,
                from + width,
                ys[0],
                ys[ys.len() / 2],
                ys[ys.len() - 1],
            )
        })
        .collect()
}

/// At most `max` of `xs`, evenly spaced among them, the last one always.
fn thinned(xs: &[f64], max: usize) -> Vec<f64> {
    if xs.len() <= max {
        return xs.to_vec();
    }
    let step = xs.len() as f64 / max as f64;
    let mut picked: Vec<f64> = (0..max).map(|k| xs[(k as f64 * step) as usize]).collect();
    *picked.last_mut().unwrap() = xs[xs.len() - 1];
    picked
}

/// Researcher `i`'s readings when there are too many to draw one by one: per column of the x
/// range a light band from the lowest to the highest reading, a line through the medians, and
/// a bounded sample of the kept readings as filled markers.
fn draw_readings_aggregated<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    i: usize,
    s: &PlotSeries,
    x_range: (f64, f64),
    wild: &dyn Fn(f64) -> bool,
) -> Result<()> {
    let color = SERIES_COLORS[i % SERIES_COLORS.len()];
    let readings: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter_map(|&(x, y)| y.map(|y| (x, y)))
        .filter(|&(x, y)| plottable(&x) && plottable(&y) && !wild(x))
        .collect();
    let columns = bins(&readings, x_range);
    chart
        .draw_series(columns.iter().map(|&(from, to, lo, _, hi)| {
            Rectangle::new([(from, lo), (to, hi)], color.mix(0.25).filled())
        }))
        .map_err(plot_err)?;
    chart
        .draw_series(LineSeries::new(
            columns
                .iter()
                .map(|&(from, to, _, median, _)| ((from + to) / 2.0, median)),
            color.stroke_width(2),
        ))
        .map_err(plot_err)?;
    let kept: Vec<f64> = readings
        .iter()
        .map(|p| p.0)
        .filter(|x| s.kept.contains(x))
        .collect();
    let marked = thinned(&kept, MAX_KEPT_MARKERS);
    let at = |x: f64| readings.iter().find(|p| p.0 == x).copied();
    let label = if s.label.trim().is_empty() {
        format!("series {}", i + 1)
    } else {
        s.label.clone()
    };
    chart
        .draw_series(
            marked
                .into_iter()
                .filter_map(at)
                .map(|p| Circle::new(p, 5, color.filled())),
        )
        .map_err(plot_err)?
        .label(format!(
            "{label} (band: lowest–highest, line: median, dots: kept)"
        ))
        .legend(move |(x, y)| {
            EmptyElement::at((x, y))
                + Rectangle::new([(0, -5), (20, 5)], color.mix(0.25).filled())
                + PathElement::new([(0, 0), (20, 0)], color.stroke_width(2))
                + Circle::new((10, 0), 4, color.filled())
        });
    Ok(())
}

/// Researcher `i`'s readings: markers filled where the attempt was kept, hollow where not,
/// joined by lines where no crash (or reading off the chart) interrupts them.
fn draw_readings<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    i: usize,
    s: &PlotSeries,
    wild: &dyn Fn(f64) -> bool,
) -> Result<()> {
    let color = SERIES_COLORS[i % SERIES_COLORS.len()];
    // Contiguous runs of successful attempts; crashes leave gaps.
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for &(x, y) in &s.points {
        match y {
            Some(y) if plottable(&x) && plottable(&y) && !wild(x) => {
                runs.last_mut().unwrap().push((x, y))
            }
            _ if runs.last().is_some_and(|r| !r.is_empty()) => runs.push(Vec::new()),
            _ => {}
        }
    }
    for run in runs.iter().filter(|r| r.len() > 1) {
        chart
            .draw_series(LineSeries::new(run.iter().copied(), color.stroke_width(2)))
            .map_err(plot_err)?;
    }
    let label = if s.label.trim().is_empty() {
        format!("series {}", i + 1)
    } else {
        s.label.clone()
    };
    chart
        .draw_series(runs.iter().flatten().map(|&p| {
            let kept = s.kept.contains(&p.0);
            let style = if kept {
                color.filled().stroke_width(2)
            } else {
                color.stroke_width(2)
            };
            Circle::new(p, if kept { 6 } else { 5 }, style)
        }))
        .map_err(plot_err)?
        .label(format!("{label} (filled: kept, hollow: reverted)"))
        .legend(move |(x, y)| {
            EmptyElement::at((x, y))
                + PathElement::new([(0, 0), (20, 0)], color.stroke_width(3))
                + Circle::new((10, 0), 5, WHITE.filled())
                + Circle::new((10, 0), 5, color.stroke_width(2))
        });
    Ok(())
}

/// The best branch's step line up to the last attempt or round end; false when there is none.
fn draw_best_line<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    data: &PlotData,
    x_lo: f64,
) -> Result<bool> {
    let x_end = data
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(data.round_bests.iter().map(|p| p.0))
        .filter(plottable)
        .fold(f64::NEG_INFINITY, f64::max);
    let steps = best_line(data, x_lo.max(1.0f64.min(x_end)), x_end);
    if steps.is_empty() {
        return Ok(false);
    }
    chart
        .draw_series(LineSeries::new(steps, ENVELOPE_COLOR.stroke_width(3)))
        .map_err(plot_err)?
        .label("best branch (validated)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], ENVELOPE_COLOR.stroke_width(3)));
    Ok(true)
}

/// "no data", grey, centred on the plotting area.
fn draw_no_data(root: &DrawingArea<BitMapBackend, Shift>, chart: &Chart) -> Result<()> {
    let (px, py) = chart.plotting_area().get_pixel_range();
    let centre = ((px.start + px.end) / 2, (py.start + py.end) / 2);
    let style = TextStyle::from((FONT, 28).into_font())
        .color(&RGBColor(0x77, 0x77, 0x77))
        .pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Center,
        ));
    root.draw_text("no data", &style, centre)
        .map_err(plot_err)?;
    Ok(())
}

/// The legend, in the corner the best line moves away from.
fn draw_legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, minimize: bool) -> Result<()> {
    chart
        .configure_series_labels()
        .position(if minimize {
            SeriesLabelPosition::UpperRight
        } else {
            SeriesLabelPosition::LowerRight
        })
        .margin(15)
        .legend_area_size(30)
        .label_font((FONT, 18))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(0x99, 0x99, 0x99))
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

/// Encodes a tightly packed 8-bit RGB buffer (`w * h * 3` bytes) as PNG.
fn encode_png_rgb(w: u32, h: u32, rgb: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Default);
    let mut writer = encoder.write_header().map_err(plot_err)?;
    writer.write_image_data(rgb).map_err(plot_err)?;
    writer.finish().map_err(plot_err)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
