//! Serde support for `faer::Mat<f64>`, which has no serde feature of its own: how every
//! struct of the workspace that stores matrices (model files, run states,
//! `dgp_traits::predictive`) writes them, as `(nrows, ncols, data)`.
//!
//! A matrix is stored as [`MatData`] `{ nrows, ncols, data }` with `data` in column-major
//! order. Use the module with `#[serde(with = ...)]` on `Mat<f64>` fields, or its
//! submodules [`vec`](mod@vec) (for `Vec<Mat<f64>>`) and [`option`] (for `Option<Mat<f64>>`):
//!
//! ```
//! use faer::Mat;
//! use serde::{Deserialize, Serialize};
//! #[derive(Serialize, Deserialize)]
//! struct Saved {
//!     #[serde(with = "dgp_core::serde_mat")]
//!     z: Mat<f64>,
//!     #[serde(with = "dgp_core::serde_mat::vec")]
//!     blocks: Vec<Mat<f64>>,
//! }
//! let c = Saved { z: Mat::from_fn(2, 3, |i, j| (i + 10 * j) as f64), blocks: vec![] };
//! let s = serde_json::to_string(&c).unwrap();
//! let back: Saved = serde_json::from_str(&s).unwrap();
//! assert_eq!(back.z, c.z);
//! ```
//!
//! JSON cannot represent NaN or ±∞; serialise only finite matrices to JSON.

use faer::{Mat, MatRef};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// Serialisable form of a dense matrix: shape plus column-major entries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatData {
    /// Number of rows.
    pub nrows: usize,
    /// Number of columns.
    pub ncols: usize,
    /// Entries in column-major order (`data[i + j·nrows]` = entry (i, j)).
    pub data: Vec<f64>,
}

impl MatData {
    /// Copies a matrix view.
    pub fn from_mat(m: MatRef<'_, f64>) -> Self {
        let mut data = Vec::with_capacity(m.nrows() * m.ncols());
        for j in 0..m.ncols() {
            for i in 0..m.nrows() {
                data.push(m[(i, j)]);
            }
        }
        Self {
            nrows: m.nrows(),
            ncols: m.ncols(),
            data,
        }
    }

    /// Rebuilds the matrix.
    ///
    /// # Errors
    /// [`Error::Serde`] if `data.len() != nrows · ncols`.
    pub fn into_mat(self) -> Result<Mat<f64>> {
        let expected = self.nrows.checked_mul(self.ncols);
        if expected != Some(self.data.len()) {
            return Err(Error::Serde(format!(
                "matrix of shape {}×{} with {} entries",
                self.nrows,
                self.ncols,
                self.data.len()
            )));
        }
        let r = self.nrows;
        Ok(Mat::from_fn(self.nrows, self.ncols, |i, j| {
            self.data[i + j * r]
        }))
    }
}

impl From<&Mat<f64>> for MatData {
    fn from(m: &Mat<f64>) -> Self {
        Self::from_mat(m.as_ref())
    }
}

impl TryFrom<MatData> for Mat<f64> {
    type Error = Error;
    fn try_from(d: MatData) -> Result<Mat<f64>> {
        d.into_mat()
    }
}

/// `#[serde(serialize_with)]` helper for `Mat<f64>`.
pub fn serialize<S: Serializer>(m: &Mat<f64>, s: S) -> std::result::Result<S::Ok, S::Error> {
    MatData::from(m).serialize(s)
}

/// `#[serde(deserialize_with)]` helper for `Mat<f64>`.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Mat<f64>, D::Error> {
    MatData::deserialize(d)?
        .into_mat()
        .map_err(serde::de::Error::custom)
}

/// `#[serde(with = "dgp_core::serde_mat::vec")]` for `Vec<Mat<f64>>`.
pub mod vec {
    use super::*;

    /// Serialises each matrix as a [`MatData`].
    pub fn serialize<S: Serializer>(m: &[Mat<f64>], s: S) -> std::result::Result<S::Ok, S::Error> {
        m.iter().map(MatData::from).collect::<Vec<_>>().serialize(s)
    }

    /// Deserialises a sequence of [`MatData`].
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> std::result::Result<Vec<Mat<f64>>, D::Error> {
        Vec::<MatData>::deserialize(d)?
            .into_iter()
            .map(|m| m.into_mat().map_err(serde::de::Error::custom))
            .collect()
    }
}

/// `#[serde(with = "dgp_core::serde_mat::option")]` for `Option<Mat<f64>>`.
pub mod option {
    use super::*;

    /// Serialises `None` or a [`MatData`].
    pub fn serialize<S: Serializer>(
        m: &Option<Mat<f64>>,
        s: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        m.as_ref().map(MatData::from).serialize(s)
    }

    /// Deserialises `None` or a [`MatData`].
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> std::result::Result<Option<Mat<f64>>, D::Error> {
        Option::<MatData>::deserialize(d)?
            .map(|m| m.into_mat().map_err(serde::de::Error::custom))
            .transpose()
    }
}
