//! How an inference backend registers itself with a harness (the benchmark, a script).
//!
//! A backend crate exports one value implementing [`Backend`]: its name, its own
//! configuration type (serde, unknown fields rejected) and a build function. The harness
//! knows nothing of that configuration: it passes
//!
//! * the [`CommonSettings`] every deep GP has (layers, inducing points, hidden width,
//!   sample counts, seed, whether to tune on validation data), and
//! * backend-specific [`Settings`]: a JSON object of the backend configuration's fields,
//!   e.g. a harness's `--set natgrad.gamma=1` or settings file, put together with
//!   [`insert_dotted`] (dotted keys) and [`merge_settings`].
//!
//! The backend turns both into its configuration with [`apply_settings`] (the settings
//! merged onto the configuration the common part gives; an unknown key is an error naming
//! the key and listing the allowed ones; a key the common part owns is an error naming the
//! flag that sets it) and validates it ONCE into a [`Checked`] configuration (the
//! unchecked-parameters / checked-type split of linfa's parameter guards), whose range
//! errors name the field and its allowed range.
//!
//! With no settings, [`apply_settings`] returns the base configuration untouched (no JSON
//! round trip), so a harness that passes none builds exactly the model it built before.

use std::ops::Deref;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fit::LrSchedule;
use crate::fitted::{Estimator, Fitted, Loadable};
pub use crate::likelihoods::LikelihoodFamily;
use crate::memory::{MemoryEstimate, MemoryShape};
use crate::model::{FitConfig, FitHooks, Model};
use crate::optim::AdamConfig;
pub use crate::run_defaults::{DemoSettings, RunDefaults};
use dgp_core::{Error, Result};
use dgp_data::Dataset;

/// Backend-specific settings: a JSON object whose keys are fields of the backend's
/// configuration (nested objects for nested fields).
pub type Settings = Map<String, Value>;

/// The settings every deep-GP backend receives from a harness, applied onto one of the
/// backend's named configurations ([`CommonSettings::preset`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommonSettings {
    /// The named configuration these settings are applied onto ([`Backend::presets`]):
    /// `"default"` (the backend configuration's `Default`), `"paper"`, ...
    #[serde(default = "default_preset")]
    pub preset: String,
    /// Number of GP layers L (1 = the sparse-GP baseline).
    pub layers: usize,
    /// Inducing points per layer (per GP), M.
    pub num_inducing: usize,
    /// Width of the hidden layers; `None` = the backend's default.
    pub hidden_width: Option<usize>,
    /// Samples of the training objective (svi: Monte Carlo samples per point).
    pub train_samples: usize,
    /// Mixture components of the predictive (dspp: quadrature sites, in training too).
    pub predict_samples: usize,
    /// Seed of the model's initialisation.
    pub seed: u64,
    /// Choose hyper-parameters that are not given explicitly on a validation part of the
    /// training data (backends without such hyper-parameters ignore it).
    pub tune: bool,
    /// Base learning rate α of the backend's Adam steps (Kingma & Ba 2015, Algorithm 1;
    /// [`AdamConfig::lr`]), which `base_config` puts into the backend's own
    /// configuration; `None`: the backend's default. A backend whose
    /// [`Capabilities::uses_learning_rate`] is `false` ignores it.
    #[serde(default)]
    pub learning_rate: Option<f64>,
    /// Schedule of that learning rate ([`AdamConfig::schedule`]); `None`:
    /// the backend's default (constant for every Adam backend). Backends with a schedule of
    /// their own (dspp's `lr_drops`) and those that use no learning rate ignore it.
    #[serde(default)]
    pub lr_schedule: Option<LrSchedule>,
}

/// The name of every backend's default configuration.
pub const DEFAULT_PRESET: &str = "default";

fn default_preset() -> String {
    DEFAULT_PRESET.to_string()
}

/// A named configuration of a backend ([`Backend::presets`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Preset {
    /// Its name (`"default"`, `"paper"`, ...).
    pub name: &'static str,
    /// The evaluation protocol of the paper whose settings it is (`"lindinger"`,
    /// `"dspp"`), under which a harness selects it; `None` for a preset no protocol
    /// selects.
    pub protocol: Option<&'static str>,
    /// One line on what it is.
    pub summary: &'static str,
}

impl CommonSettings {
    /// The common settings a configuration holds ([`RunDefaults`]) for `layers` layers,
    /// applied onto preset `preset`: these leave the configuration as it is (up to the
    /// layer count), with seed 0 and tuning on validation rows where the backend tunes.
    pub fn from_defaults(preset: &str, layers: usize, d: &RunDefaults) -> Self {
        CommonSettings {
            preset: preset.to_string(),
            layers,
            num_inducing: d.num_inducing,
            hidden_width: None,
            train_samples: d.train_samples,
            predict_samples: d.predict_samples,
            seed: 0,
            tune: true,
            learning_rate: None,
            lr_schedule: None,
        }
    }

    /// `base` (a backend's default Adam settings) with the learning rate and schedule
    /// asked for here ([`CommonSettings::learning_rate`], [`CommonSettings::lr_schedule`])
    /// in place of its own; each `None` keeps `base`'s value. A backend's `base_config`
    /// calls it for the Adam settings of its configuration.
    pub fn adam_over(&self, base: AdamConfig) -> AdamConfig {
        AdamConfig {
            lr: self.learning_rate.unwrap_or(base.lr),
            schedule: self.lr_schedule.clone().unwrap_or(base.schedule),
            ..base
        }
    }
}

/// A configuration that can check its own ranges.
pub trait Validate {
    /// Checks every field; the error names the field and its allowed range.
    ///
    /// # Errors
    /// [`Error::Config`] for the first field out of range.
    fn validate(&self) -> Result<()>;
}

/// A configuration that passed [`Validate::validate`]: the only way to obtain one is
/// [`Checked::new`], so code taking a `Checked<C>` never re-validates.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked<C>(C);

impl<C: Validate> Checked<C> {
    /// Validates `config` once.
    ///
    /// # Errors
    /// The configuration's own [`Validate::validate`] error.
    pub fn new(config: C) -> Result<Self> {
        config.validate()?;
        Ok(Checked(config))
    }
}

impl<C> Checked<C> {
    /// The validated configuration.
    pub fn into_inner(self) -> C {
        self.0
    }
}

impl<C> Deref for Checked<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.0
    }
}

/// How a backend's `fit` visits the training rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrainingMode {
    /// Stochastic steps on minibatches drawn by the core executor (the batch may be every
    /// row when the data are small).
    Minibatch,
    /// Every step sees every row (L-BFGS, a full-batch sampler): the data must be in memory.
    FullBatch,
}

/// What a backend can do, declared by the backend itself so that a harness never infers
/// behaviour from a backend's name. Every field describes the backend's own `fit` and
/// `build` with any configuration it accepts, unless the field says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// Minibatch or full-batch training.
    pub training: TrainingMode,
    /// `fit` honours [`FitConfig::early_stopping`] (held-out early stopping).
    pub held_out_early_stopping: bool,
    /// A run checkpointed through the caller's [`crate::fit::Checkpoints`] continues bit for bit after
    /// a restart (the whole fit is one executor run whose stepper and observers save
    /// their state).
    pub resumable: bool,
    /// `build` chooses hyper-parameters on validation rows held out of the training data
    /// when [`CommonSettings::tune`] is set (and the choice is not fixed by settings).
    pub selects_on_validation: bool,
    /// `fit` can train from a [`dgp_data::RowSource`] that does not hold the rows in
    /// memory ([`crate::model::Model::fit`] with a source whose `in_memory` is `None`).
    pub streams: bool,
    /// `fit` computes every minibatch objective's value and gradient through the core's
    /// row chunks ([`crate::model::chunked_value_and_grad`]) in every configuration, so
    /// the processes of a distributed launch ([`crate::distribute::ChunkRunner`]) share
    /// each step's work and together give the single-process result. `false`: some
    /// configuration trains full batch or on one tape (L-BFGS, a moment-propagating
    /// objective), every process would repeat the whole computation, and a harness
    /// refuses a launch of several processes before training.
    pub data_parallel: bool,
    /// The likelihood families the backend trains with.
    pub likelihoods: &'static [LikelihoodFamily],
    /// What [`CommonSettings::predict_samples`] means when predicting.
    pub samples_in_prediction: &'static str,
    /// What the sample count of a timed training step means (`train_samples`, or the
    /// model's own component count).
    pub samples_in_training: &'static str,
    /// The sample count sets the number of mixture components OF THE MODEL (dspp's
    /// quadrature sites), used in training and prediction alike.
    pub samples_are_components: bool,
    /// `base_config` puts [`CommonSettings::learning_rate`] into the configuration and
    /// `fit` uses it in at least one configuration (Adam, a warm-up before L-BFGS).
    /// `false` is a promise: whatever the configuration, the learning rate is never read
    /// (an L-BFGS fit, a sampler with its own step sizes), so a harness must neither pass
    /// a user's learning rate to it as if it mattered nor record one.
    pub uses_learning_rate: bool,
    /// The top-level setting (a non-negative integer field of the backend's configuration)
    /// whose value caps [`FitConfig::steps`]: `fit` runs at most `min(steps, value)` steps
    /// (dgps: `max_iters`, the L-BFGS iterations per restart). `None`: `fit` runs the
    /// steps it is given (fewer only when early stopping or convergence ends it). Read
    /// the cap of a run with [`step_cap`].
    pub steps_capped_by: Option<&'static str>,
}

impl Capabilities {
    /// Whether the backend trains with likelihoods of `family`.
    pub fn supports(&self, family: LikelihoodFamily) -> bool {
        self.likelihoods.contains(&family)
    }
}

/// The most steps `backend`'s `fit` runs with `settings` ([`Capabilities::steps_capped_by`]):
/// the setting's value in `settings`, else its default; `None` when the backend has no
/// cap (or the value is not a non-negative integer, which [`Backend::check`] refuses).
pub fn step_cap(backend: &dyn Backend, settings: &Settings) -> Option<usize> {
    let key = backend.capabilities().steps_capped_by?;
    let value = settings
        .get(key)
        .cloned()
        .or_else(|| backend.default_setting(key))?;
    value
        .as_u64()
        .map(|v| usize::try_from(v).unwrap_or(usize::MAX))
}

/// An inference backend as a harness sees it.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Name used on the command line and in reports.
    fn name(&self) -> &'static str;

    /// One-line description (paper and method).
    fn description(&self) -> &'static str;

    /// What the backend can do ([`Capabilities`]).
    fn capabilities(&self) -> Capabilities;

    /// The backend's named configurations, `"default"` first (the configuration's
    /// `Default`: the good, fast default every harness trains unless asked otherwise),
    /// then the paper's own setting and any others.
    fn presets(&self) -> &'static [Preset];

    /// The common settings preset `preset` holds ([`RunDefaults`]): what a fit given
    /// only data and a layer count trains, in the library
    /// ([`crate::fitted::Estimator::fit`]) and in every harness.
    ///
    /// # Errors
    /// [`Error::Config`] (field `preset`) for a name that is not one of
    /// [`Backend::presets`], listing them.
    fn defaults(&self, preset: &str) -> Result<RunDefaults>;

    /// The preset a harness selects under evaluation protocol `protocol`: the one whose
    /// [`Preset::protocol`] it is, else `"default"`.
    fn preset_for_protocol(&self, protocol: &str) -> &'static str {
        self.presets()
            .iter()
            .find(|p| p.protocol == Some(protocol))
            .map_or(DEFAULT_PRESET, |p| p.name)
    }

    /// The backend's settings in a short demonstration job ([`DemoSettings`]).
    fn demo(&self) -> DemoSettings;

    /// The model names this backend's model files carry ([`Model::backend`] of the models
    /// it builds).
    fn model_names(&self) -> &'static [&'static str];

    /// A model file of this backend, read and checked ([`Fitted::from_file_json`]), its
    /// model boxed.
    ///
    /// # Errors
    /// [`Error::ModelFile`] as [`Fitted::from_file_json`] says.
    fn load_fitted(&self, text: &str) -> Result<Fitted<Box<dyn Model>>>;

    /// The keys [`Settings`] may hold (top-level fields of the backend's configuration that
    /// the common settings do not set), sorted.
    fn allowed_keys(&self) -> Vec<String>;

    /// The value setting `key` takes when a run does not give it (in the backend's
    /// default preset), `None` for a key that is not a setting.
    fn default_setting(&self, key: &str) -> Option<Value>;

    /// Checks `common` and `settings` without data: builds and validates the configuration
    /// (no hyper-parameter search), so a harness can reject bad settings before training;
    /// returns the common settings the checked configuration holds (its training
    /// schedule as `settings` left it, e.g. `training.convergence`).
    ///
    /// # Errors
    /// [`Error::Config`] naming the key or field.
    fn check(&self, common: &CommonSettings, settings: &Settings) -> Result<RunDefaults>;

    /// Builds an untrained model for the (standardised) training data. `fit` is what the
    /// caller will train with; a backend that tunes hyper-parameters on validation data
    /// (`common.tune`) trains its candidates with it, polling `stop`'s
    /// [`crate::fit::RunControl::should_stop`] (only that: the candidates' steps are not the caller's
    /// run), so a search ends when the caller asks.
    ///
    /// # Errors
    /// As [`Backend::check`], or the model constructor's error; [`Error::Interrupted`]
    /// when `stop` asked a search to end.
    fn build(
        &self,
        common: &CommonSettings,
        settings: &Settings,
        fit: &FitConfig,
        train: &Dataset,
        stop: &FitHooks<'_>,
    ) -> Result<Box<dyn Model>>;

    /// A phrase per setting for a one-line description of a run (`", key value"` each by
    /// default); empty without settings.
    fn describe_settings(&self, settings: &Settings) -> String {
        describe_generic(settings)
    }

    /// How many of `n_train` training rows [`Backend::build`] holds out to choose
    /// hyper-parameters on with these settings (0 when it chooses nothing: the default).
    fn validation_rows(
        &self,
        _common: &CommonSettings,
        _settings: &Settings,
        _n_train: usize,
    ) -> usize {
        0
    }

    /// A conservative upper bound of the peak memory of a run of this backend with
    /// `shape` ([`crate::memory`]), so a harness can refuse a run that would not fit
    /// before anything is allocated. By default the sparse deep GP's bound with the input
    /// dimension clamped to 5..=30 as the default width
    /// ([`crate::memory::sparse_dgp`]); a backend whose memory has another shape
    /// overrides it.
    fn memory_estimate(&self, shape: &MemoryShape) -> MemoryEstimate {
        crate::memory::sparse_dgp(shape, shape.clamped_input_width())
    }
}

/// A backend whose settings are the serde fields of one configuration type. Implementing
/// it gives [`Backend`] through a blanket impl: the allowed keys come from the
/// [`ConfigSchema`], `check` builds the [`Checked`] configuration, `build` hands it to
/// [`ConfigBackend::build_checked`]. A backend states only what is its own: the common
/// settings' fields, any spelling normalisation and how a model is made.
pub trait ConfigBackend: Send + Sync + std::fmt::Debug {
    /// The backend's configuration (validated once into [`Checked`]), an [`Estimator`]
    /// whose `Default` is the backend's default.
    type Config: Serialize + DeserializeOwned + Clone + Default + Validate + Estimator;

    /// Name used on the command line and in reports.
    fn name(&self) -> &'static str;

    /// One-line description (paper and method).
    fn description(&self) -> &'static str;

    /// As [`Backend::capabilities`].
    fn capabilities(&self) -> Capabilities;

    /// As [`Backend::presets`].
    fn presets(&self) -> &'static [Preset];

    /// The configuration of preset `name` (one of [`ConfigBackend::presets`]), `None` for
    /// another name.
    fn preset(&self, name: &str) -> Option<Self::Config>;

    /// As [`Backend::demo`].
    fn demo(&self) -> DemoSettings;

    /// Which fields the common settings own, and the nested sections.
    fn schema(&self) -> &ConfigSchema<'static>;

    /// `base` (a preset's configuration) with the common settings' fields written into
    /// it. With the common settings the preset holds
    /// ([`CommonSettings::from_defaults`]) it returns `base` with only the layer count
    /// changed.
    fn apply_common(&self, base: Self::Config, common: &CommonSettings) -> Self::Config;

    /// The configuration of preset `name`.
    ///
    /// # Errors
    /// [`Error::Config`] (field `preset`) naming the presets there are.
    fn preset_config(&self, name: &str) -> Result<Self::Config> {
        self.preset(name)
            .ok_or_else(|| unknown_preset(self.name(), name, self.presets()))
    }

    /// Checks of the common settings beyond the configuration's own (none by default).
    ///
    /// # Errors
    /// [`Error::Config`] naming the setting.
    fn check_common(&self, _common: &CommonSettings) -> Result<()> {
        Ok(())
    }

    /// `settings` in canonical spelling before they are applied (unchanged by default).
    ///
    /// # Errors
    /// [`Error::Config`] naming the key whose value cannot be read.
    fn normalise(&self, settings: &Settings) -> Result<Settings> {
        Ok(settings.clone())
    }

    /// The checked configuration of `common` with `settings` applied.
    ///
    /// # Errors
    /// Unknown or reserved keys, values of the wrong type, fields out of range.
    fn config(
        &self,
        common: &CommonSettings,
        settings: &Settings,
    ) -> Result<Checked<Self::Config>> {
        let base = self.preset_config(&common.preset)?;
        self.check_common(common)?;
        let settings = self.normalise(settings)?;
        Checked::new(apply_settings(
            self.schema(),
            &self.apply_common(base, common),
            &settings,
        )?)
    }

    /// Builds an untrained model from the checked configuration; the settings, fit
    /// configuration, data and the caller's stop request (`stop`, see [`Backend::build`])
    /// are at hand for a backend that tunes on validation data. By default the
    /// configuration's own [`Estimator::build`], the library's build.
    ///
    /// # Errors
    /// The model constructor's error; [`Error::Interrupted`] as [`Backend::build`].
    fn build_checked(
        &self,
        config: Checked<Self::Config>,
        _common: &CommonSettings,
        _settings: &Settings,
        fit: &FitConfig,
        train: &Dataset,
        stop: &FitHooks<'_>,
    ) -> Result<Box<dyn Model>> {
        Ok(Box::new(config.build(train, fit, stop)?))
    }

    /// As [`Backend::model_names`]: by default those of the configuration's model type.
    fn model_names(&self) -> &'static [&'static str]
    where
        <Self::Config as Estimator>::Model: Loadable,
    {
        <<Self::Config as Estimator>::Model as Loadable>::BACKENDS
    }

    /// As [`Backend::load_fitted`]: by default a file of the configuration's model type.
    ///
    /// # Errors
    /// As [`Backend::load_fitted`].
    fn load_fitted(&self, text: &str) -> Result<Fitted<Box<dyn Model>>>
    where
        <Self::Config as Estimator>::Model: Loadable,
    {
        Ok(Fitted::<<Self::Config as Estimator>::Model>::from_file_json(text)?.boxed())
    }

    /// As [`Backend::describe_settings`].
    fn describe_settings(&self, settings: &Settings) -> String {
        describe_generic(settings)
    }

    /// As [`Backend::validation_rows`] (0 by default).
    fn validation_rows(
        &self,
        _common: &CommonSettings,
        _settings: &Settings,
        _n_train: usize,
    ) -> usize {
        0
    }

    /// As [`Backend::memory_estimate`] (the sparse deep GP's bound by default).
    fn memory_estimate(&self, shape: &MemoryShape) -> MemoryEstimate {
        crate::memory::sparse_dgp(shape, shape.clamped_input_width())
    }
}

impl<T: ConfigBackend> Backend for T
where
    <T::Config as Estimator>::Model: Loadable,
{
    fn name(&self) -> &'static str {
        ConfigBackend::name(self)
    }

    fn description(&self) -> &'static str {
        ConfigBackend::description(self)
    }

    fn capabilities(&self) -> Capabilities {
        ConfigBackend::capabilities(self)
    }

    fn presets(&self) -> &'static [Preset] {
        ConfigBackend::presets(self)
    }

    fn defaults(&self, preset: &str) -> Result<RunDefaults> {
        Ok(self.preset_config(preset)?.defaults())
    }

    fn demo(&self) -> DemoSettings {
        ConfigBackend::demo(self)
    }

    fn model_names(&self) -> &'static [&'static str] {
        ConfigBackend::model_names(self)
    }

    fn load_fitted(&self, text: &str) -> Result<Fitted<Box<dyn Model>>> {
        ConfigBackend::load_fitted(self, text)
    }

    fn allowed_keys(&self) -> Vec<String> {
        self.schema()
            .allowed_keys(&self.preset(DEFAULT_PRESET).unwrap_or_default())
    }

    fn default_setting(&self, key: &str) -> Option<Value> {
        if !self.allowed_keys().iter().any(|k| k == key) {
            return None;
        }
        match serde_json::to_value(self.preset(DEFAULT_PRESET).unwrap_or_default()) {
            Ok(Value::Object(mut m)) => m.remove(key),
            _ => None,
        }
    }

    fn check(&self, common: &CommonSettings, settings: &Settings) -> Result<RunDefaults> {
        Ok(self.config(common, settings)?.defaults())
    }

    fn build(
        &self,
        common: &CommonSettings,
        settings: &Settings,
        fit: &FitConfig,
        train: &Dataset,
        stop: &FitHooks<'_>,
    ) -> Result<Box<dyn Model>> {
        let config = self.config(common, settings)?;
        self.build_checked(config, common, settings, fit, train, stop)
    }

    fn describe_settings(&self, settings: &Settings) -> String {
        ConfigBackend::describe_settings(self, settings)
    }

    fn validation_rows(
        &self,
        common: &CommonSettings,
        settings: &Settings,
        n_train: usize,
    ) -> usize {
        ConfigBackend::validation_rows(self, common, settings, n_train)
    }

    fn memory_estimate(&self, shape: &MemoryShape) -> MemoryEstimate {
        ConfigBackend::memory_estimate(self, shape)
    }
}

/// The error of a preset name that `backend` does not have.
pub fn unknown_preset(backend: &str, name: &str, presets: &[Preset]) -> Error {
    let names: Vec<&str> = presets.iter().map(|p| p.name).collect();
    Error::config(
        "preset",
        format!(
            "{backend}: no preset named '{name}' (presets: {})",
            names.join(", ")
        ),
    )
}

/// `", key value"` for every leaf of `settings` (dotted keys for nested fields; strings
/// without quotes).
pub fn describe_generic(settings: &Settings) -> String {
    fn walk(prefix: &str, v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            Value::String(s) => out.push_str(&format!(", {prefix} {s}")),
            other => out.push_str(&format!(", {prefix} {other}")),
        }
    }
    let mut out = String::new();
    for (k, v) in settings {
        walk(k, v, &mut out);
    }
    out
}

/// Inserts `value` at the dotted `key` of `settings`, creating nested objects; a later
/// value replaces an earlier one.
///
/// # Errors
/// [`Error::Config`] when a prefix of `key` already holds a non-object value.
pub fn insert_dotted(settings: &mut Settings, key: &str, value: Value) -> Result<()> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or(key);
    let mut map = settings;
    let mut path = String::new();
    for p in parts {
        path = if path.is_empty() {
            p.to_string()
        } else {
            format!("{path}.{p}")
        };
        let slot = map
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        map = slot.as_object_mut().ok_or_else(|| {
            Error::config(
                key.to_string(),
                format!("'{key}': '{path}' already holds a value, not an object"),
            )
        })?;
    }
    map.insert(last.to_string(), value);
    Ok(())
}

/// Merges `over` into `into`: objects key by key (recursively), everything else replaced;
/// an object naming another variant of a tagged enum ([`switches_variant`]) replaces the
/// old object wholesale.
pub fn merge_settings(into: &mut Settings, over: &Settings) {
    for (k, v) in over {
        match (into.get_mut(k), v) {
            (Some(Value::Object(a)), Value::Object(b)) if !switches_variant(a, b) => {
                merge_settings(a, b)
            }
            _ => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The default value of an optional configuration section (see [`ConfigSchema::sections`]).
pub type SectionDefault = fn() -> Value;

/// What [`apply_settings`] needs to know about a backend's configuration besides its
/// value.
#[derive(Clone, Copy, Debug)]
pub struct ConfigSchema<'a> {
    /// Backend name (prefix of every error).
    pub backend: &'a str,
    /// Configuration keys the common settings own, with the [`CommonSettings`] field that
    /// sets them (e.g. `("tau", "hidden_width")`; `"backend"` for a key the backend's name
    /// decides): settings may not hold them. A refusal names the common setting as
    /// ``the common setting `NAME` `` ([`COMMON_SETTING_MARK`]), which a harness may
    /// translate into its own spelling (a command-line flag).
    pub reserved: &'a [(&'a str, &'a str)],
    /// Defaults of optional sections that are `null` in the base configuration (e.g.
    /// svi's `natgrad`), so that `natgrad.gamma=1` alone gives a complete section.
    pub sections: &'a [(&'a str, SectionDefault)],
}

impl ConfigSchema<'_> {
    /// The keys settings may hold for a configuration serialising to `base`, sorted.
    pub fn allowed_keys<C: Serialize>(&self, base: &C) -> Vec<String> {
        let mut keys: Vec<String> = match serde_json::to_value(base) {
            Ok(Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        };
        keys.retain(|k| !self.reserved.iter().any(|(r, _)| r == k));
        keys.sort();
        keys
    }
}

/// How a refusal of a reserved key names the common setting that owns it
/// ([`ConfigSchema::reserved`]): followed by the setting's name in backquotes.
pub const COMMON_SETTING_MARK: &str = "the common setting ";

/// Checks that every key of `over` exists in `base` (recursively through objects).
fn check_keys(
    schema: &ConfigSchema<'_>,
    path: &str,
    base: &Map<String, Value>,
    over: &Settings,
) -> Result<()> {
    for (k, v) in over {
        let full = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        if path.is_empty()
            && let Some((_, common)) = schema.reserved.iter().find(|(r, _)| r == k)
        {
            return Err(Error::config(
                k.to_string(),
                format!(
                    "{}: '{k}' is set by {COMMON_SETTING_MARK}`{common}`, not by a backend setting",
                    schema.backend
                ),
            ));
        }
        let Some(b) = base.get(k) else {
            let mut allowed: Vec<&str> = base
                .keys()
                .map(String::as_str)
                .filter(|key| !path.is_empty() || !schema.reserved.iter().any(|(r, _)| r == key))
                .collect();
            allowed.sort_unstable();
            let under = if path.is_empty() {
                String::new()
            } else {
                format!(" under '{path}'")
            };
            return Err(Error::config(
                full.to_string(),
                format!(
                    "{}: unknown setting '{full}' (allowed{under}: {})",
                    schema.backend,
                    allowed.join(", ")
                ),
            ));
        };
        // A new variant of a tagged enum brings its own keys; deserialising checks them.
        if let (Value::Object(bm), Value::Object(om)) = (b, v)
            && !switches_variant(bm, om)
        {
            check_keys(schema, &full, bm, om)?;
        }
    }
    Ok(())
}

/// The keys that name the variant of an internally tagged enum in the configurations of
/// this workspace (`#[serde(tag = "kind")]`, e.g. [`crate::likelihoods::Likelihood`], and
/// `#[serde(tag = "type")]`).
pub const VARIANT_TAGS: &[&str] = &["kind", "type"];

/// True when the settings object `over` names another variant of a tagged enum than the
/// object `base` holds (a string under one of the [`VARIANT_TAGS`] in both, different).
/// Such an object replaces `base` wholesale in [`merge_settings`] and [`apply_settings`]:
/// the fields of one variant are not fields of another, so a key-by-key merge would mix
/// them.
pub fn switches_variant(base: &Map<String, Value>, over: &Map<String, Value>) -> bool {
    VARIANT_TAGS.iter().any(|t| {
        matches!(
            (base.get(*t), over.get(*t)),
            (Some(Value::String(a)), Some(Value::String(b))) if a != b
        )
    })
}

fn merge_value(into: &mut Value, over: &Value) {
    match (into, over) {
        (Value::Object(a), Value::Object(b)) if !switches_variant(a, b) => merge_settings(a, b),
        (slot, v) => *slot = v.clone(),
    }
}

/// The configuration `base` with `settings` merged onto it (see the module docs).
///
/// Without settings, `base` is returned as it is. Otherwise `base` is serialised, the
/// optional sections that `settings` touch and that are `null` get their defaults, the
/// keys are checked (unknown → error naming the key and the allowed ones; reserved →
/// error naming the flag), the settings are merged (objects recursively) and the result is
/// deserialised (a value of the wrong type → error naming the key).
///
/// # Errors
/// [`Error::Config`] as described.
pub fn apply_settings<C: Serialize + DeserializeOwned + Clone>(
    schema: &ConfigSchema<'_>,
    base: &C,
    settings: &Settings,
) -> Result<C> {
    if settings.is_empty() {
        return Ok(base.clone());
    }
    let backend = schema.backend;
    let ser = |e: serde_json::Error| Error::config("setting", format!("{backend}: {e}"));
    let Value::Object(mut value) = serde_json::to_value(base).map_err(ser)? else {
        return Err(Error::config(
            "setting",
            format!("{backend}: the configuration is not a JSON object"),
        ));
    };
    for (key, default) in schema.sections {
        if settings.get(*key).is_some_and(Value::is_object)
            && value.get(*key).is_none_or(Value::is_null)
        {
            value.insert((*key).to_string(), default());
        }
    }
    check_keys(schema, "", &value, settings)?;
    for (k, v) in settings {
        let mut one = value.clone();
        if let Some(slot) = one.get_mut(k) {
            merge_value(slot, v);
        }
        if let Err(e) = serde_json::from_value::<C>(Value::Object(one)) {
            return Err(Error::config(
                k.to_string(),
                format!("{backend}: setting '{k}': {e}"),
            ));
        }
    }
    merge_settings(&mut value, settings);
    serde_json::from_value(Value::Object(value)).map_err(ser)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        a: f64,
        b: usize,
    }

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Cfg {
        layers: usize,
        beta: f64,
        name: String,
        inner: Option<Inner>,
    }

    fn schema() -> ConfigSchema<'static> {
        ConfigSchema {
            backend: "toy",
            reserved: &[("layers", "layers")],
            sections: &[("inner", || serde_json::json!({"a": 0.5, "b": 2}))],
        }
    }

    fn base() -> Cfg {
        Cfg {
            layers: 2,
            beta: 0.05,
            name: "x".into(),
            inner: None,
        }
    }

    fn set(pairs: &[&str]) -> Settings {
        crate::testing::settings(pairs)
    }

    #[test]
    fn a_new_variant_of_a_tagged_enum_replaces_the_old_one() {
        use crate::likelihoods::Likelihood;
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct WithLik {
            beta: f64,
            likelihood: Likelihood,
        }
        let schema = ConfigSchema {
            backend: "toy",
            reserved: &[],
            sections: &[],
        };
        let base = WithLik {
            beta: 0.1,
            likelihood: Likelihood::gaussian(0.05),
        };
        let mut s = Settings::new();
        s.insert(
            "likelihood".into(),
            serde_json::to_value(Likelihood::robust_max(10)).unwrap(),
        );
        let c = apply_settings(&schema, &base, &s).unwrap();
        assert_eq!(c.likelihood, Likelihood::robust_max(10));
        assert_eq!(c.beta, 0.1);
        // Dotted settings build the same object.
        let c = apply_settings(
            &schema,
            &base,
            &set(&[
                "likelihood.kind=bernoulli_probit",
                "likelihood.gh_points=30",
            ]),
        );
        let mut probit = Likelihood::probit();
        if let Likelihood::BernoulliProbit(p) = &mut probit {
            p.gh_points = 30;
        }
        assert_eq!(c.unwrap().likelihood, probit);
        // The same variant still merges key by key.
        let c = apply_settings(&schema, &base, &set(&["likelihood.init_variance=0.2"]));
        assert_eq!(c.unwrap().likelihood, Likelihood::gaussian(0.2));
        // A field of another variant without switching is still an unknown key, and a
        // new variant with a foreign field is refused by deserialisation.
        let e = apply_settings(&schema, &base, &set(&["likelihood.num_classes=3"]));
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("likelihood.num_classes")
        );
        let e = apply_settings(
            &schema,
            &base,
            &set(&[
                "likelihood.kind=bernoulli_probit",
                "likelihood.init_variance=1",
            ]),
        );
        assert!(e.is_err());
        // merge_settings applies the same rule.
        let mut into = set(&["likelihood.kind=gaussian", "likelihood.init_variance=1"]);
        merge_settings(&mut into, &set(&["likelihood.kind=bernoulli_probit"]));
        assert_eq!(
            into["likelihood"],
            serde_json::json!({"kind": "bernoulli_probit"})
        );
    }

    #[test]
    fn no_settings_is_the_base_and_settings_merge() {
        assert_eq!(
            apply_settings(&schema(), &base(), &Settings::new()).unwrap(),
            base()
        );
        let c = apply_settings(
            &schema(),
            &base(),
            &set(&["beta=0.1", "name=qr1", "inner.a=1"]),
        )
        .unwrap();
        assert_eq!(c.beta, 0.1);
        assert_eq!(c.name, "qr1");
        assert_eq!(c.inner, Some(Inner { a: 1.0, b: 2 }));
    }

    #[test]
    fn bad_keys_and_values_name_the_key() {
        let e = apply_settings(&schema(), &base(), &set(&["bta=1"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown setting 'bta'") && e.contains("beta, inner, name"),
            "{e}"
        );
        assert!(!e.contains("layers"), "{e}");
        let e = apply_settings(&schema(), &base(), &set(&["inner.c=1"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'inner.c'") && e.contains("under 'inner': a, b"),
            "{e}"
        );
        let e = apply_settings(&schema(), &base(), &set(&["layers=3"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the common setting `layers`"), "{e}");
        let e = apply_settings(&schema(), &base(), &set(&["beta=abc"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("setting 'beta'"), "{e}");
    }

    #[test]
    fn common_learning_rate_and_schedule_replace_the_backends_own() {
        let mut common = CommonSettings {
            preset: "default".into(),
            layers: 2,
            num_inducing: 10,
            hidden_width: None,
            train_samples: 1,
            predict_samples: 1,
            seed: 0,
            tune: false,
            learning_rate: None,
            lr_schedule: None,
        };
        let own = AdamConfig {
            beta1: 0.8,
            ..AdamConfig::with_lr(0.02)
        };
        assert_eq!(common.adam_over(own.clone()), own);
        let drops = LrSchedule::StepDrops {
            milestones: vec![3],
            factor: 0.5,
        };
        common.learning_rate = Some(0.005);
        common.lr_schedule = Some(drops.clone());
        let got = common.adam_over(own.clone());
        assert_eq!(
            got,
            AdamConfig {
                lr: 0.005,
                schedule: drops,
                ..own
            }
        );
        // Settings JSON without the two keys reads them as `None`.
        let mut v = serde_json::to_value(&common).unwrap();
        let m = v.as_object_mut().unwrap();
        m.remove("learning_rate");
        m.remove("lr_schedule");
        let back: CommonSettings = serde_json::from_value(v).unwrap();
        assert_eq!((back.learning_rate, back.lr_schedule), (None, None));
    }

    #[test]
    fn dotted_keys_and_descriptions() {
        let mut s = set(&["a=1"]);
        assert!(insert_dotted(&mut s, "a.b", Value::Null).is_err());
        assert_eq!(
            describe_generic(&set(&["beta=0.05", "rule=qr1"])),
            ", beta 0.05, rule qr1"
        );
    }
}
