//! `dgp-bench stream`: trains one backend from an out-of-core row store and evaluates it
//! on a test row store chunk by chunk, with memory bounded by the model and the batch, not
//! by the data.
//!
//! 1. Standardisation statistics of the training file in streaming passes
//!    ([`dgp_io::standardize::fit_standardizer`], the same numbers as in memory).
//! 2. The model is built on a seeded reservoir sample of `--init-rows` standardised rows
//!    (k-means++ of the inducing inputs, the hidden layers' mean functions).
//! 3. Training draws its minibatches by index from the memory-mapped file through
//!    [`dgp_io::standardize::StandardizedRows`] (or, with `--in-memory`, from the same rows
//!    loaded into memory: the same seed gives the same run bit for bit).
//! 4. The test file is predicted in chunks of `--predict-chunk` rows, chunk k with
//!    prediction seed `seed + k` (so a test file's predictions are defined by the seed and
//!    the chunk size, whether its rows come from a file or from memory); NLL and RMSE are
//!    accumulated on the way and per-row predictions optionally written as CSV or Parquet
//!    (with the predictive mixture's components; [`PredictionWriter`]).
//!
//! Classification (`--task classification`, `--likelihood NAME` or a `likelihood`
//! setting; K and the likelihood decided as `run` decides them): before step 1 the labels
//! of both files are checked in one streamed pass each ([`dgp_io::labels::class_counts`]:
//! integers in `0..K`, K ≥ 2, every class in the training file), step 1 standardises the
//! inputs alone ([`dgp_traits::data::TargetScaling::Keep`]), and step 4 scores the class
//! probabilities with [`ClassMetricsAccumulator`] (see [`predict_file`]).
//!
//! The record says how long training took, the step rate, and the largest anonymous
//! resident memory (`RssAnon` of `/proc/self/status`, sampled every 50 steps and after
//! prediction; memory-mapped file pages are page cache, not counted there).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use parquet::arrow::ArrowWriter;

use clap::Args;
use dgp_io::labels::class_counts;
use dgp_io::rowstore::RowStore;
use dgp_io::standardize::{StandardizedRows, fit_standardizer};
use dgp_traits::backend::DEFAULT_PRESET;
use dgp_traits::classification::{
    ClassMetrics, ClassMetricsAccumulator, ClassProbs, ECE_BINS, ReliabilityBin, class_label,
};
use dgp_traits::data::{RowSource, StandardizeOptions, Standardizer};
use dgp_traits::fit::{FitHooks, LrSchedule, Progress};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::{FitConfig, Model, PredictConfig};
use dgp_traits::train::{FitSummary, HeldOutRule};
use faer::Mat;
use serde::Serialize;

use super::{ArchArgs, ModelFlags, TaskFlags, arch_from, nonzero, progress_enabled};
use crate::backends::find_backend;
use crate::checkpointing::{
    CheckpointFlags, CheckpointTarget, SplitControl, backend_refusal, start_session_for,
};
use crate::classification::{label_error, with_likelihood};
use crate::error::{BenchError, Result};
use crate::progress::BarObserver;
use crate::session::Process;

/// Arguments of `dgp-bench stream`.
#[derive(Debug, Args)]
pub struct StreamArgs {
    /// Training rows: a row store (written by `dgp-bench synth` or `dgp-bench convert`).
    #[arg(long, value_name = "FILE")]
    pub train: PathBuf,
    /// Test rows: a row store with the same columns.
    #[arg(long, value_name = "FILE")]
    pub test: PathBuf,
    /// Backend (one that declares it streams, unless --in-memory).
    #[arg(long, default_value = crate::backends::DEFAULT_BACKEND)]
    pub backend: String,
    /// Number of GP layers.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Optimisation steps [default: the backend's].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Monte Carlo samples of the training objective.
    #[arg(long, default_value_t = 1)]
    pub train_samples: usize,
    /// Predictive mixture components.
    #[arg(long, default_value_t = 10)]
    pub samples: usize,
    /// Seed of initialisation, minibatch order, noise and prediction.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Rows of the seeded reservoir sample the model is initialised on.
    #[arg(long, default_value_t = 10_000)]
    pub init_rows: usize,
    /// Load the training rows into memory and train from there (the comparison run).
    #[arg(long)]
    pub in_memory: bool,
    /// Held-out early stopping: `patience` (the core's patience rule, 2/17 of the
    /// training rows held out), `lindinger` (the rule of Lindinger et al. 2020 that
    /// `run --protocol lindinger` trains with), a rule as JSON (`{"patience":
    /// {"every": 50, "patience": 10}}`) or `none` [default: none]. The held-out rows (at most
    /// 65 536, drawn from the row count and --seed alone) are read into memory; training
    /// reads the others from the file, and equals the --in-memory run.
    #[arg(long, value_name = "RULE")]
    pub early_stopping: Option<String>,
    /// Test rows per prediction chunk.
    #[arg(long, default_value_t = 10_000)]
    pub predict_chunk: usize,
    /// Write per-row predictions (mean, variance, log density, target) here: Parquet with
    /// the mixture's weights, means and variances when FILE ends in `.parquet`, CSV otherwise.
    #[arg(long, value_name = "FILE")]
    pub predictions: Option<PathBuf>,
    /// Append the run's record as one JSON line here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The test rows come from `dgp-bench synth`: also report the Bayes-optimal NLL.
    #[arg(long)]
    pub synth: bool,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// `--task`, `--likelihood`, `--classes`.
    #[command(flatten)]
    pub task: TaskFlags,
    /// Model and optimiser flags.
    #[command(flatten)]
    pub model: ModelFlags,
    /// `--checkpoint DIR`, `--resume DIR`, `--checkpoint-every N`: the training state is
    /// saved to `DIR/stream-<backend>-L<layers>.json` (every N steps, on SIGINT/SIGTERM and
    /// at the end; under MPI by rank 0 only), and `--resume DIR` with the same other flags
    /// and training file continues to the same numbers as a run never interrupted.
    #[command(flatten)]
    pub ckpt: CheckpointFlags,
}

/// The record of one `stream` run.
#[derive(Clone, Debug, Serialize)]
pub struct StreamRecord {
    /// The command line.
    pub command: String,
    /// Backend name.
    pub backend: String,
    /// The model's own description.
    pub model: String,
    /// Number of layers.
    pub layers: usize,
    /// Where the training rows were read from (`file` or `memory`).
    pub rows_from: String,
    /// Training rows.
    pub n_train: usize,
    /// Test rows.
    pub n_test: usize,
    /// Minibatch size.
    pub batch: usize,
    /// Steps taken.
    pub steps: usize,
    /// Training wall-clock seconds.
    pub train_seconds: f64,
    /// Milliseconds per training step.
    pub ms_per_step: f64,
    /// Mean test negative log predictive density, original units (classification: the
    /// log loss, the mean negative log probability of the test label).
    pub nll: f64,
    /// Test root mean squared error of the predictive mean, original units (regression
    /// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmse: Option<f64>,
    /// Classification: K, the likelihood, the test metrics and reliability bins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<StreamClassResult>,
    /// Bayes-optimal mean test NLL (synthetic data only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bayes_nll: Option<f64>,
    /// Best mean test NLL of a predictor with one noise variance (synthetic data only;
    /// [`dgp_io::synth::NoiseFloor::homoscedastic_nll`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homoscedastic_nll: Option<f64>,
    /// Expected test RMSE of the exact mean (synthetic data only;
    /// [`dgp_io::synth::NoiseFloor::rmse`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_rmse: Option<f64>,
    /// Largest anonymous resident memory seen, MiB (`RssAnon`).
    pub peak_rss_anon_mib: f64,
    /// Seconds spent predicting the test file.
    pub predict_seconds: f64,
    /// The held-out early-stopping rule (`--early-stopping`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_stopping: Option<HeldOutRule>,
    /// What the held-out early stopping did (rows held out, step kept, scores), if it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out: Option<FitSummary>,
}

/// The classification part of a [`StreamRecord`]: what a classification record of `run`
/// ([`crate::classification::ClassSplitRecord`]) says of its test set.
#[derive(Clone, Debug, Serialize)]
pub struct StreamClassResult {
    /// K.
    pub num_classes: usize,
    /// The likelihood configuration used.
    pub likelihood: Likelihood,
    /// Training rows per class (index k: class k).
    pub train_class_counts: Vec<u64>,
    /// Test metrics ([`ClassMetricsAccumulator`], the code of `run`'s metrics).
    pub metrics: ClassMetrics,
    /// The test rows' [`ECE_BINS`] reliability bins.
    pub reliability: Vec<ReliabilityBin>,
    /// Synthetic classification data only ([`dgp_io::synth::class_floor`]): the
    /// Bayes-optimal test error rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bayes_error: Option<f64>,
    /// Synthetic classification data only: the Bayes-optimal test log loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bayes_log_loss: Option<f64>,
}

/// Progress bar and memory samples of a streamed fit.
struct StreamObserver {
    bar: BarObserver,
    peak_anon_kib: u64,
}

impl Progress for StreamObserver {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        self.bar.on_step(step, total, objective);
        if step.is_multiple_of(50) {
            self.peak_anon_kib = self.peak_anon_kib.max(rss_anon_kib());
        }
    }
}

/// `RssAnon` of this process in KiB (0 where `/proc` does not say).
pub fn rss_anon_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("RssAnon:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn open(path: &Path, what: &str) -> Result<RowStore> {
    RowStore::open(path).map_err(|e| BenchError::run(format!("opening {what}"), e))
}

/// Runs `dgp-bench stream`.
///
/// # Errors
/// Usage errors (a backend that cannot stream, bad sizes, an output that names an input),
/// read errors of the files, training and prediction errors.
pub fn cmd_stream(a: &StreamArgs, process: &Process) -> Result<()> {
    let tmp = a
        .predictions
        .as_deref()
        .map(PredictionWriter::temporary_path);
    for out in [&a.predictions, &tmp, &a.json].into_iter().flatten() {
        for input in [&a.train, &a.test] {
            if same_file(out, input) {
                return Err(BenchError::Usage(format!(
                    "output {} is the input file {}",
                    out.display(),
                    input.display()
                )));
            }
        }
    }
    for (flag, out) in [("--predictions", &a.predictions), ("--json", &a.json)] {
        if let Some(p) = out {
            crate::locks::lock_file(&format!("{flag} {}", p.display()), p)?;
        }
    }
    let b = find_backend(&a.backend)?;
    if !a.in_memory && !b.capabilities().streams {
        return Err(BenchError::Usage(format!(
            "--backend {}: it trains on rows in memory only (backends that stream: {}); add --in-memory",
            b.name(),
            crate::backends::names_where(|c| c.streams)
        )));
    }
    let early_stopping = a
        .early_stopping
        .as_deref()
        .map(super::parse_early_stopping)
        .transpose()?
        .flatten();
    if early_stopping.is_some() && !b.capabilities().held_out_early_stopping {
        return Err(BenchError::Usage(format!(
            "--backend {}: it does not support held-out early stopping; drop --early-stopping",
            b.name()
        )));
    }
    let requested = super::classify::requested_from(&a.task, &a.model)?;
    if requested.is_some() && a.predictions.is_some() {
        return Err(BenchError::Usage(
            "--predictions: per-row predictions are written for regression streams only; \
             drop --predictions (the record holds the classification metrics)"
                .into(),
        ));
    }
    if requested.is_none() && a.task.classes.is_some() {
        return Err(BenchError::Usage(
            "--classes applies to classification streams (--task classification or \
             --likelihood NAME)"
                .into(),
        ));
    }
    let init_rows = nonzero("--init-rows", a.init_rows)?;
    let chunk = nonzero("--predict-chunk", a.predict_chunk)?;
    a.model.refuse_unused_lr(&[b])?;
    let build_arch = |flags: &ModelFlags| {
        let settings = flags.settings_input((None, None))?;
        arch_from(
            b,
            &ArchArgs {
                preset: DEFAULT_PRESET,
                layers: a.layers,
                train_samples: a.train_samples,
                predict_samples: a.samples,
                samples: Some(a.samples),
                sample_flags: ["--train-samples", "--samples"],
                flags,
                settings: &settings,
                tune: false,
                seed: a.seed,
            },
        )
    };
    // The flags' own checks come before any file is read; a partial likelihood setting
    // is completed with K from the training labels first.
    let early_arch = match &requested {
        Some(super::classify::Requested::Setting(_)) => None,
        _ => {
            let arch = build_arch(&a.model)?;
            super::steps_for(b, &arch.settings, a.steps, b.defaults().training.steps)?;
            Some(arch)
        }
    };
    let train_file = open(&a.train, "the training rows")?;
    let test_file = open(&a.test, "the test rows")?;
    if (test_file.input_dim(), test_file.output_dim())
        != (train_file.input_dim(), train_file.output_dim())
    {
        return Err(BenchError::Usage(format!(
            "--test has {}+{} columns, --train {}+{}",
            test_file.input_dim(),
            test_file.output_dim(),
            train_file.input_dim(),
            train_file.output_dim()
        )));
    }
    // Classification: the labels of both files are checked before anything is trained
    // (every class of 0..K in the training file), K decided as `run` decides it.
    let class = match &requested {
        None => None,
        Some(req) => {
            let rows = dgp_io::chunks::DEFAULT_CHUNK_ROWS;
            let named = |what: &str, path: &Path| format!("{what} {}", path.display());
            let train_counts = class_counts(&train_file, a.task.classes, true, rows)
                .map_err(|e| label_error(&named("the training file", &a.train), e))?;
            let k = train_counts.num_classes;
            class_counts(&test_file, Some(k), false, rows)
                .map_err(|e| label_error(&named("the test file", &a.test), e))?;
            let likelihood = req.resolve(k)?;
            super::classify::check_backend_supports(b, &likelihood, k)?;
            let counts = (0..k)
                .map(|c| train_counts.counts.get(&c).copied().unwrap_or(0))
                .collect::<Vec<_>>();
            Some((req, likelihood, counts))
        }
    };
    let mut arch = match (early_arch, &class) {
        (Some(arch), _) => arch,
        (None, Some((req, lik, _))) => build_arch(&req.completed(&a.model, lik)?)?,
        (None, None) => build_arch(&a.model)?,
    };
    if let Some((req, lik, _)) = &class {
        req.check_settings(&arch.settings)?;
        arch.settings = with_likelihood(&arch.settings, lik)
            .map_err(|e| BenchError::Usage(crate::backends::config_message(e)))?;
    }
    // The configuration's schedule after its settings (its convergence stop).
    let resolved = b.check(&arch)?;
    let steps = super::steps_for(b, &arch.settings, a.steps, b.defaults().training.steps)?;
    process.stop_on_signals();
    // Classification standardises the inputs alone: labels are class indices.
    let opts = if class.is_some() {
        StandardizeOptions::default().keep_targets()
    } else {
        StandardizeOptions::default()
    };
    let st = fit_standardizer(&train_file, opts, dgp_io::chunks::DEFAULT_CHUNK_ROWS)
        .map_err(|e| BenchError::run("standardising the training rows", e))?;
    let n = train_file.n();
    // The backend's rate for a run with this rule on n rows (nested: lr 0.03 only where
    // its held-out rule runs), unless --lr gives one.
    let lr = a
        .model
        .lr
        .unwrap_or(b.defaults().learning_rate_for(early_stopping.as_ref(), n));
    let target = CheckpointTarget {
        file: format!("stream-{}-L{}.json", b.name(), a.layers),
        // Every setting that affects the numbers; the training file by its size and its
        // standardisation statistics (a pure function of its rows).
        fingerprint: serde_json::json!({
            "command": "stream",
            "n": n,
            "columns": [train_file.input_dim(), train_file.output_dim()],
            "standardizer": serde_json::to_value(&st).unwrap_or_default(),
            "backend": b.name(),
            "arch": serde_json::to_value(&arch).unwrap_or_default(),
            "steps": steps,
            "batch_size": a.model.batch.unwrap_or(b.defaults().training.batch_size).min(n),
            "learning_rate": lr,
            "seed": a.seed,
            "init_rows": init_rows,
        }),
        refusal: backend_refusal(b).or_else(|| {
            early_stopping.is_some().then(|| {
                "--checkpoint/--resume: held-out early stopping cannot be checkpointed yet; \
                 drop --early-stopping"
                    .to_string()
            })
        }),
        learning_rate: b.capabilities().uses_learning_rate.then_some(lr),
    };
    let session = start_session_for(&a.ckpt, std::slice::from_ref(&target), process)?;
    let (source, rows_from): (Box<dyn RowSource>, &str) = if a.in_memory {
        let d = train_file
            .to_dataset()
            .and_then(|d| st.transform(&d))
            .map_err(|e| BenchError::run("loading the training rows", e))?;
        (Box::new(d), "memory")
    } else {
        let rows = StandardizedRows::new(train_file, st.clone())
            .map_err(|e| BenchError::run("standardising the training rows", e))?;
        (Box::new(rows), "file")
    };
    let source = source.as_ref();
    let sample = dgp_io::sample::reservoir_sample(source, init_rows.min(n), a.seed)
        .map_err(|e| BenchError::run("sampling rows for the initialisation", e))?;
    let batch = a
        .model
        .batch
        .unwrap_or(b.defaults().training.batch_size)
        .min(n);
    let fit = FitConfig {
        steps,
        batch_size: nonzero("--batch", batch)?,
        seed: a.seed,
        early_stopping: early_stopping.clone(),
        convergence: resolved.training.convergence,
    };
    let mut obs = StreamObserver {
        bar: BarObserver::new(
            fit.steps,
            &format!("{} L={}", b.name(), a.layers),
            progress_enabled(!a.quiet),
        ),
        peak_anon_kib: rss_anon_kib(),
    };
    let checkpointing = a.ckpt.checkpoint.is_some() || a.ckpt.resume.is_some();
    let label = format!("training {}", b.name());
    let start = Instant::now();
    let (model, report) = {
        let mut control = SplitControl::for_target(&mut obs, &session, target)?;
        if let (Some(p), Some(step)) = (control.resumed_from(), control.resumed_step()) {
            eprintln!("resuming from step {step} of {}", p.display());
        }
        let mut hooks = FitHooks::all(&mut control);
        let mut model = b.build_model(&arch, lr, &LrSchedule::Constant, &fit, &sample, &hooks)?;
        drop(sample);
        let report = model.fit(source, &fit, &mut hooks);
        let report = report.map_err(|e| control.fit_error(label.clone(), e))?;
        match control.finish(&label) {
            // Without checkpoints the stopped model is still evaluated and recorded below.
            Err(BenchError::Interrupted(_)) if !checkpointing => {}
            other => other?,
        }
        (model, report)
    };
    let train_seconds = start.elapsed().as_secs_f64();
    obs.bar.finish();
    let t0 = Instant::now();
    let mut writer = match &a.predictions {
        Some(p) => Some(PredictionWriter::create(p)?),
        None => None,
    };
    let eval = predict_file(
        model.as_ref(),
        &st,
        &test_file,
        chunk,
        &PredictConfig {
            samples: a.samples,
            seed: a.seed,
        },
        class
            .as_ref()
            .map(|(_, lik, _)| lik.num_classes().unwrap_or(2)),
        writer.as_mut(),
    )?;
    if let Some(w) = writer {
        w.finish()?;
    }
    let predict_seconds = t0.elapsed().as_secs_f64();
    obs.peak_anon_kib = obs.peak_anon_kib.max(rss_anon_kib());
    let floor = if a.synth && class.is_none() {
        Some(
            dgp_io::synth::noise_floor(&test_file)
                .map_err(|e| BenchError::run("the Bayes-optimal NLL of the test rows", e))?,
        )
    } else {
        None
    };
    let classification = match (class, eval.class) {
        (Some((_, likelihood, train_class_counts)), Some((metrics, reliability))) => {
            let bayes = if a.synth {
                Some(dgp_io::synth::class_floor(&test_file).map_err(|e| {
                    BenchError::run("the Bayes-optimal error and log loss of the test rows", e)
                })?)
            } else {
                None
            };
            Some(StreamClassResult {
                num_classes: train_class_counts.len(),
                likelihood,
                train_class_counts,
                metrics,
                reliability,
                bayes_error: bayes.map(|b| b.error_rate),
                bayes_log_loss: bayes.map(|b| b.log_loss),
            })
        }
        _ => None,
    };
    let record = StreamRecord {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        backend: b.name().into(),
        model: model.describe(),
        layers: a.layers,
        rows_from: rows_from.into(),
        n_train: n,
        n_test: test_file.n(),
        batch: fit.batch_size,
        steps: report.steps,
        train_seconds,
        ms_per_step: 1e3 * train_seconds / report.steps.max(1) as f64,
        nll: eval.nll,
        rmse: eval.rmse,
        classification,
        bayes_nll: floor.map(|f| f.bayes_nll),
        homoscedastic_nll: floor.map(|f| f.homoscedastic_nll),
        noise_rmse: floor.map(|f| f.rmse),
        peak_rss_anon_mib: obs.peak_anon_kib as f64 / 1024.0,
        predict_seconds,
        early_stopping,
        held_out: report.held_out.clone(),
    };
    print_record(&record);
    if let Some(path) = &a.json {
        append_json(path, &record)?;
    }
    if session.stop_requested() {
        return Err(BenchError::Interrupted(format!(
            "training stopped after {} of {} steps; the record above is of that model",
            report.steps, fit.steps
        )));
    }
    Ok(())
}

/// Accumulated test metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct FileMetrics {
    /// Mean negative log predictive density (classification: the log loss).
    pub nll: f64,
    /// Root mean squared error of the predictive mean (regression only).
    pub rmse: Option<f64>,
    /// Classification: the metrics and reliability bins of
    /// [`ClassMetricsAccumulator`].
    pub class: Option<(ClassMetrics, Vec<ReliabilityBin>)>,
    /// Rows predicted.
    pub rows: usize,
}

/// Predicts the rows of `test` (original units) in chunks of `chunk` rows — chunk k with
/// prediction seed `cfg.seed + k` — accumulating the metrics in row order and handing
/// each chunk's predictive to `writer`.
///
/// Regression (`classes` = `None`): NLL and squared error of the predictive mapped back
/// to original units. Classification (`classes` = `Some(K)`, targets class labels,
/// inputs-only standardiser): the predictive's class probabilities go chunk by chunk into
/// a [`ClassMetricsAccumulator`] with [`ECE_BINS`] bins, the code the in-memory metrics
/// run through, so the same predictions give the same metrics bit for bit; memory is the
/// chunk plus, for K = 2, 8 bytes per test row (the scores AUC ranks).
///
/// # Errors
/// Read errors of `test`, prediction errors, label errors, write errors.
pub fn predict_file(
    model: &dyn Model,
    st: &Standardizer,
    test: &dyn RowSource,
    chunk: usize,
    cfg: &PredictConfig,
    classes: Option<usize>,
    mut writer: Option<&mut PredictionWriter>,
) -> Result<FileMetrics> {
    let n = test.n();
    let (d, p) = (test.input_dim(), test.output_dim());
    let (mut nll, mut se) = (0.0, 0.0);
    let mut acc = classes
        .map(|k| ClassMetricsAccumulator::new(k, ECE_BINS))
        .transpose()
        .map_err(|e| BenchError::run("scoring the test rows", e))?;
    let mut labels = Vec::new();
    let mut idx = Vec::with_capacity(chunk);
    let mut start = 0;
    let mut k = 0u64;
    while start < n {
        let len = chunk.min(n - start);
        idx.clear();
        idx.extend(start..start + len);
        let mut x = Mat::zeros(len, d);
        let mut y = Mat::zeros(len, p);
        test.gather(&idx, x.as_mut(), y.as_mut())
            .map_err(|e| BenchError::run("reading the test rows", e))?;
        let run = |e| BenchError::run("predicting the test rows", e);
        let xs = st.transform_x(x.as_ref()).map_err(run)?;
        let pc = PredictConfig {
            samples: cfg.samples,
            seed: cfg.seed.wrapping_add(k),
        };
        let pred = model.predict(xs.as_ref(), &pc).map_err(run)?;
        if let Some(acc) = acc.as_mut() {
            labels.clear();
            for i in 0..len {
                labels.push(class_label(start + i, y[(i, 0)]).map_err(run)?);
            }
            let probs = ClassProbs::from_predictive(&pred).map_err(run)?;
            acc.push(&probs, &labels).map_err(run)?;
        } else {
            let pred = pred.unstandardize(&st.y_mean, &st.y_std).map_err(run)?;
            let ld = pred.log_density(y.as_ref()).map_err(run)?;
            let mean = pred.mean();
            for (i, l) in ld.iter().enumerate() {
                nll -= l;
                for j in 0..p {
                    let e = mean[(i, j)] - y[(i, j)];
                    se += e * e;
                }
            }
            if let Some(w) = writer.as_deref_mut() {
                w.write_chunk(&pred, &ld, y.as_ref())?;
            }
        }
        start += len;
        k += 1;
    }
    if let Some(acc) = acc {
        let (metrics, bins) = acc
            .finish()
            .map_err(|e| BenchError::run("scoring the test rows", e))?;
        return Ok(FileMetrics {
            nll: metrics.log_loss,
            rmse: None,
            class: Some((metrics, bins)),
            rows: n,
        });
    }
    Ok(FileMetrics {
        nll: nll / n as f64,
        rmse: Some((se / (n * p) as f64).sqrt()),
        class: None,
        rows: n,
    })
}

/// Per-row predictions of the first output, written chunk by chunk to a temporary file
/// (`FILE.tmp` beside `FILE`) that [`PredictionWriter::finish`] renames into place, so an
/// interrupted or failed run never leaves a truncated file under the final name (a writer
/// dropped unfinished removes its temporary file).
///
/// The format follows the extension of `FILE`:
/// - `.parquet`: Float64 columns `mean`, `variance`, `log_density`, `y` and, when the
///   predictive is a mixture of S > 1 components, `weight_k`, `mean_k`, `variance_k` for
///   k = 0..S (component k's weight, mean and variance with noise; the weights are repeated
///   on every row, equal weights included, so the schema is uniform per file). The mixture
///   columns satisfy `mean = Σ_k weight_k mean_k` and, by the law of total variance,
///   `variance = Σ_k weight_k (variance_k + (mean_k − mean)²)`. One row group per
///   prediction chunk: memory is bounded by the chunk, not the file.
/// - anything else: CSV with the header `mean,variance,log_density,y`.
pub struct PredictionWriter {
    path: PathBuf,
    tmp: PathBuf,
    sink: Option<Sink>,
}

enum Sink {
    Csv(std::io::BufWriter<std::fs::File>),
    Parquet(Box<ParquetSink>),
}

/// The Parquet writer, created at the first chunk (the number of mixture components fixes
/// the schema); `pending` holds the file until then.
struct ParquetSink {
    pending: Option<std::fs::File>,
    writer: Option<(ArrowWriter<std::fs::File>, Arc<ArrowSchema>, usize)>,
}

impl PredictionWriter {
    /// The temporary name `path` is written under before the rename: `path` + `.tmp`.
    pub fn temporary_path(path: &Path) -> PathBuf {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        PathBuf::from(tmp)
    }

    /// A writer to `path` (through [`PredictionWriter::temporary_path`]), Parquet when
    /// `path` ends in `.parquet`, CSV otherwise.
    ///
    /// # Errors
    /// [`BenchError::Output`] when the file cannot be created.
    pub fn create(path: &Path) -> Result<Self> {
        let tmp = Self::temporary_path(path);
        let f = std::fs::File::create(&tmp).map_err(|e| BenchError::output(path, e))?;
        let parquet = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
        let mut w = PredictionWriter {
            path: path.to_path_buf(),
            tmp,
            sink: None,
        };
        w.sink = Some(if parquet {
            Sink::Parquet(Box::new(ParquetSink {
                pending: Some(f),
                writer: None,
            }))
        } else {
            let mut out = std::io::BufWriter::new(f);
            writeln!(out, "mean,variance,log_density,y").map_err(|e| w.err(e))?;
            Sink::Csv(out)
        });
        Ok(w)
    }

    fn err(&self, e: impl ToString) -> BenchError {
        BenchError::output(&self.path, e)
    }

    /// Appends one chunk: `pred` for its rows, `ld` their log densities at the targets `y`
    /// (original units); the first output is written.
    ///
    /// # Errors
    /// [`BenchError::Output`] on a write failure, or when a Parquet file's chunk has another
    /// number of mixture components than its first chunk, or the lengths disagree.
    pub fn write_chunk(
        &mut self,
        pred: &dgp_traits::predictive::Predictive,
        ld: &[f64],
        y: faer::MatRef<'_, f64>,
    ) -> Result<()> {
        let n = ld.len();
        if pred.n_points() != n || y.nrows() != n || pred.n_outputs() == 0 || y.ncols() == 0 {
            return Err(self.err(format!(
                "a chunk of {} predictions, {} log densities and {} targets",
                pred.n_points(),
                n,
                y.nrows()
            )));
        }
        let (mean, var) = (pred.mean(), pred.variance());
        let path = self.path.clone();
        let err = |e: &dyn ToString| BenchError::output(&path, e.to_string());
        match self.sink.as_mut() {
            Some(Sink::Csv(out)) => {
                for (i, l) in ld.iter().enumerate() {
                    writeln!(out, "{},{},{},{}", mean[(i, 0)], var[(i, 0)], l, y[(i, 0)])
                        .map_err(|e| err(&e))?;
                }
                Ok(())
            }
            Some(Sink::Parquet(pq)) => {
                let s = pred.n_components();
                if pq.writer.is_none() {
                    let schema = Arc::new(parquet_schema(s));
                    let file = pq.pending.take().ok_or_else(|| err(&"no open file"))?;
                    let w =
                        ArrowWriter::try_new(file, schema.clone(), None).map_err(|e| err(&e))?;
                    pq.writer = Some((w, schema, s));
                }
                let Some((w, schema, s0)) = pq.writer.as_mut() else {
                    return Err(err(&"no open writer"));
                };
                if *s0 != s {
                    return Err(err(&format!(
                        "a chunk with {s} mixture components after chunks with {s0}"
                    )));
                }
                let col = |f: &dyn Fn(usize) -> f64| -> ArrayRef {
                    Arc::new(Float64Array::from_iter_values((0..n).map(f)))
                };
                let mut cols: Vec<ArrayRef> = vec![
                    col(&|i| mean[(i, 0)]),
                    col(&|i| var[(i, 0)]),
                    col(&|i| ld[i]),
                    col(&|i| y[(i, 0)]),
                ];
                if s > 1 {
                    let (m, v) = (&pred.means()[0], &pred.variances()[0]);
                    for (k, &wk) in pred.weights().iter().enumerate() {
                        cols.push(col(&|_| wk));
                        cols.push(col(&|i| m[(i, k)]));
                        cols.push(col(&|i| v[(i, k)]));
                    }
                }
                let batch = RecordBatch::try_new(schema.clone(), cols).map_err(|e| err(&e))?;
                w.write(&batch).map_err(|e| err(&e))?;
                w.flush().map_err(|e| err(&e))
            }
            None => Err(err(&"the writer is finished")),
        }
    }

    /// Completes the file (the Parquet footer; a Parquet file with no chunk gets the
    /// one-component schema and no rows), syncs it and renames it into place.
    ///
    /// # Errors
    /// [`BenchError::Output`] on a write failure.
    pub fn finish(mut self) -> Result<()> {
        let done = self.complete();
        if done.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        done
    }

    fn complete(&mut self) -> Result<()> {
        let f = match self.sink.take() {
            Some(Sink::Csv(out)) => out.into_inner().map_err(|e| self.err(e))?,
            Some(Sink::Parquet(pq)) => {
                let pq = *pq;
                let w = match (pq.writer, pq.pending) {
                    (Some((w, _, _)), _) => w,
                    (None, Some(file)) => {
                        ArrowWriter::try_new(file, Arc::new(parquet_schema(1)), None)
                            .map_err(|e| self.err(e))?
                    }
                    (None, None) => return Err(self.err("no open file")),
                };
                w.into_inner().map_err(|e| self.err(e))?
            }
            None => return Err(self.err("the writer is finished")),
        };
        f.sync_all().map_err(|e| self.err(e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| self.err(e))
    }
}

impl Drop for PredictionWriter {
    /// An unfinished writer (an error or interruption before [`PredictionWriter::finish`])
    /// removes its temporary file; the final name is never written.
    fn drop(&mut self) {
        if self.sink.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The Parquet schema of predictions with `components` mixture components.
fn parquet_schema(components: usize) -> ArrowSchema {
    let mut names: Vec<String> = ["mean", "variance", "log_density", "y"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if components > 1 {
        for k in 0..components {
            names.extend([
                format!("weight_{k}"),
                format!("mean_{k}"),
                format!("variance_{k}"),
            ]);
        }
    }
    ArrowSchema::new(
        names
            .into_iter()
            .map(|n| Field::new(n, DataType::Float64, false))
            .collect::<Vec<_>>(),
    )
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn print_record(r: &StreamRecord) {
    let scores = match &r.classification {
        Some(c) => {
            let m = &c.metrics;
            format!(
                "K = {} ({}): test error {:.4}, log loss {:.4}, Brier {:.4}, ECE {:.4}{}{}",
                c.num_classes,
                crate::classification::likelihood_name(&c.likelihood),
                m.error_rate,
                m.log_loss,
                m.brier,
                m.ece,
                m.auc.map(|v| format!(", AUC {v:.4}")).unwrap_or_default(),
                c.bayes_error
                    .zip(c.bayes_log_loss)
                    .map(|(e, l)| format!(" (Bayes-optimal error {e:.4}, log loss {l:.4})"))
                    .unwrap_or_default()
            )
        }
        None => format!(
            "test NLL {:.4}, RMSE {:.4}{}{}",
            r.nll,
            r.rmse.unwrap_or(f64::NAN),
            r.bayes_nll
                .map(|b| format!(" (Bayes-optimal {b:.4}, gap {:.4})", r.nll - b))
                .unwrap_or_default(),
            r.homoscedastic_nll
                .zip(r.noise_rmse)
                .map(|(h, e)| format!(" (one noise variance: best NLL {h:.4}, RMSE floor {e:.4})"))
                .unwrap_or_default(),
        ),
    };
    println!(
        "{} L={} ({} rows from {}; batch {}, {} steps): {scores}; train {:.1} s ({:.2} ms/step); predict {:.1} s; peak RssAnon {:.0} MiB",
        r.backend,
        r.layers,
        r.n_train,
        r.rows_from,
        r.batch,
        r.steps,
        r.train_seconds,
        r.ms_per_step,
        r.predict_seconds,
        r.peak_rss_anon_mib
    );
    if let Some(h) = r.held_out.as_ref().filter(|h| h.heldout_rows > 0) {
        println!(
            "held-out early stopping: {} rows held out, {} steps, kept step {}, held-out NLL {}",
            h.heldout_rows,
            h.steps,
            h.best_step.map_or("(last)".into(), |s| s.to_string()),
            h.best_heldout_nll
                .map_or("(not scored)".into(), |v| format!("{v:.4}"))
        );
    }
}

fn append_json(path: &Path, r: &StreamRecord) -> Result<()> {
    let line = serde_json::to_string(r).map_err(|e| BenchError::output(path, e))?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| BenchError::output(path, e))?;
    writeln!(f, "{line}").map_err(|e| BenchError::output(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::predictive::Predictive;

    /// A two-row, `s`-component predictive and its log densities at y = 0.
    fn chunk(s: usize) -> (Predictive, Vec<f64>, Mat<f64>) {
        let means = vec![Mat::from_fn(2, s, |i, k| (i + k) as f64)];
        let vars = vec![Mat::from_fn(2, s, |i, k| 1.0 + (i * k) as f64)];
        let pred = Predictive::equal_weights(means, vars).unwrap();
        let y = Mat::zeros(2, 1);
        let ld = pred.log_density(y.as_ref()).unwrap();
        (pred, ld, y)
    }

    /// Two Gaussian blobs in 2-D: `n` rows, labels alternating 0, 1.
    fn blobs(n: usize, seed: u64) -> dgp_traits::data::Dataset {
        let raw = dgp_traits::rng::standard_normal(&mut dgp_traits::rng::seeded(seed), n, 2);
        let x = Mat::from_fn(n, 2, |i, j| {
            0.8 * raw[(i, j)] + if i % 2 == 1 { 1.5 } else { 0.0 }
        });
        let y = Mat::from_fn(n, 1, |i, _| (i % 2) as f64);
        dgp_traits::data::Dataset::new(x, y).unwrap()
    }

    /// The metrics `predict_file` accumulates chunk by chunk equal, bit for bit, the
    /// metrics of `run`'s in-memory evaluation of the same predictions (one SGP: its
    /// class probabilities do not depend on the prediction seed, so any chunking gives
    /// the same predictions; DGP2 predicted in one chunk with the same seed).
    #[test]
    fn streamed_metrics_equal_the_in_memory_metrics_of_the_same_predictions() {
        use crate::classification::{ClassExperimentSpec, build_model, evaluate};
        use dgp_traits::backend::{CommonSettings, Settings};
        let (train, test) = (blobs(120, 1), blobs(53, 2));
        let st =
            Standardizer::fit_with(&train, StandardizeOptions::default().keep_targets()).unwrap();
        let train_std = st.transform(&train).unwrap();
        let labels: Vec<usize> = (0..test.n()).map(|i| i % 2).collect();
        for (layers, chunk) in [(1, 7), (1, 53), (2, 53), (2, 100)] {
            let spec = ClassExperimentSpec {
                dir: PathBuf::new(),
                num_classes: Some(2),
                backend: find_backend("svi").unwrap().backend,
                likelihood: "probit".into(),
                common: CommonSettings {
                    preset: "default".into(),
                    layers,
                    num_inducing: 8,
                    hidden_width: None,
                    train_samples: 1,
                    predict_samples: 4,
                    seed: 0,
                    tune: false,
                    learning_rate: Some(0.02),
                    lr_schedule: None,
                },
                settings: Settings::new(),
                fit: FitConfig {
                    steps: 30,
                    batch_size: 64,
                    ..Default::default()
                },
                predict: PredictConfig {
                    samples: 4,
                    seed: 5,
                },
                splits: vec![],
            };
            let lik = crate::classification::likelihood_by_name("probit", 2).unwrap();
            let mut model = build_model(&spec, &lik, &train_std).unwrap();
            model
                .fit(
                    &train_std,
                    &spec.fit,
                    &mut dgp_traits::model::FitHooks::none(),
                )
                .unwrap();
            let xs = st.transform_x(test.x()).unwrap();
            let pred = model.predict(xs.as_ref(), &spec.predict).unwrap();
            let (want, want_bins) = evaluate(&pred, &labels).unwrap();
            let got = predict_file(
                model.as_ref(),
                &st,
                &test,
                chunk,
                &spec.predict,
                Some(2),
                None,
            )
            .unwrap();
            let (m, bins) = got.class.unwrap();
            let bits = |m: &ClassMetrics| {
                [m.error_rate, m.log_loss, m.brier, m.ece, m.auc.unwrap()].map(f64::to_bits)
            };
            assert_eq!(bits(&m), bits(&want), "L = {layers}, chunk {chunk}");
            assert_eq!(bins, want_bins, "L = {layers}, chunk {chunk}");
            assert_eq!(got.nll.to_bits(), want.log_loss.to_bits());
            assert_eq!((got.rmse, got.rows), (None, 53));
        }
    }

    #[test]
    fn the_final_name_appears_only_when_the_writer_finishes() {
        let dir = std::env::temp_dir().join(format!("dgp-bench-preds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["p.parquet", "p.csv"] {
            let path = dir.join(name);
            let tmp = PredictionWriter::temporary_path(&path);
            let (pred, ld, y) = chunk(3);
            // Dropped unfinished (an error or interruption): nothing under either name.
            let mut w = PredictionWriter::create(&path).unwrap();
            w.write_chunk(&pred, &ld, y.as_ref()).unwrap();
            assert!(tmp.exists() && !path.exists(), "{name}");
            drop(w);
            assert!(!tmp.exists() && !path.exists(), "{name}");
            // Finished: the final name only.
            let mut w = PredictionWriter::create(&path).unwrap();
            w.write_chunk(&pred, &ld, y.as_ref()).unwrap();
            w.finish().unwrap();
            assert!(!tmp.exists() && path.exists(), "{name}");
        }
        let text = std::fs::read_to_string(dir.join("p.csv")).unwrap();
        assert_eq!(text.lines().next(), Some("mean,variance,log_density,y"));
        assert_eq!(text.lines().count(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_parquet_chunk_with_another_number_of_components_is_an_error() {
        let dir = std::env::temp_dir().join(format!("dgp-bench-preds-s-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.parquet");
        let mut w = PredictionWriter::create(&path).unwrap();
        let (pred, ld, y) = chunk(3);
        w.write_chunk(&pred, &ld, y.as_ref()).unwrap();
        let (pred, ld, y) = chunk(2);
        assert!(matches!(
            w.write_chunk(&pred, &ld, y.as_ref()),
            Err(BenchError::Output { .. })
        ));
        assert!(
            w.write_chunk(&pred, &ld[..1], y.as_ref()).is_err(),
            "mismatched lengths"
        );
        drop(w);
        assert!(!path.exists() && !PredictionWriter::temporary_path(&path).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
