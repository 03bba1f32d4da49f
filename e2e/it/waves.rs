//! The loop with waves, against a `git daemon` remote: a route-only canary `shop/web` rolled
//! out in three waves (staging, eu, us), each its own cluster folder, decided by in-process
//! ticks on a clock that advances five seconds a tick. The metrics of each wave's cluster come from a scripted
//! observer (one answer per wave); everything else is real: the binary's spec loading, the
//! release rule, render, commits and pushes, `sluice approve --wave`.
//!
//! After each case every commit's route documents pass their strict schemas and each wave's
//! folder builds with `kubectl kustomize`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use jiff::{Timestamp, ToSpan};
use sluice::core::observe::{MetricObservation, MetricValue};
use sluice::manifest::settings::Settings;
use sluice::metrics::metric_templates::TemplateIndex;
use sluice::observer::{External, Observer, Request};
use sluice::tick::tick;

use crate::support::dashboard::{
    assert_fits, assert_shows, dashboard_in_browser, screenshots, DESKTOP, PHONE,
};
use crate::support::waves::{
    check_outputs, phases, release, settled_waves, status, wave_canary, wave_log, FILE, WAVES,
};
use crate::support::{git, human_clone, human_commit, run_sluice, served_clone, tick_context};

fn canary(revision: &str, on_failure: &str, eu_approval: bool) -> String {
    wave_canary(
        revision,
        "  metricsServer: http://prometheus.invalid:9090\n",
        &format!(
            "  onFailure: {on_failure}\n  waves:\n{}      approval: {eu_approval}\n{}",
            settled_waves(&["staging", "eu"]),
            settled_waves(&["us"])
        ),
    )
}

/// Each wave's cluster's metric: the error rate its Prometheus answers.
struct Clusters {
    error_rate: Mutex<BTreeMap<String, f64>>,
}

impl Clusters {
    fn new() -> Clusters {
        Clusters {
            error_rate: Mutex::new(WAVES.iter().map(|w| (w.to_string(), 0.0)).collect()),
        }
    }

    fn set(&self, wave: &str, rate: f64) {
        self.error_rate
            .lock()
            .unwrap()
            .insert(wave.to_string(), rate);
    }
}

impl Observer for Clusters {
    fn observe(
        &self,
        _: &TemplateIndex,
        _: &Settings,
        requests: &[Request<'_>],
        _: Timestamp,
    ) -> Vec<External> {
        let rates = self.error_rate.lock().unwrap();
        requests
            .iter()
            .map(|r| {
                let wave = r.canary.wave.as_ref().expect("every canary here has waves");
                External {
                    metrics: vec![MetricObservation {
                        name: "error-rate".into(),
                        value: MetricValue::Value(rates[wave.name.as_str()]),
                    }],
                    ..External::default()
                }
            })
            .collect()
    }
}

/// A rollout under test: the remote, a human's clone, sluice's clone, a clock.
struct Fleet {
    _tmp: tempfile::TempDir,
    _daemon: crate::support::GitDaemon,
    bare: std::path::PathBuf,
    human: std::path::PathBuf,
    repo: sluice::gitops::ConfigRepo,
    now: Timestamp,
    clusters: Clusters,
}

impl Fleet {
    fn start(on_failure: &str, eu_approval: bool) -> Fleet {
        let fleet = Fleet::seeded(&[(FILE, &canary("v1", on_failure, eu_approval))]);
        assert_eq!(
            phases(&fleet.bare),
            ["Initialized v1"; 3],
            "every wave starts with v1"
        );
        fleet
    }

    /// A fleet whose remote starts with `files`, ticked once.
    fn seeded(files: &[(&str, &str)]) -> Fleet {
        let tmp = tempfile::tempdir().unwrap();
        let bare = crate::support::seeded_remote(tmp.path(), files);
        let (daemon, url, repo) = served_clone(tmp.path());
        let human = human_clone(&url, &tmp.path().join("human"));
        let mut fleet = Fleet {
            _tmp: tmp,
            _daemon: daemon,
            bare,
            human,
            repo,
            // From the wall clock, since `sluice approve` stamps its commit with it; each tick
            // then moves it on faster than the wall clock runs.
            now: Timestamp::now(),
            clusters: Clusters::new(),
        };
        fleet.tick();
        fleet
    }

    fn tick(&mut self) {
        let ctx = tick_context(&self.clusters, crate::support::runtime());
        tick(&mut self.repo, &ctx, self.now).unwrap();
        self.now = self.now.checked_add(5.seconds()).unwrap();
    }

    fn release(&self, revision: &str, on_failure: &str, eu_approval: bool) {
        let text = canary(revision, on_failure, eu_approval);
        release(&self.human, revision, &text);
    }

    /// Ticks until `done` holds of the phases (at most 40 ticks).
    fn until(&mut self, what: &str, done: impl Fn(&[String]) -> bool) {
        for _ in 0..40 {
            if done(&phases(&self.bare)) {
                return;
            }
            self.tick();
        }
        panic!(
            "never {what}: {:?}\n{:#?}",
            phases(&self.bare),
            wave_log(&self.bare)
        );
    }

    /// Every commit's route documents pass their schemas; each folder builds at main.
    fn check_outputs(&self) {
        check_outputs(&self.bare);
    }
}

/// Positions of the first and last commit of each wave after index `from` of the log.
fn spans(log: &[(String, String, String)], revision: &str) -> Vec<(usize, usize)> {
    WAVES
        .iter()
        .map(|w| {
            let at: Vec<usize> = log
                .iter()
                .enumerate()
                .filter(|(_, (wave, _, rev))| wave == w && rev == revision)
                .map(|(i, _)| i)
                .collect();
            (*at.first().unwrap_or(&usize::MAX), *at.last().unwrap_or(&0))
        })
        .collect()
}

#[test]
fn a_good_release_walks_wave_by_wave_to_succeeded() {
    let mut fleet = Fleet::start("hold", false);
    fleet.release("v2", "hold", false);
    fleet.until("all on v2", |p| p == ["Succeeded v2"; 3]);
    let log = wave_log(&fleet.bare);
    let s = spans(&log, "v2");
    assert!(
        s[0].1 < s[1].0 && s[1].1 < s[2].0,
        "waves in order: {s:?}\n{log:#?}"
    );
    fleet.check_outputs();
}

#[test]
fn an_approval_wave_waits_for_sluice_approve_with_its_wave() {
    let mut fleet = Fleet::start("hold", true);
    fleet.release("v2", "hold", true);
    fleet.until("eu waits", |p| {
        p[0] == "Succeeded v2" && p[1] == "Waiting v2"
    });
    for _ in 0..3 {
        fleet.tick();
    }
    assert_eq!(
        phases(&fleet.bare)[1..],
        ["Waiting v2", "Initialized v1"],
        "eu and us wait"
    );
    let bare = fleet.bare.display().to_string();
    let (code, out, err) = run_sluice(&[
        "approve",
        "shop/web",
        "--wave",
        "eu",
        "--repo",
        &bare,
        "--reason",
        "staging looks good",
        "--as",
        "Ops <ops@example.com>",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    fleet.until("all on v2", |p| p == ["Succeeded v2"; 3]);
    fleet.check_outputs();
}

/// The release page of `shop/web` while eu waits for its approval: the waves in order, each
/// with its state, the approval between staging and eu; the overview groups the waves under
/// their release. Nothing reaches past a phone's width. Screenshots:
/// `target/dashboard-screenshots/release-*.png`.
#[test]
fn the_release_page_shows_the_waves_in_order_with_their_states_in_a_browser() {
    let mut fleet = Fleet::start("hold", true);
    fleet.release("v2", "hold", true);
    fleet.until("eu waits", |p| {
        p[0] == "Succeeded v2" && p[1] == "Waiting v2"
    });
    let (_dashboard, addr, browser) = dashboard_in_browser(&fleet.bare, PHONE);
    let items = "return Array.from(document.querySelectorAll('ol.waves > li')).map(li => \
        [li.className, li.dataset.wave ?? li.dataset.before, li.dataset.phase ?? '']);";
    for (size, (w, h)) in [("phone", PHONE), ("desktop", DESKTOP)] {
        browser.viewport(w, h);
        browser.goto(&format!("http://{addr}/releases/shop/web"));
        browser.screenshot(&screenshots().join(format!("release-{size}.png")));
        assert_fits(&browser, &format!("the release page at {w}px"));
        assert_eq!(
            browser.js(items),
            serde_json::json!([
                ["wave place-done", "staging", "Succeeded"],
                ["gate approval-waiting", "eu", ""],
                ["wave place-current", "eu", "Waiting"],
                ["wave place-ahead", "us", "Initialized"],
            ]),
            "{}",
            browser.text()
        );
        assert_shows(&browser, "h1", "InProgress");
        assert_shows(&browser, "li.gate", "approval before eu: waiting");
        assert_shows(&browser, "li[data-wave=staging]", "revision v2");
        assert_shows(&browser, "li[data-wave=us]", "revision v1");
        browser.goto(&format!("http://{addr}/"));
        browser.screenshot(&screenshots().join(format!("release-overview-{size}.png")));
        assert_fits(&browser, &format!("the overview at {w}px"));
        // The release's line, then its waves in wave order.
        let rows = browser.js(
            "return Array.from(document.querySelectorAll('table.canaries tbody tr')).map(tr => \
               tr.dataset.release ? 'release ' + tr.dataset.release : tr.dataset.canary);",
        );
        assert_eq!(
            rows,
            serde_json::json!([
                "release shop/web",
                "shop/web.staging",
                "shop/web.eu",
                "shop/web.us"
            ])
        );
        assert_shows(&browser, "tr.release", "wave 2/3");
    }
    // The release page's link from the overview, and its model as JSON.
    let link = browser.js("return document.querySelector('tr.release a').getAttribute('href');");
    assert_eq!(link, "/releases/shop/web");
    let (code, body) = crate::support::http(&addr, "GET", "/api/v1/releases/shop/web", &[], b"");
    assert_eq!(code, 200, "{body}");
    let release: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(release["waveNumber"], 2, "{release}");
    assert_eq!(
        release["waves"][1]["approval"]["state"], "waiting",
        "{release}"
    );
}

#[test]
fn a_bad_metric_in_wave_two_rolls_back_wave_two_only_and_wave_three_never_changes() {
    let mut fleet = Fleet::start("hold", false);
    let us_before = git(&fleet.bare, &["rev-parse", "main:clusters/us/web"]);
    fleet.clusters.set("eu", 5.0);
    fleet.release("v2", "hold", false);
    fleet.until("eu failed", |p| p[1] == "Failed v2");
    for _ in 0..5 {
        fleet.tick();
    }
    assert_eq!(
        phases(&fleet.bare),
        ["Succeeded v2", "Failed v2", "Initialized v1"]
    );
    assert_eq!(
        git(&fleet.bare, &["rev-parse", "main:clusters/us/web"]),
        us_before,
        "us untouched"
    );
    assert!(wave_log(&fleet.bare)
        .iter()
        .all(|(w, _, rev)| w != "us" || rev == "v1"));
    fleet.check_outputs();
}

#[test]
fn a_newer_revision_mid_release_restarts_from_wave_one() {
    let mut fleet = Fleet::start("hold", false);
    fleet.release("v2", "hold", false);
    fleet.until("eu analyses v2", |p| p[1] == "Progressing v2");
    fleet.release("v3", "hold", false);
    fleet.until("all on v3", |p| p == ["Succeeded v3"; 3]);
    let log = wave_log(&fleet.bare);
    // us never took v2: v3 reached it through staging and eu.
    assert!(
        log.iter().all(|(w, _, rev)| w != "us" || rev != "v2"),
        "{log:#?}"
    );
    let s = spans(&log, "v3");
    assert!(
        s[0].1 < s[1].0 && s[1].1 < s[2].0,
        "v3 in wave order: {s:?}\n{log:#?}"
    );
    fleet.check_outputs();
}

/// The tree id of a wave's folder at main: equal ids, byte-equal folders.
fn folder(bare: &Path, wave: &str) -> String {
    git(bare, &["rev-parse", &format!("main:clusters/{wave}/web")])
}

#[test]
fn a_bad_metric_in_wave_two_under_rollback_reverts_staging_too_and_wave_three_never_changes() {
    let mut fleet = Fleet::start("rollback", false);
    let before: Vec<String> = WAVES.iter().map(|w| folder(&fleet.bare, w)).collect();
    fleet.clusters.set("eu", 5.0);
    fleet.release("v2", "rollback", false);
    fleet.until("eu failed and staging reverted", |p| {
        p[0] == "Failed v2" && p[1] == "Failed v2"
    });
    let log_then = wave_log(&fleet.bare);
    // Later ticks change nothing: the reverted wave never takes v2 again by itself.
    for _ in 0..5 {
        fleet.tick();
    }
    let log = wave_log(&fleet.bare);
    assert_eq!(log, log_then, "nothing after the revert");
    assert_eq!(
        phases(&fleet.bare),
        ["Failed v2", "Failed v2", "Initialized v1"]
    );
    // Two commits: eu's rollback in its folder, then staging's revert, each its own.
    let n = log.len();
    assert_eq!(
        log[n - 2..],
        [
            ("eu".into(), "Failed".into(), "v2".into()),
            ("staging".into(), "Failed".into(), "v2".into()),
        ],
        "{log:#?}"
    );
    let after: Vec<String> = WAVES.iter().map(|w| folder(&fleet.bare, w)).collect();
    assert_eq!(after, before, "every folder as it was before the release");
    assert!(log.iter().all(|(w, _, rev)| w != "us" || rev == "v1"));
    // The revert says which wave failed and why; staging's status says it was reverted.
    let message = git(&fleet.bare, &["log", "-1", "--format=%B", "main"]);
    assert!(
        message.starts_with(
            "web.staging: revert wave staging to revision v1, the release of v2 failed\n"
        ),
        "{message}"
    );
    assert!(
        message.contains("wave eu failed on revision v2: Rolling back web.shop (wave eu)"),
        "{message}"
    );
    assert!(message.contains("Sluice-Wave: staging"), "{message}");
    let staging = status(&fleet.bare, "staging").unwrap();
    assert_eq!(staging.promoted_revision, "v1");
    assert!(
        staging.message.starts_with("Reverted to revision v1"),
        "{}",
        staging.message
    );
    let bare = fleet.bare.display().to_string();
    let (code, out, err) = run_sluice(&["status", "--dir", &bare]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.lines()
            .any(|l| l.contains("web.staging") && l.contains("Failed")),
        "{out}"
    );
    let (code, out, err) = run_sluice(&["status", "--dir", &bare, "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Reverted to revision v1"), "{out}");
    crate::support::audit::clean(&fleet.bare);
    fleet.check_outputs();
    // A newer revision starts from wave 1 as usual and walks through every wave.
    fleet.clusters.set("eu", 0.0);
    fleet.release("v3", "rollback", false);
    fleet.until("all on v3", |p| p == ["Succeeded v3"; 3]);
    crate::support::audit::clean(&fleet.bare);
    fleet.check_outputs();
}

/// The source a workload canary's waves share: bumping its image is a new revision.
fn deployment(tag: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: shop}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: example/web:{tag}
          ports: [{{containerPort: 8080}}]
"
    )
}

#[test]
fn under_rollback_a_workload_wave_goes_back_to_its_old_primary_and_is_not_drift() {
    // The canary's own workloads this time: the reverted folder holds the old primary, which
    // no render of the reverted status draws from the folder the release left.
    let text = canary("v1", "rollback", false).replace(
        "  routeOnly: {services: [web-blue, web-green], revision: \"v1\"}\n",
        "  source: apps/web/deployment.yaml\n",
    );
    let mut fleet = Fleet::seeded(&[
        (FILE, &text),
        ("apps/web/deployment.yaml", &deployment("1.0")),
    ]);
    assert!(
        phases(&fleet.bare)
            .iter()
            .all(|p| p.starts_with("Initialized")),
        "{:?}",
        phases(&fleet.bare)
    );
    let before: Vec<String> = WAVES.iter().map(|w| folder(&fleet.bare, w)).collect();
    fleet.clusters.set("eu", 5.0);
    git(&fleet.human, &["pull", "-q", "origin", "main"]);
    human_commit(
        &fleet.human,
        "apps/web/deployment.yaml",
        &deployment("2.0"),
        "web: 2.0",
    );
    fleet.until("eu failed and staging reverted", |p| {
        p[0].starts_with("Failed") && p[1].starts_with("Failed")
    });
    let log_then = wave_log(&fleet.bare);
    for _ in 0..5 {
        fleet.tick();
    }
    assert_eq!(
        wave_log(&fleet.bare),
        log_then,
        "no drift hold, nothing after the revert"
    );
    // eu rolled back in its own folder (its canary workload keeps the failed spec, scaled
    // down, as any rollback); staging is reverted byte for byte, and us never changed.
    let after: Vec<String> = WAVES.iter().map(|w| folder(&fleet.bare, w)).collect();
    assert_eq!(
        [&after[0], &after[2]],
        [&before[0], &before[2]],
        "staging and us as they were before the release"
    );
    let primary = git(
        &fleet.bare,
        &["show", "main:clusters/staging/web/web-primary.yaml"],
    );
    assert!(primary.contains("example/web:1.0"), "{primary}");
    crate::support::audit::clean(&fleet.bare);
    fleet.check_outputs();
}
