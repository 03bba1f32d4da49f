//! The git adapter's errors: what went wrong, and whether retrying can help.
//!
//! A leaf: every other module of the adapter imports from here, this imports none of them.

use std::path::{Path, PathBuf};

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What sluice was doing with the remote when an error happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteOp {
    Clone,
    Fetch,
    Push,
}

impl std::fmt::Display for RemoteOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RemoteOp::Clone => "clone",
            RemoteOp::Fetch => "fetch",
            RemoteOp::Push => "push",
        })
    }
}

/// Everything that can go wrong in the git adapter.
///
/// Every `remote` field holds a URL already passed through [`redact_url`](super::redact_url),
/// and every `detail` libgit2 gave for a remote operation went through
/// [`redact_text`](super::redact_text) and the credentials' own scrubbing, so these errors can
/// be logged as they are.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The remote URL cannot be used at all.
    #[error("remote URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },

    /// The remote is a local path (no scheme) where nothing is.
    #[error("no such repository path {path}: give the path of a git repository, or a URL (file://, git://, http(s)://, ssh)")]
    NoSuchPath { path: String },

    /// The branch name is not a valid git ref name.
    #[error(
        "branch `{branch}`: not a valid git branch name; use a name like `main` or `env/prod`"
    )]
    InvalidBranch { branch: String },

    /// A credential variable is set wrong (conflicting, empty, unreadable file).
    #[error("credentials: {variable}: {reason}")]
    Credentials { variable: String, reason: String },

    /// The work dir cannot hold the clone (not empty, another remote, not a repo).
    #[error("work dir {}: {reason}", path.display())]
    Workdir { path: PathBuf, reason: String },

    /// The remote refused our credentials, or we had none to offer.
    #[error(
        "{op} {remote}: authentication failed: {detail}; for https set SLUICE_GIT_TOKEN \
         (or SLUICE_GIT_USERNAME and SLUICE_GIT_PASSWORD), for ssh set SLUICE_GIT_SSH_KEY, \
         and check that the credential may {op} this repository"
    )]
    Auth {
        remote: String,
        op: RemoteOp,
        detail: String,
    },

    /// The server's TLS certificate or ssh host key was not accepted.
    #[error(
        "{op} {remote}: the server's identity was not accepted: {detail}; for ssh add the \
         server's host key to SLUICE_GIT_KNOWN_HOSTS(_FILE) (else ~/.ssh/known_hosts is read), \
         for https install the CA certificate"
    )]
    HostKey {
        remote: String,
        op: RemoteOp,
        detail: String,
    },

    /// The remote could not be reached or failed temporarily (connection refused, timeout,
    /// HTTP 5xx). Transient: retry later.
    #[error("{op} {remote}: cannot reach the remote: {detail}")]
    Network {
        remote: String,
        op: RemoteOp,
        detail: String,
    },

    /// The server answered but refused the request (no such repository, protocol error).
    #[error("{op} {remote}: the server refused the request: {detail}; check the URL and that the repository exists")]
    Remote {
        remote: String,
        op: RemoteOp,
        detail: String,
    },

    /// The configured branch does not exist on the remote.
    #[error(
        "fetch {remote}: branch `{branch}` does not exist on the remote; create it with an \
         initial commit or fix the branch name"
    )]
    BranchNotFound { remote: String, branch: String },

    /// The server rejected our ref update for a reason other than someone else pushing first
    /// (protected branch, pre-receive hook). Terminal: retrying will not help.
    #[error("push {remote}: the server rejected the update of {refname}: {reason}; check branch protection rules and server hooks")]
    PushRefused {
        remote: String,
        refname: String,
        reason: String,
    },

    /// Every push attempt was beaten by another writer. Transient: the next reconcile retries.
    #[error("push {remote}: branch `{branch}` kept moving; gave up after {attempts} attempts")]
    PushRetriesExhausted {
        remote: String,
        branch: String,
        attempts: u32,
    },

    /// A path in a [`FileChange`](super::FileChange) is not a plain repo-relative path.
    #[error("path `{path}`: {reason}")]
    InvalidPath { path: String, reason: String },

    /// A [`CommitMessage`](super::CommitMessage) cannot be rendered into a message git reads
    /// back the same way.
    #[error("commit message: {reason}")]
    InvalidMessage { reason: String },

    /// An [`Identity`](super::Identity) cannot be used as a git signature.
    #[error("identity `{name} <{email}>`: {reason}")]
    InvalidIdentity {
        name: String,
        email: String,
        reason: String,
    },

    /// Reading or writing a file in the work tree failed.
    #[error("{}: cannot {op}: {source}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// The clone's own files are damaged (missing or corrupt objects, a garbage index or ref):
    /// what sluice says when cloning afresh did not help either.
    #[error(
        "the clone in {} is damaged: {detail}; sluice clones afresh when it finds this, so if \
         it persists check the disk, or delete the directory",
        path.display()
    )]
    Damaged { path: PathBuf, detail: String },

    /// A local git operation failed (corrupt repo, lock held by another process).
    #[error("{}: git {op} failed: {detail}", path.display())]
    Git {
        path: PathBuf,
        op: &'static str,
        detail: String,
    },

    /// Signing a commit failed.
    #[error("signing with {}: {reason}", key_path.display())]
    Signing { key_path: PathBuf, reason: String },
}

impl Error {
    /// True when the error says the clone's own files are broken, so that cloning afresh
    /// helps: [`Error::Damaged`], or any local git failure in the clone ([`Error::Git`]).
    pub(super) fn is_local_damage(&self) -> bool {
        matches!(self, Error::Damaged { .. } | Error::Git { .. })
    }

    /// A local libgit2 failure in the clone at `path`: no remote involved, so libgit2's words
    /// hold no URL or credential.
    pub(super) fn git(path: &Path, op: &'static str, e: &git2::Error) -> Error {
        Error::Git {
            path: path.to_path_buf(),
            op,
            detail: e.message().to_string(),
        }
    }

    /// True when retrying the same operation later can succeed without anyone changing the
    /// configuration: network trouble, or a branch that kept moving under us.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Network { .. } | Error::PushRetriesExhausted { .. } => true,
            Error::InvalidUrl { .. }
            | Error::NoSuchPath { .. }
            | Error::InvalidBranch { .. }
            | Error::Credentials { .. }
            | Error::Workdir { .. }
            | Error::Auth { .. }
            | Error::HostKey { .. }
            | Error::Remote { .. }
            | Error::BranchNotFound { .. }
            | Error::PushRefused { .. }
            | Error::InvalidPath { .. }
            | Error::InvalidMessage { .. }
            | Error::InvalidIdentity { .. }
            | Error::Io { .. }
            | Error::Damaged { .. }
            | Error::Git { .. }
            | Error::Signing { .. } => false,
        }
    }

    /// A short stable label for metrics (`sluice_git_errors_total{kind="auth"}`).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidUrl { .. } => "invalid_url",
            Error::NoSuchPath { .. } => "no_such_path",
            Error::InvalidBranch { .. } => "invalid_branch",
            Error::Credentials { .. } => "credentials",
            Error::Workdir { .. } => "workdir",
            Error::Auth { .. } => "auth",
            Error::HostKey { .. } => "host_key",
            Error::Network { .. } => "network",
            Error::Remote { .. } => "remote",
            Error::BranchNotFound { .. } => "branch_not_found",
            Error::PushRefused { .. } => "push_refused",
            Error::PushRetriesExhausted { .. } => "push_retries_exhausted",
            Error::InvalidPath { .. } => "invalid_path",
            Error::InvalidMessage { .. } => "invalid_message",
            Error::InvalidIdentity { .. } => "invalid_identity",
            Error::Io { .. } => "io",
            Error::Damaged { .. } => "damaged",
            Error::Git { .. } => "git",
            Error::Signing { .. } => "signing",
        }
    }
}
