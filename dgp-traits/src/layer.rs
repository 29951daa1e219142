//! The shared sparse-GP layer: projection onto inducing points, the marginals of q(f) at a
//! batch of inputs, and KL(q(u) ‖ p(u)). Written once, used by every backend that
//! conditions on points (svi, dspp, structured, hmc).
//!
//! The marginals of q(f) and the KL live in [`crate::conditional`] and [`crate::kl`]
//! (re-exported here).

pub use crate::conditional::{Projection, QSqrt, QVars, marginals};
use crate::kernels::{Kernel, KernelVars};
pub use crate::kl::kl_divergence;
use crate::mean::{MeanFunction, MeanParams, MeanVars};
use crate::params::{ParamId, ParamStore, Role};
use crate::tape::{Tape, Var};
use dgp_core::linalg::JitterConfig;
use dgp_core::transforms::inv_softplus;
use dgp_core::{Error, Result};
use faer::Mat;
use serde::{Deserialize, Serialize};

/// Lower bound added to every softplus-transformed kernel hyperparameter.
pub const HYPER_FLOOR: f64 = 1e-6;

/// One sparse-GP layer with `output_dim` GPs that share a kernel, a mean function and M
/// inducing inputs Z (M×D_in).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SparseLayer {
    /// Name used in parameter names and error messages (e.g. `"layer2"`).
    pub name: String,
    /// The kernel (type and dimensions; hyperparameter values live in the store).
    pub kernel: Kernel,
    /// The mean function.
    pub mean: MeanFunction,
    /// Width of the layer's output.
    pub output_dim: usize,
    /// Number of inducing points M.
    pub num_inducing: usize,
    /// Variance of the white-noise kernel added to Kuu's diagonal and to k(x, x) only (the
    /// "noise between layers" σ²_l of the DSVI paper); zero by default.
    pub white_noise: f64,
    /// Jitter rule for Cholesky factorisations of Kuu.
    pub jitter: JitterConfig,
    /// Inducing inputs Z (M×D_in).
    pub z: ParamId,
    /// Unconstrained lengthscales (1×D_in, or 1×1 isotropic; linear kernel: weights).
    pub lengthscales: ParamId,
    /// Unconstrained kernel variance (1×1).
    pub variance: ParamId,
    /// Weight block (D_in×D_out) of the mean function, if it has one.
    pub mean_weights: Option<ParamId>,
    /// Bias block (1×D_out) of the mean function, if it has one.
    pub mean_bias: Option<ParamId>,
}

/// Initial values of a new layer.
#[derive(Clone, Debug)]
pub struct SparseLayerInit {
    /// Inducing inputs (M×D_in).
    pub z: Mat<f64>,
    /// Positive lengthscale(s).
    pub lengthscale: f64,
    /// Positive kernel variance.
    pub variance: f64,
    /// Whether the kernel variance is trained.
    pub train_variance: bool,
    /// Whether Z is trained.
    pub train_z: bool,
    /// Initial (or fixed) parameters of the mean function.
    pub mean: MeanParams,
}

impl SparseLayer {
    /// Registers a new layer's parameters in `store` under the prefix `name`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: &mut ParamStore,
        name: &str,
        kernel: Kernel,
        mean: MeanFunction,
        output_dim: usize,
        white_noise: f64,
        init: SparseLayerInit,
    ) -> Result<Self> {
        if init.z.ncols() != kernel.input_dim {
            return Err(Error::shape(
                format!("{name}: inducing inputs columns"),
                kernel.input_dim,
                init.z.ncols(),
            ));
        }
        if init.z.nrows() == 0 || output_dim == 0 {
            return Err(Error::Empty(format!(
                "{name}: no inducing points or no outputs"
            )));
        }
        if !(init.lengthscale > HYPER_FLOOR && init.variance > HYPER_FLOOR && white_noise >= 0.0) {
            return Err(Error::config(
                "hyper",
                format!(
                    "{name}: lengthscale and variance must exceed {HYPER_FLOOR}, white noise must be ≥ 0"
                ),
            ));
        }
        let num_inducing = init.z.nrows();
        let z = store.add(
            format!("{name}.z"),
            init.z,
            Role::optimised_if(init.train_z),
        )?;
        let n_ls = kernel.lengthscale_shape().1;
        let ls0 = inv_softplus(init.lengthscale - HYPER_FLOOR);
        let lengthscales = store.add(
            format!("{name}.kernel.lengthscales"),
            Mat::from_fn(1, n_ls, |_, _| ls0),
            Role::Optimised,
        )?;
        let variance = store.add(
            format!("{name}.kernel.variance"),
            Mat::from_fn(1, 1, |_, _| inv_softplus(init.variance - HYPER_FLOOR)),
            Role::optimised_if(init.train_variance),
        )?;
        mean.validate()?;
        if mean.input_dim != kernel.input_dim || mean.output_dim != output_dim {
            return Err(Error::shape(
                format!("{name}: mean function dimensions"),
                format!("{}→{}", kernel.input_dim, output_dim),
                format!("{}→{}", mean.input_dim, mean.output_dim),
            ));
        }
        let learned = mean.is_trainable();
        let mean_weights = match init.mean.weights {
            Some(w) => Some(store.add(
                format!("{name}.mean.weights"),
                w,
                Role::optimised_if(learned),
            )?),
            None => None,
        };
        let mean_bias = match init.mean.bias {
            Some(b) => {
                Some(store.add(format!("{name}.mean.bias"), b, Role::optimised_if(learned))?)
            }
            None => None,
        };
        Ok(SparseLayer {
            name: name.to_string(),
            kernel,
            mean,
            output_dim,
            num_inducing,
            white_noise,
            jitter: JitterConfig::default(),
            z,
            lengthscales,
            variance,
            mean_weights,
            mean_bias,
        })
    }

    /// Positive kernel hyperparameters on the tape.
    pub fn kernel_vars(&self, tape: &mut Tape, params: &[Var]) -> KernelVars {
        let lengthscales = tape.positive(self.lengthscales.var(params), HYPER_FLOOR);
        let variance = tape.positive(self.variance.var(params), HYPER_FLOOR);
        KernelVars {
            lengthscales,
            variance,
        }
    }

    /// `Kuu = k(Z, Z) + σ²_white I` (before jitter) and its jittered Cholesky factor.
    pub fn chol_kuu(&self, tape: &mut Tape, params: &[Var], hyp: KernelVars) -> Result<Var> {
        let z = self.z.var(params);
        let mut kuu = self.kernel.record(tape, z, z, hyp);
        if self.white_noise > 0.0 {
            kuu = tape.add_diag(kuu, self.white_noise);
        }
        let (l, _jitter) =
            tape.cholesky_jittered(kuu, &format!("Kuu of {}", self.name), self.jitter)?;
        Ok(l)
    }
}

impl SparseLayer {
    /// Width of the layer's inputs.
    pub fn input_dim(&self) -> usize {
        self.kernel.input_dim
    }

    /// Projects inputs `x` (B×D_in, on the tape) onto the inducing points, using the
    /// model's parameter leaves `params` (as returned by
    /// [`ParamStore::record`](crate::params::ParamStore::record)): `chol(Kuu)`, `Kuf`,
    /// `diag Kff` and the mean function at `x` (DSVI paper eqs. 7–8).
    ///
    /// # Errors
    /// Kuu not positive definite after the jitter retries (the error names the layer).
    pub fn project(&self, tape: &mut Tape, params: &[Var], x: Var) -> Result<Projection> {
        let hyp = self.kernel_vars(tape, params);
        let chol = self.chol_kuu(tape, params, hyp)?;
        let z = self.z.var(params);
        let kuf = self.kernel.record(tape, z, x, hyp);
        let mut kff_diag = self.kernel.record_diag(tape, x, hyp);
        if self.white_noise > 0.0 {
            kff_diag = tape.add_scalar(kff_diag, self.white_noise);
        }
        let mv = MeanVars {
            weights: self.mean_weights.map(|id| id.var(params)),
            bias: self.mean_bias.map(|id| id.var(params)),
        };
        let mean = self.mean.record(tape, x, mv);
        Ok(Projection {
            chol,
            kuf,
            kff_diag,
            mean,
        })
    }
}
