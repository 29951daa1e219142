//! The backend registry: the ONE place where inference backends are listed.
//!
//! Every subcommand (`run`, `time`) and the default no-argument job iterate over
//! [`BACKENDS`]; adding a backend is one [`BackendEntry`] in that list plus its `build`
//! function (and the crate in `dgp-bench/Cargo.toml`), with no edits elsewhere. The `dspp`
//! and `ppgpr` entries below are the worked example: a backend with its own
//! hyper-parameters (the rule and β of [`ArchSpec`]), chosen on validation data inside
//! its `build` function when [`ArchSpec::tune`] is set.

use dgp_dspp::{Dspp, DsppConfig, PAPER_BETAS, PAPER_WIDTHS, Ppgpr, Rule, select_beta};
use dgp_nested::{NestedConfig, NestedDgp};
use dgp_svi::{DeepGp, SviConfig};
use dgp_traits::data::Dataset;
use dgp_traits::model::{FitConfig, Model};
use dgp_traits::optim::NatGradConfig;

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
    /// Quadrature rule (dspp: `qr1`, `qr2`, `qr3`); `None` = the backend's default.
    pub rule: Option<String>,
    /// Mean function of the hidden layers (nested: `zero`, the paper's, or `linear`,
    /// `shared/specs/nested.md` §5); `None` = the backend's default.
    #[serde(default)]
    pub hidden_mean: Option<String>,
    /// Regularisation constant β of the KL term (dspp, ppgpr: β_reg of eq. 21); `None` =
    /// chosen on validation data when [`ArchSpec::tune`] is set, else the backend's default.
    pub beta: Option<f64>,
    /// Choose the backend's regularisation hyper-parameters that are not given explicitly
    /// (dspp: β_reg and the hidden width; ppgpr: β_reg) on a validation part of the
    /// TRAINING split, never the test split (DSPP paper App. A.2). Backends without such
    /// hyper-parameters ignore it.
    pub tune: bool,
    /// Natural-gradient steps on the last layer's q(u) next to Adam (svi:
    /// [`SviConfig::natgrad`]); `None` = Adam on everything. Backends without
    /// natural-gradient steps ignore it.
    #[serde(default)]
    pub natgrad: Option<NatGradConfig>,
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
            rule: None,
            hidden_mean: None,
            beta: None,
            tune: true,
            natgrad: None,
        }
    }
}

/// Builds an untrained model for the (standardised) training data. The fit settings are
/// those the caller will train with; a backend that tunes hyper-parameters on validation
/// data ([`ArchSpec::tune`]) trains its candidates with them.
pub type BuildFn = fn(&ArchSpec, &FitConfig, &Dataset) -> dgp_traits::Result<Box<dyn Model>>;

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
}

impl BackendDefaults {
    /// The DSVI reference settings (`shared/specs/dsvi.md` §5–6, `run_regression.py`):
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
    };

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
    /// `--samples` sets the number of mixture components OF THE MODEL (dspp: quadrature
    /// sites), used both in training and in prediction, in `run` and in `time` alike.
    pub samples_are_components: bool,
}

impl BackendEntry {
    /// Builds an untrained model, labelling errors with the backend name.
    pub fn build_model(
        &self,
        arch: &ArchSpec,
        fit: &FitConfig,
        train: &Dataset,
    ) -> Result<Box<dyn Model>> {
        (self.build)(arch, fit, train)
            .map_err(|e| BenchError::run(format!("building {} L={}", self.name, arch.layers), e))
    }
}

fn build_svi(
    a: &ArchSpec,
    _fit: &FitConfig,
    train: &Dataset,
) -> dgp_traits::Result<Box<dyn Model>> {
    let cfg = SviConfig {
        layers: a.layers,
        num_inducing: a.num_inducing,
        hidden_width: a.hidden_width,
        train_samples: a.train_samples,
        init_seed: a.seed,
        natgrad: a.natgrad,
        ..SviConfig::default()
    };
    Ok(Box::new(DeepGp::new(cfg, train)?))
}

fn build_nested(
    a: &ArchSpec,
    _fit: &FitConfig,
    train: &Dataset,
) -> dgp_traits::Result<Box<dyn Model>> {
    let d = NestedConfig::default();
    let linear_mean = match a.hidden_mean.as_deref() {
        None => d.linear_mean,
        Some("zero") => false,
        Some("linear") => true,
        Some(other) => {
            return Err(dgp_traits::Error::Config(format!(
                "nested: unknown hidden-layer mean '{other}' (zero or linear)"
            )));
        }
    };
    let cfg = NestedConfig {
        layers: a.layers,
        num_inducing: a.num_inducing,
        hidden_width: a.hidden_width,
        init_seed: a.seed,
        linear_mean,
        ..d
    };
    Ok(Box::new(NestedDgp::new(cfg, train)?))
}

/// The DSPP configuration of an [`ArchSpec`] (before tuning): M, layers, sites = the
/// mixture components, the rule, β and the hidden width where given.
fn dspp_config(a: &ArchSpec) -> dgp_traits::Result<DsppConfig> {
    let d = DsppConfig::default();
    Ok(DsppConfig {
        layers: a.layers,
        num_inducing: a.num_inducing,
        hidden_width: a.hidden_width.unwrap_or(d.hidden_width),
        sites: a.predict_samples,
        rule: match &a.rule {
            Some(r) => r.parse::<Rule>()?,
            None => d.rule,
        },
        beta: a.beta.unwrap_or(d.beta),
        init_seed: a.seed,
        ..d
    })
}

/// β_reg (and, for two or more layers, the hidden width) chosen by [`select_beta`] on a
/// validation part of `train` when [`ArchSpec::tune`] is set and they are not given.
fn tuned_dspp_config(
    a: &ArchSpec,
    fit: &FitConfig,
    train: &Dataset,
) -> dgp_traits::Result<DsppConfig> {
    let base = dspp_config(a)?;
    let betas: Vec<f64> = match a.beta {
        Some(b) => vec![b],
        None => PAPER_BETAS.to_vec(),
    };
    let widths: Vec<usize> = match a.hidden_width {
        Some(w) => vec![w],
        None => PAPER_WIDTHS.to_vec(),
    };
    if !a.tune || (betas.len() == 1 && (widths.len() == 1 || a.layers == 1)) {
        return Ok(base);
    }
    let (beta, width, _) = select_beta(train, &base, &betas, &widths, fit, a.seed)?;
    Ok(DsppConfig {
        beta,
        hidden_width: width,
        ..base
    })
}

fn build_dspp(
    a: &ArchSpec,
    fit: &FitConfig,
    train: &Dataset,
) -> dgp_traits::Result<Box<dyn Model>> {
    let cfg = tuned_dspp_config(a, fit, train)?;
    if cfg.layers == 1 {
        return Ok(Box::new(Ppgpr::new(cfg, train)?));
    }
    Ok(Box::new(Dspp::new(cfg, train)?))
}

fn build_ppgpr(
    a: &ArchSpec,
    fit: &FitConfig,
    train: &Dataset,
) -> dgp_traits::Result<Box<dyn Model>> {
    if a.layers != 1 {
        return Err(dgp_traits::Error::Config(format!(
            "ppgpr is the one-layer model (eq. 16); got --layers {} (use --backend dspp)",
            a.layers
        )));
    }
    build_dspp(a, fit, train)
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
};

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
        samples_are_components: false,
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
        samples_are_components: false,
    },
    BackendEntry {
        name: "dspp",
        description: "deep sigma point processes, learned quadrature (Jankowiak, Pleiss & Gardner 2020)",
        build: build_dspp,
        defaults: DSPP_DEFAULTS,
        quick: QuickSettings {
            steps: 600,
            steps_1d: 600,
            learning_rate: 0.03,
            ..QuickSettings::DEFAULT
        },
        layers_in_default_run: &[2, 3],
        samples_in_run: "quadrature sites S (QR3: S mixture components; QR1/QR2: S^W), in training and prediction",
        samples_in_time: "quadrature sites S, as in run",
        samples_are_components: true,
    },
    BackendEntry {
        name: "ppgpr",
        description: "parametric predictive GP regression, the one-layer DSPP (Jankowiak et al. 2020, eq. 16)",
        build: build_ppgpr,
        defaults: BackendDefaults {
            train_samples: 1,
            predict_samples: 1,
            ..DSPP_DEFAULTS
        },
        quick: QuickSettings {
            steps: 600,
            steps_1d: 600,
            learning_rate: 0.03,
            ..QuickSettings::DEFAULT
        },
        layers_in_default_run: &[1],
        samples_in_run: "ignored: the predictive is one Gaussian",
        samples_in_time: "ignored",
        samples_are_components: true,
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
