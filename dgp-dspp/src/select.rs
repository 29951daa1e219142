//! Selection of β_reg and the hidden width on a validation part of the training data
//! (paper App. A.2: β_reg ∈ {0.01, 0.05, 0.2, 1.0}, W ∈ {3, 5}, chosen on the validation
//! split of a 15:3:2 train/test/validation partition — never on test data), and, for a
//! deep model, optionally between it and its one-layer special case PPGPR (eq. 16) on the
//! same validation rows ([`select_model`]).

use crate::config::DsppConfig;
use crate::model::DsppModel;
use dgp_core::{Error, Result};
use dgp_data::{Dataset, validation_split};
use dgp_traits::model::{FitConfig, FitHooks, Model};
use serde::{Deserialize, Serialize};

/// Fraction of the training rows held out for validation: 2/17, the validation share of
/// the paper's 15:3:2 train/test/validation proportions once test is set aside.
pub const VALIDATION_FRACTION: f64 = 2.0 / 17.0;

/// The paper's β_reg grid for DSPPs (App. A.2).
pub const PAPER_BETAS: [f64; 4] = [0.01, 0.05, 0.2, 1.0];

/// The paper's hidden-width grid for 2-layer models (App. A.2).
pub const PAPER_WIDTHS: [usize; 2] = [3, 5];

/// Validation result of one (layers, β, width) candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelectionScore {
    /// Number of GP layers L of the candidate (1: PPGPR).
    pub layers: usize,
    /// β_reg.
    pub beta: f64,
    /// Hidden width W.
    pub width: usize,
    /// Mean negative log predictive density on the validation rows (model units);
    /// `+∞` when training failed numerically.
    pub val_nll: f64,
    /// Training steps the candidate ran (after held-out early stopping; 0 when it failed).
    #[serde(default)]
    pub steps: usize,
    /// Step whose parameters the candidate kept (held-out early stopping), if it ran.
    #[serde(default)]
    pub best_step: Option<usize>,
}

/// Chooses β_reg (and the hidden width) by validation NLL: [`select_model`] without the
/// one-layer candidates. Returns the best `(beta, width)` and all scores in grid order.
///
/// # Errors
/// As [`select_model`].
pub fn select_beta(
    train: &Dataset,
    base: &DsppConfig,
    betas: &[f64],
    widths: &[usize],
    fit: &FitConfig,
    seed: u64,
    stop: &FitHooks<'_>,
) -> Result<(f64, usize, Vec<SelectionScore>)> {
    let s = select_model(train, base, betas, widths, false, fit, seed, stop)?;
    Ok((s.beta, s.width, s.scores))
}

/// The outcome of [`select_model`]: the chosen layer count, β_reg and width, and the
/// validation score of every candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// Chosen number of layers: the base configuration's, or 1 when a one-layer
    /// candidate (PPGPR) scored best.
    pub layers: usize,
    /// Chosen β_reg.
    pub beta: f64,
    /// Chosen hidden width (the base configuration's when one layer is chosen).
    pub width: usize,
    /// Every candidate's score: the L-layer grid (widths outer, betas inner), then the
    /// one-layer candidates (one per β).
    pub scores: Vec<SelectionScore>,
}

impl Selection {
    /// One line for a model description: the choice and the best validation NLL of each
    /// layer count, e.g. `selected=L1,beta=0.2 of 12 (val NLL L2 0.512, L1 0.488)`.
    pub fn describe(&self) -> String {
        let mut best: Vec<(usize, f64)> = Vec::new();
        for s in &self.scores {
            match best.iter_mut().find(|(l, _)| *l == s.layers) {
                Some((_, v)) => *v = v.min(s.val_nll),
                None => best.push((s.layers, s.val_nll)),
            }
        }
        let per_depth: Vec<String> = best.iter().map(|(l, v)| format!("L{l} {v:.3}")).collect();
        let width = if self.layers > 1 {
            format!(",W={}", self.width)
        } else {
            String::new()
        };
        format!(
            "selected=L{},beta={}{width} of {} (val NLL {})",
            self.layers,
            self.beta,
            self.scores.len(),
            per_depth.join(", ")
        )
    }
}

impl DsppConfig {
    /// This configuration with β_reg (with [`DsppConfig::tune_beta`]) and, for two or more
    /// layers, the hidden width (with [`DsppConfig::tune_width`]) chosen by
    /// [`select_model`] on a validation part of `train` (the fixed ones are the grid's
    /// only value); with [`DsppConfig::select_one_layer`] the one-layer PPGPR candidates
    /// take part and the configuration returned has `layers = 1` when one of them wins.
    /// Returns the configuration unchanged when nothing is chosen
    /// ([`DsppConfig::selects`]). The search ends when `stop` asks.
    ///
    /// # Errors
    /// As [`select_model`].
    pub fn tuned(
        &self,
        train: &Dataset,
        fit: &FitConfig,
        stop: &FitHooks<'_>,
    ) -> Result<(DsppConfig, Option<Selection>)> {
        if !self.selects() {
            return Ok((self.clone(), None));
        }
        let betas: Vec<f64> = if self.tune_beta {
            PAPER_BETAS.to_vec()
        } else {
            vec![self.beta]
        };
        let widths: Vec<usize> = if self.tune_width {
            PAPER_WIDTHS.to_vec()
        } else {
            vec![self.hidden_width]
        };
        let sel = select_model(
            train,
            self,
            &betas,
            &widths,
            self.select_one_layer,
            fit,
            self.init_seed,
            stop,
        )?;
        let cfg = DsppConfig {
            layers: sel.layers,
            beta: sel.beta,
            hidden_width: sel.width,
            ..self.clone()
        };
        Ok((cfg, Some(sel)))
    }
}

/// Chooses β_reg, the hidden width and — when `with_one_layer` is set and `base` has two
/// or more layers — between the deep model and its one-layer special case (PPGPR, eq. 16),
/// by validation NLL.
///
/// `train` is the training split in model units (standardised with training statistics);
/// `VALIDATION_FRACTION` of its rows, drawn with `seed` by
/// [`dgp_data::validation_split`], are held out. Every candidate `base` with
/// `beta = b`, `hidden_width = w` (for `b` in `betas`, `w` in `widths`; the widths are
/// ignored for one-layer models) is built on the remaining rows, trained with `fit`, and
/// scored by its mean validation NLL; with `with_one_layer`, so is `base` with one layer
/// for every `b` (the candidates the ppgpr backend's own selection trains, on the same
/// rows). The best score wins; a tie goes to the earlier candidate (the deep model). The
/// caller then retrains the winner on the whole training split. The test rows are never
/// seen: the validation rows are part of `train`.
///
/// The candidates are independent (each builds from its own configuration and seeds) and
/// train side by side on as many threads as the caller's rayon pool has (one after
/// another on one thread or in a distributed launch); the scores are the same bit for
/// bit whatever the thread count. They see `stop`'s stop request only
/// ([`FitHooks::stop_only`], relayed from the calling thread when they run side by side):
/// when it turns true (e.g. on SIGTERM in `dgp-bench`), every running candidate ends after
/// its current step and the search returns [`Error::Interrupted`] instead of training the
/// rest. Pass [`FitHooks::none`] to never stop.
///
/// # Errors
/// [`Error::Config`] for empty grids or a training set too small to split;
/// [`Error::Interrupted`] as above; the error of the last candidate when every candidate
/// fails.
#[allow(clippy::too_many_arguments)]
pub fn select_model(
    train: &Dataset,
    base: &DsppConfig,
    betas: &[f64],
    widths: &[usize],
    with_one_layer: bool,
    fit: &FitConfig,
    seed: u64,
    stop: &FitHooks<'_>,
) -> Result<Selection> {
    if betas.is_empty() || widths.is_empty() {
        return Err(Error::config("betas", "empty grid of betas or widths"));
    }
    let (fit_data, val_data) = fit_and_validation_rows(train, seed)?;
    let widths: Vec<usize> = if base.layers == 1 {
        vec![base.hidden_width]
    } else {
        widths.to_vec()
    };
    // Candidates train without the refit on all rows (`refit_all_rows`): it would cost
    // each one another kept-step run; the refit is for the final model.
    let mut candidates: Vec<DsppConfig> = Vec::new();
    for &w in &widths {
        for &b in betas {
            candidates.push(DsppConfig {
                beta: b,
                hidden_width: w,
                refit_all_rows: false,
                ..base.clone()
            });
        }
    }
    if with_one_layer && base.layers > 1 {
        for &b in betas {
            candidates.push(DsppConfig {
                beta: b,
                refit_all_rows: false,
                ..base.clone().ppgpr()
            });
        }
    }
    let total = candidates.len();
    let what = |i: usize, cfg: &DsppConfig| {
        format!(
            "dspp β/width selection, during candidate {} of {total} (L {}, β {}, width {})",
            i + 1,
            cfg.layers,
            cfg.beta,
            cfg.hidden_width
        )
    };
    let outcomes = crate::concurrent::run_all(
        &candidates,
        stop,
        |r: &Result<_>| r.is_err(),
        |i, cfg, hooks| score_candidate(cfg, &fit_data, &val_data, fit, hooks, || what(i, cfg)),
    );
    let mut scores = Vec::with_capacity(total);
    let mut last_err = None;
    for outcome in outcomes {
        let (score, err) = outcome?;
        last_err = err.or(last_err);
        scores.push(score);
    }
    let best = scores
        .iter()
        .filter(|s| s.val_nll.is_finite())
        .min_by(|a, b| a.val_nll.total_cmp(&b.val_nll));
    match best {
        Some(s) => Ok(Selection {
            layers: s.layers,
            beta: s.beta,
            width: s.width,
            scores: scores.clone(),
        }),
        None => Err(last_err
            .unwrap_or_else(|| Error::Numerical("select_model: every candidate failed".into()))),
    }
}

/// Trains `cfg` on `fit_data` (with `stop`'s stop request only) and scores it by its mean
/// validation NLL; a candidate that fails scores `+∞` and hands back its error. Returns
/// [`Error::Interrupted`], described by `what`, when `stop` asks.
fn score_candidate(
    cfg: &DsppConfig,
    fit_data: &Dataset,
    val_data: &Dataset,
    fit: &FitConfig,
    stop: &FitHooks<'_>,
    what: impl FnOnce() -> String,
) -> Result<(SelectionScore, Option<Error>)> {
    let outcome = DsppModel::new(cfg.clone(), fit_data).and_then(|mut m| {
        m.fit(fit_data, fit, &mut stop.stop_only())?;
        let run = m
            .fit_summary()
            .map_or((0, None), |s| (s.steps, s.best_step));
        Ok((m.mean_log_density(val_data)?, run))
    });
    if stop.should_stop() {
        return Err(Error::Interrupted(what()));
    }
    let (val_nll, (steps, best_step), err) = match outcome {
        Ok((lp, run)) if lp.is_finite() => (-lp, run, None),
        Ok((_, run)) => (f64::INFINITY, run, None),
        Err(e) => (f64::INFINITY, (0, None), Some(e)),
    };
    let score = SelectionScore {
        layers: cfg.layers,
        beta: cfg.beta,
        width: cfg.hidden_width,
        val_nll,
        steps,
        best_step,
    };
    Ok((score, err))
}

/// The rows the candidates are fitted to and the validation rows (`VALIDATION_FRACTION`
/// of `train`, drawn with `seed`).
fn fit_and_validation_rows(train: &Dataset, seed: u64) -> Result<(Dataset, Dataset)> {
    let all: Vec<usize> = (0..train.n()).collect();
    let (fit_idx, val_idx) = validation_split(&all, VALIDATION_FRACTION, seed)?;
    Ok((train.select_rows(&fit_idx)?, train.select_rows(&val_idx)?))
}
