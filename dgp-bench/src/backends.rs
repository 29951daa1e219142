//! The backend registry: the ONE place where inference backends are listed.
//!
//! Every subcommand (`run`, `time`) and the default no-argument job iterate over
//! [`BACKENDS`]; adding a backend is one [`BackendEntry`] in that list plus its `build`
//! function (and the crate in `dgp-bench/Cargo.toml`), with no edits elsewhere:
//!
//! ```text
//! fn build_dspp(a: &ArchSpec, train: &Dataset) -> dgp_traits::Result<Box<dyn Model>> {
//!     let cfg = dgp_dspp::DsppConfig { layers: a.layers, num_inducing: a.num_inducing,
//!         hidden_width: a.hidden_width, init_seed: a.seed, ..Default::default() };
//!     Ok(Box::new(dgp_dspp::Dspp::new(cfg, train)?))
//! }
//! // in BACKENDS:
//! BackendEntry { name: "dspp", description: "deep sigma point processes (Jankowiak et al. 2020)",
//!     build: build_dspp, defaults: BackendDefaults { steps: 5_000, ..BackendDefaults::PAPER },
//!     quick: QuickSettings::DEFAULT, layers_in_default_run: &[1, 2, 3],
//!     samples_in_run: "quadrature sites (fixed by the model)",
//!     samples_in_time: "quadrature sites S of the objective" },
//! ```

use dgp_nested::{NestedConfig, NestedDgp};
use dgp_svi::{DeepGp, SviConfig};
use dgp_traits::data::Dataset;
use dgp_traits::model::Model;

use crate::error::{BenchError, Result};

/// Architecture and sampling settings handed to a backend's constructor.
///
/// Each backend maps these onto its own configuration; fields a backend has no use for are
/// ignored (its [`BackendEntry::samples_in_run`] / [`BackendEntry::samples_in_time`] say
/// what the sample counts mean for it).
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
}

/// Builds an untrained model for the (standardised) training data.
pub type BuildFn = fn(&ArchSpec, &Dataset) -> dgp_traits::Result<Box<dyn Model>>;

/// Defaults of `dgp-bench run` for a backend: chosen so that a run with only `--data`,
/// `--backend`, `--layers` is a fair, converged experiment under the paper's protocol.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackendDefaults {
    /// Inducing points per layer.
    pub num_inducing: usize,
    /// Optimisation steps.
    pub steps: usize,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Minibatch size cap: the batch is `min(N_train, batch_cap)`.
    pub batch_cap: usize,
    /// Training samples ([`ArchSpec::train_samples`]).
    pub train_samples: usize,
    /// Prediction mixture components ([`ArchSpec::predict_samples`]).
    pub predict_samples: usize,
}

impl BackendDefaults {
    /// The DSVI reference settings (`shared/specs/dsvi.md` §5–6, `run_regression.py`):
    /// M = 100, Adam lr 0.01, batch min(N, 10 000), 10 000 steps, one training sample,
    /// 100 test samples.
    pub const PAPER: BackendDefaults = BackendDefaults {
        num_inducing: 100,
        steps: 10_000,
        learning_rate: 0.01,
        batch_cap: 10_000,
        train_samples: 1,
        predict_samples: 100,
    };
}

/// Reduced settings of the no-argument default job (which must finish in about three
/// minutes on two cores for all registered backends together).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuickSettings {
    /// Optimisation steps on the real data set (concrete).
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
    };
}

/// One registered backend.
#[derive(Clone, Copy, Debug)]
pub struct BackendEntry {
    /// Name used on the command line (`--backend NAME`) and in reports.
    pub name: &'static str,
    /// One-line description (paper and method).
    pub description: &'static str,
    /// Constructor of an untrained model.
    pub build: BuildFn,
    /// Defaults of `dgp-bench run` / `time`.
    pub defaults: BackendDefaults,
    /// Settings of the no-argument default job.
    pub quick: QuickSettings,
    /// Layer counts the default job trains (SGP = 1, DGP2, DGP3).
    pub layers_in_default_run: &'static [usize],
    /// What `--samples` means for `run` (prediction).
    pub samples_in_run: &'static str,
    /// What `--samples` means for `time` (training step).
    pub samples_in_time: &'static str,
}

impl BackendEntry {
    /// Builds an untrained model, labelling errors with the backend name.
    pub fn build_model(&self, arch: &ArchSpec, train: &Dataset) -> Result<Box<dyn Model>> {
        (self.build)(arch, train)
            .map_err(|e| BenchError::run(format!("building {} L={}", self.name, arch.layers), e))
    }
}

fn build_svi(a: &ArchSpec, train: &Dataset) -> dgp_traits::Result<Box<dyn Model>> {
    let cfg = SviConfig {
        layers: a.layers,
        num_inducing: a.num_inducing,
        hidden_width: a.hidden_width,
        train_samples: a.train_samples,
        init_seed: a.seed,
        ..SviConfig::default()
    };
    Ok(Box::new(DeepGp::new(cfg, train)?))
}

fn build_nested(a: &ArchSpec, train: &Dataset) -> dgp_traits::Result<Box<dyn Model>> {
    let cfg = NestedConfig {
        layers: a.layers,
        num_inducing: a.num_inducing,
        hidden_width: a.hidden_width,
        init_seed: a.seed,
        ..NestedConfig::default()
    };
    Ok(Box::new(NestedDgp::new(cfg, train)?))
}

/// Every backend the benchmark knows, in the order reports list them.
pub static BACKENDS: &[BackendEntry] = &[
    BackendEntry {
        name: "svi",
        description: "doubly-stochastic variational inference (Salimbeni & Deisenroth 2017)",
        build: build_svi,
        defaults: BackendDefaults::PAPER,
        quick: QuickSettings::DEFAULT,
        layers_in_default_run: &[1, 2, 3],
        samples_in_run: "Monte Carlo samples of the hidden layers = predictive mixture components (eq. 18; L = 1 gives one Gaussian)",
        samples_in_time: "Monte Carlo samples per data point in the ELBO (SviConfig::train_samples, eq. 17)",
    },
    BackendEntry {
        name: "nested",
        description: "nested variational compression with psi-statistics (Hensman & Lawrence 2014)",
        build: build_nested,
        defaults: BackendDefaults::PAPER,
        quick: QuickSettings {
            steps: 1_000,
            ..QuickSettings::DEFAULT
        },
        layers_in_default_run: &[1, 2, 3],
        samples_in_run: "ignored: the default prediction is one moment-matched Gaussian per point (NestedConfig::predict)",
        samples_in_time: "ignored: moments are propagated deterministically",
    },
];

/// The registry ([`BACKENDS`]).
pub fn backends() -> &'static [BackendEntry] {
    BACKENDS
}

/// Comma-separated names of the registered backends.
pub fn backend_names() -> String {
    BACKENDS
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The backend called `name`.
///
/// # Errors
/// [`BenchError::Usage`] naming the registered backends when there is none of that name.
pub fn find_backend(name: &str) -> Result<&'static BackendEntry> {
    BACKENDS.iter().find(|b| b.name == name).ok_or_else(|| {
        BenchError::Usage(format!(
            "unknown backend '{name}' (registered: {})",
            backend_names()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_findable() {
        for (i, b) in BACKENDS.iter().enumerate() {
            assert!(BACKENDS[i + 1..].iter().all(|c| c.name != b.name));
            assert_eq!(find_backend(b.name).unwrap().name, b.name);
            assert!(!b.layers_in_default_run.is_empty());
        }
        let err = find_backend("nope").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("svi"));
    }
}
