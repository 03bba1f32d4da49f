//! An Argo Rollout's `setMirrorRoute` and `setHeaderRoute` steps through the loop, on Argo's
//! Istio router: while managed routes are set, the VirtualService copy holds them first, in
//! the order of `trafficRouting.managedRoutes`, then the user's routes with only the weights
//! changed. The header route sends the header's requests to the canary; the mirror route
//! keeps the weighted route's destinations with the weights of the step that set it and
//! mirrors a share of the matching requests to the canary. A step without `match` removes
//! its route alone, and the end of the rollout removes them all. At every sluice commit each
//! output document passes its strict schema and `kubectl kustomize` builds the output
//! folder; `sluice plan` lists the steps in Argo's words; the Gateway API plugin's mirror
//! step is refused at its line.

use serde_json::{json, Value as Json};
use sluice::core::status::Phase;

use crate::support::rollout::{
    docs_at, kustomize_builds, kustomize_builds_at, services, show, sluice_commits,
    virtual_service, ISTIO_ROUTING, OUTPUT, ROLLOUT_FILE, ROUTE_FILE, STABLE_FILE, STATUS_FILE,
};
use crate::support::{run_sluice, Schemas, World};

const VS_FILE: &str = "apps/podinfo/virtualservice.yaml";

/// A weight, a mirror route and a header route, a pause, a second weight, a pause, the
/// mirror route's removal, a third weight.
const MIRROR_STEPS: &str = "        - setWeight: 20
        - setMirrorRoute:
            name: mirror-post
            percentage: 50
            match:
              - method: {exact: POST}
                path: {prefix: /color}
        - setHeaderRoute:
            name: canary-header
            match:
              - headerName: x-canary
                headerValue: {exact: always}
        - pause: {duration: 30s}
        - setWeight: 50
        - pause: {duration: 1m}
        - setMirrorRoute:
            name: mirror-post
        - setWeight: 80";

/// The Rollout routed by Argo's Istio router, managing the header route before the mirror.
fn mirror_rollout(version: &str, steps: &str) -> String {
    let routing = format!(
        "        managedRoutes:\n          - name: canary-header\n          - name: mirror-post\n{ISTIO_ROUTING}"
    );
    crate::support::rollout::routed(&routing, version, steps)
}

fn vs() -> String {
    virtual_service("host: podinfo-stable", "host: podinfo-canary")
}

/// The header route Argo's Istio router writes for `canary-header`.
fn header_route() -> Json {
    json!({
        "name": "canary-header",
        "match": [{"headers": {"x-canary": {"exact": "always"}}}],
        "route": [{
            "destination": {"host": "podinfo-canary", "port": {"number": 9898}},
            "weight": 100,
        }],
    })
}

/// The mirror route Argo's Istio router writes for `mirror-post`, set at weight 20.
fn mirror_route() -> Json {
    json!({
        "name": "mirror-post",
        "match": [{"method": {"exact": "POST"}, "uri": {"prefix": "/color"}}],
        "route": [
            {"destination": {"host": "podinfo-stable", "port": {"number": 9898}}, "weight": 80},
            {"destination": {"host": "podinfo-canary", "port": {"number": 9898}}, "weight": 20},
        ],
        "mirror": {"host": "podinfo-canary", "port": {"number": 9898}},
        "mirrorPercentage": {"value": 50.0},
    })
}

fn world() -> World {
    let files = [
        (ROLLOUT_FILE, mirror_rollout("6.7.0", MIRROR_STEPS)),
        ("apps/podinfo/services.yaml", services()),
        (VS_FILE, vs()),
    ];
    let pairs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
    World::served(&pairs).building(OUTPUT)
}

/// Every sluice commit: every route document schema-valid, the output built by kustomize,
/// the http routes the managed routes active at the status' step (the mirror at steps 1 and
/// 2, the header route at steps 1 to 4) then the user's with the status' weights. Returns
/// `weights routes` per commit, in order.
fn check_every_commit(w: &World) -> Vec<String> {
    let mut schemas = Schemas::default();
    let source: Json = serde_saphyr::from_str(&vs()).unwrap();
    let mut found = Vec::new();
    for (sha, trailer) in sluice_commits(&w.bare) {
        let status: Json = serde_saphyr::from_str(&show(&w.bare, &sha, STATUS_FILE)).unwrap();
        let (stable_w, canary_w) = (
            status["primaryWeight"].as_u64().unwrap(),
            status["canaryWeight"].as_u64().unwrap(),
        );
        let route = docs_at(&w.bare, &sha, ROUTE_FILE);
        for doc in &route {
            schemas.assert_valid(doc, &format!("{sha} {ROUTE_FILE}"));
        }
        kustomize_builds_at(&w.bare, &sha, OUTPUT);
        let mut expected = source["spec"].clone();
        for section in ["http", "tcp"] {
            let at = if section == "http" { 1 } else { 0 };
            let dests = expected[section][at]["route"].as_array_mut().unwrap();
            dests[0]["weight"] = stable_w.into();
            dests[1]["weight"] = canary_w.into();
        }
        let analysing =
            ["Progressing", "WaitingApproval"].contains(&status["phase"].as_str().unwrap());
        let step = status["step"].as_u64().unwrap_or(0);
        let mut managed = Vec::new();
        if analysing && (1..=4).contains(&step) {
            managed.push(header_route());
        }
        if analysing && (1..=2).contains(&step) {
            managed.push(mirror_route());
        }
        let names: Vec<&str> = managed
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        let names = if names.is_empty() {
            "-".to_string()
        } else {
            names.join("+")
        };
        let own = expected["http"].as_array().unwrap().clone();
        expected["http"] = Json::Array(managed.into_iter().chain(own).collect());
        assert_eq!(
            route[0]["spec"], expected,
            "{sha}: step {step} {}",
            status["phase"]
        );
        let weights = format!("primary={stable_w} canary={canary_w}");
        assert_eq!(trailer, weights, "{sha}: trailer and status agree");
        found.push(format!("{weights} {names}"));
    }
    found
}

#[test]
fn rollout_mirror_and_header_routes_are_on_the_virtualservice_exactly_at_argos_steps() {
    let mut w = world();
    w.until(Phase::Initialized);
    w.human_writes(
        ROLLOUT_FILE,
        &mirror_rollout("6.7.1", MIRROR_STEPS),
        "podinfo: 6.7.1",
    );
    w.until(Phase::Succeeded);
    let mut seen = check_every_commit(&w);
    seen.dedup();
    assert_eq!(
        seen,
        [
            "primary=100 canary=0 -",
            "primary=80 canary=20 canary-header+mirror-post",
            "primary=50 canary=50 canary-header+mirror-post",
            "primary=50 canary=50 canary-header",
            "primary=20 canary=80 canary-header",
            // Promoting: the managed routes are gone before the weights go back.
            "primary=20 canary=80 -",
            "primary=100 canary=0 -",
        ]
    );
    kustomize_builds(&w.bare, OUTPUT);
    let route = show(&w.bare, "main", ROUTE_FILE);
    assert!(
        !route.contains("mirror-post") && !route.contains("canary-header"),
        "{route}"
    );
    assert!(show(&w.bare, "main", STABLE_FILE).contains("podinfo:6.7.1"));
}

#[test]
fn plan_lists_mirror_steps_and_validate_refuses_a_plugin_mirror() {
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &mirror_rollout("6.7.0", MIRROR_STEPS)),
        ("apps/podinfo/services.yaml", &services()),
        (VS_FILE, &vs()),
    ]);
    let (code, out, err) = run_sluice(&["plan", &dir.path().display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("rollout steps:      setWeight 20, setMirrorRoute mirror-post 50%, setHeaderRoute canary-header, pause 30s, setWeight 50, pause 60s, setMirrorRoute mirror-post remove, setWeight 80"),
        "{out}"
    );
    let text = crate::support::rollout::rollout("6.7.0", "httpRoute", MIRROR_STEPS).replace(
        "      trafficRouting:\n",
        "      trafficRouting:\n        managedRoutes:\n          - name: canary-header\n          - name: mirror-post\n",
    );
    let dir = crate::support::repo(&[
        (ROLLOUT_FILE, &text),
        ("apps/podinfo/services.yaml", &services()),
        (
            "apps/podinfo/route.yaml",
            &crate::support::rollout::http_route(),
        ),
    ]);
    let (code, _, err) = crate::support::validate(dir.path(), &["."]);
    assert_eq!(code, 1, "{err}");
    let line = text
        .lines()
        .position(|l| l.contains("- setMirrorRoute:"))
        .unwrap()
        + 1;
    assert!(
        err.contains(&format!(
            "{ROLLOUT_FILE}:{line}: spec.strategy.canary.steps[1].setMirrorRoute: the Gateway API plugin's SetMirrorRoute returns without changing the route"
        )),
        "{err}"
    );
}
