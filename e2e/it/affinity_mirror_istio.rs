//! Session affinity and blue/green mirroring on Istio VirtualServices through the loop: a whole
//! rollout against a real `git daemon`, checking the HTTPRoute at every sluice commit against
//! the status file it was committed with, and a restart of sluice mid-rollout that keeps the
//! rollout's cookie (the state lives only in the status file).

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value as Json;
use sluice::core::status::{Phase, Status};
use sluice::gitops::{ConfigRepo, Credentials};
use sluice::observe::Offline;
use sluice::render::status_file;
use sluice::tick::{tick, Context, TickReport};

use crate::support::{git, human_clone, human_commit, seeded_remote, GitDaemon, Schemas};
use crate::workload::{CONFIGS, DEPLOYMENT};

const CANARY_FILE: &str = "apps/podinfo/canary.yaml";
const STATUS_FILE: &str = ".sluice/status/prod/podinfo.yaml";
const ROUTE_FILE: &str = "clusters/prod/podinfo/route.yaml";

/// A Flagger canary on Istio (Flagger's default: no provider) with this analysis.
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
    hosts: [podinfo.example.com]
  analysis:
    interval: 1s
    threshold: 2
{analysis}
"
    )
}

struct World {
    tmp: tempfile::TempDir,
    bare: PathBuf,
    daemon: GitDaemon,
    repo: ConfigRepo,
    human: PathBuf,
    now: Timestamp,
    clones: usize,
}

impl World {
    fn new(canary: &str) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let bare = seeded_remote(
            tmp.path(),
            &[
                ("apps/podinfo/deployment.yaml", DEPLOYMENT),
                ("apps/podinfo/configs.yaml", CONFIGS),
                (CANARY_FILE, canary),
            ],
        );
        let daemon = GitDaemon::start(tmp.path());
        let url = daemon.url("config.git");
        let repo = clone(&url, &tmp.path().join("work0"));
        let human = human_clone(&url, &tmp.path().join("human"));
        World {
            tmp,
            bare,
            daemon,
            repo,
            human,
            now: Timestamp::now(),
            clones: 0,
        }
    }

    /// sluice stops and starts again with a fresh clone: all it knows is in the remote.
    fn restart(&mut self) {
        self.clones += 1;
        let dir = self.tmp.path().join(format!("work{}", self.clones));
        self.repo = clone(&self.daemon.url("config.git"), &dir);
    }

    fn tick(&mut self) -> TickReport {
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

    /// Ticks until a commit reaches `phase`; with `restart_when`, restarts sluice once after
    /// the first commit whose status it accepts.
    fn until(&mut self, phase: Phase, mut restart_when: Option<&dyn Fn(&Status) -> bool>) {
        for _ in 0..100 {
            let r = self.tick();
            if r.outcomes.iter().any(|o| o.committed.is_some()) {
                if let Some(when) = restart_when {
                    if when(&remote_status(&self.bare)) {
                        self.restart();
                        restart_when = None;
                    }
                }
            }
            if r.outcomes
                .iter()
                .any(|o| o.phase == Some(phase) && o.committed.is_some())
            {
                return;
            }
        }
        panic!("never reached {phase:?}");
    }

    fn new_revision(&self) {
        git(&self.human, &["pull", "-q", "origin", "main"]);
        human_commit(
            &self.human,
            "apps/podinfo/deployment.yaml",
            &DEPLOYMENT.replace("6.7.0", "6.7.1"),
            "podinfo: 6.7.1",
        );
    }

    /// (status, VirtualService, first event) at every sluice commit, oldest first; every
    /// document checked against the strict Istio schemas.
    fn commits(&self) -> Vec<(Status, Json, String)> {
        let mut schemas = Schemas::default();
        let shas = git(
            &self.bare,
            &["log", "--reverse", "--format=%H", "--author=sluice", "main"],
        );
        shas.lines()
            .map(|sha| {
                let show = |file: &str| git(&self.bare, &["show", &format!("{sha}:{file}")]);
                let status = status_file::parse(&show(STATUS_FILE)).unwrap();
                let docs: Vec<Json> = serde_saphyr::from_multiple(&show(ROUTE_FILE)).unwrap();
                assert_eq!(docs.len(), 3, "{sha}");
                for doc in &docs {
                    let errors = schemas.errors(doc);
                    assert!(errors.is_empty(), "{sha}: {errors:?}");
                }
                let route = docs[0].clone();
                let body = git(&self.bare, &["log", "-1", "--format=%b", sha]);
                let event = body.lines().next().unwrap_or_default().to_string();
                (status, route, event)
            })
            .collect()
    }
}

fn clone(url: &str, dir: &Path) -> ConfigRepo {
    ConfigRepo::open_or_clone(url, "main", dir, &Credentials::none()).unwrap()
}

fn remote_status(bare: &Path) -> Status {
    status_file::parse(&git(bare, &["show", &format!("main:{STATUS_FILE}")])).unwrap()
}

fn weights(rule: &Json) -> (u64, u64) {
    let w = |i: usize| rule["route"][i]["weight"].as_u64().unwrap();
    (w(0), w(1))
}

fn cookie_regex(cookie: &str) -> String {
    let (name, value) = cookie.split_once('=').unwrap();
    format!(".*{name}.*{value}.*")
}

#[test]
fn istio_session_affinity_rollout_keeps_one_cookie_across_a_restart_and_expires_it() {
    let mut w = World::new(&canary(
        "    stepWeight: 20\n    maxWeight: 40\n    sessionAffinity:\n      cookieName: podinfo-canary\n      maxAge: 600",
    ));
    w.until(Phase::Initialized, None);
    w.new_revision();
    // Restart sluice right after the cookie is first committed.
    let has_cookie = |s: &Status| s.session_cookie.is_some();
    w.until(Phase::Succeeded, Some(&has_cookie));
    assert_eq!(w.clones, 1, "sluice was restarted mid-rollout");

    let commits = w.commits();
    let mut cookies = Vec::new();
    for (status, route, event) in &commits {
        let rules = route["spec"]["http"].as_array().unwrap();
        let expected = (
            u64::from(status.primary_weight),
            u64::from(status.canary_weight),
        );
        match (&status.session_cookie, &status.previous_session_cookie) {
            (Some(cookie), _) => {
                assert!(status.canary_weight > 0, "{event}");
                cookies.push(cookie.clone());
                assert_eq!(rules.len(), 2, "{event}");
                assert_eq!(
                    rules[0]["match"][0]["headers"]["Cookie"]["regex"],
                    cookie_regex(cookie)
                );
                assert_eq!(weights(&rules[0]), (0, 100), "{event}: sticky users");
                assert_eq!(weights(&rules[1]), expected, "{event}");
                assert_eq!(
                    rules[1]["route"][1]["headers"]["response"]["add"]["Set-Cookie"],
                    format!("{cookie}; Max-Age=600")
                );
            }
            (None, Some(previous)) => {
                assert_eq!(status.canary_weight, 0, "{event}");
                assert_eq!(rules.len(), 2, "{event}");
                assert_eq!(
                    rules[0]["headers"]["response"]["add"]["Set-Cookie"],
                    format!("{previous}; Max-Age=-1")
                );
                assert_eq!(weights(&rules[0]), expected, "{event}");
                assert_eq!(weights(&rules[1]), expected, "{event}");
            }
            (None, None) => {
                assert_eq!(rules.len(), 1, "{event}: no cookie yet");
                assert_eq!(weights(&rules[0]), expected, "{event}");
            }
        }
    }
    // Weights 20 and 40, then promotion at 40: one cookie for the whole rollout, the same
    // before and after the restart.
    assert_eq!(cookies.len(), 3, "{commits:#?}");
    assert!(cookies.iter().all(|c| *c == cookies[0]), "{cookies:?}");
    assert!(cookies[0].starts_with("podinfo-canary="));
    let last = &commits.last().unwrap().0;
    assert_eq!(last.phase, Phase::Succeeded);
    assert_eq!(last.previous_session_cookie.as_ref(), Some(&cookies[0]));
}

#[test]
fn istio_blue_green_mirrors_each_iteration_then_routes_all_traffic_to_the_canary() {
    let mut w = World::new(&canary(
        "    iterations: 3\n    mirror: true\n    mirrorWeight: 50",
    ));
    w.until(Phase::Initialized, None);
    w.new_revision();
    let mirroring = |s: &Status| s.mirroring;
    w.until(Phase::Succeeded, Some(&mirroring));
    assert_eq!(w.clones, 1, "sluice was restarted mid-rollout");

    let commits = w.commits();
    let seen: Vec<(&str, bool, (u64, u64))> = commits
        .iter()
        .map(|(status, route, event)| {
            let rule = &route["spec"]["http"][0];
            let mirror = rule.get("mirror").map(|m| {
                assert_eq!(m, &serde_json::json!({"host": "podinfo-canary"}));
                assert_eq!(rule["mirrorPercentage"], serde_json::json!({"value": 50}));
            });
            assert_eq!(mirror.is_some(), status.mirroring, "{event}");
            (event.as_str(), status.mirroring, weights(rule))
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("Initialization done! podinfo.prod", false, (100, 0)),
            (
                "New revision detected! Scaling up podinfo.prod",
                false,
                (100, 0)
            ),
            ("Starting canary analysis for podinfo.prod", true, (100, 0)),
            ("Advance podinfo.prod canary iteration 2/3", true, (100, 0)),
            ("Advance podinfo.prod canary iteration 3/3", true, (100, 0)),
            (
                "Stop traffic mirroring and route all traffic to canary podinfo.prod",
                false,
                (0, 100)
            ),
            (
                "Copying podinfo.prod template spec to podinfo-primary.prod",
                false,
                (0, 100)
            ),
            (
                "Routing all traffic to primary podinfo.prod",
                false,
                (100, 0)
            ),
            (
                "Promotion completed! Scaling down podinfo.prod",
                false,
                (100, 0)
            ),
        ]
    );
}
