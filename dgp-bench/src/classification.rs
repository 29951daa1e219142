//! Classification experiments: train a backend on the splits of a classification folder
//! (the UCI folder format with a label column `0..K`, e.g. `shared/data/classification/
//! magic` and `optdigits`) and evaluate its class probabilities on each test split.
//!
//! Protocol per split: inputs standardised with the training rows' mean and standard
//! deviation (labels untouched), the model built with the likelihood (see
//! [`build_model`]), trained with the given
//! [`FitConfig`], its predictive evaluated at the test inputs, and the metrics of
//! [`dgp_traits::classification::ClassMetrics`] computed from the predictive's class
//! probabilities: error rate, log loss, Brier score, ECE with 15 equal-width bins of the
//! top-class confidence, and AUC for binary problems.
//!
//! This module is the library side; the command line wires it to a flag.

use std::path::PathBuf;
use std::time::Instant;

use dgp_svi::{DeepGp, SVI_BACKEND};
use dgp_traits::backend::{Backend, CommonSettings, ConfigBackend, Settings, apply_settings};
use dgp_traits::classification::{ClassMetrics, ClassProbs};
use dgp_traits::data::{ClassDataset, Dataset, Standardizer};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::{FitConfig, Model, PredictConfig, Silent};
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// The likelihood of a classification run, by name: `probit`, `logit` (binary problems
/// only), `robust-max`, `softmax` (any K ≥ 2; K latent functions).
///
/// # Errors
/// [`BenchError::Usage`] for an unknown name or a Bernoulli likelihood with K > 2.
pub fn likelihood_by_name(name: &str, num_classes: usize) -> Result<Likelihood> {
    let lik = match name {
        "probit" => Likelihood::probit(),
        "logit" => Likelihood::logit(),
        "robust-max" | "robust_max" | "robustmax" => Likelihood::robust_max(num_classes),
        "softmax" => Likelihood::softmax(num_classes),
        other => {
            return Err(BenchError::Usage(format!(
                "unknown classification likelihood '{other}' (probit, logit, robust-max, softmax)"
            )));
        }
    };
    if lik.num_classes() != Some(num_classes) {
        return Err(BenchError::Usage(format!(
            "likelihood '{name}' is binary but the data have {num_classes} classes (use robust-max or softmax)"
        )));
    }
    Ok(lik)
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ClassExperimentSpec {
    /// The classification folder.
    pub dir: PathBuf,
    /// K if given; `None` infers it from the labels (largest label + 1).
    pub num_classes: Option<usize>,
    /// The backend (its registry entry's `backend`).
    pub backend: &'static dyn Backend,
    /// Likelihood name for [`likelihood_by_name`].
    pub likelihood: String,
    /// Architecture and seed.
    pub common: CommonSettings,
    /// Backend settings (the likelihood is set by the run; a `"likelihood"` key here is
    /// refused).
    pub settings: Settings,
    /// Training.
    pub fit: FitConfig,
    /// Prediction (mixture components: hidden-layer samples).
    pub predict: PredictConfig,
    /// Splits to run (indices of the folder's published splits).
    pub splits: Vec<usize>,
}

/// The result of one split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassSplitRecord {
    /// Folder name.
    pub dataset: String,
    /// Backend name.
    pub backend: String,
    /// Split index.
    pub split: usize,
    /// K.
    pub num_classes: usize,
    /// The likelihood configuration used.
    pub likelihood: Likelihood,
    /// Training rows.
    pub n_train: usize,
    /// Test rows.
    pub n_test: usize,
    /// Test metrics.
    pub metrics: ClassMetrics,
    /// Wall seconds of building and training.
    pub train_seconds: f64,
    /// Wall seconds of predicting the test rows.
    pub predict_seconds: f64,
}

/// Runs `spec` split by split (see the module docs).
///
/// # Errors
/// [`BenchError::Data`] for an unreadable folder or invalid labels (including a class
/// missing from a training split); [`BenchError::Usage`] for an unknown likelihood, one
/// the backend does not declare in its capabilities, or settings it rejects;
/// [`BenchError::Run`] when building, training, predicting or evaluating fails.
pub fn run_classification(spec: &ClassExperimentSpec) -> Result<Vec<ClassSplitRecord>> {
    let data = ClassDataset::load(&spec.dir, spec.num_classes).map_err(BenchError::data)?;
    let k = data.num_classes;
    let likelihood = likelihood_by_name(&spec.likelihood, k)?;
    let backend = spec.backend;
    if !backend.capabilities().supports(likelihood.family()) {
        return Err(BenchError::Usage(format!(
            "backend '{}' does not train {:?} likelihoods",
            backend.name(),
            likelihood.family()
        )));
    }
    if spec.settings.contains_key("likelihood") {
        return Err(BenchError::Usage(
            "the classification run sets the likelihood itself; remove 'likelihood' from the settings".into(),
        ));
    }
    backend
        .check(&spec.common, &spec.settings)
        .map_err(|e| BenchError::Usage(format!("{}: {e}", backend.name())))?;
    let name = data.uci.name.clone();
    let mut out = Vec::with_capacity(spec.splits.len());
    for &s in &spec.splits {
        let context = format!("{} on {name}, split {s}", backend.name());
        let run = |e| BenchError::run(context.clone(), e);
        let split = data.split(s).map_err(BenchError::data)?;
        let stats = Standardizer::fit(&split.train);
        let train = Dataset::new(
            stats.transform_x(split.train.x()).map_err(run)?,
            split.train.y().to_owned(),
        )
        .map_err(run)?;
        let test_x = stats.transform_x(split.test.x()).map_err(run)?;
        let t0 = Instant::now();
        let mut model = build_model(spec, &likelihood, &train).map_err(run)?;
        model.fit(&train, &spec.fit, &mut Silent).map_err(run)?;
        let train_seconds = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let pred = model.predict(test_x.as_ref(), &spec.predict).map_err(run)?;
        let predict_seconds = t1.elapsed().as_secs_f64();
        let probs = ClassProbs::from_predictive(&pred).map_err(run)?;
        let metrics = ClassMetrics::compute(&probs, &split.test_labels).map_err(run)?;
        out.push(ClassSplitRecord {
            dataset: name.clone(),
            backend: backend.name().to_string(),
            split: s,
            num_classes: k,
            likelihood: likelihood.clone(),
            n_train: split.train.n(),
            n_test: split.test.n(),
            metrics,
            train_seconds,
            predict_seconds,
        });
    }
    Ok(out)
}

/// Builds the untrained model of `spec`'s backend with `likelihood` for `train`.
///
/// The backends' settings are merged into their default configuration key by key, which
/// cannot switch the `kind` of the likelihood (the fields of the new kind are not keys of
/// the default Gaussian one). So for svi the configuration is made here: the common
/// settings and `spec.settings` applied as `dgp-bench run` does, then the likelihood set
/// and the configuration validated. Any other backend is built through its registry entry
/// with the likelihood in its settings, which succeeds only once the settings merge can
/// switch likelihood kinds.
///
/// # Errors
/// The settings' and the model constructor's errors.
pub fn build_model(
    spec: &ClassExperimentSpec,
    likelihood: &Likelihood,
    train: &Dataset,
) -> dgp_traits::Result<Box<dyn Model>> {
    if spec.backend.name() == ConfigBackend::name(&SVI_BACKEND) {
        let base = SVI_BACKEND.base_config(&spec.common);
        let mut cfg = apply_settings(SVI_BACKEND.schema(), &base, &spec.settings)?;
        cfg.likelihood = likelihood.clone();
        cfg.validate()?;
        return Ok(Box::new(DeepGp::new(cfg, train)?));
    }
    let mut settings = spec.settings.clone();
    settings.insert(
        "likelihood".into(),
        serde_json::to_value(likelihood)
            .map_err(|e| dgp_traits::Error::config("likelihood", format!("settings: {e}")))?,
    );
    spec.backend
        .build(&spec.common, &settings, &spec.fit, train, &Silent)
}
