//! Argo Rollouts canaries with trafficRouting (the Gateway API plugin's HTTPRoute) that scale
//! their workloads beyond the traffic share: `setCanaryScale` steps (`replicas`, `weight`,
//! `matchTrafficWeight`) and `dynamicStableScale`. At every sluice commit each output
//! document passes its strict schema and both workloads run the counts Argo settles on for
//! the status file's step and weight (`CalculateReplicaCountsForTrafficRoutedCanary`):
//! 5 replicas; `setCanaryScale replicas 2` at 20 % is 2 canary pods; `weight 80` at 50 % is 4;
//! `matchTrafficWeight` at 80 % is 4 again. With `dynamicStableScale` the stable runs the
//! larger of its desired and its traffic share (5, 3, 1), otherwise all 5; promoted or idle,
//! the stable runs 5. `sluice plan` lists the steps and the counts.

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::rollout::{
    distinct, docs_at, podinfo_rollout, services, show, sluice_commits, CANARY_WORKLOAD, OUTPUT,
    ROLLOUT_FILE, ROUTE_FILE, SERVICES_FILE, STABLE_FILE, STATUS_FILE, TIMED_WEIGHTS,
};
use crate::support::route_sources::route_head;
use crate::support::{run_sluice, Schemas, World};

/// Timed steps, each weight with its own canary scale.
const SCALED: &str = "        - setCanaryScale: {replicas: 2}
        - setWeight: 20
        - pause: {duration: 30s}
        - setCanaryScale: {weight: 80}
        - setWeight: 50
        - pause: {duration: 1m}
        - setCanaryScale: {matchTrafficWeight: true}
        - setWeight: 80";

/// The Rollout: the plugin's HTTPRoute, [`SCALED`] steps, `dynamicStableScale` when `dynamic`.
fn rollout(version: &str, dynamic: bool) -> String {
    let dynamic = if dynamic {
        "      dynamicStableScale: true\n"
    } else {
        ""
    };
    podinfo_rollout(
        version,
        &format!(
            "      canaryService: podinfo-canary
      stableService: podinfo-stable
{dynamic}      trafficRouting:
        plugins:
          argoproj-labs/gatewayAPI:
            httpRoute: podinfo-public
            namespace: prod
      steps:
{SCALED}
"
        ),
    )
}

/// The user's HTTPRoute: one rule to both Services.
fn route() -> String {
    route_head("v1", "HTTPRoute", "https")
        + "  rules:
    - backendRefs:
        - {name: podinfo-stable, port: 9898, weight: 100}
        - {name: podinfo-canary, port: 9898, weight: 0}
"
}

fn world(dynamic: bool) -> World {
    World::served(&[
        (ROLLOUT_FILE, &rollout("6.7.0", dynamic)),
        ("apps/podinfo/services.yaml", &services()),
        ("apps/podinfo/route.yaml", &route()),
    ])
    .building(OUTPUT)
}

/// The `(canary, stable)` pods Argo runs at `step` of [`SCALED`] (5 replicas), written down
/// by hand from Argo's `CalculateReplicaCountsForTrafficRoutedCanary`.
fn argo_pods(step: u64, dynamic: bool) -> (u64, u64) {
    let (canary, dynamic_stable) = match step {
        // replicas 2, from the new revision on (Argo scales before the first setWeight);
        // the desired canary weight is 0, so the stable keeps all 5.
        0 | 1 => (2, 5),
        // weight 80 (4 pods); the stable: max(20 % desired, 50 % traffic) of 5 = 3.
        2 => (4, 3),
        // matchTrafficWeight at 80 %: 4 canary pods, the stable's 20 % = 1.
        3 => (4, 1),
        other => panic!("no step {other} in the steps"),
    };
    (canary, if dynamic { dynamic_stable } else { 5 })
}

/// Every sluice commit: every output document schema-valid; at a step both workloads at
/// Argo's counts; promoting, the canary at its traffic share and the stable at 5; idle, the
/// canary at 0. Returns the weights, in order.
fn check_every_commit(w: &World, dynamic: bool) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut found = Vec::new();
    for (sha, trailer) in sluice_commits(&w.bare) {
        let status: Json = serde_saphyr::from_str(&show(&w.bare, &sha, STATUS_FILE)).unwrap();
        for file in [ROUTE_FILE, STABLE_FILE, CANARY_WORKLOAD, SERVICES_FILE] {
            for doc in docs_at(&w.bare, &sha, file) {
                schemas.assert_valid(&doc, &format!("{sha} {file}"));
            }
        }
        let (stable_w, canary_w) = (
            status["primaryWeight"].as_u64().unwrap(),
            status["canaryWeight"].as_u64().unwrap(),
        );
        let want = match status["phase"].as_str().unwrap() {
            "Progressing" | "WaitingApproval" => {
                argo_pods(status["step"].as_u64().unwrap(), dynamic)
            }
            "Promoting" | "Finalising" => ((5 * canary_w).div_ceil(100).max(1), 5),
            _ if canary_w > 0 => ((5 * canary_w).div_ceil(100), 5),
            _ => (0, 5),
        };
        let replicas = |file: &str| docs_at(&w.bare, &sha, file)[0]["spec"]["replicas"].as_u64();
        assert_eq!(
            (replicas(CANARY_WORKLOAD), replicas(STABLE_FILE)),
            (Some(want.0), Some(want.1)),
            "{sha}: Argo's pods at {status:?}"
        );
        let weights = format!("primary={stable_w} canary={canary_w}");
        assert_eq!(trailer, weights, "{sha}: trailer and status agree");
        found.push(weights);
    }
    found
}

/// The Rollout from 6.7.0 to 6.7.1, through its steps to promotion.
fn promoted(dynamic: bool) -> World {
    let mut w = world(dynamic);
    w.until(Phase::Initialized);
    w.human_writes(ROLLOUT_FILE, &rollout("6.7.1", dynamic), "podinfo: 6.7.1");
    w.until(Phase::Succeeded);
    crate::support::rollout::kustomize_builds(&w.bare, OUTPUT);
    w
}

#[test]
fn set_canary_scale_steps_scale_the_canary_and_dynamic_stable_scale_the_stable() {
    let w = promoted(true);
    assert_eq!(distinct(check_every_commit(&w, true)), TIMED_WEIGHTS);
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
    let stable: Json = serde_saphyr::from_str(&show(&w.bare, "main", STABLE_FILE)).unwrap();
    assert_eq!(stable["spec"]["replicas"], 5, "promoted: all pods stable");
}

#[test]
fn set_canary_scale_without_dynamic_stable_scale_keeps_every_stable_pod() {
    let w = promoted(false);
    assert_eq!(distinct(check_every_commit(&w, false)), TIMED_WEIGHTS);
}

#[test]
fn plan_prints_the_canary_scale_steps_and_the_counts() {
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &rollout("6.7.0", true)),
        ("apps/podinfo/services.yaml", &services()),
        ("apps/podinfo/route.yaml", &route()),
    ]);
    let path = dir.path().display().to_string();
    let (code, out, err) = run_sluice(&["plan", &path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "rollout steps:      setCanaryScale replicas 2, setWeight 20, pause 30s, \
             setCanaryScale weight 80, setWeight 50, pause 60s, \
             setCanaryScale matchTrafficWeight, setWeight 80"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "replica split:      20%: 2 canary + 5 stable, 50%: 4 canary + 3 stable, \
             80%: 4 canary + 1 stable"
        ),
        "{out}"
    );
}

#[test]
fn set_canary_scale_and_dynamic_stable_scale_need_traffic_routing_as_argo_says() {
    let replica_based = |canary: &str| {
        podinfo_rollout(
            "6.7.0",
            &format!("{canary}      steps:\n        - setWeight: 20\n"),
        )
    };
    for (canary, line, said) in [
        (
            "      dynamicStableScale: true\n",
            "spec.strategy.canary.dynamicStableScale: Canary dynamicStableScale can only be used with traffic routing",
            "dynamicStableScale",
        ),
        (
            "",
            "spec.strategy.canary.steps[1].setCanaryScale: SetCanaryScale requires TrafficRouting to be set",
            "setCanaryScale",
        ),
    ] {
        let mut text = replica_based(canary);
        if said == "setCanaryScale" {
            text.push_str("        - setCanaryScale: {replicas: 1}\n");
        }
        let dir = crate::support::repo(&[
            (ROLLOUT_FILE, &text),
            ("apps/podinfo/services.yaml", &services()),
        ]);
        let (code, _, err) = run_sluice(&["plan", &dir.path().display().to_string()]);
        assert_eq!(code, 1, "{said}: {err}");
        assert!(err.contains(line), "{said}: {err}");
    }
}
