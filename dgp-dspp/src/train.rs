//! The DSPP training scheme, composed of the core's training pieces: Adam on the objective
//! of eq. (21) with learning-rate drops, optional random restarts (paper App. A.2,
//! [`dgp_traits::train::best_of`]) and early stopping on a held-out part of the training
//! data ([`HeldOutStopping`]).
//!
//! Why early stopping: eq. (21) is a *predictive* likelihood, maximised directly. On small
//! data sets (a few hundred points, M ≳ N/4) it can be driven up without bound by shrinking
//! the noise and latent variances at the training inputs — the training NLL keeps falling
//! while the held-out NLL explodes (noise at its floor; the failure mode of GPyTorch's
//! DSPP on small UCI sets). The β·KL/N term regularises q(v) only, not the inducing inputs
//! and kernel hyperparameters, so it cannot prevent this. Monitoring the NLL of held-out
//! training rows and keeping the best parameters is the validation protocol of the paper
//! (which never trains on its validation split) applied to the number of steps.
//!
//! Why the inducing inputs stay where they start on small data
//! ([`crate::DsppConfig::train_inducing_min_ratio`]: fewer than 16·M training rows;
//! GPyTorch always trains them). In the DSVI ELBO Z are variational parameters:
//! moving them tightens a bound on the evidence of a fixed model. Eq. (21) is no bound;
//! there Z are parameters of the parametric model, and M·(W+1) free inducing inputs on a
//! few hundred rows let it place them on the training inputs and interpolate (training
//! RMSE near zero, noise at its floor, one quadrature weight at 1; a larger β_reg does not
//! stop it, since the KL term does not see Z). With Z fixed the held-out optimum comes
//! later and generalises better; on large sets trained Z are better, hence the size rule.
//! The example `dspp_trace` traces the collapse.
//!
//! The refit ([`crate::DsppConfig::refit_all_rows`], on by default): once the held-out
//! rule has chosen its step k, the parameters the main loop started from are trained
//! again on every training row, the held-out ones included, for k steps with the same
//! learning-rate schedule, and that model is kept. Only with full batches (every step
//! sees every row, so k steps are k passes on either row set); with minibatches k steps
//! on more rows are fewer passes. The held-out rows choose *when* to stop and then also
//! inform the fit. Where a full batch of every row is one gradient chunk and the rayon
//! pool has a second thread, the refit runs beside the held-out run and keeps its
//! parameters at the evaluation steps (`refit` module): the same model bit for bit, in the
//! held-out run's time instead of after it. A held-out run the caller stops
//! ([`dgp_traits::fit::RunControl::should_stop`]) keeps its best parameters, without the
//! refit.
//!
//! Variance calibration ([`crate::DsppConfig::calibrate_variance`], off by default):
//! after training, the predictive's variances are scaled by the factor that maximises the
//! held-out rows' log density ([`dgp_traits::calibration`]).
//!
//! The measured effect of each of these choices is in the repository's `RESULTS.md`
//! (sections `dspp-small-data` and `dspp-small-data-ablations`).

use crate::model::DsppModel;
use crate::refit;
use dgp_core::{Error, Result};
use dgp_data::{Dataset, RowSource};
use dgp_traits::calibration::variance_scale;
use dgp_traits::model::{FitConfig, FitHooks, FitReport, Model, PredictConfig};
use dgp_traits::optim::AdamConfig;
use dgp_traits::train::{
    AdamStepper, CallerHooks, Executor, HeldOutRule, HeldOutSplit, HeldOutStopping, KeptRows,
    Observer, best_of,
};

pub use dgp_traits::train::{
    EarlyStopping, FitSummary, MIN_ROWS_FOR_EARLY_STOPPING, heldout_split,
};

/// Negative mean log density, `+∞` when the model cannot be evaluated.
fn heldout_nll(model: &DsppModel, val: &Dataset) -> f64 {
    match model.mean_log_density(val) {
        Ok(v) if v.is_finite() => -v,
        _ => f64::INFINITY,
    }
}

/// The restart phase: `restarts` candidates (the model itself, then re-initialisations
/// with `init_seed + 1000·r`) trained with plain Adam for `pre` steps (seed `seed + r`),
/// scored by held-out NLL (else training NLL); the best replaces `model`. With held-out
/// rows and an early-stopping rule `es`, each candidate is trained under that rule too,
/// so it keeps (and is scored by) its best held-out parameters: on small data the
/// held-out optimum comes before `pre` steps, and a candidate scored after `pre` steps
/// would hand the main loop parameters already past it. Returns the
/// seconds spent. The candidates poll `stop`'s stop request ([`FitHooks::stop_only`]); when it turns
/// true the phase ends with [`Error::Interrupted`] (no candidate finished its steps).
fn restart(
    model: &mut DsppModel,
    train: &Dataset,
    val: Option<&Dataset>,
    es: Option<&EarlyStopping>,
    cfg: &FitConfig,
    pre: usize,
    stop: &FitHooks<'_>,
) -> Result<f64> {
    let out = best_of(
        model.config().restarts,
        |r| {
            if r == 0 {
                return Ok(model.clone());
            }
            let c = crate::DsppConfig {
                init_seed: model.config().init_seed.wrapping_add(1000 * r as u64),
                ..model.config().clone()
            };
            DsppModel::new(c, train)
        },
        |cand, r| {
            let pre_cfg = FitConfig {
                steps: pre,
                seed: cfg.seed.wrapping_add(r as u64),
                ..cfg.clone()
            };
            let adam = AdamConfig::with_lr(model.config().learning_rate);
            let mut only_stop = stop.stop_only();
            let mut progress = CallerHooks::new(&mut only_stop);
            let mut executor =
                Executor::new(AdamStepper::new(adam), &pre_cfg).observe(&mut progress);
            let report = match (val, es) {
                (Some(v), Some(e)) => {
                    let mut best =
                        HeldOutStopping::new(e, v.n(), |m: &DsppModel| heldout_nll(m, v));
                    executor.observe(&mut best).run(cand, train)?
                }
                _ => executor.run(cand, train)?,
            };
            if stop.should_stop() {
                return Err(Error::Interrupted(format!(
                    "dspp restarts, during restart {} of {}",
                    r + 1,
                    model.config().restarts
                )));
            }
            Ok(report)
        },
        |cand| match val {
            Some(v) => heldout_nll(cand, v),
            None => -cand.mean_log_density(train).unwrap_or(f64::NEG_INFINITY),
        },
    )?;
    let (winner, _) = out
        .best
        .ok_or_else(|| Error::Numerical("dspp fit: every restart failed numerically".into()))?;
    // The winner keeps its own configuration: its `init_seed` records which restart won.
    *model = winner;
    Ok(out.seconds)
}

/// The training rows of a fit: the kept rows of the held-out split, or every row.
enum TrainRows<'a> {
    Kept(KeptRows<'a>),
    Whole(&'a dyn RowSource),
}

impl TrainRows<'_> {
    fn source(&self) -> &dyn RowSource {
        match self {
            TrainRows::Kept(k) => k.source(),
            TrainRows::Whole(s) => *s,
        }
    }

    fn in_memory(&self) -> Option<&Dataset> {
        self.source().in_memory()
    }
}

/// [`dgp_traits::model::Model::fit`] of [`DsppModel`]: restarts, then the main Adam loop, with
/// early stopping when configured.
///
/// The held-out rows are the patience rule's ([`HeldOutSplit::draw`], from the row count
/// and the fit seed alone, at most [`dgp_data::held_out::MAX_HELD_OUT_ROWS`]);
/// from a source that does not hold its rows in memory they are read into memory and the
/// training rows are a view of the rest ([`HeldOutSplit::split`]), so a streamed fit
/// equals the in-memory fit bit for bit, in memory bounded by the held-out rows. Random
/// restarts re-initialise on the training rows in memory and are refused on such a
/// source.
pub(crate) fn fit(
    model: &mut DsppModel,
    data: &dyn RowSource,
    cfg: &FitConfig,
    hooks: &mut FitHooks<'_>,
) -> Result<FitReport> {
    if data.n() == 0 {
        return Err(Error::Empty("dspp fit: no training rows".into()));
    }
    let es = model.config().early_stopping;
    let streamed = data.in_memory().is_none();
    let split = match &es {
        Some(e) => match HeldOutSplit::draw(&HeldOutRule::Patience(*e), data.n(), cfg.seed)? {
            Some(s) => {
                let (kept, val) = s.split(data)?;
                Some((TrainRows::Kept(kept), val))
            }
            None => None,
        },
        None => None,
    };
    let whole = TrainRows::Whole(data);
    let (train, val) = match &split {
        Some((t, v)) => (t, Some(v)),
        None => (&whole, None),
    };
    if streamed && model.config().restarts > 1 {
        return Err(Error::Unsupported(format!(
            "dspp restarts on rows from {}: each restart re-initialises on the training rows \
             in memory; set restarts to 1 or load the rows into memory",
            data.describe()
        )));
    }
    // A new fit starts uncalibrated: held-out scores during training see the raw model.
    model.variance_scale = 1.0;
    model.refit_steps = 0;
    let mut seconds = 0.0;
    let mut steps = cfg.steps;
    if model.config().restarts > 1 && cfg.steps > 1 {
        let pre = ((cfg.steps as f64 * model.config().restart_fraction).round() as usize)
            .clamp(1, cfg.steps - 1);
        let Some(train) = train.in_memory() else {
            return Err(Error::Unsupported(
                "dspp restarts need the training rows in memory".into(),
            ));
        };
        seconds = restart(model, train, val, es.as_ref(), cfg, pre, &*hooks)?;
        steps = cfg.steps - pre;
    }
    let main_cfg = FitConfig {
        steps,
        ..cfg.clone()
    };
    let adam = model.adam_config(model.config().learning_rate, steps);
    // Full batches on every row: k steps are k passes over the data, on the rows the
    // held-out rule saw and on all rows alike.
    let full_batch = cfg.batch_size == 0 || cfg.batch_size >= data.n();
    let refit = model.config().refit_all_rows
        && !model.config().calibrate_variance
        && full_batch
        && val.is_some();
    let mut start = refit.then(|| model.clone());
    // Beside the held-out run only under a patience count, which bounds the refit's kept
    // parameters (from the best step on) to `patience + 2` evaluations.
    let beside = start
        .as_ref()
        .filter(|_| es.is_some_and(|e| e.patience > 0))
        .and_then(|_| refit::can_run_alongside(data, cfg));
    let mut progress = CallerHooks::new(hooks);
    let stepper = || AdamStepper::new(adam.clone());
    let mut refitted = None;
    let (mut report, summary) = match (val, es.as_ref()) {
        (Some(v), Some(e)) => {
            let rule = HeldOutStopping::new(e, v.n(), |m: &DsppModel| heldout_nll(m, v));
            match (beside, start.take()) {
                (Some(all), Some(from)) => {
                    let link = refit::Alongside::new(e.period(steps));
                    let (main, side, waited) = std::thread::scope(|s| {
                        let side = s.spawn(|| {
                            let refit = || link.refit(from, all, cfg, steps, adam.clone());
                            // The refit takes the one idle thread, its products included.
                            match rayon::ThreadPoolBuilder::new().num_threads(1).build() {
                                Ok(pool) => pool.install(refit),
                                Err(_) => refit(),
                            }
                        });
                        let done = refit::FinishOnDrop(&link);
                        let mut publishing = refit::Publishing { rule, link: &link };
                        let run = Executor::new(stepper(), &main_cfg)
                            .observe(&mut progress)
                            .observe(&mut publishing)
                            .run(model, train.source());
                        let main = run.map(|r| (r, publishing.rule.summary().clone()));
                        // A run the caller stopped ends without the refit, as below.
                        let asked = Observer::<DsppModel>::caller_hooks(&mut progress)
                            .is_some_and(|h| h.should_stop());
                        let kept = main.as_ref().ok().and_then(|(_, s)| s.best_step);
                        link.finish(kept.filter(|_| !asked));
                        drop(done);
                        let waited = std::time::Instant::now();
                        let side = side.join();
                        (main, side, waited.elapsed().as_secs_f64())
                    });
                    let side = side.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    let (mut report, summary) = main?;
                    // The refit's steps after the main loop ended.
                    report.seconds += waited;
                    refitted = side?;
                    (report, summary)
                }
                (_, from) => {
                    start = from;
                    let mut stop = rule;
                    let report = Executor::new(stepper(), &main_cfg)
                        .observe(&mut progress)
                        .observe(&mut stop)
                        .run(model, train.source())?;
                    (report, stop.summary().clone())
                }
            }
        }
        _ => {
            let report = Executor::new(stepper(), &main_cfg)
                .observe(&mut progress)
                .run(model, train.source())?;
            let summary = FitSummary {
                steps: report.steps,
                ..FitSummary::default()
            };
            (report, summary)
        }
    };
    report.seconds += seconds;
    if let (Some(done), Some(kept)) = (refitted, summary.best_step) {
        // The refit ran beside the main loop (its seconds are the main loop's).
        *model = done;
        report.steps += kept;
        model.refit_steps = kept;
    } else if let (Some(start), Some(kept)) = (start, summary.best_step)
        && !hooks.should_stop()
    {
        // A held-out run the caller stopped keeps its best parameters: the refit, which
        // would stop at its first step, is not run.
        let more = refit::refit_after(model, start, data, cfg, adam, kept, hooks)?;
        report.seconds += more.seconds;
        report.steps += more.steps;
        model.refit_steps = more.steps;
    }
    if val.is_some() {
        report.held_out = Some(summary.clone());
    }
    model.set_fit_summary(summary);
    if let Some(v) = val {
        calibrate(model, v)?;
    }
    Ok(report)
}

/// [`DsppConfig::calibrate_variance`]: sets the predictive's variance scale to the value
/// that maximises the log density of the held-out rows `val` (which training never saw).
///
/// [`DsppConfig::calibrate_variance`]: crate::DsppConfig::calibrate_variance
fn calibrate(model: &mut DsppModel, val: &Dataset) -> Result<()> {
    if !model.config().calibrate_variance || !model.calibratable() {
        return Ok(());
    }
    let pred = model.predict(val.x(), &PredictConfig::default())?;
    model.variance_scale = variance_scale(&pred, val.y())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DsppConfig;
    use dgp_traits::fit::FitHooks;
    use dgp_traits::testing::toy_regression;

    /// A restart phase under held-out early stopping never hands the main loop parameters
    /// worse on the held-out rows than those it started from; scored after its `pre` steps
    /// alone it can (here: a small, fast-overfitting fit, as on boston).
    #[test]
    fn restarts_keep_their_best_held_out_parameters() {
        let train = toy_regression(40, 2, 2.0, 3);
        let val = toy_regression(20, 2, 2.0, 4);
        let model = DsppModel::new(
            DsppConfig {
                num_inducing: 20,
                sites: 3,
                restarts: 2,
                train_inducing_min_ratio: 0.0,
                learning_rate: 0.1,
                ..Default::default()
            },
            &train,
        )
        .unwrap();
        let cfg = FitConfig::default();
        let es = EarlyStopping::default();
        let start = heldout_nll(&model, &val);
        let mut scored_at_end = model.clone();
        restart(
            &mut scored_at_end,
            &train,
            Some(&val),
            None,
            &cfg,
            600,
            &FitHooks::none(),
        )
        .unwrap();
        let mut kept_best = model.clone();
        restart(
            &mut kept_best,
            &train,
            Some(&val),
            Some(&es),
            &cfg,
            600,
            &FitHooks::none(),
        )
        .unwrap();
        let (end, best) = (
            heldout_nll(&scored_at_end, &val),
            heldout_nll(&kept_best, &val),
        );
        assert!(best <= start, "{best} > start {start}");
        assert!(best < end, "kept {best}, scored at the end {end}");
    }
}
