//! The overview's model: every canary of the repo at one commit, with its phase, weights,
//! step, what it waits for and what holds it. Built from the same readers as `sluice status`
//! (`crate::readers::status`) plus the specs (provider, steps); the pages and `/api/v1`
//! serialize this one model. Reads what it is handed (a commit's files); no network.

use std::collections::HashMap;

use jiff::Timestamp;
use serde::Serialize;

use crate::core::model::Strategy;
use crate::core::operate::{operate, Operation};
use crate::core::schedule::Pause;
use crate::core::status::{Gate, Phase, Status};
use crate::manifest::model::Canary;
use crate::manifest::settings::Settings;
use crate::readers::status::{rows_in, Held, Images, Repo, Row};

use super::links::Links;

/// Every canary of the repo at `head`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    /// The commit read (full id).
    pub head: String,
    pub canaries: Vec<Summary>,
    /// Specs the loop refuses (`file:line: field: message`): those canaries hold.
    pub refusals: Vec<String>,
}

/// One canary's line of the overview.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub namespace: String,
    pub name: String,
    /// The mesh or ingress (`spec.provider`, else the repo's), `-` when neither says.
    pub provider: String,
    pub strategy: String,
    pub phase: String,
    /// How the page colours the phase: `ok`, `active`, `waiting`, `failed` or `idle`.
    pub tone: &'static str,
    pub primary_weight: u8,
    pub canary_weight: u8,
    pub step: u32,
    /// Steps of the canary's schedule (iterations for blue/green and A/B).
    pub steps: u32,
    pub failed_checks: u32,
    pub revision: String,
    /// The images of the primary and canary workloads (`sluice status`'s), by container.
    #[serde(skip_serializing_if = "Images::is_empty")]
    pub images: Images,
    /// When the phase last changed.
    pub since: String,
    /// How long before the commit was read that was (`4m10s`); `-` when unknown.
    pub age: String,
    pub message: String,
    /// Why a Failed canary failed; absent in any other phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Held by `sluice pause` until `sluice resume`.
    pub paused: bool,
    /// What keeps it from moving on its own, who holds it and why (`sluice status`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
    /// `held` unless it is a pause (which `wait` says): kept for clients of `/api/v1`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<Hold>,
    /// The manual operations that apply in the canary's state (`approve`, `promote`,
    /// `abort`, `retry`, `pause`, `resume`): what `sluice OP` would not refuse.
    pub operations: Vec<&'static str>,
}

/// What a canary waits for before its next change.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Wait {
    /// A timed pause: the step's hold ends at `wakeAt`.
    #[serde(rename_all = "camelCase")]
    Pause { wake_at: String },
    /// Metric checks, judged every interval; the next judgement is due at `dueAt`.
    #[serde(rename_all = "camelCase")]
    Checks { due_at: String },
    /// The GitOps engine applying the last commit; the step's clock starts then.
    #[serde(rename_all = "camelCase")]
    Sync {
        /// The Flux Kustomization or Argo CD Application, when one is set.
        target: Option<String>,
        /// When the clock starts without a sync target (commit time plus `settle`).
        #[serde(skip_serializing_if = "Option::is_none")]
        starts_at: Option<String>,
    },
    /// A human approval of the next change.
    #[serde(rename_all = "camelCase")]
    Approval {
        /// `rollout`, `trafficIncrease` or `promotion`.
        gate: String,
        /// The approval branch sluice pushes the change on.
        branch: Option<String>,
        /// The forge's page of pull requests from that branch, when a forge is configured.
        #[serde(skip_serializing_if = "Option::is_none")]
        pull_request: Option<String>,
    },
    /// Held by `sluice pause` until `sluice resume`.
    Paused,
}

/// Why a canary does not move on its own.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    /// `drift` or `settings`.
    pub kind: &'static str,
    pub reason: String,
}

/// The overview of `repo`, read at commit `head`; `now` places the waits.
pub fn overview(repo: &Repo<'_>, head: &str, links: &Links, now: Timestamp) -> Overview {
    let by_id: HashMap<(&str, &str), &Canary> = repo
        .loaded
        .canaries
        .iter()
        .map(|c| ((c.id.namespace.as_str(), c.id.name.as_str()), c))
        .collect();
    let mut canaries = Vec::new();
    for row in rows_in(repo, now) {
        let canary = by_id
            .get(&(row.namespace.as_str(), row.name.as_str()))
            .copied();
        let status = canary.and_then(|c| {
            crate::readers::status::status(repo.files, &c.id)
                .ok()
                .flatten()
        });
        canaries.push(summary(
            row,
            canary,
            status.as_ref(),
            repo.settings,
            links,
            now,
        ));
    }
    Overview {
        head: head.to_string(),
        canaries,
        refusals: repo.loaded.errors.iter().map(ToString::to_string).collect(),
    }
}

/// One canary's summary from its status row, spec and status.
pub fn summary(
    row: Row,
    canary: Option<&Canary>,
    status: Option<&Status>,
    settings: &Settings,
    links: &Links,
    now: Timestamp,
) -> Summary {
    let holds: Vec<Hold> = row
        .held
        .iter()
        .filter(|h| h.kind != "pause")
        .map(|h| Hold {
            kind: h.kind,
            reason: h.why.clone(),
        })
        .collect();
    let wait = match (canary, status) {
        (Some(c), Some(s)) => wait(c, s, links, now),
        _ => None,
    };
    let operations = match (canary, status) {
        (Some(c), Some(s)) => operations(c, s, now),
        _ => Vec::new(),
    };
    Summary {
        provider: canary
            .and_then(|c| c.provider.clone())
            .or_else(|| settings.provider_name.clone())
            .unwrap_or_else(|| "-".into()),
        strategy: canary
            .map_or("-", |c| c.analysis.strategy.name())
            .to_string(),
        tone: tone(&row.phase),
        primary_weight: status.map_or(100 - row.canary_weight.min(100), |s| s.primary_weight),
        canary_weight: row.canary_weight,
        step: row.step,
        steps: canary.map_or(0, |c| step_count(&c.analysis.strategy)),
        failed_checks: row.failed_checks,
        revision: row.revision,
        images: row.images,
        since: row.since,
        age: row.age,
        message: row.message,
        reason: row.reason,
        paused: row.paused,
        held: row.held,
        operations,
        phase: row.phase,
        namespace: row.namespace,
        name: row.name,
        wait,
        holds,
    }
}

/// The manual operations `status` allows: each one the core's `operate` (what `sluice OP`
/// runs) does not refuse, so the page never offers a command that would only say "nothing to
/// do".
pub fn operations(canary: &Canary, status: &Status, now: Timestamp) -> Vec<&'static str> {
    Operation::ALL
        .into_iter()
        .filter(|op| operate(canary, Some(status), *op, "", now).is_ok())
        .map(Operation::verb)
        .collect()
}

/// Steps of a schedule: the canary steps, or the analysis iterations.
pub fn step_count(strategy: &Strategy) -> u32 {
    match strategy {
        Strategy::Canary { steps } => u32::try_from(steps.len()).unwrap_or(u32::MAX),
        Strategy::BlueGreen { iterations } | Strategy::AB { iterations } => *iterations,
    }
}

/// The colour class of a phase (the page shows the phase's name too: colour is never alone).
pub fn tone(phase: &str) -> &'static str {
    match phase {
        "Succeeded" | "Initialized" => "ok",
        "Progressing" | "Promoting" | "Finalising" | "Initializing" => "active",
        "Waiting" | "WaitingApproval" => "waiting",
        "Failed" | "Orphaned" | "Terminating" | "?" => "failed",
        _ => "idle",
    }
}

fn at(t: Timestamp, d: std::time::Duration) -> String {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(t)
        .to_string()
}

/// The first of `start + k * interval` (k >= 1) after `now`: when the next judgement is due.
fn next_after(start: Timestamp, interval: std::time::Duration, now: Timestamp) -> String {
    let every = interval.as_secs_f64().max(1.0);
    let done = (now.duration_since(start).as_secs_f64() / every)
        .floor()
        .max(0.0);
    at(
        start,
        std::time::Duration::from_secs_f64((done + 1.0) * every),
    )
}

/// What the canary waits for, from its status and spec.
pub fn wait(canary: &Canary, status: &Status, links: &Links, now: Timestamp) -> Option<Wait> {
    if status.paused {
        return Some(Wait::Paused);
    }
    if let Some(gate) = status
        .waiting_for
        .filter(|_| crate::approval::is_waiting(status))
    {
        let branch = crate::approval::branch_for(canary, status);
        return Some(Wait::Approval {
            gate: match gate {
                Gate::Rollout => "rollout",
                Gate::TrafficIncrease => "trafficIncrease",
                Gate::Promotion => "promotion",
            }
            .to_string(),
            pull_request: branch.as_deref().and_then(|b| links.pull_requests(b)),
            branch,
        });
    }
    let active = matches!(
        status.phase,
        Phase::Progressing | Phase::Promoting | Phase::Finalising
    );
    if !active {
        return None;
    }
    if status.step_started > now || status.clock_from_merge {
        return Some(Wait::Sync {
            target: canary.sync.as_ref().map(ToString::to_string),
            starts_at: (canary.sync.is_none() && status.step_started > now)
                .then(|| status.step_started.to_string()),
        });
    }
    let interval = canary.analysis.interval;
    let pause = match &canary.analysis.strategy {
        Strategy::Canary { steps } if status.phase == Phase::Progressing => status
            .step
            .checked_sub(1)
            .and_then(|i| steps.get(i as usize))
            .map(|s| s.pause),
        _ => None,
    };
    Some(match pause {
        Some(Pause::For(d)) => Wait::Pause {
            wake_at: at(status.step_started, d),
        },
        _ => Wait::Checks {
            due_at: next_after(status.step_started, interval, now),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::load::load;
    use crate::yaml::snapshot::Snapshot;

    fn canary() -> Canary {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("c.yaml"),
            "apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {name: podinfo, namespace: prod}
spec:
  provider: traefik
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: podinfo}
  service: {port: 80}
  analysis: {interval: 10s, threshold: 2, stepWeight: 20, maxWeight: 60}
",
        )
        .unwrap();
        let loaded = load(&Snapshot::read(dir.path()), &Settings::default());
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        loaded.canaries[0].clone()
    }

    fn status(phase: &str, paused: bool, waiting: Option<&str>) -> Status {
        let mut json = serde_json::json!({
            "phase": phase, "step": 1, "canaryWeight": 20, "primaryWeight": 80,
            "failedChecks": 0, "promotedRevision": "r1", "canaryRevision": "r2",
            "phaseSince": "2026-12-01T10:00:00Z", "stepStarted": "2026-12-01T10:00:00Z",
            "message": "-", "paused": paused,
        });
        if let Some(gate) = waiting {
            json["waitingFor"] = gate.into();
        }
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn only_the_operations_the_phase_allows_are_offered() {
        let c = canary();
        let now: Timestamp = "2026-12-01T10:05:00Z".parse().unwrap();
        let cases: [(&str, bool, Option<&str>, &[&str]); 7] = [
            // Nothing to promote, abort, retry or approve: only a hold of the next rollout.
            ("Succeeded", false, None, &["pause"]),
            ("Initialized", false, None, &["pause"]),
            ("Progressing", false, None, &["promote", "abort", "pause"]),
            // A paused canary is resumed, not paused again.
            ("Progressing", true, None, &["promote", "abort", "resume"]),
            (
                "WaitingApproval",
                false,
                Some("trafficIncrease"),
                &["approve", "promote", "abort", "pause"],
            ),
            ("Failed", false, None, &["retry", "pause"]),
            ("Promoting", false, None, &["pause"]),
        ];
        for (phase, paused, waiting, expected) in cases {
            assert_eq!(
                operations(&c, &status(phase, paused, waiting), now),
                expected,
                "{phase} paused={paused}"
            );
        }
    }
}
