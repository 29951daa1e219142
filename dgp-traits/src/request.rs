//! A fit of a backend chosen at run time, asked for as a harness asks (a name, a preset,
//! options that every backend shares, the backend's own settings, a task): what the
//! Python package and scripts use, resolved the way `dgp-bench run` resolves a model.
//!
//! [`resolve`] applies the options onto the backend's preset ([`Backend::defaults`]) and
//! checks the result with the backend ([`Backend::check`]) before any data are touched;
//! every option left out is the preset's value, so a request with no option trains what
//! `Config::default().fit(&data)` trains, bit for bit. [`fit`] then standardises the rows
//! (inputs always; targets of a regression), builds the backend's model (with any
//! selection on validation rows it makes) and trains it with the caller's hooks, giving a
//! [`Fitted`] of the boxed model that predicts in the data's original units and saves as
//! the backend's model file.

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, CommonSettings, DEFAULT_PRESET, RunDefaults, Settings, step_cap};
use crate::fit::{Convergence, FitConfig, FitHooks, HeldOutRule, LrSchedule, Training};
use crate::fitted::Fitted;
use crate::likelihoods::Likelihood;
use crate::model::{Model, PredictConfig};
use dgp_core::{Error, Result};
use dgp_data::{Dataset, RowSource, StandardizeOptions, Standardizer};
use faer::MatRef;

/// The options every backend shares; each `None` keeps the preset's value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FitOptions {
    /// The backend's named configuration the fit starts from ([`Backend::presets`];
    /// `None`: `"default"`).
    pub preset: Option<String>,
    /// GP layers.
    pub layers: Option<usize>,
    /// Inducing points per layer.
    pub num_inducing: Option<usize>,
    /// Width of the hidden layers.
    pub hidden_width: Option<usize>,
    /// Samples of the training objective.
    pub train_samples: Option<usize>,
    /// Predictive mixture components (the model's own components, and so also its
    /// training samples, where [`crate::backend::Capabilities::samples_are_components`]).
    pub predict_samples: Option<usize>,
    /// Adam's base learning rate (refused for a backend that uses none).
    pub learning_rate: Option<f64>,
    /// The learning rate's schedule.
    pub lr_schedule: Option<LrSchedule>,
    /// Choose hyper-parameters on validation rows where the backend does (`None`: yes).
    pub tune: Option<bool>,
    /// Optimisation steps (the cap of a stop).
    pub steps: Option<usize>,
    /// Rows per minibatch.
    pub batch_size: Option<usize>,
    /// Seed of the initialisation, the minibatch order and the Monte Carlo noise (`None`: 0).
    pub seed: Option<u64>,
    /// Held-out early stopping: `Some(None)` turns the preset's rule off.
    pub early_stopping: Option<Option<HeldOutRule>>,
    /// The convergence stop: `Some(None)` turns the preset's off.
    pub convergence: Option<Option<Convergence>>,
}

/// What the targets of a fit are.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// Real-valued targets, standardised with the training rows' statistics.
    #[default]
    Regression,
    /// Class indices `0..num_classes` in one target column, kept as they are; the
    /// likelihood by name ([`Likelihood::for_classes`]; `None`: the default for K).
    Classification {
        /// K ≥ 2.
        num_classes: usize,
        /// The likelihood's name.
        likelihood: Option<String>,
    },
}

/// A fit's request: options, the backend's own settings (fields of its configuration)
/// and the task.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FitRequest {
    /// The shared options.
    pub options: FitOptions,
    /// The backend's own settings.
    pub settings: Settings,
    /// Regression or classification.
    pub task: Task,
}

/// A request resolved for a number of training rows: the common settings and settings
/// the backend builds from, the fit and the default prediction.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// The common settings ([`Backend::check`]ed with [`Resolved::settings`]).
    pub common: CommonSettings,
    /// The backend's own settings (with a classification task's likelihood).
    pub settings: Settings,
    /// What the checked configuration holds ([`Backend::check`]).
    pub defaults: RunDefaults,
    /// The training settings for the rows.
    pub fit: FitConfig,
    /// The default prediction: the predictive components, seeded by
    /// [`Training::predict_seed`].
    pub predict: PredictConfig,
    /// How the rows are standardised (targets kept for classification).
    pub standardize: StandardizeOptions,
}

impl Resolved {
    /// The learning rate the fit trains with (`None` for a backend that uses none): the
    /// option's, or the configuration's for the fit's held-out rule on `n_train` rows
    /// ([`RunDefaults::learning_rate_for`]).
    pub fn learning_rate(&self, b: &dyn Backend, n_train: usize) -> Option<f64> {
        b.capabilities().uses_learning_rate.then(|| {
            self.common.learning_rate.unwrap_or_else(|| {
                self.defaults
                    .learning_rate_for(self.fit.early_stopping.as_ref(), n_train)
            })
        })
    }
}

fn at_least_one(field: &str, v: Option<usize>) -> Result<()> {
    if v == Some(0) {
        return Err(Error::config(field, "must be at least 1"));
    }
    Ok(())
}

/// Resolves `req` for backend `b` and `n_train` training rows (see the module docs).
///
/// # Errors
/// [`Error::Config`] naming the option or setting: an unknown preset or setting, a value
/// out of range, a learning rate for a backend that uses none, more steps than the
/// backend's cap, a held-out rule or a likelihood the backend does not support.
pub fn resolve(b: &dyn Backend, req: &FitRequest, n_train: usize) -> Result<Resolved> {
    let o = &req.options;
    let caps = b.capabilities();
    for (field, v) in [
        ("layers", o.layers),
        ("num_inducing", o.num_inducing),
        ("hidden_width", o.hidden_width),
        ("train_samples", o.train_samples),
        ("predict_samples", o.predict_samples),
        ("steps", o.steps),
        ("batch_size", o.batch_size),
    ] {
        at_least_one(field, v)?;
    }
    if let Some(lr) = o.learning_rate {
        if !(lr.is_finite() && lr > 0.0) {
            return Err(Error::config(
                "learning_rate",
                format!("must be a finite number > 0, got {lr}"),
            ));
        }
        if !caps.uses_learning_rate {
            return Err(Error::config(
                "learning_rate",
                format!(
                    "backend '{}' uses no learning rate (its step sizes are settings)",
                    b.name()
                ),
            ));
        }
    }
    let preset = o.preset.as_deref().unwrap_or(DEFAULT_PRESET);
    let d = b.defaults(preset)?;
    let (train_samples, predict_samples) = if caps.samples_are_components {
        let s = o.predict_samples.unwrap_or(d.predict_samples);
        (s, s)
    } else {
        (
            o.train_samples.unwrap_or(d.train_samples),
            o.predict_samples.unwrap_or(d.predict_samples),
        )
    };
    let seed = o.seed.unwrap_or(0);
    let common = CommonSettings {
        preset: preset.to_string(),
        layers: o.layers.unwrap_or(d.layers),
        num_inducing: o.num_inducing.unwrap_or(d.num_inducing),
        hidden_width: o.hidden_width,
        train_samples,
        predict_samples,
        seed,
        tune: o.tune.unwrap_or(true),
        learning_rate: o.learning_rate,
        lr_schedule: o.lr_schedule.clone(),
    };
    let mut settings = req.settings.clone();
    let standardize = match &req.task {
        Task::Regression => StandardizeOptions::default(),
        Task::Classification {
            num_classes,
            likelihood,
        } => {
            if settings.contains_key("likelihood") {
                return Err(Error::config(
                    "likelihood",
                    "a classification fit sets the likelihood from its task; name it there, not in the settings",
                ));
            }
            let lik = Likelihood::for_classes(likelihood.as_deref(), *num_classes)?;
            if !caps.supports(lik.family()) {
                return Err(Error::config(
                    "likelihood",
                    format!(
                        "backend '{}' does not train {} likelihoods",
                        b.name(),
                        lik.name()
                    ),
                ));
            }
            let v = serde_json::to_value(&lik).map_err(|e| Error::Serde(e.to_string()))?;
            settings.insert("likelihood".into(), v);
            StandardizeOptions::default().keep_targets()
        }
    };
    let defaults = b.check(&common, &settings)?;
    let t = &defaults.training;
    let early_stopping = o
        .early_stopping
        .clone()
        .unwrap_or_else(|| t.early_stopping.clone());
    if early_stopping.is_some() && !caps.held_out_early_stopping {
        return Err(Error::config(
            "early_stopping",
            format!(
                "backend '{}' does not support held-out early stopping",
                b.name()
            ),
        ));
    }
    let batch_size = o.batch_size.unwrap_or(t.batch_size);
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
            let s = Training {
                batch_size,
                ..t.clone()
            }
            .steps_for(n_train);
            c.map_or(s, |c| s.min(c.max(1)))
        }
    };
    let training = Training {
        steps,
        epochs: None,
        batch_size,
        seed,
        early_stopping,
        convergence: o.convergence.unwrap_or(t.convergence),
    };
    Ok(Resolved {
        fit: training.fit_config(n_train),
        predict: PredictConfig {
            samples: predict_samples,
            seed: training.predict_seed(),
        },
        common,
        settings,
        defaults,
        standardize,
    })
}

/// Standardises `data` as `resolved` says, builds `b`'s model on the standardised rows
/// (its selection on validation rows included, ending when `hooks` ask to stop) and
/// trains it with `hooks`: the whole fit of a backend chosen at run time (see the module
/// docs). The same as [`fit_views`] of `data`'s inputs and targets.
///
/// # Errors
/// As [`fit_views`].
pub fn fit(
    b: &dyn Backend,
    resolved: &Resolved,
    data: &Dataset,
    hooks: &mut FitHooks<'_>,
) -> Result<Fitted<Box<dyn Model>>> {
    fit_views(b, resolved, data.x(), data.y(), hooks)
}

/// [`fit`] of the rows `x` (N×D) and `y` (N×P; classification: one column of class
/// indices) given as matrix views of any strides, in original units: the only copy of the
/// rows the fit makes is the standardised one.
///
/// # Errors
/// Rows of `x` and `y` that differ, no rows, NaN/∞ values, a target column with zero
/// variance (regression); the build's and the fit's errors.
pub fn fit_views(
    b: &dyn Backend,
    resolved: &Resolved,
    x: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    hooks: &mut FitHooks<'_>,
) -> Result<Fitted<Box<dyn Model>>> {
    let standardizer = Standardizer::fit_views(x, y, resolved.standardize)?;
    standardizer.check_target_variance_representable()?;
    let train = Dataset::new(standardizer.transform_x(x)?, standardizer.transform_y(y)?)?;
    fit_source(b, resolved, &train, &train, standardizer, hooks)
}

/// Builds `b`'s model on `build_rows` and trains it on `rows` (both already standardised
/// by `standardizer`) with `hooks`: the last part of [`fit`], for rows that are not held
/// in memory (`rows` a standardised view of a row store, `build_rows` a sample of it).
///
/// # Errors
/// The build's and the fit's errors.
pub fn fit_source(
    b: &dyn Backend,
    resolved: &Resolved,
    build_rows: &Dataset,
    rows: &dyn RowSource,
    standardizer: Standardizer,
    hooks: &mut FitHooks<'_>,
) -> Result<Fitted<Box<dyn Model>>> {
    let mut model = b.build(
        &resolved.common,
        &resolved.settings,
        &resolved.fit,
        build_rows,
        &hooks.stop_only(),
    )?;
    let report = model.fit(rows, &resolved.fit, hooks)?;
    Ok(Fitted::from_parts(
        model,
        standardizer,
        report,
        resolved.predict.clone(),
    ))
}

/// The identity of a checkpointed fit of `resolved` by backend `b` on rows described by
/// `data` (e.g. [`crate::guard::data_identity`]): a state saved by a run whose identity
/// differs is refused ([`crate::guard::Guard::identity`]).
pub fn identity(
    b: &dyn Backend,
    resolved: &Resolved,
    data: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({
        "backend": b.name(),
        "common": resolved.common,
        "settings": resolved.settings,
        "fit": resolved.fit,
        "data": data,
    })
}
