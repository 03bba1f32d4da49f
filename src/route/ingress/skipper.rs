//! Skipper (`provider: skipper`), as Flagger's `SkipperRouter` writes the canary Ingress:
//!
//! - every path whose backend is the apex Service `<svc>` sends to `<svc>-primary` instead,
//!   and a copy of it sending to `<svc>-canary` is appended to the rule's paths (so the
//!   canary Ingress never routes to the apex);
//! - `zalando.org/backend-weights` is `{"<svc>-canary":<w>,"<svc>-primary":<100-w>}` (JSON,
//!   keys sorted, as Go marshals a map);
//! - `zalando.org/skipper-predicate` starts with `Weight(100)`, so the canary Ingress' routes
//!   win over the user's Ingress for the same paths, or with `False()` at canary weight 0,
//!   which switches them off; the user's own predicates follow, joined by ` && `;
//! - every other label and annotation of the user's Ingress is kept.
//!
//! Flagger's Skipper router has no A/B testing (`TODO: A/B testing` in its `SetRoutes`):
//! `analysis.match` is refused.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use yaml_rust2::Yaml;

use crate::route::{Backends, JudgePrimary, QuerySet, RenderInput, Weights};

use super::{backend_service, paths_mut, rendered_backends, set_backend_service, Config};

const WEIGHTS: &str = "zalando.org/backend-weights";
const PREDICATE: &str = "zalando.org/skipper-predicate";
const ROUTE_WEIGHT: &str = "Weight(100)";
const ROUTE_DISABLE: &str = "False()";

/// Flagger's `insertPredicate`: `insert` first, then the user's predicates without empty
/// ones and without the two Flagger manages.
fn insert_predicate(raw: &str, insert: &str) -> String {
    let mut predicates = vec![insert];
    predicates.extend(
        raw.split("&&")
            .map(str::trim)
            .filter(|p| !p.is_empty() && *p != ROUTE_WEIGHT && *p != ROUTE_DISABLE),
    );
    predicates.join(" && ")
}

/// The backend weights annotation: a JSON object with sorted keys.
fn backend_weights(backends: &Backends, weights: Weights) -> String {
    let map: BTreeMap<&str, u8> = [
        (backends.primary, weights.primary),
        (backends.canary, weights.canary),
    ]
    .into_iter()
    .collect();
    serde_json::to_string(&map).unwrap_or_default()
}

/// The canary Ingress' spec and annotations for `weights`.
pub fn canary(config: &Config, input: &RenderInput) -> (Yaml, BTreeMap<String, String>) {
    let (backends, weights) = (input.backends, input.weights);
    let apex = input.canary.service.name.as_str();
    let mut spec = config.spec.clone();
    for paths in paths_mut(&mut spec) {
        let mut copies = Vec::new();
        for path in paths.iter_mut() {
            if backend_service(path) == Some(apex) {
                set_backend_service(path, backends.primary);
                let mut copy = path.clone();
                set_backend_service(&mut copy, backends.canary);
                copies.push(copy);
            }
        }
        paths.extend(copies);
    }
    let mut annotations = config.annotations.clone();
    annotations.insert(WEIGHTS.into(), backend_weights(backends, weights));
    let user = annotations.get(PREDICATE).cloned().unwrap_or_default();
    let first = if weights.canary == 0 {
        ROUTE_DISABLE
    } else {
        ROUTE_WEIGHT
    };
    annotations.insert(PREDICATE.into(), insert_predicate(&user, first));
    (spec, annotations)
}

/// Reads the rendered Ingress back: the weights, the predicate and both backends.
pub fn verify(doc: &Json, backends: &Backends, weights: Weights) -> Result<(), String> {
    let annotation = |k: &str| {
        doc.pointer("/metadata/annotations")
            .and_then(|a| a.get(k))
            .and_then(Json::as_str)
    };
    let found: BTreeMap<String, u64> = annotation(WEIGHTS)
        .and_then(|t| serde_json::from_str(t).ok())
        .ok_or_else(|| format!("expected annotation {WEIGHTS} to be a JSON object of weights"))?;
    let want: BTreeMap<String, u64> = [
        (backends.primary.to_string(), u64::from(weights.primary)),
        (backends.canary.to_string(), u64::from(weights.canary)),
    ]
    .into_iter()
    .collect();
    if found != want || found.values().sum::<u64>() != 100 {
        return Err(format!("expected {WEIGHTS} {want:?}, found {found:?}"));
    }
    let first = if weights.canary == 0 {
        ROUTE_DISABLE
    } else {
        ROUTE_WEIGHT
    };
    if annotation(PREDICATE).is_none_or(|p| p.split(" && ").next() != Some(first)) {
        return Err(format!(
            "expected {PREDICATE} to start with {first}, found {:?}",
            annotation(PREDICATE)
        ));
    }
    let sent = rendered_backends(doc);
    for name in [backends.primary, backends.canary] {
        if !sent.iter().any(|b| b == name) {
            return Err(format!(
                "expected a path to the Service {name:?}, found {sent:?}"
            ));
        }
    }
    Ok(())
}

// Skipper names a route of an Ingress `kube_<namespace>__<ingress>__<host>__<path>__<service>`
// (`kubeew_` for east-west), every non-word character of the names turned into `_`
// (`skipper_model`); Flagger's observer matches the canary Ingress' routes to the canary
// Service. Duration is the mean, as for nginx.
/// Flagger's observer queries for skipper.
pub(crate) const METRICS: QuerySet = QuerySet {
    name: "skipper",
    success_rate: r#"
sum(rate(skipper_response_duration_seconds_bucket{route=~"kube(ew)?_{{ namespace }}__{{ ingress }}_canary__.*__{{ service }}_canary(_[0-9]+)?", code!~"5..", le="+Inf"}[{{ interval }}]))
/
sum(rate(skipper_response_duration_seconds_bucket{route=~"kube(ew)?_{{ namespace }}__{{ ingress }}_canary__.*__{{ service }}_canary(_[0-9]+)?", le="+Inf"}[{{ interval }}]))
* 100"#,
    duration: r#"
sum(rate(skipper_serve_route_duration_seconds_sum{route=~"kube(ew)?_{{ namespace }}__{{ ingress }}_canary__.*__{{ service }}_canary(_[0-9]+)?"}[{{ interval }}]))
/
sum(rate(skipper_serve_route_duration_seconds_count{route=~"kube(ew)?_{{ namespace }}__{{ ingress }}_canary__.*__{{ service }}_canary(_[0-9]+)?"}[{{ interval }}]))
* 1000"#,
    encode_names: Some(route_id_name),
    judge_primary: JudgePrimary::Unselectable,
};

/// Flagger's `encodeModelForSkipper`: a name as Skipper writes it into route ids, every
/// character other than a letter, digit or `_` replaced by `_`.
fn route_id_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicates_put_flaggers_first_and_keep_the_users() {
        assert_eq!(insert_predicate("", ROUTE_WEIGHT), "Weight(100)");
        assert_eq!(
            insert_predicate("Weight(100) && Host(/^a$/)", ROUTE_DISABLE),
            "False() && Host(/^a$/)"
        );
        assert_eq!(
            insert_predicate(" False() &&  Method(\"GET\") && ", ROUTE_WEIGHT),
            "Weight(100) && Method(\"GET\")"
        );
    }

    #[test]
    fn backend_weights_are_json_with_sorted_keys() {
        let backends = Backends {
            primary: "podinfo-primary",
            canary: "podinfo-canary",
        };
        assert_eq!(
            backend_weights(
                &backends,
                Weights {
                    primary: 80,
                    canary: 20
                }
            ),
            r#"{"podinfo-canary":20,"podinfo-primary":80}"#
        );
    }
}
