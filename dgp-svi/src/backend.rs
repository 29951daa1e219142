//! Registration of the svi backend with a harness ([`dgp_traits::backend::Backend`]).
//!
//! Backend settings are the fields of [`SviConfig`] (e.g. `natgrad.gamma=1`,
//! `inner_q_scale=1e-4`, `whiten=false`); the common settings set `layers`,
//! `num_inducing`, `hidden_width`, `train_samples`, `init_seed` and the learning rate and
//! schedule of `adam`.

use dgp_core::Result;
use dgp_traits::backend::{
    Capabilities, CommonSettings, ConfigBackend, ConfigSchema, DEFAULT_PRESET, DemoSettings,
    LikelihoodFamily, Preset, Settings, TrainingMode, Validate, describe_generic,
};
use dgp_traits::fit::Training;
use dgp_traits::optim::{NatGradConfig, NatGradScheme};
use serde_json::Value;

use crate::SviConfig;

impl Validate for SviConfig {
    fn validate(&self) -> Result<()> {
        SviConfig::validate(self)
    }
}

fn natgrad_default() -> Value {
    serde_json::to_value(NatGradConfig::default()).unwrap_or(Value::Null)
}

/// Keys of [`SviConfig`] that the common settings own, and which.
const RESERVED: &[(&str, &str)] = &[
    ("layers", "layers"),
    ("num_inducing", "num_inducing"),
    ("hidden_width", "hidden_width"),
    ("train_samples", "train_samples"),
    ("predict_samples", "predict_samples"),
    ("init_seed", "seed"),
    ("adam", "learning_rate"),
];

const SCHEMA: ConfigSchema<'static> = ConfigSchema {
    backend: "svi",
    reserved: RESERVED,
    sections: &[("natgrad", natgrad_default)],
};

const PRESETS: &[Preset] = &[
    Preset {
        name: DEFAULT_PRESET,
        protocol: None,
        summary: "the DSVI reference settings with Adam at lr 0.02 and a convergence stop (SviConfig::default)",
    },
    Preset {
        name: "paper",
        protocol: None,
        summary: "the reference code's schedule: Adam lr 0.01 for 10 000 steps, no stop (SviConfig::paper)",
    },
];

/// The svi backend ([`crate::SviModel`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct SviBackend;

/// The value a harness registers.
pub static SVI_BACKEND: SviBackend = SviBackend;

impl ConfigBackend for SviBackend {
    type Config = SviConfig;

    fn name(&self) -> &'static str {
        "svi"
    }

    fn description(&self) -> &'static str {
        "doubly-stochastic variational inference (Salimbeni & Deisenroth 2017)"
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
            samples_in_prediction: "Monte Carlo samples of the hidden layers = predictive mixture components (eq. 18; L = 1 gives one Gaussian)",
            samples_in_training: "Monte Carlo samples per data point in the ELBO (SviConfig::train_samples, eq. 17)",
            samples_are_components: false,
            uses_learning_rate: true,
            steps_capped_by: None,
        }
    }

    fn presets(&self) -> &'static [Preset] {
        PRESETS
    }

    fn preset(&self, name: &str) -> Option<SviConfig> {
        match name {
            DEFAULT_PRESET => Some(SviConfig::default()),
            "paper" => Some(SviConfig::paper()),
            _ => None,
        }
    }

    fn demo(&self) -> DemoSettings {
        DemoSettings::DEFAULT
    }

    fn schema(&self) -> &ConfigSchema<'static> {
        &SCHEMA
    }

    /// The common settings' fields (the learning rate and schedule into
    /// [`SviConfig::adam`], the seed into `init_seed` and the training seed).
    fn apply_common(&self, base: SviConfig, common: &CommonSettings) -> SviConfig {
        SviConfig {
            layers: common.layers,
            num_inducing: common.num_inducing,
            hidden_width: common.hidden_width,
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

    fn describe_settings(&self, settings: &Settings) -> String {
        let mut rest = settings.clone();
        let natgrad = rest.remove("natgrad");
        let mut out = describe_generic(&rest);
        let parsed = natgrad.and_then(|v| {
            let mut full = natgrad_default();
            if let (Some(a), Value::Object(b)) = (full.as_object_mut(), v) {
                dgp_traits::backend::merge_settings(a, &b);
            }
            serde_json::from_value::<NatGradConfig>(full).ok()
        });
        if let Some(n) = parsed {
            let scheme = match n.scheme {
                NatGradScheme::Alternate => "alternating with",
                NatGradScheme::Joint => "joint with",
            };
            out.push_str(&format!(
                ", natural-gradient steps gamma {} on the last q(u) {scheme} Adam",
                n.gamma
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::backend::{Backend, Settings};
    use dgp_traits::optim::AdamConfig;

    fn common() -> CommonSettings {
        CommonSettings {
            preset: "default".into(),
            layers: 2,
            num_inducing: 7,
            hidden_width: Some(3),
            train_samples: 2,
            predict_samples: 5,
            seed: 4,
            tune: true,
            learning_rate: Some(0.03),
            lr_schedule: None,
        }
    }

    fn set(pairs: &[&str]) -> Settings {
        dgp_traits::testing::settings(pairs)
    }

    #[test]
    fn settings_give_the_same_config_as_the_struct() {
        let base = SviBackend.apply_common(SviConfig::default(), &common());
        assert_eq!(base.adam, AdamConfig::with_lr(0.03));
        assert_eq!((base.init_seed, base.training.seed), (4, 4));
        let c = SviBackend.config(&common(), &Settings::new()).unwrap();
        assert_eq!(*c, base);
        let c = SviBackend
            .config(
                &common(),
                &set(&["natgrad.gamma=0.5", "natgrad.scheme=joint"]),
            )
            .unwrap();
        let want = SviConfig {
            natgrad: Some(NatGradConfig {
                gamma: 0.5,
                scheme: NatGradScheme::Joint,
                ..NatGradConfig::default()
            }),
            ..base.clone()
        };
        assert_eq!(*c, want);
        // The JSON round trip of the whole configuration is exact.
        let c = SviBackend
            .config(&common(), &set(&["whiten=true"]))
            .unwrap();
        assert_eq!(*c, base);
    }

    /// A configuration written without `adam` reads with Adam's defaults (lr 0.01,
    /// constant): the settings a fit used when the learning rate was not the config's.
    #[test]
    fn config_json_without_adam_loads_with_the_defaults() {
        let mut v = serde_json::to_value(SviConfig {
            adam: AdamConfig::with_lr(0.5),
            ..SviConfig::default()
        })
        .unwrap();
        v.as_object_mut().unwrap().remove("adam");
        let back: SviConfig = serde_json::from_value(v).unwrap();
        assert_eq!(
            back,
            SviConfig {
                adam: AdamConfig::default(),
                ..SviConfig::default()
            }
        );
        assert_eq!(back.adam, AdamConfig::with_lr(0.01));
    }

    /// The presets are `SviConfig::default` and `SviConfig::paper`; the common settings
    /// they hold leave them as they are, and an unknown name is refused naming them.
    #[test]
    fn presets_are_the_configurations_and_round_trip_through_the_common_settings() {
        use dgp_traits::fitted::Estimator;
        for (name, want) in [
            ("default", SviConfig::default()),
            ("paper", SviConfig::paper()),
        ] {
            assert_eq!(ConfigBackend::preset(&SviBackend, name), Some(want.clone()));
            let common = CommonSettings::from_defaults(name, want.layers, &want.defaults());
            let got = SviBackend.config(&common, &Settings::new()).unwrap();
            assert_eq!(*got, want, "{name}");
        }
        let d = SviConfig::default();
        assert_eq!(d.adam.lr, 0.02);
        assert_eq!(
            d.training.convergence,
            Some(crate::DEFAULT_CONVERGENCE),
            "the default stops on convergence"
        );
        assert_eq!((d.training.steps, d.training.batch_size), (10_000, 10_000));
        let p = SviConfig::paper();
        assert_eq!((p.adam.lr, p.training.convergence), (0.01, None));
        let e = SviBackend
            .config(
                &CommonSettings {
                    preset: "papper".into(),
                    ..common()
                },
                &Settings::new(),
            )
            .unwrap_err();
        assert!(
            matches!(&e, dgp_core::Error::Config(c) if c.field == "preset")
                && e.to_string().contains("default, paper"),
            "{e}"
        );
    }

    #[test]
    fn bad_settings_name_the_key_or_field() {
        let e = SviBackend
            .config(&common(), &set(&["bogus=1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'bogus'") && e.contains("inner_q_scale"), "{e}");
        let e = SviBackend
            .config(&common(), &set(&["inner_q_scale=2"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("inner_q_scale") && e.contains("(0, 1]"), "{e}");
        let e = SviBackend
            .config(&common(), &set(&["num_inducing=3"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the common setting `num_inducing`"), "{e}");
        let e = SviBackend
            .config(&common(), &set(&["adam.lr=0.1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the common setting `learning_rate`"), "{e}");
        let e = SviBackend
            .config(
                &CommonSettings {
                    learning_rate: Some(0.0),
                    ..common()
                },
                &Settings::new(),
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("adam") && e.contains("lr=0"), "{e}");
        assert!(!SVI_BACKEND.allowed_keys().iter().any(|k| k == "layers"));
    }
}
