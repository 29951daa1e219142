//! [`SghmcConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`SghmcModel`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{SghmcConfig, SghmcModel};

impl Estimator for SghmcConfig {
    type Model = SghmcModel;

    fn build(&self, train: &Dataset) -> Result<SghmcModel> {
        SghmcModel::new(self.clone(), train)
    }
}

impl Loadable for SghmcModel {
    const BACKENDS: &'static [&'static str] = &["sghmc"];

    fn from_model_json(json: &str) -> Result<Self> {
        SghmcModel::from_json(json)
    }
}
