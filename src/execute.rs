//! The executor: the one place that carries out a tick's [`Plan`] against git and the forge.
//!
//! 1. [`commit`]: each planned commit on the local branch, one per canary, or the tick's
//!    decisions folded into one under `commits: perTick` (nothing half-committed: a failure
//!    marks every canary of the fold failed);
//! 2. [`push`]: fast-forward only; a rejected push goes back to the tick, which fetches and
//!    decides again on the new head (never a force push);
//! 3. [`announce`], once the commits reached the remote: the decisions' events, notifications
//!    and Flagger alerts, then the approval branches (committed and pushed here) and pull
//!    requests of the canaries that wait or stopped waiting.
//!
//! Manual operations (`crate::manual`) commit and push through [`commit_operation`] and
//! [`push`] too. It decides nothing: what to commit, and why, is in the plan.

use git2::Oid;
use tracing::{info, warn};

use crate::approval::{self, Pending};
use crate::core::decide::Decision;
use crate::drift::Made;
use crate::forge::Forge;
use crate::gitops::{CommitMessage, ConfigRepo, FileChange, Identity, PushOutcome};
use crate::manifest::model::Canary;
use crate::manifest::settings::{CommitMode, Settings};
use crate::observer::Observer;
use crate::outcome::{CanaryError, CanaryOutcome, TickReport};
use crate::plan::{Commit, CommitKind, Plan};
use crate::render::{message, status_file};
use crate::runtime::Runtime;
use crate::yaml::snapshot::Snapshot;

/// A plan carried out on the local branch, not pushed yet.
pub struct Committed {
    pub report: TickReport,
    pub author: Identity,
    /// Committed decisions, to log and notify once they reached the remote.
    announce: Vec<(Canary, Decision)>,
    /// Canaries waiting for approval, or that stopped waiting in this tick.
    pending: Vec<Pending>,
}

/// Makes the plan's commits on the local branch. A git error retrying may fix stops the tick;
/// any other marks its canary (or the fold's canaries) failed. The commits are noted in
/// `drift` (the runtime's) as sluice's own.
pub fn commit(
    repo: &mut ConfigRepo,
    plan: Plan,
    drift: &crate::drift::Memory,
) -> Result<Committed, crate::gitops::Error> {
    let Plan {
        mode,
        author,
        mut report,
        commits,
        approvals,
    } = plan;
    let mut announce = Vec::new();
    let mut made = Vec::new();
    let mut fold: Vec<Commit> = Vec::new();
    for c in commits {
        match (&c.kind, mode) {
            (CommitKind::Decided { .. }, CommitMode::PerTick) => {
                match repo.check_changes(&c.changes) {
                    Ok(()) => fold.push(c),
                    Err(e) => fail(&mut report, &c, &CanaryError::Git(e)),
                }
                continue;
            }
            // The fold goes in before the deleted canaries' reverts, after every canary's own.
            (CommitKind::Revert { .. }, _) => commit_fold(
                repo,
                &author,
                std::mem::take(&mut fold),
                &mut report,
                (&mut announce, &mut made),
            )?,
            (CommitKind::Decided { .. } | CommitKind::Record, _) => {}
        }
        commit_one(repo, &author, c, &mut report, (&mut announce, &mut made))?;
    }
    commit_fold(repo, &author, fold, &mut report, (&mut announce, &mut made))?;
    crate::drift::made(drift, &repo.git_dir(), &made);
    let mut pending = Vec::new();
    for a in approvals {
        let outcome = &report.outcomes[a.outcome];
        let committed = outcome.committed.is_some();
        if let Some(status) = &outcome.status {
            if approval::is_waiting(status) || a.previous.as_ref().is_some_and(approval::is_waiting)
            {
                pending.push(Pending {
                    canary: a.canary,
                    status: status.clone(),
                    previous: a.previous,
                    comment: a.comment.filter(|_| committed),
                });
            }
        }
    }
    Ok(Committed {
        report,
        author,
        announce,
        pending,
    })
}

/// A commit that cannot be made: a canary's own commit fails the canary (as a canary that
/// cannot be decided); a revert keeps its outcome with the error.
fn fail(report: &mut TickReport, c: &Commit, e: &CanaryError) {
    let outcome = &mut report.outcomes[c.outcome];
    match &c.kind {
        CommitKind::Decided { .. } | CommitKind::Record => {
            warn!(canary = %outcome.id, error = %e, "Canary skipped");
            *outcome = CanaryOutcome::of(outcome.id.clone(), None, Some(e.to_string()));
        }
        CommitKind::Revert { .. } => outcome.error = Some(e.to_string()),
    }
}

/// The record of a commit sluice made for `canary`'s decision (`commit` on `parent`), by the
/// status file text it wrote: what the drift check takes as sluice's without rendering it.
/// A drift hold or restore (`Sluice-Drift`) is not recorded: its files are what someone else
/// wrote, and the drift check never takes them for sluice's.
fn made_for(
    canary: &Canary,
    (commit, parent): (Oid, Oid),
    (trailers, changes): (&[(String, String)], &[FileChange]),
) -> Option<Made> {
    if trailers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case(message::DRIFT))
    {
        return None;
    }
    let path = status_file::path_for(&canary.id);
    let text = changes.iter().find(|c| c.path == path)?.content.as_ref()?;
    let status = Oid::hash_object(git2::ObjectType::Blob, text.as_bytes()).ok()?;
    Some(Made {
        canary: canary.id.to_string(),
        commit,
        parent,
        status,
    })
}

/// One commit on the local branch.
fn commit_one(
    repo: &mut ConfigRepo,
    author: &Identity,
    c: Commit,
    report: &mut TickReport,
    (announce, made): (&mut Vec<(Canary, Decision)>, &mut Vec<Made>),
) -> Result<(), crate::gitops::Error> {
    let parent = repo.head();
    match repo.commit_files(&c.changes, &c.message, author, None) {
        Ok(Some(commit)) => {
            report.commits += 1;
            let outcome = &mut report.outcomes[c.outcome];
            outcome.committed = Some(c.message.subject.clone());
            match c.kind {
                CommitKind::Decided { canary, decision } => {
                    made.extend(made_for(
                        &canary,
                        (commit, parent),
                        (&c.message.trailers, &c.changes),
                    ));
                    announce.push((*canary, *decision));
                }
                CommitKind::Revert { event } => {
                    info!(canary = %outcome.id, "{event}");
                    outcome.events.push(event);
                }
                CommitKind::Record => {}
            }
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) if e.is_transient() => Err(e),
        Err(e) => {
            fail(report, &c, &CanaryError::Git(e));
            Ok(())
        }
    }
}

/// The tick's decisions as one commit (`commits: perTick`).
fn commit_fold(
    repo: &mut ConfigRepo,
    author: &Identity,
    fold: Vec<Commit>,
    report: &mut TickReport,
    (announce, made): (&mut Vec<(Canary, Decision)>, &mut Vec<Made>),
) -> Result<(), crate::gitops::Error> {
    let messages: Vec<CommitMessage> = fold.iter().map(|c| c.message.clone()).collect();
    let Some(folded) = message::fold(&messages) else {
        return Ok(());
    };
    let changes: Vec<FileChange> = fold
        .iter()
        .flat_map(|c| c.changes.iter().cloned())
        .collect();
    let parent = repo.head();
    match repo.commit_files(&changes, &folded, author, None) {
        Ok(Some(commit)) => {
            report.commits += 1;
            for c in fold {
                report.outcomes[c.outcome].committed = Some(c.message.subject);
                if let CommitKind::Decided { canary, decision } = c.kind {
                    made.extend(made_for(
                        &canary,
                        (commit, parent),
                        (&c.message.trailers, &c.changes),
                    ));
                    announce.push((*canary, *decision));
                }
            }
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) if e.is_transient() => Err(e),
        Err(e) => {
            let e = CanaryError::Git(e);
            for c in &fold {
                fail(report, c, &e);
            }
            Ok(())
        }
    }
}

/// A manual operation's commit (`sluice approve`, `abort`, ...; see `crate::manual`) on the
/// local branch: the same commit path as the tick's decisions.
pub fn commit_operation(
    repo: &mut ConfigRepo,
    changes: &[FileChange],
    message: &CommitMessage,
    operator: &Identity,
) -> Result<(), crate::gitops::Error> {
    repo.commit_files(changes, message, operator, None)
        .map(drop)
}

/// Pushes the local branch (attempt `attempt` of `attempts`, with backoff between).
pub fn push(
    repo: &mut ConfigRepo,
    attempt: u32,
    attempts: u32,
) -> Result<PushOutcome, crate::gitops::Error> {
    repo.push_attempt(attempt, attempts)
}

/// What the executor needs once the commits reached the remote.
pub struct Announce<'a> {
    pub observer: &'a dyn Observer,
    pub runtime: &'a Runtime,
    pub settings: &'a Settings,
    /// The tick's snapshot: sources do not change by sluice's commits, so it still holds what
    /// an approved change's workloads are rendered from.
    pub snapshot: &'a Snapshot,
}

/// After the push: logs and notifies the committed decisions, then keeps approval branches and
/// pull requests in line. Problems are logged; they never fail the tick.
pub fn announce(repo: &mut ConfigRepo, with: &Announce<'_>, committed: &Committed) {
    for (canary, decision) in &committed.announce {
        for event in &decision.events {
            info!(canary = %canary.id, "{event}");
        }
        with.observer.notify(with.settings, canary, decision);
    }
    if committed.pending.is_empty() {
        return;
    }
    let forge = approval::connect(with.settings.forge.as_ref(), with.runtime);
    for p in &committed.pending {
        approval::comment(forge.as_ref(), with.runtime, p);
        let result = if approval::is_waiting(&p.status) {
            keep_branch(repo, with, forge.as_ref(), &committed.author, p)
        } else {
            approval::close_stale(p, forge.as_ref(), with.runtime, repo.branch())
        };
        if let Err(e) = result {
            warn!(canary = %p.canary.id, error = %e, "Approval branch or pull request not updated");
        }
    }
}

/// Commits and pushes a waiting canary's approval branch when it is missing or behind, then
/// opens its pull request (and under `merge: sluice` merges it once its policy holds).
fn keep_branch(
    repo: &mut ConfigRepo,
    with: &Announce<'_>,
    forge: Option<&Forge>,
    author: &Identity,
    pending: &Pending,
) -> Result<(), approval::ApprovalError> {
    let Some(step) = approval::branch_step(repo, with.runtime, forge, with.snapshot, pending)?
    else {
        return Ok(());
    };
    if let Some(write) = &step.write {
        let oid = repo.commit_on(
            write.parent,
            &write.changes,
            &write.message,
            author,
            Some(write.time),
        )?;
        repo.push_approval_branch(&step.branch, oid)?;
        info!(canary = %pending.canary.id, branch = %step.branch,
              hint = %format!("merge {} into {} (any merge method), or run `sluice approve {}`", step.branch, repo.branch(), pending.canary.id),
              "Approval branch pushed");
    }
    match forge {
        Some(forge) => {
            let page = with.settings.dashboard_page(
                pending.canary.id.namespace.as_str(),
                pending.canary.id.name.as_str(),
            );
            approval::open_pull_request(repo, with.runtime, forge, pending, &step, page)?;
            approval::merge_when_met(repo, with.runtime, forge, with.snapshot, pending, &step)
        }
        None => Ok(()),
    }
}
