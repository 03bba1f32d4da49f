//! The canary page's judge view: each judged decision's metrics, the canary beside the primary.
//! Per metric the classification, the Hodges-Lehmann estimate, the 98 % interval, the
//! effect size and the bounds they were held to as the commit's `Sluice-Judge-Metric` trailers wrote them (read by
//! `crate::readers::history`), the group scores the core's scorer gives those classifications,
//! the summary score of its `Sluice-Judge` trailer, and the mean of each side's series the
//! commit's `Sluice-Replay` record keeps. Reads what the commits say; judges nothing again.

use serde::Serialize;
use sluice_core::judge::{score, Label, Scored, Thresholds};
use sluice_core::judged::JudgeObservation;

use crate::gitops::HistoryEntry;
use crate::judge::trailers::Bounds;
use crate::readers::history::Entry;
use crate::render::replay::{Record, REPLAY};

/// One judged decision.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JudgeView {
    pub time: String,
    pub commit: String,
    pub step: String,
    pub phase: String,
    /// `Sluice-Judge` as written: `score=… pass|marginal|fail (pass>=… marginal>=…)`.
    pub summary: String,
    pub score: Option<f64>,
    /// `pass`, `marginal` or `fail` (empty when the trailer does not say).
    pub outcome: String,
    pub groups: Vec<GroupView>,
    pub metrics: Vec<MetricView>,
    /// Why the replay record holds no series (a range query failed), when it says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series_error: Option<String>,
}

/// A group's score: 100·Pass/(Pass+High+Low+NodataFailMetric) of its scored metrics.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroupView {
    pub name: String,
    pub score: f64,
    pub metrics: usize,
}

/// One metric of a judged decision, the canary beside the primary.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricView {
    pub name: String,
    pub group: String,
    pub classification: String,
    pub muted: bool,
    /// The shift canary − primary (Hodges-Lehmann) and its 98 % interval.
    pub estimate: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub effect_size: Option<f64>,
    /// The bounds that explain a `High` or `Low` (as the trailer recorded them; absent in a
    /// commit written before they were, or where the test did not run).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<Bounds>,
    /// The mean of each side's recorded series (`NaN` values left out), and its length.
    pub canary_mean: Option<f64>,
    pub primary_mean: Option<f64>,
    pub canary_values: usize,
    pub primary_values: usize,
}

/// The judged decisions of `entries` (oldest first, read from `history`, newest first, one
/// entry per commit), newest first.
pub fn judgements(entries: &[Entry], history: &[HistoryEntry]) -> Vec<JudgeView> {
    entries
        .iter()
        .zip(history.iter().rev())
        .rev()
        .filter_map(|(e, commit)| view(e, commit))
        .collect()
}

fn view(e: &Entry, commit: &HistoryEntry) -> Option<JudgeView> {
    let judge = e.judge.as_ref()?;
    let series = recorded(commit);
    let (series, series_error) = match series {
        Some(JudgeObservation::Series(s)) => (s, None),
        Some(JudgeObservation::Error(e)) => (Vec::new(), Some(e)),
        None => (Vec::new(), None),
    };
    let metrics = judge
        .metrics
        .iter()
        .map(|m| {
            let s = series.iter().find(|s| s.name == m.name);
            let side = |values: Option<&Vec<f64>>| {
                let finite: Vec<f64> = values
                    .map(|v| v.iter().copied().filter(|x| x.is_finite()).collect())
                    .unwrap_or_default();
                let mean =
                    (!finite.is_empty()).then(|| finite.iter().sum::<f64>() / finite.len() as f64);
                (mean, values.map_or(0, Vec::len))
            };
            let (canary_mean, canary_values) = side(s.map(|s| &s.canary));
            let (primary_mean, primary_values) = side(s.map(|s| &s.baseline));
            MetricView {
                name: m.name.clone(),
                group: m.group.clone().unwrap_or_default(),
                classification: m.classification.clone(),
                muted: m.muted,
                estimate: m.estimate,
                ci_low: m.ci_low,
                ci_high: m.ci_high,
                effect_size: m.effect_size,
                bounds: m.bounds,
                canary_mean,
                primary_mean,
                canary_values,
                primary_values,
            }
        })
        .collect::<Vec<_>>();
    Some(JudgeView {
        time: e.time.clone(),
        commit: e.commit.clone(),
        step: e.step.clone(),
        phase: e.phase.clone(),
        summary: judge.summary.clone(),
        score: judge.score,
        outcome: judge.outcome.clone().unwrap_or_default(),
        groups: groups(&metrics),
        metrics,
        series_error,
    })
}

/// The judge's series in the commit's replay record, when it has them.
fn recorded(commit: &HistoryEntry) -> Option<JudgeObservation> {
    let (_, value) = commit
        .trailers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(REPLAY))?;
    let record = Record::parse(value).ok()?;
    record.by.observations().ok()??.judge
}

/// The group scores of the scored (not muted) metrics, by the core's scorer.
fn groups(metrics: &[MetricView]) -> Vec<GroupView> {
    let scored: Vec<Scored<'_>> = metrics
        .iter()
        .filter(|m| !m.muted)
        .filter_map(|m| {
            Some(Scored {
                group: &m.group,
                label: Label::parse(&m.classification)?,
                critical: false,
            })
        })
        .collect();
    // Only the groups are read; the weights and thresholds make the summary, which the
    // trailer holds.
    let thresholds = Thresholds {
        pass: 100.0,
        marginal: 0.0,
    };
    score(&scored, &[], thresholds)
        .groups
        .into_iter()
        .map(|g| GroupView {
            name: g.name,
            score: g.score,
            metrics: g.metrics,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::trailers::entry;

    fn judged(metrics: &[&str]) -> Entry {
        let lines: Vec<String> = metrics.iter().map(ToString::to_string).collect();
        Entry {
            time: "2026-12-02T10:00:00Z".into(),
            commit: "abcdef1".into(),
            id: "abcdef1".repeat(5) + "abcde",
            author: "sluice".into(),
            phase: "Progressing".into(),
            step: "1/3".into(),
            weights: "primary=75 canary=25".into(),
            revision: "r".into(),
            reason: "advance".into(),
            operator: None,
            approved_by: None,
            approval: None,
            checks: Vec::new(),
            judge: entry(Some("score=50 fail (pass>=95 marginal>=75)".into()), &lines),
            wave: None,
        }
    }

    #[test]
    fn group_scores_count_what_the_trailers_classified() {
        let e = judged(&[
            "p99 High group=latency estimate=63.6 ci=60.1..66.9 effect=1.3",
            "p50 Pass group=latency estimate=0.2 ci=-1.1..1.4 effect=1",
            "rate Pass group=errors estimate=0 ci=-0.01..0.01 effect=1",
            "cpu High muted group=errors estimate=5 ci=4..6 effect=2",
        ]);
        let commit = HistoryEntry {
            oid: git2::Oid::ZERO_SHA1,
            time: git2::Time::new(0, 0),
            author: crate::gitops::Identity::new("sluice", "sluice@localhost"),
            subject: "advance".into(),
            trailers: Vec::new(),
        };
        let views = judgements(&[e], &[commit]);
        assert_eq!(views.len(), 1);
        let v = &views[0];
        assert_eq!((v.score, v.outcome.as_str()), (Some(50.0), "fail"));
        let scores: Vec<(&str, f64, usize)> = v
            .groups
            .iter()
            .map(|g| (g.name.as_str(), g.score, g.metrics))
            .collect();
        assert_eq!(scores, [("latency", 50.0, 2), ("errors", 100.0, 1)]);
        assert_eq!(v.metrics[0].ci_low, Some(60.1));
        assert_eq!(v.metrics[0].canary_mean, None, "no replay record");
        // Written before bounds were recorded: none shown, none in the JSON.
        assert_eq!(v.metrics[0].bounds, None);
        let json = serde_json::to_value(&v.metrics[0]).unwrap();
        assert!(json.get("bound").is_none(), "{json}");
    }
}
