//! SVG plots of the diagnostics (plotters, SVG backend).

use plotters::prelude::*;
use std::path::Path;

type DynErr = Box<dyn std::error::Error>;

/// A labelled series of (x, y) points.
pub type Series = (String, Vec<(f64, f64)>);

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The `lo`/`hi` quantiles of `v` (finite values).
fn quantile_range(v: &[f64], lo: f64, hi: f64) -> (f64, f64) {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return (0.0, 1.0);
    }
    let q = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
    let (a, b) = (q(lo), q(hi));
    let pad = 0.05 * (b - a).max(1e-9);
    (a - pad, b + pad)
}

/// The potential U per step: the whole run on a log scale of U − min U + 1 (top), and
/// the last 80 % with a linear axis clipped to the 0.5–99.5 % quantiles (bottom); the
/// dashed line is the end of burn-in.
pub fn potential(
    path: &Path,
    trace: &[(usize, f64)],
    burn_in: usize,
    title: &str,
) -> Result<(), DynErr> {
    let root = SVGBackend::new(path, (900, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(350);
    let n = trace.last().map_or(1, |t| t.0 + 1);
    let min = trace.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
    let shifted: Vec<(f64, f64)> = trace
        .iter()
        .map(|&(s, u)| (s as f64, u - min + 1.0))
        .collect();
    let ymax = shifted.iter().map(|p| p.1).fold(1.0, f64::max);
    let mut c = ChartBuilder::on(&top)
        .caption(
            format!("{title}: potential U − min U + 1 (log)"),
            ("sans-serif", 16),
        )
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..n as f64, (1f64..ymax * 1.5).log_scale())?;
    c.configure_mesh().x_desc("step").draw()?;
    c.draw_series(LineSeries::new(shifted, &COLOURS[0]))?;
    c.draw_series(DashedLineSeries::new(
        [(burn_in as f64, 1.0), (burn_in as f64, ymax * 1.5)],
        6,
        4,
        RED.stroke_width(2),
    ))?;
    let from = n / 5;
    let tail: Vec<(f64, f64)> = trace
        .iter()
        .filter(|t| t.0 >= from)
        .map(|&(s, u)| (s as f64, u))
        .collect();
    let (lo, hi) = quantile_range(&tail.iter().map(|p| p.1).collect::<Vec<_>>(), 0.005, 0.995);
    let mut c = ChartBuilder::on(&bottom)
        .caption(
            "potential U, steps from 20 % of the run (burn-in | sampling)",
            ("sans-serif", 16),
        )
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(from as f64..n as f64, lo..hi)?;
    c.configure_mesh().x_desc("step").draw()?;
    c.draw_series(LineSeries::new(
        tail.into_iter().map(|(s, u)| (s, u.clamp(lo, hi))),
        &COLOURS[0],
    ))?;
    c.draw_series(DashedLineSeries::new(
        [(burn_in as f64, lo), (burn_in as f64, hi)],
        6,
        4,
        RED.stroke_width(2),
    ))?;
    root.present()?;
    Ok(())
}

/// One panel per named group of series (`(label, points)`), log y axis, against step.
pub fn traces(path: &Path, panels: &[(&str, Vec<Series>)]) -> Result<(), DynErr> {
    let height = 260 * panels.len() as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, (title, series)) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let all: Vec<f64> = series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.1))
            .collect();
        let x1 = series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.0))
            .fold(1.0, f64::max);
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(1e-12);
        let hi = all.iter().copied().fold(0.0, f64::max).max(lo * 1.01);
        let mut c = ChartBuilder::on(area)
            .caption(*title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..x1, (lo / 1.2..hi * 1.2).log_scale())?;
        c.configure_mesh().x_desc("burn-in step").draw()?;
        for (k, (label, pts)) in series.iter().enumerate() {
            let col = COLOURS[k % COLOURS.len()];
            c.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], col));
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Autocorrelation functions (`(label, ρ_0..ρ_K)`) against lag, with the ±2/√n band of
/// white noise for series of length `n`.
pub fn acf(
    path: &Path,
    title: &str,
    lag_unit: &str,
    n: usize,
    series: &[(String, Vec<f64>)],
) -> Result<(), DynErr> {
    let root = SVGBackend::new(path, (900, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let kmax = series.iter().map(|s| s.1.len()).max().unwrap_or(1).max(2) - 1;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..kmax as f64, -0.5f64..1.05)?;
    c.configure_mesh()
        .x_desc(lag_unit)
        .y_desc("autocorrelation")
        .draw()?;
    let band = 2.0 / (n.max(1) as f64).sqrt();
    for b in [band, -band, 0.0] {
        c.draw_series(DashedLineSeries::new(
            [(0.0, b), (kmax as f64, b)],
            4,
            4,
            BLACK.mix(0.5).stroke_width(1),
        ))?;
    }
    for (k, (label, rho)) in series.iter().enumerate() {
        let col = COLOURS[k % COLOURS.len()];
        c.draw_series(LineSeries::new(
            rho.iter().enumerate().map(|(i, r)| (i as f64, r.max(-0.5))),
            col.stroke_width(2),
        ))?
        .label(label.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], col));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Per kept sample s: the component's predictive mean ± 2 sd at one test point, and the
/// target (red line), in original units.
pub fn components(
    path: &Path,
    title: &str,
    means: &[f64],
    sds: &[f64],
    target: f64,
) -> Result<(), DynErr> {
    let root = SVGBackend::new(path, (900, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut ys: Vec<f64> = means
        .iter()
        .zip(sds)
        .flat_map(|(m, s)| [m - 2.0 * s, m + 2.0 * s])
        .collect();
    ys.push(target);
    let (lo, hi) = quantile_range(&ys, 0.0, 1.0);
    let n = means.len().max(1) as f64;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(-1f64..n, lo..hi)?;
    c.configure_mesh()
        .x_desc("kept sample")
        .y_desc("y")
        .draw()?;
    c.draw_series(means.iter().zip(sds).enumerate().map(|(i, (m, s))| {
        PathElement::new(
            vec![(i as f64, m - 2.0 * s), (i as f64, m + 2.0 * s)],
            COLOURS[0],
        )
    }))?;
    c.draw_series(
        means
            .iter()
            .enumerate()
            .map(|(i, m)| Circle::new((i as f64, *m), 2, COLOURS[0].filled())),
    )?;
    c.draw_series(LineSeries::new(
        [(-1.0, target), (n, target)],
        RED.stroke_width(2),
    ))?;
    root.present()?;
    Ok(())
}
