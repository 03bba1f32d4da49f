//! The daemon's endpoints with the real binary: a signed push webhook wakes it at once (the
//! latency is printed, not asserted), a bad signature changes nothing, /metrics exposes the
//! canary weight, and a webhook brings a full tick even when an idle daemon would skip the poll.

use std::time::{Duration, Instant};

use crate::support::{
    daemon_on_remote, get_status, git, github_signature, http, human_clone, human_commit,
    push_webhook, reconcile_ticks, DaemonOnRemote,
};

const FILE: &str = "apps/web/canary.yaml";

fn canary(revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1s, stepWeights: [10, 50]}}\n"
    )
}

fn commits(bare: &std::path::Path) -> usize {
    git(bare, &["rev-list", "--count", "main"])
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn signed_webhook_wakes_the_daemon_and_metrics_show_the_weight() {
    // A one-minute poll: only the webhook can make the daemon notice a push quickly.
    let d = started();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (bare, addr, secret) = (d.bare.as_path(), d.main(), SECRET);
    assert_eq!(get_status(addr, "/healthz"), Some(200));
    let human = human_clone(&bare.display().to_string(), &d.tmp.path().join("human"));
    human_commit(&human, FILE, &canary("v2"), "web: v2");
    let before = commits(bare);

    let body = br#"{"ref":"refs/heads/main"}"#;
    let (status, _) = http(
        addr,
        "POST",
        "/hooks/git",
        &[
            ("X-GitHub-Event", "push"),
            ("X-Hub-Signature-256", "sha256=00"),
        ],
        body,
    );
    assert_eq!(status, 401, "a bad signature is refused");
    let (status, _) = http(
        addr,
        "POST",
        "/hooks/git",
        &[("X-GitHub-Event", "push")],
        body,
    );
    assert_eq!(status, 401, "an unsigned hook is refused");

    let sent = Instant::now();
    let (status, _) = http(
        addr,
        "POST",
        "/hooks/git",
        &[
            ("X-GitHub-Event", "push"),
            ("X-Hub-Signature-256", &github_signature(secret, body)),
        ],
        body,
    );
    assert_eq!(status, 202);
    while commits(bare) == before {
        assert!(
            Instant::now() < deadline,
            "the webhook did not wake the daemon (poll is 60 s)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("webhook to next commit: {} ms", sent.elapsed().as_millis());

    let (status, metrics) = http(addr, "GET", "/metrics", &[], b"");
    assert_eq!(status, 200);
    let weight = metrics
        .lines()
        .find(|l| {
            l.starts_with("sluice_canary_weight{")
                && l.contains("name=\"web\"")
                && l.contains("namespace=\"shop\"")
        })
        .unwrap_or_else(|| panic!("no weight series:\n{metrics}"));
    assert!(
        weight.trim().ends_with(" 0") || weight.trim().ends_with(" 10"),
        "{weight}"
    );
    assert!(
        metrics.contains("sluice_reconcile_ticks_total"),
        "{metrics}"
    );
    drop(d);
}

/// An idle daemon skips polls that find nothing new, but a webhook always brings a full tick,
/// even when the head it announces is one the daemon already ticked on (a forge delivering
/// late, or a push to another branch).
#[test]
fn a_webhook_brings_a_full_tick_even_when_the_head_did_not_move() {
    // A one-minute poll: within the test, only webhooks wake the daemon.
    let d = started();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (bare, addr, secret) = (d.bare.as_path(), d.main(), SECRET);
    // The first tick initialized the canary; each webhook below must add one tick: the second
    // finds the canary at rest, and the third polls that same head again. Two deliveries are
    // two bodies (the same signed body twice is a replay, whatever its delivery id).
    for (delivery, expected) in [("d-1", 2), ("d-2", 3)] {
        assert_eq!(push_webhook(addr, secret, delivery), 202);
        while reconcile_ticks(addr) < expected {
            assert!(
                Instant::now() < deadline,
                "webhook {delivery} brought no tick (ticks: {})",
                reconcile_ticks(addr)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(commits(bare), 2, "the seed and the initialization only");
}

const SECRET: &str = "s3cret";

/// `sluice run` on a fresh remote holding `canary("v1")`, polling every 60 s, with the webhook
/// secret [`SECRET`], once its /readyz answers 200.
fn started() -> DaemonOnRemote {
    daemon_on_remote(&[(FILE, &canary("v1"))], |d| {
        d.poll("60s")
            .env("SLUICE_WEBHOOK_SECRET", SECRET)
            .log(Some("error"))
    })
}
