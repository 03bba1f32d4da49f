//! HTTP-level fakes of the GitHub, GitLab, Gitea, Forgejo, Bitbucket Cloud and Azure DevOps
//! pull-request APIs (documented endpoints and payloads, state kept in memory), and the
//! `shop/web` world that waits for their approval.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value as Json_};

use super::{git, World};

/// One pull/merge request, whatever the forge.
#[derive(Clone, Debug)]
pub(crate) struct Pr {
    pub(crate) number: u64,
    pub(crate) head: String,
    pub(crate) base: String,
    pub(crate) title: String,
    pub(crate) body: String,
    pub(crate) open: bool,
    pub(crate) merged: bool,
    /// The login that merged it (`None` until merged).
    pub(crate) merged_by: Option<String>,
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
    Forgejo,
    Bitbucket,
    AzureDevOps,
}

/// HTTP-level fakes of the forges' documented pull-request APIs, sharing one in-memory store:
/// GitHub REST v3 pulls, GitLab v4 merge requests, Gitea/Forgejo v1 pulls, Bitbucket Cloud 2.0
/// pull requests (pages of `values`), Azure DevOps 7.0 pull requests (`value`, full refs, every
/// request with `api-version`).
pub(crate) struct ForgeFake {
    kind: Kind,
    addr: SocketAddr,
    prs: Shared,
    /// GitHub with App authentication: what it saw of the App.
    app: Option<super::github_app::Shared>,
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

/// Bitbucket Cloud: `state` OPEN/MERGED/DECLINED, branches under `source`/`destination`, who
/// merged in `closed_by`.
fn bb_json(p: &Pr) -> Json_ {
    json!({
        "type": "pullrequest",
        "id": p.number,
        "title": p.title,
        "description": p.body,
        "state": if p.merged { "MERGED" } else if p.open { "OPEN" } else { "DECLINED" },
        "source": {"branch": {"name": p.head}, "repository": {"full_name": "acme/fleet"}},
        "destination": {"branch": {"name": p.base}, "repository": {"full_name": "acme/fleet"}},
        "links": {"html": {"href": format!("https://bitbucket.org/acme/fleet/pull-requests/{}", p.number)}},
        "closed_by": p.merged_by.as_ref().map(|l| json!({"nickname": l, "account_id": "5b10"})),
    })
}

/// Azure DevOps: `status` active/completed/abandoned, full refs, who completed it in
/// `closedBy.uniqueName`.
fn az_json(p: &Pr) -> Json_ {
    json!({
        "pullRequestId": p.number,
        "status": if p.merged { "completed" } else if p.open { "active" } else { "abandoned" },
        "title": p.title,
        "description": p.body,
        "sourceRefName": format!("refs/heads/{}", p.head),
        "targetRefName": format!("refs/heads/{}", p.base),
        "closedBy": p.merged_by.as_ref().map(|l| json!({"uniqueName": l, "displayName": l})),
        "repository": {"name": "fleet", "webUrl": "https://dev.azure.com/org/acme/_git/fleet"},
    })
}

pub(crate) fn json_for(kind: Kind, p: &Pr) -> Json_ {
    match kind {
        Kind::GitLab => gl_json(p),
        Kind::GitHub | Kind::Gitea | Kind::Forgejo => gh_json(p),
        Kind::Bitbucket => bb_json(p),
        Kind::AzureDevOps => az_json(p),
    }
}

/// The web page of `p` as the fake of `kind` gives it (Azure DevOps: the repository's page
/// and the number).
pub(crate) fn page_url(kind: Kind, p: &Pr) -> String {
    let v = json_for(kind, p);
    let text = |pointer: &str| {
        v.pointer(pointer)
            .and_then(Json_::as_str)
            .unwrap()
            .to_string()
    };
    match kind {
        Kind::GitLab => text("/web_url"),
        Kind::GitHub | Kind::Gitea | Kind::Forgejo => text("/html_url"),
        Kind::Bitbucket => text("/links/html/href"),
        Kind::AzureDevOps => format!("{}/pullrequest/{}", text("/repository/webUrl"), p.number),
    }
}

impl ForgeFake {
    pub(crate) fn start(kind: Kind) -> ForgeFake {
        ForgeFake::serve(kind, None)
    }

    /// The GitHub fake where every pull-request call needs an installation token of the App
    /// whose public key is `public_der` (PKCS#1 DER); see `support/github_app.rs`.
    pub(crate) fn github_app(public_der: Vec<u8>) -> ForgeFake {
        ForgeFake::serve(
            Kind::GitHub,
            Some(super::github_app::AppSide::new(public_der)),
        )
    }

    /// The GitHub App fake's record, to share with a git server (panics on a fake without
    /// the App).
    pub(crate) fn app_side(&self) -> super::github_app::Shared {
        Arc::clone(self.app.as_ref().expect("a GitHub App fake"))
    }

    /// The fake's API base URL.
    pub(crate) fn api_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What the GitHub App fake saw (panics on a fake without the App).
    pub(crate) fn app(&self) -> std::sync::MutexGuard<'_, super::github_app::AppSide> {
        self.app
            .as_ref()
            .expect("a GitHub App fake")
            .lock()
            .unwrap()
    }

    fn serve(kind: Kind, app: Option<super::github_app::Shared>) -> ForgeFake {
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
        let router = match kind {
            Kind::GitHub | Kind::Gitea | Kind::Forgejo => Router::new()
                .route("/repos/{owner}/{repo}/pulls", get(list).post(create))
                .route("/repos/{owner}/{repo}/pulls/{n}", get(one).patch(update))
                .route("/repos/{owner}/{repo}/issues/{n}/comments", post(comment)),
            Kind::GitLab => Router::new()
                .route("/projects/{id}/merge_requests", get(list).post(create))
                .route("/projects/{id}/merge_requests/{n}", get(one).put(update))
                .route("/projects/{id}/merge_requests/{n}/notes", post(comment)),
            Kind::Bitbucket => Router::new()
                .route(
                    "/repositories/{ws}/{repo}/pullrequests",
                    get(list).post(create),
                )
                .route("/repositories/{ws}/{repo}/pullrequests/{n}", get(one))
                .route(
                    "/repositories/{ws}/{repo}/pullrequests/{n}/comments",
                    post(comment),
                )
                .route(
                    "/repositories/{ws}/{repo}/pullrequests/{n}/decline",
                    post(decline),
                ),
            Kind::AzureDevOps => {
                let pulls = "/{project}/_apis/git/repositories/{repo}/pullrequests";
                Router::new()
                    .route(pulls, get(list).post(create))
                    .route(&format!("{pulls}/{{n}}"), get(one).patch(update))
                    .route(&format!("{pulls}/{{n}}/threads"), post(comment))
            }
        }
        .with_state((kind, Arc::clone(&prs)));
        let router = match &app {
            Some(side) => super::github_app::with_app(router, side),
            None => router,
        };
        runtime.spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        ForgeFake {
            kind,
            addr,
            prs,
            app,
            _runtime: runtime,
        }
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    pub(crate) fn count(&self) -> usize {
        self.prs.lock().unwrap().list.len()
    }

    pub(crate) fn first(&self) -> Pr {
        self.prs.lock().unwrap().list[0].clone()
    }

    pub(crate) fn set(&self, number: u64, open: bool, merged: bool) {
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
        let kind = match self.kind {
            Kind::GitHub => "github",
            Kind::GitLab => "gitlab",
            Kind::Gitea => "gitea",
            Kind::Forgejo => "forgejo",
            Kind::Bitbucket => "bitbucket",
            Kind::AzureDevOps => "azuredevops",
        };
        // Azure DevOps: project `acme`, repository `fleet`, below the collection at the root.
        let repo = "acme/fleet";
        format!(
            "forge: {{kind: {kind}, apiUrl: 'http://{}', repository: {repo}}}\n",
            self.addr
        )
    }
}

type St = (Kind, Shared);

/// The values of query parameter `key` (Bitbucket repeats `state`).
fn all_of<'q>(q: &'q [(String, String)], key: &str) -> Vec<&'q str> {
    q.iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// Bitbucket's `q` as sluice writes it: `field = "value"` terms joined by ` AND `.
fn bb_terms(q: &str) -> Vec<(String, String)> {
    q.split(" AND ")
        .filter_map(|term| {
            let (field, value) = term.split_once(" = ")?;
            let value = value.trim_matches('"');
            Some((field.to_string(), value.to_string()))
        })
        .collect()
}

async fn list(
    State((kind, prs)): State<St>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Json<Json_> {
    let q: HashMap<String, String> = pairs.iter().cloned().collect();
    let prs = prs.lock().unwrap();
    let page = q
        .get("page")
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(1);
    let skip = q
        .get("$skip")
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0);
    if page > 1 || skip > 0 {
        return Json(match kind {
            Kind::Bitbucket => json!({"values": []}),
            Kind::AzureDevOps => json!({"value": [], "count": 0}),
            _ => json!([]),
        });
    }
    let state = q.get("state").cloned().unwrap_or_default();
    let states = all_of(&pairs, "state");
    let terms = q.get("q").map(|q| bb_terms(q)).unwrap_or_default();
    let az_ref = |key: &str, branch: &str| {
        q.get(key)
            .is_none_or(|r| *r == format!("refs/heads/{branch}"))
    };
    let items: Vec<Json_> = prs
        .list
        .iter()
        .filter(|p| match kind {
            // GitHub filters by `head=owner:branch`; GitLab by `source_branch`; Gitea lists all.
            Kind::GitHub => q
                .get("head")
                .is_none_or(|h| *h == format!("acme:{}", p.head)),
            Kind::GitLab => q.get("source_branch").is_none_or(|h| *h == p.head),
            Kind::Gitea | Kind::Forgejo => true,
            Kind::Bitbucket => terms.iter().all(|(f, v)| match f.as_str() {
                "source.branch.name" => p.head == *v,
                "destination.branch.name" => p.base == *v,
                _ => false,
            }),
            Kind::AzureDevOps => {
                az_ref("searchCriteria.sourceRefName", &p.head)
                    && az_ref("searchCriteria.targetRefName", &p.base)
            }
        })
        // GitHub filters by `base`, GitLab by `target_branch`; Gitea's list has no such filter.
        .filter(|p| match kind {
            Kind::GitHub => q.get("base").is_none_or(|b| *b == p.base),
            Kind::GitLab => q.get("target_branch").is_none_or(|b| *b == p.base),
            _ => true,
        })
        .filter(|p| match kind {
            // Without `state`, Bitbucket lists open ones only.
            Kind::Bitbucket => {
                let s = bb_json(p)["state"].as_str().unwrap_or_default().to_string();
                if states.is_empty() {
                    s == "OPEN"
                } else {
                    states.contains(&s.as_str())
                }
            }
            Kind::AzureDevOps => match q.get("searchCriteria.status").map(String::as_str) {
                Some("all") => true,
                _ => p.open,
            },
            _ => match state.as_str() {
                "open" | "opened" => p.open,
                "closed" => !p.open,
                _ => true,
            },
        })
        .map(|p| match kind {
            Kind::GitHub => gh_list_json(p),
            _ => json_for(kind, p),
        })
        .collect();
    Json(match kind {
        Kind::Bitbucket => json!({"values": items, "pagelen": 50, "page": 1}),
        Kind::AzureDevOps => json!({"count": items.len(), "value": items}),
        _ => json!(items),
    })
}

async fn create(
    State((kind, prs)): State<St>,
    Json(body): Json<Json_>,
) -> (StatusCode, Json<Json_>) {
    let mut prs = prs.lock().unwrap();
    // JSON pointers to the head and base branch names and the description.
    let (head, base, text) = match kind {
        Kind::GitLab => ("/source_branch", "/target_branch", "/description"),
        Kind::GitHub | Kind::Gitea | Kind::Forgejo => ("/head", "/base", "/body"),
        Kind::Bitbucket => (
            "/source/branch/name",
            "/destination/branch/name",
            "/description",
        ),
        Kind::AzureDevOps => ("/sourceRefName", "/targetRefName", "/description"),
    };
    for key in [head, base, "/title", text] {
        assert!(
            body.pointer(key).is_some_and(Json_::is_string),
            "create without {key}: {body}"
        );
    }
    let at = |key: &str| {
        body.pointer(key)
            .and_then(Json_::as_str)
            .unwrap_or_default()
    };
    let branch = |key: &str| at(key).trim_start_matches("refs/heads/").to_string();
    let pr = Pr {
        number: prs.list.len() as u64 + 1,
        head: branch(head),
        base: branch(base),
        title: at("/title").to_string(),
        body: at(text).to_string(),
        open: true,
        merged: false,
        merged_by: None,
        comments: Vec::new(),
    };
    let out = json_for(kind, &pr);
    prs.list.push(pr);
    (StatusCode::CREATED, Json(out))
}

/// Applies `edit` to the pull request the path's last segment numbers: its answer, or 404.
fn edit_pr(
    kind: Kind,
    prs: &Shared,
    path: &[String],
    edit: impl FnOnce(&mut Pr),
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
    edit(pr);
    Ok(Json(json_for(kind, pr)))
}

async fn one(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
) -> Result<Json<Json_>, StatusCode> {
    edit_pr(kind, &prs, &path, |_| {})
}

async fn update(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
    Json(body): Json<Json_>,
) -> Result<Json<Json_>, StatusCode> {
    let closing = match kind {
        Kind::GitLab => body["state_event"] == "close",
        Kind::GitHub | Kind::Gitea | Kind::Forgejo => body["state"] == "closed",
        Kind::AzureDevOps => body["status"] == "abandoned",
        // Bitbucket declines with its own call.
        Kind::Bitbucket => false,
    };
    edit_pr(kind, &prs, &path, |pr| pr.open &= !closing)
}

/// Bitbucket: `POST .../pullrequests/{n}/decline` closes without merging.
async fn decline(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
) -> Result<Json<Json_>, StatusCode> {
    edit_pr(kind, &prs, &path, |pr| pr.open = false)
}

async fn comment(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
    Json(body): Json<Json_>,
) -> (StatusCode, Json<Json_>) {
    let n: u64 = path.iter().rev().find_map(|n| n.parse().ok()).unwrap_or(0);
    let mut prs = prs.lock().unwrap();
    if let Some(pr) = prs.list.iter_mut().find(|p| p.number == n) {
        let text = match kind {
            Kind::Bitbucket => body.pointer("/content/raw"),
            Kind::AzureDevOps => body.pointer("/comments/0/content"),
            _ => body.get("body"),
        };
        pr.comments
            .push(text.and_then(Json_::as_str).unwrap_or_default().to_string());
    }
    (StatusCode::CREATED, Json(json!({"id": 1})))
}

pub(crate) const FILE: &str = "apps/web/canary.yaml";

pub(crate) const STATUS: &str = ".sluice/status/shop/web.yaml";

pub(crate) fn canary(revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis:\n    interval: 1s\n    stepWeights: [20, 60]\n    approvals: {{beforePromotion: true}}\n"
    )
}

/// `shop/web` at v1 with `fake` as its forge (`extra`: more `forge` keys, e.g.
/// `, approvers: [alice]`), initialized, then v2 committed by a human.
pub(crate) fn world_with(fake: &ForgeFake, extra: &str) -> World {
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

/// Every forge sluice speaks to, for the tests that run once per forge.
pub(crate) const ALL: [Kind; 6] = [
    Kind::GitHub,
    Kind::GitLab,
    Kind::Gitea,
    Kind::Forgejo,
    Kind::Bitbucket,
    Kind::AzureDevOps,
];

/// The last commit on main: its subject and its trailers.
pub(crate) fn last_commit(bare: &Path) -> (String, String) {
    let subject = git(bare, &["log", "-1", "--format=%s", "main"]);
    let trailers = git(bare, &["log", "-1", "--format=%(trailers)", "main"]);
    (subject.trim().to_string(), trailers)
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

/// Ticks a wait on [`ForgeRun`] may take: far more than any step needs (a handful each).
const MAX_TICKS: u64 = 300;

/// A wait on [`ForgeRun`] that sees no tick at all for this long has hung.
const HANG: std::time::Duration = std::time::Duration::from_secs(60);

/// `sluice run` on `shop/web` with the fake of one forge, and a human's clone.
pub(crate) struct ForgeRun {
    pub(crate) kind: Kind,
    pub(crate) fake: ForgeFake,
    pub(crate) on: super::DaemonOnRemote,
    pub(crate) human: std::path::PathBuf,
}

impl ForgeRun {
    /// The daemon as `configure` sets it up, on a remote holding `spec` (at [`FILE`]) and
    /// `fake`'s settings with more `forge` keys (`extra`, such as `, approvers: [a]`), once it
    /// initialized the canary.
    pub(crate) fn initialized(
        fake: ForgeFake,
        extra: &str,
        spec: &str,
        configure: impl FnOnce(super::DaemonBuilder) -> super::DaemonBuilder,
    ) -> ForgeRun {
        let config = format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Config\n{}",
            fake.settings().replace("}\n", &format!("{extra}}}\n"))
        );
        let on =
            super::daemon_on_remote(&[(FILE, spec), (".sluice/config.yaml", &config)], configure);
        let human =
            super::human_clone(&on.bare.display().to_string(), &on.tmp.path().join("human"));
        let run = ForgeRun {
            kind: fake.kind(),
            fake,
            on,
            human,
        };
        run.until("initialized", |r| r.phase() == "Initialized");
        run
    }

    pub(crate) fn phase(&self) -> String {
        super::status_at_main(&self.on.bare, STATUS)
            .and_then(|s| s["phase"].as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Waits until `done` holds: at most [`MAX_TICKS`] of the daemon's ticks, and never
    /// [`HANG`] without one.
    pub(crate) fn until(&self, what: &str, done: impl Fn(&ForgeRun) -> bool) {
        let ticks = || super::reconcile_ticks(self.on.main());
        let start = ticks();
        let (mut last, mut since) = (start, std::time::Instant::now());
        while !done(self) {
            let now = ticks();
            if now != last {
                (last, since) = (now, std::time::Instant::now());
            }
            assert!(
                now - start < MAX_TICKS && since.elapsed() < HANG,
                "{:?}: not {what} after {} ticks (phase {}):\n{}",
                self.kind,
                now - start,
                self.phase(),
                self.on.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
