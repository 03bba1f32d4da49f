//! A fake of the Gitea (and Forgejo) API v1 pulls and issue-comments endpoints, and the Gitea
//! and Forgejo tests.

use serde_json::{json, Value};
use wiremock::{Request, Respond, ResponseTemplate};

use super::*;

/// The query parameters Gitea documents for listing pull requests.
const LIST_PARAMS: &[&str] = &[
    "state",
    "sort",
    "milestone",
    "labels",
    "poster",
    "page",
    "limit",
];

/// The fields Gitea documents for creating a pull request.
const CREATE_FIELDS: &[&str] = &[
    "head",
    "base",
    "title",
    "body",
    "assignee",
    "assignees",
    "labels",
    "milestone",
    "due_date",
    "reviewers",
    "team_reviewers",
];

/// The fields Gitea documents for editing a pull request.
const EDIT_FIELDS: &[&str] = &[
    "title",
    "body",
    "base",
    "assignee",
    "assignees",
    "milestone",
    "labels",
    "state",
    "due_date",
    "unset_due_date",
    "allow_maintainer_edit",
];

pub struct GiteaFake {
    fake: Fake,
}

impl GiteaFake {
    pub fn new(fake: Fake) -> GiteaFake {
        GiteaFake { fake }
    }

    fn pull_json(&self, pr: &FakePr) -> Value {
        let branch = |name: &str, sha: &str| {
            json!({"label": name, "ref": name, "sha": sha, "repo_id": 1,
                   "repo": {"id": 1, "name": REPO, "full_name": format!("{OWNER}/{REPO}")}})
        };
        json!({
            "id": 5000 + pr.number,
            "number": pr.number,
            "url": format!("https://gitea.example.com/{OWNER}/{REPO}/pulls/{}", pr.number),
            "html_url": format!("https://gitea.example.com/{OWNER}/{REPO}/pulls/{}", pr.number),
            "title": pr.title,
            "body": pr.body,
            "state": if pr.state == FakeState::Open { "open" } else { "closed" },
            "merged": pr.state == FakeState::Merged,
            "merged_at": (pr.state == FakeState::Merged).then_some("2024-05-01T12:00:00Z"),
            "mergeable": true,
            "merged_by": (pr.state == FakeState::Merged)
                .then(|| json!({"id": 77, "login": MERGER, "full_name": "Release Captain"})),
            "created_at": "2024-05-01T10:00:00Z",
            "head": branch(&pr.head, &pr.head_sha),
            "base": branch(&pr.base, "3333333"),
        })
    }

    /// The teams the fake knows, numbered from 1 in the order they got a member.
    fn teams(&self) -> Vec<String> {
        let mut teams: Vec<String> = Vec::new();
        for (team, _) in self.fake.store().members.iter() {
            if !teams.contains(team) {
                teams.push(team.clone());
            }
        }
        teams
    }

    /// `GET /orgs/{org}/teams/search?q=..` (`{data, ok}`, names containing `q`) and
    /// `GET /teams/{id}/members/{username}` (the user, or 404).
    fn team_call(&self, req: &Request) -> Option<ResponseTemplate> {
        let seg = self.fake.segments(req)?;
        let seg: Vec<&str> = seg.iter().map(String::as_str).collect();
        let teams = self.teams();
        match seg.as_slice() {
            ["orgs", org, "teams", "search"] => {
                if let Some(e) = undocumented_param(req, &["q", "include_desc", "page", "limit"]) {
                    return Some(e);
                }
                let q = query(req).get("q").cloned().unwrap_or_default();
                let data: Vec<Value> = teams
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| {
                        let (o, name) = t.split_once('/')?;
                        (o == *org && name.contains(q.as_str()))
                            .then(|| json!({"id": i + 1, "name": name, "permission": "write"}))
                    })
                    .collect();
                Some(ResponseTemplate::new(200).set_body_json(json!({"data": data, "ok": true})))
            }
            ["teams", id, "members", user] => {
                let team = id
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| teams.get(i.checked_sub(1)?).cloned());
                Some(match team {
                    Some(team) if self.fake.is_member(&team, user) => {
                        ResponseTemplate::new(200).set_body_json(json!({"id": 9, "login": user}))
                    }
                    _ => error(404, "The target couldn't be found."),
                })
            }
            _ => None,
        }
    }

    /// `GET /repos/{o}/{r}/pulls/{index}/reviews`: `stale` and `dismissed` say themselves.
    fn reviews(&self, req: &Request, index: &str) -> ResponseTemplate {
        if let Some(e) = undocumented_param(req, &["page", "limit"]) {
            return e;
        }
        let Some(pr) = self.find(index) else {
            return error(404, "The target couldn't be found.");
        };
        let items = self
            .fake
            .reviews_of(pr.number)
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let state = match r.state {
                    ReviewState::Approved | ReviewState::Dismissed => "APPROVED",
                    ReviewState::ChangesRequested => "REQUEST_CHANGES",
                    ReviewState::Commented => "COMMENT",
                    ReviewState::Pending => "PENDING",
                };
                json!({"id": 60 + i, "user": {"id": 5, "login": r.login}, "state": state,
                       "body": "", "commit_id": r.commit, "stale": r.stale,
                       "dismissed": r.state == ReviewState::Dismissed, "official": true,
                       "submitted_at": "2024-05-01T11:00:00Z"})
            })
            .collect();
        let cap = self.fake.store().page_cap;
        page(req, items, "limit", 30, 50, cap)
    }

    /// `POST /repos/{o}/{r}/pulls/{index}/merge {Do, head_commit_id}`: 409 "head out of
    /// date" when the head moved; 200 with no body.
    fn merge(&self, req: &Request, index: &str) -> ResponseTemplate {
        let fields = [
            "Do",
            "MergeTitleField",
            "MergeMessageField",
            "head_commit_id",
            "delete_branch_after_merge",
            "force_merge",
            "merge_when_checks_succeed",
        ];
        let body = match payload(req, &["Do"], &fields) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let moved = error(409, "head out of date");
        let expected = body["head_commit_id"].as_str().filter(|s| !s.is_empty());
        self.fake.merge_at(index, expected, moved, |_| Value::Null)
    }

    /// `GET /repos/{o}/{r}/git/commits/{sha}`: `author` is the linked account or `null`.
    fn commit(&self, sha: &str) -> ResponseTemplate {
        match self.fake.author_of(sha) {
            None => error(404, &format!("sha not found [sha: {sha}]")),
            Some(author) => ResponseTemplate::new(200).set_body_json(json!({
                "sha": sha,
                "commit": {"author": {"name": "A", "email": "a@example.com"}},
                "author": author.map(|l| json!({"id": 9, "login": l})),
            })),
        }
    }

    fn route(&self, req: &Request) -> ResponseTemplate {
        if let Some(answer) = self.team_call(req) {
            return answer;
        }
        self.fake
            .route_repo(req, |method, rest| match (method, rest) {
                ("GET", ["pulls", index, "reviews"]) => self.reviews(req, index),
                ("POST", ["pulls", index, "merge"]) => self.merge(req, index),
                ("GET", ["git", "commits", sha]) => self.commit(sha),
                ("GET", ["pulls"]) => self.list(req),
                ("POST", ["pulls"]) => self.create(req),
                ("GET", ["pulls", index]) => match self.find(index) {
                    Some(pr) => ResponseTemplate::new(200).set_body_json(self.pull_json(&pr)),
                    None => error(404, "The target couldn't be found."),
                },
                ("GET", ["pulls", base, head @ ..]) => {
                    if !self.fake.store().base_head_endpoint {
                        return error(404, "Not Found");
                    }
                    let head = head.join("/");
                    // Like Gitea's lookup: whichever matching row comes first, in any state.
                    match self
                        .fake
                        .prs()
                        .into_iter()
                        .find(|p| p.base == *base && p.head == head)
                    {
                        Some(pr) => ResponseTemplate::new(200).set_body_json(self.pull_json(&pr)),
                        None => error(404, "The target couldn't be found."),
                    }
                }
                ("PATCH", ["pulls", index]) => self.edit(req, index),
                ("POST", ["issues", index, "comments"]) => {
                    let answer = |_, text: &str| json!({"id": 1, "body": text});
                    let not_found = "The target couldn't be found.";
                    self.fake
                        .post_comment(req, index, &["body"], not_found, answer)
                }
                _ => error(404, "Not Found"),
            })
    }

    fn find(&self, index: &str) -> Option<FakePr> {
        let n: u64 = index.parse().ok()?;
        self.fake.prs().into_iter().find(|p| p.number == n)
    }

    fn list(&self, req: &Request) -> ResponseTemplate {
        if let Some(e) = undocumented_param(req, LIST_PARAMS) {
            return e;
        }
        let q = query(req);
        let state = q.get("state").map(String::as_str).unwrap_or("open");
        let prs = self.fake.prs_in_state(state);
        // Gitea's default order: newest first.
        let oldest_first = q.get("sort").map(String::as_str) == Some("oldest");
        self.fake.page_of(
            req,
            prs,
            oldest_first,
            |p| self.pull_json(p),
            ("limit", 30, 50),
        )
    }

    fn create(&self, req: &Request) -> ResponseTemplate {
        let json = |pr: &FakePr| self.pull_json(pr);
        let duplicate = |head: &str, base: &str| {
            ResponseTemplate::new(409).set_body_json(json!({
                "message": format!("pull request already exists for these targets [head_branch: {head}, base_branch: {base}]"),
                "url": "https://gitea.example.com/api/swagger"
            }))
        };
        self.fake.create_pull(req, CREATE_FIELDS, json, duplicate)
    }

    fn edit(&self, req: &Request, index: &str) -> ResponseTemplate {
        let body = match payload(req, &[], EDIT_FIELDS) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let Some(pr) = self.find(index) else {
            return error(404, "The target couldn't be found.");
        };
        match body.get("state").and_then(Value::as_str) {
            Some(_) if pr.state == FakeState::Merged => {
                return error(
                    412,
                    "cannot change state of this pull request, it was already merged",
                )
            }
            Some("closed") => self.fake.close(pr.number),
            Some(other) => return error(422, &format!("fake: state {other:?} not handled")),
            None => {}
        }
        let pr = self.find(index).unwrap();
        ResponseTemplate::new(201).set_body_json(self.pull_json(&pr))
    }
}

impl Respond for GiteaFake {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        if let Some(t) = self.fake.fault() {
            return t;
        }
        let auth = ("authorization", format!("token {TOKEN}"));
        let bad = "invalid username, password or token";
        let echoed = "invalid token";
        if let Some(message) = self
            .fake
            .bad_credentials(req, (auth.0, &auth.1), bad, echoed)
        {
            return ResponseTemplate::new(401).set_body_json(
                json!({"message": message, "url": "https://gitea.example.com/api/swagger"}),
            );
        }
        self.route(req)
    }
}

// ---- tests -----------------------------------------------------------------------------------

/// This fake, for the scenarios every forge passes.
pub const FAKE: FakeForge = FakeForge {
    kind: ForgeKind::Gitea,
    prefix: "/api/v1",
    repository: "acme/config",
    first: 3,
    responder: |fake| Box::new(GiteaFake::new(fake)),
    wire: &WIRE,
};

/// What Gitea's API looks like on the wire.
pub const WIRE: Wire = Wire {
    first: (3, "https://gitea.example.com/acme/config/pulls/3"),
    ensure_open_twice: &[
        // First call: the base/head endpoint finds nothing, the open list confirms, create.
        "GET /api/v1/repos/acme/config/pulls/main/sluice/prod/podinfo/3",
        "GET /api/v1/repos/acme/config/pulls?state=open&limit=50&page=1",
        "POST /api/v1/repos/acme/config/pulls",
        // Second call: the base/head endpoint answers with the open pull request.
        "GET /api/v1/repos/acme/config/pulls/main/sluice/prod/podinfo/3",
    ],
    create_keys: &["base", "body", "head", "title"],
    auth: ("authorization", "token s3cr3t-forge-token-0123456789"),
    comment_body: r#"{"body": "metrics look good"}"#,
    get_and_latest: [
        "GET /api/v1/repos/acme/config/pulls/3",
        "GET /api/v1/repos/acme/config/pulls?state=all&limit=50&page=1",
    ],
    close: (
        "PATCH",
        "/api/v1/repos/acme/config/pulls/3",
        r#"{"state": "closed"}"#,
    ),
    comment_path: "/api/v1/repos/acme/config/issues/3/comments",
    duplicate: (409, "pull request already exists"),
};

/// The same fake as Forgejo: Gitea's API under Forgejo's name, here without
/// `GET /pulls/{base}/{head}` (answered 404), so the open list is read instead.
pub const FORGEJO: FakeForge = FakeForge {
    kind: ForgeKind::Forgejo,
    prefix: "/api/v1",
    repository: "acme/config",
    first: 3,
    responder: |fake| {
        fake.store().base_head_endpoint = false;
        Box::new(GiteaFake::new(fake))
    },
    wire: &FORGEJO_WIRE,
};

/// Gitea's wire, the base/head lookup falling back to the open list each time.
pub const FORGEJO_WIRE: Wire = Wire {
    ensure_open_twice: &[
        "GET /api/v1/repos/acme/config/pulls/main/sluice/prod/podinfo/3",
        "GET /api/v1/repos/acme/config/pulls?state=open&limit=50&page=1",
        "POST /api/v1/repos/acme/config/pulls",
        "GET /api/v1/repos/acme/config/pulls/main/sluice/prod/podinfo/3",
        "GET /api/v1/repos/acme/config/pulls?state=open&limit=50&page=1",
    ],
    ..WIRE
};

async fn harness() -> Harness {
    default_harness(ForgeKind::Gitea).await
}

#[tokio::test]
async fn gitea_fake_401_is_terminal_and_hides_the_token() {
    unauthorized_is_terminal(ForgeKind::Gitea, "/api/v1", "acme/config").await;
}

#[tokio::test]
async fn gitea_fake_500_and_timeout_are_transient() {
    failures_are_classified(&harness().await).await;
    connection_refused_is_transient(ForgeKind::Gitea).await;
}

#[tokio::test]
async fn gitea_fake_find_open_walks_pages_without_base_head_endpoint() {
    // Older Gitea and Forgejo: no /pulls/{base}/{head}; the open list is read page by page.
    let h = harness().await;
    h.fake.store().base_head_endpoint = false;
    find_open_walks_pages(&h).await;
    let lines = h.request_lines().await;
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("pulls?state=open&limit=50&page=3")),
        "{lines:?}"
    );
}

#[tokio::test]
async fn gitea_fake_base_head_endpoint_answers_without_a_list() {
    let h = harness().await;
    h.fake.store().page_cap = 2;
    for i in 0..6 {
        h.fake.add(&format!("feature/{i}"), BASE, FakeState::Open);
    }
    let ours = h.fake.add(HEAD, BASE, FakeState::Open);
    let found = h.forge.find_open(HEAD, BASE).await.unwrap().unwrap();
    assert_eq!(found.number, ours);
    assert_eq!(
        h.request_lines().await,
        vec!["GET /api/v1/repos/acme/config/pulls/main/sluice/prod/podinfo/3"]
    );
}

#[tokio::test]
async fn gitea_fake_closed_pr_on_base_head_endpoint_does_not_hide_the_open_one() {
    // The endpoint answers with the first match in any state; an old closed pull request for the
    // same branches must not make sluice open a duplicate.
    let h = harness().await;
    h.fake.add(HEAD, BASE, FakeState::Closed);
    let open = h.fake.add(HEAD, BASE, FakeState::Open);
    let pr = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    assert_eq!(pr.number, open);
    assert_eq!(h.fake.prs().len(), 2);
}
