//! [`SviConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`SviModel`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{SviConfig, SviModel};

impl Estimator for SviConfig {
    type Model = SviModel;

    fn build(&self, train: &Dataset) -> Result<SviModel> {
        SviModel::new(self.clone(), train)
    }
}

impl Loadable for SviModel {
    const BACKENDS: &'static [&'static str] = &["svi"];

    fn from_model_json(json: &str) -> Result<Self> {
        SviModel::from_json(json)
    }
}
