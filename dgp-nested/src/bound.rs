//! The nested bound (Hensman & Lawrence 2014, eq. 19, corrected): every term
//! recorded on the tape, the objective, and the terms as numbers.

use crate::layer::{LayerInput, Need};
use crate::model::NestedModel;
use dgp_core::Result;
use dgp_core::rng::Rng;
use dgp_traits::model::{Batch, Objective};
use dgp_traits::params::ParamStore;
use dgp_traits::skeleton::check_batch;
use dgp_traits::tape::{Tape, Var};
use serde::{Deserialize, Serialize};

/// The bound split into its terms (Hensman & Lawrence 2014, eq. 19), all scaled to the full data set (sums over
/// the batch multiplied by N/|B|). `total = data_fit − Σ tcv − Σ propagation − Σ kl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoundTerms {
    /// `Σ_n Σ_d [log N(y_nd | μ_ℓnd, σ_ℓ²) − vf_ℓnd/(2σ_ℓ²)]`, the final likelihood term
    /// with the variance term that eq. (19) omits.
    pub data_fit: f64,
    /// Per layer, `D_i/(2σ_i²) Σ_n [ψ0_in − tr(K_i⁻¹Φ_in)]` (the TCV / compression terms).
    pub tcv: Vec<f64>,
    /// Per layer, `1/(2σ_i²) Σ_n Σ_d tr(K_i⁻¹(Φ_in − ψ1_inᵀψ1_in)K_i⁻¹(m m ᵀ + S))`
    /// (0 for the first layer, whose inputs are deterministic).
    pub propagation: Vec<f64>,
    /// Per layer, `Σ_d KL(q(u_id) ‖ p(u_id))`.
    pub kl: Vec<f64>,
    /// The bound.
    pub total: f64,
}

struct TermVars {
    data: Var,
    tcv: Vec<Var>,
    prop: Vec<Option<Var>>,
    kl: Vec<Var>,
    total: Var,
}

impl NestedModel {
    /// Records every term of the bound (Hensman & Lawrence 2014, eq. 19) for `batch`.
    fn record_terms(&self, tape: &mut Tape, params: &[Var], batch: &Batch<'_>) -> Result<TermVars> {
        check_batch("nested", batch, self.input_dim, self.output_dim)?;
        let scale = batch.num_data as f64 / batch.len() as f64;
        let x = tape.constant(batch.x.to_owned());
        let y = tape.constant(batch.y.to_owned());
        let mut input = LayerInput::Points(x);
        let (mut tcv, mut prop, mut kl) = (Vec::new(), Vec::new(), Vec::new());
        let last = self.layers.len() - 1;
        let mut data = None;
        for (l, layer) in self.layers.iter().enumerate() {
            let st = layer.stats(tape, params, input, &self.config.fallback, Need::Bound)?;
            let noise = layer.noise_var(tape, params);
            // D_i/(2σ_i²) Σ_n [ψ0 − tr(K⁻¹Φ_n)], scaled by N/|B|.
            let t = st.tcv.expect("recorded for the bound");
            let t = tape.scale(t, 0.5 * scale * layer.output_dim as f64);
            tcv.push(tape.div(t, noise));
            prop.push(st.prop.map(|pv| {
                let pv = tape.scale(pv, 0.5 * scale);
                tape.div(pv, noise)
            }));
            kl.push(st.kl.expect("recorded for the bound"));
            if l == last {
                let ell = tape.gaussian_expected_log_lik(y, st.mean, st.fvar, noise);
                let s = tape.sum(ell);
                data = Some(tape.scale(s, scale));
            } else {
                let var = tape.add_scalar_var(st.fvar, noise);
                input = LayerInput::Gaussian { mean: st.mean, var };
            }
        }
        let data = data.expect("the loop reaches the last layer");
        let mut total = data;
        for l in 0..self.layers.len() {
            total = tape.sub(total, tcv[l]);
            if let Some(pv) = prop[l] {
                total = tape.sub(total, pv);
            }
            total = tape.sub(total, kl[l]);
        }
        Ok(TermVars {
            data,
            tcv,
            prop,
            kl,
            total,
        })
    }

    /// The bound on `batch` split into its terms (scaled by N/|B| like the objective).
    ///
    /// # Errors
    /// As [`Objective::record`].
    pub fn bound_terms(&self, batch: &Batch<'_>) -> Result<BoundTerms> {
        let mut tape = Tape::new();
        let params = self.params.record(&mut tape);
        let t = self.record_terms(&mut tape, &params, batch)?;
        Ok(BoundTerms {
            data_fit: tape.scalar(t.data),
            tcv: t.tcv.iter().map(|&v| tape.scalar(v)).collect(),
            propagation: t
                .prop
                .iter()
                .map(|v| v.map_or(0.0, |v| tape.scalar(v)))
                .collect(),
            kl: t.kl.iter().map(|&v| tape.scalar(v)).collect(),
            total: tape.scalar(t.total),
        })
    }
}

impl Objective for NestedModel {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The nested bound (Hensman & Lawrence 2014, eq. 19, corrected) on a
    /// minibatch: every sum over points scaled by N/|B|, the KLs not. Deterministic (no
    /// Monte Carlo, `rng` is unused; the Matérn fallback uses fixed nodes).
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        _rng: &mut Rng,
    ) -> Result<Var> {
        Ok(self.record_terms(tape, params, batch)?.total)
    }
}
