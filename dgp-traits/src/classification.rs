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

use crate::predictive::{Predictive, SIMPLEX_TOL};
use dgp_core::{Error, LabelError, Result, check_finite};
pub use dgp_data::labels::{
    check_all_classes_present, class_label, class_labels, infer_num_classes,
};

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
        (0..self.n_points()).map(|i| self.top_class(i)).collect()
    }

    /// The most probable class of point `i` (ties to the lowest index).
    fn top_class(&self, i: usize) -> usize {
        let mut best = 0;
        for c in 1..self.n_classes() {
            if self.probs[(i, c)] > self.probs[(i, best)] {
                best = c;
            }
        }
        best
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
    Ok(ClassMetricsAccumulator::of(p, labels, 1, "error_rate")?.error_rate())
}

/// Mean negative log probability of the label, `−(1/N) Σ_n log p_{n,y_n}` (a zero
/// probability counts as `f64::MIN_POSITIVE`, so the result is finite).
///
/// # Errors
/// As [`error_rate`].
pub fn log_loss(p: &ClassProbs, labels: &[usize]) -> Result<f64> {
    Ok(ClassMetricsAccumulator::of(p, labels, 1, "log_loss")?.log_loss())
}

/// Multiclass Brier score `(1/N) Σ_n Σ_c (p_nc − 1[y_n = c])²` ∈ [0, 2].
///
/// # Errors
/// As [`error_rate`].
pub fn brier(p: &ClassProbs, labels: &[usize]) -> Result<f64> {
    Ok(ClassMetricsAccumulator::of(p, labels, 1, "brier")?.brier())
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
    Ok(ClassMetricsAccumulator::of(p, labels, bins, "expected_calibration_error")?.ece())
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
    Ok(ClassMetricsAccumulator::of(p, labels, bins, "reliability_bins")?.bins)
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
    if p.n_classes() != 2 {
        p.check_labels(labels, "auc")?;
        return Err(Error::Unsupported(format!(
            "AUC is defined here for binary problems, got K = {}",
            p.n_classes()
        )));
    }
    let mut acc = ClassMetricsAccumulator::of(p, labels, 1, "auc")?;
    acc.auc().ok_or_else(|| {
        LabelError::MissingClass {
            class: usize::from(acc.positives.is_empty()),
            num_classes: 2,
        }
        .into()
    })
}

/// `U / (n₊ n₋)` with `U = Σ_{positives} (#negatives below + ½ #negatives equal)`, the
/// Mann–Whitney form of [`auc`] (equal to the rank form with tied scores sharing their
/// average rank); sorts both slices. `None` when either is empty.
fn mann_whitney_auc(pos: &mut [f64], neg: &mut [f64]) -> Option<f64> {
    if pos.is_empty() || neg.is_empty() {
        return None;
    }
    pos.sort_unstable_by(f64::total_cmp);
    neg.sort_unstable_by(f64::total_cmp);
    // Twice U, an integer: exact whatever the order of the additions.
    let (mut below, mut upto, mut twice_u) = (0usize, 0usize, 0u128);
    for &s in pos.iter() {
        while below < neg.len() && neg[below] < s {
            below += 1;
        }
        upto = upto.max(below);
        while upto < neg.len() && neg[upto] <= s {
            upto += 1;
        }
        twice_u += (below + upto) as u128;
    }
    Some(twice_u as f64 / (2.0 * pos.len() as f64 * neg.len() as f64))
}

/// Running sums of every classification metric over test points given chunk by chunk:
/// the one place the metrics are computed, whether the predictions are held in memory
/// ([`ClassMetrics::compute`], [`error_rate`], … push them as one chunk) or streamed from
/// a file ([`ClassMetricsAccumulator::push`] per chunk). Every sum is accumulated in row
/// order, so the same predictions give the same bits however they are chunked.
///
/// Memory: `O(bins)`, plus, for K = 2, the positive-class probability of every point
/// pushed (8 bytes per point, the scores [`auc`] ranks).
#[derive(Clone, Debug)]
pub struct ClassMetricsAccumulator {
    num_classes: usize,
    n: usize,
    wrong: usize,
    log_loss_sum: f64,
    brier_sum: f64,
    bins: Vec<ReliabilityBin>,
    positives: Vec<f64>,
    negatives: Vec<f64>,
}

impl ClassMetricsAccumulator {
    /// An empty accumulator of a K-class problem with `bins` equal-width confidence bins
    /// (see [`reliability_bins`]).
    ///
    /// # Errors
    /// [`LabelError::TooFewClasses`] for K < 2; [`Error::Config`] for `bins == 0`.
    pub fn new(num_classes: usize, bins: usize) -> Result<Self> {
        if num_classes < 2 {
            return Err(LabelError::TooFewClasses { num_classes }.into());
        }
        if bins == 0 {
            return Err(Error::config(
                "bins",
                "a reliability diagram needs at least one bin",
            ));
        }
        Ok(Self {
            num_classes,
            n: 0,
            wrong: 0,
            log_loss_sum: -0.0,
            brier_sum: 0.0,
            bins: (0..bins)
                .map(|b| ReliabilityBin {
                    lower: b as f64 / bins as f64,
                    upper: (b + 1) as f64 / bins as f64,
                    ..ReliabilityBin::default()
                })
                .collect(),
            positives: Vec::new(),
            negatives: Vec::new(),
        })
    }

    /// An accumulator of `bins` bins holding `p` at `labels` (`what` names the caller in
    /// errors).
    fn of(p: &ClassProbs, labels: &[usize], bins: usize, what: &str) -> Result<Self> {
        p.check_labels(labels, what)?;
        let mut acc = Self::new(p.n_classes(), bins)?;
        acc.add(p, labels);
        Ok(acc)
    }

    /// Adds the next chunk of points: probabilities `p` at `labels`.
    ///
    /// # Errors
    /// [`Error::Shape`] for `labels.len() ≠ N` or a K other than the accumulator's;
    /// [`Error::Label`] for a label ≥ K. Nothing is added on error.
    pub fn push(&mut self, p: &ClassProbs, labels: &[usize]) -> Result<()> {
        if p.n_classes() != self.num_classes {
            return Err(Error::shape(
                "ClassMetricsAccumulator::push (classes)",
                self.num_classes,
                p.n_classes(),
            ));
        }
        p.check_labels(labels, "ClassMetricsAccumulator::push")?;
        self.add(p, labels);
        Ok(())
    }

    /// [`ClassMetricsAccumulator::push`] after the checks.
    fn add(&mut self, p: &ClassProbs, labels: &[usize]) {
        let nb = self.bins.len();
        for (i, &y) in labels.iter().enumerate() {
            let top = p.top_class(i);
            let conf = p.probs[(i, top)];
            self.wrong += usize::from(top != y);
            self.log_loss_sum += -p.probs[(i, y)].max(f64::MIN_POSITIVE).ln();
            for c in 0..self.num_classes {
                let t = if c == y { 1.0 } else { 0.0 };
                self.brier_sum += (p.probs[(i, c)] - t).powi(2);
            }
            let b = ((conf * nb as f64).ceil() as usize).clamp(1, nb) - 1;
            let bin = &mut self.bins[b];
            bin.count += 1;
            bin.confidence_sum += conf;
            bin.correct += usize::from(top == y);
            if self.num_classes == 2 {
                let score = p.probs[(i, 1)];
                if y == 1 {
                    self.positives.push(score);
                } else {
                    self.negatives.push(score);
                }
            }
        }
        self.n += labels.len();
    }

    /// Points pushed so far.
    pub fn rows(&self) -> usize {
        self.n
    }

    fn mean(&self, sum: f64) -> f64 {
        sum / self.n as f64
    }

    fn error_rate(&self) -> f64 {
        self.wrong as f64 / self.n as f64
    }

    fn log_loss(&self) -> f64 {
        self.mean(self.log_loss_sum)
    }

    fn brier(&self) -> f64 {
        self.mean(self.brier_sum)
    }

    fn ece(&self) -> f64 {
        self.bins
            .iter()
            .filter_map(|b| Some((b.count, b.accuracy()?, b.confidence()?)))
            .map(|(m, acc, conf)| (m as f64 / self.n as f64) * (acc - conf).abs())
            .sum()
    }

    /// AUC of the points so far (K = 2 with both classes present), else `None`; sorts the
    /// held scores in place.
    fn auc(&mut self) -> Option<f64> {
        mann_whitney_auc(&mut self.positives, &mut self.negatives)
    }

    /// The metrics of every point pushed, and the reliability bins.
    ///
    /// # Errors
    /// [`Error::Empty`] when no point was pushed.
    pub fn finish(mut self) -> Result<(ClassMetrics, Vec<ReliabilityBin>)> {
        if self.n == 0 {
            return Err(Error::Empty("classification metrics of no points".into()));
        }
        let metrics = ClassMetrics {
            error_rate: self.error_rate(),
            log_loss: self.log_loss(),
            brier: self.brier(),
            ece: self.ece(),
            auc: self.auc(),
        };
        Ok((metrics, self.bins))
    }
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
        Ok(
            ClassMetricsAccumulator::of(p, labels, ECE_BINS, "ClassMetrics::compute")?
                .finish()?
                .0,
        )
    }
}
