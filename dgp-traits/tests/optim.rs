//! Adam and L-BFGS on problems with known optima.

use dgp_core::Error;
use dgp_traits::optim::{
    Adam, AdamConfig, AdamState, LbfgsConfig, LrSchedule, lbfgs_maximise, lbfgs_minimise,
};
use dgp_traits::testing::assert_same_on_one_and_two_threads;

/// Rosenbrock `(1 − x)² + 100 (y − x²)²`, minimum 0 at (1, 1).
fn rosenbrock(p: &[f64]) -> (f64, Vec<f64>) {
    let (x, y) = (p[0], p[1]);
    let f = (1.0 - x).powi(2) + 100.0 * (y - x * x).powi(2);
    let g = vec![
        -2.0 * (1.0 - x) - 400.0 * x * (y - x * x),
        200.0 * (y - x * x),
    ];
    (f, g)
}

/// `Σ a_i (x_i − c_i)²` with condition number 1e4.
fn quadratic(p: &[f64]) -> (f64, Vec<f64>) {
    let n = p.len();
    let mut f = 0.0;
    let mut g = vec![0.0; n];
    for i in 0..n {
        let a = 10f64.powf(4.0 * i as f64 / (n - 1) as f64);
        let c = (i as f64) * 0.3 - 1.0;
        f += a * (p[i] - c).powi(2);
        g[i] = 2.0 * a * (p[i] - c);
    }
    (f, g)
}

fn quadratic_optimum(n: usize) -> Vec<f64> {
    (0..n).map(|i| (i as f64) * 0.3 - 1.0).collect()
}

// ---------------------------------------------------------------------------------------
// Adam
// ---------------------------------------------------------------------------------------

#[test]
fn adam_first_step_is_lr_times_sign_of_gradient() {
    let grads = [3.7, -1e-6, 250.0, -0.02, 1e-100];
    for lr in [0.1, 0.003] {
        let cfg = AdamConfig {
            lr,
            eps: 0.0,
            ..AdamConfig::default()
        };
        let x0 = vec![0.5; grads.len()];
        let mut x = x0.clone();
        Adam::new(cfg.clone(), grads.len())
            .unwrap()
            .descend(&mut x, &grads)
            .unwrap();
        let mut z = x0.clone();
        Adam::new(cfg, grads.len())
            .unwrap()
            .ascend(&mut z, &grads)
            .unwrap();
        for i in 0..grads.len() {
            let step = -lr * grads[i].signum();
            assert!(
                ((x[i] - x0[i]) - step).abs() <= 1e-15,
                "{i}: {} vs {step}",
                x[i] - x0[i]
            );
            assert!(((z[i] - x0[i]) + step).abs() <= 1e-15);
        }
    }
    // With the default ε the step is lr·|g|/(|g| + ε).
    let mut x = vec![0.0];
    Adam::new(AdamConfig::with_lr(0.01), 1)
        .unwrap()
        .descend(&mut x, &[2e-3])
        .unwrap();
    assert!((x[0] + 0.01 * 2e-3 / (2e-3 + 1e-8)).abs() < 1e-17);
}

#[test]
fn adam_converges_on_a_quadratic() {
    let n = 6;
    let cfg = AdamConfig {
        lr: 0.05,
        schedule: LrSchedule::Exponential {
            gamma: 0.5,
            every: 1000,
            staircase: true,
        },
        ..AdamConfig::default()
    };
    let mut adam = Adam::new(cfg, n).unwrap();
    let mut x = vec![2.0; n];
    for _ in 0..12_000 {
        let (_, g) = quadratic(&x);
        adam.descend(&mut x, &g).unwrap();
    }
    for (xi, ci) in x.iter().zip(quadratic_optimum(n)) {
        assert!((xi - ci).abs() < 1e-6, "{xi} vs {ci}");
    }
}

#[test]
fn adam_converges_on_rosenbrock() {
    let cfg = AdamConfig {
        lr: 0.02,
        schedule: LrSchedule::Exponential {
            gamma: 0.5,
            every: 3000,
            staircase: true,
        },
        ..AdamConfig::default()
    };
    let mut adam = Adam::new(cfg, 2).unwrap();
    let mut x = vec![-1.2, 1.0];
    for _ in 0..30_000 {
        let (_, g) = rosenbrock(&x);
        adam.descend(&mut x, &g).unwrap();
    }
    assert!(
        (x[0] - 1.0).abs() < 1e-4 && (x[1] - 1.0).abs() < 1e-4,
        "{x:?}"
    );
    assert!(rosenbrock(&x).0 < 1e-8);
}

#[test]
fn adam_ascend_on_f_equals_descend_on_minus_f() {
    let mut a = Adam::new(AdamConfig::with_lr(0.01), 2).unwrap();
    let mut b = a.clone();
    let (mut x, mut z) = (vec![-1.2, 1.0], vec![-1.2, 1.0]);
    for _ in 0..200 {
        let (_, g) = rosenbrock(&x);
        a.descend(&mut x, &g).unwrap();
        let (_, g) = rosenbrock(&z);
        let neg: Vec<f64> = g.iter().map(|v| -v).collect();
        b.ascend(&mut z, &neg).unwrap();
    }
    assert_eq!(x, z);
}

#[test]
fn adam_is_deterministic_and_checkpoints_resume_exactly() {
    let cfg = AdamConfig {
        lr: 0.01,
        schedule: LrSchedule::StepDrops {
            milestones: vec![30, 60],
            factor: 0.1,
        },
        ..AdamConfig::default()
    };
    let run = |steps: usize, adam: &mut Adam, x: &mut Vec<f64>| {
        for _ in 0..steps {
            let (_, g) = rosenbrock(x);
            adam.descend(x, &g).unwrap();
        }
    };
    let mut a = Adam::new(cfg.clone(), 2).unwrap();
    let mut xa = vec![-1.2, 1.0];
    run(100, &mut a, &mut xa);
    let mut b = Adam::new(cfg, 2).unwrap();
    let mut xb = vec![-1.2, 1.0];
    run(45, &mut b, &mut xb);
    // Resuming from a copied state is exact.
    let state: AdamState = b.state().clone();
    let mut c = Adam::from_parts(b.config().clone(), state).unwrap();
    let mut xc = xb.clone();
    run(55, &mut c, &mut xc);
    assert_eq!(xa, xc);
    assert_eq!(c.steps(), 100);
    // Through JSON the state survives to within one ulp (bit-exact once serde_json's
    // `float_roundtrip` feature is enabled for the workspace).
    let json = serde_json::to_string(&b).unwrap();
    let d: Adam = serde_json::from_str(&json).unwrap();
    assert_eq!(d.config(), b.config());
    assert_eq!(d.steps(), b.steps());
    for (u, w) in [(&d.state().m, &b.state().m), (&d.state().v, &b.state().v)] {
        for (p, q) in u.iter().zip(w.iter()) {
            assert!((p - q).abs() <= f64::EPSILON * q.abs(), "{p} vs {q}");
        }
    }
}

#[test]
fn lr_schedules() {
    let stair = LrSchedule::Exponential {
        gamma: 0.98,
        every: 1000,
        staircase: true,
    };
    assert_eq!(stair.factor(0), 1.0);
    assert_eq!(stair.factor(999), 1.0);
    assert_eq!(stair.factor(1000), 0.98);
    assert!((stair.factor(2500) - 0.98 * 0.98).abs() < 1e-16);
    let smooth = LrSchedule::Exponential {
        gamma: 0.5,
        every: 10,
        staircase: false,
    };
    assert!((smooth.factor(5) - 0.5f64.sqrt()).abs() < 1e-16);
    let drops = LrSchedule::StepDrops {
        milestones: vec![150, 20, 300],
        factor: 0.1,
    };
    assert_eq!(drops.factor(19), 1.0);
    assert_eq!(drops.factor(20), 0.1);
    assert!((drops.factor(150) - 0.01).abs() < 1e-17);
    assert!((drops.factor(10_000) - 0.001).abs() < 1e-17);
    let mut adam = Adam::new(
        AdamConfig {
            lr: 0.5,
            schedule: drops,
            ..AdamConfig::default()
        },
        1,
    )
    .unwrap();
    let mut x = vec![0.0];
    for _ in 0..20 {
        adam.descend(&mut x, &[1.0]).unwrap();
    }
    assert_eq!(adam.current_lr(), 0.05);
    assert!(
        LrSchedule::Exponential {
            gamma: 1.5,
            every: 1,
            staircase: true
        }
        .validate()
        .is_err()
    );
    let json = serde_json::to_string(&stair).unwrap();
    assert_eq!(serde_json::from_str::<LrSchedule>(&json).unwrap(), stair);
}

#[test]
fn adam_rejects_bad_input_without_touching_parameters() {
    let mut adam = Adam::new(AdamConfig::default(), 2).unwrap();
    let mut x = vec![1.0, 2.0];
    assert!(matches!(
        adam.descend(&mut x, &[1.0]),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        adam.descend(&mut x, &[1.0, f64::NAN]),
        Err(Error::NonFinite { row: 1, .. })
    ));
    assert_eq!(x, vec![1.0, 2.0]);
    assert_eq!(adam.steps(), 0);
    assert!(Adam::new(AdamConfig::with_lr(-1.0), 2).is_err());
    assert!(
        Adam::new(
            AdamConfig {
                beta1: 1.0,
                ..AdamConfig::default()
            },
            2
        )
        .is_err()
    );
}

// ---------------------------------------------------------------------------------------
// L-BFGS
// ---------------------------------------------------------------------------------------

#[test]
fn lbfgs_reaches_the_rosenbrock_optimum() {
    let cfg = LbfgsConfig {
        tol_grad: 1e-12,
        ..LbfgsConfig::default()
    };
    let r = lbfgs_minimise(|x: &[f64]| Ok(rosenbrock(x)), &[-1.2, 1.0], &cfg).unwrap();
    assert!(r.converged, "{r:?}");
    assert!(r.value <= 1e-20, "{r:?}");
    assert!(
        (r.x[0] - 1.0).abs() <= 1e-10 && (r.x[1] - 1.0).abs() <= 1e-10,
        "{r:?}"
    );
    assert!(r.iterations < 200);
}

#[test]
fn lbfgs_first_trial_step_has_at_most_unit_length() {
    // f = 500 (x − 1)² from x0 = (0, 0): ‖∇f(x0)‖ = 1000. An unscaled first steepest-descent
    // trial would land 1000 away; as in L-BFGS-B the first trial has length ≤ 1.
    let mut seen: Vec<Vec<f64>> = Vec::new();
    let r = lbfgs_minimise(
        |x: &[f64]| {
            seen.push(x.to_vec());
            let f = 500.0 * ((x[0] - 1.0).powi(2) + (x[1] - 1.0).powi(2));
            Ok((f, vec![1000.0 * (x[0] - 1.0), 1000.0 * (x[1] - 1.0)]))
        },
        &[0.0, 0.0],
        &LbfgsConfig::default(),
    )
    .unwrap();
    assert!(r.converged && (r.x[0] - 1.0).abs() < 1e-8, "{r:?}");
    let first = seen.iter().find(|x| x[0] != 0.0 || x[1] != 0.0).unwrap();
    let len = first[0].hypot(first[1]);
    assert!(
        len <= 1.0 + 1e-12,
        "first trial point {first:?} at distance {len}"
    );
}

#[test]
fn lbfgs_minimises_an_ill_conditioned_quadratic() {
    let n = 10;
    // The optimum value is 0, so disable the absolute cost-change test (machine epsilon
    // by default), which would stop as soon as f < 1e-16.
    let cfg = LbfgsConfig {
        tol_grad: 1e-10,
        tol_cost: 0.0,
        ..LbfgsConfig::default()
    };
    let r = lbfgs_minimise(|x: &[f64]| Ok(quadratic(x)), &vec![3.0; n], &cfg).unwrap();
    assert!(r.converged, "{r:?}");
    for (xi, ci) in r.x.iter().zip(quadratic_optimum(n)) {
        assert!((xi - ci).abs() < 1e-10, "{xi} vs {ci}");
    }
    assert!(r.grad_norm <= 1e-10);
}

#[test]
fn lbfgs_maximise_flips_the_sign() {
    let r = lbfgs_maximise(
        |x: &[f64]| Ok((-(x[0] - 2.0).powi(2) + 5.0, vec![-2.0 * (x[0] - 2.0)])),
        &[-7.0],
        &LbfgsConfig::default(),
    )
    .unwrap();
    assert!(r.converged);
    assert!((r.x[0] - 2.0).abs() < 1e-8);
    assert!((r.value - 5.0).abs() < 1e-12);
}

#[test]
fn lbfgs_recovers_from_non_finite_trial_points() {
    // x² − ln(x − 4.5) is NaN for x < 4.5; the first trial step (unit length, gradient 8 at
    // x = 5) lands at x = 4. The minimum is at x = (4.5 + √22.25) / 2.
    let f = |x: &[f64]| {
        Ok((
            x[0] * x[0] - (x[0] - 4.5).ln(),
            vec![2.0 * x[0] - 1.0 / (x[0] - 4.5)],
        ))
    };
    let r = lbfgs_minimise(f, &[5.0], &LbfgsConfig::default()).unwrap();
    assert!(r.converged, "{r:?}");
    assert!(r.restarts >= 1, "{r:?}");
    let opt = (4.5 + 22.25f64.sqrt()) / 2.0;
    assert!((r.x[0] - opt).abs() < 1e-6, "{r:?}");
}

#[test]
fn lbfgs_errors_instead_of_panicking() {
    // Non-finite at the start.
    let r = lbfgs_minimise(
        |_: &[f64]| Ok((f64::NAN, vec![0.0])),
        &[1.0],
        &LbfgsConfig::default(),
    );
    assert!(matches!(r, Err(Error::Numerical(_))));
    // Non-finite starting point.
    let r = lbfgs_minimise(
        |x: &[f64]| Ok((x[0], vec![1.0])),
        &[f64::INFINITY],
        &LbfgsConfig::default(),
    );
    assert!(matches!(r, Err(Error::NonFinite { .. })));
    // Objective that becomes non-finite everywhere except the start: no recovery possible.
    let r = lbfgs_minimise(
        |x: &[f64]| {
            if x[0] == 1.0 {
                Ok((1.0, vec![1.0]))
            } else {
                Ok((f64::INFINITY, vec![1.0]))
            }
        },
        &[1.0],
        &LbfgsConfig::default(),
    );
    assert!(matches!(r, Err(Error::Numerical(_))), "{r:?}");
    // User errors pass through unchanged.
    let mut calls = 0;
    let r = lbfgs_minimise(
        |x: &[f64]| {
            calls += 1;
            if calls > 3 {
                Err(Error::config("test", "stop"))
            } else {
                Ok(rosenbrock(x))
            }
        },
        &[-1.2, 1.0],
        &LbfgsConfig::default(),
    );
    assert!(
        matches!(r, Err(Error::Config(ref c)) if c.message == "stop"),
        "{r:?}"
    );
    // Wrong gradient length.
    let r = lbfgs_minimise(
        |_: &[f64]| Ok((0.0, vec![0.0])),
        &[1.0, 2.0],
        &LbfgsConfig::default(),
    );
    assert!(matches!(r, Err(Error::Shape { .. })));
    // Empty parameter vector and invalid config.
    assert!(lbfgs_minimise(|_: &[f64]| Ok((0.0, vec![])), &[], &LbfgsConfig::default()).is_err());
    let bad = LbfgsConfig {
        memory: 0,
        ..LbfgsConfig::default()
    };
    assert!(lbfgs_minimise(|x: &[f64]| Ok(rosenbrock(x)), &[0.0, 0.0], &bad).is_err());
}

#[test]
fn lbfgs_stops_at_max_iters() {
    let cfg = LbfgsConfig {
        max_iters: 5,
        tol_grad: 0.0,
        ..LbfgsConfig::default()
    };
    let r = lbfgs_minimise(|x: &[f64]| Ok(rosenbrock(x)), &[-1.2, 1.0], &cfg).unwrap();
    assert!(!r.converged);
    assert_eq!(r.iterations, 5);
    assert!(r.value < rosenbrock(&[-1.2, 1.0]).0);
}

/// One Adam update of one entry, written out as in Kingma & Ba's Algorithm 1 with the
/// bias corrections folded into the step as `Adam` folds them.
fn adam_entry(cfg: &AdamConfig, t: u64, sign: f64, p: &mut f64, g: f64, m: &mut f64, v: &mut f64) {
    let t1 = (t + 1) as f64;
    let (bc1, bc2) = (1.0 - cfg.beta1.powf(t1), 1.0 - cfg.beta2.powf(t1));
    *m = cfg.beta1 * *m + (1.0 - cfg.beta1) * g;
    *v = cfg.beta2 * *v + (1.0 - cfg.beta2) * g * g;
    let denom = (*v * (1.0 / bc2)).sqrt() + cfg.eps;
    *p += (sign * cfg.lr / bc1) * *m / denom;
}

#[test]
fn adam_ranges_long_enough_to_split_match_the_entrywise_rule_at_any_thread_count() {
    // Ranges of 50 000 and 7 entries (the first is updated in parallel blocks), a gap of
    // 11 entries that must stay untouched, and gradients of mixed sign and scale.
    let n = 50_000 + 11 + 7;
    let ranges = [0..50_000, 50_011..n];
    let cfg = AdamConfig::default();
    let grad_at = |s: usize| -> Vec<f64> {
        (0..n)
            .map(|i| ((i * 7919 + s * 104_729) % 1000) as f64 / 250.0 - 2.0)
            .collect()
    };
    let run = || {
        let mut adam = Adam::new(cfg.clone(), n).unwrap();
        let mut p: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
        for s in 0..3 {
            adam.ascend_ranges(&mut p, &grad_at(s), &ranges).unwrap();
        }
        let state = adam.state().clone();
        (p, state.m, state.v, state.step)
    };
    assert_same_on_one_and_two_threads(run);
    let (p1, m1, v1, steps) = run();
    assert_eq!(steps, 3);
    // The entrywise reference.
    let mut p: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
    let (mut m, mut v) = (vec![0.0; n], vec![0.0; n]);
    for s in 0..3u64 {
        let g = grad_at(s as usize);
        for r in &ranges {
            for i in r.clone() {
                adam_entry(&cfg, s, 1.0, &mut p[i], g[i], &mut m[i], &mut v[i]);
            }
        }
    }
    assert_eq!(p1, p);
    assert_eq!((m1, v1), (m, v));
    assert!((50_000..50_011).all(|i| p1[i] == (i as f64).sin()));
}
