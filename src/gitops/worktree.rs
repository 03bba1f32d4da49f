//! The work tree of the clone: checking the paths of a change, writing and deleting its files,
//! and bringing the index up to a commit with the files' stat data.
//!
//! Only plain repo-relative paths are accepted: nothing absolute, no `..`, nothing in `.git`,
//! and never through a symlink, so a config repo cannot trick sluice into writing outside its
//! work tree. Knows nothing of commits' objects, refs or remotes.

use std::collections::HashSet;
use std::path::Path;

use git2::{Oid, Repository};

use super::change::{validate_path, FileChange};
use super::error::{Error, Result};

/// Checks the paths of `changes` before anything is written: plain repo-relative paths, each
/// once, none through a symlink under `root`.
pub(super) fn check(root: &Path, changes: &[FileChange]) -> Result<()> {
    let mut seen = HashSet::new();
    for change in changes {
        validate_path(&change.path)?;
        if !seen.insert(change.path.as_str()) {
            return Err(Error::InvalidPath {
                path: change.path.clone(),
                reason: "appears more than once in one commit".to_string(),
            });
        }
        refuse_symlinks(root, &change.path)?;
    }
    Ok(())
}

/// Writes and deletes the changed files in the work tree.
pub(super) fn write(root: &Path, changes: &[FileChange]) -> Result<()> {
    for change in changes {
        let full = root.join(&change.path);
        match &change.content {
            Some(content) => {
                if let Some(parent) = full.parent() {
                    std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                        path: parent.to_path_buf(),
                        op: "create directory",
                        source,
                    })?;
                }
                // Rewriting an identical file costs a truncate; skip it.
                let same = std::fs::read(&full).is_ok_and(|old| old == content.as_bytes());
                if !same {
                    std::fs::write(&full, content).map_err(|source| Error::Io {
                        path: full.clone(),
                        op: "write file",
                        source,
                    })?;
                }
            }
            None => match std::fs::remove_file(&full) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(Error::Io {
                        path: full,
                        op: "delete file",
                        source,
                    })
                }
            },
        }
    }
    Ok(())
}

/// Refuses a path whose parents or itself are symlinks in the work tree (a symlink committed
/// to the config repo must not let us write outside it).
fn refuse_symlinks(root: &Path, path: &str) -> Result<()> {
    let mut current = root.to_path_buf();
    for component in path.split('/') {
        current.push(component);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(Error::InvalidPath {
                    path: path.to_string(),
                    reason: format!(
                        "goes through the symlink `{}`; sluice does not write through symlinks",
                        current.strip_prefix(root).unwrap_or(&current).display()
                    ),
                })
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(Error::Io {
                    path: current,
                    op: "inspect path",
                    source,
                })
            }
        }
    }
    Ok(())
}

/// Points the index at the tree of `commit`; the entries of `written` (files sluice wrote
/// itself) get their stat data, so the next checkout need not hash them again.
pub(super) fn sync_index(
    repo: &Repository,
    root: &Path,
    commit: Oid,
    written: Vec<String>,
) -> Result<()> {
    let err = |op: &'static str| move |e: git2::Error| Error::git(root, op, &e);
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(err("read the head tree"))?;
    let mut index = repo.index().map_err(err("open the index"))?;
    index.read_tree(&tree).map_err(err("write the index"))?;
    for path in written {
        let Some(mut entry) = index.get_path(Path::new(&path), 0) else {
            continue;
        };
        if let Ok(meta) = std::fs::symlink_metadata(root.join(&path)) {
            set_stat(&mut entry, &meta);
            index.add(&entry).map_err(err("write the index"))?;
        }
    }
    index.write().map_err(err("write the index"))
}

/// Copies a file's stat data into its index entry, as `git add` records it: the checkout after
/// the next fetch then sees the file unchanged without reading it. The fields are truncated to
/// 32 bits as in git's index format.
#[cfg(unix)]
fn set_stat(entry: &mut git2::IndexEntry, meta: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    let time = |secs: i64, nanos: i64| git2::IndexTime::new(secs as i32, nanos as u32);
    entry.ctime = time(meta.ctime(), meta.ctime_nsec());
    entry.mtime = time(meta.mtime(), meta.mtime_nsec());
    entry.dev = meta.dev() as u32;
    entry.ino = meta.ino() as u32;
    entry.uid = meta.uid();
    entry.gid = meta.gid();
    entry.file_size = meta.len() as u32;
}

/// Without unix stat data the entry keeps none; the next checkout reads the file instead.
#[cfg(not(unix))]
fn set_stat(_entry: &mut git2::IndexEntry, _meta: &std::fs::Metadata) {}
