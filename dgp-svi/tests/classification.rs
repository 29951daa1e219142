//! Classification with the DSVI backend: Bernoulli (probit, logit) and multiclass
//! (robust-max, softmax with K latent GPs in the last layer) on separable toy data reach
//! zero training error; finite-difference gradients of the whole objective; identical
//! results with one and two threads; checkpoints; typed errors for bad labels.

use dgp_core::{Error, LabelError};
use dgp_svi::prelude::*;
use dgp_traits::classification::{ClassMetrics, ClassProbs, class_labels};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::Batch;
use dgp_traits::testing::{
    assert_fit_same_on_one_and_two_threads, assert_model_json_round_trip,
    assert_objective_gradient, perturb, toy_binary, toy_blobs,
};

fn binary_toy(n: usize, seed: u64) -> Dataset {
    toy_binary(n, seed)
}

fn blobs(n: usize, seed: u64) -> Dataset {
    toy_blobs(n, seed)
}

fn train_error(
    lik: Likelihood,
    data: &Dataset,
    layers: usize,
    steps: usize,
) -> (f64, ClassMetrics) {
    let k = lik.num_classes().unwrap();
    let cfg = SviConfig {
        layers,
        num_inducing: 10,
        likelihood: lik,
        adam: AdamConfig::with_lr(0.02),
        ..Default::default()
    };
    let mut model = SviModel::new(cfg, data).unwrap();
    let fit = FitConfig {
        steps,
        ..Default::default()
    };
    model.fit(data, &fit, &mut FitHooks::none()).unwrap();
    let pred = model
        .predict(
            data.x(),
            &PredictConfig {
                samples: 5,
                seed: 3,
            },
        )
        .unwrap();
    let probs = ClassProbs::from_predictive(&pred).unwrap();
    assert_eq!(probs.n_classes(), k);
    let labels: Vec<usize> = if k == 2 {
        (0..data.n())
            .map(|i| usize::from(data.y()[(i, 0)] > 0.0))
            .collect()
    } else {
        class_labels(data.y(), k).unwrap()
    };
    let m = ClassMetrics::compute(&probs, &labels).unwrap();
    (m.error_rate, m)
}

#[test]
fn one_layer_bernoulli_reaches_zero_training_error_on_separable_data() {
    let data = binary_toy(80, 1);
    for lik in [Likelihood::probit(), Likelihood::logit()] {
        let (err, m) = train_error(lik.clone(), &data, 1, 300);
        assert_eq!(err, 0.0, "{lik:?}: {m:?}");
        assert!(m.auc.unwrap() == 1.0, "{lik:?}: {m:?}");
    }
}

#[test]
fn multiclass_reaches_zero_training_error_on_three_blobs() {
    let data = blobs(60, 2);
    for (lik, layers) in [
        (Likelihood::robust_max(3), 1),
        (Likelihood::softmax(3), 1),
        (Likelihood::robust_max(3), 2),
    ] {
        let (err, m) = train_error(lik.clone(), &data, layers, 300);
        assert_eq!(err, 0.0, "{lik:?} L={layers}: {m:?}");
    }
}

fn whole_objective_gradient(lik: Likelihood, layers: usize) {
    let data = if lik.is_multiclass() {
        blobs(12, 5)
    } else {
        binary_toy(12, 5)
    };
    let cfg = SviConfig {
        layers,
        num_inducing: 4,
        hidden_width: Some(2),
        train_samples: 2,
        likelihood: lik.clone(),
        last_mean: dgp_svi::LastMean::Constant,
        ..Default::default()
    };
    let mut model = SviModel::new(cfg, &data).unwrap();
    perturb(&mut model, 0.2, 9);
    let batch = Batch::new(data.x(), data.y(), 30).unwrap();
    assert_objective_gradient(&model, &batch, 77, 1e-6, format_args!("{lik:?} L={layers}"));
}

#[test]
fn grad_svi_objective_classification() {
    for layers in [1, 2] {
        whole_objective_gradient(Likelihood::logit(), layers);
        whole_objective_gradient(Likelihood::robust_max(3), layers);
        whole_objective_gradient(Likelihood::softmax(3), layers);
    }
}

#[test]
fn classification_is_the_same_on_one_and_two_threads() {
    let data = blobs(90, 4);
    let fit = FitConfig {
        steps: 10,
        batch_size: 40,
        ..Default::default()
    };
    let predict = PredictConfig {
        samples: 4,
        seed: 2,
    };
    for lik in [Likelihood::robust_max(3), Likelihood::softmax(3)] {
        let cfg = SviConfig {
            layers: 2,
            num_inducing: 8,
            train_samples: 2,
            likelihood: lik,
            ..Default::default()
        };
        assert_fit_same_on_one_and_two_threads(
            || SviModel::new(cfg.clone(), &data),
            &data,
            &fit,
            &predict,
        );
    }
}

#[test]
fn classification_checkpoints_round_trip() {
    let data = blobs(30, 6);
    for lik in [Likelihood::softmax(3), Likelihood::logit()] {
        let data = if lik.is_multiclass() {
            data.clone()
        } else {
            binary_toy(30, 6)
        };
        let cfg = SviConfig {
            layers: 2,
            num_inducing: 5,
            likelihood: lik,
            ..Default::default()
        };
        let mut model = SviModel::new(cfg, &data).unwrap();
        model
            .fit(
                &data,
                &FitConfig {
                    steps: 3,
                    ..Default::default()
                },
                &mut FitHooks::none(),
            )
            .unwrap();
        assert_model_json_round_trip(
            &model,
            SviModel::from_json,
            data.x(),
            &PredictConfig {
                samples: 3,
                seed: 1,
            },
        );
    }
}

#[test]
fn bad_labels_are_typed_errors_before_training() {
    let data = blobs(12, 7);
    let x = data.x().to_owned();
    let with = |y: Mat<f64>| Dataset::new(x.clone(), y).unwrap();
    let build = |lik: Likelihood, d: &Dataset| {
        SviModel::new(
            SviConfig {
                layers: 1,
                num_inducing: 4,
                likelihood: lik,
                ..Default::default()
            },
            d,
        )
        .map(|_| ())
    };
    let label_err = |r: dgp_core::Result<()>| match r {
        Err(Error::Label(e)) => e,
        other => panic!("expected a label error, got {other:?}"),
    };
    // Not integers.
    let frac = with(Mat::from_fn(12, 1, |i, _| (i % 3) as f64 + 0.5));
    assert!(matches!(
        label_err(build(Likelihood::robust_max(3), &frac)),
        LabelError::NotAnInteger { row: 0, .. }
    ));
    // Outside 0..K.
    let big = with(Mat::from_fn(12, 1, |i, _| (i % 4) as f64));
    assert!(matches!(
        label_err(build(Likelihood::softmax(3), &big)),
        LabelError::OutOfRange {
            row: 3,
            num_classes: 3,
            ..
        }
    ));
    // A class missing from the training data.
    let two = with(Mat::from_fn(12, 1, |i, _| (i % 2) as f64));
    assert!(matches!(
        label_err(build(Likelihood::robust_max(3), &two)),
        LabelError::MissingClass {
            class: 2,
            num_classes: 3
        }
    ));
    let ones = with(Mat::from_fn(12, 1, |_, _| 1.0));
    assert!(matches!(
        label_err(build(Likelihood::logit(), &ones)),
        LabelError::MissingClass { class: 0, .. }
    ));
    // K = 1.
    assert!(matches!(
        label_err(build(Likelihood::robust_max(1), &data)),
        LabelError::TooFewClasses { num_classes: 1 }
    ));
    // NaN labels never make a data set.
    let nan = Mat::from_fn(12, 1, |i, _| if i == 4 { f64::NAN } else { 0.0 });
    assert!(matches!(
        Dataset::new(x.clone(), nan),
        Err(Error::NonFinite { row: 4, .. })
    ));
    // Two label columns for a multiclass likelihood.
    let wide = with(Mat::from_fn(12, 2, |i, _| (i % 3) as f64));
    assert!(matches!(
        label_err(build(Likelihood::robust_max(3), &wide)),
        LabelError::NotOneColumn { columns: 2 }
    ));
}
