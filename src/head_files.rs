//! The files of one commit of the clone (the tick's head), read from its tree objects exactly
//! as reading a checkout of it would have given them: a symbolic link is refused (never
//! followed), so is a path through one, a folder is not a file, and a file is read up to the
//! same bound and must be UTF-8 ([`read_bounded`](crate::yaml::snapshot::read_bounded)'s
//! rules). The clone has no work tree: every file the tick, `operate` and approvals read of
//! the repo comes from here or from the snapshot.
//!
//! Readers that take a folder and a path (`root.join(file)`) are handed the clone's work dir
//! and [`HeadFiles::read_path`]; readers of repo-relative names use [`HeadFiles::read`].
//! Reads only; decides nothing.

use std::path::Path;

use git2::Oid;

use crate::core::status::Status;
use crate::gitops::{Bounded, ConfigRepo, PathEntry};
use crate::manifest::model::CanaryId;
use crate::manifest::output_folder::{Folders, Kind};
use crate::manifest::settings::{Settings, SETTINGS_PATH};
use crate::render::status_file::{self, SpecRecord};
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::{ReadError, Snapshot, MAX_FILE_BYTES};
use crate::yaml::snapshot_cache::{Listed, Parses};

/// The files of `commit` in `repo`.
#[derive(Clone, Copy)]
pub struct HeadFiles<'r> {
    repo: &'r ConfigRepo,
    commit: Oid,
}

impl<'r> HeadFiles<'r> {
    /// The files of the clone's head.
    pub fn new(repo: &'r ConfigRepo) -> HeadFiles<'r> {
        HeadFiles {
            repo,
            commit: repo.head(),
        }
    }

    /// The work dir the paths given to [`read_path`](Self::read_path) are under.
    pub fn root(&self) -> &'r Path {
        self.repo.root()
    }

    /// What `file` (repo-relative) is; a tree that cannot be read is an error.
    fn entry(&self, file: &str) -> Result<PathEntry, ReadError> {
        self.repo
            .entry_at(self.commit, file)
            .map_err(|e| ReadError::Io(e.to_string()))
    }

    /// Whether anything is at `file`: a file, a folder or a link (even one pointing nowhere),
    /// as `symlink_metadata` tells on disk. A tree that cannot be read counts as there, so the
    /// read that follows says why.
    pub fn exists(&self, file: &str) -> bool {
        !matches!(self.entry(file), Ok(PathEntry::Missing))
    }

    /// The text of `file` (repo-relative); `None` when nothing is there.
    pub fn read(&self, file: &str) -> Option<Result<String, ReadError>> {
        let id = match self.entry(file) {
            Ok(PathEntry::Missing) => return None,
            Ok(PathEntry::File(id)) => id,
            Ok(PathEntry::Link) => return Some(Err(ReadError::Symlink)),
            Ok(PathEntry::ThroughLink(link)) => {
                return Some(Err(ReadError::SymlinkFolder { link }))
            }
            Ok(PathEntry::Folder | PathEntry::Other) => return Some(Err(ReadError::NotAFile)),
            Err(e) => return Some(Err(e)),
        };
        Some(match self.repo.blob_bounded(id, MAX_FILE_BYTES) {
            Ok(Bounded::Bytes(bytes)) => String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8),
            Ok(Bounded::TooLarge(bytes)) => Err(ReadError::TooLarge { bytes }),
            Err(e) => Err(ReadError::Io(e.to_string())),
        })
    }

    /// The text of `path`, a path below the work dir (`root.join(file)`), as
    /// [`read_bounded`](crate::yaml::snapshot::read_bounded) reads a checked-out file.
    pub fn read_path(&self, path: &Path) -> Result<String, ReadError> {
        let file = self.relative(path)?;
        self.read(&file).unwrap_or_else(|| {
            Err(ReadError::Io(format!(
                "{file}: no such file in commit {}",
                self.commit
            )))
        })
    }

    /// `path` below the work dir, repo-relative with `/`.
    fn relative(&self, path: &Path) -> Result<String, ReadError> {
        let outside = || {
            ReadError::Io(format!(
                "{} is not a plain path inside the repo {}",
                path.display(),
                self.root().display()
            ))
        };
        let relative = path.strip_prefix(self.root()).map_err(|_| outside())?;
        let mut parts = Vec::new();
        for part in relative.components() {
            let std::path::Component::Normal(part) = part else {
                return Err(outside());
            };
            parts.push(part.to_str().ok_or_else(outside)?);
        }
        Ok(parts.join("/"))
    }

    /// The snapshot of the commit's YAML files, every one read and parsed (for a command run
    /// once; the tick keeps what it parsed across ticks, `facts.rs`).
    pub fn snapshot(&self) -> Result<Snapshot, crate::gitops::Error> {
        let listed = self
            .repo
            .yaml_files_at(self.commit)?
            .into_iter()
            .map(|f| Listed {
                name: f.path,
                blob: f.id.to_string(),
                link: f.link,
            })
            .collect();
        Ok(Parses::default().snapshot(listed, |name| {
            HeadFiles::read(self, name).unwrap_or(Err(ReadError::NotAFile))
        }))
    }

    /// The repo settings (`.sluice/config.yaml`; absent: defaults), as
    /// [`settings_in`](crate::manifest::load::settings_in) reads them from a folder.
    pub fn settings(&self) -> (Settings, Vec<SpecError>) {
        match HeadFiles::read(self, SETTINGS_PATH) {
            None => (Settings::default(), Vec::new()),
            Some(read) => crate::manifest::load::settings_from(read),
        }
    }

    /// A canary's status and spec record; `None` when it has no status file.
    pub fn status(&self, id: &CanaryId) -> Result<Option<(Status, Option<SpecRecord>)>, String> {
        HeadFiles::read(self, &status_file::path_for(id))
            .map(status_file::from_read)
            .transpose()
    }

    /// The names of the entries of the folder `folder` (repo-relative); empty when there is
    /// no such folder.
    pub fn list(&self, folder: &str) -> Vec<(String, PathEntry)> {
        match self.repo.folder_at(self.commit, folder) {
            Ok(Some(entries)) => entries,
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::warn!(error = %e, folder, "Cannot list a folder of the head");
                Vec::new()
            }
        }
    }
}

impl crate::workload::Outside for HeadFiles<'_> {
    fn is_file(&self, file: &str) -> bool {
        matches!(self.entry(file), Ok(PathEntry::File(_)))
    }

    fn read(&self, file: &str) -> Option<Result<String, ReadError>> {
        HeadFiles::read(self, file)
    }
}

impl Folders for HeadFiles<'_> {
    fn kind(&self, path: &str) -> Kind {
        match self.entry(path) {
            Ok(PathEntry::Missing) | Err(_) => Kind::Missing,
            Ok(PathEntry::Folder) => Kind::Folder,
            Ok(PathEntry::Link | PathEntry::ThroughLink(_)) => Kind::Link,
            Ok(PathEntry::File(_) | PathEntry::Other) => Kind::File,
        }
    }

    fn entries(&self, path: &str) -> Vec<(String, bool)> {
        self.list(path)
            .into_iter()
            .map(|(name, entry)| (name, entry == PathEntry::Folder))
            .collect()
    }
}
