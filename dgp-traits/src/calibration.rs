//! Variance calibration of a predictive on held-out rows: the scale `c` that maximises the
//! held-out log density when every mixture component's variance is multiplied by `c`
//! (one parameter, fitted by Brent's method on `log c`; "temperature scaling" of Guo et al.
//! 2017 for Gaussian mixtures).
//!
//! Used where a training objective calibrates its variances on the training rows
//! themselves and so under-states the error on new points: the predictive log-likelihood
//! of eq. (21) of the DSPP paper on small data sets (`dgp_dspp::train`).
//!
//! ```
//! use dgp_traits::calibration::{scale_variances, variance_scale};
//! use dgp_traits::predictive::Predictive;
//! use faer::Mat;
//! // Unit-variance predictive for residuals of variance 4: the best scale is 4.
//! let n = 400;
//! let pred = Predictive::single_gaussian(Mat::zeros(n, 1), Mat::from_fn(n, 1, |_, _| 1.0))?;
//! let y = Mat::from_fn(n, 1, |i, _| if i % 2 == 0 { 2.0 } else { -2.0 });
//! let c = variance_scale(&pred, y.as_ref())?;
//! assert!((c - 4.0).abs() < 1e-6);
//! let scaled = scale_variances(&pred, c)?;
//! assert!((scaled.variances()[0][(0, 0)] - 4.0).abs() < 1e-6);
//! # Ok::<(), dgp_core::Error>(())
//! ```

use crate::predictive::Predictive;
use argmin::core::{CostFunction, Executor};
use argmin::solver::brent::BrentOpt;
use dgp_core::special::{gaussian_log_density, log_sum_exp};
use dgp_core::{Error, Result};
use faer::{Mat, MatRef};

/// Search interval of `log c`: scales between e⁻¹² ≈ 6·10⁻⁶ and e¹² ≈ 1.6·10⁵.
pub const LOG_SCALE_BOUND: f64 = 12.0;

/// Absolute tolerance of Brent's method on `log c` (plus √ε relative).
const LOG_TOL: f64 = 1e-10;

/// Brent iterations (the interval shrinks to about 1e-8 of `log c` well before this).
const MAX_ITERS: u64 = 200;

/// The mixture's (log weights, means, variances, targets) cached for the search.
struct HeldOut<'a> {
    log_w: Vec<f64>,
    pred: &'a Predictive,
    y: MatRef<'a, f64>,
}

impl HeldOut<'_> {
    /// Negative total log density with every variance multiplied by `exp(t)`.
    fn neg_log_density(&self, t: f64) -> f64 {
        let c = t.exp();
        let (means, vars) = (self.pred.means(), self.pred.variances());
        let mut terms = vec![0.0; self.log_w.len()];
        let mut total = 0.0;
        for i in 0..self.y.nrows() {
            for (s, term) in terms.iter_mut().enumerate() {
                let mut acc = self.log_w[s];
                if acc > f64::NEG_INFINITY {
                    for p in 0..means.len() {
                        acc += gaussian_log_density(
                            self.y[(i, p)],
                            means[p][(i, s)],
                            c * vars[p][(i, s)],
                        );
                    }
                }
                *term = acc;
            }
            total += log_sum_exp(&terms);
        }
        -total
    }
}

impl CostFunction for HeldOut<'_> {
    type Param = f64;
    type Output = f64;

    fn cost(&self, t: &f64) -> std::result::Result<f64, argmin::core::Error> {
        Ok(self.neg_log_density(*t))
    }
}

/// The variance scale `c ∈ [e^−12, e^12]` maximising `Σ_i log Σ_s w_s Π_p N(y_ip | μ_isp,
/// c·v_isp)` over the rows of `y` (N×P, the predictive's points and outputs).
///
/// # Errors
/// [`Error::Shape`] / [`Error::NonFinite`] for targets that do not fit the predictive;
/// [`Error::Config`] for a predictive with class probabilities (no variances to scale);
/// [`Error::Numerical`] when the search fails.
pub fn variance_scale(pred: &Predictive, y: MatRef<'_, f64>) -> Result<f64> {
    if pred.class_probs().is_some() {
        return Err(Error::Unsupported(
            "variance_scale: a classification predictive has no variances to calibrate".into(),
        ));
    }
    // Checks the shape and finiteness of `y` against the predictive.
    pred.log_density(y)?;
    let problem = HeldOut {
        log_w: pred.weights().iter().map(|w| w.ln()).collect(),
        pred,
        y,
    };
    let res = Executor::new(
        problem,
        BrentOpt::new(-LOG_SCALE_BOUND, LOG_SCALE_BOUND)
            .set_tolerance(f64::EPSILON.sqrt(), LOG_TOL),
    )
    .configure(|s| s.max_iters(MAX_ITERS))
    .run()
    .map_err(|e| Error::Numerical(format!("variance_scale: {e}")))?;
    let t = res
        .state()
        .best_param
        .ok_or_else(|| Error::Numerical("variance_scale: no best scale".into()))?;
    if !t.is_finite() {
        return Err(Error::Numerical(format!("variance_scale: log scale {t}")));
    }
    Ok(t.exp())
}

/// `pred` with every component variance multiplied by `c` (means and weights unchanged).
///
/// # Errors
/// [`Error::Config`] for `c` not finite and > 0 or a predictive with class probabilities.
pub fn scale_variances(pred: &Predictive, c: f64) -> Result<Predictive> {
    if !(c.is_finite() && c > 0.0) {
        return Err(Error::config(
            "scale",
            format!("the scale must be finite and > 0, got {c}"),
        ));
    }
    if pred.class_probs().is_some() {
        return Err(Error::Unsupported(
            "scale_variances: a classification predictive has no variances to scale".into(),
        ));
    }
    let vars: Vec<Mat<f64>> = pred
        .variances()
        .iter()
        .map(|v| Mat::from_fn(v.nrows(), v.ncols(), |i, j| c * v[(i, j)]))
        .collect();
    Predictive::new(pred.weights().to_vec(), pred.means().to_vec(), vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_of_a_mixture_is_its_held_out_optimum() {
        // Two components at ±1 with variances 0.5; targets spread more widely.
        let n = 200;
        let means = Mat::from_fn(n, 2, |_, s| if s == 0 { -1.0 } else { 1.0 });
        let vars = Mat::from_fn(n, 2, |_, _| 0.5);
        let pred = Predictive::new(vec![0.3, 0.7], vec![means], vec![vars]).unwrap();
        let y = Mat::from_fn(n, 1, |i, _| (i as f64 / n as f64 - 0.5) * 8.0);
        let c = variance_scale(&pred, y.as_ref()).unwrap();
        let ld = |c: f64| -> f64 {
            scale_variances(&pred, c)
                .unwrap()
                .log_density(y.as_ref())
                .unwrap()
                .iter()
                .sum()
        };
        // A maximum: the density falls on both sides.
        assert!(ld(c) > ld(c * 1.01) && ld(c) > ld(c / 1.01), "c = {c}");
        assert!(c > 1.0, "wider targets need a larger scale, got {c}");
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let pred =
            Predictive::single_gaussian(Mat::zeros(3, 1), Mat::from_fn(3, 1, |_, _| 1.0)).unwrap();
        assert!(matches!(
            variance_scale(&pred, Mat::<f64>::zeros(2, 1).as_ref()),
            Err(Error::Shape { .. })
        ));
        let nan = Mat::from_fn(3, 1, |_, _| f64::NAN);
        assert!(variance_scale(&pred, nan.as_ref()).is_err());
        assert!(matches!(scale_variances(&pred, 0.0), Err(Error::Config(_))));
        assert!(matches!(
            scale_variances(&pred, f64::INFINITY),
            Err(Error::Config(_))
        ));
    }
}
