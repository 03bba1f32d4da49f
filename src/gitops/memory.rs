//! Objects of a whole tick kept in memory and stored as one pack at the end.
//!
//! A tick of N decisions makes N commits. Written as loose objects, each blob and tree is a
//! compressed file of its own (an inode: the largest cost of a tick on ext4), and each commit
//! inflates again the trees the previous one wrote. Inside [`ConfigRepo::with_memory_objects`]
//! the clone's repository is swapped for one whose object store reads the clone's objects and
//! writes to memory; afterwards the objects the new commits need are packed and indexed into
//! the clone in one go.

use std::io::Write;

use git2::{Odb, Repository};

use super::commit::Written;
use super::repo::ConfigRepo;
use super::{Error, Result};

/// Above about this many bytes in memory, the objects so far are stored as a pack and the rest
/// of the tick writes loose objects. A tick that rewrites big folders many times (one commit
/// per canary, hundreds of canaries in one namespace) would otherwise hold, then pack and read
/// back through libgit2's per-pack delta caches, tens of MiB of tree versions.
const MEMORY_BUDGET: usize = 8 << 20;

impl ConfigRepo {
    /// Runs `work` with the objects `commit_files` writes kept in memory (up to 8 MiB), then
    /// stores the objects the new commits need in the clone as one pack.
    /// Inside `work` only object operations are available (commit, history, reading files at
    /// the head); refs, index and push wait until it returns. The pack is written even when
    /// `work` fails, so the head never names a missing object.
    pub fn with_memory_objects<T, E>(
        &mut self,
        work: impl FnOnce(&mut ConfigRepo) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<Error>,
    {
        if self.disk.is_some() {
            return work(self);
        }
        // Past the budget `close_memory` already ran and `disk` is back in place; the closing
        // call below is then a no-op.
        self.open_memory()?;
        let result = work(self);
        self.close_memory()?;
        result
    }

    /// Records a commit's objects in memory; past the budget, stores them and goes back to
    /// writing loose objects for the rest of `with_memory_objects`.
    pub(super) fn account_memory(&mut self, written: Written) -> Result<()> {
        if self.disk.is_none() {
            return Ok(());
        }
        self.memory_bytes += written.bytes;
        self.memory_objects.extend(written.objects);
        if self.memory_bytes > MEMORY_BUDGET {
            self.close_memory()?;
        }
        Ok(())
    }

    fn open_memory(&mut self) -> Result<()> {
        let memory = self.memory_repository()?;
        self.disk = Some(std::mem::replace(&mut self.repo, memory));
        self.memory_bytes = 0;
        self.memory_objects.clear();
        Ok(())
    }

    fn close_memory(&mut self) -> Result<()> {
        let Some(disk) = self.disk.take() else {
            return Ok(());
        };
        let memory = std::mem::replace(&mut self.repo, disk);
        self.memory_bytes = 0;
        let objects = std::mem::take(&mut self.memory_objects);
        let stored = self.store_objects(&memory, &objects);
        if stored.is_err() {
            // The head may name objects that were only in memory: the next fetch resets.
            self.dirty = true;
        }
        stored
    }

    /// A repository without refs or work tree: reads come from the clone's object store, writes
    /// go to memory.
    fn memory_repository(&self) -> Result<Repository> {
        let err = |e: git2::Error| self.git_err("open an object store in memory", &e);
        let odb = Odb::new().map_err(err)?;
        let objects = self.repo.path().join("objects");
        // An alternate is read from, never written to.
        odb.add_disk_alternate(&objects.to_string_lossy())
            .map_err(err)?;
        // The backend belongs to the object store from here on; its handle is not needed.
        odb.add_new_mempack_backend(1000).map_err(err)?;
        Repository::from_odb(odb).map_err(err)
    }
    /// Packs `objects` out of `memory` into the clone.
    fn store_objects(&self, memory: &Repository, objects: &[git2::Oid]) -> Result<()> {
        if objects.is_empty() {
            return Ok(());
        }
        let err = |op: &'static str| move |e: git2::Error| self.git_err(op, &e);
        let mut builder = memory.packbuilder().map_err(err("pack the new objects"))?;
        for oid in objects {
            builder
                .insert_object(*oid, None)
                .map_err(err("pack the new objects"))?;
        }
        let mut pack = git2::Buf::new();
        builder
            .write_buf(&mut pack)
            .map_err(err("pack the new objects"))?;
        let odb = self.repo.odb().map_err(err("store the new objects"))?;
        let mut writer = odb.packwriter().map_err(err("store the new objects"))?;
        writer.write_all(&pack).map_err(|source| Error::Io {
            path: self.repo.path().join("objects"),
            op: "write a pack",
            source,
        })?;
        writer.commit().map_err(err("store the new objects"))?;
        Ok(())
    }
}
