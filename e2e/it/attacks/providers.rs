//! See `../attacks.rs`. Metric backends and webhook gates that echo what they received: the
//! credentials sluice sent them (headers, basic auth, query parameters) come back in an error
//! body. sluice writes its own message with the HTTP status into commits and status files,
//! and logs at most a redacted start of the body, so no credential (nor its base64 form)
//! reaches git, the logs, `/metrics` or `validate`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::redact::base64;

use crate::metrics::support::{loop_canary, loop_deployment, phase, Canned, Server};
use crate::metrics::vendor_loop::{self, Mapped, Vendor};
use crate::support::{free_port, git, git_ok, http, human_clone, human_commit, seeded_remote};

/// Every echoed body starts with this: it must never be committed.
const MARKER: &str = "ECHOED-BY-THE-BACKEND";

/// `sluice run` polling every second, its log in a file; killed when dropped.
struct Daemon {
    child: Child,
    log: PathBuf,
    addr: String,
}

impl Daemon {
    fn start(tmp: &Path, bare: &Path, env: &[(String, String)]) -> Daemon {
        let addr = format!("127.0.0.1:{}", free_port());
        let log = tmp.join("daemon.log");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "--repo", &bare.display().to_string(), "--poll", "1s"])
            .args(["--listen", &addr, "--workdir"])
            .arg(tmp.join("d"))
            .env_remove("SLUICE_LOG")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("sluice run");
        Daemon { child, log, addr }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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

/// Where each leak would show: the name of the place and its text.
fn places(
    daemon: &Daemon,
    bare: &Path,
    human: &Path,
    env: &[(String, String)],
) -> Vec<(String, String)> {
    let (_, metrics) = http(&daemon.addr, "GET", "/metrics", &[], b"");
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
        (
            "the daemon's log".into(),
            std::fs::read_to_string(&daemon.log).expect("log"),
        ),
    ]
}

/// Every vendor's fake, Prometheus' and a webhook gate's answer 401 with what they received;
/// the canaries fail their checks and roll back, and no credential is anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echoed_credentials_reach_neither_git_nor_logs_nor_metrics() {
    let echo = |r: &_| Canned::echo(401, MARKER, r);
    let tmp = tempfile::tempdir().unwrap();
    let secrets_dir = tmp.path().join("secrets");
    let mut env = vec![(
        "SLUICE_SECRETS_DIR".to_string(),
        secrets_dir.display().to_string(),
    )];
    let mut secrets: Vec<String> = Vec::new();
    let mut files: Vec<(String, String)> = Vec::new();
    let mut fakes: Vec<Arc<Server>> = Vec::new();
    let mut apps: Vec<String> = Vec::new();
    let write_secret = |kind: &str, key: &str, value: &str| {
        let dir = secrets_dir.join("test").join(kind);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(key), format!("{value}\n")).unwrap();
    };
    for vendor in vendor_loop::ALL.into_iter().chain([&PROMETHEUS]) {
        let kind = vendor.kind;
        let fake = Arc::new(Server::start_routed(echo).await);
        for (key, _) in vendor.keys {
            let value = credential(kind, key);
            match vendor.mapped {
                Mapped::Env => env.push((vendor_loop::env_var(kind, key), value.clone())),
                Mapped::Files => write_secret(kind, key, &value),
                Mapped::Environment { .. } => env.push((key.to_string(), value.clone())),
            }
            secrets.push(value);
        }
        if let Mapped::Environment { endpoint_var, .. } = vendor.mapped {
            env.push((endpoint_var.to_string(), fake.url()));
        }
        let template = vendor_loop::template(kind, vendor, &fake.url(), kind);
        files.push((format!("apps/{kind}/metrics.yaml"), template));
        files.push((
            format!("apps/{kind}/canary.yaml"),
            vendor_loop::canary(kind),
        ));
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
    let hook = Arc::new(Server::start_routed(echo).await);
    files.push((
        "apps/hooked/canary.yaml".into(),
        hooked_canary("hooked", &hook.url()),
    ));
    for app in apps.iter().map(String::as_str).chain(["hooked"]) {
        files.push((
            format!("apps/{app}/deployment.yaml"),
            loop_deployment(app, &format!("{app}:1")),
        ));
    }
    let seed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let bare = seeded_remote(tmp.path(), &seed);
    let daemon = Daemon::start(tmp.path(), &bare, &env);
    let human = human_clone(&bare.display().to_string(), &tmp.path().join("human"));
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
        for secret in &secrets {
            for form in [secret.clone(), base64(secret.as_bytes())] {
                assert!(
                    !text.contains(&form),
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
