//! [`SghmcDgpConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`SghmcDgp`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{SghmcDgp, SghmcDgpConfig};

impl Estimator for SghmcDgpConfig {
    type Model = SghmcDgp;

    fn build(&self, train: &Dataset) -> Result<SghmcDgp> {
        SghmcDgp::new(self.clone(), train)
    }
}

impl Loadable for SghmcDgp {
    const BACKENDS: &'static [&'static str] = &["sghmc"];

    fn from_model_json(json: &str) -> Result<Self> {
        SghmcDgp::from_json(json)
    }
}
