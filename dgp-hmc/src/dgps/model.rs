//! The DGPS model: propagation of sample paths (Procedures 1–2), the objective J of
//! Procedure 3 with fixed common random numbers, and the predictive mixture (§4.3.7).

use super::config::DgpsConfig;
use super::init::smart_init;
use super::unit::GpUnit;
use dgp_core::rng::{Rng, stream};
use dgp_core::{Error, Result};
use dgp_data::Dataset;
use dgp_traits::backend::Checked;
use dgp_traits::model::{Batch, Objective};
use dgp_traits::params::ParamStore;
use dgp_traits::skeleton::{
    NoiseMode, Propagated, check_batch, propagate, reparam_sample, tile_rows,
};
use dgp_traits::tape::{Tape, Var};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// Smallest variance a sampled hidden unit or a predictive component is given (the FITC
/// variance with the noise inside the kernel is ≥ s_n² > 0 in exact arithmetic; this
/// only guards against round-off).
pub(crate) const VAR_FLOOR: f64 = 1e-12;

/// A deep GP trained by the Deep Gaussian Process Sampling algorithm of Vafa (2016): per
/// GP unit its own pseudo data and kernel ([`GpUnit`]), point estimates of everything,
/// maximising the objective J of Procedure 3 with K fixed sample paths. See the module
/// docs of [`crate::dgps`] for the equations and an example.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DgpsModel {
    pub(crate) config: DgpsConfig,
    /// Units per layer, first to last.
    pub(crate) layers: Vec<Vec<GpUnit>>,
    pub(crate) params: ParamStore,
    pub(crate) input_dim: usize,
    pub(crate) output_dim: usize,
    /// Seed and stream of the common random numbers of the objective.
    pub(crate) crn: (u64, u64),
    /// Training objective J of the last fit (the restart that was kept).
    pub(crate) train_objective: Option<f64>,
    /// Which restart the last fit kept.
    pub(crate) restart: usize,
}

impl DgpsModel {
    /// An untrained model for `data` (model units: standardise first) with the smart
    /// initialisation of §5.1.3 (restart 0; see [`crate::dgps::init`]) and common random
    /// numbers from seed 0 (`fit` sets them from its seed).
    ///
    /// # Errors
    /// An invalid configuration (the error names the field); initialisation failures.
    pub fn new(config: DgpsConfig, data: &Dataset) -> Result<Self> {
        Self::from_checked(Checked::new(config)?, data)
    }

    /// [`DgpsModel::new`] from a configuration already validated ([`Checked`]); it is not
    /// validated again.
    ///
    /// # Errors
    /// Initialisation failures.
    pub fn from_checked(config: Checked<DgpsConfig>, data: &Dataset) -> Result<Self> {
        Self::with_restart(config.into_inner(), data, 0)
    }

    /// [`DgpsModel::new`] with the initialisation of restart `restart`, for a
    /// configuration that is valid: it came through [`Checked`] (the configuration of an
    /// existing model, or [`DgpsModel::from_checked`]'s).
    pub(crate) fn with_restart(config: DgpsConfig, data: &Dataset, restart: u64) -> Result<Self> {
        let (params, layers) = smart_init(&config, data, restart)?;
        Ok(DgpsModel {
            config,
            layers,
            params,
            input_dim: data.input_dim(),
            output_dim: data.output_dim(),
            crn: (0, 0),
            train_objective: None,
            restart: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &DgpsConfig {
        &self.config
    }

    /// The units of every layer, first to last.
    pub fn layers(&self) -> &[Vec<GpUnit>] {
        &self.layers
    }

    /// The training objective J reached by the last `fit` (of the restart it kept).
    pub fn train_objective(&self) -> Option<f64> {
        self.train_objective
    }

    /// Which restart the last `fit` kept (0 before any fit).
    pub fn kept_restart(&self) -> usize {
        self.restart
    }

    /// Fixes the common random numbers of the objective: the K sample paths are drawn
    /// from stream `stream` of `seed` at every evaluation.
    pub fn set_common_random_numbers(&mut self, seed: u64, stream: u64) {
        self.crn = (seed, stream);
    }

    /// Widths D⁽⁰⁾ … D⁽ᴸ⁾.
    pub fn widths(&self) -> Vec<usize> {
        self.config.widths(self.input_dim, self.output_dim)
    }

    /// Checks a restored model: configuration ranges (once, returned checked) and that
    /// the units match it.
    pub(crate) fn check_structure(&self) -> Result<Checked<DgpsConfig>> {
        let config = Checked::new(self.config.clone())?;
        let widths = self.widths();
        if self.layers.len() != self.config.layers || self.input_dim == 0 || self.output_dim == 0 {
            return Err(Error::config(
                "model file",
                format!(
                    "has {} layers, configuration says {}",
                    self.layers.len(),
                    self.config.layers
                ),
            ));
        }
        for (l, units) in self.layers.iter().enumerate() {
            if units.len() != widths[l + 1] || units.iter().any(|u| u.kernel.input_dim != widths[l])
            {
                return Err(Error::shape(
                    format!("dgps: units of layer {}", l + 1),
                    format!("{} units on {} inputs", widths[l + 1], widths[l]),
                    format!("{} units", units.len()),
                ));
            }
            for u in units {
                u.check(&self.params, self.config.num_inducing)?;
            }
        }
        Ok(config)
    }

    /// Propagates `x` (B×D⁽⁰⁾, on the tape) through the layers (Procedure 2): layer 1 once
    /// on the B rows, then `reps` sample paths of every hidden layer (Procedure 1, eq. 4.14:
    /// `H = μ + ε ⊙ σ`, ε from `rng` per `mode`), rows replicate-major. Returns the last
    /// layer's (μ, σ²) ((reps·B)×D⁽ᴸ⁾; B×D⁽ᴸ⁾ with one replicate for L = 1) and, when
    /// `log_prior` is given, pushes every unit's `log N(ȳ | 0, K_X̄X̄)` onto it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn propagate_paths(
        &self,
        tape: &mut Tape,
        params: &[Var],
        x: Var,
        reps: usize,
        mode: NoiseMode,
        rng: &mut Rng,
        mut log_prior: Option<&mut Vec<Var>>,
    ) -> Result<Propagated> {
        let points = tape.shape(x).0;
        let jitter = self.config.jitter;
        let layer = |tape: &mut Tape, l: usize, h: Var, _: &mut Vec<_>| {
            let mut mus = Vec::with_capacity(self.layers[l].len());
            let mut vars = Vec::with_capacity(self.layers[l].len());
            for unit in &self.layers[l] {
                let prior = unit.prior(tape, params, jitter)?;
                if let Some(lp) = log_prior.as_deref_mut() {
                    lp.push(unit.log_prior(tape, params, &prior));
                }
                let (mu, var) = unit.conditional(tape, params, &prior, h);
                mus.push(mu);
                vars.push(var);
            }
            Ok((tape.concat_cols(&mus), tape.concat_cols(&vars)))
        };
        let step = |tape: &mut Tape, _: usize, mu: Var, var: Var, r: &mut usize| {
            let (mu, var) = if *r == 1 && reps > 1 {
                *r = reps;
                let [m, v] = tile_rows(tape, [mu, var], reps);
                (m, v)
            } else {
                (mu, var)
            };
            let var = tape.clamp_min(var, VAR_FLOOR);
            Ok(reparam_sample(tape, mu, var, 0.0, mode, points, *r, rng))
        };
        propagate(tape, x, self.layers.len(), layer, step)
    }

    /// `logsumexp_k [Σ_n log N(y_n | μ_kn, σ²_kn)] − log K` (1×1; Procedure 3 line 4 with
    /// eq. 4.23's 1/K) from the last layer's replicate-major moments.
    fn log_likelihood(&self, tape: &mut Tape, prop: &Propagated, y: MatRef<'_, f64>) -> Var {
        let (n, reps) = (y.nrows(), prop.reps);
        let mut yt = tape.alloc(n * reps, y.ncols());
        for j in 0..y.ncols() {
            for r in 0..n * reps {
                yt[(r, j)] = y[(r % n, j)];
            }
        }
        let yt = tape.constant(yt);
        let zero = tape.constant_scalar(0.0);
        let lp = tape.gaussian_log_predictive(yt, prop.mean, prop.var, zero);
        let per_row = tape.row_sums(lp);
        let per_path = tape.reshape_col_major(per_row, n, reps);
        let ll = tape.col_sums(per_path);
        let lse = tape.logsumexp_rows(ll);
        tape.add_scalar(lse, -(reps as f64).ln())
    }
}

impl Objective for DgpsModel {
    fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The objective J of Procedure 3 (eq. 4.25 with eq. 4.24's log-sum-exp over K
    /// whole-batch log-likelihoods):
    ///
    /// `J = logsumexp_k [Σ_n log N(y_n | μ_kn, σ²_kn)] − log K + Σ_{l,d} log N(ȳ_d⁽ˡ⁾ | 0, K_X̄X̄)`
    ///
    /// over the rows of `batch` (`fit` passes the whole training set: the log-sum-exp over
    /// whole-data log-likelihoods does not split over minibatches). The K sample paths use
    /// the model's fixed common random numbers ([`DgpsModel::set_common_random_numbers`]), not
    /// `rng`, so J is a deterministic function of the parameters. With L = 1 there is
    /// nothing to sample and J is the FITC log-likelihood plus the prior (K plays no role).
    fn record(
        &self,
        tape: &mut Tape,
        params: &[Var],
        batch: &Batch<'_>,
        _rng: &mut Rng,
    ) -> Result<Var> {
        check_batch("dgps", batch, self.input_dim, self.output_dim)?;
        let mut crn = stream(self.crn.0, self.crn.1);
        let x = tape.alloc_copy(batch.x);
        let x = tape.constant(x);
        let mut priors = Vec::with_capacity(self.layers.iter().map(Vec::len).sum());
        let prop = self.propagate_paths(
            tape,
            params,
            x,
            self.config.samples,
            NoiseMode::PerPoint,
            &mut crn,
            Some(&mut priors),
        )?;
        let mut j = self.log_likelihood(tape, &prop, batch.y);
        for lp in priors {
            j = tape.add(j, lp);
        }
        Ok(j)
    }
}

/// The store's blocks recorded as constants (prediction needs no gradient).
pub(crate) fn record_constants(store: &ParamStore, tape: &mut Tape) -> Vec<Var> {
    store
        .blocks()
        .iter()
        .map(|b| {
            let v = tape.alloc_copy(b.value.as_ref());
            tape.constant(v)
        })
        .collect()
}

/// `m` copied into a fresh matrix (for moments read off a tape).
pub(crate) fn owned(m: MatRef<'_, f64>) -> Mat<f64> {
    m.to_owned()
}
