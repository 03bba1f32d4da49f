//! The Istio router: `route.yaml` holds a VirtualService and two DestinationRules. Every
//! document is checked against Istio's strict schemas (e2e/schemas, v1beta1 and v1), pinned by
//! insta snapshots of Flagger's own Istio canaries (fluxcd/flagger `test/istio/*.sh` and the
//! Istio tutorials in `docs/gitbook/tutorials/`), and swept over every weight.

use serde_json::{json, Value as Json};
use sluice::manifest::load::load_text;
use sluice::manifest::model::Canary;
use sluice::manifest::settings::{parse_settings, Settings};
use sluice::route::{render_route, RouteState, Weights};

use crate::support::canary::{ab_analysis, flagger_test, native_frontend};
use crate::support::canary::{assert_errors, BACKENDS, NO_STATE};
use crate::support::route_case::{documents, snapshot_cases, RouteCase as Case};
use crate::support::Schemas;

/// A Flagger canary for podinfo in `test`; `provider` is a whole `provider:` line or empty.
fn flagger(provider: &str, service: &str, analysis: &str) -> String {
    flagger_test(service)
        .spec(&format!("{provider}\n"))
        .yaml(analysis)
}

fn load_with(name: &str, text: &str, settings: &Settings) -> Canary {
    let loaded = load_text(name, text, settings);
    assert!(loaded.errors.is_empty(), "{name}: {:?}", loaded.errors);
    assert_eq!(loaded.canaries.len(), 1, "{name}");
    loaded.canaries.into_iter().next().expect("one canary")
}

fn load(name: &str, text: &str) -> Canary {
    load_with(name, text, &Settings::default())
}

/// `test/istio/test-canary.sh`, first canary: no provider (Flagger's default, Istio), port
/// discovery without a gateway (no destination port), request header changes.
const E2E_CANARY_SERVICE: &str = "    port: 9898
    portDiscovery: true
    headers:
      request:
        add:
          x-envoy-upstream-rq-timeout-ms: \"15000\"
          x-envoy-max-retries: \"10\"
          x-envoy-retry-on: \"gateway-error,connect-failure,refused-stream\"";
const E2E_CANARY_ANALYSIS: &str = "    maxWeight: 30\n    stepWeight: 10";

/// `test/istio/test-canary.sh`, blue/green and A/B canaries.
const E2E_BG_SERVICE: &str = "    portDiscovery: true
    port: 80
    targetPort: 9898
    portName: http-podinfo";
const E2E_BG_ANALYSIS: &str = "    iterations: 5";

/// `test/istio/test-delegation.sh`: a delegate VirtualService, so the destinations carry the
/// port (port discovery with delegation).
const E2E_DELEGATION_SERVICE: &str = "    port: 80
    targetPort: 9898
    portDiscovery: true
    delegation: true";

/// `docs/gitbook/tutorials/istio-progressive-delivery.md` (without its autoscalerRef).
const TUTORIAL_SERVICE: &str = "    port: 9898
    targetPort: 9898
    gateways:
    - istio-system/public-gateway
    hosts:
    - app.example.com
    trafficPolicy:
      tls:
        mode: DISABLE
    retries:
      attempts: 3
      perTryTimeout: 1s
      retryOn: \"gateway-error,connect-failure,refused-stream\"";
const TUTORIAL_ANALYSIS: &str = "    maxWeight: 50\n    stepWeight: 10";

/// `docs/gitbook/tutorials/istio-ab-testing.md`: A/B on a header or a cookie, behind a gateway.
const AB_TUTORIAL_SERVICE: &str = "    port: 9898
    targetPort: 9898
    gateways:
    - istio-system/public-gateway
    hosts:
    - app.example.com
    trafficPolicy:
      tls:
        mode: DISABLE";
const AB_TUTORIAL_ANALYSIS: &str = "    iterations: 10
    match:
      - headers:
          x-canary:
            regex: \".*insider.*\"
      - headers:
          cookie:
            regex: \"^(.*?;)?(canary=always)(;.*)?$\"";

/// Every `spec.service` field the Istio router renders, with service matches that the A/B
/// matches below merge into.
const ALL_FIELDS_SERVICE: &str = "    port: 9898
    portDiscovery: true
    gateways: [istio-system/public-gateway, mesh]
    hosts: [app.example.com, podinfo]
    match:
      - uri:
          prefix: /api
        ignoreUriCase: true
      - uri:
          exact: /healthz
        method:
          exact: GET
    rewrite:
      uri: /v2/api
      authority: podinfo.test.svc.cluster.local
    headers:
      request:
        set:
          x-env: prod
        remove: [x-debug]
      response:
        add:
          strict-transport-security: max-age=31536000
    retries:
      attempts: 3
      perTryTimeout: 500ms
      retryOn: 5xx,reset
    timeout: 30s
    corsPolicy:
      allowOrigins:
        - exact: https://example.com
        - regex: \"https://.*\\\\.example\\\\.org\"
      allowMethods: [GET, POST]
      allowHeaders: [authorization]
      exposeHeaders: [x-request-id]
      maxAge: 24h
      allowCredentials: true
    mirror:
      - backendRef:
          name: podinfo-shadow
          port: 9898
      - backendRef:
          group: \"\"
          kind: Service
          name: recorder
          namespace: observability
          port: 8080
    trafficPolicy:
      loadBalancer:
        consistentHash:
          httpCookie:
            name: user
            ttl: 0s
      connectionPool:
        tcp:
          maxConnections: 100
          connectTimeout: 30ms
        http:
          http1MaxPendingRequests: 1024
          http2MaxRequests: 1024
          maxRequestsPerConnection: 10
          maxRetries: 3
          idleTimeout: 1h
          h2UpgradePolicy: UPGRADE
      outlierDetection:
        consecutive5xxErrors: 7
        interval: 5m
        baseEjectionTime: 15m
        maxEjectionPercent: 50
      tls:
        mode: ISTIO_MUTUAL
      portLevelSettings:
        - port:
            number: 9898
          loadBalancer:
            simple: LEAST_REQUEST
            localityLbSetting:
              enabled: true
              failoverPriority: [topology.kubernetes.io/region]";
const AB_SOURCE_LABELS: &str = "    iterations: 5
    match:
      - headers:
          x-canary:
            exact: insider
      - sourceLabels:
          app: frontend-canary";

/// A native canary whose route is a VirtualService (`networking.istio.io/v1`).
fn native() -> String {
    native_frontend(
        "    apiVersion: networking.istio.io/v1\n    kind: VirtualService\n    hosts: [frontend.example.com]\n    gateways: [shop/public]\n",
        &[10, 50],
    )
}

fn cases() -> Vec<Case> {
    let case = |name, provider, service, analysis| {
        Case::podinfo(name, load(name, &flagger(provider, service, analysis)))
    };
    vec![
        case(
            "istio-e2e-canary-no-provider",
            "",
            E2E_CANARY_SERVICE,
            E2E_CANARY_ANALYSIS,
        ),
        case(
            "istio-e2e-bluegreen",
            "  provider: istio",
            E2E_BG_SERVICE,
            E2E_BG_ANALYSIS,
        ),
        case(
            "istio-e2e-ab-cookie",
            "  provider: istio",
            E2E_BG_SERVICE,
            &ab_analysis(5, "cookie", r#"regex: "^(.*?;)?(type=insider)(;.*)?$""#),
        ),
        case(
            "istio-e2e-delegation",
            "",
            E2E_DELEGATION_SERVICE,
            E2E_CANARY_ANALYSIS,
        ),
        case(
            "istio-tutorial-gateway",
            "  provider: istio",
            TUTORIAL_SERVICE,
            TUTORIAL_ANALYSIS,
        ),
        case(
            "istio-tutorial-ab",
            "  provider: istio",
            AB_TUTORIAL_SERVICE,
            AB_TUTORIAL_ANALYSIS,
        ),
        case(
            "istio-all-fields",
            "  provider: istio",
            ALL_FIELDS_SERVICE,
            TUTORIAL_ANALYSIS,
        ),
        case(
            "istio-v1-all-fields-ab",
            "  provider: istio:v1",
            ALL_FIELDS_SERVICE,
            AB_SOURCE_LABELS,
        ),
        Case::frontend("istio-v1-native-route-only", load("native.yaml", &native())),
    ]
}

fn render(case: &Case, canary_weight: u8) -> String {
    case.render("Istio", canary_weight)
}

#[test]
fn every_istio_document_matches_its_strict_schema() {
    let mut schemas = Schemas::default();
    let mut checked = Vec::new();
    for case in cases() {
        for canary_weight in [0, 100, 37, 10, 50] {
            let docs = documents(&render(&case, canary_weight));
            let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
            assert_eq!(
                kinds,
                ["VirtualService", "DestinationRule", "DestinationRule"],
                "{}",
                case.name
            );
            for doc in &docs {
                let what = format!("{} at {canary_weight}", case.name);
                checked.push(schemas.assert_valid(doc, &what));
            }
        }
    }
    checked.sort();
    checked.dedup();
    assert_eq!(
        checked,
        [
            "destinationrule.networking.istio.io_v1-strict.json",
            "destinationrule.networking.istio.io_v1beta1-strict.json",
            "virtualservice.networking.istio.io_v1-strict.json",
            "virtualservice.networking.istio.io_v1beta1-strict.json",
        ]
    );
}

/// The strict schemas are not vacuous: they refuse what Istio's API server refuses.
#[test]
fn broken_istio_documents_fail_the_strict_schemas() {
    let mut schemas = Schemas::default();
    let all = cases();
    let docs = documents(&render(&all[6], 37));
    let mut vs = docs[0].clone();
    vs["spec"]["http"][0]["route"][0]["weigth"] = json!(10);
    assert!(!schemas.errors(&vs).is_empty());
    let mut dr = docs[1].clone();
    dr["spec"]["trafficPolicy"]["tls"]["mode"] = json!("MUTUAL_TLS");
    assert!(!schemas.errors(&dr).is_empty());
    let mut dr = docs[2].clone();
    dr["spec"]["trafficPolicy"]["loadBalancer"]["localityLbSetting"] =
        json!({"failover_priority": ["a"]});
    assert!(!schemas.errors(&dr).is_empty());
}

#[test]
fn rendered_istio_routes_snapshot() {
    snapshot_cases!(
        cases(),
        render,
        37,
        "istio-e2e-ab-cookie",
        "istio-e2e-ab-cookie-analysis"
    );
}

/// Weights of the first HTTP route (primary, canary); every route's weights sum to 100.
fn weights_of(vs: &Json) -> (u64, u64) {
    let routes = vs["spec"]["http"].as_array().expect("http routes");
    for route in routes {
        let sum: u64 = route["route"]
            .as_array()
            .expect("destinations")
            .iter()
            .map(|d| d["weight"].as_u64().expect("integer weight"))
            .sum();
        assert_eq!(sum, 100);
    }
    let first = routes[0]["route"].as_array().expect("destinations");
    assert_eq!(first.len(), 2);
    (
        first[0]["weight"].as_u64().expect("weight"),
        first[1]["weight"].as_u64().expect("weight"),
    )
}

#[test]
fn every_istio_weight_renders_whole_numbers_that_sum_to_100() {
    for case in cases() {
        for canary_weight in 0..=100u8 {
            let docs = documents(&render(&case, canary_weight));
            assert_eq!(
                weights_of(&docs[0]),
                (100 - u64::from(canary_weight), u64::from(canary_weight)),
                "{} at {canary_weight}",
                case.name
            );
        }
    }
}

#[test]
fn a_flagger_canary_without_provider_routes_with_istio_v1beta1() {
    let all = cases();
    let case = &all[0];
    assert_eq!(case.canary.provider.as_deref(), Some("istio"));
    let docs = documents(&render(case, 10));
    assert_eq!(docs[0]["apiVersion"], "networking.istio.io/v1beta1");
    assert_eq!(docs[0]["spec"]["hosts"], json!(["podinfo"]));
    assert_eq!(docs[0]["spec"]["gateways"], json!(["mesh"]));
    // Port discovery without a gateway: no destination port, as Flagger's makeDestination.
    assert_eq!(
        docs[0]["spec"]["http"][0]["route"][0],
        json!({"destination": {"host": "podinfo-primary"}, "weight": 90})
    );
    assert_eq!(
        docs[1]["spec"],
        json!({"host": "podinfo-primary"}),
        "no trafficPolicy, no other field"
    );
    assert_eq!(docs[2]["metadata"]["name"], "podinfo-canary");
}

/// The repo's default still wins over Flagger's, and a native canary still names its route.
#[test]
fn the_repo_default_provider_wins_over_istio() {
    let settings = parse_settings(
        ".sluice/config.yaml",
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprovider: gatewayapi:v1\n",
    )
    .expect("settings");
    let text = flagger(
        "",
        "    port: 9898\n    gatewayRefs: [{name: gw}]",
        E2E_CANARY_ANALYSIS,
    );
    let canary = load_with("c.yaml", &text, &settings);
    let file = render_route(
        &canary,
        &BACKENDS,
        Weights::from_canary(10).expect("w"),
        &NO_STATE,
    )
    .expect("renders")
    .expect("an HTTPRoute is a route file");
    assert!(file.content.contains("kind: HTTPRoute"), "{}", file.content);
    assert_eq!(canary.provider.as_deref(), Some("gatewayapi:v1"));
    let settings = parse_settings(
        ".sluice/config.yaml",
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprovider: istio:v1\n",
    )
    .expect("settings");
    let canary = load_with(
        "c.yaml",
        &flagger("", E2E_CANARY_SERVICE, E2E_CANARY_ANALYSIS),
        &settings,
    );
    let docs = documents(
        &render_route(
            &canary,
            &BACKENDS,
            Weights::from_canary(10).expect("w"),
            &NO_STATE,
        )
        .expect("renders")
        .expect("Istio writes a route file")
        .content,
    );
    assert_eq!(docs[0]["apiVersion"], "networking.istio.io/v1");
}

#[test]
fn istio_ab_routes_merge_matches_like_flagger() {
    let all = cases();
    let case = all
        .iter()
        .find(|c| c.name == "istio-v1-all-fields-ab")
        .expect("case");
    let docs = documents(&render(case, 100));
    let http = docs[0]["spec"]["http"].as_array().expect("http");
    assert_eq!(http.len(), 2);
    // Two A/B matches times two service matches, each A/B match's headers or sourceLabels
    // added to a copy of the service match.
    let merged = http[0]["match"].as_array().expect("match");
    assert_eq!(merged.len(), 4);
    assert_eq!(
        merged[0],
        json!({"uri": {"prefix": "/api"}, "headers": {"x-canary": {"exact": "insider"}}, "ignoreUriCase": true})
    );
    assert_eq!(
        merged[3],
        json!({"uri": {"exact": "/healthz"}, "method": {"exact": "GET"}, "sourceLabels": {"app": "frontend-canary"}})
    );
    assert_eq!(
        http[1]["match"],
        json!([{"uri": {"prefix": "/api"}, "ignoreUriCase": true}, {"uri": {"exact": "/healthz"}, "method": {"exact": "GET"}}])
    );
    assert_eq!(
        http[1]["route"],
        json!([{"destination": {"host": "podinfo-primary", "port": {"number": 9898}}, "weight": 100}])
    );
    for route in http {
        assert_eq!(route["timeout"], "30s");
        assert_eq!(route["retries"]["attempts"], 3);
        assert_eq!(
            route["rewrite"],
            json!({"uri": "/v2/api", "authority": "podinfo.test.svc.cluster.local"})
        );
        assert_eq!(
            route["mirrors"][1],
            json!({"destination": {"host": "recorder.observability.svc.cluster.local", "port": {"number": 8080}}})
        );
    }
    assert_eq!(
        docs[1]["spec"]["trafficPolicy"],
        docs[2]["spec"]["trafficPolicy"]
    );
    assert_eq!(
        docs[1]["spec"]["trafficPolicy"]["tls"],
        json!({"mode": "ISTIO_MUTUAL"})
    );
}

#[test]
fn istio_refusals_name_file_line_and_field() {
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            flagger(
                "  provider: istio",
                "    port: 9898",
                "    stepWeight: 10\n    mirror: true\n    mirrorWeight: 20",
            ),
            vec!["c.yaml:19: spec.analysis.mirror: not supported yet with stepWeight(s) on Istio routes: Flagger mirrors one interval at weight 0 before the first traffic step, a step sluice's schedule does not have yet, so the mirror would never be shown; remove mirror, or use iterations without match (blue/green mirrors the whole analysis)"],
        ),
        (
            flagger(
                "  provider: istio",
                "    port: 9898",
                "    iterations: 5\n    mirrorWeight: 20",
            ),
            vec!["c.yaml:19: spec.analysis.mirrorWeight: applies only with analysis.mirror: true; remove it, or set mirror: true"],
        ),
        (
            flagger(
                "  provider: istio",
                "    port: 9898",
                "    iterations: 5\n    match: [{headers: {x-canary: {exact: insider}}}]\n    mirror: true\n    sessionAffinity:\n      cookieName: flagger-cookie",
            ),
            vec![
                "c.yaml:21: spec.analysis.sessionAffinity: has no effect with A/B testing (analysis.match): Flagger's Istio router writes the A/B routes without the cookie routes; use sessionAffinity with stepWeight(s) or iterations without match",
                "c.yaml:20: spec.analysis.mirror: has no effect with A/B testing (analysis.match): Flagger's Istio router writes the A/B routes without the mirror; remove mirror, or use iterations without match",
            ],
        ),
        (
            flagger(
                "  provider: istio",
                "    port: 9898\n    match: [{headers: {x-user: {exact: a}}}]",
                "    stepWeight: 10\n    sessionAffinity:\n      cookieName: canary-flagger-cookie\n      primaryCookieName: primary-flagger-cookie",
            ),
            vec![
                "c.yaml:15: spec.service.match[0].headers: cannot be combined with analysis.sessionAffinity on Istio routes: Flagger's cookie route replaces these headers with the cookie match, so sticky requests would skip them",
            ],
        ),
        (
            flagger("", "    port: 9898\n    delegation: true\n    hosts: [a.example.com]", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:16: spec.service.hosts: a delegate VirtualService (delegation: true) has no hosts or gateways: the root VirtualService that delegates to it holds them; remove this field or delegation"],
        ),
        (
            flagger("", "    port: 9898\n    timeout: 0.5ms", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:15: spec.service.timeout: expected a duration of at least 1ms, found \"0.5ms\""],
        ),
        (
            flagger("", "    port: 9898\n    appProtocol: tcp", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:15: spec.service.appProtocol: appProtocol tcp makes Flagger's Istio router write a TCP route; sluice writes HTTP routes only so far; remove it or roll this canary out without sluice"],
        ),
        (
            flagger("", "    port: 9898\n    backendTimeout: 10s", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:15: spec.service.backendTimeout: Flagger's Istio router ignores it (an Istio route has one timeout: spec.service.timeout); remove it"],
        ),
        (
            flagger("", "    port: 9898\n    rewrite:\n      uri: /\n      type: ReplaceFullPath", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:17: spec.service.rewrite.type: an Istio rewrite replaces the matched prefix (ReplacePrefixMatch), and Flagger's Istio router drops this field; expected ReplacePrefixMatch or no type, found \"ReplaceFullPath\""],
        ),
        (
            flagger(
                "",
                "    port: 9898\n    match:\n      - headers: {x-tenant: {exact: acme}}",
                "    iterations: 5\n    match:\n      - headers: {x-canary: {exact: insider}}\n        uri: {prefix: /beta}",
            ),
            vec![
                "c.yaml:23: spec.analysis.match[0].uri: with spec.service.match set, Flagger merges each A/B match into the service matches keeping only its headers and sourceLabels, so this condition would be dropped; move it into spec.service.match or remove it",
                "c.yaml:22: spec.analysis.match[0].headers: Flagger's merge replaces the headers of spec.service.match[0] with these, dropping that match's headers conditions; keep headers conditions in only one of the two lists",
            ],
        ),
        (
            flagger("", "    port: 9898\n    match:\n      - name: everything", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:16: spec.service.match[0]: expected at least one condition (uri, headers, sourceLabels, ...); an empty match would match every request"],
        ),
        (
            flagger("", "    port: 9898\n    retries: {attempts: -1}", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:15: spec.service.retries.attempts: expected 0..=2147483647, found -1"],
        ),
        (
            flagger("", "    port: 9898\n    match:\n      - uri: {suffix: .png}", E2E_CANARY_ANALYSIS),
            vec!["c.yaml:16: spec.service.match[0].uri: unknown variant `suffix`, expected one of `exact`, `prefix`, `regex`"],
        ),
    ];
    assert_errors(cases);
    // A misspelt key is pruned by the API server from a Flagger Canary: a warning.
    let typo = flagger("", "    port: 9898\n    trafficPolicy:\n      connectionPool:\n        tcp:\n          maxConection: 10", E2E_CANARY_ANALYSIS);
    let loaded = load_text("c.yaml", &typo, &Settings::default());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert!(
        loaded.warnings[0].to_string().starts_with("c.yaml:18: spec.service.trafficPolicy.connectionPool.tcp.maxConection: unknown field (did you mean \"maxConnections\"?); expected maxConnections or connectTimeout"),
        "{:?}",
        loaded.warnings
    );
}

/// Values reach the YAML through tojson: quotes, newlines, document markers and template
/// syntax in a match or header come back unchanged and cannot add fields or documents.
#[test]
fn hostile_istio_values_round_trip() {
    let value = "a\"b\n---\n  injected: true\n'{{ header }}' # c: &x *y";
    let quoted = serde_json::to_string(value).expect("json");
    let service = format!(
        "    port: 9898\n    headers:\n      request:\n        set:\n          x-note: {quoted}"
    );
    let analysis =
        format!("    iterations: 1\n    match:\n      - headers:\n          x-canary:\n            regex: {quoted}");
    let canary = load("hostile.yaml", &flagger("", &service, &analysis));
    let file = render_route(
        &canary,
        &BACKENDS,
        Weights::from_canary(100).expect("weight"),
        &NO_STATE,
    )
    .expect("renders")
    .expect("Istio writes a route file");
    let docs = documents(&file.content);
    assert_eq!(docs.len(), 3);
    let http = &docs[0]["spec"]["http"];
    assert_eq!(http[0]["match"][0]["headers"]["x-canary"]["regex"], value);
    assert_eq!(http[1]["headers"]["request"]["set"]["x-note"], value);
    let mut schemas = Schemas::default();
    for doc in &docs {
        assert!(schemas.errors(doc).is_empty());
    }
}

/// Flagger's `test/istio/test-session-affinity.sh` canary (without `primaryCookieName`, which
/// sluice refuses) behind the tutorial gateway, with response headers of its own.
const AFFINITY_SERVICE: &str = "    port: 9898
    targetPort: 9898
    gateways: [istio-system/istio-ingressgateway]
    hosts: [\"*\"]
    headers:
      response:
        add: {x-served-by: podinfo}";
const AFFINITY_ANALYSIS: &str = "    maxWeight: 30
    stepWeight: 10
    sessionAffinity:
      cookieName: canary-flagger-cookie
      maxAge: 21600";
/// Flagger's blue/green mirroring canary (docs: "Blue/Green Traffic Mirroring").
const MIRROR_ANALYSIS: &str = "    iterations: 10
    mirror: true
    mirrorWeight: 100";

const LIVE: &str = "canary-flagger-cookie=AbCdEfGhIj";

/// The rollout-state VirtualServices: a live cookie, an expired one, mirroring (alone and
/// next to a static `service.mirror`).
fn state_cases() -> Vec<(&'static str, Canary, u8, RouteState<'static>)> {
    let affinity = load(
        "affinity",
        &flagger("  provider: istio", AFFINITY_SERVICE, AFFINITY_ANALYSIS),
    );
    let mirror = load(
        "mirror",
        &flagger("  provider: istio", E2E_BG_SERVICE, MIRROR_ANALYSIS),
    );
    let both = load(
        "mirror-static",
        &flagger(
            "  provider: istio",
            "    port: 9898\n    mirror:\n      - backendRef: {name: shadow, port: 8080}",
            "    iterations: 10\n    mirror: true\n    mirrorWeight: 25",
        ),
    );
    vec![
        (
            "istio-session-affinity-live-cookie",
            affinity.clone(),
            20,
            RouteState {
                session_cookie: Some(LIVE),
                previous_session_cookie: None,
                primary_session_cookie: None,
                mirroring: false,
                managed_step: None,
            },
        ),
        (
            "istio-session-affinity-expired-cookie",
            affinity,
            0,
            RouteState {
                session_cookie: None,
                previous_session_cookie: Some(LIVE),
                primary_session_cookie: None,
                mirroring: false,
                managed_step: None,
            },
        ),
        (
            "istio-bluegreen-mirroring",
            mirror,
            0,
            RouteState {
                mirroring: true,
                managed_step: None,
                ..RouteState::default()
            },
        ),
        (
            "istio-bluegreen-mirroring-with-service-mirror",
            both,
            0,
            RouteState {
                mirroring: true,
                managed_step: None,
                ..RouteState::default()
            },
        ),
    ]
}

#[test]
fn istio_route_state_snapshots_pass_the_strict_schemas() {
    let mut schemas = Schemas::default();
    for (name, canary, weight, state) in state_cases() {
        let weights = Weights::from_canary(weight).expect("0..=100");
        let text = render_route(&canary, &BACKENDS, weights, &state)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .expect("a route file")
            .content;
        for doc in documents(&text) {
            let errors = schemas.errors(&doc);
            assert!(errors.is_empty(), "{name}: {errors:#?}");
        }
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn istio_session_cookie_routes_sticky_users_and_sets_the_cookie_on_the_canary() {
    let (_, canary, _, state) = state_cases().remove(0);
    let text = render_route(
        &canary,
        &BACKENDS,
        Weights::from_canary(20).unwrap(),
        &state,
    )
    .unwrap()
    .unwrap()
    .content;
    let vs = &documents(&text)[0];
    let http = &vs["spec"]["http"];
    assert_eq!(
        http[0]["match"][0]["headers"]["Cookie"]["regex"],
        ".*canary-flagger-cookie.*AbCdEfGhIj.*"
    );
    assert_eq!(http[0]["route"][1]["weight"], 100);
    assert_eq!(
        http[1]["route"][1]["headers"]["response"]["add"]["Set-Cookie"],
        "canary-flagger-cookie=AbCdEfGhIj; Max-Age=21600"
    );
    assert_eq!(http[1]["route"][1]["weight"], 20);
    assert!(http[1].get("match").is_none());
    // Without a cookie, one weighted route and no cookie anywhere.
    let plain = render_route(
        &canary,
        &BACKENDS,
        Weights::from_canary(0).unwrap(),
        &NO_STATE,
    )
    .unwrap()
    .unwrap()
    .content;
    assert_eq!(
        documents(&plain)[0]["spec"]["http"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(!plain.contains("ookie"), "{plain}");
}
