//! [`DsppConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`DsppModel`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{DsppConfig, DsppModel, PpgprModel};

impl Estimator for DsppConfig {
    type Model = DsppModel;

    fn build(&self, train: &Dataset) -> Result<DsppModel> {
        DsppModel::new(self.clone(), train)
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
/// let config = PpgprConfig(DsppConfig { num_inducing: 10, ..Default::default() });
/// let fitted = config.fit_with(&data, &FitConfig { steps: 50, ..Default::default() }, &mut FitHooks::none())?;
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

    fn build(&self, train: &Dataset) -> Result<PpgprModel> {
        PpgprModel::new(self.0.clone(), train)
    }
}

impl Loadable for PpgprModel {
    const BACKENDS: &'static [&'static str] = &["ppgpr"];

    fn from_model_json(json: &str) -> Result<Self> {
        PpgprModel::from_json(json)
    }
}
