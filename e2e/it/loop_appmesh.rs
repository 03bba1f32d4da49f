//! App Mesh canaries (`provider: appmesh:v1beta2`) through the loop against a `git daemon`
//! remote, run by the rollout harness (`loop_support`): initialization, every step,
//! promotion, rollback, blue/green and A/B. At every sluice commit every document of the output folder that has a
//! strict schema passes it (the six App Mesh objects, the Deployments, Services), the apex
//! VirtualRouter's weighted route carries the status file's weights, and at the end `kubectl
//! kustomize` builds the folder.

use serde_json::json;

use crate::support::canary::{insider_ab, podinfo};
use crate::support::manifests::{APPMESH_TUTORIAL_META, APPMESH_TUTORIAL_SERVICE};
use crate::support::rollout::{show, weights, Commit, Provider, OUTPUT};
use crate::support::{git, Schemas};

/// A Flagger canary as Flagger's App Mesh tutorial writes it, in `prod`.
fn canary(analysis: &str) -> String {
    podinfo()
        .metadata(&format!("{APPMESH_TUTORIAL_META}\n"))
        .provider("appmesh:v1beta2")
        .service(APPMESH_TUTORIAL_SERVICE)
        .yaml(analysis)
}

/// Kinds sluice writes that have no strict schema (checked by kustomize and the API server).
const NO_SCHEMA: &[&str] = &["ConfigMap", "Secret", "Kustomization"];

/// One sluice commit: every output document with a schema passes it; the route file holds
/// the six App Mesh objects, the apex router's first route weighing the virtual nodes
/// (canary 100 on the header route during an A/B analysis, as Flagger). Returns the apex
/// router's first-route weights.
fn route(c: &Commit) -> String {
    let (bare, sha) = (c.bare, c.sha);
    let mut schemas = Schemas::default();
    let files = git(
        bare,
        &["ls-tree", "--name-only", sha, &format!("{OUTPUT}/")],
    );
    for file in files.lines().filter(|f| f.ends_with(".yaml")) {
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&show(bare, sha, file)).unwrap();
        for doc in docs
            .iter()
            .filter(|d| !NO_SCHEMA.contains(&d["kind"].as_str().unwrap_or("")))
        {
            let errors = schemas.errors(doc);
            assert!(errors.is_empty(), "{sha} {file}: {errors:?}");
        }
    }
    let docs = c.docs;
    let kinds: Vec<String> = docs
        .iter()
        .map(|d| format!("{} {}", d["kind"].as_str().unwrap(), d["metadata"]["name"]))
        .collect();
    assert_eq!(
        kinds,
        [
            "VirtualNode \"podinfo-primary\"",
            "VirtualNode \"podinfo-canary\"",
            "VirtualRouter \"podinfo\"",
            "VirtualService \"podinfo\"",
            "VirtualRouter \"podinfo-canary\"",
            "VirtualService \"podinfo-canary\"",
        ],
        "{sha}"
    );
    assert_eq!(
        docs[0]["spec"]["podSelector"]["matchLabels"]["app"],
        "podinfo-primary"
    );
    assert_eq!(
        docs[1]["spec"]["podSelector"]["matchLabels"]["app"],
        "podinfo"
    );
    let routes = docs[2]["spec"]["routes"].as_array().unwrap();
    assert_eq!(routes.len(), if c.ab { 2 } else { 1 }, "{sha}");
    for route in routes {
        assert_eq!(route["httpRoute"]["retryPolicy"]["maxRetries"], 3);
        assert_eq!(route["httpRoute"]["timeout"]["perRequest"]["value"], 15000);
    }
    let targets = &routes[0]["httpRoute"]["action"]["weightedTargets"];
    assert_eq!(targets[0]["virtualNodeRef"]["name"], "podinfo-canary");
    assert_eq!(targets[1]["virtualNodeRef"]["name"], "podinfo-primary");
    if c.ab {
        assert_eq!(
            routes[0]["httpRoute"]["match"]["headers"][0],
            json!({"name": "x-canary", "match": {"exact": "insider"}})
        );
        assert_eq!(
            routes[1]["httpRoute"]["action"]["weightedTargets"],
            json!([{"virtualNodeRef": {"name": "podinfo-primary"}, "weight": 100}])
        );
    }
    weights(&targets[1]["weight"], &targets[0]["weight"])
}

const APPMESH: Provider = Provider::without_files(canary, route);

#[test]
fn appmesh_canary_steps_and_promotes_through_git_daemon() {
    APPMESH.steps_and_promotes();
}

#[test]
fn appmesh_bluegreen_switches_all_traffic_after_its_iterations() {
    APPMESH.bluegreen_switches();
}

#[test]
fn appmesh_ab_routes_matching_requests_then_promotes() {
    APPMESH.ab_routes_and_promotes(&insider_ab(3));
}

#[test]
fn appmesh_rollback_routes_everything_back_to_the_primary() {
    APPMESH.rolls_back();
}
