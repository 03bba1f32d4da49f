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
//!
//! Auth: `Authorization: token <token>`.

use std::ops::ControlFlow;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::Api;
use super::github::split_owner_name;
use super::{ForgeError, Operation, PrState, PullRequest};

/// Gitea's default `MAX_RESPONSE_ITEMS`; larger limits are cut to it anyway.
const LIMIT: u32 = 50;

/// A Gitea (or Forgejo) repository's pull requests.
#[derive(Debug)]
pub struct Gitea {
    pub(super) api: Api,
    owner: String,
    name: String,
}

#[derive(Debug, Deserialize)]
struct Pull {
    number: u64,
    html_url: String,
    state: String,
    #[serde(default)]
    merged: bool,
    /// Who merged; `null` until merged (list and single answers alike).
    #[serde(default)]
    merged_by: Option<User>,
    head: Ref,
    base: Ref,
}

#[derive(Debug, Deserialize)]
struct User {
    login: String,
}

#[derive(Debug, Deserialize)]
struct Ref {
    #[serde(rename = "ref")]
    name: String,
    #[serde(default)]
    repo: Option<Repo>,
}

#[derive(Debug, Deserialize)]
struct Repo {
    #[serde(default)]
    full_name: Option<String>,
}

impl Gitea {
    pub(super) fn new(api: Api, repository: &str) -> Result<Gitea, ForgeError> {
        let (owner, name) = split_owner_name(repository)?;
        Ok(Gitea { api, owner, name })
    }

    fn pr(&self, op: Operation, p: Pull) -> Result<PullRequest, ForgeError> {
        let state = match (p.state.as_str(), p.merged) {
            (_, true) => PrState::Merged,
            ("open", false) => PrState::Open,
            ("closed", false) => PrState::Closed,
            (other, false) => {
                return Err(self.api.unexpected(
                    op,
                    200,
                    format!("unknown pull request state {other:?}"),
                ))
            }
        };
        Ok(PullRequest {
            number: p.number,
            url: p.html_url,
            state,
            head: p.head.name,
            base: p.base.name,
            merged_by: p.merged_by.map(|u| u.login),
        })
    }

    /// The head branch lives in this repository, not in a fork.
    fn head_in_this_repo(&self, p: &Pull) -> bool {
        match p.head.repo.as_ref().and_then(|r| r.full_name.as_deref()) {
            Some(full) => full.eq_ignore_ascii_case(&format!("{}/{}", self.owner, self.name)),
            None => true,
        }
    }

    fn is_open_for(&self, p: &Pull, head: &str, base: &str) -> bool {
        p.head.name == head
            && p.base.name == base
            && p.state == "open"
            && !p.merged
            && self.head_in_this_repo(p)
    }

    fn pulls_url(&self, op: Operation, tail: &[&str]) -> Result<reqwest::Url, ForgeError> {
        let mut segments = vec!["repos", self.owner.as_str(), self.name.as_str(), "pulls"];
        segments.extend_from_slice(tail);
        self.api.url(op, &segments)
    }

    pub(super) async fn find_open(
        &self,
        head: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let op = Operation::FindOpen;
        if let Some(p) = self.by_base_head(head, base).await? {
            return self.pr(op, p).map(Some);
        }
        let url = self.pulls_url(op, &[])?;
        let query = [("state", "open".to_string())];
        let mut found = None;
        self.api
            .pages(op, &url, &query, ("limit", LIMIT), |page: Vec<Pull>| {
                found = page.into_iter().find(|p| self.is_open_for(p, head, base));
                if found.is_some() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .await?;
        found.map(|p| self.pr(op, p)).transpose()
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
        let url = self.pulls_url(op, &tail)?;
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

    pub(super) async fn open(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, ForgeError> {
        let op = Operation::Open;
        let payload = json!({"head": head, "base": base, "title": title, "body": body});
        let p: Pull = self
            .api
            .json(
                op,
                Method::POST,
                self.pulls_url(op, &[])?,
                &[],
                Some(&payload),
            )
            .await?;
        self.pr(op, p)
    }

    pub(super) async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let op = Operation::Get(number);
        let n = number.to_string();
        let p: Pull = self
            .api
            .json(op, Method::GET, self.pulls_url(op, &[&n])?, &[], None)
            .await?;
        self.pr(op, p)
    }

    /// Gitea lists newest first (by creation) unless told otherwise, so the first page with a
    /// pull request of this branch holds the newest one.
    pub(super) async fn latest_for_branch(
        &self,
        head: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let op = Operation::LatestForBranch;
        let url = self.pulls_url(op, &[])?;
        let query = [("state", "all".to_string())];
        let mut newest: Option<Pull> = None;
        self.api
            .pages(op, &url, &query, ("limit", LIMIT), |page: Vec<Pull>| {
                for p in page
                    .into_iter()
                    .filter(|p| p.head.name == head && self.head_in_this_repo(p))
                {
                    if newest.as_ref().is_none_or(|n| p.number > n.number) {
                        newest = Some(p);
                    }
                }
                if newest.is_some() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .await?;
        newest.map(|p| self.pr(op, p)).transpose()
    }

    pub(super) async fn comment(&self, number: u64, text: &str) -> Result<(), ForgeError> {
        super::github::issue_comment(&self.api, &self.owner, &self.name, number, text).await
    }

    pub(super) async fn close(&self, number: u64) -> Result<(), ForgeError> {
        let op = Operation::Close(number);
        let n = number.to_string();
        self.api
            .send(
                op,
                Method::PATCH,
                self.pulls_url(op, &[&n])?,
                &[],
                Some(&json!({"state": "closed"})),
            )
            .await?;
        Ok(())
    }
}
