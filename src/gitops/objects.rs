//! Reading history from the object database, for audit and drift: the first-parent line, what
//! a commit changed, a file at a commit, and a commit's tree written out as a folder (the
//! readers of specs, settings and workloads read folders). Reads objects only; never writes to
//! the repository.

use std::path::Path;

use git2::{ObjectType, Oid, Repository, Tree, TreeWalkMode, TreeWalkResult};

use super::folders::Folders;
use super::message::{self, CommitHead};

/// A git failure while reading history.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op}: {detail}")]
pub struct GitError {
    pub op: &'static str,
    pub detail: String,
}

pub type Result<T> = std::result::Result<T, GitError>;

pub(crate) fn git(op: &'static str) -> impl Fn(git2::Error) -> GitError {
    move |e| GitError {
        op,
        detail: e.message().to_string(),
    }
}

/// One file a commit changed: its blob before and after (`None`: absent; equal ids, equal
/// content), and the first line of each (what says whether sluice generated it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub path: String,
    pub old: Option<Oid>,
    pub new: Option<Oid>,
    /// The first line of the content before and after (lossy UTF-8, at most
    /// [`FIRST_LINE_BYTES`] bytes); `None` where the file is absent.
    pub old_first_line: Option<String>,
    pub new_first_line: Option<String>,
}

/// How much of a file's first line [`Changed`] keeps: a generated file's mark fits many times.
pub const FIRST_LINE_BYTES: usize = 512;

/// The commits of the first-parent line from the root to `head`, oldest first. Commits are
/// read through `kept` (see [`first_parent`]).
pub fn first_parent_line(repo: &Repository, kept: &Folders, head: Oid) -> Result<Vec<Oid>> {
    let mut line = Vec::new();
    let mut next = Some(head);
    while let Some(oid) = next {
        line.push(oid);
        next = first_parent(repo, kept, oid)?;
    }
    line.reverse();
    Ok(line)
}

/// What audit reads of a commit: its tree, parents and message up to the cap (a larger
/// message is never read whole).
pub fn head(repo: &Repository, oid: Oid) -> Result<CommitHead> {
    message::read(repo, oid).map_err(git("read a commit"))
}

/// A commit's first parent (`None` for a root commit). Kept in `kept` (the caller's, for as
/// long as it reads this repository): reading a commit parses its whole message, and a
/// perTick commit's names every canary it decided.
pub fn first_parent(repo: &Repository, kept: &Folders, oid: Oid) -> Result<Option<Oid>> {
    Ok(kept
        .skeleton(repo, oid)
        .map_err(git("read a commit"))?
        .first_parent)
}

/// The tree of a commit's first parent (`None` for a root commit).
pub fn parent_tree<'r>(repo: &'r Repository, kept: &Folders, oid: Oid) -> Result<Option<Tree<'r>>> {
    first_parent(repo, kept, oid)?
        .map(|p| commit_tree(repo, kept, p))
        .transpose()
}

/// The tree of a commit (its id kept in `kept`, as [`first_parent`]).
pub fn commit_tree<'r>(repo: &'r Repository, kept: &Folders, oid: Oid) -> Result<Tree<'r>> {
    let tree = kept.root_of(repo, oid).map_err(git("read a commit"))?;
    repo.find_tree(tree).map_err(git("read a tree"))
}

/// The id of what `path` names in `tree` (`None` when absent): equal ids, equal content.
pub fn entry_id(tree: &Tree<'_>, path: &str) -> Option<Oid> {
    tree.get_path(Path::new(path)).ok().map(|e| e.id())
}

/// The files at or under `folder` whose content differs between `old` and `new`, sorted.
pub fn changed_under(
    repo: &Repository,
    old: &Tree<'_>,
    new: &Tree<'_>,
    folder: &str,
) -> Result<Vec<String>> {
    let prefix = format!("{folder}/");
    let diff = super::tree_diff_under(repo, &Folders::default(), Some(old), Some(new), folder)
        .map_err(git("compare two trees"))?;
    let mut files: Vec<String> = diff
        .iter()
        .map(super::Differs::path_lossy)
        .filter(|p| p.starts_with(&prefix))
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

fn blob(repo: &Repository, id: Oid) -> Result<Option<Vec<u8>>> {
    if id.is_zero() {
        return Ok(None);
    }
    let blob = repo.find_blob(id).map_err(git("read a file"))?;
    Ok(Some(blob.content().to_vec()))
}

/// Every file that differs between `old` (empty when `None`) and `new`, sorted by path. Each
/// blob is read once however many paths name it (one push may commit one large blob under
/// hundreds of names), and only its first line is kept.
pub fn changes(repo: &Repository, old: Option<&Tree<'_>>, new: &Tree<'_>) -> Result<Vec<Changed>> {
    let diff = super::tree_diff(repo, &Folders::default(), old, Some(new))
        .map_err(git("compare two trees"))?;
    let mut lines: std::collections::HashMap<Oid, String> = std::collections::HashMap::new();
    let mut first_line = |id: Option<Oid>| -> Result<Option<String>> {
        let Some(id) = id else { return Ok(None) };
        if let Some(line) = lines.get(&id) {
            return Ok(Some(line.clone()));
        }
        let blob = repo.find_blob(id).map_err(git("read a file"))?;
        let content = blob.content();
        let end = content
            .iter()
            .position(|b| *b == b'\n')
            .unwrap_or(content.len())
            .min(FIRST_LINE_BYTES);
        let line = String::from_utf8_lossy(&content[..end]).into_owned();
        lines.insert(id, line.clone());
        Ok(Some(line))
    };
    let mut out = Vec::new();
    for changed in diff {
        let (old, new) = (changed.old.map(|o| o.0), changed.new.map(|n| n.0));
        out.push(Changed {
            path: changed.path_lossy(),
            old_first_line: first_line(old)?,
            new_first_line: first_line(new)?,
            old,
            new,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The blob at `path` of `tree`; `None` when absent or not a file.
pub fn blob_id_at(tree: &Tree<'_>, path: &str) -> Option<Oid> {
    match tree.get_path(Path::new(path)) {
        Ok(entry) if entry.kind() == Some(ObjectType::Blob) => Some(entry.id()),
        _ => None,
    }
}

/// A file's content at a tree; `None` when absent or not a file.
pub fn file_at(repo: &Repository, tree: &Tree<'_>, path: &str) -> Result<Option<Vec<u8>>> {
    match tree.get_path(Path::new(path)) {
        Ok(entry) if entry.kind() == Some(ObjectType::Blob) => blob(repo, entry.id()),
        _ => Ok(None),
    }
}

/// Writes the regular files of `tree` under `dir` (links and submodules are left out: the
/// readers refuse links anyway).
pub fn write_tree(repo: &Repository, tree: &Tree<'_>, dir: &Path) -> Result<()> {
    let mut failed: Option<GitError> = None;
    let walked = tree.walk(TreeWalkMode::PreOrder, |folder, entry| {
        let regular = matches!(entry.filemode(), 0o100644 | 0o100755 | 0o100664);
        if entry.kind() != Some(ObjectType::Blob) || !regular {
            return TreeWalkResult::Ok;
        }
        let Ok(name) = entry.name() else {
            return TreeWalkResult::Ok;
        };
        let written = repo
            .find_blob(entry.id())
            .map_err(git("read a file"))
            .and_then(|b| {
                let path = dir.join(folder).join(name);
                let io = |e: std::io::Error| GitError {
                    op: "write a file of the tree",
                    detail: format!("{}: {e}", path.display()),
                };
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(io)?;
                }
                std::fs::write(&path, b.content()).map_err(io)
            });
        match written {
            Ok(()) => TreeWalkResult::Ok,
            Err(e) => {
                failed = Some(e);
                TreeWalkResult::Abort
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    walked.map_err(git("walk a tree"))
}
