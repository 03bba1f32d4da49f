//! The Ingress routers (`provider: nginx`, `provider: skipper`): `route.yaml` holds the canary
//! Ingress `<ingress>-canary`, a copy of the Ingress `spec.ingressRef` names. Every rendered
//! document passes the strict `networking.k8s.io/v1` Ingress schema at every weight; insta
//! snapshots pin the canaries of Flagger's own e2e tests (fluxcd/flagger `test/nginx/`,
//! `test/skipper/`) and its nginx tutorial's A/B match; `validate` errors name file, line and
//! field for a bad or unresolved `ingressRef` and for what Flagger's mapping would drop.

use serde_json::Value as Json;
use sluice::manifest::model::Canary;
use sluice::route::{render_route, Backends, Weights};

use crate::support::canary::{ab_analysis, flagger_test, load_repo, NO_STATE};
use crate::support::manifests::{nginx_canary, nginx_ingress, user_ingress};
use crate::support::Schemas;

/// `test/nginx/test-canary.sh`, the first canary.
const NGINX_STEPS: &str = "    maxWeight: 40\n    stepWeight: 20";
/// `test/nginx/test-canary.sh`, the A/B canary.
fn nginx_ab() -> String {
    ab_analysis(3, "x-user", "exact: \"insider\"")
}
/// `docs/gitbook/tutorials/nginx-progressive-delivery.md`, A/B testing: a header and a cookie.
const NGINX_TUTORIAL_AB: &str = "    iterations: 10
    match:
      - headers:
          x-canary:
            exact: \"insider\"
      - headers:
          cookie:
            exact: \"canary\"";

/// `test/skipper/test-canary.sh`: the user's Ingress and the canary.
fn skipper_ingress() -> String {
    user_ingress("podinfo-ingress", "skipper", "podinfo-service")
}

fn skipper_canary(analysis: &str) -> String {
    flagger_test("    name: podinfo-service\n    port: 80\n    targetPort: http")
        .provider("skipper")
        .refs("  ingressRef:\n    apiVersion: networking.k8s.io/v1\n    kind: Ingress\n    name: podinfo-ingress\n")
        .threshold(Some(5))
        .yaml(analysis)
}

/// Loads `files` (repo path, text) written into a fresh work tree, as the tick does.
fn load_files(files: &[(&str, &str)]) -> (Vec<Canary>, Vec<String>) {
    let loaded = load_repo(files);
    let errors = loaded.errors.iter().map(ToString::to_string).collect();
    (loaded.canaries, errors)
}

fn load_one(ingress: &str, canary: &str) -> Canary {
    let (canaries, errors) = load_files(&[
        ("apps/podinfo/ingress.yaml", ingress),
        ("apps/podinfo/canary.yaml", canary),
    ]);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(canaries.len(), 1);
    canaries.into_iter().next().unwrap()
}

fn errors(ingress: &str, canary: &str) -> Vec<String> {
    load_files(&[
        ("apps/podinfo/ingress.yaml", ingress),
        ("apps/podinfo/canary.yaml", canary),
    ])
    .1
}

fn backends(svc: &str) -> (String, String) {
    (format!("{svc}-primary"), format!("{svc}-canary"))
}

/// Renders `canary` at `weight`, checks the document against the strict Ingress schema, and
/// returns the text.
fn render(canary: &Canary, weight: u8, schemas: &mut Schemas) -> String {
    let (primary, canary_svc) = backends(canary.service.name.as_str());
    let file = render_route(
        canary,
        &Backends {
            primary: &primary,
            canary: &canary_svc,
        },
        Weights::from_canary(weight).unwrap(),
        &NO_STATE,
    )
    .unwrap()
    .expect("an Ingress route writes a file");
    assert_eq!(file.file_name, "route.yaml");
    let doc: Json = serde_saphyr::from_str(&file.content).unwrap();
    let errors = schemas.errors(&doc);
    assert!(
        errors.is_empty(),
        "weight {weight}: {errors:#?}\n{}",
        file.content
    );
    file.content
}

fn annotations(text: &str) -> Json {
    let doc: Json = serde_saphyr::from_str(text).unwrap();
    doc["metadata"]["annotations"].clone()
}

#[test]
fn nginx_every_weight_is_a_schema_valid_canary_ingress() {
    let mut schemas = Schemas::default();
    let canary = load_one(&nginx_ingress(), &nginx_canary(NGINX_STEPS));
    for weight in 0..=100u8 {
        let text = render(&canary, weight, &mut schemas);
        let a = annotations(&text);
        assert_eq!(a["nginx.ingress.kubernetes.io/canary"], "true");
        assert_eq!(
            a["nginx.ingress.kubernetes.io/canary-weight"],
            weight.to_string()
        );
    }
}

#[test]
fn nginx_e2e_canary_snapshots() {
    let mut schemas = Schemas::default();
    let canary = load_one(&nginx_ingress(), &nginx_canary(NGINX_STEPS));
    insta::assert_snapshot!(
        "nginx-e2e-canary-initialized",
        render(&canary, 0, &mut schemas)
    );
    insta::assert_snapshot!(
        "nginx-e2e-canary-step-20",
        render(&canary, 20, &mut schemas)
    );
}

#[test]
fn nginx_e2e_ab_routes_the_header_only_while_the_canary_gets_traffic() {
    let mut schemas = Schemas::default();
    let canary = load_one(&nginx_ingress(), &nginx_canary(&nginx_ab()));
    insta::assert_snapshot!("nginx-e2e-ab-analysis", render(&canary, 100, &mut schemas));
    let idle = annotations(&render(&canary, 0, &mut schemas));
    assert_eq!(idle["nginx.ingress.kubernetes.io/canary-weight"], "0");
    assert_eq!(
        idle.get("nginx.ingress.kubernetes.io/canary-by-header"),
        None
    );
}

#[test]
fn nginx_tutorial_ab_header_and_cookie_snapshot() {
    let mut schemas = Schemas::default();
    let canary = load_one(&nginx_ingress(), &nginx_canary(NGINX_TUTORIAL_AB));
    insta::assert_snapshot!("nginx-tutorial-ab", render(&canary, 100, &mut schemas));
}

/// The user's own canary annotations and kubectl's last-applied copy are Flagger's to drop;
/// its other annotations and labels are copied, and a regex header becomes a pattern.
#[test]
fn nginx_keeps_the_users_metadata_but_not_its_canary_annotations() {
    let ingress = nginx_ingress().replace(
        "    kubernetes.io/ingress.class: \"nginx\"\n",
        "    kubernetes.io/ingress.class: \"nginx\"
    nginx.ingress.kubernetes.io/canary-weight: \"50\"
    nginx.ingress.kubernetes.io/rewrite-target: /
    kubectl.kubernetes.io/last-applied-configuration: \"{}\"\n",
    );
    let ab = "    iterations: 3\n    match:\n    - headers:\n        x-user:\n          regex: \"^(insider|beta)$\"";
    let mut schemas = Schemas::default();
    let canary = load_one(&ingress, &nginx_canary(ab));
    let a = annotations(&render(&canary, 100, &mut schemas));
    let expected: Json = serde_json::json!({
        "kubernetes.io/ingress.class": "nginx",
        "nginx.ingress.kubernetes.io/rewrite-target": "/",
        "nginx.ingress.kubernetes.io/canary": "true",
        "nginx.ingress.kubernetes.io/canary-weight": "0",
        "nginx.ingress.kubernetes.io/canary-by-header": "x-user",
        "nginx.ingress.kubernetes.io/canary-by-header-pattern": "^(insider|beta)$",
    });
    assert_eq!(a, expected);
}

/// Flagger swaps only the paths to the apex Service; other backends stay.
#[test]
fn only_paths_to_the_apex_service_go_to_the_canary() {
    let ingress = nginx_ingress().replace(
        "      - pathType: Prefix\n        path: \"/\"\n",
        "      - pathType: Prefix
        path: \"/static\"
        backend:
          service:
            name: assets
            port:
              number: 8080
      - pathType: Prefix
        path: \"/\"\n",
    );
    let mut schemas = Schemas::default();
    let canary = load_one(&ingress, &nginx_canary(NGINX_STEPS));
    let doc: Json = serde_saphyr::from_str(&render(&canary, 20, &mut schemas)).unwrap();
    let paths = &doc["spec"]["rules"][0]["http"]["paths"];
    assert_eq!(paths[0]["backend"]["service"]["name"], "assets");
    assert_eq!(paths[1]["backend"]["service"]["name"], "podinfo-canary");
}

#[test]
fn skipper_every_weight_is_a_schema_valid_canary_ingress() {
    let mut schemas = Schemas::default();
    let canary = load_one(
        &skipper_ingress(),
        &skipper_canary("    maxWeight: 100\n    stepWeight: 10"),
    );
    for weight in 0..=100u8 {
        let text = render(&canary, weight, &mut schemas);
        let a = annotations(&text);
        assert_eq!(
            a["zalando.org/backend-weights"],
            format!(
                "{{\"podinfo-service-canary\":{weight},\"podinfo-service-primary\":{}}}",
                100 - weight
            )
        );
        let first = if weight == 0 {
            "False()"
        } else {
            "Weight(100)"
        };
        assert_eq!(a["zalando.org/skipper-predicate"], first);
    }
}

#[test]
fn skipper_e2e_canary_snapshots() {
    let mut schemas = Schemas::default();
    let canary = load_one(
        &skipper_ingress(),
        &skipper_canary("    maxWeight: 100\n    stepWeight: 10"),
    );
    insta::assert_snapshot!(
        "skipper-e2e-canary-initialized",
        render(&canary, 0, &mut schemas)
    );
    insta::assert_snapshot!(
        "skipper-e2e-canary-step-10",
        render(&canary, 10, &mut schemas)
    );
}

/// The user's own predicate follows Flagger's, which it never loses.
#[test]
fn skipper_keeps_the_users_predicate_after_its_own() {
    let ingress = skipper_ingress().replace(
        "    kubernetes.io/ingress.class: \"skipper\"\n",
        "    kubernetes.io/ingress.class: \"skipper\"\n    zalando.org/skipper-predicate: Method(\"GET\") && Weight(100)\n",
    );
    let mut schemas = Schemas::default();
    let canary = load_one(&ingress, &skipper_canary("    iterations: 3"));
    let mut at =
        |w| annotations(&render(&canary, w, &mut schemas))["zalando.org/skipper-predicate"].clone();
    assert_eq!(at(100), "Weight(100) && Method(\"GET\")");
    assert_eq!(at(0), "False() && Method(\"GET\")");
}

/// Every bad or unresolved `ingressRef`, and every match Flagger's nginx mapping would drop,
/// is a `validate` error with file, line and field.
#[test]
fn bad_ingress_references_and_matches_are_reported_with_line_and_field() {
    let c = "apps/podinfo/canary.yaml";
    let i = "apps/podinfo/ingress.yaml";
    let steps = nginx_canary(NGINX_STEPS);
    let cases: Vec<(String, String, Vec<String>)> = vec![
        (
            nginx_ingress(),
            steps.replace("  ingressRef:\n    apiVersion: networking.k8s.io/v1\n    kind: Ingress\n    name: podinfo\n", ""),
            vec![format!("{c}:6: spec.ingressRef: required field is missing: Flagger's ingress routers copy the Ingress it names (apiVersion: networking.k8s.io/v1, kind: Ingress, name)")],
        ),
        (
            nginx_ingress(),
            steps.replace("    name: podinfo\n  progress", "    name: podinfo-web\n  progress"),
            vec![format!("{c}:15: spec.ingressRef.name: no Ingress test/podinfo-web in the repo: expected a networking.k8s.io/v1 Ingress named \"podinfo-web\" in namespace test (or with no namespace) in a YAML file")],
        ),
        (
            nginx_ingress().replace("namespace: test", "namespace: prod"),
            steps.clone(),
            vec![format!("{c}:15: spec.ingressRef.name: no Ingress test/podinfo in the repo: expected a networking.k8s.io/v1 Ingress named \"podinfo\" in namespace test (or with no namespace) in a YAML file")],
        ),
        (
            nginx_ingress(),
            // The apiVersion chooses nothing (a warning, flagger_warnings.rs); the kind
            // is checked by Flagger's CRD.
            steps.replace("    apiVersion: networking.k8s.io/v1\n    kind: Ingress", "    apiVersion: extensions/v1beta1\n    kind: Ingres"),
            vec![format!("{c}:14: spec.ingressRef.kind: expected Ingress, found \"Ingres\"")],
        ),
        (
            nginx_ingress().replace("            name: podinfo\n", "            name: frontend\n"),
            steps.clone(),
            vec![format!("{c}:15: spec.ingressRef.name: Ingress podinfo ({i}:1) has no path whose backend is the apex Service \"podinfo\"; Flagger sends the canary's share through a copy of that path, so add one (backend.service.name: podinfo)")],
        ),
        (
            nginx_ingress().replace("    kubernetes.io/ingress.class: \"nginx\"", "    kubernetes.io/ingress.class: \"nginx\"\n    nginx.ingress.kubernetes.io/proxy-body-size: 8"),
            steps.clone(),
            vec![format!("{i}:10: metadata.annotations.nginx.ingress.kubernetes.io/proxy-body-size: expected a string, found 8, which YAML reads as a number, boolean or null; quote it")],
        ),
        (
            nginx_ingress().replace("  - host: \"app.example.com\"\n    http:", "  - host: \"www.example.com\"\n  - host: \"app.example.com\"\n    http:"),
            steps.clone(),
            vec![format!("{i}:12: spec.rules[0].http.paths: required by Flagger's ingress routers, which copy each rule's paths into the canary Ingress; add the paths this host serves")],
        ),
        (
            nginx_ingress().replace("networking.k8s.io/v1", "networking.k8s.io/v1beta1"),
            steps.clone(),
            vec![format!("{i}:1: apiVersion: expected networking.k8s.io/v1 (the Ingress canary podinfo references through spec.ingressRef; Flagger reads no other Ingress API), found \"networking.k8s.io/v1beta1\"")],
        ),
        (
            nginx_ingress(),
            nginx_canary("    iterations: 3\n    match:\n    - headers:\n        x-user:\n          exact: insider\n    - headers:\n        x-group:\n          exact: beta"),
            vec![format!("{c}:29: spec.analysis.match[1].headers.x-group: ingress-nginx routes on one header (canary-by-header), and spec.analysis.match[0].headers.x-user already names one; Flagger would keep either at random, so keep one")],
        ),
        (
            nginx_ingress(),
            nginx_canary("    iterations: 3\n    match:\n    - headers:\n        x-user:\n          prefix: ins\n        cookie:\n          regex: \"canary=always\"\n      uri:\n        prefix: /api"),
            vec![
                format!("{c}:30: spec.analysis.match[0].uri: Flagger's nginx router routes A/B requests on one header and one cookie only (canary-by-header, canary-by-cookie) and drops this condition; remove it, or use a provider that matches it (gatewayapi:v1, istio)"),
                format!("{c}:28: spec.analysis.match[0].headers.cookie: Flagger's nginx router writes the exact value of a cookie match as canary-by-cookie (the name of a cookie whose value \"always\" selects the canary) and drops a prefix or regex; use exact: <cookie name>"),
                format!("{c}:26: spec.analysis.match[0].headers.x-user: ingress-nginx matches a header's value exactly (canary-by-header-value) or by regex (canary-by-header-pattern); Flagger drops a prefix, which would route only requests whose header is \"always\"; use exact or regex"),
            ],
        ),
        (
            nginx_ingress(),
            nginx_canary("    stepWeight: 10\n    sessionAffinity:\n      cookieName: flagger-cookie"),
            vec![format!("{c}:24: spec.analysis.sessionAffinity: Flagger's ingress routers (nginx, skipper) ignore this field, so the rollout would not do what it says; remove it, or use a provider that supports it (gatewayapi:v1)")],
        ),
        (
            skipper_ingress(),
            skipper_canary(&nginx_ab()),
            vec![format!("{c}:24: spec.analysis.match: Flagger's Skipper router does not route on request headers (A/B testing); remove analysis.match for a blue/green rollout, or use provider nginx")],
        ),
    ];
    let mut wrong = Vec::new();
    for (ingress, canary, expected) in cases {
        let found = errors(&ingress, &canary);
        if found != expected {
            wrong.push(format!("expected {expected:#?}\nfound {found:#?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// Two Ingresses of one name and namespace: which one Flagger would read is up to the order
/// they were applied in, so sluice names both.
#[test]
fn an_ingress_defined_twice_is_an_error_naming_both() {
    let (_, errors) = load_files(&[
        ("apps/podinfo/ingress.yaml", &nginx_ingress()),
        ("apps/podinfo/more/ingress.yaml", &nginx_ingress()),
        ("apps/podinfo/canary.yaml", &nginx_canary(NGINX_STEPS)),
    ]);
    assert_eq!(
        errors,
        ["apps/podinfo/canary.yaml:15: spec.ingressRef.name: Ingress test/podinfo is defined twice: apps/podinfo/ingress.yaml:1 and apps/podinfo/more/ingress.yaml:1"]
    );
}

/// A native canary has no `ingressRef`, so an Ingress route cannot be native (yet).
#[test]
fn a_native_ingress_route_is_refused() {
    let native = "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata:
  name: podinfo
  namespace: test
spec:
  source: apps/podinfo/deployment.yaml
  service:
    port: 9898
  route:
    apiVersion: networking.k8s.io/v1
    kind: Ingress
  analysis:
    interval: 1m
    stepWeight: 10
";
    let errs = errors(&nginx_ingress(), native);
    assert!(
        errs.iter().any(|e| e.starts_with(
            "apps/podinfo/canary.yaml:11: spec.route: an Ingress route copies the user's Ingress"
        )),
        "{errs:#?}"
    );
}
