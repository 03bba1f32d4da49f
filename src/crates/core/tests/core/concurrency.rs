//! `maxConcurrentCanaries`: the order in which waiting canaries start (priority, then first
//! seen, then namespace/name), the reason a waiting one gives, and, over generated fleets
//! and triggers, that no more than the limits ever progress and every wait ends.

use std::collections::BTreeMap;

use proptest::prelude::*;

use sluice_core::concurrency::{admit, admit_tick, standing, Admission, Entry, Limits, Standing};
use sluice_core::decide::{decide, Action};
use sluice_core::model::Canary;
use sluice_core::observe::{Facts, Observations};
use sluice_core::status::{Phase, Status};
use sluice_core::verdict::{verdict, Basis};
use sluice_core::waves::Release;

use crate::builders::{canary, t};

fn entry(id: &str, standing: Standing, priority: i64, first_seen: i64) -> Entry {
    Entry {
        id: id.to_string(),
        namespace: id.split('/').next().unwrap_or_default().to_string(),
        standing,
        priority,
        first_seen: t(first_seen),
    }
}

/// A canary initialized on revision `r1`.
fn initialized() -> (Canary<()>, Status) {
    let c = canary().build();
    let s = decide(&c, None, &Observations::revision("r1"), t(0)).status;
    assert_eq!(s.phase, Phase::Initialized);
    (c, s)
}

fn limit(n: u32) -> Limits {
    Limits {
        repo: Some(n),
        namespaces: BTreeMap::new(),
    }
}

/// The ids `admit` lets start, in entry order.
fn going(limits: &Limits, entries: &[Entry]) -> Vec<String> {
    admit(limits, entries)
        .iter()
        .zip(entries)
        .filter(|(a, e)| **a == Admission::Go && e.standing == Standing::WantsToStart)
        .map(|(_, e)| e.id.clone())
        .collect()
}

#[test]
fn higher_priority_starts_first_then_first_seen_then_name() {
    let entries = [
        entry("prod/a", Standing::WantsToStart, 0, 10),
        entry("prod/b", Standing::WantsToStart, 5, 20),
        entry("prod/c", Standing::WantsToStart, 0, 5),
        entry("prod/d", Standing::WantsToStart, 0, 5),
    ];
    // b by priority, then c (first seen at 5, before d by name).
    assert_eq!(going(&limit(2), &entries), ["prod/b", "prod/c"]);
    assert_eq!(going(&limit(3), &entries), ["prod/b", "prod/c", "prod/d"]);
    assert_eq!(going(&limit(4), &entries).len(), 4);
}

#[test]
fn a_full_limit_says_who_progresses() {
    let standings = [
        ("prod/b", Standing::Progressing),
        ("prod/a", Standing::Progressing),
        ("prod/c", Standing::WantsToStart),
        ("prod/d", Standing::Other),
    ];
    // Priority does not matter once the limit is full.
    let entries: Vec<Entry> = standings.map(|(id, s)| entry(id, s, 9, 0)).to_vec();
    let admitted = admit(&limit(2), &entries);
    assert_eq!(
        admitted,
        [
            Admission::Go,
            Admission::Go,
            Admission::Wait {
                reason: "waiting: 2 of 2 progressing: prod/a, prod/b".to_string()
            },
            Admission::Go,
        ]
    );
}

#[test]
fn a_namespace_limit_holds_only_its_namespace() {
    let limits = Limits {
        repo: Some(3),
        namespaces: BTreeMap::from([("prod".to_string(), 1)]),
    };
    let entries = [
        entry("prod/a", Standing::Progressing, 0, 0),
        // First seen before the others: it is weighed first, and its namespace is full.
        entry("prod/b", Standing::WantsToStart, 0, 0),
        entry("dev/c", Standing::WantsToStart, 0, 5),
        entry("dev/d", Standing::WantsToStart, 0, 5),
        entry("dev/e", Standing::WantsToStart, 0, 5),
    ];
    let admitted = admit(&limits, &entries);
    assert_eq!(
        admitted[1],
        Admission::Wait {
            reason: "waiting: 1 of 1 progressing in namespace prod: prod/a".to_string()
        }
    );
    assert_eq!(going(&limits, &entries), ["dev/c", "dev/d"]);
    assert_eq!(
        admitted[4],
        Admission::Wait {
            reason: "waiting: 3 of 3 progressing: dev/c, dev/d, prod/a".to_string()
        }
    );
}

#[test]
fn no_limit_lets_every_canary_go() {
    let entries: Vec<Entry> = (0..5)
        .map(|i| entry(&format!("prod/c{i}"), Standing::WantsToStart, 0, 0))
        .collect();
    assert_eq!(going(&Limits::default(), &entries).len(), 5);
}

#[test]
fn standing_reads_the_status_against_the_source_revision() {
    let (_, mut s) = initialized();
    s.phase = Phase::Succeeded;
    assert_eq!(standing(Some(&s), "r1"), Standing::Other);
    assert_eq!(standing(Some(&s), "r2"), Standing::WantsToStart);
    s.phase = Phase::Progressing;
    assert_eq!(standing(Some(&s), "r2"), Standing::Progressing);
    s.phase = Phase::Failed;
    s.canary_revision = Some("r2".into());
    assert_eq!(standing(Some(&s), "r2"), Standing::Other);
    assert_eq!(standing(Some(&s), "r3"), Standing::WantsToStart);
    assert_eq!(standing(None, "r3"), Standing::Other);
}

#[test]
fn a_wave_the_release_holds_takes_no_slot() {
    let (c, s) = initialized();
    let held = Release::Hold {
        reason: "waiting for wave eu".into(),
    };
    let items = [(&c, Some(&s), "r2")];
    assert_eq!(
        admit_tick(&limit(1), &items, &[held], t(0)),
        [Admission::Go]
    );
}

#[test]
fn a_queued_canary_holds_and_records_when_it_was_first_seen() {
    let (c, s) = initialized();
    let reason = "waiting: 2 of 2 progressing: prod/a, prod/b".to_string();
    let facts = Facts {
        queued: Some(reason.clone()),
        ..Facts::default()
    };
    let obs = Observations::revision("r2");
    let first = verdict(&c, Some(&s), &obs, &facts, t(100));
    assert_eq!(first.decision.action, Action::Queued);
    assert_eq!(
        first.basis,
        Basis::Queued {
            reason: reason.clone()
        }
    );
    assert_eq!(first.decision.status.phase, s.phase);
    assert_eq!(first.decision.status.message, reason);
    assert_eq!(first.decision.status.waiting_since, Some(t(100)));
    // The same wait later commits nothing and keeps when it was first seen.
    let again = verdict(&c, Some(&first.decision.status), &obs, &facts, t(200));
    assert!(!again.decision.commits());
    // Another reason is committed, still first seen at 100.
    let other = Facts {
        queued: Some("waiting: 2 of 2 progressing: prod/a, prod/c".into()),
        ..Facts::default()
    };
    let moved = verdict(&c, Some(&first.decision.status), &obs, &other, t(300));
    assert_eq!(moved.decision.status.waiting_since, Some(t(100)));
    // Admitted: it starts, and the wait is over.
    let started = verdict(
        &c,
        Some(&first.decision.status),
        &obs,
        &Facts::default(),
        t(400),
    );
    assert_ne!(started.decision.action, Action::Queued);
    assert_eq!(started.decision.status.waiting_since, None);
}

/// A fleet stepped tick by tick: a canary that goes progresses for its length of ticks, then
/// rests; a trigger gives a resting one a new revision.
#[derive(Debug, Clone)]
struct Fleet {
    namespaces: Vec<usize>,
    priorities: Vec<i64>,
    lengths: Vec<u8>,
    /// Per tick, the canaries that get a new revision.
    triggers: Vec<Vec<usize>>,
}

fn fleet() -> impl Strategy<Value = (Fleet, u32, Option<u32>)> {
    (1usize..12).prop_flat_map(|n| {
        (
            (
                prop::collection::vec(0usize..3, n),
                prop::collection::vec(-2i64..3, n),
                prop::collection::vec(1u8..5, n),
                prop::collection::vec(prop::collection::vec(0..n, 0..4), 1..8),
            )
                .prop_map(|(namespaces, priorities, lengths, triggers)| Fleet {
                    namespaces,
                    priorities,
                    lengths,
                    triggers,
                }),
            1u32..4,
            prop::option::of(1u32..3),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn never_more_than_the_limits_progress_and_every_wait_ends(
        (fleet, max, ns0) in fleet()
    ) {
        let n = fleet.namespaces.len();
        let limits = Limits {
            repo: Some(max),
            namespaces: ns0.map(|m| BTreeMap::from([("ns0".to_string(), m)])).unwrap_or_default(),
        };
        // Ticks left progressing (0: at rest), whether a revision waits, since when.
        let mut left = vec![0u8; n];
        let mut wants = vec![false; n];
        let mut since: Vec<Option<i64>> = vec![None; n];
        let bound = fleet.triggers.len() + 5 * n + 5;
        for tick in 0..bound {
            for &i in fleet.triggers.get(tick).into_iter().flatten() {
                wants[i] = true;
            }
            let entries: Vec<Entry> = (0..n)
                .map(|i| Entry {
                    id: format!("ns{}/c{i:02}", fleet.namespaces[i]),
                    namespace: format!("ns{}", fleet.namespaces[i]),
                    standing: if left[i] > 0 {
                        Standing::Progressing
                    } else if wants[i] {
                        Standing::WantsToStart
                    } else {
                        Standing::Other
                    },
                    priority: fleet.priorities[i],
                    first_seen: t(since[i].unwrap_or(tick as i64)),
                })
                .collect();
            let admitted = admit(&limits, &entries);
            for i in 0..n {
                match (&admitted[i], entries[i].standing) {
                    (Admission::Go, Standing::WantsToStart) => {
                        left[i] = fleet.lengths[i];
                        wants[i] = false;
                        since[i] = None;
                    }
                    (Admission::Wait { reason }, Standing::WantsToStart) => {
                        prop_assert!(reason.starts_with("waiting: "), "{reason}");
                        since[i].get_or_insert(tick as i64);
                    }
                    (Admission::Wait { .. }, s) => {
                        prop_assert!(false, "{s:?} told to wait");
                    }
                    (Admission::Go, _) => {}
                }
            }
            let running: Vec<usize> = (0..n).filter(|&i| left[i] > 0).collect();
            prop_assert!(running.len() as u32 <= max, "{} > {max} at tick {tick}", running.len());
            if let Some(m) = ns0 {
                let in_ns0 = running.iter().filter(|&&i| fleet.namespaces[i] == 0).count();
                prop_assert!(in_ns0 as u32 <= m);
            }
            // No slot stays free while someone waits for it.
            let free = (running.len() as u32) < max;
            let blocked = (0..n).any(|i| {
                wants[i]
                    && left[i] == 0
                    && ns0.is_none_or(|m| {
                        fleet.namespaces[i] != 0
                            || (running.iter().filter(|&&j| fleet.namespaces[j] == 0).count() as u32) < m
                    })
            });
            prop_assert!(!(free && blocked), "a slot is free and a canary waits at tick {tick}");
            for l in &mut left {
                *l = l.saturating_sub(1);
            }
        }
        prop_assert!(wants.iter().all(|w| !w), "a wait never ended: {wants:?}");
    }
}
