//! A fake of the Azure DevOps Git REST API 7.0 pull-request endpoints, as documented at
//! learn.microsoft.com/rest/api/azure/devops/git/pull-requests: the collection URL as base,
//! `api-version` on every request, full refs (`refs/heads/...`), `searchCriteria.*` filters,
//! `$top`/`$skip` paging with `{value, count}` answers, basic auth with an empty user, 409
//! `TF401179` for a duplicate, a 4,000-character description limit. And the Azure DevOps tests.

use serde_json::{json, Value};
use wiremock::{Request, Respond, ResponseTemplate};

use super::*;

/// The query parameters Azure DevOps documents for listing pull requests.
const LIST_PARAMS: &[&str] = &[
    "searchCriteria.creatorId",
    "searchCriteria.includeLinks",
    "searchCriteria.repositoryId",
    "searchCriteria.reviewerId",
    "searchCriteria.sourceRefName",
    "searchCriteria.sourceRepositoryId",
    "searchCriteria.status",
    "searchCriteria.targetRefName",
    "$top",
    "$skip",
    "api-version",
];

/// The fields of a pull request Azure DevOps takes on create.
const CREATE_FIELDS: &[&str] = &[
    "sourceRefName",
    "targetRefName",
    "title",
    "description",
    "reviewers",
    "isDraft",
    "workItemRefs",
    "labels",
    "forkSource",
];

/// The fields Azure DevOps takes on update.
const UPDATE_FIELDS: &[&str] = &[
    "status",
    "title",
    "description",
    "completionOptions",
    "mergeOptions",
    "autoCompleteSetBy",
    "isDraft",
    "targetRefName",
    "lastMergeSourceCommit",
];

pub struct AzureFake {
    fake: Fake,
}

/// `refs/heads/main`, the form Azure DevOps names branches in.
fn full_ref(branch: &str) -> String {
    format!("refs/heads/{branch}")
}

fn az_error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(
        json!({"$id": "1", "innerException": null, "message": message, "errorCode": 0}),
    )
}

fn status_of(pr: &FakePr) -> &'static str {
    match pr.state {
        FakeState::Open => "active",
        FakeState::Merged => "completed",
        FakeState::Closed => "abandoned",
    }
}

impl AzureFake {
    fn pull_json(pr: &FakePr) -> Value {
        let closer =
            json!({"displayName": "Release Captain", "uniqueName": MERGER, "id": "d6245f20"});
        json!({
            "pullRequestId": pr.number,
            "codeReviewId": pr.number,
            "status": status_of(pr),
            "title": pr.title,
            "description": pr.body,
            "sourceRefName": full_ref(&pr.head),
            "targetRefName": full_ref(&pr.base),
            "mergeStatus": if pr.state == FakeState::Merged { "succeeded" } else { "queued" },
            "closedBy": (pr.state != FakeState::Open).then_some(closer),
            "lastMergeSourceCommit": {"commitId": pr.head_sha},
            "creationDate": "2024-05-01T10:00:00Z",
            "repository": {
                "id": "3411ebc1-d5aa-464f-9615-0b527bc66719",
                "name": "config",
                "webUrl": "https://dev.azure.com/acme-org/fleet/_git/config",
                "project": {"name": "fleet"},
            },
        })
    }

    fn find(&self, id: &str) -> Option<FakePr> {
        let n: u64 = id.parse().ok()?;
        self.fake.prs().into_iter().find(|p| p.number == n)
    }

    fn list(&self, req: &Request) -> ResponseTemplate {
        if let Some(e) = undocumented_param(req, LIST_PARAMS) {
            return e;
        }
        let q = query(req);
        let status = q.get("searchCriteria.status").map(String::as_str);
        let by_ref = |key: &str, branch: &str| q.get(key).is_none_or(|r| *r == full_ref(branch));
        let mut prs: Vec<FakePr> = self
            .fake
            .prs()
            .into_iter()
            .filter(|p| match status {
                Some("all") => true,
                // Without a status, active ones only.
                Some(s) => s == status_of(p),
                None => p.state == FakeState::Open,
            })
            .filter(|p| by_ref("searchCriteria.sourceRefName", &p.head))
            .filter(|p| by_ref("searchCriteria.targetRefName", &p.base))
            .collect();
        prs.sort_by_key(|p| std::cmp::Reverse(p.number));
        let number = |k: &str| q.get(k).and_then(|v| v.parse::<usize>().ok());
        let top = number("$top")
            .unwrap_or(101)
            .min(self.fake.store().page_cap);
        let skip = number("$skip").unwrap_or(0);
        let value: Vec<Value> = prs
            .iter()
            .skip(skip)
            .take(top)
            .map(Self::pull_json)
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({"count": value.len(), "value": value}))
    }

    fn create(&self, req: &Request) -> ResponseTemplate {
        let v = match payload(req, &["sourceRefName", "targetRefName"], CREATE_FIELDS) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let branch = |k: &str| text(k).strip_prefix("refs/heads/").map(str::to_string);
        let (Some(head), Some(base)) = (branch("sourceRefName"), branch("targetRefName")) else {
            return az_error(400, "TF401398: The pull request cannot be activated because the source and/or the target branch no longer exists");
        };
        if text("description").chars().count() > 4000 {
            return az_error(
                400,
                "The description of a pull request is limited to 4000 characters.",
            );
        }
        match self
            .fake
            .create(&head, &base, &text("title"), &text("description"))
        {
            Some(pr) => ResponseTemplate::new(201).set_body_json(Self::pull_json(&pr)),
            None => az_error(
                409,
                "TF401179: An active pull request for the source and target branch already exists.",
            ),
        }
    }

    fn thread(&self, req: &Request, id: &str) -> ResponseTemplate {
        let v = match payload(
            req,
            &["comments"],
            &["comments", "status", "threadContext", "properties"],
        ) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let Some(content) = v["comments"][0]["content"].as_str() else {
            return az_error(400, "fake: a thread needs comments[0].content");
        };
        let Some(pr) = self.find(id) else {
            return az_error(404, "TF401180: The requested pull request was not found.");
        };
        self.fake
            .store()
            .comments
            .push((pr.number, content.to_string()));
        ResponseTemplate::new(200).set_body_json(json!({"id": 1, "comments": v["comments"]}))
    }

    fn update(&self, req: &Request, id: &str) -> ResponseTemplate {
        let v = match payload(req, &[], UPDATE_FIELDS) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let Some(pr) = self.find(id) else {
            return az_error(404, "TF401180: The requested pull request was not found.");
        };
        match v.get("status").and_then(Value::as_str) {
            Some(_) if pr.state == FakeState::Merged => {
                return az_error(
                    400,
                    "TF401181: The pull request cannot be edited due to its state.",
                )
            }
            Some("abandoned") => self.fake.close(pr.number),
            Some("completed") => {
                // Completing needs `lastMergeSourceCommit` (the answer without it is known);
                // Azure DevOps documents no answer for one the branch moved past: this fake
                // refuses it with a 409.
                let Some(expected) = v
                    .pointer("/lastMergeSourceCommit/commitId")
                    .and_then(Value::as_str)
                else {
                    return az_error(400, "Invalid argument value.\r\nParameter name: You must specify a valid LastMergeSourceCommit to perform this operation.");
                };
                let blocked = self.fake.store().completion_blocked;
                if let Some(why) = blocked.filter(|_| pr.state == FakeState::Open) {
                    let mut answer = Self::pull_json(&pr);
                    answer["mergeStatus"] = json!(why);
                    return ResponseTemplate::new(200).set_body_json(answer);
                }
                let moved = az_error(
                    409,
                    "fake: lastMergeSourceCommit is not the source branch's head",
                );
                return self
                    .fake
                    .merge_at(id, Some(expected), moved, Self::pull_json);
            }
            Some(other) => return az_error(400, &format!("fake: status {other:?} not handled")),
            None => {}
        }
        ResponseTemplate::new(200).set_body_json(Self::pull_json(&self.find(id).unwrap()))
    }

    /// `GET .../pullrequests/{id}/reviewers`: votes (a push resets a stale one to 0), and a
    /// group reviewer whose vote its members make.
    fn reviewers(&self, id: &str) -> ResponseTemplate {
        let Some(pr) = self.find(id) else {
            return az_error(404, "TF401180: The requested pull request was not found.");
        };
        let mut value: Vec<Value> = self
            .fake
            .reviews_of(pr.number)
            .iter()
            .map(|r| {
                let vote = match (r.stale, r.state) {
                    (false, ReviewState::Approved) => 10,
                    (false, ReviewState::ChangesRequested) => -10,
                    _ => 0,
                };
                json!({"uniqueName": r.login, "displayName": r.login, "vote": vote,
                       "isRequired": false, "id": format!("id-{}", r.login)})
            })
            .collect();
        if !value.is_empty() {
            value.push(
                json!({"uniqueName": "vstfs:///Classification/TeamProject/fleet\\Release",
                              "displayName": "[fleet]\\Release", "vote": 10, "isContainer": true}),
            );
        }
        ResponseTemplate::new(200).set_body_json(json!({"count": value.len(), "value": value}))
    }

    /// `GET /_apis/projects/{p}/teams/{t}/members?$top&$skip`; 404 for an unknown team.
    fn team_members(&self, req: &Request, team: &str) -> ResponseTemplate {
        if let Some(e) = undocumented_param(req, &["api-version", "$top", "$skip"]) {
            return e;
        }
        if !self.fake.team_exists(team) {
            return az_error(404, "VS800075: The team does not exist.");
        }
        let q = query(req);
        let number = |k: &str| q.get(k).and_then(|v| v.parse::<usize>().ok());
        let top = number("$top")
            .unwrap_or(100)
            .min(self.fake.store().page_cap);
        let members: Vec<Value> = self
            .fake
            .store()
            .members
            .iter()
            .filter(|(t, _)| t == team)
            .skip(number("$skip").unwrap_or(0))
            .take(top)
            .map(|(_, l)| json!({"identity": {"uniqueName": l, "displayName": l, "id": format!("id-{l}")}}))
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({"count": members.len(), "value": members}))
    }

    /// `GET .../commits/{sha}`: a git identity, and who pushed it when the fake links it.
    fn commit(&self, sha: &str) -> ResponseTemplate {
        match self.fake.author_of(sha) {
            None => az_error(404, &format!("TF401175: The commit {sha} does not exist.")),
            Some(author) => ResponseTemplate::new(200).set_body_json(json!({
                "commitId": sha,
                "author": {"name": "A", "email": "a@example.com", "date": "2024-05-01T10:00:00Z"},
                "push": author.map(|l| json!({"pushId": 3, "pushedBy": {"uniqueName": l, "displayName": l}})),
            })),
        }
    }

    fn route(&self, req: &Request) -> ResponseTemplate {
        if query(req).get("api-version").map(String::as_str) != Some("7.0") {
            return az_error(
                400,
                "VS800075: The project ... requires the api-version parameter",
            );
        }
        let Some(seg) = self.fake.segments(req) else {
            return az_error(404, "Not Found");
        };
        let seg: Vec<&str> = seg.iter().map(String::as_str).collect();
        let method = req.method.as_str();
        match seg.as_slice() {
            ["_apis", "projects", project, "teams", team, "members"] => {
                self.team_members(req, &format!("{project}/{team}"))
            }
            ["fleet", "_apis", "git", "repositories", "config", "commits", sha] => self.commit(sha),
            ["fleet", "_apis", "git", "repositories", "config", "pullrequests", rest @ ..] => {
                match (method, rest) {
                    ("GET", [id, "reviewers"]) => self.reviewers(id),
                    ("GET", []) => self.list(req),
                    ("POST", []) => self.create(req),
                    ("GET", [id]) => match self.find(id) {
                        Some(pr) => ResponseTemplate::new(200).set_body_json(Self::pull_json(&pr)),
                        None => {
                            az_error(404, "TF401180: The requested pull request was not found.")
                        }
                    },
                    ("PATCH", [id]) => self.update(req, id),
                    ("POST", [id, "threads"]) => self.thread(req, id),
                    _ => az_error(404, "Not Found"),
                }
            }
            _ => az_error(404, "TF200016: The following project does not exist"),
        }
    }
}

impl Respond for AzureFake {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        if let Some(t) = self.fake.fault() {
            return t;
        }
        // base64(":" + TOKEN): a personal access token with an empty user name.
        let expected = "Basic OnMzY3IzdC1mb3JnZS10b2tlbi0wMTIzNDU2Nzg5";
        let bad = "TF400813: The user '' is not authorized to access this resource.";
        if let Some(message) =
            self.fake
                .bad_credentials(req, ("authorization", expected), bad, "not authorized")
        {
            return az_error(401, &message);
        }
        self.route(req)
    }
}

// ---- tests -----------------------------------------------------------------------------------

/// This fake, for the scenarios every forge passes.
pub const FAKE: FakeForge = FakeForge {
    kind: ForgeKind::AzureDevOps,
    prefix: "/acme-org",
    repository: "fleet/config",
    first: 21,
    responder: |fake| Box::new(AzureFake { fake }),
    wire: &WIRE,
};

const LIST_OPEN: &str = "GET /acme-org/fleet/_apis/git/repositories/config/pullrequests?searchCriteria.sourceRefName=refs%2Fheads%2Fsluice%2Fprod%2Fpodinfo%2F3&searchCriteria.targetRefName=refs%2Fheads%2Fmain&searchCriteria.status=active&api-version=7.0&%24top=100&%24skip=0";

/// What the Azure DevOps API looks like on the wire.
pub const WIRE: Wire = Wire {
    first: (21, "https://dev.azure.com/acme-org/fleet/_git/config/pullrequest/21"),
    ensure_open_twice: &[
        LIST_OPEN,
        "POST /acme-org/fleet/_apis/git/repositories/config/pullrequests?api-version=7.0",
        LIST_OPEN,
    ],
    create_keys: &["description", "sourceRefName", "targetRefName", "title"],
    auth: ("authorization", "Basic OnMzY3IzdC1mb3JnZS10b2tlbi0wMTIzNDU2Nzg5"),
    comment_body: r#"{"comments": [{"parentCommentId": 0, "content": "metrics look good", "commentType": 1}], "status": 1}"#,
    get_and_latest: [
        "GET /acme-org/fleet/_apis/git/repositories/config/pullrequests/21?api-version=7.0",
        "GET /acme-org/fleet/_apis/git/repositories/config/pullrequests?searchCriteria.sourceRefName=refs%2Fheads%2Fsluice%2Fprod%2Fpodinfo%2F3&searchCriteria.targetRefName=refs%2Fheads%2Fmain&searchCriteria.status=all&api-version=7.0&%24top=100&%24skip=0",
    ],
    close: (
        "PATCH",
        "/acme-org/fleet/_apis/git/repositories/config/pullrequests/21",
        r#"{"status": "abandoned"}"#,
    ),
    comment_path: "/acme-org/fleet/_apis/git/repositories/config/pullrequests/21/threads",
    duplicate: (409, "TF401179"),
};

async fn harness() -> Harness {
    default_harness(ForgeKind::AzureDevOps).await
}

#[tokio::test]
async fn azure_fake_401_is_terminal_and_hides_the_token() {
    unauthorized_is_terminal(ForgeKind::AzureDevOps, "/acme-org", "fleet/config").await;
}

#[tokio::test]
async fn azure_fake_500_and_timeout_are_transient() {
    failures_are_classified(&harness().await).await;
    connection_refused_is_transient(ForgeKind::AzureDevOps).await;
}

/// Azure DevOps answers a refused token with 203 and its sign-in page: sluice reads that as
/// a 401 that says to check the token.
#[tokio::test]
async fn azure_fake_203_sign_in_page_is_a_refused_token() {
    let h = harness().await;
    h.server.reset().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(203).set_body_raw("<html>Sign In</html>", "text/html"))
        .mount(&h.server)
        .await;
    let err = h.forge.get(21).await.unwrap_err();
    assert_eq!(err.status(), Some(401), "{err}");
    assert!(
        err.to_string().contains("check SLUICE_FORGE_TOKEN"),
        "{err}"
    );
}

#[tokio::test]
async fn azure_fake_pages_by_top_and_skip() {
    let h = harness().await;
    h.fake.store().page_cap = 2;
    // Listed newest first: the highest number is on the first page, but all are read.
    let newest = h.fake.add(HEAD, "release", FakeState::Closed);
    for _ in 0..4 {
        h.fake.add("feature/x", BASE, FakeState::Closed);
    }
    h.fake.store().next_number = 1;
    h.fake.add(HEAD, "old", FakeState::Closed);
    let found = h.forge.latest_for_branch(HEAD, None).await.unwrap();
    assert_eq!(found.map(|p| p.number), Some(newest));
    let lines = h.request_lines().await;
    // Two items a page (the server cut `$top`), then an empty page ends the walk.
    let skips: Vec<&str> = lines
        .iter()
        .map(|l| l.rsplit("%24skip=").next().unwrap())
        .collect();
    assert_eq!(skips, ["0", "2"], "{lines:?}");
    assert!(
        lines.iter().all(|l| l.contains("api-version=7.0")),
        "{lines:?}"
    );
}

/// A completion Azure DevOps answers with the pull request still active and a `mergeStatus`
/// of `rejectedByPolicy` (or `conflicts`, `failure`) did not merge it: an error, not success.
#[tokio::test]
async fn azure_fake_completion_left_active_by_a_policy_is_an_error() {
    let h = harness().await;
    let n = h.fake.add(HEAD, BASE, FakeState::Open);
    let head = h.forge.get(n).await.unwrap().head_sha.unwrap();
    h.fake.store().completion_blocked = Some("rejectedByPolicy");
    let err = h.forge.merge(n, &head).await.unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    assert!(err.to_string().contains("rejectedByPolicy"), "{err}");
    assert_eq!(h.forge.get(n).await.unwrap().state, PrState::Open);
    h.fake.store().completion_blocked = None;
    h.forge.merge(n, &head).await.unwrap();
    assert_eq!(h.forge.get(n).await.unwrap().state, PrState::Merged);
}
