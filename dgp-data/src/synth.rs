//! A seeded synthetic regression problem of any size (10³ to 10⁹ rows) whose
//! Bayes-optimal negative log likelihood is known exactly.
//!
//! # The function
//!
//! Inputs `x = (x₁, …, x₉)`, i.i.d. uniform on `[−1, 1]`. A first nonlinear map
//! `h: ℝ⁹ → ℝ³` (a smooth periodic part, products of inputs, a saturating part):
//!
//! ```text
//! h₁ = sin(π x₁) + ½ cos(2π x₂)
//! h₂ = x₃ x₄ + ½ x₅² − 0.3 x₆
//! h₃ = tanh(2 (x₇ + x₈ − x₉))
//! ```
//!
//! then a second map of the hidden values, and an input-dependent noise scale:
//!
//! ```text
//! f(x) = 2 sin(1.5 h₁ + h₂) + h₂ h₃ + ½ h₃
//! σ(x) = 0.05 + 0.25 / (1 + exp(−(2 h₃ + x₁)))        ∈ (0.05, 0.3)
//! y    = f(x) + σ(x) ε,   ε ~ N(0, 1)
//! ```
//!
//! The Bayes-optimal predictive density is `N(f(x), σ²(x))`; its expected negative log
//! likelihood at `x` is `½ ln(2π σ²(x)) + ½` ([`bayes_nll`]), and a test set's optimum is
//! the mean of that over its rows ([`mean_bayes_nll`]), computed from the inputs alone.
//!
//! A predictor `N(m(x), s²)` with one noise variance `s²` for every input (a Gaussian
//! likelihood with a single noise parameter, once the model's own uncertainty about the
//! mean has shrunk) cannot reach that optimum: its expected NLL over rows `x₁ … x_n` is
//! `½ ln(2π s²) + mean_i(σ²(x_i) + (f(x_i) − m(x_i))²) / (2 s²)`, smallest at `m = f` and
//! `s² = mean_i σ²(x_i)`, where it equals `½ ln(2π · mean_i σ²(x_i)) + ½`
//! ([`NoiseFloor::homoscedastic_nll`]). Its distance to the Bayes optimum is Jensen's gap
//! `½ (ln mean σ² − mean ln σ²)`; the rest of a model's gap comes from its mean, since at
//! `s² = mean σ² + e²` with mean squared error `e²` of the mean the NLL is
//! `½ ln(2π (mean σ² + e²)) + ½`. The expected RMSE of the exact mean is
//! `√(mean σ²)` ([`NoiseFloor::rmse`]).
//!
//! # The classification variant
//!
//! [`SynthTask::Classification`] writes the same rows with the target replaced by the
//! label `1[f(x) + σ(x) ε > 0]` (the regression file's `y > 0`): a probit classification
//! problem of the same latent function, `P(y = 1 | x) = Φ(f(x)/σ(x))`. The Bayes-optimal
//! classifier predicts `p*(x) = Φ(f(x)/σ(x))`; over rows `x₁ … x_n` its expected error is
//! `mean_i Φ(−|f(x_i)|/σ(x_i))` and its expected log loss the mean binary entropy
//! `mean_i H(p*(x_i))` ([`class_floor`]).
//!
//! # Seeding and chunks
//!
//! Rows are generated in chunks of [`SYNTH_CHUNK_ROWS`]: chunk `c` holds rows
//! `c·SYNTH_CHUNK_ROWS ..` and is drawn from the generator
//! [`dgp_core::rng::stream`]`(seed, c)`; per row, 9 uniforms `u` (53 random bits each,
//! `x = 2u − 1`) and then one standard normal ε. Chunks are generated in parallel and
//! written in order, so the file does not depend on the number of threads, and the first
//! `m` rows of a file of `n > m` rows are the file of `m` rows.

use std::path::Path;

use crate::{Dataset, RowSource};
use dgp_core::rng::{Rng, stream};
use dgp_core::{Error, Result};
use faer::Mat;
use rand::Rng as _;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

use crate::chunks::{DEFAULT_CHUNK_ROWS, for_each_chunk};
use crate::rowstore::{RowStoreWriter, Schema};

/// Number of inputs of the synthetic problem.
pub const SYNTH_INPUTS: usize = 9;

/// Rows per independently seeded chunk (part of the definition of the data: changing it
/// changes every row after the first chunk).
pub const SYNTH_CHUNK_ROWS: usize = 1 << 16;

/// Largest number of rows [`write_synth`] accepts (10⁹ rows are 80 GB).
pub const SYNTH_MAX_ROWS: u64 = 4_000_000_000;

/// The hidden layer `h(x)` (module docs).
fn hidden(x: &[f64; SYNTH_INPUTS]) -> [f64; 3] {
    use std::f64::consts::PI;
    [
        (PI * x[0]).sin() + 0.5 * (2.0 * PI * x[1]).cos(),
        x[2] * x[3] + 0.5 * x[4] * x[4] - 0.3 * x[5],
        (2.0 * (x[6] + x[7] - x[8])).tanh(),
    ]
}

/// The noise-free mean `f(x)` and the noise scale `σ(x)` (module docs).
pub fn synth_mean_and_std(x: &[f64; SYNTH_INPUTS]) -> (f64, f64) {
    let h = hidden(x);
    let f = 2.0 * (1.5 * h[0] + h[1]).sin() + h[1] * h[2] + 0.5 * h[2];
    let s = 0.05 + 0.25 / (1.0 + (-(2.0 * h[2] + x[0])).exp());
    (f, s)
}

/// The Bayes-optimal expected negative log likelihood at `x`: `½ ln(2π σ²(x)) + ½`.
pub fn bayes_nll(x: &[f64; SYNTH_INPUTS]) -> f64 {
    let (_, s) = synth_mean_and_std(x);
    0.5 * (2.0 * std::f64::consts::PI * s * s).ln() + 0.5
}

/// The mean of [`bayes_nll`] over the rows of `src` (its inputs must be the 9 synthetic
/// inputs in original units), summed in row order: the optimum a model's mean test NLL
/// can be compared with.
///
/// # Errors
/// [`Error::Shape`] if `src` does not have 9 inputs; errors of [`RowSource::gather`].
pub fn mean_bayes_nll<S: RowSource + ?Sized>(src: &S) -> Result<f64> {
    Ok(noise_floor(src)?.bayes_nll)
}

/// What the noise of the synthetic problem leaves to any model on a set of rows (module
/// docs): the Bayes-optimal mean NLL, the best mean NLL of a predictor with one noise
/// variance, and the expected RMSE of the exact mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoiseFloor {
    /// Mean over the rows of `½ ln(2π σ²(x)) + ½` ([`bayes_nll`]).
    pub bayes_nll: f64,
    /// `½ ln(2π · mean σ²(x)) + ½`: the smallest expected mean NLL of any predictor
    /// `N(m(x), s²)` with a single `s²` (reached at `m = f`, `s² = mean σ²`).
    pub homoscedastic_nll: f64,
    /// `√(mean σ²(x))`: the expected RMSE of the exact mean `f`.
    pub rmse: f64,
}

/// The [`NoiseFloor`] of the rows of `src` (its inputs must be the 9 synthetic inputs in
/// original units), in one pass, summed in row order.
///
/// # Errors
/// [`Error::Shape`] if `src` does not have 9 inputs; errors of [`RowSource::gather`].
pub fn noise_floor<S: RowSource + ?Sized>(src: &S) -> Result<NoiseFloor> {
    if src.input_dim() != SYNTH_INPUTS {
        return Err(Error::shape(
            "noise_floor (inputs)",
            SYNTH_INPUTS,
            src.input_dim(),
        ));
    }
    let mut nll = 0.0;
    let mut var = 0.0;
    for_each_chunk(src, DEFAULT_CHUNK_ROWS, |_, x, _| {
        let mut row = [0.0; SYNTH_INPUTS];
        for i in 0..x.nrows() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = x[(i, j)];
            }
            nll += bayes_nll(&row);
            let (_, s) = synth_mean_and_std(&row);
            var += s * s;
        }
        Ok(())
    })?;
    let n = src.n() as f64;
    let mean_var = var / n;
    Ok(NoiseFloor {
        bayes_nll: nll / n,
        homoscedastic_nll: 0.5 * (2.0 * std::f64::consts::PI * mean_var).ln() + 0.5,
        rmse: mean_var.sqrt(),
    })
}

/// What a synthetic file's target is (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SynthTask {
    /// `y = f(x) + σ(x) ε`.
    #[default]
    Regression,
    /// The label `1[f(x) + σ(x) ε > 0]`.
    Classification,
}

/// The Bayes-optimal scores of the classification variant on a set of rows (module
/// docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassFloor {
    /// `mean_i Φ(−|f(x_i)|/σ(x_i))`: the expected error rate of the Bayes classifier.
    pub error_rate: f64,
    /// `mean_i H(Φ(f(x_i)/σ(x_i)))` (nats): its expected log loss.
    pub log_loss: f64,
}

/// The [`ClassFloor`] of the rows of `src` (its inputs must be the 9 synthetic inputs in
/// original units), in one pass, summed in row order.
///
/// # Errors
/// [`Error::Shape`] if `src` does not have 9 inputs; errors of [`RowSource::gather`].
pub fn class_floor<S: RowSource + ?Sized>(src: &S) -> Result<ClassFloor> {
    if src.input_dim() != SYNTH_INPUTS {
        return Err(Error::shape(
            "class_floor (inputs)",
            SYNTH_INPUTS,
            src.input_dim(),
        ));
    }
    let (mut err, mut ll) = (0.0, 0.0);
    for_each_chunk(src, DEFAULT_CHUNK_ROWS, |_, x, _| {
        let mut row = [0.0; SYNTH_INPUTS];
        for i in 0..x.nrows() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = x[(i, j)];
            }
            let (f, s) = synth_mean_and_std(&row);
            // Φ(z) and Φ(−z) without cancellation; log Φ from the same pair.
            let (p1, p0) = dgp_core::special::norm_cdf_both(f / s);
            err += p0.min(p1);
            let h = |p: f64| if p > 0.0 { -p * p.ln() } else { 0.0 };
            ll += h(p0) + h(p1);
        }
        Ok(())
    })?;
    let n = src.n() as f64;
    Ok(ClassFloor {
        error_rate: err / n,
        log_loss: ll / n,
    })
}

/// Draws `rows` rows from `rng` into `out` (cleared first), row-major, 9 inputs then the
/// target per row; returns the sum of [`bayes_nll`] over the rows (in row order).
fn fill_chunk(rng: &mut Rng, rows: usize, out: &mut Vec<f64>) -> f64 {
    fill_chunk_for(rng, rows, SynthTask::Regression, out)
}

/// [`fill_chunk`] with the target of `task`.
fn fill_chunk_for(rng: &mut Rng, rows: usize, task: SynthTask, out: &mut Vec<f64>) -> f64 {
    out.clear();
    let mut nll = 0.0;
    let mut x = [0.0; SYNTH_INPUTS];
    for _ in 0..rows {
        for v in &mut x {
            let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            *v = 2.0 * u - 1.0;
        }
        let eps: f64 = StandardNormal.sample(rng);
        let (f, s) = synth_mean_and_std(&x);
        out.extend_from_slice(&x);
        let y = f + s * eps;
        out.push(match task {
            SynthTask::Regression => y,
            SynthTask::Classification => f64::from(u8::from(y > 0.0)),
        });
        nll += 0.5 * (2.0 * std::f64::consts::PI * s * s).ln() + 0.5;
    }
    nll
}

/// Rows of chunk `c` of a file of `n` rows.
fn chunk_rows(n: u64, c: u64) -> usize {
    let start = c * SYNTH_CHUNK_ROWS as u64;
    (n - start).min(SYNTH_CHUNK_ROWS as u64) as usize
}

/// What [`write_synth`] wrote.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SynthSummary {
    /// Rows written.
    pub rows: u64,
    /// Mean of [`bayes_nll`] over the rows (sums per chunk in row order, chunks in order;
    /// the regression target's optimum whatever the task: see [`class_floor`]).
    pub mean_bayes_nll: f64,
}

/// Column names of synthetic files: `x1..x9`, target `y`.
pub fn synth_schema() -> Schema {
    Schema {
        inputs: (1..=SYNTH_INPUTS).map(|j| format!("x{j}")).collect(),
        targets: vec!["y".into()],
    }
}

/// Writes `n` synthetic rows with `seed` to a row store at `path` (module docs), chunks
/// generated in parallel on the current rayon pool, at most `2 × threads` chunks
/// (≈ 5 MiB each) in memory at once. `progress(rows_written)` is called after each group
/// of chunks.
///
/// # Errors
/// [`Error::Config`] if `n` is 0 or above [`SYNTH_MAX_ROWS`]; errors of the writer.
pub fn write_synth(
    path: &Path,
    n: u64,
    seed: u64,
    progress: impl FnMut(u64),
) -> Result<SynthSummary> {
    write_synth_task(path, n, seed, SynthTask::Regression, progress)
}

/// [`write_synth`] with the target of `task` (the classification variant's label column
/// is named `label`; its rows' inputs are the regression file's).
///
/// # Errors
/// As [`write_synth`].
pub fn write_synth_task(
    path: &Path,
    n: u64,
    seed: u64,
    task: SynthTask,
    mut progress: impl FnMut(u64),
) -> Result<SynthSummary> {
    if n == 0 || n > SYNTH_MAX_ROWS {
        return Err(Error::config(
            "rows",
            format!("synthetic data of {n} rows; between 1 and {SYNTH_MAX_ROWS} are allowed"),
        ));
    }
    let mut schema = synth_schema();
    if task == SynthTask::Classification {
        schema.targets = vec!["label".into()];
    }
    let mut w = RowStoreWriter::create(path, schema, &[])?;
    let chunks = n.div_ceil(SYNTH_CHUNK_ROWS as u64);
    let group = (2 * rayon::current_num_threads()).max(1) as u64;
    let mut next_gen = stream(seed, 0);
    let mut bufs: Vec<Vec<f64>> = Vec::new();
    let mut nll = 0.0;
    let mut c0 = 0;
    while c0 < chunks {
        let g = group.min(chunks - c0);
        // stream(seed, c) = stream(seed, c − 1) advanced by one jump.
        let mut gens = Vec::with_capacity(g as usize);
        for _ in 0..g {
            gens.push(next_gen.clone());
            next_gen.jump();
        }
        bufs.resize_with(g as usize, Vec::new);
        let sums: Vec<f64> = bufs
            .par_iter_mut()
            .zip(gens.par_iter_mut())
            .enumerate()
            .map(|(k, (buf, rng))| fill_chunk_for(rng, chunk_rows(n, c0 + k as u64), task, buf))
            .collect();
        for (buf, s) in bufs.iter().zip(&sums) {
            w.push_row_major(buf)?;
            nll += s;
        }
        c0 += g;
        progress(w.rows());
    }
    let rows = w.finish()?;
    Ok(SynthSummary {
        rows,
        mean_bayes_nll: nll / rows as f64,
    })
}

/// The first `n` synthetic rows with `seed` in memory (the rows [`write_synth`] writes).
///
/// # Errors
/// [`Error::Config`] if `n == 0`.
pub fn synth_dataset(n: usize, seed: u64) -> Result<Dataset> {
    if n == 0 {
        return Err(Error::config("rows", "synthetic data of 0 rows"));
    }
    let mut x = Mat::zeros(n, SYNTH_INPUTS);
    let mut y = Mat::zeros(n, 1);
    let mut buf = Vec::new();
    for c in 0..(n as u64).div_ceil(SYNTH_CHUNK_ROWS as u64) {
        let rows = chunk_rows(n as u64, c);
        fill_chunk(&mut stream(seed, c), rows, &mut buf);
        let start = c as usize * SYNTH_CHUNK_ROWS;
        for (r, row) in buf.chunks_exact(SYNTH_INPUTS + 1).enumerate() {
            for j in 0..SYNTH_INPUTS {
                x[(start + r, j)] = row[j];
            }
            y[(start + r, 0)] = row[SYNTH_INPUTS];
        }
    }
    let s = synth_schema();
    Dataset::new(x, y)?
        .with_feature_names(s.inputs)?
        .with_target_names(s.targets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rowstore::RowStore;

    fn tmp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("dgp-io-synth-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn file_is_the_same_whatever_the_thread_count_and_matches_memory() {
        let dir = tmp("threads");
        let n = 2 * SYNTH_CHUNK_ROWS as u64 + 1234;
        let mut files = Vec::new();
        let mut summaries = Vec::new();
        for threads in [1, 3] {
            let path = dir.join(format!("t{threads}.rows"));
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let s = pool.install(|| write_synth(&path, n, 42, |_| {})).unwrap();
            summaries.push(s);
            files.push(std::fs::read(&path).unwrap());
        }
        assert_eq!(files[0], files[1]);
        assert_eq!(summaries[0], summaries[1]);
        let store = RowStore::open(&dir.join("t1.rows")).unwrap();
        let mem = synth_dataset(n as usize, 42).unwrap();
        let back = store.to_dataset().unwrap();
        assert_eq!(back.x(), mem.x());
        assert_eq!(back.y(), mem.y());
        assert_eq!(back.feature_names(), mem.feature_names());
        // The file's optimum recomputed from its inputs (different summation grouping).
        let m = mean_bayes_nll(&store).unwrap();
        assert!((m - summaries[0].mean_bayes_nll).abs() < 1e-12, "{m}");
        // A prefix of a larger file is the smaller file; another seed differs.
        let small = synth_dataset(1000, 42).unwrap();
        assert_eq!(small.x(), mem.x().subrows(0, 1000));
        assert_ne!(synth_dataset(1000, 43).unwrap().x(), small.x());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn chunk_c_uses_stream_c() {
        let data = synth_dataset(SYNTH_CHUNK_ROWS + 10, 5).unwrap();
        let mut buf = Vec::new();
        fill_chunk(&mut stream(5, 1), 10, &mut buf);
        for j in 0..SYNTH_INPUTS {
            assert_eq!(data.x()[(SYNTH_CHUNK_ROWS + 3, j)], buf[3 * 10 + j]);
        }
    }

    #[test]
    fn the_true_density_attains_the_stated_optimum() {
        // Mean NLL of y under N(f(x), σ²(x)) over 200000 rows vs the mean of
        // ½ ln(2πσ²) + ½: the per-row difference is ½(ε² − 1), sd 1/√2, so the means
        // differ by about 0.0016 (one sd); tolerance 0.008 (5 sd).
        let n = 200_000;
        let data = synth_dataset(n, 1).unwrap();
        let (mut nll, mut opt) = (0.0, 0.0);
        let mut x = [0.0; SYNTH_INPUTS];
        for i in 0..n {
            for (j, v) in x.iter_mut().enumerate() {
                *v = data.x()[(i, j)];
                assert!((-1.0..1.0).contains(v));
            }
            let (f, s) = synth_mean_and_std(&x);
            assert!(s > 0.05 && s < 0.3);
            let r = (data.y()[(i, 0)] - f) / s;
            nll += 0.5 * (2.0 * std::f64::consts::PI * s * s).ln() + 0.5 * r * r;
            opt += bayes_nll(&x);
        }
        let (nll, opt) = (nll / n as f64, opt / n as f64);
        assert!((nll - opt).abs() < 0.008, "{nll} vs {opt}");
        assert!((mean_bayes_nll(&data).unwrap() - opt).abs() < 1e-12);
    }

    #[test]
    fn one_noise_variance_attains_the_stated_floor_and_no_other_variance_does_better() {
        // Over 200000 rows, the predictor N(f(x), s²) with s² = mean σ²(x) scored on the
        // noisy targets: its mean NLL minus ½ ln(2π s²) is the mean of σ²ε²/(2 s²), whose
        // expectation is ½ and whose per-row sd is σ²/(√2 s²) ≤ 0.09/(√2 · 0.036) < 1.8, so
        // the mean's sd is below 0.004; tolerance 0.02 (5 sd). Another single variance
        // k·s² scores ½ ln k + ½ (1/k − 1) worse in expectation (0.036 at k = 0.7, 0.025 at
        // k = 1.4; the same rows, so the noise of the comparison is far smaller), and the
        // Bayes optimum lies below the floor by Jensen's gap.
        let n = 200_000;
        let data = synth_dataset(n, 2).unwrap();
        let floor = noise_floor(&data).unwrap();
        let var = floor.rmse * floor.rmse;
        let score = |s2: f64| {
            let mut nll = 0.0;
            let mut x = [0.0; SYNTH_INPUTS];
            for i in 0..n {
                for (j, v) in x.iter_mut().enumerate() {
                    *v = data.x()[(i, j)];
                }
                let (f, _) = synth_mean_and_std(&x);
                let r = data.y()[(i, 0)] - f;
                nll += 0.5 * (2.0 * std::f64::consts::PI * s2).ln() + 0.5 * r * r / s2;
            }
            nll / n as f64
        };
        let at_floor = score(var);
        assert!(
            (at_floor - floor.homoscedastic_nll).abs() < 0.02,
            "{at_floor} vs {}",
            floor.homoscedastic_nll
        );
        for k in [0.7, 1.4] {
            assert!(score(k * var) > at_floor + 0.02, "s² × {k}");
        }
        assert!(floor.bayes_nll < floor.homoscedastic_nll - 0.1, "{floor:?}");
        assert_eq!(floor.bayes_nll, mean_bayes_nll(&data).unwrap());
    }

    #[test]
    fn zero_rows_is_an_error() {
        let dir = tmp("zero");
        assert!(matches!(
            write_synth(&dir.join("z.rows"), 0, 0, |_| {}),
            Err(Error::Config(_))
        ));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The classification file holds the regression file's inputs and `1[y > 0]`; the
    /// Bayes classifier `Φ(f/σ)` scored on its labels has, within 4 standard errors, the
    /// error and log loss [`class_floor`] states (50 000 rows, seed 5).
    #[test]
    fn the_classification_variant_is_thresholded_y_and_attains_its_stated_floor() {
        let dir = tmp("class");
        let (reg, cls) = (dir.join("r.rows"), dir.join("c.rows"));
        let n = 50_000;
        write_synth(&reg, n, 5, |_| {}).unwrap();
        write_synth_task(&cls, n, 5, SynthTask::Classification, |_| {}).unwrap();
        let (r, c) = (RowStore::open(&reg).unwrap(), RowStore::open(&cls).unwrap());
        let (r, c) = (r.to_dataset().unwrap(), c.to_dataset().unwrap());
        assert_eq!(c.target_names(), Some(&["label".to_string()][..]));
        let (mut wrong, mut ll, mut ll2) = (0.0, 0.0, 0.0);
        let mut row = [0.0; SYNTH_INPUTS];
        for i in 0..n as usize {
            for (j, v) in row.iter_mut().enumerate() {
                *v = r.x()[(i, j)];
                assert_eq!(v.to_bits(), c.x()[(i, j)].to_bits());
            }
            let label = c.y()[(i, 0)];
            assert_eq!(label, f64::from(u8::from(r.y()[(i, 0)] > 0.0)));
            let (f, s) = synth_mean_and_std(&row);
            let (p1, p0) = dgp_core::special::norm_cdf_both(f / s);
            let p = if label == 1.0 { p1 } else { p0 };
            wrong += f64::from(u8::from((p1 > 0.5) != (label == 1.0)));
            let l = -p.max(f64::MIN_POSITIVE).ln();
            ll += l;
            ll2 += l * l;
        }
        let nf = n as f64;
        let floor = class_floor(&RowStore::open(&cls).unwrap()).unwrap();
        let err = wrong / nf;
        let se_err = (floor.error_rate * (1.0 - floor.error_rate) / nf).sqrt();
        assert!(
            (err - floor.error_rate).abs() < 4.0 * se_err,
            "error {err} against the stated {}",
            floor.error_rate
        );
        let mean = ll / nf;
        let se_ll = ((ll2 / nf - mean * mean) / nf).sqrt();
        assert!(
            (mean - floor.log_loss).abs() < 4.0 * se_ll,
            "log loss {mean} against the stated {} (s.e. {se_ll})",
            floor.log_loss
        );
        assert!(
            floor.error_rate > 0.005 && floor.error_rate < 0.1,
            "{floor:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
