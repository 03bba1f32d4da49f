//! A canary's page model: its steps as `sluice plan` computes them, one weight point per
//! decision commit, each metric's values per decision with its thresholds (from the
//! `Sluice-Check` trailers), the decision log (each decision audit cannot verify marked in
//! it, with why), the audit verdict of its history and the CLI commands of the manual
//! operations. History comes from `crate::readers::history`, the
//! reader `sluice history` prints, over the last `limit` decision commits.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::audit::Report;
use crate::core::model::Strategy;
use crate::core::schedule::Pause;
use crate::core::simulate::simulate;
use crate::manifest::model::Canary;
use crate::readers::history::Entry;

use super::links::Links;
use super::model::Summary;

/// Everything the canary's page shows.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Detail {
    #[serde(flatten)]
    pub summary: Summary,
    pub schedule: Vec<StepView>,
    /// One point per decision commit that recorded weights, oldest first.
    pub weights: Vec<WeightPoint>,
    pub metrics: Vec<MetricSeries>,
    /// The statistical judge's decisions, newest first (empty for a canary without a judge).
    pub judgements: Vec<super::judge::JudgeView>,
    /// The decision log, newest first.
    pub log: Vec<LogEntry>,
    pub audit: AuditView,
    pub commands: Vec<Command>,
    /// The decision commits read (the page says when the history was cut).
    pub history_limit: usize,
}

/// One step of the schedule.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    /// 1-based.
    pub number: u32,
    pub weight: u8,
    /// `one interval`, `60s`, `approval` (or `iteration` for blue/green and A/B).
    pub pause: String,
    pub current: bool,
    pub done: bool,
}

/// The weights one decision commit recorded.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WeightPoint {
    pub time: String,
    pub commit: String,
    pub phase: String,
    pub step: String,
    pub primary: u8,
    pub canary: u8,
    pub revision: String,
    /// The first point of a rollout (its revision differs from the point before).
    pub new_rollout: bool,
}

/// One metric's values, one per decision that judged it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricSeries {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    pub points: Vec<MetricPoint>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricPoint {
    pub time: String,
    pub commit: String,
    pub step: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Instead of a value: `nodata`, `error`, `NaN`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    pub passed: bool,
}

/// One decision of the log.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    pub time: String,
    pub commit: String,
    /// The commit's page on the forge, when one is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    pub phase: String,
    pub step: String,
    pub weights: String,
    pub subject: String,
    /// Who approved, else who ran the operation, else the commit's author.
    pub by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// Why audit cannot verify this decision (its trailers, `by` and `approval` included, are
    /// then only what the commit claims); absent when audit made it again exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unverified: Option<String>,
}

/// What audit made of each commit of a canary's history: the log's marks.
#[derive(Debug, Clone)]
pub enum Verdicts {
    /// The audit ran: the commits it verified without a finding, and why each other commit
    /// it judged is not (its first finding, why it could not be checked, or why it is not
    /// replayable).
    Ran {
        verified: BTreeSet<String>,
        why: BTreeMap<String, String>,
    },
    /// The audit could not run: no decision is verified.
    Unavailable(String),
}

impl Verdicts {
    /// What the log marks of a report.
    pub fn of(report: &Report) -> Verdicts {
        let mut why: BTreeMap<String, String> = BTreeMap::new();
        for f in &report.findings {
            why.entry(f.commit.clone())
                .or_insert_with(|| format!("{:?} {}: {}", f.kind, f.file, f.message));
        }
        for (commit, reason) in &report.unverifiable {
            why.entry(commit.clone()).or_insert_with(|| reason.clone());
        }
        for n in &report.not_replayable {
            why.entry(n.commit.clone())
                .or_insert_with(|| n.reason.clone());
        }
        let verified = report
            .verified
            .iter()
            .filter(|c| !why.contains_key(*c))
            .cloned()
            .collect();
        Verdicts::Ran { verified, why }
    }

    /// Why the decision of commit `id` (full id) is not verified; `None` when audit made it
    /// again exactly.
    pub fn unverified(&self, id: &str) -> Option<String> {
        match self {
            Verdicts::Unavailable(e) => Some(format!("audit unavailable: {e}")),
            Verdicts::Ran { verified, .. } if verified.contains(id) => None,
            Verdicts::Ran { why, .. } => Some(why.get(id).cloned().unwrap_or_else(|| {
                "audit does not take it for a decision of sluice's: it is not on the branch's first-parent line, or claims nothing audit can check".to_string()
            })),
        }
    }
}

/// `sluice audit NS/NAME` on the commit read.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditView {
    /// `ok`, `findings`, or `unavailable` (the audit could not run; `error` says why).
    pub verdict: String,
    pub replayed: usize,
    pub findings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Decisions of the log audit does not verify (each is marked there).
    pub unverified: usize,
}

/// A manual operation's CLI command.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Command {
    /// The operation (`approve`, `promote`, ...).
    pub op: &'static str,
    pub what: &'static str,
    pub command: String,
}

/// The steps of `canary`'s schedule, the current one marked (`step` from the status) while
/// a rollout is `active`.
pub fn steps(canary: &Canary, step: u32, active: bool) -> Vec<StepView> {
    let plan = simulate(canary);
    let pauses: Vec<String> = match &canary.analysis.strategy {
        Strategy::Canary { steps } => steps
            .iter()
            .map(|s| match s.pause {
                Pause::Interval => "one interval".to_string(),
                Pause::For(d) => format!("{}s", d.as_secs()),
                Pause::Approval => "approval".to_string(),
            })
            .collect(),
        Strategy::BlueGreen { .. } | Strategy::AB { .. } => Vec::new(),
    };
    plan.canary_weights
        .iter()
        .enumerate()
        .map(|(i, weight)| {
            let number = u32::try_from(i + 1).unwrap_or(u32::MAX);
            StepView {
                number,
                weight: *weight,
                pause: pauses.get(i).cloned().unwrap_or_else(|| "iteration".into()),
                current: active && number == step,
                done: active && number < step,
            }
        })
        .collect()
}

/// `primary=80 canary=20` as (80, 20).
pub fn parse_weights(text: &str) -> Option<(u8, u8)> {
    let mut primary = None;
    let mut canary = None;
    for pair in text.split_whitespace() {
        match pair.split_once('=') {
            Some(("primary", v)) => primary = v.parse().ok(),
            Some(("canary", v)) => canary = v.parse().ok(),
            _ => {}
        }
    }
    Some((primary?, canary?))
}

/// One point per entry (oldest first) that recorded weights.
pub fn weight_points(entries: &[Entry]) -> Vec<WeightPoint> {
    let mut out: Vec<WeightPoint> = Vec::new();
    for e in entries {
        let Some((primary, canary)) = parse_weights(&e.weights) else {
            continue;
        };
        let new_rollout = out.last().is_some_and(|p| {
            !p.revision.is_empty() && !e.revision.is_empty() && p.revision != e.revision
        });
        out.push(WeightPoint {
            time: e.time.clone(),
            commit: e.commit.clone(),
            phase: e.phase.clone(),
            step: e.step.clone(),
            primary,
            canary,
            revision: e.revision.clone(),
            new_rollout,
        });
    }
    out
}

/// Each metric's values in the order judged, with the thresholds of its latest check.
pub fn metric_series(entries: &[Entry]) -> Vec<MetricSeries> {
    let mut out: Vec<MetricSeries> = Vec::new();
    for e in entries {
        for c in e.checks.iter().filter(|c| c.kind == "metric") {
            let point = MetricPoint {
                time: e.time.clone(),
                commit: e.commit.clone(),
                step: e.step.clone(),
                value: c.value,
                outcome: c.outcome.clone(),
                passed: c.passed,
            };
            match out.iter_mut().find(|s| s.name == c.name) {
                Some(series) => {
                    series.min = c.min;
                    series.max = c.max;
                    series.points.push(point);
                }
                None => out.push(MetricSeries {
                    name: c.name.clone(),
                    min: c.min,
                    max: c.max,
                    points: vec![point],
                }),
            }
        }
    }
    out
}

/// The decision log, newest first, each decision `verdicts` does not verify marked.
pub fn log(entries: &[Entry], links: &Links, verdicts: &Verdicts) -> Vec<LogEntry> {
    entries
        .iter()
        .rev()
        .map(|e| LogEntry {
            unverified: verdicts.unverified(&e.id),
            time: e.time.clone(),
            link: links.commit(&e.commit),
            commit: e.commit.clone(),
            phase: e.phase.clone(),
            step: e.step.clone(),
            weights: e.weights.clone(),
            subject: e.reason.clone(),
            by: e
                .approved_by
                .clone()
                .or_else(|| e.operator.clone())
                .unwrap_or_else(|| e.author.clone()),
            approval: e.approval.clone(),
        })
        .collect()
}

/// The CLI command of each manual operation on `id` (`namespace/name`) among `allowed` (the
/// summary's `operations`), in that order.
pub fn commands(id: &str, allowed: &[&'static str]) -> Vec<Command> {
    allowed
        .iter()
        .filter_map(|op| {
            let what = match *op {
                "approve" => "Approve the change it waits for",
                "promote" => "Skip the remaining steps and promote now",
                "abort" => "Roll back now",
                "retry" => "Re-run the analysis of a failed revision",
                "pause" => "Hold it where it is",
                "resume" => "Continue after a pause",
                _ => return None,
            };
            Some(Command {
                op,
                what,
                command: format!("sluice {op} {id} --repo \"$SLUICE_REPO\" --reason \"...\""),
            })
        })
        .collect()
}

/// The audit of the canary's history at `head`, as the page shows it, and what it made of
/// each commit (the log's marks).
pub fn audit(git_dir: &std::path::Path, head: git2::Oid, id: &str) -> (AuditView, Verdicts) {
    let report = crate::audit::open(git_dir)
        .map_err(|e| e.to_string())
        .and_then(|repo| {
            crate::audit::audit(
                &repo,
                head,
                Some(id),
                &crate::signatures::policy::Outside::default(),
            )
            .map_err(|e| e.to_string())
        });
    match report {
        Ok(r) => (audit_view(&r), Verdicts::of(&r)),
        Err(e) => (
            AuditView {
                verdict: "unavailable".into(),
                error: Some(e.clone()),
                ..AuditView::default()
            },
            Verdicts::Unavailable(e),
        ),
    }
}

/// The audit box of a report.
fn audit_view(r: &Report) -> AuditView {
    AuditView {
        verdict: if r.findings.is_empty() {
            "ok"
        } else {
            "findings"
        }
        .into(),
        replayed: r.replayed,
        findings: r
            .findings
            .iter()
            .map(|f| {
                format!(
                    "{} {:?} {}: {}",
                    f.commit.get(..7).unwrap_or(&f.commit),
                    f.kind,
                    f.file,
                    f.message
                )
            })
            .collect(),
        error: None,
        unverified: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_trailer_parses_both_shares() {
        assert_eq!(parse_weights("primary=80 canary=20"), Some((80, 20)));
        assert_eq!(parse_weights("canary=5 primary=95"), Some((95, 5)));
        assert_eq!(parse_weights(""), None);
        assert_eq!(parse_weights("primary=80"), None);
        assert_eq!(parse_weights("primary=800 canary=1"), None);
    }
}
