//! Registration of the dspp and ppgpr backends with a harness
//! ([`dgp_traits::backend::Backend`]).
//!
//! Backend settings are the fields of [`DsppConfig`] (e.g. `rule=qr1`, `beta=0.2`,
//! `q_cov=full`, `early_stopping=null`); the common settings set `layers`,
//! `num_inducing`, `hidden_width`, `sites` (the mixture components) and `init_seed`.
//! `rule`, `init` and `q_cov` also accept the spellings of their `FromStr` (`QR3`, `gh`,
//! `diagonal`, ...).
//!
//! With `tune` set, β_reg (unless `beta` is given) and, for two or more layers, the hidden
//! width (unless given) are chosen by [`select_model`] on a validation part of the training
//! data, as the paper does (App. A.2); for two or more layers the one-layer PPGPR takes part
//! in that selection unless `select_one_layer=false`
//! ([`DsppConfig::select_one_layer`]).

use std::str::FromStr;

use dgp_traits::backend::{
    Capabilities, Checked, CommonSettings, ConfigBackend, ConfigSchema, DemoSettings,
    LikelihoodFamily, RunDefaults, Settings, Training, Validate,
};
use dgp_traits::data::Dataset;
use dgp_traits::error::{Error, Result};
use dgp_traits::model::{FitConfig, FitHooks, Model};
use serde::Serialize;
use serde_json::Value;

use crate::{
    DsppConfig, DsppModel, PAPER_BETAS, PAPER_WIDTHS, PpgprModel, QCov, Rule, Selection, SiteInit,
    select_model,
};

impl Validate for DsppConfig {
    fn validate(&self) -> Result<()> {
        DsppConfig::validate(self)
    }
}

const SCHEMA: ConfigSchema<'static> = ConfigSchema {
    backend: "dspp",
    reserved: &[
        ("layers", "--layers"),
        ("num_inducing", "--inducing"),
        ("hidden_width", "--hidden"),
        ("sites", "--samples"),
        ("init_seed", "--seed"),
        ("learning_rate", "--lr"),
    ],
    sections: &[],
};

/// The canonical JSON of a string setting parsed by `T::from_str`.
fn canonical<T: FromStr<Err = Error> + Serialize>(v: &Value) -> Result<Value> {
    match v {
        Value::String(s) => serde_json::to_value(T::from_str(s)?)
            .map_err(|e| Error::config("setting", format!("{e}"))),
        other => Ok(other.clone()),
    }
}

/// `settings` with `rule`, `init` and `q_cov` in their canonical spelling.
fn normalised(settings: &Settings) -> Result<Settings> {
    let mut s = settings.clone();
    for (key, parse) in [
        ("rule", canonical::<Rule> as fn(&Value) -> Result<Value>),
        ("init", canonical::<SiteInit>),
        ("q_cov", canonical::<QCov>),
    ] {
        if let Some(v) = s.get_mut(key) {
            *v = parse(v).map_err(|e| Error::config("setting", format!("'{key}': {e}")))?;
        }
    }
    Ok(s)
}

/// The dspp backend ([`DsppModel`], and [`PpgprModel`] for one layer).
#[derive(Clone, Copy, Debug, Default)]
pub struct DsppBackend;

/// DSPP's training defaults ([`dgp_traits::backend::Backend::run_defaults`]; paper App. A.2
/// and the GPyTorch example): 400 epochs, but at least 3000 steps, of Adam (lr 0.01,
/// dropped by the model's schedule) with batches of min(N, 1000), M = 128, S = 8 sites;
/// the held-out early stopping of `dgp_dspp::train` keeps the best parameters (and ends
/// training when they stop improving).
pub const RUN_DEFAULTS: RunDefaults = RunDefaults {
    num_inducing: 128,
    steps: 3_000,
    epochs: Some(400),
    learning_rate: 0.01,
    batch_cap: 1_000,
    train_samples: 8,
    predict_samples: 8,
    early_stopping: None,
    unguarded_learning_rate: None,
};

/// PPGPR's training defaults: DSPP's ([`RUN_DEFAULTS`]) with one site.
pub const PPGPR_RUN_DEFAULTS: RunDefaults = RunDefaults {
    train_samples: 1,
    predict_samples: 1,
    ..RUN_DEFAULTS
};

/// DSPP / PPGPR in the demonstration job: at M = 50, 600 steps on concrete and 1500 on
/// the step function, with the backends' own optimiser (Adam lr 0.01, full batch up to
/// 1000 rows) — shorter than [`RUN_DEFAULTS`], not noisier. Minibatches of 256 or lr 0.03
/// made eq. (21)'s fits over-confident: on concrete published splits 0–9 (DSPP2, β 0.05,
/// no selection) 95 % coverage 0.897 and NLL 3.214 with batch 256 and lr 0.03, against
/// 0.931 and 3.097 with these settings (DSPP3 0.902 → 0.917, PPGPR 0.927 → 0.945). The
/// step function needs 1500 steps at lr 0.01 (DSPP2 NLL −1.21 after 600, −2.94 after
/// 1500). Records and table: `results/dspp-small-data/README.md` §5. DSPP trains DGP2 and
/// DGP3 there.
pub const DEMO: DemoSettings = DemoSettings {
    steps: 600,
    steps_1d: 1_500,
    batch_cap: 1_000,
    learning_rate: 0.01,
    layers: &[2, 3],
    ..DemoSettings::DEFAULT
};

/// PPGPR in the demonstration job: DSPP's settings ([`DEMO`]), one layer.
pub const PPGPR_DEMO: DemoSettings = DemoSettings {
    layers: &[1],
    ..DEMO
};

/// The ppgpr backend: the one-layer DSPP (eq. 16); other layer counts are an error.
#[derive(Clone, Copy, Debug, Default)]
pub struct PpgprBackend;

/// The dspp value a harness registers.
pub static DSPP_BACKEND: DsppBackend = DsppBackend;
/// The ppgpr value a harness registers.
pub static PPGPR_BACKEND: PpgprBackend = PpgprBackend;

impl DsppBackend {
    /// [`ConfigBackend::config`], with β_reg (and, for two or more layers, the hidden
    /// width) chosen by [`select_model`] on a validation part of `train` when
    /// `common.tune` is set and they are not given; for two or more layers with
    /// [`DsppConfig::select_one_layer`], the one-layer PPGPR candidates take part and the
    /// returned configuration has `layers = 1` when one of them wins. The search ends when
    /// `stop` asks ([`dgp_traits::fit::RunControl::should_stop`]). Returns the
    /// configuration and the selection, if one ran.
    ///
    /// # Errors
    /// As [`ConfigBackend::config`] and [`select_model`].
    pub fn tuned_config(
        &self,
        base: Checked<DsppConfig>,
        common: &CommonSettings,
        settings: &Settings,
        fit: &FitConfig,
        train: &Dataset,
        stop: &FitHooks<'_>,
    ) -> Result<(Checked<DsppConfig>, Option<Selection>)> {
        if !selects(common, settings) {
            return Ok((base, None));
        }
        let betas: Vec<f64> = if settings.contains_key("beta") {
            vec![base.beta]
        } else {
            PAPER_BETAS.to_vec()
        };
        let widths: Vec<usize> = match common.hidden_width {
            Some(w) => vec![w],
            None => PAPER_WIDTHS.to_vec(),
        };
        let with_one_layer = base.select_one_layer;
        let sel = select_model(
            train,
            &base,
            &betas,
            &widths,
            with_one_layer,
            fit,
            common.seed,
            stop,
        )?;
        let cfg = Checked::new(DsppConfig {
            layers: sel.layers,
            beta: sel.beta,
            hidden_width: sel.width,
            ..base.into_inner()
        })?;
        Ok((cfg, Some(sel)))
    }
}

/// Whether [`DsppBackend::tuned_config`] chooses anything on validation rows: with
/// `common.tune`, unless β is given and the width is fixed (given, or one layer).
fn selects(common: &CommonSettings, settings: &Settings) -> bool {
    let width_fixed = common.hidden_width.is_some() || common.layers == 1;
    common.tune && !(settings.contains_key("beta") && width_fixed)
}

/// Rows of `n_train` that a selecting build holds out: `floor(VALIDATION_FRACTION · n_train)`.
fn selection_rows(common: &CommonSettings, settings: &Settings, n_train: usize) -> usize {
    if selects(common, settings) {
        (crate::VALIDATION_FRACTION * n_train as f64).floor() as usize
    } else {
        0
    }
}

impl ConfigBackend for DsppBackend {
    type Config = DsppConfig;

    fn name(&self) -> &'static str {
        "dspp"
    }

    fn description(&self) -> &'static str {
        "deep sigma point processes, learned quadrature (Jankowiak, Pleiss & Gardner 2020)"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            training: Training::Minibatch,
            held_out_early_stopping: true,
            resumable: false,
            selects_on_validation: true,
            streams: true,
            data_parallel: true,
            likelihoods: &[
                LikelihoodFamily::Gaussian,
                LikelihoodFamily::Bernoulli,
                LikelihoodFamily::Multiclass,
            ],
            samples_in_prediction: "quadrature sites S (QR3: S mixture components; QR1/QR2: S^W), in training and prediction",
            samples_in_training: "quadrature sites S, as in prediction",
            samples_are_components: true,
            uses_learning_rate: true,
            steps_capped_by: None,
        }
    }

    fn validation_rows(
        &self,
        common: &CommonSettings,
        settings: &Settings,
        n_train: usize,
    ) -> usize {
        selection_rows(common, settings, n_train)
    }

    fn run_defaults(&self) -> RunDefaults {
        RUN_DEFAULTS
    }

    fn demo(&self) -> DemoSettings {
        DEMO
    }

    fn schema(&self) -> &ConfigSchema<'static> {
        &SCHEMA
    }

    /// The configuration of the common settings (before tuning): M, layers, sites = the
    /// mixture components, the hidden width and the learning rate where given (the
    /// schedule is the model's own `lr_drops`); everything else
    /// [`DsppConfig::default`].
    fn base_config(&self, common: &CommonSettings) -> DsppConfig {
        let d = DsppConfig::default();
        DsppConfig {
            layers: common.layers,
            num_inducing: common.num_inducing,
            hidden_width: common.hidden_width.unwrap_or(d.hidden_width),
            sites: common.predict_samples,
            init_seed: common.seed,
            learning_rate: common.learning_rate.unwrap_or(d.learning_rate),
            ..d
        }
    }

    /// `rule`, `init` and `q_cov` in their canonical spelling.
    fn normalise(&self, settings: &Settings) -> Result<Settings> {
        normalised(settings)
    }

    /// [`DsppModel`] for two or more layers, [`PpgprModel`] for one, after tuning
    /// ([`DsppBackend::tuned_config`]).
    fn build_checked(
        &self,
        config: Checked<DsppConfig>,
        common: &CommonSettings,
        settings: &Settings,
        fit: &FitConfig,
        train: &Dataset,
        stop: &FitHooks<'_>,
    ) -> Result<Box<dyn Model>> {
        let (cfg, sel) = self.tuned_config(config, common, settings, fit, train, stop)?;
        let note = sel.as_ref().map(Selection::describe);
        if cfg.layers == 1 {
            let mut m = PpgprModel::from_checked(cfg, train)?;
            m.0.selection = note;
            return Ok(Box::new(m));
        }
        let mut m = DsppModel::from_checked(cfg, train)?;
        m.selection = note;
        Ok(Box::new(m))
    }
}

impl ConfigBackend for PpgprBackend {
    type Config = DsppConfig;

    fn name(&self) -> &'static str {
        "ppgpr"
    }

    fn description(&self) -> &'static str {
        "parametric predictive GP regression, the one-layer DSPP (Jankowiak et al. 2020, eq. 16)"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            training: Training::Minibatch,
            held_out_early_stopping: true,
            resumable: false,
            selects_on_validation: true,
            streams: true,
            data_parallel: true,
            likelihoods: &[
                LikelihoodFamily::Gaussian,
                LikelihoodFamily::Bernoulli,
                LikelihoodFamily::Multiclass,
            ],
            samples_in_prediction: "ignored: the predictive is one Gaussian",
            samples_in_training: "ignored",
            samples_are_components: true,
            uses_learning_rate: true,
            steps_capped_by: None,
        }
    }

    fn validation_rows(
        &self,
        common: &CommonSettings,
        settings: &Settings,
        n_train: usize,
    ) -> usize {
        selection_rows(common, settings, n_train)
    }

    fn run_defaults(&self) -> RunDefaults {
        PPGPR_RUN_DEFAULTS
    }

    fn demo(&self) -> DemoSettings {
        PPGPR_DEMO
    }

    fn schema(&self) -> &ConfigSchema<'static> {
        &SCHEMA
    }

    fn base_config(&self, common: &CommonSettings) -> DsppConfig {
        DsppBackend.base_config(common)
    }

    /// ppgpr is the one-layer model: any other layer count is an error.
    fn check_common(&self, common: &CommonSettings) -> Result<()> {
        if common.layers != 1 {
            return Err(Error::config(
                "layers",
                format!(
                    "ppgpr is the one-layer model (eq. 16); got --layers {} (use --backend dspp)",
                    common.layers
                ),
            ));
        }
        Ok(())
    }

    fn normalise(&self, settings: &Settings) -> Result<Settings> {
        normalised(settings)
    }

    fn build_checked(
        &self,
        config: Checked<DsppConfig>,
        common: &CommonSettings,
        settings: &Settings,
        fit: &FitConfig,
        train: &Dataset,
        stop: &FitHooks<'_>,
    ) -> Result<Box<dyn Model>> {
        DsppBackend.build_checked(config, common, settings, fit, train, stop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_traits::backend::Backend;

    fn common(layers: usize) -> CommonSettings {
        CommonSettings {
            layers,
            num_inducing: 9,
            hidden_width: Some(4),
            train_samples: 5,
            predict_samples: 5,
            seed: 2,
            tune: true,
            learning_rate: None,
            lr_schedule: None,
        }
    }

    #[test]
    fn rule_and_beta_settings_match_the_struct() {
        let base = DsppBackend.base_config(&common(2));
        assert_eq!(
            *DsppBackend.config(&common(2), &Settings::new()).unwrap(),
            base
        );
        let mut s = Settings::new();
        s.insert("rule".into(), Value::from("QR1"));
        s.insert("beta".into(), Value::from(0.2));
        let c = DsppBackend.config(&common(2), &s).unwrap();
        assert_eq!(
            *c,
            DsppConfig {
                rule: Rule::Qr1,
                beta: 0.2,
                ..base
            }
        );
    }

    #[test]
    fn bad_settings_name_the_key_or_field() {
        let mut s = Settings::new();
        s.insert("rule".into(), Value::from("qr9"));
        let e = DsppBackend.config(&common(2), &s).unwrap_err().to_string();
        assert!(e.contains("'rule'") && e.contains("qr1, qr2 or qr3"), "{e}");
        let mut s = Settings::new();
        s.insert("restart_fraction".into(), Value::from(1.5));
        let e = DsppBackend.config(&common(2), &s).unwrap_err().to_string();
        assert!(e.contains("restart_fraction: must be in (0, 1)"), "{e}");
        let mut s = Settings::new();
        s.insert("betta".into(), Value::from(1.0));
        let e = DsppBackend.config(&common(2), &s).unwrap_err().to_string();
        assert!(e.contains("'betta'") && e.contains("beta"), "{e}");
        assert!(Backend::check(&PPGPR_BACKEND, &common(2), &Settings::new()).is_err());
        assert!(Backend::check(&PPGPR_BACKEND, &common(1), &Settings::new()).is_ok());
    }
}
