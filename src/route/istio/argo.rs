//! An Argo Rollout's `trafficRouting.istio`, as Argo Rollouts' Istio router
//! (`rollout/trafficrouting/istio/istio.go`) reads it, but into git: the user's
//! VirtualServices (and DestinationRule, for subset-level routing) are copied to the output
//! with only the weights of their stable and canary destinations changed.
//!
//! Which routes get weights, as Argo picks them:
//! - HTTP (`spec.http`): the routes `routes` names; without names, the first route without a
//!   name, and then the VirtualService must have exactly one HTTP route.
//! - TLS (`spec.tls`) and TCP (`spec.tcp`): the routes whose `match` has the one `port` (and,
//!   for TLS, exactly the `sniHosts`) that `tlsRoutes` / `tcpRoutes` list; without them the
//!   first route, and then the VirtualService must have exactly one.
//!
//! In each such route a destination is the canary's when its host (up to the first `.`) is the
//! `canaryService` or its subset is the `canarySubsetName`, the stable's likewise, and each
//! route must have both (Argo's `validateVirtualServiceRouteDestinations`). The canary's get
//! the step's weight, the stable's the rest. A destination that is neither is refused: Argo
//! would delete it from your route at the first step.
//!
//! The DestinationRule: Argo adds `rollouts-pod-template-hash` to the two subsets' labels at
//! run time; in git the two subsets get `sluice.dev/rollout-role: stable` / `canary`, the
//! label the stable and canary Deployments carry. The rest of it is copied as written.
//!
//! Reads at load time and renders purely; decides nothing.

use serde_json::Value as Json;
use yaml_rust2::{Yaml, YamlEmitter};

use crate::route::istio::managed_routes::{self, ManagedRoutes};
use crate::route::ROLLOUT_ROLE_LABEL as ROLE_LABEL;
use crate::route::{header_comment, reparse_all, RenderInput, RouteError, MANAGED_BY};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};
use crate::yaml::snapshot::Object;

/// The keys of a `tlsRoutes` item: the port and SNI hosts its route matches.
const TLS_ROUTE_KEYS: &[&str] = &["port", "sniHosts"];
/// The keys of a `tcpRoutes` item: the port its route matches.
const TCP_ROUTE_KEYS: &[&str] = &["port"];

const TEMPLATE: &str = "Rollout VirtualService copy";

/// The API versions of VirtualService and DestinationRule sluice copies (Istio serves all
/// three with one schema; the copy keeps the version the user wrote).
pub const API_VERSIONS: &[&str] = &[
    "networking.istio.io/v1alpha3",
    "networking.istio.io/v1beta1",
    "networking.istio.io/v1",
];

/// Which workload a destination sends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Stable,
    Canary,
}

/// One destination whose weight the step sets: `spec.<section>[route].route[destination]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub section: &'static str,
    pub route: usize,
    pub destination: usize,
    pub role: Role,
}

/// One object copied to the output: the user's YAML and what changes in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Copy {
    /// The source file, for the comment in the output.
    pub file: String,
    pub kind: &'static str,
    pub name: String,
    /// The user's object, key order kept.
    pub yaml: Yaml,
    /// A VirtualService's weighted destinations.
    pub slots: Vec<Slot>,
    /// A DestinationRule's subsets (by index) and the role label each gets.
    pub subsets: Vec<(usize, Role)>,
}

/// A Rollout's Istio route: its VirtualServices, then its DestinationRule if it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgoIstio {
    pub objects: Vec<Copy>,
    /// The managed routes `setHeaderRoute` and `setMirrorRoute` steps set (read with the
    /// steps).
    pub managed: ManagedRoutes,
}

/// What reading needs from the Rollout.
pub struct Input<'a, 's> {
    pub namespace: &'a str,
    pub stable_service: &'a str,
    pub canary_service: &'a str,
    /// Finds an object of a kind by name in the Rollout's namespace.
    pub find: &'a dyn Fn(&str, &str) -> Vec<Object<'s>>,
}

/// `trafficRouting.istio` (at `p`); `None` when anything was wrong (reported through `r`).
pub fn read(r: &mut Reader, istio: &Node, p: &str, input: &Input) -> Option<ArgoIstio> {
    r.map(
        istio,
        p,
        &["virtualService", "virtualServices", "destinationRule"],
    )?;
    let before = r.errors.len();
    let subsets = match istio.get("destinationRule") {
        Some(n) => read_subset_names(r, n, &join(p, "destinationRule")),
        None => Some((String::new(), String::new(), None)),
    };
    let mut refs = Vec::new();
    match (istio.get("virtualService"), istio.get("virtualServices")) {
        (Some(_), Some(n)) => r.error(
            n.line,
            &join(p, "virtualServices"),
            "expected either virtualService or virtualServices, found both (Argo refuses it too)",
        ),
        (Some(n), None) => refs.push((n, join(p, "virtualService"))),
        (None, Some(n)) => {
            let lp = join(p, "virtualServices");
            for (i, item) in r.seq(n, &lp).unwrap_or_default().iter().enumerate() {
                refs.push((item, index(&lp, i)));
            }
        }
        (None, None) => r.error(
            istio.line,
            &join(p, "virtualService"),
            "required field is missing (or set virtualServices)",
        ),
    }
    let (stable_subset, canary_subset, rule) = subsets?;
    let names = Names {
        stable_service: input.stable_service,
        canary_service: input.canary_service,
        stable_subset: &stable_subset,
        canary_subset: &canary_subset,
    };
    let mut objects = Vec::new();
    for (n, at) in refs {
        if let Some(copy) = read_virtual_service(r, n, &at, input, &names) {
            objects.push(copy);
        }
    }
    if let Some((name_node, at)) = rule {
        if let Some(copy) = read_destination_rule(r, &name_node, &at, input, &names) {
            objects.push(copy);
        }
    }
    (r.errors.len() == before).then_some(ArgoIstio {
        objects,
        managed: ManagedRoutes::default(),
    })
}

/// The Services and subsets whose destinations get weights.
struct Names<'a> {
    stable_service: &'a str,
    canary_service: &'a str,
    stable_subset: &'a str,
    canary_subset: &'a str,
}

type SubsetNames = (String, String, Option<(Node, String)>);

/// `destinationRule`: its name node and the two subset names.
fn read_subset_names(r: &mut Reader, n: &Node, p: &str) -> Option<SubsetNames> {
    r.map(n, p, &["name", "canarySubsetName", "stableSubsetName"])?;
    let name = r.required(n, p, "name")?.clone();
    let canary = r
        .required(n, p, "canarySubsetName")
        .and_then(|v| r.string(v, &join(p, "canarySubsetName")));
    let stable = r
        .required(n, p, "stableSubsetName")
        .and_then(|v| r.string(v, &join(p, "stableSubsetName")));
    let (canary, stable) = (canary?, stable?);
    if canary == stable {
        r.error(
            n.line,
            p,
            format!("expected two different subsets, found {canary:?} twice"),
        );
        return None;
    }
    Some((stable, canary, Some((name, join(p, "name")))))
}

/// A name the Rollout gives (`name` or `name.namespace`, as Argo's
/// `GetVirtualServiceNamespaceName` splits it), which must be in the Rollout's namespace.
fn local_name(r: &mut Reader, n: &Node, at: &str, namespace: &str) -> Option<String> {
    let text = r.string(n, at)?;
    match text.split_once('.') {
        None => Some(text),
        Some((name, ns)) if ns == namespace => Some(name.to_string()),
        Some((_, ns)) => {
            r.error(n.line, at, format!("expected an object in the Rollout's namespace {namespace:?} (sluice writes its copy beside the workloads), found namespace {ns:?}"));
            None
        }
    }
}

/// The one object of `kind` named `name`.
fn find_one<'s>(
    r: &mut Reader,
    line: usize,
    at: &str,
    kind: &str,
    name: &str,
    input: &Input<'_, 's>,
) -> Option<Object<'s>> {
    let found = (input.find)(kind, name);
    match found.as_slice() {
        [one] => {
            if !one.api_version.is_some_and(|v| API_VERSIONS.contains(&v)) {
                let mut sr = Reader::new(one.file);
                let line = one.node.get("apiVersion").map_or(one.line, |n| n.line);
                sr.error(
                    line,
                    "apiVersion",
                    format!(
                        "expected {} for a {kind}, found {:?}",
                        API_VERSIONS.join(" or "),
                        one.api_version.unwrap_or("")
                    ),
                );
                r.errors.append(&mut sr.errors);
                return None;
            }
            Some(*one)
        }
        [] => {
            r.error(line, at, format!("{kind} {}/{name} not found among the repo's YAML files (sluice copies it to the output with the step's weights)", input.namespace));
            None
        }
        [_, second, ..] => {
            r.error(
                line,
                at,
                format!(
                    "{kind} {}/{name} is defined twice (also at {}:{})",
                    input.namespace, second.file, second.line
                ),
            );
            None
        }
    }
}

/// One `virtualService` (or item of `virtualServices`) and the VirtualService it names.
fn read_virtual_service(
    r: &mut Reader,
    n: &Node,
    at: &str,
    input: &Input,
    names: &Names,
) -> Option<Copy> {
    r.map(n, at, &["name", "routes", "tlsRoutes", "tcpRoutes"])?;
    let name_node = r.required(n, at, "name")?;
    let name = local_name(r, name_node, &join(at, "name"), input.namespace)?;
    let mut route_names = Vec::new();
    if let Some(routes) = n.get("routes") {
        let lp = join(at, "routes");
        for (i, item) in r.seq(routes, &lp).unwrap_or_default().iter().enumerate() {
            route_names.push(r.string(item, &index(&lp, i))?);
        }
    }
    let tls = read_port_matches(r, n.get("tlsRoutes"), &join(at, "tlsRoutes"), true)?;
    let tcp = read_port_matches(r, n.get("tcpRoutes"), &join(at, "tcpRoutes"), false)?;
    let object = find_one(
        r,
        name_node.line,
        &join(at, "name"),
        "VirtualService",
        &name,
        input,
    )?;
    let mut sr = Reader::new(object.file);
    let slots = virtual_service_slots(&mut sr, object.node, &route_names, &tls, &tcp, names);
    let failed = !sr.errors.is_empty();
    r.errors.append(&mut sr.errors);
    if failed {
        return None;
    }
    Some(Copy {
        file: object.file.to_string(),
        kind: "VirtualService",
        name,
        yaml: object.yaml.clone(),
        slots: slots?,
        subsets: Vec::new(),
    })
}

/// A `tlsRoutes` / `tcpRoutes` item: its port and (TLS) SNI hosts.
type PortMatch = (i64, Vec<String>);

fn read_port_matches(
    r: &mut Reader,
    n: Option<&Node>,
    p: &str,
    tls: bool,
) -> Option<Vec<PortMatch>> {
    let Some(n) = n else {
        return Some(Vec::new());
    };
    let mut out = Vec::new();
    for (i, item) in r.seq(n, p)?.iter().enumerate() {
        let ip = index(p, i);
        if tls {
            r.map(item, &ip, TLS_ROUTE_KEYS)?;
        } else {
            r.map(item, &ip, TCP_ROUTE_KEYS)?;
        }
        let port = match item.get("port") {
            Some(v) => r.int(v, &join(&ip, "port"), 0, 65535)?,
            None => 0,
        };
        let mut hosts = Vec::new();
        if let Some(h) = item.get("sniHosts") {
            let hp = join(&ip, "sniHosts");
            for (j, host) in r.seq(h, &hp)?.iter().enumerate() {
                hosts.push(r.string(host, &index(&hp, j))?);
            }
        }
        hosts.sort();
        hosts.dedup();
        out.push((port, hosts));
    }
    Some(out)
}

/// The destinations of the VirtualService `vs` whose weights the steps set.
fn virtual_service_slots(
    r: &mut Reader,
    vs: &Node,
    route_names: &[String],
    tls: &[PortMatch],
    tcp: &[PortMatch],
    names: &Names,
) -> Option<Vec<Slot>> {
    let spec = r.required(vs, "", "spec")?;
    let mut slots = Vec::new();
    let mut any = false;
    for section in ["http", "tls", "tcp"] {
        let Some(routes_node) = spec.get(section) else {
            continue;
        };
        let sp = join("spec", section);
        let routes = r.seq(routes_node, &sp)?;
        any = true;
        let picked = match section {
            "http" => pick_http(r, routes_node.line, routes, route_names)?,
            "tls" => pick_by_port(r, routes_node.line, routes, tls, section, "tlsRoutes")?,
            _ => pick_by_port(r, routes_node.line, routes, tcp, section, "tcpRoutes")?,
        };
        for i in picked {
            let ip = index(&sp, i);
            slots.extend(route_slots(r, &routes[i], &ip, section, i, names)?);
        }
    }
    if !any || slots.is_empty() {
        r.error(
            spec.line,
            "spec.http",
            "expected a route for the Rollout to weight (an http route named in routes, or the one unnamed http route; tls or tcp routes), found none: Argo would never shift traffic",
        );
        return None;
    }
    Some(slots)
}

fn route_name(route: &Node) -> Option<&str> {
    route.get("name").and_then(Node::as_str)
}

/// Argo's `getHttpRouteIndexesToPatch` and `ValidateHTTPRoutes`.
fn pick_http(r: &mut Reader, line: usize, routes: &[Node], names: &[String]) -> Option<Vec<usize>> {
    if names.is_empty() {
        if routes.len() != 1 {
            r.error(line, "spec.http", format!("spec.http[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.routes (Argo's message); found {}", routes.len()));
            return None;
        }
        return Some(
            routes
                .iter()
                .position(|route| route_name(route).is_none_or(str::is_empty))
                .into_iter()
                .collect(),
        );
    }
    let mut picked = Vec::new();
    for name in names {
        match routes
            .iter()
            .position(|route| route_name(route) == Some(name.as_str()))
        {
            Some(i) => picked.push(i),
            None => {
                r.error(
                    line,
                    "spec.http",
                    format!("HTTP Route '{name}' is not found in the defined Virtual Service (Argo's message)"),
                );
                return None;
            }
        }
    }
    Some(picked)
}

/// Argo's `getTlsRouteIndexesToPatch` / `getTcpRouteIndexesToPatch` and their validation.
fn pick_by_port(
    r: &mut Reader,
    line: usize,
    routes: &[Node],
    wanted: &[PortMatch],
    section: &str,
    field: &str,
) -> Option<Vec<usize>> {
    let sp = join("spec", section);
    if wanted.is_empty() {
        if routes.len() > 1 {
            r.error(line, &sp, format!("{sp}[] should be set in VirtualService and it must have exactly one route when omitting spec.strategy.canary.trafficRouting.istio.virtualService.{field} (Argo's message); found {}", routes.len()));
            return None;
        }
        return Some((0..routes.len()).collect());
    }
    let mut picked = Vec::new();
    for (port, hosts) in wanted {
        let found: Vec<usize> = routes
            .iter()
            .enumerate()
            .filter(|(_, route)| {
                route_port_hosts(route)
                    .is_some_and(|(p, h)| p == *port && (section == "tcp" || h == *hosts))
            })
            .map(|(i, _)| i)
            .collect();
        if found.is_empty() {
            let kind = section.to_uppercase();
            r.error(
                line,
                &sp,
                format!("No matching {kind} routes found in the defined Virtual Service (Argo's message): none matches port {port}"),
            );
            return None;
        }
        picked.extend(found);
    }
    Some(picked)
}

/// The one port (0 when none) and the SNI hosts of a TLS/TCP route's matches; `None` when
/// they name several ports (Argo never matches such a route).
fn route_port_hosts(route: &Node) -> Option<(i64, Vec<String>)> {
    let mut ports = Vec::new();
    let mut hosts = Vec::new();
    if let Some(Value::Seq(matches)) = route.get("match").map(|m| &m.value) {
        for m in matches {
            let port = m
                .get("port")
                .and_then(Node::as_str)
                .and_then(|t| t.parse::<i64>().ok())
                .unwrap_or(0);
            if !ports.contains(&port) {
                ports.push(port);
            }
            if let Some(Value::Seq(sni)) = m.get("sniHosts").map(|s| &s.value) {
                hosts.extend(sni.iter().filter_map(Node::as_str).map(str::to_string));
            }
        }
    }
    if ports.len() > 1 {
        return None;
    }
    hosts.sort();
    hosts.dedup();
    Some((ports.first().copied().unwrap_or(0), hosts))
}

/// Argo's `processRoutes` for one route: each destination's role.
fn route_slots(
    r: &mut Reader,
    route: &Node,
    at: &str,
    section: &'static str,
    i: usize,
    names: &Names,
) -> Option<Vec<Slot>> {
    let rp = join(at, "route");
    let Some(destinations) = route.get("route") else {
        r.error(
            route.line,
            &rp,
            "required field is missing: the destinations the Rollout weights",
        );
        return None;
    };
    let mut slots = Vec::new();
    for (j, d) in r.seq(destinations, &rp)?.iter().enumerate() {
        let dp = index(&rp, j);
        let destination = d.get("destination");
        let text = |key: &str| destination.and_then(|x| x.get(key)).and_then(Node::as_str);
        let host = text("host").unwrap_or("");
        let host = host.split_once('.').map_or(host, |(h, _)| h);
        let subset = text("subset").unwrap_or("");
        // A Service the Rollout does not name (subset-level routing) is "" and matches no host.
        let is = |service: &str, named_subset: &str| {
            (!service.is_empty() && host == service)
                || (!subset.is_empty() && subset == named_subset)
        };
        let role = if is(names.canary_service, names.canary_subset) {
            Role::Canary
        } else if is(names.stable_service, names.stable_subset) {
            Role::Stable
        } else {
            let what = if names.canary_subset.is_empty() {
                format!(
                    "the stableService {:?} nor the canaryService {:?}",
                    names.stable_service, names.canary_service
                )
            } else {
                format!(
                    "the stable subset {:?} nor the canary subset {:?} (nor a Service the Rollout names)",
                    names.stable_subset, names.canary_subset
                )
            };
            r.error(d.line, &join(&dp, "destination"), format!("a destination that is neither {what}: Argo Rollouts deletes it from the route at the first step, and sluice does not delete what you wrote; move it to a route of its own"));
            return None;
        };
        slots.push(Slot {
            section,
            route: i,
            destination: j,
            role,
        });
    }
    let has = |role| slots.iter().any(|s| s.role == role);
    let subsets = !names.canary_subset.is_empty();
    for (role, what, name) in [
        (
            Role::Canary,
            if subsets {
                "Canary DestinationRule subset"
            } else {
                "Canary Service"
            },
            if subsets {
                names.canary_subset
            } else {
                names.canary_service
            },
        ),
        (
            Role::Stable,
            if subsets {
                "Stable DestinationRule subset"
            } else {
                "Stable Service"
            },
            if subsets {
                names.stable_subset
            } else {
                names.stable_service
            },
        ),
    ] {
        if !has(role) {
            r.error(
                destinations.line,
                &rp,
                format!("{what} '{name}' not found in route (Argo's message)"),
            );
            return None;
        }
    }
    Some(slots)
}

/// The DestinationRule `destinationRule.name` names, and its two subsets.
fn read_destination_rule(
    r: &mut Reader,
    name_node: &Node,
    at: &str,
    input: &Input,
    names: &Names,
) -> Option<Copy> {
    let name = local_name(r, name_node, at, input.namespace)?;
    let object = find_one(r, name_node.line, at, "DestinationRule", &name, input)?;
    let mut sr = Reader::new(object.file);
    let mut subsets = Vec::new();
    let items = sr
        .required(object.node, "", "spec")
        .and_then(|s| sr.required(s, "spec", "subsets"))
        .and_then(|s| sr.seq(s, "spec.subsets"));
    for (i, subset) in items.unwrap_or_default().iter().enumerate() {
        match subset.get("name").and_then(Node::as_str) {
            Some(n) if n == names.canary_subset => subsets.push((i, Role::Canary)),
            Some(n) if n == names.stable_subset => subsets.push((i, Role::Stable)),
            _ => {}
        }
    }
    for (role, subset) in [
        (Role::Canary, names.canary_subset),
        (Role::Stable, names.stable_subset),
    ] {
        if !subsets.iter().any(|(_, r)| *r == role) {
            sr.error(
                object.line,
                "spec.subsets",
                format!("expected a subset named {subset:?} (the Rollout's destinationRule names it), found none"),
            );
        }
    }
    let failed = !sr.errors.is_empty();
    r.errors.append(&mut sr.errors);
    if failed {
        return None;
    }
    Some(Copy {
        file: object.file.to_string(),
        kind: "DestinationRule",
        name,
        yaml: object.yaml.clone(),
        slots: Vec::new(),
        subsets,
    })
}

fn s(text: &str) -> Yaml {
    Yaml::String(text.to_string())
}

fn role_text(role: Role) -> &'static str {
    match role {
        Role::Stable => "stable",
        Role::Canary => "canary",
    }
}

/// The managed http routes active at this step in the VirtualService `copy` (an Argo
/// Rollout's `setHeaderRoute` and `setMirrorRoute`); empty outside an analysis.
fn managed_of(config: &ArgoIstio, copy: &Copy, input: &RenderInput) -> Vec<Yaml> {
    let (Some(step), crate::core::model::Target::Rollout { managed_routes, .. }) =
        (input.state.managed_step, &input.canary.target)
    else {
        return Vec::new();
    };
    let active = crate::core::model::managed_routes_at(managed_routes, step);
    let first = copy.slots.iter().find(|s| s.section == "http");
    let (false, Some(first)) = (active.is_empty(), first) else {
        return Vec::new();
    };
    let canary_at: Vec<usize> = copy
        .slots
        .iter()
        .filter(|s| s.section == "http" && s.route == first.route && s.role == Role::Canary)
        .map(|s| s.destination)
        .collect();
    let rule = config.objects.iter().find(|c| c.kind == "DestinationRule");
    let host = rule
        .and_then(|c| c.yaml["spec"]["host"].as_str())
        .unwrap_or(input.backends.canary);
    let subset = rule
        .and_then(|c| {
            let (i, _) = c.subsets.iter().find(|(_, role)| *role == Role::Canary)?;
            c.yaml["spec"]["subsets"][*i]["name"].as_str()
        })
        .unwrap_or("");
    let canary = managed_routes::Canary { host, subset };
    let weighted = &copy.yaml["spec"]["http"][first.route];
    managed_routes::routes(&config.managed, active, &canary, weighted, &canary_at)
}

/// The object `copy` with this step's weights (or the role labels) and `managed` http routes
/// first, its metadata reduced to what a manifest in git carries, in the canary's namespace.
fn copied(copy: &Copy, input: &RenderInput, managed: Vec<Yaml>) -> Yaml {
    let mut doc = copy.yaml.clone();
    let weights = input.weights;
    for slot in &copy.slots {
        let weight = match slot.role {
            Role::Stable => weights.primary,
            Role::Canary => weights.canary,
        };
        if let Yaml::Hash(d) = &mut doc["spec"][slot.section][slot.route]["route"][slot.destination]
        {
            d.insert(s("weight"), Yaml::Integer(i64::from(weight)));
        }
    }
    for (i, role) in &copy.subsets {
        if let Yaml::Hash(subset) = &mut doc["spec"]["subsets"][*i] {
            let labels = subset
                .entry(s("labels"))
                .or_insert_with(|| Yaml::Hash(Default::default()));
            if !matches!(labels, Yaml::Hash(_)) {
                *labels = Yaml::Hash(Default::default());
            }
            if let Yaml::Hash(l) = labels {
                l.insert(s(ROLE_LABEL), s(role_text(*role)));
            }
        }
    }
    // Indexing a missing key of a YAML map would panic: look the routes up.
    let http = match &mut doc {
        Yaml::Hash(h) => match h.get_mut(&s("spec")) {
            Some(Yaml::Hash(spec)) => spec.get_mut(&s("http")),
            _ => None,
        },
        _ => None,
    };
    if let (Some(Yaml::Array(routes)), false) = (http, managed.is_empty()) {
        let own = std::mem::take(routes);
        *routes = managed.into_iter().chain(own).collect();
    }
    if let Yaml::Hash(h) = &mut doc {
        h.remove(&s("status"));
        let mut metadata = yaml_rust2::yaml::Hash::new();
        metadata.insert(s("name"), s(&copy.name));
        metadata.insert(s("namespace"), s(input.canary.id.namespace.as_str()));
        let mut labels = match &h.get(&s("metadata")).map(|m| m["labels"].clone()) {
            Some(Yaml::Hash(l)) => l.clone(),
            _ => yaml_rust2::yaml::Hash::new(),
        };
        labels.insert(s("app.kubernetes.io/managed-by"), s(MANAGED_BY));
        metadata.insert(s("labels"), Yaml::Hash(labels));
        if let Some(Yaml::Hash(a)) = h.get(&s("metadata")).map(|m| m["annotations"].clone()) {
            metadata.insert(s("annotations"), Yaml::Hash(a));
        }
        h.insert(s("metadata"), Yaml::Hash(metadata));
    }
    doc
}

/// The route file: every VirtualService, then the DestinationRule, copied.
pub fn render(config: &ArgoIstio, input: &RenderInput) -> Result<String, RouteError> {
    let canary = input.canary;
    let mut text = format!("{}\n", header_comment(canary));
    let mut managed = Vec::new();
    for copy in &config.objects {
        let routes = managed_of(config, copy, input);
        managed.push(
            routes
                .iter()
                .map(|r| r["name"].as_str().unwrap_or("").to_string())
                .collect::<Vec<_>>(),
        );
        let mut out = String::new();
        let mut emitter = YamlEmitter::new(&mut out);
        emitter.multiline_strings(true);
        emitter.dump(&copied(copy, input, routes)).map_err(|e| {
            RouteError::output(canary, TEMPLATE, format!("the YAML emitter failed: {e}"))
        })?;
        let body = out.strip_prefix("---\n").unwrap_or(&out);
        text.push_str(&format!(
            "---\n# Copied from {} (the Rollout's trafficRouting.istio): edit that file, not this one.\n{body}\n",
            copy.file
        ));
    }
    let docs = reparse_all(canary, TEMPLATE, &text)?;
    verify(&docs, config, input, &managed).map_err(|m| RouteError::output(canary, TEMPLATE, m))?;
    Ok(text)
}

/// Reads the copies back: one document per object, its managed http routes (`managed`, by
/// name, per object) first, each weight and role label as asked.
fn verify(
    docs: &[Json],
    config: &ArgoIstio,
    input: &RenderInput,
    managed: &[Vec<String>],
) -> Result<(), String> {
    let docs: Vec<&Json> = docs.iter().filter(|d| !d.is_null()).collect();
    if docs.len() != config.objects.len() {
        return Err(format!(
            "expected {} documents, found {}",
            config.objects.len(),
            docs.len()
        ));
    }
    for ((doc, copy), names) in docs.iter().zip(&config.objects).zip(managed) {
        for (i, name) in names.iter().enumerate() {
            let found = doc.pointer(&format!("/spec/http/{i}/name"));
            if found.and_then(Json::as_str) != Some(name.as_str()) {
                return Err(format!(
                    "expected the managed route {name:?} at /spec/http/{i}, found {found:?}"
                ));
            }
        }
        if doc.pointer("/kind").and_then(Json::as_str) != Some(copy.kind)
            || doc.pointer("/metadata/name").and_then(Json::as_str) != Some(copy.name.as_str())
        {
            return Err(format!("expected {} {}", copy.kind, copy.name));
        }
        for slot in &copy.slots {
            let want = match slot.role {
                Role::Stable => input.weights.primary,
                Role::Canary => input.weights.canary,
            };
            let offset = if slot.section == "http" {
                names.len()
            } else {
                0
            };
            let at = format!(
                "/spec/{}/{}/route/{}/weight",
                slot.section,
                slot.route + offset,
                slot.destination
            );
            if doc.pointer(&at).and_then(Json::as_u64) != Some(u64::from(want)) {
                return Err(format!("expected {at} to be {want}"));
            }
        }
        for (i, role) in &copy.subsets {
            let at = format!("/spec/subsets/{i}/labels/{}", ROLE_LABEL.replace('/', "~1"));
            if doc.pointer(&at).and_then(Json::as_str) != Some(role_text(*role)) {
                return Err(format!("expected {at} to be {}", role_text(*role)));
            }
        }
    }
    Ok(())
}
