//! The statistical judge as one of a step's checks: the canary's and the primary's series the
//! tick fetched ([`JudgeObservation`]) judged by the canary's judge settings, and what the
//! rollout rules make of the result. A pass is a passed check; a fail counts toward
//! `threshold` like a failed metric; a critical failure rolls back at once; a marginal result
//! waits for a human's approval. The statistics are [`crate::judge`]'s.

use crate::judge::{judge, JudgeSpec, Judgement, MetricInput, Outcome};
use crate::number::fmt_num;
use crate::status::{CheckRecord, Phase, Status};
use crate::trailer::{CheckKind, Judged};

/// The name of the judge's check (its `Sluice-Check` trailer and status record).
pub const JUDGE_CHECK: &str = "judge";

/// What the tick fetched for the judge.
#[derive(Debug, Clone, PartialEq)]
pub enum JudgeObservation {
    /// One pair of series per judged metric.
    Series(Vec<MetricSeries>),
    /// A range query failed; the text says which and why.
    Error(String),
}

/// One metric's series over the judge's window.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSeries {
    pub name: String,
    pub canary: Vec<f64>,
    pub baseline: Vec<f64>,
}

/// What the rules do with the judge's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgeStep {
    /// A passed check.
    Pass,
    /// A failed check: counts toward `threshold`.
    Fail,
    /// A critical metric failed: roll back now.
    Critical,
    /// Between the thresholds: wait for a human's approval.
    Marginal,
}

/// The judge's check and what follows from it.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeCheck {
    pub judged: Judged,
    pub step: JudgeStep,
}

/// Judges the observed series; `None` when the tick brought none (not observed).
pub fn judgement(spec: &JudgeSpec, observed: Option<&JudgeObservation>) -> Option<Judgement> {
    let Some(JudgeObservation::Series(series)) = observed else {
        return None;
    };
    let empty: &[f64] = &[];
    let inputs: Vec<MetricInput<'_>> = spec
        .metrics
        .iter()
        .map(|m| {
            let s = series.iter().find(|s| s.name == m.name);
            MetricInput {
                name: &m.name,
                group: &m.group,
                muted: m.muted,
                rule: m.rule,
                canary: s.map_or(empty, |s| &s.canary),
                baseline: s.map_or(empty, |s| &s.baseline),
            }
        })
        .collect();
    Some(judge(
        &inputs,
        &spec.group_weights,
        spec.thresholds,
        spec.min_samples,
    ))
}

/// The judge's check for this tick.
pub fn judge_check(spec: &JudgeSpec, observed: Option<&JudgeObservation>) -> JudgeCheck {
    let thresholds = spec.thresholds;
    let record = |value: Option<f64>, passed: bool, detail: String| CheckRecord {
        name: JUDGE_CHECK.to_string(),
        value,
        min: Some(thresholds.pass),
        max: None,
        passed,
        detail,
    };
    let (record, step) = match (observed, judgement(spec, observed)) {
        (_, Some(j)) => {
            let step = step_of(&j);
            let detail = summary(&j);
            (
                record(Some(j.score.summary), step == JudgeStep::Pass, detail),
                step,
            )
        }
        (Some(JudgeObservation::Error(e)), None) => (
            record(None, false, format!("query failed: {e}")),
            JudgeStep::Fail,
        ),
        (_, None) => (
            record(None, false, "not observed".to_string()),
            JudgeStep::Fail,
        ),
    };
    JudgeCheck {
        judged: Judged {
            kind: CheckKind::Metric,
            record,
        },
        step,
    }
}

fn step_of(j: &Judgement) -> JudgeStep {
    if j.metrics
        .iter()
        .any(|m| !m.muted && m.classification.critical)
    {
        return JudgeStep::Critical;
    }
    match j.score.outcome {
        Outcome::Pass => JudgeStep::Pass,
        Outcome::Marginal => JudgeStep::Marginal,
        Outcome::Fail => JudgeStep::Fail,
    }
}

/// `score=87.5 marginal (pass>=95 marginal>=75)`: the `Sluice-Judge` trailer's value.
pub fn score_line(j: &Judgement) -> String {
    format!(
        "score={} {} (pass>={} marginal>={})",
        fmt_num(j.score.summary),
        j.score.outcome.as_str(),
        fmt_num(j.thresholds.pass),
        fmt_num(j.thresholds.marginal)
    )
}

/// The [`score_line`], then why the score is 0 when a rule forced it: the check's detail.
pub fn summary(j: &Judgement) -> String {
    match &j.score.reason {
        Some(reason) => format!("{}: {reason}", score_line(j)),
        None => score_line(j),
    }
}

/// A canary waiting for approval because its judgement was marginal: the status of such a wait
/// keeps the judge's failed check (a gate's wait is only reached with every check passed).
pub fn waits_on_judge(status: &Status) -> bool {
    status.phase == Phase::WaitingApproval
        && status
            .checks
            .iter()
            .any(|c| c.name == JUDGE_CHECK && !c.passed)
}
