//! Standard normal pdf, cdf and log-cdf in full double precision (private helpers).
//!
//! Φ follows W. J. Cody, "Rational Chebyshev approximations for the error function",
//! *Math. Comp.* 23 (1969) 631–637, in the arrangement of his ANORM routine: a rational
//! approximation of Φ(x) − ½ for |x| ≤ 0.674, and of the scaled tail e^{x²/2}·Φ(−|x|)
//! for 0.674 < |x| ≤ √32 and for |x| > √32 (in 1/x²). The Gaussian factor is evaluated as
//! `exp(−s²/2)·exp(−(x−s)(x+s)/2)` with `s` = x rounded down to a multiple of 1/16 so that
//! the large exponent is exact. log Φ(x) for very negative x is computed from the same
//! pieces *in log space*, so it stays accurate far beyond the underflow of Φ itself
//! (e.g. log Φ(−40) ≈ −804.608). The relative accuracy is ≈ 1e-15 throughout.
//!
//! A crate-wide `special` module is planned; these private copies keep the likelihoods
//! independent of it until the two are merged.

/// √(2π).
const SQRT_2PI: f64 = 2.506_628_274_631_000_7;
/// ln √(2π).
pub(crate) const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;
/// 1/√(2π).
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
/// The boundary of the central region, Φ⁻¹(3/4).
const CENTRAL: f64 = 0.674_489_75;
/// √32, the boundary between the two tail approximations.
const SQRT_32: f64 = 5.656_854_249_492_381;

/// Cody's coefficients for Φ(x) − ½ = x·P(x²)/Q(x²), |x| ≤ 0.674.
const A: [f64; 5] = [
    2.235_252_035_460_683_9,
    161.028_231_068_555_88,
    1_067.689_485_460_371,
    18_154.981_253_343_56,
    0.065_682_337_918_207_45,
];
const B: [f64; 4] = [
    47.202_581_904_688_24,
    976.098_551_737_776_7,
    10_260.932_208_618_978,
    45_507.789_335_026_73,
];
/// Scaled tail e^{y²/2}Φ(−y) = P(y)/Q(y), 0.674 < y ≤ √32.
const C: [f64; 9] = [
    0.398_941_512_088_134_66,
    8.883_149_794_388_376,
    93.506_656_132_177_86,
    597.270_276_394_800_3,
    2_494.537_585_290_372_7,
    6_848.190_450_536_283,
    11_602.651_437_647_35,
    9_842.714_838_383_978,
    1.076_557_677_372_019_2e-8,
];
const D: [f64; 8] = [
    22.266_688_044_328_117,
    235.387_901_782_625,
    1_519.377_599_407_554_8,
    6_485.558_298_266_761,
    18_615.571_640_885_097,
    34_900.952_721_145_98,
    38_912.003_286_093_27,
    19_685.429_676_859_99,
];
/// Scaled tail for y > √32: e^{y²/2}Φ(−y) = (1/√(2π) − z·P(z)/Q(z)) / y, z = 1/y².
const P: [f64; 6] = [
    0.215898534057957,
    0.127_401_161_160_247_36,
    0.022_235_277_870_649_807,
    0.001_421_619_193_227_893_5,
    2.911_287_495_116_879e-5,
    0.023_073_441_764_940_173,
];
const Q: [f64; 5] = [
    1.284260096144911,
    0.468_238_212_480_865_1,
    0.065_988_137_868_928_55,
    0.003_782_396_332_027_582_4,
    7.297_515_550_839_662e-5,
];

/// Standard normal density φ(x).
pub(crate) fn norm_pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / SQRT_2PI
}

/// log φ(x).
pub(crate) fn norm_logpdf(x: f64) -> f64 {
    -0.5 * x * x - LN_SQRT_2PI
}

/// Φ(x) − ½ for |x| ≤ 0.674.
fn central(x: f64) -> f64 {
    let y = x.abs();
    if y <= f64::EPSILON * 0.5 {
        return x * A[3] / B[3];
    }
    let xsq = x * x;
    let mut num = A[4] * xsq;
    let mut den = xsq;
    for i in 0..3 {
        num = (num + A[i]) * xsq;
        den = (den + B[i]) * xsq;
    }
    x * (num + A[3]) / (den + B[3])
}

/// For y > 0.674: `(s, del, r)` with Φ(−y) = exp(−s²/2)·exp(−del/2)·r.
fn tail_parts(y: f64) -> (f64, f64, f64) {
    let r = if y <= SQRT_32 {
        let mut num = C[8] * y;
        let mut den = y;
        for i in 0..7 {
            num = (num + C[i]) * y;
            den = (den + D[i]) * y;
        }
        (num + C[7]) / (den + D[7])
    } else {
        let z = 1.0 / (y * y);
        let mut num = P[5] * z;
        let mut den = z;
        for i in 0..4 {
            num = (num + P[i]) * z;
            den = (den + Q[i]) * z;
        }
        (INV_SQRT_2PI - z * (num + P[4]) / (den + Q[4])) / y
    };
    let s = (y * 16.0).trunc() / 16.0;
    let del = (y - s) * (y + s);
    (s, del, r)
}

/// Φ(−y) for y > 0.674 (underflows to 0 beyond y ≈ 38.5).
fn upper_tail(y: f64) -> f64 {
    let (s, del, r) = tail_parts(y);
    (-0.5 * s * s).exp() * (-0.5 * del).exp() * r
}

/// log Φ(−y) for y > 0.674, finite far beyond the underflow of Φ(−y).
fn log_upper_tail(y: f64) -> f64 {
    let (s, del, r) = tail_parts(y);
    -0.5 * s * s - 0.5 * del + r.ln()
}

/// Standard normal distribution function Φ(x).
pub(crate) fn norm_cdf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.is_infinite() {
        return if x > 0.0 { 1.0 } else { 0.0 };
    }
    let y = x.abs();
    if y <= CENTRAL {
        0.5 + central(x)
    } else if x < 0.0 {
        upper_tail(y)
    } else {
        1.0 - upper_tail(y)
    }
}

/// log Φ(x), accurate for very negative x (≈ −x²/2 − log(−x) − ½log 2π).
pub(crate) fn norm_logcdf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.is_infinite() {
        return if x > 0.0 { 0.0 } else { f64::NEG_INFINITY };
    }
    let y = x.abs();
    if y <= CENTRAL {
        (0.5 + central(x)).ln()
    } else if x < 0.0 {
        log_upper_tail(y)
    } else {
        (-upper_tail(y)).ln_1p()
    }
}

/// The ratio φ(x)/Φ(x) (inverse Mills ratio of −x), stable for very negative x.
pub(crate) fn norm_pdf_over_cdf(x: f64) -> f64 {
    if x >= -CENTRAL {
        norm_pdf(x) / norm_cdf(x)
    } else {
        (norm_logpdf(x) - norm_logcdf(x)).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (x, Φ(x), log Φ(x)) to 20 digits (mpmath, 40-digit arithmetic).
    const TABLE: [(f64, f64, f64); 13] = [
        (-40.0, 0.0, -804.608_442_013_753_8), // Φ = 3.6558935409150297e-350 underflows
        (-38.0, 0.0, -726.557_216_018_820_1), // Φ = 2.8854283600687843e-316 is subnormal
        (-20.0, 2.753_624_118_606_233_7e-89, -203.917_155_371_097_26),
        (-10.0, 7.619_853_024_160_526e-24, -53.231_285_150_512_47),
        (-5.0, 2.866_515_718_791_939e-7, -15.064_998_393_988_726),
        (-1.0, 0.158_655_253_931_457_05, -1.841_021_645_009_263_5),
        (-0.5, 0.308_537_538_725_986_9, -1.175_911_761_593_618_6),
        (0.3, 0.617_911_422_188_952_6, -0.481_410_161_588_481_2),
        (1.0, 0.841_344_746_068_542_9, -0.172_753_779_023_449_9),
        (3.0, 0.998_650_101_968_369_9, -0.001_350_809_964_748_193_8),
        (5.0, 0.999_999_713_348_428_1, -2.866_516_129_637_636e-7),
        (8.0, 0.999_999_999_999_999_4, -6.220_960_574_271_786e-16),
        (9.0, 1.0, -1.128_588_405_953_840_6e-19),
    ];

    #[test]
    fn cdf_and_logcdf_match_high_precision_values() {
        for &(x, p, lp) in &TABLE {
            let c = norm_cdf(x);
            if p > 0.0 {
                assert!((c - p).abs() <= 2e-15 * p, "Φ({x}) = {c:e}, want {p:e}");
            } else {
                // Φ underflows to a subnormal or 0 there; only its log is checked.
                assert!(c < 1e-300);
            }
            let l = norm_logcdf(x);
            assert!(
                (l - lp).abs() <= 2e-15 * lp.abs(),
                "log Φ({x}) = {l:e}, want {lp:e}"
            );
        }
    }

    #[test]
    fn symmetry_and_extremes() {
        for i in -80..=80 {
            let x = i as f64 * 0.1;
            let s = norm_cdf(x) + norm_cdf(-x);
            assert!((s - 1.0).abs() <= 2e-16, "x={x}: {s}");
        }
        assert_eq!(norm_cdf(0.0), 0.5);
        assert_eq!(norm_cdf(f64::NEG_INFINITY), 0.0);
        assert_eq!(norm_cdf(f64::INFINITY), 1.0);
        assert_eq!(norm_logcdf(f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(norm_logcdf(f64::INFINITY), 0.0);
        assert!(norm_logcdf(-1e200).is_infinite());
        // Asymptotic check far out: log Φ(x) = −x²/2 − log(−x) − ½log 2π + log(1 − 1/x² + 3/x⁴ …).
        let x: f64 = -1e4;
        let asym = -0.5 * x * x - (-x).ln() - LN_SQRT_2PI + (-1.0 / (x * x)).ln_1p();
        assert!((norm_logcdf(x) - asym).abs() <= 1e-15 * asym.abs());
        // Mills ratio: φ(x)/Φ(x) → −x for very negative x.
        let r = norm_pdf_over_cdf(-1e3);
        assert!((r - 1e3).abs() / 1e3 < 2e-6);
        assert!((norm_pdf_over_cdf(0.0) - 2.0 * INV_SQRT_2PI).abs() <= 2e-16);
    }
}
