//! Whether a commit's output folder is what sluice renders: the drift check's proof that a
//! commit is sluice's. A trailer (`Sluice-Canary`, a copied `Sluice-Replay`) is a claim anyone
//! who can push may write; this is the check.
//!
//! A canary's output folder at a commit is sluice's for a status when it holds exactly the
//! files sluice renders for that status (no file more, none fewer, byte for byte), drawn as
//! the tick drew them: the canary spec, the repo settings, the sources and the primary kept in
//! the folder are read from the commit the tick had read (the commit's first parent, its
//! *base*), read from its tree objects (never written out) by the same readers and renderers the
//! tick uses. Nothing here is a copy of the render: it asks [`crate::remake`] (the one replay
//! of a commit) for what sluice writes for the core's `redrawn` decision of the status.
//!
//! Under `signing.required` the content is not enough: [`Verifier::unsigned`] judges a commit
//! by the signing policy in force at its first parent, with audit's own code
//! ([`crate::signatures::policy::Policies`]), so sluice's commits are the ones signed with its key.
//!
//! Cost: one base is held at a time ([`CommitFiles`], its canaries loaded as `audit` loads them)
//! and moved from base to base by tree diffs, so going to the next base reads and checks only
//! the files the two commits differ in: the bases of one tick are neighbours in the history
//! (the last tick's commits, one per canary under `commits: perCanary`), and a tick's cost
//! follows what they changed, not the repo's size times the number of bases (holding every
//! base read in full cost a 1,000-canary repo gigabytes on the first tick after a perCanary
//! tick). Each verdict (rendered or signed) is kept for the life of the runtime (a memo keyed
//! by commit ids, in the runtime's [`Memory`]), so a tick renders or verifies again only commits no tick has seen before.
//! The commits sluice made itself are sluice's without a render ([`made`]; kept in the clone
//! for later processes, `made_file.rs`). Reads git objects only; writes nothing to the
//! repository, and to the disk only that record.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::{ObjectType, Oid, Repository, TreeWalkMode, TreeWalkResult};
use tracing::{debug, warn};

use crate::commit_files::CommitFiles;
use crate::gitops::objects::{self as tree, GitError};
use crate::gitops::Folders;
use crate::manifest::model::Canary;
use crate::manifest::settings::Settings;
use crate::remake;
use crate::render::status_file;
use crate::signatures::policy::{Outside, Policies};
use crate::workload;
use crate::yaml::parses::Parses;

use super::made_file::{self, Made};
use super::Memory;

/// The folder handed to the renderers that take one: no folder can be below `/dev/null`, so a
/// read that went to the disk instead of the base's tree would find nothing.
const NO_FOLDER: &str = "/dev/null/sluice-drift";

/// Verdicts kept at most; past it the memo starts again empty.
const KEEP: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot open the clone at {root} to read a commit's files: {message}")]
    Open { root: String, message: String },
}

/// What the verifiers of one runtime keep (in its [`Memory`]): the verdicts, the record of
/// sluice's own commits read from each clone, and the base the last verifier held.
pub(super) struct Kept {
    verified: Verified,
    /// The git dirs whose record of sluice's own commits is in `verified`.
    read_made: Mutex<HashSet<PathBuf>>,
    newest: Mutex<Newest>,
    /// The base the last verifier held, by the root of its clone: a daemon's next tick moves
    /// it to its own bases by tree diffs instead of reading a base in full (and dropping it)
    /// every tick. One base of one clone: the memory of one snapshot.
    last_base: Mutex<Option<(PathBuf, Base)>>,
    /// Where a new base shares its parses with the tick's snapshot.
    parses: Parses,
}

impl Kept {
    pub(super) fn new(parses: Parses) -> Kept {
        Kept {
            verified: Verified::default(),
            read_made: Mutex::default(),
            newest: Mutex::default(),
            last_base: Mutex::new(None),
            parses,
        }
    }

    fn note_newest(&self, git_dir: &Path, made: &[Made]) {
        if let Ok(mut newest) = self.newest.lock() {
            let clone = newest.entry(git_dir.to_path_buf()).or_default();
            for m in made {
                clone.insert(m.canary.clone(), m.commit);
            }
        }
    }

    /// Takes the record of sluice's own commits in the clone whose git dir is `git_dir` into
    /// the verdicts, once per runtime.
    fn read_made(&self, git_dir: &Path) {
        let first = self
            .read_made
            .lock()
            .is_ok_and(|mut read| read.insert(git_dir.to_path_buf()));
        if !first {
            return;
        }
        match made_file::read(git_dir) {
            Ok(made) => {
                for m in &made {
                    self.verified.put(Key::of(m), Vec::new());
                }
                self.note_newest(git_dir, &made);
            }
            Err(e) => {
                warn!(error = %e, path = %made_file::path(git_dir).display(), "Cannot read the record of sluice's own commits; rendering them again");
            }
        }
    }
}

/// What was verified, for the life of the runtime. A verdict depends on nothing but git
/// objects, named by their content hashes, so it never goes stale and holds for any clone:
/// a memo, shared by every tick (a daemon's, or the tests' many worlds in one runtime).
#[derive(Debug, Default)]
struct Verified {
    seen: Mutex<HashMap<Key, Vec<String>>>,
    /// By commit: why it is not signed as the policy at its first parent requires (`None`:
    /// it is, or nothing is required).
    signed: Mutex<HashMap<Oid, Option<String>>>,
    /// By commit: whether the policy in force there requires its children signed.
    requires: Mutex<HashMap<Oid, bool>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    canary: String,
    /// The commit whose output folder is judged.
    files: Oid,
    /// The commit it was drawn from.
    base: Oid,
    /// The status it is judged against (the blob id of its text).
    status: Oid,
}

/// By clone (its git dir): the newest commit sluice made there for each canary.
type Newest = HashMap<PathBuf, HashMap<String, Oid>>;

impl Key {
    fn of(made: &Made) -> Key {
        Key {
            canary: made.canary.clone(),
            files: made.commit,
            base: made.parent,
            status: made.status,
        }
    }
}

/// Notes commits sluice just made in the clone whose git dir is `git_dir`, each for one
/// canary's decision: sluice's, with nothing differing, for the runtime whose drift memory
/// is `memory` and (through the clone's record) for the next process.
pub fn made(memory: &Memory, git_dir: &Path, made: &[Made]) {
    let kept = &memory.verified;
    for m in made {
        kept.verified.put(Key::of(m), Vec::new());
    }
    kept.note_newest(git_dir, made);
    if let Err(e) = made_file::append(git_dir, made) {
        warn!(error = %e, path = %made_file::path(git_dir).display(), "Cannot keep the record of sluice's own commits; a later process renders them again");
    }
}

impl Verified {
    fn get(&self, key: &Key) -> Option<Vec<String>> {
        kept(&self.seen, key)
    }

    fn put(&self, key: Key, verdict: Vec<String>) {
        keep(&self.seen, key, verdict);
    }
}

fn kept<K: Eq + std::hash::Hash, V: Clone>(memo: &Mutex<HashMap<K, V>>, key: &K) -> Option<V> {
    memo.lock().ok().and_then(|seen| seen.get(key).cloned())
}

fn keep<K: Eq + std::hash::Hash, V>(memo: &Mutex<HashMap<K, V>>, key: K, verdict: V) {
    if let Ok(mut seen) = memo.lock() {
        if seen.len() >= KEEP {
            seen.clear();
        }
        seen.insert(key, verdict);
    }
}

impl Drop for Verifier {
    fn drop(&mut self) {
        debug!(
            rendered = self.rendered,
            "Drift: commits rendered to verify them"
        );
        if self.base.commit.is_none() {
            return;
        }
        let empty = Base::new(self.kept().parses.clone());
        let base = std::mem::replace(&mut self.base, empty);
        if let Ok(mut last) = self.kept().last_base.lock() {
            *last = Some((self.root.clone(), base));
        }
    }
}

/// One tick's verifier: the clone opened once, and the base last read.
pub struct Verifier {
    root: PathBuf,
    memory: Arc<Memory>,
    git: Option<Repository>,
    base: Base,
    /// Commits rendered to verify them (the log says how many, per tick).
    rendered: usize,
}

/// A commit read from its tree objects as the tick reads its clone: its files, and whether
/// its settings load (its canaries are loaded only then: no tick renders otherwise).
struct Base {
    /// The commit read (`None`: none yet).
    commit: Option<Oid>,
    files: CommitFiles,
    settings: Option<Settings>,
}

impl Base {
    /// No commit read yet; its files share their parses through `parses`.
    fn new(parses: Parses) -> Base {
        Base {
            commit: None,
            files: CommitFiles::new(parses, Folders::default()),
            settings: None,
        }
    }

    /// Moves to `commit`, reading only what differs from the commit it was at.
    fn move_to(
        &mut self,
        git: &Repository,
        kept: &Folders,
        commit: Oid,
    ) -> Result<(), VerifyError> {
        if self.commit == Some(commit) {
            return Ok(());
        }
        self.commit = None;
        let tree = tree::commit_tree(git, kept, commit)?.id();
        if self.files.move_to(git, Some(tree)).is_err() {
            // A move cut short leaves the files between two trees, and a base kept from an
            // earlier tick may name a tree this clone no longer has (cloned again): start
            // again from none.
            self.files = self.files.emptied();
            self.files.move_to(git, Some(tree))?;
        }
        // Absent means defaults, as for a checked-out repo.
        let (settings, problems) = self.files.at(git, Path::new("")).settings();
        self.settings = problems.is_empty().then_some(settings);
        if let Some(settings) = &self.settings {
            self.files.load(settings);
        }
        self.commit = Some(commit);
        Ok(())
    }

    /// `id`'s canary at this base, when its settings load and it loads.
    fn canary(&self, id: &str) -> Option<&Canary> {
        self.settings.as_ref()?;
        self.files.loaded().canary(id)
    }

    /// The output folders of this base's canaries.
    fn outputs(&self) -> Vec<&str> {
        if self.settings.is_none() {
            return Vec::new();
        }
        self.files
            .loaded()
            .canaries()
            .map(|c| c.output.as_str())
            .collect()
    }
}

impl Verifier {
    /// A verifier of the clone at `root`, holding the base the last verifier of that clone
    /// held in `memory` (so the first base of a tick costs what changed since the last tick's
    /// bases).
    pub fn new(root: &Path, memory: &Arc<Memory>) -> Verifier {
        let kept = &memory.verified;
        let last = kept.last_base.lock().ok().and_then(|mut last| last.take());
        let base = match last {
            Some((at, base)) if at == root => base,
            _ => Base::new(kept.parses.clone()),
        };
        Verifier {
            root: root.to_path_buf(),
            memory: Arc::clone(memory),
            git: None,
            base,
            rendered: 0,
        }
    }

    /// How many files the bases read so far were read and parsed as specs (what a test
    /// counts: moving to a neighbouring base reads what the two differ in).
    pub fn spec_reads(&self) -> usize {
        self.base.files.loaded().reads()
    }

    /// The files of `canary`'s output folder at `files` that are not what sluice renders for
    /// the status file text `status`, drawn from the commit `base` (changed, added or
    /// missing), sorted; empty when the folder is exactly sluice's. A status that does not
    /// parse, or a canary that does not load at `base`, leaves nothing sluice's: every file
    /// of the folder is named.
    pub fn differing(
        &mut self,
        canary: &Canary,
        status: &str,
        files: Oid,
        base: Oid,
    ) -> Result<Vec<String>, VerifyError> {
        let key = Key {
            canary: canary.id.to_string(),
            files,
            base,
            status: Oid::hash_object(ObjectType::Blob, status.as_bytes())
                .map_err(tree::git("hash a status file"))?,
        };
        self.kept().read_made(&self.git_dir());
        if let Some(verdict) = self.kept().verified.get(&key) {
            return Ok(verdict);
        }
        let verdict = self.render_and_compare(canary, status, files, base)?;
        self.rendered += 1;
        self.kept().verified.put(key, verdict.clone());
        Ok(verdict)
    }

    /// Why `commit` is not signed as the signing policy in force at its first parent requires
    /// (the repo's `signing`, judged as `sluice audit` judges it); `None` when it is, or when
    /// that policy requires nothing.
    pub fn unsigned(&mut self, commit: Oid) -> Result<Option<String>, VerifyError> {
        if let Some(verdict) = kept(&self.kept().verified.signed, &commit) {
            return Ok(verdict);
        }
        let outside = Outside::default();
        let kept = self.memory.folders.clone();
        let verdict = Policies::new(self.git()?, kept, &outside)
            .judge(commit)?
            .map(|v| v.message);
        keep(&self.kept().verified.signed, commit, verdict.clone());
        Ok(verdict)
    }

    /// Whether the signing policy in force at `commit` requires the commits on it signed.
    pub fn requires_signed_after(&mut self, commit: Oid) -> Result<bool, VerifyError> {
        if let Some(verdict) = kept(&self.kept().verified.requires, &commit) {
            return Ok(verdict);
        }
        let outside = Outside::default();
        let kept = self.memory.folders.clone();
        let verdict = Policies::new(self.git()?, kept, &outside).requires_signed_after(commit)?;
        keep(&self.kept().verified.requires, commit, verdict);
        Ok(verdict)
    }

    /// The newest commit sluice made in this clone for the canary `namespace/name`, as far as
    /// this process and the clone's record know (`None`: none).
    pub fn newest_made(&self, canary: &str) -> Option<Oid> {
        let git_dir = self.git_dir();
        self.kept().read_made(&git_dir);
        self.kept()
            .newest
            .lock()
            .ok()?
            .get(&git_dir)?
            .get(canary)
            .copied()
    }

    /// What the verifiers of this runtime keep.
    fn kept(&self) -> &Kept {
        &self.memory.verified
    }

    /// The clone's git dir, as [`crate::gitops::ConfigRepo::git_dir`] names it.
    fn git_dir(&self) -> PathBuf {
        self.root.join(".git")
    }

    /// The clone, opened when first needed.
    fn git(&mut self) -> Result<&Repository, VerifyError> {
        let git = match self.git.take() {
            Some(git) => git,
            None => open(&self.root)?,
        };
        Ok(self.git.insert(git))
    }

    fn render_and_compare(
        &mut self,
        at_head: &Canary,
        status: &str,
        files: Oid,
        base: Oid,
    ) -> Result<Vec<String>, VerifyError> {
        if self.git.is_none() {
            self.git = Some(open(&self.root)?);
        }
        let Some(git) = self.git.as_ref() else {
            return Ok(Vec::new());
        };
        let kept = &self.memory.folders;
        self.base.move_to(git, kept, base)?;
        let base = &self.base;
        let id = at_head.id.to_string();
        let canary = base.canary(&id);
        let output = at_head.output.as_str();
        let found = files_under(git, kept, files, output)?;
        // Nothing drawn to compare with: every file is named (the folder, when it is empty).
        let everything = || match found.keys().cloned().collect::<Vec<_>>() {
            none if none.is_empty() => vec![output.to_string()],
            some => some,
        };
        let text = status;
        let (Some(canary), Ok(status)) = (canary, status_file::parse(text)) else {
            return Ok(everything());
        };
        // The status file too is byte for byte what sluice writes for the status it holds: a
        // hand edit that reads the same (a comment, a key moved) under copied trailers is not
        // sluice's commit either.
        let ours = match status_file::record_of(text) {
            Ok(Some(record)) => status_file::render_recorded(&canary.id, &status, &record).ok(),
            Ok(None) => status_file::render(&canary.id, &status).ok(),
            Err(_) => None,
        };
        let status_is_sluices = ours.is_some_and(|ours| ours == text);
        let outputs = base.outputs();
        let outside = base.files.at(git, Path::new(""));
        let index = workload::Index::reading(base.files.snapshot(), &outputs, &outside);
        let prefix = format!("{output}/");
        // Every step keeps the primary already there; initialization and promotion draw it
        // from the source. The closer of the two names the files.
        let mut closest: Option<Vec<String>> = None;
        let drawn_on = remake::Base {
            root: Path::new(NO_FOLDER),
            index: &index,
        };
        for promoted in [false, true] {
            let made = remake::Made::Redrawn {
                status: &status,
                promoted,
            };
            let Ok(remade) = remake::remake(&drawn_on, canary, made) else {
                continue;
            };
            let drawn: BTreeMap<String, Option<Vec<u8>>> = remade
                .changes
                .into_iter()
                .filter(|c| c.path.starts_with(&prefix))
                .filter_map(|c| c.content.map(|text| (c.path, Some(text.into_bytes()))))
                .collect();
            let mut differ: Vec<String> = drawn
                .keys()
                .chain(found.keys())
                .filter(|p| drawn.get(*p) != found.get(*p))
                .cloned()
                .collect();
            differ.sort();
            differ.dedup();
            if closest.as_ref().is_none_or(|c| differ.len() < c.len()) {
                closest = Some(differ);
            }
        }
        let mut differ = closest.unwrap_or_else(everything);
        if !status_is_sluices {
            differ.push(status_file::path_for(&canary.id));
            differ.sort();
        }
        Ok(differ)
    }
}

fn open(root: &Path) -> Result<Repository, VerifyError> {
    Repository::open(root).map_err(|e| VerifyError::Open {
        root: root.display().to_string(),
        message: e.message().to_string(),
    })
}

/// Every entry under `folder` at `commit`, by repo-relative path: a regular file's content,
/// or `None` for anything sluice never writes (a link, a submodule, a file where the folder
/// should be).
fn files_under(
    git: &Repository,
    kept: &Folders,
    commit: Oid,
    folder: &str,
) -> Result<BTreeMap<String, Option<Vec<u8>>>, VerifyError> {
    let mut found = BTreeMap::new();
    let root = tree::commit_tree(git, kept, commit)?;
    let Ok(entry) = root.get_path(Path::new(folder)) else {
        return Ok(found);
    };
    let Ok(sub) = git.find_tree(entry.id()) else {
        found.insert(folder.to_string(), None);
        return Ok(found);
    };
    let mut failed = None;
    let walked = sub.walk(TreeWalkMode::PreOrder, |at, e| {
        if e.kind() == Some(ObjectType::Tree) {
            return TreeWalkResult::Ok;
        }
        let path = format!("{folder}/{at}{}", String::from_utf8_lossy(e.name_bytes()));
        let regular = matches!(e.filemode(), 0o100644 | 0o100755);
        if !regular {
            found.insert(path, None);
            return TreeWalkResult::Ok;
        }
        match git.find_blob(e.id()) {
            Ok(blob) => {
                found.insert(path, Some(blob.content().to_vec()));
                TreeWalkResult::Ok
            }
            Err(err) => {
                failed = Some(err);
                TreeWalkResult::Abort
            }
        }
    });
    if let Some(err) = failed {
        return Err(tree::git("read a file")(err).into());
    }
    walked.map_err(tree::git("walk a tree"))?;
    Ok(found)
}
