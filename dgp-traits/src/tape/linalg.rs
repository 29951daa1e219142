//! Cholesky factorisation, triangular solves and log-determinants on the [`Tape`].
//!
//! Backward rules (workspace notes §4):
//! - Cholesky `A = L Lᵀ` (Murray 2016, "Differentiation of the Cholesky decomposition",
//!   eq. 10): `P = Φ(Lᵀ L̄)` with `Φ` = lower triangle with halved diagonal, then
//!   `Ā = L⁻ᵀ P L⁻¹` by two triangular solves, symmetrised `½(Ā + Āᵀ)`.
//! - Triangular solve `X = op(T)⁻¹ B`: `B̄ = op(T)⁻ᵀ X̄`, `op(T)‾ = −B̄ Xᵀ`, restricted to
//!   the triangle of `T`.
//! - `log det = 2 Σ log Lᵢᵢ`: `L̄ᵢᵢ = 2 ḡ / Lᵢᵢ`.
//!
//! The numerics (and the jitter rule) live in [`dgp_core::linalg`]; this module only adds the
//! adjoints. No rule forms an explicit inverse.

use super::{Backward, BackwardCtx, GradSink, Tape, Var, chunked};
use dgp_core::Result;
use dgp_core::linalg::{self as la, JitterConfig, Tri};
use faer::linalg::matmul::triangular::{BlockStructure, matmul as tri_matmul};
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rayon::prelude::*;

/// `acc += α · lhs · rhs` on the `triangle` of `acc` only (the other entries untouched):
/// the gradient of a triangular matrix argument, e.g. `T̄ = −tril(B̄ Xᵀ)`.
fn add_triangle_of_product(
    acc: MatMut<'_, f64>,
    triangle: BlockStructure,
    lhs: MatRef<'_, f64>,
    rhs: MatRef<'_, f64>,
    alpha: f64,
    par: Par,
) {
    let rect = BlockStructure::Rectangular;
    tri_matmul(acc, triangle, Accum::Add, lhs, rect, rhs, rect, alpha, par);
}

/// Panics unless `t` is square with as many rows as the right-hand side `b`.
#[track_caller]
fn assert_square_system(t: MatRef<'_, f64>, b: MatRef<'_, f64>, op: &str, what: &str) {
    assert!(
        t.nrows() == t.ncols() && t.nrows() == b.nrows(),
        "{op}: {}×{} {what} with {}×{} right-hand side",
        t.nrows(),
        t.ncols(),
        b.nrows(),
        b.ncols()
    );
}

// ---------------------------------------------------------------------------------------
// Cholesky
// ---------------------------------------------------------------------------------------

struct CholeskyOp {
    /// `∂ jitter / ∂ A_ii` of the jitter rule (0 for the plain factorisation).
    jitter_slope: f64,
}

impl Backward for CholeskyOp {
    fn name(&self) -> &'static str {
        "cholesky"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if !sink.wants(0) {
            return;
        }
        let (l, lbar, par) = (ctx.output(), ctx.grad(), ctx.par());
        let n = l.nrows();
        // P = Φ(Lᵀ L̄): only the lower triangle of L̄ matters (the upper triangle of L is a
        // constant zero), and only the lower triangle of the product is kept.
        let mut p = ctx.alloc_zeros(n, n);
        tri_matmul(
            p.as_mut(),
            BlockStructure::TriangularLower,
            Accum::Replace,
            l.transpose(),
            BlockStructure::TriangularUpper,
            lbar,
            BlockStructure::TriangularLower,
            1.0,
            par,
        );
        for i in 0..n {
            p[(i, i)] *= 0.5;
        }
        // Ā = L⁻ᵀ P L⁻¹:  Y = L⁻ᵀ P, then Āᵀ = L⁻ᵀ Yᵀ.
        la::tri_solve_in_place(l, p.as_mut(), Tri::LowerT, par);
        let mut at = ctx.alloc_copy(p.transpose());
        ctx.recycle(p);
        la::tri_solve_in_place(l, at.as_mut(), Tri::LowerT, par);
        // at = Āᵀ; symmetrise and add the jitter term c·tr(Ā)·I.
        let mut tr = 0.0;
        for i in 0..n {
            tr += at[(i, i)];
        }
        let extra = self.jitter_slope * tr;
        let mut acc = sink.acc(0);
        for j in 0..n {
            for i in 0..n {
                acc[(i, j)] += 0.5 * (at[(i, j)] + at[(j, i)]);
            }
            acc[(j, j)] += extra;
        }
        ctx.recycle(at);
    }
}

impl Tape {
    /// Lower Cholesky factor `L` of the symmetric positive-definite `A` (`A = L Lᵀ`).
    ///
    /// Only the lower triangle of `A` is read; the gradient is the symmetric one
    /// (Murray 2016, eq. 10, symmetrised), i.e. the derivative along symmetric
    /// perturbations of `A`. Errors instead of panicking: [`dgp_core::Error::NotPositiveDefinite`]
    /// (no jitter is added; see [`Tape::cholesky_jittered`]), [`dgp_core::Error::Shape`] for a
    /// non-square input, [`dgp_core::Error::NonFinite`].
    pub fn cholesky(&mut self, a: Var) -> Result<Var> {
        let l = la::cholesky_par(self.value(a), "tape cholesky", self.par_for(&[a]))?;
        Ok(self.push(l, &[a], CholeskyOp { jitter_slope: 0.0 }))
    }

    /// Cholesky factor of `A + jitter·I` following the workspace jitter rule
    /// ([`dgp_core::linalg::cholesky_jittered_with`]); returns the factor and the jitter used.
    ///
    /// The gradient is exact for the computed value, including the dependence of a
    /// relative jitter on `mean(diag A)`: `Ā ← Ā + (∂jitter/∂Aᵢᵢ) tr(Ā) I`. `context` names
    /// the matrix in the [`dgp_core::Error::NotPositiveDefinite`] error.
    pub fn cholesky_jittered(
        &mut self,
        a: Var,
        context: &str,
        cfg: JitterConfig,
    ) -> Result<(Var, f64)> {
        let r = la::cholesky_jittered_with(self.value(a), context, cfg, self.par_for(&[a]))?;
        let v = self.push(
            r.factor,
            &[a],
            CholeskyOp {
                jitter_slope: r.jitter_slope,
            },
        );
        Ok((v, r.jitter))
    }
}

// ---------------------------------------------------------------------------------------
// triangular solve
// ---------------------------------------------------------------------------------------

struct TriSolveOp {
    sys: Tri,
}

impl Backward for TriSolveOp {
    fn name(&self) -> &'static str {
        "tri_solve"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (t, x, g, par) = (ctx.input(0), ctx.output(), ctx.grad(), ctx.par());
        if !sink.wants(0) && !sink.wants(1) {
            return;
        }
        // B̄ = op(T)⁻ᵀ X̄ and T̄ = −B̄ Xᵀ (no transpose) or −X B̄ᵀ (transpose), on T's
        // triangle only, in one pass over column chunks.
        let mut bbar = ctx.alloc(g.nrows(), g.ncols());
        let structure = if self.sys.is_lower() {
            BlockStructure::TriangularLower
        } else {
            BlockStructure::TriangularUpper
        };
        let triangle = sink.wants(0).then(|| (structure, sink.acc(0)));
        chunked::tri_solve_backward(t, x, g, bbar.as_mut(), self.sys, triangle, par, ctx.pool);
        sink.add_owned(1, bbar);
    }
}

impl Tape {
    /// `X = op(T)⁻¹ B` for a triangular `T` and the system `sys` ([`Tri`]: `Tri::Lower`
    /// solves `L X = B`, `Tri::LowerT` solves `Lᵀ X = B`, ...). Only `T`'s triangle is
    /// read and receives a gradient.
    ///
    /// Backward: `B̄ = op(T)⁻ᵀ X̄`; `T̄ = −tril(B̄ Xᵀ)` (lower, no transpose) or
    /// `−tril(X B̄ᵀ)` (lower, transposed), `triu` likewise for upper `T`.
    #[track_caller]
    pub fn tri_solve(&mut self, t: Var, b: Var, sys: Tri) -> Var {
        let (tv, bv) = (self.value(t), self.value(b));
        assert_square_system(tv, bv, "tri_solve", "triangle");
        let mut x = self.alloc(bv.nrows(), bv.ncols());
        let par = self.par_for(&[t, b]);
        chunked::tri_solve_into(tv, bv, x.as_mut(), sys, par);
        self.push(x, &[t, b], TriSolveOp { sys })
    }
}

// ---------------------------------------------------------------------------------------
// solve with a Cholesky factor
// ---------------------------------------------------------------------------------------

struct CholSolveOp;

impl Backward for CholSolveOp {
    fn name(&self) -> &'static str {
        "chol_solve"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (l, x, g, par) = (ctx.input(0), ctx.output(), ctx.grad(), ctx.par());
        if !sink.wants(0) && !sink.wants(1) {
            return;
        }
        // X = A⁻¹B with A = LLᵀ:  B̄ = A⁻¹X̄,  Ā = −B̄Xᵀ,
        // L̄ = tril((Ā + Āᵀ) L) = −tril(B̄ (XᵀL) + X (B̄ᵀL)).
        let mut bbar = ctx.alloc_copy(g);
        la::chol_solve_in_place(l, bbar.as_mut(), par);
        if sink.wants(0) {
            let (n, k) = (x.nrows(), x.ncols());
            let mut xtl = Mat::zeros(k, n);
            let mut btl = Mat::zeros(k, n);
            for (dst, src) in [(&mut xtl, x), (&mut btl, bbar.as_ref())] {
                tri_matmul(
                    dst.as_mut(),
                    BlockStructure::Rectangular,
                    Accum::Replace,
                    src.transpose(),
                    BlockStructure::Rectangular,
                    l,
                    BlockStructure::TriangularLower,
                    1.0,
                    par,
                );
            }
            let mut acc = sink.acc(0);
            for (lhs, rhs) in [(bbar.as_ref(), xtl.as_ref()), (x, btl.as_ref())] {
                let lower = BlockStructure::TriangularLower;
                add_triangle_of_product(acc.as_mut(), lower, lhs, rhs, -1.0, par);
            }
        }
        sink.add_owned(1, bbar);
    }
}

impl Tape {
    /// `X = (L Lᵀ)⁻¹ B` for a lower Cholesky factor `L` (two triangular solves; only the
    /// lower triangle of `L` is read and receives a gradient).
    ///
    /// Backward: `B̄ = (LLᵀ)⁻¹X̄`, `L̄ = −tril(B̄XᵀL + XB̄ᵀL)`.
    #[track_caller]
    pub fn chol_solve(&mut self, l: Var, b: Var) -> Var {
        let (lv, bv) = (self.value(l), self.value(b));
        assert_square_system(lv, bv, "chol_solve", "factor");
        let mut x = self.alloc_copy(bv);
        la::chol_solve_in_place(lv, x.as_mut(), self.par_for(&[l, b]));
        self.push(x, &[l, b], CholSolveOp)
    }
}

// ---------------------------------------------------------------------------------------
// log-determinant from a factor
// ---------------------------------------------------------------------------------------

struct LogdetCholOp;

impl Backward for LogdetCholOp {
    fn name(&self) -> &'static str {
        "logdet_chol"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let (l, g) = (ctx.input(0), ctx.grad()[(0, 0)]);
            let mut acc = sink.acc(0);
            for i in 0..l.nrows() {
                acc[(i, i)] += 2.0 * g / l[(i, i)];
            }
        }
    }
}

impl Tape {
    /// `log det(L Lᵀ) = 2 Σᵢ log Lᵢᵢ` (1×1) for a square factor `L` with positive diagonal
    /// (only the diagonal is read). Backward: `L̄ᵢᵢ = 2 ḡ / Lᵢᵢ`.
    #[track_caller]
    pub fn logdet_chol(&mut self, l: Var) -> Var {
        let lv = self.value(l);
        assert_eq!(lv.nrows(), lv.ncols(), "logdet_chol: factor must be square");
        let v = la::logdet_chol(lv);
        self.push(Mat::from_fn(1, 1, |_, _| v), &[l], LogdetCholOp)
    }
}

// ---------------------------------------------------------------------------------------
// product with a lower-triangular factor
// ---------------------------------------------------------------------------------------

struct LowerMatmulTnOp;

impl Backward for LowerMatmulTnOp {
    fn name(&self) -> &'static str {
        "lower_matmul_tn"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (l, a, g, par) = (ctx.input(0), ctx.input(1), ctx.grad(), ctx.par());
        if sink.wants(0) {
            // T = Lᵀ A ⇒ L̄ = tril(A T̄ᵀ): only the lower triangle is computed.
            let lower = BlockStructure::TriangularLower;
            chunked::add_triangle_of_xyt(sink.acc(0), lower, a, g, 1.0, par, ctx.pool);
        }
        if sink.wants(1) {
            // Ā = L T̄ with L lower-triangular.
            let (acc, fresh) = sink.acc_or_new(1);
            let accum = if fresh { Accum::Replace } else { Accum::Add };
            chunked::lower_times(acc, accum, l, g, 1.0, par);
        }
    }
}

impl Tape {
    /// `Lᵀ·A` for a lower-triangular `L` (only its lower triangle is read and receives a
    /// gradient), at half the cost of a dense product. Used for the `‖L_Sᵀ a‖²` terms of
    /// the sparse-GP marginal variances (DSVI eq. 8).
    #[track_caller]
    pub fn lower_matmul_tn(&mut self, l: Var, a: Var) -> Var {
        let (lv, av) = (self.value(l), self.value(a));
        assert_square_system(lv, av, "lower_matmul_tn", "factor");
        let par = self.par_for(&[l, a]);
        let mut t = self.alloc(lv.ncols(), av.ncols());
        chunked::lower_t_times(t.as_mut(), Accum::Replace, lv, av, 1.0, par);
        self.push(t, &[l, a], LowerMatmulTnOp)
    }
}

// ---------------------------------------------------------------------------------------
// fused ‖Lᵀ a_j‖² per column
// ---------------------------------------------------------------------------------------

/// Backward of [`Tape::lower_tn_col_sq_norms`]. Inputs `[L, A, T]` with `T = LᵀA` (the
/// forward product, recorded as a constant node).
struct LowerTnColSqNormsOp;

impl Backward for LowerTnColSqNormsOp {
    fn name(&self) -> &'static str {
        "lower_tn_col_sq_norms"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (l, a, t, g, par) = (
            ctx.input(0),
            ctx.input(1),
            ctx.input(2),
            ctx.grad(),
            ctx.par(),
        );
        let (want_l, want_a) = (sink.wants(0), sink.wants(1));
        if !want_l && !want_a {
            return;
        }
        let (m, n) = (a.nrows(), a.ncols());
        // Per column chunk: T̄ = 2 T diag(ḡ) (chunk scratch), Ā += L T̄, partial
        // L̄ += tril(A T̄ᵀ); partials summed in chunk order.
        let chunk = |dst: Option<MatMut<'_, f64>>, fresh: bool, s: usize| -> Option<Mat<f64>> {
            let w = chunked::COL_CHUNK.min(n - s);
            let mut tbar = ctx.alloc(m, w);
            for jj in 0..w {
                let g2 = 2.0 * g[(s + jj, 0)];
                let (src, out) = (t.col(s + jj), tbar.col_as_slice_mut(jj));
                for (o, &v) in out.iter_mut().zip(src.iter()) {
                    *o = g2 * v;
                }
            }
            if let Some(dst) = dst {
                let accum = if fresh { Accum::Replace } else { Accum::Add };
                chunked::lower_times(dst, accum, l, tbar.as_ref(), 1.0, Par::Seq);
            }
            let part = want_l.then(|| {
                let mut p = ctx.alloc(m, m);
                tri_matmul(
                    p.as_mut(),
                    BlockStructure::TriangularLower,
                    Accum::Replace,
                    a.subcols(s, w),
                    BlockStructure::Rectangular,
                    tbar.as_ref().transpose(),
                    BlockStructure::Rectangular,
                    1.0,
                    Par::Seq,
                );
                p
            });
            ctx.recycle(tbar);
            part
        };
        let parallel = chunked::parallel(par, n.div_ceil(chunked::COL_CHUNK));
        let parts: Vec<Option<Mat<f64>>> = if want_a {
            let (acc, fresh) = sink.acc_or_new(1);
            if parallel {
                acc.par_col_chunks_mut(chunked::COL_CHUNK)
                    .enumerate()
                    .map(|(k, d)| chunk(Some(d), fresh, k * chunked::COL_CHUNK))
                    .collect()
            } else {
                let mut acc = acc;
                (0..n)
                    .step_by(chunked::COL_CHUNK)
                    .map(|s| {
                        let w = chunked::COL_CHUNK.min(n - s);
                        chunk(Some(acc.as_mut().subcols_mut(s, w)), fresh, s)
                    })
                    .collect()
            }
        } else if parallel {
            let starts: Vec<usize> = (0..n).step_by(chunked::COL_CHUNK).collect();
            starts.par_iter().map(|&s| chunk(None, false, s)).collect()
        } else {
            (0..n)
                .step_by(chunked::COL_CHUNK)
                .map(|s| chunk(None, false, s))
                .collect()
        };
        if want_l {
            let mut acc = sink.acc(0);
            for p in parts.into_iter().flatten() {
                for j in 0..m {
                    for i in j..m {
                        acc[(i, j)] += p[(i, j)];
                    }
                }
                ctx.recycle(p);
            }
        }
    }
}

impl Tape {
    /// `‖Lᵀ a_j‖²` for every column `a_j` of `A` (M×N → N×1), for a lower-triangular `L`
    /// (M×M, only its lower triangle read and differentiated): the fused
    /// `col_sq_norms(lower_matmul_tn(L, A))`, the `‖L_Sᵀ a‖²` term of the sparse-GP
    /// marginal variances (DSVI eq. 8). Column chunks are processed while in cache and the
    /// adjoint `2 LᵀA diag(ḡ)` is never formed as a whole: backward
    /// `Ā = L T̄`, `L̄ = tril(A T̄ᵀ)` with `T̄ = 2 (LᵀA) diag(ḡ)`.
    #[track_caller]
    pub fn lower_tn_col_sq_norms(&mut self, l: Var, a: Var) -> Var {
        let (lv, av) = (self.value(l), self.value(a));
        assert_square_system(lv, av, "lower_tn_col_sq_norms", "factor");
        let (m, n) = (av.nrows(), av.ncols());
        let par = self.par_for(&[l, a]);
        let mut t = self.alloc(m, n);
        let mut out = self.alloc(n, 1);
        let norms_of = |tc: MatRef<'_, f64>| -> Vec<f64> {
            (0..tc.ncols())
                .map(|j| match tc.col(j).try_as_col_major() {
                    Some(c) => dgp_core::lanes::sum_squares(c.as_slice()),
                    None => tc.col(j).iter().map(|v| v * v).sum(),
                })
                .collect()
        };
        let chunk = |mut tc: MatMut<'_, f64>, s: usize| -> Vec<f64> {
            let w = tc.ncols();
            chunked::lower_t_times(
                tc.as_mut(),
                Accum::Replace,
                lv,
                av.subcols(s, w),
                1.0,
                Par::Seq,
            );
            norms_of(tc.as_ref())
        };
        let norms: Vec<Vec<f64>> = if chunked::parallel(par, n.div_ceil(chunked::COL_CHUNK)) {
            t.as_mut()
                .par_col_chunks_mut(chunked::COL_CHUNK)
                .enumerate()
                .map(|(k, tc)| chunk(tc, k * chunked::COL_CHUNK))
                .collect()
        } else {
            (0..n)
                .step_by(chunked::COL_CHUNK)
                .map(|s| {
                    let w = chunked::COL_CHUNK.min(n - s);
                    chunk(t.as_mut().subcols_mut(s, w), s)
                })
                .collect()
        };
        for (i, v) in norms.into_iter().flatten().enumerate() {
            out[(i, 0)] = v;
        }
        // T is kept as a constant node (no gradient of its own), so that its buffer is
        // recycled with the tape's.
        let cache = self.constant(t);
        self.push(out, &[l, a, cache], LowerTnColSqNormsOp)
    }
}
