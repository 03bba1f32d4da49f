//! What the readers of a commit's files (`crate::commit_files`) take from the clone: its open
//! repository, the folders it keeps by tree id, and a commit's root tree. More of
//! [`ConfigRepo`], built on `repo`; reads only.

use git2::{Oid, Repository};

use super::error::Result;
use super::folders::Folders;
use super::repo::ConfigRepo;

impl ConfigRepo {
    /// The root tree of `commit`.
    pub fn tree_at(&self, commit: Oid) -> Result<Oid> {
        self.folders
            .root_of(&self.repo, commit)
            .map_err(|e| self.git_err("read a commit's tree", &e))
    }

    /// The open repository, to read objects from (while a tick's objects are kept in memory,
    /// those too).
    pub fn git(&self) -> &Repository {
        &self.repo
    }

    /// The folders this clone has read, by tree id.
    pub fn folders(&self) -> &Folders {
        &self.folders
    }
}
