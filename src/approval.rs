//! Approval by pull request: the change a canary waits for is committed on a branch
//! `sluice/<namespace>/<name>/<step>-<revision>` on top of the main branch, pushed, and (with a forge
//! configured) proposed as a pull request. Merging it, by any method, puts the next step's
//! status and route on the main branch: the loop simply reads it and goes on, so approval is
//! detected from content, not commit ids. A pull request closed without merging aborts the
//! rollout; one left behind by a canary that moved on is closed with a comment.

use tracing::{info, warn};

use crate::core::operate::{operate, Operation};
use crate::core::status::{Gate, Phase, Status};
use crate::forge::{Forge, PrState};
use crate::gitops::{ConfigRepo, FileChange, Identity};
use crate::output::{message, status_file};
use crate::reconcile::{render_changes, Manual, TickReport};
use crate::spec::model::{Canary, Target};
use crate::spec::snapshot::Snapshot;
use crate::workload;

/// Why an approval branch or pull request could not be kept in line; logged, never fatal.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error(transparent)]
    Git(#[from] crate::gitops::Error),
    #[error(transparent)]
    Forge(#[from] crate::forge::ForgeError),
    #[error(transparent)]
    NotApplicable(#[from] crate::core::operate::NotApplicable),
    #[error(transparent)]
    Workload(#[from] crate::workload::WorkloadError),
    #[error(transparent)]
    Canary(#[from] crate::reconcile::CanaryError),
    #[error(transparent)]
    Operate(#[from] crate::reconcile::OperateError),
}

/// A canary waiting for approval, or one that stopped waiting in this tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub canary: Canary,
    pub status: Status,
    pub previous: Option<Status>,
}

/// True while a canary holds for a human (or a confirm-* webhook).
pub fn is_waiting(status: &Status) -> bool {
    matches!(status.phase, Phase::Waiting | Phase::WaitingApproval) && !status.paused
}

/// The approval branch for a waiting status.
pub fn branch_for(canary: &Canary, status: &Status) -> Option<String> {
    let key = match (status.phase, status.waiting_for) {
        (Phase::Waiting, _) | (_, Some(Gate::Rollout)) => "rollout".to_string(),
        (Phase::WaitingApproval, Some(Gate::Promotion)) => "promotion".to_string(),
        (Phase::WaitingApproval, _) => format!("step-{}", status.step + 1),
        _ => return None,
    };
    // The revision keeps a closed pull request of an earlier rollout from aborting this one.
    let revision = status.canary_revision.as_deref().unwrap_or_default();
    let revision = revision.get(..7).unwrap_or(revision);
    Some(format!(
        "sluice/{}/{}/{key}-{revision}",
        canary.id.namespace, canary.id.name
    ))
}

/// Keeps approval branches and pull requests in line with the canaries' states. Problems are
/// logged; they never stop the loop.
pub fn handle(
    repo: &mut ConfigRepo,
    report: &TickReport,
    push_attempts: u32,
    _now: jiff::Timestamp,
) {
    if report.approvals.is_empty() {
        return;
    }
    let author = report.author.clone().unwrap_or_default();
    let forge = report.forge.as_ref().and_then(|settings| {
        let token = match crate::forge::token_from_env() {
            Ok(t) => t,
            Err(e) => {
                warn!(msg = "Cannot read the forge token", error = %e);
                return None;
            }
        };
        match Forge::from_settings(settings, token) {
            Ok(f) => Some(f),
            Err(e) => {
                warn!(msg = "Cannot use the forge", error = %e);
                None
            }
        }
    });
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            warn!(msg = "Cannot start the forge client", error = %e);
            return;
        }
    };
    for pending in &report.approvals {
        let result = if is_waiting(&pending.status) {
            keep_branch(
                repo,
                pending,
                &author,
                forge.as_ref(),
                &runtime,
                push_attempts,
                report.on_close,
            )
        } else {
            close_stale(pending, forge.as_ref(), &runtime)
        };
        if let Err(e) = result {
            warn!(canary = %pending.canary.id, msg = "Approval branch or pull request not updated", error = %e);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn keep_branch(
    repo: &mut ConfigRepo,
    pending: &Pending,
    author: &Identity,
    forge: Option<&Forge>,
    runtime: &tokio::runtime::Runtime,
    push_attempts: u32,
    on_close: crate::spec::settings::OnClose,
) -> Result<(), ApprovalError> {
    let canary = &pending.canary;
    let status = &pending.status;
    let Some(branch) = branch_for(canary, status) else {
        return Ok(());
    };
    let status_path = status_file::path_for(&canary.id);
    let head = repo.head();
    // Up to date when the branch sits on a main whose status file still equals main's now.
    let current = repo.fetch_branch(&branch)?;
    let up_to_date = match current {
        Some(oid) => {
            let parent_status = repo
                .parent_of(oid)?
                .map(|p| repo.read_file_at(p, &status_path))
                .transpose()?
                .flatten();
            parent_status.is_some() && parent_status == repo.read_file_at(head, &status_path)?
        }
        None => false,
    };
    let mut approved = operate(
        canary,
        Some(status),
        Operation::Approve,
        "approved by merging the pull request",
        status.phase_since,
    )?;
    // The merge, not the PR's creation, starts the approved step's clock.
    approved.status.clock_from_merge = true;
    let subject = message::subject(canary, &approved);
    if !up_to_date {
        let root = repo.root().to_path_buf();
        let snapshot = match canary.target {
            Target::RouteOnly { .. } => Snapshot::EMPTY,
            Target::Source { .. } | Target::TargetRef { .. } => Snapshot::read(&root),
        };
        let index = workload::Index::new(&snapshot, &[canary.output.as_str()]);
        let changes: Vec<FileChange> = render_changes(&root, canary, &approved, &index)?;
        let msg = message::render(
            canary,
            &approved,
            Some(("pull request", "approved by merging")),
        );
        let time = git2::Time::new(status.phase_since.as_second(), 0);
        let oid = repo.commit_on(head, &changes, &msg, author, Some(time))?;
        repo.push_approval_branch(&branch, oid)?;
        info!(canary = %canary.id, msg = "Approval branch pushed", branch = %branch,
              hint = %format!("merge {branch} into {} (any merge method), or run `sluice approve {}`", repo.branch(), canary.id));
    }
    let Some(forge) = forge else {
        return Ok(());
    };
    let base = repo.branch().to_string();
    let latest = runtime.block_on(forge.latest_for_branch(&branch))?;
    match latest.map(|pr| (pr.state, pr)) {
        None => {
            let before = (status.primary_weight, status.canary_weight);
            let after = (
                approved.status.primary_weight,
                approved.status.canary_weight,
            );
            let checks = message::checks_table(status);
            let body = crate::forge::pr_body(
                &canary.id.to_string(),
                &branch_step(&branch),
                before,
                after,
                &checks,
            );
            let pr = runtime.block_on(forge.ensure_open(
                &branch,
                &base,
                &format!("Approve {subject}"),
                &body,
            ))?;
            info!(canary = %canary.id, msg = "Approval pull request opened", url = %pr.url);
        }
        Some((PrState::Open, _)) | Some((PrState::Merged, _)) => {}
        Some((PrState::Closed, pr)) if on_close == crate::spec::settings::OnClose::Hold => {
            info!(canary = %canary.id, msg = "Approval pull request closed; holding (forge.onClose: hold)", number = pr.number);
        }
        Some((PrState::Closed, pr)) => {
            // Closed without merging: abort, unless the PR is older than this wait (reopened
            // branch for a later step would have a newer PR).
            let manual = Manual {
                canary: &canary.id.to_string(),
                op: Operation::Abort,
                operator: author.clone(),
                reason: &format!(
                    "approval pull request #{} was closed without merging",
                    pr.number
                ),
                push_attempts,
            };
            let done = crate::reconcile::operate(repo, &manual, jiff::Timestamp::now())?;
            info!(canary = %canary.id, msg = %done);
        }
    }
    Ok(())
}

/// After a manual operation: closes the approval pull request the canary no longer waits on.
pub fn close_left_behind(pending: &Pending, forge: Option<&crate::spec::settings::ForgeSettings>) {
    let Some(settings) = forge else {
        return;
    };
    let forge = match crate::forge::token_from_env()
        .and_then(|token| Forge::from_settings(settings, token))
    {
        Ok(f) => f,
        Err(e) => {
            warn!(msg = "Cannot use the forge", error = %e);
            return;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            warn!(msg = "Cannot start the forge client", error = %e);
            return;
        }
    };
    if let Err(e) = close_stale(pending, Some(&forge), &runtime) {
        warn!(canary = %pending.canary.id, msg = "Stale approval pull request not closed", error = %e);
    }
}

fn branch_step(branch: &str) -> String {
    branch.rsplit('/').next().unwrap_or(branch).to_string()
}

fn close_stale(
    pending: &Pending,
    forge: Option<&Forge>,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), ApprovalError> {
    let (Some(forge), Some(previous)) = (forge, &pending.previous) else {
        return Ok(());
    };
    let Some(branch) = branch_for(&pending.canary, previous) else {
        return Ok(());
    };
    if branch_for(&pending.canary, &pending.status).as_deref() == Some(branch.as_str()) {
        return Ok(());
    }
    let open = runtime
        .block_on(forge.latest_for_branch(&branch))?
        .filter(|pr| pr.state == PrState::Open);
    if let Some(pr) = open {
        let note = format!(
            "The canary moved on ({}: {}); this approval no longer applies.",
            pending.status.phase, pending.status.message
        );
        runtime.block_on(forge.close(pr.number, Some(&note)))?;
        info!(canary = %pending.canary.id, msg = "Stale approval pull request closed", number = pr.number);
    }
    Ok(())
}
