//! ingress-nginx (`provider: nginx`), as Flagger's `IngressRouter` writes the canary Ingress:
//!
//! - every path whose backend is the apex Service `<svc>` sends to `<svc>-canary` instead;
//! - the user's annotations are kept except `nginx.ingress.kubernetes.io/canary*` and
//!   `kubectl.kubernetes.io/last-applied-configuration`; then `canary: "true"` always (Flagger
//!   keeps the canary Ingress enabled, at weight 0 between rollouts);
//! - canary and blue/green: `canary-weight` is the canary's weight;
//! - A/B: while the canary gets traffic, `canary-by-header` (+ `-header-value` for `exact`,
//!   `-header-pattern` for `regex`) and `canary-by-cookie` from `analysis.match`, with
//!   `canary-weight` left at `"0"` so only matching requests reach the canary; at weight 0 the
//!   header annotations are dropped, as Flagger's `makeAnnotations` does.
//!
//! Flagger's mapping of `analysis.match` keeps one header and one cookie: it walks every match
//! and keeps the last header it sees (in Go's random map order) and the `exact` value of a
//! `cookie` header, which it writes as `canary-by-cookie`: the *name* of the cookie, so a
//! request is routed to the canary when that cookie's value is `always` (ingress-nginx's rule).
//! What that mapping would drop or pick at random is refused here: a second header or cookie,
//! a `prefix` header match, a `regex` cookie, and any condition besides `headers`.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use yaml_rust2::Yaml;

use crate::route::istio::api::{HttpMatchRequest, StringMatch};
use crate::route::{Backends, JudgePrimary, QuerySet, RenderInput, Weights};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};

use super::{backend_service, paths_mut, rendered_backends, set_backend_service, Config};

/// Flagger's default `-ingress-annotations-prefix` (and Argo's default `annotationPrefix`).
pub(super) const PREFIX: &str = "nginx.ingress.kubernetes.io";

fn key(suffix: &str) -> String {
    format!("{PREFIX}/{suffix}")
}

/// `key` under the prefix the canary is written with: a Rollout's `annotationPrefix`, or
/// Flagger's.
fn key_of(config: &Config, suffix: &str) -> String {
    match &config.argo {
        Some(argo) => format!("{}/{suffix}", argo.prefix),
        None => key(suffix),
    }
}

/// An A/B canary's request match, as Flagger maps it onto ingress-nginx annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMatch {
    /// `canary-by-header` and how its value is matched.
    pub header: Option<(String, HeaderValue)>,
    /// `canary-by-cookie`: the cookie's name.
    pub cookie: Option<String>,
}

/// How `canary-by-header` compares the header's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    /// `canary-by-header-value`.
    Exact(String),
    /// `canary-by-header-pattern`.
    Regex(String),
}

/// The user's annotations the canary Ingress keeps (Flagger's `makeAnnotations` filter).
pub fn own_annotations(annotations: BTreeMap<String, String>) -> BTreeMap<String, String> {
    let canary = key("canary");
    annotations
        .into_iter()
        .filter(|(k, _)| {
            !k.contains(&canary) && !k.contains("kubectl.kubernetes.io/last-applied-configuration")
        })
        .collect()
}

/// Checks `matches` (typed from `node`) against what Flagger's mapping keeps.
pub fn read_matches(
    r: &mut Reader,
    node: &Node,
    matches: &[HttpMatchRequest],
) -> Option<HeaderMatch> {
    let path = "spec.analysis.match";
    let items: &[Node] = match &node.value {
        Value::Seq(items) => items,
        _ => &[],
    };
    let before = r.errors.len();
    let mut out = HeaderMatch {
        header: None,
        cookie: None,
    };
    let mut header_at: Option<String> = None;
    let mut cookie_at: Option<String> = None;
    for (i, (m, item)) in matches.iter().zip(items).enumerate() {
        let at = index(path, i);
        for field in m.fields() {
            if !["headers", "name"].contains(&field) {
                let line = item.key_line(field).unwrap_or(item.line);
                r.error(line, &join(&at, field), "Flagger's nginx router routes A/B requests on one header and one cookie only (canary-by-header, canary-by-cookie) and drops this condition; remove it, or use a provider that matches it (gatewayapi:v1, istio)");
            }
        }
        let headers = m.headers.clone().unwrap_or_default();
        if headers.is_empty() {
            r.error(item.line, &join(&at, "headers"), "expected a header or a cookie to match; an empty match would send every request to the canary");
        }
        let header_nodes = item.get("headers");
        for (name, value) in headers {
            let field = join(&join(&at, "headers"), &name);
            let line = header_nodes
                .and_then(|h| h.key_line(&name))
                .unwrap_or(item.line);
            if name == "cookie" {
                match value {
                    StringMatch::Exact(cookie) => match &cookie_at {
                        Some(first) => r.error(line, &field, format!("ingress-nginx routes on one cookie (canary-by-cookie), and {first} already names one; Flagger would keep either at random, so keep one")),
                        None => {
                            out.cookie = Some(cookie);
                            cookie_at = Some(field);
                        }
                    },
                    StringMatch::Prefix(_) | StringMatch::Regex(_) => r.error(line, &field, "Flagger's nginx router writes the exact value of a cookie match as canary-by-cookie (the name of a cookie whose value \"always\" selects the canary) and drops a prefix or regex; use exact: <cookie name>"),
                }
                continue;
            }
            let value = match value {
                StringMatch::Exact(v) => HeaderValue::Exact(v),
                StringMatch::Regex(v) => HeaderValue::Regex(v),
                StringMatch::Prefix(_) => {
                    r.error(line, &field, "ingress-nginx matches a header's value exactly (canary-by-header-value) or by regex (canary-by-header-pattern); Flagger drops a prefix, which would route only requests whose header is \"always\"; use exact or regex");
                    continue;
                }
            };
            match &header_at {
                Some(first) => r.error(line, &field, format!("ingress-nginx routes on one header (canary-by-header), and {first} already names one; Flagger would keep either at random, so keep one")),
                None => {
                    out.header = Some((name, value));
                    header_at = Some(field);
                }
            }
        }
    }
    (r.errors.len() == before).then_some(out)
}

/// The canary Ingress' spec and annotations for `weights`.
pub fn canary(config: &Config, input: &RenderInput) -> (Yaml, BTreeMap<String, String>) {
    let (backends, weights) = (input.backends, input.weights);
    let apex = input.canary.service.name.as_str();
    let mut spec = config.spec.clone();
    for paths in paths_mut(&mut spec) {
        for path in paths.iter_mut() {
            if backend_service(path) == Some(apex) {
                set_backend_service(path, backends.canary);
            }
        }
    }
    let mut annotations = config.annotations.clone();
    if let Some(argo) = &config.argo {
        annotations.extend(argo.annotations.clone());
    }
    annotations.insert(key_of(config, "canary"), "true".into());
    match &config.ab {
        Some(ab) if weights.canary > 0 => {
            // Flagger's A/B never sets a weight: the one its Reconcile wrote stays.
            annotations.insert(key("canary-weight"), "0".into());
            if let Some(cookie) = &ab.cookie {
                annotations.insert(key("canary-by-cookie"), cookie.clone());
            }
            if let Some((header, value)) = &ab.header {
                annotations.insert(key("canary-by-header"), header.clone());
                let (suffix, text) = match value {
                    HeaderValue::Exact(v) => ("canary-by-header-value", v),
                    HeaderValue::Regex(v) => ("canary-by-header-pattern", v),
                };
                annotations.insert(key(suffix), text.clone());
            }
        }
        _ => {
            annotations.insert(key_of(config, "canary-weight"), weights.canary.to_string());
        }
    }
    (spec, annotations)
}

/// Reads the rendered Ingress back: the canary flag, the weight, and the canary backend.
pub fn verify(
    doc: &Json,
    config: &Config,
    backends: &Backends,
    weights: Weights,
) -> Result<(), String> {
    let annotation = |suffix: &str| {
        doc.pointer("/metadata/annotations")
            .and_then(|a| a.get(key_of(config, suffix)))
            .and_then(Json::as_str)
    };
    if annotation("canary") != Some("true") {
        return Err(format!(
            "expected annotation {} = \"true\", found {:?}",
            key_of(config, "canary"),
            annotation("canary")
        ));
    }
    let ab_active = config.ab.is_some() && weights.canary > 0;
    let want = if ab_active { 0 } else { weights.canary };
    if annotation("canary-weight") != Some(want.to_string().as_str()) {
        return Err(format!(
            "expected annotation {} = \"{want}\", found {:?}",
            key_of(config, "canary-weight"),
            annotation("canary-weight")
        ));
    }
    let by_request =
        annotation("canary-by-header").is_some() || annotation("canary-by-cookie").is_some();
    // A Rollout's own annotations may route by request (`additionalIngressAnnotations`).
    if config.argo.is_none() && by_request != ab_active {
        return Err(format!(
            "expected A/B annotations only while an A/B canary gets traffic, found them {}",
            if by_request { "set" } else { "missing" }
        ));
    }
    if !rendered_backends(doc).iter().any(|b| b == backends.canary) {
        return Err(format!(
            "expected a path to the canary Service {:?}",
            backends.canary
        ));
    }
    Ok(())
}

// ingress-nginx has no latency histogram per canary in Flagger's query: it uses the mean
// (sum / count) in seconds, times 1000.
/// Flagger's observer queries for nginx.
pub(crate) const METRICS: QuerySet = QuerySet {
    name: "nginx",
    success_rate: r#"
sum(rate(nginx_ingress_controller_requests{namespace="{{ namespace }}", ingress="{{ ingress }}", canary!="", status!~"5.*"}[{{ interval }}]))
/
sum(rate(nginx_ingress_controller_requests{namespace="{{ namespace }}", ingress="{{ ingress }}", canary!=""}[{{ interval }}]))
* 100"#,
    duration: r#"
sum(rate(nginx_ingress_controller_response_duration_seconds_sum{namespace="{{ namespace }}", ingress="{{ ingress }}", canary!=""}[{{ interval }}]))
/
sum(rate(nginx_ingress_controller_response_duration_seconds_count{namespace="{{ namespace }}", ingress="{{ ingress }}", canary!=""}[{{ interval }}]))
* 1000"#,
    encode_names: None,
    judge_primary: JudgePrimary::Replace(&[("canary!=\"\"", "canary=\"\"")]),
};
