//! The benchmark's view of the library's backend registry ([`dgp_registry::BACKENDS`],
//! the ONE list of the backends).
//!
//! Every subcommand (`run`, `time`) and the default no-argument job iterate over
//! [`BACKENDS`]. A backend crate registers itself by exporting a
//! [`dgp_traits::backend::Backend`] value (its name, its own serde configuration checked
//! once into a `Checked` type, its presets, its build function); adding a backend is one
//! entry in the registry, with no edits here. Backend-specific settings reach it
//! untouched through [`ArchSpec::settings`] (`--set key=value`, `--config FILE`), so
//! [`ArchSpec`] holds only what every deep GP has. The `dspp` and `ppgpr` entries are the
//! worked example of a backend with its own hyper-parameters (β_reg, the hidden width),
//! chosen on validation data inside its build function when [`ArchSpec::tune`] is set.

use dgp_data::Dataset;
use dgp_traits::backend::{
    Backend, COMMON_SETTING_MARK, Capabilities, CommonSettings, DEFAULT_PRESET, DemoSettings,
    RunDefaults, Settings,
};
use dgp_traits::model::{FitConfig, FitHooks, Model};
use dgp_traits::optim::LrSchedule;

use crate::error::{BenchError, Result};

/// Architecture and sampling settings handed to a backend's constructor.
///
/// The common part ([`ArchSpec::common`]) is what every deep GP has; everything specific
/// to one backend travels in [`ArchSpec::settings`] (fields of the backend's own
/// configuration, from `--set`, `--config` or the sugar flags `--rule`, `--beta`,
/// `--mean`, `--natgrad`), checked by the backend itself.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArchSpec {
    /// The backend's named configuration the settings apply onto
    /// ([`dgp_traits::backend::Backend::presets`]); omitted from JSON when it is
    /// `"default"`.
    #[serde(default = "default_preset", skip_serializing_if = "is_default_preset")]
    pub preset: String,
    /// Number of GP layers L (1 = the sparse-GP baseline "SGP").
    pub layers: usize,
    /// Inducing points per layer, M.
    pub num_inducing: usize,
    /// Width of the hidden layers; `None` = the backend's default (svi: `min(30, D)`).
    pub hidden_width: Option<usize>,
    /// Samples used by the training objective (svi: Monte Carlo samples per point,
    /// `SviConfig::train_samples`).
    pub train_samples: usize,
    /// Mixture components requested from `predict` (svi: Monte Carlo samples of eq. 18).
    pub predict_samples: usize,
    /// Seed of the model's initialisation (k-means++ of Z, ...).
    pub seed: u64,
    /// Choose the backend's regularisation hyper-parameters that are not given explicitly
    /// (dspp: β_reg and the hidden width; ppgpr: β_reg) on a validation part of the
    /// TRAINING split, never the test split (DSPP paper App. A.2). Backends without such
    /// hyper-parameters ignore it.
    pub tune: bool,
    /// Backend-specific settings (a JSON object of the backend configuration's fields);
    /// empty = the backend's defaults.
    #[serde(default, skip_serializing_if = "Settings::is_empty")]
    pub settings: Settings,
}

fn default_preset() -> String {
    DEFAULT_PRESET.to_string()
}

fn is_default_preset(p: &str) -> bool {
    p == DEFAULT_PRESET
}

impl ArchSpec {
    /// The settings of a run with the backend's defaults for `layers` layers, seed 0.
    pub fn with_defaults(b: &BackendEntry, layers: usize) -> Self {
        let d = b.defaults();
        ArchSpec {
            preset: default_preset(),
            layers,
            num_inducing: d.num_inducing,
            hidden_width: None,
            train_samples: d.train_samples,
            predict_samples: d.predict_samples,
            seed: 0,
            tune: true,
            settings: Settings::new(),
        }
    }

    /// The part every backend understands, with the backend's own learning rate and
    /// schedule.
    pub fn common(&self) -> CommonSettings {
        CommonSettings {
            preset: self.preset.clone(),
            layers: self.layers,
            num_inducing: self.num_inducing,
            hidden_width: self.hidden_width,
            train_samples: self.train_samples,
            predict_samples: self.predict_samples,
            seed: self.seed,
            tune: self.tune,
            learning_rate: None,
            lr_schedule: None,
        }
    }

    /// [`ArchSpec::common`] with a run's learning rate and schedule
    /// ([`CommonSettings::learning_rate`], [`CommonSettings::lr_schedule`]; a backend that
    /// uses no learning rate ignores them).
    pub fn common_with(&self, learning_rate: f64, lr_schedule: &LrSchedule) -> CommonSettings {
        CommonSettings {
            learning_rate: Some(learning_rate),
            lr_schedule: Some(lr_schedule.clone()),
            ..self.common()
        }
    }
}

/// One registered backend.
#[derive(Clone, Copy, Debug)]
pub struct BackendEntry {
    /// The backend crate's registration: name, description, its configuration (checked
    /// by itself), its defaults and its build function.
    pub backend: &'static dyn Backend,
}

impl BackendEntry {
    /// Name used on the command line (`--backend NAME`) and in reports.
    pub fn name(&self) -> &'static str {
        self.backend.name()
    }

    /// One-line description (paper and method).
    pub fn description(&self) -> &'static str {
        self.backend.description()
    }

    /// What the backend declares it can do.
    pub fn capabilities(&self) -> Capabilities {
        self.backend.capabilities()
    }

    /// The common settings of the backend's default configuration, those of `dgp-bench
    /// run` / `time` without a preset ([`Backend::defaults`]).
    pub fn defaults(&self) -> RunDefaults {
        self.backend
            .defaults(DEFAULT_PRESET)
            .expect("every registered backend has a default preset (tested)")
    }

    /// The common settings of the backend's configuration `preset`.
    ///
    /// # Errors
    /// [`BenchError::Usage`] naming the backend's presets.
    pub fn preset_defaults(&self, preset: &str) -> Result<RunDefaults> {
        self.backend
            .defaults(preset)
            .map_err(|e| BenchError::Usage(config_message(e)))
    }

    /// The backend's settings in the no-argument default job ([`Backend::demo`]).
    pub fn quick(&self) -> DemoSettings {
        self.backend.demo()
    }

    /// Layer counts the default job trains (SGP = 1, DGP2, DGP3).
    pub fn layers_in_default_run(&self) -> &'static [usize] {
        self.backend.demo().layers
    }

    /// Checks the backend-specific settings of `arch` before any training; returns the
    /// common settings the checked configuration holds (its training schedule after
    /// the settings).
    ///
    /// # Errors
    /// [`BenchError::Usage`] naming the backend and the key or field.
    pub fn check(&self, arch: &ArchSpec) -> Result<RunDefaults> {
        self.backend
            .check(&arch.common(), &arch.settings)
            .map_err(|e| BenchError::Usage(config_message(e)))
    }

    /// Builds an untrained model of `arch` whose optimiser steps at `learning_rate` with
    /// `lr_schedule` ([`ArchSpec::common_with`]), labelling errors with the backend name;
    /// a hyper-parameter search ends when `stop` asks ([`Backend::build`]).
    ///
    /// [`Backend::build`]: dgp_traits::backend::Backend::build
    pub fn build_model(
        &self,
        arch: &ArchSpec,
        learning_rate: f64,
        lr_schedule: &LrSchedule,
        fit: &FitConfig,
        train: &Dataset,
        stop: &FitHooks<'_>,
    ) -> Result<Box<dyn Model>> {
        let common = arch.common_with(learning_rate, lr_schedule);
        self.backend
            .build(&common, &arch.settings, fit, train, stop)
            .map_err(|e| BenchError::run(format!("building {} L={}", self.name(), arch.layers), e))
    }
}

/// The flag of `dgp-bench` that sets each common setting
/// ([`dgp_traits::backend::CommonSettings`]), as messages name it.
const COMMON_FLAGS: &[(&str, &str)] = &[
    ("backend", "the backend name"),
    ("layers", "--layers"),
    ("num_inducing", "--inducing"),
    ("hidden_width", "--hidden"),
    ("train_samples", "--train-samples (run) / --samples (time)"),
    ("predict_samples", "--samples"),
    ("seed", "--seed"),
    (
        "learning_rate",
        "--lr (learning rate) and --protocol (schedule)",
    ),
];

/// `message` with every common setting it names
/// ([`dgp_traits::backend::COMMON_SETTING_MARK`]) replaced by the flag that sets it.
pub fn with_flag_names(message: &str) -> String {
    let mut out = message.to_string();
    for (name, flag) in COMMON_FLAGS {
        out = out.replace(&format!("{COMMON_SETTING_MARK}`{name}`"), flag);
    }
    out
}

/// The message of a configuration error without the generic "invalid configuration: "
/// prefix (the backend's message names the backend and the key), common settings named
/// by their flags ([`with_flag_names`]).
pub fn config_message(e: dgp_core::Error) -> String {
    with_flag_names(&match e {
        dgp_core::Error::Config(c) => match COMMON_FLAGS
            .iter()
            .find(|(name, flag)| *name == c.field && flag.starts_with("--"))
        {
            Some((_, flag)) => format!("{} ({flag}): {}", c.field, c.message),
            None => c.to_string(),
        },
        other => other.to_string(),
    })
}

/// The backend a subcommand uses when `--backend` is not given.
pub const DEFAULT_BACKEND: &str = dgp_registry::DEFAULT_BACKEND;

/// Every backend the benchmark knows: the library's registry ([`dgp_registry::BACKENDS`]),
/// in the order reports list them.
pub static BACKENDS: std::sync::LazyLock<Vec<BackendEntry>> = std::sync::LazyLock::new(|| {
    dgp_registry::BACKENDS
        .iter()
        .map(|&backend| BackendEntry { backend })
        .collect()
});

/// The registry ([`BACKENDS`]).
pub fn backends() -> &'static [BackendEntry] {
    &BACKENDS
}

/// Comma-separated names of the registered backends whose capabilities satisfy `pred`.
pub fn names_where(pred: impl Fn(&Capabilities) -> bool) -> String {
    BACKENDS
        .iter()
        .filter(|b| pred(&b.capabilities()))
        .map(|b| b.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Comma-separated names of the registered backends.
pub fn backend_names() -> String {
    BACKENDS
        .iter()
        .map(|b| b.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The backend called `name`.
///
/// # Errors
/// [`BenchError::Usage`] naming the registered backends when there is none of that name.
pub fn find_backend(name: &str) -> Result<&'static BackendEntry> {
    BACKENDS.iter().find(|b| b.name() == name).ok_or_else(|| {
        BenchError::Usage(format!(
            "unknown backend '{name}' (registered: {})",
            backend_names()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's defaults of a spec choose the rate as `run` does: the step
    /// function's 160 training rows are too few for nested's held-out rule, which leaves
    /// the rate at its unguarded value.
    #[test]
    fn a_spec_chooses_the_rate_by_the_rows() {
        let nested = find_backend("nested").unwrap();
        let d = nested.defaults();
        let step = crate::datasets::BenchData::load("builtin:step", None, 0).unwrap();
        let spec = crate::spec::ExperimentSpec::with_defaults(&step, nested, 2);
        assert_eq!(Some(spec.learning_rate), d.unguarded_learning_rate);
        assert_ne!(spec.learning_rate, d.learning_rate);
        assert_eq!(spec.early_stopping, d.held_out_rule());
    }

    #[test]
    fn names_are_unique_and_findable() {
        for (i, b) in BACKENDS.iter().enumerate() {
            assert!(BACKENDS[i + 1..].iter().all(|c| c.name() != b.name()));
            assert_eq!(find_backend(b.name()).unwrap().name(), b.name());
            assert!(!b.layers_in_default_run().is_empty());
        }
        let err = find_backend("nope").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("svi"));
    }

    /// Every backend's configuration error is typed: it names the field that is out of
    /// range, not only a sentence about it.
    #[test]
    fn every_backend_names_the_field_it_refuses() {
        let common = dgp_traits::backend::CommonSettings {
            preset: "default".into(),
            layers: 1,
            num_inducing: 0,
            hidden_width: None,
            train_samples: 1,
            predict_samples: 1,
            seed: 0,
            tune: false,
            learning_rate: None,
            lr_schedule: None,
        };
        for b in BACKENDS.iter() {
            match b
                .backend
                .check(&common, &dgp_traits::backend::Settings::new())
            {
                Err(dgp_core::Error::Config(c)) => {
                    assert_eq!(c.field, "num_inducing", "{}: {c}", b.name());
                    assert!(!c.message.is_empty(), "{}", b.name());
                }
                other => panic!("{}: M = 0 gave {other:?}", b.name()),
            }
        }
    }
}
