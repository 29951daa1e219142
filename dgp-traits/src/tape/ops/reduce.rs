//! Reductions: sums of all entries, of rows and of columns, weighted sums and squared
//! norms (see the op families in `ops`).

use super::{Axis, dot_entries, scalar_mat, sum_entries};
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::{Mat, unzip, zip};

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
        assert_eq!(
            (va.nrows(), va.ncols()),
            (w.nrows(), w.ncols()),
            "weighted_sum: shapes differ"
        );
        let mut s = 0.0;
        for j in 0..va.ncols() {
            for i in 0..va.nrows() {
                s += w[(i, j)] * va[(i, j)];
            }
        }
        self.push(Mat::from_fn(1, 1, |_, _| s), &[a], WeightedSumOp { w })
    }

    /// Row sums `A·1` (n×m → n×1).
    pub fn row_sums(&mut self, a: Var) -> Var {
        let va = self.value(a);
        let mut out = Mat::zeros(va.nrows(), 1);
        Axis::Col.reduce_into(out.as_mut(), va.nrows(), va.ncols(), |i, j| va[(i, j)]);
        self.push(out, &[a], SumAxisOp { axis: Axis::Col })
    }

    /// Column sums `1ᵀ·A` (n×m → 1×m).
    pub fn col_sums(&mut self, a: Var) -> Var {
        let va = self.value(a);
        let out = Mat::from_fn(1, va.ncols(), |_, j| sum_entries(va.col(j).as_mat()));
        self.push(out, &[a], SumAxisOp { axis: Axis::Row })
    }

    /// Squared Euclidean norms of the columns of `A` as a column, `outⱼ = Σᵢ Aᵢⱼ²`
    /// (n×m → m×1): the fused `transpose(col_sums(square(A)))` without the n×m
    /// intermediate and its adjoint. Used for `diag(AᵀA)` and `diag(AᵀL_S L_SᵀA)` in the
    /// sparse-GP marginal variances (DSVI eq. 8). Backward `Āᵢⱼ = 2 ḡⱼ Aᵢⱼ`.
    pub fn col_sq_norms(&mut self, a: Var) -> Var {
        let va = self.value(a);
        let mut out = self.alloc(va.ncols(), 1);
        for j in 0..va.ncols() {
            out[(j, 0)] = match va.col(j).try_as_col_major() {
                Some(c) => dgp_core::lanes::sum_squares(c.as_slice()),
                None => va.col(j).iter().map(|x| x * x).sum(),
            };
        }
        self.push(out, &[a], ColSqNormsOp)
    }

    /// `Σᵢⱼ Aᵢⱼ²` (squared Frobenius norm, 1×1); `Ā = 2ḡA`.
    pub fn sum_squares(&mut self, a: Var) -> Var {
        let va = self.value(a);
        let s = dot_entries(va, va);
        self.push(scalar_mat(s), &[a], SumSquaresOp)
    }
}

/// `row_sums` (axis = Col: output n×1) or `col_sums` (axis = Row: output 1×m).
struct SumAxisOp {
    axis: Axis,
}

impl Backward for SumAxisOp {
    fn name(&self) -> &'static str {
        match self.axis {
            Axis::Col => "row_sums",
            Axis::Row => "col_sums",
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let (g, axis) = (ctx.grad(), self.axis);
            let (mut acc, fresh) = sink.acc_or_new(0);
            for j in 0..acc.ncols() {
                for i in 0..acc.nrows() {
                    if fresh {
                        acc[(i, j)] = axis.pick(g, i, j);
                    } else {
                        acc[(i, j)] += axis.pick(g, i, j);
                    }
                }
            }
        }
    }
}
struct SumSquaresOp;

/// Backward of [`Tape::col_sq_norms`]: `Āᵢⱼ += 2 ḡⱼ Aᵢⱼ`.
struct ColSqNormsOp;

impl Backward for ColSqNormsOp {
    fn name(&self) -> &'static str {
        "col_sq_norms"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let (a, g) = (ctx.input(0), ctx.grad());
            let (mut acc, fresh) = sink.acc_or_new(0);
            for j in 0..a.ncols() {
                let g2 = 2.0 * g[(j, 0)];
                let dst = acc.as_mut().col_mut(j);
                if fresh {
                    zip!(dst, a.col(j)).for_each(|unzip!(acc, a)| *acc = g2 * *a);
                } else {
                    zip!(dst, a.col(j)).for_each(|unzip!(acc, a)| *acc += g2 * *a);
                }
            }
        }
    }
}

impl Backward for SumSquaresOp {
    fn name(&self) -> &'static str {
        "sum_squares"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g2 = 2.0 * ctx.grad()[(0, 0)];
            zip!(sink.acc(0), ctx.input(0)).for_each(|unzip!(acc, a)| *acc += g2 * *a);
        }
    }
}
