//! Class labels as classification likelihoods and loaders read them: integers 0..K−1 in
//! one column, checked with the row of the first offending entry.

use faer::MatRef;

use dgp_core::{Error, LabelError, Result};

/// The class indices of a one-column label matrix for a problem with `num_classes`
/// classes.
///
/// # Errors
/// [`Error::Label`]: [`LabelError::TooFewClasses`] for K < 2,
/// [`LabelError::NotOneColumn`], [`LabelError::NonFinite`] (NaN, ±∞),
/// [`LabelError::NotAnInteger`], [`LabelError::OutOfRange`] (negative or ≥ K); the first
/// offending row is reported. [`Error::Empty`] for no rows.
pub fn class_labels(y: MatRef<'_, f64>, num_classes: usize) -> Result<Vec<usize>> {
    if num_classes < 2 {
        return Err(LabelError::TooFewClasses { num_classes }.into());
    }
    let labels = integer_labels(y)?;
    if let Some((row, &c)) = labels.iter().enumerate().find(|(_, c)| **c >= num_classes) {
        return Err(LabelError::OutOfRange {
            row,
            value: c as f64,
            num_classes,
        }
        .into());
    }
    Ok(labels)
}

/// The non-negative integer labels of a one-column matrix (no upper bound).
fn integer_labels(y: MatRef<'_, f64>) -> Result<Vec<usize>> {
    if y.ncols() != 1 {
        return Err(LabelError::NotOneColumn { columns: y.ncols() }.into());
    }
    if y.nrows() == 0 {
        return Err(Error::Empty("no class labels".into()));
    }
    (0..y.nrows())
        .map(|row| class_label(row, y[(row, 0)]))
        .collect()
}

/// The class index a label value stands for: a finite, non-negative integer (at most
/// `u32::MAX`); `row` names it in the error. The per-value check of [`class_labels`],
/// for labels read row by row (a file streamed in chunks).
///
/// # Errors
/// [`LabelError::NonFinite`] (NaN, ±∞), [`LabelError::NotAnInteger`],
/// [`LabelError::OutOfRange`] (negative or above `u32::MAX`; `num_classes` 0: no K yet).
pub fn class_label(row: usize, value: f64) -> Result<usize> {
    if !value.is_finite() {
        Err(LabelError::NonFinite { row, value }.into())
    } else if value.fract() != 0.0 {
        Err(LabelError::NotAnInteger { row, value }.into())
    } else if value < 0.0 || value > u32::MAX as f64 {
        Err(LabelError::OutOfRange {
            row,
            value,
            num_classes: 0,
        }
        .into())
    } else {
        Ok(value as usize)
    }
}

/// K inferred from labels: the largest label plus one.
///
/// # Errors
/// The errors of [`class_labels`] (apart from the range) and
/// [`LabelError::TooFewClasses`] when every label is 0.
pub fn infer_num_classes(y: MatRef<'_, f64>) -> Result<usize> {
    let labels = integer_labels(y)?;
    let k = labels.iter().max().map_or(0, |m| m + 1);
    if k < 2 {
        return Err(LabelError::TooFewClasses { num_classes: k }.into());
    }
    Ok(k)
}

/// Checks that every class `0..num_classes` occurs in `labels` (a training split must
/// contain every class).
///
/// # Errors
/// [`LabelError::MissingClass`] naming the first absent class;
/// [`LabelError::OutOfRange`] for a label ≥ K.
pub fn check_all_classes_present(labels: &[usize], num_classes: usize) -> Result<()> {
    let mut seen = vec![false; num_classes];
    for (row, &c) in labels.iter().enumerate() {
        if c >= num_classes {
            return Err(LabelError::OutOfRange {
                row,
                value: c as f64,
                num_classes,
            }
            .into());
        }
        seen[c] = true;
    }
    match seen.iter().position(|s| !s) {
        Some(class) => Err(LabelError::MissingClass { class, num_classes }.into()),
        None => Ok(()),
    }
}
