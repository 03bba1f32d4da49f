//! Gitea and Forgejo, REST API v1.
//!
//! Endpoints (relative to `apiUrl`, e.g. `https://gitea.example.com/api/v1`):
//! - `GET /repos/{owner}/{repo}/pulls/{base}/{head}`: the pull request for that base and head
//!   (Gitea 1.22+); any state, so a closed one may hide a newer open one
//! - `GET /repos/{owner}/{repo}/pulls?state=open&page=..&limit=..`: no branch filter, matched
//!   here; the fallback when the endpoint above is missing (older Gitea, Forgejo) or answers
//!   with a pull request that is not open
//! - `POST /repos/{owner}/{repo}/pulls` `{head, base, title, body}`
//! - `GET /repos/{owner}/{repo}/pulls/{index}`: `merged: bool`, `state` open/closed,
//!   `merged_by.login` who merged
//! - `POST /repos/{owner}/{repo}/issues/{index}/comments` `{body}`
//! - `PATCH /repos/{owner}/{repo}/pulls/{index}` `{state: "closed"}`
//! - `GET /repos/{owner}/{repo}/pulls/{index}/reviews?limit=..&page=..`: `user.login`, `state`
//!   (`APPROVED`, `REQUEST_CHANGES`, `COMMENT`, `PENDING`, `REQUEST_REVIEW`), `commit_id`,
//!   and `stale` (given on an older head) and `dismissed`
//! - `GET /orgs/{org}/teams/search?q={team}`: `{data: [{id, name}], ok}`, then
//!   `GET /teams/{id}/members/{username}`: the user, or 404 when not a member
//! - `POST /repos/{owner}/{repo}/pulls/{index}/merge` `{Do: "merge", head_commit_id}`: 409
//!   "head out of date" when the head moved, 405 when it cannot be merged
//! - `GET /repos/{owner}/{repo}/git/commits/{sha}`: `author.login`, `null` when the author's
//!   e-mail address belongs to no account
//!
//! Auth: `Authorization: token <token>`.
//!
//! Forgejo serves the same calls; it is the same provider under its own name
//! ([`GiteaLike`] with Forgejo's [`Flavor`], in `forgejo.rs`).

use std::marker::PhantomData;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::{Api, Reading};
use super::github_like::{OwnerRepo, Pull, SharedPulls};
use super::{About, Auth, ForgeError, ForgeProvider, Operation, PullRequest};

/// The answer of `GET /orgs/{org}/teams/search`.
#[derive(Debug, Deserialize)]
struct TeamSearch {
    #[serde(default)]
    data: Vec<Team>,
}

#[derive(Debug, Deserialize)]
struct Team {
    id: u64,
    name: String,
}

/// What sets one forge of Gitea's API apart: its name, API base and hints.
pub trait Flavor: std::fmt::Debug {
    const ABOUT: About;
}

/// A repository's pull requests on a forge serving Gitea's API v1 (Gitea itself, Forgejo).
#[derive(Debug)]
pub struct GiteaLike<F: Flavor> {
    pub(super) api: Api,
    repo: OwnerRepo,
    flavor: PhantomData<F>,
}

/// A Gitea repository's pull requests.
pub type Gitea = GiteaLike<GiteaApi>;

/// Gitea's [`Flavor`].
#[derive(Debug)]
pub struct GiteaApi;

impl Flavor for GiteaApi {
    const ABOUT: About = About {
        key: "gitea",
        title: "Gitea",
        pr_noun: "pull request",
        pr_sign: "#",
        default_api_url: None,
        api_url_sample: "https://gitea.example.com/api/v1",
        api_path: "/api/v1",
        public_web: None,
        api_url_example: "https://HOST/api/v1",
        token_scopes: "write:repository and write:issue scopes",
        accept: "application/json",
        headers: &[],
        auth: Auth::Header("authorization", "token "),
    };
}

impl<F: Flavor> GiteaLike<F> {
    /// The head branch lives in this repository, not in a fork.
    fn head_in_this_repo(&self, p: &Pull) -> bool {
        match p.head.repo.as_ref().and_then(|r| r.full_name.as_deref()) {
            Some(full) => {
                full.eq_ignore_ascii_case(&format!("{}/{}", self.repo.owner, self.repo.name))
            }
            None => true,
        }
    }

    fn is_open_for(&self, p: &Pull, head: &str, base: &str) -> bool {
        p.head.name == head
            && p.base.name == base
            && p.state == "open"
            && p.merged != Some(true)
            && self.head_in_this_repo(p)
    }

    /// `GET /pulls/{base}/{head}` when it answers with the open pull request; `None` when the
    /// endpoint is missing, finds nothing, or finds one that is not open (the list decides).
    /// Auth failures, 5xx and network errors are still errors.
    async fn by_base_head(&self, head: &str, base: &str) -> Result<Option<Pull>, ForgeError> {
        let op = Operation::FindOpen;
        // `{head}` is a wildcard route: the branch's slashes stay path separators.
        let head_parts: Vec<&str> = head.split('/').collect();
        let unroutable = |s: &str| s.is_empty() || s == "." || s == "..";
        if unroutable(base) || base.contains('/') || head_parts.iter().any(|s| unroutable(s)) {
            return Ok(None);
        }
        let mut tail = vec![base];
        tail.extend(head_parts);
        let url = self.repo.pulls_url(&self.api, op, &tail)?;
        let answer = self.api.send_raw(op, Method::GET, url, &[], None).await?;
        if answer.status.is_success() {
            return Ok(self
                .api
                .decode::<Pull>(op, &answer)
                .ok()
                .filter(|p| self.is_open_for(p, head, base)));
        }
        let error = self.api.status_error(op, &answer);
        if error.is_transient() || matches!(answer.status.as_u16(), 401 | 403) {
            return Err(error);
        }
        Ok(None)
    }
}

impl<F: Flavor> ForgeProvider for GiteaLike<F> {
    const ABOUT: About = F::ABOUT;

    super::github_like::shared_pulls_provider!();

    fn pulls_page(web: &str, repository: &str, branch: &str) -> String {
        format!(
            "{web}/{repository}/pulls?q={}",
            super::query_encoded(branch)
        )
    }

    fn new(api: Api, repository: &str) -> Result<GiteaLike<F>, ForgeError> {
        let repo = OwnerRepo::parse(repository)?;
        Ok(GiteaLike {
            api,
            repo,
            flavor: PhantomData,
        })
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        let op = Operation::FindOpen;
        if let Some(p) = self.by_base_head(head, base).await? {
            return self.pr(op, p).map(Some);
        }
        let query = [("state", "open".to_string())];
        let wanted = |p: &Pull| self.is_open_for(p, head, base);
        self.find_listed(op, &query, wanted).await
    }

    /// Gitea lists newest first (by creation) unless told otherwise, so the first page with a
    /// pull request of this branch (into `base`, when given: the list has no branch filter,
    /// so `base.ref` is matched here) holds the newest one.
    async fn latest_for_branch(
        &self,
        head: &str,
        base: Option<&str>,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let query = [("state", "all".to_string())];
        let wanted = |p: &Pull| {
            p.head.name == head
                && base.is_none_or(|b| p.base.name == b)
                && self.head_in_this_repo(p)
        };
        let op = Operation::LatestForBranch;
        self.newest_listed(op, &query, wanted, Reading::UntilFound)
            .await
    }

    /// `team` is `org/team-name`; the search matches names loosely, so the exact name
    /// (case-insensitively, as Gitea compares team names) is picked from its answer. A team
    /// that does not exist is an error, not "no member".
    async fn is_member(&self, team: &str, login: &str) -> Result<bool, ForgeError> {
        let (api, op) = (&self.api, Operation::Membership);
        let (org, name) = super::github_like::org_team(api, team)?;
        let url = api.url(op, &["orgs", org, "teams", "search"])?;
        let query = [("q", name.to_string())];
        let found: TeamSearch = api.json(op, Method::GET, url, &query, None).await?;
        let Some(team_id) = found
            .data
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
            .map(|t| t.id.to_string())
        else {
            return Err(api.terminal(
                op,
                Some(200),
                format!("no team {name:?} in organization {org:?}"),
                "check the team name in the approval policy".into(),
            ));
        };
        let url = api.url(op, &["teams", &team_id, "members", login])?;
        Ok(api.get_unless_404(op, url, &[]).await?.is_some())
    }

    async fn merge(&self, number: u64, head_sha: &str) -> Result<(), ForgeError> {
        let op = Operation::Merge(number);
        let url = self
            .repo
            .pulls_url(&self.api, op, &[&number.to_string(), "merge"])?;
        let payload = json!({"Do": "merge", "head_commit_id": head_sha});
        self.api
            .send(op, Method::POST, url, &[], Some(&payload))
            .await
            .map(drop)
    }
}

impl<F: Flavor> SharedPulls for GiteaLike<F> {
    fn api(&self) -> &Api {
        &self.api
    }

    fn repo(&self) -> &OwnerRepo {
        &self.repo
    }

    /// Merged when `merged` is true (Gitea sends it in list and single answers alike).
    fn merged(p: &Pull) -> bool {
        p.merged == Some(true)
    }

    /// Gitea's default `MAX_RESPONSE_ITEMS`; larger limits are cut to it anyway.
    const PAGE_SIZE: (&'static str, u32) = ("limit", 50);

    const COMMIT_PATH: &'static [&'static str] = &["git", "commits"];
}
