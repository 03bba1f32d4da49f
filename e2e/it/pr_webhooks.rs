//! `/hooks/<forge>` with the real binary and the HTTP-level GitHub fake: a signed
//! `pull_request` event saying the approval pull request was merged makes `sluice run` act on
//! the merge at once, though its poll is a minute away; unsigned, badly signed, replayed and
//! oversized deliveries are refused as on `/hooks/git`. The per-forge payloads are unit-tested
//! in `src/server/pr_events/`.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::support::forge::{ForgeFake, Kind, FILE};
use crate::support::forge_events::{gated_canary as canary, pull_event, Outcome};
use crate::support::{
    daemon_on_remote, git, github_signature, http, human_clone, human_commit, merge_approval,
    push_webhook, DaemonOnRemote,
};

const SECRET: &str = "s3cret";

/// Waits (at most 30 s, far below the daemon's 60 s poll) until `done` holds.
fn until(d: &DaemonOnRemote, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "{what}; the log:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn subject(d: &DaemonOnRemote) -> String {
    git(&d.bare, &["log", "-1", "--format=%s", "main"])
        .trim()
        .to_string()
}

/// GitHub's `pull_request` event: pull request `number` from `branch` merged.
fn pull_request_event(number: u64, branch: &str) -> String {
    pull_event(
        Kind::GitHub,
        "acme/fleet",
        number,
        branch,
        Outcome::Merged,
        SECRET,
    )
    .body
}

fn send(d: &DaemonOnRemote, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut all = vec![("X-GitHub-Event", "pull_request")];
    all.extend_from_slice(headers);
    http(d.main(), "POST", "/hooks/github", &all, body.as_bytes())
}

/// The status of a POST to `path` announcing `length` bytes and sending them (the server may
/// answer and close before it has read them all).
fn post_announcing(addr: &str, path: &str, length: usize) -> u16 {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nX-GitHub-Event: pull_request\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("write");
    let chunk = vec![b' '; 64 * 1024];
    let mut sent = 0;
    while sent < length {
        let n = chunk.len().min(length - sent);
        if stream.write_all(&chunk[..n]).is_err() {
            break;
        }
        sent += n;
    }
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out)
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn fake_github_pull_request_merged_event_acts_on_the_approval_before_the_poll() {
    let fake = ForgeFake::start(Kind::GitHub);
    let config = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}",
        fake.settings()
    );
    let d = daemon_on_remote(
        &[(FILE, &canary("v1")), (".sluice/config.yaml", &config)],
        |d| {
            d.poll("60s")
                .log(Some("info"))
                .env("SLUICE_FORGE_TOKEN", "t0k")
                .env("SLUICE_WEBHOOK_SECRET", SECRET)
        },
    );
    let human = human_clone(&d.bare.display().to_string(), &d.tmp.path().join("human"));
    human_commit(&human, FILE, &canary("v2"), "web: v2");
    assert_eq!(push_webhook(d.main(), SECRET, "push-v2"), 202);
    until(&d, "no approval pull request was opened", || {
        fake.count() == 1
    });
    until(&d, "the canary does not wait for approval", || {
        subject(&d).contains("waits for approval")
    });
    let branch = fake.first().head;
    assert!(branch.starts_with("sluice/shop/web/"), "{branch}");

    // A human merges the approval pull request; the forge tells sluice.
    merge_approval(&human, &branch, "merge");
    fake.merged_by(1, "octocat");
    let merged_head = git(&d.bare, &["rev-parse", "main"]);
    let body = pull_request_event(1, &branch);

    // Refused as on /hooks/git, and nothing moves.
    assert_eq!(send(&d, &[], &body).0, 401, "unsigned");
    let wrong = github_signature("wrong", &body);
    assert_eq!(send(&d, &[("X-Hub-Signature-256", &wrong)], &body).0, 401);
    let sized = sluice::server::MAX_WEBHOOK_BODY + 1;
    assert_eq!(post_announcing(d.main(), "/hooks/github", sized), 413);
    // An event about a branch that is not an approval branch is answered, wakes nothing.
    let other = pull_request_event(9, "feature/x");
    let signed = github_signature(SECRET, &other);
    let (status, text) = send(&d, &[("X-Hub-Signature-256", &signed)], &other);
    assert_eq!((status, text.contains("ignored")), (200, true), "{text}");
    assert_eq!(git(&d.bare, &["rev-parse", "main"]), merged_head);

    let signed = github_signature(SECRET, &body);
    let sent = Instant::now();
    let (status, text) = send(&d, &[("X-Hub-Signature-256", &signed)], &body);
    assert_eq!(status, 202, "{text}");
    until(
        &d,
        "the merge event did not wake the daemon (poll is 60 s)",
        || subject(&d).contains("approval merged"),
    );
    println!("merge event to commit: {} ms", sent.elapsed().as_millis());
    assert!(
        d.log().contains("Pull-request webhook received"),
        "{}",
        d.log()
    );

    // The same signed body again is a replay: answered, nothing woken.
    let (status, text) = send(&d, &[("X-Hub-Signature-256", &signed)], &body);
    assert_eq!(
        (status, text.contains("already received")),
        (200, true),
        "{text}"
    );
}
