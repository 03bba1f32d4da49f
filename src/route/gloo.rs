//! Gloo Edge: a `gateway.solo.io/v1` RouteTable named after the apex Service plus the two
//! `gloo.solo.io/v1` Upstreams it routes to, `<namespace>-<svc>-primaryupstream-<port>` and
//! `<namespace>-<svc>-canaryupstream-<port>`, all in one `route.yaml` (the Upstreams first, as
//! Flagger's `pkg/router/gloo.go` creates them first). The Gloo VirtualService that delegates
//! to the RouteTable is the user's and is not touched.
//!
//! - RouteTable: one route with `inheritablePathMatchers: true` and a `multi` destination,
//!   the primary Upstream then the canary Upstream with their weights; the apex's `labels`
//!   and `annotations` (`spec.service.apex`) on it, as in Flagger (which also adds Flux's
//!   "reconcile: disabled" annotations to keep Flux off an object it patches live; sluice
//!   commits the object for Flux to apply, so it adds neither). Weight 0 is written as `0`;
//!   Flagger's Go type omits it, which Gloo reads as 0.
//! - Upstreams: `spec.kube` with the backend Service, the canary's namespace and the service
//!   port. Flagger also copies the Service's pod selector into `kube.selector`; the Service
//!   selects those same pods, so sluice leaves it out (the Services are rendered elsewhere,
//!   from the source workload). With `spec.upstreamRef`, the referenced Upstream (read from
//!   the repo, never edited) gives `sslConfig`, `circuitBreakers`, `connectionConfig`,
//!   `loadBalancerConfig`, `useHttp2`, `initialStreamWindowSize`,
//!   `initialConnectionWindowSize` and `httpProxyHostname`, copied as written: the fields
//!   Flagger copies. (Flagger spells the last one `httpProxyHostName`, which Gloo's API
//!   server prunes; sluice copies it under Gloo's name. Flagger also copies a `spec.labels`,
//!   a field Gloo's Upstream does not have.)
//! - A/B: Flagger puts the `analysis.match` headers and methods on the one route, so requests
//!   that match none reach no route of the table (Envoy answers 404), during the analysis
//!   and after promotion. sluice writes the matched route first, with one matcher per
//!   `analysis.match` entry (Gloo ORs matchers; Flagger folds every entry's headers into one
//!   matcher, which ANDs them: identical for one entry, as in Flagger's e2e test), then a route
//!   with no matcher sending everything else to the primary Upstream. A match may hold
//!   `headers` (exact or regex) and `method` (exact), what Flagger's Gloo router reads; any
//!   other condition (uri, queryParams, sourceLabels, a prefix or suffix header match) would
//!   be dropped, and is refused.
//!
//! Refused: `analysis.mirror`, `mirrorWeight` and `sessionAffinity` (Flagger's Gloo router
//! ignores them; see [`super::kuma::refuse_ignored`]). The other route fields of
//! `spec.service` (hosts, match, retries ...) are ignored by Flagger's Gloo router (they have
//! no place in this RouteTable), and by this one, as the SMI router does.
//!
//! A native `spec.route` is `{apiVersion: gateway.solo.io/v1, kind: RouteTable}`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as Json;

use crate::core::model::Strategy;
use crate::route::expect_api_version;
use crate::route::kuma::refuse_ignored;
use crate::route::ANALYSIS_MATCH_ONLY;
use crate::route::{apex_metadata, NativeInput, RenderInput};
use crate::route::{
    header_comment, render_checked_all, AbInput, BuiltinMetrics, FieldUse, FlaggerFields,
    FlaggerInput, JudgePrimary, QuerySet, RouteError, Router, Weights, MANAGED_BY,
};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, name_at, Reader};

/// The Gloo router.
pub struct Gloo;

/// The Upstream `spec` fields Flagger copies from `spec.upstreamRef`, in its order.
pub const COPIED_UPSTREAM_FIELDS: &[&str] = &[
    "sslConfig",
    "circuitBreakers",
    "connectionConfig",
    "loadBalancerConfig",
    "useHttp2",
    "initialStreamWindowSize",
    "initialConnectionWindowSize",
    "httpProxyHostname",
];

/// A validated Gloo route.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// The Upstream settings copied from `spec.upstreamRef`: (field, value), in
    /// [`COPIED_UPSTREAM_FIELDS`] order.
    pub upstream_settings: Vec<(String, Json)>,
    /// An A/B canary's `analysis.match`, one matcher per entry; empty otherwise.
    pub ab_matchers: Vec<Matcher>,
}

/// A Gloo route matcher: every header and one of the methods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Matcher {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatcher>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
}

/// A Gloo header matcher: the exact value, or a regex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeaderMatcher {
    pub name: String,
    pub value: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub regex: bool,
}

impl Router for Gloo {
    type Variant = ();
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "Gloo RouteTable and Upstreams";
    const PROVIDERS: &'static [(&'static str, ())] = &[("gloo", ())];
    /// Flagger picks its Gloo router for any provider starting with `gloo`.
    const ALIASES: &'static [(&'static str, ())] = &[("gloo:v1", ())];
    const NATIVE_KIND: &'static str = "RouteTable";
    const NATIVE_FIELDS: &'static [&'static str] = &[];
    const REFERENCES: &'static [&'static str] = &["upstreamRef"];

    fn near_miss(_text: &str) -> Option<String> {
        None
    }

    fn read_flagger(r: &mut Reader, _variant: (), input: &FlaggerInput) -> Option<Config> {
        let before = r.errors.len();
        refuse_ignored(r, input.analysis, "Gloo");
        let upstream_settings = match input.spec.get("upstreamRef") {
            Some(n) => read_upstream_ref(r, n, input).unwrap_or_default(),
            None => Vec::new(),
        };
        (r.errors.len() == before).then_some(Config {
            upstream_settings,
            ab_matchers: Vec::new(),
        })
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        expect_api_version(r, native, "gateway.solo.io/v1", "RouteTable")
            .map(|()| Config::default())
    }

    fn read_ab_matches(config: &mut Config, r: &mut Reader, input: &AbInput) {
        let path = "spec.analysis.match";
        let Some(items) = r.seq(input.matches, path) else {
            return;
        };
        let mut matchers = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if let Some(m) = read_matcher(r, item, &index(path, i)) {
                matchers.push(m);
            }
        }
        if matchers.len() == items.len() {
            config.ab_matchers = matchers;
        }
    }

    /// Route state comes from session affinity and analysis mirroring, both refused when read.
    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        render(config, input).map(Some)
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "gloo",
        table_order: 5,
        spec_rows: &[("spec.upstreamRef", FieldUse::Renders)],
        analysis_rows: ANALYSIS_MATCH_ONLY,
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        provider
            .starts_with("gloo")
            .then_some(BuiltinMetrics::Queries(GLOO_METRICS))
    }
}

/// `spec.upstreamRef`: a `gloo.solo.io/v1` Upstream (namespace defaulting to the canary's),
/// found in the repo; returns the settings Flagger copies from its `spec`.
fn read_upstream_ref(
    r: &mut Reader,
    node: &Node,
    input: &FlaggerInput,
) -> Option<Vec<(String, Json)>> {
    let path = "spec.upstreamRef";
    r.map(node, path, &["apiVersion", "kind", "name", "namespace"])?;
    let before = r.errors.len();
    if let Some(n) = node.get("apiVersion") {
        let at = join(path, "apiVersion");
        if let Some(api) = r.string(n, &at) {
            if api != "gloo.solo.io/v1" {
                r.error(
                    n.line,
                    &at,
                    format!("expected gloo.solo.io/v1 (a Gloo Upstream), found {api:?}"),
                );
            }
        }
    }
    if let Some(n) = node.get("kind") {
        let at = join(path, "kind");
        if let Some(kind) = r.string(n, &at) {
            if kind != "Upstream" {
                r.error(
                    n.line,
                    &at,
                    format!(
                        "expected Upstream (a Gloo Upstream to copy settings from), found {kind:?}"
                    ),
                );
            }
        }
    }
    let name = r
        .required(node, path, "name")
        .and_then(|n| name_at(r, n, &join(path, "name")));
    let namespace = match node.get("namespace") {
        Some(n) => name_at(r, n, &join(path, "namespace")).map(|n| n.to_string()),
        None => input.namespace.map(str::to_string),
    };
    if r.errors.len() > before {
        return None;
    }
    let (name, namespace) = (name?, namespace?);
    let found: Vec<_> = input
        .snapshot
        .find("Upstream", name.as_str())
        .filter(|o| o.api_version == Some("gloo.solo.io/v1"))
        .filter(|o| o.namespace.unwrap_or(namespace.as_str()) == namespace)
        .collect();
    let object = match found.as_slice() {
        [one] => one,
        [] => {
            r.error(node.line, path, format!("Upstream {namespace}/{name} (gloo.solo.io/v1) not found in the repo; sluice reads the Upstream whose settings it copies from the repo (any .yaml file), never from the cluster"));
            return None;
        }
        [first, second, ..] => {
            r.error(
                node.line,
                path,
                format!(
                    "Upstream {namespace}/{name} is defined twice: {}:{} and {}:{}; keep one",
                    first.file, first.line, second.file, second.line
                ),
            );
            return None;
        }
    };
    let Some(spec) = object.node.get("spec") else {
        return Some(Vec::new());
    };
    Some(
        COPIED_UPSTREAM_FIELDS
            .iter()
            .filter_map(|key| {
                spec.get(key)
                    .filter(|v| v.value != Value::Null)
                    .map(|v| ((*key).to_string(), v.to_json()))
            })
            .collect(),
    )
}

/// One `analysis.match` entry as a Gloo matcher: `headers` (exact or regex) and `method`
/// (exact), the conditions Flagger's Gloo router reads; any other is refused.
fn read_matcher(r: &mut Reader, item: &Node, at: &str) -> Option<Matcher> {
    let Value::Map(entries) = &item.value else {
        r.error(
            item.line,
            at,
            format!("expected a mapping, found {}", item.kind()),
        );
        return None;
    };
    let before = r.errors.len();
    let mut matcher = Matcher::default();
    for (key, value) in entries {
        let path = join(at, &key.text);
        match key.text.as_str() {
            "headers" => {
                let Value::Map(headers) = &value.value else {
                    r.error(
                        value.line,
                        &path,
                        format!("expected a mapping of header names, found {}", value.kind()),
                    );
                    continue;
                };
                for (header, m) in headers {
                    let hp = join(&path, &header.text);
                    if let Some((value, regex)) = read_string_match(r, m, &hp, "header") {
                        matcher.headers.push(HeaderMatcher {
                            name: header.text.clone(),
                            value,
                            regex,
                        });
                    }
                }
            }
            "method" => match read_string_match(r, value, &path, "method") {
                Some((_, true)) => r.error(value.line, &path, "a Gloo route matches methods by name: expected exact, found regex"),
                Some((method, false)) => matcher.methods.push(method),
                None => {}
            },
            _ => r.error(key.line, &path, "Flagger's Gloo router matches only headers and method, so this condition would be dropped; remove it, or use a provider that routes on it (istio)"),
        }
    }
    if matcher.headers.is_empty() && matcher.methods.is_empty() && r.errors.len() == before {
        r.error(
            item.line,
            at,
            "expected headers or method; an empty match would match every request",
        );
    }
    (r.errors.len() == before).then_some(matcher)
}

/// A Flagger `StringMatch` a Gloo matcher can hold: `(value, is_regex)`.
fn read_string_match(
    r: &mut Reader,
    node: &Node,
    path: &str,
    what: &str,
) -> Option<(String, bool)> {
    r.map(node, path, &["exact", "prefix", "suffix", "regex"])?;
    let set: Vec<&str> = ["exact", "prefix", "suffix", "regex"]
        .into_iter()
        .filter(|k| node.get(k).is_some())
        .collect();
    match set.as_slice() {
        [kind @ ("exact" | "regex")] => {
            let n = node.get(kind)?;
            let value = r.string(n, &join(path, kind))?;
            Some((value, *kind == "regex"))
        }
        [kind] => {
            let line = node.get(kind).map_or(node.line, |n| n.line);
            r.error(line, &join(path, kind), format!("a Gloo {what} matcher matches an exact value or a regex, and Flagger's Gloo router drops a {kind} match; use exact or regex"));
            None
        }
        _ => {
            r.error(
                node.line,
                path,
                format!(
                    "expected exactly one of exact or regex, found {}",
                    set.len()
                ),
            );
            None
        }
    }
}

const TEMPLATE_NAME: &str = "gloo.yaml.j2";
const TEMPLATE: &str = include_str!("../../templates/gloo.yaml.j2");

#[derive(Serialize)]
struct Context<'a> {
    header: String,
    name: &'a str,
    namespace: &'a str,
    managed_by: &'static str,
    labels: BTreeMap<&'a str, &'a str>,
    annotations: BTreeMap<&'a str, &'a str>,
    /// Primary then canary.
    upstreams: [Upstream<'a>; 2],
    routes: Vec<Route<'a>>,
}

#[derive(Serialize)]
struct Upstream<'a> {
    name: String,
    /// The copied settings, then `kube`, as one mapping in order.
    spec: serde_json::Map<String, Json>,
    #[serde(skip)]
    service: &'a str,
}

#[derive(Serialize)]
struct Route<'a> {
    /// Empty: no `matchers` key (every request).
    matchers: &'a [Matcher],
    destinations: Vec<Destination>,
}

#[derive(Serialize)]
struct Destination {
    upstream: String,
    weight: u8,
}

/// Flagger's Upstream name: `<namespace>-<apex>-<role>upstream-<port>`.
pub fn upstream_name(namespace: &str, apex: &str, role: &str, port: u16) -> String {
    format!("{namespace}-{apex}-{role}upstream-{port}")
}

fn render(config: &Config, input: &RenderInput) -> Result<String, RouteError> {
    let (canary, backends, weights) = (input.canary, input.backends, input.weights);
    let namespace = canary.id.namespace.as_str();
    let apex = canary.service.name.as_str();
    let port = canary.service.port;
    let make = |role: &str, service: &str| {
        let mut spec: serde_json::Map<String, Json> = config
            .upstream_settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        spec.insert(
            "kube".into(),
            serde_json::json!({
                "serviceName": service,
                "serviceNamespace": namespace,
                "servicePort": port,
            }),
        );
        (upstream_name(namespace, apex, role, port), spec)
    };
    let (primary_name, primary_spec) = make("primary", backends.primary);
    let (canary_name, canary_spec) = make("canary", backends.canary);
    let weighted = vec![
        Destination {
            upstream: primary_name.clone(),
            weight: weights.primary,
        },
        Destination {
            upstream: canary_name.clone(),
            weight: weights.canary,
        },
    ];
    let routes = match &canary.analysis.strategy {
        Strategy::Canary { .. } | Strategy::BlueGreen { .. } => vec![Route {
            matchers: &[],
            destinations: weighted,
        }],
        // `spec` read the matches at load time; an A/B canary has at least one.
        Strategy::AB { .. } if config.ab_matchers.is_empty() => {
            return Err(RouteError::no_ab_match(
                canary,
                "expected at least one match for an A/B canary, found none",
            ));
        }
        Strategy::AB { .. } => vec![
            Route {
                matchers: &config.ab_matchers,
                destinations: weighted,
            },
            Route {
                matchers: &[],
                destinations: vec![Destination {
                    upstream: primary_name.clone(),
                    weight: 100,
                }],
            },
        ],
    };
    let (labels, annotations) = apex_metadata(canary);
    let context = Context {
        header: header_comment(canary),
        name: apex,
        namespace,
        managed_by: MANAGED_BY,
        labels,
        annotations,
        upstreams: [
            Upstream {
                name: primary_name,
                spec: primary_spec,
                service: backends.primary,
            },
            Upstream {
                name: canary_name,
                spec: canary_spec,
                service: backends.canary,
            },
        ],
        routes,
    };
    render_checked_all(canary, TEMPLATE_NAME, TEMPLATE, &context, |docs| {
        verify(docs, &context, weights)
    })
}

/// Reads the documents back: two Upstreams for the two backend Services, then the RouteTable
/// whose first route sends the weights asked for to them, every route summing to 100.
fn verify(docs: &[Json], context: &Context, weights: Weights) -> Result<(), String> {
    let [primary, canary, table] = docs else {
        return Err(format!("expected 3 documents, found {}", docs.len()));
    };
    for (doc, upstream) in [
        (primary, &context.upstreams[0]),
        (canary, &context.upstreams[1]),
    ] {
        let expected = [
            ("/apiVersion", "gloo.solo.io/v1"),
            ("/kind", "Upstream"),
            ("/metadata/name", upstream.name.as_str()),
            ("/metadata/namespace", context.namespace),
            ("/spec/kube/serviceName", upstream.service),
            ("/spec/kube/serviceNamespace", context.namespace),
        ];
        check_strings(doc, &expected)?;
    }
    check_strings(
        table,
        &[
            ("/apiVersion", "gateway.solo.io/v1"),
            ("/kind", "RouteTable"),
            ("/metadata/name", context.name),
            ("/metadata/namespace", context.namespace),
        ],
    )?;
    let routes = table
        .pointer("/spec/routes")
        .and_then(Json::as_array)
        .ok_or("expected spec.routes to be a list")?;
    for (i, route) in routes.iter().enumerate() {
        let destinations = route
            .pointer("/routeAction/multi/destinations")
            .and_then(Json::as_array)
            .ok_or_else(|| format!("expected route {i} to have multi destinations"))?;
        let found: Vec<(&str, u64)> = destinations
            .iter()
            .map(|d| {
                Some((
                    d.pointer("/destination/upstream/name")?.as_str()?,
                    d.get("weight")?.as_u64()?,
                ))
            })
            .collect::<Option<_>>()
            .ok_or_else(|| format!("expected named, weighted destinations in route {i}"))?;
        if found.iter().map(|(_, w)| w).sum::<u64>() != 100 {
            return Err(format!(
                "expected route {i}'s weights to sum to 100, found {found:?}"
            ));
        }
        if i == 0 {
            let want = [
                (
                    context.upstreams[0].name.as_str(),
                    u64::from(weights.primary),
                ),
                (
                    context.upstreams[1].name.as_str(),
                    u64::from(weights.canary),
                ),
            ];
            if found != want {
                return Err(format!(
                    "expected the first route to send {want:?}, found {found:?}"
                ));
            }
        }
    }
    Ok(())
}

fn check_strings(doc: &Json, expected: &[(&str, &str)]) -> Result<(), String> {
    for (pointer, want) in expected {
        if doc.pointer(pointer).and_then(Json::as_str) != Some(want) {
            return Err(format!(
                "expected {pointer} = {want:?}, found {:?}",
                doc.pointer(pointer)
            ));
        }
    }
    Ok(())
}

/// Flagger's observer queries for gloo.
pub(crate) const GLOO_METRICS: QuerySet = QuerySet {
    name: "gloo",
    success_rate: r#"
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}-{{ target }}-canaryupstream-[0-9a-zA-Z-]+_[0-9a-zA-Z-]+", envoy_response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}-{{ target }}-canaryupstream-[0-9a-zA-Z-]+_[0-9a-zA-Z-]+"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=~"{{ namespace }}-{{ target }}-canaryupstream-[0-9a-zA-Z-]+_[0-9a-zA-Z-]+"}[{{ interval }}])) by (le))"#,
    encode_names: None,
    judge_primary: JudgePrimary::Replace(&[("-canaryupstream-", "-primaryupstream-")]),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_names_are_flaggers() {
        assert_eq!(
            upstream_name("test", "podinfo", "canary", 9898),
            "test-podinfo-canaryupstream-9898"
        );
    }
}
