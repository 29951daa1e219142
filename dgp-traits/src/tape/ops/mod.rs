//! Elementwise arithmetic, reductions, broadcasts, indexing and matrix products on the
//! [`Tape`], one op family per file.
//!
//! Every operation is a forward method on `Tape` plus one [`Backward`](super::Backward) rule beside it.
//! Families:
//! - products (`matmul.rs`): [`Tape::matmul`], [`Tape::matmul_t`],
//!   [`Tape::matmul_tn`], [`Tape::matmul_nt`];
//! - elementwise (`elementwise.rs`): [`Tape::add`], [`Tape::sub`],
//!   [`Tape::mul`], [`Tape::div`], [`Tape::neg`], [`Tape::scale`], [`Tape::add_scalar`],
//!   [`Tape::scale_by`], [`Tape::add_scalar_var`], [`Tape::exp`], [`Tape::log`],
//!   [`Tape::sqrt`], [`Tape::square`], [`Tape::softplus`], [`Tape::positive`],
//!   [`Tape::clamp_min`];
//! - reductions (`reduce.rs`): [`Tape::sum`], [`Tape::weighted_sum`],
//!   [`Tape::sum_squares`], [`Tape::col_sq_norms`], [`Tape::row_sums`], [`Tape::col_sums`];
//! - broadcasts (`broadcast.rs`): [`Tape::broadcast_rows`],
//!   [`Tape::broadcast_cols`], [`Tape::add_row`], [`Tape::mul_row`], [`Tape::add_col`],
//!   [`Tape::mul_col`];
//! - softmax family (`softmax.rs`): [`Tape::softmax`], [`Tape::log_softmax`],
//!   [`Tape::logsumexp_rows`];
//! - structure (`structure.rs`): [`Tape::transpose`], [`Tape::add_diag`],
//!   [`Tape::add_diag_var`], [`Tape::diag`], [`Tape::diag_matrix`], [`Tape::tril`],
//!   [`Tape::lower_cholesky_factor`];
//! - indexing (`index.rs`): [`Tape::gather_rows`], [`Tape::concat_rows`],
//!   [`Tape::concat_cols`], [`Tape::slice_rows`], [`Tape::slice_cols`],
//!   [`Tape::reshape_col_major`].
//!
//! Elementwise loops run column by column (the storage order of `Mat`); reductions sum in
//! a fixed order, so results are deterministic. This file holds what several families
//! share: the entrywise map helpers, shape assertions, fixed-order sums and `Axis`.

mod broadcast;
mod elementwise;
mod index;
mod matmul;
mod reduce;
mod softmax;
mod structure;

use super::{Tape, Var};
use faer::{Mat, MatRef, unzip, zip};

/// `m` or its transpose, as a view.
fn view(m: MatRef<'_, f64>, transpose: bool) -> MatRef<'_, f64> {
    if transpose { m.transpose() } else { m }
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

// =======================================================================================
// helpers
// =======================================================================================

/// A 1×1 matrix holding `x`.
fn scalar_mat(x: f64) -> Mat<f64> {
    Mat::from_fn(1, 1, |_, _| x)
}

impl Tape {
    /// `f` applied entrywise to the value of `a`, in a pooled buffer.
    fn map1(&self, a: Var, f: impl Fn(f64) -> f64) -> Mat<f64> {
        let va = self.value(a);
        let mut out = self.alloc(va.nrows(), va.ncols());
        zip!(out.as_mut(), va).for_each(|unzip!(o, x)| *o = f(*x));
        out
    }

    /// `f` applied to corresponding entries of the values of `a` and `b` (equal shapes),
    /// in a pooled buffer.
    fn map2(&self, a: Var, b: Var, f: impl Fn(f64, f64) -> f64) -> Mat<f64> {
        let (va, vb) = (self.value(a), self.value(b));
        let mut out = self.alloc(va.nrows(), va.ncols());
        zip!(out.as_mut(), va, vb).for_each(|unzip!(o, x, y)| *o = f(*x, *y));
        out
    }
}

/// Sum of `g ⊙ a` in column-major order.
fn dot_entries(g: MatRef<'_, f64>, a: MatRef<'_, f64>) -> f64 {
    let mut s = 0.0;
    for j in 0..g.ncols() {
        match (g.col(j).try_as_col_major(), a.col(j).try_as_col_major()) {
            (Some(x), Some(y)) => s += dgp_core::lanes::dot(x.as_slice(), y.as_slice()),
            _ => {
                for i in 0..g.nrows() {
                    s += g[(i, j)] * a[(i, j)];
                }
            }
        }
    }
    s
}

impl Tape {
    #[track_caller]
    fn assert_same_shape(&self, a: Var, b: Var, op: &str) {
        let (sa, sb) = (self.shape(a), self.shape(b));
        assert!(
            sa == sb,
            "{op}: shapes {}×{} and {}×{} differ",
            sa.0,
            sa.1,
            sb.0,
            sb.1
        );
    }

    #[track_caller]
    fn assert_scalar_var(&self, s: Var, op: &str) {
        let (r, c) = self.shape(s);
        assert!((r, c) == (1, 1), "{op}: expected a 1×1 scalar, got {r}×{c}");
    }

    #[track_caller]
    fn assert_square(&self, a: Var, op: &str) -> usize {
        let (r, c) = self.shape(a);
        assert!(r == c, "{op}: expected a square matrix, got {r}×{c}");
        r
    }
}

/// Whether a row vector (1×m, shared by all rows) or a column vector (n×1, shared by all
/// columns) is broadcast.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Axis {
    /// A 1×m row repeated down the rows.
    Row,
    /// An n×1 column repeated across the columns.
    Col,
}

impl Axis {
    /// Index into the broadcast vector for matrix entry (i, j).
    #[inline]
    fn pick(self, v: MatRef<'_, f64>, i: usize, j: usize) -> f64 {
        match self {
            Axis::Row => v[(0, j)],
            Axis::Col => v[(i, 0)],
        }
    }

    /// Adds `Σ` over the broadcast axis of `f(i, j)` into `acc` (1×m or n×1).
    #[inline]
    fn reduce_into(
        self,
        mut acc: faer::MatMut<'_, f64>,
        n: usize,
        m: usize,
        f: impl Fn(usize, usize) -> f64,
    ) {
        match self {
            Axis::Row => {
                for j in 0..m {
                    let mut s = 0.0;
                    for i in 0..n {
                        s += f(i, j);
                    }
                    acc[(0, j)] += s;
                }
            }
            Axis::Col => {
                for j in 0..m {
                    for i in 0..n {
                        acc[(i, 0)] += f(i, j);
                    }
                }
            }
        }
    }
}
