//! The adapter between the Python package and the library: the ONE module of `dgp-py`
//! that calls into the backends, the core and `dgp-io`. Everything else in the crate
//! converts Python objects to and from what this module takes and returns.
//!
//! Its interface is narrow on purpose (the library's whole-fit entry point will replace
//! its insides):
//!
//! * [`backend_names`], [`backend_info`] — the registered backends, their settings, their
//!   capabilities and their training defaults;
//! * [`fit`] — data (matrix views) + backend + layer count + common options + the
//!   backend's own settings + the caller's hooks → a [`FittedModel`];
//! * [`fit_rowstore`], [`parquet_to_rowstore`] — the same from rows on disk, streamed;
//! * [`FittedModel::predict`] — the predictive mixture in the data's original units;
//! * [`FittedModel::to_text`] / [`load_text`] — the library's versioned, checksummed
//!   model file;
//! * [`synth`] — the synthetic regression problem of `dgp-io`.
//!
//! A fit does what `dgp-bench run` does for one training split with the backend's own
//! defaults ([`dgp_traits::backend::RunDefaults`]), each replaced by an option the caller
//! gives: standardise with the training rows' statistics
//! ([`Standardizer::fit_views`]: inputs and targets; classification: inputs only), build
//! the backend's model on the standardised rows ([`Backend::build`], which includes any
//! hyper-parameter selection on validation rows), train it ([`Model::fit`] with the
//! caller's [`Hooks`]) and keep the standardiser with the model
//! ([`dgp_traits::fitted::Fitted`]).

use std::path::{Path, PathBuf};

use dgp_traits::backend::{Backend, CommonSettings, Settings, step_cap};
use dgp_traits::classification::ClassProbs;
use dgp_traits::data::{Dataset, RowSource, StandardizeOptions, Standardizer};
use dgp_traits::error::{Error, Result};
use dgp_traits::fit::{FitHooks, Hooks, LrSchedule, RunState};
use dgp_traits::fitted::{Fitted, Loadable};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::model::{FitConfig, FitReport, Model, Objective, PredictConfig};
use dgp_traits::params::ParamStore;
use dgp_traits::predictive::Predictive;
use dgp_traits::rng::Rng;
use dgp_traits::tape::{Tape, Var};
use dgp_traits::train::HeldOutRule;
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Every registered backend, in the order `dgp-bench` lists them (the same list as
/// `dgp-bench`'s registry, which is moving into a library crate).
static BACKENDS: &[&dyn Backend] = &[
    &dgp_svi::SVI_BACKEND,
    &dgp_nested::NESTED_BACKEND,
    &dgp_dspp::DSPP_BACKEND,
    &dgp_dspp::PPGPR_BACKEND,
    &dgp_structured::STAR_BACKEND,
    &dgp_structured::MF_BACKEND,
    &dgp_structured::FC_BACKEND,
    &dgp_hmc::DGPS_BACKEND,
    &dgp_hmc::SGHMC_BACKEND,
];

/// Offset between a fit's seed and the seed of its default prediction: the prediction
/// seed `dgp-bench run` uses for a split trained with seed `s` is `s + 0x5eed`.
pub const PREDICT_SEED_OFFSET: u64 = 0x5eed;

/// The names of the registered backends.
pub fn backend_names() -> Vec<&'static str> {
    BACKENDS.iter().map(|b| b.name()).collect()
}

/// The backend called `name`.
///
/// # Errors
/// [`Error::Config`] (field `backend`) listing the registered names.
pub fn find_backend(name: &str) -> Result<&'static dyn Backend> {
    BACKENDS
        .iter()
        .copied()
        .find(|b| b.name() == name)
        .ok_or_else(|| {
            Error::config(
                "backend",
                format!(
                    "unknown backend '{name}' (registered: {})",
                    backend_names().join(", ")
                ),
            )
        })
}

/// What a backend is, as JSON: `name`, `description`, `capabilities`, `settings` (each
/// allowed key with its default value) and `run_defaults` (the numbers a default fit
/// trains with).
///
/// # Errors
/// As [`find_backend`].
pub fn backend_info(name: &str) -> Result<Value> {
    let b = find_backend(name)?;
    let settings: serde_json::Map<String, Value> = b
        .allowed_keys()
        .into_iter()
        .map(|k| {
            let v = b.default_setting(&k).unwrap_or(Value::Null);
            (k, v)
        })
        .collect();
    let d = b.defaults(dgp_traits::backend::DEFAULT_PRESET)?;
    Ok(json!({
        "name": b.name(),
        "description": b.description(),
        "capabilities": b.capabilities(),
        "settings": settings,
        "run_defaults": {
            "num_inducing": d.num_inducing,
            "steps": d.training.steps,
            "epochs": d.training.epochs,
            "learning_rate": d.learning_rate,
            "unguarded_learning_rate": d.unguarded_learning_rate,
            "batch_cap": d.training.batch_size,
            "train_samples": d.train_samples,
            "predict_samples": d.predict_samples,
            "early_stopping": d.training.early_stopping,
        },
    }))
}

/// Held-out early stopping of a fit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EarlyStoppingOption {
    /// The backend's own default rule ([`dgp_traits::backend::RunDefaults::held_out_rule`]).
    #[default]
    Default,
    /// No held-out early stopping.
    None,
    /// This rule.
    Rule(HeldOutRule),
}

/// The options every backend shares; `None` = the backend's run default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FitOptions {
    /// Inducing points per layer.
    pub num_inducing: Option<usize>,
    /// Width of the hidden layers.
    pub hidden_width: Option<usize>,
    /// Samples of the training objective.
    pub train_samples: Option<usize>,
    /// Predictive mixture components (the model's components where
    /// [`dgp_traits::backend::Capabilities::samples_are_components`]).
    pub predict_samples: Option<usize>,
    /// Adam learning rate.
    pub learning_rate: Option<f64>,
    /// Choose hyper-parameters on validation rows where the backend does.
    pub tune: Option<bool>,
    /// Optimisation steps.
    pub steps: Option<usize>,
    /// Minibatch size cap.
    pub batch_size: Option<usize>,
    /// Seed of the initialisation, the minibatch order and the Monte Carlo noise.
    pub seed: u64,
    /// Held-out early stopping.
    pub early_stopping: EarlyStoppingOption,
    /// The run keeps checkpoints and continues from them (refused for a backend that
    /// cannot resume, and with held-out early stopping).
    pub checkpointing: bool,
}

/// What the targets are.
#[derive(Clone, Debug, PartialEq)]
pub enum Task {
    /// Real-valued targets (every column standardised).
    Regression,
    /// Class indices `0..num_classes` in one target column (kept as they are); the
    /// likelihood by name (`probit`, `logit`, `robust-max`, `softmax`), `None` = probit for
    /// two classes, robust-max for more (`dgp-bench`'s choice).
    Classification {
        /// K ≥ 2.
        num_classes: usize,
        /// The likelihood's name.
        likelihood: Option<String>,
    },
}

/// A fit's request: backend, architecture, options and the backend's own settings.
#[derive(Clone, Debug)]
pub struct FitRequest {
    /// Registered backend name.
    pub backend: String,
    /// GP layers.
    pub layers: usize,
    /// Regression or classification.
    pub task: Task,
    /// The shared options.
    pub options: FitOptions,
    /// The backend's own settings (fields of its configuration).
    pub settings: Settings,
}

/// A request resolved against the backend's defaults for `n` training rows: what
/// [`Backend::build`] and [`Model::fit`] are given.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The backend.
    pub backend: &'static dyn Backend,
    /// Its common settings.
    pub common: CommonSettings,
    /// Its own settings (with the likelihood of a classification task).
    pub settings: Settings,
    /// Training.
    pub fit: FitConfig,
    /// Default prediction (the fit's predictive components, seed + [`PREDICT_SEED_OFFSET`]).
    pub predict: PredictConfig,
}

/// The likelihood of a classification task with `k` classes called `name` (`None`: probit
/// for two classes, robust-max for more).
fn classification_likelihood(name: Option<&str>, k: usize) -> Result<Likelihood> {
    let name = name.unwrap_or(if k == 2 { "probit" } else { "robust-max" });
    let lik = match name {
        "probit" => Likelihood::probit(),
        "logit" => Likelihood::logit(),
        "robust-max" | "robust_max" => Likelihood::robust_max(k),
        "softmax" => Likelihood::softmax(k),
        other => {
            return Err(Error::config(
                "likelihood",
                format!("unknown likelihood '{other}' (probit, logit, robust-max, softmax)"),
            ));
        }
    };
    lik.validate()?;
    if lik.num_classes() != Some(k) {
        return Err(Error::config(
            "likelihood",
            format!(
                "'{name}' is binary but the targets have {k} classes (use robust-max or softmax)"
            ),
        ));
    }
    Ok(lik)
}

/// Resolves `req` for `n` training rows as `dgp-bench run` does (see the module docs) and
/// checks it with the backend ([`Backend::check`]) before any data are touched.
///
/// # Errors
/// [`Error::Config`] naming the option or setting: an unknown backend or setting, a value
/// out of range, a step count above the backend's cap, an early-stopping rule or a
/// likelihood the backend does not support.
pub fn resolve(req: &FitRequest, n: usize) -> Result<Resolved> {
    let b = find_backend(&req.backend)?;
    let caps = b.capabilities();
    let d = b.defaults(dgp_traits::backend::DEFAULT_PRESET)?;
    let o = &req.options;
    let rule = match &o.early_stopping {
        EarlyStoppingOption::Default => d.held_out_rule(),
        EarlyStoppingOption::None => None,
        EarlyStoppingOption::Rule(r) => Some(r.clone()),
    };
    if rule.is_some() && !caps.held_out_early_stopping {
        return Err(Error::config(
            "early_stopping",
            format!(
                "backend '{}' does not support held-out early stopping; pass early_stopping=None",
                b.name()
            ),
        ));
    }
    let mut settings = req.settings.clone();
    if let Task::Classification {
        num_classes,
        likelihood,
    } = &req.task
    {
        if settings.contains_key("likelihood") {
            return Err(Error::config(
                "likelihood",
                "a classifier sets the likelihood itself: pass likelihood=NAME, not a 'likelihood' setting",
            ));
        }
        let lik = classification_likelihood(likelihood.as_deref(), *num_classes)?;
        if !caps.supports(lik.family()) {
            return Err(Error::config(
                "likelihood",
                format!(
                    "backend '{}' does not train {:?} likelihoods",
                    b.name(),
                    lik.family()
                ),
            ));
        }
        let v = serde_json::to_value(&lik).map_err(|e| Error::Serde(e.to_string()))?;
        settings.insert("likelihood".into(), v);
    }
    let (train_samples, predict_samples) = if caps.samples_are_components {
        let s = o.predict_samples.unwrap_or(d.predict_samples);
        (s, s)
    } else {
        (
            o.train_samples.unwrap_or(d.train_samples),
            o.predict_samples.unwrap_or(d.predict_samples),
        )
    };
    let mut common =
        CommonSettings::from_defaults(dgp_traits::backend::DEFAULT_PRESET, req.layers, &d);
    common.num_inducing = o.num_inducing.unwrap_or(d.num_inducing);
    common.hidden_width = o.hidden_width;
    common.train_samples = train_samples;
    common.predict_samples = predict_samples;
    common.seed = o.seed;
    common.tune = o.tune.unwrap_or(true);
    common.learning_rate = Some(
        o.learning_rate
            .unwrap_or_else(|| d.learning_rate_for(rule.as_ref(), n)),
    );
    common.lr_schedule = Some(LrSchedule::Constant);
    for (v, field) in [
        (Some(req.layers), "layers"),
        (o.hidden_width, "hidden_width"),
        (Some(train_samples), "train_samples"),
        (Some(predict_samples), "predict_samples"),
        (o.batch_size, "batch_size"),
        (o.steps, "steps"),
    ] {
        if v == Some(0) {
            return Err(Error::config(field, "must be at least 1"));
        }
    }
    if let Some(lr) = o.learning_rate
        && !(lr.is_finite() && lr > 0.0)
    {
        return Err(Error::config(
            "learning_rate",
            format!("must be a finite number > 0, got {lr}"),
        ));
    }
    if o.checkpointing && !caps.resumable {
        return Err(Error::config(
            "checkpoint_dir",
            format!(
                "backend '{}' cannot continue a run from a checkpoint",
                b.name()
            ),
        ));
    }
    if o.checkpointing && rule.is_some() {
        return Err(Error::config(
            "checkpoint_dir",
            "a run with held-out early stopping cannot be checkpointed yet; pass early_stopping=None",
        ));
    }
    b.check(&common, &settings)?;
    let batch_size = o.batch_size.unwrap_or(d.training.batch_size).min(n).max(1);
    let cap = step_cap(b, &settings);
    let steps = match (o.steps, cap) {
        (Some(s), Some(c)) if s > c => {
            return Err(Error::config(
                "steps",
                format!(
                    "{s} steps: {} runs at most {c} (its setting {} caps them); ask for {c} or fewer, or raise that setting",
                    b.name(),
                    caps.steps_capped_by.unwrap_or("?")
                ),
            ));
        }
        (Some(s), _) => s,
        (None, c) => {
            let s = dgp_traits::fit::Training {
                batch_size,
                ..d.training.clone()
            }
            .steps_for(n);
            c.map_or(s, |c| s.min(c.max(1)))
        }
    };
    let fit = FitConfig {
        steps,
        batch_size,
        seed: o.seed,
        early_stopping: rule,
        convergence: None,
    };
    let predict = PredictConfig {
        samples: predict_samples,
        seed: o.seed.wrapping_add(PREDICT_SEED_OFFSET),
    };
    Ok(Resolved {
        backend: b,
        common,
        settings,
        fit,
        predict,
    })
}

/// A `Box<dyn Model>` as a [`Model`], so that a trained model of any backend can be kept
/// in a [`Fitted`] (and written as a model file).
struct DynModel(Box<dyn Model>);

impl Objective for DynModel {
    fn params(&self) -> &ParamStore {
        self.0.params()
    }
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &dgp_traits::model::Batch<'_>,
        rng: &mut Rng,
    ) -> Result<Var> {
        self.0.record(tape, params, batch, rng)
    }
    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &dgp_traits::model::Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        self.0.value_and_grad(tape, batch, rng)
    }
    fn value_and_grad_at(
        &self,
        flat: &[f64],
        tape: &mut Tape,
        batch: &dgp_traits::model::Batch<'_>,
        rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        self.0.value_and_grad_at(flat, tape, batch, rng)
    }
}

impl Model for DynModel {
    fn backend(&self) -> &'static str {
        self.0.backend()
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn params_mut(&mut self) -> &mut ParamStore {
        self.0.params_mut()
    }
    fn noise_variance(&self) -> Option<f64> {
        self.0.noise_variance()
    }
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        self.0.fit(data, cfg, hooks)
    }
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        self.0.predict(x, cfg)
    }
    fn to_json(&self) -> Result<String> {
        self.0.to_json()
    }
    fn function_samples(
        &self,
        x: MatRef<'_, f64>,
        count: usize,
        seed: u64,
    ) -> Result<Option<Mat<f64>>> {
        self.0.function_samples(x, count, seed)
    }
}

/// A [`Fitted`] of any model type: what a trained or loaded model answers.
trait AnyFitted: Send + Sync {
    fn model(&self) -> &dyn Model;
    fn standardizer(&self) -> &Standardizer;
    fn report(&self) -> &FitReport;
    fn predict_with(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive>;
    fn to_file_json(&self) -> Result<String>;
}

impl<M: Model> AnyFitted for Fitted<M> {
    fn model(&self) -> &dyn Model {
        Fitted::<M>::model(self)
    }
    fn standardizer(&self) -> &Standardizer {
        Fitted::<M>::standardizer(self)
    }
    fn report(&self) -> &FitReport {
        Fitted::<M>::report(self)
    }
    fn predict_with(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        Fitted::<M>::predict_with(self, x, cfg)
    }
    fn to_file_json(&self) -> Result<String> {
        Fitted::<M>::to_file_json(self)
    }
}

/// A trained (or loaded) model with its standardisation: predicts in original units.
pub struct FittedModel {
    inner: Box<dyn AnyFitted>,
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

    /// Whether the caller's hooks asked the fit to stop before its last step.
    pub fn stopped_early(&self) -> bool {
        self.stopped_early
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

    /// The predictive mixture at `x` (N×D, original units): for regression in the targets'
    /// original units ([`Fitted::predict_with`]); for classification (`classify`) the
    /// model's predictive with its class probabilities, at the standardised inputs (the
    /// labels were never scaled, and a K-class predictive has K latent outputs where the
    /// standardiser has one label column, which [`Fitted::predict_with`] cannot map back).
    ///
    /// # Errors
    /// A wrong number of columns, NaN/∞ inputs, the model's prediction errors.
    pub fn predict(
        &self,
        x: MatRef<'_, f64>,
        cfg: &PredictConfig,
        classify: bool,
    ) -> Result<Predictive> {
        if x.nrows() == 0 {
            return Err(Error::Empty("prediction at no points".into()));
        }
        dgp_traits::error::check_finite("inputs x", x)?;
        if !classify {
            return self.inner.predict_with(x, cfg);
        }
        let xs = self.inner.standardizer().transform_x(x)?;
        let p = self.inner.model().predict(xs.as_ref(), cfg)?;
        if p.class_probs().is_none() {
            return Err(Error::Unsupported(format!(
                "the '{}' model was not trained with a classification likelihood",
                self.backend()
            )));
        }
        Ok(p)
    }

    /// The model file's text ([`Fitted::to_file_json`]).
    ///
    /// # Errors
    /// The model's serialisation error.
    pub fn to_text(&self) -> Result<String> {
        self.inner.to_file_json()
    }
}

/// The model file's backend name, without checking the rest (read only to choose the
/// loader; [`Fitted::from_file_json`] checks everything).
fn file_backend(text: &str) -> Result<String> {
    #[derive(Deserialize)]
    struct Head {
        backend: String,
    }
    serde_json::from_str::<Head>(text)
        .map(|h| h.backend)
        .map_err(|e| Error::ModelFile {
            path: Default::default(),
            message: format!("not a model file, or truncated: {e}"),
        })
}

fn load_as<M: Loadable + 'static>(text: &str) -> Result<Box<dyn AnyFitted>> {
    Ok(Box::new(Fitted::<M>::from_file_json(text)?))
}

/// A model file's text read back ([`Fitted::from_file_json`] of the backend's model
/// type). With `expect`, a file of another backend is refused by name.
///
/// # Errors
/// [`Error::ModelFile`]: not a model file, another layout version, a checksum mismatch,
/// an unknown backend, another backend than `expect`.
pub fn load_text(text: &str, expect: Option<&str>) -> Result<FittedModel> {
    let name = file_backend(text)?;
    let bad = |message: String| Error::ModelFile {
        path: Default::default(),
        message,
    };
    if let Some(want) = expect {
        find_backend(want)?;
        if want != name {
            return Err(bad(format!(
                "the file holds a '{name}' model, not a '{want}' model"
            )));
        }
    }
    let inner = match name.as_str() {
        "svi" => load_as::<dgp_svi::SviModel>(text)?,
        "nested" => load_as::<dgp_nested::NestedModel>(text)?,
        "dspp" => load_as::<dgp_dspp::DsppModel>(text)?,
        "ppgpr" => load_as::<dgp_dspp::PpgprModel>(text)?,
        "star" | "mf" | "fc" => load_as::<dgp_structured::StructuredModel>(text)?,
        "dgps" => load_as::<dgp_hmc::DgpsModel>(text)?,
        "sghmc" => load_as::<dgp_hmc::SghmcModel>(text)?,
        other => {
            return Err(bad(format!(
                "the file holds a '{other}' model, which no registered backend reads (registered: {})",
                backend_names().join(", ")
            )));
        }
    };
    Ok(FittedModel {
        inner,
        stopped_early: false,
    })
}

/// Standardises `x`, `y` for `task` (the one copy of the data the fit makes) and checks
/// the target scale, as [`dgp_traits::fitted::Estimator::fit_with`] does.
fn standardise(
    task: &Task,
    x: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
) -> Result<(Standardizer, Dataset)> {
    let opts = match task {
        Task::Regression => StandardizeOptions::default(),
        Task::Classification { .. } => StandardizeOptions::default().keep_targets(),
    };
    let st = Standardizer::fit_views(x, y, opts)?;
    st.check_target_variance_representable()?;
    let train = Dataset::new(st.transform_x(x)?, st.transform_y(y)?)?;
    Ok((st, train))
}

/// Builds and trains the resolved model on `train` (model units), reading `source` (the
/// rows to train on: `train` itself, or a streamed file), under `hooks`.
fn build_and_train(
    r: &Resolved,
    build_rows: &Dataset,
    source: &dyn RowSource,
    st: Standardizer,
    hooks: &mut dyn Hooks,
) -> Result<FittedModel> {
    let mut fh = FitHooks::all(hooks);
    let mut model = r
        .backend
        .build(&r.common, &r.settings, &r.fit, build_rows, &fh)?;
    let report = model.fit(source, &r.fit, &mut fh)?;
    let stopped_early = fh.should_stop();
    Ok(FittedModel {
        inner: Box::new(Fitted::from_parts(
            DynModel(model),
            st,
            report,
            r.predict.clone(),
        )),
        stopped_early,
    })
}

/// Fits `req` on `x` (N×D) and `y` (N×P; classification: one column of class indices),
/// both in original units, under `hooks` (see the module docs). Returns the model and the
/// resolved configuration it was trained with.
///
/// # Errors
/// As [`resolve`]; bad data (row counts, NaN/∞, no rows); the backend's build and fit
/// errors ([`Error::Interrupted`] when `hooks` asked a build or an L-BFGS run to stop).
pub fn fit(
    req: &FitRequest,
    x: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    hooks: &mut dyn Hooks,
) -> Result<(FittedModel, Resolved)> {
    if x.nrows() != y.nrows() {
        return Err(Error::shape("fit (rows of X and y)", x.nrows(), y.nrows()));
    }
    let r = resolve(req, x.nrows())?;
    let (st, train) = standardise(&req.task, x, y)?;
    let fitted = build_and_train(&r, &train, &train, st, hooks)?;
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
    hooks: &mut dyn Hooks,
) -> Result<(FittedModel, Resolved, Task)> {
    use dgp_io::rowstore::RowStore;
    use dgp_io::standardize::{StandardizedRows, fit_standardizer};
    let b = find_backend(&req.backend)?;
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
    let chunk = dgp_io::chunks::DEFAULT_CHUNK_ROWS;
    let task = match &req.task {
        Task::Regression => Task::Regression,
        Task::Classification { likelihood, .. } => {
            let counts = dgp_io::labels::class_counts(&file, None, true, chunk)?;
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
    let opts = match task {
        Task::Regression => StandardizeOptions::default(),
        Task::Classification { .. } => StandardizeOptions::default().keep_targets(),
    };
    let st = fit_standardizer(&file, opts, chunk)?;
    st.check_target_variance_representable()?;
    let rows = StandardizedRows::new(file, st.clone())?;
    let sample = dgp_io::sample::reservoir_sample(&rows, init_rows.min(n), req.options.seed)?;
    let fitted = build_and_train(&r, &sample, &rows, st, hooks)?;
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
    use dgp_io::parquet_reader::{DEFAULT_PARQUET_BATCH_ROWS, ParquetChunks, parquet_column_names};
    let features = if features.is_empty() {
        parquet_column_names(path)?
            .into_iter()
            .filter(|c| !targets.contains(c))
            .collect()
    } else {
        features.to_vec()
    };
    let mut reader = ParquetChunks::open(path, &features, targets, DEFAULT_PARQUET_BATCH_ROWS)?;
    dgp_io::tabular::convert_to_rowstore(&mut reader, dest, &[path], DEFAULT_PARQUET_BATCH_ROWS)
}

/// The first `n` rows of the synthetic regression problem with `seed`
/// ([`dgp_io::synth::synth_dataset`]); with `path`, written as a row store there instead
/// ([`dgp_io::synth::write_synth`]) and `None` returned.
///
/// # Errors
/// `n == 0`; the writer's errors.
pub fn synth(n: usize, seed: u64, path: Option<&Path>) -> Result<Option<Dataset>> {
    match path {
        Some(p) => {
            dgp_io::synth::write_synth(p, n as u64, seed, |_| {})?;
            Ok(None)
        }
        None => dgp_io::synth::synth_dataset(n, seed).map(Some),
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

/// A saved run state in a directory (`DIR/run-state.json`, written atomically): the
/// checkpoints of a fit, and the state a fit started on the same directory continues
/// from. The library checks that a state matches the run it is given to (steps, seed,
/// batch, rows, parameter count).
pub struct CheckpointDir {
    dir: PathBuf,
    every: usize,
}

impl CheckpointDir {
    /// The directory `dir`, saving every `every` steps (0: only at the end and when the
    /// run is asked to stop).
    pub fn new(dir: PathBuf, every: usize) -> Self {
        CheckpointDir {
            dir,
            every: if every == 0 { usize::MAX } else { every },
        }
    }

    /// The cadence the library's [`dgp_traits::fit::Checkpoints::every`] asks for.
    pub fn every(&self) -> usize {
        self.every
    }

    /// The state file.
    pub fn file(&self) -> PathBuf {
        self.dir.join("run-state.json")
    }

    /// The saved state, if the directory holds one.
    pub fn read(&self) -> Option<RunState> {
        let text = std::fs::read_to_string(self.file()).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Saves `state` (atomically: a temporary file renamed over the old one).
    ///
    /// # Errors
    /// [`Error::Io`] when the directory or file cannot be written.
    pub fn write(&self, state: &RunState) -> Result<()> {
        let io = |source| Error::Io {
            path: self.file(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let text = serde_json::to_string(state).map_err(|e| Error::Serde(e.to_string()))?;
        let tmp = self.dir.join("run-state.json.tmp");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, self.file()).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::fit::{Checkpoints, Progress, RunControl};

    struct NoHooks;
    impl Progress for NoHooks {}
    impl RunControl for NoHooks {}
    impl Checkpoints for NoHooks {}

    fn request(backend: &str, options: FitOptions) -> FitRequest {
        FitRequest {
            backend: backend.into(),
            layers: 2,
            task: Task::Regression,
            options,
            settings: Settings::new(),
        }
    }

    /// Without options a request resolves to the backend's run defaults, as `dgp-bench run`
    /// resolves them: sizes, sample counts, batch, step count (capped where the backend
    /// caps it), learning rate for the held-out rule on these rows, seed 0.
    #[test]
    fn defaults_are_the_backends_run_defaults() {
        for b in BACKENDS.iter() {
            let mut req = request(b.name(), FitOptions::default());
            if b.name() == "ppgpr" {
                req.layers = 1;
            }
            let n = 5_000;
            let r = resolve(&req, n).unwrap();
            let d = b.defaults("default").unwrap();
            let batch = d.training.batch_size.min(n);
            let steps = d.training.steps_for(n);
            let steps = step_cap(*b, &Settings::new()).map_or(steps, |c| steps.min(c));
            assert_eq!(r.fit.batch_size, batch, "{}", b.name());
            assert_eq!(r.fit.steps, steps, "{}", b.name());
            assert_eq!(r.fit.early_stopping, d.held_out_rule(), "{}", b.name());
            assert_eq!(r.common.num_inducing, d.num_inducing);
            assert_eq!(r.common.predict_samples, d.predict_samples);
            let rule = d.held_out_rule();
            assert_eq!(
                r.common.learning_rate,
                Some(d.learning_rate_for(rule.as_ref(), n))
            );
            assert_eq!((r.fit.seed, r.predict.seed), (0, PREDICT_SEED_OFFSET));
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
    }

    /// A fit on a row-major view of the caller's buffer predicts what the library's own
    /// path (a `Dataset`, `Standardizer::fit_with`, `Backend::build`, `Model::fit`,
    /// `Fitted::predict_with`) predicts, bit for bit; its model file reads back to the
    /// same predictions, and not as another backend's.
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
        let (m, r) = fit(&req, xv, yv, &mut NoHooks).unwrap();
        let p = m.predict(xv, &r.predict, false).unwrap();
        // The library's path on a Dataset of the same numbers.
        let data = Dataset::new(xv.to_owned(), yv.to_owned()).unwrap();
        let st = Standardizer::fit(&data);
        let train = st.transform(&data).unwrap();
        let mut model = r
            .backend
            .build(&r.common, &r.settings, &r.fit, &train, &FitHooks::none())
            .unwrap();
        let report = model.fit(&train, &r.fit, &mut FitHooks::none()).unwrap();
        let reference = Fitted::from_parts(DynModel(model), st, report, r.predict.clone());
        assert_eq!(p, reference.predict_with(xv, &r.predict).unwrap());
        let text = m.to_text().unwrap();
        let back = load_text(&text, Some("svi")).unwrap();
        assert_eq!(back.predict(xv, &r.predict, false).unwrap(), p);
        let e = load_text(&text, Some("dspp")).unwrap_err();
        assert!(e.to_string().contains("not a 'dspp' model"), "{e}");
        assert!(load_text("{", None).is_err());
    }
}
