//! A fake of the Bitbucket Cloud REST API 2.0 pull-request endpoints, as documented at
//! developer.atlassian.com/cloud/bitbucket/rest/api-group-pullrequests: pages
//! `{size, page, pagelen, next, values}` (`pagelen` at most 50), repeated `state` filters,
//! `q` on branch names, `sort`, `Bearer` access tokens, errors as
//! `{"type": "error", "error": {"message"}}`. And the Bitbucket tests.

use serde_json::{json, Value};
use wiremock::{Request, Respond, ResponseTemplate};

use super::*;

/// The query parameters Bitbucket documents for listing pull requests.
const LIST_PARAMS: &[&str] = &["state", "q", "sort", "pagelen", "page", "fields"];

/// The fields of a pull request Bitbucket takes on create.
const CREATE_FIELDS: &[&str] = &[
    "title",
    "description",
    "source",
    "destination",
    "close_source_branch",
    "reviewers",
    "draft",
];

pub struct BitbucketFake {
    fake: Fake,
}

fn bb_error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .set_body_json(json!({"type": "error", "error": {"message": message}}))
}

fn state_of(pr: &FakePr) -> &'static str {
    match pr.state {
        FakeState::Open => "OPEN",
        FakeState::Merged => "MERGED",
        FakeState::Closed => "DECLINED",
    }
}

impl BitbucketFake {
    fn pull_json(pr: &FakePr) -> Value {
        let side = |name: &str, hash: &str| {
            json!({"branch": {"name": name}, "commit": {"hash": hash},
                   "repository": {"type": "repository", "full_name": format!("{OWNER}/{REPO}")}})
        };
        let href = format!(
            "https://bitbucket.org/{OWNER}/{REPO}/pull-requests/{}",
            pr.number
        );
        let closer =
            json!({"type": "user", "nickname": MERGER, "account_id": "5b10ac8d82e05b22cc7d4ef5"});
        json!({
            "type": "pullrequest",
            "id": pr.number,
            "title": pr.title,
            "description": pr.body,
            "state": state_of(pr),
            "source": side(&pr.head, &pr.head_sha[..12]),
            "destination": side(&pr.base, "333333333333"),
            "links": {"html": {"href": href}},
            "closed_by": (pr.state != FakeState::Open).then_some(closer),
            "merge_commit": (pr.state == FakeState::Merged).then(|| json!({"hash": "4444444"})),
            "created_on": "2024-05-01T10:00:00.000000+00:00",
        })
    }

    fn find(&self, id: &str) -> Option<FakePr> {
        let n: u64 = id.parse().ok()?;
        self.fake.prs().into_iter().find(|p| p.number == n)
    }

    /// `q` as sluice writes it: `field = "value"` terms joined by ` AND `, on the source and
    /// destination branch names; `None` (answered 400) for anything else.
    fn filter(q: &str) -> Option<Vec<(String, String)>> {
        q.split(" AND ")
            .map(|term| {
                let (field, value) = term.split_once(" = ")?;
                let value = value.strip_prefix('"')?.strip_suffix('"')?;
                matches!(field, "source.branch.name" | "destination.branch.name")
                    .then(|| (field.to_string(), value.to_string()))
            })
            .collect()
    }

    fn list(&self, req: &Request) -> ResponseTemplate {
        if let Some(e) = undocumented_param(req, LIST_PARAMS) {
            return e;
        }
        let q = query(req);
        let states: Vec<String> = req
            .url
            .query_pairs()
            .filter(|(k, _)| k == "state")
            .map(|(_, v)| v.into_owned())
            .collect();
        let terms = match q.get("q").map(|q| Self::filter(q)) {
            Some(None) => return bb_error(400, "Invalid query"),
            Some(Some(terms)) => terms,
            None => Vec::new(),
        };
        let mut prs: Vec<FakePr> = self
            .fake
            .prs()
            .into_iter()
            // Without `state`, Bitbucket lists open pull requests only.
            .filter(|p| {
                let state = state_of(p);
                if states.is_empty() {
                    state == "OPEN"
                } else {
                    states.iter().any(|s| s == state)
                }
            })
            .filter(|p| {
                terms.iter().all(|(field, value)| match field.as_str() {
                    "source.branch.name" => p.head == *value,
                    _ => p.base == *value,
                })
            })
            .collect();
        match q.get("sort").map(String::as_str) {
            Some("-created_on") => prs.sort_by_key(|p| std::cmp::Reverse(p.number)),
            Some("created_on") | None => prs.sort_by_key(|p| p.number),
            Some(other) => return bb_error(400, &format!("fake: sort {other:?} not handled")),
        }
        let cap = self.fake.store().page_cap;
        let size = q
            .get("pagelen")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(10);
        if !(1..=50).contains(&size) {
            return bb_error(400, "Invalid pagelen");
        }
        let size = size.min(cap);
        let number = q
            .get("page")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(1)
            .max(1);
        let values: Vec<Value> = prs
            .iter()
            .skip((number - 1) * size)
            .take(size)
            .map(Self::pull_json)
            .collect();
        let mut body =
            json!({"size": prs.len(), "page": number, "pagelen": size, "values": values});
        if number * size < prs.len() {
            let host = header(req, "host").unwrap_or("localhost");
            let mut next =
                reqwest::Url::parse(&format!("http://{host}{}", req.url.path())).unwrap();
            let pairs: Vec<(String, String)> = req
                .url
                .query_pairs()
                .into_owned()
                .filter(|(k, _)| k != "page" && k != "pagelen")
                .chain([
                    ("pagelen".to_string(), size.to_string()),
                    ("page".to_string(), (number + 1).to_string()),
                ])
                .collect();
            next.query_pairs_mut().clear().extend_pairs(pairs);
            body["next"] = json!(next.to_string());
        }
        ResponseTemplate::new(200).set_body_json(body)
    }

    fn create(&self, req: &Request) -> ResponseTemplate {
        let v = match payload(req, &["title", "source"], CREATE_FIELDS) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let head = text(&v["source"]["branch"]["name"]);
        // Without a destination, the repository's main branch.
        let base = match v["destination"]["branch"]["name"].as_str() {
            Some(b) => b.to_string(),
            None => BASE.to_string(),
        };
        if head.is_empty() {
            return bb_error(400, "source: This field is required.");
        }
        match self
            .fake
            .create(&head, &base, &text(&v["title"]), &text(&v["description"]))
        {
            Some(pr) => ResponseTemplate::new(201).set_body_json(Self::pull_json(&pr)),
            None => bb_error(
                400,
                &format!("There is already an open pull request from {head} to {base}"),
            ),
        }
    }

    fn comment(&self, req: &Request, id: &str) -> ResponseTemplate {
        let v = match payload(req, &["content"], &["content", "inline", "parent"]) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let Some(raw) = v["content"]["raw"].as_str() else {
            return bb_error(400, "content.raw: This field is required.");
        };
        let Some(pr) = self.find(id) else {
            return bb_error(404, "Pull request not found");
        };
        self.fake
            .store()
            .comments
            .push((pr.number, raw.to_string()));
        ResponseTemplate::new(201)
            .set_body_json(json!({"type": "pullrequest_comment", "id": 1, "content": {"raw": raw}}))
    }

    fn decline(&self, req: &Request, id: &str) -> ResponseTemplate {
        if !req.body.is_empty() {
            return bb_error(400, "fake: decline takes no body");
        }
        let Some(pr) = self.find(id) else {
            return bb_error(404, "Pull request not found");
        };
        if pr.state == FakeState::Merged {
            return bb_error(
                400,
                "You can't decline a pull request that has been merged.",
            );
        }
        self.fake.close(pr.number);
        let pr = self.find(id).unwrap();
        ResponseTemplate::new(200).set_body_json(Self::pull_json(&pr))
    }

    fn route(&self, req: &Request) -> ResponseTemplate {
        let Some(seg) = self.fake.segments(req) else {
            return bb_error(404, "Resource not found");
        };
        let seg: Vec<&str> = seg.iter().map(String::as_str).collect();
        let method = req.method.as_str();
        match (method, seg.as_slice()) {
            (_, ["repositories", OWNER, REPO, "pullrequests", rest @ ..]) => match (method, rest) {
                ("GET", []) => self.list(req),
                ("POST", []) => self.create(req),
                ("GET", [id]) => match self.find(id) {
                    Some(pr) => {
                        let mut v = Self::pull_json(&pr);
                        v["participants"] = self.participants(pr.number);
                        ResponseTemplate::new(200).set_body_json(v)
                    }
                    None => bb_error(404, "Pull request not found"),
                },
                ("POST", [id, "merge"]) => self.merge(req, id),
                ("POST", [id, "comments"]) => self.comment(req, id),
                ("POST", [id, "decline"]) => self.decline(req, id),
                _ => bb_error(404, "Resource not found"),
            },
            ("GET", ["repositories", OWNER, REPO, "commit", sha]) => self.commit(sha),
            _ => bb_error(404, "Repository not found"),
        }
    }

    /// A single pull request's `participants`: reviewers and commenters; an approval a push
    /// reset (stale) is no longer approved.
    fn participants(&self, number: u64) -> Value {
        let list: Vec<Value> = self
            .fake
            .reviews_of(number)
            .iter()
            .map(|r| {
                let (role, approved, state) = match (r.stale, r.state) {
                    (false, ReviewState::Approved) => ("REVIEWER", true, json!("approved")),
                    (false, ReviewState::ChangesRequested) => {
                        ("REVIEWER", false, json!("changes_requested"))
                    }
                    (_, ReviewState::Commented) => ("PARTICIPANT", false, Value::Null),
                    _ => ("REVIEWER", false, Value::Null),
                };
                json!({"type": "participant", "role": role, "approved": approved, "state": state,
                       "user": {"type": "user", "nickname": r.login, "account_id": format!("5b:{}", r.login)},
                       "participated_on": "2024-05-01T11:00:00.000000+00:00"})
            })
            .collect();
        Value::Array(list)
    }

    /// `POST .../pullrequests/{id}/merge`: no expected head; the merged pull request.
    fn merge(&self, req: &Request, id: &str) -> ResponseTemplate {
        let fields = ["type", "message", "close_source_branch", "merge_strategy"];
        if !req.body.is_empty() {
            if let Err(e) = payload(req, &[], &fields) {
                return e;
            }
        }
        let unused = bb_error(500, "fake: Bitbucket takes no expected head");
        self.fake.merge_at(id, None, unused, Self::pull_json)
    }

    /// `GET /repositories/{ws}/{slug}/commit/{sha}`: `author.user` when linked.
    fn commit(&self, sha: &str) -> ResponseTemplate {
        match self.fake.author_of(sha) {
            None => bb_error(404, &format!("Commit not found: {sha}")),
            Some(author) => {
                let mut a = json!({"type": "author", "raw": "A <a@example.com>"});
                if let Some(l) = author {
                    a["user"] =
                        json!({"type": "user", "nickname": l, "account_id": format!("5b:{l}")});
                }
                ResponseTemplate::new(200)
                    .set_body_json(json!({"type": "commit", "hash": sha, "author": a}))
            }
        }
    }
}

impl Respond for BitbucketFake {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        if let Some(t) = self.fake.fault() {
            return t;
        }
        let expected = format!("Bearer {TOKEN}");
        let bad = "Token is invalid, expired, or not supported for this endpoint.";
        if let Some(message) =
            self.fake
                .bad_credentials(req, ("authorization", &expected), bad, "invalid token")
        {
            return bb_error(401, &message);
        }
        self.route(req)
    }
}

// ---- tests -----------------------------------------------------------------------------------

/// This fake, for the scenarios every forge passes.
pub const FAKE: FakeForge = FakeForge {
    kind: ForgeKind::Bitbucket,
    prefix: "/2.0",
    repository: "acme/config",
    first: 12,
    responder: |fake| Box::new(BitbucketFake { fake }),
    wire: &WIRE,
};

/// What Bitbucket Cloud's API looks like on the wire.
pub const WIRE: Wire = Wire {
    first: (12, "https://bitbucket.org/acme/config/pull-requests/12"),
    ensure_open_twice: &[
        "GET /2.0/repositories/acme/config/pullrequests?state=OPEN&q=source.branch.name+%3D+%22sluice%2Fprod%2Fpodinfo%2F3%22+AND+destination.branch.name+%3D+%22main%22&pagelen=50",
        "POST /2.0/repositories/acme/config/pullrequests",
        "GET /2.0/repositories/acme/config/pullrequests?state=OPEN&q=source.branch.name+%3D+%22sluice%2Fprod%2Fpodinfo%2F3%22+AND+destination.branch.name+%3D+%22main%22&pagelen=50",
    ],
    create_keys: &["description", "destination", "source", "title"],
    auth: ("authorization", "Bearer s3cr3t-forge-token-0123456789"),
    comment_body: r#"{"content": {"raw": "metrics look good"}}"#,
    get_and_latest: [
        "GET /2.0/repositories/acme/config/pullrequests/12",
        "GET /2.0/repositories/acme/config/pullrequests?state=OPEN&state=MERGED&state=DECLINED&state=SUPERSEDED&q=source.branch.name+%3D+%22sluice%2Fprod%2Fpodinfo%2F3%22+AND+destination.branch.name+%3D+%22main%22&sort=-created_on&pagelen=50",
    ],
    close: (
        "POST",
        "/2.0/repositories/acme/config/pullrequests/12/decline",
        "",
    ),
    comment_path: "/2.0/repositories/acme/config/pullrequests/12/comments",
    duplicate: (400, "already an open pull request"),
};

async fn harness() -> Harness {
    default_harness(ForgeKind::Bitbucket).await
}

#[tokio::test]
async fn bitbucket_fake_401_is_terminal_and_hides_the_token() {
    unauthorized_is_terminal(ForgeKind::Bitbucket, "/2.0", "acme/config").await;
}

#[tokio::test]
async fn bitbucket_fake_500_and_timeout_are_transient() {
    failures_are_classified(&harness().await).await;
    connection_refused_is_transient(ForgeKind::Bitbucket).await;
}

/// The pages are followed by their `next` links; a link to another host is not followed
/// (the token would go along) but refused.
#[tokio::test]
async fn bitbucket_fake_pages_follow_next_links_only_below_the_api_url() {
    let h = harness().await;
    h.fake.store().page_cap = 2;
    for i in 0..5 {
        h.fake.add(HEAD, &format!("release-{i}"), FakeState::Closed);
    }
    let newest = h.forge.latest_for_branch(HEAD, None).await.unwrap();
    assert_eq!(newest.map(|p| p.base), Some("release-4".to_string()));
    let lines = h.request_lines().await;
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[2].ends_with("&pagelen=2&page=3"), "{lines:?}");

    let server = MockServer::start().await;
    let elsewhere = format!(
        "{}/2.0/repositories/acme/config/pullrequests?page=2",
        server.uri()
    );
    let settings = ForgeSettings {
        kind: ForgeKind::Bitbucket,
        api_url: format!("{}/2.0", h.server.uri()),
        repository: "acme/config".into(),
        github_app: None,
    };
    h.server.reset().await;
    Mock::given(any())
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"values": [], "next": elsewhere, "pagelen": 50})),
        )
        .mount(&h.server)
        .await;
    // An empty page ends the walk before any link is looked at; a full one follows it.
    let forge = Forge::from_settings(&settings, &client(Some(TOKEN))).unwrap();
    assert_eq!(forge.find_open(HEAD, BASE).await.unwrap(), None);
    h.server.reset().await;
    let one = BitbucketFake::pull_json(&FakePr {
        number: 1,
        head: "other".into(),
        base: BASE.into(),
        title: String::new(),
        body: String::new(),
        state: FakeState::Open,
        head_sha: head_sha(1, 0),
    });
    Mock::given(any())
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"values": [one], "next": elsewhere, "pagelen": 50})),
        )
        .mount(&h.server)
        .await;
    let err = forge.find_open(HEAD, BASE).await.unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    assert!(err.to_string().contains("not below forge.apiUrl"), "{err}");
    assert!(server
        .received_requests()
        .await
        .unwrap_or_default()
        .is_empty());
}

/// An access token goes as `Bearer`; `user:secret` (an API token or app password) as basic.
#[tokio::test]
async fn bitbucket_fake_user_and_secret_go_as_basic_auth() {
    let h = Harness::start(
        ForgeKind::Bitbucket,
        "/2.0",
        "acme/config",
        Some("ann:app-pw"),
    )
    .await;
    let err = h.forge.get(1).await.unwrap_err();
    assert_eq!(err.status(), Some(401));
    let requests = h.requests().await;
    // base64("ann:app-pw")
    assert_eq!(
        header(&requests[0], "authorization"),
        Some("Basic YW5uOmFwcC1wdw==")
    );
}

#[tokio::test]
async fn bitbucket_fake_superseded_is_closed() {
    let h = harness().await;
    let n = h.fake.add(HEAD, BASE, FakeState::Open);
    h.server.reset().await;
    let mut pr = BitbucketFake::pull_json(&h.fake.prs()[0]);
    pr["state"] = json!("SUPERSEDED");
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200).set_body_json(pr))
        .mount(&h.server)
        .await;
    assert_eq!(h.forge.get(n).await.unwrap().state, PrState::Closed);
}
