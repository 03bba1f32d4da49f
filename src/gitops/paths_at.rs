//! The paths of a commit of the clone, as a checkout would have shown them (`lookup.rs`):
//! what a path is, a folder's entries, a blob read up to a bound. More of [`ConfigRepo`],
//! built on `repo`; the readers of the repo's files (`crate::head_files`) call these.

use git2::Oid;

use super::error::Result;
use super::lookup::{self, Bounded, PathEntry};
use super::repo::ConfigRepo;

impl ConfigRepo {
    /// What `path` (repo-relative, `/`-separated) is at `commit`.
    pub fn entry_at(&self, commit: Oid, path: &str) -> Result<PathEntry> {
        lookup::entry_at(&self.repo, &self.folders, commit, path)
            .map_err(|e| self.git_err("look up a path", &e))
    }

    /// The entries of the folder `path` at `commit` (`""`: the root), by name, each with what
    /// it is (a folder's entries are not looked into); `None` when there is no such folder.
    pub fn folder_at(&self, commit: Oid, path: &str) -> Result<Option<Vec<(String, PathEntry)>>> {
        lookup::folder_at(&self.repo, &self.folders, commit, path)
            .map_err(|e| self.git_err("list a folder", &e))
    }

    /// The bytes of blob `id`, or its size when it holds more than `max` bytes (then it is
    /// not read).
    pub fn blob_bounded(&self, id: Oid, max: u64) -> Result<Bounded> {
        lookup::blob_bounded(&self.repo, id, max).map_err(|e| self.git_err("read a file", &e))
    }
}
