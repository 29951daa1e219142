//! The one call a backend's `fit` makes to honour [`FitConfig::early_stopping`]:
//! [`fit_with_held_out`] (and [`fit_with_held_out_observed`] for extra observers). The
//! early-stopping summary is the report's [`crate::model::FitReport::held_out`].
//!
//! With `early_stopping: None` (or fewer than [`MIN_ROWS_FOR_EARLY_STOPPING`] rows) it is
//! exactly `Executor::new(stepper, cfg).observe(&mut CallerHooks::new(hooks)).run(model,
//! data)`: same batches, same noise, same numbers. With a rule it
//!
//! 1. splits the rows passed to `fit` into kept and held-out rows with the fit seed
//!    ([`HeldOutRule::Patience`]: [`heldout_split`], without replacement;
//!    [`HeldOutRule::Lindinger`]: [`holdout_with_replacement`] with seed `cfg.seed +
//!    0x5EED`, the reference's draw with replacement);
//! 2. trains on the kept rows only (the executor's `N` is the kept count);
//! 3. scores the model by its own predictive NLL on the held-out rows
//!    ([`heldout_nll`]: [`Model::predict`] with [`HeldOutRule::score_samples`] samples,
//!    then [`predictive_nll`]: the mixture log density, or the log loss of the labels
//!    when the predictive carries class probabilities) inside the rule's observer ([`HeldOutStopping`] or
//!    [`LindingerObserver`]), which stops the run and restores the parameters the rule
//!    keeps.
//!
//! ```text
//! // in a backend's Model::fit:
//! let stepper = AdamStepper::new(cfg.adam());
//! dgp_traits::train::fit_with_held_out(self, data, cfg, stepper, hooks)
//! ```

use crate::data::{Dataset, RowSource, holdout_with_replacement, require_in_memory};
use crate::error::Result;
use crate::model::{FitConfig, FitHooks, FitReport, Model, PredictConfig};
use crate::predictive::Predictive;
use crate::train::early_stopping::{
    FitSummary, HeldOutStopping, LindingerObserver, MIN_ROWS_FOR_EARLY_STOPPING, heldout_split,
};
use crate::train::executor::Executor;
use crate::train::observer::{CallerHooks, Observer};
use crate::train::rules::HeldOutRule;
use crate::train::stepper::Stepper;
use faer::MatRef;

/// Offset of the held-out rows' seed from the fit seed (as [`heldout_split`]).
pub const HOLDOUT_SEED_OFFSET: u64 = 0x5EED;
/// Offset of the held-out predictions' seed from the fit seed (the Lindinger rule adds the
/// evaluation index, so every evaluation draws fresh samples as the reference does; the
/// patience rule uses the same seed at every evaluation).
pub const SCORE_SEED_OFFSET: u64 = 0x5C0E;

/// `(kept, held_out)` rows of `n` training rows for `rule` and fit seed `seed`; `None`
/// when `n` < [`MIN_ROWS_FOR_EARLY_STOPPING`] (no early stopping then).
///
/// # Errors
/// Invalid rule settings, or a fraction that leaves an empty set.
pub fn held_out_rows(
    rule: &HeldOutRule,
    n: usize,
    seed: u64,
) -> Result<Option<(Vec<usize>, Vec<usize>)>> {
    rule.validate()?;
    if n < MIN_ROWS_FOR_EARLY_STOPPING {
        return Ok(None);
    }
    let split = match rule {
        HeldOutRule::Patience(es) => heldout_split(n, es.fraction, seed)?,
        HeldOutRule::Lindinger(l) => holdout_with_replacement(
            n,
            l.holdout_fraction,
            seed.wrapping_add(HOLDOUT_SEED_OFFSET),
        )?,
    };
    Ok(Some(split))
}

/// The model's held-out score on `heldout` (model units), predicted with `samples`
/// samples and seed `seed` ([`predictive_nll`]); `+∞` when prediction or scoring fails or
/// the score is not finite.
pub fn heldout_nll<M: Model + ?Sized>(
    model: &M,
    heldout: &Dataset,
    samples: usize,
    seed: u64,
) -> f64 {
    let cfg = PredictConfig { samples, seed };
    match model
        .predict(heldout.x(), &cfg)
        .and_then(|p| predictive_nll(&p, heldout.y()))
    {
        Ok(v) if v.is_finite() => v,
        _ => f64::INFINITY,
    }
}

/// The mean negative log predictive probability of the targets `y` under `pred`, through
/// the model's likelihood:
///
/// * a classification predictive (it carries class probabilities `p_nc`, N×K): the log
///   loss `−(1/N) Σ_n log p_{n,y_n}` of the labels `y` (one column of integers in
///   `0..K`; see [`crate::classification::log_loss`]);
/// * otherwise the mixture density, `−(1/N) Σ_n log Σ_s w_s N(y_n | μ_ns, v_ns)`
///   ([`Predictive::log_density`]).
///
/// # Errors
/// [`Error::Empty`](crate::error::Error::Empty) for no rows; label errors for targets that
/// are not class labels of a classification predictive; the shape errors of
/// [`Predictive::log_density`].
pub fn predictive_nll(pred: &Predictive, y: MatRef<'_, f64>) -> Result<f64> {
    if y.nrows() == 0 {
        return Err(crate::error::Error::Empty(
            "no held-out rows to score".into(),
        ));
    }
    if let Some(p) = pred.class_probs() {
        let labels = crate::classification::class_labels(y, p.ncols())?;
        let probs = crate::classification::ClassProbs::new(p.to_owned())?;
        return crate::classification::log_loss(&probs, &labels);
    }
    let v = pred.log_density(y)?;
    Ok(-v.iter().sum::<f64>() / v.len() as f64)
}

/// Trains `model` on the rows of `data` with `stepper` on the core executor, honouring
/// `cfg.early_stopping` (see the module docs; early stopping needs the rows in memory). This is what a backend's `Model::fit`
/// calls; the caller's `hooks` are attached as [`CallerHooks`].
///
/// # Errors
/// Invalid early-stopping settings; the executor's errors.
pub fn fit_with_held_out<M, S>(
    model: &mut M,
    data: &dyn RowSource,
    cfg: &FitConfig,
    stepper: S,
    hooks: &mut FitHooks<'_>,
) -> Result<FitReport>
where
    M: Model,
    S: Stepper<M>,
{
    fit_with_held_out_observed(model, data, cfg, stepper, hooks, &mut [])
}

/// [`fit_with_held_out`] with `extra` observers (after progress, before the rule's
/// observer, e.g. a sampler's collector or model snapshots); the rule's [`FitSummary`] is
/// the report's [`FitReport::held_out`] (`None` when no early stopping ran).
///
/// # Errors
/// As [`fit_with_held_out`].
pub fn fit_with_held_out_observed<M, S>(
    model: &mut M,
    data: &dyn RowSource,
    cfg: &FitConfig,
    stepper: S,
    hooks: &mut FitHooks<'_>,
    extra: &mut [&mut dyn Observer<M>],
) -> Result<FitReport>
where
    M: Model,
    S: Stepper<M>,
{
    let mut progress = CallerHooks::new(hooks);
    let rows = match &cfg.early_stopping {
        Some(rule) => held_out_rows(rule, data.n(), cfg.seed)?,
        None => None,
    };
    let (Some(rule), Some((kept, held))) = (&cfg.early_stopping, rows) else {
        let mut ex = Executor::new(stepper, cfg).observe(&mut progress);
        for o in extra.iter_mut() {
            ex = ex.observe(&mut **o);
        }
        return ex.run(model, data);
    };
    let data = require_in_memory(data, "held-out early stopping", "it splits rows off")?;
    let train = data.select_rows(&kept)?;
    let hold = data.select_rows(&held)?;
    let samples = rule.score_samples();
    let seed = cfg.seed.wrapping_add(SCORE_SEED_OFFSET);
    let mut ex = Executor::new(stepper, cfg).observe(&mut progress);
    for o in extra.iter_mut() {
        ex = ex.observe(&mut **o);
    }
    match rule {
        HeldOutRule::Patience(es) => {
            let mut stop =
                HeldOutStopping::new(es, hold.n(), |m: &M| heldout_nll(m, &hold, samples, seed));
            let report = ex.observe(&mut stop).run(model, &train)?;
            Ok(with_summary(report, stop.summary()))
        }
        HeldOutRule::Lindinger(l) => {
            let mut k = 0u64;
            let mut stop = LindingerObserver::new(l, hold.n(), |m: &M| {
                k += 1;
                heldout_nll(m, &hold, samples, seed.wrapping_add(k - 1))
            });
            let report = ex.observe(&mut stop).run(model, &train)?;
            Ok(with_summary(report, stop.summary()))
        }
    }
}

/// `report` with [`FitReport::held_out`] set to `summary`.
fn with_summary(mut report: FitReport, summary: &FitSummary) -> FitReport {
    report.held_out = Some(summary.clone());
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::{Mat, mat};

    #[test]
    fn classification_is_scored_by_the_log_loss_of_the_labels() {
        // Latent means/variances (one output) with attached class probabilities: the
        // score must be the labels' log loss, not a Gaussian density of the labels.
        let pred = Predictive::single_gaussian(mat![[0.3], [-1.0]], mat![[0.5], [0.2]])
            .unwrap()
            .with_class_probs(mat![[0.2, 0.8], [0.9, 0.1]])
            .unwrap();
        let y = mat![[1.0], [0.0]];
        let want = -(0.8f64.ln() + 0.9f64.ln()) / 2.0;
        let got = predictive_nll(&pred, y.as_ref()).unwrap();
        assert!((got - want).abs() < 1e-14, "{got} vs {want}");
        // Labels outside 0..K are an error, not a score.
        assert!(predictive_nll(&pred, mat![[2.0], [0.0]].as_ref()).is_err());
    }

    #[test]
    fn regression_is_scored_by_the_mixture_density() {
        let pred = Predictive::single_gaussian(mat![[0.0]], mat![[1.0]]).unwrap();
        let got = predictive_nll(&pred, mat![[0.0]].as_ref()).unwrap();
        let want = 0.5 * (2.0 * std::f64::consts::PI).ln();
        assert!((got - want).abs() < 1e-14);
        assert!(predictive_nll(&pred, Mat::<f64>::zeros(0, 1).as_ref()).is_err());
    }
}
