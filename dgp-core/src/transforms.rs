//! Parameter transforms between unconstrained optimiser space and constrained model space.
//!
//! Scalar helpers live here; the matching differentiable tape operations are
//! `Tape::softplus`, `Tape::positive`, `Tape::lower_cholesky_factor`, `Tape::softmax` and
//! `Tape::log_softmax` (in `dgp_traits::tape`).

/// `softplus(x) = log(1 + eˣ)`, evaluated without overflow for large |x|.
pub fn softplus(x: f64) -> f64 {
    if x > 35.0 {
        x
    } else if x < -35.0 {
        x.exp()
    } else {
        x.exp().ln_1p()
    }
}

/// Logistic sigmoid `1 / (1 + e⁻ˣ)`, the derivative of [`softplus`].
pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// Inverse of [`softplus`] for `y > 0`: `log(eʸ − 1)`.
pub fn inv_softplus(y: f64) -> f64 {
    if y > 35.0 { y } else { y.exp_m1().ln() }
}

/// Unconstrained form of a lower-triangular factor `l` with positive diagonal: the
/// inverse of `Tape::lower_cholesky_factor(·, floor)` (strict lower triangle kept, diagonal
/// mapped through [`inv_softplus`]`(d − floor)`, upper triangle zeroed).
pub fn raw_lower_factor(l: faer::MatRef<'_, f64>, floor: f64) -> faer::Mat<f64> {
    faer::Mat::from_fn(l.nrows(), l.ncols(), |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Equal => inv_softplus((l[(i, i)] - floor).max(1e-300)),
        std::cmp::Ordering::Greater => l[(i, j)],
        std::cmp::Ordering::Less => 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softplus_round_trips() {
        for &y in &[1e-8, 1e-3, 0.5, 1.0, 7.0, 40.0, 1e3] {
            let x = inv_softplus(y);
            assert!((softplus(x) - y).abs() <= 1e-12 * y.max(1.0), "y={y}");
        }
        assert!((sigmoid(0.0) - 0.5).abs() < 1e-15);
        assert!((softplus(0.0) - std::f64::consts::LN_2).abs() < 1e-15);
    }
}
