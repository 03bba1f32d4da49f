//! Objects of a whole tick kept in memory and stored as one pack at the end.
//!
//! A tick of N decisions makes N commits. Written as loose objects, each blob and tree is a
//! compressed file of its own (an inode: the largest cost of a tick on ext4), and each commit
//! inflates again the trees the previous one wrote. While a [`Memory`] is open, the clone's
//! repository is swapped for one whose object store reads the clone's objects and writes to
//! memory; when it closes, the objects the new commits need are packed and indexed into the
//! clone in one go. `ConfigRepo::with_memory_objects` (in `repo.rs`) drives it.

use std::io::Write;
use std::path::Path;

use git2::{Odb, Oid, Repository};

use super::commit::Written;
use super::error::{Error, Result};

/// Above about this many bytes in memory, the objects so far are stored as a pack and the rest
/// of the tick starts a new store in memory. A tick that rewrites big folders many times (one
/// commit per canary, hundreds of canaries in one namespace) writes tens of MiB of tree
/// versions: held at once they would cost that much memory, and written loose each would be
/// a compressed file of its own (the largest cost of such a tick). Later commits never read
/// the stored trees back: the tick's folders stay parsed (`trees.rs`). Halving it saved about
/// 3 MiB of a 1,000-canary tick but stored twice the packs: the clone in
/// `e2e/it/clone_size.rs` grew from 1.83x to 1.98x the remote, against a bound of 2x. Not
/// taken.
pub(super) const MEMORY_BUDGET: usize = 8 << 20;

/// The state of the memory object store: closed, or open with the clone's own repository put
/// aside and the objects written so far.
pub(super) struct Memory {
    /// While open: the clone's own repository, while the caller's `repo` writes to memory.
    disk: Option<Repository>,
    /// The objects the memory store holds for new commits, and about how many bytes they are.
    objects: Vec<Oid>,
    bytes: usize,
    /// Bytes above which the store closes ([`MEMORY_BUDGET`] unless a test lowers it).
    pub(super) budget: usize,
}

impl Default for Memory {
    fn default() -> Memory {
        Memory {
            disk: None,
            objects: Vec::new(),
            bytes: 0,
            budget: MEMORY_BUDGET,
        }
    }
}

impl Memory {
    pub(super) fn is_open(&self) -> bool {
        self.disk.is_some()
    }

    /// Swaps `repo` (the clone at `root`) for a store that writes to memory.
    pub(super) fn open(&mut self, repo: &mut Repository, root: &Path) -> Result<()> {
        let memory = memory_repository(repo, root)?;
        self.disk = Some(std::mem::replace(repo, memory));
        self.bytes = 0;
        self.objects.clear();
        Ok(())
    }

    /// Records a commit's objects; past the budget, stores them as a pack and starts again
    /// empty, so memory stays within the budget and nothing is written loose. A no-op when
    /// closed.
    pub(super) fn account(
        &mut self,
        written: Written,
        repo: &mut Repository,
        root: &Path,
    ) -> Result<()> {
        if self.disk.is_none() {
            return Ok(());
        }
        self.bytes += written.bytes;
        self.objects.extend(written.objects);
        if self.bytes > self.budget {
            self.close(repo, root)?;
            self.open(repo, root)?;
        }
        Ok(())
    }

    /// Puts the clone's repository back into `repo` and packs the new objects into it. A no-op
    /// when closed. On error the clone may lack objects its head names: the caller must reset.
    pub(super) fn close(&mut self, repo: &mut Repository, root: &Path) -> Result<()> {
        let Some(disk) = self.disk.take() else {
            return Ok(());
        };
        let memory = std::mem::replace(repo, disk);
        self.bytes = 0;
        let objects = std::mem::take(&mut self.objects);
        store_objects(&memory, repo, root, &objects)
    }
}

/// A repository without refs or work tree: reads come from `repo`'s object store, writes go to
/// memory.
fn memory_repository(repo: &Repository, root: &Path) -> Result<Repository> {
    let err = |e: git2::Error| Error::git(root, "open an object store in memory", &e);
    let odb = Odb::new().map_err(err)?;
    let objects = repo.path().join("objects");
    // An alternate is read from, never written to.
    odb.add_disk_alternate(&objects.to_string_lossy())
        .map_err(err)?;
    // The backend belongs to the object store from here on; its handle is not needed.
    odb.add_new_mempack_backend(1000).map_err(err)?;
    Repository::from_odb(odb).map_err(err)
}

/// Packs `objects` out of `memory` into `disk`.
fn store_objects(
    memory: &Repository,
    disk: &Repository,
    root: &Path,
    objects: &[Oid],
) -> Result<()> {
    if objects.is_empty() {
        return Ok(());
    }
    let err = |op: &'static str| move |e: git2::Error| Error::git(root, op, &e);
    let mut builder = memory.packbuilder().map_err(err("pack the new objects"))?;
    // 0: one delta-search thread per core, as `git pack-objects` does (`pack.threads`).
    builder.set_threads(0);
    for oid in objects {
        builder
            .insert_object(*oid, None)
            .map_err(err("pack the new objects"))?;
    }
    let odb = disk.odb().map_err(err("store the new objects"))?;
    let mut writer = odb.packwriter().map_err(err("store the new objects"))?;
    // Streamed into the indexer as the builder writes it, never held whole in memory.
    let mut written = Ok(());
    let packed = builder.foreach(|chunk| {
        written = writer.write_all(chunk);
        written.is_ok()
    });
    // A failed write is why the builder stopped: report it rather than the builder's error.
    written.map_err(|source| Error::Io {
        path: disk.path().join("objects"),
        op: "write a pack",
        source,
    })?;
    packed.map_err(err("pack the new objects"))?;
    writer.commit().map_err(err("store the new objects"))?;
    Ok(())
}
