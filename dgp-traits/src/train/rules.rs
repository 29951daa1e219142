//! The pure logic of the held-out stopping rules (their settings are plain data in
//! [`crate::fit`]): [`LindingerTrace`] decides [`LindingerStopping`] from the logged
//! held-out scores.

pub use crate::fit::{
    EarlyStopping, HeldOutRule, LindingerStopping, PATIENCE_SCORE_SAMPLES, Restore,
};

/// The decision of [`LindingerStopping`] from its logged scores, one call per iteration
/// (see the rule's docs): a pure state machine, so it can be tested on scripted traces.
#[derive(Clone, Debug)]
pub struct LindingerTrace {
    rule: LindingerStopping,
    logged: Vec<f64>,
    smoothed: Vec<f64>,
}

impl LindingerTrace {
    /// An empty trace for `rule` (expecting about `steps` iterations).
    pub fn new(rule: &LindingerStopping, steps: usize) -> Self {
        LindingerTrace {
            rule: rule.clone(),
            logged: Vec::with_capacity(steps / rule.every.max(1) + 1),
            smoothed: Vec::with_capacity(steps),
        }
    }

    /// Whether iteration `it` logs a score before its step (`it` a multiple of `every`).
    pub fn logs_at(&self, it: usize) -> bool {
        it.is_multiple_of(self.rule.every.max(1))
    }

    /// Logs a held-out score (a mean log-likelihood, higher is better; a non-finite value
    /// counts as −∞).
    pub fn log(&mut self, tll: f64) {
        self.logged
            .push(if tll.is_nan() { f64::NEG_INFINITY } else { tll });
    }

    /// After the step of iteration `it` (called for it = 0, 1, 2, … in order): updates
    /// `smoothed[it]` and returns whether training stops here.
    pub fn after_step(&mut self, it: usize) -> bool {
        debug_assert_eq!(it, self.smoothed.len());
        let w = self.rule.window.max(1);
        let tail = &self.logged[self.logged.len().saturating_sub(w)..];
        let mean = if tail.is_empty() {
            f64::NEG_INFINITY
        } else {
            tail.iter().sum::<f64>() / tail.len() as f64
        };
        self.smoothed.push(mean);
        let (lag, checks) = (self.rule.lag, self.rule.checks);
        if it <= self.rule.min_steps || it < checks * lag {
            return false;
        }
        (0..checks).all(|k| self.smoothed[it - k * lag] < self.smoothed[it - (k + 1) * lag])
    }

    /// The logged scores so far.
    pub fn logged(&self) -> &[f64] {
        &self.logged
    }

    /// The smoothed score of every iteration so far.
    pub fn smoothed(&self) -> &[f64] {
        &self.smoothed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(min_steps: usize) -> LindingerStopping {
        LindingerStopping {
            min_steps,
            ..LindingerStopping::default()
        }
    }

    /// Runs a trace whose logged score at iteration it is `f(it)`; returns the stopping
    /// iteration.
    fn run(rule: &LindingerStopping, steps: usize, f: impl Fn(usize) -> f64) -> Option<usize> {
        let mut t = LindingerTrace::new(rule, steps);
        for it in 0..steps {
            if t.logs_at(it) {
                t.log(f(it));
            }
            if t.after_step(it) {
                return Some(it);
            }
        }
        None
    }

    #[test]
    fn a_rising_score_never_stops() {
        assert_eq!(run(&rule(5000), 20_000, |it| it as f64), None);
        assert_eq!(
            run(&rule(5000), 20_000, |_| 1.0),
            None,
            "flat: no strict decrease"
        );
    }

    #[test]
    fn a_falling_score_stops_right_after_min_steps() {
        // Every smoothed value is below the one 50 iterations earlier once logs differ, so
        // the first iteration with it > 5000 stops.
        assert_eq!(run(&rule(5000), 20_000, |it| -(it as f64)), Some(5001));
    }

    #[test]
    fn a_peak_stops_once_the_smoothed_score_has_fallen_five_lags_in_a_row() {
        // Rises until iteration 8000, falls afterwards. The smoothed score (mean of the last
        // 50 logs = 500 iterations) peaks later than the raw one; the rule stops when it has
        // decreased at lags 0..4, i.e. a little after the smoothed peak + 250 iterations.
        let peak = 8000.0;
        let f = |it: usize| -((it as f64 - peak).abs());
        let stop = run(&rule(5000), 20_000, f).unwrap();
        // Reference arithmetic, replayed independently: smoothed over logs.
        let logs: Vec<f64> = (0..20_000).step_by(10).map(f).collect();
        let sm = |it: usize| {
            let n = it / 10 + 1;
            let lo = n.saturating_sub(50);
            logs[lo..n].iter().sum::<f64>() / (n - lo) as f64
        };
        let expected = (5001..20_000)
            .find(|&it| (0..5).all(|k| sm(it - k * 50) < sm(it - (k + 1) * 50)))
            .unwrap();
        assert_eq!(stop, expected);
        assert!(stop > 8000 && stop < 9000, "{stop}");
    }

    #[test]
    fn no_stop_before_min_steps_and_noise_that_rises_does_not_stop() {
        assert_eq!(run(&rule(5000), 5001, |it| -(it as f64)), None);
        // A score that dips for 150 iterations (3 lags, fewer than the 5 needed), then recovers.
        let f = |it: usize| {
            if (6000..6150).contains(&it) {
                -1000.0
            } else {
                it as f64
            }
        };
        assert_eq!(run(&rule(5000), 20_000, f), None);
        // A non-finite score counts as −∞ (a decrease), never NaN.
        let mut t = LindingerTrace::new(&rule(0), 10);
        t.log(f64::NAN);
        assert!(t.logged()[0] == f64::NEG_INFINITY);
    }

    #[test]
    fn settings_validate_and_round_trip() {
        assert!(HeldOutRule::lindinger().validate().is_ok());
        let bad = LindingerStopping {
            lag: 0,
            ..Default::default()
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("early_stopping.lag"), "{e}");
        assert!(
            LindingerStopping {
                holdout_fraction: 1.0,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        for r in [
            HeldOutRule::lindinger(),
            HeldOutRule::Patience(EarlyStopping::default()),
        ] {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<HeldOutRule>(&json).unwrap(), r);
        }
        let r: HeldOutRule = serde_json::from_str(r#"{"lindinger": {"restore": "best"}}"#).unwrap();
        assert_eq!(r.score_samples(), 5);
        assert!(serde_json::from_str::<HeldOutRule>(r#"{"nope": {}}"#).is_err());
    }
}
