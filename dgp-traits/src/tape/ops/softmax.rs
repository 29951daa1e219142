//! Softmax, log-softmax and row-wise log-sum-exp (see the op families in `ops`).

use super::{dot_entries, sum_entries};
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::{Mat, MatRef, unzip, zip};

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
}
