//! One tick of the loop, in one direction:
//!
//! ```text
//! fetch ─► settings + specs ─► observe ─► decide ─► render ─► commit ─► push
//!   ▲                                                                     │
//!   └──── the push was rejected (someone else pushed): the same steps ◄───┘
//!         again on the new head, never forcing
//! then: notifications and approval branches/pull requests for what reached the remote
//! ```
//!
//! This module wires the adapters to the pure core; none of the modules it calls calls back
//! into it. A bad spec or an unreadable status file is reported for that canary only; the
//! others go on.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use tracing::{info, warn};

use crate::approval::{self, Pending};
use crate::core::decide::{decide, Action, Decision};
use crate::core::observe::Observations;
use crate::core::operate::Operation;
use crate::core::status::{Gate, Phase, Status};
use crate::deleted;
use crate::forge::Forge;
use crate::gates::readiness::Readiness;
use crate::gates::sync::{applied, Applied};
use crate::gitops::{CommitMessage, ConfigRepo, FileChange, Identity, PushOutcome};
use crate::metrics::metric_templates::TemplateIndex;
use crate::observe::{External, Observer, Request};
use crate::render::replay::Record;
use crate::render::{self, message, status_file, RenderError};
use crate::runtime::Runtime;
use crate::spec::model::{Canary, CanaryId};
use crate::spec::settings::{CommitMode, Settings, SETTINGS_PATH};
use crate::workload;
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::Snapshot;

/// What a tick needs besides the repo.
pub struct Context<'a> {
    pub observer: &'a dyn Observer,
    /// Overrides the repo settings' author when set.
    pub author: Option<Identity>,
    pub push_attempts: u32,
    /// What the process built once at start: tokens, the tokio runtime, the settings cache.
    pub runtime: &'a Runtime,
}

/// What happened to one canary in a tick.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryOutcome {
    pub id: String,
    pub phase: Option<Phase>,
    /// The canary's status after the decision (for metrics and status listings).
    pub status: Option<Status>,
    /// The commit subject, when the decision committed.
    pub committed: Option<String>,
    pub events: Vec<String>,
    pub wake_at: Option<Timestamp>,
    pub error: Option<String>,
}

/// The result of one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickReport {
    pub outcomes: Vec<CanaryOutcome>,
    pub spec_errors: Vec<SpecError>,
    pub commits: usize,
    /// Push attempts that were rejected because the remote moved.
    pub push_retries: u32,
}

impl TickReport {
    /// The earliest time any canary may change.
    pub fn wake_at(&self) -> Option<Timestamp> {
        self.outcomes.iter().filter_map(|o| o.wake_at).min()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TickError {
    #[error(transparent)]
    Git(#[from] crate::gitops::Error),
}

impl TickError {
    /// A short label for the errors-by-kind metric.
    pub fn kind(&self) -> &'static str {
        match self {
            TickError::Git(e) => e.kind(),
        }
    }
}

/// A problem with one canary; the tick goes on with the others.
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    /// The repo settings do not load: defaults would drop their gates (`sync:`, approvals),
    /// so every canary holds until the file is fixed.
    #[error("held: {problems}; every canary holds until {file} loads (sluice never falls back to default settings)")]
    Settings { file: String, problems: String },
    #[error("{path}: cannot read the status file: {message}; fix or delete it (history keeps the old state)")]
    Status { path: String, message: String },
    #[error(transparent)]
    Workload(#[from] workload::WorkloadError),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(transparent)]
    Git(#[from] crate::gitops::Error),
    #[error(transparent)]
    Drift(crate::drift::DriftError),
}

impl From<crate::drift::DriftError> for CanaryError {
    fn from(e: crate::drift::DriftError) -> Self {
        match e {
            crate::drift::DriftError::Git(e) => CanaryError::Git(e),
            e => CanaryError::Drift(e),
        }
    }
}

/// Runs one tick against the repo: fetch, decide every canary, commit, push; then the
/// notifications and approval steps for what reached the remote.
pub fn tick(repo: &mut ConfigRepo, ctx: &Context, now: Timestamp) -> Result<TickReport, TickError> {
    repo.fetch()?;
    tick_fetched(repo, ctx, now)
}

/// What the daemon remembers of the last tick that completed, so that a poll finding nothing
/// new does nothing beyond the fetch: no walk of the work tree, no parse, no status read.
///
/// A tick is remembered only when it leaves every canary at rest (Initialized, Succeeded or
/// Failed, no error, no spec error) and committed nothing. Only the repo can move a canary at
/// rest: a new revision, an edited spec or settings, or a manual operation (`sluice pause`,
/// `approve`, ... commit to the branch) all move the head. An active canary is never skipped:
/// it waits on things outside the repo that have no `wake_at` (the GitOps engine applying the
/// last commit, readiness, confirm and rollback webhooks, approval pull requests closed
/// unmerged), so every poll observes it, as before. The daemon [forgets](Idle::forget) the
/// last tick on anything uncertain: a webhook, a failed tick, a change of leadership.
#[derive(Debug, Default)]
pub struct Idle {
    rest: Option<Rest>,
}

#[derive(Debug)]
struct Rest {
    head: git2::Oid,
    wake_at: Option<Timestamp>,
}

impl Idle {
    /// Remembers the tick that just completed on `head` (the head it decided on), when the
    /// next polls may skip it; otherwise forgets.
    pub fn completed(&mut self, head: git2::Oid, report: &TickReport) {
        let at_rest = report.commits == 0
            && report.spec_errors.is_empty()
            && report.outcomes.iter().all(|o| {
                o.error.is_none()
                    && o.status.as_ref().is_some_and(|s| {
                        matches!(
                            s.phase,
                            Phase::Initialized | Phase::Succeeded | Phase::Failed
                        )
                    })
            });
        self.rest = at_rest.then(|| Rest {
            head,
            wake_at: report.wake_at(),
        });
    }

    /// The earliest `wake_at` of the remembered tick, to sleep until.
    pub fn wake_at(&self) -> Option<Timestamp> {
        self.rest.as_ref().and_then(|r| r.wake_at)
    }

    /// The next poll runs the whole tick.
    pub fn forget(&mut self) {
        self.rest = None;
    }

    /// Whether a poll that fetched `head` at `now` has anything to do.
    pub fn is_due(&self, head: git2::Oid, now: Timestamp) -> bool {
        match &self.rest {
            None => true,
            Some(rest) => rest.head != head || rest.wake_at.is_some_and(|w| w <= now),
        }
    }
}

/// What one poll did.
#[derive(Debug)]
pub enum Polled {
    /// The head and the canaries' times are as the last completed tick left them: only the
    /// fetch ran.
    Idle,
    Ticked(TickReport),
}

/// The daemon's poll: fetches, then ticks unless [`Idle`] says nothing is due. Remembers the
/// tick in `idle` when it completes; forgets on an error.
pub fn poll(
    repo: &mut ConfigRepo,
    ctx: &Context,
    now: Timestamp,
    idle: &mut Idle,
) -> Result<Polled, TickError> {
    let fetched = repo.fetch();
    let head = match fetched {
        Ok(head) => head,
        Err(e) => {
            idle.forget();
            return Err(e.into());
        }
    };
    if !idle.is_due(head, now) {
        return Ok(Polled::Idle);
    }
    match tick_fetched(repo, ctx, now) {
        Ok(report) => {
            idle.completed(repo.head(), &report);
            Ok(Polled::Ticked(report))
        }
        Err(e) => {
            idle.forget();
            Err(e)
        }
    }
}

/// [`tick`] without its first fetch, for a repo fetched just now: a one-shot `reconcile`
/// right after [`ConfigRepo::open_or_clone`], which fetches, would otherwise ask the remote
/// twice.
pub fn tick_fetched(
    repo: &mut ConfigRepo,
    ctx: &Context,
    now: Timestamp,
) -> Result<TickReport, TickError> {
    let attempts = ctx.push_attempts.max(1);
    let mut attempt = 1;
    let mut fetched = true;
    let mut done = loop {
        if !fetched {
            repo.fetch()?;
        }
        fetched = false;
        // A tick's commits keep their objects in memory and store them as one pack (see
        // `gitops::memory`): many decisions would otherwise write thousands of loose files.
        let decided = repo.with_memory_objects(|repo| decide_and_commit(repo, ctx, now))?;
        if decided.report.commits == 0 {
            break decided;
        }
        match repo.push_attempt(attempt, attempts)? {
            PushOutcome::Pushed(_) => break decided,
            PushOutcome::Rejected => {
                warn!("Push rejected: the branch moved; deciding again on the new head");
                attempt += 1;
            }
        }
    };
    done.report.push_retries = attempt - 1;
    for (canary, decision) in &done.announce {
        for event in &decision.events {
            info!(canary = %canary.id, "{event}");
        }
        ctx.observer.notify(&done.settings, canary, decision);
    }
    if !done.pending.is_empty() {
        let forge = approval::connect(done.settings.forge.as_ref(), ctx.runtime);
        approval::keep_in_line(
            repo,
            ctx.runtime,
            forge.as_ref(),
            &done.author,
            &done.snapshot,
            &done.pending,
        );
    }
    Ok(done.report)
}

/// One attempt's decisions, committed but maybe not pushed yet.
struct Decided {
    report: TickReport,
    settings: Settings,
    author: Identity,
    /// Committed decisions, to log and notify once they reached the remote.
    announce: Vec<(Canary, Decision)>,
    /// Canaries waiting for approval, or that stopped waiting in this tick.
    pending: Vec<Pending>,
    /// The repo as this attempt read it, for the approval step.
    snapshot: Snapshot,
}

/// The repo settings at the head, parsed again only when `.sluice/config.yaml` changed.
fn settings(repo: &ConfigRepo, runtime: &Runtime) -> (Settings, Vec<SpecError>) {
    let source = match repo.file_id_at_head(SETTINGS_PATH) {
        Ok(id) => id.map(|id| id.to_string()),
        Err(e) => {
            warn!(error = %e, "Cannot look up the repo settings; reading them again");
            Some(format!("unreadable {}", repo.head()))
        }
    };
    runtime.settings(source, || {
        crate::spec::load::settings_in(repo.root(), |p| runtime.read_file(p))
    })
}

/// Loads and decides every canary on the current head, committing each decision.
fn decide_and_commit(
    repo: &mut ConfigRepo,
    ctx: &Context,
    now: Timestamp,
) -> Result<Decided, TickError> {
    let root: PathBuf = repo.root().to_path_buf();
    let (settings, settings_errors) = settings(repo, ctx.runtime);
    let mut spec_errors = settings_errors.clone();
    let author = ctx.author.clone().unwrap_or_else(|| Identity {
        name: settings.author_name.clone(),
        email: settings.author_email.clone(),
    });
    // The one read of the repo this attempt makes: specs, templates and sources come from it.
    let snapshot = Snapshot::read_with(&root, |p| ctx.runtime.read_file(p));
    let has_status =
        |id: &CanaryId| std::fs::symlink_metadata(root.join(status_file::path_for(id))).is_ok();
    let existing = crate::spec::load::Existing {
        files: &snapshot,
        has_status: &has_status,
    };
    let mut loaded = crate::spec::load::load_in(&snapshot, &settings, Some(&existing));
    // A canary whose templateRef cannot be used never starts: refused here, as `validate` does.
    let (templates, template_errors) = TemplateIndex::from_snapshot(&snapshot);
    crate::spec::template_refs::reject_unusable_templates(
        &mut loaded,
        &snapshot,
        template_errors,
        |namespace, name| templates.get(namespace, name).map(drop),
    );
    spec_errors.extend(loaded.errors);
    for e in &spec_errors {
        warn!(error = %e, "Invalid spec");
    }
    let mut report = TickReport {
        spec_errors,
        ..TickReport::default()
    };
    if !settings_errors.is_empty() {
        // The canaries were read with default settings only to name them here.
        let held = CanaryError::Settings {
            file: SETTINGS_PATH.to_string(),
            problems: settings_errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        };
        for canary in &loaded.canaries {
            report.outcomes.push(failed(canary, &held));
        }
        return Ok(Decided {
            report,
            settings,
            author,
            announce: Vec::new(),
            pending: Vec::new(),
            snapshot,
        });
    }
    let outputs: Vec<&str> = loaded.canaries.iter().map(|c| c.output.as_str()).collect();
    let index = workload::Index::new(&snapshot, &outputs);
    // Read every canary's status and revision, observe them together, then decide each.
    let mut prepared = Vec::new();
    for canary in &loaded.canaries {
        match prepare(&root, canary, &index, ctx.runtime) {
            Ok(p) => prepared.push(p),
            Err(e) => report.outcomes.push(failed(canary, &e)),
        }
    }
    let requests: Vec<Request<'_>> = prepared
        .iter()
        .map(|p| Request {
            canary: p.canary,
            status: p.status.as_ref(),
            revision: &p.revision,
        })
        .collect();
    let externals = ctx.observer.observe(&templates, &settings, &requests, now);
    drop(requests);
    let forge = waiting_forge(&prepared, &settings, ctx.runtime);
    let mut done = Decided {
        report,
        settings: settings.clone(),
        author: author.clone(),
        announce: Vec::new(),
        pending: Vec::new(),
        snapshot: Snapshot::EMPTY,
    };
    let mut decided: Vec<Stepped<'_>> = Vec::new();
    let mut history = crate::drift::History::new(repo.head());
    // `commits: perTick`: the decisions waiting for the tick's one commit.
    let mut batch: Vec<(usize, &Canary, Uncommitted)> = Vec::new();
    for (p, external) in prepared.into_iter().zip(externals) {
        let canary = p.canary;
        let previous = p.status.clone();
        let recorded = p.record.clone();
        // Owned files changed outside sluice: hold or restore instead of deciding (`drift:`).
        let drifted = match drift_step(
            repo,
            &mut history,
            canary,
            p.status.as_ref(),
            settings.drift,
            now,
        ) {
            Ok(drifted) => drifted,
            Err(CanaryError::Git(e)) if e.is_transient() => return Err(TickError::Git(e)),
            Err(e) => Some(Err(e)),
        };
        let rejected = match (&forge, &p.status) {
            _ if drifted.is_some() => None,
            (Some(forge), Some(status)) => {
                approval::rejection(forge, ctx.runtime, settings.on_close, canary, status)
            }
            _ => None,
        };
        let merged = p
            .status
            .as_ref()
            .filter(|s| s.clock_from_merge && drifted.is_none())
            .map(|_| {
                approval::merged(
                    repo,
                    forge.as_ref(),
                    ctx.runtime,
                    &settings.approvers,
                    canary,
                )
            });
        let comment = match &merged {
            Some(approval::Merged::Refused {
                number: Some(n),
                reason,
                ..
            }) => Some((*n, format!("This merge did not approve: {reason}."))),
            _ => None,
        };
        let stepped = match drifted {
            Some(drifted) => drifted,
            None => step_canary(
                repo, &root, p, external, rejected, merged, &author, &index, now,
            ),
        };
        let outcome = match stepped {
            // Nothing to decide, but the spec's revertOnDeletion differs from the record.
            Ok((mut outcome, None)) => match previous
                .as_ref()
                .and_then(|s| deleted::record_update(canary, s, recorded.as_ref()))
            {
                Some((change, mut message)) => {
                    message.trailers.push(
                        Record::other("revertOnDeletion recorded in the status file", now)
                            .trailer(),
                    );
                    match repo.commit_files(&[change], &message, &author, None) {
                        Ok(Some(_)) => {
                            done.report.commits += 1;
                            outcome.committed = Some(message.subject);
                            outcome
                        }
                        Ok(None) => outcome,
                        Err(e) if e.is_transient() => return Err(TickError::Git(e)),
                        Err(e) => failed(canary, &CanaryError::Git(e)),
                    }
                }
                None => outcome,
            },
            Ok((mut outcome, Some(change))) => match settings.commits {
                CommitMode::PerCanary => {
                    match repo.commit_files(&change.changes, &change.message, &author, None) {
                        Ok(Some(_)) => {
                            done.report.commits += 1;
                            outcome.committed = Some(change.message.subject.clone());
                            done.announce.push((canary.clone(), change.decision));
                            outcome
                        }
                        Ok(None) => outcome,
                        Err(e) if e.is_transient() => return Err(TickError::Git(e)),
                        Err(e) => failed(canary, &CanaryError::Git(e)),
                    }
                }
                CommitMode::PerTick => match repo.check_changes(&change.changes) {
                    Ok(()) => {
                        batch.push((done.report.outcomes.len(), canary, change));
                        outcome
                    }
                    Err(e) => failed(canary, &CanaryError::Git(e)),
                },
            },
            Err(CanaryError::Git(e)) if e.is_transient() => return Err(TickError::Git(e)),
            Err(e) => failed(canary, &e),
        };
        decided.push((done.report.outcomes.len(), canary, previous, comment));
        done.report.outcomes.push(outcome);
    }
    if !batch.is_empty() {
        commit_batch(repo, &author, batch, &mut done)?;
    }
    revert_deleted(repo, ctx, &root, &snapshot, &author, now, &mut done)?;
    for (i, canary, previous, comment) in decided {
        // The comment goes out only with a committed refusal, after the push.
        let committed = done.report.outcomes[i].committed.is_some();
        if let Some(status) = &done.report.outcomes[i].status {
            if approval::is_waiting(status) || previous.as_ref().is_some_and(approval::is_waiting) {
                done.pending.push(Pending {
                    canary: canary.clone(),
                    status: status.clone(),
                    previous,
                    comment: comment.filter(|_| committed),
                });
            }
        }
    }
    done.snapshot = snapshot;
    Ok(done)
}

/// A decided canary: its outcome's index, its status before this tick, and a comment for its
/// approval pull request (number, text).
type Stepped<'a> = (usize, &'a Canary, Option<Status>, Option<(u64, String)>);
/// Canaries whose spec was deleted: with `revertOnDeletion` recorded, one commit each reverts
/// the output; without, the output stays as it is and is logged as orphaned. Nothing is
/// reverted while a spec or YAML file fails to load: a broken spec is not a deleted one.
fn revert_deleted(
    repo: &mut ConfigRepo,
    ctx: &Context,
    root: &Path,
    snapshot: &Snapshot,
    author: &Identity,
    now: Timestamp,
    done: &mut Decided,
) -> Result<(), TickError> {
    let deleted = deleted::find(root, snapshot, |p| ctx.runtime.read_file(p));
    if deleted.is_empty() {
        return Ok(());
    }
    let unreadable = deleted::can_tell(snapshot);
    for d in deleted {
        if !d.reverts() {
            info!(canary = %d.id, status = %d.status_file, "Orphaned: the spec was deleted without revertOnDeletion; its output is left as it is");
            continue;
        }
        let hold = match (unreadable, done.report.spec_errors.is_empty()) {
            (Some(file), _) => Some(format!("{file} does not load")),
            (None, false) => Some("a canary spec does not load".to_string()),
            (None, true) => None,
        };
        let mut outcome = CanaryOutcome {
            id: d.id.to_string(),
            phase: None,
            status: None,
            committed: None,
            events: Vec::new(),
            wake_at: None,
            error: None,
        };
        if let Some(why) = hold {
            outcome.error = Some(format!("the spec is gone and revertOnDeletion is recorded, but {why}: the revert waits until every spec loads (a broken spec is not a deleted one)"));
            warn!(canary = %d.id, error = outcome.error.as_deref().unwrap_or_default(), "Revert held");
            done.report.outcomes.push(outcome);
            continue;
        }
        match deleted::revert(snapshot, &d) {
            Ok(mut revert) => {
                let record = Record::other("spec deleted with revertOnDeletion: true", now);
                revert.message.trailers.push(record.trailer());
                match repo.commit_files(&revert.changes, &revert.message, author, None) {
                    Ok(Some(_)) => {
                        done.report.commits += 1;
                        info!(canary = %d.id, "Terminated canary {}.{}", d.id.name, d.id.namespace);
                        outcome.events.push(format!(
                            "Terminated canary {}.{}",
                            d.id.name, d.id.namespace
                        ));
                        outcome.committed = Some(revert.message.subject);
                    }
                    Ok(None) => {}
                    Err(e) if e.is_transient() => return Err(TickError::Git(e)),
                    Err(e) => outcome.error = Some(e.to_string()),
                }
            }
            Err(e) => {
                warn!(canary = %d.id, error = %e, "Cannot revert a deleted canary");
                outcome.error = Some(e.to_string());
            }
        }
        done.report.outcomes.push(outcome);
    }
    Ok(())
}

/// The forge, when the repo has one and some canary waits for an approval this tick may find
/// rejected, or has one merged whose merger must be read; `None` keeps idle ticks free of
/// forge calls.
fn waiting_forge(
    prepared: &[Prepared<'_>],
    settings: &Settings,
    runtime: &Runtime,
) -> Option<Forge> {
    let waiting = prepared.iter().any(|p| {
        p.status
            .as_ref()
            .is_some_and(|s| approval::is_waiting(s) || s.clock_from_merge)
    });
    if waiting {
        approval::connect(settings.forge.as_ref(), runtime)
    } else {
        None
    }
}

/// When the canary's owned files changed outside sluice, or a hold for that ends: what the
/// tick does instead of deciding (see [`crate::drift`]); `None` to decide as usual.
fn drift_step(
    repo: &ConfigRepo,
    history: &mut crate::drift::History,
    canary: &Canary,
    status: Option<&Status>,
    policy: crate::spec::settings::DriftPolicy,
    now: Timestamp,
) -> Result<Option<Stepped1>, CanaryError> {
    let (decision, changes) = match crate::drift::check(repo, history, canary)? {
        Some(drift) => crate::drift::step(repo, canary, status, &drift, policy)?,
        None => match status.filter(|s| !s.drift.is_empty()) {
            Some(held) => crate::drift::resolved(canary, held)?,
            None => return Ok(None),
        },
    };
    for event in &decision.events {
        warn!(canary = %canary.id, "{event}");
    }
    let outcome = CanaryOutcome {
        id: canary.id.to_string(),
        phase: Some(decision.status.phase),
        status: Some(decision.status.clone()),
        committed: None,
        events: decision.events.clone(),
        wake_at: decision.wake_at,
        error: None,
    };
    if changes.is_empty() {
        return Ok(Some(Ok((outcome, None))));
    }
    let mut message = message::render(canary, &decision, None);
    // A drift commit answers a human's edit, which no replay of the rules can rebuild: audit
    // lists it as not replayed (and reports the edit itself as a foreign commit).
    let record = Record::other("drift: owned files changed outside sluice", now);
    message.trailers.push(record.trailer());
    Ok(Some(Ok((
        outcome,
        Some(Uncommitted {
            changes,
            message,
            decision,
        }),
    ))))
}

/// One canary stepped: its outcome, and its commit when it makes one.
type Stepped1 = Result<(CanaryOutcome, Option<Uncommitted>), CanaryError>;

/// A decision's files and commit message, not committed yet.
struct Uncommitted {
    changes: Vec<FileChange>,
    message: CommitMessage,
    decision: Decision,
}

/// Commits the tick's decisions together (`commits: perTick`). A failure that retrying cannot
/// fix marks every canary of the batch failed; nothing is half-committed.
fn commit_batch(
    repo: &mut ConfigRepo,
    author: &Identity,
    batch: Vec<(usize, &Canary, Uncommitted)>,
    done: &mut Decided,
) -> Result<(), TickError> {
    let messages: Vec<CommitMessage> = batch.iter().map(|(_, _, c)| c.message.clone()).collect();
    let Some(folded) = message::fold(&messages) else {
        return Ok(());
    };
    let changes: Vec<FileChange> = batch
        .iter()
        .flat_map(|(_, _, c)| c.changes.iter().cloned())
        .collect();
    match repo.commit_files(&changes, &folded, author, None) {
        Ok(Some(_)) => {
            done.report.commits += 1;
            for (i, canary, change) in batch {
                done.report.outcomes[i].committed = Some(change.message.subject);
                done.announce.push((canary.clone(), change.decision));
            }
        }
        Ok(None) => {}
        Err(e) if e.is_transient() => return Err(TickError::Git(e)),
        Err(e) => {
            let e = CanaryError::Git(e);
            for (i, canary, _) in batch {
                done.report.outcomes[i] = failed(canary, &e);
            }
        }
    }
    Ok(())
}

fn failed(canary: &Canary, e: &CanaryError) -> CanaryOutcome {
    warn!(canary = %canary.id, error = %e, "Canary skipped");
    CanaryOutcome {
        id: canary.id.to_string(),
        phase: None,
        status: None,
        committed: None,
        events: Vec::new(),
        wake_at: None,
        error: Some(e.to_string()),
    }
}

/// A canary's status and current revision, read before observing.
struct Prepared<'a> {
    canary: &'a Canary,
    status: Option<Status>,
    /// What the status file recorded of the spec (`revertOnDeletion`, output).
    record: Option<status_file::SpecRecord>,
    revision: String,
}

fn prepare<'a>(
    root: &Path,
    canary: &'a Canary,
    index: &workload::Index,
    runtime: &Runtime,
) -> Result<Prepared<'a>, CanaryError> {
    let read = |p: &Path| runtime.read_file(p);
    let found = status_file::read_recorded(root, &canary.id, read).map_err(|message| {
        CanaryError::Status {
            path: status_file::path_for(&canary.id),
            message,
        }
    })?;
    let (status, record) = match found {
        Some((status, record)) => (Some(status), record),
        None => (None, None),
    };
    let revision = workload::revision(root, canary, index)?;
    Ok(Prepared {
        canary,
        status,
        record,
        revision,
    })
}

/// Whether the canary's last pushed commit is live: applied by the GitOps engine (when the
/// canary has a sync target) and its workload and route ready.
fn live(repo: &ConfigRepo, canary: &Canary, external: &External) -> Result<bool, CanaryError> {
    let applied = match &external.sync {
        None => true,
        Some(Err(e)) => {
            warn!(canary = %canary.id, error = %e, "Cannot tell whether the last commit is applied");
            false
        }
        Some(Ok(sync)) => {
            let pushed = repo
                .history(Some((message::CANARY, &canary.id.to_string())), 1)?
                .first()
                .map(|e| e.oid.to_string());
            match pushed {
                None => true,
                Some(pushed) => {
                    match applied(sync, &pushed, |a, b| repo.is_descendant_or_self(a, b)) {
                        Applied::Yes => true,
                        Applied::NotYet { reason } | Applied::Failed { reason } => {
                            info!(canary = %canary.id, reason = %reason, "Waiting for the GitOps engine");
                            false
                        }
                    }
                }
            }
        }
    };
    let ready = match &external.ready {
        None | Some(Ok(Readiness::Ready)) => true,
        Some(Ok(Readiness::NotReady(why))) => {
            info!(canary = %canary.id, reason = %why, "Waiting for the canary to be ready");
            false
        }
        Some(Err(e)) => {
            warn!(canary = %canary.id, error = %e, "Cannot tell whether the canary is ready");
            false
        }
    };
    Ok(applied && ready)
}

/// Decides one canary; its files and message come back uncommitted when the decision commits.
/// `rejected`: its approval pull request was closed unmerged, so it rolls back instead.
/// `merged`: what the merged approval on the main branch amounts to (see
/// [`approval::merged`]): recorded in the commit, refused (the waiting state goes back), or
/// not known yet (nothing is decided).
#[allow(clippy::too_many_arguments)]
fn step_canary(
    repo: &ConfigRepo,
    root: &Path,
    prepared: Prepared<'_>,
    external: External,
    rejected: Option<String>,
    merged: Option<approval::Merged>,
    author: &Identity,
    index: &workload::Index,
    now: Timestamp,
) -> Result<(CanaryOutcome, Option<Uncommitted>), CanaryError> {
    let canary = prepared.canary;
    let status = prepared.status;
    let applied = live(repo, canary, &external)?;
    let obs = Observations {
        revision: prepared.revision,
        metrics: external.metrics,
        webhooks: external.webhooks,
        applied,
    };
    let rollback = rejected.and_then(|reason| {
        match crate::core::operate::operate(canary, status.as_ref(), Operation::Abort, &reason, now)
        {
            Ok(decision) => Some((decision, reason)),
            Err(e) => {
                warn!(canary = %canary.id, error = %e, "Approval rejected, but the canary cannot roll back");
                None
            }
        }
    });
    let who = format!("{} <{}>", author.name, author.email);
    let mut approved = None;
    let (decision, operator, record) = match (rollback, merged) {
        (Some((decision, reason)), _) => {
            let record = Record::operated(Operation::Abort, &reason, &who, &reason, now);
            (decision, Some(reason), record)
        }
        (None, Some(approval::Merged::Unknown(why))) => {
            warn!(canary = %canary.id, reason = %why, "Approval merged; waiting to learn who merged it");
            match status.clone() {
                Some(s) => (
                    refusal_hold(s, why),
                    None,
                    Record::other("approval merged by an unknown login", now),
                ),
                None => (
                    decide(canary, None, &obs, now),
                    None,
                    Record::decided(&obs, now),
                ),
            }
        }
        (
            None,
            Some(approval::Merged::Refused {
                waiting, reason, ..
            }),
        ) => (
            refused(canary, *waiting, &reason),
            Some(reason),
            Record::other(
                "approval refused: merged by a login forge.approvers does not allow",
                now,
            ),
        ),
        (None, Some(approval::Merged::Approved { by, source })) => {
            approved = Some((by, source));
            (
                decide(canary, status.as_ref(), &obs, now),
                None,
                Record::decided(&obs, now),
            )
        }
        (None, None) => (
            decide(canary, status.as_ref(), &obs, now),
            None,
            Record::decided(&obs, now),
        ),
    };
    let outcome = CanaryOutcome {
        id: canary.id.to_string(),
        phase: Some(decision.status.phase),
        status: Some(decision.status.clone()),
        committed: None,
        events: decision.events.clone(),
        wake_at: decision.wake_at,
        error: None,
    };
    if !decision.commits() {
        return Ok((outcome, None));
    }
    let changes = render::changes(root, canary, &decision, index)?;
    let mut message = message::render(
        canary,
        &decision,
        operator.as_deref().map(|reason| (who.as_str(), reason)),
    );
    if let (Some((by, source)), Action::ApprovalMerged) = (approved, &decision.action) {
        message = message::with_approval(message, by.as_deref(), &source);
    }
    message.trailers.push(record.trailer());
    Ok((
        outcome,
        Some(Uncommitted {
            changes,
            message,
            decision,
        }),
    ))
}

/// A canary whose merged approval cannot be judged yet: nothing changes in this tick.
fn refusal_hold(status: Status, why: String) -> Decision {
    Decision {
        action: Action::Hold,
        status,
        events: vec![why],
        wake_at: None,
        checks: Vec::new(),
    }
}

/// The status a canary had before an approval it may not take was merged: it waits again
/// (for the gate it waited for), and the route and workloads go back with it.
fn refused(canary: &Canary, mut waiting: Status, reason: &str) -> Decision {
    let action = match (waiting.phase, waiting.waiting_for) {
        (Phase::Waiting, _) => Action::WaitRollout,
        (_, gate) => Action::WaitApproval(gate.unwrap_or(Gate::TrafficIncrease)),
    };
    let event = format!(
        "Approval of {}.{} refused: {reason}",
        canary.id.name, canary.id.namespace
    );
    waiting.message = event.clone();
    Decision {
        action,
        status: waiting,
        events: vec![event],
        wake_at: None,
        checks: Vec::new(),
    }
}
