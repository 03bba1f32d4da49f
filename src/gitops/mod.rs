//! The git adapter: a persistent local clone of the config repo that sluice commits route
//! changes to and pushes without ever forcing.
//!
//! This module only moves bytes between the clone's object database and a remote: clone,
//! fetch (the local branch moved to the remote head; the clone is bare, nothing is ever
//! checked out), commit files (trees written directly), push, read files and history. It knows nothing about canaries, weights
//! or YAML; the rollout logic decides *what* to write and calls in here to write it.
//!
//! Credentials come from the environment ([`Credentials::from_env`]) and live only in memory:
//! they are stripped from URLs before anything is written to `.git/config`, and every URL in an
//! error message or log line goes through [`redact_url`].
//!
//! A clone whose own files are damaged is moved aside and cloned afresh on open or fetch
//! ([`Error::Damaged`] when even that fails). Every git network operation is bounded by
//! [`set_network_timeout`].
//!
//! Errors separate transient failures (network, a branch that kept moving) from terminal ones
//! (bad credentials, bad input) through [`Error::is_transient`].

//! Modules, leaves first; each imports only modules above it in this list, so no two import
//! each other:
//!
//! - `error`: [`Error`], [`RemoteOp`]. `change`: the inputs of a commit ([`FileChange`],
//!   [`Identity`], [`CommitMessage`]). `sign`: [`Signing`]. `known_hosts`: [`KnownHosts`],
//!   the ssh host keys trusted. `credentials` (holds the known hosts). `trees`: the trees of
//!   a commit, with the folders already read kept parsed.
//! - `commit`: the one function that writes a commit (main and approval branches alike).
//!   `migrate`: a clone with a work tree (an older sluice's) made bare. `ownership`: whose
//!   repository a work dir holds (sluice's marker, an older sluice's layout, or someone's). `lookup`: a path of
//!   a commit looked up in its trees, and the link checks of a commit's paths. `remote`: every fetch, listing and
//!   push, with credentials and proxy. `memory`: the tick's in-memory object store.
//!   `message`: a commit's message read up to a cap. `objects`: history read from the object
//!   database (first-parent line, changes, files, trees written out) for audit and drift. `maintenance`: repacking. `locks`: stale lock files a killed process left. `timeouts`: libgit2's network
//!   timeouts. `object_cache`: the bound on libgit2's object cache.
//! - `repo`: [`ConfigRepo`], the clone, built on all of the above.
//! - `paths_at` (the repository, folders and trees the readers of a commit's files take),
//!   `push`, `branch` (approval branches), `history`: more of [`ConfigRepo`], built on `repo`.

pub mod app_token;
mod branch;
mod change;
mod commit;
mod credentials;
mod error;
mod folders;
mod history;
mod known_hosts;
mod locks;
mod lookup;
mod maintenance;
mod memory;
pub mod message;
mod migrate;
mod object_cache;
pub mod objects;
mod ownership;
mod paths_at;
mod push;
mod remote;
mod repo;
mod sign;
mod timeouts;
mod tree_diff;
mod trees;

pub use branch::APPROVAL_PREFIX;
pub use change::{CommitMessage, FileChange, Identity};
pub use credentials::{redact_text, redact_url, Credentials};
pub use error::{Error, RemoteOp, Result};
pub use folders::Folders;
pub use history::{
    history_at, local_history, parse_trailers, trailer_group, CommitFacts, HistoryEntry,
};
pub use known_hosts::KnownHosts;
pub use lookup::PathEntry;
pub use object_cache::{limit_object_cache, OBJECT_CACHE_BYTES};
pub use ownership::resolve_workdir;
pub use push::PushOutcome;
pub use remote::STALE_REF_LOCK;
pub use repo::ConfigRepo;
pub use sign::Signing;
pub use timeouts::{set_network_timeout, DEFAULT_NETWORK_TIMEOUT};
pub use tree_diff::{index_entry, tree_diff, tree_diff_under, Differs};
#[cfg(test)]
pub(crate) use tree_diff::{tree_of, tree_with_modes};

pub use git2::{Oid, Time};
