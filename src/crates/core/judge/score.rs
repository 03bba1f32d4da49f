//! Group and summary scores and the judgement's verdict, as Kayenta's `WeightedSumScorer.scala`,
//! `ScoringHelper.scala` and `ThresholdScoreClassifier.scala` compute them: a group's score is
//! the share of its counted metrics that passed; the summary is the weighted sum of the group
//! scores, 0 on a critical failure or when half the metrics or more have no data.
//!
//! One departure, on purpose: an `Error` (the test could not be computed) counts as a failed
//! metric. Kayenta's group score counts only Pass, High, Low and NodataFailMetric
//! (`kayenta-judge/src/main/scala/com/netflix/kayenta/judge/scorers/WeightedSumScorer.scala`
//! lines 33-37), so an `Error` (its classifier threw: `NetflixACAJudge.scala` lines 166-172)
//! drops out of the score, and a group left with nothing counted scores 100 in the summary
//! (`WeightedSumScorer.scala` line 71): a canary whose only metric cannot be tested passes with
//! 100. Here an `Error` counts as Kayenta counts a `NodataFailMetric` (a metric that failed to
//! give what it must), and a judgement in which no metric passed scores 0.

use super::classify::Label;

/// What the scorer needs of one metric's classification.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored<'a> {
    pub group: &'a str,
    pub label: Label,
    pub critical: bool,
}

/// The summary score's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Marginal,
    Fail,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Marginal => "marginal",
            Outcome::Fail => "fail",
        }
    }
}

/// The summary scores a canary needs to pass, or to be marginal (else it fails).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub pass: f64,
    pub marginal: f64,
}

/// One group's score.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupScore {
    pub name: String,
    /// 100·Pass/(Pass+High+Low+NodataFailMetric+Error); 100 when the group has nothing to
    /// count (only `Nodata`), as Kayenta's summary takes it.
    pub score: f64,
    pub metrics: usize,
}

/// The judgement's scores and verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub groups: Vec<GroupScore>,
    /// 0..=100, rounded to two decimals.
    pub summary: f64,
    pub outcome: Outcome,
    /// Why the summary is 0, when a rule forced it.
    pub reason: Option<String>,
}

/// Scores the metrics (muted ones already left out) with the group `weights` (a group without
/// a weight shares what the weights leave of 100, equally with the others without one).
pub fn score(metrics: &[Scored<'_>], weights: &[(String, f64)], thresholds: Thresholds) -> Score {
    let groups = group_scores(metrics);
    let nodata = metrics.iter().filter(|m| m.label == Label::Nodata).count();
    let (summary, reason) = if metrics.is_empty() {
        // Kayenta's scorer gives nothing to score 0.
        (0.0, Some("no metric is scored".to_string()))
    } else if metrics.iter().any(|m| m.critical && m.label != Label::Pass) {
        (0.0, Some("a critical metric failed".to_string()))
    } else if nodata as f64 / metrics.len() as f64 * 100.0 >= 50.0 {
        (
            0.0,
            Some("50% or more of the metrics have no data".to_string()),
        )
    } else {
        match weighted_sum(&groups, weights) {
            // Kayenta's summary gives a group with nothing counted 100 (WeightedSumScorer.scala
            // line 71), so a group of `Nodata` weighted against groups of failures could carry
            // a judgement in which no metric passed. Nothing passed: nothing shows the canary
            // is as good as the primary.
            sum if sum > 0.0 && !metrics.iter().any(|m| m.label == Label::Pass) => {
                (0.0, Some("no metric passed".to_string()))
            }
            sum => (sum, None),
        }
    };
    let outcome = if summary >= thresholds.pass {
        Outcome::Pass
    } else if summary >= thresholds.marginal {
        Outcome::Marginal
    } else {
        Outcome::Fail
    };
    Score {
        groups,
        summary,
        outcome,
        reason,
    }
}

/// The groups in the order their first metric comes.
fn group_scores(metrics: &[Scored<'_>]) -> Vec<GroupScore> {
    let mut names: Vec<&str> = Vec::new();
    for m in metrics {
        if !names.contains(&m.group) {
            names.push(m.group);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let members: Vec<&Scored<'_>> = metrics.iter().filter(|m| m.group == name).collect();
            let passed = members.iter().filter(|m| m.label == Label::Pass).count();
            let counted = members.iter().filter(|m| counts(m.label)).count();
            let score = if counted == 0 {
                100.0
            } else {
                passed as f64 / counted as f64 * 100.0
            };
            GroupScore {
                name: name.to_string(),
                score,
                metrics: members.len(),
            }
        })
        .collect()
}

/// Whether a metric of this class counts in its group's score (as a pass or a failure).
/// Kayenta counts Pass, High, Low and NodataFailMetric (`WeightedSumScorer.scala` lines 33-37);
/// an `Error` counts here too, as a failure: a metric the test could not judge has not shown
/// that the canary is as good as the primary. `Nodata` alone is left out, as in Kayenta: a
/// metric with no data at all (an error counter without errors) is not held against the canary
/// unless half the metrics or more have none, or it must have data.
pub fn counts(label: Label) -> bool {
    match label {
        Label::Pass | Label::High | Label::Low | Label::NodataFailMetric | Label::Error => true,
        Label::Nodata => false,
    }
}

fn weighted_sum(groups: &[GroupScore], weights: &[(String, f64)]) -> f64 {
    let weight_of = |name: &str| weights.iter().find(|(g, _)| g == name).map(|(_, w)| *w);
    let weighted: f64 = weights.iter().map(|(_, w)| w).sum();
    let unweighted = groups
        .iter()
        .filter(|g| weight_of(&g.name).is_none())
        .count();
    let shared = if unweighted > 0 {
        (100.0 - weighted) / unweighted as f64
    } else {
        0.0
    };
    let sum: f64 = groups
        .iter()
        .map(|g| g.score * (weight_of(&g.name).unwrap_or(shared) / 100.0))
        .sum();
    (sum * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const THRESHOLDS: Thresholds = Thresholds {
        pass: 95.0,
        marginal: 75.0,
    };

    fn m(group: &str, label: Label) -> Scored<'_> {
        Scored {
            group,
            label,
            critical: false,
        }
    }

    #[test]
    fn unweighted_groups_share_what_the_weights_leave() {
        let metrics = [
            m("a", Label::Pass),
            m("b", Label::High),
            m("c", Label::Pass),
        ];
        let weights = [("a".to_string(), 50.0)];
        let s = score(&metrics, &weights, THRESHOLDS);
        assert_eq!(s.summary, 75.0);
        assert_eq!(s.outcome, Outcome::Marginal);
    }

    #[test]
    fn a_group_with_nothing_to_count_scores_100() {
        let metrics = [
            m("a", Label::Nodata),
            m("b", Label::Pass),
            m("b", Label::Pass),
        ];
        let s = score(&metrics, &[], THRESHOLDS);
        assert_eq!(s.groups[0].score, 100.0);
        assert_eq!(s.summary, 100.0);
    }

    #[test]
    fn half_the_metrics_without_data_fail() {
        let metrics = [m("a", Label::Nodata), m("a", Label::Pass)];
        let s = score(&metrics, &[], THRESHOLDS);
        assert_eq!(s.summary, 0.0);
        assert_eq!(s.outcome, Outcome::Fail);
    }

    #[test]
    fn an_error_counts_as_a_failed_metric() {
        // The only metric could not be tested: Kayenta's scorer leaves it out and its group
        // scores 100; here it is a failure.
        let s = score(&[m("a", Label::Error)], &[], THRESHOLDS);
        assert_eq!(s.groups[0].score, 0.0);
        assert_eq!(s.summary, 0.0);
        assert_eq!(s.outcome, Outcome::Fail);
        // One Error among four metrics of one group: 75, marginal, not a pass.
        let metrics = [
            m("a", Label::Pass),
            m("a", Label::Pass),
            m("a", Label::Pass),
            m("a", Label::Error),
        ];
        let s = score(&metrics, &[], THRESHOLDS);
        assert_eq!(s.summary, 75.0);
        assert_eq!(s.outcome, Outcome::Marginal);
    }

    #[test]
    fn an_error_in_a_group_of_its_own_does_not_score_100() {
        let metrics = [
            m("a", Label::Error),
            m("b", Label::Pass),
            m("b", Label::Pass),
        ];
        let s = score(&metrics, &[], THRESHOLDS);
        assert_eq!(s.groups[0].score, 0.0);
        assert_eq!(s.summary, 50.0);
        assert_eq!(s.outcome, Outcome::Fail);
    }

    #[test]
    fn a_critical_error_fails_the_judgement() {
        let metrics = [
            Scored {
                group: "a",
                label: Label::Error,
                critical: true,
            },
            m("b", Label::Pass),
            m("b", Label::Pass),
        ];
        let s = score(&metrics, &[], THRESHOLDS);
        assert_eq!(s.summary, 0.0);
        assert_eq!(s.reason.as_deref(), Some("a critical metric failed"));
    }

    #[test]
    fn no_metric_passed_scores_zero_whatever_the_weights() {
        // The Nodata group's 100 (Kayenta's rule for a group with nothing counted) would carry
        // the summary to 100 with its weight; no metric passed, so it is 0.
        let metrics = [
            m("a", Label::Nodata),
            m("b", Label::Error),
            m("b", Label::Error),
        ];
        let weights = [("a".to_string(), 100.0), ("b".to_string(), 0.0)];
        let s = score(&metrics, &weights, THRESHOLDS);
        assert_eq!(s.summary, 0.0);
        assert_eq!(s.reason.as_deref(), Some("no metric passed"));
        assert_eq!(s.outcome, Outcome::Fail);
    }

    #[test]
    fn every_class_but_nodata_counts_in_a_group() {
        assert!(counts(Label::Error));
        assert!(counts(Label::NodataFailMetric));
        assert!(!counts(Label::Nodata));
    }

    #[test]
    fn a_critical_failure_scores_zero() {
        let metrics = [
            Scored {
                group: "a",
                label: Label::High,
                critical: true,
            },
            m("a", Label::Pass),
        ];
        let s = score(&metrics, &[], THRESHOLDS);
        assert_eq!(s.summary, 0.0);
        assert!(s.reason.is_some());
    }
}
