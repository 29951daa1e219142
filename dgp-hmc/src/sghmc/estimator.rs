//! [`SghmcConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`SghmcModel`] as [`Loadable`] from a model file.

use dgp_core::Result;
use dgp_data::Dataset;
use dgp_traits::backend::RunDefaults;
use dgp_traits::fit::{FitConfig, FitHooks};
use dgp_traits::fitted::{Estimator, Loadable};
use dgp_traits::likelihoods::LikelihoodFamily;

use crate::{SghmcConfig, SghmcModel};

impl Estimator for SghmcConfig {
    type Model = SghmcModel;

    fn build(&self, train: &Dataset, _fit: &FitConfig, _stop: &FitHooks<'_>) -> Result<SghmcModel> {
        SghmcModel::new(self.clone(), train)
    }

    /// The predictive has one component per kept sample; the sampler uses no learning
    /// rate (its step size and the MCEM hyper step are [`SghmcConfig::sampler`]'s).
    fn defaults(&self) -> RunDefaults {
        RunDefaults {
            layers: self.layers,
            num_inducing: self.num_inducing,
            train_samples: 1,
            predict_samples: self.sampler.kept,
            learning_rate: self.sampler.hyper_lr,
            unguarded_learning_rate: None,
            training: self.training.clone(),
        }
    }

    fn likelihood_family(&self) -> LikelihoodFamily {
        self.likelihood.family()
    }
}

impl Loadable for SghmcModel {
    const BACKENDS: &'static [&'static str] = &["sghmc"];

    fn from_model_json(json: &str) -> Result<Self> {
        SghmcModel::from_json(json)
    }
}
