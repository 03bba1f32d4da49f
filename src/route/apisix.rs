//! Provider `apisix`: the Apache APISIX ingress controller's `ApisixRoute`
//! (`apisix.apache.org/v2`), as Flagger's `pkg/router/apisix.go` writes it.
//!
//! The user writes an ApisixRoute and names it in the canary's `spec.routeRef`. sluice finds
//! it in the repo (by kind, name and the canary's namespace, like the source Deployment), never
//! edits it, and writes `<route>-<svc>-canary` to the canary's output folder:
//!
//! - `metadata`: the user's labels (plus `app.kubernetes.io/managed-by: sluice`) and
//!   annotations, as Flagger copies them.
//! - `spec.http`: the one rule of the user's route with a backend whose `serviceName` is the
//!   apex Service `<svc>` (the first, as Flagger looks), every field kept, `priority: 10000`
//!   (so APISIX picks it over the user's rule, which has the same match), and two backends:
//!   the user's backend renamed to `<svc>-primary` and a `<svc>-canary` with the same
//!   `servicePort`, `resolveGranularity` and `subset`, each with its weight.
//! - `spec.stream` and `spec.ingressClassName`: copied. (Flagger copies `stream`; it drops
//!   `ingressClassName`, a field its Go type lacks, so a controller watching one class would
//!   not see the canary route: sluice keeps it. Likewise the rule fields Flagger's type lacks,
//!   `plugin_config_namespace`, `match.filter_func`, `authentication.ldapAuth` and a plugin's
//!   `secretRef`, are copied rather than dropped.)
//!
//! Refused when the canary is loaded, each with file, line and field: a missing or unresolved
//! `routeRef`; a route with no rule for `<svc>`, or whose rule has more than one backend
//! (Flagger refuses both); a rule with `upstreams` (external upstreams would take part of the
//! split, so the weights would not be the canary's; Flagger drops them); a field the
//! ApisixRoute CRD does not have; and what Flagger's APISIX router does not do: blue/green
//! (`iterations`), A/B (`analysis.match`), `analysis.sessionAffinity` and `analysis.mirror`.
//! Like Flagger, the router reads no `spec.service` route fields (hosts, match, retries ...):
//! the ApisixRoute holds the routing.
//!
//! A native `spec.route` of kind `ApisixRoute` is refused: the route object comes from a
//! `routeRef`, which only a Flagger canary has.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as Json;

use crate::route::referenced::{defined_twice, entries, error_in};
use crate::route::refuse_non_canary;
use crate::route::Canary;
use crate::route::ANALYSIS_REFUSED;
use crate::route::{
    header_comment, render_checked, AbInput, BuiltinMetrics, FieldUse, FlaggerFields, FlaggerInput,
    JudgePrimary, QuerySet, RouteError, Router, MANAGED_BY,
};
use crate::route::{NativeInput, RenderInput};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};
use crate::yaml::snapshot::Object;

/// The APISIX router.
pub struct Apisix;

/// The ApisixRoute API version Flagger reads and writes.
pub const API_VERSION: &str = "apisix.apache.org/v2";
pub const KIND: &str = "ApisixRoute";

/// The canary route's priority: Flagger's `maxPriority`, above the user's rule.
pub const PRIORITY: u32 = 10_000;

/// The fields of an ApisixRoute `http` rule (the CRD's) other than `upstreams`.
const RULE_KEYS: &[&str] = &[
    "name",
    "priority",
    "timeout",
    "match",
    "backends",
    "websocket",
    "plugin_config_name",
    "plugin_config_namespace",
    "plugins",
    "authentication",
];
/// The fields of an ApisixRoute `http` backend (the CRD's, and Flagger's Go type).
const BACKEND_KEYS: &[&str] = &[
    "serviceName",
    "servicePort",
    "resolveGranularity",
    "weight",
    "subset",
];

/// A validated APISIX route: what sluice copies from the user's ApisixRoute.
#[derive(Debug, Clone, PartialEq)]
pub struct FlaggerRoute {
    /// `spec.routeRef.name`: the user's ApisixRoute (Flagger's metric queries call it
    /// `{{ route }}`).
    pub route: String,
    /// The user's route's labels and annotations (Flagger copies both).
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub ingress_class_name: Option<String>,
    /// The rule's `name`.
    pub rule_name: String,
    /// The rule's other fields, in the user's order, without `name`, `priority` and
    /// `backends` (which sluice writes).
    pub rule_fields: Vec<(String, Json)>,
    /// The rule's one backend, which both backends copy.
    pub backend: BackendFields,
    /// The user's `spec.stream` rules, copied as Flagger does.
    pub stream: Option<Json>,
}

/// What the ApisixRoute is written from.
#[derive(Debug, Clone, PartialEq)]
pub enum Config {
    /// A Flagger canary: the canary route `<route>-<svc>-canary` Flagger creates.
    Flagger(Box<FlaggerRoute>),
    /// An Argo Rollout's `trafficRouting.apisix`: the user's ApisixRoute, copied with the
    /// weights set (`route::copied`).
    Rollout(Box<crate::route::copied::Copied>),
}

/// The backend fields the primary and canary backends share (Flagger's copy).
#[derive(Debug, Clone, PartialEq)]
pub struct BackendFields {
    /// A port number or name.
    pub service_port: Json,
    pub resolve_granularity: Option<String>,
    pub subset: Option<String>,
}

impl Router for Apisix {
    type Variant = ();
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "APISIX ApisixRoute";
    const PROVIDERS: &'static [(&'static str, ())] = &[("apisix", ())];
    const ALIASES: &'static [(&'static str, ())] = &[];
    const NATIVE_KIND: &'static str = KIND;
    const NATIVE_FIELDS: &'static [&'static str] = &[];
    const REFERENCES: &'static [&'static str] = &["routeRef"];

    fn near_miss(_text: &str) -> Option<String> {
        None
    }

    fn read_flagger(r: &mut Reader, _variant: (), input: &FlaggerInput) -> Option<Config> {
        let refused = "Flagger's APISIX router does not implement it (an ApisixRoute canary shifts weights only); remove it, or use a Gateway API or Istio provider";
        for key in ["sessionAffinity", "mirror", "mirrorWeight"] {
            if let Some(line) = input.analysis.and_then(|a| a.key_line(key)) {
                r.error(line, &join("spec.analysis", key), refused);
            }
        }
        let (name_node, name) = read_route_ref(r, input)?;
        let namespace = input.namespace?;
        let apex = apex_name(input.spec)?;
        let found: Vec<Object> = input
            .snapshot
            .find(KIND, &name)
            .filter(|o| o.namespace.unwrap_or(namespace) == namespace)
            .collect();
        let object = match found.as_slice() {
            [one] => *one,
            [] => {
                r.error(
                    name_node.line,
                    "spec.routeRef.name",
                    format!("{KIND} {namespace}/{name} not found in the repo's YAML files"),
                );
                return None;
            }
            [a, b, ..] => {
                defined_twice(r, KIND, &format!("{namespace}/{name}"), a, b);
                return None;
            }
        };
        let canary_route = canary_route_name(&name, &apex);
        if canary_route.len() > 253 {
            r.error(name_node.line, "spec.routeRef.name", format!("the canary route {canary_route:?} would be longer than the 253 characters of a Kubernetes name; use a shorter route name"));
            return None;
        }
        read_route(r, &object, &name, &apex).map(|c| Config::Flagger(Box::new(c)))
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        r.error(native.api_line, "spec.route.kind", "an ApisixRoute canary copies the user's route named in a Flagger Canary's spec.routeRef; write a flagger.app/v1beta1 Canary with provider apisix and routeRef instead");
        None
    }

    /// Nothing to convert: [`check_canary`](Apisix::check_canary) refuses A/B.
    fn read_ab_matches(_config: &mut Config, _r: &mut Reader, _input: &AbInput) {}

    fn check_canary(config: &Config, r: &mut Reader, canary: &Canary, spec: &Node) {
        if let Config::Rollout(_) = config {
            // A Rollout's steps are a canary weight schedule.
            return;
        }
        refuse_non_canary(
            r,
            canary,
            spec,
            "Flagger supports only canary releases with provider apisix (weights shifted by stepWeight, stepWeights or maxWeight); replace iterations with a weight schedule",
            "Flagger supports only canary releases with provider apisix: the canary ApisixRoute splits by weight and cannot send matching requests to the canary; remove analysis.match and set a weight schedule",
        );
    }

    // Session affinity and mirroring, the only route state, are refused when reading.
    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        match config {
            Config::Flagger(config) => render(config, input).map(Some),
            Config::Rollout(copied) => crate::route::copied::render(copied, input).map(Some),
        }
    }

    fn route_ref(config: &Config) -> Option<&str> {
        match config {
            Config::Flagger(config) => Some(&config.route),
            Config::Rollout(_) => None,
        }
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "apisix",
        table_order: 6,
        spec_rows: &[("spec.routeRef", FieldUse::Renders)],
        analysis_rows: ANALYSIS_REFUSED,
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        (provider == "apisix").then_some(BuiltinMetrics::Queries(APISIX_METRICS))
    }
}

/// Flagger's name for the canary route: `<route>-<svc>-canary`.
pub fn canary_route_name(route: &str, apex: &str) -> String {
    format!("{route}-{apex}-canary")
}

/// The apex Service's name as Flagger takes it: `service.name`, else the target's name.
fn apex_name(spec: &Node) -> Option<String> {
    spec.get("service")
        .and_then(|s| s.get("name"))
        .and_then(Node::as_str)
        .or_else(|| spec.get("targetRef")?.get("name")?.as_str())
        .map(str::to_string)
}

/// Reads `spec.routeRef`: its name node and name.
fn read_route_ref<'n>(r: &mut Reader, input: &FlaggerInput<'n>) -> Option<(&'n Node, String)> {
    let path = "spec.routeRef";
    let Some(node) = input.spec.get("routeRef") else {
        r.error(input.spec.line, path, format!("required field is missing: provider apisix routes through an ApisixRoute you write; name it here ({{apiVersion: {API_VERSION}, kind: {KIND}, name: <route>}})"));
        return None;
    };
    // Flagger's `LocalObjectReference`: the route is in the canary's namespace.
    r.map(node, path, &["apiVersion", "kind", "name"])?;
    let before = r.errors.len();
    for (key, want) in [("apiVersion", API_VERSION), ("kind", KIND)] {
        if let Some(n) = node.get(key) {
            let field = join(path, key);
            if let Some(text) = r.string(n, &field) {
                if text != want {
                    r.error(
                        n.line,
                        &field,
                        format!("expected {want} (the route Flagger's APISIX router reads), found {text:?}"),
                    );
                }
            }
        }
    }
    let name_node = r.required(node, path, "name")?;
    let name = r.string(name_node, &join(path, "name"))?;
    if name.is_empty() {
        r.error(
            name_node.line,
            &join(path, "name"),
            "expected an ApisixRoute name, found \"\"",
        );
    }
    (r.errors.len() == before).then_some((name_node, name))
}

/// A `metadata.labels` or `metadata.annotations` mapping of strings.
fn string_map(
    r: &mut Reader,
    file: &str,
    node: Option<&Node>,
    field: &str,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (key, value) in node.map(entries).unwrap_or_default() {
        match value.as_str() {
            Some(text) => {
                out.insert(key.text.clone(), text.to_string());
            }
            None => error_in(
                r,
                file,
                value.line,
                &join(field, &key.text),
                format!("expected a string, found {}", value.kind()),
            ),
        }
    }
    out
}

/// Checks the user's route and keeps what the canary route copies.
fn read_route(r: &mut Reader, object: &Object, name: &str, apex: &str) -> Option<FlaggerRoute> {
    let before = r.errors.len();
    let file = object.file;
    let root = object.node;
    if object.api_version != Some(API_VERSION) {
        let line = root.get("apiVersion").map_or(object.line, |n| n.line);
        error_in(
            r,
            file,
            line,
            "apiVersion",
            format!(
                "expected {API_VERSION} (the ApisixRoute version Flagger's router reads and sluice writes), found {:?}",
                object.api_version.unwrap_or("")
            ),
        );
    }
    let metadata = root.get("metadata");
    let labels = string_map(
        r,
        file,
        metadata.and_then(|m| m.get("labels")),
        "metadata.labels",
    );
    let annotations = string_map(
        r,
        file,
        metadata.and_then(|m| m.get("annotations")),
        "metadata.annotations",
    );
    let spec = root.get("spec");
    let ingress_class_name = spec
        .and_then(|s| s.get("ingressClassName"))
        .filter(|n| n.value != Value::Null)
        .and_then(|n| match n.as_str() {
            Some(text) => Some(text.to_string()),
            None => {
                error_in(
                    r,
                    file,
                    n.line,
                    "spec.ingressClassName",
                    format!("expected a string, found {}", n.kind()),
                );
                None
            }
        });
    let stream = spec
        .and_then(|s| s.get("stream"))
        .filter(|n| n.value != Value::Null)
        .map(Node::to_json);
    let http = spec.and_then(|s| s.get("http"));
    let rules = match http.map(|h| &h.value) {
        Some(Value::Seq(rules)) if !rules.is_empty() => rules,
        _ => {
            let line = spec
                .and_then(|s| s.key_line("http"))
                .or(spec.map(|s| s.line))
                .unwrap_or(object.line);
            error_in(r, file, line, "spec.http", format!("expected at least one http rule, the one whose backend is the canary's Service {apex:?} (Flagger refuses an ApisixRoute without spec.http)"));
            return None;
        }
    };
    let found = rules.iter().enumerate().find(|(_, rule)| {
        rule.get("backends")
            .map(|b| match &b.value {
                Value::Seq(items) => items.as_slice(),
                _ => &[],
            })
            .unwrap_or_default()
            .iter()
            .any(|b| b.get("serviceName").and_then(Node::as_str) == Some(apex))
    });
    let Some((i, rule)) = found else {
        let line = spec.and_then(|s| s.key_line("http")).unwrap_or(object.line);
        error_in(r, file, line, "spec.http", format!("no rule of ApisixRoute {name} has a backend with serviceName {apex:?}, the canary's Service; Flagger splits the rule that sends to it"));
        return None;
    };
    let (rule_name, rule_fields, backend) = read_rule(r, file, rule, &index("spec.http", i));
    if r.errors.len() > before {
        return None;
    }
    Some(FlaggerRoute {
        route: name.to_string(),
        labels,
        annotations,
        ingress_class_name,
        rule_name: rule_name?,
        rule_fields,
        backend: backend?,
        stream,
    })
}

/// The http rule that sends to the canary's Service: its name, the fields copied as they
/// are, and its one backend.
fn read_rule(
    r: &mut Reader,
    file: &str,
    rule: &Node,
    path: &str,
) -> (Option<String>, Vec<(String, Json)>, Option<BackendFields>) {
    let mut rule_name = None;
    let mut rule_fields = Vec::new();
    let mut backend = None;
    for (key, value) in entries(rule) {
        let field = join(path, &key.text);
        match key.text.as_str() {
            "name" => match value.as_str() {
                Some(text) if !text.is_empty() => rule_name = Some(text.to_string()),
                _ => error_in(r, file, value.line, &field, "expected the rule's name (the CRD requires one), found none"),
            },
            "priority" => {} // replaced by PRIORITY
            "backends" => backend = read_backend(r, file, key.line, value, &field),
            "upstreams" => error_in(r, file, key.line, &field, "the canary route's backends would share the traffic with these external upstreams, so the canary would not get its weight (Flagger drops them); move the upstreams to another rule"),
            known if RULE_KEYS.contains(&known) => {
                rule_fields.push((key.text.clone(), value.to_json()));
            }
            other => error_in(
                r,
                file,
                key.line,
                &field,
                format!(
                    "unknown ApisixRoute http field {other:?}; expected one of: {}, upstreams",
                    RULE_KEYS.join(", ")
                ),
            ),
        }
    }
    if rule_name.is_none() && rule.get("name").is_none() {
        error_in(
            r,
            file,
            rule.line,
            &join(path, "name"),
            "required field is missing (the CRD requires a rule name)",
        );
    }
    (rule_name, rule_fields, backend)
}

/// The rule's backends: exactly one (Flagger's rule), with the CRD's fields.
fn read_backend(
    r: &mut Reader,
    file: &str,
    line: usize,
    node: &Node,
    path: &str,
) -> Option<BackendFields> {
    let items = match &node.value {
        Value::Seq(items) => items.as_slice(),
        _ => &[],
    };
    let [backend] = items else {
        error_in(r, file, line, path, format!("expected exactly one backend, the canary's Service (Flagger splits a rule with one backend into primary and canary), found {}", items.len()));
        return None;
    };
    let at = index(path, 0);
    let before = r.errors.len();
    for (key, _) in entries(backend) {
        if !BACKEND_KEYS.contains(&key.text.as_str()) {
            error_in(
                r,
                file,
                key.line,
                &join(&at, &key.text),
                format!(
                    "unknown ApisixRoute backend field; expected one of: {}",
                    BACKEND_KEYS.join(", ")
                ),
            );
        }
    }
    let text = |r: &mut Reader, key: &str| {
        let n = backend.get(key).filter(|n| n.value != Value::Null)?;
        match n.as_str() {
            Some(t) => Some(t.to_string()),
            None => {
                error_in(
                    r,
                    file,
                    n.line,
                    &join(&at, key),
                    format!("expected a string, found {}", n.kind()),
                );
                None
            }
        }
    };
    let resolve_granularity = text(r, "resolveGranularity");
    let subset = text(r, "subset");
    let service_port = match backend.get("servicePort").map(|n| (n, n.to_json())) {
        Some((_, port @ (Json::Number(_) | Json::String(_)))) => Some(port),
        Some((n, _)) => {
            error_in(
                r,
                file,
                n.line,
                &join(&at, "servicePort"),
                format!("expected a port number or name, found {}", n.kind()),
            );
            None
        }
        None => {
            error_in(
                r,
                file,
                backend.line,
                &join(&at, "servicePort"),
                "required field is missing (the CRD requires the Service's port)",
            );
            None
        }
    };
    if r.errors.len() > before {
        return None;
    }
    Some(BackendFields {
        service_port: service_port?,
        resolve_granularity,
        subset,
    })
}

const TEMPLATE_NAME: &str = "apisixroute.yaml.j2";
const TEMPLATE: &str = include_str!("../../templates/apisixroute.yaml.j2");

#[derive(Serialize)]
struct Context<'a> {
    header: String,
    api_version: &'static str,
    name: String,
    namespace: &'a str,
    labels: Vec<(&'a str, &'a str)>,
    annotations: Vec<(&'a str, &'a str)>,
    ingress_class_name: Option<&'a str>,
    rule_name: &'a str,
    rule_fields: &'a [(String, Json)],
    priority: u32,
    backends: [Backend<'a>; 2],
    stream: Option<&'a Json>,
}

#[derive(Serialize)]
struct Backend<'a> {
    service_name: &'a str,
    service_port: &'a Json,
    resolve_granularity: Option<&'a str>,
    subset: Option<&'a str>,
    weight: u8,
}

fn render(config: &FlaggerRoute, input: &RenderInput) -> Result<String, RouteError> {
    let (canary, backends, weights) = (input.canary, input.backends, input.weights);
    let mut labels: BTreeMap<&str, &str> = config
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    labels.insert("app.kubernetes.io/managed-by", MANAGED_BY);
    let backend = |service_name, weight| Backend {
        service_name,
        service_port: &config.backend.service_port,
        resolve_granularity: config.backend.resolve_granularity.as_deref(),
        subset: config.backend.subset.as_deref(),
        weight,
    };
    let context = Context {
        header: header_comment(canary),
        api_version: API_VERSION,
        name: canary_route_name(&config.route, canary.service.name.as_str()),
        namespace: canary.id.namespace.as_str(),
        labels: labels.into_iter().collect(),
        annotations: config
            .annotations
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
        ingress_class_name: config.ingress_class_name.as_deref(),
        rule_name: &config.rule_name,
        rule_fields: &config.rule_fields,
        priority: PRIORITY,
        backends: [
            backend(backends.primary, weights.primary),
            backend(backends.canary, weights.canary),
        ],
        stream: config.stream.as_ref(),
    };
    render_checked(canary, TEMPLATE_NAME, TEMPLATE, &context, |parsed| {
        verify(parsed, &context)
    })
}

/// Reads the rendered route back: kind, name, one rule with the copied fields, the priority,
/// and the two backends with the weights asked for.
fn verify(doc: &Json, context: &Context) -> Result<(), String> {
    let expect = |pointer: &str, want: Json| {
        let found = doc.pointer(pointer);
        if found == Some(&want) {
            Ok(())
        } else {
            Err(format!("expected {pointer} = {want}, found {found:?}"))
        }
    };
    expect("/apiVersion", Json::from(context.api_version))?;
    expect("/kind", Json::from(KIND))?;
    expect("/metadata/name", Json::from(context.name.as_str()))?;
    expect("/metadata/namespace", Json::from(context.namespace))?;
    let http = doc
        .pointer("/spec/http")
        .and_then(Json::as_array)
        .ok_or("expected spec.http to be a list")?;
    if http.len() != 1 {
        return Err(format!("expected one http rule, found {}", http.len()));
    }
    expect("/spec/http/0/name", Json::from(context.rule_name))?;
    expect("/spec/http/0/priority", Json::from(context.priority))?;
    for (key, value) in context.rule_fields {
        if http[0].get(key) != Some(value) {
            return Err(format!("expected the rule's {key} to be copied unchanged"));
        }
    }
    for (i, b) in context.backends.iter().enumerate() {
        expect(
            &format!("/spec/http/0/backends/{i}/serviceName"),
            Json::from(b.service_name),
        )?;
        expect(
            &format!("/spec/http/0/backends/{i}/servicePort"),
            b.service_port.clone(),
        )?;
        expect(
            &format!("/spec/http/0/backends/{i}/weight"),
            Json::from(b.weight),
        )?;
    }
    let count = doc
        .pointer("/spec/http/0/backends")
        .and_then(Json::as_array)
        .map_or(0, Vec::len);
    if count != 2 {
        return Err(format!("expected two backends, found {count}"));
    }
    Ok(())
}

/// Flagger's observer queries for apisix.
pub(crate) const APISIX_METRICS: QuerySet = QuerySet {
    name: "apisix",
    success_rate: r#"
sum(rate(apisix_http_status{route=~"{{ namespace }}_{{ route }}-{{ target }}-canary_.+", code!~"5.."}[{{ interval }}]))
/
sum(rate(apisix_http_status{route=~"{{ namespace }}_{{ route }}-{{ target }}-canary_.+"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(apisix_http_latency_bucket{type=~"request", route=~"{{ namespace }}_{{ route }}-{{ target }}-canary_.+"}[{{ interval }}])) by (le))"#,
    encode_names: None,
    judge_primary: JudgePrimary::Unselectable,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_route_is_named_like_flaggers() {
        assert_eq!(
            canary_route_name("podinfo", "podinfo"),
            "podinfo-podinfo-canary"
        );
    }

    #[test]
    fn apex_is_the_service_name_else_the_target() {
        let doc = |yaml: &str| {
            crate::yaml::node::parse_documents(yaml).expect("test YAML parses")[0]
                .root
                .clone()
        };
        assert_eq!(
            apex_name(&doc("targetRef: {name: app}\nservice: {port: 80}\n")).as_deref(),
            Some("app")
        );
        assert_eq!(
            apex_name(&doc("targetRef: {name: app}\nservice: {name: web}\n")).as_deref(),
            Some("web")
        );
    }
}
