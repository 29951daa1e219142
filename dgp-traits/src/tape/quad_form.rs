//! The fused column quadratic forms `kₙᵀ Q kₙ` of the sparse-GP marginal variances.
//!
//! With `Q` an M×M symmetric matrix fixed for a step (built from `chol(Kuu)` and q(u) in
//! O(M³), see [`crate::conditional`]) and `K = Kuf` (M×N, N = batch × samples), the variance
//! of DSVI eq. (8) is `kff − kₙᵀ Q kₙ`. Evaluated this way a layer costs one M×M-by-M×N
//! product forward (`P = Q K`) and one triangle of `K diag(ḡ) Kᵀ` backward (`M²N/2`), where
//! the route through `A = L⁻¹K` costs a triangular solve with N right-hand sides, a product
//! with q(u)'s factor, and both their adjoints (about `4.5·M²N` multiply-adds; see
//! `quad_form_cols`'s docs). Columns are processed in the fixed chunks of
//! [`super::chunked`], so results do not depend on the number of threads.

use super::chunked::{self, COL_CHUNK};
use super::{Backward, BackwardCtx, GradSink, Tape, Var};
use dgp_core::lanes;
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{BlockStructure, matmul as tri_matmul};
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rayon::prelude::*;

/// A column of a column-major matrix as a slice.
fn col(m: MatRef<'_, f64>, j: usize) -> &[f64] {
    m.col(j)
        .try_as_col_major()
        .expect("tape values are column-major")
        .as_slice()
}

/// Backward of [`Tape::quad_form_cols`]. Inputs `[Q, K, P]` with `P = sym(Q) K` (the
/// forward product, recorded as a constant node).
struct QuadFormColsOp;

impl Backward for QuadFormColsOp {
    fn name(&self) -> &'static str {
        "quad_form_cols"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (k, p, g, par) = (ctx.input(1), ctx.input(2), ctx.grad(), ctx.par());
        let (want_q, want_k) = (sink.wants(0), sink.wants(1));
        if !want_q && !want_k {
            return;
        }
        let (m, n) = (k.nrows(), k.ncols());
        // Per column chunk: K̄ = 2 P diag(ḡ) straight into K's adjoint, and the lower
        // triangle of the partial Q̄ = K diag(ḡ) Kᵀ; partials summed in chunk order.
        let chunk = |dst: Option<MatMut<'_, f64>>, fresh: bool, s: usize| -> Option<Mat<f64>> {
            let w = COL_CHUNK.min(n - s);
            if let Some(mut dst) = dst {
                for jj in 0..w {
                    let g2 = 2.0 * g[(s + jj, 0)];
                    let src = col(p, s + jj);
                    let out = dst.as_mut().col_mut(jj).try_as_col_major_mut();
                    let out = out.expect("adjoints are column-major").as_slice_mut();
                    if fresh {
                        for (o, &v) in out.iter_mut().zip(src) {
                            *o = g2 * v;
                        }
                    } else {
                        for (o, &v) in out.iter_mut().zip(src) {
                            *o += g2 * v;
                        }
                    }
                }
            }
            want_q.then(|| {
                let mut kg = ctx.alloc(m, w);
                for jj in 0..w {
                    let gj = g[(s + jj, 0)];
                    let src = col(k, s + jj);
                    let out = kg.col_as_slice_mut(jj);
                    for (o, &v) in out.iter_mut().zip(src) {
                        *o = gj * v;
                    }
                }
                let mut part = ctx.alloc(m, m);
                tri_matmul(
                    part.as_mut(),
                    BlockStructure::TriangularLower,
                    Accum::Replace,
                    kg.as_ref(),
                    BlockStructure::Rectangular,
                    k.subcols(s, w).transpose(),
                    BlockStructure::Rectangular,
                    1.0,
                    Par::Seq,
                );
                ctx.recycle(kg);
                part
            })
        };
        let starts: Vec<usize> = (0..n).step_by(COL_CHUNK).collect();
        let parallel = chunked::parallel(par, starts.len());
        let parts: Vec<Option<Mat<f64>>> = if want_k {
            let (acc, fresh) = sink.acc_or_new(1);
            if parallel {
                acc.par_col_chunks_mut(COL_CHUNK)
                    .enumerate()
                    .map(|(c, d)| chunk(Some(d), fresh, c * COL_CHUNK))
                    .collect()
            } else {
                let mut acc = acc;
                starts
                    .iter()
                    .map(|&s| {
                        let w = COL_CHUNK.min(n - s);
                        chunk(Some(acc.as_mut().subcols_mut(s, w)), fresh, s)
                    })
                    .collect()
            }
        } else if parallel {
            starts.par_iter().map(|&s| chunk(None, false, s)).collect()
        } else {
            starts.iter().map(|&s| chunk(None, false, s)).collect()
        };
        if want_q {
            // Sum the lower triangles in chunk order, then add the symmetric whole: the
            // derivative of kᵀ sym(Q) k along any Q is k kᵀ, itself symmetric.
            let mut total = None::<Mat<f64>>;
            for part in parts.into_iter().flatten() {
                match total.as_mut() {
                    None => total = Some(part),
                    Some(t) => {
                        for j in 0..m {
                            for i in j..m {
                                t[(i, j)] += part[(i, j)];
                            }
                        }
                        ctx.recycle(part);
                    }
                }
            }
            let mut acc = sink.acc(0);
            if let Some(t) = total {
                for j in 0..m {
                    acc[(j, j)] += t[(j, j)];
                    for i in j + 1..m {
                        acc[(i, j)] += t[(i, j)];
                        acc[(j, i)] += t[(i, j)];
                    }
                }
                ctx.recycle(t);
            }
        }
    }
}

impl Tape {
    /// `kⱼᵀ sym(Q) kⱼ` for every column `kⱼ` of `K` (M×N → N×1), with `sym(Q) = ½(Q + Qᵀ)`
    /// (Q is M×M): the quadratic forms of the sparse-GP marginal variances
    /// `σ²(x) = k(x,x) − k(Z,x)ᵀ Q k(Z,x)` (DSVI eq. 8 with `Q = Kuu⁻¹ − Kuu⁻¹ S Kuu⁻¹`,
    /// whitened `Q = L⁻ᵀ(I − S)L⁻¹`).
    ///
    /// Cost: forward `P = sym(Q) K` (`M²N` multiply-adds, cached for the backward pass),
    /// backward `K̄ = 2 P diag(ḡ)` (elementwise) and `Q̄ = K diag(ḡ) Kᵀ` (one triangle,
    /// `M²N/2`). The route through `A = L⁻¹K` and `‖L_Sᵀ a‖²` needs `M²N/2` (solve) +
    /// `M²N/2` (factor product) forward and `M²N/2 + M²N/2 + M²N/2 + M²N/2` backward
    /// (solve, its triangle, the factor's two adjoints), i.e. `3·M²N` against `1.5·M²N`.
    ///
    /// Accuracy: `Q` is formed from `L⁻¹`, so the form carries an absolute error of about
    /// `u·cond(Kuu)·k(x,x)` (u the unit round-off; `cond(Kuu)` is bounded by the jitter rule
    /// at about `M/10⁻⁶`), against `u·√cond(Kuu)·k(x,x)` through `A`.
    #[track_caller]
    pub fn quad_form_cols(&mut self, q: Var, k: Var) -> Var {
        let (qv, kv) = (self.value(q), self.value(k));
        let (m, n) = (kv.nrows(), kv.ncols());
        assert!(
            qv.nrows() == m && qv.ncols() == m,
            "quad_form_cols: {}×{} form with {}×{} columns",
            qv.nrows(),
            qv.ncols(),
            m,
            n
        );
        let par = self.par_for(&[q, k]);
        let mut qs = self.alloc(m, m);
        for j in 0..m {
            for i in 0..m {
                qs[(i, j)] = 0.5 * (qv[(i, j)] + qv[(j, i)]);
            }
        }
        let mut p = self.alloc(m, n);
        let forms: Vec<Vec<f64>> = chunked::map_chunks(p.as_mut(), par, |mut pc, s| {
            let w = pc.ncols();
            let kc = kv.subcols(s, w);
            matmul(pc.as_mut(), Accum::Replace, qs.as_ref(), kc, 1.0, Par::Seq);
            (0..w)
                .map(|j| lanes::dot(col(kc, j), col(pc.as_ref(), j)))
                .collect()
        });
        let mut out = self.alloc(n, 1);
        for (i, v) in forms.into_iter().flatten().enumerate() {
            out[(i, 0)] = v;
        }
        self.recycle(qs);
        // P is kept as a constant node (no gradient of its own), so that its buffer is
        // recycled with the tape's.
        let cache = self.constant(p);
        self.push(out, &[q, k, cache], QuadFormColsOp)
    }
}
