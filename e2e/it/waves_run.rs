//! Waves through the real daemon: `sluice run --listen 127.0.0.1:0` against a `git daemon`
//! remote rolls a route-only canary `shop/web` out in three waves (staging, eu, us).
//!
//! Each wave's cluster is its own fake Kubernetes API server (`cluster: {server, secretRef}`,
//! its token mapped into the daemon as any Secret is, plain http allowed by the operator),
//! whose Flux Kustomization reports the remote's head as applied, as Flux would once it pulled
//! it: the sync gate passes only after sluice's push. Each wave queries its own Prometheus-API
//! fake (`metricsServer`); eu's takes a bearer token from the wave's `metricsSecretRef`,
//! mapped into the daemon as any Secret is. eu has `approval: true`: its approval pull request
//! opens on the GitHub fake, and the test merges it as a person would. Notifications go to a
//! webhook the test records.
//!
//! Kubernetes, GitHub and Prometheus are HTTP-level fakes (the tests are named so); git, the
//! binary, the schemas and `kubectl kustomize` are real. After each case every commit's route
//! documents pass their strict schemas and each wave's folder builds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::support::forge::{ForgeFake, Kind};
use crate::support::kube::{kustomization_object, ready_true, FakeKubeApi};
use crate::support::metrics::{Canned, Server};
use crate::support::waves::{
    check_outputs, phases, release, settled_waves, wave_canary, wave_log, web_head, FILE, WAVES,
};
use crate::support::{
    git, human_clone, merge_approval, reconcile_ticks, sluice_daemon, Daemon, GitDaemon,
};

const EU_TOKEN: &str = "eu-prometheus-token";
const WEBHOOK_VAR: &str = "SLUICE_TEST_WAVES_WEBHOOK";

/// The canary at `revision`, each wave on its own cluster and Prometheus.
fn canary(revision: &str, eu_approval: bool, apis: &[String], proms: &[String]) -> String {
    let mut waves = String::new();
    for (i, wave) in WAVES.iter().enumerate() {
        waves.push_str(&format!(
            "    - name: {wave}
      output: clusters/{wave}/web
      sync: {{flux: {{kustomization: podinfo, namespace: flux-system}}}}
      cluster: {{server: '{}', secretRef: {{name: {wave}-cluster}}}}
      metricsServer: '{}'
",
            apis[i], proms[i]
        ));
        if *wave == "eu" {
            waves.push_str(&format!(
                "      metricsSecretRef: {{name: prom-eu}}\n      approval: {eu_approval}\n"
            ));
        }
    }
    wave_canary(revision, "", &format!("  waves:\n{waves}"))
}

/// A Prometheus instant-query answer of one sample, `value`.
fn vector(value: f64) -> Canned {
    Canned::json(
        200,
        &format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1767225600,"{value}"]}}]}}}}"#
        ),
    )
}

/// A release under test: the remote and its `git daemon`, a human's clone, three clusters
/// and their Prometheus, the forge, the notification webhook, and `sluice run`.
struct Fleet {
    tmp: tempfile::TempDir,
    _git: GitDaemon,
    url: String,
    bare: PathBuf,
    human: PathBuf,
    rt: tokio::runtime::Runtime,
    /// Behind an async lock: the test stops and starts them on `rt`, Flux puts from a thread.
    apis: Vec<Arc<tokio::sync::Mutex<FakeKubeApi>>>,
    api_urls: Vec<String>,
    proms: Vec<Server>,
    hook: Server,
    forge: ForgeFake,
    flux: Arc<AtomicBool>,
    daemon: Option<Daemon>,
    eu_approval: bool,
}

impl Fleet {
    /// Everything up, the daemon started, every wave initialized with v1.
    fn start(eu_approval: bool) -> Fleet {
        let tmp = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let apis: Vec<FakeKubeApi> = (0..3).map(|_| rt.block_on(FakeKubeApi::start())).collect();
        let api_urls: Vec<String> = apis.iter().map(|a| a.url.clone()).collect();
        let proms: Vec<Server> = (0..3)
            .map(|_| rt.block_on(Server::start_with(|_| vector(0.0))))
            .collect();
        let hook = rt.block_on(Server::start_with(|_| Canned::json(200, "{}")));
        let forge = ForgeFake::start(Kind::GitHub);
        let prom_urls: Vec<String> = proms.iter().map(Server::url).collect();
        let config = format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}notifications:\n  - {{kind: webhook, urlEnv: {WEBHOOK_VAR}}}\n",
            forge.settings()
        );
        let bare = crate::support::seeded_remote(
            tmp.path(),
            &[
                (FILE, &canary("v1", eu_approval, &api_urls, &prom_urls)),
                (".sluice/config.yaml", &config),
            ],
        );
        let git_daemon = GitDaemon::start(tmp.path());
        let url = git_daemon.url("config.git");
        let human = human_clone(&url, &tmp.path().join("human"));
        let mut fleet = Fleet {
            tmp,
            _git: git_daemon,
            url,
            bare,
            human,
            rt,
            apis: apis
                .into_iter()
                .map(|a| Arc::new(tokio::sync::Mutex::new(a)))
                .collect(),
            api_urls,
            proms,
            hook,
            forge,
            flux: Arc::new(AtomicBool::new(true)),
            daemon: None,
            eu_approval,
        };
        fleet.run_flux();
        fleet.run_sluice();
        fleet.until("every wave initialized with v1", |p| {
            p == ["Initialized v1"; 3]
        });
        fleet
    }

    /// Flux in each cluster: the Kustomization reports the remote's head as applied, a moment
    /// after each push (until the fleet is dropped).
    fn run_flux(&self) {
        let (bare, apis, on) = (self.bare.clone(), self.apis.clone(), Arc::clone(&self.flux));
        std::thread::spawn(move || {
            let mut applied = String::new();
            while on.load(Ordering::SeqCst) {
                let head = git(&bare, &["rev-parse", "main"]).trim().to_string();
                if head != applied {
                    let revision = format!("main@sha1:{head}");
                    for api in &apis {
                        let object = kustomization_object(1, &revision, ready_true(1, &revision));
                        api.blocking_lock().put(object);
                    }
                    applied = head;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }

    fn run_sluice(&mut self) {
        let mut daemon = sluice_daemon(&self.url, &self.tmp.path().join("d"))
            .stepped()
            .log(Some("info"))
            .env("SLUICE_FORGE_TOKEN", "t0k")
            .env(WEBHOOK_VAR, self.hook.url())
            .env("SLUICE_SECRET_SHOP__PROM_EU__TOKEN", EU_TOKEN)
            // The fake API servers speak plain http, which only the operator may allow.
            .env(sluice::waves::servers::ALLOW_HTTP_VAR, "true")
            .env("KUBECONFIG", self.tmp.path().join("no-kubeconfig"))
            .env_remove("KUBERNETES_SERVICE_HOST");
        for wave in WAVES {
            let var = sluice::secrets::env_var("shop", &format!("{wave}-cluster"), "token");
            daemon = daemon.env(var, format!("{wave}-sa-token"));
        }
        self.daemon = Some(daemon.start());
    }

    fn log(&self) -> String {
        self.daemon.as_ref().map(Daemon::log).unwrap_or_default()
    }

    /// Waits (at most 60 s) until the daemon has ticked `n` more times.
    fn ticks(&self, n: u64) {
        let main = self.daemon.as_ref().expect("the daemon runs").main();
        let until = reconcile_ticks(main) + n;
        let deadline = Instant::now() + Duration::from_secs(60);
        while reconcile_ticks(main) < until {
            assert!(Instant::now() < deadline, "no {n} ticks:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `/readyz` of the daemon's probe listener: (status, body).
    fn readyz(&self) -> (u16, String) {
        let probes = self.daemon.as_ref().expect("the daemon runs").probes();
        crate::support::http(probes, "GET", "/readyz", &[], b"")
    }

    fn release(&self, revision: &str) {
        let proms: Vec<String> = self.proms.iter().map(Server::url).collect();
        let text = canary(revision, self.eu_approval, &self.api_urls, &proms);
        release(&self.human, revision, &text);
    }

    /// Waits (at most 120 s) until `done` holds of the waves' phases.
    fn until(&self, what: &str, done: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let p = phases(&self.bare);
            if done(&p) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "never {what}: {p:?}\n{:#?}\n{}",
                wave_log(&self.bare),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The notifications the webhook received, as JSON bodies.
    fn notifications(&self) -> Vec<Json> {
        self.hook
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .map(|r| r.json())
            .collect()
    }

    /// Every commit's route documents pass their schemas; each folder builds at main.
    fn check_outputs(&self) {
        check_outputs(&self.bare);
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.daemon = None;
        self.flux.store(false, Ordering::SeqCst);
    }
}

/// The waves' commits of `revision` do not interleave: all of staging's, then eu's, then us's.
fn assert_in_wave_order(bare: &Path, revision: &str) {
    let log = wave_log(bare);
    let at = |wave: &str| -> Vec<usize> {
        log.iter()
            .enumerate()
            .filter(|(_, (w, _, r))| w == wave && r == revision)
            .map(|(i, _)| i)
            .collect()
    };
    let (staging, eu, us) = (at("staging"), at("eu"), at("us"));
    assert!(
        !staging.is_empty() && !eu.is_empty() && !us.is_empty(),
        "every wave committed {revision}: {log:#?}"
    );
    assert!(
        staging.last() < eu.first() && eu.last() < us.first(),
        "waves in order: {log:#?}"
    );
}

/// The tree of a wave's folder at main.
fn folder(bare: &Path, wave: &str) -> String {
    git(bare, &["rev-parse", &format!("main:clusters/{wave}/web")])
}

#[test]
fn a_release_walks_the_three_clusters_in_order_and_eu_waits_for_its_pull_request_kube_fake_forge_fake(
) {
    let fleet = Fleet::start(true);
    let queried_before: Vec<usize> = fleet.proms.iter().map(|p| p.requests().len()).collect();
    fleet.release("v2");
    fleet.until("eu waits for its approval", |p| {
        p[0] == "Succeeded v2" && p[1] == "Waiting v2"
    });
    // The approval pull request is on the forge; nothing of v2 reaches eu or us meanwhile.
    let deadline = Instant::now() + Duration::from_secs(30);
    while fleet.forge.count() == 0 {
        assert!(
            Instant::now() < deadline,
            "no approval PR:\n{}",
            fleet.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A few more ticks (intervals on the daemon's stepped clock) open no second one.
    fleet.ticks(5);
    assert_eq!(fleet.forge.count(), 1, "one pull request for eu's wait");
    assert_eq!(phases(&fleet.bare)[1..], ["Waiting v2", "Initialized v1"]);
    let pr = fleet.forge.pr(1);
    assert!(pr.head.starts_with("sluice/shop/web.eu/"), "{pr:?}");
    assert_eq!(pr.base, "main");
    merge_approval(&fleet.human, &pr.head, "merge");
    fleet.forge.merged_by(1, "octocat");
    fleet.until("every wave on v2", |p| p == ["Succeeded v2"; 3]);
    assert_in_wave_order(&fleet.bare, "v2");

    // Each wave asked its own Prometheus; eu's with the token of its metricsSecretRef.
    for (i, wave) in WAVES.iter().enumerate() {
        let requests = fleet.proms[i].requests();
        assert!(
            requests.len() > queried_before[i],
            "{wave}'s Prometheus was queried"
        );
        for r in &requests {
            assert_eq!(r.path(), "/api/v1/query", "{wave}");
            let auth = r.header("authorization");
            match *wave {
                "eu" => assert_eq!(auth, Some(format!("Bearer {EU_TOKEN}").as_str()), "{wave}"),
                _ => assert_eq!(auth, None, "{wave} has no credentials"),
            }
        }
    }
    fleet.check_outputs();
}

#[test]
fn an_unreachable_cluster_holds_its_wave_until_it_answers_kube_fake_forge_fake() {
    let fleet = Fleet::start(false);
    let eu_before = folder(&fleet.bare, "eu");
    fleet.release("v2");
    fleet.until("staging analyses v2", |p| p[0] == "Progressing v2");
    // eu's API server goes down mid-release.
    let eu = Arc::clone(&fleet.apis[1]);
    fleet.rt.block_on(async { eu.lock().await.stop().await });
    fleet.until("staging succeeded", |p| p[0] == "Succeeded v2");
    let eu_address = fleet.api_urls[1].clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (code, body) = fleet.readyz();
        assert_eq!(
            code, 200,
            "a cluster down does not make sluice unready: {body}"
        );
        if body.contains("shop/web.eu") {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz never named eu's cluster: {body}\n{}",
            fleet.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        body.contains("cluster unreachable") && body.contains(&format!("API server {eu_address}")),
        "{body}"
    );
    // Held for a while: several ticks, no commit to eu's folder, no move of eu or us.
    fleet.ticks(10);
    assert_eq!(
        phases(&fleet.bare)[1..],
        ["Initialized v1", "Initialized v1"]
    );
    assert_eq!(
        folder(&fleet.bare, "eu"),
        eu_before,
        "nothing committed to eu's folder"
    );
    assert!(
        wave_log(&fleet.bare)
            .iter()
            .all(|(w, _, rev)| w == "staging" || rev == "v1"),
        "{:#?}",
        wave_log(&fleet.bare)
    );
    git(&fleet.human, &["pull", "-q", "origin", "main"]);
    let checkout = fleet.human.display().to_string();
    let (code, out, err) = crate::support::run_sluice(&["status", "--dir", &checkout]);
    assert_eq!(code, 0, "{out}{err}");
    let line =
        format!("shop/web.eu HELD (cluster): Held: cluster unreachable: API server {eu_address}: ");
    assert!(out.contains(&line), "sluice status says why:\n{out}");
    let held: Vec<Json> = fleet
        .notifications()
        .into_iter()
        .filter(|n| n["event"] == "clusterUnreachable")
        .collect();
    assert_eq!(held.len(), 1, "said once, not every tick: {held:#?}");
    assert_eq!(held[0]["canary"], "shop/web.eu");
    let message = held[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&eu_address), "{message}");

    // The cluster comes back: the release goes on.
    fleet.rt.block_on(async { eu.lock().await.restart().await });
    fleet.until("every wave on v2", |p| p == ["Succeeded v2"; 3]);
    assert_in_wave_order(&fleet.bare, "v2");
    let (code, body) = fleet.readyz();
    assert_eq!(
        (code, body.as_str()),
        (200, "ready\n"),
        "nothing held any more"
    );
    let held = fleet
        .notifications()
        .iter()
        .filter(|n| n["event"] == "clusterUnreachable")
        .count();
    assert_eq!(held, 1, "one outage, one notification");
    fleet.check_outputs();
}

/// Two waves, eu's Prometheus with `metricsSecretRef` (`eu_extra` ends eu's entry).
fn secret_ref_canary(eu_extra: &str) -> String {
    format!(
        "{}  analysis: {{interval: 1s, stepWeights: [50]}}\n  waves:\n{}{eu_extra}",
        web_head("v1"),
        settled_waves(&["staging", "eu"])
    )
}

#[test]
fn a_wave_metrics_secret_ref_is_read_and_checked_with_file_and_line() {
    let settings = sluice::manifest::settings::Settings::default();
    let good =
        "      metricsServer: http://prometheus.eu:9090\n      metricsSecretRef: {name: prom-eu}\n";
    let loaded = sluice::manifest::load::load_text(FILE, &secret_ref_canary(good), &settings);
    assert_eq!(loaded.errors, vec![]);
    let secrets: Vec<Option<String>> = loaded
        .canaries
        .iter()
        .map(|c| {
            c.wave
                .as_ref()
                .and_then(|w| w.metrics_secret.as_ref())
                .map(ToString::to_string)
        })
        .collect();
    assert_eq!(secrets, [None, Some("prom-eu".to_string())]);

    let cases = [
        (
            "      metricsSecretRef: {name: prom-eu}\n",
            "apps/web/canary.yaml:16: spec.waves[1].metricsSecretRef: set without metricsServer",
        ),
        (
            "      metricsServer: http://prometheus.eu:9090\n      metricsSecretRef: {name: Prom_EU}\n",
            "apps/web/canary.yaml:17: spec.waves[1].metricsSecretRef.name: ",
        ),
        (
            "      metricsServer: http://prometheus.eu:9090\n      metricsSecretRef: {name: prom-eu, key: token}\n",
            "apps/web/canary.yaml:17: spec.waves[1].metricsSecretRef.key: unknown field",
        ),
        (
            "      metricsServer: http://prometheus.eu:9090\n      metricsSecretRef: {}\n",
            "apps/web/canary.yaml:17: spec.waves[1].metricsSecretRef.name: required field is missing",
        ),
    ];
    for (extra, expected) in cases {
        let loaded = sluice::manifest::load::load_text(FILE, &secret_ref_canary(extra), &settings);
        let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
        assert!(
            errors.iter().any(|e| e.starts_with(expected)),
            "expected an error starting {expected:?}, got {errors:#?}"
        );
        assert!(
            loaded.canaries.is_empty(),
            "a refused wave drops the release"
        );
    }
}
