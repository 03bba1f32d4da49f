//! AWS App Mesh (`appmesh.k8s.aws/v1beta2`), as Flagger's `pkg/router/appmesh_v1beta2.go`
//! creates it for `provider: appmesh:v1beta2`. Six objects, in the order Flagger creates them:
//!
//! - VirtualNode `<svc>-primary` and `<svc>-canary`: pod selector `<label>: <value>-primary`
//!   and `<label>: <value>` (the target's selector label, as sluice renames it for the
//!   primary), one listener on the container port (`targetPort` when it is a number, else
//!   `port`; protocol `grpc` when `portName` contains `grpc`, else `http`) with
//!   `service.timeout` as its HTTP per-request timeout, DNS discovery of
//!   `<svc>-primary.<ns>.svc.cluster.local.` (and `-canary`), `service.backends` as
//!   VirtualService backends (an `arn:aws...` string by ARN, anything else by name), and an
//!   access log to `/dev/stdout` when the Canary is annotated
//!   `appmesh.flagger.app/accesslog: enabled`. The apex labels and annotations go on both.
//! - VirtualRouter `<svc>` with one listener, and one HTTP route (named `<svc>`) matching the
//!   prefix (the first `service.match`'s `uri.prefix`, else `/`) sending the weights to the
//!   canary then the primary node; for an A/B canary instead a route `<svc>-a` (priority 10)
//!   with the `analysis.match` headers and the weights, and a route `<svc>-b` (priority 20)
//!   sending everything else to the primary. Every route carries `service.timeout` (per
//!   request, in milliseconds) and `service.retries` (`maxRetries` = attempts or 1,
//!   `perRetryTimeout` = perTryTimeout or 250ms, `httpRetryEvents` = retryOn split on commas or
//!   `gateway-error`).
//! - VirtualService `<svc>` provided by that router; with `service.hosts` it carries Flagger's
//!   App Mesh gateway annotations (`gateway.appmesh.k8s.aws/expose`, `domain`, `timeout`,
//!   `retries`).
//! - VirtualRouter and VirtualService `<svc>-canary`, all traffic to the canary node (the
//!   address the pre-rollout and load-test webhooks call).
//!
//! No object names its mesh: as in Flagger, the App Mesh controller assigns the Mesh whose
//! namespace selector matches the canary's namespace.
//!
//! Where sluice writes something other than Flagger:
//! - The pod selectors use the target's selector label value (`<value>`, `<value>-primary`),
//!   the labels sluice writes on the two Deployments; Flagger uses the target's name, which
//!   selects no pod when the two differ. When the target is not in the repo (only while
//!   validating a lone file) the selector is Flagger's: `app: <target>`.
//! - A/B header matches are sorted by header name (Flagger walks a Go map, in random order).
//! - The apex metadata on the VirtualNodes lacks Flagger's Flux `reconcile: disabled`
//!   annotations (sluice's objects are Flux's to apply), and every object has the
//!   `app.kubernetes.io/managed-by: sluice` label.
//!
//! Refused, naming the field, because Flagger's object would not do what the canary says: plain
//! `provider: appmesh` (Flagger's v1beta1 API, which no App Mesh controller has served since
//! v1.0.0), more than one A/B match or a match on anything but headers (App Mesh ANDs a
//! route's headers, so alternatives cannot be one route), `service.match` beyond the first
//! match's `uri.prefix`, durations Flagger cannot parse (it drops them), `retryOn` events App
//! Mesh does not know, `service.meshName` (read only by Flagger's v1beta1 router), a
//! `service.rewrite` other than the no-op `uri: /` under prefix `/`, the service fields of
//! other routers (`headers`, `gateways`, `corsPolicy`, ...), and the analysis `mirror`,
//! `mirrorWeight` and `sessionAffinity`.
//!
//! A native `spec.route` of kind `VirtualRouter` is refused: the objects need Flagger's names.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value as Json;

use crate::core::model::{PortRef, Strategy};
use crate::route::first_uri_prefix;
use crate::route::ANALYSIS_MATCH_ONLY;
use crate::route::{
    apex_metadata, field, header_comment, is_header_name, read_header_matches,
    refused_service_fields, render_checked_all, single_header_match, AbInput, Backends,
    BuiltinMetrics, Canary, FieldUse, FlaggerFields, FlaggerInput, JudgePrimary, QuerySet,
    RouteError, Router, Weights, MANAGED_BY,
};
use crate::route::{NativeInput, RenderInput};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, parse_duration, Reader};

/// The App Mesh router.
pub struct AppMesh;

/// The one App Mesh API version written.
pub const API_VERSION: &str = "appmesh.k8s.aws/v1beta2";

/// The Canary annotation that turns on the VirtualNodes' access log (Flagger's).
pub const ACCESS_LOG_ANNOTATION: &str = "appmesh.flagger.app/accesslog";

/// App Mesh's HTTP retry events (the VirtualRouter CRD's enum).
const RETRY_EVENTS: &[&str] = &[
    "server-error",
    "gateway-error",
    "client-error",
    "stream-error",
];

/// The selector labels sluice (and Flagger's default `-selector-labels`) recognise, in order.
const SELECTOR_LABELS: [&str; 3] = ["app", "name", "app.kubernetes.io/name"];

/// App Mesh limits on a route's header matches.
const MAX_HEADERS: usize = 10;
const MAX_HEADER_NAME: usize = 50;
const MAX_HEADER_VALUE: usize = 255;

/// The validated App Mesh route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The path prefix every route matches: `service.match[0].uri.prefix`, else `/`.
    pub prefix: String,
    /// `service.timeout`: the text (for the gateway annotation) and whole milliseconds.
    pub timeout: Option<(String, i64)>,
    pub retries: Option<RetryPolicy>,
    /// `service.retries.attempts` as written (the gateway annotation, when above 0).
    pub attempts: i64,
    /// `service.backends`, in order.
    pub backends: Vec<VirtualServiceBackend>,
    /// `service.hosts`: the App Mesh gateway domains of the apex VirtualService.
    pub hosts: Vec<String>,
    /// `appmesh.flagger.app/accesslog: enabled` on the Canary.
    pub access_log: bool,
    /// The pod selector label and the canary's value (`-primary` is added for the primary).
    pub selector: (String, String),
    /// An A/B canary's header matches, sorted by header name; empty for other strategies.
    pub ab_headers: Vec<HeaderMatch>,
}

/// App Mesh's `HTTPRetryPolicy` as Flagger fills it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetryPolicy {
    #[serde(rename = "maxRetries")]
    pub max_retries: i64,
    #[serde(rename = "perRetryTimeout")]
    pub per_retry_timeout: Millis,
    #[serde(rename = "httpRetryEvents")]
    pub http_retry_events: Vec<String>,
}

/// An App Mesh `Duration` in milliseconds (Flagger's unit for every duration it writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Millis {
    unit: &'static str,
    value: i64,
}

impl Millis {
    fn new(value: i64) -> Millis {
        Millis { unit: "ms", value }
    }
}

/// One entry of a VirtualNode's `backends`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum VirtualServiceBackend {
    #[serde(rename = "virtualServiceARN")]
    Arn(String),
    #[serde(rename = "virtualServiceRef")]
    Ref { name: String },
}

/// App Mesh's `HTTPRouteHeader` with one match method.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeaderMatch {
    pub name: String,
    /// `{exact|prefix|suffix|regex: value}`.
    #[serde(rename = "match")]
    pub method: BTreeMap<String, String>,
}

impl Router for AppMesh {
    type Variant = ();
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "App Mesh VirtualNodes, VirtualRouters and VirtualServices";
    const PROVIDERS: &'static [(&'static str, ())] = &[("appmesh:v1beta2", ())];
    const ALIASES: &'static [(&'static str, ())] = &[];
    const NATIVE_KIND: &'static str = "VirtualRouter";
    const NATIVE_FIELDS: &'static [&'static str] = &[];
    /// Flagger's factory runs any `appmesh:v1beta2…` as App Mesh v1beta2.
    const FLAGGER_PREFIXES: &'static [crate::route::FlaggerPrefix] =
        &[crate::route::FlaggerPrefix {
            prefix: "appmesh:v1beta2",
            runs_as: "appmesh:v1beta2",
            writes: "appmesh.k8s.aws/v1beta2 VirtualNodes, VirtualRouters and VirtualServices",
        }];

    fn near_miss(text: &str) -> Option<String> {
        let lower = text.to_ascii_lowercase();
        if lower == "appmesh" || lower == "appmesh:v1beta1" {
            Some(format!("provider {text:?} is Flagger's App Mesh v1beta1 router (Mesh, VirtualNode and VirtualService with inline routes, meshName), an API no App Mesh controller has served since v1.0.0; sluice writes App Mesh v1beta2: use provider \"appmesh:v1beta2\" (its objects no longer name the mesh: label the namespace for the Mesh's namespaceSelector)"))
        } else if lower == "appmesh:v1beta2" {
            Some(format!(
                "provider names are lowercase: expected \"appmesh:v1beta2\", found {text:?}"
            ))
        } else {
            None
        }
    }

    fn read_flagger(r: &mut Reader, _variant: (), input: &FlaggerInput) -> Option<Config> {
        let before = r.errors.len();
        refuse_unsupported(r, input);
        let access_log = input
            .metadata
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(ACCESS_LOG_ANNOTATION))
            .and_then(Node::as_str)
            == Some("enabled");
        let selector = pod_selector(input);
        let svc = input.service?;
        let base = "spec.service";
        let prefix = field(svc, "match")
            .and_then(|n| read_prefix(r, n, &join(base, "match")))
            .unwrap_or_else(|| "/".to_string());
        if let (Some(n), Some(line)) = (field(svc, "rewrite"), svc.key_line("rewrite")) {
            check_rewrite(r, n, line, &prefix);
        }
        let timeout = field(svc, "timeout").and_then(|n| {
            let path = join(base, "timeout");
            let text = r.string(n, &path)?;
            millis(r, n, &path).map(|ms| (text, ms))
        });
        let (retries, attempts) = match field(svc, "retries") {
            Some(n) => {
                read_retries(r, n, &join(base, "retries")).map_or((None, 0), |(p, a)| (Some(p), a))
            }
            None => (None, 0),
        };
        let backends = field(svc, "backends")
            .map(|n| read_backends(r, n, &join(base, "backends")))
            .unwrap_or_default();
        let hosts = field(svc, "hosts")
            .map(|n| read_hosts(r, n, &join(base, "hosts")))
            .unwrap_or_default();
        (r.errors.len() == before).then_some(Config {
            prefix,
            timeout,
            retries,
            attempts,
            backends,
            hosts,
            access_log,
            selector,
            ab_headers: Vec::new(),
        })
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        r.error(native.api_line, "spec.route", "sluice writes App Mesh objects for Flagger canaries only (provider: appmesh:v1beta2), named as Flagger names them after the target; use a Flagger Canary, or an HTTPRoute or TrafficSplit route");
        None
    }

    /// One match of `headers` only; each header one of `exact`, `prefix`, `suffix`, `regex`.
    fn read_ab_matches(config: &mut Config, r: &mut Reader, input: &AbInput) {
        let Some(ab) = single_header_match(
            r,
            input,
            "App Mesh",
            "Flagger's App Mesh router puts the headers of every match into one route, which App Mesh ANDs, so it would require every match at once",
        ) else {
            return;
        };
        if ab.headers.len() > MAX_HEADERS {
            r.error(
                ab.item.line,
                &ab.path,
                format!(
                    "App Mesh matches at most {MAX_HEADERS} headers per route, found {}",
                    ab.headers.len()
                ),
            );
        }
        let name_error = |name: &str| {
            (!is_header_name(name) || name.len() > MAX_HEADER_NAME).then(|| {
                format!("expected a header name of at most {MAX_HEADER_NAME} letters, digits and !#$%&'*+-.^_`|~")
            })
        };
        let kinds = "exact, prefix, suffix or regex";
        let mut out = read_header_matches(r, &ab, name_error, kinds, |r, h| {
            if h.text.is_empty() || h.text.len() > MAX_HEADER_VALUE {
                r.error(
                    h.value.line,
                    &h.field,
                    format!("expected 1 to {MAX_HEADER_VALUE} characters (App Mesh's limit; Flagger drops an empty match), found {}", h.text.len()),
                );
                return None;
            }
            Some(HeaderMatch {
                name: h.name.text.clone(),
                method: BTreeMap::from([(h.kind.text.clone(), h.text)]),
            })
        });
        out.sort_by(|a, b| a.name.cmp(&b.name));
        config.ab_headers = out;
    }

    // Session affinity and analysis mirroring, the only sources of route state, are
    // refused for App Mesh canaries when they are read.
    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        render(config, input).map(Some)
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "appmesh",
        table_order: 4,
        spec_rows: &[
            ("spec.service.timeout", FieldUse::Renders),
            ("spec.service.backends", FieldUse::Renders),
            ("spec.service.hosts", FieldUse::Renders),
            ("spec.service.match", FieldUse::Renders),
            ("spec.service.retries", FieldUse::Renders),
            ("spec.service.backendTimeout", FieldUse::Refuses),
            ("spec.service.corsPolicy", FieldUse::Refuses),
            ("spec.service.delegation", FieldUse::Refuses),
            ("spec.service.gatewayRefs", FieldUse::Refuses),
            ("spec.service.gateways", FieldUse::Refuses),
            ("spec.service.headers", FieldUse::Refuses),
            ("spec.service.mirror", FieldUse::Refuses),
            ("spec.service.trafficPolicy", FieldUse::Refuses),
            ("spec.service.meshName", FieldUse::Refuses),
            ("spec.service.rewrite", FieldUse::Refuses),
        ],
        analysis_rows: ANALYSIS_MATCH_ONLY,
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        provider
            .starts_with("appmesh")
            .then_some(BuiltinMetrics::Queries(APPMESH_METRICS))
    }
}

fn refuse_unsupported(r: &mut Reader, input: &FlaggerInput) {
    if let Some(svc) = input.service {
        // meshName and rewrite: refused with their own messages.
        let ignored = refused_service_fields(&AppMesh::FLAGGER_FIELDS)
            .filter(|key| !["meshName", "rewrite"].contains(key));
        for key in ignored {
            if let Some(line) = svc.key_line(key) {
                r.error(line, &join("spec.service", key), "Flagger's App Mesh router ignores this field (it writes the prefix, timeout, retries, backends and gateway hosts only); remove it, or use a router that renders it (istio, gatewayapi:v1)");
            }
        }
        if let Some(line) = svc.key_line("meshName") {
            r.error(line, "spec.service.meshName", "Flagger's App Mesh v1beta2 router ignores meshName: the App Mesh controller puts the objects in the Mesh whose namespaceSelector matches the canary's namespace; remove it and label the namespace");
        }
    }
    if let Some(analysis) = input.analysis {
        for key in ["mirror", "mirrorWeight", "sessionAffinity"] {
            if let Some(line) = analysis.key_line(key) {
                r.error(line, &join("spec.analysis", key), "Flagger's App Mesh router does not mirror traffic or keep sessions, so this field would be dropped; remove it, or use a router that renders it (gatewayapi:v1)");
            }
        }
    }
}

/// The target's selector label and value, from the target workload in the repo; Flagger's
/// `app: <target>` when it is not there (the workload step then reports it missing).
fn pod_selector(input: &FlaggerInput) -> (String, String) {
    let target = input.spec.get("targetRef");
    let kind = target
        .and_then(|t| t.get("kind"))
        .and_then(Node::as_str)
        .unwrap_or("Deployment");
    let name = target
        .and_then(|t| t.get("name"))
        .and_then(Node::as_str)
        .unwrap_or_default();
    let found = input
        .snapshot
        .find(kind, name)
        .find(|o| o.namespace.is_none() || o.namespace == input.namespace)
        .and_then(|o| {
            let labels = o.node.get("spec")?.get("selector")?.get("matchLabels")?;
            SELECTOR_LABELS.iter().find_map(|k| {
                labels
                    .get(k)
                    .and_then(Node::as_str)
                    .map(|v| (k.to_string(), v.to_string()))
            })
        });
    found.unwrap_or_else(|| ("app".to_string(), name.to_string()))
}

/// `service.match`: Flagger reads only the first match's `uri.prefix`.
fn read_prefix(r: &mut Reader, node: &Node, path: &str) -> Option<String> {
    let (prefix, line, at) = first_uri_prefix(r, node, path, "App Mesh")?;
    if prefix.is_empty() {
        // Flagger's rule: an empty prefix is `/`.
        return Some("/".to_string());
    }
    if !prefix.starts_with('/') {
        r.error(
            line,
            &at,
            format!("an App Mesh route prefix starts with '/', found {prefix:?}"),
        );
        return None;
    }
    Some(prefix)
}

/// Flagger ignores `service.rewrite`; `uri: /` under the prefix `/` rewrites nothing (the
/// examples of Flagger's App Mesh docs carry it), anything else would be lost.
fn check_rewrite(r: &mut Reader, node: &Node, line: usize, prefix: &str) {
    let no_op = prefix == "/"
        && matches!(&node.value, Value::Map(entries) if entries.len() == 1)
        && node.get("uri").and_then(Node::as_str) == Some("/");
    if !no_op {
        r.error(line, "spec.service.rewrite", "Flagger's App Mesh router does not rewrite requests, so this rewrite would be dropped (only `uri: /` under the prefix `/`, which changes nothing, is accepted); remove it, or use a router that renders it (istio, gatewayapi:v1)");
    }
}

/// A Go duration (Flagger's `time.ParseDuration`) in whole milliseconds, truncated as
/// Flagger's `Milliseconds()`. Flagger drops what it cannot parse, so that is an error here.
fn millis(r: &mut Reader, node: &Node, path: &str) -> Option<i64> {
    let text = r.string(node, path)?;
    let parsed = if text.bytes().all(|b| b.is_ascii_digit()) {
        Err(format!("expected a duration with a unit such as \"15s\" or \"500ms\" (Flagger's App Mesh router drops a bare number), found {text:?}"))
    } else {
        parse_duration(&text)
    };
    match parsed.map(|d: Duration| i64::try_from(d.as_millis())) {
        Ok(Ok(ms)) => Some(ms),
        Ok(Err(_)) => {
            r.error(node.line, path, format!("duration too long: {text:?}"));
            None
        }
        Err(why) => {
            r.error(node.line, path, why);
            None
        }
    }
}

/// Flagger's `{attempts, perTryTimeout, retryOn}` and the attempts as written.
fn read_retries(r: &mut Reader, node: &Node, path: &str) -> Option<(RetryPolicy, i64)> {
    r.map(node, path, &["attempts", "perTryTimeout", "retryOn"])?;
    let before = r.errors.len();
    let attempts = match field(node, "attempts") {
        Some(n) => r.int(n, &join(path, "attempts"), 0, i64::from(i32::MAX))?,
        None => 0,
    };
    let per_try = match field(node, "perTryTimeout") {
        Some(n) => millis(r, n, &join(path, "perTryTimeout")),
        None => Some(250),
    };
    let mut events = Vec::new();
    if let Some(n) = field(node, "retryOn") {
        let at = join(path, "retryOn");
        if let Some(text) = r.string(n, &at) {
            if !text.is_empty() {
                for item in text.split(',') {
                    if RETRY_EVENTS.contains(&item) {
                        events.push(item.to_string());
                    } else {
                        r.error(n.line, &at, format!("App Mesh retries on the HTTP events {}; found {item:?} (Flagger splits retryOn on commas, without spaces)", RETRY_EVENTS.join(", ")));
                    }
                }
            }
        }
    }
    if events.is_empty() {
        events.push("gateway-error".to_string());
    }
    let per_try = per_try?;
    (r.errors.len() == before).then_some((
        RetryPolicy {
            max_retries: if attempts > 0 { attempts } else { 1 },
            per_retry_timeout: Millis::new(per_try),
            http_retry_events: events,
        },
        attempts,
    ))
}

/// `service.backends`: VirtualService names in the canary's namespace, or ARNs.
fn read_backends(r: &mut Reader, node: &Node, path: &str) -> Vec<VirtualServiceBackend> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index(path, i);
        let Some(text) = r.string(item, &at) else {
            continue;
        };
        if text.starts_with("arn:aws") {
            out.push(VirtualServiceBackend::Arn(text));
        } else if is_subdomain(&text) {
            out.push(VirtualServiceBackend::Ref { name: text });
        } else {
            r.error(item.line, &at, format!("expected a VirtualService name (lowercase letters, digits, '-' and '.') or an arn:aws ARN, found {text:?}"));
        }
    }
    out
}

/// `service.hosts`: the domains of Flagger's App Mesh gateway annotations.
fn read_hosts(r: &mut Reader, node: &Node, path: &str) -> Vec<String> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index(path, i);
        let Some(text) = r.string(item, &at) else {
            continue;
        };
        if text.is_empty() || text.contains(',') || text.contains(char::is_whitespace) {
            r.error(
                item.line,
                &at,
                format!("expected a domain (no commas or spaces), found {text:?}"),
            );
        } else {
            out.push(text);
        }
    }
    out
}

/// A DNS-1123 subdomain (a Kubernetes object name).
fn is_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

const TEMPLATE_NAME: &str = "appmesh.yaml.j2";
const TEMPLATE: &str = include_str!("../../templates/appmesh.yaml.j2");

#[derive(Serialize)]
struct Context<'a> {
    header: String,
    api_version: &'static str,
    namespace: &'a str,
    managed_by: &'static str,
    node_labels: BTreeMap<&'a str, &'a str>,
    node_annotations: BTreeMap<&'a str, &'a str>,
    port_mapping: PortMapping,
    listener_timeout: Option<ListenerTimeout>,
    backends: &'a [VirtualServiceBackend],
    access_log: bool,
    nodes: [VirtualNode; 2],
    route_timeout: Option<HttpTimeout>,
    retry_policy: Option<&'a RetryPolicy>,
    routers: [VirtualRouter<'a>; 2],
}

#[derive(Serialize)]
struct PortMapping {
    port: u16,
    protocol: &'static str,
}

#[derive(Serialize)]
struct HttpTimeout {
    #[serde(rename = "perRequest")]
    per_request: Millis,
}

#[derive(Serialize)]
struct ListenerTimeout {
    http: HttpTimeout,
}

#[derive(Serialize)]
struct VirtualNode {
    name: String,
    pod_labels: BTreeMap<String, String>,
    hostname: String,
}

#[derive(Serialize)]
struct VirtualRouter<'a> {
    name: String,
    annotations: BTreeMap<&'static str, String>,
    routes: Vec<Route<'a>>,
}

#[derive(Serialize)]
struct Route<'a> {
    name: String,
    priority: Option<u16>,
    #[serde(rename = "match")]
    match_: RouteMatch<'a>,
    targets: Vec<Target<'a>>,
}

#[derive(Serialize)]
struct RouteMatch<'a> {
    prefix: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    headers: &'a [HeaderMatch],
}

#[derive(Serialize)]
struct Target<'a> {
    node: &'a str,
    weight: u8,
}

/// The canary's two weighted targets, canary first (Flagger's order).
fn targets<'a>(backends: &Backends<'a>, canary_weight: u8, primary_weight: u8) -> Vec<Target<'a>> {
    vec![
        Target {
            node: backends.canary,
            weight: canary_weight,
        },
        Target {
            node: backends.primary,
            weight: primary_weight,
        },
    ]
}

/// The apex VirtualRouter's routes: the weighted prefix route, or for an A/B canary the
/// header route with the weights and the prefix route to the primary.
fn apex_routes<'a>(
    config: &'a Config,
    canary: &Canary,
    backends: &Backends<'a>,
    weights: Weights,
) -> Result<Vec<Route<'a>>, RouteError> {
    let apex = canary.service.name.as_str();
    let prefix_only = RouteMatch {
        prefix: &config.prefix,
        headers: &[],
    };
    Ok(match &canary.analysis.strategy {
        Strategy::Canary { .. } | Strategy::BlueGreen { .. } => vec![Route {
            name: apex.to_string(),
            priority: None,
            match_: prefix_only,
            targets: targets(backends, weights.canary, weights.primary),
        }],
        // `spec` read the matches at load time; an A/B canary has at least one header.
        Strategy::AB { .. } if config.ab_headers.is_empty() => {
            return Err(RouteError::no_ab_match(
                canary,
                "expected a header match for an A/B canary, found none",
            ));
        }
        Strategy::AB { .. } => vec![
            Route {
                name: format!("{apex}-a"),
                priority: Some(10),
                match_: RouteMatch {
                    prefix: &config.prefix,
                    headers: &config.ab_headers,
                },
                targets: targets(backends, weights.canary, weights.primary),
            },
            Route {
                name: format!("{apex}-b"),
                priority: Some(20),
                match_: prefix_only,
                targets: vec![Target {
                    node: backends.primary,
                    weight: 100,
                }],
            },
        ],
    })
}

fn render(config: &Config, input: &RenderInput) -> Result<String, RouteError> {
    let (canary, backends, weights) = (input.canary, input.backends, input.weights);
    let namespace = canary.id.namespace.as_str();
    let apex = canary.service.name.as_str();
    let port = match canary.service.target_port {
        Some(PortRef::Number(n)) if n > 0 => n,
        _ => canary.service.port,
    };
    let protocol = if canary.service.port_name.contains("grpc") {
        "grpc"
    } else {
        "http"
    };
    let (label, value) = &config.selector;
    let node = |name: &str, value: String| VirtualNode {
        name: name.to_string(),
        pod_labels: BTreeMap::from([(label.clone(), value)]),
        hostname: format!("{name}.{namespace}.svc.cluster.local."),
    };
    let timeout = config.timeout.as_ref().map(|(_, ms)| *ms);
    let targets = |canary_weight, primary_weight| targets(backends, canary_weight, primary_weight);
    let apex_routes = apex_routes(config, canary, backends, weights)?;
    let canary_name = format!("{apex}-canary");
    let (node_labels, node_annotations) = apex_metadata(canary);
    let context = Context {
        header: header_comment(canary),
        api_version: API_VERSION,
        namespace,
        managed_by: MANAGED_BY,
        node_labels,
        node_annotations,
        port_mapping: PortMapping { port, protocol },
        listener_timeout: timeout.map(|ms| ListenerTimeout {
            http: HttpTimeout {
                per_request: Millis::new(ms),
            },
        }),
        backends: &config.backends,
        access_log: config.access_log,
        nodes: [
            node(backends.primary, format!("{value}-primary")),
            node(backends.canary, value.clone()),
        ],
        route_timeout: timeout.map(|ms| HttpTimeout {
            per_request: Millis::new(ms),
        }),
        retry_policy: config.retries.as_ref(),
        routers: [
            VirtualRouter {
                name: apex.to_string(),
                annotations: gateway_annotations(config),
                routes: apex_routes,
            },
            VirtualRouter {
                name: canary_name.clone(),
                annotations: BTreeMap::new(),
                routes: vec![Route {
                    name: canary_name,
                    priority: None,
                    match_: RouteMatch {
                        prefix: &config.prefix,
                        headers: &[],
                    },
                    targets: targets(100, 0),
                }],
            },
        ],
    };
    render_checked_all(canary, TEMPLATE_NAME, TEMPLATE, &context, |docs| {
        verify(docs, &context, backends, weights)
    })
}

/// Flagger's App Mesh gateway annotations on the apex VirtualService, when `service.hosts`
/// is set: each domain followed by a comma, as Flagger joins them.
fn gateway_annotations(config: &Config) -> BTreeMap<&'static str, String> {
    let mut a = BTreeMap::new();
    if config.hosts.is_empty() {
        return a;
    }
    let domains: String = config.hosts.iter().map(|h| format!("{h},")).collect();
    a.insert("gateway.appmesh.k8s.aws/expose", "true".to_string());
    a.insert("gateway.appmesh.k8s.aws/domain", domains);
    if let Some((text, _)) = &config.timeout {
        a.insert("gateway.appmesh.k8s.aws/timeout", text.clone());
    }
    if config.attempts > 0 {
        a.insert(
            "gateway.appmesh.k8s.aws/retries",
            config.attempts.to_string(),
        );
    }
    a
}

/// Reads the six documents back: kinds and names in Flagger's order, every route's weights
/// summing to 100, the apex router's first route carrying the weights asked for (canary
/// first, as Flagger writes them) and the canary router sending everything to the canary.
fn verify(
    docs: &[Json],
    context: &Context,
    backends: &Backends,
    weights: Weights,
) -> Result<(), String> {
    let [apex, canary] = &context.routers;
    let expected = [
        ("VirtualNode", backends.primary),
        ("VirtualNode", backends.canary),
        ("VirtualRouter", apex.name.as_str()),
        ("VirtualService", apex.name.as_str()),
        ("VirtualRouter", canary.name.as_str()),
        ("VirtualService", canary.name.as_str()),
    ];
    if docs.len() != expected.len() {
        return Err(format!(
            "expected {} documents, found {}",
            expected.len(),
            docs.len()
        ));
    }
    for (doc, (kind, name)) in docs.iter().zip(expected) {
        crate::route::expect_object(doc, API_VERSION, kind, name, context.namespace)?;
    }
    let weights_of = |doc: &Json, route: usize| -> Result<Vec<(String, u64)>, String> {
        doc.pointer(&format!(
            "/spec/routes/{route}/httpRoute/action/weightedTargets"
        ))
        .and_then(Json::as_array)
        .ok_or_else(|| format!("routes[{route}]: expected weighted targets"))?
        .iter()
        .map(|t| {
            match (
                t.pointer("/virtualNodeRef/name").and_then(Json::as_str),
                t.get("weight").and_then(Json::as_u64),
            ) {
                (Some(n), Some(w)) => Ok((n.to_string(), w)),
                _ => Err(format!(
                    "routes[{route}]: expected a node and a weight, found {t}"
                )),
            }
        })
        .collect()
    };
    for doc in [&docs[2], &docs[4]] {
        let count = doc
            .pointer("/spec/routes")
            .and_then(Json::as_array)
            .map_or(0, Vec::len);
        for i in 0..count {
            let sum: u64 = weights_of(doc, i)?.iter().map(|(_, w)| w).sum();
            if sum != 100 {
                return Err(format!("routes[{i}]: weights sum to {sum}, expected 100"));
            }
        }
    }
    let want = |c: u8, p: u8| {
        vec![
            (backends.canary.to_string(), u64::from(c)),
            (backends.primary.to_string(), u64::from(p)),
        ]
    };
    let found = weights_of(&docs[2], 0)?;
    if found != want(weights.canary, weights.primary) {
        return Err(format!(
            "the apex router: expected canary {} and primary {}, found {found:?}",
            weights.canary, weights.primary
        ));
    }
    let found = weights_of(&docs[4], 0)?;
    if found != want(100, 0) {
        return Err(format!(
            "the canary router: expected all traffic to the canary, found {found:?}"
        ));
    }
    Ok(())
}

/// Flagger's observer queries for appmesh.
pub(crate) const APPMESH_METRICS: QuerySet = QuerySet {
    name: "appmesh",
    success_rate: r#"
sum(rate(envoy_cluster_upstream_rq{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)", envoy_response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(envoy_cluster_upstream_rq{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[{{ interval }}])) by (le))"#,
    encode_names: None,
    judge_primary: JudgePrimary::Workload,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_are_subdomains() {
        assert!(is_subdomain("backend"));
        assert!(is_subdomain("backend.test"));
        assert!(!is_subdomain(""));
        assert!(!is_subdomain("Backend"));
        assert!(!is_subdomain("a..b"));
        assert!(!is_subdomain("-a"));
    }

    #[test]
    fn durations_are_whole_milliseconds_and_need_a_unit() {
        let node = |text: &str| {
            crate::yaml::node::parse_documents(text).unwrap()[0]
                .root
                .clone()
        };
        let mut r = Reader::new("c.yaml");
        assert_eq!(millis(&mut r, &node("15s"), "t"), Some(15_000));
        assert_eq!(millis(&mut r, &node("1.5ms"), "t"), Some(1));
        assert_eq!(millis(&mut r, &node("1m30s"), "t"), Some(90_000));
        assert!(r.errors.is_empty());
        assert_eq!(millis(&mut r, &node("15"), "t"), None);
        assert_eq!(millis(&mut r, &node("15 seconds"), "t"), None);
        assert_eq!(r.errors.len(), 2);
    }
}
