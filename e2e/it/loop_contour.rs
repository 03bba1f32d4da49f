//! Contour canaries through the loop against a `git daemon` remote (the Istio loop's world):
//! initialization, every step, promotion, rollback, blue/green and A/B. At every sluice commit
//! `route.yaml` holds one HTTPProxy that passes Contour's strict schema, and its weighted
//! route carries the status file's weights.

use std::path::Path;

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::loop_istio::{show, sluice_commits, World};
use crate::support::Schemas;

const STATUS_FILE: &str = ".sluice/status/prod/podinfo.yaml";
const ROUTE_FILE: &str = "clusters/prod/podinfo/route.yaml";

/// A Flagger canary as Flagger's Contour tutorial writes it: timeout and retries.
fn canary(analysis: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: prod
spec:
  provider: contour
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  service:
    port: 80
    targetPort: 9898
    timeout: 15s
    retries: {{attempts: 3, perTryTimeout: 5s, retryOn: \"5xx\"}}
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
            exact: insider";

/// Every sluice commit: one schema-valid HTTPProxy whose first route carries the status
/// file's weights (the trailer's too); for A/B, the header route then the primary route.
/// Returns the first route's weights, in order.
fn check_every_commit(bare: &Path, ab: bool) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut found = Vec::new();
    let commits = sluice_commits(bare);
    assert!(!commits.is_empty());
    for (sha, trailer) in commits {
        let status: Json = serde_saphyr::from_str(&show(bare, &sha, STATUS_FILE)).unwrap();
        let docs: Vec<Json> = serde_saphyr::from_multiple(&show(bare, &sha, ROUTE_FILE)).unwrap();
        assert_eq!(docs.len(), 1, "{sha}");
        let proxy = &docs[0];
        let errors = schemas.errors(proxy);
        assert!(errors.is_empty(), "{sha}: {errors:?}");
        assert_eq!(proxy["kind"], "HTTPProxy");
        assert_eq!(proxy["metadata"]["name"], "podinfo");
        let routes = proxy["spec"]["routes"].as_array().unwrap();
        assert_eq!(routes.len(), if ab { 2 } else { 1 }, "{sha}");
        for route in routes {
            assert_eq!(route["timeoutPolicy"]["response"], "15s");
            assert_eq!(route["retryPolicy"]["count"], 3);
        }
        let services = &routes[0]["services"];
        assert_eq!(services[0]["name"], "podinfo-primary");
        assert_eq!(services[1]["name"], "podinfo-canary");
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
            (services[0]["weight"].clone(), services[1]["weight"].clone()),
            expected,
            "{sha} in phase {phase}"
        );
        if ab {
            assert_eq!(routes[0]["conditions"][0]["header"]["exact"], "insider");
            assert_eq!(routes[1]["services"][0]["weight"], 100);
            assert_eq!(routes[1]["services"][1]["weight"], 0);
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
            services[0]["weight"], services[1]["weight"]
        ));
    }
    found
}

#[test]
fn contour_canary_steps_and_promotes_through_git_daemon() {
    let mut w = World::new(&canary(STEPS));
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
fn contour_bluegreen_switches_all_traffic_after_its_iterations() {
    let mut w = World::new(&canary(BLUE_GREEN));
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
fn contour_ab_routes_matching_requests_then_promotes() {
    let mut w = World::new(&canary(AB));
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
fn contour_rollback_routes_everything_back_to_the_primary() {
    // The offline observer never observes a metric, so every check fails.
    let analysis = format!(
        "{STEPS}\n    metrics:\n      - name: request-success-rate\n        thresholdRange: {{min: 99}}"
    );
    let mut w = World::new(&canary(&analysis));
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
