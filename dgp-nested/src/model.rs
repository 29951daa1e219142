//! The nested-compression deep GP: construction (our defaults; the paper gives none), the bound (corrected eq. 19,
//! Hensman & Lawrence 2014, eq. 19), training (Adam or L-BFGS) and prediction.

use crate::config::{NestedConfig, Optimiser, PredictMode};
use crate::init::init_layer;
use crate::layer::{NOISE_FLOOR, NestedLayer, layer_moments, positive};
use dgp_core::rng::seeded;
use dgp_core::{Error, Result};
use dgp_data::{Dataset, RowSource, require_in_memory};
use dgp_traits::backend::Checked;
use dgp_traits::kernels::KernelHyper;
use dgp_traits::layer::HYPER_FLOOR;
use dgp_traits::model::{FitConfig, FitHooks, FitReport, Model, PredictConfig};
use dgp_traits::optim::{AdamConfig, LbfgsConfig, LrSchedule};
use dgp_traits::params::ParamStore;
use dgp_traits::predictive::Predictive;
use dgp_traits::skeleton::{
    check_inputs, describe_stack, layer_plans, model_json, predict_chunked,
};
use dgp_traits::train::{AdamStepper, CallerHooks, Executor, FullBatchLbfgs};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Largest number of rows (points × samples) pushed through the layers at once when
/// predicting.
pub(crate) const PREDICT_ROWS: usize = 4096;

/// A deep GP trained with the nested variational compression bound of Hensman & Lawrence
/// (2014). See the crate docs for the model and an example.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NestedModel {
    pub(crate) config: NestedConfig,
    pub(crate) layers: Vec<NestedLayer>,
    pub(crate) params: ParamStore,
    pub(crate) input_dim: usize,
    pub(crate) output_dim: usize,
}

impl NestedModel {
    /// Builds a model for `data` (already in model units: standardise first), initialised
    /// as follows (the paper gives no values; all ours):
    /// Z_1 by k-means on X, Z_i (i > 1) by k-means on the propagated means of q(h_{i−1});
    /// kernel lengthscales and variance from the config (1, 1); hidden layers with
    /// m_i = Z_i W_i (W the identity / PCA projection of the layer's inputs, so each hidden
    /// layer starts near a linear map) and S_i = `hidden_q_scale`²·K_i — or, with
    /// [`NestedConfig::linear_mean`], the fixed mean function h W_i and m_i = 0, so the
    /// layer starts as exactly that map; the last layer with
    /// m = 0 and S = K_ℓ (the prior); noise variances from the config (0.01).
    ///
    /// # Errors
    /// Invalid configuration (checked once into the [`Checked`] that
    /// [`NestedModel::from_checked`] takes); as [`NestedModel::from_checked`].
    pub fn new(config: NestedConfig, data: &Dataset) -> Result<Self> {
        Self::from_checked(Checked::new(config)?, data)
    }

    /// [`NestedModel::new`] from a configuration already validated ([`Checked`]); it is
    /// not validated again.
    ///
    /// # Errors
    /// A Kuu that is not positive definite after jitter. (A [`Dataset`] is never empty
    /// and holds only finite values.)
    pub fn from_checked(config: Checked<NestedConfig>, data: &Dataset) -> Result<Self> {
        let config = config.into_inner();
        let x = data.x();
        // A Dataset is never empty and has only finite entries (Dataset::new checks).
        let (d_in, p) = (data.input_dim(), data.output_dim());
        let widths = config.widths(d_in, p);
        let mut rng = seeded(config.init_seed);
        let mut params = ParamStore::new();
        let mut layers: Vec<NestedLayer> = Vec::with_capacity(config.layers);
        let mut run_mean = x.to_owned();
        let mut run_var: Option<Mat<f64>> = None;
        for plan in layer_plans(&widths) {
            let layer = init_layer(&mut params, &config, &plan, run_mean.as_ref(), &mut rng)?;
            if !plan.last {
                let (mn, vr) = layer_moments(
                    &layer,
                    &params,
                    run_mean.as_ref(),
                    run_var.as_ref().map(|v| v.as_ref()),
                    &config,
                )?;
                run_mean = mn;
                run_var = Some(vr);
            }
            layers.push(layer);
        }
        Ok(NestedModel {
            config,
            layers,
            params,
            input_dim: d_in,
            output_dim: p,
        })
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &NestedConfig {
        &self.config
    }

    /// Changes what [`Model::predict`] returns.
    pub fn set_predict_mode(&mut self, mode: PredictMode) {
        self.config.predict = mode;
    }

    /// Changes the optimiser of [`Model::fit`].
    pub fn set_optimiser(&mut self, optimiser: Optimiser) {
        self.config.optimiser = optimiser;
    }

    /// The layers, first to last.
    pub fn layers(&self) -> &[NestedLayer] {
        &self.layers
    }

    /// Noise variances σ_1², …, σ_ℓ² (the last is the likelihood variance).
    pub fn noise_variances(&self) -> Vec<f64> {
        self.layers
            .iter()
            .map(|l| positive(self.params.get(l.noise)[(0, 0)], NOISE_FLOOR))
            .collect()
    }

    /// Kernel hyperparameters of layer `l` (positive values).
    pub fn kernel_hyper(&self, l: usize) -> KernelHyper {
        let layer = &self.layers[l];
        let ls = self.params.get(layer.lengthscales);
        KernelHyper {
            lengthscales: Mat::from_fn(ls.nrows(), ls.ncols(), |i, j| {
                positive(ls[(i, j)], HYPER_FLOOR)
            }),
            variance: layer
                .variance
                .map_or(1.0, |id| positive(self.params.get(id)[(0, 0)], HYPER_FLOOR)),
        }
    }

    /// Full-batch L-BFGS on the bound (paper §5.2–5.3; the core's [`FullBatchLbfgs`], which
    /// backs off from trial points where the bound cannot be evaluated), after
    /// [`NestedModel::set_optimal_last_q`] and `lbfgs_warmup` full-batch Adam steps (then the
    /// optimal last-layer q again).
    fn fit_lbfgs(
        &mut self,
        data: &Dataset,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        if data.n() == 0 {
            return Err(Error::Empty("training data has no rows".into()));
        }
        let start = Instant::now();
        self.set_optimal_last_q(data)?;
        let warmup = self.config.lbfgs_warmup;
        let mut history = Vec::new();
        if warmup > 0 {
            let wcfg = FitConfig {
                steps: warmup,
                batch_size: 0,
                ..cfg.clone()
            };
            history = self.fit_adam(data, &wcfg, hooks)?.history;
            self.set_optimal_last_q(data)?;
        }
        let lcfg = LbfgsConfig {
            max_iters: cfg.steps as u64,
            ..self.config.lbfgs.clone()
        };
        let mut report = FullBatchLbfgs::new(lcfg, cfg.seed)
            .offset(warmup)
            .run(self, data, hooks)?;
        history.append(&mut report.history);
        report.history = history;
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Adam over minibatches on the core's [`Executor`].
    fn fit_adam(
        &mut self,
        data: &Dataset,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        let warmup = AdamConfig {
            schedule: LrSchedule::Constant,
            ..self.config.adam.clone()
        };
        Executor::new(AdamStepper::new(warmup), cfg)
            .observe(&mut CallerHooks::new(hooks))
            .run(self, data)
    }
}

impl Model for NestedModel {
    fn backend(&self) -> &'static str {
        "nested"
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }

    fn noise_variance(&self) -> Option<f64> {
        self.noise_variances().last().copied()
    }

    /// Adam over minibatches ([`Optimiser::Adam`] with [`NestedConfig::adam`], the shared
    /// loop, honouring `cfg.early_stopping` through
    /// [`dgp_traits::train::fit_with_held_out`]) or full-batch L-BFGS
    /// ([`Optimiser::Lbfgs`], at most `cfg.steps` iterations; no early stopping).
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        match self.config.optimiser {
            // With `cfg.early_stopping == None` this is the plain executor run.
            Optimiser::Adam => dgp_traits::train::fit_with_held_out(
                self,
                data,
                cfg,
                AdamStepper::new(self.config.adam.clone()),
                hooks,
            ),
            Optimiser::Lbfgs if cfg.early_stopping.is_some() => Err(Error::config(
                "early_stopping",
                "needs optimiser adam (L-BFGS runs full batch with no held-out rule)",
            )),
            Optimiser::Lbfgs => {
                let data = require_in_memory(data, "nested with L-BFGS", "full-batch training")?;
                self.fit_lbfgs(data, cfg, hooks)
            }
        }
    }

    /// Per test point one Gaussian ([`PredictMode::Propagated`],
    /// [`PredictMode::MomentMatched`]) or an equal-weight mixture of `cfg.samples`
    /// Gaussians ([`PredictMode::Sampled`]; chunk k of the test points uses noise stream k
    /// of `cfg.seed`, so the result does not depend on the number of threads). Variances
    /// include the likelihood variance σ_ℓ².
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        check_inputs("nested", x, self.input_dim)?;
        let sampled = self.config.predict == PredictMode::Sampled && self.layers.len() > 1;
        let samples = if sampled { cfg.samples.max(1) } else { 1 };
        let chunk = (PREDICT_ROWS / samples).max(1);
        let moments = predict_chunked(x.nrows(), chunk, cfg.seed, |tape, s, len, rng| {
            let xs = x.subrows(s, len);
            if sampled {
                self.predict_sampled_chunk(tape, xs, samples, rng)
            } else {
                self.predict_gaussian_chunk(tape, xs)
            }
        })?;
        Predictive::equal_weights(moments.means, moments.vars)
    }

    fn to_json(&self) -> Result<String> {
        model_json::to_json(self)
    }

    fn function_samples(
        &self,
        _x: MatRef<'_, f64>,
        _count: usize,
        _seed: u64,
    ) -> Result<Option<Mat<f64>>> {
        Ok(None)
    }

    fn describe(&self) -> String {
        let widths = self.config.widths(self.input_dim, self.output_dim);
        let extra = format!(
            "{:?} {:?}{}",
            self.config.kernel,
            self.config.optimiser,
            if self.config.linear_mean {
                " linear-mean"
            } else {
                ""
            },
        );
        describe_stack("nested", &widths, self.config.num_inducing, &extra)
    }
}

impl NestedModel {
    /// Restores a model written by [`Model::to_json`].
    ///
    /// # Errors
    /// [`Error::Serde`] for malformed JSON; [`Error::Config`] for a configuration outside
    /// its ranges (an edited model file).
    pub fn from_json(s: &str) -> Result<Self> {
        model_json::from_json_checked(
            s,
            |m: &NestedModel| Checked::new(m.config.clone()),
            |m, config| {
                let n = m.config.num_inducing.saturating_mul(2);
                NestedModel::from_checked(
                    config,
                    &model_json::synthetic_data(m.input_dim, m.output_dim, n)?,
                )
            },
            &[],
        )
    }
}
