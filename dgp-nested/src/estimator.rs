//! [`NestedConfig`] as an [`Estimator`] (configuration → `fit(&data)` → [`dgp_traits::fitted::Fitted`]
//! model in original units) and [`NestedModel`] as [`Loadable`] from a model file.

use dgp_core::Result;
use dgp_data::Dataset;
use dgp_traits::backend::RunDefaults;
use dgp_traits::fit::{FitConfig, FitHooks};
use dgp_traits::fitted::{Estimator, Loadable};
use dgp_traits::likelihoods::LikelihoodFamily;
use dgp_traits::optim::AdamConfig;

use crate::{NestedConfig, NestedModel};

impl Estimator for NestedConfig {
    type Model = NestedModel;

    /// The model of this configuration with Adam's rate for the fit's held-out rule on
    /// `train`'s rows ([`NestedConfig::learning_rate_for`]).
    fn build(&self, train: &Dataset, fit: &FitConfig, _stop: &FitHooks<'_>) -> Result<NestedModel> {
        let lr = self.learning_rate_for(fit.early_stopping.as_ref(), train.n());
        NestedModel::new(
            NestedConfig {
                adam: AdamConfig {
                    lr,
                    ..self.adam.clone()
                },
                unguarded_learning_rate: None,
                ..self.clone()
            },
            train,
        )
    }

    fn defaults(&self) -> RunDefaults {
        RunDefaults {
            layers: self.layers,
            num_inducing: self.num_inducing,
            train_samples: 1,
            predict_samples: self.predict_samples,
            learning_rate: self.adam.lr,
            unguarded_learning_rate: self.unguarded_learning_rate,
            training: self.training.clone(),
        }
    }

    fn likelihood_family(&self) -> LikelihoodFamily {
        LikelihoodFamily::Gaussian
    }
}

impl Loadable for NestedModel {
    const BACKENDS: &'static [&'static str] = &["nested"];

    fn from_model_json(json: &str) -> Result<Self> {
        NestedModel::from_json(json)
    }
}
