//! The two small-data options of the DSPP (issue 18): inducing inputs kept at their
//! initial values on small training sets (`train_inducing_min_ratio`) and the held-out
//! variance calibration (`calibrate_variance`).

use dgp_data::Dataset;
use dgp_dspp::{DsppConfig, DsppModel};
use dgp_traits::calibration::scale_variances;
use dgp_traits::model::{FitConfig, FitHooks, Model, Objective, PredictConfig};
use dgp_traits::params::Role;
use dgp_traits::testing::toy_regression;
use dgp_traits::train::{EarlyStopping, heldout_split};

fn small_cfg() -> DsppConfig {
    DsppConfig {
        num_inducing: 6,
        hidden_width: 2,
        sites: 4,
        learning_rate: 0.05,
        ..Default::default()
    }
}

fn fit_cfg() -> FitConfig {
    FitConfig {
        steps: 40,
        seed: 3,
        ..Default::default()
    }
}

fn z_blocks(m: &DsppModel) -> Vec<(String, Role, Vec<f64>)> {
    m.params()
        .blocks()
        .iter()
        .filter(|b| b.name.ends_with(".z"))
        .map(|b| {
            let v = &b.value;
            let flat = (0..v.nrows())
                .flat_map(|i| (0..v.ncols()).map(move |j| v[(i, j)]))
                .collect();
            (b.name.clone(), b.role, flat)
        })
        .collect()
}

#[test]
fn frozen_inducing_inputs_stay_where_they_started() {
    let data = toy_regression(60, 2, 1.0, 5);
    // 60 rows, M = 6: trained from a ratio of 10 down, fixed above.
    for (ratio, train) in [(11.0, false), (10.0, true), (0.0, true)] {
        let cfg = DsppConfig {
            train_inducing_min_ratio: ratio,
            early_stopping: None,
            ..small_cfg()
        };
        let mut model = DsppModel::new(cfg, &data).unwrap();
        let before = z_blocks(&model);
        // Both layers have inducing inputs.
        assert_eq!(before.len(), 3, "{before:?}");
        model.fit(&data, &fit_cfg(), &mut FitHooks::none()).unwrap();
        let after = z_blocks(&model);
        for ((name, role, b), (_, _, a)) in before.iter().zip(&after) {
            if train {
                assert_eq!(*role, Role::Optimised, "{name}");
                assert_ne!(a, b, "{name} should move when trained");
            } else {
                assert_eq!(*role, Role::Fixed, "{name}");
                assert_eq!(a, b, "{name} must stay at its initial value");
            }
        }
    }
}

/// The held-out rows of a fit: the early-stopping split of `data` with the fit's seed.
fn held_out(data: &Dataset, es: &EarlyStopping, seed: u64) -> Dataset {
    let (_, val) = heldout_split(data.n(), es.fraction, seed).unwrap();
    data.select_rows(&val).unwrap()
}

#[test]
fn calibration_scales_every_variance_by_the_held_out_optimum() {
    let data = toy_regression(90, 2, 1.0, 8);
    let es = EarlyStopping::default();
    let fit = fit_cfg();
    let train = |calibrate: bool| {
        let cfg = DsppConfig {
            calibrate_variance: calibrate,
            early_stopping: Some(es),
            // The calibration turns the refit off; without it here too, both models
            // have the same parameters.
            refit_all_rows: false,
            ..small_cfg()
        };
        let mut m = DsppModel::new(cfg, &data).unwrap();
        m.fit(&data, &fit, &mut FitHooks::none()).unwrap();
        m
    };
    let raw = train(false);
    let cal = train(true);
    assert_eq!(raw.variance_scale(), 1.0);
    let c = cal.variance_scale();
    assert!(c.is_finite() && c > 0.0 && c != 1.0, "scale {c}");

    // Calibration is post-hoc: same parameters, means unchanged, variances times c.
    let x = data.x();
    let (pr, pc) = (
        raw.predict(x, &PredictConfig::default()).unwrap(),
        cal.predict(x, &PredictConfig::default()).unwrap(),
    );
    assert_eq!(pr.means(), pc.means());
    assert_eq!(pr.weights(), pc.weights());
    let (vr, vc) = (&pr.variances()[0], &pc.variances()[0]);
    for i in 0..vr.nrows() {
        for k in 0..vr.ncols() {
            let rel = (vc[(i, k)] - c * vr[(i, k)]).abs() / (c * vr[(i, k)]);
            assert!(
                rel < 1e-14,
                "({i}, {k}): {} vs {}",
                vc[(i, k)],
                c * vr[(i, k)]
            );
        }
    }

    // c maximises the held-out rows' log density.
    let val = held_out(&data, &es, fit.seed);
    let pv = cal.predict(val.x(), &PredictConfig::default()).unwrap();
    let total = |f: f64| -> f64 {
        scale_variances(&pv, f)
            .unwrap()
            .log_density(val.y())
            .unwrap()
            .iter()
            .sum()
    };
    assert!(total(1.0) > total(1.02) && total(1.0) > total(1.0 / 1.02));

    // The exact log density agrees with the calibrated predictive.
    let ld = cal.log_density(val.x(), val.y()).unwrap();
    let lp = pv.log_density(val.y()).unwrap();
    for (a, b) in ld.iter().zip(&lp) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

#[test]
fn calibration_needs_held_out_rows_and_survives_checkpoints() {
    let data = toy_regression(90, 2, 1.0, 9);
    let no_rows = DsppConfig {
        calibrate_variance: true,
        early_stopping: None,
        ..small_cfg()
    };
    let mut m = DsppModel::new(no_rows, &data).unwrap();
    m.fit(&data, &fit_cfg(), &mut FitHooks::none()).unwrap();
    assert_eq!(m.variance_scale(), 1.0, "no held-out rows, no calibration");

    let cfg = DsppConfig {
        calibrate_variance: true,
        ..small_cfg()
    };
    let mut m = DsppModel::new(cfg, &data).unwrap();
    m.fit(&data, &fit_cfg(), &mut FitHooks::none()).unwrap();
    let back = DsppModel::from_json(&m.to_json().unwrap()).unwrap();
    assert_eq!(back.variance_scale(), m.variance_scale());
    // Checkpoints written before the field existed load uncalibrated.
    let mut v: serde_json::Value = serde_json::from_str(&m.to_json().unwrap()).unwrap();
    let removed = v
        .as_object_mut()
        .and_then(|o| o.get_mut("model"))
        .and_then(|o| o.as_object_mut())
        .and_then(|o| o.remove("variance_scale"))
        .or_else(|| v.as_object_mut().and_then(|o| o.remove("variance_scale")));
    assert!(removed.is_some(), "variance_scale not found in {v}");
    let old = DsppModel::from_json(&v.to_string()).unwrap();
    assert_eq!(old.variance_scale(), 1.0);
}

#[test]
fn the_model_description_says_whether_z_is_trained() {
    let data = toy_regression(60, 2, 1.0, 5);
    for (ratio, word) in [(11.0, "Z=fixed"), (0.0, "Z=trained")] {
        let cfg = DsppConfig {
            train_inducing_min_ratio: ratio,
            ..small_cfg()
        };
        let dspp = DsppModel::new(cfg.clone(), &data).unwrap();
        assert!(dspp.describe().contains(word), "{}", dspp.describe());
        let ppgpr = dgp_dspp::PpgprModel::new(cfg, &data).unwrap();
        assert!(ppgpr.describe().contains(word), "{}", ppgpr.describe());
    }
}

#[test]
fn refit_trains_the_start_on_every_row_for_the_kept_steps() {
    let data = toy_regression(80, 2, 1.0, 9);
    let cfg = DsppConfig {
        refit_all_rows: true,
        // A constant learning rate: the refit's schedule is the main loop's, and without
        // drops the plain fit below has the same one for any number of steps.
        lr_drops: dgp_dspp::LrDrops {
            milestones: vec![],
            factor: 1.0,
        },
        ..small_cfg()
    };
    let fit = FitConfig {
        steps: 300,
        ..fit_cfg()
    };
    let mut refit = DsppModel::new(cfg.clone(), &data).unwrap();
    let report = refit.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    let summary = refit.fit_summary().unwrap().clone();
    let kept = summary.best_step.unwrap();
    assert!(kept > 0 && kept < summary.steps, "{summary:?}");
    assert_eq!(report.steps, summary.steps + kept);
    assert!(refit.describe().contains(&format!("refit_all_rows={kept}")));
    // The same start, trained on all 80 rows for `kept` steps without held-out rows.
    let mut plain = DsppModel::new(
        DsppConfig {
            refit_all_rows: false,
            early_stopping: None,
            ..cfg.clone()
        },
        &data,
    )
    .unwrap();
    let plain_fit = FitConfig {
        steps: kept,
        ..fit.clone()
    };
    plain.fit(&data, &plain_fit, &mut FitHooks::none()).unwrap();
    assert_eq!(refit.params().flat(), plain.params().flat());
    // With minibatches, k steps on more rows are fewer passes over them: no refit.
    let mut mini = DsppModel::new(cfg.clone(), &data).unwrap();
    let r = mini
        .fit(
            &data,
            &FitConfig {
                batch_size: 32,
                ..fit.clone()
            },
            &mut FitHooks::none(),
        )
        .unwrap();
    assert_eq!(r.steps, mini.fit_summary().unwrap().steps);
    assert!(!mini.describe().contains("refit_all_rows"));
    // With the variance calibration on, the held-out rows stay unseen: no refit.
    let mut calibrated = DsppModel::new(
        DsppConfig {
            calibrate_variance: true,
            ..cfg.clone()
        },
        &data,
    )
    .unwrap();
    let r = calibrated.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    assert_eq!(r.steps, calibrated.fit_summary().unwrap().steps);
    assert!(!calibrated.describe().contains("refit_all_rows"));
    // Without held-out rows (early stopping off) there is nothing to refit.
    let mut off = DsppModel::new(
        DsppConfig {
            early_stopping: None,
            ..cfg
        },
        &data,
    )
    .unwrap();
    let r = off
        .fit(
            &data,
            &FitConfig {
                steps: 30,
                ..fit_cfg()
            },
            &mut FitHooks::none(),
        )
        .unwrap();
    assert_eq!(r.steps, 30);
}

/// M = min(num_inducing, N): on 12 rows with 30 inducing points asked for, the first
/// layer has 12 inducing inputs per GP, the configuration holds M = 12 and a saved model
/// loads with it.
#[test]
fn inducing_points_are_capped_at_the_training_rows() {
    let data = toy_regression(12, 2, 1.5, 3);
    let cfg = DsppConfig {
        num_inducing: 30,
        ..small_cfg()
    };
    let model = DsppModel::new(cfg, &data).unwrap();
    assert_eq!(model.config().num_inducing, 12);
    for block in &model.layers()[0].blocks {
        assert_eq!(model.params().get(block.layer.z).nrows(), 12);
    }
    let json = model.to_json().unwrap();
    assert_eq!(
        DsppModel::from_json(&json).unwrap().config().num_inducing,
        12
    );
}
