//! Tests of the natural-gradient option of the DSVI backend (`SviConfig::natgrad`,
//! the training schedule of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP): a unit step maximises the ELBO over the last layer's q(u)
//! exactly (Gaussian likelihood, fixed noise draws), small steps ascend for the probit
//! likelihood, training with it is reproducible across thread counts, and it reaches a
//! better bound than Adam alone in the same number of steps.

use dgp_core::rng::seeded;
use dgp_data::Dataset;
use dgp_svi::prelude::*;
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::{Batch, FitHooks};
use dgp_traits::optim::{NatGradConfig, NatGradScheme};
use dgp_traits::tape::Tape;
use dgp_traits::testing::{
    assert_config_errors, assert_fit_same_on_one_and_two_threads, perturb, toy_regression,
};
use dgp_traits::train::NaturalGradientModel;

/// ELBO and its flat gradient on the full batch with noise stream `seed`.
fn elbo_and_grad(model: &SviModel, data: &Dataset, seed: u64) -> (f64, Vec<f64>) {
    let batch = Batch::new(data.x(), data.y(), data.n()).unwrap();
    model
        .value_and_grad(&mut Tape::new(), &batch, &mut seeded(seed))
        .unwrap()
}

/// Largest |gradient| over the natural blocks of `model`.
fn natural_block_grad(model: &SviModel, grad: &[f64]) -> f64 {
    model
        .natural_blocks()
        .into_iter()
        .filter_map(|id| model.params().flat_range(id))
        .flat_map(|r| grad[r].iter().map(|g| g.abs()).collect::<Vec<_>>())
        .fold(0.0, f64::max)
}

fn unit_step_is_the_exact_maximiser(layers: usize, whiten: bool) {
    let data = toy_regression(40, 2, 1.5, 4);
    let cfg = SviConfig {
        layers,
        num_inducing: 7,
        whiten,
        ..Default::default()
    };
    let mut model = SviModel::new(cfg, &data).unwrap();
    perturb(&mut model, 0.2, 9);
    let (before, grad) = elbo_and_grad(&model, &data, 5);
    let g0 = natural_block_grad(&model, &grad);
    assert!(g0 > 1e-2, "the start is not already optimal ({g0})");
    let batch = Batch::new(data.x(), data.y(), data.n()).unwrap();
    let unit = NatGradConfig {
        gamma: 1.0,
        ..NatGradConfig::default()
    };
    let (value, step_grad) = model
        .natural_step(&mut Tape::new(), &batch, &mut seeded(5), &unit)
        .unwrap();
    assert_eq!(value, before, "the step reports the objective before it");
    assert_eq!(step_grad, grad, "and its gradient there");
    let (after, grad) = elbo_and_grad(&model, &data, 5);
    let g1 = natural_block_grad(&model, &grad);
    assert!(after > before, "ELBO {before} → {after}");
    // The ELBO is concave in q(u) of the last layer given the noise draws, so a zero
    // gradient there means the maximum.
    assert!(
        g1 < 1e-6 * g0.max(1.0),
        "L = {layers}, whiten = {whiten}: gradient over the last q(u) {g0} → {g1}"
    );
}

#[test]
fn unit_natural_step_maximises_the_one_layer_elbo_over_q() {
    unit_step_is_the_exact_maximiser(1, true);
    unit_step_is_the_exact_maximiser(1, false);
}

#[test]
fn unit_natural_step_maximises_the_two_layer_elbo_over_the_last_q() {
    unit_step_is_the_exact_maximiser(2, true);
    unit_step_is_the_exact_maximiser(2, false);
}

#[test]
fn small_natural_steps_ascend_with_a_probit_likelihood() {
    let x = toy_regression(50, 2, 1.0, 8);
    let y = faer::Mat::from_fn(50, 1, |i, _| f64::from(u8::from(x.y()[(i, 0)] > 0.0)));
    let data = Dataset::new(x.x().to_owned(), y).unwrap();
    let cfg = SviConfig {
        layers: 2,
        num_inducing: 6,
        likelihood: Likelihood::probit(),
        ..Default::default()
    };
    let mut model = SviModel::new(cfg, &data).unwrap();
    perturb(&mut model, 0.2, 3);
    let batch = Batch::new(data.x(), data.y(), data.n()).unwrap();
    let small = NatGradConfig {
        gamma: 0.05,
        ..NatGradConfig::default()
    };
    let mut last = elbo_and_grad(&model, &data, 2).0;
    for _ in 0..5 {
        model
            .natural_step(&mut Tape::new(), &batch, &mut seeded(2), &small)
            .unwrap();
        let now = elbo_and_grad(&model, &data, 2).0;
        assert!(now > last, "ELBO {last} → {now}");
        last = now;
    }
}

#[test]
fn natural_gradient_training_beats_adam_alone_in_the_same_steps() {
    let data = toy_regression(150, 2, 1.5, 21);
    let base = SviConfig {
        layers: 1,
        num_inducing: 15,
        ..Default::default()
    };
    let fit = FitConfig {
        steps: 60,
        batch_size: 0,
        ..Default::default()
    };
    let train = |natgrad: Option<NatGradConfig>| {
        let mut m = SviModel::new(
            SviConfig {
                natgrad,
                ..base.clone()
            },
            &data,
        )
        .unwrap();
        let report = m.fit(&data, &fit, &mut FitHooks::none()).unwrap();
        (report.final_objective, elbo_and_grad(&m, &data, 0).0)
    };
    let (_, adam) = train(None);
    let (_, nat) = train(Some(NatGradConfig {
        gamma: 1.0,
        ..NatGradConfig::default()
    }));
    assert!(
        nat > adam + 1.0,
        "ELBO after 60 steps: natgrad {nat}, Adam {adam}"
    );
}

#[test]
fn natural_gradient_training_is_the_same_on_one_and_two_threads() {
    let data = toy_regression(120, 3, 1.5, 1);
    let fit = FitConfig {
        steps: 12,
        batch_size: 50,
        ..Default::default()
    };
    let predict = PredictConfig {
        samples: 5,
        seed: 3,
    };
    for scheme in [NatGradScheme::Alternate, NatGradScheme::Joint] {
        let cfg = SviConfig {
            layers: 2,
            num_inducing: 12,
            natgrad: Some(NatGradConfig {
                scheme,
                ..NatGradConfig::default()
            }),
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
fn natgrad_settings_are_validated_and_optional_in_checkpoints() {
    let data = toy_regression(30, 2, 1.5, 2);
    let bad = SviConfig {
        natgrad: Some(NatGradConfig {
            gamma: 0.0,
            ..NatGradConfig::default()
        }),
        ..Default::default()
    };
    assert_config_errors(&[(bad, &["gamma"][..])], |cfg| SviModel::new(cfg, &data));
    let model = SviModel::new(SviConfig::default(), &data).unwrap();
    let json = model.to_json().unwrap();
    let old = json.replace(",\"natgrad\":null", "");
    assert_ne!(old, json, "the checkpoint names the natgrad setting");
    let back = SviModel::from_json(&old).unwrap();
    assert_eq!(back.config().natgrad, None);
}
