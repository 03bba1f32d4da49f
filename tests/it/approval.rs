//! Approval by pull request against an HTTP-level fake of GitHub's REST API (documented
//! endpoints and payloads, state kept in memory) and a real bare repo: one PR per wait, reused
//! across restarts; merge commit, squash and cherry-pick merges all approve; closing aborts.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use jiff::Timestamp;
use serde_json::{json, Value as Json_};
use sluice::gitops::{ConfigRepo, Credentials};
use sluice::observe::Offline;
use sluice::reconcile::{tick, Context};

use crate::support::{git, human_clone, human_commit, seeded_remote};

#[derive(Default)]
struct Prs {
    list: Vec<Json_>,
}

type Shared = Arc<Mutex<Prs>>;

/// GitHub's pulls API, as documented: list (filtered by `head=owner:branch` and `state`),
/// create, get, update (close), and issue comments.
struct GithubFake {
    addr: SocketAddr,
    prs: Shared,
    _runtime: tokio::runtime::Runtime,
}

impl GithubFake {
    fn start() -> GithubFake {
        let prs: Shared = Arc::default();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/repos/{owner}/{repo}/pulls", get(list).post(create))
            .route("/repos/{owner}/{repo}/pulls/{n}", get(one).patch(update))
            .route("/repos/{owner}/{repo}/issues/{n}/comments", post(comment))
            .with_state(Arc::clone(&prs));
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        GithubFake {
            addr,
            prs,
            _runtime: runtime,
        }
    }

    fn count(&self) -> usize {
        self.prs.lock().unwrap().list.len()
    }

    fn set(&self, number: u64, state: &str, merged: bool) {
        let mut prs = self.prs.lock().unwrap();
        let pr = prs.list.iter_mut().find(|p| p["number"] == number).unwrap();
        pr["state"] = json!(state);
        if merged {
            pr["merged_at"] = json!("2026-11-30T00:00:00Z");
        }
    }
}

async fn list(
    State(prs): State<Shared>,
    UrlPath((owner, _repo)): UrlPath<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Json<Json_> {
    let prs = prs.lock().unwrap();
    let page: u64 = q.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
    if page > 1 {
        return Json(json!([]));
    }
    let head = q.get("head").cloned();
    let state = q.get("state").cloned().unwrap_or_else(|| "open".into());
    let items: Vec<Json_> = prs
        .list
        .iter()
        .filter(|p| {
            head.as_ref()
                .is_none_or(|h| *h == format!("{owner}:{}", p["head"]["ref"].as_str().unwrap()))
        })
        .filter(|p| state == "all" || p["state"] == state)
        .cloned()
        .collect();
    Json(json!(items))
}

async fn create(State(prs): State<Shared>, Json(body): Json<Json_>) -> (StatusCode, Json<Json_>) {
    let mut prs = prs.lock().unwrap();
    for key in ["title", "head", "base", "body"] {
        assert!(body[key].is_string(), "POST /pulls without {key}: {body}");
    }
    let number = prs.list.len() as u64 + 1;
    let pr = json!({
        "number": number,
        "html_url": format!("https://github.example/acme/fleet/pull/{number}"),
        "state": "open",
        "merged_at": null,
        "title": body["title"],
        "body": body["body"],
        "head": {"ref": body["head"], "label": format!("acme:{}", body["head"].as_str().unwrap())},
        "base": {"ref": body["base"]},
        "comments": [],
    });
    prs.list.push(pr.clone());
    (StatusCode::CREATED, Json(pr))
}

async fn one(
    State(prs): State<Shared>,
    UrlPath((_o, _r, n)): UrlPath<(String, String, u64)>,
) -> Result<Json<Json_>, StatusCode> {
    let prs = prs.lock().unwrap();
    let mut pr = prs
        .list
        .iter()
        .find(|p| p["number"] == n)
        .cloned()
        .ok_or(StatusCode::NOT_FOUND)?;
    pr["merged"] = json!(!pr["merged_at"].is_null());
    Ok(Json(pr))
}

async fn update(
    State(prs): State<Shared>,
    UrlPath((_o, _r, n)): UrlPath<(String, String, u64)>,
    Json(body): Json<Json_>,
) -> Result<Json<Json_>, StatusCode> {
    let mut prs = prs.lock().unwrap();
    let pr = prs
        .list
        .iter_mut()
        .find(|p| p["number"] == n)
        .ok_or(StatusCode::NOT_FOUND)?;
    if let Some(state) = body.get("state") {
        pr["state"] = state.clone();
    }
    Ok(Json(pr.clone()))
}

async fn comment(
    State(prs): State<Shared>,
    UrlPath((_o, _r, n)): UrlPath<(String, String, u64)>,
    Json(body): Json<Json_>,
) -> (StatusCode, Json<Json_>) {
    let mut prs = prs.lock().unwrap();
    if let Some(pr) = prs.list.iter_mut().find(|p| p["number"] == n) {
        if let Some(c) = pr["comments"].as_array_mut() {
            c.push(body["body"].clone());
        }
    }
    (StatusCode::CREATED, Json(json!({"id": 1})))
}

const FILE: &str = "apps/web/canary.yaml";
const STATUS: &str = ".sluice/status/shop/web.yaml";

fn canary(revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis:\n    interval: 1s\n    stepWeights: [20, 60]\n    approvals: {{beforePromotion: true}}\n"
    )
}

struct World {
    tmp: tempfile::TempDir,
    bare: std::path::PathBuf,
    repo: ConfigRepo,
    human: std::path::PathBuf,
    now: Timestamp,
    fake: GithubFake,
}

impl World {
    fn new() -> World {
        let fake = GithubFake::start();
        let tmp = tempfile::tempdir().unwrap();
        let config = format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\nforge: {{kind: github, apiUrl: 'http://{}', repository: acme/fleet}}\n",
            fake.addr
        );
        let bare = seeded_remote(
            tmp.path(),
            &[(FILE, &canary("v1")), (".sluice/config.yaml", &config)],
        );
        let url = bare.display().to_string();
        let repo =
            ConfigRepo::open_or_clone(&url, "main", &tmp.path().join("w"), &Credentials::none())
                .unwrap();
        let human = human_clone(&url, &tmp.path().join("human"));
        let mut w = World {
            tmp,
            bare,
            repo,
            human,
            now: Timestamp::now(),
            fake,
        };
        w.tick();
        git(&w.human, &["pull", "-q", "origin", "main"]);
        human_commit(&w.human, FILE, &canary("v2"), "web: v2");
        for _ in 0..6 {
            w.tick();
        }
        assert_eq!(w.status()["phase"], "WaitingApproval");
        w
    }

    fn tick(&mut self) {
        let observer = Offline;
        let ctx = Context {
            observer: &observer,
            author: None,
            push_attempts: 5,
        };
        let r = tick(&mut self.repo, &ctx, self.now).unwrap();
        self.now = r.wake_at().unwrap_or(self.now + Duration::from_secs(1));
    }

    fn status(&self) -> Json_ {
        serde_saphyr::from_str(&git(&self.bare, &["show", &format!("main:{STATUS}")])).unwrap()
    }

    fn branch(&self) -> String {
        let prs = self.fake.prs.lock().unwrap();
        prs.list[0]["head"]["ref"].as_str().unwrap().to_string()
    }
}

fn merge(human: &Path, branch: &str, how: &str) {
    git(human, &["pull", "-q", "origin", "main"]);
    git(human, &["fetch", "-q", "origin", branch]);
    match how {
        "merge" => git(
            human,
            &[
                "merge",
                "-q",
                "--no-ff",
                "-m",
                "Merge approval",
                "FETCH_HEAD",
            ],
        ),
        "squash" => {
            git(human, &["merge", "-q", "--squash", "FETCH_HEAD"]);
            git(human, &["commit", "-q", "-m", "Approve (squashed)"])
        }
        _ => git(human, &["cherry-pick", "FETCH_HEAD"]),
    };
    git(human, &["push", "-q", "origin", "HEAD:main"]);
}

#[test]
fn github_fake_one_pr_per_wait_reused_across_restarts_and_every_merge_method_approves() {
    for how in ["merge", "squash", "rebase"] {
        let mut w = World::new();
        w.tick();
        w.tick();
        assert_eq!(w.fake.count(), 1, "exactly one PR ({how})");
        let pr = w.fake.prs.lock().unwrap().list[0].clone();
        assert!(
            pr["body"]
                .as_str()
                .unwrap()
                .contains("Merging this pull request approves the step"),
            "{pr}"
        );
        assert!(
            pr["title"]
                .as_str()
                .unwrap()
                .contains("promote revision v2"),
            "{pr}"
        );
        let branch = w.branch();
        assert!(branch.starts_with("sluice/shop/web/promotion-"), "{branch}");
        // A restart (a new clone) reuses the PR.
        let mut again = ConfigRepo::open_or_clone(
            &w.bare.display().to_string(),
            "main",
            &w.tmp.path().join("w2"),
            &Credentials::none(),
        )
        .unwrap();
        let observer = Offline;
        let ctx = Context {
            observer: &observer,
            author: None,
            push_attempts: 5,
        };
        tick(&mut again, &ctx, w.now).unwrap();
        assert_eq!(
            w.fake.count(),
            1,
            "a restart does not open a second PR ({how})"
        );

        merge(&w.human, &branch, how);
        w.fake.set(1, "closed", true);
        assert_eq!(
            w.status()["phase"],
            "Promoting",
            "the merge put the promotion on main ({how})"
        );
        w.now = Timestamp::now();
        for _ in 0..8 {
            w.tick();
        }
        let s = w.status();
        assert_eq!(
            (s["phase"].as_str(), s["stableService"].as_str()),
            (Some("Succeeded"), Some("web-green")),
            "{how}"
        );
    }
}

#[test]
fn github_fake_closing_the_pr_without_merge_rolls_back() {
    let mut w = World::new();
    w.tick();
    assert_eq!(w.fake.count(), 1);
    w.fake.set(1, "closed", false);
    w.tick();
    let s = w.status();
    assert_eq!(
        (s["phase"].as_str(), s["canaryWeight"].as_u64()),
        (Some("Failed"), Some(0))
    );
    let log = git(&w.bare, &["log", "-1", "--format=%s", "main"]);
    assert!(
        log.contains("approval pull request #1 was closed without merging"),
        "{log}"
    );
}
