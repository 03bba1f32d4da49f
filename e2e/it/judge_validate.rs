//! `sluice validate` checks the repo's `Judge` objects: every problem as `file:line: field:
//! message`, exit 1; a good Judge passes.

use crate::support::judge::judge_object;
use crate::support::run_sluice;

/// A Judge with no problem.
fn good() -> String {
    judge_object(
        "  name: podinfo\n",
        "{pass: 95, marginal: 75}",
        "  metrics:
    - name: latency
      query: 'latency_ms{deployment=\"{{ workload }}\"}'
      direction: increase
",
    )
}

#[test]
fn validate_reports_each_problem_of_a_judge_by_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("judge.yaml");
    std::fs::write(&file, good()).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let (code, stdout, stderr) = run_sluice(&["validate", dir]);
    assert_eq!(code, 0, "{stdout}{stderr}");

    let bad = good().replace("marginal: 75", "marginal: 175").replace(
        "direction: increase",
        "direction: up\n      outlier: remove",
    );
    std::fs::write(&file, format!("{bad}---\n{}", good())).unwrap();
    let (code, _, stderr) = run_sluice(&["validate", dir]);
    assert_eq!(code, 1, "{stderr}");
    let name = file.display().to_string();
    for expected in [
        format!("{name}:6: spec.thresholds.marginal: expected 0..=100, found 175"),
        format!("{name}:10: spec.metrics[0].direction: expected increase, decrease or either, found \"up\""),
        format!("{name}:11: spec.metrics[0].outlier: unknown field (did you mean \"outliers\"?)"),
        format!("{name}:16: metadata.name: a second Judge default/podinfo"),
    ] {
        assert!(stderr.contains(&expected), "missing {expected:?} in:\n{stderr}");
    }
}

#[test]
fn validate_refuses_a_min_samples_the_window_cannot_give_at_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("judge.yaml");
    let name = file.display().to_string();
    let dir = tmp.path().to_str().unwrap();
    let with = |settings: &str| {
        good().replace(
            "  thresholds: {pass: 95, marginal: 75}\n",
            &format!("  thresholds: {{pass: 95, marginal: 75}}\n{settings}"),
        )
    };
    let cases = [
        (
            "  minSamples: 0\n",
            format!("{name}:7: spec.minSamples: expected 1..=1000, found 0"),
        ),
        (
            "  minSamples: many\n",
            format!("{name}:7: spec.minSamples: expected an integer in 1..=1000, found"),
        ),
        // Without minSamples, its default of 50: 10 s at 1 s gives 11 values.
        (
            "  window: 10s\n  step: 1s\n",
            format!("{name}:8: spec.step: window 10s at step 1s gives at most 11 values per series, fewer than the 50 of minSamples (default): no metric could pass"),
        ),
        (
            "  window: 10s\n  step: 1s\n  minSamples: 12\n",
            format!("{name}:9: spec.minSamples: window 10s at step 1s gives at most 11 values per series, fewer than the 12 of minSamples"),
        ),
        // A window alone: the judge's own step is never under 1 s.
        (
            "  window: 30s\n",
            format!("{name}:7: spec.window: window 30s at step 1s gives at most 31 values per series"),
        ),
    ];
    for (settings, expected) in cases {
        std::fs::write(&file, with(settings)).unwrap();
        let (code, _, stderr) = run_sluice(&["validate", dir]);
        assert_eq!(code, 1, "{settings}: {stderr}");
        assert!(
            stderr.contains(&expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    for good in [
        "  window: 10s\n  step: 1s\n  minSamples: 11\n",
        "  window: 60s\n",
        "  minSamples: 1000\n",
    ] {
        std::fs::write(&file, with(good)).unwrap();
        let (code, stdout, stderr) = run_sluice(&["validate", dir]);
        assert_eq!(code, 0, "{good}: {stdout}{stderr}");
    }
}
