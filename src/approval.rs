//! Approval by pull request: the change a canary waits for is committed on a branch
//! `sluice/<namespace>/<name>/<step>-<revision>` on top of the main branch, pushed, and (with a
//! forge configured) proposed as a pull request. Merging it, by any method, puts the next step's
//! status and route on the main branch: the loop simply reads it and goes on, so approval is
//! detected from content, not commit ids.
//!
//! Two steps of the tick use this module, and it calls back into neither:
//! - before deciding, [`rejection`] says whether a waiting canary's pull request was closed
//!   without merging (`forge.onClose: rollback` then rolls it back in that tick's commit);
//! - after the push, the executor (`crate::execute`) keeps approval branches in line: it
//!   commits and pushes what [`branch_step`] renders, then [`open_pull_request`] opens the pull
//!   request, and [`close_stale`] closes those left behind by canaries that moved on.
//!
//! - before deciding, [`merged`] says whether the approval that put a status with
//!   `clockFromMerge` on the main branch approves: the merge must hold exactly the change
//!   sluice pushed on the approval branch (its owned files as [`branch_step`] renders them,
//!   whatever a force push left on the branch), its pull request must target the branch
//!   sluice reconciles, and the canary's approval policy (`approval`, or `forge.approvers`)
//!   must hold on the pull request's reviews and merger. The decision's commit then records
//!   the approvers (`Sluice-Approved-By`, `Sluice-Approval`, `Sluice-Approval-Policy`),
//!   or puts the waiting state back (and every owned file with it), the pull request gets a
//!   comment and a fresh one asks again.
//!
//! It never commits or pushes. Problems are logged; they never stop the loop.

mod judge_table;

use tracing::{info, warn};

use crate::core::approval::{
    check, memberships_needed, ApprovalPolicy, Evidence, MergeBy, Met, Outcome,
};
use crate::core::decide::Decision;
use crate::core::observe::{Facts, MergedApproval};
use crate::core::status::{Gate, Phase, Status};
use crate::forge::{Forge, PrState, PullRequest};
use crate::gitops::{CommitMessage, ConfigRepo, FileChange};
use crate::manifest::model::Canary;
use crate::manifest::settings::{ForgeSettings, OnClose};
use crate::remake::{remake, Base, Made, Remade, RemakeError};
use crate::render::replay::{By, Record};
use crate::render::{message, status_file};
use crate::runtime::Runtime;
use crate::workload;
use crate::yaml::snapshot::Snapshot;
use git2::Oid;

/// Why an approval branch or pull request could not be kept in line; logged, never fatal.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error(transparent)]
    Git(#[from] crate::gitops::Error),
    #[error(transparent)]
    Forge(#[from] crate::forge::ForgeError),
    #[error(transparent)]
    Workload(#[from] crate::workload::WorkloadError),
    #[error(transparent)]
    Remake(#[from] RemakeError),
}

/// A canary waiting for approval, or one that stopped waiting in this tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub canary: Canary,
    pub status: Status,
    pub previous: Option<Status>,
    /// A comment to leave on an approval pull request once the tick's commits are pushed
    /// (why its merge did not approve).
    pub comment: Option<(u64, String)>,
}

/// What an approval merged into the main branch amounts to, read before deciding.
#[derive(Debug, Clone, PartialEq)]
pub enum Merged {
    /// It approves: `by` merged it (without a forge to ask, git's committer of the merge as
    /// `Name <email>`, unverified), `source` is the pull
    /// request's URL (the approval branch's name without a forge or pull request), `policy`
    /// the approval policy it met and who met it (`None`: the canary has no policy).
    Approved {
        by: Option<String>,
        source: String,
        policy: Option<Met>,
    },
    /// The merge does not approve (it does not hold what sluice pushed, its pull request
    /// targets another branch, or `forge.approvers` does not let the merger approve):
    /// `waiting` (the status before the merge) goes back on the main branch, and pull request
    /// `number` gets `reason`.
    Refused {
        waiting: Box<Status>,
        number: Option<u64>,
        reason: String,
    },
    /// The merge cannot be checked yet (the forge could not say who merged it, or sluice's
    /// change cannot be rendered to compare): decide nothing for this canary in this tick.
    Unknown(String),
}

impl Merged {
    /// The fact the core weighs, and the comment its pull request gets when the merge did not
    /// approve (number, text; left once the tick's commits are pushed).
    pub fn into_fact(self) -> (MergedApproval, Option<(u64, String)>) {
        match self {
            Merged::Approved { by, source, policy } => {
                (MergedApproval::Approved { by, source, policy }, None)
            }
            Merged::Refused {
                waiting,
                number,
                reason,
            } => {
                let comment = number.map(|n| (n, format!("This merge did not approve: {reason}.")));
                (MergedApproval::Refused { waiting, reason }, comment)
            }
            Merged::Unknown(why) => (MergedApproval::MergerUnknown(why), None),
        }
    }
}

/// How many first-parent commits [`merged`] looks back for the status before the merge.
const MERGE_LOOKBACK: usize = 500;

/// The main branch just before an approval was merged.
struct BeforeMerge {
    /// The status then: the one the approval branch was rendered from.
    waiting: Status,
    /// The commit that brought the approval's status (the merge, squash or cherry-pick).
    merge: Oid,
    /// Its first parent.
    parent: Oid,
}

/// The status on the main branch before the approval was merged: the newest first-parent
/// ancestor of the head whose status file differs from the head's. Any merge method (merge
/// commit, squash, rebase) leaves it there.
fn status_before_merge(repo: &ConfigRepo, canary: &Canary) -> Option<BeforeMerge> {
    let path = status_file::path_for(&canary.id);
    let head = repo.head();
    let now = repo.read_file_at(head, &path).ok()?;
    let mut at = head;
    for _ in 0..MERGE_LOOKBACK {
        let child = at;
        at = repo.parent_of(at).ok()??;
        let text = repo.read_file_at(at, &path).ok()?;
        if text != now {
            let waiting = status_file::parse(&text?).ok()?;
            return Some(BeforeMerge {
                waiting,
                merge: child,
                parent: at,
            });
        }
    }
    None
}

/// Without a forge pull request to ask, the approver is whoever git says committed the
/// merge (or the squashed or cherry-picked commit): `Name <email>`, unverified.
fn committer(repo: &ConfigRepo, merge: Option<Oid>) -> Option<String> {
    let who = repo.committer_of(merge?).ok()?;
    Some(format!("{} <{}>", who.name, who.email))
}

/// Before deciding a canary whose status came from a merged approval (`clockFromMerge`):
/// whether the merge approves. It does when it holds exactly what sluice pushed on the
/// approval branch, its pull request (with a forge) merged into `repo.branch()`, and it meets
/// the canary's approval policy (`forge.approvers` is one). `snapshot` is the tick's: what
/// sluice pushed is rendered again from it, as [`branch_step`] rendered it.
pub fn merged(
    repo: &ConfigRepo,
    forge: Option<&Forge>,
    runtime: &Runtime,
    snapshot: &Snapshot,
    canary: &Canary,
) -> Merged {
    let Some(before) = status_before_merge(repo, canary) else {
        return Merged::Unknown(format!(
            "the status before the approval was merged is not found in the last {MERGE_LOOKBACK} commits, so the merge cannot be checked against what sluice pushed"
        ));
    };
    let refuse = |number: Option<u64>, reason: String| Merged::Refused {
        waiting: Box::new(before.waiting.clone()),
        number,
        reason,
    };
    let Some(branch) = branch_for(canary, &before.waiting) else {
        return refuse(None, format!(
            "{} was changed to an approved status, but the status before it ({}) waited for no approval",
            status_file::path_for(&canary.id),
            before.waiting.phase
        ));
    };
    let base = repo.branch();
    let pr = match forge.map(|f| merged_pull_request(f, runtime, &branch, base)) {
        None => None,
        Some(Ok(pr)) => pr,
        Some(Err(e)) => {
            return Merged::Unknown(format!("cannot read the approval pull request: {e}"))
        }
    };
    if let Some(pr) = pr.as_ref().filter(|pr| pr.base != base) {
        return refuse(Some(pr.number), format!(
            "pull request #{} merged {branch} into {}, not {base}: only a pull request into {base} approves; the canary keeps waiting for an approver",
            pr.number, pr.base
        ));
    }
    match tampered(repo, runtime, snapshot, canary, &before) {
        Ok(files) if files.is_empty() => {}
        Ok(files) => return refuse(pr.as_ref().map(|pr| pr.number), format!(
            "the merge of {branch} does not hold what sluice pushed on it ({} differ); the canary keeps waiting for an approval of sluice's change",
            files.join(", ")
        )),
        Err(e) => return Merged::Unknown(format!(
            "cannot render the change sluice pushed on {branch} to compare it with the merge: {e}"
        )),
    }
    approver(
        repo,
        forge,
        runtime,
        (canary, snapshot),
        (&branch, pr),
        &before,
        refuse,
    )
}

/// The newest pull request of `branch` into `base` if it is merged; else the newest into any
/// base if that one is merged (into another base: the caller refuses it); else `None`.
fn merged_pull_request(
    forge: &Forge,
    runtime: &Runtime,
    branch: &str,
    base: &str,
) -> Result<Option<PullRequest>, crate::forge::ForgeError> {
    let is_merged = |pr: &PullRequest| pr.state == PrState::Merged;
    let into_base = runtime.block_on(forge.latest_for_branch(branch, Some(base)))?;
    if let Some(pr) = into_base.filter(is_merged) {
        return Ok(Some(pr));
    }
    let any = runtime.block_on(forge.latest_for_branch(branch, None))?;
    Ok(any.filter(|pr| is_merged(pr) && pr.base != base))
}

/// The owned files whose content at the head is not what sluice pushed on the approval branch
/// for `before.waiting`: the rendered files that differ, and files of the output folder the
/// merge changed that sluice did not render (an added file, say). Empty when the merge holds
/// exactly sluice's change.
fn tampered(
    repo: &ConfigRepo,
    runtime: &Runtime,
    snapshot: &Snapshot,
    canary: &Canary,
    before: &BeforeMerge,
) -> Result<Vec<String>, ApprovalError> {
    let changes = approval_change(repo, runtime, snapshot, canary, &before.waiting)?.changes;
    let head = repo.head();
    let mut files = Vec::new();
    for change in &changes {
        if repo.read_file_at(head, &change.path)? != change.content {
            files.push(change.path.clone());
        }
    }
    for path in repo.changed_files(before.parent, head, canary.output.as_str())? {
        if !changes.iter().any(|c| c.path == path) && !files.contains(&path) {
            files.push(path);
        }
    }
    Ok(files)
}

/// Who approved a merge that holds sluice's change, and whether the canary's approval policy
/// holds: the login that merged `pr` (read from the pull request itself: lists do not always
/// say, GitHub's never do) and the pull request's reviews, or without a merged pull request
/// git's committer of the merge (which no policy accepts).
fn approver(
    repo: &ConfigRepo,
    forge: Option<&Forge>,
    runtime: &Runtime,
    (canary, snapshot): (&Canary, &Snapshot),
    (branch, pr): (&str, Option<PullRequest>),
    before: &BeforeMerge,
    refuse: impl Fn(Option<u64>, String) -> Merged,
) -> Merged {
    let policy = canary.approval.as_ref();
    let (Some(forge), Some(pr)) = (forge, pr) else {
        return match policy {
            None => Merged::Approved {
                by: committer(repo, Some(before.merge)),
                source: branch.to_string(),
                policy: None,
            },
            Some(_) if forge.is_none() => refuse(None, format!("the approval ({branch}) was merged without a forge pull request to tell who approved it, and an approval policy is set")),
            Some(_) => refuse(None, format!("{branch} was merged without its pull request, so no forge login approved it, and an approval policy is set")),
        };
    };
    let full = match runtime.block_on(forge.get(pr.number)) {
        Ok(full) => full,
        Err(e) => return Merged::Unknown(format!("cannot read pull request #{}: {e}", pr.number)),
    };
    let Some(policy) = policy else {
        return Merged::Approved {
            by: full.merged_by,
            source: pr.url,
            policy: None,
        };
    };
    let revision = (revision_file(canary, snapshot), before.parent);
    let evidence = match evidence((repo, forge, runtime), policy, &full, revision) {
        Ok(evidence) => evidence,
        Err(e) => {
            return Merged::Unknown(format!(
                "cannot read the reviews of approval pull request #{}: {e}",
                pr.number
            ))
        }
    };
    match check(policy, &evidence) {
        Outcome::Met(approvals) => Merged::Approved {
            by: full.merged_by,
            source: pr.url,
            policy: Some(Met {
                policy: policy.clone(),
                approvals,
                author: evidence.author,
                merger: evidence.merger,
            }),
        },
        Outcome::Missing(missing) => {
            let merger = evidence
                .merger
                .as_deref()
                .unwrap_or("someone the forge does not name");
            refuse(
                Some(pr.number),
                format!(
                    "{merger} merged approval pull request #{}, but the approval policy ({policy}) is not met: {missing}; the canary keeps waiting for approvals",
                    pr.number
                ),
            )
        }
    }
}

/// What the forge says about approval pull request `pr` that the policy weighs: its reviews
/// and head, who merged it, under `forbidSelfApproval` the forge account of the revision's
/// author (the newest commit before `before` that changed the canary's source), and the team
/// memberships the policy's teams need. `revision` is the file whose newest change made the
/// revision ([`revision_file`]) and the commit to look back from.
fn evidence(
    (repo, forge, runtime): (&ConfigRepo, &Forge, &Runtime),
    policy: &ApprovalPolicy,
    pr: &PullRequest,
    revision: (String, Oid),
) -> Result<Evidence, ApprovalError> {
    let reviews = runtime.block_on(forge.reviews(pr.number))?;
    let mut evidence = Evidence {
        reviews,
        head: pr.head_sha.clone(),
        author: None,
        merger: pr.merged_by.clone(),
        members: std::collections::BTreeSet::new(),
    };
    if policy.forbid_self_approval {
        if let Some(sha) = revision_commit(repo, &revision.0, revision.1)? {
            evidence.author = runtime.block_on(forge.commit_author(&sha.to_string()))?;
        }
    }
    for (team, login) in memberships_needed(policy, &evidence) {
        if runtime.block_on(forge.is_member(&team, &login))? {
            evidence.members.insert((team, login));
        }
    }
    Ok(evidence)
}

/// The file a new revision of `canary` is written in: its source, a Flagger canary's target
/// workload's file, or for a route-only canary its own spec (which names the revision).
fn revision_file(canary: &Canary, snapshot: &Snapshot) -> String {
    use crate::manifest::model::Target;
    match &canary.target {
        Target::Source { path } => path.as_str().to_string(),
        Target::TargetRef { kind, name } => snapshot
            .find(kind, name.as_str())
            .find(|o| {
                o.namespace
                    .is_none_or(|ns| ns == canary.id.namespace.as_str())
            })
            .map_or_else(|| canary.file.clone(), |o| o.file.to_string()),
        // A Rollout's revision is its own file's; with a `workloadRef` the Deployment's file
        // is not followed yet, so the author is whoever last changed the Rollout.
        Target::RouteOnly { .. } | Target::Rollout { .. } => canary.file.clone(),
    }
}

/// The commit that made the canary's revision: the newest first-parent commit from `at` back
/// (within [`MERGE_LOOKBACK`]) that changed `path`.
fn revision_commit(repo: &ConfigRepo, path: &str, at: Oid) -> Result<Option<Oid>, ApprovalError> {
    let mut at = at;
    for _ in 0..MERGE_LOOKBACK {
        let Some(parent) = repo.parent_of(at)? else {
            return Ok(Some(at));
        };
        if repo.entry_id_at(at, path)? != repo.entry_id_at(parent, path)? {
            return Ok(Some(at));
        }
        at = parent;
    }
    Ok(None)
}

/// True while a canary holds for a human (or a confirm-* webhook).
pub fn is_waiting(status: &Status) -> bool {
    status.is_waiting()
}

/// The approval branch for a waiting status.
pub fn branch_for(canary: &Canary, status: &Status) -> Option<String> {
    let key = match (status.phase, status.waiting_for) {
        (Phase::Waiting, _) | (_, Some(Gate::Rollout)) => "rollout".to_string(),
        (Phase::WaitingApproval, Some(Gate::Promotion)) => "promotion".to_string(),
        (Phase::WaitingApproval, _) => format!("step-{}", status.step + 1),
        (
            Phase::Initializing
            | Phase::Initialized
            | Phase::Progressing
            | Phase::Promoting
            | Phase::Finalising
            | Phase::Succeeded
            | Phase::Failed,
            _,
        ) => return None,
    };
    // The revision keeps a closed pull request of an earlier rollout from aborting this one.
    let revision = status.canary_revision.as_deref().unwrap_or_default();
    let revision = revision.get(..7).unwrap_or(revision);
    Some(format!(
        "sluice/{}/{}/{key}-{revision}",
        canary.id.namespace, canary.id.name
    ))
}

/// The forge for the repo's `forge` settings, on the client and token built at start (or the
/// GitHub App's tokens, see [`Runtime::forge_client_for`]); `None` (logged) without settings or
/// when the token or settings are unusable.
pub fn connect(settings: Option<&ForgeSettings>, runtime: &Runtime) -> Option<Forge> {
    let settings = settings?;
    let client = match runtime.forge_client_for(settings) {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "Cannot use the forge token");
            return None;
        }
    };
    match Forge::from_settings(settings, &client) {
        Ok(f) => Some(f),
        Err(e) => {
            warn!(error = %e, "Cannot use the forge");
            None
        }
    }
}

/// Before deciding: the reason to roll back a waiting canary whose approval pull request (into
/// `base`, the branch sluice reconciles) was closed without merging (`forge.onClose:
/// rollback`), or `None` to decide as usual.
pub fn rejection(
    forge: &Forge,
    runtime: &Runtime,
    (on_close, base): (OnClose, &str),
    canary: &Canary,
    status: &Status,
) -> Option<String> {
    if !is_waiting(status) {
        return None;
    }
    let branch = branch_for(canary, status)?;
    let latest = match runtime.block_on(forge.latest_for_branch(&branch, Some(base))) {
        Ok(latest) => latest?,
        Err(e) => {
            warn!(canary = %canary.id, error = %e, "Cannot read the approval pull request");
            return None;
        }
    };
    match (latest.state, on_close) {
        (PrState::Closed, OnClose::Rollback) => Some(format!(
            "approval pull request #{} was closed without merging",
            latest.number
        )),
        (PrState::Closed, OnClose::Hold) => {
            info!(canary = %canary.id, number = latest.number, "Approval pull request closed; holding (forge.onClose: hold)");
            None
        }
        (PrState::Open | PrState::Merged, _) => None,
    }
}

/// After the push, for a pending canary: the comment its approval pull request gets (why a
/// merge did not approve), if any. Logged, never fatal.
pub fn comment(forge: Option<&Forge>, runtime: &Runtime, pending: &Pending) {
    if let (Some(forge), Some((number, text))) = (forge, &pending.comment) {
        if let Err(e) = runtime.block_on(forge.comment(*number, text)) {
            warn!(canary = %pending.canary.id, number, error = %e, "Cannot comment on the approval pull request");
        }
    }
}

/// The approval branch of a waiting canary, as it should be: the commit to push when the
/// branch is missing or behind, and what its pull request needs.
pub struct BranchStep {
    pub branch: String,
    /// The commit to push on `branch`, when it is missing or out of date.
    pub write: Option<BranchCommit>,
    /// The branch's newest pull request, if any.
    latest: Option<PullRequest>,
    /// That pull request was merged but did not approve: a new one is opened.
    refused: bool,
    /// The approval the branch carries.
    approved: Decision,
}

/// A commit for an approval branch: on `parent` (the main branch's head), at `time`.
pub struct BranchCommit {
    pub parent: Oid,
    pub changes: Vec<FileChange>,
    pub message: CommitMessage,
    pub time: git2::Time,
}

/// The approval of `waiting`, and the files and message of its commit: what the approval
/// branch carries ([`crate::remake`], as `sluice audit` makes it again). Rendered from the
/// tick's `snapshot` (sources do not change by sluice's commits) and nothing else, so
/// [`merged`] renders again exactly what [`branch_step`] pushed.
fn approval_change(
    repo: &ConfigRepo,
    runtime: &Runtime,
    snapshot: &Snapshot,
    canary: &Canary,
    waiting: &Status,
) -> Result<Remade, ApprovalError> {
    let files = runtime.head_files(repo, false);
    let head = files.at(repo.git(), repo.root());
    let outputs = [canary.output.as_str()];
    let index = workload::Index::reading(snapshot, &outputs, &head);
    let base = Base {
        root: repo.root(),
        index: &index,
    };
    let record = Record::merged_approval(waiting);
    let facts = Facts::default();
    let made = Made::Recorded {
        status: Some(waiting),
        record: &record,
        facts: &facts,
        restore: &[],
    };
    Ok(remake(&base, canary, made)?)
}

/// Whether the approval branch at `oid` is what sluice would push now: on a main branch
/// whose status file equals the head's, not merged into the head yet, and holding `changes`.
/// A branch a human force-pushed fails the last test and is written again.
fn branch_is_current(
    repo: &ConfigRepo,
    oid: Oid,
    status_path: &str,
    changes: &[FileChange],
) -> Result<bool, ApprovalError> {
    let head = repo.head();
    let parent_status = repo
        .parent_of(oid)?
        .map(|p| repo.read_file_at(p, status_path))
        .transpose()?
        .flatten();
    if parent_status.is_none() || parent_status != repo.read_file_at(head, status_path)? {
        return Ok(false);
    }
    if repo.is_descendant_or_self(&head.to_string(), &oid.to_string()) {
        return Ok(false);
    }
    for change in changes {
        if repo.read_file_at(oid, &change.path)? != change.content {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Reads the approval branch and pull request of a waiting canary and renders the change it
/// should carry; `None` when the status has no approval branch. The executor commits and
/// pushes [`BranchStep::write`], then calls [`open_pull_request`].
/// `snapshot` is the tick's: sources do not change by sluice's commits, so it still holds
/// what the approved change's workloads are rendered from.
pub fn branch_step(
    repo: &ConfigRepo,
    runtime: &Runtime,
    forge: Option<&Forge>,
    snapshot: &Snapshot,
    pending: &Pending,
) -> Result<Option<BranchStep>, ApprovalError> {
    let canary = &pending.canary;
    let status = &pending.status;
    let Some(branch) = branch_for(canary, status) else {
        return Ok(None);
    };
    let status_path = status_file::path_for(&canary.id);
    // Still waiting though the branch's pull request into the reconciled branch was merged:
    // that merge did not approve (see [`merged`]). The change goes on a fresh commit on
    // today's main, in a new pull request.
    let latest = match forge {
        Some(forge) => runtime.block_on(forge.latest_for_branch(&branch, Some(repo.branch())))?,
        None => None,
    };
    let merged = latest
        .as_ref()
        .is_some_and(|pr| pr.state == PrState::Merged);
    // Merged after this tick fetched: the next tick reads the merge and decides on it. Only a
    // merge the main branch refused (put the waiting status back) asks again.
    if merged && !refused_on_main(repo, canary) {
        return Ok(None);
    }
    let refused = merged;
    let Remade {
        decision: approved,
        changes,
        message,
    } = approval_change(repo, runtime, snapshot, canary, status)?;
    let up_to_date = !refused
        && match repo.fetch_branch(&branch)? {
            Some(oid) => branch_is_current(repo, oid, &status_path, &changes)?,
            None => false,
        };
    let write = if up_to_date {
        None
    } else {
        Some(BranchCommit {
            parent: repo.head(),
            changes,
            message,
            time: git2::Time::new(status.phase_since.as_second(), 0),
        })
    };
    Ok(Some(BranchStep {
        branch,
        write,
        latest,
        refused,
        approved,
    }))
}

/// Whether the newest decisive record of `canary` on the main branch (within
/// [`MERGE_LOOKBACK`] first-parent commits) is a refused approval: then its approval pull
/// request's merge was read and did not approve. Otherwise the newest one is the decision that
/// made the wait (or an approval), and a merged pull request is one the tick has not fetched
/// yet. Record updates, drift holds and the like are passed over.
fn refused_on_main(repo: &ConfigRepo, canary: &Canary) -> bool {
    let id = canary.id.to_string();
    let mut at = Some(repo.head());
    for _ in 0..MERGE_LOOKBACK {
        let Some(oid) = at else { return false };
        let Ok(facts) = repo.commit_facts(oid) else {
            return false;
        };
        let group = crate::gitops::trailer_group(&facts.trailers, message::CANARY, &id);
        let ours = group
            .first()
            .is_some_and(|(k, v)| k.eq_ignore_ascii_case(message::CANARY) && *v == id);
        let record = group
            .iter()
            .filter(|_| ours)
            .find(|(k, _)| k.eq_ignore_ascii_case(crate::render::replay::REPLAY))
            .and_then(|(_, v)| Record::parse(v).ok());
        match record.map(|r| r.by) {
            Some(By::Refused { .. }) => return true,
            Some(By::Decide { .. } | By::Operate { .. } | By::WaveRevert { .. }) => return false,
            Some(
                By::Record {}
                | By::Revert {}
                | By::RouteSource {}
                | By::Drift { .. }
                | By::Unreachable { .. }
                | By::Queued { .. }
                | By::Resume {}
                | By::Other { .. },
            )
            | None => {}
        }
        at = facts.parents.first().copied();
    }
    false
}

/// Opens the approval pull request (into `repo.branch()`) of a pushed [`BranchStep`], unless one
/// is open already (one closed without merging is read before the next decision,
/// [`rejection`], which rolls back or holds as `forge.onClose` says). When a marginal judgement
/// made the wait, its body holds the judge's table, recalled from `repo`'s history.
pub fn open_pull_request(
    repo: &ConfigRepo,
    runtime: &Runtime,
    forge: &Forge,
    pending: &Pending,
    step: &BranchStep,
    dashboard_page: Option<String>,
) -> Result<(), ApprovalError> {
    if step.latest.is_some() && !step.refused {
        return Ok(());
    }
    let canary = &pending.canary;
    let status = &pending.status;
    let approved = &step.approved;
    let subject = message::subject(canary, approved);
    let before = (status.primary_weight, status.canary_weight);
    let after = (
        approved.status.primary_weight,
        approved.status.canary_weight,
    );
    let checks = message::checks_table(status);
    // Only when the pull request is opened: a history walk, not a per-tick cost.
    let judge = judge_table::waited_on(repo, canary, status)
        .map(|report| crate::judge::report::markdown(&report));
    let body = crate::forge::pr_body(&crate::forge::PrBody {
        canary: &canary.id.to_string(),
        step: &branch_key(&step.branch),
        weights_before: before,
        weights_after: after,
        checks_markdown: &checks,
        judge_markdown: judge.as_deref(),
        dashboard_page: dashboard_page.as_deref(),
    });
    let pr = runtime.block_on(forge.ensure_open(
        &step.branch,
        repo.branch(),
        &format!("Approve {subject}"),
        &body,
    ))?;
    info!(canary = %canary.id, url = %pr.url, "Approval pull request opened");
    Ok(())
}

fn branch_key(branch: &str) -> String {
    branch.rsplit('/').next().unwrap_or(branch).to_string()
}

/// Closes the approval pull request (into `base`, the branch sluice reconciles) a canary no
/// longer waits on, with a comment saying why.
pub fn close_stale(
    pending: &Pending,
    forge: Option<&Forge>,
    runtime: &Runtime,
    base: &str,
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
        .block_on(forge.latest_for_branch(&branch, Some(base)))?
        .filter(|pr| pr.state == PrState::Open);
    if let Some(pr) = open {
        let note = format!(
            "The canary moved on ({}: {}); this approval no longer applies.",
            pending.status.phase, pending.status.message
        );
        runtime.block_on(forge.close(pr.number, Some(&note)))?;
        info!(canary = %pending.canary.id, number = pr.number, "Stale approval pull request closed");
    }
    Ok(())
}

/// Under `merge: sluice`: merges the waiting canary's open approval pull request, at the head
/// its reviews were given on, once they meet the policy. The merge lands at the next fetch
/// and is weighed as any merge ([`merged`]). Not while the branch was just written again
/// (the reviews are of the old head) or the pull request is a refused one.
pub fn merge_when_met(
    repo: &ConfigRepo,
    runtime: &Runtime,
    forge: &Forge,
    snapshot: &Snapshot,
    pending: &Pending,
    step: &BranchStep,
) -> Result<(), ApprovalError> {
    let canary = &pending.canary;
    let Some(policy) = canary
        .approval
        .as_ref()
        .filter(|p| p.merge == MergeBy::Sluice)
    else {
        return Ok(());
    };
    let open = step
        .latest
        .as_ref()
        .filter(|pr| pr.state == PrState::Open && !step.refused && step.write.is_none());
    let Some(pr) = open else {
        return Ok(());
    };
    let pr = runtime.block_on(forge.get(pr.number))?;
    let Some(head) = pr.head_sha.clone() else {
        warn!(canary = %canary.id, number = pr.number, "The forge does not say the approval pull request's head; sluice does not merge it");
        return Ok(());
    };
    let revision = (revision_file(canary, snapshot), repo.head());
    let evidence = evidence((repo, forge, runtime), policy, &pr, revision)?;
    match check(policy, &evidence) {
        Outcome::Met(approvals) => {
            runtime.block_on(forge.merge(pr.number, &head))?;
            let by: Vec<&str> = approvals.iter().map(|a| a.login.as_str()).collect();
            info!(canary = %canary.id, number = pr.number, approvers = %by.join(", "), "Approval pull request merged: the approval policy holds");
        }
        Outcome::Missing(missing) => {
            info!(canary = %canary.id, number = pr.number, %missing, "Approval pull request not merged yet");
        }
    }
    Ok(())
}
