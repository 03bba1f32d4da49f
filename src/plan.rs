//! The tick's plan: the core's verdicts turned into what the executor (`crate::execute`)
//! carries out. For each canary its outcome and, when its decision commits, the files and
//! message of its commit (route, workloads, kustomization, status file, `Sluice-*` trailers);
//! the reverts of deleted canaries; and the canaries whose approval branches and pull requests
//! must be kept in line once the commits are pushed.
//!
//! Rendering only: nothing here reads the forge, commits or pushes, and nothing is decided
//! here that the core did not decide.

use std::path::Path;

use jiff::Timestamp;
use tracing::{info, warn};

use crate::approval;
use crate::core::decide::{Action, Decision};
use crate::core::operate::Operation;
use crate::core::status::Status;
use crate::core::verdict::{Basis, DeletedVerdict, Verdict};
use crate::core::waves::WaveRevert;
use crate::deleted::{self, Deleted};
use crate::facts::{Known, Read, Undecided};
use crate::gitops::{CommitMessage, FileChange, Identity};
use crate::manifest::model::Canary;
use crate::manifest::settings::{CommitMode, SETTINGS_PATH};
use crate::outcome::{CanaryError, CanaryOutcome, TickReport};
use crate::render::replay::{By, Record};
use crate::render::{self, message};
use crate::workload;

/// What one tick attempt does, in order.
pub struct Plan {
    /// One commit per canary, or the tick's decisions folded into one (`commits: perTick`).
    pub mode: CommitMode,
    pub author: Identity,
    /// The outcomes (no commit made yet) and the refused specs.
    pub report: TickReport,
    pub commits: Vec<Commit>,
    /// Canaries whose approval branch or pull request may need keeping in line after the push.
    pub approvals: Vec<ApprovalCheck>,
}

/// A commit to make: the outcome it belongs to, its files and message.
pub struct Commit {
    /// The index of its canary's outcome in the report.
    pub outcome: usize,
    pub changes: Vec<FileChange>,
    pub message: CommitMessage,
    pub kind: CommitKind,
}

/// What a [`Commit`] carries.
pub enum CommitKind {
    /// A decision: folded into the tick's one commit under `commits: perTick`; logged and
    /// notified once pushed.
    Decided {
        canary: Box<Canary>,
        decision: Box<Decision>,
    },
    /// While the canary holds, an owned file follows the spec: the status file's record of
    /// it (`revertOnDeletion`), or the route copied again from its edited route source.
    Record,
    /// A deleted canary's output reverted, or a wave reverted under `onFailure: rollback`;
    /// `event` is said once committed.
    Revert { event: String },
}

/// A canary whose approval pull request may need a branch, a comment or closing.
pub struct ApprovalCheck {
    pub outcome: usize,
    pub canary: Canary,
    /// Its status before this tick.
    pub previous: Option<Status>,
    /// A comment for its pull request, left only if the canary's commit is made.
    pub comment: Option<(u64, String)>,
}

/// The plan of a tick whose repo settings do not load: every canary holds, nothing commits.
pub fn held_for_settings(read: &Read) -> Plan {
    // The canaries were read with default settings only to name them here.
    let held = CanaryError::Settings {
        file: SETTINGS_PATH.to_string(),
        problems: read
            .settings_errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    };
    let mut plan = empty(read);
    for canary in &read.loaded.canaries {
        plan.report
            .outcomes
            .push(CanaryOutcome::failed(canary, &held));
    }
    plan
}

fn empty(read: &Read) -> Plan {
    Plan {
        mode: read.settings.commits,
        author: read.author.clone(),
        report: TickReport {
            spec_errors: read.spec_errors.clone(),
            ..TickReport::default()
        },
        commits: Vec::new(),
        approvals: Vec::new(),
    }
}

/// One canary as the tick decided it: its facts, and the core's verdict when they could be
/// read.
pub struct Decided<'a> {
    pub canary: &'a Canary,
    pub known: Result<(Known, Verdict), CanaryError>,
}

/// A wave the core reverts under `onFailure: rollback`: its decision, and the folder's files
/// observed to differ from the commit it goes back to.
pub struct WaveReverted<'a> {
    pub canary: &'a Canary,
    /// Its status at the head.
    pub status: Option<Status>,
    pub revert: WaveRevert,
    pub folder: Vec<FileChange>,
}

/// Plans the tick: the canaries not decided first (not read, or held by the release rule),
/// then the waves a failed release reverts (`onFailure: rollback`), each decided canary's
/// outcome and commit, then the deleted canaries' reverts. `files` reads the repo files the
/// snapshot did not (the head's tree); `root` is the work dir, named in errors.
pub fn build<'a>(
    (root, files): (&Path, &dyn workload::Outside),
    read: &Read,
    (undecided, reverted): (Vec<Undecided<'a>>, Vec<WaveReverted<'a>>),
    decided: Vec<Decided<'_>>,
    deletions: Vec<(Deleted, DeletedVerdict)>,
    now: Timestamp,
) -> Plan {
    let mut plan = empty(read);
    for u in undecided {
        let outcome = match u {
            Undecided::Outcome(outcome) => outcome,
            Undecided::Held {
                canary,
                status,
                reason,
            } => {
                info!(canary = %canary.id, reason = %reason, "Wave held");
                let mut held = CanaryOutcome::of(canary.id.to_string(), status, None);
                held.events.push(format!("held: {reason}"));
                held
            }
        };
        plan.report.outcomes.push(outcome);
    }
    for r in reverted {
        let canary = r.canary;
        let status = r.revert.status.clone();
        match crate::waves::revert::render(canary, &r.revert, r.folder, now) {
            Ok((changes, message)) => {
                let event = format!("Reverted wave {}: {}", canary.id, status.message);
                plan.commits.push(Commit {
                    outcome: plan.report.outcomes.len(),
                    changes,
                    message,
                    kind: CommitKind::Revert { event },
                });
                let outcome = CanaryOutcome::of(canary.id.to_string(), Some(status), None);
                plan.report.outcomes.push(outcome);
            }
            Err(e) => {
                warn!(canary = %canary.id, error = %e, "Wave not reverted");
                let outcome =
                    CanaryOutcome::of(canary.id.to_string(), r.status, Some(e.to_string()));
                plan.report.outcomes.push(outcome);
            }
        }
    }
    // Every canary's output, as the facts' index had them: a file there is never a source.
    let outputs: Vec<&str> = read
        .loaded
        .canaries
        .iter()
        .map(|c| c.output.as_str())
        .collect();
    let index = workload::Index::reading(&read.snapshot, &outputs, files);
    let who = format!("{} <{}>", read.author.name, read.author.email);
    for d in decided {
        let at = plan.report.outcomes.len();
        let canary = d.canary;
        let (known, verdict) = match d.known {
            Ok(known) => known,
            Err(e) => {
                plan.report.outcomes.push(CanaryOutcome::failed(canary, &e));
                continue;
            }
        };
        let outcome = match canary_commit(root, &index, canary, &known, verdict, &who, now) {
            Ok((outcome, commit)) => {
                if let Some(commit) = commit {
                    plan.commits.push(Commit {
                        outcome: at,
                        ..commit
                    });
                }
                outcome
            }
            Err(e) => CanaryOutcome::failed(canary, &e),
        };
        // Only a canary waiting for approval, before or after this tick, has a pull request
        // to look after (execute checks again once the commits are made).
        let waiting = outcome.status.as_ref().is_some_and(approval::is_waiting)
            || known.status.as_ref().is_some_and(approval::is_waiting);
        plan.report.outcomes.push(outcome);
        if waiting {
            plan.approvals.push(ApprovalCheck {
                outcome: at,
                canary: canary.clone(),
                previous: known.status,
                comment: known.comment,
            });
        }
    }
    for (d, verdict) in deletions {
        revert(read, &mut plan, d, verdict, now);
    }
    plan
}

/// One canary's outcome and commit: its decision's, or, when the decision holds, the status
/// file's record of a changed `revertOnDeletion`.
fn canary_commit(
    root: &Path,
    index: &workload::Index,
    canary: &Canary,
    known: &Known,
    verdict: Verdict,
    who: &str,
    now: Timestamp,
) -> Result<(CanaryOutcome, Option<Commit>), CanaryError> {
    for warning in &verdict.warnings {
        warn!(canary = %canary.id, "{warning}");
    }
    let decision = verdict.decision;
    if verdict.basis == Basis::Drift {
        for event in &decision.events {
            warn!(canary = %canary.id, "{event}");
        }
    }
    let mut outcome = CanaryOutcome::of(canary.id.to_string(), Some(decision.status.clone()), None);
    outcome.events = decision.events.clone();
    outcome.wake_at = decision.wake_at;
    if !decision.commits() {
        let record = known
            .status
            .as_ref()
            .and_then(|s| deleted::record_update(canary, s, known.record.as_ref()));
        let commit = record.map(|(change, mut message)| {
            let record = Record::of(By::Record {}, now);
            message.trailers.push(record.trailer());
            Commit {
                outcome: 0,
                changes: vec![change],
                message,
                kind: CommitKind::Record,
            }
        });
        let commit = match commit {
            Some(commit) => Some(commit),
            None => route_refresh(root, index, canary, known, &verdict.basis, now)?,
        };
        return Ok((outcome, commit));
    }
    let (changes, message) = decision_commit(
        root,
        index,
        canary,
        known,
        &verdict.basis,
        &decision,
        who,
        now,
    )?;
    let commit = Commit {
        outcome: 0,
        changes,
        message,
        kind: CommitKind::Decided {
            canary: Box::new(canary.clone()),
            decision: Box::new(decision),
        },
    };
    Ok((outcome, Some(commit)))
}

/// A canary that holds while its route source (`spec.routeSource`) was edited: the route
/// copied again at the status's weights, in a commit of its own. Not while the canary holds
/// for drift or waits for an approval (whose branch carries the next change, rendered on the
/// main branch as it is), nor while it is suspended.
fn route_refresh(
    root: &Path,
    index: &workload::Index,
    canary: &Canary,
    known: &Known,
    basis: &Basis,
    now: Timestamp,
) -> Result<Option<Commit>, CanaryError> {
    let Some(status) = known.status.as_ref() else {
        return Ok(None);
    };
    let waiting = status.phase == crate::core::status::Phase::WaitingApproval;
    if !matches!(basis, Basis::Rules) || known.facts.drift.is_some() || canary.suspend || waiting {
        return Ok(None);
    }
    let refreshed = render::route_refresh::route_refresh(root, canary, status, index)?;
    Ok(refreshed.map(|(change, mut message)| {
        message
            .trailers
            .push(Record::of(By::RouteSource {}, now).trailer());
        Commit {
            outcome: 0,
            changes: vec![change],
            message,
            kind: CommitKind::Record,
        }
    }))
}

/// The files and message of a decision's commit; the message's replay record and operator say
/// what the decision was based on.
#[allow(clippy::too_many_arguments)]
fn decision_commit(
    root: &Path,
    index: &workload::Index,
    canary: &Canary,
    known: &Known,
    basis: &Basis,
    decision: &Decision,
    who: &str,
    now: Timestamp,
) -> Result<(Vec<FileChange>, CommitMessage), CanaryError> {
    let changes = match basis {
        // A cluster outage is said by the status file alone, as a drift hold is.
        Basis::Drift | Basis::Unreachable(_) | Basis::Queued { .. } => {
            render::drift_changes(canary, decision, &known.restore)?
        }
        _ => render::changes(root, canary, decision, index)?,
    };
    let operator = match basis {
        Basis::Rejected { reason } | Basis::Refused { reason } => Some((who, reason.as_str())),
        Basis::Rules
        | Basis::Approved { .. }
        | Basis::Drift
        | Basis::MergerUnknown
        | Basis::Unsigned { .. }
        | Basis::Unreachable(_)
        | Basis::Queued { .. } => None,
    };
    let mut message = message::render(canary, decision, operator);
    let mut met = None;
    if let (Basis::Approved { by, source, policy }, Action::ApprovalMerged) =
        (basis, &decision.action)
    {
        message = match policy {
            Some(policy) => message::with_policy(message, policy, source),
            None => message::with_approval(message, by.as_deref(), source),
        };
        met = policy.as_ref();
    }
    let record = match basis {
        Basis::Rules | Basis::Approved { .. } => match met {
            Some(met) => Record::decided(&known.observations, now).with_approval(met),
            None => Record::decided(&known.observations, now),
        },
        Basis::Rejected { reason } => Record::operated(Operation::Abort, reason, who, reason, now),
        // Audit checks the drift it names against the history, then decides again on it.
        Basis::Drift => match &known.facts.drift {
            Some(fact) => Record::drift(fact, now),
            None => Record::of(By::Resume {}, now),
        },
        Basis::Refused { reason } => Record::of(
            By::Refused {
                reason: reason.clone(),
                operator: who.to_string(),
            },
            now,
        ),
        // A hold: it never commits (the merger is asked again on the next tick).
        Basis::MergerUnknown => Record::of(
            By::Other {
                what: "approval merged by an unknown login".to_string(),
            },
            now,
        ),
        Basis::Unreachable(fact) => Record::of(
            By::Unreachable {
                cluster: fact.cluster.clone(),
                error: fact.error.clone(),
            },
            now,
        ),
        Basis::Queued { reason } => Record::of(
            By::Queued {
                reason: reason.clone(),
            },
            now,
        ),
        Basis::Unsigned { reason } => Record::of(
            By::Other {
                what: format!("held: {reason}"),
            },
            now,
        ),
    };
    let judge = crate::judge::trailers::of(canary, decision, &known.observations);
    message.trailers.extend(judge);
    message.trailers.push(record.trailer());
    Ok((changes, message))
}

/// A deleted canary: orphaned (logged), held (reported), or reverted by one commit.
fn revert(read: &Read, plan: &mut Plan, d: Deleted, verdict: DeletedVerdict, now: Timestamp) {
    let mut outcome = CanaryOutcome::of(d.id.to_string(), None, None);
    match verdict {
        DeletedVerdict::Orphaned => {
            info!(canary = %d.id, status = %d.status_file, "Orphaned: the spec was deleted without revertOnDeletion; its output is left as it is");
            return;
        }
        DeletedVerdict::Held(why) => {
            warn!(canary = %d.id, error = %why, "Revert held");
            outcome.error = Some(why);
        }
        DeletedVerdict::Revert => match deleted::revert(&read.snapshot, &d) {
            Ok(mut revert) => {
                let record = Record::of(By::Revert {}, now);
                revert.message.trailers.push(record.trailer());
                plan.commits.push(Commit {
                    outcome: plan.report.outcomes.len(),
                    changes: revert.changes,
                    message: revert.message,
                    kind: CommitKind::Revert {
                        event: format!("Terminated canary {}.{}", d.id.name, d.id.namespace),
                    },
                });
            }
            Err(e) => {
                warn!(canary = %d.id, error = %e, "Cannot revert a deleted canary");
                outcome.error = Some(e.to_string());
            }
        },
    }
    plan.report.outcomes.push(outcome);
}
