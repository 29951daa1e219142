//! Fused tape operations of the Bernoulli likelihood with a (squashed) probit link.
//!
//! `p(y = 1 | f) = (1 − 2ε) Φ(f) + ε` (GPflow's `probit` squashing, ε = 10⁻³ by default;
//! ε = 0 is the plain probit link). Because `1 − [(1 − 2ε)Φ(f) + ε] = (1 − 2ε)Φ(−f) + ε`,
//! both classes are covered by `p(y | f) = (1 − 2ε) Φ(s f) + ε` with the sign
//! `s = +1` for `y = 1` and `s = −1` for `y ∈ {0, −1}`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::quadrature::GaussHermite;
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use dgp_core::Result;
use faer::Mat;

use dgp_core::special::{norm_cdf, norm_log_cdf, norm_pdf, norm_pdf_over_cdf};

/// Below this standard deviation the v-derivative of the quadrature uses Price's theorem
/// `∂/∂v E[h(f)] = ½ E[h''(f)]` instead of `Σ ω h'(f) ξ / (2√v)`, whose cancellation
/// would lose digits as √v → 0 (the two agree to quadrature accuracy).
const SMALL_SD: f64 = 1e-4;

/// The class sign `s` of a label: `+1` for `y > 0` (label 1), `−1` otherwise (0 or −1).
#[inline]
pub(crate) fn label_sign(y: f64) -> f64 {
    if y > 0.0 { 1.0 } else { -1.0 }
}

/// `(H(x), r(x))` with `H(x) = log((1 − 2ε)Φ(x) + ε)` and `r(x) = H'(x) = (1 − 2ε)φ(x) /
/// ((1 − 2ε)Φ(x) + ε)`; `H''(x) = −x r − r²`. Stable for very negative `x` when ε = 0.
#[inline]
pub(crate) fn log_link_and_ratio(x: f64, eps: f64) -> (f64, f64) {
    if eps == 0.0 {
        (norm_log_cdf(x), norm_pdf_over_cdf(x))
    } else {
        let a = 1.0 - 2.0 * eps;
        let g = a * norm_cdf(x) + eps;
        (g.ln(), a * norm_pdf(x) / g)
    }
}

/// Thread-safe cache of probabilists' Gauss–Hermite rules by size.
pub(crate) fn cached_rule(n: usize) -> Result<Arc<GaussHermite>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<GaussHermite>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(r) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&n) {
        return Ok(Arc::clone(r));
    }
    let rule = Arc::new(GaussHermite::probabilists(n)?);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(n, Arc::clone(&rule));
    Ok(rule)
}

/// `(E, ∂E/∂μ, ∂E/∂v)` for `E = Σ_j ω_j log p(y | μ + √v ξ_j)` (probabilists' rule);
/// `v < 0` is treated as 0.
pub(crate) fn expected_log_lik_parts(
    y: f64,
    mu: f64,
    var: f64,
    eps: f64,
    rule: &GaussHermite,
) -> (f64, f64, f64) {
    let s = label_sign(y);
    let sd = var.max(0.0).sqrt();
    let small = sd < SMALL_SD;
    let (mut val, mut d_mu, mut d_v) = (0.0, 0.0, 0.0);
    for (&xi, &w) in rule.nodes.iter().zip(&rule.weights) {
        let fs = s * (mu + sd * xi);
        let (h, r) = log_link_and_ratio(fs, eps);
        val += w * h;
        d_mu += w * s * r;
        if small {
            d_v += w * (-fs * r - r * r);
        } else {
            d_v += w * s * r * xi;
        }
    }
    let d_v = if small { 0.5 * d_v } else { d_v / (2.0 * sd) };
    (val, d_mu, d_v)
}

/// `(log p, ∂/∂μ, ∂/∂v)` of the closed-form predictive
/// `p(y | μ, v) = (1 − 2ε) Φ(s μ / √(1 + v)) + ε`; `v < 0` is treated as 0.
pub(crate) fn log_predictive_parts(y: f64, mu: f64, var: f64, eps: f64) -> (f64, f64, f64) {
    let s = label_sign(y);
    let c = 1.0 + var.max(0.0);
    let sc = c.sqrt();
    let z = s * mu / sc;
    let (h, r) = log_link_and_ratio(z, eps);
    (h, r * s / sc, -0.5 * r * z / c)
}

/// Backward rule shared by both probit operations: the per-entry derivatives are cached
/// in the forward pass, so the backward pass only scales them by the output adjoint.
struct ProbitOp {
    name: &'static str,
    d_mu: Mat<f64>,
    d_var: Mat<f64>,
}

impl Backward for ProbitOp {
    fn name(&self) -> &'static str {
        self.name
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let g = ctx.grad();
        // Input 0 (labels) is not differentiable.
        for (input, d) in [(1usize, &self.d_mu), (2usize, &self.d_var)] {
            if sink.wants(input) {
                let mut acc = sink.acc(input);
                for j in 0..d.ncols() {
                    for i in 0..d.nrows() {
                        acc[(i, j)] += g[(i, j)] * d[(i, j)];
                    }
                }
            }
        }
    }
}

#[track_caller]
fn check_shapes(t: &Tape, what: &str, y: Var, mu: Var, var: Var) {
    let s = t.shape(mu);
    assert_eq!(t.shape(y), s, "{what}: y and mu shapes differ");
    assert_eq!(t.shape(var), s, "{what}: var and mu shapes differ");
}

impl Tape {
    /// Records a probit operation from its per-entry `(value, ∂/∂μ, ∂/∂v)` = `parts(y, μ, v)`:
    /// the values form the output, the derivatives are cached for [`ProbitOp`].
    pub(super) fn record_probit(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        name: &'static str,
        parts: impl Fn(f64, f64, f64) -> (f64, f64, f64),
    ) -> Var {
        let (yv, mv, vv) = (self.value(y), self.value(mu), self.value(var));
        let (rows, cols) = (mv.nrows(), mv.ncols());
        let mut out = Mat::zeros(rows, cols);
        let mut d_mu = Mat::zeros(rows, cols);
        let mut d_var = Mat::zeros(rows, cols);
        for j in 0..cols {
            for i in 0..rows {
                let (e, dm, dv) = parts(yv[(i, j)], mv[(i, j)], vv[(i, j)]);
                out[(i, j)] = e;
                d_mu[(i, j)] = dm;
                d_var[(i, j)] = dv;
            }
        }
        self.push(out, &[y, mu, var], ProbitOp { name, d_mu, d_var })
    }
}

impl Tape {
    /// Per-entry expected Bernoulli-probit log-likelihood
    /// `E_{N(f|μ,v)} log[(1 − 2ε) Φ(s f) + ε]` by probabilists' Gauss–Hermite quadrature
    /// on `rule` (GPflow's `variational_expectations` with `num_gauss_hermite_points`,
    /// Salimbeni & Deisenroth 2017 eq. 17; 20 nodes in the reference code).
    ///
    /// `y` holds labels (1 = positive class, 0 or −1 = negative; only the sign of `y` is
    /// read and it receives no gradient); `mu`, `var` (≥ 0; negative entries are treated as
    /// 0) have the same shape `R × C`, as has the output. `squash` is ε ∈ [0, ½).
    /// The gradient is the exact derivative of the quadrature formula (for √v < 10⁻⁴ the
    /// v-derivative uses Price's theorem, ½E[h''], to avoid cancellation).
    ///
    /// # Panics
    /// On shape mismatches or when `rule` is not a probabilists' rule.
    #[track_caller]
    pub fn probit_expected_log_lik(
        &mut self,
        y: Var,
        mu: Var,
        var: Var,
        squash: f64,
        rule: &GaussHermite,
    ) -> Var {
        check_shapes(self, "probit_expected_log_lik", y, mu, var);
        assert_eq!(
            rule.form,
            crate::quadrature::HermiteForm::Probabilists,
            "probit_expected_log_lik needs a probabilists' rule"
        );
        self.record_probit(y, mu, var, "probit_expected_log_lik", |y, m, v| {
            expected_log_lik_parts(y, m, v, squash, rule)
        })
    }

    /// Per-entry log predictive probability of the squashed probit likelihood,
    /// `log p(y | μ, v) = log[(1 − 2ε) Φ(s μ / √(1 + v)) + ε]`, which is exactly
    /// `log ∫ p(y | f) N(f | μ, v) df` (the Bernoulli predictive of DSVI §3).
    ///
    /// Labels and shapes as [`Tape::probit_expected_log_lik`]; gradients flow to `mu` and
    /// `var`.
    #[track_caller]
    pub fn probit_log_predictive(&mut self, y: Var, mu: Var, var: Var, squash: f64) -> Var {
        check_shapes(self, "probit_log_predictive", y, mu, var);
        self.record_probit(y, mu, var, "probit_log_predictive", |y, m, v| {
            log_predictive_parts(y, m, v, squash)
        })
    }
}
