//! A path of a commit looked up in its tree objects the way a checkout would have shown it on
//! disk: absent, a regular file, a symbolic link, a path through a link, a folder. The clone
//! has no work tree; the link checks of a commit's paths go through here (a commit's files
//! are read by `crate::commit_files`).
//!
//! Knows names, modes and blob ids only; what a file's bytes mean is the caller's.

use std::collections::HashSet;
use std::path::Path;

use git2::{ObjectType, Oid, Repository, Tree};

use super::change::{validate_path, FileChange};
use super::error::{Error, Result};
use super::folders::{self, Entry, Folders, TREE_MODE};

/// The git file mode of a symbolic link.
const LINK_MODE: i32 = 0o120000;

/// What a repo-relative path is at a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathEntry {
    /// Nothing there (nor a folder on the way).
    Missing,
    /// A regular file (plain or executable) and its blob.
    File(Oid),
    /// A symbolic link: its target is never read.
    Link,
    /// A folder on the way is a symbolic link (repo-relative path of the link).
    ThroughLink(String),
    /// A folder.
    Folder,
    /// A submodule, or a file where a folder is on the way.
    Other,
}

fn tree_of(repo: &Repository, commit: Oid) -> std::result::Result<Tree<'_>, git2::Error> {
    repo.find_commit(commit).and_then(|c| c.tree())
}

/// What an entry of a tree is, by its mode.
fn kind_of(entry: &Entry) -> PathEntry {
    match entry.mode {
        LINK_MODE => PathEntry::Link,
        TREE_MODE => PathEntry::Folder,
        0o100644 | 0o100755 | 0o100664 => PathEntry::File(entry.id),
        _ => PathEntry::Other,
    }
}

/// What `path` (repo-relative, `/`-separated) is at `commit`.
pub(super) fn entry_at(
    repo: &Repository,
    kept: &Folders,
    commit: Oid,
    path: &str,
) -> std::result::Result<PathEntry, git2::Error> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let Some((last, above)) = parts.split_last() else {
        return Ok(PathEntry::Folder);
    };
    let mut current = kept.folder(repo, kept.root_of(repo, commit)?)?;
    for (i, part) in above.iter().enumerate() {
        let Some(entry) = folders::get(&current, part) else {
            return Ok(PathEntry::Missing);
        };
        let id = match kind_of(entry) {
            PathEntry::Folder => entry.id,
            PathEntry::Link => return Ok(PathEntry::ThroughLink(parts[..=i].join("/"))),
            _ => return Ok(PathEntry::Other),
        };
        current = kept.folder(repo, id)?;
    }
    Ok(folders::get(&current, last).map_or(PathEntry::Missing, kind_of))
}

/// Checks the paths of `changes` before anything is written on top of `commit`: plain
/// repo-relative paths, each once, none through (or onto) a symbolic link of its tree (a
/// link committed to the config repo must not redirect sluice's writes), none a folder, a
/// submodule or below a file. `root` is named in errors.
pub(super) fn check_changes(
    repo: &Repository,
    kept: &Folders,
    root: &Path,
    commit: Oid,
    changes: &[FileChange],
) -> Result<()> {
    let mut seen = HashSet::new();
    for change in changes {
        validate_path(&change.path)?;
        if !seen.insert(change.path.as_str()) {
            return Err(Error::InvalidPath {
                path: change.path.clone(),
                reason: "appears more than once in one commit".to_string(),
            });
        }
        let entry = entry_at(repo, kept, commit, &change.path)
            .map_err(|e| Error::git(root, "look up a path of the head", &e))?;
        let refused = |reason: &str| Error::InvalidPath {
            path: change.path.clone(),
            reason: reason.to_string(),
        };
        let link = match entry {
            PathEntry::Link => change.path.clone(),
            PathEntry::ThroughLink(link) => link,
            // As writing or deleting it in a checkout fails.
            PathEntry::Folder => {
                return Err(refused(
                    "is a folder; a change writes or deletes files only",
                ))
            }
            PathEntry::Other => {
                return Err(refused(
                    "is a submodule or below a file; a change writes or deletes files only",
                ))
            }
            PathEntry::Missing | PathEntry::File(_) => continue,
        };
        return Err(Error::InvalidPath {
            path: change.path.clone(),
            reason: format!(
                "goes through the symlink `{link}`; sluice does not write through symlinks"
            ),
        });
    }
    Ok(())
}

/// Reads every folder of `commit`'s tree and the header of every file: what a checkout of it
/// would have read, so a clone whose objects are missing or cut short is found at once (at
/// start) rather than by the first commit that needs them.
pub(super) fn verify_tree(repo: &Repository, commit: Oid) -> std::result::Result<(), git2::Error> {
    let odb = repo.odb()?;
    let mut folders = vec![tree_of(repo, commit)?.id()];
    while let Some(id) = folders.pop() {
        let tree = repo.find_tree(id)?;
        for entry in tree.iter() {
            match entry.kind() {
                Some(ObjectType::Tree) => folders.push(entry.id()),
                Some(ObjectType::Blob) => {
                    odb.read_header(entry.id())?;
                }
                // Submodules: their commits live in other repositories.
                _ => {}
            }
        }
    }
    Ok(())
}
