//! Gloo canaries through the loop (`loop_support`): initialization, every step, promotion,
//! rollback, blue/green and A/B. At every sluice commit `route.yaml` holds the primary and
//! canary Upstreams (with the settings of the canary's `upstreamRef`) and the RouteTable
//! whose weighted route carries the status file's weights.

use serde_json::Value as Json;

use crate::support::canary::{insider_ab, object_ref, podinfo};
use crate::support::manifests::GLOO_CONFIG_UPSTREAM;
use crate::support::rollout::{weights, Commit, Provider};

/// The canary of Flagger's `test/gloo/test-canary.sh`, in `prod`, with its config upstream.
fn canary(analysis: &str) -> String {
    podinfo()
        .provider("gloo")
        .refs(&format!(
            "{}    namespace: gloo-system\n",
            object_ref(
                "upstreamRef",
                "gloo.solo.io/v1",
                "Upstream",
                "config-upstream"
            )
        ))
        .service("    port: 80\n    targetPort: 9898")
        .yaml(analysis)
}

const PRIMARY: &str = "prod-podinfo-primaryupstream-80";
const CANARY: &str = "prod-podinfo-canaryupstream-80";

/// The two Upstreams with the referenced settings, then the RouteTable; for A/B, the header
/// route then the primary route. The first route's weights.
fn route(c: &Commit) -> String {
    assert_eq!(c.docs.len(), 3, "{}", c.sha);
    for (doc, name, service) in [
        (&c.docs[0], PRIMARY, "podinfo-primary"),
        (&c.docs[1], CANARY, "podinfo-canary"),
    ] {
        assert_eq!(doc["kind"], "Upstream");
        assert_eq!(doc["metadata"]["name"], name);
        assert_eq!(doc["spec"]["kube"]["serviceName"], service);
        assert_eq!(
            doc["spec"]["connectionConfig"]["maxRequestsPerConnection"],
            51
        );
    }
    let table = &c.docs[2];
    assert_eq!(table["kind"], "RouteTable");
    assert_eq!(table["metadata"]["name"], "podinfo");
    let routes = table["spec"]["routes"].as_array().unwrap();
    assert_eq!(routes.len(), if c.ab { 2 } else { 1 }, "{}", c.sha);
    if c.ab {
        assert_eq!(
            routes[0]["matchers"][0]["headers"][0],
            serde_json::json!({"name": "x-canary", "value": "insider"})
        );
        let rest = &routes[1]["routeAction"]["multi"]["destinations"];
        assert_eq!(rest[0]["destination"]["upstream"]["name"], PRIMARY);
        assert_eq!(rest[0]["weight"], 100);
    }
    let destinations = routes[0]["routeAction"]["multi"]["destinations"]
        .as_array()
        .unwrap();
    let weight = |upstream: &str| {
        destinations
            .iter()
            .find(|d| d["destination"]["upstream"]["name"] == upstream)
            .map_or(Json::from(0), |d| d["weight"].clone())
    };
    weights(&weight(PRIMARY), &weight(CANARY))
}

fn files() -> Vec<(&'static str, String)> {
    vec![(
        "infra/gloo/config-upstream.yaml",
        GLOO_CONFIG_UPSTREAM.to_string(),
    )]
}

const GLOO: Provider = Provider {
    canary,
    files,
    route,
};

#[test]
fn gloo_canary_steps_and_promotes_through_git_daemon() {
    GLOO.steps_and_promotes();
}

#[test]
fn gloo_bluegreen_switches_all_traffic_after_its_iterations() {
    GLOO.bluegreen_switches();
}

#[test]
fn gloo_ab_routes_matching_requests_then_promotes() {
    GLOO.ab_routes_and_promotes(&insider_ab(3));
}

#[test]
fn gloo_rollback_routes_everything_back_to_the_primary() {
    GLOO.rolls_back();
}
