//! The App Mesh router (`provider: appmesh:v1beta2`): `route.yaml` holds the primary and
//! canary VirtualNodes, then the apex and canary VirtualRouters with their VirtualServices,
//! each checked against App Mesh's strict schemas (e2e/schemas) at every weight, pinned by
//! insta snapshots of the Canary shapes of Flagger's App Mesh docs
//! (`docs/gitbook/tutorials/appmesh-progressive-delivery.md`, before its removal in 8fedc5cd,
//! and `stefanprodan/gitops-appmesh`), and every field this router cannot render is a
//! `validate` error naming it.

use serde_json::{json, Value as Json};
use sluice::manifest::load::{load, load_text};
use sluice::manifest::model::Canary;
use sluice::manifest::settings::Settings;
use sluice::yaml::snapshot::Snapshot;

use crate::support::canary::errors;
use crate::support::canary::load_repo as support_load_repo;
use crate::support::canary::{ab_analysis, flagger_test, insider_ab, native_frontend};
use crate::support::manifests::{
    APPMESH_TUTORIAL_META, APPMESH_TUTORIAL_SERVICE, TEST_DEPLOYMENT as DEPLOYMENT,
};
use crate::support::route_case::{documents, snapshot_cases, RouteCase as Case};
use crate::support::Schemas;

/// A Flagger canary for podinfo in `test` with `provider: appmesh:v1beta2`.
fn flagger(metadata: &str, service: &str, analysis: &str) -> String {
    flagger_test(service)
        .metadata(&format!("{metadata}\n"))
        .provider("appmesh:v1beta2")
        .interval("1m")
        .threshold(Some(5))
        .yaml(analysis)
}

const TUTORIAL_ANALYSIS: &str = "    maxWeight: 50\n    stepWeight: 5";
/// Blue/green (Flagger's docs: iterations without match).
const BLUE_GREEN: &str = "    iterations: 5";

/// Every field the App Mesh router renders: apex metadata (on the VirtualNodes), a gRPC port
/// name, a numeric targetPort (the container port), backends by name and by ARN, gateway
/// hosts, a prefix, timeout, retries, and an A/B match on two headers.
const ALL_FIELDS_SERVICE: &str = "    port: 80
    targetPort: 9898
    portName: grpc-web
    apex:
      labels:
        team: web
      annotations:
        note: apex
    backends:
      - backend1
      - arn:aws:appmesh:eu-west-1:123456789012:mesh/global/virtualService/backend2.test
    hosts:
      - podinfo.example.com
      - www.example.com
    match:
      - uri:
          prefix: /api
    timeout: 1m30s
    retries:
      attempts: 2
      perTryTimeout: 500ms
      retryOn: server-error,stream-error";
const ALL_FIELDS_AB: &str = "    iterations: 5
    match:
      - headers:
          x-user-agent:
            suffix: Firefox
          x-canary:
            prefix: insider";

/// Loads `canary` from a repo folder holding the tutorial's Deployment.
fn load_repo(canary: &str) -> sluice::manifest::load::Loaded {
    support_load_repo(&[("canary.yaml", canary), ("deployment.yaml", DEPLOYMENT)])
}

fn one(name: &str, loaded: sluice::manifest::load::Loaded) -> Canary {
    assert!(loaded.errors.is_empty(), "{name}: {:?}", loaded.errors);
    assert_eq!(loaded.canaries.len(), 1, "{name}");
    loaded.canaries.into_iter().next().unwrap()
}

fn cases() -> Vec<Case> {
    let case = |name, metadata, service, analysis| {
        Case::podinfo(
            name,
            one(name, load_repo(&flagger(metadata, service, analysis))),
        )
    };
    vec![
        case(
            "appmesh-tutorial-canary",
            APPMESH_TUTORIAL_META,
            APPMESH_TUTORIAL_SERVICE,
            TUTORIAL_ANALYSIS,
        ),
        case(
            "appmesh-tutorial-ab",
            "",
            APPMESH_TUTORIAL_SERVICE,
            &insider_ab(10),
        ),
        case(
            "appmesh-gitops-ab-regex",
            "",
            APPMESH_TUTORIAL_SERVICE,
            // `stefanprodan/gitops-appmesh` `apps/podinfo/abtest.yaml`: a user-agent regex.
            &ab_analysis(10, "user-agent", r#"regex: ".*(Firefox|curl).*""#),
        ),
        case("appmesh-bluegreen", "", "    port: 9898", BLUE_GREEN),
        case(
            "appmesh-all-fields-ab",
            "",
            ALL_FIELDS_SERVICE,
            ALL_FIELDS_AB,
        ),
    ]
}

fn render(case: &Case, canary_weight: u8) -> String {
    case.render("App Mesh", canary_weight)
}

/// (kind, name) of each document, in order.
fn kinds(docs: &[Json]) -> Vec<(String, String)> {
    docs.iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn every_appmesh_document_matches_its_strict_schema_at_every_weight() {
    let mut schemas = Schemas::default();
    for case in cases() {
        for canary_weight in 0..=100 {
            let docs = documents(&render(&case, canary_weight));
            assert_eq!(
                kinds(&docs),
                [
                    ("VirtualNode", "podinfo-primary"),
                    ("VirtualNode", "podinfo-canary"),
                    ("VirtualRouter", "podinfo"),
                    ("VirtualService", "podinfo"),
                    ("VirtualRouter", "podinfo-canary"),
                    ("VirtualService", "podinfo-canary"),
                ]
                .map(|(k, n)| (k.to_string(), n.to_string())),
                "{}",
                case.name
            );
            for doc in &docs {
                schemas.assert_valid(doc, &format!("{} at {canary_weight}", case.name));
            }
            for router in [&docs[2], &docs[4]] {
                for route in router["spec"]["routes"].as_array().unwrap() {
                    let sum: u64 = route["httpRoute"]["action"]["weightedTargets"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| t["weight"].as_u64().unwrap())
                        .sum();
                    assert_eq!(sum, 100, "{}", case.name);
                }
            }
            assert_eq!(
                docs[2]["spec"]["routes"][0]["httpRoute"]["action"]["weightedTargets"],
                json!([
                    {"virtualNodeRef": {"name": "podinfo-canary"}, "weight": canary_weight},
                    {"virtualNodeRef": {"name": "podinfo-primary"}, "weight": 100 - canary_weight},
                ]),
                "{}",
                case.name
            );
        }
    }
}

/// The strict schemas are not vacuous: they refuse what App Mesh's API server refuses.
#[test]
fn broken_appmesh_documents_fail_the_strict_schemas() {
    let mut schemas = Schemas::default();
    let docs = documents(&render(&cases()[4], 37));
    for doc in &docs {
        assert!(schemas.errors(doc).is_empty());
    }
    let mut bad = docs[2].clone();
    bad["spec"]["routes"][0]["httpRoute"]["retryPolicy"]["httpRetryEvents"] = json!(["5xx"]);
    assert!(!schemas.errors(&bad).is_empty(), "an Envoy retry condition");
    let mut bad = docs[2].clone();
    bad["spec"]["routes"][0]["httpRoute"]["match"]["headers"][0]["match"]["exact"] = json!("");
    assert!(!schemas.errors(&bad).is_empty(), "an empty header match");
    let mut bad = docs[2].clone();
    bad["spec"]["routes"][0]["httpRoute"]["action"]["weightedTargets"][0]["weight"] = json!(101);
    assert!(!schemas.errors(&bad).is_empty());
    let mut bad = docs[0].clone();
    bad["spec"]["listeners"][0]["timeout"]["http"]["perRequest"]["unit"] = json!("m");
    assert!(!schemas.errors(&bad).is_empty());
    let mut bad = docs[3].clone();
    bad["spec"]["provider"]["virtualRouter"]["name"] = json!("podinfo");
    assert!(!schemas.errors(&bad).is_empty());
}

#[test]
fn rendered_appmesh_routes_snapshot() {
    snapshot_cases!(
        cases(),
        render,
        10,
        "appmesh-tutorial-ab",
        "appmesh-tutorial-ab-analysis"
    );
}

/// What Flagger's `appmesh_v1beta2.go` writes for the tutorial canary, field by field.
#[test]
fn appmesh_objects_have_flaggers_shape() {
    let docs = documents(&render(&cases()[0], 10));
    let retry = json!({
        "maxRetries": 3,
        "perRetryTimeout": {"unit": "ms", "value": 5000},
        "httpRetryEvents": ["gateway-error", "client-error", "stream-error"],
    });
    let timeout = json!({"perRequest": {"unit": "ms", "value": 15000}});
    for (doc, role, selector) in [
        (&docs[0], "primary", "podinfo-primary"),
        (&docs[1], "canary", "podinfo"),
    ] {
        assert_eq!(
            doc["spec"],
            json!({
                "podSelector": {"matchLabels": {"app": selector}},
                "listeners": [{
                    "portMapping": {"port": 9898, "protocol": "http"},
                    "timeout": {"http": timeout},
                }],
                "serviceDiscovery": {"dns": {"hostname": format!("podinfo-{role}.test.svc.cluster.local.")}},
                "logging": {"accessLog": {"file": {"path": "/dev/stdout"}}},
            })
        );
        assert_eq!(
            doc["metadata"]["labels"],
            json!({"app.kubernetes.io/managed-by": "sluice"})
        );
    }
    assert_eq!(
        docs[2]["spec"],
        json!({
            "listeners": [{"portMapping": {"port": 9898, "protocol": "http"}}],
            "routes": [{
                "name": "podinfo",
                "httpRoute": {
                    "match": {"prefix": "/"},
                    "timeout": timeout,
                    "retryPolicy": retry,
                    "action": {"weightedTargets": [
                        {"virtualNodeRef": {"name": "podinfo-canary"}, "weight": 10},
                        {"virtualNodeRef": {"name": "podinfo-primary"}, "weight": 90},
                    ]},
                },
            }],
        })
    );
    assert_eq!(
        docs[3]["spec"],
        json!({"provider": {"virtualRouter": {"virtualRouterRef": {"name": "podinfo"}}}})
    );
    assert!(docs[3]["metadata"].get("annotations").is_none());
    assert_eq!(
        docs[4]["spec"]["routes"],
        json!([{
            "name": "podinfo-canary",
            "httpRoute": {
                "match": {"prefix": "/"},
                "timeout": timeout,
                "retryPolicy": retry,
                "action": {"weightedTargets": [
                    {"virtualNodeRef": {"name": "podinfo-canary"}, "weight": 100},
                    {"virtualNodeRef": {"name": "podinfo-primary"}, "weight": 0},
                ]},
            },
        }])
    );
    assert_eq!(
        docs[5]["spec"],
        json!({"provider": {"virtualRouter": {"virtualRouterRef": {"name": "podinfo-canary"}}}})
    );
}

/// A/B: route `-a` (priority 10) with the headers sorted by name and the weights, route `-b`
/// (priority 20) to the primary; the gateway annotations, backends, gRPC protocol and the
/// container port.
#[test]
fn appmesh_ab_and_service_fields_like_flagger() {
    let docs = documents(&render(&cases()[4], 100));
    let node = &docs[0];
    assert_eq!(
        node["metadata"]["labels"],
        json!({"app.kubernetes.io/managed-by": "sluice", "team": "web"})
    );
    assert_eq!(node["metadata"]["annotations"], json!({"note": "apex"}));
    assert_eq!(
        node["spec"]["listeners"][0]["portMapping"],
        json!({"port": 9898, "protocol": "grpc"})
    );
    assert_eq!(
        node["spec"]["backends"],
        json!([
            {"virtualService": {"virtualServiceRef": {"name": "backend1"}}},
            {"virtualService": {"virtualServiceARN": "arn:aws:appmesh:eu-west-1:123456789012:mesh/global/virtualService/backend2.test"}},
        ])
    );
    assert!(node["spec"].get("logging").is_none());
    let routes = &docs[2]["spec"]["routes"];
    assert_eq!(routes[0]["name"], "podinfo-a");
    assert_eq!(routes[0]["priority"], 10);
    assert_eq!(
        routes[0]["httpRoute"]["match"],
        json!({"prefix": "/api", "headers": [
            {"name": "x-canary", "match": {"prefix": "insider"}},
            {"name": "x-user-agent", "match": {"suffix": "Firefox"}},
        ]})
    );
    assert_eq!(
        routes[0]["httpRoute"]["retryPolicy"],
        json!({"maxRetries": 2, "perRetryTimeout": {"unit": "ms", "value": 500}, "httpRetryEvents": ["server-error", "stream-error"]})
    );
    assert_eq!(
        routes[0]["httpRoute"]["timeout"],
        json!({"perRequest": {"unit": "ms", "value": 90000}})
    );
    assert_eq!(routes[1]["name"], "podinfo-b");
    assert_eq!(routes[1]["priority"], 20);
    assert_eq!(routes[1]["httpRoute"]["match"], json!({"prefix": "/api"}));
    assert_eq!(
        routes[1]["httpRoute"]["action"]["weightedTargets"],
        json!([{"virtualNodeRef": {"name": "podinfo-primary"}, "weight": 100}])
    );
    assert_eq!(
        docs[3]["metadata"]["annotations"],
        json!({
            "gateway.appmesh.k8s.aws/expose": "true",
            "gateway.appmesh.k8s.aws/domain": "podinfo.example.com,www.example.com,",
            "gateway.appmesh.k8s.aws/timeout": "1m30s",
            "gateway.appmesh.k8s.aws/retries": "2",
        })
    );
    assert!(docs[5]["metadata"].get("annotations").is_none());
    // Retries without values: Flagger's defaults (one retry, 250ms, gateway-error).
    let canary = one(
        "defaults",
        load_repo(&flagger("", "    port: 9898\n    retries: {}", BLUE_GREEN)),
    );
    let case = Case::podinfo("defaults", canary);
    let docs = documents(&render(&case, 0));
    assert_eq!(
        docs[2]["spec"]["routes"][0]["httpRoute"]["retryPolicy"],
        json!({"maxRetries": 1, "perRetryTimeout": {"unit": "ms", "value": 250}, "httpRetryEvents": ["gateway-error"]})
    );
}

/// The pod selectors follow the target's selector label (what sluice writes on the two
/// Deployments), and Flagger's `app: <target>` when the target is not in the repo.
#[test]
fn appmesh_pod_selectors_follow_the_targets_selector_label() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("canary.yaml"),
        flagger("", "    port: 9898", BLUE_GREEN),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("deployment.yaml"),
        DEPLOYMENT.replace("app: podinfo", "app.kubernetes.io/name: web"),
    )
    .unwrap();
    let canary = one(
        "selector",
        load(&Snapshot::read(dir.path()), &Settings::default()),
    );
    let docs = documents(&render(&Case::podinfo("selector", canary), 0));
    assert_eq!(
        docs[0]["spec"]["podSelector"],
        json!({"matchLabels": {"app.kubernetes.io/name": "web-primary"}})
    );
    assert_eq!(
        docs[1]["spec"]["podSelector"],
        json!({"matchLabels": {"app.kubernetes.io/name": "web"}})
    );
    let loaded = load_text(
        "c.yaml",
        &flagger("", "    port: 9898", BLUE_GREEN),
        &Settings::default(),
    );
    let docs = documents(&render(
        &Case::podinfo("lone file", one("lone file", loaded)),
        0,
    ));
    assert_eq!(
        docs[1]["spec"]["podSelector"],
        json!({"matchLabels": {"app": "podinfo"}})
    );
}

/// Every field Flagger's App Mesh router would drop or write wrongly is refused with its line.
#[test]
fn appmesh_fields_it_cannot_render_are_errors() {
    let cases: Vec<(String, &str)> = vec![
        (
            flagger("", "    port: 9898", "    stepWeight: 10").replace("appmesh:v1beta2", "appmesh"),
            "c.yaml:8: spec.provider: provider \"appmesh\" is Flagger's App Mesh v1beta1 router",
        ),
        (
            flagger("", "    port: 9898\n    meshName: global", "    stepWeight: 10"),
            "c.yaml:16: spec.service.meshName: Flagger's App Mesh v1beta2 router ignores meshName",
        ),
        (
            flagger("", "    port: 9898\n    rewrite:\n      uri: /v2", "    stepWeight: 10"),
            "c.yaml:16: spec.service.rewrite: Flagger's App Mesh router does not rewrite requests",
        ),
        (
            flagger(
                "",
                "    port: 9898\n    match:\n      - uri:\n          prefix: /api\n    rewrite:\n      uri: /",
                "    stepWeight: 10",
            ),
            "c.yaml:19: spec.service.rewrite: Flagger's App Mesh router does not rewrite requests",
        ),
        (
            flagger(
                "",
                "    port: 9898\n    headers:\n      request:\n        add: {x-a: b}",
                "    stepWeight: 10",
            ),
            "c.yaml:16: spec.service.headers: Flagger's App Mesh router ignores this field",
        ),
        (
            flagger("", "    port: 9898\n    timeout: 15", "    stepWeight: 10"),
            "c.yaml:16: spec.service.timeout: expected a duration with a unit",
        ),
        (
            flagger(
                "",
                "    port: 9898\n    retries: {attempts: 2, retryOn: \"5xx\"}",
                "    stepWeight: 10",
            ),
            "c.yaml:16: spec.service.retries.retryOn: App Mesh retries on the HTTP events server-error, gateway-error, client-error, stream-error; found \"5xx\"",
        ),
        (
            flagger(
                "",
                "    port: 9898\n    match:\n      - uri:\n          prefix: /\n      - uri:\n          prefix: /b",
                "    stepWeight: 10",
            ),
            "c.yaml:19: spec.service.match[1]: Flagger's App Mesh router reads only the uri.prefix of the first service match",
        ),
        (
            flagger(
                "",
                "    port: 9898",
                "    iterations: 5\n    match:\n      - headers: {x-a: {exact: b}}\n      - headers: {x-b: {exact: c}}",
            ),
            "c.yaml:22: spec.analysis.match[1]: Flagger's App Mesh router puts the headers of every match into one route",
        ),
        (
            flagger(
                "",
                "    port: 9898",
                "    iterations: 5\n    match:\n      - uri: {prefix: /a}",
            ),
            "c.yaml:21: spec.analysis.match[0].uri: Flagger's App Mesh router matches request headers only",
        ),
        (
            flagger(
                "",
                "    port: 9898",
                "    iterations: 5\n    match:\n      - headers: {x-a: {exact: \"\"}}",
            ),
            "c.yaml:21: spec.analysis.match[0].headers.x-a.exact: expected 1 to 255 characters",
        ),
        (
            flagger(
                "",
                "    port: 9898",
                "    iterations: 5\n    mirror: true",
            ),
            "c.yaml:20: spec.analysis.mirror: Flagger's App Mesh router does not mirror traffic",
        ),
    ];
    for (text, expected) in cases {
        let found = errors(&text);
        assert!(
            found.iter().any(|e| e.starts_with(expected)),
            "expected {expected:?} in {found:#?}\n{text}"
        );
    }
}

/// A native canary cannot name App Mesh objects.
#[test]
fn a_native_canary_cannot_name_app_mesh_objects() {
    let native = &native_frontend(
        "    apiVersion: appmesh.k8s.aws/v1beta2\n    kind: VirtualRouter\n",
        &[10],
    );
    let found = errors(native);
    assert!(
        found.iter().any(|e| e.starts_with(
            "c.yaml:14: spec.route: sluice writes App Mesh objects for Flagger canaries only"
        )),
        "{found:#?}"
    );
}
