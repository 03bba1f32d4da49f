//! GitLab merge requests, REST API v4.
//!
//! Endpoints (relative to `apiUrl`, e.g. `https://gitlab.com/api/v4`; `:id` is the numeric
//! project id or the URL-encoded project path, `group%2Fproject`):
//! - `GET /projects/:id/merge_requests?state=opened&source_branch=..&target_branch=..`
//!   (`state=all`, and no `target_branch` for the newest merge request of a branch into any
//!   target)
//! - `POST /projects/:id/merge_requests` `{source_branch, target_branch, title, description}`
//! - `GET /projects/:id/merge_requests/:iid`: `state` is `opened`, `closed`, `locked` or
//!   `merged`; the number humans see is `iid`, the page `web_url`; who merged is
//!   `merge_user.username` (older GitLab: the deprecated `merged_by.username`)
//! - `POST /projects/:id/merge_requests/:iid/notes` `{body}`
//! - `PUT /projects/:id/merge_requests/:iid` `{state_event: "close"}`
//! - `GET /projects/:id/merge_requests/:iid/approvals`: `approved_by[].user.username` (one
//!   answer, no pages); GitLab drops approvals itself when a push resets them
//! - `GET /users?username=..` (the user's `id`), then `GET /groups/:id/members/all/:user_id`
//!   (`:id` the group's full path, encoded): the member (direct, inherited or invited), or
//!   404, which is also the answer for a group that does not exist; so "not a member" is
//!   said only once `GET /groups/:id` finds the group
//! - `PUT /projects/:id/merge_requests/:iid/merge` `{sha}`: 409 when the head is no longer
//!   `sha`, 405 or 422 when it cannot be merged
//! - `GET /projects/:id/repository/commits/:sha` (`author_email`), then
//!   `GET /users?search={email}`: the one account whose public e-mail address it is
//!
//! Auth: `PRIVATE-TOKEN: <token>` (personal, project or group access tokens).

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::{Api, Numbered, Reading};
use super::{
    About, Auth, ForgeError, ForgeProvider, NewPull, Operation, PrState, PullRequest, Review,
    ReviewState,
};

const PER_PAGE: u32 = 100;

/// A GitLab project's merge requests.
#[derive(Debug)]
pub struct GitLab {
    pub(super) api: Api,
    /// Numeric id or full path; encoded as one path segment in every URL.
    project: String,
}

#[derive(Debug, Deserialize)]
struct MergeRequest {
    iid: u64,
    web_url: String,
    state: String,
    source_branch: String,
    target_branch: String,
    #[serde(default)]
    source_project_id: Option<u64>,
    #[serde(default)]
    target_project_id: Option<u64>,
    /// Who merged (GitLab 14.7+); `merged_by` is its deprecated older spelling.
    #[serde(default)]
    merge_user: Option<User>,
    #[serde(default)]
    merged_by: Option<User>,
    /// The head commit.
    #[serde(default)]
    sha: Option<String>,
}

#[derive(Debug, Deserialize)]
struct User {
    username: String,
}

/// A user as `GET /users` lists them.
#[derive(Debug, Deserialize)]
struct Account {
    id: u64,
    username: String,
}

/// The answer of `GET .../merge_requests/:iid/approvals`.
#[derive(Debug, Deserialize)]
struct Approvals {
    #[serde(default)]
    approved_by: Vec<Approver>,
}

#[derive(Debug, Deserialize)]
struct Approver {
    user: User,
}

/// A member of a group: `active`, or `awaiting`/`blocked`.
#[derive(Debug, Deserialize)]
struct Member {
    #[serde(default)]
    state: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Commit {
    #[serde(default)]
    author_email: Option<String>,
}

impl Numbered for MergeRequest {
    fn number(&self) -> u64 {
        self.iid
    }
}

impl MergeRequest {
    /// Not from a fork: a fork's branch of the same name is someone else's.
    fn same_project(&self) -> bool {
        match (self.source_project_id, self.target_project_id) {
            (Some(s), Some(t)) => s == t,
            _ => true,
        }
    }
}

impl GitLab {
    fn pr(&self, op: Operation, mr: MergeRequest) -> Result<PullRequest, ForgeError> {
        let state = match mr.state.as_str() {
            // `locked` is the short-lived state while GitLab merges: still awaiting the merge.
            "opened" | "locked" => PrState::Open,
            "merged" => PrState::Merged,
            "closed" => PrState::Closed,
            other => {
                return Err(self.api.unexpected(
                    op,
                    200,
                    format!("unknown merge request state {other:?}"),
                ))
            }
        };
        Ok(PullRequest {
            number: mr.iid,
            url: mr.web_url,
            state,
            head: mr.source_branch,
            base: mr.target_branch,
            merged_by: mr.merge_user.or(mr.merged_by).map(|u| u.username),
            head_sha: mr.sha,
        })
    }

    /// The accounts `GET /users?{key}={value}` lists (first page: a login or an e-mail
    /// address names one account, or none).
    async fn users(
        &self,
        op: Operation,
        key: &str,
        value: &str,
    ) -> Result<Vec<Account>, ForgeError> {
        let url = self.api.url(op, &["users"])?;
        let query = [(key, value.to_string())];
        self.api.json(op, Method::GET, url, &query, None).await
    }

    /// "Not a member" once `GET /groups/:id` finds the group: the member call answers 404
    /// for a group that does not exist (or the token cannot see) as for a non-member.
    async fn no_member(&self, group: &str) -> Result<bool, ForgeError> {
        let url = self.api.url(Operation::Membership, &["groups", group])?;
        let missing = format!("no group {group:?} that the token can see");
        let hint = "name the team by the group's full path (group/subgroup) and check the \
                    token's user or group may see it";
        self.api.no_member(url, missing, hint).await
    }

    fn url(&self, op: Operation, tail: &[&str]) -> Result<reqwest::Url, ForgeError> {
        let mut segments = vec!["projects", self.project.as_str(), "merge_requests"];
        segments.extend_from_slice(tail);
        self.api.url(op, &segments)
    }
}

impl ForgeProvider for GitLab {
    const ABOUT: About = About {
        key: "gitlab",
        title: "GitLab",
        pr_noun: "merge request",
        pr_sign: "!",
        default_api_url: Some("https://gitlab.com/api/v4"),
        api_url_sample: "https://gitlab.com/api/v4",
        api_path: "/api/v4",
        public_web: None,
        api_url_example: "https://gitlab.com/api/v4 or https://HOST/api/v4",
        token_scopes: "api scope",
        accept: "application/json",
        headers: &[],
        auth: Auth::Header("private-token", ""),
    };

    /// A project path such as `group/project` (or `group/sub/project`) or a numeric id.
    fn check_repository(text: &str) -> Result<(), String> {
        if text.is_empty() {
            return Err("must not be empty".into());
        }
        let parts: Vec<&str> = text.split('/').collect();
        let numeric = text.chars().all(|c| c.is_ascii_digit());
        if numeric || (parts.len() >= 2 && parts.iter().all(|p| super::repository_segment_ok(p))) {
            Ok(())
        } else {
            Err(format!(
                "expected a project path such as group/project (or group/sub/project) or a \
                 numeric project id, found {text:?}"
            ))
        }
    }

    fn commit_page(web: &str, repository: &str, sha: &str) -> String {
        format!("{web}/{repository}/-/commit/{sha}")
    }

    fn pulls_page(web: &str, repository: &str, branch: &str) -> String {
        let branch = super::query_encoded(branch);
        format!("{web}/{repository}/-/merge_requests?source_branch={branch}")
    }

    fn new(api: Api, repository: &str) -> Result<GitLab, ForgeError> {
        let project = repository.trim_matches('/');
        if project.is_empty() || project.split('/').any(|s| s.is_empty() || s == "..") {
            return Err(ForgeError::Config {
                message: format!(
                    "forge.repository: expected a GitLab project path or id, found {repository:?}"
                ),
            });
        }
        Ok(GitLab {
            api,
            project: project.to_string(),
        })
    }

    #[cfg(test)]
    fn api_mut(&mut self) -> &mut Api {
        &mut self.api
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        let op = Operation::FindOpen;
        let url = self.url(op, &[])?;
        let query = [
            ("state", "opened".to_string()),
            ("source_branch", head.to_string()),
            ("target_branch", base.to_string()),
        ];
        let wanted = |mr: &MergeRequest| {
            mr.source_branch == head
                && mr.target_branch == base
                && matches!(mr.state.as_str(), "opened" | "locked")
                && mr.same_project()
        };
        let found = self
            .api
            .find(op, &url, &query, ("per_page", PER_PAGE), wanted)
            .await?;
        found.map(|mr| self.pr(op, mr)).transpose()
    }

    async fn open(&self, new: &NewPull<'_>) -> Result<PullRequest, ForgeError> {
        let op = Operation::Open;
        let payload = json!({
            "source_branch": new.head,
            "target_branch": new.base,
            "title": new.title,
            "description": new.body,
        });
        let url = self.url(op, &[])?;
        let mr = self.api.json(op, Method::POST, url, &[], Some(&payload));
        self.pr(op, mr.await?)
    }

    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let op = Operation::Get(number);
        let url = self.url(op, &[&number.to_string()])?;
        let mr = self.api.json(op, Method::GET, url, &[], None);
        self.pr(op, mr.await?)
    }

    async fn latest_for_branch(
        &self,
        head: &str,
        base: Option<&str>,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let op = Operation::LatestForBranch;
        let url = self.url(op, &[])?;
        let mut query = vec![
            ("state", "all".to_string()),
            ("source_branch", head.to_string()),
        ];
        if let Some(base) = base {
            query.push(("target_branch", base.to_string()));
        }
        query.push(("order_by", "created_at".to_string()));
        query.push(("sort", "desc".to_string()));
        let wanted = |mr: &MergeRequest| {
            mr.source_branch == head
                && base.is_none_or(|b| mr.target_branch == b)
                && mr.same_project()
        };
        let size = ("per_page", PER_PAGE);
        let newest = self
            .api
            .newest(op, &url, &query, size, wanted, Reading::AllPages)
            .await?;
        newest.map(|mr| self.pr(op, mr)).transpose()
    }

    async fn comment(&self, number: u64, text: &str) -> Result<(), ForgeError> {
        let op = Operation::Comment(number);
        let url = self.url(op, &[&number.to_string(), "notes"])?;
        let payload = json!({"body": text});
        self.api
            .send(op, Method::POST, url, &[], Some(&payload))
            .await?;
        Ok(())
    }

    async fn close(&self, number: u64) -> Result<(), ForgeError> {
        let op = Operation::Close(number);
        let url = self.url(op, &[&number.to_string()])?;
        let payload = json!({"state_event": "close"});
        self.api
            .send(op, Method::PUT, url, &[], Some(&payload))
            .await?;
        Ok(())
    }

    /// Who approved, as GitLab counts it now: an approval a push reset is gone from the
    /// answer, so none is stale. GitLab does not say on which commit each was given.
    async fn reviews(&self, number: u64) -> Result<Vec<Review>, ForgeError> {
        let op = Operation::Reviews(number);
        let url = self.url(op, &[&number.to_string(), "approvals"])?;
        let approvals: Approvals = self.api.json(op, Method::GET, url, &[], None).await?;
        Ok(approvals
            .approved_by
            .into_iter()
            .map(|a| Review {
                login: a.user.username,
                state: ReviewState::Approved,
                commit: None,
                stale: false,
            })
            .collect())
    }

    /// `team` is the group's full path (`acme/release-managers`); members inherited from a
    /// parent group count.
    async fn is_member(&self, team: &str, login: &str) -> Result<bool, ForgeError> {
        let op = Operation::Membership;
        let users = self.users(op, "username", login).await?;
        let Some(user) = users
            .iter()
            .find(|u| u.username.eq_ignore_ascii_case(login))
        else {
            return self.no_member(team).await;
        };
        let id = user.id.to_string();
        let url = self.api.url(op, &["groups", team, "members", "all", &id])?;
        match self.api.get_unless_404(op, url, &[]).await? {
            None => self.no_member(team).await,
            Some(answer) => {
                let member: Member = self.api.decode(op, &answer)?;
                Ok(member.state.as_deref().is_none_or(|s| s == "active"))
            }
        }
    }

    async fn merge(&self, number: u64, head_sha: &str) -> Result<(), ForgeError> {
        let op = Operation::Merge(number);
        let url = self.url(op, &[&number.to_string(), "merge"])?;
        let payload = json!({"sha": head_sha});
        self.api
            .send(op, Method::PUT, url, &[], Some(&payload))
            .await
            .map(drop)
    }

    /// GitLab links a commit to no account: the author's e-mail address is looked up among
    /// the users' public addresses, and only one account found counts.
    async fn commit_author(&self, sha: &str) -> Result<Option<String>, ForgeError> {
        let op = Operation::CommitAuthor;
        let url = self.api.url(
            op,
            &["projects", &self.project, "repository", "commits", sha],
        )?;
        let commit: Commit = self.api.json(op, Method::GET, url, &[], None).await?;
        let Some(email) = commit.author_email.filter(|e| e.contains('@')) else {
            return Ok(None);
        };
        let users = self.users(op, "search", &email).await?;
        Ok(match users.as_slice() {
            [one] => Some(one.username.clone()),
            _ => None,
        })
    }
}
