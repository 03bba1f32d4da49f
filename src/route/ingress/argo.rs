//! An Argo Rollout's `trafficRouting.nginx`, as Argo Rollouts' nginx router
//! (`rollout/trafficrouting/nginx/nginx.go`, `buildCanaryIngress`) builds the canary Ingress,
//! but committed to git instead of created in the cluster:
//!
//! - named `<rollout>-<stableIngress>-canary` (`utils/ingress.GetCanaryIngressName`: the part
//!   before `-canary` cut to fit 253 characters);
//! - its spec holds the stable Ingress' `tls` and `ingressClassName`, and each rule that has a
//!   path to the `stableService`, with those paths sent to the `canaryService` (other rules are
//!   left out; an Ingress with no such rule is refused, as Argo refuses it);
//! - its annotations are the stable Ingress' `kubernetes.io/ingress.class` only (no other
//!   annotation or label of the user's is copied), then `additionalIngressAnnotations` (under
//!   `annotationPrefix/` unless the key already starts with it), then
//!   `canaryIngressAnnotations` as written, then `<prefix>/canary: "true"` and
//!   `<prefix>/canary-weight`, and `<prefix>/canary-weight-total` when the Rollout sets
//!   `maxTrafficWeight`.
//!
//! The user's stable Ingress is never written: it is theirs, and their GitOps engine applies it.

use std::collections::BTreeMap;

use yaml_rust2::Yaml;

use crate::yaml::reader::Reader;
use crate::yaml::snapshot::Object;

use super::{backend_service, check_rules, Config, Controller, INGRESS_API};

/// Argo's suffix of the canary Ingress' name.
const SUFFIX: &str = "-canary";

/// The canary Ingress of a Rollout: its name and the annotations Argo adds to the stable
/// Ingress' class annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgoCanary {
    /// `<rollout>-<stableIngress>-canary`.
    pub name: String,
    /// `annotationPrefix` (default `nginx.ingress.kubernetes.io`).
    pub prefix: String,
    /// `additionalIngressAnnotations` (prefixed), `canaryIngressAnnotations` and
    /// `canary-weight-total`.
    pub annotations: BTreeMap<String, String>,
}

/// What a Rollout's `trafficRouting.nginx` says about one stable Ingress.
#[derive(Debug, Clone, Copy)]
pub struct ArgoNginx<'a> {
    pub rollout: &'a str,
    pub stable_service: &'a str,
    /// The line of the `stableIngress` (or `stableIngresses` item) naming the Ingress.
    pub ref_line: usize,
    pub prefix: &'a str,
    pub additional: &'a BTreeMap<String, String>,
    pub canary_annotations: &'a BTreeMap<String, String>,
    /// `trafficRouting.maxTrafficWeight`, when set.
    pub max_traffic_weight: Option<u32>,
}

/// Argo's `GetCanaryIngressName`.
fn canary_name(rollout: &str, ingress: &str) -> String {
    let mut prefix = format!("{rollout}-{ingress}");
    let limit = 253 - SUFFIX.len();
    if prefix.len() > limit {
        let mut cut = limit;
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        prefix.truncate(cut);
    }
    format!("{prefix}{SUFFIX}")
}

/// Reads the stable Ingress `object` of a Rollout into the canary Ingress' config; errors in
/// the Ingress name its own file and line.
pub fn read_rollout(r: &mut Reader, object: &Object, argo: &ArgoNginx) -> Option<Config> {
    let mut own = Reader::new(object.file);
    let name = object.name.to_string();
    crate::route::copied::check_api(&mut own, object, &[INGRESS_API]);
    check_rules(&mut own, object.node);
    let failed = !own.errors.is_empty();
    r.errors.append(&mut own.errors);
    if failed {
        return None;
    }
    let stable = &object.yaml["spec"];
    let key = |k: &str| Yaml::String(k.to_string());
    let mut spec = yaml_rust2::yaml::Hash::new();
    if let Yaml::Array(tls) = &stable["tls"] {
        spec.insert(key("tls"), Yaml::Array(tls.clone()));
    }
    if let Some(class) = stable["ingressClassName"].as_str() {
        spec.insert(key("ingressClassName"), key(class));
    }
    let mut rules = Vec::new();
    if let Yaml::Array(items) = &stable["rules"] {
        for rule in items {
            let has_stable = match &rule["http"]["paths"] {
                Yaml::Array(paths) => paths
                    .iter()
                    .any(|p| backend_service(p) == Some(argo.stable_service)),
                _ => false,
            };
            if has_stable {
                rules.push(rule.clone());
            }
        }
    }
    if rules.is_empty() {
        r.error(
            argo.ref_line,
            "spec.strategy.canary.trafficRouting.nginx",
            format!(
                "ingress `{name}` has no rules using service {} backend (Argo refuses it too: its canary Ingress copies the rules that send to the stableService); add a path with backend.service.name: {} to {}:{}",
                argo.stable_service, argo.stable_service, object.file, object.line
            ),
        );
        return None;
    }
    spec.insert(key("rules"), Yaml::Array(rules));
    let mut annotations = BTreeMap::new();
    let class = object
        .node
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get("kubernetes.io/ingress.class"))
        .and_then(|n| n.as_str());
    if let Some(class) = class {
        annotations.insert("kubernetes.io/ingress.class".to_string(), class.to_string());
    }
    let mut added = BTreeMap::new();
    for (k, v) in argo.additional {
        let k = if k.starts_with(argo.prefix) {
            k.clone()
        } else {
            format!("{}/{k}", argo.prefix)
        };
        added.insert(k, v.clone());
    }
    added.extend(argo.canary_annotations.clone());
    if let Some(total) = argo.max_traffic_weight {
        added.insert(
            format!("{}/canary-weight-total", argo.prefix),
            total.to_string(),
        );
    }
    Some(Config {
        controller: Controller::Nginx,
        ref_line: argo.ref_line,
        source: format!("{}:{}", object.file, object.line),
        labels: BTreeMap::new(),
        annotations,
        spec: Yaml::Hash(spec),
        ab: None,
        argo: Some(ArgoCanary {
            name: canary_name(argo.rollout, &name),
            prefix: argo.prefix.to_string(),
            annotations: added,
        }),
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::canary_name;

    #[test]
    fn canary_ingress_is_named_as_argo_names_it() {
        assert_eq!(canary_name("demo", "web"), "demo-web-canary");
        let long = "a".repeat(300);
        let name = canary_name("r", &long);
        assert_eq!(name.len(), 253);
        assert!(name.starts_with("r-aaa") && name.ends_with("a-canary"));
    }
}
