//! Fused tape operations of the Bernoulli likelihood with the logistic (logit) link.
//!
//! `p(y = 1 | f) = σ(f) = 1 / (1 + e^{−f})`. Because `1 − σ(f) = σ(−f)`, both classes are
//! covered by `p(y | f) = σ(s f)` with the class sign `s = +1` for `y = 1` and `s = −1`
//! for `y ∈ {0, −1}` (as the probit operations).
//!
//! Neither the expected log-likelihood nor the predictive probability has a closed form;
//! both are computed by probabilists' Gauss–Hermite quadrature,
//! `E_{N(f|μ,v)} g(f) ≈ Σ_j ω_j g(μ + √v ξ_j)`, and the gradients are the exact
//! derivatives of the quadrature formulas.

use crate::quadrature::{GaussHermite, HermiteForm};
use crate::tape::{Tape, Var};

use super::probit::label_sign;

/// Below this standard deviation the v-derivatives use Price's theorem
/// `∂/∂v E[h(f)] = ½ E[h''(f)]` instead of `Σ ω h'(f) ξ / (2√v)` (cancellation as √v → 0).
const SMALL_SD: f64 = 1e-4;

/// The logistic function `σ(x) = 1 / (1 + e^{−x})`, evaluated without overflow.
#[inline]
pub(crate) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `log σ(x) = −log(1 + e^{−x})`, stable for large |x|.
#[inline]
pub(crate) fn log_sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        -(-x).exp().ln_1p()
    } else {
        x - x.exp().ln_1p()
    }
}

/// `(E, ∂E/∂μ, ∂E/∂v)` for `E = Σ_j ω_j log σ(s(μ + √v ξ_j))`; `v < 0` is treated as 0.
///
/// `h(f) = log σ(s f)`, `h'(f) = s σ(−s f)`, `h''(f) = −σ(s f) σ(−s f)`.
pub(crate) fn expected_log_lik_parts(
    y: f64,
    mu: f64,
    var: f64,
    rule: &GaussHermite,
) -> (f64, f64, f64) {
    let s = label_sign(y);
    let sd = var.max(0.0).sqrt();
    let small = sd < SMALL_SD;
    let (mut val, mut d_mu, mut d_v) = (0.0, 0.0, 0.0);
    for (&xi, &w) in rule.nodes.iter().zip(&rule.weights) {
        let x = s * (mu + sd * xi);
        let q = sigmoid(-x);
        val += w * log_sigmoid(x);
        d_mu += w * s * q;
        if small {
            d_v -= w * (1.0 - q) * q;
        } else {
            d_v += w * s * q * xi;
        }
    }
    let d_v = if small { 0.5 * d_v } else { d_v / (2.0 * sd) };
    (val, d_mu, d_v)
}

/// `(P, ∂P/∂μ, ∂P/∂v)` for the quadrature predictive `P = Σ_j ω_j σ(s(μ + √v ξ_j))`, the
/// probability of the label's class; `v < 0` is treated as 0.
pub(crate) fn predictive_parts(y: f64, mu: f64, var: f64, rule: &GaussHermite) -> (f64, f64, f64) {
    let s = label_sign(y);
    let sd = var.max(0.0).sqrt();
    let small = sd < SMALL_SD;
    let (mut p, mut d_mu, mut d_v) = (0.0, 0.0, 0.0);
    for (&xi, &w) in rule.nodes.iter().zip(&rule.weights) {
        let x = s * (mu + sd * xi);
        let sg = sigmoid(x);
        let d1 = sg * (1.0 - sg);
        p += w * sg;
        d_mu += w * s * d1;
        if small {
            // d²/df² σ(s f) = σ''(x) = σ'(x)(1 − 2σ(x)).
            d_v += w * d1 * (1.0 - 2.0 * sg);
        } else {
            d_v += w * s * d1 * xi;
        }
    }
    let d_v = if small { 0.5 * d_v } else { d_v / (2.0 * sd) };
    (p, d_mu, d_v)
}

/// `(log P, ∂/∂μ, ∂/∂v)` of the quadrature predictive of [`predictive_parts`].
pub(crate) fn log_predictive_parts(
    y: f64,
    mu: f64,
    var: f64,
    rule: &GaussHermite,
) -> (f64, f64, f64) {
    let (p, dm, dv) = predictive_parts(y, mu, var, rule);
    // P ≥ min_j σ(·) > 0 unless it underflows; keep the log finite.
    let p = p.max(f64::MIN_POSITIVE);
    (p.ln(), dm / p, dv / p)
}

#[track_caller]
fn check_inputs(t: &Tape, what: &str, y: Var, mu: Var, var: Var, rule: &GaussHermite) {
    let s = t.shape(mu);
    assert_eq!(t.shape(y), s, "{what}: y and mu shapes differ");
    assert_eq!(t.shape(var), s, "{what}: var and mu shapes differ");
    assert_eq!(
        rule.form,
        HermiteForm::Probabilists,
        "{what} needs a probabilists' rule"
    );
}

impl Tape {
    /// Per-entry expected Bernoulli-logit log-likelihood
    /// `E_{N(f|μ,v)} log σ(s f) ≈ Σ_j ω_j log σ(s(μ + √v ξ_j))` by probabilists'
    /// Gauss–Hermite quadrature on `rule` (20 nodes by default, as GPflow's
    /// `variational_expectations`).
    ///
    /// `y` holds labels (1 = positive class, 0 or −1 = negative; only the sign is read and
    /// it receives no gradient); `mu`, `var` (negative entries are treated as 0) and the
    /// output are `R × C`. The gradient is the exact derivative of the quadrature formula
    /// (for √v < 10⁻⁴ the v-derivative uses Price's theorem, ½E[h'']).
    ///
    /// # Panics
    /// On shape mismatches or when `rule` is not a probabilists' rule.
    #[track_caller]
    pub fn logit_expected_log_lik(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        rule: &GaussHermite,
    ) -> Var {
        check_inputs(self, "logit_expected_log_lik", y, mu, var, rule);
        self.record_probit(y, mu, var, "logit_expected_log_lik", |y, m, v| {
            expected_log_lik_parts(y, m, v, rule)
        })
    }

    /// Per-entry log predictive probability of the Bernoulli-logit likelihood,
    /// `log ∫ σ(s f) N(f | μ, v) df ≈ log Σ_j ω_j σ(s(μ + √v ξ_j))` (Gauss–Hermite on
    /// `rule`; the logistic-normal integral has no closed form).
    ///
    /// Labels and shapes as [`Tape::logit_expected_log_lik`]; gradients flow to `mu` and
    /// `var`.
    ///
    /// # Panics
    /// As [`Tape::logit_expected_log_lik`].
    #[track_caller]
    pub fn logit_log_predictive(&mut self, y: Var, mu: Var, var: Var, rule: &GaussHermite) -> Var {
        check_inputs(self, "logit_log_predictive", y, mu, var, rule);
        self.record_probit(y, mu, var, "logit_log_predictive", |y, m, v| {
            log_predictive_parts(y, m, v, rule)
        })
    }
}
