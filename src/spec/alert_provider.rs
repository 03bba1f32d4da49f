//! Flagger's `analysis.alerts` and the `flagger.app/v1beta1 AlertProvider`s they name.
//!
//! An alert's `providerRef` is resolved here, when the canary is loaded: a reference to no
//! AlertProvider in the repo, or to one with a bad field, makes the canary invalid
//! (`file:line: field: message`), so `validate` fails on it and the loop never starts it.
//! AlertProviders are found by kind and name in the tick's [`Snapshot`]; a provider without
//! `metadata.namespace` is in `default`, as MetricTemplates are.
//!
//! What Flagger's CRD and notifier accept is accepted: the types slack, msteams, discord,
//! rocket and gchat, `channel` (default `general`), `username` (default `flagger`), `proxy`,
//! and exactly one of `address` and `secretRef`. The Secret's `address` (and, for Slack,
//! `token`) keys are read only when an alert is sent, from what the operator mapped in
//! (`crate::secrets`): never from git. This module does no IO.

use crate::spec::model::{
    Alert, AlertKind, AlertProvider, AlertTarget, Alerts, Name, Severity, WebhookKind, WebhookSpec,
};
use crate::yaml::error::SpecError;
use crate::yaml::node::Node;
use crate::yaml::reader::{index, join, name_at, Reader, METADATA_KEYS, OBJECT_KEYS};
use crate::yaml::snapshot::{Object, Snapshot};

/// The apiVersion an AlertProvider is read in.
pub const API_VERSION: &str = "flagger.app/v1beta1";
/// The kind, as the snapshot indexes it.
pub const KIND: &str = "AlertProvider";

/// The keys of an AlertProvider's `spec` (Flagger's CRD).
const SPEC_KEYS: &[&str] = &[
    "type",
    "channel",
    "username",
    "address",
    "proxy",
    "secretRef",
];

/// Reads `analysis.alerts` (`node`) of a canary in `namespace`, resolving every `providerRef`
/// in `snapshot`. Problems are reported on `r`; alerts with problems are left out.
pub fn read_alerts(
    r: &mut Reader,
    node: &Node,
    path: &str,
    namespace: Option<&Name>,
    snapshot: &Snapshot,
) -> Vec<Alert> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = index(path, i);
        if r.map(item, &p, &["name", "severity", "providerRef"])
            .is_none()
        {
            continue;
        }
        let name = r
            .required(item, &p, "name")
            .and_then(|n| r.string(n, &join(&p, "name")));
        // Flagger documents `info` as the default (its CRD allows "" too). Its filter in
        // `pkg/controller/events.go` would send nothing to an alert without a severity; sluice
        // follows the documentation, which is what users of the field expect.
        let severity = match item.get("severity") {
            None => Some(Severity::Info),
            Some(n) => {
                let field = join(&p, "severity");
                match r.string(n, &field).as_deref() {
                    None => None,
                    Some("" | "info") => Some(Severity::Info),
                    Some("warn") => Some(Severity::Warn),
                    Some("error") => Some(Severity::Error),
                    Some(other) => {
                        r.error(
                            n.line,
                            &field,
                            format!("expected one of info, warn, error, found {other:?}"),
                        );
                        None
                    }
                }
            }
        };
        let provider = r
            .required(item, &p, "providerRef")
            .and_then(|n| resolve(r, n, &join(&p, "providerRef"), namespace, snapshot));
        if let (Some(name), Some(severity), Some(provider)) = (name, severity, provider) {
            out.push(Alert {
                name,
                severity,
                provider,
            });
        }
    }
    out
}

/// `providerRef {name, namespace}` to the AlertProvider it names; the namespace defaults to
/// the canary's.
fn resolve(
    r: &mut Reader,
    node: &Node,
    path: &str,
    canary_namespace: Option<&Name>,
    snapshot: &Snapshot,
) -> Option<AlertProvider> {
    r.map(node, path, &["name", "namespace"])?;
    let name_node = r.required(node, path, "name")?;
    let name = name_at(r, name_node, &join(path, "name"))?;
    let namespace = match node.get("namespace") {
        Some(n) => name_at(r, n, &join(path, "namespace"))?,
        None => canary_namespace?.clone(),
    };
    let field = join(path, "name");
    let found: Vec<Object> = snapshot
        .find(KIND, name.as_str())
        .filter(|o| o.api_version == Some(API_VERSION))
        .filter(|o| o.namespace.unwrap_or("default") == namespace.as_str())
        .collect();
    let object = match found.as_slice() {
        [] => {
            r.error(
                name_node.line,
                &field,
                format!("alert provider {namespace}/{name} not found: no {API_VERSION} {KIND} with that namespace and name in the repo"),
            );
            return None;
        }
        [one] => one,
        [first, second, ..] => {
            r.error(
                name_node.line,
                &field,
                format!(
                    "alert provider {namespace}/{name} is defined twice: {}:{} and {}:{}",
                    first.file, first.line, second.file, second.line
                ),
            );
            return None;
        }
    };
    match read_provider(object) {
        Ok(provider) => Some(provider),
        Err(errors) => {
            r.error(
                name_node.line,
                &field,
                format!(
                    "alert provider {namespace}/{name} is invalid: {}",
                    summary(&errors)
                ),
            );
            None
        }
    }
}

fn summary(errors: &[SpecError]) -> String {
    match errors {
        [] => "unknown problem".into(),
        [one] => one.to_string(),
        [one, rest @ ..] => format!("{one} (and {} more)", rest.len()),
    }
}

/// Every AlertProvider of the snapshot that has problems, each problem with its own file,
/// line and field (for checking a whole repo, referenced or not).
pub fn check_all(snapshot: &Snapshot) -> Vec<SpecError> {
    let mut errors = Vec::new();
    for object in snapshot.objects() {
        if object.kind != KIND {
            continue;
        }
        match object.api_version {
            Some(API_VERSION) => {
                if let Err(e) = read_provider(&object) {
                    errors.extend(e);
                }
            }
            Some(api) if api.starts_with("flagger.app/") => errors.push(SpecError {
                file: object.file.to_string(),
                line: object
                    .node
                    .get("apiVersion")
                    .map_or(object.line, |n| n.line),
                field: "apiVersion".into(),
                message: format!("expected {API_VERSION}, found {api:?}"),
            }),
            _ => {}
        }
    }
    errors
}

/// Reads one AlertProvider document: the provider, or every problem found.
pub fn read_provider(object: &Object) -> Result<AlertProvider, Vec<SpecError>> {
    let mut r = Reader::new(object.file);
    let provider = read(&mut r, object.node);
    match provider {
        Some(p) if r.errors.is_empty() => Ok(p),
        _ => Err(r.errors),
    }
}

fn read(r: &mut Reader, root: &Node) -> Option<AlertProvider> {
    r.map(root, "", OBJECT_KEYS)?;
    let meta = r.required(root, "", "metadata")?;
    r.map(meta, "metadata", METADATA_KEYS)?;
    let name = r
        .required(meta, "metadata", "name")
        .and_then(|n| name_at(r, n, "metadata.name"));
    let namespace = match meta.get("namespace") {
        Some(n) => name_at(r, n, "metadata.namespace"),
        None => Name::parse("default").ok(),
    };
    let spec = r.required(root, "", "spec")?;
    r.map(spec, "spec", SPEC_KEYS)?;
    let kind = r.required(spec, "spec", "type").and_then(|n| {
        let text = r.string(n, "spec.type")?;
        if let Some((_, kind)) = AlertKind::ALL.iter().find(|(k, _)| *k == text) {
            return Some(*kind);
        }
        let names: Vec<&str> = AlertKind::ALL.iter().map(|(k, _)| *k).collect();
        let message = if text == "generic" {
            format!(
                "Flagger has no \"generic\" alert provider (its CRD and notifier know {}); for a JSON webhook use an analysis webhook of type event, or a webhook notification in .sluice/config.yaml",
                names.join(", ")
            )
        } else {
            format!("expected one of {}, found {text:?}", names.join(", "))
        };
        r.error(n.line, "spec.type", message);
        None
    });
    let text = |r: &mut Reader, key: &str, default: &str| -> Option<String> {
        match spec.get(key) {
            None => Some(default.to_string()),
            Some(n) => r
                .string(n, &join("spec", key))
                // Flagger's defaults stand in for an empty string too.
                .map(|t| if t.is_empty() { default.to_string() } else { t }),
        }
    };
    let channel = text(r, "channel", "general");
    let username = text(r, "username", "flagger");
    let address = spec.get("address").and_then(|n| {
        let url = r.string(n, "spec.address")?;
        http_url(r, n, "spec.address", &url, "a webhook")
    });
    let secret = spec.get("secretRef").and_then(|n| {
        let path = "spec.secretRef";
        r.map(n, path, &["name"])?;
        r.required(n, path, "name")
            .and_then(|v| name_at(r, v, &join(path, "name")))
    });
    let proxy = spec.get("proxy").and_then(|n| {
        let url = r.string(n, "spec.proxy")?;
        if url.is_empty() {
            return Some(None);
        }
        http_url(r, n, "spec.proxy", &url, "an HTTP proxy").map(Some)
    });
    // Flagger's CRD: `oneOf` (type, address) and (type, secretRef).
    let target = match (spec.get("address"), spec.get("secretRef")) {
        (Some(_), Some(n)) => {
            r.error(
                n.line,
                "spec.secretRef",
                "set either address or secretRef, not both (Flagger's CRD allows one of them)",
            );
            None
        }
        (None, None) => {
            r.error(
                spec.line,
                "spec.address",
                "required field is missing: set address, or secretRef naming a Secret with an address key",
            );
            None
        }
        (Some(_), None) => address.map(AlertTarget::Address),
        (None, Some(_)) => secret.map(AlertTarget::Secret),
    };
    Some(AlertProvider {
        namespace: namespace?,
        name: name?,
        kind: kind?,
        channel: channel?,
        username: username?,
        target: target?,
        proxy: match spec.get("proxy") {
            Some(_) => proxy?,
            None => None,
        },
    })
}

/// An `http://` or `https://` URL (what sluice's HTTP client can post to or through).
fn http_url(r: &mut Reader, node: &Node, path: &str, text: &str, what: &str) -> Option<String> {
    let ok = reqwest::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
    match ok {
        Some(_) => Some(text.to_string()),
        None => {
            r.error(
                node.line,
                path,
                format!("expected {what} URL starting with http:// or https://, found {text:?}"),
            );
            None
        }
    }
}

/// What `muteAlert` silences: a wait for approval of a gate whose confirm-* hooks all set it.
/// `git_gates` are the hooks that ask for a git approval (`sluice:approval`), which leave
/// `webhooks`; both count.
pub fn alerts_of(
    alerts: Vec<Alert>,
    webhooks: &[(WebhookSpec, bool)],
    traffic_routing: Option<String>,
) -> Alerts {
    let muted = |kind: WebhookKind| {
        let mut hooks = webhooks.iter().filter(|(w, _)| w.kind == kind).peekable();
        hooks.peek().is_some() && hooks.all(|(_, mute)| *mute)
    };
    Alerts {
        alerts,
        mute_rollout: muted(WebhookKind::ConfirmRollout),
        mute_traffic_increase: muted(WebhookKind::ConfirmTrafficIncrease),
        mute_promotion: muted(WebhookKind::ConfirmPromotion),
        traffic_routing,
    }
}

/// Flagger's "Traffic routing" line for a canary release (`alertMetadata` in
/// `pkg/controller/events.go`): from `stepWeight` when positive, else `stepWeights`, with the
/// raw `maxWeight` (0 when unset, as Flagger prints it).
pub fn traffic_routing(step_weight: i64, step_weights: &[i64], max_weight: i64) -> Option<String> {
    if step_weight > 0 {
        Some(format!("Weight step: {step_weight} max: {max_weight}"))
    } else if !step_weights.is_empty() {
        let list: Vec<String> = step_weights.iter().map(i64::to_string).collect();
        Some(format!(
            "Weight steps: {} max: {max_weight}",
            list.join(",")
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load::load;
    use crate::spec::model::Canary;
    use crate::spec::settings::Settings;

    fn canary(alerts: &str) -> String {
        format!(
            "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: prod
spec:
  provider: traefik
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  service:
    port: 80
  analysis:
    interval: 1m
    stepWeight: 10
    maxWeight: 30
    alerts:
{alerts}
"
        )
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
            (p.namespace.as_str(), p.name.as_str(), p.kind),
            ("prod", "on-call", AlertKind::Slack)
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
            errors[0]
                .contains("alerts.yaml:7: spec.type: Flagger has no \"generic\" alert provider"),
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
            (
                "      - name: a\n        providerRef: {name: on-call, kind: AlertProvider}",
                "canary.yaml:20: spec.analysis.alerts[0].providerRef.kind: unknown field",
            ),
            (
                "      - name: a\n        providerRef: {name: on-call}\n        muteAlert: true",
                "canary.yaml:21: spec.analysis.alerts[0].muteAlert: unknown field",
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
}
