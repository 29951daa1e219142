//! Elementwise arithmetic, reductions, broadcasts, indexing and matrix products on the
//! [`Tape`].
//!
//! Every operation is a forward method on `Tape` plus one [`Backward`] rule below it.
//! Families:
//! - products: [`Tape::matmul`], [`Tape::matmul_t`], [`Tape::matmul_tn`], [`Tape::matmul_nt`];
//! - elementwise: [`Tape::add`], [`Tape::sub`], [`Tape::mul`], [`Tape::div`], [`Tape::neg`],
//!   [`Tape::scale`], [`Tape::add_scalar`], [`Tape::scale_by`], [`Tape::add_scalar_var`],
//!   [`Tape::exp`], [`Tape::log`], [`Tape::sqrt`], [`Tape::square`], [`Tape::softplus`],
//!   [`Tape::positive`], [`Tape::clamp_min`];
//! - reductions and broadcasts: [`Tape::sum`], [`Tape::weighted_sum`], [`Tape::sum_squares`],
//!   [`Tape::row_sums`], [`Tape::col_sums`], [`Tape::broadcast_rows`],
//!   [`Tape::broadcast_cols`], [`Tape::add_row`], [`Tape::mul_row`], [`Tape::add_col`],
//!   [`Tape::mul_col`], [`Tape::logsumexp_rows`];
//! - structure: [`Tape::transpose`], [`Tape::add_diag`], [`Tape::add_diag_var`],
//!   [`Tape::diag`], [`Tape::diag_matrix`], [`Tape::tril`], [`Tape::lower_cholesky_factor`],
//!   [`Tape::softmax`], [`Tape::log_softmax`];
//! - indexing: [`Tape::gather_rows`], [`Tape::concat_rows`], [`Tape::concat_cols`],
//!   [`Tape::slice_rows`], [`Tape::slice_cols`], [`Tape::reshape_col_major`].
//!
//! Elementwise loops run column by column (the storage order of `Mat`); reductions sum in
//! a fixed order, so results are deterministic.

use super::{Backward, BackwardCtx, GradSink, Tape, Var};
use crate::transforms::{sigmoid, softplus};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, unzip, zip};

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
            let par = super::par_for_output(par, a.nrows(), a.ncols());
            if self.ta {
                matmul(sink.acc(0), Accum::Add, ob, g.transpose(), 1.0, par);
            } else {
                matmul(sink.acc(0), Accum::Add, g, ob.transpose(), 1.0, par);
            }
        }
        if sink.wants(1) {
            let par = super::par_for_output(par, b.nrows(), b.ncols());
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
        let mut c = if va.ncols() == 0 {
            self.alloc_zeros(va.nrows(), vb.ncols())
        } else {
            self.alloc(va.nrows(), vb.ncols())
        };
        let par = super::par_for_output(self.par, va.nrows(), vb.ncols());
        matmul(c.as_mut(), Accum::Replace, va, vb, 1.0, par);
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
        let c = self.map2(a, b, |x, y| x + y);
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
        for i in 0..g.nrows() {
            s += g[(i, j)] * a[(i, j)];
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

// =======================================================================================
// elementwise, one input
// =======================================================================================

/// Backward of an entrywise map `y = f(x)`: `x̄ += ȳ ⊙ f'(x)`, where the derivative is
/// given as a function `d(x, y)` of input and output (whichever is cheaper).
struct ElementwiseOp<D> {
    name: &'static str,
    d: D,
}

impl<D: Fn(f64, f64) -> f64 + Send + Sync + 'static> Backward for ElementwiseOp<D> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let d = &self.d;
            zip!(sink.acc(0), ctx.grad(), ctx.input(0), ctx.output())
                .for_each(|unzip!(acc, g, x, y)| *acc += *g * d(*x, *y));
        }
    }
}

impl Tape {
    /// Records the entrywise map `f` with derivative `d(x, y)` (`y = f(x)`).
    fn elementwise(
        &mut self,
        a: Var,
        name: &'static str,
        f: impl Fn(f64) -> f64,
        d: impl Fn(f64, f64) -> f64 + Send + Sync + 'static,
    ) -> Var {
        let y = self.map1(a, f);
        self.push(y, &[a], ElementwiseOp { name, d })
    }

    /// `−A`.
    pub fn neg(&mut self, a: Var) -> Var {
        self.elementwise(a, "neg", |x| -x, |_, _| -1.0)
    }

    /// `c·A` for a constant `c`.
    pub fn scale(&mut self, a: Var, c: f64) -> Var {
        self.elementwise(a, "scale", move |x| c * x, move |_, _| c)
    }

    /// `A + c` (every entry) for a constant `c`.
    pub fn add_scalar(&mut self, a: Var, c: f64) -> Var {
        self.elementwise(a, "add_scalar", move |x| x + c, |_, _| 1.0)
    }

    /// Entrywise `exp(A)`; derivative `exp(A)`.
    pub fn exp(&mut self, a: Var) -> Var {
        self.elementwise(a, "exp", f64::exp, |_, y| y)
    }

    /// Entrywise natural logarithm (entries must be positive); derivative `1/A`.
    pub fn log(&mut self, a: Var) -> Var {
        self.elementwise(a, "log", f64::ln, |x, _| 1.0 / x)
    }

    /// Entrywise square root (entries must be positive for a finite gradient);
    /// derivative `1/(2√A)`.
    pub fn sqrt(&mut self, a: Var) -> Var {
        self.elementwise(a, "sqrt", f64::sqrt, |_, y| 0.5 / y)
    }

    /// Entrywise square; derivative `2A`.
    pub fn square(&mut self, a: Var) -> Var {
        self.elementwise(a, "square", |x| x * x, |x, _| 2.0 * x)
    }

    /// Entrywise `softplus(A) = log(1 + eᴬ)` ([`crate::transforms::softplus`]); derivative
    /// `sigmoid(A)`.
    pub fn softplus(&mut self, a: Var) -> Var {
        self.elementwise(a, "softplus", softplus, |x, _| sigmoid(x))
    }

    /// `softplus(A) + floor`: the positivity transform of an unconstrained parameter
    /// (variances, lengthscales) with a lower bound `floor`; derivative `sigmoid(A)`.
    pub fn positive(&mut self, a: Var, floor: f64) -> Var {
        self.elementwise(
            a,
            "positive",
            move |x| softplus(x) + floor,
            |x, _| sigmoid(x),
        )
    }

    /// Entrywise `max(A, lo)`; the gradient passes where `A > lo` and is zero elsewhere.
    pub fn clamp_min(&mut self, a: Var, lo: f64) -> Var {
        self.elementwise(
            a,
            "clamp_min",
            move |x| if x > lo { x } else { lo },
            move |x, _| if x > lo { 1.0 } else { 0.0 },
        )
    }
}

// =======================================================================================
// elementwise, two inputs and scalar broadcasts
// =======================================================================================

struct SubOp;

impl Backward for SubOp {
    fn name(&self) -> &'static str {
        "sub"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        sink.add(0, ctx.grad());
        if sink.wants(1) {
            zip!(sink.acc(1), ctx.grad()).for_each(|unzip!(acc, g)| *acc -= *g);
        }
    }
}

struct MulOp;

impl Backward for MulOp {
    fn name(&self) -> &'static str {
        "mul"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (a, b, g) = (ctx.input(0), ctx.input(1), ctx.grad());
        if sink.wants(0) {
            zip!(sink.acc(0), g, b).for_each(|unzip!(acc, g, b)| *acc += *g * *b);
        }
        if sink.wants(1) {
            zip!(sink.acc(1), g, a).for_each(|unzip!(acc, g, a)| *acc += *g * *a);
        }
    }
}

struct DivOp;

impl Backward for DivOp {
    fn name(&self) -> &'static str {
        "div"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (b, y, g) = (ctx.input(1), ctx.output(), ctx.grad());
        if sink.wants(0) {
            zip!(sink.acc(0), g, b).for_each(|unzip!(acc, g, b)| *acc += *g / *b);
        }
        if sink.wants(1) {
            zip!(sink.acc(1), g, b, y).for_each(|unzip!(acc, g, b, y)| *acc -= *g * *y / *b);
        }
    }
}

struct ScaleByOp;

impl Backward for ScaleByOp {
    fn name(&self) -> &'static str {
        "scale_by"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (a, s, g) = (ctx.input(0), ctx.input(1)[(0, 0)], ctx.grad());
        if sink.wants(0) {
            zip!(sink.acc(0), g).for_each(|unzip!(acc, g)| *acc += s * *g);
        }
        if sink.wants(1) {
            sink.acc(1)[(0, 0)] += dot_entries(g, a);
        }
    }
}

struct AddScalarVarOp;

impl Backward for AddScalarVarOp {
    fn name(&self) -> &'static str {
        "add_scalar_var"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        sink.add(0, ctx.grad());
        if sink.wants(1) {
            sink.acc(1)[(0, 0)] += sum_entries(ctx.grad());
        }
    }
}

impl Tape {
    /// `A − B` (same shapes).
    #[track_caller]
    pub fn sub(&mut self, a: Var, b: Var) -> Var {
        self.assert_same_shape(a, b, "sub");
        let c = self.map2(a, b, |x, y| x - y);
        self.push(c, &[a, b], SubOp)
    }

    /// Hadamard product `A ⊙ B` (same shapes); `Ā = C̄ ⊙ B`, `B̄ = C̄ ⊙ A`.
    #[track_caller]
    pub fn mul(&mut self, a: Var, b: Var) -> Var {
        self.assert_same_shape(a, b, "mul");
        let c = self.map2(a, b, |x, y| x * y);
        self.push(c, &[a, b], MulOp)
    }

    /// Entrywise quotient `A ⊘ B` (same shapes; `B` nonzero); `Ā = C̄ ⊘ B`,
    /// `B̄ = −C̄ ⊙ C ⊘ B`.
    #[track_caller]
    pub fn div(&mut self, a: Var, b: Var) -> Var {
        self.assert_same_shape(a, b, "div");
        let c = self.map2(a, b, |x, y| x / y);
        self.push(c, &[a, b], DivOp)
    }

    /// `s·A` for a 1×1 variable `s`; `s̄ = Σ C̄ ⊙ A`.
    #[track_caller]
    pub fn scale_by(&mut self, a: Var, s: Var) -> Var {
        self.assert_scalar_var(s, "scale_by");
        let sv = self.scalar(s);
        let c = self.map1(a, |x| sv * x);
        self.push(c, &[a, s], ScaleByOp)
    }

    /// `A + s` (every entry) for a 1×1 variable `s`; `s̄ = Σ C̄`.
    #[track_caller]
    pub fn add_scalar_var(&mut self, a: Var, s: Var) -> Var {
        self.assert_scalar_var(s, "add_scalar_var");
        let sv = self.scalar(s);
        let c = self.map1(a, |x| x + sv);
        self.push(c, &[a, s], AddScalarVarOp)
    }
}

// =======================================================================================
// row/column reductions and broadcasts
// =======================================================================================

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
            let mut acc = sink.acc(0);
            for j in 0..acc.ncols() {
                for i in 0..acc.nrows() {
                    acc[(i, j)] += axis.pick(g, i, j);
                }
            }
        }
    }
}

/// `broadcast_rows` / `broadcast_cols` (`add: false`, the vector is input 0): the vector
/// repeated along `axis`; `add_row` / `add_col` (`add: true`, inputs `A`, `v`):
/// `A + broadcast(v)`. The vector's adjoint is the adjoint summed over `axis`.
struct BroadcastOp {
    axis: Axis,
    add: bool,
}

impl Backward for BroadcastOp {
    fn name(&self) -> &'static str {
        match (self.add, self.axis) {
            (false, Axis::Row) => "broadcast_rows",
            (false, Axis::Col) => "broadcast_cols",
            (true, Axis::Row) => "add_row",
            (true, Axis::Col) => "add_col",
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let g = ctx.grad();
        let vector = if self.add {
            sink.add(0, g);
            1
        } else {
            0
        };
        if sink.wants(vector) {
            self.axis
                .reduce_into(sink.acc(vector), g.nrows(), g.ncols(), |i, j| g[(i, j)]);
        }
    }
}

/// `mul_row` / `mul_col`: `A ⊙ broadcast(v)`.
struct MulBroadcastOp {
    axis: Axis,
}

impl Backward for MulBroadcastOp {
    fn name(&self) -> &'static str {
        match self.axis {
            Axis::Row => "mul_row",
            Axis::Col => "mul_col",
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (a, v, g, axis) = (ctx.input(0), ctx.input(1), ctx.grad(), self.axis);
        if sink.wants(0) {
            let mut acc = sink.acc(0);
            for j in 0..g.ncols() {
                for i in 0..g.nrows() {
                    acc[(i, j)] += g[(i, j)] * axis.pick(v, i, j);
                }
            }
        }
        if sink.wants(1) {
            axis.reduce_into(sink.acc(1), g.nrows(), g.ncols(), |i, j| {
                g[(i, j)] * a[(i, j)]
            });
        }
    }
}

impl Tape {
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

    /// The 1×m row `r` repeated `n` times (→ n×m); backward sums the columns.
    #[track_caller]
    pub fn broadcast_rows(&mut self, r: Var, n: usize) -> Var {
        let vr = self.value(r);
        assert_eq!(
            vr.nrows(),
            1,
            "broadcast_rows: expected a 1×m row, got {}×{}",
            vr.nrows(),
            vr.ncols()
        );
        let mut out = self.alloc(n, vr.ncols());
        for j in 0..vr.ncols() {
            out.col_mut(j).fill(vr[(0, j)]);
        }
        self.push(
            out,
            &[r],
            BroadcastOp {
                axis: Axis::Row,
                add: false,
            },
        )
    }

    /// The n×1 column `c` repeated `m` times (→ n×m); backward sums the rows.
    #[track_caller]
    pub fn broadcast_cols(&mut self, c: Var, m: usize) -> Var {
        let vc = self.value(c);
        assert_eq!(
            vc.ncols(),
            1,
            "broadcast_cols: expected an n×1 column, got {}×{}",
            vc.nrows(),
            vc.ncols()
        );
        let mut out = self.alloc(vc.nrows(), m);
        for j in 0..m {
            out.col_mut(j).copy_from(vc.col(0));
        }
        self.push(
            out,
            &[c],
            BroadcastOp {
                axis: Axis::Col,
                add: false,
            },
        )
    }

    #[track_caller]
    fn broadcast_binary(&mut self, a: Var, v: Var, axis: Axis, mul: bool, op: &str) -> Var {
        let (va, vv) = (self.value(a), self.value(v));
        let expected = match axis {
            Axis::Row => (1, va.ncols()),
            Axis::Col => (va.nrows(), 1),
        };
        assert!(
            (vv.nrows(), vv.ncols()) == expected,
            "{op}: {}×{} matrix with {}×{} vector (expected {}×{})",
            va.nrows(),
            va.ncols(),
            vv.nrows(),
            vv.ncols(),
            expected.0,
            expected.1
        );
        let mut out = self.alloc(va.nrows(), va.ncols());
        for j in 0..va.ncols() {
            for i in 0..va.nrows() {
                let b = axis.pick(vv, i, j);
                out[(i, j)] = if mul { va[(i, j)] * b } else { va[(i, j)] + b };
            }
        }
        if mul {
            self.push(out, &[a, v], MulBroadcastOp { axis })
        } else {
            self.push(out, &[a, v], BroadcastOp { axis, add: true })
        }
    }

    /// `A + 1 r` — adds the 1×m row `r` to every row of the n×m `A`.
    #[track_caller]
    pub fn add_row(&mut self, a: Var, r: Var) -> Var {
        self.broadcast_binary(a, r, Axis::Row, false, "add_row")
    }

    /// `A ⊙ (1 r)` — scales column j of `A` by `r_j` (r is 1×m).
    #[track_caller]
    pub fn mul_row(&mut self, a: Var, r: Var) -> Var {
        self.broadcast_binary(a, r, Axis::Row, true, "mul_row")
    }

    /// `A + c 1ᵀ` — adds the n×1 column `c` to every column of the n×m `A`.
    #[track_caller]
    pub fn add_col(&mut self, a: Var, c: Var) -> Var {
        self.broadcast_binary(a, c, Axis::Col, false, "add_col")
    }

    /// `A ⊙ (c 1ᵀ)` — scales row i of `A` by `c_i` (c is n×1).
    #[track_caller]
    pub fn mul_col(&mut self, a: Var, c: Var) -> Var {
        self.broadcast_binary(a, c, Axis::Col, true, "mul_col")
    }
}

// =======================================================================================
// transpose, diagonal and triangular structure
// =======================================================================================

struct TransposeOp;

impl Backward for TransposeOp {
    fn name(&self) -> &'static str {
        "transpose"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        sink.add(0, ctx.grad().transpose());
    }
}

/// Backward of ops whose Jacobian w.r.t. input 0 is the identity (`add_diag`).
struct PassOp {
    name: &'static str,
}

impl Backward for PassOp {
    fn name(&self) -> &'static str {
        self.name
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        sink.add(0, ctx.grad());
    }
}

struct AddDiagVarOp;

impl Backward for AddDiagVarOp {
    fn name(&self) -> &'static str {
        "add_diag_var"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let g = ctx.grad();
        sink.add(0, g);
        if sink.wants(1) {
            let tr: f64 = (0..g.nrows()).map(|i| g[(i, i)]).sum();
            sink.acc(1)[(0, 0)] += tr;
        }
    }
}

struct DiagOp;

impl Backward for DiagOp {
    fn name(&self) -> &'static str {
        "diag"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad();
            let mut acc = sink.acc(0);
            for i in 0..g.nrows() {
                acc[(i, i)] += g[(i, 0)];
            }
        }
    }
}

struct DiagMatrixOp;

impl Backward for DiagMatrixOp {
    fn name(&self) -> &'static str {
        "diag_matrix"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad();
            let mut acc = sink.acc(0);
            for i in 0..g.nrows() {
                acc[(i, 0)] += g[(i, i)];
            }
        }
    }
}

struct TrilOp {
    strict: bool,
}

impl Backward for TrilOp {
    fn name(&self) -> &'static str {
        "tril"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad();
            let first = usize::from(self.strict);
            let mut acc = sink.acc(0);
            for j in 0..g.ncols() {
                for i in (j + first).min(g.nrows())..g.nrows() {
                    acc[(i, j)] += g[(i, j)];
                }
            }
        }
    }
}

struct LowerCholeskyFactorOp;

impl Backward for LowerCholeskyFactorOp {
    fn name(&self) -> &'static str {
        "lower_cholesky_factor"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let (a, g) = (ctx.input(0), ctx.grad());
            let mut acc = sink.acc(0);
            for j in 0..g.ncols() {
                acc[(j, j)] += g[(j, j)] * sigmoid(a[(j, j)]);
                for i in j + 1..g.nrows() {
                    acc[(i, j)] += g[(i, j)];
                }
            }
        }
    }
}

impl Tape {
    /// `Aᵀ`.
    pub fn transpose(&mut self, a: Var) -> Var {
        let t = self.alloc_copy(self.value(a).transpose());
        self.push(t, &[a], TransposeOp)
    }

    /// `A + c·I` for a square `A` and constant `c`.
    #[track_caller]
    pub fn add_diag(&mut self, a: Var, c: f64) -> Var {
        let n = self.assert_square(a, "add_diag");
        let mut out = self.alloc_copy(self.value(a));
        for i in 0..n {
            out[(i, i)] += c;
        }
        self.push(out, &[a], PassOp { name: "add_diag" })
    }

    /// `A + s·I` for a square `A` and a 1×1 variable `s`; `s̄ = tr(C̄)`.
    #[track_caller]
    pub fn add_diag_var(&mut self, a: Var, s: Var) -> Var {
        let n = self.assert_square(a, "add_diag_var");
        self.assert_scalar_var(s, "add_diag_var");
        let sv = self.scalar(s);
        let mut out = self.alloc_copy(self.value(a));
        for i in 0..n {
            out[(i, i)] += sv;
        }
        self.push(out, &[a, s], AddDiagVarOp)
    }

    /// The diagonal of a square n×n `A` as an n×1 column.
    #[track_caller]
    pub fn diag(&mut self, a: Var) -> Var {
        let n = self.assert_square(a, "diag");
        let va = self.value(a);
        let out = Mat::from_fn(n, 1, |i, _| va[(i, i)]);
        self.push(out, &[a], DiagOp)
    }

    /// The n×n diagonal matrix with the n×1 column `v` on its diagonal.
    #[track_caller]
    pub fn diag_matrix(&mut self, v: Var) -> Var {
        let vv = self.value(v);
        assert_eq!(
            vv.ncols(),
            1,
            "diag_matrix: expected an n×1 column, got {}×{}",
            vv.nrows(),
            vv.ncols()
        );
        let n = vv.nrows();
        let mut out = Mat::zeros(n, n);
        for i in 0..n {
            out[(i, i)] = vv[(i, 0)];
        }
        self.push(out, &[v], DiagMatrixOp)
    }

    /// The lower triangle of `A` (entries with `i ≥ j`, or `i > j` when `strict`), the rest
    /// set to zero. Works for rectangular `A`.
    pub fn tril(&mut self, a: Var, strict: bool) -> Var {
        let va = self.value(a);
        let first = usize::from(strict);
        let out = Mat::from_fn(va.nrows(), va.ncols(), |i, j| {
            if i >= j + first { va[(i, j)] } else { 0.0 }
        });
        self.push(out, &[a], TrilOp { strict })
    }

    /// The "Cholesky factor with positive diagonal" parameter transform of a square `A`:
    /// `L = strict_lower(A) + diag(softplus(diag A) + floor)`. The upper triangle of `A` is
    /// ignored (gets zero gradient); diagonal derivative `sigmoid(Aᵢᵢ)`.
    #[track_caller]
    pub fn lower_cholesky_factor(&mut self, a: Var, floor: f64) -> Var {
        let n = self.assert_square(a, "lower_cholesky_factor");
        let va = self.value(a);
        let mut out = self.alloc(n, n);
        for j in 0..n {
            for i in 0..n {
                out[(i, j)] = match i.cmp(&j) {
                    std::cmp::Ordering::Greater => va[(i, j)],
                    std::cmp::Ordering::Equal => softplus(va[(i, i)]) + floor,
                    std::cmp::Ordering::Less => 0.0,
                };
            }
        }
        self.push(out, &[a], LowerCholeskyFactorOp)
    }
}

// =======================================================================================
// softmax, log-softmax, log-sum-exp, sum of squares
// =======================================================================================

/// `max` of all entries (−∞ for an empty matrix).
fn max_entry(m: MatRef<'_, f64>) -> f64 {
    let mut mx = f64::NEG_INFINITY;
    for j in 0..m.ncols() {
        for i in 0..m.nrows() {
            mx = mx.max(m[(i, j)]);
        }
    }
    mx
}

/// `(max, Σ exp(a − max))` over all entries (`(−∞, 0)` for an empty or all-−∞ matrix),
/// the stable ingredients of softmax and log-sum-exp.
fn max_and_shifted_sum(a: MatRef<'_, f64>) -> (f64, f64) {
    let mx = max_entry(a);
    if !mx.is_finite() {
        return (mx, 0.0);
    }
    let mut s = 0.0;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            s += (a[(i, j)] - mx).exp();
        }
    }
    (mx, s)
}

struct SoftmaxOp;

impl Backward for SoftmaxOp {
    fn name(&self) -> &'static str {
        "softmax"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            // Ā = P ⊙ (Ḡ − ⟨Ḡ, P⟩).
            let (p, g) = (ctx.output(), ctx.grad());
            let inner = dot_entries(g, p);
            zip!(sink.acc(0), g, p).for_each(|unzip!(acc, g, p)| *acc += *p * (*g - inner));
        }
    }
}

struct LogSoftmaxOp;

impl Backward for LogSoftmaxOp {
    fn name(&self) -> &'static str {
        "log_softmax"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            // Ā = Ḡ − softmax(A) Σ Ḡ, with softmax(A) = exp(output).
            let (y, g) = (ctx.output(), ctx.grad());
            let total = sum_entries(g);
            zip!(sink.acc(0), g, y).for_each(|unzip!(acc, g, y)| *acc += *g - y.exp() * total);
        }
    }
}

/// Caches each row's maximum `mᵢ` and shifted sum `sᵢ = Σⱼ exp(Aᵢⱼ − mᵢ)`, so that the
/// backward softmax `exp(Aᵢⱼ − mᵢ) / sᵢ` stays accurate when `|mᵢ|` is huge (where
/// `exp(Aᵢⱼ − outᵢ)` would lose `log sᵢ` to rounding).
struct LogSumExpRowsOp {
    max: Vec<f64>,
    sum: Vec<f64>,
}

impl Backward for LogSumExpRowsOp {
    fn name(&self) -> &'static str {
        "logsumexp_rows"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            // Āᵢⱼ = ḡᵢ · softmax(Aᵢ·)ⱼ.
            let (a, g) = (ctx.input(0), ctx.grad());
            let mut acc = sink.acc(0);
            for j in 0..a.ncols() {
                for i in 0..a.nrows() {
                    let m = self.max[i];
                    if m.is_finite() {
                        acc[(i, j)] += g[(i, 0)] * (a[(i, j)] - m).exp() / self.sum[i];
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

impl Tape {
    /// Softmax over **all** entries of `A`: `Pᵢⱼ = exp(Aᵢⱼ) / Σ exp(A)` (same shape, entries
    /// on the simplex; e.g. quadrature weights from unconstrained logits). Computed with the
    /// maximum subtracted, so huge logits are fine; `A` must have an entry above −∞.
    /// Backward `Ā = P ⊙ (P̄ − ⟨P̄, P⟩)`.
    pub fn softmax(&mut self, a: Var) -> Var {
        let va = self.value(a);
        let (mx, s) = max_and_shifted_sum(va);
        let out = self.map1(a, |x| (x - mx).exp() / s);
        self.push(out, &[a], SoftmaxOp)
    }

    /// `log softmax(A) = A − log Σ exp(A)` over all entries (stable). Backward
    /// `Ā = Ḡ − softmax(A) Σ Ḡ`.
    pub fn log_softmax(&mut self, a: Var) -> Var {
        let va = self.value(a);
        let (mx, s) = max_and_shifted_sum(va);
        let ls = s.ln();
        let out = self.map1(a, |x| (x - mx) - ls);
        self.push(out, &[a], LogSoftmaxOp)
    }

    /// Row-wise log-sum-exp: n×k → n×1, `outᵢ = log Σⱼ exp(Aᵢⱼ)`, computed with each row's
    /// maximum subtracted so huge entries stay finite (a row of −∞, or k = 0, gives −∞).
    /// Backward: `Āᵢⱼ = ḡᵢ softmax(Aᵢ·)ⱼ`. Used for mixture likelihoods (DSPP, eq. 11).
    pub fn logsumexp_rows(&mut self, a: Var) -> Var {
        let va = self.value(a);
        let (n, k) = (va.nrows(), va.ncols());
        let mut max = vec![f64::NEG_INFINITY; n];
        for j in 0..k {
            for (i, m) in max.iter_mut().enumerate() {
                *m = m.max(va[(i, j)]);
            }
        }
        let mut sum = vec![0.0; n];
        for j in 0..k {
            for i in 0..n {
                if max[i].is_finite() {
                    sum[i] += (va[(i, j)] - max[i]).exp();
                }
            }
        }
        let out = Mat::from_fn(n, 1, |i, _| {
            let m = max[i];
            if m.is_finite() { m + sum[i].ln() } else { m }
        });
        self.push(out, &[a], LogSumExpRowsOp { max, sum })
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
                Some(c) => crate::lanes::sum_squares(c.as_slice()),
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

// =======================================================================================
// indexing: gather, concatenate, slice, reshape
// =======================================================================================

struct GatherRowsOp {
    idx: Vec<usize>,
}

impl Backward for GatherRowsOp {
    fn name(&self) -> &'static str {
        "gather_rows"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad();
            let mut acc = sink.acc(0);
            for j in 0..g.ncols() {
                for (r, &src) in self.idx.iter().enumerate() {
                    acc[(src, j)] += g[(r, j)];
                }
            }
        }
    }
}

/// Concatenation along `axis` (Row: stacked vertically; Col: side by side) with the
/// starting offset of each input.
struct ConcatOp {
    axis: Axis,
    offsets: Vec<usize>,
}

impl Backward for ConcatOp {
    fn name(&self) -> &'static str {
        match self.axis {
            Axis::Row => "concat_rows",
            Axis::Col => "concat_cols",
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let g = ctx.grad();
        for (k, &off) in self.offsets.iter().enumerate() {
            let x = ctx.input(k);
            let part = match self.axis {
                Axis::Row => g.subrows(off, x.nrows()),
                Axis::Col => g.subcols(off, x.ncols()),
            };
            sink.add(k, part);
        }
    }
}

/// A contiguous block of rows (axis = Row) or columns (axis = Col).
struct SliceOp {
    axis: Axis,
    start: usize,
}

impl Backward for SliceOp {
    fn name(&self) -> &'static str {
        match self.axis {
            Axis::Row => "slice_rows",
            Axis::Col => "slice_cols",
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let g = ctx.grad();
            let acc = sink.acc(0);
            let block = match self.axis {
                Axis::Row => acc.subrows_mut(self.start, g.nrows()),
                Axis::Col => acc.subcols_mut(self.start, g.ncols()),
            };
            zip!(block, g).for_each(|unzip!(acc, g)| *acc += *g);
        }
    }
}

struct ReshapeOp;

/// Copies the entries of `src` into `dst` in column-major order (equal entry counts).
fn copy_col_major(src: MatRef<'_, f64>, mut dst: faer::MatMut<'_, f64>, add: bool) {
    let r = dst.nrows();
    let mut k = 0;
    for j in 0..src.ncols() {
        for i in 0..src.nrows() {
            let (di, dj) = (k % r, k / r);
            if add {
                dst[(di, dj)] += src[(i, j)];
            } else {
                dst[(di, dj)] = src[(i, j)];
            }
            k += 1;
        }
    }
}

impl Backward for ReshapeOp {
    fn name(&self) -> &'static str {
        "reshape_col_major"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            copy_col_major(ctx.grad(), sink.acc(0), true);
        }
    }
}

impl Tape {
    /// Rows `A[idx[0]], A[idx[1]], …` (→ len(idx)×m). Indices may repeat; the backward pass
    /// scatter-adds. Panics on an index out of range.
    #[track_caller]
    pub fn gather_rows(&mut self, a: Var, idx: &[usize]) -> Var {
        let va = self.value(a);
        let n = va.nrows();
        if let Some(&bad) = idx.iter().find(|&&i| i >= n) {
            panic!("gather_rows: index {bad} out of range for {n} rows");
        }
        let mut out = self.alloc(idx.len(), va.ncols());
        for j in 0..va.ncols() {
            let (src, dst) = (va.col(j), out.col_mut(j));
            for (o, &r) in dst.iter_mut().zip(idx) {
                *o = src[r];
            }
        }
        self.push(out, &[a], GatherRowsOp { idx: idx.to_vec() })
    }

    #[track_caller]
    fn concat(&mut self, parts: &[Var], axis: Axis, op: &str) -> Var {
        assert!(!parts.is_empty(), "{op}: nothing to concatenate");
        let (r0, c0) = self.shape(parts[0]);
        let mut offsets = Vec::with_capacity(parts.len());
        let mut total = 0;
        for &p in parts {
            let (r, c) = self.shape(p);
            let (len, other, other0) = match axis {
                Axis::Row => (r, c, c0),
                Axis::Col => (c, r, r0),
            };
            assert_eq!(other, other0, "{op}: {r}×{c} block does not fit {r0}×{c0}");
            offsets.push(total);
            total += len;
        }
        let mut out = match axis {
            Axis::Row => self.alloc(total, c0),
            Axis::Col => self.alloc(r0, total),
        };
        for (&p, &off) in parts.iter().zip(&offsets) {
            let v = self.value(p);
            match axis {
                Axis::Row => out.as_mut().subrows_mut(off, v.nrows()).copy_from(v),
                Axis::Col => out.as_mut().subcols_mut(off, v.ncols()).copy_from(v),
            }
        }
        self.push(out, parts, ConcatOp { axis, offsets })
    }

    /// Vertical concatenation `[A₁; A₂; …]` (equal column counts).
    #[track_caller]
    pub fn concat_rows(&mut self, parts: &[Var]) -> Var {
        self.concat(parts, Axis::Row, "concat_rows")
    }

    /// Horizontal concatenation `[A₁, A₂, …]` (equal row counts).
    #[track_caller]
    pub fn concat_cols(&mut self, parts: &[Var]) -> Var {
        self.concat(parts, Axis::Col, "concat_cols")
    }

    /// Rows `start..start+len` of `A`.
    #[track_caller]
    pub fn slice_rows(&mut self, a: Var, start: usize, len: usize) -> Var {
        let va = self.value(a);
        assert!(
            start + len <= va.nrows(),
            "slice_rows: rows {start}..{} of a {}-row matrix",
            start + len,
            va.nrows()
        );
        let out = self.alloc_copy(va.subrows(start, len));
        self.push(
            out,
            &[a],
            SliceOp {
                axis: Axis::Row,
                start,
            },
        )
    }

    /// Columns `start..start+len` of `A`.
    #[track_caller]
    pub fn slice_cols(&mut self, a: Var, start: usize, len: usize) -> Var {
        let va = self.value(a);
        assert!(
            start + len <= va.ncols(),
            "slice_cols: columns {start}..{} of a {}-column matrix",
            start + len,
            va.ncols()
        );
        let out = self.alloc_copy(va.subcols(start, len));
        self.push(
            out,
            &[a],
            SliceOp {
                axis: Axis::Col,
                start,
            },
        )
    }

    /// The entries of `A` in column-major order, laid out as an `r × c` matrix (column-major
    /// too); `r·c` must equal the number of entries. E.g. an n×m matrix to an nm×1 column.
    #[track_caller]
    pub fn reshape_col_major(&mut self, a: Var, r: usize, c: usize) -> Var {
        let va = self.value(a);
        assert_eq!(
            va.nrows() * va.ncols(),
            r * c,
            "reshape_col_major: {}×{} into {r}×{c}",
            va.nrows(),
            va.ncols()
        );
        let mut out = Mat::zeros(r, c);
        if r > 0 {
            copy_col_major(va, out.as_mut(), false);
        }
        self.push(out, &[a], ReshapeOp)
    }
}
