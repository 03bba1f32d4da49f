//! Traefik canaries through the loop (`loop_support`): initialization, every step,
//! promotion, rollback and blue/green. At every sluice commit `route.yaml` holds one
//! TraefikService weighing the Services as the status file says.

use crate::support::canary::traefik;
use crate::support::rollout::{Commit, Provider};

fn canary(analysis: &str) -> String {
    traefik().yaml(analysis)
}

/// One TraefikService, the canary listed only with traffic.
fn route(c: &Commit) -> String {
    assert_eq!(c.docs.len(), 1, "{}", c.sha);
    assert_eq!(c.docs[0]["kind"], "TraefikService");
    let services = c.docs[0]["spec"]["weighted"]["services"]
        .as_array()
        .unwrap();
    assert_eq!(services[0]["name"], "podinfo-primary");
    let primary = services[0]["weight"].as_u64().unwrap();
    let canary = match services.get(1) {
        Some(s) => {
            assert_eq!(s["name"], "podinfo-canary");
            s["weight"].as_u64().unwrap()
        }
        None => 0,
    };
    format!("primary={primary} canary={canary}")
}

const TRAEFIK: Provider = Provider::without_files(canary, route);

#[test]
fn traefik_canary_steps_and_promotes_through_git_daemon() {
    TRAEFIK.steps_and_promotes();
}

#[test]
fn traefik_bluegreen_switches_all_traffic_after_its_iterations() {
    TRAEFIK.bluegreen_switches();
}

#[test]
fn traefik_rollback_routes_everything_back_to_the_primary() {
    TRAEFIK.rolls_back();
}
