//! Table tests of the state machine on a fixed clock.

use std::time::Duration;

use jiff::Timestamp;

use sluice::core::decide::*;
use sluice::core::observe::{MetricObservation, MetricValue, Observations, WebhookObservation};
use sluice::core::operate::{operate, Operation};
use sluice::core::status::{Gate, Phase, Status};
use sluice::manifest::load::load_text;
use sluice::manifest::model::{Canary, WebhookKind};
use sluice::manifest::settings::Settings;
use sluice::render::status_file::{from_yaml, to_yaml};

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

/// Builds a canary from a Flagger analysis block.
fn flagger(analysis: &str) -> Canary {
    flagger_on("osm", analysis)
}

fn flagger_on(provider: &str, analysis: &str) -> Canary {
    let text = format!(
        "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {{name: podinfo, namespace: prod}}\nspec:\n  provider: {provider}\n  targetRef: {{apiVersion: apps/v1, kind: Deployment, name: podinfo}}\n  service: {{port: 9898}}\n  analysis:\n{}",
        indent(analysis, 4)
    );
    one(&text)
}

fn native(extra_spec: &str, analysis: &str) -> Canary {
    one(&native_text(extra_spec, analysis))
}

fn native_text(extra_spec: &str, analysis: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: prod}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: v1}}\n  service: {{port: 80}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha2, kind: TrafficSplit}}\n{}  analysis:\n{}",
        indent(extra_spec, 2),
        indent(analysis, 4)
    )
}

fn indent(text: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{pad}{l}\n"))
        .collect()
}

fn one(text: &str) -> Canary {
    let loaded = load_text("test.yaml", text, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert_eq!(loaded.canaries.len(), 1);
    loaded.canaries.into_iter().next().unwrap()
}

fn obs(revision: &str) -> Observations {
    Observations::revision(revision)
}

fn with_metric(mut o: Observations, name: &str, value: MetricValue) -> Observations {
    o.metrics.push(MetricObservation {
        name: name.into(),
        value,
    });
    o
}

fn hook(mut o: Observations, name: &str, kind: WebhookKind, ok: bool) -> Observations {
    o.webhooks.push(WebhookObservation {
        name: name.into(),
        kind,
        outcome: if ok { Ok(()) } else { Err("HTTP 500".into()) },
    });
    o
}

/// An initialized canary at `rev0`.
fn initialized(c: &Canary) -> Status {
    let d = decide(c, None, &obs("rev0"), t(0));
    assert_eq!(d.action, Action::Initialize);
    d.status
}

/// Runs decisions at each `wake_at` until `stop` says so; returns actions and final status.
fn run_until(
    c: &Canary,
    mut status: Status,
    o: &Observations,
    mut now: Timestamp,
    stop: impl Fn(&Status) -> bool,
) -> (Vec<Action>, Status, Timestamp) {
    let mut actions = Vec::new();
    for _ in 0..1000 {
        let d = decide(c, Some(&status), o, now);
        if d.commits() {
            actions.push(d.action.clone());
        }
        status = d.status;
        if stop(&status) {
            return (actions, status, now);
        }
        now = d.wake_at.expect("a running canary always has a wake time");
    }
    panic!("did not stop: {status:?}");
}

const SEED: &str = "interval: 30s\nthreshold: 2\nstepWeight: 10\nmaxWeight: 50\nstepWeightPromotion: 5\nmetrics:\n- name: request-success-rate\n  thresholdRange: {min: 99}\n";

fn healthy(rev: &str) -> Observations {
    with_metric(obs(rev), "request-success-rate", MetricValue::Value(99.9))
}

#[test]
fn first_sight_initializes_with_all_traffic_on_primary() {
    let c = flagger(SEED);
    let d = decide(&c, None, &obs("rev0"), t(0));
    assert_eq!(d.action, Action::Initialize);
    assert_eq!(d.status.phase, Phase::Initialized);
    assert_eq!((d.status.primary_weight, d.status.canary_weight), (100, 0));
    assert_eq!(d.status.promoted_revision, "rev0");
    assert_eq!(d.events, vec!["Initialization done! podinfo.prod"]);
}

#[test]
fn promoted_revision_never_starts_an_analysis() {
    let c = flagger(SEED);
    let s = initialized(&c);
    let d = decide(&c, Some(&s), &obs("rev0"), t(100));
    assert_eq!(d.action, Action::Hold);
    assert!(!d.commits());
    assert_eq!(d.status, s);
}

#[test]
fn seed_scenario_walks_flagger_events_in_order() {
    let c = flagger(SEED);
    let s = initialized(&c);
    let (actions, end, _) = run_until(&c, s, &healthy("rev1"), t(10), |s| {
        s.phase == Phase::Succeeded
    });
    let mut expected = vec![Action::StartRollout];
    let mut from = 0;
    for w in [10, 20, 30, 40, 50] {
        expected.push(Action::AdvanceCanary { from, to: w });
        from = w;
    }
    expected.push(Action::Promote);
    for w in (55..=100).step_by(5) {
        expected.push(Action::AdvancePrimary { weight: w });
    }
    expected.push(Action::Finalise);
    assert_eq!(actions, expected);
    assert_eq!(end.promoted_revision, "rev1");
    assert_eq!((end.primary_weight, end.canary_weight), (100, 0));
}

#[test]
fn first_analysis_tick_runs_pre_rollout_and_skips_metrics() {
    let c = flagger(&format!(
        "{SEED}webhooks:\n- name: smoke\n  type: pre-rollout\n  url: http://t/\n"
    ));
    let s = initialized(&c);
    let started = decide(&c, Some(&s), &healthy("rev1"), t(10));
    assert_eq!(started.action, Action::StartRollout);
    // Metrics are failing, but the first tick does not judge them.
    let failing = with_metric(
        obs("rev1"),
        "request-success-rate",
        MetricValue::Value(50.0),
    );
    let failing = hook(failing, "smoke", WebhookKind::PreRollout, true);
    let before = decide(&c, Some(&started.status), &failing, t(20));
    assert_eq!(before.action, Action::Hold, "not due before the interval");
    assert_eq!(before.wake_at, Some(t(40)));
    let d = decide(&c, Some(&started.status), &failing, t(40));
    assert_eq!(d.action, Action::AdvanceCanary { from: 0, to: 10 });
    assert_eq!(d.events[0], "Starting canary analysis for podinfo.prod");
    assert_eq!(d.events[1], "Advance podinfo.prod canary weight 10");
    // A failing pre-rollout hook is a failed check instead.
    let bad = hook(obs("rev1"), "smoke", WebhookKind::PreRollout, false);
    let d = decide(&c, Some(&started.status), &bad, t(40));
    assert_eq!(d.action, Action::FailedCheck);
    assert_eq!(d.status.failed_checks, 1);
}

/// A canary at weight 10 after one step.
fn at_first_step(c: &Canary) -> Status {
    let s = initialized(c);
    let d = decide(c, Some(&s), &healthy("rev1"), t(10));
    let d = decide(c, Some(&d.status), &healthy("rev1"), t(40));
    assert_eq!(d.status.canary_weight, 10);
    d.status
}

#[test]
fn failing_metric_counts_then_rolls_back_at_threshold() {
    let c = flagger(SEED);
    let s = at_first_step(&c);
    let bad = with_metric(
        obs("rev1"),
        "request-success-rate",
        MetricValue::Value(87.314),
    );
    let d1 = decide(&c, Some(&s), &bad, t(70));
    assert_eq!(d1.action, Action::FailedCheck);
    assert_eq!(d1.status.failed_checks, 1);
    assert_eq!(
        d1.status.canary_weight, 10,
        "a failed check holds the weight"
    );
    assert!(
        d1.events[0].contains("request-success-rate 87.31 < 99"),
        "{:?}",
        d1.events
    );
    // Within the same interval a failure is not counted again.
    let again = decide(&c, Some(&d1.status), &bad, t(80));
    assert_eq!(again.action, Action::Hold);
    let d2 = decide(&c, Some(&d1.status), &bad, t(100));
    assert!(
        matches!(d2.action, Action::Rollback { .. }),
        "{:?}",
        d2.action
    );
    assert_eq!(d2.status.phase, Phase::Failed);
    assert_eq!(
        (d2.status.primary_weight, d2.status.canary_weight),
        (100, 0)
    );
    let Action::Rollback { reason, .. } = d2.action else {
        unreachable!()
    };
    assert!(
        reason.contains("request-success-rate 87.31 < 99"),
        "{reason}"
    );
}

#[test]
fn no_data_nan_and_errors_are_failed_checks_never_passes() {
    let c = flagger(SEED);
    let s = at_first_step(&c);
    for value in [
        MetricValue::NoData,
        MetricValue::Value(f64::NAN),
        MetricValue::Error("HTTP 503".into()),
    ] {
        let o = with_metric(obs("rev1"), "request-success-rate", value.clone());
        let d = decide(&c, Some(&s), &o, t(70));
        assert_eq!(d.action, Action::FailedCheck, "{value:?}");
    }
    // A metric that was not observed at all fails too.
    let d = decide(&c, Some(&s), &obs("rev1"), t(70));
    assert_eq!(d.action, Action::FailedCheck);
}

#[test]
fn infinite_values_fail_min_and_max_thresholds_like_nan() {
    // Prometheus answers +Inf or -Inf for a division by zero: no bound admits it, and the
    // status records the verdict without an unwritable number.
    for (range, value, detail) in [
        ("{min: 99}", f64::INFINITY, "+Inf"),
        ("{max: 500}", f64::NEG_INFINITY, "-Inf"),
        ("{min: 1, max: 500}", f64::INFINITY, "+Inf"),
        ("{min: 1, max: 500}", f64::NEG_INFINITY, "-Inf"),
    ] {
        let c = flagger(&format!(
            "interval: 30s\nthreshold: 2\nstepWeight: 10\nmaxWeight: 50\nmetrics:\n- name: request-success-rate\n  thresholdRange: {range}\n"
        ));
        let s = at_first_step(&c);
        let o = with_metric(
            obs("rev1"),
            "request-success-rate",
            MetricValue::Value(value),
        );
        let d = decide(&c, Some(&s), &o, t(70));
        assert_eq!(d.action, Action::FailedCheck, "{range} {value}");
        let record = &d.status.checks[0];
        assert!(!record.passed);
        assert_eq!(record.value, None);
        assert_eq!(record.detail, detail);
        // The status file round-trips it.
        assert_eq!(from_yaml(&to_yaml(&d.status).unwrap()).unwrap(), d.status);
    }
}

#[test]
fn failed_checks_accumulate_across_steps() {
    let c = flagger(SEED);
    let s = at_first_step(&c);
    let bad = with_metric(obs("rev1"), "request-success-rate", MetricValue::Value(1.0));
    let d1 = decide(&c, Some(&s), &bad, t(70));
    let d2 = decide(&c, Some(&d1.status), &healthy("rev1"), t(100));
    assert_eq!(d2.action, Action::AdvanceCanary { from: 10, to: 20 });
    assert_eq!(
        d2.status.failed_checks, 1,
        "failures are cumulative within one analysis"
    );
    let d3 = decide(&c, Some(&d2.status), &bad, t(130));
    assert!(matches!(d3.action, Action::Rollback { .. }));
}

#[test]
fn new_revision_mid_analysis_restarts_at_zero() {
    let c = flagger(SEED);
    let s = at_first_step(&c);
    let d = decide(&c, Some(&s), &healthy("rev2"), t(50));
    assert_eq!(d.action, Action::Restart);
    assert_eq!(d.status.phase, Phase::Progressing);
    assert_eq!(
        (
            d.status.canary_weight,
            d.status.step,
            d.status.failed_checks
        ),
        (0, 0, 0)
    );
    assert_eq!(d.status.canary_revision.as_deref(), Some("rev2"));
}

#[test]
fn reverting_to_promoted_revision_cancels_without_new_analysis() {
    let c = flagger(SEED);
    let s = at_first_step(&c);
    let d = decide(&c, Some(&s), &healthy("rev0"), t(50));
    assert_eq!(d.action, Action::Cancel);
    assert_eq!(d.status.phase, Phase::Initialized);
    assert_eq!((d.status.primary_weight, d.status.canary_weight), (100, 0));
    let next = decide(&c, Some(&d.status), &healthy("rev0"), t(500));
    assert_eq!(next.action, Action::Hold);
}

#[test]
fn suspend_holds_everything() {
    let mut c = flagger(SEED);
    let s = at_first_step(&c);
    c.suspend = true;
    let d = decide(&c, Some(&s), &healthy("rev9"), t(1000));
    assert_eq!(d.action, Action::Hold);
    assert_eq!(d.status, s);
}

#[test]
fn skip_analysis_promotes_directly() {
    let mut c = flagger(SEED);
    c.skip_analysis = true;
    let s = initialized(&c);
    let d = decide(&c, Some(&s), &obs("rev1"), t(10));
    assert_eq!(d.action, Action::Promote);
    assert_eq!(d.status.phase, Phase::Succeeded);
    assert_eq!(d.status.promoted_revision, "rev1");
}

#[test]
fn failed_revision_is_not_retried_but_a_new_one_starts() {
    let c = flagger(SEED);
    let s = at_first_step(&c);
    let bad = with_metric(obs("rev1"), "request-success-rate", MetricValue::Value(1.0));
    let d1 = decide(&c, Some(&s), &bad, t(70));
    let failed = decide(&c, Some(&d1.status), &bad, t(100)).status;
    assert_eq!(failed.phase, Phase::Failed);
    assert_eq!(
        decide(&c, Some(&failed), &healthy("rev1"), t(200)).action,
        Action::Hold
    );
    assert_eq!(
        decide(&c, Some(&failed), &healthy("rev2"), t(200)).action,
        Action::StartRollout
    );
}

#[test]
fn pause_duration_resumes_exactly_after_restart() {
    let c = native("", "interval: 10s\nthreshold: 3\nsteps:\n- weight: 20\n  pause: {duration: 60s}\n- weight: 80\n  pause: {duration: 1m}\n");
    let s = initialized(&c);
    let d = decide(&c, Some(&s), &obs("v2"), t(0));
    let d = decide(&c, Some(&d.status), &obs("v2"), t(10));
    assert_eq!(d.action, Action::AdvanceCanary { from: 0, to: 20 });
    // The status goes through the status file (YAML) as after a restart.
    let yaml = to_yaml(&d.status).unwrap();
    let restored = from_yaml(&yaml).unwrap();
    assert_eq!(restored, d.status);
    let early = decide(&c, Some(&restored), &obs("v2"), t(50));
    assert_eq!(early.action, Action::Hold, "the pause has 20 s left");
    assert_eq!(early.wake_at, Some(t(70)));
    let done = decide(&c, Some(&restored), &obs("v2"), t(70));
    assert_eq!(done.action, Action::AdvanceCanary { from: 20, to: 80 });
}

#[test]
fn a_zero_pause_is_refused_so_no_step_advances_the_instant_it_is_committed() {
    // A zero pause made decide ask to be woken at `now` and advance again at once: the step's
    // weight was committed and left before any traffic reached it, its checks judged on the
    // previous step's traffic. Found by the core's `wake_at is after now` property.
    let text = native_text(
        "",
        "interval: 10s\nsteps:\n- weight: 20\n  pause: {duration: 0s}\n- weight: 60\n",
    );
    let loaded = load_text("apps/web/canary.yaml", &text, &Settings::default());
    assert!(loaded.canaries.is_empty());
    let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        vec!["apps/web/canary.yaml:12: spec.analysis.steps[0].pause.duration: expected a positive duration, found 0"]
    );
}

#[test]
fn pause_without_duration_waits_for_approval_without_failures() {
    let c = native(
        "",
        "interval: 10s\nthreshold: 1\nsteps:\n- weight: 20\n  pause: {}\n- weight: 60\n",
    );
    let s = initialized(&c);
    let d = decide(&c, Some(&s), &obs("v2"), t(0));
    let d = decide(&c, Some(&d.status), &obs("v2"), t(10));
    assert_eq!(d.status.canary_weight, 20);
    let w = decide(&c, Some(&d.status), &obs("v2"), t(20));
    assert_eq!(w.action, Action::WaitApproval(Gate::TrafficIncrease));
    assert_eq!(w.status.phase, Phase::WaitingApproval);
    let still = decide(&c, Some(&w.status), &obs("v2"), t(500));
    assert_eq!(still.action, Action::Hold);
    assert_eq!(still.status.failed_checks, 0);
    // The approval is a manual operation (`sluice approve`, or the change an approval pull
    // request carries), not an observation.
    let go = operate(&c, Some(&w.status), Operation::Approve, "ok", t(510)).unwrap();
    assert_eq!(go.action, Action::AdvanceCanary { from: 20, to: 60 });
    assert_eq!(go.status.phase, Phase::Progressing);
}

#[test]
fn native_approval_before_promotion() {
    let c = native(
        "",
        "interval: 10s\nstepWeight: 50\nmaxWeight: 50\napprovals: {beforePromotion: true}\n",
    );
    let s = initialized(&c);
    let d = decide(&c, Some(&s), &obs("v2"), t(0));
    let d = decide(&c, Some(&d.status), &obs("v2"), t(10));
    assert_eq!(d.status.canary_weight, 50);
    let w = decide(&c, Some(&d.status), &obs("v2"), t(20));
    assert_eq!(w.action, Action::WaitApproval(Gate::Promotion));
    assert_eq!(
        decide(&c, Some(&w.status), &obs("v2"), t(300)).action,
        Action::Hold,
        "nothing but an approval opens the gate"
    );
    assert_eq!(
        operate(&c, Some(&w.status), Operation::Approve, "ok", t(30))
            .unwrap()
            .action,
        Action::Promote
    );
}

#[test]
fn confirm_rollout_webhook_holds_in_waiting() {
    let c = flagger(&format!(
        "{SEED}webhooks:\n- name: gate\n  type: confirm-rollout\n  url: http://t/\n"
    ));
    let s = initialized(&c);
    let closed = hook(healthy("rev1"), "gate", WebhookKind::ConfirmRollout, false);
    let d = decide(&c, Some(&s), &closed, t(10));
    assert_eq!(d.action, Action::WaitRollout);
    assert_eq!(d.status.phase, Phase::Waiting);
    assert_eq!(
        decide(&c, Some(&d.status), &closed, t(20)).action,
        Action::Hold
    );
    let open = hook(healthy("rev1"), "gate", WebhookKind::ConfirmRollout, true);
    assert_eq!(
        decide(&c, Some(&d.status), &open, t(30)).action,
        Action::StartRollout
    );
}

#[test]
fn confirm_traffic_increase_holds_without_failures() {
    let c = flagger(&format!(
        "{SEED}webhooks:\n- name: gate\n  type: confirm-traffic-increase\n  url: http://t/\n"
    ));
    let s = at_first_step_with(
        &c,
        hook(
            healthy("rev1"),
            "gate",
            WebhookKind::ConfirmTrafficIncrease,
            true,
        ),
    );
    let closed = hook(
        healthy("rev1"),
        "gate",
        WebhookKind::ConfirmTrafficIncrease,
        false,
    );
    let d = decide(&c, Some(&s), &closed, t(70));
    assert_eq!(d.action, Action::WaitApproval(Gate::TrafficIncrease));
    assert_eq!(d.status.failed_checks, 0);
}

fn at_first_step_with(c: &Canary, o: Observations) -> Status {
    let s = initialized(c);
    let d = decide(c, Some(&s), &o, t(10));
    let d = decide(c, Some(&d.status), &o, t(40));
    assert_eq!(d.status.canary_weight, 10);
    d.status
}

#[test]
fn rollback_webhook_answering_yes_rolls_back() {
    let c = flagger(&format!(
        "{SEED}webhooks:\n- name: kill\n  type: rollback\n  url: http://t/\n"
    ));
    let s = at_first_step(&c);
    let o = hook(healthy("rev1"), "kill", WebhookKind::Rollback, true);
    let d = decide(&c, Some(&s), &o, t(45));
    assert!(matches!(d.action, Action::Rollback { .. }));
}

#[test]
fn unapplied_change_waits_then_rolls_back_past_deadline() {
    let c = flagger(SEED);
    let s = at_first_step(&c);
    let mut o = healthy("rev1");
    o.applied = false;
    let d = decide(&c, Some(&s), &o, t(100));
    assert_eq!(d.action, Action::Hold);
    assert_eq!(d.status.failed_checks, 0);
    let late = decide(&c, Some(&s), &o, t(40 + 600));
    assert!(
        matches!(late.action, Action::Rollback { ref reason, .. } if reason.contains("deadline"))
    );
}

#[test]
fn blue_green_iterates_then_switches_and_promotes() {
    let c = flagger("interval: 10s\nthreshold: 2\niterations: 3\n");
    let s = initialized(&c);
    let (actions, end, _) = run_until(&c, s, &obs("rev1"), t(0), |s| s.phase == Phase::Succeeded);
    assert_eq!(
        actions,
        vec![
            Action::StartRollout,
            Action::AdvanceIteration { done: 1, of: 3 },
            Action::AdvanceIteration { done: 2, of: 3 },
            Action::AdvanceIteration { done: 3, of: 3 },
            Action::AdvanceCanary { from: 0, to: 100 },
            Action::Promote,
            Action::AdvancePrimary { weight: 100 },
            Action::Finalise,
        ]
    );
    assert_eq!((end.primary_weight, end.canary_weight), (100, 0));
}

#[test]
fn ab_testing_iterates_then_promotes_without_shifting_weights() {
    // Istio: an SMI TrafficSplit cannot match requests, so osm refuses A/B.
    let c = flagger_on(
        "istio",
        "interval: 10s\niterations: 2\nmatch:\n- headers:\n    x-canary: {exact: insider}\n",
    );
    let s = initialized(&c);
    let (actions, _, _) = run_until(&c, s, &obs("rev1"), t(0), |s| s.phase == Phase::Succeeded);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::AdvanceCanary { .. })),
        "{actions:?}"
    );
    assert!(actions.contains(&Action::Promote));
}

#[test]
fn route_only_success_makes_the_other_service_stable() {
    let c = native("", "interval: 10s\nstepWeight: 50\n");
    let s = initialized(&c);
    assert_eq!(s.stable_service.as_deref(), Some("web-blue"));
    let (_, end, _) = run_until(&c, s, &obs("v2"), t(0), |s| s.phase == Phase::Succeeded);
    assert_eq!(end.stable_service.as_deref(), Some("web-green"));
    let (_, end, _) = run_until(&c, end, &obs("v3"), t(1000), |s| {
        s.phase == Phase::Succeeded && s.promoted_revision == "v3"
    });
    assert_eq!(end.stable_service.as_deref(), Some("web-blue"));
}

#[test]
fn every_phase_round_trips_through_yaml() {
    let c = flagger(SEED);
    let mut status = initialized(&c);
    let mut now = t(10);
    let mut phases = vec![status.phase];
    for _ in 0..40 {
        let d = decide(&c, Some(&status), &healthy("rev1"), now);
        status = d.status;
        let back = from_yaml(&to_yaml(&status).unwrap()).unwrap();
        assert_eq!(back, status);
        phases.push(status.phase);
        match d.wake_at {
            Some(w) => now = w.max(now + Duration::from_secs(1)),
            None => break,
        }
    }
    for p in [
        Phase::Initialized,
        Phase::Progressing,
        Phase::Promoting,
        Phase::Finalising,
        Phase::Succeeded,
    ] {
        assert!(phases.contains(&p), "{p:?} not reached");
    }
}

#[test]
fn wants_covers_every_judgement_and_idle_canaries_cost_nothing() {
    let c = flagger(&format!("{SEED}webhooks:\n- {{name: gate, type: confirm-rollout, url: 'http://t/'}}\n- {{name: smoke, type: pre-rollout, url: 'http://t/'}}\n- {{name: load, type: rollout, url: 'http://t/'}}\n"));
    let s = initialized(&c);
    assert_eq!(wants(&c, Some(&s), "rev0", t(5)), Wants::default());
    assert_eq!(
        wants(&c, Some(&s), "rev1", t(5)).hooks,
        vec![WebhookKind::ConfirmRollout]
    );
    // Walk a healthy rollout; whenever decide judges, wants asked for it.
    let mut status = s;
    let mut now = t(10);
    for _ in 0..30 {
        let w = wants(&c, Some(&status), "rev1", now);
        let mut o = obs("rev1");
        if w.metrics {
            o = with_metric(o, "request-success-rate", MetricValue::Value(99.9));
        }
        for kind in &w.hooks {
            for h in c.analysis.webhooks.iter().filter(|h| h.kind == *kind) {
                o = hook(o, &h.name, *kind, true);
            }
        }
        let d = decide(&c, Some(&status), &o, now);
        assert_ne!(
            d.action,
            Action::FailedCheck,
            "judged without observing at {now}: {w:?}"
        );
        status = d.status;
        if status.phase == Phase::Succeeded {
            return;
        }
        now = d.wake_at.unwrap_or(now + Duration::from_secs(1));
    }
    panic!("did not finish");
}

#[test]
fn settle_delay_starts_each_steps_clock_after_the_commit() {
    let mut c = flagger(SEED);
    c.settle = Duration::from_secs(20);
    let s = initialized(&c);
    let started = decide(&c, Some(&s), &healthy("rev1"), t(10));
    assert_eq!(started.action, Action::StartRollout);
    let early = decide(&c, Some(&started.status), &healthy("rev1"), t(40));
    assert_eq!(early.action, Action::Hold, "interval passed, settle not");
    assert_eq!(early.wake_at, Some(t(60)));
    let go = decide(&c, Some(&started.status), &healthy("rev1"), t(60));
    assert_eq!(go.action, Action::AdvanceCanary { from: 0, to: 10 });
    // With a sync target the engine's report replaces the settle delay.
    c.sync = Some(sluice::core::model::SyncTarget::Flux {
        kustomization: sluice::core::model::Name::parse("apps").unwrap(),
        namespace: sluice::core::model::Name::parse("flux-system").unwrap(),
    });
    assert_eq!(
        decide(&c, Some(&started.status), &healthy("rev1"), t(40)).action,
        Action::AdvanceCanary { from: 0, to: 10 }
    );
}

#[test]
fn a_merged_approval_restarts_the_step_clock_at_the_merge() {
    let c = native(
        "",
        "interval: 10s\nsteps:\n- weight: 20\n  pause: {}\n- weight: 40\n- weight: 60\n",
    );
    let s = initialized(&c);
    let d = decide(&c, Some(&s), &obs("v2"), t(0));
    let d = decide(&c, Some(&d.status), &obs("v2"), t(10));
    let waiting = decide(&c, Some(&d.status), &obs("v2"), t(20)).status;
    assert_eq!(waiting.phase, Phase::WaitingApproval);
    // The PR carries the approved change, made when the wait began; merged an hour later.
    let mut merged = sluice::core::operate::operate(
        &c,
        Some(&waiting),
        sluice::core::operate::Operation::Approve,
        "pr",
        t(20),
    )
    .unwrap()
    .status;
    merged.clock_from_merge = true;
    let first = decide(&c, Some(&merged), &obs("v2"), t(3600));
    assert_eq!(first.action, Action::ApprovalMerged);
    assert_eq!(first.status.step_started, t(3600));
    let early = decide(&c, Some(&first.status), &obs("v2"), t(3605));
    assert_eq!(
        early.action,
        Action::Hold,
        "weight 40 holds a full interval after the merge"
    );
}
