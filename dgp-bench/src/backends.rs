//! The backend registry: the ONE place where inference backends are listed.
//!
//! Every subcommand (`run`, `time`) and the default no-argument job iterate over
//! [`BACKENDS`]. A backend crate registers itself by exporting a
//! [`dgp_traits::backend::Backend`] value (its name, its own serde configuration checked
//! once into a `Checked` type, its build function); adding a backend is one
//! [`BackendEntry`] in that list (the benchmark's defaults for it) and the crate in
//! `dgp-bench/Cargo.toml`, with no edits elsewhere. Backend-specific settings reach it
//! untouched through [`ArchSpec::settings`] (`--set key=value`, `--config FILE`), so
//! [`ArchSpec`] holds only what every deep GP has. The `dspp` and `ppgpr` entries are the
//! worked example of a backend with its own hyper-parameters (β_reg, the hidden width),
//! chosen on validation data inside its build function when [`ArchSpec::tune`] is set.

use dgp_traits::backend::{Backend, Capabilities, CommonSettings, Settings};
use dgp_traits::data::Dataset;
use dgp_traits::model::{FitConfig, FitHooks, Model};
use dgp_traits::optim::LrSchedule;
use dgp_traits::train::{EarlyStopping, HeldOutRule};

use crate::error::{BenchError, Result};

/// Architecture and sampling settings handed to a backend's constructor.
///
/// The common part ([`ArchSpec::common`]) is what every deep GP has; everything specific
/// to one backend travels in [`ArchSpec::settings`] (fields of the backend's own
/// configuration, from `--set`, `--config` or the sugar flags `--rule`, `--beta`,
/// `--mean`, `--natgrad`), checked by the backend itself.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArchSpec {
    /// Number of GP layers L (1 = the sparse-GP baseline "SGP").
    pub layers: usize,
    /// Inducing points per layer, M.
    pub num_inducing: usize,
    /// Width of the hidden layers; `None` = the backend's default (svi: `min(30, D)`).
    pub hidden_width: Option<usize>,
    /// Samples used by the training objective (svi: Monte Carlo samples per point,
    /// `SviConfig::train_samples`).
    pub train_samples: usize,
    /// Mixture components requested from `predict` (svi: Monte Carlo samples of eq. 18).
    pub predict_samples: usize,
    /// Seed of the model's initialisation (k-means++ of Z, ...).
    pub seed: u64,
    /// Choose the backend's regularisation hyper-parameters that are not given explicitly
    /// (dspp: β_reg and the hidden width; ppgpr: β_reg) on a validation part of the
    /// TRAINING split, never the test split (DSPP paper App. A.2). Backends without such
    /// hyper-parameters ignore it.
    pub tune: bool,
    /// Backend-specific settings (a JSON object of the backend configuration's fields);
    /// empty = the backend's defaults.
    #[serde(default, skip_serializing_if = "Settings::is_empty")]
    pub settings: Settings,
}

impl ArchSpec {
    /// The settings of a run with the backend's defaults for `layers` layers, seed 0.
    pub fn with_defaults(b: &BackendEntry, layers: usize) -> Self {
        let d = b.defaults;
        ArchSpec {
            layers,
            num_inducing: d.num_inducing,
            hidden_width: None,
            train_samples: d.train_samples,
            predict_samples: d.predict_samples,
            seed: 0,
            tune: true,
            settings: Settings::new(),
        }
    }

    /// The part every backend understands, with the backend's own learning rate and
    /// schedule.
    pub fn common(&self) -> CommonSettings {
        CommonSettings {
            layers: self.layers,
            num_inducing: self.num_inducing,
            hidden_width: self.hidden_width,
            train_samples: self.train_samples,
            predict_samples: self.predict_samples,
            seed: self.seed,
            tune: self.tune,
            learning_rate: None,
            lr_schedule: None,
        }
    }

    /// [`ArchSpec::common`] with a run's learning rate and schedule
    /// ([`CommonSettings::learning_rate`], [`CommonSettings::lr_schedule`]; a backend that
    /// uses no learning rate ignores them).
    pub fn common_with(&self, learning_rate: f64, lr_schedule: &LrSchedule) -> CommonSettings {
        CommonSettings {
            learning_rate: Some(learning_rate),
            lr_schedule: Some(lr_schedule.clone()),
            ..self.common()
        }
    }
}

/// Defaults of `dgp-bench run` for a backend: chosen so that a run with only `--data`,
/// `--backend`, `--layers` is a fair, converged experiment under the paper's protocol.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackendDefaults {
    /// Inducing points per layer.
    pub num_inducing: usize,
    /// Optimisation steps (when [`BackendDefaults::epochs`] is `None`).
    pub steps: usize,
    /// Passes over the training split: when set, the default number of steps is
    /// `max(steps, epochs · ⌈N_train / batch⌉)` (the DSPP paper's protocol, with `steps` as
    /// a floor: on a small data set one epoch is one full-batch step, and 400 Adam steps at
    /// lr 0.01 cannot move a noise variance from its initial 0.69 to the ≈ 0.003 of energy).
    pub epochs: Option<usize>,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Minibatch size cap: the batch is `min(N_train, batch_cap)`.
    pub batch_cap: usize,
    /// Training samples ([`ArchSpec::train_samples`]).
    pub train_samples: usize,
    /// Prediction mixture components ([`ArchSpec::predict_samples`]).
    pub predict_samples: usize,
    /// Held-out early stopping of a run whose protocol and split kind impose none and
    /// whose command line gives no `--early-stopping`
    /// ([`dgp_traits::model::FitConfig::early_stopping`], the patience rule: the rows
    /// held out, the best held-out parameters kept); `None` trains all the steps.
    pub early_stopping: Option<EarlyStopping>,
    /// Adam learning rate of a run whose held-out rule does not run (none given, or
    /// fewer training rows than it needs, [`HeldOutRule::runs_on`]); `None` =
    /// [`BackendDefaults::learning_rate`] always. A rate raised because the rule ends
    /// the run before the model overfits falls back to this one without it.
    pub unguarded_learning_rate: Option<f64>,
}

impl BackendDefaults {
    /// The DSVI reference settings (Salimbeni & Deisenroth 2017's reference code, Doubly-Stochastic-DGP `demos/run_regression.py`):
    /// M = 100, Adam lr 0.01, batch min(N, 10 000), 10 000 steps, one training sample,
    /// 100 test samples.
    pub const PAPER: BackendDefaults = BackendDefaults {
        num_inducing: 100,
        steps: 10_000,
        epochs: None,
        learning_rate: 0.01,
        batch_cap: 10_000,
        train_samples: 1,
        predict_samples: 100,
        early_stopping: None,
        unguarded_learning_rate: None,
    };

    /// What `dgp-bench run` gives svi: [`BackendDefaults::PAPER`] with Adam at lr 0.02,
    /// the 10 000 steps a cap for the backend's convergence stop
    /// (`dgp_svi::BACKEND_CONVERGENCE`). On the published splits the test NLL stops
    /// improving long before the ELBO does (concrete: best by 1 000 steps), and on
    /// low-noise data the noise variance falls for thousands of steps (energy: still
    /// falling at 10 000); lr 0.02 reaches the objective values of lr 0.01 in about half
    /// the steps. The paper's schedule: `--lr 0.01 --set convergence=null`. Traces and
    /// the before/after table: `results/run-defaults/README.md`.
    pub const SVI: BackendDefaults = BackendDefaults {
        learning_rate: 0.02,
        ..BackendDefaults::PAPER
    };

    /// The default Adam learning rate of a run on `n_train` training rows with held-out
    /// rule `rule`: [`BackendDefaults::learning_rate`] when the rule runs on that many
    /// rows, else [`BackendDefaults::unguarded_learning_rate`] when set.
    pub fn learning_rate_for(&self, rule: Option<&HeldOutRule>, n_train: usize) -> f64 {
        match self.unguarded_learning_rate {
            Some(lr) if !rule.is_some_and(|r| r.runs_on(n_train)) => lr,
            _ => self.learning_rate,
        }
    }

    /// The default number of optimisation steps for `n_train` training rows and minibatch
    /// size `batch` (see [`BackendDefaults::epochs`]).
    pub fn steps_for(&self, n_train: usize, batch: usize) -> usize {
        match self.epochs {
            Some(e) => self
                .steps
                .max(e * n_train.div_ceil(batch.clamp(1, n_train.max(1)))),
            None => self.steps,
        }
    }
}

/// Reduced settings of the no-argument default job (which must finish in about three
/// minutes on two cores for all registered backends together).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuickSettings {
    /// Optimisation steps on the real data set (concrete); 0 = the backend does not run
    /// on it in the default job.
    pub steps: usize,
    /// Optimisation steps on the 1-D step function (N = 160 training points).
    pub steps_1d: usize,
    /// Inducing points per layer.
    pub num_inducing: usize,
    /// Minibatch size cap.
    pub batch_cap: usize,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Prediction mixture components.
    pub predict_samples: usize,
    /// How these settings shorten the backend's own schedule, stated in the report (empty:
    /// nothing beyond the numbers above).
    pub note: &'static str,
}

impl QuickSettings {
    /// What the svi backend uses: 1500 Adam steps (lr 0.01) at M = 50 with minibatches of
    /// 256 on concrete, 1500 full-batch steps at M = 20 on the step function, 50
    /// prediction samples.
    pub const DEFAULT: QuickSettings = QuickSettings {
        steps: 1_500,
        steps_1d: 1_500,
        num_inducing: 50,
        batch_cap: 256,
        learning_rate: 0.01,
        predict_samples: 50,
        note: "",
    };
}

/// One registered backend.
#[derive(Clone, Copy, Debug)]
pub struct BackendEntry {
    /// The backend crate's registration: name, description, its configuration (checked
    /// by itself) and its build function.
    pub backend: &'static dyn Backend,
    /// Defaults of `dgp-bench run` / `time`.
    pub defaults: BackendDefaults,
    /// Settings of the no-argument default job.
    pub quick: QuickSettings,
    /// Layer counts the default job trains (SGP = 1, DGP2, DGP3).
    pub layers_in_default_run: &'static [usize],
}

impl BackendEntry {
    /// Name used on the command line (`--backend NAME`) and in reports.
    pub fn name(&self) -> &'static str {
        self.backend.name()
    }

    /// One-line description (paper and method).
    pub fn description(&self) -> &'static str {
        self.backend.description()
    }

    /// What the backend declares it can do.
    pub fn capabilities(&self) -> Capabilities {
        self.backend.capabilities()
    }

    /// Checks the backend-specific settings of `arch` before any training.
    ///
    /// # Errors
    /// [`BenchError::Usage`] naming the backend and the key or field.
    pub fn check(&self, arch: &ArchSpec) -> Result<()> {
        self.backend
            .check(&arch.common(), &arch.settings)
            .map_err(|e| BenchError::Usage(config_message(e)))
    }

    /// Builds an untrained model of `arch` whose optimiser steps at `learning_rate` with
    /// `lr_schedule` ([`ArchSpec::common_with`]), labelling errors with the backend name;
    /// a hyper-parameter search ends when `stop` asks ([`Backend::build`]).
    ///
    /// [`Backend::build`]: dgp_traits::backend::Backend::build
    pub fn build_model(
        &self,
        arch: &ArchSpec,
        learning_rate: f64,
        lr_schedule: &LrSchedule,
        fit: &FitConfig,
        train: &Dataset,
        stop: &FitHooks<'_>,
    ) -> Result<Box<dyn Model>> {
        let common = arch.common_with(learning_rate, lr_schedule);
        self.backend
            .build(&common, &arch.settings, fit, train, stop)
            .map_err(|e| BenchError::run(format!("building {} L={}", self.name(), arch.layers), e))
    }
}

/// The message of a configuration error without the generic "invalid configuration: "
/// prefix (the backend's message names the backend and the key).
pub fn config_message(e: dgp_traits::Error) -> String {
    match e {
        dgp_traits::Error::Config(c) => c.to_string(),
        other => other.to_string(),
    }
}

/// DSPP settings of `dgp-bench run` (paper App. A.2 and the GPyTorch example): 400
/// epochs, but at least 3000 steps, of Adam (lr 0.01, dropped by the model's schedule) with
/// batches of min(N, 1000), M = 128, S = 8 sites; the held-out early stopping of
/// `dgp_dspp::train` keeps the best parameters (and ends training when they stop
/// improving).
const DSPP_DEFAULTS: BackendDefaults = BackendDefaults {
    num_inducing: 128,
    steps: 3_000,
    epochs: Some(400),
    learning_rate: 0.01,
    batch_cap: 1_000,
    train_samples: 8,
    predict_samples: 8,
    early_stopping: None,
    unguarded_learning_rate: None,
};

/// DSPP / PPGPR settings of the default job: at M = 50, 600 steps on concrete and 1500 on
/// the step function, with the backends' own optimiser (Adam lr 0.01, full batch up to
/// 1000 rows) — shorter than `run`, not noisier. Minibatches of 256 or lr 0.03 made
/// eq. (21)'s fits over-confident: on concrete published splits 0–9 (DSPP2, β 0.05, no
/// selection) 95 % coverage 0.897 and NLL 3.214 with batch 256 and lr 0.03, against 0.931
/// and 3.097 with these settings (DSPP3 0.902 → 0.917, PPGPR 0.927 → 0.945). The step
/// function needs 1500 steps at lr 0.01 (DSPP2 NLL −1.21 after 600, −2.94 after 1500).
/// Records and table: `results/dspp-small-data/README.md` §5.
const DSPP_QUICK: QuickSettings = QuickSettings {
    steps: 600,
    steps_1d: 1_500,
    batch_cap: 1_000,
    learning_rate: 0.01,
    ..QuickSettings::DEFAULT
};

/// Structured DGP settings of `dgp-bench run` for star and mf: M = 128 (at most one per
/// training row), batch 512, S = 5 training samples, 100 test samples (Lindinger et al.
/// 2020, §4, and their reference code, Structured_DGP), and for time to a good model Adam
/// lr 0.02 for at most 1 500 steps, with the backends' own whitened coordinates and noise
/// variance started at 0.1 (`dgp_structured::BACKEND_INIT_NOISE_VARIANCE`). The run ends
/// earlier when the training ELBO has converged (`dgp_structured::BACKEND_CONVERGENCE`;
/// `--set convergence=null` turns it off). The paper's own settings: `--protocol
/// lindinger --set whitened=false --set likelihood.init_variance=0.01` (lr 0.005 and the
/// 20 000-step cap come with the protocol). Traces and the before/after table:
/// `results/time-to-model/README.md`.
const STRUCTURED_DEFAULTS: BackendDefaults = BackendDefaults {
    num_inducing: 128,
    steps: 1_500,
    epochs: None,
    learning_rate: 0.02,
    batch_cap: 512,
    train_samples: 5,
    predict_samples: 100,
    early_stopping: None,
    unguarded_learning_rate: None,
};

/// `fc`'s settings of `dgp-bench run`: those of star and mf, at most 200 steps after the
/// backend's mean-field warm start (`dgp_structured::BACKEND_WARM_START`: at most 1 500
/// Adam steps of the mean-field restriction, mf's own run). Its q moves by
/// natural-gradient steps (`dgp_structured::BACKEND_NATGRAD`, γ = 0.03), and one of them
/// costs about ten of mf's steps; from the reference's start the first ≈ 220 steps (at
/// γ = 0.1) only undo its nearly deterministic hidden layers, from the mean-field optimum
/// the steps improve on it at once. 200 steps keep the run within about three of mf's.
/// Records: `results/fc-warm-start/`.
const FC_DEFAULTS: BackendDefaults = BackendDefaults {
    steps: 200,
    ..STRUCTURED_DEFAULTS
};

/// nested's settings of `dgp-bench run`: M = 100, full batches up to 10 000 rows and Adam at
/// lr 0.03 for at most 10 000 steps ([`BackendDefaults::PAPER`] but the rate), ended by
/// held-out early stopping ([`NESTED_EARLY_STOPPING`]). Its bound keeps rising long after
/// the test NLL is best (boston split 0 at lr 0.01: best by 500 steps, worse at 1 500 and
/// after as the noise variance grows), which no stop on the training objective can see;
/// with the held-out rule to end the run, lr 0.03 reaches the held-out optimum in fewer
/// steps and crosses the plateaus on which lr 0.01 stops (energy). Where the rule does not
/// run (fewer than 400 training rows, or `--early-stopping none`) the run is the
/// library's: all 10 000 steps at lr 0.01 (at lr 0.03 the step function's test NLL was
/// 0.9 nats worse over splits 0–4). Records: `results/nested-defaults/`.
const NESTED_DEFAULTS: BackendDefaults = BackendDefaults {
    learning_rate: 0.03,
    early_stopping: Some(NESTED_EARLY_STOPPING),
    unguarded_learning_rate: Some(0.01),
    ..BackendDefaults::PAPER
};

/// nested's held-out rule in `dgp-bench run`: the core's patience rule with 2/17 of the
/// training rows held out and their predictive NLL checked every hundredth of the run's
/// steps ([`EarlyStopping::period`]), ended after 10 checks (a tenth of the steps)
/// without improvement, the best parameters kept; on fewer than 400 training rows (fewer
/// than 47 held out) it does not run and all the steps train on every row: there the
/// held-out score chose steps the test rows did not (a 106-row set: best held-out score
/// at 700 steps, test NLL 0.3 nats worse than after 10 000 steps on every row).
pub const NESTED_EARLY_STOPPING: EarlyStopping = EarlyStopping {
    fraction: 2.0 / 17.0,
    every: 0,
    patience: 10,
    min_rows: 400,
    rises: 0,
};

/// Structured quick settings of the default job (kept small: STAR L = 3 adds at most
/// about 25 s).
const STRUCTURED_QUICK: QuickSettings = QuickSettings {
    steps: 250,
    steps_1d: 250,
    num_inducing: 20,
    batch_cap: 256,
    learning_rate: 0.02,
    predict_samples: 30,
    note: "shortened: the reference trains 20 000 steps at M = 128, width 5, lr 0.005",
};

/// DGPS settings of `dgp-bench run` (Vafa 2016, §5.1.4): M = 10 pseudo points per unit,
/// K = 10 fixed sample paths, at most 1000 L-BFGS iterations per restart (best of the
/// model's 10 restarts), full batch (batch size and learning rate are not used), 100
/// predictive sample paths.
const DGPS_DEFAULTS: BackendDefaults = BackendDefaults {
    num_inducing: 10,
    steps: 1_000,
    epochs: None,
    learning_rate: 0.01,
    batch_cap: 100_000,
    train_samples: 10,
    predict_samples: 100,
    early_stopping: None,
    unguarded_learning_rate: None,
};

/// The backend a subcommand uses when `--backend` is not given.
pub const DEFAULT_BACKEND: &str = "svi";

/// Every backend the benchmark knows, in the order reports list them.
pub static BACKENDS: &[BackendEntry] = &[
    BackendEntry {
        backend: &dgp_svi::SVI_BACKEND,
        defaults: BackendDefaults::SVI,
        quick: QuickSettings::DEFAULT,
        layers_in_default_run: &[1, 2, 3],
    },
    BackendEntry {
        backend: &dgp_nested::NESTED_BACKEND,
        defaults: NESTED_DEFAULTS,
        quick: QuickSettings {
            steps: 1_000,
            ..QuickSettings::DEFAULT
        },
        layers_in_default_run: &[1, 2, 3],
    },
    BackendEntry {
        backend: &dgp_dspp::DSPP_BACKEND,
        defaults: DSPP_DEFAULTS,
        quick: DSPP_QUICK,
        layers_in_default_run: &[2, 3],
    },
    BackendEntry {
        backend: &dgp_dspp::PPGPR_BACKEND,
        defaults: BackendDefaults {
            train_samples: 1,
            predict_samples: 1,
            ..DSPP_DEFAULTS
        },
        quick: DSPP_QUICK,
        layers_in_default_run: &[1],
    },
    BackendEntry {
        backend: &dgp_structured::STAR_BACKEND,
        defaults: STRUCTURED_DEFAULTS,
        quick: STRUCTURED_QUICK,
        layers_in_default_run: &[3],
    },
    BackendEntry {
        backend: &dgp_structured::MF_BACKEND,
        defaults: STRUCTURED_DEFAULTS,
        quick: STRUCTURED_QUICK,
        layers_in_default_run: &[3],
    },
    BackendEntry {
        backend: &dgp_structured::FC_BACKEND,
        defaults: FC_DEFAULTS,
        quick: QuickSettings {
            steps: 300,
            steps_1d: 300,
            num_inducing: 20,
            ..STRUCTURED_QUICK
        },
        layers_in_default_run: &[2],
    },
    BackendEntry {
        backend: &dgp_hmc::DGPS_BACKEND,
        defaults: DGPS_DEFAULTS,
        quick: QuickSettings {
            // The default job runs DGPS on the step function only (thesis §5.1), with at
            // most 500 L-BFGS iterations per restart instead of the thesis' 1000.
            steps: 0,
            steps_1d: 500,
            num_inducing: 10,
            batch_cap: 100_000,
            learning_rate: 0.01,
            predict_samples: 100,
            note: "steps = L-BFGS iterations per restart (500; the thesis uses 1000), best of 10 restarts, step function only; batch unused, no learning rate",
        },
        layers_in_default_run: &[1, 2],
    },
    BackendEntry {
        backend: &dgp_hmc::SGHMC_BACKEND,
        defaults: SGHMC_DEFAULTS,
        quick: SGHMC_QUICK,
        layers_in_default_run: &[2],
    },
];

/// SGHMC settings of `dgp-bench run`: M = 100 (the reference's, cambridge-mlg/sghmc_dgp
/// `models.py`), minibatches of min(N, 256) rows and a budget of 10 000 steps = the model's
/// default schedule (`SghmcConfig::default`: 2 000 burn-in steps with MCEM, then 100
/// samples at thinning 80, step size 0.03, expected data term). The reference runs full
/// batches up to 10 000 rows and 15 000 steps (10 000 burn-in, ε = 0.01); the shorter
/// schedule and the minibatches keep a split under a minute on the small UCI sets with
/// equal or better test NLL (`results/sghmc-defaults/`). `--steps` is the budget of the
/// whole run: a smaller one shrinks burn-in and thinning alike (`SghmcSamplerConfig::schedule`).
const SGHMC_DEFAULTS: BackendDefaults = BackendDefaults {
    num_inducing: 100,
    steps: 10_000,
    epochs: None,
    learning_rate: 0.01,
    batch_cap: 256,
    train_samples: 1,
    predict_samples: 100,
    early_stopping: None,
    unguarded_learning_rate: None,
};

/// SGHMC in the default job: M = 50, full batch, a budget of 1 500 steps, i.e. the
/// model's default schedule shrunk to 15 % (burn-in 300 steps with MCEM, then 100
/// samples at thinning 12). A shorter burn-in leaves the hyperparameters short of their
/// values (noise variance still far above its converged value after 200 steps).
const SGHMC_QUICK: QuickSettings = QuickSettings {
    steps: 1_500,
    steps_1d: 1_500,
    num_inducing: 50,
    batch_cap: 10_000,
    learning_rate: 0.01,
    predict_samples: 100,
    note: "shortened: a 1500-step budget shrinks the default schedule (2 000 burn-in steps, then 100 kept samples 80 steps apart) to 300 burn-in steps, thinning 12, 100 kept samples; no learning rate (the sampler's step size and the MCEM hyper step are the settings sampler.step_size and sampler.hyper_lr)",
};

/// The registry ([`BACKENDS`]).
pub fn backends() -> &'static [BackendEntry] {
    BACKENDS
}

/// Comma-separated names of the registered backends whose capabilities satisfy `pred`.
pub fn names_where(pred: impl Fn(&Capabilities) -> bool) -> String {
    BACKENDS
        .iter()
        .filter(|b| pred(&b.capabilities()))
        .map(|b| b.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Comma-separated names of the registered backends.
pub fn backend_names() -> String {
    BACKENDS
        .iter()
        .map(|b| b.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The backend called `name`.
///
/// # Errors
/// [`BenchError::Usage`] naming the registered backends when there is none of that name.
pub fn find_backend(name: &str) -> Result<&'static BackendEntry> {
    BACKENDS.iter().find(|b| b.name() == name).ok_or_else(|| {
        BenchError::Usage(format!(
            "unknown backend '{name}' (registered: {})",
            backend_names()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nested's raised rate holds only where its held-out rule runs (400 training rows or
    /// more); without a rule, or below that, the run keeps lr 0.01. A backend without an
    /// unguarded rate keeps its one rate.
    #[test]
    fn the_raised_learning_rate_needs_a_rule_that_runs() {
        let nested = find_backend("nested").unwrap().defaults;
        let rule = nested.early_stopping.map(HeldOutRule::Patience);
        assert_eq!(nested.learning_rate_for(rule.as_ref(), 400), 0.03);
        assert_eq!(nested.learning_rate_for(rule.as_ref(), 399), 0.01);
        assert_eq!(nested.learning_rate_for(None, 10_000), 0.01);
        let lindinger = HeldOutRule::lindinger();
        assert_eq!(nested.learning_rate_for(Some(&lindinger), 160), 0.03);
        let svi = find_backend("svi").unwrap().defaults;
        assert_eq!(svi.learning_rate_for(None, 100), svi.learning_rate);
        assert_eq!(svi.learning_rate_for(rule.as_ref(), 100), svi.learning_rate);
        // The library's defaults of a spec choose the rate as `run` does: the step
        // function's 160 training rows are too few for nested's rule.
        let step = crate::datasets::BenchData::load("builtin:step", None, 0).unwrap();
        let spec =
            crate::spec::ExperimentSpec::with_defaults(&step, find_backend("nested").unwrap(), 2);
        assert_eq!(spec.learning_rate, 0.01);
        assert_eq!(spec.early_stopping, rule);
    }

    #[test]
    fn names_are_unique_and_findable() {
        for (i, b) in BACKENDS.iter().enumerate() {
            assert!(BACKENDS[i + 1..].iter().all(|c| c.name() != b.name()));
            assert_eq!(find_backend(b.name()).unwrap().name(), b.name());
            assert!(!b.layers_in_default_run.is_empty());
        }
        let err = find_backend("nope").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("svi"));
    }

    /// Every backend's configuration error is typed: it names the field that is out of
    /// range, not only a sentence about it.
    #[test]
    fn every_backend_names_the_field_it_refuses() {
        let common = dgp_traits::backend::CommonSettings {
            layers: 1,
            num_inducing: 0,
            hidden_width: None,
            train_samples: 1,
            predict_samples: 1,
            seed: 0,
            tune: false,
            learning_rate: None,
            lr_schedule: None,
        };
        for b in BACKENDS {
            match b
                .backend
                .check(&common, &dgp_traits::backend::Settings::new())
            {
                Err(dgp_traits::Error::Config(c)) => {
                    assert_eq!(c.field, "num_inducing", "{}: {c}", b.name());
                    assert!(!c.message.is_empty(), "{}", b.name());
                }
                other => panic!("{}: M = 0 gave {other:?}", b.name()),
            }
        }
    }

    /// `run`'s SGHMC budget is exactly the model's default schedule (burn-in plus kept ·
    /// thinning): a smaller budget would shrink every phase, a larger one is not used.
    #[test]
    fn sghmc_run_budget_is_the_default_schedule() {
        let schedule = dgp_hmc::SghmcConfig::default().sampler.full_schedule();
        assert_eq!(SGHMC_DEFAULTS.steps, schedule.total());
        assert_eq!(
            schedule.thinning,
            dgp_hmc::sghmc::DEFAULT_THINNING,
            "the run default is the model default"
        );
    }
}
