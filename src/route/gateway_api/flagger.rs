//! Flagger's Istio-style route fields -> validated Gateway API HTTPRoute pieces.
//!
//! For a Gateway API canary, Flagger's routers (`pkg/router/gateway_api.go`, and
//! `gateway_api_v1beta1.go` for `gatewayapi:v1beta1`) put the same matches, filters and timeouts
//! on every rule of the HTTPRoute, built from `spec.service`:
//! - `match`: Istio `HTTPMatchRequest`s, converted below; none means `PathPrefix /`.
//! - `headers.request` / `headers.response` (`set`, `add`, `remove`): `RequestHeaderModifier` /
//!   `ResponseHeaderModifier` filters, `set` and `add` sorted by name.
//! - `rewrite` (`uri`, `authority`, `type`): a `URLRewrite` filter; `authority` becomes the
//!   hostname, `uri` the path, replacing the full path unless `type: ReplacePrefixMatch`.
//! - `mirror`: Gateway API `HTTPRequestMirrorFilter`s (only a `backendRef` each: group, kind,
//!   name, namespace, port), one `RequestMirror` filter per entry, in the order given. Flagger's
//!   Canary has no `percent` or `fraction` for them: it mirrors every request, so those are errors.
//! - `corsPolicy`: a `CORS` filter (`allowOrigin` → `allowOrigins`, `maxAge` in seconds).
//!   gatewayapi:v1 only.
//! - `timeout` / `backendTimeout`: the rule's `timeouts.request` / `timeouts.backendRequest`.
//!   gatewayapi:v1 only.
//!
//! Filters come in Flagger's order: request headers, response headers, rewrite, mirrors, CORS.
//!
//! Where Flagger would pass on a value the API server refuses, or drop part of what was asked,
//! this module reports an error instead: the CRD's patterns, limits and CEL rules are checked
//! here (its JSON schema does not check CEL rules), and Istio fields with no Gateway API
//! equivalent (`corsPolicy.allowOrigins` patterns, which Flagger ignores) are errors.
//!
//! Flagger's matches are Istio `HTTPMatchRequest`s. Converted: `uri` (exact → Exact, prefix →
//! PathPrefix, regex → RegularExpression; note PathPrefix matches whole path segments where
//! Istio's prefix matches characters), `method` (exact), `headers` and `queryParams` (exact →
//! Exact, regex → RegularExpression, prefix → an anchored RegularExpression of the escaped
//! prefix, since Gateway API has no prefix match for them). Anything else is an error, never
//! dropped: a dropped condition would send more traffic to the canary than asked.
//!
//! Pure: no IO.

use serde_json::{Map, Value as Json};

use crate::route::field;
use crate::route::gateway_api::config::{
    Cors, GatewayDuration, GatewayVersion, HeaderModifier, HttpHeader, HttpMatch, PathMatch,
    PathRewrite, RequestMirror, RuleSpec, Timeouts, UrlRewrite, ValueMatch,
};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};

/// HTTPRoute limits from the CRD (`maxItems`, `maxLength`).
const MAX_MATCHES_PER_RULE: usize = 64;
/// The CRD's CEL rule on `spec.rules`: matches across all rules.
const MAX_MATCHES_PER_ROUTE: usize = 128;
const MAX_HEADERS: usize = 16;
const MAX_QUERY_PARAMS: usize = 16;
const MAX_HEADER_VALUE: usize = 4096;
const MAX_QUERY_VALUE: usize = 1024;
const MAX_PATH: usize = 1024;
/// `set`, `add` and `remove` of a header filter, each.
const MAX_HEADER_CHANGES: usize = 16;
const MAX_HOSTNAME: usize = 253;
/// `filters` of a rule.
const MAX_FILTERS: usize = 16;
const MAX_OBJECT_NAME: usize = 253;
const MAX_KIND: usize = 63;
const MAX_NAMESPACE: usize = 63;
/// `allowOrigins`, `allowHeaders`, `exposeHeaders` of a CORS filter, each.
const MAX_CORS_ITEMS: usize = 64;
const MAX_CORS_ORIGIN: usize = 253;
/// `maxAge` is an int32 of seconds.
const MAX_CORS_MAX_AGE: u64 = 2_147_483_647;
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];
const HEADER_NAME_RULE: &str = "letters, digits and !#$%&'*+-.^_`|~, at most 256";
const DURATION_RULE: &str =
    "1 to 4 groups of up to 5 digits and a unit h, m, s or ms, such as 30s or 1m30s";
const PREFIX_REWRITE_RULE: &str =
    "rewrite type ReplacePrefixMatch needs exactly one PathPrefix match in each HTTPRoute rule (a CEL rule of the HTTPRoute CRD)";

/// Reads the `spec.service` fields Flagger puts on every rule of a Gateway API route; `None`
/// when any had errors (reported through `r`).
pub(super) fn read_rule_spec(
    r: &mut Reader,
    service: &Node,
    version: GatewayVersion,
) -> Option<RuleSpec> {
    let before = r.errors.len();
    let base = "spec.service";
    let matches = field(service, "match")
        .map(|n| read_matches(r, n, &join(base, "match")))
        .unwrap_or_default();
    let (request_headers, response_headers) = match field(service, "headers") {
        Some(n) => read_headers(r, n, &join(base, "headers")),
        None => (None, None),
    };
    let rewrite =
        field(service, "rewrite").and_then(|n| read_rewrite(r, n, &join(base, "rewrite")));
    let mirrors = field(service, "mirror")
        .map(|n| read_mirrors(r, n, &join(base, "mirror")))
        .unwrap_or_default();
    let (timeouts, cors) = match version {
        GatewayVersion::V1 => (
            read_timeouts(r, service, base),
            field(service, "corsPolicy").and_then(|n| read_cors(r, n, &join(base, "corsPolicy"))),
        ),
        GatewayVersion::V1beta1 => {
            for key in ["timeout", "backendTimeout", "corsPolicy"] {
                if let Some(n) = field(service, key) {
                    r.error(n.line, &join(base, key), "Flagger's gatewayapi:v1beta1 router does not apply this field (its gatewayapi:v1 router does); use provider gatewayapi:v1, which sluice renders with the same HTTPRoute schema, or remove it");
                }
            }
            (Timeouts::default(), None)
        }
    };
    if let Some(UrlRewrite {
        path: Some(PathRewrite::ReplacePrefixMatch(_)),
        ..
    }) = &rewrite
    {
        let line = rewrite_type_line(service);
        let at = "spec.service.rewrite.type";
        match matches.as_slice() {
            [] => {}
            [only] if only.path.kind == "PathPrefix" => {}
            [only] => r.error(
                line,
                at,
                format!(
                    "{PREFIX_REWRITE_RULE}; spec.service.match[0].uri is {}, not a prefix",
                    only.path.kind
                ),
            ),
            more => r.error(
                line,
                at,
                format!(
                    "{PREFIX_REWRITE_RULE}; spec.service.match has {} matches",
                    more.len()
                ),
            ),
        }
    }
    let filters = usize::from(request_headers.is_some())
        + usize::from(response_headers.is_some())
        + usize::from(rewrite.is_some())
        + mirrors.len()
        + usize::from(cors.is_some());
    if filters > MAX_FILTERS {
        if let Some(n) = field(service, "mirror") {
            r.error(
                n.line,
                &join(base, "mirror"),
                format!("an HTTPRoute rule holds at most {MAX_FILTERS} filters, found {filters} (headers, rewrite, corsPolicy and one per mirror)"),
            );
        }
    }
    if r.errors.len() > before {
        return None;
    }
    Some(RuleSpec {
        matches,
        request_headers,
        response_headers,
        rewrite,
        mirrors,
        cors,
        timeouts,
        ab_matches: Vec::new(),
    })
}

fn rewrite_type_line(service: &Node) -> usize {
    let rewrite = field(service, "rewrite");
    rewrite
        .and_then(|n| n.get("type"))
        .or(rewrite)
        .map_or(service.line, |n| n.line)
}

/// Converts an A/B canary's `analysis.match` (the list node `matches`) into HTTPRoute matches
/// and checks it against the service fields as Flagger combines them: the weighted rule holds
/// every service match once per A/B match, with that A/B match's headers and queryParams in
/// place of the service match's own (`mergeMatchConditions`); the fallback rule holds the
/// service matches. Flagger drops the A/B match's `uri` and `method`, and the service match's
/// headers or queryParams, when both sides set them; sluice reports that instead, since either
/// would send other requests than asked to the canary. Every problem goes to `r` with its
/// line. `service` is a Flagger canary's `spec.service` (`None` for native canaries, whose
/// `rules` are the default).
pub(super) fn check_ab_matches(
    r: &mut Reader,
    rules: &RuleSpec,
    service: Option<&Node>,
    matches: &Node,
) -> Vec<HttpMatch> {
    // An A/B analysis has a non-empty list here (`manifest::analysis` chose A/B from it).
    let Value::Seq(ab) = &matches.value else {
        return Vec::new();
    };
    let fallback_line = service.map_or(matches.line, |s| s.line);
    let mut converted = Vec::with_capacity(ab.len());
    let base = "spec.analysis.match";
    let own = &rules.matches;
    // The renderer converts these too; converting them here makes `sluice validate` report a
    // bad one with its line instead of the first tick failing.
    if ab.len() > MAX_MATCHES_PER_RULE {
        let line = ab.first().map_or(fallback_line, |n| n.line);
        r.error(
            line,
            base,
            format!(
                "an HTTPRoute rule holds at most {MAX_MATCHES_PER_RULE} matches, found {}",
                ab.len()
            ),
        );
    }
    for (i, item) in ab.iter().enumerate() {
        let at = index(base, i);
        match convert_match(&item.to_json(), &at) {
            Ok(m) => converted.push(m),
            Err((field, message)) => r.error(line_of(item, &at, &field), &field, message),
        }
    }
    if !own.is_empty() {
        let with_headers = own.iter().position(|m| !m.headers.is_empty());
        let with_params = own.iter().position(|m| !m.query_params.is_empty());
        for (i, item) in ab.iter().enumerate() {
            let at = index(base, i);
            for key in ["uri", "method"] {
                if let Some(n) = item.get(key) {
                    r.error(n.line, &join(&at, key), "with spec.service.match set, Flagger merges each A/B match into the service matches keeping only its headers and queryParams, so this condition would be dropped; move it into spec.service.match or remove it");
                }
            }
            for (key, taken) in [("headers", with_headers), ("queryParams", with_params)] {
                if let (Some(n), Some(j)) = (item.get(key), taken) {
                    r.error(n.line, &join(&at, key), format!("Flagger's merge replaces the {key} of spec.service.match[{j}] with these, dropping that match's {key} conditions; keep {key} conditions in only one of the two lists"));
                }
            }
        }
        let weighted = own.len() * ab.len();
        if weighted > MAX_MATCHES_PER_RULE || weighted + own.len() > MAX_MATCHES_PER_ROUTE {
            let line = ab.first().map_or(fallback_line, |n| n.line);
            r.error(line, base, format!("the A/B rule would hold {weighted} matches ({} A/B matches × {} service matches) and the route {} in all; an HTTPRoute rule holds at most {MAX_MATCHES_PER_RULE} and a route at most {MAX_MATCHES_PER_ROUTE}", ab.len(), own.len(), weighted + own.len()));
        }
    }
    if let Some(UrlRewrite {
        path: Some(PathRewrite::ReplacePrefixMatch(_)),
        ..
    }) = &rules.rewrite
    {
        let weighted = own.len().max(1) * ab.len();
        if weighted != 1 {
            r.error(
                service.map_or(matches.line, rewrite_type_line),
                "spec.service.rewrite.type",
                format!("{PREFIX_REWRITE_RULE}; the A/B rule would hold {weighted} matches"),
            );
        } else if own.is_empty() {
            // The A/B match is the rule's only match: its uri, if any, must be a prefix.
            if let Some(uri) = ab.first().and_then(|m| m.get("uri")) {
                if uri.get("prefix").is_none() {
                    r.error(
                        uri.line,
                        &join(&index(base, 0), "uri"),
                        format!("{PREFIX_REWRITE_RULE}; expected a uri prefix match here"),
                    );
                }
            }
        }
    }
    converted
}

/// `spec.service.match`: Istio `HTTPMatchRequest`s, converted.
fn read_matches(r: &mut Reader, node: &Node, path: &str) -> Vec<HttpMatch> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    if items.len() > MAX_MATCHES_PER_RULE {
        r.error(
            node.line,
            path,
            format!(
                "an HTTPRoute rule holds at most {MAX_MATCHES_PER_RULE} matches, found {}",
                items.len()
            ),
        );
        return Vec::new();
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index(path, i);
        match convert_match(&item.to_json(), &at) {
            Ok(m) => out.push(m),
            Err((field, message)) => r.error(line_of(item, &at, &field), &field, message),
        }
    }
    out
}

/// The line of `field` (`at`, `at.key` or `at.key.name`) inside the match `item` at `at`.
fn line_of(item: &Node, at: &str, field: &str) -> usize {
    let Some(rest) = field.strip_prefix(at).and_then(|f| f.strip_prefix('.')) else {
        return item.line;
    };
    // Keys (uri, method, headers, queryParams) have no dots; header names may.
    let (key, name) = match rest.split_once('.') {
        Some((key, name)) => (key, Some(name)),
        None => (rest, None),
    };
    let Some(node) = item.get(key) else {
        return item.line;
    };
    name.and_then(|n| node.get(n)).unwrap_or(node).line
}

/// The HTTPRoute's header name pattern (`^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$`, 1 to 256).
fn is_header_name(name: &str) -> bool {
    crate::route::is_header_name(name) && name.len() <= 256
}

/// `headers`: Istio's `{request, response}`, each `{set, add, remove}`.
fn read_headers(
    r: &mut Reader,
    node: &Node,
    path: &str,
) -> (Option<HeaderModifier>, Option<HeaderModifier>) {
    if r.map(node, path, &["request", "response"]).is_none() {
        return (None, None);
    }
    let mut side =
        |key: &str| field(node, key).and_then(|n| read_header_changes(r, n, &join(path, key)));
    let request = side("request");
    let response = side("response");
    (request, response)
}

/// One side's `{set, add, remove}`; `None` when all are empty (Flagger would write an empty
/// filter, which changes nothing).
fn read_header_changes(r: &mut Reader, node: &Node, path: &str) -> Option<HeaderModifier> {
    r.map(node, path, &["set", "add", "remove"])?;
    let set = field(node, "set")
        .map(|n| read_header_values(r, n, &join(path, "set")))
        .unwrap_or_default();
    let add = field(node, "add")
        .map(|n| read_header_values(r, n, &join(path, "add")))
        .unwrap_or_default();
    let remove = field(node, "remove")
        .map(|n| read_header_names(r, n, &join(path, "remove")))
        .unwrap_or_default();
    let changes = HeaderModifier { set, add, remove };
    (changes != HeaderModifier::default()).then_some(changes)
}

/// `set` or `add`: a map of header name to value, sorted by name.
fn read_header_values(r: &mut Reader, node: &Node, path: &str) -> Vec<HttpHeader> {
    let Value::Map(entries) = &node.value else {
        r.error(
            node.line,
            path,
            format!(
                "expected a map of header name to value, found {}",
                node.kind()
            ),
        );
        return Vec::new();
    };
    if entries.len() > MAX_HEADER_CHANGES {
        r.error(
            node.line,
            path,
            format!(
                "expected at most {MAX_HEADER_CHANGES} headers (the HTTPRoute limit), found {}",
                entries.len()
            ),
        );
        return Vec::new();
    }
    let mut out: Vec<HttpHeader> = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        let at = join(path, &key.text);
        if !is_header_name(&key.text) {
            r.error(
                key.line,
                &at,
                format!(
                    "expected a header name ({HEADER_NAME_RULE}), found {:?}",
                    key.text
                ),
            );
            continue;
        }
        if out.iter().any(|h| h.name == key.text) {
            r.error(key.line, &at, "duplicate key");
            continue;
        }
        let Some(text) = r.string(value, &at) else {
            continue;
        };
        if text.is_empty() || text.len() > MAX_HEADER_VALUE {
            r.error(
                value.line,
                &at,
                format!(
                    "expected a value of 1 to {MAX_HEADER_VALUE} characters, found {}",
                    text.len()
                ),
            );
            continue;
        }
        out.push(HttpHeader {
            name: key.text.clone(),
            value: text,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// `remove`: a list of header names, each once.
fn read_header_names(r: &mut Reader, node: &Node, path: &str) -> Vec<String> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    if items.len() > MAX_HEADER_CHANGES {
        r.error(
            node.line,
            path,
            format!(
                "expected at most {MAX_HEADER_CHANGES} headers (the HTTPRoute limit), found {}",
                items.len()
            ),
        );
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index(path, i);
        let Some(name) = r.string(item, &at) else {
            continue;
        };
        if !is_header_name(&name) {
            r.error(
                item.line,
                &at,
                format!("expected a header name ({HEADER_NAME_RULE}), found {name:?}"),
            );
        } else if out.contains(&name) {
            r.error(
                item.line,
                &at,
                format!(
                    "expected each header once (the HTTPRoute list is a set), found {name:?} again"
                ),
            );
        } else {
            out.push(name);
        }
    }
    out
}

/// The HTTPRoute's `PreciseHostname` pattern (lowercase DNS name, no wildcard, no port).
fn is_precise_hostname(text: &str) -> bool {
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    text.len() <= MAX_HOSTNAME && text.split('.').all(label)
}

/// `rewrite`: Flagger's `{uri, authority, type}`.
fn read_rewrite(r: &mut Reader, node: &Node, path: &str) -> Option<UrlRewrite> {
    r.map(node, path, &["uri", "authority", "type"])?;
    let before = r.errors.len();
    let hostname = field(node, "authority").and_then(|n| {
        let at = join(path, "authority");
        let text = r.string(n, &at)?;
        if is_precise_hostname(&text) {
            Some(text)
        } else {
            r.error(n.line, &at, format!("expected a lowercase host name without port or wildcard (the URLRewrite hostname: letters, digits, '-' and '.', at most {MAX_HOSTNAME}), found {text:?}"));
            None
        }
    });
    let uri = field(node, "uri").and_then(|n| {
        let at = join(path, "uri");
        let text = r.string(n, &at)?;
        if text.starts_with('/') && text.len() <= MAX_PATH {
            Some(text)
        } else {
            r.error(
                n.line,
                &at,
                format!("expected a path starting with '/', at most {MAX_PATH} characters, found {text:?}"),
            );
            None
        }
    });
    let prefix = match field(node, "type") {
        None => false,
        Some(n) => {
            let at = join(path, "type");
            match r.string(n, &at).as_deref() {
                Some("ReplaceFullPath") => false,
                Some("ReplacePrefixMatch") => true,
                Some(other) => {
                    r.error(n.line, &at, format!("expected ReplaceFullPath (the default) or ReplacePrefixMatch, found {other:?}"));
                    false
                }
                None => false,
            }
        }
    };
    if field(node, "uri").is_none() {
        if let Some(n) = field(node, "type") {
            r.error(
                n.line,
                &join(path, "type"),
                "has no effect without uri; set uri or remove type",
            );
        }
        if field(node, "authority").is_none() {
            r.error(
                node.line,
                path,
                "expected uri, authority or both; an empty rewrite changes nothing",
            );
        }
    }
    if r.errors.len() > before {
        return None;
    }
    let path = uri.map(|uri| {
        if prefix {
            PathRewrite::ReplacePrefixMatch(uri)
        } else {
            PathRewrite::ReplaceFullPath(uri)
        }
    });
    Some(UrlRewrite { hostname, path })
}

/// `mirror`: Flagger's list of Gateway API `HTTPRequestMirrorFilter`s, each only a
/// `backendRef`, checked against the Canary CRD's schema and CEL rule (the same as the
/// HTTPRoute's).
fn read_mirrors(r: &mut Reader, node: &Node, path: &str) -> Vec<RequestMirror> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if let Some(m) = read_mirror(r, item, &index(path, i)) {
            out.push(m);
        }
    }
    out
}

fn read_mirror(r: &mut Reader, node: &Node, path: &str) -> Option<RequestMirror> {
    let before = r.errors.len();
    r.map(node, path, &["backendRef", "percent", "fraction"])?;
    for key in ["percent", "fraction"] {
        if let Some(n) = node.get(key) {
            r.error(n.line, &join(path, key), "Flagger's Canary has no percent or fraction for a mirror (each entry holds only backendRef), so Flagger mirrors every request; remove it, or mirror every request");
        }
    }
    let at = join(path, "backendRef");
    let backend = r.required(node, path, "backendRef")?;
    r.map(
        backend,
        &at,
        &["group", "kind", "name", "namespace", "port"],
    )?;
    let before_ref = r.errors.len();
    let text = |r: &mut Reader, key: &str, ok: fn(&str) -> bool, rule: &str| {
        let n = field(backend, key)?;
        let at = join(&at, key);
        let value = r.string(n, &at)?;
        if ok(&value) {
            Some(value)
        } else {
            r.error(n.line, &at, format!("expected {rule}, found {value:?}"));
            None
        }
    };
    let name = match r.required(backend, &at, "name") {
        Some(_) => text(
            r,
            "name",
            |t| !t.is_empty() && t.len() <= MAX_OBJECT_NAME,
            "a name of 1 to 253 characters",
        ),
        None => None,
    };
    let group = text(
        r,
        "group",
        |t| t.is_empty() || is_precise_hostname(t),
        "\"\" (the core group) or a lowercase DNS name of at most 253 characters",
    );
    let kind = text(
        r,
        "kind",
        is_kind,
        "a kind: a letter, then letters, digits and '-', not ending in '-', at most 63",
    );
    let namespace = text(
        r,
        "namespace",
        |t| t.len() <= MAX_NAMESPACE && !t.contains('.') && is_precise_hostname(t),
        "a namespace: a lowercase DNS label of at most 63 characters",
    );
    let port = field(backend, "port").and_then(|n| {
        let port = r.int(n, &join(&at, "port"), 1, i64::from(u16::MAX))?;
        u16::try_from(port).ok()
    });
    let group = group.unwrap_or_default();
    let kind = kind.unwrap_or_else(|| "Service".to_string());
    // Checked only when the fields it reads are valid, so a bad kind is not also a missing port.
    if r.errors.len() == before_ref && group.is_empty() && kind == "Service" && port.is_none() {
        r.error(
            backend.line,
            &join(&at, "port"),
            "required field is missing: a mirror to a Service needs the Service port (a CEL rule of the HTTPRoute CRD)",
        );
    }
    if r.errors.len() > before {
        return None;
    }
    Some(RequestMirror {
        group,
        kind,
        name: name?,
        namespace,
        port,
    })
}

/// The CRD's `Kind` pattern, `^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`, at most 63.
fn is_kind(text: &str) -> bool {
    text.len() <= MAX_KIND
        && text.starts_with(|c: char| c.is_ascii_alphabetic())
        && !text.ends_with('-')
        && text.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
}

/// A Gateway API Duration field.
fn read_gateway_duration(r: &mut Reader, node: &Node, path: &str) -> Option<GatewayDuration> {
    let text = r.string(node, path)?;
    match GatewayDuration::parse(&text) {
        Some(duration) => Some(duration),
        None => {
            r.error(
                node.line,
                path,
                format!("expected a Gateway API duration ({DURATION_RULE}), found {text:?}"),
            );
            None
        }
    }
}

/// `timeout` and `backendTimeout`, with the CRD's CEL rule that the backend timeout is not
/// longer than a non-zero request timeout.
fn read_timeouts(r: &mut Reader, service: &Node, base: &str) -> Timeouts {
    let request =
        field(service, "timeout").and_then(|n| read_gateway_duration(r, n, &join(base, "timeout")));
    let backend_node = field(service, "backendTimeout");
    let backend =
        backend_node.and_then(|n| read_gateway_duration(r, n, &join(base, "backendTimeout")));
    if let (Some(request), Some(backend), Some(n)) = (&request, &backend, backend_node) {
        if !request.duration().is_zero() && backend.duration() > request.duration() {
            r.error(
                n.line,
                &join(base, "backendTimeout"),
                format!("expected at most spec.service.timeout ({:?}), found {:?}: an HTTPRoute's backendRequest timeout cannot be longer than its request timeout", request.as_str(), backend.as_str()),
            );
        }
    }
    Timeouts {
        request,
        backend_request: backend,
    }
}

/// The CORS filter's origin pattern: `*`, or `http(s)://` and a host (optionally starting
/// with `*.`, or just `*`) and an optional port of up to 5 digits.
fn is_cors_origin(text: &str) -> bool {
    if text == "*" {
        return true;
    }
    let Some(rest) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    };
    let port_ok =
        port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    let label =
        |l: &str| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let host_ok = host == "*"
        || host
            .strip_prefix("*.")
            .unwrap_or(host)
            .split('.')
            .all(label);
    text.len() <= MAX_CORS_ORIGIN && port_ok && host_ok
}

/// A CORS list: strings, each passing `check` (which returns what was expected), each once,
/// at most `max`; with `star_alone`, `*` only as the single entry (the CRD's CEL rule).
fn read_cors_list(
    r: &mut Reader,
    node: &Node,
    path: &str,
    max: usize,
    star_alone: bool,
    check: fn(&str) -> Option<&'static str>,
) -> Vec<String> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    if items.len() > max {
        r.error(
            node.line,
            path,
            format!(
                "expected at most {max} entries (the HTTPRoute limit), found {}",
                items.len()
            ),
        );
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = index(path, i);
        let Some(text) = r.string(item, &at) else {
            continue;
        };
        if let Some(expected) = check(&text) {
            r.error(
                item.line,
                &at,
                format!("expected {expected}, found {text:?}"),
            );
        } else if out.contains(&text) {
            r.error(
                item.line,
                &at,
                format!(
                    "expected each entry once (the HTTPRoute list is a set), found {text:?} again"
                ),
            );
        } else {
            out.push(text);
        }
    }
    if star_alone && out.len() > 1 && out.iter().any(|t| t == "*") {
        r.error(
            node.line,
            path,
            "expected \"*\" alone or a list without \"*\" (an HTTPRoute CEL rule), found both",
        );
    }
    out
}

fn check_origin(text: &str) -> Option<&'static str> {
    (!is_cors_origin(text))
        .then_some("an origin such as https://example.com, https://*.example.com:8443 or \"*\"")
}

fn check_method(text: &str) -> Option<&'static str> {
    (!(text == "*" || METHODS.contains(&text)))
        .then_some("one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH or \"*\"")
}

fn check_header_name(text: &str) -> Option<&'static str> {
    (!is_header_name(text))
        .then_some("a header name (letters, digits and !#$%&'*+-.^_`|~, at most 256)")
}

/// `corsPolicy`: Istio's `CorsPolicy`, as Flagger maps it to a `CORS` filter.
fn read_cors(r: &mut Reader, node: &Node, path: &str) -> Option<Cors> {
    let keys = [
        "allowOrigin",
        "allowOrigins",
        "allowMethods",
        "allowHeaders",
        "exposeHeaders",
        "maxAge",
        "allowCredentials",
    ];
    r.map(node, path, &keys)?;
    let before = r.errors.len();
    if let Some(n) = field(node, "allowOrigins") {
        r.error(n.line, &join(path, "allowOrigins"), "the Gateway API CORS filter has no origin patterns, and Flagger does not map Istio's allowOrigins; list exact origins in allowOrigin instead (\"https://*.example.com\" allows subdomains)");
    }
    let list = |r: &mut Reader, key: &str, max: usize, star_alone: bool, check| {
        field(node, key)
            .map(|n| read_cors_list(r, n, &join(path, key), max, star_alone, check))
            .unwrap_or_default()
    };
    let allow_origins = list(r, "allowOrigin", MAX_CORS_ITEMS, true, check_origin);
    let allow_methods = list(r, "allowMethods", METHODS.len(), true, check_method);
    let allow_headers = list(r, "allowHeaders", MAX_CORS_ITEMS, true, check_header_name);
    let expose_headers = list(r, "exposeHeaders", MAX_CORS_ITEMS, false, check_header_name);
    let allow_credentials = field(node, "allowCredentials")
        .and_then(|n| r.bool(n, &join(path, "allowCredentials")))
        .unwrap_or(false);
    let max_age = field(node, "maxAge").and_then(|n| {
        let at = join(path, "maxAge");
        let age = r.duration(n, &at)?;
        let seconds = age.as_secs();
        if age.subsec_nanos() == 0 && (1..=MAX_CORS_MAX_AGE).contains(&seconds) {
            u32::try_from(seconds).ok()
        } else {
            r.error(n.line, &at, format!("expected whole seconds from 1s to {MAX_CORS_MAX_AGE}s (the CORS filter's maxAge is in seconds), found {age:?}"));
            None
        }
    });
    let cors = Cors {
        allow_origins,
        allow_methods,
        allow_headers,
        expose_headers,
        allow_credentials,
        max_age,
    };
    if r.errors.len() > before {
        return None;
    }
    if cors == Cors::default() {
        r.error(
            node.line,
            path,
            "expected at least allowOrigin; an empty CORS policy allows nothing",
        );
        return None;
    }
    Some(cors)
}

/// One Istio `HTTPMatchRequest`; the error is `(field, message)`, `field` starting with `at`.
pub(super) fn convert_match(value: &Json, at: &str) -> Result<HttpMatch, (String, String)> {
    let object = value.as_object().ok_or_else(|| {
        (
            at.to_string(),
            format!("expected a match such as {{headers: {{x-canary: {{exact: insider}}}}}}, found {value}"),
        )
    })?;
    let mut out = HttpMatch::all_requests();
    if object.is_empty() {
        return Err((at.to_string(), "expected at least one of uri, method, headers, queryParams; an empty match would match every request".into()));
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
        if !is_header_name(name) {
            return Err((
                at,
                format!("expected an HTTP token name ({HEADER_NAME_RULE}), found {name:?}"),
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
    use crate::yaml::node::parse_documents;
    use serde_json::json;

    /// Reads `yaml` as the `spec.service` mapping of `c.yaml`.
    fn read(yaml: &str, version: GatewayVersion) -> (Option<RuleSpec>, Vec<String>) {
        let docs = parse_documents(yaml).expect("test YAML parses");
        let mut r = Reader::new("c.yaml");
        let rules = read_rule_spec(&mut r, &docs[0].root, version);
        let errors = r.errors.iter().map(ToString::to_string).collect();
        (rules, errors)
    }

    fn errors_v1(yaml: &str) -> Vec<String> {
        let (rules, errors) = read(yaml, GatewayVersion::V1);
        assert_eq!(rules.is_none(), !errors.is_empty(), "{yaml}");
        errors
    }

    #[test]
    fn cors_origins_follow_the_crd_pattern() {
        for ok in [
            "*",
            "https://example.com",
            "http://example.com:8080",
            "https://*.example.com",
            "https://*",
            "http://localhost",
            "https://Example.COM",
        ] {
            assert!(is_cors_origin(ok), "{ok}");
        }
        for bad in [
            "",
            "example.com",
            "ftp://example.com",
            "https://",
            "https://example.com/",
            "https://a..b",
            "https://example.com:123456",
            "https://example.com:",
            "https://*.*.example.com",
            "https://ex ample.com",
        ] {
            assert!(!is_cors_origin(bad), "{bad}");
        }
    }

    #[test]
    fn precise_hostnames_are_lowercase_dns_names() {
        for ok in ["podinfo", "podinfo.prod.svc.cluster.local", "a-1.b"] {
            assert!(is_precise_hostname(ok), "{ok}");
        }
        for bad in [
            "",
            "Podinfo",
            "podinfo:8080",
            "*.example.com",
            "-a",
            "a.",
            "a_b",
        ] {
            assert!(!is_precise_hostname(bad), "{bad}");
        }
    }

    #[test]
    fn no_service_fields_is_the_default() {
        assert_eq!(
            read("port: 9898\n", GatewayVersion::V1),
            (Some(RuleSpec::default()), Vec::new())
        );
        // `null` counts as not set, as in Flagger.
        assert_eq!(
            read("match: ~\nheaders: ~\ntimeout: ~\n", GatewayVersion::V1),
            (Some(RuleSpec::default()), Vec::new())
        );
    }

    #[test]
    fn service_fields_convert_as_flagger_maps_them() {
        let yaml = "match:
  - uri: {prefix: /api}
    headers: {x-tenant: {exact: acme}}
headers:
  request:
    set: {x-b: '2', X-a: '1'}
    add: {x-c: '3'}
    remove: [x-z, x-y]
  response:
    remove: [server]
rewrite: {uri: /v2, authority: podinfo.internal, type: ReplacePrefixMatch}
mirror:
  - backendRef: {name: podinfo-shadow, port: 9898}
  - backendRef: {group: example.io, kind: Backend, name: shadow, namespace: tests}
corsPolicy:
  allowOrigin: ['*']
  allowMethods: ['*']
  exposeHeaders: [x-request-id]
  allowCredentials: false
  maxAge: 90s
timeout: 1m30s
backendTimeout: 500ms
";
        let (rules, errors) = read(yaml, GatewayVersion::V1);
        assert_eq!(errors, Vec::<String>::new());
        let header = |name: &str, value: &str| HttpHeader {
            name: name.into(),
            value: value.into(),
        };
        let expected = RuleSpec {
            matches: vec![HttpMatch {
                path: PathMatch {
                    kind: "PathPrefix",
                    value: "/api".into(),
                },
                method: None,
                headers: vec![ValueMatch {
                    name: "x-tenant".into(),
                    kind: "Exact",
                    value: "acme".into(),
                }],
                query_params: Vec::new(),
            }],
            request_headers: Some(HeaderModifier {
                // Sorted by name (byte order, as Flagger's strings.Compare).
                set: vec![header("X-a", "1"), header("x-b", "2")],
                add: vec![header("x-c", "3")],
                remove: vec!["x-z".into(), "x-y".into()],
            }),
            response_headers: Some(HeaderModifier {
                set: Vec::new(),
                add: Vec::new(),
                remove: vec!["server".into()],
            }),
            rewrite: Some(UrlRewrite {
                hostname: Some("podinfo.internal".into()),
                path: Some(PathRewrite::ReplacePrefixMatch("/v2".into())),
            }),
            // The CRD's defaults for group and kind filled in; namespace and port as given.
            mirrors: vec![
                RequestMirror {
                    group: String::new(),
                    kind: "Service".into(),
                    name: "podinfo-shadow".into(),
                    namespace: None,
                    port: Some(9898),
                },
                RequestMirror {
                    group: "example.io".into(),
                    kind: "Backend".into(),
                    name: "shadow".into(),
                    namespace: Some("tests".into()),
                    port: None,
                },
            ],
            cors: Some(Cors {
                allow_origins: vec!["*".into()],
                allow_methods: vec!["*".into()],
                allow_headers: Vec::new(),
                expose_headers: vec!["x-request-id".into()],
                allow_credentials: false,
                max_age: Some(90),
            }),
            timeouts: Timeouts {
                request: GatewayDuration::parse("1m30s"),
                backend_request: GatewayDuration::parse("500ms"),
            },
            ab_matches: Vec::new(),
        };
        assert_eq!(rules, Some(expected));
    }

    #[test]
    fn rewrite_defaults_to_the_full_path_and_empty_header_sides_are_left_out() {
        let (rules, errors) = read(
            "rewrite: {uri: /v2}\nheaders: {request: {}, response: {set: {}}}\n",
            GatewayVersion::V1,
        );
        assert_eq!(errors, Vec::<String>::new());
        let rules = rules.expect("valid");
        assert_eq!(
            rules.rewrite,
            Some(UrlRewrite {
                hostname: None,
                path: Some(PathRewrite::ReplaceFullPath("/v2".into())),
            })
        );
        assert_eq!(
            (rules.request_headers, rules.response_headers),
            (None, None)
        );
    }

    #[test]
    fn bad_timeout_match_and_header_fields_are_reported_with_line_and_field() {
        let seventeen: String = (0..17).map(|i| format!("x-{i}: v, ")).collect();
        let cases: Vec<(String, Vec<&str>)> = vec![
            (
                "timeout: 1.5s\n".into(),
                vec!["c.yaml:1: spec.service.timeout: expected a Gateway API duration (1 to 4 groups of up to 5 digits and a unit h, m, s or ms, such as 30s or 1m30s), found \"1.5s\""],
            ),
            (
                "timeout: 30\n".into(),
                vec!["c.yaml:1: spec.service.timeout: expected a Gateway API duration (1 to 4 groups of up to 5 digits and a unit h, m, s or ms, such as 30s or 1m30s), found \"30\""],
            ),
            (
                "timeout: 10s\nbackendTimeout: 1m\n".into(),
                vec!["c.yaml:2: spec.service.backendTimeout: expected at most spec.service.timeout (\"10s\"), found \"1m\": an HTTPRoute's backendRequest timeout cannot be longer than its request timeout"],
            ),
            (
                "match:\n  - uri: {prefix: /api}\n    sourceLabels: {app: web}\n".into(),
                vec!["c.yaml:3: spec.service.match[0].sourceLabels: HTTPRoute has no equivalent of the Istio match field \"sourceLabels\"; sluice converts uri, method, headers and queryParams"],
            ),
            (
                "match:\n  - headers:\n      x-a: {exact: a}\n      x.b: {suffix: b}\n".into(),
                vec!["c.yaml:4: spec.service.match[0].headers.x.b: expected exactly one of exact, prefix or regex with a non-empty string (e.g. {exact: insider}), found {\"suffix\":\"b\"}"],
            ),
            (
                "match:\n  - {}\n".into(),
                vec!["c.yaml:2: spec.service.match[0]: expected at least one of uri, method, headers, queryParams; an empty match would match every request"],
            ),
            (
                "headers:\n  request:\n    set:\n      x canary: a\n".into(),
                vec!["c.yaml:4: spec.service.headers.request.set.x canary: expected a header name (letters, digits and !#$%&'*+-.^_`|~, at most 256), found \"x canary\""],
            ),
            (
                format!("headers:\n  request:\n    add: {{{seventeen}}}\n"),
                vec!["c.yaml:3: spec.service.headers.request.add: expected at most 16 headers (the HTTPRoute limit), found 17"],
            ),
            (
                "headers:\n  response:\n    set: {x-a: ''}\n".into(),
                vec!["c.yaml:3: spec.service.headers.response.set.x-a: expected a value of 1 to 4096 characters, found 0"],
            ),
            (
                "headers:\n  request:\n    set: {x-a: a, x-a: b}\n".into(),
                vec!["c.yaml:3: spec.service.headers.request.set.x-a: duplicate key"],
            ),
            (
                "headers:\n  request:\n    remove: [x-a, x-a]\n".into(),
                vec!["c.yaml:3: spec.service.headers.request.remove[1]: expected each header once (the HTTPRoute list is a set), found \"x-a\" again"],
            ),
            (
                "headers:\n  request:\n    set: [x-a]\n".into(),
                vec!["c.yaml:3: spec.service.headers.request.set: expected a map of header name to value, found a list"],
            ),
            (
                "headers:\n  requset: {}\n".into(),
                vec!["c.yaml:2: spec.service.headers.requset: unknown field (did you mean \"request\"?); expected one of: request, response"],
            ),
        ];
        for (yaml, expected) in cases {
            assert_eq!(errors_v1(&yaml), expected, "{yaml}");
        }
    }

    #[test]
    fn bad_rewrite_and_cors_fields_are_reported_with_line_and_field() {
        let cases: Vec<(String, Vec<&str>)> = vec![
            (
                "rewrite:\n  authority: podinfo:8080\n  uri: v2\n".into(),
                vec![
                    "c.yaml:2: spec.service.rewrite.authority: expected a lowercase host name without port or wildcard (the URLRewrite hostname: letters, digits, '-' and '.', at most 253), found \"podinfo:8080\"",
                    "c.yaml:3: spec.service.rewrite.uri: expected a path starting with '/', at most 1024 characters, found \"v2\"",
                ],
            ),
            (
                "rewrite:\n  uri: /v2\n  type: PrefixMatch\n".into(),
                vec!["c.yaml:3: spec.service.rewrite.type: expected ReplaceFullPath (the default) or ReplacePrefixMatch, found \"PrefixMatch\""],
            ),
            (
                "rewrite:\n  type: ReplacePrefixMatch\n".into(),
                vec![
                    "c.yaml:2: spec.service.rewrite.type: has no effect without uri; set uri or remove type",
                    "c.yaml:1: spec.service.rewrite: expected uri, authority or both; an empty rewrite changes nothing",
                ],
            ),
            (
                "match:\n  - uri: {prefix: /a}\n  - uri: {prefix: /b}\nrewrite:\n  uri: /\n  type: ReplacePrefixMatch\n".into(),
                vec!["c.yaml:6: spec.service.rewrite.type: rewrite type ReplacePrefixMatch needs exactly one PathPrefix match in each HTTPRoute rule (a CEL rule of the HTTPRoute CRD); spec.service.match has 2 matches"],
            ),
            (
                "match:\n  - uri: {exact: /a}\nrewrite: {uri: /, type: ReplacePrefixMatch}\n".into(),
                vec!["c.yaml:3: spec.service.rewrite.type: rewrite type ReplacePrefixMatch needs exactly one PathPrefix match in each HTTPRoute rule (a CEL rule of the HTTPRoute CRD); spec.service.match[0].uri is Exact, not a prefix"],
            ),
            (
                "corsPolicy:\n  allowOrigins:\n    - prefix: https://\n".into(),
                vec![
                    "c.yaml:2: spec.service.corsPolicy.allowOrigins: the Gateway API CORS filter has no origin patterns, and Flagger does not map Istio's allowOrigins; list exact origins in allowOrigin instead (\"https://*.example.com\" allows subdomains)",
                ],
            ),
            (
                "corsPolicy:\n  allowOrigin: ['*', https://example.com, example.com]\n  allowMethods: [get]\n  allowHeaders: [x-a, x-a]\n".into(),
                vec![
                    "c.yaml:2: spec.service.corsPolicy.allowOrigin[2]: expected an origin such as https://example.com, https://*.example.com:8443 or \"*\", found \"example.com\"",
                    "c.yaml:2: spec.service.corsPolicy.allowOrigin: expected \"*\" alone or a list without \"*\" (an HTTPRoute CEL rule), found both",
                    "c.yaml:3: spec.service.corsPolicy.allowMethods[0]: expected one of GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH or \"*\", found \"get\"",
                    "c.yaml:4: spec.service.corsPolicy.allowHeaders[1]: expected each entry once (the HTTPRoute list is a set), found \"x-a\" again",
                ],
            ),
            (
                "corsPolicy:\n  allowOrigin: ['*']\n  maxAge: 500ms\n".into(),
                vec!["c.yaml:3: spec.service.corsPolicy.maxAge: expected whole seconds from 1s to 2147483647s (the CORS filter's maxAge is in seconds), found 500ms"],
            ),
            (
                "corsPolicy: {}\n".into(),
                vec!["c.yaml:1: spec.service.corsPolicy: expected at least allowOrigin; an empty CORS policy allows nothing"],
            ),
        ];
        for (yaml, expected) in cases {
            assert_eq!(errors_v1(&yaml), expected, "{yaml}");
        }
    }

    #[test]
    fn bad_mirrors_are_reported_with_line_and_field() {
        let sixteen: String = (0..16)
            .map(|i| format!("  - backendRef: {{name: m{i}, port: 80}}\n"))
            .collect();
        let cases: Vec<(String, Vec<&str>)> = vec![
            (
                "mirror: {backendRef: {name: a, port: 80}}\n".into(),
                vec!["c.yaml:1: spec.service.mirror: expected a list, found a mapping"],
            ),
            (
                "mirror:\n  - backendRef: {name: a, port: 80}\n    percent: 10\n".into(),
                vec!["c.yaml:3: spec.service.mirror[0].percent: Flagger's Canary has no percent or fraction for a mirror (each entry holds only backendRef), so Flagger mirrors every request; remove it, or mirror every request"],
            ),
            (
                "mirror:\n  - backendRef: {name: a, port: 80}\n    fraction: {numerator: 1}\n".into(),
                vec!["c.yaml:3: spec.service.mirror[0].fraction: Flagger's Canary has no percent or fraction for a mirror (each entry holds only backendRef), so Flagger mirrors every request; remove it, or mirror every request"],
            ),
            (
                "mirror:\n  - backendRef: {name: a}\n".into(),
                vec!["c.yaml:2: spec.service.mirror[0].backendRef.port: required field is missing: a mirror to a Service needs the Service port (a CEL rule of the HTTPRoute CRD)"],
            ),
            (
                "mirror:\n  - backendRef: {name: a, group: '', kind: Service}\n".into(),
                vec!["c.yaml:2: spec.service.mirror[0].backendRef.port: required field is missing: a mirror to a Service needs the Service port (a CEL rule of the HTTPRoute CRD)"],
            ),
            (
                "mirror:\n  - backendRef: {name: a, port: 0}\n  - backendRef: {name: b, port: 65536}\n".into(),
                vec![
                    "c.yaml:2: spec.service.mirror[0].backendRef.port: expected 1..=65535, found 0",
                    "c.yaml:3: spec.service.mirror[1].backendRef.port: expected 1..=65535, found 65536",
                ],
            ),
            (
                "mirror:\n  - backendRef: {port: 80}\n  - {}\n".into(),
                vec![
                    "c.yaml:2: spec.service.mirror[0].backendRef.name: required field is missing",
                    "c.yaml:3: spec.service.mirror[1].backendRef: required field is missing",
                ],
            ),
            (
                "mirror:\n  - backendRef:\n      name: ''\n      namespace: Tests\n      group: Example.io\n      kind: 1Backend\n      port: 80\n".into(),
                vec![
                    "c.yaml:3: spec.service.mirror[0].backendRef.name: expected a name of 1 to 253 characters, found \"\"",
                    "c.yaml:5: spec.service.mirror[0].backendRef.group: expected \"\" (the core group) or a lowercase DNS name of at most 253 characters, found \"Example.io\"",
                    "c.yaml:6: spec.service.mirror[0].backendRef.kind: expected a kind: a letter, then letters, digits and '-', not ending in '-', at most 63, found \"1Backend\"",
                    "c.yaml:4: spec.service.mirror[0].backendRef.namespace: expected a namespace: a lowercase DNS label of at most 63 characters, found \"Tests\"",
                ],
            ),
            (
                "mirror:\n  - backendRef: {name: a, port: 80, host: a.svc}\n".into(),
                vec!["c.yaml:2: spec.service.mirror[0].backendRef.host: unknown field; expected one of: group, kind, name, namespace, port"],
            ),
            (
                format!("headers: {{request: {{remove: [x-a]}}}}\nmirror:\n{sixteen}"),
                vec!["c.yaml:2: spec.service.mirror: an HTTPRoute rule holds at most 16 filters, found 17 (headers, rewrite, corsPolicy and one per mirror)"],
            ),
        ];
        for (yaml, expected) in cases {
            assert_eq!(errors_v1(&yaml), expected, "{yaml}");
        }
    }

    #[test]
    fn v1beta1_renders_mirrors_as_flaggers_v1beta1_router_does() {
        let (rules, errors) = read(
            "mirror:\n  - backendRef: {name: shadow, port: 80}\n",
            GatewayVersion::V1beta1,
        );
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(rules.map(|r| r.mirrors.len()), Some(1));
    }

    #[test]
    fn v1beta1_rejects_what_flaggers_v1beta1_router_ignores() {
        let (rules, errors) = read(
            "timeout: 30s\nbackendTimeout: 10s\ncorsPolicy: {allowOrigin: ['*']}\nrewrite: {uri: /v2}\n",
            GatewayVersion::V1beta1,
        );
        assert_eq!(rules, None);
        let message = "Flagger's gatewayapi:v1beta1 router does not apply this field (its gatewayapi:v1 router does); use provider gatewayapi:v1, which sluice renders with the same HTTPRoute schema, or remove it";
        assert_eq!(
            errors,
            [
                format!("c.yaml:1: spec.service.timeout: {message}"),
                format!("c.yaml:2: spec.service.backendTimeout: {message}"),
                format!("c.yaml:3: spec.service.corsPolicy: {message}"),
            ]
        );
    }

    fn one(value: Json) -> Result<HttpMatch, (String, String)> {
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
        assert_eq!(m.path, HttpMatch::all_requests().path);
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
