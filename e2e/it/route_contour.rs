//! The Contour router: `route.yaml` holds one HTTPProxy named after the apex Service, checked
//! against Contour's strict schema (e2e/schemas), pinned by insta snapshots of Flagger's own
//! Contour canaries (fluxcd/flagger `test/contour/test-canary.sh` and
//! `docs/gitbook/tutorials/contour-progressive-delivery.md`), and swept over every weight.

use serde_json::{json, Value as Json};

use crate::support::canary::{assert_errors, load};
use crate::support::canary::{flagger_test, insider_ab, native_frontend};
use crate::support::route_case::{snapshot_cases, RouteCase as Case};
use crate::support::Schemas;

/// A Flagger canary for podinfo in `test` with `provider: contour`.
fn flagger(service: &str, analysis: &str) -> String {
    flagger_test(service).provider("contour").yaml(analysis)
}

/// `test/contour/test-canary.sh`: every canary there has this service.
const E2E_SERVICE: &str = "    port: 80\n    targetPort: 9898";
/// Its first canary: weights.
const E2E_CANARY_ANALYSIS: &str = "    maxWeight: 50\n    stepWeight: 10";
/// Blue/green (Flagger's docs: iterations without match).
const BLUE_GREEN_ANALYSIS: &str = "    iterations: 5";

/// `docs/gitbook/tutorials/contour-progressive-delivery.md`: timeout and retries.
const TUTORIAL_SERVICE: &str = "    port: 80
    targetPort: 9898
    timeout: 15s
    retries:
      attempts: 3
      perTryTimeout: 5s
      retryOn: \"5xx\"";
const TUTORIAL_ANALYSIS: &str = "    maxWeight: 50\n    stepWeight: 5";

/// Every field the Contour router renders: the apex metadata (on the HTTPProxy, as Flagger
/// puts it there), the prefix of the first service match, timeout,
/// retries with several conditions, and an A/B match on three headers.
const ALL_FIELDS_SERVICE: &str = "    port: 9898
    apex:
      labels:
        team: web
      annotations:
        note: apex
    match:
      - uri:
          prefix: /api
    timeout: 1m30s
    retries:
      attempts: 2
      perTryTimeout: 500ms
      retryOn: gateway-error,connect-failure,refused-stream";
const ALL_FIELDS_AB: &str = "    iterations: 5
    match:
      - headers:
          x-user-agent:
            suffix: Firefox
          x-canary:
            exact: insider
          cookie:
            prefix: canary=";

fn cases() -> Vec<Case> {
    let case =
        |name, service, analysis| Case::podinfo(name, load(name, &flagger(service, analysis)));
    vec![
        case("contour-e2e-canary", E2E_SERVICE, E2E_CANARY_ANALYSIS),
        case("contour-e2e-ab", E2E_SERVICE, &insider_ab(5)),
        case("contour-bluegreen", E2E_SERVICE, BLUE_GREEN_ANALYSIS),
        case("contour-tutorial", TUTORIAL_SERVICE, TUTORIAL_ANALYSIS),
        case("contour-all-fields-ab", ALL_FIELDS_SERVICE, ALL_FIELDS_AB),
    ]
}

fn render(case: &Case, canary_weight: u8) -> String {
    case.render("Contour", canary_weight)
}

fn document(text: &str) -> Json {
    serde_saphyr::from_str(text).expect("rendered YAML parses")
}

#[test]
fn every_contour_httpproxy_matches_its_strict_schema_at_every_weight() {
    let mut schemas = Schemas::default();
    for case in cases() {
        for canary_weight in 0..=100 {
            let doc = document(&render(&case, canary_weight));
            assert_eq!(
                Schemas::file_for(&doc),
                "httpproxy.projectcontour.io_v1-strict.json"
            );
            let errors = schemas.errors(&doc);
            assert!(
                errors.is_empty(),
                "{} at {canary_weight}: {errors:#?}",
                case.name
            );
            let routes = doc["spec"]["routes"].as_array().expect("routes");
            for route in routes {
                let services = &route["services"];
                let sum = services[0]["weight"].as_u64().unwrap()
                    + services[1]["weight"].as_u64().unwrap();
                assert_eq!(sum, 100, "{}", case.name);
            }
            let first = &routes[0]["services"];
            assert_eq!(
                (first[0]["weight"].as_u64(), first[1]["weight"].as_u64()),
                (
                    Some(100 - u64::from(canary_weight)),
                    Some(u64::from(canary_weight))
                )
            );
        }
    }
}

/// The strict schema is not vacuous: it refuses what Contour's API server refuses.
#[test]
fn broken_httpproxies_fail_the_strict_schema() {
    let mut schemas = Schemas::default();
    let all = cases();
    let doc = document(&render(&all[3], 37));
    assert!(schemas.errors(&doc).is_empty());
    let mut bad = doc.clone();
    bad["spec"]["routes"][0]["services"][0]["wieght"] = json!(10);
    assert!(!schemas.errors(&bad).is_empty());
    let mut bad = doc.clone();
    bad["spec"]["routes"][0]["retryPolicy"]["retryOn"] = json!([""]);
    assert!(
        !schemas.errors(&bad).is_empty(),
        "Flagger's retryOn without a value"
    );
    let mut bad = doc;
    bad["spec"]["routes"][0]["timeoutPolicy"]["response"] = json!("15 seconds");
    assert!(!schemas.errors(&bad).is_empty());
}

#[test]
fn rendered_contour_routes_snapshot() {
    snapshot_cases!(
        cases(),
        render,
        10,
        "contour-e2e-ab",
        "contour-e2e-ab-analysis"
    );
}

/// What Flagger's Contour router writes for the e2e canary, field by field.
#[test]
fn contour_httpproxy_has_flaggers_shape() {
    let doc = document(&render(&cases()[3], 10));
    assert_eq!(doc["metadata"]["name"], "podinfo");
    assert!(doc["spec"].get("virtualhost").is_none());
    let route = &doc["spec"]["routes"][0];
    assert_eq!(route["conditions"], json!([{"prefix": "/"}]));
    assert_eq!(
        route["timeoutPolicy"],
        json!({"response": "15s", "idle": "5m"})
    );
    assert_eq!(
        route["retryPolicy"],
        json!({"count": 3, "perTryTimeout": "5s", "retryOn": ["5xx"]})
    );
    assert_eq!(
        route["services"][1],
        json!({
            "name": "podinfo-canary",
            "port": 80,
            "weight": 10,
            "requestHeadersPolicy": {"set": [{"name": "l5d-dst-override", "value": "podinfo-canary.test.svc.cluster.local:80"}]}
        })
    );
}

/// A/B: the header route first (prefix on its first condition only, headers sorted, prefix
/// and suffix as `contains`), then the prefix route to the primary.
#[test]
fn contour_ab_routes_headers_like_flagger() {
    let doc = document(&render(&cases()[4], 100));
    assert_eq!(
        doc["metadata"]["labels"],
        json!({"app.kubernetes.io/managed-by": "sluice", "team": "web"})
    );
    assert_eq!(doc["metadata"]["annotations"], json!({"note": "apex"}));
    let routes = &doc["spec"]["routes"];
    assert_eq!(
        routes[0]["conditions"],
        json!([
            {"prefix": "/api", "header": {"name": "cookie", "contains": "canary="}},
            {"header": {"name": "x-canary", "exact": "insider"}},
            {"header": {"name": "x-user-agent", "contains": "Firefox"}},
        ])
    );
    assert_eq!(routes[1]["conditions"], json!([{"prefix": "/api"}]));
    assert_eq!(routes[1]["services"][0]["weight"], 100);
    assert_eq!(routes[1]["services"][1]["weight"], 0);
    assert_eq!(routes[0]["services"][1]["weight"], 100);
    assert_eq!(
        routes[1]["retryPolicy"]["retryOn"],
        json!(["gateway-error", "connect-failure", "refused-stream"])
    );
}

#[test]
fn contour_refusals_name_file_line_and_field() {
    let ignored = "Flagger's Contour router ignores this field (it writes the HTTPProxy's prefix, timeout and retry policy only); remove it, or use a router that renders it (istio, gatewayapi:v1)";
    let dropped = "Flagger's Contour router reads only the uri.prefix of the first service match, so this condition would be dropped; remove it, or use a router that renders it (istio, gatewayapi:v1)";
    let no_mirror = "Flagger's Contour router does not mirror traffic or keep sessions, so this field would be dropped; remove it, or use a router that renders it (gatewayapi:v1)";
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            flagger(
                "    port: 80\n    hosts: [app.example.com]\n    gateways: [public]\n    rewrite: {uri: /}\n    headers: {request: {set: {x-a: b}}}\n    corsPolicy: {allowOrigins: [{exact: a}]}\n    trafficPolicy: {tls: {mode: DISABLE}}",
                E2E_CANARY_ANALYSIS,
            ),
            ["hosts", "gateways", "rewrite", "headers", "corsPolicy", "trafficPolicy"]
                .iter()
                .zip(15..)
                .map(|(k, line)| format!("c.yaml:{line}: spec.service.{k}: {ignored}"))
                .collect(),
        ),
        (
            flagger("    port: 80\n    match:\n      - uri: {prefix: /api}\n        method: {exact: GET}\n      - uri: {exact: /health}", E2E_CANARY_ANALYSIS),
            vec![
                format!("c.yaml:18: spec.service.match[1]: {dropped}"),
                format!("c.yaml:17: spec.service.match[0].method: {dropped}"),
            ],
        ),
        (
            flagger("    port: 80\n    match:\n      - uri: {regex: /api.*}", E2E_CANARY_ANALYSIS),
            vec![
                format!("c.yaml:16: spec.service.match[0].uri.regex: {dropped}"),
                "c.yaml:16: spec.service.match[0].uri.prefix: required field is missing".to_string(),
            ],
        ),
        (
            flagger("    port: 80\n    match:\n      - uri: {prefix: api}", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:16: spec.service.match[0].uri.prefix: a Contour prefix condition starts with '/', found \"api\"".to_string()],
        ),
        (
            flagger("    port: 80\n    timeout: 15 seconds\n    retries: {attempts: 2, perTryTimeout: 1d, retryOn: \"5xx, reset\"}", E2E_CANARY_ANALYSIS),
            vec![
                "c.yaml:15: spec.service.timeout: expected a Contour duration (numbers with units h, m, s, ms, us or ns, like 15s or 1m30s; or infinity), found \"15 seconds\"".to_string(),
                "c.yaml:16: spec.service.retries.perTryTimeout: expected a Contour duration (numbers with units h, m, s, ms, us or ns, like 15s or 1m30s; or infinity), found \"1d\"".to_string(),
                "c.yaml:16: spec.service.retries.retryOn: Contour retries on 5xx, gateway-error, reset, reset-before-request, connect-failure, envoy-ratelimited, retriable-4xx, refused-stream, retriable-status-codes, retriable-headers, http3-post-connect-failure, cancelled, deadline-exceeded, internal, resource-exhausted, unavailable; found \" reset\" (Flagger splits retryOn on commas, without spaces)".to_string(),
            ],
        ),
        (
            flagger("    port: 80\n    appProtocol: tcp", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:15: spec.service.appProtocol: sluice writes HTTP routes only: an HTTPProxy route for a TCP service would not carry its traffic; remove it or roll this canary out without sluice".to_string()],
        ),
        (
            flagger(E2E_SERVICE, "    iterations: 5\n    mirror: true\n    mirrorWeight: 20\n    sessionAffinity:\n      cookieName: c"),
            vec![
                format!("c.yaml:20: spec.analysis.mirror: {no_mirror}"),
                format!("c.yaml:21: spec.analysis.mirrorWeight: {no_mirror}"),
                format!("c.yaml:22: spec.analysis.sessionAffinity: {no_mirror}"),
            ],
        ),
        (
            flagger(E2E_SERVICE, "    iterations: 5\n    match:\n      - headers: {x-canary: {exact: a}}\n      - headers: {x-beta: {exact: b}}"),
            vec!["c.yaml:22: spec.analysis.match[1]: Contour ANDs the conditions of a route, so Flagger's Contour router would require every match at once; put the headers that must all match into one match, or use a router that ORs matches (gatewayapi:v1, istio)".to_string()],
        ),
        (
            flagger(E2E_SERVICE, "    iterations: 5\n    match:\n      - headers: {cookie: {regex: \"^(.*?;)?(canary=always)(;.*)?$\"}}\n        sourceLabels: {app: a}"),
            vec![
                "c.yaml:22: spec.analysis.match[0].sourceLabels: Flagger's Contour router matches request headers only, so this condition would be dropped; remove it, or use a router that matches it (gatewayapi:v1, istio)".to_string(),
                "c.yaml:21: spec.analysis.match[0].headers.cookie.regex: Flagger's Contour router drops a regex header match (it writes an empty exact match); use exact, prefix or suffix (prefix and suffix become Contour's contains, as Flagger maps them)".to_string(),
            ],
        ),
        (
            flagger(E2E_SERVICE, "    iterations: 5\n    match:\n      - headers: {}"),
            vec!["c.yaml:21: spec.analysis.match[0].headers: expected at least one header match".to_string()],
        ),
    ];
    assert_errors(cases);
}

/// Values reach the YAML through tojson: quotes, newlines and document markers in a header
/// match come back unchanged and cannot add fields or documents.
#[test]
fn hostile_contour_values_round_trip() {
    let value = "a\"b\n---\n  injected: true\n'{{ header }}' # c: &x *y";
    let quoted = serde_json::to_string(value).expect("json");
    let analysis = format!(
        "    iterations: 1\n    match:\n      - headers:\n          x-canary:\n            exact: {quoted}"
    );
    let canary = load("hostile.yaml", &flagger(E2E_SERVICE, &analysis));
    let doc = document(&render(&Case::podinfo("hostile", canary), 100));
    assert_eq!(
        doc["spec"]["routes"][0]["conditions"][0]["header"]["exact"],
        value
    );
    assert!(Schemas::default().errors(&doc).is_empty());
}

/// A native canary routes through an HTTPProxy with `spec.route` of that kind.
#[test]
fn native_httpproxy_route_renders_schema_valid() {
    let native = &native_frontend(
        "    apiVersion: projectcontour.io/v1\n    kind: HTTPProxy\n",
        &[10],
    );
    let canary = load("native.yaml", native);
    let doc = document(&render(&Case::frontend("native", canary), 10));
    assert!(Schemas::default().errors(&doc).is_empty());
    assert_eq!(doc["metadata"]["name"], "frontend");
    assert_eq!(
        doc["spec"]["routes"][0]["services"][1]["name"],
        "frontend-green"
    );
    assert_eq!(doc["spec"]["routes"][0]["services"][1]["weight"], 10);
    let wrong = native.replace("projectcontour.io/v1", "projectcontour.io/v1alpha1");
    let errors = crate::support::canary::errors_in("c.yaml", &wrong);
    assert_eq!(
        errors,
        ["c.yaml:14: spec.route.apiVersion: expected projectcontour.io/v1 for HTTPProxy, found \"projectcontour.io/v1alpha1\""]
    );
}
