//! `sluice audit`: every decision on the branch, made again from git alone.
//!
//! The first-parent history is walked from the root. For each sluice commit (one carrying
//! `Sluice-Canary` trailers) the decision's inputs are rebuilt from git: the specs, settings
//! and status file at the parent, and what the commit's `Sluice-Replay` trailer recorded (the
//! decision time and the observations, or the manual operation). `core::decide` (or
//! `core::operate`) and the renderers then run again, and their files and message must be
//! exactly the commit's. Other commits must not change a file sluice owns (a status file, or
//! a file whose first line carries sluice's generated mark), except a merge of an approval
//! branch (the branch's commit is replayed instead) or a squash or cherry-pick of one (the
//! change must be exactly the approval of the parent's waiting canary).
//!
//! Trailers are claims: a commit that changes an owned file is verified by replay or reported.
//! One that claims to be sluice's but carries nothing to check (no `Sluice-Replay`, `"by":
//! "other"`, an older format than the history before it, a message over the cap) is
//! `unverifiable`; a merge is judged by its change against its first parent. Commits written
//! before replay records existed are listed as not replayable, not as findings. Reads objects
//! only; the verdict depends on nothing but the history, so the same history always gives the
//! same report.

pub mod replay;
pub mod replayed;
pub mod since;
pub mod wave_revert;

pub use crate::signatures::{policy, signed};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use git2::{Oid, Repository};
use serde::Serialize;

use crate::core::decide::Action;
use crate::core::model::{CanaryId, Name};
use crate::core::status::Status;
use crate::deleted::{self, STATUS_DIR};
use crate::gitops::message::{CommitHead, Message};
use crate::gitops::{parse_trailers, trailer_group, CommitMessage, Folders};
use crate::manifest::load_incremental::KeptLoad;
use crate::manifest::settings::{Settings, SETTINGS_PATH};
use crate::render::message::{self, CANARY};
use crate::render::replay::{
    By, Record, EVERY_COMMIT_FROM, FLUX_KEYS_DROPPED_FROM, FORMAT, REPLAY,
};
use crate::render::status_file::SpecRecord;
use crate::render::GENERATED_MARK;
use crate::workload;
use crate::yaml::snapshot::{ReadError, Snapshot};

use crate::commit_files::{At, CommitFiles};
use crate::gitops::objects as tree;
use replay::{Replayed, Sanctioned};
use tree::{Changed, GitError};

/// The trailer that names who approved (written from format [`APPROVER_FROM`] on).
pub const APPROVED_BY: &str = "Sluice-Approved-By";
/// The trailer that says how an approval was given (pull request URL or `cli`).
pub const APPROVAL: &str = "Sluice-Approval";
/// The trailer that says which approval policy a merged approval met.
pub const APPROVAL_POLICY: &str = message::APPROVAL_POLICY;
/// The first format whose approval commits must name their approver.
pub const APPROVER_FROM: u32 = 3;
/// Trailers written from what was known only at the time (the forge's answer, the policy
/// the tick read), which no replay can make again: compared with nothing. The approvers are
/// weighed again against the policy in force before the merge instead ([`Kind::Approval`]).
const NOT_REPLAYED: [&str; 3] = [APPROVED_BY, APPROVAL, APPROVAL_POLICY];
/// How many first-parent commits audit looks back for the commit that brought an approval.
const MERGE_LOOKBACK: usize = 500;

/// A `Sluice-Judge-Metric` line committed before sluice recorded the judge's bounds is
/// compared with the line the rules give without them (the rest of the line still must match).
fn earlier_judge_lines(got: &[(String, String)], want: &mut [(String, String)]) {
    use crate::judge::trailers::{has_bounds, without_bounds, JUDGE_METRIC};
    let committed = got
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(JUDGE_METRIC));
    let remade = want
        .iter_mut()
        .filter(|(k, _)| k.eq_ignore_ascii_case(JUDGE_METRIC));
    for ((_, g), (_, w)) in committed.zip(remade) {
        if !has_bounds(g) {
            *w = without_bounds(w);
        }
    }
}

/// What kind of problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// A sluice commit's files are not what the rules produce.
    Files,
    /// A sluice commit's message or trailers are not what the rules produce.
    Trailers,
    /// A commit that is not sluice's changes a file sluice owns.
    Foreign,
    /// A commit that claims to be sluice's (through its trailers, or a merge of one) changes
    /// a file sluice owns, but carries nothing audit can check: no replay record, a record
    /// no rule rebuilds, an older format than the history before it, a message too large.
    Unverifiable,
    /// The decision cannot be made again from what git holds.
    Replay,
    /// An approval commit does not name its approver.
    Approver,
    /// A merged approval's recorded approvers do not meet the approval policy in force at
    /// the commit before the merge (the canary's policy, or the repo's, read there).
    Approval,
    /// The signing policy in force at the parent (or given to audit) requires signed commits,
    /// and this one is not signed by a key it allows.
    Signature,
    /// The commit starts a canary while more canaries progress at once than
    /// `maxConcurrentCanaries` (of the repo or of a namespace, in the settings at its parent)
    /// allows, as the trailers of the history tell.
    Concurrency,
}

/// One problem, with the commit (full id) and the file or trailer it is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Finding {
    pub commit: String,
    pub kind: Kind,
    /// The file, or the trailer key, the finding is about.
    pub file: String,
    pub canary: String,
    pub message: String,
}

/// A sluice commit written before replaying was possible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotReplayable {
    pub commit: String,
    pub canary: String,
    pub reason: String,
}

/// The audit of one branch.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Commits on the first-parent line.
    pub commits: usize,
    /// Canary decisions replayed.
    pub replayed: usize,
    pub findings: Vec<Finding>,
    pub not_replayable: Vec<NotReplayable>,
    /// The last commit checked (the branch's head): give it to the next audit as `--since`
    /// to check only what came after.
    pub resume_since: String,
    /// The commits (full ids) whose every decision audit made again and found exact, and the
    /// approval-branch commits a merge brought in that way. Not printed: the dashboard's
    /// decision log marks every decision that is not among them (or has a finding).
    #[serde(skip)]
    pub verified: BTreeSet<String>,
    /// Why audit could not check a commit that claims to be sluice's (full id): said in the
    /// findings only for the owned files it changes, so a commit that changes none (trailers
    /// alone) is named here only. Not printed; the dashboard's log says it.
    #[serde(skip)]
    pub unverifiable: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Since(#[from] since::SinceError),
}

/// Audits the first-parent history of `head`; with `only`, the commits of that canary
/// (`namespace/name`) only. `signing` is the signing policy given outside the repo, if any
/// (see [`policy`]).
pub fn audit(
    repo: &Repository,
    head: Oid,
    only: Option<&str>,
    signing: &policy::Outside,
) -> Result<Report, AuditError> {
    audit_since(repo, head, None, only, signing)
}

/// [`audit`] of the commits after `since` only (see [`since`]): the commits up to it are read
/// for what later replays need, not checked.
pub fn audit_since(
    repo: &Repository,
    head: Oid,
    since: Option<Oid>,
    only: Option<&str>,
    signing: &policy::Outside,
) -> Result<Report, AuditError> {
    // The commits and folders read, by id, for this audit's reads.
    let folders = Folders::default();
    let line = tree::first_parent_line(repo, &folders, head)?;
    let start = match since {
        Some(since) => since::checked_from(repo, &line, since)?,
        None => 0,
    };
    let mut audit = Audit {
        repo,
        only,
        signing: policy::Policies::new(repo, folders.clone(), signing),
        folders,
        report: Report::default(),
        sanctioned: BTreeMap::new(),
        newest_format: None,
        changed: None,
        files: None,
        trusting: true,
        phases: BTreeMap::new(),
        entered: Vec::new(),
    };
    let (before, after) = line.split_at(start);
    for oid in before {
        audit.commit(*oid)?;
    }
    // What the commits before were found to be is the earlier audit's: none of it is reported.
    audit.report = Report {
        commits: after.len(),
        resume_since: head.to_string(),
        ..Report::default()
    };
    audit.trusting = false;
    for oid in after {
        audit.commit(*oid)?;
    }
    audit.report.findings.sort();
    // Findings come out in history order (sorting by id would scramble it).
    let order: BTreeMap<String, usize> = line
        .iter()
        .enumerate()
        .map(|(i, o)| (o.to_string(), i))
        .collect();
    audit
        .report
        .findings
        .sort_by_key(|f| order.get(&f.commit).copied().unwrap_or(usize::MAX));
    Ok(audit.report)
}

struct Audit<'r, 'a> {
    repo: &'r Repository,
    /// The commits and folders read, by id (shared with `signing`).
    folders: Folders,
    only: Option<&'a str>,
    signing: policy::Policies<'r, 'a>,
    report: Report,
    /// The newest commits verified for each canary so far (what drift is measured from).
    sanctioned: BTreeMap<String, Sanctioned>,
    /// The newest replay format seen so far, and the commit that had it first.
    newest_format: Option<(u32, Oid)>,
    /// The paths the commit audited changes (read once for `owned` and the file comparison).
    changed: Option<(Oid, Vec<String>)>,
    /// The files of the last parent read, moved on to the next one by the tree diff (`None`
    /// while a parent holds them).
    files: Option<CommitFiles>,
    /// Reading the commits before `--since`: sluice's commits there are taken as verified,
    /// without a replay, and signatures are not checked.
    trusting: bool,
    /// Each canary's phase as the last `Sluice-Phase` trailer of its group says, through the
    /// commits read so far: who progresses at once.
    phases: BTreeMap<String, String>,
    /// The canaries the commit being read starts progressing.
    entered: Vec<String>,
}

/// The parent of a commit, read from git objects as the tick reads its clone.
pub struct Parent<'r> {
    repo: &'r Repository,
    files: CommitFiles,
    pub settings: Settings,
    settings_problems: Vec<String>,
}

/// The folder handed to readers that take one: no folder can be below `/dev/null`, so a read
/// that went to the disk instead of [`Parent`] would find nothing (audit never reads there).
const NO_FOLDER: &str = "/dev/null/sluice-audit";

impl<'r> Parent<'r> {
    /// Reads the settings of the tree `files` is at.
    fn new(repo: &'r Repository, files: CommitFiles) -> Parent<'r> {
        // Absent means defaults, as for a checked-out repo.
        let (settings, problems) = files.at(repo, Path::new(NO_FOLDER)).settings();
        Parent {
            repo,
            files,
            settings,
            settings_problems: problems.iter().map(ToString::to_string).collect(),
        }
    }

    /// The parent's files with the repository to read them from.
    fn at(&self) -> At<'_> {
        self.files.at(self.repo, Path::new(NO_FOLDER))
    }

    /// What the tick's walk reads at the parent.
    pub fn snapshot(&self) -> &Snapshot {
        self.files.snapshot()
    }

    /// The folder the readers that take one are handed; see [`NO_FOLDER`].
    pub fn root(&self) -> &Path {
        Path::new(NO_FOLDER)
    }

    /// The workload lookups at the parent, leaving out the output folders `outputs`.
    pub fn index<'s>(&'s self, outputs: &'s [&'s str]) -> workload::Index<'s> {
        workload::Index::reading(self.snapshot(), outputs, self)
    }

    /// A canary's status and the record of its spec at the parent; `None` when it has none.
    pub fn status_recorded(
        &self,
        id: &CanaryId,
    ) -> Result<Option<(Status, Option<SpecRecord>)>, String> {
        self.at().status(id)
    }

    /// A canary's status at the parent; `None` when it has none.
    pub fn status(&self, id: &CanaryId) -> Result<Option<Status>, String> {
        Ok(self.status_recorded(id)?.map(|(status, _)| status))
    }

    /// The canaries whose spec is gone at the parent while their status file is there.
    pub fn deleted(&self) -> Vec<deleted::Deleted> {
        let mut found = Vec::new();
        for (namespace, _) in self.files.list(STATUS_DIR) {
            for (entry, _) in self.files.list(&format!("{STATUS_DIR}/{namespace}")) {
                let Some(name) = entry.strip_suffix(".yaml") else {
                    continue;
                };
                if let (Ok(namespace), Ok(name)) = (Name::parse(&namespace), Name::parse(name)) {
                    found.push(CanaryId { namespace, name });
                }
            }
        }
        deleted::among(found, self.snapshot(), |file| {
            self.at()
                .read(file)
                .unwrap_or_else(|| Err(ReadError::Io(format!("{file} is not in the tree"))))
        })
    }

    /// Loads the canaries at the parent, as the tick loads them (duplicate names and shared
    /// output folders judged over the whole repo), reading only what changed since the last
    /// parent: see [`CommitFiles::load`].
    fn load_canaries(&mut self) {
        self.files.load(&self.settings);
    }

    /// The canaries [`Parent::load_canaries`] loaded.
    pub fn canaries(&self) -> &KeptLoad {
        self.files.loaded()
    }

    /// Whether a spec does not load at the parent (a deleted canary is then not reverted).
    pub fn has_spec_errors(&self) -> bool {
        self.files.loaded().has_errors()
    }
}

impl workload::Outside for Parent<'_> {
    fn is_file(&self, file: &str) -> bool {
        workload::Outside::is_file(&self.at(), file)
    }

    fn read(&self, file: &str) -> Option<Result<String, ReadError>> {
        self.at().read(file)
    }
}

/// What audit makes of a commit that claims to be sluice's.
enum Judged {
    /// Every recorded decision made again gives exactly the commit: the canaries, and for
    /// each whether the commit is a drift hold.
    Verified(Vec<(String, bool)>),
    /// Replayed, and the differences are reported.
    Reported,
    /// Written before replay records existed: listed, not judged.
    Old(Vec<(String, String)>),
    /// Nothing audit can check: why.
    Unverifiable(String),
}

impl<'r> Audit<'r, '_> {
    fn find(&mut self, commit: Oid, kind: Kind, file: &str, canary: &str, message: String) {
        self.report.findings.push(Finding {
            commit: commit.to_string(),
            kind,
            file: file.to_string(),
            canary: canary.to_string(),
            message,
        });
    }

    fn wanted(&self, canary: &str) -> bool {
        self.only.is_none_or(|o| o == canary)
    }

    /// The files `oid` changes against its first parent that sluice owns (for the canaries
    /// audited), each with its canary.
    fn owned(&mut self, oid: Oid) -> Result<Vec<(Changed, String)>, AuditError> {
        let tree = tree::commit_tree(self.repo, &self.folders, oid)?;
        let parent = tree::parent_tree(self.repo, &self.folders, oid)?;
        let changed = tree::changes(self.repo, parent.as_ref(), &tree)?;
        let paths = changed.iter().map(|c| c.path.clone()).collect();
        self.changed = Some((oid, paths));
        Ok(changed
            .into_iter()
            .filter_map(|c| owner(&c).map(|o| (c, o)))
            .filter(|(_, o)| self.wanted(o))
            .collect())
    }

    fn commit(&mut self, oid: Oid) -> Result<(), AuditError> {
        let head = tree::head(self.repo, oid)?;
        if !self.trusting {
            self.signature(oid)?;
        }
        let owned = self.owned(oid)?;
        let Message::Text(text) = &head.message else {
            let why = head.message.refused().unwrap_or_default();
            self.unverifiable(oid, &owned, &why);
            return Ok(());
        };
        let trailers = parse_trailers(text);
        if claims(&trailers) {
            self.note_phases(&trailers);
            let ids = canary_ids(&trailers);
            if owned.is_empty() && !ids.iter().any(|id| self.wanted(id)) {
                // Another canary's: only its format counts, so `only` judges formats alike.
                self.note_formats(oid, &trailers);
                return Ok(());
            }
            match self.sluice_commit(oid, text, &trailers)? {
                Judged::Verified(canaries) => self.sanction(oid, &canaries),
                Judged::Reported => {}
                Judged::Old(listed) => self.not_replayable(oid, listed),
                Judged::Unverifiable(why) => self.unverifiable(oid, &owned, &why),
            }
            return Ok(());
        }
        if owned.is_empty() {
            return Ok(());
        }
        self.foreign(oid, &head, owned)
    }

    /// A commit that does not claim to be sluice's and changes owned files: fine only as a
    /// merge of a verified approval branch, or as a squash or cherry-pick of one.
    fn foreign(
        &mut self,
        oid: Oid,
        head: &CommitHead,
        mut owned: Vec<(Changed, String)>,
    ) -> Result<(), AuditError> {
        // A merge is judged by its change against the first parent: the change must be the
        // branch commit's, and the branch commit must replay.
        if let Some(branch) = head.parents.get(1).copied() {
            let branch_head = tree::head(self.repo, branch)?;
            let text = branch_head.message.text();
            let trailers = parse_trailers(text);
            if claims(&trailers) {
                let accepted = match self.quietly(|a| a.sluice_commit(branch, text, &trailers))? {
                    (Judged::Verified(canaries), findings) if findings.is_empty() => {
                        Ok(Some(canaries))
                    }
                    (Judged::Old(listed), _) => {
                        self.not_replayable(oid, listed);
                        Ok(None)
                    }
                    (Judged::Unverifiable(why), _) => Err(why),
                    (_, findings) => Err(findings
                        .first()
                        .map(|f| format!("{}: {}", f.file, f.message))
                        .unwrap_or_else(|| "its replay differs".to_string())),
                };
                let short = &branch.to_string()[..12];
                let canaries = match accepted {
                    Ok(Some(canaries)) => {
                        self.report.verified.insert(branch.to_string());
                        canaries
                    }
                    Ok(None) => Vec::new(),
                    Err(why) => {
                        let why = format!("merges {short}, which claims to be sluice's but is not what the rules write: {why}");
                        self.unverifiable(oid, &owned, &why);
                        return Ok(());
                    }
                };
                let theirs = tree::commit_tree(self.repo, &self.folders, branch)?;
                let mut left = Vec::new();
                for (c, o) in owned {
                    if tree::blob_id_at(&theirs, &c.path) != c.new {
                        left.push((c, o));
                    }
                }
                owned = left;
                if owned.is_empty() {
                    self.sanction(oid, &canaries);
                    return Ok(());
                }
            }
        }
        // A squash or cherry-pick of an approval branch: exactly the approval's change.
        if self.is_approval_merge(oid, &owned)? {
            let mut canaries: Vec<(String, bool)> =
                owned.iter().map(|(_, o)| (o.clone(), false)).collect();
            canaries.dedup();
            self.sanction(oid, &canaries);
            return Ok(());
        }
        for (c, canary) in owned {
            let what = match (&c.old, &c.new) {
                (None, _) => "adds",
                (_, None) => "deletes",
                _ => "edits",
            };
            self.find(
                oid,
                Kind::Foreign,
                &c.path,
                &canary,
                format!("a commit that is not sluice's {what} a file sluice owns"),
            );
        }
        Ok(())
    }

    /// Runs `f` with the findings it makes kept apart, and returns them.
    fn quietly<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, AuditError>,
    ) -> Result<(T, Vec<Finding>), AuditError> {
        let before = std::mem::take(&mut self.report.findings);
        let result = f(self);
        let made = std::mem::replace(&mut self.report.findings, before);
        Ok((result?, made))
    }

    /// Owned files changed by a commit audit cannot verify: one finding each (and the commit
    /// noted with why, for a commit that changes none).
    fn unverifiable(&mut self, oid: Oid, owned: &[(Changed, String)], why: &str) {
        self.report
            .unverifiable
            .insert(oid.to_string(), why.to_string());
        for (c, canary) in owned {
            self.find(oid, Kind::Unverifiable, &c.path, canary, why.to_string());
        }
    }

    fn not_replayable(&mut self, oid: Oid, listed: Vec<(String, String)>) {
        for (canary, reason) in listed {
            if self.wanted(&canary) {
                self.report.not_replayable.push(NotReplayable {
                    commit: oid.to_string(),
                    canary,
                    reason,
                });
            }
        }
    }

    /// Remembers `oid` as the newest verified commit of each of `canaries`.
    fn sanction(&mut self, oid: Oid, canaries: &[(String, bool)]) {
        self.report.verified.insert(oid.to_string());
        for (canary, hold) in canaries {
            let output = match (hold, self.sanctioned.get(canary)) {
                (true, Some(s)) => s.output,
                _ => oid,
            };
            self.sanctioned.insert(
                canary.clone(),
                Sanctioned {
                    commit: oid,
                    output,
                },
            );
        }
    }

    /// The first parent of `oid`, read from git objects: the files audit follows move to its
    /// tree. Hand it back with [`Audit::done_with`].
    fn parent(&mut self, oid: Oid) -> Result<Parent<'r>, AuditError> {
        let tree = match tree::first_parent(self.repo, &self.folders, oid)? {
            Some(p) => Some(tree::head(self.repo, p)?.tree),
            None => None,
        };
        let mut files = self.files.take().unwrap_or_default();
        files.move_to(self.repo, tree)?;
        Ok(Parent::new(self.repo, files))
    }

    /// Keeps the parent's files for the next commit, which moves them on from there.
    fn done_with(&mut self, parent: Parent<'r>) {
        self.files = Some(parent.files);
    }

    fn is_approval_merge(
        &mut self,
        oid: Oid,
        owned: &[(Changed, String)],
    ) -> Result<bool, AuditError> {
        let mut parent = self.parent(oid)?;
        let result = self.approval_change(oid, owned, &mut parent);
        self.done_with(parent);
        result
    }

    /// Whether the owned files `oid` changes are exactly the approval of the waiting canaries
    /// at `parent`.
    fn approval_change(
        &self,
        oid: Oid,
        owned: &[(Changed, String)],
        parent: &mut Parent<'r>,
    ) -> Result<bool, AuditError> {
        if !parent.settings_problems.is_empty() {
            return Ok(false);
        }
        parent.load_canaries();
        let canaries = parent.canaries();
        let ctx = replay::Context {
            repo: self.repo,
            folders: &self.folders,
            parent: tree::first_parent(self.repo, &self.folders, oid)?,
            sanctioned: &self.sanctioned,
        };
        let mut expected: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        let mut names: Vec<&String> = owned.iter().map(|(_, o)| o).collect();
        names.sort();
        names.dedup();
        for name in names {
            let Some(canary) = canaries.canary(name) else {
                return Ok(false);
            };
            let Ok(Some(status)) = parent.status(&canary.id) else {
                return Ok(false);
            };
            let record = Record::merged_approval(&status);
            let Ok(replayed) = replay::replay(&ctx, parent, canaries, name, &record) else {
                return Ok(false);
            };
            for change in replayed.changes {
                expected.insert(change.path, change.content.map(String::into_bytes));
            }
        }
        let tree = tree::commit_tree(self.repo, &self.folders, oid)?;
        for (path, content) in &expected {
            if &tree::file_at(self.repo, &tree, path)? != content {
                return Ok(false);
            }
        }
        Ok(owned.iter().all(|(c, _)| expected.contains_key(&c.path)))
    }

    /// The records of a commit's trailer groups, or what audit makes of a commit without
    /// them. Also moves the newest format seen on.
    fn records(
        &mut self,
        oid: Oid,
        trailers: &[(String, String)],
    ) -> Result<Vec<(String, Record)>, Judged> {
        let mut records = Vec::new();
        let mut old = Vec::new();
        for id in canary_ids(trailers) {
            let group = trailer_group(trailers, CANARY, &id);
            let value = group
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(REPLAY))
                .map(|(_, v)| v.clone());
            let Some(value) = value else {
                if let Some((format, first)) = self.newest_format {
                    return Err(Judged::Unverifiable(format!(
                        "claims to be sluice's ({CANARY}: {id}) but carries no {REPLAY} record, in a history with format {format} records since {}",
                        &first.to_string()[..12]
                    )));
                }
                old.push((id, "not replayable: written before replay records existed (format 1, no Sluice-Replay trailer)".to_string()));
                continue;
            };
            let record = match Record::parse(&value) {
                Ok(r) => r,
                Err(e) => {
                    self.find(oid, Kind::Trailers, REPLAY, &id, e.to_string());
                    return Err(Judged::Reported);
                }
            };
            if let Some((format, first)) = self.newest_format.filter(|(f, _)| record.format < *f) {
                return Err(Judged::Unverifiable(format!(
                    "a format {} record after format {format} commits (since {}): a history does not go back to an older format",
                    record.format,
                    &first.to_string()[..12]
                )));
            }
            if record.format > FORMAT {
                return Err(Judged::Unverifiable(format!(
                    "a format {} record, newer than this sluice reads (format {FORMAT})",
                    record.format
                )));
            }
            if let By::Other { what } = &record.by {
                if record.format < EVERY_COMMIT_FROM {
                    old.push((id, format!("not replayable: written before format {EVERY_COMMIT_FROM} gave every sluice commit a record ({what})")));
                    continue;
                }
                return Err(Judged::Unverifiable(format!(
                    "its record says no rule audit replays made it (\"by\":\"other\": {what})"
                )));
            }
            records.push((id, record));
        }
        self.note_formats(oid, trailers);
        if !old.is_empty() {
            if !records.is_empty() {
                return Err(Judged::Unverifiable(
                    "mixes trailer groups with and without replay records".to_string(),
                ));
            }
            return Err(Judged::Old(old));
        }
        Ok(records)
    }

    /// Moves the newest replay format seen on with the records `trailers` carry.
    fn note_formats(&mut self, oid: Oid, trailers: &[(String, String)]) {
        let formats = trailers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(REPLAY))
            .filter_map(|(_, v)| Record::parse(v).ok())
            .map(|r| r.format);
        for format in formats {
            if self.newest_format.is_none_or(|(f, _)| format > f) {
                self.newest_format = Some((format, oid));
            }
        }
    }

    fn sluice_commit(
        &mut self,
        oid: Oid,
        text: &str,
        trailers: &[(String, String)],
    ) -> Result<Judged, AuditError> {
        let records = match self.records(oid, trailers) {
            Ok(records) => records,
            Err(judged) => return Ok(judged),
        };
        if self.trusting {
            return Ok(Judged::Verified(
                records
                    .iter()
                    .map(|(id, record)| (id.clone(), is_hold(record)))
                    .collect(),
            ));
        }
        let mut parent = self.parent(oid)?;
        let judged = self.replay_records(oid, text, trailers, &records, &mut parent);
        self.done_with(parent);
        judged
    }

    /// Makes every recorded decision of `oid` again at its parent and compares.
    fn replay_records(
        &mut self,
        oid: Oid,
        text: &str,
        trailers: &[(String, String)],
        records: &[(String, Record)],
        parent: &mut Parent<'r>,
    ) -> Result<Judged, AuditError> {
        let names: Vec<&str> = records.iter().map(|(id, _)| id.as_str()).collect();
        let canary_names = names.join(",");
        if !parent.settings_problems.is_empty() {
            let problems = parent.settings_problems.join("; ");
            self.find(
                oid,
                Kind::Replay,
                SETTINGS_PATH,
                &canary_names,
                format!(
                    "the settings at the parent do not load, so no tick could decide: {problems}"
                ),
            );
            return Ok(Judged::Reported);
        }
        parent.load_canaries();
        let canaries = parent.canaries();
        let first_parent = tree::first_parent(self.repo, &self.folders, oid)?;
        let mut expected_changes = Vec::new();
        let mut messages = Vec::new();
        let mut verified = Vec::new();
        let before = self.report.findings.len();
        let flux_keys = records
            .iter()
            .any(|(_, r)| r.format < FLUX_KEYS_DROPPED_FROM);
        for (id, record) in records {
            let ctx = replay::Context {
                repo: self.repo,
                folders: &self.folders,
                parent: first_parent,
                sanctioned: &self.sanctioned,
            };
            match replay::replay(&ctx, parent, canaries, id, record) {
                Ok(replayed) => {
                    self.report.replayed += 1;
                    self.approver(oid, id, trailers, record, &replayed);
                    let merged = replayed
                        .decision
                        .as_ref()
                        .is_some_and(|d| d.action == Action::ApprovalMerged);
                    if merged {
                        self.approval_policy(oid, id, trailers, record, first_parent)?;
                    }
                    expected_changes.extend(replayed.changes);
                    messages.push(replayed.message);
                    verified.push((id.clone(), is_hold(record)));
                }
                Err(problem) => {
                    self.find(oid, Kind::Replay, &problem.file, id, problem.message);
                    return Ok(Judged::Reported);
                }
            }
        }
        self.compare_files(oid, &canary_names, &expected_changes, flux_keys)?;
        if let Some(expected) = message::fold(&messages) {
            self.compare_message(oid, &canary_names, text, &expected);
        }
        self.concurrency(oid, &parent.settings.concurrency);
        if self.report.findings.len() > before {
            return Ok(Judged::Reported);
        }
        Ok(Judged::Verified(verified))
    }

    /// Notes the phase each trailer group of a commit leaves its canary in, and which
    /// canaries it starts progressing ([`Audit::entered`]).
    fn note_phases(&mut self, trailers: &[(String, String)]) {
        self.entered.clear();
        for (id, phase) in trailer_phases(trailers) {
            let was = self.phases.get(&id).is_some_and(|p| progresses(p));
            if progresses(&phase) && !was {
                self.entered.push(id.clone());
            }
            self.phases.insert(id, phase);
        }
    }

    /// A finding when `oid` starts a canary while more progress at once than `limits` allow.
    fn concurrency(&mut self, oid: Oid, limits: &crate::core::concurrency::Limits) {
        if self.entered.is_empty() || limits.is_empty() {
            return;
        }
        let progressing: Vec<(&str, &str)> = self
            .phases
            .iter()
            .filter(|(_, p)| progresses(p))
            .map(|(id, _)| (id.split_once('/').map_or("", |(ns, _)| ns), id.as_str()))
            .collect();
        let over = crate::core::concurrency::over(limits, &progressing);
        let findings: Vec<(String, String)> = over
            .iter()
            .filter_map(|o| {
                let started = self.entered.iter().find(|e| o.ids.contains(e))?;
                Some((started.clone(), format!("{started} starts while {o}")))
            })
            .collect();
        for (canary, message) in findings {
            self.find(oid, Kind::Concurrency, SETTINGS_PATH, &canary, message);
        }
    }

    /// A finding when the approvers a merged approval recorded (its replay record, else its
    /// `Sluice-Approved-By` trailers) do not meet the approval policy in force at the commit
    /// before the merge: the policy is read there, as the signing policy is, so neither the
    /// merge nor a commit pushed with it can relax the policy it is weighed by.
    fn approval_policy(
        &mut self,
        oid: Oid,
        id: &str,
        trailers: &[(String, String)],
        record: &Record,
        parent: Option<Oid>,
    ) -> Result<(), AuditError> {
        use crate::core::approval::{recheck, Approval, Outcome};
        let Some(merge) = self.brought_status(parent, id)? else {
            return Ok(());
        };
        let mut before = self.parent(merge)?;
        if !before.settings_problems.is_empty() {
            return Ok(());
        }
        before.load_canaries();
        let Some(policy) = before
            .canaries()
            .canary(id)
            .and_then(|c| c.approval.clone())
        else {
            return Ok(());
        };
        let outcome = match record.approvals() {
            Some(recorded) => recheck(&policy, &recorded.approvals(), recorded.author.as_deref()),
            // Written before approvals were recorded: the trailers name them.
            None => {
                let named: Vec<Approval> = trailer_group(trailers, CANARY, id)
                    .iter()
                    .filter(|(k, _)| k.eq_ignore_ascii_case(APPROVED_BY))
                    .map(|(_, v)| Approval {
                        login: v.trim().to_string(),
                        team: None,
                    })
                    .collect();
                recheck(&policy, &named, None)
            }
        };
        if let Outcome::Missing(missing) = outcome {
            let short = merge.to_string();
            self.find(
                oid,
                Kind::Approval,
                APPROVED_BY,
                id,
                format!(
                    "the approval merged in {} did not meet the approval policy in force before it ({policy}): {missing}",
                    short.get(..7).unwrap_or(&short)
                ),
            );
        }
        Ok(())
    }

    /// The commit that brought the status file of canary `id` that `at` holds: the oldest of
    /// the first-parent commits from `at` back that hold the same status (within
    /// [`MERGE_LOOKBACK`]); `None` when `at` holds none or it is older.
    fn brought_status(&self, at: Option<Oid>, id: &str) -> Result<Option<Oid>, AuditError> {
        let Some(mut at) = at else { return Ok(None) };
        let path = format!("{STATUS_DIR}/{id}.yaml");
        let status_at = |oid: Oid| -> Result<Option<Vec<u8>>, AuditError> {
            let tree = tree::commit_tree(self.repo, &self.folders, oid)?;
            Ok(tree::file_at(self.repo, &tree, &path)?)
        };
        let Some(status) = status_at(at)? else {
            return Ok(None);
        };
        for _ in 0..MERGE_LOOKBACK {
            let Some(parent) = tree::first_parent(self.repo, &self.folders, at)? else {
                return Ok(Some(at));
            };
            if status_at(parent)?.as_ref() != Some(&status) {
                return Ok(Some(at));
            }
            at = parent;
        }
        Ok(None)
    }

    fn approver(
        &mut self,
        oid: Oid,
        id: &str,
        trailers: &[(String, String)],
        record: &Record,
        replayed: &Replayed,
    ) {
        if record.format < APPROVER_FROM {
            return;
        }
        let approval = match &record.by {
            By::Operate { op, operator, .. } => op == "approve" && operator != "pull request",
            By::Decide { .. } => replayed
                .decision
                .as_ref()
                .is_some_and(|d| d.action == Action::ApprovalMerged),
            _ => false,
        };
        let named = trailer_group(trailers, CANARY, id)
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case(APPROVED_BY) && !v.trim().is_empty());
        if approval && !named {
            self.find(
                oid,
                Kind::Approver,
                APPROVED_BY,
                id,
                format!(
                    "an approval in format {} without a {APPROVED_BY} trailer",
                    record.format
                ),
            );
        }
    }

    /// The commit's files against the replay's `expected` changes; with `flux_keys` (a
    /// commit of a format before [`FLUX_KEYS_DROPPED_FROM`]) a file that differs only by the
    /// `*toolkit.fluxcd.io*` keys that sluice copied from the sources then is what the rules
    /// of its time rendered.
    fn compare_files(
        &mut self,
        oid: Oid,
        canary: &str,
        expected: &[crate::gitops::FileChange],
        flux_keys: bool,
    ) -> Result<(), AuditError> {
        let tree = tree::commit_tree(self.repo, &self.folders, oid)?;
        let parent = tree::parent_tree(self.repo, &self.folders, oid)?;
        let mut want: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        for c in expected {
            want.insert(c.path.as_str(), c.content.as_deref());
        }
        for (path, content) in &want {
            let found = tree::file_at(self.repo, &tree, path)?;
            let earlier = |f: &[u8], w: &str| {
                flux_keys
                    && std::str::from_utf8(f)
                        .is_ok_and(|f| workload::yaml_edit::same_but_flux_keys(f, w))
            };
            let same = match (found.as_deref(), content) {
                (Some(f), Some(w)) => f == w.as_bytes() || earlier(f, w),
                (f, w) => f == w.map(str::as_bytes),
            };
            if !same {
                let message = describe(content.map(str::as_bytes), found.as_deref());
                self.find(oid, Kind::Files, path, canary, message);
            }
        }
        // The paths `owned` found for this commit, unless it is a merged branch's.
        let paths = match self.changed.take() {
            Some((at, paths)) if at == oid => paths,
            _ => tree::changes(self.repo, parent.as_ref(), &tree)?
                .into_iter()
                .map(|c| c.path)
                .collect(),
        };
        for path in paths {
            if !want.contains_key(path.as_str()) {
                self.find(
                    oid,
                    Kind::Files,
                    &path,
                    canary,
                    "changed by this commit, but no decision of it writes this file".to_string(),
                );
            }
        }
        Ok(())
    }

    fn compare_message(&mut self, oid: Oid, canary: &str, text: &str, expected: &CommitMessage) {
        let Ok(expected_text) = expected.render() else {
            self.find(
                oid,
                Kind::Trailers,
                "message",
                canary,
                "the rules give a message git cannot hold".to_string(),
            );
            return;
        };
        let keep = |t: &Vec<(String, String)>| -> Vec<(String, String)> {
            t.iter()
                .filter(|(k, _)| !NOT_REPLAYED.iter().any(|n| n.eq_ignore_ascii_case(k)))
                .cloned()
                .collect()
        };
        let got = keep(&parse_trailers(text));
        let mut want = keep(&parse_trailers(&expected_text));
        earlier_judge_lines(&got, &mut want);
        if got != want {
            let mut keys: Vec<&str> = got.iter().chain(&want).map(|(k, _)| k.as_str()).collect();
            keys.sort_unstable();
            keys.dedup();
            for key in keys {
                let of = |t: &[(String, String)]| -> Vec<String> {
                    t.iter()
                        .filter(|(k, _)| k == key)
                        .map(|(_, v)| v.clone())
                        .collect()
                };
                let (g, w) = (of(&got), of(&want));
                if g != w {
                    self.find(
                        oid,
                        Kind::Trailers,
                        key,
                        canary,
                        format!(
                            "committed {:?}, the rules give {:?}",
                            g.join(" | "),
                            w.join(" | ")
                        ),
                    );
                }
            }
            if keys_equal_but_order_differs(&got, &want) {
                self.find(
                    oid,
                    Kind::Trailers,
                    "trailers",
                    canary,
                    "the trailers are not in the order sluice writes them".to_string(),
                );
            }
        }
        let (got_prose, want_prose) = (prose(text), prose(&expected_text));
        let earlier = crate::render::message::earlier_wording(&expected_text)
            .is_some_and(|earlier| prose(&earlier) == got_prose);
        if got_prose != want_prose && !earlier {
            let line = first_difference(&got_prose, &want_prose);
            self.find(
                oid,
                Kind::Trailers,
                "message",
                canary,
                format!("the subject or body differs from what the rules write ({line})"),
            );
        }
    }

    /// A commit not signed as the signing policy in force at its parent requires.
    fn signature(&mut self, oid: Oid) -> Result<(), AuditError> {
        if let Some(v) = self.signing.judge(oid)? {
            self.find(oid, Kind::Signature, &v.file, "", v.message);
        }
        Ok(())
    }
}

fn keys_equal_but_order_differs(got: &[(String, String)], want: &[(String, String)]) -> bool {
    let mut a = got.to_vec();
    let mut b = want.to_vec();
    a.sort();
    b.sort();
    a == b && got != want
}

/// Whether a record is a drift hold (which writes only the status file).
fn is_hold(record: &Record) -> bool {
    matches!(&record.by, By::Drift { policy, .. } if policy == "hold")
}

/// Each trailer group's canary and the phase its `Sluice-Phase` names.
fn trailer_phases(trailers: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<&str> = None;
    for (k, v) in trailers {
        if k.eq_ignore_ascii_case(CANARY) {
            current = Some(v);
        } else if k.eq_ignore_ascii_case(message::PHASE) {
            if let Some(id) = current {
                out.push((id.to_string(), v.clone()));
            }
        }
    }
    out
}

/// Whether a `Sluice-Phase` names a phase that counts against `maxConcurrentCanaries`.
fn progresses(phase: &str) -> bool {
    use crate::core::status::Phase;
    [
        Phase::Progressing,
        Phase::WaitingApproval,
        Phase::Promoting,
        Phase::Finalising,
    ]
    .iter()
    .any(|p| p.as_str() == phase && crate::core::concurrency::progresses(*p))
}

/// Whether a commit's trailers claim it is sluice's.
fn claims(trailers: &[(String, String)]) -> bool {
    trailers.iter().any(|(k, _)| k.eq_ignore_ascii_case(CANARY))
}

/// The canaries a commit's trailer groups name, in order.
fn canary_ids(trailers: &[(String, String)]) -> Vec<String> {
    trailers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(CANARY))
        .map(|(_, v)| v.clone())
        .collect()
}

/// The canary a file sluice owns belongs to: a status file, or a file whose first line is
/// sluice's generated mark, before or after the change.
fn owner(c: &Changed) -> Option<String> {
    if let Some(rest) = c.path.strip_prefix(".sluice/status/") {
        return rest.strip_suffix(".yaml").map(str::to_string);
    }
    [&c.old_first_line, &c.new_first_line]
        .into_iter()
        .flatten()
        .find_map(|first| {
            let id = first
                .strip_prefix(GENERATED_MARK)?
                .strip_prefix(" for canary ")?
                .split_whitespace()
                .next()?
                .trim_end_matches('.');
            Some(id.to_string())
        })
}

/// The message without its trailer paragraph.
fn prose(text: &str) -> String {
    let trimmed = text.trim_end();
    if parse_trailers(text).is_empty() {
        return trimmed.to_string();
    }
    match trimmed.rfind("\n\n") {
        Some(i) => trimmed[..i].trim_end().to_string(),
        None => trimmed.to_string(),
    }
}

fn first_difference(got: &str, want: &str) -> String {
    let (mut g, mut w) = (got.lines(), want.lines());
    for n in 1.. {
        match (g.next(), w.next()) {
            (None, None) => break,
            (a, b) if a == b => continue,
            (a, b) => {
                return format!(
                    "line {n}: committed {:?}, the rules give {:?}",
                    a.unwrap_or(""),
                    b.unwrap_or("")
                )
            }
        }
    }
    String::new()
}

/// The first line where a committed file differs from the rendered one.
fn describe(want: Option<&[u8]>, found: Option<&[u8]>) -> String {
    match (want, found) {
        (Some(_), None) => "the rules write this file; the commit does not have it".to_string(),
        (None, Some(_)) => "the rules delete this file; the commit keeps it".to_string(),
        (Some(w), Some(f)) => format!(
            "the commit's file is not what the rules render ({})",
            first_difference(&String::from_utf8_lossy(f), &String::from_utf8_lossy(w))
        ),
        (None, None) => String::new(),
    }
}

/// The repository at `dir` (bare or with a work tree), read in place.
pub fn open(dir: &Path) -> Result<Repository, GitError> {
    Repository::open(dir).map_err(tree::git("open the repository"))
}
