//! The exact optimum of the last layer's q(u) given every other parameter (used before
//! L-BFGS; Titsias 2009's collapsed optimum with the propagated Ψ1 and Φ).

use crate::layer::{LayerInput, Need, Q_SQRT_FLOOR};
use crate::model::NestedModel;
use crate::psi;
use dgp_core::linalg::{JitterConfig, chol_solve_in_place, cholesky_jittered};
use dgp_core::transforms::raw_lower_factor;
use dgp_core::{Error, Result, check_finite};
use dgp_data::Dataset;
use dgp_traits::tape::Tape;
use faer::{Mat, MatRef, Par};

impl NestedModel {
    /// Sets q(u_ℓ) of the last layer to its exact maximiser of the full-data bound given
    /// every other parameter (the bound is a concave quadratic in m_ℓ and S_ℓ):
    /// `S = K (K + Φ/σ²)⁻¹ K`, `m_d = K (σ²K + Φ)⁻¹ Ψ1ᵀ y_d` (Titsias 2009's collapsed
    /// optimum with Ψ1 and Φ of the propagated inputs), stored whitened as
    /// `S̃ = σ² Lᵀ(σ²K + Φ)⁻¹L`, `m̃ = Lᵀ(σ²K + Φ)⁻¹Ψ1ᵀy`. The bound can only increase.
    /// [`crate::Optimiser::Lbfgs`] calls it before iterating **(ours)**: from the spec's m = 0,
    /// S = K and σ² = 0.01 the first L-BFGS line search otherwise overshoots by orders of
    /// magnitude into the "everything is noise" basin.
    ///
    /// # Errors
    /// Data of the wrong shape; matrices that are not positive definite after jitter.
    pub fn set_optimal_last_q(&mut self, data: &Dataset) -> Result<()> {
        if data.input_dim() != self.input_dim || data.output_dim() != self.output_dim {
            return Err(Error::shape(
                "nested set_optimal_last_q data columns (x, y)",
                format!("({}, {})", self.input_dim, self.output_dim),
                format!("({}, {})", data.input_dim(), data.output_dim()),
            ));
        }
        let last = self.layers.len() - 1;
        let layer = self.layers[last].clone();
        let mut tape = Tape::new();
        let params = self.params.record(&mut tape);
        let mut input = LayerInput::Points(tape.constant(data.x().to_owned()));
        let noises = self.noise_variances();
        for (l, lay) in self.layers[..last].iter().enumerate() {
            let st = lay.stats(
                &mut tape,
                &params,
                input,
                &self.config.fallback,
                Need::Moments,
            )?;
            let var = tape.add_scalar(st.fvar, noises[l]);
            input = LayerInput::Gaussian { mean: st.mean, var };
        }
        let hyp = layer.kernel_vars(&mut tape, &params);
        let chol = layer.chol_kuu(&mut tape, &params, hyp)?;
        let z = layer.z.var(&params);
        let (psi1, psi2) = match input {
            LayerInput::Points(x) => {
                let kfu = layer.kernel.record(&mut tape, x, z, hyp);
                let phi = tape.matmul_tn(kfu, kfu);
                (kfu, phi)
            }
            LayerInput::Gaussian { mean, var } => {
                let p = psi::psi_stats(
                    &mut tape,
                    &layer.kernel,
                    mean,
                    var,
                    z,
                    hyp,
                    &self.config.fallback,
                )?;
                (p.psi1, p.psi2)
            }
        };
        let l = tape.value(chol).to_owned();
        let (psi1, phi) = (tape.value(psi1), tape.value(psi2));
        let (mean, factor) = optimal_q(l, psi1, phi, data.y(), noises[last], layer.whiten)?;
        check_finite("optimal q(u) mean", mean.as_ref())?;
        check_finite("optimal q(u) factor", factor.as_ref())?;
        self.params.set(layer.q_mean, mean)?;
        let raw = raw_lower_factor(factor.as_ref(), Q_SQRT_FLOOR);
        for &id in &layer.q_sqrt {
            self.params.set(id, raw.clone())?;
        }
        Ok(())
    }
}

/// The optimal q(u) of the last layer (see [`NestedModel::set_optimal_last_q`]) from
/// `l` = chol(K), Ψ1 (N×M), Φ (M×M), the targets and σ²: its mean and Cholesky factor,
/// whitened or not.
fn optimal_q(
    l: Mat<f64>,
    psi1: MatRef<'_, f64>,
    phi: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    s2: f64,
    whiten: bool,
) -> Result<(Mat<f64>, Mat<f64>)> {
    let mut a = &l * l.transpose() * s2 + phi;
    symmetrise(&mut a);
    // Tiny jitter only: a relative 1e-6 of Φ's scale would perturb σ²K visibly.
    let tiny = JitterConfig {
        rel: 1e-14,
        abs_floor: 0.0,
        growth: 100.0,
        max_retries: 6,
    };
    let (la, _) = cholesky_jittered(a.as_ref(), "σ²K + Φ of the last layer", tiny)?;
    // S̃ = σ² Lᵀ A⁻¹ L, m̃ = Lᵀ A⁻¹ Ψ1ᵀ Y.
    let mut ainv_l = l.clone();
    chol_solve_in_place(la.as_ref(), ainv_l.as_mut(), Par::Seq);
    let mut st = l.transpose() * &ainv_l * s2;
    symmetrise(&mut st);
    let mut rhs = psi1.transpose() * y;
    chol_solve_in_place(la.as_ref(), rhs.as_mut(), Par::Seq);
    let mt = l.transpose() * &rhs;
    let (lt, _) = cholesky_jittered(
        st.as_ref(),
        "optimal S̃ of the last layer",
        JitterConfig::default(),
    )?;
    Ok(if whiten {
        (mt, lt)
    } else {
        (&l * &mt, &l * &lt)
    })
}

/// Sets both triangles of a square matrix to the mean of the two.
fn symmetrise(a: &mut Mat<f64>) {
    let m = a.nrows();
    for j in 0..m {
        for i in j + 1..m {
            let v = 0.5 * (a[(i, j)] + a[(j, i)]);
            a[(i, j)] = v;
            a[(j, i)] = v;
        }
    }
}
