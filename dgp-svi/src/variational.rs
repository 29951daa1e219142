//! The variational distribution of the DSVI deep GP: one q(u_d) = N(m_d, L_d L_dᵀ) per
//! output of every layer (full Cholesky factors), its parameter blocks and its start
//! (the initialisation of Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP).

use dgp_core::Result;
use dgp_core::linalg::cholesky_jittered;
use dgp_core::transforms::raw_lower_factor;
use dgp_traits::layer::{QSqrt, QVars, SparseLayer};
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::tape::{Tape, Var};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// Lower bound of the diagonal of q(u)'s Cholesky factors (softplus + floor).
pub const Q_SQRT_FLOOR: f64 = 1e-10;

/// Parameter blocks of q(u) for one layer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QParams {
    /// Means, M×D_out.
    pub mean: ParamId,
    /// Unconstrained Cholesky factors, one M×M block per output.
    pub sqrt: Vec<ParamId>,
}

impl QParams {
    /// This q(u) on the tape (`params`: the model's parameter leaves), factors transformed
    /// to lower triangles with positive diagonal.
    pub fn vars(&self, tape: &mut Tape, params: &[Var]) -> QVars {
        let sqrt = self
            .sqrt
            .iter()
            .map(|id| tape.lower_cholesky_factor(id.var(params), Q_SQRT_FLOOR))
            .collect();
        QVars {
            mean: self.mean.var(params),
            sqrt: QSqrt::Full(sqrt),
        }
    }
}

/// q(u) of a new layer: zero means and, per output, the Cholesky factor `scale`× the
/// prior's (whitened: `scale·I`; otherwise `scale·chol(Kuu)` at the initial
/// hyperparameters), stored raw.
pub(crate) fn init_q(
    params: &mut ParamStore,
    layer: &SparseLayer,
    z: MatRef<'_, f64>,
    scale: f64,
    whiten: bool,
) -> Result<QParams> {
    let (m, name) = (layer.num_inducing, &layer.name);
    let prior_factor = if whiten {
        Mat::from_fn(m, m, |i, j| if i == j { 1.0 } else { 0.0 })
    } else {
        let hyper = layer.kernel.default_hyper();
        let mut kuu = layer.kernel.gram(z, hyper.as_ref());
        for i in 0..m {
            kuu[(i, i)] += layer.white_noise;
        }
        cholesky_jittered(
            kuu.as_ref(),
            &format!("initial Kuu of {name}"),
            layer.jitter,
        )?
        .0
    };
    let factor = Mat::from_fn(m, m, |i, j| scale * prior_factor[(i, j)]);
    let raw = raw_lower_factor(factor.as_ref(), Q_SQRT_FLOOR);
    let mean = params.add(
        format!("{name}.q.mean"),
        Mat::zeros(m, layer.output_dim),
        Role::Optimised,
    )?;
    let sqrt = (0..layer.output_dim)
        .map(|d| params.add(format!("{name}.q.sqrt{d}"), raw.clone(), Role::Optimised))
        .collect::<Result<Vec<_>>>()?;
    Ok(QParams { mean, sqrt })
}
