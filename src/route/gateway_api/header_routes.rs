//! An Argo Rollout's managed header routes (`setHeaderRoute` steps) on the user's HTTPRoute or
//! GRPCRoute, as the Gateway API plugin writes them (`setHTTPHeaderRoute`): for each rule that
//! sends to both the stable and the canary Service, one rule named after the managed route
//! (`<name>`, then `<name>-1`, ...) with the rule's matches, each with the step's headers
//! added (a rule without matches gets one match of the headers), the rule's filters, and one
//! backendRef, the canary Service on the port the rule gives it. The rules go after the
//! user's, in the order the steps set them; which are active at a step is the core's
//! [`ManagedStep`](crate::core::model::ManagedStep) schedule.

use serde_json::Value as Json;
use yaml_rust2::Yaml;

/// One header match of a `setHeaderRoute` step, as the plugin converts it: `exact` is an
/// `Exact` match, `prefix` a `RegularExpression` of the prefix followed by `.*`, `regex` a
/// `RegularExpression`. `argo_kind` and `argo_value` are the match as written (`exact`,
/// `prefix` or `regex`), which Argo's Istio router copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMatch {
    pub name: String,
    pub kind: &'static str,
    pub value: String,
    pub argo_kind: &'static str,
    pub argo_value: String,
}

/// The route a `setHeaderRoute` step sets: its managed route name and headers, and the index
/// among Argo's steps of the step that sets it (the key of the core's schedule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderRoute {
    pub argo_step: u32,
    pub name: String,
    pub headers: Vec<HeaderMatch>,
}

fn s(text: &str) -> Yaml {
    Yaml::String(text.to_string())
}

/// The header matches as the rule's YAML list.
fn header_list(headers: &[HeaderMatch]) -> Vec<Yaml> {
    headers
        .iter()
        .map(|h| {
            let mut m = yaml_rust2::yaml::Hash::new();
            m.insert(s("name"), s(&h.name));
            m.insert(s("type"), s(h.kind));
            m.insert(s("value"), s(&h.value));
            Yaml::Hash(m)
        })
        .collect()
}

/// The managed rules of `active` (keys of [`HeaderRoute::argo_step`] among `routes`) for the
/// rules `both` of the copy that send to both Services (each with the index of its canary
/// backendRef, as the plugin's getAllRouteRules picks them); `canary` is the canary Service.
pub fn rules(
    routes: &[HeaderRoute],
    both: &[(usize, &Yaml)],
    active: &[u32],
    canary: &str,
) -> Vec<Yaml> {
    let mut out = Vec::new();
    for key in active {
        let Some(route) = routes.iter().find(|h| h.argo_step == *key) else {
            continue;
        };
        for (idx, (canary_ref, rule)) in both.iter().enumerate() {
            let name = match idx {
                0 => route.name.clone(),
                n => format!("{}-{n}", route.name),
            };
            let headers = header_list(&route.headers);
            let matches = match &rule["matches"] {
                Yaml::Array(ms) if !ms.is_empty() => ms
                    .iter()
                    .map(|m| {
                        let mut m = match m {
                            Yaml::Hash(h) => h.clone(),
                            _ => yaml_rust2::yaml::Hash::new(),
                        };
                        let mut merged = match m.get(&s("headers")) {
                            Some(Yaml::Array(own)) => own.clone(),
                            _ => Vec::new(),
                        };
                        merged.extend(headers.iter().cloned());
                        m.insert(s("headers"), Yaml::Array(merged));
                        Yaml::Hash(m)
                    })
                    .collect(),
                _ => {
                    let mut m = yaml_rust2::yaml::Hash::new();
                    m.insert(s("headers"), Yaml::Array(headers));
                    vec![Yaml::Hash(m)]
                }
            };
            let mut backend = yaml_rust2::yaml::Hash::new();
            backend.insert(s("group"), s(""));
            backend.insert(s("kind"), s("Service"));
            backend.insert(s("name"), s(canary));
            let port = &rule["backendRefs"][*canary_ref]["port"];
            if !port.is_badvalue() && !port.is_null() {
                backend.insert(s("port"), port.clone());
            }
            let mut h = yaml_rust2::yaml::Hash::new();
            h.insert(s("name"), s(&name));
            h.insert(s("matches"), Yaml::Array(matches));
            match &rule["filters"] {
                Yaml::Array(f) if !f.is_empty() => {
                    h.insert(s("filters"), Yaml::Array(f.clone()));
                }
                _ => {}
            }
            h.insert(s("backendRefs"), Yaml::Array(vec![Yaml::Hash(backend)]));
            out.push(Yaml::Hash(h));
        }
    }
    out
}

/// Reads the managed rules of the copy back (`found`, after the user's rules): each named
/// as expected, sending only to the canary Service.
pub fn verify(found: &[Json], expected: &[Yaml], canary: &str) -> Result<(), String> {
    if found.len() != expected.len() {
        return Err(format!(
            "expected {} managed header rule(s) after the route's own, found {}",
            expected.len(),
            found.len()
        ));
    }
    for (rule, want) in found.iter().zip(expected) {
        let name = rule.get("name").and_then(Json::as_str);
        if name != want["name"].as_str() {
            return Err(format!(
                "expected a managed rule named {:?}, found {name:?}",
                want["name"].as_str()
            ));
        }
        let backends: Vec<Option<&str>> = rule
            .get("backendRefs")
            .and_then(Json::as_array)
            .map(|refs| {
                refs.iter()
                    .map(|r| r.get("name").and_then(Json::as_str))
                    .collect()
            })
            .unwrap_or_default();
        if backends != [Some(canary)] {
            return Err(format!(
                "expected the managed rule {name:?} to send only to {canary:?}, found {backends:?}"
            ));
        }
    }
    Ok(())
}
