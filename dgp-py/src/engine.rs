//! The adapter between the Python package and the library: the ONE module of `dgp-py`
//! that calls into the library. Everything else in the crate converts Python objects to
//! and from what this module takes and returns, and nothing here is a second
//! implementation of what the library does:
//!
//! * [`backend_names`], [`backend_info`] — the registry's backends ([`dgp_registry`]),
//!   their settings, capabilities, presets and training defaults;
//! * [`resolve`] — the options of a Python estimator as the library's
//!   [`request::FitRequest`], resolved by [`request::resolve`] exactly as `dgp-bench run`
//!   and `Config::default().fit` resolve them (every option left out is the preset's);
//! * [`fit`], [`fit_rowstore`] — the library's whole fit ([`request::fit_views`],
//!   [`request::fit_source`]) under the caller's hooks and the library's
//!   [`Guard`] (checkpoints in a locked directory with checksums, exact resume, the
//!   divergence guard);
//! * [`FittedModel`] — a [`Fitted`] model of any backend: prediction in original units,
//!   the versioned, checksummed model file with the estimator's metadata inside it;
//!   [`load_text`] reads one back through the registry;
//! * [`parquet_to_rowstore`], [`synth`] — `dgp-bench convert` and the synthetic problem.

use std::path::{Path, PathBuf};

use dgp_core::{Error, Result};
use dgp_data::RowSource;
use dgp_traits::backend::{Backend, DEFAULT_PRESET, Settings};
use dgp_traits::classification::ClassProbs;
use dgp_traits::fit::{Checkpoints, FitHooks, HeldOutRule, Hooks, Progress, RunControl, RunState};
use dgp_traits::fitted::Fitted;
use dgp_traits::guard::{Guard, data_identity};
use dgp_traits::model::{FitReport, Model, PredictConfig};
use dgp_traits::predictive::Predictive;
use dgp_traits::request::{self, Task};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use dgp_traits::fit::PREDICT_SEED_OFFSET;

/// The names of the registered backends ([`dgp_registry::names`]).
pub fn backend_names() -> Vec<&'static str> {
    dgp_registry::names()
}

/// What a backend is, as JSON: `name`, `description`, `capabilities`, `presets`,
/// `settings` (each allowed key with its default value) and `run_defaults` (the numbers
/// a default fit trains with).
///
/// # Errors
/// An unknown backend ([`dgp_registry::find`]).
pub fn backend_info(name: &str) -> Result<Value> {
    let b = dgp_registry::find(name)?;
    let settings: serde_json::Map<String, Value> = b
        .allowed_keys()
        .into_iter()
        .map(|k| {
            let v = b.default_setting(&k).unwrap_or(Value::Null);
            (k, v)
        })
        .collect();
    let d = b.defaults(DEFAULT_PRESET)?;
    Ok(json!({
        "name": b.name(),
        "description": b.description(),
        "capabilities": b.capabilities(),
        "presets": b.presets(),
        "settings": settings,
        "run_defaults": {
            "layers": d.layers,
            "num_inducing": d.num_inducing,
            "steps": d.training.steps,
            "epochs": d.training.epochs,
            "learning_rate": d.learning_rate,
            "unguarded_learning_rate": d.unguarded_learning_rate,
            "batch_cap": d.training.batch_size,
            "train_samples": d.train_samples,
            "predict_samples": d.predict_samples,
            "early_stopping": d.training.early_stopping,
            "convergence": d.training.convergence,
        },
    }))
}

/// Held-out early stopping of a fit, as the Python estimators pass it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EarlyStoppingOption {
    /// The preset's own rule.
    #[default]
    Default,
    /// No held-out early stopping.
    None,
    /// This rule.
    Rule(HeldOutRule),
}

/// The convergence stop of a fit, as the Python estimators pass it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConvergenceOption {
    /// The preset's own stop.
    #[default]
    Default,
    /// Every step of the run is taken.
    None,
}

/// The options every backend shares, as the Python estimators pass them (JSON); `None`
/// keeps the preset's value ([`request::FitOptions`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FitOptions {
    /// The backend's named configuration (`None`: `"default"`).
    pub preset: Option<String>,
    /// Inducing points per layer.
    pub num_inducing: Option<usize>,
    /// Width of the hidden layers.
    pub hidden_width: Option<usize>,
    /// Samples of the training objective.
    pub train_samples: Option<usize>,
    /// Predictive mixture components.
    pub predict_samples: Option<usize>,
    /// Adam learning rate.
    pub learning_rate: Option<f64>,
    /// Choose hyper-parameters on validation rows where the backend does.
    pub tune: Option<bool>,
    /// Optimisation steps.
    pub steps: Option<usize>,
    /// Rows per minibatch.
    pub batch_size: Option<usize>,
    /// Seed of the initialisation, the minibatch order and the Monte Carlo noise.
    pub seed: u64,
    /// Held-out early stopping.
    pub early_stopping: EarlyStoppingOption,
    /// The convergence stop.
    pub convergence: ConvergenceOption,
    /// The run keeps checkpoints and continues from them (refused for a backend that
    /// cannot resume, and with held-out early stopping).
    pub checkpointing: bool,
}

/// A fit's request: backend, architecture, task, options and the backend's own settings.
#[derive(Clone, Debug)]
pub struct FitRequest {
    /// Registered backend name.
    pub backend: String,
    /// GP layers (`None`: the preset's).
    pub layers: Option<usize>,
    /// Regression or classification.
    pub task: Task,
    /// The shared options.
    pub options: FitOptions,
    /// The backend's own settings (fields of its configuration).
    pub settings: Settings,
}

impl FitRequest {
    /// The library's request.
    fn to_library(&self) -> request::FitRequest {
        let o = &self.options;
        request::FitRequest {
            options: request::FitOptions {
                preset: o.preset.clone(),
                layers: self.layers,
                num_inducing: o.num_inducing,
                hidden_width: o.hidden_width,
                train_samples: o.train_samples,
                predict_samples: o.predict_samples,
                learning_rate: o.learning_rate,
                lr_schedule: None,
                tune: o.tune,
                steps: o.steps,
                batch_size: o.batch_size,
                seed: Some(o.seed),
                early_stopping: match &o.early_stopping {
                    EarlyStoppingOption::Default => None,
                    EarlyStoppingOption::None => Some(None),
                    EarlyStoppingOption::Rule(r) => Some(Some(r.clone())),
                },
                convergence: match o.convergence {
                    ConvergenceOption::Default => None,
                    ConvergenceOption::None => Some(None),
                },
            },
            settings: self.settings.clone(),
            task: self.task.clone(),
        }
    }
}

/// A request resolved by the library for `n` training rows.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The backend.
    pub backend: &'static dyn Backend,
    /// What the library resolved.
    pub inner: request::Resolved,
    /// The training rows it was resolved for.
    pub n_train: usize,
}

impl Resolved {
    /// The resolved configuration as JSON (the estimators' `config_`): `backend`,
    /// `common`, `settings`, `fit`, `predict`, and the `learning_rate` the fit trains with.
    pub fn to_json(&self) -> Value {
        let r = &self.inner;
        json!({
            "backend": self.backend.name(),
            "common": r.common,
            "settings": r.settings,
            "fit": r.fit,
            "predict": r.predict,
            "learning_rate": r.learning_rate(self.backend, self.n_train),
        })
    }
}

/// Resolves `req` for `n` training rows with the library ([`request::resolve`]) and
/// checks what only a Python fit asks for (checkpointing).
///
/// # Errors
/// [`Error::Config`] naming the option or setting: an unknown backend, preset or
/// setting, a value out of range, a step count above the backend's cap, an
/// early-stopping rule or a likelihood the backend does not support, checkpoints for a
/// backend or a rule that cannot resume.
pub fn resolve(req: &FitRequest, n: usize) -> Result<Resolved> {
    let b = dgp_registry::find(&req.backend)?;
    let inner = request::resolve(b, &req.to_library(), n)?;
    if req.options.checkpointing {
        if !b.capabilities().resumable {
            return Err(Error::config(
                "checkpoint_dir",
                format!(
                    "backend '{}' cannot continue a run from a checkpoint",
                    b.name()
                ),
            ));
        }
        if inner.fit.early_stopping.is_some() {
            return Err(Error::config(
                "checkpoint_dir",
                "a run with held-out early stopping cannot be checkpointed; pass early_stopping=None",
            ));
        }
    }
    Ok(Resolved {
        backend: b,
        inner,
        n_train: n,
    })
}

/// Where and how often a fit keeps its checkpoints.
#[derive(Clone, Debug)]
pub struct CheckpointOptions {
    /// The directory (created and locked for the fit).
    pub dir: PathBuf,
    /// Steps between checkpoints (0: the library's default cadence, and always at the end
    /// and when the run is asked to stop).
    pub every: usize,
}

/// The caller's hooks (progress, stop requests from Python) in front of the library's
/// [`Guard`], which keeps the checkpoints and the divergence guard.
struct Guarded<'g, 'h> {
    caller: &'h mut dyn Hooks,
    guard: &'g mut Guard<'static>,
}

impl Guarded<'_, '_> {
    fn sync_stop(&self) {
        if self.caller.should_stop() {
            self.guard.stop_handle().request();
        }
    }
}

impl Progress for Guarded<'_, '_> {
    fn on_step(&mut self, step: usize, total: usize, objective: f64) {
        self.caller.on_step(step, total, objective);
        self.guard.on_step(step, total, objective);
        self.sync_stop();
    }

    fn on_phase(&mut self, phase: &str) {
        self.caller.on_phase(phase);
        self.guard.on_phase(phase);
    }
}

impl RunControl for Guarded<'_, '_> {
    fn should_stop(&self) -> bool {
        self.sync_stop();
        self.guard.should_stop()
    }

    fn take_resume_state(&mut self) -> Option<RunState> {
        self.guard.take_resume_state()
    }
}

impl Checkpoints for Guarded<'_, '_> {
    fn every(&self) -> usize {
        self.guard.every()
    }

    fn save(&mut self, state: &RunState) -> Result<()> {
        self.guard.save(state)
    }
}

/// Runs `train` (the library's fit) under `hooks` and a [`Guard`] checkpointing as
/// `checkpoints` says for the run `identity`. A stop the caller asked for (Ctrl-C, an
/// exception of the progress callback) keeps the model trained so far, with its last
/// state written; a stop the guard decides (divergence, a failed write) is an error.
fn guarded(
    checkpoints: Option<&CheckpointOptions>,
    identity: impl FnOnce() -> Value,
    hooks: &mut dyn Hooks,
    train: impl FnOnce(&mut FitHooks<'_>) -> Result<Fitted<Box<dyn Model>>>,
) -> Result<FittedModel> {
    let mut guard = match checkpoints {
        Some(c) => {
            let g = Guard::checkpoint_dir(&c.dir)?.identity(identity());
            if c.every > 0 {
                g.save_every(c.every)
            } else {
                g
            }
        }
        None => Guard::new(),
    };
    guard.begin()?;
    let out = {
        let mut both = Guarded {
            caller: hooks,
            guard: &mut guard,
        };
        train(&mut FitHooks::all(&mut both))
    };
    let caller_stopped = hooks.should_stop();
    let fitted = if caller_stopped && guard.divergence().is_none() {
        if let Some(e) = guard.take_failure() {
            return Err(e);
        }
        let fitted = out?;
        guard.flush()?;
        fitted
    } else {
        guard.finish(out)?
    };
    Ok(FittedModel {
        inner: fitted,
        stopped_early: caller_stopped,
    })
}

/// A trained (or loaded) model with its standardisation: predicts in original units.
pub struct FittedModel {
    inner: Fitted<Box<dyn Model>>,
    stopped_early: bool,
}

impl std::fmt::Debug for FittedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FittedModel")
            .field("backend", &self.backend())
            .field("model", &self.describe())
            .finish()
    }
}

impl FittedModel {
    /// The backend's name.
    pub fn backend(&self) -> &'static str {
        self.inner.model().backend()
    }

    /// The model's own one-line description.
    pub fn describe(&self) -> String {
        self.inner.model().describe()
    }

    /// Input columns the model expects.
    pub fn input_dim(&self) -> usize {
        self.inner.standardizer().input_dim
    }

    /// Target columns (outputs) of the training data.
    pub fn output_dim(&self) -> usize {
        self.inner.standardizer().y_mean.len()
    }

    /// What the fit did (empty for a loaded model).
    pub fn report(&self) -> &FitReport {
        self.inner.report()
    }

    /// Whether the caller asked the fit to stop before its last step.
    pub fn stopped_early(&self) -> bool {
        self.stopped_early
    }

    /// The caller's metadata saved in the model file (`null` when none).
    pub fn metadata(&self) -> &Value {
        self.inner.metadata()
    }

    /// The Gaussian noise variance in original units of the first target (σ²·s_y²), when
    /// the model has one.
    pub fn noise_variance(&self) -> Option<f64> {
        let s = self
            .inner
            .standardizer()
            .y_std
            .first()
            .copied()
            .unwrap_or(1.0);
        self.inner.model().noise_variance().map(|v| v * s * s)
    }

    /// The predictive mixture at `x` (N×D, original units) in the targets' original units
    /// ([`Fitted::predict_with`]; a classifier's predictive keeps its K latent outputs and
    /// its class probabilities). With `classify`, a model without class probabilities is
    /// refused.
    ///
    /// # Errors
    /// No rows, a wrong number of columns, NaN/∞ inputs, the model's prediction errors.
    pub fn predict(
        &self,
        x: MatRef<'_, f64>,
        cfg: &PredictConfig,
        classify: bool,
    ) -> Result<Predictive> {
        if x.nrows() == 0 {
            return Err(Error::Empty("prediction at no points".into()));
        }
        let p = self.inner.predict_with(x, cfg)?;
        if classify && p.class_probs().is_none() {
            return Err(Error::Unsupported(format!(
                "the '{}' model was not trained with a classification likelihood",
                self.backend()
            )));
        }
        Ok(p)
    }

    /// The model file's text with `metadata` in it
    /// ([`Fitted::to_file_json_with_metadata`]).
    ///
    /// # Errors
    /// The model's serialisation error.
    pub fn to_text(&self, metadata: &Value) -> Result<String> {
        self.inner.to_file_json_with_metadata(metadata)
    }
}

/// A model file's text read back through the registry ([`dgp_registry::load`]). With
/// `expect`, a file of another backend is refused by name.
///
/// # Errors
/// [`Error::ModelFile`]: not a model file, another layout version, a checksum mismatch,
/// a model no registered backend reads, another backend than `expect`.
pub fn load_text(text: &str, expect: Option<&str>) -> Result<FittedModel> {
    if let Some(want) = expect {
        dgp_registry::find(want)?;
    }
    let inner = dgp_registry::load(text)?;
    if let Some(want) = expect
        && inner.model().backend() != want
    {
        return Err(Error::ModelFile {
            path: PathBuf::new(),
            message: format!(
                "the file holds a '{}' model, not a '{want}' model",
                inner.model().backend()
            ),
        });
    }
    Ok(FittedModel {
        inner,
        stopped_early: false,
    })
}

/// Fits `req` on `x` (N×D) and `y` (N×P; classification: one column of class indices),
/// both in original units, under `hooks` and, with `checkpoints`, the library's
/// checkpointing [`Guard`] (see the module docs). Returns the model and the resolved
/// configuration it was trained with.
///
/// # Errors
/// As [`resolve`]; bad data (row counts, NaN/∞, no rows); the checkpoint directory's
/// errors (locked by another run, a saved state of another run); the backend's build and
/// fit errors ([`Error::Interrupted`] when a stop came before the first step, or during a
/// build).
pub fn fit(
    req: &FitRequest,
    x: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    checkpoints: Option<&CheckpointOptions>,
    hooks: &mut dyn Hooks,
) -> Result<(FittedModel, Resolved)> {
    if x.nrows() != y.nrows() {
        return Err(Error::shape("fit (rows of X and y)", x.nrows(), y.nrows()));
    }
    let r = resolve(req, x.nrows())?;
    let fitted = guarded(
        checkpoints,
        || request::identity(r.backend, &r.inner, data_identity(x, y)),
        hooks,
        |h| request::fit_views(r.backend, &r.inner, x, y, h),
    )?;
    Ok((fitted, r))
}

/// Fits `req` on the rows of the row store at `path`, streamed as `dgp-bench stream` does:
/// standardisation statistics in streaming passes, the model built on a seeded reservoir
/// sample of `init_rows` rows, minibatches read from the memory-mapped file. Validation
/// tuning is off (it needs the rows in memory). Classification: the label column is
/// checked first (integers `0..K`, every class present) and K is returned in the task.
///
/// # Errors
/// The file's errors; a backend that cannot stream; as [`fit`].
pub fn fit_rowstore(
    req: &FitRequest,
    path: &Path,
    init_rows: usize,
    checkpoints: Option<&CheckpointOptions>,
    hooks: &mut dyn Hooks,
) -> Result<(FittedModel, Resolved, Task)> {
    use dgp_data::rowstore::RowStore;
    use dgp_data::{StandardizedRows, fit_standardizer};
    let b = dgp_registry::find(&req.backend)?;
    if !b.capabilities().streams {
        return Err(Error::Unsupported(format!(
            "backend '{}' trains on rows in memory only; fit it on arrays",
            b.name()
        )));
    }
    if init_rows == 0 {
        return Err(Error::config("init_rows", "must be at least 1"));
    }
    let file = RowStore::open(path)?;
    let n = file.n();
    let chunk = dgp_data::chunks::DEFAULT_CHUNK_ROWS;
    let task = match &req.task {
        Task::Regression => Task::Regression,
        Task::Classification { likelihood, .. } => {
            let counts = dgp_data::labels::class_counts(&file, None, true, chunk)?;
            Task::Classification {
                num_classes: counts.num_classes,
                likelihood: likelihood.clone(),
            }
        }
    };
    let mut req = req.clone();
    req.task = task.clone();
    req.options.tune = Some(false);
    let r = resolve(&req, n)?;
    let st = fit_standardizer(&file, r.inner.standardize, chunk)?;
    st.check_target_variance_representable()?;
    let (d, p) = (file.input_dim(), file.output_dim());
    let stamp = std::fs::metadata(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let data = json!({
        "row_store": path.display().to_string(),
        "rows": n,
        "inputs": d,
        "outputs": p,
        "bytes": stamp.len(),
        "modified": stamp
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|t| t.as_nanos().to_string()),
    });
    let rows = StandardizedRows::new(file, st.clone())?;
    let sample = dgp_data::sample::reservoir_sample(&rows, init_rows.min(n), req.options.seed)?;
    let fitted = guarded(
        checkpoints,
        || request::identity(r.backend, &r.inner, data),
        hooks,
        |h| request::fit_source(r.backend, &r.inner, &sample, &rows, st, h),
    )?;
    Ok((fitted, r, task))
}

/// Streams the `features` and `targets` columns of the Parquet file `path` into a row
/// store at `dest` (as `dgp-bench convert` does); `features` empty = every column that is
/// not a target. Returns the rows written.
///
/// # Errors
/// The reader's and writer's errors (missing or non-numeric columns, `dest` = `path`).
pub fn parquet_to_rowstore(
    path: &Path,
    features: &[String],
    targets: &[String],
    dest: &Path,
) -> Result<u64> {
    use dgp_data::parquet_reader::{
        DEFAULT_PARQUET_BATCH_ROWS, ParquetChunks, parquet_column_names,
    };
    let features = if features.is_empty() {
        parquet_column_names(path)?
            .into_iter()
            .filter(|c| !targets.contains(c))
            .collect()
    } else {
        features.to_vec()
    };
    let mut reader = ParquetChunks::open(path, &features, targets, DEFAULT_PARQUET_BATCH_ROWS)?;
    dgp_data::tabular::convert_to_rowstore(&mut reader, dest, &[path], DEFAULT_PARQUET_BATCH_ROWS)
}

/// The first `n` rows of the synthetic regression problem with `seed`
/// ([`dgp_data::synth::synth_dataset`]); with `path`, written as a row store there instead
/// ([`dgp_data::synth::write_synth`]) and `None` returned.
///
/// # Errors
/// `n == 0`; the writer's errors.
pub fn synth(n: usize, seed: u64, path: Option<&Path>) -> Result<Option<dgp_data::Dataset>> {
    match path {
        Some(p) => {
            dgp_data::synth::write_synth(p, n as u64, seed, |_| {})?;
            Ok(None)
        }
        None => dgp_data::synth::synth_dataset(n, seed).map(Some),
    }
}

/// The predicted class (index of the largest probability, ties to the lowest) of each
/// point of a classification predictive ([`ClassProbs::predicted`]).
///
/// # Errors
/// A predictive without class probabilities.
pub fn predicted_classes(p: &Predictive) -> Result<Vec<usize>> {
    Ok(ClassProbs::from_predictive(p)?.predicted())
}

/// Quantiles `q` (each in (0, 1)) of every point's and output's predictive mixture
/// ([`dgp_traits::metrics::mixture_quantile`]); `out[k]` is the N×P matrix of quantile
/// `q[k]`.
///
/// # Errors
/// A level outside (0, 1).
pub fn quantiles(p: &Predictive, q: &[f64]) -> Result<Vec<Mat<f64>>> {
    if let Some(bad) = q.iter().find(|v| !(**v > 0.0 && **v < 1.0)) {
        return Err(Error::config(
            "q",
            format!("quantile levels must lie in (0, 1), got {bad}"),
        ));
    }
    let (n, np, s) = (p.n_points(), p.n_outputs(), p.n_components());
    let w = p.weights();
    let mut mu = vec![0.0; s];
    let mut var = vec![0.0; s];
    let mut out: Vec<Mat<f64>> = q.iter().map(|_| Mat::zeros(n, np)).collect();
    for o in 0..np {
        let (m, v) = (&p.means()[o], &p.variances()[o]);
        for i in 0..n {
            for c in 0..s {
                mu[c] = m[(i, c)];
                var[c] = v[(i, c)];
            }
            for (k, &level) in q.iter().enumerate() {
                out[k][(i, o)] = dgp_traits::metrics::mixture_quantile(w, &mu, &var, level);
            }
        }
    }
    Ok(out)
}

/// The mean log predictive density of `y` (N×P, original units) under `p`
/// (`−`[`dgp_traits::metrics::nll`]).
///
/// # Errors
/// Shapes that differ; NaN/∞ targets.
pub fn mean_log_density(p: &Predictive, y: MatRef<'_, f64>) -> Result<f64> {
    dgp_traits::metrics::nll(p, y).map(|v| -v)
}

/// The mean log probability of the class labels `labels` under `p`
/// (`−`[`dgp_traits::metrics::class_nll`]).
///
/// # Errors
/// A label count other than N; a label ≥ K; no class probabilities.
pub fn mean_log_class_prob(p: &Predictive, labels: &[usize]) -> Result<f64> {
    dgp_traits::metrics::class_nll(p, labels).map(|v| -v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_data::{Dataset, Standardizer};

    struct NoHooks;
    impl Progress for NoHooks {}
    impl RunControl for NoHooks {}
    impl Checkpoints for NoHooks {}

    fn request(backend: &str, options: FitOptions) -> FitRequest {
        FitRequest {
            backend: backend.into(),
            layers: Some(2),
            task: Task::Regression,
            options,
            settings: Settings::new(),
        }
    }

    /// Without options a request resolves to what the backend configuration's own
    /// `Default` trains (`Estimator::fit_config`), as `dgp-bench run` resolves it: the
    /// whole fit settings (steps, batch, seed, held-out rule, convergence stop) and the
    /// default prediction.
    #[test]
    fn defaults_are_the_configurations_defaults() {
        for b in dgp_registry::BACKENDS.iter() {
            let d = b.defaults(DEFAULT_PRESET).unwrap();
            let mut req = request(b.name(), FitOptions::default());
            req.layers = None;
            let n = 5_000;
            let r = resolve(&req, n).unwrap();
            assert_eq!(r.inner.fit, d.training.fit_config(n), "{}", b.name());
            assert_eq!(r.inner.common.num_inducing, d.num_inducing);
            assert_eq!(r.inner.common.predict_samples, d.predict_samples);
            assert_eq!(
                (r.inner.fit.seed, r.inner.predict.seed),
                (0, PREDICT_SEED_OFFSET)
            );
        }
    }

    #[test]
    fn bad_requests_name_what_is_wrong() {
        let e = resolve(&request("nope", FitOptions::default()), 10).unwrap_err();
        assert!(e.to_string().contains("svi, nested"), "{e}");
        let capped = FitOptions {
            steps: Some(5_000),
            ..FitOptions::default()
        };
        let e = resolve(&request("dgps", capped), 10).unwrap_err();
        assert!(e.to_string().contains("max_iters"), "{e}");
        let rule = FitOptions {
            early_stopping: EarlyStoppingOption::Rule(HeldOutRule::Patience(Default::default())),
            ..FitOptions::default()
        };
        let e = resolve(&request("dgps", rule), 10).unwrap_err();
        assert!(e.to_string().contains("early stopping"), "{e}");
        let mut req = request("svi", FitOptions::default());
        req.settings.insert("kmeans_itr".into(), 3.into());
        let e = resolve(&req, 10).unwrap_err();
        assert!(e.to_string().contains("kmeans_iters"), "{e}");
        let ckpt = FitOptions {
            checkpointing: true,
            ..FitOptions::default()
        };
        let e = resolve(&request("sghmc", ckpt), 10).unwrap_err();
        assert!(e.to_string().contains("checkpoint"), "{e}");
        let preset = FitOptions {
            preset: Some("nope".into()),
            ..FitOptions::default()
        };
        let e = resolve(&request("svi", preset), 10).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    /// A fit on a row-major view of the caller's buffer predicts what the library's own
    /// path on a `Dataset` of the same numbers predicts (`Standardizer::fit_with`,
    /// `Backend::build`, `Model::fit`, `Fitted::predict_with`), bit for bit; its model
    /// file, metadata included, reads back to the same predictions, and not as another
    /// backend's.
    #[test]
    fn a_fit_on_views_is_the_librarys_fit() {
        let (n, d) = (120, 2);
        let buf: Vec<f64> = (0..n * d).map(|k| ((k * 31) % 17) as f64 / 4.0).collect();
        let y: Vec<f64> = (0..n).map(|i| (i as f64 / 9.0).sin() + 3.0).collect();
        let xv = MatRef::from_row_major_slice(&buf, n, d);
        let yv = MatRef::from_column_major_slice(&y, n, 1);
        let opts = FitOptions {
            steps: Some(15),
            num_inducing: Some(6),
            predict_samples: Some(4),
            early_stopping: EarlyStoppingOption::None,
            ..FitOptions::default()
        };
        let req = request("svi", opts);
        let (m, r) = fit(&req, xv, yv, None, &mut NoHooks).unwrap();
        let p = m.predict(xv, &r.inner.predict, false).unwrap();
        let data = Dataset::new(xv.to_owned(), yv.to_owned()).unwrap();
        let st = Standardizer::fit(&data);
        let train = st.transform(&data).unwrap();
        let ri = &r.inner;
        let mut model = r
            .backend
            .build(&ri.common, &ri.settings, &ri.fit, &train, &FitHooks::none())
            .unwrap();
        let report = model.fit(&train, &ri.fit, &mut FitHooks::none()).unwrap();
        let reference = Fitted::from_parts(model, st, report, ri.predict.clone());
        assert_eq!(p, reference.predict_with(xv, &ri.predict).unwrap());
        let meta = json!({"classes_": ["a", "b"]});
        let text = m.to_text(&meta).unwrap();
        let back = load_text(&text, Some("svi")).unwrap();
        assert_eq!(back.predict(xv, &ri.predict, false).unwrap(), p);
        assert_eq!(back.metadata(), &meta);
        let e = load_text(&text, Some("dspp")).unwrap_err();
        assert!(e.to_string().contains("not a 'dspp' model"), "{e}");
        assert!(load_text("{", None).is_err());
    }

    /// A checkpointed fit stopped by the caller keeps its model and its last state; a fit
    /// started on the same directory continues it to the uninterrupted run's model, bit
    /// for bit.
    #[test]
    fn a_stopped_checkpointed_fit_resumes_to_the_uninterrupted_run() {
        struct StopAt(usize, bool);
        impl Progress for StopAt {
            fn on_step(&mut self, step: usize, _: usize, _: f64) {
                if step + 1 >= self.0 {
                    self.1 = true;
                }
            }
        }
        impl RunControl for StopAt {
            fn should_stop(&self) -> bool {
                self.1
            }
        }
        impl Checkpoints for StopAt {}
        let (n, d) = (90, 2);
        let buf: Vec<f64> = (0..n * d).map(|k| ((k * 13) % 11) as f64 / 3.0).collect();
        let y: Vec<f64> = (0..n).map(|i| (i as f64 / 7.0).cos()).collect();
        let xv = MatRef::from_row_major_slice(&buf, n, d);
        let yv = MatRef::from_column_major_slice(&y, n, 1);
        let opts = FitOptions {
            steps: Some(40),
            num_inducing: Some(5),
            predict_samples: Some(3),
            early_stopping: EarlyStoppingOption::None,
            convergence: ConvergenceOption::None,
            checkpointing: true,
            ..FitOptions::default()
        };
        let req = request("svi", opts);
        let (full, r) = fit(&req, xv, yv, None, &mut NoHooks).unwrap();
        let dir = std::env::temp_dir().join(format!("dgp-py-engine-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let c = CheckpointOptions {
            dir: dir.clone(),
            every: 10,
        };
        let (first, _) = fit(&req, xv, yv, Some(&c), &mut StopAt(17, false)).unwrap();
        assert!(first.stopped_early());
        assert!(first.report().steps < 40);
        let (resumed, _) = fit(&req, xv, yv, Some(&c), &mut NoHooks).unwrap();
        let cfg = &r.inner.predict;
        assert_eq!(
            resumed.predict(xv, cfg, false).unwrap(),
            full.predict(xv, cfg, false).unwrap()
        );
        // Other data: the saved state is refused, naming what differs.
        let other: Vec<f64> = y.iter().map(|v| v + 1.0).collect();
        let ov = MatRef::from_column_major_slice(&other, n, 1);
        let e = fit(&req, xv, ov, Some(&c), &mut NoHooks).unwrap_err();
        assert!(e.to_string().contains("data"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
