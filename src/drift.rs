//! Drift: a file sluice owns for a canary (its output folder: route, workloads,
//! kustomization; and its status file `.sluice/status/<ns>/<name>.yaml`) changed by someone
//! else since sluice's last commit for the canary. The loop never builds on such a file
//! silently: the repo setting `drift:` says whether the canary holds (`hold`, the default) or
//! the next commit writes back what sluice last committed (`restore`).
//!
//! Found from git alone, deterministically: walk the first-parent history from the head and
//! look only at the commits that changed the canary's owned files (against their first
//! parent). The newest of them that is sluice's own ("sanctioned") is where sluice's version
//! of the files lives. A commit is sluice's by content, never by what it says about itself:
//! its output folder must be exactly what sluice renders for the status file it carries,
//! drawn from the commit before it (`drift/verify.rs`: every file byte for byte, none added,
//! none missing). Trailers and merges only say which commit to check:
//! - a commit whose trailers carry `Sluice-Canary: <ns>/<name>`: the loop's decisions,
//!   manual operations (`sluice approve|abort|...`), restores, approval commits merged by
//!   fast-forward or rebase (which keep the message);
//! - a merge whose other parent is such a commit with the same owned files: an approval
//!   branch merged with a merge commit (the branch's commit is checked);
//! - a commit that turns a waiting status into the approval's (`clockFromMerge`): how a
//!   squash-merged approval arrives (detected from content, like [`crate::approval`] does).
//!
//! Under `signing.required` content is not enough either: a commit is sluice's only when it is
//! also signed as the signing policy in force at its first parent requires (judged by audit's
//! own code, `signatures::policy`), so a consistent rewrite of the status and the output folder
//! (a later step, say) that is not signed with sluice's key is drift, named with why. A merged
//! approval (its status has `clockFromMerge`) is left to the approval check in `crate::facts`,
//! which holds on an unsigned one before the loop acts on it. Under that policy sluice must
//! sign its own commits: without a signing key every canary fails its tick with an error that
//! says so, rather than commit what the policy refuses.
//!
//! A hand edit dressed in sluice's trailers is therefore drift like any other. When no commit
//! of sluice's is within [`LOOKBACK`], the head's folder is compared with what sluice renders
//! for the head's status: if it differs the canary holds (whatever the policy: sluice's version
//! cannot be read back), rather than being overwritten at its next step.
//!
//! A hold commit (`Sluice-Drift` trailers) writes only the status file, so the output folder
//! is compared with the newest sanctioned commit that is not one; the hold commit is sluice's
//! when its status draws that commit's output folder. The canary resumes when the
//! owned files are sluice's again: put back by hand (a revert), rewritten by a manual
//! operation (`sluice abort`, `promote`, ... write every owned file), or restored after the
//! setting is switched to `restore`.
//!
//! A hand edit of the status file is named like any other, but the hold commit writes back
//! sluice's status (sluice never builds on a status it did not write), so the canary resumes
//! on the next tick. Under `restore` every drifted file is written back in one commit
//! (`Sluice-Restored`, `Sluice-Restored-From`) and the canary decides again from the next tick.
//!
//! This module finds drift and reads what a decision about it needs ([`observe`]: sluice's
//! last status, the files a restore writes back); the decision itself (hold, restore, resume)
//! is the core's (`core::verdict`), and [`crate::render::drift_changes`] renders its commit.
//!
//! Cost: the tick walks the first-parent history once ([`History`], shared by every canary),
//! one tree diff per commit, only as deep as the deepest canary's last change and at most
//! [`LOOKBACK`] commits, of which it reads only those the last tick did not (the commits
//! since its head: the rest are kept by commit id); a canary none of whose owned files the
//! commits since the last tick's head changed keeps that tick's verdict without walking
//! further (what the walk would find is the same), so a tick's drift cost follows what
//! changed, not how many canaries the repo holds; a commit is rendered once per runtime (the
//! verdicts are kept by commit ids in the runtime's [`Memory`]); nothing runs on an idle poll
//! (the head did not move).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use git2::Oid;

use crate::core::observe::DriftFact;
use crate::core::status::Status;
use crate::gitops::{trailer_group, CommitFacts, ConfigRepo, FileChange};
use crate::manifest::model::Canary;
use crate::manifest::settings::DriftPolicy;
use crate::render::{message, status_file, RenderError};

mod made_file;
mod verify;

pub use made_file::Made;
pub use verify::made;

pub use verify::Verifier;

/// What the drift check keeps from one tick to the next, owned by the runtime
/// ([`crate::runtime::Runtime::drift`]): the commits the last walk read, each canary's last
/// verdict, and the verifier's verdicts and base ([`verify::Kept`]). Everything in it is keyed
/// by commit ids (and by the clone's work dir where a verdict depends on the clone), so it is
/// right for any clone the runtime serves; a second runtime has its own.
pub struct Memory {
    /// The commits the last [`History`] read (at most [`LOOKBACK`]), for the next tick's.
    walk: Mutex<HashMap<Oid, Arc<Walked>>>,
    checks: Mutex<Checks>,
    verified: verify::Kept,
    /// The commits and folders the verifier and the signing check read, by id.
    folders: crate::gitops::Folders,
}

impl Default for Memory {
    /// An empty memory that shares its parses with no one.
    fn default() -> Memory {
        Memory::new(crate::yaml::parses::Parses::default())
    }
}

impl Memory {
    /// An empty memory whose verifier shares file parses through `parses` (the tick's
    /// snapshot holds most of the same blobs).
    pub fn new(parses: crate::yaml::parses::Parses) -> Memory {
        Memory {
            walk: Mutex::default(),
            checks: Mutex::default(),
            verified: verify::Kept::new(parses),
            folders: crate::gitops::Folders::default(),
        }
    }

    fn walk(&self) -> MutexGuard<'_, HashMap<Oid, Arc<Walked>>> {
        match self.walk.lock() {
            Ok(guard) => guard,
            // A panic elsewhere while holding the lock left a map that is still whole.
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn checks(&self) -> MutexGuard<'_, Checks> {
        match self.checks.lock() {
            Ok(guard) => guard,
            // A panic elsewhere while holding the lock left a map that is still whole.
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn remember_check(&self, key: CheckKey, head: Oid, found: Option<Drift>) {
        let mut checks = self.checks();
        if checks.len() >= KEEP_CHECKS && !checks.contains_key(&key) {
            checks.clear();
        }
        checks.insert(key, (head, found));
    }
}

/// How many first-parent commits a tick's [`History`] reads at most. A change older than
/// that was seen (and acted on) by the ticks since.
pub const LOOKBACK: usize = 500;

#[derive(Debug, thiserror::Error)]
pub enum DriftError {
    #[error(transparent)]
    Git(#[from] crate::gitops::Error),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(transparent)]
    Verify(#[from] verify::VerifyError),
    #[error("{settings} at {commit}: signing.required is set, but sluice has no signing key (--signing-ssh-key, SLUICE_SIGNING_SSH_KEY): its own commits would not be signed as the policy requires, so sluice changes nothing until it has a key the allowed signers list")]
    NoSigningKey { settings: String, commit: String },
    #[error("{canary}: no commit that wrote the canary's files is signed as the signing policy requires (the newest, {newest}: {why}); sluice changes nothing until one is: is sluice's signing key in the allowed signers?")]
    NoSignedCommit {
        canary: String,
        newest: String,
        why: String,
    },
    #[error("{path} at {commit}: cannot read the status sluice committed: {message}")]
    Status {
        path: String,
        commit: String,
        message: String,
    },
}

/// Files sluice owns that differ from sluice's last commit of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The changed files, sorted (output files, then the status file).
    pub files: Vec<String>,
    /// The commit holding sluice's version of the output folder.
    pub output_from: Oid,
    /// The commit holding sluice's version of the status file.
    pub status_from: Oid,
    /// The newest commit that changed them, as `<short id> by <author>: <subject>`.
    pub by: String,
    /// `Some(n)`: no commit of sluice's for the output folder is within the last `n`
    /// commits; the files are those that differ from what sluice renders for the head's
    /// status, and `output_from` is the head.
    pub beyond: Option<usize>,
}

/// The first-parent history from a tick's head and the files each commit changed, read
/// once, only as deep as some canary's check needs, and shared by every canary of the tick.
/// The commits the last tick read are taken from it ([`History::remember`]): a commit's
/// parents, trailers and changed files depend on its id alone, so a tick reads only the
/// commits since the last tick's head.
pub struct History {
    head: Oid,
    memory: Arc<Memory>,
    read: Vec<Arc<Walked>>,
    next: Option<Oid>,
    /// What the last tick read, by commit id.
    known: HashMap<Oid, Arc<Walked>>,
}

struct Walked {
    oid: Oid,
    facts: CommitFacts,
    changed: Vec<String>,
}

impl History {
    /// The history from `head` (the fetched head, before this tick's commits: they never
    /// change another canary's files), taking the commits the last history kept in `memory`.
    /// Keyed by commit id, so right for any clone: a runtime serving several clones (the
    /// tests) only reads more.
    pub fn new(head: Oid, memory: &Arc<Memory>) -> History {
        History {
            head,
            known: std::mem::take(&mut *memory.walk()),
            memory: Arc::clone(memory),
            read: Vec::new(),
            next: Some(head),
        }
    }

    /// Keeps the commits this history read for the next tick's, in place of the last tick's.
    pub fn remember(self) {
        *self.memory.walk() = self
            .read
            .into_iter()
            .map(|walked| (walked.oid, walked))
            .collect();
    }

    /// The `i`th commit from the head, read when first asked for; `None` past the root or
    /// [`LOOKBACK`].
    fn get(&mut self, repo: &ConfigRepo, i: usize) -> Result<Option<&Walked>, DriftError> {
        while self.read.len() <= i && self.read.len() < LOOKBACK {
            let Some(oid) = self.next else { break };
            let walked = match self.known.get(&oid) {
                Some(walked) => Arc::clone(walked),
                None => {
                    let facts = repo.commit_facts(oid)?;
                    let parent = facts.parents.first().copied();
                    let changed = repo.changed_paths(oid, parent)?;
                    Arc::new(Walked {
                        oid,
                        facts,
                        changed,
                    })
                }
            };
            self.next = walked.facts.parents.first().copied();
            self.read.push(walked);
        }
        Ok(self.read.get(i).map(|walked| &**walked))
    }

    /// The commit just past the look-back, once the walk has reached it; `None` while the
    /// walk is shorter or when it reached the first commit.
    fn past_lookback(&self) -> Option<Oid> {
        self.next.filter(|_| self.read.len() >= LOOKBACK)
    }
}

/// Where sluice's version of a canary's owned files is, and whether the head differs.
pub fn check(
    repo: &ConfigRepo,
    history: &mut History,
    verifier: &mut Verifier,
    canary: &Canary,
) -> Result<Option<Drift>, DriftError> {
    let head = history.head;
    if !repo.signs() && verifier.requires_signed_after(head)? {
        return Err(DriftError::NoSigningKey {
            settings: crate::manifest::settings::SETTINGS_PATH.to_string(),
            commit: head.to_string().get(..7).unwrap_or_default().to_string(),
        });
    }
    let owned = Owned::of(canary);
    let key = CheckKey {
        root: repo.root().to_path_buf(),
        canary: canary.id.to_string(),
        output: owned.output.clone(),
    };
    if let Some(last) = unchanged_since_last_check(repo, history, &owned, &key)? {
        return Ok(last);
    }
    let found = walk(repo, history, verifier, canary, &owned)?;
    history.memory.remember_check(key, head, found.clone());
    Ok(found)
}

/// A canary's check and the head it was made at, kept for the next tick's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CheckKey {
    /// The clone's work dir: a runtime may serve several clones (the tests' does).
    root: std::path::PathBuf,
    canary: String,
    output: String,
}

/// Checks kept at most; past it the memo starts again empty.
const KEEP_CHECKS: usize = 10_000;

/// Each canary's last verdict and the head it was made at.
type Checks = HashMap<CheckKey, (Oid, Option<Drift>)>;

/// The last tick's verdict on the canary, when it still holds: the head it was made at is on
/// this head's first-parent line within the look-back, and no commit since changed a file the
/// canary owns (the tree diffs of the commits since). What the walk finds depends on nothing
/// else: the commits before that head, their verdicts (by content and signature, each judged
/// against its own parent) and the owned files at the head are the same. A `beyond` verdict
/// names the head, which moved. `None`: check again.
fn unchanged_since_last_check(
    repo: &ConfigRepo,
    history: &mut History,
    owned: &Owned,
    key: &CheckKey,
) -> Result<Option<Option<Drift>>, DriftError> {
    let last = history.memory.checks().get(key).cloned();
    let Some((last_head, last)) = last else {
        return Ok(None);
    };
    let mut i = 0;
    loop {
        let Some(walked) = history.get(repo, i)? else {
            return Ok(None);
        };
        if walked.oid == last_head {
            break;
        }
        if walked.changed.iter().any(|p| owned.contains(p)) {
            return Ok(None);
        }
        i += 1;
    }
    let head = history.head;
    Ok(Some(last.map(|drift| match drift.beyond {
        Some(_) => Drift {
            output_from: head,
            status_from: head,
            ..drift
        },
        None => drift,
    })))
}

/// The check itself: the walk back to sluice's last commit of the canary's owned files.
fn walk(
    repo: &ConfigRepo,
    history: &mut History,
    verifier: &mut Verifier,
    canary: &Canary,
    owned: &Owned,
) -> Result<Option<Drift>, DriftError> {
    let owned = owned.clone();
    let mut changes = Changes {
        history,
        owned: &owned,
        i: 0,
    };
    // The newest foreign commit, and the newest hold commit, as indexes into the history.
    let mut newest_foreign: Option<usize> = None;
    let mut hold: Option<usize> = None;
    // Commits whose files are sluice's but that are not signed as the policy requires: why.
    let mut refused: Vec<(usize, String)> = Vec::new();
    // The newest commit whose output folder is sluice's.
    let sluices = loop {
        let Some(i) = changes.next(repo)? else {
            break None;
        };
        let walked = changes.at(i);
        let kind = match classify(repo, verifier, &owned, canary, walked)? {
            Kind::Foreign => Kind::Foreign,
            kind => match unsigned(repo, verifier, &owned, walked)? {
                None => kind,
                Some(why) => {
                    refused.push((i, why));
                    Kind::Foreign
                }
            },
        };
        match kind {
            Kind::Sluice => break Some(walked.oid),
            Kind::Hold if hold.is_none() => hold = Some(i),
            Kind::Hold => {}
            Kind::Foreign if hold.is_none() => {
                newest_foreign.get_or_insert(i);
            }
            Kind::Foreign => {}
        }
    };
    let mut newest_foreign = newest_foreign.map(|i| (i, why(&refused, i)));
    let Some(output_from) = sluices else {
        // Back to the first commit, the canary's files were never written by a commit the
        // policy allows: nothing of sluice's to compare with, and nothing to build on.
        if let (Some((i, why)), None) = (refused.first(), changes.history.past_lookback()) {
            return Err(DriftError::NoSignedCommit {
                canary: canary.id.to_string(),
                newest: describe(changes.at(*i), None),
                why: why.clone(),
            });
        }
        return beyond(repo, changes.history, verifier, canary, newest_foreign);
    };
    // A hold commit wrote only the status: it is sluice's when that status draws the output
    // folder sluice last wrote.
    let status_from = match hold {
        None => output_from,
        Some(h) => {
            let oid = changes.at(h).oid;
            if draws(repo, verifier, &owned, canary, output_from, oid)? {
                oid
            } else {
                let newest = newest_foreign.as_ref().map_or(h, |(f, _)| (*f).min(h));
                newest_foreign = Some((newest, why(&refused, newest)));
                output_from
            }
        }
    };
    if hold.is_none() && newest_foreign.is_none() {
        return Ok(None);
    }
    let by = newest_foreign.map_or_else(String::new, |(i, why)| describe(changes.at(i), why));
    differing(
        repo,
        &owned,
        changes.history.head,
        output_from,
        status_from,
        by,
    )
}

/// No commit of sluice's for the canary's output folder within the look-back: the head's
/// folder is judged against what sluice renders for the head's status, drawn from the commit
/// just past the look-back. Reaching the first commit instead means sluice never wrote the
/// canary's files: nothing to compare with.
fn beyond(
    repo: &ConfigRepo,
    history: &mut History,
    verifier: &mut Verifier,
    canary: &Canary,
    newest_foreign: Option<(usize, Option<&str>)>,
) -> Result<Option<Drift>, DriftError> {
    let (head, Some(edge)) = (history.head, history.past_lookback()) else {
        return Ok(None);
    };
    // Byte for byte the files of the newest commit sluice made for the canary in this clone:
    // sluice's, as a walk that found that commit and nothing after it would say, without a
    // render. (A commit the clone does not have, or cannot read, is passed over.)
    if let Some(made) = verifier.newest_made(&canary.id.to_string()) {
        let owned = Owned::of(canary);
        if owned
            .ids(repo, made)
            .is_ok_and(|at_made| owned.ids(repo, head).is_ok_and(|now| now == at_made))
        {
            return Ok(None);
        }
    }
    let path = status_file::path_for(&canary.id);
    let Some(status) = repo.read_file_at(head, &path)? else {
        return Ok(None);
    };
    let files = verifier.differing(canary, &status, head, edge)?;
    if files.is_empty() {
        return Ok(None);
    }
    let by = newest_foreign.map_or_else(String::new, |(i, why)| describe(&history.read[i], why));
    Ok(Some(Drift {
        files,
        output_from: head,
        status_from: head,
        by,
        beyond: Some(LOOKBACK),
    }))
}

/// `<short id> by <author>: <subject>`, and why it is not signed as the policy requires when
/// that is what made it foreign.
fn describe(walked: &Walked, unsigned: Option<&str>) -> String {
    let why = unsigned.map_or_else(String::new, |why| {
        format!(" (not signed as the signing policy requires: {why})")
    });
    format!(
        "{} by {}: {}{why}",
        &walked.oid.to_string()[..7],
        walked.facts.author.name,
        walked.facts.subject
    )
}

/// Why the `i`th commit of the history was refused for its signature, if it was.
fn why(refused: &[(usize, String)], i: usize) -> Option<&str> {
    refused
        .iter()
        .find(|(at, _)| *at == i)
        .map(|(_, why)| why.as_str())
}

/// Why `walked`, whose files are sluice's, is not signed as the signing policy in force at its
/// first parent requires; `None` when it is, or nothing is required. A merged approval (its
/// status has `clockFromMerge`) is left to the approval check (`crate::facts`), which holds
/// on an unsigned one with its own message before the loop acts on it.
fn unsigned(
    repo: &ConfigRepo,
    verifier: &mut Verifier,
    owned: &Owned,
    walked: &Walked,
) -> Result<Option<String>, DriftError> {
    let Some(why) = verifier.unsigned(walked.oid)? else {
        return Ok(None);
    };
    let approval = repo
        .read_file_at(walked.oid, &owned.status)?
        .and_then(|text| status_file::parse(&text).ok())
        .is_some_and(|status| status.clock_from_merge);
    Ok((!approval).then_some(why))
}

fn differing(
    repo: &ConfigRepo,
    owned: &Owned,
    head: Oid,
    output_from: Oid,
    status_from: Oid,
    by: String,
) -> Result<Option<Drift>, DriftError> {
    let mut files = repo.changed_files(output_from, head, &owned.output)?;
    if repo.entry_id_at(status_from, &owned.status)? != repo.entry_id_at(head, &owned.status)? {
        files.push(owned.status.clone());
    }
    Ok((!files.is_empty()).then_some(Drift {
        files,
        output_from,
        status_from,
        by,
        beyond: None,
    }))
}

/// The paths sluice owns for one canary.
#[derive(Debug, Clone)]
struct Owned {
    output: String,
    status: String,
}

impl Owned {
    fn of(canary: &Canary) -> Owned {
        Owned {
            output: canary.output.as_str().to_string(),
            status: status_file::path_for(&canary.id),
        }
    }

    fn contains(&self, path: &str) -> bool {
        path == self.status
            || path
                .strip_prefix(self.output.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    fn ids(
        &self,
        repo: &ConfigRepo,
        commit: Oid,
    ) -> Result<(Option<Oid>, Option<Oid>), DriftError> {
        Ok((
            repo.entry_id_at(commit, &self.output)?,
            repo.entry_id_at(commit, &self.status)?,
        ))
    }
}

/// The first-parent commits that changed the owned files, newest first.
struct Changes<'a> {
    history: &'a mut History,
    owned: &'a Owned,
    i: usize,
}

impl Changes<'_> {
    /// The index in the history of the next such commit. Not the commit itself: a per-tick
    /// commit's facts hold every canary's trailers, and each canary of the tick reads them.
    fn next(&mut self, repo: &ConfigRepo) -> Result<Option<usize>, DriftError> {
        while let Some(walked) = self.history.get(repo, self.i)? {
            self.i += 1;
            if walked.changed.iter().any(|p| self.owned.contains(p)) {
                return Ok(Some(self.i - 1));
            }
        }
        Ok(None)
    }

    /// The `i`th commit of the history, already read by [`Changes::next`].
    fn at(&self, i: usize) -> &Walked {
        &self.history.read[i]
    }
}

/// What a commit that changed a canary's owned files is to the drift check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Its output folder is what sluice renders for its status: one of the loop's decisions,
    /// a manual operation, a restore, or an approval merged by any method.
    Sluice,
    /// A hold commit (`Sluice-Drift`): it writes the status file only, and is sluice's when
    /// that status draws the output folder of the newest [`Kind::Sluice`] commit.
    Hold,
    /// Anything else, whatever its trailers say.
    Foreign,
}

/// What `walked` (which changed the owned files) is. Trailers only say which check applies:
/// a commit is sluice's when its files are what sluice renders, never because it says so.
/// The revision and the commit a wave's revert records (its `waveRevert` replay record).
fn wave_revert(group: &[(String, String)]) -> Option<(String, String)> {
    group
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(crate::render::replay::REPLAY))
        .find_map(
            |(_, v)| match crate::render::replay::Record::parse(v).ok()?.by {
                crate::render::replay::By::WaveRevert { revision, from } => Some((revision, from)),
                _ => None,
            },
        )
}

fn classify(
    repo: &ConfigRepo,
    verifier: &mut Verifier,
    owned: &Owned,
    canary: &Canary,
    walked: &Walked,
) -> Result<Kind, DriftError> {
    let (commit, facts) = (walked.oid, &walked.facts);
    let id = canary.id.to_string();
    let verified = |sluices: bool| {
        if sluices {
            Kind::Sluice
        } else {
            Kind::Foreign
        }
    };
    // A merged approval, by any method (a waiting status became the approval's): the
    // approval check judges it against what sluice pushed on the branch, which is stricter
    // than this one, and refuses it with a comment and a fresh pull request when it differs.
    if let Some(parent) = facts.parents.first() {
        let status = |at: Oid| -> Result<Option<Status>, DriftError> {
            Ok(repo
                .read_file_at(at, &owned.status)?
                .and_then(|text| status_file::parse(&text).ok()))
        };
        if let (Some(now), Some(before)) = (status(commit)?, status(*parent)?) {
            if now.clock_from_merge && before.is_waiting() {
                return Ok(Kind::Sluice);
            }
        }
    }
    if carries(&facts.trailers, &id) {
        let group = trailer_group(&facts.trailers, message::CANARY, &id);
        if group
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(message::DRIFT))
        {
            let status_only = walked
                .changed
                .iter()
                .filter(|p| owned.contains(p))
                .all(|p| *p == owned.status);
            return Ok(if status_only {
                Kind::Hold
            } else {
                Kind::Foreign
            });
        }
        // A wave's revert (`onFailure: rollback`) puts back an earlier folder.
        if let Some((revision, from)) = wave_revert(group) {
            if crate::waves::revert::is_sluices(repo, canary, commit, &revision, &from)? {
                return Ok(Kind::Sluice);
            }
        }
        return Ok(verified(draws(
            repo, verifier, owned, canary, commit, commit,
        )?));
    }
    // An approval branch merged with a merge commit: the branch's commit must be sluice's.
    let ids = owned.ids(repo, commit)?;
    for other in facts.parents.iter().skip(1) {
        if carries(&repo.commit_facts(*other)?.trailers, &id) && owned.ids(repo, *other)? == ids {
            return Ok(verified(draws(
                repo, verifier, owned, canary, *other, *other,
            )?));
        }
    }
    Ok(Kind::Foreign)
}

/// Whether the status file at `status_at` draws the output folder at `files` as sluice
/// renders it from the commit the tick read then (`files`' first parent).
fn draws(
    repo: &ConfigRepo,
    verifier: &mut Verifier,
    owned: &Owned,
    canary: &Canary,
    files: Oid,
    status_at: Oid,
) -> Result<bool, DriftError> {
    let (Some(status), Some(base)) = (
        repo.read_file_at(status_at, &owned.status)?,
        repo.parent_of(files)?,
    ) else {
        return Ok(false);
    };
    Ok(verifier.differing(canary, &status, files, base)?.is_empty())
}

fn carries(trailers: &[(String, String)], id: &str) -> bool {
    trailers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case(message::CANARY) && v == id)
}

/// A drift as the core weighs it, and the files a `drift: restore` writes back (read from
/// sluice's last commit of them; the status file is rendered from the decision instead).
pub struct Observed {
    pub fact: DriftFact,
    pub restore: Vec<FileChange>,
}

/// Reads what the core needs to decide about `drift`: the status sluice last committed and,
/// under `restore`, sluice's version of every drifted output file. `status` is the head's.
pub fn observe(
    repo: &ConfigRepo,
    canary: &Canary,
    status: Option<&Status>,
    drift: &Drift,
    policy: DriftPolicy,
) -> Result<Observed, DriftError> {
    let path = status_file::path_for(&canary.id);
    let missing = |message: String| DriftError::Status {
        path: path.clone(),
        commit: drift.status_from.to_string(),
        message,
    };
    let committed = match repo.read_file_at(drift.status_from, &path)? {
        Some(text) => Some(status_file::parse(&text).map_err(missing)?),
        None => None,
    };
    let sluice_status = committed
        .or_else(|| status.cloned())
        .ok_or_else(|| missing("no status file".to_string()))?;
    let mut restore = Vec::new();
    // Past the look-back sluice's version is unknown: the canary holds, nothing is restored.
    if policy == DriftPolicy::Restore && drift.beyond.is_none() {
        for file in drift.files.iter().filter(|f| **f != path) {
            restore.push(match repo.read_file_at(drift.output_from, file)? {
                Some(text) => FileChange::write(file.clone(), text),
                None => FileChange::delete(file.clone()),
            });
        }
    }
    Ok(Observed {
        fact: DriftFact {
            files: drift.files.clone(),
            by: drift.by.clone(),
            output_from: drift.output_from.to_string(),
            sluice_status,
            policy,
            beyond: drift.beyond,
        },
        restore,
    })
}
