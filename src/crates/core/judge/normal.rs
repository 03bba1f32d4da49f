//! The standard normal distribution as R computes it, so that the judge's p-values and
//! confidence bounds equal R's `wilcox.test` to the last bits: the cumulative distribution by
//! W. J. Cody's rational Chebyshev approximations (Math. Comp. 23 (1969) 631-637, the algorithm
//! behind R's `pnorm`), the quantile by M. J. Wichura's AS 241 `PPND16` (Applied Statistics 37
//! (1988) 477-484, R's `qnorm`). Pure arithmetic; no state.

// The coefficients are written as Cody and Wichura published them (and R carries them), more
// digits than a double holds: the compiler rounds them to the same doubles R uses.
#![allow(clippy::excessive_precision)]

/// Both tails at `x`: `(P[X <= x], P[X > x])` for a standard normal `X`.
pub fn cdf_both(x: f64) -> (f64, f64) {
    if x.is_nan() {
        return (f64::NAN, f64::NAN);
    }
    let y = x.abs();
    if y <= 0.674_489_75 {
        let temp = central(x);
        return (0.5 + temp, 0.5 - temp);
    }
    let temp = if y <= SQRT_32 {
        middle(y)
    } else if -37.5193 < x && x < 37.5193 {
        tail(x, y)
    } else if x > 0.0 {
        return (1.0, 0.0);
    } else {
        return (0.0, 1.0);
    };
    let base = if y <= SQRT_32 { y } else { x };
    // exp(-x²/2) split in two factors: x² of a number cut to 1/16 is exact, so the rounding of
    // the square does not eat the tail's precision (Cody's trick, as R does it).
    let cut = (base * 16.0).trunc() / 16.0;
    let del = (base - cut) * (base + cut);
    let lower = (-cut * cut * 0.5).exp() * (-del * 0.5).exp() * temp;
    let upper = 1.0 - lower;
    if x > 0.0 {
        (upper, lower)
    } else {
        (lower, upper)
    }
}

/// The two-sided p-value of a standard normal statistic: `2·min(P[X <= z], P[X > z])`.
pub fn two_sided_p(z: f64) -> f64 {
    let (lower, upper) = cdf_both(z);
    2.0 * lower.min(upper)
}

const SQRT_32: f64 = 5.656_854_249_492_380_195_206_754_896_838;
const ONE_OVER_SQRT_2PI: f64 = 0.398_942_280_401_432_677_939_946_059_934;

/// Cody's first range, |x| <= 0.67448975: `P[0 < X <= x]` (negative for negative `x`).
fn central(x: f64) -> f64 {
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
    let (mut num, mut den) = (0.0, 0.0);
    if x.abs() > f64::EPSILON * 0.5 {
        let sq = x * x;
        num = A[4] * sq;
        den = sq;
        for i in 0..3 {
            num = (num + A[i]) * sq;
            den = (den + B[i]) * sq;
        }
    }
    x * (num + A[3]) / (den + B[3])
}

/// Cody's second range, up to sqrt(32): the factor of exp(-y²/2).
fn middle(y: f64) -> f64 {
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
    let mut num = C[8] * y;
    let mut den = y;
    for i in 0..7 {
        num = (num + C[i]) * y;
        den = (den + D[i]) * y;
    }
    (num + C[7]) / (den + D[7])
}

/// Cody's asymptotic range beyond sqrt(32): the factor of exp(-x²/2).
fn tail(x: f64, y: f64) -> f64 {
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
    let sq = 1.0 / (x * x);
    let mut num = P[5] * sq;
    let mut den = sq;
    for i in 0..4 {
        num = (num + P[i]) * sq;
        den = (den + Q[i]) * sq;
    }
    let temp = sq * (num + P[4]) / (den + Q[4]);
    (ONE_OVER_SQRT_2PI - temp) / y
}

/// The quantile of the upper tail: the `z` with `P[X > z] = p`, for `0 < p < 1` (AS 241).
pub fn upper_quantile(p: f64) -> f64 {
    quantile(p, false)
}

/// The quantile of the lower tail: the `z` with `P[X <= z] = p`, for `0 < p < 1` (AS 241).
pub fn lower_quantile(p: f64) -> f64 {
    quantile(p, true)
}

/// AS 241 for the tail `p` lies in. The smaller tail's probability is taken as given where it
/// can be, never as `1 - (1 - p)`, as R does.
fn quantile(p: f64, lower_tail: bool) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    let complement = 0.5 - p + 0.5;
    let lower = if lower_tail { p } else { complement };
    if lower == 0.0 {
        return f64::NEG_INFINITY;
    }
    if lower == 1.0 {
        return f64::INFINITY;
    }
    let q = lower - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180_625 - q * q;
        return quantile_central(q, r);
    }
    let small = match (q > 0.0, lower_tail) {
        (true, true) => complement,
        (true, false) => p,
        (false, _) => lower,
    };
    let r = (-small.ln()).sqrt();
    let val = if r <= 5.0 {
        quantile_near(r - 1.6)
    } else {
        quantile_far(r - 5.0)
    };
    if q < 0.0 {
        -val
    } else {
        val
    }
}

fn quantile_central(q: f64, r: f64) -> f64 {
    q * (((((((r * 2_509.080_928_730_122_672_7 + 33_430.575_583_588_128_105) * r
        + 67_265.770_927_008_700_853)
        * r
        + 45_921.953_931_549_871_457)
        * r
        + 13_731.693_765_509_461_125)
        * r
        + 1_971.590_950_306_551_442_7)
        * r
        + 133.141_667_891_784_377_45)
        * r
        + 3.387_132_872_796_366_608)
        / (((((((r * 5_226.495_278_852_854_561 + 28_729.085_735_721_942_674) * r
            + 39_307.895_800_092_710_61)
            * r
            + 21_213.794_301_586_595_867)
            * r
            + 5_394.196_021_424_751_107_7)
            * r
            + 687.187_007_492_057_908_3)
            * r
            + 42.313_330_701_600_911_252)
            * r
            + 1.0)
}

fn quantile_near(r: f64) -> f64 {
    (((((((r * 7.745_450_142_783_414_076_4e-4 + 0.022_723_844_989_269_184_583_3) * r
        + 0.241_780_725_177_450_611_77)
        * r
        + 1.270_458_252_452_368_382_58)
        * r
        + 3.647_848_324_763_204_605_04)
        * r
        + 5.769_497_221_460_691_405_5)
        * r
        + 4.630_337_846_156_545_295_9)
        * r
        + 1.423_437_110_749_683_577_34)
        / (((((((r * 1.050_750_071_644_416_843_24e-9 + 5.475_938_084_995_344_946e-4) * r
            + 0.015_198_666_563_616_457_196_6)
            * r
            + 0.148_103_976_427_480_074_59)
            * r
            + 0.689_767_334_985_100_004_55)
            * r
            + 1.676_384_830_183_803_849_4)
            * r
            + 2.053_191_626_637_758_821_87)
            * r
            + 1.0)
}

fn quantile_far(r: f64) -> f64 {
    (((((((r * 2.010_334_399_292_288_132_65e-7 + 2.711_555_568_743_487_578_15e-5) * r
        + 0.001_242_660_947_388_078_438_6)
        * r
        + 0.026_532_189_526_576_123_093)
        * r
        + 0.296_560_571_828_504_891_23)
        * r
        + 1.784_826_539_917_291_335_8)
        * r
        + 5.463_784_911_164_114_369_9)
        * r
        + 6.657_904_643_501_103_777_2)
        / (((((((r * 2.044_263_103_389_939_785_64e-15 + 1.421_511_758_316_445_888_7e-7) * r
            + 1.846_318_317_510_054_681_8e-5)
            * r
            + 7.868_691_311_456_132_591e-4)
            * r
            + 0.014_875_361_290_850_614_852_5)
            * r
            + 0.136_929_880_922_735_805_31)
            * r
            + 0.599_832_206_555_887_937_69)
            * r
            + 1.0)
}
