//! A canary's verdict for one tick: the [`Facts`] first (files changed outside sluice, approval
//! pull requests closed or merged, a merged approval the signing policy does not allow), then
//! the rollout rules of [`crate::decide`]. The tick gathers the facts and renders what comes
//! back; it decides nothing itself.
//!
//! Also the verdict on a canary whose spec left the repo ([`deleted`]).

use jiff::Timestamp;

use crate::decide::{change, decide, dotted, hold, Action, Decision, DriftStep};
use crate::model::Canary;
use crate::observe::{
    Deletion, DriftFact, DriftPolicy, Facts, MergedApproval, Observations, Unreachable,
};
use crate::operate::{operate, Operation};
use crate::status::{Gate, Phase, Status};

/// The decision for one canary and what it was based on.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub decision: Decision,
    pub basis: Basis,
    /// Things the operator should hear about that changed nothing (logged as warnings).
    pub warnings: Vec<String>,
}

/// What a [`Verdict`] was based on: the commit says so (its replay record, its operator).
#[derive(Debug, Clone, PartialEq)]
pub enum Basis {
    /// The rollout rules on the observations: `sluice audit` replays it.
    Rules,
    /// The rollout rules, on a status a merged approval brought (recorded in the commit).
    Approved {
        by: Option<String>,
        source: String,
        /// The approval policy that held, when the canary has one.
        policy: Option<crate::approval::Met>,
    },
    /// Owned files changed outside sluice (`drift:`): answers a human's edit, which no replay
    /// of the rules can rebuild.
    Drift,
    /// The approval pull request was closed without merging: rolled back (as `sluice abort`).
    Rejected { reason: String },
    /// The merged approval does not approve (not what sluice pushed, a pull request into
    /// another branch, or a login `forge.approvers` does not allow): the canary waits again.
    Refused { reason: String },
    /// The approval was merged, but it cannot be checked yet (who merged it, or what it
    /// holds, is not known): nothing changes.
    MergerUnknown,
    /// The commit that brought the status is not signed as the signing policy requires:
    /// nothing changes until an operator acts.
    Unsigned { reason: String },
    /// The wave's cluster cannot be reached: nothing changes until it answers again (the
    /// status says so once).
    Unreachable(Unreachable),
    /// `maxConcurrentCanaries` is reached: the new revision waits to start (the status file
    /// alone says why, committed when the reason changes).
    Queued { reason: String },
}

/// Decides one canary from its status, observations and facts.
pub fn verdict<R>(
    canary: &Canary<R>,
    status: Option<&Status>,
    obs: &Observations,
    facts: &Facts,
    now: Timestamp,
) -> Verdict {
    if let Some(drift) = &facts.drift {
        return of(drifted(canary, status, drift), Basis::Drift);
    }
    if let Some(held) = status.filter(|s| !s.drift.is_empty()) {
        return of(resumed(held), Basis::Drift);
    }
    if let (Some(fact), Some(status)) = (&facts.unreachable, status) {
        return unreachable(canary, status, fact, now);
    }
    if let (true, Some(status)) = (facts.adoption_hold, status) {
        return of(adopting(canary, status), Basis::Rules);
    }
    if let (Some(reason), Some(status)) = (&facts.queued, status) {
        return of(
            queued(status, reason, now),
            Basis::Queued {
                reason: reason.clone(),
            },
        );
    }
    let mut warnings = Vec::new();
    if let Some(reason) = &facts.rejected {
        match operate(canary, status, Operation::Abort, reason, now) {
            Ok(decision) => {
                let basis = Basis::Rejected {
                    reason: reason.clone(),
                };
                return of(decision, basis);
            }
            Err(e) => warnings.push(format!(
                "Approval rejected ({reason}), but the canary cannot roll back: {e}"
            )),
        }
    }
    if let (Some(reason), Some(status)) = (&facts.unsigned, status) {
        return unsigned(canary, status, reason, warnings);
    }
    let (decision, basis) = match (&facts.merged, status) {
        (Some(MergedApproval::MergerUnknown(why)), Some(status)) => {
            warnings.push(format!(
                "Approval merged; not judged until it can be checked: {why}"
            ));
            (hold(status, None, why.clone()), Basis::MergerUnknown)
        }
        (Some(MergedApproval::Refused { waiting, reason }), _) => (
            refused(canary, waiting, reason),
            Basis::Refused {
                reason: reason.clone(),
            },
        ),
        (Some(MergedApproval::Approved { by, source, policy }), _) => (
            decide(canary, status, obs, now),
            Basis::Approved {
                by: by.clone(),
                source: source.clone(),
                policy: policy.clone(),
            },
        ),
        (Some(MergedApproval::MergerUnknown(_)) | None, _) => {
            (decide(canary, status, obs, now), Basis::Rules)
        }
    };
    Verdict {
        decision,
        basis,
        warnings,
    }
}

fn of(decision: Decision, basis: Basis) -> Verdict {
    Verdict {
        decision,
        basis,
        warnings: Vec::new(),
    }
}

/// The wave's cluster did not answer: hold (a wave is never moved, let alone promoted, on a
/// cluster sluice cannot see) and look again one analysis interval on. Said once: the first
/// tick commits the status alone with the reason (so `sluice status`, the history and the
/// notifications tell it), later ticks of the same outage change nothing.
fn unreachable<R>(
    canary: &Canary<R>,
    status: &Status,
    fact: &Unreachable,
    now: Timestamp,
) -> Verdict {
    let said = format!("Held: cluster unreachable: {}:", fact.cluster);
    let event = format!(
        "{said} {}; the wave makes no change until its cluster answers again",
        fact.error
    );
    let again = crate::decide::after(now, canary.analysis.interval);
    let decision = if status.message.starts_with(&said) {
        hold(status, Some(again), event.clone())
    } else {
        change(
            Action::Unreachable,
            status.clone(),
            event.clone(),
            Some(again),
        )
    };
    Verdict {
        decision,
        basis: Basis::Unreachable(fact.clone()),
        warnings: vec![event],
    }
}

/// What a canary held for an adoption is told: it already has its first render (a canary
/// without a status is initialized as usual, which renders it at rest), so nothing changes,
/// whatever its source, approvals or metrics say, until `adoption.hold` leaves the settings.
pub const HELD_ADOPTION: &str = "held: adoption:";

fn adopting<R>(canary: &Canary<R>, status: &Status) -> Decision {
    hold(
        status,
        None,
        format!(
            "{HELD_ADOPTION} {} keeps its first render and starts no rollout while .sluice/config.yaml sets adoption.hold (`sluice adopt release` removes it)",
            dotted(canary)
        ),
    )
}

/// `maxConcurrentCanaries` is reached: the canary stays where it is and its status says why,
/// from the first tick that sees it wait (`waitingSince`, which orders the queue). The status
/// is committed again only when the reason changes (another canary progresses).
fn queued(status: &Status, reason: &str, now: Timestamp) -> Decision {
    if status.message == reason && status.waiting_since.is_some() {
        return hold(status, None, reason.to_string());
    }
    let mut next = status.clone();
    next.message = reason.to_string();
    next.waiting_since = Some(status.waiting_since.unwrap_or(now));
    change(Action::Queued, next, reason.to_string(), None)
}

/// The status came in a commit the signing policy does not allow: hold, changing nothing,
/// and say so every tick until an operator acts (a manual operation writes the status again,
/// in sluice's own commit).
fn unsigned<R>(
    canary: &Canary<R>,
    status: &Status,
    reason: &str,
    mut warnings: Vec<String>,
) -> Verdict {
    let event = format!(
        "Held: {reason}; sluice does not act on a change the signing policy does not allow (run `sluice abort {}` to roll back)",
        canary.id
    );
    warnings.push(event.clone());
    Verdict {
        decision: hold(status, None, event),
        basis: Basis::Unsigned {
            reason: reason.to_string(),
        },
        warnings,
    }
}

/// The status a canary had before an approval it may not take was merged: it waits again
/// (for the gate it waited for), and the route and workloads go back with it, so nothing a
/// tampered approval branch brought is built on.
fn refused<R>(canary: &Canary<R>, waiting: &Status, reason: &str) -> Decision {
    let action = match (waiting.phase, waiting.waiting_for) {
        (Phase::Waiting, _) => Action::WaitRollout,
        (_, gate) => Action::WaitApproval(gate.unwrap_or(Gate::TrafficIncrease)),
    };
    let event = format!("Approval of {} refused: {reason}", dotted(canary));
    change(action, waiting.clone(), event, None)
}

/// Owned files changed outside sluice: hold (said once, then nothing to commit) or write back
/// sluice's version, as the repo settings say. `status` is the one at the head.
fn drifted<R>(canary: &Canary<R>, status: Option<&Status>, drift: &DriftFact) -> Decision {
    let files = drift.files.join(", ");
    let by = if drift.by.is_empty() {
        String::new()
    } else {
        format!(" by {}", drift.by)
    };
    let mut next = drift.sluice_status.clone();
    if let Some(lookback) = drift.beyond {
        let (them, they) = if drift.files.len() == 1 {
            ("it", "it is")
        } else {
            ("them", "they are")
        };
        let event = format!(
            "Held: {files} changed outside sluice{by}: not what sluice renders for the canary's status, and no commit of sluice's for {them} is within the last {lookback} commits; sluice makes no change (it cannot tell what it wrote, so it restores nothing) until {they} sluice's again (revert the change, or run a manual operation such as `sluice abort {}`)",
            canary.id
        );
        return held(status, drift, next, event);
    }
    match drift.policy {
        DriftPolicy::Hold => {
            let event = format!(
                "Held: {files} changed outside sluice{by}; sluice makes no change until {} sluice's again (revert the change, or run a manual operation such as `sluice abort {}`), or set `drift: restore` in .sluice/config.yaml",
                if drift.files.len() == 1 { "it is" } else { "they are" },
                canary.id
            );
            held(status, drift, next, event)
        }
        DriftPolicy::Restore => {
            let short = drift.output_from.get(..7).unwrap_or(&drift.output_from);
            let event = format!(
                "Restored {files} changed outside sluice{by}: written back as sluice committed them in {short}"
            );
            next.drift.clear();
            let action = Action::Drift(DriftStep::Restore {
                files: drift.files.clone(),
                from: drift.output_from.clone(),
            });
            change(action, next, event, None)
        }
    }
}

/// A drift hold: said once (the status names the files), then nothing to commit.
fn held(status: Option<&Status>, drift: &DriftFact, mut next: Status, event: String) -> Decision {
    match status.filter(|s| drift.files.iter().all(|f| s.drift.contains(f))) {
        Some(held) => hold(held, None, event),
        None => {
            next.drift = drift.files.clone();
            let action = Action::Drift(DriftStep::Hold {
                files: drift.files.clone(),
            });
            change(action, next, event, None)
        }
    }
}

/// The decision that draws `status` as it stands, for the renderers to draw again what sluice
/// committed with it: how the drift check tells a commit sluice wrote from one that only says
/// so. It moves nothing and is never committed. With `promoted` the primary workload is drawn
/// from the source (as initialization and promotion draw it); otherwise the primary already
/// in the output folder is kept (as every other step keeps it).
pub fn redrawn(status: &Status, promoted: bool) -> Decision {
    let action = if promoted {
        Action::Promote
    } else {
        Action::Hold
    };
    change(action, status.clone(), status.message.clone(), None)
}

/// The hold ends: the owned files are sluice's again (`held` is the held status at the head).
/// A commit of the status alone says so; the canary decides again from the next tick on.
fn resumed(held: &Status) -> Decision {
    let event = format!(
        "Resumed: {} sluice's again",
        match held.drift.as_slice() {
            [one] => format!("{one} is"),
            many => format!("{} are", many.join(", ")),
        }
    );
    let mut next = held.clone();
    next.drift.clear();
    change(Action::Drift(DriftStep::Resolved), next, event, None)
}

/// What becomes of a canary whose spec was deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletedVerdict {
    /// No `revertOnDeletion`: the output stays as it is (logged as orphaned).
    Orphaned,
    /// `revertOnDeletion`, but a spec or YAML file fails to load (a broken spec is not a
    /// deleted one): the revert waits; the text says why.
    Held(String),
    /// `revertOnDeletion`: one commit reverts the output.
    Revert,
}

/// Decides a deleted canary's revert.
pub fn deleted(d: &Deletion) -> DeletedVerdict {
    if !d.reverts {
        return DeletedVerdict::Orphaned;
    }
    let why = match (&d.unloadable, d.spec_errors) {
        (Some(file), _) => format!("{file} does not load"),
        (None, true) => "a canary spec does not load".to_string(),
        (None, false) => return DeletedVerdict::Revert,
    };
    DeletedVerdict::Held(format!("the spec is gone and revertOnDeletion is recorded, but {why}: the revert waits until every spec loads (a broken spec is not a deleted one)"))
}
