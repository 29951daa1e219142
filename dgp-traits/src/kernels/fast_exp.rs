//! A branch-free `exp` for the kernel profiles, so that the compiler can vectorise the
//! loops that turn scaled distances into kernel values (a call to the C library's `exp`
//! per entry cannot be vectorised and dominated the cost of large cross-covariances).
//!
//! Method (Cody & Waite reduction): `x = n ln 2 + r` with `n = round(x / ln 2)` obtained by
//! the 1.5·2⁵² shifter trick, `ln 2` split in a high part with trailing zero bits and a low
//! part so `r` is exact to rounding, `|r| ≤ ln 2 / 2`; `exp(r)` by its Taylor polynomial of
//! degree 13 (truncation error < 5e-18 relative), evaluated by Estrin's scheme so that the
//! vectorised loop is not bound by one long dependency chain; the result is scaled by
//! `2ⁿ` built directly from its bits. Accuracy: within 2 ulp of the correctly rounded value
//! on `[−708, 709]` (tested against `f64::exp`). Below −708 (where `exp(x) < 3.3e-308`) the
//! result is 0; NaN propagates.

const SHIFT: f64 = 6_755_399_441_055_744.0; // 1.5 · 2^52
/// High part of ln 2 (fdlibm's `ln2HI`, 6.93147180369123816490e-01): its trailing 32 bits
/// are zero, so `n · LN2_HI` is exact for |n| < 2²⁰.
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
/// ln 2 − LN2_HI (fdlibm's `ln2LO`, 1.90821492927058770002e-10).
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// Inputs below this give 0.
const LOWER: f64 = -708.0;

/// `exp(x)` for `x ≤ 709`, within 2 ulp; exactly 0 for `x < −708`. See the module docs.
#[inline(always)]
pub(crate) fn exp(x: f64) -> f64 {
    let xc = if x < LOWER { LOWER } else { x };
    let t = xc * std::f64::consts::LOG2_E + SHIFT;
    let n = t - SHIFT;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    // Taylor polynomial of degree 13 by Estrin's scheme (short dependency chains, so the
    // vectorised loop is not latency bound).
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let a0 = 1.0 + r;
    let a1 = 0.5 + r * (1.0 / 6.0);
    let a2 = 1.0 / 24.0 + r * (1.0 / 120.0);
    let a3 = 1.0 / 720.0 + r * (1.0 / 5_040.0);
    let a4 = 1.0 / 40_320.0 + r * (1.0 / 362_880.0);
    let a5 = 1.0 / 3_628_800.0 + r * (1.0 / 39_916_800.0);
    let a6 = 1.0 / 479_001_600.0 + r * (1.0 / 6_227_020_800.0);
    let b0 = a0 + r2 * a1;
    let b1 = a2 + r2 * a3;
    let b2 = a4 + r2 * a5;
    let b3 = a6;
    let c0 = b0 + r4 * b1;
    let c1 = b2 + r4 * b3;
    let p = c0 + r8 * c1;
    let scale = f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
    let v = p * scale;
    if x < LOWER { 0.0 } else { v }
}

#[cfg(test)]
mod tests {
    use super::exp;

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn matches_std_exp_within_two_ulp() {
        let mut worst = 0;
        let n = 200_000;
        for i in 0..=n {
            let x = -708.0 + 1417.0 * i as f64 / n as f64;
            let x = x.min(709.0);
            worst = worst.max(ulps(exp(x), x.exp()));
        }
        // Small arguments, where the kernels spend most of their evaluations.
        for i in 0..=n {
            let x = -(i as f64) * 1e-5;
            worst = worst.max(ulps(exp(x), x.exp()));
        }
        assert!(worst <= 2, "worst error {worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-709.0), 0.0);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert!(exp(f64::NAN).is_nan());
    }
}
