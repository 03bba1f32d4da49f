//! Argo Rollouts' Traefik and APISIX routers, into git: the user's own route object (a
//! `TraefikService`, an `ApisixRoute`) copied to the canary's output with only the weights of
//! its `stableService` and `canaryService` entries changed, as Argo's routers change them in
//! the cluster:
//!
//! - Traefik (`rollout/trafficrouting/traefik/traefik.go`, `SetWeight`): in the
//!   `weightedTraefikServiceName` object's `spec.weighted.services`, the entry named
//!   `canaryService` gets `weight: <w>` and the one named `stableService` `weight: 100 - w`;
//! - APISIX (`rollout/trafficrouting/apisix/apisix.go`, `SetWeight`): in the `route.name`
//!   object's `spec.http`, each rule named in `route.rules` (default: the rule named like the
//!   route) gets the same two weights on its backends whose `serviceName` is the canaryService
//!   and the stableService.
//!
//! What Argo's routers fail on at run time (no `spec.weighted.services`, a rule or backend not
//! found) is refused when reading, at the line of the user's object, with Argo's message.
//! Everything else of the object is kept as written (key order too); its `status` is dropped
//! and its namespace set to the Rollout's. The source object is the user's and is never
//! written; like a `workloadRef` Deployment, it belongs outside the folders the GitOps engine
//! applies, since the output holds its copy.

use yaml_rust2::Yaml;

use crate::route::{emit_yaml, header_comment, reparse, RenderInput, RouteError};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};
use crate::yaml::snapshot::Object;

/// A user's route object and how Argo's router weighs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Copied {
    /// Where it is (`file:line`), for messages.
    pub source: String,
    /// The object as written.
    pub doc: Yaml,
    pub weigh: Weigh,
}

/// Which entries get the weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Weigh {
    /// `spec.weighted.services`, by `name`.
    Traefik,
    /// The backends of these `spec.http` rules, by `serviceName`.
    Apisix { rules: Vec<String> },
}

/// What messages call the copy (there is no template file).
const TEMPLATE: &str = "copy of the Rollout's route";

/// The Traefik service API groups Argo reads (its default, and Traefik 3's).
pub const TRAEFIK_APIS: [&str; 2] = ["traefik.io/v1alpha1", "traefik.containo.us/v1alpha1"];
/// The ApisixRoute API Argo reads by default.
pub const APISIX_API: &str = "apisix.apache.org/v2";

/// Reads the TraefikService `object` Argo's `weightedTraefikServiceName` names.
pub fn read_traefik(r: &mut Reader, object: &Object, services: [&str; 2]) -> Option<Copied> {
    let mut own = Reader::new(object.file);
    check_api(&mut own, object, &TRAEFIK_APIS);
    let list = object
        .node
        .get("spec")
        .and_then(|s| s.get("weighted"))
        .and_then(|w| w.get("services"));
    match list {
        None => own.error(
            object.line,
            "spec.weighted.services",
            "spec.weighted.services was not found in traefik service manifest (Argo's message: its Traefik router sets the weights there); list the stable and canary Services under spec.weighted.services",
        ),
        Some(list) => {
            for (service, role) in services.iter().zip(["stable", "canary"]) {
                if find(&mut own, list, "spec.weighted.services", "name", service).is_none() {
                    own.error(list.line, "spec.weighted.services", format!("traefik {role} service was not found (Argo's message): expected an entry with name: {service}"));
                }
            }
        }
    }
    finish(r, own, object, Weigh::Traefik)
}

/// Reads the ApisixRoute `object` Argo's `apisix.route` names, with its `rules` (default: the
/// route's name).
pub fn read_apisix(
    r: &mut Reader,
    object: &Object,
    rules: Vec<String>,
    services: [&str; 2],
) -> Option<Copied> {
    let mut own = Reader::new(object.file);
    check_api(&mut own, object, &[APISIX_API]);
    let rules = if rules.is_empty() {
        vec![object.name.to_string()]
    } else {
        rules
    };
    let http = object.node.get("spec").and_then(|s| s.get("http"));
    match http {
        None => own.error(
            object.line,
            "spec.http",
            "spec.http was not found in Apisix Route manifest (Argo's message: its APISIX router sets the weights on its rules' backends)",
        ),
        Some(http) => {
            for rule in &rules {
                let Some((at, item)) = find(&mut own, http, "spec.http", "name", rule) else {
                    own.error(http.line, "spec.http", format!("Apisix http route rule {rule} not found (Argo's message): name the rule in trafficRouting.apisix.route.rules, or name a rule like the route"));
                    continue;
                };
                let Some(backends) = item.get("backends") else {
                    own.error(item.line, &at, "Apisix http route backends not found (Argo's message)");
                    continue;
                };
                let bp = join(&at, "backends");
                for service in services {
                    if find(&mut own, backends, &bp, "serviceName", service).is_none() {
                        own.error(backends.line, &bp, format!("apisix route {service} backend was not found (Argo's message): add a backend with serviceName: {service}"));
                    }
                }
            }
        }
    }
    finish(r, own, object, Weigh::Apisix { rules })
}

/// Reports `object`'s `apiVersion` unless it is one of `apis`.
pub(crate) fn check_api(r: &mut Reader, object: &Object, apis: &[&str]) {
    if !object.api_version.is_some_and(|v| apis.contains(&v)) {
        let line = object
            .node
            .get("apiVersion")
            .map_or(object.line, |n| n.line);
        r.error(
            line,
            "apiVersion",
            format!(
                "expected {} (what Argo's router reads), found {:?}",
                apis.join(" or "),
                object.api_version.unwrap_or_default()
            ),
        );
    }
}

/// The item of the list `list` (at `path`) whose `key` is `value`: its path and node.
fn find<'n>(
    r: &mut Reader,
    list: &'n Node,
    path: &str,
    key: &str,
    value: &str,
) -> Option<(String, &'n Node)> {
    let Value::Seq(items) = &list.value else {
        r.error(
            list.line,
            path,
            format!("expected a list, found {}", list.kind()),
        );
        return None;
    };
    items
        .iter()
        .enumerate()
        .find(|(_, item)| item.get(key).and_then(Node::as_str) == Some(value))
        .map(|(i, item)| (index(path, i), item))
}

fn finish(r: &mut Reader, mut own: Reader, object: &Object, weigh: Weigh) -> Option<Copied> {
    let failed = !own.errors.is_empty();
    r.errors.append(&mut own.errors);
    (!failed).then(|| Copied {
        source: format!("{}:{}", object.file, object.line),
        doc: object.yaml.clone(),
        weigh,
    })
}

fn key(k: &str) -> Yaml {
    Yaml::String(k.to_string())
}

/// Sets `weight` on each item of `list` whose `name_key` is one of the two `(name, weight)`.
fn set_weights(list: &mut Yaml, name_key: &str, weights: [(&str, u8); 2]) {
    let Yaml::Array(items) = list else {
        return;
    };
    for item in items {
        let Some(want) = weights
            .iter()
            .find(|(name, _)| item[name_key].as_str() == Some(name))
            .map(|(_, w)| *w)
        else {
            continue;
        };
        if let Yaml::Hash(h) = item {
            // In place when present, so the user's key order stays.
            match h.get_mut(&key("weight")) {
                Some(slot) => *slot = Yaml::Integer(i64::from(want)),
                None => {
                    h.insert(key("weight"), Yaml::Integer(i64::from(want)));
                }
            }
        }
    }
}

/// The mapping at `path` under `doc`, if every step is one.
fn at_mut<'y>(doc: &'y mut Yaml, path: &[&str]) -> Option<&'y mut Yaml> {
    path.iter().try_fold(doc, |node, step| match node {
        Yaml::Hash(h) => h.get_mut(&key(step)),
        _ => None,
    })
}

/// The copy at `input`'s weights: YAML text starting with sluice's header comment.
pub fn render(copied: &Copied, input: &RenderInput) -> Result<String, RouteError> {
    let (canary, backends, weights) = (input.canary, input.backends, input.weights);
    let pairs = [
        (backends.primary, weights.primary),
        (backends.canary, weights.canary),
    ];
    let mut doc = copied.doc.clone();
    if let Yaml::Hash(h) = &mut doc {
        h.remove(&key("status"));
    }
    if let Some(Yaml::Hash(metadata)) = at_mut(&mut doc, &["metadata"]) {
        metadata.insert(key("namespace"), key(canary.id.namespace.as_str()));
    }
    match &copied.weigh {
        Weigh::Traefik => {
            if let Some(list) = at_mut(&mut doc, &["spec", "weighted", "services"]) {
                set_weights(list, "name", pairs);
            }
        }
        Weigh::Apisix { rules } => {
            if let Some(Yaml::Array(http)) = at_mut(&mut doc, &["spec", "http"]) {
                for rule in http
                    .iter_mut()
                    .filter(|rule| rules.iter().any(|n| rule["name"].as_str() == Some(n)))
                {
                    if let Some(list) = at_mut(rule, &["backends"]) {
                        set_weights(list, "serviceName", pairs);
                    }
                }
            }
        }
    }
    let text = format!(
        "{}\n{}\n",
        header_comment(canary),
        emit_yaml(canary, TEMPLATE, &doc)?
    );
    let parsed = reparse(canary, TEMPLATE, &text)?;
    verify(copied, &parsed, pairs).map_err(|m| RouteError::output(canary, TEMPLATE, m))?;
    Ok(text)
}

/// Reads the copy back: each weighed entry has its weight.
fn verify(copied: &Copied, doc: &serde_json::Value, pairs: [(&str, u8); 2]) -> Result<(), String> {
    let lists: Vec<(&serde_json::Value, &str)> = match &copied.weigh {
        Weigh::Traefik => vec![(&doc["spec"]["weighted"]["services"], "name")],
        Weigh::Apisix { rules } => doc["spec"]["http"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|rule| rules.iter().any(|n| rule["name"].as_str() == Some(n)))
            .map(|rule| (&rule["backends"], "serviceName"))
            .collect(),
    };
    if lists.is_empty() {
        return Err(format!("expected the weighed entries of {}", copied.source));
    }
    for (list, name_key) in lists {
        for (name, weight) in pairs {
            let found = list
                .as_array()
                .into_iter()
                .flatten()
                .find(|item| item[name_key].as_str() == Some(name))
                .and_then(|item| item["weight"].as_u64());
            if found != Some(u64::from(weight)) {
                return Err(format!(
                    "expected {name} at weight {weight}, found {found:?}"
                ));
            }
        }
    }
    Ok(())
}
