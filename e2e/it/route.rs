//! Route renderers: every route kind and version, checked against the upstream CRDs' strict
//! JSON schemas (e2e/schemas), pinned by insta snapshots, and swept over every weight.

use serde_json::{json, Value as Json};
use sluice::manifest::load::load_text;
use sluice::manifest::model::Canary;
use sluice::manifest::settings::Settings;
use sluice::route::{render_route, Backends, RouteError, RouteState, Weights, ROUTE_FILE_NAME};

use crate::support::canary::podinfo;
use crate::support::Schemas;

/// A rollout without session cookies or mirroring.
const NO_STATE: RouteState<'static> = RouteState {
    session_cookie: None,
    previous_session_cookie: None,
    primary_session_cookie: None,
    mirroring: false,
    managed_step: None,
};

const FLAGGER_BACKENDS: Backends<'static> = Backends {
    primary: "podinfo-primary",
    canary: "podinfo-canary",
};

/// A Flagger canary for podinfo in `prod` with this provider, service extras and analysis.
fn flagger(provider: &str, service_extra: &str, analysis: &str) -> String {
    podinfo()
        .provider(provider)
        .service(&format!("    port: 9898\n{service_extra}"))
        .interval("30s")
        .threshold(Some(5))
        .yaml(analysis)
}

const STEPS: &str = "    stepWeight: 10\n    maxWeight: 50";

const GATEWAY: &str = "    gatewayRefs:
      - name: public-gateway
        namespace: gateway-system
    hosts: [podinfo.example.com, \"*.podinfo.example.org\"]";

const GATEWAY_FULL_REF: &str = "    gatewayRefs:
      - group: gateway.networking.k8s.io
        kind: Gateway
        name: public-gateway
        namespace: gateway-system
        sectionName: https
        port: 443
      - name: public-gateway
        namespace: gateway-system
        sectionName: http";

const AB: &str = "    iterations: 10
    match:
      - headers:
          x-canary:
            exact: insider
      - headers:
          cookie:
            regex: \"^(.*?;)?(canary=always)(;.*)?$\"
          user-agent:
            prefix: \"Mozilla/5.0 (X11\"
      - uri:
          prefix: /api
        method:
          exact: GET
        queryParams:
          canary:
            exact: \"true\"";

/// Every Flagger service field sluice renders on a gatewayapi:v1 route.
const SERVICE_FIELDS: &str = "    gatewayRefs:
      - name: public-gateway
        namespace: gateway-system
    hosts: [podinfo.example.com]
    match:
      - uri:
          prefix: /api
        headers:
          x-tenant:
            exact: acme
      - uri:
          exact: /healthz
        method:
          exact: GET
    headers:
      request:
        set:
          x-forwarded-prefix: /api
          X-Env: prod
        add:
          x-canary-candidate: \"true\"
        remove: [x-debug, cookie2]
      response:
        set:
          strict-transport-security: max-age=31536000
        remove: [server]
    rewrite:
      uri: /v2/api
      authority: podinfo.prod.svc.cluster.local
    corsPolicy:
      allowOrigin: [https://example.com, \"https://*.example.org:8443\"]
      allowMethods: [GET, POST]
      allowHeaders: [authorization, content-type]
      exposeHeaders: [x-request-id]
      allowCredentials: true
      maxAge: 24h
    timeout: 30s
    backendTimeout: 10s";

/// The gatewayapi:v1beta1 subset (Flagger's v1beta1 router has no timeouts and no CORS), with
/// a prefix rewrite on the single service match.
const SERVICE_FIELDS_V1BETA1: &str = "    gatewayRefs:
      - name: public-gateway
        namespace: gateway-system
    match:
      - uri:
          prefix: /api
    headers:
      request:
        add:
          x-canary-candidate: \"true\"
    rewrite:
      uri: /
      type: ReplacePrefixMatch";

/// A/B with a service match and a prefix rewrite: the weighted rule holds the service match
/// with the A/B headers; both rules carry the filters and timeouts.
const SERVICE_FIELDS_AB: &str = "    gatewayRefs:
      - name: public-gateway
        namespace: gateway-system
    match:
      - uri:
          prefix: /api
        method:
          exact: GET
    rewrite:
      uri: /
      type: ReplacePrefixMatch
    headers:
      response:
        add:
          x-served-by: podinfo
    timeout: 15s";

/// Static mirrors (Flagger's `service.mirror`) between a rewrite and CORS, on an A/B route:
/// both rules carry them, in Flagger's filter order.
const SERVICE_MIRROR_AB: &str = "    gatewayRefs:
      - name: public-gateway
        namespace: gateway-system
    rewrite:
      authority: podinfo.internal
    mirror:
      - backendRef:
          name: podinfo-shadow
          port: 9898
      - backendRef:
          group: traffic.example.io
          kind: Recorder
          name: replay
          namespace: observability
    corsPolicy:
      allowOrigin: [https://example.com]";

const AB_HEADERS: &str = "    iterations: 10
    match:
      - headers:
          x-canary:
            exact: insider
        queryParams:
          canary:
            exact: \"true\"";

fn load(name: &str, text: &str) -> Canary {
    let loaded = load_text(name, text, &Settings::default());
    assert!(loaded.errors.is_empty(), "{name}: {:?}", loaded.errors);
    assert_eq!(loaded.canaries.len(), 1, "{name}");
    loaded.canaries.into_iter().next().expect("one canary")
}

struct Case {
    name: &'static str,
    canary: Canary,
    backends: Backends<'static>,
}

/// One canary per route kind and version, from both input formats.
fn cases() -> Vec<Case> {
    let flagger_case = |name, provider, service, analysis| Case {
        name,
        canary: load(name, &flagger(provider, service, analysis)),
        backends: FLAGGER_BACKENDS,
    };
    let native_split = include_str!("../../examples/native/canary.yaml")
        .replace(
            "apiVersion: gateway.networking.k8s.io/v1\n    kind: HTTPRoute\n    parentRefs:\n      - name: public-gateway\n        namespace: gateway-system\n    hostnames: [frontend.example.com]",
            "apiVersion: split.smi-spec.io/v1alpha4\n    kind: TrafficSplit",
        );
    assert!(native_split.contains("TrafficSplit"), "example changed");
    let route_only = Backends {
        primary: "frontend-blue",
        canary: "frontend-green",
    };
    vec![
        flagger_case("httproute-v1", "gatewayapi:v1", GATEWAY, STEPS),
        flagger_case(
            "httproute-v1beta1",
            "gatewayapi:v1beta1",
            GATEWAY_FULL_REF,
            STEPS,
        ),
        flagger_case("httproute-v1-ab", "gatewayapi:v1", GATEWAY, AB),
        flagger_case(
            "httproute-v1-service-fields",
            "gatewayapi:v1",
            SERVICE_FIELDS,
            STEPS,
        ),
        flagger_case(
            "httproute-v1beta1-service-fields",
            "gatewayapi:v1beta1",
            SERVICE_FIELDS_V1BETA1,
            STEPS,
        ),
        flagger_case(
            "httproute-v1-ab-service-fields",
            "gatewayapi:v1",
            SERVICE_FIELDS_AB,
            AB_HEADERS,
        ),
        flagger_case(
            "httproute-v1-ab-mirror",
            "gatewayapi:v1",
            SERVICE_MIRROR_AB,
            AB_HEADERS,
        ),
        flagger_case(
            "httproute-v1beta1-bluegreen",
            "gatewayapi:v1beta1",
            GATEWAY,
            "    iterations: 5",
        ),
        Case {
            name: "httproute-v1-native-route-only",
            canary: load(
                "examples/native/canary.yaml",
                include_str!("../../examples/native/canary.yaml"),
            ),
            backends: route_only,
        },
        flagger_case("trafficsplit-v1alpha1", "linkerd", "", STEPS),
        Case {
            name: "trafficsplit-v1alpha2",
            canary: load(
                "examples/flagger/canary.yaml",
                include_str!("../../examples/flagger/canary.yaml"),
            ),
            backends: FLAGGER_BACKENDS,
        },
        flagger_case("trafficsplit-v1alpha3", "smi:v1alpha3", "", STEPS),
        flagger_case(
            "trafficsplit-v1alpha4",
            "smi:v1alpha4",
            "",
            "    iterations: 5",
        ),
        Case {
            name: "trafficsplit-v1alpha4-native",
            canary: load("native-split.yaml", &native_split),
            backends: route_only,
        },
    ]
}

fn render(case: &Case, canary_weight: u8) -> String {
    let weights = Weights::from_canary(canary_weight).expect("0..=100");
    let file = render_route(&case.canary, &case.backends, weights, &NO_STATE)
        .unwrap_or_else(|e| panic!("{}: {e}", case.name))
        .unwrap_or_else(|| panic!("{}: this router writes a route file", case.name));
    assert_eq!(file.file_name, ROUTE_FILE_NAME);
    file.content
}

fn parse(text: &str) -> Json {
    serde_saphyr::from_str::<Json>(text).expect("rendered YAML parses")
}

#[test]
fn every_route_matches_its_strict_schema() {
    let mut schemas = Schemas::default();
    let mut checked = 0;
    for case in cases() {
        for canary_weight in [0, 100, 37, 63, 10, 50] {
            let doc = parse(&render(&case, canary_weight));
            let errors = schemas.errors(&doc);
            assert!(
                errors.is_empty(),
                "{} at canary weight {canary_weight}:\n{}",
                case.name,
                errors.join("\n")
            );
            checked += 1;
        }
    }
    assert_eq!(schemas.0.len(), 6, "every schema in e2e/schemas was used");
    assert_eq!(checked, 84);
}

/// The schema check above would catch a wrong document: these broken ones must fail.
#[test]
fn broken_routes_fail_the_strict_schemas() {
    let mut schemas = Schemas::default();
    let all = cases();
    let by_name = |name: &str| all.iter().find(|c| c.name == name).expect("case");
    let httproute = parse(&render(by_name("httproute-v1-ab"), 100));
    let split_v1alpha1 = parse(&render(by_name("trafficsplit-v1alpha1"), 10));
    let split_v1alpha2 = parse(&render(by_name("trafficsplit-v1alpha2"), 10));
    let fields = parse(&render(by_name("httproute-v1-service-fields"), 10));
    let mirror = parse(&render(by_name("httproute-v1-ab-mirror"), 10));
    assert!(schemas.errors(&fields).is_empty());
    assert!(schemas.errors(&mirror).is_empty());
    assert!(schemas.errors(&httproute).is_empty());
    assert!(schemas.errors(&split_v1alpha1).is_empty());
    assert!(schemas.errors(&split_v1alpha2).is_empty());

    type Break = fn(&mut Json);
    let breaks: [(&str, &Json, Break); 16] = [
        ("mirror without a backend name", &mirror, |d| {
            if let Some(b) =
                d["spec"]["rules"][1]["filters"][1]["requestMirror"]["backendRef"].as_object_mut()
            {
                b.remove("name");
            }
        }),
        ("mirror namespace with a dot", &mirror, |d| {
            d["spec"]["rules"][0]["filters"][2]["requestMirror"]["backendRef"]["namespace"] =
                json!("observability.svc")
        }),
        ("timeout with a fraction", &fields, |d| {
            d["spec"]["rules"][0]["timeouts"]["request"] = json!("1.5s")
        }),
        ("header filter entry without a value", &fields, |d| {
            if let Some(h) = d["spec"]["rules"][0]["filters"][0]["requestHeaderModifier"]["set"][0]
                .as_object_mut()
            {
                h.remove("value");
            }
        }),
        ("17 headers set", &fields, |d| {
            let set: Vec<Json> = (0..17)
                .map(|i| json!({"name": format!("x-{i}"), "value": "v"}))
                .collect();
            d["spec"]["rules"][0]["filters"][0]["requestHeaderModifier"]["set"] = json!(set)
        }),
        ("URLRewrite hostname with a port", &fields, |d| {
            d["spec"]["rules"][0]["filters"][2]["urlRewrite"]["hostname"] = json!("podinfo:8080")
        }),
        ("CORS maxAge 0", &fields, |d| {
            d["spec"]["rules"][0]["filters"][3]["cors"]["maxAge"] = json!(0)
        }),
        ("weight as text", &httproute, |d| {
            d["spec"]["rules"][0]["backendRefs"][0]["weight"] = json!("90")
        }),
        ("weight above the maximum", &httproute, |d| {
            d["spec"]["rules"][0]["backendRefs"][0]["weight"] = json!(1_000_001)
        }),
        ("misspelt field", &httproute, |d| {
            d["spec"]["rules"][0]["backendRefs"][0]["wieght"] = json!(10)
        }),
        ("header match type Prefix", &httproute, |d| {
            d["spec"]["rules"][0]["matches"][0]["headers"][0]["type"] = json!("Prefix")
        }),
        ("uppercase hostname", &httproute, |d| {
            d["spec"]["hostnames"][0] = json!("Podinfo.example.com")
        }),
        (
            "v1alpha1 weight as a number with a fraction",
            &split_v1alpha1,
            |d| d["spec"]["backends"][0]["weight"] = json!(0.5),
        ),
        ("v1alpha2 quantity weight", &split_v1alpha2, |d| {
            d["spec"]["backends"][0]["weight"] = json!("900m")
        }),
        ("v1alpha2 has no matches", &split_v1alpha2, |d| {
            d["spec"]["matches"] = json!([{"kind": "HTTPRouteGroup", "name": "x"}])
        }),
        ("missing apex service", &split_v1alpha2, |d| {
            if let Some(spec) = d["spec"].as_object_mut() {
                spec.remove("service");
            }
        }),
    ];
    for (what, doc, break_it) in breaks {
        let mut doc = doc.clone();
        break_it(&mut doc);
        assert!(
            !schemas.errors(&doc).is_empty(),
            "{what}: the strict schema accepted a broken document"
        );
    }
}

#[test]
fn rendered_routes_snapshot() {
    for case in cases() {
        insta::assert_snapshot!(case.name, render(&case, 37));
    }
    let all = cases();
    let ab = all
        .iter()
        .find(|c| c.name == "httproute-v1-ab")
        .expect("case");
    insta::assert_snapshot!("httproute-v1-ab-analysis", render(ab, 100));
}

/// Backend weights of a rendered route as percentages: primary and canary of the weighted
/// rule (HTTPRoute) or of the split (TrafficSplit). Panics on anything but whole numbers.
fn weights_of(doc: &Json) -> (u64, u64) {
    match doc["kind"].as_str() {
        Some("HTTPRoute") => {
            let refs = doc["spec"]["rules"][0]["backendRefs"]
                .as_array()
                .expect("backendRefs");
            assert_eq!(refs.len(), 2);
            let w = |i: usize| refs[i]["weight"].as_u64().expect("integer weight");
            (w(0), w(1))
        }
        Some("TrafficSplit") => {
            let backends = doc["spec"]["backends"].as_array().expect("backends");
            assert_eq!(backends.len(), 2);
            let v1alpha1 = doc["apiVersion"] == "split.smi-spec.io/v1alpha1";
            let w = |i: usize| {
                let value = &backends[i]["weight"];
                if v1alpha1 {
                    let text = value
                        .as_str()
                        .expect("v1alpha1 weight is a quantity string");
                    let milli: u64 = text
                        .strip_suffix('m')
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| panic!("expected <n>m, found {text:?}"));
                    assert_eq!(milli % 10, 0, "{text}");
                    milli / 10
                } else {
                    value.as_u64().expect("integer weight")
                }
            };
            // Canary first, primary second, as Flagger writes them.
            (w(1), w(0))
        }
        other => panic!("unexpected kind {other:?}"),
    }
}

#[test]
fn every_weight_renders_whole_numbers_that_sum_to_100() {
    for case in cases() {
        for canary_weight in 0..=100u8 {
            let doc = parse(&render(&case, canary_weight));
            let (primary, canary) = weights_of(&doc);
            assert_eq!(
                (primary, canary),
                (100 - u64::from(canary_weight), u64::from(canary_weight)),
                "{} at {canary_weight}",
                case.name
            );
            if let Some(rules) = doc["spec"]["rules"].as_array() {
                for rule in rules {
                    let sum: u64 = rule["backendRefs"]
                        .as_array()
                        .expect("backendRefs")
                        .iter()
                        .map(|r| r["weight"].as_u64().expect("integer weight"))
                        .sum();
                    assert_eq!(sum, 100, "{} at {canary_weight}", case.name);
                }
            }
        }
    }
}

#[test]
fn files_say_they_are_generated_and_name_the_apex() {
    for case in cases() {
        let text = render(&case, 20);
        let first = text.lines().next().expect("a first line");
        assert_eq!(
            first,
            format!(
                "# Generated by sluice for canary {}. Do not edit: sluice overwrites this file.",
                case.canary.id
            ),
            "{}",
            case.name
        );
        let doc = parse(&text);
        assert_eq!(doc["metadata"]["name"], case.canary.service.name.as_str());
        assert_eq!(
            doc["metadata"]["namespace"],
            case.canary.id.namespace.as_str()
        );
        assert_eq!(
            doc["metadata"]["labels"],
            json!({"app.kubernetes.io/managed-by": "sluice"})
        );
        assert!(
            text.ends_with("\n") && !text.ends_with("\n\n"),
            "{}",
            case.name
        );
    }
}

#[test]
fn smi_backends_are_canary_then_primary_and_the_apex_is_the_service() {
    let all = cases();
    for case in all.iter().filter(|c| c.name.starts_with("trafficsplit")) {
        let doc = parse(&render(case, 20));
        assert_eq!(doc["spec"]["service"], case.canary.service.name.as_str());
        assert_eq!(doc["spec"]["backends"][0]["service"], case.backends.canary);
        assert_eq!(doc["spec"]["backends"][1]["service"], case.backends.primary);
    }
}

#[test]
fn ab_routes_matching_requests_by_weight_and_the_rest_to_the_primary() {
    let all = cases();
    let case = all
        .iter()
        .find(|c| c.name == "httproute-v1-ab")
        .expect("case");
    let doc = parse(&render(case, 100));
    let rules = doc["spec"]["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 2);
    assert_eq!(
        rules[0]["matches"][0]["headers"],
        json!([{"name": "x-canary", "type": "Exact", "value": "insider"}])
    );
    assert_eq!(
        rules[0]["matches"][1]["headers"][1],
        json!({"name": "user-agent", "type": "RegularExpression", "value": "^Mozilla/5\\.0 \\(X11.*"})
    );
    assert_eq!(
        rules[0]["backendRefs"][1],
        json!({"group": "", "kind": "Service", "name": "podinfo-canary", "port": 9898, "weight": 100})
    );
    assert_eq!(
        rules[1],
        json!({
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
            "backendRefs": [{"group": "", "kind": "Service", "name": "podinfo-primary", "port": 9898, "weight": 100}],
        })
    );
}

/// Values reach the YAML through tojson: quotes, newlines and template syntax in a match
/// come back unchanged and cannot add fields.
#[test]
fn hostile_match_values_round_trip() {
    let value = "a\"b\n  injected: true\n'{{ header }}' # c: &x *y";
    let analysis = format!(
        "    iterations: 1\n    match:\n      - headers:\n          x-canary:\n            regex: {}",
        serde_json::to_string(value).expect("json")
    );
    let canary = load(
        "hostile.yaml",
        &flagger("gatewayapi:v1", GATEWAY, &analysis),
    );
    let file = render_route(
        &canary,
        &FLAGGER_BACKENDS,
        Weights::from_canary(100).expect("weight"),
        &NO_STATE,
    )
    .expect("renders")
    .expect("an HTTPRoute is a route file");
    let doc = parse(&file.content);
    assert_eq!(
        doc["spec"]["rules"][0]["matches"][0]["headers"],
        json!([{"name": "x-canary", "type": "RegularExpression", "value": value}])
    );
    assert!(Schemas::default().errors(&doc).is_empty());
}

#[test]
fn errors_say_what_was_expected_and_where() {
    let all = cases();
    let by_name = |name: &str| &all.iter().find(|c| c.name == name).expect("case").canary;
    let split = by_name("trafficsplit-v1alpha2");

    let err = render_route(
        split,
        &FLAGGER_BACKENDS,
        Weights {
            primary: 90,
            canary: 20,
        },
        &NO_STATE,
    )
    .expect_err("110");
    assert!(matches!(err, RouteError::Weights { .. }));
    assert_eq!(err.to_string(), "canary prod/podinfo: route weights must be whole percentages that sum to 100, found primary 90 + canary 20");

    let weights = Weights::from_canary(10).expect("weight");
    let err = render_route(
        split,
        &Backends {
            primary: "podinfo-primary",
            canary: "podinfo-primary",
        },
        weights,
        &NO_STATE,
    )
    .expect_err("same service twice");
    assert!(err.to_string().contains("other than the primary"), "{err}");
    let err = render_route(
        split,
        &Backends {
            primary: "podinfo_primary",
            canary: "podinfo-canary",
        },
        weights,
        &NO_STATE,
    )
    .expect_err("bad service name");
    assert!(
        err.to_string()
            .starts_with("canary prod/podinfo: backend primary: expected a Service name"),
        "{err}"
    );

    // A/B on SMI: a TrafficSplit cannot match requests; refused when the spec is read (so by
    // `sluice validate`), not first when a tick renders the route.
    let ab_split = load_text(
        "ab-split.yaml",
        &flagger(
            "linkerd",
            "",
            "    iterations: 3\n    match:\n      - headers: {x-canary: {exact: insider}}",
        ),
        &Settings::default(),
    );
    let errors: Vec<String> = ab_split.errors.iter().map(ToString::to_string).collect();
    assert!(
        errors.iter().any(|e| e.starts_with("ab-split.yaml:")
            && e.contains(": spec.analysis.match: not supported with provider linkerd:")),
        "{errors:?}"
    );

    // A hostname the API server would refuse is an error when the spec is read (validate
    // reports it), not first when a tick renders the route.
    let bad_host = load_text(
        "bad-host.yaml",
        &flagger(
            "gatewayapi:v1",
            "    gatewayRefs: [{name: gw}]\n    hosts: [Podinfo.Example.com]",
            STEPS,
        ),
        &Settings::default(),
    );
    let errors: Vec<String> = bad_host.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors, ["bad-host.yaml:15: spec.service.hosts[0]: expected a lowercase DNS name, optionally starting with \"*.\", found \"Podinfo.Example.com\""]);

    let twice = load(
        "twice.yaml",
        &flagger(
            "gatewayapi:v1",
            "    gatewayRefs: [{name: gw}, {name: gw}]",
            STEPS,
        ),
    );
    let err =
        render_route(&twice, &FLAGGER_BACKENDS, weights, &NO_STATE).expect_err("same parent twice");
    assert!(
        err.to_string().contains(
            "spec.service.gatewayRefs[0].sectionName: Gateway gw is referenced more than once"
        ),
        "{err}"
    );
}

/// Session affinity with every cookie attribute, on a canary walking weights.
const SESSION_AFFINITY: &str = "    stepWeight: 10
    maxWeight: 50
    sessionAffinity:
      cookieName: flagger-cookie
      maxAge: 3600
      domain: example.com
      httpOnly: true
      partitioned: true
      path: /
      sameSite: Strict
      secure: true";

const COOKIE: &str = "flagger-cookie=qwertyASDF";

/// A route rendered with rollout state (the status fields `core::decide` keeps): the case
/// name, the canary, the canary weight, the state.
fn state_cases() -> Vec<(&'static str, Canary, u8, RouteState<'static>)> {
    let affinity = load(
        "affinity.yaml",
        &flagger("gatewayapi:v1", GATEWAY, SESSION_AFFINITY),
    );
    let affinity_matches = load(
        "affinity-matches.yaml",
        &flagger(
            "gatewayapi:v1beta1",
            &format!(
                "{GATEWAY}\n    match:\n      - uri: {{prefix: /api}}\n      - uri: {{exact: /}}"
            ),
            "    stepWeights: [5, 50]\n    sessionAffinity: {cookieName: canary}",
        ),
    );
    let mirror = load(
        "mirror.yaml",
        &flagger(
            "gatewayapi:v1",
            GATEWAY,
            "    iterations: 5\n    mirror: true\n    mirrorWeight: 25",
        ),
    );
    let mirror_all_affinity = load(
        "mirror-affinity.yaml",
        &flagger(
            "gatewayapi:v1beta1",
            SERVICE_FIELDS_V1BETA1,
            "    iterations: 5\n    mirror: true\n    sessionAffinity: {cookieName: flagger-cookie}",
        ),
    );
    vec![
        (
            "httproute-v1-session-sticky",
            affinity.clone(),
            37,
            RouteState {
                session_cookie: Some(COOKIE),
                previous_session_cookie: Some("flagger-cookie=olderOLDER"),
                primary_session_cookie: None,
                mirroring: false,
                managed_step: None,
            },
        ),
        (
            "httproute-v1-session-expire",
            affinity.clone(),
            0,
            RouteState {
                session_cookie: None,
                previous_session_cookie: Some(COOKIE),
                primary_session_cookie: None,
                mirroring: false,
                managed_step: None,
            },
        ),
        (
            "httproute-v1beta1-session-service-matches",
            affinity_matches,
            5,
            RouteState {
                session_cookie: Some("canary=zxcvbnmQWE"),
                previous_session_cookie: None,
                primary_session_cookie: None,
                mirroring: false,
                managed_step: None,
            },
        ),
        (
            "httproute-v1-bluegreen-mirror",
            mirror,
            0,
            RouteState {
                mirroring: true,
                managed_step: None,
                ..NO_STATE
            },
        ),
        (
            "httproute-v1beta1-bluegreen-mirror-session-expire",
            mirror_all_affinity,
            0,
            RouteState {
                session_cookie: None,
                previous_session_cookie: Some(COOKIE),
                primary_session_cookie: None,
                mirroring: true,
                managed_step: None,
            },
        ),
    ]
}

#[test]
fn routes_with_rollout_state_match_their_strict_schemas_and_snapshots() {
    let mut schemas = Schemas::default();
    for (name, canary, weight, state) in state_cases() {
        let weights = Weights::from_canary(weight).expect("0..=100");
        let text = render_route(&canary, &FLAGGER_BACKENDS, weights, &state)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name}: an HTTPRoute is a route file"))
            .content;
        let errors = schemas.errors(&parse(&text));
        assert!(errors.is_empty(), "{name}:\n{}", errors.join("\n"));
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn a_sticky_cookie_sends_its_users_to_the_canary_and_the_canary_sets_it() {
    let (_, canary, _, state) = state_cases().swap_remove(0);
    let doc = render_with_weight(&canary, 37, &state);
    let rules = doc["spec"]["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 2);
    // The sticky rule: the cookie's users, all to the canary.
    assert_eq!(
        rules[0]["matches"],
        json!([{"path": {"type": "PathPrefix", "value": "/"}, "headers": [{"name": "Cookie", "type": "RegularExpression", "value": ".*flagger-cookie.*qwertyASDF.*"}]}])
    );
    let weights = |rule: &Json| -> Vec<u64> {
        rule["backendRefs"]
            .as_array()
            .expect("backendRefs")
            .iter()
            .map(|b| b["weight"].as_u64().expect("weight"))
            .collect()
    };
    assert_eq!(weights(&rules[0]), [0, 100]);
    assert_eq!(weights(&rules[1]), [63, 37]);
    // Responses from the canary set the cookie, with every attribute in Flagger's order;
    // the primary's set none.
    assert_eq!(
        rules[1]["backendRefs"][1]["filters"],
        json!([{"type": "ResponseHeaderModifier", "responseHeaderModifier": {"add": [{"name": "Set-Cookie", "value": "flagger-cookie=qwertyASDF; Max-Age=3600; Domain=example.com; HttpOnly; Partitioned; Path=/; SameSite=Strict; Secure"}]}}])
    );
    assert!(rules[1]["backendRefs"][0].get("filters").is_none());
    assert!(rules[0]["backendRefs"][1].get("filters").is_none());
    // The previous rollout's cookie is not expired while a new one is live (Flagger).
    assert!(!doc.to_string().contains("olderOLDER"));
}

#[test]
fn after_a_rollout_its_cookie_is_expired_and_everyone_goes_to_the_primary() {
    let (_, canary, _, state) = state_cases().swap_remove(1);
    let doc = render_with_weight(&canary, 0, &state);
    let rules = doc["spec"]["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 2);
    assert_eq!(
        rules[0]["filters"],
        json!([{"type": "ResponseHeaderModifier", "responseHeaderModifier": {"add": [{"name": "Set-Cookie", "value": "flagger-cookie=qwertyASDF; Max-Age=-1"}]}}])
    );
    for rule in rules {
        assert_eq!(rule["backendRefs"][0]["weight"], 100);
        assert_eq!(rule["backendRefs"][1]["weight"], 0);
    }
    // Without any cookie (the first rollout), the route is the plain weighted rule.
    let plain = render_with_weight(&canary, 0, &NO_STATE);
    assert_eq!(plain["spec"]["rules"].as_array().expect("rules").len(), 1);
}

#[test]
fn a_mirrored_blue_green_route_mirrors_to_the_canary_with_mirror_weight_as_percent() {
    let (_, canary, _, state) = state_cases().swap_remove(3);
    let doc = render_with_weight(&canary, 0, &state);
    assert_eq!(
        doc["spec"]["rules"][0]["filters"],
        json!([{"type": "RequestMirror", "requestMirror": {"backendRef": {"group": "", "kind": "Service", "name": "podinfo-canary", "port": 9898}, "percent": 25}}])
    );
    // Outside the mirror phase (before the first iteration, once all traffic goes to the
    // canary), no mirror.
    for weight in [0, 100] {
        let doc = render_with_weight(&canary, weight, &NO_STATE);
        assert!(doc["spec"]["rules"][0].get("filters").is_none(), "{weight}");
    }
}

#[test]
fn the_weighted_rule_carries_every_weight_with_rollout_state() {
    for (name, canary, _, state) in state_cases() {
        let weighted =
            usize::from(state.session_cookie.is_some() || state.previous_session_cookie.is_some());
        for canary_weight in 0..=100u8 {
            let doc = render_with_weight(&canary, canary_weight, &state);
            let rule = &doc["spec"]["rules"][weighted];
            assert_eq!(
                (
                    rule["backendRefs"][0]["weight"].as_u64(),
                    rule["backendRefs"][1]["weight"].as_u64()
                ),
                (
                    Some(100 - u64::from(canary_weight)),
                    Some(u64::from(canary_weight))
                ),
                "{name} at {canary_weight}"
            );
        }
    }
}

fn render_with_weight(canary: &Canary, canary_weight: u8, state: &RouteState) -> Json {
    let weights = Weights::from_canary(canary_weight).expect("0..=100");
    let file = render_route(canary, &FLAGGER_BACKENDS, weights, state)
        .expect("renders")
        .expect("an HTTPRoute is a route file");
    parse(&file.content)
}
