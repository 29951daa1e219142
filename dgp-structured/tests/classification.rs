//! Classification with the structured families (star, mf, fc): a last layer of K latent
//! GPs for a multiclass likelihood, one for Bernoulli; finite-difference gradients of the
//! ELBO with each classification likelihood; predictive class probabilities on the
//! simplex; zero training error on separable toy data; identical results with one and
//! two threads; checkpoints; typed errors for bad labels.

use dgp_core::{Error, LabelError};
use dgp_data::Dataset;
use dgp_structured::{Family, StructuredConfig, StructuredModel};
use dgp_traits::classification::{ClassMetrics, ClassProbs, class_labels};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::{Batch, FitConfig, FitHooks, Model, PredictConfig};
use dgp_traits::optim::AdamConfig;
use dgp_traits::predictive::SIMPLEX_TOL;
use dgp_traits::testing::{
    assert_fit_same_on_one_and_two_threads, assert_model_json_round_trip,
    assert_objective_gradient, perturb, toy_binary, toy_blobs,
};
use faer::Mat;

const FAMILIES: [Family; 3] = [Family::Star, Family::MeanField, Family::FullyCoupled];

fn cfg(family: Family, layers: usize, m: usize, lik: Likelihood) -> StructuredConfig {
    StructuredConfig {
        family,
        layers,
        tau: 2,
        num_inducing: m,
        train_samples: 2,
        kmeans_iters: 5,
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

fn labels_of(data: &Dataset, k: usize) -> Vec<usize> {
    class_labels(data.y(), k).unwrap()
}

#[test]
fn last_layer_has_one_gp_per_class() {
    let data = toy_blobs(12, 1);
    for family in FAMILIES {
        let m = StructuredModel::new(cfg(family, 2, 4, Likelihood::robust_max(3)), &data).unwrap();
        assert_eq!(m.layers().last().unwrap().output_dim, 3, "{family:?}");
        let b = StructuredModel::new(cfg(family, 2, 4, Likelihood::probit()), &toy_binary(12, 1))
            .unwrap();
        assert_eq!(b.layers().last().unwrap().output_dim, 1, "{family:?}");
    }
}

#[test]
fn grad_structured_objective_classification() {
    for family in FAMILIES {
        for (lik, layers) in [
            (Likelihood::probit(), 2),
            (Likelihood::logit(), 1),
            (Likelihood::robust_max(3), 2),
            (Likelihood::softmax(3), 2),
            (Likelihood::robust_max(3), 1),
        ] {
            if layers == 1 && family != Family::MeanField {
                continue; // star and fc need two layers or more
            }
            let data = data_for(&lik, 9, 5);
            let mut model =
                StructuredModel::new(cfg(family, layers, 3, lik.clone()), &data).unwrap();
            perturb(&mut model, 0.3, 6);
            let batch = Batch::new(data.x(), data.y(), 20).unwrap();
            assert_objective_gradient(
                &model,
                &batch,
                7,
                1e-6,
                format_args!("{family:?} L={layers} {lik:?}"),
            );
        }
    }
}

#[test]
fn class_probabilities_lie_on_the_simplex() {
    for family in FAMILIES {
        for lik in [
            Likelihood::probit(),
            Likelihood::robust_max(3),
            Likelihood::softmax(3),
        ] {
            let data = data_for(&lik, 15, 2);
            let mut model = StructuredModel::new(cfg(family, 2, 5, lik.clone()), &data).unwrap();
            perturb(&mut model, 0.5, 3);
            let pred = model
                .predict(
                    data.x(),
                    &PredictConfig {
                        samples: 4,
                        seed: 1,
                    },
                )
                .unwrap();
            let k = lik.num_classes().unwrap();
            let p = pred.class_probs().expect("class probabilities");
            assert_eq!((p.nrows(), p.ncols()), (15, k), "{family:?} {lik:?}");
            for i in 0..p.nrows() {
                let sum: f64 = (0..k).map(|c| p[(i, c)]).sum();
                assert!(
                    (sum - 1.0).abs() <= SIMPLEX_TOL,
                    "{family:?} {lik:?}: {sum}"
                );
                assert!((0..k).all(|c| (0.0..=1.0).contains(&p[(i, c)])));
            }
            assert_eq!(pred.n_components(), 4);
        }
    }
}

fn train_error(family: Family, lik: Likelihood, data: &Dataset, steps: usize) -> ClassMetrics {
    let k = lik.num_classes().unwrap();
    let c = StructuredConfig {
        adam: AdamConfig::with_lr(0.02),
        ..cfg(family, 2, 10, lik)
    };
    let mut model = StructuredModel::new(c, data).unwrap();
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
    ClassMetrics::compute(&probs, &labels_of(data, k)).unwrap()
}

#[test]
fn structured_classification_reaches_zero_training_error() {
    let blobs = toy_blobs(45, 2);
    let binary = toy_binary(60, 1);
    for family in [Family::Star, Family::MeanField] {
        let m = train_error(family, Likelihood::robust_max(3), &blobs, 300);
        assert_eq!(m.error_rate, 0.0, "{family:?} robust-max: {m:?}");
        let m = train_error(family, Likelihood::probit(), &binary, 300);
        assert_eq!(m.error_rate, 0.0, "{family:?} probit: {m:?}");
        assert_eq!(m.auc, Some(1.0), "{family:?} probit: {m:?}");
    }
}

#[test]
fn structured_classification_is_the_same_on_one_and_two_threads() {
    let data = toy_blobs(60, 4);
    let fit = FitConfig {
        steps: 6,
        batch_size: 25,
        ..Default::default()
    };
    let predict = PredictConfig {
        samples: 3,
        seed: 2,
    };
    for family in FAMILIES {
        for lik in [Likelihood::robust_max(3), Likelihood::softmax(3)] {
            let c = cfg(family, 2, 6, lik);
            assert_fit_same_on_one_and_two_threads(
                || StructuredModel::new(c.clone(), &data),
                &data,
                &fit,
                &predict,
            );
        }
    }
}

#[test]
fn structured_classification_checkpoints_round_trip() {
    for (family, lik) in [
        (Family::Star, Likelihood::softmax(3)),
        (Family::FullyCoupled, Likelihood::robust_max(3)),
        (Family::MeanField, Likelihood::logit()),
    ] {
        let data = data_for(&lik, 24, 6);
        let mut model = StructuredModel::new(cfg(family, 2, 5, lik), &data).unwrap();
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
            StructuredModel::from_json,
            data.x(),
            &PredictConfig {
                samples: 3,
                seed: 1,
            },
        );
    }
}

#[test]
fn structured_bad_labels_are_typed_errors_before_training() {
    let data = toy_blobs(12, 7);
    let x = data.x().to_owned();
    let with = |y: Mat<f64>| Dataset::new(x.clone(), y).unwrap();
    let build = |lik: Likelihood, d: &Dataset| {
        StructuredModel::new(cfg(Family::Star, 2, 4, lik), d).map(|_| ())
    };
    let label_err = |r: dgp_core::Result<()>| match r {
        Err(Error::Label(e)) => e,
        other => panic!("expected a label error, got {other:?}"),
    };
    let frac = with(Mat::from_fn(12, 1, |i, _| (i % 3) as f64 + 0.5));
    assert!(matches!(
        label_err(build(Likelihood::robust_max(3), &frac)),
        LabelError::NotAnInteger { row: 0, .. }
    ));
    let two = with(Mat::from_fn(12, 1, |i, _| (i % 2) as f64));
    assert!(matches!(
        label_err(build(Likelihood::robust_max(3), &two)),
        LabelError::MissingClass {
            class: 2,
            num_classes: 3
        }
    ));
    assert!(matches!(
        label_err(build(Likelihood::robust_max(1), &data)),
        LabelError::TooFewClasses { num_classes: 1 }
    ));
    // A regression target given to a Bernoulli model.
    let real = with(Mat::from_fn(12, 1, |i, _| i as f64 * 0.37));
    assert!(build(Likelihood::probit(), &real).is_err());
}

/// Where star's and fc's last-layer functions are coupled, the moments handed to the
/// likelihood draw the q part and keep the kernel residual as variance; their mixture
/// must still have the marginal of f^L that the exact propagation given a sampled f_M
/// gives (checked for function 0: mean and variance at three points, 4000 draws each,
/// tolerance five standard errors of the difference).
#[test]
fn coupled_last_layer_moments_keep_the_marginal_of_f() {
    let data = toy_blobs(15, 3);
    let x = data.x().subrows(0, 3).to_owned();
    let count = 4000;
    for family in [Family::Star, Family::FullyCoupled] {
        let mut model =
            StructuredModel::new(cfg(family, 2, 5, Likelihood::robust_max(3)), &data).unwrap();
        perturb(&mut model, 0.4, 8);
        let mix = model.latent_mixtures(x.as_ref(), count, 21).unwrap();
        let exact = model.sample_exact(x.as_ref(), count, 22).unwrap();
        for i in 0..3 {
            let s = count as f64;
            let m_mix = (0..count).map(|c| mix.means[0][(i, c)]).sum::<f64>() / s;
            let v_mix = (0..count)
                .map(|c| mix.vars[0][(i, c)] + mix.means[0][(i, c)].powi(2))
                .sum::<f64>()
                / s
                - m_mix * m_mix;
            let m_ex = (0..count).map(|c| exact[(i, c)]).sum::<f64>() / s;
            let v_ex = (0..count)
                .map(|c| (exact[(i, c)] - m_ex).powi(2))
                .sum::<f64>()
                / s;
            let se_mean = ((v_mix + v_ex) / s).sqrt();
            let se_var = (v_mix + v_ex) * (2.0 / s).sqrt();
            assert!(
                (m_mix - m_ex).abs() < 5.0 * se_mean,
                "{family:?} point {i}: mean {m_mix} vs exact {m_ex} (se {se_mean})"
            );
            assert!(
                (v_mix - v_ex).abs() < 5.0 * se_var,
                "{family:?} point {i}: variance {v_mix} vs exact {v_ex} (se {se_var})"
            );
        }
    }
}
