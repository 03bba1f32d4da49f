//! Properties of the judge over generated series: swapping canary and baseline swaps High and
//! Low, identical series pass, every score lies in 0..=100, a score above 0 needs a metric that
//! passed, and series under the minimum never pass.

use proptest::prelude::*;
use sluice_core::judge::{
    classify, judge, score, Label, MetricInput, MetricRule, Outcome, Scored, Thresholds,
};

fn series() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(
        prop_oneof![1.0..1000.0f64, (1..20i32).prop_map(f64::from)],
        2..40,
    )
}

fn label() -> impl Strategy<Value = Label> {
    prop_oneof![
        Just(Label::Pass),
        Just(Label::High),
        Just(Label::Low),
        Just(Label::Nodata),
        Just(Label::NodataFailMetric),
        Just(Label::Error),
    ]
}

/// The label a swap of canary and baseline should give.
fn mirrored(label: Label) -> Label {
    match label {
        Label::High => Label::Low,
        Label::Low => Label::High,
        other => other,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn swapping_the_series_swaps_high_and_low(a in series(), b in series(), shift in 0.0..500.0f64) {
        let canary: Vec<f64> = a.iter().map(|v| v + shift).collect();
        // Two constant series get noise in the order given; that case is Kayenta's, not this.
        let constant = |s: &[f64]| s.iter().all(|v| *v == s[0]);
        prop_assume!(!(constant(&canary) && constant(&b)));
        // The test's interval is mirrored by a swap, and so is the mean ratio's verdict; the
        // tolerance bound is not: it is a share of the estimate, which R's asymptotic
        // `wilcox.test` (and Kayenta's port of it) finds by `uniroot` on a step function with a
        // continuity correction, so with ties the estimate of a swap is not the negated
        // estimate (406.6 one way, -448.9 the other in a case proptest found). Without the
        // bound the swap mirrors exactly; with it, a swap never keeps the same direction.
        let exact = MetricRule { tolerance: 0.0, ..MetricRule::default() };
        let forward = classify(&canary, &b, &exact).label;
        let backward = classify(&b, &canary, &exact).label;
        prop_assert_eq!(backward, mirrored(forward));
        let rule = MetricRule::default();
        let forward = classify(&canary, &b, &rule).label;
        let backward = classify(&b, &canary, &rule).label;
        if forward == Label::High || forward == Label::Low {
            prop_assert_ne!(backward, forward);
        }
    }

    #[test]
    fn identical_series_pass(a in series(), seed in 0usize..1000) {
        let mut shuffled = a.clone();
        let len = shuffled.len();
        shuffled.rotate_left(seed % len);
        let result = classify(&shuffled, &a, &MetricRule { critical: true, ..MetricRule::default() });
        prop_assert_eq!(result.label, Label::Pass);
        prop_assert!(!result.critical);
    }

    #[test]
    fn every_score_is_between_0_and_100(
        labels in prop::collection::vec((label(), 0usize..4, any::<bool>()), 0..20),
        weight in 0.0..100.0f64,
    ) {
        let groups = ["a", "b", "c", "d"];
        let metrics: Vec<Scored<'_>> = labels
            .iter()
            .map(|(label, g, critical)| Scored { group: groups[*g], label: *label, critical: *critical })
            .collect();
        let s = score(&metrics, &[("a".to_string(), weight)], Thresholds { pass: 95.0, marginal: 75.0 });
        prop_assert!((0.0..=100.0).contains(&s.summary), "{}", s.summary);
        for g in &s.groups {
            prop_assert!((0.0..=100.0).contains(&g.score), "{}", g.score);
        }
    }

    #[test]
    fn a_score_above_zero_needs_a_metric_that_passed(
        labels in prop::collection::vec((label(), 0usize..3, any::<bool>()), 0..12),
        weight in 0.0..100.0f64,
    ) {
        let groups = ["a", "b", "c"];
        let metrics: Vec<Scored<'_>> = labels
            .iter()
            .map(|(label, g, critical)| Scored { group: groups[*g], label: *label, critical: *critical })
            .collect();
        let s = score(&metrics, &[("a".to_string(), weight)], Thresholds { pass: 0.01, marginal: 0.0 });
        if s.summary > 0.0 {
            prop_assert!(metrics.iter().any(|m| m.label == Label::Pass), "{metrics:?} {s:?}");
        }
    }

    #[test]
    fn series_under_the_minimum_never_pass(a in series(), b in series(), extra in 1usize..10) {
        let min_samples = a.len().min(b.len()) + extra;
        let input = MetricInput {
            name: "m",
            group: "default",
            muted: false,
            rule: MetricRule::default(),
            canary: &a,
            baseline: &b,
        };
        let j = judge(&[input], &[], Thresholds { pass: 95.0, marginal: 75.0 }, min_samples);
        prop_assert_ne!(j.metrics[0].classification.label, Label::Pass);
        prop_assert_eq!(j.score.outcome, Outcome::Fail);
    }
}
