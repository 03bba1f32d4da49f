//! Argo Rollouts routed by `trafficRouting.nginx` (the canary Ingress Argo creates,
//! `<rollout>-<stableIngress>-canary`), `traefik` (the user's TraefikService) and `apisix` (the
//! user's ApisixRoute) through the loop: an analysis step on a real Prometheus promotes, a
//! failing one aborts back to stable, and `pause: {}` opens an approval pull request (a fake
//! forge at HTTP level). At every sluice commit each output document passes its strict schema
//! and the route carries the status file's weights; `kubectl kustomize` builds the output.

use serde_json::Value as Json;
use sluice::core::status::Phase;

use crate::support::forge::{ForgeFake, Kind};
use crate::support::rollout::{
    analysis_template, checks, distinct, services, show, sluice_commits, ANALYSED, APISIX_ROUTE,
    APISIX_ROUTING, APPROVAL, INGRESS, NGINX_ROUTING, OUTPUT, ROLLOUT_FILE, STABLE_FILE,
    STATUS_FILE, TRAEFIK_ROUTING, TRAEFIK_SERVICE,
};
use crate::support::{Schemas, World};

const ROUTE_FILE: &str = "clusters/prod/podinfo/route.yaml";

/// One router: its `trafficRouting` block, the user's object, and how to read the weights
/// `(stable, canary)` from the rendered route.
struct Router {
    name: &'static str,
    routing: &'static str,
    source: &'static str,
    weights: fn(&Json) -> (u64, u64),
}

fn ingress_weights(doc: &Json) -> (u64, u64) {
    assert_eq!(doc["metadata"]["name"], "podinfo-podinfo-canary");
    let annotations = &doc["metadata"]["annotations"];
    assert_eq!(annotations["nginx.ingress.kubernetes.io/canary"], "true");
    assert_eq!(
        annotations["nginx.ingress.kubernetes.io/canary-by-header"],
        "X-Canary"
    );
    assert_eq!(annotations["kubernetes.io/ingress.class"], "nginx");
    assert!(annotations["example.com/owner"].is_null(), "{annotations}");
    // Only the rule sending to the stableService, sent to the canaryService.
    let rules = doc["spec"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "{doc}");
    assert_eq!(
        rules[0]["http"]["paths"][0]["backend"]["service"]["name"],
        "podinfo-canary"
    );
    let canary: u64 = annotations["nginx.ingress.kubernetes.io/canary-weight"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    (100 - canary, canary)
}

fn entry_weights(list: &Json, key: &str) -> (u64, u64) {
    let weight = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|e| e[key] == name)
            .unwrap()["weight"]
            .as_u64()
            .unwrap()
    };
    (weight("podinfo-stable"), weight("podinfo-canary"))
}

const ROUTERS: [Router; 3] = [
    Router {
        name: "nginx",
        routing: NGINX_ROUTING,
        source: INGRESS,
        weights: ingress_weights,
    },
    Router {
        name: "traefik",
        routing: TRAEFIK_ROUTING,
        source: TRAEFIK_SERVICE,
        weights: |doc| entry_weights(&doc["spec"]["weighted"]["services"], "name"),
    },
    Router {
        name: "apisix",
        routing: APISIX_ROUTING,
        source: APISIX_ROUTE,
        weights: |doc| entry_weights(&doc["spec"]["http"][0]["backends"], "serviceName"),
    },
];

fn rollout_of(router: &Router, version: &str, steps: &str) -> String {
    crate::support::rollout::routed(router.routing, version, steps)
}

fn world(router: &Router, steps: &str, extra: &[(&str, String)]) -> World {
    let mut files = vec![
        (ROLLOUT_FILE, rollout_of(router, "6.7.0", steps)),
        ("apps/podinfo/services.yaml", services()),
        ("apps/podinfo/route-source.yaml", router.source.to_string()),
    ];
    files.extend(extra.iter().map(|(f, t)| (*f, t.clone())));
    let pairs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    World::served(&pairs).building(OUTPUT)
}

/// Every sluice commit: every output document schema-valid, the route's weights the status
/// file's. Returns the weights, in order.
fn check_every_commit(w: &World, router: &Router) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut found = Vec::new();
    for (sha, _) in sluice_commits(&w.bare) {
        let status: Json = serde_saphyr::from_str(&show(&w.bare, &sha, STATUS_FILE)).unwrap();
        let want = (
            status["primaryWeight"].as_u64().unwrap(),
            status["canaryWeight"].as_u64().unwrap(),
        );
        for file in [
            "route.yaml",
            "podinfo-stable.yaml",
            "podinfo-canary.yaml",
            "services.yaml",
        ] {
            let text = show(&w.bare, &sha, &format!("{OUTPUT}/{file}"));
            let docs: Vec<Json> = serde_saphyr::from_multiple(&text).unwrap();
            for doc in docs {
                schemas.assert_valid(&doc, &format!("{} {sha} {file}", router.name));
            }
        }
        let route: Json = serde_saphyr::from_str(&show(&w.bare, &sha, ROUTE_FILE)).unwrap();
        assert_eq!((router.weights)(&route), want, "{} {sha}", router.name);
        found.push(format!("primary={} canary={}", want.0, want.1));
    }
    found
}

/// Each router's Rollout analysed on a real Prometheus (`condition` judging `up`, which is 1),
/// from 6.7.0 to 6.7.1 until the canary reaches `phase`.
fn analysed(condition: &str, phase: Phase, check: impl Fn(&World, &Router)) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scraped = rt.block_on(crate::support::prometheus::Scraped::start_instant(
        crate::support::prometheus::osm_exposition,
    ));
    for router in &ROUTERS {
        let mut w = world(
            router,
            ANALYSED,
            &[
                (".sluice/config.yaml", scraped.prom.repo_config()),
                ("apps/podinfo/analysis.yaml", analysis_template(condition)),
            ],
        );
        let runtime = crate::support::runtime();
        let live = sluice::observer::Live::new(runtime);
        w.until_with(&live, runtime, Phase::Initialized);
        w.human_writes(
            ROLLOUT_FILE,
            &rollout_of(router, "6.7.1", ANALYSED),
            "podinfo: 6.7.1",
        );
        w.until_with(&live, runtime, phase);
        crate::support::rollout::kustomize_builds(&w.bare, OUTPUT);
        check(&w, router);
    }
    drop(scraped);
}

#[test]
fn rollout_through_nginx_traefik_and_apisix_promotes_on_a_passing_analysis() {
    analysed("result[0] >= 1", Phase::Succeeded, |w, router| {
        assert_eq!(
            distinct(check_every_commit(w, router)),
            [
                "primary=100 canary=0",
                "primary=80 canary=20",
                "primary=40 canary=60",
                "primary=100 canary=0",
            ],
            "{}",
            router.name
        );
        assert_eq!(checks(&w.bare, "analysis running"), ["canary-up=1 pass"]);
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
    });
}

#[test]
fn rollout_through_nginx_traefik_and_apisix_aborts_to_stable_on_a_failing_analysis() {
    analysed("result[0] >= 2", Phase::Failed, |w, router| {
        let weights = check_every_commit(w, router);
        assert!(
            weights.contains(&"primary=80 canary=20".to_string()),
            "{weights:?}"
        );
        assert_eq!(
            weights.last().map(String::as_str),
            Some("primary=100 canary=0"),
            "{}",
            router.name
        );
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.0"));
        assert_eq!(checks(&w.bare, "roll back"), ["canary-up=1 fail"]);
    });
}

#[test]
fn rollout_through_nginx_traefik_and_apisix_pause_opens_an_approval_pull_request_fake_forge() {
    for router in &ROUTERS {
        let fake = ForgeFake::start(Kind::GitHub);
        let config = format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}",
            fake.settings()
        );
        let mut w = world(router, APPROVAL, &[(".sluice/config.yaml", config)]);
        w.until(Phase::Initialized);
        w.human_writes(
            ROLLOUT_FILE,
            &rollout_of(router, "6.7.1", APPROVAL),
            "podinfo: 6.7.1",
        );
        w.until(Phase::WaitingApproval);
        w.ticks(2);
        assert_eq!(fake.count(), 1, "{}: one pull request", router.name);
        let pr = fake.first();
        let route: Json = serde_saphyr::from_str(&show(&w.bare, &pr.head, ROUTE_FILE)).unwrap();
        assert_eq!((router.weights)(&route), (40, 60), "{}", router.name);
        crate::support::merge_approval(w.human(), &pr.head, "merge");
        fake.set(1, false, true);
        w.until(Phase::Succeeded);
        assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
        check_every_commit(&w, router);
        crate::support::rollout::kustomize_builds(&w.bare, OUTPUT);
    }
}
