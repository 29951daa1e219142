//! Evaluation metrics on a [`Predictive`] and targets `y` (N×P), protocol §3.
//!
//! All metrics are computed in the units of their inputs: pass a predictive and targets in
//! original units (see [`Predictive::unstandardize`]) for DSVI/Structured-style tables, or
//! both standardised for DSPP-style tables. For P > 1 the per-output metrics (RMSE, CRPS,
//! coverage, PIT) treat every (point, output) pair as one scalar prediction from the
//! output's marginal mixture Σ_s w_s N(μ_nsp, v_nsp) and average over all N·P pairs; the NLL
//! uses the joint density over the P outputs.
//!
//! Interval coverage. The central interval at level ℓ of a continuous, strictly increasing
//! mixture CDF F is [F⁻¹((1−ℓ)/2), F⁻¹((1+ℓ)/2)], and y lies in it exactly when
//! (1−ℓ)/2 ≤ F(y) ≤ (1+ℓ)/2. [`coverage`] therefore evaluates the mixture CDF at the
//! target (the PIT value) once instead of inverting F twice; [`mixture_quantile`] and
//! [`central_intervals`] compute the interval end points themselves by bisection on F
//! (for plots), and the tests check that both routes agree.

use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

use crate::predictive::Predictive;
use dgp_core::special::{FRAC_1_SQRT_2PI, norm_cdf, norm_cdf_both, norm_pdf, norm_ppf};
use dgp_core::{Error, Result};

/// Mean negative log predictive density, −(1/N) Σ_n log p(y_n), with the per-point
/// log-sum-exp over components of [`Predictive::log_density`].
///
/// # Errors
/// [`Error::Shape`] if `y` is not N×P; [`Error::NonFinite`] for NaN/∞ targets.
pub fn nll(pred: &Predictive, y: MatRef<'_, f64>) -> Result<f64> {
    let ld = pred.log_density(y)?;
    Ok(-ld.iter().sum::<f64>() / ld.len() as f64)
}

/// Root mean squared error of the mixture mean Σ_s w_s μ_s over all N·P entries.
///
/// # Errors
/// As [`nll`].
pub fn rmse(pred: &Predictive, y: MatRef<'_, f64>) -> Result<f64> {
    pred.check_targets(y, "rmse (targets)")?;
    let m = pred.mean();
    let mut sse = 0.0;
    for p in 0..y.ncols() {
        for i in 0..y.nrows() {
            sse += (m[(i, p)] - y[(i, p)]).powi(2);
        }
    }
    Ok((sse / (y.nrows() * y.ncols()) as f64).sqrt())
}

/// A(m, v) = 2√v φ(m/√v) + m (2Φ(m/√v) − 1) = E|X| for X ~ N(m, v) (Grimit et al. 2006).
fn a_fn(m: f64, v: f64) -> f64 {
    let sd = v.sqrt();
    let z = m / sd;
    let (c, sf) = norm_cdf_both(z);
    2.0 * sd * norm_pdf(z) + m * (c - sf)
}

/// CRPS of one Gaussian N(mean, sd²) at y:
/// σ [z (2Φ(z) − 1) + 2φ(z) − 1/√π], z = (y − μ)/σ (Gneiting & Raftery 2007).
pub fn crps_gaussian(y: f64, mean: f64, sd: f64) -> f64 {
    let z = (y - mean) / sd;
    let (c, sf) = norm_cdf_both(z);
    sd * (z * (c - sf) + 2.0 * norm_pdf(z) - 1.0 / std::f64::consts::PI.sqrt())
}

/// CRPS of the Gaussian mixture Σ_s w_s N(μ_s, v_s) at y, in closed form (Grimit et al.
/// 2006; protocol §3):
///
/// CRPS = Σ_s w_s A(y − μ_s, v_s) − ½ Σ_s Σ_t w_s w_t A(μ_s − μ_t, v_s + v_t),
///
/// with A as in [`crps_gaussian`]'s derivation. The double sum uses A(−m, v) = A(m, v), so
/// it costs S(S+1)/2 evaluations: O(S²) per point.
///
/// # Panics
/// If the three slices differ in length.
pub fn crps_mixture(weights: &[f64], means: &[f64], vars: &[f64], y: f64) -> f64 {
    assert!(
        weights.len() == means.len() && means.len() == vars.len(),
        "crps_mixture: weights, means and variances must have equal lengths"
    );
    let s = weights.len();
    let mut first = 0.0;
    let mut pair = 0.0;
    for a in 0..s {
        let wa = weights[a];
        if wa == 0.0 {
            continue;
        }
        first += wa * a_fn(y - means[a], vars[a]);
        // A(0, 2v) = 2√(2v) φ(0).
        pair += wa * wa * 2.0 * (2.0 * vars[a]).sqrt() * FRAC_1_SQRT_2PI;
        for b in a + 1..s {
            let wb = weights[b];
            if wb == 0.0 {
                continue;
            }
            pair += 2.0 * wa * wb * a_fn(means[a] - means[b], vars[a] + vars[b]);
        }
    }
    first - 0.5 * pair
}

/// Mixture CDF F(t) = Σ_s w_s Φ((t − μ_s)/√v_s).
///
/// # Panics
/// If the three slices differ in length.
pub fn mixture_cdf(weights: &[f64], means: &[f64], vars: &[f64], t: f64) -> f64 {
    assert!(
        weights.len() == means.len() && means.len() == vars.len(),
        "mixture_cdf: weights, means and variances must have equal lengths"
    );
    weights
        .iter()
        .zip(means)
        .zip(vars)
        .map(|((&w, &m), &v)| w * norm_cdf((t - m) / v.sqrt()))
        .sum()
}

/// The q-quantile F⁻¹(q) of a Gaussian mixture, by bisection on [`mixture_cdf`].
///
/// The bracket is [min_s(μ_s + σ_s Φ⁻¹(q)), max_s(μ_s + σ_s Φ⁻¹(q))]: at its left end every
/// component CDF is ≤ q, at its right end ≥ q, so F crosses q inside. Bisection runs until
/// the midpoint is no longer representable between the ends (full double precision, at
/// most ~1100 halvings, typically ~60). Returns ∓∞ for q = 0 / 1 and NaN outside [0, 1].
///
/// # Panics
/// If the three slices differ in length or are empty.
pub fn mixture_quantile(weights: &[f64], means: &[f64], vars: &[f64], q: f64) -> f64 {
    assert!(
        !weights.is_empty() && weights.len() == means.len() && means.len() == vars.len(),
        "mixture_quantile: weights, means and variances must be non-empty, of equal lengths"
    );
    let z = norm_ppf(q);
    if !z.is_finite() {
        return z;
    }
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for ((&w, &m), &v) in weights.iter().zip(means).zip(vars) {
        if w > 0.0 {
            let x = m + v.sqrt() * z;
            lo = lo.min(x);
            hi = hi.max(x);
        }
    }
    loop {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            return mid;
        }
        if mixture_cdf(weights, means, vars, mid) < q {
            lo = mid;
        } else {
            hi = mid;
        }
    }
}

fn check_level(level: f64) -> Result<()> {
    if level > 0.0 && level < 1.0 {
        Ok(())
    } else {
        Err(Error::config(
            "level",
            format!("interval level must be in (0, 1), got {level}"),
        ))
    }
}

/// Probability integral transform values F_np(y_np) = Σ_s w_s Φ((y_np − μ_nsp)/√v_nsp), N×P.
/// For a calibrated predictive they are uniform on [0, 1].
///
/// # Errors
/// As [`nll`].
pub fn pit(pred: &Predictive, y: MatRef<'_, f64>) -> Result<Mat<f64>> {
    per_marginal(pred, y, "pit (targets)", mixture_cdf)
}

/// `f(w, μ, v, y_np)` on the marginal mixture (weights `w`, component means `μ` and
/// variances `v`) of every (point, output) pair, N×P, after checking the targets.
fn per_marginal(
    pred: &Predictive,
    y: MatRef<'_, f64>,
    what: &str,
    f: impl Fn(&[f64], &[f64], &[f64], f64) -> f64,
) -> Result<Mat<f64>> {
    pred.check_targets(y, what)?;
    let s = pred.n_components();
    let (mut mu, mut var) = (vec![0.0; s], vec![0.0; s]);
    let mut out = Mat::zeros(y.nrows(), y.ncols());
    for p in 0..y.ncols() {
        for i in 0..y.nrows() {
            pred.marginal_into(i, p, &mut mu, &mut var);
            out[(i, p)] = f(pred.weights(), &mu, &var, y[(i, p)]);
        }
    }
    Ok(out)
}

/// Fraction of the N·P targets inside the central `level` interval of their marginal
/// mixture, evaluated as (1−ℓ)/2 ≤ PIT ≤ (1+ℓ)/2 (see the module docs).
///
/// # Errors
/// [`Error::Config`] for `level ∉ (0, 1)`; otherwise as [`nll`].
pub fn coverage(pred: &Predictive, y: MatRef<'_, f64>, level: f64) -> Result<f64> {
    check_level(level)?;
    let u = pit(pred, y)?;
    Ok(coverage_from_pit(u.as_ref(), level))
}

fn coverage_from_pit(u: MatRef<'_, f64>, level: f64) -> f64 {
    let (lo, hi) = (0.5 * (1.0 - level), 0.5 * (1.0 + level));
    let mut inside = 0usize;
    for p in 0..u.ncols() {
        for i in 0..u.nrows() {
            if (lo..=hi).contains(&u[(i, p)]) {
                inside += 1;
            }
        }
    }
    inside as f64 / (u.nrows() * u.ncols()) as f64
}

/// End points of the central `level` intervals, `(lower, upper)`, each N×P, computed by
/// [`mixture_quantile`].
///
/// # Errors
/// [`Error::Config`] for `level ∉ (0, 1)`.
pub fn central_intervals(pred: &Predictive, level: f64) -> Result<(Mat<f64>, Mat<f64>)> {
    check_level(level)?;
    let (n, pdim, s) = (pred.n_points(), pred.n_outputs(), pred.n_components());
    let (mut mu, mut var) = (vec![0.0; s], vec![0.0; s]);
    let mut lower = Mat::zeros(n, pdim);
    let mut upper = Mat::zeros(n, pdim);
    for p in 0..pdim {
        for i in 0..n {
            pred.marginal_into(i, p, &mut mu, &mut var);
            lower[(i, p)] = mixture_quantile(pred.weights(), &mu, &var, 0.5 * (1.0 - level));
            upper[(i, p)] = mixture_quantile(pred.weights(), &mu, &var, 0.5 * (1.0 + level));
        }
    }
    Ok((lower, upper))
}

/// CRPS of every (point, output) pair, N×P ([`crps_mixture`] on the output's marginal).
///
/// # Errors
/// As [`nll`].
pub fn crps_per_point(pred: &Predictive, y: MatRef<'_, f64>) -> Result<Mat<f64>> {
    per_marginal(pred, y, "crps (targets)", crps_mixture)
}

/// Mean CRPS over all N·P (point, output) pairs (lower is better).
///
/// # Errors
/// As [`nll`].
pub fn crps(pred: &Predictive, y: MatRef<'_, f64>) -> Result<f64> {
    let c = crps_per_point(pred, y)?;
    Ok(mean_of(c.as_ref()))
}

fn mean_of(m: MatRef<'_, f64>) -> f64 {
    let mut s = 0.0;
    for j in 0..m.ncols() {
        for i in 0..m.nrows() {
            s += m[(i, j)];
        }
    }
    s / (m.nrows() * m.ncols()) as f64
}

/// The regression metrics of one test set, computed together by [`Metrics::compute`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Mean negative log predictive density ([`nll`]); the test log-likelihood is −nll.
    pub nll: f64,
    /// RMSE of the mixture mean ([`rmse`]).
    pub rmse: f64,
    /// Mean CRPS ([`crps`]).
    pub crps: f64,
    /// Coverage of the central 50 % intervals ([`coverage`]).
    pub cov50: f64,
    /// Coverage of the central 90 % intervals.
    pub cov90: f64,
    /// Coverage of the central 95 % intervals.
    pub cov95: f64,
}

impl Metrics {
    /// NLL, RMSE, CRPS and 50/90/95 % coverage of `pred` at `y` (N×P), in one pass over the
    /// marginals.
    ///
    /// # Errors
    /// As [`nll`].
    pub fn compute(pred: &Predictive, y: MatRef<'_, f64>) -> Result<Metrics> {
        let nll = nll(pred, y)?;
        let rmse = rmse(pred, y)?;
        let s = pred.n_components();
        let (mut mu, mut var) = (vec![0.0; s], vec![0.0; s]);
        let mut crps_sum = 0.0;
        let mut u = Mat::zeros(y.nrows(), y.ncols());
        for p in 0..y.ncols() {
            for i in 0..y.nrows() {
                pred.marginal_into(i, p, &mut mu, &mut var);
                crps_sum += crps_mixture(pred.weights(), &mu, &var, y[(i, p)]);
                u[(i, p)] = mixture_cdf(pred.weights(), &mu, &var, y[(i, p)]);
            }
        }
        Ok(Metrics {
            nll,
            rmse,
            crps: crps_sum / (y.nrows() * y.ncols()) as f64,
            cov50: coverage_from_pit(u.as_ref(), 0.5),
            cov90: coverage_from_pit(u.as_ref(), 0.9),
            cov95: coverage_from_pit(u.as_ref(), 0.95),
        })
    }
}

fn class_probs_for<'a>(pred: &'a Predictive, labels: &[usize]) -> Result<MatRef<'a, f64>> {
    let probs = pred
        .class_probs()
        .ok_or_else(|| Error::Unsupported("predictive has no class probabilities".into()))?;
    if labels.len() != probs.nrows() {
        return Err(Error::shape(
            "classification labels",
            probs.nrows(),
            labels.len(),
        ));
    }
    if let Some((i, &c)) = labels
        .iter()
        .enumerate()
        .find(|(_, c)| **c >= probs.ncols())
    {
        return Err(Error::config(
            "labels",
            format!(
                "label {c} of point {i} is not a class (C = {})",
                probs.ncols()
            ),
        ));
    }
    Ok(probs)
}

/// Classification accuracy: the fraction of points whose most probable class (ties to the
/// lower class index) equals the label.
///
/// # Errors
/// [`Error::Config`] if the predictive has no class probabilities or a label is ≥ C;
/// [`Error::Shape`] if `labels.len() != N`.
pub fn accuracy(pred: &Predictive, labels: &[usize]) -> Result<f64> {
    let probs = class_probs_for(pred, labels)?;
    let mut correct = 0usize;
    for (i, &label) in labels.iter().enumerate() {
        let mut best = 0;
        for c in 1..probs.ncols() {
            if probs[(i, c)] > probs[(i, best)] {
                best = c;
            }
        }
        if best == label {
            correct += 1;
        }
    }
    Ok(correct as f64 / labels.len() as f64)
}

/// Mean negative log probability of the true class, −(1/N) Σ_n log p_n(label_n).
/// A probability that underflowed to 0 is read as `f64::MIN_POSITIVE` (log ≈ −708), so the
/// result is always finite.
///
/// # Errors
/// As [`accuracy`].
pub fn class_nll(pred: &Predictive, labels: &[usize]) -> Result<f64> {
    let probs = class_probs_for(pred, labels)?;
    let total: f64 = labels
        .iter()
        .enumerate()
        .map(|(i, &c)| -probs[(i, c)].max(f64::MIN_POSITIVE).ln())
        .sum();
    Ok(total / labels.len() as f64)
}

/// Class labels from an N×1 target column holding the integers 0, 1, …, C−1 as floats.
///
/// # Errors
/// [`Error::Shape`] if `y` has more than one column; [`Error::Config`] for an entry that is
/// not a non-negative integer (e.g. ±1 coding: map it to 0/1 first).
pub fn labels_from_targets(y: MatRef<'_, f64>) -> Result<Vec<usize>> {
    if y.ncols() != 1 {
        return Err(Error::shape("labels_from_targets (columns)", 1, y.ncols()));
    }
    (0..y.nrows())
        .map(|i| {
            let v = y[(i, 0)];
            if v >= 0.0 && v.fract() == 0.0 && v < usize::MAX as f64 {
                Ok(v as usize)
            } else {
                Err(Error::config(
                    "labels",
                    format!("target {v} of row {i} is not a class label 0, 1, …"),
                ))
            }
        })
        .collect()
}
