//! Gateway API HTTPRoute (`gateway.networking.k8s.io/v1` and `/v1beta1`, same schema).
//!
//! Layout follows what Flagger's Gateway API router creates, so a Flagger user sees the same
//! object: every rule matches `PathPrefix /` unless told otherwise, `backendRefs` list the
//! primary then the canary Service, each with `group: ""`, `kind: Service`, the service port
//! (the CRD's CEL rules require a port for Services) and a weight.
//!
//! A/B (`analysis.match`): the first rule carries the converted matches and both backends with
//! the given weights (Flagger sets canary 100 during the analysis); the second rule sends every
//! other request to the primary. Gateway API gives the rule with more header/query/method
//! conditions precedence, and the first rule wins ties.
//!
//! Flagger's matches are Istio `HTTPMatchRequest`s. Converted: `uri` (exact → Exact, prefix →
//! PathPrefix, regex → RegularExpression; note PathPrefix matches whole path segments where
//! Istio's prefix matches characters), `method` (exact), `headers` and `queryParams` (exact →
//! Exact, regex → RegularExpression, prefix → an anchored RegularExpression of the escaped
//! prefix, since Gateway API has no prefix match for them). Anything else is an error, never
//! dropped: a dropped condition would send more traffic to the canary than asked.
//!
//! The CRD's JSON schema does not check its CEL rules, and the spec loader does not know the
//! HTTPRoute patterns, so this file checks the ones the rendered object could break.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value as Json};

use crate::route::{header_comment, render_template, reparse, Backends, RouteError, Weights};
use crate::spec::model::{Canary, Format, GatewayVersion, ParentRef, Strategy};

const TEMPLATE_NAME: &str = "httproute.yaml.j2";
const TEMPLATE: &str = include_str!("../../templates/httproute.yaml.j2");

/// HTTPRoute limits from the CRD (`maxItems`, `maxLength`).
const MAX_PARENT_REFS: usize = 32;
const MAX_HOSTNAMES: usize = 16;
const MAX_MATCHES_PER_RULE: usize = 64;
const MAX_HEADERS: usize = 16;
const MAX_QUERY_PARAMS: usize = 16;
const MAX_HEADER_VALUE: usize = 4096;
const MAX_QUERY_VALUE: usize = 1024;
const MAX_PATH: usize = 1024;
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// The parts of `Route::HttpRoute`.
pub(super) struct RouteSpec<'a> {
    pub version: GatewayVersion,
    pub parent_refs: &'a [ParentRef],
    pub hostnames: &'a [String],
}

#[derive(Serialize)]
struct Context<'a> {
    header: String,
    api_version: &'static str,
    name: &'a str,
    namespace: &'a str,
    managed_by: &'static str,
    parent_refs: &'a [ParentRef],
    hostnames: &'a [String],
    rules: Vec<Rule<'a>>,
}

#[derive(Serialize)]
struct Rule<'a> {
    matches: Vec<Match>,
    backend_refs: Vec<BackendRef<'a>>,
}

#[derive(Serialize)]
struct BackendRef<'a> {
    name: &'a str,
    port: u16,
    weight: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Match {
    path: PathMatch,
    method: Option<String>,
    headers: Vec<ValueMatch>,
    query_params: Vec<ValueMatch>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct PathMatch {
    kind: &'static str,
    value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct ValueMatch {
    name: String,
    kind: &'static str,
    value: String,
}

fn all_requests() -> Match {
    Match {
        path: PathMatch {
            kind: "PathPrefix",
            value: "/".into(),
        },
        method: None,
        headers: Vec::new(),
        query_params: Vec::new(),
    }
}

pub(super) fn render(
    canary: &Canary,
    route: &RouteSpec,
    backends: &Backends,
    weights: Weights,
) -> Result<String, RouteError> {
    check_parent_refs(canary, route.parent_refs)?;
    check_hostnames(canary, route.hostnames)?;
    let port = canary.service.port;
    let weighted = |matches| Rule {
        matches,
        backend_refs: vec![
            BackendRef {
                name: backends.primary,
                port,
                weight: weights.primary,
            },
            BackendRef {
                name: backends.canary,
                port,
                weight: weights.canary,
            },
        ],
    };
    let rules = match &canary.analysis.strategy {
        Strategy::Canary { .. } | Strategy::BlueGreen { .. } => {
            vec![weighted(vec![all_requests()])]
        }
        Strategy::AB { matches, .. } => vec![
            weighted(convert_matches(canary, matches)?),
            Rule {
                matches: vec![all_requests()],
                backend_refs: vec![BackendRef {
                    name: backends.primary,
                    port,
                    weight: 100,
                }],
            },
        ],
    };
    let context = Context {
        header: header_comment(canary),
        api_version: route.version.api_version(),
        name: canary.service.name.as_str(),
        namespace: canary.id.namespace.as_str(),
        managed_by: super::MANAGED_BY,
        parent_refs: route.parent_refs,
        hostnames: route.hostnames,
        rules,
    };
    let text = render_template(canary, TEMPLATE_NAME, TEMPLATE, &context)?;
    let parsed = reparse(canary, TEMPLATE_NAME, &text)?;
    verify(&parsed, &context, weights).map_err(|message| RouteError::Output {
        canary: canary.id.to_string(),
        template: TEMPLATE_NAME,
        message,
    })?;
    Ok(text)
}

/// Reads the rendered object back: right kind and name, and every rule's weights are whole
/// numbers that sum to 100, the weighted rule's being exactly the ones asked for.
fn verify(doc: &Json, context: &Context, weights: Weights) -> Result<(), String> {
    let text = |pointer: &str| doc.pointer(pointer).and_then(Json::as_str);
    if text("/apiVersion") != Some(context.api_version) || text("/kind") != Some("HTTPRoute") {
        return Err(format!(
            "expected apiVersion {} kind HTTPRoute, found {:?} {:?}",
            context.api_version,
            text("/apiVersion"),
            text("/kind")
        ));
    }
    if text("/metadata/name") != Some(context.name)
        || text("/metadata/namespace") != Some(context.namespace)
    {
        return Err(format!(
            "expected metadata {}/{}, found {:?}/{:?}",
            context.namespace,
            context.name,
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
        if i == 0 && found != [u64::from(weights.primary), u64::from(weights.canary)] {
            return Err(format!(
                "expected weights [{}, {}] in spec.rules[0], found {found:?}",
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

fn is_dns_subdomain(text: &str) -> bool {
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

/// Converts Flagger's (Istio's) `analysis.match` list into HTTPRoute matches.
fn convert_matches(canary: &Canary, matches: &[Json]) -> Result<Vec<Match>, RouteError> {
    let base = "spec.analysis.match";
    if matches.is_empty() {
        return Err(field_error(
            canary,
            base.into(),
            "expected at least one match for an A/B canary, found none".into(),
        ));
    }
    if matches.len() > MAX_MATCHES_PER_RULE {
        return Err(field_error(
            canary,
            base.into(),
            format!(
                "an HTTPRoute rule holds at most {MAX_MATCHES_PER_RULE} matches, found {}",
                matches.len()
            ),
        ));
    }
    matches
        .iter()
        .enumerate()
        .map(|(i, m)| {
            convert_match(m, &format!("{base}[{i}]"))
                .map_err(|(field, message)| field_error(canary, field, message))
        })
        .collect()
}

/// One Istio `HTTPMatchRequest`; the error is `(field, message)`.
fn convert_match(value: &Json, at: &str) -> Result<Match, (String, String)> {
    let object = value.as_object().ok_or_else(|| {
        (
            at.to_string(),
            format!("expected a match such as {{headers: {{x-canary: {{exact: insider}}}}}}, found {value}"),
        )
    })?;
    let mut out = all_requests();
    if object.is_empty() {
        return Err((at.to_string(), "expected at least one of uri, method, headers, queryParams; an empty match would send every request to the canary".into()));
    }
    for (key, value) in object {
        let field = format!("{at}.{key}");
        match key.as_str() {
            "uri" => out.path = convert_path(value, &field)?,
            "method" => out.method = Some(convert_method(value, &field)?),
            "headers" => {
                out.headers = convert_named(value, &field, MAX_HEADERS, MAX_HEADER_VALUE)?
            }
            "queryParams" => {
                out.query_params =
                    convert_named(value, &field, MAX_QUERY_PARAMS, MAX_QUERY_VALUE)?
            }
            other => {
                return Err((
                    field,
                    format!("HTTPRoute has no equivalent of the Istio match field {other:?}; sluice converts uri, method, headers and queryParams"),
                ))
            }
        }
    }
    Ok(out)
}

/// An Istio `StringMatch`: exactly one of `exact`, `prefix`, `regex`, with a non-empty string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StringMatch<'a> {
    Exact(&'a str),
    Prefix(&'a str),
    Regex(&'a str),
}

fn string_match<'a>(value: &'a Json, field: &str) -> Result<StringMatch<'a>, (String, String)> {
    let wrong = || {
        (
            field.to_string(),
            format!("expected exactly one of exact, prefix or regex with a non-empty string (e.g. {{exact: insider}}), found {value}"),
        )
    };
    let object = value.as_object().ok_or_else(wrong)?;
    let mut entries = object.iter();
    let (Some((kind, text)), None) = (entries.next(), entries.next()) else {
        return Err(wrong());
    };
    let text = text.as_str().filter(|t| !t.is_empty()).ok_or_else(wrong)?;
    match kind.as_str() {
        "exact" => Ok(StringMatch::Exact(text)),
        "prefix" => Ok(StringMatch::Prefix(text)),
        "regex" => Ok(StringMatch::Regex(text)),
        _ => Err(wrong()),
    }
}

fn convert_path(value: &Json, field: &str) -> Result<PathMatch, (String, String)> {
    let (kind, text) = match string_match(value, field)? {
        StringMatch::Exact(t) => ("Exact", t),
        StringMatch::Prefix(t) => ("PathPrefix", t),
        StringMatch::Regex(t) => ("RegularExpression", t),
    };
    let problem = if text.len() > MAX_PATH {
        Some(format!("at most {MAX_PATH} characters"))
    } else if kind == "RegularExpression" {
        None
    } else {
        path_problem(text)
    };
    match problem {
        Some(problem) => Err((
            field.to_string(),
            format!("expected an HTTPRoute path ({problem}), found {text:?}"),
        )),
        None => Ok(PathMatch {
            kind,
            value: text.to_string(),
        }),
    }
}

/// The HTTPRoute CEL rules for Exact and PathPrefix paths.
fn path_problem(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some("an absolute path starting with '/'".into());
    }
    for bad in ["//", "/./", "/../", "%2f", "%2F", "#"] {
        if path.contains(bad) {
            return Some(format!("must not contain {bad:?}"));
        }
    }
    if path.ends_with("/..") || path.ends_with("/.") {
        return Some("must not end with \"/.\" or \"/..\"".into());
    }
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3);
            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                return Some("'%' must start a %XX escape".into());
            }
            i += 3;
            continue;
        }
        if !(b.is_ascii_alphanumeric() || b"-/._~!$&'()*+,;=:@".contains(&b)) {
            return Some("only letters, digits, %XX escapes and -/._~!$&'()*+,;=:@".into());
        }
        i += 1;
    }
    None
}

fn convert_method(value: &Json, field: &str) -> Result<String, (String, String)> {
    match string_match(value, field)? {
        StringMatch::Exact(method) if METHODS.contains(&method) => Ok(method.to_string()),
        _ => Err((
            field.to_string(),
            format!(
                "expected {{exact: METHOD}} with METHOD one of {}, found {value}",
                METHODS.join(", ")
            ),
        )),
    }
}

/// `headers` or `queryParams`: a map of name to `StringMatch`.
fn convert_named(
    value: &Json,
    field: &str,
    max_items: usize,
    max_value: usize,
) -> Result<Vec<ValueMatch>, (String, String)> {
    let object: &Map<String, Json> = value.as_object().ok_or_else(|| {
        (
            field.to_string(),
            format!("expected a map of name to {{exact|prefix|regex: value}}, found {value}"),
        )
    })?;
    if object.is_empty() || object.len() > max_items {
        return Err((
            field.to_string(),
            format!("expected 1 to {max_items} entries, found {}", object.len()),
        ));
    }
    let mut out = Vec::with_capacity(object.len());
    for (name, matcher) in object {
        let at = format!("{field}.{name}");
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || name.len() > 256 || !name.bytes().all(token) {
            return Err((
                at,
                format!("expected an HTTP token name (letters, digits and !#$%&'*+-.^_`|~, at most 256), found {name:?}"),
            ));
        }
        let (kind, text) = match string_match(matcher, &at)? {
            StringMatch::Exact(t) => ("Exact", t.to_string()),
            StringMatch::Regex(t) => ("RegularExpression", t.to_string()),
            StringMatch::Prefix(t) => ("RegularExpression", format!("^{}.*", regex_escape(t))),
        };
        if text.len() > max_value {
            return Err((
                at,
                format!(
                    "expected a value of at most {max_value} characters, found {}",
                    text.len()
                ),
            ));
        }
        out.push(ValueMatch {
            name: name.clone(),
            kind,
            value: text,
        });
    }
    // Sorted by name so the output never depends on map ordering features.
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Escapes regex metacharacters so a prefix matches literally in RE2, PCRE and ECMAScript.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(value: Json) -> Result<Match, (String, String)> {
        convert_match(&value, "spec.analysis.match[0]")
    }

    #[test]
    fn flagger_header_matches_become_httproute_header_matches() {
        let m = one(json!({"headers": {
            "x-canary": {"exact": "insider"},
            "user-agent": {"regex": ".*Firefox.*"},
            "cookie": {"prefix": "canary=a.b"},
        }}))
        .unwrap();
        assert_eq!(m.path, all_requests().path);
        let headers: Vec<(&str, &str, &str)> = m
            .headers
            .iter()
            .map(|h| (h.name.as_str(), h.kind, h.value.as_str()))
            .collect();
        assert_eq!(
            headers,
            [
                ("cookie", "RegularExpression", "^canary=a\\.b.*"),
                ("user-agent", "RegularExpression", ".*Firefox.*"),
                ("x-canary", "Exact", "insider"),
            ]
        );
    }

    #[test]
    fn uri_method_and_query_params_convert() {
        let m = one(json!({
            "uri": {"prefix": "/api"},
            "method": {"exact": "POST"},
            "queryParams": {"canary": {"exact": "true"}},
        }))
        .unwrap();
        assert_eq!((m.path.kind, m.path.value.as_str()), ("PathPrefix", "/api"));
        assert_eq!(m.method.as_deref(), Some("POST"));
        assert_eq!(m.query_params[0].kind, "Exact");
    }

    #[test]
    fn unconvertible_matches_name_the_field() {
        let cases = [
            (
                json!({"sourceLabels": {"app": "x"}}),
                "spec.analysis.match[0].sourceLabels",
                "no equivalent",
            ),
            (
                json!({"headers": {"x-canary": {"suffix": "a"}}}),
                "spec.analysis.match[0].headers.x-canary",
                "exactly one of",
            ),
            (
                json!({"headers": {"x-canary": {}}}),
                "spec.analysis.match[0].headers.x-canary",
                "exactly one of",
            ),
            (
                json!({"headers": {"x-canary": {"exact": ""}}}),
                "spec.analysis.match[0].headers.x-canary",
                "non-empty",
            ),
            (
                json!({"headers": {"x-canary": {"exact": "a", "regex": "b"}}}),
                "spec.analysis.match[0].headers.x-canary",
                "exactly one of",
            ),
            (
                json!({"headers": {"x canary": {"exact": "a"}}}),
                "spec.analysis.match[0].headers.x canary",
                "token",
            ),
            (
                json!({"headers": {}}),
                "spec.analysis.match[0].headers",
                "1 to 16",
            ),
            (
                json!({"method": {"exact": "FETCH"}}),
                "spec.analysis.match[0].method",
                "METHOD one of",
            ),
            (
                json!({"method": {"prefix": "GE"}}),
                "spec.analysis.match[0].method",
                "METHOD one of",
            ),
            (
                json!({"uri": {"exact": "api"}}),
                "spec.analysis.match[0].uri",
                "starting with '/'",
            ),
            (
                json!({"uri": {"prefix": "/a//b"}}),
                "spec.analysis.match[0].uri",
                "\"//\"",
            ),
            (
                json!({"uri": {"prefix": "/a b"}}),
                "spec.analysis.match[0].uri",
                "only letters",
            ),
            (
                json!({"uri": {"prefix": "/a%zz"}}),
                "spec.analysis.match[0].uri",
                "%XX",
            ),
            (json!({}), "spec.analysis.match[0]", "empty match"),
            (
                json!("x-canary"),
                "spec.analysis.match[0]",
                "expected a match",
            ),
        ];
        for (value, field, message) in cases {
            let (f, m) = one(value.clone()).expect_err(&value.to_string());
            assert_eq!(f, field, "{value}");
            assert!(m.contains(message), "{value}: {m}");
        }
    }

    #[test]
    fn regex_paths_skip_the_literal_path_rules() {
        let m = one(json!({"uri": {"regex": "/api/v[0-9]+/.*"}})).unwrap();
        assert_eq!(m.path.kind, "RegularExpression");
    }

    #[test]
    fn path_rules_accept_ordinary_paths() {
        for ok in ["/", "/api", "/api/v1/", "/a%2Bb", "/~user/a.b"] {
            assert_eq!(path_problem(ok), None, "{ok}");
        }
        for bad in ["/a/.", "/a/..", "/a#b", "/a%2fb", "/a/../b"] {
            assert!(path_problem(bad).is_some(), "{bad}");
        }
    }
}
