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
//! The normal cdf/log-cdf used here are the full-precision ones of [`crate::special`]
//! (Cody 1969).

mod gaussian;
mod probit;

use crate::error::{Error, Result, check_finite};
use crate::tape::{Tape, Var};
use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

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

/// The likelihood of a model, as a serialisable configuration.
///
/// JSON form: `{"kind": "gaussian", "init_variance": 0.1}` or
/// `{"kind": "bernoulli_probit", "squash": 0.001, "gh_points": 20}` (fields optional).
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

    /// Checks the configuration ranges.
    pub fn validate(&self) -> Result<()> {
        match self {
            Likelihood::Gaussian(g) => {
                if !(g.init_variance > 0.0 && g.init_variance.is_finite()) {
                    return Err(Error::Config(format!(
                        "Gaussian likelihood: init_variance must be positive and finite, got {}",
                        g.init_variance
                    )));
                }
            }
            Likelihood::BernoulliProbit(p) => {
                if !(0.0..0.5).contains(&p.squash) {
                    return Err(Error::Config(format!(
                        "probit likelihood: squash must be in [0, 0.5), got {}",
                        p.squash
                    )));
                }
                if p.gh_points == 0 {
                    return Err(Error::Config(
                        "probit likelihood: gh_points must be at least 1".into(),
                    ));
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
            Likelihood::BernoulliProbit(_) => None,
        }
    }

    /// Validates targets: finite for the Gaussian; labels in {1, 0, −1} for the probit.
    pub fn check_targets(&self, y: MatRef<'_, f64>) -> Result<()> {
        check_finite("targets", y)?;
        if let Likelihood::BernoulliProbit(_) = self {
            for j in 0..y.ncols() {
                for i in 0..y.nrows() {
                    let v = y[(i, j)];
                    if v != 1.0 && v != 0.0 && v != -1.0 {
                        return Err(Error::Config(format!(
                            "binary label at row {i}, column {j} is {v}; expected 1 (positive) or 0/−1 (negative)"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Per-entry `E_{N(f|μ,v)} log p(y | f)` on the tape (`R × C`); see
    /// [`Tape::gaussian_expected_log_lik`] and [`Tape::probit_expected_log_lik`].
    ///
    /// `noise_var` (σ², `1 × 1` or `1 × C`) is required by the Gaussian likelihood and
    /// must be `None` for the probit likelihood. Shapes and configuration are checked and
    /// reported as errors.
    pub fn expected_log_lik(
        &self,
        tape: &mut Tape,
        y: Var,
        mu: Var,
        var: Var,
        noise_var: Option<Var>,
    ) -> Result<Var> {
        self.validate()?;
        check_tape_shapes(tape, self, y, mu, var, noise_var)?;
        Ok(match self {
            Likelihood::Gaussian(_) => {
                let s2 = noise_var.expect("checked by check_tape_shapes");
                tape.gaussian_expected_log_lik(y, mu, var, s2)
            }
            Likelihood::BernoulliProbit(p) => {
                let rule = probit::cached_rule(p.gh_points)?;
                tape.probit_expected_log_lik(y, mu, var, p.squash, &rule)
            }
        })
    }

    /// Per-entry log predictive density `log ∫ p(y | f) N(f | μ, v) df` on the tape
    /// (`R × C`); see [`Tape::gaussian_log_predictive`] and [`Tape::probit_log_predictive`].
    /// Arguments as [`Likelihood::expected_log_lik`].
    pub fn log_predictive(
        &self,
        tape: &mut Tape,
        y: Var,
        mu: Var,
        var: Var,
        noise_var: Option<Var>,
    ) -> Result<Var> {
        self.validate()?;
        check_tape_shapes(tape, self, y, mu, var, noise_var)?;
        Ok(match self {
            Likelihood::Gaussian(_) => {
                let s2 = noise_var.expect("checked by check_tape_shapes");
                tape.gaussian_log_predictive(y, mu, var, s2)
            }
            Likelihood::BernoulliProbit(p) => tape.probit_log_predictive(y, mu, var, p.squash),
        })
    }

    /// Per-entry expected log-likelihood on plain values (no tape). `noise_var` holds σ²
    /// (one value, or one per column) for the Gaussian and is ignored by the probit.
    pub fn expected_log_lik_values(
        &self,
        y: MatRef<'_, f64>,
        mu: MatRef<'_, f64>,
        var: MatRef<'_, f64>,
        noise_var: &[f64],
    ) -> Result<Mat<f64>> {
        self.validate()?;
        check_value_shapes(self, y, mu, var, noise_var)?;
        Ok(match self {
            Likelihood::Gaussian(_) => Mat::from_fn(mu.nrows(), mu.ncols(), |i, j| {
                scalar::gaussian_expected_log_lik(
                    y[(i, j)],
                    mu[(i, j)],
                    var[(i, j)],
                    col_noise(noise_var, j),
                )
            }),
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
        })
    }

    /// Per-entry log predictive density on plain values (no tape); arguments as
    /// [`Likelihood::expected_log_lik_values`].
    pub fn log_predictive_values(
        &self,
        y: MatRef<'_, f64>,
        mu: MatRef<'_, f64>,
        var: MatRef<'_, f64>,
        noise_var: &[f64],
    ) -> Result<Mat<f64>> {
        self.validate()?;
        check_value_shapes(self, y, mu, var, noise_var)?;
        Ok(match self {
            Likelihood::Gaussian(_) => Mat::from_fn(mu.nrows(), mu.ncols(), |i, j| {
                scalar::gaussian_log_density(
                    y[(i, j)],
                    mu[(i, j)],
                    var[(i, j)] + col_noise(noise_var, j),
                )
            }),
            Likelihood::BernoulliProbit(p) => Mat::from_fn(mu.nrows(), mu.ncols(), |i, j| {
                scalar::probit_log_predictive(y[(i, j)], mu[(i, j)], var[(i, j)], p.squash)
            }),
        })
    }

    /// Per-entry predictive mean and variance of `y` given `f ∼ N(μ, v)`:
    /// Gaussian `(μ, v + σ²)` — the component of a Gaussian-mixture `Predictive`;
    /// probit `(p, p(1 − p))` with `p = P(y = 1) = (1 − 2ε)Φ(μ/√(1 + v)) + ε`.
    pub fn predictive_moments(
        &self,
        mu: MatRef<'_, f64>,
        var: MatRef<'_, f64>,
        noise_var: &[f64],
    ) -> Result<(Mat<f64>, Mat<f64>)> {
        self.validate()?;
        check_value_shapes(self, mu, mu, var, noise_var)?;
        let (r, c) = (mu.nrows(), mu.ncols());
        Ok(match self {
            Likelihood::Gaussian(_) => (
                mu.to_owned(),
                Mat::from_fn(r, c, |i, j| {
                    scalar::gaussian_predictive_var(var[(i, j)], col_noise(noise_var, j))
                }),
            ),
            Likelihood::BernoulliProbit(lp) => {
                let p = Mat::from_fn(r, c, |i, j| {
                    scalar::probit_prob(mu[(i, j)], var[(i, j)], lp.squash)
                });
                let v = Mat::from_fn(r, c, |i, j| p[(i, j)] * (1.0 - p[(i, j)]));
                (p, v)
            }
        })
    }
}

#[inline]
fn col_noise(noise_var: &[f64], j: usize) -> f64 {
    if noise_var.len() == 1 {
        noise_var[0]
    } else {
        noise_var[j]
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
    if (y.nrows(), y.ncols()) != s {
        return Err(Error::shape(
            "likelihood targets",
            fmt(s),
            fmt((y.nrows(), y.ncols())),
        ));
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
    if t.shape(y) != s {
        return Err(Error::shape("likelihood targets", fmt(s), fmt(t.shape(y))));
    }
    if t.shape(var) != s {
        return Err(Error::shape(
            "likelihood variances",
            fmt(s),
            fmt(t.shape(var)),
        ));
    }
    match (lik.has_noise_variance(), noise_var) {
        (true, None) => Err(Error::Config(
            "the Gaussian likelihood needs a noise variance node".into(),
        )),
        (false, Some(_)) => Err(Error::Config(
            "the probit likelihood has no noise variance; pass None".into(),
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
    use super::{gaussian, probit};
    use crate::error::Result;
    use crate::special::norm_cdf;

    /// `log N(y | mean, var)` (the same function as [`crate::special::gaussian_log_density`]).
    pub fn gaussian_log_density(y: f64, mean: f64, var: f64) -> f64 {
        crate::special::gaussian_log_density(y, mean, var)
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
}
