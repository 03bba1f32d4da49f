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
//! Commits written before the replay format (format 1: no `Sluice-Replay` trailer) are listed
//! as not replayable, not as findings. Reads objects only; the verdict depends on nothing but
//! the history, so the same history always gives the same report.

pub mod policy;
pub mod signed;
pub mod tree;

use std::collections::BTreeMap;
use std::path::Path;

use git2::{Oid, Repository};
use serde::Serialize;

use crate::core::decide::{decide, Action, Decision};
use crate::core::operate::{operate, Operation};
use crate::gitops::{parse_trailers, trailer_group, CommitMessage};
use crate::render::message::{self, CANARY};
use crate::render::replay::{self, By, Record, REPLAY};
use crate::render::{self as renderer, status_file, GENERATED_MARK};
use crate::spec::load::{load_in, settings_in, Existing};
use crate::spec::model::Canary;
use crate::spec::settings::{Settings, SETTINGS_PATH};
use crate::workload;
use crate::yaml::snapshot::{read_bounded, Snapshot};

use tree::{Changed, GitError};

/// The trailer that names who approved (written from format [`APPROVER_FROM`] on).
pub const APPROVED_BY: &str = "Sluice-Approved-By";
/// The trailer that says how an approval was given (pull request URL or `cli`).
pub const APPROVAL: &str = "Sluice-Approval";
/// The first format whose approval commits must name their approver.
pub const APPROVER_FROM: u32 = 3;
/// Trailers written from what was known only at the time (the forge's answer), which no
/// replay can make again: compared with nothing.
const NOT_REPLAYED: [&str; 2] = [APPROVED_BY, APPROVAL];

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
    /// The decision cannot be made again from what git holds.
    Replay,
    /// An approval commit does not name its approver.
    Approver,
    /// The signing policy in force at the parent (or given to audit) requires signed commits,
    /// and this one is not signed by a key it allows.
    Signature,
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
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot make a temporary folder: {0}")]
    Temp(String),
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
    let line = tree::first_parent_line(repo, head)?;
    let mut audit = Audit {
        repo,
        only,
        signing: policy::Policies::new(repo, signing),
        report: Report {
            commits: line.len(),
            ..Report::default()
        },
    };
    for oid in &line {
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
    only: Option<&'a str>,
    signing: policy::Policies<'r, 'a>,
    report: Report,
}

/// The parent of a commit, written out and read as the tick reads its clone.
struct Parent {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    settings: Settings,
    settings_problems: Vec<String>,
    snapshot: Snapshot,
}

impl Parent {
    fn canaries(&self) -> Vec<Canary> {
        let root = &self.root;
        let has_status =
            |id: &crate::spec::model::CanaryId| root.join(status_file::path_for(id)).is_file();
        let existing = Existing {
            files: &self.snapshot,
            has_status: &has_status,
        };
        load_in(&self.snapshot, &self.settings, Some(&existing)).canaries
    }
}

/// What one canary's decision, made again, writes.
struct Replayed {
    changes: Vec<crate::gitops::FileChange>,
    message: CommitMessage,
    decision: Decision,
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

    fn commit(&mut self, oid: Oid) -> Result<(), AuditError> {
        let commit = self
            .repo
            .find_commit(oid)
            .map_err(tree::git("read a commit"))?;
        let text = String::from_utf8_lossy(commit.message_bytes()).into_owned();
        let trailers = parse_trailers(&text);
        self.signature(oid)?;
        if trailers.iter().any(|(k, _)| k.eq_ignore_ascii_case(CANARY)) {
            return self.sluice_commit(oid, &text, &trailers);
        }
        let tree = tree::tree_of(self.repo, oid)?;
        let parent = tree::parent_tree(self.repo, oid)?;
        let changed = tree::changes(self.repo, parent.as_ref(), &tree)?;
        let mut owned: Vec<(Changed, String)> = changed
            .into_iter()
            .filter_map(|c| owner(&c).map(|o| (c, o)))
            .filter(|(_, o)| self.wanted(o))
            .collect();
        if owned.is_empty() {
            return Ok(());
        }
        // A merge of an approval branch: the branch's commit is the decision.
        if let Ok(branch) = commit.parent_id(1) {
            let message = self
                .repo
                .find_commit(branch)
                .map(|c| String::from_utf8_lossy(c.message_bytes()).into_owned())
                .unwrap_or_default();
            let branch_trailers = parse_trailers(&message);
            if branch_trailers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(CANARY))
            {
                self.sluice_commit(branch, &message, &branch_trailers)?;
                let theirs = tree::tree_of(self.repo, branch)?;
                let mut left = Vec::new();
                for (c, o) in owned {
                    if tree::file_at(self.repo, &theirs, &c.path)? != c.new {
                        left.push((c, o));
                    }
                }
                owned = left;
            }
        }
        if owned.is_empty() {
            return Ok(());
        }
        // A squash or cherry-pick of an approval branch: exactly the approval's change.
        if self.is_approval_merge(oid, &owned)? {
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

    /// Writes out the first parent of `oid` and reads its settings and files.
    fn parent(&self, oid: Oid) -> Result<Parent, AuditError> {
        let dir = tempfile::tempdir().map_err(|e| AuditError::Temp(e.to_string()))?;
        let root = dir.path().to_path_buf();
        if let Some(tree) = tree::parent_tree(self.repo, oid)? {
            tree::write_tree(self.repo, &tree, &root)?;
        }
        let (settings, problems) = settings_in(&root, read_bounded);
        let snapshot = Snapshot::read(&root);
        Ok(Parent {
            _dir: dir,
            root,
            settings,
            settings_problems: problems.iter().map(ToString::to_string).collect(),
            snapshot,
        })
    }

    fn is_approval_merge(&self, oid: Oid, owned: &[(Changed, String)]) -> Result<bool, AuditError> {
        let parent = self.parent(oid)?;
        if !parent.settings_problems.is_empty() {
            return Ok(false);
        }
        let canaries = parent.canaries();
        let mut expected: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        let mut names: Vec<&String> = owned.iter().map(|(_, o)| o).collect();
        names.sort();
        names.dedup();
        for name in names {
            let Some(canary) = canaries.iter().find(|c| &c.id.to_string() == name) else {
                return Ok(false);
            };
            let Ok(Some(status)) = status_file::read(&parent.root, &canary.id, read_bounded) else {
                return Ok(false);
            };
            let record = Record::operated(
                Operation::Approve,
                "approved by merging the pull request",
                "pull request",
                "approved by merging",
                status.phase_since,
            );
            let record = Record {
                by: match record.by {
                    By::Operate {
                        op,
                        reason,
                        operator,
                        says,
                        ..
                    } => By::Operate {
                        op,
                        reason,
                        operator,
                        says,
                        clock_from_merge: true,
                    },
                    by => by,
                },
                ..record
            };
            let Ok(replayed) = replay_one(&parent, &canaries, canary, &record) else {
                return Ok(false);
            };
            for change in replayed.changes {
                expected.insert(change.path, change.content.map(String::into_bytes));
            }
        }
        let tree = tree::tree_of(self.repo, oid)?;
        for (path, content) in &expected {
            if &tree::file_at(self.repo, &tree, path)? != content {
                return Ok(false);
            }
        }
        Ok(owned.iter().all(|(c, _)| expected.contains_key(&c.path)))
    }

    fn sluice_commit(
        &mut self,
        oid: Oid,
        text: &str,
        trailers: &[(String, String)],
    ) -> Result<(), AuditError> {
        let ids: Vec<String> = trailers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(CANARY))
            .map(|(_, v)| v.clone())
            .collect();
        if !ids.iter().any(|id| self.wanted(id)) {
            return Ok(());
        }
        let mut records = Vec::new();
        for id in &ids {
            let group = trailer_group(trailers, CANARY, id);
            let value = group
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(REPLAY))
                .map(|(_, v)| v.clone());
            match value {
                None => {
                    if self.wanted(id) {
                        self.report.not_replayable.push(NotReplayable {
                            commit: oid.to_string(),
                            canary: id.clone(),
                            reason: "not replayable (format 1): no Sluice-Replay trailer"
                                .to_string(),
                        });
                    }
                    return Ok(());
                }
                Some(v) => match Record::parse(&v) {
                    Ok(Record {
                        by: By::Other { what },
                        ..
                    }) => {
                        if self.wanted(id) {
                            self.report.not_replayable.push(NotReplayable {
                                commit: oid.to_string(),
                                canary: id.clone(),
                                reason: format!("not replayed: {what}"),
                            });
                        }
                        return Ok(());
                    }
                    Ok(r) => records.push(r),
                    Err(e) => {
                        self.find(oid, Kind::Trailers, REPLAY, id, e.to_string());
                        return Ok(());
                    }
                },
            }
        }
        let parent = self.parent(oid)?;
        if !parent.settings_problems.is_empty() {
            let problems = parent.settings_problems.join("; ");
            self.find(
                oid,
                Kind::Replay,
                SETTINGS_PATH,
                &ids.join(","),
                format!(
                    "the settings at the parent do not load, so no tick could decide: {problems}"
                ),
            );
            return Ok(());
        }
        let canaries = parent.canaries();
        let mut expected_changes = Vec::new();
        let mut messages = Vec::new();
        for (id, record) in ids.iter().zip(&records) {
            let Some(canary) = canaries.iter().find(|c| &c.id.to_string() == id) else {
                self.find(
                    oid,
                    Kind::Replay,
                    CANARY,
                    id,
                    "no such canary in the specs at the parent".to_string(),
                );
                return Ok(());
            };
            match replay_one(&parent, &canaries, canary, record) {
                Ok(replayed) => {
                    self.report.replayed += 1;
                    self.approver(oid, id, trailers, record, &replayed);
                    expected_changes.extend(replayed.changes);
                    messages.push(replayed.message);
                }
                Err(problem) => {
                    self.find(oid, Kind::Replay, &problem.file, id, problem.message);
                    return Ok(());
                }
            }
        }
        let canary_names = ids.join(",");
        self.compare_files(oid, &canary_names, &expected_changes)?;
        if let Some(expected) = message::fold(&messages) {
            self.compare_message(oid, &canary_names, text, &expected);
        }
        Ok(())
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
            By::Decide { .. } => replayed.decision.action == Action::ApprovalMerged,
            By::Other { .. } => false,
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

    fn compare_files(
        &mut self,
        oid: Oid,
        canary: &str,
        expected: &[crate::gitops::FileChange],
    ) -> Result<(), AuditError> {
        let tree = tree::tree_of(self.repo, oid)?;
        let parent = tree::parent_tree(self.repo, oid)?;
        let mut want: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        for c in expected {
            want.insert(c.path.as_str(), c.content.as_deref());
        }
        for (path, content) in &want {
            let found = tree::file_at(self.repo, &tree, path)?;
            if found.as_deref() != content.map(str::as_bytes) {
                let message = describe(content.map(str::as_bytes), found.as_deref());
                self.find(oid, Kind::Files, path, canary, message);
            }
        }
        for c in tree::changes(self.repo, parent.as_ref(), &tree)? {
            if !want.contains_key(c.path.as_str()) {
                self.find(
                    oid,
                    Kind::Files,
                    &c.path,
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
        let want = keep(&parse_trailers(&expected_text));
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
        if got_prose != want_prose {
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

/// A problem making one decision again.
struct Problem {
    file: String,
    message: String,
}

/// Makes one canary's decision again on the parent, as the record says it was made.
fn replay_one(
    parent: &Parent,
    canaries: &[Canary],
    canary: &Canary,
    record: &Record,
) -> Result<Replayed, Problem> {
    let status_path = status_file::path_for(&canary.id);
    let status =
        status_file::read(&parent.root, &canary.id, read_bounded).map_err(|m| Problem {
            file: status_path.clone(),
            message: format!("the status at the parent does not read: {m}"),
        })?;
    // Every canary's output folder, as the tick leaves them out of source lookups.
    let outputs: Vec<&str> = canaries.iter().map(|c| c.output.as_str()).collect();
    let index = workload::Index::new(&parent.snapshot, &outputs);
    let record_problem = |e: replay::RecordError| Problem {
        file: REPLAY.to_string(),
        message: e.to_string(),
    };
    let (decision, operator) = match &record.by {
        By::Decide { .. } => {
            let obs = record
                .by
                .observations()
                .map_err(record_problem)?
                .unwrap_or_else(|| crate::core::observe::Observations::revision(""));
            let source = workload::revision(&parent.root, canary, &index).map_err(|e| Problem {
                file: canary.file.clone(),
                message: format!("the revision does not read at the parent: {e}"),
            })?;
            if source != obs.revision {
                return Err(Problem {
                    file: REPLAY.to_string(),
                    message: format!(
                        "recorded revision {:?}, but the source at the parent is {source:?}",
                        obs.revision
                    ),
                });
            }
            (decide(canary, status.as_ref(), &obs, record.now), None)
        }
        By::Operate {
            op,
            reason,
            operator,
            says,
            clock_from_merge,
        } => {
            let op = replay::operation(op).map_err(record_problem)?;
            let mut decision =
                operate(canary, status.as_ref(), op, reason, record.now).map_err(|e| Problem {
                    file: status_path.clone(),
                    message: format!("the operation does not apply at the parent: {e}"),
                })?;
            if *clock_from_merge {
                decision.status.clock_from_merge = decision.status.phase.is_active();
            }
            (decision, Some((operator.clone(), says.clone())))
        }
        By::Other { what } => {
            return Err(Problem {
                file: REPLAY.to_string(),
                message: format!("not a decision a replay rebuilds: {what}"),
            })
        }
    };
    if !decision.commits() {
        return Err(Problem {
            file: status_path,
            message: "the rules make no change here, yet the commit records a decision".to_string(),
        });
    }
    let changes =
        renderer::changes(&parent.root, canary, &decision, &index).map_err(|e| Problem {
            file: canary.output.as_str().to_string(),
            message: format!("the rules cannot render this decision: {e}"),
        })?;
    let mut message = message::render(
        canary,
        &decision,
        operator.as_ref().map(|(o, s)| (o.as_str(), s.as_str())),
    );
    message.trailers.push(record.trailer());
    Ok(Replayed {
        changes,
        message,
        decision,
    })
}

/// The canary a file sluice owns belongs to: a status file, or a file whose first line is
/// sluice's generated mark, before or after the change.
fn owner(c: &Changed) -> Option<String> {
    if let Some(rest) = c.path.strip_prefix(".sluice/status/") {
        return rest.strip_suffix(".yaml").map(str::to_string);
    }
    [&c.old, &c.new].into_iter().flatten().find_map(|bytes| {
        let text = String::from_utf8_lossy(bytes);
        let first = text.lines().next()?;
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
