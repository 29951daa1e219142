//! [`ExperimentSpec`]: what defines one experiment of `dgp-bench run` (backend,
//! architecture, training settings, splits of one data set). A leaf of the experiment,
//! protocol and checkpointing modules, which all take it.

use dgp_traits::fit::Convergence;
use dgp_traits::optim::LrSchedule;
use dgp_traits::train::HeldOutRule;

use crate::backends::{ArchSpec, BackendEntry};
use crate::datasets::BenchData;
use crate::error::{BenchError, Result};
use crate::session::Session;

/// Everything that defines an experiment: one backend and architecture on some splits of
/// one data set.
#[derive(Clone, Debug)]
pub struct ExperimentSpec<'a> {
    /// The data set and its splits.
    pub data: &'a BenchData,
    /// The backend (from [`crate::backends::BACKENDS`]).
    pub backend: &'static BackendEntry,
    /// Architecture and sample counts.
    pub arch: ArchSpec,
    /// Optimisation steps.
    pub steps: usize,
    /// Minibatch size; the batch of a split is `min(batch_size, N_train)`.
    pub batch_size: usize,
    /// Learning rate of the backend's optimiser (its
    /// [`dgp_traits::backend::CommonSettings::learning_rate`]).
    pub learning_rate: f64,
    /// Seed of the minibatch order and Monte Carlo noise (the prediction uses
    /// `seed + PREDICT_SEED_OFFSET`).
    pub seed: u64,
    /// Split indices to run.
    pub splits: Vec<usize>,
    /// Show a progress bar per split (on stderr, only when it is a terminal).
    pub progress: bool,
    /// Held-out early stopping passed to `fit` ([`dgp_traits::model::FitConfig::early_stopping`]); `steps`
    /// is then the cap.
    pub early_stopping: Option<HeldOutRule>,
    /// The convergence stop passed to `fit` ([`dgp_traits::model::FitConfig::convergence`]:
    /// the backend configuration's own, [`dgp_traits::fit::Training::convergence`], unless
    /// the protocol turns it off); `steps` is then the cap.
    pub convergence: Option<Convergence>,
    /// Schedule of that learning rate
    /// ([`dgp_traits::backend::CommonSettings::lr_schedule`]).
    pub lr_schedule: LrSchedule,
    /// Keep every test point's log predictive density in the record
    /// ([`crate::experiment::SplitRecord::log_density`]) for the per-point comparison (`dgp-bench compare`).
    pub per_point: bool,
    /// Protocol and split kind for the records (`lindinger/random`, ...); empty for the
    /// default (published protocol on the data set's own splits).
    pub protocol: String,
    /// How the splits are run: the process's stop requests and the checkpoints of
    /// `--checkpoint`/`--resume` ([`Session::default`]: none).
    pub session: Session,
}

impl<'a> ExperimentSpec<'a> {
    /// The backend's `run` defaults ([`dgp_traits::backend::RunDefaults`]) for `layers`
    /// layers on every split of `data`, seed 0, no progress bar; the learning rate is the
    /// one for the backend's held-out rule on split 0's training rows
    /// ([`dgp_traits::backend::RunDefaults::learning_rate_for`]), as `run` chooses it.
    pub fn with_defaults(
        data: &'a BenchData,
        backend: &'static BackendEntry,
        layers: usize,
    ) -> Self {
        let d = backend.defaults();
        let early_stopping = d.held_out_rule();
        // The published splits of a data set all have the same size.
        let n_train = data
            .split(0)
            .map_or(data.data().n(), |(train, _)| train.len());
        ExperimentSpec {
            data,
            backend,
            arch: ArchSpec::with_defaults(backend, layers),
            steps: d.steps_for(n_train),
            batch_size: d.training.batch_size,
            learning_rate: d.learning_rate_for(early_stopping.as_ref(), n_train),
            seed: 0,
            splits: (0..data.n_splits()).collect(),
            progress: false,
            early_stopping,
            convergence: d.training.convergence,
            lr_schedule: LrSchedule::Constant,
            per_point: false,
            protocol: String::new(),
            session: Session::default(),
        }
    }

    /// The learning rate as records state it: `None` for a backend that never reads one
    /// ([`dgp_traits::backend::Capabilities::uses_learning_rate`]).
    pub fn recorded_learning_rate(&self) -> Option<f64> {
        self.backend
            .capabilities()
            .uses_learning_rate
            .then_some(self.learning_rate)
    }

    /// Checks the ranges of every setting, and the backend-specific settings with the
    /// backend ([`BackendEntry::check`]).
    ///
    /// # Errors
    /// [`BenchError::Usage`] naming the offending setting.
    pub fn validate(&self) -> Result<()> {
        self.validate_common()?;
        self.backend.check(&self.arch).map(|_| ())
    }

    /// [`ExperimentSpec::validate`] but the backend's own check.
    fn validate_common(&self) -> Result<()> {
        let a = &self.arch;
        let checks: [(bool, &str); 7] = [
            (a.layers >= 1, "--layers must be at least 1"),
            (a.num_inducing >= 1, "--inducing must be at least 1"),
            (a.hidden_width != Some(0), "--hidden must be at least 1"),
            (
                a.train_samples >= 1,
                "the number of training samples must be at least 1",
            ),
            (a.predict_samples >= 1, "--samples must be at least 1"),
            (self.batch_size >= 1, "--batch must be at least 1"),
            (
                self.learning_rate > 0.0 && self.learning_rate.is_finite(),
                "--lr must be a finite number > 0",
            ),
        ];
        if let Some((_, msg)) = checks.iter().find(|(ok, _)| !ok) {
            return Err(BenchError::Usage((*msg).to_string()));
        }
        if self.splits.is_empty() {
            return Err(BenchError::Usage("no splits selected".into()));
        }
        if let Some(&k) = self.splits.iter().find(|&&k| k >= self.data.n_splits()) {
            return Err(BenchError::Usage(format!(
                "split {k} requested but {} has {} splits",
                self.data.name,
                self.data.n_splits()
            )));
        }
        Ok(())
    }
}
