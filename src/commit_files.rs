//! The files of a commit, read from git objects alone, as a checkout of it would give them:
//! the one reader of a commit's files for the tick, drift's verifier, audit, approvals,
//! `sluice operate` and the dashboard. The clone has no work tree.
//!
//! A [`CommitFiles`] holds every entry of one tree (regular files, links, submodules) and
//! the [`Snapshot`] the tick's walk reads: the `.yaml`/`.yml` files outside hidden folders,
//! each parsed, a symbolic link among them listed as refused ([`ReadError::Symlink`]) and
//! never read. Moving it to another tree applies the tree diff (through the [`Folders`] it
//! holds), so it reads and parses only the files that changed; a file whose read failed is
//! read again at the next move, as the reason may pass without a change in git. A parse is
//! taken by blob id from anyone in the runtime who holds it ([`Parses`]), and the parses of
//! the files that left the tree are kept, within [`KEPT_PARSE_BYTES`], for when their blobs
//! come back (an approval branch's parent, then the main line again).
//!
//! Single paths are answered as a checkout answers them ([`At`]): a link is refused and so
//! is a path through one, a folder is not a file, and a file is read up to
//! [`MAX_FILE_BYTES`] and must be UTF-8. Nothing is written to disk, and the repository is
//! only read; nothing here decides.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

use git2::{Oid, Repository};

use crate::core::status::Status;
use crate::gitops::objects::{git, GitError};
use crate::gitops::{tree_diff, Folders, PathEntry};
use crate::manifest::load::Existing;
use crate::manifest::load_incremental::KeptLoad;
use crate::manifest::model::CanaryId;
use crate::manifest::output_folder::{self, Kind};
use crate::manifest::settings::{Settings, SETTINGS_PATH};
use crate::render::status_file::{self, SpecRecord};
use crate::yaml::error::SpecError;
use crate::yaml::parses::{parse, Parses};
use crate::yaml::snapshot::{walks_before, Contents, File, ReadError, Snapshot, MAX_FILE_BYTES};

/// The text (in bytes) of the parses kept for files that left the tree: 16 MiB. A parse
/// holds a few times its text (the line-marked tree), so this bounds the kept parses to
/// tens of MiB whatever the files' sizes (a count of files did not: 1,024 files at the
/// 4 MiB file limit are 4 GiB). Audit's walk needs far less: what one approval branch
/// changed, until the main line takes its parent's blobs back.
pub const KEPT_PARSE_BYTES: usize = 16 * 1024 * 1024;

/// Reads a file of the walk, given its name and blob (the tick counts reads through one).
pub type ReadFile<'a> = &'a mut dyn FnMut(&str, Oid) -> Result<String, ReadError>;

/// What an entry of the tree is, by its git mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    File,
    Link,
    /// A submodule (a commit), or any other mode.
    Other,
}

impl Mode {
    fn of(mode: i32) -> Mode {
        match mode {
            0o100644 | 0o100755 | 0o100664 => Mode::File,
            0o120000 => Mode::Link,
            _ => Mode::Other,
        }
    }
}

/// The files of one commit's tree, and its snapshot.
#[derive(Default)]
pub struct CommitFiles {
    /// The tree mirrored (`None`: the empty tree, before the root commit).
    tree: Option<Oid>,
    /// Every entry but folders, repo-relative with `/`, with its blob (or commit) id.
    entries: BTreeMap<String, (Oid, Mode)>,
    snapshot: Arc<Snapshot>,
    /// Files of the walk whose read failed (links aside): read again at the next move.
    unreadable: BTreeSet<String>,
    /// Parses of the files that left the tree, for when their blobs come back.
    kept: KeptParses,
    /// The canaries as of the last [`CommitFiles::load`], and every path the moves since
    /// then changed (what the next load reads again or checks again).
    load: KeptLoad,
    unloaded: BTreeSet<String>,
    /// Blobs this reader read and parsed itself (not taken from a holder of their parse).
    parsed: usize,
    /// Where parses are shared with other holders of the same blobs (the runtime's).
    parses: Parses,
    /// The folders the moves read, by tree id (a clone's, or this reader's own).
    folders: Folders,
}

impl CommitFiles {
    /// No tree yet; parses are shared through `parses`, folders read through `folders`.
    pub fn new(parses: Parses, folders: Folders) -> CommitFiles {
        CommitFiles {
            parses,
            folders,
            ..CommitFiles::default()
        }
    }

    /// The same sharing, no tree: what a reader starts again from.
    pub fn emptied(&self) -> CommitFiles {
        CommitFiles::new(self.parses.clone(), self.folders.clone())
    }

    /// The tree mirrored (`None`: none, or the empty tree).
    pub fn tree(&self) -> Option<Oid> {
        self.tree
    }

    /// Whether a move to the tree it is at would read anything (a read failed before).
    pub fn has_unreadable(&self) -> bool {
        !self.unreadable.is_empty()
    }

    /// Moves to `tree` (`None`: empty), reading only what differs from the tree it was at,
    /// and every file whose read failed before, blobs read from `repo`.
    pub fn move_to(&mut self, repo: &Repository, tree: Option<Oid>) -> Result<(), GitError> {
        self.move_reading(repo, tree, &mut |_, id| read_text(repo, id))
    }

    /// [`move_to`](Self::move_to), files read through `read`.
    pub fn move_reading(
        &mut self,
        repo: &Repository,
        tree: Option<Oid>,
        read: ReadFile<'_>,
    ) -> Result<(), GitError> {
        let again = std::mem::take(&mut self.unreadable);
        if self.tree == tree && again.is_empty() {
            return Ok(());
        }
        let mut touched = BTreeSet::new();
        if self.tree != tree {
            let find = |id: Option<Oid>| {
                id.map(|id| repo.find_tree(id).map_err(git("read a tree")))
                    .transpose()
            };
            let (old, new) = (find(self.tree)?, find(tree)?);
            let differs = tree_diff(repo, &self.folders, old.as_ref(), new.as_ref())
                .map_err(git("compare two trees"))?;
            // The snapshot is this reader's alone once the holders of the last one let go;
            // one still held is copied first.
            let snapshot = Arc::make_mut(&mut self.snapshot);
            for changed in differs {
                let Ok(path) = std::str::from_utf8(&changed.path) else {
                    continue;
                };
                self.unloaded.insert(path.to_string());
                touched.insert(path.to_string());
                if let Some((id, _)) = self.entries.remove(path) {
                    if let Some(file) = snapshot.remove(path) {
                        if !failed(&file.contents) {
                            self.kept.keep(id, file.contents);
                        }
                    }
                }
                if let Some((id, mode)) = changed.new {
                    let mode = Mode::of(mode);
                    self.entries.insert(path.to_string(), (id, mode));
                    if !walked(path) {
                        continue;
                    }
                    let contents = match mode {
                        Mode::Link => Arc::new(Contents::Unreadable(ReadError::Symlink)),
                        Mode::File => match self.kept.take(id) {
                            Some(contents) => contents,
                            None => {
                                let parsed = &mut self.parsed;
                                self.parses.parse(&id.to_string(), || {
                                    let text = read(path, id);
                                    *parsed += usize::from(text.is_ok());
                                    text
                                })
                            }
                        },
                        Mode::Other => continue,
                    };
                    put(snapshot, &mut self.unreadable, path, contents);
                }
            }
            self.tree = tree;
        }
        let snapshot = Arc::make_mut(&mut self.snapshot);
        for name in again.into_iter().filter(|n| !touched.contains(n)) {
            let Some(&(id, _)) = self.entries.get(&name) else {
                continue;
            };
            self.unloaded.insert(name.clone());
            let contents = Arc::new(match read(&name, id) {
                Ok(text) => parse(text),
                Err(e) => Contents::Unreadable(e),
            });
            put(snapshot, &mut self.unreadable, &name, contents);
        }
        Ok(())
    }

    /// Loads the canaries of this tree with `settings` (as `manifest::load::load_in` would, with
    /// the status files of this tree deciding who owns a contested name or folder), reading
    /// and checking again only what the moves since the last load changed.
    pub fn load(&mut self, settings: &Settings) -> &KeptLoad {
        let changed = std::mem::take(&mut self.unloaded);
        let entries = &self.entries;
        let has_status = |id: &CanaryId| entries.contains_key(&status_file::path_for(id));
        let existing = Existing {
            files: &self.snapshot,
            has_status: &has_status,
        };
        self.load.refresh(settings, &existing, &changed);
        &self.load
    }

    /// The canaries of the last [`CommitFiles::load`].
    pub fn loaded(&self) -> &KeptLoad {
        &self.load
    }

    /// Forgets the parses of the files that left the tree in the moves so far: a reader that
    /// follows one branch head, not a history, holds the files of one tree only.
    pub fn forget_removed(&mut self) {
        self.kept = KeptParses::default();
    }

    /// How many blobs this reader has read and parsed itself, rather than taking the parse
    /// from a holder (itself, for a blob under several names; the tick's snapshot): what a
    /// test counts, and the dashboard logs.
    pub fn parsed(&self) -> usize {
        self.parsed
    }

    /// What the tick's walk reads of this tree.
    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    /// What `path` (repo-relative, `/`-separated; `""`: the root) is, as a checkout shows it.
    pub fn entry(&self, path: &str) -> PathEntry {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() {
            return PathEntry::Folder;
        }
        // A folder on the way that is a link, a file or a submodule.
        for i in 1..parts.len() {
            let above = parts[..i].join("/");
            match self.entries.get(&above) {
                Some((_, Mode::Link)) => return PathEntry::ThroughLink(above),
                Some(_) => return PathEntry::Other,
                None => {}
            }
        }
        let path = parts.join("/");
        match self.entries.get(&path) {
            Some((id, Mode::File)) => PathEntry::File(*id),
            Some((_, Mode::Link)) => PathEntry::Link,
            Some((_, Mode::Other)) => PathEntry::Other,
            None if self.below(&path).next().is_some() => PathEntry::Folder,
            None => PathEntry::Missing,
        }
    }

    /// The entries below the folder `path` (`""`: the root), every depth.
    fn below<'s>(&'s self, path: &str) -> impl Iterator<Item = (&'s str, &'s (Oid, Mode))> + 's {
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}/")
        };
        let skip = prefix.len();
        self.entries
            .range(prefix.clone()..)
            .take_while(move |(p, _)| p.starts_with(&prefix))
            .map(move |(p, e)| (&p[skip.min(p.len())..], e))
    }

    /// The entries of the folder `folder` (`""`: the root) by name, each with what it is;
    /// empty when there is no such folder.
    pub fn list(&self, folder: &str) -> Vec<(String, PathEntry)> {
        if self.entry(folder) != PathEntry::Folder {
            return Vec::new();
        }
        let mut out: Vec<(String, PathEntry)> = Vec::new();
        for (rest, (id, mode)) in self.below(folder) {
            let (name, deeper) = match rest.split_once('/') {
                Some((name, _)) => (name, true),
                None => (rest, false),
            };
            if out.last().is_some_and(|(last, _)| last == name) {
                continue;
            }
            let entry = match (deeper, mode) {
                (true, _) => PathEntry::Folder,
                (false, Mode::File) => PathEntry::File(*id),
                (false, Mode::Link) => PathEntry::Link,
                (false, Mode::Other) => PathEntry::Other,
            };
            out.push((name.to_string(), entry));
        }
        out
    }

    /// These files with `repo` to read blobs from, and `root` the folder readers that take
    /// one are handed (`root.join(file)`).
    pub fn at<'a>(&'a self, repo: &'a Repository, root: &'a Path) -> At<'a> {
        At {
            repo,
            root,
            files: self,
        }
    }
}

/// Whether the walk reads `path` (repo-relative, `/`-separated): a `.yaml` or `.yml` file
/// outside hidden folders, as `yaml::snapshot`'s walk of a work tree reads.
pub fn walked(path: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    let Some(name) = parts.pop() else {
        return false;
    };
    (name.ends_with(".yaml") || name.ends_with(".yml")) && !parts.iter().any(|p| p.starts_with('.'))
}

/// Puts a file in `snapshot` in the walk's order, noting in `unreadable` when its read failed.
fn put(
    snapshot: &mut Snapshot,
    unreadable: &mut BTreeSet<String>,
    name: &str,
    contents: Arc<Contents>,
) {
    if failed(&contents) {
        unreadable.insert(name.to_string());
    }
    let name = name.to_string();
    snapshot.put(File { name, contents }, walks_before);
}

/// A read that failed for a reason that may pass (a link is refused for good).
fn failed(contents: &Contents) -> bool {
    matches!(contents, Contents::Unreadable(e) if !matches!(e, ReadError::Symlink))
}

/// A blob's text, refused as the readers refuse a file: over [`MAX_FILE_BYTES`] or not
/// UTF-8. The size is read from the header, so a large blob is never loaded.
pub fn read_text(repo: &Repository, id: Oid) -> Result<String, ReadError> {
    let io = |e: git2::Error| ReadError::Io(format!("read a file: {}", e.message()));
    let odb = repo.odb().map_err(io)?;
    let (size, _) = odb.read_header(id).map_err(io)?;
    if size as u64 > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge { bytes: size as u64 });
    }
    let blob = repo.find_blob(id).map_err(io)?;
    String::from_utf8(blob.content().to_vec()).map_err(|_| ReadError::NotUtf8)
}

/// A [`CommitFiles`] with the repository its blobs are read from: single paths, read as a
/// checkout reads them.
#[derive(Clone, Copy)]
pub struct At<'a> {
    pub repo: &'a Repository,
    /// The folder handed to readers that take one (`root.join(file)`).
    pub root: &'a Path,
    pub files: &'a CommitFiles,
}

impl At<'_> {
    /// Whether anything is at `file`: a file, a folder or a link (even one pointing nowhere),
    /// as `symlink_metadata` tells on disk.
    pub fn exists(&self, file: &str) -> bool {
        self.files.entry(file) != PathEntry::Missing
    }

    /// The text of `file` (repo-relative); `None` when nothing is there.
    pub fn read(&self, file: &str) -> Option<Result<String, ReadError>> {
        Some(match self.files.entry(file) {
            PathEntry::Missing => return None,
            PathEntry::File(id) => read_text(self.repo, id),
            PathEntry::Link => Err(ReadError::Symlink),
            PathEntry::ThroughLink(link) => Err(ReadError::SymlinkFolder { link }),
            PathEntry::Folder | PathEntry::Other => Err(ReadError::NotAFile),
        })
    }

    /// The text of `path`, a path below [`At::root`] (`root.join(file)`), as
    /// [`read_bounded`](crate::yaml::snapshot::read_bounded) reads a checked-out file.
    pub fn read_path(&self, path: &Path) -> Result<String, ReadError> {
        let file = self.relative(path)?;
        self.read(&file).unwrap_or_else(|| {
            let tree = self.files.tree.map(|t| t.to_string()).unwrap_or_default();
            Err(ReadError::Io(format!(
                "{file}: no such file in tree {tree}"
            )))
        })
    }

    /// `path` below the root, repo-relative with `/`.
    fn relative(&self, path: &Path) -> Result<String, ReadError> {
        let outside = || {
            ReadError::Io(format!(
                "{} is not a plain path inside the repo {}",
                path.display(),
                self.root.display()
            ))
        };
        let relative = path.strip_prefix(self.root).map_err(|_| outside())?;
        let mut parts = Vec::new();
        for part in relative.components() {
            let std::path::Component::Normal(part) = part else {
                return Err(outside());
            };
            parts.push(part.to_str().ok_or_else(outside)?);
        }
        Ok(parts.join("/"))
    }

    /// The repo settings (`.sluice/config.yaml`; absent: defaults), as
    /// [`settings_in`](crate::manifest::load::settings_in) reads them from a folder.
    pub fn settings(&self) -> (Settings, Vec<SpecError>) {
        match self.read(SETTINGS_PATH) {
            None => (Settings::default(), Vec::new()),
            Some(read) => crate::manifest::load::settings_from(read),
        }
    }

    /// A canary's status and spec record; `None` when it has no status file.
    pub fn status(&self, id: &CanaryId) -> Result<Option<(Status, Option<SpecRecord>)>, String> {
        self.read(&status_file::path_for(id))
            .map(status_file::from_read)
            .transpose()
    }
}

impl crate::workload::Outside for At<'_> {
    fn is_file(&self, file: &str) -> bool {
        matches!(self.files.entry(file), PathEntry::File(_))
    }

    fn read(&self, file: &str) -> Option<Result<String, ReadError>> {
        At::read(self, file)
    }
}

impl output_folder::Folders for At<'_> {
    fn kind(&self, path: &str) -> Kind {
        match self.files.entry(path) {
            PathEntry::Missing => Kind::Missing,
            PathEntry::Folder => Kind::Folder,
            PathEntry::Link | PathEntry::ThroughLink(_) => Kind::Link,
            PathEntry::File(_) | PathEntry::Other => Kind::File,
        }
    }

    fn entries(&self, path: &str) -> Vec<(String, bool)> {
        self.files
            .list(path)
            .into_iter()
            .map(|(name, entry)| (name, entry == PathEntry::Folder))
            .collect()
    }
}

/// Parses by blob id, the oldest dropped first once their text passes [`KEPT_PARSE_BYTES`].
#[derive(Default)]
struct KeptParses {
    parsed: HashMap<Oid, (Arc<Contents>, usize, u64)>,
    /// Ids in the order kept, each with the turn it was kept at (an id taken and kept again
    /// is here twice; only its newer turn counts).
    order: VecDeque<(Oid, u64)>,
    bytes: usize,
    turn: u64,
}

/// The text a parse was made from, in bytes (0 for a file that could not be read).
fn text_bytes(contents: &Contents) -> usize {
    match contents {
        Contents::Yaml { text, .. } | Contents::Invalid { text, .. } => text.len(),
        Contents::Unreadable(_) => 0,
    }
}

impl KeptParses {
    fn keep(&mut self, id: Oid, contents: Arc<Contents>) {
        self.take(id);
        let bytes = text_bytes(&contents);
        self.turn += 1;
        self.parsed.insert(id, (contents, bytes, self.turn));
        self.order.push_back((id, self.turn));
        self.bytes += bytes;
        while self.bytes > KEPT_PARSE_BYTES {
            let Some((old, turn)) = self.order.pop_front() else {
                break;
            };
            if self.parsed.get(&old).is_some_and(|(_, _, t)| *t == turn) {
                self.take(old);
            }
        }
        // Ids taken leave their turn behind: drop them once they outnumber the kept ones.
        if self.order.len() > 2 * self.parsed.len() + 64 {
            let parsed = &self.parsed;
            self.order
                .retain(|(id, turn)| parsed.get(id).is_some_and(|(_, _, t)| t == turn));
        }
    }

    /// The parse of `id`, moved out (the snapshot holds it until it is kept again).
    fn take(&mut self, id: Oid) -> Option<Arc<Contents>> {
        let (contents, bytes, _) = self.parsed.remove(&id)?;
        self.bytes -= bytes;
        Some(contents)
    }
}

#[cfg(test)]
mod tests;
