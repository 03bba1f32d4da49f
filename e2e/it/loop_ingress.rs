//! Ingress canaries (`provider: nginx`, `provider: skipper`) through the loop against a `git
//! daemon` remote: initialization, every step, promotion and rollback, and A/B for nginx. At
//! every sluice commit `route.yaml` holds one canary Ingress `<ingress>-canary` that passes the
//! strict `networking.k8s.io/v1` Ingress schema and carries the status file's weights, and the
//! user's Ingress is neither edited nor copied into the output folder.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value as Json;
use sluice::core::status::Phase;
use sluice::gitops::{ConfigRepo, Credentials};
use sluice::observe::Offline;
use sluice::tick::{tick, Context};

use crate::route_ingress::NGINX_INGRESS;
use crate::support::{git, human_clone, human_commit, seeded_remote, GitDaemon, Schemas};
use crate::workload::{CONFIGS, DEPLOYMENT};

const CANARY_FILE: &str = "apps/podinfo/canary.yaml";
const INGRESS_FILE: &str = "apps/podinfo/ingress.yaml";
const STATUS_FILE: &str = ".sluice/status/prod/podinfo.yaml";
const OUTPUT: &str = "clusters/prod/podinfo";

/// The canary of Flagger's `test/nginx/test-canary.sh` (or `test/skipper/`), in `prod`.
fn canary(provider: &str, analysis: &str) -> String {
    format!(
        "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: podinfo
  namespace: prod
spec:
  provider: {provider}
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: podinfo
  ingressRef:
    apiVersion: networking.k8s.io/v1
    kind: Ingress
    name: podinfo
  service:
    port: 80
    targetPort: 9898
  analysis:
    interval: 1s
    threshold: 2
{analysis}
"
    )
}

fn ingress() -> String {
    NGINX_INGRESS.replace("namespace: test", "namespace: prod")
}

const STEPS: &str = "    stepWeight: 20\n    maxWeight: 60";
const BLUE_GREEN: &str = "    iterations: 3";
const AB: &str = "    iterations: 3
    match:
    - headers:
        x-user:
          exact: \"insider\"
    - headers:
        cookie:
          exact: \"canary\"";
const FAILING: &str = "    stepWeight: 20
    maxWeight: 60
    metrics:
      - name: request-success-rate
        thresholdRange: {min: 99}";

struct World {
    _tmp: tempfile::TempDir,
    _daemon: GitDaemon,
    bare: PathBuf,
    repo: ConfigRepo,
    human: PathBuf,
    now: Timestamp,
}

impl World {
    fn new(canary: &str) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let ingress = ingress();
        let bare = seeded_remote(
            tmp.path(),
            &[
                ("apps/podinfo/deployment.yaml", DEPLOYMENT),
                ("apps/podinfo/configs.yaml", CONFIGS),
                (INGRESS_FILE, &ingress),
                (CANARY_FILE, canary),
            ],
        );
        let daemon = GitDaemon::start(tmp.path());
        let url = daemon.url("config.git");
        let repo =
            ConfigRepo::open_or_clone(&url, "main", &tmp.path().join("work"), &Credentials::none())
                .unwrap();
        let human = human_clone(&url, &tmp.path().join("human"));
        World {
            _tmp: tmp,
            _daemon: daemon,
            bare,
            repo,
            human,
            now: Timestamp::now(),
        }
    }

    /// Ticks until a commit leaves the canary in `phase`.
    fn until(&mut self, phase: Phase) {
        let observer = Offline;
        for _ in 0..100 {
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
            if report
                .outcomes
                .iter()
                .any(|o| o.phase == Some(phase) && o.committed.is_some())
            {
                return;
            }
        }
        panic!("never reached {phase:?}");
    }

    fn new_revision(&self, version: &str) {
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
fn sluice_commits(bare: &Path) -> Vec<(String, String)> {
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

fn show(bare: &Path, sha: &str, file: &str) -> String {
    git(bare, &["show", &format!("{sha}:{file}")])
}

/// The weights a canary Ingress sends, as `primary=.. canary=..`: nginx's `canary-weight`
/// (or all matching requests while its A/B headers are set), Skipper's backend weights.
fn ingress_weights(doc: &Json) -> String {
    let a = &doc["metadata"]["annotations"];
    if let Some(weights) = a["zalando.org/backend-weights"].as_str() {
        let w: Json = serde_json::from_str(weights).unwrap();
        return format!(
            "primary={} canary={}",
            w["podinfo-primary"], w["podinfo-canary"]
        );
    }
    if a.get("nginx.ingress.kubernetes.io/canary-by-header")
        .is_some()
    {
        assert_eq!(a["nginx.ingress.kubernetes.io/canary-weight"], "0");
        return "primary=0 canary=100".into();
    }
    let canary: u8 = a["nginx.ingress.kubernetes.io/canary-weight"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    format!("primary={} canary={canary}", 100 - canary)
}

/// Every sluice commit: one schema-valid canary Ingress carrying the status file's weights
/// (the trailer's), the user's Ingress untouched and not copied. Returns the Ingress'
/// weights, in order.
fn check_every_commit(bare: &Path, ab: bool) -> Vec<String> {
    let mut schemas = Schemas::default();
    let mut weights = Vec::new();
    let ingress = ingress();
    for (sha, trailer) in sluice_commits(bare) {
        let status: Json = serde_saphyr::from_str(&show(bare, &sha, STATUS_FILE)).unwrap();
        let route = show(bare, &sha, &format!("{OUTPUT}/route.yaml"));
        let docs: Vec<Json> = serde_saphyr::from_multiple(&route).unwrap();
        assert_eq!(docs.len(), 1, "{sha}");
        let doc = &docs[0];
        let errors = schemas.errors(doc);
        assert!(errors.is_empty(), "{sha}: {errors:?}");
        assert_eq!(doc["kind"], "Ingress");
        assert_eq!(doc["metadata"]["name"], "podinfo-canary");
        assert_eq!(show(bare, &sha, INGRESS_FILE), ingress, "{sha}");
        let outputs = git(
            bare,
            &["ls-tree", "--name-only", &sha, &format!("{OUTPUT}/")],
        );
        for file in outputs.lines().filter(|f| f.ends_with(".yaml")) {
            let docs: Vec<Json> = serde_saphyr::from_multiple(&show(bare, &sha, file)).unwrap();
            assert!(
                !docs
                    .iter()
                    .any(|d| d["kind"] == "Ingress" && d["metadata"]["name"] == "podinfo"),
                "{sha}: the user's Ingress was copied into {file}"
            );
        }
        let phase = status["phase"].as_str().unwrap();
        let expected = if ab && ["Progressing", "WaitingApproval"].contains(&phase) {
            "primary=0 canary=100".to_string()
        } else {
            format!(
                "primary={} canary={}",
                status["primaryWeight"], status["canaryWeight"]
            )
        };
        let found = ingress_weights(doc);
        assert_eq!(found, expected, "{sha} in phase {phase}");
        assert_eq!(
            trailer,
            format!(
                "primary={} canary={}",
                status["primaryWeight"], status["canaryWeight"]
            ),
            "{sha}"
        );
        weights.push(found);
    }
    weights
}

fn steps(mut weights: Vec<String>) -> Vec<String> {
    weights.dedup();
    weights
}

#[test]
fn nginx_canary_rolls_out_through_git_daemon() {
    let mut w = World::new(&canary("nginx", STEPS));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    assert_eq!(
        steps(check_every_commit(&w.bare, false)),
        [
            "primary=100 canary=0",
            "primary=80 canary=20",
            "primary=60 canary=40",
            "primary=40 canary=60",
            "primary=100 canary=0",
        ]
    );
    let primary = show(&w.bare, "main", &format!("{OUTPUT}/podinfo-primary.yaml"));
    assert!(primary.contains("6.7.1"), "promoted: {primary}");
    kustomize_builds_the_output(&w.bare);
}

/// `kubectl kustomize` builds the output folder at main with the canary Ingress in it (when
/// kubectl is installed, as `install.rs` does).
fn kustomize_builds_the_output(bare: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let files = git(
        bare,
        &["ls-tree", "--name-only", "main", &format!("{OUTPUT}/")],
    );
    for file in files.lines() {
        let name = Path::new(file).file_name().unwrap();
        std::fs::write(out.join(name), show(bare, "main", file)).unwrap();
    }
    let Ok(built) = std::process::Command::new("kubectl")
        .args(["kustomize"])
        .arg(&out)
        .output()
    else {
        eprintln!("kubectl not installed: kustomize build not checked");
        return;
    };
    let stdout = String::from_utf8_lossy(&built.stdout);
    assert!(
        built.status.success(),
        "{}{stdout}",
        String::from_utf8_lossy(&built.stderr)
    );
    let docs: Vec<Json> = serde_saphyr::from_multiple(&stdout).unwrap();
    assert!(
        docs.iter()
            .any(|d| d["kind"] == "Ingress" && d["metadata"]["name"] == "podinfo-canary"),
        "{stdout}"
    );
}

#[test]
fn nginx_bluegreen_switches_all_traffic_after_its_iterations() {
    let mut w = World::new(&canary("nginx", BLUE_GREEN));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    assert_eq!(
        steps(check_every_commit(&w.bare, false)),
        [
            "primary=100 canary=0",
            "primary=0 canary=100",
            "primary=100 canary=0",
        ]
    );
}

#[test]
fn nginx_ab_routes_the_header_and_cookie_then_promotes() {
    let mut w = World::new(&canary("nginx", AB));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    assert_eq!(
        steps(check_every_commit(&w.bare, true)),
        [
            "primary=100 canary=0",
            "primary=0 canary=100",
            "primary=100 canary=0",
        ]
    );
    // Some commit routed by header and cookie, as Flagger's tutorial asks.
    let routed = sluice_commits(&w.bare).iter().any(|(sha, _)| {
        let route = show(&w.bare, sha, &format!("{OUTPUT}/route.yaml"));
        route.contains("nginx.ingress.kubernetes.io/canary-by-header: x-user")
            && route.contains("nginx.ingress.kubernetes.io/canary-by-header-value: insider")
            && route.contains("nginx.ingress.kubernetes.io/canary-by-cookie: canary")
    });
    assert!(routed, "no commit routed the A/B requests");
}

#[test]
fn nginx_rollback_routes_everything_back_to_the_primary() {
    let mut w = World::new(&canary("nginx", FAILING));
    w.until(Phase::Initialized);
    let primary_before = show(&w.bare, "main", &format!("{OUTPUT}/podinfo-primary.yaml"));
    w.new_revision("6.7.1");
    w.until(Phase::Failed);
    let weights = check_every_commit(&w.bare, false);
    assert!(
        weights.iter().any(|t| t == "primary=80 canary=20"),
        "traffic reached the canary before the rollback: {weights:?}"
    );
    assert_eq!(weights.last().unwrap(), "primary=100 canary=0");
    assert_eq!(
        show(&w.bare, "main", &format!("{OUTPUT}/podinfo-primary.yaml")),
        primary_before,
        "the primary keeps the old version"
    );
}

#[test]
fn skipper_canary_rolls_out_and_rolls_back_through_git_daemon() {
    let mut w = World::new(&canary("skipper", STEPS));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Succeeded);
    assert_eq!(
        steps(check_every_commit(&w.bare, false)),
        [
            "primary=100 canary=0",
            "primary=80 canary=20",
            "primary=60 canary=40",
            "primary=40 canary=60",
            "primary=100 canary=0",
        ]
    );

    let mut w = World::new(&canary("skipper", FAILING));
    w.until(Phase::Initialized);
    w.new_revision("6.7.1");
    w.until(Phase::Failed);
    let weights = check_every_commit(&w.bare, false);
    assert!(
        weights.iter().any(|t| t == "primary=80 canary=20"),
        "{weights:?}"
    );
    assert_eq!(weights.last().unwrap(), "primary=100 canary=0");
}
