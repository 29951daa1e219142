//! Theorem 1's sequential conditionals (Lindinger et al. 2020) on "fields": every entry of the
//! small per-point matrices (S̃, B, W, Σ̂, C) is a 1×R row on the tape holding that entry
//! for all R = points × samples rows at once, so each row's factorisation and solves use
//! that row's own values (pitfall 1) and the tape differentiates them with its elementwise
//! rules. A structurally zero entry is `None` and costs nothing: for STAR the hidden-layer
//! recursion therefore splits into τ independent chains by itself (Lindinger et al. 2020, §3.2).

use dgp_traits::tape::{Tape, Var};

/// One entry of a per-row matrix: `None` when it is zero by structure.
pub type Field = Option<Var>;

/// Pivot floor of the per-row Cholesky factorisations (after the 1e-6 jitter).
pub const PIVOT_FLOOR: f64 = 1e-12;

/// `a + b`.
pub fn add(t: &mut Tape, a: Field, b: Field) -> Field {
    match (a, b) {
        (Some(x), Some(y)) => Some(t.add(x, y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// `a − b`.
pub fn sub(t: &mut Tape, a: Field, b: Field) -> Field {
    match (a, b) {
        (Some(x), Some(y)) => Some(t.sub(x, y)),
        (x, None) => x,
        (None, Some(y)) => Some(t.neg(y)),
    }
}

/// `a · b`.
pub fn mul(t: &mut Tape, a: Field, b: Field) -> Field {
    match (a, b) {
        (Some(x), Some(y)) => Some(t.mul(x, y)),
        _ => None,
    }
}

/// `Σ_k a_k b_k` in order.
pub fn dot(t: &mut Tape, pairs: impl IntoIterator<Item = (Field, Field)>) -> Field {
    let mut acc = None;
    for (a, b) in pairs {
        let p = mul(t, a, b);
        acc = add(t, acc, p);
    }
    acc
}

/// What a layer's conditional yields.
#[derive(Clone, Debug)]
pub struct Conditional {
    /// mû^l, T_l entries.
    pub mean: Vec<Var>,
    /// Σ̂^l (lower triangle, `cov[t][t']` for t' ≤ t).
    pub cov: Vec<Vec<Field>>,
    /// W = C⁻¹B, P×T_l.
    pub w: Vec<Vec<Field>>,
}

/// Lindinger et al. 2020, Theorem 1, for one layer: with `c` the lower factor of S̃^{<l,<l} (P×P fields,
/// rows of length i+1), `r` = C⁻¹(f^{<l} − mũ^{<l}) (which is exactly the stacked
/// standard-normal draws of the earlier layers, since each f^{l'} was drawn as
/// mû + chol(Σ̂)ε), `b` = S̃^{<l,l} (P×T_l), `s` = S̃^{ll} (lower triangle) and `mt` = mũ^l:
/// W = C⁻¹B, mû = mũ + Wᵀr, Σ̂ = S̃^{ll} − WᵀW (eqs. 10–11).
pub fn condition(
    t: &mut Tape,
    c: &[Vec<Field>],
    r: &[Var],
    b: &[Vec<Field>],
    s: &[Vec<Field>],
    mt: &[Var],
) -> Conditional {
    let p = c.len();
    let tl = mt.len();
    let mut w: Vec<Vec<Field>> = vec![vec![None; tl]; p];
    for col in 0..tl {
        for i in 0..p {
            let acc = dot(t, (0..i).map(|j| (c[i][j], w[j][col])));
            let num = sub(t, b[i][col], acc);
            w[i][col] = match (num, c[i][i]) {
                (Some(x), Some(d)) => Some(t.div(x, d)),
                _ => None,
            };
        }
    }
    let mean = (0..tl)
        .map(|col| {
            let shift = dot(t, (0..p).map(|i| (w[i][col], Some(r[i]))));
            add(t, Some(mt[col]), shift).unwrap_or(mt[col])
        })
        .collect();
    let cov = (0..tl)
        .map(|a| {
            (0..=a)
                .map(|bb| {
                    let ww = dot(t, (0..p).map(|i| (w[i][a], w[i][bb])));
                    sub(t, s[a][bb], ww)
                })
                .collect()
        })
        .collect();
    Conditional { mean, cov, w }
}

/// Lower Cholesky factor of `cov + jitter·I` per row (Lindinger et al. 2020, Theorem 1), each pivot
/// floored at [`PIVOT_FLOOR`] (a row whose Σ̂ lost positive definiteness to rounding gets
/// a tiny variance instead of a NaN).
pub fn cholesky(t: &mut Tape, cov: &[Vec<Field>], jitter: f64) -> Vec<Vec<Field>> {
    let n = cov.len();
    let mut l: Vec<Vec<Field>> = (0..n).map(|i| vec![None; i + 1]).collect();
    for i in 0..n {
        for j in 0..=i {
            let acc = dot(t, (0..j).map(|k| (l[i][k], l[j][k])));
            let v = sub(t, cov[i][j], acc);
            if i == j {
                let v = v.unwrap_or_else(|| t.constant_scalar(0.0));
                let v = t.add_scalar(v, jitter);
                let v = t.clamp_min(v, PIVOT_FLOOR);
                l[i][i] = Some(t.sqrt(v));
            } else {
                l[i][j] = match (v, l[j][j]) {
                    (Some(x), Some(d)) => Some(t.div(x, d)),
                    _ => None,
                };
            }
        }
    }
    l
}
