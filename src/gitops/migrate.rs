//! Turning a clone made by an older sluice (a work tree with checked-out files and an index)
//! into today's layout: the same `.git` folder, marked bare (`core.bare = true`), and nothing
//! else in the work dir. sluice reads the repo from tree objects and writes trees directly, so
//! a checkout only cost time, an index and its lock.
//!
//! Nothing committed is lost: the objects and refs stay where they are, and the checked-out
//! files are deleted last, after the caller made any unpushed local commit safe (pushed, or
//! kept under [`UNPUSHED_PREFIX`]). Uncommitted files are sluice's own leftovers of an
//! interrupted attempt, which the next tick redoes. Knows nothing of remotes.

use std::path::Path;

use git2::{Oid, Repository};

use super::error::{Error, Result};

/// Where a local commit that could not be pushed during a migration is kept.
pub(super) const UNPUSHED_PREFIX: &str = "refs/sluice/unpushed/";

/// Whether the clone in `root` still has the old layout: a work tree in its configuration,
/// an index, or files beside `.git` (a migration interrupted before it deleted them).
pub(super) fn is_old_layout(repo: &Repository, root: &Path) -> bool {
    !repo.is_bare() || repo.path().join("index").exists() || has_checkout(root)
}

/// Whether the work dir `root` holds anything beside `.git`.
pub(super) fn has_checkout(root: &Path) -> bool {
    std::fs::read_dir(root)
        .map(|entries| entries.flatten().any(|e| e.file_name() != ".git"))
        .unwrap_or(false)
}

/// Keeps the local branch's commit under `refs/sluice/unpushed/<branch>` before anything
/// moves the branch (the fetch that follows points it at the remote head), so a migration
/// interrupted at any point loses no commit; a ref kept by an earlier, interrupted migration
/// is taken as it is. Returns the commit kept, if any.
pub(super) fn keep_branch(repo: &Repository, root: &Path, branch: &str) -> Result<Option<Oid>> {
    let err = |op: &'static str| move |e: git2::Error| Error::git(root, op, &e);
    let kept = format!("{UNPUSHED_PREFIX}{branch}");
    if let Ok(oid) = repo.refname_to_id(&kept) {
        return Ok(Some(oid));
    }
    let Ok(local) = repo.refname_to_id(&format!("refs/heads/{branch}")) else {
        return Ok(None);
    };
    repo.reference(
        &kept,
        local,
        false,
        "sluice: the old work tree's branch, kept",
    )
    .map_err(err("keep the local branch"))?;
    Ok(Some(local))
}

/// Marks the clone bare and removes its index, then opens it again: from here on libgit2 has
/// no work tree to check out into. The checked-out files are left for [`remove_checkout`].
pub(super) fn make_bare(repo: Repository, root: &Path) -> Result<Repository> {
    let err = |op: &'static str| move |e: git2::Error| Error::git(root, op, &e);
    let mut config = repo.config().map_err(err("read the clone's config"))?;
    config
        .set_bool("core.bare", true)
        .map_err(err("mark the clone bare"))?;
    // A work tree set by hand would be used again by git.
    let _ = config.remove("core.worktree");
    let index = repo.path().join("index");
    drop(config);
    drop(repo);
    match std::fs::remove_file(&index) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(Error::Io {
                path: index,
                op: "remove the index of the old work tree",
                source,
            })
        }
    }
    Repository::open(root).map_err(err("open the clone after marking it bare"))
}

/// Deletes everything in `root` but `.git`: the checkout of the old layout. Links are removed,
/// never followed. Returns how many entries it removed.
pub(super) fn remove_checkout(root: &Path) -> Result<usize> {
    let io = |path: &Path, source| Error::Io {
        path: path.to_path_buf(),
        op: "remove a checked-out file of the old work tree",
        source,
    };
    let mut removed = 0;
    for entry in std::fs::read_dir(root).map_err(|e| io(root, e))?.flatten() {
        if entry.file_name() == ".git" {
            continue;
        }
        let path = entry.path();
        let is_dir = std::fs::symlink_metadata(&path)
            .map(|m| m.is_dir())
            .map_err(|e| io(&path, e))?;
        let done = if is_dir {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        done.map_err(|e| io(&path, e))?;
        removed += 1;
    }
    Ok(removed)
}
