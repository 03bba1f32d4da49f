//! `sluice validate` checks the repo's `Judge` objects: every problem as `file:line: field:
//! message`, exit 1; a good Judge passes.

use crate::support::run_sluice;

const GOOD: &str = "apiVersion: sluice.dev/v1alpha1
kind: Judge
metadata:
  name: podinfo
spec:
  thresholds: {pass: 95, marginal: 75}
  metrics:
    - name: latency
      query: 'latency_ms{deployment=\"{{ workload }}\"}'
      direction: increase
";

#[test]
fn validate_reports_each_problem_of_a_judge_by_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("judge.yaml");
    std::fs::write(&file, GOOD).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let (code, stdout, stderr) = run_sluice(&["validate", dir]);
    assert_eq!(code, 0, "{stdout}{stderr}");

    let bad = GOOD.replace("marginal: 75", "marginal: 175").replace(
        "direction: increase",
        "direction: up\n      outlier: remove",
    );
    std::fs::write(&file, format!("{bad}---\n{GOOD}")).unwrap();
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
