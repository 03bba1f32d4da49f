//! Manual operations (`sluice approve|promote|abort|retry|pause|resume`, and
//! `sluice adopt release`, which removes `adoption.hold`): one commit on the
//! branch, by a named operator with a reason, pushed without force. If the branch moved
//! meanwhile, the operation is checked again against the new head.
//!
//! The rules of each operation are the core's (`core::operate`); this module loads the canary,
//! renders the decision's files and writes the commit. It is called by the CLI only; the tick
//! never calls it.

use std::path::PathBuf;

use jiff::Timestamp;
use tracing::info;

use crate::approval::{self, Pending};
use crate::core::operate::Operation;
use crate::gitops::{CommitMessage, ConfigRepo, FileChange, Identity, PushOutcome};
use crate::manifest::settings::{parse_settings, ForgeSettings, Settings, SETTINGS_PATH};
use crate::render::replay::Record;
use crate::render::{self, message, status_file};
use crate::runtime::Runtime;
use crate::workload;

/// A manual operation on one canary, by a named operator.
pub struct Manual<'a> {
    /// `namespace/name`.
    pub canary: &'a str,
    /// `--wave`: the wave of a canary with waves (default: the wave in progress).
    pub wave: Option<&'a str>,
    pub op: Operation,
    pub operator: Identity,
    pub reason: &'a str,
    pub push_attempts: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum OperateError {
    /// No canary of that name: the message names the closest one, or those there are.
    #[error("{0}")]
    NotFound(String),
    /// The canary has waves and the one named (or in progress) is not there.
    #[error("{0}")]
    Wave(String),
    #[error(transparent)]
    NotApplicable(#[from] crate::core::operate::NotApplicable),
    #[error("{path}: cannot read the status file: {message}; fix or delete it (history keeps the old state)")]
    Status { path: String, message: String },
    #[error(transparent)]
    Workload(#[from] workload::WorkloadError),
    #[error(transparent)]
    Render(#[from] render::RenderError),
    #[error(transparent)]
    Git(#[from] crate::gitops::Error),
    /// Defaults would stand in for the settings' output folders and gates.
    #[error(
        "{problems}; fix the repo settings first (sluice never falls back to default settings)"
    )]
    Settings { problems: String },
}

/// Applies a manual operation as one commit on the branch and pushes it; returns the commit
/// subject (with a second line when the canary stays paused). Afterwards, closes the approval pull request the canary no longer waits on.
pub fn operate(
    repo: &mut ConfigRepo,
    runtime: &Runtime,
    manual: &Manual<'_>,
    now: Timestamp,
) -> Result<String, OperateError> {
    let attempts = manual.push_attempts.max(1);
    let mut attempt = 1;
    let (subject, left, forge) = loop {
        repo.fetch()?;
        let applied = apply(repo, runtime, manual, now)?;
        match crate::execute::push(repo, attempt, attempts)? {
            PushOutcome::Pushed(_) => break applied,
            PushOutcome::Rejected => attempt += 1,
        }
    };
    if let Some(pending) = left {
        let forge = approval::connect(forge.as_ref(), runtime);
        if let Err(e) = approval::close_stale(&pending, forge.as_ref(), runtime, repo.branch()) {
            tracing::warn!(canary = %pending.canary.id, error = %e, "Stale approval pull request not closed");
        }
    }
    Ok(subject)
}

/// "no canary NS/NAME", with the closest of `canaries` (or a canary with waves) named.
fn not_found(canaries: &[crate::manifest::model::Canary], wanted: &str) -> String {
    let mut known: Vec<String> = canaries.iter().map(|c| c.id.to_string()).collect();
    known.extend(
        canaries
            .iter()
            .filter(|c| c.wave.is_some())
            .map(|c| format!("{}/{}", c.id.namespace, c.base_name())),
    );
    known.sort();
    known.dedup();
    crate::readers::status::no_canary(wanted, &known)
}

/// What to tell the operator (the commit subject, and that the canary stays paused when it
/// does), the approval the operation ended (if any), and the forge settings.
type Applied = (String, Option<Pending>, Option<ForgeSettings>);

/// Commits the operation on the current head (not pushed).
fn apply(
    repo: &mut ConfigRepo,
    runtime: &Runtime,
    manual: &Manual<'_>,
    now: Timestamp,
) -> Result<Applied, OperateError> {
    let root: PathBuf = repo.root().to_path_buf();
    let files = runtime.head_files(repo, false);
    let head = files.at(repo.git(), repo.root());
    let (settings, problems) = head.settings();
    if !problems.is_empty() {
        return Err(OperateError::Settings {
            problems: problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    let snapshot = files.snapshot();
    let has_status =
        |id: &crate::manifest::model::CanaryId| head.exists(&status_file::path_for(id));
    let existing = crate::manifest::load::Existing {
        files: snapshot,
        has_status: &has_status,
    };
    let loaded = crate::manifest::load::load_in(snapshot, &settings, Some(&existing));
    let status_of = |id: &crate::manifest::model::CanaryId| {
        head.status(id).ok().flatten().map(|(status, _)| status)
    };
    let canary =
        crate::waves::select::select(&loaded.canaries, manual.canary, manual.wave, status_of)
            .map_err(|e| match e {
                crate::waves::select::Unselected::NotFound => {
                    OperateError::NotFound(not_found(&loaded.canaries, manual.canary))
                }
                crate::waves::select::Unselected::Wave(why) => OperateError::Wave(why),
            })?;
    let outputs: Vec<&str> = loaded.canaries.iter().map(|c| c.output.as_str()).collect();
    let index = workload::Index::reading(snapshot, &outputs, &head);
    let status = head
        .status(&canary.id)
        .map(|found| found.map(|(status, _)| status));
    let status = status.map_err(|message| OperateError::Status {
        path: status_file::path_for(&canary.id),
        message,
    })?;
    let decision =
        crate::core::operate::operate(canary, status.as_ref(), manual.op, manual.reason, now)?;
    let changes = render::changes(&root, canary, &decision, &index)?;
    let who = format!("{} <{}>", manual.operator.name, manual.operator.email);
    let mut commit = message::render(canary, &decision, Some((&who, manual.reason)));
    if manual.op == Operation::Approve {
        // An approval from the command line: the operator (`--as`) is the approver.
        commit = message::with_approval(commit, Some(&who), "cli");
    }
    let record = Record::operated(manual.op, manual.reason, &who, manual.reason, now);
    commit.trailers.push(record.trailer());
    crate::execute::commit_operation(repo, &changes, &commit, &manual.operator)?;
    info!(canary = %canary.id, operator = %who, "{}", commit.subject);
    let was_waiting = status.as_ref().is_some_and(approval::is_waiting);
    let left = (was_waiting && !approval::is_waiting(&decision.status)).then(|| Pending {
        canary: canary.clone(),
        status: decision.status.clone(),
        previous: status.clone(),
        comment: None,
    });
    // An operation leaves a pause as it was: a retried or approved canary still holds.
    let said = if decision.status.paused && manual.op != Operation::Pause {
        format!(
            "{}\n{} stays paused: `sluice resume {}` continues it",
            commit.subject, canary.id, canary.id
        )
    } else {
        commit.subject
    };
    Ok((said, left, settings.forge.clone()))
}

/// Why `sluice adopt release` made no commit.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// The settings at the head set no `adoption.hold: true`.
    #[error("{SETTINGS_PATH} sets no adoption.hold: nothing to release")]
    NotHeld,
    #[error(
        "{problems}; fix the repo settings first (sluice never falls back to default settings)"
    )]
    Settings { problems: String },
    /// The block cannot be taken out without touching anything else of the file.
    #[error("{SETTINGS_PATH}: cannot take the adoption block out by itself ({why}); remove `adoption:` by hand in one commit")]
    Unremovable { why: String },
    #[error(transparent)]
    Git(#[from] crate::gitops::Error),
}

/// Commits the removal of `adoption.hold` from the repo settings (the `adoption:` block, and
/// nothing else of the file) by `operator` with `reason`, and pushes it; returns the subject.
/// The loop resumes every canary at its next tick. If the branch moved meanwhile, it is done
/// again on the new head.
pub fn release_adoption(
    repo: &mut ConfigRepo,
    runtime: &Runtime,
    operator: &Identity,
    reason: &str,
) -> Result<String, ReleaseError> {
    let attempts = 8;
    let mut attempt = 1;
    loop {
        repo.fetch()?;
        let subject = commit_release(repo, runtime, operator, reason)?;
        match crate::execute::push(repo, attempt, attempts)? {
            PushOutcome::Pushed(_) => return Ok(subject),
            PushOutcome::Rejected => attempt += 1,
        }
    }
}

fn commit_release(
    repo: &mut ConfigRepo,
    runtime: &Runtime,
    operator: &Identity,
    reason: &str,
) -> Result<String, ReleaseError> {
    let files = runtime.head_files(repo, false);
    let head = files.at(repo.git(), repo.root());
    let (settings, problems) = head.settings();
    if !problems.is_empty() {
        let problems = problems.iter().map(ToString::to_string).collect::<Vec<_>>();
        return Err(ReleaseError::Settings {
            problems: problems.join("; "),
        });
    }
    if !settings.adoption_hold {
        return Err(ReleaseError::NotHeld);
    }
    let text = match head.read(SETTINGS_PATH) {
        Some(Ok(text)) => text,
        Some(Err(e)) => return Err(ReleaseError::Unremovable { why: e.to_string() }),
        None => return Err(ReleaseError::NotHeld),
    };
    let released =
        without_adoption(&text, &settings).map_err(|why| ReleaseError::Unremovable { why })?;
    let who = format!("{} <{}>", operator.name, operator.email);
    let subject = "sluice: release the adoption hold".to_string();
    let message = CommitMessage::new(subject.clone())
        .body("Every canary leaves its first render and runs as usual from the next tick on.")
        .trailer(message::OPERATOR, &who)
        .trailer(message::REASON, reason);
    let changes = [FileChange::write(SETTINGS_PATH, released)];
    crate::execute::commit_operation(repo, &changes, &message, operator)?;
    info!(operator = %who, "{subject}");
    Ok(subject)
}

/// `text` without its top-level `adoption:` block (the key's line and the indented lines
/// under it). Refused unless what is left loads as exactly `settings` without the hold.
fn without_adoption(text: &str, settings: &Settings) -> Result<String, String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("adoption:"))
        .collect();
    let [start] = starts.as_slice() else {
        return Err(format!(
            "expected one line starting with `adoption:`, found {}",
            starts.len()
        ));
    };
    let end = (start + 1..lines.len())
        .find(|&i| !lines[i].starts_with([' ', '\t']))
        .unwrap_or(lines.len());
    let kept: String = lines[..*start].concat() + &lines[end..].concat();
    let left = parse_settings(SETTINGS_PATH, &kept).map_err(|errors| {
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!("what is left does not load: {}", errors.join("; "))
    })?;
    let wanted = Settings {
        adoption_hold: false,
        ..settings.clone()
    };
    if left != wanted {
        return Err("what is left would change other settings".into());
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_adoption_block_goes() {
        let held = "apiVersion: sluice.dev/v1alpha1\nkind: Config\nadoption:\n  hold: true\n# the route\nprovider: linkerd\n";
        let settings = parse_settings(SETTINGS_PATH, held).unwrap();
        assert_eq!(
            without_adoption(held, &settings).unwrap(),
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\n# the route\nprovider: linkerd\n"
        );
        let flow = "apiVersion: sluice.dev/v1alpha1\nkind: Config\nadoption: {hold: true}\n";
        let settings = parse_settings(SETTINGS_PATH, flow).unwrap();
        assert_eq!(
            without_adoption(flow, &settings).unwrap(),
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\n"
        );
        let nested = "{apiVersion: sluice.dev/v1alpha1, kind: Config, adoption: {hold: true}}\n";
        let settings = parse_settings(SETTINGS_PATH, nested).unwrap();
        assert!(without_adoption(nested, &settings)
            .unwrap_err()
            .starts_with("expected one line starting with `adoption:`, found 0"));
    }
}
