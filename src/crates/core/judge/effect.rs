//! Effect sizes of the canary against the baseline, as Kayenta's `EffectSizes.scala` defines
//! them: the mean ratio (canary mean / baseline mean) and the common language effect size
//! (CLES, Vargha and Delaney 2000: the share of pairs where the canary's value is higher).

use super::mann_whitney::average_ranks;

/// Which effect size a metric's allowed and critical values are given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EffectMeasure {
    /// canary mean / baseline mean; 1 is no change (the default).
    #[default]
    MeanRatio,
    /// P(canary value > baseline value), ties counting half; 0.5 is no change.
    Cles,
}

impl EffectMeasure {
    /// The value meaning "no effect", Kayenta's default for every allowed and critical value.
    pub fn neutral(self) -> f64 {
        match self {
            EffectMeasure::MeanRatio => 1.0,
            EffectMeasure::Cles => 0.5,
        }
    }

    /// The effect size of `canary` against `baseline` in this measure.
    pub fn of(self, canary: &[f64], baseline: &[f64]) -> f64 {
        match self {
            EffectMeasure::MeanRatio => mean_ratio(canary, baseline),
            EffectMeasure::Cles => cles(canary, baseline),
        }
    }
}

/// canary mean / baseline mean; NaN when either mean is 0 (no ratio to speak of).
pub fn mean_ratio(canary: &[f64], baseline: &[f64]) -> f64 {
    let (c, b) = (mean(canary), mean(baseline));
    if c == 0.0 || b == 0.0 {
        f64::NAN
    } else {
        c / b
    }
}

/// The common language effect size: `(2·R₁ - m(m+1)) / (2nm)`, `R₁` the canary's rank sum in
/// the pooled sample, `m` and `n` the sizes of canary and baseline. NaN for an empty series.
pub fn cles(canary: &[f64], baseline: &[f64]) -> f64 {
    let (m, n) = (canary.len() as f64, baseline.len() as f64);
    let pooled: Vec<f64> = canary.iter().chain(baseline).copied().collect();
    let (ranks, _) = average_ranks(&pooled);
    let r1: f64 = ranks[..canary.len()].iter().sum();
    (2.0 * r1 - m * (m + 1.0)) / (2.0 * n * m)
}

/// The arithmetic mean with a second pass that corrects the first's rounding (as Apache Commons
/// Math's `Mean`, which Kayenta uses); NaN for an empty series.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let n = values.len() as f64;
    let first = values.iter().sum::<f64>() / n;
    let correction = values.iter().map(|v| v - first).sum::<f64>();
    first + correction / n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_ratio_is_nan_when_a_mean_is_zero() {
        assert_eq!(mean_ratio(&[2.0, 4.0], &[1.0, 2.0]), 2.0);
        assert!(mean_ratio(&[0.0, 0.0], &[1.0]).is_nan());
        assert!(mean_ratio(&[1.0], &[0.0]).is_nan());
    }

    #[test]
    fn cles_counts_pairs_where_the_canary_is_higher() {
        assert_eq!(cles(&[10.0, 11.0], &[1.0, 2.0]), 1.0);
        assert_eq!(cles(&[1.0, 2.0], &[10.0, 11.0]), 0.0);
        assert_eq!(cles(&[1.0, 2.0], &[1.0, 2.0]), 0.5);
    }
}
