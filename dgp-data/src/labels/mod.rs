//! Class labels: integers 0..K−1 in one column, checked in memory ([`class_labels`],
//! [`check_all_classes_present`]) and, for rows that do not fit in memory, in one streamed
//! pass ([`class_counts`]).

use std::collections::BTreeMap;

mod checks;
pub use checks::{check_all_classes_present, class_label, class_labels, infer_num_classes};

use crate::RowSource;
use dgp_core::{Error, LabelError, Result};

use crate::chunks::for_each_chunk;

/// The label column of a row source: K and how many rows hold each class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassCounts {
    /// K: the number given, else the largest label plus one.
    pub num_classes: usize,
    /// Rows per class, for the classes that occur (ascending class index).
    pub counts: BTreeMap<usize, u64>,
}

impl ClassCounts {
    /// The first class of `0..K` with no row, if any.
    pub fn first_missing(&self) -> Option<usize> {
        (0..self.num_classes).find(|c| !self.counts.contains_key(c))
    }
}

/// Reads the one target column of `src` in chunks of `chunk_rows` rows and checks that
/// every value is a class label — an integer in `0..K` (K = `num_classes` when given,
/// else the largest label plus one), with K ≥ 2 — and, with `require_every_class`, that
/// every class of `0..K` occurs (a training file). Memory: the chunk and one counter per
/// distinct label.
///
/// # Errors
/// [`Error::Label`] naming the first offending row (0-based, in file order):
/// [`LabelError::TooFewClasses`] (K < 2, given or found), [`LabelError::NotOneColumn`],
/// [`LabelError::NonFinite`], [`LabelError::NotAnInteger`], [`LabelError::OutOfRange`];
/// [`LabelError::MissingClass`] for a class with no row; [`Error::Empty`] for no rows;
/// the errors of [`RowSource::gather`].
pub fn class_counts<S: RowSource + ?Sized>(
    src: &S,
    num_classes: Option<usize>,
    require_every_class: bool,
    chunk_rows: usize,
) -> Result<ClassCounts> {
    if let Some(k) = num_classes.filter(|&k| k < 2) {
        return Err(LabelError::TooFewClasses { num_classes: k }.into());
    }
    if src.output_dim() != 1 {
        return Err(LabelError::NotOneColumn {
            columns: src.output_dim(),
        }
        .into());
    }
    if src.n() == 0 {
        return Err(Error::Empty("no class labels".into()));
    }
    let mut counts = BTreeMap::new();
    for_each_chunk(src, chunk_rows, |start, _, y| {
        for i in 0..y.nrows() {
            let (row, value) = (start + i, y[(i, 0)]);
            let c = class_label(row, value)?;
            if let Some(k) = num_classes.filter(|&k| c >= k) {
                return Err(LabelError::OutOfRange {
                    row,
                    value,
                    num_classes: k,
                }
                .into());
            }
            *counts.entry(c).or_insert(0u64) += 1;
        }
        Ok(())
    })?;
    let k = num_classes.unwrap_or_else(|| counts.keys().next_back().map_or(0, |m| m + 1));
    if k < 2 {
        return Err(LabelError::TooFewClasses { num_classes: k }.into());
    }
    let out = ClassCounts {
        num_classes: k,
        counts,
    };
    if require_every_class && let Some(class) = out.first_missing() {
        return Err(LabelError::MissingClass {
            class,
            num_classes: k,
        }
        .into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;
    use crate::labels::{check_all_classes_present, class_labels, infer_num_classes};
    use faer::Mat;

    /// Rows of one input and the given labels, NaN included (a `Dataset` refuses NaN).
    struct Labels(Vec<f64>);

    impl RowSource for Labels {
        fn n(&self) -> usize {
            self.0.len()
        }
        fn input_dim(&self) -> usize {
            1
        }
        fn output_dim(&self) -> usize {
            1
        }
        fn gather(
            &self,
            idx: &[usize],
            mut x: faer::MatMut<'_, f64>,
            mut y: faer::MatMut<'_, f64>,
        ) -> Result<()> {
            for (r, &i) in idx.iter().enumerate() {
                x[(r, 0)] = i as f64;
                y[(r, 0)] = self.0[i];
            }
            Ok(())
        }
    }

    fn data(labels: &[f64]) -> Labels {
        Labels(labels.to_vec())
    }

    /// The in-memory checks' verdict on the same labels: K and the error, if any.
    fn in_memory(labels: &[f64], k: Option<usize>) -> Result<usize> {
        let y = Mat::from_fn(labels.len(), 1, |i, _| labels[i]);
        let k = match k {
            Some(k) => k,
            None => infer_num_classes(y.as_ref())?,
        };
        let l = class_labels(y.as_ref(), k)?;
        check_all_classes_present(&l, k)?;
        Ok(k)
    }

    #[test]
    fn streamed_checks_equal_the_in_memory_checks_row_for_row() {
        let cases: Vec<(Vec<f64>, Option<usize>)> = vec![
            (vec![0.0, 1.0, 2.0, 1.0, 0.0, 2.0, 2.0], None),
            (vec![0.0, 1.0, 2.0, 1.0, 0.0, 2.0, 2.0], Some(3)),
            // A class missing (2 of 0..4), K given.
            (vec![0.0, 1.0, 3.0, 1.0, 0.0], Some(4)),
            // A class missing, K inferred.
            (vec![0.0, 3.0, 1.0, 1.0, 0.0], None),
            // K = 1 found; K = 1 given.
            (vec![0.0, 0.0, 0.0], None),
            (vec![0.0, 1.0, 0.0], Some(1)),
            // NaN, a non-integer (a regression target), negative, ≥ K, in the last chunk.
            (vec![0.0, 1.0, 0.0, 1.0, f64::NAN], None),
            (vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.37], None),
            (vec![0.0, 1.0, 0.0, 1.0, 0.0, -1.0], None),
            (vec![0.0, 1.0, 0.0, 1.0, 0.0, 2.0], Some(2)),
            (vec![0.0, 1.0, 0.0, 1.0, 0.0, f64::INFINITY], Some(2)),
        ];
        for (labels, k) in cases {
            let want = in_memory(&labels, k);
            for chunk in [1, 2, 4, 100] {
                let got = class_counts(&data(&labels), k, true, chunk).map(|c| c.num_classes);
                match (&want, &got) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b),
                    (Err(Error::Label(a)), Err(Error::Label(b))) => {
                        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{labels:?} {k:?}")
                    }
                    (a, b) => panic!("{labels:?} {k:?} chunk {chunk}: {a:?} vs {b:?}"),
                }
            }
        }
    }

    #[test]
    fn counts_and_a_test_file_without_every_class() {
        let c = class_counts(&data(&[2.0, 0.0, 2.0, 2.0]), Some(3), false, 3).unwrap();
        assert_eq!(c.num_classes, 3);
        assert_eq!(
            c.counts.into_iter().collect::<Vec<_>>(),
            vec![(0, 1), (2, 3)]
        );
        assert!(matches!(
            class_counts(&data(&[2.0, 0.0]), Some(3), true, 3),
            Err(Error::Label(LabelError::MissingClass { class: 1, .. }))
        ));
        let two_targets = Dataset::new(Mat::zeros(3, 1), Mat::zeros(3, 2)).unwrap();
        assert!(matches!(
            class_counts(&two_targets, None, true, 3),
            Err(Error::Label(LabelError::NotOneColumn { columns: 2 }))
        ));
    }
}
