//! Classification with the SGHMC deep GP: the potential's data term is the likelihood's
//! expected log-likelihood under the last layer's Gaussian marginal (K latent GPs for K
//! classes); finite-difference gradients of the potential; class probabilities averaged
//! over kept samples; the marginal data term refused for classification; determinism
//! with one and two threads; checkpoints; zero training error on separable toy data.

use dgp_core::{Error, LabelError};
use dgp_data::Dataset;
use dgp_hmc::sghmc::Potential;
use dgp_hmc::sghmc::SghmcSamplerConfig;
use dgp_hmc::{SghmcConfig, SghmcModel};
use dgp_traits::classification::{ClassMetrics, ClassProbs, class_labels};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::{Batch, FitConfig, FitHooks, Model, PredictConfig};
use dgp_traits::predictive::SIMPLEX_TOL;
use dgp_traits::testing::{
    assert_fit_same_on_one_and_two_threads, assert_model_json_round_trip,
    assert_objective_gradient, perturb, toy_binary, toy_blobs,
};
use faer::Mat;

fn config(layers: usize, lik: Likelihood, kept: usize) -> SghmcConfig {
    SghmcConfig {
        layers,
        num_inducing: 8,
        hidden_width: Some(2),
        kernel_variance: 1.0,
        likelihood: lik,
        sampler: SghmcSamplerConfig {
            burn_in: 300,
            thinning: 5,
            kept,
            window: 50,
            ..SghmcSamplerConfig::default()
        },
        ..SghmcConfig::default()
    }
}

fn data_for(lik: &Likelihood, n: usize, seed: u64) -> Dataset {
    if lik.is_multiclass() {
        toy_blobs(n, seed)
    } else {
        toy_binary(n, seed)
    }
}

#[test]
fn sghmc_potential_gradient_with_classification_likelihoods() {
    for layers in [1, 2] {
        for lik in [
            Likelihood::probit(),
            Likelihood::logit(),
            Likelihood::robust_max(3),
            Likelihood::softmax(3),
        ] {
            let data = data_for(&lik, 12, 3);
            let mut cfg = config(layers, lik.clone(), 4);
            cfg.num_inducing = 4;
            let mut model = SghmcModel::new(cfg, &data).unwrap();
            perturb(&mut model, 0.3, 5);
            let batch = Batch::new(data.x(), data.y(), 30).unwrap();
            assert_objective_gradient(&model, &batch, 11, 1e-6, format_args!("L={layers} {lik:?}"));
        }
    }
}

#[test]
fn sghmc_classification_has_no_noise_and_k_latent_gps() {
    let data = toy_blobs(12, 1);
    let model = SghmcModel::new(config(2, Likelihood::softmax(3), 4), &data).unwrap();
    assert_eq!(model.noise_variance(), None);
    assert_eq!(model.layers().last().unwrap().output_dim, 3);
    assert!(model.function_samples(data.x(), 2, 0).unwrap().is_none());
}

#[test]
fn sghmc_marginal_potential_is_refused_for_classification() {
    let data = toy_binary(12, 1);
    let cfg = SghmcConfig {
        potential: Potential::Marginal,
        ..config(1, Likelihood::probit(), 4)
    };
    match SghmcModel::new(cfg, &data) {
        Err(Error::Config(e)) => assert_eq!(e.field, "potential"),
        other => panic!("expected a config error naming potential, got {other:?}"),
    }
}

fn train(lik: Likelihood, data: &Dataset, steps: usize) -> (SghmcModel, ClassMetrics) {
    let k = lik.num_classes().unwrap();
    let mut cfg = config(2, lik, 20);
    cfg.sampler.burn_in = steps - 100;
    let mut model = SghmcModel::new(cfg, data).unwrap();
    let fit = FitConfig {
        steps,
        batch_size: 32,
        seed: 2,
        ..Default::default()
    };
    model.fit(data, &fit, &mut FitHooks::none()).unwrap();
    let pred = model.predict(data.x(), &PredictConfig::default()).unwrap();
    assert_eq!(pred.n_components(), 20, "one component per kept sample");
    let p = pred.class_probs().expect("class probabilities");
    for i in 0..p.nrows() {
        let sum: f64 = (0..k).map(|c| p[(i, c)]).sum();
        assert!((sum - 1.0).abs() <= SIMPLEX_TOL, "row {i} sums to {sum}");
    }
    let probs = ClassProbs::from_predictive(&pred).unwrap();
    let labels = class_labels(data.y(), k).unwrap();
    (model, ClassMetrics::compute(&probs, &labels).unwrap())
}

#[test]
fn sghmc_classification_reaches_zero_training_error() {
    let (_, m) = train(Likelihood::robust_max(3), &toy_blobs(60, 2), 1000);
    assert_eq!(m.error_rate, 0.0, "robust-max: {m:?}");
    let (_, m) = train(Likelihood::probit(), &toy_binary(60, 1), 1000);
    assert_eq!(m.error_rate, 0.0, "probit: {m:?}");
    assert_eq!(m.auc, Some(1.0), "probit: {m:?}");
}

#[test]
fn sghmc_classification_is_the_same_on_one_and_two_threads() {
    let data = toy_blobs(45, 4);
    let fit = FitConfig {
        steps: 60,
        batch_size: 16,
        seed: 4,
        ..FitConfig::default()
    };
    for lik in [Likelihood::robust_max(3), Likelihood::softmax(3)] {
        let cfg = config(2, lik, 4);
        assert_fit_same_on_one_and_two_threads(
            || SghmcModel::new(cfg.clone(), &data),
            &data,
            &fit,
            &PredictConfig::default(),
        );
    }
}

#[test]
fn sghmc_classification_checkpoints_round_trip_and_bad_labels() {
    let data = toy_blobs(30, 8);
    let mut model = SghmcModel::new(config(2, Likelihood::softmax(3), 4), &data).unwrap();
    let fit = FitConfig {
        steps: 60,
        ..FitConfig::default()
    };
    model.fit(&data, &fit, &mut FitHooks::none()).unwrap();
    assert_model_json_round_trip(
        &model,
        SghmcModel::from_json,
        data.x(),
        &PredictConfig::default(),
    );
    let two = Dataset::new(
        data.x().to_owned(),
        Mat::from_fn(30, 1, |i, _| (i % 2) as f64),
    )
    .unwrap();
    match SghmcModel::new(config(2, Likelihood::robust_max(3), 4), &two) {
        Err(Error::Label(LabelError::MissingClass { class: 2, .. })) => {}
        other => panic!("expected a missing-class error, got {other:?}"),
    }
}
