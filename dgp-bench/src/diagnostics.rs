//! What a training run did, kept beside a split's metrics ([`FitDiagnostics`]): the
//! likelihood's noise variance after training and, when held-out early stopping ran
//! (`--protocol lindinger`, dspp's validation part), the step whose parameters were kept
//! and the held-out score trace. These are what a run that misses a paper's number is
//! diagnosed by (a collapsed or ballooning σ², a stop far before the cap).

use dgp_data::Standardizer;
use dgp_traits::model::{FitReport, Model};
use serde::{Deserialize, Serialize};

/// At most this many points of the held-out trace are kept in a record; longer traces are
/// averaged over consecutive evaluations ([`thin_trace`]).
pub const HELDOUT_TRACE_POINTS: usize = 200;

/// Diagnostics of one split's training run (flattened into the split's JSON record; every
/// field is omitted when unknown, so older records read back unchanged).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FitDiagnostics {
    /// The Gaussian likelihood's σ² after training, in original units (model σ² × s_y²,
    /// first output); `None` for backends or likelihoods that do not report one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_variance: Option<f64>,
    /// Steps done when the parameters kept by the held-out rule were logged; `None` when
    /// no held-out rule ran or the rule kept the last parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_step: Option<usize>,
    /// Held-out mean NLL per row in original units, as (steps done, NLL), thinned to at
    /// most [`HELDOUT_TRACE_POINTS`] points; empty when no held-out rule ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub heldout_trace: Vec<(usize, f64)>,
    /// Steps after which the convergence stop on the training objective ended the run
    /// ([`FitReport::converged_after`]); `None` when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged_after: Option<usize>,
}

impl FitDiagnostics {
    /// The diagnostics of `model` after the fit that returned `fit`, with the targets'
    /// standardiser `st` (to report in original units).
    pub fn of(model: &dyn Model, fit: &FitReport, st: &Standardizer) -> Self {
        let s0 = st.y_std.first().copied().unwrap_or(1.0);
        // log p(y) = log p(ỹ) − Σ_j ln s_j per row, so NLL_orig = NLL_model + Σ_j ln s_j.
        let shift: f64 = st.y_std.iter().map(|s| s.ln()).sum();
        let (kept_step, heldout_trace) = match &fit.held_out {
            Some(h) => {
                let orig: Vec<(usize, f64)> =
                    h.scores.iter().map(|&(k, v)| (k, v + shift)).collect();
                (h.best_step, thin_trace(&orig, HELDOUT_TRACE_POINTS))
            }
            None => (None, Vec::new()),
        };
        FitDiagnostics {
            noise_variance: model.noise_variance().map(|v| v * s0 * s0),
            kept_step,
            heldout_trace,
            converged_after: fit.converged_after,
        }
    }
}

impl FitDiagnostics {
    /// One line for the run's console output (`σ² …; held-out NLL first → min (at step k),
    /// last …; kept step …`), or `None` when there is nothing to say.
    pub fn summary_line(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(v) = self.noise_variance {
            parts.push(format!("noise variance {v:.4e}"));
        }
        if let (Some(first), Some(last)) = (self.heldout_trace.first(), self.heldout_trace.last()) {
            let min = self
                .heldout_trace
                .iter()
                .copied()
                .fold(*first, |a, b| if b.1 < a.1 { b } else { a });
            parts.push(format!(
                "held-out NLL {:.4} at step {} → min {:.4} at {} → {:.4} at {}",
                first.1, first.0, min.1, min.0, last.1, last.0
            ));
        }
        if let Some(k) = self.kept_step {
            parts.push(format!("kept the parameters of step {k}"));
        }
        if let Some(k) = self.converged_after {
            parts.push(format!(
                "stopped early: training objective converged after {k} steps"
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// `trace` reduced to at most `max` points: consecutive points in groups of
/// ⌈len / max⌉, each group as (its last step, mean of its finite values). Non-finite
/// values (a model that could not be scored) are left out of the means, and a group with
/// none is dropped, so the result is always finite (JSON has no ∞).
pub fn thin_trace(trace: &[(usize, f64)], max: usize) -> Vec<(usize, f64)> {
    if trace.is_empty() || max == 0 {
        return Vec::new();
    }
    let group = trace.len().div_ceil(max);
    trace
        .chunks(group)
        .filter_map(|c| {
            let finite: Vec<f64> = c.iter().map(|p| p.1).filter(|v| v.is_finite()).collect();
            let last = c.last()?.0;
            (!finite.is_empty()).then(|| (last, finite.iter().sum::<f64>() / finite.len() as f64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_traces_are_kept_and_non_finite_points_dropped() {
        let t = vec![(0, 1.0), (10, f64::INFINITY), (20, 0.5)];
        assert_eq!(thin_trace(&t, 200), vec![(0, 1.0), (20, 0.5)]);
        assert!(thin_trace(&[], 10).is_empty());
    }

    #[test]
    fn the_summary_line_says_what_is_known() {
        assert_eq!(FitDiagnostics::default().summary_line(), None);
        let d = FitDiagnostics {
            noise_variance: Some(0.25),
            kept_step: Some(20),
            heldout_trace: vec![(0, 2.0), (20, 1.0), (40, 1.5)],
            converged_after: None,
        };
        assert_eq!(
            d.summary_line().unwrap(),
            "noise variance 2.5000e-1; held-out NLL 2.0000 at step 0 → min 1.0000 at 20 → \
             1.5000 at 40; kept the parameters of step 20"
        );
        let c = FitDiagnostics {
            converged_after: Some(700),
            ..FitDiagnostics::default()
        };
        assert_eq!(
            c.summary_line().unwrap(),
            "stopped early: training objective converged after 700 steps"
        );
    }

    #[test]
    fn long_traces_are_averaged_in_groups_ending_at_the_last_step() {
        let t: Vec<(usize, f64)> = (0..10).map(|k| (k * 100, k as f64)).collect();
        // groups of ⌈10/4⌉ = 3: {0,1,2} {3,4,5} {6,7,8} {9}
        assert_eq!(
            thin_trace(&t, 4),
            vec![(200, 1.0), (500, 4.0), (800, 7.0), (900, 9.0)]
        );
        let long: Vec<(usize, f64)> = (0..1001).map(|k| (k, 0.0)).collect();
        assert!(thin_trace(&long, HELDOUT_TRACE_POINTS).len() <= HELDOUT_TRACE_POINTS);
    }
}
