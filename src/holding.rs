//! What this replica holds right now: a value shared between the task that renews its Leases
//! ([`crate::renewal`]) and the ticks that read it, owned by the daemon and passed in (two
//! daemons in one process never see each other's).
//!
//! The renewal task records when each shard (or the `--leader-election` Lease) was last taken
//! or renewed; a tick asks [`Holding::now`] at its start and again before it commits, and a
//! shard whose last renewal is older than the renew deadline is no longer counted, whether or
//! not the task has run since: a replica cut off from the API stops acting for its shards by
//! itself. Without `--shards` or `--leader-election` the holding is fixed ([`Holding::all`]).
//! It must not talk to the API itself: it only keeps what the renewal task found.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::core::shards::Owned;
use crate::lease_timing::Renewal;

/// The canaries this replica may decide for, now or at a given instant.
#[derive(Debug, Clone)]
pub struct Holding {
    source: Source,
    /// The config repo whose canaries are asked about (`--repos`); empty: the one repo.
    repo: String,
}

#[derive(Debug, Clone)]
enum Source {
    /// Always the same (one replica, one-shot commands, tests).
    Fixed(Owned),
    /// Kept by a renewal task.
    Live(Arc<Mutex<Held>>),
}

/// What the renewal task last recorded.
#[derive(Debug)]
struct Held {
    renewal: Renewal,
    leases: Leases,
}

#[derive(Debug)]
enum Leases {
    /// `--leader-election`: when the Lease was last taken or renewed (`None`: another leads).
    Leader(Option<Instant>),
    /// `--shards N`: each held shard and when it was last taken or renewed.
    Shards {
        count: u32,
        held: BTreeMap<u32, Instant>,
    },
}

impl From<Owned> for Holding {
    fn from(owned: Owned) -> Holding {
        Holding {
            source: Source::Fixed(owned),
            repo: String::new(),
        }
    }
}

impl Holding {
    /// Every canary, always.
    pub fn all() -> Holding {
        Owned::All.into()
    }

    /// `--leader-election`: nothing until the renewal task records a take.
    pub fn leader(renewal: Renewal) -> Holding {
        Holding::live(renewal, Leases::Leader(None))
    }

    /// `--shards count`: no shard until the renewal task records one.
    pub fn shards(count: u32, renewal: Renewal) -> Holding {
        let held = BTreeMap::new();
        Holding::live(renewal, Leases::Shards { count, held })
    }

    fn live(renewal: Renewal, leases: Leases) -> Holding {
        Holding {
            source: Source::Live(Arc::new(Mutex::new(Held { renewal, leases }))),
            repo: String::new(),
        }
    }

    /// The same holding, asked about the canaries of config repo `repo` (its `--repos` name).
    pub fn in_repo(&self, repo: &str) -> Holding {
        Holding {
            source: self.source.clone(),
            repo: repo.to_string(),
        }
    }

    /// The canaries held now, by this replica's monotonic clock.
    pub fn now(&self) -> Owned {
        self.at(Instant::now())
    }

    /// The canaries held at `real`: what was taken or renewed less than a renew deadline
    /// before it.
    pub fn at(&self, real: Instant) -> Owned {
        let owned = match &self.source {
            Source::Fixed(owned) => owned.clone(),
            Source::Live(held) => {
                let held = held.lock().unwrap_or_else(PoisonError::into_inner);
                let holds = |at: &Instant| held.renewal.holds(*at, real);
                match &held.leases {
                    Leases::Leader(Some(at)) if holds(at) => Owned::All,
                    Leases::Leader(_) => Owned::Nothing,
                    Leases::Shards {
                        count,
                        held: shards,
                    } => Owned::Shards {
                        count: *count,
                        held: shards
                            .iter()
                            .filter(|(_, at)| holds(at))
                            .map(|(i, _)| *i)
                            .collect::<BTreeSet<u32>>(),
                        repo: String::new(),
                    },
                }
            }
        };
        owned.in_repo(&self.repo)
    }

    /// The renewal task took or renewed the leader Lease at `at` (`None`: another leads).
    pub fn set_leader(&self, at: Option<Instant>) {
        self.set(|leases| {
            if let Leases::Leader(held) = leases {
                *held = at;
            }
        });
    }

    /// The renewal task holds these shards, each taken or renewed at its instant.
    pub fn set_shards(&self, now_held: BTreeMap<u32, Instant>) {
        self.set(|leases| {
            if let Leases::Shards { held, .. } = leases {
                *held = now_held;
            }
        });
    }

    fn set(&self, change: impl FnOnce(&mut Leases)) {
        if let Source::Live(held) = &self.source {
            change(&mut held.lock().unwrap_or_else(PoisonError::into_inner).leases);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_shard_counts_until_its_renew_deadline_on_the_stepped_instant() {
        let t0 = Instant::now();
        // 15 s leases: renew deadline 10 s.
        let holding = Holding::shards(4, Renewal::new(secs(15)));
        assert_eq!(
            holding.at(t0),
            Owned::Shards {
                count: 4,
                held: BTreeSet::new(),
                repo: String::new()
            }
        );
        holding.set_shards([(1, t0), (3, t0 + secs(4))].into());
        let held = |at| match holding.in_repo("team-a").at(at) {
            Owned::Shards { held, repo, .. } => {
                assert_eq!(repo, "team-a");
                held.into_iter().collect::<Vec<_>>()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(held(t0 + secs(9)), [1, 3]);
        assert_eq!(
            held(t0 + secs(10)),
            [3],
            "shard 1 renewed at 0 s: gone at 10 s"
        );
        assert_eq!(held(t0 + secs(14)), Vec::<u32>::new());
        // A renewal at 12 s brings shard 1 back; the clone the tick holds sees it.
        let tick = holding.clone();
        holding.set_shards([(1, t0 + secs(12))].into());
        assert_eq!(held(t0 + secs(21)), [1]);
        let one: BTreeSet<u32> = [1].into();
        assert!(matches!(tick.at(t0 + secs(21)), Owned::Shards { held, .. } if held == one));
        assert_eq!(held(t0 + secs(22)), Vec::<u32>::new());
    }

    #[test]
    fn the_leader_acts_until_its_renew_deadline_and_not_while_another_leads() {
        let t0 = Instant::now();
        let holding = Holding::leader(Renewal::new(secs(15)));
        assert_eq!(holding.at(t0), Owned::Nothing, "not won yet");
        holding.set_leader(Some(t0));
        assert_eq!(holding.at(t0 + secs(9)), Owned::All);
        assert_eq!(
            holding.at(t0 + secs(10)),
            Owned::Nothing,
            "renew deadline passed"
        );
        holding.set_leader(Some(t0 + secs(10)));
        assert_eq!(holding.at(t0 + secs(11)), Owned::All);
        holding.set_leader(None);
        assert_eq!(holding.at(t0 + secs(11)), Owned::Nothing, "another leads");
        assert_eq!(Holding::all().at(t0 + secs(1000)), Owned::All);
    }
}
