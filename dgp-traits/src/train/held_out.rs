//! The one call a backend's `fit` makes to honour [`FitConfig::early_stopping`]:
//! [`fit_with_held_out`] (and [`fit_with_held_out_observed`] for extra observers). The
//! early-stopping summary is the report's [`crate::model::FitReport::held_out`].
//!
//! With `early_stopping: None` (or fewer rows than the rule needs,
//! [`HeldOutRule::runs_on`]) it is
//! exactly `Executor::new(stepper, cfg).observe(&mut CallerHooks::new(hooks)).run(model,
//! data)`: same batches, same noise, same numbers. With a rule it
//!
//! 1. splits the rows passed to `fit` into kept and held-out rows with the fit seed
//!    ([`HeldOutSplit::draw`]: at most [`MAX_HELD_OUT_ROWS`] rows, drawn by a rule that
//!    depends on the row count and the seed only);
//! 2. trains on the kept rows only (the executor's `N` is the kept count): a copy of
//!    them for an in-memory source, a [`RowsExcept`] view of any other source, whose
//!    held-out rows are gathered into memory ([`HeldOutSplit::split`]) — so a streamed
//!    run with early stopping equals the in-memory one bit for bit, in memory bounded by
//!    the held-out rows;
//! 3. scores the model by its own predictive NLL on the held-out rows
//!    ([`heldout_nll`]: [`Model::predict`] with [`HeldOutRule::score_samples`] samples,
//!    then [`predictive_nll`]: the mixture log density, or the log loss of the labels
//!    when the predictive carries class probabilities) inside the rule's observer ([`HeldOutStopping`] or
//!    [`LindingerObserver`]), which stops the run and restores the parameters the rule
//!    keeps.
//!
//! ```text
//! // in a backend's Model::fit:
//! let stepper = AdamStepper::new(self.config.adam.clone());
//! dgp_traits::train::fit_with_held_out(self, data, cfg, stepper, hooks)
//! ```

use crate::fit::Checkpoints;
use crate::model::{FitConfig, FitHooks, FitReport, Model, PredictConfig};
use crate::predictive::Predictive;
use crate::train::early_stopping::{
    FitSummary, HeldOutStopping, LindingerObserver, patience_held_out,
};
use crate::train::executor::Executor;
use crate::train::observer::{CallerHooks, Observer};
use crate::train::rules::HeldOutRule;
use crate::train::stepper::Stepper;
use dgp_core::{Error, Result};
use dgp_data::held_out::{MAX_HELD_OUT_ROWS, complement, draw_with_replacement};
use dgp_data::{Dataset, RowSource, RowsExcept, gather_dataset, held_out_count};
use faer::MatRef;

/// Offset of the held-out rows' seed from the fit seed (as
/// [`heldout_split`](crate::train::heldout_split)).
pub const HOLDOUT_SEED_OFFSET: u64 = 0x5EED;
/// Offset of the held-out predictions' seed from the fit seed (the Lindinger rule adds the
/// evaluation index, so every evaluation draws fresh samples as the reference does; the
/// patience rule uses the same seed at every evaluation).
pub const SCORE_SEED_OFFSET: u64 = 0x5C0E;

/// The rows an early-stopping rule holds out of `n` training rows (ascending, distinct,
/// at most [`MAX_HELD_OUT_ROWS`]); the kept rows are the others, in ascending order.
///
/// The draw depends only on the rule, `n` and the fit seed, never on where the rows are
/// stored, and its memory is the held-out rows' indices whatever `n`:
/// [`HeldOutRule::Patience`]: [`patience_held_out`] (without replacement);
/// [`HeldOutRule::Lindinger`]: the distinct rows of `min(⌊holdout_fraction · n⌋,`
/// [`MAX_HELD_OUT_ROWS`]`)` draws with replacement with seed `seed +`
/// [`HOLDOUT_SEED_OFFSET`] ([`draw_with_replacement`]; below the cap, the holdout of
/// [`dgp_data::holdout_with_replacement`], the reference's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldOutSplit {
    n: usize,
    held: Vec<usize>,
}

/// The kept (training) rows of a [`HeldOutSplit`]: copied into memory from an in-memory
/// source, or a view of a source that does not hold its rows in memory ([`RowsExcept`]:
/// the same rows in the same order, so training on either gives the same numbers).
pub enum KeptRows<'a> {
    /// The kept rows of an in-memory source, copied.
    Memory(Dataset),
    /// The kept rows of any other source, read through it.
    View(RowsExcept<'a>),
}

impl KeptRows<'_> {
    /// The kept rows as a source.
    pub fn source(&self) -> &dyn RowSource {
        match self {
            KeptRows::Memory(d) => d,
            KeptRows::View(v) => v,
        }
    }
}

impl HeldOutSplit {
    /// The split of `n` training rows for `rule` and fit seed `seed`; `None` when the rule
    /// does not run on `n` rows ([`HeldOutRule::runs_on`]: no early stopping then).
    ///
    /// # Errors
    /// Invalid rule settings, or a fraction that leaves an empty set.
    pub fn draw(rule: &HeldOutRule, n: usize, seed: u64) -> Result<Option<Self>> {
        rule.validate()?;
        if !rule.runs_on(n) {
            return Ok(None);
        }
        let held = match rule {
            HeldOutRule::Patience(es) => patience_held_out(n, es.fraction, seed)?,
            HeldOutRule::Lindinger(l) => {
                let draws =
                    held_out_count(n, l.holdout_fraction, "holdout")?.min(MAX_HELD_OUT_ROWS);
                draw_with_replacement(n, draws, seed.wrapping_add(HOLDOUT_SEED_OFFSET))
            }
        };
        Ok(Some(HeldOutSplit { n, held }))
    }

    /// Number of training rows the split was drawn for.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The held-out rows, ascending.
    pub fn held(&self) -> &[usize] {
        &self.held
    }

    /// The kept rows, ascending (`8` bytes a row: for tests and small data; training
    /// reads them through [`HeldOutSplit::split`]).
    pub fn kept(&self) -> Vec<usize> {
        complement(self.n, &self.held)
    }

    /// The kept rows of `data` and its held-out rows in memory: from an in-memory source
    /// both are copies ([`Dataset::select_rows`]); from any other source the held-out rows
    /// are gathered ([`gather_dataset`]) and the kept rows are a [`RowsExcept`] view.
    ///
    /// # Errors
    /// [`Error::Shape`](dgp_core::Error::Shape) when `data` does not have
    /// [`HeldOutSplit::n`] rows; read errors of the source.
    pub fn split<'a>(&self, data: &'a dyn RowSource) -> Result<(KeptRows<'a>, Dataset)> {
        if data.n() != self.n {
            return Err(dgp_core::Error::shape(
                "held-out split rows",
                self.n,
                data.n(),
            ));
        }
        match data.in_memory() {
            Some(d) => Ok((
                KeptRows::Memory(d.select_rows(&self.kept())?),
                d.select_rows(&self.held)?,
            )),
            None => Ok((
                KeptRows::View(RowsExcept::new(data, self.held.clone())?),
                gather_dataset(data, &self.held)?,
            )),
        }
    }
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
/// [`Error::Empty`](dgp_core::Error::Empty) for no rows; label errors for targets that
/// are not class labels of a classification predictive; the shape errors of
/// [`Predictive::log_density`].
pub fn predictive_nll(pred: &Predictive, y: MatRef<'_, f64>) -> Result<f64> {
    if y.nrows() == 0 {
        return Err(dgp_core::Error::Empty("no held-out rows to score".into()));
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
/// `cfg.early_stopping` (see the module docs; the rows may come from any source). This is
/// what a backend's `Model::fit` calls; the caller's `hooks` are attached as
/// [`CallerHooks`].
///
/// # Errors
/// Invalid early-stopping settings; [`Error::Unsupported`] when a rule would run and the
/// hooks ask for checkpoints ([`Checkpoints::every`] > 0: the rule's state is not saved,
/// so a resumed run could not equal the uninterrupted one); read errors of the held-out
/// rows; the executor's errors.
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
    let split = match &cfg.early_stopping {
        Some(rule) => HeldOutSplit::draw(rule, data.n(), cfg.seed)?,
        None => None,
    };
    if split.is_some() && Checkpoints::every(hooks) > 0 {
        return Err(Error::Unsupported(
            "held-out early stopping cannot be checkpointed yet: the rule's best parameters \
             and its count of evaluations are not part of the saved state, so a resumed run \
             would not equal an uninterrupted one; train without checkpoints or without the \
             rule"
                .into(),
        ));
    }
    let mut progress = CallerHooks::new(hooks);
    let (Some(rule), Some(split)) = (&cfg.early_stopping, split) else {
        let mut ex = Executor::new(stepper, cfg).observe(&mut progress);
        for o in extra.iter_mut() {
            ex = ex.observe(&mut **o);
        }
        return ex.run(model, data);
    };
    let (train, hold) = split.split(data)?;
    let train = train.source();
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
            let report = ex.observe(&mut stop).run(model, train)?;
            Ok(with_summary(report, stop.summary()))
        }
        HeldOutRule::Lindinger(l) => {
            let mut k = 0u64;
            let mut stop = LindingerObserver::new(l, hold.n(), |m: &M| {
                k += 1;
                heldout_nll(m, &hold, samples, seed.wrapping_add(k - 1))
            });
            let report = ex.observe(&mut stop).run(model, train)?;
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

    /// A source of `n` rows computed from the row number (x = i, y = −i): any size, no
    /// memory.
    struct Counting(usize);

    impl RowSource for Counting {
        fn n(&self) -> usize {
            self.0
        }
        fn input_dim(&self) -> usize {
            1
        }
        fn output_dim(&self) -> usize {
            1
        }
        fn gather(
            &self,
            idx: &[usize],
            mut x: faer::MatMut<'_, f64>,
            mut y: faer::MatMut<'_, f64>,
        ) -> Result<()> {
            dgp_data::check_gather(self.0, (1, 1), idx, &x, &y)?;
            for (r, &i) in idx.iter().enumerate() {
                x[(r, 0)] = i as f64;
                y[(r, 0)] = -(i as f64);
            }
            Ok(())
        }
        fn describe(&self) -> String {
            "counting rows".into()
        }
    }

    fn rules() -> [HeldOutRule; 2] {
        [
            HeldOutRule::Patience(crate::train::EarlyStopping::default()),
            HeldOutRule::lindinger(),
        ]
    }

    #[test]
    fn a_split_of_a_file_is_the_split_of_the_same_rows_in_memory() {
        let n = 500;
        let src = Counting(n);
        let mem = gather_dataset(&src, &(0..n).collect::<Vec<_>>()).unwrap();
        for rule in rules() {
            let split = HeldOutSplit::draw(&rule, n, 7).unwrap().unwrap();
            let (kf, hf) = split.split(&src).unwrap();
            let (km, hm) = split.split(&mem).unwrap();
            assert!(matches!(kf, KeptRows::View(_)) && matches!(km, KeptRows::Memory(_)));
            assert_eq!((hf.x(), hf.y()), (hm.x(), hm.y()));
            let all: Vec<usize> = (0..kf.source().n()).collect();
            let (a, b) = (
                gather_dataset(kf.source(), &all).unwrap(),
                gather_dataset(km.source(), &all).unwrap(),
            );
            assert_eq!((a.x(), a.y()), (b.x(), b.y()));
            assert_eq!(a.n() + hf.n(), n);
            assert!(split.split(&Counting(n + 1)).is_err());
        }
        // Too few rows: no early stopping.
        assert!(HeldOutSplit::draw(&rules()[0], 19, 7).unwrap().is_none());
        // A patience rule's own minimum: none below it, the usual split from it on.
        let at_least = |min_rows| {
            HeldOutRule::Patience(crate::train::EarlyStopping {
                min_rows,
                ..Default::default()
            })
        };
        assert!(HeldOutSplit::draw(&at_least(100), 99, 7).unwrap().is_none());
        assert_eq!(
            HeldOutSplit::draw(&at_least(100), 100, 7).unwrap(),
            HeldOutSplit::draw(&at_least(0), 100, 7).unwrap()
        );
    }

    #[test]
    fn the_held_out_rows_are_capped_and_bounded_whatever_the_size() {
        // 2²⁰ rows at fraction 0.5: ⌊0.5 n⌋ = 524 288 > the cap.
        let es = crate::train::EarlyStopping {
            fraction: 0.5,
            ..Default::default()
        };
        let split = HeldOutSplit::draw(&HeldOutRule::Patience(es), 1 << 20, 3)
            .unwrap()
            .unwrap();
        assert_eq!(split.held().len(), MAX_HELD_OUT_ROWS);
        // 10⁹ rows (beyond the permutation table): only the held-out rows are held; the
        // kept rows are read through a view whose row k is the k-th row not held out.
        let n = 1_000_000_000;
        let src = Counting(n);
        for rule in rules() {
            let split = HeldOutSplit::draw(&rule, n, 5).unwrap().unwrap();
            let held = split.held();
            assert!(held.len() <= MAX_HELD_OUT_ROWS && held.len() > MAX_HELD_OUT_ROWS - 10);
            assert!(held.windows(2).all(|w| w[0] < w[1]) && held[held.len() - 1] < n);
            let (kept, hold) = split.split(&src).unwrap();
            assert_eq!(kept.source().n(), n - held.len());
            assert_eq!(hold.x()[(3, 0)], held[3] as f64);
            // Kept row k just before and after the j-th held-out row.
            for j in [0, 1, held.len() / 2, held.len() - 1] {
                let k = held[j] - j; // kept rows before held[j]
                let mut x = faer::Mat::zeros(2, 1);
                let mut y = faer::Mat::zeros(2, 1);
                let idx = [k.saturating_sub(1), k];
                kept.source().gather(&idx, x.as_mut(), y.as_mut()).unwrap();
                let next = (held[j] + 1..)
                    .find(|r| held.binary_search(r).is_err())
                    .unwrap();
                assert_eq!(x[(1, 0)], next as f64, "held-out row {j}");
                if k > 0 {
                    let prev = (0..held[j]).rev().find(|r| held.binary_search(r).is_err());
                    assert_eq!(x[(0, 0)], prev.unwrap() as f64);
                }
            }
        }
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
