//! The one SVG chart implementation of the benchmarks and sweeps: a grid of panels, each a
//! set of named lines (with point markers, or plain reference lines) or stacked bars.
//! Examples describe what to plot ([`Panel`]); drawing, ranges, colours and legends live here.
//! SVG only (plotters' SVG backend): no font or image libraries needed.

use crate::error::{Error, Result};
use plotters::prelude::*;
use std::path::Path;

/// One named line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Legend entry.
    pub name: String,
    /// `(x, y)` points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Circles at the points (measurements) or not (reference lines).
    pub markers: bool,
}

impl Line {
    /// A measured series, drawn with point markers.
    pub fn measured(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            markers: true,
        }
    }

    /// A horizontal reference line at `y` across `x0..x1` (a target, a peer's figure).
    pub fn level(name: impl Into<String>, y: f64, x0: f64, x1: f64) -> Self {
        Self {
            name: name.into(),
            points: vec![(x0, y), (x1, y)],
            markers: false,
        }
    }
}

/// What a panel shows.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Lines over a numeric x axis.
    Lines(Vec<Line>),
    /// One stacked bar per category: `stacks` are `(legend name, one value per category)`,
    /// drawn bottom to top in order.
    StackedBars {
        /// Category labels (x axis, rotated).
        categories: Vec<String>,
        /// The stacked parts.
        stacks: Vec<(String, Vec<f64>)>,
    },
}

/// Where a panel's legend goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Legend {
    /// Upper left corner.
    UpperLeft,
    /// Upper right corner.
    #[default]
    UpperRight,
    /// Lower left corner.
    LowerLeft,
    /// Lower right corner.
    LowerRight,
}

/// One chart panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Caption.
    pub title: String,
    /// X axis label.
    pub x_desc: String,
    /// Y axis label.
    pub y_desc: String,
    /// Logarithmic x axis (lines only).
    pub log_x: bool,
    /// Y range; `None`: from 0 (or the data's minimum when negative) to 1.1 x the maximum.
    pub y_range: Option<(f64, f64)>,
    /// Legend position.
    pub legend: Legend,
    /// The data.
    pub content: Content,
}

impl Panel {
    /// A line panel with automatic ranges and the legend upper right.
    pub fn lines(title: impl Into<String>, x: &str, y: &str, lines: Vec<Line>) -> Self {
        Self {
            title: title.into(),
            x_desc: x.into(),
            y_desc: y.into(),
            log_x: false,
            y_range: None,
            legend: Legend::UpperRight,
            content: Content::Lines(lines),
        }
    }
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(127, 127, 127),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
];

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// Draws `panels` row by row into a grid of `cols` columns, each cell `cell` pixels, as an
/// SVG file at `path`. An empty panel list writes nothing.
pub fn draw_svg(path: &Path, panels: &[Panel], cols: usize, cell: (u32, u32)) -> Result<()> {
    if panels.is_empty() {
        return Ok(());
    }
    let cols = cols.clamp(1, panels.len());
    let rows = panels.len().div_ceil(cols);
    let draw = || -> DrawResult {
        let size = (cell.0 * cols as u32, cell.1 * rows as u32);
        let root = SVGBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((rows, cols));
        for (panel, area) in panels.iter().zip(&areas) {
            match &panel.content {
                Content::Lines(lines) => draw_lines(area, panel, lines)?,
                Content::StackedBars { categories, stacks } => {
                    draw_bars(area, panel, categories, stacks)?
                }
            }
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| Error::Invalid(format!("drawing {}: {e}", path.display())))
}

fn legend_pos(l: Legend) -> SeriesLabelPosition {
    match l {
        Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
        Legend::UpperRight => SeriesLabelPosition::UpperRight,
        Legend::LowerLeft => SeriesLabelPosition::LowerLeft,
        Legend::LowerRight => SeriesLabelPosition::LowerRight,
    }
}

/// Axis tick text: whole numbers without decimals, others with what their size needs.
fn tick(v: f64) -> String {
    if v == v.round() && v.abs() < 1e9 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn y_range(panel: &Panel, values: impl Iterator<Item = f64>) -> (f64, f64) {
    panel.y_range.unwrap_or_else(|| {
        let (lo, hi) = values.fold((0f64, 0f64), |(a, b), v| (a.min(v), b.max(v)));
        let hi = if hi > 0.0 { hi * 1.1 } else { 1.0 };
        (if lo < 0.0 { lo * 1.1 } else { 0.0 }, hi)
    })
}

fn draw_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    lines: &[Line],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let xs = || lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (x0, x1) = xs().fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (x0, x1) = if x0 > x1 { (0.0, 1.0) } else { (x0, x1) };
    let (y0, y1) = y_range(
        panel,
        lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)),
    );
    let mut b = ChartBuilder::on(area);
    b.caption(&panel.title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(34)
        .y_label_area_size(52);
    macro_rules! body {
        ($c:expr) => {{
            let mut c = $c;
            c.configure_mesh()
                .x_desc(panel.x_desc.as_str())
                .y_desc(panel.y_desc.as_str())
                .x_label_formatter(&|v: &f64| tick(*v))
                .y_label_formatter(&|v: &f64| tick(*v))
                .draw()?;
            for (i, l) in lines.iter().enumerate() {
                let col = COLORS[i % COLORS.len()];
                c.draw_series(LineSeries::new(l.points.clone(), col.stroke_width(2)))?
                    .label(l.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                    });
                if l.markers {
                    c.draw_series(l.points.iter().map(|&p| Circle::new(p, 3, col.filled())))?;
                }
            }
            c.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(legend_pos(panel.legend))
                .draw()?;
        }};
    }
    if panel.log_x && x0 > 0.0 {
        body!(b.build_cartesian_2d((x0..x1 * 1.05).log_scale(), y0..y1)?);
    } else {
        let pad = (x1 - x0).abs().max(1e-9) * 0.05;
        body!(b.build_cartesian_2d(x0 - pad..x1 + pad, y0..y1)?);
    }
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    categories: &[String],
    stacks: &[(String, Vec<f64>)],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let n = categories.len().max(1);
    let totals: Vec<f64> = (0..n)
        .map(|i| {
            stacks
                .iter()
                .map(|(_, v)| v.get(i).copied().unwrap_or(0.0))
                .sum()
        })
        .collect();
    let (y0, y1) = y_range(panel, totals.iter().copied());
    let mut c = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(110)
        .y_label_area_size(52)
        .build_cartesian_2d(0.0..n as f64, y0..y1)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&|x| {
            categories
                .get(x.floor() as usize)
                .cloned()
                .unwrap_or_default()
        })
        .x_label_style(
            ("sans-serif", 11)
                .into_font()
                .transform(FontTransform::Rotate90),
        )
        .y_desc(panel.y_desc.as_str())
        .y_label_formatter(&|v: &f64| tick(*v))
        .draw()?;
    let mut below = vec![0.0; n];
    for (si, (name, values)) in stacks.iter().enumerate() {
        let col = COLORS[si % COLORS.len()];
        let bars: Vec<_> = (0..n)
            .map(|i| {
                let v = values.get(i).copied().unwrap_or(0.0);
                let r = Rectangle::new(
                    [(i as f64 + 0.15, below[i]), (i as f64 + 0.85, below[i] + v)],
                    col.filled(),
                );
                below[i] += v;
                r
            })
            .collect();
        c.draw_series(bars)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], col.filled()));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(legend_pos(panel.legend))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_lines_bars_and_log_axes_into_one_svg() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        let mut log = Panel::lines(
            "speed-up",
            "width",
            "x",
            vec![
                Line::measured("ES", vec![(8.0, 1.0), (32.0, 3.0), (128.0, 9.5)]),
                Line::level("target", 2.5, 8.0, 128.0),
            ],
        );
        log.log_x = true;
        let bars = Panel {
            title: "phases".into(),
            x_desc: String::new(),
            y_desc: "ms".into(),
            log_x: false,
            y_range: None,
            legend: Legend::UpperLeft,
            content: Content::StackedBars {
                categories: vec!["gcn relu".into(), "gcn maxk".into()],
                stacks: vec![
                    ("aggregation".into(), vec![20.0, 6.0]),
                    ("gemm".into(), vec![3.0, 3.0]),
                ],
            },
        };
        draw_svg(&path, &[log, bars], 2, (400, 300)).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for s in [
            "speed-up",
            "phases",
            "ES",
            "target",
            "aggregation",
            "gcn maxk",
        ] {
            assert!(svg.contains(s), "svg lacks {s}");
        }
        // Nothing to draw: no file.
        let empty = dir.path().join("e.svg");
        draw_svg(&empty, &[], 1, (10, 10)).unwrap();
        assert!(!empty.exists());
    }
}
