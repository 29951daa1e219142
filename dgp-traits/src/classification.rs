//! Classification: validated class labels, per-point class probabilities and the
//! classification metrics.
//!
//! Labels are the integers `0, 1, …, K − 1`, stored as floats in a one-column target
//! matrix (the layout of the data loaders) and as `usize` once validated
//! ([`class_labels`]). Predictions are [`ClassProbs`]: an `N × K` matrix whose rows lie on
//! the probability simplex — one model's per-point probabilities, or the weighted average
//! of several (Monte Carlo samples, mixture components) by [`ClassProbs::mixture`].
//!
//! Metrics (all means over the N points, labels `y_n`, probabilities `p_nc`):
//!
//! | metric | definition |
//! |---|---|
//! | [`error_rate`] | `(1/N) Σ_n 1[argmax_c p_nc ≠ y_n]` (ties to the lowest class index) |
//! | [`log_loss`] | `−(1/N) Σ_n log p_{n,y_n}` (a probability of 0 is read as `f64::MIN_POSITIVE`) |
//! | [`brier`] | `(1/N) Σ_n Σ_c (p_nc − 1[y_n = c])²` (Brier 1950, summed over classes: for K = 2 twice the binary `(p − y)²`) |
//! | [`expected_calibration_error`] | `Σ_b (|B_b|/N) |acc(B_b) − conf(B_b)|` over [`ECE_BINS`] = 15 equal-width bins of the top-class confidence (Guo et al. 2017) |
//! | [`auc`] | area under the ROC curve of `p_n1` for K = 2, by the rank (Mann–Whitney) statistic with tied scores given their average rank |

use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

use crate::error::{Error, LabelError, Result, check_finite};
pub use crate::likelihoods::labels::{check_all_classes_present, class_labels, infer_num_classes};
use crate::predictive::{Predictive, SIMPLEX_TOL};

/// Number of equal-width confidence bins of [`expected_calibration_error`] in
/// [`ClassMetrics`].
pub const ECE_BINS: usize = 15;

/// Per-point class probabilities: `N × K` (N ≥ 1, K ≥ 2), entries in [0, 1], rows summing
/// to 1 within [`SIMPLEX_TOL`] (then renormalised exactly).
#[derive(Clone, Debug, PartialEq)]
pub struct ClassProbs {
    probs: Mat<f64>,
}

impl ClassProbs {
    /// Validates and wraps `probs` (`N × K`).
    ///
    /// # Errors
    /// [`Error::Empty`] for N = 0; [`Error::Label`] ([`LabelError::TooFewClasses`]) for
    /// K < 2; [`Error::NonFinite`]; [`Error::Numerical`] for an entry outside [0, 1] or a
    /// row not summing to 1 within [`SIMPLEX_TOL`].
    pub fn new(mut probs: Mat<f64>) -> Result<Self> {
        if probs.nrows() == 0 {
            return Err(Error::Empty("class probabilities for zero points".into()));
        }
        if probs.ncols() < 2 {
            return Err(LabelError::TooFewClasses {
                num_classes: probs.ncols(),
            }
            .into());
        }
        check_finite("class probabilities", probs.as_ref())?;
        for i in 0..probs.nrows() {
            let mut sum = 0.0;
            for c in 0..probs.ncols() {
                let v = probs[(i, c)];
                if !(0.0..=1.0).contains(&v) {
                    return Err(Error::Numerical(format!(
                        "class probability {v} outside [0, 1] at point {i}, class {c}"
                    )));
                }
                sum += v;
            }
            if (sum - 1.0).abs() > SIMPLEX_TOL {
                return Err(Error::Numerical(format!(
                    "class probabilities of point {i} sum to {sum}, not 1"
                )));
            }
            for c in 0..probs.ncols() {
                probs[(i, c)] /= sum;
            }
        }
        Ok(ClassProbs { probs })
    }

    /// The weighted average `p_nc = Σ_s w_s p^{(s)}_nc` of per-component probabilities
    /// (Monte Carlo samples with `w_s = 1/S`, or mixture components with learned weights).
    ///
    /// # Errors
    /// [`Error::Empty`] for no components; [`Error::Shape`] when the number of weights
    /// differs or the components differ in shape; [`Error::Numerical`] for weights that
    /// are negative or do not sum to 1 within [`SIMPLEX_TOL`]; the errors of
    /// [`ClassProbs::new`] for the components and the result.
    pub fn mixture(weights: &[f64], components: &[Mat<f64>]) -> Result<Self> {
        let first = components
            .first()
            .ok_or_else(|| Error::Empty("class-probability mixture of no components".into()))?;
        if weights.len() != components.len() {
            return Err(Error::shape(
                "ClassProbs::mixture (weights)",
                components.len(),
                weights.len(),
            ));
        }
        if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0))
            || (weights.iter().sum::<f64>() - 1.0).abs() > SIMPLEX_TOL
        {
            return Err(Error::Numerical(format!(
                "mixture weights {weights:?} are not on the simplex"
            )));
        }
        let (n, k) = (first.nrows(), first.ncols());
        let mut out = Mat::<f64>::zeros(n, k);
        for (s, (comp, &w)) in components.iter().zip(weights).enumerate() {
            if (comp.nrows(), comp.ncols()) != (n, k) {
                return Err(Error::shape(
                    format!("ClassProbs::mixture (component {s})"),
                    format!("{n}×{k}"),
                    format!("{}×{}", comp.nrows(), comp.ncols()),
                ));
            }
            ClassProbs::new(comp.clone())?;
            for j in 0..k {
                for i in 0..n {
                    out[(i, j)] += w * comp[(i, j)];
                }
            }
        }
        for j in 0..k {
            for i in 0..n {
                out[(i, j)] = out[(i, j)].clamp(0.0, 1.0);
            }
        }
        ClassProbs::new(out)
    }

    /// The class probabilities a classification [`Predictive`] carries.
    ///
    /// # Errors
    /// [`Error::Config`] when it carries none (a regression predictive).
    pub fn from_predictive(pred: &Predictive) -> Result<Self> {
        let p = pred
            .class_probs()
            .ok_or_else(|| Error::Unsupported("predictive has no class probabilities".into()))?;
        ClassProbs::new(p.to_owned())
    }

    /// The `N × K` matrix.
    pub fn probs(&self) -> MatRef<'_, f64> {
        self.probs.as_ref()
    }

    /// Number of points N.
    pub fn n_points(&self) -> usize {
        self.probs.nrows()
    }

    /// Number of classes K.
    pub fn n_classes(&self) -> usize {
        self.probs.ncols()
    }

    /// The most probable class of every point (ties to the lowest index).
    pub fn predicted(&self) -> Vec<usize> {
        (0..self.n_points())
            .map(|i| {
                let mut best = 0;
                for c in 1..self.n_classes() {
                    if self.probs[(i, c)] > self.probs[(i, best)] {
                        best = c;
                    }
                }
                best
            })
            .collect()
    }

    fn check_labels(&self, labels: &[usize], what: &str) -> Result<()> {
        if labels.len() != self.n_points() {
            return Err(Error::shape(
                format!("{what} (labels)"),
                self.n_points(),
                labels.len(),
            ));
        }
        if let Some((row, &c)) = labels
            .iter()
            .enumerate()
            .find(|(_, c)| **c >= self.n_classes())
        {
            return Err(LabelError::OutOfRange {
                row,
                value: c as f64,
                num_classes: self.n_classes(),
            }
            .into());
        }
        Ok(())
    }
}

/// Fraction of points whose most probable class is not the label (see the module table).
///
/// # Errors
/// [`Error::Shape`] for `labels.len() ≠ N`; [`Error::Label`] for a label ≥ K.
pub fn error_rate(p: &ClassProbs, labels: &[usize]) -> Result<f64> {
    p.check_labels(labels, "error_rate")?;
    let wrong = p
        .predicted()
        .iter()
        .zip(labels)
        .filter(|(a, b)| a != b)
        .count();
    Ok(wrong as f64 / labels.len() as f64)
}

/// Mean negative log probability of the label, `−(1/N) Σ_n log p_{n,y_n}` (a zero
/// probability counts as `f64::MIN_POSITIVE`, so the result is finite).
///
/// # Errors
/// As [`error_rate`].
pub fn log_loss(p: &ClassProbs, labels: &[usize]) -> Result<f64> {
    p.check_labels(labels, "log_loss")?;
    let total: f64 = labels
        .iter()
        .enumerate()
        .map(|(i, &c)| -p.probs[(i, c)].max(f64::MIN_POSITIVE).ln())
        .sum();
    Ok(total / labels.len() as f64)
}

/// Multiclass Brier score `(1/N) Σ_n Σ_c (p_nc − 1[y_n = c])²` ∈ [0, 2].
///
/// # Errors
/// As [`error_rate`].
pub fn brier(p: &ClassProbs, labels: &[usize]) -> Result<f64> {
    p.check_labels(labels, "brier")?;
    let mut total = 0.0;
    for (i, &y) in labels.iter().enumerate() {
        for c in 0..p.n_classes() {
            let t = if c == y { 1.0 } else { 0.0 };
            total += (p.probs[(i, c)] - t).powi(2);
        }
    }
    Ok(total / labels.len() as f64)
}

/// Expected calibration error with `bins` equal-width bins of the top-class confidence
/// `conf_n = max_c p_nc` (Guo et al. 2017): bin b = ((b − 1)/bins, b/bins] for
/// b = 1, …, bins (a confidence of 0 falls in the first bin),
/// `ECE = Σ_b (|B_b|/N) |acc(B_b) − conf(B_b)|` with `acc` the fraction of the bin's
/// points whose top class is the label and `conf` their mean confidence; empty bins
/// contribute 0. [`ClassMetrics`] uses [`ECE_BINS`] = 15.
///
/// # Errors
/// As [`error_rate`]; [`Error::Config`] for `bins == 0`.
pub fn expected_calibration_error(p: &ClassProbs, labels: &[usize], bins: usize) -> Result<f64> {
    let bins = reliability_bins(p, labels, bins)?;
    let n: usize = bins.iter().map(|b| b.count).sum();
    Ok(bins
        .iter()
        .filter_map(|b| Some((b.count, b.accuracy()?, b.confidence()?)))
        .map(|(m, acc, conf)| (m as f64 / n as f64) * (acc - conf).abs())
        .sum())
}

/// One bin of a reliability diagram (see [`reliability_bins`]): the points whose
/// top-class confidence lies in `(lower, upper]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReliabilityBin {
    /// Lower edge (exclusive, except 0 for the first bin).
    pub lower: f64,
    /// Upper edge (inclusive).
    pub upper: f64,
    /// Points in the bin.
    pub count: usize,
    /// Sum of their top-class confidences.
    pub confidence_sum: f64,
    /// How many of them have the label as their top class.
    pub correct: usize,
}

impl ReliabilityBin {
    /// Fraction of the bin's points classified correctly; `None` for an empty bin.
    pub fn accuracy(&self) -> Option<f64> {
        (self.count > 0).then(|| self.correct as f64 / self.count as f64)
    }

    /// Mean top-class confidence of the bin's points; `None` for an empty bin.
    pub fn confidence(&self) -> Option<f64> {
        (self.count > 0).then(|| self.confidence_sum / self.count as f64)
    }

    /// The bins of several test sets pooled (counts and sums added bin by bin).
    ///
    /// # Errors
    /// [`Error::Shape`] when the sets have different bin counts.
    pub fn pool(sets: &[Vec<ReliabilityBin>]) -> Result<Vec<ReliabilityBin>> {
        let Some(first) = sets.first() else {
            return Ok(Vec::new());
        };
        let mut out = first.clone();
        for s in &sets[1..] {
            if s.len() != out.len() {
                return Err(Error::shape("ReliabilityBin::pool", out.len(), s.len()));
            }
            for (o, b) in out.iter_mut().zip(s) {
                o.count += b.count;
                o.confidence_sum += b.confidence_sum;
                o.correct += b.correct;
            }
        }
        Ok(out)
    }
}

/// The reliability diagram's bins of the top-class confidence `conf_n = max_c p_nc`:
/// `bins` equal-width bins b = ((b − 1)/bins, b/bins], b = 1, …, bins (a confidence of 0
/// falls in the first bin), each with its count, confidence sum and correct count. The
/// binning of [`expected_calibration_error`].
///
/// # Errors
/// As [`error_rate`]; [`Error::Config`] for `bins == 0`.
pub fn reliability_bins(
    p: &ClassProbs,
    labels: &[usize],
    bins: usize,
) -> Result<Vec<ReliabilityBin>> {
    p.check_labels(labels, "reliability_bins")?;
    if bins == 0 {
        return Err(Error::config(
            "bins",
            "a reliability diagram needs at least one bin",
        ));
    }
    let mut out: Vec<ReliabilityBin> = (0..bins)
        .map(|b| ReliabilityBin {
            lower: b as f64 / bins as f64,
            upper: (b + 1) as f64 / bins as f64,
            ..ReliabilityBin::default()
        })
        .collect();
    let pred = p.predicted();
    for (i, &y) in labels.iter().enumerate() {
        let conf = p.probs[(i, pred[i])];
        let b = ((conf * bins as f64).ceil() as usize).clamp(1, bins) - 1;
        out[b].count += 1;
        out[b].confidence_sum += conf;
        if pred[i] == y {
            out[b].correct += 1;
        }
    }
    Ok(out)
}

/// Area under the ROC curve of the positive-class probability `p_n1` of a binary problem:
/// `AUC = (R₊ − n₊(n₊ + 1)/2) / (n₊ n₋)`, with `R₊` the sum of the positives' ranks among
/// all scores (ascending, tied scores sharing their average rank), i.e. the probability
/// that a random positive scores above a random negative, ties counting ½.
///
/// # Errors
/// As [`error_rate`]; [`Error::Config`] for K ≠ 2; [`Error::Label`]
/// ([`LabelError::MissingClass`]) when the labels hold only one class.
pub fn auc(p: &ClassProbs, labels: &[usize]) -> Result<f64> {
    p.check_labels(labels, "auc")?;
    if p.n_classes() != 2 {
        return Err(Error::Unsupported(format!(
            "AUC is defined here for binary problems, got K = {}",
            p.n_classes()
        )));
    }
    let n_pos = labels.iter().filter(|&&c| c == 1).count();
    let n_neg = labels.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return Err(LabelError::MissingClass {
            class: usize::from(n_pos == 0),
            num_classes: 2,
        }
        .into());
    }
    let mut order: Vec<usize> = (0..labels.len()).collect();
    order.sort_by(|&a, &b| p.probs[(a, 1)].total_cmp(&p.probs[(b, 1)]));
    let mut rank_sum_pos = 0.0;
    let mut start = 0;
    while start < order.len() {
        let score = p.probs[(order[start], 1)];
        let mut end = start + 1;
        while end < order.len() && p.probs[(order[end], 1)] == score {
            end += 1;
        }
        // Ranks start+1 ..= end share their average.
        let avg = (start + 1 + end) as f64 / 2.0;
        let pos = order[start..end]
            .iter()
            .filter(|&&i| labels[i] == 1)
            .count();
        rank_sum_pos += avg * pos as f64;
        start = end;
    }
    let (np, nn) = (n_pos as f64, n_neg as f64);
    Ok((rank_sum_pos - np * (np + 1.0) / 2.0) / (np * nn))
}

/// The classification metrics of one test set.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassMetrics {
    /// [`error_rate`].
    pub error_rate: f64,
    /// [`log_loss`] (the classification NLL).
    pub log_loss: f64,
    /// [`brier`].
    pub brier: f64,
    /// [`expected_calibration_error`] with [`ECE_BINS`] bins.
    pub ece: f64,
    /// [`auc`] for binary problems whose labels hold both classes, else `None`.
    pub auc: Option<f64>,
}

impl ClassMetrics {
    /// Every metric of `p` at `labels`.
    ///
    /// # Errors
    /// As [`error_rate`].
    pub fn compute(p: &ClassProbs, labels: &[usize]) -> Result<ClassMetrics> {
        let both = labels.contains(&0) && labels.contains(&1);
        Ok(ClassMetrics {
            error_rate: error_rate(p, labels)?,
            log_loss: log_loss(p, labels)?,
            brier: brier(p, labels)?,
            ece: expected_calibration_error(p, labels, ECE_BINS)?,
            auc: if p.n_classes() == 2 && both {
                Some(auc(p, labels)?)
            } else {
                None
            },
        })
    }
}
