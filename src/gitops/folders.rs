//! Folders (tree objects) read once and kept, by tree id, for the life of the clone
//! ([`Folders`], held by its [`super::ConfigRepo`]; a reader of git objects outside a clone
//! holds its own).
//!
//! The clone has no work tree, so every path the tick looks up (a status file, an output
//! folder's entries, the files of the head) is a walk down tree objects. libgit2 keeps parsed
//! trees only within its small object cache (`object_cache.rs`: 1 MiB), and a tick at 1,000
//! canaries looks up thousands of paths through the same few hundred folders: most lookups
//! inflated a tree again from the pack. A tree id names its content, so a folder read once is
//! right for every commit and clone that has that id; between two ticks only the folders on
//! the changed paths are new. Bounded: past [`KEEP_ENTRIES`] entries (or [`KEEP`] folders)
//! the cache starts again empty. A perCanary tick over one namespace writes a new version of
//! that namespace's folders (one entry per canary) with every commit: unbounded by entries,
//! the versions a drift check passes through held 250 MiB at 1,000 canaries.
//!
//! Reads tree objects only; knows names, ids and modes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use git2::{Oid, Repository};

/// Folders kept at most.
const KEEP: usize = 16_384;

/// Entries of the kept folders at most (about 60 bytes each: 4 MiB; a 1,000-canary repo's
/// folders hold about 9,000).
const KEEP_ENTRIES: usize = 65_536;

/// The git file mode of a folder.
pub(super) const TREE_MODE: i32 = 0o040000;

/// One entry of a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub name: Vec<u8>,
    pub id: Oid,
    pub mode: i32,
}

impl Entry {
    pub fn is_folder(&self) -> bool {
        self.mode == TREE_MODE
    }
}

/// A folder's entries, in git's order.
pub(super) type Folder = Arc<Vec<Entry>>;

/// The folders and commits read so far, by id: what one clone (or one reader of git objects)
/// keeps. Content-addressed, so never stale, and right for any repository holding the ids.
/// A clone of it is a handle to the same store.
#[derive(Clone, Default)]
pub struct Folders {
    kept: Arc<Mutex<Kept>>,
    /// Commits' root tree ids and first parents, by commit id.
    commits: Arc<Mutex<HashMap<Oid, Skeleton>>>,
}

impl std::fmt::Debug for Folders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Folders")
    }
}

#[derive(Default)]
struct Kept {
    folders: HashMap<Oid, Folder>,
    entries: usize,
}

impl Folders {
    /// The entries of the tree `id`, read from `repo` unless kept.
    pub(super) fn folder(&self, repo: &Repository, id: Oid) -> Result<Folder, git2::Error> {
        if let Some(kept) = self
            .kept
            .lock()
            .ok()
            .and_then(|k| k.folders.get(&id).cloned())
        {
            return Ok(kept);
        }
        let tree = repo.find_tree(id)?;
        let entries: Folder = Arc::new(
            tree.iter()
                .map(|e| Entry {
                    name: e.name_bytes().to_vec(),
                    id: e.id(),
                    mode: e.filemode(),
                })
                .collect(),
        );
        if let Ok(mut kept) = self.kept.lock() {
            if kept.folders.len() >= KEEP || kept.entries + entries.len() > KEEP_ENTRIES {
                kept.folders.clear();
                kept.entries = 0;
            }
            kept.entries += entries.len();
            kept.folders.insert(id, Arc::clone(&entries));
        }
        Ok(entries)
    }
}

/// The entry `name` of a folder.
pub(super) fn get<'f>(folder: &'f [Entry], name: &str) -> Option<&'f Entry> {
    folder.iter().find(|e| e.name == name.as_bytes())
}

/// What lookups need of a commit: its root tree and its first parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Skeleton {
    pub tree: Oid,
    pub first_parent: Option<Oid>,
}

impl Folders {
    /// The root tree and first parent of `commit`. Kept: reading a commit parses its whole
    /// message, and a perTick commit's message names every canary it decided (hundreds of KiB at
    /// 1,000 canaries), which every path lookup on its tree, and every drift check of a canary it
    /// carries, read and parsed again.
    pub(super) fn skeleton(&self, repo: &Repository, commit: Oid) -> Result<Skeleton, git2::Error> {
        if let Some(kept) = self
            .commits
            .lock()
            .ok()
            .and_then(|c| c.get(&commit).copied())
        {
            return Ok(kept);
        }
        let head = super::message::read(repo, commit)?;
        let kept = Skeleton {
            tree: head.tree,
            first_parent: head.parents.first().copied(),
        };
        if let Ok(mut commits) = self.commits.lock() {
            if commits.len() >= KEEP {
                commits.clear();
            }
            commits.insert(commit, kept);
        }
        Ok(kept)
    }

    /// The root folder's tree id of `commit`.
    pub(super) fn root_of(&self, repo: &Repository, commit: Oid) -> Result<Oid, git2::Error> {
        Ok(self.skeleton(repo, commit)?.tree)
    }
}
