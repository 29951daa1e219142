//! Likelihood operations: closed forms against Monte Carlo, quadrature and brute-force
//! integration; finite-difference gradient checks of every fused tape operation.

use dgp_traits::likelihoods::{Likelihood, ProbitLikelihood, scalar};
use dgp_traits::quadrature::GaussHermite;
use dgp_traits::rng::{seeded, standard_normal};
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
