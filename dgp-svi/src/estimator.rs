//! [`SviConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`DeepGp`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{DeepGp, SviConfig};

impl Estimator for SviConfig {
    type Model = DeepGp;

    fn build(&self, train: &Dataset) -> Result<DeepGp> {
        DeepGp::new(self.clone(), train)
    }
}

impl Loadable for DeepGp {
    const BACKENDS: &'static [&'static str] = &["svi"];

    fn from_model_json(json: &str) -> Result<Self> {
        DeepGp::from_json(json)
    }
}
