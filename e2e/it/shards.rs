//! `sluice run --shards N` against the HTTP-level fake of the Kubernetes API
//! (`support/kube.rs`, Leases with the API server's resourceVersion semantics):
//!
//! - the shard Leases as three replicas' adapters take, spread, release and take over, with the
//!   replicas' monotonic time given by the test (no wait on the wall clock);
//! - a replica refuses to start with shards and no Kubernetes access;
//! - two daemons forced to own the same shards (each with its own API, so each sees itself
//!   alone) roll out a fleet with every step committed once: git's compare-and-swap, not the
//!   Leases, keeps them correct;
//! - three daemons in their own network namespaces (loopback processes where `ip netns` is not
//!   available): one SIGKILLed, one cut off, and every rollout still ends Succeeded with each
//!   step once, the shards moved (`shards_run.rs`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use sluice::core::shards::Owned;
use sluice::shards::{ShardConfig, Shards};

use crate::support::kube::FakeKubeApi;

const NS: &str = "sluice-system";
const DURATION: Duration = Duration::from_secs(15);

fn replica(api: &FakeKubeApi, who: &str, count: u32) -> Shards {
    Shards::new(
        api.client(),
        ShardConfig {
            namespace: NS.into(),
            name: "sluice".into(),
            identity: who.into(),
            count,
            duration: DURATION,
        },
    )
}

/// Each shard's holder as the Leases say.
fn holders(api: &FakeKubeApi, count: u32) -> BTreeMap<u32, String> {
    (0..count)
        .filter_map(|i| {
            let lease = api.object("leases", NS, &format!("sluice-shard-{i}"))?;
            let holder = lease["spec"]["holderIdentity"].as_str()?.to_string();
            Some((i, holder))
        })
        .collect()
}

fn held(owned: &Owned) -> Vec<u32> {
    match owned {
        Owned::All | Owned::Nothing => panic!("a sharded replica owns its shards: {owned:?}"),
        Owned::Shards { held, .. } => held.iter().copied().collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_leases_spread_evenly_move_on_join_and_are_taken_over_after_a_death_fake_kube_api() {
    let api = FakeKubeApi::start().await;
    let (t0, now) = (Instant::now(), Timestamp::now());
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut a = replica(&api, "a", 7);
    let mut b = replica(&api, "b", 7);
    let mut c = replica(&api, "c", 7);

    // a alone takes every shard.
    a.sync(now, at(0)).await.unwrap();
    assert_eq!(held(&a.owned(at(0))), (0..7).collect::<Vec<_>>());
    // b and c join: a lets go of what is theirs, they take it once free.
    b.sync(now, at(1)).await.unwrap();
    c.sync(now, at(1)).await.unwrap();
    assert!(held(&b.owned(at(1))).is_empty(), "a still holds them");
    a.sync(now, at(2)).await.unwrap();
    b.sync(now, at(2)).await.unwrap();
    c.sync(now, at(2)).await.unwrap();
    let after_join = holders(&api, 7);
    let count = |who: &str| after_join.values().filter(|h| *h == who).count();
    assert_eq!(
        (count("a"), count("b"), count("c")),
        (3, 2, 2),
        "{after_join:?}"
    );
    assert_eq!(held(&b.owned(at(2))), vec![1, 4]);
    // Every replica's view: each shard owned by exactly one.
    let mut owners = BTreeMap::new();
    for (who, r) in [("a", &a), ("b", &b), ("c", &c)] {
        for i in held(&r.owned(at(2))) {
            assert_eq!(owners.insert(i, who), None, "shard {i} owned twice");
        }
    }
    assert_eq!(owners.len(), 7);

    // c dies (its last renewal at 2 s, which a and b first see at 5 s). For a lease duration
    // from then nobody takes its shards; after it, a and b do.
    for s in [5, 10, 19] {
        a.sync(now, at(s)).await.unwrap();
        b.sync(now, at(s)).await.unwrap();
    }
    assert_eq!(holders(&api, 7).values().filter(|h| *h == "c").count(), 2);
    for s in [21, 22] {
        a.sync(now, at(s)).await.unwrap();
        b.sync(now, at(s)).await.unwrap();
    }
    let after_death = holders(&api, 7);
    assert!(
        after_death.values().all(|h| h == "a" || h == "b"),
        "{after_death:?}"
    );
    assert_eq!(after_death.values().filter(|h| *h == "a").count(), 4);
    assert_eq!(after_death.len(), 7);
    let moved = api.object("leases", NS, "sluice-shard-2").unwrap();
    assert!(
        moved["spec"]["leaseTransitions"].as_i64().unwrap() >= 2,
        "{moved}"
    );
    // c cannot renew what it lost; it stops counting a shard once its renew deadline (two
    // thirds of the 15 s lease) passed, before the others could take it (a whole lease).
    assert!(held(&c.owned(at(12))).is_empty());
    assert_eq!(
        held(&c.owned(at(11))),
        vec![2, 5],
        "renewed at 2 s: c's until 12 s"
    );
}

/// The fake answers as the API server: a second create of one name is 409 AlreadyExists, a
/// replace at a stale resourceVersion 409 Conflict; the adapter reads a lost write as "not
/// mine" (the holder stays the winner).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_lease_write_is_refused_with_409_and_the_loser_holds_nothing_fake_kube_api() {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use kube::api::{Api, PostParams};
    let api = FakeKubeApi::start().await;
    let leases: Api<Lease> = Api::namespaced(api.client(), NS);
    let lease = |holder: &str| Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("sluice-shard-0".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
    };
    let first = leases
        .create(&PostParams::default(), &lease("x"))
        .await
        .unwrap();
    let again = leases.create(&PostParams::default(), &lease("y")).await;
    assert!(
        matches!(again, Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists")
    );
    let mut newer = first.clone();
    newer.spec = lease("x2").spec;
    leases
        .replace("sluice-shard-0", &PostParams::default(), &newer)
        .await
        .unwrap();
    let stale = leases
        .replace("sluice-shard-0", &PostParams::default(), &first)
        .await;
    assert!(matches!(stale, Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "Conflict"));

    // A replica that sees x2's live Lease leaves it; x2 stays the holder.
    let (t0, now) = (Instant::now(), Timestamp::now());
    let mut a = replica(&api, "a", 1);
    a.sync(now, t0).await.unwrap();
    assert!(held(&a.owned(t0)).is_empty());
    assert_eq!(holders(&api, 1)[&0], "x2");
    // x2 never renews: after a lease duration of seeing it unchanged, a takes it.
    a.sync(now, t0 + DURATION).await.unwrap();
    assert_eq!(held(&a.owned(t0 + DURATION)), vec![0]);
}
