//! Tree objects of a commit, built from the parent's tree and the changed paths while keeping
//! the folders already read parsed in memory.
//!
//! A tick of N `perCanary` decisions makes N commits, each rewriting the folders on its paths.
//! With 1,000 canaries in one namespace the output folder holds 1,000 entries, and building
//! each commit's trees through libgit2's tree updater reads that folder back (inflating it
//! when it is a loose object: libgit2's object cache skips trees over 4 KiB) and parses it,
//! then reads it once more to account for what was written. [`Trees`] keeps the newest
//! version of each folder it wrote or read, parsed, keyed by its object id (so it can never be
//! stale), and writes exactly the trees on the changed paths: one read of each folder per
//! tick instead of two per commit.
//!
//! The bytes written are the ones libgit2's tree updater writes (entries in git's order, the
//! mode as octal without leading zero, empty folders dropped), so a commit's id does not depend
//! on which builder made it. Anything unusual (a file where a folder is needed, a folder
//! where a file is written) is [`Outcome::Unusual`]: the caller then uses libgit2's updater, which
//! reports it.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use git2::{ObjectType, Odb, Oid};

/// Above about this many bytes of parsed folders the cache starts again empty.
const CACHE_BUDGET: usize = 16 << 20;

/// About the bytes one cached entry costs beyond its name (id, mode, pointers).
const ENTRY_OVERHEAD: usize = 56;

const MODE_TREE: u32 = 0o040000;
const MODE_BLOB: u32 = 0o100644;
const MODE_TYPE: u32 = 0o170000;

/// One entry of a tree: its name, mode (as stored) and object.
#[derive(Clone, Debug)]
struct Entry {
    name: Arc<[u8]>,
    mode: u32,
    id: Oid,
}

impl Entry {
    fn is_tree(&self) -> bool {
        self.mode & MODE_TYPE == MODE_TREE
    }
}

/// Git's order of tree entries: by name, a folder's name compared as if it ended in `/`.
fn git_order(a: &[u8], a_tree: bool, b: &[u8], b_tree: bool) -> Ordering {
    let common = a.len().min(b.len());
    match a[..common].cmp(&b[..common]) {
        Ordering::Equal => {}
        other => return other,
    }
    let next = |name: &[u8], tree: bool| match name.get(common) {
        Some(byte) => Some(*byte),
        None if tree => Some(b'/'),
        None => None,
    };
    next(a, a_tree).cmp(&next(b, b_tree))
}

/// What building a commit's trees wrote: each tree on the changed paths and its size.
#[derive(Debug, Default)]
pub(super) struct Built {
    pub(super) trees: Vec<Oid>,
    pub(super) bytes: usize,
}

/// The parsed folders: the newest version of each folder written or read.
#[derive(Default)]
pub(super) struct Trees {
    folders: HashMap<Oid, Arc<Vec<Entry>>>,
    bytes: usize,
    /// Trees read from the object store so far (the cache's misses).
    reads: usize,
}

/// One change below a folder: the rest of its path and the new blob (`None`: delete).
type Edit<'p> = (&'p str, Option<Oid>);

impl Trees {
    /// Writes the tree of `base` with `edits` (path, new blob or `None` to delete) applied,
    /// into `odb`. Deleting a path `base` does not have is no change. Returns the new root
    /// tree and every tree written.
    pub(super) fn update(
        &mut self,
        odb: &Odb<'_>,
        base: Oid,
        edits: &[(&str, Option<Oid>)],
    ) -> Result<(Oid, Built), Outcome> {
        let mut built = Built::default();
        let edits: Vec<Edit<'_>> = edits.to_vec();
        let root = self.folder(odb, Some(base), &edits, &mut built, true)?;
        match root {
            Some(root) => Ok((root, built)),
            // The root is always written, even empty.
            None => Err(Outcome::Unusual),
        }
    }

    /// Applies `edits` to the folder `tree` (`None`: a new folder); writes it and returns its
    /// id, or `None` when it ends up empty (and is not the root).
    fn folder(
        &mut self,
        odb: &Odb<'_>,
        tree: Option<Oid>,
        edits: &[Edit<'_>],
        built: &mut Built,
        root: bool,
    ) -> Result<Option<Oid>, Outcome> {
        let mut entries: Vec<Entry> = match tree {
            Some(id) => self.read(odb, id)?.as_ref().clone(),
            None => Vec::new(),
        };
        // Files here, and the edits of each subfolder, in path order.
        let mut below: BTreeMap<&str, Vec<Edit<'_>>> = BTreeMap::new();
        for (path, blob) in edits {
            match path.split_once('/') {
                Some((sub, rest)) => below.entry(sub).or_default().push((rest, *blob)),
                None => set_file(&mut entries, path.as_bytes(), *blob)?,
            }
        }
        for (sub, edits) in below {
            let at = entries.iter().position(|e| &*e.name == sub.as_bytes());
            let current = match at {
                Some(i) if !entries[i].is_tree() => return Err(Outcome::Unusual),
                Some(i) => Some(entries[i].id),
                None => None,
            };
            let new = self.folder(odb, current, &edits, built, false)?;
            if let Some(i) = at {
                entries.remove(i);
            }
            if let Some(id) = new {
                insert(&mut entries, sub.as_bytes(), MODE_TREE, id);
            }
        }
        if entries.is_empty() && !root {
            return Ok(None);
        }
        let mut buf = Vec::with_capacity(entries.iter().map(|e| e.name.len() + 28).sum());
        for entry in &entries {
            buf.extend_from_slice(format!("{:o} ", entry.mode).as_bytes());
            buf.extend_from_slice(&entry.name);
            buf.push(0);
            buf.extend_from_slice(entry.id.as_bytes());
        }
        let id = odb.write(ObjectType::Tree, &buf).map_err(Outcome::Git)?;
        built.trees.push(id);
        built.bytes += buf.len();
        if let Some(old) = tree {
            // The version replaced is not read again by the next commit of a tick.
            if old != id {
                self.forget(old);
            }
        }
        self.keep(id, entries);
        Ok(Some(id))
    }

    /// The parsed entries of tree `id`, from the cache or read from `odb`.
    fn read(&mut self, odb: &Odb<'_>, id: Oid) -> Result<Arc<Vec<Entry>>, Outcome> {
        if let Some(found) = self.folders.get(&id) {
            return Ok(found.clone());
        }
        self.reads += 1;
        let object = odb.read(id).map_err(Outcome::Git)?;
        if object.kind() != ObjectType::Tree {
            return Err(Outcome::Unusual);
        }
        let entries = parse(object.data()).ok_or(Outcome::Unusual)?;
        Ok(self.keep(id, entries))
    }

    fn keep(&mut self, id: Oid, entries: Vec<Entry>) -> Arc<Vec<Entry>> {
        let size = size_of(&entries);
        if self.bytes + size > CACHE_BUDGET {
            self.folders.clear();
            self.bytes = 0;
        }
        let entries = Arc::new(entries);
        if let Some(old) = self.folders.insert(id, entries.clone()) {
            self.bytes -= size_of(&old);
        }
        self.bytes += size;
        entries
    }

    fn forget(&mut self, id: Oid) {
        if let Some(old) = self.folders.remove(&id) {
            self.bytes -= size_of(&old);
        }
    }

    /// How many folders are cached (for tests of the cache's bound).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.folders.len()
    }
}

/// Why [`Trees::update`] did not build the tree.
#[derive(Debug)]
pub(super) enum Outcome {
    /// A change the fast path leaves to libgit2's updater, which makes it or says why not.
    Unusual,
    /// Reading or writing an object failed.
    Git(git2::Error),
}

fn size_of(entries: &[Entry]) -> usize {
    entries
        .iter()
        .map(|e| e.name.len() + ENTRY_OVERHEAD)
        .sum::<usize>()
        + ENTRY_OVERHEAD
}

/// Writes (`Some`) or deletes (`None`) the file `name` among `entries`.
fn set_file(entries: &mut Vec<Entry>, name: &[u8], blob: Option<Oid>) -> Result<(), Outcome> {
    let at = entries.iter().position(|e| &*e.name == name);
    match (at, blob) {
        (Some(i), Some(blob)) => {
            // Only a file (or symlink) is replaced by a file; a folder or submodule is not.
            let mode = entries[i].mode & MODE_TYPE;
            if mode == MODE_TREE || mode == 0o160000 {
                return Err(Outcome::Unusual);
            }
            entries[i].mode = MODE_BLOB;
            entries[i].id = blob;
        }
        (None, Some(blob)) => insert(entries, name, MODE_BLOB, blob),
        (Some(i), None) => {
            entries.remove(i);
        }
        (None, None) => {}
    }
    Ok(())
}

/// Inserts an entry `name` (not yet among `entries`) in git's order.
fn insert(entries: &mut Vec<Entry>, name: &[u8], mode: u32, id: Oid) {
    let tree = mode & MODE_TYPE == MODE_TREE;
    let at = entries.partition_point(|e| git_order(&e.name, e.is_tree(), name, tree).is_lt());
    entries.insert(
        at,
        Entry {
            name: name.into(),
            mode,
            id,
        },
    );
}

/// The entries of a raw tree object, or `None` when it is malformed.
fn parse(mut data: &[u8]) -> Option<Vec<Entry>> {
    let mut entries = Vec::new();
    while !data.is_empty() {
        let space = data.iter().position(|b| *b == b' ')?;
        let mode = std::str::from_utf8(&data[..space]).ok()?;
        let mode = u32::from_str_radix(mode, 8).ok()?;
        data = &data[space + 1..];
        let nul = data.iter().position(|b| *b == 0)?;
        let name: Arc<[u8]> = data[..nul].into();
        data = &data[nul + 1..];
        let id = Oid::from_bytes(data.get(..20)?).ok()?;
        data = &data[20..];
        if name.is_empty() || mode > 0xffff {
            return None;
        }
        entries.push(Entry { name, mode, id });
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, git2::Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(dir.path()).unwrap();
        (dir, repo)
    }

    /// The tree libgit2's updater writes for the same edits (a deletion only of a path the
    /// base has, as `commit.rs` asks it).
    fn libgit2_update(repo: &git2::Repository, base: Oid, edits: &[(&str, Option<Oid>)]) -> Oid {
        let mut update = git2::build::TreeUpdateBuilder::new();
        let base = repo.find_tree(base).unwrap();
        for (path, blob) in edits {
            match blob {
                Some(blob) => update.upsert(*path, *blob, git2::FileMode::Blob),
                None if base.get_path(std::path::Path::new(path)).is_ok() => update.remove(*path),
                None => &mut update,
            };
        }
        update.create_updated(repo, &base).unwrap()
    }

    fn blob(repo: &git2::Repository, text: &str) -> Oid {
        repo.blob(text.as_bytes()).unwrap()
    }

    fn empty_tree(repo: &git2::Repository) -> Oid {
        repo.treebuilder(None).unwrap().write().unwrap()
    }

    #[test]
    fn trees_equal_what_libgit2s_updater_writes() {
        let (_dir, repo) = repo();
        let odb = repo.odb().unwrap();
        let mut trees = Trees::default();
        let mut base = empty_tree(&repo);
        // Names that sort differently as folders and as files (`a` + `/` vs `a-b`, `a.b`).
        let steps: Vec<Vec<(&str, Option<Oid>)>> = vec![
            vec![
                ("a/x", Some(blob(&repo, "1"))),
                ("a-b", Some(blob(&repo, "2"))),
                ("a.b/y", Some(blob(&repo, "3"))),
                ("a0", Some(blob(&repo, "4"))),
                ("z/q/r/s", Some(blob(&repo, "5"))),
            ],
            vec![
                ("a/x", Some(blob(&repo, "6"))),
                ("a/w", Some(blob(&repo, "7"))),
            ],
            vec![("z/q/r/s", None), ("a-b", None)],
            vec![("a.b/y", None), ("a/x", None), ("missing/file", None)],
            vec![("a/w", Some(blob(&repo, "8")))],
        ];
        for edits in steps {
            let expected = libgit2_update(&repo, base, &edits);
            let (got, _) = trees.update(&odb, base, &edits).unwrap();
            assert_eq!(got, expected, "edits {edits:?}");
            base = got;
        }
        // Emptied folders are gone, as libgit2 drops them.
        let tree = repo.find_tree(base).unwrap();
        let names: Vec<_> = tree.iter().map(|e| e.name().unwrap().to_string()).collect();
        assert_eq!(names, ["a", "a0"]);
    }

    #[test]
    fn a_file_where_a_folder_is_needed_is_left_to_libgit2() {
        let (_dir, repo) = repo();
        let odb = repo.odb().unwrap();
        let mut trees = Trees::default();
        let base = empty_tree(&repo);
        let (base, _) = trees
            .update(&odb, base, &[("a/x", Some(blob(&repo, "1")))])
            .unwrap();
        let through_file = trees.update(&odb, base, &[("a/x/y", Some(blob(&repo, "2")))]);
        assert!(matches!(through_file, Err(Outcome::Unusual)));
        let over_folder = trees.update(&odb, base, &[("a", Some(blob(&repo, "2")))]);
        assert!(matches!(over_folder, Err(Outcome::Unusual)));
    }

    #[test]
    fn the_cache_keeps_one_version_of_each_folder_a_chain_of_commits_rewrites() {
        let (_dir, repo) = repo();
        let odb = repo.odb().unwrap();
        let mut trees = Trees::default();
        let mut base = empty_tree(&repo);
        for i in 0..50 {
            let path = format!("clusters/ns0/app{i}/route.yaml");
            let edits = [(path.as_str(), Some(blob(&repo, &i.to_string())))];
            base = trees.update(&odb, base, &edits).unwrap().0;
        }
        // The root, `clusters`, `clusters/ns0` and the 50 `appN` folders (each written once).
        assert_eq!(trees.len(), 3 + 50);
    }

    #[test]
    fn a_chain_of_commits_reads_each_folder_from_the_object_store_once() {
        let (_dir, repo) = repo();
        let odb = repo.odb().unwrap();
        let mut base = {
            // A folder of 1,000 files, written by libgit2 so the cache has not seen it.
            let mut update = git2::build::TreeUpdateBuilder::new();
            for i in 0..1000 {
                update.upsert(
                    format!("clusters/ns0/app{i}.yaml"),
                    blob(&repo, &i.to_string()),
                    git2::FileMode::Blob,
                );
            }
            let empty = repo.find_tree(empty_tree(&repo)).unwrap();
            update.create_updated(&repo, &empty).unwrap()
        };
        let mut trees = Trees::default();
        for i in 0..100 {
            let path = format!("clusters/ns0/app{}.yaml", i * 7 % 1000);
            let edits = [(path.as_str(), Some(blob(&repo, &format!("v{i}"))))];
            let (next, built) = trees.update(&odb, base, &edits).unwrap();
            assert_eq!(built.trees.len(), 3, "root, clusters, clusters/ns0");
            base = next;
        }
        assert_eq!(
            trees.reads, 3,
            "the root, clusters and clusters/ns0, once each"
        );
    }
}
