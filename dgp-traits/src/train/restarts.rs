//! Random restarts: [`best_of`].

use crate::model::FitReport;
use dgp_core::{Error, Result};

/// Outcome of [`best_of`].
#[derive(Clone, Debug)]
pub struct BestOf<M> {
    /// The best candidate and its score; `None` when every candidate failed to train or
    /// scored non-finite.
    pub best: Option<(M, f64)>,
    /// Training seconds summed over the candidates that trained.
    pub seconds: f64,
}

/// Random restarts (e.g. DSPP paper App. A.2): for `r = 0..count`, builds candidate `r`
/// (`candidate(r)`; an error here is returned), trains it (`train(&mut cand, r)`; a
/// candidate whose training fails is dropped, except for [`Error::Interrupted`], which
/// ends the search), scores it (`score(&cand)`, lower is better) and keeps the first
/// candidate with the lowest finite score.
///
/// # Errors
/// The first error of `candidate`; [`Error::Interrupted`] from `train`.
pub fn best_of<M>(
    count: usize,
    mut candidate: impl FnMut(usize) -> Result<M>,
    mut train: impl FnMut(&mut M, usize) -> Result<FitReport>,
    mut score: impl FnMut(&M) -> f64,
) -> Result<BestOf<M>> {
    let mut out = BestOf {
        best: None,
        seconds: 0.0,
    };
    for r in 0..count {
        let mut cand = candidate(r)?;
        let report = match train(&mut cand, r) {
            Ok(report) => report,
            Err(e @ Error::Interrupted(_)) => return Err(e),
            Err(_) => continue,
        };
        out.seconds += report.seconds;
        let s = score(&cand);
        if s.is_finite() && out.best.as_ref().is_none_or(|(_, b)| s < *b) {
            out.best = Some((cand, s));
        }
    }
    Ok(out)
}
