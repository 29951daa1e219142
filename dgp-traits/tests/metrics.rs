//! Integration tests of `dgp_traits::predictive` and `dgp_traits::metrics`.

use dgp_core::Error;
use dgp_core::rng::{Rng, seeded, standard_normal};
use dgp_core::special::{norm_cdf, norm_sf};
use dgp_traits::metrics::*;
use dgp_traits::predictive::Predictive;
use faer::Mat;
use proptest::prelude::*;
use rand::RngExt;

// ---------------------------------------------------------------------------------------
// helpers

/// A random N-point, S-component, P-output predictive: means in [−2, 2], sds in
/// [0.1, 1.5], random weights on the simplex.
fn random_predictive(rng: &mut Rng, n: usize, s: usize, p: usize) -> Predictive {
    let mut w: Vec<f64> = (0..s).map(|_| 0.2 + rng.random::<f64>()).collect();
    let total: f64 = w.iter().sum();
    w.iter_mut().for_each(|v| *v /= total);
    let means = (0..p)
        .map(|_| Mat::from_fn(n, s, |_, _| -2.0 + 4.0 * rng.random::<f64>()))
        .collect();
    let vars = (0..p)
        .map(|_| Mat::from_fn(n, s, |_, _| (0.1 + 1.4 * rng.random::<f64>()).powi(2)))
        .collect();
    Predictive::new(w, means, vars).unwrap()
}

/// Draws one y (N×P) from the predictive: per point a component, then independent outputs.
fn sample_targets(pred: &Predictive, rng: &mut Rng) -> Mat<f64> {
    let (n, p) = (pred.n_points(), pred.n_outputs());
    let mut y = Mat::zeros(n, p);
    for i in 0..n {
        let u: f64 = rng.random();
        let mut acc = 0.0;
        let mut comp = pred.n_components() - 1;
        for (s, &w) in pred.weights().iter().enumerate() {
            acc += w;
            if u < acc {
                comp = s;
                break;
            }
        }
        let z = standard_normal(rng, p, 1);
        for q in 0..p {
            y[(i, q)] =
                pred.means()[q][(i, comp)] + pred.variances()[q][(i, comp)].sqrt() * z[(q, 0)];
        }
    }
    y
}

/// ∫ (F(t) − 1{t ≥ y})² dt by composite 5-point Gauss–Legendre, split at y, over
/// [min(μ − 12σ), y] and [y, max(μ + 12σ)]; beyond those limits the integrand is < 1e-60.
fn crps_numeric(w: &[f64], mu: &[f64], var: &[f64], y: f64) -> f64 {
    const X: [f64; 5] = [
        0.0,
        -0.538_469_310_105_683_1,
        0.538_469_310_105_683_1,
        -0.906_179_845_938_664,
        0.906_179_845_938_664,
    ];
    const W: [f64; 5] = [
        0.568_888_888_888_888_9,
        0.478_628_670_499_366_5,
        0.478_628_670_499_366_5,
        0.236_926_885_056_189_1,
        0.236_926_885_056_189_1,
    ];
    let lo = mu
        .iter()
        .zip(var)
        .map(|(m, v)| m - 12.0 * v.sqrt())
        .fold(y, f64::min);
    let hi = mu
        .iter()
        .zip(var)
        .map(|(m, v)| m + 12.0 * v.sqrt())
        .fold(y, f64::max);
    let cdf = |t: f64| -> f64 {
        w.iter()
            .zip(mu)
            .zip(var)
            .map(|((w, m), v)| w * norm_cdf((t - m) / v.sqrt()))
            .sum()
    };
    let sf = |t: f64| -> f64 {
        w.iter()
            .zip(mu)
            .zip(var)
            .map(|((w, m), v)| w * norm_sf((t - m) / v.sqrt()))
            .sum()
    };
    let integrate = |a: f64, b: f64, f: &dyn Fn(f64) -> f64| -> f64 {
        let panels = 4000;
        let h = (b - a) / panels as f64;
        let mut total = 0.0;
        for k in 0..panels {
            let c = a + (k as f64 + 0.5) * h;
            for (x, wt) in X.iter().zip(W) {
                total += wt * f(c + 0.5 * h * x);
            }
        }
        total * 0.5 * h
    };
    integrate(lo, y, &|t| cdf(t).powi(2)) + integrate(y, hi, &|t| sf(t).powi(2))
}

fn marginal(pred: &Predictive, i: usize, p: usize) -> (Vec<f64>, Vec<f64>) {
    let s = pred.n_components();
    (
        (0..s).map(|k| pred.means()[p][(i, k)]).collect(),
        (0..s).map(|k| pred.variances()[p][(i, k)]).collect(),
    )
}

fn col(v: &[f64]) -> Mat<f64> {
    Mat::from_fn(v.len(), 1, |i, _| v[i])
}

// ---------------------------------------------------------------------------------------
// Predictive: construction and typed errors

#[test]
fn predictive_constructor_errors_are_typed() {
    let m = || Mat::<f64>::zeros(3, 2);
    let v = || Mat::from_fn(3, 2, |_, _| 1.0);
    assert!(Predictive::new(vec![0.5, 0.5], vec![m()], vec![v()]).is_ok());
    // Shapes.
    let r = Predictive::new(
        vec![0.5, 0.5],
        vec![m()],
        vec![Mat::from_fn(3, 3, |_, _| 1.0)],
    );
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    let r = Predictive::new(vec![0.5, 0.5], vec![m(), m()], vec![v()]);
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    let r = Predictive::new(vec![1.0], vec![m()], vec![v()]);
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    // Empty.
    assert!(matches!(
        Predictive::new(vec![], vec![], vec![]),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        Predictive::new(vec![1.0], vec![], vec![]),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        Predictive::new(vec![1.0], vec![Mat::zeros(0, 1)], vec![Mat::zeros(0, 1)]),
        Err(Error::Empty(_))
    ));
    // Non-finite.
    let mut bad = m();
    bad[(1, 1)] = f64::NAN;
    let r = Predictive::new(vec![0.5, 0.5], vec![bad], vec![v()]);
    assert!(
        matches!(r, Err(Error::NonFinite { row: 1, col: 1, .. })),
        "{r:?}"
    );
    let r = Predictive::new(vec![f64::NAN, 0.5], vec![m()], vec![v()]);
    assert!(matches!(r, Err(Error::NonFinite { .. })), "{r:?}");
    // Constraint violations.
    let mut zero_var = v();
    zero_var[(2, 0)] = 0.0;
    let r = Predictive::new(vec![0.5, 0.5], vec![m()], vec![zero_var]);
    assert!(matches!(r, Err(Error::Numerical(_))), "{r:?}");
    let r = Predictive::new(vec![0.6, 0.5], vec![m()], vec![v()]);
    assert!(matches!(r, Err(Error::Numerical(_))), "{r:?}");
    let r = Predictive::new(vec![1.5, -0.5], vec![m()], vec![v()]);
    assert!(matches!(r, Err(Error::Numerical(_))), "{r:?}");
    // Weights within tolerance are renormalised exactly.
    let p = Predictive::new(vec![0.5 + 1e-10, 0.5], vec![m()], vec![v()]).unwrap();
    assert!((p.weights().iter().sum::<f64>() - 1.0).abs() < 1e-15);
    // single_gaussian shape check.
    let r = Predictive::single_gaussian(Mat::zeros(3, 2), Mat::from_fn(3, 1, |_, _| 1.0));
    assert!(matches!(r, Err(Error::Shape { .. })));
}

#[test]
fn class_probs_are_validated() {
    let base =
        || Predictive::single_gaussian(Mat::zeros(2, 1), Mat::from_fn(2, 1, |_, _| 1.0)).unwrap();
    let ok = Mat::from_fn(2, 2, |i, j| if i == j { 0.75 } else { 0.25 });
    assert!(base().with_class_probs(ok).is_ok());
    assert!(matches!(
        base().with_class_probs(Mat::zeros(3, 2)),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        base().with_class_probs(Mat::from_fn(2, 1, |_, _| 1.0)),
        Err(Error::Shape { .. })
    ));
    let off = Mat::from_fn(2, 2, |_, _| 0.6);
    assert!(matches!(
        base().with_class_probs(off),
        Err(Error::Numerical(_))
    ));
    let neg = Mat::from_fn(2, 2, |_, j| if j == 0 { -0.5 } else { 1.5 });
    assert!(matches!(
        base().with_class_probs(neg),
        Err(Error::Numerical(_))
    ));
}

#[test]
fn mixture_mean_and_variance_follow_the_law_of_total_variance() {
    // One point, two components, two outputs.
    let w = vec![0.25, 0.75];
    let means = vec![
        col(&[1.0, 3.0]).transpose().to_owned(),
        col(&[0.0, -4.0]).transpose().to_owned(),
    ];
    let vars = vec![
        col(&[0.5, 2.0]).transpose().to_owned(),
        col(&[1.0, 1.0]).transpose().to_owned(),
    ];
    let p = Predictive::new(w, means, vars).unwrap();
    let m = p.mean();
    let v = p.variance();
    assert!((m[(0, 0)] - 2.5).abs() < 1e-15);
    assert!((m[(0, 1)] + 3.0).abs() < 1e-15);
    // E[v] + Var[μ]: 0.25·0.5 + 0.75·2 + (0.25·1 + 0.75·9 − 6.25).
    assert!((v[(0, 0)] - (0.125 + 1.5 + 0.75)).abs() < 1e-14);
    assert!((v[(0, 1)] - (1.0 + 3.0)).abs() < 1e-14);
}

#[test]
fn log_density_matches_a_hand_computation() {
    let w = vec![0.3, 0.7];
    let mu0 = Mat::from_fn(1, 2, |_, s| [0.0, 1.0][s]);
    let mu1 = Mat::from_fn(1, 2, |_, s| [2.0, -1.0][s]);
    let v0 = Mat::from_fn(1, 2, |_, s| [1.0, 0.25][s]);
    let v1 = Mat::from_fn(1, 2, |_, s| [4.0, 2.0][s]);
    let p = Predictive::new(w.clone(), vec![mu0, mu1], vec![v0, v1]).unwrap();
    let y = Mat::from_fn(1, 2, |_, j| [0.5, 0.0][j]);
    let npdf = |y: f64, m: f64, v: f64| {
        (-(y - m) * (y - m) / (2.0 * v)).exp() / (2.0 * std::f64::consts::PI * v).sqrt()
    };
    let expected = (0.3 * npdf(0.5, 0.0, 1.0) * npdf(0.0, 2.0, 4.0)
        + 0.7 * npdf(0.5, 1.0, 0.25) * npdf(0.0, -1.0, 2.0))
    .ln();
    let got = p.log_density(y.as_ref()).unwrap()[0];
    assert!((got - expected).abs() < 1e-14, "{got} vs {expected}");
    assert!((nll(&p, y.as_ref()).unwrap() + expected).abs() < 1e-14);
    assert!(matches!(
        p.log_density(Mat::zeros(1, 3).as_ref()),
        Err(Error::Shape { .. })
    ));
    let mut nan = y.clone();
    nan[(0, 0)] = f64::NAN;
    assert!(matches!(
        p.log_density(nan.as_ref()),
        Err(Error::NonFinite { .. })
    ));
}

#[test]
fn nll_with_extreme_values_stays_finite() {
    // Tiny variances and targets far in the tails: every component density underflows to 0
    // in linear space, but the log-sum-exp stays finite and exact.
    let s = 1000;
    let w = vec![1.0 / s as f64; s];
    let mu = Mat::from_fn(2, s, |_, k| k as f64 * 1e-3);
    let var = Mat::from_fn(2, s, |_, _| 1e-8);
    let p = Predictive::new(w, vec![mu], vec![var]).unwrap();
    let y = col(&[1e4, -3e3]);
    let ld = p.log_density(y.as_ref()).unwrap();
    assert!(ld.iter().all(|v| v.is_finite()), "{ld:?}");
    // The nearest component (mean 0.999) dominates the first point completely.
    let d: f64 = 1e4 - 0.999;
    let expected0 =
        -(s as f64).ln() - 0.5 * (2.0 * std::f64::consts::PI * 1e-8).ln() - d * d / 2e-8;
    assert!(((ld[0] - expected0) / expected0).abs() < 1e-12);
    assert!(nll(&p, y.as_ref()).unwrap().is_finite());
    // A zero-weight component contributes nothing (log 0 = −∞ inside the log-sum-exp).
    let q = Predictive::new(
        vec![1.0, 0.0],
        vec![Mat::from_fn(1, 2, |_, k| k as f64)],
        vec![Mat::from_fn(1, 2, |_, _| 1.0)],
    )
    .unwrap();
    let r = Predictive::single_gaussian(Mat::zeros(1, 1), Mat::from_fn(1, 1, |_, _| 1.0)).unwrap();
    let y1 = col(&[0.3]);
    assert_eq!(
        q.log_density(y1.as_ref()).unwrap(),
        r.log_density(y1.as_ref()).unwrap()
    );
}

#[test]
fn single_gaussian_equals_the_one_component_mixture() {
    let mean = Mat::from_fn(3, 2, |i, j| (i + 2 * j) as f64 * 0.5);
    let var = Mat::from_fn(3, 2, |i, j| 0.5 + (i * j) as f64);
    let a = Predictive::single_gaussian(mean.clone(), var.clone()).unwrap();
    assert_eq!((a.n_points(), a.n_outputs(), a.n_components()), (3, 2, 1));
    assert_eq!(a.mean(), mean);
    assert_eq!(a.variance(), var);
    let b = Predictive::equal_weights(
        (0..2)
            .map(|p| Mat::from_fn(3, 1, |i, _| mean[(i, p)]))
            .collect(),
        (0..2)
            .map(|p| Mat::from_fn(3, 1, |i, _| var[(i, p)]))
            .collect(),
    )
    .unwrap();
    assert_eq!(a, b);
}

#[test]
fn predictive_serde_round_trips_and_revalidates() {
    let p = random_predictive(&mut seeded(4), 5, 3, 2)
        .with_class_probs(Mat::from_fn(5, 2, |_, j| [0.25, 0.75][j]))
        .unwrap();
    let json = serde_json::to_string(&p).unwrap();
    let back: Predictive = serde_json::from_str(&json).unwrap();
    // serde_json without its `float_roundtrip` feature may parse a float 1 ulp off, so
    // compare to 2 ulp (relative 4.5e-16); shapes and layout must match exactly.
    let close = |a: f64, b: f64| (a - b).abs() <= 2.0 * f64::EPSILON * a.abs().max(b.abs());
    assert_eq!(
        (back.n_points(), back.n_outputs(), back.n_components()),
        (p.n_points(), p.n_outputs(), p.n_components())
    );
    assert!(
        back.weights()
            .iter()
            .zip(p.weights())
            .all(|(a, b)| close(*a, *b))
    );
    for q in 0..2 {
        for i in 0..5 {
            for k in 0..3 {
                assert!(close(back.means()[q][(i, k)], p.means()[q][(i, k)]));
                assert!(close(back.variances()[q][(i, k)], p.variances()[q][(i, k)]));
            }
        }
    }
    assert_eq!(back.class_probs().unwrap(), p.class_probs().unwrap());
    // A serialised predictive whose weights are off the simplex is rejected on load.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["weights"][0] = serde_json::json!(5.0);
    assert!(serde_json::from_value::<Predictive>(v).is_err());
    // A matrix whose data length does not match its shape is rejected too.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["means"][0]["nrows"] = serde_json::json!(4);
    assert!(serde_json::from_value::<Predictive>(v).is_err());
}

#[test]
fn concat_stacks_points() {
    let mut rng = seeded(9);
    let a = random_predictive(&mut rng, 3, 2, 2);
    let b0 = random_predictive(&mut rng, 4, 2, 2);
    // Same weights as `a`.
    let b = Predictive::new(
        a.weights().to_vec(),
        b0.means().to_vec(),
        b0.variances().to_vec(),
    )
    .unwrap();
    let c = Predictive::concat(&[a.clone(), b.clone()]).unwrap();
    assert_eq!(c.n_points(), 7);
    let y = sample_targets(&c, &mut rng);
    let ld = c.log_density(y.as_ref()).unwrap();
    let la = a.log_density(y.as_ref().subrows(0, 3)).unwrap();
    let lb = b.log_density(y.as_ref().subrows(3, 4)).unwrap();
    assert_eq!(ld, [la, lb].concat());
    assert!(matches!(
        Predictive::concat(&[a, b0]),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(Predictive::concat(&[]), Err(Error::Empty(_))));
}

// ---------------------------------------------------------------------------------------
// Metrics

#[test]
fn crps_single_gaussian_formula_and_known_value() {
    // CRPS(N(0,1), 0) = 2φ(0) − 1/√π = (√2 − 1)/√π.
    let expected = (2f64.sqrt() - 1.0) / std::f64::consts::PI.sqrt();
    assert!((crps_gaussian(0.0, 0.0, 1.0) - expected).abs() < 1e-15);
    assert!((crps_mixture(&[1.0], &[0.0], &[1.0], 0.0) - expected).abs() < 1e-15);
    // Scale and shift: CRPS(N(μ, σ²), y) = σ·CRPS(N(0,1), (y − μ)/σ).
    for &(y, m, s) in &[(1.3, 0.2, 0.7), (-4.0, 1.0, 2.0), (10.0, 0.0, 0.5)] {
        let a = crps_gaussian(y, m, s);
        let b = crps_mixture(&[1.0], &[m], &[s * s], y);
        let c = s * crps_gaussian((y - m) / s, 0.0, 1.0);
        assert!((a - b).abs() < 1e-13 * a.max(1.0), "{a} {b}");
        assert!((a - c).abs() < 1e-13 * a.max(1.0), "{a} {c}");
        let numeric = crps_numeric(&[1.0], &[m], &[s * s], y);
        assert!(((a - numeric) / a).abs() < 1e-9, "{a} vs {numeric}");
    }
    // Far from the mean CRPS → |y − μ| − σ/√π.
    let far = crps_gaussian(50.0, 0.0, 1.0);
    assert!((far - (50.0 - 1.0 / std::f64::consts::PI.sqrt())).abs() < 1e-12);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Closed-form mixture CRPS (Grimit et al. 2006) = ∫ (F(t) − 1{t ≥ y})² dt.
    #[test]
    fn crps_closed_form_matches_numerical_integration(
        comps in prop::collection::vec((-3.0f64..3.0, 0.1f64..2.0, 0.05f64..1.0), 1..6),
        y in -5.0f64..5.0,
    ) {
        let total: f64 = comps.iter().map(|c| c.2).sum();
        let w: Vec<f64> = comps.iter().map(|c| c.2 / total).collect();
        let mu: Vec<f64> = comps.iter().map(|c| c.0).collect();
        let var: Vec<f64> = comps.iter().map(|c| c.1 * c.1).collect();
        let closed = crps_mixture(&w, &mu, &var, y);
        let numeric = crps_numeric(&w, &mu, &var, y);
        prop_assert!(((closed - numeric) / numeric).abs() <= 1e-6, "{} vs {}", closed, numeric);
    }

    /// Identity 8 of DESIGN.md: NLL in original units = standardised NLL + Σ_p log σ_p
    /// (for P = 1: + log σ_y); CRPS and RMSE scale with σ_y.
    #[test]
    fn nll_in_original_units_is_standardised_nll_plus_log_sigma(
        n in 1usize..12, s in 1usize..6, p in 1usize..4, seed in 0u64..10_000,
        scales in prop::collection::vec((-50.0f64..50.0, 0.01f64..100.0), 3),
    ) {
        let mut rng = seeded(seed);
        let pred = random_predictive(&mut rng, n, s, p);
        let y_std = sample_targets(&pred, &mut rng);
        let m: Vec<f64> = scales[..p].iter().map(|c| c.0).collect();
        let sd: Vec<f64> = scales[..p].iter().map(|c| c.1).collect();
        let orig = pred.unstandardize(&m, &sd).unwrap();
        let y = Mat::from_fn(n, p, |i, q| m[q] + sd[q] * y_std[(i, q)]);
        let sum_log_sd: f64 = sd.iter().map(|v| v.ln()).sum();
        let nll_std = nll(&pred, y_std.as_ref()).unwrap();
        let nll_orig = nll(&orig, y.as_ref()).unwrap();
        prop_assert!((nll_orig - (nll_std + sum_log_sd)).abs() <= 1e-9 * (1.0 + nll_orig.abs()),
            "{} vs {}", nll_orig, nll_std + sum_log_sd);
        // Per point as well.
        let a = pred.log_density(y_std.as_ref()).unwrap();
        let b = orig.log_density(y.as_ref()).unwrap();
        for (la, lb) in a.iter().zip(&b) {
            prop_assert!((lb - (la - sum_log_sd)).abs() <= 1e-9 * (1.0 + lb.abs()));
        }
        let c_std = crps_per_point(&pred, y_std.as_ref()).unwrap();
        let c_orig = crps_per_point(&orig, y.as_ref()).unwrap();
        for q in 0..p {
            for i in 0..n {
                let want = sd[q] * c_std[(i, q)];
                prop_assert!((c_orig[(i, q)] - want).abs() <= 1e-9 * want.max(1e-3 * sd[q]));
            }
        }
        if p == 1 {
            let r_std = rmse(&pred, y_std.as_ref()).unwrap();
            let r_orig = rmse(&orig, y.as_ref()).unwrap();
            prop_assert!((r_orig - sd[0] * r_std).abs() <= 1e-9 * (r_orig + 1e-3 * sd[0]));
        }
        // PIT values are invariant.
        let u_std = pit(&pred, y_std.as_ref()).unwrap();
        let u_orig = pit(&orig, y.as_ref()).unwrap();
        for q in 0..p {
            for i in 0..n {
                prop_assert!((u_std[(i, q)] - u_orig[(i, q)]).abs() <= 1e-9);
            }
        }
    }

    /// The bisection quantiles invert the mixture CDF, and the interval route to coverage
    /// agrees with the PIT route.
    #[test]
    fn quantiles_invert_the_cdf_and_interval_coverage_matches_pit(
        n in 1usize..20, s in 1usize..6, seed in 0u64..10_000, level in 0.05f64..0.99,
    ) {
        let mut rng = seeded(seed);
        let pred = random_predictive(&mut rng, n, s, 1);
        let y = sample_targets(&pred, &mut rng);
        let (lo, hi) = central_intervals(&pred, level).unwrap();
        let mut inside = 0;
        for i in 0..n {
            let (mu, var) = marginal(&pred, i, 0);
            let fl = mixture_cdf(pred.weights(), &mu, &var, lo[(i, 0)]);
            let fh = mixture_cdf(pred.weights(), &mu, &var, hi[(i, 0)]);
            prop_assert!((fl - 0.5 * (1.0 - level)).abs() < 1e-13);
            prop_assert!((fh - 0.5 * (1.0 + level)).abs() < 1e-13);
            if lo[(i, 0)] <= y[(i, 0)] && y[(i, 0)] <= hi[(i, 0)] {
                inside += 1;
            }
        }
        let cov = coverage(&pred, y.as_ref(), level).unwrap();
        prop_assert_eq!(cov, inside as f64 / n as f64);
    }
}

#[test]
fn mixture_quantile_of_a_single_gaussian_is_exact() {
    for &q in &[0.025, 0.25, 0.5, 0.9] {
        let x = mixture_quantile(&[1.0], &[1.5], &[4.0], q);
        let want = 1.5 + 2.0 * dgp_core::special::norm_ppf(q);
        assert!((x - want).abs() < 1e-14, "{x} vs {want}");
    }
    assert_eq!(
        mixture_quantile(&[1.0], &[0.0], &[1.0], 0.0),
        f64::NEG_INFINITY
    );
    assert!(mixture_quantile(&[1.0], &[0.0], &[1.0], 1.5).is_nan());
}

#[test]
fn coverage_of_samples_from_the_predictive_is_nominal() {
    // y drawn from the predictive itself: coverage at level ℓ is Binomial(N·P, ℓ)/(N·P).
    // Tolerance: 4 binomial standard errors, sqrt(ℓ(1−ℓ)/(N·P)) (fixed seed).
    let mut rng = seeded(2024);
    let pred = random_predictive(&mut rng, 5000, 3, 2);
    let y = sample_targets(&pred, &mut rng);
    let m = Metrics::compute(&pred, y.as_ref()).unwrap();
    let count: f64 = 10_000.0;
    for (level, got) in [(0.5, m.cov50), (0.9, m.cov90), (0.95, m.cov95)] {
        let se = (level * (1.0 - level) / count).sqrt();
        assert!(
            (got - level).abs() <= 4.0 * se,
            "coverage {got} at level {level}"
        );
        assert_eq!(got, coverage(&pred, y.as_ref(), level).unwrap());
    }
    // PIT values are uniform: mean 1/2 (s.e. sqrt(1/12/count)), and in [0, 1].
    let u = pit(&pred, y.as_ref()).unwrap();
    let mean: f64 = (0..2)
        .flat_map(|q| (0..5000).map(move |i| (i, q)))
        .map(|(i, q)| u[(i, q)])
        .sum::<f64>()
        / count;
    assert!(
        (mean - 0.5).abs() <= 4.0 * (1.0 / 12.0 / count).sqrt(),
        "PIT mean {mean}"
    );
    // Metrics::compute agrees with the separate functions.
    assert_eq!(m.nll, nll(&pred, y.as_ref()).unwrap());
    assert_eq!(m.rmse, rmse(&pred, y.as_ref()).unwrap());
    assert!((m.crps - crps(&pred, y.as_ref()).unwrap()).abs() < 1e-15);
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(serde_json::from_str::<Metrics>(&json).unwrap(), m);
    // Level outside (0, 1).
    assert!(matches!(
        coverage(&pred, y.as_ref(), 1.0),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        central_intervals(&pred, 0.0),
        Err(Error::Config(_))
    ));
}

#[test]
fn rmse_and_crps_reject_wrong_target_shapes() {
    let pred = random_predictive(&mut seeded(1), 4, 2, 1);
    let y = Mat::<f64>::zeros(3, 1);
    assert!(matches!(rmse(&pred, y.as_ref()), Err(Error::Shape { .. })));
    assert!(matches!(crps(&pred, y.as_ref()), Err(Error::Shape { .. })));
    assert!(matches!(pit(&pred, y.as_ref()), Err(Error::Shape { .. })));
    assert!(matches!(
        Metrics::compute(&pred, y.as_ref()),
        Err(Error::Shape { .. })
    ));
}

#[test]
fn unstandardize_rejects_bad_scales() {
    let pred = random_predictive(&mut seeded(1), 4, 2, 2);
    assert!(matches!(
        pred.unstandardize(&[0.0], &[1.0]),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        pred.unstandardize(&[0.0, 0.0], &[1.0, 0.0]),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        pred.unstandardize(&[f64::NAN, 0.0], &[1.0, 1.0]),
        Err(Error::Config(_))
    ));
}

#[test]
fn classification_accuracy_and_nll() {
    let pred = Predictive::single_gaussian(Mat::zeros(4, 1), Mat::from_fn(4, 1, |_, _| 1.0))
        .unwrap()
        .with_class_probs(Mat::from_fn(4, 3, |i, c| match (i, c) {
            (0, 0) | (1, 1) | (2, 2) => 0.8,
            (3, _) => 1.0 / 3.0,
            _ => 0.1,
        }))
        .unwrap();
    let labels = [0, 1, 0, 0];
    // Point 3 is a three-way tie: the lowest class (0) wins, so 3 of 4 are correct.
    assert_eq!(accuracy(&pred, &labels).unwrap(), 0.75);
    let expected = -(0.8f64.ln() + 0.8f64.ln() + 0.1f64.ln() + (1.0f64 / 3.0).ln()) / 4.0;
    assert!((class_nll(&pred, &labels).unwrap() - expected).abs() < 1e-15);
    assert!(matches!(accuracy(&pred, &[0, 1]), Err(Error::Shape { .. })));
    assert!(matches!(
        class_nll(&pred, &[0, 1, 3, 0]),
        Err(Error::Config(_))
    ));
    let plain =
        Predictive::single_gaussian(Mat::zeros(1, 1), Mat::from_fn(1, 1, |_, _| 1.0)).unwrap();
    assert!(matches!(accuracy(&plain, &[0]), Err(Error::Unsupported(_))));
    // Underflowed probabilities give a finite NLL.
    let sure = Predictive::single_gaussian(Mat::zeros(1, 1), Mat::from_fn(1, 1, |_, _| 1.0))
        .unwrap()
        .with_class_probs(Mat::from_fn(1, 2, |_, c| c as f64))
        .unwrap();
    assert!(class_nll(&sure, &[0]).unwrap().is_finite());
    assert_eq!(
        labels_from_targets(col(&[0.0, 2.0, 1.0]).as_ref()).unwrap(),
        vec![0, 2, 1]
    );
    assert!(matches!(
        labels_from_targets(col(&[-1.0]).as_ref()),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        labels_from_targets(col(&[0.5]).as_ref()),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        labels_from_targets(Mat::zeros(2, 2).as_ref()),
        Err(Error::Shape { .. })
    ));
}
