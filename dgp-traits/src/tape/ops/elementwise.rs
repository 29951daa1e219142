//! Entrywise operations of one and two inputs, and scalar broadcasts (see the op families in `ops`).

use super::{dot_entries, sum_entries};
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use dgp_core::transforms::{sigmoid, softplus};
use faer::{unzip, zip};

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
impl Tape {
    /// `A + B` (same shapes).
    #[track_caller]
    pub fn add(&mut self, a: Var, b: Var) -> Var {
        assert_eq!(self.shape(a), self.shape(b), "add: shapes differ");
        let c = self.map2(a, b, |x, y| x + y);
        self.push(c, &[a, b], AddOp)
    }
}

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
            let (acc, fresh) = sink.acc_or_new(0);
            let z = zip!(acc, ctx.grad(), ctx.input(0), ctx.output());
            if fresh {
                z.for_each(|unzip!(acc, g, x, y)| *acc = *g * d(*x, *y));
            } else {
                z.for_each(|unzip!(acc, g, x, y)| *acc += *g * d(*x, *y));
            }
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

    /// Entrywise `softplus(A) = log(1 + eᴬ)` ([`dgp_core::transforms::softplus`]); derivative
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

struct SubOp;

impl Backward for SubOp {
    fn name(&self) -> &'static str {
        "sub"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        sink.add(0, ctx.grad());
        if sink.wants(1) {
            let (acc, fresh) = sink.acc_or_new(1);
            if fresh {
                zip!(acc, ctx.grad()).for_each(|unzip!(acc, g)| *acc = -*g);
            } else {
                zip!(acc, ctx.grad()).for_each(|unzip!(acc, g)| *acc -= *g);
            }
        }
    }
}

/// Adds `g ⊙ other` to the adjoint of input `i`, writing it without a zero fill when it is
/// the first contribution (the same values as adding onto zeros).
fn acc_product(
    sink: &mut GradSink<'_>,
    i: usize,
    g: faer::MatRef<'_, f64>,
    other: faer::MatRef<'_, f64>,
) {
    let (acc, fresh) = sink.acc_or_new(i);
    if fresh {
        zip!(acc, g, other).for_each(|unzip!(acc, g, o)| *acc = *g * *o);
    } else {
        zip!(acc, g, other).for_each(|unzip!(acc, g, o)| *acc += *g * *o);
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
            acc_product(sink, 0, g, b);
        }
        if sink.wants(1) {
            acc_product(sink, 1, g, a);
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
            let (acc, fresh) = sink.acc_or_new(0);
            if fresh {
                zip!(acc, g, b).for_each(|unzip!(acc, g, b)| *acc = *g / *b);
            } else {
                zip!(acc, g, b).for_each(|unzip!(acc, g, b)| *acc += *g / *b);
            }
        }
        if sink.wants(1) {
            let (acc, fresh) = sink.acc_or_new(1);
            if fresh {
                zip!(acc, g, b, y).for_each(|unzip!(acc, g, b, y)| *acc = -(*g * *y / *b));
            } else {
                zip!(acc, g, b, y).for_each(|unzip!(acc, g, b, y)| *acc -= *g * *y / *b);
            }
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
