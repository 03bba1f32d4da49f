//! An Argo Rollout's managed routes on its Istio VirtualServices (`setHeaderRoute` and
//! `setMirrorRoute` steps), as Argo's Istio router writes them into `spec.http`:
//!
//! - a header route is named after the managed route, with one `match` per header (Argo's
//!   `createHeaderRoute`: any of them matches), sending everything to the canary: its
//!   DestinationRule's host and canary subset with one, else the canaryService, on the port
//!   of the first destination of the weighted route;
//! - a mirror route is named after the managed route, with the step's matches (`method`,
//!   `path` as `uri`, `headers`), the weighted route's destinations as they stood when the
//!   step ran (host, subset and port only, weights of that step, a zero weight left out, as
//!   Argo copies them), and a `mirror` to the canary with `mirrorPercentage` (100 without
//!   `percentage`).
//!
//! The active routes go first, in the order of `trafficRouting.managedRoutes` (Argo's
//! `orderRoutes`), then the user's routes. Which are active at a step is the core's
//! [`ManagedStep`](crate::core::model::ManagedStep) schedule: a step without `match` removes
//! its route, and none is active outside the analysis (Argo's `RemoveManagedRoutes` at
//! promotion and abort). Renders purely; decides nothing.

use yaml_rust2::yaml::Hash;
use yaml_rust2::Yaml;

use crate::route::gateway_api::header_routes::HeaderMatch;

/// A `setMirrorRoute` step's route: its matches (Istio `HTTPMatchRequest`s), the share of
/// the matching requests mirrored, and the canary's weight when the step ran.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorRoute {
    pub matches: Vec<Yaml>,
    pub percentage: u32,
    pub canary_weight: u32,
}

/// What a managed route does.
#[derive(Debug, Clone, PartialEq)]
pub enum Managed {
    Header(Vec<HeaderMatch>),
    Mirror(MirrorRoute),
}

/// One managed route set by a step: the index among Argo's steps of the step (the key of the
/// core's schedule), its name, and what it does.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedRoute {
    pub argo_step: u32,
    pub name: String,
    pub managed: Managed,
}

/// The Rollout's managed routes and where they send.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ManagedRoutes {
    /// Every route a step sets, in step order.
    pub routes: Vec<ManagedRoute>,
    /// `trafficRouting.managedRoutes`, in order.
    pub order: Vec<String>,
}

/// The canary a managed route sends to: its host and, with a DestinationRule, its subset.
pub struct Canary<'a> {
    pub host: &'a str,
    pub subset: &'a str,
}

fn s(text: &str) -> Yaml {
    Yaml::String(text.to_string())
}

fn map(pairs: Vec<(&str, Yaml)>) -> Yaml {
    let mut h = Hash::new();
    for (k, v) in pairs {
        h.insert(s(k), v);
    }
    Yaml::Hash(h)
}

/// The port of the first destination of the weighted route `weighted`, as `{number: N}`.
fn first_port(weighted: &Yaml) -> Option<Yaml> {
    match &weighted["route"][0]["destination"]["port"]["number"] {
        Yaml::Integer(n) if *n > 0 => Some(map(vec![("number", Yaml::Integer(*n))])),
        _ => None,
    }
}

fn canary_destination(canary: &Canary, port: Option<Yaml>) -> Yaml {
    let mut pairs = vec![("host", s(canary.host))];
    if !canary.subset.is_empty() {
        pairs.push(("subset", s(canary.subset)));
    }
    pairs.extend(port.map(|p| ("port", p)));
    map(pairs)
}

fn header_route(name: &str, headers: &[HeaderMatch], canary: &Canary, weighted: &Yaml) -> Yaml {
    let matches = headers
        .iter()
        .map(|h| {
            let value = map(vec![(h.argo_kind, s(&h.argo_value))]);
            map(vec![("headers", map(vec![(h.name.as_str(), value)]))])
        })
        .collect();
    let destination = canary_destination(canary, first_port(weighted));
    let route = map(vec![
        ("destination", destination),
        ("weight", Yaml::Integer(100)),
    ]);
    map(vec![
        ("name", s(name)),
        ("match", Yaml::Array(matches)),
        ("route", Yaml::Array(vec![route])),
    ])
}

/// `weighted`'s destinations as Argo's mirror route copies them; `canary_at` says which of
/// them are the canary's.
fn mirror_route(
    name: &str,
    mirror: &MirrorRoute,
    canary: &Canary,
    weighted: &Yaml,
    canary_at: &[usize],
) -> Yaml {
    let mut route = Vec::new();
    if let Yaml::Array(destinations) = &weighted["route"] {
        for (j, d) in destinations.iter().enumerate() {
            let from = &d["destination"];
            let mut dest = Vec::new();
            for key in ["host", "subset"] {
                if let Some(text) = from[key].as_str().filter(|t| !t.is_empty()) {
                    dest.push((key, s(text)));
                }
            }
            if let Yaml::Integer(n) = &from["port"]["number"] {
                dest.push(("port", map(vec![("number", Yaml::Integer(*n))])));
            }
            let weight = match canary_at.contains(&j) {
                true => mirror.canary_weight,
                false => 100 - mirror.canary_weight.min(100),
            };
            let mut pairs = vec![("destination", map(dest))];
            if weight > 0 {
                pairs.push(("weight", Yaml::Integer(i64::from(weight))));
            }
            route.push(map(pairs));
        }
    }
    map(vec![
        ("name", s(name)),
        ("match", Yaml::Array(mirror.matches.clone())),
        ("route", Yaml::Array(route)),
        ("mirror", canary_destination(canary, first_port(weighted))),
        (
            "mirrorPercentage",
            map(vec![(
                "value",
                Yaml::Real(format!("{}.0", mirror.percentage)),
            )]),
        ),
    ])
}

/// The managed http routes of `active` (keys of [`ManagedRoute::argo_step`]), in the order
/// of `managedRoutes`, for a VirtualService whose weighted route is `weighted` (with its
/// canary destinations at `canary_at`).
pub fn routes(
    managed: &ManagedRoutes,
    active: &[u32],
    canary: &Canary,
    weighted: &Yaml,
    canary_at: &[usize],
) -> Vec<Yaml> {
    let mut out = Vec::new();
    for name in &managed.order {
        let set = active.iter().filter_map(|key| {
            managed
                .routes
                .iter()
                .find(|m| m.argo_step == *key && m.name == *name)
        });
        for m in set {
            out.push(match &m.managed {
                Managed::Header(headers) => header_route(&m.name, headers, canary, weighted),
                Managed::Mirror(mirror) => {
                    mirror_route(&m.name, mirror, canary, weighted, canary_at)
                }
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weighted() -> Yaml {
        yaml_rust2::YamlLoader::load_from_str(
            "route:\n- destination: {host: stable, port: {number: 80}}\n  weight: 80\n- destination: {host: canary, port: {number: 80}}\n  weight: 20\n",
        )
        .unwrap()
        .remove(0)
    }

    fn managed() -> ManagedRoutes {
        ManagedRoutes {
            routes: vec![
                ManagedRoute {
                    argo_step: 1,
                    name: "mirror".into(),
                    managed: Managed::Mirror(MirrorRoute {
                        matches: Vec::new(),
                        percentage: 50,
                        canary_weight: 100,
                    }),
                },
                ManagedRoute {
                    argo_step: 2,
                    name: "header".into(),
                    managed: Managed::Header(vec![HeaderMatch {
                        name: "x-canary".into(),
                        kind: "Exact",
                        value: "yes".into(),
                        argo_kind: "exact",
                        argo_value: "yes".into(),
                    }]),
                },
            ],
            order: vec!["header".into(), "mirror".into()],
        }
    }

    #[test]
    fn active_routes_follow_the_managed_routes_order() {
        let canary = Canary {
            host: "canary",
            subset: "",
        };
        let out = routes(&managed(), &[1, 2], &canary, &weighted(), &[1]);
        let names: Vec<_> = out.iter().map(|r| r["name"].as_str()).collect();
        assert_eq!(names, [Some("header"), Some("mirror")]);
        assert_eq!(
            out[0]["route"][0]["destination"]["port"]["number"].as_i64(),
            Some(80)
        );
        assert_eq!(
            out[0]["match"][0]["headers"]["x-canary"]["exact"].as_str(),
            Some("yes")
        );
        // The mirror route keeps the weights of its step; the stable's zero weight is left out.
        assert!(out[1]["route"][0]["weight"].is_badvalue());
        assert_eq!(out[1]["route"][1]["weight"].as_i64(), Some(100));
        assert_eq!(out[1]["mirror"]["host"].as_str(), Some("canary"));
        assert!(routes(&managed(), &[], &canary, &weighted(), &[1]).is_empty());
    }
}
