//! An Argo Rollout's `setHeaderRoute` steps through the loop, on the Gateway API plugin's
//! HTTPRoute: while a managed route is set, the user's route copy carries the plugin's header
//! rule (the user's matches with the step's headers added, the user's filters, the canary
//! Service only) after the user's rules; a step without `match` removes it, and the end of
//! the rollout leaves the route the user's with only the weights changed. At every sluice
//! commit each output document passes its strict schema and the header rule is there
//! exactly at the steps Argo sets it; `sluice plan` lists the steps in Argo's words, and a
//! step naming a route the Rollout does not manage is refused at its line.

use serde_json::{json, Value as Json};
use sluice::core::status::Phase;

use crate::support::rollout::{
    docs_at, rollout, services, show, sluice_commits, OUTPUT, ROLLOUT_FILE, ROUTE_FILE,
    SERVICES_FILE, STABLE_FILE, STATUS_FILE,
};
use crate::support::route_sources::route_head;
use crate::support::{run_sluice, Schemas, World};

const ROUTE_SOURCE: &str = "apps/podinfo/route.yaml";

/// Weights, a pause, a header route, a second weight, its removal after a pause, a third
/// weight.
const HEADER_STEPS: &str = "        - setWeight: 20
        - setHeaderRoute:
            name: canary-header
            match:
              - headerName: x-canary
                headerValue: {exact: always}
              - headerName: x-user
                headerValue: {prefix: qa-}
        - pause: {duration: 30s}
        - setWeight: 50
        - pause: {duration: 1m}
        - setHeaderRoute:
            name: canary-header
        - setWeight: 80";

/// The user's HTTPRoute: an admin rule to another backend, and the podinfo rule with a path
/// match and a response header filter, sending to both Services.
fn http_route() -> String {
    route_head("v1", "HTTPRoute", "https")
        + "  hostnames: [podinfo.example.com]
  rules:
    - matches:
        - path: {type: PathPrefix, value: /admin}
      backendRefs:
        - name: admin
          port: 8080
    - matches:
        - path: {type: PathPrefix, value: /}
      filters:
        - type: ResponseHeaderModifier
          responseHeaderModifier:
            add:
              - name: x-served-by
                value: podinfo
      backendRefs:
        - name: podinfo-stable
          port: 9898
          weight: 100
        - name: podinfo-canary
          port: 9898
          weight: 0
"
}

/// The Rollout routed by the plugin's `httpRoute`, managing `canary-header`.
fn header_rollout(version: &str, steps: &str) -> String {
    rollout(version, "httpRoute", steps).replace(
        "      trafficRouting:\n",
        "      trafficRouting:\n        managedRoutes:\n          - name: canary-header\n",
    )
}

/// The rule the plugin adds for `canary-header` to the podinfo rule.
fn header_rule() -> Json {
    json!({
        "name": "canary-header",
        "matches": [{
            "path": {"type": "PathPrefix", "value": "/"},
            "headers": [
                {"name": "x-canary", "type": "Exact", "value": "always"},
                {"name": "x-user", "type": "RegularExpression", "value": "qa-.*"},
            ],
        }],
        "filters": [{
            "type": "ResponseHeaderModifier",
            "responseHeaderModifier": {"add": [{"name": "x-served-by", "value": "podinfo"}]},
        }],
        "backendRefs": [{"group": "", "kind": "Service", "name": "podinfo-canary", "port": 9898}],
    })
}

fn world(steps: &str) -> World {
    let files = [
        (ROLLOUT_FILE, header_rollout("6.7.0", steps)),
        ("apps/podinfo/services.yaml", services()),
        (ROUTE_SOURCE, http_route()),
    ];
    let pairs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    World::served(&pairs).building(OUTPUT)
}

/// Every sluice commit: every output document schema-valid; the route's rules the user's
/// with the status file's weights, followed by the header rule exactly while the analysis is
/// at the steps Argo sets it (1 and 2; the removal starts step 3 at the same weight). Returns
/// `weights header|-` per commit, in order.
fn check_every_commit(w: &World) -> Vec<String> {
    let mut schemas = Schemas::default();
    let source: Json = serde_saphyr::from_str(&http_route()).unwrap();
    let mut found = Vec::new();
    for (sha, trailer) in sluice_commits(&w.bare) {
        let status: Json = serde_saphyr::from_str(&show(&w.bare, &sha, STATUS_FILE)).unwrap();
        let (stable_w, canary_w) = (
            status["primaryWeight"].as_u64().unwrap(),
            status["canaryWeight"].as_u64().unwrap(),
        );
        for file in [ROUTE_FILE, STABLE_FILE, SERVICES_FILE] {
            for doc in docs_at(&w.bare, &sha, file) {
                schemas.assert_valid(&doc, &format!("{sha} {file}"));
            }
        }
        let route = docs_at(&w.bare, &sha, ROUTE_FILE).remove(0);
        let mut expected = source["spec"]["rules"].as_array().unwrap().clone();
        expected[1]["backendRefs"][0]["weight"] = stable_w.into();
        expected[1]["backendRefs"][1]["weight"] = canary_w.into();
        let analysing =
            ["Progressing", "WaitingApproval"].contains(&status["phase"].as_str().unwrap());
        let header = analysing && [1, 2].contains(&status["step"].as_u64().unwrap_or(0));
        if header {
            expected.push(header_rule());
        }
        assert_eq!(
            route["spec"]["rules"],
            Json::Array(expected),
            "{sha}: step {} {}",
            status["step"],
            status["phase"]
        );
        assert_eq!(route["spec"]["parentRefs"], source["spec"]["parentRefs"]);
        let weights = format!("primary={stable_w} canary={canary_w}");
        assert_eq!(trailer, weights, "{sha}: trailer and status agree");
        found.push(format!("{weights} {}", if header { "header" } else { "-" }));
    }
    found
}

#[test]
fn rollout_header_route_is_on_the_httproute_exactly_at_the_steps_argo_sets_it() {
    let mut w = world(HEADER_STEPS);
    w.until(Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &header_rollout("6.7.1", HEADER_STEPS),
        "podinfo: 6.7.1",
    );
    w.until(Phase::Succeeded);
    let mut seen = check_every_commit(&w);
    seen.dedup();
    assert_eq!(
        seen,
        [
            "primary=100 canary=0 -",
            "primary=80 canary=20 header",
            "primary=50 canary=50 header",
            "primary=50 canary=50 -",
            "primary=20 canary=80 -",
            "primary=100 canary=0 -",
        ]
    );
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
}

/// The header route set before the first `setWeight`, as the plugin's header-based examples
/// do: Argo sets it while the canary takes no traffic, a step of its own at weight 0.
const HEADER_FIRST: &str = "        - setHeaderRoute:
            name: canary-header
            match:
              - headerName: x-canary
                headerValue: {exact: always}
              - headerName: x-user
                headerValue: {prefix: qa-}
        - pause: {duration: 30s}
        - setWeight: 50
        - pause: {duration: 1m}
        - setHeaderRoute:
            name: canary-header
        - setWeight: 80";

#[test]
fn rollout_header_route_before_the_first_weight_routes_at_weight_zero() {
    let mut w = world(HEADER_FIRST);
    w.until(Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &header_rollout("6.7.1", HEADER_FIRST),
        "podinfo: 6.7.1",
    );
    w.until(Phase::Succeeded);
    let mut seen = check_every_commit(&w);
    seen.dedup();
    assert_eq!(
        seen,
        [
            "primary=100 canary=0 -",
            "primary=100 canary=0 header",
            "primary=50 canary=50 header",
            "primary=50 canary=50 -",
            "primary=20 canary=80 -",
            "primary=100 canary=0 -",
        ]
    );
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
}

#[test]
fn plan_lists_header_route_steps_and_validate_refuses_an_unmanaged_name() {
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &header_rollout("6.7.0", HEADER_STEPS)),
        ("apps/podinfo/services.yaml", &services()),
        (ROUTE_SOURCE, &http_route()),
    ]);
    let (code, out, err) = run_sluice(&["plan", &dir.path().display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("rollout steps:      setWeight 20, setHeaderRoute canary-header, pause 30s, setWeight 50, pause 60s, setHeaderRoute canary-header remove, setWeight 80"),
        "{out}"
    );
    let text = header_rollout(
        "6.7.0",
        &HEADER_STEPS.replacen("name: canary-header", "name: other", 1),
    );
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &text),
        ("apps/podinfo/services.yaml", &services()),
        (ROUTE_SOURCE, &http_route()),
    ]);
    let (code, _, err) = crate::support::validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{err}");
    let line = text
        .lines()
        .position(|l| l.contains("name: other"))
        .unwrap()
        + 1;
    assert!(
        err.contains(&format!(
            "{ROLLOUT_FILE}:{line}: spec.strategy.canary.steps[1].setHeaderRoute.name: expected one of trafficRouting.managedRoutes (canary-header), found \"other\""
        )),
        "{err}"
    );
}
