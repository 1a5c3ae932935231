//! SVG plots with plotters: lines, markers or histogram bars, linear or logarithmic axes.
//!
//! What every plot gets, whatever the experiment: the legend in a panel of its own beside the
//! data (it never hides a curve), a logarithmic y axis when all values are positive and span
//! more than two decades, the colour a [`Style`] gives each legend label (one colour per
//! mechanism or scheduler across an experiment's plots), and the paper's numbers as hollow
//! diamonds in the colour of the curve they belong to.

use anyhow::{anyhow, Result};
use npqos_sim::results::{PlotKind, PlotSpec};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// A curve's label and the paper's (x, value) points that belong to it.
type Marks = (String, Vec<(f64, f64)>);

/// How an output's plots are drawn together: a colour per legend label, and the paper's values
/// to mark.
#[derive(Default)]
pub struct Style {
    /// Legend labels in order of first appearance over all plots; a label's colour is its index.
    labels: Vec<String>,
    /// The paper's numbers: (label of the curve, (x, paper value)) per plot name.
    paper: std::collections::HashMap<String, Vec<Marks>>,
    /// Confidence intervals: (label of the curve, (x, low, high)) per plot name.
    whiskers: std::collections::HashMap<String, Vec<Whiskers>>,
    /// Horizontal guide lines (y values) per plot name.
    guides: std::collections::HashMap<String, Vec<f64>>,
    /// Points the axes must include though nothing is drawn there, per plot name: the other
    /// panels' extremes, so that small multiples share their scales.
    spans: std::collections::HashMap<String, Vec<(f64, f64)>>,
}

/// A curve's label and its (x, low, high) intervals.
pub type Whiskers = (String, Vec<(f64, f64, f64)>);

impl Style {
    /// The style of `specs`: colours by label, and the paper's values to mark: those the plot
    /// places itself ([`PlotSpec::paper`]), and each compared quantity whose `ours` is exactly a
    /// plotted point (the plot shows that quantity there), marked with the paper's value at that
    /// x. A quantity matching points of several curves of one plot, or `ours` = 0, is not placed
    /// that way: the match would be a guess.
    pub fn new(specs: &[PlotSpec], comparisons: &[npqos_sim::results::Comparison]) -> Style {
        let mut labels: Vec<String> = Vec::new();
        for (l, _) in specs.iter().flat_map(|s| s.lines.iter()) {
            if !labels.contains(l) {
                labels.push(l.clone());
            }
        }
        let mut paper = std::collections::HashMap::new();
        for spec in specs.iter().filter(|s| s.kind != PlotKind::Bars) {
            let mut marks: Vec<Marks> = Vec::new();
            // One diamond per point: two compared quantities can be the same point.
            let mut add = |label: &String, point: (f64, f64)| match marks.iter_mut().find(|m| &m.0 == label) {
                Some(m) if m.1.contains(&point) => {}
                Some(m) => m.1.push(point),
                None => marks.push((label.clone(), vec![point])),
            };
            for c in comparisons {
                let Some(p) = c.paper else { continue };
                if c.ours == 0.0 || !c.ours.is_finite() || !p.is_finite() {
                    continue;
                }
                let hits: Vec<(&String, f64)> = spec
                    .lines
                    .iter()
                    .flat_map(|(l, pts)| pts.iter().filter(|q| q.1 == c.ours).map(move |q| (l, q.0)))
                    .collect();
                let [(label, x)] = hits[..] else { continue };
                add(label, (x, p));
            }
            // The experiment's own placements.
            for (label, pts) in &spec.paper {
                for p in pts {
                    add(label, *p);
                }
            }
            if !marks.is_empty() {
                paper.insert(spec.name.clone(), marks);
            }
        }
        Style { labels, paper, whiskers: Default::default(), guides: Default::default(), spans: Default::default() }
    }

    /// Draws horizontal guide lines at `ys` across plot `name` (the first darker).
    pub fn set_guides(&mut self, name: &str, ys: &[f64]) {
        self.guides.insert(name.to_string(), ys.to_vec());
    }

    /// Makes plot `name`'s axes include `points` (nothing drawn there): panels of one plot
    /// share their scales.
    pub fn set_span(&mut self, name: &str, points: Vec<(f64, f64)>) {
        self.spans.insert(name.to_string(), points);
    }

    /// Draws intervals (a vertical whisker from low to high at x) on the curves of plot `name`.
    pub fn set_whiskers(&mut self, name: &str, whiskers: Vec<Whiskers>) {
        if !whiskers.is_empty() {
            self.whiskers.insert(name.to_string(), whiskers);
        }
    }

    fn colour(&self, label: &str, i: usize) -> RGBColor {
        let k = self.labels.iter().position(|l| l == label).unwrap_or(i);
        COLORS[k % COLORS.len()]
    }

    /// How many of the paper's values a plot shows.
    pub fn paper_points(&self, plot: &str) -> usize {
        self.paper.get(plot).map_or(0, |m| m.iter().map(|(_, p)| p.len()).sum())
    }
}

/// Where the agreement plot's guide lines go: 1 (agreement), ±10%, 2x.
pub const AGREEMENT_GUIDES: [f64; 5] = [1.0, 0.9, 1.1, 0.5, 2.0];

/// The agreement plot of a reproduction: ours / the paper's number for every compared quantity
/// with a paper number (x: its place in comparison.json), one marker series per metric, to be
/// drawn with [`AGREEMENT_GUIDES`]. Unit-free, so quantities of every unit share it; `None` when
/// there is nothing to compare.
pub fn agreement(id: &str, comparisons: &[npqos_sim::results::Comparison]) -> Option<PlotSpec> {
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut n = 0usize;
    for c in comparisons {
        let Some(p) = c.paper else { continue };
        n += 1;
        let r = c.ours / p;
        if !r.is_finite() || r <= 0.0 {
            continue;
        }
        // The legend says the metric in words (threads to 95pct of peak), not in code.
        let name = c.metric.replace('_', " ");
        match lines.iter_mut().find(|l| l.0 == name) {
            Some(l) => l.1.push((n as f64, r)),
            None => lines.push((name, vec![(n as f64, r)])),
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(PlotSpec {
        name: "paper-agreement".into(),
        title: format!("{id}: ours / the paper's number (grey: 1, ±10%, 2x)"),
        x_label: "compared quantity (row of comparison.json with a paper number)".into(),
        y_label: "ours / paper".into(),
        lines,
        kind: PlotKind::Points,
        log_x: false,
        log_y: true,
        ..Default::default()
    })
}

/// Compact tick labels: 1.5k, 2M, 0.25, 3e-6.
fn tick(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if a == 0.0 {
        "0".into()
    } else if a >= 1e12 {
        format!("{v:.2e}")
    } else if a >= 1e9 {
        trim(format!("{:.2}", v / 1e9)) + "G"
    } else if a >= 1e6 {
        trim(format!("{:.2}", v / 1e6)) + "M"
    } else if a >= 1e4 {
        trim(format!("{:.2}", v / 1e3)) + "k"
    } else if a >= 1e-3 {
        trim(format!("{v:.3}"))
    } else {
        format!("{v:.1e}")
    }
}

fn err<E: std::fmt::Display>(spec: &PlotSpec) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow!("plot {}: {e}", spec.name)
}

/// The most curves one plot draws; more become small multiples.
pub const MAX_LINES: usize = 6;

/// A report's plots, arranged: the plots to draw, the report's order (an index into them, or
/// the one line that stands for a plot of zeros only: no frame is drawn for it), and for small
/// multiples the points each panel's axes must include ([`Style::set_span`]). A plot of more
/// than [`MAX_LINES`] curves (bars aside) becomes panels of at most that many on one scale,
/// each with the paper's values of its own curves.
pub type Arranged = (Vec<PlotSpec>, Vec<std::result::Result<usize, String>>, Vec<(String, Vec<(f64, f64)>)>);

pub fn arrange(specs: Vec<PlotSpec>) -> Arranged {
    let mut panels: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut kept = Vec::new();
    let mut order = Vec::new();
    for spec in specs {
        let points = || spec.lines.iter().flat_map(|(_, p)| p.iter()).filter(|p| p.0.is_finite() && p.1.is_finite());
        if spec.lines.iter().all(|(_, p)| p.is_empty()) || points().all(|p| p.1 == 0.0) {
            order.push(Err(format!("{}: every value is 0, so no plot is drawn.", spec.title)));
            continue;
        }
        if spec.lines.len() <= MAX_LINES || spec.kind == PlotKind::Bars {
            order.push(Ok(kept.len()));
            kept.push(spec);
            continue;
        }
        let (lo, hi) = points().fold(((f64::MAX, f64::MAX), (f64::MIN, f64::MIN)), |(a, b), p| {
            ((a.0.min(p.0), a.1.min(p.1)), (b.0.max(p.0), b.1.max(p.1)))
        });
        let positive = points().filter(|p| p.1 > 0.0).map(|p| p.1).fold(f64::MAX, f64::min);
        let span = vec![lo, hi, (lo.0, positive.min(hi.1))];
        let n = spec.lines.len().div_ceil(MAX_LINES);
        let per = spec.lines.len().div_ceil(n);
        for (k, chunk) in spec.lines.chunks(per).enumerate() {
            let mut p = spec.clone();
            p.name = format!("{}-{}", spec.name, k + 1);
            p.title = format!("{} ({} of {n}, one scale)", spec.title, k + 1);
            p.lines = chunk.to_vec();
            // The paper's values go on the panel of their curve.
            let here = |label: &str| chunk.iter().any(|(l, _)| l == label);
            p.paper.retain(|(label, _)| here(label));
            p.marks.retain(|m| here(&m.curve));
            panels.push((p.name.clone(), span.clone()));
            order.push(Ok(kept.len()));
            kept.push(p);
        }
    }
    (kept, order, panels)
}

/// Renders `spec` alone (its own colours, no paper values) to an SVG document.
pub fn render(spec: &PlotSpec) -> Result<String> {
    render_styled(spec, &Style::new(std::slice::from_ref(spec), &[]))
}

/// Renders `spec` with the colours and paper values of `style` to an SVG document.
pub fn render_styled(spec: &PlotSpec, style: &Style) -> Result<String> {
    let marks: &[Marks] = style.paper.get(&spec.name).map_or(&[], |m| m.as_slice());
    let ends: Vec<(f64, f64)> = style
        .whiskers
        .get(&spec.name)
        .into_iter()
        .flatten()
        .flat_map(|(_, w)| w.iter().flat_map(|&(x, lo, hi)| [(x, lo), (x, hi)]))
        .chain(
            style
                .guides
                .get(&spec.name)
                .into_iter()
                .flatten()
                // Only the y of a guide matters to the range; any plotted x will do.
                .filter_map(|&g| spec.lines.iter().flat_map(|(_, p)| p.first()).next().map(|p| (p.0, g))),
        )
        .chain(style.spans.get(&spec.name).into_iter().flatten().copied())
        .collect();
    let all = || {
        spec.lines.iter().flat_map(|(_, p)| p.iter()).chain(marks.iter().flat_map(|(_, p)| p.iter())).chain(ends.iter())
    };
    // A logarithmic y axis where the values are positive and span more than two decades, unless
    // they are fractions (at most 1: a CDF or a rate reads better on a linear axis).
    let mut spec_owned;
    let spec = if !spec.log_y && spec.kind != PlotKind::Bars && {
        let ys: Vec<f64> = all().map(|p| p.1).filter(|y| y.is_finite()).collect();
        !ys.is_empty()
            && ys.iter().all(|&y| y > 0.0)
            && ys.iter().any(|&y| y > 1.0)
            && ys.iter().copied().fold(f64::MIN, f64::max) / ys.iter().copied().fold(f64::MAX, f64::min) > 100.0
    } {
        spec_owned = spec.clone();
        spec_owned.log_y = true;
        &spec_owned
    } else {
        spec
    };
    let finite =
        |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!spec.log_x || x > 0.0) && (!spec.log_y || y > 0.0);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
    for &(x, y) in all().filter(|p| finite(p)) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y1) = (1.0, 2.0, 1.0);
    }
    if spec.kind == PlotKind::Bars {
        // Room for the first bar, which starts half-way (log) or one bar-width (linear) before it.
        x0 = if spec.log_x { x0 / 2.0 } else { x0 - (x1 - x0) / spec.lines[0].1.len().max(1) as f64 };
    }
    if !spec.x_categories.is_empty() {
        (x0, x1) = (-0.5, spec.x_categories.len() as f64 - 0.5);
    } else if spec.log_x {
        x0 /= 1.2;
        x1 *= 1.2;
    } else {
        let pad = ((x1 - x0) * 0.02).max(1e-12);
        x0 -= pad;
        x1 += pad;
    }
    if spec.log_y {
        // y0 started at 0: take the smallest positive value instead.
        y0 = all().filter(|p| finite(p)).map(|p| p.1).fold(f64::MAX, f64::min);
        if y0 == f64::MAX {
            (y0, y1) = (1.0, 10.0);
        }
        y0 /= 2.0;
        y1 = y1.max(y0 * 4.0) * 2.0;
    } else {
        if y1 - y0 < 1e-12 {
            y1 = y0 + 1.0;
        }
        y1 += (y1 - y0) * 0.08;
    }
    let mut svg = String::new();
    {
        // The legend gets a panel of its own, as wide as its longest entry needs.
        let entries = legend_entries(spec, marks);
        let longest = entries.iter().map(|e| e.0.chars().count()).max().unwrap_or(0);
        let panel = if entries.is_empty() { 0 } else { (longest as u32 * 7 + 44).clamp(110, 300) };
        let root = SVGBackend::with_string(&mut svg, (820 + panel, 480 + turned_labels(spec))).into_drawing_area();
        root.fill(&WHITE).map_err(err(spec))?;
        let (plot, legend) = root.split_horizontally(820);
        // Logarithmic axes get their ticks here: plotters' own start at the first power of ten,
        // leaving a range like 16..1024 with labels at 100 and 1000 only.
        let xs: Vec<f64> = spec.lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)).collect();
        let kx = log_ticks(x0, x1, &xs);
        let ky = log_ticks(y0, y1, &[]);
        match (spec.log_x, spec.log_y) {
            (true, true) => draw(
                &plot,
                spec,
                style,
                marks,
                (x0..x1).log_scale().with_key_points(kx),
                (y0..y1).log_scale().with_key_points(ky),
            )?,
            (true, false) => draw(&plot, spec, style, marks, (x0..x1).log_scale().with_key_points(kx), y0..y1)?,
            (false, true) => draw(&plot, spec, style, marks, x0..x1, (y0..y1).log_scale().with_key_points(ky))?,
            (false, false) => draw(&plot, spec, style, marks, x0..x1, y0..y1)?,
        }
        draw_legend(&legend, spec, style, &entries)?;
        root.present().map_err(err(spec))?;
    }
    Ok(svg)
}

/// Ticks of a logarithmic axis over [lo, hi]: the plotted values themselves where there are a
/// few distinct ones (powers of two, say), else 1, 2, 5 per decade, else one per decade.
fn log_ticks(lo: f64, hi: f64, values: &[f64]) -> Vec<f64> {
    let mut distinct: Vec<f64> = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0).collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if (2..=12).contains(&distinct.len()) {
        return distinct;
    }
    let (lo, hi) = (lo.max(f64::MIN_POSITIVE), hi.max(f64::MIN_POSITIVE));
    let decades = lo.log10().floor() as i32..=hi.log10().ceil() as i32;
    let within = |steps: &[f64]| -> Vec<f64> {
        decades
            .clone()
            .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    let fine = within(&[1.0, 2.0, 5.0]);
    if fine.len() <= 14 {
        fine
    } else {
        within(&[1.0])
    }
}

/// The legend's entries: each curve (label, its index), then each curve's paper values.
fn legend_entries(spec: &PlotSpec, marks: &[Marks]) -> Vec<(String, usize, bool)> {
    let mut e: Vec<(String, usize, bool)> = spec
        .lines
        .iter()
        .enumerate()
        .filter(|(_, (l, _))| !l.is_empty())
        .map(|(i, (l, _))| (l.clone(), i, false))
        .collect();
    for (l, _) in marks {
        let i = spec.lines.iter().position(|(x, _)| x == l).unwrap_or(0);
        // "ours, 2KB locked" becomes "paper, 2KB locked", not "paper: ours, 2KB locked".
        let label = match l.strip_prefix("ours") {
            Some(rest) if rest.is_empty() || rest.starts_with(',') => format!("paper{rest}"),
            _ => format!("paper: {l}"),
        };
        e.push((label, i, true));
    }
    e
}

/// The legend panel: a swatch and a label per entry, top down.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    spec: &PlotSpec,
    style: &Style,
    entries: &[(String, usize, bool)],
) -> Result<()> {
    let font = ("sans-serif", 13).into_font();
    for (k, (label, i, paper)) in entries.iter().enumerate() {
        let y = 56 + k as i32 * 20;
        let c = style.colour(&spec.lines[*i].0, *i);
        if *paper {
            let rim = [(12, y - 6), (18, y), (12, y + 6), (6, y)];
            area.draw(&Polygon::new(rim.to_vec(), WHITE.filled())).map_err(err(spec))?;
            area.draw(&PathElement::new([&rim[..], &rim[..1]].concat(), c.stroke_width(2))).map_err(err(spec))?;
        } else {
            match spec.kind {
                PlotKind::Bars => area.draw(&Rectangle::new([(4, y - 5), (20, y + 5)], c.filled())),
                PlotKind::Points if i % 2 == 1 => area.draw(&Cross::new((12, y), 5, c.stroke_width(2))).map(|_| ()),
                PlotKind::Points => area.draw(&Circle::new((12, y), 4, c.filled())),
                PlotKind::Lines => area.draw(&PathElement::new(vec![(2, y), (22, y)], c.stroke_width(2))),
            }
            .map_err(err(spec))?;
        }
        area.draw(&Text::new(label.clone(), (28, y - 7), font.clone())).map_err(err(spec))?;
    }
    Ok(())
}

/// Extra height, px, for a categorical axis whose names would run into each other side by
/// side (about 7 px a character of the longest against a category's width): the names then
/// alternate between two rows, and the axis takes a row more. 0 otherwise.
fn turned_labels(spec: &PlotSpec) -> u32 {
    let n = spec.x_categories.len() as u32;
    let longest = spec.x_categories.iter().map(|c| c.chars().count() as u32).max().unwrap_or(0);
    if n == 0 || longest * 7 < 720 / n {
        return 0;
    }
    16
}

fn draw<'a, XR, YR>(
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    spec: &PlotSpec,
    style: &Style,
    marks: &[Marks],
    x: XR,
    y: YR,
) -> Result<()>
where
    XR: AsRangedCoord<Value = f64>,
    XR::CoordDescType: ValueFormatter<f64>,
    YR: AsRangedCoord<Value = f64>,
    YR::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&spec.title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(42 + turned_labels(spec))
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(err(spec))?;
    // A categorical axis names its integer positions and nothing between them.
    let category = |v: &f64| {
        let i = v.round();
        match spec.x_categories.get(i as usize) {
            Some(name) if (v - i).abs() < 1e-6 && i >= 0.0 => name.clone(),
            _ => String::new(),
        }
    };
    let n_categories = spec.x_categories.len();
    let staggered = turned_labels(spec) > 0;
    chart
        .configure_mesh()
        .x_desc(&spec.x_label)
        .y_desc(&spec.y_label)
        .x_labels(if n_categories > 0 { 2 * n_categories + 1 } else { 10 })
        .x_label_formatter(&|v| match (n_categories > 0, staggered) {
            (true, true) => String::new(),
            (true, false) => category(v),
            _ => tick(*v),
        })
        .y_label_formatter(&|v| tick(*v))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err(spec))?;
    if staggered {
        // Names too long to stand side by side: every other one a row lower, each centred on
        // its position.
        let bottom = chart.plotting_area().get_pixel_range().1.end;
        let font = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        for (i, name) in spec.x_categories.iter().enumerate() {
            let (px, _) = chart.backend_coord(&(i as f64, chart.y_range().start));
            let y = bottom + 8 + 15 * (i % 2) as i32;
            root.draw(&Text::new(name.clone(), (px, y), font.clone())).map_err(err(spec))?;
        }
    }
    let finite =
        |&(a, b): &(f64, f64)| a.is_finite() && b.is_finite() && (!spec.log_x || a > 0.0) && (!spec.log_y || b > 0.0);
    for (i, (label, points)) in spec.lines.iter().enumerate() {
        let c = style.colour(label, i);
        let pts: Vec<(f64, f64)> = points.iter().copied().filter(finite).collect();
        match spec.kind {
            PlotKind::Bars => {
                let mut prev = match (pts.first(), pts.get(1)) {
                    (Some(a), _) if spec.log_x => a.0 / 2.0,
                    (Some(a), Some(b)) => a.0 - (b.0 - a.0),
                    (Some(a), None) => a.0 - 1.0,
                    _ => 0.0,
                };
                let bars: Vec<_> = pts
                    .iter()
                    .map(|&(xv, yv)| {
                        let r = Rectangle::new([(prev, 0.0), (xv, yv)], c.mix(0.8).filled());
                        prev = xv;
                        r
                    })
                    .collect();
                chart.draw_series(bars).map_err(err(spec))?;
            }
            PlotKind::Points => {
                let marker = i % 2;
                chart
                    .draw_series(pts.iter().map(move |&p| -> DynElement<_, _> {
                        if marker == 0 {
                            Circle::new(p, 5, c.filled()).into_dyn()
                        } else {
                            Cross::new(p, 7, c.stroke_width(2)).into_dyn()
                        }
                    }))
                    .map_err(err(spec))?;
            }
            PlotKind::Lines => {
                chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2))).map_err(err(spec))?;
                if pts.len() <= 40 {
                    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled()))).map_err(err(spec))?;
                }
            }
        }
    }
    // Guide lines across the plot, light grey; the first (agreement) darker.
    for (k, &g) in style.guides.get(&spec.name).into_iter().flatten().enumerate() {
        let (lo, hi) = (chart.x_range().start, chart.x_range().end);
        let grey = if k == 0 { RGBColor(90, 90, 90) } else { RGBColor(185, 185, 185) };
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(lo, g), (hi, g)], grey.stroke_width(1))))
            .map_err(err(spec))?;
    }
    // Confidence intervals: a whisker with short caps, in the colour of the curve.
    for (label, ws) in style.whiskers.get(&spec.name).into_iter().flatten() {
        let i = spec.lines.iter().position(|(l, _)| l == label).unwrap_or(0);
        let c = style.colour(label, i);
        for &(xv, lo, hi) in ws.iter().filter(|w| finite(&(w.0, w.1)) && finite(&(w.0, w.2))) {
            chart
                .draw_series(std::iter::once(PathElement::new(vec![(xv, lo), (xv, hi)], c.stroke_width(1))))
                .map_err(err(spec))?;
            for end in [lo, hi] {
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at((xv, end)) + PathElement::new(vec![(-4, 0), (4, 0)], c.stroke_width(1)),
                    ))
                    .map_err(err(spec))?;
            }
        }
    }
    // The paper's values: hollow diamonds with a dark rim, in the colour of their curve.
    for (label, pts) in marks {
        let i = spec.lines.iter().position(|(l, _)| l == label).unwrap_or(0);
        let c = style.colour(label, i);
        let pts: Vec<(f64, f64)> = pts.iter().copied().filter(finite).collect();
        chart
            .draw_series(pts.iter().map(|&p| {
                EmptyElement::at(p)
                    + Polygon::new(vec![(0, -7), (7, 0), (0, 7), (-7, 0)], WHITE.filled())
                    + PathElement::new(vec![(0, -7), (7, 0), (0, 7), (-7, 0), (0, -7)], c.stroke_width(2))
            }))
            .map_err(err(spec))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use npqos_sim::results::Comparison;

    /// A plot of zeros is one line in the report, in its place; eight curves become two panels
    /// of four on one scale, each with the paper's values of its own curves; six stay one plot.
    #[test]
    fn arrange_says_zero_plots_in_a_line_and_splits_many_curves() {
        let curve = |i: usize, y: f64| (format!("c{i}"), vec![(0.0, y), (1.0, y * (i + 1) as f64)]);
        let zero = PlotSpec { name: "z".into(), title: "Z".into(), lines: vec![curve(0, 0.0)], ..Default::default() };
        let mut many = PlotSpec {
            name: "m".into(),
            title: "M".into(),
            lines: (0..8).map(|i| curve(i, 1.0)).collect(),
            ..Default::default()
        };
        many.paper = vec![("c6".into(), vec![(1.0, 5.0)])];
        let six = PlotSpec { name: "s".into(), lines: (0..6).map(|i| curve(i, 1.0)).collect(), ..Default::default() };
        let (kept, order, spans) = arrange(vec![zero, many, six]);
        assert_eq!(order[0], Err("Z: every value is 0, so no plot is drawn.".into()));
        assert_eq!(order[1..], [Ok(0), Ok(1), Ok(2)]);
        let names: Vec<&str> = kept.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["m-1", "m-2", "s"]);
        assert_eq!((kept[0].lines.len(), kept[1].lines.len()), (4, 4));
        assert!(kept[0].paper.is_empty() && kept[1].paper.len() == 1, "c6's paper value on the second panel");
        assert_eq!(spans.len(), 2);
        // Both panels span the whole plot's values: y from 1 to 8.
        for (_, s) in &spans {
            assert!(s.iter().any(|p| p.1 == 1.0) && s.iter().any(|p| p.1 == 8.0), "{s:?}");
        }
    }

    fn spec(name: &str, lines: Vec<(&str, Vec<(f64, f64)>)>) -> PlotSpec {
        PlotSpec {
            name: name.into(),
            title: name.into(),
            x_label: "x".into(),
            y_label: "y".into(),
            lines: lines.into_iter().map(|(l, p)| (l.to_string(), p)).collect(),
            kind: PlotKind::Lines,
            log_x: false,
            log_y: false,
            ..Default::default()
        }
    }

    fn compared(ours: f64, paper: Option<f64>) -> Comparison {
        Comparison::new("m", Default::default(), ours, paper, "u", "Table 1")
    }

    #[test]
    fn paper_values_go_where_ours_is_plotted_and_nowhere_else() {
        let a = spec("a", vec![("qc", vec![(1.0, 10.0), (2.0, 20.0)]), ("nc", vec![(1.0, 5.0), (2.0, 7.0)])]);
        let b = spec("b", vec![("nc", vec![(1.0, 7.0)]), ("qc", vec![(3.0, 7.0)])]);
        let c = [
            compared(20.0, Some(25.0)), // qc at x = 2 in a
            compared(7.0, Some(8.0)),   // nc at x = 2 in a; two curves in b: not placed there
            compared(0.0, Some(1.0)),   // zero: never placed
            compared(5.0, None),        // no paper number
        ];
        let style = Style::new(&[a.clone(), b.clone()], &c);
        assert_eq!(style.paper["a"], vec![("qc".to_string(), vec![(2.0, 25.0)]), ("nc".to_string(), vec![(2.0, 8.0)])]);
        assert!(!style.paper.contains_key("b"));
        assert_eq!((style.paper_points("a"), style.paper_points("b")), (2, 0));
        // One colour per label across both plots, whatever its place in each.
        assert_eq!(style.colour("nc", 0), style.colour("nc", 1));
        assert_ne!(style.colour("nc", 0), style.colour("qc", 0));
    }

    #[test]
    fn the_agreement_plot_shows_ours_over_the_paper_for_each_compared_quantity() {
        assert!(agreement("x", &[compared(5.0, None)]).is_none());
        let c = [compared(5.0, None), compared(12.0, Some(10.0)), compared(3.0, Some(6.0))];
        let a = agreement("x", &c).unwrap();
        assert_eq!(a.lines, vec![("m".to_string(), vec![(1.0, 1.2), (2.0, 0.5)])]);
        assert!(a.log_y);
        let mut style = Style::new(std::slice::from_ref(&a), &c);
        style.set_guides(&a.name, &AGREEMENT_GUIDES);
        assert!(render_styled(&a, &style).unwrap().contains("stroke=\"#5A5A5A\""), "the agreement guide is drawn");
    }

    #[test]
    fn the_legend_sits_beside_the_data_and_decades_get_a_log_axis() {
        let s = spec("s", vec![("a long legend entry", vec![(1.0, 1e3), (2.0, 1e6)])]);
        let svg = render(&s).unwrap();
        let width: u32 = svg.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
        assert!(width > 820, "the legend panel widens the picture: {width}");
        assert!(
            svg.contains("\n1M\n") && svg.contains("\n100k\n") && svg.contains("\n10k\n"),
            "decade ticks on a log axis"
        );
        let flat = render(&spec("f", vec![("", vec![(1.0, 1.0), (2.0, 50.0)])])).unwrap();
        assert!(flat.starts_with("<svg width=\"820\""), "no legend, no panel");
        // A CDF spanning decades stays linear: fractions read better that way.
        let cdf = render(&spec("c", vec![("", vec![(1.0, 1e-4), (2.0, 0.5), (3.0, 1.0)])])).unwrap();
        assert!(cdf.contains("\n0.5\n") && !cdf.contains("\n1.0e-4\n"), "fractions on a linear axis");
    }

    #[test]
    fn log_axes_tick_at_the_plotted_values_or_at_1_2_5() {
        assert_eq!(log_ticks(12.0, 1300.0, &[16.0, 32.0, 64.0, 1024.0]), vec![16.0, 32.0, 64.0, 1024.0]);
        let many: Vec<f64> = (1..40).map(|i| i as f64 * 7.0).collect();
        assert_eq!(log_ticks(5.0, 300.0, &many), vec![5.0, 10.0, 20.0, 50.0, 100.0, 200.0]);
        assert_eq!(log_ticks(1.0, 1e9, &[]), (0..=9).map(|e| 10f64.powi(e)).collect::<Vec<_>>(), "decades only");
        let mut s = spec("m", vec![("a", vec![(16.0, 1.0), (64.0, 2.0), (256.0, 3.0)])]);
        s.log_x = true;
        let svg = render(&s).unwrap();
        assert!(["\n16\n", "\n64\n", "\n256\n"].iter().all(|t| svg.contains(t)), "every M labelled");
    }

    #[test]
    fn a_categorical_axis_names_its_positions_and_the_paper_goes_where_the_plot_puts_it() {
        let mut s = spec("c", vec![("ours", vec![(0.0, 30.0), (1.0, 15.0)])]);
        s.kind = PlotKind::Points;
        s.x_categories = vec!["sfq".into(), "efq".into()];
        s.paper = vec![("ours".into(), vec![(1.0, 7.0)])];
        let style = Style::new(std::slice::from_ref(&s), &[]);
        assert_eq!(style.paper_points("c"), 1);
        let svg = render_styled(&s, &style).unwrap();
        assert!(svg.contains("\nsfq\n") && svg.contains("\nefq\n"), "category names on the x axis");
        assert!(!svg.contains("\n0.5\n"), "nothing between categories");
        assert!(svg.contains("\npaper\n"), "the legend names the paper's values (\"paper\", for the curve \"ours\")");
        // The y axis's description is turned in any case (one `rotate(`).
        assert_eq!(svg.matches("rotate(").count(), 1, "two short names stay level");
        // Eleven long names (router-ablation's) would run into each other: two rows, each whole.
        s.x_categories = (0..11).map(|i| format!("event->periodic-{i}00us")).collect();
        let svg = render_styled(&s, &style).unwrap();
        assert!((0..11).all(|i| svg.contains(&format!("periodic-{i}00us\n"))), "every name whole");
        assert_eq!(svg.matches("rotate(").count(), 1, "level");
        // A compared quantity matched on the same point as a placement is drawn once.
        let c = [compared(15.0, Some(7.0))];
        assert_eq!(Style::new(std::slice::from_ref(&s), &c).paper_points("c"), 1);
    }
}
