//! `sluice audit --since REV`: where on the branch's first-parent line the commits to check
//! start. REV is a commit id or a ref; it must be in the branch's history. The commits up to
//! it are not checked again: audit reads them only for what later replays need (the newest
//! format, each canary's newest sluice commit), taking sluice's commits there as the run
//! that printed REV found them.

use git2::{Oid, Repository};

use crate::gitops::objects::{git, GitError};

/// Why `--since` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SinceError {
    #[error("--since {rev}: no such commit or ref in the repository ({detail})")]
    Unknown { rev: String, detail: String },
    #[error(
        "--since {rev}: commit {id} is not an ancestor of the branch's head {head}, so there is no \"after\" it to audit (give a commit of the branch's history, e.g. the resumeSince of the last audit)"
    )]
    NotAncestor { rev: String, id: Oid, head: Oid },
    #[error(transparent)]
    Git(#[from] GitError),
}

/// The commit `rev` names, which must be `head` or an ancestor of it.
pub fn resolve(repo: &Repository, head: Oid, rev: &str) -> Result<Oid, SinceError> {
    let unknown = |e: git2::Error| SinceError::Unknown {
        rev: rev.to_string(),
        detail: e.message().to_string(),
    };
    let id = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(unknown)?
        .id();
    let ancestor = id == head
        || repo
            .graph_descendant_of(head, id)
            .map_err(git("walk the history"))?;
    if !ancestor {
        return Err(SinceError::NotAncestor {
            rev: rev.to_string(),
            id,
            head,
        });
    }
    Ok(id)
}

/// How many commits of `line` (oldest first) are `since` or its ancestors: the ones not
/// checked. Along a first-parent line ancestry only grows, so a binary search finds the
/// first commit that is neither.
pub fn checked_from(repo: &Repository, line: &[Oid], since: Oid) -> Result<usize, GitError> {
    let mut failed = None;
    let start = line.partition_point(|&oid| {
        if oid == since {
            return true;
        }
        match repo.graph_descendant_of(since, oid) {
            Ok(ancestor) => ancestor,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    });
    match failed {
        Some(e) => Err(git("walk the history")(e)),
        None => Ok(start),
    }
}
