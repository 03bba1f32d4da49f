//! [`ConfigRepo`]: a persistent local clone of one branch of the config repo.
//!
//! The work dir is sluice's own and holds only the clone's `.git` folder, marked bare and
//! marked as sluice's (`ownership.rs`): nothing is ever checked out, there is no index. A work
//! dir holding anything else is refused, untouched. `fetch` moves the local branch to the
//! remote head, dropping unpushed commits. Nobody else should edit it. This file owns the clone:
//! opening/cloning (and migrating a clone with a work tree, `migrate.rs`), fetching, reading,
//! committing to the branch, and the tick's memory object store. It calls down into
//! `commit.rs` (writing a commit), `lookup.rs`, `remote.rs`, `memory.rs` and
//! `maintenance.rs`; pushing (`push.rs`), approval branches (`branch.rs`) and history
//! (`history.rs`) build on it.

use std::path::{Path, PathBuf};

use git2::{ErrorCode, ObjectType, Oid, Reference, Repository, RepositoryInitOptions, Time};

use super::change::{validate_path, CommitMessage, FileChange, Identity};
use super::commit::{IfUnchanged, Writer, Written};
use super::credentials::{redact_url, strip_userinfo, Credentials};
use super::error::{Error, RemoteOp, Result};
use super::folders::Folders;
use super::locks;
use super::lookup;
use super::maintenance;
use super::memory::Memory;
use super::migrate;
use super::object_cache;
use super::ownership::{self, resolve_workdir, Whose};
use super::remote::{Remote, ORIGIN};
use super::sign::Signing;
use super::timeouts;
use super::trees::Trees;

/// A local clone of one branch of the config repo, kept in a work dir across runs.
pub struct ConfigRepo {
    pub(super) repo: Repository,
    pub(super) root: PathBuf,
    /// The remote URL as stored in `.git/config`: no password or token in it.
    pub(super) remote_url: String,
    pub(super) branch: String,
    pub(super) creds: Credentials,
    /// The local branch head: the remote head after `fetch`, plus our unpushed commit if any.
    pub(super) head: Oid,
    /// `head` may name objects that were only in memory, or the local branch was never set:
    /// the next fetch points the branch at the remote head again.
    pub(super) dirty: bool,
    /// `head` moved past the local branch ref (commits not yet synced for a push).
    pub(super) unsynced: bool,
    /// Open inside `with_memory_objects`: `repo` then writes objects to memory.
    memory: Memory,
    /// The folders commits read and wrote, parsed (`trees.rs`).
    trees: Trees,
    /// The folders and commits path lookups read, by id (`folders.rs`).
    pub(super) folders: Folders,
    /// The clone may hold loose objects: commits written outside `with_memory_objects` (or
    /// after its store failed), or a clone found on disk. The next fetch packs them (`maintenance`).
    loose: bool,
    signing: Option<Signing>,
    /// See [`ConfigRepo::before_push_update`].
    push_hook: Option<Box<dyn Fn() + Send + Sync>>,
    /// Why a push found the clone damaged: the next `fetch` clones afresh.
    pub(super) damaged: Option<Error>,
}

impl std::fmt::Debug for ConfigRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigRepo")
            .field("root", &self.root)
            .field("remote", &redact_url(&self.remote_url))
            .field("branch", &self.branch)
            .field("head", &self.head)
            .field("credentials", &self.creds.describe())
            .finish_non_exhaustive()
    }
}

impl ConfigRepo {
    /// Removes the lock files (`.git/index.lock`, `HEAD.lock`, `refs/heads/main.lock`...) a
    /// process killed mid-update left in the clone in `workdir`, logging each one, so the
    /// clone can be updated again. Call it only while holding sluice's exclusive lock on the
    /// work dir: then nothing else can be writing the clone, and every such file is stale.
    /// Only in a clone sluice made (`ownership.rs`): a work dir that holds anything else is
    /// refused here, its files untouched.
    pub fn remove_stale_locks(workdir: &Path) -> Result<Vec<PathBuf>> {
        let root = resolve_workdir(workdir)?;
        match ownership::whose(&root) {
            Whose::Sluice { .. } | Whose::OlderSluice => {}
            Whose::Nobody => return Ok(Vec::new()),
            Whose::Someone(found) => return Err(refused(&root, &found)),
        }
        let removed = locks::remove_stale(&root)?;
        for lock in &removed {
            tracing::warn!(file = %lock.display(), "removed a stale git lock file a killed process left");
        }
        Ok(removed)
    }

    /// Opens the clone in `workdir`, or clones `url` into it when the directory is missing or
    /// empty, then fetches `branch` and points the local branch at the remote head.
    ///
    /// Only a clone sluice made is opened (`ownership.rs`): one carrying its marker
    /// (`.git/sluice/clone`), or one an older sluice made before the marker, which is marked.
    /// Anything else (a person's checkout, a `git init` folder, a folder of files, a file) is
    /// refused with what was found, and nothing in it is read further, written or pushed.
    /// A clone an older sluice made with a work tree is migrated in place (`migrate.rs`): an
    /// unpushed local commit is pushed (or kept under `refs/sluice/unpushed/`), then the
    /// checked-out files are deleted.
    ///
    /// `url` may be a local path, `file://`, `git://`, `http(s)://`, `ssh://` or `user@host:path`.
    /// Credentials in the URL are used (when `creds` has none for https) but never stored: the
    /// remote URL written to `.git/config` has them stripped.
    #[tracing::instrument(skip_all, fields(remote = %redact_url(url), branch = %branch, workdir = %workdir.display()))]
    pub fn open_or_clone(
        url: &str,
        branch: &str,
        workdir: &Path,
        creds: &Credentials,
    ) -> Result<ConfigRepo> {
        if branch.is_empty() || !Reference::is_valid_name(&format!("refs/heads/{branch}")) {
            return Err(Error::InvalidBranch {
                branch: branch.to_string(),
            });
        }
        // sluice writes every object from its own bytes and reads only its own clone: libgit2's
        // re-hashing of every object read and existence checks on every object written cost
        // most of a tick with many canaries and protect against nothing here.
        git2::opts::strict_hash_verification(false);
        git2::opts::strict_object_creation(false);
        timeouts::ensure();
        object_cache::limit_object_cache();
        let clean = strip_userinfo(url)?;
        // libgit2 calls a path where nothing is an "unsupported URL protocol".
        if clean.kind == crate::url_credentials::UrlKind::Local && !Path::new(url).exists() {
            return Err(Error::NoSuchPath {
                path: url.to_string(),
            });
        }
        let creds = creds.clone().with_url_fallback(clean.userinfo.clone());
        let root = resolve_workdir(workdir)?;

        let whose = ownership::whose(&root);
        let migrating = match &whose {
            Whose::Nobody => {
                std::fs::create_dir_all(&root)
                    .map_err(|e| workdir_error(&root)(format!("cannot create it: {e}")))?;
                return Self::clone_into(root, clean.url, branch, creds);
            }
            Whose::Someone(found) => return Err(refused(&root, found)),
            Whose::Sluice { migrating } => Some(*migrating),
            Whose::OlderSluice => None,
        };
        let repo = match Repository::open(&root) {
            Ok(repo) => repo,
            // sluice's own clone, damaged: the remote is the source of truth.
            Err(e) => {
                let cause = Error::Damaged {
                    path: root.clone(),
                    detail: format!("cannot open it: {}", e.message()),
                };
                set_aside(&root, &cause).map_err(workdir_error(&root))?;
                return Self::clone_into(root, clean.url, branch, creds);
            }
        };
        adopt_remote(&repo, &clean.url).map_err(workdir_error(&root))?;
        let migrating = match migrating {
            Some(migrating) => migrating,
            None => {
                let migrating = migrate::is_old_layout(&repo, &root);
                ownership::write_marker(&root, &clean.url, branch, migrating)?;
                tracing::info!(
                    migrating,
                    "marked the work dir's repository as sluice's clone (.git/sluice/clone): an \
                     older sluice made it, or it holds nothing yet"
                );
                migrating
            }
        };
        tracing::debug!(credentials = %creds.describe(), "opened work dir");
        Self::open_existing(repo, root, clean.url, branch, creds, migrating)
    }

    /// Fetches into sluice's clone `repo` found in `root`; with `migrating` (an older sluice's
    /// clone with a work tree, its marker saying so) it is migrated: marked bare first, its
    /// unpushed local commit made safe after the fetch, its checked-out files deleted last,
    /// then the marker says the migration is done. Files beside `.git` in a clone that is not
    /// migrating are not sluice's: they are left as they are.
    fn open_existing(
        repo: Repository,
        root: PathBuf,
        url: String,
        branch: &str,
        creds: Credentials,
        migrating: bool,
    ) -> Result<ConfigRepo> {
        if !migrating && migrate::has_checkout(&root) {
            tracing::warn!(
                "the work dir holds files beside .git that sluice did not write; they are left \
                 as they are"
            );
        }
        let (repo, local) = if migrating {
            let local = migrate::keep_branch(&repo, &root, branch)?;
            (migrate::make_bare(repo, &root)?, local)
        } else if !repo.is_bare() || repo.path().join("index").exists() {
            // sluice's clone was given a work tree or an index since: only its git dir is put
            // back as it was; no file beside it is deleted.
            (migrate::make_bare(repo, &root)?, None)
        } else {
            (repo, None)
        };
        let mut this = ConfigRepo::new(repo, root, url, branch, creds);
        // No checkout reads the head's objects any more: they are read here once, so a clone
        // damaged while sluice was down is found at start.
        let opened = this.fetch_as(RemoteOp::Fetch).and_then(|head| {
            lookup::verify_tree(&this.repo, head)
                .map_err(|e| this.git_err("read the head's objects", &e))
        });
        match opened {
            Ok(()) => {}
            Err(e) if e.is_local_damage() => {
                let ConfigRepo {
                    root,
                    remote_url,
                    creds,
                    ..
                } = this;
                set_aside(&root, &e).map_err(workdir_error(&root))?;
                return Self::clone_into(root, remote_url, branch, creds);
            }
            Err(e) => return Err(e),
        }
        if migrating {
            if let Some(local) = local {
                this.keep_unpushed(local)?;
            }
            let removed = migrate::remove_checkout(&this.root)?;
            ownership::write_marker(&this.root, &this.remote_url, branch, false)?;
            tracing::info!(
                entries = removed,
                "migrated the clone: no work tree, no index, checked-out files deleted"
            );
        }
        Ok(this)
    }

    /// The local commit `local` of a migrated clone, kept under `refs/sluice/unpushed/`
    /// (`migrate::keep_branch`): pushed when it is ahead of the remote head (fast-forward, as
    /// every push), then the ref goes; else the ref stays, with a warning. The ref goes too
    /// when the remote already has the commit.
    fn keep_unpushed(&mut self, local: Oid) -> Result<()> {
        let remote = self.head;
        let kept = format!("{}{}", migrate::UNPUSHED_PREFIX, self.branch);
        let has = |a: Oid, b: Oid| self.repo.graph_descendant_of(a, b).unwrap_or(false);
        let drop_kept = |repo: &Repository| match repo.find_reference(&kept) {
            Ok(mut r) => r.delete(),
            Err(_) => Ok(()),
        };
        if local == remote || has(remote, local) {
            return drop_kept(&self.repo).map_err(|e| self.git_err("drop a kept commit's ref", &e));
        }
        if has(local, remote) {
            self.head = local;
            self.unsynced = true;
            match self.push() {
                Ok(super::PushOutcome::Pushed(oid)) => {
                    tracing::info!(commit = %oid, "pushed the unpushed commits of the old work tree");
                    return drop_kept(&self.repo)
                        .map_err(|e| self.git_err("drop a kept commit's ref", &e));
                }
                Ok(super::PushOutcome::Rejected) => {
                    tracing::warn!(
                        "the remote branch moved; the old work tree's commits are kept aside"
                    )
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot push the old work tree's commits; they are kept aside")
                }
            }
            self.reset_to(remote)?;
        }
        tracing::warn!(commit = %local, kept = %kept, "a local commit of the old work tree was not pushed; it is kept under this ref");
        Ok(())
    }

    /// Clones `url` into the empty (or missing) directory `root`.
    fn clone_into(
        root: PathBuf,
        url: String,
        branch: &str,
        creds: Credentials,
    ) -> Result<ConfigRepo> {
        let repo = init_clone(&root, &url, branch)?;
        tracing::debug!(credentials = %creds.describe(), "created work dir");
        let mut this = ConfigRepo::new(repo, root, url, branch, creds);
        this.fetch_as(RemoteOp::Clone)?;
        Ok(this)
    }

    fn new(
        repo: Repository,
        root: PathBuf,
        remote_url: String,
        branch: &str,
        creds: Credentials,
    ) -> ConfigRepo {
        ConfigRepo {
            repo,
            root,
            remote_url,
            branch: branch.to_string(),
            creds,
            head: Oid::ZERO_SHA1,
            dirty: true,
            unsynced: false,
            memory: Memory::default(),
            trees: Trees::default(),
            folders: Folders::default(),
            loose: true,
            signing: None,
            push_hook: None,
            damaged: None,
        }
    }

    /// Fetches the branch and points the local branch at the remote head, dropping any
    /// unpushed commit. Nothing is checked out: the clone has no work tree.
    ///
    /// A clone found damaged (missing or corrupt objects, a garbage index or ref) is moved
    /// aside to `<work dir>.damaged` (or deleted when it cannot be moved) and cloned afresh:
    /// the remote is the source of truth, and work not pushed yet is redone by the next tick.
    pub fn fetch(&mut self) -> Result<Oid> {
        let fetched = match self.damaged.take() {
            Some(damage) => Err(damage),
            None => self.fetch_as(RemoteOp::Fetch),
        };
        match fetched {
            Err(e) if e.is_local_damage() && !self.memory.is_open() => {
                set_aside(&self.root, &e).map_err(workdir_error(&self.root))?;
                let repo = init_clone(&self.root, &self.remote_url, &self.branch)?;
                self.repo = repo;
                self.head = Oid::ZERO_SHA1;
                self.dirty = true;
                self.unsynced = false;
                self.fetch_as(RemoteOp::Clone)
            }
            other => other,
        }
    }
    #[tracing::instrument(skip_all, fields(remote = %redact_url(&self.remote_url), branch = %self.branch, op = %op))]
    fn fetch_as(&mut self, op: RemoteOp) -> Result<Oid> {
        let remote_head = self.fetch_remote_head(op)?;
        if !self.dirty && remote_head == self.head {
            tracing::debug!(head = %remote_head, "remote head unchanged");
        } else {
            self.reset_to(remote_head)?;
            // `e2e/bench/tick.rs` (the one-changed-spec row) times the tick from this line.
            tracing::info!(head = %remote_head, "moved the branch to the remote head");
        }
        if !self.memory.is_open() {
            self.loose = maintenance::repack_if_needed(&mut self.repo, &self.root, self.loose);
        }
        Ok(remote_head)
    }

    fn fetch_remote_head(&self, op: RemoteOp) -> Result<Oid> {
        let refspec = format!("+refs/heads/{b}:{}", self.tracking_ref(), b = self.branch);
        // Pruned: a branch deleted on the remote must not live on as a stale tracking ref.
        self.remote()
            .fetch(op, &[&refspec], true, "sluice: fetch")?;

        match self.repo.refname_to_id(&self.tracking_ref()) {
            Ok(oid) => Ok(oid),
            Err(e) if e.code() == ErrorCode::NotFound => Err(Error::BranchNotFound {
                remote: redact_url(&self.remote_url),
                branch: self.branch.clone(),
            }),
            Err(e) => Err(self.git_err("read the fetched branch", &e)),
        }
    }

    /// Points the local branch and HEAD at `oid`: a move of refs in the object database,
    /// nothing checked out (the clone has no work tree).
    pub(super) fn reset_to(&mut self, oid: Oid) -> Result<()> {
        let local = self.local_ref();
        self.repo
            .reference(&local, oid, true, "sluice: reset to remote head")
            .map_err(|e| self.git_err("update the local branch", &e))?;
        self.repo
            .set_head(&local)
            .map_err(|e| self.git_err("set HEAD", &e))?;
        self.head = oid;
        self.dirty = false;
        self.unsynced = false;
        Ok(())
    }

    /// The local branch head (the remote head after [`fetch`](Self::fetch), or our newer commit).
    pub fn head(&self) -> Oid {
        self.head
    }

    /// The work dir: it holds the clone's `.git` folder and no checked-out file. Read the
    /// repo's files from the head's tree (`crate::commit_files`); write through
    /// [`commit_files`](Self::commit_files).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The clone's git dir (`.git` below the work dir): where sluice keeps what only it writes.
    /// (Not the open repository's path: while a tick's objects are kept in memory, that
    /// repository has none.)
    pub fn git_dir(&self) -> PathBuf {
        self.root.join(".git")
    }

    /// The branch this clone tracks.
    pub fn branch(&self) -> &str {
        &self.branch
    }

    /// The remote URL as stored in `.git/config` (no credentials in it).
    pub fn remote_url(&self) -> &str {
        &self.remote_url
    }

    /// Signs every commit from now on with `signing` (`None` turns signing off).
    pub fn set_signing(&mut self, signing: Option<Signing>) {
        self.signing = signing;
    }

    /// Whether this clone signs the commits it writes.
    pub fn signs(&self) -> bool {
        self.signing.is_some()
    }

    /// Runs `hook` inside every later push of the branch, after the remote's head was read and
    /// before it is updated: the window in which another writer can race the push. For tests of
    /// that race; sluice itself never sets one.
    #[doc(hidden)]
    pub fn before_push_update(&mut self, hook: impl Fn() + Send + Sync + 'static) {
        self.push_hook = Some(Box::new(hook));
    }

    /// The content of `path` (repo-relative, `/`-separated) in the head commit, or `None` if
    /// there is no such file. Errors on a path that leaves the repo or a file that is not UTF-8.
    pub fn read_file_at_head(&self, path: &str) -> Result<Option<String>> {
        validate_path(path)?;
        let commit = self
            .repo
            .find_commit(self.head)
            .map_err(|e| self.git_err("read the head commit", &e))?;
        let tree = commit
            .tree()
            .map_err(|e| self.git_err("read the head tree", &e))?;
        let entry = match tree.get_path(Path::new(path)) {
            Ok(entry) => entry,
            Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
            Err(e) => return Err(self.git_err("look up a file", &e)),
        };
        if entry.kind() != Some(ObjectType::Blob) {
            return Ok(None);
        }
        let blob = self
            .repo
            .find_blob(entry.id())
            .map_err(|e| self.git_err("read a file", &e))?;
        match std::str::from_utf8(blob.content()) {
            Ok(text) => Ok(Some(text.to_string())),
            Err(_) => Err(Error::Git {
                path: self.root.clone(),
                op: "read a file",
                detail: format!("`{path}` at {} is not UTF-8 text", self.head),
            }),
        }
    }

    pub(super) fn local_ref(&self) -> String {
        format!("refs/heads/{}", self.branch)
    }

    fn tracking_ref(&self) -> String {
        format!("refs/remotes/{ORIGIN}/{}", self.branch)
    }

    /// A local libgit2 failure.
    pub(super) fn git_err(&self, op: &'static str, e: &git2::Error) -> Error {
        Error::Git {
            path: self.root.clone(),
            op,
            detail: self.creds.scrub(e.message()),
        }
    }

    /// The remote, for every network operation.
    pub(super) fn remote(&self) -> Remote<'_> {
        Remote {
            repo: &self.repo,
            root: &self.root,
            url: &self.remote_url,
            creds: &self.creds,
            before_update: self.push_hook.as_deref(),
        }
    }
}

impl ConfigRepo {
    /// Checks what `commit_files` checks of the paths before writing anything: plain
    /// repo-relative paths, each once, none through (or onto) a symlink of the head's tree.
    pub fn check_changes(&self, changes: &[FileChange]) -> Result<()> {
        lookup::check_changes(&self.repo, &self.folders, &self.root, self.head, changes)
    }

    /// Commits `changes` on top of the local head as `author` (also the committer), at `time`
    /// or now, writing blobs and trees directly (no work tree, no index). Returns `None`, and
    /// makes no commit, when the resulting tree equals the head's tree.
    ///
    /// Every path is checked before anything is written; a path through a symlink is refused.
    #[tracing::instrument(skip_all, fields(branch = %self.branch, files = changes.len(), subject = %message.subject))]
    pub fn commit_files(
        &mut self,
        changes: &[FileChange],
        message: &CommitMessage,
        author: &Identity,
        time: Option<Time>,
    ) -> Result<Option<Oid>> {
        let rendered = message.render()?;
        let signature = author.signature(time)?;
        match self.check_changes(changes) {
            // The head's trees cannot be read: the next fetch clones afresh.
            Err(e) if e.is_local_damage() => {
                let damaged = |detail: String| Error::Damaged {
                    path: self.root.clone(),
                    detail,
                };
                self.damaged = Some(damaged(e.to_string()));
                return Err(damaged(e.to_string()));
            }
            checked => checked?,
        }
        let head = self.head;
        let written = self
            .write_commit(|w| w.commit(head, changes, &rendered, &signature, IfUnchanged::Skip));
        let Some(oid) = written? else {
            tracing::debug!("no change; nothing to commit");
            return Ok(None);
        };
        // The branch ref follows once per push (`sync_branch`), not once per commit.
        self.head = oid;
        self.unsynced = true;
        tracing::info!(commit = %oid, "committed");
        Ok(Some(oid))
    }

    /// Writes a commit the one way every sluice commit is written: `write` calls
    /// [`Writer::commit`] on a writer over this clone's objects, signing key and tree cache.
    /// Records the objects written in the memory store when that is open. Touches no ref.
    pub(super) fn write_commit(
        &mut self,
        write: impl FnOnce(&mut Writer<'_>) -> Result<Option<(Oid, Written)>>,
    ) -> Result<Option<Oid>> {
        let mut writer = Writer {
            repo: &self.repo,
            root: &self.root,
            signing: self.signing.as_ref(),
            trees: &mut self.trees,
        };
        let committed = match write(&mut writer) {
            // The parent's objects cannot be read: the next fetch clones afresh, as after a
            // push that found them damaged.
            Err(e) if e.is_local_damage() => {
                let damaged = |detail: String| Error::Damaged {
                    path: self.root.clone(),
                    detail,
                };
                self.damaged = Some(damaged(e.to_string()));
                return Err(damaged(e.to_string()));
            }
            other => other?,
        };
        let Some((oid, written)) = committed else {
            return Ok(None);
        };
        if !self.memory.is_open() {
            self.loose = true;
        }
        let accounted = self.memory.account(written, &mut self.repo, &self.root);
        if accounted.is_err() {
            // The head may name objects that were only in memory: the next fetch resets.
            self.dirty = true;
        }
        accounted?;
        Ok(Some(oid))
    }

    /// Points the local branch at `head` after `commit_files` moved it: once per push instead
    /// of once per commit.
    pub(super) fn sync_branch(&mut self) -> Result<()> {
        if !self.unsynced {
            return Ok(());
        }
        let local = self.local_ref();
        self.repo
            .reference(&local, self.head, true, "commit (sluice)")
            .map_err(|e| self.git_err("advance the local branch", &e))?;
        self.unsynced = false;
        Ok(())
    }

    /// Sets how many bytes of a tick's new objects are kept in memory before they are stored
    /// as a pack and the rest of the tick starts a new one (8 MiB by default). Tests lower it
    /// to reach, with a hundred canaries, the several packs a thousand canaries in one
    /// namespace write.
    pub fn set_memory_budget(&mut self, bytes: usize) {
        self.memory.budget = bytes;
    }

    /// Runs `work` with the objects commits write kept in memory, then stores the objects the
    /// new commits need in the clone as a pack, one per 8 MiB of objects (`memory.rs`).
    /// Inside `work` only object operations are available (commit, history, reading files at
    /// the head); refs and push wait until it returns. The pack is written even when
    /// `work` fails, so the head never names a missing object.
    pub fn with_memory_objects<T, E>(
        &mut self,
        work: impl FnOnce(&mut ConfigRepo) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<Error>,
    {
        if self.memory.is_open() {
            return work(self);
        }
        self.memory.open(&mut self.repo, &self.root)?;
        let result = work(self);
        // Past the budget the store packed what it had and started again.
        let closed = self.memory.close(&mut self.repo, &self.root);
        if closed.is_err() {
            // The head may name objects that were only in memory: the next fetch resets.
            self.dirty = true;
        }
        closed?;
        result
    }
}

/// Checks that an existing clone belongs to `url`; rewrites a stored URL that still carries
/// credentials (an older clone, or one made by hand) to the clean form.
fn adopt_remote(repo: &Repository, url: &str) -> std::result::Result<(), String> {
    let stored = match repo.find_remote(ORIGIN) {
        Ok(remote) => remote.url().map(str::to_string),
        Err(e) if e.code() == ErrorCode::NotFound => {
            // Only a repository we created and never finished (a crash between init and
            // adding the remote) may be adopted: no remote and no commit yet.
            if repo.head().is_ok() {
                return Err(format!(
                    "holds a git repository with commits but no remote `{ORIGIN}`; use \
                     another work dir or delete this one"
                ));
            }
            return repo
                .remote(ORIGIN, url)
                .map(|_| ())
                .map_err(|e| format!("cannot add remote `{ORIGIN}`: {}", e.message()));
        }
        Err(e) => return Err(format!("cannot read remote `{ORIGIN}`: {}", e.message())),
    };
    let Ok(stored) = stored else {
        return Err(format!(
            "remote `{ORIGIN}` has a URL that is not UTF-8; delete the directory"
        ));
    };
    if stored == url {
        return Ok(());
    }
    match strip_userinfo(&stored) {
        Ok(clean) if clean.url == url => repo.remote_set_url(ORIGIN, url).map_err(|e| {
            format!(
                "cannot remove credentials from the stored URL: {}",
                e.message()
            )
        }),
        _ => Err(format!(
            "holds a clone of {}, not {}; use another work dir or delete this one",
            redact_url(&stored),
            redact_url(url)
        )),
    }
}

/// The refusal of the work dir `root`, which holds `found` (not a clone sluice made).
fn refused(root: &Path, found: &str) -> Error {
    Error::Workdir {
        path: root.to_path_buf(),
        reason: ownership::refusal(found),
    }
}

/// Makes an [`Error::Workdir`] about `path` from a reason.
fn workdir_error(path: &Path) -> impl Fn(String) -> Error + '_ {
    move |reason| Error::Workdir {
        path: path.to_path_buf(),
        reason,
    }
}

/// A fresh repository in `root/.git` (created if missing), bare (no work tree, no index),
/// with `url` as its remote, ready for the first fetch. Its marker (`ownership.rs`) is
/// written first, so a process killed at any later point leaves a clone sluice knows as its
/// own (and sets aside when it cannot open it); before, it leaves nothing to lose.
fn init_clone(root: &Path, url: &str, branch: &str) -> Result<Repository> {
    ownership::write_marker(root, url, branch, false)?;
    let mut opts = RepositoryInitOptions::new();
    opts.initial_head(branch).no_reinit(true).bare(true);
    let repo = Repository::init_opts(root.join(".git"), &opts).map_err(|e| Error::Workdir {
        path: root.to_path_buf(),
        reason: format!("cannot create a repository: {}", e.message()),
    })?;
    repo.remote(ORIGIN, url).map_err(|e| Error::InvalidUrl {
        url: redact_url(url),
        reason: e.message().to_string(),
    })?;
    Ok(repo)
}

/// Moves the damaged clone in `root` (its `.git`, all that sluice wrote there) aside to
/// `<root>.damaged/.git` (replacing an older one), or deletes it when it cannot be moved (a
/// mount point), and logs which, with `cause`. Nothing else in `root` is touched: a file
/// beside `.git` is not sluice's.
fn set_aside(root: &Path, cause: &Error) -> std::result::Result<(), String> {
    let mut aside = root.as_os_str().to_owned();
    aside.push(".damaged");
    let aside = PathBuf::from(aside);
    match std::fs::remove_dir_all(&aside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", aside.display())),
    }
    let git = root.join(".git");
    let moved =
        std::fs::create_dir_all(&aside).and_then(|()| std::fs::rename(&git, aside.join(".git")));
    if moved.is_ok() {
        tracing::warn!(
            error = %cause,
            moved_to = %aside.display(),
            "the clone is damaged; moved it aside and cloning afresh"
        );
    } else {
        std::fs::remove_dir_all(&git)
            .map_err(|e| format!("cannot remove {}: {e}", git.display()))?;
        tracing::warn!(error = %cause, "the clone is damaged; deleted it and cloning afresh");
    }
    std::fs::create_dir_all(root).map_err(|e| format!("cannot create it: {e}"))
}
