//! [`StructuredConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`StructuredDgp`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{StructuredConfig, StructuredDgp};

impl Estimator for StructuredConfig {
    type Model = StructuredDgp;

    fn build(&self, train: &Dataset) -> Result<StructuredDgp> {
        StructuredDgp::new(self.clone(), train)
    }
}

impl Loadable for StructuredDgp {
    const BACKENDS: &'static [&'static str] = &["star", "fc", "mf"];

    fn from_model_json(json: &str) -> Result<Self> {
        StructuredDgp::from_json(json)
    }
}
