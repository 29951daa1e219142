//! The predictive distribution every backend returns.
//!
//! Per test point n a finite Gaussian mixture over the P outputs with component weights
//! shared by all points:
//!
//! p(y_n) = Σ_s w_s Π_p N(y_np | μ_nsp, v_nsp),
//!
//! i.e. within a component the outputs are independent. This covers the sample-based
//! predictives of DSVI / Structured / SGHMC (S samples, w_s = 1/S), the learned quadrature
//! mixtures of DSPP (learned ω_s) and single Gaussians (S = 1). Variances include the
//! observation noise. For classification, the class probabilities p(y_n = c) are attached
//! as `class_probs` (N×C; binary problems use C = 2 columns p(y=0), p(y=1)).
//!
//! Serialisation goes through [`dgp_core::serde_mat::MatData`] and re-validates on load.

use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

use dgp_core::serde_mat::MatData;
use dgp_core::special::{gaussian_log_density, log_sum_exp};
use dgp_core::{Error, Result};

/// Tolerance on |Σ w − 1| (weights) and |Σ_c p_c − 1| (class probabilities).
pub const SIMPLEX_TOL: f64 = 1e-8;

/// Per-point Gaussian mixtures with shared weights (see the module docs).
///
/// Invariants (checked by every constructor): S ≥ 1 weights, non-negative, summing to 1
/// within [`SIMPLEX_TOL`] (then renormalised, unless the sum is already 1 to rounding
/// accuracy, so construction is idempotent); P ≥ 1 outputs;
/// every mean and variance matrix is N×S with N ≥ 1; means finite; variances finite and
/// > 0; optional class probabilities N×C with C ≥ 2, entries in [0, 1], rows summing to 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PredictiveData", into = "PredictiveData")]
pub struct Predictive {
    weights: Vec<f64>,
    means: Vec<Mat<f64>>,
    variances: Vec<Mat<f64>>,
    class_probs: Option<Mat<f64>>,
}

/// Serialised form of a [`Predictive`].
#[derive(Clone, Debug, Serialize, Deserialize)]
struct PredictiveData {
    weights: Vec<f64>,
    means: Vec<MatData>,
    variances: Vec<MatData>,
    class_probs: Option<MatData>,
}

impl From<Predictive> for PredictiveData {
    fn from(p: Predictive) -> Self {
        Self {
            weights: p.weights,
            means: p.means.iter().map(MatData::from).collect(),
            variances: p.variances.iter().map(MatData::from).collect(),
            class_probs: p.class_probs.as_ref().map(MatData::from),
        }
    }
}

impl TryFrom<PredictiveData> for Predictive {
    type Error = Error;
    fn try_from(d: PredictiveData) -> Result<Self> {
        let means = d
            .means
            .into_iter()
            .map(MatData::into_mat)
            .collect::<Result<Vec<_>>>()?;
        let variances = d
            .variances
            .into_iter()
            .map(MatData::into_mat)
            .collect::<Result<Vec<_>>>()?;
        let p = Predictive::new(d.weights, means, variances)?;
        match d.class_probs {
            Some(c) => p.with_class_probs(c.into_mat()?),
            None => Ok(p),
        }
    }
}

fn numerical(msg: String) -> Error {
    Error::Numerical(msg)
}

impl Predictive {
    /// Validates and builds a mixture predictive.
    ///
    /// `weights`: S mixture weights; `means[p]`, `variances[p]`: N×S matrices for output p
    /// (entry (n, s) = μ_nsp, v_nsp).
    ///
    /// # Errors
    /// [`Error::Empty`] for S = 0, P = 0 or N = 0; [`Error::Shape`] when the matrices are not
    /// all N×S; [`Error::NonFinite`] for NaN/∞ in weights, means or variances;
    /// [`Error::Numerical`] for a negative weight, weights not summing to 1 (within
    /// [`SIMPLEX_TOL`]) or a variance ≤ 0.
    pub fn new(
        mut weights: Vec<f64>,
        means: Vec<Mat<f64>>,
        variances: Vec<Mat<f64>>,
    ) -> Result<Self> {
        let s = weights.len();
        if s == 0 {
            return Err(Error::Empty("predictive with no mixture components".into()));
        }
        if let Some(i) = weights.iter().position(|w| !w.is_finite()) {
            return Err(Error::NonFinite {
                context: "predictive weights".into(),
                row: i,
                col: 0,
            });
        }
        if let Some(i) = weights.iter().position(|&w| w < 0.0) {
            return Err(numerical(format!(
                "predictive weight {i} is negative ({})",
                weights[i]
            )));
        }
        let total: f64 = weights.iter().sum();
        if (total - 1.0).abs() > SIMPLEX_TOL {
            return Err(numerical(format!(
                "predictive weights sum to {total}, not 1"
            )));
        }
        // Renormalise unless the sum is already 1 to rounding accuracy (keeps construction
        // idempotent, so a serialisation round trip reproduces the weights bit for bit).
        if (total - 1.0).abs() > s as f64 * f64::EPSILON {
            weights.iter_mut().for_each(|w| *w /= total);
        }
        if means.is_empty() {
            return Err(Error::Empty("predictive with no outputs".into()));
        }
        if variances.len() != means.len() {
            return Err(Error::shape(
                "Predictive::new (number of output dimensions)",
                format!("{} variance matrices", means.len()),
                variances.len(),
            ));
        }
        let n = means[0].nrows();
        if n == 0 {
            return Err(Error::Empty("predictive for zero points".into()));
        }
        for (p, (m, v)) in means.iter().zip(&variances).enumerate() {
            for (what, mat) in [("means", m), ("variances", v)] {
                if mat.nrows() != n || mat.ncols() != s {
                    return Err(Error::shape(
                        format!("Predictive::new ({what} of output {p})"),
                        format!("{n}×{s}"),
                        format!("{}×{}", mat.nrows(), mat.ncols()),
                    ));
                }
                dgp_core::check_finite(&format!("predictive {what} of output {p}"), mat.as_ref())?;
            }
            for sidx in 0..s {
                for i in 0..n {
                    let vv = v[(i, sidx)];
                    if vv <= 0.0 {
                        return Err(numerical(format!(
                            "predictive variance ≤ 0 ({vv}) at point {i}, component {sidx}, output {p}"
                        )));
                    }
                }
            }
        }
        Ok(Self {
            weights,
            means,
            variances,
            class_probs: None,
        })
    }

    /// A mixture with equal weights 1/S (sample-based predictives: DSVI, Structured, SGHMC).
    ///
    /// # Errors
    /// As [`Predictive::new`].
    pub fn equal_weights(means: Vec<Mat<f64>>, variances: Vec<Mat<f64>>) -> Result<Self> {
        let s = means.first().map_or(0, |m| m.ncols());
        Self::new(vec![1.0 / s.max(1) as f64; s], means, variances)
    }

    /// One Gaussian per point: `mean` and `var` are N×P (S = 1).
    ///
    /// # Errors
    /// [`Error::Shape`] if the shapes differ; otherwise as [`Predictive::new`].
    pub fn single_gaussian(mean: Mat<f64>, var: Mat<f64>) -> Result<Self> {
        if (mean.nrows(), mean.ncols()) != (var.nrows(), var.ncols()) {
            return Err(Error::shape(
                "Predictive::single_gaussian (var vs mean)",
                format!("{}×{}", mean.nrows(), mean.ncols()),
                format!("{}×{}", var.nrows(), var.ncols()),
            ));
        }
        let n = mean.nrows();
        let col = |m: &Mat<f64>, p: usize| Mat::from_fn(n, 1, |i, _| m[(i, p)]);
        let means = (0..mean.ncols()).map(|p| col(&mean, p)).collect();
        let vars = (0..var.ncols()).map(|p| col(&var, p)).collect();
        Self::new(vec![1.0], means, vars)
    }

    /// Attaches the binary class probabilities of a mixture of Bernoulli-probit
    /// predictives: `P(y = 1 | x_i) = Σ_s w_s · p_probit(μ_is, v_is)` with
    /// [`crate::likelihoods::scalar::probit_prob`] and link squashing `squash` (the means
    /// and variances are those of the latent function, first output), clamped to [0, 1]
    /// against rounding. The one home of this rule for every backend.
    ///
    /// # Errors
    /// As [`Predictive::with_class_probs`].
    pub fn with_probit_class_probs(self, squash: f64) -> Result<Self> {
        let n = self.n_points();
        let (means, vars) = (&self.means()[0], &self.variances()[0]);
        let w = self.weights();
        let probs = Mat::from_fn(n, 2, |i, c| {
            let p1: f64 = w
                .iter()
                .enumerate()
                .map(|(s, ws)| {
                    ws * crate::likelihoods::scalar::probit_prob(
                        means[(i, s)],
                        vars[(i, s)],
                        squash,
                    )
                })
                .sum();
            let p1 = p1.clamp(0.0, 1.0);
            if c == 1 { p1 } else { 1.0 - p1 }
        });
        self.with_class_probs(probs)
    }

    /// Attaches class probabilities (N×C, C ≥ 2) for classification.
    ///
    /// # Errors
    /// [`Error::Shape`] if the row count is not N or C < 2; [`Error::NonFinite`];
    /// [`Error::Numerical`] for an entry outside [0, 1] or a row not summing to 1 within
    /// [`SIMPLEX_TOL`].
    pub fn with_class_probs(mut self, probs: Mat<f64>) -> Result<Self> {
        if probs.nrows() != self.n_points() || probs.ncols() < 2 {
            return Err(Error::shape(
                "Predictive::with_class_probs",
                format!("{}×C with C ≥ 2", self.n_points()),
                format!("{}×{}", probs.nrows(), probs.ncols()),
            ));
        }
        dgp_core::check_finite("predictive class probabilities", probs.as_ref())?;
        for i in 0..probs.nrows() {
            let mut sum = 0.0;
            for c in 0..probs.ncols() {
                let v = probs[(i, c)];
                if !(0.0..=1.0).contains(&v) {
                    return Err(numerical(format!(
                        "class probability {v} outside [0, 1] at point {i}, class {c}"
                    )));
                }
                sum += v;
            }
            if (sum - 1.0).abs() > SIMPLEX_TOL {
                return Err(numerical(format!(
                    "class probabilities of point {i} sum to {sum}, not 1"
                )));
            }
        }
        self.class_probs = Some(probs);
        Ok(self)
    }

    /// Number of test points N.
    pub fn n_points(&self) -> usize {
        self.means[0].nrows()
    }

    /// Number of outputs P.
    pub fn n_outputs(&self) -> usize {
        self.means.len()
    }

    /// Number of mixture components S.
    pub fn n_components(&self) -> usize {
        self.weights.len()
    }

    /// Mixture weights (S, on the simplex).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Component means, one N×S matrix per output.
    pub fn means(&self) -> &[Mat<f64>] {
        &self.means
    }

    /// Component variances (noise included), one N×S matrix per output.
    pub fn variances(&self) -> &[Mat<f64>] {
        &self.variances
    }

    /// Class probabilities (N×C), if this is a classification predictive.
    pub fn class_probs(&self) -> Option<MatRef<'_, f64>> {
        self.class_probs.as_ref().map(|m| m.as_ref())
    }

    /// Mixture mean Σ_s w_s μ_nsp, N×P.
    pub fn mean(&self) -> Mat<f64> {
        let (n, pdim) = (self.n_points(), self.n_outputs());
        let mut out = Mat::zeros(n, pdim);
        for p in 0..pdim {
            let m = &self.means[p];
            for (s, &w) in self.weights.iter().enumerate() {
                for i in 0..n {
                    out[(i, p)] += w * m[(i, s)];
                }
            }
        }
        out
    }

    /// Mixture variance by the law of total variance, Σ_s w_s (v_nsp + (μ_nsp − m_np)²)
    /// with m the mixture mean; N×P.
    pub fn variance(&self) -> Mat<f64> {
        let mean = self.mean();
        let (n, pdim) = (self.n_points(), self.n_outputs());
        let mut out = Mat::zeros(n, pdim);
        for p in 0..pdim {
            let (m, v) = (&self.means[p], &self.variances[p]);
            for (s, &w) in self.weights.iter().enumerate() {
                for i in 0..n {
                    let d = m[(i, s)] - mean[(i, p)];
                    out[(i, p)] += w * (v[(i, s)] + d * d);
                }
            }
        }
        out
    }

    /// The marginal mixture of point `n`, output `p`, copied into `(means, variances)`
    /// buffers of length S (weights are [`Predictive::weights`]).
    pub(crate) fn marginal_into(&self, n: usize, p: usize, mu: &mut [f64], var: &mut [f64]) {
        let (m, v) = (&self.means[p], &self.variances[p]);
        for s in 0..self.weights.len() {
            mu[s] = m[(n, s)];
            var[s] = v[(n, s)];
        }
    }

    /// Checks that `y` is N×P.
    pub(crate) fn check_targets(&self, y: MatRef<'_, f64>, context: &str) -> Result<()> {
        if (y.nrows(), y.ncols()) != (self.n_points(), self.n_outputs()) {
            return Err(Error::shape(
                context,
                format!("{}×{}", self.n_points(), self.n_outputs()),
                format!("{}×{}", y.nrows(), y.ncols()),
            ));
        }
        dgp_core::check_finite(context, y)
    }

    /// Per-point log predictive density
    /// log p(y_n) = logsumexp_s(log w_s + Σ_p log N(y_np | μ_nsp, v_nsp)),
    /// evaluated with log-sum-exp so it stays finite for targets far in the tails.
    /// Components with weight 0 contribute nothing. This is the test log-likelihood "tll"
    /// of protocol §3 (the log of the mixture average, never an average of logs).
    ///
    /// # Errors
    /// [`Error::Shape`] if `y` is not N×P; [`Error::NonFinite`] for NaN/∞ targets.
    pub fn log_density(&self, y: MatRef<'_, f64>) -> Result<Vec<f64>> {
        self.check_targets(y, "Predictive::log_density (targets)")?;
        let (n, s_count) = (self.n_points(), self.n_components());
        let log_w: Vec<f64> = self.weights.iter().map(|w| w.ln()).collect();
        let mut terms = vec![0.0; s_count];
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            for s in 0..s_count {
                let mut t = log_w[s];
                if t > f64::NEG_INFINITY {
                    for p in 0..self.means.len() {
                        let v = self.variances[p][(i, s)];
                        t += gaussian_log_density(y[(i, p)], self.means[p][(i, s)], v);
                    }
                }
                terms[s] = t;
            }
            out.push(log_sum_exp(&terms));
        }
        Ok(out)
    }

    /// Maps a predictive in standardised units to original units, y = m + s·y_std per
    /// output: means μ·s + m, variances v·s². Densities then pick up −Σ_p log s_p per point
    /// automatically (protocol §2); class probabilities are unchanged.
    ///
    /// # Errors
    /// [`Error::Shape`] if the slices do not have P entries; [`Error::Config`] for a
    /// non-finite mean or a scale that is not finite and > 0.
    pub fn unstandardize(&self, y_mean: &[f64], y_std: &[f64]) -> Result<Predictive> {
        let pdim = self.n_outputs();
        if y_mean.len() != pdim || y_std.len() != pdim {
            return Err(Error::shape(
                "Predictive::unstandardize (per-output mean and std)",
                pdim,
                format!("{} and {}", y_mean.len(), y_std.len()),
            ));
        }
        for p in 0..pdim {
            if !(y_mean[p].is_finite() && y_std[p].is_finite() && y_std[p] > 0.0) {
                return Err(Error::config(
                    "standardizer",
                    format!("output {p} has mean {} and std {}", y_mean[p], y_std[p]),
                ));
            }
        }
        let means = self
            .means
            .iter()
            .enumerate()
            .map(|(p, m)| {
                Mat::from_fn(m.nrows(), m.ncols(), |i, j| {
                    m[(i, j)] * y_std[p] + y_mean[p]
                })
            })
            .collect();
        let variances = self
            .variances
            .iter()
            .enumerate()
            .map(|(p, v)| {
                let s2 = y_std[p] * y_std[p];
                Mat::from_fn(v.nrows(), v.ncols(), |i, j| v[(i, j)] * s2)
            })
            .collect();
        Ok(Predictive {
            weights: self.weights.clone(),
            means,
            variances,
            class_probs: self.class_probs.clone(),
        })
    }

    /// Stacks the points of several predictives (e.g. test points predicted in chunks).
    /// All parts must have the same outputs, the same weights (within 1e-12) and the same
    /// classification layout.
    ///
    /// # Errors
    /// [`Error::Empty`] for no parts; [`Error::Shape`] for parts that do not match.
    pub fn concat(parts: &[Predictive]) -> Result<Predictive> {
        let first = parts
            .first()
            .ok_or_else(|| Error::Empty("Predictive::concat of no parts".into()))?;
        let (pdim, s) = (first.n_outputs(), first.n_components());
        let classes = first.class_probs.as_ref().map(|c| c.ncols());
        for (k, part) in parts.iter().enumerate() {
            let same_w = part.n_components() == s
                && part
                    .weights
                    .iter()
                    .zip(&first.weights)
                    .all(|(a, b)| (a - b).abs() <= 1e-12);
            if part.n_outputs() != pdim
                || !same_w
                || part.class_probs.as_ref().map(|c| c.ncols()) != classes
            {
                return Err(Error::shape(
                    format!("Predictive::concat (part {k})"),
                    format!("P = {pdim}, the weights of part 0, classes {classes:?}"),
                    format!(
                        "P = {}, S = {}, classes {:?}",
                        part.n_outputs(),
                        part.n_components(),
                        part.class_probs.as_ref().map(|c| c.ncols())
                    ),
                ));
            }
        }
        let n: usize = parts.iter().map(|p| p.n_points()).sum();
        let stack = |get: &dyn Fn(&Predictive) -> &Mat<f64>| {
            let cols = get(first).ncols();
            let mut out = Mat::zeros(n, cols);
            let mut r0 = 0;
            for part in parts {
                let m = get(part);
                out.as_mut()
                    .submatrix_mut(r0, 0, m.nrows(), cols)
                    .copy_from(m.as_ref());
                r0 += m.nrows();
            }
            out
        };
        let means = (0..pdim).map(|p| stack(&|q| &q.means[p])).collect();
        let variances = (0..pdim).map(|p| stack(&|q| &q.variances[p])).collect();
        let class_probs = classes.map(|_| stack(&|q| q.class_probs.as_ref().expect("checked")));
        Ok(Predictive {
            weights: first.weights.clone(),
            means,
            variances,
            class_probs,
        })
    }
}
