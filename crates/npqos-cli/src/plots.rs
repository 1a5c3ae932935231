//! SVG plots with plotters: lines, markers or histogram bars, linear or logarithmic axes.

use anyhow::{anyhow, Result};
use npqos_sim::results::{PlotKind, PlotSpec};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

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

/// Renders `spec` to an SVG document.
pub fn render(spec: &PlotSpec) -> Result<String> {
    let finite =
        |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!spec.log_x || x > 0.0) && (!spec.log_y || y > 0.0);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
    for &(x, y) in spec.lines.iter().flat_map(|(_, p)| p.iter()).filter(|p| finite(p)) {
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
    if spec.log_x {
        x0 /= 1.2;
        x1 *= 1.2;
    } else {
        let pad = ((x1 - x0) * 0.02).max(1e-12);
        x0 -= pad;
        x1 += pad;
    }
    if spec.log_y {
        // y0 started at 0: take the smallest positive value instead.
        y0 = spec.lines.iter().flat_map(|(_, p)| p.iter()).filter(|p| finite(p)).map(|p| p.1).fold(f64::MAX, f64::min);
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
        let root = SVGBackend::with_string(&mut svg, (820, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(err(spec))?;
        match (spec.log_x, spec.log_y) {
            (true, true) => draw(&root, spec, (x0..x1).log_scale(), (y0..y1).log_scale())?,
            (true, false) => draw(&root, spec, (x0..x1).log_scale(), y0..y1)?,
            (false, true) => draw(&root, spec, x0..x1, (y0..y1).log_scale())?,
            (false, false) => draw(&root, spec, x0..x1, y0..y1)?,
        }
        root.present().map_err(err(spec))?;
    }
    Ok(svg)
}

fn draw<'a, XR, YR>(
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    spec: &PlotSpec,
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
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(err(spec))?;
    chart
        .configure_mesh()
        .x_desc(&spec.x_label)
        .y_desc(&spec.y_label)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err(spec))?;
    let finite =
        |&(a, b): &(f64, f64)| a.is_finite() && b.is_finite() && (!spec.log_x || a > 0.0) && (!spec.log_y || b > 0.0);
    for (i, (label, points)) in spec.lines.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
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
                chart
                    .draw_series(bars)
                    .map_err(err(spec))?
                    .label(label)
                    .legend(move |(a, b)| Rectangle::new([(a, b - 5), (a + 10, b + 5)], c.filled()));
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
                    .map_err(err(spec))?
                    .label(label)
                    .legend(move |(a, b)| -> DynElement<_, _> {
                        if marker == 0 {
                            Circle::new((a + 5, b), 4, c.filled()).into_dyn()
                        } else {
                            Cross::new((a + 5, b), 5, c.stroke_width(2)).into_dyn()
                        }
                    });
            }
            PlotKind::Lines => {
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                    .map_err(err(spec))?
                    .label(label)
                    .legend(move |(a, b)| PathElement::new(vec![(a, b), (a + 16, b)], c.stroke_width(2)));
                if pts.len() <= 40 {
                    chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled()))).map_err(err(spec))?;
                }
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err(spec))?;
    Ok(())
}
