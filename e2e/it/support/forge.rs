//! HTTP-level fakes of the GitHub, GitLab, Gitea, Forgejo, Bitbucket Cloud and Azure DevOps
//! pull-request APIs (documented endpoints and payloads, state kept in memory), and the
//! `shop/web` world that waits for their approval.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
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
    /// The head commit; [`ForgeFake::set_head`] moves it.
    pub(crate) head_sha: String,
    /// Reviews, oldest first: login, GitHub's state spelling (`APPROVED`,
    /// `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED`), the head commit it was given on.
    pub(crate) reviews: Vec<(String, String, String)>,
}

/// The login the fakes' token belongs to: who sluice's merges are made by.
pub(crate) const TOKEN_USER: &str = "sluice-bot";

#[derive(Default)]
struct Prs {
    list: Vec<Pr>,
    /// (team, login): GitHub/Gitea `org/slug`, GitLab group path, Azure DevOps `project/team`.
    members: Vec<(String, String)>,
    /// Commit sha and the login its author is linked to (`None`: not linked).
    authors: Vec<(String, Option<String>)>,
}

impl Prs {
    fn teams(&self) -> Vec<String> {
        let mut teams: Vec<String> = Vec::new();
        for (t, _) in &self.members {
            if !teams.contains(t) {
                teams.push(t.clone());
            }
        }
        teams
    }

    /// Every login the fake knows, for GitLab's `/users`.
    fn users(&self) -> Vec<String> {
        let mut users: Vec<String> = self.members.iter().map(|(_, l)| l.clone()).collect();
        users.extend(self.authors.iter().filter_map(|(_, a)| a.clone()));
        for pr in &self.list {
            users.extend(pr.reviews.iter().map(|(l, _, _)| l.clone()));
        }
        users.sort();
        users.dedup();
        users
    }

    fn is_member(&self, team: &str, login: &str) -> bool {
        self.members.iter().any(|(t, l)| t == team && l == login)
    }

    fn author(&self, sha: &str) -> Option<Option<String>> {
        self.authors
            .iter()
            .find(|(c, _)| c == sha)
            .map(|(_, a)| a.clone())
    }
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
        "head": {"ref": p.head, "label": format!("acme:{}", p.head), "sha": p.head_sha},
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
        "sha": p.head_sha,
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
        "source": {"branch": {"name": p.head}, "commit": {"hash": p.head_sha.get(..12).unwrap_or(&p.head_sha)},
                   "repository": {"full_name": "acme/fleet"}},
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
        "lastMergeSourceCommit": {"commitId": p.head_sha},
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
            Kind::GitHub | Kind::Gitea | Kind::Forgejo => {
                // GitHub merges with PUT, Gitea with POST; their commit and team calls differ.
                let github = kind == Kind::GitHub;
                let merging = if github { put(merge) } else { post(merge) };
                let repo = Router::new()
                    .route("/repos/{owner}/{repo}/pulls", get(list).post(create))
                    .route("/repos/{owner}/{repo}/pulls/{n}", get(one).patch(update))
                    .route("/repos/{owner}/{repo}/pulls/{n}/reviews", get(reviews))
                    .route("/repos/{owner}/{repo}/pulls/{n}/merge", merging)
                    .route("/repos/{owner}/{repo}/issues/{n}/comments", post(comment));
                if github {
                    repo.route("/repos/{owner}/{repo}/commits/{sha}", get(commit))
                        .route(
                            "/orgs/{org}/teams/{slug}/memberships/{user}",
                            get(membership),
                        )
                        .route("/orgs/{org}/teams/{slug}", get(team))
                } else {
                    repo.route("/repos/{owner}/{repo}/git/commits/{sha}", get(commit))
                        .route("/orgs/{org}/teams/search", get(team_search))
                        .route("/teams/{id}/members/{user}", get(membership))
                }
            }
            Kind::GitLab => Router::new()
                .route("/projects/{id}/merge_requests", get(list).post(create))
                .route("/projects/{id}/merge_requests/{n}", get(one).put(update))
                .route("/projects/{id}/merge_requests/{n}/approvals", get(reviews))
                .route("/projects/{id}/merge_requests/{n}/merge", put(merge))
                .route("/projects/{id}/repository/commits/{sha}", get(commit))
                .route("/users", get(gitlab_users))
                .route("/groups/{id}/members/all/{user}", get(membership))
                .route("/groups/{id}", get(team))
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
                )
                .route(
                    "/repositories/{ws}/{repo}/pullrequests/{n}/merge",
                    post(merge),
                )
                .route("/repositories/{ws}/{repo}/commit/{sha}", get(commit)),
            Kind::AzureDevOps => {
                let pulls = "/{project}/_apis/git/repositories/{repo}/pullrequests";
                Router::new()
                    .route(pulls, get(list).post(create))
                    .route(&format!("{pulls}/{{n}}"), get(one).patch(update))
                    .route(&format!("{pulls}/{{n}}/threads"), post(comment))
                    .route(&format!("{pulls}/{{n}}/reviewers"), get(reviews))
                    .route(
                        "/{project}/_apis/git/repositories/{repo}/commits/{sha}",
                        get(commit),
                    )
                    .route(
                        "/_apis/projects/{project}/teams/{team}/members",
                        get(membership),
                    )
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

    /// `login` reviews pull request `number` (`state` in GitHub's spelling) on `commit`.
    pub(crate) fn review(&self, number: u64, login: &str, state: &str, commit: &str) {
        let mut prs = self.prs.lock().unwrap();
        let pr = prs.list.iter_mut().find(|p| p.number == number).unwrap();
        pr.reviews
            .push((login.to_string(), state.to_string(), commit.to_string()));
    }

    /// Someone pushes `sha` to the pull request's branch.
    pub(crate) fn set_head(&self, number: u64, sha: &str) {
        let mut prs = self.prs.lock().unwrap();
        let pr = prs.list.iter_mut().find(|p| p.number == number).unwrap();
        pr.head_sha = sha.to_string();
    }

    /// `login` joins `team` (GitHub/Gitea `org/slug`, GitLab group path, Azure DevOps
    /// `project/team`).
    pub(crate) fn add_member(&self, team: &str, login: &str) {
        let mut prs = self.prs.lock().unwrap();
        prs.members.push((team.to_string(), login.to_string()));
    }

    /// The forge links commit `sha`'s author to `login` (`None`: to no account).
    pub(crate) fn set_commit_author(&self, sha: &str, login: Option<&str>) {
        let mut prs = self.prs.lock().unwrap();
        prs.authors
            .push((sha.to_string(), login.map(str::to_string)));
    }

    /// A human edits the pull request's base branch (GitHub and Gitea `PATCH {base}`, GitLab
    /// `PUT {target_branch}`).
    pub(crate) fn retarget(&self, number: u64, base: &str) {
        let mut prs = self.prs.lock().unwrap();
        let pr = prs.list.iter_mut().find(|p| p.number == number).unwrap();
        pr.base = base.to_string();
    }

    /// The API base the fake serves at.
    pub(crate) fn api_url(&self) -> String {
        format!("http://{}", self.addr)
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
        head_sha: format!("{:0>40}", prs.list.len() + 1),
        reviews: Vec::new(),
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
    let Json(mut v) = edit_pr(kind, &prs, &path, |_| {})?;
    if kind == Kind::Bitbucket {
        let n = v["id"].as_u64();
        let prs = prs.lock().unwrap();
        if let Some(p) = prs.list.iter().find(|p| Some(p.number) == n) {
            v["participants"] = bb_participants(p);
        }
    }
    Ok(Json(v))
}

async fn update(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
    Json(body): Json<Json_>,
) -> Result<Json<Json_>, StatusCode> {
    if kind == Kind::AzureDevOps && body["status"] == "completed" {
        // Azure DevOps completes only with `lastMergeSourceCommit` (400 without it).
        let Some(expected) = body
            .pointer("/lastMergeSourceCommit/commitId")
            .and_then(Json_::as_str)
        else {
            return Err(StatusCode::BAD_REQUEST);
        };
        return merge_pr(kind, &prs, &path, Some(expected)).map_err(|(status, _)| status);
    }
    let closing = match kind {
        Kind::GitLab => body["state_event"] == "close",
        Kind::GitHub | Kind::Gitea | Kind::Forgejo => body["state"] == "closed",
        Kind::AzureDevOps => body["status"] == "abandoned",
        // Bitbucket declines with its own call.
        Kind::Bitbucket => false,
    };
    edit_pr(kind, &prs, &path, |pr| pr.open &= !closing)
}

/// Merges the pull request the path numbers if its head is `expected` (when given), as
/// [`TOKEN_USER`]: 404 for none, 405 when not open, 409 when the head moved.
fn merge_pr(
    kind: Kind,
    prs: &Shared,
    path: &[String],
    expected: Option<&str>,
) -> Result<Json<Json_>, (StatusCode, Json<Json_>)> {
    let refuse = |status: StatusCode, message: &str| (status, Json(json!({"message": message})));
    let n: Option<u64> = path.iter().rev().find_map(|n| n.parse().ok());
    let mut prs = prs.lock().unwrap();
    let Some(pr) = prs.list.iter_mut().find(|p| Some(p.number) == n) else {
        return Err(refuse(StatusCode::NOT_FOUND, "Not Found"));
    };
    if !pr.open {
        return Err(refuse(StatusCode::METHOD_NOT_ALLOWED, "not mergeable"));
    }
    if expected.is_some_and(|e| e != pr.head_sha) {
        return Err(refuse(StatusCode::CONFLICT, "head out of date"));
    }
    (pr.open, pr.merged, pr.merged_by) = (false, true, Some(TOKEN_USER.to_string()));
    Ok(Json(json_for(kind, pr)))
}

/// GitHub `PUT .../merge {sha}`, Gitea/Forgejo `POST .../merge {Do, head_commit_id}`, GitLab
/// `PUT .../merge {sha}`, Bitbucket `POST .../merge` (no expected head).
async fn merge(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
    body: Option<Json<Json_>>,
) -> Result<Json<Json_>, (StatusCode, Json<Json_>)> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let key = match kind {
        Kind::Gitea | Kind::Forgejo => "head_commit_id",
        _ => "sha",
    };
    merge_pr(kind, &prs, &path, body.get(key).and_then(Json_::as_str))
}

/// Each forge's review answer for the pull request the path numbers: GitHub and Gitea
/// reviews (Gitea marks one given on an older head `stale`), GitLab approvals, Azure DevOps
/// reviewer votes (GitLab and Azure DevOps drop an approval a push reset).
async fn reviews(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<Json_>, StatusCode> {
    let n: Option<u64> = path.iter().rev().find_map(|n| n.parse().ok());
    let prs = prs.lock().unwrap();
    let pr = prs
        .list
        .iter()
        .find(|p| Some(p.number) == n)
        .ok_or(StatusCode::NOT_FOUND)?;
    let later_page = pairs.iter().any(|(k, v)| k == "page" && v != "1");
    let current = |commit: &str| commit == pr.head_sha;
    let rs = pr.reviews.iter();
    Ok(Json(match kind {
        _ if later_page => json!([]),
        Kind::GitHub => json!(rs
            .map(|(l, s, c)| json!({"user": {"login": l}, "state": s, "commit_id": c}))
            .collect::<Vec<_>>()),
        Kind::Gitea | Kind::Forgejo => json!(rs
            .map(|(l, s, c)| {
                let state = match s.as_str() {
                    "CHANGES_REQUESTED" => "REQUEST_CHANGES",
                    "COMMENTED" => "COMMENT",
                    "DISMISSED" => "APPROVED",
                    other => other,
                };
                json!({"user": {"login": l}, "state": state, "commit_id": c,
                       "stale": !current(c), "dismissed": s == "DISMISSED"})
            })
            .collect::<Vec<_>>()),
        Kind::GitLab => json!({"approved_by": rs
            .filter(|(_, s, c)| s == "APPROVED" && current(c))
            .map(|(l, _, _)| json!({"user": {"username": l}}))
            .collect::<Vec<_>>()}),
        Kind::AzureDevOps => json!({"value": rs
            .map(|(l, s, c)| {
                let vote = match s.as_str() {
                    "APPROVED" if current(c) => 10,
                    "CHANGES_REQUESTED" => -10,
                    _ => 0,
                };
                json!({"uniqueName": l, "vote": vote})
            })
            .collect::<Vec<_>>()}),
        Kind::Bitbucket => return Err(StatusCode::NOT_FOUND),
    }))
}

/// Bitbucket's `participants` of a pull request: an approval a push reset is gone.
fn bb_participants(p: &Pr) -> Json_ {
    json!(p
        .reviews
        .iter()
        .map(|(l, s, c)| {
            let approved = s == "APPROVED" && *c == p.head_sha;
            let state = match s.as_str() {
                "CHANGES_REQUESTED" => json!("changes_requested"),
                _ if approved => json!("approved"),
                _ => json!(null),
            };
            json!({"user": {"nickname": l, "account_id": format!("5b:{l}")}, "role": "REVIEWER",
                   "approved": approved, "state": state})
        })
        .collect::<Vec<_>>())
}

/// The commit the path names: its author as each forge links it (GitLab: by e-mail).
async fn commit(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
) -> Result<Json<Json_>, StatusCode> {
    let sha = path.last().cloned().unwrap_or_default();
    let prs = prs.lock().unwrap();
    let author = prs.author(&sha).ok_or(StatusCode::NOT_FOUND)?;
    Ok(Json(match kind {
        Kind::GitHub | Kind::Gitea | Kind::Forgejo => {
            json!({"sha": sha, "author": author.map(|l| json!({"login": l}))})
        }
        Kind::GitLab => json!({"id": sha, "author_email":
            format!("{}@example.com", author.as_deref().unwrap_or("ghost"))}),
        Kind::Bitbucket => json!({"hash": sha, "author": {"raw": "A <a@example.com>",
            "user": author.map(|l| json!({"nickname": l}))}}),
        Kind::AzureDevOps => json!({"commitId": sha,
            "push": author.map(|l| json!({"pushedBy": {"uniqueName": l}}))}),
    }))
}

/// GitLab `GET /users?username=..|search=..` (a public e-mail address `login@example.com`).
async fn gitlab_users(
    State((_, prs)): State<St>,
    Query(q): Query<HashMap<String, String>>,
) -> Json<Json_> {
    let prs = prs.lock().unwrap();
    let users: Vec<Json_> = prs
        .users()
        .iter()
        .enumerate()
        .filter(|(_, u)| {
            q.get("username").is_none_or(|n| n == *u)
                && q.get("search")
                    .is_none_or(|e| *e == format!("{u}@example.com"))
        })
        .map(|(i, u)| json!({"id": 100 + i, "username": u}))
        .collect();
    Json(json!(users))
}

/// Gitea/Forgejo `GET /orgs/{org}/teams/search?q=..`: teams numbered from 1.
async fn team_search(
    State((_, prs)): State<St>,
    UrlPath(org): UrlPath<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Json<Json_> {
    let prs = prs.lock().unwrap();
    let wanted = q.get("q").cloned().unwrap_or_default();
    let data: Vec<Json_> = prs
        .teams()
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let (o, name) = t.split_once('/')?;
            (o == org && name.contains(wanted.as_str())).then(|| json!({"id": i + 1, "name": name}))
        })
        .collect();
    Json(json!({"data": data, "ok": true}))
}

/// GitHub `GET /orgs/{org}/teams/{slug}` and GitLab `GET /groups/{id}` (the full path): the
/// team, or 404 (their membership calls answer 404 for an unknown team too).
async fn team(
    State((_, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
) -> Result<Json<Json_>, StatusCode> {
    let name = path.join("/");
    if prs.lock().unwrap().teams().contains(&name) {
        Ok(Json(json!({"id": 2, "name": name})))
    } else {
        Err(StatusCode::NOT_FOUND)
    }
}

/// Membership as each forge answers it: GitHub `{state}` or 404, Gitea the user or 404
/// (team by number), GitLab the member or 404 (user by id), Azure DevOps the team's members.
async fn membership(
    State((kind, prs)): State<St>,
    UrlPath(path): UrlPath<Vec<String>>,
) -> Result<Json<Json_>, StatusCode> {
    let prs = prs.lock().unwrap();
    let at = |i: usize| path.get(i).cloned().unwrap_or_default();
    let member = match kind {
        Kind::GitHub => prs.is_member(&format!("{}/{}", at(0), at(1)), &at(2)),
        Kind::Gitea | Kind::Forgejo => {
            let team = at(0)
                .parse::<usize>()
                .ok()
                .and_then(|i| prs.teams().get(i.checked_sub(1)?).cloned());
            team.is_some_and(|t| prs.is_member(&t, &at(1)))
        }
        Kind::GitLab => {
            let users = prs.users();
            let user = at(1)
                .parse::<usize>()
                .ok()
                .and_then(|id| users.get(id.checked_sub(100)?).cloned());
            user.is_some_and(|u| prs.is_member(&at(0), &u))
        }
        Kind::AzureDevOps => {
            let team = format!("{}/{}", at(0), at(1));
            if !prs.teams().contains(&team) {
                return Err(StatusCode::NOT_FOUND);
            }
            let value: Vec<Json_> = prs
                .members
                .iter()
                .filter(|(t, _)| *t == team)
                .map(|(_, l)| json!({"identity": {"uniqueName": l}}))
                .collect();
            return Ok(Json(json!({"count": value.len(), "value": value})));
        }
        Kind::Bitbucket => false,
    };
    if member {
        Ok(Json(
            json!({"state": "active", "login": at(2), "username": at(1)}),
        ))
    } else {
        Err(StatusCode::NOT_FOUND)
    }
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

    /// Waits until `done` holds ([`super::until_ticks`]).
    pub(crate) fn until(&self, what: &str, done: impl Fn(&ForgeRun) -> bool) {
        super::until_ticks(
            &self.on,
            what,
            || done(self),
            || format!("{:?}, phase {}", self.kind, self.phase()),
        );
    }
}
