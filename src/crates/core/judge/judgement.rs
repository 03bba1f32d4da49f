//! A whole judgement: every metric classified, the muted ones left out of the score, then the
//! group and summary scores and the verdict (Kayenta's `NetflixACAJudge.judge` and
//! `ScoringHelper.score`). What `sluice judge`, the loop and `sluice audit` all call.
//!
//! Beyond Kayenta: a metric whose series hold fewer values than the judge's `minSamples`
//! cannot pass (see [`too_few`]).

use super::classify::{classify, Classification, Label, MetricRule};
use super::score::{score, Score, Scored, Thresholds};

/// One metric to judge: its settings and its two series.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricInput<'a> {
    pub name: &'a str,
    pub group: &'a str,
    /// Classified and shown, but left out of the score (Kayenta's `muted`).
    pub muted: bool,
    pub rule: MetricRule,
    pub canary: &'a [f64],
    pub baseline: &'a [f64],
}

/// One metric's result.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricResult {
    pub name: String,
    pub group: String,
    pub muted: bool,
    pub classification: Classification,
}

/// The judgement of all metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub metrics: Vec<MetricResult>,
    pub score: Score,
    pub thresholds: Thresholds,
}

/// Judges every metric (each series needing `min_samples` values to pass) and scores the
/// unmuted ones.
pub fn judge(
    metrics: &[MetricInput<'_>],
    weights: &[(String, f64)],
    thresholds: Thresholds,
    min_samples: usize,
) -> Judgement {
    let results: Vec<MetricResult> = metrics
        .iter()
        .map(|m| MetricResult {
            name: m.name.to_string(),
            group: m.group.to_string(),
            muted: m.muted,
            classification: too_few(
                classify(m.canary, m.baseline, &m.rule),
                &m.rule,
                min_samples,
            ),
        })
        .collect();
    let scored: Vec<Scored<'_>> = results
        .iter()
        .filter(|r| !r.muted)
        .map(|r| Scored {
            group: &r.group,
            label: r.classification.label,
            critical: r.classification.critical,
        })
        .collect();
    let score = score(&scored, weights, thresholds);
    Judgement {
        metrics: results,
        score,
        thresholds,
    }
}

/// Kayenta's classification `c`, unless a series it judged holds fewer than `min_samples`
/// values (after NaN and outlier handling): then the metric fails as a metric that must have
/// data and has too little, whatever the test said. Kayenta runs its test on any non-empty
/// series; on one value per series the test cannot give an interval (an `Error`), and on a
/// handful it gives one too wide to classify anything `High` or `Low`, so a canary with little
/// traffic would pass whatever its values.
///
/// The outcome is Kayenta's for missing data that must be there
/// (`MannWhitneyClassifier.scala` lines 153-160): `NodataFailMetric`, which counts as a
/// failure, or for a `critical` metric a critical `Nodata`, which fails the judgement. Series
/// left empty keep Kayenta's `Nodata` (a metric that has no data at all, such as an error
/// counter without errors, is not held against the canary); with `nanStrategy: replace`,
/// where Kayenta passes an empty series, the empty series is too short.
fn too_few(c: Classification, rule: &MetricRule, min_samples: usize) -> Classification {
    let fewest = c.canary_count.min(c.baseline_count);
    if fewest >= min_samples || matches!(c.label, Label::Nodata | Label::NodataFailMetric) {
        return c;
    }
    let (label, critical) = if rule.critical {
        (Label::Nodata, true)
    } else {
        (Label::NodataFailMetric, false)
    };
    Classification {
        label,
        critical,
        reason: Some(format!(
            "too few values to judge: the canary's series holds {}, the baseline's {}; \
             each needs {min_samples} (minSamples)",
            c.canary_count, c.baseline_count
        )),
        test: None,
        bound: f64::NAN,
        ..c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::{Label, Outcome};

    #[test]
    fn a_muted_metric_is_classified_but_not_scored() {
        let slow: Vec<f64> = (0..30).map(|i| 200.0 + f64::from(i)).collect();
        let fast: Vec<f64> = (0..30).map(|i| 100.0 + f64::from(i)).collect();
        let metric = |name, muted| MetricInput {
            name,
            group: "latency",
            muted,
            rule: MetricRule::default(),
            canary: &slow,
            baseline: &fast,
        };
        let thresholds = Thresholds {
            pass: 95.0,
            marginal: 75.0,
        };
        let both = judge(
            &[metric("p99", true), metric("p50", false)],
            &[],
            thresholds,
            30,
        );
        assert_eq!(both.metrics[0].classification.label, Label::High);
        assert_eq!(both.metrics[1].classification.label, Label::High);
        assert_eq!(both.score.summary, 0.0);
        let alike = MetricInput {
            canary: &fast,
            ..metric("errors", false)
        };
        let muted = judge(&[metric("p99", true), alike], &[], thresholds, 30);
        assert_eq!(muted.metrics[0].classification.label, Label::High);
        assert_eq!(muted.score.summary, 100.0);
        assert_eq!(muted.score.outcome, Outcome::Pass);
        // Nothing left to score: Kayenta's 0.
        let none = judge(&[metric("p99", true)], &[], thresholds, 30);
        assert_eq!(none.score.summary, 0.0);
        assert_eq!(none.score.outcome, Outcome::Fail);
    }

    const THRESHOLDS: Thresholds = Thresholds {
        pass: 95.0,
        marginal: 75.0,
    };

    fn one(canary: &[f64], baseline: &[f64], rule: MetricRule, min_samples: usize) -> Judgement {
        let input = MetricInput {
            name: "latency",
            group: "default",
            muted: false,
            rule,
            canary,
            baseline,
        };
        judge(&[input], &[], THRESHOLDS, min_samples)
    }

    /// The first series: 29 canary values at 3x the primary's and one of 1e308.
    fn spiked() -> (Vec<f64>, Vec<f64>) {
        let baseline: Vec<f64> = (0..30).map(|i| 100.0 + f64::from(i)).collect();
        let mut canary: Vec<f64> = baseline.iter().map(|v| v * 3.0).collect();
        canary[29] = 1e308;
        (canary, baseline)
    }

    #[test]
    fn a_metric_the_test_cannot_compute_fails_the_judgement() {
        let (canary, baseline) = spiked();
        let j = one(&canary, &baseline, MetricRule::default(), 30);
        let c = &j.metrics[0].classification;
        assert_eq!(c.label, Label::Error, "{c:?}");
        assert!(
            c.reason
                .as_deref()
                .unwrap_or("")
                .contains("did not converge"),
            "{c:?}"
        );
        assert_eq!(j.score.summary, 0.0);
        assert_eq!(j.score.outcome, Outcome::Fail);
    }

    #[test]
    fn one_value_per_series_cannot_pass() {
        // Kayenta's test gives an Error on these ("all observations are tied"); under the
        // minimum they are too few to judge at all.
        for min_samples in [2, 50] {
            let j = one(&[900.0], &[100.0], MetricRule::default(), min_samples);
            let c = &j.metrics[0].classification;
            assert_eq!(c.label, Label::NodataFailMetric, "{c:?}");
            assert!(!c.critical);
            assert!(c.test.is_none());
            assert!(c.reason.as_deref().unwrap_or("").contains("too few values"));
            assert_eq!(j.score.summary, 0.0);
            assert_eq!(j.score.outcome, Outcome::Fail);
        }
        // With the minimum at 1 the pair is tested, and the test cannot compute it: an Error,
        // which fails too.
        let j = one(&[900.0], &[100.0], MetricRule::default(), 1);
        assert_eq!(j.metrics[0].classification.label, Label::Error);
        assert_eq!(j.score.outcome, Outcome::Fail);
    }

    #[test]
    fn series_under_the_minimum_fail_even_when_alike() {
        let alike: Vec<f64> = (0..10).map(f64::from).collect();
        let j = one(&alike, &alike, MetricRule::default(), 50);
        assert_eq!(j.metrics[0].classification.label, Label::NodataFailMetric);
        assert_eq!(j.score.outcome, Outcome::Fail);
        // At the minimum they pass.
        let j = one(&alike, &alike, MetricRule::default(), 10);
        assert_eq!(j.metrics[0].classification.label, Label::Pass);
        assert_eq!(j.score.outcome, Outcome::Pass);
    }

    #[test]
    fn the_minimum_counts_values_after_nans_are_removed() {
        let mut canary: Vec<f64> = (0..10).map(f64::from).collect();
        let baseline = canary.clone();
        canary[0] = f64::NAN;
        let j = one(&canary, &baseline, MetricRule::default(), 10);
        let c = &j.metrics[0].classification;
        assert_eq!(c.label, Label::NodataFailMetric, "{c:?}");
        assert_eq!((c.canary_count, c.baseline_count), (9, 10));
    }

    #[test]
    fn a_critical_metric_under_the_minimum_is_a_critical_failure() {
        let rule = MetricRule {
            critical: true,
            ..MetricRule::default()
        };
        let j = one(&[1.0, 2.0], &[1.0, 2.0], rule, 50);
        let c = &j.metrics[0].classification;
        assert_eq!(c.label, Label::Nodata);
        assert!(c.critical);
        assert_eq!(j.score.reason.as_deref(), Some("a critical metric failed"));
    }

    #[test]
    fn empty_series_keep_kayentas_nodata_but_replace_no_longer_passes_them() {
        let j = one(&[], &[1.0], MetricRule::default(), 50);
        assert_eq!(j.metrics[0].classification.label, Label::Nodata);
        let replace = MetricRule {
            nan_strategy: crate::judge::NanStrategy::Replace,
            ..MetricRule::default()
        };
        // Kayenta passes an empty series under `replace`; here it is too short.
        let j = one(&[], &[1.0], replace, 1);
        assert_eq!(j.metrics[0].classification.label, Label::NodataFailMetric);
        assert_eq!(j.score.outcome, Outcome::Fail);
    }
}
