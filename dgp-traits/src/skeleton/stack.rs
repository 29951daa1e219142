//! The layer-stack initialisation shared by the backends (the initialisation of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP,
//! GPyTorch's DSPP example, the paper gives none): the widths and names of the layers, k-means++ inducing
//! inputs on the data, hidden layers' mean functions (fixed identity/PCA maps or learned
//! linear means) and the running data X and inducing inputs Z pushed through those maps, so
//! that each later layer starts on the scale of its inputs.

use crate::mean::{LinearInit, MeanFunction, MeanParams};
use dgp_core::Result;
use dgp_core::rng::Rng;
use dgp_data::kmeans;
use faer::{Mat, MatRef};

/// One layer of a stack of widths `d = w_0 → w_1 → … → w_L`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerPlan {
    /// 0-based index l.
    pub index: usize,
    /// `"layer{l+1}"`, the prefix of the layer's parameter names.
    pub name: String,
    /// Input width w_l.
    pub input_dim: usize,
    /// Output width w_{l+1}.
    pub output_dim: usize,
    /// Whether this is the last layer.
    pub last: bool,
}

/// The layers of a stack with the given widths (`widths.len() − 1` layers).
pub fn layer_plans(widths: &[usize]) -> Vec<LayerPlan> {
    let n = widths.len().saturating_sub(1);
    (0..n)
        .map(|l| LayerPlan {
            index: l,
            name: format!("layer{}", l + 1),
            input_dim: widths[l],
            output_dim: widths[l + 1],
            last: l + 1 == n,
        })
        .collect()
}

/// The mean function of a group of layers (hidden or last).
#[derive(Clone, Debug, PartialEq)]
pub enum StackMean {
    /// `m(x) = 0`.
    Zero,
    /// A learned constant per output.
    Constant,
    /// `m(x) = x W (+ b)`: fixed (identity / PCA, the DSVI inner layers) or learned.
    Linear {
        /// How W starts (and stays, when not learned).
        init: LinearInit,
        /// Whether W (and b) are trained.
        learned: bool,
        /// Whether there is a bias b.
        bias: bool,
    },
}

impl StackMean {
    /// The mean function for a layer of the given widths.
    pub fn build(&self, input_dim: usize, output_dim: usize) -> MeanFunction {
        match self {
            StackMean::Zero => MeanFunction::zero(input_dim, output_dim),
            StackMean::Constant => MeanFunction::constant(input_dim, output_dim),
            StackMean::Linear {
                init,
                learned,
                bias,
            } => {
                let mut m = MeanFunction::linear(input_dim, output_dim, init.clone());
                if *learned {
                    m = m.learned();
                }
                if *bias {
                    m = m.with_bias();
                }
                m
            }
        }
    }
}

/// Which running matrix a PCA mean function is fitted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeanData {
    /// The running data X W_1 ⋯ W_{l−1} (DSVI).
    X,
    /// The running inducing inputs Z W_1 ⋯ (+ b) (DSPP).
    Z,
}

/// The running data and inducing inputs during a stack's initialisation.
#[derive(Clone, Debug)]
pub struct InitRun {
    /// The running data (`None` when the backend does not track it).
    pub x: Option<Mat<f64>>,
    /// The running inducing inputs.
    pub z: Mat<f64>,
}

impl InitRun {
    /// Starts with Z = k-means++ (`iters` Lloyd iterations) of `m` centres on `x`, drawn
    /// from `rng`; keeps a copy of `x` running when `keep_x`.
    ///
    /// # Errors
    /// The errors of [`kmeans`].
    pub fn kmeans(
        x: MatRef<'_, f64>,
        m: usize,
        iters: usize,
        keep_x: bool,
        rng: &mut Rng,
    ) -> Result<Self> {
        let z = kmeans(x, m, iters, rng)?;
        Ok(InitRun {
            x: keep_x.then(|| x.to_owned()),
            z,
        })
    }

    /// [`InitRun::kmeans`] with at most one inducing input per data point: `min(m, N)`
    /// centres on the N rows of `x` (with `m ≥ N` every row is one inducing input, never a
    /// jittered copy). Extra inducing points on N rows add O(M²) cost per row and nothing
    /// the N points do not already span; a backend that sizes its q by the inducing count
    /// reads it from `z.nrows()`.
    ///
    /// # Errors
    /// The errors of [`kmeans`].
    pub fn kmeans_at_most_rows(
        x: MatRef<'_, f64>,
        m: usize,
        iters: usize,
        keep_x: bool,
        rng: &mut Rng,
    ) -> Result<Self> {
        Self::kmeans(x, m.min(x.nrows()), iters, keep_x, rng)
    }

    /// The mean function of layer `plan` (`hidden` or `last`) and its initial parameters,
    /// a PCA map fitted to the running `data`.
    ///
    /// # Errors
    /// The errors of [`MeanFunction::init_params`].
    pub fn layer_mean(
        &self,
        plan: &LayerPlan,
        hidden: &StackMean,
        last: &StackMean,
        data: MeanData,
        rng: &mut Rng,
    ) -> Result<(MeanFunction, MeanParams)> {
        let spec = if plan.last { last } else { hidden };
        let mean = spec.build(plan.input_dim, plan.output_dim);
        let on = match data {
            MeanData::X => self.x.as_ref().map(|x| x.as_ref()),
            MeanData::Z => Some(self.z.as_ref()),
        };
        let init = mean.init_params(on, rng)?;
        Ok((mean, init))
    }

    /// Pushes the running X (if kept) and Z through a layer's linear mean `x W (+ b)`.
    pub fn push(&mut self, w: &Mat<f64>, bias: Option<&Mat<f64>>) {
        if let Some(x) = &mut self.x {
            *x = push_through(x, w, bias);
        }
        self.z = push_through(&self.z, w, bias);
    }
}

fn push_through(x: &Mat<f64>, w: &Mat<f64>, bias: Option<&Mat<f64>>) -> Mat<f64> {
    let xw = x * w;
    match bias {
        None => xw,
        Some(b) => Mat::from_fn(xw.nrows(), xw.ncols(), |i, j| xw[(i, j)] + b[(0, j)]),
    }
}
