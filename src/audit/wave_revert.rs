//! A wave's revert under `onFailure: rollback` (`crate::waves::revert`), made again on the
//! commit's parent for [`super::replay`]: the release rule, run on the statuses of every wave
//! of the release at the parent and the source's revision there, must revert this wave of
//! the recorded revision; the walk back from the parent must find the recorded commit before
//! the release; then the same files and message are made again, to be compared with the
//! commit's.
//!
//! Reads the objects audit hands it; nothing here writes.

use crate::core::waves::Release;
use crate::manifest::load_incremental::KeptLoad;
use crate::manifest::model::Canary;
use crate::render::message;
use crate::render::replay::{By, Record, REPLAY};
use crate::render::status_file;
use crate::workload;

use super::replayed::{Context, Problem, Replayed};
use super::Parent;

/// The revert `record` describes for the wave instance `canary`, made again on `parent`.
pub fn replay(
    ctx: &Context<'_>,
    parent: &Parent,
    canaries: &KeptLoad,
    canary: &Canary,
    record: &Record,
) -> Result<Replayed, Problem> {
    let By::WaveRevert { revision, from } = &record.by else {
        return Err(problem(REPLAY, "not a wave's revert"));
    };
    let status_path = status_file::path_for(&canary.id);
    let reason = rule(parent, canaries, canary, revision)?;
    let Some(head) = ctx.parent else {
        return Err(problem(&status_path, "a revert without a parent commit"));
    };
    let reverted =
        crate::waves::revert::revert(ctx.repo, head, canary, revision, &reason, record.now)
            .map_err(|e| problem(&status_path, e.to_string()))?;
    if reverted.from.to_string() != *from {
        return Err(problem(
            REPLAY,
            format!(
                "reverts to {from}, but the commit before the wave took {revision} is {}",
                reverted.from
            ),
        ));
    }
    Ok(Replayed {
        changes: reverted.changes,
        message: reverted.message,
        decision: None,
    })
}

/// Why the release rule reverts `canary` at the parent, or the problem when it does not.
fn rule(
    parent: &Parent,
    canaries: &KeptLoad,
    canary: &Canary,
    revision: &str,
) -> Result<String, Problem> {
    let Some(wave) = &canary.wave else {
        return Err(problem(
            message::CANARY,
            "not a wave of a release at the parent",
        ));
    };
    let release: Vec<&Canary> = canaries
        .canaries()
        .filter(|c| {
            c.id.namespace == canary.id.namespace
                && c.base_name() == canary.base_name()
                && c.wave.is_some()
        })
        .collect();
    let outputs: Vec<&str> = canaries.canaries().map(|c| c.output.as_str()).collect();
    let index = parent.index(&outputs);
    let mut read = Vec::new();
    for c in &release {
        let status = parent.status(&c.id).map_err(|m| {
            problem(
                status_file::path_for(&c.id),
                format!("the status at the parent does not read: {m}"),
            )
        })?;
        let source = workload::revision(parent.root(), c, &index).map_err(|e| {
            problem(
                &c.file,
                format!("the revision does not read at the parent: {e}"),
            )
        })?;
        read.push((*c, status, source));
    }
    let items: Vec<_> = read
        .iter()
        .map(|(c, s, r)| (*c, s.as_ref(), r.as_str()))
        .collect();
    let releases = crate::core::waves::releases(&items);
    let said = read
        .iter()
        .zip(releases)
        .find(|((c, _, _), _)| c.id == canary.id)
        .map(|(_, r)| r);
    match said {
        Some(Release::Revert {
            revision: said,
            reason,
        }) if said == revision => Ok(reason),
        other => Err(problem(
            status_file::path_for(&canary.id),
            format!(
                "the release rule does not revert wave {} of revision {revision} at the parent (it says {other:?})",
                wave.name
            ),
        )),
    }
}

fn problem(file: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem {
        file: file.into(),
        message: message.into(),
    }
}
