//! Notifications with the real binary: Slack, Teams, Discord and generic webhook payloads for
//! the events people care about, sent to a local HTTP server the test runs; URLs come from
//! the environment variables the settings name.

use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::metrics::support::{Canned, Server};
use crate::support::{git, human_clone, human_commit, reconcile, seeded_remote};

fn canary(revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1s, stepWeights: [50]}}\n"
    )
}

const SETTINGS: &str = "apiVersion: sluice.dev/v1alpha1
kind: Config
notifications:
  - {kind: slack, urlEnv: SLUICE_TEST_SLACK}
  - {kind: teams, urlEnv: SLUICE_TEST_TEAMS}
  - {kind: discord, urlEnv: SLUICE_TEST_DISCORD}
  - {kind: webhook, urlEnv: SLUICE_TEST_WEBHOOK}
";

#[test]
fn every_channel_hears_about_start_and_promotion() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(Server::start(vec![Canned::json(200, "{}")]));
    let base = format!("http://{}", server.addr);
    let tmp = tempfile::tempdir().unwrap();
    let bare = seeded_remote(
        tmp.path(),
        &[
            ("apps/web.yaml", &canary("v1")),
            (".sluice/config.yaml", SETTINGS),
        ],
    );
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
    let workdir = tmp.path().join("w");
    let env = [
        ("SLUICE_TEST_SLACK".to_string(), format!("{base}/slack")),
        ("SLUICE_TEST_TEAMS".to_string(), format!("{base}/teams")),
        ("SLUICE_TEST_DISCORD".to_string(), format!("{base}/discord")),
        ("SLUICE_TEST_WEBHOOK".to_string(), format!("{base}/webhook")),
    ];
    // Each tick runs at this clock's time, jumped past the canary's 1 s interval between.
    let clock = crate::support::Stepped::default();
    let tick = || {
        let mut env = env.to_vec();
        env.push(clock.env());
        reconcile(&bare, &workdir, &env)
    };
    tick();
    git(&human, &["pull", "-q", "origin", "main"]);
    human_commit(&human, "apps/web.yaml", &canary("v2"), "web: v2");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !git(&bare, &["show", "main:.sluice/status/shop/web.yaml"]).contains("phase: Succeeded") {
        assert!(Instant::now() < deadline, "the rollout did not finish");
        tick();
        clock.jump(Duration::from_millis(1100));
    }
    let requests = server.requests();
    let body = |path: &str, n: usize| -> Json {
        let r = requests
            .iter()
            .filter(|r| r.target == path)
            .nth(n)
            .unwrap_or_else(|| panic!("no request {n} to {path}"));
        serde_json::from_slice(&r.body).unwrap()
    };
    assert!(body("/slack", 0)["text"]
        .as_str()
        .unwrap()
        .contains("shop/web: New revision detected! Scaling up web.shop"));
    assert!(body("/slack", 1)["text"]
        .as_str()
        .unwrap()
        .contains("Promotion completed!"));
    assert!(body("/discord", 1)["content"]
        .as_str()
        .unwrap()
        .contains("Promotion completed!"));
    let teams = body("/teams", 0);
    assert_eq!(teams["@type"], "MessageCard");
    assert_eq!(teams["title"], "sluice: shop/web started");
    assert_eq!(body("/webhook", 0)["event"], "started");
    let promoted = body("/webhook", 1);
    assert_eq!(
        (promoted["event"].as_str(), promoted["phase"].as_str()),
        (Some("promoted"), Some("Succeeded"))
    );
    assert_eq!(
        requests.iter().filter(|r| r.target == "/webhook").count(),
        2,
        "only the events that matter"
    );
}
