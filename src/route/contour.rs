//! Contour `HTTPProxy` (`projectcontour.io/v1`), as Flagger's `pkg/router/contour.go` creates
//! it for `provider: contour`: named after the apex Service, no `virtualhost` (a root
//! HTTPProxy the user writes includes it), and routes to the primary and canary Services on
//! the service port, each with a `l5d-dst-override` request header naming the Service's
//! cluster address, so a Linkerd sidecar behind Envoy keeps the split.
//!
//! - Canary and blue/green: one route, condition `prefix` (the first `service.match`'s
//!   `uri.prefix`, else `/`), the primary then the canary with their weights.
//! - A/B: first a route whose conditions are the prefix plus `analysis.match`'s headers, with
//!   the two weighted Services, then the prefix route to the primary (weight 100, canary 0).
//! - `service.timeout` becomes `timeoutPolicy: {response: <timeout>, idle: 5m}`;
//!   `service.retries` becomes `retryPolicy: {count: attempts, perTryTimeout, retryOn}` with
//!   `retryOn` split on commas. Both go on every route.
//!
//! Where sluice writes something other than Flagger, Flagger's object would not do what the
//! canary says:
//! - A weight of 0 is written (`weight: 0`); Flagger's client drops it (`omitempty`), which
//!   Contour reads as 0 once another Service has a weight: the same split.
//! - A retry policy without `retryOn` has no `retryOn`; Flagger writes `[""]`, which the
//!   HTTPProxy CRD refuses.
//! - Header conditions are sorted by name (Flagger walks a Go map, in random order), and only
//!   the first carries the prefix: Contour allows one prefix per route, so Flagger's object
//!   with two header conditions is invalid.
//!
//! Refused, with a message, because Flagger's Contour router would drop them: an A/B match with
//! anything but `headers`, more than one A/B match (Contour ANDs a route's conditions, so
//! alternatives cannot be expressed in one route), a `regex` header match (Flagger turns it
//! into an empty exact match), `service.match` beyond the first match's `uri.prefix`, and the
//! service fields of other routers (`hosts`, `gateways`, `rewrite`, `headers`, ...), the
//! analysis `mirror`, `mirrorWeight` and `sessionAffinity`, and `appProtocol: tcp`.
//!
//! A native `spec.route` is `{apiVersion: projectcontour.io/v1, kind: HTTPProxy}`.

use serde::Serialize;
use serde_json::Value as Json;

use crate::core::model::Strategy;
use crate::route::expect_api_version;
use crate::route::first_uri_prefix;
use crate::route::ApexHead;
use crate::route::ANALYSIS_MATCH_ONLY;
use crate::route::{expect_object, is_header_name, read_header_matches, single_header_match};
use crate::route::{
    field, refused_service_fields, render_checked, AbInput, Backends, BuiltinMetrics, FieldUse,
    FlaggerFields, FlaggerInput, JudgePrimary, QuerySet, RouteError, Router, Weights,
};
use crate::route::{NativeInput, RenderInput};
use crate::yaml::node::Node;
use crate::yaml::reader::{join, Reader};

/// The Contour router.
pub struct Contour;

/// The one HTTPProxy API version written.
pub const API_VERSION: &str = "projectcontour.io/v1";

/// Flagger's idle timeout next to a response timeout.
const IDLE_TIMEOUT: &str = "5m";

/// Contour's `RetryOn` values (the HTTPProxy CRD's enum).
const RETRY_ON: &[&str] = &[
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "envoy-ratelimited",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

/// A validated HTTPProxy route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The path prefix every route matches: `service.match[0].uri.prefix`, else `/`.
    pub prefix: String,
    /// `service.timeout`: the response timeout.
    pub timeout: Option<String>,
    pub retries: Option<RetryPolicy>,
    /// An A/B canary's header conditions, sorted by header name; empty for other strategies.
    pub ab_headers: Vec<HeaderCondition>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            prefix: "/".into(),
            timeout: None,
            retries: None,
            ab_headers: Vec::new(),
        }
    }
}

/// Contour's `RetryPolicy` as Flagger fills it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetryPolicy {
    pub count: i64,
    #[serde(rename = "perTryTimeout", skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<String>,
    #[serde(rename = "retryOn", skip_serializing_if = "Vec::is_empty")]
    pub retry_on: Vec<String>,
}

/// Contour's `HeaderMatchCondition` as Flagger fills it: `exact`, or `contains` for an A/B
/// `prefix` or `suffix` match (Flagger's mapping: it matches more requests than a prefix).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeaderCondition {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
}

impl Router for Contour {
    type Variant = ();
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "Contour HTTPProxy";
    const PROVIDERS: &'static [(&'static str, ())] = &[("contour", ())];
    const ALIASES: &'static [(&'static str, ())] = &[];
    const NATIVE_KIND: &'static str = "HTTPProxy";
    const NATIVE_FIELDS: &'static [&'static str] = &[];

    fn near_miss(text: &str) -> Option<String> {
        text.eq_ignore_ascii_case("contour")
            .then(|| format!("provider names are lowercase: expected \"contour\", found {text:?}"))
    }

    fn read_flagger(r: &mut Reader, _variant: (), input: &FlaggerInput) -> Option<Config> {
        reject_unsupported(r, input);
        let svc = input.service?;
        let before = r.errors.len();
        let base = "spec.service";
        let prefix = field(svc, "match")
            .and_then(|n| read_prefix(r, n, &join(base, "match")))
            .unwrap_or_else(|| "/".to_string());
        let timeout = field(svc, "timeout").and_then(|n| duration(r, n, &join(base, "timeout")));
        let retries =
            field(svc, "retries").and_then(|n| read_retries(r, n, &join(base, "retries")));
        (r.errors.len() == before).then_some(Config {
            prefix,
            timeout,
            retries,
            ab_headers: Vec::new(),
        })
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        expect_api_version(r, native, API_VERSION, "HTTPProxy").map(|()| Config::default())
    }

    /// One match of `headers` only; each header an `exact`, `prefix` or `suffix` string.
    fn read_ab_matches(config: &mut Config, r: &mut Reader, input: &AbInput) {
        let Some(ab) = single_header_match(
            r,
            input,
            "Contour",
            "Contour ANDs the conditions of a route, so Flagger's Contour router would require every match at once",
        ) else {
            return;
        };
        let name_error = |name: &str| {
            (!is_header_name(name))
                .then(|| "expected a header name (letters, digits and !#$%&'*+-.^_`|~)".to_string())
        };
        let mut out = read_header_matches(r, &ab, name_error, "exact, prefix or suffix", |r, h| {
            if h.text.is_empty() {
                r.error(h.value.line, &h.field, "expected a value, found \"\"");
                return None;
            }
            let (exact, contains) = match h.kind.text.as_str() {
                "exact" => (Some(h.text), None),
                "prefix" | "suffix" => (None, Some(h.text)),
                _ => {
                    r.error(h.kind.line, &h.field, "Flagger's Contour router drops a regex header match (it writes an empty exact match); use exact, prefix or suffix (prefix and suffix become Contour's contains, as Flagger maps them)");
                    return None;
                }
            };
            Some(HeaderCondition {
                name: h.name.text.clone(),
                exact,
                contains,
            })
        });
        out.sort_by(|a, b| a.name.cmp(&b.name));
        config.ab_headers = out;
    }

    // Session affinity and analysis mirroring, the only sources of route state, are
    // refused for Contour canaries when they are read.
    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        render(config, input).map(Some)
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "contour",
        table_order: 3,
        spec_rows: &[
            ("spec.service.timeout", FieldUse::Renders),
            ("spec.service.match", FieldUse::Renders),
            ("spec.service.retries", FieldUse::Renders),
            ("spec.service.backendTimeout", FieldUse::Refuses),
            ("spec.service.backends", FieldUse::Refuses),
            ("spec.service.corsPolicy", FieldUse::Refuses),
            ("spec.service.delegation", FieldUse::Refuses),
            ("spec.service.gatewayRefs", FieldUse::Refuses),
            ("spec.service.gateways", FieldUse::Refuses),
            ("spec.service.headers", FieldUse::Refuses),
            ("spec.service.hosts", FieldUse::Refuses),
            ("spec.service.meshName", FieldUse::Refuses),
            ("spec.service.mirror", FieldUse::Refuses),
            ("spec.service.rewrite", FieldUse::Refuses),
            ("spec.service.trafficPolicy", FieldUse::Refuses),
        ],
        analysis_rows: ANALYSIS_MATCH_ONLY,
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        (provider == "contour").then_some(BuiltinMetrics::Queries(CONTOUR_METRICS))
    }
}

/// Flagger fields this router does not render; dropping them silently would route other
/// requests than asked.
fn reject_unsupported(r: &mut Reader, input: &FlaggerInput) {
    if let Some(svc) = input.service {
        // The `spec.service` fields of other routers, which Flagger's Contour router ignores.
        for key in refused_service_fields(&Contour::FLAGGER_FIELDS) {
            if let Some(line) = svc.key_line(key) {
                r.error(line, &join("spec.service", key), "Flagger's Contour router ignores this field (it writes the HTTPProxy's prefix, timeout and retry policy only); remove it, or use a router that renders it (istio, gatewayapi:v1)");
            }
        }
        if let Some(n) = field(svc, "appProtocol") {
            if n.as_str().is_some_and(|p| p.eq_ignore_ascii_case("tcp")) {
                r.error(n.line, "spec.service.appProtocol", "sluice writes HTTP routes only: an HTTPProxy route for a TCP service would not carry its traffic; remove it or roll this canary out without sluice");
            }
        }
    }
    if let Some(analysis) = input.analysis {
        for key in ["mirror", "mirrorWeight", "sessionAffinity"] {
            if let Some(line) = analysis.key_line(key) {
                r.error(line, &join("spec.analysis", key), "Flagger's Contour router does not mirror traffic or keep sessions, so this field would be dropped; remove it, or use a router that renders it (gatewayapi:v1)");
            }
        }
    }
}

/// `service.match`: Flagger reads only the first match's `uri.prefix`.
fn read_prefix(r: &mut Reader, node: &Node, path: &str) -> Option<String> {
    let (prefix, line, at) = first_uri_prefix(r, node, path, "Contour")?;
    if !prefix.starts_with('/') {
        r.error(
            line,
            &at,
            format!("a Contour prefix condition starts with '/', found {prefix:?}"),
        );
        return None;
    }
    Some(prefix)
}

/// Flagger's `{attempts, perTryTimeout, retryOn}`.
fn read_retries(r: &mut Reader, node: &Node, path: &str) -> Option<RetryPolicy> {
    r.map(node, path, &["attempts", "perTryTimeout", "retryOn"])?;
    let before = r.errors.len();
    let count = match field(node, "attempts") {
        Some(n) => r.int(n, &join(path, "attempts"), 0, i64::from(i32::MAX))?,
        None => 0,
    };
    let per_try_timeout =
        field(node, "perTryTimeout").and_then(|n| duration(r, n, &join(path, "perTryTimeout")));
    let mut retry_on = Vec::new();
    if let Some(n) = field(node, "retryOn") {
        let at = join(path, "retryOn");
        if let Some(text) = r.string(n, &at) {
            for item in text.split(',') {
                if RETRY_ON.contains(&item) {
                    retry_on.push(item.to_string());
                } else {
                    r.error(n.line, &at, format!("Contour retries on {}; found {item:?} (Flagger splits retryOn on commas, without spaces)", RETRY_ON.join(", ")));
                }
            }
        }
    }
    (r.errors.len() == before).then_some(RetryPolicy {
        count,
        per_try_timeout,
        retry_on,
    })
}

/// A duration as Contour's CRD takes it: `infinity`, `infinite`, or numbers with units
/// `h`, `m`, `s`, `ms`, `us`, `µs`, `ns` (`1m30s`, `1.5s`).
fn duration(r: &mut Reader, node: &Node, path: &str) -> Option<String> {
    let text = r.string(node, path)?;
    if is_contour_duration(&text) {
        Some(text)
    } else {
        r.error(node.line, path, format!("expected a Contour duration (numbers with units h, m, s, ms, us or ns, like 15s or 1m30s; or infinity), found {text:?}"));
        None
    }
}

fn is_contour_duration(text: &str) -> bool {
    if text == "infinity" || text == "infinite" {
        return true;
    }
    let mut rest = text;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..digits];
        if number.is_empty() || number.matches('.').count() > 1 || number == "." {
            return false;
        }
        rest = &rest[digits..];
        let Some(unit) = ["ms", "us", "µs", "ns", "h", "m", "s"]
            .into_iter()
            .find(|u| rest.starts_with(u))
        else {
            return false;
        };
        rest = &rest[unit.len()..];
    }
    true
}

const TEMPLATE_NAME: &str = "httpproxy.yaml.j2";
const TEMPLATE: &str = include_str!("../../templates/httpproxy.yaml.j2");

#[derive(Serialize)]
struct Context<'a> {
    #[serde(flatten)]
    head: ApexHead<'a>,
    routes: Vec<Route<'a>>,
}

#[derive(Serialize)]
struct Route<'a> {
    conditions: Vec<Condition<'a>>,
    timeout: Option<TimeoutPolicy<'a>>,
    retries: Option<&'a RetryPolicy>,
    services: [Service<'a>; 2],
}

#[derive(Serialize)]
struct Condition<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    prefix: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    header: Option<&'a HeaderCondition>,
}

#[derive(Serialize)]
struct TimeoutPolicy<'a> {
    response: &'a str,
    idle: &'static str,
}

#[derive(Serialize)]
struct Service<'a> {
    name: &'a str,
    port: u16,
    weight: u8,
    /// `l5d-dst-override`'s value: `<service>.<namespace>.svc.cluster.local:<port>`.
    l5d: String,
}

fn render(config: &Config, input: &RenderInput) -> Result<String, RouteError> {
    let (canary, backends, weights) = (input.canary, input.backends, input.weights);
    let namespace = canary.id.namespace.as_str();
    let port = canary.service.port;
    let service = |name, weight| Service {
        name,
        port,
        weight,
        l5d: format!("{name}.{namespace}.svc.cluster.local:{port}"),
    };
    let route = |conditions, primary, canary_weight| Route {
        conditions,
        timeout: config.timeout.as_deref().map(|response| TimeoutPolicy {
            response,
            idle: IDLE_TIMEOUT,
        }),
        retries: config.retries.as_ref(),
        services: [
            service(backends.primary, primary),
            service(backends.canary, canary_weight),
        ],
    };
    let prefix_only = || {
        vec![Condition {
            prefix: Some(config.prefix.as_str()),
            header: None,
        }]
    };
    let routes = match &canary.analysis.strategy {
        Strategy::Canary { .. } | Strategy::BlueGreen { .. } => {
            vec![route(prefix_only(), weights.primary, weights.canary)]
        }
        // `spec` read the matches at load time; an A/B canary has at least one header.
        Strategy::AB { .. } if config.ab_headers.is_empty() => {
            return Err(RouteError::no_ab_match(
                canary,
                "expected a header match for an A/B canary, found none",
            ));
        }
        Strategy::AB { .. } => {
            // One prefix per route (Contour's rule): on the first header condition only.
            let conditions = config
                .ab_headers
                .iter()
                .enumerate()
                .map(|(i, h)| Condition {
                    prefix: (i == 0).then_some(config.prefix.as_str()),
                    header: Some(h),
                })
                .collect();
            vec![
                route(conditions, weights.primary, weights.canary),
                route(prefix_only(), 100, 0),
            ]
        }
    };
    let context = Context {
        head: ApexHead::of(canary, API_VERSION),
        routes,
    };
    render_checked(canary, TEMPLATE_NAME, TEMPLATE, &context, |doc| {
        verify(doc, &context, backends, weights)
    })
}

/// Reads the HTTPProxy back: kind, name, no virtualhost, every route to the primary then the
/// canary with weights summing to 100, the first route's being the ones asked for, and one
/// prefix per route.
fn verify(
    doc: &Json,
    context: &Context,
    backends: &Backends,
    weights: Weights,
) -> Result<(), String> {
    expect_object(
        doc,
        API_VERSION,
        "HTTPProxy",
        context.head.object.name,
        context.head.object.namespace,
    )?;
    if doc.pointer("/spec/virtualhost").is_some() {
        return Err("expected no virtualhost (the user's root HTTPProxy includes this one)".into());
    }
    let routes = doc
        .pointer("/spec/routes")
        .and_then(Json::as_array)
        .filter(|r| r.len() == context.routes.len())
        .ok_or_else(|| format!("expected {} routes", context.routes.len()))?;
    for (i, route) in routes.iter().enumerate() {
        let prefixes = route
            .get("conditions")
            .and_then(Json::as_array)
            .map_or(0, |c| {
                c.iter().filter(|c| c.get("prefix").is_some()).count()
            });
        if prefixes != 1 {
            return Err(format!(
                "routes[{i}]: expected one prefix condition, found {prefixes}"
            ));
        }
        let found: Vec<(Option<&str>, Option<u64>)> = route
            .get("services")
            .and_then(Json::as_array)
            .ok_or_else(|| format!("routes[{i}]: expected services"))?
            .iter()
            .map(|s| {
                (
                    s.get("name").and_then(Json::as_str),
                    s.get("weight").and_then(Json::as_u64),
                )
            })
            .collect();
        let names: Vec<Option<&str>> = found.iter().map(|(n, _)| *n).collect();
        if names != [Some(backends.primary), Some(backends.canary)] {
            return Err(format!(
                "routes[{i}]: expected the primary then the canary, found {names:?}"
            ));
        }
        let sum: Option<u64> = found.iter().map(|(_, w)| *w).sum();
        if sum != Some(100) {
            return Err(format!(
                "routes[{i}]: expected whole weights summing to 100, found {found:?}"
            ));
        }
        if i == 0
            && found.iter().map(|(_, w)| *w).collect::<Vec<_>>()
                != [
                    Some(u64::from(weights.primary)),
                    Some(u64::from(weights.canary)),
                ]
        {
            return Err(format!(
                "routes[0]: expected weights [{}, {}], found {found:?}",
                weights.primary, weights.canary
            ));
        }
    }
    Ok(())
}

/// Flagger's observer queries for contour.
pub(crate) const CONTOUR_METRICS: QuerySet = QuerySet {
    name: "contour",
    success_rate: r#"
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}_{{ service }}-canary_[0-9a-zA-Z-]+", envoy_response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(envoy_cluster_upstream_rq{envoy_cluster_name=~"{{ namespace }}_{{ service }}-canary_[0-9a-zA-Z-]+"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name=~"{{ namespace }}_{{ service }}-canary_[0-9a-zA-Z-]+"}[{{ interval }}])) by (le))"#,
    encode_names: None,
    judge_primary: JudgePrimary::Replace(&[("}}-canary_", "}}-primary_")]),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contour_durations_follow_the_crd_pattern() {
        for good in [
            "15s", "1m30s", "1.5s", "500ms", "10us", "3µs", "1h", "infinity", "infinite", "2h45m",
        ] {
            assert!(is_contour_duration(good), "{good}");
        }
        for bad in [
            "", "15", "s", "1.2.3s", "1d", "15 s", "-1s", ".s", "forever",
        ] {
            assert!(!is_contour_duration(bad), "{bad}");
        }
    }
}
