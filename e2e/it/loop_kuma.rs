//! Kuma canaries through the loop (`loop_support`): initialization, every step, promotion,
//! rollback and blue/green (Flagger has no A/B for Kuma; `route_kuma_gloo.rs` checks it is
//! refused). At every sluice commit `route.yaml` holds one cluster-scoped TrafficRoute in the
//! Canary's mesh whose split carries the status file's weights.

use serde_json::Value as Json;

use crate::support::canary::podinfo;
use crate::support::rollout::{weights, Commit, Provider};

/// The canary of Flagger's `test/kuma/test-canary.sh`, in `prod`, in a mesh of its own.
fn canary(analysis: &str) -> String {
    podinfo()
        .metadata("  annotations:\n    kuma.io/mesh: prod-mesh\n")
        .provider("kuma")
        .service(
            "    port: 9898
    targetPort: 9898
    apex:
      annotations:
        9898.service.kuma.io/protocol: \"http\"
    canary:
      annotations:
        9898.service.kuma.io/protocol: \"http\"
    primary:
      annotations:
        9898.service.kuma.io/protocol: \"http\"",
        )
        .yaml(analysis)
}

/// One TrafficRoute without a namespace, in `prod-mesh`, splitting the apex between the
/// primary and the canary.
fn route(c: &Commit) -> String {
    let doc = c.only_doc("TrafficRoute");
    assert_eq!(doc["metadata"].get("namespace"), None, "cluster-scoped");
    assert_eq!(doc["mesh"], "prod-mesh");
    assert_eq!(
        doc["spec"]["destinations"][0]["match"]["kuma.io/service"],
        "podinfo_prod_svc_9898"
    );
    let split = doc["spec"]["conf"]["split"].as_array().unwrap();
    let weight = |service: &str| {
        split
            .iter()
            .find(|s| s["destination"]["kuma.io/service"] == service)
            .map_or(Json::from(0), |s| s["weight"].clone())
    };
    weights(
        &weight("podinfo-primary_prod_svc_9898"),
        &weight("podinfo-canary_prod_svc_9898"),
    )
}

const KUMA: Provider = Provider::without_files(canary, route);

#[test]
fn kuma_canary_steps_and_promotes_through_git_daemon() {
    KUMA.steps_and_promotes();
}

#[test]
fn kuma_bluegreen_switches_all_traffic_after_its_iterations() {
    KUMA.bluegreen_switches();
}

#[test]
fn kuma_rollback_routes_everything_back_to_the_primary() {
    KUMA.rolls_back();
}
