//! A Rollout's analysis in the rollout rules, on a fixed clock: an inline `analysis` step holds
//! its step until the run is Successful, a Failed or Error run aborts back to stable, an
//! Inconclusive one waits for a human, a background analysis stops the rollout only when it
//! fails, and every measurement is a check of the decision.

use std::time::Duration;

use sluice_core::argo_analysis::{MetricRules, DEFAULT_CONSECUTIVE_ERROR_LIMIT};
use sluice_core::argo_expr::parse;
use sluice_core::decide::{decide, Action, Decision, RollbackCause};
use sluice_core::model::{ArgoGate, Canary};
use sluice_core::observe::{MetricObservation, MetricValue, Observations};
use sluice_core::schedule::Pause;
use sluice_core::status::{Phase, Status};

use crate::builders::{canary, t};

fn rules(count: Option<u32>) -> MetricRules {
    MetricRules {
        success: Some(parse("result[0] >= 0.95").unwrap()),
        failure: None,
        count,
        has_interval: count.is_some(),
        failure_limit: 0,
        inconclusive_limit: 0,
        consecutive_error_limit: DEFAULT_CONSECUTIVE_ERROR_LIMIT,
        consecutive_success_limit: 0,
        interval: None,
        initial_delay: None,
    }
}

fn gate(inline: bool, from_step: u32, count: Option<u32>) -> ArgoGate {
    ArgoGate {
        metric: "success-rate".into(),
        name: "success-rate".into(),
        rules: rules(count),
        list: true,
        from_step,
        inline,
        templates: vec![("success-rate".into(), false)],
        args: Vec::new(),
        job: None,
    }
}

/// Steps 20 then 50, no pause; the analysis gate given.
fn rollout(g: ArgoGate) -> Canary<()> {
    canary()
        .steps(&[(20, Pause::Interval), (50, Pause::Interval)])
        .interval(Duration::from_secs(60))
        .argo(g)
        .build()
}

fn obs(value: MetricValue) -> Observations {
    Observations {
        metrics: vec![MetricObservation {
            name: "success-rate".into(),
            value,
        }],
        ..Observations::revision("r1")
    }
}

/// The canary at step 1 (weight 20) of revision r1, its clock started at t(100).
fn at_step_one(c: &Canary<()>) -> Status {
    let init = decide(c, None, &Observations::revision("r0"), t(0)).status;
    let started = decide(c, Some(&init), &Observations::revision("r1"), t(10)).status;
    let first = decide(c, Some(&started), &Observations::revision("r1"), t(100));
    assert!(
        matches!(first.action, Action::AdvanceCanary { from: 0, to: 20 }),
        "{first:?}"
    );
    first.status
}

fn at(c: &Canary<()>, s: &Status, value: MetricValue, secs: i64) -> Decision {
    decide(c, Some(s), &obs(value), t(secs))
}

#[test]
fn a_passing_inline_analysis_lets_the_step_end() {
    let c = rollout(gate(true, 1, None));
    let s = at_step_one(&c);
    let d = at(&c, &s, MetricValue::Value(0.99), 200);
    assert!(
        matches!(d.action, Action::AdvanceCanary { from: 20, to: 50 }),
        "{d:?}"
    );
    assert_eq!(d.checks.len(), 1);
    assert!(d.checks[0].record.passed);
    assert_eq!(d.checks[0].record.value, Some(0.99));
    // The inline step's measurements end with it.
    assert!(d.status.analysis.is_empty());
}

#[test]
fn a_failing_inline_analysis_aborts_back_to_stable() {
    let c = rollout(gate(true, 1, None));
    let s = at_step_one(&c);
    let d = at(&c, &s, MetricValue::Value(0.5), 200);
    match &d.action {
        Action::Rollback { reason, cause } => {
            assert!(reason.contains("analysis run Failed"), "{reason}");
            assert!(reason.contains("success-rate"), "{reason}");
            assert!(matches!(cause, RollbackCause::FailedChecks { .. }));
        }
        other => panic!("expected a rollback, got {other:?}"),
    }
    assert_eq!((d.status.primary_weight, d.status.canary_weight), (100, 0));
    assert_eq!(d.status.phase, Phase::Failed);
    assert!(!d.checks[0].record.passed);
}

#[test]
fn an_error_never_passes_and_too_many_abort() {
    let c = rollout(gate(true, 1, None));
    let mut s = at_step_one(&c);
    let mut now = 200;
    // consecutiveErrorLimit 4: four errors hold the step, each recorded; the fifth aborts.
    for _ in 0..DEFAULT_CONSECUTIVE_ERROR_LIMIT {
        let d = at(&c, &s, MetricValue::Error("HTTP 503".into()), now);
        assert_eq!(d.action, Action::Measured, "{d:?}");
        assert_eq!(d.status.canary_weight, 20);
        assert!(!d.checks[0].record.passed);
        s = d.status;
        now += 60;
    }
    let d = at(&c, &s, MetricValue::Error("HTTP 503".into()), now);
    match &d.action {
        Action::Rollback { reason, .. } => {
            assert!(reason.contains("analysis run Error"), "{reason}")
        }
        other => panic!("expected a rollback, got {other:?}"),
    }
    // No data indexed is an Error measurement too, never a pass.
    let s = at_step_one(&c);
    let d = at(&c, &s, MetricValue::NoData, 200);
    assert_eq!(d.action, Action::Measured);
    assert!(!d.checks[0].record.passed);
}

#[test]
fn a_counted_metric_holds_until_its_count() {
    let c = rollout(gate(true, 1, Some(2)));
    let s = at_step_one(&c);
    let first = at(&c, &s, MetricValue::Value(0.99), 200);
    assert_eq!(first.action, Action::Measured);
    assert_eq!(first.status.analysis[0].measurements.len(), 1);
    let second = at(&c, &first.status, MetricValue::Value(0.98), 260);
    assert!(
        matches!(second.action, Action::AdvanceCanary { from: 20, to: 50 }),
        "{second:?}"
    );
}

#[test]
fn an_inconclusive_run_waits_for_a_human() {
    let mut g = gate(true, 1, None);
    g.rules.failure = Some(parse("result[0] < 0.5").unwrap());
    let c = rollout(g);
    let s = at_step_one(&c);
    let d = at(&c, &s, MetricValue::Value(0.7), 200);
    assert!(matches!(d.action, Action::WaitApproval(_)), "{d:?}");
    assert!(d.events[0].contains("Inconclusive"), "{:?}", d.events);
    // Waiting, it holds without committing again.
    let again = at(&c, &d.status, MetricValue::Value(0.7), 400);
    assert_eq!(again.action, Action::Hold);
}

#[test]
fn a_background_analysis_runs_from_its_starting_step_and_stops_only_on_failure() {
    let c = rollout(gate(false, 2, None));
    let s = at_step_one(&c);
    // Step 1 is before startingStep: nothing is measured, the step ends.
    let d = decide(&c, Some(&s), &Observations::revision("r1"), t(200));
    assert!(
        matches!(d.action, Action::AdvanceCanary { from: 20, to: 50 }),
        "{d:?}"
    );
    assert!(d.checks.is_empty());
    // Step 2: a failing measurement aborts.
    let failed = at(&c, &d.status, MetricValue::Value(0.1), 300);
    assert!(
        matches!(failed.action, Action::Rollback { .. }),
        "{failed:?}"
    );
    // An indefinite background metric that passes does not hold the step: it is promoted.
    let mut g = gate(false, 1, None);
    g.rules.has_interval = true;
    let c = rollout(g);
    let s = at_step_one(&c);
    let d = at(&c, &s, MetricValue::Value(0.99), 200);
    assert!(
        matches!(d.action, Action::AdvanceCanary { from: 20, to: 50 }),
        "{d:?}"
    );
    assert_eq!(
        d.status.analysis.len(),
        1,
        "the background run keeps its measurements"
    );
    let d = at(&c, &d.status, MetricValue::Value(0.99), 300);
    assert_eq!(d.action, Action::Promote, "{d:?}");
    assert!(d.status.analysis.is_empty());
}

/// Measurements follow the metric's `initialDelay` and `interval` as Argo schedules them,
/// whatever the judgements in between: nothing before the delay, then one per interval, on
/// a clock the test steps.
#[test]
fn measurements_wait_for_initial_delay_and_interval() {
    let mut g = gate(true, 1, Some(2));
    g.rules.interval = Some(Duration::from_secs(300));
    g.rules.initial_delay = Some(Duration::from_secs(120));
    let c = rollout(g);
    let s = at_step_one(&c);
    // The step started at 100: the delay runs to 220, so a judgement at 160 measures nothing.
    let early = at(&c, &s, MetricValue::Value(0.99), 160);
    assert!(early.checks.is_empty(), "{early:?}");
    assert_eq!(early.status.canary_weight, 20);
    let first = at(&c, &s, MetricValue::Value(0.99), 400);
    assert_eq!(first.action, Action::Measured, "{first:?}");
    assert_eq!(first.checks.len(), 1);
    let s = first.status;
    // The next is due an interval after the first (700): not at 500 or 699.
    for now in [500, 699] {
        let between = at(&c, &s, MetricValue::Value(0.99), now);
        assert!(between.checks.is_empty(), "at {now}: {between:?}");
        assert_eq!(between.status.canary_weight, 20);
    }
    let second = at(&c, &s, MetricValue::Value(0.99), 700);
    assert!(
        matches!(second.action, Action::AdvanceCanary { from: 20, to: 50 }),
        "{second:?}"
    );
    assert_eq!(second.checks.len(), 1);
}

/// The background analysis and an analysis step measuring a metric of one name: the step's
/// gate is keyed `name@stepN` ([`step_key`]), as Argo runs the two as separate AnalysisRuns.
fn background_and_step() -> Canary<()> {
    let mut step = gate(true, 1, None);
    step.metric = sluice_core::argo_analysis::step_key("success-rate", 1);
    canary()
        .steps(&[(20, Pause::Interval), (50, Pause::Interval)])
        .interval(Duration::from_secs(60))
        .argo(gate(false, 1, None))
        .argo(step)
        .build()
}

fn two_runs(background: f64, step: f64) -> Observations {
    Observations {
        metrics: vec![
            MetricObservation {
                name: "success-rate".into(),
                value: MetricValue::Value(background),
            },
            MetricObservation {
                name: "success-rate@step1".into(),
                value: MetricValue::Value(step),
            },
        ],
        ..Observations::revision("r1")
    }
}

#[test]
fn one_metric_name_in_the_background_and_a_step_is_judged_as_two_runs() {
    let c = background_and_step();
    let s = at_step_one(&c);
    let d = decide(&c, Some(&s), &two_runs(0.99, 0.97), t(200));
    assert!(
        matches!(d.action, Action::AdvanceCanary { from: 20, to: 50 }),
        "{d:?}"
    );
    let mut names: Vec<&str> = d.checks.iter().map(|c| c.record.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["success-rate", "success-rate@step1"]);
    // The step's run ends with its step; the background run's history goes on.
    let kept: Vec<&str> = d
        .status
        .analysis
        .iter()
        .map(|h| h.metric.as_str())
        .collect();
    assert_eq!(kept, ["success-rate"]);

    // The step's run failing (the background one passing) names the step's key.
    let d = decide(&c, Some(&s), &two_runs(0.99, 0.5), t(200));
    match &d.action {
        Action::Rollback { reason, .. } => {
            assert!(reason.contains("success-rate@step1"), "{reason}")
        }
        other => panic!("expected a rollback, got {other:?}"),
    }
}

/// A job metric: its Job read back as `1` (Complete) or `0` (Failed), judged `result == 1`.
fn job_gate() -> ArgoGate {
    ArgoGate {
        rules: MetricRules {
            success: Some(parse("result == 1").unwrap()),
            ..rules(None)
        },
        list: false,
        job: Some("{}".into()),
        ..gate(true, 1, None)
    }
}

#[test]
fn a_running_job_takes_no_measurement_and_its_result_decides() {
    let c = rollout(job_gate());
    let s = at_step_one(&c);
    // Running (no data): no measurement, no check, the step holds.
    let d = at(&c, &s, MetricValue::NoData, 200);
    assert!(d.checks.is_empty(), "{d:?}");
    assert_eq!(d.status.canary_weight, 20);
    assert!(d.status.analysis.iter().all(|h| h.measurements.is_empty()));
    // Complete: the step ends.
    let d = at(&c, &s, MetricValue::Value(1.0), 260);
    assert!(
        matches!(d.action, Action::AdvanceCanary { from: 20, to: 50 }),
        "{d:?}"
    );
    assert!(d.checks[0].record.passed);
    // Failed: back to stable.
    let d = at(&c, &s, MetricValue::Value(0.0), 260);
    assert!(matches!(d.action, Action::Rollback { .. }), "{d:?}");
    assert!(!d.checks[0].record.passed);
}
