//! Classification experiments: train a backend on the splits of a classification folder
//! (the UCI folder format with a label column `0..K`, e.g. `shared/data/classification/
//! magic` and `optdigits`) and evaluate its class probabilities on each test split.
//!
//! Protocol per split: inputs standardised with the training rows' mean and standard
//! deviation (labels untouched: [`dgp_data::TargetScaling::Keep`]), the model built with the likelihood (see
//! [`build_model`]), trained with the given
//! [`FitConfig`], its predictive evaluated at the test inputs, and the metrics of
//! [`dgp_traits::classification::ClassMetrics`] computed from the predictive's class
//! probabilities: error rate, log loss, Brier score, ECE with 15 equal-width bins of the
//! top-class confidence, and AUC for binary problems.
//!
//! `dgp-bench run --task classification` (or `--likelihood NAME`) runs the same protocol
//! on any data source of `run` (a folder, a CSV file with a class column): the labels are
//! checked before any training ([`class_labels_of`], [`check_training_classes`]), each
//! split gives a [`ClassSplitRecord`] (JSON Lines with `--json`), [`class_table`] is the
//! table of `run` and `dgp-bench table`, and [`crate::reliability`] draws the reliability
//! diagram next to the report.

use std::path::PathBuf;
use std::time::Instant;

use std::path::Path;

use crate::experiment::{ExperimentSpec, PREDICT_SEED_OFFSET, model_label};
use crate::progress::BarObserver;

use dgp_core::{Error, LabelError};
use dgp_data::uci::ClassDataset;
use dgp_data::{Dataset, StandardizeOptions, Standardizer};
use dgp_traits::backend::{Backend, CommonSettings, Settings};
use dgp_traits::classification::{
    ClassMetrics, ClassProbs, ECE_BINS, ReliabilityBin, check_all_classes_present, class_labels,
    infer_num_classes, reliability_bins,
};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::{FitConfig, FitHooks, Model, PredictConfig};
use faer::MatRef;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::report::fmt_mean_se;
use crate::summary::MeanSe;

/// The value of [`ClassSplitRecord::task`].
pub const CLASSIFICATION_TASK: &str = "classification";

/// The likelihood of a classification run, by name ([`Likelihood::for_classes`]; `None`:
/// the default for K).
///
/// # Errors
/// [`BenchError::Usage`] for an unknown name or a Bernoulli likelihood with K > 2.
pub fn likelihood_by_name(name: Option<&str>, num_classes: usize) -> Result<Likelihood> {
    Likelihood::for_classes(name, num_classes).map_err(|e| match e {
        dgp_core::Error::Config(c) => BenchError::Usage(c.message),
        other => BenchError::Usage(other.to_string()),
    })
}

/// The likelihood a `likelihood` setting (`--set likelihood.kind=robust_max`, or a
/// `--config` object) asks for, on data with `num_classes` classes: a multiclass kind
/// without `num_classes` takes K from the data; the other fields keep the likelihood's
/// serde defaults.
///
/// # Errors
/// [`BenchError::Usage`] when the setting is not an object with a `kind`, states a
/// `num_classes` other than K, asks for a Bernoulli likelihood on K > 2 classes or the
/// Gaussian, or does not describe a valid likelihood.
pub fn likelihood_from_setting(
    setting: &serde_json::Value,
    num_classes: usize,
) -> Result<Likelihood> {
    let usage = |m: String| BenchError::Usage(format!("setting likelihood: {m}"));
    let mut obj = setting
        .as_object()
        .cloned()
        .ok_or_else(|| usage(format!("expected an object with a kind, got {setting}")))?;
    let kind = obj
        .get("kind")
        .and_then(|k| k.as_str())
        .ok_or_else(|| usage("needs a kind (probit is bernoulli_probit, logit is bernoulli_logit, robust_max, softmax)".into()))?
        .to_string();
    if kind == "gaussian" {
        return Err(usage(
            "the Gaussian is the regression likelihood; a classification run needs bernoulli_probit, bernoulli_logit, robust_max or softmax".into(),
        ));
    }
    if matches!(kind.as_str(), "robust_max" | "softmax") {
        match obj.get("num_classes") {
            None => {
                obj.insert("num_classes".into(), serde_json::Value::from(num_classes));
            }
            Some(v) if v.as_u64() == Some(num_classes as u64) => {}
            Some(v) => {
                return Err(usage(format!(
                    "num_classes = {v} but the data have K = {num_classes} classes (leave num_classes out to take K from the data)"
                )));
            }
        }
    }
    let lik: Likelihood =
        serde_json::from_value(serde_json::Value::Object(obj)).map_err(|e| usage(e.to_string()))?;
    lik.validate().map_err(|e| usage(e.to_string()))?;
    if lik.num_classes() != Some(num_classes) {
        return Err(usage(format!(
            "{kind} is binary but the data have {num_classes} classes (use robust_max or softmax)"
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
    /// Architecture, seed and learning rate.
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
    /// Always [`CLASSIFICATION_TASK`]: tells these records from regression ones.
    #[serde(default)]
    pub task: String,
    /// Data set name.
    pub dataset: String,
    /// Backend name.
    pub backend: String,
    /// Number of GP layers.
    #[serde(default)]
    pub layers: usize,
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
    /// The test set's reliability bins ([`ECE_BINS`] equal-width bins of the top-class
    /// confidence, the binning of the ECE).
    #[serde(default)]
    pub reliability: Vec<ReliabilityBin>,
    /// Wall seconds of building and training.
    pub train_seconds: f64,
    /// Wall seconds of predicting the test rows.
    pub predict_seconds: f64,
    /// Optimisation steps taken.
    #[serde(default)]
    pub steps: usize,
    /// Final training objective (the backend's, e.g. the negative ELBO).
    #[serde(default)]
    pub final_objective: f64,
    /// Inducing points per layer.
    #[serde(default)]
    pub num_inducing: usize,
    /// Hidden-layer width.
    #[serde(default)]
    pub hidden_width: Option<usize>,
    /// Minibatch size used.
    #[serde(default)]
    pub batch_size: usize,
    /// Adam learning rate (0 when the run left it to the backend's default).
    #[serde(default)]
    pub learning_rate: f64,
    /// Predictive samples (mixture components).
    #[serde(default)]
    pub predict_samples: usize,
    /// Seed.
    #[serde(default)]
    pub seed: u64,
    /// The model's description.
    #[serde(default)]
    pub model: String,
    /// Backend settings given on the command line.
    #[serde(default, skip_serializing_if = "Settings::is_empty")]
    pub settings: Settings,
    /// The command that produced the record.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// Protocol label (empty for the published splits with backend defaults).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
}

/// The class labels `0..K` of a data set's target column, for a classification run over
/// data that may hold anything: K = `num_classes` when given, else the largest label plus
/// one; every class must occur somewhere.
///
/// # Errors
/// [`BenchError::Data`] naming the data set and the first offending row: a target that is
/// not one column of integers (e.g. a regression target), NaN or infinite labels, labels
/// outside `0..K`, K < 2, a class with no row.
pub fn class_labels_of(
    name: &str,
    y: MatRef<'_, f64>,
    num_classes: Option<usize>,
) -> Result<(usize, Vec<usize>)> {
    let hint = |e: Error| label_error(name, e);
    let k = match num_classes {
        Some(k) => k,
        None => infer_num_classes(y).map_err(hint)?,
    };
    let labels = class_labels(y, k).map_err(hint)?;
    check_all_classes_present(&labels, k).map_err(hint)?;
    Ok((k, labels))
}

/// A label error of data `name` as the benchmark reports it: [`BenchError::Data`] with
/// the data's name and the row, and for a non-integer label the hint that the target may
/// be a regression target.
pub fn label_error(name: &str, e: Error) -> BenchError {
    let extra = match &e {
        Error::Label(LabelError::NotAnInteger { .. }) => {
            " (a regression target? classification needs integer class labels 0..K-1; \
             drop --task classification / --likelihood for regression)"
        }
        _ => "",
    };
    BenchError::Data(Error::config(
        "labels",
        format!("classification on {name}: {e}{extra}"),
    ))
}

/// Checks that every class occurs among the training rows `train_idx` of split `split`.
///
/// # Errors
/// [`BenchError::Data`] naming the split and the missing class.
pub fn check_training_classes(
    name: &str,
    split: usize,
    labels: &[usize],
    train_idx: &[usize],
    num_classes: usize,
) -> Result<()> {
    let train: Vec<usize> = train_idx
        .iter()
        .map(|&i| labels.get(i).copied().unwrap_or(usize::MAX))
        .collect();
    check_all_classes_present(&train, num_classes).map_err(|e| {
        BenchError::Data(Error::config(
            "labels",
            format!(
                "classification on {name}, split {split}: {e} in the training rows (a model \
                 cannot learn a class it never sees)"
            ),
        ))
    })
}

/// Metrics and reliability bins of class probabilities `pred` at `labels`.
///
/// # Errors
/// A predictive without class probabilities; label errors.
pub fn evaluate(
    pred: &dgp_traits::predictive::Predictive,
    labels: &[usize],
) -> dgp_core::Result<(ClassMetrics, Vec<ReliabilityBin>)> {
    let probs = ClassProbs::from_predictive(pred)?;
    let metrics = ClassMetrics::compute(&probs, labels)?;
    let bins = reliability_bins(&probs, labels, ECE_BINS)?;
    Ok((metrics, bins))
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
    let likelihood = likelihood_by_name(Some(&spec.likelihood), k)?;
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
        let stats =
            Standardizer::fit_with(&split.train, StandardizeOptions::default().keep_targets())
                .map_err(run)?;
        let train = stats.transform(&split.train).map_err(run)?;
        let test_x = stats.transform_x(split.test.x()).map_err(run)?;
        let t0 = Instant::now();
        let mut model = build_model(spec, &likelihood, &train).map_err(run)?;
        let report = model
            .fit(&train, &spec.fit, &mut FitHooks::none())
            .map_err(run)?;
        let train_seconds = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let pred = model.predict(test_x.as_ref(), &spec.predict).map_err(run)?;
        let predict_seconds = t1.elapsed().as_secs_f64();
        let (metrics, reliability) = evaluate(&pred, &split.test_labels).map_err(run)?;
        out.push(ClassSplitRecord {
            task: CLASSIFICATION_TASK.into(),
            dataset: name.clone(),
            backend: backend.name().to_string(),
            layers: spec.common.layers,
            split: s,
            num_classes: k,
            likelihood: likelihood.clone(),
            n_train: split.train.n(),
            n_test: split.test.n(),
            metrics,
            reliability,
            train_seconds,
            predict_seconds,
            steps: report.steps,
            final_objective: report.final_objective,
            num_inducing: spec.common.num_inducing,
            hidden_width: spec.common.hidden_width,
            batch_size: spec.fit.batch_size.min(split.train.n()),
            learning_rate: spec.common.learning_rate.unwrap_or(0.0),
            predict_samples: spec.predict.samples,
            seed: spec.common.seed,
            model: model.describe(),
            settings: spec.settings.clone(),
            command: String::new(),
            protocol: String::new(),
        });
    }
    Ok(out)
}

/// Builds the untrained model of `spec`'s backend with `likelihood` for `train`: the
/// likelihood goes into the backend's settings under `likelihood` ([`with_likelihood`]).
///
/// # Errors
/// The settings' and the model constructor's errors.
pub fn build_model(
    spec: &ClassExperimentSpec,
    likelihood: &Likelihood,
    train: &Dataset,
) -> dgp_core::Result<Box<dyn Model>> {
    let settings = with_likelihood(&spec.settings, likelihood)?;
    spec.backend
        .build(&spec.common, &settings, &spec.fit, train, &FitHooks::none())
}

/// `settings` with the `likelihood` key set to `likelihood` (replacing the backend's
/// default likelihood wholesale when the kind differs; see
/// [`dgp_traits::backend::switches_variant`]).
///
/// # Errors
/// [`Error::Config`] if the likelihood cannot be serialised.
pub fn with_likelihood(settings: &Settings, likelihood: &Likelihood) -> dgp_core::Result<Settings> {
    let mut settings = settings.clone();
    settings.insert(
        "likelihood".into(),
        serde_json::to_value(likelihood).map_err(|e| Error::config("likelihood", e.to_string()))?,
    );
    Ok(settings)
}

/// The file name of a run's reliability diagram for data set `name`.
pub fn reliability_file_name(name: &str) -> String {
    crate::validate::calibration_file_name(name).replacen("calibration_", "reliability_", 1)
}

/// Trains and evaluates `spec` on split `k` (see the module docs).
///
/// # Errors
/// Reading the split, standardising, building, training, predicting or scoring fails.
pub fn run_class_split(
    spec: &ExperimentSpec<'_>,
    likelihood: &Likelihood,
    labels: &[usize],
    k: usize,
) -> Result<ClassSplitRecord> {
    let b = spec.backend;
    let label = format!(
        "{} {} {} split {k}",
        b.name(),
        model_label(spec.arch.layers),
        spec.data.name
    );
    let ctx = |what: &str| format!("{label}: {what}");
    let (train_idx, test_idx) = spec.data.split(k)?;
    let (train, test) = spec.data.split_data(k)?;
    // Inputs only: the labels are class indices ([`TargetScaling::Keep`]).
    let st = Standardizer::fit_with(&train, spec.data.standardize_options().keep_targets())
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let train_std = st
        .transform(&train)
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let test_x = st
        .transform_x(test.x())
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let test_labels: Vec<usize> = test_idx.iter().map(|&i| labels[i]).collect();
    let batch_size = spec.batch_size.min(train.n());
    let fit_cfg = FitConfig {
        steps: spec.steps,
        batch_size,
        seed: spec.seed,
        early_stopping: spec.early_stopping.clone(),
        convergence: spec.convergence,
    };
    let mut arch = spec.arch.clone();
    arch.settings = with_likelihood(&arch.settings, likelihood)
        .map_err(|e| BenchError::run(ctx("settings"), e))?;
    let t0 = Instant::now();
    let mut bar = BarObserver::new(spec.steps, &label, spec.progress);
    // Interruption, periodic checkpoints and resume, as in regression runs.
    let (model, fit) =
        crate::experiment::train_split(spec, &arch, k, &fit_cfg, &train_std, &mut bar, &label)?;
    let train_seconds = t0.elapsed().as_secs_f64();
    bar.finish();
    let t1 = Instant::now();
    let pred = model
        .predict(
            test_x.as_ref(),
            &PredictConfig {
                samples: spec.arch.predict_samples,
                seed: spec.seed.wrapping_add(PREDICT_SEED_OFFSET),
            },
        )
        .map_err(|e| BenchError::run(ctx("predicting"), e))?;
    let predict_seconds = t1.elapsed().as_secs_f64();
    let (metrics, reliability) =
        evaluate(&pred, &test_labels).map_err(|e| BenchError::run(ctx("metrics"), e))?;
    debug_assert_eq!(train_idx.len(), train.n());
    Ok(ClassSplitRecord {
        task: CLASSIFICATION_TASK.into(),
        dataset: spec.data.name.clone(),
        backend: b.name().to_string(),
        layers: spec.arch.layers,
        split: k,
        num_classes: likelihood.num_classes().unwrap_or(2),
        likelihood: likelihood.clone(),
        n_train: train.n(),
        n_test: test.n(),
        metrics,
        reliability,
        train_seconds,
        predict_seconds,
        steps: fit.steps,
        final_objective: fit.final_objective,
        num_inducing: spec.arch.num_inducing,
        hidden_width: spec.arch.hidden_width,
        batch_size,
        learning_rate: spec.learning_rate,
        predict_samples: spec.arch.predict_samples,
        seed: spec.seed,
        model: model.describe(),
        settings: spec.arch.settings.clone(),
        command: String::new(),
        protocol: spec.protocol.clone(),
    })
}

/// The reliability diagrams of `records`, one panel per (backend, layers), bins pooled
/// over splits.
pub fn reliability_series(
    records: &[ClassSplitRecord],
) -> Vec<(String, Vec<dgp_traits::classification::ReliabilityBin>)> {
    let mut groups: Vec<(String, Vec<Vec<_>>)> = Vec::new();
    for r in records {
        let label = format!(
            "{} {} ({})",
            r.backend,
            model_label(r.layers),
            r.likelihood.name()
        );
        match groups.iter_mut().find(|(l, _)| *l == label) {
            Some((_, v)) => v.push(r.reliability.clone()),
            None => groups.push((label, vec![r.reliability.clone()])),
        }
    }
    groups
        .into_iter()
        .filter_map(|(l, sets)| {
            dgp_traits::classification::ReliabilityBin::pool(&sets)
                .ok()
                .map(|b| (l, b))
        })
        .collect()
}

/// One row of [`class_table`]: mean ± s.e. over the splits of one (data set, backend,
/// layers, likelihood, run configuration).
#[derive(Clone, Debug, Serialize)]
pub struct ClassSummaryRow {
    /// Data set.
    pub dataset: String,
    /// Backend.
    pub backend: String,
    /// `SGP`, `DGP2`, …
    pub model: String,
    /// Likelihood name.
    pub likelihood: String,
    /// Splits summarised.
    pub n_splits: usize,
    /// Steps (mean over splits, rounded).
    pub steps: usize,
    /// Test error rate.
    pub error_rate: MeanSe,
    /// Test log loss (classification NLL).
    pub log_loss: MeanSe,
    /// Brier score.
    pub brier: MeanSe,
    /// ECE, 15 bins.
    pub ece: MeanSe,
    /// AUC (binary problems), else `None`.
    pub auc: Option<MeanSe>,
    /// Training seconds.
    pub train_seconds: MeanSe,
}

/// The records grouped by (data set, backend, layers, likelihood, M, hidden width, batch,
/// lr, steps, command-line settings), in order of first appearance, as mean ± s.e. rows.
pub fn summarise_class(records: &[ClassSplitRecord]) -> Vec<ClassSummaryRow> {
    let key = |r: &ClassSplitRecord| {
        (
            r.dataset.clone(),
            r.backend.clone(),
            r.layers,
            r.likelihood.name(),
            r.num_inducing,
            r.hidden_width,
            r.batch_size,
            r.learning_rate.to_bits(),
            r.steps,
            serde_json::to_string(&r.settings).unwrap_or_default(),
        )
    };
    let mut groups: Vec<(_, Vec<&ClassSplitRecord>)> = Vec::new();
    for r in records {
        let k = key(r);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    groups
        .into_iter()
        .map(|(_, rs)| {
            let of = |f: &dyn Fn(&ClassSplitRecord) -> f64| {
                MeanSe::of(&rs.iter().map(|r| f(r)).collect::<Vec<_>>())
            };
            let aucs: Vec<f64> = rs.iter().filter_map(|r| r.metrics.auc).collect();
            let r0 = rs[0];
            ClassSummaryRow {
                dataset: r0.dataset.clone(),
                backend: r0.backend.clone(),
                model: crate::experiment::model_label(r0.layers),
                likelihood: r0.likelihood.name().to_string(),
                n_splits: rs.len(),
                steps: (rs.iter().map(|r| r.steps as f64).sum::<f64>() / rs.len() as f64).round()
                    as usize,
                error_rate: of(&|r| r.metrics.error_rate),
                log_loss: of(&|r| r.metrics.log_loss),
                brier: of(&|r| r.metrics.brier),
                ece: of(&|r| r.metrics.ece),
                auc: (aucs.len() == rs.len()).then(|| MeanSe::of(&aucs)),
                train_seconds: of(&|r| r.train_seconds),
            }
        })
        .collect()
}

/// The classification table in GitHub Markdown (mean ± s.e. over splits).
pub fn class_table(rows: &[ClassSummaryRow]) -> String {
    let mut s = String::from(
        "| data | backend | model | likelihood | splits | steps | error | NLL (log loss) | Brier | ECE | AUC | train s |\n\
         |---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.dataset,
            r.backend,
            r.model,
            r.likelihood,
            r.n_splits,
            r.steps,
            fmt_mean_se(&r.error_rate),
            fmt_mean_se(&r.log_loss),
            fmt_mean_se(&r.brier),
            fmt_mean_se(&r.ece),
            r.auc.as_ref().map_or("—".to_string(), fmt_mean_se),
            fmt_mean_se(&r.train_seconds),
        ));
    }
    s
}

/// The sentence under classification tables.
pub const CLASS_TABLE_NOTE: &str = "error = test error rate; NLL = mean negative log \
probability of the test label (log loss); Brier = multiclass Brier score; ECE = expected \
calibration error over 15 equal-width bins of the top-class confidence; AUC for binary \
problems; mean ± standard error over splits, s.e. = sd/√n with ddof = 1 (no ± with one split).";

/// True when the first record of the JSON Lines file `path` is a classification record
/// (`"task": "classification"`).
///
/// # Errors
/// [`BenchError::Usage`] if the file cannot be read.
pub fn holds_class_records(path: &Path) -> Result<bool> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::Usage(format!("cannot read {}: {e}", path.display())))?;
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    Ok(serde_json::from_str::<serde_json::Value>(first)
        .ok()
        .and_then(|v| {
            v.get("task")
                .and_then(|t| t.as_str())
                .map(|t| t == CLASSIFICATION_TASK)
        })
        .unwrap_or(false))
}

/// Reads a JSON Lines file of [`ClassSplitRecord`]s.
///
/// # Errors
/// [`BenchError::Usage`] if the file cannot be read or a line is not a classification
/// record.
pub fn read_class_records(path: &Path) -> Result<Vec<ClassSplitRecord>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BenchError::Usage(format!("cannot read {}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let r: ClassSplitRecord = serde_json::from_str(l).map_err(|e| {
                BenchError::Usage(format!(
                    "{}:{}: not a classification record: {e}",
                    path.display(),
                    i + 1
                ))
            })?;
            if r.task != CLASSIFICATION_TASK {
                return Err(BenchError::Usage(format!(
                    "{}:{}: not a classification record (mixed with regression records?)",
                    path.display(),
                    i + 1
                )));
            }
            Ok(r)
        })
        .collect()
}
