//! The Mann-Whitney U test (Wilcoxon rank-sum) with the normal approximation, tie correction
//! and continuity correction, its confidence interval for the shift `canary - baseline` and the
//! Hodges-Lehmann estimate of that shift: the numbers of R's
//! `wilcox.test(canary, baseline, conf.int = TRUE, exact = FALSE, correct = TRUE)`, computed
//! the way R computes them (R's `wilcox.test.default`; Kayenta's `MannWhitney.scala` ports the
//! same procedure). The bounds and the estimate are roots of the standardised rank-sum
//! statistic as a function of the shift, found by [`zeroin`] to R's tolerance `1e-4`; R
//! computes the estimate without the continuity correction, and so does this.

use super::normal::{lower_quantile, two_sided_p, upper_quantile};
use super::zeroin::zeroin;

/// R's `tol.root`: where the search for a bound or the estimate stops.
const ROOT_TOLERANCE: f64 = 1e-4;
/// R's `uniroot` iteration limit.
const MAX_ITERATIONS: u32 = 1000;

/// The test's numbers for one pair of series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestResult {
    /// U of the canary: its rank sum minus `n(n+1)/2` (R's `W` statistic).
    pub u: f64,
    /// The two-sided p-value.
    pub p_value: f64,
    /// The confidence interval for the shift `canary - baseline`.
    pub ci_low: f64,
    pub ci_high: f64,
    /// The Hodges-Lehmann estimate of the shift.
    pub estimate: f64,
}

/// Why the test has no result for these series.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TestError {
    #[error("the test needs at least one value in each series")]
    Empty,
    #[error("a series holds a value that is not a finite number")]
    NotFinite,
    #[error("all observations are tied: no confidence interval can be computed")]
    AllTied,
    #[error("the search for the {what} did not converge")]
    NoConvergence { what: &'static str },
}

/// The test of `canary` against `baseline` at `confidence` (0.98 in Kayenta's judge).
pub fn mann_whitney(
    canary: &[f64],
    baseline: &[f64],
    confidence: f64,
) -> Result<TestResult, TestError> {
    if canary.is_empty() || baseline.is_empty() {
        return Err(TestError::Empty);
    }
    if canary.iter().chain(baseline).any(|v| !v.is_finite()) {
        return Err(TestError::NotFinite);
    }
    let w = Statistic {
        x: canary,
        y: baseline,
    };
    let (u, p_value) = w.u_and_p()?;
    let (ci_low, ci_high, estimate) = w.interval(confidence)?;
    Ok(TestResult {
        u,
        p_value,
        ci_low,
        ci_high,
        estimate,
    })
}

/// The rank-sum statistic of `x` against `y`.
struct Statistic<'a> {
    x: &'a [f64],
    y: &'a [f64],
}

impl Statistic<'_> {
    fn nx(&self) -> f64 {
        self.x.len() as f64
    }

    fn ny(&self) -> f64 {
        self.y.len() as f64
    }

    /// Ranks of `x - shift` and `y` together, and the tie term `Σ(t³ - t)`.
    fn ranks(&self, shift: f64) -> (Vec<f64>, f64) {
        let values: Vec<f64> = self
            .x
            .iter()
            .map(|v| v - shift)
            .chain(self.y.iter().copied())
            .collect();
        average_ranks(&values)
    }

    /// The standard deviation of U under the null hypothesis, with the tie correction.
    fn sigma(&self, ties: f64) -> f64 {
        let (nx, ny) = (self.nx(), self.ny());
        ((nx * ny / 12.0) * ((nx + ny + 1.0) - ties / ((nx + ny) * (nx + ny - 1.0)))).sqrt()
    }

    fn u_and_p(&self) -> Result<(f64, f64), TestError> {
        let (nx, ny) = (self.nx(), self.ny());
        let (ranks, ties) = self.ranks(0.0);
        let u = rank_sum(&ranks[..self.x.len()]) - nx * (nx + 1.0) / 2.0;
        let z = u - nx * ny / 2.0;
        let sigma = self.sigma(ties);
        if sigma == 0.0 {
            return Err(TestError::AllTied);
        }
        let z = (z - sign(z) * 0.5) / sigma;
        Ok((u, two_sided_p(z)))
    }

    /// The standardised statistic at `shift`, with or without the continuity correction (R's
    /// `W(d)` in `wilcox.test.default`).
    fn standardised(&self, shift: f64, correct: bool) -> f64 {
        let (nx, ny) = (self.nx(), self.ny());
        let (ranks, ties) = self.ranks(shift);
        let dz = rank_sum(&ranks[..self.x.len()]) - nx * (nx + 1.0) / 2.0 - nx * ny / 2.0;
        let correction = if correct { sign(dz) * 0.5 } else { 0.0 };
        (dz - correction) / self.sigma(ties)
    }

    /// The interval's bounds and the estimate.
    fn interval(&self, confidence: f64) -> Result<(f64, f64, f64), TestError> {
        let alpha = 1.0 - confidence;
        let lowest = min(self.x) - max(self.y);
        let highest = max(self.x) - min(self.y);
        if lowest >= highest {
            return Err(TestError::AllTied);
        }
        let at_lowest = self.standardised(lowest, true);
        let at_highest = self.standardised(highest, true);
        if !at_lowest.is_finite() || !at_highest.is_finite() {
            return Err(TestError::AllTied);
        }
        let bound = |zq: f64, what: &'static str| -> Result<f64, TestError> {
            let f_low = at_lowest - zq;
            if f_low <= 0.0 {
                return Ok(lowest);
            }
            let f_high = at_highest - zq;
            if f_high >= 0.0 {
                return Ok(highest);
            }
            self.search(true, zq, (lowest, highest), (f_low, f_high), what)
        };
        let low = bound(upper_quantile(alpha / 2.0), "lower confidence bound")?;
        let high = bound(lower_quantile(alpha / 2.0), "upper confidence bound")?;
        let estimate = self.estimate(lowest, highest)?;
        Ok((low, high, estimate))
    }

    /// The Hodges-Lehmann estimate: the shift where the uncorrected statistic crosses zero.
    fn estimate(&self, lowest: f64, highest: f64) -> Result<f64, TestError> {
        let f_low = self.standardised(lowest, false);
        let f_high = self.standardised(highest, false);
        if !f_low.is_finite() || !f_high.is_finite() || sign(f_low) * sign(f_high) > 0.0 {
            return Err(TestError::AllTied);
        }
        self.search(false, 0.0, (lowest, highest), (f_low, f_high), "estimate")
    }

    /// The shift in `span` where the statistic (corrected or not) equals `zq`, given its
    /// differences from `zq` at the ends, searched as R's `uniroot` searches.
    fn search(
        &self,
        correct: bool,
        zq: f64,
        span: (f64, f64),
        ends: (f64, f64),
        what: &'static str,
    ) -> Result<f64, TestError> {
        let f = |d: f64| self.standardised(d, correct) - zq;
        let root = zeroin(
            f,
            span.0,
            span.1,
            ends.0,
            ends.1,
            ROOT_TOLERANCE,
            MAX_ITERATIONS,
        );
        root.converged
            .then_some(root.x)
            .ok_or(TestError::NoConvergence { what })
    }
}

/// Ranks starting at 1, tied values sharing their average rank (R's `rank(ties = "average")`),
/// and the tie term `Σ(t³ - t)` over the groups of `t` tied values. NaN-free input.
pub fn average_ranks(values: &[f64]) -> (Vec<f64>, f64) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut ties = 0.0;
    let mut start = 0;
    while start < order.len() {
        let mut end = start;
        while end + 1 < order.len() && values[order[end + 1]] == values[order[start]] {
            end += 1;
        }
        let rank = (start + end + 2) as f64 / 2.0;
        for &i in &order[start..=end] {
            ranks[i] = rank;
        }
        let t = (end - start + 1) as f64;
        ties += t * t * t - t;
        start = end + 1;
    }
    (ranks, ties)
}

/// Ranks are halves of integers, so this sum is exact in any order (R sums in long double).
fn rank_sum(ranks: &[f64]) -> f64 {
    ranks.iter().sum()
}

/// R's `sign`: -1, 0 or 1.
fn sign(v: f64) -> f64 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        0.0
    }
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}
