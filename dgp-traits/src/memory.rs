//! A conservative upper bound of a backend's peak memory from its shapes, so that a
//! harness can refuse a run that would not fit before anything is allocated
//! ([`crate::backend::Backend::memory_estimate`]).
//!
//! [`sparse_dgp`] is the bound of a sparse deep GP with a q(u) per GP output, the shared
//! shape of every backend; a backend whose memory has another shape adds its own term
//! ([`MemoryEstimate::add`]) on top of it. In f64 throughout (no overflow for any `usize`
//! shape), the bound is the sum of
//!
//! - a base: the process, the data set and its standardised copies;
//! - the M² part ([`MemoryPart::Inducing`]): per GP output the M×M covariance factor, its
//!   Adam moments, gradient, flat copies and the tape's M×M temporaries;
//! - the training tape ([`MemoryPart::TrainSamples`]): per sample, layer and output the
//!   M×B projections and the B×D propagated inputs;
//! - prediction ([`MemoryPart::PredictSamples`]): a chunk of max(S, rows per chunk)
//!   propagated rows per layer and output, and the N_test×S mixture of the result;
//! - the minibatch ([`MemoryPart::Batch`]): the gathered rows and their copies per layer.
//!
//! The constants were set from measured peak RSS (`VmHWM`) of runs on boston (M 30 to 300,
//! 5000 predictive samples, 50 training samples; svi, fc, star, nested, dspp, sghmc), where
//! the estimate is 3 to 35 times the measurement; `dgp-bench`'s test
//! `memory_estimate_bounds_measured_peak_rss` keeps it above the measurement.

use serde::Serialize;

/// Bytes of one f64.
pub const F64_BYTES: f64 = 8.0;

/// The shapes that decide a run's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryShape {
    /// GP layers.
    pub layers: usize,
    /// Inducing points per layer.
    pub m: usize,
    /// Input dimension of the data.
    pub d: usize,
    /// Hidden width as given (`None`: the backend's default).
    pub hidden: Option<usize>,
    /// Training rows.
    pub n_train: usize,
    /// Test rows.
    pub n_test: usize,
    /// Minibatch rows actually used (≤ `n_train`).
    pub batch: usize,
    /// Training samples (dspp: quadrature sites).
    pub train_samples: usize,
    /// Predictive mixture components.
    pub predict_samples: usize,
}

impl MemoryShape {
    /// The hidden width: as given, else `default` for the input dimension; at least 1.
    pub fn width(&self, default: usize) -> usize {
        self.hidden.unwrap_or(default).max(1)
    }

    /// The usual default hidden width, the input dimension clamped to 5..=30.
    pub fn clamped_input_width(&self) -> usize {
        self.d.clamp(5, 30)
    }

    /// GP outputs over all layers for hidden width `w` (an upper bound: the last layer
    /// has one), as f64.
    pub fn outputs(&self, w: usize) -> f64 {
        self.layers.max(1) as f64 * w as f64
    }
}

/// What a part of an estimate grows with (a harness names the setting that controls it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MemoryPart {
    /// Inducing points per layer (M² terms).
    Inducing,
    /// Training samples (or, where they are the model's components, its sites).
    TrainSamples,
    /// Predictive mixture components.
    PredictSamples,
    /// Minibatch rows.
    Batch,
}

/// An estimate: the total and the part each setting is responsible for.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryEstimate {
    /// Upper bound of the peak resident memory, bytes (the base and every part).
    pub total: f64,
    /// (part, bytes) of each part, largest first.
    pub parts: Vec<(MemoryPart, f64)>,
}

impl MemoryEstimate {
    /// Adds `bytes` to `part` (and to the total), keeping the parts largest first.
    pub fn add(&mut self, part: MemoryPart, bytes: f64) {
        match self.parts.iter_mut().find(|p| p.0 == part) {
            Some(p) => p.1 += bytes,
            None => self.parts.push((part, bytes)),
        }
        self.total += bytes;
        self.parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    }

    /// The largest part and its bytes.
    pub fn dominant(&self) -> Option<(MemoryPart, f64)> {
        self.parts.first().copied()
    }
}

/// The bound of a sparse deep GP of hidden width `shape.width(default_width)` (see the
/// module docs).
pub fn sparse_dgp(shape: &MemoryShape, default_width: usize) -> MemoryEstimate {
    let f = |v: usize| v as f64;
    let l = f(shape.layers.max(1));
    let m = f(shape.m);
    let d = f(shape.d.max(1));
    let w = shape.width(default_width);
    let din = d.max(f(w));
    let b = f(shape.batch.max(1));
    let n = f(shape.n_train + shape.n_test);
    let outputs = shape.outputs(w);
    let wf = f(w);
    let base = 96.0 * 1024.0 * 1024.0 + 12.0 * n * (d + 1.0) * F64_BYTES;
    let m2 = 8.0 * (outputs + 2.0 * l) * m * m * F64_BYTES + 16.0 * l * m * din * F64_BYTES;
    let st = f(shape.train_samples.max(1));
    let train = 4.0 * st * l * (wf + 4.0) * b * (m + din) * F64_BYTES;
    let sp = f(shape.predict_samples.max(1));
    let rows = sp.max(8192.0).min(sp * f(shape.n_test.max(1)));
    let predict = 4.0 * l * (wf + 4.0) * rows * (m + din) * F64_BYTES
        + 8.0 * f(shape.n_test) * sp * F64_BYTES;
    let batch = 24.0 * b * din * l * F64_BYTES;
    let mut parts = vec![
        (MemoryPart::Inducing, m2),
        (MemoryPart::TrainSamples, train),
        (MemoryPart::PredictSamples, predict),
        (MemoryPart::Batch, batch),
    ];
    let total = base + parts.iter().map(|p| p.1).sum::<f64>();
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    MemoryEstimate { total, parts }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> MemoryShape {
        MemoryShape {
            layers: 2,
            m: 50,
            d: 8,
            hidden: None,
            n_train: 400,
            n_test: 100,
            batch: 400,
            train_samples: 10,
            predict_samples: 100,
        }
    }

    #[test]
    fn parts_sum_to_the_total_over_the_base_and_stay_sorted() {
        let mut e = sparse_dgp(&shape(), 8);
        let sum = |e: &MemoryEstimate| e.parts.iter().map(|p| p.1).sum::<f64>();
        let base = e.total - sum(&e);
        assert!(base >= 96.0 * 1024.0 * 1024.0);
        e.add(MemoryPart::Batch, 1e12);
        assert_eq!(e.dominant().map(|p| p.0), Some(MemoryPart::Batch));
        assert!((e.total - base - sum(&e)).abs() <= 1e-3 * e.total);
        assert!(e.parts.windows(2).all(|w| w[0].1 >= w[1].1));
    }

    #[test]
    fn huge_shapes_do_not_overflow() {
        let s = MemoryShape {
            layers: usize::MAX,
            m: usize::MAX,
            train_samples: usize::MAX,
            predict_samples: usize::MAX,
            ..shape()
        };
        let e = sparse_dgp(&s, s.clamped_input_width());
        assert!(e.total > 1e30);
    }
}
