//! The files that differ between two trees, found by comparing them entry by entry and
//! descending only into folders whose ids differ.
//!
//! libgit2's `diff_tree_to_tree` walks every entry of both trees, even below folders whose
//! ids are equal: between two neighbouring commits of a 1,000-canary repo it read every tree
//! of the repo (about 1.5 ms a comparison, most of a tick that compares hundreds of them).
//! Here the cost follows the folders on the changed paths.

use git2::{Oid, Repository, Tree};

use super::folders::{self, Entry, Folder, Folders};

/// One path whose entry differs between the two trees: what each side has there (id and
/// file mode; `None` when absent, or when the other side has a folder of that name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Differs {
    /// Repo-relative, `/`-separated, as git stores it (not necessarily UTF-8).
    pub path: Vec<u8>,
    pub old: Option<(Oid, i32)>,
    pub new: Option<(Oid, i32)>,
}

impl Differs {
    /// The path as text (invalid UTF-8 replaced).
    pub fn path_lossy(&self) -> String {
        String::from_utf8_lossy(&self.path).into_owned()
    }
}

/// Every non-folder entry (file, link, submodule) that differs between `old` and `new` (either
/// missing: every entry of the other), in git's tree order. A file replaced by a folder of the
/// same name is the file gone and the folder's files new.
pub fn tree_diff(
    repo: &Repository,
    kept: &Folders,
    old: Option<&Tree<'_>>,
    new: Option<&Tree<'_>>,
) -> Result<Vec<Differs>, git2::Error> {
    let mut out = Vec::new();
    let (old, new) = (read(repo, kept, old)?, read(repo, kept, new)?);
    compare(repo, kept, old.as_ref(), new.as_ref(), b"", &mut out)?;
    Ok(out)
}

/// [`tree_diff`] of what `folder` (`/`-separated) names in `old` and in `new`: the files under
/// it that differ, with paths from the root, and the entry at `folder` itself when it is not
/// a folder on either side and differs.
pub fn tree_diff_under(
    repo: &Repository,
    kept: &Folders,
    old: Option<&Tree<'_>>,
    new: Option<&Tree<'_>>,
    folder: &str,
) -> Result<Vec<Differs>, git2::Error> {
    let at = |t: Option<&Tree<'_>>| {
        t.and_then(|t| t.get_path(std::path::Path::new(folder)).ok())
            .map(|e| (e.id(), e.filemode()))
    };
    let (x, y) = (at(old), at(new));
    let mut out = Vec::new();
    if x == y {
        return Ok(out);
    }
    let is_folder = |e: &(Oid, i32)| e.1 == folders::TREE_MODE;
    let file = |e: Option<(Oid, i32)>| e.filter(|e| !is_folder(e));
    if file(x).is_some() || file(y).is_some() {
        out.push(Differs {
            path: folder.as_bytes().to_vec(),
            old: file(x),
            new: file(y),
        });
    }
    let sub = |e: Option<(Oid, i32)>| {
        e.filter(is_folder)
            .map(|e| kept.folder(repo, e.0))
            .transpose()
    };
    let (a, b) = (sub(x)?, sub(y)?);
    let mut prefix = folder.as_bytes().to_vec();
    prefix.push(b'/');
    compare(repo, kept, a.as_ref(), b.as_ref(), &prefix, &mut out)?;
    Ok(out)
}

/// A tree entry as the comparison orders it: git sorts a folder as if its name ended in '/'.
struct Keyed<'f> {
    key: Vec<u8>,
    entry: &'f Entry,
}

fn keyed(folder: Option<&Folder>) -> Vec<Keyed<'_>> {
    let Some(folder) = folder else {
        return Vec::new();
    };
    folder
        .iter()
        .map(|entry| {
            let mut key = entry.name.clone();
            if entry.is_folder() {
                key.push(b'/');
            }
            Keyed { key, entry }
        })
        .collect()
}

/// The kept folder of `tree`.
fn read(
    repo: &Repository,
    kept: &Folders,
    tree: Option<&Tree<'_>>,
) -> Result<Option<Folder>, git2::Error> {
    tree.map(|t| kept.folder(repo, t.id())).transpose()
}

fn compare(
    repo: &Repository,
    kept: &Folders,
    old: Option<&Folder>,
    new: Option<&Folder>,
    prefix: &[u8],
    out: &mut Vec<Differs>,
) -> Result<(), git2::Error> {
    let (a, b) = (keyed(old), keyed(new));
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let order = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.key.cmp(&y.key),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        let (gone, came) = match order {
            std::cmp::Ordering::Less => (a.get(i), None),
            std::cmp::Ordering::Greater => (None, b.get(j)),
            std::cmp::Ordering::Equal => (a.get(i), b.get(j)),
        };
        i += usize::from(gone.is_some());
        j += usize::from(came.is_some());
        if let (Some(x), Some(y)) = (gone, came) {
            if x.entry.id == y.entry.id && x.entry.mode == y.entry.mode {
                continue;
            }
        }
        let Some(named) = gone.or(came) else {
            break;
        };
        let mut path = prefix.to_vec();
        path.extend_from_slice(&named.entry.name);
        if named.entry.is_folder() {
            let load = |e: Option<&Keyed<'_>>| e.map(|e| kept.folder(repo, e.entry.id)).transpose();
            let (x, y) = (load(gone)?, load(came)?);
            path.push(b'/');
            compare(repo, kept, x.as_ref(), y.as_ref(), &path, out)?;
        } else {
            out.push(Differs {
                path,
                old: gone.map(|e| (e.entry.id, e.entry.mode)),
                new: came.map(|e| (e.entry.id, e.entry.mode)),
            });
        }
    }
    Ok(())
}

/// The index entry of the blob `id` at `path` with git mode `mode`, for building a tree in an
/// in-memory index (no work tree, so no stat data).
pub fn index_entry(path: &str, id: Oid, mode: u32) -> git2::IndexEntry {
    git2::IndexEntry {
        ctime: git2::IndexTime::new(0, 0),
        mtime: git2::IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: u16::try_from(path.len()).map_or(0xfff, |n| n.min(0xfff)),
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// A tree of `files` (path, text) written to `repo` (tests' trees, without a work tree).
#[cfg(test)]
pub(crate) fn tree_of(repo: &Repository, files: &[(&str, &str)]) -> Oid {
    let files: Vec<(&str, &str, u32)> = files.iter().map(|(p, t)| (*p, *t, 0o100644)).collect();
    tree_with_modes(repo, &files)
}

/// A tree of `files` (path, text or link target, git mode) written to `repo`.
#[cfg(test)]
pub(crate) fn tree_with_modes(repo: &Repository, files: &[(&str, &str, u32)]) -> Oid {
    let mut index = git2::Index::new().unwrap();
    for (path, text, mode) in files {
        let id = repo.blob(text.as_bytes()).unwrap();
        index.add(&index_entry(path, id, *mode)).unwrap();
    }
    index.write_tree_to(repo).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same paths, with the same sides, as libgit2's diff finds.
    #[test]
    fn the_differing_files_are_libgit2s() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let trees = [
            tree_of(
                &repo,
                &[
                    ("a.yaml", "1"),
                    ("a/z.yaml", "2"),
                    ("a-b/c.yaml", "1"),
                    ("same/deep/x.yaml", "1"),
                    ("gone/one.yaml", "1"),
                    ("f", "file"),
                ],
            ),
            tree_of(
                &repo,
                &[
                    ("a.yaml", "2"),
                    ("a/z.yaml", "2"),
                    ("a/y.yaml", "3"),
                    ("a-b/c.yaml", "1"),
                    ("same/deep/x.yaml", "1"),
                    ("new/two.yaml", "2"),
                    ("f/now-a-folder", "x"),
                ],
            ),
        ];
        let find = |id: Oid| repo.find_tree(id).unwrap();
        for (old, new) in [
            (Some(trees[0]), Some(trees[1])),
            (Some(trees[1]), Some(trees[0])),
            (None, Some(trees[1])),
            (Some(trees[0]), None),
        ] {
            let (x, y) = (old.map(find), new.map(find));
            let ours: Vec<(String, Option<Oid>, Option<Oid>)> =
                tree_diff(&repo, &Folders::default(), x.as_ref(), y.as_ref())
                    .unwrap()
                    .into_iter()
                    .map(|d| (d.path_lossy(), d.old.map(|o| o.0), d.new.map(|n| n.0)))
                    .collect();
            let mut theirs: Vec<(String, Option<Oid>, Option<Oid>)> = Vec::new();
            let diff = repo
                .diff_tree_to_tree(x.as_ref(), y.as_ref(), None)
                .unwrap();
            for d in diff.deltas() {
                let side = |f: git2::DiffFile<'_>| (!f.id().is_zero()).then(|| f.id());
                let path = d.new_file().path().or(d.old_file().path()).unwrap();
                theirs.push((
                    path.to_string_lossy().into_owned(),
                    side(d.old_file()),
                    side(d.new_file()),
                ));
            }
            for folder in ["a", "f", "same", "new", "none"] {
                let mut under: Vec<String> =
                    tree_diff_under(&repo, &Folders::default(), x.as_ref(), y.as_ref(), folder)
                        .unwrap()
                        .iter()
                        .map(Differs::path_lossy)
                        .collect();
                under.sort();
                let mut expected: Vec<String> = ours
                    .iter()
                    .map(|o| o.0.clone())
                    .filter(|p| p == folder || p.starts_with(&format!("{folder}/")))
                    .collect();
                expected.sort();
                assert_eq!(under, expected, "{folder}: {old:?} -> {new:?}");
            }
            let mut sorted = ours.clone();
            sorted.sort();
            theirs.sort();
            assert_eq!(sorted, theirs, "{old:?} -> {new:?}");
        }
    }
}
