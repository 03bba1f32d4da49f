//! Which signing policy judges a commit, and whether the commit meets it.
//!
//! A commit never judges itself: commit C is judged by the policy in force at its first parent
//! (the `signing` block of `.sluice/config.yaml` and its allowed-signers file, as they are in
//! the parent's tree), so a commit that turns signing off, removes it, or adds its own key to
//! the allowed signers is judged by the policy it changes. Where the settings (or the
//! allowed-signers file they name) do not load, the last policy that loaded stays in force.
//! A policy given outside the repo (`sluice audit --allowed-signers FILE --require-signed`)
//! wins over the repo's: its keys replace the repo's, and `--require-signed` requires every
//! commit signed, the root included.
//!
//! Reads objects only; the verdict depends on nothing but the history and the outside policy.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use git2::{Oid, Repository};

use super::signed::{self, AllowedSigners};
use crate::gitops::objects::{self as tree, GitError};
use crate::gitops::Folders;
use crate::manifest::settings::{parse_settings, SETTINGS_PATH};

/// A signing policy given outside the repo (`sluice audit` flags); the default gives none.
#[derive(Debug, Clone, Default)]
pub struct Outside {
    /// `--allowed-signers FILE`: the keys, instead of the repo's allowed-signers file.
    pub allowed: Option<(String, AllowedSigners)>,
    /// `--require-signed`: every commit must be signed, whatever the repo's settings say.
    pub require_signed: bool,
}

impl Outside {
    /// Reads `--allowed-signers FILE` (every line a key, at least one) for `--require-signed`.
    pub fn read(allowed_signers: Option<&Path>, require_signed: bool) -> Result<Outside, String> {
        let allowed = match allowed_signers {
            None if require_signed => {
                return Err("--require-signed needs --allowed-signers FILE: the keys a commit may be signed with".to_string())
            }
            None => None,
            Some(path) => {
                let file = path.display().to_string();
                let text =
                    std::fs::read_to_string(path).map_err(|e| format!("{file}: cannot read: {e}"))?;
                Some((file.clone(), AllowedSigners::strict(&file, &text)?))
            }
        };
        Ok(Outside {
            allowed,
            require_signed,
        })
    }
}

/// The repo's signing policy as one commit's tree holds it.
#[derive(Debug)]
struct InForce {
    /// The commit whose tree the policy was read from.
    at: Oid,
    /// The allowed-signers file the settings name.
    allowed_path: String,
    keys: AllowedSigners,
}

/// What one commit's tree says about signing.
enum AtCommit {
    /// `signing.required: true` and its allowed-signers file.
    Required(InForce),
    /// No settings, no `signing` block, or `required: false`.
    NotRequired,
    /// The settings, or the allowed-signers file they name, do not load: the policy before
    /// stays in force.
    DoesNotLoad,
}

/// A commit that is not signed as the policy in force requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The policy file the commit changes (settings or allowed signers); empty when none.
    pub file: String,
    pub message: String,
}

/// The signing policies of one history, each read once.
pub struct Policies<'r, 'o> {
    repo: &'r Repository,
    /// Where the commits read are kept (the caller's, shared across its judges).
    kept: Folders,
    outside: &'o Outside,
    /// The repo's policy in force at a commit (`None`: signing not required).
    in_force: HashMap<Oid, Option<Rc<InForce>>>,
}

impl<'r, 'o> Policies<'r, 'o> {
    /// The policies of `repo`'s history, reading commits through `kept`.
    pub fn new(repo: &'r Repository, kept: Folders, outside: &'o Outside) -> Self {
        Policies {
            repo,
            kept,
            outside,
            in_force: HashMap::new(),
        }
    }

    /// Whether `oid` is signed as the policy in force at its first parent (or the outside
    /// policy) requires.
    pub fn judge(&mut self, oid: Oid) -> Result<Option<Violation>, GitError> {
        // The header only: the message may be huge and is not needed.
        let parent = tree::first_parent(self.repo, &self.kept, oid)?;
        let repo_policy = match parent {
            Some(p) => self.in_force_at(p)?,
            None => None,
        };
        if !self.outside.require_signed && repo_policy.is_none() {
            return Ok(None);
        }
        let (keys, source) = match (&self.outside.allowed, &repo_policy) {
            (Some((file, keys)), _) => {
                (keys, format!("the allowed signers given to audit ({file})"))
            }
            (None, Some(p)) => (
                &p.keys,
                format!(
                    "{SETTINGS_PATH} signing.required as of {} (keys of {})",
                    short(p.at),
                    p.allowed_path
                ),
            ),
            // `Outside::read` refuses --require-signed without keys.
            (None, None) => return Ok(None),
        };
        let Err(why) = signed::verify(self.repo, oid, keys) else {
            return Ok(None);
        };
        let allowed_path = repo_policy.as_ref().map(|p| p.allowed_path.as_str());
        let changed = self.changed_policy_file(oid, parent, allowed_path)?;
        let message = match &changed {
            Some(file) => format!(
                "{why}, yet it changes the signing policy ({file}): only a commit signed by a key the policy before it allows may do that; the policy in force is {source}"
            ),
            None => format!("{why}; the signing policy in force requires signed commits: {source}"),
        };
        Ok(Some(Violation {
            file: changed.unwrap_or_default(),
            message,
        }))
    }

    /// Whether a child of `oid` must be signed: by the repo's policy in force at `oid`, or the
    /// outside policy.
    pub fn requires_signed_after(&mut self, oid: Oid) -> Result<bool, GitError> {
        Ok(self.outside.require_signed || self.in_force_at(oid)?.is_some())
    }

    /// The repo's policy in force at `oid`: its own when its settings load, else the last one
    /// that loaded on its first-parent line.
    fn in_force_at(&mut self, oid: Oid) -> Result<Option<Rc<InForce>>, GitError> {
        let mut unloaded = Vec::new();
        let mut next = Some(oid);
        let found = loop {
            let Some(at) = next else { break None };
            if let Some(known) = self.in_force.get(&at) {
                break known.clone();
            }
            match read_at(self.repo, &self.kept, at)? {
                AtCommit::Required(p) => {
                    let p = Rc::new(p);
                    self.in_force.insert(at, Some(p.clone()));
                    break Some(p);
                }
                AtCommit::NotRequired => {
                    self.in_force.insert(at, None);
                    break None;
                }
                AtCommit::DoesNotLoad => {
                    unloaded.push(at);
                    next = tree::first_parent(self.repo, &self.kept, at)?;
                }
            }
        };
        for at in unloaded {
            self.in_force.insert(at, found.clone());
        }
        Ok(found)
    }

    /// The policy file `oid` changes against its first parent: the settings, or the
    /// allowed-signers file of the policy in force.
    fn changed_policy_file(
        &self,
        oid: Oid,
        parent: Option<Oid>,
        allowed_path: Option<&str>,
    ) -> Result<Option<String>, GitError> {
        let Some(parent) = parent else {
            return Ok(None);
        };
        let (ours, theirs) = (
            tree::commit_tree(self.repo, &self.kept, oid)?,
            tree::commit_tree(self.repo, &self.kept, parent)?,
        );
        for path in [Some(SETTINGS_PATH), allowed_path].into_iter().flatten() {
            if tree::file_at(self.repo, &ours, path)? != tree::file_at(self.repo, &theirs, path)? {
                return Ok(Some(path.to_string()));
            }
        }
        Ok(None)
    }
}

/// The loop's check before it acts on a status it did not write (see `crate::facts`): the
/// commit that brought `path` as the first-parent line of `head` has it, and why it is not
/// signed as the repo's policy at its parent requires (`None` when it is, or nothing is
/// required). Looks back at most `lookback` commits; what it cannot check is an error.
pub fn last_change_unsigned(
    dir: &Path,
    head: Oid,
    path: &str,
    lookback: usize,
) -> Result<Option<(Oid, Violation)>, GitError> {
    let repo = Repository::open(dir).map_err(tree::git("open the repository"))?;
    let kept = Folders::default();
    let entry = |oid: Oid| -> Result<Option<Oid>, GitError> {
        let tree = tree::commit_tree(&repo, &kept, oid)?;
        Ok(tree.get_path(Path::new(path)).ok().map(|e| e.id()))
    };
    let now = entry(head)?;
    let mut brought = head;
    let mut steps = 0;
    loop {
        match tree::first_parent(&repo, &kept, brought)? {
            Some(parent) if entry(parent)? == now => brought = parent,
            _ => break,
        }
        steps += 1;
        if steps >= lookback {
            let outside = Outside::default();
            if Policies::new(&repo, kept.clone(), &outside)
                .in_force_at(head)?
                .is_none()
            {
                return Ok(None);
            }
            return Err(GitError {
                op: "find the commit that brought the file",
                detail: format!("{path} is unchanged for more than {lookback} commits"),
            });
        }
    }
    let outside = Outside::default();
    let found = Policies::new(&repo, kept.clone(), &outside).judge(brought)?;
    Ok(found.map(|v| (brought, v)))
}

/// What the tree of `oid` says about signing.
fn read_at(repo: &Repository, kept: &Folders, oid: Oid) -> Result<AtCommit, GitError> {
    let tree = tree::commit_tree(repo, kept, oid)?;
    let Some(config) = tree::file_at(repo, &tree, SETTINGS_PATH)? else {
        return Ok(AtCommit::NotRequired);
    };
    let Ok(settings) = parse_settings(SETTINGS_PATH, &String::from_utf8_lossy(&config)) else {
        return Ok(AtCommit::DoesNotLoad);
    };
    let Some(signing) = settings.signing.filter(|s| s.required) else {
        return Ok(AtCommit::NotRequired);
    };
    let allowed_path = signing.allowed_signers.as_str().to_string();
    match tree::file_at(repo, &tree, &allowed_path)? {
        None => Ok(AtCommit::DoesNotLoad),
        Some(text) => Ok(AtCommit::Required(InForce {
            at: oid,
            keys: AllowedSigners::lenient(&String::from_utf8_lossy(&text)),
            allowed_path,
        })),
    }
}

fn short(oid: Oid) -> String {
    let full = oid.to_string();
    full.get(..12).unwrap_or(&full).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUIRED: &str = "signing: {required: true, allowedSigners: .sluice/allowed_signers}\n";
    const STATUS: &str = ".sluice/status/shop/web.yaml";

    /// Commits exactly `files` (path, text) on `parent`, unsigned.
    fn commit(repo: &Repository, files: &[(&str, &str)], parent: Option<Oid>) -> Oid {
        let mut index = git2::Index::new().unwrap();
        for (path, text) in files {
            let id = repo.blob(text.as_bytes()).unwrap();
            index
                .add(&crate::gitops::index_entry(path, id, 0o100_644))
                .unwrap();
        }
        let tree = repo.find_tree(index.write_tree_to(repo).unwrap()).unwrap();
        let who = git2::Signature::now("human", "human@example.com").unwrap();
        let parents: Vec<git2::Commit<'_>> = parent
            .map(|p| repo.find_commit(p).unwrap())
            .into_iter()
            .collect();
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        repo.commit(None, &who, &who, "c", &tree, &parents).unwrap()
    }

    /// Four unsigned commits: the status file, `settings` and an empty allowed-signers file at
    /// the root, one that changes nothing, one that adds README.md, one that removes it.
    fn history(settings: &str) -> (tempfile::TempDir, Oid) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let mut files = vec![
            (STATUS, "phase: Progressing\n"),
            (SETTINGS_PATH, settings),
            (".sluice/allowed_signers", "# nobody\n"),
        ];
        let first = commit(&repo, &files, None);
        let second = commit(&repo, &files, Some(first));
        files.push(("README.md", "x\n"));
        let third = commit(&repo, &files, Some(second));
        let fourth = commit(&repo, &files[..3], Some(third));
        (dir, fourth)
    }

    #[test]
    fn the_commit_that_brought_a_file_is_judged_by_the_policy_at_its_parent() {
        let (dir, head) = history(REQUIRED);
        // The root brought the status file: no policy was in force before it.
        assert!(last_change_unsigned(dir.path(), head, STATUS, 10)
            .unwrap()
            .is_none());
        // The head brought README.md's removal, under the policy its parent holds.
        let (found, v) = last_change_unsigned(dir.path(), head, "README.md", 10)
            .unwrap()
            .unwrap();
        assert_eq!(found, head);
        assert!(v.message.starts_with("unsigned; "), "{}", v.message);
    }

    #[test]
    fn a_file_unchanged_past_the_look_back_is_an_error_only_under_a_policy() {
        let (dir, head) = history(REQUIRED);
        let err = last_change_unsigned(dir.path(), head, STATUS, 2).unwrap_err();
        assert!(
            err.to_string()
                .contains("unchanged for more than 2 commits"),
            "{err}"
        );
        let (dir, head) = history("output: clusters/{namespace}/{name}\n");
        assert!(last_change_unsigned(dir.path(), head, STATUS, 2)
            .unwrap()
            .is_none());
    }
}
