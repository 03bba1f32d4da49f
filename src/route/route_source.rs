//! `spec.routeSource` (Flagger #1857): a canary may name a route the user owns, in a file of
//! the repo, as `spec.source` names the Deployment humans edit. Humans edit that file (the
//! GitOps engine does not apply it); sluice writes its copy to the canary's output, where only
//! the backends of the rules sending traffic to the apex Service change (the primary/canary
//! pair with the step's weights). Flagger overwrites the whole HTTPRoute, so its users lose
//! their own rules, filters and matches; sluice keeps them.
//!
//! This file reads the field in both canary formats, finds the file and its route object in
//! the repo snapshot, and hands the object to the router of its kind: a Gateway API
//! `HTTPRoute`, `GRPCRoute`, `TCPRoute` or `TLSRoute` (`gateway_api::read_source`) are the
//! ones supported. It also refuses what the
//! route source replaces or what a copied route cannot carry: Flagger's route fields in
//! `spec.service` (the route's own rules hold them), the analysis' `sessionAffinity`, `mirror`
//! and A/B `match` (they would add rules to the user's route), and a provider other than
//! `gatewayapi:v1`/`gatewayapi:v1beta1` for a Flagger canary. That provider names the
//! HTTPRoute API Flagger writes, so an HTTPRoute source must be at it; a GRPCRoute, TCPRoute
//! or TLSRoute source (which Flagger never writes) keeps its own API version.
//!
//! A source edited by hand reaches the output at the next tick: the route is rendered from the
//! source with every commit sluice makes for the canary, and while the canary holds,
//! `render::route_refresh` commits the copy alone at the status's weights.

use crate::core::model::{Name, RepoPath};
use crate::route::gateway_api::{self, Apex, GatewayVersion, SOURCE_KINDS};
use crate::route::referenced::error_in;
use crate::route::{Provider, Route};
use crate::yaml::node::Node;
use crate::yaml::reader::{join, Reader};
use crate::yaml::snapshot::{Contents, File, Object, Snapshot};

/// The field, in both formats.
pub const FIELD: &str = "spec.routeSource";

/// Flagger's `spec.service` route fields a route source replaces: they are written in the
/// source's rules instead.
const REPLACED_SERVICE_FIELDS: &[&str] = &[
    "gatewayRefs",
    "hosts",
    "match",
    "rewrite",
    "headers",
    "mirror",
    "corsPolicy",
    "timeout",
    "backendTimeout",
];

/// `analysis` fields that add rules or filters to the route, which a copy of the user's route
/// does not take.
const REFUSED_ANALYSIS_FIELDS: &[&str] = &["match", "sessionAffinity", "mirror", "mirrorWeight"];

/// What reading a route source needs from the canary.
#[derive(Debug, Clone, Copy)]
pub struct SourceInput<'a> {
    /// The `spec.routeSource` value.
    pub node: &'a Node,
    /// The canary's `spec`.
    pub spec: &'a Node,
    /// The repo as loaded.
    pub snapshot: &'a Snapshot,
    pub namespace: &'a Name,
    /// The apex Service and its port.
    pub service: &'a Name,
    pub port: u16,
}

/// The repo path of the route source `route` copies, when it has one.
pub fn source_file(route: &Route) -> Option<&str> {
    match route {
        Route::GatewayApi(config) => config.source.as_ref().map(|s| s.file.as_str()),
        _ => None,
    }
}

/// A Flagger canary's `spec.routeSource`, with the canary's `provider` (a Gateway API one).
pub fn read_flagger(
    r: &mut Reader,
    input: &SourceInput,
    provider: Option<Provider>,
) -> Option<Route> {
    let before = r.errors.len();
    let version = match provider {
        Some(Provider::GatewayApi(version)) => Some(version),
        Some(_) => {
            let line = input
                .spec
                .get("provider")
                .map_or(input.node.line, |n| n.line);
            r.error(
                line,
                "spec.provider",
                "spec.routeSource copies a Gateway API route: expected provider gatewayapi:v1 or gatewayapi:v1beta1",
            );
            None
        }
        // A bad provider string is already reported.
        None => None,
    };
    if let Some(service) = input.spec.get("service") {
        for key in REPLACED_SERVICE_FIELDS {
            if let Some(line) = service.key_line(key) {
                r.error(
                    line,
                    &join("spec.service", key),
                    format!("not used with spec.routeSource: the route's rules come from {}; write it there", path_text(input.node)),
                );
            }
        }
    }
    refuse_analysis_fields(r, input);
    let route = read(r, input, version);
    (r.errors.len() == before).then_some(route).flatten()
}

/// A native canary's `spec.routeSource`, which takes the place of `spec.route`.
pub fn read_native(r: &mut Reader, input: &SourceInput) -> Option<Route> {
    let before = r.errors.len();
    if let Some(line) = input.spec.key_line("route") {
        r.error(
            line,
            "spec.route",
            "expected either spec.route or spec.routeSource, found both",
        );
    }
    refuse_analysis_fields(r, input);
    let route = read(r, input, None);
    (r.errors.len() == before).then_some(route).flatten()
}

fn path_text(node: &Node) -> String {
    node.as_str().unwrap_or("the route source").to_string()
}

fn refuse_analysis_fields(r: &mut Reader, input: &SourceInput) {
    let Some(analysis) = input.spec.get("analysis") else {
        return;
    };
    for key in REFUSED_ANALYSIS_FIELDS {
        if let Some(line) = analysis.key_line(key) {
            r.error(
                line,
                &join("spec.analysis", key),
                "not supported with spec.routeSource yet: sluice changes only the backends of your route's rules, and this would add rules or filters to it; remove it, or let sluice write the whole route (spec.route, or Flagger's service fields)",
            );
        }
    }
}

/// Finds the route object in the source file and reads it with its kind's router; `version`
/// is the API version the canary's provider asks for, if any.
fn read(r: &mut Reader, input: &SourceInput, version: Option<GatewayVersion>) -> Option<Route> {
    let text = r.string(input.node, FIELD)?;
    let path = match RepoPath::parse(&text) {
        Ok(p) => p,
        Err(e) => {
            r.error(input.node.line, FIELD, e);
            return None;
        }
    };
    let object = find_route(r, input, &path)?;
    if let Some(version) = version.filter(|_| object.kind == "HTTPRoute") {
        let found = object.api_version.unwrap_or("");
        if found != version.api_version() {
            let line = object
                .node
                .get("apiVersion")
                .map_or(object.line, |n| n.line);
            error_in(
                r,
                object.file,
                line,
                "apiVersion",
                format!(
                    "expected {} (the API of the canary's provider, which sluice writes), found {found:?}",
                    version.api_version()
                ),
            );
            return None;
        }
    }
    let apex = Apex {
        namespace: input.namespace.as_str(),
        service: input.service.as_str(),
        port: input.port,
        pair: None,
    };
    gateway_api::read_source(r, &object, &apex).map(Route::GatewayApi)
}

/// The one Gateway API route ([`SOURCE_KINDS`]) in the file `path`.
fn find_route<'s>(r: &mut Reader, input: &SourceInput<'s>, path: &RepoPath) -> Option<Object<'s>> {
    let line = input.node.line;
    let Some(file) = file_at(input.snapshot, path) else {
        r.error(line, FIELD, format!("{path} not found among the repo's YAML files (sluice reads .yaml and .yml files outside hidden folders)"));
        return None;
    };
    match &*file.contents {
        Contents::Unreadable(e) => {
            r.error(line, FIELD, format!("{path} cannot be read: {e}"));
            return None;
        }
        Contents::Invalid { error, .. } => {
            error_in(
                r,
                &file.name,
                error.line,
                "",
                format!("YAML syntax error: {}", error.message),
            );
            return None;
        }
        Contents::Yaml { .. } => {}
    }
    if let Some(Err(e)) = file.yaml() {
        error_in(r, &file.name, e.line, "", e.message.clone());
        return None;
    }
    let objects: Vec<Object<'s>> = input.snapshot.objects_in(file).collect();
    let routes: Vec<&Object<'s>> = objects
        .iter()
        .filter(|o| SOURCE_KINDS.contains(&o.kind))
        .collect();
    match routes.as_slice() {
        [one] => Some(**one),
        [] => {
            let found = objects
                .first()
                .map_or("no Kubernetes object".to_string(), |o| {
                    format!("{} {}", o.kind, o.name)
                });
            let message = if objects.iter().any(|o| o.kind == "VirtualService") {
                format!("expected a Gateway API {} in {path}, found {found}: an Istio VirtualService source is not supported yet", kinds_text())
            } else {
                format!(
                    "expected a Gateway API {} in {path}, found {found}",
                    kinds_text()
                )
            };
            r.error(line, FIELD, message);
            None
        }
        [first, second, ..] => {
            error_in(
                r,
                second.file,
                second.line,
                "kind",
                format!(
                    "expected one route in {path} (spec.routeSource), found another at line {}",
                    first.line
                ),
            );
            None
        }
    }
}

/// `HTTPRoute, GRPCRoute, TCPRoute or TLSRoute`.
fn kinds_text() -> String {
    match SOURCE_KINDS.split_last() {
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The file at `path` in the repo: by its repo-relative name (the loop's snapshot), else the
/// one file whose walked name ends in `/<path>` (`sluice validate` names files as it walked
/// them, `./apps/...` or an absolute path).
fn file_at<'s>(snapshot: &'s Snapshot, path: &RepoPath) -> Option<&'s File> {
    if let Some(file) = snapshot.file(path.as_str()) {
        return Some(file);
    }
    let suffix = format!("/{path}");
    let mut found = snapshot
        .files()
        .iter()
        .filter(|f| f.name.ends_with(&suffix));
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}
