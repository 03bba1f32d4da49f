//! A wave reverted under `onFailure: rollback` (the release rule's
//! [`Release::Revert`](crate::core::waves::Release::Revert)): its output folder put back,
//! byte for byte, as it was at the commit before the release reached it, and its status the
//! core's [`reverted`] of the status it had there, in one commit of its own (`Sluice-Wave`
//! trailer, a message naming the wave that failed and why, and a replay record that
//! `sluice audit` checks by making the same commit again).
//!
//! "Before the release reached it" is read from git alone: walking the first-parent history
//! back from the head, the wave's status file took the revision in an unbroken run of
//! commits; the first parent of the oldest commit of that run, `from`, holds the folder and
//! the status the wave had just before. That is exact (the very files Flux or Argo CD applied
//! before the release) and replayable (audit walks back from the revert's parent and must
//! find the same `from`). Rendering the previous promoted revision again would not be: the
//! sources, templates and settings may have changed since, and a route-only canary's
//! previous stable service is only in that commit's status.
//!
//! Reads git objects ([`observe`]) and renders the core's decision ([`render`]); decides
//! nothing, and commits nothing (the executor does).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use git2::{ObjectType, Oid, Repository, TreeWalkMode, TreeWalkResult};
use jiff::Timestamp;

use crate::core::model::short_revision;
use crate::core::status::Status;
use crate::core::waves::{reverted, took, BeforeRelease, WaveRevert};
use crate::gitops::objects::{self as tree, GitError};
use crate::gitops::Folders;
use crate::gitops::{CommitMessage, FileChange};
use crate::manifest::model::Canary;
use crate::render::message::{CANARY, PHASE, REVISION, WAVE, WEIGHTS};
use crate::render::replay::{By, Record};
use crate::render::status_file::{self, SpecRecord};

/// How many first-parent commits the walk back reads at most: a release older than that is
/// not reverted (the wave's revert is reported instead).
pub const LOOKBACK: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum RevertError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{path}: wave {wave} had no status before it took revision {revision} (it started with it), so there is nothing to revert it to")]
    NoEarlierStatus {
        path: String,
        wave: String,
        revision: String,
    },
    #[error("{path}: no commit within the last {LOOKBACK} before wave {wave} took revision {revision}; revert it with a commit of the source")]
    TooOld {
        path: String,
        wave: String,
        revision: String,
    },
    #[error("{path} at {commit}: cannot read the status sluice committed: {message}")]
    Status {
        path: String,
        commit: String,
        message: String,
    },
    #[error("{path} at {commit}: not UTF-8 text, so it cannot be written back as it was")]
    Binary { path: String, commit: String },
    #[error("{path}: cannot write the status file: {message}")]
    Render { path: String, message: String },
    #[error("{0} is not a wave of a release")]
    NotAWave(String),
}

/// A wave's revert commit, made again for `sluice audit` (the tick's goes through the plan).
#[derive(Debug, Clone)]
pub struct Reverted {
    /// The commit whose folder and status the wave goes back to.
    pub from: Oid,
    pub status: Status,
    /// The folder's files that differ from `from`'s, and the status file.
    pub changes: Vec<FileChange>,
    /// With its replay record.
    pub message: CommitMessage,
}

/// What the tick observes of a wave the release rule reverts: what it had before the release
/// reached it, and its output folder's files at `head` that differ from that commit's (put
/// back as they were there: written, or deleted).
#[derive(Debug, Clone)]
pub struct Observed {
    pub before: BeforeRelease,
    pub folder: Vec<FileChange>,
}

/// What the wave instance `canary` had at `head` before the release of `revision` reached it.
pub fn observe(
    git: &Repository,
    head: Oid,
    canary: &Canary,
    revision: &str,
) -> Result<Observed, RevertError> {
    let wave = canary
        .wave
        .as_ref()
        .ok_or_else(|| RevertError::NotAWave(canary.id.to_string()))?;
    let status_path = status_file::path_for(&canary.id);
    // The commits walked and the folders read, by id, for this revert's reads.
    let kept = Folders::default();
    let (from, before) =
        before_release(git, &kept, head, &status_path, wave.name.as_str(), revision)?;
    let output = canary.output.as_str();
    let was = files_under(git, &kept, from, output)?;
    let is = files_under(git, &kept, head, output)?;
    let mut folder = Vec::new();
    for (path, bytes) in &was {
        if is.get(path) != Some(bytes) {
            let text = String::from_utf8(bytes.clone()).map_err(|_| RevertError::Binary {
                path: path.clone(),
                commit: from.to_string(),
            })?;
            folder.push(FileChange::write(path.clone(), text));
        }
    }
    for path in is.keys().filter(|p| !was.contains_key(*p)) {
        folder.push(FileChange::delete(path.clone()));
    }
    folder.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Observed {
        before: BeforeRelease {
            from: from.to_string(),
            status: before,
        },
        folder,
    })
}

/// The files and message of the core's revert of `canary`, decided at `now`: `folder` (the
/// observed folder changes) and the status file, with the replay record.
pub fn render(
    canary: &Canary,
    revert: &WaveRevert,
    folder: Vec<FileChange>,
    now: Timestamp,
) -> Result<(Vec<FileChange>, CommitMessage), RevertError> {
    let status_path = status_file::path_for(&canary.id);
    let mut changes = folder;
    let text = status_file::render_recorded(&canary.id, &revert.status, &SpecRecord::of(canary))
        .map_err(|e| RevertError::Render {
            path: status_path.clone(),
            message: e.to_string(),
        })?;
    changes.push(FileChange::write(status_path, text));
    let record = Record::of(
        By::WaveRevert {
            revision: revert.revision.clone(),
            from: revert.from.clone(),
        },
        now,
    );
    let mut message = message(canary, &revert.before, &revert.status, &revert.from);
    message.trailers.push(record.trailer());
    Ok((changes, message))
}

/// The revert of the wave instance `canary` at `head`: the release of `revision` failed in a
/// later wave (`reason` says which and why), decided at `now`. The tick's steps in one call:
/// [`observe`], the core's [`revert`](crate::core::waves::revert), [`render`].
pub fn revert(
    git: &Repository,
    head: Oid,
    canary: &Canary,
    revision: &str,
    reason: &str,
    now: Timestamp,
) -> Result<Reverted, RevertError> {
    let observed = observe(git, head, canary, revision)?;
    let from = Oid::from_str(&observed.before.from).map_err(tree::git("read a commit id"))?;
    let decided = crate::core::waves::revert(observed.before, revision, reason, now);
    let (changes, message) = render(canary, &decided, observed.folder, now)?;
    Ok(Reverted {
        from,
        status: decided.status,
        changes,
        message,
    })
}

/// The commit before the wave's status took `revision` (walking back from `head` through the
/// unbroken run of commits whose status took it), and the status it had there.
fn before_release(
    git: &Repository,
    kept: &Folders,
    head: Oid,
    status_path: &str,
    wave: &str,
    revision: &str,
) -> Result<(Oid, Status), RevertError> {
    // The status file changes in few commits: each version is read once.
    let mut read: HashMap<Oid, Status> = HashMap::new();
    let mut at = head;
    for _ in 0..LOOKBACK {
        let root = tree::commit_tree(git, kept, at)?;
        let Some(blob) = tree::entry_id(&root, status_path) else {
            return Err(RevertError::NoEarlierStatus {
                path: status_path.to_string(),
                wave: wave.to_string(),
                revision: revision.to_string(),
            });
        };
        let status = match read.entry(blob) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(new) => {
                let bytes = tree::file_at(git, &root, status_path)?.unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                new.insert(status_file::parse(&text).map_err(|m| RevertError::Status {
                    path: status_path.to_string(),
                    commit: at.to_string(),
                    message: m,
                })?)
            }
        };
        if !took(status, revision) {
            return Ok((at, status.clone()));
        }
        let Some(parent) = tree::first_parent(git, kept, at)? else {
            break;
        };
        at = parent;
    }
    Err(RevertError::TooOld {
        path: status_path.to_string(),
        wave: wave.to_string(),
        revision: revision.to_string(),
    })
}

/// Every regular file at or under `folder` at `commit`, by repo-relative path.
fn files_under(
    git: &Repository,
    kept: &Folders,
    commit: Oid,
    folder: &str,
) -> Result<BTreeMap<String, Vec<u8>>, RevertError> {
    let mut found = BTreeMap::new();
    let root = tree::commit_tree(git, kept, commit)?;
    let Ok(entry) = root.get_path(Path::new(folder)) else {
        return Ok(found);
    };
    let Ok(sub) = git.find_tree(entry.id()) else {
        return Ok(found);
    };
    let mut blobs = Vec::new();
    let walked = sub.walk(TreeWalkMode::PreOrder, |at, e| {
        let regular = matches!(e.filemode(), 0o100644 | 0o100755 | 0o100664);
        if e.kind() == Some(ObjectType::Blob) && regular {
            let name = String::from_utf8_lossy(e.name_bytes());
            blobs.push((format!("{folder}/{at}{name}"), e.id()));
        }
        TreeWalkResult::Ok
    });
    walked.map_err(|e| GitError {
        op: "walk a tree",
        detail: e.message().to_string(),
    })?;
    for (path, id) in blobs {
        let blob = git.find_blob(id).map_err(|e| GitError {
            op: "read a file",
            detail: e.message().to_string(),
        })?;
        found.insert(path, blob.content().to_vec());
    }
    Ok(found)
}

/// The revert's message: what the wave goes back to, and why (the status' message names the
/// wave that failed); trailers as a decision's, so `sluice history --wave` lists it.
fn message(canary: &Canary, before: &Status, status: &Status, from: &str) -> CommitMessage {
    let wave = canary
        .wave
        .as_ref()
        .map(|w| w.name.to_string())
        .unwrap_or_default();
    let revision = status.canary_revision.as_deref().unwrap_or_default();
    let subject = format!(
        "{}: revert wave {wave} to revision {}, the release of {} failed",
        canary.id.name,
        short_revision(&before.promoted_revision),
        short_revision(revision)
    );
    let body = format!(
        "{}\n{} is back as it was at {from}, before the release reached wave {wave}.\n",
        status.message, canary.output
    );
    CommitMessage {
        subject,
        body,
        trailers: vec![
            (CANARY.to_string(), canary.id.to_string()),
            (WAVE.to_string(), wave),
            (PHASE.to_string(), status.phase.to_string()),
            (
                WEIGHTS.to_string(),
                format!(
                    "primary={} canary={}",
                    status.primary_weight, status.canary_weight
                ),
            ),
            (REVISION.to_string(), short_revision(revision).to_string()),
        ],
    }
}

/// Whether `commit`, which records a wave's revert of `revision` to `from` (its
/// `waveRevert` replay record), is sluice's by content, for the drift check (a revert puts
/// back a folder no render of its status draws from its parent, as the primary of the
/// failed release was there): `from` is an earlier commit of the branch, the wave's folder
/// at `commit` is byte for byte the folder at `from`, and the status file is sluice's text
/// of a status reverted from the one at `from`.
pub fn is_sluices(
    repo: &crate::gitops::ConfigRepo,
    canary: &Canary,
    commit: Oid,
    revision: &str,
    from: &str,
) -> Result<bool, crate::gitops::Error> {
    let Ok(from) = Oid::from_str(from) else {
        return Ok(false);
    };
    if from == commit || !repo.is_descendant_or_self(&commit.to_string(), &from.to_string()) {
        return Ok(false);
    }
    let output = canary.output.as_str();
    if repo.entry_id_at(commit, output)? != repo.entry_id_at(from, output)? {
        return Ok(false);
    }
    let path = status_file::path_for(&canary.id);
    let (Some(text), Some(before)) = (
        repo.read_file_at(commit, &path)?,
        repo.read_file_at(from, &path)?,
    ) else {
        return Ok(false);
    };
    let (Ok(status), Ok(before), Ok(Some(record))) = (
        status_file::parse(&text),
        status_file::parse(&before),
        status_file::record_of(&text),
    ) else {
        return Ok(false);
    };
    let ours = status_file::render_recorded(&canary.id, &status, &record).ok();
    let reason = status
        .message
        .split_once(" reached it: ")
        .map_or("", |(_, reason)| reason);
    let again = reverted(&before, revision, reason, status.phase_since);
    Ok(ours.as_deref() == Some(text.as_str()) && again == status && !took(&before, revision))
}
