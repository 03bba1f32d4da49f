//! Parses shared by git blob id: every holder of a commit's files in one runtime (the tick's,
//! drift's verifier's, the dashboard's: `crate::commit_files`) takes the parse of a blob
//! another holder still keeps instead of reading and parsing it again.
//!
//! Knows blob ids as opaque strings: nothing here reads git. Parses are held by the holders
//! of the files (weakly here), so they never outgrow what is held; a file that could not be
//! read is not kept (a read may fail for a reason that passes). One [`Parses`] per runtime:
//! two runtimes in one process share nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

pub(crate) use super::snapshot::parse;
use super::snapshot::{Contents, ReadError};

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
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::cell::Cell;

    /// A read that answers `answer` and counts itself in `reads`.
    fn counted<'a>(
        reads: &'a Cell<usize>,
        answer: Result<&'a str, ReadError>,
    ) -> impl Fn() -> Result<String, ReadError> + 'a {
        move || {
            reads.set(reads.get() + 1);
            answer.clone().map(str::to_string)
        }
    }

    #[test]
    fn a_blob_is_parsed_once_while_someone_holds_it() {
        let (parses, reads) = (Parses::default(), Cell::new(0));
        let read = counted(&reads, Ok("kind: ConfigMap\nmetadata: {name: a}\n"));
        let held = parses.parse("1", &read);
        let again = parses.parse("1", &read);
        assert!(Arc::ptr_eq(&held, &again));
        parses.parse("2", &read);
        assert_eq!(reads.get(), 2, "one read per blob held");
        drop((held, again));
        parses.parse("1", &read);
        assert_eq!(reads.get(), 3, "a parse nobody holds is read again");
    }

    #[test]
    fn a_failed_read_is_not_kept() {
        let (parses, reads) = (Parses::default(), Cell::new(0));
        let read = counted(&reads, Err(ReadError::Io("busy".into())));
        let failed = parses.parse("1", &read);
        assert!(matches!(*failed, Contents::Unreadable(ReadError::Io(_))));
        parses.parse("1", &read);
        assert_eq!(reads.get(), 2, "read again: the reason may pass");
    }
}
