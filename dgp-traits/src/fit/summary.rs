//! What held-out early stopping did in a fit, as a fit reports it.

use serde::{Deserialize, Serialize};

/// What a run with held-out early stopping did, for diagnostics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FitSummary {
    /// Optimisation steps taken.
    pub steps: usize,
    /// Step whose parameters were kept (early stopping), if any.
    pub best_step: Option<usize>,
    /// Held-out score (an NLL, model units) of the kept parameters, if early stopping ran.
    pub best_heldout_nll: Option<f64>,
    /// Rows held out for early stopping (0 when it did not run).
    pub heldout_rows: usize,
    /// Whether training stopped on a numerical failure after good parameters were kept.
    pub stopped_on_numerical_failure: bool,
    /// Every held-out evaluation as (steps done, held-out NLL in model units), in order;
    /// `+∞` where the model could not be scored. The trace a run is diagnosed by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<(usize, f64)>,
}
