//! The statistical judge in the rollout rules, on a fixed clock: a pass advances, a fail counts
//! toward `threshold`, a critical failure rolls back at once, a marginal result waits for an
//! approval that advances it, and missing series fail the check.

use sluice_core::decide::{decide, Action, Decision};
use sluice_core::judge::{JudgeMetric, JudgeQuery, JudgeSpec, MetricRule, Thresholds};
use sluice_core::judged::{JudgeObservation, MetricSeries, JUDGE_CHECK};
use sluice_core::model::Canary;
use sluice_core::observe::Observations;
use sluice_core::operate::{operate, Operation};
use sluice_core::status::{Phase, Status};
use sluice_core::trailer::check_trailer;

use crate::builders::{canary, t};

fn metric(name: &str, critical: bool) -> JudgeMetric {
    JudgeMetric {
        name: name.into(),
        query: Some(JudgeQuery::Promql(format!(
            "{name}{{deployment=\"{{{{ workload }}}}\"}}"
        ))),
        group: "default".into(),
        muted: false,
        rule: MetricRule {
            direction: sluice_core::judge::Direction::Increase,
            critical,
            ..MetricRule::default()
        },
    }
}

/// Two metrics, p99 and p50; pass at 95, marginal at 40: one of two `High` scores 50.
fn spec(critical: bool) -> JudgeSpec {
    JudgeSpec {
        metrics: vec![metric("p99", critical), metric("p50", false)],
        group_weights: Vec::new(),
        thresholds: Thresholds {
            pass: 95.0,
            marginal: 40.0,
        },
        window: None,
        step: None,
        // The series below hold 30 values.
        min_samples: 30,
    }
}

fn primary() -> Vec<f64> {
    (0..30).map(|i| 100.0 + f64::from(i)).collect()
}

fn slower() -> Vec<f64> {
    (0..30).map(|i| 200.0 + f64::from(i)).collect()
}

/// Observations at revision r1 with the canary's p99 and p50 series.
fn obs(p99: Vec<f64>, p50: Vec<f64>) -> Observations {
    Observations {
        judge: Some(JudgeObservation::Series(vec![
            MetricSeries {
                name: "p99".into(),
                canary: p99,
                baseline: primary(),
            },
            MetricSeries {
                name: "p50".into(),
                canary: p50,
                baseline: primary(),
            },
        ])),
        ..Observations::revision("r1")
    }
}

/// A judged canary at its first weight, its first judgement due at t(70).
fn at_first_step(judge: JudgeSpec) -> (Canary<()>, Status) {
    let c = canary().judge(judge).build();
    let s0 = decide(&c, None, &Observations::revision("r0"), t(0)).status;
    let s1 = decide(&c, Some(&s0), &Observations::revision("r1"), t(10)).status;
    let s2 = decide(&c, Some(&s1), &Observations::revision("r1"), t(40));
    assert_eq!(s2.status.canary_weight, 10, "{:?}", s2.events);
    (c, s2.status)
}

fn judge_record(d: &Decision) -> String {
    let judged = d
        .checks
        .iter()
        .find(|c| c.record.name == JUDGE_CHECK)
        .expect("the judge's check");
    format!("{} / {}", check_trailer(judged), judged.record.detail)
}

#[test]
fn a_canary_like_its_primary_passes_and_advances() {
    let (c, s) = at_first_step(spec(false));
    let d = decide(&c, Some(&s), &obs(primary(), primary()), t(70));
    assert_eq!(d.status.canary_weight, 20, "{:?}", d.events);
    assert_eq!(
        judge_record(&d),
        "judge=100 min=95 pass / score=100 pass (pass>=95 marginal>=40)"
    );
}

#[test]
fn a_slower_canary_fails_its_checks_until_the_threshold_rolls_it_back() {
    let (c, s) = at_first_step(spec(false));
    let first = decide(&c, Some(&s), &obs(slower(), slower()), t(70));
    assert_eq!(first.action, Action::FailedCheck);
    assert_eq!(first.status.failed_checks, 1);
    assert_eq!(
        judge_record(&first),
        "judge=0 min=95 fail / score=0 fail (pass>=95 marginal>=40)"
    );
    let second = decide(&c, Some(&first.status), &obs(slower(), slower()), t(100));
    assert!(
        matches!(second.action, Action::Rollback { .. }),
        "{:?}",
        second.action
    );
    assert_eq!(second.status.phase, Phase::Failed);
}

#[test]
fn a_critical_metric_past_its_limit_rolls_back_at_once() {
    let (c, s) = at_first_step(spec(true));
    let d = decide(&c, Some(&s), &obs(slower(), primary()), t(70));
    let Action::Rollback { reason, .. } = &d.action else {
        panic!("{:?}", d.action)
    };
    assert!(
        reason.starts_with("the judge found a critical failure (judge score=0 fail"),
        "{reason}"
    );
    assert_eq!(d.status.phase, Phase::Failed);
}

#[test]
fn a_marginal_canary_waits_for_approval_which_advances_it() {
    let (c, s) = at_first_step(spec(false));
    let d = decide(&c, Some(&s), &obs(slower(), primary()), t(70));
    assert!(
        matches!(d.action, Action::WaitApproval(_)),
        "{:?}",
        d.action
    );
    assert_eq!(d.status.phase, Phase::WaitingApproval);
    assert_eq!(
        judge_record(&d),
        "judge=50 min=95 fail / score=50 marginal (pass>=95 marginal>=40)"
    );
    // A later judgement that passes does not open the wait: only a human does.
    let later = decide(&c, Some(&d.status), &obs(primary(), primary()), t(100));
    assert_eq!(later.action, Action::Hold, "{:?}", later.events);
    let approved = operate(&c, Some(&d.status), Operation::Approve, "ok", t(110)).unwrap();
    assert_eq!(approved.status.canary_weight, 20);
    assert_eq!(approved.status.phase, Phase::Progressing);
}

#[test]
fn series_not_observed_or_a_failed_range_query_fail_the_check() {
    let (c, s) = at_first_step(spec(false));
    let none = decide(&c, Some(&s), &Observations::revision("r1"), t(70));
    assert_eq!(none.action, Action::FailedCheck);
    assert_eq!(
        judge_record(&none),
        "judge=unobserved min=95 fail / not observed"
    );
    let failed = Observations {
        judge: Some(JudgeObservation::Error("Prometheus x: HTTP 500".into())),
        ..Observations::revision("r1")
    };
    let d = decide(&c, Some(&s), &failed, t(70));
    assert_eq!(d.action, Action::FailedCheck);
    assert_eq!(
        judge_record(&d),
        "judge=error min=95 fail / query failed: Prometheus x: HTTP 500"
    );
}

/// A marginal judgement is a question for a human only when every other check passed: a
/// threshold check that fails on the same tick is a failure whatever the judge says (as in
/// Kayenta, where a marginal score asks a person about the comparison, not about a broken
/// limit), so the tick counts toward `threshold` and no approval is asked for. The next tick
/// whose other checks pass opens the wait.
#[test]
fn a_marginal_judgement_with_a_failed_threshold_check_counts_as_a_failure() {
    use sluice_core::model::ThresholdRange;
    use sluice_core::observe::{MetricObservation, MetricValue};
    let c = canary()
        .judge(spec(false))
        .metric(
            "errors",
            ThresholdRange {
                min: None,
                max: Some(1.0),
            },
        )
        .build();
    let s0 = decide(&c, None, &Observations::revision("r0"), t(0)).status;
    let s1 = decide(&c, Some(&s0), &Observations::revision("r1"), t(10)).status;
    let s = decide(&c, Some(&s1), &Observations::revision("r1"), t(40)).status;
    let with_errors = |errors: f64| Observations {
        metrics: vec![MetricObservation {
            name: "errors".into(),
            value: MetricValue::Value(errors),
        }],
        ..obs(slower(), primary())
    };
    let failed = decide(&c, Some(&s), &with_errors(5.0), t(70));
    assert_eq!(failed.action, Action::FailedCheck, "{:?}", failed.events);
    assert_eq!(failed.status.failed_checks, 1);
    assert_eq!(failed.status.phase, Phase::Progressing);
    assert_eq!(
        judge_record(&failed),
        "judge=50 min=95 fail / score=50 marginal (pass>=95 marginal>=40)"
    );
    let waits = decide(&c, Some(&failed.status), &with_errors(0.5), t(100));
    assert!(
        matches!(waits.action, Action::WaitApproval(_)),
        "{:?}",
        waits.action
    );
    assert_eq!(waits.status.phase, Phase::WaitingApproval);
}
