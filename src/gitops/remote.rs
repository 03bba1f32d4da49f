//! Talking to the remote. Every fetch, listing and push, for the main branch and approval
//! branches alike, goes through [`Remote`], so each one offers the same credentials, honours
//! the same proxy settings (`http.proxy`, `remote.origin.proxy`, `https_proxy`, as git does)
//! and reports failures in the same words.
//!
//! Knows nothing of branches' meaning, work trees or commits.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use git2::{
    AutotagOption, Direction, ErrorClass, ErrorCode, FetchOptions, FetchPrune, Oid, ProxyOptions,
    PushOptions, RemoteCallbacks, Repository,
};

use super::credentials::{redact_url, AuthSession, Credentials};
use super::error::{Error, RemoteOp, Result};
use crate::url_credentials::UrlKind;

/// The name of the one remote a sluice clone has.
pub(super) const ORIGIN: &str = "origin";

/// The remote `origin` of a clone, with the credentials to offer it.
pub(super) struct Remote<'a> {
    pub(super) repo: &'a Repository,
    /// The clone, named in local errors.
    pub(super) root: &'a Path,
    /// The URL as stored in `.git/config` (no credentials), named in errors once redacted.
    pub(super) url: &'a str,
    pub(super) creds: &'a Credentials,
    /// Runs after the remote's refs were read and before its branch is updated (tests race a
    /// human push into that window).
    pub(super) before_update: Option<&'a (dyn Fn() + Send + Sync)>,
}

/// What the server did with a push.
pub(super) enum Pushed {
    /// The server answered for each ref: `(refname, None)` when updated, `Some(reason)` when
    /// refused (reason scrubbed of credentials).
    Answered(Vec<(String, Option<String>)>),
    /// libgit2 saw before sending that the remote ref is not an ancestor of ours (reason
    /// scrubbed of credentials).
    NotFastForward(String),
}

impl Remote<'_> {
    /// Fetches `refspecs`, with tags left alone and, with `prune`, tracking refs of branches
    /// gone from the remote removed.
    pub(super) fn fetch(
        &self,
        op: RemoteOp,
        refspecs: &[&str],
        prune: bool,
        reflog: &str,
    ) -> Result<()> {
        let mut remote = self.find()?;
        let session = AuthSession::default();
        let mut opts = FetchOptions::new();
        opts.remote_callbacks(self.callbacks(&session))
            .proxy_options(proxy())
            .download_tags(AutotagOption::None)
            .prune(if prune {
                FetchPrune::On
            } else {
                FetchPrune::Unspecified
            });
        remote
            .fetch(refspecs, Some(&mut opts), Some(reflog))
            .map_err(|e| self.error(op, &e, &session))
    }

    /// The remote's refs and what they point at (`git ls-remote`).
    pub(super) fn list(&self) -> Result<Vec<(String, Oid)>> {
        let mut remote = self.find()?;
        let session = AuthSession::default();
        let connection = remote
            .connect_auth(
                Direction::Fetch,
                Some(self.callbacks(&session)),
                Some(proxy()),
            )
            .map_err(|e| self.error(RemoteOp::Fetch, &e, &session))?;
        let heads = connection
            .list()
            .map_err(|e| self.error(RemoteOp::Fetch, &e, &session))?;
        Ok(heads
            .iter()
            .map(|h| (h.name().to_string(), h.oid()))
            .collect())
    }

    /// Pushes `refspecs` and collects the server's answer for each ref.
    pub(super) fn push(&self, refspecs: &[&str]) -> Result<Pushed> {
        let mut remote = self.find()?;
        let session = AuthSession::default();
        let statuses: RefCell<Vec<(String, Option<String>)>> = RefCell::new(Vec::new());
        let mut callbacks = self.callbacks(&session);
        if let Some(hook) = self.before_update {
            callbacks.push_negotiation(move |_| {
                hook();
                Ok(())
            });
        }
        callbacks.push_update_reference(|name, status| {
            statuses
                .borrow_mut()
                .push((name.to_string(), status.map(|s| self.creds.scrub(s))));
            Ok(())
        });
        let mut opts = PushOptions::new();
        // 0: one delta-search thread per core (many commits of a tick make a big pack).
        opts.remote_callbacks(callbacks)
            .proxy_options(proxy())
            .packbuilder_parallelism(0);
        match remote.push(refspecs, Some(&mut opts)) {
            Ok(()) => {}
            Err(e) if e.code() == ErrorCode::NotFastForward => {
                return Ok(Pushed::NotFastForward(self.creds.scrub(e.message())))
            }
            Err(e) => return Err(self.error(RemoteOp::Push, &e, &session)),
        }
        drop(opts);
        Ok(Pushed::Answered(statuses.into_inner()))
    }

    /// Pushes `head` to `refname` on the remote as a fast-forward only, never by force.
    ///
    /// Over the network the server's receive-pack compares and swaps the ref. libgit2's local
    /// transport does not: it checks the fast-forward against the refs it read when it
    /// connected and then overwrites the ref, so a commit another writer pushed in between is
    /// lost. A local-path or `file://` remote is therefore written here: the objects first,
    /// then the ref with the value it had when read as the expected old value.
    pub(super) fn push_fast_forward(&self, refname: &str, head: Oid) -> Result<Pushed> {
        match self.local_path() {
            Some(path) => self.push_local(&path, refname, head),
            None => self.push(&[&format!("{refname}:{refname}")]),
        }
    }

    /// The repository a local-path or `file://` remote names; `None` for network remotes.
    fn local_path(&self) -> Option<PathBuf> {
        let clean = crate::url_credentials::strip_userinfo(self.url).ok()?;
        match clean.kind {
            UrlKind::Local => Some(PathBuf::from(self.url)),
            UrlKind::File => url::Url::parse(self.url).ok()?.to_file_path().ok(),
            UrlKind::Git | UrlKind::Http | UrlKind::Ssh => None,
        }
    }

    fn push_local(&self, path: &Path, refname: &str, head: Oid) -> Result<Pushed> {
        let remote_err = |what: &str, e: &git2::Error| Error::Remote {
            remote: self.redacted(),
            op: RemoteOp::Push,
            detail: format!("{what}: {}", self.creds.scrub(e.message())),
        };
        let remote = Repository::open(path).map_err(|e| remote_err("cannot open", &e))?;
        let old = match remote.refname_to_id(refname) {
            Ok(old) => Some(old),
            Err(e) if e.code() == ErrorCode::NotFound => None,
            Err(e) => return Err(remote_err("cannot read the branch", &e)),
        };
        let updated = Pushed::Answered(vec![(refname.to_string(), None)]);
        if let Some(old) = old {
            if old == head {
                return Ok(updated);
            }
            // An `old` the clone does not have is a commit someone else pushed.
            let descends = self.repo.find_commit(old).is_ok()
                && self
                    .repo
                    .graph_descendant_of(head, old)
                    .map_err(|e| Error::Damaged {
                        path: self.root.to_path_buf(),
                        detail: format!("cannot walk the history to push: {}", e.message()),
                    })?;
            if !descends {
                return Ok(Pushed::NotFastForward(format!(
                    "{refname} on the remote is at {old}, not an ancestor of {head}"
                )));
            }
        }
        let local_err = |e: git2::Error| Error::Damaged {
            path: self.root.to_path_buf(),
            detail: format!("cannot pack the objects to push: {}", e.message()),
        };
        let mut walk = self.repo.revwalk().map_err(local_err)?;
        walk.push(head).map_err(local_err)?;
        if let Some(old) = old {
            walk.hide(old).map_err(local_err)?;
        }
        let mut builder = self.repo.packbuilder().map_err(local_err)?;
        // 0: one delta-search thread per core, as a network push does (`packbuilder_parallelism`).
        builder.set_threads(0);
        builder.insert_walk(&mut walk).map_err(local_err)?;
        if builder.object_count() > 0 {
            let odb = remote
                .odb()
                .map_err(|e| remote_err("cannot open the object store", &e))?;
            let mut writer = odb
                .packwriter()
                .map_err(|e| remote_err("cannot write objects", &e))?;
            let mut written = Ok(());
            builder
                .foreach(|chunk| {
                    written = std::io::Write::write_all(&mut writer, chunk);
                    written.is_ok()
                })
                .map_err(local_err)?;
            written.map_err(|e| Error::Remote {
                remote: self.redacted(),
                op: RemoteOp::Push,
                detail: format!("cannot write objects: {e}"),
            })?;
            writer
                .commit()
                .map_err(|e| remote_err("cannot write objects", &e))?;
        }
        if let Some(hook) = self.before_update {
            hook();
        }
        let message = "push (sluice)";
        let update = || match old {
            Some(old) => remote.reference_matching(refname, head, true, old, message),
            None => remote.reference(refname, head, false, message),
        };
        let mut swapped = update();
        if swapped
            .as_ref()
            .is_err_and(|e| e.code() == ErrorCode::Locked)
            && remove_stale_ref_lock(path, refname)
        {
            swapped = update();
        }
        match swapped {
            Ok(_) => Ok(updated),
            // Someone else moved (or holds) the ref since we read it: a lost race, not a
            // refusal. The words match what receive-pack says, so the caller retries.
            Err(e)
                if matches!(
                    e.code(),
                    ErrorCode::Modified | ErrorCode::Exists | ErrorCode::Locked
                ) =>
            {
                Ok(Pushed::Answered(vec![(
                    refname.to_string(),
                    Some(format!(
                        "failed to update ref: {}",
                        self.creds.scrub(e.message())
                    )),
                )]))
            }
            Err(e) => Err(remote_err("cannot update the branch", &e)),
        }
    }

    /// The URL for errors and logs.
    pub(super) fn redacted(&self) -> String {
        redact_url(self.url)
    }

    fn find(&self) -> Result<git2::Remote<'_>> {
        self.repo.find_remote(ORIGIN).map_err(|e| Error::Git {
            path: self.root.to_path_buf(),
            op: "find remote",
            detail: self.creds.scrub(e.message()),
        })
    }

    fn callbacks<'s>(&'s self, session: &'s AuthSession) -> RemoteCallbacks<'s> {
        let mut callbacks = RemoteCallbacks::new();
        self.creds
            .install(&mut callbacks, session, ssh_port(self.url));
        callbacks
    }

    /// Classifies a libgit2 failure during a network operation.
    pub(super) fn error(&self, op: RemoteOp, e: &git2::Error, session: &AuthSession) -> Error {
        let remote = self.redacted();
        let mut detail = self.creds.scrub(e.message());
        // A socket read or write that hit the git timeout, as the TLS layer words it.
        if detail.contains("Resource temporarily unavailable") {
            detail.push_str(" (timed out waiting for the server)");
        }
        if let Some(why) = session.host_key_failure() {
            return Error::HostKey {
                remote,
                op,
                detail: why,
            };
        }
        if let Some(why) = session.failure() {
            return Error::Auth {
                remote,
                op,
                detail: why,
            };
        }
        // A clone has no objects or refs of its own to be damaged yet: its errors are the
        // remote's.
        if op != RemoteOp::Clone && is_local_damage(e) {
            return Error::Damaged {
                path: self.root.to_path_buf(),
                detail,
            };
        }
        match classify(e) {
            Class::Auth => Error::Auth { remote, op, detail },
            Class::HostKey => Error::HostKey { remote, op, detail },
            Class::Network => Error::Network { remote, op, detail },
            Class::Remote => Error::Remote { remote, op, detail },
        }
    }
}

/// The port of an ssh remote URL: the one `ssh://host:PORT/…` names, else 22 (also for the
/// scp-like `user@host:path`, which cannot name one).
fn ssh_port(url: &str) -> u16 {
    url::Url::parse(url)
        .ok()
        .filter(|u| u.scheme().contains("ssh"))
        .and_then(|u| u.port())
        .unwrap_or(super::known_hosts::DEFAULT_SSH_PORT)
}

/// The proxy git would use: `remote.origin.proxy`, `http.proxy`, then the `http(s)_proxy`
/// variables (with `no_proxy`). libgit2 goes through a proxy for https remotes only (a
/// `CONNECT` tunnel).
fn proxy() -> ProxyOptions<'static> {
    let mut proxy = ProxyOptions::new();
    proxy.auto();
    proxy
}

enum Class {
    Auth,
    HostKey,
    Network,
    Remote,
}

fn classify(e: &git2::Error) -> Class {
    match e.code() {
        ErrorCode::Auth => return Class::Auth,
        ErrorCode::Certificate => return Class::HostKey,
        ErrorCode::Timeout => return Class::Network,
        _ => {}
    }
    let message = e.message().to_ascii_lowercase();
    if let Some(status) = http_status(&message) {
        return match status {
            401 | 403 => Class::Auth,
            408 | 429 | 500..=599 => Class::Network,
            _ => Class::Remote,
        };
    }
    // The server said no in words (git daemon: "access denied or repository not exported").
    if [
        "remote error",
        "not found",
        "not exported",
        "not appear to be a git repository",
        // What libgit2 says for a local path that does not exist.
        "unsupported url protocol",
    ]
    .iter()
    .any(|m| message.contains(m))
    {
        return Class::Remote;
    }
    match e.class() {
        ErrorClass::Net | ErrorClass::Os | ErrorClass::Ssh | ErrorClass::Ssl | ErrorClass::Http => {
            Class::Network
        }
        _ => Class::Remote,
    }
}

/// A failure reading the clone's own object store, index or refs during a fetch (a corrupt
/// pack inflates with "incorrect header check", a garbage HEAD is a "corrupted loose
/// reference file"), which libgit2 reports like any fetch error.
fn is_local_damage(e: &git2::Error) -> bool {
    matches!(
        e.class(),
        ErrorClass::Odb
            | ErrorClass::Zlib
            | ErrorClass::Object
            | ErrorClass::Index
            | ErrorClass::Reference
            | ErrorClass::Tree
    )
}

/// The status in libgit2's "unexpected http status code: 404".
fn http_status(message: &str) -> Option<u16> {
    let rest = &message[message.find("status code: ")? + "status code: ".len()..];
    rest.get(..3)?.parse().ok()
}

/// How old a ref's lock file in a local-path remote must be before a push removes it. A
/// writer holds it for the milliseconds of one update; one killed in that window (sluice
/// under `kill -9`, or anyone else) leaves it behind, and then every later push to the branch,
/// sluice's and the humans', fails with "cannot lock ref" until someone deletes it.
pub const STALE_REF_LOCK: std::time::Duration = std::time::Duration::from_secs(10);

/// Removes `<remote>/<refname>.lock` when it is older than [`STALE_REF_LOCK`]; returns
/// whether it did (logged). A fresh lock is someone's update in flight and is left alone: the
/// push then loses the race like any other and is retried after the next fetch.
fn remove_stale_ref_lock(remote: &Path, refname: &str) -> bool {
    let lock = remote.join(format!("{refname}.lock"));
    let Ok(age) = std::fs::symlink_metadata(&lock)
        .and_then(|m| m.modified())
        .map(|modified| modified.elapsed().unwrap_or_default())
    else {
        return false;
    };
    if age < STALE_REF_LOCK {
        return false;
    }
    match std::fs::remove_file(&lock) {
        Ok(()) => {
            tracing::warn!(
                lock = %lock.display(),
                age_secs = age.as_secs(),
                "removed a stale ref lock in the local remote (a writer was killed mid-update)"
            );
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_status_is_read_from_libgit2_messages() {
        assert_eq!(http_status("unexpected http status code: 404"), Some(404));
        assert_eq!(http_status("unexpected http status code: 50"), None);
        assert_eq!(http_status("connection refused"), None);
    }

    #[test]
    fn classification_separates_transient_from_terminal() {
        let e = git2::Error::new(
            ErrorCode::GenericError,
            ErrorClass::Http,
            "unexpected http status code: 503",
        );
        assert!(matches!(classify(&e), Class::Network));
        let e = git2::Error::new(
            ErrorCode::GenericError,
            ErrorClass::Http,
            "unexpected http status code: 404",
        );
        assert!(matches!(classify(&e), Class::Remote));
        let e = git2::Error::new(
            ErrorCode::GenericError,
            ErrorClass::Http,
            "unexpected http status code: 403",
        );
        assert!(matches!(classify(&e), Class::Auth));
        let e = git2::Error::new(
            ErrorCode::GenericError,
            ErrorClass::Net,
            "failed to connect: Connection refused",
        );
        assert!(matches!(classify(&e), Class::Network));
        let e = git2::Error::new(
            ErrorCode::Certificate,
            ErrorClass::Ssh,
            "invalid or unknown remote ssh hostkey",
        );
        assert!(matches!(classify(&e), Class::HostKey));
    }
}
