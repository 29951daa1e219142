//! Special functions of the standard normal distribution, to full double precision.
//!
//! * [`norm_cdf`] / [`norm_sf`]: Φ(x) and 1 − Φ(x) by W. J. Cody's rational Chebyshev
//!   approximations (Cody 1969, "Rational Chebyshev approximations for the error function",
//!   Math. Comp. 23; the `ANORM` routine as refined in R's `pnorm.c`). Both tails are
//!   computed directly, so `norm_cdf(-30)` and `norm_sf(30)` keep full relative precision
//!   (no `1 − Φ` cancellation); the relative error is below 1e-15 wherever the result is
//!   a normal (not subnormal) double.
//! * [`norm_log_cdf`]: log Φ(x) from the same pieces in log space, finite far beyond the
//!   underflow of Φ (log Φ(−40) = −804.608…); [`norm_pdf_over_cdf`]: the ratio φ(x)/Φ(x)
//!   (inverse Mills ratio), stable for very negative x. Both serve the probit likelihood.
//! * [`norm_pdf`] / [`norm_log_pdf`]: φ(x), with the split-exponent trick for |x| ≥ 5 so the
//!   rounding of x² does not cost relative accuracy in the tails.
//! * [`norm_ppf`]: Φ⁻¹(p) by Wichura's algorithm AS 241 (`PPND16`, Appl. Statist. 37, 1988),
//!   accurate to about 1 part in 10¹⁶.
//! * [`log_sum_exp`]: the stable log Σ exp used by mixture densities.

// The published coefficients are kept digit for digit as printed.
#![allow(clippy::excessive_precision)]

/// 1/√(2π).
pub const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_677_939_946_059_934;
/// ½ log(2π).
pub const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_741_780_329_736_406;

/// The boundary of Cody's central interval, Φ⁻¹(3/4) rounded as in `ANORM`.
const CENTRAL: f64 = 0.674_489_75;
/// √32, the boundary between Cody's two tail approximations.
const SQRT_32: f64 = 5.656_854_249_492_380_195_206_754_896_84;

// Cody's coefficients (first interval |x| ≤ 0.674…, second interval up to √32, tail).
const A: [f64; 5] = [
    2.235_252_035_460_683_928_7,
    161.028_231_068_555_878_81,
    1_067.689_485_460_370_958_2,
    18_154.981_253_343_561_249,
    0.065_682_337_918_207_449_113,
];
const B: [f64; 4] = [
    47.202_581_904_688_241_87,
    976.098_551_737_776_693_22,
    10_260.932_208_618_978_205,
    45_507.789_335_026_729_956,
];
const C: [f64; 9] = [
    0.398_941_512_088_134_667_64,
    8.883_149_794_388_375_941_2,
    93.506_656_132_177_855_979,
    597.270_276_394_800_262_26,
    2_494.537_585_290_372_671_1,
    6_848.190_450_536_282_332_6,
    11_602.651_437_647_350_124,
    9_842.714_838_383_978_021_8,
    1.076_557_677_372_019_231_7e-8,
];
const D: [f64; 8] = [
    22.266_688_044_328_115_691,
    235.387_901_782_624_998_61,
    1_519.377_599_407_554_805,
    6_485.558_298_266_760_755,
    18_615.571_640_885_098_091,
    34_900.952_721_145_977_266,
    38_912.003_286_093_271_411,
    19_685.429_676_859_990_727,
];
const P: [f64; 6] = [
    0.215_898_534_057_956_99,
    0.127_401_161_160_247_363_9,
    0.022_235_277_870_649_807,
    0.001_421_619_193_227_893_466,
    2.911_287_495_116_879_2e-5,
    0.023_073_441_764_940_173_03,
];
const Q: [f64; 5] = [
    1.284_260_096_144_911_21,
    0.468_238_212_480_865_118,
    0.065_988_137_868_928_551_5,
    0.003_782_396_332_027_582_44,
    7.297_515_550_839_662_05e-5,
];

/// Φ(x) − ½ = x·P(x²)/Q(x²) for |x| ≤ [`CENTRAL`] (Cody's first interval).
fn central(x: f64) -> f64 {
    let (mut xnum, mut xden) = (0.0, 0.0);
    if x.abs() > f64::EPSILON * 0.5 {
        let xsq = x * x;
        xnum = A[4] * xsq;
        xden = xsq;
        for i in 0..3 {
            xnum = (xnum + A[i]) * xsq;
            xden = (xden + B[i]) * xsq;
        }
    }
    x * (xnum + A[3]) / (xden + B[3])
}

/// For finite y > [`CENTRAL`]: `(y₁, δ, r)` with Φ(−y) = exp(−y₁²/2)·exp(−δ/2)·r, where
/// r = e^{y²/2}Φ(−y) is Cody's scaled tail (second interval up to √32, then in 1/y²) and
/// y² = y₁² + δ is split with y₁ = ⌊16y⌋/16, so that y₁² is exact and the rounding of y²
/// does not spoil relative accuracy (Cody's `do_del`).
fn tail_parts(y: f64) -> (f64, f64, f64) {
    let r = if y <= SQRT_32 {
        let mut xnum = C[8] * y;
        let mut xden = y;
        for i in 0..7 {
            xnum = (xnum + C[i]) * y;
            xden = (xden + D[i]) * y;
        }
        (xnum + C[7]) / (xden + D[7])
    } else {
        let xsq = 1.0 / (y * y);
        let mut xnum = P[5] * xsq;
        let mut xden = xsq;
        for i in 0..4 {
            xnum = (xnum + P[i]) * xsq;
            xden = (xden + Q[i]) * xsq;
        }
        let temp = xsq * (xnum + P[4]) / (xden + Q[4]);
        (FRAC_1_SQRT_2PI - temp) / y
    };
    let y1 = (y * 16.0).trunc() / 16.0;
    let del = (y - y1) * (y + y1);
    (y1, del, r)
}

/// Φ(−y) for y > [`CENTRAL`]; 0 from y = 40 on (the true value is below the smallest
/// subnormal there), which also covers y = +∞.
fn upper_tail(y: f64) -> f64 {
    if y < 40.0 {
        let (y1, del, r) = tail_parts(y);
        (-y1 * y1 * 0.5).exp() * (-del * 0.5).exp() * r
    } else {
        0.0
    }
}

/// Φ(x) and 1 − Φ(x) together, each to full relative precision.
pub fn norm_cdf_both(x: f64) -> (f64, f64) {
    if x.is_nan() {
        return (f64::NAN, f64::NAN);
    }
    let y = x.abs();
    if y <= CENTRAL {
        let temp = central(x);
        return (0.5 + temp, 0.5 - temp);
    }
    // `lower` = P(Z > y) = Φ(−y), the small tail.
    let lower = upper_tail(y);
    if x > 0.0 {
        (1.0 - lower, lower)
    } else {
        (lower, 1.0 - lower)
    }
}

/// Standard normal CDF Φ(x) (Cody's algorithm, full double precision).
pub fn norm_cdf(x: f64) -> f64 {
    norm_cdf_both(x).0
}

/// Standard normal survival function 1 − Φ(x) = Φ(−x), accurate in the upper tail.
pub fn norm_sf(x: f64) -> f64 {
    norm_cdf_both(x).1
}

/// log Φ(x), accurate for very negative x far beyond the underflow of Φ itself
/// (e.g. log Φ(−40) = −804.608…, where Φ(−40) ≈ 3.7e-350 is not representable).
///
/// Uses the pieces of [`norm_cdf`] (Cody 1969) in log space: for x < −0.674 it is
/// −y₁²/2 − δ/2 + log r with y = −x, y₁²+δ = y² and r = e^{y²/2}Φ(−y) Cody's scaled tail,
/// so it behaves as −x²/2 − log(−x) − ½log 2π for x → −∞. Elsewhere it is log Φ(x)
/// (via `ln_1p(−Φ(−x))` for x > 0.674). Relative accuracy ≈ 1e-15; returns −∞ for
/// x = −∞ (and for x so negative that x² overflows), 0 for +∞ and NaN for NaN. Used by the
/// probit likelihood with ε = 0 (Salimbeni & Deisenroth 2017, §3).
pub fn norm_log_cdf(x: f64) -> f64 {
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
        let (y1, del, r) = tail_parts(y);
        -0.5 * y1 * y1 - 0.5 * del + r.ln()
    } else {
        (-upper_tail(y)).ln_1p()
    }
}

/// The ratio φ(x)/Φ(x) (the inverse Mills ratio of −x, i.e. d log Φ(x)/dx), stable for very
/// negative x where both φ and Φ underflow: there it is exp(log φ(x) − log Φ(x)) with
/// [`norm_log_cdf`], and it tends to −x as x → −∞. It is the derivative of the probit
/// log-likelihood log Φ(f) (Salimbeni & Deisenroth 2017, §3).
pub fn norm_pdf_over_cdf(x: f64) -> f64 {
    if x >= -CENTRAL {
        norm_pdf(x) / norm_cdf(x)
    } else {
        (norm_log_pdf(x) - norm_log_cdf(x)).exp()
    }
}

/// Standard normal density φ(x) = exp(−x²/2)/√(2π).
///
/// For |x| ≥ 5 the exponent is split as x = x₁ + x₂ with x₁ carrying 16 fractional bits, so
/// x₁² is exact and the result keeps full relative precision (as R's `dnorm`).
pub fn norm_pdf(x: f64) -> f64 {
    let y = x.abs();
    if y < 5.0 {
        FRAC_1_SQRT_2PI * (-0.5 * y * y).exp()
    } else if y.is_finite() && y < 40.0 {
        let y1 = (y * 65_536.0).round() / 65_536.0;
        let y2 = y - y1;
        FRAC_1_SQRT_2PI * ((-0.5 * y1 * y1).exp() * ((-0.5 * y2 - y1) * y2).exp())
    } else if y.is_nan() {
        f64::NAN
    } else {
        0.0
    }
}

/// log φ(x) = −x²/2 − ½ log(2π).
pub fn norm_log_pdf(x: f64) -> f64 {
    -0.5 * x * x - LN_SQRT_2PI
}

/// log N(y | μ, v) = −½ log(2πv) − (y − μ)²/(2v), for variance `v > 0`.
pub fn gaussian_log_density(y: f64, mean: f64, var: f64) -> f64 {
    let d = y - mean;
    -LN_SQRT_2PI - 0.5 * var.ln() - 0.5 * d * d / var
}

// Wichura's AS 241 (PPND16) coefficients.
const PA: [f64; 8] = [
    3.387_132_872_796_366_608,
    133.141_667_891_784_377_45,
    1_971.590_950_306_551_442_7,
    13_731.693_765_509_461_125,
    45_921.953_931_549_871_457,
    67_265.770_927_008_700_853,
    33_430.575_583_588_128_105,
    2_509.080_928_730_122_672_7,
];
const PB: [f64; 8] = [
    1.0,
    42.313_330_701_600_911_252,
    687.187_007_492_057_908_3,
    5_394.196_021_424_751_107_7,
    21_213.794_301_586_595_867,
    39_307.895_800_092_710_61,
    28_729.085_735_721_942_674,
    5_226.495_278_852_854_561,
];
const PC: [f64; 8] = [
    1.423_437_110_749_683_577_34,
    4.630_337_846_156_545_295_9,
    5.769_497_221_460_691_405_5,
    3.647_848_324_763_204_605_04,
    1.270_458_252_452_368_382_58,
    0.241_780_725_177_450_611_77,
    0.022_723_844_989_269_184_583_3,
    7.745_450_142_783_414_076_4e-4,
];
const PD: [f64; 8] = [
    1.0,
    2.053_191_626_637_758_821_87,
    1.676_384_830_183_803_849_4,
    0.689_767_334_985_100_004_55,
    0.148_103_976_427_480_074_59,
    0.015_198_666_563_616_457_196_6,
    5.475_938_084_995_344_946e-4,
    1.050_750_071_644_416_843_24e-9,
];
const PE: [f64; 8] = [
    6.657_904_643_501_103_777_2,
    5.463_784_911_164_114_369_9,
    1.784_826_539_917_291_335_8,
    0.296_560_571_828_504_891_23,
    0.026_532_189_526_576_123_093,
    0.001_242_660_947_388_078_438_6,
    2.711_555_568_743_487_578_15e-5,
    2.010_334_399_292_288_132_65e-7,
];
const PF: [f64; 8] = [
    1.0,
    0.599_832_206_555_887_937_69,
    0.136_929_880_922_735_805_31,
    0.014_875_361_290_850_614_852_5,
    7.868_691_311_456_132_591e-4,
    1.846_318_317_510_054_681_8e-5,
    1.421_511_758_316_445_888_7e-7,
    2.044_263_103_389_939_785_64e-15,
];

fn poly8(c: &[f64; 8], r: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &ci| acc * r + ci)
}

/// Standard normal quantile Φ⁻¹(p) (Wichura's AS 241, relative accuracy ≈ 1e-16).
///
/// Returns −∞ for p = 0, +∞ for p = 1 and NaN outside [0, 1]. For p close to 1 the
/// accuracy is limited by the representation of 1 − p; use the symmetry
/// Φ⁻¹(p) = −Φ⁻¹(1 − p) with a small argument where possible.
pub fn norm_ppf(p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) || p.is_nan() {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180_625 - q * q;
        return q * poly8(&PA, r) / poly8(&PB, r);
    }
    let r = if q < 0.0 { p } else { 1.0 - p };
    let r = (-r.ln()).sqrt();
    let val = if r <= 5.0 {
        let r = r - 1.6;
        poly8(&PC, r) / poly8(&PD, r)
    } else {
        let r = r - 5.0;
        poly8(&PE, r) / poly8(&PF, r)
    };
    if q < 0.0 { -val } else { val }
}

/// log Σᵢ exp(aᵢ), stable for any finite or −∞ entries. Returns −∞ for an empty slice or
/// when every entry is −∞; +∞ if any entry is +∞; NaN if any entry is NaN.
pub fn log_sum_exp(a: &[f64]) -> f64 {
    let m = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if a.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    if m.is_infinite() {
        return m;
    }
    let s: f64 = a.iter().map(|&v| (v - m).exp()).sum();
    m + s.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        if a == b { 0.0 } else { (a - b).abs() / b.abs() }
    }

    // (x, Φ(x), φ(x)) from mpmath at 40 digits.
    const CDF_PDF: [(f64, f64, f64); 21] = [
        (
            -37.0,
            5.725_571_222_524_576_822_7e-300,
            2.120_006_551_524_605_626_9e-298,
        ),
        (
            -30.0,
            4.906_713_927_148_187_059_5e-198,
            1.473_646_134_878_547_519e-196,
        ),
        (
            -20.0,
            2.753_624_118_606_233_695_1e-89,
            5.520_948_362_159_763_189_6e-88,
        ),
        (
            -10.0,
            7.619_853_024_160_526_066e-24,
            7.694_598_626_706_419_346_3e-23,
        ),
        (
            -8.0,
            6.220_960_574_271_784_123_5e-16,
            5.052_271_083_536_892_288e-15,
        ),
        (
            -6.0,
            9.865_876_450_376_981_407e-10,
            6.075_882_849_823_285_487e-9,
        ),
        (
            -5.65,
            8.022_391_850_663_497_599_1e-9,
            4.666_886_797_594_253_557_7e-8,
        ),
        (
            -5.0,
            2.866_515_718_791_939_116_7e-7,
            1.486_719_514_734_297_707_9e-6,
        ),
        (
            -3.0,
            1.349_898_031_630_094_526_7e-3,
            4.431_848_411_938_007_175_6e-3,
        ),
        (
            -1.5,
            6.680_720_126_885_806_600_4e-2,
            1.295_175_956_658_917_276_1e-1,
        ),
        (
            -0.7,
            2.419_636_522_230_730_286_2e-1,
            3.122_539_333_667_612_668_1e-1,
        ),
        (
            -0.6,
            2.742_531_177_500_735_876_9e-1,
            3.332_246_028_917_996_400_9e-1,
        ),
        (
            -0.5,
            3.085_375_387_259_868_963_6e-1,
            3.520_653_267_642_994_777_7e-1,
        ),
        (
            -0.001,
            4.996_010_577_860_889_374_1e-1,
            3.989_420_809_303_423_45e-1,
        ),
        (0.0, 0.5, 3.989_422_804_014_326_779_4e-1),
        (
            0.3,
            6.179_114_221_889_526_330_7e-1,
            3.813_878_154_605_240_868_8e-1,
        ),
        (
            1.0,
            8.413_447_460_685_429_485_9e-1,
            2.419_707_245_191_433_498e-1,
        ),
        (
            2.0,
            9.772_498_680_518_207_928e-1,
            5.399_096_651_318_805_195_1e-2,
        ),
        (
            3.0,
            9.986_501_019_683_699_054_7e-1,
            4.431_848_411_938_007_175_6e-3,
        ),
        (
            5.0,
            9.999_997_133_484_281_208_1e-1,
            1.486_719_514_734_297_707_9e-6,
        ),
        (
            8.0,
            9.999_999_999_999_993_779e-1,
            5.052_271_083_536_892_288e-15,
        ),
    ];

    #[test]
    fn norm_cdf_matches_mpmath_to_1e14() {
        for &(x, cdf, pdf) in &CDF_PDF {
            assert!(
                rel(norm_cdf(x), cdf) <= 1e-14,
                "Φ({x}) = {} vs {cdf}",
                norm_cdf(x)
            );
            // Upper tail by symmetry: 1 − Φ(−x) = Φ(x).
            assert!(rel(norm_sf(-x), cdf) <= 1e-14, "sf({}) vs {cdf}", -x);
            assert!(
                rel(norm_pdf(x), pdf) <= 1e-14,
                "φ({x}) = {} vs {pdf}",
                norm_pdf(x)
            );
            assert!(rel(norm_log_pdf(x), pdf.ln()) <= 1e-14);
        }
    }

    #[test]
    fn norm_cdf_edges() {
        assert_eq!(norm_cdf(f64::NEG_INFINITY), 0.0);
        assert_eq!(norm_cdf(f64::INFINITY), 1.0);
        assert_eq!(norm_sf(f64::INFINITY), 0.0);
        assert!(norm_cdf(f64::NAN).is_nan());
        assert_eq!(norm_pdf(f64::INFINITY), 0.0);
        assert!(norm_pdf(f64::NAN).is_nan());
        // Φ is monotone across Cody's interval boundaries.
        for &b in &[CENTRAL, SQRT_32] {
            for s in [-1.0, 1.0] {
                let x = s * b;
                let lo = norm_cdf(x - 1e-12);
                let mid = norm_cdf(x);
                let hi = norm_cdf(x + 1e-12);
                assert!(lo <= mid && mid <= hi, "monotone at {x}");
            }
        }
    }

    // (p, Φ⁻¹(p)) from mpmath root finding at 50 digits with p the exact double.
    const PPF: [(f64, f64); 17] = [
        (1e-300, -3.704_709_629_936_119_923_7e1),
        (1e-20, -9.262_340_089_798_407_579_6),
        (1e-10, -6.361_340_902_404_056_199_1),
        (1e-05, -4.264_890_793_922_824_610_2),
        (0.01, -2.326_347_874_040_841_093_1),
        (0.025, -1.959_963_984_540_054_211_8),
        (0.05, -1.644_853_626_951_472_688),
        (0.1, -1.281_551_565_544_600_435_3),
        (0.25, -6.744_897_501_960_817_432e-1),
        (0.4, -2.533_471_031_357_997_413_2e-1),
        (0.6, 2.533_471_031_357_997_413_2e-1),
        (0.75, 6.744_897_501_960_817_432e-1),
        (0.9, 1.281_551_565_544_600_593_5),
        (0.95, 1.644_853_626_951_472_284_3),
        (0.975, 1.959_963_984_540_053_855_6),
        (0.99, 2.326_347_874_040_840_767_6),
        (0.999_999, 4.753_424_308_817_087_765_7),
    ];

    #[test]
    fn norm_ppf_matches_mpmath() {
        for &(p, x) in &PPF {
            assert!(
                rel(norm_ppf(p), x) <= 1e-14,
                "ppf({p}) = {} vs {x}",
                norm_ppf(p)
            );
        }
        assert_eq!(norm_ppf(0.5), 0.0);
        assert_eq!(norm_ppf(0.0), f64::NEG_INFINITY);
        assert_eq!(norm_ppf(1.0), f64::INFINITY);
        assert!(norm_ppf(-0.1).is_nan() && norm_ppf(1.1).is_nan() && norm_ppf(f64::NAN).is_nan());
    }

    #[test]
    fn log_sum_exp_is_stable() {
        assert!((log_sum_exp(&[1000.0, 1000.0]) - (1000.0 + 2f64.ln())).abs() < 1e-12);
        assert!((log_sum_exp(&[-1000.0, -1000.0]) - (-1000.0 + 2f64.ln())).abs() < 1e-12);
        assert_eq!(log_sum_exp(&[f64::NEG_INFINITY, 0.0]), 0.0);
        assert_eq!(log_sum_exp(&[]), f64::NEG_INFINITY);
        assert_eq!(log_sum_exp(&[f64::NEG_INFINITY]), f64::NEG_INFINITY);
        assert!(log_sum_exp(&[f64::NAN, 0.0]).is_nan());
    }

    // Moved from the former likelihoods/normal.rs (its private copy of Cody's Φ).

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
            let l = norm_log_cdf(x);
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
        assert_eq!(norm_log_cdf(f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(norm_log_cdf(f64::INFINITY), 0.0);
        assert!(norm_log_cdf(-1e200).is_infinite());
        // Asymptotic check far out: log Φ(x) = −x²/2 − log(−x) − ½log 2π + log(1 − 1/x² + 3/x⁴ …).
        let x: f64 = -1e4;
        let asym = -0.5 * x * x - (-x).ln() - LN_SQRT_2PI + (-1.0 / (x * x)).ln_1p();
        assert!((norm_log_cdf(x) - asym).abs() <= 1e-15 * asym.abs());
        // Mills ratio: φ(x)/Φ(x) → −x for very negative x.
        let r = norm_pdf_over_cdf(-1e3);
        assert!((r - 1e3).abs() / 1e3 < 2e-6);
        assert!((norm_pdf_over_cdf(0.0) - 2.0 * FRAC_1_SQRT_2PI).abs() <= 2e-16);
    }
}
