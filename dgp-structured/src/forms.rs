//! Fused per-row quadratic and bilinear forms for the block-sparse route of Theorem 1
//! (Lindinger et al. 2020, Theorem 1 and §3.2's "diag(AᵀSA) as column sums of A ⊙ (SA)").
//!
//! [`stacked_forms`] takes the M×M blocks S_p of S_M that one layer's `a_l` meets,
//! stacked into one (P·M)×M matrix G, and returns for every block the row
//! `e_p = colsum(U_p ⊙ (S_p a_l))` (1×R): `U_p = a_l` for the layer's own quadratic forms
//! `a_lᵀ S_jj a_l`, `U_p = a_{l'}` of an earlier layer for the cross terms
//! `a_{l'}ᵀ S_ij a_l` (pitfall 1: the same row's a's). One pass over fixed column chunks
//! does the product and the column sums while the chunk is in cache; the chunks run in
//! parallel on rayon (coarse tasks, each product single-threaded), and reductions over
//! the rows (the adjoint of G) sum per-chunk partials in chunk order, so results do not
//! depend on the number of threads.
//!
//! [`tiled_col_dots`] is the cross term with a layer-1 GP, whose product `S_ji a_1` is
//! formed on the B points and shared by every sample: `e[s·B + i] = u[:, s·B+i] · v[:, i]`.

use dgp_traits::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rayon::prelude::*;

/// Column chunk of the fused passes (cache-resident M×chunk blocks).
pub const FORM_CHUNK: usize = 256;

/// The left factor `U_p` of one form of [`stacked_forms`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partner {
    /// `U_p = a`: the quadratic form `aᵀ S_p a`; S_p must be symmetric (its adjoint with
    /// respect to `a` is `2 g ⊙ S_p a`).
    Quad,
    /// `U_p` = this M×R variable (may be `a` itself for a non-symmetric block).
    With(Var),
}

/// Column chunks `[(start, width)]` of `n` columns.
fn chunks(n: usize) -> Vec<(usize, usize)> {
    (0..n)
        .step_by(FORM_CHUNK)
        .map(|s| (s, FORM_CHUNK.min(n - s)))
        .collect()
}

/// Whether to hand chunks to rayon.
fn parallel(par: Par, n_chunks: usize) -> bool {
    par != Par::Seq && n_chunks > 1 && rayon::current_num_threads() > 1
}

/// Splits `m` into mutable column chunks of [`FORM_CHUNK`].
fn split_cols(m: MatMut<'_, f64>) -> Vec<MatMut<'_, f64>> {
    let mut out = Vec::new();
    let mut rest = m;
    while rest.ncols() > FORM_CHUNK {
        let (a, b) = rest.split_at_col_mut(FORM_CHUNK);
        out.push(a);
        rest = b;
    }
    if rest.ncols() > 0 {
        out.push(rest);
    }
    out
}

/// Runs `f(k, item)` over `items`, in parallel when `par` allows.
fn run<T: Send>(items: Vec<T>, par: Par, f: impl Fn(usize, T) + Sync + Send) {
    if parallel(par, items.len()) {
        items
            .into_par_iter()
            .enumerate()
            .for_each(|(k, it)| f(k, it));
    } else {
        items.into_iter().enumerate().for_each(|(k, it)| f(k, it));
    }
}

/// Column `j` of `m` as a slice (`None` for a non-unit row stride).
#[inline]
fn col(m: MatRef<'_, f64>, j: usize) -> Option<&[f64]> {
    m.col(j).try_as_col_major().map(|c| c.as_slice())
}

/// `Σ_m u[m, j] v[m, k]` (column `j` of `u`, column `k` of `v`), in the fixed lane order
/// of [`dgp_core::lanes::dot`] (vectorised; one chain of additions in row order ran at
/// one element per add latency).
#[inline]
fn col_dot(u: MatRef<'_, f64>, j: usize, v: MatRef<'_, f64>, k: usize) -> f64 {
    match (col(u, j), col(v, k)) {
        (Some(x), Some(y)) => dgp_core::lanes::dot(x, y),
        _ => (0..u.nrows()).fold(0.0, |s, i| s + u[(i, j)] * v[(i, k)]),
    }
}

/// `dst[:, j] += α · src[:, k]`.
#[inline]
fn axpy_col(mut dst: MatMut<'_, f64>, j: usize, alpha: f64, src: MatRef<'_, f64>, k: usize) {
    if let (Some(d), Some(x)) = (dst.as_mut().col_mut(j).try_as_col_major_mut(), col(src, k)) {
        for (o, v) in d.as_slice_mut().iter_mut().zip(x) {
            *o += alpha * v;
        }
        return;
    }
    for i in 0..dst.nrows() {
        dst[(i, j)] += alpha * src[(i, k)];
    }
}

/// Backward of [`stacked_forms`]. Parents `[G, a, Y, U_3, …]` with `Y = G a` recorded as
/// a constant node; `who[p]` is `None` for [`Partner::Quad`], else the parent index of U_p.
struct StackedFormsOp {
    who: Vec<Option<usize>>,
    m: usize,
}

impl Backward for StackedFormsOp {
    fn name(&self) -> &'static str {
        "stacked_forms"
    }

    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (g, a, y, gr) = (ctx.input(0), ctx.input(1), ctx.input(2), ctx.grad());
        let (m, r, np) = (self.m, a.ncols(), self.who.len());
        let u_of = |p: usize| self.who[p].map_or(a, |i| ctx.input(i));
        let cols = chunks(r);
        let par = ctx.par();
        let want_g = sink.wants(0);
        // Pass 1: ∂a (column-local) and the per-chunk partials of ∂G = Ȳ aᵀ.
        let partials: Vec<Option<Mat<f64>>> = {
            let slots: Vec<std::sync::Mutex<Option<Mat<f64>>>> =
                cols.iter().map(|_| std::sync::Mutex::new(None)).collect();
            let (da, fresh) = if sink.wants(1) {
                let (d, f) = sink.acc_or_new(1);
                (Some(d), f)
            } else {
                (None, false)
            };
            let da_chunks: Vec<Option<MatMut<'_, f64>>> = match da {
                Some(d) => split_cols(d).into_iter().map(Some).collect(),
                None => cols.iter().map(|_| None).collect(),
            };
            run(da_chunks, par, |k, da| {
                let (s, w) = cols[k];
                let mut ybar = ctx.alloc(np * m, w);
                for p in 0..np {
                    let u = u_of(p).subcols(s, w);
                    let mut yb = ybar.as_mut().subrows_mut(p * m, m);
                    for j in 0..w {
                        yb.as_mut().col_mut(j).fill(0.0);
                        axpy_col(yb.as_mut(), j, gr[(p, s + j)], u, j);
                    }
                }
                if let Some(mut da) = da {
                    if fresh {
                        da.fill(0.0);
                    }
                    for p in 0..np {
                        let yp = y.submatrix(p * m, s, m, w);
                        let factor = match self.who[p] {
                            None => 2.0,
                            Some(1) => 1.0,
                            Some(_) => 0.0,
                        };
                        if factor != 0.0 {
                            for j in 0..w {
                                axpy_col(da.as_mut(), j, factor * gr[(p, s + j)], yp, j);
                            }
                        }
                        if self.who[p].is_some() {
                            matmul(
                                da.as_mut(),
                                Accum::Add,
                                g.subrows(p * m, m).transpose(),
                                ybar.as_ref().subrows(p * m, m),
                                1.0,
                                Par::Seq,
                            );
                        }
                    }
                }
                if want_g {
                    let mut part = ctx.alloc(np * m, m);
                    matmul(
                        part.as_mut(),
                        Accum::Replace,
                        ybar.as_ref(),
                        a.subcols(s, w).transpose(),
                        1.0,
                        Par::Seq,
                    );
                    if let Ok(mut slot) = slots[k].lock() {
                        *slot = Some(part);
                    }
                }
                ctx.recycle(ybar);
            });
            slots
                .into_iter()
                .map(|s| s.into_inner().ok().flatten())
                .collect()
        };
        if want_g {
            let (mut dg, fresh) = sink.acc_or_new(0);
            let mut first = fresh;
            for part in partials.into_iter().flatten() {
                if first {
                    dg.copy_from(part.as_ref());
                    first = false;
                } else {
                    dg += part.as_ref();
                }
                ctx.recycle(part);
            }
            if first {
                dg.fill(0.0);
            }
        }
        self.partner_adjoints(ctx, sink, &cols, par);
    }
}

impl StackedFormsOp {
    /// Pass 2 of the backward rule: ∂U_i = Σ_{p: U_p = U_i} g_p ⊙ Y_p for the partners
    /// other than `a`.
    fn partner_adjoints(
        &self,
        ctx: &BackwardCtx<'_>,
        sink: &mut GradSink<'_>,
        cols: &[(usize, usize)],
        par: Par,
    ) {
        let (y, gr, m, np) = (ctx.input(2), ctx.grad(), self.m, self.who.len());
        for input in 3..ctx.num_inputs() {
            if !sink.wants(input) {
                continue;
            }
            let ps: Vec<usize> = (0..np).filter(|&p| self.who[p] == Some(input)).collect();
            let (du, fresh) = sink.acc_or_new(input);
            run(split_cols(du), par, |k, mut du| {
                let (s, w) = cols[k];
                if fresh {
                    du.fill(0.0);
                }
                for &p in &ps {
                    let yp = y.submatrix(p * m, s, m, w);
                    for j in 0..w {
                        axpy_col(du.as_mut(), j, gr[(p, s + j)], yp, j);
                    }
                }
            });
        }
    }
}

/// The rows `e_p = colsum(U_p ⊙ (G_p a))` (a P×R matrix, row p = form p) for the stacked
/// blocks `g` ((P·M)×M, block p = rows p·M..(p+1)·M) and `a` (M×R); see the module docs.
///
/// # Panics
/// Shapes that do not fit (a programming error of the caller).
#[track_caller]
pub fn stacked_forms(tape: &mut Tape, g: Var, a: Var, partners: &[Partner]) -> Var {
    let (m, r) = tape.shape(a);
    let np = partners.len();
    assert_eq!(tape.shape(g), (np * m, m), "stacked_forms: G is (P·M)×M");
    let mut parents = vec![g, a];
    let mut who = Vec::with_capacity(np);
    let mut extra: Vec<Var> = Vec::new();
    for p in partners {
        who.push(match *p {
            Partner::Quad => None,
            Partner::With(u) if u == a => Some(1),
            Partner::With(u) => {
                assert_eq!(tape.shape(u), (m, r), "stacked_forms: U_p is M×R");
                let pos = extra.iter().position(|&e| e == u).unwrap_or_else(|| {
                    extra.push(u);
                    extra.len() - 1
                });
                Some(3 + pos)
            }
        });
    }
    let cols = chunks(r);
    let par = tape.par_for_size(np * m * r);
    let mut y = tape.alloc(np * m, r);
    let mut e = tape.alloc(np, r);
    {
        let (gv, av) = (tape.value(g), tape.value(a));
        let us: Vec<MatRef<'_, f64>> = extra.iter().map(|&u| tape.value(u)).collect();
        let u_of = |p: usize| match who[p] {
            None | Some(1) => av,
            Some(i) => us[i - 3],
        };
        let items: Vec<_> = split_cols(y.as_mut())
            .into_iter()
            .zip(split_cols(e.as_mut()))
            .collect();
        run(items, par, |k, (mut yc, mut ec)| {
            let (s, w) = cols[k];
            matmul(
                yc.as_mut(),
                Accum::Replace,
                gv,
                av.subcols(s, w),
                1.0,
                Par::Seq,
            );
            for p in 0..np {
                let (u, yp) = (u_of(p).subcols(s, w), yc.as_ref().subrows(p * m, m));
                for j in 0..w {
                    ec[(p, j)] = col_dot(u, j, yp, j);
                }
            }
        });
    }
    let yv = tape.constant(y);
    parents.push(yv);
    parents.extend(extra);
    tape.push(e, &parents, StackedFormsOp { who, m })
}

/// Backward of [`tiled_col_dots`]: parents `[u, v_1, …]`.
struct TiledColDotsOp {
    b: usize,
}

impl Backward for TiledColDotsOp {
    fn name(&self) -> &'static str {
        "tiled_col_dots"
    }

    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let (u, gr) = (ctx.input(0), ctx.grad());
        let (r, b) = (u.ncols(), self.b);
        let n = ctx.num_inputs() - 1;
        if sink.wants(0) {
            let (mut du, fresh) = sink.acc_or_new(0);
            if fresh {
                du.fill(0.0);
            }
            for p in 0..n {
                let v = ctx.input(p + 1);
                for c in 0..r {
                    axpy_col(du.as_mut(), c, gr[(p, c)], v, c % b);
                }
            }
        }
        for p in 0..n {
            if !sink.wants(p + 1) {
                continue;
            }
            let mut dv = sink.acc(p + 1);
            for c in 0..r {
                axpy_col(dv.as_mut(), c % b, gr[(p, c)], u, c);
            }
        }
    }
}

/// `e[p, s·B + i] = Σ_m u[m, s·B + i] · v_p[m, i]` (an n×R matrix, R = reps·B): the cross
/// terms of a layer (u = its `a`, M×R) with layer-1 GPs whose products `v_p = S_ji a_1`
/// (M×B) every sample shares.
///
/// # Panics
/// Shapes that do not fit.
#[track_caller]
pub fn tiled_col_dots(tape: &mut Tape, u: Var, vs: &[Var]) -> Var {
    let (m, r) = tape.shape(u);
    let b = vs.first().map_or(r.max(1), |&v| tape.shape(v).1);
    assert!(b > 0 && r % b == 0, "tiled_col_dots: R is a multiple of B");
    let mut e = tape.alloc(vs.len(), r);
    {
        let uv = tape.value(u);
        for (p, &v) in vs.iter().enumerate() {
            let vv = tape.value(v);
            assert_eq!((vv.nrows(), vv.ncols()), (m, b), "tiled_col_dots: v is M×B");
            for c in 0..r {
                e[(p, c)] = col_dot(uv, c, vv, c % b);
            }
        }
    }
    let mut parents = vec![u];
    parents.extend_from_slice(vs);
    tape.push(e, &parents, TiledColDotsOp { b })
}
