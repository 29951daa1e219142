//! The linear kernel with ARD weights, `k(x, x') = Σ_q v_q x_q x'_q = x diag(v) x'ᵀ`.
//!
//! Adjoints, with `V = diag(v)` and `Ḡ = ∂L/∂K`:
//! `X̄1 = Ḡ X2 V`, `X̄2 = Ḡᵀ X1 V`, `v̄_q = Σ_i x1_iq (Ḡ X2)_iq` (summed over q for a single
//! shared weight); for the symmetric `K = X V Xᵀ`: `X̄ = (Ḡ + Ḡᵀ) X V`, `v̄_q = Σ_i x_iq (Ḡ X)_iq`.

use super::sqdist::scale_columns;
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};

/// Per-dimension weights (length `d`) from a 1×1 or 1×d row.
#[track_caller]
fn weights(v: MatRef<'_, f64>, d: usize) -> Vec<f64> {
    assert!(
        v.nrows() == 1 && (v.ncols() == 1 || v.ncols() == d),
        "linear-kernel weights must be 1×1 or 1×{d}, got {}×{}",
        v.nrows(),
        v.ncols()
    );
    (0..d)
        .map(|q| v[(0, if v.ncols() == 1 { 0 } else { q })])
        .collect()
}

/// `K = X1 diag(v) X2ᵀ`; exactly symmetric when `x2` is `None` (`K = X V Xᵀ`).
pub(crate) fn eval(
    x1: MatRef<'_, f64>,
    x2: Option<MatRef<'_, f64>>,
    v: MatRef<'_, f64>,
    par: Par,
) -> Mat<f64> {
    let w = weights(v, x1.ncols());
    let a = scale_columns(x1, &w);
    let rhs = x2.unwrap_or(x1);
    let mut k = Mat::zeros(x1.nrows(), rhs.nrows());
    matmul(
        k.as_mut(),
        Accum::Replace,
        a.as_ref(),
        rhs.transpose(),
        1.0,
        par,
    );
    if x2.is_none() {
        let n = k.nrows();
        for j in 0..n {
            for i in j + 1..n {
                k[(j, i)] = k[(i, j)];
            }
        }
    }
    k
}

/// `k(x_i, x_i) = Σ_q v_q x_iq²` (n×1).
pub(crate) fn diag(x: MatRef<'_, f64>, v: MatRef<'_, f64>) -> Mat<f64> {
    let w = weights(v, x.ncols());
    let mut d = Mat::zeros(x.nrows(), 1);
    for (q, &wq) in w.iter().enumerate() {
        for i in 0..x.nrows() {
            let t = x[(i, q)];
            d[(i, 0)] += wq * t * t;
        }
    }
    d
}

/// `v̄` from `t_q = Σ_i x_iq (Ḡ X)_iq`, shaped like the weight row.
fn weight_adjoint(t: Vec<f64>, v: MatRef<'_, f64>) -> Mat<f64> {
    if v.ncols() == 1 {
        let s: f64 = t.iter().sum();
        Mat::from_fn(1, 1, |_, _| s)
    } else {
        Mat::from_fn(1, t.len(), |_, q| t[q])
    }
}

/// `Σ_i a_iq b_iq` for every column q.
fn column_dots(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Vec<f64> {
    (0..a.ncols())
        .map(|q| (0..a.nrows()).map(|i| a[(i, q)] * b[(i, q)]).sum())
        .collect()
}

struct LinearOp {
    sym: bool,
}

impl Backward for LinearOp {
    fn name(&self) -> &'static str {
        if self.sym {
            "linear_kernel_sym"
        } else {
            "linear_kernel_cross"
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (g, par) = (ctx.grad(), ctx.par());
        let x1 = ctx.input(0);
        let (iv, x2) = if self.sym { (1, x1) } else { (2, ctx.input(1)) };
        let v = ctx.input(iv);
        let w = weights(v, x1.ncols());
        let (n1, n2, d) = (x1.nrows(), x2.nrows(), x1.ncols());
        let want_x2 = !self.sym && sink.wants(1);
        if sink.wants(0) || sink.wants(iv) {
            let mut gx2 = Mat::zeros(n1, d);
            let par = crate::tape::par_for_output(par, gx2.nrows(), gx2.ncols());
            matmul(gx2.as_mut(), Accum::Replace, g, x2, 1.0, par);
            if sink.wants(iv) {
                sink.add_owned(iv, weight_adjoint(column_dots(x1, gx2.as_ref()), v));
            }
            if sink.wants(0) {
                if self.sym {
                    matmul(gx2.as_mut(), Accum::Add, g.transpose(), x1, 1.0, par);
                }
                sink.add_owned(0, scale_columns(gx2.as_ref(), &w));
            }
        }
        if want_x2 {
            let mut gtx1 = Mat::zeros(n2, d);
            let par = crate::tape::par_for_output(par, gtx1.nrows(), gtx1.ncols());
            matmul(gtx1.as_mut(), Accum::Replace, g.transpose(), x1, 1.0, par);
            sink.add_owned(1, scale_columns(gtx1.as_ref(), &w));
        }
    }
}

struct LinearDiagOp;

impl Backward for LinearDiagOp {
    fn name(&self) -> &'static str {
        "linear_kernel_diag"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (g, x, v) = (ctx.grad(), ctx.input(0), ctx.input(1));
        let w = weights(v, x.ncols());
        if sink.wants(0) {
            let mut acc = sink.acc(0);
            for (q, &wq) in w.iter().enumerate() {
                for i in 0..x.nrows() {
                    acc[(i, q)] += 2.0 * wq * x[(i, q)] * g[(i, 0)];
                }
            }
        }
        if sink.wants(1) {
            let t: Vec<f64> = (0..x.ncols())
                .map(|q| {
                    (0..x.nrows())
                        .map(|i| g[(i, 0)] * x[(i, q)] * x[(i, q)])
                        .sum()
                })
                .collect();
            sink.add_owned(1, weight_adjoint(t, v));
        }
    }
}

/// Records `K(x1, x2)` (or `K(x, x)` when `x2` is `None`) on the tape.
pub(crate) fn record(tape: &mut Tape, x1: Var, x2: Option<Var>, v: Var) -> Var {
    let n1 = tape.shape(x1).0;
    let par = tape.par_for_size(n1 * x2.map_or(n1, |v| tape.shape(v).0));
    match x2 {
        Some(x2) => {
            let k = eval(tape.value(x1), Some(tape.value(x2)), tape.value(v), par);
            tape.push(k, &[x1, x2, v], LinearOp { sym: false })
        }
        None => {
            let k = eval(tape.value(x1), None, tape.value(v), par);
            tape.push(k, &[x1, v], LinearOp { sym: true })
        }
    }
}

/// Records the diagonal `Σ_q v_q x_iq²` (n×1) on the tape.
pub(crate) fn record_diag(tape: &mut Tape, x: Var, v: Var) -> Var {
    let d = diag(tape.value(x), tape.value(v));
    tape.push(d, &[x, v], LinearDiagOp)
}
