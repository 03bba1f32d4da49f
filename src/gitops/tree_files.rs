//! The YAML files of a commit, listed from its tree objects by the rules of the work-tree walk
//! (`yaml::snapshot`): files ending in `.yaml` or `.yml`, in path order component by component
//! (as `walkdir` sorts by file name), folders whose name starts with `.` skipped, symbolic
//! links listed (so that their read is refused) and never followed, submodules skipped.
//!
//! Lists names and blob ids only: reading and parsing a file is the caller's, which keys what
//! it parsed by the blob id and so reads again only the files a commit changed.

use git2::Oid;

use super::folders;

use super::error::Result;
use super::repo::ConfigRepo;

/// One YAML file of a commit's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// Repo-relative, `/`-separated.
    pub path: String,
    /// The blob id: equal ids, equal content.
    pub id: Oid,
    /// A symbolic link (mode 120000): its target is never read.
    pub link: bool,
}

/// Whether the walk reads `path` (repo-relative, `/`-separated): a `.yaml` or `.yml` file
/// outside hidden folders (what [`ConfigRepo::yaml_files_at`] lists).
pub fn walked(path: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    let Some(name) = parts.pop() else {
        return false;
    };
    (name.ends_with(".yaml") || name.ends_with(".yml")) && !parts.iter().any(|p| p.starts_with('.'))
}

/// The git file mode of a symbolic link.
const LINK_MODE: i32 = 0o120000;

impl ConfigRepo {
    /// Every YAML file of `commit`'s tree, in the work-tree walk's order.
    pub fn yaml_files_at(&self, commit: Oid) -> Result<Vec<TreeFile>> {
        let root = self
            .folders
            .root_of(&self.repo, commit)
            .map_err(|e| self.git_err("read a commit's tree", &e))?;
        let mut out = Vec::new();
        self.list(root, "", &mut out)
            .map_err(|e| self.git_err("list a commit's files", &e))?;
        Ok(out)
    }

    fn list(
        &self,
        tree: Oid,
        prefix: &str,
        out: &mut Vec<TreeFile>,
    ) -> std::result::Result<(), git2::Error> {
        let folder = self.folders.folder(&self.repo, tree)?;
        // Git orders a folder as if its name ended in `/`; the walk orders by name alone.
        let mut entries: Vec<&folders::Entry> = folder.iter().collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            let Ok(name) = std::str::from_utf8(&entry.name) else {
                continue;
            };
            let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
            match entry.mode {
                folders::TREE_MODE if !name.starts_with('.') => {
                    self.list(entry.id, &format!("{prefix}{name}/"), out)?;
                }
                0o100644 | 0o100755 | 0o100664 | LINK_MODE if yaml => {
                    out.push(TreeFile {
                        path: format!("{prefix}{name}"),
                        id: entry.id,
                        link: entry.mode == LINK_MODE,
                    });
                }
                // Hidden folders, other files, submodules (commits).
                _ => {}
            }
        }
        Ok(())
    }
}

impl ConfigRepo {
    /// The YAML files of [`ConfigRepo::yaml_files_at`] that differ between commits `from` and
    /// `to`: each path, with what `yaml_files_at(to)` lists there (`None`: nothing; gone, or
    /// no longer a file the walk lists). Reads only the folders on the changed paths.
    pub fn yaml_changes(&self, from: Oid, to: Oid) -> Result<Vec<(String, Option<TreeFile>)>> {
        let tree = |commit: Oid| {
            self.folders
                .root_of(&self.repo, commit)
                .and_then(|id| self.repo.find_tree(id))
                .map_err(|e| self.git_err("read a commit's tree", &e))
        };
        let (old, new) = (tree(from)?, tree(to)?);
        let differs = super::tree_diff(&self.repo, &self.folders, Some(&old), Some(&new))
            .map_err(|e| self.git_err("compare two commits", &e))?;
        Ok(differs
            .into_iter()
            .filter_map(|d| {
                let path = String::from_utf8(d.path).ok()?;
                if !walked(&path) {
                    return None;
                }
                let now = d
                    .new
                    .filter(|(_, mode)| matches!(*mode, 0o100644 | 0o100755 | 0o100664 | LINK_MODE))
                    .map(|(id, mode)| TreeFile {
                        path: path.clone(),
                        id,
                        link: mode == LINK_MODE,
                    });
                Some((path, now))
            })
            .collect())
    }

    /// The blob id of each of `paths` at `commit` when it is a regular file there; `None` for
    /// a path that is absent, a folder, a link or below a link. Folders are read once by id
    /// (`folders.rs`), not once per path.
    pub fn regular_files_at(&self, commit: Oid, paths: &[String]) -> Result<Vec<Option<Oid>>> {
        paths
            .iter()
            .map(
                |path| match super::lookup::entry_at(&self.repo, &self.folders, commit, path) {
                    Ok(super::PathEntry::File(id)) => Ok(Some(id)),
                    Ok(_) => Ok(None),
                    Err(e) => Err(self.git_err("look up a file", &e)),
                },
            )
            .collect()
    }
}
