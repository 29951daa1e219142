//! Classification data in the UCI folder format: the target column holds class labels
//! `0, 1, …, K − 1` (as numbers in `data.txt`), validated on loading.
//!
//! ```
//! use dgp_data::uci::{ClassDataset, UciSources, load_uci_from_str};
//! let src = UciSources {
//!     name: "tiny",
//!     data: "0.1 0\n0.2 1\n0.3 2\n0.4 1\n",
//!     index_features: "0\n",
//!     index_target: "1\n",
//!     n_splits: "1\n",
//!     splits: &[("0\n1\n2\n", "3\n")],
//! };
//! let data = ClassDataset::from_uci(load_uci_from_str(&src).unwrap(), None).unwrap();
//! assert_eq!(data.num_classes, 3);
//! let split = data.split(0).unwrap();
//! assert_eq!(split.test_labels, vec![1]);
//! ```

use std::path::Path;

use super::{UciDataset, load_uci};
use crate::Dataset;
use crate::labels::{check_all_classes_present, class_labels, infer_num_classes};
use dgp_core::{Error, Result};

/// A classification data set with its published splits: a [`UciDataset`] whose one target
/// column holds validated class labels.
#[derive(Clone, Debug)]
pub struct ClassDataset {
    /// The loaded folder; `uci.data.y()` is the N×1 label column (as floats).
    pub uci: UciDataset,
    /// Number of classes K ≥ 2 (given, or the largest label plus one).
    pub num_classes: usize,
    labels: Vec<usize>,
}

/// One train/test split of a [`ClassDataset`].
#[derive(Clone, Debug)]
pub struct ClassSplit {
    /// Training rows (targets: the label column).
    pub train: Dataset,
    /// Test rows.
    pub test: Dataset,
    /// Labels of the training rows (every class occurs).
    pub train_labels: Vec<usize>,
    /// Labels of the test rows.
    pub test_labels: Vec<usize>,
}

impl ClassDataset {
    /// Validates the labels of a loaded folder: one target column of integers in `0..K`,
    /// with K = `num_classes` when given, else the largest label plus one; every class must
    /// occur in the whole data set.
    ///
    /// # Errors
    /// [`Error::Label`]: [`LabelError::NotOneColumn`](dgp_core::LabelError::NotOneColumn), [`LabelError::NotAnInteger`](dgp_core::LabelError::NotAnInteger),
    /// [`LabelError::OutOfRange`](dgp_core::LabelError::OutOfRange), [`LabelError::TooFewClasses`](dgp_core::LabelError::TooFewClasses) (K < 2),
    /// [`LabelError::MissingClass`](dgp_core::LabelError::MissingClass).
    pub fn from_uci(uci: UciDataset, num_classes: Option<usize>) -> Result<Self> {
        let y = uci.data.y();
        let k = match num_classes {
            Some(k) => k,
            None => infer_num_classes(y)?,
        };
        let labels = class_labels(y, k)?;
        check_all_classes_present(&labels, k)?;
        Ok(ClassDataset {
            uci,
            num_classes: k,
            labels,
        })
    }

    /// Loads and validates a folder ([`load_uci`] then [`ClassDataset::from_uci`]).
    ///
    /// # Errors
    /// Those of both.
    pub fn load(dir: impl AsRef<Path>, num_classes: Option<usize>) -> Result<Self> {
        Self::from_uci(load_uci(dir)?, num_classes)
    }

    /// The label of every row.
    pub fn labels(&self) -> &[usize] {
        &self.labels
    }

    /// Published split `k`, with the check that every class occurs in its training rows
    /// (a model cannot learn a class it never sees).
    ///
    /// # Errors
    /// Those of [`UciDataset::split`]; [`Error::Label`] with
    /// [`LabelError::MissingClass`](dgp_core::LabelError::MissingClass) for a class absent from the training rows;
    /// [`Error::Empty`] for an empty side.
    pub fn split(&self, k: usize) -> Result<ClassSplit> {
        let (train_idx, test_idx) = self.uci.split(k)?;
        self.split_rows(&train_idx, &test_idx)
    }

    /// A split given by row indices, checked as [`ClassDataset::split`].
    ///
    /// # Errors
    /// As [`ClassDataset::split`]; [`Error::Shape`] for an index out of range.
    pub fn split_rows(&self, train_idx: &[usize], test_idx: &[usize]) -> Result<ClassSplit> {
        if train_idx.is_empty() || test_idx.is_empty() {
            return Err(Error::Empty(
                "classification split with an empty side".into(),
            ));
        }
        let pick = |idx: &[usize]| -> Result<Vec<usize>> {
            idx.iter()
                .map(|&i| {
                    self.labels.get(i).copied().ok_or_else(|| {
                        Error::shape("classification split (row index)", self.labels.len(), i)
                    })
                })
                .collect()
        };
        let train_labels = pick(train_idx)?;
        let test_labels = pick(test_idx)?;
        check_all_classes_present(&train_labels, self.num_classes)?;
        Ok(ClassSplit {
            train: self.uci.data.select_rows(train_idx)?,
            test: self.uci.data.select_rows(test_idx)?,
            train_labels,
            test_labels,
        })
    }
}
