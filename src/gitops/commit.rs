//! The one way sluice writes a commit, on the main branch and on approval branches alike: a
//! tree made from the parent's tree and the changed paths, the rendered message with its
//! trailers, the signature when a key is set, and an account of the objects written so a
//! tick's memory store knows what to pack (`memory.rs`).
//!
//! Works on a `git2::Repository` (the clone's, or the memory store standing in for it) and
//! knows nothing of the work tree, refs or remotes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use git2::{Oid, Repository, Signature};

use super::change::{validate_path, FileChange};
use super::error::{Error, Result};
use super::sign::Signing;
use super::trees::{Outcome, Trees};

/// What to do when the changes leave the parent's tree as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IfUnchanged {
    /// Write nothing and return `None`.
    Skip,
    /// Write a commit with the parent's tree anyway.
    Commit,
}

/// Writes commits into one object store.
pub(super) struct Writer<'a> {
    pub(super) repo: &'a Repository,
    /// The clone, named in errors.
    pub(super) root: &'a Path,
    pub(super) signing: Option<&'a Signing>,
    /// The folders read and written so far (`trees.rs`).
    pub(super) trees: &'a mut Trees,
}

impl Writer<'_> {
    /// Writes the blobs, trees and commit of `changes` on top of `parent`, with `message`
    /// (rendered) and `signature` as author and committer, signed when a key is set. Returns
    /// the commit and what it wrote; `None` when the tree equals the parent's and `unchanged`
    /// says to skip.
    pub(super) fn commit(
        &mut self,
        parent: Oid,
        changes: &[FileChange],
        message: &str,
        signature: &Signature<'_>,
        unchanged: IfUnchanged,
    ) -> Result<Option<(Oid, Written)>> {
        for change in changes {
            validate_path(&change.path)?;
        }
        let parent = self
            .repo
            .find_commit(parent)
            .map_err(|e| self.err("read the parent commit", &e))?;
        let base = parent.tree_id();
        let mut written = Written {
            objects: Vec::new(),
            bytes: 0,
        };
        let mut edits = Vec::with_capacity(changes.len());
        for change in changes {
            let blob = match &change.content {
                Some(content) => {
                    let blob = self
                        .repo
                        .blob(content.as_bytes())
                        .map_err(|e| self.err("write a blob", &e))?;
                    written.objects.push(blob);
                    written.bytes += content.len();
                    Some(blob)
                }
                None => None,
            };
            edits.push((change.path.as_str(), blob));
        }
        let odb = self
            .repo
            .odb()
            .map_err(|e| self.err("open the object store", &e))?;
        let tree_id = match self.trees.update(&odb, base, &edits) {
            Ok((tree_id, built)) => {
                written.objects.extend(built.trees);
                written.bytes += built.bytes;
                tree_id
            }
            Err(Outcome::Git(e)) => return Err(self.err("write the tree", &e)),
            // libgit2's updater makes the change or reports why it cannot.
            Err(Outcome::Unusual) => {
                let tree_id = self.update_with_libgit2(&parent, &edits)?;
                let tree = self
                    .repo
                    .find_tree(tree_id)
                    .map_err(|e| self.err("read the new tree", &e))?;
                written = written_trees(self.repo, &tree, changes);
                tree_id
            }
        };
        if base == tree_id && unchanged == IfUnchanged::Skip {
            return Ok(None);
        }
        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(|e| self.err("read the new tree", &e))?;
        let oid = match self.signing {
            None => self
                .repo
                .commit(None, signature, signature, message, &tree, &[&parent])
                .map_err(|e| self.err("create the commit", &e))?,
            Some(signing) => {
                let buffer = self
                    .repo
                    .commit_create_buffer(signature, signature, message, &tree, &[&parent])
                    .map_err(|e| self.err("create the commit", &e))?;
                let content = buffer.as_str().map_err(|_| Error::Git {
                    path: self.root.to_path_buf(),
                    op: "create the commit",
                    detail: "commit buffer is not UTF-8".to_string(),
                })?;
                let sig = signing.sign(content)?;
                self.repo
                    .commit_signed(content, &sig, None)
                    .map_err(|e| self.err("create the signed commit", &e))?
            }
        };
        written.objects.push(oid);
        written.bytes += message.len();
        Ok(Some((oid, written)))
    }

    /// The tree of `parent` with `edits` applied, by libgit2's tree updater: the path for what
    /// [`Trees::update`] leaves to it.
    fn update_with_libgit2(
        &self,
        parent: &git2::Commit<'_>,
        edits: &[(&str, Option<Oid>)],
    ) -> Result<Oid> {
        let base_tree = parent
            .tree()
            .map_err(|e| self.err("read the parent tree", &e))?;
        let mut update = git2::build::TreeUpdateBuilder::new();
        for (path, blob) in edits {
            match blob {
                Some(blob) => {
                    update.upsert(*path, *blob, git2::FileMode::Blob);
                }
                // Deleting a path the parent does not have is no change.
                None => {
                    if base_tree.get_path(Path::new(path)).is_ok() {
                        update.remove(*path);
                    }
                }
            }
        }
        update
            .create_updated(self.repo, &base_tree)
            .map_err(|e| self.err("write the tree", &e))
    }

    fn err(&self, op: &'static str, e: &git2::Error) -> Error {
        Error::git(self.root, op, e)
    }
}

/// The objects one commit wrote and about how many bytes they hold.
pub(super) struct Written {
    pub(super) objects: Vec<Oid>,
    pub(super) bytes: usize,
}

/// The trees (and blobs) a commit of `changes` with root `tree` wrote, read back: every folder
/// on their paths (each rewritten whole). Each folder is read once, however many files it holds.
fn written_trees(repo: &Repository, tree: &git2::Tree<'_>, changes: &[FileChange]) -> Written {
    let mut out = Written {
        objects: vec![tree.id()],
        bytes: tree.len() * TREE_ENTRY_BYTES,
    };
    // Folder ("" for the root) -> names of files written in it.
    let mut files: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut folders: HashSet<&str> = HashSet::new();
    for change in changes {
        let (folder, name) = change.path.rsplit_once('/').unwrap_or(("", &change.path));
        if let Some(content) = &change.content {
            files.entry(folder).or_default().push(name);
            out.bytes += content.len();
        }
        let mut path = change.path.as_str();
        while let Some((parent, _)) = path.rsplit_once('/') {
            folders.insert(parent);
            path = parent;
        }
    }
    // Parents before children, each found in its parent: a big folder is read once, not once
    // per path through it.
    let mut folders: Vec<&str> = folders.into_iter().collect();
    folders.sort_by_key(|f| f.matches('/').count());
    let mut subtrees: HashMap<&str, git2::Tree<'_>> = HashMap::new();
    for folder in folders {
        let (parent, name) = folder.rsplit_once('/').unwrap_or(("", folder));
        let parent = if parent.is_empty() {
            Some(tree)
        } else {
            subtrees.get(parent)
        };
        let found = parent
            .and_then(|p| p.get_name(name))
            .and_then(|entry| repo.find_tree(entry.id()).ok());
        if let Some(sub) = found {
            out.objects.push(sub.id());
            out.bytes += sub.len() * TREE_ENTRY_BYTES;
            subtrees.insert(folder, sub);
        }
    }
    for (folder, names) in files {
        let parent = if folder.is_empty() {
            Some(tree)
        } else {
            subtrees.get(folder)
        };
        if let Some(parent) = parent {
            out.objects.extend(
                names
                    .iter()
                    .filter_map(|n| parent.get_name(n))
                    .map(|e| e.id()),
            );
        }
    }
    out
}

/// About how many bytes one tree entry takes (mode, name, object id).
const TREE_ENTRY_BYTES: usize = 48;
