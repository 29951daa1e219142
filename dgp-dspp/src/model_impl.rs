//! `impl Model for DsppModel`: training (the scheme of [`crate::train`]), the finite-mixture
//! predictive, descriptions and the model's JSON. Kept apart from [`crate::model`] so that the
//! model module does not import the training module that imports it.

use crate::lmc::lmc_marginals;
use crate::model::{DsppModel, PREDICT_POINTS, PREDICT_ROWS};
use dgp_core::Result;
use dgp_data::RowSource;
use dgp_traits::model::{FitConfig, FitHooks, FitReport, Model, PredictConfig};
use dgp_traits::params::ParamStore;
use dgp_traits::predictive::Predictive;
use dgp_traits::skeleton::{
    check_inputs, describe_stack, finish_predictive, model_json, predict_chunked,
};
use faer::{Mat, MatRef};

impl Model for DsppModel {
    fn backend(&self) -> &'static str {
        "dspp"
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }

    fn noise_variance(&self) -> Option<f64> {
        DsppModel::noise_variance(self).and_then(|v| v.first().copied())
    }

    /// Adam on the objective with the configured learning-rate drops. With
    /// [`DsppConfig::early_stopping`](crate::DsppConfig::early_stopping) (the default), a fraction of the rows is held out,
    /// its NLL is monitored and the best parameters are kept (see [`crate::train`]); with
    /// `restarts > 1`, `restarts` differently seeded initialisations are first trained for
    /// `restart_fraction` of the steps each and the best (held-out, else training, NLL) is
    /// trained on (paper App. A.2). Any [`RowSource`] (a streamed one too: the held-out
    /// rows are read into memory and the training rows stay a view of the source, the
    /// same split as in memory; restarts need the rows in memory).
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        crate::train::fit(self, data, cfg, hooks)
    }

    /// The finite mixture of eq. (21)'s predictive: weights ω (shared by all points),
    /// per-component means and variances plus the noise variance (Gaussian); for the LMC the
    /// per-output marginals `Aᵀμ_k`, `Σ_w A_wp² v_kw + σ²_p` (the joint density is
    /// [`DsppModel::log_density`]); for a classification likelihood the latent mixture with the
    /// class probabilities `Σ_k ω_k p(y | μ_k, v_k)` attached (probit
    /// `Φ(μ_k/√(1 + v_k))`, squashed, in closed form; logit and robust-max by
    /// Gauss–Hermite; softmax by its fixed Monte Carlo draws:
    /// [`dgp_traits::likelihoods::Likelihood::class_probs_mixture`]). Deterministic:
    /// `cfg` is ignored (the number of components is fixed by the quadrature rule).
    fn predict(&self, x: MatRef<'_, f64>, _cfg: &PredictConfig) -> Result<Predictive> {
        check_inputs("dspp predict", x, self.input_dim)?;
        let chunk = (PREDICT_ROWS / self.num_components()).clamp(1, PREDICT_POINTS);
        // Guard the probit mixture against an exactly-zero latent variance (it needs v > 0).
        let floor = if self.config.likelihood.has_noise_variance() {
            0.0
        } else {
            1e-12
        };
        let moments = predict_chunked(x.nrows(), chunk, 0, |tape, s, len, _rng| {
            self.predict_chunk(tape, x.subrows(s, len), floor)
        })?;
        let moments = match self.mixing() {
            Some(a) => lmc_marginals(a, moments),
            None => moments,
        };
        let pred = finish_predictive(
            &self.config.likelihood,
            self.weights(),
            moments,
            self.noise_variance().as_deref(),
        )?;
        if self.variance_scale == 1.0 {
            return Ok(pred);
        }
        dgp_traits::calibration::scale_variances(&pred, self.variance_scale)
    }

    fn to_json(&self) -> Result<String> {
        model_json::to_json(self)
    }

    /// `count` coherent function draws for plots: each draw picks a mixture component k
    /// with probability ω_k (seeded) and returns that component's latent mean function
    /// μ_k(x) of the first output (of latent function 0 for a multiclass model) — the deterministic path of the sigma points of component
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
        let mut rng = dgp_core::rng::seeded(seed);
        let u = dgp_core::rng::standard_normal(&mut rng, count, 1);
        let means = &pred.means()[0];
        let mut out = Mat::zeros(x.nrows(), count);
        for c in 0..count {
            // A uniform draw (Φ of a normal draw), then the inverse CDF of ω.
            let p = dgp_core::special::norm_cdf(u[(c, 0)]);
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

    fn describe(&self) -> String {
        let widths = self.config.widths(self.input_dim, self.output_dim);
        let extra = format!(
            "{:?} S={} K={} beta={} q={:?} Z={}{}",
            self.config.rule,
            self.config.sites,
            self.num_components(),
            self.config.beta,
            self.config.q_cov,
            if self.trains_inducing() {
                "trained"
            } else {
                "fixed"
            },
            if self.mixing.is_some() { " LMC" } else { "" }
        );
        let extra = match self
            .fit_summary
            .as_ref()
            .and_then(|s| s.best_step.map(|b| (s, b)))
        {
            // Issue 18: the record says how long the held-out early stopping let it run.
            Some((s, best)) => format!(
                "{extra} ran={} kept_step={best} heldout_rows={}{}{}",
                s.steps,
                s.heldout_rows,
                if self.refit_steps > 0 {
                    format!(" refit_all_rows={}", self.refit_steps)
                } else {
                    String::new()
                },
                if self.variance_scale == 1.0 {
                    String::new()
                } else {
                    format!(" variance_scale={:.4}", self.variance_scale)
                }
            ),
            None => extra,
        };
        let extra = match &self.selection {
            Some(sel) => format!("{extra} {sel}"),
            None => extra,
        };
        describe_stack("dspp", &widths, self.config.num_inducing, &extra)
    }
}
