//! Input checks and the one-line architecture description shared by the backends.

use crate::error::{Error, Result, check_finite};
use crate::model::Batch;
use faer::MatRef;

/// Checks test (or training) inputs `x` for a model with `input_dim` input columns: the
/// column count, at least one row, finite values. `who` names the backend and the call
/// in messages (e.g. `"svi predict"`).
///
/// # Errors
/// [`Error::Shape`], [`Error::Empty`], [`Error::NonFinite`] respectively.
pub fn check_inputs(who: &str, x: MatRef<'_, f64>, input_dim: usize) -> Result<()> {
    if x.ncols() != input_dim {
        return Err(Error::shape(format!("{who} inputs"), input_dim, x.ncols()));
    }
    if x.nrows() == 0 {
        return Err(Error::Empty(format!("{who}: no input points")));
    }
    check_finite(&format!("{who} inputs"), x)
}

/// Checks the column counts of a minibatch against the model's input and output widths.
///
/// # Errors
/// [`Error::Shape`] naming `who`.
pub fn check_batch(
    who: &str,
    batch: &Batch<'_>,
    input_dim: usize,
    output_dim: usize,
) -> Result<()> {
    if batch.x.ncols() != input_dim || batch.y.ncols() != output_dim {
        return Err(Error::shape(
            format!("{who} batch columns (x, y)"),
            format!("({input_dim}, {output_dim})"),
            format!("({}, {})", batch.x.ncols(), batch.y.ncols()),
        ));
    }
    Ok(())
}

/// The one-line architecture description of [`crate::model::Model::describe`]:
/// `"{backend} L={L} widths {w_0}→{w_1}→…→{w_L} M={m} {extra}"` for a stack of widths
/// `w_0` (the input) to `w_L`.
pub fn describe_stack(backend: &str, widths: &[usize], num_inducing: usize, extra: &str) -> String {
    let w: Vec<String> = widths.iter().map(|w| w.to_string()).collect();
    format!(
        "{backend} L={} widths {} M={num_inducing} {extra}",
        widths.len().saturating_sub(1),
        w.join("→")
    )
}
