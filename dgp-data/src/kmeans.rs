//! k-means++ seeding and Lloyd iterations, used to initialise inducing inputs.

use faer::{Mat, MatRef};
use rand_distr::{Distribution, StandardNormal};

use crate::permute::{uniform_below, uniform01};
use dgp_core::rng::Rng;
use dgp_core::{Error, Result, check_finite};

/// Relative scale of the jitter added to duplicated centres: a jittered copy of a point is
/// `x + KMEANS_JITTER · s_d · ε_d`, ε ~ N(0, I), with `s_d` the population std of column d
/// (or 1 for a constant column). Distinct centres keep kernel matrices over inducing inputs
/// away from exact singularity.
pub const KMEANS_JITTER: f64 = 1e-2;

/// Row-major copy of the data plus per-column jitter scales.
struct Points {
    n: usize,
    d: usize,
    v: Vec<f64>,
    scale: Vec<f64>,
}

impl Points {
    fn new(x: MatRef<'_, f64>) -> Self {
        let (n, d) = (x.nrows(), x.ncols());
        let mut v = vec![0.0; n * d];
        for j in 0..d {
            for i in 0..n {
                v[i * d + j] = x[(i, j)];
            }
        }
        let scale = (0..d)
            .map(|j| {
                let m = (0..n).map(|i| v[i * d + j]).sum::<f64>() / n as f64;
                let s = ((0..n).map(|i| (v[i * d + j] - m).powi(2)).sum::<f64>() / n as f64).sqrt();
                if s > 1e-12 { s } else { 1.0 }
            })
            .collect();
        Self { n, d, v, scale }
    }

    fn row(&self, i: usize) -> &[f64] {
        &self.v[i * self.d..(i + 1) * self.d]
    }

    fn jittered(&self, i: usize, rng: &mut Rng, out: &mut [f64]) {
        for (j, o) in out.iter_mut().enumerate() {
            let e: f64 = StandardNormal.sample(rng);
            *o = self.v[i * self.d + j] + KMEANS_JITTER * self.scale[j] * e;
        }
    }
}

fn sqdist(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

fn validate(x: MatRef<'_, f64>, k: usize) -> Result<()> {
    if x.nrows() == 0 || x.ncols() == 0 {
        return Err(Error::Empty(format!(
            "k-means on a {}×{} matrix",
            x.nrows(),
            x.ncols()
        )));
    }
    if k == 0 {
        return Err(Error::config("k", "k-means with k = 0 centres"));
    }
    check_finite("k-means inputs", x)
}

fn to_mat(c: &[f64], k: usize, d: usize) -> Mat<f64> {
    Mat::from_fn(k, d, |i, j| c[i * d + j])
}

/// Centres for `k ≥ N`: the N points in order, then `k − N` jittered copies of points
/// `0, 1, …` (cycling).
fn all_points_padded(p: &Points, k: usize, rng: &mut Rng) -> Vec<f64> {
    let mut c = vec![0.0; k * p.d];
    c[..p.n * p.d].copy_from_slice(&p.v);
    for r in p.n..k {
        p.jittered((r - p.n) % p.n, rng, &mut c[r * p.d..(r + 1) * p.d]);
    }
    c
}

/// k-means++ seeding (Arthur & Vassilvitskii 2007), row-major k×D.
fn plus_plus(p: &Points, k: usize, rng: &mut Rng) -> Vec<f64> {
    let d = p.d;
    let mut c = vec![0.0; k * d];
    let first = uniform_below(rng, p.n);
    c[..d].copy_from_slice(p.row(first));
    let mut dist: Vec<f64> = (0..p.n).map(|i| sqdist(p.row(i), &c[..d])).collect();
    let mut chosen = vec![first];
    for r in 1..k {
        let total: f64 = dist.iter().sum();
        if total > 0.0 {
            // Sample i with probability dist[i] / total.
            let target = uniform01(rng) * total;
            let mut acc = 0.0;
            let mut pick = None;
            for (i, &di) in dist.iter().enumerate() {
                acc += di;
                if di > 0.0 && acc > target {
                    pick = Some(i);
                    break;
                }
            }
            // Rounding can leave `target` just above the final sum: take the last
            // point with positive weight.
            let i = pick.unwrap_or_else(|| dist.iter().rposition(|&di| di > 0.0).unwrap_or(0));
            c[r * d..(r + 1) * d].copy_from_slice(p.row(i));
            chosen.push(i);
        } else {
            // Every point coincides with a centre (fewer distinct points than k):
            // a jittered copy of a random chosen centre.
            let src = chosen[uniform_below(rng, chosen.len())];
            p.jittered(src, rng, &mut c[r * d..(r + 1) * d]);
            chosen.push(src);
        }
        let cr = &c[r * d..(r + 1) * d];
        for (i, di) in dist.iter_mut().enumerate() {
            let nd = sqdist(p.row(i), cr);
            if nd < *di {
                *di = nd;
            }
        }
    }
    c
}

/// k-means++ seeding only: k×D initial centres, deterministic for a given `rng` state.
///
/// The first centre is a uniformly chosen point; each next one is a point drawn with
/// probability proportional to its squared distance to the nearest chosen centre. If all
/// points already coincide with chosen centres (data with fewer than k distinct rows), the
/// remaining centres are jittered copies of chosen centres (see [`KMEANS_JITTER`]). For
/// `k ≥ N` the result is the N points in order, padded with `k − N` jittered copies of
/// points 0, 1, … (cycling). O(N·k·D) time, O(N·D + k·D) memory.
///
/// # Errors
/// [`Error::Empty`] for an empty `x`; [`Error::Config`] for `k = 0`; [`Error::NonFinite`].
pub fn kmeans_plus_plus(x: MatRef<'_, f64>, k: usize, rng: &mut Rng) -> Result<Mat<f64>> {
    validate(x, k)?;
    let p = Points::new(x);
    let c = if k >= p.n {
        all_points_padded(&p, k, rng)
    } else {
        plus_plus(&p, k, rng)
    };
    Ok(to_mat(&c, k, p.d))
}

/// k-means: [`kmeans_plus_plus`] seeding followed by at most `iters` Lloyd iterations
/// (assign each point to its nearest centre, ties to the lower index; move each centre to
/// the mean of its points). Stops early when no assignment changes. A centre that loses all
/// its points is moved to the point farthest from its own centre (each such point used
/// once), so no centre is wasted. Returns the k×D centres.
///
/// For `k ≥ N` no iterations are run: the result is the points padded with jittered copies
/// (see [`kmeans_plus_plus`]). Deterministic for a given `rng` state; O(N·k·D) per
/// iteration, never an N×N matrix.
///
/// # Errors
/// [`Error::Empty`] for an empty `x`; [`Error::Config`] for `k = 0`; [`Error::NonFinite`].
pub fn kmeans(x: MatRef<'_, f64>, k: usize, iters: usize, rng: &mut Rng) -> Result<Mat<f64>> {
    validate(x, k)?;
    let p = Points::new(x);
    if k >= p.n {
        return Ok(to_mat(&all_points_padded(&p, k, rng), k, p.d));
    }
    let d = p.d;
    let mut c = plus_plus(&p, k, rng);
    let mut assign = vec![usize::MAX; p.n];
    let mut best = vec![0.0; p.n];
    let mut sums = vec![0.0; k * d];
    let mut counts = vec![0usize; k];
    for _ in 0..iters {
        let mut changed = false;
        for i in 0..p.n {
            let xi = p.row(i);
            let (mut bj, mut bd) = (0, f64::INFINITY);
            for j in 0..k {
                let dd = sqdist(xi, &c[j * d..(j + 1) * d]);
                if dd < bd {
                    bd = dd;
                    bj = j;
                }
            }
            if assign[i] != bj {
                changed = true;
                assign[i] = bj;
            }
            best[i] = bd;
        }
        if !changed {
            break;
        }
        sums.iter_mut().for_each(|v| *v = 0.0);
        counts.iter_mut().for_each(|v| *v = 0);
        for (i, &j) in assign.iter().enumerate() {
            counts[j] += 1;
            for (s, &v) in sums[j * d..(j + 1) * d].iter_mut().zip(p.row(i)) {
                *s += v;
            }
        }
        for j in 0..k {
            if counts[j] > 0 {
                let inv = 1.0 / counts[j] as f64;
                for t in 0..d {
                    c[j * d + t] = sums[j * d + t] * inv;
                }
            } else {
                // Empty cluster: relocate to the farthest point not yet used.
                let far = (0..p.n)
                    .filter(|&i| best[i] > 0.0)
                    .max_by(|&a, &b| best[a].total_cmp(&best[b]).then(b.cmp(&a)));
                if let Some(i) = far {
                    c[j * d..(j + 1) * d].copy_from_slice(p.row(i));
                    best[i] = 0.0;
                    assign[i] = usize::MAX;
                }
            }
        }
    }
    Ok(to_mat(&c, k, d))
}
