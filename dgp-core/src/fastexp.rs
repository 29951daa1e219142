//! A branch-free `exp` that the compiler can vectorise.
//!
//! Kernel matrices (one exponential per entry) and the RBF Ψ2 statistic of dgp-nested
//! (one per point and pair of inducing points, B·M(M+1)/2 of them, forward and again
//! backward) would be dominated by `f64::exp`, a scalar libm call that blocks
//! vectorisation. This module is the one home of the replacement. [`exp`] is the classic Cody–Waite reduction
//! `x = n·ln2 + r`, |r| ≤ ln2/2, a degree-13 Taylor polynomial for `e^r` (truncation error
//! below 5·10⁻¹⁸ relative) and the scaling by 2ⁿ built directly in the exponent bits. It
//! has no branches and no calls, so loops vectorise; [`exp_lanes`] and [`lane_sum`] work on
//! 8 independent lanes (two AVX2 vectors in flight) with a fixed reduction order, so they
//! vectorise *and* stay deterministic. Accuracy: within 2 ulp of
//! `f64::exp` on [−708, 709] (unit-tested); below −708 it returns exactly 0 (the true value
//! is a subnormal below 3.3·10⁻³⁰⁸); above 709 it saturates at e^709; NaN propagates.

/// `log2(e)`.
const LOG2E: f64 = std::f64::consts::LOG2_E;
/// High part of ln 2 with trailing zero bits, so `n·LN2_HI` is exact for |n| < 2¹¹ (fdlibm).
const LN2_HI: f64 = 6.931_471_803_691_238e-1;
/// Low part: ln 2 − LN2_HI.
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// 1.5·2⁵²: adding it rounds to an integer held in the low mantissa bits.
const SHIFTER: f64 = 6_755_399_441_055_744.0;
/// Below this the result is set to exactly 0.
pub const EXP_MIN: f64 = -708.0;
/// Above this the argument is clamped.
const EXP_MAX: f64 = 709.0;

/// `a·b + c`, fused when `FMA` (only instantiated where the CPU has FMA; the plain form
/// is used everywhere else, because `f64::mul_add` without hardware support is a slow
/// library call).
#[inline(always)]
pub fn madd<const FMA: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// Taylor coefficients 1/k!, k = 0..=13.
const C: [f64; 14] = [
    1.0,
    1.0,
    0.5,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5_040.0,
    1.0 / 40_320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
];

/// `e^x`, branch-free and vectorisable; see the module docs for its accuracy. The
/// polynomial is evaluated in Estrin's form (dependency depth 5 instead of 13), so that
/// several exponentials overlap in the pipeline.
#[inline(always)]
pub fn exp_with<const FMA: bool>(x: f64) -> f64 {
    let xc = x.clamp(EXP_MIN, EXP_MAX);
    let kf = madd::<FMA>(xc, LOG2E, SHIFTER);
    let n = kf - SHIFTER;
    let r = madd::<FMA>(-n, LN2_LO, madd::<FMA>(-n, LN2_HI, xc));
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let p01 = madd::<FMA>(C[1], r, C[0]);
    let p23 = madd::<FMA>(C[3], r, C[2]);
    let p45 = madd::<FMA>(C[5], r, C[4]);
    let p67 = madd::<FMA>(C[7], r, C[6]);
    let p89 = madd::<FMA>(C[9], r, C[8]);
    let p1011 = madd::<FMA>(C[11], r, C[10]);
    let p1213 = madd::<FMA>(C[13], r, C[12]);
    let p03 = madd::<FMA>(p23, r2, p01);
    let p47 = madd::<FMA>(p67, r2, p45);
    let p811 = madd::<FMA>(p1011, r2, p89);
    let p07 = madd::<FMA>(p47, r4, p03);
    let p813 = madd::<FMA>(p1213, r4, p811);
    let p = madd::<FMA>(p813, r8, p07);
    // 2^n: the low bits of kf hold n (two's complement inside the mantissa); adding the
    // bias and shifting leaves exactly (n + 1023) in the exponent field.
    let scale = f64::from_bits(kf.to_bits().wrapping_add(1023) << 52);
    let y = p * scale;
    if x < EXP_MIN { 0.0 } else { y }
}

/// `e^x` without FMA (portable).
#[inline(always)]
pub fn exp(x: f64) -> f64 {
    exp_with::<false>(x)
}

/// Block width of the helpers below: 8 independent lanes (two AVX2 vectors) keep the
/// pipeline busy and give a fixed summation order.
pub const LANES: usize = 8;

/// `e^x` of every lane.
#[inline(always)]
pub fn exp_lanes<const FMA: bool>(s: [f64; LANES]) -> [f64; LANES] {
    let mut o = [0.0; LANES];
    for i in 0..LANES {
        o[i] = exp_with::<FMA>(s[i]);
    }
    o
}

/// Sum of the lanes in a fixed order.
#[inline(always)]
pub fn lane_sum(a: &[f64; LANES]) -> f64 {
    ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs() / f64::EPSILON
    }

    #[test]
    fn matches_std_exp_within_two_ulp() {
        let mut worst: f64 = 0.0;
        let n = 200_001;
        for i in 0..n {
            let x = -708.0 + 1417.0 * i as f64 / (n - 1) as f64;
            worst = worst.max(ulps(exp(x), x.exp()));
        }
        // Dense sampling of the range where psi-statistics live.
        for i in 0..100_001 {
            let x = -50.0 + 55.0 * i as f64 / 100_000.0;
            worst = worst.max(ulps(exp(x), x.exp()));
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-708.5), 0.0);
        assert_eq!(exp(-1e300), 0.0);
        assert!(exp(1000.0).is_finite());
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert!(exp(f64::NAN).is_nan());
        // Small arguments, where the kernels spend most of their evaluations.
        for i in 0..=100_000 {
            let x = -(i as f64) * 1e-5;
            worst = worst.max(ulps(exp(x), x.exp()));
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
        // The fused variant (where the CPU has FMA) has the same accuracy.
        if is_x86_feature_detected_fma() {
            for i in 0..100_001 {
                let x = -50.0 + 55.0 * i as f64 / 100_000.0;
                assert!(ulps(exp_with::<true>(x), x.exp()) <= 2.0, "x = {x}");
            }
        }
    }

    fn is_x86_feature_detected_fma() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    #[test]
    fn lane_helpers_match_plain_loops() {
        let a: [f64; LANES] = std::array::from_fn(|i| (i as f64 * 0.37).sin() - 3.0);
        let e = exp_lanes::<false>(a);
        for (x, y) in a.iter().zip(&e) {
            assert!((x.exp() - y).abs() <= 2.0 * f64::EPSILON * y);
        }
        assert!((lane_sum(&a) - a.iter().sum::<f64>()).abs() < 1e-14);
    }
}
