//! `impl Model for DgpsModel`: training by L-BFGS with random restarts (§4.3.5, §5.1.4) and
//! prediction as an equal-weight mixture over fresh sample paths (§4.3.7).

use super::model::{DgpsModel, VAR_FLOOR, owned, record_constants};
use dgp_core::rng::seeded;
use dgp_core::{Error, Result};
use dgp_data::{Dataset, RowSource, require_in_memory};
use dgp_traits::fit::{Checkpoints, FitHooks, Progress, RunControl};
use dgp_traits::model::{FitConfig, FitReport, Model, PredictConfig};
use dgp_traits::optim::LbfgsConfig;
use dgp_traits::params::ParamStore;
use dgp_traits::predictive::Predictive;
use dgp_traits::skeleton::{
    ChunkMoments, NoiseMode, check_inputs, describe_stack, model_json, predict_chunked,
};
use dgp_traits::tape::Tape;
use dgp_traits::train::{FullBatchLbfgs, best_of};
use faer::{Mat, MatRef};
use std::time::Instant;

/// Largest number of rows (test points × sample paths) pushed through the layers at once
/// when predicting.
const PREDICT_ROWS: usize = 4096;

/// Forwards L-BFGS progress of restart r as steps `r·iters + step` of `restarts·iters`.
struct RestartProgress<'a, 'h> {
    inner: &'a mut FitHooks<'h>,
    restart: usize,
    iters: usize,
    total: usize,
}

impl Progress for RestartProgress<'_, '_> {
    fn on_step(&mut self, step: usize, _total: usize, objective: f64) {
        let within = step.min(self.iters.saturating_sub(1));
        self.inner
            .on_step(self.restart * self.iters + within, self.total, objective);
    }
}

/// Restarts end when the caller asks; they save no run state (L-BFGS does not resume).
impl RunControl for RestartProgress<'_, '_> {
    fn should_stop(&self) -> bool {
        self.inner.should_stop()
    }
}

impl Checkpoints for RestartProgress<'_, '_> {}

impl DgpsModel {
    /// One restart: L-BFGS ([`FullBatchLbfgs`], at most `iters` iterations) on J with the
    /// common random numbers of stream `restart` of the fit seed.
    fn train_once(
        &mut self,
        data: &Dataset,
        lbfgs: &LbfgsConfig,
        seed: u64,
        restart: usize,
        progress: &mut RestartProgress<'_, '_>,
    ) -> Result<FitReport> {
        self.set_common_random_numbers(seed, restart as u64);
        progress.restart = restart;
        let report = FullBatchLbfgs::new(lbfgs.clone(), seed).run(self, data, progress)?;
        self.train_objective = Some(report.final_objective);
        self.restart = restart;
        Ok(report)
    }

    /// Restores a model written by [`Model::to_json`], checking its configuration and
    /// that its parameter blocks match it.
    ///
    /// # Errors
    /// [`Error::Serde`] for malformed JSON; [`Error::Config`] / [`Error::Shape`] for an
    /// edited model file outside the configuration's ranges or inconsistent with it.
    pub fn from_json(s: &str) -> Result<Self> {
        model_json::from_json_checked(
            s,
            |m: &DgpsModel| m.check_structure(),
            |m, config| {
                let n = m.config.num_inducing.saturating_mul(2);
                DgpsModel::from_checked(
                    config,
                    &model_json::synthetic_data(m.input_dim, m.output_dim, n)?,
                )
            },
            &["train_objective", "restart", "crn"],
        )
    }

    /// Moments of the last layer at `x` (len rows) for `reps` sample paths drawn from
    /// `rng` with `mode`: per output, len×R matrices (R = 1 for L = 1).
    fn path_moments(
        &self,
        tape: &mut Tape,
        x: MatRef<'_, f64>,
        reps: usize,
        mode: NoiseMode,
        rng: &mut dgp_core::rng::Rng,
    ) -> Result<(ChunkMoments, usize)> {
        tape.clear();
        let params = record_constants(&self.params, tape);
        let xv = tape.alloc_copy(x);
        let xv = tape.constant(xv);
        let prop = self.propagate_paths(tape, &params, xv, reps, mode, rng, None)?;
        let (mean, var) = (owned(tape.value(prop.mean)), owned(tape.value(prop.var)));
        let m =
            ChunkMoments::from_stacked(mean.as_ref(), var.as_ref(), x.nrows(), prop.reps, |v| {
                v.max(VAR_FLOOR)
            });
        Ok((m, prop.reps))
    }
}

impl Model for DgpsModel {
    fn backend(&self) -> &'static str {
        "dgps"
    }

    fn describe(&self) -> String {
        let extra = format!(
            "RBF{} K={} restarts={}",
            if self.config.ard { " ARD" } else { "" },
            self.config.samples,
            self.config.restarts
        );
        describe_stack("dgps", &self.widths(), self.config.num_inducing, &extra)
    }

    fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }

    /// Random restarts ([`best_of`], `DgpsConfig::restarts`), keeping the restart with the
    /// best training J: restart 0 trains the current parameters, restart r ≥ 1 a fresh
    /// smart initialisation (stream r of `init_seed`). Each runs full-batch L-BFGS
    /// ([`FullBatchLbfgs`]) for at most `min(DgpsConfig::max_iters, cfg.steps)` iterations
    /// on the whole of `data` with the common random numbers of stream r of `cfg.seed`
    /// (the thesis' "fixed random seed", §4.3.5). `batch_size` is not used. The report is the kept restart's, with the seconds of all of them.
    ///
    /// # Errors
    /// Data whose widths differ from the model's; [`Error::Numerical`] when every restart
    /// fails.
    fn fit(
        &mut self,
        data: &dyn RowSource,
        cfg: &FitConfig,
        hooks: &mut FitHooks<'_>,
    ) -> Result<FitReport> {
        let data = require_in_memory(data, "dgps", "full-batch L-BFGS")?;
        if data.input_dim() != self.input_dim || data.output_dim() != self.output_dim {
            return Err(Error::shape(
                "dgps fit: data columns (x, y)",
                format!("({}, {})", self.input_dim, self.output_dim),
                format!("({}, {})", data.input_dim(), data.output_dim()),
            ));
        }
        if cfg.early_stopping.is_some() {
            return Err(Error::config(
                "early_stopping",
                "early_stopping: not supported by dgps (its objective is a whole-data \
                 L-BFGS fit, thesis Procedure 3); leave it unset",
            ));
        }
        let start = Instant::now();
        let iters = self.config.max_iters.min(cfg.steps.max(1) as u64);
        let lbfgs = LbfgsConfig {
            max_iters: iters,
            ..self.config.lbfgs.clone()
        };
        let restarts = self.config.restarts;
        let mut progress = RestartProgress {
            inner: hooks,
            restart: 0,
            iters: iters as usize,
            total: restarts * iters as usize,
        };
        let mut reports = vec![None; restarts];
        let first = self.clone();
        let outcome = best_of(
            restarts,
            |r| {
                if r == 0 {
                    Ok(first.clone())
                } else {
                    DgpsModel::with_restart(first.config.clone(), data, r as u64)
                }
            },
            |m, r| {
                let rep = m.train_once(data, &lbfgs, cfg.seed, r, &mut progress)?;
                reports[r] = Some(rep.clone());
                Ok(rep)
            },
            |m| m.train_objective.map_or(f64::NAN, |j| -j),
        )?;
        let Some((best, _)) = outcome.best else {
            return Err(Error::Numerical(format!(
                "dgps: all {restarts} restarts failed to train"
            )));
        };
        *self = best;
        let mut report = reports[self.restart].take().unwrap_or_default();
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }

    /// The equal-weight mixture over `cfg.samples` fresh sample paths (§4.3.7; the thesis
    /// uses 100): path s draws every hidden unit from its FITC conditional independently
    /// per point (eq. 4.14) and gives component s, `N(μ_s(x), σ²_s(x))` of the last layer
    /// (whose kernel holds the noise, so nothing is added). One component for L = 1.
    /// Predicted in chunks of at most 4096 rows (points × paths), chunk k with noise
    /// stream k of `cfg.seed`, so the result does not depend on the number of threads.
    fn predict(&self, x: MatRef<'_, f64>, cfg: &PredictConfig) -> Result<Predictive> {
        check_inputs("dgps predict", x, self.input_dim)?;
        let reps = if self.layers.len() > 1 {
            cfg.samples.max(1)
        } else {
            1
        };
        let chunk = (PREDICT_ROWS / reps).max(1);
        let moments = predict_chunked(x.nrows(), chunk, cfg.seed, |tape, s, len, rng| {
            self.path_moments(tape, x.subrows(s, len), reps, NoiseMode::PerPoint, rng)
                .map(|(m, _)| m)
        })?;
        Predictive::equal_weights(moments.means, moments.vars)
    }

    fn to_json(&self) -> Result<String> {
        model_json::to_json(self)
    }

    /// `count` coherent sample paths: one noise draw per path and hidden unit shared by
    /// all points (`NoiseMode::PerPath`), each path's last-layer mean at the rows of `x`.
    fn function_samples(
        &self,
        x: MatRef<'_, f64>,
        count: usize,
        seed: u64,
    ) -> Result<Option<Mat<f64>>> {
        check_inputs("dgps function_samples", x, self.input_dim)?;
        let mut tape = Tape::new();
        let count = count.max(1);
        let (m, reps) =
            self.path_moments(&mut tape, x, count, NoiseMode::PerPath, &mut seeded(seed))?;
        let mu = &m.means[0];
        Ok(Some(Mat::from_fn(x.nrows(), count, |i, s| {
            mu[(i, s % reps)]
        })))
    }
}
