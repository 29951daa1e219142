//! Fused tape operations of the multiclass likelihoods: K latent functions
//! `f = (f_0, …, f_{K−1})` per point and a label `y ∈ {0, …, K−1}`.
//!
//! Layout: labels are an `R × 1` column (integer-valued floats), the latent marginal means
//! and variances are `R × K` (column k = latent function k, independent Gaussians
//! `f_k ∼ N(μ_k, v_k)` as the last layer of a deep GP delivers them), and every operation
//! returns the `R × 1` column of per-point terms. The per-point derivatives with respect to
//! the K means and K variances are computed in the forward pass and cached for the
//! backward pass.
//!
//! # Robust-max (Hernández-Lobato et al. 2011)
//! `p(y | f) = 1 − ε` if `y = argmax_k f_k`, else `ε/(K − 1)`. With
//! `P_y = P(f_y > f_j ∀ j ≠ y) = E_{f_y} Π_{j≠y} Φ((f_y − μ_j)/√v_j)` (a one-dimensional
//! integral over the label's latent function, computed by probabilists' Gauss–Hermite
//! quadrature as GPflow's `RobustMax.prob_is_largest`):
//!
//! * expected log-likelihood `E log p(y | f) = P_y log(1 − ε) + (1 − P_y) log(ε/(K − 1))`;
//! * predictive probability `p(y) = P_y (1 − ε) + (1 − P_y) ε/(K − 1)`.
//!
//! Variances are floored at [`VAR_FLOOR`] (GPflow clips at the same value); below the
//! floor the variance gets no gradient. Unlike GPflow, the normal cdfs are not squashed
//! away from 0 and 1: both quantities are linear in `P_y`, so no logarithm of a cdf is
//! taken.
//!
//! # Softmax
//! `p(y | f) = exp(f_y) / Σ_k exp(f_k)`. `E log p(y | f) = μ_y − E log Σ_k exp(f_k)` has no
//! closed form or low-dimensional quadrature for K > 2, so the second term is estimated by
//! Monte Carlo with draws supplied by the caller (fixed standard-normal vectors ε_s, used
//! as `f_s = μ + √v ⊙ ε_s`, optionally with their antithetic partners `−ε_s`): the value is
//! deterministic given the draws, and the gradient is the exact derivative of that
//! estimate (the reparameterisation gradient).

use crate::quadrature::{GaussHermite, HermiteForm};
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use dgp_core::special::{norm_cdf, norm_pdf};
use faer::{Mat, MatRef};

/// Variances below this are treated as this value (and get no gradient).
pub const VAR_FLOOR: f64 = 1e-10;

/// `√max(v, VAR_FLOOR)` and whether `v` is above the floor (receives a gradient).
#[inline]
fn sd_of(v: f64) -> (f64, bool) {
    if v > VAR_FLOOR {
        (v.sqrt(), true)
    } else {
        (VAR_FLOOR.sqrt(), false)
    }
}

/// Reads a label column entry as a class index.
///
/// # Panics
/// When the entry is not an integer in `0..k` (labels are validated before they reach
/// the tape; see `Likelihood::check_targets`).
#[track_caller]
pub(crate) fn class_index(y: f64, k: usize) -> usize {
    assert!(
        y >= 0.0 && y.fract() == 0.0 && (y as usize) < k,
        "label {y} is not a class index in 0..{k}"
    );
    y as usize
}

/// `P_y = E_{f_y ∼ N(μ_y, v_y)} Π_{j≠y} Φ((f_y − μ_j)/s_j)` by Gauss–Hermite on `rule`
/// (probabilists'), with its derivatives with respect to every μ_k and v_k written into
/// `d_mu`, `d_var` (overwritten) when they are `Some`. `scratch` holds 2K values.
fn prob_is_largest_parts(
    label: usize,
    mu: &[f64],
    var: &[f64],
    rule: &GaussHermite,
    mut grads: Option<(&mut [f64], &mut [f64])>,
    scratch: &mut Vec<f64>,
) -> f64 {
    let k = mu.len();
    let (sd_y, grad_vy) = sd_of(var[label]);
    scratch.clear();
    scratch.resize(3 * k + 1, 0.0);
    let (cdf, rest) = scratch.split_at_mut(k);
    let (pdf, prefix) = rest.split_at_mut(k);
    let sds: Vec<f64> = var.iter().map(|&v| sd_of(v).0).collect();
    if let Some((dm, dv)) = grads.as_mut() {
        dm.iter_mut().for_each(|x| *x = 0.0);
        dv.iter_mut().for_each(|x| *x = 0.0);
    }
    let mut p = 0.0;
    let mut d_mu_y = 0.0;
    let mut d_sd_y = 0.0;
    for (&xi, &w) in rule.nodes.iter().zip(&rule.weights) {
        let x = mu[label] + sd_y * xi;
        for j in 0..k {
            if j == label {
                cdf[j] = 1.0;
                pdf[j] = 0.0;
            } else {
                let z = (x - mu[j]) / sds[j];
                cdf[j] = norm_cdf(z);
                if grads.is_some() {
                    pdf[j] = norm_pdf(z);
                }
            }
        }
        // prefix[j] = Π_{i<j} Φ_i; the product without j is prefix[j] · suffix_{>j}.
        prefix[0] = 1.0;
        for j in 0..k {
            prefix[j + 1] = prefix[j] * cdf[j];
        }
        p += w * prefix[k];
        let Some((dm, dv)) = grads.as_mut() else {
            continue;
        };
        let mut suffix = 1.0;
        for j in (0..k).rev() {
            if j != label {
                // term = ω ∂/∂f_y of Φ_j times the other factors.
                let term = w * prefix[j] * suffix * pdf[j] / sds[j];
                let z = (x - mu[j]) / sds[j];
                dm[j] -= term;
                dv[j] -= term * z / (2.0 * sds[j]);
                d_mu_y += term;
                d_sd_y += term * xi;
            }
            suffix *= cdf[j];
        }
    }
    if let Some((dm, dv)) = grads {
        for j in 0..k {
            if j != label && !sd_of(var[j]).1 {
                dv[j] = 0.0;
            }
        }
        dm[label] = d_mu_y;
        dv[label] = if grad_vy { d_sd_y / (2.0 * sd_y) } else { 0.0 };
    }
    p
}

/// `P(f_label is the largest)` for independent `f_k ∼ N(μ_k, v_k)`, by Gauss–Hermite
/// quadrature on `rule` over `f_label` (see the module docs).
pub(crate) fn prob_is_largest(label: usize, mu: &[f64], var: &[f64], rule: &GaussHermite) -> f64 {
    prob_is_largest_parts(label, mu, var, rule, None, &mut Vec::new())
}

/// `(log(1 − ε), log(ε/(K − 1)))`, the log-probabilities of the robust-max link.
#[inline]
pub(crate) fn robust_max_logs(eps: f64, k: usize) -> (f64, f64) {
    ((1.0 - eps).ln(), (eps / (k - 1) as f64).ln())
}

/// The robust-max predictive class probabilities of one point,
/// `p(c) = P_c (1 − ε) + (1 − P_c) ε/(K − 1)`, renormalised to sum to 1 (Σ_c P_c = 1
/// holds exactly for the integral and to quadrature accuracy for the rule).
pub(crate) fn robust_max_probs(mu: &[f64], var: &[f64], eps: f64, rule: &GaussHermite) -> Vec<f64> {
    let k = mu.len();
    let off = eps / (k - 1) as f64;
    let mut scratch = Vec::new();
    let mut probs: Vec<f64> = (0..k)
        .map(|c| {
            let p = prob_is_largest_parts(c, mu, var, rule, None, &mut scratch).clamp(0.0, 1.0);
            p * (1.0 - eps) + (1.0 - p) * off
        })
        .collect();
    let total: f64 = probs.iter().sum();
    probs.iter_mut().for_each(|p| *p /= total);
    probs
}

/// Per-sample softmax of `f_s = μ + s ⊙ ε` (s = standard deviations) into `p`, returning
/// `log Σ_k exp(f_sk)`.
#[inline]
fn softmax_at(mu: &[f64], sds: &[f64], eps: &[f64], sign: f64, p: &mut [f64]) -> f64 {
    let k = mu.len();
    let mut mx = f64::NEG_INFINITY;
    for j in 0..k {
        let f = mu[j] + sign * sds[j] * eps[j];
        p[j] = f;
        mx = mx.max(f);
    }
    let mut s = 0.0;
    for pj in p.iter_mut() {
        *pj = (*pj - mx).exp();
        s += *pj;
    }
    for pj in p.iter_mut() {
        *pj /= s;
    }
    mx + s.ln()
}

/// Iterates the Monte Carlo evaluations of one point: for each draw row `ε` of `draws`
/// (`S₀ × K`) and each sign (+ only, or ± when `antithetic`), calls `visit(lse, p, ε, sign)`
/// with the softmax `p` and log-sum-exp of `μ + sign·√v ⊙ ε`. Returns the number of
/// evaluations.
fn for_each_softmax_sample(
    mu: &[f64],
    sds: &[f64],
    draws: MatRef<'_, f64>,
    antithetic: bool,
    p: &mut [f64],
    e: &mut [f64],
    mut visit: impl FnMut(f64, &[f64], &[f64], f64),
) -> usize {
    let k = mu.len();
    let signs: &[f64] = if antithetic { &[1.0, -1.0] } else { &[1.0] };
    for r in 0..draws.nrows() {
        for j in 0..k {
            e[j] = draws[(r, j)];
        }
        for &sign in signs {
            let lse = softmax_at(mu, sds, e, sign, p);
            visit(lse, p, e, sign);
        }
    }
    draws.nrows() * signs.len()
}

/// The softmax Monte Carlo predictive class probabilities of one point,
/// `p(c) ≈ (1/S) Σ_s softmax_c(μ + √v ⊙ ε_s)` over the draw rows of `draws` (and their
/// antithetic partners when `antithetic`).
pub(crate) fn softmax_probs(
    mu: &[f64],
    var: &[f64],
    draws: MatRef<'_, f64>,
    antithetic: bool,
) -> Vec<f64> {
    let k = mu.len();
    let sds: Vec<f64> = var.iter().map(|&v| sd_of(v).0).collect();
    let (mut p, mut e) = (vec![0.0; k], vec![0.0; k]);
    let mut acc = vec![0.0; k];
    let n = for_each_softmax_sample(mu, &sds, draws, antithetic, &mut p, &mut e, |_, p, _, _| {
        for j in 0..k {
            acc[j] += p[j];
        }
    });
    acc.iter_mut().for_each(|a| *a /= n as f64);
    acc
}

/// `(value, ∂/∂μ, ∂/∂v)` of one point's Monte Carlo estimate of the softmax expected
/// log-likelihood `μ_y − (1/S) Σ_s lse(μ + √v ⊙ ε_s)`.
fn softmax_ell_parts(
    label: usize,
    mu: &[f64],
    var: &[f64],
    draws: MatRef<'_, f64>,
    antithetic: bool,
    d_mu: &mut [f64],
    d_var: &mut [f64],
) -> f64 {
    let k = mu.len();
    let sd: Vec<(f64, bool)> = var.iter().map(|&v| sd_of(v)).collect();
    let sds: Vec<f64> = sd.iter().map(|s| s.0).collect();
    let (mut p, mut e) = (vec![0.0; k], vec![0.0; k]);
    d_mu.iter_mut().for_each(|x| *x = 0.0);
    d_var.iter_mut().for_each(|x| *x = 0.0);
    let mut lse_sum = 0.0;
    let n = for_each_softmax_sample(
        mu,
        &sds,
        draws,
        antithetic,
        &mut p,
        &mut e,
        |lse, p, e, sign| {
            lse_sum += lse;
            for j in 0..k {
                d_mu[j] -= p[j];
                d_var[j] -= p[j] * sign * e[j];
            }
        },
    );
    let inv = 1.0 / n as f64;
    for j in 0..k {
        d_mu[j] *= inv;
        d_var[j] = if sd[j].1 {
            d_var[j] * inv / (2.0 * sds[j])
        } else {
            0.0
        };
    }
    d_mu[label] += 1.0;
    mu[label] - lse_sum * inv
}

/// `(value, ∂/∂μ, ∂/∂v)` of one point's Monte Carlo log predictive
/// `log((1/S) Σ_s softmax_y(μ + √v ⊙ ε_s))`.
fn softmax_log_pred_parts(
    label: usize,
    mu: &[f64],
    var: &[f64],
    draws: MatRef<'_, f64>,
    antithetic: bool,
    d_mu: &mut [f64],
    d_var: &mut [f64],
) -> f64 {
    let k = mu.len();
    let sd: Vec<(f64, bool)> = var.iter().map(|&v| sd_of(v)).collect();
    let sds: Vec<f64> = sd.iter().map(|s| s.0).collect();
    let (mut p, mut e) = (vec![0.0; k], vec![0.0; k]);
    d_mu.iter_mut().for_each(|x| *x = 0.0);
    d_var.iter_mut().for_each(|x| *x = 0.0);
    let mut total = 0.0;
    let n = for_each_softmax_sample(
        mu,
        &sds,
        draws,
        antithetic,
        &mut p,
        &mut e,
        |_, p, e, sign| {
            let py = p[label];
            total += py;
            // ∂p_y/∂f_j = p_y (δ_yj − p_j).
            for j in 0..k {
                let d = py * (if j == label { 1.0 } else { 0.0 } - p[j]);
                d_mu[j] += d;
                d_var[j] += d * sign * e[j];
            }
        },
    );
    let mean = (total / n as f64).max(f64::MIN_POSITIVE);
    let scale = 1.0 / (n as f64 * mean);
    for j in 0..k {
        d_mu[j] *= scale;
        d_var[j] = if sd[j].1 {
            d_var[j] * scale / (2.0 * sds[j])
        } else {
            0.0
        };
    }
    mean.ln()
}

/// Backward rule of the multiclass operations: inputs (labels `R × 1`, means `R × K`,
/// variances `R × K`), output `R × 1`, per-entry derivatives cached.
struct RowwiseOp {
    name: &'static str,
    d_mu: Mat<f64>,
    d_var: Mat<f64>,
}

impl Backward for RowwiseOp {
    fn name(&self) -> &'static str {
        self.name
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let g = ctx.grad();
        for (input, d) in [(1usize, &self.d_mu), (2usize, &self.d_var)] {
            if sink.wants(input) {
                let mut acc = sink.acc(input);
                for j in 0..d.ncols() {
                    for i in 0..d.nrows() {
                        acc[(i, j)] += g[(i, 0)] * d[(i, j)];
                    }
                }
            }
        }
    }
}

#[track_caller]
fn check_shapes(t: &Tape, what: &str, y: Var, mu: Var, var: Var) -> (usize, usize) {
    let (r, k) = t.shape(mu);
    assert_eq!(t.shape(y), (r, 1), "{what}: labels must be an R×1 column");
    assert_eq!(t.shape(var), (r, k), "{what}: var and mu shapes differ");
    assert!(k >= 2, "{what}: needs K ≥ 2 latent functions, got {k}");
    (r, k)
}

impl Tape {
    /// Records a multiclass operation from `parts(row, label, μ_row, v_row, d_μ, d_v) -> value`.
    fn record_rowwise(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        name: &'static str,
        mut parts: impl FnMut(usize, usize, &[f64], &[f64], &mut [f64], &mut [f64]) -> f64,
    ) -> Var {
        let (yv, mv, vv) = (self.value(y), self.value(mu), self.value(var));
        let (r, k) = (mv.nrows(), mv.ncols());
        let mut out = Mat::zeros(r, 1);
        let mut d_mu = Mat::zeros(r, k);
        let mut d_var = Mat::zeros(r, k);
        let (mut m_row, mut v_row) = (vec![0.0; k], vec![0.0; k]);
        let (mut dm_row, mut dv_row) = (vec![0.0; k], vec![0.0; k]);
        for i in 0..r {
            for j in 0..k {
                m_row[j] = mv[(i, j)];
                v_row[j] = vv[(i, j)];
            }
            let label = class_index(yv[(i, 0)], k);
            out[(i, 0)] = parts(i, label, &m_row, &v_row, &mut dm_row, &mut dv_row);
            for j in 0..k {
                d_mu[(i, j)] = dm_row[j];
                d_var[(i, j)] = dv_row[j];
            }
        }
        self.push(out, &[y, mu, var], RowwiseOp { name, d_mu, d_var })
    }

    /// Per-point expected robust-max log-likelihood
    /// `E log p(y | f) = P_y log(1 − ε) + (1 − P_y) log(ε/(K − 1))` with
    /// `P_y = ∫ N(f_y | μ_y, v_y) Π_{j≠y} Φ((f_y − μ_j)/√v_j) df_y` by probabilists'
    /// Gauss–Hermite quadrature on `rule` (Hernández-Lobato et al. 2011; GPflow's
    /// `RobustMax`, 20 nodes by default).
    ///
    /// `y`: `R × 1` labels in `0..K` (no gradient); `mu`, `var`: `R × K` marginals of the K
    /// latent functions; output `R × 1`. `epsilon` ∈ (0, 1). The gradient is the exact
    /// derivative of the quadrature formula; variances below [`VAR_FLOOR`] are floored and
    /// get none.
    ///
    /// # Panics
    /// On shape mismatches, K < 2, a label outside `0..K`, or a physicists' rule.
    #[track_caller]
    pub fn robust_max_expected_log_lik(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        epsilon: f64,
        rule: &GaussHermite,
    ) -> Var {
        let (_, k) = check_shapes(self, "robust_max_expected_log_lik", y, mu, var);
        assert_eq!(
            rule.form,
            HermiteForm::Probabilists,
            "needs a probabilists' rule"
        );
        let (log_on, log_off) = robust_max_logs(epsilon, k);
        let mut scratch = Vec::new();
        self.record_rowwise(
            y,
            mu,
            var,
            "robust_max_expected_log_lik",
            |_, c, m, v, dm, dv| {
                let p =
                    prob_is_largest_parts(c, m, v, rule, Some((&mut *dm, &mut *dv)), &mut scratch);
                let scale = log_on - log_off;
                dm.iter_mut().for_each(|x| *x *= scale);
                dv.iter_mut().for_each(|x| *x *= scale);
                log_off + p * scale
            },
        )
    }

    /// Per-point robust-max log predictive probability `log[P_y (1 − ε) + (1 − P_y) ε/(K − 1)]`
    /// with `P_y` as in [`Tape::robust_max_expected_log_lik`] (the exact integral
    /// `log ∫ p(y | f) N(f | μ, diag v) df` up to the quadrature error of `P_y`; not
    /// renormalised over classes).
    ///
    /// Shapes, labels and panics as [`Tape::robust_max_expected_log_lik`].
    #[track_caller]
    pub fn robust_max_log_predictive(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        epsilon: f64,
        rule: &GaussHermite,
    ) -> Var {
        let (_, k) = check_shapes(self, "robust_max_log_predictive", y, mu, var);
        assert_eq!(
            rule.form,
            HermiteForm::Probabilists,
            "needs a probabilists' rule"
        );
        let off = epsilon / (k - 1) as f64;
        let mut scratch = Vec::new();
        self.record_rowwise(
            y,
            mu,
            var,
            "robust_max_log_predictive",
            |_, c, m, v, dm, dv| {
                let p =
                    prob_is_largest_parts(c, m, v, rule, Some((&mut *dm, &mut *dv)), &mut scratch)
                        .clamp(0.0, 1.0);
                let rho = p * (1.0 - epsilon) + (1.0 - p) * off;
                let scale = (1.0 - epsilon - off) / rho;
                dm.iter_mut().for_each(|x| *x *= scale);
                dv.iter_mut().for_each(|x| *x *= scale);
                rho.ln()
            },
        )
    }

    /// Per-point Monte Carlo estimate of the expected softmax log-likelihood,
    /// `μ_y − (1/S) Σ_s log Σ_k exp(μ_k + √v_k ε_sk)` (`E f_y = μ_y` is exact).
    ///
    /// `draws` holds `S₀` standard-normal K-vectors per point, point i's in rows
    /// `i·S₀ .. (i+1)·S₀` (`(R·S₀) × K`); with `antithetic` each draw is also used negated
    /// (S = 2S₀ evaluations, which cancels the estimator's odd-order error terms). The
    /// value is deterministic given `draws`, and the gradient is its exact derivative
    /// (reparameterisation); variances below [`VAR_FLOOR`] are floored and get none.
    /// Shapes: `y` `R × 1`, `mu`, `var` `R × K`, output `R × 1`.
    ///
    /// # Panics
    /// On shape mismatches (including `draws`), K < 2 or a label outside `0..K`.
    #[track_caller]
    pub fn softmax_expected_log_lik(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        draws: MatRef<'_, f64>,
        antithetic: bool,
    ) -> Var {
        let (r, k) = check_shapes(self, "softmax_expected_log_lik", y, mu, var);
        let s0 = check_draws(draws, r, k);
        self.record_rowwise(
            y,
            mu,
            var,
            "softmax_expected_log_lik",
            |i, c, m, v, dm, dv| {
                softmax_ell_parts(c, m, v, draws.subrows(i * s0, s0), antithetic, dm, dv)
            },
        )
    }

    /// Per-point Monte Carlo log predictive probability of the softmax likelihood,
    /// `log((1/S) Σ_s softmax_y(μ + √v ⊙ ε_s))`, with draws, shapes and panics as
    /// [`Tape::softmax_expected_log_lik`]; the gradient is the exact derivative of the
    /// estimate.
    #[track_caller]
    pub fn softmax_log_predictive(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        draws: MatRef<'_, f64>,
        antithetic: bool,
    ) -> Var {
        let (r, k) = check_shapes(self, "softmax_log_predictive", y, mu, var);
        let s0 = check_draws(draws, r, k);
        self.record_rowwise(
            y,
            mu,
            var,
            "softmax_log_predictive",
            |i, c, m, v, dm, dv| {
                softmax_log_pred_parts(c, m, v, draws.subrows(i * s0, s0), antithetic, dm, dv)
            },
        )
    }
}

#[track_caller]
fn check_draws(draws: MatRef<'_, f64>, r: usize, k: usize) -> usize {
    assert!(
        draws.ncols() == k && r > 0 && draws.nrows() % r == 0 && draws.nrows() >= r,
        "softmax draws must be (R·S₀)×K with S₀ ≥ 1"
    );
    draws.nrows() / r
}
