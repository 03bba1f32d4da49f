//! Approval branches (`sluice/<namespace>/<name>/<step>`): a commit of the gated change on top
//! of the branch head, pushed to a branch sluice owns, so merging a pull request is merging
//! the traffic change. The main branch is never touched here, and only `sluice/` branches
//! may be overwritten.

use std::path::Path;

use git2::{Oid, Time};

use super::change::{CommitMessage, FileChange, Identity};
use super::commit::IfUnchanged;
use super::error::{Error, RemoteOp, Result};
use super::remote::{Pushed, ORIGIN};
use super::repo::ConfigRepo;

/// The prefix of every branch sluice may force-update.
pub const APPROVAL_PREFIX: &str = "sluice/";

impl ConfigRepo {
    /// The remote head of `branch`, fetched so it can be read locally; `None` when the remote
    /// has no such branch.
    pub fn fetch_branch(&self, branch: &str) -> Result<Option<Oid>> {
        let wanted = format!("refs/heads/{branch}");
        let remote = self.remote();
        let Some((_, oid)) = remote.list()?.into_iter().find(|(name, _)| *name == wanted) else {
            return Ok(None);
        };
        if self.repo.find_commit(oid).is_err() {
            let refspec = format!("+{wanted}:refs/remotes/{ORIGIN}/{branch}");
            remote.fetch(
                RemoteOp::Fetch,
                &[&refspec],
                false,
                "sluice: fetch approval branch",
            )?;
        }
        Ok(Some(oid))
    }

    /// A file's content at `commit`; `None` when the file is absent there.
    pub fn read_file_at(&self, commit: Oid, path: &str) -> Result<Option<String>> {
        // The common cases through the kept folders (reading the commit parses its whole
        // message: a perTick commit's names every canary it decided).
        let found = super::lookup::entry_at(&self.repo, &self.folders, commit, path)
            .map_err(|e| self.git_err("look up a path", &e))?;
        let id = match found {
            super::lookup::PathEntry::File(id) => id,
            super::lookup::PathEntry::Missing => return Ok(None),
            // Anything else as git's own lookup of the path finds it.
            _ => {
                let tree = self
                    .repo
                    .find_commit(commit)
                    .and_then(|c| c.tree())
                    .map_err(|e| self.git_err("read a commit", &e))?;
                let Ok(entry) = tree.get_path(Path::new(path)) else {
                    return Ok(None);
                };
                entry.id()
            }
        };
        let blob = self
            .repo
            .find_blob(id)
            .map_err(|e| self.git_err("read a blob", &e))?;
        Ok(Some(String::from_utf8_lossy(blob.content()).into_owned()))
    }

    /// Commits `changes` on top of `parent` without touching the work tree or any ref, written
    /// like every commit on the branch (signed when a key is set, kept in memory inside
    /// [`with_memory_objects`](Self::with_memory_objects)). Commits even when nothing changes.
    pub fn commit_on(
        &mut self,
        parent: Oid,
        changes: &[FileChange],
        message: &CommitMessage,
        author: &Identity,
        time: Option<Time>,
    ) -> Result<Oid> {
        let rendered = message.render()?;
        let signature = author.signature(time)?;
        let written = self.write_commit(|w| {
            w.commit(parent, changes, &rendered, &signature, IfUnchanged::Commit)
        })?;
        // `IfUnchanged::Commit` always writes a commit.
        written.ok_or_else(|| Error::Git {
            path: self.root.clone(),
            op: "create the commit",
            detail: "no commit was written".to_string(),
        })
    }

    /// Points the remote approval branch at `oid`, replacing what it held: approval branches
    /// belong to sluice. Refuses any branch outside `sluice/`. Pushed like the main branch
    /// (same credentials, proxy and error reporting), but forced.
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
        let refused = |refname: String, reason: String| Error::PushRefused {
            remote: self.remote().redacted(),
            refname,
            reason,
        };
        match self.remote().push(&[&refspec])? {
            // A forced refspec is never checked for fast-forward; kept for completeness.
            Pushed::NotFastForward(reason) => Err(refused(format!("refs/heads/{branch}"), reason)),
            Pushed::Answered(statuses) => match statuses
                .into_iter()
                .find_map(|(name, status)| status.map(|reason| (name, reason)))
            {
                Some((name, reason)) => Err(refused(name, reason)),
                None => Ok(()),
            },
        }
    }
}

impl ConfigRepo {
    /// The first parent of `commit`, if any.
    pub fn parent_of(&self, commit: Oid) -> Result<Option<Oid>> {
        let kept = self
            .folders
            .skeleton(&self.repo, commit)
            .map_err(|e| self.git_err("read a commit", &e))?;
        Ok(kept.first_parent)
    }

    /// Who committed `commit`, as git recorded it (name and email; not verified).
    pub fn committer_of(&self, commit: Oid) -> Result<Identity> {
        let c = self
            .repo
            .find_commit(commit)
            .map_err(|e| self.git_err("read a commit", &e))?;
        let who = c.committer();
        Ok(Identity::new(
            String::from_utf8_lossy(who.name_bytes()),
            String::from_utf8_lossy(who.email_bytes()),
        ))
    }
}
