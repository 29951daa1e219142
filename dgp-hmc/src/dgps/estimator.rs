//! [`DgpsConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`DgpsModel`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{DgpsConfig, DgpsModel};

impl Estimator for DgpsConfig {
    type Model = DgpsModel;

    fn build(&self, train: &Dataset) -> Result<DgpsModel> {
        DgpsModel::new(self.clone(), train)
    }
}

impl Loadable for DgpsModel {
    const BACKENDS: &'static [&'static str] = &["dgps"];

    fn from_model_json(json: &str) -> Result<Self> {
        DgpsModel::from_json(json)
    }
}
