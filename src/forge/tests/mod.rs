//! HTTP-level fakes of the GitHub, GitLab and Gitea APIs, and the scenarios every provider must
//! pass against them.
//!
//! Each fake is an in-process wiremock server on 127.0.0.1 that implements the documented
//! endpoints, keeps pull requests in memory, and refuses what the real API would refuse: a
//! wrong token (401), an undocumented query parameter or payload field, a missing required field,
//! a duplicate open pull request. Tests then also assert the recorded requests.

mod azure;
mod bitbucket;
mod gitea;
mod github;
mod gitlab;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::{
    Forge, ForgeClient, ForgeError, ForgeKind, ForgeSettings, ForgeToken, PrState, PullRequest,
    Review, ReviewState,
};

pub const TOKEN: &str = "s3cr3t-forge-token-0123456789";

/// The shared forge client with `token`, as the runtime builds it once at start.
pub fn client(token: Option<&str>) -> ForgeClient {
    ForgeClient::new(token.map(ForgeToken::new)).unwrap()
}
pub const HEAD: &str = "sluice/prod/podinfo/3";
/// The login every fake reports as the merger of a merged pull request.
pub const MERGER: &str = "release-captain";
pub const BASE: &str = "main";
/// The repository the GitHub and Gitea fakes serve: `acme/config`.
pub const OWNER: &str = "acme";
pub const REPO: &str = "config";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeState {
    Open,
    Merged,
    Closed,
}

#[derive(Debug, Clone)]
pub struct FakePr {
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub state: FakeState,
    /// The head commit (40 hex digits); a push moves it.
    pub head_sha: String,
}

/// A review as the fakes hold it; each fake answers it in its forge's words (a stale review:
/// GitHub `DISMISSED`, Gitea `stale`, GitLab and Bitbucket drop the approval, Azure DevOps
/// resets the vote).
#[derive(Debug, Clone)]
pub struct FakeReview {
    pub number: u64,
    pub login: String,
    pub state: ReviewState,
    pub commit: String,
    pub stale: bool,
}

/// The head commit of pull request `number` after `pushes` pushes.
pub fn head_sha(number: u64, pushes: u64) -> String {
    format!("{number:04}{pushes:04}{}", "ab".repeat(16))
}

/// What a fake holds: pull requests, comments, and the faults to inject next.
#[derive(Debug)]
pub struct Store {
    pub prs: Vec<FakePr>,
    pub comments: Vec<(u64, String)>,
    /// Answer the next requests with these statuses (and headers) instead of serving them.
    pub fail: VecDeque<(u16, Vec<(&'static str, String)>)>,
    pub delay: Option<Duration>,
    /// Serve at most this many items a page, whatever was asked for.
    pub page_cap: usize,
    pub next_number: u64,
    /// Gitea only: serve `GET /pulls/{base}/{head}` (Gitea 1.22+) or answer 404 (older ones).
    pub base_head_endpoint: bool,
    /// Echo the received credentials in 401 answers, to prove sluice scrubs them.
    pub echo_credentials: bool,
    /// Another writer opens the same pull request just before our create arrives.
    pub race_on_create: bool,
    pub reviews: Vec<FakeReview>,
    /// (team, login) pairs.
    pub members: Vec<(String, String)>,
    /// Commits the fake knows: sha and the login its author's e-mail address belongs to.
    pub commits: Vec<(String, Option<String>)>,
    /// Azure DevOps only: answer a completion with the pull request still active and this
    /// `mergeStatus` (a branch policy or a conflict blocks it).
    pub completion_blocked: Option<&'static str>,
}

/// A handle on one fake's state, shared with its responder.
#[derive(Clone)]
pub struct Fake {
    store: Arc<Mutex<Store>>,
    /// Path prefix of the API (`/api/v3`, `/api/v4`, `/api/v1`, or empty).
    pub prefix: String,
}

impl Fake {
    fn new(prefix: &str, first_number: u64) -> Fake {
        Fake {
            store: Arc::new(Mutex::new(Store {
                prs: Vec::new(),
                comments: Vec::new(),
                fail: VecDeque::new(),
                delay: None,
                page_cap: 100,
                next_number: first_number,
                base_head_endpoint: true,
                echo_credentials: false,
                race_on_create: false,
                reviews: Vec::new(),
                members: Vec::new(),
                commits: Vec::new(),
                completion_blocked: None,
            })),
            prefix: prefix.to_string(),
        }
    }

    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap()
    }

    /// A human merges the pull request.
    pub fn merge(&self, number: u64) {
        self.set_state(number, FakeState::Merged);
    }

    /// A human closes the pull request without merging.
    pub fn close(&self, number: u64) {
        self.set_state(number, FakeState::Closed);
    }

    fn set_state(&self, number: u64, state: FakeState) {
        let mut s = self.store();
        let pr = s.prs.iter_mut().find(|p| p.number == number).unwrap();
        pr.state = state;
    }

    /// A pull request someone else opened.
    pub fn add(&self, head: &str, base: &str, state: FakeState) -> u64 {
        let mut s = self.store();
        let number = s.next_number;
        s.next_number += 1;
        s.prs.push(FakePr {
            number,
            head: head.into(),
            base: base.into(),
            title: format!("other {head}"),
            body: String::new(),
            state,
            head_sha: head_sha(number, 0),
        });
        number
    }

    /// `login` reviews pull request `number` on its current head.
    pub fn review(&self, number: u64, login: &str, state: ReviewState, stale: bool) {
        let commit = self.head_of(number);
        self.store().reviews.push(FakeReview {
            number,
            login: login.into(),
            state,
            commit,
            stale,
        });
    }

    pub fn head_of(&self, number: u64) -> String {
        let prs = self.prs();
        prs.iter()
            .find(|p| p.number == number)
            .unwrap()
            .head_sha
            .clone()
    }

    /// Someone pushes to the pull request's branch: its head moves.
    pub fn push(&self, number: u64) -> String {
        let mut s = self.store();
        let pr = s.prs.iter_mut().find(|p| p.number == number).unwrap();
        let pushes: u64 = pr.head_sha[4..8].parse().unwrap();
        pr.head_sha = head_sha(number, pushes + 1);
        pr.head_sha.clone()
    }

    pub fn add_member(&self, team: &str, login: &str) {
        self.store().members.push((team.into(), login.into()));
    }

    pub fn set_commit_author(&self, sha: &str, login: Option<&str>) {
        self.store()
            .commits
            .push((sha.into(), login.map(str::to_string)));
    }

    pub fn reviews_of(&self, number: u64) -> Vec<FakeReview> {
        let s = self.store();
        s.reviews
            .iter()
            .filter(|r| r.number == number)
            .cloned()
            .collect()
    }

    pub fn is_member(&self, team: &str, login: &str) -> bool {
        let s = self.store();
        s.members.iter().any(|(t, l)| t == team && l == login)
    }

    /// The teams the fake knows (any with a member).
    pub fn team_exists(&self, team: &str) -> bool {
        self.store().members.iter().any(|(t, _)| t == team)
    }

    /// `Some(author)` for a known commit, `None` for an unknown one (the forge's 404).
    pub fn author_of(&self, sha: &str) -> Option<Option<String>> {
        let s = self.store();
        s.commits
            .iter()
            .find(|(c, _)| c == sha)
            .map(|(_, a)| a.clone())
    }

    /// Serves a merge of pull request `n` at `expected` as the forges do: 404 for an unknown
    /// one, 405 for one not open, `moved` when its head is not `expected` (when given);
    /// otherwise it is merged (by [`MERGER`], the token's user) and `ok` is the answer.
    pub fn merge_at(
        &self,
        n: &str,
        expected: Option<&str>,
        moved: ResponseTemplate,
        ok: impl Fn(&FakePr) -> Value,
    ) -> ResponseTemplate {
        let pr = n
            .parse::<u64>()
            .ok()
            .and_then(|n| self.prs().into_iter().find(|p| p.number == n));
        let Some(pr) = pr else {
            return error(404, "Not Found");
        };
        if pr.state != FakeState::Open {
            return error(405, "Pull Request is not mergeable");
        }
        if expected.is_some_and(|e| e != pr.head_sha) {
            return moved;
        }
        self.merge(pr.number);
        let merged = self.prs().into_iter().find(|p| p.number == pr.number);
        ResponseTemplate::new(200).set_body_json(ok(&merged.unwrap()))
    }

    pub fn fail_next(&self, status: u16, headers: Vec<(&'static str, String)>) {
        self.store().fail.push_back((status, headers));
    }

    pub fn prs(&self) -> Vec<FakePr> {
        self.store().prs.clone()
    }

    pub fn comments(&self) -> Vec<(u64, String)> {
        self.store().comments.clone()
    }

    /// Creates a pull request the way the forge does when asked (`None` if one is already open
    /// for the same branches).
    fn create(&self, head: &str, base: &str, title: &str, body: &str) -> Option<FakePr> {
        if std::mem::take(&mut self.store().race_on_create) {
            self.add(head, base, FakeState::Open);
            self.store().prs.last_mut().unwrap().title = "opened by someone else".into();
        }
        let mut s = self.store();
        if s.prs
            .iter()
            .any(|p| p.head == head && p.base == base && p.state == FakeState::Open)
        {
            return None;
        }
        let number = s.next_number;
        s.next_number += 1;
        let pr = FakePr {
            number,
            head: head.into(),
            base: base.into(),
            title: title.into(),
            body: body.into(),
            state: FakeState::Open,
            head_sha: head_sha(number, 0),
        };
        s.prs.push(pr.clone());
        Some(pr)
    }

    /// Serves a create request: its payload must have the `required` keys and only `allowed`
    /// ones (else `Err` is the answer); `keys` name its head, base, title and body. Returns the
    /// payload and the new pull request, `None` when one is already open for the branches.
    // The error is the answer to send; test code, built once per request.
    #[allow(clippy::result_large_err)]
    fn create_from(
        &self,
        req: &Request,
        required: &[&str],
        allowed: &[&str],
        [head, base, title, body]: [&str; 4],
    ) -> Result<(Value, Option<FakePr>), ResponseTemplate> {
        let v = payload(req, required, allowed)?;
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let created = self.create(&s(head), &s(base), &s(title), &s(body));
        Ok((v, created))
    }

    /// The pull requests a GitHub or Gitea list with `state` (`open`, `closed`, else all) holds.
    pub fn prs_in_state(&self, state: &str) -> Vec<FakePr> {
        self.prs()
            .into_iter()
            .filter(|p| match state {
                "open" => p.state == FakeState::Open,
                "closed" => p.state != FakeState::Open,
                _ => true,
            })
            .collect()
    }

    /// Routes a GitHub or Gitea request below `repos/{OWNER}/{REPO}/` to `serve`, with its
    /// method and the rest of its path; anything else is a 404.
    pub fn route_repo(
        &self,
        req: &Request,
        serve: impl FnOnce(&str, &[&str]) -> ResponseTemplate,
    ) -> ResponseTemplate {
        let Some(seg) = self.segments(req) else {
            return error(404, "Not Found");
        };
        let seg: Vec<&str> = seg.iter().map(String::as_str).collect();
        match seg.as_slice() {
            ["repos", OWNER, REPO, rest @ ..] => serve(req.method.as_str(), rest),
            _ => error(404, "Not Found"),
        }
    }

    /// Serves a comment on the pull request numbered `n` (a path segment): the payload needs
    /// `body` and may hold only `allowed` fields; an unknown number is a 404 with `not_found`;
    /// the answer is 201 with `answer(number, text)`.
    pub fn post_comment(
        &self,
        req: &Request,
        n: &str,
        allowed: &[&str],
        not_found: &str,
        answer: impl Fn(u64, &str) -> Value,
    ) -> ResponseTemplate {
        let body = match payload(req, &["body"], allowed) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let number = n
            .parse::<u64>()
            .ok()
            .filter(|n| self.prs().iter().any(|p| p.number == *n));
        let Some(number) = number else {
            return error(404, not_found);
        };
        let text = body["body"].as_str().unwrap_or_default().to_string();
        self.store().comments.push((number, text.clone()));
        ResponseTemplate::new(201).set_body_json(answer(number, &text))
    }

    /// Serves `POST /repos/{owner}/{repo}/pulls` as GitHub and Gitea both document it: `head`,
    /// `base` and `title` required, only `allowed` fields; 201 with `json` of the new pull
    /// request, or `duplicate(head, base)` when one is already open for the branches.
    pub fn create_pull(
        &self,
        req: &Request,
        allowed: &[&str],
        json: impl Fn(&FakePr) -> Value,
        duplicate: impl Fn(&str, &str) -> ResponseTemplate,
    ) -> ResponseTemplate {
        let keys = ["head", "base", "title", "body"];
        match self.create_from(req, &keys[..3], allowed, keys) {
            Ok((_, Some(pr))) => ResponseTemplate::new(201).set_body_json(json(&pr)),
            Ok((body, None)) => {
                let s = |k: &str| body[k].as_str().unwrap_or_default().to_string();
                duplicate(&s("head"), &s("base"))
            }
            Err(e) => e,
        }
    }

    /// The injected fault or delay for this request, if any.
    fn fault(&self) -> Option<ResponseTemplate> {
        let mut s = self.store();
        if let Some(delay) = s.delay {
            return Some(ResponseTemplate::new(200).set_delay(delay));
        }
        s.fail.pop_front().map(|(status, headers)| {
            let mut t = ResponseTemplate::new(status)
                .set_body_json(json!({"message": format!("injected {status}")}));
            for (k, v) in headers {
                t = t.insert_header(k, v.as_str());
            }
            t
        })
    }

    /// One page of `prs` as a list endpoint serves it: newest first unless `oldest_first`, each
    /// as `json` writes it, the page size from the query parameter `size.0` (default `size.1`,
    /// at most `size.2`; see [`page`]).
    fn page_of(
        &self,
        req: &Request,
        mut prs: Vec<FakePr>,
        oldest_first: bool,
        json: impl Fn(&FakePr) -> Value,
        (size_key, default, max): (&str, usize, usize),
    ) -> ResponseTemplate {
        if oldest_first {
            prs.sort_by_key(|p| p.number);
        } else {
            prs.sort_by_key(|p| std::cmp::Reverse(p.number));
        }
        let items = prs.iter().map(json).collect();
        let cap = self.store().page_cap;
        page(req, items, size_key, default, max, cap)
    }

    /// The 401 message when header `name` does not hold `expected`: `message`, or with
    /// `echo_credentials` `echoed` followed by what the header held; `None` when it does.
    fn bad_credentials(
        &self,
        req: &Request,
        (name, expected): (&str, &str),
        message: &str,
        echoed: &str,
    ) -> Option<String> {
        let got = header(req, name);
        if got == Some(expected) {
            return None;
        }
        Some(if self.store().echo_credentials {
            format!("{echoed}: {}", got.unwrap_or(""))
        } else {
            message.to_string()
        })
    }

    /// The request path below the API prefix, split and percent-decoded; `None` if the prefix
    /// is missing (then the fake answers 404 like a web server would).
    fn segments(&self, req: &Request) -> Option<Vec<String>> {
        let path = req.url.path();
        let rest = path.strip_prefix(self.prefix.as_str())?;
        let rest = rest.strip_prefix('/')?;
        Some(rest.split('/').map(percent_decode).collect())
    }

    /// The raw (still encoded) path below the prefix.
    fn raw_rest<'r>(&self, req: &'r Request) -> Option<&'r str> {
        req.url.path().strip_prefix(self.prefix.as_str())
    }
}

pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

pub fn query(req: &Request) -> BTreeMap<String, String> {
    req.url.query_pairs().into_owned().collect()
}

/// 400 when the request has a query parameter the API does not document for this endpoint.
pub fn undocumented_param(req: &Request, documented: &[&str]) -> Option<ResponseTemplate> {
    query(req)
        .keys()
        .find(|k| !documented.contains(&k.as_str()))
        .map(|k| error(400, &format!("fake: undocumented query parameter {k:?}")))
}

/// Checks a JSON payload: an object whose keys include `required` and are all in `allowed`.
// The error is the answer to send; test code, built once per request.
#[allow(clippy::result_large_err)]
pub fn payload(
    req: &Request,
    required: &[&str],
    allowed: &[&str],
) -> Result<Value, ResponseTemplate> {
    let v: Value =
        serde_json::from_slice(&req.body).map_err(|_| error(400, "Problems parsing JSON"))?;
    let Some(obj) = v.as_object() else {
        return Err(error(400, "Problems parsing JSON"));
    };
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(error(422, &format!("fake: undocumented field {k:?}")));
    }
    if let Some(k) = required.iter().find(|k| !obj.contains_key(**k)) {
        return Err(error(422, &format!("fake: missing field {k:?}")));
    }
    Ok(v)
}

pub fn error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({ "message": message }))
}

pub fn header<'r>(req: &'r Request, name: &str) -> Option<&'r str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

/// Serves one page of `items` with a `Link` header like the real APIs.
pub fn page(
    req: &Request,
    items: Vec<Value>,
    size_key: &str,
    default: usize,
    max: usize,
    cap: usize,
) -> ResponseTemplate {
    let q = query(req);
    let size = q
        .get(size_key)
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(default)
        .clamp(1, max)
        .min(cap);
    let number = q
        .get("page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let start = (number - 1) * size;
    let chunk: Vec<Value> = items.iter().skip(start).take(size).cloned().collect();
    let mut t = ResponseTemplate::new(200).set_body_json(Value::Array(chunk));
    let host = header(req, "host").unwrap_or("localhost");
    let link = |p: usize, rel: &str| {
        let mut url = req.url.clone();
        let pairs: Vec<(String, String)> = q
            .iter()
            .filter(|(k, _)| k.as_str() != "page")
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain([("page".to_string(), p.to_string())])
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
        format!(
            "<http://{host}{}?{}>; rel=\"{rel}\"",
            url.path(),
            url.query().unwrap_or("")
        )
    };
    let last = items.len().div_ceil(size).max(1);
    let mut links = vec![link(1, "first"), link(last, "last")];
    if number < last {
        links.insert(0, link(number + 1, "next"));
        t = t.insert_header("x-next-page", (number + 1).to_string().as_str());
    }
    t.insert_header("link", links.join(", ").as_str())
        .insert_header("x-total-count", items.len().to_string().as_str())
}

/// A running fake and a [`Forge`] pointed at it.
pub struct Harness {
    pub server: MockServer,
    pub fake: Fake,
    pub forge: Forge,
}

impl Harness {
    pub async fn start(
        kind: ForgeKind,
        prefix: &str,
        repository: &str,
        token: Option<&str>,
    ) -> Harness {
        let server = MockServer::start().await;
        let fake = Fake::new(prefix, fake_of(kind).first);
        let responder = (fake_of(kind).responder)(fake.clone());
        Mock::given(any())
            .respond_with(BoxedResponder(responder))
            .mount(&server)
            .await;
        let settings = ForgeSettings {
            kind,
            api_url: format!("{}{prefix}", server.uri()),
            repository: repository.to_string(),
            github_app: None,
        };
        let forge = Forge::from_settings(&settings, &client(token))
            .unwrap()
            .with_timeout(Duration::from_secs(5));
        Harness {
            server,
            fake,
            forge,
        }
    }

    /// The requests the fake received, as `METHOD /raw/path?query`.
    pub async fn requests(&self) -> Vec<Request> {
        self.server.received_requests().await.unwrap_or_default()
    }

    pub async fn request_lines(&self) -> Vec<String> {
        self.requests()
            .await
            .iter()
            .map(|r| match r.url.query() {
                Some(q) => format!("{} {}?{q}", r.method, r.url.path()),
                None => format!("{} {}", r.method, r.url.path()),
            })
            .collect()
    }
}

struct BoxedResponder(Box<dyn Respond>);

impl Respond for BoxedResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}

// ---- scenarios every provider passes -------------------------------------------------------

/// The default fake for a kind, below its prefix (GitHub at the root, as api.github.com).
pub async fn default_harness(kind: ForgeKind) -> Harness {
    let fake = fake_of(kind);
    Harness::start(kind, fake.prefix, fake.repository, Some(TOKEN)).await
}

fn created_requests(lines: &[String]) -> usize {
    lines
        .iter()
        .filter(|l| {
            let path = l.split('?').next().unwrap_or_default();
            l.starts_with("POST ")
                && ["/pulls", "/merge_requests", "/pullrequests"]
                    .iter()
                    .any(|end| path.ends_with(end))
        })
        .count()
}

/// What one documented API looks like on the wire, for the scenarios to check the requests
/// sluice sends and the answers it reads.
pub struct Wire {
    /// The number and web page of the first pull request the fake opens.
    pub first: (u64, &'static str),
    /// The requests of `ensure_open` twice on an empty fake.
    pub ensure_open_twice: &'static [&'static str],
    /// The keys of the create payload, sorted.
    pub create_keys: &'static [&'static str],
    /// The auth header and its whole value with [`TOKEN`].
    pub auth: (&'static str, &'static str),
    /// The payload of the comment "metrics look good".
    pub comment_body: &'static str,
    /// The request reading the first pull request, and the first request of
    /// `latest_for_branch(HEAD, Some(BASE))`.
    pub get_and_latest: [&'static str; 2],
    /// How the first pull request is closed: method, path and payload (empty: no body).
    pub close: (&'static str, &'static str, &'static str),
    /// Where a comment on the first pull request is posted.
    pub comment_path: &'static str,
    /// The status and part of the message of a refused duplicate create.
    pub duplicate: (u16, &'static str),
}

/// [`ensure_open_twice_opens_one`], checking the requests against `wire`; returns them.
pub async fn ensure_open_twice_on_the_wire(h: &Harness, wire: &Wire) -> Vec<Request> {
    let pr = ensure_open_twice_opens_one(h).await;
    assert_eq!((pr.number, pr.url.as_str()), wire.first);
    assert_eq!(h.request_lines().await, wire.ensure_open_twice);
    let requests = h.requests().await;
    let create = requests
        .iter()
        .find(|r| r.method.as_str() == "POST")
        .unwrap();
    let body: Value = serde_json::from_slice(&create.body).unwrap();
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(keys, wire.create_keys);
    let (name, value) = wire.auth;
    assert!(value.ends_with(TOKEN) || !value.contains(TOKEN), "{value}");
    for r in &requests {
        assert_eq!(header(r, name), Some(value));
    }
    requests
}

/// [`merged_after_merge`], checking the get and list requests against `wire`.
pub async fn merged_on_the_wire(h: &Harness, wire: &Wire) {
    merged_after_merge(h).await;
    let lines = h.request_lines().await;
    for line in wire.get_and_latest {
        assert!(lines.contains(&line.to_string()), "{line}: {lines:?}");
    }
}

/// [`comment_and_close`], checking the close and comment requests against `wire`.
pub async fn comment_and_close_on_the_wire(h: &Harness, wire: &Wire) {
    comment_and_close(h).await;
    let requests = h.requests().await;
    let (method, path, payload) = wire.close;
    let close = requests
        .iter()
        .find(|r| r.method.as_str() == method && r.url.path() == path)
        .unwrap_or_else(|| panic!("no {method} {path}"));
    let json = |r: &Request| serde_json::from_slice::<Value>(&r.body).unwrap();
    if payload.is_empty() {
        assert!(close.body.is_empty(), "{:?}", close.body);
    } else {
        assert_eq!(json(close), serde_json::from_str::<Value>(payload).unwrap());
    }
    let comment = requests
        .iter()
        .find(|r| r.url.path() == wire.comment_path)
        .unwrap();
    assert_eq!(comment.method.as_str(), "POST");
    let expected: Value = serde_json::from_str(wire.comment_body).unwrap();
    assert_eq!(json(comment), expected);
}

pub async fn ensure_open_twice_opens_one(h: &Harness) -> PullRequest {
    let first = h
        .forge
        .ensure_open(HEAD, BASE, "Approve step 3", "body one")
        .await
        .unwrap();
    let again = h
        .forge
        .ensure_open(HEAD, BASE, "Approve step 3", "body two")
        .await
        .unwrap();
    assert_eq!(first, again);
    assert_eq!(first.state, PrState::Open);
    assert_eq!((first.head.as_str(), first.base.as_str()), (HEAD, BASE));
    let prs = h.fake.prs();
    assert_eq!(prs.len(), 1, "{prs:?}");
    assert_eq!(prs[0].number, first.number);
    assert_eq!(prs[0].title, "Approve step 3");
    assert_eq!(prs[0].body, "body one");
    assert_eq!(created_requests(&h.request_lines().await), 1);
    first
}

/// `latest_for_branch(HEAD, Some(BASE))`, which must answer.
async fn newest(h: &Harness) -> Option<PullRequest> {
    h.forge.latest_for_branch(HEAD, Some(BASE)).await.unwrap()
}

pub async fn merged_after_merge(h: &Harness) {
    let pr = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    assert_eq!(h.forge.get(pr.number).await.unwrap().state, PrState::Open);
    h.fake.merge(pr.number);
    let got = h.forge.get(pr.number).await.unwrap();
    assert_eq!(got.state, PrState::Merged);
    assert_eq!(got.number, pr.number);
    assert_eq!(got.url, pr.url);
    assert_eq!(got.merged_by.as_deref(), Some(MERGER), "who merged");
    assert_eq!(h.forge.find_open(HEAD, BASE).await.unwrap(), None);
    let latest = newest(h).await.unwrap();
    assert_eq!((latest.number, latest.state), (pr.number, PrState::Merged));
}

pub async fn closed_is_closed_and_reopening_opens_a_new_one(h: &Harness) {
    assert_eq!(newest(h).await, None);
    let pr = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    h.fake.close(pr.number);
    assert_eq!(h.forge.get(pr.number).await.unwrap().state, PrState::Closed);
    let latest = newest(h).await.unwrap();
    assert_eq!((latest.number, latest.state), (pr.number, PrState::Closed));
    // A closed pull request is not reused: the next ensure_open opens a fresh one.
    let next = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    assert_ne!(next.number, pr.number);
    assert_eq!(next.state, PrState::Open);
    let latest = newest(h).await.unwrap();
    assert_eq!((latest.number, latest.state), (next.number, PrState::Open));
}

pub async fn comment_and_close(h: &Harness) {
    let pr = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    h.forge
        .comment(pr.number, "metrics look good")
        .await
        .unwrap();
    h.forge
        .close(pr.number, Some("Rollout aborted: error rate 7% > 1%"))
        .await
        .unwrap();
    assert_eq!(h.forge.get(pr.number).await.unwrap().state, PrState::Closed);
    assert_eq!(
        h.fake.comments(),
        vec![
            (pr.number, "metrics look good".to_string()),
            (pr.number, "Rollout aborted: error rate 7% > 1%".to_string()),
        ]
    );
    // Closing again is a no-op: no second comment, no error.
    h.forge.close(pr.number, Some("again")).await.unwrap();
    assert_eq!(h.fake.comments().len(), 2);
    // A merged pull request is not closed either.
    let other = h
        .forge
        .ensure_open("sluice/prod/podinfo/4", BASE, "t", "b")
        .await
        .unwrap();
    h.fake.merge(other.number);
    h.forge.close(other.number, None).await.unwrap();
    assert_eq!(
        h.forge.get(other.number).await.unwrap().state,
        PrState::Merged
    );
}

/// A wrong token: terminal 401 whose text says what to fix and never shows the token.
pub async fn unauthorized_is_terminal(kind: ForgeKind, prefix: &str, repository: &str) {
    let wrong = "wr0ng-t0ken-abcdef-987654";
    let h = Harness::start(kind, prefix, repository, Some(wrong)).await;
    h.fake.store().echo_credentials = true;
    let err = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    assert_eq!(err.status(), Some(401));
    let text = err.to_string();
    let debug = format!("{err:?}");
    assert!(
        !text.contains(wrong) && !debug.contains(wrong),
        "token leaked: {text} / {debug}"
    );
    assert!(!text.contains(TOKEN));
    assert!(
        text.starts_with(&format!("{kind} answered 401 to ")),
        "{text}"
    );
    assert!(text.contains("check SLUICE_FORGE_TOKEN"), "{text}");
    match &err {
        ForgeError::Terminal { forge, .. } => assert_eq!(*forge, kind),
        other => panic!("expected terminal, got {other:?}"),
    }
    // The forge's Debug does not show the token either.
    assert!(!format!("{:?}", h.forge).contains(wrong));

    // No token at all says so.
    let h = Harness::start(kind, prefix, repository, None).await;
    let err = h.forge.open(HEAD, BASE, "t", "b").await.unwrap_err();
    assert_eq!(err.status(), Some(401));
    assert!(
        err.to_string().contains("SLUICE_FORGE_TOKEN is not set"),
        "{err}"
    );
}

/// 5xx, 429, a timeout and a refused connection are transient; 404 is terminal with a hint.
pub async fn failures_are_classified(h: &Harness) {
    h.fake.fail_next(500, vec![]);
    let err = h.forge.find_open(HEAD, BASE).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(err.status(), Some(500));
    assert!(err.to_string().contains("will retry later"), "{err}");

    h.fake.fail_next(502, vec![]);
    assert!(h.forge.get(41).await.unwrap_err().is_transient());

    h.fake.fail_next(429, vec![("retry-after", "30".into())]);
    match h.forge.open(HEAD, BASE, "t", "b").await.unwrap_err() {
        ForgeError::Transient {
            status,
            retry_after,
            ..
        } => {
            assert_eq!(status, Some(429));
            assert_eq!(retry_after, Some(Duration::from_secs(30)));
        }
        other => panic!("expected transient, got {other:?}"),
    }

    h.fake.fail_next(404, vec![]);
    let err = h.forge.comment(12345, "x").await.unwrap_err();
    assert!(!err.is_transient());
    assert_eq!(err.status(), Some(404));
    assert!(err.to_string().contains("forge.repository"), "{err}");

    // Nothing was created by the failed attempts; the next call works.
    assert!(h.fake.prs().is_empty());
    h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();

    // A forge that does not answer in time.
    h.fake.store().delay = Some(Duration::from_secs(3));
    let slow = Forge::from_settings(
        &ForgeSettings {
            kind: h.forge.kind(),
            api_url: format!("{}{}", h.server.uri(), h.fake.prefix),
            repository: fake_of(h.forge.kind()).repository.into(),
            github_app: None,
        },
        &client(Some(TOKEN)),
    )
    .unwrap()
    .with_timeout(Duration::from_millis(200));
    let err = slow.find_open(HEAD, BASE).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(err.status(), None);
    assert!(err.to_string().contains("timed out"), "{err}");
    h.fake.store().delay = None;
}

/// Nobody listens on the port: transient, no status.
pub async fn connection_refused_is_transient(kind: ForgeKind) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let forge = Forge::from_settings(
        &ForgeSettings {
            kind,
            api_url: format!("http://127.0.0.1:{port}/api"),
            repository: "acme/config".into(),
            github_app: None,
        },
        &client(Some(TOKEN)),
    )
    .unwrap();
    let err = forge.get(1).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(err.status(), None);
    assert!(!err.to_string().contains(TOKEN));
}

/// Someone else opens the same pull request between our lookup and our create: the forge
/// refuses ours as a duplicate and ensure_open returns theirs. A plain `open` of the duplicate
/// then fails with the forge's own status and message.
pub async fn ensure_open_survives_a_create_race(h: &Harness, wire: &Wire) {
    h.fake.store().race_on_create = true;
    let pr = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    let prs = h.fake.prs();
    assert_eq!(prs.len(), 1, "{prs:?}");
    assert_eq!(pr.number, prs[0].number);
    assert_eq!(prs[0].title, "opened by someone else");
    assert_eq!(created_requests(&h.request_lines().await), 1);
    let err = h.forge.open(HEAD, BASE, "t", "b").await.unwrap_err();
    let (status, message) = wire.duplicate;
    assert_eq!(err.status(), Some(status));
    assert!(err.to_string().contains(message), "{err}");
}

/// Many open pull requests: the lookup walks the pages.
pub async fn find_open_walks_pages(h: &Harness) {
    h.fake.store().page_cap = 2;
    for i in 0..5 {
        h.fake.add(&format!("feature/{i}"), BASE, FakeState::Open);
    }
    let ours = h.fake.add(HEAD, BASE, FakeState::Open);
    for i in 5..8 {
        h.fake.add(&format!("feature/{i}"), BASE, FakeState::Open);
    }
    let found = h.forge.find_open(HEAD, BASE).await.unwrap().unwrap();
    assert_eq!(found.number, ours);
    let again = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    assert_eq!(again.number, ours);
    assert_eq!(h.fake.prs().len(), 9);
    assert_eq!(
        h.forge.find_open("sluice/none/none/1", BASE).await.unwrap(),
        None
    );
}

/// The forge's kind and the number of the approval pull request it opens.
async fn opened(h: &Harness) -> (ForgeKind, u64) {
    let pr = h.forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
    (h.forge.kind(), pr.number)
}

/// Reviews as each forge reports them: five reviewers over several pages (where the forge
/// pages), one of them given before a push and stale.
pub async fn reviews_over_pages(h: &Harness) {
    let (kind, n) = opened(h).await;
    h.fake.store().page_cap = 2;
    h.fake.review(n, "carol", ReviewState::Approved, true);
    let old = h.fake.head_of(n);
    let new = h.fake.push(n);
    for (login, state) in [
        ("alice", ReviewState::Approved),
        ("bob", ReviewState::ChangesRequested),
        ("dave", ReviewState::Commented),
        ("erin", ReviewState::Approved),
    ] {
        h.fake.review(n, login, state, false);
    }
    let got = h.forge.reviews(n).await.unwrap();
    let review = |login: &str, state, commit: Option<&str>, stale| Review {
        login: login.into(),
        state,
        commit: commit.map(str::to_string),
        stale,
    };
    use ReviewState::*;
    let (old, new) = (Some(old.as_str()), Some(new.as_str()));
    // Carol's review, Dave's comment and the commit the others name, as each forge says.
    let five = |carol: Review, dave, on: Option<&str>| {
        vec![
            carol,
            review("alice", Approved, on, false),
            review("bob", ChangesRequested, on, false),
            review("dave", dave, on, false),
            review("erin", Approved, on, false),
        ]
    };
    let expected = match kind {
        ForgeKind::GitHub => five(review("carol", Dismissed, old, true), Commented, new),
        ForgeKind::Gitea | ForgeKind::Forgejo => {
            five(review("carol", Approved, old, true), Commented, new)
        }
        // Only approvals that still count.
        ForgeKind::GitLab => vec![
            review("alice", Approved, None, false),
            review("erin", Approved, None, false),
        ],
        // A reset approval is a reviewer who has not voted.
        ForgeKind::Bitbucket => five(review("carol", Pending, None, false), Commented, None),
        // Azure DevOps has no comment vote.
        ForgeKind::AzureDevOps => five(review("carol", Pending, None, false), Pending, None),
    };
    assert_eq!(got, expected, "{kind}");
    let pages = h
        .request_lines()
        .await
        .iter()
        .filter(|l| l.contains("/reviews"))
        .count();
    if matches!(
        kind,
        ForgeKind::GitHub | ForgeKind::Gitea | ForgeKind::Forgejo
    ) {
        assert_eq!(pages, 3, "{kind}: five reviews, two a page");
    }
}

/// Merging at the head sluice read works once; at a head a push moved it is refused and
/// the pull request stays open.
pub async fn merge_only_at_the_expected_head(h: &Harness) {
    let (kind, n) = opened(h).await;
    let old = h.fake.head_of(n);
    let read = h.forge.get(n).await.unwrap().head_sha.unwrap();
    // Bitbucket names the short hash.
    assert!(old.starts_with(&read) && read.len() >= 12, "{kind}: {read}");
    let new = h.fake.push(n);
    let err = h.forge.merge(n, &old).await.unwrap_err();
    assert!(!err.is_transient(), "{kind}: {err:?}");
    // Bitbucket's merge takes no expected head and Azure DevOps documents no answer for a
    // moved one: sluice reads the head first and refuses itself, so no status.
    let status = if matches!(kind, ForgeKind::Bitbucket | ForgeKind::AzureDevOps) {
        None
    } else {
        Some(409)
    };
    assert_eq!(err.status(), status, "{kind}: {err}");
    assert!(err.to_string().contains("head moved"), "{kind}: {err}");
    assert!(!err.to_string().contains(TOKEN));
    assert_eq!(h.forge.get(n).await.unwrap().state, PrState::Open, "{kind}");
    h.forge.merge(n, &new).await.unwrap();
    let merged = h.forge.get(n).await.unwrap();
    assert_eq!(merged.state, PrState::Merged, "{kind}");
    assert_eq!(merged.merged_by.as_deref(), Some(MERGER), "{kind}");
    let again = h.forge.merge(n, &new).await.unwrap_err();
    assert!(!again.is_transient(), "{kind}: {again:?}");
}

/// Team membership: a member, a non-member (the forge's 404), an unknown team.
pub async fn membership_yes_no_and_unknown(h: &Harness) {
    let kind = h.forge.kind();
    let team = if kind == ForgeKind::AzureDevOps {
        "fleet/Release"
    } else {
        "acme/release"
    };
    let other = if kind == ForgeKind::AzureDevOps {
        "fleet/Nobody"
    } else {
        "acme/nobody"
    };
    h.fake.add_member(team, "alice");
    h.fake.add_member(team, "bob");
    h.fake.store().page_cap = 1;
    if kind == ForgeKind::Bitbucket {
        let err = h.forge.is_member(team, "alice").await.unwrap_err();
        assert!(!err.is_transient());
        assert!(err.to_string().contains("by user name"), "{err}");
        return;
    }
    assert!(h.forge.is_member(team, "alice").await.unwrap(), "{kind}");
    assert!(
        h.forge.is_member(team, "bob").await.unwrap(),
        "{kind}: on page two"
    );
    assert!(!h.forge.is_member(team, "mallory").await.unwrap(), "{kind}");
    // A team that does not exist is an error, not "no member", on every forge (GitHub and
    // GitLab answer the membership call with 404 for both: sluice asks for the team itself).
    let err = h.forge.is_member(other, "alice").await.unwrap_err();
    assert!(!err.is_transient(), "{kind}: {err:?}");
    assert!(
        h.forge.is_member("no-slash", "alice").await.is_err(),
        "{kind}"
    );
}

/// A commit whose author the forge links to an account, one it cannot, one it does not know.
pub async fn commit_author_linked_or_not(h: &Harness) {
    let kind = h.forge.kind();
    let (linked, unlinked) = (head_sha(90, 0), head_sha(91, 0));
    h.fake.set_commit_author(&linked, Some("alice"));
    h.fake.set_commit_author(&unlinked, None);
    let author = h.forge.commit_author(&linked).await.unwrap();
    assert_eq!(author.as_deref(), Some("alice"), "{kind}");
    assert_eq!(
        h.forge.commit_author(&unlinked).await.unwrap(),
        None,
        "{kind}"
    );
    let err = h.forge.commit_author(&head_sha(92, 0)).await.unwrap_err();
    assert!(!err.is_transient(), "{kind}: {err:?}");
}

// ---- the scenarios over every fake, each against its documented API -----------------------

/// One forge's fake: where it serves, what it answers with, and what its API looks like on
/// the wire. Each fake's file says its own; [`FAKES`] lists them.
pub struct FakeForge {
    pub kind: ForgeKind,
    /// The API's path below the server (`/api/v4`), for the default harness.
    pub prefix: &'static str,
    /// The repository the default harness configures.
    pub repository: &'static str,
    /// The number of the first pull request the fake opens.
    pub first: u64,
    /// The fake's responder over the shared store.
    pub responder: fn(Fake) -> Box<dyn Respond>,
    pub wire: &'static Wire,
}

/// Every forge's fake, one line each (a registry test checks every registered forge has one).
pub const FAKES: &[&FakeForge] = &[
    &github::FAKE,
    &gitlab::FAKE,
    &gitea::FAKE,
    &gitea::FORGEJO,
    &bitbucket::FAKE,
    &azure::FAKE,
];

/// The fake of `kind`.
fn fake_of(kind: ForgeKind) -> &'static FakeForge {
    FAKES
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("{kind}: no fake in FAKES (src/forge/tests/mod.rs)"))
}

/// Every registered forge has exactly one HTTP-level fake, which the scenarios above run
/// against: a forge added to the registry fails here until its fake is written.
#[test]
fn every_registered_forge_has_one_api_fake() {
    for kind in ForgeKind::ALL {
        let count = FAKES.iter().filter(|f| f.kind == *kind).count();
        assert_eq!(
            count, 1,
            "forge {kind}: expected one fake in FAKES (src/forge/tests/mod.rs), found {count}"
        );
    }
    assert_eq!(
        FAKES.len(),
        ForgeKind::ALL.len(),
        "FAKES names a forge twice"
    );
}

/// What every registered forge says about itself holds together: a unique lowercase key that
/// parses back, its default API (when it has one) takes its fake's repository, its headers
/// build with a token, and its web pages sit below the web address.
#[test]
fn every_registered_forge_says_what_it_is() {
    let mut keys = Vec::new();
    for kind in ForgeKind::ALL.iter().copied() {
        let about = kind.about();
        assert!(
            !about.key.is_empty() && about.key.chars().all(|c| c.is_ascii_lowercase()),
            "{kind}: key {:?}",
            about.key
        );
        assert!(
            !keys.contains(&about.key),
            "{kind}: key {} twice",
            about.key
        );
        keys.push(about.key);
        assert_eq!(ForgeKind::parse(about.key), Ok(kind));
        for text in [
            about.title,
            about.pr_noun,
            about.pr_sign,
            about.token_scopes,
        ] {
            assert!(!text.is_empty(), "{kind}");
        }
        // Azure DevOps has none: its settings name the collection, below which the API sits.
        assert!(
            about.api_path.is_empty() || about.api_path.starts_with('/'),
            "{kind}: {}",
            about.api_path
        );
        let fake = fake_of(kind);
        assert_eq!(kind.check_repository(fake.repository), Ok(()), "{kind}");
        assert!(kind.check_repository("").is_err(), "{kind}");
        let api_url = about.default_api_url.unwrap_or(about.api_url_sample);
        let settings = ForgeSettings {
            kind,
            api_url: api_url.into(),
            repository: fake.repository.into(),
            github_app: None,
        };
        let forge = Forge::from_settings(&settings, &client(Some(TOKEN))).unwrap();
        assert_eq!(forge.kind(), kind);
        let web = "https://forge.example";
        for page in [
            kind.commit_page(web, fake.repository, "abc123"),
            kind.pulls_page(web, fake.repository, HEAD),
        ] {
            // Azure DevOps puts `_git` between project and repository.
            let (owner, name) = fake.repository.rsplit_once('/').unwrap();
            assert!(
                page.starts_with(&format!("{web}/{owner}/")) && page.contains(&format!("/{name}/")),
                "{kind}: {page}"
            );
        }
    }
}

#[tokio::test]
async fn every_fake_ensure_open_twice_opens_one_pull_request() {
    for (kind, wire) in FAKES.iter().map(|f| (f.kind, f.wire)) {
        eprintln!("{kind}");
        ensure_open_twice_on_the_wire(&default_harness(kind).await, wire).await;
    }
}

/// GitHub's list answers have no `merged` field (`merged_at` alone decides), Gitea's have
/// `merged`, GitLab's a `merged` state.
#[tokio::test]
async fn every_fake_get_reports_merged() {
    for (kind, wire) in FAKES.iter().map(|f| (f.kind, f.wire)) {
        eprintln!("{kind}");
        merged_on_the_wire(&default_harness(kind).await, wire).await;
    }
}

#[tokio::test]
async fn every_fake_closed_without_merge_is_closed() {
    for kind in FAKES.iter().map(|f| f.kind) {
        eprintln!("{kind}");
        closed_is_closed_and_reopening_opens_a_new_one(&default_harness(kind).await).await;
    }
}

/// The newest pull request of a branch into the reconciled branch is not hidden by a newer
/// one into another base, and that one is found only when no base is asked for.
pub async fn latest_for_branch_checks_the_base(h: &Harness) {
    let into_base = h.fake.add(HEAD, BASE, FakeState::Open);
    let elsewhere = h.fake.add(HEAD, "staging", FakeState::Merged);
    let latest = newest(h).await.unwrap();
    assert_eq!(
        (latest.number, latest.state, latest.base.as_str()),
        (into_base, PrState::Open, BASE)
    );
    let any = h
        .forge
        .latest_for_branch(HEAD, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (any.number, any.state, any.base.as_str()),
        (elsewhere, PrState::Merged, "staging")
    );
    let none = h.forge.latest_for_branch(HEAD, Some("release")).await;
    assert_eq!(none.unwrap(), None);
}

#[tokio::test]
async fn every_fake_latest_for_branch_checks_the_base() {
    for kind in FAKES.iter().map(|f| f.kind) {
        eprintln!("{kind}");
        latest_for_branch_checks_the_base(&default_harness(kind).await).await;
    }
}

#[tokio::test]
async fn every_fake_comment_and_close() {
    for (kind, wire) in FAKES.iter().map(|f| (f.kind, f.wire)) {
        eprintln!("{kind}");
        comment_and_close_on_the_wire(&default_harness(kind).await, wire).await;
    }
}

/// What approval policies read, on every fake, each scenario on a fresh fake: reviews over
/// pages with stale ones marked, merge only at the expected head, team membership, commit
/// authors.
#[tokio::test]
async fn every_fake_serves_what_approval_policies_read() {
    for kind in FAKES.iter().map(|f| f.kind) {
        eprintln!("{kind}");
        reviews_over_pages(&default_harness(kind).await).await;
        merge_only_at_the_expected_head(&default_harness(kind).await).await;
        membership_yes_no_and_unknown(&default_harness(kind).await).await;
        commit_author_linked_or_not(&default_harness(kind).await).await;
    }
}

#[tokio::test]
async fn every_fake_find_open_walks_pages() {
    for kind in FAKES.iter().map(|f| f.kind) {
        eprintln!("{kind}");
        find_open_walks_pages(&default_harness(kind).await).await;
    }
}

#[tokio::test]
async fn every_fake_duplicate_create_race_reuses_the_open_pull_request() {
    for (kind, wire) in FAKES.iter().map(|f| (f.kind, f.wire)) {
        eprintln!("{kind}");
        ensure_open_survives_a_create_race(&default_harness(kind).await, wire).await;
    }
}

fn body_of<'a>(checks: &'a str, judge: Option<&'a str>) -> super::PrBody<'a> {
    super::PrBody {
        canary: "prod/podinfo",
        step: "3",
        weights_before: (90, 10),
        weights_after: (70, 30),
        checks_markdown: checks,
        judge_markdown: judge,
        dashboard_page: None,
    }
}

#[test]
fn pr_body_has_weights_checks_and_what_merging_means() {
    let body = super::pr_body(&body_of(
        "| metric | value | threshold |\n|---|---|---|\n| request-success-rate | 99.9 | >= 99 |\n",
        None,
    ));
    assert!(body.contains("step `3` of canary `prod/podinfo`"), "{body}");
    assert!(body.contains("| primary | 90% | 70% |"), "{body}");
    assert!(body.contains("| canary | 10% | 30% |"), "{body}");
    assert!(
        body.contains("| request-success-rate | 99.9 | >= 99 |"),
        "{body}"
    );
    assert!(
        body.contains("Merging this pull request approves the step"),
        "{body}"
    );
    assert!(
        body.contains("closing it without merging aborts the rollout"),
        "{body}"
    );
    assert!(
        !body.contains("judge"),
        "no judge table unless given: {body}"
    );
    let empty = super::pr_body(&body_of("  ", None));
    assert!(
        empty.contains("_No metric checks have run yet._"),
        "{empty}"
    );
    let linked = super::pr_body(&super::PrBody {
        dashboard_page: Some("https://sluice.example/canaries/prod/podinfo"),
        ..body_of("", None)
    });
    assert!(
        linked.ends_with(
            "\nThe canary on the dashboard: <https://sluice.example/canaries/prod/podinfo>\n"
        ),
        "{linked}"
    );
}

#[test]
fn pr_body_of_a_marginal_judgement_holds_its_table_before_the_checks() {
    let judge = "Summary score **50**: **marginal** (pass>=95 marginal>=40).\n\n| metric | classification |\n|---|---|\n| p99 | High |\n";
    let body = super::pr_body(&body_of("judge 50 (min 95) FAIL\n", Some(judge)));
    let heading = body
        .find("### The judge found the canary marginal: a human decides")
        .expect(&body);
    let table = body.find("| p99 | High |").expect(&body);
    let checks = body.find("### Latest metric checks").expect(&body);
    assert!(heading < table && table < checks, "{body}");
    assert!(
        body.contains("merge to go on or close to roll back"),
        "{body}"
    );
    assert!(body.contains("judge 50 (min 95) FAIL"), "{body}");
}

#[test]
fn pr_body_is_cut_to_githubs_limit_keeping_scores_and_what_merging_means() {
    let mut judge = String::from("Summary score **50**: **marginal** (pass>=95 marginal>=40).\n\n| metric | classification |\n|---|---|\n");
    for i in 0..3000 {
        judge.push_str(&format!("| metric-{i:04}-{} | High |\n", "x".repeat(20)));
    }
    let mut checks = String::new();
    for i in 0..500 {
        checks.push_str(&format!("check-{i:04}-{} 1 (min 2) FAIL\n", "y".repeat(20)));
    }
    let body = super::pr_body(&super::PrBody {
        dashboard_page: Some("https://sluice.example/canaries/prod/podinfo"),
        ..body_of(&checks, Some(&judge))
    });
    let chars = body.chars().count();
    assert!(chars <= super::MAX_BODY_CHARS, "{chars} characters");
    assert!(
        chars > super::MAX_BODY_CHARS - 200,
        "cut no more than needed: {chars}"
    );
    assert!(body.contains("Summary score **50**"), "the scores are kept");
    assert!(body.contains("| metric-0000-"), "the first rows are kept");
    assert!(!body.contains("| metric-2999-"), "the last rows are cut");
    assert!(body.contains("_Cut here: a pull request description holds at most 65,536 characters."));
    // The judge table goes first; the check list is whole while the table can give way.
    assert!(
        body.contains("check-0499-"),
        "{}",
        &body[body.len() - 500..]
    );
    assert!(body.contains("Merging this pull request approves the step"));
    assert!(body.ends_with("<https://sluice.example/canaries/prod/podinfo>\n"));
    // A check list too long on its own is cut too.
    let huge = checks.repeat(5);
    let body = super::pr_body(&body_of(&huge, Some(&judge)));
    assert!(body.chars().count() <= super::MAX_BODY_CHARS);
    assert!(body.contains("Merging this pull request approves the step"));
    // Multi-byte characters count as one each, as GitHub counts them.
    let wide = "| é |\n".repeat(20_000);
    let body = super::pr_body(&body_of("", Some(&wide)));
    let chars = body.chars().count();
    assert!(
        chars <= super::MAX_BODY_CHARS && chars > super::MAX_BODY_CHARS - 200,
        "{chars}"
    );
}

#[test]
fn token_comes_from_the_variable_or_the_file() {
    let token_from_lookup = ForgeToken::from_lookup;
    let env = |pairs: Vec<(&'static str, String)>| {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
    };
    assert_eq!(token_from_lookup(env(vec![])).unwrap(), None);
    assert_eq!(
        token_from_lookup(env(vec![("SLUICE_FORGE_TOKEN", "abc\n".into())])).unwrap(),
        Some(ForgeToken::new("abc"))
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "from-file\n").unwrap();
    assert_eq!(
        token_from_lookup(env(vec![(
            "SLUICE_FORGE_TOKEN_FILE",
            file.display().to_string()
        )]))
        .unwrap(),
        Some(ForgeToken::new("from-file"))
    );
    let both = token_from_lookup(env(vec![
        ("SLUICE_FORGE_TOKEN", "secret-value".into()),
        ("SLUICE_FORGE_TOKEN_FILE", file.display().to_string()),
    ]))
    .unwrap_err()
    .to_string();
    assert!(
        both.contains("set only one") && !both.contains("secret-value"),
        "{both}"
    );
    let empty = token_from_lookup(env(vec![("SLUICE_FORGE_TOKEN", " ".into())])).unwrap_err();
    assert!(empty.to_string().contains("empty"), "{empty}");
    let missing = token_from_lookup(env(vec![(
        "SLUICE_FORGE_TOKEN_FILE",
        "/nonexistent/t".into(),
    )]))
    .unwrap_err();
    assert!(missing.to_string().contains("/nonexistent/t"), "{missing}");
}

#[test]
fn bad_settings_are_config_errors() {
    let settings = |kind, api_url: &str, repository: &str| ForgeSettings {
        kind,
        api_url: api_url.into(),
        repository: repository.into(),
        github_app: None,
    };
    let err = Forge::from_settings(
        &settings(ForgeKind::GitHub, "ftp://x", "a/b"),
        &client(None),
    )
    .unwrap_err();
    assert!(matches!(err, ForgeError::Config { .. }), "{err:?}");
    let err = Forge::from_settings(
        &settings(ForgeKind::GitHub, "https://tok@h/api", "a/b"),
        &client(None),
    )
    .unwrap_err();
    assert!(!err.to_string().contains("tok@"), "{err}");
    let err = Forge::from_settings(
        &settings(ForgeKind::Gitea, "https://h/api/v1", "noslash"),
        &client(None),
    )
    .unwrap_err();
    assert!(err.to_string().contains("owner/name"), "{err}");
    let err = Forge::from_settings(
        &settings(ForgeKind::GitHub, "https://h", "a/b"),
        &client(Some("bad\ntoken")),
    )
    .unwrap_err();
    assert!(!err.to_string().contains("bad"), "{err}");
    let ok = Forge::from_settings(
        &settings(ForgeKind::GitLab, "https://h/api/v4/", "4711"),
        &client(Some(TOKEN)),
    )
    .unwrap();
    assert_eq!(ok.kind(), ForgeKind::GitLab);
    assert!(!format!("{ok:?}").contains(TOKEN));
}

/// The client is built once and shared: each forge still sends its own auth header (the fakes
/// answer 401 to anything else) and none leaks into another's requests.
#[tokio::test]
async fn one_shared_client_serves_every_forge_kind_with_its_own_auth() {
    let shared = client(Some(TOKEN));
    for (kind, prefix, repository) in FAKES.iter().map(|f| (f.kind, f.prefix, f.repository)) {
        let h = Harness::start(kind, prefix, repository, Some(TOKEN)).await;
        let settings = ForgeSettings {
            kind,
            api_url: format!("{}{prefix}", h.server.uri()),
            repository: repository.into(),
            github_app: None,
        };
        let forge = Forge::from_settings(&settings, &shared).unwrap();
        forge.ensure_open(HEAD, BASE, "t", "b").await.unwrap();
        let requests = h.server.received_requests().await.unwrap_or_default();
        for r in &requests {
            let auth_headers: Vec<&str> = ["authorization", "private-token"]
                .into_iter()
                .filter(|name| r.headers.contains_key(*name))
                .collect();
            assert_eq!(auth_headers.len(), 1, "{kind}: {auth_headers:?}");
        }
    }
}
