//! Every canary's status file at the tick's head, parsed once per content: a status file whose
//! blob an earlier tick parsed is taken from that parse, so a tick reads and parses only the
//! status files that changed (a status and its spec record depend on the file's text alone).
//!
//! Only a regular file found in the head's tree is taken by its blob id; anything else (no
//! such file, a link, a path through a link, a tree that cannot be read) is read as before,
//! with the same checks and errors. The runtime holds the statuses the last tick parsed (only
//! those of its canaries, so they never outgrow the repo).

use std::collections::HashMap;

use git2::Oid;

use crate::core::status::Status;
use crate::gitops::{ConfigRepo, PathEntry};
use crate::manifest::model::Canary;
use crate::outcome::CanaryError;
use crate::render::status_file::{self, SpecRecord};
use crate::runtime::Runtime;

/// A status file's status and spec record.
pub type Recorded = (Status, Option<SpecRecord>);

/// Each canary's status and record at the head (`None`: no status file yet), in order.
pub fn read_all(
    repo: &ConfigRepo,
    runtime: &Runtime,
    canaries: &[Canary],
) -> Vec<Result<Option<Recorded>, CanaryError>> {
    let paths: Vec<String> = canaries
        .iter()
        .map(|c| status_file::path_for(&c.id))
        .collect();
    let files = runtime.head_files(repo, false);
    let ids: Vec<Option<Oid>> = paths
        .iter()
        .map(|path| match files.entry(path) {
            PathEntry::File(id) => Some(id),
            _ => None,
        })
        .collect();
    // The runtime's, not the process's: tests run many repos side by side in one process.
    let known = std::mem::take(&mut *runtime.parsed_statuses());
    let mut kept: HashMap<Oid, Recorded> = HashMap::new();
    let mut out = Vec::with_capacity(canaries.len());
    for (path, id) in paths.into_iter().zip(ids) {
        let cached = id.and_then(|id| kept.get(&id).or_else(|| known.get(&id)).cloned());
        let found = match cached {
            Some(found) => Ok(Some(found)),
            None => read_recorded(repo, runtime, &path)
                .map_err(|message| CanaryError::Status { path, message }),
        };
        if let (Some(id), Ok(Some(found))) = (id, &found) {
            kept.entry(id).or_insert_with(|| found.clone());
        }
        out.push(found);
    }
    *runtime.parsed_statuses() = kept;
    out
}

/// A status file read from the head's tree through the runtime's reader; `None` when nothing
/// is at `path` (a link or a folder there is read, and refused).
fn read_recorded(
    repo: &ConfigRepo,
    runtime: &Runtime,
    path: &str,
) -> Result<Option<Recorded>, String> {
    let files = runtime.head_files(repo, false);
    let head = files.at(repo.git(), repo.root());
    if !head.exists(path) {
        return Ok(None);
    }
    let read = runtime.read_file(&repo.root().join(path), &|p| head.read_path(p));
    status_file::from_read(read).map(Some)
}
