//! Contour canaries through the loop (`loop_support`): initialization, every step,
//! promotion, rollback, blue/green and A/B. At every sluice commit `route.yaml` holds one
//! HTTPProxy whose weighted route carries the status file's weights, with the canary's
//! timeout and retries on every route.

use crate::support::canary::{insider_ab, podinfo};
use crate::support::rollout::{weights, Commit, Provider};

/// A Flagger canary as Flagger's Contour tutorial writes it: timeout and retries.
fn canary(analysis: &str) -> String {
    podinfo()
        .provider("contour")
        .service(
            "    port: 80
    targetPort: 9898
    timeout: 15s
    retries: {attempts: 3, perTryTimeout: 5s, retryOn: \"5xx\"}",
        )
        .yaml(analysis)
}

/// One HTTPProxy; for A/B, the header route then the primary route. The first route's
/// weights.
fn route(c: &Commit) -> String {
    let proxy = c.only_doc("HTTPProxy");
    let routes = proxy["spec"]["routes"].as_array().unwrap();
    assert_eq!(routes.len(), if c.ab { 2 } else { 1 }, "{}", c.sha);
    for route in routes {
        assert_eq!(route["timeoutPolicy"]["response"], "15s");
        assert_eq!(route["retryPolicy"]["count"], 3);
    }
    let services = &routes[0]["services"];
    assert_eq!(services[0]["name"], "podinfo-primary");
    assert_eq!(services[1]["name"], "podinfo-canary");
    if c.ab {
        assert_eq!(routes[0]["conditions"][0]["header"]["exact"], "insider");
        assert_eq!(routes[1]["services"][0]["weight"], 100);
        assert_eq!(routes[1]["services"][1]["weight"], 0);
    }
    weights(&services[0]["weight"], &services[1]["weight"])
}

const CONTOUR: Provider = Provider::without_files(canary, route);

#[test]
fn contour_canary_steps_and_promotes_through_git_daemon() {
    CONTOUR.steps_and_promotes();
}

#[test]
fn contour_bluegreen_switches_all_traffic_after_its_iterations() {
    CONTOUR.bluegreen_switches();
}

#[test]
fn contour_ab_routes_matching_requests_then_promotes() {
    CONTOUR.ab_routes_and_promotes(&insider_ab(3));
}

#[test]
fn contour_rollback_routes_everything_back_to_the_primary() {
    CONTOUR.rolls_back();
}
