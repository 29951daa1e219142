//! The deep sigma point process: construction, the lined-up propagation of sigma points
//! (`shared/specs/dspp.md` §3), the objective of eq. (21) and the finite-mixture
//! predictive.

use crate::config::{DsppConfig, LaterZInit, QCov};
use crate::lmc::LmcTape;
use crate::quadrature::QuadRule;
use dgp_traits::data::{Dataset, kmeans};
use dgp_traits::error::{Error, Result};
use dgp_traits::kernels::Kernel;
use dgp_traits::layer::{QSqrt, QVars, SparseLayer, SparseLayerInit, kl_divergence, marginals};
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::mean::{MeanFunction, MeanParams};
use dgp_traits::model::{
    Batch, FitConfig, FitObserver, FitReport, Layer, Model, Objective, PredictConfig,
};
use dgp_traits::optim::{AdamConfig, LrSchedule};
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::predictive::Predictive;
use dgp_traits::rng::{Rng, seeded, standard_normal};
use dgp_traits::tape::{Tape, Var};
use dgp_traits::train::FitSummary;
use dgp_traits::transforms::{inv_softplus, softplus};
use faer::{Mat, MatRef};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Lower bound of q(v)'s standard deviations (diagonal) and of the diagonal of its Cholesky
/// factors (full), after the softplus transform.
pub const Q_SD_FLOOR: f64 = 1e-8;
/// Added to a hidden GP's marginal variance before the square root of the site formula
/// `g = μ + ξσ`, so the gradient stays finite where σ² → 0 (e.g. at inducing inputs).
pub const SITE_VAR_JITTER: f64 = 1e-10;
/// Standard deviation of the initial q(v) means (GPyTorch `MeanFieldVariationalDistribution`).
pub const Q_MEAN_INIT_SD: f64 = 1e-3;
/// Standard deviation of the noise added to the shared k-means centres of independent
/// first-layer GPs (GPyTorch notebook).
pub const Z_NOISE_SD: f64 = 0.01;
/// Largest number of rows (points × components) pushed through the layers at once when
/// predicting.
const PREDICT_ROWS: usize = 50_000;
/// Largest number of test points per prediction chunk (chunks run in parallel; the
/// chunking does not depend on the number of threads).
const PREDICT_POINTS: usize = 1024;
/// Minibatches larger than this are split into chunks of at most this many points whose
/// gradients are computed on separate tapes in parallel and summed in a fixed order
/// ([`Objective::value_and_grad`] of [`Dspp`]); the chunking does not depend on the number
/// of threads, so results do not either.
pub const GRAD_CHUNK_ROWS: usize = 512;

/// Parameter blocks of q(v) for one block of GPs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum QSqrtParams {
    /// Unconstrained standard deviations, M×D (softplus + [`Q_SD_FLOOR`]).
    Diag(ParamId),
    /// Unconstrained Cholesky factors, one M×M block per output.
    Full(Vec<ParamId>),
}

/// A group of GPs that share kernel, inducing inputs and mean function (one GP when the
/// configuration asks for independent GPs), with its q(v).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpBlock {
    /// The prior side (kernel, mean, Z).
    pub layer: SparseLayer,
    /// Whitened q(v) means, M×D.
    pub q_mean: ParamId,
    /// q(v) covariance factors.
    pub q_sqrt: QSqrtParams,
}

/// One layer of the DSPP: its GP blocks (outputs concatenated in order) and, for layers
/// l ≥ 2, the free block of its quadrature sites.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DsppLayer {
    /// Width of the layer's input.
    pub input_dim: usize,
    /// Number of GPs in the layer.
    pub output_dim: usize,
    /// The GP blocks.
    pub blocks: Vec<GpBlock>,
    /// Free site parameters (S×W_{l−1}, QR2: ⌊S/2⌋×W_{l−1}); `None` for the first layer
    /// (deterministic inputs) and for QR2 with S = 1.
    pub sites: Option<ParamId>,
}

/// A deep sigma point process (Jankowiak, Pleiss & Gardner 2020).
///
/// The predictive at x is the finite mixture `Σ_k ω_k N(y | μ_k(x), σ²_k(x) + σ²_obs)` whose
/// components push the first layer's marginals through the later layers at the learned
/// quadrature sites of every hidden GP (eqs. 17–23); it is trained on the regularised
/// predictive log-likelihood of eq. (21). See the crate docs for an example.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Dspp {
    config: DsppConfig,
    layers: Vec<DsppLayer>,
    rule: Option<QuadRule>,
    logits: Option<ParamId>,
    noise: Option<ParamId>,
    mixing: Option<ParamId>,
    params: ParamStore,
    input_dim: usize,
    output_dim: usize,
    #[serde(default)]
    fit_summary: Option<FitSummary>,
}

/// Per latent output, the n×K matrices of component means and of latent variances.
type ComponentMoments = (Vec<Mat<f64>>, Vec<Mat<f64>>);

/// What the propagation of a batch yields (all on the tape).
struct Propagated {
    /// Last-layer latent means, (K·B)×W_L, rows component-major (row `k·B + i`).
    mean: Var,
    /// Last-layer latent variances, same layout.
    var: Var,
    /// Number of components K in the rows (1 for L = 1).
    reps: usize,
    /// Per block: chol(Kuu) and q(v), for the KL terms.
    kl_parts: Vec<(Var, QVars)>,
}

fn identity(n: usize) -> Mat<f64> {
    Mat::from_fn(n, n, |i, j| if i == j { 1.0 } else { 0.0 })
}

impl Dspp {
    /// Builds a model for training data `data` (inputs N×D, targets N×P, model units),
    /// initialised as `shared/specs/dspp.md` §6 describes: first-layer Z by k-means (plus
    /// 0.01·N(0, 1) per independent GP), later Z per [`DsppConfig::later_z_init`], learned
    /// linear means (hidden, started per [`DsppConfig::hidden_mean_init`]) and constant
    /// means (last), q(v) = N(N(0, 1e-6) draws, I), sites and weights per
    /// [`DsppConfig::init`]. [`DsppConfig::gpytorch_reference`] gives the GPyTorch
    /// example's start exactly.
    ///
    /// # Errors
    /// [`Error::Config`] for an invalid configuration or labels the likelihood rejects. (A
    /// [`Dataset`] is never empty and holds only finite values.)
    pub fn new(config: DsppConfig, data: &Dataset) -> Result<Self> {
        config.validate()?;
        let x = data.x();
        // A Dataset is never empty and has only finite entries (Dataset::new checks).
        let (d_in, p) = (data.input_dim(), data.output_dim());
        config.likelihood.check_targets(data.y())?;
        if !config.likelihood.has_noise_variance() && config.lmc_latent.is_some() {
            return Err(Error::Config(
                "dspp: LMC needs the Gaussian likelihood".into(),
            ));
        }
        let widths = config.widths(d_in, p);
        let m = config.num_inducing;
        let n_layers = config.layers;
        let mut rng = seeded(config.init_seed);
        let z1 = kmeans(x, m, config.kmeans_iters, &mut rng)?;
        let mut z_run = z1.clone();
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
        let mut layers = Vec::with_capacity(n_layers);
        let mut logits = None;
        for l in 0..n_layers {
            let (din, dout) = (widths[l], widths[l + 1]);
            let last = l + 1 == n_layers;
            let lname = format!("layer{}", l + 1);
            // Mean parameters of the whole layer, split per block below.
            let layer_mean = if last {
                MeanFunction::constant(din, dout)
            } else {
                MeanFunction::linear(din, dout, config.hidden_mean_init.clone())
                    .learned()
                    .with_bias()
            };
            let mean_init = layer_mean.init_params(Some(z_run.as_ref()), &mut rng)?;
            let z_base = if l == 0 {
                z1.clone()
            } else {
                match config.later_z_init {
                    LaterZInit::Random => standard_normal(&mut rng, m, din),
                    LaterZInit::Propagated => z_run.clone(),
                }
            };
            let groups: Vec<(usize, usize)> = if config.independent_gps {
                (0..dout).map(|g| (g, 1)).collect()
            } else {
                vec![(0, dout)]
            };
            let mut blocks = Vec::with_capacity(groups.len());
            for &(start, width) in &groups {
                let bname = if groups.len() == 1 {
                    lname.clone()
                } else {
                    format!("{lname}.gp{start}")
                };
                let z = if groups.len() > 1 {
                    let noise = standard_normal(&mut rng, m, din);
                    Mat::from_fn(m, din, |i, j| z_base[(i, j)] + Z_NOISE_SD * noise[(i, j)])
                } else {
                    z_base.clone()
                };
                let mean = if last {
                    MeanFunction::constant(din, width)
                } else {
                    MeanFunction::linear(din, width, config.hidden_mean_init.clone())
                        .learned()
                        .with_bias()
                };
                let init = MeanParams {
                    weights: mean_init
                        .weights
                        .as_ref()
                        .map(|w| w.as_ref().subcols(start, width).to_owned()),
                    bias: mean_init
                        .bias
                        .as_ref()
                        .map(|b| b.as_ref().subcols(start, width).to_owned()),
                };
                let kernel = Kernel::new(config.kernel, din, config.ard)?;
                let layer = SparseLayer::new(
                    &mut params,
                    &bname,
                    kernel,
                    mean,
                    width,
                    0.0,
                    SparseLayerInit {
                        z,
                        lengthscale: config.init_lengthscale,
                        variance: config.init_variance,
                        train_variance: true,
                        train_z: true,
                        mean: init,
                    },
                )?;
                let qm0 = standard_normal(&mut rng, m, width);
                let q_mean = params.add(
                    format!("{bname}.q.mean"),
                    Mat::from_fn(m, width, |i, j| Q_MEAN_INIT_SD * qm0[(i, j)]),
                    Role::Optimised,
                )?;
                let raw_one = inv_softplus(1.0 - Q_SD_FLOOR);
                let q_sqrt = match config.q_cov {
                    QCov::Diag => QSqrtParams::Diag(params.add(
                        format!("{bname}.q.sd"),
                        Mat::from_fn(m, width, |_, _| raw_one),
                        Role::Optimised,
                    )?),
                    QCov::Full => QSqrtParams::Full(
                        (0..width)
                            .map(|d| {
                                params.add(
                                    format!("{bname}.q.sqrt{d}"),
                                    Mat::from_fn(m, m, |i, j| if i == j { raw_one } else { 0.0 }),
                                    Role::Optimised,
                                )
                            })
                            .collect::<Result<Vec<_>>>()?,
                    ),
                };
                blocks.push(GpBlock {
                    layer,
                    q_mean,
                    q_sqrt,
                });
            }
            let sites = match &rule {
                Some(r) if l > 0 => {
                    let (free, lg) = r.init(config.init, &mut rng)?;
                    if logits.is_none() {
                        logits = Some(params.add("quadrature.logits", lg, Role::Optimised)?);
                    }
                    if r.free_rows() > 0 {
                        Some(params.add(format!("{lname}.sites"), free, Role::Optimised)?)
                    } else {
                        None
                    }
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
                let zz = &z_run * w;
                z_run = Mat::from_fn(zz.nrows(), dout, |i, j| zz[(i, j)] + b[(0, j)]);
            }
        }
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
                    let g = standard_normal(&mut rng, wl, p);
                    Mat::from_fn(wl, p, |i, j| g[(i, j)] / (wl as f64).sqrt())
                };
                Some(params.add("lmc.mixing", a, Role::Optimised)?)
            }
            None => None,
        };
        Ok(Dspp {
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
        })
    }

    /// What the last [`Model::fit`] did (steps, early-stopping checkpoint), if it ran.
    pub fn fit_summary(&self) -> Option<&FitSummary> {
        self.fit_summary.as_ref()
    }

    pub(crate) fn set_fit_summary(&mut self, s: FitSummary) {
        self.fit_summary = Some(s);
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &DsppConfig {
        &self.config
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

    /// Records every parameter block as a constant (prediction needs no gradient).
    fn record_constants(&self, tape: &mut Tape) -> Vec<Var> {
        self.params
            .blocks()
            .iter()
            .map(|b| tape.constant(b.value.clone()))
            .collect()
    }

    fn q_vars(&self, tape: &mut Tape, params: &[Var], block: &GpBlock) -> QVars {
        let sqrt = match &block.q_sqrt {
            QSqrtParams::Diag(id) => QSqrt::Diag(tape.positive(id.var(params), Q_SD_FLOOR)),
            QSqrtParams::Full(ids) => QSqrt::Full(
                ids.iter()
                    .map(|id| tape.lower_cholesky_factor(id.var(params), Q_SD_FLOOR))
                    .collect(),
            ),
        };
        QVars {
            mean: block.q_mean.var(params),
            sqrt,
        }
    }

    /// Marginals (eqs. 7–8, whitened) of every GP of layer `l` at `input`, concatenated.
    fn layer_marginals(
        &self,
        tape: &mut Tape,
        params: &[Var],
        l: usize,
        input: Var,
        kl_parts: &mut Vec<(Var, QVars)>,
    ) -> Result<(Var, Var)> {
        let mut mus = Vec::with_capacity(self.layers[l].blocks.len());
        let mut vars = Vec::with_capacity(self.layers[l].blocks.len());
        for block in &self.layers[l].blocks {
            let proj = block.layer.project(tape, params, input)?;
            let q = self.q_vars(tape, params, block);
            let (mu, var) = marginals(tape, &proj, &q, true);
            kl_parts.push((proj.chol, q));
            mus.push(mu);
            vars.push(var);
        }
        if mus.len() == 1 {
            Ok((mus[0], vars[0]))
        } else {
            Ok((tape.concat_cols(&mus), tape.concat_cols(&vars)))
        }
    }

    /// The lined-up propagation of `shared/specs/dspp.md` §3: layer 1 at the B inputs,
    /// then for every layer l ≥ 2 the inputs `μ + Ξ^{(l)}_k ⊙ σ` of each component k
    /// (eqs. 22–23), σ the previous layer's latent standard deviation (no noise between
    /// layers). Layer 1 is evaluated once on B rows and its marginals are tiled K times.
    fn propagate(&self, tape: &mut Tape, params: &[Var], x: Var) -> Result<Propagated> {
        let b = tape.shape(x).0;
        let mut input = x;
        let mut reps = 1;
        let mut kl_parts = Vec::new();
        let last = self.layers.len() - 1;
        for l in 0..self.layers.len() {
            let (mu, var) = self.layer_marginals(tape, params, l, input, &mut kl_parts)?;
            if l == last {
                return Ok(Propagated {
                    mean: mu,
                    var,
                    reps,
                    kl_parts,
                });
            }
            let rule = self.rule.as_ref().expect("L ≥ 2 has a rule");
            let v = tape.clamp_min(var, 0.0);
            let v = tape.add_scalar(v, SITE_VAR_JITTER);
            let mut sd = tape.sqrt(v);
            let mut mu = mu;
            if l == 0 {
                reps = rule.components;
                if reps > 1 {
                    let idx: Vec<usize> = (0..reps).flat_map(|_| 0..b).collect();
                    mu = tape.gather_rows(mu, &idx);
                    sd = tape.gather_rows(sd, &idx);
                }
            }
            let free = self.layers[l + 1].sites.map(|id| id.var(params));
            let full = rule.record_full(tape, free);
            let xi = rule.record_tiled(tape, full, b);
            let shift = tape.mul(xi, sd);
            input = tape.add(mu, shift);
        }
        unreachable!("the loop returns at the last layer")
    }

    /// Per-row `log p(y_i | component k)` (R×1, rows `k·B + i`).
    fn component_log_lik(
        &self,
        tape: &mut Tape,
        params: &[Var],
        prop: &Propagated,
        y: MatRef<'_, f64>,
    ) -> Result<Var> {
        let b = y.nrows();
        let p = self.output_dim;
        let y_tiled = Mat::from_fn(b * prop.reps, p, |r, c| y[(r % b, c)]);
        let yv = tape.constant(y_tiled);
        let noise = self
            .noise
            .map(|id| tape.positive(id.var(params), self.config.noise_floor));
        if let Some(a) = self.mixing {
            let a = a.var(params);
            let noise = noise.expect("LMC is Gaussian");
            return tape
                .lmc_log_density(yv, prop.mean, prop.var, a, noise)
                .map_err(|e| {
                    Error::Numerical(format!("LMC covariance of row {} is not PD", e.row))
                });
        }
        let lp = self
            .config
            .likelihood
            .log_predictive(tape, yv, prop.mean, prop.var, noise)?;
        Ok(if p > 1 { tape.row_sums(lp) } else { lp })
    }

    /// Per-point log predictive densities of eq. (21) on the tape (B×1):
    /// `logsumexp_k(log ω_k + log p(y_i | component k))`.
    fn record_log_mixture(
        &self,
        tape: &mut Tape,
        params: &[Var],
        x: MatRef<'_, f64>,
        y: MatRef<'_, f64>,
    ) -> Result<(Var, Propagated)> {
        let xv = tape.constant(x.to_owned());
        let prop = self.propagate(tape, params, xv)?;
        let lp = self.component_log_lik(tape, params, &prop, y)?;
        let per_point = match self.logits {
            Some(id) if prop.reps > 1 => {
                let b = x.nrows();
                let m = tape.reshape_col_major(lp, b, prop.reps);
                let logw = tape.log_softmax(id.var(params));
                let logw = tape.transpose(logw);
                let m = tape.add_row(m, logw);
                tape.logsumexp_rows(m)
            }
            Some(id) => {
                // K = 1: log ω = 0, kept on the tape so the logit gets its (zero) gradient.
                let logw = tape.log_softmax(id.var(params));
                tape.add_scalar_var(lp, logw)
            }
            None => lp,
        };
        Ok((per_point, prop))
    }

    /// Exact per-point log predictive density log p(y_i | x_i) of the model (the log of the
    /// K-component mixture; for the LMC the joint density of all outputs, whose components
    /// couple outputs — [`Predictive`] only holds their marginals).
    ///
    /// # Errors
    /// Shape errors for `x`/`y`, numerical failures.
    pub fn log_density(&self, x: MatRef<'_, f64>, y: MatRef<'_, f64>) -> Result<Vec<f64>> {
        self.check_xy(x, y)?;
        let mut tape = Tape::new();
        let params = self.record_constants(&mut tape);
        let (pp, _) = self.record_log_mixture(&mut tape, &params, x, y)?;
        let v = tape.value(pp);
        Ok((0..v.nrows()).map(|i| v[(i, 0)]).collect())
    }

    fn check_xy(&self, x: MatRef<'_, f64>, y: MatRef<'_, f64>) -> Result<()> {
        if x.ncols() != self.input_dim || y.ncols() != self.output_dim || x.nrows() != y.nrows() {
            return Err(Error::shape(
                "dspp inputs and targets",
                format!("N×{} and N×{}", self.input_dim, self.output_dim),
                format!(
                    "{}×{} and {}×{}",
                    x.nrows(),
                    x.ncols(),
                    y.nrows(),
                    y.ncols()
                ),
            ));
        }
        if x.nrows() == 0 {
            return Err(Error::Empty("dspp: no points".into()));
        }
        dgp_traits::error::check_finite("dspp inputs", x)?;
        self.config.likelihood.check_targets(y)
    }

    /// Component means and variances (latent, no noise) for one chunk of test inputs:
    /// per latent output an n×K matrix.
    fn predict_chunk(&self, x: MatRef<'_, f64>) -> Result<ComponentMoments> {
        let mut tape = Tape::new();
        let params = self.record_constants(&mut tape);
        let xv = tape.constant(x.to_owned());
        let prop = self.propagate(&mut tape, &params, xv)?;
        let (b, reps) = (x.nrows(), prop.reps);
        let (mu, var) = (tape.value(prop.mean), tape.value(prop.var));
        let wl = mu.ncols();
        let mut means = vec![Mat::zeros(b, reps); wl];
        let mut vars = vec![Mat::zeros(b, reps); wl];
        for k in 0..wl {
            for s in 0..reps {
                for i in 0..b {
                    means[k][(i, s)] = mu[(s * b + i, k)];
                    vars[k][(i, s)] = var[(s * b + i, k)].max(0.0);
                }
            }
        }
        Ok((means, vars))
    }

    /// Restores a model written by [`Model::to_json`].
    ///
    /// # Errors
    /// [`Error::Serde`] for malformed JSON; [`Error::Config`] for a configuration outside
    /// its ranges (an edited checkpoint).
    pub fn from_json(s: &str) -> Result<Self> {
        let m: Dspp = serde_json::from_str(s).map_err(|e| Error::Serde(e.to_string()))?;
        m.config.validate()?;
        Ok(m)
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

    /// Mean log predictive density of `data` (the training NLL's negative), chunked.
    pub fn mean_log_density(&self, data: &Dataset) -> Result<f64> {
        let chunk = (PREDICT_ROWS / self.num_components()).clamp(1, PREDICT_POINTS);
        let starts: Vec<usize> = (0..data.n()).step_by(chunk).collect();
        let parts: Vec<Result<f64>> = starts
            .par_iter()
            .map(|&s| {
                let len = chunk.min(data.n() - s);
                let lp = self.log_density(data.x().subrows(s, len), data.y().subrows(s, len))?;
                Ok(lp.iter().sum::<f64>())
            })
            .collect();
        let mut total = 0.0;
        for p in parts {
            total += p?;
        }
        Ok(total / data.n() as f64)
    }
}

impl Objective for Dspp {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The per-datum objective of eq. (21) on a minibatch (`shared/specs/dspp.md` §4):
    /// `(1/|B|) Σ_{i∈B} log Σ_k ω_k p(y_i | component k) − β Σ_GPs KL(q(v) ‖ p(v)) / N`.
    /// Deterministic: `rng` is not used ("singly stochastic").
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        _rng: &mut Rng,
    ) -> Result<Var> {
        self.check_xy(batch.x, batch.y)?;
        self.record_part(tape, params, batch, batch.len(), true)
    }

    /// Value and gradient of [`Objective::record`]. Minibatches of more than
    /// [`GRAD_CHUNK_ROWS`] points are split into `⌈B / GRAD_CHUNK_ROWS⌉` nearly equal chunks
    /// of consecutive rows, each recorded on its own tape in parallel (the data term of a
    /// chunk is its share of the batch mean; the KL is recorded once, with the first chunk);
    /// values and gradients are summed in chunk order. `tape` is used for unchunked batches.
    fn value_and_grad(
        &self,
        tape: &mut Tape,
        batch: &Batch<'_>,
        _rng: &mut Rng,
    ) -> Result<(f64, Vec<f64>)> {
        self.check_xy(batch.x, batch.y)?;
        let b = batch.len();
        let chunks = b.div_ceil(GRAD_CHUNK_ROWS);
        let run = |tape: &mut Tape, start: usize, len: usize, with_kl: bool| {
            tape.clear();
            let leaves = self.params.record(tape);
            let part = Batch {
                x: batch.x.subrows(start, len),
                y: batch.y.subrows(start, len),
                num_data: batch.num_data,
            };
            let out = self.record_part(tape, &leaves, &part, b, with_kl)?;
            let value = tape.scalar(out);
            let grads = tape.backward(out);
            Ok::<_, Error>((value, self.params.flat_grad(&grads, &leaves)))
        };
        let (value, grad) = if chunks <= 1 {
            run(tape, 0, b, true)?
        } else {
            let parts: Vec<Result<(f64, Vec<f64>)>> = tape
                .sub_tapes(chunks)
                .par_iter_mut()
                .enumerate()
                .map(|(c, t)| {
                    let start = c * b / chunks;
                    let end = (c + 1) * b / chunks;
                    run(t, start, end - start, c == 0)
                })
                .collect();
            let mut value = 0.0;
            let mut grad = vec![0.0; self.params.num_free()];
            for part in parts {
                let (v, g) = part?;
                value += v;
                grad.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
            }
            (value, grad)
        };
        if !value.is_finite() {
            return Err(Error::Numerical(format!("objective is {value}")));
        }
        if let Some(k) = grad.iter().position(|v| !v.is_finite()) {
            return Err(Error::Numerical(format!(
                "gradient entry {k} is {}",
                grad[k]
            )));
        }
        Ok((value, grad))
    }
}

impl Dspp {
    /// The share of eq. (21) of the rows of `batch` in a minibatch of `total` points:
    /// `(1/total) Σ_{i ∈ part} log p(y_i | x_i)`, minus `β ΣKL / N` when `with_kl`.
    fn record_part(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        total: usize,
        with_kl: bool,
    ) -> Result<Var> {
        let (per_point, prop) = self.record_log_mixture(tape, params, batch.x, batch.y)?;
        let data = tape.sum(per_point);
        let data = tape.scale(data, 1.0 / total as f64);
        if self.config.beta == 0.0 || !with_kl {
            return Ok(data);
        }
        let mut kl: Option<Var> = None;
        for (chol, q) in &prop.kl_parts {
            let k = kl_divergence(tape, *chol, q, true);
            kl = Some(match kl {
                None => k,
                Some(acc) => tape.add(acc, k),
            });
        }
        let kl = kl.expect("at least one GP");
        let kl = tape.scale(kl, self.config.beta / batch.num_data as f64);
        Ok(tape.sub(data, kl))
    }
}

impl Model for Dspp {
    fn backend(&self) -> &'static str {
        "dspp"
    }

    fn describe(&self) -> String {
        let widths: Vec<String> = std::iter::once(self.input_dim)
            .chain(self.layers.iter().map(|l| l.output_dim))
            .map(|w| w.to_string())
            .collect();
        format!(
            "dspp L={} widths {} M={} {:?} S={} K={} beta={} q={:?}{}",
            self.layers.len(),
            widths.join("→"),
            self.config.num_inducing,
            self.config.rule,
            self.config.sites,
            self.num_components(),
            self.config.beta,
            self.config.q_cov,
            if self.mixing.is_some() { " LMC" } else { "" }
        )
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }

    /// Adam on the objective with the configured learning-rate drops. With
    /// [`DsppConfig::early_stopping`] (the default), a fraction of the rows is held out,
    /// its NLL is monitored and the best parameters are kept (see [`crate::train`]); with
    /// `restarts > 1`, `restarts` differently seeded initialisations are first trained for
    /// `restart_fraction` of the steps each and the best (held-out, else training, NLL) is
    /// trained on (paper App. A.2).
    fn fit(
        &mut self,
        data: &Dataset,
        cfg: &FitConfig,
        observer: &mut dyn FitObserver,
    ) -> Result<FitReport> {
        crate::train::fit(self, data, cfg, observer)
    }

    /// The finite mixture of eq. (21)'s predictive: weights ω (shared by all points),
    /// per-component means and variances plus the noise variance (Gaussian); for the LMC the
    /// per-output marginals `Aᵀμ_k`, `Σ_w A_wp² v_kw + σ²_p` (the joint density is
    /// [`Dspp::log_density`]); for the probit likelihood the latent mixture with the class
    /// probabilities `Σ_k ω_k Φ(μ_k/√(1 + v_k))` (squashed) attached. Deterministic:
    /// `cfg` is ignored (the number of components is fixed by the quadrature rule).
    fn predict(&self, x: MatRef<'_, f64>, _cfg: &PredictConfig) -> Result<Predictive> {
        if x.ncols() != self.input_dim {
            return Err(Error::shape(
                "dspp predict inputs",
                self.input_dim,
                x.ncols(),
            ));
        }
        if x.nrows() == 0 {
            return Err(Error::Empty("dspp predict: no test points".into()));
        }
        dgp_traits::error::check_finite("test inputs", x)?;
        let reps = self.num_components();
        let chunk = (PREDICT_ROWS / reps).clamp(1, PREDICT_POINTS);
        let starts: Vec<usize> = (0..x.nrows()).step_by(chunk).collect();
        let parts: Vec<Result<ComponentMoments>> = starts
            .par_iter()
            .map(|&s| {
                let len = chunk.min(x.nrows() - s);
                self.predict_chunk(x.subrows(s, len))
            })
            .collect();
        let parts = parts.into_iter().collect::<Result<Vec<_>>>()?;
        let n = x.nrows();
        let wl = parts[0].0.len();
        let mut means = vec![Mat::zeros(n, reps); wl];
        let mut vars = vec![Mat::zeros(n, reps); wl];
        let mut row = 0;
        for (pm, pv) in &parts {
            let rows = pm[0].nrows();
            for k in 0..wl {
                means[k].subrows_mut(row, rows).copy_from(pm[k].as_ref());
                vars[k].subrows_mut(row, rows).copy_from(pv[k].as_ref());
            }
            row += rows;
        }
        let weights = self.weights();
        let lik = &self.config.likelihood;
        match lik {
            Likelihood::Gaussian(_) => {
                let noise = self
                    .noise_variance()
                    .expect("Gaussian likelihood has noise");
                let (means, mut vars) = match self.mixing() {
                    None => (means, vars),
                    Some(a) => {
                        let p = self.output_dim;
                        let mo = (0..p)
                            .map(|d| {
                                Mat::from_fn(n, reps, |i, s| {
                                    (0..wl).map(|w| a[(w, d)] * means[w][(i, s)]).sum()
                                })
                            })
                            .collect();
                        let vo = (0..p)
                            .map(|d| {
                                Mat::from_fn(n, reps, |i, s| {
                                    (0..wl)
                                        .map(|w| a[(w, d)] * a[(w, d)] * vars[w][(i, s)])
                                        .sum()
                                })
                            })
                            .collect();
                        (mo, vo)
                    }
                };
                for (d, v) in vars.iter_mut().enumerate() {
                    for j in 0..v.ncols() {
                        for i in 0..v.nrows() {
                            v[(i, j)] += noise[d];
                        }
                    }
                }
                Predictive::new(weights, means, vars)
            }
            Likelihood::BernoulliProbit(pl) => {
                // Guard against an exactly-zero latent variance (the mixture needs v > 0).
                for v in &mut vars {
                    for j in 0..v.ncols() {
                        for i in 0..v.nrows() {
                            v[(i, j)] = v[(i, j)].max(1e-12);
                        }
                    }
                }
                Predictive::new(weights, means, vars)?.with_probit_class_probs(pl.squash)
            }
        }
    }

    fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::Serde(e.to_string()))
    }

    /// `count` coherent function draws for plots: each draw picks a mixture component k
    /// with probability ω_k (seeded) and returns that component's latent mean function
    /// μ_k(x) of the first output — the deterministic path of the sigma points of component
    /// k through the layers (eqs. 22–23). For the probit likelihood these are latent
    /// functions; for the LMC, the first output's mean `Σ_w A_w1 μ_kw(x)`.
    fn function_samples(
        &self,
        x: MatRef<'_, f64>,
        count: usize,
        seed: u64,
    ) -> Result<Option<Mat<f64>>> {
        let pred = self.predict(x, &PredictConfig::default())?;
        let w = pred.weights();
        let mut rng = dgp_traits::rng::seeded(seed);
        let u = dgp_traits::rng::standard_normal(&mut rng, count, 1);
        let means = &pred.means()[0];
        let mut out = Mat::zeros(x.nrows(), count);
        for c in 0..count {
            // A uniform draw (Φ of a normal draw), then the inverse CDF of ω.
            let p = dgp_traits::special::norm_cdf(u[(c, 0)]);
            let mut acc = 0.0;
            let mut k = w.len() - 1;
            for (j, wj) in w.iter().enumerate() {
                acc += wj;
                if p < acc {
                    k = j;
                    break;
                }
            }
            for i in 0..x.nrows() {
                out[(i, c)] = means[(i, k)];
            }
        }
        Ok(Some(out))
    }
}
