//! [`StructuredConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`StructuredModel`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{StructuredConfig, StructuredModel};

impl Estimator for StructuredConfig {
    type Model = StructuredModel;

    fn build(&self, train: &Dataset) -> Result<StructuredModel> {
        StructuredModel::new(self.clone(), train)
    }
}

impl Loadable for StructuredModel {
    const BACKENDS: &'static [&'static str] = &["star", "fc", "mf"];

    fn from_model_json(json: &str) -> Result<Self> {
        StructuredModel::from_json(json)
    }
}
