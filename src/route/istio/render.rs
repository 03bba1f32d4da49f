//! Renders a validated [`Config`] into `route.yaml`: the VirtualService, then the primary's
//! and the canary's DestinationRule, three YAML documents, as Flagger's Istio router creates
//! them:
//!
//! - hosts: `service.hosts` plus the apex Service name unless it or `*` is listed; none for a
//!   delegate. gateways: `service.gateways`, else `mesh`; none for a delegate.
//! - Canary and blue/green: one HTTP route with the service's `match`, `rewrite`, `timeout`,
//!   `retries`, `corsPolicy` and `headers` and the primary then the canary destination with
//!   their weights.
//! - A/B: first a route whose matches are `analysis.match` merged into `service.match`
//!   (`mergeMatchConditions`) with both weighted destinations, then the service route to the
//!   primary alone. Flagger writes that lone destination with the primary's weight (0 during
//!   the analysis); Istio sends all of a route's traffic to a lone destination either way, and
//!   sluice writes 100 so the file reads as what it does.
//! - DestinationRules: `host` the backend Service, `trafficPolicy` the service's.
//!
//! Rollout state ([`RouteState`], from the status), as Flagger's `SetRoutes` writes it:
//!
//! - Session affinity, while the rollout has a cookie: first a route matching the `Cookie`
//!   header (`.*<name>.*<value>.*`, merged into each service match) sending everything to the
//!   canary, then the weighted route whose canary destination adds the `Set-Cookie` response
//!   header (with `Max-Age` and the other attributes). Once the canary takes no traffic, the
//!   first route matches the previous cookie with the weighted destinations and expires it
//!   (`Set-Cookie: <cookie>; Max-Age=-1` added to the route's response headers). Before the
//!   first cookie there is the weighted route alone (Flagger writes it twice then).
//! - With `primaryCookieName`, while the canary takes traffic: a second route, after the
//!   canary's cookie route, matching the primary's cookie and sending everything to the
//!   primary, and the weighted route's primary destination adds that cookie's `Set-Cookie`
//!   with `Max-Age` one analysis interval (Flagger 1.44's `getSessionAffinityRouteRules`).
//! - Blue/green mirroring: `mirror` to the canary Service (no port, as Flagger writes it) and
//!   `mirrorPercentage` from `mirrorWeight`. Flagger puts it on the first route only, which
//!   with a previous cookie is the expiring route and mirrors almost nothing; sluice puts it
//!   on every route so the analysis sees the traffic asked for. Next to static
//!   `service.mirror` entries (`mirrors`, which Istio does not combine with `mirror`) the
//!   canary becomes one more `mirrors` entry with its `percentage`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as Json;

use crate::core::model::Strategy;
use crate::route::gateway_api::AnalysisMirror;
use crate::route::istio::api::{
    CorsPolicy, HeaderOperations, Headers, HttpMatchRequest, HttpRetry, IstioDuration, StringMatch,
    TrafficPolicy,
};
use crate::route::istio::{Config, HttpFields, Mirror, Rewrite};
use crate::route::Canary;
use crate::route::ObjectHead;
use crate::route::RenderInput;
use crate::route::{render_checked_all, Backends, RouteError, Weights};

const TEMPLATE_NAME: &str = "istio.yaml.j2";
const TEMPLATE: &str = include_str!("../../../templates/istio.yaml.j2");

#[derive(Serialize)]
struct Context<'a> {
    #[serde(flatten)]
    head: ObjectHead<'a>,
    managed_by: &'static str,
    hosts: Vec<&'a str>,
    gateways: Vec<&'a str>,
    http: Vec<HttpRoute<'a>>,
    rules: [DestinationRule<'a>; 2],
}

#[derive(Serialize)]
struct HttpRoute<'a> {
    /// Empty: no `match` key (every request).
    matches: Vec<HttpMatchRequest>,
    destinations: Vec<Destination<'a>>,
    rewrite: Option<&'a Rewrite>,
    timeout: Option<&'a IstioDuration>,
    retries: Option<&'a HttpRetry>,
    mirrors: Vec<MirrorPolicy<'a>>,
    /// The analysis mirror (`mirror` and `mirrorPercentage`), when there are no `mirrors`.
    mirror: Option<MirrorDestination<'a>>,
    mirror_percentage: Option<Percent>,
    cors: Option<&'a CorsPolicy>,
    headers: Option<Headers>,
}

#[derive(Serialize)]
struct Destination<'a> {
    host: &'a str,
    port: Option<u16>,
    weight: u8,
    /// The canary's `Set-Cookie` while the rollout has a session cookie.
    headers: Option<Headers>,
}

#[derive(Serialize)]
struct MirrorPolicy<'a> {
    destination: MirrorDestination<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    percentage: Option<Percent>,
}

#[derive(Serialize, Clone, Copy)]
struct MirrorDestination<'a> {
    host: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    port: Option<PortSelector>,
}

/// Istio `Percent`.
#[derive(Serialize, Clone, Copy)]
struct Percent {
    value: u8,
}

#[derive(Serialize, Clone, Copy)]
struct PortSelector {
    number: u16,
}

#[derive(Serialize)]
struct DestinationRule<'a> {
    name: &'a str,
    host: &'a str,
    traffic_policy: Option<&'a TrafficPolicy>,
}

/// The blue/green analysis mirror to the canary Service, while the rollout mirrors.
#[derive(Clone, Copy)]
struct StateMirror<'a> {
    host: &'a str,
    mirror: AnalysisMirror,
}

impl<'a> StateMirror<'a> {
    fn to(host: &'a str, mirror: AnalysisMirror) -> StateMirror<'a> {
        StateMirror { host, mirror }
    }
}

impl<'a> HttpRoute<'a> {
    fn new(
        fields: &'a HttpFields,
        matches: Vec<HttpMatchRequest>,
        destinations: Vec<Destination<'a>>,
        state_mirror: Option<StateMirror<'a>>,
    ) -> HttpRoute<'a> {
        let mut mirrors: Vec<MirrorPolicy> = fields.mirrors.iter().map(mirror).collect();
        let (mut single, mut single_percentage) = (None, None);
        if let Some(m) = state_mirror {
            let destination = MirrorDestination {
                host: m.host,
                port: None,
            };
            let percentage = m.mirror.percent.map(|value| Percent { value });
            if mirrors.is_empty() {
                single = Some(destination);
                single_percentage = percentage;
            } else {
                mirrors.push(MirrorPolicy {
                    destination,
                    percentage,
                });
            }
        }
        HttpRoute {
            matches,
            destinations,
            rewrite: fields.rewrite.as_ref(),
            timeout: fields.timeout.as_ref(),
            retries: fields.retries.as_ref(),
            mirrors,
            mirror: single,
            mirror_percentage: single_percentage,
            cors: fields.cors.as_ref(),
            headers: fields.headers.clone(),
        }
    }

    /// Adds `Set-Cookie: value` to the route's response headers (kept with the service's).
    fn adding_set_cookie(mut self, value: String) -> HttpRoute<'a> {
        let headers = self.headers.get_or_insert_with(Headers::default);
        headers
            .response
            .get_or_insert_with(HeaderOperations::default)
            .add
            .insert(SET_COOKIE.into(), value);
        self
    }
}

const SET_COOKIE: &str = "Set-Cookie";

/// Response headers adding `Set-Cookie: value`.
fn set_cookie(value: String) -> Headers {
    Headers {
        request: None,
        response: Some(HeaderOperations {
            add: BTreeMap::from([(SET_COOKIE.to_string(), value)]),
            ..HeaderOperations::default()
        }),
    }
}

/// Makes destination `i` add `Set-Cookie: value` to its responses.
fn set_cookie_on(destinations: &mut [Destination], i: usize, value: String) {
    if let Some(d) = destinations.get_mut(i) {
        d.headers = Some(set_cookie(value));
    }
}

/// The match of requests carrying `cookie` (`name=value`), as Flagger writes it.
fn cookie_match(cookie: &str) -> HttpMatchRequest {
    let (name, value) = cookie.split_once('=').unwrap_or((cookie, ""));
    HttpMatchRequest {
        headers: Some(BTreeMap::from([(
            "Cookie".to_string(),
            StringMatch::Regex(format!(".*{name}.*{value}.*")),
        )])),
        ..HttpMatchRequest::default()
    }
}

fn mirror(m: &Mirror) -> MirrorPolicy<'_> {
    MirrorPolicy {
        destination: MirrorDestination {
            host: &m.host,
            port: Some(PortSelector { number: m.port }),
        },
        percentage: None,
    }
}

/// Flagger's `mergeMatchConditions`: each A/B match in place of the headers and sourceLabels
/// of a copy of every service match; the A/B matches alone when there are no service matches.
fn merge_matches(ab: &[HttpMatchRequest], own: &[HttpMatchRequest]) -> Vec<HttpMatchRequest> {
    if own.is_empty() {
        return ab.to_vec();
    }
    let mut merged = Vec::with_capacity(ab.len() * own.len());
    for a in ab {
        for d in own {
            let mut m = d.clone();
            if a.headers.is_some() {
                m.headers.clone_from(&a.headers);
            }
            if a.source_labels.is_some() {
                m.source_labels.clone_from(&a.source_labels);
            }
            merged.push(m);
        }
    }
    merged
}

/// The VirtualService's hosts (the apex Service's name added unless `*` covers it) and
/// gateways (`mesh` by default); none for a delegate.
fn hosts_and_gateways<'a>(config: &'a Config, apex: &'a str) -> (Vec<&'a str>, Vec<&'a str>) {
    if config.delegation {
        return (Vec::new(), Vec::new());
    }
    let mut hosts: Vec<&str> = config.hosts.iter().map(String::as_str).collect();
    if !hosts.iter().any(|h| *h == apex || *h == "*") {
        hosts.push(apex);
    }
    let mut gateways: Vec<&str> = config.gateways.iter().map(String::as_str).collect();
    if gateways.is_empty() {
        gateways.push("mesh");
    }
    (hosts, gateways)
}

/// Flagger's makeDestination: the port only behind a gateway (or as a delegate) with port
/// discovery, where the Service may expose several ports.
fn destination_port(config: &Config, canary: &Canary) -> Option<u16> {
    let behind_gateway = config.gateways.first().is_some_and(|g| g != "mesh");
    (config.port_discovery && (behind_gateway || config.delegation)).then_some(canary.service.port)
}

pub(super) fn render(config: &Config, input: &RenderInput) -> Result<String, RouteError> {
    let (canary, backends, weights) = (input.canary, input.backends, input.weights);
    let state = input.state;
    let apex = canary.service.name.as_str();
    let (hosts, gateways) = hosts_and_gateways(config, apex);
    let port = destination_port(config, canary);
    let destination = |host, weight| Destination {
        host,
        port,
        weight,
        headers: None,
    };
    let split = |primary, canary| {
        vec![
            destination(backends.primary, primary),
            destination(backends.canary, canary),
        ]
    };
    let weighted = || split(weights.primary, weights.canary);
    let fields = &config.http;
    // Blue/green with `analysis.mirror`, while the rollout's state says so.
    let state_mirror = config
        .analysis_mirror
        .filter(|_| state.mirroring)
        .map(|mirror| StateMirror::to(backends.canary, mirror));
    let route = |matches, destinations| HttpRoute::new(fields, matches, destinations, state_mirror);
    let sticky = |cookie: &str| merge_matches(&[cookie_match(cookie)], &fields.matches);
    // Where the weighted route is: after the cookie route, if there is one.
    let mut weighted_index = 0;
    let http = match &canary.analysis.strategy {
        Strategy::Canary { .. } | Strategy::BlueGreen { .. } => {
            match (
                &config.session_affinity,
                state.session_cookie,
                state.previous_session_cookie,
            ) {
                (Some(attributes), Some(cookie), _) => {
                    let mut destinations = weighted();
                    set_cookie_on(&mut destinations, 1, attributes.set_cookie(cookie));
                    let mut http = vec![route(sticky(cookie), split(0, 100))];
                    if let Some(primary) = state.primary_session_cookie {
                        let interval = canary.analysis.interval;
                        let value = attributes.set_primary_cookie(primary, interval);
                        set_cookie_on(&mut destinations, 0, value);
                        http.push(route(sticky(primary), split(100, 0)));
                    }
                    weighted_index = http.len();
                    http.push(route(fields.matches.clone(), destinations));
                    http
                }
                (Some(_), None, Some(previous)) => {
                    weighted_index = 1;
                    vec![
                        route(sticky(previous), weighted())
                            .adding_set_cookie(format!("{previous}; Max-Age=-1")),
                        route(fields.matches.clone(), weighted()),
                    ]
                }
                (Some(_), None, None) | (None, _, _) => {
                    vec![route(fields.matches.clone(), weighted())]
                }
            }
        }
        // `spec` read the matches at load time; an A/B canary has at least one.
        Strategy::AB { .. } if config.ab_matches.is_empty() => {
            return Err(RouteError::no_ab_match(
                canary,
                "expected at least one match for an A/B canary, found none",
            ));
        }
        // `rollout.rs` refused sessionAffinity and mirror on A/B canaries.
        Strategy::AB { .. } => vec![
            HttpRoute::new(
                fields,
                merge_matches(&config.ab_matches, &fields.matches),
                weighted(),
                None,
            ),
            HttpRoute::new(
                fields,
                fields.matches.clone(),
                vec![destination(backends.primary, 100)],
                None,
            ),
        ],
    };
    let traffic_policy = config.traffic_policy.as_deref();
    let context = Context {
        head: ObjectHead::of(canary, config.version.api_version()),
        managed_by: crate::route::MANAGED_BY,
        hosts,
        gateways,
        http,
        rules: [backends.primary, backends.canary].map(|name| DestinationRule {
            name,
            host: name,
            traffic_policy,
        }),
    };
    render_checked_all(canary, TEMPLATE_NAME, TEMPLATE, &context, |docs| {
        verify(docs, &context, backends, weights, weighted_index)
    })
}

/// Reads the documents back: a VirtualService and two DestinationRules with the right
/// names and hosts, every HTTP route's weights summing to 100, the weighted route's (the
/// first, or the one after the cookie routes) being exactly the ones asked for.
fn verify(
    docs: &[Json],
    context: &Context,
    backends: &Backends,
    weights: Weights,
    weighted_index: usize,
) -> Result<(), String> {
    let [vs, primary, canary] = docs else {
        return Err(format!("expected 3 documents, found {}", docs.len()));
    };
    fn text<'j>(doc: &'j Json, pointer: &str) -> Option<&'j str> {
        doc.pointer(pointer).and_then(Json::as_str)
    }
    for (doc, kind, name) in [
        (vs, "VirtualService", context.head.name),
        (primary, "DestinationRule", backends.primary),
        (canary, "DestinationRule", backends.canary),
    ] {
        let found = (
            text(doc, "/apiVersion"),
            text(doc, "/kind"),
            text(doc, "/metadata/namespace"),
            text(doc, "/metadata/name"),
        );
        if found
            != (
                Some(context.head.api_version),
                Some(kind),
                Some(context.head.namespace),
                Some(name),
            )
        {
            return Err(format!(
                "expected {} {kind} {}/{name}, found {found:?}",
                context.head.api_version, context.head.namespace
            ));
        }
        if kind == "DestinationRule" && text(doc, "/spec/host") != Some(name) {
            return Err(format!("DestinationRule {name}: expected host {name}"));
        }
    }
    let routes = vs
        .pointer("/spec/http")
        .and_then(Json::as_array)
        .filter(|r| r.len() == context.http.len())
        .ok_or_else(|| format!("expected {} HTTP routes", context.http.len()))?;
    for (i, route) in routes.iter().enumerate() {
        let destinations = route
            .get("route")
            .and_then(Json::as_array)
            .ok_or_else(|| format!("http[{i}]: expected destinations"))?;
        let mut sum = 0u64;
        let mut found = Vec::new();
        for d in destinations {
            let weight = d
                .get("weight")
                .and_then(Json::as_u64)
                .ok_or_else(|| format!("http[{i}]: expected whole-number weights"))?;
            sum += weight;
            found.push((
                d.pointer("/destination/host").and_then(Json::as_str),
                weight,
            ));
        }
        if sum != 100 {
            return Err(format!("http[{i}]: weights sum to {sum}, not 100"));
        }
        if i == weighted_index {
            let expected = vec![
                (Some(backends.primary), u64::from(weights.primary)),
                (Some(backends.canary), u64::from(weights.canary)),
            ];
            if found != expected {
                return Err(format!(
                    "http[{i}]: expected destinations {expected:?}, found {found:?}"
                ));
            }
        }
    }
    Ok(())
}
