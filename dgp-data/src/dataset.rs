//! The dense data set type.

use faer::{Mat, MatMut, MatRef};

use crate::batches::gather_rows_into;
use dgp_core::{Error, Result, check_finite};

/// A supervised data set: inputs `x` (N×D) and targets `y` (N×P), both dense `f64`.
///
/// Invariants, checked by [`Dataset::new`]: N ≥ 1, D ≥ 1, P ≥ 1, `x` and `y` have the same
/// number of rows, every entry is finite, and the optional column names have lengths D and
/// P. Fields are private so the invariants cannot be broken after construction.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    x: Mat<f64>,
    y: Mat<f64>,
    feature_names: Option<Vec<String>>,
    target_names: Option<Vec<String>>,
}

impl Dataset {
    /// Validates and wraps `x` (N×D) and `y` (N×P).
    ///
    /// # Errors
    /// [`Error::Empty`] if N, D or P is zero; [`Error::Shape`] if the row counts differ;
    /// [`Error::NonFinite`] (with the row and column) for the first NaN/∞ entry.
    pub fn new(x: Mat<f64>, y: Mat<f64>) -> Result<Self> {
        if x.nrows() != y.nrows() {
            return Err(Error::shape(
                "Dataset::new (rows of x and y)",
                format!("y with {} rows", x.nrows()),
                format!("{} rows", y.nrows()),
            ));
        }
        if x.nrows() == 0 {
            return Err(Error::Empty("data set with no rows".into()));
        }
        if x.ncols() == 0 {
            return Err(Error::Empty("data set with no input columns".into()));
        }
        if y.ncols() == 0 {
            return Err(Error::Empty("data set with no target columns".into()));
        }
        check_finite("Dataset inputs x", x.as_ref())?;
        check_finite("Dataset targets y", y.as_ref())?;
        Ok(Self {
            x,
            y,
            feature_names: None,
            target_names: None,
        })
    }

    /// Attaches input column names (one per column of `x`).
    ///
    /// # Errors
    /// [`Error::Shape`] if `names.len() != D`.
    pub fn with_feature_names(mut self, names: Vec<String>) -> Result<Self> {
        if names.len() != self.input_dim() {
            return Err(Error::shape(
                "Dataset::with_feature_names",
                self.input_dim(),
                names.len(),
            ));
        }
        self.feature_names = Some(names);
        Ok(self)
    }

    /// Attaches target column names (one per column of `y`).
    ///
    /// # Errors
    /// [`Error::Shape`] if `names.len() != P`.
    pub fn with_target_names(mut self, names: Vec<String>) -> Result<Self> {
        if names.len() != self.output_dim() {
            return Err(Error::shape(
                "Dataset::with_target_names",
                self.output_dim(),
                names.len(),
            ));
        }
        self.target_names = Some(names);
        Ok(self)
    }

    /// Inputs, N×D.
    pub fn x(&self) -> MatRef<'_, f64> {
        self.x.as_ref()
    }

    /// Targets, N×P.
    pub fn y(&self) -> MatRef<'_, f64> {
        self.y.as_ref()
    }

    /// Input column names, if known.
    pub fn feature_names(&self) -> Option<&[String]> {
        self.feature_names.as_deref()
    }

    /// Target column names, if known.
    pub fn target_names(&self) -> Option<&[String]> {
        self.target_names.as_deref()
    }

    /// Number of rows N.
    pub fn n(&self) -> usize {
        self.x.nrows()
    }

    /// Number of input columns D.
    pub fn input_dim(&self) -> usize {
        self.x.ncols()
    }

    /// Number of target columns P.
    pub fn output_dim(&self) -> usize {
        self.y.ncols()
    }

    /// Consumes the data set and returns `(x, y)`.
    pub fn into_parts(self) -> (Mat<f64>, Mat<f64>) {
        (self.x, self.y)
    }

    /// The rows `idx` (in that order, repeats allowed) as a new data set; names are kept.
    ///
    /// # Errors
    /// [`Error::Empty`] if `idx` is empty; [`Error::Shape`] if an index is ≥ N.
    pub fn select_rows(&self, idx: &[usize]) -> Result<Dataset> {
        if idx.is_empty() {
            return Err(Error::Empty("select_rows with no row indices".into()));
        }
        if let Some(&bad) = idx.iter().find(|&&i| i >= self.n()) {
            return Err(Error::shape(
                "Dataset::select_rows",
                format!("row indices < {}", self.n()),
                format!("index {bad}"),
            ));
        }
        let mut x = Mat::zeros(idx.len(), self.input_dim());
        let mut y = Mat::zeros(idx.len(), self.output_dim());
        gather_rows_into(self.x.as_ref(), idx, x.as_mut());
        gather_rows_into(self.y.as_ref(), idx, y.as_mut());
        Ok(Dataset {
            x,
            y,
            feature_names: self.feature_names.clone(),
            target_names: self.target_names.clone(),
        })
    }

    /// Copies the rows `idx` of `x` and `y` into preallocated buffers (`idx.len()`×D and
    /// `idx.len()`×P), without allocating: the minibatch path of training loops.
    ///
    /// # Panics
    /// If a buffer has the wrong shape or an index is ≥ N (indices come from the library's
    /// own split and batch helpers, which guarantee both).
    pub fn gather_into(&self, idx: &[usize], x_dst: MatMut<'_, f64>, y_dst: MatMut<'_, f64>) {
        gather_rows_into(self.x.as_ref(), idx, x_dst);
        gather_rows_into(self.y.as_ref(), idx, y_dst);
    }
}
