//! AlertProviders and `analysis.alerts` read from a repo (`manifest::alert_provider`): defaults,
//! resolution in the canary's namespace, and every bad field named with its file and line.

use crate::support::canary::podinfo;
use sluice::manifest::alert_provider::{check_all, traffic_routing};
use sluice::manifest::load::load;
use sluice::manifest::model::{AlertTarget, Canary, Name, Severity};
use sluice::manifest::settings::Settings;
use sluice::yaml::snapshot::Snapshot;

fn canary(alerts: &str) -> String {
    podinfo()
        .provider("traefik")
        .service("    port: 80")
        .interval("1m")
        .threshold(None)
        .yaml(&format!(
            "    stepWeight: 10\n    maxWeight: 30\n    alerts:\n{alerts}"
        ))
}

const SLACK: &str = "apiVersion: flagger.app/v1beta1
kind: AlertProvider
metadata:
  name: on-call
  namespace: prod
spec:
  type: slack
  channel: on-call-alerts
  username: flagger-bot
  address: https://hooks.slack.com/services/T/B/x
";

/// Loads `files` (name, text) as a repo; returns the canaries and every error as text.
fn load_repo(files: &[(&str, &str)]) -> (Vec<Canary>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let snapshot = Snapshot::read(dir.path());
    let loaded = load(&snapshot, &Settings::default());
    let errors = loaded.errors.iter().map(|e| e.to_string()).collect();
    (loaded.canaries, errors)
}

fn provider_errors(text: &str) -> Vec<String> {
    let (_, errors) = load_repo(&[
        (
            "canary.yaml",
            &canary("      - name: a\n        providerRef: {name: on-call}"),
        ),
        ("alerts.yaml", text),
    ]);
    errors
}

#[test]
fn an_alert_resolves_its_provider_in_the_canarys_namespace() {
    let (canaries, errors) = load_repo(&[
            (
                "canary.yaml",
                &canary(
                    "      - name: on-call Slack\n        severity: warn\n        providerRef:\n          name: on-call",
                ),
            ),
            ("alerts.yaml", SLACK),
        ]);
    assert_eq!(errors, Vec::<String>::new());
    let alerts = &canaries[0].analysis.alerts;
    assert_eq!(alerts.alerts.len(), 1);
    let alert = &alerts.alerts[0];
    assert_eq!(
        (alert.name.as_str(), alert.severity),
        ("on-call Slack", Severity::Warn)
    );
    let p = &alert.provider;
    assert_eq!(
        (p.namespace.as_str(), p.name.as_str(), p.kind.as_str()),
        ("prod", "on-call", "slack")
    );
    assert_eq!(
        (p.channel.as_str(), p.username.as_str()),
        ("on-call-alerts", "flagger-bot")
    );
    assert_eq!(
        p.target,
        AlertTarget::Address("https://hooks.slack.com/services/T/B/x".into())
    );
    assert_eq!(
        alerts.traffic_routing.as_deref(),
        Some("Weight step: 10 max: 30")
    );
}

#[test]
fn flagger_defaults_fill_severity_channel_and_username() {
    let provider = "apiVersion: flagger.app/v1beta1
kind: AlertProvider
metadata: {name: teams, namespace: ops}
spec:
  type: msteams
  secretRef: {name: teams-url}
";
    let (canaries, errors) = load_repo(&[
        (
            "canary.yaml",
            &canary("      - name: t\n        providerRef: {name: teams, namespace: ops}"),
        ),
        ("ops/teams.yaml", provider),
    ]);
    assert_eq!(errors, Vec::<String>::new());
    let alert = &canaries[0].analysis.alerts.alerts[0];
    assert_eq!(alert.severity, Severity::Info);
    assert_eq!(alert.provider.channel, "general");
    assert_eq!(alert.provider.username, "flagger");
    assert_eq!(
        alert.provider.target,
        AlertTarget::Secret(Name::parse("teams-url").unwrap())
    );
}

#[test]
fn a_provider_ref_to_nothing_makes_the_canary_invalid_at_its_line() {
    let (canaries, errors) = load_repo(&[(
        "canary.yaml",
        &canary("      - name: a\n        providerRef:\n          name: missing"),
    )]);
    assert!(canaries.is_empty());
    assert_eq!(
            errors,
            vec!["canary.yaml:21: spec.analysis.alerts[0].providerRef.name: alert provider prod/missing not found: no flagger.app/v1beta1 AlertProvider with that namespace and name in the repo"]
        );
}

#[test]
fn a_provider_in_another_namespace_is_not_found_without_its_namespace() {
    let (canaries, errors) = load_repo(&[
        (
            "canary.yaml",
            &canary("      - name: a\n        providerRef: {name: on-call}"),
        ),
        (
            "alerts.yaml",
            &SLACK.replace("namespace: prod", "namespace: ops"),
        ),
    ]);
    assert!(canaries.is_empty());
    assert!(errors[0].contains("prod/on-call not found"), "{errors:?}");
}

#[test]
fn a_bad_provider_makes_the_canary_invalid_naming_the_providers_field() {
    let errors = provider_errors(&SLACK.replace("type: slack", "type: pagerduty"));
    assert_eq!(
            errors,
            vec!["canary.yaml:20: spec.analysis.alerts[0].providerRef.name: alert provider prod/on-call is invalid: alerts.yaml:7: spec.type: expected one of slack, msteams, discord, rocket, gchat, found \"pagerduty\""]
        );
}

#[test]
fn generic_is_refused_by_name() {
    let errors = provider_errors(&SLACK.replace("type: slack", "type: generic"));
    assert!(
        errors[0].contains("alerts.yaml:7: spec.type: Flagger has no \"generic\" alert provider"),
        "{errors:?}"
    );
}

#[test]
fn every_bad_provider_field_is_named() {
    let cases: &[(&str, &str, &str)] = &[
            (
                "  address: https://hooks.slack.com/services/T/B/x\n",
                "  address: hooks.slack.com/x\n",
                "alerts.yaml:10: spec.address: expected a webhook URL starting with http:// or https://, found \"hooks.slack.com/x\"",
            ),
            (
                "  address: https://hooks.slack.com/services/T/B/x\n",
                "  address: https://hooks.slack.com/services/T/B/x\n  secretRef: {name: s}\n",
                "alerts.yaml:11: spec.secretRef: set either address or secretRef, not both",
            ),
            (
                "  address: https://hooks.slack.com/services/T/B/x\n",
                "",
                "alerts.yaml:6: spec.address: required field is missing: set address, or secretRef",
            ),
            (
                "  username: flagger-bot\n",
                "  username: flagger-bot\n  proxy: socks5://127.0.0.1:1080\n",
                "alerts.yaml:10: spec.proxy: expected an HTTP proxy URL starting with http:// or https://, found \"socks5://127.0.0.1:1080\"",
            ),
            (
                "  username: flagger-bot\n",
                "  username: flagger-bot\n  certSecretRef: {name: ca}\n",
                "alerts.yaml:10: spec.certSecretRef: unknown field",
            ),
            (
                "  channel: on-call-alerts\n",
                "  channel: [a]\n",
                "alerts.yaml:8: spec.channel: expected a string, found a list",
            ),
            (
                "  address: https://hooks.slack.com/services/T/B/x\n",
                "  secretRef: {name: Bad_Name}\n",
                "alerts.yaml:10: spec.secretRef.name: ",
            ),
        ];
    for (from, to, want) in cases {
        let text = SLACK.replace(from, to);
        let errors = provider_errors(&text);
        assert_eq!(errors.len(), 1, "{text}\n{errors:?}");
        assert!(
            errors[0].contains(want),
            "{text}\nwant {want}\nfound {}",
            errors[0]
        );
    }
}

#[test]
fn every_bad_alert_field_is_named() {
    let cases: &[(&str, &str)] = &[
            (
                "      - name: a\n        severity: critical\n        providerRef: {name: on-call}",
                "canary.yaml:20: spec.analysis.alerts[0].severity: expected one of info, warn, error, found \"critical\"",
            ),
            (
                "      - providerRef: {name: on-call}",
                "canary.yaml:19: spec.analysis.alerts[0].name: required field is missing",
            ),
            (
                "      - name: a",
                "canary.yaml:19: spec.analysis.alerts[0].providerRef: required field is missing",
            ),
        ];
    for (alerts, want) in cases {
        let (canaries, errors) =
            load_repo(&[("canary.yaml", &canary(alerts)), ("alerts.yaml", SLACK)]);
        assert!(canaries.is_empty(), "{alerts}");
        assert_eq!(errors.len(), 1, "{alerts}\n{errors:?}");
        assert!(
            errors[0].starts_with(want),
            "want {want}\nfound {}",
            errors[0]
        );
    }
    // Keys Flagger's CRD does not declare are pruned by the API server: warnings, and the
    // canary loads.
    for (alerts, want) in [
        (
            "      - name: a\n        providerRef: {name: on-call, kind: AlertProvider}",
            "canary.yaml:20: spec.analysis.alerts[0].providerRef.kind: unknown field",
        ),
        (
            "      - name: a\n        providerRef: {name: on-call}\n        muteAlert: true",
            "canary.yaml:21: spec.analysis.alerts[0].muteAlert: unknown field",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("canary.yaml"), canary(alerts)).unwrap();
        std::fs::write(dir.path().join("alerts.yaml"), SLACK).unwrap();
        let loaded = load(&Snapshot::read(dir.path()), &Settings::default());
        assert!(loaded.errors.is_empty(), "{alerts}\n{:?}", loaded.errors);
        assert_eq!(loaded.canaries.len(), 1);
        assert!(
            loaded.warnings[0].to_string().starts_with(want),
            "want {want}\nfound {:?}",
            loaded.warnings
        );
    }
}

#[test]
fn check_all_reports_unreferenced_providers_at_their_own_lines() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        SLACK.replace("type: slack", "type: pagerduty"),
    )
    .unwrap();
    let errors: Vec<String> = check_all(&Snapshot::read(dir.path()))
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
            errors,
            vec!["a.yaml:7: spec.type: expected one of slack, msteams, discord, rocket, gchat, found \"pagerduty\""]
        );
}

#[test]
fn mute_alert_silences_a_gate_only_when_all_its_hooks_set_it() {
    let (canaries, errors) = load_repo(&[
            (
                "canary.yaml",
                &canary("      - name: a\n        providerRef: {name: on-call}\n    webhooks:\n      - {name: go, type: confirm-rollout, url: 'http://gate/', muteAlert: true}\n      - {name: pr, type: confirm-promotion, url: 'sluice:approval', muteAlert: true}\n      - {name: ti1, type: confirm-traffic-increase, url: 'http://gate/', muteAlert: true}\n      - {name: ti2, type: confirm-traffic-increase, url: 'http://gate/'}"),
            ),
            ("alerts.yaml", SLACK),
        ]);
    assert_eq!(errors, Vec::<String>::new());
    let a = &canaries[0].analysis.alerts;
    assert_eq!(
        (a.mute_rollout, a.mute_promotion, a.mute_traffic_increase),
        (true, true, false)
    );
}

#[test]
fn traffic_routing_reads_as_flaggers_metadata_line() {
    assert_eq!(
        traffic_routing(5, &[], 50).as_deref(),
        Some("Weight step: 5 max: 50")
    );
    assert_eq!(
        traffic_routing(0, &[1, 20, 80], 0).as_deref(),
        Some("Weight steps: 1,20,80 max: 0")
    );
    assert_eq!(traffic_routing(0, &[], 50), None);
}
