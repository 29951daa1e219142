//! Tests of the psi-statistics: identity 6 of DESIGN.md (closed forms equal Monte Carlo
//! estimates within 4 standard errors; with zero input variance they equal plain kernel
//! evaluations), finite-difference checks of every backward rule, the quadrature fallback
//! against the closed form, and determinism across thread counts.

use dgp_core::rng::{seeded, standard_normal};
use dgp_nested::psi::{
    self, ExpectationRule, psi0_linear, psi0_rbf, psi1_linear, psi1_rbf, psi2_linear, psi2_rbf,
};
use dgp_traits::kernels::{Kernel, KernelHyper, KernelKind, KernelVars};
use dgp_traits::tape::Tape;
use dgp_traits::tape::check::{GradCheck, check_gradient};
use faer::Mat;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use rand::RngExt;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        rng_seed: RngSeed::Fixed(20140614),
        ..ProptestConfig::default()
    }
}

/// Random problem: means, variances in [vlo, vhi], Z, lengthscales (weights) in [0.3, 3],
/// variance in [0.5, 2].
struct Problem {
    mu: Mat<f64>,
    v: Mat<f64>,
    z: Mat<f64>,
    ls: Mat<f64>,
    alpha: f64,
}

fn problem(seed: u64, b: usize, q: usize, m: usize, ard: bool, vlo: f64, vhi: f64) -> Problem {
    let mut rng = seeded(seed);
    let mu = standard_normal(&mut rng, b, q);
    let z = standard_normal(&mut rng, m, q);
    let v = Mat::from_fn(b, q, |_, _| vlo + (vhi - vlo) * rng.random::<f64>());
    let ls = Mat::from_fn(1, if ard { q } else { 1 }, |_, _| {
        0.3 + 2.7 * rng.random::<f64>()
    });
    let alpha = 0.5 + 1.5 * rng.random::<f64>();
    Problem {
        mu,
        v,
        z,
        ls,
        alpha,
    }
}

fn hyper(p: &Problem) -> KernelHyper {
    KernelHyper {
        lengthscales: p.ls.clone(),
        variance: p.alpha,
    }
}

/// Compensated summation, so that averaging 10⁵ equal values (zero-variance entries) is
/// exact to rounding and the 1e-12 floor below is meaningful.
fn kahan_sum(xs: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for x in xs {
        let y = x - c;
        let t = s + y;
        c = (t - s) - y;
        s = t;
    }
    s
}

/// Closed form vs Monte Carlo (spec §8): R draws h_r ~ N(μ_n, diag v_n) per point; every
/// entry within 4 empirical standard errors (plus 1e-12 for zero-variance entries).
fn check_against_monte_carlo(kind: KernelKind, p: &Problem, r: usize, seed: u64) {
    let (b, q, m) = (p.mu.nrows(), p.mu.ncols(), p.z.nrows());
    let kern = Kernel::new(kind, q, p.ls.ncols() > 1).unwrap();
    let h = hyper(p);
    let exact = psi::psi_values(
        &kern,
        p.mu.as_ref(),
        p.v.as_ref(),
        p.z.as_ref(),
        h.as_ref(),
        &ExpectationRule::default(),
    )
    .unwrap();
    let mut rng = seeded(seed);
    // Ψ2 is a sum over points of independent estimates: accumulate means and variances.
    let mut p2_mean = Mat::<f64>::zeros(m, m);
    let mut p2_var = Mat::<f64>::zeros(m, m);
    let check = |what: &str, exact: f64, mean: f64, var_of_mean: f64| {
        let tol = 4.0 * var_of_mean.max(0.0).sqrt() + 1e-12;
        assert!(
            (exact - mean).abs() <= tol,
            "{kind:?} {what}: closed form {exact} vs Monte Carlo {mean} (tol {tol})"
        );
    };
    for n in 0..b {
        let eps = standard_normal(&mut rng, r, q);
        let hs = Mat::from_fn(r, q, |i, k| p.mu[(n, k)] + p.v[(n, k)].sqrt() * eps[(i, k)]);
        let k_hz = kern.matrix(hs.as_ref(), p.z.as_ref(), h.as_ref()); // R×M
        let k_hh = kern.diag(hs.as_ref(), h.as_ref()); // R×1
        let stats = |f: &dyn Fn(usize) -> f64| {
            let mean = kahan_sum((0..r).map(f)) / r as f64;
            let var = (0..r).map(|i| (f(i) - mean).powi(2)).sum::<f64>() / (r as f64 - 1.0);
            (mean, var / r as f64)
        };
        let (m0, v0) = stats(&|i| k_hh[(i, 0)]);
        check(&format!("psi0[{n}]"), exact.psi0[(n, 0)], m0, v0);
        for j in 0..m {
            let (m1, v1) = stats(&|i| k_hz[(i, j)]);
            check(&format!("psi1[{n},{j}]"), exact.psi1[(n, j)], m1, v1);
            for c in 0..m {
                let (m2, v2) = stats(&|i| k_hz[(i, j)] * k_hz[(i, c)]);
                p2_mean[(j, c)] += m2;
                p2_var[(j, c)] += v2;
            }
        }
    }
    for j in 0..m {
        for c in 0..m {
            check(
                &format!("psi2[{j},{c}]"),
                exact.psi2[(j, c)],
                p2_mean[(j, c)],
                p2_var[(j, c)],
            );
        }
    }
}

/// With v = 0: ψ0 = diag k(X, X), Ψ1 = K(X, Z), Ψ2 = K(Z, X) K(X, Z), to 1e-12.
fn check_zero_variance(kind: KernelKind, p: &Problem) {
    let (b, q) = (p.mu.nrows(), p.mu.ncols());
    let kern = Kernel::new(kind, q, p.ls.ncols() > 1).unwrap();
    let h = hyper(p);
    let zero = Mat::<f64>::zeros(b, q);
    let s = psi::psi_values(
        &kern,
        p.mu.as_ref(),
        zero.as_ref(),
        p.z.as_ref(),
        h.as_ref(),
        &ExpectationRule::default(),
    )
    .unwrap();
    let kxz = kern.matrix(p.mu.as_ref(), p.z.as_ref(), h.as_ref());
    let kd = kern.diag(p.mu.as_ref(), h.as_ref());
    let k2 = kxz.transpose() * &kxz;
    let close = |a: &Mat<f64>, e: &Mat<f64>, what: &str| {
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                assert!(
                    (a[(i, j)] - e[(i, j)]).abs() <= 1e-12,
                    "{kind:?} {what}[{i},{j}]: {} vs kernel {}",
                    a[(i, j)],
                    e[(i, j)]
                );
            }
        }
    };
    close(&s.psi0, &kd, "psi0");
    close(&s.psi1, &kxz, "psi1");
    close(&s.psi2, &k2, "psi2");
}

proptest! {
    #![proptest_config(config(6))]

    #[test]
    fn rbf_psi_statistics_match_monte_carlo(
        seed in 0u64..10_000, b in 1usize..3, q in 1usize..5, m in 1usize..7, ard in any::<bool>()
    ) {
        let p = problem(seed, b, q, m, ard, 0.0, 2.0);
        check_against_monte_carlo(KernelKind::Rbf, &p, 100_000, seed + 1);
    }

    #[test]
    fn linear_psi_statistics_match_monte_carlo(
        seed in 0u64..10_000, b in 1usize..3, q in 1usize..5, m in 1usize..7, ard in any::<bool>()
    ) {
        let p = problem(seed, b, q, m, ard, 0.0, 2.0);
        check_against_monte_carlo(KernelKind::Linear, &p, 100_000, seed + 1);
    }
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn psi_statistics_with_zero_variance_are_kernel_evaluations(
        seed in 0u64..10_000, b in 1usize..8, q in 1usize..5, m in 1usize..9, ard in any::<bool>()
    ) {
        let p = problem(seed, b, q, m, ard, 0.0, 0.0);
        check_zero_variance(KernelKind::Rbf, &p);
        check_zero_variance(KernelKind::Linear, &p);
    }
}

// ---------------------------------------------------------------------------------------
// backward rules
// ---------------------------------------------------------------------------------------

fn inputs(p: &Problem) -> Vec<Mat<f64>> {
    vec![
        p.mu.clone(),
        p.v.clone(),
        p.z.clone(),
        p.ls.clone(),
        Mat::from_fn(1, 1, |_, _| p.alpha),
    ]
}

fn grad_ok(p: &Problem, f: impl Fn(&mut Tape, &[dgp_traits::tape::Var]) -> dgp_traits::tape::Var) {
    let report = check_gradient(&inputs(p), f, GradCheck::default()).unwrap();
    report.within(1e-6).unwrap();
}

proptest! {
    #![proptest_config(config(16))]

    #[test]
    fn grad_psi0_rbf(seed in 0u64..10_000, b in 1usize..6, q in 1usize..4, m in 1usize..6, ard in any::<bool>()) {
        let p = problem(seed, b, q, m, ard, 0.05, 2.0);
        grad_ok(&p, |t, v| psi0_rbf(t, v[0], v[4]));
    }

    #[test]
    fn grad_psi1_rbf(seed in 0u64..10_000, b in 1usize..6, q in 1usize..4, m in 1usize..6, ard in any::<bool>()) {
        let p = problem(seed, b, q, m, ard, 0.05, 2.0);
        grad_ok(&p, |t, v| psi1_rbf(t, v[0], v[1], v[2], v[3], v[4]));
    }

    #[test]
    fn grad_psi2_rbf(seed in 0u64..10_000, b in 1usize..6, q in 1usize..4, m in 1usize..6, ard in any::<bool>()) {
        let p = problem(seed, b, q, m, ard, 0.05, 2.0);
        grad_ok(&p, |t, v| psi2_rbf(t, v[0], v[1], v[2], v[3], v[4]));
    }

    #[test]
    fn grad_psi0_linear(seed in 0u64..10_000, b in 1usize..6, q in 1usize..4, m in 1usize..6, ard in any::<bool>()) {
        let p = problem(seed, b, q, m, ard, 0.05, 2.0);
        grad_ok(&p, |t, v| psi0_linear(t, v[0], v[1], v[3]));
    }

    #[test]
    fn grad_psi1_linear(seed in 0u64..10_000, b in 1usize..6, q in 1usize..4, m in 1usize..6, ard in any::<bool>()) {
        let p = problem(seed, b, q, m, ard, 0.05, 2.0);
        grad_ok(&p, |t, v| psi1_linear(t, v[0], v[2], v[3]));
    }

    #[test]
    fn grad_psi2_linear(seed in 0u64..10_000, b in 1usize..6, q in 1usize..4, m in 1usize..6, ard in any::<bool>()) {
        let p = problem(seed, b, q, m, ard, 0.05, 2.0);
        grad_ok(&p, |t, v| psi2_linear(t, v[0], v[1], v[2], v[3]));
    }
}

#[test]
fn grad_psi2_rbf_over_several_chunks() {
    // B > CHUNK: the per-chunk accumulators and their ordered reduction.
    let p = problem(5, 2 * psi::CHUNK + 7, 2, 3, true, 0.05, 1.0);
    grad_ok(&p, |t, v| psi2_rbf(t, v[0], v[1], v[2], v[3], v[4]));
    grad_ok(&p, |t, v| psi1_rbf(t, v[0], v[1], v[2], v[3], v[4]));
}

// ---------------------------------------------------------------------------------------
// fallback
// ---------------------------------------------------------------------------------------

fn fallback_values(p: &Problem, kind: KernelKind, rule: &ExpectationRule) -> psi::PsiValues {
    let q = p.mu.ncols();
    let kern = Kernel::new(kind, q, p.ls.ncols() > 1).unwrap();
    let mut t = Tape::new();
    let (mu, v, z) = (
        t.constant(p.mu.clone()),
        t.constant(p.v.clone()),
        t.constant(p.z.clone()),
    );
    let hyp = KernelVars {
        lengthscales: t.constant(p.ls.clone()),
        variance: t.constant_scalar(p.alpha),
    };
    let s = psi::quadrature::psi_by_quadrature(&mut t, &kern, mu, v, z, hyp, rule).unwrap();
    psi::PsiValues {
        psi0: t.value(s.psi0).to_owned(),
        psi1: t.value(s.psi1).to_owned(),
        psi2: t.value(s.psi2).to_owned(),
    }
}

#[test]
fn gauss_hermite_fallback_matches_closed_form_rbf() {
    // Moderate lengthscales relative to the input spread: 20 nodes per dimension converge
    // to ~1e-9 for these integrands.
    for (seed, q) in [(1u64, 1usize), (2, 2), (3, 2)] {
        let mut p = problem(seed, 4, q, 5, true, 0.0, 0.5);
        p.ls = Mat::from_fn(1, q, |_, k| 1.0 + 0.5 * k as f64);
        let kern = Kernel::new(KernelKind::Rbf, q, true).unwrap();
        let exact = psi::psi_values(
            &kern,
            p.mu.as_ref(),
            p.v.as_ref(),
            p.z.as_ref(),
            hyper(&p).as_ref(),
            &ExpectationRule::default(),
        )
        .unwrap();
        let gh = fallback_values(
            &p,
            KernelKind::Rbf,
            &ExpectationRule::GaussHermite { points: 20 },
        );
        for (a, e) in [
            (&gh.psi0, &exact.psi0),
            (&gh.psi1, &exact.psi1),
            (&gh.psi2, &exact.psi2),
        ] {
            for j in 0..a.ncols() {
                for i in 0..a.nrows() {
                    assert!(
                        (a[(i, j)] - e[(i, j)]).abs() < 1e-8,
                        "q={q}: {} vs {}",
                        a[(i, j)],
                        e[(i, j)]
                    );
                }
            }
        }
    }
}

#[test]
fn monte_carlo_fallback_matches_closed_form_rbf_within_four_standard_errors() {
    let p = problem(9, 3, 2, 4, true, 0.0, 1.5);
    let (b, q, m) = (3, 2, 4);
    let samples = 20_000;
    let rule = ExpectationRule::MonteCarlo { samples, seed: 3 };
    let est = fallback_values(&p, KernelKind::Rbf, &rule);
    let kern = Kernel::new(KernelKind::Rbf, q, true).unwrap();
    let h = hyper(&p);
    let exact = psi::psi_values(
        &kern,
        p.mu.as_ref(),
        p.v.as_ref(),
        p.z.as_ref(),
        h.as_ref(),
        &ExpectationRule::default(),
    )
    .unwrap();
    // Standard errors from the rule's own draws.
    let (xi, _) = rule.nodes(q).unwrap();
    let mut p2_se2 = Mat::<f64>::zeros(m, m);
    for n in 0..b {
        let hs = Mat::from_fn(samples, q, |i, k| {
            p.mu[(n, k)] + p.v[(n, k)].sqrt() * xi[(i, k)]
        });
        let k = kern.matrix(hs.as_ref(), p.z.as_ref(), h.as_ref());
        let se2 = |f: &dyn Fn(usize) -> f64| {
            let mean = (0..samples).map(f).sum::<f64>() / samples as f64;
            (0..samples).map(|i| (f(i) - mean).powi(2)).sum::<f64>()
                / ((samples - 1) * samples) as f64
        };
        for j in 0..m {
            let s = se2(&|i| k[(i, j)]).sqrt();
            let d = (est.psi1[(n, j)] - exact.psi1[(n, j)]).abs();
            assert!(d <= 4.0 * s + 1e-12, "psi1[{n},{j}] off by {d}, se {s}");
            for c in 0..m {
                p2_se2[(j, c)] += se2(&|i| k[(i, j)] * k[(i, c)]);
            }
        }
        assert!((est.psi0[(n, 0)] - p.alpha).abs() < 1e-12);
    }
    for j in 0..m {
        for c in 0..m {
            let d = (est.psi2[(j, c)] - exact.psi2[(j, c)]).abs();
            let s = p2_se2[(j, c)].sqrt();
            assert!(d <= 4.0 * s + 1e-12, "psi2[{j},{c}] off by {d}, se {s}");
        }
    }
}

#[test]
fn grad_psi_fallback_matern() {
    let p = problem(4, 3, 2, 3, true, 0.1, 1.0);
    let kern = Kernel::new(KernelKind::Matern52, 2, true).unwrap();
    for rule in [
        ExpectationRule::GaussHermite { points: 3 },
        ExpectationRule::MonteCarlo {
            samples: 7,
            seed: 1,
        },
    ] {
        for which in 0..3 {
            grad_ok(&p, |t, v| {
                let hyp = KernelVars {
                    lengthscales: v[3],
                    variance: v[4],
                };
                let s = psi::quadrature::psi_by_quadrature(t, &kern, v[0], v[1], v[2], hyp, &rule)
                    .unwrap();
                [s.psi0, s.psi1, s.psi2][which]
            });
        }
    }
}

#[test]
fn psi2_contract_matches_summed_psi2() {
    // Σ_n Σ W ⊙ Φ_n over points equals Σ W ⊙ Ψ2 for every kernel path.
    let p = problem(11, 5, 2, 4, true, 0.05, 1.0);
    let w = standard_normal(&mut seeded(2), 4, 4);
    for kind in [KernelKind::Rbf, KernelKind::Linear, KernelKind::Matern32] {
        let kern = Kernel::new(kind, 2, true).unwrap();
        let rule = ExpectationRule::GaussHermite { points: 4 };
        let h = hyper(&p);
        let s = psi::psi_values(
            &kern,
            p.mu.as_ref(),
            p.v.as_ref(),
            p.z.as_ref(),
            h.as_ref(),
            &rule,
        )
        .unwrap();
        let c = psi::psi2_contract(
            &kern,
            p.mu.as_ref(),
            p.v.as_ref(),
            p.z.as_ref(),
            h.as_ref(),
            &rule,
            &[w.as_ref()],
        )
        .unwrap();
        let total: f64 = (0..5).map(|n| c[(n, 0)]).sum();
        let direct: f64 = (0..4)
            .flat_map(|i| (0..4).map(move |j| (i, j)))
            .map(|(i, j)| w[(i, j)] * s.psi2[(i, j)])
            .sum();
        assert!(
            (total - direct).abs() < 1e-10 * direct.abs().max(1.0),
            "{kind:?}: {total} vs {direct}"
        );
    }
}

#[test]
fn psi_ops_are_identical_across_thread_counts() {
    let p = problem(21, 3 * psi::CHUNK + 5, 3, 7, true, 0.05, 1.0);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut t = Tape::new();
            let v: Vec<_> = inputs(&p).into_iter().map(|x| t.leaf(x)).collect();
            let s2 = psi2_rbf(&mut t, v[0], v[1], v[2], v[3], v[4]);
            let s1 = psi1_rbf(&mut t, v[0], v[1], v[2], v[3], v[4]);
            let a = t.sum(s2);
            let bsum = t.sum_squares(s1);
            let out = t.add(a, bsum);
            let g = t.backward(out);
            let mut all = vec![t.scalar(out)];
            for x in &v {
                let gx = g.get(*x).unwrap();
                for j in 0..gx.ncols() {
                    for i in 0..gx.nrows() {
                        all.push(gx[(i, j)]);
                    }
                }
            }
            all
        })
    };
    let (a, b) = (run(1), run(2));
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
}

#[test]
fn psi_values_reject_bad_inputs() {
    let kern = Kernel::new(KernelKind::Rbf, 2, true).unwrap();
    let h = KernelHyper {
        lengthscales: Mat::from_fn(1, 2, |_, _| 1.0),
        variance: 1.0,
    };
    let mu = Mat::<f64>::zeros(3, 2);
    let z = Mat::<f64>::zeros(2, 2);
    let rule = ExpectationRule::default();
    let neg = Mat::from_fn(3, 2, |i, _| if i == 1 { -0.1 } else { 0.1 });
    assert!(
        psi::psi_values(
            &kern,
            mu.as_ref(),
            neg.as_ref(),
            z.as_ref(),
            h.as_ref(),
            &rule
        )
        .is_err()
    );
    let short = Mat::<f64>::zeros(2, 2);
    assert!(
        psi::psi_values(
            &kern,
            mu.as_ref(),
            short.as_ref(),
            z.as_ref(),
            h.as_ref(),
            &rule
        )
        .is_err()
    );
    let z3 = Mat::<f64>::zeros(2, 3);
    assert!(
        psi::psi_values(
            &kern,
            mu.as_ref(),
            mu.as_ref(),
            z3.as_ref(),
            h.as_ref(),
            &rule
        )
        .is_err()
    );
    let nan = Mat::from_fn(3, 2, |_, _| f64::NAN);
    assert!(
        psi::psi_values(
            &kern,
            nan.as_ref(),
            mu.as_ref(),
            z.as_ref(),
            h.as_ref(),
            &rule
        )
        .is_err()
    );
    assert!(
        ExpectationRule::GaussHermite { points: 20 }
            .nodes(5)
            .is_err()
    );
    assert!(
        ExpectationRule::MonteCarlo {
            samples: 0,
            seed: 0
        }
        .nodes(2)
        .is_err()
    );
}

// ---------------------------------------------------------------------------------------
// input–kernel covariance (linear mean function, spec §5)
// ---------------------------------------------------------------------------------------

/// A fixed M×Q weight matrix for the contraction.
fn weights_p(p: &Problem, seed: u64) -> Mat<f64> {
    standard_normal(&mut seeded(seed), p.z.nrows(), p.z.ncols())
}

/// `Σ_nmq Cov(h_nq, k(h_n, z_m)) P_mq` by [`psi::input_cov_contract`] (closed forms for RBF
/// and linear) or, with `quadrature`, by [`psi::input_cov_by_quadrature`] for any kernel.
fn input_cov(
    p: &Problem,
    kind: KernelKind,
    pw: &Mat<f64>,
    quadrature: Option<&ExpectationRule>,
) -> f64 {
    let q = p.mu.ncols();
    let kern = Kernel::new(kind, q, p.ls.ncols() > 1).unwrap();
    let mut t = Tape::new();
    let (mu, v, z, pv) = (
        t.constant(p.mu.clone()),
        t.constant(p.v.clone()),
        t.constant(p.z.clone()),
        t.constant(pw.clone()),
    );
    let hyp = KernelVars {
        lengthscales: t.constant(p.ls.clone()),
        variance: t.constant_scalar(p.alpha),
    };
    let out = match quadrature {
        Some(rule) => psi::input_cov_by_quadrature(&mut t, &kern, mu, v, z, hyp, pv, rule).unwrap(),
        None => {
            let s =
                psi::psi_stats(&mut t, &kern, mu, v, z, hyp, &ExpectationRule::default()).unwrap();
            psi::input_cov_contract(
                &mut t,
                &kern,
                mu,
                v,
                z,
                hyp,
                s.psi1,
                pv,
                &ExpectationRule::default(),
            )
            .unwrap()
        }
    };
    t.scalar(out)
}

/// The closed forms against Monte Carlo: R replicates of Σ_n Σ_mq (h_nq − μ_nq) k(h_n, z_m)
/// P_mq with independent h_n ~ N(μ_n, diag v_n); within 4 standard errors of the replicates'
/// mean.
#[test]
fn input_covariance_closed_forms_match_monte_carlo() {
    for (kind, seed) in [
        (KernelKind::Rbf, 1u64),
        (KernelKind::Rbf, 2),
        (KernelKind::Linear, 3),
    ] {
        let p = problem(seed, 3, 2, 4, seed != 2, 0.1, 1.5);
        let pw = weights_p(&p, seed + 100);
        let exact = input_cov(&p, kind, &pw, None);
        let (b, q) = (p.mu.nrows(), p.mu.ncols());
        let kern = Kernel::new(kind, q, p.ls.ncols() > 1).unwrap();
        let h = hyper(&p);
        let r = 100_000;
        let mut rng = seeded(seed + 7);
        let mut totals = vec![0.0; r];
        for n in 0..b {
            let eps = standard_normal(&mut rng, r, q);
            let hs = Mat::from_fn(r, q, |i, k| p.mu[(n, k)] + p.v[(n, k)].sqrt() * eps[(i, k)]);
            let k_hz = kern.matrix(hs.as_ref(), p.z.as_ref(), h.as_ref()); // R×M
            let dev = Mat::from_fn(r, q, |i, k| hs[(i, k)] - p.mu[(n, k)]);
            let dp = &dev * pw.transpose(); // R×M
            for (i, t) in totals.iter_mut().enumerate() {
                *t += (0..p.z.nrows())
                    .map(|m| k_hz[(i, m)] * dp[(i, m)])
                    .sum::<f64>();
            }
        }
        let mean = kahan_sum(totals.iter().copied()) / r as f64;
        let var = totals.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / (r as f64 - 1.0);
        let se = (var / r as f64).sqrt();
        assert!(
            (exact - mean).abs() <= 4.0 * se,
            "{kind:?} seed {seed}: closed form {exact} vs Monte Carlo {mean} (se {se})"
        );
    }
}

/// The quadrature path against the closed forms: Gauss–Hermite is exact for the linear
/// kernel (a degree-2 polynomial) and converges to ~1e-10 for the RBF at 20 nodes per
/// dimension.
#[test]
fn input_covariance_quadrature_matches_closed_forms() {
    let gh = ExpectationRule::GaussHermite { points: 20 };
    for (seed, q) in [(11u64, 1usize), (12, 2), (13, 2)] {
        let mut p = problem(seed, 4, q, 5, true, 0.0, 0.5);
        p.ls = Mat::from_fn(1, q, |_, k| 1.0 + 0.5 * k as f64);
        let pw = weights_p(&p, seed);
        for kind in [KernelKind::Rbf, KernelKind::Linear] {
            let closed = input_cov(&p, kind, &pw, None);
            let quad = input_cov(&p, kind, &pw, Some(&gh));
            assert!(
                (closed - quad).abs() <= 1e-9 * (1.0 + closed.abs()),
                "{kind:?} q={q}: closed form {closed} vs Gauss–Hermite {quad}"
            );
        }
    }
}

#[test]
fn input_covariance_is_zero_for_point_inputs() {
    let p = problem(21, 3, 2, 4, true, 0.0, 0.0);
    let pw = weights_p(&p, 3);
    for kind in [KernelKind::Rbf, KernelKind::Linear] {
        assert_eq!(input_cov(&p, kind, &pw, None), 0.0, "{kind:?}");
    }
}

proptest! {
    #![proptest_config(config(12))]

    #[test]
    fn grad_input_covariance(seed in 0u64..10_000, b in 1usize..5, q in 1usize..4, m in 1usize..5, ard in any::<bool>(), which in 0usize..3) {
        let p = problem(seed, b, q, m, ard, 0.05, 2.0);
        let pw = weights_p(&p, seed + 1);
        let (kind, quad) = [
            (KernelKind::Rbf, None),
            (KernelKind::Linear, None),
            (KernelKind::Matern32, Some(ExpectationRule::GaussHermite { points: 3 })),
        ][which].clone();
        let kern = Kernel::new(kind, q, ard).unwrap();
        let mut ins = inputs(&p);
        ins.push(pw);
        let report = check_gradient(&ins, |t, v| {
            let hyp = KernelVars { lengthscales: v[3], variance: v[4] };
            match &quad {
                Some(rule) => psi::input_cov_by_quadrature(t, &kern, v[0], v[1], v[2], hyp, v[5], rule).unwrap(),
                None => {
                    let s = psi::psi_stats(t, &kern, v[0], v[1], v[2], hyp, &ExpectationRule::default()).unwrap();
                    psi::input_cov_contract(t, &kern, v[0], v[1], v[2], hyp, s.psi1, v[5], &ExpectationRule::default()).unwrap()
                }
            }
        }, GradCheck::default()).unwrap();
        report.within(1e-6).unwrap();
    }
}
