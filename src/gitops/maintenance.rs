//! Keeping the clone small and fast, as `git gc --auto` would: libgit2 stores every fetch and
//! every tick's objects as a pack of their own and never repacks, and each lookup of an object
//! searches the packs one by one. Past [`MAX_PACKS`] packs, everything the refs reach is
//! written into one pack and the other packs and loose objects are removed, and the reflogs
//! are expired (`git reflog expire --expire=now --all`): their entries name commits the
//! repack just deleted (a sluice commit that lost a push race), which `git fsck` reports as
//! broken. sluice never reads a reflog.
//!
//! Loose objects (a tick past its in-memory budget writes its remaining commits loose, each
//! object a whole compressed file: about 73 MiB per tick at 1,000 canaries in one namespace) are
//! packed at the next fetch, as `git repack -d` would: one new pack of just those objects, with
//! deltas between the versions of each folder, then the loose files are removed. Unreachable
//! objects among them (a commit that lost a push race) are dropped by the next full repack.

use std::path::{Path, PathBuf};

use git2::Repository;

use super::error::{Error, Result};

/// Packs in the clone above which it is repacked (git's `gc.autoPackLimit`).
pub(super) const MAX_PACKS: usize = 50;

/// Packs the clone's loose objects when `loose` says there may be some, then repacks the clone
/// at `root` (opened as `repo`) when it holds more than [`MAX_PACKS`] packs, reopening `repo`.
/// Only call it between ticks, when every object sluice needs is reachable from a ref. A
/// failure is logged and leaves the clone as it was: the worst case is a slower next tick.
/// Returns whether loose objects may remain (packing them failed).
pub(super) fn repack_if_needed(repo: &mut Repository, root: &Path, loose: bool) -> bool {
    let mut remain = false;
    if loose {
        match pack_loose(repo, root) {
            Ok(0) => {}
            Ok(n) => tracing::info!(objects = n, "packed the clone's loose objects"),
            Err(e) => {
                tracing::warn!(error = %e, "cannot pack the clone's loose objects; they stay loose");
                remain = true;
            }
        }
    }
    let dir = repo.path().join("objects/pack");
    let packs = packs_in(&dir);
    if packs.len() <= MAX_PACKS {
        return remain;
    }
    match repack(repo, root, &dir, &packs) {
        Ok(()) => {
            tracing::info!(packs = packs.len(), "repacked the clone into one pack");
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot repack the clone; it keeps working, more slowly");
            remain
        }
    }
}

/// Writes every loose object of the clone into one new pack, then removes the loose files and
/// reopens `repo`. Returns how many objects it packed.
fn pack_loose(repo: &mut Repository, root: &Path) -> Result<usize> {
    let err = |op: &'static str| move |e: git2::Error| Error::git(root, op, &e);
    let objects = repo.path().join("objects");
    let mut loose = Vec::new();
    for fanout in std::fs::read_dir(&objects).into_iter().flatten().flatten() {
        let prefix = fanout.file_name().to_string_lossy().into_owned();
        if !is_fanout(&prefix) {
            continue;
        }
        for entry in std::fs::read_dir(fanout.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let rest = entry.file_name().to_string_lossy().into_owned();
            // Temporary files of an interrupted write are not objects.
            if let Ok(oid) = git2::Oid::from_str(&format!("{prefix}{rest}")) {
                if rest.len() == 38 {
                    loose.push((oid, entry.path()));
                }
            }
        }
    }
    if loose.is_empty() {
        return Ok(0);
    }
    let mut builder = repo.packbuilder().map_err(err("pack loose objects"))?;
    for (oid, _) in &loose {
        builder
            .insert_object(*oid, None)
            .map_err(err("pack loose objects"))?;
    }
    builder
        .write(&objects.join("pack"), 0o444)
        .map_err(err("pack loose objects"))?;
    drop(builder);
    // Every one of them is in the new pack now.
    for (_, path) in &loose {
        let _ = std::fs::remove_file(path);
    }
    *repo = Repository::open(root).map_err(err("reopen the clone"))?;
    Ok(loose.len())
}

/// A folder of loose objects: two hex digits.
fn is_fanout(name: &str) -> bool {
    name.len() == 2 && name.chars().all(|c| c.is_ascii_hexdigit())
}

fn repack(repo: &mut Repository, root: &Path, dir: &Path, old: &[PathBuf]) -> Result<()> {
    let err = |op: &'static str| move |e: git2::Error| Error::git(root, op, &e);
    let mut walk = repo.revwalk().map_err(err("repack"))?;
    // Every ref (branches, remote-tracking branches, approval branches) and HEAD. A ref
    // that names no commit has nothing to keep.
    let refs = repo.references().map_err(err("repack"))?;
    for reference in refs.flatten() {
        if let Ok(commit) = reference.peel_to_commit() {
            walk.push(commit.id()).map_err(err("repack"))?;
        }
    }
    if let Ok(head) = repo.head().and_then(|h| h.peel_to_commit()) {
        walk.push(head.id()).map_err(err("repack"))?;
    }
    let mut builder = repo.packbuilder().map_err(err("repack"))?;
    builder.insert_walk(&mut walk).map_err(err("repack"))?;
    builder.write(dir, 0o444).map_err(err("repack"))?;
    let name = match builder.name() {
        Ok(Some(name)) => format!("pack-{name}"),
        _ => {
            return Err(Error::Git {
                path: root.to_path_buf(),
                op: "repack",
                detail: "the new pack has no name".to_string(),
            })
        }
    };
    drop(builder);
    drop(walk);
    // Everything reachable is in the new pack now; the rest is garbage.
    for pack in old {
        if pack
            .file_stem()
            .is_some_and(|s| s.to_string_lossy() == name)
        {
            continue;
        }
        for ext in ["pack", "idx", "rev"] {
            let _ = std::fs::remove_file(pack.with_extension(ext));
        }
    }
    let objects = repo.path().join("objects");
    if let Ok(entries) = std::fs::read_dir(&objects) {
        for entry in entries.flatten() {
            if is_fanout(&entry.file_name().to_string_lossy()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    // Forget the removed packs' open handles and maps.
    *repo = Repository::open(root).map_err(err("reopen the clone"))?;
    expire_reflogs(repo).map_err(err("expire the reflogs"))
}

/// Deletes the reflog of HEAD and of every ref; later updates start new ones.
fn expire_reflogs(repo: &Repository) -> std::result::Result<(), git2::Error> {
    let mut names = vec!["HEAD".to_string()];
    for reference in repo.references()?.flatten() {
        if let Ok(name) = reference.name() {
            names.push(name.to_string());
        }
    }
    for name in names {
        repo.reflog_delete(&name)?;
    }
    Ok(())
}

/// The `.pack` files in `dir`.
fn packs_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "pack"))
                .collect()
        })
        .unwrap_or_default()
}
