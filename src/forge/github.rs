//! GitHub and GitHub Enterprise Server, REST API v3 (`X-GitHub-Api-Version: 2022-11-28`).
//!
//! Endpoints (relative to `apiUrl`: `https://api.github.com`, or `https://HOST/api/v3`):
//! - `GET /repos/{owner}/{repo}/pulls?state=open&head={owner}:{branch}&base={base}` (`state=all`
//!   and `base` left out for the newest pull request of a branch into any base)
//! - `POST /repos/{owner}/{repo}/pulls` `{title, head, base, body}`
//! - `GET /repos/{owner}/{repo}/pulls/{n}`: merged when `merged_at` is set (or `merged: true`);
//!   `merged_by.login` says who merged (list answers do not carry `merged_by`)
//! - `POST /repos/{owner}/{repo}/issues/{n}/comments` `{body}` (pull requests are issues)
//! - `PATCH /repos/{owner}/{repo}/pulls/{n}` `{state: "closed"}`
//! - `GET /repos/{owner}/{repo}/pulls/{n}/reviews?per_page=100&page=..`: `user.login`,
//!   `state` (`APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED`, `PENDING`),
//!   `commit_id`, oldest first
//! - `GET /orgs/{org}/teams/{team_slug}/memberships/{username}`: `state` `active` (a member)
//!   or `pending` (invited); 404 when not a member, and also when the team does not exist
//!   or the token cannot see it, so a 404 is followed by
//!   `GET /orgs/{org}/teams/{team_slug}`: the team, or 404 (an error, not "no member")
//! - `PUT /repos/{owner}/{repo}/pulls/{n}/merge` `{sha, merge_method: "merge"}`: 409 when the
//!   head is no longer `sha`, 405 when the pull request cannot be merged
//! - `GET /repos/{owner}/{repo}/commits/{sha}`: `author.login`, `null` when the author's
//!   e-mail address belongs to no account
//!
//! Auth: `Authorization: Bearer <token>`.

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::{Api, Reading};
use super::github_like::{OwnerRepo, Pull, SharedPulls};
use super::{About, Auth, ForgeError, ForgeProvider, Operation, PullRequest};

/// A team membership: `active`, or `pending` while the invitation is not accepted.
#[derive(Debug, Deserialize)]
struct Membership {
    state: String,
}

/// A GitHub repository's pull requests.
#[derive(Debug)]
pub struct GitHub {
    pub(super) api: Api,
    repo: OwnerRepo,
}

impl GitHub {
    /// The list query for pull requests whose head is `head` in this repository.
    fn head_query(&self, state: &str, head: &str) -> Vec<(&'static str, String)> {
        vec![
            ("state", state.to_string()),
            ("head", format!("{}:{head}", self.repo.owner)),
        ]
    }
}

impl ForgeProvider for GitHub {
    const ABOUT: About = About {
        key: "github",
        title: "GitHub",
        pr_noun: "pull request",
        pr_sign: "#",
        default_api_url: Some("https://api.github.com"),
        api_url_sample: "https://api.github.com",
        api_path: "/api/v3",
        public_web: Some(("api.github.com", "https://github.com")),
        api_url_example: "https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise",
        token_scopes:
            "repo scope (classic token) or Pull requests: read and write (fine-grained token)",
        accept: "application/vnd.github+json",
        headers: &[("x-github-api-version", "2022-11-28")],
        auth: Auth::Header("authorization", "Bearer "),
    };

    super::github_like::shared_pulls_provider!();

    fn pulls_page(web: &str, repository: &str, branch: &str) -> String {
        let q = super::query_encoded(&format!("is:pr head:{branch}"));
        format!("{web}/{repository}/pulls?q={q}")
    }

    fn new(api: Api, repository: &str) -> Result<GitHub, ForgeError> {
        let repo = OwnerRepo::parse(repository)?;
        Ok(GitHub { api, repo })
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        let mut query = self.head_query("open", head);
        query.push(("base", base.to_string()));
        let wanted = |p: &Pull| {
            p.head.name == head && p.base.name == base && p.state == "open" && p.merged_at.is_none()
        };
        self.find_listed(Operation::FindOpen, &query, wanted).await
    }

    async fn latest_for_branch(
        &self,
        head: &str,
        base: Option<&str>,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let mut query = self.head_query("all", head);
        if let Some(base) = base {
            query.push(("base", base.to_string()));
        }
        query.push(("sort", "created".to_string()));
        query.push(("direction", "desc".to_string()));
        let wanted = |p: &Pull| p.head.name == head && base.is_none_or(|b| p.base.name == b);
        let op = Operation::LatestForBranch;
        self.newest_listed(op, &query, wanted, Reading::AllPages)
            .await
    }

    /// `team` is `org/team-slug`; an invitation not yet accepted is not a membership.
    async fn is_member(&self, team: &str, login: &str) -> Result<bool, ForgeError> {
        let op = Operation::Membership;
        let (org, slug) = super::github_like::org_team(&self.api, team)?;
        let segments = ["orgs", org, "teams", slug, "memberships", login];
        let url = self.api.url(op, &segments)?;
        match self.api.get_unless_404(op, url, &[]).await? {
            // GitHub answers 404 for a team that does not exist (or the token cannot see)
            // as for a non-member: the team itself says which.
            None => {
                let url = self.api.url(op, &["orgs", org, "teams", slug])?;
                let missing =
                    format!("no team {slug:?} in organization {org:?} that the token can see");
                let hint = "check the team slug in the approval policy and that the token may \
                            read the organization's teams (Members: Read; classic: read:org)";
                self.api.no_member(url, missing, hint).await
            }
            Some(answer) => {
                let m: Membership = self.api.decode(op, &answer)?;
                Ok(m.state == "active")
            }
        }
    }

    async fn merge(&self, number: u64, head_sha: &str) -> Result<(), ForgeError> {
        let op = Operation::Merge(number);
        let url = self
            .repo
            .pulls_url(&self.api, op, &[&number.to_string(), "merge"])?;
        let payload = json!({"sha": head_sha, "merge_method": "merge"});
        self.api
            .send(op, Method::PUT, url, &[], Some(&payload))
            .await
            .map(drop)
    }
}

impl SharedPulls for GitHub {
    fn api(&self) -> &Api {
        &self.api
    }

    fn repo(&self) -> &OwnerRepo {
        &self.repo
    }

    /// Merged when `merged_at` is set (list answers carry nothing else) or `merged` is true.
    fn merged(p: &Pull) -> bool {
        p.merged_at.is_some() || p.merged == Some(true)
    }

    const PAGE_SIZE: (&'static str, u32) = ("per_page", 100);

    const COMMIT_PATH: &'static [&'static str] = &["commits"];
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::github_like::Ref;
    use super::super::PrState;

    #[test]
    fn merged_at_or_merged_means_merged() {
        let pull = |state: &str, merged_at: Option<&str>, merged: Option<bool>| Pull {
            number: 1,
            html_url: "u".into(),
            state: state.into(),
            merged_at: merged_at.map(str::to_string),
            merged,
            merged_by: None,
            head: Ref {
                name: "h".into(),
                sha: None,
                repo: None,
            },
            base: Ref {
                name: "b".into(),
                sha: None,
                repo: None,
            },
        };
        let gh = GitHub::new(
            Api::new(
                &super::super::ForgeSettings {
                    kind: super::super::ForgeKind::GitHub,
                    api_url: "https://api.github.com".into(),
                    repository: "a/b".into(),
                    github_app: None,
                },
                &super::super::ForgeClient::new(None).unwrap(),
            )
            .unwrap(),
            "a/b",
        )
        .unwrap();
        let op = Operation::Get(1);
        let state = |p| gh.pr(op, p).unwrap().state;
        assert_eq!(state(pull("open", None, None)), PrState::Open);
        assert_eq!(state(pull("closed", None, Some(false))), PrState::Closed);
        assert_eq!(
            state(pull("closed", Some("2024-01-01T00:00:00Z"), None)),
            PrState::Merged
        );
        assert_eq!(state(pull("closed", None, Some(true))), PrState::Merged);
        assert!(gh.pr(op, pull("draft", None, None)).is_err());
    }
}
