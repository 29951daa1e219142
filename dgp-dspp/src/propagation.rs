//! The DSPP's propagation and objective pieces: the marginals of each layer's GP blocks, the
//! lined-up propagation of sigma points (Jankowiak et al. 2020, §3, propagated as GPyTorch's `DSPPLayer` does), the per-point log
//! mixture density of eq. (21), its share of a minibatch, and prediction chunks.

use crate::lmc::LmcTape;
use crate::model::{DsppModel, PREDICT_POINTS, PREDICT_ROWS, SITE_VAR_JITTER};
use dgp_core::{Error, Result};
use dgp_data::Dataset;
use dgp_traits::layer::{QVars, marginals};
use dgp_traits::model::{Model, PredictConfig};
use dgp_traits::skeleton::{ChunkMoments, Propagated, propagate, tile_rows};
use dgp_traits::tape::{Tape, Var};
use faer::{Mat, MatRef};
use rayon::prelude::*;

impl DsppModel {
    /// Records every parameter block as a constant (prediction needs no gradient).
    pub(crate) fn record_constants(&self, tape: &mut Tape) -> Vec<Var> {
        self.params
            .blocks()
            .iter()
            .map(|b| tape.constant(b.value.clone()))
            .collect()
    }

    /// Marginals (eqs. 7–8, whitened) of every GP of layer `l` at `input`, concatenated.
    pub(crate) fn layer_marginals(
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
            let q = block.q_vars(tape, params);
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

    /// The lined-up propagation of Jankowiak et al. 2020, §3, propagated as GPyTorch's `DSPPLayer` does: layer 1 at the B inputs,
    /// then for every layer l ≥ 2 the inputs `μ + Ξ^{(l)}_k ⊙ σ` of each component k
    /// (eqs. 22–23), σ the previous layer's latent standard deviation (no noise between
    /// layers). Layer 1 is evaluated once on B rows and its marginals are tiled K times.
    pub(crate) fn propagate(&self, tape: &mut Tape, params: &[Var], x: Var) -> Result<Propagated> {
        let b = tape.shape(x).0;
        let layer = |tape: &mut Tape, l: usize, input: Var, kl: &mut Vec<(Var, QVars)>| {
            self.layer_marginals(tape, params, l, input, kl)
        };
        let step = |tape: &mut Tape, l: usize, mu: Var, var: Var, reps: &mut usize| {
            let rule = self
                .rule
                .as_ref()
                .ok_or_else(|| Error::config("rule", "L ≥ 2 needs a quadrature rule"))?;
            let v = tape.clamp_min(var, 0.0);
            let v = tape.add_scalar(v, SITE_VAR_JITTER);
            let mut sd = tape.sqrt(v);
            let mut mu = mu;
            if l == 0 {
                *reps = rule.components;
                if *reps > 1 {
                    [mu, sd] = tile_rows(tape, [mu, sd], *reps);
                }
            }
            let free = self.layers[l + 1].sites.map(|id| id.var(params));
            let full = rule.record_full(tape, free);
            let xi = rule.record_tiled(tape, full, b);
            let shift = tape.mul(xi, sd);
            Ok(tape.add(mu, shift))
        };
        propagate(tape, x, self.layers.len(), layer, step)
    }

    /// Per-row `log p(y_i | component k)` (R×1, rows `k·B + i`): the one place the
    /// likelihood enters eq. (21). Component k's latent functions are the independent
    /// Gaussians `N(μ_k, v_k)` of the last layer at its sigma point, and the term is the
    /// likelihood's predictive `log ∫ p(y | f) N(f | μ_k, v_k) df`
    /// ([`dgp_traits::likelihoods::Likelihood::log_predictive_fixed`]): Gaussian
    /// `log N(y | μ_k, v_k + σ²)` and probit `log Φ(±μ_k/√(1 + v_k))` (squashed) in
    /// closed form; logit and robust-max by Gauss–Hermite quadrature (robust-max:
    /// `log[P_y(1 − ε) + (1 − P_y) ε/(K − 1)]`, `P_y` the 1-D quadrature over `f_y` of
    /// `Π_{j≠y} Φ((f_y − μ_j)/√v_j)`); softmax by Monte Carlo over the last layer,
    /// `log (1/S) Σ_s softmax_y(μ_k + √v_k ⊙ ε_s)` with the likelihood's fixed antithetic
    /// predictive draws, so the objective stays deterministic.
    pub(crate) fn component_log_lik(
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
            .log_predictive_fixed(tape, yv, prop.mean, prop.var, noise)?;
        Ok(if p > 1 { tape.row_sums(lp) } else { lp })
    }

    /// Per-point log predictive densities of eq. (21) on the tape (B×1):
    /// `logsumexp_k(log ω_k + log p(y_i | component k))`.
    pub(crate) fn record_log_mixture(
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
    /// couple outputs — [`Predictive`](dgp_traits::predictive::Predictive) only holds their marginals).
    ///
    /// # Errors
    /// Shape errors for `x`/`y`, numerical failures.
    pub fn log_density(&self, x: MatRef<'_, f64>, y: MatRef<'_, f64>) -> Result<Vec<f64>> {
        self.check_xy(x, y)?;
        if self.variance_scale != 1.0 {
            // Calibrated (Gaussian, no LMC): the mixture of the scaled predictive.
            return self.predict(x, &PredictConfig::default())?.log_density(y);
        }
        let mut tape = Tape::new();
        let params = self.record_constants(&mut tape);
        let (pp, _) = self.record_log_mixture(&mut tape, &params, x, y)?;
        let v = tape.value(pp);
        Ok((0..v.nrows()).map(|i| v[(i, 0)]).collect())
    }

    pub(crate) fn check_xy(&self, x: MatRef<'_, f64>, y: MatRef<'_, f64>) -> Result<()> {
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
        dgp_core::check_finite("dspp inputs", x)?;
        self.config.likelihood.check_targets(y)
    }

    /// Component means and variances (latent, no noise, clamped at `floor`) for one chunk
    /// of test inputs: per latent output an n×K matrix. `tape` is cleared first.
    pub(crate) fn predict_chunk(
        &self,
        tape: &mut Tape,
        x: MatRef<'_, f64>,
        floor: f64,
    ) -> Result<ChunkMoments> {
        tape.clear();
        let params = self.record_constants(tape);
        let xv = tape.constant(x.to_owned());
        let prop = self.propagate(tape, &params, xv)?;
        Ok(ChunkMoments::from_stacked(
            tape.value(prop.mean),
            tape.value(prop.var),
            x.nrows(),
            prop.reps,
            |v| v.max(floor),
        ))
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
