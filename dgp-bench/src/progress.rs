//! Progress bars for training runs (indicatif), fed through [`Progress`]: position,
//! steps per second, the running objective, elapsed time and ETA.

use std::time::Duration;

use dgp_traits::fit::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bar's indicatif template: label, bar, steps done/total, steps per second, message
/// (the running objective), elapsed time and ETA.
pub const TEMPLATE: &str =
    "{prefix:>28} [{bar:30}] {pos}/{len} {per_sec} {msg} ({elapsed}, ETA {eta})";

/// A [`Progress`] hook drawing a progress bar on stderr. Hidden when `enabled` is false or
/// stderr is not a terminal (indicatif's default), so logs and tests stay clean.
pub struct BarObserver {
    bar: ProgressBar,
}

impl BarObserver {
    /// A bar of `total` steps labelled `label`.
    pub fn new(total: usize, label: &str, enabled: bool) -> Self {
        let bar = if enabled {
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        let style = ProgressStyle::with_template(TEMPLATE)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        if enabled {
            bar.enable_steady_tick(Duration::from_millis(250));
        }
        BarObserver { bar }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for BarObserver {
    fn on_step(&mut self, step: usize, _total: usize, objective: f64) {
        self.bar.set_position(step as u64 + 1);
        if step.is_multiple_of(25) {
            self.bar.set_message(format!("objective {objective:.4e}"));
        }
    }

    fn on_phase(&mut self, phase: &str) {
        let prefix = self.bar.prefix();
        let base = prefix.split(" [").next().unwrap_or(&prefix).to_string();
        self.bar.set_prefix(format!("{base} [{phase}]"));
    }
}

impl Drop for BarObserver {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_parses_and_shows_rate_and_eta() {
        assert!(ProgressStyle::with_template(TEMPLATE).is_ok());
        assert!(TEMPLATE.contains("{per_sec}") && TEMPLATE.contains("{eta}"));
        let mut bar = BarObserver::new(10, "x", false);
        bar.on_phase("burn-in");
        bar.on_step(0, 10, 1.0);
        bar.finish();
    }
}
