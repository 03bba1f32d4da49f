//! Kayenta's scorer tests (spinnaker/kayenta,
//! `kayenta-judge/src/test/scala/com/netflix/kayenta/judge/ScorerSuite.scala`), ported with their
//! expected summary scores. One difference, asked for by issue 29: a group with nothing to count
//! reports the score 100 it contributes to the summary, where Kayenta reports 0 and counts 100.

use sluice_core::judge::{score, Label, Outcome, Scored, Thresholds};

const THRESHOLDS: Thresholds = Thresholds {
    pass: 95.0,
    marginal: 75.0,
};

fn metric(group: &str, label: Label) -> Scored<'_> {
    Scored {
        group,
        label,
        critical: false,
    }
}

fn critical(group: &str, label: Label) -> Scored<'_> {
    Scored {
        group,
        label,
        critical: true,
    }
}

fn weights(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
    pairs.iter().map(|(g, w)| (g.to_string(), *w)).collect()
}

fn summary(metrics: &[Scored<'_>], group_weights: &[(&str, f64)]) -> f64 {
    score(metrics, &weights(group_weights), THRESHOLDS).summary
}

#[test]
fn kayenta_single_metric_pass() {
    assert_eq!(summary(&[metric("test-group", Label::Pass)], &[]), 100.0);
}

#[test]
fn kayenta_single_metric_fail() {
    assert_eq!(summary(&[metric("test-group", Label::High)], &[]), 0.0);
}

#[test]
fn kayenta_single_group_nodata() {
    let s = score(
        &[metric("test-group-nodata", Label::Nodata)],
        &[],
        THRESHOLDS,
    );
    assert_eq!(s.groups.len(), 1);
    assert_eq!(
        s.groups[0].score, 100.0,
        "nothing to count scores 100 (issue 29)"
    );
    assert_eq!(s.summary, 0.0);
    assert_eq!(s.outcome, Outcome::Fail);
}

#[test]
fn kayenta_two_groups_one_pass_one_nodata() {
    let metrics = [
        metric("test-group-pass", Label::Pass),
        metric("test-group-pass", Label::Pass),
        metric("test-group-nodata", Label::Nodata),
    ];
    let s = score(&metrics, &[], THRESHOLDS);
    assert_eq!(s.groups.len(), 2);
    assert_eq!(s.summary, 100.0);
}

#[test]
fn kayenta_one_group_two_metrics() {
    let metrics = [
        metric("test-group", Label::Pass),
        metric("test-group", Label::High),
    ];
    assert_eq!(summary(&metrics, &[]), 50.0);
}

#[test]
fn kayenta_one_group_three_metrics() {
    let metrics = [
        metric("test-group", Label::Pass),
        metric("test-group", Label::High),
        metric("test-group", Label::Low),
    ];
    assert_eq!(summary(&metrics, &[]), 33.33);
}

#[test]
fn kayenta_two_groups_three_metrics() {
    let metrics = [
        metric("group-1", Label::Pass),
        metric("group-1", Label::Pass),
        metric("group-2", Label::High),
    ];
    assert_eq!(
        summary(&metrics, &[("group-1", 75.0), ("group-2", 25.0)]),
        75.0
    );
}

#[test]
fn kayenta_two_groups_three_metrics_equal_weight() {
    let metrics = [
        metric("group-1", Label::Pass),
        metric("group-1", Label::High),
        metric("group-2", Label::High),
    ];
    assert_eq!(
        summary(&metrics, &[("group-1", 50.0), ("group-2", 50.0)]),
        25.0
    );
}

#[test]
fn kayenta_two_groups_three_metrics_equal_weight_one_nodata() {
    let metrics = [
        metric("group-1", Label::Pass),
        metric("group-1", Label::Nodata),
        metric("group-2", Label::High),
    ];
    assert_eq!(
        summary(&metrics, &[("group-1", 50.0), ("group-2", 50.0)]),
        50.0
    );
}

#[test]
fn kayenta_two_metrics_one_good_one_critical_fail() {
    let metrics = [
        metric("test-group", Label::Pass),
        critical("test-group", Label::High),
    ];
    assert_eq!(summary(&metrics, &[]), 0.0);
}

#[test]
fn kayenta_two_metrics_one_low_one_good_critical() {
    let metrics = [
        metric("test-group", Label::Low),
        critical("test-group", Label::Pass),
    ];
    assert_eq!(summary(&metrics, &[]), 50.0);
}

#[test]
fn kayenta_two_metrics_one_good_one_critical_nodata() {
    let metrics = [
        metric("test-group", Label::Pass),
        critical("test-group", Label::Nodata),
    ];
    assert_eq!(summary(&metrics, &[]), 0.0);
}

#[test]
fn kayenta_two_groups_unequal_weight_four_metrics() {
    let metrics = [
        metric("group1", Label::High),
        metric("group1", Label::Low),
        metric("group1", Label::Pass),
        metric("group2", Label::High),
    ];
    assert_eq!(
        summary(&metrics, &[("group1", 15.0), ("group2", 85.0)]),
        5.0
    );
}

#[test]
fn thresholds_split_pass_marginal_and_fail() {
    let t = Thresholds {
        pass: 90.0,
        marginal: 50.0,
    };
    let three = |labels: [Label; 2]| {
        score(&[metric("g", labels[0]), metric("g", labels[1])], &[], t).outcome
    };
    assert_eq!(three([Label::Pass, Label::Pass]), Outcome::Pass);
    assert_eq!(three([Label::Pass, Label::High]), Outcome::Marginal);
    assert_eq!(three([Label::Low, Label::High]), Outcome::Fail);
}
