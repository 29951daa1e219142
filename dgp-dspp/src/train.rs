//! The DSPP training loop: Adam on the objective of eq. (21) with learning-rate drops,
//! optional random restarts (paper App. A.2) and early stopping on a held-out part of the
//! training data.
//!
//! Why early stopping: eq. (21) is a *predictive* likelihood, maximised directly. On small
//! data sets (a few hundred points, M ≳ N/4) it can be driven up without bound by shrinking
//! the noise and latent variances at the training inputs — the training NLL keeps falling
//! while the held-out NLL explodes (the failure mode of GPyTorch's DSPP on boston and
//! concrete: noise at its 1e-4 floor, test NLL 13 and 26). The β·KL/N term regularises
//! q(v) only, not the inducing inputs and kernel hyperparameters, so it cannot prevent
//! this. Monitoring the NLL of held-out training rows and keeping the best parameters is
//! the validation protocol of the paper (which never trains on its validation split)
//! applied to the number of steps.

use crate::model::Dspp;
use dgp_traits::data::{Dataset, Minibatches, gather_rows_into, validation_split};
use dgp_traits::error::{Error, Result};
use dgp_traits::model::{Batch, FitConfig, FitObserver, FitReport, Model, Objective, Silent};
use dgp_traits::optim::{Adam, AdamConfig};
use dgp_traits::rng::stream;
use dgp_traits::tape::Tape;
use faer::{Mat, Par};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// How often (in steps) the objective is kept in [`FitReport::history`].
const HISTORY_EVERY: usize = 10;

/// Training data with fewer rows than this are never split for early stopping.
pub const MIN_ROWS_FOR_EARLY_STOPPING: usize = 20;

/// Early stopping on held-out training rows (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EarlyStopping {
    /// Fraction of the rows passed to `fit` that are held out (drawn with the fit seed);
    /// default 2/17, the validation share of the paper's 15:3:2 partition.
    pub fraction: f64,
    /// Held-out NLL is evaluated every this many steps; 0 = automatically
    /// `max(1, steps / 100)`.
    pub every: usize,
    /// Stop after this many evaluations without improvement; 0 = run all steps (the best
    /// parameters are restored either way).
    pub patience: usize,
}

impl Default for EarlyStopping {
    fn default() -> Self {
        EarlyStopping {
            fraction: 2.0 / 17.0,
            every: 0,
            patience: 20,
        }
    }
}

impl EarlyStopping {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if !(self.fraction > 0.0 && self.fraction < 1.0) {
            return Err(Error::Config(
                "dspp: early_stopping.fraction must be in (0, 1)".into(),
            ));
        }
        Ok(())
    }
}

/// What the last call of `fit` did, for diagnostics (kept in the model).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FitSummary {
    /// Optimisation steps taken (after restarts).
    pub steps: usize,
    /// Step whose parameters were kept (early stopping), if any.
    pub best_step: Option<usize>,
    /// Held-out NLL (model units) of the kept parameters, if early stopping ran.
    pub best_heldout_nll: Option<f64>,
    /// Rows held out for early stopping (0 when it did not run).
    pub heldout_rows: usize,
    /// Whether training stopped on a numerical failure after a good checkpoint existed.
    pub stopped_on_numerical_failure: bool,
}

/// The rows `(kept, held out)` of a data set of `n` rows that [`Model::fit`] of a
/// [`Dspp`] uses for early stopping with held-out `fraction` and fit seed `seed`.
///
/// # Errors
/// As [`validation_split`].
pub fn heldout_split(n: usize, fraction: f64, seed: u64) -> Result<(Vec<usize>, Vec<usize>)> {
    let all: Vec<usize> = (0..n).collect();
    validation_split(&all, fraction, seed.wrapping_add(0x5EED))
}

/// Negative mean log density, `+∞` when the model cannot be evaluated.
fn heldout_nll(model: &Dspp, val: &Dataset) -> f64 {
    match model.mean_log_density(val) {
        Ok(v) if v.is_finite() => -v,
        _ => f64::INFINITY,
    }
}

/// Adam for `cfg.steps` minibatch steps on `train`, with the learning-rate drops of the
/// model's configuration, evaluating `val` (if any) every `every` steps and restoring the
/// best parameters at the end.
fn adam_loop(
    model: &mut Dspp,
    train: &Dataset,
    val: Option<&Dataset>,
    cfg: &FitConfig,
    adam_cfg: AdamConfig,
    es: Option<&crate::train::EarlyStopping>,
    observer: &mut dyn FitObserver,
) -> Result<(FitReport, FitSummary)> {
    let n = train.n();
    let b = if cfg.batch_size == 0 || cfg.batch_size >= n {
        n
    } else {
        cfg.batch_size
    };
    let mut batches = Minibatches::new(n, b, cfg.seed)?;
    let mut noise = stream(cfg.seed, 1);
    let mut adam = Adam::new(adam_cfg, model.params().num_free())?;
    let mut xb = Mat::<f64>::zeros(b, train.input_dim());
    let mut yb = Mat::<f64>::zeros(b, train.output_dim());
    let mut tape = Tape::with_par(Par::rayon(0));
    let mut flat = model.params().flat();
    let mut report = FitReport::default();
    let mut summary = FitSummary {
        heldout_rows: val.map_or(0, |v| v.n()),
        ..Default::default()
    };
    let every = match es {
        Some(e) if e.every > 0 => e.every,
        _ => (cfg.steps / 100).max(1),
    };
    let patience = es.map_or(0, |e| e.patience);
    let mut best: Option<(f64, Vec<f64>, usize)> =
        val.map(|v| (heldout_nll(model, v), flat.clone(), 0));
    let mut since_best = 0;
    let start = Instant::now();
    for step in 0..cfg.steps {
        let idx = batches.next_batch();
        gather_rows_into(train.x(), idx, xb.as_mut());
        gather_rows_into(train.y(), idx, yb.as_mut());
        let batch = Batch::new(xb.as_ref(), yb.as_ref(), n)?;
        let (value, grad) = match model.value_and_grad(&mut tape, &batch, &mut noise) {
            Ok(vg) => vg,
            Err(e @ (Error::Numerical(_) | Error::NotPositiveDefinite { .. })) => {
                // Past a good checkpoint, a numerical failure ends training (the
                // checkpoint is restored below); otherwise it is the caller's error.
                if best.as_ref().is_some_and(|(v, _, _)| v.is_finite()) {
                    summary.stopped_on_numerical_failure = true;
                    break;
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        adam.ascend(&mut flat, &grad)?;
        model.params_mut().set_flat(&flat)?;
        if step % HISTORY_EVERY == 0 || step + 1 == cfg.steps {
            report.history.push((step, value));
        }
        report.final_objective = value;
        report.steps = step + 1;
        observer.on_step(step, cfg.steps, value);
        if let (Some(v), Some(bst)) = (val, best.as_mut())
            && ((step + 1) % every == 0 || step + 1 == cfg.steps)
        {
            let nll = heldout_nll(model, v);
            if nll < bst.0 {
                *bst = (nll, flat.clone(), step + 1);
                since_best = 0;
            } else {
                since_best += 1;
                if patience > 0 && since_best >= patience {
                    break;
                }
            }
        }
    }
    summary.steps = report.steps;
    if let Some((nll, params, at)) = best {
        model.params_mut().set_flat(&params)?;
        summary.best_step = Some(at);
        summary.best_heldout_nll = Some(nll);
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok((report, summary))
}

/// [`Model::fit`] of [`Dspp`]: restarts, then the main Adam loop, with early stopping
/// when configured.
pub(crate) fn fit(
    model: &mut Dspp,
    data: &Dataset,
    cfg: &FitConfig,
    observer: &mut dyn FitObserver,
) -> Result<FitReport> {
    if data.n() == 0 {
        return Err(Error::Empty("dspp fit: no training rows".into()));
    }
    let es = model.config().early_stopping.clone();
    let split = match &es {
        Some(e) if data.n() >= MIN_ROWS_FOR_EARLY_STOPPING => {
            e.validate()?;
            let (fit_idx, val_idx) = heldout_split(data.n(), e.fraction, cfg.seed)?;
            Some((data.select_rows(&fit_idx)?, data.select_rows(&val_idx)?))
        }
        _ => None,
    };
    let (train, val) = match &split {
        Some((t, v)) => (t, Some(v)),
        None => (data, None),
    };
    let mut seconds = 0.0;
    let mut steps = cfg.steps;
    let restarts = model.config().restarts;
    if restarts > 1 && cfg.steps > 1 {
        let pre = ((cfg.steps as f64 * model.config().restart_fraction).round() as usize)
            .clamp(1, cfg.steps - 1);
        let mut best: Option<(f64, Dspp)> = None;
        for r in 0..restarts {
            let mut cand = if r == 0 {
                model.clone()
            } else {
                let c = crate::DsppConfig {
                    init_seed: model.config().init_seed.wrapping_add(1000 * r as u64),
                    ..model.config().clone()
                };
                Dspp::new(c, train)?
            };
            let pre_cfg = FitConfig {
                steps: pre,
                seed: cfg.seed.wrapping_add(r as u64),
                ..cfg.clone()
            };
            let adam = AdamConfig::with_lr(cfg.learning_rate);
            // A candidate that fails numerically is simply not kept.
            let Ok((rep, _)) = adam_loop(&mut cand, train, None, &pre_cfg, adam, None, &mut Silent)
            else {
                continue;
            };
            seconds += rep.seconds;
            let score = match val {
                Some(v) => heldout_nll(&cand, v),
                None => -cand.mean_log_density(train).unwrap_or(f64::NEG_INFINITY),
            };
            if score.is_finite() && best.as_ref().is_none_or(|(s, _)| score < *s) {
                best = Some((score, cand));
            }
        }
        let (_, winner) = best
            .ok_or_else(|| Error::Numerical("dspp fit: every restart failed numerically".into()))?;
        // The winner keeps its own configuration: its `init_seed` records which restart won.
        *model = winner;
        steps = cfg.steps - pre;
    }
    let main_cfg = FitConfig {
        steps,
        ..cfg.clone()
    };
    let adam = model.adam_config(cfg.learning_rate, steps);
    let (mut report, summary) =
        adam_loop(model, train, val, &main_cfg, adam, es.as_ref(), observer)?;
    report.seconds += seconds;
    model.set_fit_summary(summary);
    Ok(report)
}
