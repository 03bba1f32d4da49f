//! The real `sluice` binary: `validate` and `plan` as a user runs them.

use std::process::Command;

fn sluice(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run sluice");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn validate_accepts_the_examples() {
    let (code, out, err) = sluice(&["validate", "examples"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn validate_reports_every_error_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: podinfo}\nspec:\n  provider: cilium\n  targetRef: {kind: Deployment, name: podinfo}\n  service: {port: 9898}\n  analysis:\n    stepWeight: 120\n",
    )
    .unwrap();
    let (code, _, err) = sluice(&["validate", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("bad.yaml:5: spec.provider:"), "{err}");
    assert!(
        err.contains("bad.yaml:9: spec.analysis.stepWeight: expected 1..=100, found 120"),
        "{err}"
    );
}

#[test]
fn plan_json_reproduces_flagger_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("stepWeight: 20\n    maxWeight: 50", vec![20, 40, 60]),
        ("stepWeight: 50\n    maxWeight: 100", vec![50, 100]),
        ("stepWeights: [1, 2, 10, 80]", vec![1, 2, 10, 80]),
        ("stepWeights: [1, 2, 10, 200]", vec![1, 2, 10, 100]),
    ];
    for (i, (schedule, expected)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("c{i}.yaml"));
        std::fs::write(
            &file,
            format!("apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {{name: podinfo}}\nspec:\n  provider: osm\n  targetRef: {{kind: Deployment, name: podinfo}}\n  service: {{port: 9898}}\n  analysis:\n    interval: 1m\n    stepWeightPromotion: 5\n    {schedule}\n"),
        )
        .unwrap();
        let (code, out, err) = sluice(&["plan", file.to_str().unwrap(), "--output", "json"]);
        assert_eq!(code, 0, "{err}");
        let plans: serde_json::Value = serde_json::from_str(&out).unwrap();
        let weights: Vec<u64> = plans[0]["canaryWeights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let expected: Vec<u64> = expected.iter().map(|&w| w as u64).collect();
        assert_eq!(weights, expected, "{schedule}");
        assert_eq!(plans[0]["strategy"], "canary");
        let last = *expected.last().unwrap();
        let promo: Vec<u64> = plans[0]["promotionPrimaryWeights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let mut want = Vec::new();
        let mut p = 100 - last;
        while p < 100 {
            p = (p + 5).min(100);
            want.push(p);
        }
        assert_eq!(promo, want);
    }
}

#[test]
fn plan_shows_native_rules_and_approvals() {
    let (code, out, err) = sluice(&["plan", "examples/native/canary.yaml", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let plans: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plans[0]["canaryWeights"], serde_json::json!([20, 50, 80]));
    assert_eq!(
        plans[0]["approvals"],
        serde_json::json!(["before promotion"])
    );
    // 30 s to start + 60 s + 90 s pauses + one interval before promotion + 8 promotion
    // steps + finalisation, at 30 s each.
    assert_eq!(
        plans[0]["minDurationSeconds"],
        30 + 60 + 90 + 30 + 8 * 30 + 30
    );
}

#[test]
fn native_step_weight_never_exceeds_max() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    std::fs::write(&file, "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web}\nspec:\n  routeOnly: {services: [a, b], revision: '1'}\n  service: {port: 80}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {stepWeight: 20, maxWeight: 50}\n").unwrap();
    let (code, out, err) = sluice(&["plan", file.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let plans: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plans[0]["canaryWeights"], serde_json::json!([20, 40, 50]));
}

#[test]
fn logs_written_to_a_file_carry_no_colour_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = crate::support::seeded_remote(
        tmp.path(),
        &[(
            "apps/web.yaml",
            "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  routeOnly: {services: [web-blue, web-green], revision: v1}\n  service: {port: 8080}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {interval: 1s, stepWeights: [50]}\n",
        )],
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "reconcile",
            "--repo",
            &bare.display().to_string(),
            "--workdir",
            &tmp.path().join("w").display().to_string(),
        ])
        .env("SLUICE_LOG", "info")
        .output()
        .expect("run sluice");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("Initialization done"),
        "the tick logged: {err}"
    );
    assert!(
        !err.contains('\u{1b}'),
        "escape codes in a log file: {err:?}"
    );
}
