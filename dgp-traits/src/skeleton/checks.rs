//! Input checks and the one-line architecture description shared by the backends.

use crate::model::Batch;
use dgp_core::{Error, Result, check_finite};
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

/// Largest number of layers a configuration may ask for.
pub const MAX_LAYERS: usize = 100;
/// Largest hidden width (GPs per hidden layer) a configuration may ask for.
pub const MAX_WIDTH: usize = 10_000;
/// Largest number of inducing points per layer a configuration may ask for (one GP's
/// M×M covariance is 8·M² bytes: 800 MB at this limit).
pub const MAX_INDUCING: usize = 10_000;

/// Bounds on the sizes of a deep-GP stack, checked by every backend's configuration so
/// that an edited config or model file with an absurd size is a typed error before
/// anything is allocated (rather than an allocation panic or an out-of-memory abort).
///
/// # Errors
/// [`dgp_core::Error::Config`] naming `backend` and the first size out of range.
pub fn check_sizes(
    backend: &str,
    layers: usize,
    widths: &[usize],
    num_inducing: usize,
) -> dgp_core::Result<()> {
    let over = |what: &str, v: usize, max: usize| {
        Err(dgp_core::Error::config(
            what,
            format!("must be at most {max} for {backend}, got {v}"),
        ))
    };
    if layers > MAX_LAYERS {
        return over("layers", layers, MAX_LAYERS);
    }
    if num_inducing > MAX_INDUCING {
        return over("num_inducing", num_inducing, MAX_INDUCING);
    }
    if let Some(&w) = widths.iter().find(|&&w| w > MAX_WIDTH) {
        return over("hidden_width", w, MAX_WIDTH);
    }
    Ok(())
}
