//! Which spec warnings the daemon has logged: each once per version of the file it is in,
//! not at every tick. A warning is logged again when its file's content changes (or when it
//! went away and came back).
//!
//! Holds only the last tick's keys, so it never grows past the repo's warnings. Decides
//! nothing and logs nothing itself.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use crate::manifest::load::Warning;
use crate::yaml::snapshot::Snapshot;

/// The warnings logged at the last tick, each keyed by its text and its file's content.
#[derive(Default)]
pub struct WarningLog {
    logged: Mutex<BTreeSet<String>>,
}

impl WarningLog {
    /// The warnings of this tick that the last tick did not have with the same file content;
    /// this tick's are remembered for the next.
    pub fn fresh<'w>(&self, warnings: &'w [Warning], snapshot: &Snapshot) -> Vec<&'w Warning> {
        let keyed: Vec<(String, &Warning)> =
            warnings.iter().map(|w| (key(w, snapshot), w)).collect();
        let mut logged = match self.logged.lock() {
            Ok(guard) => guard,
            // A panic elsewhere while holding the lock left a set that is still whole.
            Err(poisoned) => poisoned.into_inner(),
        };
        let fresh = keyed
            .iter()
            .filter(|(k, _)| !logged.contains(k))
            .map(|(_, w)| *w)
            .collect();
        *logged = keyed.into_iter().map(|(k, _)| k).collect();
        fresh
    }
}

/// The warning's text and a hash of its file's content.
fn key(warning: &Warning, snapshot: &Snapshot) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    snapshot
        .file(&warning.problem.file)
        .and_then(|f| f.text())
        .hash(&mut hasher);
    format!("{:016x} {warning}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::error::SpecError;

    fn warning(file: &str, message: &str) -> Warning {
        Warning {
            canary: None,
            problem: SpecError {
                file: file.into(),
                line: 3,
                field: "spec.x".into(),
                message: message.into(),
            },
        }
    }

    fn repo(text: &str) -> (tempfile::TempDir, Snapshot) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.yaml"), text).unwrap();
        let snapshot = Snapshot::read(dir.path());
        (dir, snapshot)
    }

    #[test]
    fn a_warning_is_logged_once_per_version_of_its_file() {
        let log = WarningLog::default();
        let w = [warning("c.yaml", "unknown field")];
        let (_a, first) = repo("a: 1\n");
        assert_eq!(log.fresh(&w, &first).len(), 1, "first tick: logged");
        assert_eq!(log.fresh(&w, &first).len(), 0, "same file: not again");
        let (_b, edited) = repo("a: 2\n");
        assert_eq!(
            log.fresh(&w, &edited).len(),
            1,
            "file changed: logged again"
        );
        assert_eq!(log.fresh(&[], &edited).len(), 0);
        assert_eq!(
            log.fresh(&w, &edited).len(),
            1,
            "gone and back: logged again"
        );
    }
}
