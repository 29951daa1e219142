//! Propagated moments and prediction chunks of the nested model: the moments of q(h_i)
//! layer by layer (Hensman & Lawrence 2014, §4.2, eq. 16), the variance the bound does not propagate, and the
//! single-Gaussian and sampled predictive of a chunk of test points.

use crate::config::PredictMode;
use crate::layer::{LayerInput, LayerStats, Need, layer_moments};
use crate::model::NestedModel;
use crate::psi;
use dgp_core::Result;
use dgp_core::linalg::{Tri, chol_solve_in_place, tri_solve_in_place};
use dgp_core::rng::{Rng, standard_normal};
use dgp_traits::skeleton::{ChunkMoments, check_inputs};
use dgp_traits::tape::Tape;
use faer::{Mat, MatRef, Par};

impl NestedModel {
    /// The propagated q(h_i) of every layer at inputs `x` (Hensman & Lawrence 2014, §4.2, eq. 16): per layer, the means
    /// `ψ1 K⁻¹ m` and variances `σ_i² + ψ1 K⁻¹ S K⁻¹ ψ1ᵀ` (each N×D_i).
    ///
    /// # Errors
    /// Bad input shapes or values; a Kuu that is not positive definite.
    pub fn propagated_moments(&self, x: MatRef<'_, f64>) -> Result<Vec<(Mat<f64>, Mat<f64>)>> {
        check_inputs("nested", x, self.input_dim)?;
        let mut out = Vec::with_capacity(self.layers.len());
        let mut mean = x.to_owned();
        let mut var: Option<Mat<f64>> = None;
        for layer in &self.layers {
            let (m, v) = layer_moments(
                layer,
                &self.params,
                mean.as_ref(),
                var.as_ref().map(|v| v.as_ref()),
                &self.config,
            )?;
            out.push((m.clone(), v.clone()));
            mean = m;
            var = Some(v);
        }
        Ok(out)
    }

    /// Mean and variance (per output N×1, variances including σ_ℓ²) of the single-Gaussian
    /// predictive for one chunk of test points. `tape` is cleared first.
    pub(crate) fn predict_gaussian_chunk(
        &self,
        tape: &mut Tape,
        x: MatRef<'_, f64>,
    ) -> Result<ChunkMoments> {
        tape.clear();
        let params = self.params.record(tape);
        let xv = tape.constant(x.to_owned());
        let mut input = LayerInput::Points(xv);
        let last = self.layers.len() - 1;
        let noises = self.noise_variances();
        for (l, layer) in self.layers.iter().enumerate() {
            let st = layer.stats(tape, &params, input, &self.config.fallback, Need::Moments)?;
            if l < last {
                let var = tape.add_scalar(st.fvar, noises[l]);
                input = LayerInput::Gaussian { mean: st.mean, var };
                continue;
            }
            let mean = tape.value(st.mean).to_owned();
            let fvar = tape.value(st.fvar);
            let mut var = Mat::from_fn(fvar.nrows(), fvar.ncols(), |i, j| {
                fvar[(i, j)].max(0.0) + noises[l]
            });
            if self.config.predict == PredictMode::MomentMatched {
                let gap = self.variance_gaps(tape, l, &st, input)?;
                var += &gap;
            }
            let b = x.nrows();
            return Ok(ChunkMoments::from_stacked(
                mean.as_ref(),
                var.as_ref(),
                b,
                1,
                |v| v,
            ));
        }
        unreachable!("the loop returns at the last layer")
    }

    /// The per-point, per-output variance the bound does not propagate (Hensman & Lawrence 2014, §4.2, eq. 16):
    /// `[ψ0 − tr(K⁻¹Φ_n)] + tr(K⁻¹(Φ_n − ψ1_nᵀψ1_n)K⁻¹(m_d m_dᵀ + S_d))`, each bracket
    /// clamped at 0 (both are non-negative in exact arithmetic).
    pub(crate) fn variance_gaps(
        &self,
        tape: &Tape,
        l: usize,
        st: &LayerStats,
        input: LayerInput,
    ) -> Result<Mat<f64>> {
        let layer = &self.layers[l];
        let a = tape.value(st.a);
        let psi0 = tape.value(st.psi0);
        let (m, b, dout) = (a.nrows(), a.ncols(), layer.output_dim);
        // ψ1 K⁻¹ ψ1ᵀ per point = ‖a_n‖².
        let qnn: Vec<f64> = (0..b)
            .map(|n| (0..m).map(|k| a[(k, n)] * a[(k, n)]).sum())
            .collect();
        let LayerInput::Gaussian { mean, var } = input else {
            // Point inputs: the TCV gap k(x, x) − k K⁻¹ kᵀ; no propagation gap.
            return Ok(Mat::from_fn(b, dout, |n, _| {
                (psi0[(n, 0)] - qnn[n]).max(0.0)
            }));
        };
        let chol = tape.value(st.chol);
        let kinv = {
            let mut e = Mat::<f64>::identity(m, m);
            chol_solve_in_place(chol, e.as_mut(), Par::Seq);
            e
        };
        // W_d = K⁻¹ (m_d m_dᵀ + S_d) K⁻¹ (whitened: L⁻ᵀ(m̃ m̃ᵀ + S̃)L⁻¹).
        let qm = self.params.get(layer.q_mean);
        let mut weights = vec![kinv.clone()];
        for (d, &lf) in st.q_factors.iter().enumerate() {
            let ld = tape.value(lf);
            let md = qm.col(d);
            let c = ld * ld.transpose() + md * md.transpose();
            let w = if layer.whiten {
                // L⁻ᵀ C L⁻¹ = (L⁻ᵀ (L⁻ᵀ C)ᵀ) since C is symmetric.
                let mut t = c;
                tri_solve_in_place(chol, t.as_mut(), Tri::LowerT, Par::Seq);
                let mut t2 = t.transpose().to_owned();
                tri_solve_in_place(chol, t2.as_mut(), Tri::LowerT, Par::Seq);
                t2
            } else {
                &kinv * &c * &kinv
            };
            weights.push(w);
        }
        let wrefs: Vec<MatRef<'_, f64>> = weights.iter().map(|w| w.as_ref()).collect();
        let hyper = self.kernel_hyper(l);
        let z = self.params.get(layer.z);
        let contr = psi::psi2_contract(
            &layer.kernel,
            tape.value(mean),
            tape.value(var),
            z,
            hyper.as_ref(),
            &self.config.fallback,
            &wrefs,
        )?;
        // ψ1 W_d ψ1ᵀ = μ_d² + vf_d.
        let (mu, fvar) = (tape.value(st.mean), tape.value(st.fvar));
        Ok(Mat::from_fn(b, dout, |n, d| {
            let tcv = (psi0[(n, 0)] - contr[(n, 0)]).max(0.0);
            let prop = (contr[(n, d + 1)] - mu[(n, d)] * mu[(n, d)] - fvar[(n, d)]).max(0.0);
            tcv + prop
        }))
    }

    /// Equal-weight mixture components for one chunk: `samples` draws of the hidden layers
    /// through their sparse-GP conditionals (see [`PredictMode::Sampled`]).
    pub(crate) fn predict_sampled_chunk(
        &self,
        tape: &mut Tape,
        x: MatRef<'_, f64>,
        samples: usize,
        rng: &mut Rng,
    ) -> Result<ChunkMoments> {
        let b = x.nrows();
        let rows = b * samples;
        tape.clear();
        let params = self.params.record(tape);
        let noises = self.noise_variances();
        let mut h = Mat::from_fn(rows, x.ncols(), |r, c| x[(r % b, c)]);
        let last = self.layers.len() - 1;
        for (l, layer) in self.layers.iter().enumerate() {
            let hv = tape.constant(h.clone());
            let st = layer.stats(
                tape,
                &params,
                LayerInput::Points(hv),
                &self.config.fallback,
                Need::Moments,
            )?;
            let gap = self.variance_gaps(tape, l, &st, LayerInput::Points(hv))?;
            let (mu, fvar) = (tape.value(st.mean), tape.value(st.fvar));
            let var = Mat::from_fn(rows, layer.output_dim, |r, d| {
                fvar[(r, d)].max(0.0) + gap[(r, d)] + noises[l]
            });
            if l == last {
                return Ok(ChunkMoments::from_stacked(
                    mu,
                    var.as_ref(),
                    b,
                    samples,
                    |v| v,
                ));
            }
            let eps = standard_normal(rng, rows, layer.output_dim);
            h = Mat::from_fn(rows, layer.output_dim, |r, d| {
                mu[(r, d)] + var[(r, d)].sqrt() * eps[(r, d)]
            });
        }
        unreachable!("the loop returns at the last layer")
    }
}
