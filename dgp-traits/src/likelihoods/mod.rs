//! Likelihoods `p(y | f)` of the last layer, shared by every backend.
//!
//! # Design
//! A likelihood is described by the serialisable configuration enum [`Likelihood`]
//! (stored in model files and benchmark configs). Its *learned* parameter — the Gaussian
//! noise variance σ² — is not stored here: it belongs to the model's parameter vector (in
//! unconstrained form) and is handed to the likelihood as a tape node, so that every
//! backend chooses its own transform and the likelihood stays stateless. The enum offers
//! checked entry points (shapes, labels, configuration) that dispatch to the fused tape
//! operations below; backends that know their likelihood statically may call those
//! operations directly.
//!
//! All quantities are **per entry**: `y`, `mu`, `var` are `R × C` matrices (`N × 1` for a
//! single output; one column per output otherwise) and the result is the `R × C` matrix of
//! per-point terms. Sum it with [`Tape::sum`] or weight it with [`Tape::weighted_sum`]
//! (minibatch scaling, DSPP mixture weights, Monte Carlo averages).
//!
//! | | Gaussian, `N(y | f, σ²)` | Bernoulli, squashed probit |
//! |---|---|---|
//! | expected log-lik | closed form, [`Tape::gaussian_expected_log_lik`] | Gauss–Hermite, [`Tape::probit_expected_log_lik`] |
//! | log predictive | `log N(y | μ, v + σ²)`, [`Tape::gaussian_log_predictive`] | `log[(1−2ε)Φ(sμ/√(1+v)) + ε]`, [`Tape::probit_log_predictive`] |
//! | plain values | [`scalar`] | [`scalar`] |
//!
//! Classification likelihoods beyond the probit (Bernoulli-logit, robust-max and softmax
//! with K latent functions per point) are listed in the table on [`Likelihood`]; their
//! fused operations are [`Tape::logit_expected_log_lik`],
//! [`Tape::robust_max_expected_log_lik`] and [`Tape::softmax_expected_log_lik`] (with the
//! matching `_log_predictive` operations), and [`Likelihood::class_probs`] turns latent
//! marginals into class probabilities. Multiclass operations take an `R × 1` label column
//! and `R × K` latent moments and return `R × 1`.
//!
//! ## Labels of the Bernoulli likelihood
//! `y = 1` is the positive class; `y = 0` **or** `y = −1` the negative class (both
//! conventions are accepted; [`Likelihood::check_targets`] rejects anything else).
//!
//! ## Squashing
//! As GPflow's `probit`, the link is `p(y = 1 | f) = (1 − 2ε)Φ(f) + ε` with ε = 10⁻³
//! by default ([`DEFAULT_PROBIT_SQUASH`], as the DSVI reference code does), which bounds every log
//! probability below by log ε and keeps the quadrature well behaved for badly
//! misclassified points. ε = 0 gives the plain probit link (computed with a stable
//! log Φ). The predictive probability `(1 − 2ε)Φ(μ/√(1 + v)) + ε` is exact for the
//! squashed link, because the squashing is affine in Φ.
//!
//! The normal cdf/log-cdf used here are the full-precision ones of [`dgp_core::special`]
//! (Cody 1969).

mod gaussian;
use dgp_data::labels;
mod logit;
mod multiclass;
mod probit;

pub use multiclass::VAR_FLOOR;

use crate::tape::{Tape, Var};
use dgp_core::rng::{Rng, seeded, standard_normal};
use dgp_core::{Error, LabelError, Result, check_finite};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

/// A family of likelihoods of the last layer, as a backend declares what it can train.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LikelihoodFamily {
    /// Gaussian noise on real-valued targets (regression).
    Gaussian,
    /// Two classes (probit or logit link).
    Bernoulli,
    /// K ≥ 2 classes with K latent functions (softmax or robust-max).
    Multiclass,
}

/// GPflow's default squashing ε of the probit link.
pub const DEFAULT_PROBIT_SQUASH: f64 = 1e-3;

/// GPflow's default number of Gauss–Hermite points for non-Gaussian expectations.
pub const DEFAULT_GH_POINTS: usize = 20;

/// Configuration of the Gaussian likelihood `p(y | f) = N(y | f, σ²)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GaussianLikelihood {
    /// Initial noise variance σ² (> 0). GPflow's default is 1.0; the reference scripts
    /// also use 0.05, 0.01·Var(y) and similar values — backends may override it.
    pub init_variance: f64,
}

impl Default for GaussianLikelihood {
    fn default() -> Self {
        GaussianLikelihood { init_variance: 1.0 }
    }
}

/// Configuration of the Bernoulli likelihood with squashed probit link
/// `p(y = 1 | f) = (1 − 2ε)Φ(f) + ε`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbitLikelihood {
    /// Squashing ε ∈ [0, ½); default [`DEFAULT_PROBIT_SQUASH`]. 0 = plain probit.
    pub squash: f64,
    /// Gauss–Hermite nodes for the expected log-likelihood (≥ 1; default
    /// [`DEFAULT_GH_POINTS`], as GPflow).
    ///
    /// Accuracy (absolute error of the per-point expectation, measured against adaptive
    /// integration): with ε = 10⁻³ the log-link bends sharply where it meets its floor
    /// log ε, so 20 nodes give ≈ 1e-10 at v = 0.1 but ≈ 1e-5 at v = 0.5, ≈ 2e-4 at v = 1
    /// and ≈ 1e-2 at v = 4 (150 nodes: < 1e-8 at v = 1). The plain link (ε = 0) is
    /// smoother: 20 nodes give ≈ 2e-10 at v = 1 and ≈ 5e-6 at v = 4.
    pub gh_points: usize,
}

impl Default for ProbitLikelihood {
    fn default() -> Self {
        ProbitLikelihood {
            squash: DEFAULT_PROBIT_SQUASH,
            gh_points: DEFAULT_GH_POINTS,
        }
    }
}

/// GPflow's default robust-max ε (the assumed fraction of flipped labels).
pub const DEFAULT_ROBUST_MAX_EPSILON: f64 = 1e-3;

/// Default number of Monte Carlo evaluations per point of the softmax expected
/// log-likelihood (GPflow's `num_monte_carlo_points`).
pub const DEFAULT_SOFTMAX_MC_POINTS: usize = 100;

/// Default number of Monte Carlo evaluations of the softmax predictive probabilities.
pub const DEFAULT_SOFTMAX_PREDICT_POINTS: usize = 256;

fn default_gh_points() -> usize {
    DEFAULT_GH_POINTS
}
fn default_robust_max_epsilon() -> f64 {
    DEFAULT_ROBUST_MAX_EPSILON
}
fn default_mc_points() -> usize {
    DEFAULT_SOFTMAX_MC_POINTS
}
fn default_predict_points() -> usize {
    DEFAULT_SOFTMAX_PREDICT_POINTS
}

/// Configuration of the Bernoulli likelihood with the logistic link
/// `p(y = 1 | f) = σ(f) = 1/(1 + e^{−f})`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogitLikelihood {
    /// Gauss–Hermite nodes for the expected log-likelihood and the predictive probability
    /// (≥ 1; default [`DEFAULT_GH_POINTS`]). `log σ` and `σ` are analytic in the strip
    /// |Im f| < π, so the rule converges geometrically, more slowly for larger v. Worst
    /// absolute errors over μ ∈ [−6, 6] (measured against Simpson integration): 20 nodes
    /// ≈ 1e-11 at v = 1, 5e-8 at v = 2, 1.4e-6 (expectation) / 4.9e-6 (probability) at
    /// v = 4, 2e-4 at v = 9; 60 nodes < 3e-7 up to v = 9.
    pub gh_points: usize,
}

impl Default for LogitLikelihood {
    fn default() -> Self {
        LogitLikelihood {
            gh_points: DEFAULT_GH_POINTS,
        }
    }
}

/// Configuration of the robust-max multiclass likelihood (Hernández-Lobato et al. 2011):
/// `p(y | f) = 1 − ε` if `y = argmax_k f_k`, else `ε/(K − 1)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RobustMaxLikelihood {
    /// Number of classes K ≥ 2 (= number of latent functions of the last layer).
    pub num_classes: usize,
    /// ε ∈ (0, 1) (default [`DEFAULT_ROBUST_MAX_EPSILON`], GPflow's).
    #[serde(default = "default_robust_max_epsilon")]
    pub epsilon: f64,
    /// Gauss–Hermite nodes of the one-dimensional integral over the label's latent
    /// function (≥ 1; default [`DEFAULT_GH_POINTS`], GPflow's).
    ///
    /// Accuracy depends on the ratio of the label's variance v_y to the others' v_j: the
    /// integrand `Π_j Φ((f_y − μ_j)/√v_j)` has steps of width √v_j and the nodes are spaced
    /// on the scale √v_y. Worst absolute error of `P_y` (measured against Simpson
    /// integration, four classes): equal variances 2e-8 (20 nodes), 1e-13 (40); v_y = 4 v_j
    /// 5e-4 (20), 5e-8 (60); v_y = 16 v_j 2e-2 (20), 4e-5 (100). The expected
    /// log-likelihood's error is `|log(1 − ε) − log(ε/(K − 1))|` (≈ 8.5 for ε = 10⁻³,
    /// K = 3) times that.
    #[serde(default = "default_gh_points")]
    pub gh_points: usize,
}

/// Configuration of the softmax multiclass likelihood
/// `p(y | f) = exp(f_y) / Σ_k exp(f_k)`, whose expectations are Monte Carlo estimates
/// with antithetic pairs of standard-normal draws.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftmaxLikelihood {
    /// Number of classes K ≥ 2 (= number of latent functions of the last layer).
    pub num_classes: usize,
    /// Evaluations per point of the expected log-likelihood in training: `mc_points/2`
    /// fresh draws from the training generator, each also used negated (even, ≥ 2;
    /// default [`DEFAULT_SOFTMAX_MC_POINTS`]).
    #[serde(default = "default_mc_points")]
    pub mc_points: usize,
    /// Evaluations of the predictive class probabilities (and of the plain-value log
    /// predictive): `predict_points/2` draws from `seeded(predict_seed)` shared by every
    /// point and component, each also used negated (even, ≥ 2; default
    /// [`DEFAULT_SOFTMAX_PREDICT_POINTS`]).
    #[serde(default = "default_predict_points")]
    pub predict_points: usize,
    /// Seed of the predictive draws (default 0).
    #[serde(default)]
    pub predict_seed: u64,
}

impl SoftmaxLikelihood {
    /// The softmax likelihood for `num_classes` classes with the default Monte Carlo sizes.
    pub fn new(num_classes: usize) -> Self {
        SoftmaxLikelihood {
            num_classes,
            mc_points: DEFAULT_SOFTMAX_MC_POINTS,
            predict_points: DEFAULT_SOFTMAX_PREDICT_POINTS,
            predict_seed: 0,
        }
    }

    /// The `(predict_points/2) × K` shared draws of the predictive (see
    /// [`SoftmaxLikelihood::predict_points`]).
    fn predict_draws(&self) -> Mat<f64> {
        let mut rng = seeded(self.predict_seed);
        standard_normal(&mut rng, self.predict_points / 2, self.num_classes)
    }

    /// The predictive draws repeated for `rows` rows (`(rows·predict_points/2) × K`, row
    /// `r` the draw `r mod (predict_points/2)`): the layout the fused softmax operations
    /// read, every row with the same draws.
    fn shared_draws(&self, rows: usize) -> Mat<f64> {
        let shared = self.predict_draws();
        let h = shared.nrows();
        Mat::from_fn(rows * h, self.num_classes, |r, j| shared[(r % h, j)])
    }
}

/// The likelihood of a model, as a serialisable configuration.
///
/// JSON form: `{"kind": "gaussian", "init_variance": 0.1}`,
/// `{"kind": "bernoulli_probit", "squash": 0.001, "gh_points": 20}`,
/// `{"kind": "bernoulli_logit", "gh_points": 20}`,
/// `{"kind": "robust_max", "num_classes": 10, "epsilon": 0.001, "gh_points": 20}` or
/// `{"kind": "softmax", "num_classes": 10, "mc_points": 100, "predict_points": 256,
/// "predict_seed": 0}` (every field but `num_classes` optional).
///
/// | | expected log-lik | predictive class probabilities | latent functions |
/// |---|---|---|---|
/// | `bernoulli_probit` | Gauss–Hermite | closed form | one per target column |
/// | `bernoulli_logit` | Gauss–Hermite | Gauss–Hermite | one per target column |
/// | `robust_max` | 1-D Gauss–Hermite over the label's latent | 1-D Gauss–Hermite per class | K |
/// | `softmax` | Monte Carlo, antithetic, caller's generator | Monte Carlo, fixed seed | K |
///
/// Bernoulli labels: 1 positive, 0 or −1 negative. Multiclass labels: one column of the
/// integers `0..K`.
///
/// ```
/// use dgp_traits::likelihoods::Likelihood;
/// use dgp_traits::tape::Tape;
/// use faer::mat;
/// let lik = Likelihood::default(); // Gaussian
/// let mut t = Tape::new();
/// let y = t.constant(mat![[0.5], [1.0]]);
/// let mu = t.leaf(mat![[0.4], [1.2]]);
/// let var = t.leaf(mat![[0.1], [0.2]]);
/// let s2 = t.leaf(mat![[0.3]]);
/// let per_point = lik.expected_log_lik(&mut t, y, mu, var, Some(s2)).unwrap(); // 2×1
/// let total = t.sum(per_point);
/// let g = t.backward(total);
/// assert!(g.get(s2).is_some());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Likelihood {
    /// Gaussian noise with a learned variance σ².
    Gaussian(GaussianLikelihood),
    /// Binary classification with the (squashed) probit link.
    BernoulliProbit(ProbitLikelihood),
    /// Binary classification with the logistic link.
    BernoulliLogit(LogitLikelihood),
    /// K classes, robust-max link, K latent functions.
    RobustMax(RobustMaxLikelihood),
    /// K classes, softmax link, K latent functions.
    Softmax(SoftmaxLikelihood),
}

impl Default for Likelihood {
    fn default() -> Self {
        Likelihood::Gaussian(GaussianLikelihood::default())
    }
}

impl Likelihood {
    /// Gaussian likelihood with initial noise variance `init_variance`.
    pub fn gaussian(init_variance: f64) -> Self {
        Likelihood::Gaussian(GaussianLikelihood { init_variance })
    }

    /// Bernoulli likelihood with GPflow's squashed probit link and 20 Gauss–Hermite points.
    pub fn probit() -> Self {
        Likelihood::BernoulliProbit(ProbitLikelihood::default())
    }

    /// Bernoulli likelihood with the logistic link and 20 Gauss–Hermite points.
    pub fn logit() -> Self {
        Likelihood::BernoulliLogit(LogitLikelihood::default())
    }

    /// Robust-max likelihood for `num_classes` classes with GPflow's ε = 10⁻³ and 20
    /// Gauss–Hermite points.
    pub fn robust_max(num_classes: usize) -> Self {
        Likelihood::RobustMax(RobustMaxLikelihood {
            num_classes,
            epsilon: DEFAULT_ROBUST_MAX_EPSILON,
            gh_points: DEFAULT_GH_POINTS,
        })
    }

    /// Softmax likelihood for `num_classes` classes with the default Monte Carlo sizes.
    pub fn softmax(num_classes: usize) -> Self {
        Likelihood::Softmax(SoftmaxLikelihood::new(num_classes))
    }

    /// The family of the likelihood (what a backend declares it can train).
    pub fn family(&self) -> LikelihoodFamily {
        match self {
            Likelihood::Gaussian(_) => LikelihoodFamily::Gaussian,
            Likelihood::BernoulliProbit(_) | Likelihood::BernoulliLogit(_) => {
                LikelihoodFamily::Bernoulli
            }
            Likelihood::RobustMax(_) | Likelihood::Softmax(_) => LikelihoodFamily::Multiclass,
        }
    }

    /// The likelihood of a classification problem with `num_classes` classes by name:
    /// `probit`, `logit` (two classes only), `robust-max`, `softmax` (any K ≥ 2, K latent
    /// functions); `None` is the default for K: the Bernoulli probit for two classes (the
    /// DSVI paper's binary experiments), robust-max for more (its MNIST experiment).
    ///
    /// # Errors
    /// [`Error::Config`] (field `likelihood`) for an unknown name, a binary likelihood on
    /// more than two classes, or fewer than two classes.
    pub fn for_classes(name: Option<&str>, num_classes: usize) -> Result<Self> {
        let name = name.unwrap_or(if num_classes == 2 {
            "probit"
        } else {
            "robust-max"
        });
        let lik = match name {
            "probit" => Likelihood::probit(),
            "logit" => Likelihood::logit(),
            "robust-max" | "robust_max" | "robustmax" => Likelihood::robust_max(num_classes),
            "softmax" => Likelihood::softmax(num_classes),
            other => {
                return Err(Error::config(
                    "likelihood",
                    format!(
                        "unknown classification likelihood '{other}' (probit, logit, robust-max, softmax)"
                    ),
                ));
            }
        };
        lik.validate()?;
        if lik.num_classes() != Some(num_classes) {
            return Err(Error::config(
                "likelihood",
                format!(
                    "likelihood '{name}' is binary but the data have {num_classes} classes (use robust-max or softmax)"
                ),
            ));
        }
        Ok(lik)
    }

    /// The name [`Likelihood::for_classes`] accepts for this likelihood (`gaussian` for
    /// the Gaussian).
    pub fn name(&self) -> &'static str {
        match self {
            Likelihood::Gaussian(_) => "gaussian",
            Likelihood::BernoulliProbit(_) => "probit",
            Likelihood::BernoulliLogit(_) => "logit",
            Likelihood::RobustMax(_) => "robust-max",
            Likelihood::Softmax(_) => "softmax",
        }
    }

    /// The number of classes: `None` for the Gaussian, 2 for Bernoulli, K for multiclass.
    pub fn num_classes(&self) -> Option<usize> {
        match self {
            Likelihood::Gaussian(_) => None,
            Likelihood::BernoulliProbit(_) | Likelihood::BernoulliLogit(_) => Some(2),
            Likelihood::RobustMax(r) => Some(r.num_classes),
            Likelihood::Softmax(s) => Some(s.num_classes),
        }
    }

    /// Whether the likelihood has K latent functions for one label column.
    pub fn is_multiclass(&self) -> bool {
        self.family() == LikelihoodFamily::Multiclass
    }

    /// Number of latent functions of the last layer for targets with `target_cols`
    /// columns: `target_cols` for Gaussian and Bernoulli (one latent function per
    /// column), K for multiclass (the one label column).
    pub fn latent_dim(&self, target_cols: usize) -> usize {
        match self {
            Likelihood::RobustMax(r) => r.num_classes,
            Likelihood::Softmax(s) => s.num_classes,
            _ => target_cols,
        }
    }

    /// Checks the configuration ranges.
    ///
    /// # Errors
    /// [`Error::Config`] for a value out of range; [`Error::Label`] with
    /// [`LabelError::TooFewClasses`] for K < 2.
    pub fn validate(&self) -> Result<()> {
        let gh = |what: &str, n: usize| {
            if n == 0 {
                Err(Error::config(
                    "gh_points",
                    format!("{what} likelihood: gh_points must be at least 1"),
                ))
            } else {
                Ok(())
            }
        };
        let classes = |k: usize| {
            if k < 2 {
                Err(Error::Label(LabelError::TooFewClasses { num_classes: k }))
            } else {
                Ok(())
            }
        };
        match self {
            Likelihood::Gaussian(g) => {
                if !(g.init_variance > 0.0 && g.init_variance.is_finite()) {
                    return Err(Error::config(
                        "init_variance",
                        format!(
                            "Gaussian likelihood: init_variance must be positive and finite, got {}",
                            g.init_variance
                        ),
                    ));
                }
            }
            Likelihood::BernoulliProbit(p) => {
                if !(0.0..0.5).contains(&p.squash) {
                    return Err(Error::config(
                        "squash",
                        format!(
                            "probit likelihood: squash must be in [0, 0.5), got {}",
                            p.squash
                        ),
                    ));
                }
                gh("probit", p.gh_points)?;
            }
            Likelihood::BernoulliLogit(l) => gh("logit", l.gh_points)?,
            Likelihood::RobustMax(r) => {
                classes(r.num_classes)?;
                if !(r.epsilon > 0.0 && r.epsilon < 1.0) {
                    return Err(Error::config(
                        "epsilon",
                        format!(
                            "robust-max likelihood: epsilon must be in (0, 1), got {}",
                            r.epsilon
                        ),
                    ));
                }
                gh("robust-max", r.gh_points)?;
            }
            Likelihood::Softmax(s) => {
                classes(s.num_classes)?;
                for (what, n) in [
                    ("mc_points", s.mc_points),
                    ("predict_points", s.predict_points),
                ] {
                    if n < 2 || n % 2 != 0 {
                        return Err(Error::config(
                            "samples",
                            format!(
                                "softmax likelihood: {what} must be even and at least 2 (antithetic pairs), got {n}"
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the likelihood has a learned noise variance (a `noise_var` tape node).
    pub fn has_noise_variance(&self) -> bool {
        matches!(self, Likelihood::Gaussian(_))
    }

    /// The configured initial noise variance, if the likelihood has one.
    pub fn init_noise_variance(&self) -> Option<f64> {
        match self {
            Likelihood::Gaussian(g) => Some(g.init_variance),
            _ => None,
        }
    }

    /// Validates targets: finite for the Gaussian; labels in {1, 0, −1} for Bernoulli
    /// likelihoods; one column of integer labels in `0..K` for multiclass likelihoods.
    ///
    /// # Errors
    /// Gaussian: [`Error::NonFinite`]. Bernoulli: [`Error::NonFinite`] or
    /// [`Error::Config`] naming the bad label. Multiclass: [`Error::Label`] (one column,
    /// finite, integer, in range) and the errors of [`Likelihood::validate`].
    pub fn check_targets(&self, y: MatRef<'_, f64>) -> Result<()> {
        if let Some(k) = self.num_classes().filter(|_| self.is_multiclass()) {
            self.validate()?;
            labels::class_labels(y, k)?;
            return Ok(());
        }
        check_finite("targets", y)?;
        if self.family() == LikelihoodFamily::Bernoulli {
            for j in 0..y.ncols() {
                for i in 0..y.nrows() {
                    let v = y[(i, j)];
                    if v != 1.0 && v != 0.0 && v != -1.0 {
                        return Err(Error::config(
                            "labels",
                            format!(
                                "binary label at row {i}, column {j} is {v}; expected 1 (positive) or 0/−1 (negative)"
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// [`Likelihood::check_targets`] for training targets, and for classification also
    /// that every class occurs (in every column for Bernoulli likelihoods), since a model
    /// cannot learn a class it never sees.
    ///
    /// # Errors
    /// Those of [`Likelihood::check_targets`]; [`Error::Label`] with
    /// [`LabelError::MissingClass`] for an absent class.
    pub fn check_training_targets(&self, y: MatRef<'_, f64>) -> Result<()> {
        self.check_targets(y)?;
        match (self.family(), self.num_classes()) {
            (LikelihoodFamily::Multiclass, Some(k)) => {
                let labels = labels::class_labels(y, k)?;
                labels::check_all_classes_present(&labels, k)
            }
            (LikelihoodFamily::Bernoulli, _) => {
                for j in 0..y.ncols() {
                    let pos = (0..y.nrows()).any(|i| y[(i, j)] > 0.0);
                    let neg = (0..y.nrows()).any(|i| y[(i, j)] <= 0.0);
                    if !(pos && neg) {
                        return Err(Error::Label(LabelError::MissingClass {
                            class: usize::from(!pos),
                            num_classes: 2,
                        }));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Per-entry (per-point for multiclass) `E_{N(f|μ,v)} log p(y | f)` on the tape; see
    /// [`Tape::gaussian_expected_log_lik`], [`Tape::probit_expected_log_lik`],
    /// [`Tape::logit_expected_log_lik`] and [`Tape::robust_max_expected_log_lik`].
    ///
    /// Shapes: Gaussian and Bernoulli `y`, `mu`, `var` and the result `R × C`; multiclass
    /// `y` `R × 1` labels, `mu`, `var` `R × K`, result `R × 1`. `noise_var` (σ², `1 × 1`
    /// or `1 × C`) is required by the Gaussian likelihood and must be `None` otherwise.
    /// Shapes, labels (multiclass) and configuration are checked and reported as errors.
    /// The softmax expectation is a Monte Carlo estimate and needs a generator: use
    /// [`Likelihood::expected_log_lik_with_rng`].
    pub fn expected_log_lik(
        &self,
        tape: &mut Tape,
        y: Var,
        mu: Var,
        var: Var,
        noise_var: Option<Var>,
    ) -> Result<Var> {
        self.tape_op(tape, y, mu, var, noise_var, None, false)
    }

    /// [`Likelihood::expected_log_lik`] for every likelihood: the softmax estimate draws
    /// `mc_points/2` standard-normal K-vectors per point from `rng` (used with their
    /// antithetic partners, [`Tape::softmax_expected_log_lik`]); the other likelihoods do
    /// not touch `rng`.
    pub fn expected_log_lik_with_rng(
        &self,
        tape: &mut Tape,
        y: Var,
        mu: Var,
        var: Var,
        noise_var: Option<Var>,
        rng: &mut Rng,
    ) -> Result<Var> {
        self.tape_op(tape, y, mu, var, noise_var, Some(rng), false)
    }

    /// Per-entry (per-point for multiclass) log predictive density
    /// `log ∫ p(y | f) N(f | μ, v) df` on the tape; see [`Tape::gaussian_log_predictive`],
    /// [`Tape::probit_log_predictive`], [`Tape::logit_log_predictive`] and
    /// [`Tape::robust_max_log_predictive`]. Arguments as [`Likelihood::expected_log_lik`];
    /// the softmax needs [`Likelihood::log_predictive_with_rng`].
    pub fn log_predictive(
        &self,
        tape: &mut Tape,
        y: Var,
        mu: Var,
        var: Var,
        noise_var: Option<Var>,
    ) -> Result<Var> {
        self.tape_op(tape, y, mu, var, noise_var, None, true)
    }

    /// [`Likelihood::log_predictive`] for every likelihood; the softmax estimate
    /// ([`Tape::softmax_log_predictive`]) draws `mc_points/2` K-vectors per point from
    /// `rng`, the other likelihoods do not touch it.
    pub fn log_predictive_with_rng(
        &self,
        tape: &mut Tape,
        y: Var,
        mu: Var,
        var: Var,
        noise_var: Option<Var>,
        rng: &mut Rng,
    ) -> Result<Var> {
        self.tape_op(tape, y, mu, var, noise_var, Some(rng), true)
    }

    /// [`Likelihood::log_predictive`] for every likelihood as a deterministic function of
    /// the latent moments: the softmax's `log (1/S) Σ_s softmax_y(μ + √v ⊙ ε_s)` uses the
    /// predictive draws shared by every row (`predict_points` antithetic evaluations from
    /// `seeded(predict_seed)`, [`SoftmaxLikelihood::predict_points`]) instead of fresh
    /// draws, so an objective built on it is deterministic (its gradient is the exact
    /// derivative of that fixed-draw estimate); the other likelihoods are exactly
    /// [`Likelihood::log_predictive`] (closed form for the Gaussian and probit,
    /// Gauss–Hermite for the logit and robust-max).
    ///
    /// # Errors
    /// As [`Likelihood::log_predictive`].
    pub fn log_predictive_fixed(
        &self,
        tape: &mut Tape,
        y: Var,
        mu: Var,
        var: Var,
        noise_var: Option<Var>,
    ) -> Result<Var> {
        let Likelihood::Softmax(s) = self else {
            return self.log_predictive(tape, y, mu, var, noise_var);
        };
        self.validate()?;
        check_tape_shapes(tape, self, y, mu, var, noise_var)?;
        self.check_targets(tape.value(y))?;
        let draws = s.shared_draws(tape.shape(mu).0);
        Ok(tape.softmax_log_predictive(y, mu, var, draws.as_ref(), true))
    }

    #[allow(clippy::too_many_arguments)]
    fn tape_op(
        &self,
        tape: &mut Tape,
        y: Var,
        mu: Var,
        var: Var,
        noise_var: Option<Var>,
        rng: Option<&mut Rng>,
        predictive: bool,
    ) -> Result<Var> {
        self.validate()?;
        check_tape_shapes(tape, self, y, mu, var, noise_var)?;
        if self.is_multiclass() {
            self.check_targets(tape.value(y))?;
        }
        Ok(match self {
            Likelihood::Gaussian(_) => {
                let s2 = noise_var.expect("checked by check_tape_shapes");
                if predictive {
                    tape.gaussian_log_predictive(y, mu, var, s2)
                } else {
                    tape.gaussian_expected_log_lik(y, mu, var, s2)
                }
            }
            Likelihood::BernoulliProbit(p) => {
                if predictive {
                    tape.probit_log_predictive(y, mu, var, p.squash)
                } else {
                    let rule = probit::cached_rule(p.gh_points)?;
                    tape.probit_expected_log_lik(y, mu, var, p.squash, &rule)
                }
            }
            Likelihood::BernoulliLogit(l) => {
                let rule = probit::cached_rule(l.gh_points)?;
                if predictive {
                    tape.logit_log_predictive(y, mu, var, &rule)
                } else {
                    tape.logit_expected_log_lik(y, mu, var, &rule)
                }
            }
            Likelihood::RobustMax(r) => {
                let rule = probit::cached_rule(r.gh_points)?;
                if predictive {
                    tape.robust_max_log_predictive(y, mu, var, r.epsilon, &rule)
                } else {
                    tape.robust_max_expected_log_lik(y, mu, var, r.epsilon, &rule)
                }
            }
            Likelihood::Softmax(s) => {
                let rng = rng.ok_or_else(|| {
                    Error::config("rng", 
                        "the softmax expectations are Monte Carlo estimates: call the _with_rng variant with a generator"
                    )
                })?;
                let rows = tape.shape(mu).0;
                let draws = standard_normal(rng, rows * (s.mc_points / 2), s.num_classes);
                if predictive {
                    tape.softmax_log_predictive(y, mu, var, draws.as_ref(), true)
                } else {
                    tape.softmax_expected_log_lik(y, mu, var, draws.as_ref(), true)
                }
            }
        })
    }

    /// Per-entry (per-point for multiclass) expected log-likelihood on plain values (no
    /// tape). `noise_var` holds σ² (one value, or one per column) for the Gaussian and is
    /// ignored otherwise. Shapes as [`Likelihood::expected_log_lik`]; the softmax uses
    /// its predictive draws (`predict_points`, `predict_seed`).
    pub fn expected_log_lik_values(
        &self,
        y: MatRef<'_, f64>,
        mu: MatRef<'_, f64>,
        var: MatRef<'_, f64>,
        noise_var: &[f64],
    ) -> Result<Mat<f64>> {
        self.values(y, mu, var, noise_var, false)
    }

    /// Per-entry (per-point for multiclass) log predictive density on plain values (no
    /// tape); arguments as [`Likelihood::expected_log_lik_values`].
    pub fn log_predictive_values(
        &self,
        y: MatRef<'_, f64>,
        mu: MatRef<'_, f64>,
        var: MatRef<'_, f64>,
        noise_var: &[f64],
    ) -> Result<Mat<f64>> {
        self.values(y, mu, var, noise_var, true)
    }

    fn values(
        &self,
        y: MatRef<'_, f64>,
        mu: MatRef<'_, f64>,
        var: MatRef<'_, f64>,
        noise_var: &[f64],
        predictive: bool,
    ) -> Result<Mat<f64>> {
        self.validate()?;
        check_value_shapes(self, y, mu, var, noise_var)?;
        Ok(match self {
            Likelihood::Gaussian(_) => Mat::from_fn(mu.nrows(), mu.ncols(), |i, j| {
                let s2 = col_noise(noise_var, j);
                if predictive {
                    scalar::gaussian_log_density(y[(i, j)], mu[(i, j)], var[(i, j)] + s2)
                } else {
                    scalar::gaussian_expected_log_lik(y[(i, j)], mu[(i, j)], var[(i, j)], s2)
                }
            }),
            Likelihood::BernoulliProbit(p) if predictive => {
                Mat::from_fn(mu.nrows(), mu.ncols(), |i, j| {
                    scalar::probit_log_predictive(y[(i, j)], mu[(i, j)], var[(i, j)], p.squash)
                })
            }
            Likelihood::BernoulliProbit(p) => {
                let rule = probit::cached_rule(p.gh_points)?;
                Mat::from_fn(mu.nrows(), mu.ncols(), |i, j| {
                    probit::expected_log_lik_parts(
                        y[(i, j)],
                        mu[(i, j)],
                        var[(i, j)],
                        p.squash,
                        &rule,
                    )
                    .0
                })
            }
            Likelihood::BernoulliLogit(_) | Likelihood::RobustMax(_) | Likelihood::Softmax(_) => {
                let mut tape = Tape::new();
                let (yv, mv, vv) = (
                    tape.constant(y.to_owned()),
                    tape.constant(mu.to_owned()),
                    tape.constant(var.to_owned()),
                );
                let out = if let Likelihood::Softmax(s) = self {
                    let draws = s.shared_draws(mu.nrows());
                    if predictive {
                        tape.softmax_log_predictive(yv, mv, vv, draws.as_ref(), true)
                    } else {
                        tape.softmax_expected_log_lik(yv, mv, vv, draws.as_ref(), true)
                    }
                } else {
                    self.tape_op(&mut tape, yv, mv, vv, None, None, predictive)?
                };
                tape.take_value(out)
            }
        })
    }

    /// Per-entry predictive mean and variance of `y` given `f ∼ N(μ, v)`:
    /// Gaussian `(μ, v + σ²)` — the component of a Gaussian-mixture `Predictive`;
    /// Bernoulli `(p, p(1 − p))` with `p = P(y = 1)` (probit: `(1 − 2ε)Φ(μ/√(1 + v)) + ε`;
    /// logit: Gauss–Hermite of σ).
    ///
    /// # Errors
    /// Shape errors; [`Error::Config`] for multiclass likelihoods (use
    /// [`Likelihood::class_probs`]).
    pub fn predictive_moments(
        &self,
        mu: MatRef<'_, f64>,
        var: MatRef<'_, f64>,
        noise_var: &[f64],
    ) -> Result<(Mat<f64>, Mat<f64>)> {
        self.validate()?;
        if self.is_multiclass() {
            return Err(Error::Unsupported(
                "multiclass likelihoods have no per-column predictive moments; use class_probs"
                    .into(),
            ));
        }
        check_value_shapes(self, mu, mu, var, noise_var)?;
        let (r, c) = (mu.nrows(), mu.ncols());
        Ok(match self {
            Likelihood::Gaussian(_) => (
                mu.to_owned(),
                Mat::from_fn(r, c, |i, j| {
                    scalar::gaussian_predictive_var(var[(i, j)], col_noise(noise_var, j))
                }),
            ),
            _ => {
                let p = self.positive_probs(mu, var)?;
                let v = Mat::from_fn(r, c, |i, j| p[(i, j)] * (1.0 - p[(i, j)]));
                (p, v)
            }
        })
    }

    /// `P(y = 1)` entry by entry for a Bernoulli likelihood.
    fn positive_probs(&self, mu: MatRef<'_, f64>, var: MatRef<'_, f64>) -> Result<Mat<f64>> {
        let (r, c) = (mu.nrows(), mu.ncols());
        match self {
            Likelihood::BernoulliProbit(lp) => Ok(Mat::from_fn(r, c, |i, j| {
                scalar::probit_prob(mu[(i, j)], var[(i, j)], lp.squash)
            })),
            Likelihood::BernoulliLogit(l) => {
                let rule = probit::cached_rule(l.gh_points)?;
                Ok(Mat::from_fn(r, c, |i, j| {
                    logit::predictive_parts(1.0, mu[(i, j)], var[(i, j)], &rule)
                        .0
                        .clamp(0.0, 1.0)
                }))
            }
            _ => Err(Error::Unsupported(
                "positive-class probabilities need a Bernoulli likelihood".into(),
            )),
        }
    }

    /// Predictive class probabilities `p(y_n = c) = ∫ p(y = c | f) N(f | μ_n, diag v_n) df`
    /// of N points from the marginals of the latent functions, `N × C` with rows on the
    /// simplex.
    ///
    /// Bernoulli (`mu`, `var` `N × 1`): columns `(1 − p, p)` with `p = P(y = 1)` (probit in
    /// closed form, logit by Gauss–Hermite). Robust-max (`N × K`):
    /// `P_c (1 − ε) + (1 − P_c) ε/(K − 1)` with `P_c = P(f_c largest)` by Gauss–Hermite,
    /// renormalised. Softmax (`N × K`): `(1/S) Σ_s softmax(μ_n + √v_n ⊙ ε_s)` over the
    /// shared predictive draws (`predict_points` antithetic evaluations from
    /// `seeded(predict_seed)`), deterministic.
    ///
    /// # Errors
    /// [`Error::Config`] for the Gaussian likelihood; [`Error::Shape`] for `mu`, `var` of
    /// different shapes or not `N × 1` / `N × K`; [`Error::NonFinite`].
    pub fn class_probs(&self, mu: MatRef<'_, f64>, var: MatRef<'_, f64>) -> Result<Mat<f64>> {
        self.validate()?;
        let k = self.num_classes().ok_or_else(|| {
            Error::Unsupported("the Gaussian likelihood has no class probabilities".into())
        })?;
        let cols = if self.is_multiclass() { k } else { 1 };
        for (what, m) in [("means", mu), ("variances", var)] {
            if m.ncols() != cols || m.nrows() != mu.nrows() {
                return Err(Error::shape(
                    format!("class_probs (latent {what})"),
                    format!("{}×{cols}", mu.nrows()),
                    format!("{}×{}", m.nrows(), m.ncols()),
                ));
            }
            check_finite(&format!("class_probs (latent {what})"), m)?;
        }
        let n = mu.nrows();
        let row = |m: MatRef<'_, f64>, i: usize| (0..k).map(|j| m[(i, j)]).collect::<Vec<_>>();
        Ok(match self {
            Likelihood::Gaussian(_) => unreachable!("no class count"),
            Likelihood::BernoulliProbit(_) | Likelihood::BernoulliLogit(_) => {
                let p = self.positive_probs(mu, var)?;
                Mat::from_fn(
                    n,
                    2,
                    |i, c| if c == 1 { p[(i, 0)] } else { 1.0 - p[(i, 0)] },
                )
            }
            Likelihood::RobustMax(r) => {
                let rule = probit::cached_rule(r.gh_points)?;
                rows_in_parallel(n, k, |i| {
                    multiclass::robust_max_probs(&row(mu, i), &row(var, i), r.epsilon, &rule)
                })
            }
            Likelihood::Softmax(s) => {
                let draws = s.predict_draws();
                rows_in_parallel(n, k, |i| {
                    multiclass::softmax_probs(&row(mu, i), &row(var, i), draws.as_ref(), true)
                })
            }
        })
    }

    /// Class probabilities of a mixture predictive: `Σ_s w_s p_s(y_n = c)` with
    /// `p_s` = [`Likelihood::class_probs`] of component s. `means[k]`, `vars[k]` are the
    /// `N × S` component moments of latent function k (one entry for Bernoulli, K for
    /// multiclass), the layout of [`crate::predictive::Predictive`].
    ///
    /// # Errors
    /// As [`Likelihood::class_probs`]; [`Error::Shape`] when the weights do not match.
    pub fn class_probs_mixture(
        &self,
        weights: &[f64],
        means: &[Mat<f64>],
        vars: &[Mat<f64>],
    ) -> Result<Mat<f64>> {
        let latent = means.len();
        if latent == 0 || vars.len() != latent {
            return Err(Error::shape(
                "class_probs_mixture (latent functions)",
                format!("{latent} mean and variance matrices"),
                format!("{} and {}", latent, vars.len()),
            ));
        }
        let (n, s) = (means[0].nrows(), means[0].ncols());
        if s != weights.len()
            || means
                .iter()
                .chain(vars)
                .any(|m| m.nrows() != n || m.ncols() != s)
        {
            return Err(Error::shape(
                "class_probs_mixture (component moments)",
                format!("{n}×{} per latent function", weights.len()),
                format!("{n}×{s}"),
            ));
        }
        let mut total: Option<Mat<f64>> = None;
        for (c, &w) in weights.iter().enumerate() {
            let mu = Mat::from_fn(n, latent, |i, k| means[k][(i, c)]);
            let var = Mat::from_fn(n, latent, |i, k| vars[k][(i, c)]);
            let p = self.class_probs(mu.as_ref(), var.as_ref())?;
            match total.as_mut() {
                None => total = Some(Mat::from_fn(p.nrows(), p.ncols(), |i, j| w * p[(i, j)])),
                Some(t) => {
                    for j in 0..p.ncols() {
                        for i in 0..p.nrows() {
                            t[(i, j)] += w * p[(i, j)];
                        }
                    }
                }
            }
        }
        let mut t = total.expect("at least one component");
        // Renormalise each row (weights sum to 1 only within rounding).
        for i in 0..t.nrows() {
            let sum: f64 = (0..t.ncols()).map(|j| t[(i, j)]).sum();
            for j in 0..t.ncols() {
                t[(i, j)] = (t[(i, j)] / sum).clamp(0.0, 1.0);
            }
        }
        Ok(t)
    }
}

/// The `n × k` matrix whose row i is `row_fn(i)`, rows computed in parallel (each row on
/// its own, so the result does not depend on the number of threads).
fn rows_in_parallel(n: usize, k: usize, row_fn: impl Fn(usize) -> Vec<f64> + Sync) -> Mat<f64> {
    use rayon::prelude::*;
    let rows: Vec<Vec<f64>> = (0..n).into_par_iter().map(&row_fn).collect();
    Mat::from_fn(n, k, |i, c| rows[i][c])
}

#[inline]
fn col_noise(noise_var: &[f64], j: usize) -> f64 {
    if noise_var.len() == 1 {
        noise_var[0]
    } else {
        noise_var[j]
    }
}

/// The target shape for latent moments of shape `s`: `s` itself, or `R × 1` labels for a
/// multiclass likelihood (whose moments must then be `R × K`).
fn multiclass_target_shape(lik: &Likelihood, s: (usize, usize)) -> Result<(usize, usize)> {
    match lik.num_classes().filter(|_| lik.is_multiclass()) {
        Some(k) if s.1 != k => Err(Error::shape(
            "multiclass likelihood latent means",
            format!("{}×{k} (one column per class)", s.0),
            format!("{}×{}", s.0, s.1),
        )),
        Some(_) => Ok((s.0, 1)),
        None => Ok(s),
    }
}

fn check_value_shapes(
    lik: &Likelihood,
    y: MatRef<'_, f64>,
    mu: MatRef<'_, f64>,
    var: MatRef<'_, f64>,
    noise_var: &[f64],
) -> Result<()> {
    let s = (mu.nrows(), mu.ncols());
    let fmt = |(r, c): (usize, usize)| format!("{r}×{c}");
    let want_y = multiclass_target_shape(lik, s)?;
    if (y.nrows(), y.ncols()) != want_y {
        return Err(Error::shape(
            "likelihood targets",
            fmt(want_y),
            fmt((y.nrows(), y.ncols())),
        ));
    }
    if lik.is_multiclass() {
        lik.check_targets(y)?;
    }
    if (var.nrows(), var.ncols()) != s {
        return Err(Error::shape(
            "likelihood variances",
            fmt(s),
            fmt((var.nrows(), var.ncols())),
        ));
    }
    if lik.has_noise_variance() && !(noise_var.len() == 1 || noise_var.len() == s.1) {
        return Err(Error::shape(
            "likelihood noise variances",
            format!("1 or {} values", s.1),
            noise_var.len(),
        ));
    }
    Ok(())
}

fn check_tape_shapes(
    t: &Tape,
    lik: &Likelihood,
    y: Var,
    mu: Var,
    var: Var,
    noise_var: Option<Var>,
) -> Result<()> {
    let s = t.shape(mu);
    let fmt = |(r, c): (usize, usize)| format!("{r}×{c}");
    let want_y = multiclass_target_shape(lik, s)?;
    if t.shape(y) != want_y {
        return Err(Error::shape(
            "likelihood targets",
            fmt(want_y),
            fmt(t.shape(y)),
        ));
    }
    if t.shape(var) != s {
        return Err(Error::shape(
            "likelihood variances",
            fmt(s),
            fmt(t.shape(var)),
        ));
    }
    match (lik.has_noise_variance(), noise_var) {
        (true, None) => Err(Error::config(
            "noise",
            "the Gaussian likelihood needs a noise variance node",
        )),
        (false, Some(_)) => Err(Error::config(
            "noise",
            "only the Gaussian likelihood has a noise variance; pass None",
        )),
        (true, Some(n)) => {
            let ns = t.shape(n);
            if ns == (1, 1) || ns == (1, s.1) {
                Ok(())
            } else {
                Err(Error::shape(
                    "likelihood noise variance",
                    format!("1×1 or 1×{}", s.1),
                    fmt(ns),
                ))
            }
        }
        (false, None) => Ok(()),
    }
}

/// Plain-value (scalar) versions of the likelihood formulas, for building predictive
/// distributions and for tests.
pub mod scalar {
    use super::{gaussian, logit, multiclass, probit};
    use dgp_core::Result;
    use dgp_core::special::norm_cdf;

    /// `log N(y | mean, var)` (the same function as [`dgp_core::special::gaussian_log_density`]).
    pub fn gaussian_log_density(y: f64, mean: f64, var: f64) -> f64 {
        dgp_core::special::gaussian_log_density(y, mean, var)
    }

    /// `E_{N(f|μ,v)} log N(y | f, σ²) = −½ log(2πσ²) − ((y − μ)² + v)/(2σ²)`.
    pub fn gaussian_expected_log_lik(y: f64, mu: f64, var: f64, noise_var: f64) -> f64 {
        gaussian::expected_log_lik_value(y, mu, var, noise_var)
    }

    /// Predictive variance of `y` under the Gaussian likelihood: `v + σ²`.
    pub fn gaussian_predictive_var(var: f64, noise_var: f64) -> f64 {
        var + noise_var
    }

    /// `log N(y | μ, v + σ²)`.
    pub fn gaussian_log_predictive(y: f64, mu: f64, var: f64, noise_var: f64) -> f64 {
        gaussian::log_predictive_value(y, mu, var, noise_var)
    }

    /// Squashed probit link `p(y = 1 | f) = (1 − 2ε)Φ(f) + ε`.
    pub fn probit_link(f: f64, squash: f64) -> f64 {
        (1.0 - 2.0 * squash) * norm_cdf(f) + squash
    }

    /// `log p(y | f)` of the squashed probit likelihood (labels: 1 positive, 0/−1
    /// negative), stable for very negative `s·f` when ε = 0.
    pub fn probit_log_lik(y: f64, f: f64, squash: f64) -> f64 {
        probit::log_link_and_ratio(probit::label_sign(y) * f, squash).0
    }

    /// Predictive probability `P(y = 1) = ∫ p(y = 1 | f) N(f | μ, v) df
    /// = (1 − 2ε)Φ(μ/√(1 + v)) + ε` (`v < 0` treated as 0).
    pub fn probit_prob(mu: f64, var: f64, squash: f64) -> f64 {
        probit_link(mu / (1.0 + var.max(0.0)).sqrt(), squash)
    }

    /// `log p(y | μ, v)` of the closed-form probit predictive.
    pub fn probit_log_predictive(y: f64, mu: f64, var: f64, squash: f64) -> f64 {
        probit::log_predictive_parts(y, mu, var, squash).0
    }

    /// `E_{N(f|μ,v)} log p(y | f)` of the squashed probit likelihood by `gh_points`-node
    /// Gauss–Hermite quadrature (the value of [`crate::tape::Tape::probit_expected_log_lik`]).
    pub fn probit_expected_log_lik(
        y: f64,
        mu: f64,
        var: f64,
        squash: f64,
        gh_points: usize,
    ) -> Result<f64> {
        let rule = probit::cached_rule(gh_points)?;
        Ok(probit::expected_log_lik_parts(y, mu, var, squash, &rule).0)
    }

    /// The logistic function `σ(f) = 1/(1 + e^{−f})` (the logit link), without overflow.
    pub fn sigmoid(f: f64) -> f64 {
        logit::sigmoid(f)
    }

    /// `log p(y | f) = log σ(s f)` of the Bernoulli-logit likelihood (labels: 1 positive,
    /// 0/−1 negative), stable for large |f|.
    pub fn logit_log_lik(y: f64, f: f64) -> f64 {
        logit::log_sigmoid(probit::label_sign(y) * f)
    }

    /// `E_{N(f|μ,v)} log σ(s f)` by `gh_points`-node Gauss–Hermite quadrature (the value
    /// of [`crate::tape::Tape::logit_expected_log_lik`]).
    pub fn logit_expected_log_lik(y: f64, mu: f64, var: f64, gh_points: usize) -> Result<f64> {
        let rule = probit::cached_rule(gh_points)?;
        Ok(logit::expected_log_lik_parts(y, mu, var, &rule).0)
    }

    /// Predictive `P(y = 1) = E_{N(f|μ,v)} σ(f)` by `gh_points`-node Gauss–Hermite.
    pub fn logit_prob(mu: f64, var: f64, gh_points: usize) -> Result<f64> {
        let rule = probit::cached_rule(gh_points)?;
        Ok(logit::predictive_parts(1.0, mu, var, &rule).0)
    }

    /// `P(f_label > f_j ∀ j ≠ label)` for independent `f_k ∼ N(mu[k], var[k])`, by
    /// `gh_points`-node Gauss–Hermite quadrature over `f_label` (robust-max's `P_y`).
    ///
    /// # Errors
    /// [`dgp_core::Error::Shape`] when `mu` and `var` differ in length or `label` is not an
    /// index into them; `gh_points == 0`.
    pub fn prob_is_largest(label: usize, mu: &[f64], var: &[f64], gh_points: usize) -> Result<f64> {
        if mu.len() != var.len() || label >= mu.len() {
            return Err(dgp_core::Error::shape(
                "prob_is_largest",
                format!("{} variances and a label below {}", mu.len(), mu.len()),
                format!("{} variances, label {label}", var.len()),
            ));
        }
        let rule = probit::cached_rule(gh_points)?;
        Ok(multiclass::prob_is_largest(label, mu, var, &rule))
    }

    /// Robust-max `E log p(y | f) = P_y log(1 − ε) + (1 − P_y) log(ε/(K − 1))` with
    /// [`prob_is_largest`] (the value of
    /// [`crate::tape::Tape::robust_max_expected_log_lik`]).
    ///
    /// # Errors
    /// As [`prob_is_largest`].
    pub fn robust_max_expected_log_lik(
        label: usize,
        mu: &[f64],
        var: &[f64],
        epsilon: f64,
        gh_points: usize,
    ) -> Result<f64> {
        let p = prob_is_largest(label, mu, var, gh_points)?;
        let (on, off) = multiclass::robust_max_logs(epsilon, mu.len());
        Ok(p * on + (1.0 - p) * off)
    }
}
