//! What happens to a series before the test, as Kayenta's `NetflixACAJudge.scala` and
//! `Transforms.scala` do it: NaNs removed or replaced by 0, outliers kept or removed by
//! `IQRDetector.scala` with reduced sensitivity, and, when both series are constant, tiny
//! Gaussian noise (`MannWhitneyClassifier.scala`). Kayenta draws the noise from an unseeded
//! generator; here the seed comes from the data, so that `sluice audit` replaying a judgement
//! draws the same noise and gets the same result.

/// What to do with NaN values (Kayenta's `nanStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NanStrategy {
    /// Drop them (the default).
    #[default]
    Remove,
    /// Count them as 0.
    Replace,
}

/// What to do with outliers (Kayenta's `outliers.strategy` and `outlierFactor`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Outliers {
    /// Keep every value (the default).
    #[default]
    Keep,
    /// Drop values outside `[min(P1, Q1 - f·IQR), max(P99, Q3 + f·IQR)]` (Kayenta's f is 3).
    Remove { factor: f64 },
}

/// The series with the NaN strategy applied.
pub fn handle_nans(values: &[f64], strategy: NanStrategy) -> Vec<f64> {
    match strategy {
        NanStrategy::Remove => values.iter().copied().filter(|v| !v.is_nan()).collect(),
        NanStrategy::Replace => values
            .iter()
            .map(|&v| if v.is_nan() { 0.0 } else { v })
            .collect(),
    }
}

/// The series without its outliers, if the strategy removes them. NaN-free input.
pub fn handle_outliers(values: &[f64], outliers: Outliers) -> Vec<f64> {
    let Outliers::Remove { factor } = outliers else {
        return values.to_vec();
    };
    if values.is_empty() {
        return Vec::new();
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let q1 = percentile(&sorted, 25.0);
    let q3 = percentile(&sorted, 75.0);
    let iqr = q3 - q1;
    let low = percentile(&sorted, 1.0).min(q1 - factor * iqr);
    let high = percentile(&sorted, 99.0).max(q3 + factor * iqr);
    values
        .iter()
        .copied()
        .filter(|&v| !(v > high || v < low))
        .collect()
}

/// The `p`th percentile (0 < p <= 100) of sorted values by R's type 7 estimate, as Apache
/// Commons Math's `Percentile` with `EstimationType.R_7` (Kayenta's `DescriptiveStatistics`).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    match n {
        0 => return f64::NAN,
        1 => return sorted[0],
        _ => {}
    }
    let fraction = p / 100.0;
    // One-based position: 1 + (n - 1)·p, n at p = 1.
    let position = if fraction == 1.0 {
        n as f64
    } else {
        fraction * (n as f64 - 1.0) + 1.0
    };
    let below = position.floor();
    let low_index = (below as usize).clamp(1, n) - 1;
    let high_index = (low_index + 1).min(n - 1);
    let low = sorted[low_index];
    let high = sorted[high_index];
    low + (position - below) * (high - low)
}

/// `values` plus Gaussian noise with standard deviation `sd`, drawn from `noise`.
pub fn add_noise(values: &[f64], sd: f64, noise: &mut Noise) -> Vec<f64> {
    values.iter().map(|v| v + noise.gaussian() * sd).collect()
}

/// A small seeded generator of standard normal numbers: splitmix64 (Steele, Lea and Flood,
/// "Fast splittable pseudorandom number generators", OOPSLA 2014) for uniform 64-bit numbers,
/// the Box-Muller transform for pairs of normal ones. Not for cryptography; for reproducible
/// noise.
#[derive(Debug, Clone)]
pub struct Noise {
    state: u64,
    spare: Option<f64>,
}

impl Noise {
    /// A generator whose seed is a hash (FNV-1a) of the bits of every value given, so that the
    /// same series always get the same noise.
    pub fn seeded_by(series: &[&[f64]]) -> Noise {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for values in series {
            for v in values.iter() {
                for byte in v.to_bits().to_le_bytes() {
                    hash ^= u64::from(byte);
                    hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
                }
            }
            hash ^= 0xff;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Noise {
            state: hash,
            spare: None,
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in (0, 1]: never 0, so its logarithm is finite.
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal number.
    pub fn gaussian(&mut self) -> f64 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        let radius = (-2.0 * self.uniform().ln()).sqrt();
        let angle = 2.0 * std::f64::consts::PI * self.uniform();
        self.spare = Some(radius * angle.sin());
        radius * angle.cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_interpolates_as_r_type_7() {
        let sorted = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&sorted, 25.0), 1.75);
        assert_eq!(percentile(&sorted, 50.0), 2.5);
        assert_eq!(percentile(&sorted, 100.0), 4.0);
        assert!((percentile(&sorted, 1.0) - 1.03).abs() < 1e-12);
    }

    #[test]
    fn outlier_removal_drops_a_far_value_and_keeps_the_rest() {
        let mut values: Vec<f64> = (1..=100).map(f64::from).collect();
        values.push(10_000.0);
        let kept = handle_outliers(&values, Outliers::Remove { factor: 3.0 });
        assert_eq!(kept.len(), 100);
        assert!(!kept.contains(&10_000.0));
        assert_eq!(handle_outliers(&values, Outliers::Keep).len(), 101);
    }

    #[test]
    fn nans_are_removed_or_replaced() {
        let values = [1.0, f64::NAN, 3.0];
        assert_eq!(handle_nans(&values, NanStrategy::Remove), vec![1.0, 3.0]);
        assert_eq!(
            handle_nans(&values, NanStrategy::Replace),
            vec![1.0, 0.0, 3.0]
        );
    }

    #[test]
    fn the_same_series_get_the_same_noise_and_other_series_other_noise() {
        let a = [5.0, 5.0, 5.0];
        let b = [6.0, 6.0];
        let first = add_noise(&a, 1e-5, &mut Noise::seeded_by(&[&a, &b]));
        let again = add_noise(&a, 1e-5, &mut Noise::seeded_by(&[&a, &b]));
        let other = add_noise(&a, 1e-5, &mut Noise::seeded_by(&[&b, &a]));
        assert_eq!(first, again);
        assert_ne!(first, other);
        assert!(first.iter().all(|v| (v - 5.0).abs() < 1e-3));
    }

    #[test]
    fn gaussian_draws_have_mean_near_zero_and_unit_variance() {
        let mut noise = Noise::seeded_by(&[&[1.0]]);
        let draws: Vec<f64> = (0..20_000).map(|_| noise.gaussian()).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let var = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / draws.len() as f64;
        assert!(mean.abs() < 0.05, "{mean}");
        assert!((var - 1.0).abs() < 0.05, "{var}");
    }
}
