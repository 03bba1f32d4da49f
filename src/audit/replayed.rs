//! What replaying one recorded decision reads and gives back: the types [`super::replay`]
//! and the replays beside it ([`super::wave_revert`]) share, in a leaf so they need not use
//! each other.

use std::collections::BTreeMap;

use git2::{Oid, Repository};

use crate::core::decide::Decision;
use crate::gitops::{CommitMessage, FileChange};

/// The newest commits audit verified for a canary: the newest one, and the newest that is
/// not a drift hold (a hold writes only the status file, so the output is that one's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sanctioned {
    pub commit: Oid,
    pub output: Oid,
}

/// What one recorded decision, made again, writes.
pub struct Replayed {
    pub changes: Vec<FileChange>,
    pub message: CommitMessage,
    /// The decision, for the rules and operations (not for record updates and reverts).
    pub decision: Option<Decision>,
}

/// A problem making one decision again.
pub struct Problem {
    pub file: String,
    pub message: String,
}

pub(super) fn problem(file: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem {
        file: file.into(),
        message: message.into(),
    }
}

/// What a replay reads besides the parent's files.
pub struct Context<'a> {
    pub repo: &'a Repository,
    /// The commits and folders the audit read, by id.
    pub folders: &'a crate::gitops::Folders,
    /// The first parent of the commit audited.
    pub parent: Option<Oid>,
    /// The newest verified commits of each canary before `commit`.
    pub sanctioned: &'a BTreeMap<String, Sanctioned>,
}
