//! The deep sigma point process: construction, the lined-up propagation of sigma points
//! (Jankowiak et al. 2020, §3, propagated as GPyTorch's `DSPPLayer` does), the objective of eq. (21) and the finite-mixture
//! predictive.

use crate::blocks::{DsppLayer, ZStart, new_blocks};
use crate::config::{DsppConfig, LaterZInit};
use crate::quadrature::QuadRule;
use dgp_core::rng::{Rng, seeded, standard_normal};
use dgp_core::transforms::{inv_softplus, softplus};
use dgp_core::{Error, Result};
use dgp_data::Dataset;
use dgp_traits::backend::Checked;
use dgp_traits::optim::{AdamConfig, LrSchedule};
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::skeleton::model_json;
use dgp_traits::skeleton::stack::{InitRun, LayerPlan, MeanData, StackMean, layer_plans};
use dgp_traits::train::FitSummary;
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// Added to a hidden GP's marginal variance before the square root of the site formula
/// `g = μ + ξσ`, so the gradient stays finite where σ² → 0 (e.g. at inducing inputs).
pub const SITE_VAR_JITTER: f64 = 1e-10;
/// Largest number of rows (points × components) pushed through the layers at once when
/// predicting.
pub(crate) const PREDICT_ROWS: usize = 50_000;
/// Largest number of test points per prediction chunk (chunks run in parallel; the
/// chunking does not depend on the number of threads).
pub(crate) const PREDICT_POINTS: usize = 1024;
pub use dgp_traits::model::GRAD_CHUNK_ROWS;

/// A deep sigma point process (Jankowiak, Pleiss & Gardner 2020).
///
/// The predictive at x is the finite mixture `Σ_k ω_k N(y | μ_k(x), σ²_k(x) + σ²_obs)` whose
/// components push the first layer's marginals through the later layers at the learned
/// quadrature sites of every hidden GP (eqs. 17–23); it is trained on the regularised
/// predictive log-likelihood of eq. (21). See the crate docs for an example.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DsppModel {
    pub(crate) config: DsppConfig,
    pub(crate) layers: Vec<DsppLayer>,
    pub(crate) rule: Option<QuadRule>,
    pub(crate) logits: Option<ParamId>,
    pub(crate) noise: Option<ParamId>,
    pub(crate) mixing: Option<ParamId>,
    pub(crate) params: ParamStore,
    pub(crate) input_dim: usize,
    pub(crate) output_dim: usize,
    #[serde(default)]
    pub(crate) fit_summary: Option<FitSummary>,
    /// Factor applied to every component variance of the predictive (1 unless
    /// [`DsppConfig::calibrate_variance`] fitted it on held-out rows).
    #[serde(default = "unit_scale")]
    pub(crate) variance_scale: f64,
    /// Steps of the last fit's refit on every row ([`DsppConfig::refit_all_rows`]); 0
    /// when it did not refit.
    #[serde(default)]
    pub(crate) refit_steps: usize,
    /// How the backend chose this model on validation rows ([`crate::Selection::describe`]),
    /// if it did; appended to the model's description.
    #[serde(default)]
    pub(crate) selection: Option<String>,
}

fn unit_scale() -> f64 {
    1.0
}

fn identity(n: usize) -> Mat<f64> {
    Mat::from_fn(n, n, |i, j| if i == j { 1.0 } else { 0.0 })
}

/// The free site block of layer `plan` (l ≥ 2) per the configured initialisation, and the
/// shared quadrature logits (registered with the first such layer).
fn layer_sites(
    params: &mut ParamStore,
    rule: &QuadRule,
    config: &DsppConfig,
    plan: &LayerPlan,
    logits: &mut Option<ParamId>,
    rng: &mut Rng,
) -> Result<Option<ParamId>> {
    let (free, lg) = rule.init(config.init, rng)?;
    if logits.is_none() {
        *logits = Some(params.add("quadrature.logits", lg, Role::Optimised)?);
    }
    if rule.free_rows() > 0 {
        Ok(Some(params.add(
            format!("{}.sites", plan.name),
            free,
            Role::Optimised,
        )?))
    } else {
        Ok(None)
    }
}

/// The output side's parameters: the Gaussian noise variances (one per output) and the
/// LMC mixing matrix (identity when W' = P, else N(0, 1/W') draws from `rng`).
fn output_params(
    params: &mut ParamStore,
    config: &DsppConfig,
    p: usize,
    rng: &mut Rng,
) -> Result<(Option<ParamId>, Option<ParamId>)> {
    let noise = match config.likelihood.init_noise_variance() {
        Some(v) => Some(params.add(
            "likelihood.variance",
            Mat::from_fn(1, p, |_, _| inv_softplus(v - config.noise_floor)),
            Role::Optimised,
        )?),
        None => None,
    };
    let mixing = match config.lmc_latent {
        Some(wl) => {
            let a = if wl == p {
                identity(p)
            } else {
                let g = standard_normal(rng, wl, p);
                Mat::from_fn(wl, p, |i, j| g[(i, j)] / (wl as f64).sqrt())
            };
            Some(params.add("lmc.mixing", a, Role::Optimised)?)
        }
        None => None,
    };
    Ok((noise, mixing))
}

impl DsppModel {
    /// Builds a model for training data `data` (inputs N×D, targets N×P, model units),
    /// initialised as GPyTorch's DSPP example describes: first-layer Z by k-means (plus
    /// 0.01·N(0, 1) per independent GP), later Z per [`DsppConfig::later_z_init`], learned
    /// linear means (hidden, started per [`DsppConfig::hidden_mean_init`]) and constant
    /// means (last), q(v) = N(N(0, 1e-6) draws, I), sites and weights per
    /// [`DsppConfig::init`]. [`DsppConfig::gpytorch_reference`] gives the GPyTorch
    /// example's start exactly. M = min(`num_inducing`, N) inducing points per layer
    /// (every row one inducing input when N ≤ `num_inducing`; the model's configuration
    /// holds the M used).
    ///
    /// # Errors
    /// [`Error::Config`] for an invalid configuration (checked once into the [`Checked`]
    /// that [`DsppModel::from_checked`] takes); as [`DsppModel::from_checked`].
    pub fn new(config: DsppConfig, data: &Dataset) -> Result<Self> {
        Self::from_checked(Checked::new(config)?, data)
    }

    /// [`DsppModel::new`] from a configuration already validated ([`Checked`]); it is not
    /// validated again.
    ///
    /// # Errors
    /// [`Error::Config`] for labels the likelihood rejects or a setting the likelihood
    /// does not allow. (A [`Dataset`] is never empty and holds only finite values.)
    pub fn from_checked(config: Checked<DsppConfig>, data: &Dataset) -> Result<Self> {
        let mut config = config.into_inner();
        let x = data.x();
        // A Dataset is never empty and has only finite entries (Dataset::new checks).
        let (d_in, p) = (data.input_dim(), data.output_dim());
        config.likelihood.check_training_targets(data.y())?;
        if !config.likelihood.has_noise_variance() && config.lmc_latent.is_some() {
            return Err(Error::config(
                "likelihood",
                "LMC needs the Gaussian likelihood",
            ));
        }
        let widths = config.widths(d_in, p);
        let n_layers = config.layers;
        let mut rng = seeded(config.init_seed);
        let mut run = InitRun::kmeans_at_most_rows(
            x,
            config.num_inducing,
            config.kmeans_iters,
            false,
            &mut rng,
        )?;
        let m = run.z.nrows();
        config.num_inducing = m;
        let z1 = run.z.clone();
        let mut params = ParamStore::new();
        let rule = if n_layers > 1 {
            Some(QuadRule::new(
                config.rule,
                config.sites,
                config.hidden_width,
            )?)
        } else {
            None
        };
        let hidden = StackMean::Linear {
            init: config.hidden_mean_init.clone(),
            learned: true,
            bias: true,
        };
        let mut layers = Vec::with_capacity(n_layers);
        let mut logits = None;
        let train_z = config.trains_inducing(data.n());
        for plan in layer_plans(&widths) {
            let (l, din, dout) = (plan.index, plan.input_dim, plan.output_dim);
            // Mean parameters of the whole layer, split per block below.
            let (_, mean_init) =
                run.layer_mean(&plan, &hidden, &StackMean::Constant, MeanData::Z, &mut rng)?;
            let z_base = if l == 0 {
                z1.clone()
            } else {
                match config.later_z_init {
                    LaterZInit::Random => standard_normal(&mut rng, m, din),
                    LaterZInit::Propagated => run.z.clone(),
                }
            };
            let spec = if plan.last {
                &StackMean::Constant
            } else {
                &hidden
            };
            let blocks = new_blocks(
                &mut params,
                &config,
                &plan,
                spec,
                &mean_init,
                ZStart {
                    base: &z_base,
                    train: train_z,
                },
                &mut rng,
            )?;
            let sites = match &rule {
                Some(r) if l > 0 => {
                    layer_sites(&mut params, r, &config, &plan, &mut logits, &mut rng)?
                }
                _ => None,
            };
            layers.push(DsppLayer {
                input_dim: din,
                output_dim: dout,
                blocks,
                sites,
            });
            if let Some(w) = &mean_init.weights {
                let b = mean_init
                    .bias
                    .clone()
                    .unwrap_or_else(|| Mat::zeros(1, dout));
                run.push(w, Some(&b));
            }
        }
        let (noise, mixing) = output_params(&mut params, &config, p, &mut rng)?;
        Ok(DsppModel {
            config,
            layers,
            rule,
            logits,
            noise,
            mixing,
            params,
            input_dim: d_in,
            output_dim: p,
            fit_summary: None,
            variance_scale: 1.0,
            refit_steps: 0,
            selection: None,
        })
    }

    /// What the last [`Model::fit`](dgp_traits::model::Model::fit) did (steps, the step early stopping kept), if it ran.
    pub fn fit_summary(&self) -> Option<&FitSummary> {
        self.fit_summary.as_ref()
    }

    /// The factor applied to every component variance of the predictive: 1, or the
    /// held-out calibration of [`DsppConfig::calibrate_variance`].
    pub fn variance_scale(&self) -> f64 {
        self.variance_scale
    }

    /// Whether the predictive's variances can be calibrated: one Gaussian output per latent
    /// GP (no LMC; not the probit likelihood).
    pub(crate) fn calibratable(&self) -> bool {
        self.config.likelihood.has_noise_variance() && self.mixing.is_none()
    }

    pub(crate) fn set_fit_summary(&mut self, s: FitSummary) {
        self.fit_summary = Some(s);
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &DsppConfig {
        &self.config
    }

    /// Whether training moves the inducing inputs Z (decided at construction by
    /// [`DsppConfig::trains_inducing`] from the training set's size).
    pub fn trains_inducing(&self) -> bool {
        self.layers
            .first()
            .and_then(|l| l.blocks.first())
            .is_some_and(|b| self.params.role(b.layer.z) == Role::Optimised)
    }

    /// The layers, first to last.
    pub fn layers(&self) -> &[DsppLayer] {
        &self.layers
    }

    /// The quadrature rule (`None` for L = 1).
    pub fn rule(&self) -> Option<&QuadRule> {
        self.rule.as_ref()
    }

    /// Number of mixture components K of the predictive.
    pub fn num_components(&self) -> usize {
        self.rule.as_ref().map_or(1, |r| r.components)
    }

    /// The Gaussian noise variances σ²_obs (one per output), if the likelihood has them.
    pub fn noise_variance(&self) -> Option<Vec<f64>> {
        self.noise.map(|id| {
            let raw = self.params.get(id);
            (0..raw.ncols())
                .map(|j| softplus(raw[(0, j)]) + self.config.noise_floor)
                .collect()
        })
    }

    /// The quadrature weights ω (K, on the simplex): `softmax` of the logits.
    pub fn weights(&self) -> Vec<f64> {
        match self.logits {
            None => vec![1.0],
            Some(id) => {
                let l = self.params.get(id);
                let mx = (0..l.nrows())
                    .map(|k| l[(k, 0)])
                    .fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = (0..l.nrows()).map(|k| (l[(k, 0)] - mx).exp()).collect();
                let s: f64 = e.iter().sum();
                e.into_iter().map(|v| v / s).collect()
            }
        }
    }

    /// The full S×W site matrix Ξ^{(l)} of layer `l` (0-based, l ≥ 1), or `None` for the
    /// first layer and L = 1.
    pub fn sites(&self, l: usize) -> Option<Mat<f64>> {
        let rule = self.rule.as_ref()?;
        if l == 0 || l >= self.layers.len() {
            return None;
        }
        Some(rule.full_values(self.layers[l].sites.map(|id| self.params.get(id))))
    }

    /// The LMC mixing matrix A (W'×P), if the model has one.
    pub fn mixing(&self) -> Option<MatRef<'_, f64>> {
        self.mixing.map(|id| self.params.get(id))
    }

    /// Restores a model written by [`Model::to_json`](dgp_traits::model::Model::to_json).
    ///
    /// # Errors
    /// [`Error::Serde`] for malformed JSON; [`Error::Config`] for a configuration outside
    /// its ranges (an edited model file).
    pub fn from_json(s: &str) -> Result<Self> {
        model_json::from_json_checked(
            s,
            |m: &DsppModel| Checked::new(m.config.clone()),
            |m, config| {
                // The skeleton's rows must lead to the saved model's choice of training Z
                // (`DsppConfig::trains_inducing` decides it from the row count): at least
                // `train_inducing_min_ratio · M` rows when it trained Z, fewer otherwise
                // (never fewer than M: a trained model had at least M rows).
                let m_z = m.config.num_inducing;
                let threshold = (m.config.train_inducing_min_ratio * m_z as f64).ceil() as usize;
                let n = if m.trains_inducing() {
                    m_z.saturating_mul(2).max(threshold)
                } else {
                    m_z.saturating_mul(2)
                        .min(threshold.saturating_sub(1))
                        .max(m_z)
                };
                DsppModel::from_checked(
                    config,
                    &model_json::synthetic_data_for(
                        &m.config.likelihood,
                        m.input_dim,
                        m.output_dim,
                        n,
                    )?,
                )
            },
            &["fit_summary", "refit_steps", "selection"],
        )
    }

    /// The Adam settings of the training loop for `steps` steps at base rate `lr`.
    pub(crate) fn adam_config(&self, lr: f64, steps: usize) -> AdamConfig {
        let milestones: Vec<u64> = self
            .config
            .lr_drops
            .milestones
            .iter()
            .map(|f| (f * steps as f64).round() as u64)
            .collect();
        AdamConfig {
            lr,
            schedule: if milestones.is_empty() {
                LrSchedule::Constant
            } else {
                LrSchedule::StepDrops {
                    milestones,
                    factor: self.config.lr_drops.factor,
                }
            },
            ..AdamConfig::default()
        }
    }
}
