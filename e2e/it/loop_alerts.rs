//! Flagger's alerts through the loop: canaries with `analysis.alerts` tick against a real
//! `git daemon` with the live observer, and local HTTP servers stand in for Slack, Teams,
//! Discord, Rocket.Chat and Google Chat. Each server gets the JSON Flagger's notifier sends,
//! on the events Flagger alerts on, filtered by severity and silenced by `muteAlert`; Secret
//! addresses come from the environment the operator maps, proxies are used.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value as Json};
use sluice::core::status::Phase;
use sluice::observer::Live;
use sluice::runtime::Runtime;

use crate::support::canary::traefik;
use crate::support::metrics::{Canned, Recorded, Server};
use crate::support::rollout::World;

fn canary(analysis: &str) -> String {
    traefik().threshold(None).yaml(analysis)
}

fn provider(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1\nkind: AlertProvider\nmetadata: {{name: {name}, namespace: prod}}\nspec: {spec}\n---\n"
    )
}

fn runtime(env: &[(&str, String)]) -> Runtime {
    let mut vars: BTreeMap<String, String> = std::env::vars().collect();
    for (k, v) in env {
        vars.insert(k.to_string(), v.clone());
    }
    // No Secret volume: only the variables map Secrets.
    let empty = tempfile::tempdir().unwrap();
    vars.insert(
        "SLUICE_SECRETS_DIR".into(),
        empty.path().join("none").display().to_string(),
    );
    Runtime::with_env(vars).unwrap()
}

/// Ticks with the live observer until a commit leaves the canary in `phase`.
fn until(world: &mut World, rt: &Runtime, phase: Phase) {
    world.until_with(&Live::new(rt), rt, phase);
}

/// The requests a server got at `path`.
fn at(server: &Server, path: &str) -> Vec<Recorded> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.target == path)
        .collect()
}

/// The message texts of Slack-format bodies.
fn texts(requests: &[Recorded]) -> Vec<String> {
    requests
        .iter()
        .map(|r| {
            r.json()["attachments"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

const INITIALIZED: &str = "New Deployment detected, initialization completed.";
const NEW_REVISION: &str = "New revision detected, progressing canary analysis.";
const PROMOTED: &str = "Canary analysis completed successfully, promotion finished.";

#[test]
fn every_provider_type_gets_flaggers_json_on_flaggers_events() {
    let servers = runtime(&[]);
    let server = servers.block_on(Server::start(vec![Canned::json(200, "{}")]));
    // The proxy answers for the host it is asked for, which does not resolve.
    let proxy = servers.block_on(Server::start(vec![Canned::json(200, "{}")]));
    let base = server.url();
    let rt = runtime(&[
        (
            "SLUICE_SECRET_PROD__GCHAT_URL__ADDRESS",
            format!("{base}/gchat\n"),
        ),
        (
            "SLUICE_SECRET_PROD__SLACK_TOKEN__ADDRESS",
            format!("{base}/slack-token"),
        ),
        (
            "SLUICE_SECRET_PROD__SLACK_TOKEN__TOKEN",
            "xoxb-secret".into(),
        ),
    ]);
    let providers = [
        provider(
            "slack",
            &format!("{{type: slack, channel: ops, username: bot, address: '{base}/slack'}}"),
        ),
        provider(
            "teams",
            &format!("{{type: msteams, address: '{base}/teams'}}"),
        ),
        provider(
            "discord",
            &format!("{{type: discord, address: '{base}/discord'}}"),
        ),
        provider(
            "rocket",
            &format!("{{type: rocket, channel: ops, address: '{base}/rocket'}}"),
        ),
        provider("gchat", "{type: gchat, secretRef: {name: gchat-url}}"),
        provider(
            "slack-token",
            "{type: slack, secretRef: {name: slack-token}}",
        ),
        provider(
            "unmapped",
            "{type: slack, secretRef: {name: nobody-mapped-this}}",
        ),
        provider(
            "proxied",
            &format!(
                "{{type: slack, address: 'http://alerts.invalid/hook', proxy: '{}'}}",
                proxy.url()
            ),
        ),
    ]
    .concat();
    let alerts: String = [
        "slack",
        "teams",
        "discord",
        "rocket",
        "gchat",
        "slack-token",
        "unmapped",
        "proxied",
    ]
    .iter()
    .map(|n| format!("      - {{name: {n}, providerRef: {{name: {n}}}}}\n"))
    .collect();
    let analysis = format!("    stepWeight: 20\n    maxWeight: 40\n    alerts:\n{alerts}");
    let mut world = World::with_files(&canary(&analysis), &[("apps/alerts.yaml", &providers)]);

    until(&mut world, &rt, Phase::Initialized);
    world.new_revision("6.7.1");
    until(&mut world, &rt, Phase::Succeeded);

    let slack = at(&server, "/slack");
    assert_eq!(texts(&slack), [INITIALIZED, NEW_REVISION, PROMOTED]);
    let metadata = json!([
        {"title": "Target", "value": "Deployment/podinfo.prod", "short": false},
        {"title": "Failed checks threshold", "value": "1", "short": false},
        {"title": "Progress deadline", "value": "600s", "short": false},
        {"title": "Traffic routing", "value": "Weight step: 20 max: 40", "short": false},
    ]);
    assert_eq!(
        slack[1].json(),
        json!({
            "channel": "ops",
            "username": "bot",
            "icon_url": "",
            "icon_emoji": ":rocket:",
            "attachments": [{
                "color": "good",
                "author_name": "podinfo.prod",
                "text": NEW_REVISION,
                "mrkdwn_in": ["text"],
                "fields": metadata,
            }],
        })
    );
    assert_eq!(slack[2].json()["attachments"][0]["fields"], json!([]));
    assert_eq!(slack[0].header("content-type"), Some("application/json"));
    assert_eq!(slack[0].header("authorization"), None);

    let teams = at(&server, "/teams");
    assert_eq!(teams.len(), 3);
    assert_eq!(
        teams[2].json(),
        json!({
            "@type": "MessageCard",
            "@context": "http://schema.org/extensions",
            "themeColor": "0076D7",
            "summary": "podinfo.prod",
            "sections": [{"activityTitle": PROMOTED, "activitySubtitle": "podinfo.prod", "facts": []}],
        })
    );

    // Discord: its Slack-compatible endpoint, Flagger's defaults for channel and username.
    let discord = at(&server, "/discord/slack");
    assert_eq!(texts(&discord), [INITIALIZED, NEW_REVISION, PROMOTED]);
    assert_eq!(
        (
            discord[0].json()["channel"].clone(),
            discord[0].json()["username"].clone()
        ),
        (json!("general"), json!("flagger"))
    );
    assert_eq!(discord[0].json()["attachments"][0]["color"], "good");

    let rocket = at(&server, "/rocket");
    assert_eq!(texts(&rocket), [INITIALIZED, NEW_REVISION, PROMOTED]);
    assert_eq!(rocket[0].json()["attachments"][0]["color"], "#0076D7");
    assert_eq!(rocket[0].json()["channel"], "ops");

    // Google Chat's URL came from the mapped Secret (its trailing line break cut).
    let gchat = at(&server, "/gchat");
    assert_eq!(gchat.len(), 3);
    assert_eq!(
        gchat[2].json(),
        json!({"cards": [{
            "header": {"title": "Flagger", "subtitle": "podinfo.prod", "imageUrl": "https://flagger.app/favicon.png"},
            "sections": [{"widgets": [{"textParagraph": {"text": format!("<font color=#848484><strong>{PROMOTED}</strong></font>")}}]}],
        }]})
    );

    // Slack with a Secret: its token goes as a bearer token.
    let token = at(&server, "/slack-token");
    assert_eq!(token.len(), 3);
    assert_eq!(token[0].header("authorization"), Some("Bearer xoxb-secret"));

    // Through the proxy: the request names the host it is for.
    let proxied = at(&proxy, "http://alerts.invalid/hook");
    assert_eq!(texts(&proxied), [INITIALIZED, NEW_REVISION, PROMOTED]);

    // The unmapped Secret sent nothing, and nothing else went anywhere.
    assert_eq!(server.requests().len(), 6 * 3, "{:?}", targets(&server));
}

fn targets(server: &Server) -> Vec<String> {
    server.requests().into_iter().map(|r| r.target).collect()
}

#[test]
fn severities_filter_alerts_and_a_rollback_is_an_error_for_all() {
    let rt = runtime(&[]);
    let server = rt.block_on(Server::start(vec![Canned::json(200, "{}")]));
    let base = server.url();
    let providers = ["info", "warn", "error", "unset"]
        .iter()
        .map(|n| provider(n, &format!("{{type: slack, address: '{base}/{n}'}}")))
        .collect::<String>();
    // No Prometheus is configured, so the metric's every check fails.
    let analysis = "    stepWeight: 20
    maxWeight: 40
    threshold: 2
    metrics:
      - name: request-success-rate
        thresholdRange: {min: 99}
    alerts:
      - {name: i, severity: info, providerRef: {name: info}}
      - {name: w, severity: warn, providerRef: {name: warn}}
      - {name: e, severity: error, providerRef: {name: error}}
      - {name: u, providerRef: {name: unset, namespace: prod}}";
    let mut world = World::with_files(&canary(analysis), &[("apps/alerts.yaml", &providers)]);
    until(&mut world, &rt, Phase::Initialized);
    world.new_revision("6.7.1");
    until(&mut world, &rt, Phase::Failed);

    let failed = "Failed checks threshold reached 2";
    assert_eq!(
        texts(&at(&server, "/info")),
        [INITIALIZED, NEW_REVISION, failed]
    );
    assert_eq!(
        texts(&at(&server, "/unset")),
        [INITIALIZED, NEW_REVISION, failed]
    );
    assert_eq!(texts(&at(&server, "/warn")), [failed]);
    assert_eq!(texts(&at(&server, "/error")), [failed]);
    let error = at(&server, "/error");
    assert_eq!(error[0].json()["attachments"][0]["color"], "danger");
    assert_eq!(error[0].json()["attachments"][0]["fields"], json!([]));
}

#[test]
fn mute_alert_silences_only_its_own_gate() {
    let servers = runtime(&[]);
    let alerts = servers.block_on(Server::start(vec![Canned::json(200, "{}")]));
    // The repo's own notifications hear about waits as Flagger's global notifier does.
    let rt = runtime(&[(
        "SLUICE_TEST_MUTED_WEBHOOK",
        format!("{}/notify", alerts.url()),
    )]);
    let open = Arc::new(AtomicBool::new(false));
    let gate = {
        let open = Arc::clone(&open);
        servers.block_on(Server::start_with(move |_| {
            if open.load(Ordering::SeqCst) {
                Canned::json(200, "{}")
            } else {
                Canned::json(403, "{}")
            }
        }))
    };
    let base = alerts.url();
    let providers = ["info", "warn"]
        .iter()
        .map(|n| provider(n, &format!("{{type: msteams, address: '{base}/{n}'}}")))
        .collect::<String>();
    let hooks = gate.url();
    let analysis = format!(
        "    stepWeight: 20
    maxWeight: 40
    webhooks:
      - {{name: rollout-gate, type: confirm-rollout, url: '{hooks}/rollout', muteAlert: true}}
      - {{name: promotion-gate, type: confirm-promotion, url: '{hooks}/promotion'}}
    alerts:
      - {{name: i, severity: info, providerRef: {{name: info}}}}
      - {{name: w, severity: warn, providerRef: {{name: warn}}}}"
    );
    let settings = "apiVersion: sluice.dev/v1alpha1
kind: Config
notifications:
  - {kind: webhook, urlEnv: SLUICE_TEST_MUTED_WEBHOOK}
";
    let mut world = World::with_files(
        &canary(&analysis),
        &[
            ("apps/alerts.yaml", &providers),
            (".sluice/config.yaml", settings),
        ],
    );
    open.store(true, Ordering::SeqCst);
    until(&mut world, &rt, Phase::Initialized);
    open.store(false, Ordering::SeqCst);
    world.new_revision("6.7.1");
    until(&mut world, &rt, Phase::Waiting);
    open.store(true, Ordering::SeqCst);
    until(&mut world, &rt, Phase::Progressing);
    // Let the steps run, then close the gate before the promotion.
    open.store(false, Ordering::SeqCst);
    until(&mut world, &rt, Phase::WaitingApproval);
    open.store(true, Ordering::SeqCst);
    until(&mut world, &rt, Phase::Succeeded);

    let titles = |path: &str| -> Vec<String> {
        at(&alerts, path)
            .iter()
            .map(|r| {
                r.json()["sections"][0]["activityTitle"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let waiting = "Canary promotion is waiting for approval.";
    assert_eq!(titles("/warn"), [waiting]);
    assert_eq!(
        titles("/info"),
        [INITIALIZED, NEW_REVISION, waiting, PROMOTED]
    );
    let events: Vec<Json> = at(&alerts, "/notify")
        .iter()
        .map(|r| r.json()["event"].clone())
        .collect();
    assert_eq!(
        events,
        [
            json!("started"),
            json!("waitingForApproval"),
            json!("promoted")
        ]
    );
    let warn = at(&alerts, "/warn");
    assert_eq!(warn[0].json()["themeColor"], "0076D7");
    assert_eq!(warn[0].json()["sections"][0]["facts"], Json::Array(vec![]));
}

#[test]
fn a_provider_ref_to_nothing_fails_validate_and_never_starts() {
    let analysis = "    stepWeight: 20
    maxWeight: 40
    alerts:
      - name: on-call
        providerRef:
          name: slack";
    let mut world = World::with_files(&canary(analysis), &[]);
    let want = "apps/podinfo/canary.yaml:22: spec.analysis.alerts[0].providerRef.name: alert provider prod/slack not found";

    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("canary.yaml");
    std::fs::write(&path, canary(analysis)).unwrap();
    let (code, stdout, stderr) = crate::support::run_sluice(&["validate", path.to_str().unwrap()]);
    let printed = format!("{stdout}{stderr}");
    assert_eq!(code, 1, "{printed}");
    let line = want.replace("apps/podinfo/canary.yaml", &path.display().to_string());
    assert!(printed.contains(&line), "{printed}");

    let rt = runtime(&[]);
    let live = Live::new(&rt);
    for _ in 0..3 {
        let r = world.tick_with(&live, &rt);
        let errors: Vec<String> = r.spec_errors.iter().map(|e| e.to_string()).collect();
        assert!(errors.iter().any(|e| e.starts_with(want)), "{errors:?}");
        assert_eq!((r.commits, r.outcomes.len()), (0, 0), "{:?}", r.outcomes);
    }
    assert!(crate::support::rollout::sluice_commits(&world.bare).is_empty());
}
