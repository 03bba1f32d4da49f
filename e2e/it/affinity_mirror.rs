//! Session affinity and blue/green mirroring through the loop, on each router that renders
//! them (Gateway API HTTPRoutes and Istio VirtualServices): a whole rollout against a real
//! `git daemon`, checking the route at every sluice commit against the status file it was
//! committed with, and a restart of sluice mid-rollout that keeps the rollout's cookie (the
//! state lives only in the status file); with `primaryCookieName` the primary's cookie too.

use std::path::Path;

use jiff::Timestamp;
use serde_json::{json, Value as Json};
use sluice::core::status::{Phase, Status};
use sluice::render::status_file;

use crate::support::canary::podinfo;
use crate::support::manifests::{CONFIGS, DEPLOYMENT};
use crate::support::rollout::{CANARY_FILE, ROUTE_FILE, STATUS_FILE};
use crate::support::{git, Schemas, World};

/// What differs between the routers: the canary's provider and gateways, and where the
/// route keeps its rules, weights, cookies and mirror.
struct Router {
    name: &'static str,
    /// The `spec.provider` line, if any (Istio is Flagger's default).
    provider: &'static str,
    /// The service's gateway line.
    gateways: &'static str,
    /// How many documents `route.yaml` holds; the first is the route.
    documents: usize,
    /// The route's list of rules under `spec`.
    rules: &'static str,
    /// A rule's weighted backends.
    backends: &'static str,
    /// The sticky rule's cookie match.
    cookie_match: fn(&Json) -> &Json,
    /// The cookie the weighted rule's canary backend sets.
    set_cookie: fn(&Json) -> &Json,
    /// The cookie the weighted rule's primary backend sets (`primaryCookieName`).
    primary_set_cookie: fn(&Json) -> &Json,
    /// The cookie the first rule sets to expire it.
    expire_cookie: fn(&Json) -> &Json,
    /// Checks a rule's mirror, if it has one; returns whether it has.
    mirror: fn(&Json) -> bool,
}

const GATEWAY_API: Router = Router {
    name: "Gateway API",
    provider: "  provider: gatewayapi:v1\n",
    gateways: "    gatewayRefs: [{name: public, namespace: gateway-system}]",
    documents: 1,
    rules: "rules",
    backends: "backendRefs",
    cookie_match: |rule| &rule["matches"][0]["headers"][0]["value"],
    set_cookie: |rule| {
        &rule["backendRefs"][1]["filters"][0]["responseHeaderModifier"]["add"][0]["value"]
    },
    primary_set_cookie: |rule| {
        &rule["backendRefs"][0]["filters"][0]["responseHeaderModifier"]["add"][0]["value"]
    },
    expire_cookie: |rule| &rule["filters"][0]["responseHeaderModifier"]["add"][0]["value"],
    mirror: |rule| {
        rule.get("filters").is_some_and(|f| {
            assert_eq!(
                f,
                &json!([{"type": "RequestMirror", "requestMirror": {
                    "backendRef": {"group": "", "kind": "Service", "name": "podinfo-canary", "port": 9898},
                    "percent": 50}}])
            );
            true
        })
    },
};

const ISTIO: Router = Router {
    name: "Istio",
    provider: "",
    gateways: "    gateways: [istio-system/public-gateway]",
    documents: 3,
    rules: "http",
    backends: "route",
    cookie_match: |rule| &rule["match"][0]["headers"]["Cookie"]["regex"],
    set_cookie: |rule| &rule["route"][1]["headers"]["response"]["add"]["Set-Cookie"],
    primary_set_cookie: |rule| &rule["route"][0]["headers"]["response"]["add"]["Set-Cookie"],
    expire_cookie: |rule| &rule["headers"]["response"]["add"]["Set-Cookie"],
    mirror: |rule| {
        rule.get("mirror").is_some_and(|m| {
            assert_eq!(m, &json!({"host": "podinfo-canary"}));
            assert_eq!(rule["mirrorPercentage"], json!({"value": 50}));
            true
        })
    },
};

impl Router {
    /// A Flagger canary on this router with this analysis (indented by 4).
    fn canary(&self, analysis: &str) -> String {
        podinfo()
            .spec(self.provider)
            .service(&format!(
                "    port: 9898\n    targetPort: 9898\n{}\n    hosts: [podinfo.example.com]",
                self.gateways
            ))
            .yaml(analysis)
    }

    /// The podinfo source and this router's canary with `analysis`, behind a `git daemon`.
    fn world(&self, analysis: &str) -> World {
        World::served(&[
            ("apps/podinfo/deployment.yaml", DEPLOYMENT),
            ("apps/podinfo/configs.yaml", CONFIGS),
            (CANARY_FILE, &self.canary(analysis)),
        ])
    }

    /// (status, route, first event) at every sluice commit, oldest first; every document
    /// of `route.yaml` checked against its strict schema.
    fn commits(&self, w: &World) -> Vec<(Status, Json, String)> {
        let mut schemas = Schemas::default();
        w.commits()
            .into_iter()
            .map(|c| {
                let sha = &c.sha;
                let status = status_file::parse(&w.show(sha, STATUS_FILE)).unwrap();
                let docs: Vec<Json> =
                    serde_saphyr::from_multiple(&w.show(sha, ROUTE_FILE)).unwrap();
                assert_eq!(docs.len(), self.documents, "{}: {sha}", self.name);
                for doc in &docs {
                    let errors = schemas.errors(doc);
                    assert!(errors.is_empty(), "{}: {sha}: {errors:?}", self.name);
                }
                let event = c.events.first().cloned().unwrap_or_default();
                (status, docs[0].clone(), event)
            })
            .collect()
    }

    /// The primary's and the canary's weights in `rule`.
    fn weights(&self, rule: &Json) -> (u64, u64) {
        let w = |i: usize| rule[self.backends][i]["weight"].as_u64().unwrap();
        (w(0), w(1))
    }
}

fn remote_status(bare: &Path) -> Status {
    status_file::parse(&git(bare, &["show", &format!("main:{STATUS_FILE}")])).unwrap()
}

fn cookie_regex(cookie: &str) -> String {
    let (name, value) = cookie.split_once('=').unwrap();
    format!(".*{name}.*{value}.*")
}

/// A stepped rollout with session affinity: one cookie for the whole rollout, kept across a
/// restart of sluice right after it is first committed, sticky users sent to the canary,
/// and the cookie expired once the rollout ends.
fn session_affinity_keeps_one_cookie(router: &Router) {
    let name = router.name;
    let mut w = router.world(
        "    stepWeight: 20\n    maxWeight: 40\n    sessionAffinity:\n      cookieName: podinfo-canary\n      maxAge: 600",
    );
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    // Restart sluice right after the cookie is first committed.
    w.until_restarting(Phase::Succeeded, |w, _| {
        remote_status(&w.bare).session_cookie.is_some()
    });
    assert_eq!(w.clones, 1, "{name}: sluice was restarted mid-rollout");

    let commits = router.commits(&w);
    let mut cookies = Vec::new();
    for (status, route, event) in &commits {
        let event = format!("{name}: {event}");
        let rules = route["spec"][router.rules].as_array().unwrap();
        let expected = (
            u64::from(status.primary_weight),
            u64::from(status.canary_weight),
        );
        match (&status.session_cookie, &status.previous_session_cookie) {
            (Some(cookie), _) => {
                assert!(status.canary_weight > 0, "{event}");
                cookies.push(cookie.clone());
                assert_eq!(rules.len(), 2, "{event}");
                assert_eq!(
                    (router.cookie_match)(&rules[0]),
                    &cookie_regex(cookie),
                    "{event}"
                );
                assert_eq!(router.weights(&rules[0]), (0, 100), "{event}: sticky users");
                assert_eq!(router.weights(&rules[1]), expected, "{event}");
                assert_eq!(
                    (router.set_cookie)(&rules[1]),
                    &format!("{cookie}; Max-Age=600"),
                    "{event}"
                );
            }
            (None, Some(previous)) => {
                assert_eq!(status.canary_weight, 0, "{event}");
                assert_eq!(rules.len(), 2, "{event}");
                assert_eq!(
                    (router.expire_cookie)(&rules[0]),
                    &format!("{previous}; Max-Age=-1"),
                    "{event}"
                );
                assert_eq!(router.weights(&rules[0]), expected, "{event}");
                assert_eq!(router.weights(&rules[1]), expected, "{event}");
            }
            (None, None) => {
                assert_eq!(rules.len(), 1, "{event}: no cookie yet");
                assert_eq!(router.weights(&rules[0]), expected, "{event}");
            }
        }
    }
    // Weights 20 and 40, then promotion at 40: one cookie for the whole rollout, the same
    // before and after the restart.
    assert_eq!(cookies.len(), 3, "{name}: {commits:#?}");
    assert!(
        cookies.iter().all(|c| *c == cookies[0]),
        "{name}: {cookies:?}"
    );
    assert!(cookies[0].starts_with("podinfo-canary="), "{name}");
    let last = &commits.last().unwrap().0;
    assert_eq!(last.phase, Phase::Succeeded, "{name}");
    assert_eq!(
        last.previous_session_cookie.as_ref(),
        Some(&cookies[0]),
        "{name}"
    );
}

/// `primaryCookieName`, as Flagger 1.44 renders it: while the canary takes traffic, a second
/// sticky rule sends requests carrying the primary's cookie to the primary, and the weighted
/// rule's primary backend sets that cookie for one analysis interval (`Max-Age=10` here: the
/// spec's `1s` runs at Flagger's shortest interval, 10 s); once
/// the canary takes none, only the canary's cookie is expired. One primary cookie across a
/// restart of sluice and into the next rollout (the status file keeps it).
fn primary_cookie_keeps_primary_users(router: &Router) {
    let name = router.name;
    let mut w = router.world(
        "    stepWeight: 20\n    maxWeight: 40\n    sessionAffinity:\n      cookieName: podinfo-canary\n      primaryCookieName: podinfo-primary\n      maxAge: 600\n      path: /",
    );
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until_restarting(Phase::Succeeded, |w, _| {
        remote_status(&w.bare).primary_session_cookie.is_some()
    });
    assert_eq!(w.clones, 1, "{name}: sluice was restarted mid-rollout");
    w.new_revision("6.7.2");
    w.until(Phase::Succeeded);

    let mut primaries = Vec::new();
    let mut sticky_commits = 0;
    for (status, route, event) in &router.commits(&w) {
        let event = format!("{name}: {event}");
        let rules = route["spec"][router.rules].as_array().unwrap();
        let expected = (
            u64::from(status.primary_weight),
            u64::from(status.canary_weight),
        );
        let Some(cookie) = &status.session_cookie else {
            // No canary traffic: no primary rule and no primary cookie set.
            assert!(rules.len() <= 2, "{event}: {rules:?}");
            assert!(
                !serde_json::to_string(route)
                    .unwrap()
                    .contains("podinfo-primary="),
                "{event}"
            );
            continue;
        };
        let primary = status
            .primary_session_cookie
            .as_ref()
            .expect("a primary cookie");
        primaries.push(primary.clone());
        sticky_commits += 1;
        assert_eq!(rules.len(), 3, "{event}");
        assert_eq!(
            (router.cookie_match)(&rules[0]),
            &cookie_regex(cookie),
            "{event}"
        );
        assert_eq!(router.weights(&rules[0]), (0, 100), "{event}: canary users");
        assert_eq!(
            (router.cookie_match)(&rules[1]),
            &cookie_regex(primary),
            "{event}"
        );
        assert_eq!(
            router.weights(&rules[1]),
            (100, 0),
            "{event}: primary users"
        );
        assert_eq!(router.weights(&rules[2]), expected, "{event}");
        assert_eq!(
            (router.set_cookie)(&rules[2]),
            &format!("{cookie}; Max-Age=600; Path=/"),
            "{event}"
        );
        assert_eq!(
            (router.primary_set_cookie)(&rules[2]),
            &format!("{primary}; Max-Age=10; Path=/"),
            "{event}"
        );
    }
    // Two rollouts, each at 20 and 40 and promoting at 40: six commits with canary traffic,
    // one primary cookie for all of them.
    assert_eq!(sticky_commits, 6, "{name}");
    assert!(
        primaries.iter().all(|c| *c == primaries[0]),
        "{name}: {primaries:?}"
    );
    assert!(primaries[0].starts_with("podinfo-primary="), "{name}");
    let last = remote_status(&w.bare);
    assert_eq!(
        last.primary_session_cookie.as_ref(),
        Some(&primaries[0]),
        "{name}"
    );
}

/// Blue/green with mirroring: each iteration mirrors to the canary (across a restart of
/// sluice once mirroring is committed), then all traffic goes to the canary and promotes.
fn blue_green_mirrors_each_iteration(router: &Router) {
    let name = router.name;
    let mut w = router.world("    iterations: 3\n    mirror: true\n    mirrorWeight: 50");
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until_restarting(Phase::Succeeded, |w, _| remote_status(&w.bare).mirroring);
    assert_eq!(w.clones, 1, "{name}: sluice was restarted mid-rollout");

    let commits = router.commits(&w);
    let seen: Vec<(&str, bool, (u64, u64))> = commits
        .iter()
        .map(|(status, route, event)| {
            let rule = &route["spec"][router.rules][0];
            assert_eq!((router.mirror)(rule), status.mirroring, "{name}: {event}");
            (event.as_str(), status.mirroring, router.weights(rule))
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("Initialization done! podinfo.prod", false, (100, 0)),
            (
                "New revision detected! Scaling up podinfo.prod",
                false,
                (100, 0)
            ),
            ("Starting canary analysis for podinfo.prod", true, (100, 0)),
            ("Advance podinfo.prod canary iteration 2/3", true, (100, 0)),
            ("Advance podinfo.prod canary iteration 3/3", true, (100, 0)),
            (
                "Stop traffic mirroring and route all traffic to canary podinfo.prod",
                false,
                (0, 100)
            ),
            (
                "Copying podinfo.prod template spec to podinfo-primary.prod",
                false,
                (0, 100)
            ),
            (
                "Routing all traffic to primary podinfo.prod",
                false,
                (100, 0)
            ),
            (
                "Promotion completed! Scaling down podinfo.prod",
                false,
                (100, 0)
            ),
        ],
        "{name}"
    );
}

#[test]
fn session_affinity_rollout_keeps_one_cookie_across_a_restart_and_expires_it() {
    session_affinity_keeps_one_cookie(&GATEWAY_API);
}

#[test]
fn istio_session_affinity_rollout_keeps_one_cookie_across_a_restart_and_expires_it() {
    session_affinity_keeps_one_cookie(&ISTIO);
}

#[test]
fn primary_cookie_keeps_primary_users_on_the_primary_through_two_rollouts() {
    primary_cookie_keeps_primary_users(&GATEWAY_API);
}

#[test]
fn istio_primary_cookie_keeps_primary_users_on_the_primary_through_two_rollouts() {
    primary_cookie_keeps_primary_users(&ISTIO);
}

#[test]
fn blue_green_mirrors_each_iteration_then_routes_all_traffic_to_the_canary() {
    blue_green_mirrors_each_iteration(&GATEWAY_API);
}

#[test]
fn istio_blue_green_mirrors_each_iteration_then_routes_all_traffic_to_the_canary() {
    blue_green_mirrors_each_iteration(&ISTIO);
}

#[test]
fn route_state_survives_the_status_file() {
    let status = Status {
        session_cookie: Some("podinfo-canary=abcdeFGHIJ".into()),
        previous_session_cookie: Some("podinfo-canary=zyxwvUTSRQ".into()),
        primary_session_cookie: Some("podinfo-primary=qwertASDFG".into()),
        mirroring: true,
        ..remote_status_example()
    };
    let id = sluice::core::model::CanaryId {
        namespace: sluice::core::model::Name::parse("prod").unwrap(),
        name: sluice::core::model::Name::parse("podinfo").unwrap(),
    };
    let text = status_file::render(&id, &status).unwrap();
    assert!(
        text.contains("sessionCookie: podinfo-canary=abcdeFGHIJ"),
        "{text}"
    );
    assert!(
        text.contains("previousSessionCookie: podinfo-canary=zyxwvUTSRQ"),
        "{text}"
    );
    assert!(
        text.contains("primarySessionCookie: podinfo-primary=qwertASDFG"),
        "{text}"
    );
    assert!(text.contains("mirroring: true"), "{text}");
    assert_eq!(status_file::parse(&text).unwrap(), status);
    // Without them the file says nothing of them, and reads back without them.
    let plain = remote_status_example();
    let text = status_file::render(&id, &plain).unwrap();
    assert!(
        !text.contains("ookie") && !text.contains("mirroring"),
        "{text}"
    );
    assert_eq!(status_file::parse(&text).unwrap(), plain);
}

/// A status as a first decision writes it.
fn remote_status_example() -> Status {
    let c = sluice::manifest::load::load_text(
        CANARY_FILE,
        &GATEWAY_API
            .canary("    stepWeight: 20\n    sessionAffinity: {cookieName: podinfo-canary}"),
        &sluice::manifest::settings::Settings::default(),
    )
    .canaries
    .remove(0);
    sluice::core::decide::decide(
        &c,
        None,
        &sluice::core::observe::Observations::revision("r0"),
        Timestamp::from_second(1_700_000_000).unwrap(),
    )
    .status
}
