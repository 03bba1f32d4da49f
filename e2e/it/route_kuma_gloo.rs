//! The Kuma and Gloo routers. Kuma: one cluster-scoped TrafficRoute in the Canary's mesh.
//! Gloo: the primary and canary Upstreams, then the RouteTable. Every document is checked
//! against the strict schemas (e2e/schemas), pinned by insta snapshots of Flagger's own e2e
//! canaries (fluxcd/flagger `test/kuma/test-canary.sh`, `test/gloo/test-canary.sh`), swept
//! over every weight, and every field these routers cannot render is a `validate` error.

use serde_json::json;
use sluice::manifest::load::load_text;
use sluice::manifest::model::Canary;
use sluice::manifest::settings::Settings;

use crate::support::canary::load_repo as support_load_repo;
use crate::support::canary::{flagger_test, insider_ab, native_frontend};
use crate::support::manifests::GLOO_CONFIG_UPSTREAM;
use crate::support::route_case::{documents, snapshot_cases, RouteCase as Case};
use crate::support::Schemas;

/// A Flagger canary for podinfo in `test`.
fn flagger(metadata: &str, provider: &str, spec: &str, service: &str, analysis: &str) -> String {
    flagger_test(service)
        .metadata(&format!("{metadata}\n"))
        .spec(&format!("{provider}\n{spec}\n"))
        .yaml(analysis)
}

/// `test/kuma/test-canary.sh`, first canary (its mesh annotation, apex annotations).
const KUMA_META: &str = "  annotations:\n    kuma.io/mesh: default";
const KUMA_SERVICE: &str = "    port: 9898
    targetPort: 9898
    apex:
      annotations:
        9898.service.kuma.io/protocol: \"http\"
        ingress.kubernetes.io/service-upstream: \"true\"
        nginx.ingress.kubernetes.io/service-upstream: \"true\"
    canary:
      annotations:
        9898.service.kuma.io/protocol: \"http\"
    primary:
      annotations:
        9898.service.kuma.io/protocol: \"http\"";
const KUMA_ANALYSIS: &str = "    maxWeight: 50\n    stepWeight: 10";

/// `test/gloo/test-canary.sh`: the canary with its config upstream, then the A/B canary.
const GLOO_SERVICE: &str = "    port: 80\n    targetPort: 9898";
const GLOO_REF: &str = "  upstreamRef:
    apiVersion: gloo.solo.io/v1
    kind: Upstream
    name: config-upstream
    namespace: gloo-system";
const GLOO_ANALYSIS: &str = "    maxWeight: 50\n    stepWeight: 10";
/// A load balancer config the canary's Upstreams copy from [`GLOO_CONFIG_UPSTREAM`] too.
const LOAD_BALANCER: &str = "  loadBalancerConfig:
    roundRobin:
      slowStartConfig:
        slowStartWindow: 2m
        minWeightPercent: 5
";

/// Loads `canary` with `others` from a repo folder (references resolve there).
fn load_repo(canary: &str, others: &[(&str, &str)]) -> sluice::manifest::load::Loaded {
    let mut files = vec![("canary.yaml", canary)];
    files.extend_from_slice(others);
    support_load_repo(&files)
}

fn one(loaded: sluice::manifest::load::Loaded) -> Canary {
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    assert_eq!(loaded.canaries.len(), 1);
    loaded.canaries.into_iter().next().unwrap()
}

fn errors(canary: &str, others: &[(&str, &str)]) -> Vec<String> {
    load_repo(canary, others)
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn native_kuma() -> String {
    native_frontend(
        "    apiVersion: kuma.io/v1alpha1\n    kind: TrafficRoute\n    mesh: shop-mesh\n",
        &[10, 50],
    )
}

fn cases() -> Vec<Case> {
    let case = |name, text: String, others: &[(&str, &str)]| {
        Case::podinfo(name, one(load_repo(&text, others)))
    };
    vec![
        case(
            "kuma-e2e-canary",
            flagger(
                KUMA_META,
                "  provider: kuma",
                "",
                KUMA_SERVICE,
                KUMA_ANALYSIS,
            ),
            &[],
        ),
        case(
            "kuma-bluegreen-default-mesh",
            flagger(
                "",
                "  provider: kuma",
                "",
                GLOO_SERVICE,
                "    iterations: 5",
            ),
            &[],
        ),
        case(
            "gloo-e2e-canary-upstream-ref",
            flagger(
                "",
                "  provider: gloo",
                GLOO_REF,
                GLOO_SERVICE,
                GLOO_ANALYSIS,
            ),
            &[(
                "upstream.yaml",
                &format!("{GLOO_CONFIG_UPSTREAM}{LOAD_BALANCER}"),
            )],
        ),
        case(
            "gloo-e2e-ab",
            flagger("", "  provider: gloo", "", GLOO_SERVICE, &insider_ab(5)),
            &[],
        ),
        case(
            "gloo-ab-regex-and-method",
            flagger(
                "",
                "  provider: gloo",
                "",
                KUMA_SERVICE,
                "    iterations: 5
    match:
      - headers:
          cookie:
            regex: \"^(.*?;)?(canary=always)(;.*)?$\"
          x-user:
            exact: tester
      - method:
          exact: POST",
            ),
            &[],
        ),
        Case::frontend(
            "kuma-native-route-only",
            one(load_text(
                "native.yaml",
                &native_kuma(),
                &Settings::default(),
            )),
        ),
    ]
}

fn render(case: &Case, canary_weight: u8) -> String {
    case.render("Kuma or Gloo", canary_weight)
}

#[test]
fn rendered_kuma_and_gloo_routes_snapshot() {
    snapshot_cases!(cases(), render, 37, "gloo-e2e-ab", "gloo-e2e-ab-analysis");
}

#[test]
fn every_kuma_and_gloo_document_matches_its_strict_schema_at_every_weight() {
    let mut schemas = Schemas::default();
    let mut checked = Vec::new();
    for case in cases() {
        for canary_weight in 0..=100u8 {
            let docs = documents(&render(&case, canary_weight));
            for doc in &docs {
                let errors = schemas.errors(doc);
                assert!(
                    errors.is_empty(),
                    "{} at {canary_weight}: {errors:#?}",
                    case.name
                );
                checked.push(Schemas::file_for(doc));
            }
            // The first weighted split carries the weights asked for, primary first.
            let (kind, split) = if docs.len() == 1 {
                ("TrafficRoute", docs[0]["spec"]["conf"]["split"].clone())
            } else {
                (
                    "RouteTable",
                    docs[2]["spec"]["routes"][0]["routeAction"]["multi"]["destinations"].clone(),
                )
            };
            assert_eq!(docs.last().unwrap()["kind"], kind);
            assert_eq!(
                (split[0]["weight"].as_u64(), split[1]["weight"].as_u64()),
                (
                    Some(100 - u64::from(canary_weight)),
                    Some(u64::from(canary_weight))
                ),
                "{} at {canary_weight}",
                case.name
            );
        }
    }
    checked.sort();
    checked.dedup();
    assert_eq!(
        checked,
        [
            "routetable.gateway.solo.io_v1-strict.json",
            "trafficroute.kuma.io_v1alpha1-strict.json",
            "upstream.gloo.solo.io_v1-strict.json",
        ]
    );
}

/// The strict schemas are not vacuous for what these routers write.
#[test]
fn broken_gloo_documents_fail_the_strict_schemas() {
    let mut schemas = Schemas::default();
    let docs = documents(&render(&cases()[2], 37));
    let mut upstream = docs[0].clone();
    upstream["spec"]["kube"]["serviceNme"] = json!("x");
    assert!(!schemas.errors(&upstream).is_empty());
    let mut table = docs[2].clone();
    table["spec"]["routes"][0]["routeAction"]["multi"]["destinations"][0]["wieght"] = json!(1);
    assert!(!schemas.errors(&table).is_empty());
    let mut route = documents(&render(&cases()[0], 37))[0].clone();
    route["metadata"]["labels"] = json!({"a": 1});
    assert!(!schemas.errors(&route).is_empty());
}

#[test]
fn kuma_traffic_route_is_cluster_scoped_in_the_canarys_mesh() {
    let all = cases();
    let docs = documents(&render(&all[0], 10));
    assert_eq!(docs[0]["mesh"], "default");
    assert_eq!(docs[0]["metadata"].get("namespace"), None);
    assert_eq!(
        docs[0]["spec"]["destinations"],
        json!([{"match": {"kuma.io/service": "podinfo_test_svc_9898"}}])
    );
    assert_eq!(
        docs[0]["metadata"]["annotations"]["9898.service.kuma.io/protocol"],
        "http"
    );
    let native = documents(&render(&all[5], 10));
    assert_eq!(native[0]["mesh"], "shop-mesh");
    assert_eq!(
        native[0]["spec"]["conf"]["split"][1]["destination"]["kuma.io/service"],
        "frontend-green_shop_svc_8080"
    );
    let other_mesh = flagger(
        "  annotations:\n    kuma.io/mesh: payments",
        "  provider: kuma",
        "",
        GLOO_SERVICE,
        KUMA_ANALYSIS,
    );
    let case = Case::podinfo("mesh", one(load_repo(&other_mesh, &[])));
    assert_eq!(documents(&render(&case, 10))[0]["mesh"], "payments");
}

#[test]
fn gloo_upstreams_copy_the_referenced_upstream_settings_only() {
    let all = cases();
    let docs = documents(&render(&all[2], 10));
    assert_eq!(
        docs[0]["metadata"]["name"],
        "test-podinfo-primaryupstream-80"
    );
    assert_eq!(
        docs[1]["metadata"]["name"],
        "test-podinfo-canaryupstream-80"
    );
    assert_eq!(
        docs[1]["spec"],
        json!({
            "connectionConfig": {"connectTimeout": "2s", "maxRequestsPerConnection": 51},
            "loadBalancerConfig": {"roundRobin": {"slowStartConfig": {"slowStartWindow": "2m", "minWeightPercent": 5}}},
            "kube": {"serviceName": "podinfo-canary", "serviceNamespace": "test", "servicePort": 80},
        }),
        "static (the config upstream's own target) is not copied"
    );
    let ab = documents(&render(&all[3], 100));
    let routes = &ab[2]["spec"]["routes"];
    assert_eq!(
        routes[0]["matchers"],
        json!([{"headers": [{"name": "x-canary", "value": "insider"}]}])
    );
    assert_eq!(
        routes[1].get("matchers"),
        None,
        "everything else: the primary"
    );
    assert_eq!(
        routes[1]["routeAction"]["multi"]["destinations"],
        json!([{"destination": {"upstream": {"name": "test-podinfo-primaryupstream-80", "namespace": "test"}}, "weight": 100}])
    );
}

#[test]
fn kuma_and_gloo_refuse_what_they_cannot_render() {
    let mirror = "    iterations: 5\n    mirror: true\n    mirrorWeight: 10";
    let affinity = "    stepWeight: 10\n    maxWeight: 50\n    sessionAffinity:\n      cookieName: flagger-cookie";
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            flagger("", "  provider: kuma", "", GLOO_SERVICE, &insider_ab(5)),
            vec!["canary.yaml:22: spec.analysis.match: a Kuma TrafficRoute splits traffic by weight and cannot match requests (Flagger runs canary and blue/green only with provider kuma); remove analysis.match, or use a provider that routes on headers (istio, gatewayapi:v1)"],
        ),
        (
            flagger("", "  provider: kuma", "", GLOO_SERVICE, mirror),
            vec![
                "canary.yaml:22: spec.analysis.mirror: Flagger's Kuma router ignores this field, and the Kuma objects sluice writes cannot express it either; remove it (use provider istio or gatewayapi:v1 for traffic mirroring or session affinity)",
                "canary.yaml:23: spec.analysis.mirrorWeight: Flagger's Kuma router ignores this field, and the Kuma objects sluice writes cannot express it either; remove it (use provider istio or gatewayapi:v1 for traffic mirroring or session affinity)",
            ],
        ),
        (
            flagger("", "  provider: gloo", "", GLOO_SERVICE, affinity),
            vec!["canary.yaml:23: spec.analysis.sessionAffinity: Flagger's Gloo router ignores this field, and the Gloo objects sluice writes cannot express it either; remove it (use provider istio or gatewayapi:v1 for traffic mirroring or session affinity)"],
        ),
        (
            flagger("  annotations:\n    kuma.io/mesh: Not_A_Mesh", "  provider: kuma", "", GLOO_SERVICE, KUMA_ANALYSIS),
            vec!["canary.yaml:7: metadata.annotations.kuma.io/mesh: expected a DNS-1123 name (lowercase letters, digits, '-' and '.', starting and ending alphanumeric), found \"Not_A_Mesh\""],
        ),
        (
            flagger("", "  provider: gloo", GLOO_REF, GLOO_SERVICE, GLOO_ANALYSIS),
            vec!["canary.yaml:9: spec.upstreamRef: Upstream gloo-system/config-upstream (gloo.solo.io/v1) not found in the repo; sluice reads the Upstream whose settings it copies from the repo (any .yaml file), never from the cluster"],
        ),
        (
            flagger("", "  provider: gloo", "", GLOO_SERVICE, "    iterations: 5
    match:
      - headers:
          x-canary:
            prefix: insider
        uri:
          prefix: /api
      - method:
          regex: P.*"),
            vec![
                "canary.yaml:25: spec.analysis.match[0].headers.x-canary.prefix: a Gloo header matcher matches an exact value or a regex, and Flagger's Gloo router drops a prefix match; use exact or regex",
                "canary.yaml:26: spec.analysis.match[0].uri: Flagger's Gloo router matches only headers and method, so this condition would be dropped; remove it, or use a provider that routes on it (istio)",
                "canary.yaml:28: spec.analysis.match[1].method: a Gloo route matches methods by name: expected exact, found regex",
            ],
        ),
        (
            flagger("", "  provider: istio", GLOO_REF, GLOO_SERVICE, GLOO_ANALYSIS),
            vec!["canary.yaml:9: spec.upstreamRef: not supported"],
        ),
    ];
    for (text, expected) in cases {
        let found = errors(&text, &[]);
        assert_eq!(found.len(), expected.len(), "{text}\n{found:#?}");
        for (f, e) in found.iter().zip(&expected) {
            assert!(f.starts_with(e), "{text}\nfound:    {f}\nexpected: {e}");
        }
    }
}
