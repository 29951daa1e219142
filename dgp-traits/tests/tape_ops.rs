//! Finite-difference property tests of every tape operation (one `grad_<op>` per op) and
//! value tests against known results.
//!
//! Shapes are drawn per case (each dimension in 1..=8), values from a seeded generator in
//! well-conditioned ranges; every gradient must match fourth-order central differences to a
//! relative error of 1e-6.

use dgp_core::Error;
use dgp_core::linalg::JitterConfig;
use dgp_core::linalg::Tri;
use dgp_core::rng::{Rng, seeded};
use dgp_traits::tape::Tape;
use dgp_traits::tape::Var;
use dgp_traits::tape::check::{GradCheck, check_gradient};
use faer::{Mat, MatRef, mat};
use proptest::prelude::*;
use rand::RngExt;

// ---------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------

/// Entries uniform in `[lo, hi)`.
fn unif(rng: &mut Rng, r: usize, c: usize, lo: f64, hi: f64) -> Mat<f64> {
    Mat::from_fn(r, c, |_, _| rng.random_range(lo..hi))
}

/// Entries with magnitude uniform in `[lo, hi)` and a random sign.
fn signed(rng: &mut Rng, r: usize, c: usize, lo: f64, hi: f64) -> Mat<f64> {
    Mat::from_fn(r, c, |_, _| {
        let m = rng.random_range(lo..hi);
        if rng.random_bool(0.5) { m } else { -m }
    })
}

/// A square matrix whose `lower` (or upper) triangle is well conditioned (diagonal in
/// [1, 2], off-diagonal in ±0.5) and whose other triangle holds junk the ops must ignore.
fn triangular(rng: &mut Rng, n: usize, lower: bool) -> Mat<f64> {
    Mat::from_fn(n, n, |i, j| {
        let inside = if lower { i > j } else { i < j };
        if i == j {
            rng.random_range(1.0..2.0)
        } else if inside {
            rng.random_range(-0.5..0.5)
        } else {
            rng.random_range(-10.0..10.0)
        }
    })
}

fn assert_grad<F>(inputs: &[Mat<f64>], f: F) -> Result<(), TestCaseError>
where
    F: Fn(&mut Tape, &[Var]) -> Var,
{
    let report = check_gradient(inputs, f, GradCheck::default()).map_err(TestCaseError::fail)?;
    report.within(1e-6).map_err(TestCaseError::fail)
}

fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
    let mut d: f64 = 0.0;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            d = d.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    d
}

fn spd(rng: &mut Rng, n: usize) -> Mat<f64> {
    let x = unif(rng, n, n, -1.0, 1.0);
    let mut a = &x * x.transpose();
    for i in 0..n {
        a[(i, i)] += n as f64;
    }
    a
}

const DIM: std::ops::RangeInclusive<usize> = 1..=8;

// ---------------------------------------------------------------------------------------
// gradient property tests
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    // ----- ops of the tape core -----

    #[test]
    fn grad_matmul(n in DIM, k in DIM, m in DIM, ta: bool, tb: bool, seed: u64) {
        let mut rng = seeded(seed);
        let a = if ta { unif(&mut rng, k, n, -1.0, 1.0) } else { unif(&mut rng, n, k, -1.0, 1.0) };
        let b = if tb { unif(&mut rng, m, k, -1.0, 1.0) } else { unif(&mut rng, k, m, -1.0, 1.0) };
        assert_grad(&[a, b], |t, v| t.matmul_t(v[0], ta, v[1], tb))?;
    }

    #[test]
    fn grad_add(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0), unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.add(v[0], v[1]))?;
    }

    #[test]
    fn grad_sum(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.sum(v[0]))?;
    }

    #[test]
    fn grad_weighted_sum(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let w = unif(&mut rng, r, c, -1.0, 1.0);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.weighted_sum(v[0], w.clone()))?;
    }

    // ----- elementwise -----

    #[test]
    fn grad_sub(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0), unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.sub(v[0], v[1]))?;
    }

    #[test]
    fn grad_mul(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let (a, b) = (unif(&mut rng, r, c, -2.0, 2.0), unif(&mut rng, r, c, -2.0, 2.0));
        assert_grad(&[a.clone(), b], |t, v| t.mul(v[0], v[1]))?;
        // the same variable on both sides: d(x²) = 2x
        assert_grad(&[a], |t, v| t.mul(v[0], v[0]))?;
    }

    #[test]
    fn grad_div(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let (a, b) = (unif(&mut rng, r, c, -2.0, 2.0), signed(&mut rng, r, c, 0.5, 2.0));
        assert_grad(&[a, b], |t, v| t.div(v[0], v[1]))?;
    }

    #[test]
    fn grad_neg(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.neg(v[0]))?;
    }

    #[test]
    fn grad_scale(r in DIM, c in DIM, k in -3.0f64..3.0, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.scale(v[0], k))?;
    }

    #[test]
    fn grad_add_scalar(r in DIM, c in DIM, k in -3.0f64..3.0, seed: u64) {
        let mut rng = seeded(seed);
        // squared afterwards so that the constant shifts the gradient
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0)], |t, v| {
            let y = t.add_scalar(v[0], k);
            t.square(y)
        })?;
    }

    #[test]
    fn grad_scale_by(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0), unif(&mut rng, 1, 1, -2.0, 2.0)], |t, v| t.scale_by(v[0], v[1]))?;
    }

    #[test]
    fn grad_add_scalar_var(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0), unif(&mut rng, 1, 1, -2.0, 2.0)], |t, v| {
            let y = t.add_scalar_var(v[0], v[1]);
            t.square(y)
        })?;
    }

    #[test]
    fn grad_exp(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -2.0, 2.0)], |t, v| t.exp(v[0]))?;
    }

    #[test]
    fn grad_log(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, 0.5, 3.0)], |t, v| t.log(v[0]))?;
    }

    #[test]
    fn grad_sqrt(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, 0.5, 3.0)], |t, v| t.sqrt(v[0]))?;
    }

    #[test]
    fn grad_square(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -2.0, 2.0)], |t, v| t.square(v[0]))?;
    }

    #[test]
    fn grad_softplus(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -4.0, 4.0)], |t, v| t.softplus(v[0]))?;
    }

    #[test]
    fn grad_positive(r in DIM, c in DIM, floor in 0.0f64..0.1, seed: u64) {
        let mut rng = seeded(seed);
        // log afterwards so that the floor matters for the gradient
        assert_grad(&[unif(&mut rng, r, c, -4.0, 4.0)], |t, v| {
            let p = t.positive(v[0], floor + 1e-2);
            t.log(p)
        })?;
    }

    #[test]
    fn grad_clamp_min(r in DIM, c in DIM, lo in -1.0f64..1.0, seed: u64) {
        let mut rng = seeded(seed);
        // entries at least 0.1 away from the kink
        let a = signed(&mut rng, r, c, 0.1, 2.0);
        let a = Mat::from_fn(r, c, |i, j| lo + a[(i, j)]);
        assert_grad(&[a], |t, v| {
            let y = t.clamp_min(v[0], lo);
            t.square(y)
        })?;
    }

    // ----- reductions and broadcasts -----

    #[test]
    fn grad_row_sums(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.row_sums(v[0]))?;
    }

    #[test]
    fn grad_col_sums(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.col_sums(v[0]))?;
    }

    #[test]
    fn grad_broadcast_rows(n in DIM, m in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, 1, m, -1.0, 1.0)], |t, v| t.broadcast_rows(v[0], n))?;
    }

    #[test]
    fn grad_broadcast_cols(n in DIM, m in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, 1, -1.0, 1.0)], |t, v| t.broadcast_cols(v[0], m))?;
    }

    #[test]
    fn grad_add_row(n in DIM, m in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, m, -1.0, 1.0), unif(&mut rng, 1, m, -1.0, 1.0)], |t, v| t.add_row(v[0], v[1]))?;
    }

    #[test]
    fn grad_mul_row(n in DIM, m in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, m, -1.0, 1.0), unif(&mut rng, 1, m, -1.0, 1.0)], |t, v| t.mul_row(v[0], v[1]))?;
    }

    #[test]
    fn grad_add_col(n in DIM, m in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, m, -1.0, 1.0), unif(&mut rng, n, 1, -1.0, 1.0)], |t, v| t.add_col(v[0], v[1]))?;
    }

    #[test]
    fn grad_mul_col(n in DIM, m in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, m, -1.0, 1.0), unif(&mut rng, n, 1, -1.0, 1.0)], |t, v| t.mul_col(v[0], v[1]))?;
    }

    #[test]
    fn grad_transpose(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.transpose(v[0]))?;
    }

    #[test]
    fn grad_add_diag(n in DIM, k in -3.0f64..3.0, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, n, -1.0, 1.0)], |t, v| {
            let y = t.add_diag(v[0], k);
            t.square(y)
        })?;
    }

    #[test]
    fn grad_add_diag_var(n in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, n, -1.0, 1.0), unif(&mut rng, 1, 1, -2.0, 2.0)], |t, v| {
            let y = t.add_diag_var(v[0], v[1]);
            t.square(y)
        })?;
    }

    #[test]
    fn grad_diag(n in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, n, -1.0, 1.0)], |t, v| t.diag(v[0]))?;
    }

    #[test]
    fn grad_diag_matrix(n in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, 1, -1.0, 1.0)], |t, v| t.diag_matrix(v[0]))?;
    }

    #[test]
    fn grad_tril(r in DIM, c in DIM, strict: bool, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -1.0, 1.0)], |t, v| t.tril(v[0], strict))?;
    }

    #[test]
    fn grad_lower_cholesky_factor(n in DIM, floor in 0.0f64..0.1, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, n, -2.0, 2.0)], |t, v| t.lower_cholesky_factor(v[0], floor))?;
    }

    #[test]
    fn grad_softmax(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -2.0, 2.0)], |t, v| t.softmax(v[0]))?;
    }

    #[test]
    fn grad_log_softmax(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -2.0, 2.0)], |t, v| t.log_softmax(v[0]))?;
    }

    #[test]
    fn grad_sum_squares(r in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, r, c, -2.0, 2.0)], |t, v| t.sum_squares(v[0]))?;
    }

    #[test]
    fn grad_logsumexp_rows(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        assert_grad(&[unif(&mut rng, n, k, -3.0, 3.0)], |t, v| t.logsumexp_rows(v[0]))?;
    }

    // ----- indexing -----

    #[test]
    fn grad_gather_rows(n in DIM, m in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let idx: Vec<usize> = (0..k).map(|_| rng.random_range(0..n)).collect();
        assert_grad(&[unif(&mut rng, n, m, -1.0, 1.0)], |t, v| t.gather_rows(v[0], &idx))?;
    }

    #[test]
    fn grad_concat_rows(r0 in DIM, r1 in DIM, c in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let (a, b) = (unif(&mut rng, r0, c, -1.0, 1.0), unif(&mut rng, r1, c, -1.0, 1.0));
        // the first block appears twice: its adjoint is the sum of both slices
        assert_grad(&[a, b], |t, v| t.concat_rows(&[v[0], v[1], v[0]]))?;
    }

    #[test]
    fn grad_concat_cols(r in DIM, c0 in DIM, c1 in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let (a, b) = (unif(&mut rng, r, c0, -1.0, 1.0), unif(&mut rng, r, c1, -1.0, 1.0));
        assert_grad(&[a, b], |t, v| t.concat_cols(&[v[1], v[0], v[1]]))?;
    }

    #[test]
    fn grad_slice_rows(n in DIM, m in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let start = rng.random_range(0..n);
        let len = rng.random_range(1..=n - start);
        assert_grad(&[unif(&mut rng, n, m, -1.0, 1.0)], |t, v| t.slice_rows(v[0], start, len))?;
    }

    #[test]
    fn grad_slice_cols(n in DIM, m in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let start = rng.random_range(0..m);
        let len = rng.random_range(1..=m - start);
        assert_grad(&[unif(&mut rng, n, m, -1.0, 1.0)], |t, v| t.slice_cols(v[0], start, len))?;
    }

    #[test]
    fn grad_reshape_col_major(n in DIM, m in DIM, to_column: bool, seed: u64) {
        let mut rng = seeded(seed);
        let (r, c) = if to_column { (n * m, 1) } else { (m, n) };
        assert_grad(&[unif(&mut rng, n, m, -1.0, 1.0)], |t, v| t.reshape_col_major(v[0], r, c))?;
    }

    // ----- linear algebra -----

    #[test]
    fn grad_cholesky(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        // X ↦ chol(X Xᵀ + n I): the input stays symmetric positive definite.
        assert_grad(&[unif(&mut rng, n, k, -1.0, 1.0)], |t, v| {
            let a = t.matmul_nt(v[0], v[0]);
            let a = t.add_diag(a, n as f64);
            t.cholesky(a).expect("positive definite")
        })?;
    }

    #[test]
    fn grad_cholesky_jittered(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        // A large relative jitter, so that its dependence on mean(diag A) is visible.
        let cfg = JitterConfig { rel: 1e-2, ..JitterConfig::default() };
        assert_grad(&[unif(&mut rng, n, k, -1.0, 1.0)], |t, v| {
            let a = t.matmul_nt(v[0], v[0]);
            let a = t.add_diag(a, n as f64);
            t.cholesky_jittered(a, "test", cfg).expect("positive definite").0
        })?;
    }

    #[test]
    fn grad_tri_solve(n in DIM, k in DIM, lower: bool, transpose: bool, seed: u64) {
        let mut rng = seeded(seed);
        let tri = triangular(&mut rng, n, lower);
        let b = unif(&mut rng, n, k, -1.0, 1.0);
        assert_grad(&[tri, b], |t, v| t.tri_solve(v[0], v[1], system(lower, transpose)))?;
    }

    #[test]
    fn grad_lower_matmul_tn(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        // A full matrix: the upper triangle must be ignored (numerical gradient 0 there).
        let l = unif(&mut rng, n, n, -1.0, 1.0);
        let a = unif(&mut rng, n, k, -1.0, 1.0);
        assert_grad(&[l, a], |t, v| t.lower_matmul_tn(v[0], v[1]))?;
    }

    #[test]
    fn grad_col_sq_norms(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let a = unif(&mut rng, n, k, -1.0, 1.0);
        assert_grad(&[a], |t, v| t.col_sq_norms(v[0]))?;
    }

    #[test]
    fn grad_lower_tn_col_sq_norms(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        // A full matrix: the upper triangle must be ignored (numerical gradient 0 there).
        let l = unif(&mut rng, n, n, -1.0, 1.0);
        let a = unif(&mut rng, n, k, -1.0, 1.0);
        assert_grad(&[l, a], |t, v| t.lower_tn_col_sq_norms(v[0], v[1]))?;
    }

    #[test]
    fn grad_quad_form_cols(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        // A non-symmetric Q: the op reads sym(Q), and its gradient is the symmetric k kᵀ.
        let q = unif(&mut rng, n, n, -1.0, 1.0);
        let kk = unif(&mut rng, n, k, -1.0, 1.0);
        assert_grad(&[q, kk], |t, v| t.quad_form_cols(v[0], v[1]))?;
    }

    #[test]
    fn fused_column_norms_equal_the_unfused_ops(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let l = unif(&mut rng, n, n, -1.0, 1.0);
        let a = unif(&mut rng, n, k, -1.0, 1.0);
        let w = unif(&mut rng, k, 1, -1.0, 1.0);
        let mut t = Tape::new();
        let (lv, av) = (t.leaf(l), t.leaf(a));
        let fused = t.lower_tn_col_sq_norms(lv, av);
        let prod = t.lower_matmul_tn(lv, av);
        let sq = t.square(prod);
        let sums = t.col_sums(sq);
        let plain = t.transpose(sums);
        let (f, p) = (t.value(fused).to_owned(), t.value(plain).to_owned());
        for j in 0..k {
            prop_assert!((f[(j, 0)] - p[(j, 0)]).abs() <= 1e-13 * (1.0 + p[(j, 0)].abs()));
        }
        let (sf, sp) = (t.weighted_sum(fused, w.clone()), t.weighted_sum(plain, w));
        let total = t.sub(sf, sp);
        // d(sf − sp) = 0 up to rounding for both inputs.
        let g = t.backward(total);
        for v in [lv, av] {
            let gv = g.get(v).unwrap();
            for j in 0..gv.ncols() {
                for i in 0..gv.nrows() {
                    prop_assert!(gv[(i, j)].abs() <= 1e-12);
                }
            }
        }
    }

    #[test]
    fn lower_matmul_tn_equals_dense_product_of_the_lower_triangle(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let l = triangular(&mut rng, n, true);
        let a = unif(&mut rng, n, k, -1.0, 1.0);
        let mut t = Tape::new();
        let (lv, av) = (t.constant(l.clone()), t.constant(a.clone()));
        let fast = t.lower_matmul_tn(lv, av);
        // `triangular` fills the other triangle with garbage that must not be read.
        let lower = Mat::from_fn(n, n, |i, j| if i >= j { l[(i, j)] } else { 0.0 });
        let dense = lower.transpose() * &a;
        let got = t.value(fast);
        for j in 0..k {
            for i in 0..n {
                prop_assert!((got[(i, j)] - dense[(i, j)]).abs() <= 1e-13 * (1.0 + dense[(i, j)].abs()));
            }
        }
    }

    #[test]
    fn grad_chol_solve(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let l = triangular(&mut rng, n, true);
        let b = unif(&mut rng, n, k, -1.0, 1.0);
        assert_grad(&[l, b], |t, v| t.chol_solve(v[0], v[1]))?;
    }

    #[test]
    fn grad_logdet_chol(n in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let l = triangular(&mut rng, n, true);
        assert_grad(&[l], |t, v| t.logdet_chol(v[0]))?;
    }

    /// A whole Gaussian log-likelihood through Cholesky, solve and log-determinant.
    #[test]
    fn grad_gaussian_loglik_composite(n in DIM, k in DIM, seed: u64) {
        let mut rng = seeded(seed);
        let x = unif(&mut rng, n, k, -1.0, 1.0);
        let y = unif(&mut rng, n, 1, -1.0, 1.0);
        assert_grad(&[x, y], |t, v| {
            let a = t.matmul_nt(v[0], v[0]);
            let a = t.add_diag(a, 1.0);
            let l = t.cholesky(a).expect("positive definite");
            let alpha = t.tri_solve(l, v[1], Tri::Lower);
            let quad = t.sum_squares(alpha);
            let ld = t.logdet_chol(l);
            let s = t.add(quad, ld);
            t.scale(s, -0.5)
        })?;
    }
}

// ---------------------------------------------------------------------------------------
// value tests
// ---------------------------------------------------------------------------------------

#[test]
fn cholesky_reconstructs() {
    let mut rng = seeded(11);
    for n in [1, 2, 5, 8, 40] {
        let a = spd(&mut rng, n);
        let mut t = Tape::new();
        let va = t.constant(a.clone());
        let l = t.cholesky(va).unwrap();
        let lv = t.value(l).to_owned();
        for j in 0..n {
            for i in 0..j {
                assert_eq!(lv[(i, j)], 0.0);
            }
            assert!(lv[(j, j)] > 0.0);
        }
        let rec = &lv * lv.transpose();
        assert!(
            max_abs_diff(rec.as_ref(), a.as_ref()) < 1e-12 * n as f64,
            "n = {n}"
        );
    }
}

#[test]
fn cholesky_of_non_pd_is_an_error_not_a_panic() {
    let mut t = Tape::new();
    let a = t.leaf(mat![[1.0, 2.0], [2.0, 1.0]]);
    assert!(matches!(
        t.cholesky(a),
        Err(Error::NotPositiveDefinite { pivot: 1, .. })
    ));
    match t.cholesky_jittered(a, "Kuu of layer 3", JitterConfig::default()) {
        Err(Error::NotPositiveDefinite {
            context, retries, ..
        }) => {
            assert_eq!(context, "Kuu of layer 3");
            assert_eq!(retries, 5);
        }
        other => panic!(
            "expected NotPositiveDefinite, got {:?}",
            other.map(|(_, j)| j)
        ),
    }
    let neg = t.leaf(mat![[-1.0]]);
    assert!(matches!(
        t.cholesky(neg),
        Err(Error::NotPositiveDefinite { pivot: 0, .. })
    ));
    let nan = t.leaf(mat![[f64::NAN]]);
    assert!(matches!(t.cholesky(nan), Err(Error::NonFinite { .. })));
    let rect = t.leaf(Mat::zeros(2, 3));
    assert!(matches!(t.cholesky(rect), Err(Error::Shape { .. })));
}

#[test]
fn cholesky_jittered_rescues_a_singular_matrix() {
    // x xᵀ has rank one: plain Cholesky fails, the jittered one adds rel·mean(diag).
    let x = mat![[1.0], [2.0], [3.0]];
    let a = &x * x.transpose();
    let mut t = Tape::new();
    let va = t.leaf(a.clone());
    assert!(t.cholesky(va).is_err());
    let (l, jitter) = t
        .cholesky_jittered(va, "rank one", JitterConfig::default())
        .unwrap();
    assert!(jitter >= 1e-6 * 14.0 / 3.0 * (1.0 - 1e-12));
    let lv = t.value(l).to_owned();
    let rec = &lv * lv.transpose();
    let mut shifted = a;
    for i in 0..3 {
        shifted[(i, i)] += jitter;
    }
    assert!(max_abs_diff(rec.as_ref(), shifted.as_ref()) < 1e-12);
}

/// The triangular system with the given triangle and transpose flag.
fn system(lower: bool, transpose: bool) -> Tri {
    match (lower, transpose) {
        (true, false) => Tri::Lower,
        (true, true) => Tri::LowerT,
        (false, false) => Tri::Upper,
        (false, true) => Tri::UpperT,
    }
}

#[test]
fn tri_solve_residuals() {
    let mut rng = seeded(5);
    for lower in [true, false] {
        for transpose in [false, true] {
            let tri = triangular(&mut rng, 6, lower);
            let b = unif(&mut rng, 6, 3, -1.0, 1.0);
            let mut t = Tape::new();
            let (vt, vb) = (t.constant(tri.clone()), t.constant(b.clone()));
            let x = t.tri_solve(vt, vb, system(lower, transpose));
            let masked = Mat::from_fn(6, 6, |i, j| {
                if (lower && i >= j) || (!lower && i <= j) {
                    tri[(i, j)]
                } else {
                    0.0
                }
            });
            let op = if transpose {
                masked.transpose().to_owned()
            } else {
                masked
            };
            let r = &op * t.value(x);
            assert!(
                max_abs_diff(r.as_ref(), b.as_ref()) < 1e-13,
                "lower {lower} transpose {transpose}"
            );
        }
    }
}

#[test]
fn chol_solve_and_logdet_known_values() {
    let a = mat![[4.0, 2.0], [2.0, 5.0]];
    let mut t = Tape::new();
    let va = t.constant(a.clone());
    let l = t.cholesky(va).unwrap();
    assert!(max_abs_diff(t.value(l), mat![[2.0, 0.0], [1.0, 2.0]].as_ref()) < 1e-15);
    let b = t.constant(mat![[1.0], [-1.0]]);
    let x = t.chol_solve(l, b);
    let r = &a * t.value(x);
    assert!(max_abs_diff(r.as_ref(), mat![[1.0], [-1.0]].as_ref()) < 1e-14);
    let ld = t.logdet_chol(l);
    assert!((t.scalar(ld) - 16.0f64.ln()).abs() < 1e-14);
}

#[test]
fn logsumexp_rows_is_stable() {
    let mut t = Tape::new();
    let a = t.leaf(mat![
        [1e308, 1e308, -1e308],
        [-1000.0, -1000.0, -1000.0],
        [0.0, 0.0, 0.0],
        [f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY]
    ]);
    let l = t.logsumexp_rows(a);
    let v = t.value(l).to_owned();
    assert_eq!(v[(0, 0)], 1e308);
    assert!((v[(1, 0)] - (-1000.0 + 3f64.ln())).abs() < 1e-12);
    assert!((v[(2, 0)] - 3f64.ln()).abs() < 1e-15);
    assert_eq!(v[(3, 0)], f64::NEG_INFINITY);
    let first3 = t.slice_rows(l, 0, 3);
    let s = t.sum(first3);
    let g = t.backward(s);
    let ga = g.get(a).unwrap();
    // row softmax: [½, ½, 0], [⅓, ⅓, ⅓], [⅓, ⅓, ⅓]; the −∞ row gets nothing
    assert!((ga[(0, 0)] - 0.5).abs() < 1e-15 && ga[(0, 2)] == 0.0);
    assert!((ga[(1, 2)] - 1.0 / 3.0).abs() < 1e-15);
    for j in 0..3 {
        assert!(ga[(0, j)].is_finite());
        assert_eq!(ga[(3, j)], 0.0);
    }
}

#[test]
fn softmax_is_on_the_simplex_even_for_huge_logits() {
    let mut t = Tape::new();
    let a = t.leaf(mat![[1000.0, 999.0], [-5.0, 1000.0]]);
    let p = t.softmax(a);
    let pv = t.value(p).to_owned();
    let total: f64 = (0..2)
        .flat_map(|j| (0..2).map(move |i| (i, j)))
        .map(|ij| pv[ij])
        .sum();
    assert!((total - 1.0).abs() < 1e-15);
    let e = (-1.0f64).exp();
    assert!((pv[(0, 0)] - 1.0 / (2.0 + e)).abs() < 1e-15);
    let lp = t.log_softmax(a);
    let lpv = t.value(lp).to_owned();
    for j in 0..2 {
        for i in 0..2 {
            assert!((lpv[(i, j)].exp() - pv[(i, j)]).abs() < 1e-15);
        }
    }
}

#[test]
fn structural_ops_known_values() {
    let mut t = Tape::new();
    let a = t.leaf(mat![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let g = t.gather_rows(a, &[1, 1, 0]);
    assert_eq!(
        t.value(g).to_owned(),
        mat![[4.0, 5.0, 6.0], [4.0, 5.0, 6.0], [1.0, 2.0, 3.0]]
    );
    let s = t.sum(g);
    let gr = t.backward(s);
    // row 1 was gathered twice
    assert_eq!(
        gr.get(a).unwrap().to_owned(),
        mat![[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    );

    let r = t.reshape_col_major(a, 3, 2);
    assert_eq!(
        t.value(r).to_owned(),
        mat![[1.0, 5.0], [4.0, 3.0], [2.0, 6.0]]
    );
    let rs = t.row_sums(a);
    assert_eq!(t.value(rs).to_owned(), mat![[6.0], [15.0]]);
    let cs = t.col_sums(a);
    assert_eq!(t.value(cs).to_owned(), mat![[5.0, 7.0, 9.0]]);
    let row = t.constant(mat![[10.0, 20.0, 30.0]]);
    let ar = t.add_row(a, row);
    assert_eq!(
        t.value(ar).to_owned(),
        mat![[11.0, 22.0, 33.0], [14.0, 25.0, 36.0]]
    );
    let col = t.constant(mat![[2.0], [-1.0]]);
    let mc = t.mul_col(a, col);
    assert_eq!(
        t.value(mc).to_owned(),
        mat![[2.0, 4.0, 6.0], [-4.0, -5.0, -6.0]]
    );
    let cc = t.concat_cols(&[a, col]);
    assert_eq!(
        t.value(cc).to_owned(),
        mat![[1.0, 2.0, 3.0, 2.0], [4.0, 5.0, 6.0, -1.0]]
    );
    let sl = t.slice_cols(a, 1, 2);
    assert_eq!(t.value(sl).to_owned(), mat![[2.0, 3.0], [5.0, 6.0]]);
    let tl = t.tril(a, true);
    assert_eq!(
        t.value(tl).to_owned(),
        mat![[0.0, 0.0, 0.0], [4.0, 0.0, 0.0]]
    );

    let sq = t.leaf(mat![[0.0, 7.0], [3.0, 40.0]]);
    let lf = t.lower_cholesky_factor(sq, 0.5);
    let lv = t.value(lf).to_owned();
    assert_eq!(lv[(0, 1)], 0.0);
    assert_eq!(lv[(1, 0)], 3.0);
    assert!((lv[(0, 0)] - (std::f64::consts::LN_2 + 0.5)).abs() < 1e-15);
    assert!((lv[(1, 1)] - (40.0 + 0.5)).abs() < 1e-12);
    let d = t.diag(sq);
    assert_eq!(t.value(d).to_owned(), mat![[0.0], [40.0]]);
    let dm = t.diag_matrix(d);
    assert_eq!(t.value(dm).to_owned(), mat![[0.0, 0.0], [0.0, 40.0]]);
    let ss = t.sum_squares(sq);
    assert_eq!(t.scalar(ss), 49.0 + 9.0 + 1600.0);
}

#[test]
fn constants_get_no_gradient_and_cost_no_rule() {
    let mut t = Tape::new();
    let c = t.constant(mat![[1.0, 2.0]]);
    let x = t.leaf(mat![[3.0, 4.0]]);
    let y = t.mul(c, x);
    let e = t.exp(c); // constant-only branch
    assert!(!t.needs_grad(e));
    let s = t.sum(y);
    let g = t.backward(s);
    assert!(g.get(c).is_none());
    assert_eq!(g.get(x).unwrap().to_owned(), mat![[1.0, 2.0]]);
}

/// A fused two-input op over several column chunks, run with one and two threads, against
/// the same function of the inputs built from unfused ops: values and both adjoints
/// (bit-identical across threads; within 1e-11 of the unfused ops).
fn assert_fused_matches_plain(
    x: &Mat<f64>,
    y: &Mat<f64>,
    w: &Mat<f64>,
    fused: impl Fn(&mut Tape, Var, Var) -> Var,
    plain: impl Fn(&mut Tape, Var, Var) -> Var,
) {
    let run = |use_fused: bool, par: faer::Par| {
        let mut t = Tape::with_par(par);
        let (xv, yv) = (t.leaf(x.clone()), t.leaf(y.clone()));
        let out = if use_fused {
            fused(&mut t, xv, yv)
        } else {
            plain(&mut t, xv, yv)
        };
        let s = t.weighted_sum(out, w.clone());
        let g = t.backward(s);
        (
            t.value(out).to_owned(),
            g.get(xv).unwrap().to_owned(),
            g.get(yv).unwrap().to_owned(),
        )
    };
    let seq = run(true, faer::Par::Seq);
    let par = run(true, faer::Par::rayon(2));
    assert_eq!(seq, par, "the fused op depends on the parallelism");
    let reference = run(false, faer::Par::Seq);
    for (a, b) in [
        (&seq.0, &reference.0),
        (&seq.1, &reference.1),
        (&seq.2, &reference.2),
    ] {
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                assert!((a[(i, j)] - b[(i, j)]).abs() <= 1e-11 * (1.0 + b[(i, j)].abs()));
            }
        }
    }
}

/// The fused `‖Lᵀa_j‖²` over several column chunks (one partial), run in parallel, against
/// the unfused ops: values and both adjoints.
#[test]
fn fused_column_norms_over_many_chunks_match_the_unfused_ops() {
    let mut rng = seeded(11);
    let (n, k) = (21, 1300);
    let l = unif(&mut rng, n, n, -1.0, 1.0);
    let a = unif(&mut rng, n, k, -1.0, 1.0);
    let w = unif(&mut rng, k, 1, -1.0, 1.0);
    assert_fused_matches_plain(
        &l,
        &a,
        &w,
        |t, lv, av| t.lower_tn_col_sq_norms(lv, av),
        |t, lv, av| {
            let prod = t.lower_matmul_tn(lv, av);
            let sq = t.square(prod);
            let sums = t.col_sums(sq);
            t.transpose(sums)
        },
    );
}

/// `kⱼᵀ sym(Q) kⱼ` over several column chunks, run in parallel, against the unfused ops
/// `col_sums(K ⊙ (½(Q + Qᵀ) K))`: values and both adjoints, and bit-identical results for
/// one and two threads.
#[test]
fn quad_forms_over_many_chunks_match_the_unfused_ops() {
    let mut rng = seeded(12);
    let (n, k) = (19, 1300);
    let q = unif(&mut rng, n, n, -1.0, 1.0);
    let kk = unif(&mut rng, n, k, -1.0, 1.0);
    let w = unif(&mut rng, k, 1, -1.0, 1.0);
    assert_fused_matches_plain(
        &q,
        &kk,
        &w,
        |t, qv, kv| t.quad_form_cols(qv, kv),
        |t, qv, kv| {
            let qt = t.transpose(qv);
            let sum = t.add(qv, qt);
            let qs = t.scale(sum, 0.5);
            let p = t.matmul(qs, kv);
            let prod = t.mul(kv, p);
            let sums = t.col_sums(prod);
            t.transpose(sums)
        },
    );
}
