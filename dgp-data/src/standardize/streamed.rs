//! Standardisation of rows that do not fit in memory.
//!
//! [`fit_standardizer`] computes, from any [`RowSource`], the statistics that
//! [`Standardizer::fit_with`] computes on the same rows held in memory — bit for bit: the
//! same per-column formulas ([`crate::ColumnStats`]) with every sum accumulated
//! in row order. It reads the rows in 2 passes (3 when a column's magnitude lies outside
//! [`crate::DIRECT_MAGNITUDE`]) with memory `O(chunk·(D+P))`:
//!
//! 1. per column: the first value, whether every value equals it, `max|x|` and `Σx`;
//! 2. `Σ(x−mean)²` for columns in the direct range, `Σ(x/max|x|)` for the others;
//! 3. (only if some column needs it) `Σ(x/max|x| − mean_s)²`.
//!
//! [`StandardizedRows`] presents a source in model units.

use std::cell::RefCell;

use crate::{ColumnStats, RowSource, StandardizeOptions, Standardizer, check_gather};
use dgp_core::{Error, Result};
use faer::{MatMut, MatRef};

use crate::chunks::for_each_chunk;

/// How one column's statistics are completed after pass 1.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Route {
    Constant,
    Direct,
    Rescaled,
}

/// Running sums of one column.
#[derive(Clone, Copy, Debug)]
struct Acc {
    first: f64,
    constant: bool,
    amax: f64,
    sum: f64,
    route: Route,
    mean: f64,
    sq: f64,
}

impl Acc {
    fn new() -> Self {
        Self {
            first: 0.0,
            constant: true,
            amax: 0.0,
            // The neutral element of `Iterator::sum` for floats: `-0.0 + v == v` for
            // every v, so the fold equals the in-memory `.sum()`.
            sum: -0.0,
            route: Route::Constant,
            mean: 0.0,
            sq: -0.0,
        }
    }
}

fn column<'a>(x: MatRef<'a, f64>, y: MatRef<'a, f64>, d: usize, j: usize) -> faer::ColRef<'a, f64> {
    if j < d { x.col(j) } else { y.col(j - d) }
}

/// Statistics `(mean, std, max|x|)` of every input column (`D`) and target column (`P`) of
/// `src`, equal bit for bit to the ones [`Standardizer::fit`] computes on the same rows in
/// memory, read in chunks of `chunk_rows` rows (see the module docs for the passes).
///
/// # Errors
/// Any error of [`RowSource::gather`]; [`Error::Config`] if `chunk_rows == 0`.
pub(crate) fn column_stats<S: RowSource + ?Sized>(
    src: &S,
    chunk_rows: usize,
) -> Result<(Vec<ColumnStats>, Vec<ColumnStats>)> {
    let (n, d, p) = (src.n(), src.input_dim(), src.output_dim());
    let mut acc = vec![Acc::new(); d + p];
    // Pass 1: first value, constancy, max|x| and the direct sum, in row order.
    for_each_chunk(src, chunk_rows, |start, x, y| {
        for (j, a) in acc.iter_mut().enumerate() {
            let c = column(x, y, d, j);
            if start == 0 {
                a.first = c[0];
            }
            for i in 0..c.nrows() {
                let v = c[i];
                a.constant &= v == a.first;
                a.amax = a.amax.max(v.abs());
                a.sum += v;
            }
        }
        Ok(())
    })?;
    let nf = n as f64;
    let (lo, hi) = crate::DIRECT_MAGNITUDE;
    let mut rescaled = false;
    for a in &mut acc {
        a.route = if a.constant {
            Route::Constant
        } else if (lo..=hi).contains(&a.amax) {
            a.mean = a.sum / nf;
            Route::Direct
        } else {
            rescaled = true;
            a.sum = -0.0;
            Route::Rescaled
        };
    }
    // Pass 2: squared deviations (direct columns), scaled sums (rescaled columns).
    if acc.iter().any(|a| a.route != Route::Constant) {
        for_each_chunk(src, chunk_rows, |_, x, y| {
            for (j, a) in acc.iter_mut().enumerate() {
                let c = column(x, y, d, j);
                match a.route {
                    Route::Constant => {}
                    Route::Direct => {
                        for i in 0..c.nrows() {
                            a.sq += (c[i] - a.mean).powi(2);
                        }
                    }
                    Route::Rescaled => {
                        for i in 0..c.nrows() {
                            a.sum += c[i] / a.amax;
                        }
                    }
                }
            }
            Ok(())
        })?;
    }
    // Pass 3: squared scaled deviations of rescaled columns.
    if rescaled {
        for a in &mut acc {
            if a.route == Route::Rescaled {
                a.mean = a.sum / nf;
            }
        }
        for_each_chunk(src, chunk_rows, |_, x, y| {
            for (j, a) in acc.iter_mut().enumerate() {
                if a.route == Route::Rescaled {
                    let c = column(x, y, d, j);
                    for i in 0..c.nrows() {
                        a.sq += (c[i] / a.amax - a.mean).powi(2);
                    }
                }
            }
            Ok(())
        })?;
    }
    let stats: Vec<ColumnStats> = acc
        .iter()
        .map(|a| match a.route {
            Route::Constant => (a.first, 0.0, a.first.abs()),
            Route::Direct => (a.mean, (a.sq / nf).sqrt(), a.amax),
            Route::Rescaled => (a.mean * a.amax, (a.sq / nf).sqrt() * a.amax, a.amax),
        })
        .collect();
    let ys = stats[d..].to_vec();
    let mut xs = stats;
    xs.truncate(d);
    Ok((xs, ys))
}

/// The standardiser [`Standardizer::fit_with`]`(rows, opts)` gives on the rows of `src`
/// held in memory, computed from `src` in chunks of `chunk_rows` rows (bounded memory;
/// bit-identical statistics: two passes per chunk, see the module docs).
///
/// # Errors
/// Any error of [`RowSource::gather`] or [`Standardizer::from_column_stats`];
/// [`Error::Config`] if `chunk_rows == 0`.
pub fn fit_standardizer<S: RowSource + ?Sized>(
    src: &S,
    opts: StandardizeOptions,
    chunk_rows: usize,
) -> Result<Standardizer> {
    let (xs, ys) = column_stats(src, chunk_rows)?;
    Standardizer::from_column_stats(&xs, &ys, opts)
}

thread_local! {
    /// Raw input rows of a [`StandardizedRows`] gather that drops features: grown once
    /// per thread, then reused (no allocation per call).
    static RAW_X: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

/// A [`RowSource`] that presents the rows of `S` in model units: inputs `kept_features` of
/// the standardiser, each value exactly the number [`Standardizer::transform`] gives for
/// it (input columns D' = the number of kept features), targets standardised likewise.
///
/// A gather that drops features reads the raw inputs into a per-thread buffer that grows
/// to the largest batch seen and is then reused.
#[derive(Debug)]
pub struct StandardizedRows<S: RowSource> {
    src: S,
    st: Standardizer,
    identity_columns: bool,
}

impl<S: RowSource> StandardizedRows<S> {
    /// Wraps `src` with `st` (fitted on this source or another with the same columns).
    ///
    /// # Errors
    /// [`Error::Shape`] if the standardiser's input or target count differs from the
    /// source's; [`Error::Config`] if a scale cannot standardise
    /// ([`Standardizer::check_scales`]).
    pub fn new(src: S, st: Standardizer) -> Result<Self> {
        if st.input_dim != src.input_dim() || st.y_mean.len() != src.output_dim() {
            return Err(Error::shape(
                "StandardizedRows::new (inputs, targets)",
                format!("({}, {})", st.input_dim, st.y_mean.len()),
                format!("({}, {})", src.input_dim(), src.output_dim()),
            ));
        }
        st.check_scales()?;
        let identity_columns = st.kept_features.iter().enumerate().all(|(k, &j)| k == j)
            && st.kept_features.len() == st.input_dim;
        Ok(Self {
            src,
            st,
            identity_columns,
        })
    }

    /// The standardiser.
    pub fn standardizer(&self) -> &Standardizer {
        &self.st
    }

    /// The wrapped source.
    pub fn source(&self) -> &S {
        &self.src
    }

    /// The wrapped source, unwrapped.
    pub fn into_source(self) -> S {
        self.src
    }

    fn transform_kept(&self, raw: MatRef<'_, f64>, mut x: MatMut<'_, f64>) -> Result<()> {
        for (k, &j) in self.st.kept_features.iter().enumerate() {
            for r in 0..x.nrows() {
                x[(r, k)] = self.st.transform_x_value(k, raw[(r, j)])?;
            }
        }
        Ok(())
    }
}

impl<S: RowSource> RowSource for StandardizedRows<S> {
    fn n(&self) -> usize {
        self.src.n()
    }

    fn input_dim(&self) -> usize {
        self.st.kept_features.len()
    }

    fn output_dim(&self) -> usize {
        self.src.output_dim()
    }

    fn gather(&self, idx: &[usize], mut x: MatMut<'_, f64>, mut y: MatMut<'_, f64>) -> Result<()> {
        check_gather(self.n(), (self.input_dim(), self.output_dim()), idx, &x, &y)?;
        if self.identity_columns {
            self.src.gather(idx, x.as_mut(), y.as_mut())?;
            for k in 0..x.ncols() {
                for r in 0..x.nrows() {
                    x[(r, k)] = self.st.transform_x_value(k, x[(r, k)])?;
                }
            }
        } else {
            // Taken out of the cell (and put back), so a nested gather cannot find it borrowed.
            let mut buf = RAW_X.with(|c| std::mem::take(&mut *c.borrow_mut()));
            let need = idx.len() * self.st.input_dim;
            if buf.len() < need {
                buf.resize(need, 0.0);
            }
            let res = {
                let mut raw = MatMut::from_column_major_slice_mut(
                    &mut buf[..need],
                    idx.len(),
                    self.st.input_dim,
                );
                self.src
                    .gather(idx, raw.as_mut(), y.as_mut())
                    .and_then(|()| self.transform_kept(raw.as_ref(), x.as_mut()))
            };
            RAW_X.with(|c| *c.borrow_mut() = buf);
            res?;
        }
        for j in 0..y.ncols() {
            for r in 0..y.nrows() {
                y[(r, j)] = self.st.transform_y_value(j, y[(r, j)])?;
            }
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("standardised {}", self.src.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;
    use dgp_core::rng::seeded;
    use faer::Mat;
    use rand::RngExt;

    /// Columns of very different kinds: ordinary, a large offset with a small spread,
    /// exactly constant, rounding-level variation, 1e300 and 1e-300 magnitudes, tiny spread.
    fn awkward(n: usize, seed: u64) -> Dataset {
        let mut r = seeded(seed);
        let x = Mat::from_fn(n, 7, |i, j| {
            let u: f64 = r.random();
            match j {
                0 => u * 10.0 - 3.0,
                1 => 1e6 + u * 1e-3,
                2 => 42.5,
                3 => {
                    if i % 3 == 0 {
                        1000.0f64.next_up()
                    } else {
                        1000.0
                    }
                }
                4 => (u - 0.5) * 1e300,
                5 => u * 1e-300,
                _ => 7.0 + u * 1e-4,
            }
        });
        let y = Mat::from_fn(n, 2, |_, j| {
            let u: f64 = r.random();
            if j == 0 { 1e6 + 3.0 * u } else { -2.0 + u }
        });
        Dataset::new(x, y).unwrap()
    }

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn streamed_statistics_equal_the_in_memory_fit_bit_for_bit() {
        for (n, chunk, seed) in [(1000, 64, 1), (1000, 1000, 2), (997, 1, 3), (1, 5, 4)] {
            let data = awkward(n, seed);
            for opts in [
                StandardizeOptions::default(),
                StandardizeOptions::drop_near_constant(),
            ] {
                let mem = Standardizer::fit_with(&data, opts);
                let st = fit_standardizer(&data, opts, chunk);
                // One row: every feature is constant, so dropping them all is an error
                // in both paths.
                let (mem, st) = match (mem, st) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(Error::Empty(_)), Err(Error::Empty(_))) if n == 1 => continue,
                    (a, b) => panic!("n {n}: in memory {a:?}, streamed {b:?}"),
                };
                assert_eq!(st.kept_features, mem.kept_features, "n {n}");
                assert_eq!(bits(&st.x_mean), bits(&mem.x_mean), "n {n} chunk {chunk}");
                assert_eq!(bits(&st.x_std), bits(&mem.x_std), "n {n} chunk {chunk}");
                assert_eq!(bits(&st.y_mean), bits(&mem.y_mean), "n {n} chunk {chunk}");
                assert_eq!(bits(&st.y_std), bits(&mem.y_std), "n {n} chunk {chunk}");
            }
        }
    }

    #[test]
    fn standardized_rows_equal_transform_including_dropped_features() {
        let data = awkward(500, 9);
        for opts in [
            StandardizeOptions::default(),
            StandardizeOptions::drop_near_constant(),
        ] {
            let st = fit_standardizer(&data, opts, 77).unwrap();
            let want = st.transform(&data).unwrap();
            let rows = StandardizedRows::new(data.clone(), st).unwrap();
            assert_eq!(rows.input_dim(), want.input_dim());
            let idx = [499, 0, 3, 3, 250];
            let mut x = Mat::zeros(idx.len(), rows.input_dim());
            let mut y = Mat::zeros(idx.len(), 2);
            rows.gather(&idx, x.as_mut(), y.as_mut()).unwrap();
            for (r, &i) in idx.iter().enumerate() {
                for k in 0..x.ncols() {
                    assert_eq!(x[(r, k)].to_bits(), want.x()[(i, k)].to_bits());
                }
                for j in 0..2 {
                    assert_eq!(y[(r, j)].to_bits(), want.y()[(i, j)].to_bits());
                }
            }
        }
    }

    #[test]
    fn statistics_from_a_row_store_file_equal_the_in_memory_fit() {
        let dir = std::env::temp_dir().join(format!("dgp-io-std-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.rows");
        let data = awkward(3001, 11);
        crate::rowstore::write_dataset(&path, &data, &[]).unwrap();
        let store = crate::rowstore::RowStore::open(&path).unwrap();
        let mem = Standardizer::fit(&data);
        assert_eq!(
            fit_standardizer(&store, StandardizeOptions::default(), 500).unwrap(),
            mem
        );
        let rows = StandardizedRows::new(store, mem.clone()).unwrap();
        let want = mem.transform(&data).unwrap();
        let idx: Vec<usize> = (0..3001).rev().collect();
        let mut x = Mat::zeros(3001, 7);
        let mut y = Mat::zeros(3001, 2);
        rows.gather(&idx, x.as_mut(), y.as_mut()).unwrap();
        for (r, &i) in idx.iter().enumerate() {
            for k in 0..7 {
                assert_eq!(x[(r, k)].to_bits(), want.x()[(i, k)].to_bits());
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn mismatched_standardizer_is_a_shape_error() {
        let data = awkward(20, 1);
        let other = Dataset::new(
            Mat::from_fn(20, 2, |i, j| (i + j) as f64),
            Mat::zeros(20, 2),
        )
        .unwrap();
        let st = Standardizer::fit(&other);
        assert!(matches!(
            StandardizedRows::new(data, st),
            Err(Error::Shape { .. })
        ));
    }
}
