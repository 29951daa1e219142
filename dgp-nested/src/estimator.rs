//! [`NestedConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`NestedDgp`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{NestedConfig, NestedDgp};

impl Estimator for NestedConfig {
    type Model = NestedDgp;

    fn build(&self, train: &Dataset) -> Result<NestedDgp> {
        NestedDgp::new(self.clone(), train)
    }
}

impl Loadable for NestedDgp {
    const BACKENDS: &'static [&'static str] = &["nested"];

    fn from_model_json(json: &str) -> Result<Self> {
        NestedDgp::from_json(json)
    }
}
