//! [`DgpsConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`Dgps`] as [`Loadable`] from a model file.

use dgp_traits::data::Dataset;
use dgp_traits::error::Result;
use dgp_traits::fitted::{Estimator, Loadable};

use crate::{Dgps, DgpsConfig};

impl Estimator for DgpsConfig {
    type Model = Dgps;

    fn build(&self, train: &Dataset) -> Result<Dgps> {
        Dgps::new(self.clone(), train)
    }
}

impl Loadable for Dgps {
    const BACKENDS: &'static [&'static str] = &["dgps"];

    fn from_model_json(json: &str) -> Result<Self> {
        Dgps::from_json(json)
    }
}
