//! The GP blocks of a DSPP layer: a group of GPs sharing kernel, inducing inputs and mean
//! function, with its whitened q(v), and how a layer's blocks are initialised
//! (GPyTorch's DSPP example).

use crate::config::{DsppConfig, QCov};
use dgp_core::Result;
use dgp_core::rng::{Rng, standard_normal};
use dgp_core::transforms::inv_softplus;
use dgp_traits::kernels::Kernel;
use dgp_traits::layer::{QSqrt, QVars, SparseLayer, SparseLayerInit};
use dgp_traits::mean::MeanParams;
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::skeleton::stack::{LayerPlan, StackMean};
use dgp_traits::tape::{Tape, Var};
use faer::Mat;
use serde::{Deserialize, Serialize};

/// Lower bound of q(v)'s standard deviations (diagonal) and of the diagonal of its Cholesky
/// factors (full), after the softplus transform.
pub const Q_SD_FLOOR: f64 = 1e-8;
/// Standard deviation of the initial q(v) means (GPyTorch `MeanFieldVariationalDistribution`).
pub const Q_MEAN_INIT_SD: f64 = 1e-3;
/// Standard deviation of the noise added to the shared k-means centres of independent
/// first-layer GPs (GPyTorch notebook).
pub const Z_NOISE_SD: f64 = 0.01;
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

impl GpBlock {
    /// q(v) of the block on the tape (softplus-transformed factors).
    pub fn q_vars(&self, tape: &mut Tape, params: &[Var]) -> QVars {
        let sqrt = match &self.q_sqrt {
            QSqrtParams::Diag(id) => QSqrt::Diag(tape.positive(id.var(params), Q_SD_FLOOR)),
            QSqrtParams::Full(ids) => QSqrt::Full(
                ids.iter()
                    .map(|id| tape.lower_cholesky_factor(id.var(params), Q_SD_FLOOR))
                    .collect(),
            ),
        };
        QVars {
            mean: self.q_mean.var(params),
            sqrt,
        }
    }
}

/// The GP blocks of one layer (one block, or one per GP with independent GPs): the block's
/// share of the layer's mean parameters, its Z (`z_base`, plus 0.01·N(0, 1) noise per
/// independent GP), and q(v) = N(1e-3·N(0, 1) draws, I) — drawn from `rng` in this order,
/// block by block.
/// Where a layer's inducing inputs start (before the per-GP noise) and whether they are
/// trained ([`DsppConfig::trains_inducing`]).
#[derive(Clone, Copy)]
pub(crate) struct ZStart<'a> {
    pub(crate) base: &'a Mat<f64>,
    pub(crate) train: bool,
}

pub(crate) fn new_blocks(
    params: &mut ParamStore,
    config: &DsppConfig,
    plan: &LayerPlan,
    spec: &StackMean,
    mean_init: &MeanParams,
    z_start: ZStart<'_>,
    rng: &mut Rng,
) -> Result<Vec<GpBlock>> {
    let ZStart {
        base: z_base,
        train: train_z,
    } = z_start;
    let (din, dout, m) = (plan.input_dim, plan.output_dim, config.num_inducing);
    let groups: Vec<(usize, usize)> = if config.independent_gps {
        (0..dout).map(|g| (g, 1)).collect()
    } else {
        vec![(0, dout)]
    };
    let mut blocks = Vec::with_capacity(groups.len());
    for &(start, width) in &groups {
        let bname = if groups.len() == 1 {
            plan.name.clone()
        } else {
            format!("{}.gp{start}", plan.name)
        };
        let z = if groups.len() > 1 {
            let noise = standard_normal(rng, m, din);
            Mat::from_fn(m, din, |i, j| z_base[(i, j)] + Z_NOISE_SD * noise[(i, j)])
        } else {
            z_base.clone()
        };
        let split = |p: &Option<Mat<f64>>| {
            p.as_ref()
                .map(|w| w.as_ref().subcols(start, width).to_owned())
        };
        let init = MeanParams {
            weights: split(&mean_init.weights),
            bias: split(&mean_init.bias),
        };
        let layer = SparseLayer::new(
            params,
            &bname,
            Kernel::new(config.kernel, din, config.ard)?,
            spec.build(din, width),
            width,
            0.0,
            SparseLayerInit {
                z,
                lengthscale: config.init_lengthscale,
                variance: config.init_variance,
                train_variance: true,
                train_z,
                mean: init,
            },
        )?;
        let qm0 = standard_normal(rng, m, width);
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
    Ok(blocks)
}
