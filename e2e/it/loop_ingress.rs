//! Ingress canaries (`provider: nginx`, `provider: skipper`) through the loop
//! (`loop_support`): initialization, every step, promotion and rollback, and A/B for nginx.
//! At every sluice commit `route.yaml` holds one canary Ingress `<ingress>-canary` that
//! passes the strict `networking.k8s.io/v1` Ingress schema and carries the status file's
//! weights, and the user's Ingress is neither edited nor copied into the output folder.

use serde_json::Value as Json;

use crate::support::canary::podinfo;
use crate::support::git;
use crate::support::manifests::nginx_ingress;
use crate::support::rollout::{
    show, sluice_commits, weights, Commit, Provider, OUTPUT, ROUTE_FILE,
};

const INGRESS_FILE: &str = "apps/podinfo/ingress.yaml";

/// The canary of Flagger's `test/nginx/test-canary.sh` (or `test/skipper/`), in `prod`.
fn canary(provider: &str, analysis: &str) -> String {
    podinfo()
        .provider(provider)
        .refs(
            "  ingressRef:
    apiVersion: networking.k8s.io/v1
    kind: Ingress
    name: podinfo
",
        )
        .service("    port: 80\n    targetPort: 9898")
        .yaml(analysis)
}

fn ingress() -> String {
    nginx_ingress().replace("namespace: test", "namespace: prod")
}

const AB: &str = "    iterations: 3
    match:
    - headers:
        x-user:
          exact: \"insider\"
    - headers:
        cookie:
          exact: \"canary\"";

/// The weights a canary Ingress sends, as `primary=.. canary=..`: nginx's `canary-weight`
/// (or all matching requests while its A/B headers are set), Skipper's backend weights.
fn ingress_weights(doc: &Json) -> String {
    let a = &doc["metadata"]["annotations"];
    if let Some(backends) = a["zalando.org/backend-weights"].as_str() {
        let w: Json = serde_json::from_str(backends).unwrap();
        return weights(&w["podinfo-primary"], &w["podinfo-canary"]);
    }
    if a.get("nginx.ingress.kubernetes.io/canary-by-header")
        .is_some()
    {
        assert_eq!(a["nginx.ingress.kubernetes.io/canary-weight"], "0");
        return "primary=0 canary=100".into();
    }
    let canary: u8 = a["nginx.ingress.kubernetes.io/canary-weight"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    format!("primary={} canary={canary}", 100 - canary)
}

/// One canary Ingress `podinfo-canary`; the user's Ingress untouched and not copied into the
/// output folder.
fn route(c: &Commit) -> String {
    assert_eq!(c.docs.len(), 1, "{}", c.sha);
    let doc = &c.docs[0];
    assert_eq!(doc["kind"], "Ingress");
    assert_eq!(doc["metadata"]["name"], "podinfo-canary");
    assert_eq!(show(c.bare, c.sha, INGRESS_FILE), ingress(), "{}", c.sha);
    let outputs = git(
        c.bare,
        &["ls-tree", "--name-only", c.sha, &format!("{OUTPUT}/")],
    );
    for file in outputs.lines().filter(|f| f.ends_with(".yaml")) {
        let docs: Vec<Json> = serde_saphyr::from_multiple(&show(c.bare, c.sha, file)).unwrap();
        assert!(
            !docs
                .iter()
                .any(|d| d["kind"] == "Ingress" && d["metadata"]["name"] == "podinfo"),
            "{}: the user's Ingress was copied into {file}",
            c.sha
        );
    }
    ingress_weights(doc)
}

fn files() -> Vec<(&'static str, String)> {
    vec![(INGRESS_FILE, ingress())]
}

const NGINX: Provider = Provider {
    canary: |analysis| canary("nginx", analysis),
    files,
    route,
};

const SKIPPER: Provider = Provider {
    canary: |analysis| canary("skipper", analysis),
    files,
    route,
};

#[test]
fn nginx_canary_rolls_out_through_git_daemon() {
    NGINX.steps_and_promotes();
}

#[test]
fn nginx_bluegreen_switches_all_traffic_after_its_iterations() {
    NGINX.bluegreen_switches();
}

#[test]
fn nginx_ab_routes_the_header_and_cookie_then_promotes() {
    let w = NGINX.ab_routes_and_promotes(AB);
    // Some commit routed by header and cookie, as Flagger's tutorial asks.
    let routed = sluice_commits(&w.bare).iter().any(|(sha, _)| {
        let route = show(&w.bare, sha, ROUTE_FILE);
        route.contains("nginx.ingress.kubernetes.io/canary-by-header: x-user")
            && route.contains("nginx.ingress.kubernetes.io/canary-by-header-value: insider")
            && route.contains("nginx.ingress.kubernetes.io/canary-by-cookie: canary")
    });
    assert!(routed, "no commit routed the A/B requests");
}

#[test]
fn nginx_rollback_routes_everything_back_to_the_primary() {
    NGINX.rolls_back();
}

#[test]
fn skipper_canary_rolls_out_and_rolls_back_through_git_daemon() {
    SKIPPER.steps_and_promotes();
    SKIPPER.rolls_back();
}
