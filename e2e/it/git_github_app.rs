//! Git over http as a GitHub App, through the real daemon: a real `git http-backend`
//! (`e2e/git_server.rs`) lets in only `x-access-token` basic auth with the newest unexpired
//! installation token the HTTP-level fake of GitHub's App API issued
//! (`support/github_app.rs`: tokens live 5½ minutes there). `sluice run` on a stepped clock,
//! given the App through `SLUICE_GITHUB_APP_*`, clones, commits and pushes a canary's rollout
//! through it, each fetch and push with a token that is replaced before it expires; the key
//! and the tokens show nowhere: not in the log, `git log -p --all`, `.git/config` or any file
//! of the clone.

use std::time::{Duration, Instant};

use crate::support::forge::ForgeFake;
use crate::support::github_app::{generated_key, git_authorize, APP_ID};
use crate::support::{
    every_file_bytes, git, human_clone, human_commit, route_only_web, seeded_remote, sluice_daemon,
    status_at_main, HttpGit,
};

const FILE: &str = "apps/web/canary.yaml";
const STATUS: &str = ".sluice/status/shop/web.yaml";
const STEPS: &str = "[{weight: 20}, {weight: 60}]";

/// Git requests a wait may take: far more than the rollout and three tokens need.
const MAX_GIT_CALLS: usize = 3000;

#[test]
fn fake_github_app_sluice_run_fetches_and_pushes_over_http_with_fresh_installation_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let (pem, public_der) = generated_key(tmp.path());
    let key_file = tmp.path().join("app.pem");
    let api = ForgeFake::github_app(public_der);
    let root = tmp.path().join("git");
    let bare = seeded_remote(&root.join("acme"), &[(FILE, &route_only_web("v1", STEPS))]);
    let server =
        HttpGit::start_authorizing(&root, "x-access-token", git_authorize(&api.app_side()));
    let url = server.url("", "acme/config.git");
    let workdir = tmp.path().join("d");
    let daemon = sluice_daemon(&url, &workdir)
        .stepped()
        .poll("10s")
        .log(Some("info"))
        .env("SLUICE_GITHUB_APP_ID", APP_ID)
        .env("SLUICE_GITHUB_APP_PRIVATE_KEY_FILE", &key_file)
        .env("SLUICE_GITHUB_API_URL", api.api_url())
        .start();
    daemon.wait_ready();
    let phase = || {
        status_at_main(&bare, STATUS)
            .and_then(|s| s["phase"].as_str().map(str::to_string))
            .unwrap_or_default()
    };
    // Waits until `done`, bounded by the git requests the daemon makes (and a hang guard).
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let started = Instant::now();
        while !done() {
            let calls = api.app().calls.len();
            assert!(
                calls < MAX_GIT_CALLS && started.elapsed() < Duration::from_secs(120),
                "not {what} after {calls} git requests (phase {}); problems {:?}:\n{}",
                phase(),
                api.app().problems,
                daemon.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    until("initialized", &|| phase() == "Initialized");
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    human_commit(&human, FILE, &route_only_web("v2", STEPS), "web: v2");
    until("promoted", &|| phase() == "Succeeded");
    // Polls at rest fetch every 10 s of its clock: tokens are replaced as they near expiry.
    until("three tokens issued", &|| api.app().issued.len() >= 3);
    let pushed_by_sluice = git(&bare, &["log", "--format=%an %s", "main"]);
    assert!(
        pushed_by_sluice.lines().count() >= 5,
        "sluice pushed its rollout: {pushed_by_sluice}"
    );

    let app = api.app();
    assert_eq!(
        app.problems,
        Vec::<String>::new(),
        "no expired, superseded or unknown token"
    );
    let used: std::collections::BTreeSet<&str> =
        app.calls.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        used.len() >= 3,
        "git requests with every token issued: {used:?}"
    );
    assert!(
        app.calls.iter().all(|(call, _)| call.starts_with("git ")),
        "{:?}",
        app.calls
    );

    // Neither the key nor a token anywhere sluice writes or logs.
    let mut secrets: Vec<String> = app.issued.iter().map(|(t, _)| t.clone()).collect();
    secrets.extend(
        pem.lines()
            .filter(|l| !l.starts_with("-----") && l.len() > 16)
            .map(str::to_string),
    );
    let mut places = vec![
        ("the log".to_string(), daemon.log()),
        (
            "git log -p --all".to_string(),
            git(&workdir, &["log", "-p", "--all"]),
        ),
        (
            "the remote's history".to_string(),
            git(&bare, &["log", "-p", "--all"]),
        ),
    ];
    for (name, bytes) in every_file_bytes(&workdir) {
        places.push((name, String::from_utf8_lossy(&bytes).into_owned()));
    }
    assert!(
        places
            .iter()
            .any(|(name, _)| name.ends_with("config") && name.contains(".git")),
        "the clone's .git/config was read: {:?}",
        places.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    for (place, text) in &places {
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "{place} holds a secret");
        }
    }
}
