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
