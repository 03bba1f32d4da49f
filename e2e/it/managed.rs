//! Managed workloads through the loop: Flagger's event sequence in git history, each commit
//! touching only what its step changes, config-only changes, reverts, rollbacks, bad sources.

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::manifests::{CONFIGS, DEPLOYMENT, FLAGGER_CANARY};
use crate::support::output_files;
use crate::support::{git, Schemas, World};

const OUT: &str = "clusters/prod/podinfo";

/// The podinfo source, its configs and `canary`, in a bare repo reached by its path.
fn world(canary: &str) -> World {
    World::local(&[
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        ("apps/podinfo/configs.yaml", CONFIGS),
        ("apps/podinfo/canary.yaml", canary),
    ])
}

/// (subject, first body paragraph = the Flagger events, files changed) of sluice commits,
/// oldest first.
fn commits(w: &World) -> Vec<(String, Vec<String>, Vec<String>)> {
    w.commits()
        .into_iter()
        .map(|c| (c.subject, c.events, c.files))
        .collect()
}

fn files(names: &[&str]) -> Vec<String> {
    output_files(OUT, names)
}

const STATUS: &str = ".sluice/status/prod/podinfo.yaml";

/// `file` of the output folder on main.
fn at_main(w: &World, file: &str) -> String {
    git(&w.bare, &["show", &format!("main:{OUT}/{file}")])
}

/// The status file on main.
fn status_at_main(w: &World) -> Json {
    serde_saphyr::from_str(&git(&w.bare, &["show", &format!("main:{STATUS}")])).unwrap()
}

#[test]
fn seed_scenario_writes_flaggers_event_sequence_and_minimal_commits() {
    let mut w = world(FLAGGER_CANARY);
    w.until(Phase::Initialized);
    w.human_bumps_podinfo();
    w.until(Phase::Succeeded);

    let commits = commits(&w);
    let events: Vec<String> = commits.iter().flat_map(|(_, e, _)| e.clone()).collect();
    let mut expected = vec![
        "Initialization done! podinfo.prod".to_string(),
        "New revision detected! Scaling up podinfo.prod".to_string(),
        "Starting canary analysis for podinfo.prod".to_string(),
    ];
    for w in [10, 20, 30, 40, 50] {
        expected.push(format!("Advance podinfo.prod canary weight {w}"));
    }
    expected.push("Copying podinfo.prod template spec to podinfo-primary.prod".into());
    for w in (55..=100).step_by(5) {
        expected.push(format!("Advance podinfo.prod primary weight {w}"));
    }
    expected.push("Promotion completed! Scaling down podinfo.prod".into());
    assert_eq!(events, expected);

    // Each commit touches only what its step changes.
    let all = files(&[
        "kustomization.yaml",
        "podinfo-canary.yaml",
        "podinfo-primary.yaml",
        "route.yaml",
        "services.yaml",
        STATUS,
    ]);
    assert!(commits.len() > 18, "{commits:?}");
    for (i, (subject, _, changed)) in commits.iter().enumerate().take(19) {
        let (expected, why) = match i {
            0 => (all.clone(), "initialization writes everything"),
            1 | 18 => (
                files(&["podinfo-canary.yaml", STATUS]),
                "scaling up and finalising touch the canary only",
            ),
            7 => (
                files(&["podinfo-primary.yaml", STATUS]),
                "promotion copies the spec only",
            ),
            _ => (
                files(&["route.yaml", STATUS]),
                "a step moves the route only",
            ),
        };
        assert_eq!(changed, &expected, "commit {i} ({subject}): {why}");
    }

    // Every Deployment and Service at every commit matches the strict schemas.
    let mut schemas = Schemas::default();
    let shas = git(&w.bare, &["log", "--format=%H", "--author=sluice", "main"]);
    for sha in shas.lines() {
        for f in [
            "podinfo-canary.yaml",
            "podinfo-primary.yaml",
            "services.yaml",
        ] {
            let text = git(&w.bare, &["show", &format!("{sha}:{OUT}/{f}")]);
            let docs: Vec<Json> = serde_saphyr::from_multiple(&text).unwrap();
            for doc in docs
                .iter()
                .filter(|d| d["kind"] == "Deployment" || d["kind"] == "Service")
            {
                let errors = schemas.errors(doc);
                assert!(errors.is_empty(), "{sha} {f}: {errors:?}");
            }
        }
    }
    let primary = at_main(&w, "podinfo-primary.yaml");
    assert!(
        primary.contains("podinfo:6.7.1"),
        "the primary runs the promoted image"
    );
    let canary = at_main(&w, "podinfo-canary.yaml");
    assert!(canary.contains("replicas: 0"));
}

#[test]
fn config_map_change_alone_starts_an_analysis() {
    let mut w = world(FLAGGER_CANARY);
    w.until(Phase::Initialized);
    w.human_writes(
        "apps/podinfo/configs.yaml",
        &CONFIGS.replace("level: info", "level: debug"),
        "podinfo: debug logs",
    );
    let r = w.tick();
    assert_eq!(
        r.outcomes[0].events,
        vec!["New revision detected! Scaling up podinfo.prod"]
    );
    w.until(Phase::Succeeded);
    let primary = at_main(&w, "podinfo-primary.yaml");
    assert!(primary.contains("name: podinfo-files-primary"), "{primary}");
    assert!(
        primary.contains("level: debug"),
        "the primary's config copy is promoted: {primary}"
    );
}

#[test]
fn reverting_the_source_mid_analysis_cancels_without_a_new_analysis() {
    let mut w = world(FLAGGER_CANARY);
    w.until(Phase::Initialized);
    w.human_bumps_podinfo();
    for _ in 0..3 {
        w.tick();
    }
    let status = status_at_main(&w);
    assert_eq!(status["canaryWeight"], 20);
    w.human_writes(
        "apps/podinfo/deployment.yaml",
        DEPLOYMENT,
        "podinfo: back to 6.7.0",
    );
    let r = w.tick();
    assert!(
        r.outcomes[0]
            .committed
            .as_deref()
            .unwrap_or_default()
            .contains("analysis cancelled"),
        "{r:?}"
    );
    let status = status_at_main(&w);
    assert_eq!(
        (
            status["primaryWeight"].as_u64(),
            status["canaryWeight"].as_u64()
        ),
        (Some(100), Some(0))
    );
    assert_eq!(status["phase"], "Initialized");
    for _ in 0..5 {
        assert_eq!(
            w.tick().commits,
            0,
            "no new analysis for the promoted revision"
        );
    }
}

#[test]
fn rollback_routes_back_and_scales_down_leaving_the_primary_untouched() {
    // Offline observer: a declared metric is never observed, so every check fails.
    let canary = FLAGGER_CANARY.replace(
        "    stepWeightPromotion: 5\n",
        "    stepWeightPromotion: 5\n    metrics:\n      - name: request-success-rate\n        thresholdRange: {min: 99}\n",
    );
    let mut w = world(&canary);
    w.until(Phase::Initialized);
    let primary_before = at_main(&w, "podinfo-primary.yaml");
    w.human_bumps_podinfo();
    w.until(Phase::Failed);
    let last = commits(&w).pop().unwrap();
    assert!(
        last.0
            .contains("roll back: failed checks threshold reached 2"),
        "{}",
        last.0
    );
    assert!(
        last.0.contains("request-success-rate not observed"),
        "{}",
        last.0
    );
    assert_eq!(
        last.2,
        files(&["podinfo-canary.yaml", "route.yaml", STATUS])
    );
    assert_eq!(at_main(&w, "podinfo-primary.yaml"), primary_before);
}

#[test]
fn a_bad_source_stops_only_its_own_canary() {
    let route_only = "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  routeOnly: {services: [a, b], revision: v1}\n  service: {port: 80}\n  route: {apiVersion: split.smi-spec.io/v1alpha2, kind: TrafficSplit}\n  analysis: {stepWeight: 50}\n";
    let missing = FLAGGER_CANARY
        .replace(
            "name: podinfo\n  namespace: prod",
            "name: ghost\n  namespace: prod",
        )
        .replace("    name: podinfo\n  service", "    name: ghost\n  service");
    let mut w = World::local(&[("apps/web.yaml", route_only), ("apps/ghost.yaml", &missing)]);
    let r = w.tick();
    assert_eq!(r.commits, 1, "{r:?}");
    let ghost = r.outcomes.iter().find(|o| o.id == "prod/ghost").unwrap();
    assert!(
        ghost
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("source not found: expected Deployment prod/ghost"),
        "{ghost:?}"
    );
    let web = r.outcomes.iter().find(|o| o.id == "shop/web").unwrap();
    assert!(web.committed.is_some());
}
