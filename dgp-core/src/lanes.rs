//! Sums with eight independent accumulators: the compiler vectorises them (one long
//! dependency chain of additions runs at one element per add latency, four to eight times
//! slower), and the order of additions is fixed, so results are deterministic.

const LANES: usize = 8;

/// Combines the lane accumulators and the tail in a fixed order.
#[inline(always)]
fn finish(acc: [f64; LANES], tail: f64) -> f64 {
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// `Σ f(xᵢ)` over a slice, in a fixed lane order.
#[inline(always)]
pub fn sum_map(x: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..LANES {
            acc[k] += f(c[k]);
        }
    }
    let mut tail = 0.0;
    for &v in rest {
        tail += f(v);
    }
    finish(acc, tail)
}

/// `Σ xᵢ yᵢ` over two slices of the same length (the shorter one's length otherwise), in
/// a fixed lane order.
#[inline]
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let mut acc = [0.0; LANES];
    let (xc, yc) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for k in 0..LANES {
            acc[k] += a[k] * b[k];
        }
    }
    let mut tail = 0.0;
    for (a, b) in xr.iter().zip(yr) {
        tail += a * b;
    }
    finish(acc, tail)
}

/// `Σ xᵢ`.
#[inline]
pub fn sum(x: &[f64]) -> f64 {
    sum_map(x, |v| v)
}

/// `Σ xᵢ²`.
#[inline]
pub fn sum_squares(x: &[f64]) -> f64 {
    sum_map(x, |v| v * v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn lane_sums_match_plain_sums() {
        for n in [0usize, 1, 7, 8, 9, 31, 100] {
            let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
            let plain: f64 = x.iter().sum();
            let sq: f64 = x.iter().map(|v| v * v).sum();
            assert!((super::sum(&x) - plain).abs() <= 1e-12 * (1.0 + plain.abs()));
            assert!((super::sum_squares(&x) - sq).abs() <= 1e-12 * (1.0 + sq));
            let y: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).cos()).collect();
            let d: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
            assert!((super::dot(&x, &y) - d).abs() <= 1e-12 * (1.0 + d.abs()));
        }
    }
}
