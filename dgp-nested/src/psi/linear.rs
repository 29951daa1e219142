//! Closed-form psi-statistics of the linear ARD kernel `k(x, x') = Σ_q g_q x_q x'_q`
//! under inputs `h ~ N(μ, diag v)` (Hensman & Lawrence 2014, §3–4; GPy's psi-statistics; GPy's `linear_psi_comp`).
//! The weights g live in the kernel's "lengthscales" slot (1×Q, or 1×1 shared).
//!
//! * ψ0_n = Σ_q g_q (μ_nq² + v_nq);
//! * Ψ1 = μ diag(g) Zᵀ;
//! * Ψ2 = Σ_n [ψ1_nᵀ ψ1_n + Z diag(g² ⊙ v_n) Zᵀ] = T C Tᵀ with T = Z diag(g) and
//!   C = μᵀμ + diag(Σ_n v_n) (Q×Q).
//!
//! Backward rules (Ḡ = ∂L/∂output): ψ0: μ̄ = 2 g μ ḡ_n, v̄ = g ḡ_n, ḡ_q = Σ_n ḡ_n(μ² + v);
//! Ψ1: μ̄ = Ḡ Z diag(g), Z̄ = Ḡᵀ μ diag(g), ḡ_q = Σ_n (μ ⊙ Ḡ Z)_nq;
//! Ψ2: T̄ = (Ḡ + Ḡᵀ) T C, C̄ = Tᵀ Ḡ T, μ̄ = μ (C̄ + C̄ᵀ), v̄_nq = C̄_qq,
//! Z̄ = T̄ diag(g), ḡ_q = Σ_m T̄_mq z_mq.

use super::{assert_cols, assert_same_shape, fold_per_dim, per_dim};
use dgp_traits::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::{Mat, MatRef};

fn scale_cols(a: MatRef<'_, f64>, g: &[f64]) -> Mat<f64> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)] * g[j])
}

// ---------------------------------------------------------------------------------------
// ψ0
// ---------------------------------------------------------------------------------------

struct Psi0LinearOp;

impl Backward for Psi0LinearOp {
    fn name(&self) -> &'static str {
        "psi0_linear"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (mu, v, wrow, gbar) = (ctx.input(0), ctx.input(1), ctx.input(2), ctx.grad());
        let (b, q) = (mu.nrows(), mu.ncols());
        let g = per_dim(wrow, q);
        if sink.wants(0) {
            sink.add_owned(
                0,
                Mat::from_fn(b, q, |i, k| 2.0 * g[k] * mu[(i, k)] * gbar[(i, 0)]),
            );
        }
        if sink.wants(1) {
            sink.add_owned(1, Mat::from_fn(b, q, |i, k| g[k] * gbar[(i, 0)]));
        }
        if sink.wants(2) {
            let gg: Vec<f64> = (0..q)
                .map(|k| {
                    (0..b)
                        .map(|i| gbar[(i, 0)] * (mu[(i, k)] * mu[(i, k)] + v[(i, k)]))
                        .sum()
                })
                .collect();
            sink.add_owned(2, fold_per_dim(&gg, wrow.ncols()));
        }
    }
}

/// ψ0 of the linear kernel, `E[k(h, h)] = Σ_q g_q (μ_q² + v_q)` (B×1), for means and
/// variances B×Q and weights g (1×Q or 1×1). Differentiable in μ, v and g.
#[track_caller]
pub fn psi0_linear(tape: &mut Tape, mean: Var, var: Var, weights: Var) -> Var {
    let (mu, v) = (tape.value(mean), tape.value(var));
    assert_same_shape(mu, v, "psi0_linear: mean vs var");
    let g = per_dim(tape.value(weights), mu.ncols());
    let out = Mat::from_fn(mu.nrows(), 1, |i, _| {
        (0..mu.ncols())
            .map(|k| g[k] * (mu[(i, k)] * mu[(i, k)] + v[(i, k)]))
            .sum()
    });
    tape.push(out, &[mean, var, weights], Psi0LinearOp)
}

// ---------------------------------------------------------------------------------------
// Ψ1
// ---------------------------------------------------------------------------------------

struct Psi1LinearOp;

impl Backward for Psi1LinearOp {
    fn name(&self) -> &'static str {
        "psi1_linear"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (mu, z, wrow, gbar) = (ctx.input(0), ctx.input(1), ctx.input(2), ctx.grad());
        let q = mu.ncols();
        let g = per_dim(wrow, q);
        let gz = gbar * z; // B×Q
        if sink.wants(0) {
            sink.add_owned(0, scale_cols(gz.as_ref(), &g));
        }
        if sink.wants(1) {
            let gtm = gbar.transpose() * mu; // M×Q
            sink.add_owned(1, scale_cols(gtm.as_ref(), &g));
        }
        if sink.wants(2) {
            let gg: Vec<f64> = (0..q)
                .map(|k| (0..mu.nrows()).map(|i| mu[(i, k)] * gz[(i, k)]).sum())
                .collect();
            sink.add_owned(2, fold_per_dim(&gg, wrow.ncols()));
        }
    }
}

/// Ψ1 of the linear kernel, `E[k(h_n, z_m)] = Σ_q g_q μ_nq z_mq` (B×M). It does not depend
/// on the input variances. Differentiable in μ, Z and g.
#[track_caller]
pub fn psi1_linear(tape: &mut Tape, mean: Var, z: Var, weights: Var) -> Var {
    let (mu, zv) = (tape.value(mean), tape.value(z));
    assert_cols(zv, mu.ncols(), "psi1_linear: inducing inputs");
    let g = per_dim(tape.value(weights), mu.ncols());
    let out = scale_cols(mu, &g) * zv.transpose();
    tape.push(out, &[mean, z, weights], Psi1LinearOp)
}

// ---------------------------------------------------------------------------------------
// Ψ2
// ---------------------------------------------------------------------------------------

/// `C = μᵀμ + diag(Σ_n v_n)` (Q×Q).
fn c_matrix(mu: MatRef<'_, f64>, v: MatRef<'_, f64>) -> Mat<f64> {
    let mut c = mu.transpose() * mu;
    for k in 0..mu.ncols() {
        c[(k, k)] += (0..v.nrows()).map(|i| v[(i, k)]).sum::<f64>();
    }
    c
}

struct Psi2LinearOp;

impl Backward for Psi2LinearOp {
    fn name(&self) -> &'static str {
        "psi2_linear"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (mu, v, z, wrow, gbar) = (
            ctx.input(0),
            ctx.input(1),
            ctx.input(2),
            ctx.input(3),
            ctx.grad(),
        );
        let q = mu.ncols();
        let g = per_dim(wrow, q);
        let t = scale_cols(z, &g); // M×Q
        if sink.wants(0) || sink.wants(1) {
            let cbar = t.transpose() * gbar * &t; // Q×Q
            if sink.wants(0) {
                let sym = &cbar + cbar.transpose();
                sink.add_owned(0, mu * &sym);
            }
            if sink.wants(1) {
                sink.add_owned(1, Mat::from_fn(v.nrows(), q, |_, k| cbar[(k, k)]));
            }
        }
        if sink.wants(2) || sink.wants(3) {
            let c = c_matrix(mu, v);
            let gsym = gbar + gbar.transpose();
            let tbar = &gsym * &t * &c; // M×Q
            if sink.wants(2) {
                sink.add_owned(2, scale_cols(tbar.as_ref(), &g));
            }
            if sink.wants(3) {
                let gg: Vec<f64> = (0..q)
                    .map(|k| (0..z.nrows()).map(|j| tbar[(j, k)] * z[(j, k)]).sum())
                    .collect();
                sink.add_owned(3, fold_per_dim(&gg, wrow.ncols()));
            }
        }
    }
}

/// Ψ2 of the linear kernel summed over the points,
/// `Σ_n [ψ1_nᵀψ1_n + Z diag(g² ⊙ v_n) Zᵀ]` (M×M). Differentiable in μ, v, Z and g.
#[track_caller]
pub fn psi2_linear(tape: &mut Tape, mean: Var, var: Var, z: Var, weights: Var) -> Var {
    let (mu, v, zv) = (tape.value(mean), tape.value(var), tape.value(z));
    assert_same_shape(mu, v, "psi2_linear: mean vs var");
    assert_cols(zv, mu.ncols(), "psi2_linear: inducing inputs");
    let g = per_dim(tape.value(weights), mu.ncols());
    let t = scale_cols(zv, &g);
    let c = c_matrix(mu, v);
    let mut out = &t * &c * t.transpose();
    // Exact symmetry.
    let m = out.nrows();
    for j in 0..m {
        for i in j + 1..m {
            let s = 0.5 * (out[(i, j)] + out[(j, i)]);
            out[(i, j)] = s;
            out[(j, i)] = s;
        }
    }
    tape.push(out, &[mean, var, z, weights], Psi2LinearOp)
}
