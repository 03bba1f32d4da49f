//! `sluice run --shards N` as processes: replicas against the HTTP-level fake of the Kubernetes
//! API (`support/kube.rs`, Leases with real resourceVersion semantics) and one git remote,
//! each replica on a stepped clock (`SLUICE_CLOCK=stepped`). Waits are bounded by what the
//! remote and the Leases show, looked at every 100 ms; the Leases' duration is real time
//! (2 s here), as in production.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::fleet::{self, assert_each_step_once, wait_all};
use crate::support::kube::{kubeconfig, FakeKubeApi};
use crate::support::{git, http, human_clone, seeded_remote, sluice_daemon, str_pairs, Daemon};
use crate::support::{run_sluice_env, DaemonBuilder, GitDaemon};

const LEASE_NS: &str = "sluice-system";
/// Far above what a rollout of the quick fleet takes on a loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(240);

/// `sluice run --shards <shards>` as replica `who`, its Leases at the API of `kubeconfig`.
fn replica(
    builder: DaemonBuilder,
    who: &str,
    kubeconfig: &Path,
    shards: u32,
) -> DaemonBuilder {
    builder
        .stepped()
        .args(["--shards", &shards.to_string(), "--lease-duration", "2s"])
        .env("POD_NAME", who)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", "/nonexistent")
}

/// Each shard's holder, from the Leases the fake holds.
fn holders(api: &FakeKubeApi, shards: u32) -> BTreeMap<u32, String> {
    (0..shards)
        .filter_map(|i| {
            let lease = api.object("leases", LEASE_NS, &format!("sluice-shard-{i}"))?;
            Some((i, lease["spec"]["holderIdentity"].as_str()?.to_string()))
        })
        .collect()
}

#[test]
fn run_with_shards_refuses_to_start_without_kubernetes_access() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &str_pairs(&fleet::files(1, "v1")));
    let (code, _, err) = run_sluice_env(
        &[
            "run",
            "--repo",
            &bare.display().to_string(),
            "--workdir",
            &tmp.path().join("w").display().to_string(),
            "--listen",
            "127.0.0.1:0",
            "--probe-listen",
            "127.0.0.1:0",
            "--shards",
            "3",
        ],
        &[
            ("KUBECONFIG", "/nonexistent/kubeconfig"),
            ("HOME", "/nonexistent"),
            ("KUBERNETES_SERVICE_HOST", ""),
        ],
    );
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("--shards 3 needs Kubernetes access"), "{err}");
    assert!(err.contains("KUBECONFIG"), "{err}");
}

/// Two replicas each forced to own every shard (each has an API of its own, so each sees
/// itself alone) roll out one fleet: git's compare-and-swap keeps them correct, the loser of a
/// push decides again on the new head, and each step is committed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_forced_to_own_the_same_shards_commit_each_step_once_fake_kube_api() {
    const N: usize = 8;
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &str_pairs(&fleet::files(N, "v1")));
    let apis = [FakeKubeApi::start().await, FakeKubeApi::start().await];
    let daemons: Vec<Daemon> = ["a", "b"]
        .iter()
        .zip(&apis)
        .map(|(who, api)| {
            let dir = tmp.path().join(format!("k-{who}"));
            std::fs::create_dir_all(&dir).unwrap();
            let config = kubeconfig(&api.url, &dir);
            let work = tmp.path().join(format!("w-{who}"));
            replica(sluice_daemon(&bare, &work), who, &config, 4).start()
        })
        .collect();
    let logs = || daemons.iter().map(Daemon::log).collect::<Vec<_>>().join("\n----\n");
    wait_all(&bare, N, LIMIT, "initialized", |s| s["phase"] == "Initialized", logs);
    // Each replica holds all four shards, as its own API tells it; /readyz says so.
    for (who, api) in ["a", "b"].iter().zip(&apis) {
        assert!(holders(api, 4).values().all(|h| h == who), "{:?}", holders(api, 4));
    }
    let (code, ready) = http(daemons[0].probes(), "GET", "/readyz", &[], b"");
    assert_eq!(code, 200, "{ready}");
    assert!(ready.contains("shard 3 (sluice-shard-3): a\n"), "{ready}");

    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    fleet::bump(&human, N, "v2");
    wait_all(&bare, N, LIMIT, "rolled out", fleet::succeeded("v2"), logs);
    assert_each_step_once(&bare, N, "v2");
    let retries: usize = daemons
        .iter()
        .map(|d| d.log().matches("Push rejected").count())
        .sum();
    eprintln!("push rejections decided again: {retries}");
}
