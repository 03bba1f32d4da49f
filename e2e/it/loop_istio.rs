//! Istio canaries through the loop (`loop_support`): initialization, every step, promotion,
//! rollback and a restart mid-rollout (a fresh clone picks up from the status file), for the
//! canary, blue/green and A/B strategies. At every sluice commit `route.yaml` holds a
//! VirtualService and two DestinationRules, and the VirtualService's weights are the status
//! file's.

use sluice::core::status::Phase;

use crate::support::canary::{ab_analysis, podinfo};
use crate::support::rollout::{
    distinct, show, sluice_commits, weights, Commit, Provider, PRIMARY_FILE, STEPPED, STEPS,
};

/// A Flagger canary as Flagger's Istio tutorial writes it: no provider (Istio is Flagger's
/// default), a gateway, hosts, retries and a traffic policy.
fn canary(analysis: &str) -> String {
    podinfo()
        .service(
            "    port: 9898
    targetPort: 9898
    gateways: [istio-system/public-gateway]
    hosts: [app.example.com]
    retries: {attempts: 3, perTryTimeout: 1s, retryOn: \"gateway-error,connect-failure\"}
    trafficPolicy:
      tls: {mode: ISTIO_MUTUAL}",
        )
        .yaml(analysis)
}

/// A VirtualService whose first route's weights it returns (for A/B, the cookie route then
/// the primary route), and the two DestinationRules with the traffic policy.
fn route(c: &Commit) -> String {
    let docs = c.docs;
    assert_eq!(docs.len(), 3, "{}", c.sha);
    let vs = &docs[0];
    assert_eq!(vs["kind"], "VirtualService");
    assert_eq!(vs["spec"]["gateways"][0], "istio-system/public-gateway");
    let http = vs["spec"]["http"].as_array().unwrap();
    assert_eq!(http.len(), if c.ab { 2 } else { 1 }, "{}", c.sha);
    let route = &http[0]["route"];
    assert_eq!(route[0]["destination"]["host"], "podinfo-primary");
    assert_eq!(route[1]["destination"]["host"], "podinfo-canary");
    if c.ab {
        assert_eq!(
            http[0]["match"][0]["headers"]["cookie"]["regex"],
            "^(.*?;)?(canary=always)(;.*)?$"
        );
        assert_eq!(http[1]["route"][0]["weight"], 100);
    }
    for (doc, name) in [(&docs[1], "podinfo-primary"), (&docs[2], "podinfo-canary")] {
        assert_eq!(doc["metadata"]["name"], name);
        assert_eq!(doc["spec"]["trafficPolicy"]["tls"]["mode"], "ISTIO_MUTUAL");
    }
    weights(&route[0]["weight"], &route[1]["weight"])
}

const ISTIO: Provider = Provider::without_files(canary, route);

#[test]
fn istio_canary_rolls_out_through_git_daemon_with_a_restart() {
    let mut w = ISTIO.world(STEPS);
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    // Part way through the steps (at 40%) the process restarts and resumes from the remote.
    for _ in 0..50 {
        let at = sluice_commits(&w.bare).pop().map(|(_, t)| t);
        if at.as_deref() == Some("primary=60 canary=40") {
            break;
        }
        w.tick();
    }
    assert_eq!(
        sluice_commits(&w.bare).pop().map(|(_, t)| t).as_deref(),
        Some("primary=60 canary=40")
    );
    w.restart();
    w.until(Phase::Succeeded);
    let weights = ISTIO.check_every_commit(&w.bare, false);
    assert_eq!(
        distinct(weights.clone()),
        STEPPED,
        "every step once, in order, across the restart: {weights:?}"
    );
    let last = sluice_commits(&w.bare).pop().unwrap().0;
    let primary = show(&w.bare, &last, PRIMARY_FILE);
    assert!(primary.contains("6.7.1"), "promoted: {primary}");
}

#[test]
fn istio_bluegreen_switches_all_traffic_after_its_iterations() {
    ISTIO.bluegreen_switches();
}

#[test]
fn istio_ab_routes_matching_requests_then_promotes() {
    ISTIO.ab_routes_and_promotes(&ab_analysis(
        3,
        "cookie",
        r#"regex: "^(.*?;)?(canary=always)(;.*)?$""#,
    ));
}

#[test]
fn istio_rollback_routes_everything_back_to_the_primary() {
    ISTIO.rolls_back();
}
