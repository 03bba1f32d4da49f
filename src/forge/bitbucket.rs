//! Bitbucket Cloud pull requests, REST API 2.0.
//!
//! Endpoints (relative to `apiUrl`, `https://api.bitbucket.org/2.0`; the repository is
//! `{workspace}/{repo_slug}`):
//! - `GET /repositories/{workspace}/{repo_slug}/pullrequests?state=..&q=..&sort=-created_on`:
//!   `state` is repeated for several (`OPEN`, `MERGED`, `DECLINED`, `SUPERSEDED`; without it
//!   only open ones are listed), `q` filters (`source.branch.name = "…"`); answers are pages
//!   `{values, next}` (`pagelen` items), the next page at the `next` link
//! - `POST /repositories/{workspace}/{repo_slug}/pullrequests`
//!   `{title, description, source: {branch: {name}}, destination: {branch: {name}}}`
//! - `GET /repositories/{workspace}/{repo_slug}/pullrequests/{id}`: `state` as above, the page
//!   at `links.html.href`, who merged (or declined) at `closed_by`
//! - `POST /repositories/{workspace}/{repo_slug}/pullrequests/{id}/comments` `{content: {raw}}`
//! - `POST /repositories/{workspace}/{repo_slug}/pullrequests/{id}/decline`: closes without
//!   merging
//! - reviews: the `participants` of `GET /repositories/{workspace}/{repo_slug}/pullrequests/{id}`
//!   (`user`, `role` `REVIEWER`/`PARTICIPANT`, `approved`, `state` `approved`,
//!   `changes_requested` or `null`); Bitbucket says nothing of the commit an approval was
//!   given on (a push drops approvals where the repository resets them)
//! - `POST /repositories/{workspace}/{repo_slug}/pullrequests/{id}/merge`
//!   `{merge_strategy: "merge_commit"}`: Bitbucket takes no expected head, so the pull request
//!   is read first and a head other than the one asked for is refused here (a push between
//!   that read and the merge is not caught)
//! - `GET /repositories/{workspace}/{repo_slug}/commit/{sha}`: `author.user`, absent when the
//!   author's e-mail address belongs to no account
//! - teams: the 2.0 API has no team membership call; a policy lists users instead
//!
//! Auth: a repository, project or workspace access token as `Authorization: Bearer <token>`;
//! a token given as `user:secret` (an Atlassian API token with the account's email, or an app
//! password with the username) goes as HTTP basic.

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::{Answer, Api, Lookup, Numbered, Paging, PullsApi, Reading};
use super::{
    About, Auth, ForgeError, ForgeProvider, NewPull, Operation, PrState, PullRequest, Review,
    ReviewState,
};

/// Bitbucket's largest `pagelen` for pull requests.
const PAGE: Paging = Paging::NextLink("pagelen", 50);

/// A Bitbucket Cloud repository's pull requests.
#[derive(Debug)]
pub struct Bitbucket {
    pub(super) api: Api,
    workspace: String,
    slug: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Pull {
    id: u64,
    state: String,
    source: Endpoint,
    destination: Endpoint,
    links: Links,
    /// Who merged or declined it; `null` while open.
    #[serde(default)]
    closed_by: Option<Account>,
    /// Single-pull answers: everyone who took part, approvals included.
    #[serde(default)]
    participants: Vec<Participant>,
}

#[derive(Debug, Deserialize)]
struct Participant {
    user: Account,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    approved: bool,
    #[serde(default)]
    state: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Endpoint {
    branch: Branch,
    #[serde(default)]
    repository: Option<Repository>,
    #[serde(default)]
    commit: Option<CommitRef>,
}

/// A commit as a pull request names it: the short (12-character) hash.
#[derive(Debug, Deserialize)]
struct CommitRef {
    hash: String,
}

/// The answer of `GET .../commit/{sha}`: `author.user` is the account, when linked.
#[derive(Debug, Deserialize)]
struct Commit {
    author: Author,
}

#[derive(Debug, Deserialize)]
struct Author {
    #[serde(default)]
    user: Option<Account>,
}

#[derive(Debug, Deserialize)]
struct Branch {
    name: String,
}

#[derive(Debug, Deserialize)]
struct Repository {
    #[serde(default)]
    full_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Links {
    html: Link,
}

#[derive(Debug, Deserialize)]
struct Link {
    href: String,
}

/// A Bitbucket account: `nickname` is the name it shows, `account_id` the Atlassian id.
#[derive(Debug, Deserialize)]
struct Account {
    #[serde(default)]
    nickname: Option<String>,
    #[serde(default)]
    account_id: Option<String>,
}

impl Account {
    /// `nickname`, else `account_id`.
    fn login(self) -> Option<String> {
        self.nickname.filter(|n| !n.is_empty()).or(self.account_id)
    }
}

impl Numbered for Pull {
    fn number(&self) -> u64 {
        self.id
    }
}

impl Bitbucket {
    /// The source branch lives in this repository, not in a fork.
    fn source_in_this_repo(&self, p: &Pull) -> bool {
        match p
            .source
            .repository
            .as_ref()
            .and_then(|r| r.full_name.as_deref())
        {
            Some(full) => full.eq_ignore_ascii_case(&format!("{}/{}", self.workspace, self.slug)),
            None => true,
        }
    }

    /// `GET` of pull request `number` as Bitbucket answers it.
    async fn pull(&self, op: Operation, number: u64) -> Result<Pull, ForgeError> {
        let answer = self
            .send(op, Method::GET, &[&number.to_string()], None)
            .await?;
        self.api.decode(op, &answer)
    }

    /// The `q` filter for pull requests from `head` (into `base`, when given). Branch names
    /// are quoted; a name holding `"` or `\` cannot be asked for and is matched here instead.
    fn filter(head: &str, base: Option<&str>) -> Option<String> {
        let quotable = |s: &str| !s.contains(['"', '\\']);
        if !quotable(head) || !base.is_none_or(quotable) {
            return None;
        }
        let mut q = format!("source.branch.name = \"{head}\"");
        if let Some(base) = base {
            q.push_str(&format!(" AND destination.branch.name = \"{base}\""));
        }
        Some(q)
    }
}

impl PullsApi for Bitbucket {
    type Pull = Pull;
    const PAGE: Paging = PAGE;

    fn api(&self) -> &Api {
        &self.api
    }

    fn pulls_url(&self, op: Operation, tail: &[&str]) -> Result<reqwest::Url, ForgeError> {
        let prefix = ["repositories", &self.workspace, &self.slug, "pullrequests"];
        self.api.url_of(op, &prefix, tail)
    }

    fn pr(&self, op: Operation, p: Pull) -> Result<PullRequest, ForgeError> {
        let state = match p.state.as_str() {
            "OPEN" => PrState::Open,
            "MERGED" => PrState::Merged,
            // Superseded: another pull request replaced it; it will not merge.
            "DECLINED" | "SUPERSEDED" => PrState::Closed,
            other => {
                return Err(self.api.unexpected(
                    op,
                    200,
                    format!("unknown pull request state {other:?}"),
                ))
            }
        };
        let merged_by = match state {
            PrState::Merged => p.closed_by.and_then(Account::login),
            PrState::Open | PrState::Closed => None,
        };
        Ok(PullRequest {
            number: p.id,
            url: p.links.html.href,
            state,
            head: p.source.branch.name,
            base: p.destination.branch.name,
            merged_by,
            head_sha: p.source.commit.map(|c| c.hash),
        })
    }

    const QUERY: &'static [(&'static str, &'static str)] = &[];

    /// Bitbucket means what it answers.
    fn meaning(&self, answer: Answer) -> Answer {
        answer
    }
}

impl ForgeProvider for Bitbucket {
    const ABOUT: About = About {
        key: "bitbucket",
        title: "Bitbucket",
        pr_noun: "pull request",
        pr_sign: "#",
        default_api_url: Some("https://api.bitbucket.org/2.0"),
        api_url_sample: "https://api.bitbucket.org/2.0",
        api_path: "/2.0",
        public_web: Some(("api.bitbucket.org", "https://bitbucket.org")),
        api_url_example: "https://api.bitbucket.org/2.0",
        token_scopes: "the pullrequest:write scope (access token) or read:pullrequest:bitbucket \
                       and write:pullrequest:bitbucket (API token)",
        accept: "application/json",
        headers: &[],
        auth: Auth::BearerOrBasic,
    };

    fn check_repository(text: &str) -> Result<(), String> {
        super::github_like::check_owner_name(text)
            .map_err(|_| format!("expected workspace/repo_slug, found {text:?}"))
    }

    fn commit_page(web: &str, repository: &str, sha: &str) -> String {
        format!("{web}/{repository}/commits/{sha}")
    }

    fn pulls_page(web: &str, repository: &str, branch: &str) -> String {
        format!("{web}/{repository}/branch/{}", super::query_encoded(branch))
    }

    fn new(api: Api, repository: &str) -> Result<Bitbucket, ForgeError> {
        let repo =
            super::github_like::OwnerRepo::parse(repository).map_err(|_| ForgeError::Config {
                message: format!(
                    "forge.repository: expected workspace/repo_slug, found {repository:?}"
                ),
            })?;
        Ok(Bitbucket {
            api,
            workspace: repo.owner,
            slug: repo.name,
        })
    }

    #[cfg(test)]
    fn api_mut(&mut self) -> &mut Api {
        &mut self.api
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        let mut query = vec![("state", "OPEN".to_string())];
        query.extend(Self::filter(head, Some(base)).map(|q| ("q", q)));
        let wanted = |p: &Pull| {
            p.source.branch.name == head
                && p.destination.branch.name == base
                && p.state == "OPEN"
                && self.source_in_this_repo(p)
        };
        self.listed(Operation::FindOpen, &query, wanted, Lookup::First)
            .await
    }

    async fn open(&self, new: &NewPull<'_>) -> Result<PullRequest, ForgeError> {
        let payload = json!({
            "title": new.title,
            "description": new.body,
            "source": {"branch": {"name": new.head}},
            "destination": {"branch": {"name": new.base}},
        });
        self.call(Operation::Open, Method::POST, &[], Some(&payload))
            .await
    }

    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        self.get_pull(number).await
    }

    /// Every state asked for, newest first; all pages are read (Bitbucket does not promise
    /// the order holds across them).
    async fn latest_for_branch(
        &self,
        head: &str,
        base: Option<&str>,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let states = ["OPEN", "MERGED", "DECLINED", "SUPERSEDED"];
        let mut query: Vec<(&str, String)> =
            states.iter().map(|s| ("state", s.to_string())).collect();
        query.extend(Self::filter(head, base).map(|q| ("q", q)));
        query.push(("sort", "-created_on".to_string()));
        let wanted = |p: &Pull| {
            p.source.branch.name == head
                && base.is_none_or(|b| p.destination.branch.name == b)
                && self.source_in_this_repo(p)
        };
        let which = Lookup::Newest(Reading::AllPages);
        self.listed(Operation::LatestForBranch, &query, wanted, which)
            .await
    }

    async fn comment(&self, number: u64, text: &str) -> Result<(), ForgeError> {
        let (op, n) = (Operation::Comment(number), number.to_string());
        let payload = json!({"content": {"raw": text}});
        let tail = [n.as_str(), "comments"];
        self.send(op, Method::POST, &tail, Some(&payload))
            .await
            .map(drop)
    }

    /// Declining is Bitbucket's closing without merging.
    async fn close(&self, number: u64) -> Result<(), ForgeError> {
        let (op, n) = (Operation::Close(number), number.to_string());
        let tail = [n.as_str(), "decline"];
        self.send(op, Method::POST, &tail, None).await.map(drop)
    }

    /// The participants who approved or asked for changes, and the reviewers who have not
    /// yet (pending); other participants commented.
    async fn reviews(&self, number: u64) -> Result<Vec<Review>, ForgeError> {
        let pull = self.pull(Operation::Reviews(number), number).await?;
        Ok(pull
            .participants
            .into_iter()
            .filter_map(|p| {
                let state = match (p.state.as_deref(), p.approved, p.role.as_deref()) {
                    (_, true, _) | (Some("approved"), _, _) => ReviewState::Approved,
                    (Some("changes_requested"), _, _) => ReviewState::ChangesRequested,
                    (_, _, Some("REVIEWER")) => ReviewState::Pending,
                    _ => ReviewState::Commented,
                };
                Some(Review {
                    login: p.user.login()?,
                    state,
                    commit: None,
                    stale: false,
                })
            })
            .collect())
    }

    async fn is_member(&self, team: &str, _login: &str) -> Result<bool, ForgeError> {
        Err(self.api.unsupported(
            Operation::Membership,
            &format!("Bitbucket Cloud's API 2.0 has no team membership call (team {team:?})"),
            "list the approvers by user name in the approval policy instead of a team",
        ))
    }

    async fn merge(&self, number: u64, head_sha: &str) -> Result<(), ForgeError> {
        let op = Operation::Merge(number);
        let pull = self.pull(op, number).await?;
        let head = pull.source.commit.map(|c| c.hash).unwrap_or_default();
        // Bitbucket gives the short hash.
        if head.is_empty() || !head_sha.starts_with(&head) {
            return Err(self.api.head_moved(op, &head, head_sha));
        }
        let n = number.to_string();
        let tail = [n.as_str(), "merge"];
        let payload = json!({"merge_strategy": "merge_commit"});
        self.send(op, Method::POST, &tail, Some(&payload))
            .await
            .map(drop)
    }

    async fn commit_author(&self, sha: &str) -> Result<Option<String>, ForgeError> {
        let op = Operation::CommitAuthor;
        let segments = ["repositories", &self.workspace, &self.slug, "commit", sha];
        let url = self.api.url(op, &segments)?;
        let commit: Commit = self.api.json(op, Method::GET, url, &[], None).await?;
        Ok(commit.author.user.and_then(Account::login))
    }
}
