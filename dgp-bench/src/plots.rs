//! SVG plots (plotters): predictive bands of 1-D models and calibration curves.

use std::path::Path;

use dgp_data::Standardizer;
use dgp_traits::metrics::central_intervals;
use dgp_traits::model::{Model, PredictConfig};
use faer::Mat;
use plotters::prelude::*;

use crate::error::{BenchError, Result};

/// Nominal levels of the calibration curves: 0, 0.05, …, 1.
pub fn calibration_levels() -> Vec<f64> {
    (0..=20).map(|i| i as f64 / 20.0).collect()
}

/// Empirical coverage of central intervals from PIT values u_n = F_n(y_n): for each nominal
/// level ℓ, the fraction of u_n in [(1−ℓ)/2, (1+ℓ)/2] (the same convention as
/// `dgp_traits::metrics::coverage`). Returns `(ℓ, coverage)` pairs; a calibrated model lies
/// on the diagonal.
pub fn calibration_curve(pit: &[f64], levels: &[f64]) -> Vec<(f64, f64)> {
    levels
        .iter()
        .map(|&l| {
            let (lo, hi) = (0.5 * (1.0 - l), 0.5 * (1.0 + l));
            let inside = pit.iter().filter(|u| (lo..=hi).contains(*u)).count();
            (l, inside as f64 / pit.len().max(1) as f64)
        })
        .collect()
}

/// A model's predictive distribution along a 1-D input grid, in original units.
#[derive(Clone, Debug)]
pub struct Curve1d {
    /// Grid inputs.
    pub x: Vec<f64>,
    /// Predictive mean.
    pub mean: Vec<f64>,
    /// Lower end of the central 95 % interval.
    pub lower: Vec<f64>,
    /// Upper end of the central 95 % interval.
    pub upper: Vec<f64>,
    /// Posterior function samples (one `Vec` per sample), when the backend provides them
    /// ([`Model::function_samples`]).
    pub samples: Option<Vec<Vec<f64>>>,
}

/// Evaluates `model` (trained on data standardised by `st`, one input column) on the grid
/// `x`: mixture mean, central 95 % interval (mixture quantiles) and `n_samples` function
/// samples where the backend has them, all mapped back to original units.
///
/// # Errors
/// Whatever prediction fails with.
pub fn predict_curve_1d(
    model: &dyn Model,
    st: &Standardizer,
    x: &[f64],
    cfg: &PredictConfig,
    n_samples: usize,
) -> dgp_core::Result<Curve1d> {
    let xm = Mat::from_fn(x.len(), 1, |i, _| x[i]);
    let xs = st.transform_x(xm.as_ref())?;
    let pred = model
        .predict(xs.as_ref(), cfg)?
        .unstandardize(&st.y_mean, &st.y_std)?;
    let mean = pred.mean();
    let (lo, hi) = central_intervals(&pred, 0.95)?;
    let samples = if n_samples > 0 {
        model
            .function_samples(xs.as_ref(), n_samples, cfg.seed)?
            .map(|f| {
                (0..f.ncols())
                    .map(|j| {
                        (0..f.nrows())
                            .map(|i| st.y_mean[0] + st.y_std[0] * f[(i, j)])
                            .collect()
                    })
                    .collect()
            })
    } else {
        None
    };
    Ok(Curve1d {
        x: x.to_vec(),
        mean: (0..x.len()).map(|i| mean[(i, 0)]).collect(),
        lower: (0..x.len()).map(|i| lo[(i, 0)]).collect(),
        upper: (0..x.len()).map(|i| hi[(i, 0)]).collect(),
        samples,
    })
}

type PlotResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn ensure_parent(path: &Path) -> Result<()> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => std::fs::create_dir_all(dir).map_err(|e| BenchError::output(dir, e)),
        None => Ok(()),
    }
}

fn finite_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (-1.0, 1.0);
    }
    let pad = 0.05 * (hi - lo).max(1e-9);
    (lo - pad, hi + pad)
}

const SAMPLE_COLOURS: [RGBColor; 5] = [
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
];

/// Draws a 1-D predictive: the 95 % band (shaded), the mean (line), function samples (thin
/// lines, if any), training points (crosses) and test points (circles). The y-axis is
/// clipped to the data range widened by the band at most 1.5× the data span on each side.
///
/// # Errors
/// [`BenchError::Output`] if the SVG cannot be written.
pub fn plot_predictive_1d(
    path: &Path,
    title: &str,
    curve: &Curve1d,
    train: (&[f64], &[f64]),
    test: (&[f64], &[f64]),
) -> Result<()> {
    ensure_parent(path)?;
    let draw = || -> PlotResult {
        let (x0, x1) = finite_range(curve.x.iter().copied().chain(train.0.iter().copied()));
        let (d0, d1) = finite_range(train.1.iter().chain(test.1).copied());
        let span = d1 - d0;
        let (b0, b1) = finite_range(curve.lower.iter().chain(&curve.upper).copied());
        let (y0, y1) = (b0.max(d0 - 1.5 * span), b1.min(d1 + 1.5 * span));
        let (y0, y1) = (y0.min(d0), y1.max(d1));
        let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        chart.configure_mesh().x_desc("x").y_desc("y").draw()?;
        let clip = |v: f64| v.clamp(y0, y1);
        let band = band_polygon(curve, clip);
        let band_colour = RGBColor(120, 100, 200);
        chart
            .draw_series(std::iter::once(Polygon::new(
                band,
                band_colour.mix(0.25).filled(),
            )))?
            .label("95 % predictive interval")
            .legend(move |(x, y)| {
                Rectangle::new(
                    [(x, y - 5), (x + 18, y + 5)],
                    band_colour.mix(0.25).filled(),
                )
            });
        if let Some(samples) = &curve.samples {
            for (k, s) in samples.iter().enumerate() {
                let colour = SAMPLE_COLOURS[k % SAMPLE_COLOURS.len()];
                let series = chart.draw_series(LineSeries::new(
                    curve.x.iter().zip(s).map(|(&x, &v)| (x, clip(v))),
                    colour.stroke_width(1),
                ))?;
                if k == 0 {
                    series
                        .label("posterior function samples")
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(1))
                        });
                }
            }
        }
        chart
            .draw_series(LineSeries::new(
                curve.x.iter().zip(&curve.mean).map(|(&x, &m)| (x, clip(m))),
                RED.stroke_width(2),
            ))?
            .label("predictive mean")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED.stroke_width(2)));
        chart
            .draw_series(
                train
                    .0
                    .iter()
                    .zip(train.1)
                    .map(|(&x, &y)| Cross::new((x, y), 3, BLACK.stroke_width(1))),
            )?
            .label("training points")
            .legend(|(x, y)| Cross::new((x + 9, y), 3, BLACK.stroke_width(1)));
        chart
            .draw_series(
                test.0
                    .iter()
                    .zip(test.1)
                    .map(|(&x, &y)| Circle::new((x, y), 3, BLUE.stroke_width(1))),
            )?
            .label("test points")
            .legend(|(x, y)| Circle::new((x + 9, y), 3, BLUE.stroke_width(1)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| BenchError::output(path, e))
}

/// The outline of the predictive band: the upper bounds left to right, then the lower
/// bounds right to left, each clipped by `clip`.
fn band_polygon(curve: &Curve1d, clip: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    let upper = curve
        .x
        .iter()
        .zip(&curve.upper)
        .map(|(&x, &u)| (x, clip(u)));
    let lower = curve.x.iter().zip(&curve.lower).rev();
    let lower: Vec<(f64, f64)> = lower.map(|(&x, &l)| (x, clip(l))).collect();
    upper.chain(lower).collect()
}

/// Draws calibration curves (nominal vs empirical central-interval coverage), one line
/// per `(label, points)`, with the diagonal of perfect calibration.
///
/// # Errors
/// [`BenchError::Output`] if the SVG cannot be written.
pub fn plot_calibration(
    path: &Path,
    title: &str,
    curves: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    ensure_parent(path)?;
    let draw = || -> PlotResult {
        let root = SVGBackend::new(path, (640, 600)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..1.0, 0.0..1.0)?;
        chart
            .configure_mesh()
            .x_desc("nominal coverage of central interval")
            .y_desc("empirical coverage (test set)")
            .draw()?;
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, 0.0), (1.0, 1.0)],
                BLACK.mix(0.5).stroke_width(1),
            ))?
            .label("ideal")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.5)));
        for (k, (label, pts)) in curves.iter().enumerate() {
            let colour = Palette99::pick(k).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 2, colour.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| BenchError::output(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predictive_plot_draws_band_samples_and_points() {
        let x: Vec<f64> = (0..50).map(|i| i as f64 / 10.0 - 2.5).collect();
        let mean: Vec<f64> = x.iter().map(|v| v.signum()).collect();
        let curve = Curve1d {
            lower: mean.iter().map(|m| m - 0.2).collect(),
            upper: mean.iter().map(|m| m + 0.2).collect(),
            samples: Some(vec![mean.iter().map(|m| m + 0.05).collect(); 3]),
            x: x.clone(),
            mean,
        };
        let dir = std::env::temp_dir().join(format!("dgp-bench-plot-{}", std::process::id()));
        let path = dir.join("sub").join("p.svg");
        plot_predictive_1d(
            &path,
            "t",
            &curve,
            (&[-1.0, 1.0], &[-1.0, 1.0]),
            (&[0.5], &[1.0]),
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for label in [
            "95 % predictive interval",
            "posterior function samples",
            "predictive mean",
            "training points",
            "test points",
        ] {
            assert!(svg.contains(label), "{label} missing");
        }
        let cal = dir.join("c.svg");
        plot_calibration(&cal, "c", &[("m".into(), vec![(0.0, 0.0), (1.0, 1.0)])]).unwrap();
        assert!(std::fs::read_to_string(&cal).unwrap().contains("ideal"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn calibration_of_uniform_pit_is_the_diagonal() {
        // PIT values on a fine regular grid are (close to) uniform: coverage ≈ level.
        let pit: Vec<f64> = (0..10_000).map(|i| (i as f64 + 0.5) / 10_000.0).collect();
        for (l, c) in calibration_curve(&pit, &calibration_levels()) {
            assert!((l - c).abs() <= 1e-4, "level {l} coverage {c}");
        }
        // All PIT values at 0.5 (overdispersed model): every interval covers everything.
        let c = calibration_curve(&[0.5; 10], &[0.0, 0.5, 1.0]);
        assert_eq!(c, vec![(0.0, 1.0), (0.5, 1.0), (1.0, 1.0)]);
    }
}
