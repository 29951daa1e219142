//! Stationary kernels `k(x, x') = σ² φ(s)` of the scaled squared distance
//! `s = Σ_q (x_q − x'_q)²/ℓ_q²` (squared exponential and Matérn ½, 3/2, 5/2), with one fused
//! tape operation per evaluation (cross, symmetric, diagonal).
//!
//! The backward rule needs `∂K_ij/∂s_ij = σ² φ'(s_ij)`; the forward pass computes it next to
//! the kernel value, sharing the square root and the exponential (r = √s):
//!
//! | kernel | φ(s) | φ'(s) = dφ/ds |
//! |---|---|---|
//! | RBF | `exp(−s/2)` | `−φ/2` (not cached: read off the output) |
//! | Matérn ½ | `exp(−r)` | `−exp(−r)/(2r)`, and 0 at r = 0 (subgradient) |
//! | Matérn 3/2 | `(1 + √3 r) exp(−√3 r)` | `−(3/2) exp(−√3 r)` |
//! | Matérn 5/2 | `(1 + √5 r + 5s/3) exp(−√5 r)` | `−(5/6)(1 + √5 r) exp(−√5 r)` |
//!
//! None of these has a 0/0: φ' is finite at r = 0 for 3/2 and 5/2, Matérn ½ takes the
//! subgradient there, and an underflowed exponential gives exact zeros. (Matérn ½ for r → 0⁺
//! grows like 1/r, so its few entries with r < 10⁻⁴ are differentiated term by term with
//! [`sqdist::add_pair_terms`], where the products are bounded because |x_q − x'_q|/ℓ_q ≤ r.)

use super::sqdist::{self, Method, Wants};
use super::{Kernel, KernelKind};
use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var, chunked};
use dgp_core::fastexp as fast_exp;
use dgp_core::lanes;
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rayon::prelude::*;

/// `(φ(s), φ'(s))`: the unit-variance kernel and its derivative in the scaled squared
/// distance. Callers that need only φ let the compiler drop the slope.
#[inline(always)]
fn profile(kind: KernelKind, s: f64) -> (f64, f64) {
    match kind {
        KernelKind::Rbf => {
            let e = fast_exp::exp(-0.5 * s);
            (e, -0.5 * e)
        }
        KernelKind::Matern12 => {
            let r = s.sqrt();
            let e = fast_exp::exp(-r);
            (e, if r > 0.0 { -0.5 * e / r } else { 0.0 })
        }
        KernelKind::Matern32 => {
            let t = (3.0 * s).sqrt();
            let e = fast_exp::exp(-t);
            ((1.0 + t) * e, -1.5 * e)
        }
        KernelKind::Matern52 => {
            let t = (5.0 * s).sqrt();
            let e = fast_exp::exp(-t);
            (
                (1.0 + t + (5.0 / 3.0) * s) * e,
                -(5.0 / 6.0) * (1.0 + t) * e,
            )
        }
        KernelKind::Linear => unreachable!("linear kernel is not stationary"),
    }
}

/// Overwrites every entry `s` of `m` (all, or the lower triangle with the diagonal) with
/// `var · φ(s)`, and returns `var · φ'(s)` in a matrix of the same shape when `slope` is set.
/// The kind is matched once, outside the loops, so that each kernel gets its own loop.
fn apply_profile(
    kind: KernelKind,
    m: MatMut<'_, f64>,
    var: f64,
    lower_only: bool,
    slope: bool,
) -> Option<Mat<f64>> {
    #[inline(always)]
    fn go(
        mut m: MatMut<'_, f64>,
        var: f64,
        lower_only: bool,
        slope: bool,
        f: impl Fn(f64) -> (f64, f64),
    ) -> Option<Mat<f64>> {
        let (n1, n2) = (m.nrows(), m.ncols());
        let mut d = slope.then(|| Mat::zeros(n1, n2));
        for j in 0..n2 {
            let start = if lower_only { j.min(n1) } else { 0 };
            let col = m
                .as_mut()
                .col_mut(j)
                .try_as_col_major_mut()
                .expect("kernel blocks are column-major")
                .as_slice_mut();
            let col = &mut col[start..];
            match d.as_mut() {
                Some(d) => {
                    for (v, dv) in col.iter_mut().zip(&mut d.col_as_slice_mut(j)[start..]) {
                        let (p, q) = f(*v);
                        *v = var * p;
                        *dv = var * q;
                    }
                }
                None => {
                    // Blocks of 8 independent lanes (as in `fastexp::exp_lanes`): about 5 %
                    // faster than the plain loop on 128×10⁴ RBF blocks; same values.
                    let mut blocks = col.chunks_exact_mut(8);
                    for b in &mut blocks {
                        let mut o = [0.0; 8];
                        for k in 0..8 {
                            o[k] = var * f(b[k]).0;
                        }
                        b.copy_from_slice(&o);
                    }
                    for v in blocks.into_remainder() {
                        *v = var * f(*v).0;
                    }
                }
            }
        }
        d
    }
    // Runtime SIMD dispatch (AVX2/FMA where available): the loop is compiled inside
    // pulp's target-feature context, so it is vectorised for the best instruction set of
    // the machine (see `fast_exp`).
    struct Loop<'a> {
        kind: KernelKind,
        m: MatMut<'a, f64>,
        var: f64,
        lower_only: bool,
        slope: bool,
    }
    impl pulp::WithSimd for Loop<'_> {
        type Output = Option<Mat<f64>>;
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, _simd: S) -> Self::Output {
            let Loop {
                kind,
                m,
                var,
                lower_only,
                slope,
            } = self;
            match kind {
                KernelKind::Rbf => go(m, var, lower_only, slope, |s| profile(KernelKind::Rbf, s)),
                KernelKind::Matern12 => go(m, var, lower_only, slope, |s| {
                    profile(KernelKind::Matern12, s)
                }),
                KernelKind::Matern32 => go(m, var, lower_only, slope, |s| {
                    profile(KernelKind::Matern32, s)
                }),
                KernelKind::Matern52 => go(m, var, lower_only, slope, |s| {
                    profile(KernelKind::Matern52, s)
                }),
                KernelKind::Linear => unreachable!("linear kernel is not stationary"),
            }
        }
    }
    pulp::Arch::new().dispatch(Loop {
        kind,
        m,
        var,
        lower_only,
        slope,
    })
}

/// Distance method for a kernel: Matérn-½ always uses the direct form, because its value
/// `exp(−√s)` would inherit the ~√ε absolute error of the expansion near `s = 0`.
fn method(kind: KernelKind) -> Method {
    if kind == KernelKind::Matern12 {
        Method::Direct
    } else {
        Method::Auto
    }
}

/// Below this scaled distance r, Matérn-½ entries are differentiated term by term (see
/// [`sqdist::add_pair_terms`]); above it their weights are at most `σ²|Ḡ_ij|/(2τ)` and the
/// product rule loses at most ~ε/τ relative accuracy.
const MATERN12_NEAR: f64 = 1e-4;

/// Positions `(i, j)` with `0 < S_ij < τ²` (all entries, both triangles when symmetric).
fn near_pairs(s: &Mat<f64>) -> Vec<(usize, usize)> {
    let tau2 = MATERN12_NEAR * MATERN12_NEAR;
    let mut out = Vec::new();
    for j in 0..s.ncols() {
        for (i, &v) in s.col_as_slice(j).iter().enumerate() {
            if v > 0.0 && v < tau2 {
                out.push((i, j));
            }
        }
    }
    out
}

/// A kernel matrix and what its backward rule needs.
pub(crate) struct Evaluated {
    /// `K`.
    pub k: Mat<f64>,
    /// `σ² φ'(S)` (Matérn kernels, when requested).
    pub slope: Option<Mat<f64>>,
    /// Matérn ½ (when requested): [`near_pairs`].
    pub near: Vec<(usize, usize)>,
}

/// Turns scaled squared distances `s` into an [`Evaluated`] kernel block.
fn finish(kind: KernelKind, mut s: Mat<f64>, var: f64, sym: bool, keep_slope: bool) -> Evaluated {
    let keep = keep_slope && kind != KernelKind::Rbf;
    let near = if keep && kind == KernelKind::Matern12 {
        near_pairs(&s)
    } else {
        Vec::new()
    };
    let mut slope = apply_profile(kind, s.as_mut(), var, sym, keep);
    if sym {
        mirror_lower(&mut s);
        if let Some(d) = slope.as_mut() {
            mirror_lower(d);
        }
    }
    Evaluated { k: s, slope, near }
}

/// Cross-covariance `K(x1, x2)`; with `keep_slope`, also what the backward rule needs.
pub(crate) fn eval_cross(
    kind: KernelKind,
    x1: MatRef<'_, f64>,
    x2: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    var: f64,
    par: Par,
    keep_slope: bool,
) -> Evaluated {
    let buf = Mat::zeros(x1.nrows(), x2.nrows());
    eval_cross_in(kind, x1, x2, ls, var, par, keep_slope, buf)
}

/// [`eval_cross`] with the kernel matrix written into `buf` (n1×n2, any contents).
#[allow(clippy::too_many_arguments)]
fn eval_cross_in(
    kind: KernelKind,
    x1: MatRef<'_, f64>,
    x2: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    var: f64,
    par: Par,
    keep_slope: bool,
    buf: Mat<f64>,
) -> Evaluated {
    let inv = sqdist::inverse_lengthscales(ls, x1.ncols());
    let (a, b) = (
        sqdist::scale_columns(x1, &inv),
        sqdist::scale_columns(x2, &inv),
    );
    let needs_slope = keep_slope && kind != KernelKind::Rbf;
    if x2.nrows() > chunked::COL_CHUNK && !needs_slope && kind != KernelKind::Matern12 {
        // Column chunks: distances and profile while the chunk is in cache, chunks in
        // parallel when `par` allows (each chunk sequential: results do not depend on it).
        let mut k = buf;
        chunked::for_chunks(k.as_mut(), par, |mut dst, start| {
            let bc = b.subrows(start, dst.ncols());
            sqdist::sqdist_scaled_into(a.as_ref(), bc, method(kind), Par::Seq, dst.as_mut());
            apply_profile(kind, dst, var, false, false);
        });
        return Evaluated {
            k,
            slope: None,
            near: Vec::new(),
        };
    }
    let s = sqdist::sqdist_scaled_in(&a, &b, method(kind), par, buf);
    finish(kind, s, var, false, keep_slope)
}

/// Copies the strict lower triangle of a square matrix to the upper one.
fn mirror_lower(m: &mut Mat<f64>) {
    let n = m.nrows();
    for j in 0..n {
        for i in j + 1..n {
            m[(j, i)] = m[(i, j)];
        }
    }
}

/// `K(x, x)`, exactly symmetric, evaluating the kernel on the lower triangle only; with
/// `keep_slope`, also what the backward rule needs.
pub(crate) fn eval_sym(
    kind: KernelKind,
    x: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    var: f64,
    par: Par,
    keep_slope: bool,
) -> Evaluated {
    let inv = sqdist::inverse_lengthscales(ls, x.ncols());
    let a = sqdist::scale_columns(x, &inv);
    let s = sqdist::sqdist_scaled_sym(&a, method(kind), par);
    finish(kind, s, var, true, keep_slope)
}

/// `∂L/∂S = Ḡ ⊙ σ² φ'(S)` (with `σ² φ'(S) = −K/2` for RBF), together with `Σ Ḡ ⊙ K`,
/// written into `w` (same shape as `k`, any contents).
fn distance_adjoint(
    g: MatRef<'_, f64>,
    k: MatRef<'_, f64>,
    slope: Option<&Mat<f64>>,
    mut w: Mat<f64>,
) -> (Mat<f64>, f64) {
    let n2 = k.ncols();
    let mut gk = 0.0;
    for j in 0..n2 {
        let (gj, kj) = (g.col(j), k.col(j));
        let wj = w.col_as_slice_mut(j);
        for (i, wij) in wj.iter_mut().enumerate() {
            *wij = gj[i] * kj[i];
        }
        gk += dgp_core::lanes::sum(wj);
        match slope {
            Some(d) => {
                for ((wij, &dij), i) in wj.iter_mut().zip(d.col_as_slice(j)).zip(0..) {
                    *wij = gj[i] * dij;
                }
            }
            None => {
                for wij in wj.iter_mut() {
                    *wij *= -0.5;
                }
            }
        }
    }
    (w, gk)
}

/// `Σ Ḡ ⊙ K`.
fn weighted_total(g: MatRef<'_, f64>, k: MatRef<'_, f64>) -> f64 {
    let mut acc = 0.0;
    for j in 0..k.ncols() {
        for i in 0..k.nrows() {
            acc += g[(i, j)] * k[(i, j)];
        }
    }
    acc
}

/// `∂L/∂σ² = Σ Ḡ ⊙ φ(S)`. Computed as `Σ Ḡ ⊙ K / σ²`, unless σ² is zero or subnormal, where
/// the unit-variance kernel is re-evaluated instead.
fn variance_adjoint(
    gk: f64,
    var: f64,
    g: MatRef<'_, f64>,
    recompute: impl FnOnce() -> Mat<f64>,
) -> f64 {
    if var >= f64::MIN_POSITIVE {
        gk / var
    } else {
        weighted_total(g, recompute().as_ref())
    }
}

/// Column `j` of `m` as a slice (borrowed when the column is contiguous).
fn col_slice(m: MatRef<'_, f64>, j: usize) -> std::borrow::Cow<'_, [f64]> {
    match m.col(j).try_as_col_major() {
        Some(c) => std::borrow::Cow::Borrowed(c.as_slice()),
        None => std::borrow::Cow::Owned(m.col(j).iter().copied().collect()),
    }
}

/// One column chunk's share of [`fused_cross_sums`].
struct CrossPart {
    gk: f64,
    r: Vec<f64>,
    c: Vec<f64>,
    wx2: Option<Mat<f64>>,
    wtx1: Option<Mat<f64>>,
}

/// `Σ Ḡ ⊙ K` and the reductions [`sqdist::CrossSums`] of `W = Ḡ ⊙ σ²φ'(S)` for a cross
/// kernel, computed column chunk by column chunk without forming `W` (one pass over `Ḡ`
/// and `K` instead of three, chunks in parallel when `par` allows). Chunks have the fixed
/// width [`chunked::COL_CHUNK`] and are summed in order, so the result does not depend on
/// the parallelism.
#[allow(clippy::too_many_arguments)]
fn fused_cross_sums(
    g: MatRef<'_, f64>,
    k: MatRef<'_, f64>,
    slope: Option<&Mat<f64>>,
    x1: MatRef<'_, f64>,
    x2: MatRef<'_, f64>,
    want: Wants,
    par: Par,
    ctx: &BackwardCtx<'_>,
) -> (sqdist::CrossSums, f64) {
    let (n1, n2, d) = (k.nrows(), k.ncols(), x1.ncols());
    let part = |&s: &usize| -> CrossPart {
        let width = chunked::COL_CHUNK.min(n2 - s);
        let mut w = ctx.alloc(n1, width);
        let (mut gk, mut r, mut c) = (0.0, vec![0.0; n1], vec![0.0; width]);
        for (jj, cj) in c.iter_mut().enumerate() {
            let j = s + jj;
            let wj = w.col_as_slice_mut(jj);
            let gj = col_slice(g, j);
            for ((wij, &gij), &kij) in wj.iter_mut().zip(gj.iter()).zip(col_slice(k, j).iter()) {
                *wij = gij * kij;
            }
            gk += lanes::sum(wj);
            match slope {
                Some(sl) => {
                    for ((wij, &gij), &dij) in wj.iter_mut().zip(gj.iter()).zip(sl.col_as_slice(j))
                    {
                        *wij = gij * dij;
                    }
                }
                None => {
                    for wij in wj.iter_mut() {
                        *wij *= -0.5;
                    }
                }
            }
            for (ri, &v) in r.iter_mut().zip(wj.iter()) {
                *ri += v;
            }
            *cj = lanes::sum(wj);
        }
        let wx2 = (want.x1 || want.ls).then(|| {
            let mut m = Mat::zeros(n1, d);
            let rhs = x2.subrows(s, width);
            matmul(m.as_mut(), Accum::Replace, w.as_ref(), rhs, 1.0, Par::Seq);
            m
        });
        let wtx1 = want.x2.then(|| {
            let mut m = Mat::zeros(width, d);
            matmul(m.as_mut(), Accum::Replace, w.transpose(), x1, 1.0, Par::Seq);
            m
        });
        ctx.recycle(w);
        CrossPart {
            gk,
            r,
            c,
            wx2,
            wtx1,
        }
    };
    let starts: Vec<usize> = (0..n2).step_by(chunked::COL_CHUNK).collect();
    let parts: Vec<CrossPart> = if !chunked::parallel(par, starts.len()) {
        starts.iter().map(part).collect()
    } else {
        starts.par_iter().map(part).collect()
    };
    let mut gk = 0.0;
    let mut r = vec![0.0; n1];
    let mut c = Vec::with_capacity(n2);
    let mut wx2 = (want.x1 || want.ls).then(|| Mat::zeros(n1, d));
    let mut wtx1 = want.x2.then(|| Mat::zeros(n2, d));
    let mut row = 0;
    for p in parts {
        gk += p.gk;
        for (a, b) in r.iter_mut().zip(&p.r) {
            *a += b;
        }
        if let (Some(acc), Some(m)) = (wx2.as_mut(), p.wx2.as_ref()) {
            *acc += m;
        }
        if let (Some(acc), Some(m)) = (wtx1.as_mut(), p.wtx1.as_ref()) {
            acc.as_mut().subrows_mut(row, m.nrows()).copy_from(m);
        }
        row += p.c.len();
        c.extend_from_slice(&p.c);
    }
    (sqdist::CrossSums { r, c, wx2, wtx1 }, gk)
}

struct StationaryOp {
    kind: KernelKind,
    /// One input (symmetric `K(x, x)`) instead of two.
    sym: bool,
    /// `σ² φ'(S)` (Matérn kernels only).
    slope: Option<Mat<f64>>,
    /// Matérn ½ only: entries with `0 < S_ij < τ²` (see [`near_pairs`]).
    near: Vec<(usize, usize)>,
}

impl Backward for StationaryOp {
    fn name(&self) -> &'static str {
        if self.sym {
            "kernel_sym"
        } else {
            "kernel_cross"
        }
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let kind = self.kind;
        let (ix2, ils, ivar) = if self.sym { (0, 1, 2) } else { (1, 2, 3) };
        let want = Wants {
            x1: sink.wants(0),
            x2: !self.sym && sink.wants(ix2),
            ls: sink.wants(ils),
        };
        let want_var = sink.wants(ivar);
        let (g, k) = (ctx.grad(), ctx.output());
        let (x1, ls) = (ctx.input(0), ctx.input(ils));
        let var = ctx.input(ivar)[(0, 0)];
        let geometry = want.x1 || want.x2 || want.ls;
        debug_assert!(
            !geometry || kind == KernelKind::Rbf || self.slope.is_some(),
            "Matérn slope not cached although an input needs a gradient"
        );
        if !self.sym && self.near.is_empty() {
            // Cross kernel without near-coincident Matérn-½ pairs: one fused chunked pass.
            let x2 = ctx.input(ix2);
            let (sums, gk) =
                fused_cross_sums(g, k, self.slope.as_ref(), x1, x2, want, ctx.par(), ctx);
            if want_var {
                let v = variance_adjoint(gk, var, g, || {
                    eval_cross(kind, x1, x2, ls, 1.0, Par::Seq, false).k
                });
                sink.add_owned(ivar, Mat::from_fn(1, 1, |_, _| v));
            }
            if geometry {
                let grads = sqdist::backward_cross_from_sums(sums, x1, x2, ls, want);
                for (i, m) in [(0, grads.x1), (ix2, grads.x2), (ils, grads.ls)] {
                    if let Some(m) = m {
                        sink.add_owned(i, m);
                    }
                }
            }
            return;
        }
        let (mut w, gk) = if geometry {
            distance_adjoint(g, k, self.slope.as_ref(), ctx.alloc(k.nrows(), k.ncols()))
        } else {
            (Mat::new(), weighted_total(g, k))
        };
        if want_var {
            let x2 = ctx.input(ix2);
            let sym = self.sym;
            let v = variance_adjoint(gk, var, g, || {
                if sym {
                    eval_sym(kind, x1, ls, 1.0, Par::Seq, false).k
                } else {
                    eval_cross(kind, x1, x2, ls, 1.0, Par::Seq, false).k
                }
            });
            sink.add_owned(ivar, Mat::from_fn(1, 1, |_, _| v));
        }
        if !geometry {
            return;
        }
        // Matérn ½: entries with 0 < S_ij < τ² carry weights ~1/√S_ij; take them out of the
        // product rule and add them term by term.
        let mut pairs = Vec::with_capacity(self.near.len());
        for &(i, j) in &self.near {
            pairs.push((i, j, w[(i, j)]));
            w[(i, j)] = 0.0;
        }
        let x2 = if self.sym { x1 } else { ctx.input(ix2) };
        let mut grads = if self.sym {
            sqdist::backward_sym(&mut w, x1, ls, want, ctx.par())
        } else {
            sqdist::backward_cross(w.as_ref(), x1, x2, ls, want, ctx.par())
        };
        ctx.recycle(w);
        sqdist::add_pair_terms(&pairs, x1, x2, ls, self.sym, &mut grads);
        if let Some(m) = grads.x1 {
            sink.add_owned(0, m);
        }
        if let Some(m) = grads.x2 {
            sink.add_owned(ix2, m);
        }
        if let Some(m) = grads.ls {
            sink.add_owned(ils, m);
        }
    }
}

/// Diagonal `k(x_i, x_i) = σ²` of a stationary kernel; depends on σ² only.
struct StationaryDiagOp;

impl Backward for StationaryDiagOp {
    fn name(&self) -> &'static str {
        "kernel_diag_stationary"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        if sink.wants(0) {
            let s = crate::tape::ops::sum_entries(ctx.grad());
            sink.acc(0)[(0, 0)] += s;
        }
    }
}

/// Records `K(x1, x2)` (`sym = None`) or `K(x, x)` on the tape.
pub(crate) fn record(
    kernel: &Kernel,
    tape: &mut Tape,
    x1: Var,
    x2: Option<Var>,
    ls: Var,
    var: Var,
) -> Var {
    let kind = kernel.kind;
    let needs =
        tape.needs_grad(x1) || x2.is_some_and(|v| tape.needs_grad(v)) || tape.needs_grad(ls);
    let v = tape.scalar(var);
    let n1 = tape.shape(x1).0;
    let par = tape.par_for_size(n1 * x2.map_or(n1, |v| tape.shape(v).0));
    match x2 {
        Some(x2) => {
            let buf = tape.alloc(n1, tape.shape(x2).0);
            let e = eval_cross_in(
                kind,
                tape.value(x1),
                tape.value(x2),
                tape.value(ls),
                v,
                par,
                needs,
                buf,
            );
            let op = StationaryOp {
                kind,
                sym: false,
                slope: e.slope,
                near: e.near,
            };
            tape.push(e.k, &[x1, x2, ls, var], op)
        }
        None => {
            let e = eval_sym(kind, tape.value(x1), tape.value(ls), v, par, needs);
            let op = StationaryOp {
                kind,
                sym: true,
                slope: e.slope,
                near: e.near,
            };
            tape.push(e.k, &[x1, ls, var], op)
        }
    }
}

/// The `n×1` diagonal `σ² 1`.
pub(crate) fn diag(n: usize, var: f64) -> Mat<f64> {
    Mat::from_fn(n, 1, |_, _| var)
}

/// Records the diagonal `σ² 1` (n×1) on the tape.
pub(crate) fn record_diag(tape: &mut Tape, n: usize, var: Var) -> Var {
    let d = diag(n, tape.scalar(var));
    tape.push(d, &[var], StationaryDiagOp)
}
