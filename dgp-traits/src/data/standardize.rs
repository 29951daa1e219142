//! Standardisation of inputs and targets with training-split statistics.

use faer::{Mat, MatRef};
use serde::{Deserialize, Serialize};

use crate::data::dataset::Dataset;
use crate::error::{Error, Result};

/// A column whose population standard deviation is ≤ this is treated as constant: its
/// scale is set to 1 (it is only centred), so standardising never divides by ~0 and never
/// produces NaN. Naval has two such input columns.
pub const CONSTANT_STD: f64 = 1e-12;

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
}

impl StandardizeOptions {
    /// Drop near-constant features as the Structured reference does (std ≤ 1e-3).
    pub fn drop_near_constant() -> Self {
        Self {
            drop_features_below: Some(DROP_FEATURE_STD),
        }
    }
}

/// Per-column affine maps `(v − mean)/std` fitted on a training split.
///
/// Statistics are the mean and the population standard deviation (ddof 0, as NumPy's
/// default) of the training rows only; test data are transformed with the same numbers
/// (protocol §2). A column with std ≤ [`CONSTANT_STD`] (including exactly constant columns)
/// gets std 1; an exactly constant column gets its value as mean, so it standardises to
/// exactly 0. Standardised predictive mixtures are mapped back with
/// [`crate::predictive::Predictive::unstandardize`]`(&s.y_mean, &s.y_std)`.
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

/// Mean and population std of column `j`, exact for constant columns.
fn column_stats(m: MatRef<'_, f64>, j: usize) -> (f64, f64) {
    let c = m.col(j);
    let n = c.nrows();
    let first = c[0];
    if (1..n).all(|i| c[i] == first) {
        return (first, 0.0);
    }
    let mean = (0..n).map(|i| c[i]).sum::<f64>() / n as f64;
    let var = (0..n).map(|i| (c[i] - mean).powi(2)).sum::<f64>() / n as f64;
    (mean, var.sqrt())
}

fn guard(std: f64) -> f64 {
    if std <= CONSTANT_STD { 1.0 } else { std }
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
        if let Some(t) = opts.drop_features_below
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(Error::Config(format!(
                "feature-dropping threshold must be finite and ≥ 0, got {t}"
            )));
        }
        let (x, y) = (train.x(), train.y());
        let mut kept_features = Vec::new();
        let mut x_mean = Vec::new();
        let mut x_std = Vec::new();
        for j in 0..x.ncols() {
            let (m, s) = column_stats(x, j);
            if opts.drop_features_below.is_some_and(|t| s <= t) {
                continue;
            }
            kept_features.push(j);
            x_mean.push(m);
            x_std.push(guard(s));
        }
        if kept_features.is_empty() {
            return Err(Error::Empty(
                "every input feature is near-constant on the training split".into(),
            ));
        }
        let (y_mean, y_std) = (0..y.ncols())
            .map(|j| {
                let (m, s) = column_stats(y, j);
                (m, guard(s))
            })
            .unzip();
        Ok(Self {
            input_dim: x.ncols(),
            kept_features,
            x_mean,
            x_std,
            y_mean,
            y_std,
        })
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
        Ok(Mat::from_fn(x.nrows(), self.kept_features.len(), |i, j| {
            (x[(i, self.kept_features[j])] - self.x_mean[j]) / self.x_std[j]
        }))
    }

    /// Standardises targets (N×P).
    ///
    /// # Errors
    /// [`Error::Shape`] if `y` does not have P columns.
    pub fn transform_y(&self, y: MatRef<'_, f64>) -> Result<Mat<f64>> {
        self.check_p(y, "Standardizer::transform_y (target columns)")?;
        Ok(Mat::from_fn(y.nrows(), y.ncols(), |i, j| {
            (y[(i, j)] - self.y_mean[j]) / self.y_std[j]
        }))
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
