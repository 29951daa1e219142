//! [`NestedConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`NestedModel`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{NestedConfig, NestedModel};

impl Estimator for NestedConfig {
    type Model = NestedModel;

    fn build(&self, train: &Dataset) -> Result<NestedModel> {
        NestedModel::new(self.clone(), train)
    }
}

impl Loadable for NestedModel {
    const BACKENDS: &'static [&'static str] = &["nested"];

    fn from_model_json(json: &str) -> Result<Self> {
        NestedModel::from_json(json)
    }
}
