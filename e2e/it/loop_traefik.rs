//! Traefik canaries through the loop against a `git daemon` remote (the Istio loop's world):
//! initialization, every step, promotion, rollback and blue/green. At every sluice commit
//! `route.yaml` holds one TraefikService that passes Traefik's strict schema, weighing the
//! Services as the status file says.

use std::path::Path;

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::loop_istio::{show, sluice_commits, World};
use crate::support::Schemas;

const STATUS_FILE: &str = ".sluice/status/prod/podinfo.yaml";
const ROUTE_FILE: &str = "clusters/prod/podinfo/route.yaml";

fn canary(analysis: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: prod
spec:
  provider: traefik
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  service:
    port: 80
    targetPort: 9898
  analysis:
    interval: 1s
    threshold: 2
{analysis}
"
    )
}

const STEPS: &str = "    stepWeight: 20\n    maxWeight: 60";

/// Every sluice commit: one schema-valid TraefikService carrying the status file's weights
/// (the trailer's too), the canary listed only with traffic. Returns the weights, in order.
fn check_every_commit(bare: &Path) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut found = Vec::new();
    let commits = sluice_commits(bare);
    assert!(!commits.is_empty());
    for (sha, trailer) in commits {
        let status: Json = serde_saphyr::from_str(&show(bare, &sha, STATUS_FILE)).unwrap();
        let docs: Vec<Json> = serde_saphyr::from_multiple(&show(bare, &sha, ROUTE_FILE)).unwrap();
        assert_eq!(docs.len(), 1, "{sha}");
        let errors = schemas.errors(&docs[0]);
        assert!(errors.is_empty(), "{sha}: {errors:?}");
        assert_eq!(docs[0]["kind"], "TraefikService");
        let services = docs[0]["spec"]["weighted"]["services"].as_array().unwrap();
        assert_eq!(services[0]["name"], "podinfo-primary");
        let primary = services[0]["weight"].as_u64().unwrap();
        let canary = match services.get(1) {
            Some(s) => {
                assert_eq!(s["name"], "podinfo-canary");
                s["weight"].as_u64().unwrap()
            }
            None => 0,
        };
        assert_eq!(
            (Json::from(primary), Json::from(canary)),
            (
                status["primaryWeight"].clone(),
                status["canaryWeight"].clone()
            ),
            "{sha}"
        );
        let weights = format!("primary={primary} canary={canary}");
        assert_eq!(trailer, weights, "{sha}");
        found.push(weights);
    }
    found
}

#[test]
fn traefik_canary_steps_and_promotes_through_git_daemon() {
    let mut w = World::new(&canary(STEPS));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    let mut steps = check_every_commit(&w.bare);
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
fn traefik_bluegreen_switches_all_traffic_after_its_iterations() {
    let mut w = World::new(&canary("    iterations: 3"));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    let mut steps = check_every_commit(&w.bare);
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
fn traefik_rollback_routes_everything_back_to_the_primary() {
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
    let weights = check_every_commit(&w.bare);
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
