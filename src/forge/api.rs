//! The HTTP plumbing every provider shares: the one pooled client, joining URLs, sending with
//! a timeout, reading bounded bodies, following pages and turning bad answers into
//! [`ForgeError`]s that say what to fix.
//!
//! The token lives here only as a sensitive header and a scrubbing pattern; it is never logged,
//! never part of a URL and never copied into an error.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT};
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::github_app::{AppError, AppTokens};
use super::{
    ForgeError, ForgeKind, ForgeSettings, ForgeToken, Operation, PullRequest, DEFAULT_TIMEOUT,
};
use crate::clock::Clock;
use crate::http_client::{read_body, BodyError};
use crate::url_credentials::redact_url;

/// Answers larger than this are refused rather than held in memory.
const MAX_BODY: usize = 8 << 20;
/// Upper bound on pages read by one lookup (100 items a page on GitHub and GitLab, 50 on Gitea).
pub(super) const MAX_PAGES: u32 = 50;
/// Connecting may take at most this long (the whole request has the per-request timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest API message copied into an error.
const MAX_MESSAGE: usize = 300;

/// The HTTP side every forge shares, built once at start: one pooled client (a user agent,
/// timeouts, no redirects: a redirect to another host must not take a `PRIVATE-TOKEN` header
/// along) and the credential. Each [`super::Forge`] adds its own headers per request.
/// Cloning is cheap.
#[derive(Debug, Clone)]
pub struct ForgeClient {
    http: reqwest::Client,
    credential: Option<Credential>,
}

/// What authenticates requests to the forge.
#[derive(Debug, Clone)]
pub enum Credential {
    /// A fixed token (`SLUICE_FORGE_TOKEN`), the same header on every request.
    Token(ForgeToken),
    /// A GitHub App's installation token, asked for on each request at the runtime clock's
    /// `now`: the cached one, or a new one when it is about to expire.
    App {
        tokens: Arc<AppTokens>,
        clock: Arc<Clock>,
    },
}

impl ForgeClient {
    /// Builds the pooled client; `token` is the access token (see [`ForgeToken::from_lookup`]).
    /// Without a token requests go out unauthenticated and writes will be refused.
    pub fn new(token: Option<ForgeToken>) -> Result<ForgeClient, ForgeError> {
        crate::http_client::install_crypto_provider();
        let http = reqwest::Client::builder()
            .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(DEFAULT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ForgeError::Config {
                message: format!("cannot build an HTTP client: {}", describe(&e)),
            })?;
        Ok(ForgeClient {
            http,
            credential: token.map(Credential::Token),
        })
    }

    /// The same pooled client authenticating as the GitHub App whose installation `tokens`
    /// hands out, at `clock`'s time, instead of with a fixed token.
    pub fn with_app(&self, tokens: Arc<AppTokens>, clock: Arc<Clock>) -> ForgeClient {
        ForgeClient {
            http: self.http.clone(),
            credential: Some(Credential::App { tokens, clock }),
        }
    }

    /// The pooled client (no redirects), for the App's own token requests.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }
}

/// One forge API endpoint: client, base URL, auth, timeout.
#[derive(Debug)]
pub(crate) struct Api {
    pub(super) kind: ForgeKind,
    client: reqwest::Client,
    /// This forge's `Accept` and auth headers (the auth value marked sensitive).
    headers: HeaderMap,
    /// The API base without a trailing slash (`https://ghe.example.com/api/v3`).
    base: Url,
    /// The configured repository, for hints.
    repository: String,
    credential: Option<Credential>,
    timeout: Duration,
}

/// A list item with the number humans see (GitHub/Gitea `number`, GitLab `iid`), for
/// [`Api::newest`].
pub(super) trait Numbered {
    fn number(&self) -> u64;
}

/// How many pages [`Api::newest`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// Every page (up to [`MAX_PAGES`]).
    AllPages,
    /// Up to the first page with a wanted item: for lists sorted newest first.
    UntilFound,
}

/// The calls Bitbucket and Azure DevOps make alike, each over its own paths, answers and
/// query: a pull request read from one call, and one found in a list.
pub(super) trait PullsApi {
    /// A pull request as the forge answers it.
    type Pull: DeserializeOwned + Numbered;
    /// How its pull-request list pages.
    const PAGE: Paging;

    fn api(&self) -> &Api;

    /// The pull-request path followed by `tail`.
    fn pulls_url(&self, op: Operation, tail: &[&str]) -> Result<Url, ForgeError>;

    /// The pull request as sluice needs it.
    fn pr(&self, op: Operation, p: Self::Pull) -> Result<PullRequest, ForgeError>;

    /// The query every call carries (Azure DevOps: `api-version`).
    const QUERY: &'static [(&'static str, &'static str)];

    /// An answer as this forge means it, before its status is judged.
    fn meaning(&self, answer: Answer) -> Answer;

    /// `method` on the pull-request path `tail`; any status outside 2xx is an error.
    async fn send(
        &self,
        op: Operation,
        method: Method,
        tail: &[&str],
        json: Option<&Value>,
    ) -> Result<Answer, ForgeError> {
        let url = self.pulls_url(op, tail)?;
        let query: Vec<(&str, String)> = Self::QUERY
            .iter()
            .map(|(k, v)| (*k, v.to_string()))
            .collect();
        let api = self.api();
        let answer = self.meaning(api.send_raw(op, method, url, &query, json).await?);
        if answer.status.is_success() {
            Ok(answer)
        } else {
            Err(api.status_error(op, &answer))
        }
    }

    /// [`PullsApi::send`], its answer read as a pull request.
    async fn call(
        &self,
        op: Operation,
        method: Method,
        tail: &[&str],
        json: Option<&Value>,
    ) -> Result<PullRequest, ForgeError> {
        let answer = self.send(op, method, tail, json).await?;
        self.pr(op, self.api().decode(op, &answer)?)
    }

    /// `GET` of the pull request numbered `number` (its path below the pull-request path).
    async fn get_pull(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let n = number.to_string();
        self.call(Operation::Get(number), Method::GET, &[&n], None)
            .await
    }

    /// The pull request of the list `query` selects that `wanted` accepts, as `which` says.
    async fn listed(
        &self,
        op: Operation,
        query: &[(&str, String)],
        wanted: impl Fn(&Self::Pull) -> bool,
        which: Lookup,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let url = self.pulls_url(op, &[])?;
        let api = self.api();
        let found = api.lookup(op, &url, query, Self::PAGE, wanted, which);
        found.await?.map(|p| self.pr(op, p)).transpose()
    }
}

/// Which item [`Api::lookup`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lookup {
    First,
    Newest(Reading),
}

/// How a list endpoint pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Paging {
    /// GitHub, GitLab, Gitea: a JSON array; `page` = 1, 2, ... with the page size in the named
    /// parameter; another page follows when the `Link` header says `rel="next"` (or, without a
    /// `Link` header, when the page was full).
    Numbered(&'static str, u32),
    /// Bitbucket Cloud: `{"values": [...], "next": URL}` with the page size in the named
    /// parameter; the next page is the `next` link, followed only below the API base.
    NextLink(&'static str, u32),
    /// Azure DevOps: `{"value": [...], "count": n}`; `$top` items from `$skip`; another page
    /// follows any non-empty one (the server may send fewer than `$top`).
    Skip(u32),
}

impl From<(&'static str, u32)> for Paging {
    fn from((size_key, size): (&'static str, u32)) -> Paging {
        Paging::Numbered(size_key, size)
    }
}

/// A Bitbucket page.
#[derive(serde::Deserialize)]
struct Values<T> {
    values: Vec<T>,
    #[serde(default)]
    next: Option<String>,
}

/// An Azure DevOps list.
#[derive(serde::Deserialize)]
struct ValueList<T> {
    value: Vec<T>,
}

/// A 2xx answer, or any answer when the caller asked for it raw.
pub(super) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Api {
    pub(super) fn new(s: &ForgeSettings, client: &ForgeClient) -> Result<Api, ForgeError> {
        let mut base = Url::parse(&s.api_url).map_err(|e| ForgeError::Config {
            message: format!(
                "forge.apiUrl {:?} is not a URL: {e}",
                redact_url(&s.api_url)
            ),
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(ForgeError::Config {
                message: format!(
                    "forge.apiUrl must be an http:// or https:// URL, found {:?}",
                    redact_url(&s.api_url)
                ),
            });
        }
        if !base.username().is_empty() || base.password().is_some() {
            return Err(ForgeError::Config {
                message: format!(
                    "forge.apiUrl must not contain credentials; put the token in {} instead",
                    super::TOKEN_VAR
                ),
            });
        }
        base.set_query(None);
        base.set_fragment(None);
        if let Ok(mut segments) = base.path_segments_mut() {
            segments.pop_if_empty();
        }
        Ok(Api {
            kind: s.kind,
            client: client.http.clone(),
            headers: headers(s.kind, client.credential.as_ref())?,
            base,
            repository: s.repository.clone(),
            credential: client.credential.clone(),
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// True when `url` (a next-page link an answer gave) is below the API base, on its scheme,
    /// host and port: the token is sent only where the settings point.
    pub(super) fn within_base(&self, url: &Url) -> bool {
        url.scheme() == self.base.scheme()
            && url.host_str() == self.base.host_str()
            && url.port_or_known_default() == self.base.port_or_known_default()
            && url
                .path()
                .strip_prefix(self.base.path().trim_end_matches('/'))
                .is_some_and(|rest| rest.starts_with('/'))
    }

    #[cfg(test)]
    pub(super) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The base URL with `segments` appended, each percent-encoded as one path segment (so a
    /// GitLab project path `group/project` becomes `group%2Fproject`).
    pub(super) fn url(&self, op: Operation, segments: &[&str]) -> Result<Url, ForgeError> {
        let mut url = self.base.clone();
        match url.path_segments_mut() {
            Ok(mut path) => {
                path.pop_if_empty().extend(segments);
            }
            Err(()) => {
                return Err(self.terminal(
                    op,
                    None,
                    String::new(),
                    "forge.apiUrl cannot take a path; set it to the API base URL".into(),
                ))
            }
        }
        Ok(url)
    }

    /// [`Api::url`] of `prefix` followed by `tail`.
    pub(super) fn url_of(
        &self,
        op: Operation,
        prefix: &[&str],
        tail: &[&str],
    ) -> Result<Url, ForgeError> {
        let segments: Vec<&str> = prefix.iter().chain(tail).copied().collect();
        self.url(op, &segments)
    }

    /// Sends one request and returns the answer whatever its status; only transport problems
    /// (and oversized bodies) are errors here.
    pub(super) async fn send_raw(
        &self,
        op: Operation,
        method: Method,
        url: Url,
        query: &[(&str, String)],
        json: Option<&Value>,
    ) -> Result<Answer, ForgeError> {
        let mut request = self
            .client
            .request(method.clone(), url.clone())
            .headers(self.headers.clone())
            .timeout(self.timeout);
        if let Some(Credential::App { tokens, clock }) = &self.credential {
            let token = tokens
                .token(clock.now())
                .await
                .map_err(|e| self.app_error(op, e))?;
            let (name, value) = auth_header(self.kind, &token)?;
            request = request.header(name, value);
        }
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(body) = json {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.transport(op, None, &e))?;
        let status = response.status();
        tracing::debug!(
            forge = %self.kind,
            method = %method,
            path = %url.path(),
            status = status.as_u16(),
            "forge request"
        );
        let headers = response.headers().clone();
        let body = read_body(response, MAX_BODY).await.map_err(|e| match e {
            BodyError::TooLarge { .. } => self.terminal(
                op,
                Some(status.as_u16()),
                format!("answer larger than {} MiB", MAX_BODY >> 20),
                "check forge.apiUrl points at the forge's API".into(),
            ),
            BodyError::Transfer(e) => self.transport(op, Some(status.as_u16()), &e),
        })?;
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// Sends one request; any status outside 2xx becomes an error.
    pub(super) async fn send(
        &self,
        op: Operation,
        method: Method,
        url: Url,
        query: &[(&str, String)],
        json: Option<&Value>,
    ) -> Result<Answer, ForgeError> {
        let answer = self.send_raw(op, method, url, query, json).await?;
        if answer.status.is_success() {
            Ok(answer)
        } else {
            Err(self.status_error(op, &answer))
        }
    }

    /// Sends and decodes a JSON answer.
    pub(super) async fn json<T: DeserializeOwned>(
        &self,
        op: Operation,
        method: Method,
        url: Url,
        query: &[(&str, String)],
        json: Option<&Value>,
    ) -> Result<T, ForgeError> {
        let answer = self.send(op, method, url, query, json).await?;
        self.decode(op, &answer)
    }

    /// Decodes a 2xx answer; an unreadable one is terminal (usually a wrong `apiUrl` that
    /// answers with a web page).
    pub(super) fn decode<T: DeserializeOwned>(
        &self,
        op: Operation,
        answer: &Answer,
    ) -> Result<T, ForgeError> {
        serde_json::from_slice(&answer.body).map_err(|e| {
            self.terminal(
                op,
                Some(answer.status.as_u16()),
                format!("unreadable answer: {e}"),
                self.api_url_hint(),
            )
        })
    }

    /// Reads a list endpoint page by page as `paging` says and hands each page to `visit`
    /// until it breaks, the forge says there is no next page, or [`MAX_PAGES`] were read.
    pub(super) async fn pages<T: DeserializeOwned>(
        &self,
        op: Operation,
        url: &Url,
        query: &[(&str, String)],
        paging: impl Into<Paging>,
        mut visit: impl FnMut(Vec<T>) -> ControlFlow<()>,
    ) -> Result<(), ForgeError> {
        let paging = paging.into();
        let mut url = url.clone();
        let mut seen = 0;
        for page in 1..=MAX_PAGES {
            let mut q: Vec<(&str, String)> = query.to_vec();
            match paging {
                Paging::Numbered(size_key, size) => {
                    q.push((size_key, size.to_string()));
                    q.push(("page", page.to_string()));
                }
                // The next link carries the whole query.
                Paging::NextLink(_, _) if page > 1 => q.clear(),
                Paging::NextLink(size_key, size) => q.push((size_key, size.to_string())),
                Paging::Skip(top) => {
                    q.push(("$top", top.to_string()));
                    q.push(("$skip", seen.to_string()));
                }
            }
            let answer = self.send(op, Method::GET, url.clone(), &q, None).await?;
            let (items, next) = match paging {
                Paging::Numbered(_, size) => {
                    let items: Vec<T> = self.decode(op, &answer)?;
                    let more = has_next(&answer.headers, items.len(), size);
                    (items, more.then(|| url.clone()))
                }
                Paging::NextLink(_, _) => {
                    let listed: Values<T> = self.decode(op, &answer)?;
                    let next = match listed.next {
                        Some(link) if !listed.values.is_empty() => Some(self.next_link(op, &link)?),
                        _ => None,
                    };
                    (listed.values, next)
                }
                // The server may cut `$top`: the next page starts after what came.
                Paging::Skip(_) => {
                    let listed: ValueList<T> = self.decode(op, &answer)?;
                    (listed.value, Some(url.clone()))
                }
            };
            let empty = items.is_empty();
            seen += items.len();
            if visit(items).is_break() || empty {
                return Ok(());
            }
            match next {
                Some(next) => url = next,
                None => return Ok(()),
            }
        }
        tracing::warn!(
            forge = %self.kind,
            pages = MAX_PAGES,
            "Stopped reading {}s after {MAX_PAGES} pages",
            self.kind.pr_noun()
        );
        Ok(())
    }

    /// Every item of a list endpoint, oldest page first (see [`Api::pages`]).
    pub(super) async fn all<T: DeserializeOwned>(
        &self,
        op: Operation,
        url: &Url,
        query: &[(&str, String)],
        paging: impl Into<Paging>,
    ) -> Result<Vec<T>, ForgeError> {
        let mut all = Vec::new();
        self.pages(op, url, query, paging, |page: Vec<T>| {
            all.extend(page);
            ControlFlow::Continue(())
        })
        .await?;
        Ok(all)
    }

    /// `GET url`: the 2xx answer, `None` on 404 (the API's "no such member"), any other
    /// status an error.
    pub(super) async fn get_unless_404(
        &self,
        op: Operation,
        url: Url,
        query: &[(&str, String)],
    ) -> Result<Option<Answer>, ForgeError> {
        let answer = self.send_raw(op, Method::GET, url, query, None).await?;
        if answer.status == StatusCode::NOT_FOUND {
            Ok(None)
        } else if answer.status.is_success() {
            Ok(Some(answer))
        } else {
            Err(self.status_error(op, &answer))
        }
    }

    /// Merge of a pull request whose head `head` (as the forge names it: Bitbucket the short
    /// hash) is not `expected`, found by reading it first on a forge whose merge takes no
    /// expected head (Bitbucket) or documents no answer for one (Azure DevOps).
    pub(super) fn head_moved(&self, op: Operation, head: &str, expected: &str) -> ForgeError {
        self.terminal(
            op,
            None,
            format!("the head is {head:?}, not {expected:?}"),
            "the pull request's head moved since its approvals were read; read them again".into(),
        )
    }

    /// "Not a member" once `GET team` finds the team, for a forge whose membership call
    /// answers 404 both for a non-member and for a team that does not exist (or the token
    /// cannot see): a missing team is a terminal error saying `missing` and `hint`.
    pub(super) async fn no_member(
        &self,
        team: Url,
        missing: String,
        hint: &str,
    ) -> Result<bool, ForgeError> {
        let op = Operation::Membership;
        match self.get_unless_404(op, team, &[]).await? {
            Some(_) => Ok(false),
            None => Err(self.terminal(op, Some(404), missing, hint.to_string())),
        }
    }

    /// A call this forge cannot make: terminal, with `message` and what to do instead.
    pub(super) fn unsupported(&self, op: Operation, message: &str, hint: &str) -> ForgeError {
        self.terminal(op, None, message.to_string(), hint.to_string())
    }

    /// A next-page link from an answer, followed only below the API base (the token goes
    /// along); anything else is a terminal error.
    fn next_link(&self, op: Operation, link: &str) -> Result<Url, ForgeError> {
        match Url::parse(link) {
            Ok(url) if self.within_base(&url) => Ok(url),
            _ => Err(self.terminal(
                op,
                None,
                format!(
                    "next page link {:?} is not below forge.apiUrl",
                    redact_url(link)
                ),
                "sluice sends the token only to forge.apiUrl; check forge.apiUrl is the \
                 address the forge calls itself"
                    .into(),
            )),
        }
    }

    /// The first item of a list endpoint that `wanted` accepts, reading page by page (see
    /// [`Api::pages`]).
    pub(super) async fn find<T: DeserializeOwned>(
        &self,
        op: Operation,
        url: &Url,
        query: &[(&str, String)],
        size: impl Into<Paging>,
        wanted: impl Fn(&T) -> bool,
    ) -> Result<Option<T>, ForgeError> {
        let mut found = None;
        self.pages(op, url, query, size, |page: Vec<T>| {
            found = page.into_iter().find(|item| wanted(item));
            if found.is_some() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await?;
        Ok(found)
    }

    /// The item of a list endpoint with the highest [`Numbered::number`] among those `wanted`
    /// accepts, reading the pages `reading` says.
    pub(super) async fn newest<T: DeserializeOwned + Numbered>(
        &self,
        op: Operation,
        url: &Url,
        query: &[(&str, String)],
        size: impl Into<Paging>,
        wanted: impl Fn(&T) -> bool,
        reading: Reading,
    ) -> Result<Option<T>, ForgeError> {
        let mut newest: Option<T> = None;
        self.pages(op, url, query, size, |page: Vec<T>| {
            for item in page.into_iter().filter(|item| wanted(item)) {
                if newest.as_ref().is_none_or(|n| item.number() > n.number()) {
                    newest = Some(item);
                }
            }
            match reading {
                Reading::UntilFound if newest.is_some() => ControlFlow::Break(()),
                Reading::UntilFound | Reading::AllPages => ControlFlow::Continue(()),
            }
        })
        .await?;
        Ok(newest)
    }

    /// The first item, or the newest, of a list endpoint that `wanted` accepts, as `which`
    /// says ([`Api::find`], [`Api::newest`]).
    pub(super) async fn lookup<T: DeserializeOwned + Numbered>(
        &self,
        op: Operation,
        url: &Url,
        query: &[(&str, String)],
        paging: Paging,
        wanted: impl Fn(&T) -> bool,
        which: Lookup,
    ) -> Result<Option<T>, ForgeError> {
        match which {
            Lookup::First => self.find(op, url, query, paging, wanted).await,
            Lookup::Newest(reading) => {
                let newest = self.newest(op, url, query, paging, wanted, reading);
                newest.await
            }
        }
    }

    /// Classifies a non-2xx answer.
    pub(super) fn status_error(&self, op: Operation, answer: &Answer) -> ForgeError {
        let code = answer.status.as_u16();
        let message = self.api_message(&answer.body);
        let retry_after = answer
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let rate_limited = code == 429
            || (code == 403
                && (retry_after.is_some()
                    || answer
                        .headers
                        .get("x-ratelimit-remaining")
                        .is_some_and(|v| v.as_bytes() == b"0")
                    || message.to_ascii_lowercase().contains("rate limit")));
        if rate_limited || code == 408 || answer.status.is_server_error() {
            let reason = if message.is_empty() {
                answer
                    .status
                    .canonical_reason()
                    .unwrap_or("no reason given")
                    .to_string()
            } else {
                message
            };
            return ForgeError::Transient {
                forge: self.kind,
                operation: op,
                status: Some(code),
                reason,
                retry_after,
            };
        }
        let hint = self.hint(op, answer);
        self.terminal(op, Some(code), message, hint)
    }

    fn hint(&self, op: Operation, answer: &Answer) -> String {
        let scope = self.kind.about().token_scopes;
        let code = answer.status.as_u16();
        match code {
            401 if matches!(self.credential, Some(Credential::App { .. })) => {
                "check the GitHub App is installed on the repository with contents and pull \
                 requests read/write"
                    .to_string()
            }
            401 if self.credential.is_none() => format!(
                "{} is not set; give sluice a {} token with {scope}",
                super::TOKEN_VAR,
                self.kind
            ),
            401 => format!(
                "check {} (or {}) holds a valid, unexpired {} token with {scope}",
                super::TOKEN_VAR,
                super::TOKEN_FILE_VAR,
                self.kind
            ),
            403 | 404 if op == Operation::Membership => format!(
                "check the team exists and that the token may read its members \
                 (see docs/approvals.md for the permission {} needs)",
                self.kind
            ),
            403 => format!(
                "check {} has {scope} and that its user may write to {}",
                super::TOKEN_VAR,
                self.repository
            ),
            404 => {
                let what = match op {
                    Operation::Get(n)
                    | Operation::Comment(n)
                    | Operation::Close(n)
                    | Operation::Reviews(n)
                    | Operation::Merge(n) => {
                        format!("that {} {n} exists, ", self.kind.pr_noun())
                    }
                    _ => String::new(),
                };
                format!(
                    "check {what}forge.repository {:?} and {}; a token that cannot see a private \
                     repository also gets 404",
                    self.repository,
                    self.api_url_hint()
                )
            }
            400 | 405 | 409 | 422 if matches!(op, Operation::Merge(_)) => format!(
                "the {noun}'s head moved since its approvals were read, or the forge will not \
                 merge it (conflicts, required checks, branch protection); read the approvals \
                 again before merging",
                noun = self.kind.pr_noun()
            ),
            409 | 422 if op == Operation::Open => format!(
                "check the head branch was pushed, differs from the base branch, the base branch \
                 exists, and no other {} is open for the same branches",
                self.kind.pr_noun()
            ),
            409 | 422 => format!("{} refused the change", self.kind),
            300..=399 => {
                let location = answer
                    .headers
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .map(|l| format!(" to {}", redact_url(l)))
                    .unwrap_or_default();
                format!(
                    "the forge redirects{location}; update forge.apiUrl or forge.repository to \
                     the new location (sluice does not follow redirects, so the token stays with \
                     the configured host)"
                )
            }
            _ => format!(
                "unexpected answer; {} and forge.repository {:?}",
                self.api_url_hint(),
                self.repository
            ),
        }
    }

    fn api_url_hint(&self) -> String {
        let example = self.kind.about().api_url_example;
        format!(
            "check forge.apiUrl {} is the {} API base ({example})",
            self.base, self.kind
        )
    }

    pub(super) fn terminal(
        &self,
        op: Operation,
        status: Option<u16>,
        message: String,
        hint: String,
    ) -> ForgeError {
        ForgeError::Terminal {
            forge: self.kind,
            operation: op,
            status,
            message: self.scrub(&message),
            hint: self.scrub(&hint),
        }
    }

    /// A 2xx answer that does not make sense (an unknown state, a missing field).
    pub(super) fn unexpected(&self, op: Operation, status: u16, what: String) -> ForgeError {
        self.terminal(op, Some(status), what, self.api_url_hint())
    }

    fn transport(&self, op: Operation, status: Option<u16>, e: &reqwest::Error) -> ForgeError {
        if e.is_builder() {
            return self.terminal(
                op,
                None,
                self.scrub(&describe(e)),
                "sluice could not build the request; check forge.apiUrl".into(),
            );
        }
        ForgeError::Transient {
            forge: self.kind,
            operation: op,
            status,
            reason: self.scrub(&describe(e)),
            retry_after: None,
        }
    }

    /// The API's own explanation: GitHub/Gitea/Azure DevOps `message` (+ GitHub `errors[]`),
    /// GitLab `message` (string, list or field map), Bitbucket `error.message`/`error.detail` or
    /// OAuth `error`/`error_description`; otherwise the start of the body. Scrubbed, one line, bounded.
    fn api_message(&self, body: &[u8]) -> String {
        let text = match serde_json::from_slice::<Value>(body) {
            Ok(v) => json_message(&v),
            Err(_) => String::from_utf8_lossy(body).into_owned(),
        };
        one_line(&self.scrub(&text), MAX_MESSAGE)
    }

    /// A GitHub App that could not get an installation token, as a forge error of `op`.
    fn app_error(&self, op: Operation, e: AppError) -> ForgeError {
        match e {
            AppError::Transient { .. } => ForgeError::Transient {
                forge: self.kind,
                operation: op,
                status: None,
                reason: e.to_string(),
                retry_after: None,
            },
            AppError::Refused { status, .. } => ForgeError::Terminal {
                forge: self.kind,
                operation: op,
                status: Some(status),
                message: e.to_string(),
                hint: "fix forge.githubApp or the App's installation".into(),
            },
            AppError::Key(_) | AppError::Settings(_) => ForgeError::Config {
                message: e.to_string(),
            },
        }
    }

    /// Replaces the token wherever it appears (an App's tokens: every one it was handed, as
    /// [`crate::redact`] keeps them).
    fn scrub(&self, text: &str) -> String {
        match &self.credential {
            Some(Credential::App { .. }) => crate::redact::text(text),
            Some(Credential::Token(t)) if !t.expose().is_empty() => {
                let t = t.expose();
                // The token as it is and in the base64 forms of HTTP basic auth.
                let encoded = |s: &str| crate::redact::base64(s.as_bytes());
                [t.to_string(), encoded(t), encoded(&format!(":{t}"))]
                    .iter()
                    .fold(text.to_string(), |text, form| text.replace(form, "***"))
            }
            _ => text.to_string(),
        }
    }
}

/// The headers of every request to one forge: its `Accept` (and GitHub's API version), and a
/// fixed token as that forge expects it, marked sensitive so it never shows in `Debug` (an
/// App's token is added to each request as it is sent).
fn headers(kind: ForgeKind, credential: Option<&Credential>) -> Result<HeaderMap, ForgeError> {
    let about = kind.about();
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static(about.accept));
    for (name, value) in about.headers {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    if let Some(Credential::Token(token)) = credential {
        let (name, value) = auth_header(kind, token)?;
        headers.insert(name, value);
    }
    Ok(headers)
}

/// `token` in the header `kind` takes it in, marked sensitive.
fn auth_header(
    kind: ForgeKind,
    token: &ForgeToken,
) -> Result<(HeaderName, HeaderValue), ForgeError> {
    let (name, value) = kind.about().auth.header(token.expose());
    let mut value = HeaderValue::from_str(&value).map_err(|_| ForgeError::Config {
        message: format!(
            "the token in {} (or {}) contains characters not allowed in an HTTP header",
            super::TOKEN_VAR,
            super::TOKEN_FILE_VAR
        ),
    })?;
    value.set_sensitive(true);
    Ok((HeaderName::from_static(name), value))
}

/// True when another page follows: the `Link` header's `rel="next"` when the forge sends a
/// `Link` header (all three do), otherwise a full page.
fn has_next(headers: &HeaderMap, got: usize, size: u32) -> bool {
    if got == 0 {
        return false;
    }
    let links: Vec<&str> = headers
        .get_all(reqwest::header::LINK)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if links.is_empty() {
        return got >= size as usize;
    }
    links.iter().flat_map(|l| l.split(',')).any(|part| {
        part.split(';')
            .skip(1)
            .any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"))
    })
}

fn json_message(v: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    match v.get("message") {
        Some(Value::String(s)) => parts.push(s.clone()),
        Some(Value::Array(items)) => parts.extend(items.iter().map(scalar_text)),
        Some(Value::Object(fields)) => parts.extend(fields.iter().map(|(k, v)| {
            let text = match v {
                Value::Array(items) => items.iter().map(scalar_text).collect::<Vec<_>>().join(", "),
                other => scalar_text(other),
            };
            format!("{k}: {text}")
        })),
        _ => {}
    }
    if let Some(Value::Array(errors)) = v.get("errors") {
        for e in errors {
            let text = match e {
                Value::Object(o) => match o.get("message") {
                    Some(m) => scalar_text(m),
                    None => {
                        let field = |k: &str| o.get(k).map(scalar_text).unwrap_or_default();
                        format!("{} {} {}", field("resource"), field("field"), field("code"))
                            .trim()
                            .to_string()
                    }
                },
                other => scalar_text(other),
            };
            if !text.is_empty() {
                parts.push(text);
            }
        }
    }
    if parts.is_empty() {
        match v.get("error") {
            // Bitbucket: `{"type": "error", "error": {"message": ..., "detail": ...}}`.
            Some(Value::Object(e)) => parts.extend(
                ["message", "detail"]
                    .iter()
                    .filter_map(|k| e.get(*k))
                    .map(scalar_text),
            ),
            Some(e) => parts.push(scalar_text(e)),
            None => {}
        }
        if let Some(d) = v.get("error_description") {
            parts.push(scalar_text(d));
        }
    }
    parts.join("; ")
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Collapses whitespace, drops control characters and cuts at `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let mut out = String::new();
    for word in text.split_whitespace() {
        let word: String = word.chars().filter(|c| !c.is_control()).collect();
        if word.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&word);
        if out.chars().count() > max {
            let cut: String = out.chars().take(max).collect();
            return format!("{cut}...");
        }
    }
    out
}

/// A transport error as one bounded line with its causes, without the URL.
fn describe(error: &reqwest::Error) -> String {
    one_line(&crate::http_client::describe(error), MAX_MESSAGE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn api_messages_of_each_forge_are_one_line() {
        assert_eq!(
            json_message(&json!({"message": "Validation Failed", "errors": [
                {"resource": "PullRequest", "code": "custom",
                 "message": "A pull request already exists for acme:sluice/a."},
                {"resource": "PullRequest", "field": "base", "code": "invalid"}
            ]})),
            "Validation Failed; A pull request already exists for acme:sluice/a.; PullRequest \
             base invalid"
        );
        assert_eq!(
            json_message(&json!({"message": ["Another open merge request already exists"]})),
            "Another open merge request already exists"
        );
        assert_eq!(
            json_message(&json!({"message": {"source_branch": ["is invalid"]}})),
            "source_branch: is invalid"
        );
        assert_eq!(
            json_message(&json!({"error": "invalid_token", "error_description": "expired"})),
            "invalid_token; expired"
        );
        assert_eq!(one_line("a\n\n b\t\u{7}c", 10), "a b c");
        assert_eq!(one_line(&"x".repeat(20), 5), "xxxxx...");
    }

    #[test]
    fn next_page_comes_from_the_link_header_or_a_full_page() {
        let mut h = HeaderMap::new();
        assert!(has_next(&h, 100, 100));
        assert!(!has_next(&h, 99, 100));
        assert!(!has_next(&h, 0, 100));
        h.insert(
            reqwest::header::LINK,
            HeaderValue::from_static(
                "<https://x/repos/a/b/pulls?page=2>; rel=\"next\", <https://x/repos/a/b/pulls?page=9>; rel=\"last\"",
            ),
        );
        assert!(has_next(&h, 3, 100));
        h.insert(
            reqwest::header::LINK,
            HeaderValue::from_static("<https://x/repos/a/b/pulls?page=1>; rel=\"first\""),
        );
        assert!(!has_next(&h, 100, 100));
    }
}
