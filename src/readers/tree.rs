//! A commit's YAML files written out into a temporary folder, so the readers that read a
//! checkout (the snapshot, the status files) can read a bare repository's branch or any
//! commit of a clone. Symlinks, submodules, names git itself would refuse and files larger
//! than the snapshot reads are left out, so nothing is read from outside the repo.

use std::path::Path;

use anyhow::Context as _;

/// The YAML files of `tree` (of `repo`, found at `dir`, which errors name with `branch`) in a
/// new temporary folder.
pub fn write_yaml(
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
    dir: &Path,
    branch: &str,
) -> anyhow::Result<tempfile::TempDir> {
    let out = tempfile::tempdir().context("cannot create a temporary folder")?;
    let mut failure = None;
    let walked = tree.walk(git2::TreeWalkMode::PreOrder, |parent, entry| {
        let Ok(name) = entry.name() else {
            return git2::TreeWalkResult::Skip;
        };
        if matches!(name, "" | "." | "..") || name.contains(['/', '\\']) {
            return git2::TreeWalkResult::Skip;
        }
        let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        let blob = matches!(
            entry.filemode(),
            0o100644 | 0o100755 // regular files; not symlinks (0o120000) or submodules
        );
        if !(yaml && blob) {
            return git2::TreeWalkResult::Ok;
        }
        let written = entry
            .to_object(repo)
            .map_err(anyhow::Error::from)
            .and_then(|o| {
                let Some(blob) = o.as_blob() else {
                    return Ok(());
                };
                if blob.size() as u64 > crate::yaml::snapshot::MAX_FILE_BYTES {
                    return Ok(());
                }
                let path = out.path().join(parent).join(name);
                if let Some(folder) = path.parent() {
                    std::fs::create_dir_all(folder)?;
                }
                std::fs::write(&path, blob.content())?;
                Ok(())
            });
        match written {
            Ok(()) => git2::TreeWalkResult::Ok,
            Err(e) => {
                failure = Some(e.context(format!("{}: cannot read {parent}{name}", dir.display())));
                git2::TreeWalkResult::Abort
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    walked.with_context(|| format!("{}: cannot read branch {branch}", dir.display()))?;
    Ok(out)
}
