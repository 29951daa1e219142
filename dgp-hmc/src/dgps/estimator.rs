//! [`DgpsConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`DgpsModel`] as [`Loadable`] from a model file.

use dgp_core::Result;
use dgp_data::Dataset;
use dgp_traits::backend::RunDefaults;
use dgp_traits::fit::{FitConfig, FitHooks};
use dgp_traits::fitted::{Estimator, Loadable};
use dgp_traits::likelihoods::LikelihoodFamily;

use crate::{DgpsConfig, DgpsModel};

impl Estimator for DgpsConfig {
    type Model = DgpsModel;

    fn build(&self, train: &Dataset, _fit: &FitConfig, _stop: &FitHooks<'_>) -> Result<DgpsModel> {
        DgpsModel::new(self.clone(), train)
    }

    /// `train_samples` is K, the fixed sample paths; L-BFGS uses no learning rate.
    fn defaults(&self) -> RunDefaults {
        RunDefaults {
            layers: self.layers,
            num_inducing: self.num_inducing,
            train_samples: self.samples,
            predict_samples: self.predict_samples,
            learning_rate: 0.01,
            unguarded_learning_rate: None,
            training: self.training.clone(),
        }
    }

    fn likelihood_family(&self) -> LikelihoodFamily {
        LikelihoodFamily::Gaussian
    }
}

impl Loadable for DgpsModel {
    const BACKENDS: &'static [&'static str] = &["dgps"];

    fn from_model_json(json: &str) -> Result<Self> {
        DgpsModel::from_json(json)
    }
}
