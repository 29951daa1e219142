//! Chunked parallel prediction into a [`Predictive`]: test points are cut into chunks of
//! consecutive rows that run in parallel, chunk k drawing any noise from stream k of the
//! prediction seed (so the result does not depend on the number of threads); the chunks'
//! per-output component moments are assembled in order, and the likelihood finishes the
//! job (Gaussian: the noise variance is added; probit: class probabilities attached).

use crate::likelihoods::Likelihood;
use crate::predictive::Predictive;
use crate::tape::Tape;
use dgp_core::rng::{Rng, stream};
use dgp_core::{Error, Result};
use faer::{Mat, MatRef};
use rayon::prelude::*;

/// Per output, the n×R matrices of component means and variances of n points.
#[derive(Clone, Debug)]
pub struct ChunkMoments {
    /// Means, one n×R matrix per output.
    pub means: Vec<Mat<f64>>,
    /// Variances, one n×R matrix per output.
    pub vars: Vec<Mat<f64>>,
}

impl ChunkMoments {
    /// Splits replicate-major stacked moments (`mean`, `var`: (R·n)×P, row `r·n + i`) into
    /// per-output n×R matrices; `var_map` is applied to every variance (e.g. a clamp at 0).
    pub fn from_stacked(
        mean: MatRef<'_, f64>,
        var: MatRef<'_, f64>,
        points: usize,
        reps: usize,
        var_map: impl Fn(f64) -> f64,
    ) -> Self {
        let p = mean.ncols();
        let means = (0..p)
            .map(|k| Mat::from_fn(points, reps, |i, s| mean[(s * points + i, k)]))
            .collect();
        let vars = (0..p)
            .map(|k| Mat::from_fn(points, reps, |i, s| var_map(var[(s * points + i, k)])))
            .collect();
        ChunkMoments { means, vars }
    }

    /// Number of points.
    fn rows(&self) -> usize {
        self.means.first().map_or(0, |m| m.nrows())
    }
}

/// Runs `chunk_fn(tape, start, len, rng)` on the chunks `start..start + len` (at most
/// `chunk` rows each) of `n` points in parallel — chunk k with `stream(seed, k)`, each
/// worker reusing one tape — and stacks the chunks' moments in point order.
///
/// # Errors
/// The first chunk's error; [`Error::Empty`] for `n == 0`.
pub fn predict_chunked<F>(n: usize, chunk: usize, seed: u64, chunk_fn: F) -> Result<ChunkMoments>
where
    F: Fn(&mut Tape, usize, usize, &mut Rng) -> Result<ChunkMoments> + Sync + Send,
{
    if n == 0 {
        return Err(Error::Empty("prediction: no test points".into()));
    }
    let chunk = chunk.max(1);
    let starts: Vec<usize> = (0..n).step_by(chunk).collect();
    let parts: Vec<Result<ChunkMoments>> = starts
        .par_iter()
        .enumerate()
        .map_init(Tape::new, |tape, (k, &s)| {
            let mut rng = stream(seed, k as u64);
            chunk_fn(tape, s, chunk.min(n - s), &mut rng)
        })
        .collect();
    let parts = parts.into_iter().collect::<Result<Vec<_>>>()?;
    let reps = parts[0].means.first().map_or(0, |m| m.ncols());
    let p = parts[0].means.len();
    let mut means = vec![Mat::zeros(n, reps); p];
    let mut vars = vec![Mat::zeros(n, reps); p];
    let mut row = 0;
    for part in &parts {
        let rows = part.rows();
        for k in 0..p {
            means[k]
                .subrows_mut(row, rows)
                .copy_from(part.means[k].as_ref());
            vars[k]
                .subrows_mut(row, rows)
                .copy_from(part.vars[k].as_ref());
        }
        row += rows;
    }
    Ok(ChunkMoments { means, vars })
}

/// The predictive mixture with component `weights` from latent moments: for the Gaussian
/// likelihood `noise` (one variance per output, or one for all) is added to every
/// variance; for the probit likelihood the latent mixture gets the class probabilities
/// `Σ_k w_k Φ(μ_k/√(1 + σ²_k))` (squashed); for the other classification likelihoods
/// (logit, robust-max, softmax; means and variances of the latent functions, one output
/// per latent function) the class probabilities `Σ_k w_k p_k(y = c)` of
/// [`Likelihood::class_probs_mixture`].
///
/// # Errors
/// [`Error::Config`] for a Gaussian likelihood without `noise`; the errors of
/// [`Predictive::new`].
pub fn finish_predictive(
    likelihood: &Likelihood,
    weights: Vec<f64>,
    moments: ChunkMoments,
    noise: Option<&[f64]>,
) -> Result<Predictive> {
    let ChunkMoments { means, mut vars } = moments;
    match likelihood {
        Likelihood::Gaussian(_) => {
            let noise = noise.filter(|v| !v.is_empty()).ok_or_else(|| {
                Error::config("noise", "Gaussian predictive without a noise variance")
            })?;
            for (d, v) in vars.iter_mut().enumerate() {
                let s2 = noise[d.min(noise.len() - 1)];
                for j in 0..v.ncols() {
                    for i in 0..v.nrows() {
                        v[(i, j)] += s2;
                    }
                }
            }
            Predictive::new(weights, means, vars)
        }
        Likelihood::BernoulliProbit(p) => {
            Predictive::new(weights, means, vars)?.with_probit_class_probs(p.squash)
        }
        Likelihood::BernoulliLogit(_) | Likelihood::RobustMax(_) | Likelihood::Softmax(_) => {
            let probs = likelihood.class_probs_mixture(&weights, &means, &vars)?;
            Predictive::new(weights, means, vars)?.with_class_probs(probs)
        }
    }
}
