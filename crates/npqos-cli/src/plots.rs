//! SVG plots with plotters: line charts and bar-style histograms.

use anyhow::{anyhow, Result};
use npqos_sim::results::PlotSpec;
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

/// Renders `spec` to an SVG document.
pub fn render(spec: &PlotSpec) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("plot {}: {e}", spec.name))?;
        let pts = spec.lines.iter().flat_map(|(_, p)| p.iter()).filter(|(x, y)| x.is_finite() && y.is_finite());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
        for &(x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if x0 > x1 {
            (x0, x1, y1) = (0.0, 1.0, 1.0);
        }
        if x1 - x0 < 1e-12 {
            x1 = x0 + 1.0;
        }
        if y1 - y0 < 1e-12 {
            y1 = y0 + 1.0;
        }
        let pad = (y1 - y0) * 0.05;
        let mut chart = ChartBuilder::on(&root)
            .caption(&spec.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..(y1 + pad))
            .map_err(|e| anyhow!("plot {}: {e}", spec.name))?;
        chart
            .configure_mesh()
            .x_desc(&spec.x_label)
            .y_desc(&spec.y_label)
            .draw()
            .map_err(|e| anyhow!("plot {}: {e}", spec.name))?;
        for (i, (label, points)) in spec.lines.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let pts: Vec<(f64, f64)> = points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
            if spec.bars {
                let n = pts.len().max(1) as f64;
                let w = (x1 - x0) / n * 0.4;
                chart
                    .draw_series(pts.iter().map(|&(x, y)| Rectangle::new([(x - w, 0.0), (x + w, y)], c.filled())))
                    .map_err(|e| anyhow!("plot {}: {e}", spec.name))?
                    .label(label)
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
            } else {
                chart
                    .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                    .map_err(|e| anyhow!("plot {}: {e}", spec.name))?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
                if pts.len() <= 40 {
                    chart
                        .draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))
                        .map_err(|e| anyhow!("plot {}: {e}", spec.name))?;
                }
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow!("plot {}: {e}", spec.name))?;
        root.present().map_err(|e| anyhow!("plot {}: {e}", spec.name))?;
    }
    Ok(svg)
}
