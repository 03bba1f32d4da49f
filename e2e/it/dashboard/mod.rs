//! The dashboard in a real browser (Debian's headless Chromium through chromedriver, see
//! `support/webdriver.rs`), against the real binary:
//!
//! - during a real rollout (`sluice run` on a `git daemon` remote, metrics from the embedded
//!   Prometheus endpoint the demo uses), the overview shows the weight change without a
//!   reload; the canary page's weight chart has one point per decision commit with the
//!   weights `sluice history -o json` prints; a failed metric is marked failed; screenshots
//!   of both pages mid-rollout and after a rollback, at 1280x800 and 390x844, go to
//!   `target/dashboard-screenshots/`;
//! - repo text carrying script (commit subjects and bodies, trailers, approver logins, a
//!   refused spec's value) executes nothing and reads literally;
//! - with `--dashboard-auth-file`, no credentials get 401 and no canary data;
//! - a judged canary's page shows the judge's tables (`judge.rs`);
//! - no element reaches past the viewport at 390 px or 1280 px (`layout.rs`).

mod grafana;
mod judge;
mod layout;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use sluice::cli::demo_prometheus::{self, Script};

use crate::support::dashboard::{
    dashboard_in_browser, initialized, screenshots, sluice_dashboard, Process, DESKTOP, PHONE,
};
use crate::support::metrics::{loop_canary, loop_deployment};
use crate::support::webdriver::Browser;
use crate::support::{
    free_port, history_json, http, human_clone, human_commit, seeded_remote, GitDaemon,
};

fn wait_http_ok(addr: &str, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ok = std::net::TcpStream::connect(addr).is_ok()
            && http(addr, "GET", path, &[], b"").0 == 200;
        if ok {
            return;
        }
        assert!(Instant::now() < deadline, "{addr}{path} never answered 200");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A canary judged by the built-in success rate with `min`, stepping 20 up to 60.
fn stepped_canary(name: &str, min: &str) -> String {
    loop_canary(
        name,
        &format!("      - name: request-success-rate\n        thresholdRange: {{min: {min}}}\n        interval: 2s\n"),
    )
    .replace("    stepWeight: 50\n    maxWeight: 50", "    stepWeight: 20\n    maxWeight: 60")
}

fn phase_of(addr: &str, canary: &str) -> String {
    let (_, body) = http(addr, "GET", "/api/v1/canaries", &[], b"");
    let all: Json = serde_json::from_str(&body).unwrap_or(Json::Null);
    all["canaries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| {
            format!(
                "{}/{}",
                c["namespace"].as_str().unwrap_or(""),
                c["name"].as_str().unwrap_or("")
            ) == canary
        })
        .and_then(|c| c["phase"].as_str())
        .unwrap_or("")
        .to_string()
}

fn wait_phase(addr: &str, canary: &str, phase: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while phase_of(addr, canary) != phase {
        assert!(Instant::now() < deadline, "{canary} never reached {phase}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Screenshots of `url` at both sizes, named `name-desktop.png` and `name-phone.png`.
fn shoot(browser: &Browser, url: &str, name: &str) {
    for (size, (w, h)) in [("desktop", DESKTOP), ("phone", PHONE)] {
        browser.viewport(w, h);
        browser.goto(url);
        browser.screenshot(&screenshots().join(format!("{name}-{size}.png")));
    }
    browser.viewport(DESKTOP.0, DESKTOP.1);
}

#[test]
fn dashboard_follows_a_real_rollout_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime = crate::support::runtime();
    // 99.9 % passes `min: 99` and fails `min: 99.95`.
    let prometheus = demo_prometheus::start(Script::new(99.9, 100.0), runtime).unwrap();
    let config = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\nprometheus: {{address: '{}'}}\n",
        prometheus.address
    );
    let bare = seeded_remote(
        tmp.path(),
        &[
            (".sluice/config.yaml", &config),
            (
                "apps/podinfo/deployment.yaml",
                &loop_deployment("podinfo", "podinfo:1"),
            ),
            ("apps/podinfo/canary.yaml", &stepped_canary("podinfo", "99")),
            (
                "apps/faulty/deployment.yaml",
                &loop_deployment("faulty", "faulty:1"),
            ),
            (
                "apps/faulty/canary.yaml",
                &stepped_canary("faulty", "99.95"),
            ),
        ],
    );
    let daemon = GitDaemon::start(tmp.path());
    let url = daemon.url("config.git");
    let addr = format!("127.0.0.1:{}", free_port());
    let _sluice = crate::support::sluice_daemon(&url, &tmp.path().join("work"))
        .poll("300ms")
        // The dashboard on the main listener, which must be asked for by its address.
        .listen(&addr)
        .args(["--dashboard-listen", &addr])
        .log(Some("error"))
        .start();
    wait_http_ok(&addr, "/readyz");
    wait_phase(&addr, "test/podinfo", "Initialized");
    wait_phase(&addr, "test/faulty", "Initialized");

    let browser = Browser::start(DESKTOP.0, DESKTOP.1);
    let base = format!("http://{addr}");
    browser.goto(&format!("{base}/"));
    assert!(
        browser.text().contains("test/podinfo"),
        "{}",
        browser.text()
    );
    // A marker a reload would lose.
    browser.js("window.__loaded_once = 'yes'; return true;");

    let human = human_clone(&url, &tmp.path().join("human"));
    human_commit(
        &human,
        "apps/podinfo/deployment.yaml",
        &loop_deployment("podinfo", "podinfo:2"),
        "podinfo: bump to 2",
    );
    human_commit(
        &human,
        "apps/faulty/deployment.yaml",
        &loop_deployment("faulty", "faulty:2"),
        "faulty: bump to 2",
    );

    browser.wait_for(
        "the overview to show podinfo's canary weight above 0 without a reload",
        Duration::from_secs(90),
        "const w = document.querySelector('tr[data-canary=\"test/podinfo\"] .w'); \
         return !!w && Number(w.dataset.weight) > 0 && window.__loaded_once === 'yes';",
    );
    shoot(&browser, &format!("{base}/"), "overview-mid-rollout");
    shoot(
        &browser,
        &format!("{base}/canaries/test/podinfo"),
        "canary-mid-rollout",
    );

    wait_phase(&addr, "test/podinfo", "Succeeded");
    wait_phase(&addr, "test/faulty", "Failed");
    shoot(&browser, &format!("{base}/"), "overview-after-rollback");
    shoot(
        &browser,
        &format!("{base}/canaries/test/faulty"),
        "canary-after-rollback",
    );

    // One point per decision commit, with the weights `sluice history` prints.
    browser.goto(&format!("{base}/canaries/test/podinfo"));
    let drawn = browser.js(
        "return Array.from(document.querySelectorAll('#weight-chart circle.pt.canary')).map(c => \
         `${c.dataset.commit} primary=${c.dataset.primary} canary=${c.dataset.canary}`);",
    );
    let expected: Vec<String> = history_json(&bare, "test/podinfo")
        .iter()
        .filter(|e| !e["weights"].as_str().unwrap_or("").is_empty())
        .map(|e| {
            format!(
                "{} {}",
                e["commit"].as_str().unwrap(),
                e["weights"].as_str().unwrap()
            )
        })
        .collect();
    let drawn: Vec<String> = serde_json::from_value(drawn).unwrap();
    assert!(expected.len() >= 6, "a whole rollout: {expected:?}");
    assert_eq!(
        drawn, expected,
        "the chart's points are the history's decisions"
    );

    // The failed metric is marked failed, on the chart and in its table.
    browser.goto(&format!("{base}/canaries/test/faulty"));
    let failed = browser.js(
        "const f = document.querySelector('figure.metric[data-metric=\"request-success-rate\"]'); \
         return f ? [f.querySelectorAll('svg .pt.failed').length, f.querySelector('.failed-count').textContent] : null;",
    );
    assert!(failed[0].as_u64().unwrap() >= 1, "{failed}");
    assert!(failed[1].as_str().unwrap().contains("failed"), "{failed}");
    assert!(browser.text().contains("Failed"), "{}", browser.text());
    drop(prometheus);
}

/// Script in every free-text place a repo offers that the dashboard shows.
const IMG: &str = "<img src=x onerror=window.__xss=1>";
const SCRIPT: &str = "\"><script>window.__xss=1</script>";

/// A repo whose `test/podinfo` history and refused spec carry [`IMG`] and [`SCRIPT`]:
/// a commit with both in its subject and body, an approver login and an approval URL
/// trailer, and a spec whose refused value carries one (shown in the refusals).
fn hostile_repo(dir: &Path) -> PathBuf {
    let (bare, human) = initialized(dir);
    let message = format!(
        "{IMG}\n\n{SCRIPT}\n\nSluice-Canary: test/podinfo\nSluice-Phase: Initialized\nSluice-Weights: primary=100 canary=0\nSluice-Approved-By: {IMG}\nSluice-Approval: {SCRIPT}\n"
    );
    human_commit(&human, "notes.txt", "hostile", &message);
    human_commit(
        &human,
        "apps/bad/canary.yaml",
        &loop_canary("bad", "").replace("provider: osm", &format!("provider: '{SCRIPT}'")),
        "add a bad canary",
    );
    bare
}

#[test]
fn repo_text_with_script_runs_nothing_and_reads_literally_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = hostile_repo(tmp.path());
    let (_dashboard, addr, browser) = dashboard_in_browser(&bare, DESKTOP);
    for page in ["/", "/canaries/test/podinfo"] {
        browser.goto(&format!("http://{addr}{page}"));
        // Long enough for an onerror or a refresh to have run.
        std::thread::sleep(Duration::from_millis(2500));
        assert_eq!(
            browser.js("return typeof window.__xss;"),
            Json::String("undefined".into()),
            "script ran on {page}"
        );
        let text = browser.text();
        let shown = if page == "/" {
            vec![SCRIPT]
        } else {
            vec![IMG, SCRIPT]
        };
        for payload in shown {
            assert!(
                text.contains(payload),
                "{page} does not show {payload:?} literally:\n{text}"
            );
        }
        assert_eq!(
            browser.js("return document.querySelectorAll('img, main script').length;"),
            Json::from(0),
            "markup from the repo on {page}"
        );
    }
    browser.screenshot(&screenshots().join("xss-canary-page.png"));
}

#[test]
fn dashboard_auth_file_refuses_requests_without_credentials_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = hostile_repo(tmp.path());
    let token = "0123456789abcdef-dashboard-token";
    let file = tmp.path().join("auth");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let (_dashboard, addr) = sluice_dashboard(
        &bare,
        &["--dashboard-auth-file", &file.display().to_string()],
    );
    for path in [
        "/",
        "/api/v1/canaries",
        "/api/v1/canaries/test/podinfo",
        "/canaries/test/podinfo",
        "/fragments/overview",
    ] {
        let (status, body) = http(&addr, "GET", path, &[], b"");
        assert_eq!(status, 401, "{path}: {body}");
        assert!(
            !body.contains("podinfo"),
            "{path} shows canary data: {body}"
        );
        let (status, _) = http(
            &addr,
            "GET",
            path,
            &[("Authorization", "Bearer wrong-token-0123456789")],
            b"",
        );
        assert_eq!(status, 401, "{path} with a wrong token");
    }
    let bearer = format!("Bearer {token}");
    let (status, body) = http(
        &addr,
        "GET",
        "/api/v1/canaries",
        &[("Authorization", &bearer)],
        b"",
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("podinfo"), "{body}");

    let browser = Browser::start(DESKTOP.0, DESKTOP.1);
    browser.goto(&format!("http://{addr}/"));
    let text = browser.text();
    assert!(
        !text.contains("podinfo"),
        "the browser sees canary data: {text}"
    );

    // Basic authentication, which a browser asks a person for.
    std::fs::write(&file, "admin:correct-horse\n").unwrap();
    let (_basic, addr) = sluice_dashboard(
        &bare,
        &["--dashboard-auth-file", &file.display().to_string()],
    );
    let (status, _) = http(&addr, "GET", "/", &[], b"");
    assert_eq!(status, 401);
    // "admin:correct-horse" in base64.
    let (status, body) = http(
        &addr,
        "GET",
        "/",
        &[("Authorization", "Basic YWRtaW46Y29ycmVjdC1ob3JzZQ==")],
        b"",
    );
    assert_eq!(status, 200);
    assert!(body.contains("test/podinfo"), "{body}");
}

/// `sluice demo --dashboard --dashboard-listen LISTEN --keep KEEP` on the clock `clock`
/// (`SLUICE_CLOCK`): the process (killed when dropped) and the lines it prints.
fn demo_with_dashboard(
    listen: &str,
    keep: &Path,
    clock: &str,
) -> (Process, impl Iterator<Item = String>) {
    use std::io::BufRead;
    let mut child = crate::support::sluice_demo(&["--dashboard", "--dashboard-listen", listen])
        .env(sluice::clock::VAR, clock)
        .arg("--keep")
        .arg(keep)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok);
    (Process(child), lines)
}

/// `sluice demo --dashboard` on the wall clock (steps 10 s apart): the dashboard's URL is the
/// first line printed, and while the demo still runs (it has not printed its end) the page
/// shows the canary in progress.
#[test]
fn demo_dashboard_serves_from_the_first_tick() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut demo, lines) = demo_with_dashboard("127.0.0.1:0", &tmp.path().join("demo"), "wall");
    let (tx, printed) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in lines {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = printed.recv_timeout(Duration::from_secs(30)).unwrap();
    let addr = first
        .strip_prefix("Dashboard: http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("the URL first: {first}"))
        .to_string();
    let mut seen = vec![first];
    // At most 600 polls, 100 ms apart: the canary's first step is held 10 s.
    let mut phase = Json::Null;
    for _ in 0..600 {
        let (status, body) = http(&addr, "GET", "/api/v1/canaries/demo/podinfo", &[], b"");
        if status == 200 {
            let detail: Json = serde_json::from_str(&body).unwrap();
            phase = detail["phase"].clone();
            if phase == "Progressing" {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    seen.extend(printed.try_iter());
    assert_eq!(phase, "Progressing", "{seen:#?}");
    assert!(
        demo.0.try_wait().unwrap().is_none(),
        "the demo still runs: {seen:#?}"
    );
    assert!(
        !seen.iter().any(|l| l.contains("ended")),
        "the demo has not ended yet: {seen:#?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.starts_with("sluice demo: config repo")),
        "the rest as before: {seen:#?}"
    );
    let (status, page) = http(&addr, "GET", "/canaries/demo/podinfo", &[], b"");
    assert_eq!(status, 200);
    assert!(page.contains(">Progressing<"), "{page}");
}

#[test]
fn demo_dashboard_shows_the_whole_rollout_in_a_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let (_demo, lines) = demo_with_dashboard(&addr, &tmp.path().join("demo"), "stepped");
    // The URL comes first, and again once the demo has ended.
    let mut urls = Vec::new();
    for line in lines {
        if let Some(rest) = line.strip_prefix("Dashboard: ") {
            urls.push(rest.split(' ').next().unwrap_or("").to_string());
            if rest.contains("Ctrl-C") {
                break;
            }
        }
    }
    assert_eq!(urls, [format!("http://{addr}/"), format!("http://{addr}/")]);
    let url = urls[1].clone();
    let (status, body) = http(&addr, "GET", "/api/v1/canaries/demo/podinfo", &[], b"");
    assert_eq!(status, 200, "{body}");
    let detail: Json = serde_json::from_str(&body).unwrap();
    assert_eq!(detail["phase"], "Succeeded", "{detail}");
    assert_eq!(
        detail["schedule"].as_array().unwrap().len(),
        3,
        "steps 25, 50, 75"
    );
    assert!(detail["weights"].as_array().unwrap().len() >= 6, "{detail}");
    assert!(
        !detail["metrics"].as_array().unwrap().is_empty(),
        "{detail}"
    );

    let browser = Browser::start(DESKTOP.0, DESKTOP.1);
    browser.goto(&format!("{url}canaries/demo/podinfo"));
    let drawn = browser.js("return [document.querySelectorAll('ol.steps li').length, \
         document.querySelectorAll('#weight-chart circle.pt.canary').length, \
         document.querySelectorAll('figure.metric').length];");
    assert_eq!(drawn[0], 3, "{drawn}");
    assert!(drawn[1].as_u64().unwrap() >= 6, "{drawn}");
    assert!(drawn[2].as_u64().unwrap() >= 1, "{drawn}");
    browser.screenshot_viewport(&screenshots().join("demo-canary-viewport.png"));
    browser.screenshot(&screenshots().join("demo-canary-desktop.png"));
    // The README's picture (docs/dashboard.png is a copy): steps, weights and metrics.
    browser.screenshot_top(&screenshots().join("readme-canary.png"), 1280, 1560, 0.6);
}
