//! Group and summary scores and the judgement's verdict, as Kayenta's `WeightedSumScorer.scala`,
//! `ScoringHelper.scala` and `ThresholdScoreClassifier.scala` compute them: a group's score is
//! the share of its counted metrics that passed; the summary is the weighted sum of the group
//! scores, 0 on a critical failure or when half the metrics or more have no data.

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
    /// 100·Pass/(Pass+High+Low+NodataFailMetric); 100 when the group has nothing to count.
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
        (weighted_sum(&groups, weights), None)
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
            let count = |label: Label| members.iter().filter(|m| m.label == label).count();
            let passed = count(Label::Pass);
            let counted =
                passed + count(Label::High) + count(Label::Low) + count(Label::NodataFailMetric);
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
