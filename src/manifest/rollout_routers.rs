//! A Rollout's `trafficRouting.nginx`, `traefik` and `apisix`, read field by field as Argo
//! Rollouts' types (`NginxTrafficRouting`, `TraefikTrafficRouting`, `ApisixTrafficRouting`)
//! have them, into the route sluice writes:
//!
//! - `nginx`: the canary Ingress `<rollout>-<stableIngress>-canary` (`route::ingress::argo`),
//!   from `stableIngress` (or a `stableIngresses` list of one), `annotationPrefix`,
//!   `additionalIngressAnnotations` and `canaryIngressAnnotations`;
//! - `traefik`: the user's TraefikService `weightedTraefikServiceName`, copied with weights
//!   (`route::copied`);
//! - `apisix`: the user's ApisixRoute `route.name`, its `route.rules` copied with weights.
//!
//! The objects are looked up in the repo, in the Rollout's namespace.

use std::collections::BTreeMap;

use crate::route::gateway_api::Apex;
use crate::route::ingress::{self, ArgoNginx};
use crate::route::{apisix, copied, traefik, Route};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};
use crate::yaml::snapshot::Object;

use super::rollout_lookup::Lookup;

/// The routers read here, by their `trafficRouting` key.
pub const ROUTERS: [&str; 3] = ["nginx", "traefik", "apisix"];

/// `trafficRouting.<key>` (one of [`ROUTERS`]) at `p`.
pub(super) fn read(
    r: &mut Reader,
    routing: &Node,
    key: &str,
    rollout: &str,
    apex: &Apex,
    lookup: Lookup,
) -> Option<Route> {
    let node = routing.get(key)?;
    let p = join("spec.strategy.canary.trafficRouting", key);
    let services = [apex.service, apex.pair?];
    match key {
        "nginx" => read_nginx(r, node, &p, routing, rollout, services, lookup),
        "traefik" => {
            r.map(node, &p, &["weightedTraefikServiceName"])?;
            let (line, name) = named(r, node, &p, "weightedTraefikServiceName")?;
            let object = one(r, lookup, "TraefikService", &name, line, &p)?;
            copied::read_traefik(r, &object, services)
                .map(|c| Route::Traefik(traefik::Config::Rollout(Box::new(c))))
        }
        _ => {
            r.map(node, &p, &["route"])?;
            let route = r.required(node, &p, "route")?;
            let rp = join(&p, "route");
            r.map(route, &rp, &["name", "rules"])?;
            let (line, name) = named(r, route, &rp, "name")?;
            let rules = match route.get("rules") {
                Some(n) => strings(r, n, &join(&rp, "rules"))?,
                None => Vec::new(),
            };
            let object = one(r, lookup, apisix::KIND, &name, line, &p)?;
            copied::read_apisix(r, &object, rules, services)
                .map(|c| Route::Apisix(apisix::Config::Rollout(Box::new(c))))
        }
    }
}

fn read_nginx(
    r: &mut Reader,
    node: &Node,
    p: &str,
    routing: &Node,
    rollout: &str,
    services: [&str; 2],
    lookup: Lookup,
) -> Option<Route> {
    r.map(
        node,
        p,
        &[
            "annotationPrefix",
            "stableIngress",
            "stableIngresses",
            "additionalIngressAnnotations",
            "canaryIngressAnnotations",
        ],
    )?;
    let mut names = Vec::new();
    if node.get("stableIngress").is_some() {
        names.push(named(r, node, p, "stableIngress")?);
    }
    if let Some(list) = node.get("stableIngresses") {
        let lp = join(p, "stableIngresses");
        for (i, name) in strings(r, list, &lp)?.into_iter().enumerate() {
            let line = match &list.value {
                Value::Seq(items) => items.get(i).map_or(list.line, |n| n.line),
                _ => list.line,
            };
            names.push((line, name));
        }
    }
    let (line, name) = match names.as_slice() {
        [one] => one.clone(),
        [] => {
            r.error(node.line, &join(p, "stableIngress"), "required field is missing: name the Ingress whose rules send to the stableService (Argo refuses a Rollout without one too)");
            return None;
        }
        [_, (line, _), ..] => {
            r.error(*line, p, format!("this build writes one canary Ingress per Rollout; found {} stable Ingresses (sluice's route file holds one). Keep one, or keep this Rollout on Argo Rollouts for now", names.len()));
            return None;
        }
    };
    let prefix = match node.get("annotationPrefix") {
        Some(n) => r.string(n, &join(p, "annotationPrefix"))?,
        None => "nginx.ingress.kubernetes.io".to_string(),
    };
    let additional = match node.get("additionalIngressAnnotations") {
        Some(n) => string_map(r, n, &join(p, "additionalIngressAnnotations"))?,
        None => BTreeMap::new(),
    };
    let canary_annotations = match node.get("canaryIngressAnnotations") {
        Some(n) => string_map(r, n, &join(p, "canaryIngressAnnotations"))?,
        None => BTreeMap::new(),
    };
    // Read (and checked to be 100) by the caller.
    let max_traffic_weight = routing
        .get("maxTrafficWeight")
        .and_then(Node::as_str)
        .and_then(|t| t.parse::<u32>().ok());
    let object = one(r, lookup, "Ingress", &name, line, p)?;
    ingress::read_rollout(
        r,
        &object,
        &ArgoNginx {
            rollout,
            stable_service: services[0],
            ref_line: line,
            prefix: &prefix,
            additional: &additional,
            canary_annotations: &canary_annotations,
            max_traffic_weight,
        },
    )
    .map(Route::Ingress)
}

/// The string at `key` of `node` (required), with its line.
fn named(r: &mut Reader, node: &Node, p: &str, key: &str) -> Option<(usize, String)> {
    let n = r.required(node, p, key)?;
    r.string(n, &join(p, key)).map(|s| (n.line, s))
}

/// A list of strings.
fn strings(r: &mut Reader, node: &Node, p: &str) -> Option<Vec<String>> {
    let items = r.seq(node, p)?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        out.push(r.string(item, &index(p, i))?);
    }
    Some(out)
}

/// A mapping of strings (annotations).
fn string_map(r: &mut Reader, node: &Node, p: &str) -> Option<BTreeMap<String, String>> {
    let Value::Map(entries) = &node.value else {
        r.error(
            node.line,
            p,
            format!("expected a mapping, found {}", node.kind()),
        );
        return None;
    };
    let mut out = BTreeMap::new();
    for (key, value) in entries {
        out.insert(key.text.clone(), r.string(value, &join(p, &key.text))?);
    }
    Some(out)
}

/// The one `kind` named `name` in the Rollout's namespace.
fn one<'a>(
    r: &mut Reader,
    lookup: Lookup<'a>,
    kind: &str,
    name: &str,
    line: usize,
    p: &str,
) -> Option<Object<'a>> {
    let found = lookup.find(kind, name);
    match found.as_slice() {
        [one] => Some(*one),
        [] => {
            r.error(line, p, format!("{kind} {}/{name} not found among the repo's YAML files (sluice reads it there, as Argo reads it from the cluster)", lookup.namespace));
            None
        }
        [_, second, ..] => {
            r.error(
                line,
                p,
                format!(
                    "{kind} {}/{name} is defined twice (also at {}:{})",
                    lookup.namespace, second.file, second.line
                ),
            );
            None
        }
    }
}
