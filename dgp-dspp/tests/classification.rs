//! Classification with the DSPP and PPGPR: Bernoulli (logit) and multiclass (robust-max,
//! softmax with K latent GPs) likelihoods in eq. (21), each component's term the
//! likelihood's predictive. Finite-difference gradients of the whole objective; the
//! predictive class probabilities are the weighted mixture of the components' and the
//! objective's log density is the log of the label's probability; zero training error on
//! separable blobs; one vs two threads; checkpoints.

use dgp_data::Dataset;
use dgp_dspp::{DsppConfig, DsppModel, PpgprModel, Rule};
use dgp_traits::classification::{ClassMetrics, ClassProbs, class_labels};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::{Batch, FitConfig, FitHooks, Model, PredictConfig};
use dgp_traits::predictive::SIMPLEX_TOL;
use dgp_traits::testing::{
    assert_fit_same_on_one_and_two_threads, assert_model_json_round_trip,
    assert_objective_gradient, perturb, toy_binary, toy_blobs,
};
use faer::Mat;

fn cfg(layers: usize, lik: Likelihood) -> DsppConfig {
    DsppConfig {
        layers,
        hidden_width: 2,
        num_inducing: 4,
        rule: Rule::Qr3,
        sites: 3,
        beta: 0.7,
        likelihood: lik,
        ..Default::default()
    }
}

fn data_for(lik: &Likelihood, n: usize, seed: u64) -> Dataset {
    if lik.is_multiclass() {
        toy_blobs(n, seed)
    } else {
        toy_binary(n, seed)
    }
}

const LIKELIHOODS: [fn() -> Likelihood; 4] = [
    Likelihood::probit,
    Likelihood::logit,
    || Likelihood::robust_max(3),
    || Likelihood::softmax(3),
];

#[test]
fn grad_dspp_objective_classification() {
    for layers in [1, 2] {
        for make in LIKELIHOODS {
            let lik = make();
            let data = data_for(&lik, 9, 4);
            let mut model = DsppModel::new(cfg(layers, lik.clone()), &data).unwrap();
            perturb(&mut model, 0.2, 9);
            let batch = Batch::new(data.x(), data.y(), 30).unwrap();
            assert_objective_gradient(&model, &batch, 77, 1e-6, format_args!("L={layers} {lik:?}"));
        }
    }
}

#[test]
fn multiclass_predictive_is_the_mixture_the_objective_scores() {
    for make in LIKELIHOODS {
        let lik = make();
        let data = data_for(&lik, 30, 5);
        let mut model = DsppModel::new(
            DsppConfig {
                sites: 4,
                ..cfg(2, lik.clone())
            },
            &data,
        )
        .unwrap();
        perturb(&mut model, 0.3, 2);
        let pred = model.predict(data.x(), &PredictConfig::default()).unwrap();
        let k = lik.num_classes().unwrap();
        let probs = pred.class_probs().expect("class probabilities");
        assert_eq!((probs.nrows(), probs.ncols()), (30, k));
        let w = pred.weights();
        let direct = lik
            .class_probs_mixture(w, pred.means(), pred.variances())
            .unwrap();
        let ld = model.log_density(data.x(), data.y()).unwrap();
        let labels = class_labels(data.y(), k).unwrap();
        for i in 0..30 {
            let sum: f64 = (0..k).map(|c| probs[(i, c)]).sum();
            assert!((sum - 1.0).abs() <= SIMPLEX_TOL, "{lik:?} row {i}: {sum}");
            for c in 0..k {
                assert!((probs[(i, c)] - direct[(i, c)]).abs() < 1e-12);
            }
            let p = probs[(i, labels[i])];
            // Robust-max's class probabilities are renormalised over the classes (each
            // P_c carries its own 20-node Gauss–Hermite error, ~1e-7 here) while the
            // objective's term is the label's unnormalised one.
            let tol = if matches!(lik, Likelihood::RobustMax(_)) {
                1e-5
            } else {
                1e-9
            };
            assert!(
                (ld[i] - p.ln()).abs() < tol,
                "{lik:?} row {i}: log density {} vs log p(y) {}",
                ld[i],
                p.ln()
            );
        }
    }
}

#[test]
fn dspp_and_ppgpr_classify_separable_blobs() {
    let data = toy_blobs(60, 2);
    let labels = class_labels(data.y(), 3).unwrap();
    let fit = FitConfig {
        steps: 300,
        ..Default::default()
    };
    for lik in [Likelihood::robust_max(3), Likelihood::softmax(3)] {
        let c = DsppConfig {
            num_inducing: 8,
            early_stopping: None,
            learning_rate: 0.05,
            ..cfg(2, lik.clone())
        };
        let mut dspp = DsppModel::new(c.clone(), &data).unwrap();
        dspp.fit(&data, &fit, &mut FitHooks::none()).unwrap();
        let mut ppgpr = PpgprModel::new(c, &data).unwrap();
        ppgpr.fit(&data, &fit, &mut FitHooks::none()).unwrap();
        for (name, pred) in [
            ("dspp", dspp.predict(data.x(), &PredictConfig::default())),
            ("ppgpr", ppgpr.predict(data.x(), &PredictConfig::default())),
        ] {
            let probs = ClassProbs::from_predictive(&pred.unwrap()).unwrap();
            let m = ClassMetrics::compute(&probs, &labels).unwrap();
            assert_eq!(m.error_rate, 0.0, "{name} {lik:?}: {m:?}");
        }
    }
}

#[test]
fn dspp_classification_same_on_one_and_two_threads() {
    // More rows than one gradient chunk, so the chunked objective is exercised.
    let data = toy_blobs(700, 1);
    let fit = FitConfig {
        steps: 3,
        batch_size: 650,
        ..Default::default()
    };
    for lik in [Likelihood::robust_max(3), Likelihood::softmax(3)] {
        let c = cfg(2, lik);
        assert_fit_same_on_one_and_two_threads(
            || DsppModel::new(c.clone(), &data),
            &data,
            &fit,
            &PredictConfig::default(),
        );
    }
}

#[test]
fn dspp_classification_checkpoints_round_trip() {
    for make in LIKELIHOODS {
        let lik = make();
        let data = data_for(&lik, 20, 6);
        let mut model = DsppModel::new(cfg(2, lik), &data).unwrap();
        perturb(&mut model, 0.1, 1);
        assert_model_json_round_trip(
            &model,
            DsppModel::from_json,
            data.x(),
            &PredictConfig::default(),
        );
    }
    // A class absent from the training data is refused before training.
    let data = toy_blobs(12, 3);
    let two = Dataset::new(
        data.x().to_owned(),
        Mat::from_fn(12, 1, |i, _| (i % 2) as f64),
    )
    .unwrap();
    assert!(DsppModel::new(cfg(2, Likelihood::robust_max(3)), &two).is_err());
}
