//! Scaled (ARD) squared distances `S_ij = Σ_q (x1_iq − x2_jq)² / ℓ_q²` and their adjoints.
//!
//! The forward pass is shared by every stationary kernel and by the stand-alone tape
//! operation [`Tape::ard_sqdist`]. Two evaluation strategies exist:
//!
//! * direct: `Σ_q (a_iq − b_jq)²` with `a = x1/ℓ`, `b = x2/ℓ`, one vectorisable pass per
//!   output column; exact to rounding, `S = 0` exactly for coincident points;
//! * expansion: `‖a_i‖² + ‖b_j‖² − 2 a_i·b_j` with one matrix product, clamped at 0. Much
//!   faster for large blocks, but its absolute error is ~ε‖a‖², so coincident points get
//!   `S ≈ 1e-16` instead of 0.
//!
//! The backward pass never forms an `n1×n2×D` array: with `W = ∂L/∂S`, `r = W1`, `c = Wᵀ1`,
//!
//! ```text
//! x̄1_iq = (2/ℓ_q²) (r_i x1_iq − (W X2)_iq)
//! x̄2_jq = (2/ℓ_q²) (c_j x2_jq − (Wᵀ X1)_jq)
//! ℓ̄_q   = −(2/ℓ_q³) [Σ_i r_i x1_iq² + Σ_j c_j x2_jq² − 2 Σ_i x1_iq (W X2)_iq]
//! ```
//!
//! i.e. two `n1×n2×D` matrix products. For weights `W` that blow up as `S → 0` (the Matérn-½
//! kernel, whose `∂k/∂S ∝ 1/√S`) the products would cancel catastrophically; the few such
//! entries are taken out of `W` and accumulated term by term by [`add_pair_terms`].

use crate::tape::{Backward, BackwardCtx, GradSink, Tape, Var};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, MatRef, Par};

/// How to evaluate scaled squared distances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    /// Expansion for large blocks, direct otherwise (see [`use_expansion`]).
    Auto,
    /// Always the direct difference form.
    Direct,
    /// Always the `‖a‖² + ‖b‖² − 2a·b` form.
    Expand,
}

/// Whether [`Method::Auto`] uses the expansion for an `n1×n2` block in `d` dimensions.
///
/// The direct form costs ~3 flops per (i, j, q) in a vectorised loop; the expansion costs
/// one matrix product (2 flops per (i, j, q) at near-peak speed) plus a pass over the
/// output, so it wins once the block is large and `d` is not tiny.
fn use_expansion(n1: usize, n2: usize, d: usize) -> bool {
    d >= 3 && n1 >= 16 && n2 >= 16 && n1 * n2 >= 4096
}

/// Per-dimension inverse lengthscales `1/ℓ_q` (length `d`) from a `1×1` (isotropic) or
/// `1×d` (ARD) lengthscale row.
#[track_caller]
pub(crate) fn inverse_lengthscales(ls: MatRef<'_, f64>, d: usize) -> Vec<f64> {
    assert!(
        ls.nrows() == 1 && (ls.ncols() == 1 || ls.ncols() == d),
        "lengthscales must be 1×1 or 1×{d}, got {}×{}",
        ls.nrows(),
        ls.ncols()
    );
    (0..d)
        .map(|q| 1.0 / ls[(0, if ls.ncols() == 1 { 0 } else { q })])
        .collect()
}

/// `x` with column `q` multiplied by `s[q]`, as an owned column-major matrix.
pub(crate) fn scale_columns(x: MatRef<'_, f64>, s: &[f64]) -> Mat<f64> {
    Mat::from_fn(x.nrows(), x.ncols(), |i, q| x[(i, q)] * s[q])
}

/// Row norms `‖a_i‖²`.
fn row_sq_norms(a: MatRef<'_, f64>) -> Vec<f64> {
    let mut n = vec![0.0; a.nrows()];
    for q in 0..a.ncols() {
        for (ni, &v) in n.iter_mut().zip(col(a, q)) {
            *ni += v * v;
        }
    }
    n
}

/// Column `j` of a column-major view as a slice.
fn col(a: MatRef<'_, f64>, j: usize) -> &[f64] {
    a.col(j)
        .try_as_col_major()
        .expect("scaled inputs are column-major")
        .as_slice()
}

/// Column `j` of a column-major view as a mutable slice.
fn col_mut<'s>(s: &'s mut MatMut<'_, f64>, j: usize) -> &'s mut [f64] {
    s.as_mut()
        .col_mut(j)
        .try_as_col_major_mut()
        .expect("distance buffers are column-major")
        .as_slice_mut()
}

/// `S_ij = ‖a_i − b_j‖²` for already scaled inputs `a` (n1×d) and `b` (n2×d).
pub(crate) fn sqdist_scaled(a: &Mat<f64>, b: &Mat<f64>, method: Method, par: Par) -> Mat<f64> {
    sqdist_scaled_in(a, b, method, par, Mat::zeros(a.nrows(), b.nrows()))
}

/// [`sqdist_scaled`] written into the n1×n2 buffer `s` (any contents).
pub(crate) fn sqdist_scaled_in(
    a: &Mat<f64>,
    b: &Mat<f64>,
    method: Method,
    par: Par,
    mut s: Mat<f64>,
) -> Mat<f64> {
    sqdist_scaled_into(a.as_ref(), b.as_ref(), method, par, s.as_mut());
    s
}

/// [`sqdist_scaled`] written into the column-major n1×n2 view `s` (any contents): the
/// column chunks of a kernel block are computed in place this way.
pub(crate) fn sqdist_scaled_into(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    method: Method,
    par: Par,
    mut s: MatMut<'_, f64>,
) {
    let (n1, n2, d) = (a.nrows(), b.nrows(), a.ncols());
    debug_assert_eq!(d, b.ncols());
    debug_assert_eq!((s.nrows(), s.ncols()), (n1, n2));
    let expand = match method {
        Method::Auto => use_expansion(n1, n2, d),
        Method::Direct => false,
        Method::Expand => true,
    };
    if expand && d == 0 {
        s.fill(0.0);
    } else if expand {
        matmul(s.as_mut(), Accum::Replace, a, b.transpose(), -2.0, par);
        let (na, nb) = (row_sq_norms(a), row_sq_norms(b));
        for (j, &nbj) in nb.iter().enumerate() {
            for (sij, &nai) in col_mut(&mut s, j).iter_mut().zip(&na) {
                *sij = (*sij + nai + nbj).max(0.0);
            }
        }
    } else {
        s.fill(0.0);
        for j in 0..n2 {
            let col = col_mut(&mut s, j);
            for q in 0..d {
                let bq = b[(j, q)];
                for (sij, &aiq) in col.iter_mut().zip(self::col(a, q)) {
                    let t = aiq - bq;
                    *sij += t * t;
                }
            }
        }
    }
}

/// `S_ij = ‖a_i − a_j‖²` for one set of scaled points: exactly symmetric with an exactly zero
/// diagonal. The direct form only visits the strict lower triangle.
pub(crate) fn sqdist_scaled_sym(a: &Mat<f64>, method: Method, par: Par) -> Mat<f64> {
    let (n, d) = (a.nrows(), a.ncols());
    let expand = match method {
        Method::Auto => use_expansion(n, n, d),
        Method::Direct => false,
        Method::Expand => true,
    };
    let mut s;
    if expand {
        s = sqdist_scaled(a, a, Method::Expand, par);
    } else {
        s = Mat::zeros(n, n);
        for j in 0..n {
            let col = &mut s.col_as_slice_mut(j)[j + 1..];
            for q in 0..d {
                let aj = a[(j, q)];
                for (sij, &aiq) in col.iter_mut().zip(&a.col_as_slice(q)[j + 1..]) {
                    let t = aiq - aj;
                    *sij += t * t;
                }
            }
        }
    }
    for j in 0..n {
        s[(j, j)] = 0.0;
        for i in j + 1..n {
            s[(j, i)] = s[(i, j)];
        }
    }
    s
}

/// Scaled squared distances between the rows of `x1` (n1×D) and `x2` (n2×D) with
/// lengthscales `ls` (1×1 isotropic or 1×D ARD): `S_ij = Σ_q (x1_iq − x2_jq)²/ℓ_q²`.
///
/// This is the plain (non-tape) evaluation behind [`Tape::ard_sqdist`].
///
/// # Panics
/// When the column counts of `x1` and `x2` differ or `ls` has the wrong shape.
#[track_caller]
pub fn scaled_sqdist(x1: MatRef<'_, f64>, x2: MatRef<'_, f64>, ls: MatRef<'_, f64>) -> Mat<f64> {
    scaled_sqdist_par(x1, x2, ls, Par::Seq)
}

/// [`scaled_sqdist`] with explicit parallelism for the matrix product.
#[track_caller]
pub fn scaled_sqdist_par(
    x1: MatRef<'_, f64>,
    x2: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    par: Par,
) -> Mat<f64> {
    assert_eq!(
        x1.ncols(),
        x2.ncols(),
        "scaled_sqdist: inputs have {} and {} columns",
        x1.ncols(),
        x2.ncols()
    );
    let inv = inverse_lengthscales(ls, x1.ncols());
    sqdist_scaled(
        &scale_columns(x1, &inv),
        &scale_columns(x2, &inv),
        Method::Auto,
        par,
    )
}

/// Adjoints of the scaled squared distance with respect to its inputs.
#[derive(Default)]
pub(crate) struct SqdistGrads {
    /// `∂L/∂x1` (n1×D).
    pub x1: Option<Mat<f64>>,
    /// `∂L/∂x2` (n2×D).
    pub x2: Option<Mat<f64>>,
    /// `∂L/∂ℓ`, same shape as the lengthscale row.
    pub ls: Option<Mat<f64>>,
}

/// Which adjoints to compute.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wants {
    pub x1: bool,
    pub x2: bool,
    pub ls: bool,
}

/// Folds per-dimension lengthscale adjoints `t_q = Σ_ij W_ij (x1_iq − x2_jq)²` into `∂L/∂ℓ`
/// (`−2 t_q / ℓ_q³`), summing over `q` for an isotropic lengthscale.
fn lengthscale_adjoint(t: &[f64], ls: MatRef<'_, f64>, inv: &[f64]) -> Mat<f64> {
    let per_dim = |q: usize| -2.0 * t[q] * inv[q] * inv[q] * inv[q];
    if ls.ncols() == 1 {
        let s: f64 = (0..t.len()).map(per_dim).sum();
        Mat::from_fn(1, 1, |_, _| s)
    } else {
        Mat::from_fn(1, t.len(), |_, q| per_dim(q))
    }
}

/// Row and column sums of `w`.
fn row_col_sums(w: MatRef<'_, f64>) -> (Vec<f64>, Vec<f64>) {
    let mut r = vec![0.0; w.nrows()];
    let mut c = vec![0.0; w.ncols()];
    for (j, cj) in c.iter_mut().enumerate() {
        let col = w.col(j);
        match col.try_as_col_major() {
            Some(col) => {
                let col = col.as_slice();
                for (ri, &v) in r.iter_mut().zip(col) {
                    *ri += v;
                }
                *cj = dgp_core::lanes::sum(col);
            }
            None => {
                let mut acc = 0.0;
                for (i, ri) in r.iter_mut().enumerate() {
                    let v = col[i];
                    *ri += v;
                    acc += v;
                }
                *cj = acc;
            }
        }
    }
    (r, c)
}

/// The reductions of `W = ∂L/∂S` that the adjoints of a cross distance need: row sums
/// `r = W1`, column sums `c = Wᵀ1`, `W X2` (n1×D, when x1 or ℓ needs a gradient) and
/// `Wᵀ X1` (n2×D, when x2 does).
pub(crate) struct CrossSums {
    pub r: Vec<f64>,
    pub c: Vec<f64>,
    pub wx2: Option<Mat<f64>>,
    pub wtx1: Option<Mat<f64>>,
}

/// Adjoints of `S(x1, x2, ℓ)` given `W = ∂L/∂S`, via two matrix products (see module docs).
/// Use only when `W` stays bounded as `S → 0`.
pub(crate) fn backward_cross(
    w: MatRef<'_, f64>,
    x1: MatRef<'_, f64>,
    x2: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    want: Wants,
    par: Par,
) -> SqdistGrads {
    let (n1, n2, d) = (x1.nrows(), x2.nrows(), x1.ncols());
    let (r, c) = row_col_sums(w);
    let wx2 = (want.x1 || want.ls).then(|| {
        let mut wx2 = Mat::zeros(n1, d);
        let p = crate::tape::par_for_output(par, n1, d);
        matmul(wx2.as_mut(), Accum::Replace, w, x2, 1.0, p);
        wx2
    });
    let wtx1 = want.x2.then(|| {
        let mut wtx1 = Mat::zeros(n2, d);
        let p = crate::tape::par_for_output(par, n2, d);
        matmul(wtx1.as_mut(), Accum::Replace, w.transpose(), x1, 1.0, p);
        wtx1
    });
    backward_cross_from_sums(CrossSums { r, c, wx2, wtx1 }, x1, x2, ls, want)
}

/// Adjoints of `S(x1, x2, ℓ)` from the reductions of `W` (see [`CrossSums`]).
pub(crate) fn backward_cross_from_sums(
    sums: CrossSums,
    x1: MatRef<'_, f64>,
    x2: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    want: Wants,
) -> SqdistGrads {
    let d = x1.ncols();
    let inv = inverse_lengthscales(ls, d);
    let CrossSums { r, c, wx2, wtx1 } = sums;
    let mut out = SqdistGrads::default();
    if let Some(mut wx2) = wx2 {
        if want.ls {
            let t: Vec<f64> = (0..d)
                .map(|q| {
                    let mut t = 0.0;
                    for (i, &ri) in r.iter().enumerate() {
                        let v = x1[(i, q)];
                        t += v * (ri * v - 2.0 * wx2[(i, q)]);
                    }
                    for (j, &cj) in c.iter().enumerate() {
                        let v = x2[(j, q)];
                        t += cj * v * v;
                    }
                    t
                })
                .collect();
            out.ls = Some(lengthscale_adjoint(&t, ls, &inv));
        }
        if want.x1 {
            for q in 0..d {
                let f = 2.0 * inv[q] * inv[q];
                for (i, &ri) in r.iter().enumerate() {
                    wx2[(i, q)] = f * (ri * x1[(i, q)] - wx2[(i, q)]);
                }
            }
            out.x1 = Some(wx2);
        }
    }
    if let (true, Some(mut wtx1)) = (want.x2, wtx1) {
        for q in 0..d {
            let f = 2.0 * inv[q] * inv[q];
            for (j, &cj) in c.iter().enumerate() {
                wtx1[(j, q)] = f * (cj * x2[(j, q)] - wtx1[(j, q)]);
            }
        }
        out.x2 = Some(wtx1);
    }
    out
}

/// Adjoints of the symmetric `S(x, x, ℓ)` given `W = ∂L/∂S` (n×n, overwritten with
/// `W + Wᵀ` and a zero diagonal). `out.x1` holds `∂L/∂x`; `out.x2` stays empty.
pub(crate) fn backward_sym(
    w: &mut Mat<f64>,
    x: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    want: Wants,
    par: Par,
) -> SqdistGrads {
    let (n, d) = (x.nrows(), x.ncols());
    for j in 0..n {
        w[(j, j)] = 0.0;
        for i in j + 1..n {
            let v = w[(i, j)] + w[(j, i)];
            w[(i, j)] = v;
            w[(j, i)] = v;
        }
    }
    let inv = inverse_lengthscales(ls, d);
    let (r, _) = row_col_sums(w.as_ref());
    let mut out = SqdistGrads::default();
    if !(want.x1 || want.ls) {
        return out;
    }
    let mut wx = Mat::zeros(n, d);
    let p = crate::tape::par_for_output(par, wx.nrows(), wx.ncols());
    matmul(wx.as_mut(), Accum::Replace, w.as_ref(), x, 1.0, p);
    if want.ls {
        // Σ_ij W_ij (x_i − x_j)² = ½ Σ_ij W̃_ij (x_i − x_j)² = Σ_i r̃_i x_i² − xᵀ W̃ x.
        let t: Vec<f64> = (0..d)
            .map(|q| {
                let mut t = 0.0;
                for (i, &ri) in r.iter().enumerate() {
                    let v = x[(i, q)];
                    t += v * (ri * v - wx[(i, q)]);
                }
                t
            })
            .collect();
        out.ls = Some(lengthscale_adjoint(&t, ls, &inv));
    }
    if want.x1 {
        for q in 0..d {
            let f = 2.0 * inv[q] * inv[q];
            for (i, &ri) in r.iter().enumerate() {
                wx[(i, q)] = f * (ri * x[(i, q)] - wx[(i, q)]);
            }
        }
        out.x1 = Some(wx);
    }
    out
}

/// Adds the adjoint contributions of individual entries `(i, j, W_ij)` of `W = ∂L/∂S`, term by
/// term. Used for the few entries whose weight grows like `1/√S_ij` as `S_ij → 0` (Matérn ½
/// near coincident points), which are zeroed in `W` before the product rule: the products
/// `W_ij (x1_iq − x2_jq)` stay bounded, but [`backward_cross`] would form them as a difference
/// of two large numbers. With `sym`, `x2` is `x1` and both sides go to `grads.x1`.
pub(crate) fn add_pair_terms(
    pairs: &[(usize, usize, f64)],
    x1: MatRef<'_, f64>,
    x2: MatRef<'_, f64>,
    ls: MatRef<'_, f64>,
    sym: bool,
    grads: &mut SqdistGrads,
) {
    if pairs.is_empty() {
        return;
    }
    let d = x1.ncols();
    let inv = inverse_lengthscales(ls, d);
    let mut t = vec![0.0; d];
    for &(i, j, w) in pairs {
        for q in 0..d {
            let diff = x1[(i, q)] - x2[(j, q)];
            let m = w * diff;
            let f = 2.0 * inv[q] * inv[q];
            if let Some(g) = grads.x1.as_mut() {
                g[(i, q)] += f * m;
                if sym {
                    g[(j, q)] -= f * m;
                }
            }
            if let Some(g) = grads.x2.as_mut() {
                g[(j, q)] -= f * m;
            }
            t[q] += m * diff;
        }
    }
    if let Some(g) = grads.ls.as_mut() {
        *g += lengthscale_adjoint(&t, ls, &inv);
    }
}

// ---------------------------------------------------------------------------------------
// tape operation
// ---------------------------------------------------------------------------------------

struct ArdSqdistOp;

impl Backward for ArdSqdistOp {
    fn name(&self) -> &'static str {
        "ard_sqdist"
    }
    fn backward(&self, ctx: &BackwardCtx<'_>, sink: &mut GradSink<'_>) {
        let want = Wants {
            x1: sink.wants(0),
            x2: sink.wants(1),
            ls: sink.wants(2),
        };
        let g = backward_cross(
            ctx.grad(),
            ctx.input(0),
            ctx.input(1),
            ctx.input(2),
            want,
            ctx.par(),
        );
        if let Some(m) = g.x1 {
            sink.add_owned(0, m);
        }
        if let Some(m) = g.x2 {
            sink.add_owned(1, m);
        }
        if let Some(m) = g.ls {
            sink.add_owned(2, m);
        }
    }
}

impl Tape {
    /// Scaled squared distances `S_ij = Σ_q (x1_iq − x2_jq)²/ℓ_q²` (n1×n2) between the rows of
    /// `x1` (n1×D) and `x2` (n2×D), with lengthscales `ls` of shape 1×D (ARD) or 1×1
    /// (isotropic). Differentiable in all three inputs; see [`scaled_sqdist`].
    #[track_caller]
    pub fn ard_sqdist(&mut self, x1: Var, x2: Var, ls: Var) -> Var {
        let par = self.par_for_size(self.shape(x1).0 * self.shape(x2).0);
        let s = scaled_sqdist_par(self.value(x1), self.value(x2), self.value(ls), par);
        self.push(s, &[x1, x2, ls], ArdSqdistOp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_core::rng::{seeded, standard_normal};

    fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        let mut m: f64 = 0.0;
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                m = m.max((a[(i, j)] - b[(i, j)]).abs());
            }
        }
        m
    }

    #[test]
    fn expansion_matches_direct() {
        let mut rng = seeded(11);
        for &(n1, n2, d) in &[(40, 300, 6), (17, 23, 1), (64, 64, 8)] {
            let a = standard_normal(&mut rng, n1, d);
            let b = standard_normal(&mut rng, n2, d);
            let s1 = sqdist_scaled(&a, &b, Method::Direct, Par::Seq);
            let s2 = sqdist_scaled(&a, &b, Method::Expand, Par::Seq);
            assert!(max_abs_diff(s1.as_ref(), s2.as_ref()) < 1e-12 * d as f64 * 10.0);
            let t1 = sqdist_scaled_sym(&a, Method::Direct, Par::Seq);
            let t2 = sqdist_scaled_sym(&a, Method::Expand, Par::Seq);
            let t3 = sqdist_scaled(&a, &a, Method::Direct, Par::Seq);
            assert!(max_abs_diff(t1.as_ref(), t2.as_ref()) < 1e-12 * d as f64 * 10.0);
            assert_eq!(t1, t3);
            for i in 0..n1 {
                assert_eq!(t2[(i, i)], 0.0);
            }
        }
    }

    #[test]
    fn pair_terms_complete_the_product_rule() {
        let mut rng = seeded(5);
        let (n1, n2, d) = (9, 13, 4);
        let x1 = standard_normal(&mut rng, n1, d);
        let x2 = standard_normal(&mut rng, n2, d);
        let w = standard_normal(&mut rng, n1, n2);
        let want = Wants {
            x1: true,
            x2: true,
            ls: true,
        };
        for ls in [
            Mat::from_fn(1, d, |_, q| 0.5 + q as f64 * 0.4),
            Mat::from_fn(1, 1, |_, _| 0.7),
        ] {
            let full = backward_cross(
                w.as_ref(),
                x1.as_ref(),
                x2.as_ref(),
                ls.as_ref(),
                want,
                Par::Seq,
            );
            let mut split_w = w.clone();
            let mut pairs = Vec::new();
            for (i, j) in [(0, 0), (3, 7), (8, 12), (3, 2)] {
                pairs.push((i, j, split_w[(i, j)]));
                split_w[(i, j)] = 0.0;
            }
            let mut split = backward_cross(
                split_w.as_ref(),
                x1.as_ref(),
                x2.as_ref(),
                ls.as_ref(),
                want,
                Par::Seq,
            );
            add_pair_terms(
                &pairs,
                x1.as_ref(),
                x2.as_ref(),
                ls.as_ref(),
                false,
                &mut split,
            );
            for (p, q) in [
                (full.x1, split.x1),
                (full.x2, split.x2),
                (full.ls, split.ls),
            ] {
                let (p, q) = (p.unwrap(), q.unwrap());
                assert!(max_abs_diff(p.as_ref(), q.as_ref()) < 1e-12);
            }
            // symmetric: x2 = x1
            let ws = standard_normal(&mut rng, n1, n1);
            let mut a = ws.clone();
            let full = backward_sym(&mut a, x1.as_ref(), ls.as_ref(), want, Par::Seq);
            let mut b = ws.clone();
            let mut pairs = Vec::new();
            for (i, j) in [(0, 1), (1, 0), (5, 2), (8, 8)] {
                pairs.push((i, j, b[(i, j)]));
                b[(i, j)] = 0.0;
            }
            let mut split = backward_sym(&mut b, x1.as_ref(), ls.as_ref(), want, Par::Seq);
            add_pair_terms(
                &pairs,
                x1.as_ref(),
                x1.as_ref(),
                ls.as_ref(),
                true,
                &mut split,
            );
            for (p, q) in [(full.x1, split.x1), (full.ls, split.ls)] {
                let (p, q) = (p.unwrap(), q.unwrap());
                assert!(max_abs_diff(p.as_ref(), q.as_ref()) < 1e-12);
            }
        }
    }
}
