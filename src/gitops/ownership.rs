//! Whose repository the work dir holds. sluice resets its clone to the remote, pushes the
//! commits of its branch and deletes what an older sluice checked out, so it does that only
//! to a clone it made: a clone sluice creates carries a marker in its git dir
//! ([`MARKER`], `.git/sluice/clone`), and a work dir without one is refused with what was found
//! there. A clone an older sluice made before the marker existed is recognised by what only
//! sluice writes ([`older_sluice`]) and marked.
//!
//! Reads files, and for a refusal libgit2's read-only view of the repository (its refs and
//! status, never writing the index); writes nothing but the marker. Knows nothing of remotes
//! beyond the names in the git config.

use std::io::Read;
use std::path::{Path, PathBuf};

use git2::{Repository, StatusOptions, StatusShow};

use super::error::{Error, Result};

/// The marker of a clone sluice made, below its git dir.
pub(super) const MARKER: &str = "sluice/clone";

/// The first line of the marker.
const MARKER_HEAD: &str =
    "sluice made this clone and is its only writer; it refuses a work dir without this file";

/// The marker's line while a clone with a work tree is being migrated (`migrate.rs`): its
/// checked-out files are still to be deleted.
const MIGRATING: &str = "migrating: work tree";

/// The reflog message of the first update of the local branch in every clone sluice made
/// before the marker (`reset_to` since the first version): its creation at the remote head.
const SLUICE_RESET: &str = "sluice: reset to remote head";

/// What every refusal tells the user to do.
const REMEDY: &str = "pass --workdir (or SLUICE_WORKDIR) an empty or missing folder, where \
                      sluice makes a clone of its own";

/// What the work dir holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Whose {
    /// Nothing: missing or empty, sluice clones into it.
    Nobody,
    /// A clone sluice made (its marker); `migrating` while its old work tree is being removed.
    Sluice { migrating: bool },
    /// A clone an older sluice made before the marker existed.
    OlderSluice,
    /// Anything else; refused with [`refusal`].
    Someone(String),
}

/// Whose repository the work dir `root` (absolute) holds.
pub(super) fn whose(root: &Path) -> Whose {
    let meta = match std::fs::metadata(root) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Whose::Nobody,
        Err(e) => return Whose::Someone(format!("cannot be read ({e})")),
    };
    if !meta.is_dir() {
        return Whose::Someone("is a file, not a folder".to_string());
    }
    let names = match entries(root) {
        Ok(names) => names,
        Err(e) => return Whose::Someone(format!("cannot be read ({e})")),
    };
    if names.is_empty() {
        return Whose::Nobody;
    }
    let git = root.join(".git");
    match std::fs::symlink_metadata(&git) {
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) => return Whose::Someone(git_not_a_folder(&git, &meta)),
        Err(_) => {
            return Whose::Someone(format!(
                "is not empty and is not a git repository (it holds {})",
                listing(&names)
            ))
        }
    }
    if let Some(migrating) = read_marker(&git) {
        return Whose::Sluice { migrating };
    }
    if older_sluice(&git, &names) {
        return Whose::OlderSluice;
    }
    Whose::Someone(describe(root))
}

/// The reason of an [`Error::Workdir`] refusing a work dir that holds `found`.
pub(super) fn refusal(found: &str) -> String {
    if found.starts_with("is a file") {
        return format!("{found}; {REMEDY}");
    }
    format!(
        "{found}; sluice changes only a clone it made, so it left this folder as it was: {REMEDY}"
    )
}

/// The work dir `workdir` as an absolute path that names a folder of its own (`.` is the
/// current folder, `..` its parent), so that its lock file beside it (`<name>.lock`) is a file;
/// refused when it is a file or the root.
pub fn resolve_workdir(workdir: &Path) -> Result<PathBuf> {
    let refused = |reason: String| Error::Workdir {
        path: workdir.to_path_buf(),
        reason,
    };
    let mut path = std::path::absolute(workdir)
        .map_err(|e| refused(format!("cannot be resolved ({e}); {REMEDY}")))?;
    if path.file_name().is_none() {
        // It ends in `..` (or is the root): the folder it names, resolved.
        path = std::fs::canonicalize(&path)
            .map_err(|e| refused(format!("cannot be resolved ({e}); {REMEDY}")))?;
    }
    if path.file_name().is_none() || path.parent().is_none() {
        return Err(refused(format!(
            "is the root folder, which has no folder beside it for the work dir's lock file; \
             {REMEDY}"
        )));
    }
    match std::fs::metadata(&path) {
        Ok(meta) if !meta.is_dir() => Err(Error::Workdir {
            path,
            reason: refusal("is a file, not a folder"),
        }),
        _ => Ok(path),
    }
}

/// Writes the marker of the clone in `root`: what made it, its remote and branch, and
/// `migrating` while a migration of its work tree is under way. Written to a temporary file
/// and renamed, so a reader finds the whole marker or the one before it.
pub(super) fn write_marker(root: &Path, url: &str, branch: &str, migrating: bool) -> Result<()> {
    let dir = root.join(".git").join("sluice");
    let io = |path: &Path, op: &'static str| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, op, source }
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir, "create sluice's folder in the clone"))?;
    let mut text = format!(
        "{MARKER_HEAD}\nremote: {}\nbranch: {}\n",
        url.escape_debug(),
        branch.escape_debug()
    );
    if migrating {
        text.push_str(MIGRATING);
        text.push('\n');
    }
    let marker = root.join(".git").join(MARKER);
    let partial = dir.join("clone.partial");
    std::fs::write(&partial, text).map_err(io(&partial, "write the clone's marker"))?;
    std::fs::rename(&partial, &marker).map_err(io(&marker, "write the clone's marker"))
}

/// `Some(migrating)` when the git dir `git` holds sluice's marker (a regular file).
fn read_marker(git: &Path) -> Option<bool> {
    let marker = git.join(MARKER);
    let meta = std::fs::symlink_metadata(&marker).ok()?;
    if !meta.is_file() {
        return None;
    }
    let text = read_head(&marker, 64 * 1024).unwrap_or_default();
    Some(text.lines().any(|line| line == MIGRATING))
}

/// Whether the repository in the git dir `git` is a clone an older sluice made before the
/// marker: what only sluice wrote there. `names` are the work dir's entries.
///
/// - Its local branch was created by sluice: the first entry of a branch's reflog is sluice's
///   `reset_to` ([`SLUICE_RESET`]). Every clone with a work tree has reflogs (libgit2 turns
///   them on for a repository with a work tree), and a person's clone starts with `clone:`,
///   `branch:` or `commit (initial):` instead.
/// - Or the layout only sluice makes (the clone before the marker, with no reflogs): a bare
///   repository in the `.git` folder of a work dir that holds nothing else, with the
///   remote-tracking refs of `origin` (`git clone --bare` makes none).
/// - Or a repository that holds nothing to lose (a clone killed while it created its
///   repository or before its first fetch): nothing beside `.git`, no object, no ref.
fn older_sluice(git: &Path, names: &[String]) -> bool {
    if branch_made_by_sluice(&git.join("logs/refs/heads")) {
        return true;
    }
    if names.iter().any(|name| name != ".git") {
        return false;
    }
    let config = git2::Config::open(&git.join("config")).ok();
    let setting = |name: &str| config.as_ref().and_then(|c| c.get_string(name).ok());
    let has_remote = setting("remote.origin.url").is_some();
    if !holds_a_file(&git.join("objects")) && !holds_a_file(&git.join("refs")) {
        let packed = read_head(&git.join("packed-refs"), 64 * 1024).unwrap_or_default();
        return packed.lines().all(|line| line.starts_with('#'));
    }
    let bare = config
        .as_ref()
        .is_some_and(|c| c.get_bool("core.bare").unwrap_or(false));
    if !bare || !has_remote {
        return false;
    }
    Repository::open_bare(git).is_ok_and(|repo| {
        repo.references_glob("refs/remotes/origin/*")
            .is_ok_and(|mut refs| refs.next().is_some())
    })
}

/// Whether the folder `dir` holds a file (not a folder) at any depth.
fn holds_a_file(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| match entry.file_type() {
        Ok(kind) if kind.is_dir() => holds_a_file(&entry.path()),
        _ => true,
    })
}

/// Whether a reflog under `logs` (the branches' reflogs) begins with sluice's creation of the
/// branch.
fn branch_made_by_sluice(logs: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(logs) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => branch_made_by_sluice(&path),
            Ok(kind) if kind.is_file() => read_head(&path, 4096)
                .and_then(|text| {
                    let first = text.lines().next()?;
                    let (_, message) = first.split_once('\t')?;
                    Some(message == SLUICE_RESET)
                })
                .unwrap_or(false),
            _ => false,
        }
    })
}

/// What a repository sluice did not make holds, for the refusal: a bare repository, a `git
/// init` with no commit, or a checkout with its work (commits not pushed, staged, modified,
/// untracked).
fn describe(root: &Path) -> String {
    let repo = match Repository::open(root) {
        Ok(repo) => repo,
        Err(e) => {
            return format!(
                "holds a git repository that sluice cannot open ({}) and did not make (no \
                 .git/sluice/clone)",
                e.message()
            )
        }
    };
    if repo.is_bare() {
        return "holds a bare git repository that sluice did not make (no .git/sluice/clone)"
            .to_string();
    }
    let mut work = Vec::new();
    // No head commit: an unborn branch (`git init`), or a HEAD git cannot read.
    let head = repo.head().ok().and_then(|head| head.peel_to_commit().ok());
    if let Some(head) = &head {
        match not_pushed(&repo, head.id()) {
            0 => {}
            1 => work.push("1 commit not pushed".to_string()),
            n if n > MAX_COUNTED => work.push(format!("over {MAX_COUNTED} commits not pushed")),
            n => work.push(format!("{n} commits not pushed")),
        }
    }
    work.extend(uncommitted(&repo));
    let with = if work.is_empty() {
        "nothing uncommitted".to_string()
    } else {
        join(&work)
    };
    if head.is_none() {
        return if work.is_empty() {
            "holds a repository made by `git init`, with no commit yet".to_string()
        } else {
            format!("holds a repository made by `git init`, with no commit yet and {with}")
        };
    }
    let of = match repo.find_remote("origin") {
        Ok(remote) => match remote.url() {
            Ok(url) => format!(" of {}", super::credentials::redact_url(url)),
            Err(_) => String::new(),
        },
        Err(_) => " with no remote".to_string(),
    };
    format!("holds a git checkout{of} that sluice did not make (no .git/sluice/clone), with {with}")
}

/// Commits counted at most when telling how many are not pushed.
const MAX_COUNTED: usize = 100;

/// How many commits `head` has that no remote-tracking ref holds (up to one past
/// [`MAX_COUNTED`]).
fn not_pushed(repo: &Repository, head: git2::Oid) -> usize {
    let Ok(mut walk) = repo.revwalk() else {
        return 0;
    };
    if walk.push(head).is_err() {
        return 0;
    }
    if let Ok(refs) = repo.references_glob("refs/remotes/*") {
        for target in refs.flatten().filter_map(|r| r.target()) {
            let _ = walk.hide(target);
        }
    }
    walk.take(MAX_COUNTED + 1).count()
}

/// The kinds of uncommitted work in the checkout, from git's status (read only: the index is
/// not refreshed or written).
fn uncommitted(repo: &Repository) -> Vec<String> {
    let mut opts = StatusOptions::new();
    opts.show(StatusShow::IndexAndWorkdir)
        .include_untracked(true)
        .recurse_untracked_dirs(false)
        .include_ignored(false)
        .exclude_submodules(true)
        .update_index(false);
    let Ok(statuses) = repo.statuses(Some(&mut opts)) else {
        return vec!["a status git cannot read".to_string()];
    };
    let (mut staged, mut modified, mut untracked) = (false, false, false);
    for entry in statuses.iter() {
        let s = entry.status();
        staged |= s.is_index_new()
            || s.is_index_modified()
            || s.is_index_deleted()
            || s.is_index_renamed()
            || s.is_index_typechange();
        modified |= s.is_wt_modified()
            || s.is_wt_deleted()
            || s.is_wt_renamed()
            || s.is_wt_typechange()
            || s.is_conflicted();
        untracked |= s.is_wt_new();
    }
    [
        (staged, "staged changes"),
        (modified, "modified files"),
        (untracked, "untracked files"),
    ]
    .into_iter()
    .filter(|(found, _)| *found)
    .map(|(_, what)| what.to_string())
    .collect()
}

/// `a`, `a and b`, `a, b and c`.
fn join(parts: &[String]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The first names of a folder's entries, for a refusal: `` `a`, `b` and 3 more ``.
fn listing(names: &[String]) -> String {
    const SHOWN: usize = 3;
    let shown: Vec<String> = names
        .iter()
        .take(SHOWN)
        .map(|name| format!("`{name}`"))
        .collect();
    if names.len() > SHOWN {
        format!("{} and {} more", shown.join(", "), names.len() - SHOWN)
    } else {
        join(&shown)
    }
}

/// The names in the folder `dir`, sorted.
fn entries(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// Why a `.git` that is not a folder (a file `gitdir: ...`, the checkout of a `git worktree`
/// or a submodule, whose repository lives elsewhere, or a symbolic link) is not sluice's.
fn git_not_a_folder(git: &Path, meta: &std::fs::Metadata) -> String {
    let found = if meta.file_type().is_symlink() {
        "a symbolic link".to_string()
    } else {
        // The first line of a small file says where the repository is; read no more.
        match read_head(git, 4096)
            .as_deref()
            .and_then(|head| head.lines().next())
            .and_then(|line| line.strip_prefix("gitdir: "))
        {
            Some(dir) => format!(
                "a file pointing to {}: this is the checkout of a git worktree or a submodule",
                dir.trim()
            ),
            None => "a file".to_string(),
        }
    };
    format!("its .git is {found}, not the folder of a clone sluice made")
}

/// The first `limit` bytes of the file at `path`, as text (lossy).
fn read_head(path: &Path, limit: u64) -> Option<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(limit)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_joins_read_as_english() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(join(&names(&["a"])), "a");
        assert_eq!(join(&names(&["a", "b", "c"])), "a, b and c");
        assert_eq!(listing(&names(&["a", "b"])), "`a` and `b`");
        assert_eq!(
            listing(&names(&["a", "b", "c", "d", "e"])),
            "`a`, `b`, `c` and 2 more"
        );
    }

    #[test]
    fn the_marker_records_the_remote_and_a_migration_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        let git = dir.path().join(".git");
        assert_eq!(read_marker(&git), None);
        write_marker(
            dir.path(),
            "https://example.com/x\nmigrating: work tree",
            "main",
            false,
        )
        .unwrap();
        assert_eq!(read_marker(&git), Some(false), "a URL cannot forge a line");
        write_marker(dir.path(), "https://example.com/x", "main", true).unwrap();
        assert_eq!(read_marker(&git), Some(true));
        let text = std::fs::read_to_string(git.join(MARKER)).unwrap();
        assert!(
            text.contains("remote: https://example.com/x\nbranch: main\n"),
            "{text}"
        );
        assert!(!git.join("sluice/clone.partial").exists());
    }
}
