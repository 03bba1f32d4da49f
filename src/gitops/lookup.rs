//! A path of a commit looked up in its tree objects the way a checkout would have shown it on
//! disk: absent, a regular file, a symbolic link, a path through a link, a folder. The clone
//! has no work tree; every read of the repo's files goes through here (or `tree_files.rs`).
//!
//! Knows names, modes and blob ids only; what a file's bytes mean is the caller's.

use std::collections::HashSet;
use std::path::Path;

use git2::{ErrorCode, ObjectType, Oid, Tree};

use super::change::{validate_path, FileChange};
use super::error::{Error, Result};
use super::repo::ConfigRepo;

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

/// What a blob holds, read up to a bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bounded {
    Bytes(Vec<u8>),
    /// Larger than the bound: its size.
    TooLarge(u64),
}

impl ConfigRepo {
    /// What `path` (repo-relative, `/`-separated) is at `commit`.
    pub fn entry_at(&self, commit: Oid, path: &str) -> Result<PathEntry> {
        let tree = self.tree_of(commit)?;
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let Some((last, folders)) = parts.split_last() else {
            return Ok(PathEntry::Folder);
        };
        let mut current = tree;
        for (i, part) in folders.iter().enumerate() {
            let Some(entry) = current.get_name(part) else {
                return Ok(PathEntry::Missing);
            };
            if entry.filemode() == LINK_MODE {
                return Ok(PathEntry::ThroughLink(parts[..=i].join("/")));
            }
            if entry.kind() != Some(ObjectType::Tree) {
                return Ok(PathEntry::Other);
            }
            let id = entry.id();
            drop(entry);
            current = self
                .repo
                .find_tree(id)
                .map_err(|e| self.git_err("read a folder", &e))?;
        }
        let Some(entry) = current.get_name(last) else {
            return Ok(PathEntry::Missing);
        };
        Ok(match (entry.kind(), entry.filemode()) {
            (_, LINK_MODE) => PathEntry::Link,
            (Some(ObjectType::Tree), _) => PathEntry::Folder,
            (Some(ObjectType::Blob), 0o100644 | 0o100755 | 0o100664) => PathEntry::File(entry.id()),
            _ => PathEntry::Other,
        })
    }

    /// The entries of the folder `path` at `commit` (`""`: the root), by name, each with what
    /// it is (a folder's entries are not looked into); `None` when there is no such folder.
    pub fn folder_at(&self, commit: Oid, path: &str) -> Result<Option<Vec<(String, PathEntry)>>> {
        let tree = self.tree_of(commit)?;
        let folder = if path.is_empty() {
            tree
        } else {
            match tree.get_path(Path::new(path)) {
                Ok(entry) if entry.kind() == Some(ObjectType::Tree) => self
                    .repo
                    .find_tree(entry.id())
                    .map_err(|e| self.git_err("read a folder", &e))?,
                Ok(_) => return Ok(None),
                Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
                Err(e) => return Err(self.git_err("look up a folder", &e)),
            }
        };
        let mut out: Vec<(String, PathEntry)> = folder
            .iter()
            .filter_map(|entry| {
                let name = std::str::from_utf8(entry.name_bytes()).ok()?.to_string();
                let what = match (entry.kind(), entry.filemode()) {
                    (_, LINK_MODE) => PathEntry::Link,
                    (Some(ObjectType::Tree), _) => PathEntry::Folder,
                    (Some(ObjectType::Blob), _) => PathEntry::File(entry.id()),
                    _ => PathEntry::Other,
                };
                Some((name, what))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Some(out))
    }

    /// The bytes of blob `id`, or its size when it holds more than `max` bytes (then it is
    /// not read).
    pub fn blob_bounded(&self, id: Oid, max: u64) -> Result<Bounded> {
        let odb = self
            .repo
            .odb()
            .map_err(|e| self.git_err("open the object store", &e))?;
        let (size, _) = odb
            .read_header(id)
            .map_err(|e| self.git_err("read a file", &e))?;
        if size as u64 > max {
            return Ok(Bounded::TooLarge(size as u64));
        }
        let blob = self
            .repo
            .find_blob(id)
            .map_err(|e| self.git_err("read a file", &e))?;
        Ok(Bounded::Bytes(blob.content().to_vec()))
    }

    fn tree_of(&self, commit: Oid) -> Result<Tree<'_>> {
        self.repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| self.git_err("read a commit's tree", &e))
    }
}

/// Refuses to write `path` when it, or a folder on its way, is a symbolic link in `tree`
/// (a link committed to the config repo must not redirect sluice's writes).
fn refuse_links(repo: &ConfigRepo, commit: Oid, path: &str) -> Result<()> {
    let link = match repo.entry_at(commit, path)? {
        PathEntry::Link => path.to_string(),
        PathEntry::ThroughLink(link) => link,
        _ => return Ok(()),
    };
    Err(Error::InvalidPath {
        path: path.to_string(),
        reason: format!("goes through the symlink `{link}`; sluice does not write through symlinks"),
    })
}

/// Checks the paths of `changes` before anything is written on top of `commit`: plain
/// repo-relative paths, each once, none through (or onto) a symbolic link of its tree.
pub(super) fn check_changes(repo: &ConfigRepo, commit: Oid, changes: &[FileChange]) -> Result<()> {
    let mut seen = HashSet::new();
    for change in changes {
        validate_path(&change.path)?;
        if !seen.insert(change.path.as_str()) {
            return Err(Error::InvalidPath {
                path: change.path.clone(),
                reason: "appears more than once in one commit".to_string(),
            });
        }
        refuse_links(repo, commit, &change.path)?;
    }
    Ok(())
}
