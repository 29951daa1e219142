//! Plain (non-differentiable) dense linear algebra on `faer` matrices.
//!
//! This module is the one home of the **jitter rule** used throughout the workspace
//! (DESIGN.md, "Numerics"): a covariance matrix `K` is factorised as
//! `chol(K + j·I)` with `j = max(rel · mean(diag K), abs_floor)`; when the factorisation
//! fails, `j` is multiplied by `growth` and the factorisation retried, at most
//! `max_retries` times, after which [`Error::NotPositiveDefinite`] names the matrix.
//! The differentiable tape operation `Tape::cholesky_jittered` of `dgp-traits`
//! calls [`cholesky_jittered_with`], so both follow the same rule.
//!
//! Besides the factorisation the module offers triangular solves
//! ([`tri_solve_in_place`], [`tri_solve`]), solves with a Cholesky factor
//! ([`chol_solve_in_place`]) and the log-determinant from a factor ([`logdet_chol`]).
//! Only the lower triangle of a matrix passed to a Cholesky routine is read.

use crate::error::{Error, Result};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{
    LltError, LltParams, LltRegularization, cholesky_in_place, cholesky_in_place_scratch,
};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Mat, MatMut, MatRef, Par, Spec};
use serde::{Deserialize, Serialize};

/// Settings of the jitter rule of [`cholesky_jittered`] (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct JitterConfig {
    /// Jitter relative to the mean of the diagonal. Default `1e-6`.
    pub rel: f64,
    /// Smallest jitter of the first attempt, used when `rel · mean(diag)` is smaller
    /// (e.g. for an all-zero matrix). Default `1e-10`.
    pub abs_floor: f64,
    /// Factor by which the jitter grows after each failure. Default `10`.
    pub growth: f64,
    /// How many times the jitter is increased before giving up. Default `5`, so the
    /// largest jitter tried is `1e-6 · 10⁵ = 0.1` times the mean diagonal.
    pub max_retries: usize,
}

impl Default for JitterConfig {
    fn default() -> Self {
        JitterConfig {
            rel: 1e-6,
            abs_floor: 1e-10,
            growth: 10.0,
            max_retries: 5,
        }
    }
}

impl JitterConfig {
    /// A configuration that adds no jitter and never retries (plain Cholesky).
    pub fn none() -> Self {
        JitterConfig {
            rel: 0.0,
            abs_floor: 0.0,
            growth: 10.0,
            max_retries: 0,
        }
    }

    /// [`Error::Config`] unless `rel` and `abs_floor` are finite and non-negative and
    /// `growth` is finite and greater than one.
    pub fn validate(&self) -> Result<()> {
        let ok = self.rel.is_finite()
            && self.rel >= 0.0
            && self.abs_floor.is_finite()
            && self.abs_floor >= 0.0
            && self.growth.is_finite()
            && self.growth > 1.0;
        if ok {
            Ok(())
        } else {
            Err(Error::config(
                "jitter",
                format!("need rel ≥ 0, abs_floor ≥ 0 (finite) and growth > 1, got {self:?}"),
            ))
        }
    }
}

/// Result of [`cholesky_jittered_with`].
#[derive(Clone, Debug)]
pub struct JitteredCholesky {
    /// Lower Cholesky factor `L` of `K + jitter·I` (upper triangle zero).
    pub factor: Mat<f64>,
    /// The jitter that was added to the diagonal.
    pub jitter: f64,
    /// How many times the jitter was increased (0 when the first attempt succeeded).
    pub retries: usize,
    /// `∂ jitter / ∂ K_ii` (the same for every diagonal entry): `rel · growthᵏ / n` when
    /// the relative term was the active one, else 0. The tape operation uses it to
    /// return the exact derivative of the computed factor.
    pub jitter_slope: f64,
}

/// Error unless `m` is square and finite.
fn check_square_finite(m: MatRef<'_, f64>, context: &str) -> Result<()> {
    if m.nrows() != m.ncols() {
        return Err(Error::shape(
            context,
            "a square matrix",
            format!("{}×{}", m.nrows(), m.ncols()),
        ));
    }
    crate::error::check_finite(context, m)
}

/// Cholesky of `a + shift·I` into `out` (overwritten; on success the strict upper
/// triangle is zero).
/// Returns the failing pivot on error.
fn factor_shifted_into(
    a: MatRef<'_, f64>,
    shift: f64,
    out: &mut Mat<f64>,
    buf: &mut MemBuffer,
    par: Par,
) -> std::result::Result<(), usize> {
    let n = a.nrows();
    for j in 0..n {
        for i in j..n {
            out[(i, j)] = a[(i, j)];
        }
        out[(j, j)] += shift;
    }
    match cholesky_in_place(
        out.as_mut(),
        LltRegularization::default(),
        par,
        MemStack::new(buf),
        Spec::<LltParams, f64>::default(),
    ) {
        Ok(_) => {
            // faer may use the strict upper triangle as workspace.
            for j in 0..n {
                for i in 0..j {
                    out[(i, j)] = 0.0;
                }
            }
            Ok(())
        }
        Err(LltError::NonPositivePivot { index }) => Err(index),
    }
}

/// Lower Cholesky factor of the symmetric matrix `m` (only its lower triangle is read),
/// without jitter, single-threaded.
///
/// Errors: [`Error::Shape`] for a non-square matrix, [`Error::NonFinite`] for NaN/inf
/// entries, [`Error::NotPositiveDefinite`] (with `retries = 0`, `jitter = 0`) when a pivot
/// is not positive.
pub fn cholesky(m: MatRef<'_, f64>, context: &str) -> Result<Mat<f64>> {
    cholesky_par(m, context, Par::Seq)
}

/// [`cholesky`] with explicit parallelism.
pub fn cholesky_par(m: MatRef<'_, f64>, context: &str, par: Par) -> Result<Mat<f64>> {
    cholesky_jittered_with(m, context, JitterConfig::none(), par).map(|c| c.factor)
}

/// Lower Cholesky factor of `m + jitter·I` following the jitter rule of the module docs;
/// returns the factor and the jitter used. Single-threaded (the right choice for
/// matrices up to a few hundred rows, see the workspace notes).
///
/// Errors: as [`cholesky`], plus [`Error::Config`] for an invalid `cfg`;
/// [`Error::NotPositiveDefinite`] reports the pivot of the last attempt, the number of
/// retries and the largest jitter tried.
pub fn cholesky_jittered(
    m: MatRef<'_, f64>,
    context: &str,
    cfg: JitterConfig,
) -> Result<(Mat<f64>, f64)> {
    cholesky_jittered_with(m, context, cfg, Par::Seq).map(|c| (c.factor, c.jitter))
}

/// The jitter rule with explicit parallelism and full diagnostics; see [`cholesky_jittered`].
///
/// The first attempt adds `j₀ = max(rel · mean(diag m), abs_floor)`; attempt `k` adds
/// `j₀ · growthᵏ`, for `k ≤ max_retries`. When `j₀ = 0` (e.g. [`JitterConfig::none`])
/// there is a single attempt. An empty (0×0) matrix gives an empty factor.
pub fn cholesky_jittered_with(
    m: MatRef<'_, f64>,
    context: &str,
    cfg: JitterConfig,
    par: Par,
) -> Result<JitteredCholesky> {
    cfg.validate()?;
    check_square_finite(m, context)?;
    let n = m.nrows();
    let mut factor = Mat::zeros(n, n);
    if n == 0 {
        return Ok(JitteredCholesky {
            factor,
            jitter: 0.0,
            retries: 0,
            jitter_slope: 0.0,
        });
    }
    let mean_diag = (0..n).map(|i| m[(i, i)]).sum::<f64>() / n as f64;
    let rel_term = cfg.rel * mean_diag;
    let (j0, slope0) = if rel_term >= cfg.abs_floor && cfg.rel > 0.0 {
        (rel_term, cfg.rel / n as f64)
    } else {
        (cfg.abs_floor, 0.0)
    };
    let max_retries = if j0 > 0.0 { cfg.max_retries } else { 0 };
    let mut buf = MemBuffer::new(cholesky_in_place_scratch::<f64>(
        n,
        par,
        Spec::<LltParams, f64>::default(),
    ));
    let mut scale = 1.0;
    let mut last_pivot = 0;
    for k in 0..=max_retries {
        let jitter = j0 * scale;
        match factor_shifted_into(m, jitter, &mut factor, &mut buf, par) {
            Ok(()) => {
                return Ok(JitteredCholesky {
                    factor,
                    jitter,
                    retries: k,
                    jitter_slope: slope0 * scale,
                });
            }
            Err(pivot) => last_pivot = pivot,
        }
        if k < max_retries {
            scale *= cfg.growth;
        }
    }
    Err(Error::NotPositiveDefinite {
        context: context.to_string(),
        pivot: last_pivot,
        retries: max_retries,
        jitter: j0 * scale,
    })
}

/// Which triangular system a solve addresses: `op(T) X = B` with `T` lower or upper
/// triangular and `op(T)` either `T` or `Tᵀ`. Only the named triangle of `T` is read.
///
/// ```
/// use dgp_core::linalg::{Tri, tri_solve};
/// use faer::{Par, mat};
/// let l = mat![[2.0, 0.0], [1.0, 1.0]];
/// let b = mat![[2.0], [2.0]];
/// let x = tri_solve(l.as_ref(), b.as_ref(), Tri::Lower, Par::Seq); // L x = b
/// assert_eq!((x[(0, 0)], x[(1, 0)]), (1.0, 1.0));
/// let y = tri_solve(l.as_ref(), b.as_ref(), Tri::LowerT, Par::Seq); // Lᵀ y = b
/// assert_eq!((y[(0, 0)], y[(1, 0)]), (0.0, 2.0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tri {
    /// `L X = B`, `L` lower triangular (`X = L⁻¹B`).
    Lower,
    /// `Lᵀ X = B`, `L` lower triangular (`X = L⁻ᵀB`).
    LowerT,
    /// `U X = B`, `U` upper triangular.
    Upper,
    /// `Uᵀ X = B`, `U` upper triangular.
    UpperT,
}

impl Tri {
    /// Whether `T` is lower triangular.
    pub fn is_lower(self) -> bool {
        matches!(self, Tri::Lower | Tri::LowerT)
    }

    /// Whether the system is solved with `Tᵀ`.
    pub fn is_transposed(self) -> bool {
        matches!(self, Tri::LowerT | Tri::UpperT)
    }

    /// The same triangle with the transpose flag flipped (`Lower` ↔ `LowerT`).
    pub fn flip_transpose(self) -> Tri {
        match self {
            Tri::Lower => Tri::LowerT,
            Tri::LowerT => Tri::Lower,
            Tri::Upper => Tri::UpperT,
            Tri::UpperT => Tri::Upper,
        }
    }
}

/// Solves `op(T) X = B` in place (`B` is overwritten by `X`) for the system `sys`
/// ([`Tri`]). Only the relevant triangle of `t` is read.
///
/// Panics when the shapes do not match.
pub fn tri_solve_in_place(t: MatRef<'_, f64>, b: MatMut<'_, f64>, sys: Tri, par: Par) {
    match sys {
        Tri::Lower => solve_lower_triangular_in_place(t, b, par),
        Tri::LowerT => solve_upper_triangular_in_place(t.transpose(), b, par),
        Tri::Upper => solve_upper_triangular_in_place(t, b, par),
        Tri::UpperT => solve_lower_triangular_in_place(t.transpose(), b, par),
    }
}

/// `op(T)⁻¹ B` as a new matrix; see [`tri_solve_in_place`].
pub fn tri_solve(t: MatRef<'_, f64>, b: MatRef<'_, f64>, sys: Tri, par: Par) -> Mat<f64> {
    let mut x = b.to_owned();
    tri_solve_in_place(t, x.as_mut(), sys, par);
    x
}

/// Solves `(L Lᵀ) X = B` in place for a lower Cholesky factor `L` (two triangular solves).
pub fn chol_solve_in_place(l: MatRef<'_, f64>, mut b: MatMut<'_, f64>, par: Par) {
    solve_lower_triangular_in_place(l, b.as_mut(), par);
    solve_upper_triangular_in_place(l.transpose(), b, par);
}

/// `log det(L Lᵀ) = 2 Σᵢ log Lᵢᵢ` for a lower Cholesky factor `L`.
pub fn logdet_chol(l: MatRef<'_, f64>) -> f64 {
    2.0 * (0..l.nrows().min(l.ncols()))
        .map(|i| l[(i, i)].ln())
        .sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::mat;

    fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        let mut d: f64 = 0.0;
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                d = d.max((a[(i, j)] - b[(i, j)]).abs());
            }
        }
        d
    }

    #[test]
    fn cholesky_of_known_matrix() {
        // [[4, 2], [2, 5]] = L Lᵀ with L = [[2, 0], [1, 2]].
        let a = mat![[4.0, 2.0], [2.0, 5.0]];
        let l = cholesky(a.as_ref(), "a").unwrap();
        assert!(max_abs_diff(l.as_ref(), mat![[2.0, 0.0], [1.0, 2.0]].as_ref()) < 1e-15);
        assert!((logdet_chol(l.as_ref()) - 16.0f64.ln()).abs() < 1e-14);
    }

    #[test]
    fn upper_triangle_is_ignored() {
        let a = mat![[4.0, 99.0], [2.0, 5.0]];
        let l = cholesky(a.as_ref(), "a").unwrap();
        assert_eq!(l[(0, 1)], 0.0);
        assert!((l[(1, 1)] - 2.0).abs() < 1e-15);
    }

    #[test]
    fn non_pd_fails_with_typed_error() {
        let a = mat![[1.0, 2.0], [2.0, 1.0]]; // eigenvalues 3 and −1
        match cholesky_jittered(a.as_ref(), "Kuu of layer 1", JitterConfig::default()) {
            Err(Error::NotPositiveDefinite {
                context,
                pivot,
                retries,
                jitter,
            }) => {
                assert_eq!(context, "Kuu of layer 1");
                assert_eq!(pivot, 1);
                assert_eq!(retries, 5);
                assert!((jitter - 0.1).abs() < 1e-12, "jitter {jitter}");
            }
            other => panic!("expected NotPositiveDefinite, got {other:?}"),
        }
        assert!(matches!(
            cholesky(a.as_ref(), "a"),
            Err(Error::NotPositiveDefinite { retries: 0, .. })
        ));
    }

    #[test]
    fn jitter_grows_until_success() {
        // diag(1, 1, −1e−5): mean diagonal ≈ 2/3, j₀ ≈ 6.7e−7; needs j > 1e−5 → two retries.
        let a = mat![[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1e-5]];
        let r = cholesky_jittered_with(a.as_ref(), "a", JitterConfig::default(), Par::Seq).unwrap();
        let mean = (2.0 - 1e-5) / 3.0;
        assert_eq!(r.retries, 2);
        assert!((r.jitter - 1e-6 * mean * 100.0).abs() < 1e-18);
        assert!((r.jitter_slope - 1e-6 * 100.0 / 3.0).abs() < 1e-18);
        let rec = &r.factor * r.factor.transpose();
        let mut shifted = a.clone();
        for i in 0..3 {
            shifted[(i, i)] += r.jitter;
        }
        assert!(max_abs_diff(rec.as_ref(), shifted.as_ref()) < 1e-14);
    }

    #[test]
    fn absolute_floor_applies_to_zero_matrix() {
        let a = Mat::<f64>::zeros(3, 3);
        let (l, j) = cholesky_jittered(a.as_ref(), "zeros", JitterConfig::default()).unwrap();
        assert_eq!(j, 1e-10);
        assert!((l[(2, 2)] - 1e-5).abs() < 1e-18);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let a = Mat::<f64>::zeros(2, 3);
        assert!(matches!(
            cholesky(a.as_ref(), "a"),
            Err(Error::Shape { .. })
        ));
        let mut b = Mat::<f64>::identity(2, 2);
        b[(1, 0)] = f64::NAN;
        assert!(matches!(
            cholesky(b.as_ref(), "b"),
            Err(Error::NonFinite { row: 1, col: 0, .. })
        ));
        let bad = JitterConfig {
            growth: 1.0,
            ..JitterConfig::default()
        };
        assert!(matches!(
            cholesky_jittered(Mat::<f64>::identity(2, 2).as_ref(), "c", bad),
            Err(Error::Config(_))
        ));
        let (e, j) = cholesky_jittered(
            Mat::<f64>::zeros(0, 0).as_ref(),
            "e",
            JitterConfig::default(),
        )
        .unwrap();
        assert_eq!((e.nrows(), j), (0, 0.0));
    }

    #[test]
    fn triangular_solves_all_variants() {
        let t = mat![[2.0, 7.0, -1.0], [0.5, 1.5, 3.0], [-1.0, 0.25, 3.0]];
        let b = mat![[1.0, -2.0], [0.5, 4.0], [3.0, 1.0]];
        for sys in [Tri::Lower, Tri::LowerT, Tri::Upper, Tri::UpperT] {
            let (lower, transpose) = (sys.is_lower(), sys.is_transposed());
            {
                let tri = Mat::from_fn(3, 3, |i, j| {
                    if (lower && i >= j) || (!lower && i <= j) {
                        t[(i, j)]
                    } else {
                        0.0
                    }
                });
                let x = tri_solve(t.as_ref(), b.as_ref(), sys, Par::Seq);
                let op = if transpose {
                    tri.transpose().to_owned()
                } else {
                    tri.clone()
                };
                let r = &op * &x;
                assert!(
                    max_abs_diff(r.as_ref(), b.as_ref()) < 1e-13,
                    "{lower} {transpose}"
                );
            }
        }
        let a = mat![[4.0, 2.0], [2.0, 5.0]];
        let l = cholesky(a.as_ref(), "a").unwrap();
        let mut x = mat![[1.0], [2.0]];
        chol_solve_in_place(l.as_ref(), x.as_mut(), Par::Seq);
        let r = &a * &x;
        assert!(max_abs_diff(r.as_ref(), mat![[1.0], [2.0]].as_ref()) < 1e-14);
    }
}
