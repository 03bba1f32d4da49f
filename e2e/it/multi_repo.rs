//! One `sluice run` over two config repos, each served by a real `git http-backend` that
//! demands its own basic-auth credentials: one repo's remote goes away mid-rollout, the other's
//! canary still runs to Succeeded while `/readyz` says why the first holds; the remote comes
//! back and its canary finishes too. Neither remote is ever sent the other's credentials or the
//! unscoped `SLUICE_GIT_*` ones.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice::redact::base64;

use crate::support::canary::web_httproute as canary;
use crate::support::forge::Kind;
use crate::support::forge_events::{pull_event, Outcome};
use crate::support::rollout::ROUTE_ONLY_WEIGHTS;
use crate::support::{
    commits_of, http, human_clone, human_commit, seeded_remote, sluice_daemon, status_at_main,
    Authorize, Daemon, HttpGit,
};

const CANARY_FILE: &str = "apps/web/canary.yaml";
const STATUS_FILE: &str = ".sluice/status/shop/web.yaml";

/// A repo named `name` (its bare remote `<tmp>/<name>/<name>.git` holding the `web` canary at
/// v1 and the `extra` files), served over http to requests whose `Authorization` is basic `<name>:<name>-pw`; every
/// header a request carried is kept in the returned list.
fn served(
    tmp: &Path,
    name: &str,
    extra: &[(&str, &str)],
) -> (PathBuf, HttpGit, Arc<Mutex<Vec<String>>>) {
    let dir = tmp.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let v1 = canary("v1");
    let mut files = vec![(CANARY_FILE, v1.as_str())];
    files.extend_from_slice(extra);
    let seeded = seeded_remote(&dir, &files);
    let bare = dir.join(format!("{name}.git"));
    std::fs::rename(seeded, &bare).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let expected = format!("Basic {}", base64(format!("{name}:{name}-pw").as_bytes()));
    let kept = Arc::clone(&seen);
    let authorize: Authorize = Arc::new(move |header: Option<&str>| {
        if let Some(h) = header {
            kept.lock().unwrap().push(h.to_string());
        }
        header == Some(expected.as_str())
    });
    (
        bare,
        HttpGit::start_authorizing(&dir, name, authorize),
        seen,
    )
}

/// `phase:step` of the canary on `bare`'s main.
fn phase(bare: &Path) -> Option<String> {
    let status = status_at_main(bare, STATUS_FILE)?;
    Some(format!("{}:{}", status["phase"].as_str()?, status["step"]))
}

/// Waits (at most 90 s) until `done` holds, naming `what` and `state()` when it never does.
fn until(what: &str, state: impl Fn() -> String, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; {}",
            state()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn readyz(daemon: &Daemon) -> (u16, String) {
    http(daemon.probes(), "GET", "/readyz", &[], b"")
}

#[test]
fn a_repo_whose_remote_goes_away_holds_alone_and_resumes_when_it_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let (shop, shop_git, shop_seen) = served(tmp.path(), "shop", &[]);
    let (pay, pay_git, pay_seen) = served(tmp.path(), "pay", &[]);
    let shop_url = shop_git.url("", "shop.git");
    let pay_url = pay_git.url("", "pay.git");
    let daemon = sluice_daemon(&shop_url, &tmp.path().join("work"))
        .args(["--repo", &pay_url])
        .envs(&[
            ("SLUICE_REPO_SHOP_GIT_USERNAME", "shop"),
            ("SLUICE_REPO_SHOP_GIT_PASSWORD", "shop-pw"),
            ("SLUICE_REPO_PAY_GIT_USERNAME", "pay"),
            ("SLUICE_REPO_PAY_GIT_PASSWORD", "pay-pw"),
            // Unscoped: with several repos no repo may use it.
            ("SLUICE_GIT_TOKEN", "install-wide-token"),
        ])
        .start();
    let both = || format!("shop {:?}, pay {:?}", phase(&shop), phase(&pay));
    until("both initialized", both, || {
        [&shop, &pay]
            .iter()
            .all(|b| phase(b).is_some_and(|p| p.starts_with("Initialized")))
    });
    for (name, url) in [("shop", &shop_url), ("pay", &pay_url)] {
        let authed = url.replace("http://", &format!("http://{name}:{name}-pw@"));
        let human = human_clone(&authed, &tmp.path().join(format!("human-{name}")));
        human_commit(&human, CANARY_FILE, &canary("v2"), "web: roll out v2");
    }
    until("pay progressing", both, || {
        phase(&pay).is_some_and(|p| p.starts_with("Progressing"))
    });
    // pay's remote goes away mid-rollout.
    let gone = tmp.path().join("pay").join("moved.git");
    std::fs::rename(&pay, &gone).unwrap();
    let held_at = phase(&gone);
    until("shop succeeded while pay is gone", both, || {
        phase(&shop).is_some_and(|p| p.starts_with("Succeeded"))
    });
    until(
        "/readyz to say why pay holds",
        || format!("{:?}", readyz(&daemon)),
        || {
            let (code, body) = readyz(&daemon);
            code == 200 && body.contains("repo pay: held:")
        },
    );
    assert_eq!(phase(&gone), held_at, "pay moved while its remote was gone");
    let (_, body) = readyz(&daemon);
    assert!(!body.contains("repo shop"), "shop does not hold: {body}");
    // The remote comes back: pay resumes where it was and finishes.
    std::fs::rename(&gone, &pay).unwrap();
    until("pay succeeded once back", both, || {
        phase(&pay).is_some_and(|p| p.starts_with("Succeeded"))
    });
    until(
        "/readyz to drop pay's hold",
        || format!("{:?}", readyz(&daemon)),
        || !readyz(&daemon).1.contains("repo pay"),
    );
    let log = daemon.log();
    assert!(daemon.sigterm().success(), "{log}");
    for bare in [&shop, &pay] {
        let weights: Vec<String> = commits_of(bare, "shop/web")
            .into_iter()
            .map(|(_, w)| w)
            .collect();
        assert_eq!(
            weights, ROUTE_ONLY_WEIGHTS,
            "one commit per step, none repeated"
        );
    }
    // Each remote saw only its own credentials; neither the other's nor the unscoped token.
    let basic = |name: &str| format!("Basic {}", base64(format!("{name}:{name}-pw").as_bytes()));
    for (seen, own, other) in [(&shop_seen, "shop", "pay"), (&pay_seen, "pay", "shop")] {
        let headers = seen.lock().unwrap().clone();
        assert!(
            headers.contains(&basic(own)),
            "{own} never authenticated: {headers:?}"
        );
        for h in &headers {
            assert_eq!(
                h,
                &basic(own),
                "{own}'s remote was sent {h} ({other}'s or unscoped)"
            );
            assert!(!h.contains(&base64(b"x-access-token:install-wide-token")));
        }
    }
}

/// With several repos, each with its own `forge.repository`, a pull-request webhook about any
/// of them wakes the loop; one about a repository none of them names is answered and ignored.
/// Once, only the first repo's forge was kept, so the second repo's merged approvals waited
/// for the next poll.
#[test]
fn pull_request_webhooks_of_every_repo_wake_the_loop_fake_github() {
    const SECRET: &str = "hook-secret";
    let tmp = tempfile::tempdir().unwrap();
    let forge = |repository: &str| {
        format!("forge: {{kind: github, apiUrl: 'http://127.0.0.1:9', repository: {repository}}}\n")
    };
    let (shop, shop_git, _) = served(
        tmp.path(),
        "shop",
        &[(".sluice/config.yaml", &forge("acme/shop"))],
    );
    let (pay, pay_git, _) = served(
        tmp.path(),
        "pay",
        &[(".sluice/config.yaml", &forge("acme/pay"))],
    );
    let daemon = sluice_daemon(shop_git.url("", "shop.git"), &tmp.path().join("work"))
        .args(["--repo", &pay_git.url("", "pay.git")])
        .envs(&[
            ("SLUICE_REPO_SHOP_GIT_USERNAME", "shop"),
            ("SLUICE_REPO_SHOP_GIT_PASSWORD", "shop-pw"),
            ("SLUICE_REPO_PAY_GIT_USERNAME", "pay"),
            ("SLUICE_REPO_PAY_GIT_PASSWORD", "pay-pw"),
            ("SLUICE_REPO_SHOP_FORGE_TOKEN", "shop-token"),
            ("SLUICE_REPO_PAY_FORGE_TOKEN", "pay-token"),
            ("SLUICE_WEBHOOK_SECRET", SECRET),
        ])
        .start();
    let both = || format!("shop {:?}, pay {:?}", phase(&shop), phase(&pay));
    until("both initialized", both, || {
        [&shop, &pay]
            .iter()
            .all(|b| phase(b).is_some_and(|p| p.starts_with("Initialized")))
    });
    let deliver = |repository: &str, number: u64| {
        let branch = format!("sluice/shop/web/{number}");
        let event = pull_event(
            Kind::GitHub,
            repository,
            number,
            &branch,
            Outcome::Merged,
            SECRET,
        );
        http(
            daemon.main(),
            "POST",
            &event.path,
            &event.headers(),
            event.body.as_bytes(),
        )
    };
    // Each repo's forge is published with its first tick's readiness.
    until(
        "ready",
        || format!("{:?}", readyz(&daemon)),
        || readyz(&daemon).0 == 200,
    );
    for (repository, number) in [("acme/pay", 1), ("acme/shop", 2)] {
        let (status, text) = deliver(repository, number);
        assert_eq!(
            (status, text.contains("accepted")),
            (202, true),
            "{repository}: {text}"
        );
    }
    let (status, text) = deliver("acme/other", 3);
    assert_eq!(status, 202, "{text}");
    assert!(
        text.contains("ignored") && text.contains("acme/shop") && text.contains("acme/pay"),
        "{text}"
    );
    let log = daemon.log();
    assert!(daemon.sigterm().success(), "{log}");
}
