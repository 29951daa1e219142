//! The selection between a deep DSPP and its one-layer special case PPGPR on validation
//! rows ([`dgp_dspp::select_model`], the dspp backend's `select_one_layer`): its one-layer
//! candidates are exactly the ppgpr selection's, the winner is the best validation score,
//! the backend builds the PPGPR when it wins and says so, and the setting is checked.

use dgp_core::rng::{seeded, standard_normal};
use dgp_data::Dataset;
use dgp_dspp::{DSPP_BACKEND, DsppConfig, select_beta, select_model};
use dgp_traits::backend::{Backend, CommonSettings, Settings};
use dgp_traits::model::{FitConfig, FitHooks};
use dgp_traits::testing::toy_regression;
use faer::Mat;
use serde_json::Value;

fn base() -> DsppConfig {
    DsppConfig {
        num_inducing: 8,
        sites: 3,
        learning_rate: 0.05,
        ..Default::default()
    }
}

fn fit() -> FitConfig {
    FitConfig {
        steps: 40,
        ..Default::default()
    }
}

/// `y = sin(2 x₀) + sin(2 x₁) + sin(2 x₂) + 0.05 ε` on four N(0, 1) inputs: no single
/// direction of the inputs carries it, so a hidden layer of width 1 loses most of it.
fn additive(n: usize, seed: u64) -> Dataset {
    let mut rng = seeded(seed);
    let x = standard_normal(&mut rng, n, 4);
    let e = standard_normal(&mut rng, n, 1);
    let y = Mat::from_fn(n, 1, |i, _| {
        (0..3).map(|j| (2.0 * x[(i, j)]).sin()).sum::<f64>() + 0.05 * e[(i, 0)]
    });
    Dataset::new(x, y).unwrap()
}

fn common(hidden: usize) -> CommonSettings {
    CommonSettings {
        preset: "default".into(),
        layers: 2,
        num_inducing: 16,
        hidden_width: Some(hidden),
        train_samples: 3,
        predict_samples: 3,
        seed: 1,
        tune: true,
        learning_rate: Some(0.03),
        lr_schedule: None,
    }
}

#[test]
fn one_layer_candidates_are_the_ppgpr_selections_and_the_best_score_wins() {
    let data = toy_regression(80, 3, 1.0, 5);
    let (betas, widths) = ([0.01, 1.0], [2, 3]);
    let none = FitHooks::none();
    let sel = select_model(&data, &base(), &betas, &widths, true, &fit(), 0, &none).unwrap();
    assert_eq!(sel.scores.len(), 4 + 2);
    let (_, _, deep) = select_beta(&data, &base(), &betas, &widths, &fit(), 0, &none).unwrap();
    let (_, _, one) = select_beta(&data, &base().ppgpr(), &betas, &[3], &fit(), 0, &none).unwrap();
    assert_eq!(sel.scores[..4], deep[..]);
    assert_eq!(sel.scores[4..], one[..]);
    assert!(deep.iter().all(|s| s.layers == 2) && one.iter().all(|s| s.layers == 1));
    let best = sel
        .scores
        .iter()
        .min_by(|a, b| a.val_nll.total_cmp(&b.val_nll))
        .unwrap();
    assert_eq!(
        (best.layers, best.beta, best.width),
        (sel.layers, sel.beta, sel.width)
    );
    assert!(
        sel.describe()
            .starts_with(&format!("selected=L{}", sel.layers))
    );
    // Without the one-layer candidates: the deep grid alone.
    let deep_only = select_model(&data, &base(), &betas, &widths, false, &fit(), 0, &none).unwrap();
    assert_eq!(deep_only.scores, deep);
    assert_eq!(deep_only.layers, 2);
    // A one-layer base has no deeper model to fall back from: the flag changes nothing.
    let ppgpr = select_model(
        &data,
        &base().ppgpr(),
        &betas,
        &widths,
        true,
        &fit(),
        0,
        &none,
    );
    assert_eq!(ppgpr.unwrap().scores, one);
}

#[test]
fn the_backend_builds_the_ppgpr_when_it_validates_better_and_says_so() {
    // Width 1 on four inputs that matter: the validation rows prefer the one-layer model.
    let data = additive(150, 3);
    let fit = FitConfig {
        steps: 300,
        ..Default::default()
    };
    let none = FitHooks::none();
    let model = DSPP_BACKEND
        .build(&common(1), &Settings::new(), &fit, &data, &none)
        .unwrap();
    let d = model.describe();
    assert_eq!(model.backend(), "ppgpr", "{d}");
    assert!(d.contains("selected=L1") && d.contains("val NLL L2"), "{d}");
    // Switched off, the same selection keeps the two-layer model.
    let mut off = Settings::new();
    off.insert("select_one_layer".into(), Value::Bool(false));
    let model = DSPP_BACKEND
        .build(&common(1), &off, &fit, &data, &none)
        .unwrap();
    let d = model.describe();
    assert_eq!(model.backend(), "dspp", "{d}");
    assert!(d.contains("selected=L2") && !d.contains("L1"), "{d}");
}

#[test]
fn select_one_layer_must_be_a_boolean() {
    let mut s = Settings::new();
    s.insert("select_one_layer".into(), Value::from(3));
    let e = Backend::check(&DSPP_BACKEND, &common(2), &s)
        .unwrap_err()
        .to_string();
    assert!(e.contains("select_one_layer"), "{e}");
}
