//! Approval branches (`sluice/<namespace>/<name>/<step>`): a commit of the gated change on top
//! of the branch head, pushed to a branch sluice owns, so merging a pull request is merging
//! the traffic change. The main branch is never touched here, and only `sluice/` branches
//! may be overwritten.

use std::cell::RefCell;
use std::path::Path;

use git2::{Direction, FetchOptions, Oid, ProxyOptions, PushOptions, RemoteCallbacks, Time};

use super::commit::{CommitMessage, FileChange, Identity};
use super::credentials::{redact_url, AuthSession};
use super::repo::{ConfigRepo, ORIGIN};
use super::{Error, RemoteOp, Result};

/// The prefix of every branch sluice may force-update.
pub const APPROVAL_PREFIX: &str = "sluice/";

impl ConfigRepo {
    /// The remote head of `branch`, fetched so it can be read locally; `None` when the remote
    /// has no such branch.
    pub fn fetch_branch(&self, branch: &str) -> Result<Option<Oid>> {
        let mut remote = self
            .repo
            .find_remote(ORIGIN)
            .map_err(|e| self.git_err("find remote", &e))?;
        let session = AuthSession::default();
        let wanted = format!("refs/heads/{branch}");
        let remote_oid = {
            let mut callbacks = RemoteCallbacks::new();
            self.creds.install(&mut callbacks, &session);
            let connection = remote
                .connect_auth(Direction::Fetch, Some(callbacks), None)
                .map_err(|e| self.remote_err(RemoteOp::Fetch, &e, &session))?;
            let heads = connection
                .list()
                .map_err(|e| self.remote_err(RemoteOp::Fetch, &e, &session))?;
            heads.iter().find(|h| h.name() == wanted).map(|h| h.oid())
        };
        let Some(oid) = remote_oid else {
            return Ok(None);
        };
        if self.repo.find_commit(oid).is_err() {
            let mut callbacks = RemoteCallbacks::new();
            self.creds.install(&mut callbacks, &session);
            let mut opts = FetchOptions::new();
            let mut proxy = ProxyOptions::new();
            proxy.auto();
            opts.remote_callbacks(callbacks).proxy_options(proxy);
            let refspec = format!("+{wanted}:refs/remotes/{ORIGIN}/{branch}");
            remote
                .fetch(
                    &[&refspec],
                    Some(&mut opts),
                    Some("sluice: fetch approval branch"),
                )
                .map_err(|e| self.remote_err(RemoteOp::Fetch, &e, &session))?;
        }
        Ok(Some(oid))
    }

    /// A file's content at `commit`; `None` when the file is absent there.
    pub fn read_file_at(&self, commit: Oid, path: &str) -> Result<Option<String>> {
        let tree = self
            .repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| self.git_err("read a commit", &e))?;
        let Ok(entry) = tree.get_path(Path::new(path)) else {
            return Ok(None);
        };
        let blob = self
            .repo
            .find_blob(entry.id())
            .map_err(|e| self.git_err("read a blob", &e))?;
        Ok(Some(String::from_utf8_lossy(blob.content()).into_owned()))
    }

    /// Commits `changes` on top of `parent` without touching the work tree or any ref.
    pub fn commit_on(
        &self,
        parent: Oid,
        changes: &[FileChange],
        message: &CommitMessage,
        author: &Identity,
        time: Option<Time>,
    ) -> Result<Oid> {
        let rendered = message.render()?;
        let signature = author.signature(time)?;
        let parent = self
            .repo
            .find_commit(parent)
            .map_err(|e| self.git_err("read the parent commit", &e))?;
        let base = parent
            .tree()
            .map_err(|e| self.git_err("read the parent tree", &e))?;
        let mut update = git2::build::TreeUpdateBuilder::new();
        for change in changes {
            super::commit::validate_path(&change.path)?;
            match &change.content {
                Some(content) => {
                    let blob = self
                        .repo
                        .blob(content.as_bytes())
                        .map_err(|e| self.git_err("write a blob", &e))?;
                    update.upsert(change.path.as_str(), blob, git2::FileMode::Blob);
                }
                None => {
                    if base.get_path(Path::new(&change.path)).is_ok() {
                        update.remove(change.path.as_str());
                    }
                }
            }
        }
        let tree_id = update
            .create_updated(&self.repo, &base)
            .map_err(|e| self.git_err("write the tree", &e))?;
        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(|e| self.git_err("read the new tree", &e))?;
        self.repo
            .commit(None, &signature, &signature, &rendered, &tree, &[&parent])
            .map_err(|e| self.git_err("create the commit", &e))
    }

    /// Points the remote approval branch at `oid`, replacing what it held: approval branches
    /// belong to sluice. Refuses any branch outside `sluice/`.
    pub fn push_approval_branch(&self, branch: &str, oid: Oid) -> Result<()> {
        if !branch.starts_with(APPROVAL_PREFIX) || branch == self.branch {
            return Err(Error::InvalidBranch {
                branch: branch.to_string(),
            });
        }
        let local = format!("refs/sluice/approval/{branch}");
        self.repo
            .reference(&local, oid, true, "sluice: approval branch")
            .map_err(|e| self.git_err("write the approval ref", &e))?;
        let refspec = format!("+{local}:refs/heads/{branch}");
        let session = AuthSession::default();
        let statuses: RefCell<Vec<(String, Option<String>)>> = RefCell::new(Vec::new());
        let mut remote = self
            .repo
            .find_remote(ORIGIN)
            .map_err(|e| self.git_err("find remote", &e))?;
        let mut callbacks = RemoteCallbacks::new();
        self.creds.install(&mut callbacks, &session);
        callbacks.push_update_reference(|name, status| {
            statuses
                .borrow_mut()
                .push((name.to_string(), status.map(str::to_string)));
            Ok(())
        });
        let mut opts = PushOptions::new();
        opts.remote_callbacks(callbacks);
        remote
            .push(&[&refspec], Some(&mut opts))
            .map_err(|e| self.remote_err(RemoteOp::Push, &e, &session))?;
        drop(opts);
        for (name, status) in statuses.into_inner() {
            if let Some(reason) = status {
                return Err(Error::PushRefused {
                    remote: redact_url(&self.remote_url),
                    refname: name,
                    reason: self.creds.scrub(&reason),
                });
            }
        }
        Ok(())
    }
}

impl ConfigRepo {
    /// The first parent of `commit`, if any.
    pub fn parent_of(&self, commit: Oid) -> Result<Option<Oid>> {
        let c = self
            .repo
            .find_commit(commit)
            .map_err(|e| self.git_err("read a commit", &e))?;
        Ok(c.parent_ids().next())
    }
}
