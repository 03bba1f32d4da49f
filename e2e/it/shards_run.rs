//! `sluice run --shards N` as processes: replicas against the HTTP-level fake of the Kubernetes
//! API (`support/kube.rs`, Leases with real resourceVersion semantics) and one git remote,
//! each replica on a stepped clock (`SLUICE_CLOCK=stepped`). Waits are bounded by what the
//! remote and the Leases show, looked at every 100 ms; the Leases' duration is real time
//! (2 s here), as in production, and so are the waits of the renewal tests below: a slow
//! webhook that makes a tick outlast the Lease, and a cut-off replica's renew deadline.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::fleet::{self, assert_each_step_once, wait_all};
use crate::support::kube::{kubeconfig, FakeKubeApi};
use crate::support::{http, human_clone, seeded_remote, sluice_daemon, str_pairs, Daemon};
use crate::support::{run_sluice_env, DaemonBuilder, GitDaemon};

const LEASE_NS: &str = "sluice-system";
/// Far above what a rollout of the quick fleet takes on a loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(240);

/// [`LIMIT`] for a fleet of `n` canaries: one more [`LIMIT`] per hundred canaries.
fn limit(n: usize) -> Duration {
    LIMIT * (1 + u32::try_from(n / 100).unwrap_or(0))
}

/// `sluice run --shards <shards>` as replica `who`, its Leases at the API of `kubeconfig`.
fn replica(builder: DaemonBuilder, who: &str, kubeconfig: &Path, shards: u32) -> DaemonBuilder {
    builder
        .stepped()
        .args(["--shards", &shards.to_string(), "--lease-duration", "2s"])
        .env("POD_NAME", who)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", "/nonexistent")
}

/// Each shard's holder, from the Leases the fake holds.
fn holders(api: &FakeKubeApi, shards: u32) -> BTreeMap<u32, String> {
    api.shard_holders(LEASE_NS, "sluice", shards)
}

/// Every replica's log, for a failure's message.
fn all_logs<'a>(daemons: impl IntoIterator<Item = &'a Daemon>) -> String {
    let logs: Vec<String> = daemons.into_iter().map(Daemon::log).collect();
    logs.join("\n----\n")
}

/// Waits until every canary of the fleet is Initialized (its first tick committed).
fn wait_initialized(bare: &Path, n: usize, log: impl Fn() -> String) {
    wait_all(
        bare,
        n,
        limit(n),
        "initialized",
        |s| s["phase"] == "Initialized",
        log,
    );
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
    let logs = || all_logs(&daemons);
    wait_initialized(&bare, N, logs);
    // Each replica holds all four shards, as its own API tells it; /readyz says so.
    for (who, api) in ["a", "b"].iter().zip(&apis) {
        assert!(
            holders(api, 4).values().all(|h| h == who),
            "{:?}",
            holders(api, 4)
        );
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

/// Where the replicas run: each in a network namespace of its own (cut off by taking its link
/// down), or, where `ip netns` is not available here, as loopback processes, each reaching the
/// API through a door of its own (cut off by closing it; git stays reachable).
enum Hosts {
    Namespaces(Vec<crate::support::netns::Host>, GitDaemon),
    Loopback(Vec<crate::support::kube::Door>),
}

/// Three replicas, one SIGKILLed and one cut off mid-rollout of `n` canaries over `shards`
/// shards, with `commits: perTick` when `per_tick`: every rollout ends Succeeded, each step
/// once, and the two lost replicas' shards are taken over by the third (from the Leases).
async fn three_replicas_lose_two_mid_rollout(n: usize, shards: u32, per_tick: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = fleet::files(n, "v1");
    if per_tick {
        files.push((".sluice/config.yaml".into(), fleet::PER_TICK.into()));
    }
    let bare = seeded_remote(tmp.path(), &str_pairs(&files));
    let namespaces = crate::support::netns::available();
    let api = FakeKubeApi::start_on(if namespaces {
        "0.0.0.0:0"
    } else {
        "127.0.0.1:0"
    })
    .await;
    let mut hosts = if namespaces {
        let hosts: Vec<_> = (0..3).map(|_| crate::support::netns::Host::new()).collect();
        let gateways: Vec<String> = hosts.iter().map(|h| h.gateway.clone()).collect();
        let served = GitDaemon::start_on(tmp.path(), &gateways);
        Hosts::Namespaces(hosts, served)
    } else {
        eprintln!("ip netns is not available here: replicas on loopback, cut off at the API");
        let mut doors = Vec::new();
        for _ in 0..3 {
            doors.push(api.door().await);
        }
        Hosts::Loopback(doors)
    };
    let mut daemons: Vec<Option<Daemon>> = (0..3)
        .map(|r| {
            let who = format!("r{r}");
            let dir = tmp.path().join(format!("k-{who}"));
            std::fs::create_dir_all(&dir).unwrap();
            let work = tmp.path().join(format!("w-{who}"));
            let builder = match &hosts {
                Hosts::Namespaces(hosts, served) => {
                    let host = &hosts[r];
                    let url = format!("http://{}:{}", host.gateway, api.port());
                    let mut argv = host.wrapper();
                    argv.push(env!("CARGO_BIN_EXE_sluice").to_string());
                    sluice_daemon(served.url_at(&host.gateway, "config.git"), &work)
                        .wrapped(argv)
                        .env("PATH", std::env::var("PATH").unwrap_or_default())
                        .env("KUBECONFIG", kubeconfig(&url, &dir))
                }
                Hosts::Loopback(doors) => {
                    sluice_daemon(&bare, &work).env("KUBECONFIG", kubeconfig(&doors[r].url, &dir))
                }
            };
            let config = dir.join("kubeconfig");
            Some(replica(builder, &who, &config, shards).start())
        })
        .collect();
    let logs = |daemons: &[Option<Daemon>]| all_logs(daemons.iter().flatten());
    wait_initialized(&bare, n, || logs(&daemons));
    // Every replica holds its share before the rollout starts.
    let deadline = Instant::now() + limit(n);
    let before = loop {
        let now = holders(&api, shards);
        let per = |who: &str| now.values().filter(|h| *h == who).count();
        if now.len() == shards as usize && (0..3).all(|r| per(&format!("r{r}")) > 0) {
            break now;
        }
        assert!(
            Instant::now() < deadline,
            "the shards never spread: {now:?}\n{}",
            logs(&daemons)
        );
        std::thread::sleep(Duration::from_millis(100));
    };

    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    fleet::bump(&human, n, "v2");
    let deadline = Instant::now() + limit(n);
    while fleet::count(&bare, n, |s| s["phase"] == "Progressing") == 0 {
        assert!(
            Instant::now() < deadline,
            "no rollout started\n{}",
            logs(&daemons)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let not_done = n - fleet::count(&bare, n, fleet::succeeded("v2"));
    // r0 dies; r1 is cut off.
    if let Some(killed) = daemons[0].take() {
        killed.sigkill();
    }
    let cut_at = Instant::now();
    match &mut hosts {
        Hosts::Namespaces(hosts, _) => hosts[1].cut(),
        Hosts::Loopback(doors) => doors[1].close(),
    }
    let mut taken_over = None;
    let deadline = cut_at + limit(n);
    loop {
        let now = holders(&api, shards);
        if taken_over.is_none() && now.len() == shards as usize && now.values().all(|h| h == "r2") {
            taken_over = Some(cut_at.elapsed());
        }
        if taken_over.is_some() && fleet::count(&bare, n, fleet::succeeded("v2")) == n {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every rollout ended: {now:?}\n{}",
            logs(&daemons)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_each_step_once(&bare, n, "v2");
    let taken_over = taken_over.unwrap_or_default();
    eprintln!(
        "{} replicas, {n} canaries ({not_done} not done at the kill), {shards} shards: before \
         {before:?}; all taken over by r2 {taken_over:?} after the kill and cut",
        if namespaces { "namespaced" } else { "loopback" }
    );
    assert!(
        ["r0", "r1"].iter().all(|w| before.values().any(|h| h == w)),
        "the lost replicas held shards: {before:?}"
    );
    for i in 0..shards {
        let lease = api
            .object("leases", LEASE_NS, &format!("sluice-shard-{i}"))
            .unwrap();
        if before[&i] != "r2" {
            assert!(
                lease["spec"]["leaseTransitions"].as_i64() >= Some(1),
                "{lease}"
            );
        }
    }
    // The lease is 2 s; the survivor's renewal task, every retry period (0.4 s) whatever its
    // ticks are doing, sees the lost replicas' Leases unchanged for a lease duration and takes
    // their shards: the bound does not grow with the fleet (before the renewal had a task of
    // its own, a takeover waited for the survivor's tick in flight: 32.6 s measured at 300
    // canaries).
    let bound = Duration::from_secs(10);
    assert!(taken_over < bound, "{taken_over:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_one_killed_one_cut_off_every_rollout_succeeds_once_fake_kube_api() {
    three_replicas_lose_two_mid_rollout(30, 6, false).await;
}

/// 300 canaries, each tick's decisions in one commit: 230 s in a debug build on a loaded
/// 2-core machine, too long for every run (the 30-canary case above runs every time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size, ~4 minutes in a debug build: run with --ignored"]
async fn three_replicas_one_killed_one_cut_off_300_canaries_per_tick_fake_kube_api() {
    three_replicas_lose_two_mid_rollout(300, 12, true).await;
}

/// 300 canaries, a commit per step: ~2,400 commits, minutes in a debug build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "minutes in a debug build: run with --ignored"]
async fn three_replicas_one_killed_one_cut_off_300_canaries_fake_kube_api() {
    three_replicas_lose_two_mid_rollout(300, 12, false).await;
}

/// `sluice status --shards N` reads the shard Leases; without Kubernetes access it says it
/// cannot know.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_the_shard_holders_from_the_leases_fake_kube_api() {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use kube::api::{Api, PostParams};
    let tmp = tempfile::tempdir().unwrap();
    let repo = crate::support::repo(&str_pairs(&fleet::files(1, "v1")));
    let dir = repo.path().display().to_string();
    let api = FakeKubeApi::start().await;
    let leases: Api<Lease> = Api::namespaced(api.client(), LEASE_NS);
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("sluice-shard-1".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("sluice-7d9f-2".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                jiff::Timestamp::now(),
            )),
            ..Default::default()
        }),
    };
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let config = kubeconfig(&api.url, tmp.path()).display().to_string();
    let in_thread = dir.clone();
    // The fake serves on this runtime: the command waits on a thread of its own.
    let status = tokio::task::spawn_blocking(move || {
        let args = ["status", "--dir", &in_thread, "--shards", "2"];
        run_sluice_env(&args, &[("KUBECONFIG", &config), ("HOME", "/nonexistent")])
    });
    let args = ["status", "--dir", &dir, "--shards", "2"];
    let (code, out, err) = status.await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("shard 0 (sluice-shard-0): nobody\n"), "{out}");
    assert!(
        out.contains("shard 1 (sluice-shard-1): sluice-7d9f-2\n"),
        "{out}"
    );
    let (code, out, err) = run_sluice_env(
        &args,
        &[
            ("KUBECONFIG", "/nonexistent/kubeconfig"),
            ("HOME", "/nonexistent"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("which replica holds which shard cannot be known"),
        "{out}"
    );
}

/// Canary `c<i>`'s spec at `revision`, with a pre-rollout webhook at `hook` when given: the
/// rollout's first tick waits for its answer.
fn hooked_canary(i: usize, revision: &str, hook: Option<&str>) -> String {
    let webhook = hook.map_or(String::new(), |url| {
        format!(", webhooks: [{{name: smoke, type: pre-rollout, url: '{url}', timeout: 30s}}]")
    });
    crate::support::canary::shop_httproute(
        &format!("c{i}"),
        revision,
        "",
        &format!("interval: 1s, stepWeights: [10, 30, 60]{webhook}"),
    )
}

/// The spec files of `c0..c<n>` at `revision`, those of shard 0 (of 2) calling `hook`.
fn hooked_files(n: usize, revision: &str, hook: &str) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            let slow = sluice::core::shards::shard_of("shop", &format!("c{i}"), 2) == 0;
            let text = hooked_canary(i, revision, slow.then_some(hook));
            (format!("apps/c{i}/canary.yaml"), text)
        })
        .collect()
}

/// One human commit in `clone` writing `files`, pushed.
fn push_files(clone: &Path, files: &[(String, String)], message: &str) {
    for (file, text) in files {
        std::fs::write(clone.join(file), text).unwrap();
    }
    crate::support::git(clone, &["add", "-A"]);
    crate::support::git(clone, &["commit", "-qm", message]);
    crate::support::git(clone, &["pull", "-q", "--rebase"]);
    crate::support::git(clone, &["push", "-q"]);
}

/// Waits (looking every 100 ms, at most [`LIMIT`]) until `done`; panics with `what` and the
/// logs otherwise.
fn wait_for(what: &str, done: impl Fn() -> bool, logs: impl Fn() -> String) {
    let deadline = Instant::now() + LIMIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}\n{}", logs());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// r0 holds shard 0, whose canaries' pre-rollout webhook answers 6 s late, three lease
/// durations: r0's tick outlasts its Leases, but its renewal task keeps them, so r1 never
/// takes shard 0 and every rollout ends Succeeded with each step once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_tick_outlasts_the_lease_keeps_its_shards_fake_kube_api() {
    use crate::support::metrics::{Canned, Server};
    const N: usize = 6;
    let slow = Server::start_with(|_| Canned::new(200, "").delay(Duration::from_secs(6))).await;
    let hook = slow.url();
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(tmp.path(), &str_pairs(&hooked_files(N, "v1", &hook)));
    let api = FakeKubeApi::start().await;
    let config = kubeconfig(&api.url, tmp.path());
    let daemons: Vec<Daemon> = ["r0", "r1"]
        .iter()
        .map(|who| {
            let work = tmp.path().join(format!("w-{who}"));
            replica(sluice_daemon(&bare, &work), who, &config, 2).start()
        })
        .collect();
    let logs = || all_logs(&daemons);
    wait_initialized(&bare, N, logs);
    let spread = || holders(&api, 2) == BTreeMap::from([(0, "r0".into()), (1, "r1".into())]);
    wait_for("the shards never spread", spread, logs);
    let lease = |i: u32| {
        api.object("leases", LEASE_NS, &format!("sluice-shard-{i}"))
            .unwrap()
    };
    let transitions: Vec<_> = (0..2)
        .map(|i| lease(i)["spec"]["leaseTransitions"].clone())
        .collect();
    // Until the shards spread, r0 may have held r1's shard and given it up mid-tick: only
    // what follows counts.
    let spread_at = daemons[0].log().len();

    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    push_files(&human, &hooked_files(N, "v2", &hook), "fleet: roll out v2");
    let deadline = Instant::now() + LIMIT;
    while fleet::count(&bare, N, fleet::succeeded("v2")) < N {
        assert!(
            spread(),
            "a shard moved: {:?}\n{}",
            holders(&api, 2),
            logs()
        );
        assert!(
            Instant::now() < deadline,
            "not every rollout ended\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_each_step_once(&bare, N, "v2");
    let called = slow.requests().len();
    assert!(called > 0, "no canary of shard 0 called the slow webhook");
    for (i, before) in (0..2).zip(transitions) {
        assert_eq!(lease(i)["spec"]["leaseTransitions"], before, "{}", lease(i));
    }
    let r0 = daemons[0].log();
    let after_spread = r0.get(spread_at..).unwrap_or_default();
    assert!(!after_spread.contains("Shard lost during the tick"), "{r0}");
    eprintln!("{called} slow webhook calls of 6 s, lease 2 s: shard 0 stayed r0's");
}

/// r0 holds both shards; its tick waits on a pre-rollout webhook the test holds, and its
/// access to the API is cut meanwhile: once its renew deadline has passed, the webhook
/// answers, and r0 commits nothing, neither that tick's decisions nor any later one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_mid_tick_stops_acting_at_its_renew_deadline_fake_kube_api() {
    use crate::support::metrics::{Canned, Hold, Server};
    const N: usize = 4;
    let hold = Hold::new();
    let held = hold.clone();
    let slow = Server::start_with(move |_| Canned::new(200, "").held(&held)).await;
    let hook = slow.url();
    let tmp = tempfile::tempdir().unwrap();
    let files: Vec<_> = (0..N)
        .map(|i| {
            (
                format!("apps/c{i}/canary.yaml"),
                hooked_canary(i, "v1", Some(&hook)),
            )
        })
        .collect();
    let bare = seeded_remote(tmp.path(), &str_pairs(&files));
    let api = FakeKubeApi::start().await;
    let mut door = api.door().await;
    let config = kubeconfig(&door.url, tmp.path());
    let work = tmp.path().join("w-r0");
    let daemon = replica(sluice_daemon(&bare, &work), "r0", &config, 2).start();
    let logs = || daemon.log();
    wait_initialized(&bare, N, logs);
    let both = || holders(&api, 2).values().filter(|h| *h == "r0").count() == 2;
    wait_for("r0 never held both shards", both, logs);

    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    let files: Vec<_> = (0..N)
        .map(|i| {
            (
                format!("apps/c{i}/canary.yaml"),
                hooked_canary(i, "v2", Some(&hook)),
            )
        })
        .collect();
    push_files(&human, &files, "fleet: roll out v2");
    wait_for(
        "no webhook was called",
        || !slow.requests().is_empty(),
        logs,
    );
    // The tick waits on the webhook: cut r0 off from the API.
    door.close();
    let head = || crate::support::git(&bare, &["rev-parse", "main"]);
    let at_cut = head();
    let failed = || logs().contains("Cannot renew the shard Leases");
    wait_for("r0 never failed to renew", failed, logs);
    // The Leases live in real time: past the renew deadline (1.33 s of the 2 s lease) since the
    // last renewal, which came before the first failure.
    std::thread::sleep(Duration::from_secs(2));
    hold.release();
    let dropped = || logs().contains("Shard lost during the tick");
    wait_for("the tick committed for shards it lost", dropped, logs);
    // The next polls hold nothing: within a few of them (a stepped second each), no commit.
    let (code, ready) = http(daemon.probes(), "GET", "/readyz", &[], b"");
    assert!(ready.contains("shards unknown"), "{code} {ready}");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        head(),
        at_cut,
        "r0 pushed after losing its shards\n{}",
        logs()
    );
}
