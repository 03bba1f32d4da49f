//! The APISIX router: `route.yaml` holds the ApisixRoute `<route>-<svc>-canary` copied from the
//! user's route in `routeRef`. Pinned by insta snapshots of Flagger's own APISIX canary
//! (fluxcd/flagger `test/apisix/test-canary.sh`, the same as the tutorial
//! `docs/gitbook/tutorials/apisix-progressive-delivery.md`), checked against the strict
//! ApisixRoute schema at every weight, and run through the loop against a `git daemon`:
//! initialization, every step, promotion and rollback.

use std::path::Path;

use serde_json::Value as Json;
use sluice::core::status::Phase;
use sluice::manifest::model::Canary;
use sluice::route::{render_route, Backends, RouteState, Weights};

use crate::support::canary::{flagger_e2e_analysis, flagger_test, object_ref, podinfo};
use crate::support::canary::{load_one, podinfo_query_model, repo_errors as errors};
use crate::support::manifests::apisix_route;
use crate::support::rollout::{assert_rolled_back, World, STEPS};
use crate::support::schema_valid;
use crate::support::{str_pairs, Schemas};

const BACKENDS: Backends<'static> = Backends {
    primary: "podinfo-primary",
    canary: "podinfo-canary",
};

/// `test/apisix/test-canary.sh`: the user's ApisixRoute.
const E2E_ROUTE: &str = "apiVersion: apisix.apache.org/v2
kind: ApisixRoute
metadata:
  name: podinfo
  namespace: test
spec:
  http:
    - backends:
        - serviceName: podinfo
          servicePort: 80
      match:
        hosts:
          - app.example.com
        methods:
          - GET
        paths:
          - /*
      name: method
      plugins:
        - name: prometheus
          enable: true
          config:
            disable: false
            prefer_name: true
";

/// `test/apisix/test-canary.sh`: the Canary, unchanged (`{route}` is its routeRef name).
fn e2e_canary(route: &str, analysis: &str) -> String {
    flagger_test("    port: 80\n    targetPort: 9898")
        .provider("apisix")
        .refs(&format!(
            "  # apisix route reference\n  routeRef:\n    apiVersion: apisix.apache.org/v2\n    kind: ApisixRoute\n    name: {route}\n  progressDeadlineSeconds: 60\n"
        ))
        .bare_analysis()
        .yaml(analysis)
}

/// The e2e canary naming the ApisixRoute `name`, loaded beside `route` in the file `path`.
fn with_route(path: &str, route: &str, name: &str) -> Canary {
    load_one(&[
        (path, route),
        ("test/canary.yaml", &e2e_canary(name, &e2e_analysis())),
    ])
}

/// The analysis of the script's Canary.
fn e2e_analysis() -> String {
    flagger_e2e_analysis(
        "10s",
        10,
        "30s",
        "      - name: load-test
        url: http://flagger-loadtester.test/
        timeout: 5s
        type: rollout
        metadata:
          cmd: |-
              hey -z 1m -q 10 -c 2 -h2 -host app.example.com http://apisix-gateway.apisix/api/info",
    )
}

/// An ApisixRoute with every field the canary route copies: labels and annotations, an
/// ingress class, two rules (only the one for `podinfo` is copied), each rule field, a named
/// port with resolveGranularity and subset, and a stream rule.
const FULL_ROUTE: &str = "apiVersion: apisix.apache.org/v2
kind: ApisixRoute
metadata:
  name: web
  namespace: test
  labels:
    app: podinfo
    app.kubernetes.io/managed-by: Helm
  annotations:
    example.com/owner: team-a
spec:
  ingressClassName: apisix
  http:
    - name: other
      match:
        paths: [/other/*]
      backends:
        - serviceName: other
          servicePort: 80
    - name: api
      priority: 3
      timeout:
        connect: 5s
        read: 30s
      match:
        paths: [/api/*]
        hosts: [app.example.com]
        exprs:
          - subject:
              scope: Header
              name: X-Env
            op: Equal
            value: prod
      websocket: true
      plugin_config_name: shared
      authentication:
        enable: true
        type: keyAuth
        keyAuth:
          header: apikey
      plugins:
        - name: proxy-rewrite
          enable: true
          config:
            regex_uri: [\"^/api/(.*)\", \"/$1\"]
      backends:
        - serviceName: podinfo
          servicePort: http
          resolveGranularity: service
          subset: v1
          weight: 100
  stream:
    - name: tcp
      protocol: TCP
      match:
        ingressPort: 9100
      backend:
        serviceName: podinfo-tcp
        servicePort: 9100
";

fn render(canary: &Canary, canary_weight: u8) -> String {
    render_route(
        canary,
        &BACKENDS,
        Weights::from_canary(canary_weight).unwrap(),
        &RouteState::default(),
    )
    .unwrap()
    .expect("an ApisixRoute")
    .content
}

#[test]
fn apisix_e2e_canary_copies_the_routes_rule_with_weighted_backends() {
    let canary = with_route("test/route.yaml", E2E_ROUTE, "podinfo");
    let initial = render(&canary, 0);
    insta::assert_snapshot!("apisix-e2e-initial", initial);
    let doc = schema_valid(&initial);
    assert_eq!(doc["metadata"]["name"], "podinfo-podinfo-canary");
    let step = render(&canary, 10);
    insta::assert_snapshot!("apisix-e2e-weight-10", step);
    let doc = schema_valid(&step);
    let backends = &doc["spec"]["http"][0]["backends"];
    assert_eq!(backends[0]["weight"], 90);
    assert_eq!(backends[1]["weight"], 10);
    for weight in 0..=100 {
        schema_valid(&render(&canary, weight));
    }
}

#[test]
fn apisix_copies_every_field_of_the_services_rule_and_the_route() {
    let canary = with_route("apps/web-route.yaml", FULL_ROUTE, "web");
    let text = render(&canary, 30);
    insta::assert_snapshot!("apisix-all-fields", text);
    let doc = schema_valid(&text);
    assert_eq!(doc["metadata"]["name"], "web-podinfo-canary");
    assert_eq!(doc["metadata"]["labels"]["app"], "podinfo");
    assert_eq!(
        doc["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "sluice"
    );
    let rule = &doc["spec"]["http"][0];
    assert_eq!(doc["spec"]["http"].as_array().unwrap().len(), 1);
    assert_eq!(rule["name"], "api");
    assert_eq!(rule["priority"], 10000);
    assert_eq!(rule["match"]["exprs"][0]["value"], "prod");
    for (i, name) in ["podinfo-primary", "podinfo-canary"].iter().enumerate() {
        let b = &rule["backends"][i];
        assert_eq!(b["serviceName"], *name);
        assert_eq!(b["servicePort"], "http");
        assert_eq!(b["resolveGranularity"], "service");
        assert_eq!(b["subset"], "v1");
    }
    assert_eq!(
        doc["spec"]["stream"][0]["backend"]["serviceName"],
        "podinfo-tcp"
    );
}

#[test]
fn apisix_metric_queries_name_the_route_ref() {
    let canary = with_route("apps/web-route.yaml", FULL_ROUTE, "web");
    let model = podinfo_query_model(&canary);
    assert_eq!(
        model.route, "web",
        "Flagger's toMetricModel takes routeRef.name"
    );
}

/// Repo files: path and text.
type Files = Vec<(&'static str, String)>;

/// `(files, expected errors)`: each bad input is reported at its file, line and field.
#[test]
fn apisix_bad_or_unresolved_route_refs_are_validate_errors() {
    let canary = |route: &str| e2e_canary(route, &e2e_analysis());
    let no_ref = e2e_canary("podinfo", &e2e_analysis()).replace(
        "  # apisix route reference\n  routeRef:\n    apiVersion: apisix.apache.org/v2\n    kind: ApisixRoute\n    name: podinfo\n",
        "",
    );
    let wrong_ref = canary("podinfo")
        .replace(
            "apisix.apache.org/v2\n    kind",
            "apisix.apache.org/v2beta3\n    kind",
        )
        .replace("kind: ApisixRoute", "kind: ApisixUpstream");
    let other_ns = E2E_ROUTE.replace("namespace: test", "namespace: prod");
    let cases: Vec<(Files, Vec<&str>)> = vec![
        (
            vec![("c.yaml", no_ref)],
            vec!["c.yaml:6: spec.routeRef: required field is missing: provider apisix routes through an ApisixRoute you write; name it here ({apiVersion: apisix.apache.org/v2, kind: ApisixRoute, name: <route>})"],
        ),
        (
            vec![("c.yaml", canary("podinfo"))],
            vec!["c.yaml:16: spec.routeRef.name: ApisixRoute test/podinfo not found in the repo's YAML files"],
        ),
        (
            vec![("c.yaml", canary("podinfo")), ("r.yaml", other_ns)],
            vec!["c.yaml:16: spec.routeRef.name: ApisixRoute test/podinfo not found in the repo's YAML files"],
        ),
        (
            vec![("c.yaml", wrong_ref), ("r.yaml", E2E_ROUTE.to_string())],
            vec![
                "c.yaml:14: spec.routeRef.apiVersion: expected apisix.apache.org/v2 (the route Flagger's APISIX router reads), found \"apisix.apache.org/v2beta3\"",
                "c.yaml:15: spec.routeRef.kind: expected ApisixRoute (the route Flagger's APISIX router reads), found \"ApisixUpstream\"",
            ],
        ),
        (
            vec![("c.yaml", canary("podinfo")), ("a.yaml", E2E_ROUTE.to_string()), ("b.yaml", E2E_ROUTE.to_string())],
            vec!["b.yaml:1: metadata.name: ApisixRoute test/podinfo is defined twice (also at a.yaml:1)"],
        ),
    ];
    for (files, expected) in cases {
        assert_eq!(errors(&str_pairs(&files)), expected, "{files:?}");
    }
}

/// What the router cannot render is refused in the user's route, at its line.
#[test]
fn apisix_routes_the_router_cannot_split_are_validate_errors() {
    let canary = e2e_canary("podinfo", &e2e_analysis());
    let cases: [(String, &[&str]); 6] = [
        (
            E2E_ROUTE.replace("serviceName: podinfo", "serviceName: web"),
            &["r.yaml:7: spec.http: no rule of ApisixRoute podinfo has a backend with serviceName \"podinfo\", the canary's Service; Flagger splits the rule that sends to it"],
        ),
        (
            E2E_ROUTE.replace(
                "          servicePort: 80\n",
                "          servicePort: 80\n        - serviceName: legacy\n          servicePort: 80\n",
            ),
            &["r.yaml:8: spec.http[0].backends: expected exactly one backend, the canary's Service (Flagger splits a rule with one backend into primary and canary), found 2"],
        ),
        (
            E2E_ROUTE.replace(
                "      name: method\n",
                "      name: method\n      upstreams:\n        - name: external\n",
            ),
            &["r.yaml:19: spec.http[0].upstreams: the canary route's backends would share the traffic with these external upstreams, so the canary would not get its weight (Flagger drops them); move the upstreams to another rule"],
        ),
        (
            E2E_ROUTE.replace("      name: method\n", "      name: method\n      retries: 3\n"),
            &["r.yaml:19: spec.http[0].retries: unknown ApisixRoute http field \"retries\"; expected one of: name, priority, timeout, match, backends, websocket, plugin_config_name, plugin_config_namespace, plugins, authentication, upstreams"],
        ),
        (
            E2E_ROUTE.replace("          servicePort: 80\n", "          servicePort: 80\n          port: 80\n"),
            &["r.yaml:11: spec.http[0].backends[0].port: unknown ApisixRoute backend field; expected one of: serviceName, servicePort, resolveGranularity, weight, subset"],
        ),
        (
            E2E_ROUTE.replace("apisix.apache.org/v2\n", "apisix.apache.org/v2beta3\n"),
            &["r.yaml:1: apiVersion: expected apisix.apache.org/v2 (the ApisixRoute version Flagger's router reads and sluice writes), found \"apisix.apache.org/v2beta3\""],
        ),
    ];
    for (route, expected) in cases {
        assert_eq!(
            errors(&[("c.yaml", &canary), ("r.yaml", &route)]),
            expected,
            "{route}"
        );
    }
}

/// Flagger's APISIX router shifts weights only: the strategies and analysis fields it does
/// not implement are refused at their lines.
#[test]
fn apisix_refuses_what_flaggers_router_does_not_do() {
    let cases: [(&str, &[&str]); 3] = [
        (
            "    interval: 10s\n    iterations: 5",
            &["c.yaml:23: spec.analysis.iterations: Flagger supports only canary releases with provider apisix (weights shifted by stepWeight, stepWeights or maxWeight); replace iterations with a weight schedule"],
        ),
        (
            "    interval: 10s\n    iterations: 5\n    match:\n      - headers:\n          x-canary:\n            exact: insider",
            &["c.yaml:24: spec.analysis.match: Flagger supports only canary releases with provider apisix: the canary ApisixRoute splits by weight and cannot send matching requests to the canary; remove analysis.match and set a weight schedule"],
        ),
        (
            "    interval: 10s\n    stepWeight: 10\n    sessionAffinity:\n      cookieName: flagger-cookie",
            &["c.yaml:24: spec.analysis.sessionAffinity: Flagger's APISIX router does not implement it (an ApisixRoute canary shifts weights only); remove it, or use a Gateway API or Istio provider"],
        ),
    ];
    for (analysis, expected) in cases {
        let canary = e2e_canary("podinfo", analysis);
        assert_eq!(
            errors(&[("c.yaml", &canary), ("r.yaml", E2E_ROUTE)]),
            expected,
            "{analysis}"
        );
    }
}

/// Every sluice commit's `route.yaml`: one schema-valid ApisixRoute whose weights are the
/// status file's. Returns the weights, in order.
fn check_every_commit(bare: &Path) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut weights = Vec::new();
    for (sha, trailer) in crate::support::rollout::sluice_commits(bare) {
        let show = |file: &str| crate::support::rollout::show(bare, &sha, file);
        let status: Json =
            serde_saphyr::from_str(&show(crate::support::rollout::STATUS_FILE)).unwrap();
        let route: Json =
            serde_saphyr::from_str(&show(crate::support::rollout::ROUTE_FILE)).unwrap();
        let errors = schemas.errors(&route);
        assert!(errors.is_empty(), "{sha}: {errors:?}");
        assert_eq!(route["metadata"]["name"], "podinfo-podinfo-canary");
        let rule = &route["spec"]["http"][0];
        assert_eq!(rule["priority"], 10000);
        assert_eq!(rule["backends"][0]["serviceName"], "podinfo-primary");
        assert_eq!(rule["backends"][1]["serviceName"], "podinfo-canary");
        let found = format!(
            "primary={} canary={}",
            rule["backends"][0]["weight"], rule["backends"][1]["weight"]
        );
        let expected = format!(
            "primary={} canary={}",
            status["primaryWeight"], status["canaryWeight"]
        );
        assert_eq!(found, expected, "{sha}");
        assert_eq!(trailer, expected, "{sha}");
        weights.push(found);
    }
    weights
}

/// The user's route is never rewritten: it stays as committed, outside the output folder.
fn assert_user_route_untouched(w: &World) {
    assert_eq!(
        crate::support::rollout::show(&w.bare, "main", "apps/podinfo/route.yaml"),
        LOOP_ROUTE
    );
}

const LOOP_ROUTE: &str = apisix_route!(9898);

fn loop_canary(analysis: &str) -> String {
    podinfo()
        .provider("apisix")
        .refs(&object_ref(
            "routeRef",
            "apisix.apache.org/v2",
            "ApisixRoute",
            "podinfo",
        ))
        .yaml(&format!("{STEPS}\n{analysis}"))
}

#[test]
fn apisix_canary_rolls_out_through_git_daemon() {
    let mut w = World::with_files(&loop_canary(""), &[("apps/podinfo/route.yaml", LOOP_ROUTE)]);
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
    let primary = crate::support::rollout::show(
        &w.bare,
        "main",
        "clusters/prod/podinfo/podinfo-primary.yaml",
    );
    assert!(primary.contains("6.7.1"), "promoted: {primary}");
    assert_user_route_untouched(&w);
}

#[test]
fn apisix_rollback_routes_everything_back_to_the_primary() {
    // The offline observer never observes a metric, so every check fails.
    let mut w = World::with_files(
        &loop_canary(
            "    metrics:\n      - name: request-success-rate\n        thresholdRange: {min: 99}",
        ),
        &[("apps/podinfo/route.yaml", LOOP_ROUTE)],
    );
    w.until(Phase::Initialized);
    let primary_before = crate::support::rollout::show(
        &w.bare,
        "main",
        "clusters/prod/podinfo/podinfo-primary.yaml",
    );
    w.new_revision("6.7.1");
    w.until(Phase::Failed);
    let weights = check_every_commit(&w.bare);
    assert_rolled_back(&weights, "primary=80 canary=20", "primary=100 canary=0");
    assert_eq!(
        crate::support::rollout::show(
            &w.bare,
            "main",
            "clusters/prod/podinfo/podinfo-primary.yaml"
        ),
        primary_before,
        "the primary keeps the old version"
    );
    assert_user_route_untouched(&w);
}
