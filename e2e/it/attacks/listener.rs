//! See `../attacks.rs`. Attacks by anyone who can open a connection to the daemon: a flood of
//! half-open connections that would starve the kubelet's probes (and so restart the pod over
//! and over), a signed webhook replayed under fresh delivery ids, and the dashboard read
//! through the webhook port that an ingress exposes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    daemon_on_remote, get_status, github_signature, http, reconcile_ticks, DaemonOnRemote,
};

const SECRET: &str = "s3cret";

fn canary() -> &'static str {
    "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {name: web, namespace: shop}\nspec:\n  routeOnly: {services: [web-blue, web-green], revision: v1}\n  service: {port: 8080}\n  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}\n  analysis: {interval: 1s, stepWeights: [50]}\n"
}

/// `sluice run` on a fresh remote holding `files`, polling every `poll`, with the webhook
/// secret [`SECRET`] and `env` added, logging at `info`, both listeners on free ports it
/// picks itself, once its probe listener says it is ready.
fn daemon_with(files: &[(&str, &str)], poll: &str, env: &[(&str, &str)]) -> DaemonOnRemote {
    daemon_listening(files, poll, env, "127.0.0.1:0", &[])
}

/// [`daemon_with`] on the one canary `apps/web.yaml` with a one-minute poll.
fn start() -> DaemonOnRemote {
    daemon_with(&[("apps/web.yaml", canary())], "60s", &[])
}

/// [`start`] with the main listener on `listen` and more arguments for `sluice run`.
fn start_listening(listen: &str, more: &[&str]) -> DaemonOnRemote {
    daemon_listening(&[("apps/web.yaml", canary())], "60s", &[], listen, more)
}

fn daemon_listening(
    files: &[(&str, &str)],
    poll: &str,
    env: &[(&str, &str)],
    listen: &str,
    more: &[&str],
) -> DaemonOnRemote {
    daemon_on_remote(files, |d| {
        d.poll(poll)
            .listen(listen)
            .args(more)
            .env("SLUICE_WEBHOOK_SECRET", SECRET)
            .log(Some("info"))
            .envs(env)
    })
}

/// `count` connections to `target` from the loopback address `from`, each sending part of a
/// request line and then nothing; each one the server drops is opened again a second later.
/// Runs until `stop`; `opened` counts the connections made.
fn flood(
    target: String,
    from: std::net::IpAddr,
    count: usize,
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let target: std::net::SocketAddr = target.parse().unwrap();
            let tasks: Vec<_> = (0..count)
                .map(|_| {
                    let (stop, opened) = (Arc::clone(&stop), Arc::clone(&opened));
                    tokio::spawn(async move {
                        while !stop.load(Ordering::SeqCst) {
                            half_open(target, from, &opened).await;
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    })
                })
                .collect();
            for task in tasks {
                let _ = task.await;
            }
        });
    })
}

/// One half-open connection, held until the server drops it (or for 30 s at most).
async fn half_open(target: std::net::SocketAddr, from: std::net::IpAddr, opened: &AtomicUsize) {
    let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
        return;
    };
    if socket.bind(std::net::SocketAddr::new(from, 0)).is_err() {
        return;
    }
    let Ok(mut stream) = socket.connect(target).await else {
        return;
    };
    opened.fetch_add(1, Ordering::SeqCst);
    if stream.write_all(b"GET /healthz HT").await.is_err() {
        return;
    }
    let mut buf = [0u8; 256];
    let _ = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf)).await;
}

/// Starts `count` half-open connections from `from` to `target` and waits until each was
/// opened at least once; the flood stops when the returned guard drops.
fn flooded(target: &str, from: &str, count: usize) -> Flood {
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let thread = flood(
        target.to_string(),
        from.parse().unwrap(),
        count,
        Arc::clone(&stop),
        Arc::clone(&opened),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while opened.load(Ordering::SeqCst) < count {
        assert!(
            Instant::now() < deadline,
            "the flood opened only {} connections",
            opened.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Flood {
        stop,
        thread: Some(thread),
    }
}

struct Flood {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// 30 probes in a row, a fifth of a second apart, must all answer 200.
fn thirty_probes_succeed(addr: &str) {
    for i in 0..30 {
        for path in ["/healthz", "/readyz"] {
            assert_eq!(
                get_status(addr, path),
                Some(200),
                "probe {} of 30 ({path}) failed",
                i + 1
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// 1,000 half-open connections against the webhook and metrics listener, reopened as they
/// drop, cannot fail the kubelet's probes: those are served on a listener of their own.
#[test]
fn half_open_connections_on_the_main_listener_do_not_starve_the_probes() {
    let daemon = start();
    let _flood = flooded(daemon.main(), "127.0.0.1", 1000);
    thirty_probes_succeed(daemon.probes());
}

/// The probe listener too keeps room for the kubelet when one peer floods it (the install
/// manifest exposes it on the pod's address): a peer holds only a few connections at once.
#[test]
fn one_peer_flooding_the_probe_listener_leaves_room_for_the_kubelet() {
    let daemon = start();
    // Another address of the loopback network stands for a pod in the cluster.
    let _flood = flooded(daemon.probes(), "127.0.0.2", 1000);
    thirty_probes_succeed(daemon.probes());
}

/// The tick counter once it moved past `from` and then stayed put for two seconds.
fn settled_after(addr: &str, from: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = from;
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let now = reconcile_ticks(addr);
        if now == last && now > from {
            return now;
        }
        assert!(Instant::now() < deadline, "the ticks never settled");
        last = now;
    }
}

/// A forge's name, a body, its two authentication headers and its delivery id header.
type Forge<'a> = (&'a str, &'a [u8], [(&'a str, &'a str); 2], &'a str);

/// A signed delivery captured once (from a proxy's log, a forge's delivery page) and sent
/// again under fresh delivery ids: the id header is not signed, the body is. The same body
/// within the replay window wakes the loop once, on every forge's headers.
#[test]
fn a_signed_webhook_replayed_under_fresh_delivery_ids_wakes_once() {
    let daemon = start();
    let addr = daemon.main();
    let github = br#"{"ref":"refs/heads/main","after":"1111111111111111111111111111111111111111"}"#;
    let gitea = br#"{"ref":"refs/heads/main","after":"2222222222222222222222222222222222222222"}"#;
    let gitlab = br#"{"object_kind":"push","ref":"refs/heads/main","checkout_sha":"3333333333333333333333333333333333333333"}"#;
    let hub = github_signature(SECRET, github);
    let gitea_sig = github_signature(SECRET, gitea);
    let gitea_sig = gitea_sig.trim_start_matches("sha256=");
    let forges: [Forge; 3] = [
        (
            "github",
            github,
            [("X-GitHub-Event", "push"), ("X-Hub-Signature-256", &hub)],
            "X-GitHub-Delivery",
        ),
        (
            "gitea",
            gitea,
            [("X-Gitea-Event", "push"), ("X-Gitea-Signature", gitea_sig)],
            "X-Gitea-Delivery",
        ),
        (
            "gitlab",
            gitlab,
            [("X-Gitlab-Event", "Push Hook"), ("X-Gitlab-Token", SECRET)],
            "X-Gitlab-Event-UUID",
        ),
    ];
    for (forge, body, auth, delivery_header) in forges {
        let start = reconcile_ticks(addr);
        let answers: Vec<u16> = (0..10)
            .map(|i| {
                let delivery = format!("{forge}-fresh-{i}");
                let headers = [auth[0], auth[1], (delivery_header, delivery.as_str())];
                http(addr, "POST", "/hooks/git", &headers, body).0
            })
            .collect();
        assert_eq!(answers[0], 202, "{forge}: the first delivery wakes");
        assert!(
            answers[1..].iter().all(|&a| a == 200),
            "{forge}: replays under fresh ids were taken as new deliveries: {answers:?}"
        );
        assert_eq!(
            settled_after(addr, start),
            start + 1,
            "{forge}: ten copies of one signed body: one tick"
        );
    }
}

/// The dashboard is never served on the webhook port (the one an ingress exposes) unless the
/// operator names that port for it: by default `sluice run` serves no dashboard at all, and
/// `--dashboard-listen` gives it a listener of its own. `--metrics-listen` moves `/metrics`
/// off the webhook port the same way, so a NetworkPolicy can admit each from its own peers.
#[test]
fn the_webhook_port_serves_no_dashboard_unless_told() {
    let dashboard_paths = [
        "/",
        "/api/v1/canaries",
        "/api/v1/canaries/shop/web",
        "/canaries/shop/web",
        "/fragments/overview",
        "/assets/dashboard.js",
    ];
    let daemon = start();
    for path in dashboard_paths {
        assert_eq!(
            get_status(daemon.main(), path),
            Some(404),
            "{path} on --listen"
        );
    }
    assert_eq!(get_status(daemon.main(), "/metrics"), Some(200));
    drop(daemon);

    let daemon = start_listening(
        "127.0.0.1:0",
        &[
            "--dashboard-listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let dashboard = daemon.address("Serving the dashboard at /");
    let metrics = daemon.address("Serving /metrics");
    for path in dashboard_paths {
        assert_eq!(
            get_status(daemon.main(), path),
            Some(404),
            "{path} on --listen"
        );
        assert_eq!(
            get_status(&metrics, path),
            Some(404),
            "{path} on --metrics-listen"
        );
    }
    assert_eq!(get_status(&dashboard, "/"), Some(200));
    assert_eq!(
        get_status(&dashboard, "/api/v1/canaries/shop/web"),
        Some(200)
    );
    assert_eq!(get_status(daemon.main(), "/metrics"), Some(404));
    assert_eq!(get_status(&metrics, "/metrics"), Some(200));
    assert_eq!(get_status(&dashboard, "/metrics"), Some(404));
    assert_eq!(get_status(&dashboard, "/hooks/git"), Some(404));
}

/// Naming `--listen`'s own address tells sluice to serve the dashboard there (the oauth2-proxy
/// patch does, on loopback behind the proxy).
#[test]
fn the_dashboard_on_the_webhook_port_when_named() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let daemon = start_listening(&addr, &["--dashboard-listen", &addr]);
    assert_eq!(daemon.main(), addr);
    assert_eq!(get_status(daemon.main(), "/"), Some(200));
    assert_eq!(get_status(daemon.main(), "/metrics"), Some(200));
}
