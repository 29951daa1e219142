//! Likelihood operations: closed forms against Monte Carlo, quadrature and brute-force
//! integration; finite-difference gradient checks of every fused tape operation.

use dgp_core::rng::{seeded, standard_normal};
use dgp_traits::likelihoods::{Likelihood, ProbitLikelihood, scalar};
use dgp_traits::quadrature::GaussHermite;
use dgp_traits::tape::Tape;
use dgp_traits::tape::check::{GradCheck, check_gradient};
use faer::{Mat, mat};
use proptest::prelude::*;

const TAU: f64 = 2.0 * std::f64::consts::PI;

/// `∫ N(f | μ, v) g(f) df` by composite Simpson on μ ± 14 sd with 10 000 intervals
/// (error ≈ 1e-13 for the smooth integrands here).
fn brute_force_expectation(mu: f64, var: f64, g: impl Fn(f64) -> f64) -> f64 {
    let sd = var.sqrt();
    let n = 10_000;
    let (a, b) = (mu - 14.0 * sd, mu + 14.0 * sd);
    let h = (b - a) / n as f64;
    let mut s = 0.0;
    for k in 0..=n {
        let f = a + k as f64 * h;
        let w = if k == 0 || k == n {
            1.0
        } else if k % 2 == 1 {
            4.0
        } else {
            2.0
        };
        let dens = (-(f - mu) * (f - mu) / (2.0 * var)).exp() / (TAU * var).sqrt();
        s += w * dens * g(f);
    }
    s * h / 3.0
}

#[test]
fn gaussian_expected_log_lik_matches_monte_carlo() {
    let cases: [(f64, f64, f64, f64); 3] = [
        (0.3, -0.2, 0.5, 0.1),
        (1.5, 1.4, 2.0, 0.7),
        (-2.0, 0.5, 0.05, 1.3),
    ];
    let mut rng = seeded(20240611);
    let n = 200_000;
    for (y, mu, var, s2) in cases {
        let eps = standard_normal(&mut rng, n, 1);
        let draws: Vec<f64> = (0..n)
            .map(|i| scalar::gaussian_log_density(y, mu + var.sqrt() * eps[(i, 0)], s2))
            .collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let sd = (draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let se = sd / (n as f64).sqrt();
        let closed = scalar::gaussian_expected_log_lik(y, mu, var, s2);
        assert!(
            (closed - mean).abs() <= 4.0 * se,
            "y={y} mu={mu} var={var} s2={s2}: closed {closed}, MC {mean} ± {se}"
        );
    }
}

#[test]
fn gaussian_expected_log_lik_matches_gauss_hermite() {
    // The integrand is quadratic in f, so any rule with ≥ 2 nodes is exact.
    let rule = GaussHermite::probabilists(5).unwrap();
    for &(y, mu, var, s2) in &[
        (0.3, -0.2, 0.5, 0.1),
        (1.5, 1.4, 2.0, 0.7),
        (-2.0, 0.5, 0.05, 1.3),
        (4.0, -3.0, 9.0, 0.01),
    ] {
        let gh = rule.expect_normal(mu, var, |f| scalar::gaussian_log_density(y, f, s2));
        let closed = scalar::gaussian_expected_log_lik(y, mu, var, s2);
        assert!((gh - closed).abs() <= 1e-10, "{gh} vs {closed}");
    }
}

#[test]
fn gaussian_tape_ops_match_scalar_formulas() {
    let lik = Likelihood::gaussian(0.5);
    let mut t = Tape::new();
    let y = t.constant(mat![[0.3, 1.0], [-1.2, 0.0]]);
    let mu = t.leaf(mat![[0.1, 0.8], [-0.5, 0.4]]);
    let var = t.leaf(mat![[0.2, 0.6], [1.1, 0.05]]);
    let s2 = t.leaf(mat![[0.4, 0.9]]);
    let e = lik.expected_log_lik(&mut t, y, mu, var, Some(s2)).unwrap();
    let p = lik.log_predictive(&mut t, y, mu, var, Some(s2)).unwrap();
    let (yv, mv, vv) = (t.value(y), t.value(mu), t.value(var));
    for j in 0..2 {
        let s = [0.4, 0.9][j];
        for i in 0..2 {
            let want = scalar::gaussian_expected_log_lik(yv[(i, j)], mv[(i, j)], vv[(i, j)], s);
            assert!((t.value(e)[(i, j)] - want).abs() < 1e-15);
            let want = scalar::gaussian_log_density(yv[(i, j)], mv[(i, j)], vv[(i, j)] + s);
            assert!((t.value(p)[(i, j)] - want).abs() < 1e-15);
        }
    }
}

#[test]
fn probit_expected_log_lik_matches_brute_force_integration() {
    // 20-node Gauss–Hermite (GPflow's setting) is accurate to 1e-8 where the integrand is
    // smooth on the scale of the rule: the squashed link for v ≤ 0.1, the plain link for
    // v ≤ 1. (For larger v the squashed link's kink near log ε limits the 20-node rule,
    // see `probit_quadrature_error_of_twenty_nodes_grows_with_variance`.)
    let settings = [
        (1e-3, [0.001, 0.01, 0.05, 0.1]),
        (0.0, [0.01, 0.1, 0.5, 1.0]),
    ];
    for (eps, vars) in settings {
        for var in vars {
            for k in -6..=6 {
                let mu = 0.5 * k as f64;
                for y in [1.0, 0.0, -1.0] {
                    let gh = scalar::probit_expected_log_lik(y, mu, var, eps, 20).unwrap();
                    let bf =
                        brute_force_expectation(mu, var, |f| scalar::probit_log_lik(y, f, eps));
                    assert!(
                        (gh - bf).abs() <= 1e-8,
                        "eps={eps} var={var} mu={mu} y={y}: GH {gh}, brute force {bf}"
                    );
                }
            }
        }
    }
    // With more nodes the larger variances are reached too.
    for (mu, var) in [(-2.0, 1.0), (0.5, 1.0), (1.0, 0.5)] {
        let gh = scalar::probit_expected_log_lik(1.0, mu, var, 1e-3, 150).unwrap();
        let bf = brute_force_expectation(mu, var, |f| scalar::probit_log_lik(1.0, f, 1e-3));
        assert!(
            (gh - bf).abs() <= 1e-8,
            "mu={mu} var={var}: GH {gh}, brute force {bf}"
        );
    }
}

#[test]
fn probit_quadrature_error_of_twenty_nodes_grows_with_variance() {
    // Documents (and pins) the accuracy of GPflow's 20-node setting with the squashed link:
    // ~1e-4 absolute at v = 1, ~2e-3 at v = 4 (measured against the Simpson rule above,
    // which agrees with 30-digit adaptive quadrature (mpmath) to ~1e-14).
    let err = |mu: f64, var: f64| {
        let gh = scalar::probit_expected_log_lik(1.0, mu, var, 1e-3, 20).unwrap();
        let bf = brute_force_expectation(mu, var, |f| scalar::probit_log_lik(1.0, f, 1e-3));
        (gh - bf).abs()
    };
    let e1 = err(-2.0, 1.0);
    let e4 = err(0.0, 4.0);
    assert!(e1 > 1e-5 && e1 < 1e-3, "{e1}");
    assert!(e4 > 1e-4 && e4 < 1e-2, "{e4}");
}

#[test]
fn probit_predictive_is_the_exact_integral_of_the_squashed_link() {
    for &eps in &[1e-3, 0.0] {
        for &(mu, var) in &[(0.0, 1.0), (-1.3, 0.2), (2.0, 3.0), (0.7, 0.0001)] {
            let p1 = scalar::probit_prob(mu, var, eps);
            let bf = brute_force_expectation(mu, var, |f| scalar::probit_link(f, eps));
            assert!((p1 - bf).abs() <= 1e-12, "{p1} vs {bf}");
            let l1 = scalar::probit_log_predictive(1.0, mu, var, eps);
            let l0 = scalar::probit_log_predictive(0.0, mu, var, eps);
            let lm = scalar::probit_log_predictive(-1.0, mu, var, eps);
            assert!((l1.exp() + l0.exp() - 1.0).abs() <= 1e-15);
            assert_eq!(l0, lm);
            assert!((l1 - p1.ln()).abs() <= 1e-14);
        }
    }
    // Plain link far in the tail: log Φ stays finite and accurate.
    let l = scalar::probit_log_predictive(1.0, -40.0, 0.0, 0.0);
    assert!((l - (-804.608_442_013_753_8)).abs() < 1e-10, "{l}");
    let l = scalar::probit_expected_log_lik(1.0, -40.0, 0.01, 0.0, 20).unwrap();
    assert!(l.is_finite() && l < -800.0);
}

#[test]
fn predictive_moments_and_values() {
    let mu = mat![[0.5], [-1.0]];
    let var = mat![[0.2], [1.5]];
    let (m, v) = Likelihood::gaussian(1.0)
        .predictive_moments(mu.as_ref(), var.as_ref(), &[0.3])
        .unwrap();
    assert_eq!(m, mu);
    assert!((v[(1, 0)] - 1.8).abs() < 1e-15);
    let (p, pv) = Likelihood::probit()
        .predictive_moments(mu.as_ref(), var.as_ref(), &[])
        .unwrap();
    let want = scalar::probit_prob(-1.0, 1.5, 1e-3);
    assert!((p[(1, 0)] - want).abs() < 1e-16);
    assert!((pv[(1, 0)] - want * (1.0 - want)).abs() < 1e-16);
    let y = mat![[1.0], [0.0]];
    let lp = Likelihood::probit()
        .log_predictive_values(y.as_ref(), mu.as_ref(), var.as_ref(), &[])
        .unwrap();
    assert!((lp[(1, 0)] - (1.0 - want).ln()).abs() < 1e-14);
    // Shape and label errors are reported, not panics.
    let bad = mat![[0.5]];
    assert!(
        Likelihood::gaussian(1.0)
            .predictive_moments(mu.as_ref(), bad.as_ref(), &[0.3])
            .is_err()
    );
    assert!(
        Likelihood::gaussian(1.0)
            .predictive_moments(mu.as_ref(), var.as_ref(), &[0.3, 0.2])
            .is_err()
    );
    assert!(
        Likelihood::probit()
            .check_targets(mat![[1.0], [0.5]].as_ref())
            .is_err()
    );
    assert!(
        Likelihood::probit()
            .check_targets(mat![[1.0], [-1.0], [0.0]].as_ref())
            .is_ok()
    );
    assert!(
        Likelihood::gaussian(1.0)
            .check_targets(mat![[f64::NAN]].as_ref())
            .is_err()
    );
}

#[test]
fn tape_dispatch_reports_misuse_as_errors() {
    let mut t = Tape::new();
    let y = t.constant(mat![[1.0], [0.0]]);
    let mu = t.leaf(mat![[0.1], [0.2]]);
    let var = t.leaf(mat![[0.1], [0.2]]);
    let wrong = t.leaf(mat![[0.1, 0.2, 0.3]]);
    let s2 = t.leaf(mat![[0.5]]);
    let g = Likelihood::gaussian(1.0);
    assert!(g.expected_log_lik(&mut t, y, mu, var, None).is_err());
    assert!(g.expected_log_lik(&mut t, y, mu, wrong, Some(s2)).is_err());
    assert!(g.log_predictive(&mut t, y, mu, var, Some(wrong)).is_err());
    let p = Likelihood::probit();
    assert!(p.expected_log_lik(&mut t, y, mu, var, Some(s2)).is_err());
    let bad = Likelihood::BernoulliProbit(ProbitLikelihood {
        squash: 0.6,
        gh_points: 20,
    });
    assert!(bad.expected_log_lik(&mut t, y, mu, var, None).is_err());
    let e = p.expected_log_lik(&mut t, y, mu, var, None).unwrap();
    assert_eq!(t.shape(e), (2, 1));
}

#[test]
fn likelihood_config_round_trips_through_json() {
    for lik in [Likelihood::gaussian(0.05), Likelihood::probit()] {
        let s = serde_json::to_string(&lik).unwrap();
        let back: Likelihood = serde_json::from_str(&s).unwrap();
        assert_eq!(back, lik);
    }
    let l: Likelihood =
        serde_json::from_str(r#"{"kind":"bernoulli_probit","squash":0.0}"#).unwrap();
    assert_eq!(
        l,
        Likelihood::BernoulliProbit(ProbitLikelihood {
            squash: 0.0,
            gh_points: 20
        })
    );
    let l: Likelihood = serde_json::from_str(r#"{"kind":"gaussian"}"#).unwrap();
    assert_eq!(l, Likelihood::gaussian(1.0));
}

#[test]
fn probit_variance_gradient_is_continuous_at_the_small_variance_switch() {
    // Below √v = 1e-4 the v-derivative uses Price's theorem; on either side of the switch
    // and at v = 0 it must agree with ½ h''(μ).
    let rule = GaussHermite::probabilists(20).unwrap();
    let grad_v = |mu: f64, v: f64, y: f64| {
        let mut t = Tape::new();
        let yy = t.constant(mat![[y]]);
        let m = t.leaf(mat![[mu]]);
        let vv = t.leaf(mat![[v]]);
        let e = t.probit_expected_log_lik(yy, m, vv, 1e-3, &rule);
        let s = t.sum(e);
        t.backward(s).get(vv).unwrap()[(0, 0)]
    };
    for (mu, y) in [(0.3, 1.0), (-1.7, 1.0), (0.9, 0.0)] {
        // h''(x) for the positive class: −x r − r², r = a φ(x)/(aΦ(x)+ε), x = s μ.
        let s: f64 = if y > 0.0 { 1.0 } else { -1.0 };
        let x = s * mu;
        let a = 1.0 - 2e-3;
        let phi = (-0.5 * x * x).exp() / TAU.sqrt();
        let cdf = scalar::probit_link(x, 0.0);
        let r = a * phi / (a * cdf + 1e-3);
        let half_h2 = 0.5 * (-x * r - r * r);
        for v in [0.0, 0.99e-8, 1.01e-8] {
            let g = grad_v(mu, v, y);
            assert!(
                (g - half_h2).abs() <= 1e-6 * half_h2.abs().max(1e-3),
                "mu={mu} v={v}: {g} vs {half_h2}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// finite-difference gradient checks
// ---------------------------------------------------------------------------------------

fn mat_from(rows: usize, cols: usize, v: &[f64]) -> Mat<f64> {
    Mat::from_fn(rows, cols, |i, j| v[j * rows + i])
}

fn dims_and_values(lo: f64, hi: f64) -> impl Strategy<Value = (usize, usize, Vec<f64>)> {
    (1usize..=8, 1usize..=8)
        .prop_flat_map(move |(r, c)| (Just(r), Just(c), proptest::collection::vec(lo..hi, r * c)))
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 32,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn grad_gaussian_expected_log_lik(
        (r, c, y) in dims_and_values(-2.0, 2.0),
        mu in proptest::collection::vec(-2.0f64..2.0, 64),
        var in proptest::collection::vec(0.05f64..2.0, 64),
        s2 in proptest::collection::vec(0.1f64..2.0, 8),
        per_column in any::<bool>(),
    ) {
        let n = r * c;
        let noise = if per_column { mat_from(1, c, &s2[..c]) } else { mat_from(1, 1, &s2[..1]) };
        let inputs = [mat_from(r, c, &y), mat_from(r, c, &mu[..n]), mat_from(r, c, &var[..n]), noise];
        let rep = check_gradient(&inputs, |t, v| t.gaussian_expected_log_lik(v[0], v[1], v[2], v[3]), GradCheck::default()).unwrap();
        prop_assert!(rep.within(1e-6).is_ok(), "{}", rep.within(1e-6).unwrap_err());
    }

    #[test]
    fn grad_gaussian_log_predictive(
        (r, c, y) in dims_and_values(-2.0, 2.0),
        mu in proptest::collection::vec(-2.0f64..2.0, 64),
        var in proptest::collection::vec(0.05f64..2.0, 64),
        s2 in proptest::collection::vec(0.1f64..2.0, 8),
        per_column in any::<bool>(),
    ) {
        let n = r * c;
        let noise = if per_column { mat_from(1, c, &s2[..c]) } else { mat_from(1, 1, &s2[..1]) };
        let inputs = [mat_from(r, c, &y), mat_from(r, c, &mu[..n]), mat_from(r, c, &var[..n]), noise];
        let rep = check_gradient(&inputs, |t, v| t.gaussian_log_predictive(v[0], v[1], v[2], v[3]), GradCheck::default()).unwrap();
        prop_assert!(rep.within(1e-6).is_ok(), "{}", rep.within(1e-6).unwrap_err());
    }

    #[test]
    fn grad_probit_expected_log_lik(
        (r, c, mu) in dims_and_values(-2.0, 2.0),
        var in proptest::collection::vec(0.05f64..3.0, 64),
        labels in proptest::collection::vec(prop_oneof![Just(1.0), Just(0.0), Just(-1.0)], 64),
        plain in any::<bool>(),
        gh_points in prop_oneof![Just(20usize), Just(7usize), Just(32usize)],
    ) {
        let n = r * c;
        let eps = if plain { 0.0 } else { 1e-3 };
        let rule = GaussHermite::probabilists(gh_points).unwrap();
        let y = mat_from(r, c, &labels[..n]);
        let inputs = [mat_from(r, c, &mu), mat_from(r, c, &var[..n])];
        let rep = check_gradient(&inputs, |t, v| {
            let yy = t.constant(y.clone());
            t.probit_expected_log_lik(yy, v[0], v[1], eps, &rule)
        }, GradCheck::default()).unwrap();
        prop_assert!(rep.within(1e-6).is_ok(), "{}", rep.within(1e-6).unwrap_err());
    }

    #[test]
    fn grad_probit_log_predictive(
        (r, c, mu) in dims_and_values(-2.0, 2.0),
        var in proptest::collection::vec(0.05f64..3.0, 64),
        labels in proptest::collection::vec(prop_oneof![Just(1.0), Just(0.0), Just(-1.0)], 64),
        plain in any::<bool>(),
    ) {
        let n = r * c;
        let eps = if plain { 0.0 } else { 1e-3 };
        let y = mat_from(r, c, &labels[..n]);
        let inputs = [mat_from(r, c, &mu), mat_from(r, c, &var[..n])];
        let rep = check_gradient(&inputs, |t, v| {
            let yy = t.constant(y.clone());
            t.probit_log_predictive(yy, v[0], v[1], eps)
        }, GradCheck::default()).unwrap();
        prop_assert!(rep.within(1e-6).is_ok(), "{}", rep.within(1e-6).unwrap_err());
    }
}

// ---------------------------------------------------------------------------------------
// classification likelihoods: Bernoulli-logit, robust-max, softmax
// ---------------------------------------------------------------------------------------

use dgp_core::{Error, LabelError};
use dgp_traits::likelihoods::{LogitLikelihood, RobustMaxLikelihood, SoftmaxLikelihood};

fn norm_cdf(x: f64) -> f64 {
    scalar::probit_link(x, 0.0)
}

#[test]
fn logit_expected_log_lik_and_predictive_match_brute_force_integration() {
    // Worst absolute errors over μ ∈ [−3, 3] measured against the Simpson rule: 20 nodes
    // (the default) stay below 1e-7 for v ≤ 2 and reach ~1e-6 (expectation) and ~5e-6
    // (probability) at v = 4; 60 nodes stay below 1e-6 up to v = 9.
    for (gh_points, vars, tol) in [
        (20, &[0.001, 0.1, 0.5, 1.0, 2.0][..], 1e-7),
        (60, &[4.0, 9.0][..], 1e-6),
    ] {
        for &var in vars {
            for k in -6..=6 {
                let mu = 0.5 * k as f64;
                for y in [1.0, 0.0, -1.0] {
                    let gh = scalar::logit_expected_log_lik(y, mu, var, gh_points).unwrap();
                    let bf = brute_force_expectation(mu, var, |f| scalar::logit_log_lik(y, f));
                    assert!(
                        (gh - bf).abs() <= tol,
                        "n={gh_points} var={var} mu={mu} y={y}: GH {gh}, brute force {bf}"
                    );
                }
                let p = scalar::logit_prob(mu, var, gh_points).unwrap();
                let bf = brute_force_expectation(mu, var, scalar::sigmoid);
                assert!(
                    (p - bf).abs() <= tol,
                    "n={gh_points} var={var} mu={mu}: {p} vs {bf}"
                );
            }
        }
    }
    // The default rule's error at v = 4 is pinned (documented on `LogitLikelihood`).
    let e = (scalar::logit_prob(-3.0, 4.0, 20).unwrap()
        - brute_force_expectation(-3.0, 4.0, scalar::sigmoid))
    .abs();
    assert!(e > 1e-7 && e < 1e-5, "{e}");
    // Stable far in the tails.
    assert!((scalar::logit_log_lik(1.0, -800.0) + 800.0).abs() < 1e-12);
    assert!(scalar::logit_log_lik(1.0, 800.0).abs() < 1e-300);
}

/// `P(f_c is the largest)` by Simpson on the 1-D integral over f_c of
/// `N(f_c) Π_{j≠c} Φ((f_c − μ_j)/√v_j)`.
fn brute_force_prob_largest(c: usize, mu: &[f64], var: &[f64]) -> f64 {
    brute_force_expectation(mu[c], var[c], |f| {
        (0..mu.len())
            .filter(|&j| j != c)
            .map(|j| norm_cdf((f - mu[j]) / var[j].sqrt()))
            .product()
    })
}

/// (means, variances, Gauss–Hermite nodes needed for 1e-7): the 1-D rule over the
/// label's latent function is accurate when the other classes' variances are not much
/// smaller than the label's (the integrand's steps have width √v_j, the nodes spacing
/// ~√v_y).
const RM_CASES: [(&[f64], &[f64], usize); 5] = [
    (&[0.3, -0.5, 1.0], &[0.5, 0.6, 0.4], 20),
    (&[0.0, 0.0], &[1.0, 1.0], 20),
    (&[-1.0, 1.0, 0.2, 0.4], &[1.0, 1.0, 0.8, 0.7], 60),
    (
        &[2.0, -1.0, 0.5, 0.0, -2.0],
        &[0.1, 0.3, 1.5, 2.0, 0.05],
        200,
    ),
    (&[0.3, -0.5, 1.0], &[0.5, 1.0, 0.2], 100),
];

#[test]
fn robust_max_matches_brute_force_integration_and_monte_carlo() {
    for (mu, var, gh_points) in RM_CASES {
        let k = mu.len();
        let mut total = 0.0;
        for c in 0..k {
            let gh = scalar::prob_is_largest(c, mu, var, gh_points).unwrap();
            let bf = brute_force_prob_largest(c, mu, var);
            assert!(
                (gh - bf).abs() <= 1e-7,
                "mu={mu:?} c={c}: GH {gh}, brute {bf}"
            );
            let ell = scalar::robust_max_expected_log_lik(c, mu, var, 1e-3, gh_points).unwrap();
            let bf_ell = bf * (1.0 - 1e-3f64).ln() + (1.0 - bf) * (1e-3 / (k - 1) as f64).ln();
            assert!((ell - bf_ell).abs() <= 1e-6, "{ell} vs {bf_ell}");
            total += gh;
        }
        assert!((total - 1.0).abs() <= 1e-6, "Σ_c P_c = {total}");
        // The one-dimensional reduction against the frequency of the argmax.
        let n = 200_000;
        let mut rng = seeded(7 + k as u64);
        let eps = standard_normal(&mut rng, n, k);
        let mut counts = vec![0usize; k];
        for i in 0..n {
            let f: Vec<f64> = (0..k)
                .map(|j| mu[j] + var[j].sqrt() * eps[(i, j)])
                .collect();
            let am = (0..k).max_by(|&a, &b| f[a].total_cmp(&f[b])).unwrap();
            counts[am] += 1;
        }
        for (c, &count) in counts.iter().enumerate() {
            let p = brute_force_prob_largest(c, mu, var);
            let freq = count as f64 / n as f64;
            let se = (p * (1.0 - p) / n as f64).sqrt().max(1e-6);
            assert!((freq - p).abs() <= 4.0 * se, "c={c}: MC {freq} vs {p}");
        }
    }
}

#[test]
fn robust_max_twenty_node_error_grows_with_the_variance_ratio() {
    // Pins the accuracy documented on `RobustMaxLikelihood::gh_points` (GPflow's 20-node
    // rule): with the label's variance 4× and 16× the others', the error of P_y is of
    // order 1e-4 and 1e-2.
    let mu = [0.3, -0.5, 1.0, 0.0];
    let err = |ratio: f64| {
        (0..4)
            .map(|c| {
                let var: Vec<f64> = (0..4)
                    .map(|j| if j == c { 0.2 * ratio } else { 0.2 })
                    .collect();
                (scalar::prob_is_largest(c, &mu, &var, 20).unwrap()
                    - brute_force_prob_largest(c, &mu, &var))
                .abs()
            })
            .fold(0.0, f64::max)
    };
    let (e4, e16) = (err(4.0), err(16.0));
    assert!(e4 > 1e-5 && e4 < 1e-3, "{e4}");
    assert!(e16 > 1e-3 && e16 < 1e-1, "{e16}");
}

#[test]
fn softmax_monte_carlo_matches_brute_force_integration() {
    // K = 3: E log softmax_y(f) = μ_y − E lse(f); E lse by a 40³-node tensor Gauss–Hermite
    // rule (lse is analytic in a strip: this is exact to ~1e-12), against the Monte
    // Carlo estimate with 2·10⁵ antithetic draws within 4 standard errors.
    let mu: [f64; 3] = [0.4, -0.3, 1.1];
    let var: [f64; 3] = [0.6, 1.2, 0.3];
    let rule = GaussHermite::probabilists(40).unwrap();
    let mut e_lse = 0.0;
    for (a, wa) in rule.nodes.iter().zip(&rule.weights) {
        for (b, wb) in rule.nodes.iter().zip(&rule.weights) {
            for (c, wc) in rule.nodes.iter().zip(&rule.weights) {
                let f = [
                    mu[0] + var[0].sqrt() * a,
                    mu[1] + var[1].sqrt() * b,
                    mu[2] + var[2].sqrt() * c,
                ];
                let m = f.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lse = m + f.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
                e_lse += wa * wb * wc * lse;
            }
        }
    }
    let s0 = 100_000;
    let mut rng = seeded(11);
    let draws = standard_normal(&mut rng, s0, 3);
    for y in 0..3 {
        let exact = mu[y] - e_lse;
        let mut t = Tape::new();
        let yy = t.constant(mat![[y as f64]]);
        let m = t.constant(Mat::from_fn(1, 3, |_, j| mu[j]));
        let v = t.constant(Mat::from_fn(1, 3, |_, j| var[j]));
        let e = t.softmax_expected_log_lik(yy, m, v, draws.as_ref(), true);
        let mc = t.value(e)[(0, 0)];
        // Standard error of the antithetic pair means.
        let lse_at = |sign: f64, r: usize| {
            let f: Vec<f64> = (0..3)
                .map(|j| mu[j] + sign * var[j].sqrt() * draws[(r, j)])
                .collect();
            let m = f.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            m + f.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
        };
        let pairs: Vec<f64> = (0..s0)
            .map(|r| 0.5 * (lse_at(1.0, r) + lse_at(-1.0, r)))
            .collect();
        let mean = pairs.iter().sum::<f64>() / s0 as f64;
        let sd = (pairs.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / (s0 - 1) as f64).sqrt();
        let se = sd / (s0 as f64).sqrt();
        // The estimate is exactly μ_y minus the mean of the pair means.
        assert!((mc - (mu[y] - mean)).abs() < 1e-12);
        assert!(
            (mc - exact).abs() <= 4.0 * se,
            "y={y}: MC {mc} ± {se}, exact {exact}"
        );
    }
}

#[test]
fn softmax_with_two_classes_is_a_logit_of_the_difference() {
    // p(y = 1 | f) = σ(f_1 − f_0) with f_1 − f_0 ∼ N(μ_1 − μ_0, v_0 + v_1).
    let (mu, var): ([f64; 2], [f64; 2]) = ([0.2, -0.4], [0.3, 0.9]);
    let exact = scalar::logit_expected_log_lik(0.0, mu[1] - mu[0], var[0] + var[1], 40).unwrap();
    let lik = Likelihood::Softmax(SoftmaxLikelihood {
        num_classes: 2,
        mc_points: 2,
        predict_points: 400_000,
        predict_seed: 3,
    });
    let e = lik
        .expected_log_lik_values(
            mat![[0.0]].as_ref(),
            Mat::from_fn(1, 2, |_, j| mu[j]).as_ref(),
            Mat::from_fn(1, 2, |_, j| var[j]).as_ref(),
            &[],
        )
        .unwrap()[(0, 0)];
    assert!((e - exact).abs() < 2e-3, "{e} vs {exact}");
}

#[test]
fn class_probabilities_sum_to_one_and_match_their_definitions() {
    let n = 6;
    let mut rng = seeded(5);
    let mu3 = standard_normal(&mut rng, n, 3);
    // Comparable variances: the 20-node robust-max rule is accurate to ~1e-8 here.
    let var3 = Mat::from_fn(n, 3, |i, j| 0.5 + 0.1 * ((i + 2 * j) % 5) as f64);
    let mu1 = Mat::from_fn(n, 1, |i, _| mu3[(i, 0)]);
    let var1 = Mat::from_fn(n, 1, |i, _| var3[(i, 0)]);
    for (lik, mu, var) in [
        (Likelihood::probit(), &mu1, &var1),
        (Likelihood::logit(), &mu1, &var1),
        (Likelihood::robust_max(3), &mu3, &var3),
        (Likelihood::softmax(3), &mu3, &var3),
    ] {
        let p = lik.class_probs(mu.as_ref(), var.as_ref()).unwrap();
        assert_eq!(p.ncols(), lik.num_classes().unwrap());
        for i in 0..n {
            let s: f64 = (0..p.ncols()).map(|c| p[(i, c)]).sum();
            assert!((s - 1.0).abs() < 1e-12, "{lik:?}: row {i} sums to {s}");
            assert!((0..p.ncols()).all(|c| p[(i, c)] > 0.0 && p[(i, c)] < 1.0));
        }
        // log_predictive_values agrees with the probability of the label.
        let labels = Mat::from_fn(n, 1, |i, _| (i % p.ncols()) as f64);
        let lp = lik
            .log_predictive_values(labels.as_ref(), mu.as_ref(), var.as_ref(), &[])
            .unwrap();
        for i in 0..n {
            let want = p[(i, i % p.ncols())].ln();
            assert!(
                (lp[(i, 0)] - want).abs() < 1e-6,
                "{lik:?}: {} vs {want}",
                lp[(i, 0)]
            );
        }
    }
    // Robust-max probabilities are (1 − ε)P_c + (1 − P_c)ε/(K − 1) of the brute-force P_c.
    let p = Likelihood::robust_max(3)
        .class_probs(mu3.as_ref(), var3.as_ref())
        .unwrap();
    for i in 0..n {
        let m: Vec<f64> = (0..3).map(|j| mu3[(i, j)]).collect();
        let v: Vec<f64> = (0..3).map(|j| var3[(i, j)]).collect();
        for c in 0..3 {
            let pc = brute_force_prob_largest(c, &m, &v);
            let want = pc * (1.0 - 1e-3) + (1.0 - pc) * 0.5e-3;
            assert!((p[(i, c)] - want).abs() < 1e-6);
        }
    }
    // Mixture: the weighted average of the components' probabilities.
    let lik = Likelihood::robust_max(3);
    let means: Vec<Mat<f64>> = (0..3)
        .map(|k| Mat::from_fn(n, 2, |i, s| mu3[(i, k)] + s as f64))
        .collect();
    let vars: Vec<Mat<f64>> = (0..3)
        .map(|k| Mat::from_fn(n, 2, |i, _| var3[(i, k)]))
        .collect();
    let mix = lik
        .class_probs_mixture(&[0.25, 0.75], &means, &vars)
        .unwrap();
    for s in 0..2 {
        let comp_mu = Mat::from_fn(n, 3, |i, k| means[k][(i, s)]);
        let comp_var = Mat::from_fn(n, 3, |i, k| vars[k][(i, s)]);
        let _ = lik
            .class_probs(comp_mu.as_ref(), comp_var.as_ref())
            .unwrap();
    }
    let p0 = lik
        .class_probs(
            Mat::from_fn(n, 3, |i, k| means[k][(i, 0)]).as_ref(),
            Mat::from_fn(n, 3, |i, k| vars[k][(i, 0)]).as_ref(),
        )
        .unwrap();
    let p1 = lik
        .class_probs(
            Mat::from_fn(n, 3, |i, k| means[k][(i, 1)]).as_ref(),
            Mat::from_fn(n, 3, |i, k| vars[k][(i, 1)]).as_ref(),
        )
        .unwrap();
    for i in 0..n {
        for c in 0..3 {
            let want = 0.25 * p0[(i, c)] + 0.75 * p1[(i, c)];
            assert!((mix[(i, c)] - want).abs() < 1e-12);
        }
    }
}

fn label_error(r: dgp_core::Result<()>) -> LabelError {
    match r {
        Err(Error::Label(e)) => e,
        other => panic!("expected a label error, got {other:?}"),
    }
}

#[test]
fn class_labels_are_validated_with_typed_errors() {
    let rm = Likelihood::robust_max(3);
    assert!(rm.check_targets(mat![[0.0], [2.0], [1.0]].as_ref()).is_ok());
    assert!(matches!(
        label_error(rm.check_targets(mat![[0.0], [f64::NAN]].as_ref())),
        LabelError::NonFinite { row: 1, .. }
    ));
    assert!(matches!(
        label_error(rm.check_targets(mat![[0.0], [1.5]].as_ref())),
        LabelError::NotAnInteger { row: 1, .. }
    ));
    assert!(matches!(
        label_error(rm.check_targets(mat![[3.0]].as_ref())),
        LabelError::OutOfRange {
            row: 0,
            num_classes: 3,
            ..
        }
    ));
    assert!(matches!(
        label_error(rm.check_targets(mat![[-1.0]].as_ref())),
        LabelError::OutOfRange { .. }
    ));
    assert!(matches!(
        label_error(rm.check_targets(mat![[0.0, 1.0]].as_ref())),
        LabelError::NotOneColumn { columns: 2 }
    ));
    assert!(matches!(
        label_error(rm.check_training_targets(mat![[0.0], [2.0], [0.0]].as_ref())),
        LabelError::MissingClass {
            class: 1,
            num_classes: 3
        }
    ));
    assert!(
        rm.check_training_targets(mat![[0.0], [2.0], [1.0]].as_ref())
            .is_ok()
    );
    for k in [0, 1] {
        for lik in [Likelihood::robust_max(k), Likelihood::softmax(k)] {
            assert!(matches!(
                label_error(lik.validate()),
                LabelError::TooFewClasses { num_classes } if num_classes == k
            ));
        }
    }
    // Bernoulli: both classes must be in the training targets.
    assert!(matches!(
        label_error(Likelihood::logit().check_training_targets(mat![[1.0], [1.0]].as_ref())),
        LabelError::MissingClass { class: 0, .. }
    ));
    assert!(
        Likelihood::logit()
            .check_targets(mat![[0.5]].as_ref())
            .is_err()
    );
    assert!(
        Likelihood::logit()
            .check_targets(mat![[f64::NAN]].as_ref())
            .is_err()
    );
}

#[test]
fn classification_tape_dispatch_checks_shapes_labels_and_generators() {
    let mut t = Tape::new();
    let y = t.constant(mat![[0.0], [2.0]]);
    let mu = t.leaf(mat![[0.1, 0.2, 0.3], [0.0, -0.1, 0.4]]);
    let var = t.leaf(mat![[0.5, 0.2, 0.3], [0.1, 0.1, 0.4]]);
    let rm = Likelihood::robust_max(3);
    let e = rm.expected_log_lik(&mut t, y, mu, var, None).unwrap();
    assert_eq!(t.shape(e), (2, 1));
    // K in the configuration must match the latent columns.
    assert!(
        Likelihood::robust_max(4)
            .expected_log_lik(&mut t, y, mu, var, None)
            .is_err()
    );
    // Labels outside 0..K are an error, not a panic.
    let bad = t.constant(mat![[0.0], [3.0]]);
    assert!(rm.expected_log_lik(&mut t, bad, mu, var, None).is_err());
    // The softmax estimate needs a generator; with one it is deterministic given the seed.
    let sm = Likelihood::softmax(3);
    assert!(sm.expected_log_lik(&mut t, y, mu, var, None).is_err());
    let a = sm
        .expected_log_lik_with_rng(&mut t, y, mu, var, None, &mut seeded(4))
        .unwrap();
    let b = sm
        .expected_log_lik_with_rng(&mut t, y, mu, var, None, &mut seeded(4))
        .unwrap();
    assert_eq!(t.value(a), t.value(b));
    // Non-softmax likelihoods leave the generator untouched.
    let mut r1 = seeded(9);
    rm.expected_log_lik_with_rng(&mut t, y, mu, var, None, &mut r1)
        .unwrap();
    assert_eq!(r1, seeded(9));
    assert!(
        rm.predictive_moments(t.value(mu), t.value(var), &[])
            .is_err()
    );
    assert!(
        Likelihood::gaussian(1.0)
            .class_probs(t.value(mu), t.value(var))
            .is_err()
    );
}

#[test]
fn classification_configs_round_trip_through_json() {
    for lik in [
        Likelihood::logit(),
        Likelihood::robust_max(10),
        Likelihood::softmax(4),
    ] {
        let s = serde_json::to_string(&lik).unwrap();
        let back: Likelihood = serde_json::from_str(&s).unwrap();
        assert_eq!(back, lik);
    }
    let l: Likelihood = serde_json::from_str(r#"{"kind":"robust_max","num_classes":5}"#).unwrap();
    assert_eq!(
        l,
        Likelihood::RobustMax(RobustMaxLikelihood {
            num_classes: 5,
            epsilon: 1e-3,
            gh_points: 20
        })
    );
    let l: Likelihood = serde_json::from_str(r#"{"kind":"bernoulli_logit"}"#).unwrap();
    assert_eq!(
        l,
        Likelihood::BernoulliLogit(LogitLikelihood { gh_points: 20 })
    );
    let l: Likelihood = serde_json::from_str(r#"{"kind":"softmax","num_classes":3}"#).unwrap();
    assert_eq!(l, Likelihood::softmax(3));
    // num_classes has no default.
    assert!(serde_json::from_str::<Likelihood>(r#"{"kind":"softmax"}"#).is_err());
    // Odd Monte Carlo sizes are refused (antithetic pairs).
    let odd = Likelihood::Softmax(SoftmaxLikelihood {
        mc_points: 3,
        ..SoftmaxLikelihood::new(3)
    });
    assert!(matches!(odd.validate(), Err(Error::Config(_))));
}

fn labels_strategy(k: usize) -> impl Strategy<Value = Vec<f64>> {
    proptest::collection::vec((0..k).prop_map(|c| c as f64), 8)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn grad_logit_expected_log_lik(
        (r, c, mu) in dims_and_values(-3.0, 3.0),
        var in proptest::collection::vec(0.05f64..4.0, 64),
        labels in proptest::collection::vec(prop_oneof![Just(1.0), Just(0.0), Just(-1.0)], 64),
        gh_points in prop_oneof![Just(20usize), Just(7usize)],
    ) {
        let n = r * c;
        let rule = GaussHermite::probabilists(gh_points).unwrap();
        let y = mat_from(r, c, &labels[..n]);
        let inputs = [mat_from(r, c, &mu), mat_from(r, c, &var[..n])];
        let rep = check_gradient(&inputs, |t, v| {
            let yy = t.constant(y.clone());
            t.logit_expected_log_lik(yy, v[0], v[1], &rule)
        }, GradCheck::default()).unwrap();
        prop_assert!(rep.within(1e-6).is_ok(), "{}", rep.within(1e-6).unwrap_err());
    }

    #[test]
    fn grad_logit_log_predictive(
        (r, c, mu) in dims_and_values(-3.0, 3.0),
        var in proptest::collection::vec(0.05f64..4.0, 64),
        labels in proptest::collection::vec(prop_oneof![Just(1.0), Just(0.0)], 64),
    ) {
        let n = r * c;
        let rule = GaussHermite::probabilists(20).unwrap();
        let y = mat_from(r, c, &labels[..n]);
        let inputs = [mat_from(r, c, &mu), mat_from(r, c, &var[..n])];
        let rep = check_gradient(&inputs, |t, v| {
            let yy = t.constant(y.clone());
            t.logit_log_predictive(yy, v[0], v[1], &rule)
        }, GradCheck::default()).unwrap();
        prop_assert!(rep.within(1e-6).is_ok(), "{}", rep.within(1e-6).unwrap_err());
    }

    #[test]
    fn grad_robust_max(
        r in 1usize..=6,
        k in 2usize..=5,
        mu in proptest::collection::vec(-2.0f64..2.0, 30),
        var in proptest::collection::vec(0.05f64..3.0, 30),
        labels in labels_strategy(5),
        predictive in any::<bool>(),
    ) {
        let rule = GaussHermite::probabilists(20).unwrap();
        let y = Mat::from_fn(r, 1, |i, _| labels[i] % k as f64);
        let inputs = [mat_from(r, k, &mu[..r * k]), mat_from(r, k, &var[..r * k])];
        let rep = check_gradient(&inputs, |t, v| {
            let yy = t.constant(y.clone());
            if predictive {
                t.robust_max_log_predictive(yy, v[0], v[1], 0.01, &rule)
            } else {
                t.robust_max_expected_log_lik(yy, v[0], v[1], 1e-3, &rule)
            }
        }, GradCheck::default()).unwrap();
        prop_assert!(rep.within(1e-6).is_ok(), "{}", rep.within(1e-6).unwrap_err());
    }

    #[test]
    fn grad_softmax(
        r in 1usize..=5,
        k in 2usize..=5,
        mu in proptest::collection::vec(-2.0f64..2.0, 25),
        var in proptest::collection::vec(0.05f64..3.0, 25),
        labels in labels_strategy(5),
        seed in 0u64..1000,
        antithetic in any::<bool>(),
        predictive in any::<bool>(),
    ) {
        let y = Mat::from_fn(r, 1, |i, _| labels[i] % k as f64);
        let draws = standard_normal(&mut seeded(seed), r * 3, k);
        let inputs = [mat_from(r, k, &mu[..r * k]), mat_from(r, k, &var[..r * k])];
        let rep = check_gradient(&inputs, |t, v| {
            let yy = t.constant(y.clone());
            if predictive {
                t.softmax_log_predictive(yy, v[0], v[1], draws.as_ref(), antithetic)
            } else {
                t.softmax_expected_log_lik(yy, v[0], v[1], draws.as_ref(), antithetic)
            }
        }, GradCheck::default()).unwrap();
        prop_assert!(rep.within(1e-6).is_ok(), "{}", rep.within(1e-6).unwrap_err());
    }
}
