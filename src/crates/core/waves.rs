//! Waves: one release rolled out cluster after cluster.
//!
//! A canary with waves is loaded as one canary *instance* per wave (its id's name is
//! `<name>.<wave>`, see [`instance_name`]), each with its own output folder, status file and
//! gates, and each decided by the same rules as any canary. What this module adds is the
//! *release rule* ([`release`]): which waves may see the source's revision this tick. The
//! first wave always may; wave k+1 may once wave k runs the revision as its promoted one
//! (Succeeded on it). A wave that may not is held: it is not decided at all, so nothing is
//! committed to its folder and it keeps running what it runs.
//!
//! With `onFailure: rollback`, a wave that failed on the revision also sends every earlier
//! wave that took it back to what it ran before the release reached it ([`Release::Revert`],
//! whose status [`reverted`] makes): Failed on that revision, so its own rules never take
//! the revision again by themselves; a newer revision starts in the first wave as usual.
//!
//! [`releases`] runs the rule over a tick's canaries (every release among them); for a wave
//! it reverts, [`revert`] is the decision the executor carries out, from what the adapters
//! observed of the wave before the release reached it ([`BeforeRelease`]).
//!
//! Pure: no IO, no clock. The adapters (`src/waves/`) read the statuses and the commit before
//! the release; the plan renders the revert and the executor commits it.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::model::{short_revision, Canary, Name};
pub use crate::model::{Cluster, OnFailure, WaveOf};
use crate::status::{Phase, Status};

/// The id name of wave `wave`'s instance of canary `canary`: `<canary>.<wave>`.
pub fn instance_name(canary: &Name, wave: &Name) -> Result<Name, String> {
    Name::parse(&format!("{canary}.{wave}"))
}

/// Whether a wave may go on this tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// Decided as any canary: it sees the source's revision.
    Go,
    /// Not decided this tick: nothing is committed to its folder.
    Hold { reason: String },
    /// Not decided this tick: the wave took `revision`, a later wave failed on it, and
    /// `onFailure: rollback` sends this one back to what it ran before the release reached
    /// it, in a commit of its own (its status: [`reverted`]). `reason` names the failed wave
    /// and why it failed.
    Revert { revision: String, reason: String },
}

/// One wave as the release rule sees it.
#[derive(Debug, Clone, Copy)]
pub struct WaveState<'a> {
    pub name: &'a Name,
    /// Its status file; `None` before its first commit.
    pub status: Option<&'a Status>,
}

/// Whether a canary in `phase` is at rest: initialized, or done with its last revision. A
/// wave at rest is not in progress.
pub fn at_rest(phase: Phase) -> bool {
    match phase {
        Phase::Succeeded | Phase::Initialized => true,
        Phase::Initializing
        | Phase::Waiting
        | Phase::Progressing
        | Phase::WaitingApproval
        | Phase::Promoting
        | Phase::Finalising
        | Phase::Failed => false,
    }
}

/// Whether the wave runs `revision` as its promoted one: Succeeded on it, or initialized with
/// it (a revision that was already there when the canary started).
fn runs(status: &Status, revision: &str) -> bool {
    status.promoted_revision == revision && at_rest(status.phase)
}

/// Whether the wave already took `revision` (under analysis, promoted, or failed on it): its
/// own rules carry on with it.
pub fn took(status: &Status, revision: &str) -> bool {
    status.promoted_revision == revision || status.canary_revision.as_deref() == Some(revision)
}

/// The release rule: for each wave, in release order, whether it may see `revision` (the
/// source's) this tick.
///
/// - The first wave always goes: a new revision starts there.
/// - A wave without a status goes: it initializes with what the source holds.
/// - A wave that already took `revision` goes: its analysis (or its rest) carries on.
/// - Any other wave goes once the wave before it runs `revision` as its promoted one, and
///   is held before that: a later wave never sees a revision an earlier one has not passed.
///   A newer revision therefore restarts in the first wave, and a wave that was on the
///   superseded one stays where it is until the newer one reaches it.
/// - With `onFailure: rollback`, once a wave failed on `revision`, every earlier wave that
///   took it and is not Failed (reverted already) is reverted. A reverted wave is Failed on
///   `revision`, so the next ticks leave it there, as its own rules leave a failed canary.
pub fn release(revision: &str, on_failure: OnFailure, waves: &[WaveState<'_>]) -> Vec<Release> {
    let failed = match on_failure {
        OnFailure::Rollback => failed_wave(revision, waves),
        OnFailure::Hold => None,
    };
    let mut out = Vec::with_capacity(waves.len());
    for (i, wave) in waves.iter().enumerate() {
        let previous = i.checked_sub(1).and_then(|p| waves.get(p));
        let reverted = failed.as_ref().filter(|(f, _)| i < *f).filter(|_| {
            wave.status
                .is_some_and(|s| took(s, revision) && s.phase != Phase::Failed)
        });
        if let Some((_, reason)) = reverted {
            out.push(Release::Revert {
                revision: revision.to_string(),
                reason: reason.clone(),
            });
            continue;
        }
        let decision = match (previous, wave.status) {
            (None, _) | (_, None) => Release::Go,
            (Some(_), Some(status)) if took(status, revision) => Release::Go,
            (Some(prev), Some(_)) => match prev.status {
                Some(s) if runs(s, revision) => Release::Go,
                Some(s) => Release::Hold {
                    reason: format!(
                        "waiting for wave {} to succeed on revision {} (it is {}{})",
                        prev.name,
                        short_revision(revision),
                        s.phase,
                        on_revision(s)
                    ),
                },
                None => Release::Hold {
                    reason: format!("waiting for wave {} to start", prev.name),
                },
            },
        };
        out.push(decision);
    }
    out
}

/// Whether the wave failed on `revision`: rolled back (or reverted) from it.
fn failed_on(status: &Status, revision: &str) -> bool {
    status.phase == Phase::Failed
        && status.canary_revision.as_deref() == Some(revision)
        && status.promoted_revision != revision
}

/// The wave that failed on `revision` (the last one that is Failed on it: the waves before
/// it that are Failed on it too were reverted), with why, as a revert of an earlier wave
/// says it.
fn failed_wave(revision: &str, waves: &[WaveState<'_>]) -> Option<(usize, String)> {
    waves.iter().enumerate().rev().find_map(|(i, w)| {
        let s = w.status.filter(|s| failed_on(s, revision))?;
        let reason = format!(
            "wave {} failed on revision {}: {}",
            w.name,
            short_revision(revision),
            s.message
        );
        Some((i, reason))
    })
}

/// One canary of a tick as the release rule sees it: the canary, its status, the source's
/// revision.
pub type Item<'a, R> = (&'a Canary<R>, Option<&'a Status>, &'a str);

/// For each item, in order, what the release rule says of it this tick: [`Release::Go`] (it
/// is decided as usual), held (why), or reverted. Canaries without waves always go. A wave
/// whose instance is not among `items` (its status could not be read) holds every later
/// wave, and reverts none: the rule cannot tell where the release stands.
pub fn releases<R>(items: &[Item<'_, R>]) -> Vec<Release> {
    let mut out = vec![Release::Go; items.len()];
    let mut releases: BTreeMap<(&Name, &Name), Vec<usize>> = BTreeMap::new();
    for (i, (canary, _, _)) in items.iter().enumerate() {
        if canary.wave.is_some() {
            releases
                .entry((&canary.id.namespace, canary.base_name()))
                .or_default()
                .push(i);
        }
    }
    for members in releases.values() {
        let Some(first) = members.first().and_then(|&i| items[i].0.wave.as_ref()) else {
            continue;
        };
        let by_wave = |index: usize| {
            members
                .iter()
                .copied()
                .find(|&i| items[i].0.wave.as_ref().is_some_and(|w| w.index == index))
        };
        // The release's revision is the source's: every wave reads the one source.
        let Some(revision) = by_wave(0).map(|i| items[i].2) else {
            for &i in members {
                out[i] = held(format!("wave {} cannot be read this tick", first.waves[0]));
            }
            continue;
        };
        let mut states = Vec::new();
        let mut slots = Vec::new();
        let mut whole = true;
        for (index, name) in first.waves.iter().enumerate() {
            let Some(i) = by_wave(index) else {
                // Every later wave waits for this one.
                for later in (index + 1..first.waves.len()).filter_map(by_wave) {
                    out[later] = held(format!("wave {name} cannot be read this tick"));
                }
                whole = false;
                break;
            };
            states.push(WaveState {
                name,
                status: items[i].1,
            });
            slots.push(i);
        }
        // A wave that cannot be read may be the one that failed: revert nothing then.
        let on_failure = match whole {
            true => first.on_failure,
            false => OnFailure::Hold,
        };
        for (slot, decision) in slots
            .into_iter()
            .zip(release(revision, on_failure, &states))
        {
            if out[slot] == Release::Go {
                out[slot] = decision;
            }
        }
    }
    out
}

fn held(reason: String) -> Release {
    Release::Hold { reason }
}

/// What a wave had just before the release reached it, as the adapters read it from git:
/// the commit (`from`, full hex id) whose output folder and status the wave goes back to, and
/// that status.
#[derive(Debug, Clone, PartialEq)]
pub struct BeforeRelease {
    pub from: String,
    pub status: Status,
}

/// A wave's revert under `onFailure: rollback`, decided: its folder goes back to the one at
/// `from`, its status to `status` ([`reverted`]), in a commit of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct WaveRevert {
    /// The revision whose release failed.
    pub revision: String,
    /// The commit the wave goes back to (full hex id).
    pub from: String,
    /// The wave's status at `from`.
    pub before: Status,
    /// The wave's status after the revert.
    pub status: Status,
}

/// The revert [`Release::Revert`] asks for (of `revision`, for `reason`), decided at `now` on
/// what the wave had before the release reached it.
pub fn revert(before: BeforeRelease, revision: &str, reason: &str, now: Timestamp) -> WaveRevert {
    let status = reverted(&before.status, revision, reason, now);
    WaveRevert {
        revision: revision.to_string(),
        from: before.from,
        before: before.status,
        status,
    }
}

/// The status of a wave [`Release::Revert`] sends back: `before` (its status at the commit
/// before the release reached it) Failed on `revision` at `now`, saying why. Its weights,
/// promoted revision and stable service are `before`'s, as its folder is.
pub fn reverted(before: &Status, revision: &str, reason: &str, now: Timestamp) -> Status {
    let mut next = before.clone();
    next.phase = Phase::Failed;
    next.phase_since = now;
    next.step_started = now;
    next.canary_revision = Some(revision.to_string());
    next.waiting_for = None;
    next.failed_checks = 0;
    next.last_failed_check = None;
    next.checks = Vec::new();
    next.paused = false;
    next.clock_from_merge = false;
    next.drift = Vec::new();
    next.message = format!(
        "Reverted to revision {}, what it ran before the release of {} reached it: {reason}",
        short_revision(&before.promoted_revision),
        short_revision(revision)
    );
    next
}

fn on_revision(s: &Status) -> String {
    let revision = match s.phase {
        Phase::Progressing
        | Phase::WaitingApproval
        | Phase::Promoting
        | Phase::Finalising
        | Phase::Failed
        | Phase::Waiting => s.canary_revision.as_deref(),
        Phase::Initializing | Phase::Initialized | Phase::Succeeded => {
            Some(s.promoted_revision.as_str())
        }
    };
    revision
        .map(|r| format!(" on {}", crate::model::short_revision(r)))
        .unwrap_or_default()
}

/// Where a release stands, from its waves' statuses (for `sluice status` and `/readyz`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseState {
    /// Every wave runs `revision`.
    Done,
    /// The wave (0-based) that has `revision` in hand, or is next to take it.
    InProgress { wave: usize },
    /// A wave failed on `revision`; with `onFailure: hold` the release stops there, with
    /// `rollback` the waves before it are reverted too.
    Failed { wave: usize },
}

/// Where the release of `revision` stands.
pub fn release_state(revision: &str, waves: &[WaveState<'_>]) -> ReleaseState {
    for (i, wave) in waves.iter().enumerate() {
        match wave.status {
            Some(s) if runs(s, revision) => continue,
            Some(s) if s.phase == Phase::Failed && took(s, revision) => {
                // The waves before the one that failed may be Failed too: reverted.
                let failed = failed_wave(revision, waves).map_or(i, |(f, _)| f.max(i));
                return ReleaseState::Failed { wave: failed };
            }
            Some(_) | None => return ReleaseState::InProgress { wave: i },
        }
    }
    ReleaseState::Done
}

/// One release as `sluice plan` shows it: its waves in order, each with its own simulated
/// rollout, and the least time the whole release takes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleasePlan {
    pub namespace: String,
    pub name: String,
    pub waves: Vec<WavePlan>,
    /// The waves one after the other, each from its new revision to its promotion, approvals
    /// granted at once.
    pub min_duration_seconds: u64,
}

/// One wave of a [`ReleasePlan`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WavePlan {
    pub wave: String,
    /// Whether a person approves the wave's start.
    pub approval: bool,
    pub min_duration_seconds: u64,
    pub canary_weights: Vec<u8>,
}

/// The releases among `canaries` (the instances of each canary with waves, in wave order),
/// simulated with [`crate::simulate::simulate`].
pub fn plan<R>(canaries: &[crate::model::Canary<R>]) -> Vec<ReleasePlan> {
    let mut out: Vec<ReleasePlan> = Vec::new();
    for canary in canaries {
        let Some(wave) = &canary.wave else { continue };
        let sim = crate::simulate::simulate(canary);
        let entry = WavePlan {
            wave: wave.name.to_string(),
            approval: wave.approval,
            min_duration_seconds: sim.min_duration_seconds,
            canary_weights: sim.canary_weights,
        };
        let (namespace, name) = (canary.id.namespace.to_string(), wave.canary.to_string());
        match out
            .iter_mut()
            .find(|r| r.namespace == namespace && r.name == name)
        {
            Some(release) => {
                release.min_duration_seconds += entry.min_duration_seconds;
                release.waves.push(entry);
            }
            None => out.push(ReleasePlan {
                namespace,
                name,
                min_duration_seconds: entry.min_duration_seconds,
                waves: vec![entry],
            }),
        }
    }
    out
}
