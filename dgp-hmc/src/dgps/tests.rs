//! DGPS tests (issue 15 test 5 and the backend kit): fixed-CRN determinism and the
//! finite-difference gradient of J over every parameter block (L = 1, 2, 3); the
//! one-layer K = 1 objective against an independent dense FITC/MAP computation; config
//! errors; model JSON round trips; 1 vs 2 threads; restarts keep the best training J.

use super::*;
use dgp_core::rng::seeded;
use dgp_data::Dataset;
use dgp_traits::backend::{Backend, CommonSettings, Settings};
use dgp_traits::model::{Batch, FitConfig, FitHooks, Model, Objective, PredictConfig};
use dgp_traits::tape::Tape;
use dgp_traits::testing::{
    assert_config_errors, assert_fit_same_on_one_and_two_threads, assert_model_json_round_trip,
    assert_objective_gradient, assert_predict_rejects_bad_inputs, perturb, toy_regression,
};

fn tiny(layers: usize) -> DgpsConfig {
    DgpsConfig {
        layers,
        num_inducing: 4,
        samples: 3,
        restarts: 2,
        max_iters: 15,
        ..Default::default()
    }
}

fn value(model: &DgpsModel, data: &Dataset, rng_seed: u64) -> (f64, Vec<f64>) {
    let batch = Batch::new(data.x(), data.y(), data.n()).unwrap();
    model
        .value_and_grad(&mut Tape::new(), &batch, &mut seeded(rng_seed))
        .unwrap()
}

#[test]
fn objective_is_deterministic_for_fixed_common_random_numbers() {
    let data = toy_regression(25, 2, 1.0, 3);
    let mut model = DgpsModel::new(
        DgpsConfig {
            hidden_width: Some(2),
            ..tiny(3)
        },
        &data,
    )
    .unwrap();
    perturb(&mut model, 0.1, 4);
    model.set_common_random_numbers(11, 2);
    // The rng handed to the objective plays no role: the K paths come from the CRNs.
    let a = value(&model, &data, 1);
    let b = value(&model, &data, 2);
    assert_eq!(a, b);
    model.set_common_random_numbers(11, 3);
    let c = value(&model, &data, 1);
    assert_ne!(a.0, c.0, "other common random numbers must give another J");
}

#[test]
fn objective_gradient_matches_finite_differences_every_block() {
    let data = toy_regression(20, 2, 1.0, 5);
    for (layers, width) in [(1, 1), (2, 1), (2, 2), (3, 2)] {
        let mut model = DgpsModel::new(
            DgpsConfig {
                hidden_width: Some(width),
                ard: layers != 2,
                ..tiny(layers)
            },
            &data,
        )
        .unwrap();
        perturb(&mut model, 0.2, 9);
        model.set_common_random_numbers(3, 0);
        let batch = Batch::new(data.x(), data.y(), data.n()).unwrap();
        assert_objective_gradient(
            &model,
            &batch,
            77,
            1e-6,
            format_args!("L={layers} W={width}"),
        );
    }
}

/// Lower Cholesky factor of a dense SPD matrix (plain loops).
fn dense_chol(a: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                l[i][i] = (a[i][i] - s).sqrt();
            } else {
                l[i][j] = (a[i][j] - s) / l[j][j];
            }
        }
    }
    l
}

/// Solves L z = b (forward substitution).
fn forward(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let mut z = vec![0.0; b.len()];
    for i in 0..b.len() {
        z[i] = (b[i] - (0..i).map(|k| l[i][k] * z[k]).sum::<f64>()) / l[i][i];
    }
    z
}

/// The exact one-layer FITC/MAP objective, written out densely: with
/// K = s_f² exp(−Σ(x−x')²/2ℓ²) + (s_n² + 10⁻⁶) I at the pseudo inputs,
/// Σ_n log N(y_n | k_nᵀK⁻¹ȳ, s_f² + s_n² − k_nᵀK⁻¹k_n) + log N(ȳ | 0, K).
fn dense_fitc_map(model: &DgpsModel, data: &Dataset) -> f64 {
    let unit = &model.layers()[0][0];
    let (sf2, sn2, ls) = unit.hyper_values(&model.params);
    let xbar = model.params.get(unit.xbar);
    let ybar: Vec<f64> = (0..xbar.nrows())
        .map(|i| model.params.get(unit.ybar)[(i, 0)])
        .collect();
    let d = xbar.ncols();
    let ell = |q: usize| ls[(0, if ls.ncols() == 1 { 0 } else { q })];
    let k = |a: &dyn Fn(usize) -> f64, b: &dyn Fn(usize) -> f64| {
        let s: f64 = (0..d).map(|q| (a(q) - b(q)).powi(2) / ell(q).powi(2)).sum();
        sf2 * (-0.5 * s).exp()
    };
    let m = xbar.nrows();
    let kmat: Vec<Vec<f64>> = (0..m)
        .map(|i| {
            (0..m)
                .map(|j| {
                    let v = k(&|q| xbar[(i, q)], &|q| xbar[(j, q)]);
                    if i == j { v + sn2 + 1e-6 } else { v }
                })
                .collect()
        })
        .collect();
    let l = dense_chol(&kmat);
    let z = forward(&l, &ybar);
    let ln2pi = (2.0 * std::f64::consts::PI).ln();
    let mut j = -0.5 * z.iter().map(|v| v * v).sum::<f64>()
        - (0..m).map(|i| l[i][i].ln()).sum::<f64>()
        - 0.5 * m as f64 * ln2pi;
    let (x, y) = (data.x(), data.y());
    for n in 0..data.n() {
        let kn: Vec<f64> = (0..m)
            .map(|i| k(&|q| xbar[(i, q)], &|q| x[(n, q)]))
            .collect();
        let a = forward(&l, &kn);
        let mu: f64 = a.iter().zip(&z).map(|(p, q)| p * q).sum();
        let var = sf2 + sn2 - a.iter().map(|v| v * v).sum::<f64>();
        j += -0.5 * (ln2pi + var.ln()) - 0.5 * (y[(n, 0)] - mu).powi(2) / var;
    }
    j
}

#[test]
fn one_layer_k1_equals_dense_fitc_map_objective() {
    let data = toy_regression(30, 2, 1.5, 8);
    for (ard, samples) in [(true, 1), (false, 1), (true, 7)] {
        let mut model = DgpsModel::new(
            DgpsConfig {
                ard,
                samples,
                num_inducing: 6,
                ..tiny(1)
            },
            &data,
        )
        .unwrap();
        perturb(&mut model, 0.3, 2);
        let (j, _) = value(&model, &data, 0);
        let dense = dense_fitc_map(&model, &data);
        assert!(
            (j - dense).abs() <= 1e-9 * dense.abs().max(1.0),
            "ard={ard} K={samples}: tape J {j} vs dense {dense}"
        );
    }
}

#[test]
fn config_errors_name_the_field() {
    let data = toy_regression(10, 1, 1.0, 0);
    let d = DgpsConfig::default();
    let cases: Vec<(DgpsConfig, &[&str])> = vec![
        (
            DgpsConfig {
                layers: 0,
                ..d.clone()
            },
            &["layers", "at least 1"],
        ),
        (
            DgpsConfig {
                num_inducing: 0,
                ..d.clone()
            },
            &["num_inducing"],
        ),
        (
            DgpsConfig {
                samples: 0,
                ..d.clone()
            },
            &["samples"],
        ),
        (
            DgpsConfig {
                restarts: 0,
                ..d.clone()
            },
            &["restarts"],
        ),
        (
            DgpsConfig {
                max_iters: 0,
                ..d.clone()
            },
            &["max_iters"],
        ),
        (
            DgpsConfig {
                hidden_width: Some(0),
                ..d.clone()
            },
            &["hidden_width"],
        ),
        (
            DgpsConfig {
                init_noise_variance: -1.0,
                ..d.clone()
            },
            &["init_noise_variance"],
        ),
        (
            DgpsConfig {
                init_signal_variance: f64::NAN,
                ..d.clone()
            },
            &["init_signal_variance"],
        ),
        (
            DgpsConfig {
                hidden_lengthscale_factor: 0.0,
                ..d.clone()
            },
            &["hidden_lengthscale_factor"],
        ),
        (
            DgpsConfig {
                jitter: -1e-6,
                ..d.clone()
            },
            &["jitter"],
        ),
    ];
    assert_config_errors(&cases, |c| DgpsModel::new(c, &data));
    let e = serde_json::from_str::<DgpsConfig>(r#"{"restart": 3}"#).unwrap_err();
    assert!(e.to_string().contains("restart"), "{e}");
    // Through the registration: an unknown key and a reserved one.
    let common = CommonSettings {
        preset: "default".into(),
        layers: 2,
        num_inducing: 10,
        hidden_width: None,
        train_samples: 10,
        predict_samples: 100,
        seed: 0,
        tune: false,
        learning_rate: None,
        lr_schedule: None,
    };
    let mut s = Settings::new();
    s.insert("restartz".into(), 3.into());
    let e = DGPS_BACKEND.check(&common, &s).unwrap_err().to_string();
    assert!(e.contains("restartz") && e.contains("restarts"), "{e}");
    let mut s = Settings::new();
    s.insert("samples".into(), 3.into());
    assert!(
        DGPS_BACKEND
            .check(&common, &s)
            .unwrap_err()
            .to_string()
            .contains("the common setting `train_samples`")
    );
    let mut s = Settings::new();
    s.insert("max_iters".into(), 0.into());
    assert!(
        DGPS_BACKEND
            .check(&common, &s)
            .unwrap_err()
            .to_string()
            .contains("max_iters")
    );
    assert!(DGPS_BACKEND.check(&common, &Settings::new()).is_ok());
}

#[test]
fn fit_improves_j_and_restarts_keep_the_best() {
    let data = toy_regression(30, 1, 1.0, 6);
    let cfg = DgpsConfig {
        restarts: 3,
        max_iters: 25,
        ..tiny(2)
    };
    let fit = FitConfig {
        seed: 4,
        ..FitConfig::default()
    };
    let mut model = DgpsModel::new(cfg.clone(), &data).unwrap();
    let report = model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    let kept = model.train_objective().unwrap();
    assert_eq!(report.final_objective, kept);
    // Each restart on its own: the kept J is their maximum, and restart r's J is higher
    // than at its initial point.
    let mut best = f64::NEG_INFINITY;
    for r in 0..3 {
        let mut single = DgpsModel::with_restart(
            DgpsConfig {
                restarts: 1,
                ..cfg.clone()
            },
            &data,
            r,
        )
        .unwrap();
        single.set_common_random_numbers(fit.seed, r);
        let (j0, _) = value(&single, &data, 0);
        // What `fit` runs for restart r: L-BFGS from initialisation stream r with the
        // common random numbers of stream r of the fit seed.
        let lbfgs = dgp_traits::optim::LbfgsConfig {
            max_iters: 25,
            ..Default::default()
        };
        let rep = dgp_traits::train::FullBatchLbfgs::new(lbfgs, fit.seed)
            .run(&mut single, &data, &mut FitHooks::none())
            .unwrap();
        assert!(
            rep.final_objective > j0,
            "restart {r}: {} ≤ {j0}",
            rep.final_objective
        );
        best = best.max(rep.final_objective);
    }
    assert_eq!(kept, best);
    assert!(model.kept_restart() < 3);
}

#[test]
fn fit_ends_with_interrupted_when_the_caller_asks() {
    let data = toy_regression(30, 1, 1.0, 6);
    let mut model = DgpsModel::new(
        DgpsConfig {
            restarts: 3,
            max_iters: 500,
            ..tiny(2)
        },
        &data,
    )
    .unwrap();
    let mut stop = dgp_traits::testing::StopAfter::new(4);
    let e = model
        .fit(&data, &FitConfig::default(), &mut FitHooks::all(&mut stop))
        .unwrap_err();
    assert!(matches!(e, dgp_core::Error::Interrupted(_)), "{e}");
    assert_eq!(
        stop.steps, 4,
        "no evaluation and no further restart after the request"
    );
}

#[test]
fn model_json_round_trip_and_bad_inputs() {
    let data = toy_regression(20, 2, 1.0, 1);
    let mut model = DgpsModel::new(tiny(2), &data).unwrap();
    model
        .fit(
            &data,
            &FitConfig {
                seed: 3,
                ..FitConfig::default()
            },
            &mut FitHooks::none(),
        )
        .unwrap();
    let cfg = PredictConfig {
        samples: 7,
        seed: 5,
    };
    assert_model_json_round_trip(&model, DgpsModel::from_json, data.x(), &cfg);
    assert_predict_rejects_bad_inputs(&model, 2);
    let pred = model.predict(data.x(), &cfg).unwrap();
    assert_eq!((pred.n_points(), pred.n_components()), (20, 7));
    assert!(
        pred.variances()[0]
            .col_iter()
            .all(|c| c.iter().all(|v| *v > 0.0))
    );
    // One layer: nothing to sample, one component.
    let one = DgpsModel::new(tiny(1), &data).unwrap();
    assert_eq!(one.predict(data.x(), &cfg).unwrap().n_components(), 1);
    let f = model
        .function_samples(data.x(), 4, 9)
        .unwrap()
        .expect("DGPS draws sample paths");
    assert_eq!((f.nrows(), f.ncols()), (20, 4));
    // An edited model file whose block shape no longer matches the configuration.
    let json = model.to_json().unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["config"]["num_inducing"] = 5.into();
    assert!(DgpsModel::from_json(&v.to_string()).is_err());
}

#[test]
fn same_result_on_one_and_two_threads() {
    let data = toy_regression(60, 2, 1.0, 2);
    let cfg = DgpsConfig {
        hidden_width: Some(2),
        ..tiny(2)
    };
    assert_fit_same_on_one_and_two_threads(
        || DgpsModel::new(cfg.clone(), &data),
        &data,
        &FitConfig {
            seed: 7,
            ..FitConfig::default()
        },
        &PredictConfig {
            samples: 150,
            seed: 3,
        },
    );
}

#[test]
fn streamed_rows_are_refused_before_training() {
    let data = toy_regression(30, 2, 1.0, 2);
    let model = DgpsModel::new(tiny(2), &data).unwrap();
    dgp_traits::testing::assert_refuses_streamed(model, &data, &FitConfig::default());
}

#[test]
fn fitted_model_round_trips_through_a_model_file() {
    let data = toy_regression(30, 2, 1.0, 2);
    let est = DgpsConfig {
        training: dgp_traits::fit::Training {
            steps: 20,
            ..Default::default()
        },
        ..tiny(2)
    };
    dgp_traits::testing::assert_fitted_round_trip(&est, &data, "sghmc");
}
