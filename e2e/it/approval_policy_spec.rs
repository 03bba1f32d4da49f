//! Approval policies as written: a native canary's `spec.approval`, a wave's `approval`
//! block, a Flagger canary's `sluice.dev/approval-*` annotations and the repo default, each
//! read into the policy the canary carries; bad values are refused with file:line: field.

use sluice::core::approval::{ApprovalPolicy, Approver, MergeBy};
use sluice::manifest::load::load_text;
use sluice::manifest::settings::{parse_settings, Settings, SETTINGS_PATH};

use crate::support::canary::spec_errors as errors;
use crate::support::canary::{native_podinfo, podinfo};

const FILE: &str = "apps/podinfo/canary.yaml";
const FLAGGER_ANALYSIS: &str = "    stepWeight: 20\n    maxWeight: 40\n";
const ANALYSIS: &str = "    interval: 30s\n    stepWeight: 20\n    maxWeight: 40\n";

fn policies(text: &str, settings: &Settings) -> Vec<Option<ApprovalPolicy>> {
    let loaded = load_text(FILE, text, settings);
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    loaded.canaries.into_iter().map(|c| c.approval).collect()
}

fn repo_default() -> Settings {
    parse_settings(SETTINGS_PATH, "approval:\n  required: 1\n  from: [ops]\n").unwrap()
}

#[test]
fn a_native_canary_s_policy_replaces_the_repo_default() {
    let own = native_podinfo(
        "",
        &format!("{ANALYSIS}  approval:\n    required: 2\n    from: [alice, bob, carol]\n    forbidSelfApproval: true\n    merge: sluice\n"),
    );
    let got = policies(&own, &repo_default());
    let policy = got[0].as_ref().unwrap();
    assert_eq!(
        (policy.from[2].clone(), policy.merge),
        (Approver::Login("carol".into()), MergeBy::Sluice)
    );
    assert_eq!(
        policy.to_string(),
        "2 from alice, bob, carol; self-approval forbidden; merge: sluice"
    );
    let plain = native_podinfo("", ANALYSIS);
    assert_eq!(
        policies(&plain, &repo_default()),
        vec![repo_default().approval_policy()]
    );
    assert_eq!(policies(&plain, &Settings::default()), vec![None]);
}

#[test]
fn a_wave_s_policy_gates_its_start_and_the_other_waves_keep_the_canary_s() {
    let text = native_podinfo(
        "",
        &format!(
            "{ANALYSIS}  approval: {{required: 1, from: [alice]}}
  waves:
    - name: staging
      output: clusters/staging/podinfo
      settle: 1m
    - name: prod
      output: clusters/prod/podinfo
      settle: 1m
      approval:
        required: 2
        from: [alice, team:acme/sre]
"
        ),
    );
    let loaded = load_text(FILE, &text, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let [staging, prod] = loaded.canaries.as_slice() else {
        panic!("two instances: {:?}", loaded.canaries.len());
    };
    assert_eq!(
        staging
            .approval
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("1 from alice; merge: human")
    );
    assert_eq!(
        prod.approval.as_ref().map(ToString::to_string).as_deref(),
        Some("2 from alice, team:acme/sre; merge: human")
    );
    assert!(prod.analysis.approvals.before_rollout);
    assert!(!staging.analysis.approvals.before_rollout);
}

#[test]
fn a_flagger_canary_s_annotations_are_its_policy() {
    let text = podinfo()
        .metadata(
            "  annotations:
    sluice.dev/approval-required: \"2\"
    sluice.dev/approval-from: alice, bob, team:acme/sre
    sluice.dev/approval-forbid-self: \"true\"
    sluice.dev/approval-merge: sluice
",
        )
        .yaml(FLAGGER_ANALYSIS);
    let got = policies(&text, &repo_default());
    assert_eq!(
        got[0].as_ref().map(ToString::to_string).as_deref(),
        Some("2 from alice, bob, team:acme/sre; self-approval forbidden; merge: sluice")
    );
    let plain = podinfo().yaml(FLAGGER_ANALYSIS);
    assert_eq!(
        policies(&plain, &repo_default()),
        vec![repo_default().approval_policy()]
    );
}

#[test]
fn bad_policies_are_refused_at_their_line() {
    let native = native_podinfo(
        "",
        &format!("{ANALYSIS}  approval:\n    required: two\n    from: [alice, acme/sre]\n"),
    );
    assert_eq!(
        errors(&native),
        vec![
            "apps/podinfo/canary.yaml:18: spec.approval.required: expected an integer in 1..=100, found \"two\"",
            "apps/podinfo/canary.yaml:19: spec.approval.from[1]: expected a forge login; write a team as team:<team>, found \"acme/sre\"",
        ]
    );
    let flagger = podinfo()
        .metadata(
            "  annotations:
    sluice.dev/approval-required: \"0\"
    sluice.dev/approval-merge: robot
",
        )
        .yaml(FLAGGER_ANALYSIS);
    assert_eq!(
        errors(&flagger),
        vec![
            "apps/podinfo/canary.yaml:7: metadata.annotations.sluice.dev/approval-required: expected an integer in 1..=100, found \"0\"",
            "apps/podinfo/canary.yaml:8: metadata.annotations.sluice.dev/approval-merge: expected human or sluice, found \"robot\"",
        ]
    );
    let wave = native_podinfo(
        "",
        &format!("{ANALYSIS}  waves:\n    - name: prod\n      output: clusters/prod/podinfo\n      settle: 1m\n      approval: {{required: 3, from: [alice]}}\n"),
    );
    assert_eq!(
        errors(&wave),
        vec!["apps/podinfo/canary.yaml:21: spec.waves[0].approval.required: expected at most 1 (from lists 1 login), found 3: no set of approvers could meet it"]
    );
}
