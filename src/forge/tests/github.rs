//! A fake of GitHub's REST API v3 pulls and issue-comments endpoints, and the GitHub tests.

use serde_json::{json, Value};
use wiremock::{Request, Respond, ResponseTemplate};

use super::*;

/// The query parameters GitHub documents for listing pull requests.
const LIST_PARAMS: &[&str] = &[
    "state",
    "head",
    "base",
    "sort",
    "direction",
    "per_page",
    "page",
];

/// The fields GitHub documents for creating a pull request.
const CREATE_FIELDS: &[&str] = &[
    "title",
    "head",
    "head_repo",
    "base",
    "body",
    "maintainer_can_modify",
    "draft",
    "issue",
];

pub struct GitHubFake {
    fake: Fake,
}

impl GitHubFake {
    pub fn new(fake: Fake) -> GitHubFake {
        GitHubFake { fake }
    }

    fn pull_json(&self, req: &Request, pr: &FakePr, single: bool) -> Value {
        let host = header(req, "host").unwrap_or("localhost");
        let merged_at = (pr.state == FakeState::Merged).then_some("2024-05-01T12:00:00Z");
        let mut v = json!({
            "url": format!("http://{host}/repos/{OWNER}/{REPO}/pulls/{}", pr.number),
            "id": 900_000 + pr.number,
            "number": pr.number,
            "html_url": format!("https://github.com/{OWNER}/{REPO}/pull/{}", pr.number),
            "state": if pr.state == FakeState::Open { "open" } else { "closed" },
            "title": pr.title,
            "body": pr.body,
            "created_at": "2024-05-01T10:00:00Z",
            "closed_at": (pr.state != FakeState::Open).then_some("2024-05-01T12:00:00Z"),
            "merged_at": merged_at,
            "draft": false,
            "head": {"label": format!("{OWNER}:{}", pr.head), "ref": pr.head, "sha": pr.head_sha,
                     "repo": {"full_name": format!("{OWNER}/{REPO}")}},
            "base": {"label": format!("{OWNER}:{}", pr.base), "ref": pr.base, "sha": "2222222",
                     "repo": {"full_name": format!("{OWNER}/{REPO}")}},
        });
        if single {
            // Only the single-pull answer has `merged`; lists carry `merged_at` alone.
            v["merged"] = json!(pr.state == FakeState::Merged);
            v["mergeable"] = Value::Null;
            // So is `merged_by` (a simple-user object, `null` until merged).
            v["merged_by"] = match pr.state {
                FakeState::Merged => json!({"login": MERGER, "id": 77, "type": "User"}),
                FakeState::Open | FakeState::Closed => Value::Null,
            };
        }
        v
    }

    /// `GET /orgs/{org}/teams/{team_slug}/memberships/{username}`: 200 `{state, role}` for a
    /// member, 404 otherwise (a team that does not exist included, as GitHub answers);
    /// `GET /orgs/{org}/teams/{team_slug}`: the team, or 404.
    fn membership(&self, req: &Request) -> Option<ResponseTemplate> {
        let seg = self.fake.segments(req)?;
        let seg: Vec<&str> = seg.iter().map(String::as_str).collect();
        match seg.as_slice() {
            ["orgs", org, "teams", slug, "memberships", user] => {
                Some(if self.fake.is_member(&format!("{org}/{slug}"), user) {
                    ResponseTemplate::new(200).set_body_json(json!({"state": "active", "role": "member",
                        "url": format!("https://api.github.com/organizations/1/team/2/memberships/{user}")}))
                } else {
                    error(404, "Not Found")
                })
            }
            ["orgs", org, "teams", slug] => {
                Some(if self.fake.team_exists(&format!("{org}/{slug}")) {
                    ResponseTemplate::new(200).set_body_json(
                        json!({"id": 2, "slug": slug, "name": slug, "privacy": "closed"}),
                    )
                } else {
                    error(404, "Not Found")
                })
            }
            _ => None,
        }
    }

    /// `GET /repos/{o}/{r}/pulls/{n}/reviews`, oldest first; a stale review is `DISMISSED`.
    fn reviews(&self, req: &Request, n: &str) -> ResponseTemplate {
        if let Some(e) = undocumented_param(req, &["per_page", "page"]) {
            return e;
        }
        let Some(n) = self.existing(n) else {
            return error(404, "Not Found");
        };
        let items = self
            .fake
            .reviews_of(n)
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let state = match (r.stale, r.state) {
                    (true, _) | (_, ReviewState::Dismissed) => "DISMISSED",
                    (false, ReviewState::Approved) => "APPROVED",
                    (false, ReviewState::ChangesRequested) => "CHANGES_REQUESTED",
                    (false, ReviewState::Commented) => "COMMENTED",
                    (false, ReviewState::Pending) => "PENDING",
                };
                json!({"id": 80 + i, "user": {"login": r.login, "id": 5, "type": "User"},
                       "body": "", "state": state, "commit_id": r.commit,
                       "submitted_at": "2024-05-01T11:00:00Z"})
            })
            .collect();
        let cap = self.fake.store().page_cap;
        page(req, items, "per_page", 30, 100, cap)
    }

    /// `PUT /repos/{o}/{r}/pulls/{n}/merge {sha, merge_method}`: 409 when the head moved.
    fn merge(&self, req: &Request, n: &str) -> ResponseTemplate {
        let fields = ["commit_title", "commit_message", "sha", "merge_method"];
        let body = match payload(req, &[], &fields) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let moved = error(
            409,
            "Head branch was modified. Review and try the merge again.",
        );
        let ok = |pr: &FakePr| {
            json!({"sha": format!("{:0>40}", pr.number), "merged": true,
                   "message": "Pull Request successfully merged"})
        };
        self.fake.merge_at(n, body["sha"].as_str(), moved, ok)
    }

    /// `GET /repos/{o}/{r}/commits/{sha}`: `author` is the linked account or `null`.
    fn commit(&self, sha: &str) -> ResponseTemplate {
        match self.fake.author_of(sha) {
            None => error(422, &format!("No commit found for SHA: {sha}")),
            Some(author) => ResponseTemplate::new(200).set_body_json(json!({
                "sha": sha,
                "commit": {"author": {"name": "A", "email": "a@example.com"}},
                "author": author.map(|l| json!({"login": l, "id": 9, "type": "User"})),
            })),
        }
    }

    fn route(&self, req: &Request) -> ResponseTemplate {
        if let Some(answer) = self.membership(req) {
            return answer;
        }
        self.fake
            .route_repo(req, |method, rest| match (method, rest) {
                ("GET", ["pulls", n, "reviews"]) => self.reviews(req, n),
                ("PUT", ["pulls", n, "merge"]) => self.merge(req, n),
                ("GET", ["commits", sha]) => self.commit(sha),
                ("GET", ["pulls"]) => self.list(req),
                ("POST", ["pulls"]) => self.create(req),
                ("GET", ["pulls", n]) => self.with_pr(n, |pr| {
                    if let Some(e) = undocumented_param(req, &[]) {
                        return e;
                    }
                    ResponseTemplate::new(200).set_body_json(self.pull_json(req, pr, true))
                }),
                ("PATCH", ["pulls", n]) => self.update(req, n),
                ("POST", ["issues", n, "comments"]) => {
                    let answer = |_, text: &str| json!({"id": 1, "body": text});
                    self.fake
                        .post_comment(req, n, &["body"], "Not Found", answer)
                }
                _ => error(404, "Not Found"),
            })
    }

    fn existing(&self, n: &str) -> Option<u64> {
        let n: u64 = n.parse().ok()?;
        self.fake
            .store()
            .prs
            .iter()
            .any(|p| p.number == n)
            .then_some(n)
    }

    fn with_pr(&self, n: &str, f: impl FnOnce(&FakePr) -> ResponseTemplate) -> ResponseTemplate {
        let pr = n
            .parse::<u64>()
            .ok()
            .and_then(|n| self.fake.prs().into_iter().find(|p| p.number == n));
        match pr {
            Some(pr) => f(&pr),
            None => error(404, "Not Found"),
        }
    }

    fn list(&self, req: &Request) -> ResponseTemplate {
        if let Some(e) = undocumented_param(req, LIST_PARAMS) {
            return e;
        }
        let q = query(req);
        let state = q.get("state").map(String::as_str).unwrap_or("open");
        let head = match q.get("head") {
            None => None,
            Some(h) => match h.split_once(':') {
                Some((user, branch)) => Some((user.to_string(), branch.to_string())),
                None => return error(422, "fake: head must be user:ref-name"),
            },
        };
        let prs: Vec<FakePr> = self
            .fake
            .prs_in_state(state)
            .into_iter()
            .filter(|p| {
                head.as_ref()
                    .is_none_or(|(u, b)| u == OWNER && &p.head == b)
            })
            .filter(|p| q.get("base").is_none_or(|b| &p.base == b))
            .collect();
        // sort=created (default), direction desc by default.
        let oldest_first = q.get("direction").map(String::as_str) == Some("asc");
        self.fake.page_of(
            req,
            prs,
            oldest_first,
            |p| self.pull_json(req, p, false),
            ("per_page", 30, 100),
        )
    }

    fn create(&self, req: &Request) -> ResponseTemplate {
        let json = |pr: &FakePr| self.pull_json(req, pr, true);
        let duplicate = |head: &str, _base: &str| {
            ResponseTemplate::new(422).set_body_json(json!({
                "message": "Validation Failed",
                "errors": [{"resource": "PullRequest", "code": "custom",
                            "message": format!("A pull request already exists for {OWNER}:{head}.")}],
                "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
                "status": "422"
            }))
        };
        self.fake.create_pull(req, CREATE_FIELDS, json, duplicate)
    }

    fn update(&self, req: &Request, n: &str) -> ResponseTemplate {
        let body = match payload(
            req,
            &[],
            &["title", "body", "state", "base", "maintainer_can_modify"],
        ) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let Some(n) = self.existing(n) else {
            return error(404, "Not Found");
        };
        match body.get("state").and_then(Value::as_str) {
            Some("closed") => {
                let merged = self
                    .fake
                    .prs()
                    .iter()
                    .any(|p| p.number == n && p.state == FakeState::Merged);
                if merged {
                    return error(422, "fake: cannot close a merged pull request");
                }
                self.fake.close(n)
            }
            Some(other) => return error(422, &format!("fake: state {other:?} not handled")),
            None => {}
        }
        self.with_pr(&n.to_string(), |pr| {
            ResponseTemplate::new(200).set_body_json(self.pull_json(req, pr, true))
        })
    }
}

impl Respond for GitHubFake {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        if let Some(t) = self.fake.fault() {
            return t;
        }
        let auth = ("authorization", format!("Bearer {TOKEN}"));
        let bad = "Bad credentials";
        if let Some(message) = self.fake.bad_credentials(req, (auth.0, &auth.1), bad, bad) {
            return ResponseTemplate::new(401).set_body_json(json!({
                "message": message,
                "documentation_url": "https://docs.github.com/rest",
                "status": "401"
            }));
        }
        if header(req, "accept") != Some("application/vnd.github+json")
            || header(req, "x-github-api-version") != Some("2022-11-28")
        {
            return error(400, "fake: missing Accept or X-GitHub-Api-Version header");
        }
        if header(req, "user-agent").is_none_or(str::is_empty) {
            return error(403, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header");
        }
        self.route(req)
    }
}

// ---- tests -----------------------------------------------------------------------------------

/// This fake, for the scenarios every forge passes.
pub const FAKE: FakeForge = FakeForge {
    kind: ForgeKind::GitHub,
    prefix: "",
    repository: "acme/config",
    first: 41,
    responder: |fake| Box::new(GitHubFake::new(fake)),
    wire: &WIRE,
};

/// What GitHub's API looks like on the wire.
pub const WIRE: Wire = Wire {
    first: (41, "https://github.com/acme/config/pull/41"),
    ensure_open_twice: &[
        "GET /repos/acme/config/pulls?state=open&head=acme%3Asluice%2Fprod%2Fpodinfo%2F3&base=main&per_page=100&page=1",
        "POST /repos/acme/config/pulls",
        "GET /repos/acme/config/pulls?state=open&head=acme%3Asluice%2Fprod%2Fpodinfo%2F3&base=main&per_page=100&page=1",
    ],
    create_keys: &["base", "body", "head", "title"],
    auth: ("authorization", "Bearer s3cr3t-forge-token-0123456789"),
    comment_body: r#"{"body": "metrics look good"}"#,
    // The list answer (latest_for_branch) has no `merged` field: `merged_at` alone decides.
    get_and_latest: [
        "GET /repos/acme/config/pulls/41",
        "GET /repos/acme/config/pulls?state=all&head=acme%3Asluice%2Fprod%2Fpodinfo%2F3&base=main&sort=created&direction=desc&per_page=100&page=1",
    ],
    close: ("PATCH", "/repos/acme/config/pulls/41", r#"{"state": "closed"}"#),
    comment_path: "/repos/acme/config/issues/41/comments",
    duplicate: (422, "A pull request already exists for acme:sluice/prod/podinfo/3"),
};

async fn harness() -> Harness {
    default_harness(ForgeKind::GitHub).await
}

#[tokio::test]
async fn github_fake_requests_carry_accept_api_version_and_user_agent() {
    let h = harness().await;
    let requests = ensure_open_twice_on_the_wire(&h, &WIRE).await;
    let body: Value = serde_json::from_slice(&requests[1].body).unwrap();
    assert_eq!((&body["head"], &body["base"]), (&json!(HEAD), &json!(BASE)));
    for r in &requests {
        assert_eq!(header(r, "accept"), Some("application/vnd.github+json"));
        assert_eq!(header(r, "x-github-api-version"), Some("2022-11-28"));
        assert!(header(r, "user-agent").unwrap().starts_with("sluice/"));
    }
}

#[tokio::test]
async fn github_fake_401_is_terminal_and_hides_the_token() {
    unauthorized_is_terminal(ForgeKind::GitHub, "", "acme/config").await;
    let h = Harness::start(ForgeKind::GitHub, "", "acme/config", Some("nope")).await;
    let err = h.forge.open(HEAD, BASE, "t", "b").await.unwrap_err();
    assert!(
        err.to_string().starts_with("GitHub answered 401 to create pull request (Bad credentials): check SLUICE_FORGE_TOKEN (or SLUICE_FORGE_TOKEN_FILE) holds a valid, unexpired GitHub token with repo scope"),
        "{err}"
    );
}

#[tokio::test]
async fn github_fake_500_timeout_and_rate_limit_are_transient() {
    let h = harness().await;
    failures_are_classified(&h).await;
    // GitHub's primary rate limit is a 403 with x-ratelimit-remaining: 0.
    h.fake
        .fail_next(403, vec![("x-ratelimit-remaining", "0".into())]);
    let err = h.forge.get(41).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    // A plain 403 is not.
    h.fake.fail_next(403, vec![]);
    let err = h.forge.get(41).await.unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    assert!(err.to_string().contains("repo scope"), "{err}");
    connection_refused_is_transient(ForgeKind::GitHub).await;
}

#[tokio::test]
async fn github_fake_enterprise_api_url_with_path_prefix() {
    let h = Harness::start(ForgeKind::GitHub, "/api/v3", "acme/config", Some(TOKEN)).await;
    let pr = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    h.forge.comment(pr.number, "hi").await.unwrap();
    assert_eq!(h.forge.get(pr.number).await.unwrap().state, PrState::Open);
    let lines = h.request_lines().await;
    assert!(!lines.is_empty());
    for l in &lines {
        assert!(
            l.split(' ')
                .nth(1)
                .unwrap()
                .starts_with("/api/v3/repos/acme/config/"),
            "{l}"
        );
    }
    // Without the prefix the same host answers 404: the hint names apiUrl and GHE's form.
    let wrong = Forge::from_settings(
        &ForgeSettings {
            kind: ForgeKind::GitHub,
            api_url: h.server.uri(),
            repository: "acme/config".into(),
            github_app: None,
        },
        &super::client(Some(TOKEN)),
    )
    .unwrap();
    let err = wrong.get(pr.number).await.unwrap_err();
    assert_eq!(err.status(), Some(404));
    assert!(
        err.to_string()
            .contains("https://HOST/api/v3 for GitHub Enterprise"),
        "{err}"
    );
}
