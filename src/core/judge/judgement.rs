//! A whole judgement: every metric classified, the muted ones left out of the score, then the
//! group and summary scores and the verdict (Kayenta's `NetflixACAJudge.judge` and
//! `ScoringHelper.score`). What `sluice judge`, the loop and `sluice audit` all call.

use super::classify::{classify, Classification, MetricRule};
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

/// Judges every metric and scores the unmuted ones.
pub fn judge(
    metrics: &[MetricInput<'_>],
    weights: &[(String, f64)],
    thresholds: Thresholds,
) -> Judgement {
    let results: Vec<MetricResult> = metrics
        .iter()
        .map(|m| MetricResult {
            name: m.name.to_string(),
            group: m.group.to_string(),
            muted: m.muted,
            classification: classify(m.canary, m.baseline, &m.rule),
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
        );
        assert_eq!(both.metrics[0].classification.label, Label::High);
        assert_eq!(both.metrics[1].classification.label, Label::High);
        assert_eq!(both.score.summary, 0.0);
        let alike = MetricInput {
            canary: &fast,
            ..metric("errors", false)
        };
        let muted = judge(&[metric("p99", true), alike], &[], thresholds);
        assert_eq!(muted.metrics[0].classification.label, Label::High);
        assert_eq!(muted.score.summary, 100.0);
        assert_eq!(muted.score.outcome, Outcome::Pass);
        // Nothing left to score: Kayenta's 0.
        let none = judge(&[metric("p99", true)], &[], thresholds);
        assert_eq!(none.score.summary, 0.0);
        assert_eq!(none.score.outcome, Outcome::Fail);
    }
}
