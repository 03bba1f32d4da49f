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
//!
//! Auth: `PRIVATE-TOKEN: <token>` (personal, project or group access tokens).

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::{Api, Numbered, Reading};
use super::{About, Auth, ForgeError, ForgeProvider, NewPull, Operation, PrState, PullRequest};

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
}

#[derive(Debug, Deserialize)]
struct User {
    username: String,
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
        })
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
}
