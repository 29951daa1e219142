//! The smart initialisation of the thesis (Vafa 2016, §5.1.3), one draw per restart.
//!
//! * Layer 1: pseudo inputs X̄ = k-means centres of X (the core's k-means++ and Lloyd
//!   iterations); lengthscale = the median distance between pairs of inputs (Houlsby et
//!   al. 2012, as cited there).
//! * Layers 2…L: pseudo inputs ~ N(0, 1); lengthscale = `hidden_lengthscale_factor` ×
//!   the variance of the training targets (§5.1.3: "about 10 times the variance of our
//!   data"); pseudo outputs = pseudo inputs (the identity map: unit d copies input
//!   column d mod D⁽ˡ⁻¹⁾).
//! * The thesis does not say how layer 1's pseudo outputs start **(ours)**: a hidden
//!   layer 1 copies the projection of X̄ on the top principal directions of X (the core's
//!   `pca_projection`: the identity when D⁽⁰⁾ = D⁽¹⁾), so every layer starts near the
//!   identity; a one-layer model starts with ȳ = the target of the training point nearest
//!   to each pseudo input.
//! * Signal and noise variances: the configuration's (1 and 0.01, ours).

use super::config::DgpsConfig;
use super::unit::{GpUnit, UnitInit};
use dgp_core::Result;
use dgp_core::rng::{Rng, standard_normal, stream};
use dgp_data::{Dataset, kmeans};
use dgp_traits::mean::pca_projection;
use dgp_traits::params::ParamStore;
use faer::{Mat, MatRef};

/// At most this many (evenly strided) rows enter the median pairwise distance.
const MEDIAN_ROWS: usize = 500;

/// Median Euclidean distance between distinct pairs of rows of `x` (rows strided down to
/// at most `MEDIAN_ROWS`); 1 when there are fewer than two rows or the median is 0.
pub fn median_pairwise_distance(x: MatRef<'_, f64>) -> f64 {
    let n = x.nrows();
    let take = n.min(MEDIAN_ROWS);
    if take < 2 {
        return 1.0;
    }
    let rows: Vec<usize> = (0..take).map(|i| i * n / take).collect();
    let mut d = Vec::with_capacity(take * (take - 1) / 2);
    for (a, &i) in rows.iter().enumerate() {
        for &j in &rows[a + 1..] {
            let s: f64 = (0..x.ncols())
                .map(|q| (x[(i, q)] - x[(j, q)]).powi(2))
                .sum();
            d.push(s.sqrt());
        }
    }
    d.sort_by(f64::total_cmp);
    let mid = d.len() / 2;
    let med = if d.len() % 2 == 1 {
        d[mid]
    } else {
        0.5 * (d[mid - 1] + d[mid])
    };
    if med > 0.0 && med.is_finite() {
        med
    } else {
        1.0
    }
}

/// Mean over the columns of the (population) variance of `y`; 1 when it is 0.
fn mean_variance(y: MatRef<'_, f64>) -> f64 {
    let n = y.nrows() as f64;
    let mut total = 0.0;
    for j in 0..y.ncols() {
        let mean: f64 = (0..y.nrows()).map(|i| y[(i, j)]).sum::<f64>() / n;
        total += (0..y.nrows())
            .map(|i| (y[(i, j)] - mean).powi(2))
            .sum::<f64>()
            / n;
    }
    let v = total / y.ncols() as f64;
    if v > 0.0 && v.is_finite() { v } else { 1.0 }
}

/// Column `p` of the targets at the training point nearest to each row of `centres`.
fn nearest_targets(centres: MatRef<'_, f64>, data: &Dataset, p: usize) -> Mat<f64> {
    let (x, y) = (data.x(), data.y());
    Mat::from_fn(centres.nrows(), 1, |m, _| {
        let mut best = (0, f64::INFINITY);
        for i in 0..x.nrows() {
            let d: f64 = (0..x.ncols())
                .map(|q| (x[(i, q)] - centres[(m, q)]).powi(2))
                .sum();
            if d < best.1 {
                best = (i, d);
            }
        }
        y[(best.0, p)]
    })
}

/// Initial values of the units of one layer (see the module docs).
fn layer_inits(
    config: &DgpsConfig,
    data: &Dataset,
    widths: &[usize],
    l: usize,
    rng: &mut Rng,
) -> Result<Vec<UnitInit>> {
    let (d_in, d_out, last) = (widths[l], widths[l + 1], l + 2 == widths.len());
    let m = config.num_inducing;
    let unit = |xbar: Mat<f64>, ybar: Mat<f64>, lengthscale: f64| UnitInit {
        xbar,
        ybar,
        lengthscale,
        variance: config.init_signal_variance,
        noise: config.init_noise_variance,
    };
    if l == 0 {
        let xbar = kmeans(data.x(), m, config.kmeans_iters, rng)?;
        let ls = median_pairwise_distance(data.x());
        if last {
            return Ok((0..d_out)
                .map(|p| unit(xbar.clone(), nearest_targets(xbar.as_ref(), data, p), ls))
                .collect());
        }
        let w = pca_projection(data.x(), d_out)?;
        let proj = &xbar * &w;
        return Ok((0..d_out)
            .map(|d| unit(xbar.clone(), proj.subcols(d, 1).to_owned(), ls))
            .collect());
    }
    let ls = config.hidden_lengthscale_factor * mean_variance(data.y());
    Ok((0..d_out)
        .map(|d| {
            let xbar = standard_normal(rng, m, d_in);
            let ybar = xbar.subcols(d % d_in, 1).to_owned();
            unit(xbar, ybar, ls)
        })
        .collect())
}

/// The parameter store and units (per layer) of restart `restart`: the smart
/// initialisation drawn from stream `restart` of `config.init_seed`.
///
/// # Errors
/// k-means or PCA failures on degenerate data; an invalid unit (see [`GpUnit::new`]).
pub fn smart_init(
    config: &DgpsConfig,
    data: &Dataset,
    restart: u64,
) -> Result<(ParamStore, Vec<Vec<GpUnit>>)> {
    let widths = config.widths(data.input_dim(), data.output_dim());
    let mut rng = stream(config.init_seed, restart);
    let mut store = ParamStore::new();
    let mut layers = Vec::with_capacity(config.layers);
    for l in 0..config.layers {
        let inits = layer_inits(config, data, &widths, l, &mut rng)?;
        let units = inits
            .into_iter()
            .enumerate()
            .map(|(d, init)| {
                let name = format!("layer{}.unit{}", l + 1, d + 1);
                GpUnit::new(&mut store, &name, widths[l], config.ard, init)
            })
            .collect::<Result<Vec<_>>>()?;
        layers.push(units);
    }
    Ok((store, layers))
}
