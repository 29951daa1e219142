//! Registration of the SGHMC backend with a harness ([`dgp_traits::backend::Backend`]).
//!
//! Backend settings are the fields of [`SghmcConfig`], e.g. `sampler.burn_in=2000`,
//! `sampler.thinning=10`, `sampler.mcem=false`, `kuu_jitter=1e-10`; the common settings
//! set `layers`, `num_inducing`, `hidden_width` and `init_seed`. `train_samples` and
//! `predict_samples` are not used (one inner-layer sample per step; the predictive has
//! one component per kept sample).

use dgp_core::Result;
use dgp_traits::backend::{
    Capabilities, CommonSettings, ConfigBackend, ConfigSchema, DEFAULT_PRESET, DemoSettings,
    LikelihoodFamily, Preset, TrainingMode, Validate,
};
use dgp_traits::fit::Training;
use dgp_traits::memory::{self, MemoryEstimate, MemoryPart, MemoryShape};

use crate::sghmc::SghmcConfig;

impl Validate for SghmcConfig {
    fn validate(&self) -> Result<()> {
        SghmcConfig::validate(self)
    }
}

/// Keys of [`SghmcConfig`] that the common settings own, and what sets them.
const RESERVED: &[(&str, &str)] = &[
    ("layers", "layers"),
    ("num_inducing", "num_inducing"),
    ("hidden_width", "hidden_width"),
    ("init_seed", "seed"),
];

const SCHEMA: ConfigSchema<'static> = ConfigSchema {
    backend: "sghmc",
    reserved: RESERVED,
    sections: &[],
};

const PRESETS: &[Preset] = &[
    Preset {
        name: DEFAULT_PRESET,
        protocol: None,
        summary: "expected data term, 2 000 burn-in steps at ε = 0.03, 100 samples 80 steps apart, minibatches of 256 (SghmcConfig::default)",
    },
    Preset {
        name: "paper",
        protocol: None,
        summary: "Havasi et al. 2018's reference code: marginal data term, 10 000 burn-in steps at ε = 0.01, 100 samples 50 steps apart, full batches up to 10 000 rows (SghmcConfig::paper)",
    },
];

/// SGHMC in the demonstration job: M = 50, full batch, a budget of 1 500 steps, i.e. the
/// model's default schedule shrunk to 15 % (burn-in 300 steps with MCEM, then 100 samples
/// at thinning 12), DGP2. A shorter burn-in leaves the hyperparameters short of their
/// values (noise variance still far above its converged value after 200 steps).
pub const DEMO: DemoSettings = DemoSettings {
    steps: 1_500,
    steps_1d: 1_500,
    num_inducing: 50,
    batch_cap: 10_000,
    learning_rate: 0.01,
    predict_samples: 100,
    layers: &[2],
    note: "shortened: a 1500-step budget shrinks the default schedule (2 000 burn-in steps, then 100 kept samples 80 steps apart) to 300 burn-in steps, thinning 12, 100 kept samples; no learning rate (the sampler's step size and the MCEM hyper step are the settings sampler.step_size and sampler.hyper_lr)",
};

/// The SGHMC backend ([`crate::sghmc::SghmcModel`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct SghmcBackend;

/// The value a harness registers.
pub static SGHMC_BACKEND: SghmcBackend = SghmcBackend;

impl ConfigBackend for SghmcBackend {
    type Config = SghmcConfig;

    fn name(&self) -> &'static str {
        "sghmc"
    }

    fn description(&self) -> &'static str {
        "adaptive SGHMC over whitened inducing outputs with moving-window MCEM (Havasi et al. 2018)"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            training: TrainingMode::Minibatch,
            held_out_early_stopping: false,
            resumable: false,
            selects_on_validation: false,
            streams: true,
            data_parallel: true,
            likelihoods: &[
                LikelihoodFamily::Gaussian,
                LikelihoodFamily::Bernoulli,
                LikelihoodFamily::Multiclass,
            ],
            samples_in_prediction: "ignored: the predictive has one component per kept sample (setting sampler.kept, default 100)",
            samples_in_training: "ignored: one inner-layer sample per step (Havasi et al. 2018's reference code); a step is a burn-in step (with the MCEM hyper step) or a sampling step",
            samples_are_components: false,
            // The sampler's step sizes and the MCEM hyper step are settings
            // (`sampler.step_size`, `sampler.hyper_lr`), not CommonSettings::learning_rate.
            uses_learning_rate: false,
            steps_capped_by: None,
        }
    }

    fn presets(&self) -> &'static [Preset] {
        PRESETS
    }

    fn preset(&self, name: &str) -> Option<SghmcConfig> {
        match name {
            DEFAULT_PRESET => Some(SghmcConfig::default()),
            "paper" => Some(SghmcConfig::paper()),
            _ => None,
        }
    }

    fn demo(&self) -> DemoSettings {
        DEMO
    }

    fn schema(&self) -> &ConfigSchema<'static> {
        &SCHEMA
    }

    /// The common settings' fields (sample counts and the learning rate are not
    /// sghmc's: the kept samples and the sampler's step sizes are settings).
    fn apply_common(&self, base: SghmcConfig, common: &CommonSettings) -> SghmcConfig {
        SghmcConfig {
            layers: common.layers,
            num_inducing: common.num_inducing,
            hidden_width: common.hidden_width,
            init_seed: common.seed,
            training: Training {
                seed: common.seed,
                ..base.training.clone()
            },
            ..base
        }
    }

    /// The default width is the input dimension, and prediction keeps every kept
    /// posterior sample of every parameter (the q(u)-sized blocks and the inducing inputs).
    fn memory_estimate(&self, shape: &MemoryShape) -> MemoryEstimate {
        let mut e = memory::sparse_dgp(shape, shape.d);
        let w = shape.width(shape.d);
        let (l, m) = (shape.layers.max(1) as f64, shape.m as f64);
        let din = (shape.d.max(1) as f64).max(w as f64);
        let sp = shape.predict_samples.max(1) as f64;
        let kept = 2.0 * sp * (shape.outputs(w) * m * (m + 1.0) + l * m * din);
        e.add(MemoryPart::PredictSamples, kept * memory::F64_BYTES);
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::backend::{Backend, Settings};

    /// The run budget is exactly the model's default schedule (burn-in plus kept ·
    /// thinning): a smaller budget would shrink every phase, a larger one is not used.
    #[test]
    fn the_run_budget_is_the_default_schedule() {
        let schedule = SghmcConfig::default().sampler.full_schedule();
        assert_eq!(SghmcConfig::default().training.steps, schedule.total());
        assert_eq!(
            SghmcConfig::paper().training.steps,
            SghmcConfig::paper().sampler.full_schedule().total()
        );
        assert_eq!(
            schedule.thinning,
            crate::sghmc::DEFAULT_THINNING,
            "the run default is the model default"
        );
    }

    fn common() -> CommonSettings {
        CommonSettings {
            preset: "default".into(),
            layers: 2,
            num_inducing: 7,
            hidden_width: Some(3),
            train_samples: 1,
            predict_samples: 5,
            seed: 4,
            tune: false,
            learning_rate: None,
            lr_schedule: None,
        }
    }

    fn set(pairs: &[&str]) -> Settings {
        dgp_traits::testing::settings(pairs)
    }

    #[test]
    fn settings_reach_the_config_and_bad_ones_name_the_field() {
        let c = SghmcBackend
            .config(&common(), &set(&["sampler.burn_in=500", "sampler.kept=7"]))
            .unwrap();
        assert_eq!(
            (c.sampler.burn_in, c.sampler.kept, c.num_inducing),
            (500, 7, 7)
        );
        assert_eq!(c.sampler.thinning, crate::sghmc::DEFAULT_THINNING);
        for (s, field) in [
            ("sampler.kept=0", "kept"),
            ("sampler.thinning=0", "thinning"),
            ("sampler.window=20000", "window"),
            ("sampler.step_size=0", "step_size"),
            ("sampler.step_size=-1", "step_size"),
            ("sampler.mdecay=2", "mdecay"),
            ("kuu_jitter=0", "kuu_jitter"),
            ("bogus=1", "bogus"),
            ("num_inducing=3", "the common setting `num_inducing`"),
        ] {
            let e = SghmcBackend
                .config(&common(), &set(&[s]))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{s}: {e}");
        }
        assert!(SGHMC_BACKEND.allowed_keys().iter().any(|k| k == "sampler"));
    }
}
