//! A commit's files as audit reads them, from git objects alone: the regular files of its tree
//! (what a checkout would write; links and submodules are left out, as the readers refuse
//! links anyway), and the [`Snapshot`] the tick's walk would read from them.
//!
//! One [`TreeFiles`] follows audit from commit to commit: moving it to another tree applies
//! the tree diff, so it reads and parses only the files that changed, and a file's parse is
//! kept by blob id (a bounded cache) for when a blob comes back (an approval branch's parent,
//! then the main line again). Nothing is written to disk, and the repository is only read.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use git2::{FileMode, Oid, Repository};

use crate::gitops::objects::{git, GitError};
use crate::gitops::walked;
use crate::gitops::{tree_diff, Folders};
use crate::manifest::load::Existing;
use crate::manifest::load_incremental::KeptLoad;
use crate::manifest::model::CanaryId;
use crate::manifest::settings::Settings;
use crate::render::status_file;
use crate::yaml::snapshot::{walks_before, Contents, File, ReadError, Snapshot, MAX_FILE_BYTES};
use crate::yaml::snapshot_cache::Parses;

/// How many parsed files the blob cache keeps beyond those the snapshot holds.
const CACHE_FILES: usize = 1024;

/// The regular files of one tree, and its snapshot.
#[derive(Default)]
pub struct TreeFiles {
    /// The tree mirrored (`None`: the empty tree, before the root commit).
    tree: Option<Oid>,
    /// Every regular file, repo-relative with `/`, and its blob.
    files: BTreeMap<String, Oid>,
    snapshot: Snapshot,
    cache: BlobCache,
    /// The canaries as of the last [`TreeFiles::load`], and every path the moves since then
    /// changed (what the next load reads again or checks again).
    kept: KeptLoad,
    unloaded: BTreeSet<String>,
    /// Blobs this reader read and parsed itself (not taken from a holder of their parse).
    parsed: usize,
    /// Where parses are shared with other holders of the same blobs.
    parses: Parses,
    /// The folders the moves read, by tree id.
    folders: Folders,
}

impl TreeFiles {
    /// No tree yet; parses are shared through `parses` (a default `TreeFiles` shares with no
    /// one).
    pub fn new(parses: Parses) -> TreeFiles {
        TreeFiles {
            parses,
            ..TreeFiles::default()
        }
    }

    /// Where this reader shares its parses.
    pub fn parses(&self) -> &Parses {
        &self.parses
    }

    /// Moves to `tree` (`None`: empty), reading only what differs from the tree it was at.
    pub fn move_to(&mut self, repo: &Repository, tree: Option<Oid>) -> Result<(), GitError> {
        if self.tree == tree {
            return Ok(());
        }
        let find = |id: Option<Oid>| {
            id.map(|id| repo.find_tree(id).map_err(git("read a tree")))
                .transpose()
        };
        let (old, new) = (find(self.tree)?, find(tree)?);
        let differs = tree_diff(repo, &self.folders, old.as_ref(), new.as_ref())
            .map_err(git("compare two trees"))?;
        for changed in differs {
            let Ok(path) = std::str::from_utf8(&changed.path) else {
                continue;
            };
            if !self.unloaded.contains(path) {
                self.unloaded.insert(path.to_string());
            }
            if changed.old.is_some() {
                self.remove(path);
            }
            if let Some((id, mode)) = changed.new {
                let regular = [
                    FileMode::Blob,
                    FileMode::BlobExecutable,
                    FileMode::BlobGroupWritable,
                ]
                .iter()
                .any(|m| i32::from(*m) == mode);
                if regular {
                    self.add(repo, path, id)?;
                }
            }
        }
        self.tree = tree;
        Ok(())
    }

    fn remove(&mut self, path: &str) {
        if let Some(id) = self.files.remove(path) {
            if let Some(file) = self.snapshot.remove(path) {
                self.cache.keep(id, file.contents);
            }
        }
    }

    fn add(&mut self, repo: &Repository, path: &str, id: Oid) -> Result<(), GitError> {
        self.files.insert(path.to_string(), id);
        if walked(path) {
            let contents = match self.cache.take(id) {
                Some(contents) => contents,
                None => {
                    let mut failed = None;
                    let parsed = &mut self.parsed;
                    let contents =
                        self.parses
                            .parse(&id.to_string(), || match read_blob(repo, id) {
                                Ok(read) => {
                                    *parsed += usize::from(read.is_ok());
                                    read
                                }
                                Err(e) => {
                                    let message = e.to_string();
                                    failed = Some(e);
                                    Err(ReadError::Io(message))
                                }
                            });
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    contents
                }
            };
            let file = File {
                name: path.to_string(),
                contents,
            };
            self.snapshot.put(file, walks_before);
        }
        Ok(())
    }

    /// Loads the canaries of this tree with `settings` (as `manifest::load::load_in` would, with
    /// the status files of this tree deciding who owns a contested name or folder), reading
    /// and checking again only what the moves since the last load changed.
    pub fn load(&mut self, settings: &Settings) -> &KeptLoad {
        let changed = std::mem::take(&mut self.unloaded);
        let files = &self.files;
        let has_status = |id: &CanaryId| files.contains_key(&status_file::path_for(id));
        let existing = Existing {
            files: &self.snapshot,
            has_status: &has_status,
        };
        self.kept.refresh(settings, &existing, &changed);
        &self.kept
    }

    /// The canaries of the last [`TreeFiles::load`].
    pub fn loaded(&self) -> &KeptLoad {
        &self.kept
    }

    /// Forgets the parses of the files that left the tree in the moves so far (kept for when
    /// their blobs come back): a reader that follows one branch head, not a history, holds
    /// the files of one tree only.
    pub fn forget_removed(&mut self) {
        self.cache = BlobCache::default();
    }

    /// How many blobs this reader has read and parsed itself, rather than taking the parse
    /// from a holder (itself, for a blob under several names; the tick's snapshot): what a
    /// test counts, and the dashboard logs.
    pub fn parsed(&self) -> usize {
        self.parsed
    }

    /// What the tick's walk reads of this tree.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Whether `path` is a regular file.
    pub fn is_file(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    /// Whether `path` is a folder (a checkout makes one for any file below it).
    fn is_folder(&self, path: &str) -> bool {
        let prefix = format!("{path}/");
        self.files
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(p, _)| p.starts_with(&prefix))
    }

    /// `path` read as [`crate::yaml::snapshot::read_bounded`] reads a checked-out file;
    /// `None` when nothing is there.
    pub fn read(&self, repo: &Repository, path: &str) -> Option<Result<String, ReadError>> {
        match self.files.get(path) {
            Some(id) => {
                Some(read_blob(repo, *id).unwrap_or_else(|e| Err(ReadError::Io(e.to_string()))))
            }
            None if self.is_folder(path) => Some(Err(ReadError::NotAFile)),
            None => None,
        }
    }

    /// The names of what is inside the folder `path` (files and folders), sorted.
    pub fn list(&self, path: &str) -> Vec<String> {
        let prefix = format!("{path}/");
        let mut names: Vec<String> = self
            .files
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter_map(|(p, _)| p[prefix.len()..].split('/').next())
            .map(str::to_string)
            .collect();
        names.dedup();
        names
    }
}

/// A tree's files as the workload readers read files outside the walk (a primary in a hidden
/// output folder, a file named by a reference): from the blobs, never from a folder.
pub struct Outside<'a> {
    pub repo: &'a Repository,
    pub files: &'a TreeFiles,
}

impl crate::workload::Outside for Outside<'_> {
    fn is_file(&self, file: &str) -> bool {
        self.files.is_file(file)
    }

    fn read(&self, file: &str) -> Option<Result<String, ReadError>> {
        self.files.read(self.repo, file)
    }
}

/// A blob's text, refused as the readers refuse a file: over [`MAX_FILE_BYTES`] or not UTF-8.
/// The size is read from the header, so a large blob is never loaded.
fn read_blob(repo: &Repository, id: Oid) -> Result<Result<String, ReadError>, GitError> {
    let odb = repo.odb().map_err(git("open the object database"))?;
    let (size, _) = odb.read_header(id).map_err(git("read a file"))?;
    if size as u64 > MAX_FILE_BYTES {
        return Ok(Err(ReadError::TooLarge { bytes: size as u64 }));
    }
    let blob = repo.find_blob(id).map_err(git("read a file"))?;
    Ok(String::from_utf8(blob.content().to_vec()).map_err(|_| ReadError::NotUtf8))
}

/// Parsed files by blob id, the oldest dropped first past [`CACHE_FILES`].
#[derive(Default)]
struct BlobCache {
    parsed: HashMap<Oid, std::sync::Arc<Contents>>,
    order: VecDeque<Oid>,
}

impl BlobCache {
    fn keep(&mut self, id: Oid, contents: std::sync::Arc<Contents>) {
        self.parsed.insert(id, contents);
        self.order.push_back(id);
        while self.order.len() > CACHE_FILES {
            if let Some(old) = self.order.pop_front() {
                // An id taken and kept again is in `order` twice; its newer place keeps it.
                if !self.order.contains(&old) {
                    self.parsed.remove(&old);
                }
            }
        }
    }

    /// The parse of `id`, moved out (the snapshot holds it until it is kept again).
    fn take(&mut self, id: Oid) -> Option<std::sync::Arc<Contents>> {
        self.parsed.remove(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::gitops::tree_of;

    /// Each file's name and whether it parsed; each object's file, line, kind and name.
    type Seen = (Vec<(String, bool)>, Vec<(String, usize, String, String)>);

    /// What a snapshot holds, comparable, in order.
    fn seen(snapshot: &Snapshot) -> Seen {
        let files = snapshot
            .files()
            .iter()
            .map(|f| (f.name.clone(), matches!(*f.contents, Contents::Yaml { .. })))
            .collect();
        let objects = snapshot
            .objects()
            .map(|o| {
                (
                    o.file.to_string(),
                    o.line,
                    o.kind.to_string(),
                    o.name.to_string(),
                )
            })
            .collect();
        (files, objects)
    }

    /// Moving from tree to tree (and back, through the blob cache) gives the snapshot a
    /// checkout of each tree gives, file for file and object for object.
    #[test]
    fn a_snapshot_moved_by_tree_diffs_is_the_snapshot_of_a_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path().join("r.git")).unwrap();
        let cm = |name: &str| format!("kind: ConfigMap\nmetadata: {{name: {name}}}\n");
        let (one, two, bad) = (cm("one"), cm("two"), "a: [1,\n".to_string());
        let trees = [
            tree_of(
                &repo,
                &[
                    ("a.yaml", &one),
                    ("a/z.yaml", &two),
                    ("a-b/c.yaml", &one),
                    (".hidden/x.yaml", &one),
                    (".sluice/status/ns/n.yaml", "phase: Initialized\n"),
                    ("notes.txt", &one),
                    ("b.yml", &bad),
                ],
            ),
            tree_of(
                &repo,
                &[
                    ("a.yaml", &two),
                    ("a/y.yaml", &one),
                    ("a-b/c.yaml", &one),
                    ("a-b/d.yaml", &two),
                    (".sluice/status/ns/n.yaml", "phase: Progressing\n"),
                    ("b.yml", &one),
                    ("c.yaml", &bad),
                ],
            ),
            tree_of(&repo, &[("only.yaml", &one)]),
        ];
        let mut files = TreeFiles::default();
        for tree in [trees[0], trees[1], trees[0], trees[2], trees[1]] {
            files.move_to(&repo, Some(tree)).unwrap();
            let checkout = tempfile::tempdir().unwrap();
            let t = repo.find_tree(tree).unwrap();
            crate::gitops::objects::write_tree(&repo, &t, checkout.path()).unwrap();
            let read = Snapshot::read(checkout.path());
            assert_eq!(seen(files.snapshot()), seen(&read), "tree {tree}");
            assert_eq!(
                files.snapshot().find("ConfigMap", "one").count(),
                read.find("ConfigMap", "one").count()
            );
        }
        assert_eq!(files.list(".sluice/status"), ["ns"]);
        assert!(files.is_file(".sluice/status/ns/n.yaml"));
        assert_eq!(
            files.read(&repo, ".sluice/status"),
            Some(Err(ReadError::NotAFile))
        );
        assert_eq!(files.read(&repo, "nothing.yaml"), None);
        files.move_to(&repo, None).unwrap();
        assert!(files.snapshot().files().is_empty());
    }

    /// After a move that changes one spec of many, loading the canaries reads that one file
    /// again, and gives what `load_in` gives on the whole tree.
    #[test]
    fn a_load_after_a_one_spec_change_reads_that_spec_only() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path().join("r.git")).unwrap();
        let spec = |n: usize, revision: &str| {
            format!(
                "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: c{n}, namespace: ns}}\nspec:\n  routeOnly: {{services: [c{n}-a, c{n}-b], revision: \"{revision}\"}}\n  output: deploy/c{n}\n  service: {{port: 80}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1m, stepWeights: [5, 25, 50]}}\n"
            )
        };
        let tree = |changed: &str| {
            let texts: Vec<(String, String)> = (0..40)
                .map(|n| {
                    let revision = if n == 7 { changed } else { "r1" };
                    (format!("specs/c{n}.yaml"), spec(n, revision))
                })
                .collect();
            let files: Vec<(&str, &str)> = texts
                .iter()
                .map(|(p, t)| (p.as_str(), t.as_str()))
                .collect();
            tree_of(&repo, &files)
        };
        let (before, after) = (tree("r1"), tree("r2"));
        let settings = Settings::default();
        let mut files = TreeFiles::default();
        files.move_to(&repo, Some(before)).unwrap();
        assert_eq!(files.load(&settings).reads(), 40);
        files.move_to(&repo, Some(after)).unwrap();
        let kept = files.load(&settings);
        assert_eq!(kept.reads(), 41, "one changed spec, one file read again");
        let whole = crate::manifest::load::load(files.snapshot(), &settings);
        let ids = |c: &crate::manifest::model::Canary| (c.id.to_string(), c.file.clone());
        let kept: Vec<_> = files.loaded().canaries().map(ids).collect();
        assert_eq!(kept, whole.canaries.iter().map(ids).collect::<Vec<_>>());
        let c7 = files.loaded().canary("ns/c7").unwrap();
        assert!(
            matches!(&c7.target, crate::core::model::Target::RouteOnly { revision, .. } if revision == "r2")
        );
    }

    #[test]
    fn the_walk_order_is_folder_by_folder() {
        let mut names = vec!["b.yml", "a.yaml", "a-b/c.yaml", "a/z.yaml", ".hidden.yaml"];
        names.sort_by(|a, b| {
            if walks_before(a, b) {
                std::cmp::Ordering::Less
            } else if walks_before(b, a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        assert_eq!(
            names,
            [".hidden.yaml", "a/z.yaml", "a-b/c.yaml", "a.yaml", "b.yml"]
        );
        assert!(walked(".hidden.yaml") && walked("apps/a.yml"));
        assert!(!walked(".sluice/status/a/b.yaml") && !walked("apps/.cache/x.yaml"));
        assert!(!walked("notes.txt"));
    }
}
