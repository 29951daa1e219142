//! The stop on the smoothed training objective ([`Convergence`]) as the executor runs it:
//! [`ConvergenceTrace`], a pure state machine over the reported objective values.

use crate::fit::Convergence;
use dgp_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// The decision of a [`Convergence`] rule from the objective values of a run, one call per
/// step (see the rule's docs). Pure, so it can be tested on scripted traces, and
/// serialisable, so a checkpointed run resumes it exactly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConvergenceTrace {
    rule: Convergence,
    /// Training rows N (the gain is per row).
    rows: usize,
    /// Sum and count of the values of the current window.
    sum: f64,
    count: usize,
    /// Mean of the last completed window.
    previous: Option<f64>,
    /// Consecutive completed windows whose gain was below the tolerance.
    flat: usize,
}

impl ConvergenceTrace {
    /// A trace of `rule` for a run of at most `steps` steps on `rows` training rows.
    ///
    /// # Errors
    /// [`Error::Config`] naming the field when `rule` is out of range for `steps`
    /// ([`Convergence::validate`]) or `rows` is 0.
    pub fn new(rule: &Convergence, steps: usize, rows: usize) -> Result<Self> {
        rule.validate(steps)?;
        if rows == 0 {
            return Err(Error::config(
                "convergence",
                "the training data has no rows",
            ));
        }
        Ok(ConvergenceTrace {
            rule: *rule,
            rows,
            sum: 0.0,
            count: 0,
            previous: None,
            flat: 0,
        })
    }

    /// After step `step` (0-based) with objective `value`: whether the run stops here.
    pub fn after_step(&mut self, step: usize, value: f64) -> bool {
        self.sum += value;
        self.count += 1;
        if self.count < self.rule.window {
            return false;
        }
        let mean = self.sum / self.count as f64;
        self.sum = 0.0;
        self.count = 0;
        if !mean.is_finite() {
            self.previous = None;
            self.flat = 0;
            return false;
        }
        if let Some(prev) = self.previous {
            let gain = (mean - prev) / self.rows as f64;
            if gain < self.rule.tolerance {
                self.flat += 1;
            } else {
                self.flat = 0;
            }
        }
        self.previous = Some(mean);
        step + 1 >= self.rule.min_steps && self.flat >= self.rule.patience
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> Convergence {
        Convergence {
            window: 10,
            tolerance: 1e-3,
            patience: 2,
            min_steps: 50,
        }
    }

    /// The step after which a trace of `f(step)` stops, on 100 rows.
    fn stop(rule: &Convergence, steps: usize, f: impl Fn(usize) -> f64) -> Option<usize> {
        let mut t = ConvergenceTrace::new(rule, steps, 100).unwrap();
        (0..steps).find(|&s| t.after_step(s, f(s))).map(|s| s + 1)
    }

    #[test]
    fn a_rising_objective_never_stops_and_a_flat_one_stops_after_patience_windows() {
        // Gain 1 nat per step = 10 per window = 0.1 per row ≫ 1e-3.
        assert_eq!(stop(&rule(), 1000, |s| s as f64), None);
        // Flat from the start: windows 2 and 3 are flat, but min_steps = 50 holds it to
        // the end of window 5.
        assert_eq!(stop(&rule(), 1000, |_| -3.0), Some(50));
        // Rises until step 300, flat afterwards: window [300, 310) still gains on
        // [290, 300); [310, 320) and [320, 330) are the two flat ones.
        assert_eq!(
            stop(&rule(), 1000, |s| (s.min(300)) as f64),
            Some(330),
            "stops two windows after the plateau"
        );
    }

    #[test]
    fn gains_are_per_row_and_a_non_finite_window_resets() {
        // 0.05 nats per window on 100 rows = 5e-4 per row < 1e-3: converged.
        assert_eq!(stop(&rule(), 1000, |s| 0.005 * s as f64), Some(50));
        // 0.2 nats per window = 2e-3 per row: not converged.
        assert_eq!(stop(&rule(), 1000, |s| 0.02 * s as f64), None);
        // A NaN in window [40, 50) resets the count: [50, 60) starts afresh, [60, 70) and
        // [70, 80) are the two flat ones.
        let f = |s: usize| if s == 45 { f64::NAN } else { 1.0 };
        assert_eq!(stop(&rule(), 1000, f), Some(80));
    }

    #[test]
    fn out_of_range_settings_are_errors_naming_the_field() {
        let cases = [
            (
                Convergence {
                    tolerance: 0.0,
                    ..rule()
                },
                100,
                "convergence.tolerance",
            ),
            (
                Convergence {
                    tolerance: -1.0,
                    ..rule()
                },
                100,
                "convergence.tolerance",
            ),
            (
                Convergence {
                    tolerance: f64::NAN,
                    ..rule()
                },
                100,
                "convergence.tolerance",
            ),
            (
                Convergence {
                    patience: 0,
                    ..rule()
                },
                100,
                "convergence.patience",
            ),
            (
                Convergence {
                    window: 0,
                    ..rule()
                },
                100,
                "convergence.window",
            ),
            (
                Convergence {
                    min_steps: 101,
                    ..rule()
                },
                100,
                "convergence.min_steps",
            ),
        ];
        for (c, steps, field) in cases {
            let e = ConvergenceTrace::new(&c, steps, 10).unwrap_err();
            assert!(matches!(e, Error::Config(_)), "{e}");
            assert!(e.to_string().contains(field), "{e}");
        }
        assert!(ConvergenceTrace::new(&rule(), 50, 10).is_ok());
        assert!(ConvergenceTrace::new(&rule(), 50, 0).is_err());
    }
}
