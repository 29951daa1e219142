//! [`SviConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`SviModel`] as [`Loadable`] from a model file.

use dgp_core::Result;
use dgp_data::Dataset;
use dgp_traits::backend::RunDefaults;
use dgp_traits::fit::{FitConfig, FitHooks};
use dgp_traits::fitted::{Estimator, Loadable};
use dgp_traits::likelihoods::LikelihoodFamily;

use crate::{SviConfig, SviModel};

impl Estimator for SviConfig {
    type Model = SviModel;

    fn build(&self, train: &Dataset, _fit: &FitConfig, _stop: &FitHooks<'_>) -> Result<SviModel> {
        SviModel::new(self.clone(), train)
    }

    fn defaults(&self) -> RunDefaults {
        RunDefaults {
            layers: self.layers,
            num_inducing: self.num_inducing,
            train_samples: self.train_samples,
            predict_samples: self.predict_samples,
            learning_rate: self.adam.lr,
            unguarded_learning_rate: None,
            training: self.training.clone(),
        }
    }

    fn likelihood_family(&self) -> LikelihoodFamily {
        self.likelihood.family()
    }
}

impl Loadable for SviModel {
    const BACKENDS: &'static [&'static str] = &["svi"];

    fn from_model_json(json: &str) -> Result<Self> {
        SviModel::from_json(json)
    }
}
