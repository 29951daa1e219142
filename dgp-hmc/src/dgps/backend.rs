//! Registration of the DGPS backend with a harness ([`dgp_traits::backend::Backend`]).
//!
//! Backend settings are the fields of [`DgpsConfig`] (e.g. `restarts=3`, `max_iters=500`,
//! `init_noise_variance=0.001`); the common settings set `layers`, `num_inducing`,
//! `hidden_width`, `samples` (the K fixed sample paths: `train_samples`) and `init_seed`.

use dgp_core::Result;
use dgp_traits::backend::{
    Capabilities, CommonSettings, ConfigBackend, ConfigSchema, DEFAULT_PRESET, DemoSettings,
    LikelihoodFamily, Preset, TrainingMode, Validate,
};
use dgp_traits::fit::Training;

use super::DgpsConfig;

impl Validate for DgpsConfig {
    fn validate(&self) -> Result<()> {
        DgpsConfig::validate(self)
    }
}

const SCHEMA: ConfigSchema<'static> = ConfigSchema {
    backend: "dgps",
    reserved: &[
        ("layers", "layers"),
        ("num_inducing", "num_inducing"),
        ("hidden_width", "hidden_width"),
        ("samples", "train_samples"),
        ("predict_samples", "predict_samples"),
        ("init_seed", "seed"),
    ],
    sections: &[],
};

const PRESETS: &[Preset] = &[
    Preset {
        name: DEFAULT_PRESET,
        protocol: None,
        summary: "Vafa 2016 §5.1.4: M = 10, K = 10 paths, at most 1 000 L-BFGS iterations per restart, best of 10 (DgpsConfig::default)",
    },
    Preset {
        name: "paper",
        protocol: None,
        summary: "the same as the default (DgpsConfig::paper)",
    },
];

/// DGPS in the demonstration job: the step function only (thesis §5.1), SGP and DGP2, with
/// at most 500 L-BFGS iterations per restart instead of the thesis' 1000.
pub const DEMO: DemoSettings = DemoSettings {
    steps: 0,
    steps_1d: 500,
    num_inducing: 10,
    batch_cap: 100_000,
    learning_rate: 0.01,
    predict_samples: 100,
    layers: &[1, 2],
    note: "steps = L-BFGS iterations per restart (500; the thesis uses 1000), best of 10 restarts, step function only; batch unused, no learning rate",
};

/// The DGPS backend ([`crate::dgps::DgpsModel`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct DgpsBackend;

/// The value a harness registers.
pub static DGPS_BACKEND: DgpsBackend = DgpsBackend;

impl ConfigBackend for DgpsBackend {
    type Config = DgpsConfig;

    fn name(&self) -> &'static str {
        "dgps"
    }

    fn description(&self) -> &'static str {
        "DGPS: point-estimate pseudo data per unit, K fixed sample paths, L-BFGS with restarts (Vafa 2016)"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            training: TrainingMode::FullBatch,
            held_out_early_stopping: false,
            resumable: false,
            selects_on_validation: false,
            streams: false,
            data_parallel: false,
            likelihoods: &[LikelihoodFamily::Gaussian],
            samples_in_prediction: "fresh sample paths of the hidden layers = predictive mixture components (thesis §4.3.7: 100; L = 1 gives one Gaussian)",
            samples_in_training: "K, the fixed sample paths of the hidden layers in the objective (Procedure 3; DgpsConfig::samples)",
            samples_are_components: false,
            // Full-batch L-BFGS with line searches: no step size to set.
            uses_learning_rate: false,
            // `fit` runs min(FitConfig::steps, DgpsConfig::max_iters) iterations per restart.
            steps_capped_by: Some("max_iters"),
        }
    }

    fn presets(&self) -> &'static [Preset] {
        PRESETS
    }

    fn preset(&self, name: &str) -> Option<DgpsConfig> {
        match name {
            DEFAULT_PRESET => Some(DgpsConfig::default()),
            "paper" => Some(DgpsConfig::paper()),
            _ => None,
        }
    }

    fn demo(&self) -> DemoSettings {
        DEMO
    }

    fn schema(&self) -> &ConfigSchema<'static> {
        &SCHEMA
    }

    /// The common settings' fields (`train_samples` is K).
    fn apply_common(&self, base: DgpsConfig, common: &CommonSettings) -> DgpsConfig {
        DgpsConfig {
            layers: common.layers,
            num_inducing: common.num_inducing,
            hidden_width: common.hidden_width,
            samples: common.train_samples,
            predict_samples: common.predict_samples,
            init_seed: common.seed,
            training: Training {
                seed: common.seed,
                ..base.training.clone()
            },
            ..base
        }
    }
}
