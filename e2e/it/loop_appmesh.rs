//! App Mesh canaries (`provider: appmesh:v1beta2`) through the loop against a `git daemon`
//! remote (the Istio loop's world): initialization, every step, promotion, rollback,
//! blue/green and A/B. At every sluice commit every document of the output folder that has a
//! strict schema passes it (the six App Mesh objects, the Deployments, Services), the apex
//! VirtualRouter's weighted route carries the status file's weights, and at the end `kubectl
//! kustomize` builds the folder.

use std::path::Path;

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::loop_support::{show, sluice_commits, World};
use crate::support::{git, Schemas};

const STATUS_FILE: &str = ".sluice/status/prod/podinfo.yaml";
const OUTPUT: &str = "clusters/prod/podinfo";
const ROUTE_FILE: &str = "clusters/prod/podinfo/route.yaml";

/// A Flagger canary as Flagger's App Mesh tutorial writes it, in `prod`.
fn canary(analysis: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: prod
  annotations:
    appmesh.flagger.app/accesslog: enabled
spec:
  provider: appmesh:v1beta2
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  service:
    port: 9898
    timeout: 15s
    retries:
      attempts: 3
      perTryTimeout: 5s
      retryOn: \"gateway-error,client-error,stream-error\"
    match:
      - uri:
          prefix: /
    rewrite:
      uri: /
  analysis:
    interval: 1s
    threshold: 2
{analysis}
"
    )
}

const STEPS: &str = "    stepWeight: 20\n    maxWeight: 60";
const BLUE_GREEN: &str = "    iterations: 3";
const AB: &str = "    iterations: 3
    match:
    - headers:
        x-canary:
          exact: \"insider\"";

/// Kinds sluice writes that have no strict schema (checked by kustomize and the API server).
const NO_SCHEMA: &[&str] = &["ConfigMap", "Secret", "Kustomization"];

/// Every sluice commit: every output document with a schema passes it; the route file holds
/// the six App Mesh objects, the apex router's first route carrying the status file's
/// weights (canary 100 on the header route during an A/B analysis, as Flagger) and the
/// trailer's. Returns the apex router's first-route weights, in order.
fn check_every_commit(bare: &Path, ab: bool) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut found = Vec::new();
    let commits = sluice_commits(bare);
    assert!(!commits.is_empty());
    for (sha, trailer) in commits {
        let files = git(
            bare,
            &["ls-tree", "--name-only", &sha, &format!("{OUTPUT}/")],
        );
        for file in files.lines().filter(|f| f.ends_with(".yaml")) {
            let docs: Vec<Json> = serde_saphyr::from_multiple(&show(bare, &sha, file)).unwrap();
            for doc in docs
                .iter()
                .filter(|d| !NO_SCHEMA.contains(&d["kind"].as_str().unwrap_or("")))
            {
                let errors = schemas.errors(doc);
                assert!(errors.is_empty(), "{sha} {file}: {errors:?}");
            }
        }
        let status: Json = serde_saphyr::from_str(&show(bare, &sha, STATUS_FILE)).unwrap();
        let docs: Vec<Json> = serde_saphyr::from_multiple(&show(bare, &sha, ROUTE_FILE)).unwrap();
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
        assert_eq!(routes.len(), if ab { 2 } else { 1 }, "{sha}");
        for route in routes {
            assert_eq!(route["httpRoute"]["retryPolicy"]["maxRetries"], 3);
            assert_eq!(route["httpRoute"]["timeout"]["perRequest"]["value"], 15000);
        }
        let targets = &routes[0]["httpRoute"]["action"]["weightedTargets"];
        assert_eq!(targets[0]["virtualNodeRef"]["name"], "podinfo-canary");
        assert_eq!(targets[1]["virtualNodeRef"]["name"], "podinfo-primary");
        let phase = status["phase"].as_str().unwrap();
        let expected = if ab && ["Progressing", "WaitingApproval"].contains(&phase) {
            (Json::from(0), Json::from(100))
        } else {
            (
                status["primaryWeight"].clone(),
                status["canaryWeight"].clone(),
            )
        };
        assert_eq!(
            (targets[1]["weight"].clone(), targets[0]["weight"].clone()),
            expected,
            "{sha} in phase {phase}"
        );
        if ab {
            assert_eq!(
                routes[0]["httpRoute"]["match"]["headers"][0],
                serde_json::json!({"name": "x-canary", "match": {"exact": "insider"}})
            );
            assert_eq!(
                routes[1]["httpRoute"]["action"]["weightedTargets"],
                serde_json::json!([{"virtualNodeRef": {"name": "podinfo-primary"}, "weight": 100}])
            );
        }
        assert_eq!(
            trailer,
            format!(
                "primary={} canary={}",
                status["primaryWeight"], status["canaryWeight"]
            ),
            "{sha}"
        );
        found.push(format!(
            "primary={} canary={}",
            targets[1]["weight"], targets[0]["weight"]
        ));
    }
    found
}

#[test]
fn appmesh_canary_steps_and_promotes_through_git_daemon() {
    let mut w = World::with_files(&canary(STEPS), &[]);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    let mut steps = check_every_commit(&w.bare, false);
    steps.dedup();
    assert_eq!(
        steps,
        [
            "primary=100 canary=0",
            "primary=80 canary=20",
            "primary=60 canary=40",
            "primary=40 canary=60",
            "primary=100 canary=0",
        ]
    );
    let last = sluice_commits(&w.bare).pop().unwrap().0;
    let primary = show(&w.bare, &last, "clusters/prod/podinfo/podinfo-primary.yaml");
    assert!(primary.contains("6.7.1"), "promoted: {primary}");
}

#[test]
fn appmesh_bluegreen_switches_all_traffic_after_its_iterations() {
    let mut w = World::with_files(&canary(BLUE_GREEN), &[]);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    let mut steps = check_every_commit(&w.bare, false);
    steps.dedup();
    assert_eq!(
        steps,
        [
            "primary=100 canary=0",
            "primary=0 canary=100",
            "primary=100 canary=0",
        ]
    );
}

#[test]
fn appmesh_ab_routes_matching_requests_then_promotes() {
    let mut w = World::with_files(&canary(AB), &[]);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    let mut steps = check_every_commit(&w.bare, true);
    steps.dedup();
    assert_eq!(
        steps,
        [
            "primary=100 canary=0",
            "primary=0 canary=100",
            "primary=100 canary=0",
        ]
    );
}

#[test]
fn appmesh_rollback_routes_everything_back_to_the_primary() {
    // The offline observer never observes a metric, so every check fails.
    let analysis = format!(
        "{STEPS}\n    metrics:\n      - name: request-success-rate\n        thresholdRange: {{min: 99}}"
    );
    let mut w = World::with_files(&canary(&analysis), &[]);
    w.until(Phase::Initialized);
    let primary_before = show(
        &w.bare,
        "main",
        "clusters/prod/podinfo/podinfo-primary.yaml",
    );
    w.new_revision("6.7.1");
    w.until(Phase::Failed);
    let weights = check_every_commit(&w.bare, false);
    assert!(
        weights.iter().any(|t| t == "primary=80 canary=20"),
        "traffic reached the canary before the rollback: {weights:?}"
    );
    assert_eq!(weights.last().unwrap(), "primary=100 canary=0");
    assert_eq!(
        show(
            &w.bare,
            "main",
            "clusters/prod/podinfo/podinfo-primary.yaml"
        ),
        primary_before,
        "the primary keeps the old version"
    );
}
