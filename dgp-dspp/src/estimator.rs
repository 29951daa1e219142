//! [`DsppConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`Dspp`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{Dspp, DsppConfig, Ppgpr};

impl Estimator for DsppConfig {
    type Model = Dspp;

    fn build(&self, train: &Dataset) -> Result<Dspp> {
        Dspp::new(self.clone(), train)
    }
}

impl Loadable for Dspp {
    const BACKENDS: &'static [&'static str] = &["dspp"];

    fn from_model_json(json: &str) -> Result<Self> {
        Dspp::from_json(json)
    }
}

/// PPGPR, the one-layer DSPP (eq. 16), as an estimator: the DSPP configuration, whose
/// layer count [`Ppgpr::new`] sets to one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PpgprConfig(pub DsppConfig);

impl Estimator for PpgprConfig {
    type Model = Ppgpr;

    fn build(&self, train: &Dataset) -> Result<Ppgpr> {
        Ppgpr::new(self.0.clone(), train)
    }
}

impl Loadable for Ppgpr {
    const BACKENDS: &'static [&'static str] = &["ppgpr"];

    fn from_model_json(json: &str) -> Result<Self> {
        Ppgpr::from_json(json)
    }
}
