//! The Istio router: a `VirtualService` named after the apex Service plus the
//! `DestinationRule`s `<primary>` and `<canary>` (named after the two backend Services, so
//! `<svc>-primary` and `<svc>-canary` for Flagger canaries), all in one `route.yaml`, as
//! Flagger's `pkg/router/istio.go` creates them. `networking.istio.io/v1beta1` for Flagger's
//! `provider: istio` (and for Flagger canaries with no provider anywhere: Istio is Flagger's
//! default), `v1` for `istio:v1`; a native `spec.route` of kind `VirtualService` picks the
//! version by its `apiVersion`.
//!
//! - This file: reading Flagger's `spec.service` fields (typed by [`crate::route::istio::api`])
//!   and an A/B canary's `analysis.match`, and the fields refused.
//! - `rollout.rs`: `analysis.sessionAffinity` and `analysis.mirror`, and their refusals.
//! - `render.rs`: the three documents from `templates/istio.yaml.j2`, read back and checked.
//! - `api.rs`: the Istio-shaped types Flagger's Canary carries (`match`, `retries`, ...),
//!   which the ingress router reads too.
//!
//! Fields Flagger's Istio router applies and sluice renders: `gateways`, `hosts`,
//! `delegation`, `match`, `rewrite` (`uri`, `authority`), `headers`, `retries`, `timeout`,
//! `corsPolicy`, `trafficPolicy` (both DestinationRules) and, with `portDiscovery` behind a
//! gateway or delegation, the destination port. Beyond Flagger: a static `service.mirror`
//! (Gateway API mirror filters, which Flagger's Istio router ignores) becomes Istio `mirrors`,
//! so the mirror asked for is not dropped.
//!
//! Rollout state (`rollout.rs` reads the fields, `render.rs` writes them from the status'
//! [`RouteState`]): `analysis.sessionAffinity` (the cookie routes and `Set-Cookie` headers of
//! Flagger's `getSessionAffinityRouteRules`) and, on blue/green, `analysis.mirror` /
//! `mirrorWeight` (`mirror` to the canary with `mirrorPercentage`).
//!
//! Refused, with a message: what `rollout.rs` lists, `appProtocol: tcp` (Flagger writes a TCP route),
//! `gatewayRefs` and `backendTimeout` (Gateway API only: Flagger's Istio router ignores them),
//! `rewrite.type: ReplaceFullPath` (an Istio rewrite replaces the matched prefix).

pub mod api;
pub mod argo;
pub mod managed_routes;
mod render;
mod rollout;

use crate::route::field;
use crate::route::gateway_api::{AnalysisMirror, CookieAttributes};
use crate::route::istio::api::{
    CorsPolicy, Headers, HttpMatchRequest, HttpRetry, IstioDuration, TrafficPolicy,
};
use crate::route::ANALYSIS_RENDERED;
use crate::route::{
    AbInput, BuiltinMetrics, FieldUse, FlaggerFields, FlaggerInput, JudgePrimary, QuerySet,
    RouteError, Router,
};
use crate::route::{NativeInput, RenderInput};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};

/// The Istio router.
pub struct Istio;

/// The `networking.istio.io` version written (both have the same schema for what sluice writes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IstioVersion {
    #[default]
    V1beta1,
    V1,
}

impl IstioVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            IstioVersion::V1beta1 => "networking.istio.io/v1beta1",
            IstioVersion::V1 => "networking.istio.io/v1",
        }
    }
}

/// A validated Istio route.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub version: IstioVersion,
    /// `service.hosts`; the apex Service is added when neither it nor `*` is listed.
    pub hosts: Vec<String>,
    /// `service.gateways`; `mesh` when empty.
    pub gateways: Vec<String>,
    /// A delegate VirtualService: no hosts, no gateways.
    pub delegation: bool,
    /// `service.portDiscovery`: with a gateway other than `mesh` first, or delegation, the
    /// destinations carry the service port (Flagger's `makeDestination`).
    pub port_discovery: bool,
    /// What every HTTP route carries (boxed: it is large and most routes leave it empty).
    pub http: Box<HttpFields>,
    /// Written into both DestinationRules.
    pub traffic_policy: Option<Box<TrafficPolicy>>,
    /// An A/B canary's `analysis.match`; empty for other strategies.
    pub ab_matches: Vec<HttpMatchRequest>,
    /// `analysis.sessionAffinity`: the session cookie's `Set-Cookie` attributes.
    pub session_affinity: Option<CookieAttributes>,
    /// `analysis.mirror` on a blue/green canary: mirror to the canary while the rollout's state
    /// says so.
    pub analysis_mirror: Option<AnalysisMirror>,
    /// An Argo Rollout's route: the user's VirtualServices and DestinationRule, copied with
    /// the step's weights (everything above is then unused).
    pub argo: Option<Box<argo::ArgoIstio>>,
}

/// The `spec.service` fields Flagger puts on every HTTP route of the VirtualService.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpFields {
    pub matches: Vec<HttpMatchRequest>,
    pub rewrite: Option<Rewrite>,
    pub timeout: Option<IstioDuration>,
    pub retries: Option<HttpRetry>,
    pub cors: Option<CorsPolicy>,
    pub headers: Option<Headers>,
    /// Static mirrors from `service.mirror`.
    pub mirrors: Vec<Mirror>,
}

/// Istio `HTTPRewrite`: at least one of the two.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rewrite {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
}

/// One mirror destination: a Service host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// `name`, or `name.namespace.svc.cluster.local` for another namespace.
    pub host: String,
    pub port: u16,
}

impl Router for Istio {
    type Variant = IstioVersion;
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "Istio VirtualService";
    const PROVIDERS: &'static [(&'static str, IstioVersion)] = &[
        ("istio", IstioVersion::V1beta1),
        ("istio:v1beta1", IstioVersion::V1beta1),
        ("istio:v1", IstioVersion::V1),
    ];
    const ALIASES: &'static [(&'static str, IstioVersion)] = &[];
    const NATIVE_KIND: &'static str = "VirtualService";
    const NATIVE_FIELDS: &'static [&'static str] = &["hosts", "gateways"];

    /// Flagger compares provider strings as written, so `Istio` would not be Istio there
    /// either; say which spelling is meant.
    fn near_miss(text: &str) -> Option<String> {
        Self::PROVIDERS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text))
            .map(|(name, _)| {
                format!("provider names are lowercase: expected {name:?}, found {text:?}")
            })
    }

    fn read_flagger(r: &mut Reader, version: IstioVersion, input: &FlaggerInput) -> Option<Config> {
        reject_unsupported(r, input);
        let state = rollout::read(r, input);
        let svc = input.service?;
        let before = r.errors.len();
        let base = "spec.service";
        let hosts = field(svc, "hosts")
            .map(|n| strings(r, n, &join(base, "hosts")))
            .unwrap_or_default();
        let gateways = field(svc, "gateways")
            .map(|n| strings(r, n, &join(base, "gateways")))
            .unwrap_or_default();
        let delegation = field(svc, "delegation")
            .and_then(|n| r.bool(n, &join(base, "delegation")))
            .unwrap_or(false);
        if delegation {
            for (key, set) in [
                ("hosts", !hosts.is_empty()),
                ("gateways", !gateways.is_empty()),
            ] {
                if let (true, Some(n)) = (set, field(svc, key)) {
                    r.error(n.line, &join(base, key), "a delegate VirtualService (delegation: true) has no hosts or gateways: the root VirtualService that delegates to it holds them; remove this field or delegation");
                }
            }
        }
        let port_discovery = field(svc, "portDiscovery")
            .and_then(|n| r.bool(n, &join(base, "portDiscovery")))
            .unwrap_or(false);
        let typed = |key: &str| field(svc, key).map(|n| (n, join(base, key)));
        let matches = typed("match")
            .and_then(|(n, p)| read_matches(r, n, &p))
            .unwrap_or_default();
        let rewrite = typed("rewrite").and_then(|(n, p)| read_rewrite(r, n, &p));
        let timeout = typed("timeout").and_then(|(n, p)| api::read(r, n, &p));
        let retries = typed("retries").and_then(|(n, p)| api::read(r, n, &p));
        let cors = typed("corsPolicy").and_then(|(n, p)| api::read(r, n, &p));
        let headers = typed("headers").and_then(|(n, p)| api::read(r, n, &p));
        let traffic_policy = typed("trafficPolicy")
            .and_then(|(n, p)| read_traffic_policy(r, n, &p))
            .map(Box::new);
        let mirrors = typed("mirror")
            .map(|(n, p)| read_mirrors(r, n, &p))
            .unwrap_or_default();
        if r.errors.len() > before {
            return None;
        }
        let (session_affinity, analysis_mirror) = state?;
        Some(Config {
            version,
            hosts,
            gateways,
            delegation,
            port_discovery,
            http: Box::new(HttpFields {
                matches,
                rewrite,
                timeout,
                retries,
                cors,
                headers,
                mirrors,
            }),
            traffic_policy,
            ab_matches: Vec::new(),
            session_affinity,
            analysis_mirror,
            argo: None,
        })
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        let route = native.route;
        let version = match native.api_version {
            "networking.istio.io/v1beta1" => IstioVersion::V1beta1,
            "networking.istio.io/v1" => IstioVersion::V1,
            other => {
                r.error(native.api_line, "spec.route.apiVersion", format!("expected networking.istio.io/v1beta1 or networking.istio.io/v1 for VirtualService, found {other:?}"));
                return None;
            }
        };
        let hosts = route
            .get("hosts")
            .map(|n| strings(r, n, "spec.route.hosts"))
            .unwrap_or_default();
        let gateways = route
            .get("gateways")
            .map(|n| strings(r, n, "spec.route.gateways"))
            .unwrap_or_default();
        Some(Config {
            version,
            hosts,
            gateways,
            ..Config::default()
        })
    }

    /// Flagger's `mergeMatchConditions`: with `service.match` set, each A/B match is merged
    /// into a copy of every service match, keeping only its `headers` and `sourceLabels`.
    /// Where that would drop a condition (any other A/B field, or service-match headers or
    /// sourceLabels replaced by the A/B match's), sluice reports it instead.
    fn read_ab_matches(config: &mut Config, r: &mut Reader, input: &AbInput) {
        let Some(ab) = read_matches(r, input.matches, "spec.analysis.match") else {
            return;
        };
        let own = &config.http.matches;
        if !own.is_empty() {
            let Value::Seq(items) = &input.matches.value else {
                return;
            };
            let with_headers = own.iter().position(|m| m.headers.is_some());
            let with_labels = own.iter().position(|m| m.source_labels.is_some());
            for (i, (m, node)) in ab.iter().zip(items).enumerate() {
                let at = index("spec.analysis.match", i);
                for key in m.fields() {
                    let line = node.get(key).map_or(node.line, |n| n.line);
                    let taken = match key {
                        "headers" => with_headers,
                        "sourceLabels" => with_labels,
                        _ => {
                            r.error(line, &join(&at, key), "with spec.service.match set, Flagger merges each A/B match into the service matches keeping only its headers and sourceLabels, so this condition would be dropped; move it into spec.service.match or remove it");
                            continue;
                        }
                    };
                    if let Some(j) = taken {
                        r.error(line, &join(&at, key), format!("Flagger's merge replaces the {key} of spec.service.match[{j}] with these, dropping that match's {key} conditions; keep {key} conditions in only one of the two lists"));
                    }
                }
            }
        }
        config.ab_matches = ab;
    }

    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        if let Some(argo) = &config.argo {
            return argo::render(argo, input).map(Some);
        }
        render::render(config, input).map(Some)
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "istio",
        table_order: 0,
        spec_rows: &[
            ("spec.service.timeout", FieldUse::Renders),
            ("spec.service.backendTimeout", FieldUse::Refuses),
            ("spec.service.hosts", FieldUse::Renders),
            ("spec.service.delegation", FieldUse::Renders),
            ("spec.service.match", FieldUse::Renders),
            ("spec.service.retries", FieldUse::Renders),
            ("spec.service.rewrite", FieldUse::Renders),
            ("spec.service.mirror", FieldUse::Renders),
            ("spec.service.headers", FieldUse::Renders),
            ("spec.service.gateways", FieldUse::Renders),
            ("spec.service.gatewayRefs", FieldUse::Refuses),
            ("spec.service.corsPolicy", FieldUse::Renders),
            ("spec.service.trafficPolicy", FieldUse::Renders),
        ],
        analysis_rows: ANALYSIS_RENDERED,
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        match provider {
            "istio" | "istio:v1beta1" | "istio:v1" => Some(BuiltinMetrics::Queries(ISTIO_METRICS)),
            _ => None,
        }
    }
}

/// Flagger fields this router does not render; dropping them silently would route other
/// requests than asked.
fn reject_unsupported(r: &mut Reader, input: &FlaggerInput) {
    let gateway_only = "a Gateway API field: Flagger's Istio router ignores it; remove it (use gateways and hosts for Istio)";
    let rejected = [
        ("spec.service", input.service, "gatewayRefs", gateway_only),
        ("spec.service", input.service, "backendTimeout", "Flagger's Istio router ignores it (an Istio route has one timeout: spec.service.timeout); remove it"),
    ];
    for (path, node, key, message) in rejected {
        if let Some(line) = node.and_then(|n| n.key_line(key)) {
            r.error(line, &join(path, key), message);
        }
    }
    if let Some(n) = input.service.and_then(|s| field(s, "appProtocol")) {
        if n.as_str().is_some_and(|p| p.eq_ignore_ascii_case("tcp")) {
            r.error(n.line, "spec.service.appProtocol", "appProtocol tcp makes Flagger's Istio router write a TCP route; sluice writes HTTP routes only so far; remove it or roll this canary out without sluice");
        }
    }
}

/// A list of non-empty strings.
fn strings(r: &mut Reader, node: &Node, path: &str) -> Vec<String> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index(path, i);
        match r.string(item, &at) {
            Some(text) if text.is_empty() => r.error(item.line, &at, "expected a name, found \"\""),
            // A host or gateway name never holds a space or a line break; Istio refuses it.
            Some(text) if text.chars().any(|c| c.is_whitespace() || c.is_control()) => r.error(
                item.line,
                &at,
                format!("expected a name without spaces or line breaks, found {text:?}"),
            ),
            Some(text) => out.push(text),
            None => {}
        }
    }
    out
}

/// A non-empty list of `HTTPMatchRequest`s, none empty (an empty one matches every request).
fn read_matches(r: &mut Reader, node: &Node, path: &str) -> Option<Vec<HttpMatchRequest>> {
    let matches: Vec<HttpMatchRequest> = api::read(r, node, path)?;
    let mut ok = true;
    if let Value::Seq(items) = &node.value {
        for (i, (m, item)) in matches.iter().zip(items).enumerate() {
            if m.fields().iter().all(|f| *f == "name") {
                r.error(item.line, &index(path, i), "expected at least one condition (uri, headers, sourceLabels, ...); an empty match would match every request");
                ok = false;
            }
        }
    }
    ok.then_some(matches)
}

/// Flagger's `{uri, authority, type}`; Istio's rewrite has no `type`: it replaces the
/// matched prefix, so only that type (or none) is accepted.
fn read_rewrite(r: &mut Reader, node: &Node, path: &str) -> Option<Rewrite> {
    r.map(node, path, &["uri", "authority", "type"])?;
    let before = r.errors.len();
    let uri = field(node, "uri").and_then(|n| r.string(n, &join(path, "uri")));
    let authority = field(node, "authority").and_then(|n| r.string(n, &join(path, "authority")));
    if let Some(n) = field(node, "type") {
        let at = join(path, "type");
        match r.string(n, &at).as_deref() {
            Some("ReplacePrefixMatch") | None => {}
            Some(other) => r.error(n.line, &at, format!("an Istio rewrite replaces the matched prefix (ReplacePrefixMatch), and Flagger's Istio router drops this field; expected ReplacePrefixMatch or no type, found {other:?}")),
        }
    }
    if uri.is_none() && authority.is_none() {
        r.error(
            node.line,
            path,
            "expected uri, authority or both; an empty rewrite changes nothing",
        );
    }
    (r.errors.len() == before).then_some(Rewrite { uri, authority })
}

fn read_traffic_policy(r: &mut Reader, node: &Node, path: &str) -> Option<TrafficPolicy> {
    let policy: TrafficPolicy = api::read(r, node, path)?;
    let hashes = [policy.load_balancer.as_ref()]
        .into_iter()
        .chain(
            policy
                .port_level_settings
                .iter()
                .map(|p| p.load_balancer.as_ref()),
        )
        .flatten();
    for lb in hashes {
        if lb.simple.is_some() && lb.consistent_hash.is_some() {
            r.error(
                node.line,
                &join(path, "loadBalancer"),
                "expected simple or consistentHash, found both (Istio takes one load balancer)",
            );
            return None;
        }
        if let Some(h) = &lb.consistent_hash {
            let keys = usize::from(h.http_header_name.is_some())
                + usize::from(h.http_cookie.is_some())
                + usize::from(h.use_source_ip);
            if keys != 1 {
                r.error(node.line, &join(path, "loadBalancer.consistentHash"), format!("expected exactly one of httpHeaderName, httpCookie, useSourceIp, found {keys}"));
                return None;
            }
        }
    }
    Some(policy)
}

/// `service.mirror`: Gateway API mirror filters (`backendRef` only), each a Service with a
/// port, becoming Istio `mirrors` (every request mirrored, as the filter says).
fn read_mirrors(r: &mut Reader, node: &Node, path: &str) -> Vec<Mirror> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = index(path, i);
        if r.map(item, &at, &["backendRef"]).is_none() {
            continue;
        }
        let Some(backend) = r.required(item, &at, "backendRef") else {
            continue;
        };
        let at = join(&at, "backendRef");
        if r.map(
            backend,
            &at,
            &["group", "kind", "name", "namespace", "port"],
        )
        .is_none()
        {
            continue;
        }
        let group = field(backend, "group").and_then(|n| r.string(n, &join(&at, "group")));
        let kind = field(backend, "kind").and_then(|n| r.string(n, &join(&at, "kind")));
        if group.as_deref().is_some_and(|g| !g.is_empty())
            || kind.as_deref().is_some_and(|k| k != "Service")
        {
            r.error(
                backend.line,
                &at,
                "an Istio mirror is a Service: expected group \"\" and kind Service (or neither)",
            );
            continue;
        }
        let name = r
            .required(backend, &at, "name")
            .and_then(|n| r.string(n, &join(&at, "name")));
        let namespace =
            field(backend, "namespace").and_then(|n| r.string(n, &join(&at, "namespace")));
        let port = r
            .required(backend, &at, "port")
            .and_then(|n| r.int(n, &join(&at, "port"), 1, 65535))
            .and_then(|p| u16::try_from(p).ok());
        if let (Some(name), Some(port)) = (name, port) {
            let host = match namespace {
                Some(ns) => format!("{name}.{ns}.svc.cluster.local"),
                None => name,
            };
            out.push(Mirror { host, port });
        }
    }
    out
}

/// Flagger's observer queries for istio.
pub(crate) const ISTIO_METRICS: QuerySet = QuerySet {
    name: "istio",
    success_rate: r#"
sum(rate(istio_requests_total{reporter="destination", destination_workload_namespace="{{ namespace }}", destination_workload=~"{{ target }}", response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(istio_requests_total{reporter="destination", destination_workload_namespace="{{ namespace }}", destination_workload=~"{{ target }}"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(istio_request_duration_milliseconds_bucket{reporter="destination", destination_workload_namespace="{{ namespace }}", destination_workload=~"{{ target }}"}[{{ interval }}])) by (le))"#,
    encode_names: None,
    judge_primary: JudgePrimary::Workload,
};
