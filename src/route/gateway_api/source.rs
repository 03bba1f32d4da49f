//! A Gateway API route the user owns (`spec.routeSource`, Flagger #1857): an HTTPRoute,
//! GRPCRoute, TCPRoute or TLSRoute, read from the repo at load time, copied to the output
//! folder with every rule, match, filter, hostname and parentRef the user wrote. Only the
//! `backendRefs` of the rules that send traffic to the canary's apex Service change: they
//! become the primary/canary pair with this step's weights, as Flagger's Gateway API router
//! names them. A rule with no such backend is copied as it is. The four kinds weight their
//! backends the same way (`backendRefs[].weight`); they differ only in the fields they have,
//! which [`SHAPES`] lists per kind and API version.
//!
//! The source file is the user's and is never written; its copy in the output is sluice's
//! (drift checks it like every output file). The copy is emitted from the user's own YAML
//! tree (key order kept), then parsed back and checked: every rule sluice did not split must
//! read back exactly as the source's.
//!
//! Refused when the canary is loaded, each at its line in the source file: a field the route
//! kind does not have at the levels sluice reads, a `metadata.namespace` other than the
//! canary's, a rule that sends to the apex Service and to other backends too (sluice would
//! have to change their share), a backend port other than the canary's `service.port`, and a
//! route that sends nothing to the apex Service.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use yaml_rust2::{Yaml, YamlEmitter};

use crate::route::gateway_api::read_hostnames;
use crate::route::gateway_api::read_parent_refs;
use crate::route::{header_comment, reparse, RenderInput, RouteError, MANAGED_BY};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};
use crate::yaml::snapshot::Object;

/// The fields of an HTTPRoute rule.
const HTTP_RULE_KEYS: &[&str] = &[
    "name",
    "matches",
    "filters",
    "backendRefs",
    "timeouts",
    "retry",
    "sessionPersistence",
];
/// The fields of a GRPCRoute rule (Gateway API v1.6 standard channel).
const GRPC_RULE_KEYS: &[&str] = &["name", "matches", "filters", "backendRefs"];
/// The fields of a TCPRoute or TLSRoute rule.
const TCP_TLS_RULE_KEYS: &[&str] = &["name", "backendRefs"];
/// The fields of an HTTPRoute or GRPCRoute `backendRef`.
const FILTERED_BACKEND_KEYS: &[&str] = &[
    "group",
    "kind",
    "name",
    "namespace",
    "port",
    "weight",
    "filters",
];
/// The fields of a TCPRoute or TLSRoute `backendRef` (no filters).
const TCP_TLS_BACKEND_KEYS: &[&str] = &["group", "kind", "name", "namespace", "port", "weight"];
/// The `spec` fields of an HTTPRoute, GRPCRoute or TLSRoute.
const SPEC_KEYS: &[&str] = &["parentRefs", "hostnames", "rules"];
/// The `spec` fields of a TCPRoute (no hostnames).
const TCP_SPEC_KEYS: &[&str] = &["parentRefs", "rules"];
/// The `metadata` fields a route in git carries (the rest are the API server's).
const METADATA_KEYS: &[&str] = &["name", "namespace", "labels", "annotations"];
const TEMPLATE: &str = "routeSource route copy";

/// Whether a route kind has `spec.hostnames`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostnames {
    Absent,
    Optional,
    Required,
}

/// The rule and backendRef fields of a route kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fields {
    Http,
    Grpc,
    TcpTls,
}

/// One route kind at one API version, as the Gateway API CRDs (v1.6) serve it: the fields
/// sluice reads and the limits it checks before writing the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceShape {
    pub kind: &'static str,
    pub api_version: &'static str,
    /// The resource's plural, for the readiness gate.
    pub plural: &'static str,
    pub hostnames: Hostnames,
    /// Which fields its rules and backendRefs have.
    pub fields: Fields,
    /// The CRD's `maxItems` for `spec.rules`.
    pub max_rules: usize,
}

const V1: &str = "gateway.networking.k8s.io/v1";
const V1BETA1: &str = "gateway.networking.k8s.io/v1beta1";
const V1ALPHA2: &str = "gateway.networking.k8s.io/v1alpha2";

const HTTP_V1: SourceShape = SourceShape {
    kind: "HTTPRoute",
    api_version: V1,
    plural: "httproutes",
    hostnames: Hostnames::Optional,
    fields: Fields::Http,
    max_rules: 16,
};
const GRPC_V1: SourceShape = SourceShape {
    kind: "GRPCRoute",
    plural: "grpcroutes",
    fields: Fields::Grpc,
    ..HTTP_V1
};
const TCP_V1ALPHA2: SourceShape = SourceShape {
    kind: "TCPRoute",
    api_version: V1ALPHA2,
    plural: "tcproutes",
    hostnames: Hostnames::Absent,
    fields: Fields::TcpTls,
    max_rules: 16,
};
const TLS_V1ALPHA2: SourceShape = SourceShape {
    kind: "TLSRoute",
    plural: "tlsroutes",
    hostnames: Hostnames::Optional,
    ..TCP_V1ALPHA2
};

/// Every route kind and API version sluice copies. TCPRoute and TLSRoute are served at
/// v1alpha2 by the experimental channel and at v1 (one rule each; a TLSRoute needs a
/// hostname) by both channels.
pub const SHAPES: &[SourceShape] = &[
    HTTP_V1,
    SourceShape {
        api_version: V1BETA1,
        ..HTTP_V1
    },
    GRPC_V1,
    TCP_V1ALPHA2,
    SourceShape {
        api_version: V1,
        max_rules: 1,
        ..TCP_V1ALPHA2
    },
    TLS_V1ALPHA2,
    SourceShape {
        api_version: V1,
        max_rules: 1,
        hostnames: Hostnames::Required,
        ..TLS_V1ALPHA2
    },
];

/// The route kinds a route source may be, for messages and for finding it in its file.
pub const KINDS: &[&str] = &["HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute"];

/// The API versions sluice copies a route of `kind` at.
fn api_versions(kind: &str) -> Vec<&'static str> {
    SHAPES
        .iter()
        .filter(|s| s.kind == kind)
        .map(|s| s.api_version)
        .collect()
}

/// The user's route, validated, ready to copy.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSource {
    /// The source file, repo-relative, and the line its route starts on.
    pub file: String,
    pub line: usize,
    /// Its kind and the API version the user wrote, which the copy keeps.
    pub shape: SourceShape,
    /// `metadata.name`: the copy has the same name (Flux does not apply the source).
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The user's `spec`, key order kept.
    pub spec: Yaml,
    /// Every rule as the source reads (for the read-back check).
    pub rules: Vec<Json>,
    /// The rules sluice splits, in order.
    pub split: Vec<SplitRule>,
    /// An Argo Rollout's `setHeaderRoute` routes, for an HTTPRoute or GRPCRoute the plugin
    /// sets header routes on (empty otherwise).
    pub header_routes: Vec<super::header_routes::HeaderRoute>,
}

/// A rule whose one backend is the apex Service.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitRule {
    /// Its index in `spec.rules`.
    pub index: usize,
    /// The apex backendRef's `namespace`, when the user wrote one (the canary's).
    pub namespace: Option<String>,
    /// The apex backendRef's own `filters`, given to both backends.
    pub filters: Option<Yaml>,
    /// An Argo Rollout's route ([`Apex::pair`]): the rule keeps its backendRefs and only the
    /// weights of these change.
    pub in_place: Option<InPlace>,
}

/// The backendRefs of one rule whose weights an Argo Rollout's route sets, by index: the
/// stable Service's take the stable weight, the canary Service's the canary weight (the
/// Gateway API plugin's `setHTTPRouteWeight`, and its GRPC, TCP and TLS twins).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InPlace {
    pub stable: Vec<usize>,
    pub canary: Vec<usize>,
}

/// What the copy must agree with: the canary's namespace, apex Service and its port.
#[derive(Debug, Clone, Copy)]
pub struct Apex<'a> {
    pub namespace: &'a str,
    pub service: &'a str,
    pub port: u16,
    /// For an Argo Rollout: its `canaryService` (and `service` is its `stableService`). The
    /// user's rules already send to both; sluice sets only their weights, as the Gateway API
    /// plugin of Argo Rollouts does, on every rule that names either.
    pub pair: Option<&'a str>,
}

/// Reads the user's route `object` (one of [`KINDS`]); problems are reported at their lines in its file.
/// `None` when any was found.
pub fn read(r: &mut Reader, object: &Object, apex: &Apex) -> Option<RouteSource> {
    let mut sr = Reader::new(object.file);
    let source = read_object(&mut sr, object, apex);
    let failed = !sr.errors.is_empty();
    r.errors.append(&mut sr.errors);
    source.filter(|_| !failed)
}

fn read_object(r: &mut Reader, object: &Object, apex: &Apex) -> Option<RouteSource> {
    let root = object.node;
    let shape = read_shape(r, object)?;
    let (labels, annotations) = read_metadata(r, root, apex)?;
    let spec = r.required(root, "", "spec")?;
    read_attachment(r, spec, &shape)?;
    let rules = r
        .required(spec, "spec", "rules")
        .and_then(|n| r.seq(n, "spec.rules").map(|items| (n, items)));
    let (rules_node, rules) = rules?;
    if rules.len() > shape.max_rules {
        r.error(
            rules_node.line,
            "spec.rules",
            format!(
                "expected at most {} rule(s) (the CRD's limit for a {} {}), found {}",
                shape.max_rules,
                shape.api_version,
                shape.kind,
                rules.len()
            ),
        );
    }
    let mut split = Vec::new();
    let mut refused = false;
    for (i, rule) in rules.iter().enumerate() {
        match read_rule(r, rule, i, apex, &shape) {
            RuleUse::Copied => {}
            RuleUse::Split(s) => split.push(s),
            RuleUse::Refused => refused = true,
        }
    }
    if refused {
        return None;
    }
    if let Some(canary) = apex.pair {
        let stable_found = split
            .iter()
            .any(|s| s.in_place.as_ref().is_some_and(|p| !p.stable.is_empty()));
        let canary_found = split
            .iter()
            .any(|s| s.in_place.as_ref().is_some_and(|p| !p.canary.is_empty()));
        if !(stable_found && canary_found) {
            r.error(
                rules_node.line,
                "spec.rules",
                format!(
                    "expected backendRefs to both the stableService {:?} and the canaryService {canary:?} in the rules of {} {} (Argo Rollouts' Gateway API plugin refuses the route too: \"backendRef was not found in httpRoute\"); found {}",
                    apex.service,
                    shape.kind,
                    object.name,
                    match (stable_found, canary_found) {
                        (true, _) => "only the stable one",
                        (_, true) => "only the canary one",
                        _ => "neither",
                    }
                ),
            );
            return None;
        }
    }
    if split.is_empty() {
        r.error(
            rules_node.line,
            "spec.rules",
            format!(
                "no rule of {} {} sends traffic to the Service {:?} (the canary's apex Service); sluice splits the rules whose backendRef is {:?} between {:?} and {:?}",
                shape.kind,
                object.name,
                apex.service,
                apex.service,
                format!("{}-primary", apex.service),
                format!("{}-canary", apex.service),
            ),
        );
        return None;
    }
    let spec_yaml = object.yaml["spec"].clone();
    // Each split rule's own backend filters, from the order-preserving tree.
    for s in &mut split {
        s.filters = backend_filters(&spec_yaml, s.index);
    }
    Some(RouteSource {
        file: object.file.to_string(),
        line: object.line,
        shape,
        name: object.name.to_string(),
        labels,
        annotations,
        spec: spec_yaml,
        rules: rules.iter().map(Node::to_json).collect(),
        split,
        header_routes: Vec::new(),
    })
}

/// The kind and API version of `object`, one of [`SHAPES`].
fn read_shape(r: &mut Reader, object: &Object) -> Option<SourceShape> {
    let known = SHAPES
        .iter()
        .find(|s| s.kind == object.kind && object.api_version == Some(s.api_version));
    if known.is_none() {
        let line = object
            .node
            .get("apiVersion")
            .map_or(object.line, |n| n.line);
        let article = if object.kind == "HTTPRoute" {
            "an"
        } else {
            "a"
        };
        r.error(
            line,
            "apiVersion",
            format!(
                "expected {} for {article} {}, found {:?}",
                api_versions(object.kind).join(" or "),
                object.kind,
                object.api_version.unwrap_or("")
            ),
        );
    }
    known.copied()
}

/// The `spec` fields the kind has, its `parentRefs` (at least one) and `hostnames`
/// (required by a v1 TLSRoute); `None` when `spec` has a field the kind does not.
fn read_attachment(r: &mut Reader, spec: &Node, shape: &SourceShape) -> Option<()> {
    let spec_keys = match shape.hostnames {
        Hostnames::Absent => TCP_SPEC_KEYS,
        Hostnames::Optional | Hostnames::Required => SPEC_KEYS,
    };
    r.map(spec, "spec", spec_keys)?;
    let parent_refs = r
        .required(spec, "spec", "parentRefs")
        .and_then(|n| read_parent_refs(r, n, "spec.parentRefs"));
    if parent_refs.as_ref().is_some_and(Vec::is_empty) {
        r.error(
            spec.line,
            "spec.parentRefs",
            "expected at least one parentRef (the Gateway), found none",
        );
    }
    match spec.get("hostnames") {
        Some(n) => {
            read_hostnames(r, n, "spec.hostnames");
        }
        None if shape.hostnames == Hostnames::Required => r.error(
            spec.line,
            "spec.hostnames",
            format!(
                "required for a {} {}: the CRD requires at least one hostname",
                shape.api_version, shape.kind
            ),
        ),
        None => {}
    }
    Some(())
}

type Metadata = (BTreeMap<String, String>, BTreeMap<String, String>);

/// `metadata`: the name (read by the snapshot), the canary's namespace, labels, annotations.
fn read_metadata(r: &mut Reader, root: &Node, apex: &Apex) -> Option<Metadata> {
    let metadata = r.required(root, "", "metadata")?;
    r.map(metadata, "metadata", METADATA_KEYS)?;
    if let Some(n) = metadata.get("namespace") {
        if n.as_str() != Some(apex.namespace) {
            r.error(
                n.line,
                "metadata.namespace",
                format!(
                    "expected the canary's namespace {:?} (the copy is written there, next to its Services), found {}",
                    apex.namespace,
                    n.as_str().map_or_else(|| n.kind().to_string(), |t| format!("{t:?}"))
                ),
            );
        }
    }
    let labels = string_map(r, metadata.get("labels"), "metadata.labels");
    let annotations = string_map(r, metadata.get("annotations"), "metadata.annotations");
    Some((labels, annotations))
}

fn string_map(r: &mut Reader, node: Option<&Node>, path: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(node) = node.filter(|n| n.value != Value::Null) else {
        return out;
    };
    let Value::Map(entries) = &node.value else {
        r.error(node.line, path, "expected a mapping of names to strings");
        return out;
    };
    for (k, v) in entries {
        if let Some(text) = r.string(v, &join(path, &k.text)) {
            out.insert(k.text.clone(), text);
        }
    }
    out
}

/// What the copy does with one rule of the source.
enum RuleUse {
    /// Copied as it is: it sends nothing to the apex Service.
    Copied,
    /// Its one backend is the apex Service: split between primary and canary.
    Split(SplitRule),
    /// It sends to the apex Service in a way sluice cannot split (reported).
    Refused,
}

/// Checks rule `i`: whether its backend is the apex Service (then it must be its only one, on
/// the canary's port).
fn read_rule(r: &mut Reader, rule: &Node, i: usize, apex: &Apex, shape: &SourceShape) -> RuleUse {
    let path = index("spec.rules", i);
    let rule_keys = match shape.fields {
        Fields::Http => HTTP_RULE_KEYS,
        Fields::Grpc => GRPC_RULE_KEYS,
        Fields::TcpTls => TCP_TLS_RULE_KEYS,
    };
    let backend_keys = match shape.fields {
        Fields::Http | Fields::Grpc => FILTERED_BACKEND_KEYS,
        Fields::TcpTls => TCP_TLS_BACKEND_KEYS,
    };
    if r.map(rule, &path, rule_keys).is_none() {
        return RuleUse::Refused;
    }
    let refs_path = join(&path, "backendRefs");
    let Some(refs_node) = rule.get("backendRefs").filter(|n| n.value != Value::Null) else {
        return RuleUse::Copied;
    };
    let Some(refs) = r.seq(refs_node, &refs_path) else {
        return RuleUse::Refused;
    };
    if let Some(canary) = apex.pair {
        return read_pair_rule(r, refs, &refs_path, backend_keys, i, apex, canary);
    }
    let mut found = None;
    for (j, backend) in refs.iter().enumerate() {
        let at = index(&refs_path, j);
        if r.map(backend, &at, backend_keys).is_none() {
            continue;
        }
        if is_apex(backend, apex) {
            found = Some((j, backend, at));
        }
    }
    let Some((_, backend, at)) = found else {
        return RuleUse::Copied;
    };
    if refs.len() > 1 {
        r.error(
            refs_node.line,
            &refs_path,
            format!(
                "this rule sends traffic to the apex Service {:?} and to {} other backend(s); sluice splits only a rule whose one backend is {:?} (changing the others' share is yours to do): move {:?} to a rule of its own",
                apex.service,
                refs.len() - 1,
                apex.service,
                apex.service
            ),
        );
        return RuleUse::Refused;
    }
    if let Some(n) = backend.get("port") {
        if let Some(port) = r.int(n, &join(&at, "port"), 1, 65535) {
            if port != i64::from(apex.port) {
                r.error(
                    n.line,
                    &join(&at, "port"),
                    format!(
                        "expected the canary's service.port {} (the port of {:?} and of the primary and canary Services sluice writes), found {port}",
                        apex.port, apex.service
                    ),
                );
                return RuleUse::Refused;
            }
        }
    }
    RuleUse::Split(SplitRule {
        index: i,
        namespace: backend
            .get("namespace")
            .and_then(Node::as_str)
            .map(str::to_string),
        filters: None,
        in_place: None,
    })
}

/// Rule `i` of an Argo Rollout's route (`refs` its backendRefs): split in place when it names
/// the stable or the canary Service, else copied. A backendRef names a Service by its `name`
/// alone, as the Gateway API plugin finds them (`setHTTPRouteWeight` and its twins compare
/// `backendRef.Name` only): its `group`, `kind` and `namespace` stay as the user wrote them
/// (Linkerd's examples write `group: "core"`).
fn read_pair_rule(
    r: &mut Reader,
    refs: &[Node],
    refs_path: &str,
    backend_keys: &[&str],
    i: usize,
    apex: &Apex,
    canary: &str,
) -> RuleUse {
    let mut in_place = InPlace::default();
    for (j, backend) in refs.iter().enumerate() {
        if r.map(backend, &index(refs_path, j), backend_keys).is_none() {
            return RuleUse::Refused;
        }
        match backend.get("name").and_then(Node::as_str) {
            Some(name) if name == apex.service => in_place.stable.push(j),
            Some(name) if name == canary => in_place.canary.push(j),
            _ => {}
        }
    }
    if in_place.stable.is_empty() && in_place.canary.is_empty() {
        return RuleUse::Copied;
    }
    RuleUse::Split(SplitRule {
        index: i,
        namespace: None,
        filters: None,
        in_place: Some(in_place),
    })
}

/// A backendRef to the apex Service: a core `Service` named so, in the canary's namespace.
fn is_apex(backend: &Node, apex: &Apex) -> bool {
    let text = |key: &str| backend.get(key).and_then(Node::as_str);
    text("name") == Some(apex.service)
        && matches!(text("kind"), None | Some("Service"))
        && matches!(text("group"), None | Some(""))
        && text("namespace").is_none_or(|ns| ns == apex.namespace)
}

/// The `filters` of the apex backendRef of rule `i`, from the order-preserving tree.
fn backend_filters(spec: &Yaml, i: usize) -> Option<Yaml> {
    let filters = &spec["rules"][i]["backendRefs"][0]["filters"];
    (!filters.is_badvalue() && !filters.is_null()).then(|| filters.clone())
}

fn s(text: &str) -> Yaml {
    Yaml::String(text.to_string())
}

/// The backendRef of `name` with `weight`, carrying the user's namespace and filters.
fn backend_ref(rule: &SplitRule, name: &str, port: u16, weight: u8) -> Yaml {
    let mut h = yaml_rust2::yaml::Hash::new();
    h.insert(s("group"), s(""));
    h.insert(s("kind"), s("Service"));
    h.insert(s("name"), s(name));
    if let Some(ns) = &rule.namespace {
        h.insert(s("namespace"), s(ns));
    }
    h.insert(s("port"), Yaml::Integer(i64::from(port)));
    h.insert(s("weight"), Yaml::Integer(i64::from(weight)));
    if let Some(filters) = &rule.filters {
        h.insert(s("filters"), filters.clone());
    }
    Yaml::Hash(h)
}

/// Sets the weights of an Argo Rollout's rule `i` in place (the user's key order kept).
fn set_weights(spec: &mut Yaml, i: usize, in_place: &InPlace, weights: crate::route::Weights) {
    let Yaml::Array(rules) = &mut spec["rules"] else {
        return;
    };
    let Some(Yaml::Hash(rule)) = rules.get_mut(i) else {
        return;
    };
    let Some(Yaml::Array(refs)) = rule.get_mut(&s("backendRefs")) else {
        return;
    };
    for (indices, weight) in [
        (&in_place.stable, weights.primary),
        (&in_place.canary, weights.canary),
    ] {
        for j in indices {
            if let Some(Yaml::Hash(backend)) = refs.get_mut(*j) {
                match backend.get_mut(&s("weight")) {
                    Some(slot) => *slot = Yaml::Integer(i64::from(weight)),
                    None => {
                        backend.insert(s("weight"), Yaml::Integer(i64::from(weight)));
                    }
                }
            }
        }
    }
}

/// The copy of the user's route with this step's weights on the split rules.
pub fn render(source: &RouteSource, input: &RenderInput) -> Result<String, RouteError> {
    let (canary, backends, weights) = (input.canary, input.backends, input.weights);
    let port = canary.service.port;
    let mut spec = source.spec.clone();
    for rule in &source.split {
        if let Some(in_place) = &rule.in_place {
            set_weights(&mut spec, rule.index, in_place, weights);
            continue;
        }
        let refs = Yaml::Array(vec![
            backend_ref(rule, backends.primary, port, weights.primary),
            backend_ref(rule, backends.canary, port, weights.canary),
        ]);
        if let Yaml::Array(rules) = &mut spec["rules"] {
            if let Some(Yaml::Hash(h)) = rules.get_mut(rule.index) {
                // In place, so the rule keeps the user's key order.
                if let Some(slot) = h.get_mut(&s("backendRefs")) {
                    *slot = refs;
                }
            }
        }
    }
    let managed = managed_rules(source, input, &spec);
    if let (false, Yaml::Array(rules)) = (managed.is_empty(), &mut spec["rules"]) {
        rules.extend(managed.iter().cloned());
    }
    let strings =
        |m: &BTreeMap<String, String>| Yaml::Hash(m.iter().map(|(k, v)| (s(k), s(v))).collect());
    let mut labels = source.labels.clone();
    labels.insert("app.kubernetes.io/managed-by".into(), MANAGED_BY.into());
    let mut metadata = yaml_rust2::yaml::Hash::new();
    metadata.insert(s("name"), s(&source.name));
    metadata.insert(s("namespace"), s(canary.id.namespace.as_str()));
    metadata.insert(s("labels"), strings(&labels));
    if !source.annotations.is_empty() {
        metadata.insert(s("annotations"), strings(&source.annotations));
    }
    let mut doc = yaml_rust2::yaml::Hash::new();
    doc.insert(s("apiVersion"), s(source.shape.api_version));
    doc.insert(s("kind"), s(source.shape.kind));
    doc.insert(s("metadata"), Yaml::Hash(metadata));
    doc.insert(s("spec"), spec);
    let mut text = String::new();
    let mut emitter = YamlEmitter::new(&mut text);
    emitter.multiline_strings(true);
    emitter.dump(&Yaml::Hash(doc)).map_err(|e| {
        RouteError::output(canary, TEMPLATE, format!("the YAML emitter failed: {e}"))
    })?;
    let text = format!(
        "{}\n# Copied from {} (spec.routeSource): edit that file, not this one.\n{text}\n",
        header_comment(canary),
        source.file
    );
    let parsed = reparse(canary, TEMPLATE, &text)?;
    verify(&parsed, source, input, &managed)
        .map_err(|message| RouteError::output(canary, TEMPLATE, message))?;
    Ok(text)
}

/// The managed header rules active at this step (an Argo Rollout's `setHeaderRoute`), in
/// order; empty outside an analysis and for every other canary.
fn managed_rules(source: &RouteSource, input: &RenderInput, spec: &Yaml) -> Vec<Yaml> {
    let (Some(step), crate::core::model::Target::Rollout { managed_routes, .. }) =
        (input.state.managed_step, &input.canary.target)
    else {
        return Vec::new();
    };
    let active = crate::core::model::managed_routes_at(managed_routes, step);
    match (active.is_empty(), &spec["rules"]) {
        (false, Yaml::Array(rules)) => {
            let both: Vec<(usize, &Yaml)> = source
                .split
                .iter()
                .filter_map(|r| {
                    let p = r.in_place.as_ref()?;
                    let rule = rules.get(r.index)?;
                    let canary_ref = *p.canary.first()?;
                    (!p.stable.is_empty()).then_some((canary_ref, rule))
                })
                .collect();
            super::header_routes::rules(&source.header_routes, &both, active, input.backends.canary)
        }
        _ => Vec::new(),
    }
}

/// An Argo Rollout's rule `i` reads back as the user's but for the weights of its stable and
/// canary backendRefs, which are the ones asked for.
fn verify_in_place(
    i: usize,
    copy: &Json,
    original: &Json,
    in_place: &InPlace,
    input: &RenderInput,
) -> Result<(), String> {
    let without_weights = |rule: &Json| {
        let mut rule = rule.clone();
        if let Some(refs) = rule.get_mut("backendRefs").and_then(Json::as_array_mut) {
            for j in in_place.stable.iter().chain(&in_place.canary) {
                if let Some(map) = refs.get_mut(*j).and_then(Json::as_object_mut) {
                    map.remove("weight");
                }
            }
        }
        rule
    };
    if without_weights(copy) != without_weights(original) {
        return Err(format!(
            "expected spec.rules[{i}] to be copied unchanged but for its stable and canary weights"
        ));
    }
    for (indices, weight) in [
        (&in_place.stable, input.weights.primary),
        (&in_place.canary, input.weights.canary),
    ] {
        for j in indices {
            let found = copy
                .pointer(&format!("/backendRefs/{j}/weight"))
                .and_then(Json::as_u64);
            if found != Some(u64::from(weight)) {
                return Err(format!(
                    "expected spec.rules[{i}].backendRefs[{j}].weight {weight}, found {found:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Reads the copy back: the object's identity, every rule sluice did not split exactly as the
/// source's, and the split rules as the source's but for their backends, which are the
/// primary and canary with the weights asked for.
fn verify(
    doc: &Json,
    source: &RouteSource,
    input: &RenderInput,
    managed: &[Yaml],
) -> Result<(), String> {
    crate::route::expect_object(
        doc,
        source.shape.api_version,
        source.shape.kind,
        &source.name,
        input.canary.id.namespace.as_str(),
    )?;
    let rules = doc
        .pointer("/spec/rules")
        .and_then(Json::as_array)
        .ok_or("expected spec.rules to be a list")?;
    if rules.len() != source.rules.len() + managed.len() {
        return Err(format!(
            "expected {} rules, found {}",
            source.rules.len() + managed.len(),
            rules.len()
        ));
    }
    let (rules, added) = rules.split_at(source.rules.len());
    super::header_routes::verify(added, managed, input.backends.canary)?;
    for (i, (copy, original)) in rules.iter().zip(&source.rules).enumerate() {
        let strip = |rule: &Json| {
            let mut rule = rule.clone();
            if let Some(map) = rule.as_object_mut() {
                map.remove("backendRefs");
            }
            rule
        };
        if !source.split.iter().any(|s| s.index == i) {
            if copy != original {
                return Err(format!("expected spec.rules[{i}] to be copied unchanged"));
            }
            continue;
        }
        if let Some(in_place) = source
            .split
            .iter()
            .find(|s| s.index == i)
            .and_then(|s| s.in_place.as_ref())
        {
            verify_in_place(i, copy, original, in_place, input)?;
            continue;
        }
        if strip(copy) != strip(original) {
            return Err(format!(
                "expected spec.rules[{i}] to be copied unchanged but for its backendRefs"
            ));
        }
        let found: Vec<(Option<&str>, Option<u64>)> = copy
            .get("backendRefs")
            .and_then(Json::as_array)
            .map(|refs| {
                refs.iter()
                    .map(|r| {
                        (
                            r.get("name").and_then(Json::as_str),
                            r.get("weight").and_then(Json::as_u64),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let expected = [
            (
                Some(input.backends.primary),
                Some(u64::from(input.weights.primary)),
            ),
            (
                Some(input.backends.canary),
                Some(u64::from(input.weights.canary)),
            ),
        ];
        if found != expected {
            return Err(format!(
                "expected spec.rules[{i}].backendRefs {expected:?}, found {found:?}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::snapshot::{File, Snapshot};

    /// Linkerd's example HTTPRoute of the Gateway API plugin: its backendRefs say
    /// `group: "core"`, which the plugin never looks at (it finds backends by name).
    const LINKERD: &str = "apiVersion: gateway.networking.k8s.io/v1beta1
kind: HTTPRoute
metadata:
  name: argo-rollouts-http-route
  namespace: default
spec:
  parentRefs:
    - group: \"core\"
      name: argo-rollouts-service
      kind: Service
      port: 80
  rules:
    - backendRefs:
        - name: argo-rollouts-stable-service
          group: \"core\"
          port: 80
          kind: Service
        - name: argo-rollouts-canary-service
          group: \"core\"
          port: 80
          kind: Service
    - backendRefs:
        - name: other
          port: 80
";

    fn read_linkerd(stable: &str, canary: &str) -> (Option<RouteSource>, Vec<String>) {
        let mut snapshot = Snapshot::default();
        snapshot.put(
            File::from_read("route.yaml".into(), Ok(LINKERD.into())),
            |a, b| a < b,
        );
        let object = snapshot
            .find("HTTPRoute", "argo-rollouts-http-route")
            .next()
            .expect("the route is an object");
        let apex = Apex {
            namespace: "default",
            service: stable,
            port: 80,
            pair: Some(canary),
        };
        let mut r = Reader::new("route.yaml");
        let source = read(&mut r, &object, &apex);
        (source, r.errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn an_argo_rollouts_backend_ref_is_found_by_name_whatever_its_group() {
        let (source, errors) = read_linkerd(
            "argo-rollouts-stable-service",
            "argo-rollouts-canary-service",
        );
        assert_eq!(errors, Vec::<String>::new());
        let source = source.expect("the route reads");
        let in_place = InPlace {
            stable: vec![0],
            canary: vec![1],
        };
        assert_eq!(
            source.split,
            [SplitRule {
                index: 0,
                namespace: None,
                filters: None,
                in_place: Some(in_place.clone()),
            }]
        );
        // Only the weights change: the user's group, kind and port are copied as written.
        let mut spec = source.spec.clone();
        set_weights(
            &mut spec,
            0,
            &in_place,
            crate::route::Weights {
                primary: 70,
                canary: 30,
            },
        );
        let backend = |j: usize| &spec["rules"][0]["backendRefs"][j];
        for (j, name, weight) in [
            (0, "argo-rollouts-stable-service", 70),
            (1, "argo-rollouts-canary-service", 30),
        ] {
            assert_eq!(backend(j)["name"].as_str(), Some(name));
            assert_eq!(backend(j)["group"].as_str(), Some("core"));
            assert_eq!(backend(j)["kind"].as_str(), Some("Service"));
            assert_eq!(backend(j)["port"].as_i64(), Some(80));
            assert_eq!(backend(j)["weight"].as_i64(), Some(weight));
        }
        assert!(spec["rules"][1]["backendRefs"][0]["weight"].is_badvalue());
    }

    #[test]
    fn a_route_without_the_canary_service_is_refused_as_the_plugin_refuses_it() {
        let (source, errors) = read_linkerd("argo-rollouts-stable-service", "elsewhere");
        assert!(source.is_none());
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("found only the stable one"),
            "{}",
            errors[0]
        );
    }
}
