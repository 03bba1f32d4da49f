//! See `../attacks.rs`. Metric backends and webhook gates that echo what they received: the
//! credentials sluice sent them (headers, basic auth, query parameters) come back in an error
//! body, as they are and in the forms a backend may turn them into (URL-encoded, hex, upper
//! case, split by a line break, base64 of the whole header value). sluice writes its own
//! message with the HTTP status into commits and status files, and logs at most a redacted
//! start of the body, so no credential (in any of those forms) reaches git, the logs,
//! `/metrics` or `validate`. And a backend that answers slowly: it
//! holds its own canaries' decisions, never the other canaries'.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::redact::base64;

use crate::support::metrics::{
    loop_canary, loop_deployment, phase, Canned, Hold, Recorded, Server,
};
use crate::support::vendors::{self, influx_answer, Mapped, Vendor};
use crate::support::{
    git, git_ok, http, human_clone, human_commit, seeded_remote, sluice_daemon, str_pairs, Daemon,
};

/// Every echoed body starts with this: it must never be committed.
const MARKER: &str = "ECHOED-BY-THE-BACKEND";

/// A remote in `tmp` seeded with `files`, `sluice run` on it polling every second (logging
/// at its default level, with `env` added), and a human's clone of it.
fn on_new_remote(
    tmp: &Path,
    files: &[(String, String)],
    env: &[(String, String)],
) -> (PathBuf, Daemon, PathBuf) {
    let bare = seeded_remote(tmp, &str_pairs(files));
    let mut daemon = sluice_daemon(&bare, &tmp.join("d")).poll("1s").log(None);
    for (key, value) in env {
        daemon = daemon.env(key, value);
    }
    let daemon = daemon.start();
    let human = human_clone(&bare.display().to_string(), &tmp.join("human"));
    (bare, daemon, human)
}

/// `<phase>:<weight>` of canary `test/<app>` at the remote's main, empty before it has a status.
fn phase_of(bare: &Path, app: &str) -> String {
    let file = format!("main:.sluice/status/test/{app}.yaml");
    if git_ok(bare, &["cat-file", "-e", &file]) {
        phase(bare, app)
    } else {
        String::new()
    }
}

/// A credential distinct enough to grep for: `kind`, `key` and a fixed tail.
fn credential(kind: &str, key: &str) -> String {
    if key == "newrelic_account_id" {
        // New Relic puts it in the path; its accounts are numbers.
        return "90210314159".to_string();
    }
    format!("{kind}-{key}-Zq7Wv3Lp9", key = key.replace('_', "-"))
}

/// A canary whose confirm-rollout gate is the hook at `url` (and no metric).
fn hooked_canary(name: &str, url: &str) -> String {
    loop_canary(
        name,
        &format!(
            "      []\n    webhooks:\n      - name: gate\n        type: confirm-rollout\n        url: {url}\n"
        ),
    )
}

/// Prometheus as the vendor table spells a provider: basic auth from Secret files.
const PROMETHEUS: Vendor = Vendor {
    kind: "prometheus",
    address_path: "",
    query: "sum(rate(http_requests_total{app=\"{{ target }}\"}[{{ interval }}]))\n",
    keys: &[("username", ""), ("password", "")],
    mapped: Mapped::Files,
    answer: |_| Canned::new(500, ""),
    check: |_, _| {},
};

/// Maps [`credential`]s for each key of `vendor`, as the vendor table says (variables in
/// `env`, files under `secrets_dir`), and points CloudWatch's endpoint at `fake`; returns them.
fn map_credentials(
    vendor: &Vendor,
    secrets_dir: &Path,
    fake: &Server,
    env: &mut Vec<(String, String)>,
) -> Vec<String> {
    let kind = vendor.kind;
    let mut values = Vec::new();
    for (key, _) in vendor.keys {
        let value = credential(kind, key);
        match vendor.mapped {
            Mapped::Env => env.push((vendors::env_var(kind, key), value.clone())),
            Mapped::Files => {
                let dir = secrets_dir.join("test").join(kind);
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join(key), format!("{value}\n")).unwrap();
            }
            Mapped::Environment { .. } => env.push((key.to_string(), value.clone())),
        }
        values.push(value);
    }
    if let Mapped::Environment { endpoint_var, .. } = vendor.mapped {
        env.push((endpoint_var.to_string(), fake.url()));
    }
    values
}

/// The files of app `<vendor.kind>`: its canary and the template reaching `fake`, the
/// Deployment at image `:1`.
fn app(vendor: &Vendor, fake: &Server) -> Vec<(String, String)> {
    let kind = vendor.kind;
    vec![
        (
            format!("apps/{kind}/metrics.yaml"),
            vendors::template(kind, vendor, &fake.url(), kind),
        ),
        (format!("apps/{kind}/canary.yaml"), vendors::canary(kind)),
        (
            format!("apps/{kind}/deployment.yaml"),
            loop_deployment(kind, &format!("{kind}:1")),
        ),
    ]
}

/// Where each leak would show: the name of the place and its text.
fn places(
    daemon: &Daemon,
    bare: &Path,
    human: &Path,
    env: &[(String, String)],
) -> Vec<(String, String)> {
    let (_, metrics) = http(daemon.main(), "GET", "/metrics", &[], b"");
    let validate = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("validate")
        .current_dir(human)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("sluice validate");
    let status = git(bare, &["grep", "-h", "", "main", "--", ".sluice/status"]);
    vec![
        ("history".into(), git(bare, &["log", "-p", "--all"])),
        ("status files".into(), status),
        ("/metrics".into(), metrics),
        (
            "validate".into(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&validate.stdout),
                String::from_utf8_lossy(&validate.stderr)
            ),
        ),
        ("the daemon's log".into(), daemon.log()),
    ]
}

/// Answers 401 with what each request held, each credential header's value first in the forms
/// a backend may turn it into (upper case, hex, URL-encoded, split by a raw or escaped line
/// break, base64 of the whole value: `Bearer <token>` as one), half of them in one answer and
/// the other half in the next, so that they fit in the start of an answer sluice logs.
fn echo_in_every_form() -> impl Fn(&Recorded) -> Canned + Send + Sync + 'static {
    let answered = std::sync::atomic::AtomicUsize::new(0);
    move |request: &Recorded| {
        let odd = answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 2 == 1;
        let mut body = String::new();
        for (name, value) in &request.headers {
            let name = name.to_ascii_lowercase();
            if !["auth", "key", "token"].iter().any(|w| name.contains(w)) {
                continue;
            }
            let half = (1..=value.len() / 2)
                .rev()
                .find(|i| value.is_char_boundary(*i))
                .unwrap_or(0);
            let (a, b) = value.split_at(half);
            let forms = if odd {
                vec![
                    percent_encoding::utf8_percent_encode(
                        value,
                        percent_encoding::NON_ALPHANUMERIC,
                    )
                    .to_string(),
                    base64(value.as_bytes()),
                    format!("{a}\\n{b}"),
                ]
            } else {
                vec![
                    value.to_uppercase(),
                    hex::encode(value),
                    format!("{a}\n{b}"),
                ]
            };
            for form in forms {
                body.push_str(&format!("{form}\n"));
            }
        }
        let mut answer = Canned::echo(401, MARKER, request);
        body.push_str(&String::from_utf8_lossy(&answer.body));
        answer.body = body.into_bytes();
        answer
    }
}

/// `text` as a reader would search it for a credential: line breaks (raw and escaped) left
/// out, in lower case.
fn folded(text: &str) -> String {
    text.replace("\\n", "")
        .replace("\\r", "")
        .replace(['\n', '\r'], "")
        .to_lowercase()
}

/// The forms of `secret` that must appear nowhere.
fn forms_of(secret: &str) -> Vec<String> {
    vec![
        secret.to_string(),
        base64(secret.as_bytes()),
        base64(format!("Bearer {secret}").as_bytes()),
        hex::encode(secret),
        percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
            .to_string(),
    ]
}

/// Every vendor's fake, Prometheus' and a webhook gate's answer 401 with what they received, in
/// every form; the canaries fail their checks and roll back, and no credential is anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echoed_credentials_reach_neither_git_nor_logs_nor_metrics() {
    let echo = echo_in_every_form;
    let tmp = tempfile::tempdir().unwrap();
    let secrets_dir = tmp.path().join("secrets");
    let mut env = vec![
        (
            "SLUICE_SECRETS_DIR".to_string(),
            secrets_dir.display().to_string(),
        ),
        // Every backend is a fake that answers 401 whatever the time: the canaries' intervals
        // are jumped over (see `support::DaemonBuilder::stepped`).
        (sluice::clock::VAR.to_string(), "stepped".to_string()),
    ];
    let mut secrets: Vec<String> = Vec::new();
    let mut files: Vec<(String, String)> = Vec::new();
    let mut fakes: Vec<Arc<Server>> = Vec::new();
    let mut apps: Vec<String> = Vec::new();
    for vendor in vendors::ALL.into_iter().chain([&PROMETHEUS]) {
        let kind = vendor.kind;
        let fake = Arc::new(Server::start_routed(echo()).await);
        secrets.extend(map_credentials(vendor, &secrets_dir, &fake, &mut env));
        files.extend(app(vendor, &fake));
        apps.push(kind.to_string());
        fakes.push(fake);
    }
    // Basic auth carries the pair in base64.
    let pair = |kind: &str| {
        format!(
            "{}:{}",
            credential(kind, "username"),
            credential(kind, "password")
        )
    };
    secrets.extend([pair("prometheus"), pair("graphite")]);
    let hook = Arc::new(Server::start_routed(echo()).await);
    files.push((
        "apps/hooked/canary.yaml".into(),
        hooked_canary("hooked", &hook.url()),
    ));
    files.push((
        "apps/hooked/deployment.yaml".into(),
        loop_deployment("hooked", "hooked:1"),
    ));
    let (bare, daemon, human) = on_new_remote(tmp.path(), &files, &env);
    tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !apps
            .iter()
            .chain([&"hooked".to_string()])
            .all(|a| phase_of(&bare, a).starts_with("Initialized"))
        {
            assert!(Instant::now() < deadline, "never initialized");
            std::thread::sleep(Duration::from_millis(200));
        }
        git(&human, &["pull", "-q", "origin", "main"]);
        for app in apps.iter().map(String::as_str).chain(["hooked"]) {
            let path = format!("apps/{app}/deployment.yaml");
            human_commit(
                &human,
                &path,
                &loop_deployment(app, &format!("{app}:2")),
                app,
            );
        }
        // Each metric canary rolls back after two failed checks; the gate is asked twice.
        while !(apps
            .iter()
            .all(|a| phase_of(&bare, a).starts_with("Failed"))
            && hook.requests().len() >= 2)
        {
            let phases: Vec<String> = apps.iter().map(|a| phase_of(&bare, a)).collect();
            assert!(Instant::now() < deadline, "timed out: {phases:?}");
            std::thread::sleep(Duration::from_millis(300));
        }
        git(&human, &["pull", "-q", "origin", "main"]);
    });
    for fake in fakes.iter().chain([&hook]) {
        assert!(!fake.requests().is_empty(), "every backend was asked");
    }
    let places = tokio::task::block_in_place(|| places(&daemon, &bare, &human, &env));
    let log = &places[4].1;
    assert!(
        log.contains("answer=") && log.contains("[redacted]"),
        "the answers are logged, redacted:\n{log}"
    );
    let history = &places[0].1;
    assert!(
        history.contains("HTTP 401"),
        "the status is committed:\n{history}"
    );
    for (place, text) in &places {
        let searched = folded(text);
        for secret in &secrets {
            for form in forms_of(secret) {
                assert!(
                    !searched.contains(&folded(&form)),
                    "{form} ({secret}) in {place}:\n{text}"
                );
            }
        }
        if place != "the daemon's log" {
            assert!(
                !text.contains(MARKER),
                "a backend's body in {place}:\n{text}"
            );
        }
    }
}

/// Whether canary `app` has passed a metric check and moved on (one 50 % step, then promoted).
fn promoted(bare: &Path, app: &str) -> bool {
    let p = phase_of(bare, app);
    p.starts_with("Promoting") || p.starts_with("Finalising") || p.starts_with("Succeeded")
}

/// Bumps the images of `apps` to `:2` in one commit from the human clone, so that their
/// canaries step, and are checked, in the same ticks.
fn bump(human: &Path, apps: &[&str]) {
    git(human, &["pull", "-q", "origin", "main"]);
    let path = |app: &str| format!("apps/{app}/deployment.yaml");
    let image = |app: &str| loop_deployment(app, &format!("{app}:2"));
    let (last, first) = apps.split_last().expect("an app");
    for app in first {
        std::fs::write(human.join(path(app)), image(app)).unwrap();
        git(human, &["add", &path(app)]);
    }
    human_commit(human, &path(last), &image(last), "new images");
}

/// A Prometheus answer within the canaries' threshold (`max: 1`).
const PROMETHEUS_WITHIN: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0.5"]}]}}"#;

/// InfluxDB (timeout 15 s) holds its answers until the test releases them. Two canaries get a
/// new revision in one commit and are checked in the same ticks: one on InfluxDB, one on a
/// Prometheus that answers at once. While the InfluxDB query is held, the Prometheus canary
/// passes its check and is promoted: its decision did not wait for InfluxDB, since no query
/// to InfluxDB has given up yet. Released, the held answer decides the InfluxDB canary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_provider_holds_only_its_own_canaries() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets_dir = tmp.path().join("secrets");
    let mut env = vec![(
        "SLUICE_SECRETS_DIR".to_string(),
        secrets_dir.display().to_string(),
    )];
    let hold = Hold::new();
    let held = hold.clone();
    let influx = Server::start_routed(move |_| {
        Canned::new(200, influx_answer("0.5"))
            .header("Content-Type", "text/csv; charset=utf-8")
            .held(&held)
    })
    .await;
    let prometheus = Server::start(vec![Canned::json(200, PROMETHEUS_WITHIN)]).await;
    let slow = &vendors::INFLUXDB;
    let mut files = Vec::new();
    for (vendor, fake) in [(slow, &influx), (&PROMETHEUS, &prometheus)] {
        map_credentials(vendor, &secrets_dir, fake, &mut env);
        files.extend(app(vendor, fake));
    }
    let (bare, daemon, human) = on_new_remote(tmp.path(), &files, &env);
    tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(60);
        let wait = |what: &str, done: &dyn Fn() -> bool| {
            while !done() {
                assert!(Instant::now() < deadline, "timed out waiting: {what}");
                std::thread::sleep(Duration::from_millis(100));
            }
        };
        wait("initialized", &|| {
            ["influxdb", "prometheus"]
                .iter()
                .all(|a| phase_of(&bare, a).starts_with("Initialized"))
        });
        bump(&human, &["influxdb", "prometheus"]);
        wait("a query held by InfluxDB", &|| {
            !influx.requests().is_empty()
        });
        wait("the Prometheus canary promoted", &|| {
            promoted(&bare, "prometheus")
        });
        assert_eq!(
            hold.gave_up(),
            0,
            "the Prometheus canary was decided only after sluice gave up on InfluxDB:\n{}\n{}",
            git(&bare, &["log", "--format=%ci %s", "main"]),
            daemon.log()
        );
        hold.release();
        wait("the InfluxDB canary promoted", &|| {
            promoted(&bare, "influxdb")
        });
    });
    let history = git(&bare, &["log", "--format=%B", "main"]);
    assert!(!history.contains("timed out"), "{history}");
    assert_eq!(hold.gave_up(), 0, "the held answer was used");
}
