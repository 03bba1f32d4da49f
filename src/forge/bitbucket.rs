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
//!
//! Auth: a repository, project or workspace access token as `Authorization: Bearer <token>`;
//! a token given as `user:secret` (an Atlassian API token with the account's email, or an app
//! password with the username) goes as HTTP basic.

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::{Answer, Api, Lookup, Numbered, Paging, PullsApi, Reading};
use super::{About, Auth, ForgeError, ForgeProvider, NewPull, Operation, PrState, PullRequest};

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
}

#[derive(Debug, Deserialize)]
struct Endpoint {
    branch: Branch,
    #[serde(default)]
    repository: Option<Repository>,
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
            PrState::Merged => p.closed_by.and_then(|a| a.nickname.or(a.account_id)),
            PrState::Open | PrState::Closed => None,
        };
        Ok(PullRequest {
            number: p.id,
            url: p.links.html.href,
            state,
            head: p.source.branch.name,
            base: p.destination.branch.name,
            merged_by,
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
}
