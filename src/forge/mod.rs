//! Pull-request providers: open, find, read, comment on and close the pull request that asks a
//! human to approve a canary step.
//!
//! A step that needs approval is committed on a branch `sluice/<namespace>/<name>/<step>`;
//! merging its pull request approves the step, closing it aborts the rollout. Each provider is
//! one module behind the [`ForgeProvider`] trait (`github.rs`, `gitlab.rs`, `gitea.rs`,
//! `forgejo.rs` (Gitea's calls under its own name), `bitbucket.rs`, `azure.rs`; the calls GitHub
//! and Gitea make alike are in `github_like.rs`, the HTTP plumbing all share in `api.rs`) and one line in `registry.rs`, which builds [`ForgeKind`] and [`Forge`] from the
//! list; the provider is chosen once from the repo settings, and nothing downstream matches on
//! a forge.
//!
//! Adding a forge: its module with a type implementing [`ForgeProvider`] (no item has a
//! default: the compiler asks for each), its HTTP-level fake in `tests/` with its line in
//! `tests/mod.rs`'s `FAKES` (a registry test fails without it), and one line in `registry.rs`.
//!
//! Errors say whether to retry ([`ForgeError::is_transient`]: network, timeouts, 5xx, 429, rate
//! limits) or to stop and tell a human what to fix (401/403/404/422 with the API's own message).
//!
//! This module must not log, print or put in an error the access token
//! (`SLUICE_FORGE_TOKEN` / `SLUICE_FORGE_TOKEN_FILE`), and must not panic on any HTTP answer.

mod api;
pub mod azure;
pub mod bitbucket;
pub mod forgejo;
pub mod gitea;
pub mod github;
pub mod github_app;
mod github_like;
pub mod gitlab;
mod registry;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use api::Api;

pub use api::ForgeClient;
pub use registry::{About, Auth, Forge, ForgeKind};

/// Where a pull request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrState {
    Open,
    Merged,
    /// Closed without merging.
    Closed,
}

/// A pull request (GitLab: merge request) as sluice needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// The number humans see: GitHub/Gitea `number`, GitLab `iid`, Bitbucket `id`, Azure
    /// DevOps `pullRequestId`.
    pub number: u64,
    /// The web page of the pull request.
    pub url: String,
    pub state: PrState,
    /// Source branch.
    pub head: String,
    /// Target branch.
    pub base: String,
    /// The forge login of who merged it, when the answer says (GitHub: `merged_by.login`, only
    /// in single-pull answers, so read it with [`Forge::get`]; GitLab: `merge_user.username`,
    /// else the deprecated `merged_by.username`; Gitea: `merged_by.login`).
    pub merged_by: Option<String>,
    /// The pull request's current head commit, when the answer says (GitHub/Gitea/Forgejo
    /// `head.sha`, GitLab `sha`, Bitbucket `source.commit.hash` (Bitbucket's 12-character
    /// short hash), Azure DevOps `lastMergeSourceCommit.commitId`).
    pub head_sha: Option<String>,
}

/// One review (GitHub/Gitea/Forgejo review, GitLab approval, Bitbucket participant approval,
/// Azure DevOps reviewer vote) as the forge reports it, oldest first: `login` is GitHub/Gitea
/// `user.login`, GitLab `username`, Bitbucket `nickname` (account_id when no nickname), Azure
/// DevOps `uniqueName`; `commit` the head it was given on when the forge says (GitHub/Gitea
/// `commit_id`); `stale` when the forge itself marks it stale or dismissed (Gitea). The
/// core's type, which the approval policy weighs as the forge answered it.
pub use crate::core::approval::{Review, ReviewState};

/// A pull request to open: from `head` into `base`, with `title` and `body` (Markdown).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewPull<'a> {
    pub head: &'a str,
    pub base: &'a str,
    pub title: &'a str,
    pub body: &'a str,
}

/// What sluice was doing when a forge call failed; part of every [`ForgeError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    FindOpen,
    Open,
    Get(u64),
    LatestForBranch,
    Comment(u64),
    Close(u64),
    Reviews(u64),
    Membership,
    Merge(u64),
    CommitAuthor,
}

impl Operation {
    /// "create pull request", "comment on merge request !4", ...
    pub fn describe(self, kind: ForgeKind) -> String {
        let noun = kind.pr_noun();
        let sign = kind.about().pr_sign;
        match self {
            Operation::FindOpen => format!("look up open {noun}s"),
            Operation::Open => format!("create {noun}"),
            Operation::Get(n) => format!("get {noun} {sign}{n}"),
            Operation::LatestForBranch => format!("list {noun}s of a branch"),
            Operation::Comment(n) => format!("comment on {noun} {sign}{n}"),
            Operation::Close(n) => format!("close {noun} {sign}{n}"),
            Operation::Reviews(n) => format!("list the reviews of {noun} {sign}{n}"),
            Operation::Membership => "look up a team membership".to_string(),
            Operation::Merge(n) => format!("merge {noun} {sign}{n}"),
            Operation::CommitAuthor => "look up the author of a commit".to_string(),
        }
    }
}

/// A failed forge call. `Transient` means "try again later"; everything else needs a human.
///
/// No variant ever holds the access token: API messages are scrubbed before they get here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForgeError {
    /// The settings or the token source cannot work; fix the configuration.
    #[error("forge settings: {message}")]
    Config { message: String },
    /// Network trouble, a timeout, 5xx, 429 or a rate limit: retry later.
    #[error("{}", transient_text(*forge, *operation, *status, reason))]
    Transient {
        forge: ForgeKind,
        operation: Operation,
        /// `None` when no HTTP answer arrived (connection refused, timeout).
        status: Option<u16>,
        /// What happened, with the API's message when it sent one.
        reason: String,
        /// From the `Retry-After` header, when the forge sent one.
        retry_after: Option<Duration>,
    },
    /// The forge refused (401/403/404/409/422, an unreadable answer, ...): report and stop.
    #[error("{}", terminal_text(*forge, *operation, *status, message, hint))]
    Terminal {
        forge: ForgeKind,
        operation: Operation,
        status: Option<u16>,
        /// The API's own message (scrubbed), or what was wrong with the answer.
        message: String,
        /// What to fix.
        hint: String,
    },
}

fn transient_text(
    forge: ForgeKind,
    operation: Operation,
    status: Option<u16>,
    reason: &str,
) -> String {
    let op = operation.describe(forge);
    match status {
        Some(code) => format!("{forge} answered {code} to {op} ({reason}); will retry later"),
        None => format!("{forge} could not be reached to {op}: {reason}; will retry later"),
    }
}

fn terminal_text(
    forge: ForgeKind,
    operation: Operation,
    status: Option<u16>,
    message: &str,
    hint: &str,
) -> String {
    let op = operation.describe(forge);
    let detail = if message.is_empty() {
        String::new()
    } else {
        format!(" ({message})")
    };
    match status {
        Some(code) => format!("{forge} answered {code} to {op}{detail}: {hint}"),
        None => format!("{forge} request to {op} failed{detail}: {hint}"),
    }
}

impl ForgeError {
    /// True when the same call may succeed later without anyone changing anything.
    pub fn is_transient(&self) -> bool {
        matches!(self, ForgeError::Transient { .. })
    }

    /// The HTTP status the forge answered with, if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            ForgeError::Config { .. } => None,
            ForgeError::Transient { status, .. } | ForgeError::Terminal { status, .. } => *status,
        }
    }

    fn config(message: impl Into<String>) -> ForgeError {
        ForgeError::Config {
            message: message.into(),
        }
    }
}

/// The environment variable holding the forge access token.
pub const TOKEN_VAR: &str = "SLUICE_FORGE_TOKEN";
/// The environment variable naming a file that holds the token (a mounted Kubernetes secret).
pub const TOKEN_FILE_VAR: &str = "SLUICE_FORGE_TOKEN_FILE";

/// The forge access token. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ForgeToken(String);

impl fmt::Debug for ForgeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ForgeToken(***)")
    }
}

impl ForgeToken {
    /// A token given directly; surrounding white space is dropped.
    pub fn new(token: impl Into<String>) -> ForgeToken {
        ForgeToken(token.into().trim().to_string())
    }

    /// The token from `SLUICE_FORGE_TOKEN` or `SLUICE_FORGE_TOKEN_FILE` (never both), looked
    /// up with `lookup` (the environment the runtime context read at start). Trailing
    /// newlines of a token file are dropped. Errors name the variable, never its value.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<ForgeToken>, ForgeError> {
        match (lookup(TOKEN_VAR), lookup(TOKEN_FILE_VAR)) {
            (Some(_), Some(_)) => Err(ForgeError::config(format!(
                "both {TOKEN_VAR} and {TOKEN_FILE_VAR} are set; set only one"
            ))),
            (Some(token), None) => ForgeToken::non_empty(
                &token,
                format!("{TOKEN_VAR} is set but empty; unset it or give it a token"),
            ),
            (None, Some(path)) => {
                let content = std::fs::read_to_string(&path).map_err(|e| {
                    ForgeError::config(format!(
                        "{TOKEN_FILE_VAR}: cannot read token file {path}: {e}"
                    ))
                })?;
                ForgeToken::non_empty(
                    &content,
                    format!("{TOKEN_FILE_VAR}: token file {path} is empty"),
                )
            }
            (None, None) => Ok(None),
        }
    }

    /// The token in `text` without surrounding white space; a configuration error saying
    /// `empty` when nothing is left.
    fn non_empty(text: &str, empty: String) -> Result<Option<ForgeToken>, ForgeError> {
        let token = text.trim();
        if token.is_empty() {
            Err(ForgeError::config(empty))
        } else {
            Ok(Some(ForgeToken::new(token)))
        }
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

/// The validated `forge` block: which forge, its API base and the repository PRs go to.
///
/// The access token is not here: it comes from `SLUICE_FORGE_TOKEN` (or
/// `SLUICE_FORGE_TOKEN_FILE`) so it never sits in the config repo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeSettings {
    pub kind: ForgeKind,
    /// API base URL, http(s), without userinfo, query or fragment
    /// (`https://api.github.com`, `https://ghe.example.com/api/v3`,
    /// `https://gitlab.com/api/v4`, `https://gitea.example.com/api/v1`).
    pub api_url: String,
    /// `owner/name` (GitHub, Gitea, Forgejo), `workspace/repo_slug` (Bitbucket),
    /// `project/repository` (Azure DevOps) or a GitLab project path (`group/sub/project`) or
    /// numeric id.
    pub repository: String,
    /// `githubApp` (kind `github` only): authenticate as this GitHub App instead of with the
    /// token.
    pub github_app: Option<github_app::GithubApp>,
}

/// One pull-request provider. Implemented by the forge's client type in its module; the
/// registry (`registry.rs`) lists each forge once and dispatches [`ForgeKind`] and [`Forge`] to
/// it. No item has a default: a forge says each.
pub(crate) trait ForgeProvider: Sized {
    /// How settings and messages name it, where its API is, how requests authenticate.
    const ABOUT: About;

    /// Checks `forge.repository` as this forge names repositories; the error says what was
    /// expected and what was found.
    fn check_repository(text: &str) -> Result<(), String>;

    /// The web page of commit `sha` of `repository`, below the forge's web address `web`.
    fn commit_page(web: &str, repository: &str, sha: &str) -> String;

    /// The web page listing the pull requests from `branch` of `repository`.
    fn pulls_page(web: &str, repository: &str, branch: &str) -> String;

    /// The provider for `repository` on `api`; a repository it cannot address is a
    /// configuration error.
    fn new(api: Api, repository: &str) -> Result<Self, ForgeError>;

    /// Its API endpoint, for tests that shorten the timeout.
    #[cfg(test)]
    fn api_mut(&mut self) -> &mut Api;

    /// The open pull request from `head` into `base`, if there is one.
    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError>;

    /// Opens a pull request.
    async fn open(&self, new: &NewPull<'_>) -> Result<PullRequest, ForgeError>;

    /// The pull request with this number.
    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError>;

    /// The newest pull request (any state) from `head`, into `base` when given.
    async fn latest_for_branch(
        &self,
        head: &str,
        base: Option<&str>,
    ) -> Result<Option<PullRequest>, ForgeError>;

    /// Adds a comment to the pull request's conversation.
    async fn comment(&self, number: u64, text: &str) -> Result<(), ForgeError>;

    /// Closes the pull request without merging.
    async fn close(&self, number: u64) -> Result<(), ForgeError>;

    /// Every review of pull request `number` (all pages), oldest first.
    async fn reviews(&self, number: u64) -> Result<Vec<Review>, ForgeError>;

    /// Whether `login` is a member of `team`, as this forge names teams.
    async fn is_member(&self, team: &str, login: &str) -> Result<bool, ForgeError>;

    /// Merges pull request `number` only if its head is still `head_sha`.
    async fn merge(&self, number: u64, head_sha: &str) -> Result<(), ForgeError>;

    /// The forge login of the author of commit `sha`, `None` when the forge cannot link it.
    async fn commit_author(&self, sha: &str) -> Result<Option<String>, ForgeError>;
}

/// One `/`-separated part of a repository name as the forges accept it: letters, digits,
/// `.`, `_` and `-`, and not `.` or `..`.
fn repository_segment_ok(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `text` percent-encoded for a web page's query string.
fn query_encoded(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Requests that take longer than this fail as transient.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl Forge {
    /// The same forge with another per-request timeout (default [`DEFAULT_TIMEOUT`]); tests
    /// shorten it so a server that never answers fails fast.
    #[cfg(test)]
    pub fn with_timeout(mut self, timeout: Duration) -> Forge {
        self.api_mut().set_timeout(timeout);
        self
    }

    /// Opens a pull request from `head` into `base`. Prefer [`Forge::ensure_open`].
    pub async fn open(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, ForgeError> {
        let new = NewPull {
            head,
            base,
            title,
            body,
        };
        self.open_new(&new).await
    }

    /// The open pull request from `head` into `base`, opened now if there is none: calling this
    /// again (after a crash, on every reconcile) never opens a second one.
    ///
    /// If another writer opened it between the lookup and the create, the forge refuses the
    /// duplicate (GitHub 422, GitLab, Gitea, Forgejo and Azure DevOps 409, Bitbucket 400) and
    /// the lookup is repeated.
    pub async fn ensure_open(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, ForgeError> {
        if let Some(pr) = self.find_open(head, base).await? {
            return Ok(pr);
        }
        match self.open(head, base, title, body).await {
            Ok(pr) => Ok(pr),
            Err(e @ ForgeError::Terminal { .. }) if matches!(e.status(), Some(400 | 409 | 422)) => {
                match self.find_open(head, base).await? {
                    Some(pr) => Ok(pr),
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Closes the pull request without merging, after posting `comment` when given.
    ///
    /// A pull request that is no longer open (closed or merged) is left alone and no comment is
    /// posted, so retrying after a failure is safe. A retry after the comment was posted but the
    /// close failed posts the comment again.
    pub async fn close(&self, number: u64, comment: Option<&str>) -> Result<(), ForgeError> {
        if self.get(number).await?.state != PrState::Open {
            return Ok(());
        }
        if let Some(text) = comment {
            self.comment(number, text).await?;
        }
        self.close_open(number).await
    }
}

/// GitHub refuses a pull request body longer than this many characters (GitLab and Gitea take
/// more); [`pr_body`] never writes a longer one.
pub const MAX_BODY_CHARS: usize = 65_536;

/// What an approval pull request's description says. Weights are `(primary, canary)`
/// percentages; `checks_markdown` is the latest metric table, `judge_markdown` the table of
/// the marginal judgement the step waits on (when a marginal judgement made the wait), both
/// already in Markdown.
#[derive(Debug, Clone, Copy)]
pub struct PrBody<'a> {
    pub canary: &'a str,
    pub step: &'a str,
    pub weights_before: (u8, u8),
    pub weights_after: (u8, u8),
    pub checks_markdown: &'a str,
    pub judge_markdown: Option<&'a str>,
    pub dashboard_page: Option<&'a str>,
}

/// The description of an approval pull request: what merging changes, the judge's table when
/// the judge found the canary marginal, the latest metric checks, and what merging and closing
/// mean. At most [`MAX_BODY_CHARS`] characters: a longer judge table (then check list) is cut
/// at a line, with a note saying where the rest is.
pub fn pr_body(b: &PrBody<'_>) -> String {
    let checks = b.checks_markdown.trim();
    let checks = if checks.is_empty() {
        "_No metric checks have run yet._"
    } else {
        checks
    };
    let judge = b.judge_markdown.map(str::trim).unwrap_or_default();
    let body = assemble(b, judge, checks);
    let over = body.chars().count().saturating_sub(MAX_BODY_CHARS);
    if over == 0 {
        return body;
    }
    let judge_len = judge.chars().count();
    let judge = cut(judge, judge_len.saturating_sub(over + CUT_NOTE.len()));
    let body = assemble(b, &judge, checks);
    let over = body.chars().count().saturating_sub(MAX_BODY_CHARS);
    if over == 0 {
        return body;
    }
    let checks_len = checks.chars().count();
    let checks = cut(checks, checks_len.saturating_sub(over + CUT_NOTE.len()));
    assemble(b, &judge, &checks)
}

/// What [`cut`] puts where it cut.
const CUT_NOTE: &str = "\n_Cut here: a pull request description holds at most 65,536 characters. \
The full judgement is in the `Sluice-Judge-Metric` trailers of the commit that made the wait._";

/// The whole lines of `text` that fit in `keep` characters, then [`CUT_NOTE`]; `text` as it is
/// when empty.
fn cut(text: &str, keep: usize) -> String {
    if text.is_empty() {
        return String::new();
    }
    cut_with(text, keep, CUT_NOTE)
}

/// The whole lines of `text` that fit in `keep` characters, then `note`.
fn cut_with(text: &str, keep: usize, note: &str) -> String {
    let mut out = String::new();
    let mut kept = 0;
    for line in text.lines() {
        let len = line.chars().count() + 1;
        if kept + len > keep {
            break;
        }
        out.push_str(line);
        out.push('\n');
        kept += len;
    }
    out.push_str(note);
    out
}

fn assemble(b: &PrBody<'_>, judge: &str, checks: &str) -> String {
    let code = |s: &str| format!("`{}`", s.replace('`', "'"));
    let judge = if judge.is_empty() {
        String::new()
    } else {
        format!(
            "### The judge found the canary marginal: a human decides\n\
             \n\
             The statistical judge compared the canary with its primary and scored it between \
             its marginal and pass thresholds: it cannot tell whether the canary is worse. \
             Look at the table, then merge to go on or close to roll back.\n\
             \n\
             {judge}\n\
             \n"
        )
    };
    let dashboard = b
        .dashboard_page
        .map(|page| format!("\nThe canary on the dashboard: <{page}>\n"))
        .unwrap_or_default();
    format!(
        "sluice is waiting for approval of step {step} of canary {canary}.\n\
         \n\
         ### Route weights\n\
         \n\
         | backend | before | after |\n\
         |---|---:|---:|\n\
         | primary | {pb}% | {pa}% |\n\
         | canary | {cb}% | {ca}% |\n\
         \n\
         {judge}\
         ### Latest metric checks\n\
         \n\
         {checks}\n\
         \n\
         **Merging this pull request approves the step; closing it without merging aborts the \
         rollout.**\n\
         {dashboard}",
        step = code(b.step),
        canary = code(b.canary),
        pb = b.weights_before.0,
        pa = b.weights_after.0,
        cb = b.weights_before.1,
        ca = b.weights_after.1,
    )
}

impl fmt::Display for PrState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PrState::Open => "open",
            PrState::Merged => "merged",
            PrState::Closed => "closed",
        })
    }
}
