//! Standardisation of inputs and targets with training-split statistics.

use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use dgp_core::{Error, Result};

mod streamed;
pub use streamed::{StandardizedRows, fit_standardizer};

/// Former absolute constant-column threshold, kept for callers that name it. Columns are
/// now judged by the RELATIVE rule of [`CONSTANT_REL_STD`] (an absolute threshold dropped a
/// feature measured in units of 1e-14 and could not see a constant column at 1e300).
pub const CONSTANT_STD: f64 = 1e-12;

/// A column whose population standard deviation is ≤ this fraction of its largest
/// magnitude `max|x|` is treated as constant (variation at the level of rounding noise):
/// an exactly constant column gets scale 1 and standardises to exactly 0; a column that
/// varies only in its last bits gets scale `max|x|`, so its standardised values stay
/// ≤ 1e-12 whatever the units. Naval has two exactly constant input columns.
pub const CONSTANT_REL_STD: f64 = 1e-12;

/// Columns whose largest magnitude lies in this range use the direct formulas
/// `Σx/n`, `Σ(x−mean)²/n` (the results of every earlier run are bit-identical); outside it
/// the column is first divided by `max|x|`, so squaring neither overflows (data at 1e300)
/// nor underflows (data at 1e-300).
pub const DIRECT_MAGNITUDE: (f64, f64) = (1e-100, 1e100);

/// Largest target scale whose square (the predictive variance in original units) is a
/// normal f64: `sqrt(f64::MAX)` ≈ 1.34e154, and the smallest, `sqrt(f64::MIN_POSITIVE)` ≈
/// 1.49e-154 ([`Standardizer::check_target_variance_representable`]).
pub const TARGET_SCALE_RANGE: (f64, f64) = (1.49e-154, 1.34e154);

/// Threshold of the optional feature dropping: Structured_DGP's `prepare_dataset_extrapolate`
/// keeps only features with train std > 1e-3.
pub const DROP_FEATURE_STD: f64 = 1e-3;

/// Options of [`Standardizer::fit_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StandardizeOptions {
    /// If `Some(t)`, input features whose train std is ≤ `t` are dropped by
    /// [`Standardizer::transform`] (the Structured reference uses `t` = 1e-3,
    /// [`DROP_FEATURE_STD`]). `None` (the default) keeps every feature.
    pub drop_features_below: Option<f64>,
    /// What happens to the target columns: standardised (the default, regression) or kept
    /// as they are (classification: class labels are never shifted or scaled).
    #[serde(default)]
    pub targets: TargetScaling,
}

/// How a [`Standardizer`] treats the target columns ([`StandardizeOptions::targets`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetScaling {
    /// `(y − mean)/std` with the training rows' statistics (regression).
    #[default]
    Standardize,
    /// Targets untouched: mean 0 and scale 1 for every target column, so
    /// [`Standardizer::transform_y_value`] returns `(v − 0)/1 = v` exactly (class labels).
    Keep,
}

impl StandardizeOptions {
    /// Drop near-constant features as the Structured reference does (std ≤ 1e-3).
    pub fn drop_near_constant() -> Self {
        Self {
            drop_features_below: Some(DROP_FEATURE_STD),
            ..Self::default()
        }
    }

    /// These options with the targets kept as they are ([`TargetScaling::Keep`]): the
    /// inputs-only standardisation of classification, where labels are class indices.
    pub fn keep_targets(self) -> Self {
        Self {
            targets: TargetScaling::Keep,
            ..self
        }
    }
}

/// Per-column affine maps `(v − mean)/std` fitted on a training split.
///
/// Statistics are the mean and the population standard deviation (ddof 0, as NumPy's
/// default) of the training rows only; test data are transformed with the same numbers
/// (protocol §2), computed after dividing by `max|x|` when the column's magnitude is outside
/// [`DIRECT_MAGNITUDE`] (so data multiplied by 1e±300 standardise to the same numbers up
/// to rounding). An exactly constant column gets its value as mean and std 1, so it
/// standardises to exactly 0; a column with std ≤ [`CONSTANT_REL_STD`]·max|x| gets std
/// max|x|. Standardised predictive mixtures are mapped back with
/// `dgp_traits::predictive::Predictive::unstandardize``(&s.y_mean, &s.y_std)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Standardizer {
    /// Number of input columns of the data the standardiser was fitted on.
    pub input_dim: usize,
    /// Original column indices of the inputs that are kept (all, unless dropping was asked for).
    pub kept_features: Vec<usize>,
    /// Means of the kept input columns.
    pub x_mean: Vec<f64>,
    /// Scales of the kept input columns (population std, or 1 for constant columns).
    pub x_std: Vec<f64>,
    /// Means of the target columns.
    pub y_mean: Vec<f64>,
    /// Scales of the target columns (population std, or 1 for constant columns).
    pub y_std: Vec<f64>,
}

/// Statistics of one column as [`Standardizer::fit`] computes them: `(mean, population
/// std, max|x|)`.
///
/// * exactly constant column (every value `==` the first): `(first, 0, |first|)`;
/// * `max|x|` in [`DIRECT_MAGNITUDE`]: `mean = Σx/n`, `std = sqrt(Σ(x−mean)²/n)`, each sum
///   accumulated in row order;
/// * otherwise, with `s = x/max|x|`: `mean = (Σs/n)·max|x|`,
///   `std = sqrt(Σ(s − Σs/n)²/n)·max|x|`, sums in row order.
pub type ColumnStats = (f64, f64, f64);

/// Mean, population std and largest magnitude of column `j`; exact for constant columns.
fn column_stats(m: MatRef<'_, f64>, j: usize) -> ColumnStats {
    let c = m.col(j);
    let n = c.nrows();
    let first = c[0];
    if (1..n).all(|i| c[i] == first) {
        return (first, 0.0, first.abs());
    }
    let amax = (0..n).map(|i| c[i].abs()).fold(0.0, f64::max);
    if (DIRECT_MAGNITUDE.0..=DIRECT_MAGNITUDE.1).contains(&amax) {
        let mean = (0..n).map(|i| c[i]).sum::<f64>() / n as f64;
        let var = (0..n).map(|i| (c[i] - mean).powi(2)).sum::<f64>() / n as f64;
        return (mean, var.sqrt(), amax);
    }
    // Rescaled: every |c[i] / amax| ≤ 1, so the sums neither overflow nor underflow, and
    // mean and std (both ≤ amax in magnitude) are finite.
    let mean_s = (0..n).map(|i| c[i] / amax).sum::<f64>() / n as f64;
    let var_s = (0..n).map(|i| (c[i] / amax - mean_s).powi(2)).sum::<f64>() / n as f64;
    (mean_s * amax, var_s.sqrt() * amax, amax)
}

/// The scale of a column: 1 for an exactly constant column, `max|x|` for one whose std is
/// at the rounding level of its values ([`CONSTANT_REL_STD`]), its std otherwise.
fn guard(std: f64, amax: f64) -> f64 {
    if std == 0.0 || amax == 0.0 {
        1.0
    } else if std <= CONSTANT_REL_STD * amax {
        amax
    } else {
        std
    }
}

/// `(v − mean)/std` for every entry, typed error when a value cannot be represented (an
/// overflowing difference is retried as `v/std − mean/std`).
fn standardise_entry(v: f64, mean: f64, std: f64, what: &str, j: usize) -> Result<f64> {
    let z = (v - mean) / std;
    if z.is_finite() {
        return Ok(z);
    }
    let z = v / std - mean / std;
    if z.is_finite() {
        Ok(z)
    } else {
        Err(Error::config(
            "data",
            format!(
                "standardising {what} column {j}: ({v} − {mean}) / {std} is not representable as \
             an f64; rescale the data"
            ),
        ))
    }
}

/// A scale below the smallest normal f64 (≈ 2.2e-308) loses precision: refuse it.
fn check_scale(std: f64, what: &str, j: usize) -> Result<()> {
    if std >= f64::MIN_POSITIVE && std.is_finite() {
        Ok(())
    } else {
        Err(Error::config(
            "data",
            format!(
                "{what} column {j} has scale {std:e}, below the smallest normal f64 (2.2e-308): \
             its standardised values cannot be represented; rescale the data"
            ),
        ))
    }
}

/// `n×p` matrix of `(v(i, j) − mean[j]) / std[j]`: the direct arithmetic first (bit-identical
/// to every earlier run), then, only if some entry is not finite, the checked path.
fn standardise(
    n: usize,
    p: usize,
    what: &str,
    mean: &[f64],
    std: &[f64],
    v: impl Fn(usize, usize) -> f64,
) -> Result<Mat<f64>> {
    for (j, &s) in std.iter().enumerate() {
        check_scale(s, what, j)?;
    }
    let out = Mat::from_fn(n, p, |i, j| (v(i, j) - mean[j]) / std[j]);
    if (0..p).all(|j| (0..n).all(|i| out[(i, j)].is_finite())) {
        return Ok(out);
    }
    let mut checked = Mat::zeros(n, p);
    for j in 0..p {
        for i in 0..n {
            checked[(i, j)] = standardise_entry(v(i, j), mean[j], std[j], what, j)?;
        }
    }
    Ok(checked)
}

impl Standardizer {
    /// Fits on `train`, keeping every feature (constant columns get std 1).
    pub fn fit(train: &Dataset) -> Self {
        Self::fit_with(train, StandardizeOptions::default())
            .expect("fit without dropping features cannot fail on a valid data set")
    }

    /// Fits on `train` with options (optionally dropping near-constant features).
    ///
    /// # Errors
    /// [`Error::Config`] if the threshold is negative or not finite; [`Error::Empty`] if
    /// every feature would be dropped.
    pub fn fit_with(train: &Dataset, opts: StandardizeOptions) -> Result<Self> {
        Self::fit_finite(train.x(), train.y(), opts)
    }

    /// [`Standardizer::fit_with`] on training inputs `x` (N×D) and targets `y` (N×P) given
    /// as matrix views of any strides (a row-major buffer, e.g. a caller's array, needs no
    /// copy); the same numbers as [`Standardizer::fit_with`] on a [`Dataset`] of them.
    ///
    /// # Errors
    /// [`Error::Shape`] if the row counts differ; [`Error::Empty`] for no rows, no input or
    /// no target columns; [`Error::NonFinite`] for the first NaN/∞ entry; as
    /// [`Standardizer::fit_with`].
    pub fn fit_views(
        x: MatRef<'_, f64>,
        y: MatRef<'_, f64>,
        opts: StandardizeOptions,
    ) -> Result<Self> {
        if x.nrows() != y.nrows() {
            return Err(Error::shape(
                "Standardizer::fit_views (rows of x and y)",
                x.nrows(),
                y.nrows(),
            ));
        }
        if x.nrows() == 0 {
            return Err(Error::Empty("standardising data with no rows".into()));
        }
        dgp_core::check_finite("inputs x", x)?;
        dgp_core::check_finite("targets y", y)?;
        Self::fit_finite(x, y, opts)
    }

    /// The statistics of rows already known to be finite, at least one.
    fn fit_finite(
        x: MatRef<'_, f64>,
        y: MatRef<'_, f64>,
        opts: StandardizeOptions,
    ) -> Result<Self> {
        let xs: Vec<ColumnStats> = (0..x.ncols()).map(|j| column_stats(x, j)).collect();
        let ys: Vec<ColumnStats> = (0..y.ncols()).map(|j| column_stats(y, j)).collect();
        Self::from_column_stats(&xs, &ys, opts)
    }

    /// Builds the standardiser [`Standardizer::fit_with`] builds from the per-column
    /// statistics `(mean, std, max|x|)` of the training inputs and targets, computed as
    /// [`Standardizer::fit`] computes them (this is how a standardiser is fitted on rows
    /// that are streamed rather than held in memory; the numbers are used as given).
    ///
    /// # Errors
    /// [`Error::Config`] if the threshold is negative or not finite; [`Error::Empty`] if
    /// there are no input or target columns or every feature would be dropped.
    pub fn from_column_stats(
        x_stats: &[ColumnStats],
        y_stats: &[ColumnStats],
        opts: StandardizeOptions,
    ) -> Result<Self> {
        if let Some(t) = opts.drop_features_below
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(Error::config(
                "drop_threshold",
                format!("feature-dropping threshold must be finite and ≥ 0, got {t}"),
            ));
        }
        if x_stats.is_empty() || y_stats.is_empty() {
            return Err(Error::Empty(
                "standardiser statistics without input or target columns".into(),
            ));
        }
        let mut kept_features = Vec::new();
        let mut x_mean = Vec::new();
        let mut x_std = Vec::new();
        for (j, &(m, s, amax)) in x_stats.iter().enumerate() {
            if opts.drop_features_below.is_some_and(|t| s <= t) {
                continue;
            }
            kept_features.push(j);
            x_mean.push(m);
            x_std.push(guard(s, amax));
        }
        if kept_features.is_empty() {
            return Err(Error::Empty(
                "every input feature is near-constant on the training split".into(),
            ));
        }
        let (y_mean, y_std) = match opts.targets {
            TargetScaling::Standardize => y_stats
                .iter()
                .map(|&(m, s, amax)| (m, guard(s, amax)))
                .unzip(),
            TargetScaling::Keep => (vec![0.0; y_stats.len()], vec![1.0; y_stats.len()]),
        };
        Ok(Self {
            input_dim: x_stats.len(),
            kept_features,
            x_mean,
            x_std,
            y_mean,
            y_std,
        })
    }

    /// Checks that every scale can standardise (a normal, finite f64), as
    /// [`Standardizer::transform_x`] and [`Standardizer::transform_y`] do first.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first column whose scale is not usable.
    pub fn check_scales(&self) -> Result<()> {
        for (j, &s) in self.x_std.iter().enumerate() {
            check_scale(s, "input", j)?;
        }
        for (j, &s) in self.y_std.iter().enumerate() {
            check_scale(s, "target", j)?;
        }
        Ok(())
    }

    /// The standardised value of `v` in kept input column `k` (original column
    /// `kept_features[k]`): exactly the number [`Standardizer::transform_x`] gives for it.
    /// Assumes [`Standardizer::check_scales`] passed.
    ///
    /// # Errors
    /// [`Error::Config`] if the value is not representable.
    ///
    /// # Panics
    /// If `k` is not below the number of kept features.
    #[inline]
    pub fn transform_x_value(&self, k: usize, v: f64) -> Result<f64> {
        let z = (v - self.x_mean[k]) / self.x_std[k];
        if z.is_finite() {
            return Ok(z);
        }
        standardise_entry(v, self.x_mean[k], self.x_std[k], "input", k)
    }

    /// The standardised value of `v` in target column `j`: exactly the number
    /// [`Standardizer::transform_y`] gives for it. Assumes [`Standardizer::check_scales`]
    /// passed.
    ///
    /// # Errors
    /// [`Error::Config`] if the value is not representable.
    ///
    /// # Panics
    /// If `j` is not below the number of targets.
    #[inline]
    pub fn transform_y_value(&self, j: usize, v: f64) -> Result<f64> {
        let z = (v - self.y_mean[j]) / self.y_std[j];
        if z.is_finite() {
            return Ok(z);
        }
        standardise_entry(v, self.y_mean[j], self.y_std[j], "target", j)
    }

    /// Number of input columns after transformation (kept features).
    pub fn transformed_input_dim(&self) -> usize {
        self.kept_features.len()
    }

    /// Standardises inputs (N×`input_dim`) → N×(kept features).
    ///
    /// # Errors
    /// [`Error::Shape`] if `x` does not have `input_dim` columns.
    pub fn transform_x(&self, x: MatRef<'_, f64>) -> Result<Mat<f64>> {
        if x.ncols() != self.input_dim {
            return Err(Error::shape(
                "Standardizer::transform_x (input columns)",
                self.input_dim,
                x.ncols(),
            ));
        }
        let cols = &self.kept_features;
        standardise(
            x.nrows(),
            cols.len(),
            "input",
            &self.x_mean,
            &self.x_std,
            |i, j| x[(i, cols[j])],
        )
    }

    /// Standardises targets (N×P).
    ///
    /// # Errors
    /// [`Error::Shape`] if `y` does not have P columns.
    pub fn transform_y(&self, y: MatRef<'_, f64>) -> Result<Mat<f64>> {
        self.check_p(y, "Standardizer::transform_y (target columns)")?;
        standardise(
            y.nrows(),
            y.ncols(),
            "target",
            &self.y_mean,
            &self.y_std,
            |i, j| y[(i, j)],
        )
    }

    /// Checks that predictive variances in original units, `σ²·y_std²`, stay normal f64
    /// numbers: every target scale in [`TARGET_SCALE_RANGE`]. A target measured at 1e300
    /// (variance 1e600) or 1e-300 cannot be un-standardised, so a harness that reports
    /// metrics in original units calls this before training.
    ///
    /// # Errors
    /// [`Error::Config`] naming the target column, its scale and the representable range.
    pub fn check_target_variance_representable(&self) -> Result<()> {
        let (lo, hi) = TARGET_SCALE_RANGE;
        for (j, &s) in self.y_std.iter().enumerate() {
            if !(lo..=hi).contains(&s) {
                return Err(Error::config(
                    "data",
                    format!(
                        "target column {j} has scale (std) {s:e}: its predictive variance in \
                     original units (scale²) is not a normal f64; the scale must lie in \
                     [{lo:e}, {hi:e}] (rescale the target)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Maps standardised targets back to original units: `y·std + mean`.
    ///
    /// # Errors
    /// [`Error::Shape`] if `y` does not have P columns.
    pub fn inverse_y(&self, y: MatRef<'_, f64>) -> Result<Mat<f64>> {
        self.check_p(y, "Standardizer::inverse_y (target columns)")?;
        Ok(Mat::from_fn(y.nrows(), y.ncols(), |i, j| {
            y[(i, j)] * self.y_std[j] + self.y_mean[j]
        }))
    }

    /// Maps standardised inputs (N×kept) back to original units of the kept features.
    ///
    /// # Errors
    /// [`Error::Shape`] if `x` does not have one column per kept feature.
    pub fn inverse_x(&self, x: MatRef<'_, f64>) -> Result<Mat<f64>> {
        if x.ncols() != self.kept_features.len() {
            return Err(Error::shape(
                "Standardizer::inverse_x (kept input columns)",
                self.kept_features.len(),
                x.ncols(),
            ));
        }
        Ok(Mat::from_fn(x.nrows(), x.ncols(), |i, j| {
            x[(i, j)] * self.x_std[j] + self.x_mean[j]
        }))
    }

    /// Standardises a data set (any split: statistics are the fitted ones). Feature names
    /// follow the kept features.
    ///
    /// # Errors
    /// [`Error::Shape`] if `data` has a different number of input or target columns.
    pub fn transform(&self, data: &Dataset) -> Result<Dataset> {
        let x = self.transform_x(data.x())?;
        let y = self.transform_y(data.y())?;
        let mut out = Dataset::new(x, y)?;
        if let Some(names) = data.feature_names() {
            out = out.with_feature_names(
                self.kept_features
                    .iter()
                    .map(|&j| names[j].clone())
                    .collect(),
            )?;
        }
        if let Some(names) = data.target_names() {
            out = out.with_target_names(names.to_vec())?;
        }
        Ok(out)
    }

    fn check_p(&self, y: MatRef<'_, f64>, context: &str) -> Result<()> {
        if y.ncols() != self.y_mean.len() {
            return Err(Error::shape(context, self.y_mean.len(), y.ncols()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(cols: &[Vec<f64>], y: &[f64]) -> Dataset {
        let n = y.len();
        let x = Mat::from_fn(n, cols.len(), |i, j| cols[j][i]);
        Dataset::new(x, Mat::from_fn(n, 1, |i, _| y[i])).unwrap()
    }

    /// The old formulas, for bit-identity on ordinary magnitudes.
    fn old_stats(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    }

    /// A row-major view of a caller's buffer gives the statistics and the standardised
    /// rows of the same numbers held in a `Dataset`, bit for bit; bad views are typed
    /// errors.
    #[test]
    fn views_of_a_row_major_buffer_standardise_like_a_dataset() {
        let (n, d) = (37, 3);
        let buf: Vec<f64> = (0..n * d)
            .map(|k| ((k * 7919) % 101) as f64 * 0.37 - 11.0)
            .collect();
        let y: Vec<f64> = (0..n).map(|i| (i as f64).sin() * 1e3).collect();
        let xv = MatRef::from_row_major_slice(&buf, n, d);
        let yv = MatRef::from_column_major_slice(&y, n, 1);
        let ds = Dataset::new(xv.to_owned(), yv.to_owned()).unwrap();
        for opts in [
            StandardizeOptions::default(),
            StandardizeOptions::default().keep_targets(),
        ] {
            let a = Standardizer::fit_views(xv, yv, opts).unwrap();
            let b = Standardizer::fit_with(&ds, opts).unwrap();
            assert_eq!(a, b);
            assert_eq!(
                a.transform_x(xv).unwrap(),
                b.transform(&ds).unwrap().x().to_owned()
            );
        }
        let mut bad = buf.clone();
        bad[2 * d + 1] = f64::NAN;
        let e = Standardizer::fit_views(
            MatRef::from_row_major_slice(&bad, n, d),
            yv,
            Default::default(),
        );
        assert!(
            matches!(e, Err(Error::NonFinite { row: 2, col: 1, .. })),
            "{e:?}"
        );
        let e = Standardizer::fit_views(xv, yv.subrows(0, n - 1), Default::default());
        assert!(matches!(e, Err(Error::Shape { .. })), "{e:?}");
        let e = Standardizer::fit_views(xv.subrows(0, 0), yv.subrows(0, 0), Default::default());
        assert!(matches!(e, Err(Error::Empty(_))), "{e:?}");
    }

    #[test]
    fn ordinary_magnitudes_use_the_old_arithmetic_bit_for_bit() {
        let a = vec![0.1, 2.7, -3.3, 1e5, 42.0, 7.0];
        let y = vec![1.0, 2.0, 3.5, -1.0, 0.25, 9.0];
        let s = Standardizer::fit(&data(std::slice::from_ref(&a), &y));
        assert_eq!(s.x_mean[0].to_bits(), old_stats(&a).0.to_bits());
        assert_eq!(s.x_std[0].to_bits(), old_stats(&a).1.to_bits());
        assert_eq!(s.y_std[0].to_bits(), old_stats(&y).1.to_bits());
    }

    #[test]
    fn extreme_scales_standardise_like_unit_scale() {
        let a = vec![0.1, 2.7, -3.3, 5.0, 42.0, 7.0];
        let y = vec![1.0, 2.0, 3.5, -1.0, 0.25, 9.0];
        let base = Standardizer::fit(&data(std::slice::from_ref(&a), &y));
        let bt = base.transform(&data(std::slice::from_ref(&a), &y)).unwrap();
        for f in [1e300, 1e-300, 1e-14, 1e150] {
            let af: Vec<f64> = a.iter().map(|v| v * f).collect();
            let yf: Vec<f64> = y.iter().map(|v| v * f).collect();
            let d = data(std::slice::from_ref(&af), &yf);
            let s = Standardizer::fit(&d);
            assert!(s.x_std[0].is_finite() && s.x_std[0] > 0.0, "{f:e}");
            assert!(
                (s.x_std[0] / (base.x_std[0] * f) - 1.0).abs() < 1e-14,
                "{f:e}"
            );
            let t = s.transform(&d).unwrap();
            for i in 0..a.len() {
                assert!((t.x()[(i, 0)] - bt.x()[(i, 0)]).abs() < 1e-13, "{f:e}");
                assert!((t.y()[(i, 0)] - bt.y()[(i, 0)]).abs() < 1e-13, "{f:e}");
            }
            let r = s.check_target_variance_representable();
            assert_eq!(r.is_ok(), f < 1e200 && f > 1e-200, "{f:e}");
        }
    }

    #[test]
    fn constant_columns_are_judged_relative_to_their_magnitude() {
        let y = vec![1.0, 2.0, 3.0, 4.0];
        // Exactly constant: std 1, standardises to 0 (as before).
        let c = vec![5e300; 4];
        let s = Standardizer::fit(&data(std::slice::from_ref(&c), &y));
        assert_eq!((s.x_mean[0], s.x_std[0]), (5e300, 1.0));
        // Varying in the last bits only: scale max|x|, values ≤ 1e-12.
        let b = 1000.0f64;
        let n = vec![b, b.next_up(), b, b.next_down()];
        let s = Standardizer::fit(&data(std::slice::from_ref(&n), &y));
        assert_eq!(s.x_std[0], b.next_up());
        // Tiny units but a real spread: not constant.
        let t = vec![1e-14, 2e-14, 3e-14, 4e-14];
        let s = Standardizer::fit(&data(std::slice::from_ref(&t), &y));
        assert!((s.x_std[0] - 1.118033988749895e-14).abs() < 1e-28);
    }

    #[test]
    fn unrepresentable_values_are_typed_errors() {
        let y = vec![1.0, 2.0, 3.0, 4.0];
        let a = vec![-1e308, 1e308, -1e308, 1e308];
        let s = Standardizer::fit(&data(std::slice::from_ref(&a), &y));
        // A test point far outside the training range overflows (x − mean)/std.
        let x = Mat::from_fn(1, 1, |_, _| f64::MAX);
        assert!(s.transform_x(x.as_ref()).is_ok());
        let mut s2 = s.clone();
        s2.x_std[0] = 1e-310;
        let e = s2.transform_x(x.as_ref()).unwrap_err();
        assert!(e.to_string().contains("smallest normal"), "{e}");
        s2.x_std[0] = 1e-300;
        let e = s2.transform_x(x.as_ref()).unwrap_err();
        assert!(e.to_string().contains("not representable"), "{e}");
    }
}
