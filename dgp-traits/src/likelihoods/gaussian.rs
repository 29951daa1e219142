//! Fused tape operations of the Gaussian likelihood `p(y | f) = N(y | f, σ²)`.
//!
//! Both operations are elementwise over matrices of equal shape `R × C` (usually `N × 1`,
//! one row per data point) and take the noise variance σ² as a `1 × 1` node (shared by
//! all outputs) or a `1 × C` node (one variance per output column). They return the
//! per-entry `R × C` matrix; reduce it with `Tape::sum` or `Tape::weighted_sum`.

use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::{Mat, MatRef};

use dgp_core::special::{LN_SQRT_2PI, gaussian_log_density};

/// σ² for column `j`: the noise node is `1 × 1` or `1 × C`.
#[inline]
fn noise_at(s2: MatRef<'_, f64>, j: usize) -> f64 {
    if s2.ncols() == 1 {
        s2[(0, 0)]
    } else {
        s2[(0, j)]
    }
}

#[track_caller]
fn check_shapes(t: &Tape, what: &str, y: Var, mu: Var, var: Var, noise_var: Var) {
    let (r, c) = t.shape(mu);
    assert_eq!(t.shape(y), (r, c), "{what}: y and mu shapes differ");
    assert_eq!(t.shape(var), (r, c), "{what}: var and mu shapes differ");
    let ns = t.shape(noise_var);
    assert!(
        ns == (1, 1) || ns == (1, c),
        "{what}: noise variance must be 1×1 or 1×{c}, got {}×{}",
        ns.0,
        ns.1
    );
}

/// Adds `g` to the noise adjoint at column `j` (`1 × 1` noise collects every column).
#[inline]
fn noise_acc(acc: &mut faer::MatMut<'_, f64>, j: usize, g: f64) {
    if acc.ncols() == 1 {
        acc[(0, 0)] += g;
    } else {
        acc[(0, j)] += g;
    }
}

/// `E_{N(f|μ,v)} log N(y | f, σ²) = −½ log(2πσ²) − ((y − μ)² + v) / (2σ²)`
/// (Salimbeni & Deisenroth 2017, the Gaussian case of eq. 17).
pub(crate) fn expected_log_lik_value(y: f64, mu: f64, var: f64, s2: f64) -> f64 {
    let r = y - mu;
    -LN_SQRT_2PI - 0.5 * s2.ln() - 0.5 * (r * r + var) / s2
}

/// `log N(y | μ, v + σ²)`.
pub(crate) fn log_predictive_value(y: f64, mu: f64, var: f64, s2: f64) -> f64 {
    gaussian_log_density(y, mu, var + s2)
}

/// `f(y, μ, v, σ²_j)` entry by entry over the values of the (shape-checked) inputs
/// `[y, mu, var, noise_var]`, the forward pass of both Gaussian operations.
fn per_entry(
    t: &Tape,
    [y, mu, var, noise_var]: [Var; 4],
    f: fn(f64, f64, f64, f64) -> f64,
) -> Mat<f64> {
    let (yv, mv, vv, sv) = (t.value(y), t.value(mu), t.value(var), t.value(noise_var));
    Mat::from_fn(mv.nrows(), mv.ncols(), |i, j| {
        f(yv[(i, j)], mv[(i, j)], vv[(i, j)], noise_at(sv, j))
    })
}

struct GaussianExpectedLogLikOp;

impl Backward for GaussianExpectedLogLikOp {
    fn name(&self) -> &'static str {
        "gaussian_expected_log_lik"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (y, mu, s2, g) = (ctx.input(0), ctx.input(1), ctx.input(3), ctx.grad());
        let (rows, cols) = (mu.nrows(), mu.ncols());
        // ∂/∂y = −(y−μ)/σ², ∂/∂μ = (y−μ)/σ², ∂/∂v = −1/(2σ²),
        // ∂/∂σ² = −1/(2σ²) + ((y−μ)² + v)/(2σ⁴).
        for (input, sign) in [(0usize, -1.0), (1usize, 1.0)] {
            if sink.wants(input) {
                let mut acc = sink.acc(input);
                for j in 0..cols {
                    let s = noise_at(s2, j);
                    for i in 0..rows {
                        acc[(i, j)] += sign * g[(i, j)] * (y[(i, j)] - mu[(i, j)]) / s;
                    }
                }
            }
        }
        if sink.wants(2) {
            let mut acc = sink.acc(2);
            for j in 0..cols {
                let s = noise_at(s2, j);
                for i in 0..rows {
                    acc[(i, j)] -= 0.5 * g[(i, j)] / s;
                }
            }
        }
        if sink.wants(3) {
            let var = ctx.input(2);
            let mut acc = sink.acc(3);
            for j in 0..cols {
                let s = noise_at(s2, j);
                let mut col = 0.0;
                for i in 0..rows {
                    let r = y[(i, j)] - mu[(i, j)];
                    col += g[(i, j)] * (-0.5 / s + 0.5 * (r * r + var[(i, j)]) / (s * s));
                }
                noise_acc(&mut acc, j, col);
            }
        }
    }
}

struct GaussianLogPredictiveOp;

impl Backward for GaussianLogPredictiveOp {
    fn name(&self) -> &'static str {
        "gaussian_log_predictive"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (y, mu, var, s2, g) = (
            ctx.input(0),
            ctx.input(1),
            ctx.input(2),
            ctx.input(3),
            ctx.grad(),
        );
        let (rows, cols) = (mu.nrows(), mu.ncols());
        // τ = v + σ²: ∂/∂μ = (y−μ)/τ = −∂/∂y, ∂/∂v = ∂/∂σ² = −1/(2τ) + (y−μ)²/(2τ²).
        let (want_y, want_mu, want_v, want_s) =
            (sink.wants(0), sink.wants(1), sink.wants(2), sink.wants(3));
        let mut d_mu = Mat::<f64>::zeros(rows, cols);
        let mut d_tau = Mat::<f64>::zeros(rows, cols);
        for j in 0..cols {
            let s = noise_at(s2, j);
            for i in 0..rows {
                let tau = var[(i, j)] + s;
                let r = y[(i, j)] - mu[(i, j)];
                let gij = g[(i, j)];
                d_mu[(i, j)] = gij * r / tau;
                d_tau[(i, j)] = gij * (-0.5 / tau + 0.5 * r * r / (tau * tau));
            }
        }
        if want_y {
            sink.add_owned(0, -&d_mu);
        }
        if want_s {
            let mut acc = sink.acc(3);
            for j in 0..cols {
                let col: f64 = (0..rows).map(|i| d_tau[(i, j)]).sum();
                noise_acc(&mut acc, j, col);
            }
        }
        if want_mu {
            sink.add_owned(1, d_mu);
        }
        if want_v {
            sink.add_owned(2, d_tau);
        }
    }
}

impl Tape {
    /// Per-entry expected Gaussian log-likelihood
    /// `E_{N(f|μ,v)} log N(y | f, σ²) = −½ log(2πσ²) − ((y − μ)² + v) / (2σ²)`
    /// (Salimbeni & Deisenroth 2017, eq. 17 with a Gaussian likelihood; closed form).
    ///
    /// Shapes: `y`, `mu`, `var` are `R × C`; `noise_var` (σ² > 0) is `1 × 1` or `1 × C`.
    /// Returns the `R × C` matrix of per-entry terms. Gradients flow to all four inputs.
    #[track_caller]
    pub fn gaussian_expected_log_lik(&mut self, y: Var, mu: Var, var: Var, noise_var: Var) -> Var {
        check_shapes(self, "gaussian_expected_log_lik", y, mu, var, noise_var);
        let out = per_entry(self, [y, mu, var, noise_var], expected_log_lik_value);
        self.push(out, &[y, mu, var, noise_var], GaussianExpectedLogLikOp)
    }

    /// Per-entry Gaussian log predictive density `log N(y | μ, v + σ²)`, i.e.
    /// `log ∫ N(y | f, σ²) N(f | μ, v) df` (the component density of the predictive
    /// mixtures of DSVI eq. 18 and DSPP eq. 9).
    ///
    /// Shapes as [`Tape::gaussian_expected_log_lik`]; returns `R × C`. Gradients flow to
    /// all four inputs.
    #[track_caller]
    pub fn gaussian_log_predictive(&mut self, y: Var, mu: Var, var: Var, noise_var: Var) -> Var {
        check_shapes(self, "gaussian_log_predictive", y, mu, var, noise_var);
        let out = per_entry(self, [y, mu, var, noise_var], log_predictive_value);
        self.push(out, &[y, mu, var, noise_var], GaussianLogPredictiveOp)
    }
}
