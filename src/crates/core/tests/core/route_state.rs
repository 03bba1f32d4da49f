//! The route state a rollout keeps in its status: session-affinity cookies and the mirror
//! phase, across whole rollouts (Flagger's rules; see `route_state.rs`).

use sluice_core::decide::{decide, Action, Decision};
use sluice_core::model::Canary;
use sluice_core::observe::Observations;
use sluice_core::operate::{operate, Operation};
use sluice_core::status::{Phase, Status};

use crate::builders::{canary, t, walk_until};

/// Every committed decision of `revision`'s rollout from `status` at `start`, until the canary
/// is idle again.
fn walk(c: &Canary<()>, status: &Status, revision: &str, start: i64) -> Vec<Decision> {
    walk_until(c, status, revision, start, Phase::Succeeded)
}

fn initialized(c: &Canary<()>) -> Status {
    decide(c, None, &Observations::revision("r0"), t(0)).status
}

#[test]
fn a_rollout_sets_one_cookie_while_the_canary_takes_traffic_then_expires_it() {
    let c = canary()
        .step_weight(20)
        .max_weight(40)
        .session_affinity("flagger-cookie")
        .build();
    let first = walk(&c, &initialized(&c), "r1", 10);
    let cookie = first
        .iter()
        .find_map(|d| d.status.session_cookie.clone())
        .expect("a cookie once the canary takes traffic");
    let (name, value) = cookie.split_once('=').expect("name=value");
    assert_eq!(name, "flagger-cookie");
    assert_eq!(value.len(), 10);
    assert!(value.bytes().all(|b| b.is_ascii_alphabetic()), "{value}");
    for d in &first {
        let s = &d.status;
        if s.canary_weight > 0 {
            assert_eq!(
                s.session_cookie.as_deref(),
                Some(cookie.as_str()),
                "{:?}",
                d.action
            );
        } else {
            assert_eq!(s.session_cookie, None, "{:?}", d.action);
        }
    }
    // Before the canary took traffic there was nothing to expire; after, the cookie is.
    let start = &first[0];
    assert_eq!(start.action, Action::StartRollout);
    assert_eq!(start.status.previous_session_cookie, None);
    let done = first.last().expect("decisions").status.clone();
    assert_eq!(done.phase, Phase::Succeeded);
    assert_eq!(
        done.previous_session_cookie.as_deref(),
        Some(cookie.as_str())
    );

    // The next rollout gets a cookie of its own; the old one stays to be expired until then.
    let second = walk(&c, &done, "r2", 10_000);
    let cookie2 = second
        .iter()
        .find_map(|d| d.status.session_cookie.clone())
        .expect("a second cookie");
    assert_ne!(cookie2, cookie);
    assert_eq!(
        second
            .last()
            .expect("decisions")
            .status
            .previous_session_cookie,
        Some(cookie2)
    );
}

#[test]
fn the_cookie_is_the_same_for_the_same_rollout_and_differs_between_rollouts() {
    let c = canary().session_affinity("c").build();
    let cookie_of = |revision: &str, start: i64| {
        walk(&c, &initialized(&c), revision, start)
            .iter()
            .find_map(|d| d.status.session_cookie.clone())
            .expect("a cookie")
    };
    assert_eq!(cookie_of("r1", 10), cookie_of("r1", 10));
    assert_ne!(cookie_of("r1", 10), cookie_of("r2", 10));
    assert_ne!(cookie_of("r1", 10), cookie_of("r1", 11));
}

#[test]
fn a_rollback_turns_the_cookie_into_the_one_to_expire() {
    let c = canary().session_affinity("c").build();
    let rollout = walk(&c, &initialized(&c), "r1", 10);
    let at_weight = rollout
        .iter()
        .find(|d| d.status.canary_weight > 0)
        .expect("a step with traffic")
        .status
        .clone();
    let cookie = at_weight.session_cookie.clone().expect("a cookie");
    let aborted = operate(&c, Some(&at_weight), Operation::Abort, "test", t(5_000)).unwrap();
    assert_eq!(aborted.status.phase, Phase::Failed);
    assert_eq!(aborted.status.session_cookie, None);
    assert_eq!(aborted.status.previous_session_cookie, Some(cookie));
}

#[test]
fn one_cookie_holds_for_every_step_of_a_rollout() {
    // The cookie is data in the status, never made again while the canary takes traffic
    // (the status file round-trip is tested with the file format, in e2e/it).
    let c = canary()
        .step_weight(10)
        .max_weight(50)
        .session_affinity("c")
        .build();
    let rollout = walk(&c, &initialized(&c), "r1", 10);
    let cookies: Vec<&str> = rollout
        .iter()
        .filter_map(|d| d.status.session_cookie.as_deref())
        .collect();
    assert!(cookies.len() >= 5, "{cookies:?}");
    assert!(cookies.iter().all(|c| *c == cookies[0]), "{cookies:?}");
}

#[test]
fn without_session_affinity_there_is_no_cookie() {
    let c = canary().build();
    for d in walk(&c, &initialized(&c), "r1", 10) {
        assert_eq!(d.status.session_cookie, None);
        assert_eq!(d.status.previous_session_cookie, None);
        assert!(!d.status.mirroring);
    }
}

#[test]
fn blue_green_mirrors_from_the_first_iteration_until_all_traffic_goes_to_the_canary() {
    let c = canary().blue_green(3).mirror().build();
    let rollout = walk(&c, &initialized(&c), "r1", 10);
    let seen: Vec<(Action, bool, u32, u8)> = rollout
        .iter()
        .map(|d| {
            (
                d.action.clone(),
                d.status.mirroring,
                d.status.iterations,
                d.status.canary_weight,
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (Action::StartRollout, false, 0, 0),
            (Action::AdvanceIteration { done: 1, of: 3 }, true, 1, 0),
            (Action::AdvanceIteration { done: 2, of: 3 }, true, 2, 0),
            (Action::AdvanceIteration { done: 3, of: 3 }, true, 3, 0),
            (Action::AdvanceCanary { from: 0, to: 100 }, false, 3, 100),
            (Action::Promote, false, 3, 100),
            (Action::AdvancePrimary { weight: 100 }, false, 3, 0),
            (Action::Finalise, false, 3, 0),
        ]
    );
    let stop = &rollout[4];
    assert_eq!(
        stop.events,
        vec!["Stop traffic mirroring and route all traffic to canary podinfo.prod"]
    );
}

#[test]
fn a_failed_mirrored_analysis_stops_mirroring() {
    let c = canary().blue_green(3).mirror().build();
    let rollout = walk(&c, &initialized(&c), "r1", 10);
    let mirrored = rollout
        .iter()
        .find(|d| d.status.mirroring)
        .expect("a mirrored iteration")
        .status
        .clone();
    let aborted = operate(&c, Some(&mirrored), Operation::Abort, "test", t(5_000)).unwrap();
    assert!(!aborted.status.mirroring);
    // A new revision mid-analysis starts over at iteration 0: not mirrored until iteration 1.
    let restarted = decide(&c, Some(&mirrored), &Observations::revision("r2"), t(5_000));
    assert_eq!(restarted.action, Action::Restart);
    assert!(!restarted.status.mirroring);
}

#[test]
fn mirror_without_blue_green_changes_nothing() {
    // Flagger mirrors only blue/green analyses on Gateway API; the canary steps and A/B
    // rollouts are as without it (routers refuse the combinations they cannot render).
    for c in [canary().mirror().build(), canary().ab(2).mirror().build()] {
        let plain = walk(
            &{
                let mut p = c.clone();
                p.analysis.mirror = false;
                p
            },
            &initialized(&c),
            "r1",
            10,
        );
        let mirrored = walk(&c, &initialized(&c), "r1", 10);
        assert!(mirrored.iter().all(|d| !d.status.mirroring));
        assert_eq!(plain, mirrored);
    }
}

/// Flagger 1.44 (`getSessionAffinityRouteRules`, istio.go and gateway_api.go): with
/// `primaryCookieName` the primary's cookie is made the first time the canary takes traffic,
/// next to the canary's, and `status.primarySessionAffinityCookie` is never cleared, so later
/// rollouts set the same one.
#[test]
fn the_primary_cookie_is_made_with_the_first_traffic_and_kept_for_later_rollouts() {
    let c = canary()
        .step_weight(20)
        .max_weight(40)
        .session_affinity("canary-cookie")
        .primary_cookie("primary-cookie")
        .build();
    let first = walk(&c, &initialized(&c), "r1", 10);
    assert_eq!(first[0].action, Action::StartRollout);
    assert_eq!(
        first[0].status.primary_session_cookie, None,
        "no traffic yet"
    );
    let primary = first
        .iter()
        .find_map(|d| d.status.primary_session_cookie.clone())
        .expect("a primary cookie once the canary takes traffic");
    let (name, value) = primary.split_once('=').expect("name=value");
    assert_eq!(name, "primary-cookie");
    assert_eq!(value.len(), 10);
    assert!(value.bytes().all(|b| b.is_ascii_alphabetic()), "{value}");
    for d in first.iter().filter(|d| d.status.canary_weight > 0) {
        let canary_cookie = d.status.session_cookie.as_deref().expect("a canary cookie");
        assert_eq!(d.status.primary_session_cookie.as_deref(), Some(&*primary));
        assert_ne!(canary_cookie.split_once('=').map(|p| p.1), Some(value));
    }
    let done = first.last().expect("decisions").status.clone();
    assert_eq!(done.phase, Phase::Succeeded);
    assert_eq!(done.primary_session_cookie.as_deref(), Some(&*primary));

    let second = walk(&c, &done, "r2", 10_000);
    assert!(second
        .iter()
        .all(|d| d.status.primary_session_cookie.as_deref() == Some(&*primary)));
}

#[test]
fn a_primary_cookie_goes_with_its_name() {
    let c = canary()
        .session_affinity("canary-cookie")
        .primary_cookie("primary-cookie")
        .build();
    let done = walk(&c, &initialized(&c), "r1", 10)
        .pop()
        .expect("decisions")
        .status;
    assert!(done.primary_session_cookie.is_some());
    // Renamed: the next rollout makes a cookie of the new name.
    let renamed = canary()
        .session_affinity("canary-cookie")
        .primary_cookie("other")
        .build();
    let cookies: Vec<String> = walk(&renamed, &done, "r2", 10_000)
        .iter()
        .filter_map(|d| d.status.primary_session_cookie.clone())
        .collect();
    assert!(!cookies.is_empty());
    assert!(
        cookies.iter().all(|c| c.starts_with("other=")),
        "{cookies:?}"
    );
    // Removed from the spec: the status forgets it at the next commit.
    let without = canary().session_affinity("canary-cookie").build();
    assert!(walk(&without, &done, "r2", 10_000)
        .iter()
        .all(|d| d.status.primary_session_cookie.is_none()));
}
