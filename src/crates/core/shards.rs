//! Shards: which replica reconciles which canaries when `sluice run --shards N` runs several.
//!
//! - [`shard_of`]: the shard of a canary, a stable hash of `namespace/name` (FNV-1a, 64 bit,
//!   of the UTF-8 bytes, modulo N). The adapter passes the name up to its first dot: the
//!   waves of one canary are instances named `<name>.<wave>`, so a release stays in one shard.
//!   The function is fixed: changing it would move canaries between replicas on upgrade.
//! - [`shard_of_in`]: the same over (repo, canary) when one install reconciles several config
//!   repos (`sluice run --repos`): the repo's name, a zero byte, then `namespace/name`. The
//!   one repo of a single-repo install has the empty name and hashes as [`shard_of`], so its
//!   canaries keep their shards.
//! - [`assignment`]: the shard each live replica should hold: the live replicas sorted by
//!   identity, shard `i` to the `i mod m`-th of the `m` replicas, so no two replicas' counts
//!   differ by more than one.
//! - [`Owned`]: the canaries a replica's tick reconciles, from the shards it holds.
//! - [`act`]: what one replica does with each shard Lease as it found it: renew what it holds
//!   and is assigned, take what it is assigned and nobody holds (free or expired), release
//!   what it holds beyond its share so that its new owner can take it, and leave alone what
//!   another holds.
//!
//! The Leases only spread the work; two replicas that both believe they own a shard are kept
//! correct by git's compare-and-swap push. Pure: the adapter (`src/shards.rs`) reads the
//! Leases and measures expiry.

use std::collections::{BTreeMap, BTreeSet};

/// The shard of canary `namespace/name` among `count` (0 when `count` is 0 or 1).
pub fn shard_of(namespace: &str, name: &str, count: u32) -> u32 {
    shard_of_in("", namespace, name, count)
}

/// The shard of canary `namespace/name` of the config repo named `repo` among `count`: a
/// repo's name cannot hold a zero byte, so no two (repo, canary) pairs hash the same bytes.
/// `repo` empty (the one repo of a single-repo install) is [`shard_of`].
pub fn shard_of_in(repo: &str, namespace: &str, name: &str, count: u32) -> u32 {
    if count <= 1 {
        return 0;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let scope: &[u8] = if repo.is_empty() { &[] } else { &[0] };
    let bytes = repo
        .bytes()
        .chain(scope.iter().copied())
        .chain(namespace.bytes())
        .chain([b'/'])
        .chain(name.bytes());
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // The remainder is below `count`, a u32.
    u32::try_from(hash % u64::from(count)).unwrap_or(0)
}

/// The canaries a tick reconciles: all of them, or those of the shards held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Owned {
    /// One replica (or `--shards 1`): every canary.
    #[default]
    All,
    /// None: a replica that lost (or never won) `--leader-election`'s Lease, or could not
    /// renew it before its renew deadline.
    Nothing,
    /// The canaries whose [`shard_of_in`] (in config repo `repo`; empty: the one repo of a
    /// single-repo install) is among `held`, of `count` shards.
    Shards {
        count: u32,
        held: BTreeSet<u32>,
        repo: String,
    },
}

impl Owned {
    /// Whether canary `namespace/name` is reconciled here. The shard is that of the name up
    /// to its first dot: a wave instance `<name>.<wave>` (alive or deleted) goes with its
    /// canary, so one release stays in one shard.
    pub fn owns(&self, namespace: &str, name: &str) -> bool {
        match self {
            Owned::All => true,
            Owned::Nothing => false,
            Owned::Shards { count, held, repo } => {
                let canary = name.split('.').next().unwrap_or(name);
                held.contains(&shard_of_in(repo, namespace, canary, *count))
            }
        }
    }

    /// The same shards, for the canaries of config repo `repo` (its name in `--repos`).
    pub fn in_repo(&self, repo: &str) -> Owned {
        match self {
            Owned::All => Owned::All,
            Owned::Nothing => Owned::Nothing,
            Owned::Shards { count, held, .. } => Owned::Shards {
                count: *count,
                held: held.clone(),
                repo: repo.to_string(),
            },
        }
    }
}

/// The replica each shard is assigned to: `live` sorted and deduplicated, shard `i` to the
/// `i mod m`-th. Empty when no replica lives.
pub fn assignment(live: &[String], count: u32) -> BTreeMap<u32, String> {
    let mut members: Vec<&String> = live.iter().collect();
    members.sort();
    members.dedup();
    if members.is_empty() {
        return BTreeMap::new();
    }
    (0..count)
        .map(|i| {
            let at = usize::try_from(i).unwrap_or(0) % members.len();
            (i, members[at].clone())
        })
        .collect()
}

/// A shard Lease as a replica found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its holder; `None` when the Lease does not exist or names nobody.
    pub holder: Option<String>,
    /// Whether the holder stopped renewing it for longer than its duration.
    pub expired: bool,
}

/// What a replica does with one shard Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// It holds the shard and keeps it.
    Renew,
    /// It is assigned the shard and nobody holds it: it takes it.
    Take,
    /// It holds the shard, now assigned to another: it lets go.
    Release,
    /// Another holds it (assigned to us or not), or nobody does and it is another's.
    Leave,
}

/// What replica `me` does with each shard (index = shard), given the replicas it sees live
/// (`me` among them or not: it counts itself) and the Leases as found.
pub fn act(me: &str, live: &[String], found: &[Found]) -> Vec<Action> {
    let mut members = live.to_vec();
    members.push(me.to_string());
    let count = u32::try_from(found.len()).unwrap_or(u32::MAX);
    let assigned = assignment(&members, count);
    found
        .iter()
        .enumerate()
        .map(|(i, lease)| {
            let mine = u32::try_from(i)
                .ok()
                .and_then(|i| assigned.get(&i))
                .is_some_and(|owner| owner == me);
            let held_by_me = lease.holder.as_deref() == Some(me);
            let free = lease.holder.is_none() || lease.expired;
            match (mine, held_by_me) {
                (true, true) => Action::Renew,
                (false, true) => Action::Release,
                (true, false) if free => Action::Take,
                _ => Action::Leave,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("r{i}")).collect()
    }

    #[test]
    fn the_hash_is_fnv1a_of_namespace_slash_name() {
        // FNV-1a 64 of "" is the offset basis; of "a" a published test vector.
        let fnv = |text: &str| {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in text.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            h
        };
        assert_eq!(fnv("a"), 0xaf63_dc4c_8601_ec8c);
        for (ns, name) in [("shop", "web"), ("prod", "podinfo"), ("a", "b.c")] {
            let want = fnv(&format!("{ns}/{name}")) % 7;
            assert_eq!(u64::from(shard_of(ns, name, 7)), want);
        }
        // Fixed values: a change here moves canaries between replicas on upgrade.
        assert_eq!(shard_of("shop", "web", 16), (fnv("shop/web") % 16) as u32);
        assert_eq!(shard_of("shop", "web", 1), 0);
        assert_eq!(shard_of("shop", "web", 0), 0);
    }

    #[test]
    fn a_repo_scopes_the_hash_and_the_unnamed_repo_keeps_the_single_repo_shards() {
        let fnv = |bytes: &[u8]| {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in bytes {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            h
        };
        for count in [2, 7, 16, 1024] {
            for (ns, name) in [("shop", "web"), ("prod", "podinfo")] {
                assert_eq!(shard_of_in("", ns, name, count), shard_of(ns, name, count));
                let want = fnv(format!("team-a\0{ns}/{name}").as_bytes()) % u64::from(count);
                assert_eq!(u64::from(shard_of_in("team-a", ns, name, count)), want);
            }
        }
        // Same canary, two repos: hashed apart (not always another shard, but here at 1024).
        assert_ne!(
            shard_of_in("team-a", "shop", "web", 1024),
            shard_of_in("team-b", "shop", "web", 1024)
        );
        let held: BTreeSet<u32> = [shard_of_in("team-a", "shop", "web", 1024)].into();
        let owned = Owned::Shards {
            count: 1024,
            held,
            repo: String::new(),
        };
        assert!(owned.in_repo("team-a").owns("shop", "web.eu"));
        assert!(!owned.in_repo("team-b").owns("shop", "web"));
        assert_eq!(Owned::All.in_repo("team-b"), Owned::All);
        assert!(!Owned::Nothing.in_repo("team-a").owns("shop", "web"));
    }

    #[test]
    fn assignment_spreads_within_one_in_identity_order() {
        let a = assignment(&["b".into(), "a".into(), "c".into(), "a".into()], 7);
        let owners: Vec<&str> = a.values().map(String::as_str).collect();
        assert_eq!(owners, ["a", "b", "c", "a", "b", "c", "a"]);
        assert!(assignment(&[], 3).is_empty());
    }

    #[test]
    fn a_replica_takes_free_renews_its_own_and_releases_beyond_its_share() {
        let free = Found {
            holder: None,
            expired: false,
        };
        let held = |who: &str, expired| Found {
            holder: Some(who.into()),
            expired,
        };
        // r0 alone held every shard; r1 joined: r0 lets go of shard 1, r1 takes it once free.
        let found = [held("r0", false), held("r0", false), held("r0", false)];
        assert_eq!(
            act("r0", &names(2), &found),
            [Action::Renew, Action::Release, Action::Renew]
        );
        assert_eq!(
            act("r1", &names(2), &found),
            [Action::Leave, Action::Leave, Action::Leave]
        );
        let found = [held("r0", false), free.clone(), held("r0", false)];
        assert_eq!(act("r1", &names(2), &found)[1], Action::Take);
        // r0 died: its Lease expired, r1 alone takes them all.
        let found = [held("r0", true), held("r1", false), held("r0", true)];
        assert_eq!(
            act("r1", &["r1".into()], &found),
            [Action::Take, Action::Renew, Action::Take]
        );
        // A live holder keeps a shard assigned to another until it lets go.
        let found = [held("r2", false)];
        assert_eq!(act("r0", &names(3), &found), [Action::Leave]);
    }

    /// A world of replicas sharing shard Leases with the API server's compare-and-swap: a
    /// replica's actions apply only to the Lease as it read it.
    #[derive(Debug, Clone)]
    struct World {
        holders: Vec<Option<String>>,
        /// Per shard, whether its holder stopped renewing long enough ago.
        stale: Vec<bool>,
        alive: Vec<bool>,
        /// The shards each replica believes it holds (what it renewed or took last).
        believes: Vec<Vec<usize>>,
    }

    impl World {
        fn live(&self) -> Vec<String> {
            names(self.alive.len())
                .into_iter()
                .zip(&self.alive)
                .filter(|(_, a)| **a)
                .map(|(n, _)| n)
                .collect()
        }

        /// Replica `r` syncs once: reads every Lease, acts on each.
        fn sync(&mut self, r: usize) {
            let me = format!("r{r}");
            let found: Vec<Found> = self
                .holders
                .iter()
                .zip(&self.stale)
                .map(|(h, s)| Found {
                    holder: h.clone(),
                    expired: *s,
                })
                .collect();
            self.believes[r].clear();
            for (i, action) in act(&me, &self.live(), &found).into_iter().enumerate() {
                match action {
                    Action::Renew | Action::Take => {
                        self.holders[i] = Some(me.clone());
                        self.stale[i] = false;
                        self.believes[r].push(i);
                    }
                    Action::Release => self.holders[i] = None,
                    Action::Leave => {}
                }
            }
        }

        /// Time passes past the lease duration: the Leases of dead replicas expire.
        fn expire(&mut self) {
            for (i, h) in self.holders.iter().enumerate() {
                if let Some(h) = h {
                    let r: usize = h[1..].parse().unwrap();
                    if !self.alive[r] {
                        self.stale[i] = true;
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn leases_stay_exclusive_and_settle_evenly(
            replicas in 1usize..6,
            shards in 1usize..12,
            events in proptest::collection::vec((0usize..6, 0u8..10), 0..60),
        ) {
            let mut world = World {
                holders: vec![None; shards],
                stale: vec![false; shards],
                alive: vec![true; replicas],
                believes: vec![Vec::new(); replicas],
            };
            for (who, what) in events {
                let r = who % replicas;
                match what {
                    // A replica dies (one stays alive) or comes back.
                    0 if world.alive.iter().filter(|a| **a).count() > 1 => {
                        world.alive[r] = false;
                        world.believes[r].clear();
                    }
                    1 => world.alive[r] = true,
                    2 => world.expire(),
                    _ if world.alive[r] => world.sync(r),
                    _ => {}
                }
                // Every holder is a replica.
                for h in world.holders.iter().flatten() {
                    prop_assert!(h[1..].parse::<usize>().unwrap() < replicas);
                }
                // No shard is believed held by two live replicas at once.
                let mut believed = vec![0; shards];
                for held in &world.believes {
                    for &i in held {
                        believed[i] += 1;
                    }
                }
                prop_assert!(believed.iter().all(|n| *n <= 1), "{:?}", world.believes);
            }
            // Settling: the dead expire, every live replica syncs twice.
            world.expire();
            for _ in 0..2 {
                for r in 0..replicas {
                    if world.alive[r] {
                        world.sync(r);
                    }
                }
            }
            let live = world.live();
            let mut counts: BTreeMap<String, usize> = live.iter().map(|l| (l.clone(), 0)).collect();
            for h in &world.holders {
                let h = h.as_ref();
                prop_assert!(h.is_some(), "every shard held: {:?}", world.holders);
                let h = h.unwrap();
                prop_assert!(live.contains(h), "held by a live replica: {h}");
                *counts.get_mut(h).unwrap() += 1;
            }
            let (min, max) = (counts.values().min().unwrap(), counts.values().max().unwrap());
            prop_assert!(max - min <= 1, "spread within one: {counts:?}");
        }
    }
}
