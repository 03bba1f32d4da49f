//! The Traefik router: `route.yaml` holds one TraefikService named after the apex Service,
//! checked against Traefik's strict schema (e2e/schemas), pinned by insta snapshots of
//! Flagger's own Traefik canaries (fluxcd/flagger `test/traefik/test-canary.sh` and
//! `docs/gitbook/tutorials/traefik-progressive-delivery.md`), and swept over every weight.

use serde_json::{json, Value as Json};
use sluice::manifest::model::Canary;
use sluice::route::{render_route, Weights};

use crate::support::canary::flagger_test;
use crate::support::canary::{assert_errors, load, BACKENDS, NO_STATE};
use crate::support::Schemas;

/// A Flagger canary for podinfo in `test` with `provider: traefik`.
fn flagger(service: &str, analysis: &str) -> String {
    flagger_test(service).provider("traefik").yaml(analysis)
}

/// `test/traefik/test-canary.sh`: apex labels and annotations, which Flagger puts on the
/// TraefikService (the test greps them).
const E2E_SERVICE: &str = "    port: 80
    targetPort: 9898
    apex:
      labels:
        test: test-label
      annotations:
        test: test-annotation";
const E2E_ANALYSIS: &str = "    maxWeight: 60\n    stepWeight: 10";
/// `docs/gitbook/tutorials/traefik-progressive-delivery.md`.
const TUTORIAL_SERVICE: &str = "    port: 80\n    targetPort: 9898";
const TUTORIAL_ANALYSIS: &str = "    maxWeight: 50\n    stepWeight: 5";
const BLUE_GREEN: &str = "    iterations: 5";

fn cases() -> Vec<(&'static str, Canary)> {
    vec![
        (
            "traefik-e2e-canary",
            load("e2e", &flagger(E2E_SERVICE, E2E_ANALYSIS)),
        ),
        (
            "traefik-tutorial",
            load("tutorial", &flagger(TUTORIAL_SERVICE, TUTORIAL_ANALYSIS)),
        ),
        (
            "traefik-bluegreen",
            load("bg", &flagger(TUTORIAL_SERVICE, BLUE_GREEN)),
        ),
    ]
}

fn render(canary: &Canary, canary_weight: u8) -> String {
    let weights = Weights::from_canary(canary_weight).expect("0..=100");
    render_route(canary, &BACKENDS, weights, &NO_STATE)
        .expect("renders")
        .expect("Traefik writes a route file")
        .content
}

fn document(text: &str) -> Json {
    serde_saphyr::from_str(text).expect("rendered YAML parses")
}

#[test]
fn every_traefikservice_matches_its_strict_schema_at_every_weight() {
    let mut schemas = Schemas::default();
    for (name, canary) in cases() {
        for canary_weight in 0..=100u8 {
            let doc = document(&render(&canary, canary_weight));
            assert_eq!(
                Schemas::file_for(&doc),
                "traefikservice.traefik.io_v1alpha1-strict.json"
            );
            let errors = schemas.errors(&doc);
            assert!(errors.is_empty(), "{name} at {canary_weight}: {errors:#?}");
            let services = doc["spec"]["weighted"]["services"]
                .as_array()
                .expect("services");
            let weights: Vec<u64> = services
                .iter()
                .map(|s| s["weight"].as_u64().unwrap())
                .collect();
            let expected = if canary_weight == 0 {
                vec![100]
            } else {
                vec![100 - u64::from(canary_weight), u64::from(canary_weight)]
            };
            assert_eq!(weights, expected, "{name} at {canary_weight}");
        }
    }
}

#[test]
fn broken_traefikservices_fail_the_strict_schema() {
    let mut schemas = Schemas::default();
    let doc = document(&render(&cases()[0].1, 30));
    assert!(schemas.errors(&doc).is_empty());
    let mut bad = doc.clone();
    bad["spec"]["weighted"]["services"][0]["wieght"] = json!(10);
    assert!(!schemas.errors(&bad).is_empty());
    let mut bad = doc;
    bad["spec"]["weighted"]["services"][1]["weight"] = json!(-1);
    assert!(!schemas.errors(&bad).is_empty());
}

#[test]
fn rendered_traefik_routes_snapshot() {
    let all = cases();
    for (name, canary) in &all {
        insta::assert_snapshot!(*name, render(canary, 10));
    }
    // Flagger lists only the primary while the canary has no traffic.
    insta::assert_snapshot!("traefik-e2e-canary-idle", render(&all[0].1, 0));
    // Blue/green switched: the primary stays listed, with weight 0.
    insta::assert_snapshot!("traefik-bluegreen-switched", render(&all[2].1, 100));
}

/// Flagger's shape, field by field, with the apex metadata on the object.
#[test]
fn traefikservice_has_flaggers_shape() {
    let doc = document(&render(&cases()[0].1, 10));
    assert_eq!(doc["metadata"]["name"], "podinfo");
    assert_eq!(doc["metadata"]["labels"]["test"], "test-label");
    assert_eq!(
        doc["metadata"]["annotations"],
        json!({"test": "test-annotation"})
    );
    assert_eq!(
        doc["spec"],
        json!({"weighted": {"services": [
            {"name": "podinfo-primary", "namespace": "test", "port": 80, "weight": 90},
            {"name": "podinfo-canary", "namespace": "test", "port": 80, "weight": 10},
        ]}})
    );
}

#[test]
fn traefik_refusals_name_file_line_and_field() {
    let ignored = "Flagger's Traefik router ignores this field (a TraefikService only weighs the two Services; routing belongs to your IngressRoute); remove it, or use a router that renders it (istio, gatewayapi:v1)";
    let no_mirror = "Flagger's Traefik router does not mirror traffic or keep sessions, so this field would be dropped; remove it, or use a router that renders it (gatewayapi:v1)";
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            flagger(
                "    port: 80\n    match: [{uri: {prefix: /api}}]\n    retries: {attempts: 3}\n    timeout: 15s\n    hosts: [app.example.com]",
                E2E_ANALYSIS,
            ),
            ["match", "retries", "timeout", "hosts"]
                .iter()
                .zip(15..)
                .map(|(k, line)| format!("c.yaml:{line}: spec.service.{k}: {ignored}"))
                .collect(),
        ),
        (
            flagger(TUTORIAL_SERVICE, "    iterations: 5\n    match:\n      - headers: {x-canary: {exact: insider}}"),
            vec!["c.yaml:20: spec.analysis.match: Flagger supports canary and blue/green with provider traefik: a TraefikService weighs Services and cannot match requests; remove analysis.match, or use a router that matches headers (contour, gatewayapi:v1, istio)".to_string()],
        ),
        (
            flagger(TUTORIAL_SERVICE, "    iterations: 5\n    mirror: true\n    sessionAffinity:\n      cookieName: c"),
            vec![
                format!("c.yaml:20: spec.analysis.mirror: {no_mirror}"),
                format!("c.yaml:21: spec.analysis.sessionAffinity: {no_mirror}"),
            ],
        ),
        (
            flagger("    port: 80\n    appProtocol: TCP", E2E_ANALYSIS),
            vec!["c.yaml:15: spec.service.appProtocol: a TraefikService weighs HTTP services (TCP needs a TraefikServiceTCP, which Flagger does not write); remove it or roll this canary out without sluice".to_string()],
        ),
    ];
    assert_errors(cases);
}
