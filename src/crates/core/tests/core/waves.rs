//! The release rule of waves, as tables over a three-wave release (staging, eu, us): which
//! wave may see the source's revision, with a fixed clock.

use sluice_core::model::{Canary, Name, WaveOf};
use sluice_core::status::{Phase, Status};
use sluice_core::waves::{
    release, release_state, releases, revert, reverted, BeforeRelease, OnFailure, Release,
    ReleaseState, WaveState,
};

use crate::builders::{canary, t};

/// A wave's status: `phase`, the promoted revision, the revision under analysis.
fn status(phase: Phase, promoted: &str, canary: Option<&str>) -> Status {
    Status {
        phase,
        step: 0,
        canary_weight: 0,
        primary_weight: 100,
        failed_checks: 0,
        iterations: 0,
        promoted_revision: promoted.to_string(),
        canary_revision: canary.map(str::to_string),
        stable_service: None,
        waiting_for: None,
        phase_since: t(0),
        step_started: t(0),
        last_failed_check: None,
        checks: Vec::new(),
        message: String::new(),
        paused: false,
        clock_from_merge: false,
        session_cookie: None,
        previous_session_cookie: None,
        primary_session_cookie: None,
        mirroring: false,
        drift: Vec::new(),
        waiting_since: None,
        analysis: Vec::new(),
        rolled_out: Vec::new(),
    }
}

fn names() -> [Name; 3] {
    ["staging", "eu", "us"].map(|n| Name::parse(n).unwrap())
}

/// `G` for a wave that goes, `H` for one held (`onFailure: hold`).
fn rule(revision: &str, statuses: [Option<Status>; 3]) -> String {
    rule_on(OnFailure::Hold, revision, statuses)
}

/// [`rule`] under `on_failure`; `R` for a wave reverted.
fn rule_on(on_failure: OnFailure, revision: &str, statuses: [Option<Status>; 3]) -> String {
    let names = names();
    let waves: Vec<WaveState<'_>> = names
        .iter()
        .zip(&statuses)
        .map(|(name, status)| WaveState {
            name,
            status: status.as_ref(),
        })
        .collect();
    release(revision, on_failure, &waves)
        .iter()
        .map(|r| match r {
            Release::Go => 'G',
            Release::Hold { .. } => 'H',
            Release::Revert { .. } => 'R',
        })
        .collect()
}

fn state(revision: &str, statuses: [Option<Status>; 3]) -> ReleaseState {
    let names = names();
    let waves: Vec<WaveState<'_>> = names
        .iter()
        .zip(&statuses)
        .map(|(name, status)| WaveState {
            name,
            status: status.as_ref(),
        })
        .collect();
    release_state(revision, &waves)
}

use Phase::*;

#[test]
fn a_release_walks_wave_by_wave() {
    let rest = |p| Some(status(p, "r1", None));
    let on = |p, canary| Some(status(p, "r1", Some(canary)));
    let done = || Some(status(Succeeded, "r2", Some("r2")));
    let table: Vec<(&str, [Option<Status>; 3], &str, ReleaseState)> = vec![
        // Nothing yet: every wave initializes with what the source holds.
        (
            "start",
            [None, None, None],
            "GGG",
            ReleaseState::InProgress { wave: 0 },
        ),
        (
            "initialized",
            [rest(Initialized), rest(Initialized), rest(Initialized)],
            "GHH",
            ReleaseState::InProgress { wave: 0 },
        ),
        (
            "staging analyses r2",
            [on(Progressing, "r2"), rest(Initialized), rest(Initialized)],
            "GHH",
            ReleaseState::InProgress { wave: 0 },
        ),
        (
            "staging promotes",
            [on(Promoting, "r2"), rest(Initialized), rest(Initialized)],
            "GHH",
            ReleaseState::InProgress { wave: 0 },
        ),
        (
            "staging succeeded: eu goes",
            [done(), rest(Initialized), rest(Initialized)],
            "GGH",
            ReleaseState::InProgress { wave: 1 },
        ),
        (
            "eu waits for its approval",
            [done(), on(Waiting, "r2"), rest(Initialized)],
            "GGH",
            ReleaseState::InProgress { wave: 1 },
        ),
        (
            "eu analyses",
            [done(), on(Progressing, "r2"), rest(Succeeded)],
            "GGH",
            ReleaseState::InProgress { wave: 1 },
        ),
        (
            "eu succeeded: us goes",
            [done(), done(), rest(Succeeded)],
            "GGG",
            ReleaseState::InProgress { wave: 2 },
        ),
        (
            "all on r2",
            [done(), done(), done()],
            "GGG",
            ReleaseState::Done,
        ),
    ];
    for (name, statuses, want, want_state) in table {
        assert_eq!(rule("r2", statuses.clone()), want, "{name}");
        assert_eq!(state("r2", statuses), want_state, "{name}");
    }
}

#[test]
fn a_failed_wave_stops_the_release_and_holds_the_later_ones() {
    let done = || Some(status(Succeeded, "r2", Some("r2")));
    let failed = Some(status(Failed, "r1", Some("r2")));
    let old = Some(status(Succeeded, "r1", None));
    let statuses = [done(), failed, old];
    // The failed wave goes (its own rules keep it Failed, rolled back in its folder); the
    // one after it never sees r2.
    assert_eq!(rule("r2", statuses.clone()), "GGH");
    assert_eq!(state("r2", statuses), ReleaseState::Failed { wave: 1 });
}

#[test]
fn a_newer_revision_restarts_in_the_first_wave() {
    // r2 was in eu when r3 arrived: staging starts r3; eu, on r2, waits where it is for r3
    // to reach it; us (still r1) waits too.
    let statuses = [
        Some(status(Succeeded, "r2", Some("r2"))),
        Some(status(Progressing, "r1", Some("r2"))),
        Some(status(Succeeded, "r1", None)),
    ];
    assert_eq!(rule("r3", statuses.clone()), "GHH");
    assert_eq!(state("r3", statuses), ReleaseState::InProgress { wave: 0 });
    // Once staging succeeded on r3, eu takes r3 (its rules restart the analysis).
    let statuses = [
        Some(status(Succeeded, "r3", Some("r3"))),
        Some(status(Progressing, "r1", Some("r2"))),
        Some(status(Succeeded, "r1", None)),
    ];
    assert_eq!(rule("r3", statuses), "GGH");
}

#[test]
fn a_later_wave_never_takes_a_revision_an_earlier_one_only_passed_before() {
    // Staging succeeded on r2, then r3 came and failed there: eu stays on r2 and us on r1.
    let statuses = [
        Some(status(Failed, "r2", Some("r3"))),
        Some(status(Succeeded, "r2", Some("r2"))),
        Some(status(Succeeded, "r1", None)),
    ];
    assert_eq!(rule("r3", statuses.clone()), "GHH");
    assert_eq!(state("r3", statuses), ReleaseState::Failed { wave: 0 });
}

#[test]
fn a_held_wave_says_what_it_waits_for() {
    let names = names();
    let staging = status(Progressing, "r1", Some("9e46dc7a1b"));
    let eu = status(Initialized, "r1", None);
    let waves = [
        WaveState {
            name: &names[0],
            status: Some(&staging),
        },
        WaveState {
            name: &names[1],
            status: Some(&eu),
        },
    ];
    assert_eq!(
        release("9e46dc7a1b", OnFailure::Hold, &waves)[1],
        Release::Hold {
            reason: "waiting for wave staging to succeed on revision 9e46dc7 (it is Progressing on 9e46dc7)".into()
        }
    );
}

#[test]
fn under_rollback_a_failed_wave_reverts_the_earlier_waves_that_took_its_revision() {
    let done = || Some(status(Succeeded, "r2", Some("r2")));
    let mut failed = status(Failed, "r1", Some("r2"));
    failed.message = "Rolling back web.eu: error-rate 5 > 1".into();
    let old = || Some(status(Succeeded, "r1", None));
    // Reverted already: Failed on r2, back on r1.
    let back = || Some(status(Failed, "r1", Some("r2")));
    let on = |p, canary| Some(status(p, "r1", Some(canary)));
    type Row = (
        &'static str,
        OnFailure,
        [Option<Status>; 3],
        &'static str,
        ReleaseState,
    );
    let table: Vec<Row> = vec![
        (
            "hold: staging keeps r2",
            OnFailure::Hold,
            [done(), Some(failed.clone()), old()],
            "GGH",
            ReleaseState::Failed { wave: 1 },
        ),
        (
            "rollback: staging goes back, us never sees r2",
            OnFailure::Rollback,
            [done(), Some(failed.clone()), old()],
            "RGH",
            ReleaseState::Failed { wave: 1 },
        ),
        (
            "rollback, once reverted: nothing more, the release stays Failed at eu",
            OnFailure::Rollback,
            [back(), Some(failed.clone()), old()],
            "GGH",
            ReleaseState::Failed { wave: 1 },
        ),
        (
            "rollback of the last wave: both earlier waves go back",
            OnFailure::Rollback,
            [done(), done(), Some(failed.clone())],
            "RRG",
            ReleaseState::Failed { wave: 2 },
        ),
        (
            "rollback, one reverted, one to go",
            OnFailure::Rollback,
            [back(), done(), Some(failed.clone())],
            "GRG",
            ReleaseState::Failed { wave: 2 },
        ),
        (
            "rollback in the first wave: nothing earlier to revert",
            OnFailure::Rollback,
            [Some(failed.clone()), old(), old()],
            "GHH",
            ReleaseState::Failed { wave: 0 },
        ),
        (
            "rollback while eu still analyses: nothing failed yet",
            OnFailure::Rollback,
            [done(), on(Progressing, "r2"), old()],
            "GGH",
            ReleaseState::InProgress { wave: 1 },
        ),
    ];
    for (name, on_failure, statuses, want, want_state) in table {
        assert_eq!(rule_on(on_failure, "r2", statuses.clone()), want, "{name}");
        assert_eq!(state("r2", statuses), want_state, "{name}");
    }
}

#[test]
fn a_newer_revision_after_a_rollback_reverts_nothing_and_starts_in_the_first_wave() {
    // r2 failed in eu and staging was reverted; r3 is pushed: staging takes it as any new
    // revision, eu waits for it, and the failure on r2 reverts nothing any more.
    let statuses = [
        Some(status(Failed, "r1", Some("r2"))),
        Some(status(Failed, "r1", Some("r2"))),
        Some(status(Succeeded, "r1", None)),
    ];
    assert_eq!(rule_on(OnFailure::Rollback, "r3", statuses.clone()), "GHH");
    assert_eq!(state("r3", statuses), ReleaseState::InProgress { wave: 0 });
}

#[test]
fn a_revert_says_which_wave_failed_and_why() {
    let names = names();
    let staging = status(Succeeded, "9e46dc7a1b", Some("9e46dc7a1b"));
    let mut eu = status(Failed, "r1", Some("9e46dc7a1b"));
    eu.message = "Rolling back web.eu: error-rate 5 > 1".into();
    let waves = [
        WaveState {
            name: &names[0],
            status: Some(&staging),
        },
        WaveState {
            name: &names[1],
            status: Some(&eu),
        },
    ];
    assert_eq!(
        release("9e46dc7a1b", OnFailure::Rollback, &waves)[0],
        Release::Revert {
            revision: "9e46dc7a1b".into(),
            reason: "wave eu failed on revision 9e46dc7: Rolling back web.eu: error-rate 5 > 1"
                .into()
        }
    );
}

#[test]
fn a_reverted_wave_is_failed_on_the_revision_with_what_it_ran_before() {
    let mut before = status(Succeeded, "r1", None);
    before.stable_service = Some("web-blue".into());
    before.checks = vec![sluice_core::status::CheckRecord {
        name: "error-rate".into(),
        value: Some(0.0),
        min: None,
        max: Some(1.0),
        passed: true,
        detail: String::new(),
    }];
    let after = reverted(&before, "r2", "wave eu failed on revision r2: bad", t(60));
    assert_eq!(after.phase, Failed);
    assert_eq!(after.promoted_revision, "r1");
    assert_eq!(after.canary_revision.as_deref(), Some("r2"));
    assert_eq!(after.stable_service.as_deref(), Some("web-blue"));
    assert_eq!((after.primary_weight, after.canary_weight), (100, 0));
    assert_eq!((after.phase_since, after.step_started), (t(60), t(60)));
    assert!(after.checks.is_empty());
    assert_eq!(
        after.message,
        "Reverted to revision r1, what it ran before the release of r2 reached it: wave eu failed on revision r2: bad"
    );
    // Its own rules then leave it where it is: a failed revision is not taken again.
    let names = names();
    let waves = [WaveState {
        name: &names[0],
        status: Some(&after),
    }];
    assert_eq!(
        release("r2", OnFailure::Rollback, &waves),
        vec![Release::Go]
    );
}

/// The instance of `podinfo` in wave `index` of (staging, eu, us), under `on_failure`.
fn instance(index: usize, on_failure: OnFailure) -> Canary<()> {
    let names = names();
    let mut c = canary().build();
    c.id.name = Name::parse(&format!("podinfo.{}", names[index])).unwrap();
    c.wave = Some(WaveOf {
        canary: Name::parse("podinfo").unwrap(),
        name: names[index].clone(),
        file: "apps/podinfo/canary.yaml".into(),
        line: 10 + index,
        field: format!("spec.waves[{index}]"),
        index,
        waves: names.to_vec(),
        approval: false,
        on_failure,
        cluster: None,
        cluster_line: 0,
        metrics_secret: None,
    });
    c
}

#[test]
fn releases_over_a_tick_hold_every_wave_after_one_that_cannot_be_read_and_revert_none() {
    let plain = canary().build();
    let [staging, eu, us] = [0, 1, 2].map(|i| instance(i, OnFailure::Rollback));
    let done = status(Succeeded, "r2", Some("r2"));
    let mut failed = status(Failed, "r1", Some("r2"));
    failed.message = "Rolling back podinfo.eu: error-rate 5 > 1".into();
    let old = status(Succeeded, "r1", None);
    // Every wave read: staging is reverted, us held, the canary without waves goes.
    let whole = releases(&[
        (&plain, None, "r9"),
        (&staging, Some(&done), "r2"),
        (&eu, Some(&failed), "r2"),
        (&us, Some(&old), "r2"),
    ]);
    assert_eq!(whole[0], Release::Go);
    assert!(matches!(&whole[1], Release::Revert { revision, .. } if revision == "r2"));
    assert_eq!(whole[2], Release::Go);
    assert!(matches!(&whole[3], Release::Hold { .. }));
    // eu's status cannot be read (it is not among the items): us waits for it, and staging
    // is not reverted, since eu may be the wave that failed.
    let partial = releases(&[(&staging, Some(&done), "r2"), (&us, Some(&old), "r2")]);
    assert_eq!(
        partial,
        vec![
            Release::Go,
            Release::Hold {
                reason: "wave eu cannot be read this tick".into()
            }
        ]
    );
    // us cannot be read: eu failed, yet staging is not reverted while the release is not
    // seen whole.
    let tail = releases(&[(&staging, Some(&done), "r2"), (&eu, Some(&failed), "r2")]);
    assert_eq!(tail, vec![Release::Go, Release::Go]);
    // The first wave cannot be read: the release's revision is unknown, every wave holds.
    let headless = releases(&[(&eu, Some(&failed), "r2"), (&us, Some(&old), "r2")]);
    let held = Release::Hold {
        reason: "wave staging cannot be read this tick".into(),
    };
    assert_eq!(headless, vec![held.clone(), held]);
}

#[test]
fn a_decided_revert_goes_back_to_the_commit_before_the_release() {
    let before = status(Succeeded, "r1", None);
    let from = "0123456789abcdef0123456789abcdef01234567";
    let reason = "wave eu failed on revision r2: error-rate 5 > 1";
    let decided = revert(
        BeforeRelease {
            from: from.into(),
            status: before.clone(),
        },
        "r2",
        reason,
        t(90),
    );
    assert_eq!(decided.revision, "r2");
    assert_eq!(decided.from, from);
    assert_eq!(decided.before, before);
    assert_eq!(decided.status, reverted(&before, "r2", reason, t(90)));
    assert_eq!(decided.status.phase, Failed);
    assert_eq!(decided.status.promoted_revision, "r1");
}
