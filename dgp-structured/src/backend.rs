//! Registration of the STAR, FC and mean-field backends with a harness
//! ([`dgp_traits::backend::Backend`]).
//!
//! Backend settings are the fields of [`StructuredConfig`] (e.g. `whitened=true`,
//! `stripes=false`, `natgrad.gamma=0.1` for `fc`); the common settings set `layers`,
//! `num_inducing`, `tau` (the hidden width), `train_samples`, `predict_samples`,
//! `init_seed` and the learning rate and schedule of `adam`; the family is the backend's
//! name.

use crate::config::{DEFAULT_NATGRAD, DEFAULT_WARM_START};
use crate::{Family, StructuredConfig};
use dgp_traits::backend::{
    Capabilities, CommonSettings, ConfigBackend, ConfigSchema, DEFAULT_PRESET, DemoSettings,
    LikelihoodFamily, Preset, TrainingMode,
};
use dgp_traits::fit::Training;
use dgp_traits::memory::{self, MemoryEstimate, MemoryPart, MemoryShape};
use serde_json::Value;

fn natgrad_default() -> Value {
    serde_json::to_value(DEFAULT_NATGRAD).unwrap_or(Value::Null)
}

fn warm_start_default() -> Value {
    serde_json::to_value(DEFAULT_WARM_START).unwrap_or(Value::Null)
}

/// Keys of [`StructuredConfig`] that the common settings (or the backend name) own.
const RESERVED: &[(&str, &str)] = &[
    ("family", "backend"),
    ("layers", "layers"),
    ("num_inducing", "num_inducing"),
    ("tau", "hidden_width"),
    ("train_samples", "train_samples"),
    ("predict_samples", "predict_samples"),
    ("init_seed", "seed"),
    ("adam", "learning_rate"),
];

const STAR_SCHEMA: ConfigSchema<'static> = ConfigSchema {
    backend: "star",
    reserved: RESERVED,
    sections: &[],
};
const MF_SCHEMA: ConfigSchema<'static> = ConfigSchema {
    backend: "mf",
    reserved: RESERVED,
    sections: &[],
};
const FC_SCHEMA: ConfigSchema<'static> = ConfigSchema {
    backend: "fc",
    reserved: RESERVED,
    sections: &[
        ("natgrad", natgrad_default),
        ("warm_start", warm_start_default),
    ],
};

const PRESETS: &[Preset] = &[
    Preset {
        name: DEFAULT_PRESET,
        protocol: None,
        summary: "whitened, noise variance started at 0.1, Adam lr 0.02 for at most 1 500 steps (fc: 200 natural steps after a mean-field warm start) with a convergence stop (StructuredConfig::fast)",
    },
    Preset {
        name: "paper",
        protocol: Some("lindinger"),
        summary: "Lindinger et al. 2020's reference settings: non-whitened, noise 0.01, Adam 0.005 ×0.98 every 1 000 steps for at most 20 000 steps, their held-out early stopping (StructuredConfig::paper)",
    },
];

/// star and mf in the demonstration job (kept small: STAR L = 3 adds at most about 25 s).
pub const DEMO: DemoSettings = DemoSettings {
    steps: 250,
    steps_1d: 250,
    num_inducing: 20,
    batch_cap: 256,
    learning_rate: 0.02,
    predict_samples: 30,
    layers: &[3],
    note: "shortened: the reference trains 20 000 steps at M = 128, width 5, lr 0.005",
};

/// fc in the demonstration job: [`DEMO`] with 300 steps, DGP2.
pub const FC_DEMO: DemoSettings = DemoSettings {
    steps: 300,
    steps_1d: 300,
    layers: &[2],
    ..DEMO
};

/// A structured backend of one family.
#[derive(Clone, Copy, Debug)]
pub struct StructuredBackend {
    family: Family,
}

/// The stripes-and-arrow backend (`star`).
pub static STAR_BACKEND: StructuredBackend = StructuredBackend {
    family: Family::Star,
};
/// The structured crate's own mean-field family (`mf`): block-diagonal L, i.e. DSVI, with
/// the same defaults as `star` (whitened, S = 5) — the baseline of the paper's Table 2
/// and §4.2 direct comparison (the paper's own runs are non-whitened: `whitened=false`).
pub static MF_BACKEND: StructuredBackend = StructuredBackend {
    family: Family::MeanField,
};
/// The fully-coupled backend (`fc`).
pub static FC_BACKEND: StructuredBackend = StructuredBackend {
    family: Family::FullyCoupled,
};

impl ConfigBackend for StructuredBackend {
    type Config = StructuredConfig;

    fn name(&self) -> &'static str {
        match self.family {
            Family::FullyCoupled => "fc",
            Family::Star => "star",
            Family::MeanField => "mf",
        }
    }

    fn description(&self) -> &'static str {
        match self.family {
            Family::FullyCoupled => {
                "fully-coupled structured DGP, one dense joint q over all layers (Lindinger et al. 2020), natural steps from a fit of its mean-field restriction (setting warm_start)"
            }
            Family::Star => "stripes-and-arrow structured DGP (Lindinger et al. 2020)",
            Family::MeanField => {
                "mean-field DSVI in the structured crate, block-diagonal q, star's defaults (Lindinger et al. 2020 baseline)"
            }
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            training: TrainingMode::Minibatch,
            held_out_early_stopping: true,
            resumable: true,
            selects_on_validation: false,
            streams: true,
            data_parallel: true,
            likelihoods: &[
                LikelihoodFamily::Gaussian,
                LikelihoodFamily::Bernoulli,
                LikelihoodFamily::Multiclass,
            ],
            samples_in_prediction: "Monte Carlo samples of the hidden layers by Theorem 1 = predictive mixture components (equal weights)",
            samples_in_training: "Monte Carlo samples per data point in the ELBO (StructuredConfig::train_samples, eq. 8)",
            samples_are_components: false,
            uses_learning_rate: true,
            steps_capped_by: None,
        }
    }

    fn presets(&self) -> &'static [Preset] {
        PRESETS
    }

    fn preset(&self, name: &str) -> Option<StructuredConfig> {
        match name {
            DEFAULT_PRESET => Some(StructuredConfig::fast(self.family)),
            "paper" => Some(StructuredConfig::paper(self.family)),
            _ => None,
        }
    }

    fn demo(&self) -> DemoSettings {
        match self.family {
            Family::FullyCoupled => FC_DEMO,
            _ => DEMO,
        }
    }

    fn schema(&self) -> &ConfigSchema<'static> {
        match self.family {
            Family::FullyCoupled => &FC_SCHEMA,
            Family::Star => &STAR_SCHEMA,
            Family::MeanField => &MF_SCHEMA,
        }
    }

    /// The common settings' fields (the hidden width sets τ; the learning rate and
    /// schedule go into [`StructuredConfig::adam`]; the family is the backend's).
    fn apply_common(&self, base: StructuredConfig, common: &CommonSettings) -> StructuredConfig {
        StructuredConfig {
            family: self.family,
            layers: common.layers,
            num_inducing: common.num_inducing,
            tau: common.hidden_width.unwrap_or(base.tau),
            train_samples: common.train_samples,
            predict_samples: common.predict_samples,
            init_seed: common.seed,
            adam: common.adam_over(base.adam.clone()),
            training: Training {
                seed: common.seed,
                ..base.training.clone()
            },
            ..base
        }
    }

    /// The fully coupled family also holds one dense (L·W·M)² joint covariance (its
    /// factor, Adam moments, natural-gradient and tape copies).
    fn memory_estimate(&self, shape: &MemoryShape) -> MemoryEstimate {
        let w = shape.clamped_input_width();
        let mut e = memory::sparse_dgp(shape, w);
        if self.family == Family::FullyCoupled {
            let side = shape.outputs(shape.width(w)) * shape.m as f64;
            e.add(MemoryPart::Inducing, 12.0 * side * side * memory::F64_BYTES);
        }
        e
    }
}
