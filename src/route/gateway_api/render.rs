//! Renders a validated [`Config`] into an HTTPRoute.
//!
//! Layout follows what Flagger's Gateway API router creates, so a Flagger user sees the same
//! object: every rule matches `PathPrefix /` unless told otherwise, `backendRefs` list the
//! primary then the canary Service, each with `group: ""`, `kind: Service`, the service port
//! (the CRD's CEL rules require a port for Services) and a weight.
//!
//! Flagger's `spec.service` route fields (`match`, `headers`, `rewrite`, `mirror`,
//! `corsPolicy`, `timeout`, `backendTimeout`), read and checked by `flagger.rs` into a
//! [`RuleSpec`], go on every rule, as Flagger's router puts them: the service matches replace
//! `PathPrefix /`, the filters (request headers, response headers, URL rewrite, one
//! `RequestMirror` per `mirror` entry, CORS, in that order) and the timeouts follow. A mirror's
//! `backendRef` is written with its group and kind (`""` and `Service` unless given), as
//! Flagger copies them from its Canary, where the API server has filled in those defaults.
//! Native canaries have none of them.
//!
//! A/B (`analysis.match`): the first rule carries the converted matches and both backends with
//! the given weights (Flagger sets canary 100 during the analysis); the second rule sends every
//! other request (of the service matches, if any) to the primary. Gateway API gives the rule
//! with more header/query/method conditions precedence, and the first rule wins ties. With
//! service matches, the first rule holds each service match once per A/B match, taking the A/B
//! match's headers and queryParams, as Flagger's `mergeMatchConditions` does; the spec loader
//! rejects the combinations where that merge would drop a condition.
//!
//! Session affinity (rollout state from the status): while the canary takes traffic, a
//! sticky rule sends requests carrying the rollout's cookie to the canary, then (with
//! `primaryCookieName`) one sends those carrying the primary's cookie to the primary, then the
//! weighted rule, whose canary backend sets the canary's cookie and primary backend the
//! primary's (`Max-Age` one analysis interval), as Flagger 1.44's router writes them. Once the
//! canary takes none, a rule expires the last rollout's cookie.
//!
//! Flagger's matches are Istio `HTTPMatchRequest`s; `flagger.rs` converts them (and says
//! how). Anything it cannot convert is an error, never dropped: a dropped condition would send
//! more traffic to the canary than asked.
//!
//! The CRD's JSON schema does not check its CEL rules. `flagger.rs` checks the ones the
//! service fields could break; this file checks the parentRef and hostname ones, and the
//! A/B match count.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as Json;

use crate::core::model::{Format, Strategy};
use crate::route::gateway_api::config::{
    Config, Cors, HeaderModifier, HttpMatch, ParentRef, PathRewrite, RequestMirror, RuleSpec,
    Timeouts, ValueMatch,
};
use crate::route::Canary;
use crate::route::ObjectHead;
use crate::route::RenderInput;
use crate::route::{render_checked, Backends, RouteError, RouteState, Weights};

const TEMPLATE_NAME: &str = "httproute.yaml.j2";
const TEMPLATE: &str = include_str!("../../../templates/httproute.yaml.j2");

/// HTTPRoute limits from the CRD (`maxItems`, `maxLength`).
const MAX_PARENT_REFS: usize = 32;
const MAX_HOSTNAMES: usize = 16;

#[derive(Serialize)]
struct Context<'a> {
    #[serde(flatten)]
    head: ObjectHead<'a>,
    managed_by: &'static str,
    parent_refs: &'a [ParentRef],
    hostnames: &'a [String],
    rules: Vec<Rule<'a>>,
    /// On every rule.
    filters: Filters<'a>,
    /// On every rule; `None` when no timeout is set.
    timeouts: Option<&'a Timeouts>,
}

#[derive(Serialize)]
struct Filters<'a> {
    /// How many filters each rule has (0: no `filters` key).
    count: usize,
    headers: Vec<HeaderFilter<'a>>,
    rewrite: Option<Rewrite<'a>>,
    mirrors: &'a [RequestMirror],
    cors: Option<&'a Cors>,
}

/// A `RequestHeaderModifier` or `ResponseHeaderModifier` filter.
#[derive(Serialize)]
struct HeaderFilter<'a> {
    kind: &'static str,
    changes: &'a HeaderModifier,
}

#[derive(Serialize)]
struct Rewrite<'a> {
    hostname: Option<&'a str>,
    path: Option<PathModifier<'a>>,
}

#[derive(Serialize)]
struct PathModifier<'a> {
    kind: &'static str,
    value: &'a str,
}

impl<'a> Filters<'a> {
    fn of(rules: &'a RuleSpec) -> Filters<'a> {
        let mut headers = Vec::new();
        if let Some(changes) = &rules.request_headers {
            headers.push(HeaderFilter {
                kind: "RequestHeaderModifier",
                changes,
            });
        }
        if let Some(changes) = &rules.response_headers {
            headers.push(HeaderFilter {
                kind: "ResponseHeaderModifier",
                changes,
            });
        }
        let rewrite = rules.rewrite.as_ref().map(|r| Rewrite {
            hostname: r.hostname.as_deref(),
            path: r.path.as_ref().map(|p| match p {
                PathRewrite::ReplaceFullPath(value) => PathModifier {
                    kind: "ReplaceFullPath",
                    value,
                },
                PathRewrite::ReplacePrefixMatch(value) => PathModifier {
                    kind: "ReplacePrefixMatch",
                    value,
                },
            }),
        });
        let cors = rules.cors.as_ref();
        let mirrors = rules.mirrors.as_slice();
        Filters {
            count: headers.len()
                + usize::from(rewrite.is_some())
                + mirrors.len()
                + usize::from(cors.is_some()),
            headers,
            rewrite,
            mirrors,
            cors,
        }
    }
}

#[derive(Serialize)]
struct Rule<'a> {
    matches: Vec<HttpMatch>,
    backend_refs: Vec<BackendRef<'a>>,
    /// Filters after the service's: the analysis mirror, then a `Set-Cookie` that expires
    /// the previous rollout's cookie.
    mirror: Option<StateMirror<'a>>,
    set_cookie: Option<String>,
    /// How many filters the rule has in all.
    filter_count: usize,
}

/// The blue/green analysis' `RequestMirror` to the canary Service.
#[derive(Serialize, Clone, Copy)]
struct StateMirror<'a> {
    name: &'a str,
    port: u16,
    percent: Option<u8>,
}

#[derive(Serialize)]
struct BackendRef<'a> {
    name: &'a str,
    port: u16,
    weight: u8,
    /// A `ResponseHeaderModifier` filter adding this `Set-Cookie` value (the session cookie
    /// on the canary backend of the weighted rule).
    set_cookie: Option<String>,
}

impl<'a> Rule<'a> {
    fn new(
        matches: Vec<HttpMatch>,
        backend_refs: Vec<BackendRef<'a>>,
        service_filters: usize,
        mirror: Option<StateMirror<'a>>,
    ) -> Rule<'a> {
        Rule {
            matches,
            backend_refs,
            mirror,
            set_cookie: None,
            filter_count: service_filters + usize::from(mirror.is_some()),
        }
    }

    /// Backend `i` adds `Set-Cookie: value` to its responses.
    fn setting_cookie(mut self, i: usize, value: String) -> Rule<'a> {
        if let Some(b) = self.backend_refs.get_mut(i) {
            b.set_cookie = Some(value);
        }
        self
    }

    fn expiring(mut self, cookie: &str) -> Rule<'a> {
        self.set_cookie = Some(format!("{cookie}; Max-Age=-1"));
        self.filter_count += 1;
        self
    }
}

/// The match of requests carrying `cookie` (`name=value`), as Flagger writes it.
fn cookie_match(cookie: &str) -> HttpMatch {
    let (name, value) = cookie.split_once('=').unwrap_or((cookie, ""));
    HttpMatch {
        headers: vec![ValueMatch {
            name: "Cookie".into(),
            kind: "RegularExpression",
            value: format!(".*{name}.*{value}.*"),
        }],
        ..HttpMatch::all_requests()
    }
}

/// Blue/green with `analysis.mirror`: the canary mirror, while the rollout's state says so.
fn state_mirror<'a>(
    route: &Config,
    state: &RouteState,
    backends: &Backends<'a>,
    port: u16,
) -> Option<StateMirror<'a>> {
    route
        .analysis_mirror
        .filter(|_| state.mirroring)
        .map(|m| StateMirror {
            name: backends.canary,
            port,
            percent: m.percent,
        })
}

pub(super) fn render(route: &Config, input: &RenderInput) -> Result<String, RouteError> {
    let (canary, backends, weights) = (input.canary, input.backends, input.weights);
    let state = input.state;
    check_parent_refs(canary, &route.parent_refs)?;
    check_hostnames(canary, &route.hostnames)?;
    let port = canary.service.port;
    let filters = Filters::of(&route.rules);
    let service_matches = if route.rules.matches.is_empty() {
        vec![HttpMatch::all_requests()]
    } else {
        route.rules.matches.clone()
    };
    let mirror = state_mirror(route, state, backends, port);
    let backend = |name, weight| BackendRef {
        name,
        port,
        weight,
        set_cookie: None,
    };
    let split = |primary, canary| {
        vec![
            backend(backends.primary, primary),
            backend(backends.canary, canary),
        ]
    };
    let weighted = |matches| {
        Rule::new(
            matches,
            split(weights.primary, weights.canary),
            filters.count,
            mirror,
        )
    };
    // The session cookie, made by the core while the canary takes traffic: Flagger's
    // sticky rule sends requests carrying it to the canary, and the weighted rule's canary
    // backend sets it. Once the canary takes none, a rule expires the last rollout's cookie.
    let sticky = |cookie: &str, backend_refs| {
        Rule::new(
            merge_matches(&[cookie_match(cookie)], &route.rules.matches),
            backend_refs,
            filters.count,
            mirror,
        )
    };
    let session = route.session_affinity.as_ref().and_then(|attributes| {
        if let Some(cookie) = state.session_cookie {
            let mut rule =
                weighted(service_matches.clone()).setting_cookie(1, attributes.set_cookie(cookie));
            let mut rules = vec![sticky(cookie, split(0, 100))];
            // `primaryCookieName`: the primary's sticky rule, and its cookie (one interval).
            if let Some(primary) = state.primary_session_cookie {
                let interval = canary.analysis.interval;
                rule = rule.setting_cookie(0, attributes.set_primary_cookie(primary, interval));
                rules.push(sticky(primary, split(100, 0)));
            }
            let at = rules.len();
            rules.push(rule);
            Some((rules, at))
        } else {
            state.previous_session_cookie.map(|cookie| {
                let expiring = sticky(cookie, split(weights.primary, weights.canary));
                (
                    vec![expiring.expiring(cookie), weighted(service_matches.clone())],
                    1,
                )
            })
        }
    });
    // With session rules first, the weighted rule comes after them.
    let (rules, weighted_rule) = match &canary.analysis.strategy {
        Strategy::Canary { .. } | Strategy::BlueGreen { .. } => match session {
            Some(found) => found,
            None => (vec![weighted(service_matches)], 0),
        },
        // `spec` converted and checked the matches at load time; an A/B canary has at least one.
        Strategy::AB { .. } if route.rules.ab_matches.is_empty() => {
            return Err(field_error(
                canary,
                "spec.analysis.match".into(),
                "expected at least one match for an A/B canary, found none".into(),
            ))
        }
        Strategy::AB { .. } => (
            vec![
                weighted(merge_matches(&route.rules.ab_matches, &route.rules.matches)),
                Rule::new(
                    service_matches,
                    vec![backend(backends.primary, 100)],
                    filters.count,
                    None,
                ),
            ],
            0,
        ),
    };
    let context = Context {
        head: ObjectHead::of(canary, route.version.api_version()),
        managed_by: crate::route::MANAGED_BY,
        parent_refs: &route.parent_refs,
        hostnames: &route.hostnames,
        rules,
        filters,
        timeouts: Some(&route.rules.timeouts).filter(|t| **t != Timeouts::default()),
    };
    render_checked(canary, TEMPLATE_NAME, TEMPLATE, &context, |parsed| {
        verify(parsed, &context, weights, weighted_rule)
    })
}

/// Reads the rendered object back: right kind and name, every rule has the filters asked for,
/// and every rule's weights are whole numbers that sum to 100, the weighted rule's being
/// exactly the ones asked for.
fn verify(
    doc: &Json,
    context: &Context,
    weights: Weights,
    weighted_rule: usize,
) -> Result<(), String> {
    let text = |pointer: &str| doc.pointer(pointer).and_then(Json::as_str);
    if text("/apiVersion") != Some(context.head.api_version) || text("/kind") != Some("HTTPRoute") {
        return Err(format!(
            "expected apiVersion {} kind HTTPRoute, found {:?} {:?}",
            context.head.api_version,
            text("/apiVersion"),
            text("/kind")
        ));
    }
    if text("/metadata/name") != Some(context.head.name)
        || text("/metadata/namespace") != Some(context.head.namespace)
    {
        return Err(format!(
            "expected metadata {}/{}, found {:?}/{:?}",
            context.head.namespace,
            context.head.name,
            text("/metadata/namespace"),
            text("/metadata/name")
        ));
    }
    let rules = doc
        .pointer("/spec/rules")
        .and_then(Json::as_array)
        .ok_or("expected spec.rules to be a list")?;
    if rules.len() != context.rules.len() {
        return Err(format!(
            "expected {} rules, found {}",
            context.rules.len(),
            rules.len()
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        let filters = rule
            .get("filters")
            .map_or(Some(0), |f| f.as_array().map(Vec::len));
        let expected = context.rules[i].filter_count;
        if filters != Some(expected) {
            return Err(format!(
                "expected {expected} filters in spec.rules[{i}], found {filters:?}"
            ));
        }
        let refs = rule
            .get("backendRefs")
            .and_then(Json::as_array)
            .ok_or_else(|| format!("expected spec.rules[{i}].backendRefs to be a list"))?;
        let found: Vec<u64> = refs
            .iter()
            .map(|r| r.get("weight").and_then(Json::as_u64))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                format!("expected whole-number weights in spec.rules[{i}].backendRefs")
            })?;
        if found.iter().sum::<u64>() != 100 {
            return Err(format!(
                "expected spec.rules[{i}] weights to sum to 100, found {found:?}"
            ));
        }
        if i == weighted_rule && found != [u64::from(weights.primary), u64::from(weights.canary)] {
            return Err(format!(
                "expected weights [{}, {}] in spec.rules[{i}], found {found:?}",
                weights.primary, weights.canary
            ));
        }
    }
    Ok(())
}

/// Where the canary's Gateway API fields came from, for error messages.
fn route_field(canary: &Canary, native: &str, flagger: &str) -> String {
    match canary.format {
        Format::Native => format!("spec.route.{native}"),
        Format::Flagger => format!("spec.service.{flagger}"),
    }
}

fn field_error(canary: &Canary, field: String, message: String) -> RouteError {
    RouteError::Field {
        file: canary.file.clone(),
        line: canary.line,
        canary: canary.id.to_string(),
        field,
        message,
    }
}

fn is_dns_label(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

pub(super) fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

fn is_kind(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

/// One parent: group, kind, namespace, name.
type Parent<'a> = (&'a str, &'a str, &'a str, &'a str);

/// The CRD's patterns for parentRefs, and its CEL rule that several refs to one parent each
/// name a distinct `sectionName`.
fn check_parent_refs(canary: &Canary, refs: &[ParentRef]) -> Result<(), RouteError> {
    let base = route_field(canary, "parentRefs", "gatewayRefs");
    if refs.is_empty() || refs.len() > MAX_PARENT_REFS {
        return Err(field_error(
            canary,
            base,
            format!(
                "expected 1 to {MAX_PARENT_REFS} entries (the Gateways the route attaches to), found {}",
                refs.len()
            ),
        ));
    }
    // (group, kind, namespace, name) with the CRD's defaults -> (index, sectionName).
    let mut parents: BTreeMap<Parent, Vec<(usize, &str)>> = BTreeMap::new();
    for (i, r) in refs.iter().enumerate() {
        let at = |key: &str| format!("{base}[{i}].{key}");
        if let Some(group) = &r.group {
            if !(group.is_empty() || is_dns_subdomain(group)) {
                return Err(field_error(
                    canary,
                    at("group"),
                    format!("expected an API group (empty or a DNS subdomain), found {group:?}"),
                ));
            }
        }
        if let Some(kind) = &r.kind {
            if !is_kind(kind) {
                return Err(field_error(canary, at("kind"), format!("expected a kind (letters, digits and '-', starting with a letter), found {kind:?}")));
            }
        }
        if let Some(namespace) = &r.namespace {
            if !is_dns_label(namespace) {
                return Err(field_error(
                    canary,
                    at("namespace"),
                    format!("expected a namespace (DNS-1123 label), found {namespace:?}"),
                ));
            }
        }
        if let Some(section) = &r.section_name {
            if !is_dns_subdomain(section) {
                return Err(field_error(
                    canary,
                    at("sectionName"),
                    format!("expected a section name (DNS-1123 subdomain), found {section:?}"),
                ));
            }
        }
        if r.port == Some(0) {
            return Err(field_error(
                canary,
                at("port"),
                "expected a port in 1..=65535, found 0".into(),
            ));
        }
        let parent = (
            r.group.as_deref().unwrap_or("gateway.networking.k8s.io"),
            r.kind.as_deref().unwrap_or("Gateway"),
            r.namespace.as_deref().unwrap_or(""),
            r.name.as_str(),
        );
        parents
            .entry(parent)
            .or_default()
            .push((i, r.section_name.as_deref().unwrap_or("")));
    }
    for ((_, kind, _, name), uses) in parents {
        if uses.len() < 2 {
            continue;
        }
        let mut seen = BTreeMap::new();
        for (i, section) in uses {
            if section.is_empty() {
                return Err(field_error(canary, format!("{base}[{i}].sectionName"), format!("{kind} {name} is referenced more than once; each reference needs its own sectionName")));
            }
            if let Some(first) = seen.insert(section, i) {
                return Err(field_error(
                    canary,
                    format!("{base}[{i}].sectionName"),
                    format!(
                        "{kind} {name} section {section:?} is already referenced by entry {first}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_hostnames(canary: &Canary, hostnames: &[String]) -> Result<(), RouteError> {
    let base = route_field(canary, "hostnames", "hosts");
    if hostnames.len() > MAX_HOSTNAMES {
        return Err(field_error(
            canary,
            base,
            format!(
                "expected at most {MAX_HOSTNAMES} hostnames, found {}",
                hostnames.len()
            ),
        ));
    }
    for (i, host) in hostnames.iter().enumerate() {
        let bare = host.strip_prefix("*.").unwrap_or(host);
        if host.len() > 253 || !is_dns_subdomain(bare) {
            return Err(field_error(
                canary,
                format!("{base}[{i}]"),
                format!("expected a lowercase DNS name, optionally starting with \"*.\", found {host:?}"),
            ));
        }
    }
    Ok(())
}

/// The A/B rule's matches, as Flagger's `mergeMatchConditions` builds them: the A/B matches
/// alone without service matches; otherwise each service match once per A/B match, with the
/// A/B match's headers and queryParams (when it has any) in place of its own. The spec loader
/// rejects A/B matches whose uri, method, headers or queryParams this would drop.
fn merge_matches(ab: &[HttpMatch], service: &[HttpMatch]) -> Vec<HttpMatch> {
    if service.is_empty() {
        return ab.to_vec();
    }
    let mut merged = Vec::with_capacity(ab.len() * service.len());
    for a in ab {
        for s in service {
            let mut m = s.clone();
            if !a.headers.is_empty() {
                m.headers = a.headers.clone();
            }
            if !a.query_params.is_empty() {
                m.query_params = a.query_params.clone();
            }
            merged.push(m);
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::gateway_api::config::{PathMatch, ValueMatch};

    fn path(value: &str) -> HttpMatch {
        HttpMatch {
            path: PathMatch {
                kind: "PathPrefix",
                value: value.into(),
            },
            ..HttpMatch::all_requests()
        }
    }

    fn header(name: &str) -> Vec<ValueMatch> {
        vec![ValueMatch {
            name: name.into(),
            kind: "Exact",
            value: "1".into(),
        }]
    }

    #[test]
    fn ab_matches_merge_into_service_matches_as_flagger_merges_them() {
        let ab = [
            HttpMatch {
                headers: header("x-a"),
                ..HttpMatch::all_requests()
            },
            HttpMatch {
                query_params: header("q"),
                ..HttpMatch::all_requests()
            },
        ];
        let service = [
            path("/api"),
            HttpMatch {
                method: Some("GET".into()),
                query_params: header("s"),
                ..path("/web")
            },
        ];
        // Each A/B match in turn, over every service match.
        let expected = [
            HttpMatch {
                headers: header("x-a"),
                ..path("/api")
            },
            HttpMatch {
                method: Some("GET".into()),
                headers: header("x-a"),
                query_params: header("s"),
                ..path("/web")
            },
            HttpMatch {
                query_params: header("q"),
                ..path("/api")
            },
            HttpMatch {
                method: Some("GET".into()),
                query_params: header("q"),
                ..path("/web")
            },
        ];
        assert_eq!(merge_matches(&ab, &service), expected);
        assert_eq!(merge_matches(&ab, &[]), ab);
    }
}
