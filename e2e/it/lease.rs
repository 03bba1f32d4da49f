//! Leader election against the HTTP-level fake of the Kubernetes API (`support/kube.rs`: get,
//! create, replace with the resourceVersion compare-and-swap, as the API server does).

use std::time::Duration;

use jiff::Timestamp;
use sluice::leadership::{acquire_or_renew, Leadership, LeaseConfig};

use crate::support::kube::FakeKubeApi;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_replica_leads_and_an_expired_lease_changes_hands_fake_kube_api() {
    let api = FakeKubeApi::start().await;
    let client = api.client();
    let cfg = |who: &str| LeaseConfig {
        namespace: "sluice-system".into(),
        name: "sluice".into(),
        identity: who.into(),
        duration: Duration::from_secs(15),
    };
    let t0 = Timestamp::now();
    assert_eq!(
        acquire_or_renew(&client, &cfg("a"), t0).await,
        Ok(Leadership::Leader)
    );
    assert_eq!(
        acquire_or_renew(&client, &cfg("b"), t0 + Duration::from_secs(1)).await,
        Ok(Leadership::Follower { holder: "a".into() })
    );
    assert_eq!(
        acquire_or_renew(&client, &cfg("a"), t0 + Duration::from_secs(5)).await,
        Ok(Leadership::Leader),
        "renewed"
    );
    // a stops renewing; after the lease duration b takes over.
    assert_eq!(
        acquire_or_renew(&client, &cfg("b"), t0 + Duration::from_secs(30)).await,
        Ok(Leadership::Leader)
    );
    assert_eq!(
        acquire_or_renew(&client, &cfg("a"), t0 + Duration::from_secs(31)).await,
        Ok(Leadership::Follower { holder: "b".into() })
    );
    let lease = api.object("leases", "sluice-system", "sluice").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
}
