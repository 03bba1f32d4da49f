//! Approval by pull request against HTTP-level fakes of the GitHub, GitLab and Gitea
//! pull-request APIs (documented endpoints and payloads, state kept in memory) and a real bare
//! repo: one PR per wait, reused across restarts; merge commit, squash and cherry-pick merges
//! all approve; closing aborts. The fakes are shared with `attacks/approval.rs`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use jiff::Timestamp;
use serde_json::{json, Value as Json_};

use crate::support::{git, merge_approval, World};

/// One pull/merge request, whatever the forge.
#[derive(Clone, Debug)]
pub(crate) struct Pr {
    pub(crate) number: u64,
    pub(crate) head: String,
    pub(crate) base: String,
    title: String,
    body: String,
    pub(crate) open: bool,
    merged: bool,
    /// The login that merged it (`None` until merged).
    merged_by: Option<String>,
    pub(crate) comments: Vec<String>,
}

#[derive(Default)]
struct Prs {
    list: Vec<Pr>,
}

type Shared = Arc<Mutex<Prs>>;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    GitHub,
    GitLab,
    Gitea,
}

/// HTTP-level fakes of the three forges' documented pull-request APIs, sharing one in-memory
/// store: GitHub REST v3 pulls, GitLab v4 merge requests, Gitea/Forgejo v1 pulls.
pub(crate) struct ForgeFake {
    kind: Kind,
    addr: SocketAddr,
    prs: Shared,
    _runtime: tokio::runtime::Runtime,
}

/// GitHub list answers are `pull-request-simple`: no `merged_by` (nor `merged`).
fn gh_list_json(p: &Pr) -> Json_ {
    let mut v = gh_json(p);
    if let Some(o) = v.as_object_mut() {
        o.remove("merged_by");
        o.remove("merged");
    }
    v
}

/// A single pull (GitHub) or any pull answer (Gitea): `merged_by` is a user or `null`.
fn gh_json(p: &Pr) -> Json_ {
    json!({
        "merged_by": p.merged_by.as_ref().map(|l| json!({"login": l, "id": 7})),
        "number": p.number,
        "html_url": format!("https://forge.example/acme/fleet/pull/{}", p.number),
        "state": if p.open { "open" } else { "closed" },
        "merged_at": if p.merged { json!("2026-11-30T00:00:00Z") } else { json!(null) },
        "merged": p.merged,
        "title": p.title,
        "body": p.body,
        "head": {"ref": p.head, "label": format!("acme:{}", p.head)},
        "base": {"ref": p.base},
    })
}

fn gl_json(p: &Pr) -> Json_ {
    json!({
        "id": 1000 + p.number,
        "iid": p.number,
        "web_url": format!("https://gitlab.example/acme/fleet/-/merge_requests/{}", p.number),
        "state": if p.merged { "merged" } else if p.open { "opened" } else { "closed" },
        "title": p.title,
        "description": p.body,
        "source_branch": p.head,
        "target_branch": p.base,
        "source_project_id": 7,
        "target_project_id": 7,
        "merge_user": p.merged_by.as_ref().map(|l| json!({"username": l, "id": 7})),
        "merged_by": p.merged_by.as_ref().map(|l| json!({"username": l, "id": 7})),
    })
}

fn json_for(kind: Kind, p: &Pr) -> Json_ {
    match kind {
        Kind::GitLab => gl_json(p),
        Kind::GitHub | Kind::Gitea => gh_json(p),
    }
}

impl ForgeFake {
    pub(crate) fn start(kind: Kind) -> ForgeFake {
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
        let app = match kind {
            Kind::GitHub | Kind::Gitea => Router::new()
                .route("/repos/{owner}/{repo}/pulls", get(list).post(create))
                .route("/repos/{owner}/{repo}/pulls/{n}", get(one).patch(update))
                .route("/repos/{owner}/{repo}/issues/{n}/comments", post(comment)),
            Kind::GitLab => Router::new()
                .route("/projects/{id}/merge_requests", get(list).post(create))
                .route("/projects/{id}/merge_requests/{n}", get(one).put(update))
                .route("/projects/{id}/merge_requests/{n}/notes", post(comment)),
        }
        .with_state((kind, Arc::clone(&prs)));
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ForgeFake {
            kind,
            addr,
            prs,
            _runtime: runtime,
        }
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    pub(crate) fn count(&self) -> usize {
        self.prs.lock().unwrap().list.len()
    }

    fn first(&self) -> Pr {
        self.prs.lock().unwrap().list[0].clone()
    }

    fn set(&self, number: u64, open: bool, merged: bool) {
        let mut prs = self.prs.lock().unwrap();
        let pr = prs.list.iter_mut().find(|p| p.number == number).unwrap();
        pr.open = open;
        pr.merged = merged;
        pr.merged_by = merged.then(|| "octocat".to_string());
    }

    pub(crate) fn merged_by(&self, number: u64, login: &str) {
        let mut prs = self.prs.lock().unwrap();
        let pr = prs.list.iter_mut().find(|p| p.number == number).unwrap();
        (pr.open, pr.merged, pr.merged_by) = (false, true, Some(login.to_string()));
    }

    pub(crate) fn pr(&self, number: u64) -> Pr {
        let prs = self.prs.lock().unwrap();
        prs.list
            .iter()
            .find(|p| p.number == number)
            .unwrap()
            .clone()
    }

    /// A human edits the pull request's base branch (GitHub and Gitea `PATCH {base}`, GitLab
    /// `PUT {target_branch}`).
    pub(crate) fn retarget(&self, number: u64, base: &str) {
        let mut prs = self.prs.lock().unwrap();
        let pr = prs.list.iter_mut().find(|p| p.number == number).unwrap();
        pr.base = base.to_string();
    }

    pub(crate) fn settings(&self) -> String {
        let (kind, repo) = match self.kind {
            Kind::GitHub => ("github", "acme/fleet"),
            Kind::GitLab => ("gitlab", "acme/fleet"),
            Kind::Gitea => ("gitea", "acme/fleet"),
        };
        format!(
            "forge: {{kind: {kind}, apiUrl: 'http://{}', repository: {repo}}}\n",
            self.addr
        )
    }
}

type St = (Kind, Shared);

async fn list(
    State((kind, prs)): State<St>,
    Query(q): Query<HashMap<String, String>>,
) -> Json<Json_> {
    let prs = prs.lock().unwrap();
    if q.get("page")
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(1)
        > 1
    {
        return Json(json!([]));
    }
    let state = q.get("state").cloned().unwrap_or_default();
    let items: Vec<Json_> = prs
        .list
        .iter()
        .filter(|p| match kind {
            // GitHub filters by `head=owner:branch`; GitLab by `source_branch`; Gitea lists all.
            Kind::GitHub => q
                .get("head")
                .is_none_or(|h| *h == format!("acme:{}", p.head)),
            Kind::GitLab => q.get("source_branch").is_none_or(|h| *h == p.head),
            Kind::Gitea => true,
        })
        // GitHub filters by `base`, GitLab by `target_branch`; Gitea's list has no such filter.
        .filter(|p| match kind {
            Kind::GitHub => q.get("base").is_none_or(|b| *b == p.base),
            Kind::GitLab => q.get("target_branch").is_none_or(|b| *b == p.base),
            Kind::Gitea => true,
        })
        .filter(|p| match state.as_str() {
            "open" | "opened" => p.open,
            "closed" => !p.open,
            _ => true,
        })
        .map(|p| match kind {
            Kind::GitHub => gh_list_json(p),
            Kind::GitLab | Kind::Gitea => json_for(kind, p),
        })
        .collect();
    Json(json!(items))
}

async fn create(
    State((kind, prs)): State<St>,
    Json(body): Json<Json_>,
) -> (StatusCode, Json<Json_>) {
    let mut prs = prs.lock().unwrap();
    let (head, base, text) = match kind {
        Kind::GitLab => ("source_branch", "target_branch", "description"),
        Kind::GitHub | Kind::Gitea => ("head", "base", "body"),
    };
    for key in [head, base, "title", text] {
        assert!(body[key].is_string(), "create without {key}: {body}");
    }
    let pr = Pr {
        number: prs.list.len() as u64 + 1,
        head: body[head].as_str().unwrap().to_string(),
        base: body[base].as_str().unwrap().to_string(),
        title: body["title"].as_str().unwrap().to_string(),
        body: body[text].as_str().unwrap().to_string(),
        open: true,
        merged: false,
        merged_by: None,
        comments: Vec::new(),
    };
    let out = json_for(kind, &pr);
    prs.list.push(pr);
    (StatusCode::CREATED, Json(out))
}

async fn one(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
) -> Result<Json<Json_>, StatusCode> {
    let n: u64 = path
        .last()
        .and_then(|n| n.parse().ok())
        .ok_or(StatusCode::NOT_FOUND)?;
    let prs = prs.lock().unwrap();
    let pr = prs
        .list
        .iter()
        .find(|p| p.number == n)
        .ok_or(StatusCode::NOT_FOUND)?;
    Ok(Json(json_for(kind, pr)))
}

async fn update(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
    Json(body): Json<Json_>,
) -> Result<Json<Json_>, StatusCode> {
    let n: u64 = path
        .last()
        .and_then(|n| n.parse().ok())
        .ok_or(StatusCode::NOT_FOUND)?;
    let mut prs = prs.lock().unwrap();
    let pr = prs
        .list
        .iter_mut()
        .find(|p| p.number == n)
        .ok_or(StatusCode::NOT_FOUND)?;
    let closing = match kind {
        Kind::GitLab => body["state_event"] == "close",
        Kind::GitHub | Kind::Gitea => body["state"] == "closed",
    };
    if closing {
        pr.open = false;
    }
    Ok(Json(json_for(kind, pr)))
}

async fn comment(
    State((_kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
    Json(body): Json<Json_>,
) -> (StatusCode, Json<Json_>) {
    let n: u64 = path.iter().rev().find_map(|n| n.parse().ok()).unwrap_or(0);
    let mut prs = prs.lock().unwrap();
    if let Some(pr) = prs.list.iter_mut().find(|p| p.number == n) {
        pr.comments
            .push(body["body"].as_str().unwrap_or_default().to_string());
    }
    (StatusCode::CREATED, Json(json!({"id": 1})))
}

const FILE: &str = "apps/web/canary.yaml";
pub(crate) const STATUS: &str = ".sluice/status/shop/web.yaml";

fn canary(revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis:\n    interval: 1s\n    stepWeights: [20, 60]\n    approvals: {{beforePromotion: true}}\n"
    )
}

/// `shop/web` at v1 with `fake` as its forge (`extra`: more `forge` keys, e.g.
/// `, approvers: [alice]`), initialized, then v2 committed by a human.
fn world_with(fake: &ForgeFake, extra: &str) -> World {
    let config = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}",
        fake.settings().replace("}\n", &format!("{extra}}}\n"))
    );
    let mut w = World::local(&[(FILE, &canary("v1")), (".sluice/config.yaml", &config)]);
    w.tick();
    w.human_writes(FILE, &canary("v2"), "web: v2");
    w
}

/// [`world_with`] a fake forge of `kind`, ticked until the promotion waits for approval.
pub(crate) fn waiting(kind: Kind, extra: &str) -> (World, ForgeFake) {
    let fake = ForgeFake::start(kind);
    let mut w = world_with(&fake, extra);
    w.ticks(6);
    assert_eq!(w.yaml_at_main(STATUS)["phase"], "WaitingApproval");
    (w, fake)
}

pub(crate) const KINDS: [Kind; 3] = [Kind::GitHub, Kind::GitLab, Kind::Gitea];

#[test]
fn forge_fakes_one_pr_per_wait_reused_across_restarts_and_every_merge_method_approves() {
    for kind in KINDS {
        for how in ["merge", "squash", "rebase"] {
            let (mut w, fake) = waiting(kind, "");
            w.tick();
            w.tick();
            assert_eq!(fake.count(), 1, "exactly one PR ({kind:?} {how})");
            let pr = fake.first();
            assert!(
                pr.body
                    .contains("Merging this pull request approves the step"),
                "{pr:?}"
            );
            assert!(pr.title.contains("promote revision v2"), "{pr:?}");
            assert_eq!(pr.base, "main");
            let branch = fake.first().head;
            assert!(branch.starts_with("sluice/shop/web/promotion-"), "{branch}");
            // A restart (a new clone) reuses the PR.
            w.tick_a_second_clone("w2");
            assert_eq!(
                fake.count(),
                1,
                "a restart does not open a second PR ({kind:?} {how})"
            );

            merge_approval(w.human(), &branch, how);
            fake.set(1, false, true);
            assert_eq!(
                w.yaml_at_main(STATUS)["phase"],
                "Promoting",
                "the merge put the promotion on main ({kind:?} {how})"
            );
            w.now = Timestamp::now();
            w.tick();
            let subject = git(&w.bare, &["log", "-1", "--format=%s", "main"]);
            assert_eq!(
                subject.trim(),
                "web: approval merged, step clock started",
                "{kind:?} {how}"
            );
            for _ in 0..8 {
                w.tick();
            }
            let s = w.yaml_at_main(STATUS);
            assert_eq!(
                (s["phase"].as_str(), s["stableService"].as_str()),
                (Some("Succeeded"), Some("web-green")),
                "{kind:?} {how}"
            );
        }
    }
}

#[test]
fn forge_fakes_closing_the_pr_without_merge_rolls_back() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, "");
        w.tick();
        assert_eq!(fake.count(), 1);
        fake.set(1, false, false);
        w.tick();
        let s = w.yaml_at_main(STATUS);
        assert_eq!(
            (s["phase"].as_str(), s["canaryWeight"].as_u64()),
            (Some("Failed"), Some(0)),
            "{kind:?}"
        );
        let log = git(&w.bare, &["log", "-1", "--format=%s", "main"]);
        assert!(
            log.contains("approval pull request #1 was closed without merging"),
            "{kind:?}: {log}"
        );
    }
}

#[test]
fn forge_fakes_a_pr_left_behind_by_a_canary_that_moved_on_is_closed_with_a_comment() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, "");
        w.tick();
        assert!(fake.first().open);
        crate::support::run_ok(
            std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args([
                    "abort",
                    "shop/web",
                    "--dir",
                    &w.bare.display().to_string(),
                    "--reason",
                    "changed our mind",
                    "--as",
                    "Ops <ops@example.com>",
                ])
                .env("SLUICE_LOG", "error"),
        );
        // The abort happened outside the loop; the next tick sees the wait is over.
        w.tick();
        let pr = fake.first();
        assert!(!pr.open, "{kind:?}: the stale PR is closed");
        assert!(
            pr.comments.iter().any(|c| c.contains("no longer applies")),
            "{kind:?}: {pr:?}"
        );
        assert_eq!(fake.count(), 1, "no new PR");
    }
}

#[test]
fn forge_fakes_on_close_hold_keeps_waiting() {
    let fake = ForgeFake::start(Kind::GitHub);
    let mut w = world_with(&fake, ", onClose: hold");
    for _ in 0..7 {
        w.tick();
    }
    assert_eq!(fake.count(), 1);
    fake.set(1, false, false);
    w.tick();
    w.tick();
    assert_eq!(
        w.yaml_at_main(STATUS)["phase"],
        "WaitingApproval",
        "onClose: hold keeps the canary waiting"
    );
}

/// The last commit on main: its subject and its trailers.
fn last_commit(bare: &Path) -> (String, String) {
    let subject = git(bare, &["log", "-1", "--format=%s", "main"]);
    let trailers = git(bare, &["log", "-1", "--format=%(trailers)", "main"]);
    (subject.trim().to_string(), trailers)
}

fn history_json(bare: &Path) -> Vec<Json_> {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args([
        "history",
        "shop/web",
        "--dir",
        &bare.display().to_string(),
        "-o",
        "json",
    ])
    .env("SLUICE_LOG", "error");
    let out = crate::support::run_ok(&mut cmd);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `sluice audit --dir BARE -o json`: its exit code and report.
fn audit_json(bare: &Path) -> (Option<i32>, Json_) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["audit", "--dir", &bare.display().to_string(), "-o", "json"])
        .env("SLUICE_LOG", "error")
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "audit printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

#[test]
fn forge_fakes_an_approval_by_pull_request_records_the_merger_and_its_url() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, "");
        w.tick();
        let branch = fake.first().head;
        merge_approval(w.human(), &branch, "squash");
        fake.merged_by(1, "carol");
        w.now = Timestamp::now();
        w.tick();
        let url = fake.pr(1);
        let url = json_for(kind, &url)[match kind {
            Kind::GitLab => "web_url",
            Kind::GitHub | Kind::Gitea => "html_url",
        }]
        .as_str()
        .unwrap()
        .to_string();
        let (subject, trailers) = last_commit(&w.bare);
        assert_eq!(
            subject, "web: approval merged, step clock started",
            "{kind:?}"
        );
        assert!(
            trailers.contains("Sluice-Approved-By: carol\n")
                && trailers.contains(&format!("Sluice-Approval: {url}\n")),
            "{kind:?}: {trailers}"
        );
        let history = history_json(&w.bare);
        let approved = history
            .iter()
            .find(|e| e["reason"] == "web: approval merged, step clock started")
            .expect("the approval's entry");
        assert_eq!(
            (
                approved["approvedBy"].as_str(),
                approved["approval"].as_str()
            ),
            (Some("carol"), Some(url.as_str())),
            "{kind:?}"
        );
        // The history a forge approval leaves replays clean: the squash merge is the approval
        // branch's change, and the approval names its approver.
        let (code, report) = audit_json(&w.bare);
        assert_eq!(
            (code, report["findings"].as_array().map(Vec::len)),
            (Some(0), Some(0)),
            "{kind:?}: {report:#}"
        );
    }
}

/// After a merged approval that did not approve, and one tick: the canary waits for the
/// promotion again at its weights from before the merge, and the last commit says `why`
/// without naming an approver.
pub(crate) fn assert_waiting_again(w: &World, kind: Kind, why: &str) {
    let s = w.yaml_at_main(STATUS);
    assert_eq!(
        (
            s["phase"].as_str(),
            s["canaryWeight"].as_u64(),
            s["clockFromMerge"].as_bool()
        ),
        (Some("WaitingApproval"), Some(60), None),
        "{kind:?}: the canary keeps waiting, its route back where it was"
    );
    let (subject, trailers) = last_commit(&w.bare);
    assert!(
        subject.contains("waiting for approval of the promotion"),
        "{kind:?}: {subject}"
    );
    assert!(
        !trailers.contains("Sluice-Approved-By") && trailers.contains(why),
        "{kind:?}: {trailers}"
    );
}

#[test]
fn forge_fakes_a_merge_by_a_login_not_in_forge_approvers_does_not_approve() {
    for kind in KINDS {
        let (mut w, fake) = waiting(kind, ", approvers: [Alice]");
        w.tick();
        let branch = fake.first().head;
        merge_approval(w.human(), &branch, "squash");
        fake.merged_by(1, "mallory");
        assert_eq!(
            w.yaml_at_main(STATUS)["phase"],
            "Promoting",
            "the merge put the promotion on main"
        );
        w.now = Timestamp::now();
        w.tick();
        assert_waiting_again(&w, kind, "forge.approvers does not list mallory");
        for _ in 0..3 {
            w.tick();
        }
        let refused = fake.pr(1);
        assert_eq!(
            refused.comments.len(),
            1,
            "{kind:?}: one comment, not one a tick: {refused:?}"
        );
        assert!(
            refused.comments[0].contains("This merge did not approve")
                && refused.comments[0].contains("mallory"),
            "{kind:?}: {refused:?}"
        );
        assert_eq!(
            w.yaml_at_main(STATUS)["phase"],
            "WaitingApproval",
            "{kind:?}"
        );
        // A fresh pull request asks again; a listed login (any case) merging it approves.
        assert_eq!(fake.count(), 2, "{kind:?}");
        let again = fake.pr(2);
        assert!(again.open && again.head == branch, "{kind:?}: {again:?}");
        merge_approval(w.human(), &branch, "merge");
        fake.merged_by(2, "alice");
        w.now = Timestamp::now();
        w.tick();
        let (subject, trailers) = last_commit(&w.bare);
        assert_eq!(
            subject, "web: approval merged, step clock started",
            "{kind:?}"
        );
        assert!(
            trailers.contains("Sluice-Approved-By: alice\n"),
            "{kind:?}: {trailers}"
        );
        // The refused approval's commit is replayed by audit like any other.
        crate::audit::clean(&w.bare);
    }
}
