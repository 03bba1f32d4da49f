//! Making one canary's recorded decision again on a commit's parent, for [`super::audit`]:
//! the rules (`core::decide`), a manual operation (`core::operate`), and the commits sluice
//! makes outside them, each checked against git before it is made again (the decisions of
//! the rules and operations by [`crate::remake`], the one replay of a commit):
//!
//! - a decision of the rules: the revision it records must be the source's at the parent;
//! - a record update: the status file's record of the spec must disagree with the spec at the
//!   parent, and the update is rendered again;
//! - a revert: the canary's spec must be gone at the parent, its status file ask for the
//!   revert, and the core must say revert;
//! - a drift hold or restore: the files it names must be exactly those that differ from the
//!   newest commits audit verified for the canary, and the output it restores from must be
//!   the newest verified one; a resume needs no file to differ;
//! - a refused approval: the status at the parent must come from a merged approval, and the
//!   status before that merge must be a waiting one;
//! - a wave's revert (`onFailure: rollback`): see [`super::wave_revert`].
//!
//! Pure but for reading the objects audit hands it; nothing here writes.

use crate::core::observe::{DriftFact, DriftPolicy, Facts, MergedApproval, Observations};
use crate::core::verdict::{self, DeletedVerdict};
use crate::deleted;
use crate::gitops::FileChange;
use crate::manifest::load_incremental::KeptLoad;
use crate::manifest::model::Canary;
use crate::remake::{remake, Base, Made, RemakeError};
use crate::render::message;
use crate::render::replay::{policy_name, By, Record, REPLAY};
use crate::render::{self as renderer, status_file};
use crate::workload;

use super::Parent;
use crate::gitops::objects as tree;

/// How far back a refused approval's waiting status is looked for (as the loop looks).
const MERGE_LOOKBACK: usize = 500;

use super::replayed::problem;
pub use super::replayed::{Context, Problem, Replayed, Sanctioned};

/// Makes the decision `record` describes for the canary `id` again on `parent`.
pub fn replay(
    ctx: &Context<'_>,
    parent: &Parent,
    canaries: &KeptLoad,
    id: &str,
    record: &Record,
) -> Result<Replayed, Problem> {
    if let By::Revert {} = record.by {
        return revert(parent, id, record);
    }
    let Some(canary) = canaries.canary(id) else {
        return Err(problem(
            message::CANARY,
            "no such canary in the specs at the parent",
        ));
    };
    let status_path = status_file::path_for(&canary.id);
    let status = parent.status(&canary.id).map_err(|m| {
        problem(
            &status_path,
            format!("the status at the parent does not read: {m}"),
        )
    })?;
    let (facts, restore) = match &record.by {
        By::Decide { .. } => {
            same_revision(parent, canaries, canary, record)?;
            (Facts::default(), Vec::new())
        }
        By::Operate { .. } | By::Unreachable { .. } | By::Queued { .. } => {
            (Facts::default(), Vec::new())
        }
        By::Record {} => return record_update(parent, canary, record),
        By::WaveRevert { .. } => {
            return super::wave_revert::replay(ctx, parent, canaries, canary, record)
        }
        By::RouteSource {} => return route_refresh(parent, canaries, canary, status, record),
        By::Drift { .. } | By::Resume {} => drift(ctx, parent, canary, record)?,
        By::Refused { reason, pr, .. } => {
            let waiting = waiting_before_merge(ctx, canary, status.as_ref())?;
            let facts = Facts {
                merged: Some(MergedApproval::Refused {
                    waiting: Box::new(waiting),
                    reason: reason.clone(),
                    pr: *pr,
                }),
                ..Facts::default()
            };
            (facts, Vec::new())
        }
        By::Revert {} | By::Other { .. } => {
            return Err(problem(REPLAY, "not a decision a replay rebuilds"))
        }
    };
    let outputs: Vec<&str> = canaries.canaries().map(|c| c.output.as_str()).collect();
    let index = parent.index(&outputs);
    let base = Base {
        root: parent.root(),
        index: &index,
    };
    let made = Made::Recorded {
        status: status.as_ref(),
        record,
        facts: &facts,
        restore: &restore,
    };
    let remade = remake(&base, canary, made).map_err(|e| match e {
        RemakeError::Record(m) => problem(REPLAY, m),
        RemakeError::NotApplicable(e) => problem(
            &status_path,
            format!("the operation does not apply at the parent: {e}"),
        ),
        RemakeError::NoChange => problem(&status_path, e.to_string()),
        RemakeError::Render(e) => {
            let file = match &record.by {
                By::Drift { .. } | By::Resume {} | By::Unreachable { .. } | By::Queued { .. } => {
                    status_path.clone()
                }
                _ => canary.output.as_str().to_string(),
            };
            problem(file, format!("the rules cannot render this decision: {e}"))
        }
    })?;
    Ok(Replayed {
        changes: remade.changes,
        message: remade.message,
        decision: Some(remade.decision),
    })
}

/// A decision of the rules: the revision it records must be the source's at the parent.
fn same_revision(
    parent: &Parent,
    canaries: &KeptLoad,
    canary: &Canary,
    record: &Record,
) -> Result<(), Problem> {
    let obs = record
        .by
        .observations()
        .map_err(|e| problem(REPLAY, e.to_string()))?
        .unwrap_or_else(|| Observations::revision(""));
    // Every canary's output folder, as the tick leaves them out of source lookups.
    let outputs: Vec<&str> = canaries.canaries().map(|c| c.output.as_str()).collect();
    let index = parent.index(&outputs);
    let source = workload::revision(parent.root(), canary, &index).map_err(|e| {
        problem(
            &canary.file,
            format!("the revision does not read at the parent: {e}"),
        )
    })?;
    if source != obs.revision {
        return Err(problem(
            REPLAY,
            format!(
                "recorded revision {:?}, but the source at the parent is {source:?}",
                obs.revision
            ),
        ));
    }
    Ok(())
}

/// A record update: the status file's record must disagree with the spec at the parent.
fn record_update(parent: &Parent, canary: &Canary, record: &Record) -> Result<Replayed, Problem> {
    let path = status_file::path_for(&canary.id);
    let found = parent.status_recorded(&canary.id).map_err(|m| {
        problem(
            &path,
            format!("the status at the parent does not read: {m}"),
        )
    })?;
    let Some((status, recorded)) = found else {
        return Err(problem(
            &path,
            "no status file at the parent to record the spec in",
        ));
    };
    let Some((change, mut message)) = deleted::record_update(canary, &status, recorded.as_ref())
    else {
        return Err(problem(
            &path,
            "the status file already records the spec's revertOnDeletion at the parent",
        ));
    };
    message.trailers.push(record.trailer());
    Ok(Replayed {
        changes: vec![change],
        message,
        decision: None,
    })
}

/// A route copied again from its edited source: the canary has a status at the parent, and
/// the route committed there is not the copy of the source at the parent.
fn route_refresh(
    parent: &Parent,
    canaries: &KeptLoad,
    canary: &Canary,
    status: Option<crate::core::status::Status>,
    record: &Record,
) -> Result<Replayed, Problem> {
    let path = status_file::path_for(&canary.id);
    let Some(status) = status else {
        return Err(problem(
            &path,
            "no status file at the parent: nothing to route yet",
        ));
    };
    let outputs: Vec<&str> = canaries.canaries().map(|c| c.output.as_str()).collect();
    let index = parent.index(&outputs);
    let refreshed = renderer::route_refresh::route_refresh(parent.root(), canary, &status, &index)
        .map_err(|e| {
            problem(
                canary.output.as_str(),
                format!("the route does not render: {e}"),
            )
        })?;
    let Some((change, mut message)) = refreshed else {
        return Err(problem(
            canary.output.join(crate::route::ROUTE_FILE_NAME),
            "the route at the parent already is the copy of its route source",
        ));
    };
    message.trailers.push(record.trailer());
    Ok(Replayed {
        changes: vec![change],
        message,
        decision: None,
    })
}

/// A deleted canary's revert: its spec is gone at the parent and the core says revert.
fn revert(parent: &Parent, id: &str, record: &Record) -> Result<Replayed, Problem> {
    let found = parent.deleted();
    let Some(d) = found.into_iter().find(|d| d.id.to_string() == id) else {
        return Err(problem(
            message::CANARY,
            "the canary is not deleted at the parent (its spec is there, or it has no status file)",
        ));
    };
    let fact = crate::core::observe::Deletion {
        reverts: d.reverts(),
        unloadable: deleted::can_tell(parent.snapshot()).map(str::to_string),
        spec_errors: parent.has_spec_errors(),
    };
    if let v @ (DeletedVerdict::Orphaned | DeletedVerdict::Held(_)) = verdict::deleted(&fact) {
        return Err(problem(
            &d.status_file,
            format!("the rules do not revert this deleted canary at the parent: {v:?}"),
        ));
    }
    let mut done = deleted::revert(parent.snapshot(), &d)
        .map_err(|e| problem(&d.status_file, format!("the revert does not render: {e}")))?;
    done.message.trailers.push(record.trailer());
    Ok(Replayed {
        changes: done.changes,
        message: done.message,
        decision: None,
    })
}

/// The drift a hold, restore or resume answers, checked against the history: the facts the
/// core decides on and the files a restore writes back.
fn drift(
    ctx: &Context<'_>,
    parent: &Parent,
    canary: &Canary,
    record: &Record,
) -> Result<(Facts, Vec<FileChange>), Problem> {
    let id = canary.id.to_string();
    let status_path = status_file::path_for(&canary.id);
    let Some(sanctioned) = ctx.sanctioned.get(&id).copied() else {
        return Err(problem(
            &status_path,
            "no earlier commit of this canary that audit verified holds sluice's version of its files",
        ));
    };
    let git = |e: tree::GitError| problem(&status_path, e.to_string());
    let differ = differing(ctx, canary, sanctioned).map_err(git)?;
    let By::Drift {
        files,
        changed_by,
        output_from,
        policy,
        beyond,
    } = &record.by
    else {
        if !differ.is_empty() {
            return Err(problem(
                &status_path,
                format!(
                    "a resume, but {} still differ from sluice's last commit of them",
                    differ.join(", ")
                ),
            ));
        }
        return Ok((Facts::default(), Vec::new()));
    };
    if *output_from != sanctioned.output.to_string() {
        return Err(problem(
            REPLAY,
            format!(
                "restores from {output_from}, but the newest commit of the output that audit verified is {}",
                sanctioned.output
            ),
        ));
    }
    if *files != differ {
        return Err(problem(
            REPLAY,
            format!(
                "names {files:?} as changed outside sluice, but the files that differ from sluice's last commit are {differ:?}"
            ),
        ));
    }
    let setting = parent.settings.drift;
    if policy != policy_name(setting) {
        return Err(problem(
            REPLAY,
            format!(
                "records drift: {policy}, but the settings at the parent say {}",
                policy_name(setting)
            ),
        ));
    }
    let at_sanctioned = tree::commit_tree(ctx.repo, ctx.folders, sanctioned.commit).map_err(git)?;
    let sluice_status = match tree::file_at(ctx.repo, &at_sanctioned, &status_path).map_err(git)? {
        Some(bytes) => status_file::parse(&String::from_utf8_lossy(&bytes)).map_err(|m| {
            problem(
                &status_path,
                format!("sluice's last status does not read: {m}"),
            )
        })?,
        None => parent
            .status(&canary.id)
            .ok()
            .flatten()
            .ok_or_else(|| problem(&status_path, "no status sluice committed"))?,
    };
    let mut restore = Vec::new();
    if setting == DriftPolicy::Restore {
        let from = tree::commit_tree(ctx.repo, ctx.folders, sanctioned.output).map_err(git)?;
        for file in files.iter().filter(|f| **f != status_path) {
            restore.push(match tree::file_at(ctx.repo, &from, file).map_err(git)? {
                Some(bytes) => FileChange::write(file.clone(), String::from_utf8_lossy(&bytes)),
                None => FileChange::delete(file.clone()),
            });
        }
    }
    let fact = DriftFact {
        files: files.clone(),
        by: changed_by.clone(),
        output_from: output_from.clone(),
        sluice_status,
        policy: setting,
        // Past the tick's look-back the hold restores nothing: a safe decision, so the
        // record's word on it is taken (the files it names are checked above all the same).
        beyond: *beyond,
    };
    Ok((
        Facts {
            drift: Some(fact),
            ..Facts::default()
        },
        restore,
    ))
}

/// The canary's owned files that differ at the parent from sluice's newest verified commits:
/// the output files (sorted), then the status file.
fn differing(
    ctx: &Context<'_>,
    canary: &Canary,
    sanctioned: Sanctioned,
) -> tree::Result<Vec<String>> {
    let Some(parent) = ctx.parent else {
        return Ok(Vec::new());
    };
    let now = tree::commit_tree(ctx.repo, ctx.folders, parent)?;
    let output = tree::commit_tree(ctx.repo, ctx.folders, sanctioned.output)?;
    let mut files = tree::changed_under(ctx.repo, &output, &now, canary.output.as_str())?;
    let status_path = status_file::path_for(&canary.id);
    let status = tree::commit_tree(ctx.repo, ctx.folders, sanctioned.commit)?;
    if tree::entry_id(&status, &status_path) != tree::entry_id(&now, &status_path) {
        files.push(status_path);
    }
    Ok(files)
}

/// The status before the approval merged at the parent: the first status, walking back from
/// the parent, that differs from the parent's; it must be a waiting one.
fn waiting_before_merge(
    ctx: &Context<'_>,
    canary: &Canary,
    status: Option<&crate::core::status::Status>,
) -> Result<crate::core::status::Status, Problem> {
    let path = status_file::path_for(&canary.id);
    if !status.is_some_and(|s| s.clock_from_merge) {
        return Err(problem(
            &path,
            "a refused approval, but the status at the parent did not come from a merged approval",
        ));
    }
    let git = |e: tree::GitError| problem(&path, e.to_string());
    let mut at = ctx.parent;
    let now = match at {
        Some(p) => tree::file_at(
            ctx.repo,
            &tree::commit_tree(ctx.repo, ctx.folders, p).map_err(git)?,
            &path,
        )
        .map_err(git)?,
        None => None,
    };
    for _ in 0..MERGE_LOOKBACK {
        let Some(commit) = at else { break };
        at = tree::first_parent(ctx.repo, ctx.folders, commit).map_err(git)?;
        let Some(before) = at else { break };
        let text = tree::file_at(
            ctx.repo,
            &tree::commit_tree(ctx.repo, ctx.folders, before).map_err(git)?,
            &path,
        )
        .map_err(git)?;
        if text != now {
            let waiting = text
                .and_then(|t| status_file::parse(&String::from_utf8_lossy(&t)).ok())
                .filter(crate::approval::is_waiting);
            return waiting.ok_or_else(|| {
                problem(
                    &path,
                    "a refused approval, but the status before the merge was not waiting",
                )
            });
        }
    }
    Err(problem(
        &path,
        "a refused approval, but no status before the merge is found",
    ))
}
