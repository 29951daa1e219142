//! Training and evaluating one backend on the splits of one data set (the `protocol` and `units` modules of dgp-bench).
//!
//! Per split: standardise inputs and targets with the training split's mean and population
//! std ([`Standardizer`]), build the model from the [`crate::backends`] registry, train it
//! with [`Model::fit`], predict the test inputs, map the predictive mixture back to original
//! units ([`dgp_traits::predictive::Predictive::unstandardize`]) and compute NLL, RMSE, CRPS
//! and coverage there ([`Metrics::compute`]).

use std::time::Instant;

use dgp_data::{Dataset, Standardizer};
use dgp_traits::backend::Settings;
use dgp_traits::fit::FitHooks;
use dgp_traits::metrics::{Metrics, pit};
use dgp_traits::model::{FitConfig, FitReport, Model, PredictConfig};
use dgp_traits::predictive::Predictive;
use faer::MatRef;
use serde::{Deserialize, Serialize};

use crate::diagnostics::FitDiagnostics;
use crate::error::{BenchError, Result};
use crate::progress::BarObserver;
use crate::resources::RunResources;

pub use dgp_traits::fit::PREDICT_SEED_OFFSET;

/// "SGP" for one layer, "DGP{L}" otherwise (the papers' naming).
pub fn model_label(layers: usize) -> String {
    if layers == 1 {
        "SGP".to_string()
    } else {
        format!("DGP{layers}")
    }
}

pub use crate::spec::ExperimentSpec;

/// The result of one split: the JSON record of `dgp-bench run`.
///
/// The first ten fields are the documented record
/// `{backend, layers, dataset, split, nll, rmse, crps, cov95, train_seconds, steps}`;
/// the rest make a record reproducible on its own. Metrics are in ORIGINAL target units
/// (protocol §2); `nll` is the mean negative log predictive density (−tll).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitRecord {
    /// Backend name.
    pub backend: String,
    /// Number of layers L.
    pub layers: usize,
    /// Data set name.
    pub dataset: String,
    /// Split index.
    pub split: usize,
    /// Mean negative log predictive density of the test targets.
    pub nll: f64,
    /// RMSE of the predictive mean.
    pub rmse: f64,
    /// Mean CRPS.
    pub crps: f64,
    /// Coverage of the central 95 % predictive intervals.
    pub cov95: f64,
    /// Wall-clock seconds of `Model::fit`.
    pub train_seconds: f64,
    /// Optimisation steps.
    pub steps: usize,
    /// Coverage of the central 50 % intervals.
    #[serde(default)]
    pub cov50: f64,
    /// Coverage of the central 90 % intervals.
    #[serde(default)]
    pub cov90: f64,
    /// Wall-clock seconds of predicting the test split.
    #[serde(default)]
    pub predict_seconds: f64,
    /// Inducing points per layer.
    #[serde(default)]
    pub num_inducing: usize,
    /// Hidden width (`null` = the backend default).
    #[serde(default)]
    pub hidden_width: Option<usize>,
    /// Minibatch size actually used (`min(batch, N_train)`).
    #[serde(default)]
    pub batch_size: usize,
    /// Adam learning rate; `None` (omitted) for a backend that does not use one
    /// ([`dgp_traits::backend::Capabilities::uses_learning_rate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    /// Training samples ([`crate::backends::ArchSpec::train_samples`]).
    #[serde(default)]
    pub train_samples: usize,
    /// Predictive mixture components requested.
    #[serde(default)]
    pub predict_samples: usize,
    /// Seed of the run.
    #[serde(default)]
    pub seed: u64,
    /// Training rows.
    #[serde(default)]
    pub n_train: usize,
    /// Test rows.
    #[serde(default)]
    pub n_test: usize,
    /// Objective value of the last training step.
    #[serde(default)]
    pub final_objective: f64,
    /// The trained model's own description ([`Model::describe`]): architecture and any
    /// hyper-parameters chosen on validation data.
    #[serde(default)]
    pub model: String,
    /// Backend-specific settings of the run (`--set`, `--config`, sugar flags); omitted
    /// when there were none.
    #[serde(default, skip_serializing_if = "Settings::is_empty")]
    pub settings: Settings,
    /// The command line that produced the record (written by `run --json`; empty and
    /// omitted otherwise).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// Protocol and split kind (`lindinger/random`, `published/extrapolate`, ...); empty
    /// and omitted for the published protocol on the data set's own splits.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// Step cap when held-out early stopping ran or the convergence stop ended the run
    /// (`steps` is where it stopped); 0 and omitted otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_steps: usize,
    /// Log predictive density of every test point in original units (test-row order of
    /// the split, rounded to 1e-6), with `run --per-point`; empty and omitted otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_density: Vec<f64>,
    /// Wall seconds and peak RSS of the split (`wall_seconds`, `peak_rss_mib` in the JSON;
    /// omitted when unknown, e.g. in older records).
    #[serde(flatten, default)]
    pub resources: RunResources,
    /// What training did: final noise variance, held-out kept step and score trace
    /// (`noise_variance`, `kept_step`, `heldout_trace` in the JSON; each omitted when
    /// unknown).
    #[serde(flatten, default)]
    pub diagnostics: FitDiagnostics,
    /// Warnings about the inputs of the run (M ≥ N_train, a headerless-looking CSV file,
    /// a target also listed as a feature; `dgp_bench::validate`); empty and omitted when
    /// there were none, so records of clean runs are unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Mean of each target column over the training split (the standardiser's `m_y`);
    /// with [`SplitRecord::y_std`] it gives the metrics in standardised units exactly
    /// ([`crate::units::standardised`]). Empty and omitted in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub y_mean: Vec<f64>,
    /// Population std of each target column over the training split (`s_y`, 1 for a
    /// constant column). Empty and omitted in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub y_std: Vec<f64>,
    /// Rows of the `n_train` training rows that the backend held out to choose its
    /// hyper-parameters (dspp/ppgpr's β_reg and width selection: `floor(2/17 · n_train)`,
    /// the DSPP protocol's 10 % validation part; [`crate::protocol::selection_rows`]).
    /// The selection's candidates trained on the other `n_train − validation_rows`; the
    /// final model on all `n_train` (less any early-stopping holdout of its own). 0 and
    /// omitted: no selection, the model trained on all `n_train` rows.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub validation_rows: usize,
}

fn is_zero(v: &usize) -> bool {
    *v == 0
}

/// Rounds a log density to 1e-6 for compact records.
pub fn round_log_density(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// One split's record plus what plots need: the trained model, the split's
/// standardiser, the PIT values of the test targets and the training report.
pub struct SplitOutcome {
    /// The record.
    pub record: SplitRecord,
    /// The trained model (model units = standardised).
    pub model: Box<dyn Model>,
    /// Standardiser fitted on the training split.
    pub standardizer: Standardizer,
    /// PIT values F(y_n) of the test targets (original units; N·P values).
    pub pit: Vec<f64>,
    /// Training split in original units.
    pub train: Dataset,
    /// Test split in original units.
    pub test: Dataset,
    /// The backend's training report.
    pub fit: FitReport,
}

/// Builds and trains split `k` of `spec` with the architecture `arch` on `train` (in model
/// units) under the split's run control ([`crate::checkpointing::SplitControl`]:
/// interruption, periodic checkpoints, exact resume, the divergence check), forwarding
/// progress to `bar`; `label` names the split in messages.
///
/// # Errors
/// [`BenchError::Interrupted`] on a stop request; [`BenchError::Run`] when building or
/// training fails; those of the checkpoint files.
pub(crate) fn train_split(
    spec: &ExperimentSpec<'_>,
    arch: &crate::backends::ArchSpec,
    k: usize,
    fit_cfg: &FitConfig,
    train: &Dataset,
    bar: &mut BarObserver,
    label: &str,
) -> Result<(Box<dyn Model>, FitReport)> {
    let mut control = crate::checkpointing::SplitControl::new(bar, spec, k)?;
    let mut hooks = FitHooks::all(&mut control);
    let mut model = spec.backend.build_model(
        arch,
        spec.learning_rate,
        &spec.lr_schedule,
        fit_cfg,
        train,
        &hooks,
    )?;
    let fit = model.fit(train, fit_cfg, &mut hooks);
    let fit = fit.map_err(|e| control.fit_error(format!("{label}: training"), e))?;
    control.finish(label)?;
    Ok((model, fit))
}

/// Trains and evaluates split `k` of `spec` (see the module docs).
///
/// # Errors
/// [`BenchError::Usage`] for invalid settings or splits; [`BenchError::Data`] for
/// unreadable split files; [`BenchError::Run`] when building, training, predicting or
/// evaluating fails.
pub fn run_split(spec: &ExperimentSpec<'_>, k: usize) -> Result<SplitOutcome> {
    spec.validate()?;
    let wall = Instant::now();
    crate::resources::reset_peak_rss();
    let b = spec.backend;
    let label = format!(
        "{} {} {} split {k}",
        b.name(),
        model_label(spec.arch.layers),
        spec.data.name
    );
    let (train, test) = spec.data.split_data(k)?;
    let ctx = |what: &str| format!("{label}: {what}");
    let standardizer = Standardizer::fit_with(&train, spec.data.standardize_options())
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let train_std = standardizer
        .transform(&train)
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let test_x = standardizer
        .transform_x(test.x())
        .map_err(|e| BenchError::run(ctx("standardising"), e))?;
    let batch_size = spec.batch_size.min(train.n());
    let fit_cfg = FitConfig {
        steps: spec.steps,
        batch_size,
        seed: spec.seed,
        early_stopping: spec.early_stopping.clone(),
        convergence: spec.convergence,
    };
    // Building includes any hyper-parameter selection on validation data, so it counts
    // as training time.
    let t0 = Instant::now();
    let mut bar = BarObserver::new(spec.steps, &label, spec.progress);
    let (model, fit) = train_split(spec, &spec.arch, k, &fit_cfg, &train_std, &mut bar, &label)?;
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
    let pred = pred
        .unstandardize(&standardizer.y_mean, &standardizer.y_std)
        .map_err(|e| BenchError::run(ctx("unstandardising"), e))?;
    let m = Metrics::compute(&pred, test.y()).map_err(|e| BenchError::run(ctx("metrics"), e))?;
    let (pit_values, log_density) = pit_and_log_density(&pred, test.y(), spec.per_point, &ctx)?;
    let record = SplitRecord {
        backend: b.name().to_string(),
        layers: spec.arch.layers,
        dataset: spec.data.name.clone(),
        split: k,
        nll: m.nll,
        rmse: m.rmse,
        crps: m.crps,
        cov95: m.cov95,
        train_seconds,
        steps: fit.steps,
        cov50: m.cov50,
        cov90: m.cov90,
        predict_seconds,
        num_inducing: spec.arch.num_inducing,
        hidden_width: spec.arch.hidden_width,
        batch_size,
        learning_rate: spec.recorded_learning_rate(),
        train_samples: spec.arch.train_samples,
        predict_samples: spec.arch.predict_samples,
        seed: spec.seed,
        n_train: train.n(),
        n_test: test.n(),
        final_objective: fit.final_objective,
        model: model.describe(),
        settings: Settings::new(),
        command: String::new(),
        protocol: spec.protocol.clone(),
        max_steps: if spec.early_stopping.is_some() || fit.converged_after.is_some() {
            spec.steps
        } else {
            0
        },
        log_density,
        resources: RunResources {
            wall_seconds: Some(wall.elapsed().as_secs_f64()),
            peak_rss_mib: crate::resources::peak_rss_mib(),
            ranks: crate::resources::ranks(),
        },
        diagnostics: FitDiagnostics::of(model.as_ref(), &fit, &standardizer),
        warnings: Vec::new(),
        y_mean: standardizer.y_mean.clone(),
        y_std: standardizer.y_std.clone(),
        validation_rows: crate::protocol::selection_rows(spec, train.n()),
    };
    Ok(SplitOutcome {
        record,
        model,
        standardizer,
        pit: pit_values,
        train,
        test,
        fit,
    })
}

/// The PIT values of every test point (column-major over outputs) and, when `per_point`,
/// the per-point log densities rounded for the record (empty otherwise); `ctx` names the
/// split in an error.
fn pit_and_log_density(
    pred: &Predictive,
    y: MatRef<'_, f64>,
    per_point: bool,
    ctx: &dyn Fn(&str) -> String,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let u = pit(pred, y).map_err(|e| BenchError::run(ctx("PIT"), e))?;
    let log_density = if per_point {
        pred.log_density(y)
            .map_err(|e| BenchError::run(ctx("log densities"), e))?
            .into_iter()
            .map(round_log_density)
            .collect()
    } else {
        Vec::new()
    };
    let pit_values = (0..u.ncols())
        .flat_map(|j| (0..u.nrows()).map(move |i| (i, j)))
        .map(|(i, j)| u[(i, j)])
        .collect();
    Ok((pit_values, log_density))
}

/// Runs every split of `spec` and returns one record per split, in split order.
///
/// # Errors
/// As [`run_split`].
pub fn run_experiment(spec: &ExperimentSpec<'_>) -> Result<Vec<SplitRecord>> {
    run_experiment_with(spec, &mut |_| Ok(()))
}

/// [`run_experiment`], calling `on_split` with each split's outcome as soon as it is done
/// (to stream JSON records, print progress or draw plots).
///
/// # Errors
/// As [`run_split`], or the first error `on_split` returns.
pub fn run_experiment_with(
    spec: &ExperimentSpec<'_>,
    on_split: &mut dyn FnMut(&SplitOutcome) -> Result<()>,
) -> Result<Vec<SplitRecord>> {
    spec.validate()?;
    let mut out = Vec::with_capacity(spec.splits.len());
    for &k in &spec.splits {
        let outcome = run_split(spec, k)?;
        on_split(&outcome)?;
        out.push(outcome.record);
    }
    Ok(out)
}
