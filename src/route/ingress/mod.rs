//! Ingress routers (`provider: nginx`, `provider: skipper`): the canary Ingress
//! `<ingress>-canary`, a copy of the user's Ingress named by `spec.ingressRef`, as Flagger's
//! `pkg/router/ingress.go` and `pkg/router/skipper.go` create and update it.
//!
//! The user's Ingress is read from the repo snapshot at load time (kind `Ingress`, API
//! `networking.k8s.io/v1`, the canary's namespace) and never edited. sluice does not write it
//! to the output folder either: Flagger never touches it (the user applies it, and it keeps
//! sending traffic to the apex Service), so the output holds only the canary Ingress. An
//! `ingressRef` that names no Ingress, or an Ingress with no path to the apex Service, is a
//! `validate` error at the reference's line. As in Flagger, the Ingress is found by name:
//! `ingressRef.apiVersion` chooses nothing, and one that differs from the Ingress' own is a
//! warning; an Ingress of another API than `networking.k8s.io/v1` is an error at its line.
//!
//! - This file: reading `ingressRef` and the referenced Ingress, the fields refused, and the
//!   copy of the Ingress both controllers start from.
//! - `nginx.rs`: ingress-nginx canary annotations (weight, A/B headers and cookie).
//! - `skipper.rs`: Skipper's backend weights and route predicates.
//!
//! The copy is emitted from the user's own YAML tree (key order kept), not from a template:
//! the object is the user's, sluice changes only its name, namespace, backends and
//! annotations. It is parsed back and checked like every rendered route.
//!
//! Flagger also adds `kustomize.toolkit.fluxcd.io/reconcile: disabled` (and Helm's drift
//! detection twin) to the objects it creates, so Flux leaves them to Flagger. sluice does not:
//! Flux must apply every weight sluice commits. For the same reason the copy drops the user's
//! Ingress's `*toolkit.fluxcd.io*` labels and annotations (an `ssa: IfNotPresent` there).
//!
//! Flagger's ingress routers ignore the route fields of `spec.service` (hosts, gateways,
//! match, retries ...), which belong to meshes; so does sluice, as for `kubernetes`. They
//! ignore the analysis' `mirror`, `mirrorWeight` and `sessionAffinity` too: sluice refuses
//! those, since dropping them would route other requests than asked.

mod argo;
mod nginx;
mod skipper;

use std::collections::BTreeMap;

use yaml_rust2::Yaml;

use crate::core::model::Strategy;
use crate::route::istio::api::{self, HttpMatchRequest};
use crate::route::ANALYSIS_MATCH_ONLY;
use crate::route::{
    emit_yaml, header_comment, reparse, AbInput, BuiltinMetrics, Canary, FieldUse, FlaggerFields,
    FlaggerInput, Route, RouteError, Router, MANAGED_BY,
};
use crate::route::{NativeInput, RenderInput};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{join, warn_ref_api_version, Reader};
use crate::yaml::snapshot::Object;

pub use argo::{read_rollout, ArgoCanary, ArgoNginx};
pub use nginx::HeaderMatch;

/// The Ingress routers.
pub struct Ingress;

/// Which ingress controller the canary Ingress is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    /// ingress-nginx: `nginx.ingress.kubernetes.io/canary*` annotations.
    Nginx,
    /// Skipper: `zalando.org/backend-weights` and `zalando.org/skipper-predicate`.
    Skipper,
}

/// The only Ingress API Flagger reads.
pub const INGRESS_API: &str = "networking.k8s.io/v1";

/// A validated Ingress route: the user's Ingress as read, ready to copy.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub controller: Controller,
    /// `spec.ingressRef.name`: the user's Ingress (the canary Ingress is `<name>-canary`).
    pub name: String,
    /// The line of `spec.ingressRef.name` in the canary file, for errors found later.
    pub ref_line: usize,
    /// Where the user's Ingress is: `file:line`, for messages.
    pub source: String,
    /// Its labels, copied as Flagger copies them.
    pub labels: BTreeMap<String, String>,
    /// Its annotations, minus the ones the controller's canary owns.
    pub annotations: BTreeMap<String, String>,
    /// Its `spec`, key order kept.
    pub spec: Yaml,
    /// An A/B canary's request match (nginx only; `None` for other strategies).
    pub ab: Option<HeaderMatch>,
    /// For an Argo Rollout's `trafficRouting.nginx`: the canary Ingress as Argo names and
    /// annotates it (`argo.rs`); `None` for a Flagger canary.
    pub argo: Option<ArgoCanary>,
}

impl Config {
    /// The canary Ingress' name: Argo's `<rollout>-<ingress>-canary` for a Rollout,
    /// Flagger's `<ingress>-canary` otherwise.
    pub fn canary_name(&self) -> String {
        match &self.argo {
            Some(argo) => argo.name.clone(),
            None => format!("{}-canary", self.name),
        }
    }
}

/// The user's Ingress name when `route` is an Ingress route: Flagger's `{{ ingress }}` in
/// metric queries.
pub fn ingress_name(route: &Route) -> Option<&str> {
    match route {
        Route::Ingress(config) => Some(config.name.as_str()),
        _ => None,
    }
}

impl Router for Ingress {
    type Variant = Controller;
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "canary Ingress (nginx, skipper)";
    const PROVIDERS: &'static [(&'static str, Controller)] = &[
        ("nginx", Controller::Nginx),
        ("skipper", Controller::Skipper),
    ];
    const ALIASES: &'static [(&'static str, Controller)] = &[];
    const NATIVE_KIND: &'static str = "Ingress";
    const NATIVE_FIELDS: &'static [&'static str] = &[];
    const REFERENCES: &'static [&'static str] = &["ingressRef"];

    fn near_miss(text: &str) -> Option<String> {
        Self::PROVIDERS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text) || text == "ingress-nginx")
            .map(|(name, _)| format!("expected {name:?}, found {text:?}"))
    }

    fn read_flagger(
        r: &mut Reader,
        controller: Controller,
        input: &FlaggerInput,
    ) -> Option<Config> {
        let before = r.errors.len();
        reject_unsupported(r, input);
        let (object, ref_line, name) = resolve(r, input)?;
        let config = read_ingress(r, controller, &object, ref_line, name);
        (r.errors.len() == before).then_some(config).flatten()
    }

    /// An Ingress route copies the user's Ingress, which only a Flagger canary names
    /// (`spec.ingressRef`); a native route has no reference to read.
    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        r.error(native.api_line, "spec.route", "an Ingress route copies the user's Ingress, which a native canary cannot name yet; write a flagger.app/v1beta1 Canary with provider nginx or skipper and spec.ingressRef");
        None
    }

    fn read_ab_matches(config: &mut Config, r: &mut Reader, input: &AbInput) {
        match config.controller {
            Controller::Nginx => {
                let path = "spec.analysis.match";
                let Some(matches) = api::read::<Vec<HttpMatchRequest>>(r, input.matches, path)
                else {
                    return;
                };
                config.ab = nginx::read_matches(r, input.matches, &matches);
            }
            // Refused by check_canary, where the strategy is known.
            Controller::Skipper => {}
        }
    }

    fn check_canary(config: &Config, r: &mut Reader, canary: &Canary, spec: &Node) {
        let apex = canary.service.name.as_str();
        // A Rollout's canary Ingress keeps only the rules that name its stableService, and
        // `argo::read_rollout` refused an Ingress with none.
        if config.argo.is_none() && !has_backend(&config.spec, apex) {
            r.error(config.ref_line, "spec.ingressRef.name", format!("Ingress {} ({}) has no path whose backend is the apex Service {apex:?}; Flagger sends the canary's share through a copy of that path, so add one (backend.service.name: {apex})", config.name, config.source));
        }
        if config.controller == Controller::Skipper {
            if let Strategy::AB { .. } = canary.analysis.strategy {
                let line = spec
                    .get("analysis")
                    .and_then(|a| a.key_line("match"))
                    .unwrap_or(spec.line);
                r.error(line, "spec.analysis.match", "Flagger's Skipper router does not route on request headers (A/B testing); remove analysis.match for a blue/green rollout, or use provider nginx");
            }
        }
    }

    // mirror and sessionAffinity, the only sources of route state, are refused on read.
    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        let (canary, backends, weights) = (input.canary, input.backends, input.weights);
        let (spec, annotations) = match config.controller {
            Controller::Nginx => nginx::canary(config, input),
            Controller::Skipper => skipper::canary(config, input),
        };
        let text = emit(config, canary, spec, &annotations)?;
        let doc = reparse(canary, TEMPLATE, &text)?;
        let wanted = match config.controller {
            Controller::Nginx => nginx::verify(&doc, config, backends, weights),
            Controller::Skipper => skipper::verify(&doc, backends, weights),
        };
        check_metadata(&doc, config, canary)
            .and(wanted)
            .map_err(|message| RouteError::output(canary, TEMPLATE, message))?;
        Ok(Some(text))
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "nginx/skipper",
        table_order: 2,
        spec_rows: &[("spec.ingressRef", FieldUse::Renders)],
        analysis_rows: ANALYSIS_MATCH_ONLY,
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        match provider {
            "nginx" => Some(BuiltinMetrics::Queries(nginx::METRICS)),
            "skipper" => Some(BuiltinMetrics::Queries(skipper::METRICS)),
            _ => None,
        }
    }
}

/// What messages call the emitter (there is no template file: see the module docs).
const TEMPLATE: &str = "canary Ingress copy";

/// Flagger fields its ingress routers ignore and sluice refuses rather than drop.
fn reject_unsupported(r: &mut Reader, input: &FlaggerInput) {
    let Some(analysis) = input.analysis else {
        return;
    };
    for key in ["mirror", "mirrorWeight", "sessionAffinity"] {
        // `mirror: false` asks for nothing Flagger would drop.
        if analysis.get(key).and_then(Node::as_str) == Some("false") {
            continue;
        }
        if let Some(line) = analysis.key_line(key) {
            r.error(line, &join("spec.analysis", key), "Flagger's ingress routers (nginx, skipper) ignore this field, so the rollout would not do what it says; remove it, or use a provider that supports it (gatewayapi:v1)");
        }
    }
}

/// Finds the Ingress `spec.ingressRef` names: `(object, line of its name, name)`.
fn resolve<'s>(r: &mut Reader, input: &FlaggerInput<'s>) -> Option<(Object<'s>, usize, String)> {
    let p = "spec.ingressRef";
    let Some(node) = input.spec.get("ingressRef") else {
        r.error(input.spec.line, p, "required field is missing: Flagger's ingress routers copy the Ingress it names (apiVersion: networking.k8s.io/v1, kind: Ingress, name)");
        return None;
    };
    r.map(node, p, &["apiVersion", "kind", "name"])?;
    // Required by Flagger's CRD, but not read: the Ingress found by name decides (below).
    let api = r
        .required(node, p, "apiVersion")
        .and_then(|n| r.string(n, &join(p, "apiVersion")));
    let kind = r
        .required(node, p, "kind")
        .and_then(|n| r.string(n, &join(p, "kind")).map(|s| (n.line, s)));
    let name = r
        .required(node, p, "name")
        .and_then(|n| r.string(n, &join(p, "name")).map(|s| (n.line, s)));
    let (_, (kind_line, kind), (name_line, name)) = (api?, kind?, name?);
    let mut ok = true;
    if kind != "Ingress" {
        r.error(
            kind_line,
            &join(p, "kind"),
            format!("expected Ingress, found {kind:?}"),
        );
        ok = false;
    }
    let namespace = input.namespace?;
    let found: Vec<Object<'s>> = input
        .snapshot
        .find("Ingress", &name)
        .filter(|o| o.namespace.unwrap_or(namespace) == namespace)
        .collect();
    match found.as_slice() {
        [] => {
            r.error(name_line, &join(p, "name"), format!("no Ingress {namespace}/{name} in the repo: expected a networking.k8s.io/v1 Ingress named {name:?} in namespace {namespace} (or with no namespace) in a YAML file"));
            None
        }
        [one] => {
            // Flagger reads the Ingress by name through networking.k8s.io/v1, whatever the
            // reference says (fluxcd/flagger pkg/router/ingress.go); the object decides.
            if let Some(api) = node.get("apiVersion") {
                warn_ref_api_version(
                    r,
                    api,
                    &join(p, "apiVersion"),
                    one,
                    &format!("Flagger reads the Ingress by name through {INGRESS_API}"),
                );
            }
            ok.then_some((*one, name_line, name))
        }
        [a, b, ..] => {
            r.error(
                name_line,
                &join(p, "name"),
                format!(
                    "Ingress {namespace}/{name} is defined twice: {}:{} and {}:{}",
                    a.file, a.line, b.file, b.line
                ),
            );
            None
        }
    }
}

/// Reads the user's Ingress; errors inside it name its own file and line.
fn read_ingress(
    r: &mut Reader,
    controller: Controller,
    object: &Object,
    ref_line: usize,
    name: String,
) -> Option<Config> {
    let mut own = Reader::new(object.file);
    let source = format!("{}:{}", object.file, object.line);
    if object.api_version != Some(INGRESS_API) {
        let line = object
            .node
            .get("apiVersion")
            .map_or(object.line, |n| n.line);
        own.error(line, "apiVersion", format!("expected {INGRESS_API} (the Ingress canary {name} references through spec.ingressRef; Flagger reads no other Ingress API), found {:?}", object.api_version.unwrap_or_default()));
    }
    let metadata = object.node.get("metadata");
    let labels = metadata
        .and_then(|m| m.get("labels"))
        .map(|n| string_map(&mut own, n, "metadata.labels"))
        .unwrap_or_default();
    let annotations = metadata
        .and_then(|m| m.get("annotations"))
        .map(|n| string_map(&mut own, n, "metadata.annotations"))
        .unwrap_or_default();
    check_rules(&mut own, object.node);
    let spec = match &object.yaml["spec"] {
        Yaml::Hash(_) => object.yaml["spec"].clone(),
        _ => {
            own.error(
                object.line,
                "spec",
                "an Ingress needs a spec with rules: Flagger copies them into the canary Ingress",
            );
            Yaml::Null
        }
    };
    let failed = !own.errors.is_empty();
    r.errors.append(&mut own.errors);
    if failed {
        return None;
    }
    let annotations = match controller {
        Controller::Nginx => nginx::own_annotations(annotations),
        Controller::Skipper => annotations,
    };
    // Flux's keys stay off the copy, as Flagger leaves them off (`makeAnnotations`): the
    // user's `kustomize.toolkit.fluxcd.io/ssa: IfNotPresent` would keep Flux from applying any
    // weight sluice commits into it.
    let flux = |k: &String| k.contains(crate::yaml::TOOLKIT_MARKER);
    let labels: BTreeMap<String, String> = labels.into_iter().filter(|(k, _)| !flux(k)).collect();
    let annotations: BTreeMap<String, String> =
        annotations.into_iter().filter(|(k, _)| !flux(k)).collect();
    Some(Config {
        controller,
        name,
        ref_line,
        source,
        labels,
        annotations,
        spec,
        ab: None,
        argo: None,
    })
}

/// A mapping of strings (labels, annotations): Kubernetes rejects any other value.
fn string_map(r: &mut Reader, node: &Node, path: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    match &node.value {
        Value::Null => {}
        Value::Map(entries) => {
            for (key, value) in entries {
                match &value.value {
                    Value::Scalar { text, quoted } if *quoted || !is_typed_plain(text) => {
                        out.insert(key.text.clone(), text.clone());
                    }
                    Value::Scalar { text, .. } => r.error(value.line, &join(path, &key.text), format!("expected a string, found {text}, which YAML reads as a number, boolean or null; quote it")),
                    _ => r.error(value.line, &join(path, &key.text), format!("expected a string, found {}", value.kind())),
                }
            }
        }
        _ => r.error(
            node.line,
            path,
            format!("expected a mapping, found {}", node.kind()),
        ),
    }
    out
}

/// A plain scalar YAML reads as a number, boolean or null, which Kubernetes refuses as a
/// label or annotation value.
fn is_typed_plain(text: &str) -> bool {
    !matches!(
        Node {
            line: 0,
            value: Value::Scalar {
                text: text.to_string(),
                quoted: false
            }
        }
        .to_json(),
        serde_json::Value::String(_)
    )
}

/// Every rule of the Ingress must have `http.paths`: Flagger walks them unguarded (a rule
/// without `http` crashes its router).
fn check_rules(r: &mut Reader, ingress: &Node) {
    let Some(rules) = ingress.get("spec").and_then(|s| s.get("rules")) else {
        return;
    };
    let Value::Seq(items) = &rules.value else {
        r.error(
            rules.line,
            "spec.rules",
            format!("expected a list, found {}", rules.kind()),
        );
        return;
    };
    for (i, rule) in items.iter().enumerate() {
        let paths = rule.get("http").and_then(|h| h.get("paths"));
        if !matches!(paths.map(|p| &p.value), Some(Value::Seq(_))) {
            r.error(rule.line, &format!("spec.rules[{i}].http.paths"), "required by Flagger's ingress routers, which copy each rule's paths into the canary Ingress; add the paths this host serves");
        }
    }
}

/// The `rules[].http.paths[]` of an Ingress spec.
fn paths_mut(spec: &mut Yaml) -> impl Iterator<Item = &mut Vec<Yaml>> {
    let rules = match spec {
        Yaml::Hash(h) => h.get_mut(&Yaml::String("rules".into())),
        _ => None,
    };
    let rules: &mut [Yaml] = match rules {
        Some(Yaml::Array(items)) => items,
        _ => &mut [],
    };
    rules.iter_mut().filter_map(|rule| match rule {
        Yaml::Hash(h) => match h.get_mut(&Yaml::String("http".into())) {
            Some(Yaml::Hash(http)) => match http.get_mut(&Yaml::String("paths".into())) {
                Some(Yaml::Array(paths)) => Some(paths),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    })
}

/// The Service a path sends to: `backend.service.name`.
fn backend_service(path: &Yaml) -> Option<&str> {
    path["backend"]["service"]["name"].as_str()
}

fn set_backend_service(path: &mut Yaml, name: &str) {
    if let Yaml::Hash(h) = path {
        if let Some(Yaml::Hash(b)) = h.get_mut(&Yaml::String("backend".into())) {
            if let Some(Yaml::Hash(s)) = b.get_mut(&Yaml::String("service".into())) {
                // In place: `insert` would move the key after `port`.
                if let Some(slot) = s.get_mut(&Yaml::String("name".into())) {
                    *slot = Yaml::String(name.into());
                }
            }
        }
    }
}

fn has_backend(spec: &Yaml, apex: &str) -> bool {
    let mut spec = spec.clone();
    let found =
        paths_mut(&mut spec).any(|paths| paths.iter().any(|p| backend_service(p) == Some(apex)));
    found
}

/// Emits the canary Ingress: the user's spec (as changed by the controller), named
/// `<ingress>-canary` in the canary's namespace, with the user's labels plus sluice's.
fn emit(
    config: &Config,
    canary: &Canary,
    spec: Yaml,
    annotations: &BTreeMap<String, String>,
) -> Result<String, RouteError> {
    let s = |t: &str| Yaml::String(t.to_string());
    let strings =
        |m: &BTreeMap<String, String>| Yaml::Hash(m.iter().map(|(k, v)| (s(k), s(v))).collect());
    let mut labels = config.labels.clone();
    labels.insert("app.kubernetes.io/managed-by".into(), MANAGED_BY.into());
    let mut metadata = yaml_rust2::yaml::Hash::new();
    metadata.insert(s("name"), s(&config.canary_name()));
    metadata.insert(s("namespace"), s(canary.id.namespace.as_str()));
    metadata.insert(s("labels"), strings(&labels));
    metadata.insert(s("annotations"), strings(annotations));
    let mut doc = yaml_rust2::yaml::Hash::new();
    doc.insert(s("apiVersion"), s(INGRESS_API));
    doc.insert(s("kind"), s("Ingress"));
    doc.insert(s("metadata"), Yaml::Hash(metadata));
    doc.insert(s("spec"), spec);
    let text = emit_yaml(canary, TEMPLATE, &Yaml::Hash(doc))?;
    Ok(format!("{}\n{text}\n", header_comment(canary)))
}

/// Kind, name, namespace and labels as written.
fn check_metadata(doc: &serde_json::Value, config: &Config, canary: &Canary) -> Result<(), String> {
    let expected = [
        ("/apiVersion", INGRESS_API.to_string()),
        ("/kind", "Ingress".to_string()),
        ("/metadata/name", config.canary_name()),
        ("/metadata/namespace", canary.id.namespace.to_string()),
        (
            "/metadata/labels/app.kubernetes.io~1managed-by",
            MANAGED_BY.to_string(),
        ),
    ];
    for (pointer, want) in expected {
        if doc.pointer(pointer).and_then(serde_json::Value::as_str) != Some(want.as_str()) {
            return Err(format!(
                "expected {pointer} = {want:?}, found {:?}",
                doc.pointer(pointer)
            ));
        }
    }
    Ok(())
}

/// The Services the paths of a rendered Ingress send to, in order.
fn rendered_backends(doc: &serde_json::Value) -> Vec<String> {
    doc.pointer("/spec/rules")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|rule| {
            rule.pointer("/http/paths")
                .and_then(serde_json::Value::as_array)
        })
        .flatten()
        .filter_map(|p| {
            p.pointer("/backend/service/name")
                .and_then(serde_json::Value::as_str)
        })
        .map(str::to_string)
        .collect()
}
