//! The rollout state machine: `decide(canary, status, observations, now) -> Decision`.
//!
//! Pure: no IO, no clock reads, one exhaustive `match` over [`Phase`]. Every rollout rule lives
//! here; adapters gather observations before and turn the decision into a commit after. The
//! order of checks follows Flagger's scheduler so Flagger users see the events they know.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::judged::JudgeStep;
use crate::model::{Canary, Strategy, Target, WebhookKind};
use crate::number::fmt_num;
use crate::observe::{MetricValue, Observations};
use crate::schedule::{promotion_primary_weights, Pause, Step};
use crate::status::{CheckRecord, Gate, Phase, Status};
use crate::trailer::{CheckKind, Judged};

/// What changed, for commit subjects and renderers.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Nothing to commit.
    Hold,
    /// First sight of the canary: primary takes the source, route 100/0.
    Initialize,
    /// A new revision waits for approval before the rollout starts.
    WaitRollout,
    /// A new revision starts an analysis at weight 0 (canary scaled up).
    StartRollout,
    /// A new revision arrived mid-analysis: back to weight 0.
    Restart,
    /// The source went back to the promoted revision mid-analysis: route 100/0, idle.
    Cancel,
    AdvanceCanary {
        from: u8,
        to: u8,
    },
    /// Blue/green or A/B: one more analysis iteration passed.
    AdvanceIteration {
        done: u32,
        of: u32,
    },
    FailedCheck,
    /// A Rollout's analysis took its measurements and is still running: the status keeps
    /// them (Argo's `MetricResult`), the step holds.
    Measured,
    WaitApproval(Gate),
    /// The primary takes the canary's spec.
    Promote,
    /// Promotion: the weight of the backend that runs the promoted revision (the primary; in
    /// route-only mode the canary service, which becomes stable when the promotion finalises).
    AdvancePrimary {
        weight: u8,
    },
    /// Finalising: the canary is scaled to zero.
    Finalise,
    /// Back to the primary at 100 %: phase Failed.
    Rollback {
        reason: String,
        cause: RollbackCause,
    },
    /// The promotion's last change was not live (applied, the primary ready) within the
    /// progress deadline: phase Failed with all traffic on the canary, which keeps running
    /// (Flagger 1.44, fluxcd/flagger#1931).
    PromotionFailed {
        reason: String,
    },
    /// An approval pull request was merged: the approved step's clock starts now.
    ApprovalMerged,
    /// `sluice pause`: the canary holds until resumed.
    Pause,
    /// `sluice resume`.
    Resume,
    /// Files sluice owns were changed outside sluice since its last commit for the canary
    /// (the `drift:` repo setting says which step the loop takes).
    Drift(DriftStep),
    /// A wave's cluster does not answer: the wave holds, and its status says why (committed
    /// once per outage, the status file alone).
    Unreachable,
    /// `maxConcurrentCanaries`: a new revision waits for a free slot to start; the status says
    /// why (committed when the reason changes, the status file alone).
    Queued,
}

/// What the loop does about files sluice owns that someone else changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriftStep {
    /// `drift: hold`: the canary holds; the commit names the files (status file only).
    Hold { files: Vec<String> },
    /// `drift: restore`: the commit writes back what sluice last committed for the files.
    Restore { files: Vec<String>, from: String },
    /// The owned files are sluice's again (put back by hand, or rewritten by a manual
    /// operation): the hold ends.
    Resolved,
}

/// Why a canary rolls back: Flagger alerts on each in its own words and severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollbackCause {
    /// `failed` failed checks reached the threshold.
    FailedChecks { failed: u32 },
    /// A `rollback` webhook answered yes.
    Webhook,
    /// The last change was not applied within `progressDeadlineSeconds`.
    ProgressDeadline,
    /// `sluice rollback`.
    Manual,
}

/// The outcome of one decision. Only this crate builds one (the private `sealed` field): every
/// rollout decision, a manual operation's included, is made by the rules here.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub action: Action,
    /// The next status (equal to the input when the action is `Hold`).
    pub status: Status,
    /// Flagger-style events, oldest first.
    pub events: Vec<String>,
    /// The earliest time deciding again may change something, if any.
    pub wake_at: Option<Timestamp>,
    /// The checks (metrics, webhooks) this decision judged, in order; empty when it judged
    /// none. The commit's `Sluice-Check` trailers; the status keeps the last judged ones.
    pub checks: Vec<Judged>,
    pub(crate) sealed: Sealed,
}

/// Keeps [`Decision`] from being built outside the core: a struct with a private field has no
/// literal elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sealed;

impl Decision {
    /// True when the decision changes the repo.
    pub fn commits(&self) -> bool {
        self.action != Action::Hold
    }

    /// True when the decision ends a rollout: when Flagger runs its `post-rollout` webhooks
    /// (`runPostRolloutHooks`): the promotion completed, a rollback, a failed promotion, and a
    /// promotion with the analysis skipped (since Flagger 1.44, fluxcd/flagger#1918). Nothing
    /// else does, whatever phase the canary is in: pausing a succeeded canary or holding it
    /// for drift ends no rollout.
    pub fn ends_rollout(&self) -> bool {
        match &self.action {
            Action::Finalise | Action::Rollback { .. } | Action::PromotionFailed { .. } => true,
            // `skipAnalysis`: the rollout starts and ends in one decision.
            Action::Promote => self.status.phase == Phase::Succeeded,
            Action::Hold
            | Action::Initialize
            | Action::WaitRollout
            | Action::StartRollout
            | Action::Restart
            | Action::Cancel
            | Action::AdvanceCanary { .. }
            | Action::AdvanceIteration { .. }
            | Action::FailedCheck
            | Action::Measured
            | Action::WaitApproval(_)
            | Action::AdvancePrimary { .. }
            | Action::ApprovalMerged
            | Action::Pause
            | Action::Resume
            | Action::Drift(_)
            | Action::Unreachable
            | Action::Queued => false,
        }
    }
}

pub(crate) fn after(t: Timestamp, d: Duration) -> Timestamp {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// When the current step's clock starts: the commit time, plus the settle delay for canaries
/// without a sync target (the time Flux or Argo CD is given to apply the commit).
pub(crate) fn clock_start<R>(canary: &Canary<R>, status: &Status) -> Timestamp {
    match canary.sync {
        Some(_) => status.step_started,
        None => after(status.step_started, canary.settle),
    }
}

/// `name.namespace`, as Flagger names canaries in events. A wave's instance reads as its
/// canary and its wave, `podinfo.prod (wave eu)`, not as its instance id (`podinfo.eu`),
/// which names no object a person knows.
pub(crate) fn dotted<R>(canary: &Canary<R>) -> String {
    match &canary.wave {
        Some(wave) => format!(
            "{}.{} (wave {})",
            wave.canary, canary.id.namespace, wave.name
        ),
        None => format!("{}.{}", canary.id.name, canary.id.namespace),
    }
}

/// Decides the next step of one canary. `status` is `None` the first time the canary is seen.
pub fn decide<R>(
    canary: &Canary<R>,
    status: Option<&Status>,
    obs: &Observations,
    now: Timestamp,
) -> Decision {
    let mut decision = decide_phase(canary, status, obs, now);
    if decision.commits() {
        // Decided by the rules: a wait under `maxConcurrentCanaries` is over.
        decision.status.waiting_since = None;
    }
    with_route_state(canary, decision, now)
}

/// A committed decision's status with its route state (cookies, mirror phase) brought in
/// line; a `Hold` keeps the status it was given.
pub(crate) fn with_route_state<R>(
    canary: &Canary<R>,
    mut decision: Decision,
    now: Timestamp,
) -> Decision {
    if decision.commits() {
        crate::route_state::update(canary, &mut decision.status, now);
    }
    decision
}

fn decide_phase<R>(
    canary: &Canary<R>,
    status: Option<&Status>,
    obs: &Observations,
    now: Timestamp,
) -> Decision {
    let Some(status) = status else {
        return initialize(canary, obs, now);
    };
    if canary.suspend {
        return hold(status, None, format!("{} is suspended", dotted(canary)));
    }
    if status.clock_from_merge {
        let mut next = status.clone();
        next.clock_from_merge = false;
        next.step_started = now;
        return change(
            Action::ApprovalMerged,
            next,
            format!(
                "Approval of {} merged; the step's clock starts now",
                dotted(canary)
            ),
            Some(after(now, canary.analysis.interval)),
        );
    }
    if status.paused {
        return hold(
            status,
            None,
            format!(
                "{} is paused (`sluice resume` continues it)",
                dotted(canary)
            ),
        );
    }
    match status.phase {
        Phase::Initializing => initialize(canary, obs, now),
        Phase::Initialized | Phase::Succeeded | Phase::Failed => idle(canary, status, obs, now),
        Phase::Waiting => waiting(canary, status, obs, now),
        Phase::Progressing | Phase::WaitingApproval => progressing(canary, status, obs, now),
        Phase::Promoting => promotion_not_live(canary, status, obs, now)
            .unwrap_or_else(|| promoting(canary, status, now)),
        Phase::Finalising => promotion_not_live(canary, status, obs, now)
            .unwrap_or_else(|| finalising(canary, status, now)),
    }
}

pub(crate) fn hold(status: &Status, wake_at: Option<Timestamp>, why: String) -> Decision {
    Decision {
        action: Action::Hold,
        status: status.clone(),
        events: vec![why],
        wake_at,
        checks: Vec::new(),
        sealed: Sealed,
    }
}

pub(crate) fn change(
    action: Action,
    status: Status,
    event: String,
    wake_at: Option<Timestamp>,
) -> Decision {
    let mut status = status;
    status.message = event.clone();
    Decision {
        action,
        status,
        events: vec![event],
        wake_at,
        checks: Vec::new(),
        sealed: Sealed,
    }
}

fn initialize<R>(canary: &Canary<R>, obs: &Observations, now: Timestamp) -> Decision {
    let stable_service = match &canary.target {
        Target::RouteOnly { services, .. } => Some(services[0].to_string()),
        Target::Source { .. } | Target::TargetRef { .. } | Target::Rollout { .. } => None,
    };
    let status = Status {
        phase: Phase::Initialized,
        step: 0,
        canary_weight: 0,
        primary_weight: 100,
        failed_checks: 0,
        iterations: 0,
        promoted_revision: obs.revision.clone(),
        canary_revision: None,
        stable_service,
        waiting_for: None,
        phase_since: now,
        step_started: now,
        last_failed_check: None,
        checks: Vec::new(),
        message: String::new(),
        paused: false,
        clock_from_merge: false,
        session_cookie: None,
        previous_session_cookie: None,
        primary_session_cookie: None,
        mirroring: false,
        drift: Vec::new(),
        waiting_since: None,
        analysis: Vec::new(),
        rolled_out: match canary.rollback_window {
            0 => Vec::new(),
            _ => vec![obs.revision.clone()],
        },
    };
    change(
        Action::Initialize,
        status,
        format!("Initialization done! {}", dotted(canary)),
        None,
    )
}

/// The gate that holds a new revision before its rollout starts, if closed.
fn rollout_gate_closed<R>(canary: &Canary<R>, obs: &Observations) -> bool {
    gate_closed(canary, obs, Gate::Rollout)
}

/// A gate is closed when the spec asks for it and its answer is not yes. A native approval is
/// never answered here: it stays closed until a human approves, which is a manual operation
/// (`operate::Approve`, committed directly or carried by the approval pull request) that moves
/// the status past the gate. Flagger's confirm-* webhooks are answered by their HTTP replies.
fn gate_closed<R>(canary: &Canary<R>, obs: &Observations, gate: Gate) -> bool {
    let approvals = canary.analysis.approvals;
    let (wanted, kind) = match gate {
        Gate::Rollout => (approvals.before_rollout, WebhookKind::ConfirmRollout),
        Gate::TrafficIncrease => (
            approvals.before_traffic_increase,
            WebhookKind::ConfirmTrafficIncrease,
        ),
        Gate::Promotion => (approvals.before_promotion, WebhookKind::ConfirmPromotion),
    };
    let hook_declared = canary.analysis.webhooks.iter().any(|w| w.kind == kind);
    let hook_closed = hook_declared
        && canary
            .analysis
            .webhooks
            .iter()
            .filter(|w| w.kind == kind)
            .any(|w| {
                !obs.hooks(kind)
                    .any(|o| o.name == w.name && o.outcome.is_ok())
            });
    wanted || hook_closed
}

fn idle<R>(canary: &Canary<R>, status: &Status, obs: &Observations, now: Timestamp) -> Decision {
    if status.phase == Phase::Failed
        && status.canary_weight > 0
        && obs.revision == status.promoted_revision
    {
        return hold(
            status,
            None,
            format!(
                "{} promotion failed; the canary keeps the traffic until a new revision",
                dotted(canary)
            ),
        );
    }
    if obs.revision == status.promoted_revision {
        return hold(
            status,
            None,
            format!("{} runs the promoted revision", dotted(canary)),
        );
    }
    if status.phase == Phase::Failed && status.canary_revision.as_deref() == Some(&obs.revision) {
        return hold(
            status,
            None,
            format!(
                "{} revision {} failed its analysis; push a new revision or run `sluice retry`",
                dotted(canary),
                crate::model::short_revision(&obs.revision)
            ),
        );
    }
    start_rollout(canary, status, obs, now)
}

fn waiting<R>(canary: &Canary<R>, status: &Status, obs: &Observations, now: Timestamp) -> Decision {
    if obs.revision == status.promoted_revision {
        let mut next = status.clone();
        next.phase = Phase::Initialized;
        next.phase_since = now;
        next.waiting_for = None;
        next.canary_revision = None;
        return change(
            Action::Cancel,
            next,
            format!(
                "{} is back at the promoted revision; nothing to roll out",
                dotted(canary)
            ),
            None,
        );
    }
    start_rollout(canary, status, obs, now)
}

fn start_rollout<R>(
    canary: &Canary<R>,
    status: &Status,
    obs: &Observations,
    now: Timestamp,
) -> Decision {
    let name = dotted(canary);
    if crate::rollback_window::within(
        canary.rollback_window,
        &status.rolled_out,
        &status.promoted_revision,
        &obs.revision,
    ) {
        // Argo's fast rollback: before any step, its pauses and analyses.
        return promote_at_once(
            canary,
            status,
            &obs.revision,
            now,
            format!(
                "Rollback within the window of {} revisions: promoting {name} revision {} at once",
                canary.rollback_window,
                crate::model::short_revision(&obs.revision)
            ),
        );
    }
    if rollout_gate_closed(canary, obs) {
        if status.phase == Phase::Waiting
            && status.canary_revision.as_deref() == Some(&obs.revision)
        {
            return hold(
                status,
                None,
                format!("Halt {name} advancement waiting for approval to start the rollout"),
            );
        }
        // The new revision gets no traffic before its rollout is approved: a canary that
        // carried traffic (a restarted analysis, or all of it after a failed promotion) hands
        // it back to the primary now, as the approved rollout's first step would, so the
        // canary workload (rendered from the new source) serves nothing while it waits.
        let mut next = status.clone();
        next.phase = Phase::Waiting;
        next.phase_since = now;
        next.waiting_for = Some(Gate::Rollout);
        next.canary_revision = Some(obs.revision.clone());
        next.canary_weight = 0;
        next.primary_weight = 100;
        return change(
            Action::WaitRollout,
            next,
            format!("Halt {name} advancement waiting for approval to start the rollout"),
            None,
        );
    }
    begin_rollout(canary, status, &obs.revision, now)
}

/// Starts the rollout of `revision` once its rollout gate is open (by decision or by a human
/// approval): an analysis at weight 0, or a direct promotion when the analysis is skipped.
pub(crate) fn begin_rollout<R>(
    canary: &Canary<R>,
    status: &Status,
    revision: &str,
    now: Timestamp,
) -> Decision {
    let name = dotted(canary);
    if canary.skip_analysis {
        let event = format!("Promotion completed! Canary analysis was skipped for {name}");
        return promote_at_once(canary, status, revision, now, event);
    }
    let mut next = reset_analysis(status, revision, now);
    if canary.rollback_window > 0 {
        crate::rollback_window::remember(&mut next.rolled_out, revision);
    }
    change(
        Action::StartRollout,
        next,
        format!("New revision detected! Scaling up {name}"),
        Some(after(now, canary.analysis.interval)),
    )
}

/// Promotes `revision` without a rollout: the analysis is skipped, or Argo's fast rollback.
fn promote_at_once<R>(
    canary: &Canary<R>,
    status: &Status,
    revision: &str,
    now: Timestamp,
    event: String,
) -> Decision {
    let mut next = status.clone();
    next.phase = Phase::Succeeded;
    next.phase_since = now;
    next.step_started = now;
    next.step = 0;
    next.canary_weight = 0;
    next.primary_weight = 100;
    next.failed_checks = 0;
    next.iterations = 0;
    next.waiting_for = None;
    next.checks.clear();
    next.last_failed_check = None;
    next.canary_revision = Some(revision.to_string());
    next.promoted_revision = revision.to_string();
    swap_stable(canary, &mut next);
    if canary.rollback_window > 0 {
        crate::rollback_window::remember(&mut next.rolled_out, revision);
    }
    change(Action::Promote, next, event, None)
}

/// A fresh analysis of `revision` at weight 0.
pub(crate) fn reset_analysis(status: &Status, revision: &str, now: Timestamp) -> Status {
    let mut next = status.clone();
    next.phase = Phase::Progressing;
    next.phase_since = now;
    next.step_started = now;
    next.step = 0;
    next.canary_weight = 0;
    next.primary_weight = 100;
    next.failed_checks = 0;
    next.iterations = 0;
    next.waiting_for = None;
    next.last_failed_check = None;
    next.checks.clear();
    next.analysis.clear();
    next.canary_revision = Some(revision.to_string());
    next
}

/// Route-only mode: after a promotion the service that took the canary traffic is stable.
fn swap_stable<R>(canary: &Canary<R>, status: &mut Status) {
    if let Target::RouteOnly { services, .. } = &canary.target {
        let current = status.stable_service.as_deref();
        let other = if current == Some(services[0].as_str()) {
            &services[1]
        } else {
            &services[0]
        };
        status.stable_service = Some(other.to_string());
    }
}

pub(crate) fn rollback<R>(
    canary: &Canary<R>,
    status: &Status,
    reason: String,
    cause: RollbackCause,
    now: Timestamp,
) -> Decision {
    let mut next = failed(status, now, 0);
    let name = dotted(canary);
    let event = format!("Rolling back {name}: {reason}");
    next.message = event.clone();
    Decision {
        action: Action::Rollback { reason, cause },
        status: next,
        events: vec![format!("Canary failed! Scaling down {name}"), event],
        wake_at: None,
        checks: Vec::new(),
        sealed: Sealed,
    }
}

/// `status` failed at `now`, with `canary_weight` percent of the traffic on the canary (a
/// rollback: none; a failed promotion: all of it) and the rest on the primary.
fn failed(status: &Status, now: Timestamp, canary_weight: u8) -> Status {
    let mut next = status.clone();
    next.phase = Phase::Failed;
    next.phase_since = now;
    next.step_started = now;
    next.canary_weight = canary_weight;
    next.primary_weight = 100u8.saturating_sub(canary_weight);
    next.waiting_for = None;
    next
}

/// The records of judged checks, as the status keeps them.
fn records(judged: &[Judged]) -> Vec<CheckRecord> {
    judged.iter().map(|j| j.record.clone()).collect()
}

fn webhook(record: CheckRecord) -> Judged {
    Judged {
        kind: CheckKind::Webhook,
        record,
    }
}

/// Judges the metrics and the `rollout` webhooks; returns the checks and whether all passed.
fn judge<R>(canary: &Canary<R>, obs: &Observations) -> (Vec<Judged>, bool) {
    let mut records = Vec::new();
    for metric in &canary.analysis.metrics {
        let observed = obs.metrics.iter().find(|m| m.name == metric.name);
        let (min, max) = (metric.range.min, metric.range.max);
        let record = match observed.map(|m| &m.value) {
            None => CheckRecord {
                name: metric.name.clone(),
                value: None,
                min,
                max,
                passed: false,
                detail: "not observed".into(),
            },
            Some(MetricValue::NoData) => CheckRecord {
                name: metric.name.clone(),
                value: None,
                min,
                max,
                passed: false,
                detail: "no data".into(),
            },
            Some(MetricValue::Error(e)) => CheckRecord {
                name: metric.name.clone(),
                value: None,
                min,
                max,
                passed: false,
                detail: format!("query failed: {e}"),
            },
            Some(MetricValue::Structured(v)) => CheckRecord {
                name: metric.name.clone(),
                value: None,
                min,
                max,
                passed: false,
                detail: format!("expected a number, found {v}"),
            },
            Some(MetricValue::Value(v)) => {
                let v = *v;
                let detail = if v.is_nan() {
                    "NaN".to_string()
                } else if v.is_infinite() {
                    // Prometheus's spelling; no bound admits it.
                    if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
                } else if min.is_some_and(|m| v < m) {
                    format!("{} < {}", fmt_num(v), fmt_num(min.unwrap_or_default()))
                } else if max.is_some_and(|m| v > m) {
                    format!("{} > {}", fmt_num(v), fmt_num(max.unwrap_or_default()))
                } else {
                    bound_text(v, min, max)
                };
                CheckRecord {
                    name: metric.name.clone(),
                    value: v.is_finite().then_some(v),
                    min,
                    max,
                    passed: metric.range.admits(v),
                    detail,
                }
            }
        };
        records.push(Judged {
            kind: CheckKind::Metric,
            record,
        });
    }
    for hook in canary
        .analysis
        .webhooks
        .iter()
        .filter(|w| w.kind == WebhookKind::Rollout)
    {
        let observed = obs
            .hooks(WebhookKind::Rollout)
            .find(|o| o.name == hook.name);
        let (passed, detail) = match observed.map(|o| &o.outcome) {
            Some(Ok(())) => (true, "ok".to_string()),
            Some(Err(e)) => (false, e.clone()),
            None => (false, "not called".to_string()),
        };
        records.push(webhook(CheckRecord {
            name: hook.name.clone(),
            value: None,
            min: None,
            max: None,
            passed,
            detail,
        }));
    }
    let all = records.iter().all(|r| r.record.passed);
    (records, all)
}

fn bound_text(v: f64, min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(lo), Some(hi)) => format!("{} in {}..{}", fmt_num(v), fmt_num(lo), fmt_num(hi)),
        (Some(lo), None) => format!("{} >= {}", fmt_num(v), fmt_num(lo)),
        (None, Some(hi)) => format!("{} <= {}", fmt_num(v), fmt_num(hi)),
        (None, None) => fmt_num(v),
    }
}

fn failed_summary(records: &[CheckRecord]) -> String {
    records
        .iter()
        .filter(|r| !r.passed)
        .map(|r| format!("{} {}", r.name, r.detail))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Records a failed check; at `threshold` the decision is a rollback.
fn failed_check<R>(
    canary: &Canary<R>,
    status: &Status,
    judged: Vec<Judged>,
    now: Timestamp,
) -> Decision {
    let summary = failed_summary(&records(&judged));
    let mut next = status.clone();
    next.failed_checks = next.failed_checks.saturating_add(1);
    next.last_failed_check = Some(now);
    next.checks = records(&judged);
    let threshold = canary.analysis.threshold;
    if next.failed_checks >= threshold {
        let mut decision = rollback(
            canary,
            &next,
            format!("failed checks threshold reached {threshold} ({summary})"),
            RollbackCause::FailedChecks {
                failed: next.failed_checks,
            },
            now,
        );
        decision.checks = judged;
        return decision;
    }
    let event = format!(
        "Halt {} advancement: {summary} (failed checks {}/{threshold})",
        dotted(canary),
        next.failed_checks
    );
    Decision {
        checks: judged,
        sealed: Sealed,
        ..change(
            Action::FailedCheck,
            next,
            event,
            Some(after(now, canary.analysis.interval)),
        )
    }
}

/// Progressing and WaitingApproval: restart on a new revision, judge, then advance.
fn progressing<R>(
    canary: &Canary<R>,
    status: &Status,
    obs: &Observations,
    now: Timestamp,
) -> Decision {
    if let Some(decision) = revision_changed(canary, status, obs, now) {
        return decision;
    }
    if let Some(decision) = stopped(canary, status, obs, now) {
        return decision;
    }
    if status.step == 0 && status.iterations == 0 {
        return start_analysis(canary, status, obs, now);
    }
    // A step holds for its pause; metrics are judged every interval meanwhile.
    let clock = StepClock::of(canary, status, now);
    if let Some(due) = clock.judgement_due() {
        return hold(
            status,
            Some(due),
            format!("{} holds at step {}", dotted(canary), status.step),
        );
    }
    if crate::judged::waits_on_judge(status) {
        return hold(
            status,
            Some(after(now, canary.analysis.interval)),
            format!(
                "Halt {} advancement waiting for approval (judge marginal)",
                dotted(canary)
            ),
        );
    }
    let (mut judged, passed) = judge(canary, obs);
    let observed = |name: &str| {
        obs.metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| &m.value)
    };
    let analysed = crate::argo_analysis::judge_step_at(
        &canary.analysis.argo,
        status.step,
        &status.analysis,
        observed,
        Some(crate::argo_analysis::JudgedAt {
            now,
            step_started: clock_start(canary, status),
        }),
    );
    let with_analysis;
    let mut measured_now = false;
    let status = match analysed {
        None => status,
        Some(a) => {
            judged.extend(a.judged.iter().cloned());
            let mut next = status.clone();
            next.analysis = a.history;
            with_analysis = next;
            let measured = !a.judged.is_empty();
            measured_now = measured;
            match argo_step(
                canary,
                &with_analysis,
                judged.clone(),
                a.phase,
                &a.summary,
                measured,
                passed,
                now,
            ) {
                Some(decision) => return decision,
                None => &with_analysis,
            }
        }
    };
    let judge_step = canary.analysis.judge.as_ref().map(|spec| {
        let check = crate::judged::judge_check(spec, obs.judge.as_ref());
        judged.push(check.judged);
        check.step
    });
    match judge_step {
        Some(JudgeStep::Critical) => return judge_critical(canary, status, judged, now),
        Some(JudgeStep::Marginal) if passed => return judge_marginal(canary, status, judged, now),
        Some(JudgeStep::Fail | JudgeStep::Marginal) => {
            return failed_check(canary, status, judged, now)
        }
        Some(JudgeStep::Pass) | None => {}
    }
    if !passed {
        return failed_check(canary, status, judged, now);
    }
    let decision = checks_passed(canary, status, obs, &clock, judged.clone(), now);
    if measured_now && decision.action == Action::Hold {
        // The analysis measured: its measurements are kept even while the step holds.
        return measured_hold(canary, status, judged, now);
    }
    decision
}

/// What a Rollout's analysis run decides at a step, as Argo does: Failed or Error aborts back
/// to stable, Inconclusive waits for a human (Argo pauses the rollout), Running holds the step
/// with its measurements recorded; `None` (Successful) lets the step's other rules decide.
/// `status` holds the analysis after this judgement.
#[allow(clippy::too_many_arguments)]
fn argo_step<R>(
    canary: &Canary<R>,
    status: &Status,
    judged: Vec<Judged>,
    phase: crate::argo_analysis::Phase,
    summary: &str,
    measured: bool,
    passed: bool,
    now: Timestamp,
) -> Option<Decision> {
    use crate::argo_analysis::Phase as Run;
    match phase {
        Run::Failed | Run::Error => Some(failed_now(canary, status, judged, now, |_| {
            format!("analysis run {phase:?}: {summary}")
        })),
        Run::Inconclusive if status.phase == Phase::WaitingApproval => Some(hold(
            status,
            Some(after(now, canary.analysis.interval)),
            format!(
                "Halt {} advancement waiting for approval (analysis Inconclusive)",
                dotted(canary)
            ),
        )),
        Run::Inconclusive => {
            let gate = next_gate(canary, status).unwrap_or(Gate::TrafficIncrease);
            let why = format!(": analysis Inconclusive ({summary})");
            Some(wait_approval(canary, status, gate, judged, why, now))
        }
        Run::Pending | Run::Running if passed && measured => {
            Some(measured_hold(canary, status, judged, now))
        }
        Run::Pending | Run::Running if passed => Some(hold(
            status,
            Some(after(now, canary.analysis.interval)),
            format!(
                "{} analysis running at step {}",
                dotted(canary),
                status.step
            ),
        )),
        Run::Pending | Run::Running | Run::Successful => None,
    }
}

/// The analysis took measurements and runs on: commit them (the status keeps them, the
/// commit's trailers show them), and judge again an interval later.
fn measured_hold<R>(
    canary: &Canary<R>,
    status: &Status,
    judged: Vec<Judged>,
    now: Timestamp,
) -> Decision {
    let mut next = status.clone();
    next.checks = records(&judged);
    let shown = judged
        .iter()
        .map(|j| format!("{} {}", j.record.name, j.record.detail))
        .collect::<Vec<_>>()
        .join(", ");
    Decision {
        checks: judged,
        sealed: Sealed,
        ..change(
            Action::Measured,
            next,
            format!(
                "{} analysis running at step {}: {shown}",
                dotted(canary),
                status.step
            ),
            Some(after(now, canary.analysis.interval)),
        )
    }
}

/// A critical metric of the judge failed: roll back now, whatever the threshold.
fn judge_critical<R>(
    canary: &Canary<R>,
    status: &Status,
    judged: Vec<Judged>,
    now: Timestamp,
) -> Decision {
    failed_now(canary, status, judged, now, |checks| {
        format!(
            "the judge found a critical failure ({})",
            failed_summary(checks)
        )
    })
}

/// A failed check that rolls back now, whatever the threshold; `reason` is made from the
/// checks' records.
fn failed_now<R>(
    canary: &Canary<R>,
    status: &Status,
    judged: Vec<Judged>,
    now: Timestamp,
    reason: impl FnOnce(&[CheckRecord]) -> String,
) -> Decision {
    let mut next = status.clone();
    next.failed_checks = next.failed_checks.saturating_add(1);
    next.last_failed_check = Some(now);
    next.checks = records(&judged);
    let mut decision = rollback(
        canary,
        &next,
        reason(&next.checks),
        RollbackCause::FailedChecks {
            failed: next.failed_checks,
        },
        now,
    );
    decision.checks = judged;
    decision
}

/// The judgement is marginal: the step waits for a human's approval (`sluice approve`, or the
/// approval pull request), which advances it as any approval does.
fn judge_marginal<R>(
    canary: &Canary<R>,
    status: &Status,
    judged: Vec<Judged>,
    now: Timestamp,
) -> Decision {
    let gate = next_gate(canary, status).unwrap_or(Gate::TrafficIncrease);
    let summary = failed_summary(&records(&judged));
    let why = format!(": the judge is marginal ({summary})");
    wait_approval(canary, status, gate, judged, why, now)
}

/// The source moved mid-analysis: back at the promoted revision (cancel), or a newer one
/// (restart); `None` while the canary's revision is the one under analysis.
fn revision_changed<R>(
    canary: &Canary<R>,
    status: &Status,
    obs: &Observations,
    now: Timestamp,
) -> Option<Decision> {
    if status.canary_revision.as_deref() == Some(&obs.revision) {
        return None;
    }
    let name = dotted(canary);
    if obs.revision == status.promoted_revision {
        let mut next = reset_analysis(status, &obs.revision, now);
        next.phase = Phase::Initialized;
        next.canary_revision = None;
        return Some(change(
            Action::Cancel,
            next,
            format!("{name} is back at the promoted revision; analysis cancelled, all traffic to the primary"),
            None,
        ));
    }
    let next = reset_analysis(status, &obs.revision, now);
    Some(change(
        Action::Restart,
        next,
        format!("New revision detected! Restarting analysis for {name}"),
        Some(after(now, canary.analysis.interval)),
    ))
}

/// What stops the analysis before any check: a rollback webhook, the failed-checks threshold,
/// the progress deadline, or a last change not applied yet (a hold).
fn stopped<R>(
    canary: &Canary<R>,
    status: &Status,
    obs: &Observations,
    now: Timestamp,
) -> Option<Decision> {
    if obs.hooks(WebhookKind::Rollback).any(|o| o.outcome.is_ok()) {
        return Some(rollback(
            canary,
            status,
            "rollback webhook answered yes".into(),
            RollbackCause::Webhook,
            now,
        ));
    }
    if status.failed_checks >= canary.analysis.threshold {
        return Some(rollback(
            canary,
            status,
            format!(
                "failed checks threshold reached {}",
                canary.analysis.threshold
            ),
            RollbackCause::FailedChecks {
                failed: status.failed_checks,
            },
            now,
        ));
    }
    until_live(
        canary,
        status,
        obs,
        now,
        "waits until the last change is applied",
        || {
            rollback(
                canary,
                status,
                format!(
                    "progress deadline exceeded: the last change was not applied within {}s",
                    canary.progress_deadline.as_secs()
                ),
                RollbackCause::ProgressDeadline,
                now,
            )
        },
    )
}

/// While the last change is not live (`obs.applied`): a hold until the progress deadline
/// (saying the canary `waits`), then the decision `past` makes; `None` once it is live.
fn until_live<R>(
    canary: &Canary<R>,
    status: &Status,
    obs: &Observations,
    now: Timestamp,
    waits: &str,
    past: impl FnOnce() -> Decision,
) -> Option<Decision> {
    if obs.applied {
        return None;
    }
    let deadline = after(status.step_started, canary.progress_deadline);
    if now >= deadline {
        return Some(past());
    }
    Some(hold(
        status,
        Some(deadline),
        format!("{} {waits}", dotted(canary)),
    ))
}

/// The step's checks passed: hold for the rest of the pause, wait for the gate to the next
/// change, or advance.
fn checks_passed<R>(
    canary: &Canary<R>,
    status: &Status,
    obs: &Observations,
    clock: &StepClock,
    judged: Vec<Judged>,
    now: Timestamp,
) -> Decision {
    let name = dotted(canary);
    let interval = canary.analysis.interval;
    let next_gate = next_gate(canary, status);
    let gate_open = match clock.pause_end {
        // Only a human approval (a manual operation) moves past this pause.
        PauseEnd::Approval => false,
        PauseEnd::At(end) if now < end => {
            // Checks pass; the pause is still running. Nothing changes until it ends.
            return hold(
                status,
                Some(end),
                format!("{name} checks pass; holding at step {}", status.step),
            );
        }
        PauseEnd::At(_) => next_gate.is_none_or(|gate| !gate_closed(canary, obs, gate)),
    };
    if gate_open {
        return Decision {
            checks: judged.clone(),
            sealed: Sealed,
            ..advance(canary, status, records(&judged), now)
        };
    }
    let gate = next_gate.unwrap_or(Gate::TrafficIncrease);
    if status.phase == Phase::WaitingApproval {
        return hold(
            status,
            Some(after(now, interval)),
            format!("Halt {name} advancement waiting for approval"),
        );
    }
    wait_approval(canary, status, gate, judged, String::new(), now)
}

/// The step waits at `gate` for a human's approval, keeping the checks it judged; `why` ends
/// the event (empty for a gate the spec asks for).
fn wait_approval<R>(
    canary: &Canary<R>,
    status: &Status,
    gate: Gate,
    judged: Vec<Judged>,
    why: String,
    now: Timestamp,
) -> Decision {
    let mut next = status.clone();
    next.phase = Phase::WaitingApproval;
    next.phase_since = now;
    next.waiting_for = Some(gate);
    next.checks = records(&judged);
    Decision {
        checks: judged,
        sealed: Sealed,
        ..change(
            Action::WaitApproval(gate),
            next,
            format!(
                "Halt {} advancement waiting for approval ({}){why}",
                dotted(canary),
                gate_name(gate)
            ),
            Some(after(now, canary.analysis.interval)),
        )
    }
}

/// When the current step ends its pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PauseEnd {
    At(Timestamp),
    /// Never by itself: the step holds until a human approves the next change.
    Approval,
}

/// The timing rule of the step under analysis: when its checks are judged and when its pause
/// ends. `decide` (whether to judge now) and `wants` (whether to observe now) both read it, so
/// what is observed and what is judged cannot drift apart.
#[derive(Debug, Clone, Copy)]
struct StepClock {
    now: Timestamp,
    /// The regular judgement: an interval after the step's clock started or after the last
    /// failed check, whichever is later.
    check_due: Timestamp,
    pause_end: PauseEnd,
    /// A check failed less than an interval ago: nothing is judged before `check_due`,
    /// whatever the pause.
    recently_failed: bool,
}

impl StepClock {
    fn of<R>(canary: &Canary<R>, status: &Status, now: Timestamp) -> StepClock {
        let interval = canary.analysis.interval;
        let start = clock_start(canary, status);
        let check_from = status.last_failed_check.map_or(start, |t| t.max(start));
        // Before the first step the pause is one interval (`current_pause`), so the first
        // judgement is due an interval after the clock started or after a failed pre-rollout.
        let pause_end = match current_pause(canary, status) {
            Pause::Interval => PauseEnd::At(after(start, interval)),
            Pause::For(d) => PauseEnd::At(after(start, d)),
            Pause::Approval => PauseEnd::Approval,
        };
        StepClock {
            now,
            check_due: after(check_from, interval),
            pause_end,
            recently_failed: status
                .last_failed_check
                .is_some_and(|t| now < after(t, interval)),
        }
    }

    /// `None` when checks are judged now; otherwise the earliest time they will be. Checks are
    /// judged when the regular judgement is due or the pause has ended, but never within an
    /// interval of a failed check.
    fn judgement_due(&self) -> Option<Timestamp> {
        let pause_over = matches!(self.pause_end, PauseEnd::At(end) if self.now >= end);
        if !self.recently_failed && (self.now >= self.check_due || pause_over) {
            return None;
        }
        match self.pause_end {
            PauseEnd::At(end) if !self.recently_failed => Some(end.min(self.check_due)),
            PauseEnd::At(_) | PauseEnd::Approval => Some(self.check_due),
        }
    }
}

fn gate_name(gate: Gate) -> &'static str {
    match gate {
        Gate::Rollout => "rollout",
        Gate::TrafficIncrease => "traffic increase",
        Gate::Promotion => "promotion",
    }
}

fn steps<R>(canary: &Canary<R>) -> &[Step] {
    match &canary.analysis.strategy {
        Strategy::Canary { steps } => steps,
        Strategy::BlueGreen { .. } | Strategy::AB { .. } => &[],
    }
}

/// The pause of the step the canary is at (blue/green and A/B iterations hold one interval).
fn current_pause<R>(canary: &Canary<R>, status: &Status) -> Pause {
    let index = status.step as usize;
    match &canary.analysis.strategy {
        Strategy::Canary { steps } => index
            .checked_sub(1)
            .and_then(|i| steps.get(i))
            .map_or(Pause::Interval, |s| s.pause),
        Strategy::BlueGreen { .. } | Strategy::AB { .. } => Pause::Interval,
    }
}

/// The gate that guards the next change from the current step.
fn next_gate<R>(canary: &Canary<R>, status: &Status) -> Option<Gate> {
    match &canary.analysis.strategy {
        Strategy::Canary { steps } => {
            if (status.step as usize) < steps.len() {
                Some(Gate::TrafficIncrease)
            } else {
                Some(Gate::Promotion)
            }
        }
        Strategy::BlueGreen { iterations } | Strategy::AB { iterations, .. } => {
            // A Rollout's blue/green asks once, before the switch (Argo's promotion).
            if status.iterations < *iterations || rollout_switched(canary, status) {
                None
            } else {
                Some(Gate::Promotion)
            }
        }
    }
}

/// The first analysis tick: pre-rollout webhooks, then the first weight without judging metrics.
fn start_analysis<R>(
    canary: &Canary<R>,
    status: &Status,
    obs: &Observations,
    now: Timestamp,
) -> Decision {
    let name = dotted(canary);
    if let Some(due) = StepClock::of(canary, status, now).judgement_due() {
        return hold(
            status,
            Some(due),
            format!("{name} starts its analysis at the next interval"),
        );
    }
    let mut judged = Vec::new();
    for hook in canary
        .analysis
        .webhooks
        .iter()
        .filter(|w| w.kind == WebhookKind::PreRollout)
    {
        let outcome = obs
            .hooks(WebhookKind::PreRollout)
            .find(|o| o.name == hook.name)
            .map(|o| o.outcome.clone())
            .unwrap_or_else(|| Err("not called".into()));
        judged.push(webhook(CheckRecord {
            name: hook.name.clone(),
            value: None,
            min: None,
            max: None,
            passed: outcome.is_ok(),
            detail: outcome.err().unwrap_or_else(|| "ok".into()),
        }));
    }
    if judged.iter().any(|r| !r.record.passed) {
        return failed_check(canary, status, judged, now);
    }
    let started = format!("Starting canary analysis for {name}");
    let mut decision = match &canary.analysis.strategy {
        Strategy::Canary { .. } => {
            if gate_closed(canary, obs, Gate::TrafficIncrease) {
                let mut next = status.clone();
                next.phase = Phase::WaitingApproval;
                next.phase_since = now;
                next.waiting_for = Some(Gate::TrafficIncrease);
                if status.phase == Phase::WaitingApproval {
                    return hold(
                        status,
                        Some(after(now, canary.analysis.interval)),
                        format!("Halt {name} advancement waiting for approval"),
                    );
                }
                change(
                    Action::WaitApproval(Gate::TrafficIncrease),
                    next,
                    format!("Halt {name} advancement waiting for approval (traffic increase)"),
                    Some(after(now, canary.analysis.interval)),
                )
            } else {
                Decision {
                    checks: judged.clone(),
                    sealed: Sealed,
                    ..advance(canary, status, records(&judged), now)
                }
            }
        }
        Strategy::BlueGreen { iterations } | Strategy::AB { iterations, .. } => {
            let mut next = status.clone();
            next.iterations = 1;
            next.step_started = now;
            next.phase = Phase::Progressing;
            next.checks = records(&judged);
            Decision {
                checks: judged.clone(),
                sealed: Sealed,
                ..change(
                    Action::AdvanceIteration {
                        done: 1,
                        of: *iterations,
                    },
                    next,
                    format!("Advance {name} canary iteration 1/{iterations}"),
                    Some(after(now, canary.analysis.interval)),
                )
            }
        }
    };
    if decision.commits() {
        decision.events.insert(0, started);
    }
    decision
}

/// Moves past the current step: next weight, next iteration, or promotion.
pub(crate) fn advance<R>(
    canary: &Canary<R>,
    status: &Status,
    records: Vec<CheckRecord>,
    now: Timestamp,
) -> Decision {
    let mut next = status.clone();
    next.checks = records;
    next.analysis = crate::argo_analysis::after_step(&canary.analysis.argo, &status.analysis);
    next.phase = Phase::Progressing;
    next.waiting_for = None;
    next.step_started = now;
    next.last_failed_check = None;
    if status.phase != Phase::Progressing {
        next.phase_since = now;
    }
    let stepped = match &canary.analysis.strategy {
        Strategy::Canary { steps } => next_step(canary, status, next.clone(), steps, now),
        Strategy::BlueGreen { iterations } => {
            next_iteration(canary, status, next.clone(), *iterations, now)
                .or_else(|| all_to_canary(canary, status, next.clone(), now))
        }
        Strategy::AB { iterations, .. } => {
            next_iteration(canary, status, next.clone(), *iterations, now)
        }
    };
    stepped.unwrap_or_else(|| promote(canary, status, next, now))
}

/// The next canary step's weight, if a step is left.
fn next_step<R>(
    canary: &Canary<R>,
    status: &Status,
    mut next: Status,
    steps: &[Step],
    now: Timestamp,
) -> Option<Decision> {
    let step = steps.get(status.step as usize)?;
    next.step = status.step + 1;
    next.canary_weight = step.weight;
    next.primary_weight = 100 - step.weight;
    let interval = canary.analysis.interval;
    let wake = match step.pause {
        Pause::Interval | Pause::Approval => after(now, interval),
        Pause::For(d) => after(now, d.min(interval)),
    };
    Some(change(
        Action::AdvanceCanary {
            from: status.canary_weight,
            to: step.weight,
        },
        next,
        format!("Advance {} canary weight {}", dotted(canary), step.weight),
        Some(wake),
    ))
}

/// The next blue/green or A/B iteration, if one is left.
fn next_iteration<R>(
    canary: &Canary<R>,
    status: &Status,
    mut next: Status,
    iterations: u32,
    now: Timestamp,
) -> Option<Decision> {
    if status.iterations >= iterations {
        return None;
    }
    next.iterations = status.iterations + 1;
    Some(change(
        Action::AdvanceIteration {
            done: next.iterations,
            of: iterations,
        },
        next,
        format!(
            "Advance {} canary iteration {}/{iterations}",
            dotted(canary),
            status.iterations + 1
        ),
        Some(after(now, canary.analysis.interval)),
    ))
}

/// Blue/green after its iterations: all traffic to the canary, unless it has it already.
fn all_to_canary<R>(
    canary: &Canary<R>,
    status: &Status,
    mut next: Status,
    now: Timestamp,
) -> Option<Decision> {
    if status.canary_weight >= 100 {
        return None;
    }
    next.canary_weight = 100;
    next.primary_weight = 0;
    if let Target::Rollout { .. } = canary.target {
        // Argo's switch of the activeService is a step of its own: the postPromotionAnalysis
        // measures there.
        next.step = status.step + 1;
    }
    let name = dotted(canary);
    Some(change(
        Action::AdvanceCanary {
            from: status.canary_weight,
            to: 100,
        },
        next,
        if canary.analysis.mirror {
            format!("Stop traffic mirroring and route all traffic to canary {name}")
        } else {
            format!("Routing all traffic to canary {name}")
        },
        Some(after(now, canary.analysis.interval)),
    ))
}

/// A Rollout's blue/green after its switch: the activeService selects the canary workload.
fn rollout_switched<R>(canary: &Canary<R>, status: &Status) -> bool {
    matches!(canary.target, Target::Rollout { .. }) && status.canary_weight >= 100
}

/// The last step held and passed: the primary takes the canary's revision.
fn promote<R>(canary: &Canary<R>, status: &Status, mut next: Status, now: Timestamp) -> Decision {
    let name = dotted(canary);
    next.phase = Phase::Promoting;
    next.phase_since = now;
    // Argo stops a background analysis at promotion.
    next.analysis.clear();
    if let Some(revision) = &status.canary_revision {
        next.promoted_revision = revision.clone();
    }
    let event = match &canary.target {
        Target::RouteOnly { .. } => format!(
            "Promoting {name}: revision {} passed its analysis",
            crate::model::short_revision(status.canary_revision.as_deref().unwrap_or_default())
        ),
        Target::Source { .. } | Target::TargetRef { .. } => format!(
            "Copying {name} template spec to {}-primary.{}",
            canary.base_name(),
            canary.id.namespace
        ),
        Target::Rollout { .. } => format!(
            "Copying {name} template spec to {}-stable.{}",
            canary.base_name(),
            canary.id.namespace
        ),
    };
    let wake = after(now, canary.analysis.interval);
    change(Action::Promote, next, event, Some(wake))
}

fn promoting<R>(canary: &Canary<R>, status: &Status, now: Timestamp) -> Decision {
    let name = dotted(canary);
    let interval = canary.analysis.interval;
    let due = after(clock_start(canary, status), interval);
    if now < due {
        return hold(
            status,
            Some(due),
            format!("{name} promotion continues at the next interval"),
        );
    }
    let mut next = status.clone();
    next.step_started = now;
    // The promoted revision runs on the primary once it took the canary's spec. In route-only
    // mode nothing is copied: the promoted revision stays on the canary service, which takes
    // the rest of the traffic now and becomes the stable one when the promotion finalises.
    // Raising the stable service instead would send traffic back to the old revision.
    let route_only = matches!(canary.target, Target::RouteOnly { .. });
    // The weight of the backend that does not run the promoted revision.
    let unpromoted = if route_only {
        status.primary_weight
    } else {
        status.canary_weight
    };
    let weights = promotion_primary_weights(unpromoted, canary.analysis.step_weight_promotion);
    let progressive = canary.analysis.step_weight_promotion.is_some_and(|s| s > 0);
    let promoted = weights.first().copied().unwrap_or(100);
    if route_only {
        next.canary_weight = promoted;
        next.primary_weight = 100 - promoted;
    } else {
        next.primary_weight = promoted;
        next.canary_weight = 100 - promoted;
    }
    if promoted == 100 {
        next.phase = Phase::Finalising;
        next.phase_since = now;
    }
    let event = match (&canary.target, progressive) {
        (Target::RouteOnly { .. }, true) => {
            format!("Advance {name} promoted service weight {promoted}")
        }
        (Target::RouteOnly { .. }, false) => {
            format!("Routing all traffic to the promoted service of {name}")
        }
        (Target::Source { .. } | Target::TargetRef { .. } | Target::Rollout { .. }, true) => {
            format!("Advance {name} primary weight {promoted}")
        }
        (Target::Source { .. } | Target::TargetRef { .. } | Target::Rollout { .. }, false) => {
            format!("Routing all traffic to primary {name}")
        }
    };
    change(
        Action::AdvancePrimary { weight: promoted },
        next,
        event,
        Some(after(now, interval)),
    )
}

fn finalising<R>(canary: &Canary<R>, status: &Status, now: Timestamp) -> Decision {
    let name = dotted(canary);
    let due = after(clock_start(canary, status), canary.analysis.interval);
    if now < due {
        return hold(
            status,
            Some(due),
            format!("{name} finalises at the next interval"),
        );
    }
    let mut next = status.clone();
    next.phase = Phase::Succeeded;
    next.phase_since = now;
    next.step_started = now;
    next.canary_weight = 0;
    next.primary_weight = 100;
    next.waiting_for = None;
    swap_stable(canary, &mut next);
    change(
        Action::Finalise,
        next,
        format!("Promotion completed! Scaling down {name}"),
        None,
    )
}

/// Promoting and Finalising while the last change is not live (not applied by the GitOps
/// engine, or the primary or canary not ready; always live without a sync target): nothing
/// moves, as Flagger waits for `IsPrimaryReady`, so no traffic goes to a primary that is not
/// ready and the canary is not scaled down. Past the progress deadline the promotion failed.
fn promotion_not_live<R>(
    canary: &Canary<R>,
    status: &Status,
    obs: &Observations,
    now: Timestamp,
) -> Option<Decision> {
    let waits = "promotion waits until the last change is applied and the primary is ready";
    until_live(canary, status, obs, now, waits, || {
        promotion_failed(canary, status, now)
    })
}

/// Flagger 1.44's `handleFailedPromotion` (fluxcd/flagger#1931, commits 8eaa0408 and
/// e461dd9b): a promotion whose primary is not ready by the progress deadline is not rolled
/// back, since the primary already runs the new revision and the canary is its only healthy
/// copy. Phase Failed, all traffic to the canary, which keeps running until a new revision.
fn promotion_failed<R>(canary: &Canary<R>, status: &Status, now: Timestamp) -> Decision {
    let next = failed(status, now, 100);
    let reason = format!(
        "the last change was not applied, or the primary not ready, within {}s",
        canary.progress_deadline.as_secs()
    );
    let event = format!(
        "Promotion of {} failed, primary not ready: {reason}",
        dotted(canary)
    );
    change(Action::PromotionFailed { reason }, next, event, None)
}

/// The steps a canary walks (empty for blue/green and A/B); for `plan` and renderers.
pub fn canary_steps<R>(canary: &Canary<R>) -> &[Step] {
    steps(canary)
}

/// What the adapters should observe for a canary before deciding at `now`: metric queries and
/// webhook kinds. A superset of what `decide` will judge, so nothing it judges goes unobserved,
/// while idle canaries cost no queries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wants {
    pub metrics: bool,
    pub hooks: Vec<WebhookKind>,
}

pub fn wants<R>(
    canary: &Canary<R>,
    status: Option<&Status>,
    revision: &str,
    now: Timestamp,
) -> Wants {
    let Some(status) = status else {
        return Wants::default();
    };
    let declared = |kinds: &[WebhookKind]| -> Vec<WebhookKind> {
        kinds
            .iter()
            .copied()
            .filter(|k| canary.analysis.webhooks.iter().any(|w| w.kind == *k))
            .collect()
    };
    match status.phase {
        Phase::Initializing
        | Phase::Initialized
        | Phase::Succeeded
        | Phase::Failed
        | Phase::Waiting => {
            let failed_again = status.phase == Phase::Failed
                && status.canary_revision.as_deref() == Some(revision);
            if revision != status.promoted_revision && !failed_again && !canary.suspend {
                Wants {
                    metrics: false,
                    hooks: declared(&[WebhookKind::ConfirmRollout]),
                }
            } else {
                Wants::default()
            }
        }
        Phase::Progressing | Phase::WaitingApproval => {
            if status.canary_revision.as_deref() != Some(revision) || canary.suspend {
                return Wants::default();
            }
            if StepClock::of(canary, status, now).judgement_due().is_some() {
                return Wants {
                    metrics: false,
                    hooks: declared(&[WebhookKind::Rollback]),
                };
            }
            if status.step == 0 && status.iterations == 0 {
                return Wants {
                    metrics: false,
                    hooks: declared(&[
                        WebhookKind::PreRollout,
                        WebhookKind::ConfirmTrafficIncrease,
                        WebhookKind::Rollback,
                    ]),
                };
            }
            let gate = match next_gate(canary, status) {
                Some(Gate::Promotion) => WebhookKind::ConfirmPromotion,
                Some(Gate::TrafficIncrease) | Some(Gate::Rollout) | None => {
                    WebhookKind::ConfirmTrafficIncrease
                }
            };
            Wants {
                metrics: !canary.analysis.metrics.is_empty()
                    || canary.analysis.judge.is_some()
                    || canary
                        .analysis
                        .argo
                        .iter()
                        .any(|g| g.measures_at(status.step)),
                hooks: declared(&[WebhookKind::Rollout, WebhookKind::Rollback, gate]),
            }
        }
        Phase::Promoting | Phase::Finalising => Wants::default(),
    }
}
