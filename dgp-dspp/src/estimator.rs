//! [`DsppConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`DsppModel`] as [`Loadable`] from a model file.

use dgp_core::Result;
use dgp_data::Dataset;
use dgp_traits::backend::RunDefaults;
use dgp_traits::fit::{FitConfig, FitHooks};
use dgp_traits::fitted::{Estimator, Loadable};
use dgp_traits::likelihoods::LikelihoodFamily;

use crate::{DsppConfig, DsppModel, PpgprModel, Selection};

/// The common settings of a DSPP configuration: its sites are the model's mixture
/// components in training and prediction alike.
fn dspp_defaults(c: &DsppConfig) -> RunDefaults {
    RunDefaults {
        layers: c.layers,
        num_inducing: c.num_inducing,
        train_samples: c.sites,
        predict_samples: c.sites,
        learning_rate: c.learning_rate,
        unguarded_learning_rate: None,
        training: c.training.clone(),
    }
}

impl Estimator for DsppConfig {
    type Model = DsppModel;

    /// The model after the configuration's selection of β_reg and the width on
    /// validation rows ([`DsppConfig::tuned`]; it may choose the one-layer model).
    fn build(&self, train: &Dataset, fit: &FitConfig, stop: &FitHooks<'_>) -> Result<DsppModel> {
        let (cfg, sel) = self.tuned(train, fit, stop)?;
        let mut m = DsppModel::new(cfg, train)?;
        m.selection = sel.as_ref().map(Selection::describe);
        Ok(m)
    }

    fn defaults(&self) -> RunDefaults {
        dspp_defaults(self)
    }

    fn likelihood_family(&self) -> LikelihoodFamily {
        self.likelihood.family()
    }
}

impl Loadable for DsppModel {
    const BACKENDS: &'static [&'static str] = &["dspp"];

    fn from_model_json(json: &str) -> Result<Self> {
        DsppModel::from_json(json)
    }
}

/// PPGPR, the one-layer DSPP (eq. 16), as an estimator: the DSPP configuration, whose
/// layer count [`PpgprModel::new`] sets to one.
///
/// ```
/// use dgp_dspp::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("dgp-doc-{}-{}", "ppgpr", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let csv = dir.join("data.csv");
/// # let rows: String = (0..60).map(|i| { let x = f64::from(i) / 10.0; format!("{x},{}\n", 3.0 * x.sin() + 10.0) }).collect();
/// # std::fs::write(&csv, format!("x,y\n{rows}"))?;
/// let data = load_csv(&csv, "y")?;
/// let training = Training { steps: 50, epochs: None, ..Training::default() };
/// let config = PpgprConfig(DsppConfig { num_inducing: 10, tune_beta: false, training, ..Default::default() });
/// let fitted = config.fit(&data)?;
/// let pred = fitted.predict(data.x())?; // one Gaussian per row, units of y
/// fitted.save(dir.join("model.json"))?;
/// let loaded = Fitted::<PpgprModel>::load(dir.join("model.json"))?;
/// assert_eq!(loaded.predict(data.x())?, pred);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PpgprConfig(pub DsppConfig);

impl Estimator for PpgprConfig {
    type Model = PpgprModel;

    /// The one-layer model after the configuration's selection of β_reg on validation
    /// rows ([`DsppConfig::tuned`]).
    fn build(&self, train: &Dataset, fit: &FitConfig, stop: &FitHooks<'_>) -> Result<PpgprModel> {
        let (cfg, sel) = self.0.clone().ppgpr().tuned(train, fit, stop)?;
        let mut m = PpgprModel::new(cfg, train)?;
        m.0.selection = sel.as_ref().map(Selection::describe);
        Ok(m)
    }

    fn defaults(&self) -> RunDefaults {
        RunDefaults {
            layers: 1,
            ..dspp_defaults(&self.0)
        }
    }

    fn likelihood_family(&self) -> LikelihoodFamily {
        self.0.likelihood.family()
    }
}

impl Loadable for PpgprModel {
    const BACKENDS: &'static [&'static str] = &["ppgpr"];

    fn from_model_json(json: &str) -> Result<Self> {
        PpgprModel::from_json(json)
    }
}
