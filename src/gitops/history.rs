//! Reading the branch's history back: git history is sluice's audit log, and trailers such as
//! `Sluice-Canary: prod/podinfo` tie commits to canaries.
//!
//! Trailers are parsed by libgit2's port of git's own trailer parser (the last paragraph of
//! `Key: value` lines), so we read exactly what `git interpret-trailers --parse` reads.

use std::path::Path;

use git2::{Oid, Repository, Sort, Time};

use super::change::Identity;
use super::error::{Error, Result};
use super::repo::ConfigRepo;

/// One commit of the branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub oid: Oid,
    /// Committer time.
    pub time: Time,
    pub author: Identity,
    pub subject: String,
    pub trailers: Vec<(String, String)>,
}

/// The trailers of one group: from the `key: value` trailer up to the next `key` trailer. A
/// commit that holds several canaries' decisions has a group per canary, each starting at its
/// `Sluice-Canary`. Without a matching trailer the whole list is returned.
pub fn trailer_group<'a>(
    trailers: &'a [(String, String)],
    key: &str,
    value: &str,
) -> &'a [(String, String)] {
    let Some(start) = trailers
        .iter()
        .position(|(k, v)| k.eq_ignore_ascii_case(key) && v == value)
    else {
        return trailers;
    };
    let end = trailers[start + 1..]
        .iter()
        .position(|(k, _)| k.eq_ignore_ascii_case(key))
        .map_or(trailers.len(), |i| start + 1 + i);
    &trailers[start..end]
}

/// The trailers of a commit message, in order, the way git parses them.
pub fn parse_trailers(message: &str) -> Vec<(String, String)> {
    match git2::message_trailers_strs(message) {
        Ok(trailers) => trailers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        // Only fails on a NUL byte in the message; such a message has no usable trailers.
        Err(_) => Vec::new(),
    }
}

impl ConfigRepo {
    /// Up to `limit` commits reachable from the local head, newest first. With
    /// `filter_trailer = Some((key, value))` only commits carrying that trailer are returned
    /// (the key compared case-insensitively as git does, the value exactly).
    pub fn history(
        &self,
        filter_trailer: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>> {
        walk(&self.repo, self.head, filter_trailer, limit).map_err(|(op, e)| self.git_err(op, &e))
    }
}

/// [`ConfigRepo::history`] of `branch` in the repository at `dir` (bare or with a work tree),
/// read in place: nothing is cloned, fetched or written.
pub fn local_history(
    dir: &Path,
    branch: &str,
    filter_trailer: Option<(&str, &str)>,
    limit: usize,
) -> Result<Vec<HistoryEntry>> {
    read_at(dir, Start::Branch(branch), filter_trailer, limit)
}

/// [`local_history`] from the commit `head` of the repository at `dir` (the dashboard reads
/// the commit it cached, whatever the branch moved to since).
pub fn history_at(
    dir: &Path,
    head: Oid,
    filter_trailer: Option<(&str, &str)>,
    limit: usize,
) -> Result<Vec<HistoryEntry>> {
    read_at(dir, Start::Commit(head), filter_trailer, limit)
}

/// Where a history read starts.
enum Start<'a> {
    Branch(&'a str),
    Commit(Oid),
}

/// The history from `from`: a branch's head, or a commit.
fn read_at(
    dir: &Path,
    from: Start<'_>,
    filter_trailer: Option<(&str, &str)>,
    limit: usize,
) -> Result<Vec<HistoryEntry>> {
    let err = |op: &'static str, e: &git2::Error| Error::Git {
        path: dir.to_path_buf(),
        op,
        detail: e.message().to_string(),
    };
    let repo = Repository::open(dir).map_err(|e| err("open the repository", &e))?;
    let head = match from {
        Start::Branch(branch) => repo
            .revparse_single(&format!("refs/heads/{branch}"))
            .and_then(|o| o.peel_to_commit())
            .map_err(|e| err("find the branch", &e))?
            .id(),
        Start::Commit(oid) => oid,
    };
    walk(&repo, head, filter_trailer, limit).map_err(|(op, e)| err(op, &e))
}

fn walk(
    repo: &Repository,
    head: Oid,
    filter_trailer: Option<(&str, &str)>,
    limit: usize,
) -> std::result::Result<Vec<HistoryEntry>, (&'static str, git2::Error)> {
    let mut entries = Vec::new();
    if limit == 0 {
        return Ok(entries);
    }
    let walking = |e| ("walk history", e);
    let mut walk = repo.revwalk().map_err(walking)?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME)
        .map_err(walking)?;
    walk.push(head).map_err(walking)?;
    for oid in walk {
        let oid = oid.map_err(walking)?;
        let commit = super::message::read(repo, oid).map_err(|e| ("read a commit", e))?;
        let message = commit.message.text();
        let trailers = parse_trailers(message);
        if let Some((key, value)) = filter_trailer {
            let matches = trailers
                .iter()
                .any(|(k, v)| k.eq_ignore_ascii_case(key) && v == value);
            if !matches {
                continue;
            }
        }
        entries.push(HistoryEntry {
            oid,
            time: commit.time,
            author: commit.author.clone(),
            subject: message
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
            trailers,
        });
        if entries.len() >= limit {
            break;
        }
    }
    Ok(entries)
}

/// What the drift check reads of one commit: its parents (the first parent first), its
/// trailers, and who wrote it with what subject (to name it in a message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitFacts {
    pub parents: Vec<Oid>,
    pub trailers: Vec<(String, String)>,
    pub author: Identity,
    pub subject: String,
}

impl ConfigRepo {
    /// The parents, trailers, author and subject of `commit`.
    pub fn commit_facts(&self, commit: Oid) -> Result<CommitFacts> {
        let c = super::message::read(&self.repo, commit)
            .map_err(|e| self.git_err("read a commit", &e))?;
        let message = c.message.text();
        Ok(CommitFacts {
            parents: c.parents,
            trailers: parse_trailers(message),
            author: c.author,
            subject: message
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
        })
    }

    /// The id of what `path` (a file or a folder, `/`-separated) names in `commit`: equal ids,
    /// equal content. `None` when the path is absent there.
    pub fn entry_id_at(&self, commit: Oid, path: &str) -> Result<Option<Oid>> {
        let tree = self
            .repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| self.git_err("read a commit", &e))?;
        match tree.get_path(Path::new(path)) {
            Ok(entry) => Ok(Some(entry.id())),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(self.git_err("look up a path", &e)),
        }
    }

    /// The files `commit` changed against `parent` (added, removed or changed; every file of
    /// the commit without a parent), in tree order.
    ///
    /// Compares the two trees entry by entry and descends only into folders whose ids differ,
    /// building a path only for what changed: the drift check runs this over hundreds of
    /// commits a tick, where libgit2's diff joined a path for every entry it passed.
    pub fn changed_paths(&self, commit: Oid, parent: Option<Oid>) -> Result<Vec<String>> {
        // The tree id through the capped reader: the walk never reads a huge message whole.
        let tree = |oid: Oid| {
            super::message::read(&self.repo, oid)
                .and_then(|c| self.repo.find_tree(c.tree))
                .map_err(|e| self.git_err("read a commit", &e))
        };
        let new = tree(commit)?;
        let old = parent.map(tree).transpose()?;
        let differs = super::tree_diff(&self.repo, &self.folders, old.as_ref(), Some(&new))
            .map_err(|e| self.git_err("compare two commits", &e))?;
        Ok(differs.iter().map(super::Differs::path_lossy).collect())
    }

    /// The files at or under `path` whose content differs between the commits `from` and
    /// `to` (added, removed or changed), sorted.
    pub fn changed_files(&self, from: Oid, to: Oid, path: &str) -> Result<Vec<String>> {
        let tree = |oid: Oid| {
            self.repo
                .find_commit(oid)
                .and_then(|c| c.tree())
                .map_err(|e| self.git_err("read a commit", &e))
        };
        let (a, b) = (tree(from)?, tree(to)?);
        let diff = super::tree_diff_under(&self.repo, &self.folders, Some(&a), Some(&b), path)
            .map_err(|e| self.git_err("compare two commits", &e))?;
        let mut files: Vec<String> = diff.iter().map(super::Differs::path_lossy).collect();
        files.sort();
        files.dedup();
        Ok(files)
    }
}

impl ConfigRepo {
    /// True when `commit` is `ancestor` or one of its descendants (both full hex ids known
    /// locally); false when either is unknown here.
    pub fn is_descendant_or_self(&self, commit: &str, ancestor: &str) -> bool {
        let (Ok(c), Ok(a)) = (Oid::from_str(commit), Oid::from_str(ancestor)) else {
            return false;
        };
        c == a || self.repo.graph_descendant_of(c, a).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_come_from_the_last_paragraph_only() {
        let msg = "Subject\n\nBody: not a trailer\nmore body\n\nSluice-Canary: prod/podinfo\nSluice-Weight: 20\n";
        assert_eq!(
            parse_trailers(msg),
            vec![
                ("Sluice-Canary".to_string(), "prod/podinfo".to_string()),
                ("Sluice-Weight".to_string(), "20".to_string()),
            ]
        );
        assert!(
            parse_trailers("Key: value\n").is_empty(),
            "a subject is never a trailer"
        );
        assert!(parse_trailers("S\n\nfree text\n").is_empty());
    }

    #[test]
    fn a_group_runs_from_its_key_to_the_next() {
        let t = |k: &str, v: &str| (k.to_string(), v.to_string());
        let all = vec![
            t("Sluice-Canary", "a/one"),
            t("Sluice-Step", "1/2"),
            t("Sluice-Canary", "a/two"),
            t("Sluice-Step", "2/2"),
        ];
        assert_eq!(trailer_group(&all, "sluice-canary", "a/one"), &all[..2]);
        assert_eq!(trailer_group(&all, "Sluice-Canary", "a/two"), &all[2..]);
        assert_eq!(trailer_group(&all, "Sluice-Canary", "a/none"), &all[..]);
        assert_eq!(
            trailer_group(&all[..2], "Sluice-Canary", "a/one"),
            &all[..2]
        );
    }
}
