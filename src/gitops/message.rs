//! Reading a commit's message with a bound: every reader of commit messages (the drift walk,
//! `sluice history`, `sluice audit`) goes through [`read`], so a commit whose message is
//! larger than [`MESSAGE_CAP`] is never loaded whole.
//!
//! The object's size comes from the object database's header first (libgit2 reads it without
//! inflating the object). A commit within the cap is read as usual. A larger one is read only
//! up to the end of its header lines (tree, parents, author) and its message is
//! [`Message::TooLarge`]: it carries no trailers, so nothing it says about itself is believed,
//! and sluice treats it as a commit that is not its own.
//!
//! Bound: for a loose object the header is read from a stream, so only its first bytes are
//! inflated. libgit2 cannot stream an object stored in a pack; such an object is inflated
//! once, its header kept and the rest dropped at once (never parsed, copied or cached).

use std::io::Read;

use git2::{ObjectType, Oid, Repository};

use super::change::Identity;

/// The largest commit message sluice reads (1 MiB).
pub const MESSAGE_CAP: usize = 1 << 20;

/// How much of an oversized commit's header lines are read at most (tree, parents, author
/// and committer come first; a long signature may not fit and is not needed).
const HEADER_CAP: usize = 64 << 10;

/// What sluice reads of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitHead {
    pub tree: Oid,
    /// The first parent first.
    pub parents: Vec<Oid>,
    pub author: Identity,
    /// The committer's time.
    pub time: git2::Time,
    pub message: Message,
}

/// A commit's message, or why it was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// The message (not valid UTF-8 replaced, as git shows it).
    Text(String),
    /// Larger than [`MESSAGE_CAP`]: the commit object's size in bytes.
    TooLarge(usize),
}

impl Message {
    /// The text, empty when too large (so it has no subject and no trailers).
    pub fn text(&self) -> &str {
        match self {
            Message::Text(t) => t,
            Message::TooLarge(_) => "",
        }
    }

    /// Why the message was not read, for a finding or a log line.
    pub fn refused(&self) -> Option<String> {
        match self {
            Message::Text(_) => None,
            Message::TooLarge(bytes) => Some(format!(
                "message larger than 1 MiB ({bytes} bytes): not read, so the commit is not sluice's"
            )),
        }
    }
}

/// Reads `oid`'s tree, parents, author and message, the message only up to [`MESSAGE_CAP`].
pub fn read(repo: &Repository, oid: Oid) -> Result<CommitHead, git2::Error> {
    let odb = repo.odb()?;
    let (size, kind) = odb.read_header(oid)?;
    if kind != ObjectType::Commit {
        return Err(git2::Error::from_str(&format!(
            "{oid} is a {kind}, not a commit"
        )));
    }
    if size <= MESSAGE_CAP {
        return whole(repo, oid);
    }
    let header = header_bytes(&odb, oid)?;
    if size.saturating_sub(header.len()) <= MESSAGE_CAP {
        // A large header (a signature), with a message within the cap.
        return whole(repo, oid);
    }
    parse_header(oid, &header, size)
}

fn whole(repo: &Repository, oid: Oid) -> Result<CommitHead, git2::Error> {
    let commit = repo.find_commit(oid)?;
    let author = commit.author();
    Ok(CommitHead {
        tree: commit.tree_id(),
        parents: commit.parent_ids().collect(),
        author: Identity::new(
            String::from_utf8_lossy(author.name_bytes()),
            String::from_utf8_lossy(author.email_bytes()),
        ),
        time: commit.time(),
        message: Message::Text(String::from_utf8_lossy(commit.message_bytes()).into_owned()),
    })
}

/// The object's header lines, up to the blank line that ends them (at most [`HEADER_CAP`]).
fn header_bytes(odb: &git2::Odb<'_>, oid: Oid) -> Result<Vec<u8>, git2::Error> {
    let mut out = Vec::new();
    match odb.reader(oid) {
        Ok((mut reader, _, _)) => {
            let mut chunk = [0u8; 8192];
            while out.len() < HEADER_CAP && !ends_header(&out) {
                let n = reader
                    .read(&mut chunk)
                    .map_err(|e| git2::Error::from_str(&format!("cannot read {oid}: {e}")))?;
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&chunk[..n]);
            }
        }
        // Packed: libgit2 has no stream for it.
        Err(_) => {
            let object = odb.read(oid)?;
            let data = object.data();
            out.extend_from_slice(&data[..data.len().min(HEADER_CAP)]);
        }
    }
    if let Some(end) = out.windows(2).position(|w| w == b"\n\n") {
        out.truncate(end + 1);
    }
    Ok(out)
}

fn ends_header(bytes: &[u8]) -> bool {
    bytes.windows(2).any(|w| w == b"\n\n")
}

fn parse_header(oid: Oid, header: &[u8], size: usize) -> Result<CommitHead, git2::Error> {
    let text = String::from_utf8_lossy(header);
    let bad = |what: &str| git2::Error::from_str(&format!("commit {oid}: {what}"));
    let mut tree = None;
    let mut parents = Vec::new();
    let mut author = Identity::new("", "");
    let mut time = git2::Time::new(0, 0);
    for line in text.lines() {
        if let Some(id) = line.strip_prefix("tree ") {
            tree = Some(Oid::from_str(id.trim()).map_err(|_| bad("a bad tree line"))?);
        } else if let Some(id) = line.strip_prefix("parent ") {
            parents.push(Oid::from_str(id.trim()).map_err(|_| bad("a bad parent line"))?);
        } else if let Some(who) = line.strip_prefix("author ") {
            let (name, rest) = who.split_once(" <").unwrap_or((who, ""));
            let email = rest.split_once('>').map_or("", |(e, _)| e);
            author = Identity::new(name, email);
        } else if let Some(who) = line.strip_prefix("committer ") {
            time = committer_time(who);
        }
    }
    Ok(CommitHead {
        tree: tree.ok_or_else(|| bad("no tree line"))?,
        parents,
        author,
        time,
        message: Message::TooLarge(size),
    })
}

/// The time of a `committer Name <email> 1700000000 +0100` line (zero when unreadable).
fn committer_time(who: &str) -> git2::Time {
    let mut words = who.rsplit(' ');
    let zone = words.next().unwrap_or("+0000");
    let seconds: i64 = words.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits = zone.trim_start_matches(['+', '-']);
    let hours: i32 = digits.get(..2).and_then(|h| h.parse().ok()).unwrap_or(0);
    let minutes: i32 = digits.get(2..4).and_then(|m| m.parse().ok()).unwrap_or(0);
    git2::Time::new(seconds, sign * (hours * 60 + minutes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(repo: &Repository, message: &str) -> Oid {
        let sig = git2::Signature::new("Ann", "ann@example.com", &git2::Time::new(0, 0)).unwrap();
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        let tree = repo.find_tree(tree).unwrap();
        repo.commit(None, &sig, &sig, message, &tree, &[]).unwrap()
    }

    #[test]
    fn a_message_within_the_cap_is_read_and_a_larger_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let small = commit(&repo, "subject\n\nSluice-Canary: a/b\n");
        let read_small = read(&repo, small).unwrap();
        assert_eq!(read_small.message.text(), "subject\n\nSluice-Canary: a/b\n");
        assert_eq!(read_small.message.refused(), None);
        let big_text = format!(
            "subject\n\n{}\n\nSluice-Canary: a/b\n",
            "x".repeat(MESSAGE_CAP)
        );
        let big = commit(&repo, &big_text);
        let read_big = read(&repo, big).unwrap();
        assert!(matches!(read_big.message, Message::TooLarge(n) if n > MESSAGE_CAP));
        assert_eq!(read_big.message.text(), "");
        assert!(read_big
            .message
            .refused()
            .unwrap()
            .starts_with("message larger than 1 MiB"));
        assert_eq!(read_big.tree, read_small.tree);
        assert_eq!(read_big.author, Identity::new("Ann", "ann@example.com"));
        assert!(read_big.parents.is_empty());
        assert_eq!(read_big.time, read_small.time);
    }

    #[test]
    fn a_packed_oversized_commit_still_gives_its_tree_and_parents() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let root = commit(&repo, "root\n");
        let sig = git2::Signature::new("Bo", "bo@example.com", &git2::Time::new(7, 60)).unwrap();
        let tree = repo.find_commit(root).unwrap().tree().unwrap();
        let parent = repo.find_commit(root).unwrap();
        let text = format!("big\n\n{}\n", "y".repeat(MESSAGE_CAP + 10));
        let big = repo
            .commit(None, &sig, &sig, &text, &tree, &[&parent])
            .unwrap();
        // Into a pack, and the loose objects gone: libgit2 has no stream for it.
        let mut pack = repo.packbuilder().unwrap();
        pack.insert_commit(big).unwrap();
        pack.write(&dir.path().join("objects/pack"), 0o644).unwrap();
        for id in [root, big] {
            let hex = id.to_string();
            std::fs::remove_file(dir.path().join("objects").join(&hex[..2]).join(&hex[2..]))
                .unwrap();
        }
        let repo = Repository::open_bare(dir.path()).unwrap();
        assert!(
            repo.odb().unwrap().reader(big).is_err(),
            "packed: no stream"
        );
        let read_big = read(&repo, big).unwrap();
        assert!(matches!(read_big.message, Message::TooLarge(_)));
        assert_eq!(read_big.parents, vec![root]);
        assert_eq!(read_big.tree, tree.id());
        assert_eq!(read_big.author, Identity::new("Bo", "bo@example.com"));
        assert_eq!(read_big.time, git2::Time::new(7, 60));
    }
}
