//! A fake of GitLab's REST API v4 merge-request and notes endpoints, and the GitLab tests.

use serde_json::{json, Value};
use wiremock::{Request, Respond, ResponseTemplate};

use super::*;

const PROJECT_PATH: &str = "platform/team/config";
/// How the project path must appear in a URL: one segment, slashes encoded.
const PROJECT_ENCODED: &str = "platform%2Fteam%2Fconfig";
const PROJECT_ID: &str = "4711";

/// The fields GitLab documents for creating a merge request note.
const NOTE_FIELDS: &[&str] = &[
    "body",
    "created_at",
    "internal",
    "merge_request_diff_head_sha",
];

/// The query parameters GitLab documents for listing merge requests.
const LIST_PARAMS: &[&str] = &[
    "state",
    "order_by",
    "sort",
    "source_branch",
    "target_branch",
    "scope",
    "view",
    "labels",
    "milestone",
    "search",
    "page",
    "per_page",
];

/// The fields GitLab documents for creating a merge request.
const CREATE_FIELDS: &[&str] = &[
    "source_branch",
    "target_branch",
    "title",
    "description",
    "assignee_id",
    "assignee_ids",
    "reviewer_ids",
    "labels",
    "milestone_id",
    "remove_source_branch",
    "squash",
    "target_project_id",
    "allow_collaboration",
];

/// The fields GitLab documents for updating a merge request.
const UPDATE_FIELDS: &[&str] = &[
    "target_branch",
    "title",
    "description",
    "state_event",
    "labels",
    "assignee_id",
    "milestone_id",
    "remove_source_branch",
    "squash",
    "discussion_locked",
];

pub struct GitLabFake {
    fake: Fake,
}

impl GitLabFake {
    pub fn new(fake: Fake) -> GitLabFake {
        GitLabFake { fake }
    }

    fn mr_json(&self, pr: &FakePr) -> Value {
        let state = match pr.state {
            FakeState::Open => "opened",
            FakeState::Merged => "merged",
            FakeState::Closed => "closed",
        };
        let merged = pr.state == FakeState::Merged;
        json!({
            "id": 100_000 + pr.number,
            "iid": pr.number,
            "project_id": 4711,
            "title": pr.title,
            "description": pr.body,
            "state": state,
            "created_at": "2024-05-01T10:00:00.000Z",
            "merged_at": (pr.state == FakeState::Merged).then_some("2024-05-01T12:00:00.000Z"),
            "closed_at": (pr.state == FakeState::Closed).then_some("2024-05-01T12:00:00.000Z"),
            "target_branch": pr.base,
            "source_branch": pr.head,
            "source_project_id": 4711,
            "target_project_id": 4711,
            "draft": false,
            "merge_status": "can_be_merged",
            "merge_user": merged.then(|| json!({"id": 77, "username": MERGER, "name": "Release Captain"})),
            "merged_by": merged.then(|| json!({"id": 77, "username": MERGER, "name": "Release Captain"})),
            "web_url": format!("https://gitlab.com/{PROJECT_PATH}/-/merge_requests/{}", pr.number),
            "sha": pr.head_sha,
        })
    }

    /// The users the fake knows (team members and commit authors), with ids from 100.
    fn users(&self) -> Vec<String> {
        let s = self.fake.store();
        let mut users: Vec<String> = s.members.iter().map(|(_, l)| l.clone()).collect();
        users.extend(s.commits.iter().filter_map(|(_, a)| a.clone()));
        users.sort();
        users.dedup();
        users
    }

    /// `GET /users?username=..` or `?search=..` (a public e-mail address matches exactly).
    fn list_users(&self, req: &Request) -> ResponseTemplate {
        if let Some(e) = undocumented_param(req, &["username", "search", "page", "per_page"]) {
            return e;
        }
        let q = query(req);
        let found: Vec<Value> = self
            .users()
            .iter()
            .enumerate()
            .filter(|(_, u)| {
                q.get("username").is_none_or(|n| n.eq_ignore_ascii_case(u))
                    && q.get("search")
                        .is_none_or(|e| *e == format!("{u}@example.com"))
            })
            .map(|(i, u)| json!({"id": 100 + i, "username": u, "name": u, "state": "active"}))
            .collect();
        ResponseTemplate::new(200).set_body_json(Value::Array(found))
    }

    /// `GET /groups/:id` (`:id` the encoded full path): the group, or 404.
    fn group(&self, group: &str) -> ResponseTemplate {
        let group = percent_decode(group);
        if !self.fake.team_exists(&group) {
            return not_found("404 Group Not Found");
        }
        ResponseTemplate::new(200)
            .set_body_json(json!({"id": 40, "full_path": group, "visibility": "private"}))
    }

    /// `GET /groups/:id/members/all/:user_id`: the member, or 404.
    fn group_member(&self, group: &str, user_id: &str) -> ResponseTemplate {
        let group = percent_decode(group);
        if !self.fake.team_exists(&group) {
            return not_found("404 Group Not Found");
        }
        let users = self.users();
        let user = user_id
            .parse::<usize>()
            .ok()
            .and_then(|id| users.get(id.checked_sub(100)?));
        match user {
            Some(u) if self.fake.is_member(&group, u) => ResponseTemplate::new(200).set_body_json(
                json!({"id": 100, "username": u, "state": "active", "access_level": 30}),
            ),
            _ => not_found("404 Not found"),
        }
    }

    /// `GET /projects/:id/repository/commits/:sha`: the author's e-mail address; a linked
    /// author's is their public address.
    fn commit(&self, sha: &str) -> ResponseTemplate {
        match self.fake.author_of(sha) {
            None => not_found("404 Commit Not Found"),
            Some(author) => {
                let email = format!("{}@example.com", author.as_deref().unwrap_or("ghost"));
                ResponseTemplate::new(200)
                    .set_body_json(json!({"id": sha, "author_name": "A", "author_email": email}))
            }
        }
    }

    /// `GET .../merge_requests/:iid/approvals`: who approves now (a stale approval is reset).
    fn approvals(&self, iid: &str) -> ResponseTemplate {
        let Some(pr) = self.find(iid) else {
            return not_found("404 Not found");
        };
        let approved_by: Vec<Value> = self
            .fake
            .reviews_of(pr.number)
            .iter()
            .filter(|r| r.state == ReviewState::Approved && !r.stale)
            .map(|r| json!({"user": {"id": 5, "username": r.login, "name": r.login}}))
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({
            "iid": pr.number, "approved": !approved_by.is_empty(), "approved_by": approved_by,
        }))
    }

    /// `PUT .../merge_requests/:iid/merge {sha}`: 409 when the head moved.
    fn merge(&self, req: &Request, iid: &str) -> ResponseTemplate {
        let fields = [
            "merge_commit_message",
            "squash_commit_message",
            "squash",
            "should_remove_source_branch",
            "merge_when_pipeline_succeeds",
            "auto_merge",
            "sha",
        ];
        let body = match payload(req, &[], &fields) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let moved = error(409, "SHA does not match HEAD of source branch");
        self.fake
            .merge_at(iid, body["sha"].as_str(), moved, |pr| self.mr_json(pr))
    }

    fn route(&self, req: &Request) -> ResponseTemplate {
        let Some(raw) = self.fake.raw_rest(req) else {
            return not_found("404 Not Found");
        };
        let seg: Vec<&str> = raw.split('/').collect();
        let method = req.method.as_str();
        match (method, seg.as_slice()) {
            ("GET", ["", "users"]) => return self.list_users(req),
            ("GET", ["", "groups", group, "members", "all", user_id]) => {
                return self.group_member(group, user_id)
            }
            ("GET", ["", "groups", group]) => return self.group(group),
            ("GET", ["", "projects", id, "repository", "commits", sha])
                if *id == PROJECT_ENCODED || *id == PROJECT_ID =>
            {
                return self.commit(sha)
            }
            _ => {}
        }
        let ["", "projects", id, "merge_requests", rest @ ..] = seg.as_slice() else {
            return not_found("404 Not Found");
        };
        if *id != PROJECT_ENCODED && *id != PROJECT_ID {
            return not_found("404 Project Not Found");
        }
        match (method, rest) {
            ("GET", [iid, "approvals"]) => self.approvals(iid),
            ("PUT", [iid, "merge"]) => self.merge(req, iid),
            ("GET", []) => self.list(req),
            ("POST", []) => self.create(req),
            ("GET", [iid]) => match self.find(iid) {
                Some(pr) => {
                    if let Some(e) = undocumented_param(req, &[]) {
                        return e;
                    }
                    ResponseTemplate::new(200).set_body_json(self.mr_json(&pr))
                }
                None => not_found("404 Not found"),
            },
            ("PUT", [iid]) => self.update(req, iid),
            ("POST", [iid, "notes"]) => {
                let answer = |iid, text: &str| json!({"id": 1, "body": text, "noteable_type": "MergeRequest", "noteable_iid": iid});
                self.fake
                    .post_comment(req, iid, NOTE_FIELDS, "404 Not found", answer)
            }
            _ => not_found("404 Not Found"),
        }
    }

    fn find(&self, iid: &str) -> Option<FakePr> {
        let n: u64 = iid.parse().ok()?;
        self.fake.prs().into_iter().find(|p| p.number == n)
    }

    fn list(&self, req: &Request) -> ResponseTemplate {
        if let Some(e) = undocumented_param(req, LIST_PARAMS) {
            return e;
        }
        let q = query(req);
        let state = q.get("state").map(String::as_str).unwrap_or("all");
        if !["opened", "closed", "locked", "merged", "all"].contains(&state) {
            return error(400, "state does not have a valid value");
        }
        let prs: Vec<FakePr> = self
            .fake
            .prs()
            .into_iter()
            .filter(|p| match state {
                "opened" => p.state == FakeState::Open,
                "closed" => p.state == FakeState::Closed,
                "merged" => p.state == FakeState::Merged,
                "locked" => false,
                _ => true,
            })
            .filter(|p| q.get("source_branch").is_none_or(|b| &p.head == b))
            .filter(|p| q.get("target_branch").is_none_or(|b| &p.base == b))
            .collect();
        let oldest_first = q.get("sort").map(String::as_str) == Some("asc");
        self.fake.page_of(
            req,
            prs,
            oldest_first,
            |p| self.mr_json(p),
            ("per_page", 20, 100),
        )
    }

    fn create(&self, req: &Request) -> ResponseTemplate {
        let keys = ["source_branch", "target_branch", "title", "description"];
        let (body, created) = match self.fake.create_from(
            req,
            &["source_branch", "target_branch", "title"],
            CREATE_FIELDS,
            keys,
        ) {
            Ok(v) => v,
            Err(e) => return e,
        };
        match created {
            Some(pr) => ResponseTemplate::new(201).set_body_json(self.mr_json(&pr)),
            None => {
                // The open merge request of this source branch that refused the new one.
                let existing = self.fake.prs().into_iter().find(|p| {
                    Some(p.head.as_str()) == body["source_branch"].as_str()
                        && p.state == FakeState::Open
                });
                let iid = existing.map(|p| p.number).unwrap_or_else(|| {
                    self.fake
                        .prs()
                        .iter()
                        .filter(|p| p.state == FakeState::Open)
                        .map(|p| p.number)
                        .max()
                        .unwrap_or(0)
                });
                ResponseTemplate::new(409).set_body_json(json!({
                    "message": [format!("Another open merge request already exists for this source branch: !{iid}")]
                }))
            }
        }
    }

    fn update(&self, req: &Request, iid: &str) -> ResponseTemplate {
        let body = match payload(req, &[], UPDATE_FIELDS) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let Some(pr) = self.find(iid) else {
            return not_found("404 Not found");
        };
        match body.get("state_event").and_then(Value::as_str) {
            Some("close") if pr.state == FakeState::Open => self.fake.close(pr.number),
            Some("close") => return error(422, "fake: merge request is not open"),
            Some(other) => {
                return error(
                    400,
                    &format!("state_event does not have a valid value: {other}"),
                )
            }
            None => {}
        }
        let pr = self.find(iid).unwrap();
        ResponseTemplate::new(200).set_body_json(self.mr_json(&pr))
    }
}

fn not_found(message: &str) -> ResponseTemplate {
    error(404, message)
}

impl Respond for GitLabFake {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        if let Some(t) = self.fake.fault() {
            return t;
        }
        let bad = "401 Unauthorized";
        if let Some(message) = self
            .fake
            .bad_credentials(req, ("private-token", TOKEN), bad, bad)
        {
            return error(401, &message);
        }
        self.route(req)
    }
}

// ---- tests -----------------------------------------------------------------------------------

/// This fake, for the scenarios every forge passes.
pub const FAKE: FakeForge = FakeForge {
    kind: ForgeKind::GitLab,
    prefix: "/api/v4",
    repository: PROJECT_PATH,
    first: 7,
    responder: |fake| Box::new(GitLabFake::new(fake)),
    wire: &WIRE,
};

/// What GitLab's API looks like on the wire.
pub const WIRE: Wire = Wire {
    // The iid, not the global id.
    first: (7, "https://gitlab.com/platform/team/config/-/merge_requests/7"),
    ensure_open_twice: &[
        "GET /api/v4/projects/platform%2Fteam%2Fconfig/merge_requests?state=opened&source_branch=sluice%2Fprod%2Fpodinfo%2F3&target_branch=main&per_page=100&page=1",
        "POST /api/v4/projects/platform%2Fteam%2Fconfig/merge_requests",
        "GET /api/v4/projects/platform%2Fteam%2Fconfig/merge_requests?state=opened&source_branch=sluice%2Fprod%2Fpodinfo%2F3&target_branch=main&per_page=100&page=1",
    ],
    create_keys: &["description", "source_branch", "target_branch", "title"],
    auth: ("private-token", "s3cr3t-forge-token-0123456789"),
    comment_body: r#"{"body": "metrics look good"}"#,
    get_and_latest: [
        "GET /api/v4/projects/platform%2Fteam%2Fconfig/merge_requests/7",
        "GET /api/v4/projects/platform%2Fteam%2Fconfig/merge_requests?state=all&source_branch=sluice%2Fprod%2Fpodinfo%2F3&target_branch=main&order_by=created_at&sort=desc&per_page=100&page=1",
    ],
    close: (
        "PUT",
        "/api/v4/projects/platform%2Fteam%2Fconfig/merge_requests/7",
        r#"{"state_event": "close"}"#,
    ),
    comment_path: "/api/v4/projects/platform%2Fteam%2Fconfig/merge_requests/7/notes",
    duplicate: (409, "Another open merge request already exists"),
};

async fn harness() -> Harness {
    default_harness(ForgeKind::GitLab).await
}

#[tokio::test]
async fn gitlab_fake_create_sends_description_and_no_authorization_header() {
    let requests = ensure_open_twice_on_the_wire(&harness().await, &WIRE).await;
    let body: Value = serde_json::from_slice(&requests[1].body).unwrap();
    assert_eq!(body["description"], "body one");
    for r in &requests {
        assert_eq!(header(r, "authorization"), None);
    }
}

#[tokio::test]
async fn gitlab_fake_401_is_terminal_and_hides_the_token() {
    unauthorized_is_terminal(ForgeKind::GitLab, "/api/v4", PROJECT_PATH).await;
    let h = Harness::start(ForgeKind::GitLab, "/api/v4", PROJECT_PATH, Some("nope")).await;
    let err = h.forge.get(7).await.unwrap_err();
    assert!(
        err.to_string().starts_with("GitLab answered 401 to get merge request !7 (401 Unauthorized): check SLUICE_FORGE_TOKEN"),
        "{err}"
    );
    assert!(err.to_string().contains("api scope"), "{err}");
}

#[tokio::test]
async fn gitlab_fake_500_and_timeout_are_transient() {
    failures_are_classified(&harness().await).await;
    connection_refused_is_transient(ForgeKind::GitLab).await;
}

#[tokio::test]
async fn gitlab_fake_project_path_is_url_encoded_and_ids_work() {
    // A nested group path is one encoded segment; a wrongly split path would 404.
    let h = harness().await;
    let pr = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    for r in h.requests().await {
        assert!(
            r.url
                .path()
                .starts_with("/api/v4/projects/platform%2Fteam%2Fconfig/merge_requests"),
            "{}",
            r.url
        );
    }
    // A numeric project id is used as is.
    let by_id = Harness::start(ForgeKind::GitLab, "/api/v4", PROJECT_ID, Some(TOKEN)).await;
    by_id.fake.add(HEAD, BASE, FakeState::Open);
    let found = by_id.forge.find_open(HEAD, BASE).await.unwrap().unwrap();
    assert_eq!(found.number, pr.number);
    for r in by_id.requests().await {
        assert!(
            r.url
                .path()
                .starts_with("/api/v4/projects/4711/merge_requests"),
            "{}",
            r.url
        );
    }
    // A project the fake does not know: 404 with a hint naming the setting.
    let other = Harness::start(ForgeKind::GitLab, "/api/v4", "platform/other", Some(TOKEN)).await;
    let err = other.forge.find_open(HEAD, BASE).await.unwrap_err();
    assert_eq!(err.status(), Some(404));
    assert!(err.to_string().contains("404 Project Not Found"), "{err}");
    assert!(
        err.to_string()
            .contains("forge.repository \"platform/other\""),
        "{err}"
    );
}
