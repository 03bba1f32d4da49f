//! Keeping the clone small and fast, as `git gc --auto` would: libgit2 stores every fetch and
//! every tick's objects as a pack of their own and never repacks, and each lookup of an object
//! searches the packs one by one. Past [`MAX_PACKS`] packs, the smallest packs are merged into
//! one, as `git repack --geometric=2 -d` does ([`geometric_split`]): the packs left form a
//! geometric progression, so there are about log2(objects) of them, and the biggest pack (the
//! clone's history) is never rewritten. A merge costs a delta search over the merged objects
//! only, not over the whole history (a full repack of 1,000 canaries × 20,000 commits stalled a
//! tick for 6 s). Commits no ref reaches (a sluice commit that lost a push race) are left out of
//! the merged pack, and the reflogs are expired (`git reflog expire --expire=now --all`): their
//! entries name those commits, which `git fsck` would report as broken. sluice never reads a
//! reflog.
//!
//! Loose objects (a tick past its in-memory budget writes its remaining commits loose, each
//! object a whole compressed file: about 73 MiB per tick at 1,000 canaries in one namespace) are
//! packed at the next fetch, as `git repack -d` would: one new pack of just those objects, with
//! deltas between the versions of each folder, then the loose files are removed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository};

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
    match merge_small_packs(repo, root, &dir, &packs) {
        Ok((merged, objects)) => {
            tracing::info!(
                packs = merged,
                objects,
                "merged the clone's smallest packs into one"
            );
            remain
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

/// Merge factor of the packs' geometric progression, as `git repack --geometric=2`.
const FACTOR: u64 = 2;

/// Which packs to merge: the packs sorted by object count, smallest first, are merged up to
/// where the rest form a geometric progression (each at least [`FACTOR`] times the one
/// before), then every next pack smaller than [`FACTOR`] times what is merged so far is rolled
/// in, as git's `split_pack_geometry` does; but never the biggest pack. Returns how many of the
/// smallest to merge.
pub(super) fn geometric_split(counts: &[u64]) -> usize {
    let n = counts.len();
    let mut i = n.saturating_sub(1);
    while i > 0 {
        if counts[i] < FACTOR.saturating_mul(counts[i - 1]) {
            break;
        }
        i -= 1;
    }
    let mut split = if i > 0 { i + 1 } else { 0 };
    let mut total: u64 = counts[..split].iter().sum();
    while split < n && counts[split] < FACTOR.saturating_mul(total) {
        total += counts[split];
        split += 1;
    }
    // The biggest pack (the clone's history) is never rewritten: rewriting it costs a delta
    // search over every object, a stalled tick.
    split.min(n.saturating_sub(1))
}

/// Merges the smallest packs into one (see [`geometric_split`]), leaving out commits no ref
/// reaches (a sluice commit that lost a push race), removes the merged packs, reopens `repo`
/// and expires the reflogs. Returns how many packs it merged and how many objects it wrote.
fn merge_small_packs(
    repo: &mut Repository,
    root: &Path,
    dir: &Path,
    packs: &[PathBuf],
) -> Result<(usize, usize)> {
    let err = |op: &'static str| move |e: git2::Error| Error::git(root, op, &e);
    let mut sized: Vec<(u64, &PathBuf)> = packs
        .iter()
        .filter_map(|p| index_count(&p.with_extension("idx")).map(|c| (c, p)))
        .collect();
    sized.sort();
    let counts: Vec<u64> = sized.iter().map(|(c, _)| *c).collect();
    let split = geometric_split(&counts);
    if split < 2 {
        return Ok((0, 0));
    }
    let merged: Vec<&PathBuf> = sized[..split].iter().map(|(_, p)| *p).collect();
    let mut objects: Vec<Oid> = Vec::new();
    for pack in &merged {
        objects.extend(index_oids(&pack.with_extension("idx")).unwrap_or_default());
    }
    objects.sort();
    objects.dedup();
    let reachable = reachable_commits(repo).map_err(err("repack"))?;
    let odb = repo.odb().map_err(err("repack"))?;
    let mut builder = repo.packbuilder().map_err(err("repack"))?;
    let mut written = 0;
    for oid in &objects {
        let (_, kind) = odb.read_header(*oid).map_err(err("repack"))?;
        if kind == ObjectType::Commit && !reachable.contains(oid) {
            continue;
        }
        builder.insert_object(*oid, None).map_err(err("repack"))?;
        written += 1;
    }
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
    drop(odb);
    // Every object of the merged packs that a ref reaches is in the new pack now.
    for pack in &merged {
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
    // Forget the removed packs' open handles and maps.
    *repo = Repository::open(root).map_err(err("reopen the clone"))?;
    expire_reflogs(repo).map_err(err("expire the reflogs"))?;
    Ok((merged.len(), written))
}

/// Every commit a ref (branches, remote-tracking branches, approval branches) or HEAD reaches.
fn reachable_commits(repo: &Repository) -> std::result::Result<HashSet<Oid>, git2::Error> {
    let mut walk = repo.revwalk()?;
    for reference in repo.references()?.flatten() {
        // A ref that names no commit has nothing to keep.
        if let Ok(commit) = reference.peel_to_commit() {
            walk.push(commit.id())?;
        }
    }
    if let Ok(head) = repo.head().and_then(|h| h.peel_to_commit()) {
        walk.push(head.id())?;
    }
    walk.collect()
}

const IDX_MAGIC: [u8; 8] = [0xff, b't', b'O', b'c', 0, 0, 0, 2];
const IDX_HEADER: usize = 8 + 256 * 4;

/// How many objects a pack index (version 2) lists: the last entry of its fan-out table.
fn index_count(idx: &Path) -> Option<u64> {
    use std::io::Read;
    let mut header = [0u8; IDX_HEADER];
    std::fs::File::open(idx)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    if header[..8] != IDX_MAGIC {
        return None;
    }
    Some(u32::from_be_bytes(header[IDX_HEADER - 4..].try_into().ok()?).into())
}

/// The object ids a pack index (version 2, what libgit2 and git write) lists; `None` when it
/// cannot be read.
fn index_oids(idx: &Path) -> Option<Vec<Oid>> {
    let bytes = std::fs::read(idx).ok()?;
    if bytes.len() < IDX_HEADER || bytes[..8] != IDX_MAGIC {
        return None;
    }
    let count = u32::from_be_bytes(bytes[IDX_HEADER - 4..IDX_HEADER].try_into().ok()?) as usize;
    let ids = bytes.get(IDX_HEADER..IDX_HEADER + count * 20)?;
    ids.chunks_exact(20)
        .map(|c| Oid::from_bytes(c).ok())
        .collect()
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

#[cfg(test)]
mod tests {
    use super::geometric_split;

    #[test]
    fn packs_already_in_a_geometric_progression_are_left_alone() {
        assert_eq!(geometric_split(&[1, 2, 4, 8, 100]), 0);
        assert_eq!(geometric_split(&[5]), 0);
        assert_eq!(geometric_split(&[]), 0);
    }

    #[test]
    fn the_smallest_packs_are_merged_up_to_where_the_progression_holds() {
        // 3 + 3 + 4 = 10 objects: the 50 is more than twice that and stays, so does the 1000.
        assert_eq!(geometric_split(&[3, 3, 4, 50, 1000]), 3);
        // Many equal packs roll up together, all but the biggest.
        assert_eq!(
            geometric_split(&[5; 55].iter().copied().chain([10_000]).collect::<Vec<_>>()),
            55
        );
    }

    #[test]
    fn the_biggest_pack_is_never_merged() {
        // The roll-up would take the 20 (smaller than twice the 12 before it).
        assert_eq!(geometric_split(&[4, 4, 4, 20]), 3);
        assert_eq!(geometric_split(&[7, 7]), 1);
    }
}
