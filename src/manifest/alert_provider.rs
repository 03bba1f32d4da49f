//! Flagger's `analysis.alerts` and the `flagger.app/v1beta1 AlertProvider`s they name.
//!
//! An alert's `providerRef` is resolved here, when the canary is loaded: a reference to no
//! AlertProvider in the repo, or to one with a bad field, makes the canary invalid
//! (`file:line: field: message`), so `validate` fails on it and the loop never starts it.
//! AlertProviders are found by kind and name in the tick's [`Snapshot`]; a provider without
//! `metadata.namespace` is in `default`, as MetricTemplates are.
//!
//! What Flagger's CRD and notifier accept is accepted: the types the alert registry lists
//! (`crate::alert_kinds`), `channel` (default `general`), `username` (default `flagger`), `proxy`,
//! and exactly one of `address` and `secretRef`. The Secret's `address` (and, for Slack,
//! `token`) keys are read only when an alert is sent, from what the operator mapped in
//! (`crate::secrets`): never from git. This module does no IO.

use crate::alert_kinds;
use crate::manifest::model::{
    Alert, AlertProvider, AlertTarget, Alerts, Name, Severity, WebhookKind, WebhookSpec,
};
use crate::yaml::error::SpecError;
use crate::yaml::node::Node;
use crate::yaml::reader::{
    index, join, metadata_name, name_at, namespace_at, short_name, Reader, OBJECT_KEYS,
};
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
            .and_then(|n| short_name(r, n, &join(&p, "name")));
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
        Some(n) => namespace_at(r, n, &join(path, "namespace"))?,
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
    let (name, namespace) = metadata_name(r, root)?;
    let spec = r.required(root, "", "spec")?;
    r.map(spec, "spec", SPEC_KEYS)?;
    let kind = r.required(spec, "spec", "type").and_then(|n| {
        let text = r.string(n, "spec.type")?;
        if let Some(kind) = alert_kinds::parse(&text) {
            return Some(kind);
        }
        let names: Vec<&str> = alert_kinds::types().collect();
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
