//! Registration of the nested backend with a harness ([`dgp_traits::backend::Backend`]).
//!
//! Backend settings are the fields of [`NestedConfig`] (e.g. `linear_mean=true`,
//! `optimiser=lbfgs`, `predict=sampled`); the common settings set `layers`,
//! `num_inducing`, `hidden_width`, `init_seed` and the learning rate and schedule of
//! `adam`.

use dgp_core::Result;
use dgp_traits::backend::{
    Capabilities, CommonSettings, ConfigBackend, ConfigSchema, DEFAULT_PRESET, DemoSettings,
    LikelihoodFamily, Preset, Settings, TrainingMode, Validate, describe_generic,
};
use dgp_traits::fit::Training;
use dgp_traits::memory::{self, MemoryEstimate, MemoryPart, MemoryShape};
use serde_json::Value;

use crate::NestedConfig;

impl Validate for NestedConfig {
    fn validate(&self) -> Result<()> {
        NestedConfig::validate(self)
    }
}

const SCHEMA: ConfigSchema<'static> = ConfigSchema {
    backend: "nested",
    reserved: &[
        ("layers", "layers"),
        ("num_inducing", "num_inducing"),
        ("hidden_width", "hidden_width"),
        ("predict_samples", "predict_samples"),
        ("init_seed", "seed"),
        ("adam", "learning_rate"),
    ],
    sections: &[],
};

const PRESETS: &[Preset] = &[
    Preset {
        name: DEFAULT_PRESET,
        protocol: None,
        summary: "M = 100, Adam lr 0.03 for at most 10 000 full-batch steps ended by held-out early stopping; lr 0.01 without it (NestedConfig::default)",
    },
    Preset {
        name: "paper",
        protocol: None,
        summary: "full-batch L-BFGS for at most 5 000 iterations at M = 50, as the spec reads Hensman & Lawrence 2014 (NestedConfig::paper)",
    },
];

/// nested in the demonstration job: svi's settings ([`DemoSettings::DEFAULT`]) with 1 000
/// steps on the real data set.
pub const DEMO: DemoSettings = DemoSettings {
    steps: 1_000,
    ..DemoSettings::DEFAULT
};

/// The nested backend ([`crate::NestedModel`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct NestedBackend;

/// The value a harness registers.
pub static NESTED_BACKEND: NestedBackend = NestedBackend;

impl ConfigBackend for NestedBackend {
    type Config = NestedConfig;

    fn name(&self) -> &'static str {
        "nested"
    }

    fn description(&self) -> &'static str {
        "nested variational compression with psi-statistics (Hensman & Lawrence 2014)"
    }

    fn capabilities(&self) -> Capabilities {
        // The default optimiser (Adam on minibatches); `optimiser: lbfgs` trains full
        // batch and refuses early stopping and checkpoints at fit time.
        Capabilities {
            training: TrainingMode::Minibatch,
            held_out_early_stopping: true,
            resumable: true,
            selects_on_validation: false,
            streams: true,
            data_parallel: false,
            likelihoods: &[LikelihoodFamily::Gaussian],
            samples_in_prediction: "ignored: the default prediction is one moment-matched Gaussian per point (NestedConfig::predict)",
            samples_in_training: "ignored: moments are propagated deterministically",
            samples_are_components: false,
            // Adam's step size; with `optimiser: lbfgs`, its warm-up's.
            uses_learning_rate: true,
            steps_capped_by: None,
        }
    }

    fn presets(&self) -> &'static [Preset] {
        PRESETS
    }

    fn preset(&self, name: &str) -> Option<NestedConfig> {
        match name {
            DEFAULT_PRESET => Some(NestedConfig::default()),
            "paper" => Some(NestedConfig::paper()),
            _ => None,
        }
    }

    fn demo(&self) -> DemoSettings {
        DEMO
    }

    fn schema(&self) -> &ConfigSchema<'static> {
        &SCHEMA
    }

    /// The common settings' fields (the learning rate and schedule into
    /// [`NestedConfig::adam`]; a learning rate given replaces the unguarded one too).
    fn apply_common(&self, base: NestedConfig, common: &CommonSettings) -> NestedConfig {
        NestedConfig {
            layers: common.layers,
            num_inducing: common.num_inducing,
            hidden_width: common.hidden_width,
            predict_samples: common.predict_samples,
            init_seed: common.seed,
            adam: common.adam_over(base.adam.clone()),
            unguarded_learning_rate: base
                .unguarded_learning_rate
                .filter(|_| common.learning_rate.is_none()),
            training: Training {
                seed: common.seed,
                ..base.training.clone()
            },
            ..base
        }
    }

    /// `linear_mean` reads "hidden mean linear" / "hidden mean zero"; the rest as
    /// [`describe_generic`].
    fn describe_settings(&self, settings: &Settings) -> String {
        let mut rest = settings.clone();
        let mean = match rest.remove("linear_mean") {
            Some(Value::Bool(true)) => ", hidden mean linear",
            Some(Value::Bool(false)) => ", hidden mean zero",
            _ => "",
        };
        format!("{}{mean}", describe_generic(&rest))
    }

    /// Nested's Ψ₂ statistics also hold an M×M matrix per minibatch row and layer.
    fn memory_estimate(&self, shape: &MemoryShape) -> MemoryEstimate {
        let mut e = memory::sparse_dgp(shape, shape.clamped_input_width());
        let (l, b, m) = (
            shape.layers.max(1) as f64,
            shape.batch.max(1) as f64,
            shape.m as f64,
        );
        e.add(
            MemoryPart::Inducing,
            8.0 * l * b * m * m * memory::F64_BYTES,
        );
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::backend::{Backend, Settings};
    use dgp_traits::optim::AdamConfig;

    /// A configuration written without `adam` reads with Adam's defaults, and the common
    /// learning rate reaches it.
    #[test]
    fn adam_defaults_without_the_field_and_from_the_common_settings() {
        let mut v = serde_json::to_value(NestedConfig::default()).unwrap();
        v.as_object_mut().unwrap().remove("adam");
        let back: NestedConfig = serde_json::from_value(v).unwrap();
        assert_eq!(back.adam, AdamConfig::with_lr(0.01));
        let common = CommonSettings {
            preset: "default".into(),
            layers: 2,
            num_inducing: 5,
            hidden_width: None,
            train_samples: 1,
            predict_samples: 1,
            seed: 3,
            tune: false,
            learning_rate: Some(0.004),
            lr_schedule: None,
        };
        assert_eq!(
            NestedBackend
                .apply_common(NestedConfig::default(), &common)
                .adam,
            AdamConfig::with_lr(0.004)
        );
        let e = NestedBackend
            .config(&common, &dgp_traits::testing::settings(&["adam.lr=1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the common setting `learning_rate`"), "{e}");
    }

    #[test]
    fn linear_mean_setting_and_bad_keys() {
        let common = CommonSettings {
            preset: "default".into(),
            layers: 2,
            num_inducing: 5,
            hidden_width: None,
            train_samples: 1,
            predict_samples: 1,
            seed: 3,
            tune: false,
            learning_rate: None,
            lr_schedule: None,
        };
        let base = NestedBackend.apply_common(NestedConfig::default(), &common);
        assert_eq!(
            *NestedBackend.config(&common, &Settings::new()).unwrap(),
            base
        );
        let mut s = Settings::new();
        s.insert("linear_mean".into(), Value::Bool(true));
        let c = NestedBackend.config(&common, &s).unwrap();
        assert_eq!(
            *c,
            NestedConfig {
                linear_mean: true,
                ..base
            }
        );
        assert_eq!(
            Backend::describe_settings(&NESTED_BACKEND, &s),
            ", hidden mean linear"
        );
        s.insert("hidden_q_scale".into(), Value::from(0.0));
        let e = NestedBackend.config(&common, &s).unwrap_err().to_string();
        assert!(e.contains("hidden_q_scale: must be in (0, 1]"), "{e}");
        let mut s = Settings::new();
        s.insert("mean".into(), Value::from("linear"));
        let e = NestedBackend.config(&common, &s).unwrap_err().to_string();
        assert!(
            e.contains("unknown setting 'mean'") && e.contains("linear_mean"),
            "{e}"
        );
    }
}
