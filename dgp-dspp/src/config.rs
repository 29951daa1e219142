//! Configuration of a deep sigma point process, with the defaults of the paper and of its
//! GPyTorch reference (its DSPP example).

use dgp_core::{Error, Result};
use dgp_traits::fit::Training;
use dgp_traits::kernels::KernelKind;
use dgp_traits::likelihoods::Likelihood;
use dgp_traits::mean::LinearInit;
use serde::{Deserialize, Serialize};

/// Largest number of mixture components a grid rule (QR1/QR2, `S^W`) may have.
pub const MAX_GRID_COMPONENTS: usize = 4096;

/// The quadrature rule that replaces the hidden layers' Gaussian marginals by a finite set
/// of sigma points (paper §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// QR1, eq. (22): a tensor grid of `S^W` points with learnable sites `ξ_w^{(s)}`
    /// (`S·W` reals per layer) and `S^W` free simplex weights.
    Qr1,
    /// QR2: QR1 with symmetric sites `ξ_w^{(s)} = −ξ_w^{(S+1−s)}` (`⌊S/2⌋·W` reals per layer;
    /// the middle site of an odd `S` is 0).
    Qr2,
    /// QR3, eq. (23): `S` sites "lined up" across the GPs of a layer (and across layers),
    /// `S·W` learnable reals per layer and `S` simplex weights. The paper's default.
    Qr3,
}

impl std::str::FromStr for Rule {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "qr1" => Ok(Rule::Qr1),
            "qr2" => Ok(Rule::Qr2),
            "qr3" => Ok(Rule::Qr3),
            other => Err(Error::config(
                "rule",
                format!("unknown quadrature rule {other:?} (expected qr1, qr2 or qr3)"),
            )),
        }
    }
}

/// How quadrature sites and weights are initialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteInit {
    /// Probabilists' Gauss–Hermite nodes and weights (eqs. 18–20): QR1/QR2 start as the
    /// tensor Gauss–Hermite rule (weights `Π_w ω^{(s_w)}`); QR3 puts node `s` on every GP
    /// (`ξ_w^{(s)} = ξ^{(s)}_{GH}`) with weight `ω^{(s)}_{GH}`. Deterministic.
    GaussHermite,
    /// GPyTorch's initialisation: sites and weight logits i.i.d. N(0, 1) (for QR2 the free
    /// half of the sites; the weights are `softmax` of the logits).
    Random,
}

impl std::str::FromStr for SiteInit {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "gh" | "gauss-hermite" | "gausshermite" | "gauss_hermite" => Ok(SiteInit::GaussHermite),
            "random" => Ok(SiteInit::Random),
            other => Err(Error::config(
                "site_init",
                format!("unknown site initialisation {other:?} (expected gh or random)"),
            )),
        }
    }
}

/// Covariance of the whitened q(v) of every GP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QCov {
    /// Mean-field `diag(s²)` (the paper, §5: "DSPPs use diagonal S").
    Diag,
    /// Full covariance through a lower Cholesky factor with positive diagonal.
    Full,
}

impl std::str::FromStr for QCov {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "diag" | "diagonal" | "mean-field" => Ok(QCov::Diag),
            "full" | "cholesky" => Ok(QCov::Full),
            other => Err(Error::config(
                "q_covariance",
                format!("unknown q covariance {other:?} (expected diag or full)"),
            )),
        }
    }
}

/// How the inducing inputs of layers ≥ 2 are initialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaterZInit {
    /// i.i.d. N(0, 1) draws, `M × W_{l−1}` (the GPyTorch notebook).
    Random,
    /// The first layer's k-means centres pushed through the mean functions of the earlier
    /// layers (as the DSVI reference does), so Z starts where the hidden inputs are.
    Propagated,
}

/// Learning-rate schedule of [`crate::DsppModel`]'s training loop: the rate is multiplied by
/// `factor` after each fraction `milestones[k]` of the steps (PyTorch `MultiStepLR`; the
/// paper "progressively decreases" it, App. A.2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LrDrops {
    /// Fractions of the total number of steps, each in (0, 1).
    pub milestones: Vec<f64>,
    /// Multiplier at each milestone, in (0, 1].
    pub factor: f64,
}

impl Default for LrDrops {
    fn default() -> Self {
        LrDrops {
            milestones: vec![0.5, 0.75],
            factor: 0.3,
        }
    }
}

/// [`dgp_traits::train::EarlyStopping::rises`] of the default DSPP fit: stop once the
/// held-out NLL has risen 7 evaluations in a row (7 % of the steps at the default period
/// of a hundredth of them), where the patience rule waits 20 evaluations after the best.
/// On small data eq. (21)'s held-out NLL climbs steadily once past its optimum (the
/// collapse [`crate::train`] describes); the rule ends that climb after seven
/// evaluations instead of twenty and keeps the best parameters found until then. A
/// score that only wanders is left to the patience rule.
pub const DSPP_RISES: usize = 7;

/// Architecture and training settings of a [`crate::DsppModel`] (and of [`crate::PpgprModel`], which
/// uses only the one-layer part).
///
/// ```
/// use dgp_dspp::{DsppConfig, Rule};
/// let cfg = DsppConfig { rule: Rule::Qr3, sites: 8, beta: 0.05, ..Default::default() };
/// assert!(cfg.validate().is_ok());
/// assert_eq!(cfg.num_components(), 8);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DsppConfig {
    /// Number of GP layers L ≥ 1 (L = 1 is PPGPR, eq. 16).
    pub layers: usize,
    /// Width W of every hidden layer (paper: chosen from {3, 5} on validation data).
    pub hidden_width: usize,
    /// Inducing points per GP, M.
    pub num_inducing: usize,
    /// Quadrature rule.
    pub rule: Rule,
    /// Quadrature sites S per hidden GP (QR3: mixture components; QR1/QR2: `S^W` of them).
    pub sites: usize,
    /// Regularisation constant β_reg of eq. (21).
    pub beta: f64,
    /// Initialisation of sites and weights.
    pub init: SiteInit,
    /// Covariance of q(v).
    pub q_cov: QCov,
    /// Likelihood: Gaussian regression, or classification — Bernoulli (probit, logit) with
    /// one latent GP per target column, multiclass (robust-max, softmax) with K latent GPs
    /// in the last layer. Eq. (21)'s per-site term is then the likelihood's predictive
    /// `log ∫ p(y | f) N(f | μ_k, v_k) df` ([`Likelihood::log_predictive_fixed`]).
    pub likelihood: Likelihood,
    /// For multi-output regression: the linear model of coregionalisation of App. A.3 with
    /// this many latent GPs W' in the last layer, mixed by a learned W'×P matrix (the paper
    /// uses W' = P). `None`: one independent GP per output.
    pub lmc_latent: Option<usize>,
    /// Kernel of every GP (paper and GPyTorch: Matérn 5/2 with ARD).
    pub kernel: KernelKind,
    /// One lengthscale per input dimension.
    pub ard: bool,
    /// Initial lengthscales and kernel variances (GPyTorch: softplus(0) = log 2).
    pub init_lengthscale: f64,
    /// Initial kernel variance (outputscale).
    pub init_variance: f64,
    /// Each hidden GP has its own kernel, inducing inputs and mean function, as in GPyTorch
    /// (`true`), or the GPs of a layer share them (`false`, cheaper: one projection per
    /// layer).
    pub independent_gps: bool,
    /// Initialisation of the hidden layers' learned linear mean functions. Default: the
    /// PCA projection of the DSVI reference (`[I, 0]` when the layer widens), so hidden
    /// inputs start on the data's scale; the GPyTorch example draws N(0, 1) weights and bias
    /// ([`DsppConfig::gpytorch_reference`]). On boston splits 0–1 (2 layers, W = 5,
    /// β = 0.05, M = 128, dgp-bench) the PCA/propagated start gave test NLL 2.49 and RMSE
    /// 2.73 against 2.64 and 3.62 for the GPyTorch start; on concrete splits 0–1, 3.09 and
    /// 5.05 against 3.03 and 5.03 (two splits each: indicative only).
    pub hidden_mean_init: LinearInit,
    /// Initialisation of the inducing inputs of layers ≥ 2. Default: propagated through
    /// the initial means (DSVI reference); GPyTorch: N(0, 1) draws.
    pub later_z_init: LaterZInit,
    /// Lower bound of the Gaussian noise variance (GPyTorch: 1e-4), in model units.
    pub noise_floor: f64,
    /// The inducing inputs Z of every GP are trained when the training set has at least
    /// `train_inducing_min_ratio · M` rows, and otherwise stay at their initial values
    /// (k-means centres for the first layer, see [`LaterZInit`] for the others). GPyTorch
    /// and the paper always train them (ratio 0). Default 16 (2048 rows at M = 128:
    /// protein, kin8nm and power train them; boston, energy, concrete and wine-red do not).
    /// Why: eq. (21) is not a bound, so trained Z add capacity to the parametric model and
    /// let it interpolate small data sets ([`crate::train`]). The row count is a proxy for
    /// "small and nearly noise-free"; on small but noisy data trained Z can be better
    /// (set 0).
    pub train_inducing_min_ratio: f64,
    /// After training with held-out early stopping, scale every component variance of
    /// the predictive by the factor that maximises the held-out rows' log density
    /// ([`dgp_traits::calibration::variance_scale`]); Gaussian likelihood without the LMC
    /// only. Off by default: the early-stopping point is already close to the held-out
    /// optimum of the variances.
    pub calibrate_variance: bool,
    /// After the held-out early stopping has chosen its step k, train the model again
    /// from where the main loop started, on every training row (the held-out ones
    /// included), for k steps with the same learning-rate schedule, and keep that model.
    /// The held-out rows (2/17 of the data by default) then inform the fit too. Default
    /// on; costs k more steps, which run beside the held-out run (the same model bit for
    /// bit) when a full batch of every row is one gradient chunk and the rayon pool has a
    /// second thread. Done only with full-batch training (batch ≥ training rows;
    /// with minibatches, k steps on more rows are fewer passes over them), and not when
    /// `calibrate_variance` is on (it needs the held-out rows unseen) or without
    /// held-out early stopping.
    pub refit_all_rows: bool,
    /// Lloyd iterations of the k-means initialisation of the first layer's Z.
    pub kmeans_iters: usize,
    /// Base learning rate α > 0 of the Adam steps (Kingma & Ba 2015, Algorithm 1; other
    /// Adam settings at [`dgp_traits::optim::AdamConfig::default`]) of
    /// [`dgp_traits::model::Model::fit`], its restarts included; `lr_drops` schedules it.
    /// Default 0.01 (the GPyTorch example's), also when absent from JSON.
    pub learning_rate: f64,
    /// Learning-rate schedule of [`dgp_traits::model::Model::fit`].
    pub lr_drops: LrDrops,
    /// Early stopping on held-out training rows (default on; `None` trains on every row for
    /// all steps): the core's patience rule, by default also ended once the held-out NLL
    /// has risen [`DSPP_RISES`] evaluations in a row. See [`crate::train`] for why a DSPP
    /// needs it on small data.
    pub early_stopping: Option<dgp_traits::train::EarlyStopping>,
    /// Random restarts (paper App. A.2: 3): each is trained for `restart_fraction` of the
    /// steps (keeping its best held-out parameters when early stopping is on), and the one
    /// with the best held-out NLL (the training NLL without held-out rows) is trained to
    /// completion. Default 1: on boston three restarts were no better than one start
    /// (`results/dspp-small-data/README.md` §6).
    pub restarts: usize,
    /// Fraction of the steps spent on each restart candidate.
    pub restart_fraction: f64,
    /// When the backend chooses β_reg and the width on validation rows (`tune`, paper
    /// App. A.2) for a model of two or more layers, its one-layer special case PPGPR
    /// (eq. 16) is scored on the same validation rows for every β too, and built instead
    /// when it scores best ([`crate::select_model`]; the model's description says which
    /// was chosen). Default on: a DSPP whose hidden layer is narrower than the inputs
    /// does not contain the PPGPR on those inputs, and on small sets it can fit worse;
    /// the validation rows decide. Ignored for one layer and without the selection.
    pub select_one_layer: bool,
    /// Seed of the initialisation (k-means, random means, Z, sites, weights, q means).
    pub init_seed: u64,
    /// Choose β_reg among [`crate::PAPER_BETAS`] on validation rows held out of the
    /// training data (paper App. A.2; [`crate::select_model`]) instead of using
    /// [`DsppConfig::beta`]. Default on.
    pub tune_beta: bool,
    /// Choose the hidden width among [`crate::PAPER_WIDTHS`] on the same validation rows
    /// (two or more layers) instead of using [`DsppConfig::hidden_width`]. Default on.
    pub tune_width: bool,
    /// The training schedule ([`Training`]) of [`dgp_traits::fitted::Estimator::fit`]:
    /// `epochs` passes over the training rows with `steps` as a floor, minibatches of
    /// `batch_size`. The held-out rule of the DSPP fit is [`DsppConfig::early_stopping`].
    pub training: Training,
}

impl Default for DsppConfig {
    /// The default: the GPyTorch example's model (M = 128, S = 8 QR3 sites, Matérn 5/2
    /// ARD, Adam at lr 0.01 dropped ×0.1 at [`LrDrops`]'s milestones) trained for 400
    /// epochs but at least 3 000 steps on minibatches of min(N, 1 000), with held-out early
    /// stopping and a refit on every row, β_reg and the width chosen on validation rows
    /// (paper App. A.2). On a small data set one epoch is one full-batch step, and 400
    /// Adam steps at lr 0.01 cannot move a noise variance from its initial 0.69 to the
    /// ≈ 0.003 of energy: hence the floor. The paper's own schedule is
    /// [`DsppConfig::paper`].
    fn default() -> Self {
        DsppConfig {
            layers: 2,
            hidden_width: 3,
            num_inducing: 128,
            rule: Rule::Qr3,
            sites: 8,
            beta: 0.05,
            init: SiteInit::Random,
            q_cov: QCov::Diag,
            likelihood: Likelihood::gaussian(std::f64::consts::LN_2),
            lmc_latent: None,
            kernel: KernelKind::Matern52,
            ard: true,
            init_lengthscale: std::f64::consts::LN_2,
            init_variance: std::f64::consts::LN_2,
            independent_gps: true,
            hidden_mean_init: LinearInit::Pca,
            later_z_init: LaterZInit::Propagated,
            noise_floor: 1e-4,
            train_inducing_min_ratio: 16.0,
            calibrate_variance: false,
            refit_all_rows: true,
            kmeans_iters: 25,
            learning_rate: 0.01,
            lr_drops: LrDrops::default(),
            early_stopping: Some(dgp_traits::train::EarlyStopping {
                rises: DSPP_RISES,
                ..Default::default()
            }),
            restarts: 1,
            restart_fraction: 0.1,
            select_one_layer: true,
            init_seed: 0,
            tune_beta: true,
            tune_width: true,
            training: Training {
                steps: 3_000,
                epochs: Some(400),
                batch_size: 1_000,
                ..Training::default()
            },
        }
    }
}

impl DsppConfig {
    /// The paper's setting (Jankowiak et al. 2020, App. A.2): S = 10 QR3 sites, M = 300,
    /// 400 epochs of minibatches of 1 000 with Adam at lr 0.01 progressively decreased,
    /// three random restarts (the best trained to completion), β_reg and the width chosen
    /// on validation rows; no held-out early stopping and no refit.
    pub fn paper() -> Self {
        DsppConfig {
            sites: 10,
            num_inducing: 300,
            restarts: 3,
            early_stopping: None,
            refit_all_rows: false,
            training: Training {
                steps: 1,
                epochs: Some(400),
                batch_size: 1_000,
                ..Training::default()
            },
            ..DsppConfig::default()
        }
    }

    /// Whether [`DsppConfig::tune_beta`] or [`DsppConfig::tune_width`] (for two or more
    /// layers) leave anything to choose on validation rows.
    pub fn selects(&self) -> bool {
        self.tune_beta || (self.tune_width && self.layers > 1)
    }

    /// The initialisation of GPyTorch's DSPP example: hidden
    /// linear means with N(0, 1) weights and bias, later-layer inducing inputs drawn from
    /// N(0, 1), all inducing inputs trained; everything else as [`Default`].
    pub fn gpytorch_reference() -> Self {
        DsppConfig {
            hidden_mean_init: LinearInit::RandomNormal,
            later_z_init: LaterZInit::Random,
            train_inducing_min_ratio: 0.0,
            ..Default::default()
        }
    }

    /// The PPGPR configuration (eq. 16): one layer, everything else as given.
    pub fn ppgpr(self) -> Self {
        DsppConfig { layers: 1, ..self }
    }

    /// Whether the inducing inputs are trained on a training set of `n` rows
    /// ([`DsppConfig::train_inducing_min_ratio`]).
    pub fn trains_inducing(&self, n: usize) -> bool {
        n as f64 >= self.train_inducing_min_ratio * self.num_inducing as f64
    }

    /// Number of mixture components K of the predictive: 1 for L = 1, `S` for QR3, `S^W`
    /// for QR1/QR2.
    pub fn num_components(&self) -> usize {
        if self.layers <= 1 {
            return 1;
        }
        match self.rule {
            Rule::Qr3 => self.sites,
            Rule::Qr1 | Rule::Qr2 => u32::try_from(self.hidden_width)
                .ok()
                .and_then(|w| self.sites.checked_pow(w))
                .unwrap_or(usize::MAX),
        }
    }

    /// Checks every range; called by [`crate::DsppModel::new`].
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, m: &str| Err(Error::config(field, m));
        self.training.validate()?;
        if self.layers == 0 {
            return bad("layers", "must be at least 1");
        }
        if self.num_inducing == 0 {
            return bad("num_inducing", "must be at least 1");
        }
        if self.layers > 1 && self.hidden_width == 0 {
            return bad("hidden_width", "must be at least 1");
        }
        dgp_traits::skeleton::check_sizes(
            "dspp",
            self.layers,
            &[self.hidden_width],
            self.num_inducing,
        )?;
        if self.sites == 0 {
            return bad("sites", "must be at least 1");
        }
        if self.layers > 1 && self.num_components() > MAX_GRID_COMPONENTS {
            return bad(
                "sites",
                &format!(
                    "the {:?} grid has {}^{} components, more than {MAX_GRID_COMPONENTS}",
                    self.rule, self.sites, self.hidden_width
                ),
            );
        }
        if !(self.beta >= 0.0 && self.beta.is_finite()) {
            return bad("beta", "must be finite and ≥ 0");
        }
        if self.lmc_latent == Some(0) {
            return bad("lmc_latent", "must be at least 1");
        }
        if let Some(q) = self.lmc_latent
            && q > dgp_traits::skeleton::MAX_WIDTH
        {
            return Err(Error::config(
                "lmc_latent",
                format!(
                    "must be at most {}, got {q}",
                    dgp_traits::skeleton::MAX_WIDTH
                ),
            ));
        }
        if self.lmc_latent.is_some() && !self.likelihood.has_noise_variance() {
            return bad(
                "lmc_latent",
                "the LMC output is for Gaussian regression only",
            );
        }
        for (what, v) in [
            ("init_lengthscale", self.init_lengthscale),
            ("init_variance", self.init_variance),
        ] {
            if !(v > dgp_traits::layer::HYPER_FLOOR && v.is_finite()) {
                return bad(what, "must be finite and > 1e-6");
            }
        }
        if !(self.noise_floor > 0.0 && self.noise_floor.is_finite()) {
            return bad("noise_floor", "must be finite and > 0");
        }
        if !(self.train_inducing_min_ratio >= 0.0 && self.train_inducing_min_ratio.is_finite()) {
            return bad("train_inducing_min_ratio", "must be finite and >= 0");
        }
        if let Some(v) = self.likelihood.init_noise_variance()
            && v <= self.noise_floor
        {
            return bad(
                "likelihood",
                "the initial noise variance must exceed noise_floor",
            );
        }
        if !(self.learning_rate > 0.0 && self.learning_rate.is_finite()) {
            return bad("learning_rate", "must be finite and > 0");
        }
        if !(self.lr_drops.factor > 0.0 && self.lr_drops.factor <= 1.0)
            || self
                .lr_drops
                .milestones
                .iter()
                .any(|m| !(*m > 0.0 && *m < 1.0))
        {
            return bad(
                "lr_drops",
                "needs milestones in (0, 1) and a factor in (0, 1]",
            );
        }
        if let Some(es) = &self.early_stopping {
            es.validate()?;
        }
        if self.restarts == 0 {
            return bad("restarts", "must be at least 1");
        }
        if !(self.restart_fraction > 0.0 && self.restart_fraction < 1.0) {
            return bad("restart_fraction", "must be in (0, 1)");
        }
        self.likelihood.validate()
    }

    /// Widths W_0 (inputs), W_1 … W_{L−1} (hidden), W_L (GPs of the last layer: the outputs,
    /// the LMC's latent GPs, or K for a K-class likelihood) for data with `input_dim`
    /// columns and `output_dim` targets.
    pub fn widths(&self, input_dim: usize, output_dim: usize) -> Vec<usize> {
        let mut w = vec![input_dim];
        w.extend(std::iter::repeat_n(self.hidden_width, self.layers - 1));
        w.push(
            self.lmc_latent
                .unwrap_or_else(|| self.likelihood.latent_dim(output_dim)),
        );
        w
    }
}
