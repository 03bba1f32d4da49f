//! Manual operations (`sluice approve|promote|abort|retry|pause|resume`) as pure decisions.
//!
//! Each operation is checked against the canary's phase and turns into the same kind of
//! [`Decision`] the loop makes, so it is rendered and committed the same way, with the
//! operator and reason in the trailers. No IO, no clock reads.

use jiff::Timestamp;

use crate::decide::{
    advance, after, begin_rollout, change, dotted, reset_analysis, rollback, with_route_state,
    Action, Decision, RollbackCause,
};
use crate::model::Canary;
use crate::status::{Phase, Status};

/// A manual operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Approve the change the canary waits for (the rollout start, the next step, the promotion).
    Approve,
    /// Skip the remaining steps and promote now.
    Promote,
    /// Roll back now.
    Abort,
    /// Re-run the analysis of a failed revision.
    Retry,
    /// Hold the canary where it is.
    Pause,
    /// Continue a paused canary.
    Resume,
}

impl Operation {
    /// Every operation, in the order the CLI and the dashboard list them.
    pub const ALL: [Operation; 6] = [
        Operation::Approve,
        Operation::Promote,
        Operation::Abort,
        Operation::Retry,
        Operation::Pause,
        Operation::Resume,
    ];

    pub fn verb(self) -> &'static str {
        match self {
            Operation::Approve => "approve",
            Operation::Promote => "promote",
            Operation::Abort => "abort",
            Operation::Retry => "retry",
            Operation::Pause => "pause",
            Operation::Resume => "resume",
        }
    }
}

/// Why an operation does not apply, in words for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotApplicable(pub String);

/// The decision an operation makes on `status`.
pub fn operate<R>(
    canary: &Canary<R>,
    status: Option<&Status>,
    op: Operation,
    reason: &str,
    now: Timestamp,
) -> Result<Decision, NotApplicable> {
    operation(canary, status, op, reason, now).map(|d| with_route_state(canary, d, now))
}

fn operation<R>(
    canary: &Canary<R>,
    status: Option<&Status>,
    op: Operation,
    reason: &str,
    now: Timestamp,
) -> Result<Decision, NotApplicable> {
    let Some(status) = status else {
        return Err(NotApplicable(format!(
            "{} has no status yet; run `sluice reconcile` first",
            canary.id.name
        )));
    };
    match op {
        Operation::Approve => approve(canary, status, now),
        Operation::Promote => promote(canary, status, reason, now),
        Operation::Abort => abort(canary, status, reason, now),
        Operation::Retry => retry(canary, status, reason, now),
        Operation::Pause | Operation::Resume => {
            pause(canary, status, op == Operation::Pause, reason, now)
        }
    }
}

/// Why an operation does nothing in the canary's phase.
fn nothing<R>(canary: &Canary<R>, status: &Status, what: &str) -> NotApplicable {
    NotApplicable(format!(
        "{} is {}; nothing to {what}",
        canary.id.name, status.phase
    ))
}

fn approve<R>(
    canary: &Canary<R>,
    status: &Status,
    now: Timestamp,
) -> Result<Decision, NotApplicable> {
    match status.phase {
        Phase::WaitingApproval => Ok(advance(canary, status, status.checks.clone(), now)),
        // The rollout starts as if its gate had opened on its own, so a canary that skips
        // its analysis is promoted at once here too.
        Phase::Waiting => {
            let revision = status.canary_revision.clone().unwrap_or_default();
            Ok(begin_rollout(canary, status, &revision, now))
        }
        Phase::Initializing
        | Phase::Initialized
        | Phase::Progressing
        | Phase::Promoting
        | Phase::Finalising
        | Phase::Succeeded
        | Phase::Failed => Err(nothing(canary, status, "approve")),
    }
}

fn promote<R>(
    canary: &Canary<R>,
    status: &Status,
    reason: &str,
    now: Timestamp,
) -> Result<Decision, NotApplicable> {
    // A rollout is promoted by hand while its steps are judged (`Phase::is_analysing`, an
    // exhaustive match over the phases).
    if !status.phase.is_analysing() {
        return Err(nothing(canary, status, "promote"));
    }
    let mut next = status.clone();
    next.phase = Phase::Promoting;
    next.phase_since = now;
    next.step_started = now;
    next.waiting_for = None;
    if let Some(revision) = &status.canary_revision {
        next.promoted_revision = revision.clone();
    }
    Ok(change(
        Action::Promote,
        next,
        format!(
            "Copying {} template spec to {}-primary.{} (promoted by hand: {reason})",
            dotted(canary),
            canary.id.name,
            canary.id.namespace
        ),
        Some(after(now, canary.analysis.interval)),
    ))
}

fn abort<R>(
    canary: &Canary<R>,
    status: &Status,
    reason: &str,
    now: Timestamp,
) -> Result<Decision, NotApplicable> {
    match status.phase {
        Phase::Progressing | Phase::WaitingApproval | Phase::Waiting => Ok(rollback(
            canary,
            status,
            format!("aborted by hand: {reason}"),
            RollbackCause::Manual,
            now,
        )),
        Phase::Promoting | Phase::Finalising => Err(NotApplicable(format!(
            "{} is {}: the primary already runs the new revision; push the old revision to roll back",
            canary.id.name, status.phase
        ))),
        Phase::Initializing | Phase::Initialized | Phase::Succeeded | Phase::Failed => {
            Err(nothing(canary, status, "abort"))
        }
    }
}

fn retry<R>(
    canary: &Canary<R>,
    status: &Status,
    reason: &str,
    now: Timestamp,
) -> Result<Decision, NotApplicable> {
    match (status.phase, &status.canary_revision) {
        (Phase::Failed, Some(revision)) => {
            let next = reset_analysis(status, revision, now);
            Ok(change(
                Action::StartRollout,
                next,
                format!(
                    "Retrying the analysis of {} by hand: {reason}",
                    dotted(canary)
                ),
                Some(after(now, canary.analysis.interval)),
            ))
        }
        (
            Phase::Initializing
            | Phase::Initialized
            | Phase::Waiting
            | Phase::Progressing
            | Phase::WaitingApproval
            | Phase::Promoting
            | Phase::Finalising
            | Phase::Succeeded
            | Phase::Failed,
            _,
        ) => Err(nothing(canary, status, "retry")),
    }
}

fn pause<R>(
    canary: &Canary<R>,
    status: &Status,
    pause: bool,
    reason: &str,
    now: Timestamp,
) -> Result<Decision, NotApplicable> {
    if status.paused == pause {
        return Err(NotApplicable(format!(
            "{} is already {}",
            canary.id.name,
            if pause {
                "paused"
            } else {
                "running (not paused)"
            }
        )));
    }
    let mut next = status.clone();
    next.paused = pause;
    let event = if pause {
        format!("{} paused by hand: {reason}", dotted(canary))
    } else {
        format!("{} resumed by hand: {reason}", dotted(canary))
    };
    Ok(change(
        if pause { Action::Pause } else { Action::Resume },
        next,
        event,
        Some(now),
    ))
}
