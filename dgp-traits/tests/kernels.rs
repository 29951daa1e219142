//! Kernels: known values, Gram-matrix properties and finite-difference gradient checks of
//! every fused tape operation.

use dgp_traits::kernels::{Kernel, KernelHyper, KernelKind, KernelVars, scaled_sqdist};
use dgp_traits::tape::Tape;
use dgp_traits::tape::check::{GradCheck, check_gradient};
use faer::{Mat, MatRef, Side, mat};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const STATIONARY: [KernelKind; 4] = [
    KernelKind::Rbf,
    KernelKind::Matern12,
    KernelKind::Matern32,
    KernelKind::Matern52,
];
const ALL: [KernelKind; 5] = [
    KernelKind::Rbf,
    KernelKind::Matern12,
    KernelKind::Matern32,
    KernelKind::Matern52,
    KernelKind::Linear,
];

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    }
}

fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
    let mut m: f64 = 0.0;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            m = m.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    m
}

fn hyper(ls: &Mat<f64>, var: f64) -> KernelHyper {
    KernelHyper {
        lengthscales: ls.clone(),
        variance: var,
    }
}

// ---------------------------------------------------------------------------------------
// strategies
// ---------------------------------------------------------------------------------------

/// Random inputs and hyperparameters; dims in 1..=8.
#[derive(Clone, Debug)]
struct Case {
    x1: Mat<f64>,
    x2: Mat<f64>,
    ls: Mat<f64>,
    var: f64,
    ard: bool,
}

/// `separated`: the first input column of x1 lies in [−1.5, −0.5] and of x2 in [0.5, 1.5]
/// (so every cross pair is at least 1 apart), and the rows of x1 are at least 1 apart from each
/// other (first column 1.5·i + [0, 0.5)). Needed where the kernel is not smooth at r = 0 and
/// the 4th-order finite differences would straddle the kink.
fn case(separated: bool) -> impl Strategy<Value = Case> {
    (1..=8usize, 1..=8usize, 1..=8usize, any::<bool>())
        .prop_flat_map(|(n1, n2, d, ard)| {
            (
                Just((n1, n2, d, ard)),
                prop::collection::vec(-1.0..1.0f64, n1 * d),
                prop::collection::vec(-1.0..1.0f64, n2 * d),
                prop::collection::vec(0.5..2.5f64, if ard { d } else { 1 }),
                0.3..3.0f64,
            )
        })
        .prop_map(move |((n1, n2, d, ard), a, b, l, var)| {
            let mut x1 = Mat::from_fn(n1, d, |i, q| a[i + q * n1]);
            let mut x2 = Mat::from_fn(n2, d, |j, q| b[j + q * n2]);
            if separated {
                for i in 0..n1 {
                    x1[(i, 0)] = 1.5 * i as f64 + 0.25 * (x1[(i, 0)] + 1.0);
                }
                // Shift x2 so that its first coordinates are ≥ 1 away from all of x1's.
                let top = 1.5 * n1 as f64 + 0.5;
                for j in 0..n2 {
                    x2[(j, 0)] = top + 0.5 * (x2[(j, 0)] + 1.0);
                }
            }
            Case {
                x1,
                x2,
                ls: Mat::from_fn(1, l.len(), |_, q| l[q]),
                var,
                ard,
            }
        })
}

fn separated_for(kind: KernelKind) -> bool {
    matches!(kind, KernelKind::Matern12 | KernelKind::Matern32)
}

// ---------------------------------------------------------------------------------------
// gradient checks
// ---------------------------------------------------------------------------------------

fn fail(e: String) -> TestCaseError {
    TestCaseError::fail(e)
}

/// Checks `record`, `record_sym` and `record_diag` of `kind` against finite differences with
/// respect to both inputs and every hyperparameter.
fn check_kernel(kind: KernelKind, c: &Case) -> Result<(), TestCaseError> {
    let k = Kernel::new(kind, c.x1.ncols(), c.ard).unwrap();
    let var = mat![[c.var]];
    let cfg = GradCheck::default();
    let vars = |t: &mut Tape, ls, var| KernelVars {
        lengthscales: ls,
        variance: if k.has_variance() {
            var
        } else {
            t.constant_scalar(1.0)
        },
    };
    // cross
    let inputs = [c.x1.clone(), c.x2.clone(), c.ls.clone(), var.clone()];
    check_gradient(
        &inputs,
        |t, v| {
            let h = vars(t, v[2], v[3]);
            k.record(t, v[0], v[1], h)
        },
        cfg,
    )
    .map_err(fail)?
    .within(1e-6)
    .map_err(|e| fail(format!("cross: {e}")))?;
    // symmetric
    let inputs = [c.x1.clone(), c.ls.clone(), var.clone()];
    check_gradient(
        &inputs,
        |t, v| {
            let h = vars(t, v[1], v[2]);
            k.record_sym(t, v[0], h)
        },
        cfg,
    )
    .map_err(fail)?
    .within(1e-6)
    .map_err(|e| fail(format!("sym: {e}")))?;
    // diagonal
    check_gradient(
        &inputs,
        |t, v| {
            let h = vars(t, v[1], v[2]);
            k.record_diag(t, v[0], h)
        },
        cfg,
    )
    .map_err(fail)?
    .within(1e-6)
    .map_err(|e| fail(format!("diag: {e}")))?;
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn grad_kernel_rbf(c in case(separated_for(KernelKind::Rbf))) {
        check_kernel(KernelKind::Rbf, &c)?;
    }

    #[test]
    fn grad_kernel_matern12(c in case(separated_for(KernelKind::Matern12))) {
        check_kernel(KernelKind::Matern12, &c)?;
    }

    #[test]
    fn grad_kernel_matern32(c in case(separated_for(KernelKind::Matern32))) {
        check_kernel(KernelKind::Matern32, &c)?;
    }

    #[test]
    fn grad_kernel_matern52(c in case(separated_for(KernelKind::Matern52))) {
        check_kernel(KernelKind::Matern52, &c)?;
    }

    #[test]
    fn grad_kernel_linear(c in case(false)) {
        check_kernel(KernelKind::Linear, &c)?;
    }

    #[test]
    fn grad_ard_sqdist(c in case(false)) {
        check_gradient(
            &[c.x1.clone(), c.x2.clone(), c.ls.clone()],
            |t, v| t.ard_sqdist(v[0], v[1], v[2]),
            GradCheck::default(),
        )
        .map_err(fail)?
        .within(1e-6)
        .map_err(fail)?;
    }

    /// Gram matrices are positive semi-definite: smallest eigenvalue ≥ −1e-10·trace.
    #[test]
    fn gram_is_psd(
        kind_ix in 0..5usize,
        n in 1..=12usize,
        d in 1..=5usize,
        ard in any::<bool>(),
        seed in any::<u64>(),
        var in 0.1..5.0f64,
    ) {
        let kind = ALL[kind_ix];
        let mut rng = dgp_core::rng::seeded(seed);
        let x = dgp_core::rng::standard_normal(&mut rng, n, d);
        let raw = dgp_core::rng::standard_normal(&mut rng, 1, d);
        let k = Kernel::new(kind, d, ard).unwrap();
        let (r, cols) = k.lengthscale_shape();
        let ls = Mat::from_fn(r, cols, |_, q| 0.2 + raw[(0, q)].abs() * 2.0);
        let g = k.gram(x.as_ref(), hyper(&ls, var).as_ref());
        let eig = g.self_adjoint_eigenvalues(Side::Lower).unwrap();
        let trace: f64 = (0..n).map(|i| g[(i, i)]).sum();
        prop_assert!(eig[0] >= -1e-10 * trace, "λ_min = {} (trace {trace}) for {kind:?}", eig[0]);
    }

    /// `gram` is exactly symmetric, equals `matrix(x, x)` and the tape's values; `diag` equals
    /// its diagonal; the tape records exactly the plain values.
    #[test]
    fn gram_symmetric_matches_matrix_and_diag(kind_ix in 0..5usize, c in case(false)) {
        let kind = ALL[kind_ix];
        let k = Kernel::new(kind, c.x1.ncols(), c.ard).unwrap();
        let h = hyper(&c.ls, c.var);
        let g = k.gram(c.x1.as_ref(), h.as_ref());
        let m = k.matrix(c.x1.as_ref(), c.x1.as_ref(), h.as_ref());
        let dg = k.diag(c.x1.as_ref(), h.as_ref());
        let n = g.nrows();
        for i in 0..n {
            for j in 0..n {
                prop_assert_eq!(g[(i, j)], g[(j, i)]);
            }
            prop_assert!((dg[(i, 0)] - g[(i, i)]).abs() <= 1e-14 * g[(i, i)].abs().max(1.0));
        }
        prop_assert!(max_abs_diff(g.as_ref(), m.as_ref()) <= 1e-12);

        let mut t = Tape::new();
        let (x1, x2) = (t.constant(c.x1.clone()), t.constant(c.x2.clone()));
        let hv = KernelVars { lengthscales: t.leaf(c.ls.clone()), variance: t.leaf_scalar(c.var) };
        let kx = k.record(&mut t, x1, x2, hv);
        let ks = k.record_sym(&mut t, x1, hv);
        let kd = k.record_diag(&mut t, x1, hv);
        prop_assert_eq!(t.value(kx).to_owned(), k.matrix(c.x1.as_ref(), c.x2.as_ref(), h.as_ref()));
        prop_assert_eq!(t.value(ks).to_owned(), g);
        prop_assert_eq!(t.value(kd).to_owned(), dg);
    }

    /// A 1×1 lengthscale (isotropic) gives the same values as ARD with all lengthscales equal.
    #[test]
    fn isotropic_equals_ard_with_equal_lengthscales(kind_ix in 0..5usize, c in case(false), l in 0.3..3.0f64) {
        let kind = ALL[kind_ix];
        let d = c.x1.ncols();
        let iso = Kernel::new(kind, d, false).unwrap();
        let ard = Kernel::new(kind, d, true).unwrap();
        let hi = hyper(&mat![[l]], c.var);
        let ha = hyper(&Mat::from_fn(1, d, |_, _| l), c.var);
        let a = iso.matrix(c.x1.as_ref(), c.x2.as_ref(), hi.as_ref());
        let b = ard.matrix(c.x1.as_ref(), c.x2.as_ref(), ha.as_ref());
        prop_assert!(max_abs_diff(a.as_ref(), b.as_ref()) <= 1e-14);
        let a = iso.diag(c.x1.as_ref(), hi.as_ref());
        let b = ard.diag(c.x1.as_ref(), ha.as_ref());
        prop_assert!(max_abs_diff(a.as_ref(), b.as_ref()) <= 1e-14);
        // and the isotropic lengthscale adjoint is the sum of the ARD ones
        let grad = |k: &Kernel, ls: Mat<f64>| {
            let mut t = Tape::new();
            let (x1, x2) = (t.constant(c.x1.clone()), t.constant(c.x2.clone()));
            let hv = KernelVars { lengthscales: t.leaf(ls), variance: t.leaf_scalar(c.var) };
            let kx = k.record(&mut t, x1, x2, hv);
            let s = t.sum(kx);
            let g = t.backward(s);
            g.get(hv.lengthscales).map(|m| m.to_owned())
        };
        if let (Some(gi), Some(ga)) = (grad(&iso, mat![[l]]), grad(&ard, Mat::from_fn(1, d, |_, _| l))) {
            let sum: f64 = (0..d).map(|q| ga[(0, q)]).sum();
            prop_assert!((gi[(0, 0)] - sum).abs() <= 1e-10 * sum.abs().max(1.0));
        }
    }
}

// ---------------------------------------------------------------------------------------
// known values
// ---------------------------------------------------------------------------------------

/// x1 = [[0, 0], [1, 2]], x2 = [[1, 1]], ℓ = (1, 2), σ² = 2: s = (1.25, 0.25).
fn known(kind: KernelKind, expected: [f64; 2]) {
    let k = Kernel::new(kind, 2, true).unwrap();
    let x1 = mat![[0.0, 0.0], [1.0, 2.0]];
    let x2 = mat![[1.0, 1.0]];
    let h = hyper(&mat![[1.0, 2.0]], 2.0);
    let m = k.matrix(x1.as_ref(), x2.as_ref(), h.as_ref());
    assert_eq!((m.nrows(), m.ncols()), (2, 1));
    for i in 0..2 {
        assert!(
            (m[(i, 0)] - expected[i]).abs() <= 1e-15,
            "{kind:?}[{i}]: {} vs {}",
            m[(i, 0)],
            expected[i]
        );
    }
    let d = k.diag(x1.as_ref(), h.as_ref());
    assert_eq!(d, mat![[2.0], [2.0]]);
    let s = scaled_sqdist(x1.as_ref(), x2.as_ref(), h.lengthscales.as_ref());
    assert_eq!(s, mat![[1.25], [0.25]]);
}

#[test]
fn known_values_rbf() {
    // 2 exp(−s/2)
    known(KernelKind::Rbf, [1.0705228570379806, 1.764993805169191]);
}

#[test]
fn known_values_matern12() {
    // 2 exp(−√s)
    known(
        KernelKind::Matern12,
        [0.6538437907035158, 1.2130613194252668],
    );
}

#[test]
fn known_values_matern32() {
    // 2 (1 + √(3s)) exp(−√(3s))
    known(
        KernelKind::Matern32,
        [0.8469370296774683, 1.5697753079149013],
    );
}

#[test]
fn known_values_matern52() {
    // 2 (1 + √(5s) + 5s/3) exp(−√(5s))
    known(
        KernelKind::Matern52,
        [0.9166158179668701, 1.6572982848362505],
    );
}

#[test]
fn known_values_linear() {
    // v = (1, 2): k(x, x') = x_1 x'_1 + 2 x_2 x'_2
    let k = Kernel::new(KernelKind::Linear, 2, true).unwrap();
    let x1 = mat![[0.0, 0.0], [1.0, 2.0]];
    let x2 = mat![[1.0, 1.0], [-1.0, 0.5]];
    let h = hyper(&mat![[1.0, 2.0]], 123.0);
    assert_eq!(
        k.matrix(x1.as_ref(), x2.as_ref(), h.as_ref()),
        mat![[0.0, 0.0], [5.0, 1.0]]
    );
    assert_eq!(k.diag(x1.as_ref(), h.as_ref()), mat![[0.0], [9.0]]);
    assert_eq!(
        k.gram(x2.as_ref(), h.as_ref()),
        mat![[3.0, 0.0], [0.0, 1.5]]
    );
    // isotropic weight 3: 3 x·x'
    let k = Kernel::new(KernelKind::Linear, 2, false).unwrap();
    let h = hyper(&mat![[3.0]], 0.0);
    assert_eq!(
        k.matrix(x1.as_ref(), x2.as_ref(), h.as_ref()),
        mat![[0.0, 0.0], [9.0, 0.0]]
    );
}

#[test]
fn kernel_of_coincident_points_is_the_variance() {
    for kind in STATIONARY {
        let k = Kernel::new(kind, 3, true).unwrap();
        let x = mat![[0.3, -1.0, 2.0]];
        let h = hyper(&mat![[0.5, 1.0, 2.0]], 1.7);
        assert_eq!(
            k.matrix(x.as_ref(), x.as_ref(), h.as_ref())[(0, 0)],
            1.7,
            "{kind:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// coincident points, large blocks, edge cases
// ---------------------------------------------------------------------------------------

/// Z = X: every Matérn gradient is finite, for the cross and the symmetric operations and for
/// small (direct) and large (matrix-product) blocks. For 3/2 and 5/2 (differentiable at r = 0)
/// the cross gradient also matches finite differences.
#[test]
fn matern_gradients_finite_at_coincident_points() {
    let mut rng = dgp_core::rng::seeded(3);
    for &(n, d) in &[(5usize, 3usize), (80, 4)] {
        let x = dgp_core::rng::standard_normal(&mut rng, n, d);
        let ls = mat![[0.7, 1.3, 0.9, 1.1]];
        let ls = Mat::from_fn(1, d, |_, q| ls[(0, q)]);
        for kind in [
            KernelKind::Matern12,
            KernelKind::Matern32,
            KernelKind::Matern52,
        ] {
            let k = Kernel::new(kind, d, true).unwrap();
            let mut t = Tape::new();
            let (x1, x2) = (t.leaf(x.clone()), t.leaf(x.clone()));
            let hv = KernelVars {
                lengthscales: t.leaf(ls.clone()),
                variance: t.leaf_scalar(1.3),
            };
            let kc = k.record(&mut t, x1, x2, hv);
            let ks = k.record_sym(&mut t, x1, hv);
            let a = t.sum(kc);
            let b = t.sum(ks);
            let w = t.weighted_sum(kc, dgp_traits::tape::check::projection_weights(n, n));
            let ab = t.add(a, b);
            let tot = t.add(ab, w);
            assert!(t.scalar(tot).is_finite());
            let g = t.backward(tot);
            for v in [x1, x2, hv.lengthscales, hv.variance] {
                let m = g.get(v).unwrap();
                dgp_core::check_finite("gradient", m)
                    .unwrap_or_else(|e| panic!("{kind:?} n={n}: {e}"));
            }
            if kind != KernelKind::Matern12 && n <= 8 {
                check_gradient(
                    &[x.clone(), x.clone(), ls.clone(), mat![[1.3]]],
                    |t, v| {
                        k.record(
                            t,
                            v[0],
                            v[1],
                            KernelVars {
                                lengthscales: v[2],
                                variance: v[3],
                            },
                        )
                    },
                    GradCheck::default(),
                )
                .unwrap()
                .within(1e-6)
                .unwrap();
            }
        }
    }
    // Matérn-½ at r = 0 uses the subgradient 0: a single pair of coincident points has zero
    // input gradients.
    let k = Kernel::new(KernelKind::Matern12, 2, true).unwrap();
    let mut t = Tape::new();
    let (x1, x2) = (t.leaf(mat![[0.4, -0.2]]), t.leaf(mat![[0.4, -0.2]]));
    let hv = KernelVars {
        lengthscales: t.leaf(mat![[1.0, 2.0]]),
        variance: t.leaf_scalar(1.0),
    };
    let kc = k.record(&mut t, x1, x2, hv);
    let g = t.backward(kc);
    assert_eq!(g.get(x1).unwrap().to_owned(), mat![[0.0, 0.0]]);
    assert_eq!(g.get(x2).unwrap().to_owned(), mat![[0.0, 0.0]]);
    assert_eq!(g.get(hv.lengthscales).unwrap().to_owned(), mat![[0.0, 0.0]]);
    assert_eq!(g.get(hv.variance).unwrap()[(0, 0)], 1.0);
}

/// Blocks large enough for the `‖a‖² + ‖b‖² − 2a·b` forward path: values agree with a direct
/// per-entry evaluation and gradients pass the finite-difference check.
#[test]
fn large_blocks_values_and_gradients() {
    let mut rng = dgp_core::rng::seeded(8);
    let (n1, n2, d) = (20, 220, 3);
    let x1 = dgp_core::rng::standard_normal(&mut rng, n1, d);
    let x2 = dgp_core::rng::standard_normal(&mut rng, n2, d);
    let ls = mat![[0.8, 1.4, 1.1]];
    for kind in [KernelKind::Rbf, KernelKind::Matern32, KernelKind::Matern52] {
        let k = Kernel::new(kind, d, true).unwrap();
        let h = hyper(&ls, 1.6);
        let m = k.matrix(x1.as_ref(), x2.as_ref(), h.as_ref());
        let by_entry = Mat::from_fn(n1, n2, |i, j| {
            k.matrix(x1.subrows(i, 1), x2.subrows(j, 1), h.as_ref())[(0, 0)]
        });
        assert!(
            max_abs_diff(m.as_ref(), by_entry.as_ref()) < 1e-13,
            "{kind:?}"
        );
        let g = k.gram(x2.as_ref(), h.as_ref());
        let by_entry = Mat::from_fn(n2, n2, |i, j| {
            k.matrix(x2.subrows(i, 1), x2.subrows(j, 1), h.as_ref())[(0, 0)]
        });
        assert!(
            max_abs_diff(g.as_ref(), by_entry.as_ref()) < 1e-13,
            "{kind:?}"
        );
        check_gradient(
            &[x1.clone(), x2.clone(), ls.clone(), mat![[1.6]]],
            |t, v| {
                k.record(
                    t,
                    v[0],
                    v[1],
                    KernelVars {
                        lengthscales: v[2],
                        variance: v[3],
                    },
                )
            },
            GradCheck::default(),
        )
        .unwrap()
        .within(1e-6)
        .unwrap();
    }
}

/// With σ² = 0 the variance adjoint is Σ Ḡ ⊙ φ (not 0/0).
#[test]
fn variance_gradient_at_zero_variance() {
    for kind in STATIONARY {
        let k = Kernel::new(kind, 2, false).unwrap();
        let x1 = mat![[0.0, 1.0], [0.5, -0.5]];
        let x2 = mat![[1.0, 1.0], [2.0, 0.0], [0.0, 0.0]];
        for sym in [false, true] {
            let r = check_gradient(
                &[x1.clone(), x2.clone(), mat![[1.2]], mat![[0.0]]],
                |t, v| {
                    let h = KernelVars {
                        lengthscales: v[2],
                        variance: v[3],
                    };
                    if sym {
                        k.record_sym(t, v[1], h)
                    } else {
                        k.record(t, v[0], v[1], h)
                    }
                },
                GradCheck::default(),
            )
            .unwrap();
            r.within(1e-6).unwrap();
            assert!(r.max_reference > 0.1);
        }
    }
}

#[test]
fn hyper_shapes_defaults_and_validation() {
    let k = Kernel::new(KernelKind::Matern52, 4, true).unwrap();
    assert_eq!(k.lengthscale_shape(), (1, 4));
    let h = k.default_hyper();
    assert_eq!(h.lengthscales, Mat::from_fn(1, 4, |_, _| 1.0));
    assert_eq!(h.variance, 1.0);
    assert!(k.check_hyper(h.as_ref()).is_ok());
    assert!(k.check_hyper(hyper(&mat![[1.0]], 1.0).as_ref()).is_err());
    assert!(
        k.check_hyper(hyper(&mat![[1.0, 0.0, 1.0, 1.0]], 1.0).as_ref())
            .is_err()
    );
    assert!(
        k.check_hyper(hyper(&mat![[1.0, f64::NAN, 1.0, 1.0]], 1.0).as_ref())
            .is_err()
    );
    assert!(
        k.check_hyper(hyper(&mat![[1.0, 1.0, 1.0, 1.0]], -1.0).as_ref())
            .is_err()
    );
    assert!(
        k.check_inputs("x", Mat::<f64>::zeros(3, 4).as_ref())
            .is_ok()
    );
    assert!(
        k.check_inputs("x", Mat::<f64>::zeros(3, 2).as_ref())
            .is_err()
    );
    let iso = Kernel::new(KernelKind::Rbf, 4, false).unwrap();
    assert_eq!(iso.lengthscale_shape(), (1, 1));
    let lin = Kernel::new(KernelKind::Linear, 3, true).unwrap();
    assert!(!lin.has_variance());
    assert!(
        lin.check_hyper(hyper(&mat![[0.0, 1.0, 2.0]], f64::NAN).as_ref())
            .is_ok()
    );
    assert!(Kernel::new(KernelKind::Rbf, 0, true).is_err());
}

#[test]
fn kernel_config_serde_round_trip() {
    for kind in ALL {
        let k = Kernel::new(kind, 7, kind != KernelKind::Matern32).unwrap();
        let s = serde_json::to_string(&k).unwrap();
        let back: Kernel = serde_json::from_str(&s).unwrap();
        assert_eq!(back, k);
    }
    let k: Kernel =
        serde_json::from_str(r#"{"kind":"matern52","input_dim":3,"ard":true}"#).unwrap();
    assert_eq!(k, Kernel::new(KernelKind::Matern52, 3, true).unwrap());
}

/// Linear kernels ignore the variance: it gets no adjoint.
#[test]
fn linear_kernel_ignores_variance() {
    let k = Kernel::new(KernelKind::Linear, 2, true).unwrap();
    let mut t = Tape::new();
    let x = t.leaf(mat![[1.0, 2.0], [0.5, -1.0]]);
    let hv = KernelVars {
        lengthscales: t.leaf(mat![[1.0, 0.5]]),
        variance: t.leaf_scalar(7.0),
    };
    let kx = k.record_sym(&mut t, x, hv);
    let s = t.sum(kx);
    let g = t.backward(s);
    assert!(g.get(hv.variance).is_none());
    assert!(g.get(hv.lengthscales).is_some());
}

/// Matérn ½ near (but not at) coincident points, 0 < r ≪ 1: the input and lengthscale
/// adjoints equal the closed form `∂k/∂x1_q = −σ² e^{−r} (x1_q − x2_q)/(ℓ_q² r)` exactly (the
/// finite-difference check cannot be used so close to the kink).
#[test]
fn matern12_near_coincident_points_gradient_is_exact() {
    let k = Kernel::new(KernelKind::Matern12, 2, true).unwrap();
    let x1 = mat![[0.3, -0.2], [1.0, 0.5]];
    let x2 = mat![[0.3 + 1e-7, -0.2 - 2e-7], [-1.0, 0.25], [1.0, 0.5 + 3e-9]];
    let ls = [0.5, 2.0];
    let var = 1.7;
    for sym in [false, true] {
        // Symmetric case: the points of x2 (two near-coincident pairs).
        let xs = if sym {
            mat![[0.3, -0.2], [0.3 + 1e-7, -0.2 - 2e-7], [-1.0, 0.25]]
        } else {
            x1.clone()
        };
        let other = if sym { xs.clone() } else { x2.clone() };
        let mut t = Tape::new();
        let a = t.leaf(xs.clone());
        let b = t.leaf(other.clone());
        let hv = KernelVars {
            lengthscales: t.leaf(mat![[ls[0], ls[1]]]),
            variance: t.leaf_scalar(var),
        };
        let kv = if sym {
            k.record_sym(&mut t, a, hv)
        } else {
            k.record(&mut t, a, b, hv)
        };
        let s = t.sum(kv);
        let g = t.backward(s);
        // Closed form of ∂ Σ_ij K_ij.
        let (n1, n2) = (xs.nrows(), other.nrows());
        let mut ga = Mat::<f64>::zeros(n1, 2);
        let mut gb = Mat::<f64>::zeros(n2, 2);
        let mut gl = [0.0; 2];
        for i in 0..n1 {
            for j in 0..n2 {
                let d = [xs[(i, 0)] - other[(j, 0)], xs[(i, 1)] - other[(j, 1)]];
                let r = ((d[0] / ls[0]).powi(2) + (d[1] / ls[1]).powi(2)).sqrt();
                if r == 0.0 {
                    continue;
                }
                let kij = var * (-r).exp();
                for q in 0..2 {
                    let dx = -kij * d[q] / (ls[q] * ls[q] * r);
                    ga[(i, q)] += dx;
                    gb[(j, q)] -= dx;
                    gl[q] += kij * d[q] * d[q] / (ls[q].powi(3) * r);
                }
            }
        }
        let gx = g.get(a).unwrap();
        let expected_a = if sym { &ga + &gb } else { ga.clone() };
        assert!(
            max_abs_diff(gx, expected_a.as_ref()) <= 1e-12,
            "sym={sym}: {gx:?} vs {expected_a:?}"
        );
        if !sym {
            assert!(max_abs_diff(g.get(b).unwrap(), gb.as_ref()) <= 1e-12);
        }
        let gls = g.get(hv.lengthscales).unwrap();
        assert!((gls[(0, 0)] - gl[0]).abs() <= 1e-12 && (gls[(0, 1)] - gl[1]).abs() <= 1e-12);
        // the near pair's own contribution is O(1), not O(1e-7) or O(1e7)
        assert!(gx[(0, 0)].abs() > 0.1 && gx[(0, 0)].abs() < 100.0);
    }
}
