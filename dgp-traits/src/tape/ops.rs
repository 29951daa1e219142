//! Elementwise arithmetic, reductions, broadcasts and matrix products on the [`Tape`].
//!
//! Every operation is a forward method on `Tape` plus one [`Backward`] rule below it.

use super::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef};

/// `m` or its transpose, as a view.
fn view(m: MatRef<'_, f64>, transpose: bool) -> MatRef<'_, f64> {
    if transpose { m.transpose() } else { m }
}

// ---------------------------------------------------------------------------------------
// matrix product
// ---------------------------------------------------------------------------------------

struct MatMulOp {
    ta: bool,
    tb: bool,
}

impl Backward for MatMulOp {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (a, b, g, par) = (ctx.input(0), ctx.input(1), ctx.grad(), ctx.par());
        let (oa, ob) = (view(a, self.ta), view(b, self.tb));
        if sink.wants(0) {
            // C = op(A) op(B):  d op(A) = G op(B)ᵀ; if op(A) = Aᵀ then dA = op(B) Gᵀ.
            if self.ta {
                matmul(sink.acc(0), Accum::Add, ob, g.transpose(), 1.0, par);
            } else {
                matmul(sink.acc(0), Accum::Add, g, ob.transpose(), 1.0, par);
            }
        }
        if sink.wants(1) {
            if self.tb {
                matmul(sink.acc(1), Accum::Add, g.transpose(), oa, 1.0, par);
            } else {
                matmul(sink.acc(1), Accum::Add, oa.transpose(), g, 1.0, par);
            }
        }
    }
}

impl Tape {
    /// `op(A)·op(B)` where `op` transposes when the flag is set.
    #[track_caller]
    pub fn matmul_t(&mut self, a: Var, ta: bool, b: Var, tb: bool) -> Var {
        let (va, vb) = (view(self.value(a), ta), view(self.value(b), tb));
        assert_eq!(
            va.ncols(),
            vb.nrows(),
            "matmul: {}×{} times {}×{}",
            va.nrows(),
            va.ncols(),
            vb.nrows(),
            vb.ncols()
        );
        let mut c = Mat::zeros(va.nrows(), vb.ncols());
        matmul(c.as_mut(), Accum::Replace, va, vb, 1.0, self.par());
        self.push(c, &[a, b], MatMulOp { ta, tb })
    }

    /// `A·B`.
    #[track_caller]
    pub fn matmul(&mut self, a: Var, b: Var) -> Var {
        self.matmul_t(a, false, b, false)
    }

    /// `Aᵀ·B`.
    #[track_caller]
    pub fn matmul_tn(&mut self, a: Var, b: Var) -> Var {
        self.matmul_t(a, true, b, false)
    }

    /// `A·Bᵀ`.
    #[track_caller]
    pub fn matmul_nt(&mut self, a: Var, b: Var) -> Var {
        self.matmul_t(a, false, b, true)
    }
}

// ---------------------------------------------------------------------------------------
// add / sum / weighted sum
// ---------------------------------------------------------------------------------------

struct AddOp;

impl Backward for AddOp {
    fn name(&self) -> &'static str {
        "add"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        sink.add(0, ctx.grad());
        sink.add(1, ctx.grad());
    }
}

struct SumOp;

impl Backward for SumOp {
    fn name(&self) -> &'static str {
        "sum"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad()[(0, 0)];
            let mut acc = sink.acc(0);
            for j in 0..acc.ncols() {
                for i in 0..acc.nrows() {
                    acc[(i, j)] += g;
                }
            }
        }
    }
}

struct WeightedSumOp {
    w: Mat<f64>,
}

impl Backward for WeightedSumOp {
    fn name(&self) -> &'static str {
        "weighted_sum"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad()[(0, 0)];
            let mut acc = sink.acc(0);
            for j in 0..acc.ncols() {
                for i in 0..acc.nrows() {
                    acc[(i, j)] += g * self.w[(i, j)];
                }
            }
        }
    }
}

impl Tape {
    /// `A + B` (same shapes).
    #[track_caller]
    pub fn add(&mut self, a: Var, b: Var) -> Var {
        assert_eq!(self.shape(a), self.shape(b), "add: shapes differ");
        let c = self.value(a) + self.value(b);
        self.push(c, &[a, b], AddOp)
    }

    /// Sum of all entries (1×1).
    pub fn sum(&mut self, a: Var) -> Var {
        let s = sum_entries(self.value(a));
        self.push(Mat::from_fn(1, 1, |_, _| s), &[a], SumOp)
    }

    /// `Σ_ij W_ij A_ij` with a constant weight matrix `W` (1×1). Used by the gradient
    /// checker to turn a matrix output into a scalar.
    #[track_caller]
    pub fn weighted_sum(&mut self, a: Var, w: Mat<f64>) -> Var {
        let va = self.value(a);
        assert_eq!((va.nrows(), va.ncols()), (w.nrows(), w.ncols()), "weighted_sum: shapes differ");
        let mut s = 0.0;
        for j in 0..va.ncols() {
            for i in 0..va.nrows() {
                s += w[(i, j)] * va[(i, j)];
            }
        }
        self.push(Mat::from_fn(1, 1, |_, _| s), &[a], WeightedSumOp { w })
    }
}

/// Sum of all entries of `m`, column-major order (fixed order: deterministic).
pub fn sum_entries(m: MatRef<'_, f64>) -> f64 {
    let mut s = 0.0;
    for j in 0..m.ncols() {
        for i in 0..m.nrows() {
            s += m[(i, j)];
        }
    }
    s
}
