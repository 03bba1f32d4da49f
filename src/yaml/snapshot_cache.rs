//! Parsed files kept from one snapshot to the next, keyed by git blob id: a daemon's tick reads
//! and parses only the files whose content it has not parsed yet (those the fetched commits
//! changed), and takes every other file's parse from the last tick.
//!
//! The caller lists the files of the commit (names, blob ids, which are links: see
//! `gitops::TreeFile`) in the walk's order; [`Parses::snapshot`] builds the same
//! [`Snapshot`] a walk of the checked-out commit would, taking the parse of every blob someone
//! still holds. Parses are held by the snapshots (weakly here), so they never outgrow what is
//! held. Files that could not be read are not kept (a read may fail for a reason that passes);
//! a link is never read at all.
//!
//! A daemon keeps more: [`KeptSnapshot`] is the last tick's snapshot itself, moved to the next
//! commit by the files that differ between the two (a tree diff), so a tick over a large repo
//! with one changed file lists, reads and indexes that one file only.
//!
//! Knows blob ids as opaque strings: nothing here reads git. Parses are shared by blob id with
//! every other holder of the same [`Parses`] (one per runtime).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};

use super::snapshot::{parse, walks_before, Contents, File, ReadError, Snapshot};

/// Every parse someone still holds, by blob id: the tick's snapshot and the drift verifier's
/// base (`commit_files.rs`) each hold the files of a commit, mostly the same blobs; through
/// one `Parses` (the runtime's, cloned to each) they hold one parse of each, not two. Weak: a
/// parse lives as long as a holder keeps it. A clone is a handle to the same parses.
#[derive(Clone, Default)]
pub struct Parses(Arc<Mutex<Shared>>);

#[derive(Default)]
struct Shared {
    by_blob: HashMap<String, Weak<Contents>>,
    /// Entries after the last sweep of dropped parses; the next sweep runs at twice as many.
    swept: usize,
}

impl std::fmt::Debug for Parses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Parses")
    }
}

impl Parses {
    /// The parse of blob `blob`: one a holder still keeps, or `read` parsed now (and shared
    /// when it read; a failed read is not kept, as it may pass).
    pub fn parse(
        &self,
        blob: &str,
        read: impl FnOnce() -> Result<String, ReadError>,
    ) -> Arc<Contents> {
        let held = self
            .0
            .lock()
            .ok()
            .and_then(|s| s.by_blob.get(blob).and_then(Weak::upgrade));
        if let Some(held) = held {
            return held;
        }
        let contents = match read() {
            Ok(text) => Arc::new(parse(text)),
            Err(e) => return Arc::new(Contents::Unreadable(e)),
        };
        if let Ok(mut shared) = self.0.lock() {
            if shared.by_blob.len() >= 2 * shared.swept.max(1024) {
                shared.by_blob.retain(|_, parse| parse.strong_count() > 0);
                shared.swept = shared.by_blob.len();
            }
            shared
                .by_blob
                .insert(blob.to_string(), Arc::downgrade(&contents));
        }
        contents
    }

    /// The snapshot of the files `listed`, in that order; `read` reads a file (by its name)
    /// whose blob no holder of these parses keeps (this snapshot's earlier files included).
    /// A link is never read; a failed read is not kept, so the next snapshot reads it again.
    pub fn snapshot(
        &self,
        listed: Vec<Listed>,
        mut read: impl FnMut(&str) -> Result<String, ReadError>,
    ) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for file in listed {
            let contents = if file.link {
                Arc::new(Contents::Unreadable(ReadError::Symlink))
            } else {
                self.parse(&file.blob, || read(&file.name))
            };
            snapshot.push(File {
                name: file.name,
                contents,
            });
        }
        snapshot
    }
}

/// One file of the commit a snapshot is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Repo-relative, `/`-separated: how messages name it.
    pub name: String,
    /// The blob id of its content.
    pub blob: String,
    /// A symbolic link: refused, never read.
    pub link: bool,
}

/// A snapshot kept from one commit to the next.
#[derive(Debug, Default)]
pub struct KeptSnapshot {
    /// The commit (or tree) it mirrors, as the caller names it; `None`: nothing kept.
    at: Option<String>,
    snapshot: Arc<Snapshot>,
    /// Files whose read failed (links aside): read again at every move, as the reason may pass
    /// without a change in git.
    unreadable: BTreeSet<String>,
    /// Where new parses are shared (the runtime's).
    parses: Parses,
}

/// Puts a file in `snapshot`, noting in `unreadable` when its read failed.
fn put(
    snapshot: &mut Snapshot,
    unreadable: &mut BTreeSet<String>,
    name: String,
    contents: Arc<Contents>,
) {
    if failed(&contents) {
        unreadable.insert(name.clone());
    }
    snapshot.put(File { name, contents }, walks_before);
}

/// A read that failed for a reason that may pass (a link is refused for good).
fn failed(contents: &Contents) -> bool {
    matches!(contents, Contents::Unreadable(e) if !matches!(e, ReadError::Symlink))
}

/// How a file of the walk differs between the kept commit and the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Moved {
    /// It is no longer there (or no longer a file the walk reads).
    Gone(String),
    /// It is there now, new or with other content.
    Now(Listed),
}

impl KeptSnapshot {
    /// Nothing kept yet; parses are shared through `parses`.
    pub fn new(parses: Parses) -> KeptSnapshot {
        KeptSnapshot {
            parses,
            ..KeptSnapshot::default()
        }
    }

    /// The commit the kept snapshot mirrors.
    pub fn at(&self) -> Option<&str> {
        self.at.as_deref()
    }

    /// The snapshot of commit `at`, whose files are `listed` (in the walk's order), read whole:
    /// the first time, or when the changes since the kept commit are not known.
    pub fn rebuild(
        &mut self,
        at: String,
        listed: Vec<Listed>,
        read: impl FnMut(&str) -> Result<String, ReadError>,
    ) -> Arc<Snapshot> {
        let snapshot = self.parses.snapshot(listed, read);
        self.unreadable = snapshot
            .files()
            .iter()
            .filter(|f| failed(&f.contents))
            .map(|f| f.name.clone())
            .collect();
        self.at = Some(at);
        self.snapshot = Arc::new(snapshot);
        Arc::clone(&self.snapshot)
    }

    /// The snapshot of commit `at`, whose files differ from the kept commit's only as `moved`
    /// says: those files are read (by name, through `read`, unless someone holds the parse of
    /// their blob) and put in place, and every file whose read failed before is read again.
    pub fn move_to(
        &mut self,
        at: String,
        moved: Vec<Moved>,
        mut read: impl FnMut(&str) -> Result<String, ReadError>,
    ) -> Arc<Snapshot> {
        let again = std::mem::take(&mut self.unreadable);
        if self.at.as_deref() == Some(at.as_str()) && moved.is_empty() && again.is_empty() {
            return Arc::clone(&self.snapshot);
        }
        // The tick that held it is over: the snapshot is this one's alone, changed in place.
        let snapshot = Arc::make_mut(&mut self.snapshot);
        let mut touched = BTreeSet::new();
        for m in moved {
            let (name, contents) = match m {
                Moved::Gone(name) => {
                    snapshot.remove(&name);
                    touched.insert(name);
                    continue;
                }
                Moved::Now(listed) if listed.link => (
                    listed.name,
                    Arc::new(Contents::Unreadable(ReadError::Symlink)),
                ),
                Moved::Now(listed) => {
                    let contents = self.parses.parse(&listed.blob, || read(&listed.name));
                    (listed.name, contents)
                }
            };
            touched.insert(name.clone());
            put(snapshot, &mut self.unreadable, name, contents);
        }
        for name in again.into_iter().filter(|n| !touched.contains(n)) {
            let contents = Arc::new(match read(&name) {
                Ok(text) => parse(text),
                Err(e) => Contents::Unreadable(e),
            });
            put(snapshot, &mut self.unreadable, name, contents);
        }
        self.at = Some(at);
        Arc::clone(&self.snapshot)
    }

    /// Forgets the kept snapshot: the next one is read whole.
    pub fn clear(&mut self) {
        *self = KeptSnapshot::new(self.parses.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(name: &str, blob: &str) -> Listed {
        Listed {
            name: name.to_string(),
            blob: blob.to_string(),
            link: false,
        }
    }

    #[test]
    fn only_blobs_not_parsed_last_time_are_read() {
        let cache = Parses::default();
        let reads = std::cell::RefCell::new(Vec::new());
        let read = |name: &str| {
            reads.borrow_mut().push(name.to_string());
            Ok(format!("kind: ConfigMap\nmetadata: {{name: {name}}}\n"))
        };
        let first = cache.snapshot(vec![listed("a.yaml", "1"), listed("b.yaml", "2")], read);
        assert_eq!(first.files().len(), 2);
        // b changed, c is new with a's content (same blob), a kept.
        let second = cache.snapshot(
            vec![
                listed("a.yaml", "1"),
                listed("b.yaml", "3"),
                listed("c.yaml", "1"),
            ],
            read,
        );
        assert_eq!(*reads.borrow(), ["a.yaml", "b.yaml", "b.yaml"]);
        assert_eq!(
            second.find("ConfigMap", "a.yaml").count(),
            2,
            "c shares a's parse"
        );
        assert_eq!(second.file("c.yaml").unwrap().name, "c.yaml");
        drop((first, second));
        cache.snapshot(vec![listed("a.yaml", "1")], read);
        assert_eq!(
            *reads.borrow(),
            ["a.yaml", "b.yaml", "b.yaml", "a.yaml"],
            "a parse nobody holds any more is read again"
        );
    }

    #[test]
    fn links_are_refused_and_failed_reads_are_read_again() {
        let cache = Parses::default();
        let mut reads = 0;
        let mut read = |_: &str| {
            reads += 1;
            Err(ReadError::Io("busy".into()))
        };
        let link = Listed {
            link: true,
            ..listed("l.yaml", "9")
        };
        for _ in 0..2 {
            let s = cache.snapshot(vec![link.clone(), listed("x.yaml", "1")], &mut read);
            assert!(matches!(
                *s.file("l.yaml").unwrap().contents,
                Contents::Unreadable(ReadError::Symlink)
            ));
        }
        assert_eq!(
            reads, 2,
            "the failed read is tried again, the link never read"
        );
    }
}
