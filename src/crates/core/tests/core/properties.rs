//! Properties of `decide` over generated canaries (every schedule form, blue/green, A/B,
//! thresholds, gates, settle and sync) and generated worlds (metric and webhook outcomes,
//! revisions, whether the last commit is applied, the clock, human approvals).
//!
//! Runs are bounded: a few hundred cases, walks of at most a few dozen decisions, and drives
//! that give up after a fixed number of decisions. Nothing here reads the wall clock.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use sluice_core::decide::{decide, wants, Action, Decision};
use sluice_core::model::{
    Approvals, Canary, Format, Strategy as Rollout, Target, ThresholdRange, WebhookKind,
};
use sluice_core::observe::{MetricObservation, MetricValue, Observations, WebhookObservation};
use sluice_core::operate::{operate, Operation};
use sluice_core::schedule::Pause;
use sluice_core::status::{Phase, Status};

use crate::builders::{canary, t, Schedule};

const CASES: u32 = 256;
/// Decisions a drive may take to leave a phase: a 100-step schedule with a 100-step
/// promotion and a hold per step stays well below it.
const DRIVE_LIMIT: usize = 2_000;

const HOOK_KINDS: [WebhookKind; 8] = [
    WebhookKind::ConfirmRollout,
    WebhookKind::PreRollout,
    WebhookKind::Rollout,
    WebhookKind::ConfirmTrafficIncrease,
    WebhookKind::ConfirmPromotion,
    WebhookKind::PostRollout,
    WebhookKind::Rollback,
    WebhookKind::Event,
];
/// The bit of the rollback hook's answer in `Tick::hooks` (`HOOK_KINDS[6]`).
const ROLLBACK: u8 = 1 << 6;

fn later(now: Timestamp, d: Duration) -> Timestamp {
    now.checked_add(SignedDuration::try_from(d).expect("a test duration in range"))
        .expect("a test time in range")
}

// ---- generated canaries -------------------------------------------------------------------

fn pause() -> impl Strategy<Value = Pause> {
    prop_oneof![
        3 => Just(Pause::Interval),
        // Shorter and longer than the interval, down to a millisecond. Zero is refused at load
        // time: a step that holds for nothing is never judged on its own traffic.
        2 => prop_oneof![1u64..=1_000, 1_000u64..=300_000]
            .prop_map(|ms| Pause::For(Duration::from_millis(ms))),
        1 => Just(Pause::Approval),
    ]
}

fn increasing(max_weight: u8) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::btree_set(1u8..=max_weight, 1..=6).prop_map(|s| s.into_iter().collect())
}

/// A schedule and the format that can express it (native steps and native stepWeights stay
/// within 0..=100; Flagger's stepWeights may go past 100 and are capped).
fn schedule() -> impl Strategy<Value = (Format, Schedule)> {
    let format = prop_oneof![Just(Format::Flagger), Just(Format::Native)];
    prop_oneof![
        (format.clone(), 1u8..=100)
            .prop_flat_map(|(f, step)| (Just(f), Just(step), step..=100))
            .prop_map(|(f, step, max)| (f, Schedule::StepWeight { step, max })),
        increasing(200).prop_map(|w| (Format::Flagger, Schedule::StepWeights(w))),
        increasing(100).prop_map(|w| (Format::Native, Schedule::StepWeights(w))),
        increasing(100)
            .prop_flat_map(|w| {
                let n = w.len();
                (Just(w), prop::collection::vec(pause(), n))
            })
            .prop_map(|(w, p)| (
                Format::Native,
                Schedule::Steps(
                    w.into_iter()
                        .zip(p)
                        .map(|(weight, pause)| sluice_core::schedule::Step { weight, pause })
                        .collect()
                )
            )),
        (format.clone(), 1u32..=5).prop_map(|(f, n)| (f, Schedule::BlueGreen(n))),
        (format, 1u32..=5).prop_map(|(f, n)| (f, Schedule::AB(n))),
    ]
}

fn range() -> impl Strategy<Value = ThresholdRange> {
    prop_oneof![
        (0.0f64..1000.0).prop_map(|min| ThresholdRange {
            min: Some(min),
            max: None
        }),
        (0.0f64..1000.0).prop_map(|max| ThresholdRange {
            min: None,
            max: Some(max)
        }),
        (0.0f64..1000.0, 0.0f64..100.0).prop_map(|(min, width)| ThresholdRange {
            min: Some(min),
            max: Some(min + width)
        }),
    ]
}

fn approvals() -> impl Strategy<Value = Approvals> {
    (
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(r, t, p)| Approvals {
            before_rollout: r,
            before_traffic_increase: t,
            before_promotion: p,
        })
}

fn arb_canary() -> impl Strategy<Value = Canary<()>> {
    (
        (
            schedule(),
            (100u64..=120_000).prop_map(Duration::from_millis),
            1u32..=5,
            prop::option::of(0u8..=100),
            prop::collection::vec(range(), 0..=2),
            prop::collection::vec(prop::bool::weighted(0.25), HOOK_KINDS.len()),
        ),
        (
            approvals(),
            prop::bool::weighted(0.1),
            (1u64..=1200).prop_map(Duration::from_secs),
            prop_oneof![Just(0u64), 0u64..=60].prop_map(Duration::from_secs),
            any::<bool>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                ((format, schedule), interval, threshold, promotion, ranges, hooks),
                (approvals, skip, deadline, settle, sync, route_only),
            )| {
                let mut b = canary()
                    .schedule(schedule)
                    .interval(interval)
                    .threshold(threshold)
                    .step_weight_promotion(promotion)
                    .approvals(approvals)
                    .skip_analysis(skip)
                    .progress_deadline(deadline)
                    .settle(settle)
                    .sync(sync);
                if format == Format::Native {
                    b = b.native();
                }
                if route_only {
                    b = b.route_only();
                }
                for (i, r) in ranges.into_iter().enumerate() {
                    b = b.metric(&format!("metric-{i}"), r);
                }
                for (kind, declared) in HOOK_KINDS.iter().zip(hooks) {
                    if declared {
                        b = b.webhook(&format!("{kind:?}").to_lowercase(), *kind);
                    }
                }
                b.build()
            },
        )
}

// ---- generated worlds ---------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum MetricOutcome {
    Pass,
    Fail,
    NoData,
    NaN,
    Error,
    Missing,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Revision {
    Same,
    New,
    /// Back to the promoted revision.
    Revert,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum When {
    /// At the decision's `wake_at` (one interval later when it has none).
    Wake,
    /// Some seconds later, possibly none.
    After(u64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Human {
    Nobody,
    /// `sluice approve` when the canary waits.
    Approve,
    /// The approval pull request merged: its clock starts at the merge.
    MergeApproval,
}

#[derive(Debug, Clone)]
struct Tick {
    revision: Revision,
    when: When,
    metrics: [MetricOutcome; 2],
    /// Bit i: the hook of kind `HOOK_KINDS[i]` answered yes.
    hooks: u8,
    applied: bool,
    human: Human,
}

fn metric_outcome() -> impl Strategy<Value = MetricOutcome> {
    prop_oneof![
        8 => Just(MetricOutcome::Pass),
        2 => Just(MetricOutcome::Fail),
        1 => Just(MetricOutcome::NoData),
        1 => Just(MetricOutcome::NaN),
        1 => Just(MetricOutcome::Error),
        1 => Just(MetricOutcome::Missing),
    ]
}

fn tick() -> impl Strategy<Value = Tick> {
    (
        prop_oneof![
            20 => Just(Revision::Same),
            1 => Just(Revision::New),
            1 => Just(Revision::Revert),
        ],
        prop_oneof![
            6 => Just(When::Wake),
            3 => (0u64..=30).prop_map(When::After),
            1 => (0u64..=3_000).prop_map(When::After),
        ],
        [metric_outcome(), metric_outcome()],
        // Mostly yes, except the rollback hook, which mostly says no.
        (any::<u8>(), any::<u8>(), prop::bool::weighted(0.05)).prop_map(|(a, b, rollback)| {
            let yes = (a | b) & !ROLLBACK;
            if rollback {
                yes | ROLLBACK
            } else {
                yes
            }
        }),
        prop::bool::weighted(0.9),
        prop_oneof![
            8 => Just(Human::Nobody),
            1 => Just(Human::Approve),
            1 => Just(Human::MergeApproval),
        ],
    )
        .prop_map(|(revision, when, metrics, hooks, applied, human)| Tick {
            revision,
            when,
            metrics,
            hooks,
            applied,
            human,
        })
}

fn metric_value(range: &ThresholdRange, outcome: MetricOutcome) -> Option<MetricValue> {
    let pass = match (range.min, range.max) {
        (Some(lo), Some(hi)) => (lo + hi) / 2.0,
        (Some(lo), None) => lo + 1.0,
        (None, Some(hi)) => hi - 1.0,
        (None, None) => 0.0,
    };
    let fail = range
        .min
        .map_or_else(|| range.max.unwrap_or(0.0) + 1.0, |lo| lo - 1.0);
    match outcome {
        MetricOutcome::Pass => Some(MetricValue::Value(pass)),
        MetricOutcome::Fail => Some(MetricValue::Value(fail)),
        MetricOutcome::NoData => Some(MetricValue::NoData),
        MetricOutcome::NaN => Some(MetricValue::Value(f64::NAN)),
        MetricOutcome::Error => Some(MetricValue::Error("HTTP 503".into())),
        MetricOutcome::Missing => None,
    }
}

/// What the adapters would report in a world where `tick` holds.
fn observe(c: &Canary<()>, revision: &str, tick: &Tick) -> Observations {
    let mut obs = Observations::revision(revision);
    obs.applied = tick.applied;
    for (i, metric) in c.analysis.metrics.iter().enumerate() {
        if let Some(value) = metric_value(&metric.range, tick.metrics[i % 2]) {
            obs.metrics.push(MetricObservation {
                name: metric.name.clone(),
                value,
            });
        }
    }
    for hook in &c.analysis.webhooks {
        let bit = HOOK_KINDS
            .iter()
            .position(|k| *k == hook.kind)
            .expect("every kind is listed");
        obs.webhooks.push(WebhookObservation {
            name: hook.name.clone(),
            kind: hook.kind,
            outcome: if tick.hooks & (1 << bit) != 0 {
                Ok(())
            } else {
                Err("HTTP 500".into())
            },
        });
    }
    obs
}

/// Every check passes, every confirm-* hook says yes, the rollback hook says no.
fn cooperative(c: &Canary<()>, revision: &str) -> Observations {
    observe(
        c,
        revision,
        &Tick {
            revision: Revision::Same,
            when: When::Wake,
            metrics: [MetricOutcome::Pass; 2],
            hooks: !ROLLBACK,
            applied: true,
            human: Human::Nobody,
        },
    )
}

/// Like `cooperative`, but every confirm-* hook says no.
fn hesitant(c: &Canary<()>, revision: &str) -> Observations {
    let mut obs = cooperative(c, revision);
    for w in &mut obs.webhooks {
        if matches!(
            w.kind,
            WebhookKind::ConfirmRollout
                | WebhookKind::ConfirmTrafficIncrease
                | WebhookKind::ConfirmPromotion
        ) {
            w.outcome = Err("HTTP 403".into());
        }
    }
    obs
}

fn waits_for_a_human(status: &Status) -> bool {
    matches!(status.phase, Phase::Waiting | Phase::WaitingApproval)
}

/// The human approval, as it reaches the branch: `sluice approve` or a merged pull request.
fn approve(c: &Canary<()>, status: &Status, now: Timestamp, by_merge: bool) -> Decision {
    let mut d = operate(c, Some(status), Operation::Approve, "approved", now)
        .expect("a waiting canary can be approved");
    d.status.clock_from_merge = by_merge;
    d
}

// ---- the properties -----------------------------------------------------------------------

/// The canary weight the schedule sets after `status`'s, if any.
fn next_weight(c: &Canary<()>, status: &Status) -> Option<u8> {
    match &c.analysis.strategy {
        Rollout::Canary { steps } => steps.get(status.step as usize).map(|s| s.weight),
        Rollout::BlueGreen { iterations } => (status.iterations >= *iterations).then_some(100),
        Rollout::AB { .. } => None,
    }
}

/// Weights sum to 100, and within one analysis the canary weight only rises, one step of the
/// schedule at a time.
fn check_weights(c: &Canary<()>, before: &Status, after: &Status) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        u16::from(after.primary_weight) + u16::from(after.canary_weight),
        100,
        "weights of {:?}",
        after
    );
    let same_analysis = before.phase.is_analysing()
        && after.phase.is_analysing()
        && before.canary_revision == after.canary_revision;
    if !same_analysis {
        return Ok(());
    }
    prop_assert!(
        after.step == before.step || after.step == before.step + 1,
        "step {} -> {}",
        before.step,
        after.step
    );
    if after.canary_weight != before.canary_weight || after.step != before.step {
        prop_assert_eq!(
            Some(after.canary_weight),
            next_weight(c, before),
            "weight {} at step {} -> weight {} at step {}",
            before.canary_weight,
            before.step,
            after.canary_weight,
            after.step
        );
        prop_assert!(after.canary_weight > before.canary_weight);
    }
    Ok(())
}

fn check_decision(
    c: &Canary<()>,
    before: &Status,
    d: &Decision,
    now: Timestamp,
) -> Result<(), TestCaseError> {
    if d.action == Action::Hold {
        prop_assert_eq!(&d.status, before, "Hold changed the status");
    }
    if let Some(wake) = d.wake_at {
        prop_assert!(
            wake > now,
            "wake_at {} is not after now {} ({:?})",
            wake,
            now,
            d
        );
    }
    check_weights(c, before, &d.status)
}

/// Checks one decision of a walk: the status before, what was observed, the source revision,
/// the time, and the decision.
type OnDecision =
    dyn Fn(&Canary<()>, &Status, &Observations, &str, Timestamp, &Decision) -> CheckResult;
type CheckResult = Result<(), TestCaseError>;

fn nothing_more(
    _: &Canary<()>,
    _: &Status,
    _: &Observations,
    _: &str,
    _: Timestamp,
    _: &Decision,
) -> CheckResult {
    Ok(())
}

/// Walks `ticks` from the canary's first sight, checking every decision; returns the last
/// status, time and source revision.
fn walk(
    c: &Canary<()>,
    start: Timestamp,
    ticks: &[Tick],
    also: &OnDecision,
) -> Result<(Status, Timestamp, String), TestCaseError> {
    let first = decide(c, None, &Observations::revision("r0"), start);
    prop_assert_eq!(first.status.primary_weight, 100);
    prop_assert!(first.wake_at.is_none_or(|w| w > start));
    let mut status = first.status;
    let mut wake = first.wake_at;
    let mut now = start;
    let mut source = "r0".to_string();
    let mut revisions = 0;
    for tick in ticks {
        source = match tick.revision {
            Revision::Same => source,
            Revision::New => {
                revisions += 1;
                format!("r{revisions}")
            }
            Revision::Revert => status.promoted_revision.clone(),
        };
        now = match tick.when {
            When::Wake => wake
                .unwrap_or_else(|| later(now, c.analysis.interval))
                .max(now),
            When::After(s) => later(now, Duration::from_secs(s)),
        };
        let obs = observe(c, &source, tick);
        let d = decide(c, Some(&status), &obs, now);
        check_decision(c, &status, &d, now)?;
        also(c, &status, &obs, &source, now, &d)?;
        status = d.status;
        wake = d.wake_at;
        if tick.human != Human::Nobody && waits_for_a_human(&status) && !status.paused {
            let a = approve(c, &status, now, tick.human == Human::MergeApproval);
            check_weights(c, &status, &a.status)?;
            status = a.status;
            wake = a.wake_at;
        }
    }
    Ok((status, now, source))
}

/// `decide` reads nothing `wants` did not ask for: observing only what `wants` asks for gives
/// the same decision as observing everything.
fn check_wants(
    c: &Canary<()>,
    before: &Status,
    obs: &Observations,
    revision: &str,
    now: Timestamp,
    d: &Decision,
) -> CheckResult {
    let wanted = wants(c, Some(before), revision, now);
    let mut narrowed = obs.clone();
    if !wanted.metrics {
        narrowed.metrics.clear();
    }
    narrowed.webhooks.retain(|h| wanted.hooks.contains(&h.kind));
    let with_less = decide(c, Some(before), &narrowed, now);
    prop_assert_eq!(
        &with_less,
        d,
        "decide read something wants ({:?}) did not ask for",
        wanted
    );
    Ok(())
}

/// The phases a canary can be in, given its spec.
fn expected_phases(c: &Canary<()>) -> BTreeSet<&'static str> {
    let hook = |kind| c.analysis.webhooks.iter().any(|w| w.kind == kind);
    let approvals = c.analysis.approvals;
    let canary_strategy = match &c.analysis.strategy {
        Rollout::Canary { steps } => Some(steps),
        Rollout::BlueGreen { .. } | Rollout::AB { .. } => None,
    };
    let gated_step = canary_strategy.is_some_and(|steps| {
        approvals.before_traffic_increase
            || hook(WebhookKind::ConfirmTrafficIncrease)
            || steps.iter().any(|s| s.pause == Pause::Approval)
    });
    let gated_promotion = approvals.before_promotion || hook(WebhookKind::ConfirmPromotion);
    let mut phases = vec![Phase::Initialized, Phase::Succeeded];
    if approvals.before_rollout || hook(WebhookKind::ConfirmRollout) {
        phases.push(Phase::Waiting);
    }
    if !c.skip_analysis {
        phases.extend([
            Phase::Progressing,
            Phase::Promoting,
            Phase::Finalising,
            Phase::Failed,
        ]);
        if gated_step || gated_promotion {
            phases.push(Phase::WaitingApproval);
        }
    }
    phases.into_iter().map(Phase::as_str).collect()
}

/// Rolls out a new revision, stopping at every gate before opening it (the hooks say yes, a
/// human approves), and once rolls back from the first analysing status (the change is never
/// applied); returns every phase seen.
fn tour(c: &Canary<()>, start: Timestamp) -> Result<BTreeSet<&'static str>, TestCaseError> {
    let mut seen = BTreeSet::new();
    let mut status = decide(c, None, &Observations::revision("r0"), start).status;
    seen.insert(status.phase.as_str());
    let mut now = start;
    let mut rolled_back = false;
    for _ in 0..DRIVE_LIMIT {
        let held = decide(c, Some(&status), &hesitant(c, "r1"), now);
        if matches!(held.action, Action::WaitRollout | Action::WaitApproval(_)) {
            seen.insert(held.status.phase.as_str());
        }
        let mut d = decide(c, Some(&status), &cooperative(c, "r1"), now);
        seen.insert(d.status.phase.as_str());
        if waits_for_a_human(&d.status) {
            d = approve(c, &d.status, now, false);
            seen.insert(d.status.phase.as_str());
        }
        if d.status.phase.is_analysing() && !rolled_back {
            rolled_back = true;
            let mut unapplied = cooperative(c, "r1");
            unapplied.applied = false;
            let deadline = later(d.status.step_started, c.progress_deadline).max(now);
            let failed = decide(c, Some(&d.status), &unapplied, deadline);
            prop_assert!(
                matches!(failed.action, Action::Rollback { .. }),
                "{:?}",
                failed
            );
            seen.insert(failed.status.phase.as_str());
        }
        status = d.status;
        if status.phase == Phase::Succeeded && status.promoted_revision == "r1" {
            return Ok(seen);
        }
        now = d
            .wake_at
            .unwrap_or_else(|| later(now, c.analysis.interval))
            .max(now);
    }
    Err(TestCaseError::fail(format!(
        "no promotion of r1 within {DRIVE_LIMIT} decisions: {status:?}"
    )))
}

/// From `status`, cooperative observations (and a human approving whenever the canary waits)
/// lead out of its phase; an idle canary is given a new revision, and starts its rollout.
fn lead_out(c: &Canary<()>, status: &Status, start: Timestamp) -> Result<(), TestCaseError> {
    match status.phase {
        Phase::Initializing => {
            let d = decide(c, Some(status), &cooperative(c, "r0"), start);
            prop_assert_eq!(d.action, Action::Initialize);
            Ok(())
        }
        Phase::Initialized | Phase::Succeeded | Phase::Failed => starts_a_rollout(c, status, start),
        Phase::Waiting
        | Phase::Progressing
        | Phase::WaitingApproval
        | Phase::Promoting
        | Phase::Finalising => leaves_its_phase(c, status, start),
    }
}

/// An idle canary given a new revision starts its rollout (or, skipping its analysis,
/// promotes it at once).
fn starts_a_rollout(c: &Canary<()>, status: &Status, start: Timestamp) -> CheckResult {
    let mut d = decide(c, Some(status), &cooperative(c, "fresh"), start);
    if d.action == Action::ApprovalMerged {
        // A merged approval restarts the clock first (even of a canary that skipped its
        // analysis and is done); the next decision sees the new revision.
        let now = d.wake_at.unwrap_or(start);
        d = decide(c, Some(&d.status), &cooperative(c, "fresh"), now);
    }
    let analysed = matches!(d.action, Action::StartRollout | Action::WaitRollout)
        && d.status.canary_revision.as_deref() == Some("fresh");
    let skipped = d.action == Action::Promote
        && c.skip_analysis
        && d.status.phase == Phase::Succeeded
        && d.status.promoted_revision == "fresh";
    prop_assert!(
        analysed || skipped,
        "{:?} did not start a rollout: {:?}",
        status.phase,
        d
    );
    Ok(())
}

/// A canary in the middle of a rollout leaves its phase within a bounded number of decisions.
fn leaves_its_phase(c: &Canary<()>, status: &Status, start: Timestamp) -> CheckResult {
    let revision = status.canary_revision.clone().unwrap_or_default();
    let mut current = status.clone();
    let mut now = start;
    for _ in 0..DRIVE_LIMIT {
        let mut d = decide(c, Some(&current), &cooperative(c, &revision), now);
        if waits_for_a_human(&d.status) {
            d = approve(c, &d.status, now, false);
        }
        if d.status.phase != status.phase {
            return Ok(());
        }
        current = d.status;
        now = d
            .wake_at
            .unwrap_or_else(|| later(now, c.analysis.interval))
            .max(now);
    }
    Err(TestCaseError::fail(format!(
        "{:?} is a dead end: still {:?} after {DRIVE_LIMIT} decisions",
        status.phase, current
    )))
}

/// The share of traffic the route sends to backends that run `revision`, as the renderer
/// builds the route: a managed canary routes to a primary that runs the promoted revision and
/// a canary that runs the analysed one; a route-only canary routes `primary_weight` to the
/// stable service and `canary_weight` to the other, and `fresh_service` is the one the user
/// deployed `revision` to (the one that was not stable when its rollout started).
fn traffic_on(c: &Canary<()>, status: &Status, revision: &str, fresh_service: &str) -> u8 {
    match &c.target {
        Target::RouteOnly { services, .. } => {
            let stable = status
                .stable_service
                .as_deref()
                .unwrap_or(services[0].as_str());
            if stable == fresh_service {
                status.primary_weight
            } else {
                status.canary_weight
            }
        }
        // A Rollout's stable workload runs the promoted revision, like the primary.
        Target::Source { .. } | Target::TargetRef { .. } | Target::Rollout { .. } => {
            let mut weight = 0;
            if status.promoted_revision == revision {
                weight += status.primary_weight;
            }
            if status.canary_revision.as_deref() == Some(revision) {
                weight += status.canary_weight;
            }
            weight
        }
    }
}

/// Route-only: the service that is not stable in `status` (the one a new revision goes to).
fn unstable_service(c: &Canary<()>, status: &Status) -> String {
    match &c.target {
        Target::RouteOnly { services, .. } => {
            let stable = status
                .stable_service
                .as_deref()
                .unwrap_or(services[0].as_str());
            if stable == services[0].as_str() {
                services[1].to_string()
            } else {
                services[0].to_string()
            }
        }
        Target::Source { .. } | Target::TargetRef { .. } | Target::Rollout { .. } => String::new(),
    }
}

fn never_decreases(weights: &[u8]) -> CheckResult {
    for pair in weights.windows(2) {
        prop_assert!(
            pair[1] >= pair[0],
            "the new revision's traffic went down: {:?}",
            weights
        );
    }
    Ok(())
}

/// Rolls out `r1` with every check passing and every gate opened, and returns the new
/// revision's share of traffic after each decision, from the first sight of the canary to
/// Succeeded.
fn new_revision_traffic(c: &Canary<()>, start: Timestamp) -> Result<Vec<u8>, TestCaseError> {
    let mut status = decide(c, None, &Observations::revision("r0"), start).status;
    let fresh = unstable_service(c, &status);
    let mut traffic = vec![traffic_on(c, &status, "r1", &fresh)];
    let mut now = start;
    for _ in 0..DRIVE_LIMIT {
        let mut d = decide(c, Some(&status), &cooperative(c, "r1"), now);
        traffic.push(traffic_on(c, &d.status, "r1", &fresh));
        if waits_for_a_human(&d.status) {
            d = approve(c, &d.status, now, false);
            traffic.push(traffic_on(c, &d.status, "r1", &fresh));
        }
        status = d.status;
        if status.phase == Phase::Succeeded && status.promoted_revision == "r1" {
            return Ok(traffic);
        }
        now = d
            .wake_at
            .unwrap_or_else(|| later(now, c.analysis.interval))
            .max(now);
    }
    Err(TestCaseError::fail(format!(
        "no promotion of r1 within {DRIVE_LIMIT} decisions: {status:?}"
    )))
}

/// One rollout seen by a random walk: its revision, the service it went to (route-only),
/// and its share of traffic after each decision.
#[derive(Default)]
struct SeenRollout {
    revision: String,
    fresh_service: String,
    traffic: Vec<u8>,
}

fn start_time() -> impl Strategy<Value = Timestamp> {
    (0i64..1_000_000_000).prop_map(t)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    /// Weights sum to 100, `Hold` changes nothing, the canary weight only rises along the
    /// schedule, and `wake_at` is after `now`, in every decision of a random walk.
    #[test]
    fn decisions_keep_weights_schedule_and_wake_times_sound(
        c in arb_canary(),
        start in start_time(),
        ticks in prop::collection::vec(tick(), 0..60),
    ) {
        walk(&c, start, &ticks, &nothing_more)?;
    }

    /// What the adapters observe (`wants`) and what `decide` judges share one timing rule:
    /// nothing judged goes unobserved.
    #[test]
    fn decide_reads_only_what_wants_asked_for(
        c in arb_canary(),
        start in start_time(),
        ticks in prop::collection::vec(tick(), 0..60),
    ) {
        walk(&c, start, &ticks, &check_wants)?;
    }

    /// Every phase the spec allows is reached, and no other.
    #[test]
    fn every_phase_the_spec_allows_is_reached(c in arb_canary(), start in start_time()) {
        prop_assert_eq!(tour(&c, start)?, expected_phases(&c));
    }

    /// A value that is not a finite number fails every threshold: Prometheus answers +Inf
    /// or -Inf for a division by zero and NaN for 0/0, and none of them is a measurement.
    #[test]
    fn non_finite_values_fail_every_threshold(
        range in range(),
        value in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY)],
    ) {
        prop_assert!(!range.admits(value), "{:?} admits {}", range, value);
    }

    /// A rollout that succeeds never moves traffic back to the old revision: the new
    /// revision's share only grows, through the analysis, the promotion and its end.
    #[test]
    fn a_successful_rollout_never_takes_traffic_from_the_new_revision(
        c in arb_canary(),
        start in start_time(),
    ) {
        let traffic = new_revision_traffic(&c, start)?;
        never_decreases(&traffic)?;
        prop_assert_eq!(traffic.last().copied(), Some(100));
    }

    /// The same in random walks (failed checks below the threshold, holds, approvals by
    /// merge, new revisions): every rollout that ends Succeeded only ever raised its share.
    #[test]
    fn rollouts_that_succeed_in_random_walks_only_raise_the_new_revision(
        c in arb_canary(),
        start in start_time(),
        ticks in prop::collection::vec(tick(), 0..60),
    ) {
        let current: RefCell<Option<SeenRollout>> = RefCell::new(None);
        let track = move |c: &Canary<()>,
                     before: &Status,
                     _: &Observations,
                     _: &str,
                     _: Timestamp,
                     d: &Decision|
         -> CheckResult {
            let mut current = current.borrow_mut();
            let starts = matches!(
                d.action,
                Action::StartRollout | Action::Restart | Action::WaitRollout
            ) || (d.action == Action::Promote && c.skip_analysis);
            if starts {
                let revision = d.status.canary_revision.clone().unwrap_or_default();
                let fresh_service = unstable_service(c, before);
                // The rollout starts with this decision (a restart drops the revision it
                // replaces to weight 0 first, as a new analysis does).
                *current = Some(SeenRollout {
                    traffic: Vec::new(),
                    revision,
                    fresh_service,
                });
            }
            let Some(rollout) = current.as_mut() else {
                return Ok(());
            };
            if !starts {
                // `before` may be a human approval's status, which the walk applies after.
                let seen = traffic_on(c, before, &rollout.revision, &rollout.fresh_service);
                rollout.traffic.push(seen);
            }
            let now = traffic_on(c, &d.status, &rollout.revision, &rollout.fresh_service);
            rollout.traffic.push(now);
            match d.status.phase {
                Phase::Succeeded => {
                    if d.status.promoted_revision == rollout.revision {
                        never_decreases(&rollout.traffic)?;
                    }
                    *current = None;
                }
                Phase::Failed | Phase::Initialized => *current = None,
                Phase::Initializing
                | Phase::Waiting
                | Phase::Progressing
                | Phase::WaitingApproval
                | Phase::Promoting
                | Phase::Finalising => {}
            }
            Ok(())
        };
        walk(&c, start, &ticks, &track)?;
    }

    /// Wherever a random walk ends, some observations lead out of its phase, and Succeeded
    /// and Failed start a new rollout on a new revision.
    #[test]
    fn no_phase_is_a_dead_end(
        c in arb_canary(),
        start in start_time(),
        ticks in prop::collection::vec(tick(), 0..40),
    ) {
        let (status, now, _) = walk(&c, start, &ticks, &nothing_more)?;
        lead_out(&c, &status, now)?;
    }
}

#[test]
fn a_canary_with_every_gate_reaches_every_phase_but_initializing() {
    let c = canary()
        .native()
        .steps(&[(20, Pause::Approval), (60, Pause::Interval)])
        .approvals(Approvals {
            before_rollout: true,
            before_traffic_increase: false,
            before_promotion: true,
        })
        .build();
    let all: BTreeSet<&str> = [
        Phase::Initialized,
        Phase::Waiting,
        Phase::Progressing,
        Phase::WaitingApproval,
        Phase::Promoting,
        Phase::Finalising,
        Phase::Succeeded,
        Phase::Failed,
    ]
    .into_iter()
    .map(Phase::as_str)
    .collect();
    assert_eq!(tour(&c, t(0)).unwrap(), all);
}

#[test]
fn a_stored_initializing_status_leads_to_initialized() {
    // `Initializing` is the phase of a canary without a status (`decide(.., None, ..)`); a
    // status never enters it, but one read from a file still leads out.
    let c = canary().build();
    let mut status = decide(&c, None, &Observations::revision("r0"), t(0)).status;
    status.phase = Phase::Initializing;
    let d = decide(&c, Some(&status), &Observations::revision("r0"), t(10));
    assert_eq!(d.action, Action::Initialize);
    assert_eq!(d.status.phase, Phase::Initialized);
    assert_eq!(d.status.promoted_revision, "r0");
}

/// The canary weights a healthy rollout of a new revision commits, in order.
fn weights_walked(c: &Canary<()>) -> Vec<u8> {
    let mut status = decide(c, None, &Observations::revision("r0"), t(0)).status;
    let mut now = t(0);
    let mut weights = Vec::new();
    for _ in 0..DRIVE_LIMIT {
        let d = decide(c, Some(&status), &cooperative(c, "r1"), now);
        if let Action::AdvanceCanary { to, .. } = d.action {
            weights.push(to);
        }
        status = d.status;
        if status.phase == Phase::Succeeded {
            return weights;
        }
        now = d
            .wake_at
            .unwrap_or_else(|| later(now, c.analysis.interval))
            .max(now);
    }
    panic!("no promotion within {DRIVE_LIMIT} decisions: {status:?}");
}

#[test]
fn builders_walk_the_schedules_the_spec_readers_produce() {
    // Flagger checks maxWeight before adding a step; native input never passes it.
    let flagger = canary().step_weight(20).max_weight(50).build();
    assert_eq!(weights_walked(&flagger), vec![20, 40, 60]);
    let native = canary().native().step_weight(20).max_weight(50).build();
    assert_eq!(weights_walked(&native), vec![20, 40, 50]);
    let capped = canary().step_weights(&[1, 2, 10, 200]).build();
    assert_eq!(weights_walked(&capped), vec![1, 2, 10, 100]);
    // Blue/green switches all traffic once; A/B never shifts weights.
    assert_eq!(weights_walked(&canary().blue_green(3).build()), vec![100]);
    assert_eq!(weights_walked(&canary().ab(2).build()), Vec::<u8>::new());
}
