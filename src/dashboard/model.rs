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
use crate::readers::status::{rows_in, Held, Images, Release, Repo, Row};

use super::links::Links;

/// Every canary of the repo at `head`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    /// The commit read (full id).
    pub head: String,
    pub canaries: Vec<Summary>,
    /// The canaries with waves, each as one release (its waves are in `canaries` too).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<ReleaseView>,
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
    /// For a wave's instance (`NAME.WAVE`): the wave's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    /// For a wave's instance: its release, `NAMESPACE/NAME`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

/// A canary with waves as one release: the source's revision moving wave by wave.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseView {
    pub namespace: String,
    pub name: String,
    /// The revision the release rolls out (the source's, 12 characters).
    pub revision: String,
    /// `InProgress`, `Failed` or `Done`.
    pub state: String,
    /// How the page colours the state (as a phase's tone).
    pub tone: &'static str,
    /// The wave in progress, or the one that failed (1-based); absent when done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave_number: Option<usize>,
    /// `sluice status`'s RELEASE line.
    pub line: String,
    /// Every wave, in release order.
    pub waves: Vec<WaveView>,
}

/// One wave of a release: its instance's summary and the approval before it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveView {
    pub wave: String,
    /// 1-based place in the release.
    pub number: usize,
    /// Where the wave stands on the release's revision: `done` (runs it), `current`,
    /// `failed` or `ahead` (the release has not reached it).
    pub place: &'static str,
    /// The approval a person gives before the wave starts (`approval: true`); absent without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<WaveApproval>,
    /// The wave's instance, as the overview shows it.
    pub canary: Summary,
}

/// The approval before a wave.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WaveApproval {
    /// `waiting` (its pull request is open), `given` (the wave took the release's revision)
    /// or `ahead` (the release has not reached the wave).
    pub state: &'static str,
    /// The approval branch, while it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The forge's page of pull requests from that branch, while it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<String>,
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
    let mut releases: Vec<(Release, Vec<(usize, bool)>)> = Vec::new();
    for row in rows_in(repo, now) {
        let canary = by_id
            .get(&(row.namespace.as_str(), row.name.as_str()))
            .copied();
        if let (Some(release), Some(wave)) = (&row.release, canary.and_then(|c| c.wave.as_ref())) {
            let member = (canaries.len(), wave.approval);
            match releases
                .iter_mut()
                .find(|(r, _)| r.canary == release.canary)
            {
                Some((_, members)) => members.push(member),
                None => releases.push((release.clone(), vec![member])),
            }
        }
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
    let releases = releases
        .into_iter()
        .map(|(release, members)| release_view(&release, &members, &canaries))
        .collect();
    Overview {
        head: head.to_string(),
        canaries,
        releases,
        refusals: repo.loaded.errors.iter().map(ToString::to_string).collect(),
    }
}

/// `release` as the release page shows it: `members` are its waves' places in `canaries`
/// (with whether a person approves the wave's start), which hold their summaries.
fn release_view(release: &Release, members: &[(usize, bool)], canaries: &[Summary]) -> ReleaseView {
    let (namespace, name) = release
        .canary
        .split_once('/')
        .unwrap_or(("", &release.canary));
    let current = release.wave_number.map(|n| n.saturating_sub(1));
    let waves = release
        .waves
        .iter()
        .enumerate()
        .filter_map(|(i, wave)| {
            let (at, approval) = members
                .iter()
                .copied()
                .find(|&(at, _)| canaries.get(at).and_then(|c| c.wave.as_deref()) == Some(wave))?;
            let canary = canaries.get(at)?.clone();
            let place = match (release.state.as_str(), current) {
                ("Done", _) | (_, None) => "done",
                (_, Some(c)) if i < c => "done",
                ("Failed", Some(c)) if i == c => "failed",
                (_, Some(c)) if i == c => "current",
                _ => "ahead",
            };
            let approval = approval.then(|| wave_approval(place, &canary));
            Some(WaveView {
                wave: wave.clone(),
                number: i + 1,
                place,
                approval,
                canary,
            })
        })
        .collect();
    ReleaseView {
        namespace: namespace.to_string(),
        name: name.to_string(),
        revision: release.revision.clone(),
        tone: match release.state.as_str() {
            "Done" => "ok",
            "Failed" => "failed",
            _ => "active",
        },
        state: release.state.clone(),
        wave_number: release.wave_number,
        line: release.to_string(),
        waves,
    }
}

/// The approval before a wave at `place` of its release, whose instance is `canary`.
fn wave_approval(place: &str, canary: &Summary) -> WaveApproval {
    if let Some(Wait::Approval {
        branch,
        pull_request,
        ..
    }) = &canary.wait
    {
        return WaveApproval {
            state: "waiting",
            branch: branch.clone(),
            pull_request: pull_request.clone(),
        };
    }
    // The current wave took the revision once it left its rest (the approval was given).
    let started = !matches!(
        canary.phase.as_str(),
        "Initialized" | "Succeeded" | "Waiting" | "-"
    );
    let state = match place {
        "done" | "failed" => "given",
        "current" if started => "given",
        _ => "ahead",
    };
    WaveApproval {
        state,
        branch: None,
        pull_request: None,
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
        wave: row.wave,
        release: row.release.map(|r| r.canary),
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

    fn wave(name: &str, phase: &str, wait: Option<Wait>) -> Summary {
        Summary {
            namespace: "shop".into(),
            name: format!("web.{name}"),
            provider: "-".into(),
            strategy: "canary".into(),
            phase: phase.into(),
            tone: tone(phase),
            primary_weight: 100,
            canary_weight: 0,
            step: 0,
            steps: 1,
            failed_checks: 0,
            revision: "v2".into(),
            images: Images::default(),
            since: "-".into(),
            age: "-".into(),
            message: "-".into(),
            reason: None,
            paused: false,
            held: None,
            wait,
            holds: Vec::new(),
            operations: Vec::new(),
            wave: Some(name.into()),
            release: Some("shop/web".into()),
        }
    }

    fn release(state: &str, at: Option<usize>) -> Release {
        Release {
            canary: "shop/web".into(),
            revision: "v2".into(),
            state: state.into(),
            wave: at.map(|n| ["staging", "eu", "us"][n - 1].to_string()),
            wave_number: at,
            waves: vec!["staging".into(), "eu".into(), "us".into()],
        }
    }

    /// (place, approval state) of each wave of a release over `waves` (eu approved by a
    /// person), in release order.
    fn places(release: &Release, waves: &[Summary]) -> Vec<(&'static str, Option<&'static str>)> {
        // Listed out of order: the view orders by the release.
        let listed = [waves[2].clone(), waves[0].clone(), waves[1].clone()];
        let members = [(0, false), (1, false), (2, true)];
        release_view(release, &members, &listed)
            .waves
            .iter()
            .map(|w| (w.place, w.approval.as_ref().map(|a| a.state)))
            .collect()
    }

    #[test]
    fn a_release_places_each_wave_and_the_approval_before_it() {
        let approval = Wait::Approval {
            gate: "rollout".into(),
            branch: Some("sluice/shop/web.eu/rollout-v2".into()),
            pull_request: Some("https://forge/pulls?head=x".into()),
        };
        let waiting = [
            wave("staging", "Succeeded", None),
            wave("eu", "Waiting", Some(approval)),
            wave("us", "Initialized", None),
        ];
        let view = release_view(
            &release("InProgress", Some(2)),
            &[(1, false), (2, true), (0, false)],
            &[waiting[2].clone(), waiting[0].clone(), waiting[1].clone()],
        );
        let names: Vec<&str> = view.waves.iter().map(|w| w.wave.as_str()).collect();
        assert_eq!(names, ["staging", "eu", "us"]);
        let eu = view.waves[1].approval.as_ref().unwrap();
        assert_eq!(
            eu.pull_request.as_deref(),
            Some("https://forge/pulls?head=x")
        );
        assert_eq!(
            places(&release("InProgress", Some(2)), &waiting),
            [
                ("done", None),
                ("current", Some("waiting")),
                ("ahead", None)
            ]
        );
        let failed = [
            wave("staging", "Succeeded", None),
            wave("eu", "Failed", None),
            wave("us", "Initialized", None),
        ];
        assert_eq!(
            places(&release("Failed", Some(2)), &failed),
            [("done", None), ("failed", Some("given")), ("ahead", None)]
        );
        let before = [
            wave("staging", "Progressing", None),
            wave("eu", "Succeeded", None),
            wave("us", "Succeeded", None),
        ];
        assert_eq!(
            places(&release("InProgress", Some(1)), &before),
            [("current", None), ("ahead", Some("ahead")), ("ahead", None)]
        );
        assert_eq!(
            places(&release("Done", None), &before),
            [("done", None), ("done", Some("given")), ("done", None)]
        );
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
