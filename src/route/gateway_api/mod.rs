//! The Gateway API router: HTTPRoute (`gateway.networking.k8s.io/v1` and `/v1beta1`, same
//! schema), for Flagger providers `gatewayapi:v1` and `gatewayapi:v1beta1` and native
//! `spec.route` of kind `HTTPRoute`.
//!
//! - `config.rs`: the validated [`Config`] (typed matches, filters, durations).
//! - `flagger.rs`: Flagger's Istio-style `spec.service` fields and an A/B canary's
//!   `analysis.match`, converted to HTTPRoute pieces and checked against the CRD.
//! - `render.rs`: the HTTPRoute from `templates/httproute.yaml.j2`, read back and checked.
//!
//! This file reads the route's attachment (`gatewayRefs`/`parentRefs`, `hosts`/`hostnames`),
//! the Flagger fields this router rejects, and ties the parts into the [`Router`] impl.

mod config;
mod flagger;
pub mod header_routes;
mod render;
mod rollout;
mod source;

pub(crate) use rollout::{read_cookie_attributes, read_mirror, Shape};
pub use source::{Apex, RouteSource, SourceShape, KINDS as SOURCE_KINDS};

pub use config::{
    AnalysisMirror, Config, CookieAttributes, Cors, GatewayDuration, GatewayVersion,
    HeaderModifier, HttpHeader, HttpMatch, ParentRef, PathMatch, PathRewrite, RequestMirror,
    RuleSpec, Timeouts, UrlRewrite, ValueMatch,
};

use crate::route::kubernetes::APP_HISTOGRAM_METRICS;
use crate::route::Canary;
use crate::route::ANALYSIS_RENDERED;
use crate::route::{
    AbInput, BuiltinMetrics, FieldUse, FlaggerFields, FlaggerInput, OwnTarget, ReadyCondition,
    ReadyObject, Revisions, RouteError, Router,
};
use crate::route::{FlaggerPrefix, NativeInput, RenderInput};
use crate::yaml::node::Node;
use crate::yaml::reader::{index, join, name_at, Reader};

/// The Gateway API router.
pub struct GatewayApi;

impl Router for GatewayApi {
    type Variant = GatewayVersion;
    type Config = Config;

    const OBJECT: &'static str = "Gateway API HTTPRoute";
    const PROVIDERS: &'static [(&'static str, GatewayVersion)] = &[
        ("gatewayapi:v1", GatewayVersion::V1),
        ("gatewayapi:v1beta1", GatewayVersion::V1beta1),
    ];
    const ALIASES: &'static [(&'static str, GatewayVersion)] = &[];
    const NATIVE_KIND: &'static str = "HTTPRoute";
    const NATIVE_FIELDS: &'static [&'static str] = &["parentRefs", "hostnames"];
    /// Flagger's factory: `gatewayapi:v1beta1…` is the v1beta1 router, any other
    /// `gatewayapi:v1…` (`gatewayapi:v1alpha2` from Flagger's older docs) the v1 router. A bare
    /// `gatewayapi` matches neither: Flagger routes it with Istio.
    const FLAGGER_PREFIXES: &'static [FlaggerPrefix] = &[
        FlaggerPrefix {
            prefix: "gatewayapi:v1beta1",
            runs_as: "gatewayapi:v1beta1",
            writes: "gateway.networking.k8s.io/v1beta1 HTTPRoutes",
        },
        FlaggerPrefix {
            prefix: "gatewayapi:v1",
            runs_as: "gatewayapi:v1",
            writes: "gateway.networking.k8s.io/v1 HTTPRoutes",
        },
    ];

    /// Flagger accepts a bare `gatewayapi`; sluice asks which version, since v1beta1 routes
    /// carry fewer fields.
    fn near_miss(text: &str) -> Option<String> {
        (text == "gatewayapi").then(|| {
            "expected a Gateway API version (gatewayapi:v1 or gatewayapi:v1beta1), found a bare \"gatewayapi\"".to_string()
        })
    }

    fn read_flagger(
        r: &mut Reader,
        version: GatewayVersion,
        input: &FlaggerInput,
    ) -> Option<Config> {
        let route = input.service.and_then(|svc| {
            let parent_refs = match svc.get("gatewayRefs") {
                Some(n) => read_parent_refs(r, n, "spec.service.gatewayRefs"),
                None => {
                    r.error(svc.line, "spec.service.gatewayRefs", "required for a Gateway API provider: the Gateway(s) the HTTPRoute attaches to");
                    None
                }
            };
            let hostnames = svc
                .get("hosts")
                .map(|n| read_hostnames(r, n, "spec.service.hosts"))
                .unwrap_or_default();
            let rules = flagger::read_rule_spec(r, svc, version);
            let (session_affinity, analysis_mirror) = rollout::read(r, input)?;
            Some(Config {
                version,
                parent_refs: parent_refs?,
                hostnames,
                rules: Box::new(rules?),
                session_affinity,
                analysis_mirror,
                source: None,
            })
        });
        reject_unsupported(r, input);
        route
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        let route = native.route;
        let p = "spec.route";
        let version = match native.api_version {
            "gateway.networking.k8s.io/v1" => GatewayVersion::V1,
            "gateway.networking.k8s.io/v1beta1" => GatewayVersion::V1beta1,
            other => {
                r.error(native.api_line, "spec.route.apiVersion", format!("expected gateway.networking.k8s.io/v1 or gateway.networking.k8s.io/v1beta1 for HTTPRoute, found {other:?}"));
                return None;
            }
        };
        let parent_refs = r
            .required(route, p, "parentRefs")
            .and_then(|n| read_parent_refs(r, n, "spec.route.parentRefs"))?;
        if parent_refs.is_empty() {
            r.error(
                route.line,
                "spec.route.parentRefs",
                "expected at least one parentRef (the Gateway), found none",
            );
            return None;
        }
        let hostnames = route
            .get("hostnames")
            .map(|n| read_hostnames(r, n, "spec.route.hostnames"))
            .unwrap_or_default();
        Some(Config {
            version,
            parent_refs,
            hostnames,
            rules: Box::default(),
            session_affinity: None,
            analysis_mirror: None,
            source: None,
        })
    }

    /// Converted now, as the renderer will use them, so a bad one is reported with its line
    /// by `sluice validate` instead of failing the first tick. For Flagger input, also checks
    /// what Flagger's merge with `service.match` would build.
    fn read_ab_matches(config: &mut Config, r: &mut Reader, input: &AbInput) {
        config.rules.ab_matches =
            flagger::check_ab_matches(r, &config.rules, input.service, input.matches);
    }

    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        match &config.source {
            Some(source) => source::render(source, input).map(Some),
            None => render::render(config, input).map(Some),
        }
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "gatewayapi",
        table_order: 1,
        spec_rows: &[
            ("spec.service.timeout", FieldUse::Renders),
            ("spec.service.backendTimeout", FieldUse::Renders),
            ("spec.service.hosts", FieldUse::Renders),
            ("spec.service.match", FieldUse::Renders),
            ("spec.service.retries", FieldUse::Refuses),
            ("spec.service.rewrite", FieldUse::Renders),
            ("spec.service.mirror", FieldUse::Renders),
            ("spec.service.headers", FieldUse::Renders),
            ("spec.service.gatewayRefs", FieldUse::Renders),
            ("spec.service.corsPolicy", FieldUse::Renders),
        ],
        analysis_rows: ANALYSIS_RENDERED,
    };

    const OWN_TARGET: Option<OwnTarget> = None;

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        provider
            .starts_with("gatewayapi")
            .then_some(BuiltinMetrics::Queries(APP_HISTOGRAM_METRICS))
    }

    fn revisions(_config: &Config) -> Revisions<'_> {
        Revisions::Workloads
    }

    /// The HTTPRoute, named after the apex Service, or the user's own route (HTTPRoute,
    /// GRPCRoute, TCPRoute or TLSRoute, `spec.routeSource`) under its own name: every parent
    /// Gateway must accept it.
    fn readiness<'a>(config: &'a Config, canary: &'a Canary) -> Option<ReadyObject<'a>> {
        let (api_version, kind, plural, name) = match &config.source {
            Some(s) => (
                s.shape.api_version,
                s.shape.kind,
                s.shape.plural,
                s.name.as_str(),
            ),
            None => (
                config.version.api_version(),
                "HTTPRoute",
                "httproutes",
                canary.service.name.as_str(),
            ),
        };
        Some(ReadyObject {
            group: "gateway.networking.k8s.io",
            version: api_version.rsplit('/').next().unwrap_or("v1"),
            kind,
            plural,
            what: kind,
            name,
            condition: ReadyCondition::ParentsAccepted,
        })
    }
}

/// The route of a canary whose route is the user's own (`spec.routeSource`), read by
/// [`source::read`]: the source is the whole route, written at its own kind and API version
/// (`Config::version` is the HTTPRoute's, and v1 for the other kinds, which do not use it).
pub fn read_source(
    r: &mut Reader,
    object: &crate::yaml::snapshot::Object,
    apex: &Apex,
) -> Option<Config> {
    let source = source::read(r, object, apex)?;
    let version = [GatewayVersion::V1, GatewayVersion::V1beta1]
        .into_iter()
        .find(|v| v.api_version() == source.shape.api_version)
        .unwrap_or(GatewayVersion::V1);
    Some(Config {
        version,
        parent_refs: Vec::new(),
        hostnames: Vec::new(),
        rules: Box::default(),
        session_affinity: None,
        analysis_mirror: None,
        source: Some(Box::new(source)),
    })
}

/// Flagger's Gateway API routers ignore retries, and the standard HTTPRoute has no retry
/// field: rejected, so nobody believes retries are configured. (service.mirror is static and
/// rendered: `flagger.rs` reads it; analysis.mirror and sessionAffinity: `rollout.rs`.)
fn reject_unsupported(r: &mut Reader, input: &FlaggerInput) {
    if let Some(n) = input.service.and_then(|n| n.get("retries")) {
        r.error(n.line, "spec.service.retries", "not supported for Gateway API routes: Flagger's Gateway API router ignores it and the standard HTTPRoute has no retry field; remove it");
    }
}

/// `gatewayRefs` / `parentRefs`: the Gateways the route attaches to (their CRD rules are
/// checked when rendering).
fn read_parent_refs(r: &mut Reader, node: &Node, path: &str) -> Option<Vec<ParentRef>> {
    let items = r.seq(node, path)?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = index(path, i);
        if r.map(
            item,
            &p,
            &["group", "kind", "name", "namespace", "sectionName", "port"],
        )
        .is_none()
        {
            continue;
        }
        let name = r
            .required(item, &p, "name")
            .and_then(|n| name_at(r, n, &join(&p, "name")));
        let namespace = item
            .get("namespace")
            .and_then(|n| name_at(r, n, &join(&p, "namespace")));
        let opt =
            |r: &mut Reader, key: &str| item.get(key).and_then(|n| r.string(n, &join(&p, key)));
        let group = opt(r, "group");
        let kind = opt(r, "kind");
        let section_name = opt(r, "sectionName");
        let port = item.get("port").and_then(|n| {
            r.int(n, &join(&p, "port"), 1, 65535)
                .and_then(|v| u16::try_from(v).ok())
        });
        if let Some(name) = name {
            out.push(ParentRef {
                group,
                kind,
                name: name.to_string(),
                namespace: namespace.map(|n| n.to_string()),
                section_name,
                port,
            });
        }
    }
    Some(out)
}

/// `hosts` / `hostnames` (their pattern is checked when rendering).
fn read_hostnames(r: &mut Reader, node: &Node, path: &str) -> Vec<String> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, n) in items.iter().enumerate() {
        let at = index(path, i);
        let Some(text) = r.string(n, &at) else {
            continue;
        };
        match gateway_hostname(&text) {
            Ok(()) => out.push(text),
            Err(e) => r.error(n.line, &at, e),
        }
    }
    out
}

/// Gateway API's `Hostname`, as the renderer checks it: a lower-case DNS name, optionally
/// after `*.`. Checked when the spec is read too, so `sluice validate` reports one the API
/// server would refuse (a line break in a hostname, for one) instead of every tick failing.
fn gateway_hostname(text: &str) -> Result<(), String> {
    let bare = text.strip_prefix("*.").unwrap_or(text);
    if text.len() <= 253 && render::is_dns_subdomain(bare) {
        Ok(())
    } else {
        Err(format!(
            "expected a lowercase DNS name, optionally starting with \"*.\", found {text:?}"
        ))
    }
}
