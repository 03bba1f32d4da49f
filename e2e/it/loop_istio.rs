//! Istio canaries through the loop against a `git daemon` remote: initialization, every step,
//! promotion, rollback and a restart mid-rollout (a fresh clone picks up from the status
//! file), for the canary, blue/green and A/B strategies. At every sluice commit `route.yaml`
//! holds a VirtualService and two DestinationRules that pass Istio's strict schemas, and the
//! VirtualService's weights are the status file's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value as Json;
use sluice::core::status::Phase;
use sluice::gitops::{ConfigRepo, Credentials};
use sluice::observe::Offline;
use sluice::tick::{tick, Context, TickReport};

use crate::support::{git, human_clone, human_commit, seeded_remote, GitDaemon, Schemas};
use crate::workload::{CONFIGS, DEPLOYMENT};

pub(crate) const CANARY_FILE: &str = "apps/podinfo/canary.yaml";
pub(crate) const STATUS_FILE: &str = ".sluice/status/prod/podinfo.yaml";
pub(crate) const ROUTE_FILE: &str = "clusters/prod/podinfo/route.yaml";

/// A Flagger canary as Flagger's Istio tutorial writes it: no provider (Istio is Flagger's
/// default), a gateway, hosts, retries and a traffic policy.
fn canary(analysis: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: prod
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  service:
    port: 9898
    targetPort: 9898
    gateways: [istio-system/public-gateway]
    hosts: [app.example.com]
    retries: {{attempts: 3, perTryTimeout: 1s, retryOn: \"gateway-error,connect-failure\"}}
    trafficPolicy:
      tls: {{mode: ISTIO_MUTUAL}}
  analysis:
    interval: 1s
    threshold: 2
{analysis}
"
    )
}

const STEPS: &str = "    stepWeight: 20\n    maxWeight: 60";
const BLUE_GREEN: &str = "    iterations: 3";
const AB: &str = "    iterations: 3
    match:
      - headers:
          cookie:
            regex: \"^(.*?;)?(canary=always)(;.*)?$\"";

/// A config repo behind a `git daemon`, a sluice clone that ticks, and a human's clone;
/// other routers' loop tests (`route_apisix.rs`) run in it too.
pub(crate) struct World {
    tmp: tempfile::TempDir,
    _daemon: GitDaemon,
    url: String,
    pub(crate) bare: PathBuf,
    repo: ConfigRepo,
    human: PathBuf,
    now: Timestamp,
    clones: usize,
}

impl World {
    pub(crate) fn new(canary: &str) -> World {
        World::with_files(canary, &[])
    }

    /// A world whose repo also holds `files` (objects the canary references).
    pub(crate) fn with_files(canary: &str, files: &[(&str, &str)]) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let mut seed = vec![
            ("apps/podinfo/deployment.yaml", DEPLOYMENT),
            ("apps/podinfo/configs.yaml", CONFIGS),
            (CANARY_FILE, canary),
        ];
        seed.extend_from_slice(files);
        let bare = seeded_remote(tmp.path(), &seed);
        let daemon = GitDaemon::start(tmp.path());
        let url = daemon.url("config.git");
        let repo = ConfigRepo::open_or_clone(
            &url,
            "main",
            &tmp.path().join("work0"),
            &Credentials::none(),
        )
        .unwrap();
        let human = human_clone(&url, &tmp.path().join("human"));
        World {
            tmp,
            _daemon: daemon,
            url,
            bare,
            repo,
            human,
            now: Timestamp::now(),
            clones: 0,
        }
    }

    pub(crate) fn tick(&mut self) -> TickReport {
        let observer = Offline;
        let ctx = Context {
            observer: &observer,
            author: None,
            push_attempts: 5,
            runtime: crate::support::runtime(),
        };
        let report = tick(&mut self.repo, &ctx, self.now).unwrap();
        assert!(report.spec_errors.is_empty(), "{:?}", report.spec_errors);
        self.now = report
            .wake_at()
            .unwrap_or(self.now + Duration::from_secs(1));
        report
    }

    /// Ticks until a commit leaves the canary in `phase`.
    pub(crate) fn until(&mut self, phase: Phase) {
        for _ in 0..100 {
            let r = self.tick();
            if r.outcomes
                .iter()
                .any(|o| o.phase == Some(phase) && o.committed.is_some())
            {
                return;
            }
        }
        panic!("never reached {phase:?}");
    }

    /// A restart: a new process clones afresh and knows only what the remote holds.
    fn restart(&mut self) {
        self.clones += 1;
        let dir = self.tmp.path().join(format!("work{}", self.clones));
        self.repo =
            ConfigRepo::open_or_clone(&self.url, "main", &dir, &Credentials::none()).unwrap();
    }

    pub(crate) fn new_revision(&self, version: &str) {
        git(&self.human, &["pull", "-q", "origin", "main"]);
        human_commit(
            &self.human,
            "apps/podinfo/deployment.yaml",
            &DEPLOYMENT.replace("6.7.0", version),
            &format!("podinfo: {version}"),
        );
    }
}

/// Sluice commits on main, oldest first: (sha, Sluice-Weights trailer).
pub(crate) fn sluice_commits(bare: &Path) -> Vec<(String, String)> {
    let out = git(
        bare,
        &[
            "log",
            "--reverse",
            "--format=%H %(trailers:key=Sluice-Canary,valueonly,separator=)|%(trailers:key=Sluice-Weights,valueonly,separator=)",
            "main",
        ],
    );
    out.lines()
        .filter_map(|l| {
            let (sha, rest) = l.split_once(' ')?;
            let (canary, weights) = rest.split_once('|')?;
            (canary.trim() == "prod/podinfo").then(|| (sha.to_string(), weights.trim().to_string()))
        })
        .collect()
}

pub(crate) fn show(bare: &Path, sha: &str, file: &str) -> String {
    git(bare, &["show", &format!("{sha}:{file}")])
}

/// Every sluice commit: three schema-valid documents, the VirtualService's weighted route
/// carrying the status file's weights (and the trailer's), the DestinationRules the traffic
/// policy. Returns the VirtualService's weights, in order.
fn check_every_commit(bare: &Path, ab: bool) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut trailers = Vec::new();
    for (sha, trailer) in sluice_commits(bare) {
        let status: Json = serde_saphyr::from_str(&show(bare, &sha, STATUS_FILE)).unwrap();
        let docs: Vec<Json> = serde_saphyr::from_multiple(&show(bare, &sha, ROUTE_FILE)).unwrap();
        assert_eq!(docs.len(), 3, "{sha}");
        for doc in &docs {
            let errors = schemas.errors(doc);
            assert!(errors.is_empty(), "{sha}: {errors:?}");
        }
        let vs = &docs[0];
        assert_eq!(vs["kind"], "VirtualService");
        assert_eq!(vs["spec"]["gateways"][0], "istio-system/public-gateway");
        let http = vs["spec"]["http"].as_array().unwrap();
        assert_eq!(http.len(), if ab { 2 } else { 1 }, "{sha}");
        let route = &http[0]["route"];
        assert_eq!(route[0]["destination"]["host"], "podinfo-primary");
        assert_eq!(route[1]["destination"]["host"], "podinfo-canary");
        // During an A/B analysis the matching requests all go to the canary (Flagger's A/B);
        // otherwise the route carries the status weights.
        let phase = status["phase"].as_str().unwrap();
        let expected = if ab && ["Progressing", "WaitingApproval"].contains(&phase) {
            (Json::from(0), Json::from(100))
        } else {
            (
                status["primaryWeight"].clone(),
                status["canaryWeight"].clone(),
            )
        };
        assert_eq!(
            (route[0]["weight"].clone(), route[1]["weight"].clone()),
            expected,
            "{sha} in phase {phase}"
        );
        if ab {
            assert_eq!(
                http[0]["match"][0]["headers"]["cookie"]["regex"],
                "^(.*?;)?(canary=always)(;.*)?$"
            );
            assert_eq!(http[1]["route"][0]["weight"], 100);
        }
        for (doc, name) in [(&docs[1], "podinfo-primary"), (&docs[2], "podinfo-canary")] {
            assert_eq!(doc["metadata"]["name"], name);
            assert_eq!(doc["spec"]["trafficPolicy"]["tls"]["mode"], "ISTIO_MUTUAL");
        }
        assert_eq!(
            trailer,
            format!(
                "primary={} canary={}",
                status["primaryWeight"], status["canaryWeight"]
            ),
            "{sha}"
        );
        trailers.push(format!(
            "primary={} canary={}",
            route[0]["weight"], route[1]["weight"]
        ));
    }
    trailers
}

#[test]
fn istio_canary_rolls_out_through_git_daemon_with_a_restart() {
    let mut w = World::new(&canary(STEPS));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    // Part way through the steps (at 40%) the process restarts and resumes from the remote.
    for _ in 0..50 {
        let at = sluice_commits(&w.bare).pop().map(|(_, t)| t);
        if at.as_deref() == Some("primary=60 canary=40") {
            break;
        }
        w.tick();
    }
    assert_eq!(
        sluice_commits(&w.bare).pop().map(|(_, t)| t).as_deref(),
        Some("primary=60 canary=40")
    );
    w.restart();
    w.until(Phase::Succeeded);
    let weights = check_every_commit(&w.bare, false);
    let mut steps = weights.clone();
    steps.dedup();
    assert_eq!(
        steps,
        [
            "primary=100 canary=0",
            "primary=80 canary=20",
            "primary=60 canary=40",
            "primary=40 canary=60",
            "primary=100 canary=0",
        ],
        "every step once, in order, across the restart: {weights:?}"
    );
    let last = sluice_commits(&w.bare).pop().unwrap().0;
    let primary = show(&w.bare, &last, "clusters/prod/podinfo/podinfo-primary.yaml");
    assert!(primary.contains("6.7.1"), "promoted: {primary}");
}

#[test]
fn istio_bluegreen_switches_all_traffic_after_its_iterations() {
    let mut w = World::new(&canary(BLUE_GREEN));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    let mut steps = check_every_commit(&w.bare, false);
    steps.dedup();
    assert_eq!(
        steps,
        [
            "primary=100 canary=0",
            "primary=0 canary=100",
            "primary=100 canary=0",
        ]
    );
}

#[test]
fn istio_ab_routes_matching_requests_then_promotes() {
    let mut w = World::new(&canary(AB));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    let mut steps = check_every_commit(&w.bare, true);
    steps.dedup();
    assert_eq!(
        steps,
        [
            "primary=100 canary=0",
            "primary=0 canary=100",
            "primary=100 canary=0",
        ]
    );
}

#[test]
fn istio_rollback_routes_everything_back_to_the_primary() {
    // The offline observer never observes a metric, so every check fails.
    let analysis = format!(
        "{STEPS}\n    metrics:\n      - name: request-success-rate\n        thresholdRange: {{min: 99}}"
    );
    let mut w = World::new(&canary(&analysis));
    w.until(Phase::Initialized);
    let primary_before = show(
        &w.bare,
        "main",
        "clusters/prod/podinfo/podinfo-primary.yaml",
    );
    w.new_revision("6.7.1");
    w.until(Phase::Failed);
    let trailers = check_every_commit(&w.bare, false);
    assert!(
        trailers.iter().any(|t| t == "primary=80 canary=20"),
        "traffic reached the canary before the rollback: {trailers:?}"
    );
    assert_eq!(trailers.last().unwrap(), "primary=100 canary=0");
    assert_eq!(
        show(
            &w.bare,
            "main",
            "clusters/prod/podinfo/podinfo-primary.yaml"
        ),
        primary_before,
        "the primary keeps the old version"
    );
}
