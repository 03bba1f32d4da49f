//! One metric's classification, canary against baseline, as Kayenta's
//! `MannWhitneyClassifier.scala` (called from `NetflixACAJudge.scala`) does it: prepare both
//! series, no data → `Nodata`, identical → `Pass`, otherwise the Mann-Whitney interval against
//! a bound of a quarter of the estimate, confirmed by the effect size, in the metric's direction;
//! a critical metric past its critical effect size fails the whole judgement.

use super::effect::{mean_ratio, EffectMeasure};
use super::mann_whitney::{mann_whitney, TestResult};
use super::prepare::{add_noise, handle_nans, handle_outliers, NanStrategy, Noise, Outliers};

/// Which way a metric may move before it counts against the canary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Only a rise counts (latency, errors).
    Increase,
    /// Only a fall counts (success rate, throughput).
    Decrease,
    /// Both count (the default).
    #[default]
    Either,
}

impl Direction {
    fn allows_increase(self) -> bool {
        matches!(self, Direction::Increase | Direction::Either)
    }

    fn allows_decrease(self) -> bool {
        matches!(self, Direction::Decrease | Direction::Either)
    }
}

/// The effect size a difference must reach to count, and to count as critical.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EffectSize {
    pub measure: EffectMeasure,
    pub allowed_increase: f64,
    pub allowed_decrease: f64,
    pub critical_increase: f64,
    pub critical_decrease: f64,
}

impl EffectSize {
    /// Kayenta's defaults: every value at the measure's neutral point (1 or 0.5).
    pub fn neutral(measure: EffectMeasure) -> EffectSize {
        let v = measure.neutral();
        EffectSize {
            measure,
            allowed_increase: v,
            allowed_decrease: v,
            critical_increase: v,
            critical_decrease: v,
        }
    }
}

impl Default for EffectSize {
    fn default() -> Self {
        EffectSize::neutral(EffectMeasure::MeanRatio)
    }
}

/// How one metric is judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricRule {
    pub direction: Direction,
    pub critical: bool,
    pub must_have_data: bool,
    pub nan_strategy: NanStrategy,
    pub outliers: Outliers,
    pub effect_size: EffectSize,
    /// The bound is this share of |estimate| (Kayenta's judge: 0.25).
    pub tolerance: f64,
    /// The confidence level of the interval (Kayenta's judge: 0.98).
    pub confidence: f64,
}

impl Default for MetricRule {
    fn default() -> Self {
        MetricRule {
            direction: Direction::default(),
            critical: false,
            must_have_data: false,
            nan_strategy: NanStrategy::default(),
            outliers: Outliers::default(),
            effect_size: EffectSize::default(),
            tolerance: 0.25,
            confidence: 0.98,
        }
    }
}

/// A metric's class (Kayenta's `MetricClassificationLabel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Label {
    Pass,
    High,
    Low,
    Nodata,
    NodataFailMetric,
    /// The test could not be computed on the series (Kayenta's `Error`): counts as a failure
    /// (Kayenta's scorer leaves it out; see [`crate::judge::score`]).
    Error,
}

impl Label {
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Pass => "Pass",
            Label::High => "High",
            Label::Low => "Low",
            Label::Nodata => "Nodata",
            Label::NodataFailMetric => "NodataFailMetric",
            Label::Error => "Error",
        }
    }

    /// The label named `s` (as [`Label::as_str`] prints it).
    pub fn parse(s: &str) -> Option<Label> {
        [
            Label::Pass,
            Label::High,
            Label::Low,
            Label::Nodata,
            Label::NodataFailMetric,
            Label::Error,
        ]
        .into_iter()
        .find(|l| l.as_str() == s)
    }
}

/// One metric's classification and the numbers behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    pub label: Label,
    /// A critical failure: the judgement fails whatever the score.
    pub critical: bool,
    pub reason: Option<String>,
    /// The test's numbers, when the test ran.
    pub test: Option<TestResult>,
    /// canary mean / baseline mean (Kayenta's deviation; NaN when a mean is 0).
    pub mean_ratio: f64,
    /// The effect size in the rule's measure (NaN when it cannot be computed).
    pub effect_size: f64,
    /// What the interval had to clear: `High` needs its low end above `bound`, `Low` its high
    /// end below `-bound` (the rule's tolerance times |estimate|); NaN when the test did not run.
    pub bound: f64,
    /// The effect sizes a `Low` and a `High` had to reach: at most `allowed_decrease`, at least
    /// `allowed_increase` (the rule's, whether the test ran or not).
    pub allowed_decrease: f64,
    pub allowed_increase: f64,
    /// How many values of each series were judged, after NaN and outlier handling.
    pub canary_count: usize,
    pub baseline_count: usize,
}

/// Classifies `canary` against `baseline` by `rule`.
pub fn classify(canary: &[f64], baseline: &[f64], rule: &MetricRule) -> Classification {
    let canary = handle_outliers(&handle_nans(canary, rule.nan_strategy), rule.outliers);
    let baseline = handle_outliers(&handle_nans(baseline, rule.nan_strategy), rule.outliers);
    let mut result = Classification {
        label: Label::Pass,
        critical: false,
        reason: None,
        test: None,
        mean_ratio: 1.0,
        effect_size: f64::NAN,
        bound: f64::NAN,
        allowed_decrease: rule.effect_size.allowed_decrease,
        allowed_increase: rule.effect_size.allowed_increase,
        canary_count: canary.len(),
        baseline_count: baseline.len(),
    };
    if canary.is_empty() || baseline.is_empty() {
        if rule.nan_strategy == NanStrategy::Replace {
            return result;
        }
        result.reason = Some("missing data".to_string());
        if rule.must_have_data && !rule.critical {
            result.label = Label::NodataFailMetric;
        } else {
            result.label = Label::Nodata;
            result.critical = rule.critical;
        }
        return result;
    }
    if same_values(&canary, &baseline) {
        result.reason = Some("the canary and baseline data are identical".to_string());
        return result;
    }
    if canary.iter().chain(&baseline).all(|v| *v == canary[0]) {
        return result;
    }
    compare(&canary, &baseline, rule, result)
}

/// The test, the bound and the effect size on prepared, non-empty, different series.
fn compare(
    canary: &[f64],
    baseline: &[f64],
    rule: &MetricRule,
    mut result: Classification,
) -> Classification {
    let (canary, baseline) = with_noise_if_constant(canary, baseline);
    result.mean_ratio = mean_ratio(&canary, &baseline);
    result.effect_size = rule.effect_size.measure.of(&canary, &baseline);
    let test = match mann_whitney(&canary, &baseline, rule.confidence) {
        Ok(test) => test,
        Err(e) => {
            // Kayenta sets `Error` when the classifier throws (`NetflixACAJudge.scala` lines
            // 166-172) and means a critical metric's `Error` to be critical
            // (`MannWhitneyClassifier.scala` line 204).
            result.label = Label::Error;
            result.critical = rule.critical;
            result.reason = Some(format!("classification failed: {e}"));
            return result;
        }
    };
    result.test = Some(test);
    let bound = rule.tolerance * test.estimate.abs();
    result.bound = bound;
    let effect = result.effect_size;
    let sizes = &rule.effect_size;
    // An effect size that cannot be computed (a zero mean) does not hold a classification back.
    let reaches = |limit: f64, above: bool| {
        effect.is_nan()
            || if above {
                effect >= limit
            } else {
                effect <= limit
            }
    };
    let high = rule.direction.allows_increase()
        && test.ci_low > bound
        && reaches(sizes.allowed_increase, true);
    let low = rule.direction.allows_decrease()
        && test.ci_high < -bound
        && reaches(sizes.allowed_decrease, false);
    if high {
        result.label = Label::High;
        result.critical = rule.critical && reaches(sizes.critical_increase, true);
    } else if low {
        result.label = Label::Low;
        result.critical = rule.critical && reaches(sizes.critical_decrease, false);
    }
    if result.label != Label::Pass {
        let critical = if result.critical { " (critical)" } else { "" };
        result.reason = Some(format!("classified as {}{critical}", result.label.as_str()));
    }
    result
}

/// Both series constant (at different values): Kayenta adds Gaussian noise of σ = value·1e-5
/// to each, so that the test has ranks to work with. Seeded by the series themselves.
fn with_noise_if_constant(canary: &[f64], baseline: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let constant = |s: &[f64]| s.iter().all(|v| *v == s[0]);
    if !(constant(canary) && constant(baseline)) {
        return (canary.to_vec(), baseline.to_vec());
    }
    let mut noise = Noise::seeded_by(&[canary, baseline]);
    let canary = add_noise(canary, canary[0] * 1e-5, &mut noise);
    let baseline = add_noise(baseline, baseline[0] * 1e-5, &mut noise);
    (canary, baseline)
}

/// The same values, in any order.
fn same_values(a: &[f64], b: &[f64]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    a == b
}
