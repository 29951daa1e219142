//! The structured deep GP: construction (the defaults of the reference code, Structured_DGP), the propagation of Theorem 1 (Lindinger et al. 2020)
//! and the ELBO of eq. (8) (Lindinger et al. 2020, eq. 8).

use crate::config::{Family, StructuredConfig};
use crate::q::{QParams, block_pattern};
use dgp_core::linalg::{Tri, cholesky_jittered};
use dgp_core::rng::seeded;
use dgp_core::transforms::{inv_softplus, softplus};
use dgp_core::{Error, Result};
use dgp_data::Dataset;
use dgp_traits::backend::Checked;
use dgp_traits::joint_q::JointQ;
use dgp_traits::kernels::{Kernel, KernelKind};
use dgp_traits::layer::{HYPER_FLOOR, SparseLayer, SparseLayerInit};
use dgp_traits::mean::{LinearInit, MeanVars};
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::skeleton::stack::{InitRun, MeanData, StackMean, layer_plans};
use dgp_traits::tape::{Tape, Var};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// Lower bound of the Gaussian noise variance (softplus + floor).
pub const NOISE_FLOOR: f64 = 1e-6;
/// Jitter added to Σ̂^l before each hidden layer's per-point Cholesky factor (Lindinger et al. 2020, Theorem 1
/// step 6–7, the reference's GPflow jitter).
pub const SAMPLE_JITTER: f64 = 1e-6;

/// A deep GP with one joint Gaussian q over the inducing outputs of all layers (Lindinger
/// et al. 2020). See the crate docs for an example.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StructuredModel {
    pub(crate) config: StructuredConfig,
    pub(crate) layers: Vec<SparseLayer>,
    /// Trainable white-noise variance of each hidden layer (the defaults of the reference code, Structured_DGP); `None` for the last.
    pub(crate) white: Vec<Option<ParamId>>,
    pub(crate) layout: JointQ,
    pub(crate) q: QParams,
    pub(crate) noise: Option<ParamId>,
    pub(crate) params: ParamStore,
    pub(crate) input_dim: usize,
    /// Whether the mean-field warm start ([`crate::StructuredConfig::warm_start`]) has
    /// run on this model's parameters (absent from older model files: `false`).
    #[serde(default)]
    pub(crate) warm_started: bool,
}

/// One layer's projection of its inputs (R columns).
pub(crate) struct Proj {
    /// `a_l` of Lindinger et al. 2020, Theorem 1 (K⁻¹k, or L_K⁻¹k in whitened coordinates), M×R.
    pub(crate) a: Var,
    /// `k(f,f) − aᵀK a` (1×R), the white noise included.
    pub(crate) base: Var,
    /// The mean function per GP (1×R each), `None` for the zero mean.
    pub(crate) mean: Option<Vec<Var>>,
}

impl StructuredModel {
    /// Builds a model for training data `data` (targets with one column; the last layer
    /// has T_L = 1 latent function, K for a K-class multiclass likelihood) with
    /// M = min(`num_inducing`, N) inducing points per layer (the model's
    /// [`StructuredModel::config`] holds the M used), initialised as the reference (the defaults of the reference code, Structured_DGP): Z by k-means++ (30 Lloyd iterations) pushed
    /// through fixed identity/PCA means, RBF-ARD kernels (lengthscales 1, variance 1, the
    /// hidden layers' variance frozen), White(1e-3) trainable on hidden layers, μ_M = 0,
    /// hidden diagonal blocks `inner_q_scale`·chol(K_l) (whitened: ·I), the last block
    /// chol(K_L), stripes/arrow 0.
    ///
    /// # Errors
    /// Invalid configuration (checked once into the [`Checked`] that
    /// [`StructuredModel::from_checked`] takes); as [`StructuredModel::from_checked`].
    pub fn new(config: StructuredConfig, data: &Dataset) -> Result<Self> {
        Self::from_checked(Checked::new(config)?, data)
    }

    /// [`StructuredModel::new`] from a configuration already validated ([`Checked`]); it is
    /// not validated again.
    ///
    /// # Errors
    /// More than one target column, targets the likelihood refuses (labels outside
    /// 0..K−1, a class absent from `data`, NaN), Kuu not positive definite.
    pub fn from_checked(config: Checked<StructuredConfig>, data: &Dataset) -> Result<Self> {
        let mut config = config.into_inner();
        if data.output_dim() != 1 {
            return Err(Error::config(
                "output_dim",
                format!(
                    "targets must have one column (T_L = 1 GP for a value, K GPs for a class label), got {}",
                    data.output_dim()
                ),
            ));
        }
        config.likelihood.check_training_targets(data.y())?;
        let x = data.x();
        let d_in = data.input_dim();
        let widths = config.widths(d_in);
        let mut rng = seeded(config.init_seed);
        let mut run = InitRun::kmeans_at_most_rows(
            x,
            config.num_inducing,
            config.kmeans_iters,
            true,
            &mut rng,
        )?;
        let m = run.z.nrows();
        config.num_inducing = m;
        let hidden = StackMean::Linear {
            init: LinearInit::Pca,
            learned: false,
            bias: false,
        };
        let mut params = ParamStore::new();
        let (mut layers, mut white, mut diag) = (Vec::new(), Vec::new(), Vec::new());
        for plan in layer_plans(&widths) {
            let (mean, mean_init) =
                run.layer_mean(&plan, &hidden, &StackMean::Zero, MeanData::X, &mut rng)?;
            let w = mean_init.weights.clone();
            let kernel = Kernel::new(KernelKind::Rbf, plan.input_dim, true)?;
            let layer = SparseLayer::new(
                &mut params,
                &plan.name,
                kernel,
                mean,
                plan.output_dim,
                0.0,
                SparseLayerInit {
                    z: run.z.clone(),
                    lengthscale: 1.0,
                    variance: 1.0,
                    train_variance: plan.last,
                    train_z: true,
                    mean: mean_init,
                },
            )?;
            let wn = if plan.last {
                0.0
            } else {
                config.inner_white_noise
            };
            white.push(if plan.last {
                None
            } else {
                Some(params.add(
                    format!("{}.white", plan.name),
                    Mat::from_fn(1, 1, |_, _| inv_softplus(wn - HYPER_FLOOR)),
                    Role::Optimised,
                )?)
            });
            let scale = if plan.last { 1.0 } else { config.inner_q_scale };
            let f = prior_factor(&layer, run.z.as_ref(), wn, config.whitened)?;
            let f = Mat::from_fn(m, m, |i, j| scale * f[(i, j)]);
            diag.extend(std::iter::repeat_n(f, plan.output_dim));
            layers.push(layer);
            if let Some(w) = w {
                run.push(&w, None);
            }
        }
        let layout = JointQ::new(&widths[1..].iter().map(|&t| (t, m)).collect::<Vec<_>>())?;
        let pattern = block_pattern(&layout, config.family, config.stripes, config.arrow);
        let dense = config.family == Family::FullyCoupled;
        let q = QParams::init(&mut params, &layout, &pattern, dense, &diag)?;
        let noise = match config.likelihood.init_noise_variance() {
            Some(v) => Some(params.add(
                "likelihood.variance",
                Mat::from_fn(1, 1, |_, _| inv_softplus(v - NOISE_FLOOR)),
                Role::Optimised,
            )?),
            None => None,
        };
        Ok(StructuredModel {
            config,
            layers,
            white,
            layout,
            q,
            noise,
            params,
            input_dim: d_in,
            warm_started: false,
        })
    }

    /// The configuration the model was built with.
    pub fn config(&self) -> &StructuredConfig {
        &self.config
    }

    /// The layers, first to last.
    pub fn layers(&self) -> &[SparseLayer] {
        &self.layers
    }

    /// The layout of the joint q (core [`JointQ`]).
    pub fn layout(&self) -> &JointQ {
        &self.layout
    }

    /// The Gaussian noise variance σ², if the likelihood has one.
    pub fn noise_variance(&self) -> Option<f64> {
        self.noise
            .map(|id| softplus(self.params.get(id)[(0, 0)]) + NOISE_FLOOR)
    }

    /// The joint q as a dense mean (n×1) and lower factor L (n×n). Assembles an n×n
    /// matrix: for tests and for moving a q between families, never used in training.
    pub fn joint_q_dense(&self) -> (Mat<f64>, Mat<f64>) {
        self.q.dense(&self.params, &self.layout)
    }

    /// Sets the joint q from a dense mean and lower factor (positive diagonal); blocks the
    /// family does not store are ignored.
    ///
    /// # Errors
    /// [`Error::Shape`] for a mean or factor of the wrong size.
    pub fn set_joint_q_dense(
        &mut self,
        mean: MatRef<'_, f64>,
        factor: MatRef<'_, f64>,
    ) -> Result<()> {
        self.q
            .set_dense(&mut self.params, &self.layout, mean, factor)
    }

    /// chol(K_l) of every layer at the current hyperparameters (the prior's blocks).
    ///
    /// # Errors
    /// K_l not positive definite after the jitter retries.
    pub fn prior_cholesky(&self) -> Result<Vec<Mat<f64>>> {
        let mut tape = Tape::new();
        let leaves = self.params.record(&mut tape);
        (0..self.layers.len())
            .map(|l| {
                let c = self.chol_kuu(&mut tape, &leaves, l)?;
                Ok(tape.value(c).to_owned())
            })
            .collect()
    }

    fn white_var(&self, tape: &mut Tape, leaves: &[Var], l: usize) -> Option<Var> {
        self.white[l].map(|id| tape.positive(id.var(leaves), HYPER_FLOOR))
    }

    fn chol_kuu(&self, tape: &mut Tape, leaves: &[Var], l: usize) -> Result<Var> {
        let layer = &self.layers[l];
        let hyp = layer.kernel_vars(tape, leaves);
        let z = layer.z.var(leaves);
        let mut kuu = layer.kernel.record(tape, z, z, hyp);
        if let Some(w) = self.white_var(tape, leaves, l) {
            kuu = tape.add_diag_var(kuu, w);
        }
        let (c, _) =
            tape.cholesky_jittered(kuu, &format!("Kuu of {}", layer.name), layer.jitter)?;
        Ok(c)
    }

    /// chol(K_l) of every layer on the tape (they depend on Z_l and the kernel alone, not
    /// on the propagated inputs).
    pub(crate) fn chols_kuu(&self, tape: &mut Tape, leaves: &[Var]) -> Result<Vec<Var>> {
        (0..self.layers.len())
            .map(|l| self.chol_kuu(tape, leaves, l))
            .collect()
    }

    /// Spec §3 step 1 and the pieces of steps 2–3 that depend on the layer alone, with
    /// `chol` = chol(K_l). `a_l` is `L_K⁻¹k` when `whitened_coords` (the whitened prior,
    /// or a non-whitened q mapped to whitened coordinates by [`crate::q::QTape::whiten`]),
    /// else `K⁻¹k`.
    pub(crate) fn project(
        &self,
        tape: &mut Tape,
        leaves: &[Var],
        l: usize,
        x: Var,
        chol: Var,
        whitened_coords: bool,
    ) -> Result<Proj> {
        let layer = &self.layers[l];
        let hyp = layer.kernel_vars(tape, leaves);
        let z = layer.z.var(leaves);
        let kuf = layer.kernel.record(tape, z, x, hyp);
        let a_w = tape.tri_solve(chol, kuf, Tri::Lower);
        let mut kdiag = layer.kernel.record_diag(tape, x, hyp);
        if let Some(w) = self.white_var(tape, leaves, l) {
            kdiag = tape.add_scalar_var(kdiag, w);
        }
        let q_nn = tape.col_sq_norms(a_w);
        let base = tape.sub(kdiag, q_nn);
        let base = tape.transpose(base);
        let a = if whitened_coords {
            a_w
        } else {
            tape.tri_solve(chol, a_w, Tri::LowerT)
        };
        let mv = MeanVars {
            weights: layer.mean_weights.map(|id| id.var(leaves)),
            bias: layer.mean_bias.map(|id| id.var(leaves)),
        };
        let mean = layer.mean.record(tape, x, mv).map(|m| {
            let mt = tape.transpose(m);
            (0..layer.output_dim)
                .map(|t| tape.slice_rows(mt, t, 1))
                .collect()
        });
        Ok(Proj { a, base, mean })
    }

    /// [`Self::project`]'s a_l, k − aᵀKa and mean function (R×T_l) at `x`.
    pub(crate) fn project_pub(
        &self,
        tape: &mut Tape,
        leaves: &[Var],
        l: usize,
        x: Var,
    ) -> Result<(Var, Var, Option<Var>)> {
        let chol = self.chol_kuu(tape, leaves, l)?;
        let p = self.project(tape, leaves, l, x, chol, self.config.whitened)?;
        let mean = p.mean.map(|rows| {
            let c = tape.concat_rows(&rows);
            tape.transpose(c)
        });
        Ok((p.a, p.base, mean))
    }

    /// First global GP index of layer `l`.
    pub(crate) fn first_block(&self, l: usize) -> usize {
        (0..l).map(|k| self.layout.layer_blocks(k).len()).sum()
    }
}

/// The prior's Cholesky factor of a new layer (identity when whitened), for the q init.
fn prior_factor(
    layer: &SparseLayer,
    z: MatRef<'_, f64>,
    white: f64,
    whitened: bool,
) -> Result<Mat<f64>> {
    let m = layer.num_inducing;
    if whitened {
        return Ok(Mat::from_fn(m, m, |i, j| if i == j { 1.0 } else { 0.0 }));
    }
    let hyper = layer.kernel.default_hyper();
    let mut kuu = layer.kernel.gram(z, hyper.as_ref());
    for i in 0..m {
        kuu[(i, i)] += white;
    }
    Ok(cholesky_jittered(
        kuu.as_ref(),
        &format!("initial Kuu of {}", layer.name),
        layer.jitter,
    )?
    .0)
}
