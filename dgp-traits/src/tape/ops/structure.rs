//! Transpose, diagonal and triangular structure (see the op families in `ops`).

use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use dgp_core::transforms::{sigmoid, softplus};
use faer::Mat;

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
                let (gj, aj) = (g.col(j), acc.as_mut().col_mut(j));
                match (gj.try_as_col_major(), aj.try_as_col_major_mut()) {
                    (Some(gj), Some(aj)) => {
                        let below = aj.as_slice_mut()[j + 1..].iter_mut();
                        below
                            .zip(&gj.as_slice()[j + 1..])
                            .for_each(|(o, &v)| *o += v);
                    }
                    _ => {
                        for i in j + 1..g.nrows() {
                            acc[(i, j)] += g[(i, j)];
                        }
                    }
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
        for (j, src) in va.col_iter().enumerate() {
            let dst = out.col_as_slice_mut(j);
            dst[..j].fill(0.0);
            dst[j] = softplus(src[j]) + floor;
            match src.try_as_col_major() {
                Some(src) => dst[j + 1..].copy_from_slice(&src.as_slice()[j + 1..]),
                None => (j + 1..n).for_each(|i| dst[i] = src[i]),
            }
        }
        self.push(out, &[a], LowerCholeskyFactorOp)
    }
}

#[cfg(test)]
mod tests {
    use dgp_core::transforms::raw_lower_factor;

    #[test]
    fn raw_lower_factor_inverts_the_tape_transform() {
        let l = faer::mat![[0.5, 9.0], [-0.3, 2.0]];
        let raw = raw_lower_factor(l.as_ref(), 1e-10);
        let mut t = crate::tape::Tape::new();
        let v = t.constant(raw);
        let back = t.lower_cholesky_factor(v, 1e-10);
        let b = t.value(back);
        assert!((b[(0, 0)] - 0.5).abs() < 1e-14 && (b[(1, 1)] - 2.0).abs() < 1e-14);
        assert_eq!((b[(1, 0)], b[(0, 1)]), (-0.3, 0.0));
    }
}
