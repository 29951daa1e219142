//! The classification experiment runner on small folders written to a temporary
//! directory: svi trains a binary problem, the metrics are finite and sensible, and bad
//! requests (a binary likelihood on three classes, a likelihood family the backend does
//! not declare) are usage errors.

use std::path::PathBuf;

use dgp_bench::backends::find_backend;
use dgp_bench::classification::{ClassExperimentSpec, likelihood_by_name, run_classification};
use dgp_bench::error::BenchError;
use dgp_traits::backend::{CommonSettings, Settings};
use dgp_traits::model::{FitConfig, PredictConfig};
use dgp_traits::rng::{seeded, standard_normal};

/// `k` blobs in 2-D, 90 rows, one published split (first 60 rows train).
fn write_folder(k: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dgp-bench-class-{k}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("splits")).unwrap();
    let raw = standard_normal(&mut seeded(1), 90, 2);
    let centres = [[0.0, 0.0], [3.0, 0.0], [1.5, 2.6]];
    let mut data = String::new();
    for i in 0..90 {
        let c = i % k;
        data.push_str(&format!(
            "{} {} {}\n",
            centres[c][0] + 0.4 * raw[(i, 0)],
            centres[c][1] + 0.4 * raw[(i, 1)],
            c
        ));
    }
    std::fs::write(dir.join("data.txt"), data).unwrap();
    std::fs::write(dir.join("index_features.txt"), "0\n1\n").unwrap();
    std::fs::write(dir.join("index_target.txt"), "2\n").unwrap();
    std::fs::write(dir.join("n_splits.txt"), "1\n").unwrap();
    let train: String = (0..60).map(|i| format!("{i}\n")).collect();
    let test: String = (60..90).map(|i| format!("{i}\n")).collect();
    std::fs::write(dir.join("splits/index_train_0.txt"), train).unwrap();
    std::fs::write(dir.join("splits/index_test_0.txt"), test).unwrap();
    dir
}

fn spec(dir: PathBuf, backend: &str, likelihood: &str) -> ClassExperimentSpec {
    ClassExperimentSpec {
        dir,
        num_classes: None,
        backend: find_backend(backend).unwrap().backend,
        likelihood: likelihood.into(),
        common: CommonSettings {
            layers: 1,
            num_inducing: 10,
            hidden_width: None,
            train_samples: 1,
            predict_samples: 5,
            seed: 0,
            tune: false,
        },
        settings: Settings::new(),
        fit: FitConfig {
            steps: 200,
            learning_rate: 0.02,
            ..Default::default()
        },
        predict: PredictConfig {
            samples: 5,
            seed: 1,
        },
        splits: vec![0],
    }
}

#[test]
fn svi_classifies_a_small_binary_folder() {
    let dir = write_folder(2);
    for lik in ["probit", "logit"] {
        let records = run_classification(&spec(dir.clone(), "svi", lik)).unwrap();
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!((r.num_classes, r.n_train, r.n_test), (2, 60, 30));
        assert!(r.metrics.error_rate <= 0.1, "{lik}: {r:?}");
        assert!(
            r.metrics.log_loss.is_finite() && r.metrics.log_loss < 0.5,
            "{lik}: {r:?}"
        );
        assert!(r.metrics.auc.unwrap() > 0.95, "{lik}: {r:?}");
        assert!(r.metrics.ece >= 0.0 && r.metrics.brier >= 0.0);
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bad_classification_requests_are_usage_errors() {
    let dir = write_folder(3);
    assert!(matches!(
        run_classification(&spec(dir.clone(), "svi", "logit")),
        Err(BenchError::Usage(_))
    ));
    assert!(matches!(
        likelihood_by_name("tanh", 2),
        Err(BenchError::Usage(_))
    ));
    // nested declares only Gaussian likelihoods.
    assert!(matches!(
        run_classification(&spec(dir.clone(), "nested", "robust-max")),
        Err(BenchError::Usage(_))
    ));
    std::fs::remove_dir_all(dir).ok();
}
