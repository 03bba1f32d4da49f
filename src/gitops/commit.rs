//! Writing files into the work tree and committing them on top of the local head.
//!
//! Only plain repo-relative paths are accepted: nothing absolute, no `..`, nothing in `.git`, and
//! never through a symlink, so a config repo cannot trick sluice into writing outside its work
//! tree. This file does not push; see `push.rs`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use git2::{Oid, Signature, Time};

use super::repo::ConfigRepo;

use super::{Error, Result};

/// One file to write (`content: Some`) or delete (`content: None`) in a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Repo-relative, `/`-separated (`apps/podinfo/route.yaml`).
    pub path: String,
    /// The new content; `None` deletes the file.
    pub content: Option<String>,
}

impl FileChange {
    /// Write `content` to `path`.
    pub fn write(path: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            content: Some(content.into()),
        }
    }

    /// Delete `path`.
    pub fn delete(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            content: None,
        }
    }
}

/// Who sluice commits as (author and committer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

impl Identity {
    pub fn new(name: impl Into<String>, email: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            email: email.into(),
        }
    }

    pub(super) fn signature(&self, time: Option<Time>) -> Result<Signature<'static>> {
        let invalid = |reason: &str| Error::InvalidIdentity {
            name: self.name.clone(),
            email: self.email.clone(),
            reason: reason.to_string(),
        };
        if self.name.trim().is_empty() || self.email.trim().is_empty() {
            return Err(invalid("name and email must not be empty"));
        }
        if format!("{}{}", self.name, self.email).contains(['<', '>', '\n', '\r', '\0']) {
            return Err(invalid(
                "name and email must not contain `<`, `>`, newlines or NUL",
            ));
        }
        let sig = match time {
            Some(time) => Signature::new(&self.name, &self.email, &time),
            None => Signature::now(&self.name, &self.email),
        };
        sig.map_err(|e| invalid(e.message()))
    }
}

impl Default for Identity {
    /// `sluice <sluice@localhost>`
    fn default() -> Self {
        Self::new("sluice", "sluice@localhost")
    }
}

/// A commit message: subject, blank line, body, blank line, `Key: value` trailers that
/// `git interpret-trailers --parse` and `git log --format=%(trailers)` read back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitMessage {
    pub subject: String,
    pub body: String,
    pub trailers: Vec<(String, String)>,
}

impl CommitMessage {
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            ..Self::default()
        }
    }

    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self
    }

    pub fn trailer(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.trailers.push((key.into(), value.into()));
        self
    }

    /// The message text, or an error if git would not read it back as written (multi-line
    /// subject, trailer keys with spaces, multi-line trailer values).
    pub fn render(&self) -> Result<String> {
        let invalid = |reason: String| Error::InvalidMessage { reason };
        let subject = self.subject.trim();
        if subject.is_empty() {
            return Err(invalid("the subject is empty".to_string()));
        }
        if subject.contains(['\n', '\r']) {
            return Err(invalid(format!(
                "the subject must be one line, found `{}`",
                subject.escape_debug()
            )));
        }
        let mut out = String::from(subject);
        out.push('\n');
        let body = self.body.trim();
        if !body.is_empty() {
            out.push('\n');
            out.push_str(body);
            out.push('\n');
        }
        if !self.trailers.is_empty() {
            out.push('\n');
            for (key, value) in &self.trailers {
                let valid_key = !key.is_empty()
                    && !key.starts_with('-')
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
                if !valid_key {
                    return Err(invalid(format!(
                        "trailer key `{}`: expected letters, digits and `-` (like `Sluice-Canary`)",
                        key.escape_debug()
                    )));
                }
                let value = value.trim();
                if value.is_empty() || value.contains(['\n', '\r']) {
                    return Err(invalid(format!(
                        "trailer `{key}`: expected a non-empty one-line value, found `{}`",
                        value.escape_debug()
                    )));
                }
                out.push_str(&format!("{key}: {value}\n"));
            }
        }
        if out.contains('\0') {
            return Err(invalid("contains a NUL byte".to_string()));
        }
        Ok(out)
    }
}

/// How to sign commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signing {
    /// `ssh-keygen -Y sign -n git -f KEY` (git's `gpg.format=ssh`). The key must not need a
    /// passphrase prompt: an unencrypted key, or a public key whose private half is in the agent.
    Ssh { key_path: PathBuf },
}

impl Signing {
    fn sign(&self, content: &str) -> Result<String> {
        match self {
            Signing::Ssh { key_path } => sign_ssh(key_path, content),
        }
    }
}

fn sign_ssh(key_path: &Path, content: &str) -> Result<String> {
    let fail = |reason: String| Error::Signing {
        key_path: key_path.to_path_buf(),
        reason,
    };
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", "git", "-f"])
        .arg(key_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            fail(format!(
                "cannot run ssh-keygen (install openssh-client): {e}"
            ))
        })?;
    // ssh-keygen reads all of stdin before it writes, so writing first cannot deadlock.
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(content.as_bytes())
            .map_err(|e| fail(format!("cannot write to ssh-keygen: {e}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| fail(format!("ssh-keygen did not finish: {e}")))?;
    if !output.status.success() {
        return Err(fail(format!(
            "ssh-keygen failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    String::from_utf8(output.stdout).map_err(|_| fail("ssh-keygen printed non-UTF-8".to_string()))
}

/// Checks that `path` is a plain repo-relative path: `/`-separated, not absolute, no empty,
/// `.` or `..` components, nothing inside `.git`.
pub(super) fn validate_path(path: &str) -> Result<()> {
    let invalid = |reason: &str| Error::InvalidPath {
        path: path.escape_debug().to_string(),
        reason: reason.to_string(),
    };
    if path.is_empty() {
        return Err(invalid("is empty"));
    }
    if path.contains('\0') {
        return Err(invalid("contains a NUL byte"));
    }
    if path.contains('\\') {
        return Err(invalid("contains `\\`; use `/` as the separator"));
    }
    let bytes = path.as_bytes();
    if path.starts_with('/')
        || (bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic())
    {
        return Err(invalid(
            "is absolute; give a path relative to the repo root",
        ));
    }
    for component in path.split('/') {
        match component {
            "" => return Err(invalid("has an empty component (`//` or a trailing `/`)")),
            "." => return Err(invalid("contains `.`; give a normalized path")),
            ".." => return Err(invalid("contains `..`; paths must stay inside the repo")),
            c if c.trim_end_matches(['.', ' ']).eq_ignore_ascii_case(".git") => {
                return Err(invalid("points into `.git`"))
            }
            _ => {}
        }
    }
    Ok(())
}

impl ConfigRepo {
    /// Checks what `commit_files` checks of the paths before writing anything: plain
    /// repo-relative paths, each once, none through a symlink.
    pub fn check_changes(&self, changes: &[FileChange]) -> Result<()> {
        let mut seen = HashSet::new();
        for change in changes {
            validate_path(&change.path)?;
            if !seen.insert(change.path.as_str()) {
                return Err(Error::InvalidPath {
                    path: change.path.clone(),
                    reason: "appears more than once in one commit".to_string(),
                });
            }
            self.refuse_symlinks(&change.path)?;
        }
        Ok(())
    }

    /// Writes `changes` into the work tree and index and commits them on top of the local head
    /// as `author` (also the committer), at `time` or now. Returns `None`, and makes no commit,
    /// when the resulting tree equals the head's tree.
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
        self.check_changes(changes)?;

        // From here on the work tree may differ from `head` until the commit is made; a failed
        // attempt is cleaned up by the next `fetch`.
        self.dirty = true;
        self.write_work_tree(changes)?;
        let Some((oid, written)) = self.write_objects(changes, &rendered, &signature)? else {
            self.dirty = false;
            tracing::debug!("no change; nothing to commit");
            return Ok(None);
        };
        // The branch ref and index follow once per push (`sync_branch`), not once per commit.
        self.head = oid;
        self.dirty = false;
        self.unsynced = true;
        self.written.extend(
            changes
                .iter()
                .filter(|c| c.content.is_some())
                .map(|c| c.path.clone()),
        );
        tracing::info!(commit = %oid, "committed");
        self.account_memory(written)?;
        Ok(Some(oid))
    }

    /// Writes and deletes the changed files in the work tree.
    fn write_work_tree(&self, changes: &[FileChange]) -> Result<()> {
        for change in changes {
            let full = self.root.join(&change.path);
            match &change.content {
                Some(content) => {
                    if let Some(parent) = full.parent() {
                        std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                            path: parent.to_path_buf(),
                            op: "create directory",
                            source,
                        })?;
                    }
                    // Rewriting an identical file costs a truncate; skip it.
                    let same = std::fs::read(&full).is_ok_and(|old| old == content.as_bytes());
                    if !same {
                        std::fs::write(&full, content).map_err(|source| Error::Io {
                            path: full.clone(),
                            op: "write file",
                            source,
                        })?;
                    }
                }
                None => match std::fs::remove_file(&full) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => {
                        return Err(Error::Io {
                            path: full,
                            op: "delete file",
                            source,
                        })
                    }
                },
            }
        }
        Ok(())
    }

    /// Writes the blobs, trees and commit for `changes` on top of the head; `None` when the
    /// tree equals the head's tree. Also returns what it wrote.
    fn write_objects(
        &self,
        changes: &[FileChange],
        message: &str,
        signature: &Signature<'_>,
    ) -> Result<Option<(Oid, Written)>> {
        let parent = self
            .repo
            .find_commit(self.head)
            .map_err(|e| self.git_err("read the head commit", &e))?;
        let base_tree = parent
            .tree()
            .map_err(|e| self.git_err("read the head tree", &e))?;
        // The new tree is built from the head's tree and the changed paths alone: no index, no
        // attribute lookups, so a tick of many small commits stays cheap. The index catches up
        // once, before the push (`sync_branch`).
        let mut update = git2::build::TreeUpdateBuilder::new();
        for change in changes {
            match &change.content {
                Some(content) => {
                    let blob = self
                        .repo
                        .blob(content.as_bytes())
                        .map_err(|e| self.git_err("write a blob", &e))?;
                    update.upsert(change.path.as_str(), blob, git2::FileMode::Blob);
                }
                // Deleting a path the head does not have is no change.
                None => {
                    if base_tree.get_path(Path::new(&change.path)).is_ok() {
                        update.remove(change.path.as_str());
                    }
                }
            }
        }
        let tree_id = update
            .create_updated(&self.repo, &base_tree)
            .map_err(|e| self.git_err("write the tree", &e))?;
        if base_tree.id() == tree_id {
            return Ok(None);
        }
        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(|e| self.git_err("read the new tree", &e))?;
        let oid = match &self.signing {
            None => self
                .repo
                .commit(None, signature, signature, message, &tree, &[&parent])
                .map_err(|e| self.git_err("create the commit", &e))?,
            Some(signing) => {
                let buffer = self
                    .repo
                    .commit_create_buffer(signature, signature, message, &tree, &[&parent])
                    .map_err(|e| self.git_err("create the commit", &e))?;
                let content = buffer.as_str().map_err(|_| Error::Git {
                    path: self.root.clone(),
                    op: "create the commit",
                    detail: "commit buffer is not UTF-8".to_string(),
                })?;
                let sig = signing.sign(content)?;
                self.repo
                    .commit_signed(content, &sig, None)
                    .map_err(|e| self.git_err("create the signed commit", &e))?
            }
        };
        let mut written = written(&self.repo, &tree, changes);
        written.objects.push(oid);
        written.bytes += message.len();
        Ok(Some((oid, written)))
    }

    /// Points the local branch and the index at `head` after `commit_files` moved it: once per
    /// push instead of once per commit.
    pub(super) fn sync_branch(&mut self) -> Result<()> {
        if !self.unsynced {
            return Ok(());
        }
        let local = self.local_ref();
        self.repo
            .reference(&local, self.head, true, "commit (sluice)")
            .map_err(|e| self.git_err("advance the local branch", &e))?;
        let tree = self
            .repo
            .find_commit(self.head)
            .and_then(|c| c.tree())
            .map_err(|e| self.git_err("read the head tree", &e))?;
        let mut index = self
            .repo
            .index()
            .map_err(|e| self.git_err("open the index", &e))?;
        index
            .read_tree(&tree)
            .map_err(|e| self.git_err("write the index", &e))?;
        for path in std::mem::take(&mut self.written) {
            let Some(mut entry) = index.get_path(Path::new(&path), 0) else {
                continue;
            };
            if let Ok(meta) = std::fs::symlink_metadata(self.root.join(&path)) {
                set_stat(&mut entry, &meta);
                index
                    .add(&entry)
                    .map_err(|e| self.git_err("write the index", &e))?;
            }
        }
        index
            .write()
            .map_err(|e| self.git_err("write the index", &e))?;
        self.unsynced = false;
        Ok(())
    }

    /// Refuses a path whose parents or itself are symlinks in the work tree (a symlink committed
    /// to the config repo must not let us write outside it).
    fn refuse_symlinks(&self, path: &str) -> Result<()> {
        let mut current = self.root.clone();
        for component in path.split('/') {
            current.push(component);
            match std::fs::symlink_metadata(&current) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(Error::InvalidPath {
                        path: path.to_string(),
                        reason: format!(
                            "goes through the symlink `{}`; sluice does not write through symlinks",
                            current
                                .strip_prefix(&self.root)
                                .unwrap_or(&current)
                                .display()
                        ),
                    })
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(source) => {
                    return Err(Error::Io {
                        path: current,
                        op: "inspect path",
                        source,
                    })
                }
            }
        }
        Ok(())
    }
}

/// The objects one commit wrote and about how many bytes they hold.
pub(super) struct Written {
    pub objects: Vec<Oid>,
    pub bytes: usize,
}

/// What a commit of `changes` with root `tree` wrote: the new files' blobs and every folder on
/// their paths (each rewritten whole). Each folder is read once, however many files it holds.
fn written(repo: &git2::Repository, tree: &git2::Tree<'_>, changes: &[FileChange]) -> Written {
    let mut out = Written {
        objects: vec![tree.id()],
        bytes: tree.len() * TREE_ENTRY_BYTES,
    };
    // Folder ("" for the root) -> names of files written in it.
    let mut files: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut folders: HashSet<&str> = HashSet::new();
    for change in changes {
        let (folder, name) = change.path.rsplit_once('/').unwrap_or(("", &change.path));
        if let Some(content) = &change.content {
            files.entry(folder).or_default().push(name);
            out.bytes += content.len();
        }
        let mut path = change.path.as_str();
        while let Some((parent, _)) = path.rsplit_once('/') {
            folders.insert(parent);
            path = parent;
        }
    }
    // Parents before children, each found in its parent: a big folder is read once, not once
    // per path through it.
    let mut folders: Vec<&str> = folders.into_iter().collect();
    folders.sort_by_key(|f| f.matches('/').count());
    let mut subtrees: HashMap<&str, git2::Tree<'_>> = HashMap::new();
    for folder in folders {
        let (parent, name) = folder.rsplit_once('/').unwrap_or(("", folder));
        let parent = if parent.is_empty() {
            Some(tree)
        } else {
            subtrees.get(parent)
        };
        let found = parent
            .and_then(|p| p.get_name(name))
            .and_then(|entry| repo.find_tree(entry.id()).ok());
        if let Some(sub) = found {
            out.objects.push(sub.id());
            out.bytes += sub.len() * TREE_ENTRY_BYTES;
            subtrees.insert(folder, sub);
        }
    }
    for (folder, names) in files {
        let parent = if folder.is_empty() {
            Some(tree)
        } else {
            subtrees.get(folder)
        };
        if let Some(parent) = parent {
            out.objects.extend(
                names
                    .iter()
                    .filter_map(|n| parent.get_name(n))
                    .map(|e| e.id()),
            );
        }
    }
    out
}

/// About how many bytes one tree entry takes (mode, name, object id).
const TREE_ENTRY_BYTES: usize = 48;

/// Copies a file's stat data into its index entry, as `git add` records it: the checkout after
/// the next fetch then sees the file unchanged without reading it. The fields are truncated to
/// 32 bits as in git's index format.
#[cfg(unix)]
fn set_stat(entry: &mut git2::IndexEntry, meta: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    let time = |secs: i64, nanos: i64| git2::IndexTime::new(secs as i32, nanos as u32);
    entry.ctime = time(meta.ctime(), meta.ctime_nsec());
    entry.mtime = time(meta.mtime(), meta.mtime_nsec());
    entry.dev = meta.dev() as u32;
    entry.ino = meta.ino() as u32;
    entry.uid = meta.uid();
    entry.gid = meta.gid();
    entry.file_size = meta.len() as u32;
}

/// Without unix stat data the entry keeps none; the next checkout reads the file instead.
#[cfg(not(unix))]
fn set_stat(_entry: &mut git2::IndexEntry, _meta: &std::fs::Metadata) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside_the_repo() {
        for good in [
            "a.yaml",
            "apps/podinfo/route.yaml",
            ".github/x",
            "a..b",
            "..a",
            ".gitignore",
        ] {
            assert!(validate_path(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "C:/x",
            "../x",
            "a/../../x",
            "a/..",
            "./a",
            "a//b",
            "a/",
            ".git/config",
            ".GIT/hooks/pre-commit",
            "sub/.git/x",
            ".git",
            ".git./x",
            "a\\b",
            "a\0b",
        ] {
            let err = validate_path(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}");
            assert!(!err.is_transient());
        }
    }

    #[test]
    fn message_renders_subject_body_trailers() {
        let msg = CommitMessage::new("Advance podinfo.prod canary weight 20")
            .body("Step 2 of 5.\n\nMetrics ok.")
            .trailer("Sluice-Canary", "prod/podinfo")
            .trailer("Sluice-Weight", "20");
        assert_eq!(
            msg.render().unwrap(),
            "Advance podinfo.prod canary weight 20\n\nStep 2 of 5.\n\nMetrics ok.\n\n\
             Sluice-Canary: prod/podinfo\nSluice-Weight: 20\n"
        );
        assert_eq!(CommitMessage::new("s").render().unwrap(), "s\n");
        assert_eq!(
            CommitMessage::new("s").trailer("K", "v").render().unwrap(),
            "s\n\nK: v\n"
        );
    }

    #[test]
    fn bad_messages_are_errors() {
        for msg in [
            CommitMessage::new(""),
            CommitMessage::new("two\nlines"),
            CommitMessage::new("s").trailer("Has Space", "v"),
            CommitMessage::new("s").trailer("", "v"),
            CommitMessage::new("s").trailer("K:", "v"),
            CommitMessage::new("s").trailer("K", ""),
            CommitMessage::new("s").trailer("K", "a\nb"),
        ] {
            assert!(
                matches!(msg.render(), Err(Error::InvalidMessage { .. })),
                "{msg:?}"
            );
        }
    }

    #[test]
    fn bad_identities_are_errors() {
        for id in [
            Identity::new("", "a@b"),
            Identity::new("a", ""),
            Identity::new("a <x>", "a@b"),
            Identity::new("a", "a@b>\n"),
        ] {
            assert!(
                matches!(id.signature(None), Err(Error::InvalidIdentity { .. })),
                "{id:?}"
            );
        }
        assert!(Identity::default().signature(None).is_ok());
    }
}
