//! Selection of β_reg and the hidden width on a validation part of the training data
//! (paper App. A.2: β_reg ∈ {0.01, 0.05, 0.2, 1.0}, W ∈ {3, 5}, chosen on the validation
//! split of a 15:3:2 train/test/validation partition — never on test data).

use crate::config::DsppConfig;
use crate::model::DsppModel;
use dgp_traits::data::{Dataset, validation_split};
use dgp_traits::error::{Error, Result};
use dgp_traits::model::{FitConfig, FitHooks, Model};
use serde::{Deserialize, Serialize};

/// Fraction of the training rows held out for validation: 2/17, the validation share of
/// the paper's 15:3:2 train/test/validation proportions once test is set aside.
pub const VALIDATION_FRACTION: f64 = 2.0 / 17.0;

/// The paper's β_reg grid for DSPPs (App. A.2).
pub const PAPER_BETAS: [f64; 4] = [0.01, 0.05, 0.2, 1.0];

/// The paper's hidden-width grid for 2-layer models (App. A.2).
pub const PAPER_WIDTHS: [usize; 2] = [3, 5];

/// Validation result of one (β, width) candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelectionScore {
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

/// Chooses β_reg (and the hidden width) by validation NLL.
///
/// `train` is the training split in model units (standardised with training statistics);
/// `VALIDATION_FRACTION` of its rows, drawn with `seed` by
/// [`dgp_traits::data::validation_split`], are held out. Every candidate `base` with
/// `beta = b`, `hidden_width = w` (for `b` in `betas`, `w` in `widths`; the widths are
/// ignored for one-layer models) is built on the remaining rows, trained with `fit`, and
/// scored by its mean validation NLL. Returns the best `(beta, width)` and all scores in
/// grid order. The caller then retrains on the whole training split.
///
/// The candidates train with `stop`'s stop request only ([`FitHooks::stop_only`]): when
/// it turns true (e.g. on SIGTERM in `dgp-bench`), the running candidate ends after its
/// current step and the search returns [`Error::Interrupted`] instead of training the
/// rest. Pass [`FitHooks::none`] to never stop.
///
/// # Errors
/// [`Error::Config`] for empty grids or a training set too small to split;
/// [`Error::Interrupted`] as above; the error of the last candidate when every candidate
/// fails.
pub fn select_beta(
    train: &Dataset,
    base: &DsppConfig,
    betas: &[f64],
    widths: &[usize],
    fit: &FitConfig,
    seed: u64,
    stop: &FitHooks<'_>,
) -> Result<(f64, usize, Vec<SelectionScore>)> {
    if betas.is_empty() || widths.is_empty() {
        return Err(Error::config("betas", "empty grid of betas or widths"));
    }
    let (fit_data, val_data) = fit_and_validation_rows(train, seed)?;
    let widths: Vec<usize> = if base.layers == 1 {
        vec![base.hidden_width]
    } else {
        widths.to_vec()
    };
    let mut scores = Vec::with_capacity(betas.len() * widths.len());
    let mut last_err = None;
    for &w in &widths {
        for &b in betas {
            // Candidates train without the refit on all rows (`refit_all_rows`): it would
            // cost each one another kept-step run; the refit is for the final model.
            let cfg = DsppConfig {
                beta: b,
                hidden_width: w,
                refit_all_rows: false,
                ..base.clone()
            };
            let what = || {
                format!(
                    "dspp β/width selection, during candidate {} of {} (β {b}, width {w})",
                    scores.len() + 1,
                    betas.len() * widths.len()
                )
            };
            let (score, err) = score_candidate(&cfg, &fit_data, &val_data, fit, stop, what)?;
            last_err = err.or(last_err);
            scores.push(score);
        }
    }
    let best = scores
        .iter()
        .filter(|s| s.val_nll.is_finite())
        .min_by(|a, b| a.val_nll.total_cmp(&b.val_nll));
    match best {
        Some(s) => Ok((s.beta, s.width, scores.clone())),
        None => Err(last_err
            .unwrap_or_else(|| Error::Numerical("select_beta: every candidate failed".into()))),
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
