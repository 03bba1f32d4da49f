//! Lock files a killed process left in the clone.
//!
//! git and libgit2 update a file by writing `<file>.lock` and renaming it over the file; a
//! process killed in between leaves the `.lock` behind, and every later update of that file
//! fails ("the index is locked", "failed to lock file"). sluice holds its own exclusive lock on
//! the work dir, so no other process can be writing the clone, and every `.lock` in it is
//! stale. Knows nothing but paths.

use std::path::{Path, PathBuf};

use super::error::{Error, Result};

/// Removes every stale git lock file of the clone in `workdir`: `.git/*.lock` (`index.lock`,
/// `HEAD.lock`, `config.lock`, `packed-refs.lock`...) and any `*.lock` under `.git/refs` and
/// `.git/logs`. Returns the files removed. Only call it while holding the work dir's lock.
pub(super) fn remove_stale(workdir: &Path) -> Result<Vec<PathBuf>> {
    let git_dir = workdir.join(".git");
    let mut found = Vec::new();
    locks_in(&git_dir, false, &mut found)?;
    for sub in ["refs", "logs"] {
        locks_in(&git_dir.join(sub), true, &mut found)?;
    }
    for lock in &found {
        std::fs::remove_file(lock).map_err(|source| Error::Io {
            path: lock.clone(),
            op: "remove a stale git lock file",
            source,
        })?;
    }
    Ok(found)
}

/// The `*.lock` files (not symlinks) in `dir`, and in its subfolders with `recurse`.
fn locks_in(dir: &Path, recurse: bool, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(Error::Io {
                path: dir.to_path_buf(),
                op: "look for stale git lock files",
                source,
            })
        }
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() && recurse {
            locks_in(&path, true, found)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "lock") {
            found.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lock_files_of_the_git_dir_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        for d in [
            "refs/heads/env",
            "refs/remotes/origin",
            "logs/refs/heads",
            "objects/ab",
        ] {
            std::fs::create_dir_all(git.join(d)).unwrap();
        }
        let stale = [
            "index.lock",
            "HEAD.lock",
            "refs/heads/main.lock",
            "refs/heads/env/prod.lock",
            "refs/remotes/origin/main.lock",
            "logs/refs/heads/main.lock",
        ];
        let kept = ["index", "HEAD", "refs/heads/main", "objects/ab/cd.lock"];
        for f in stale.iter().chain(&kept) {
            std::fs::write(git.join(f), "x").unwrap();
        }
        std::fs::write(dir.path().join("file.lock"), "a work-tree file").unwrap();
        let mut removed = remove_stale(dir.path()).unwrap();
        removed.sort();
        let mut expected: Vec<PathBuf> = stale.iter().map(|f| git.join(f)).collect();
        expected.sort();
        assert_eq!(removed, expected);
        for f in kept {
            assert!(git.join(f).exists(), "{f} kept");
        }
        assert!(dir.path().join("file.lock").exists(), "work tree untouched");
        assert_eq!(remove_stale(dir.path()).unwrap(), Vec::<PathBuf>::new());
    }
}
