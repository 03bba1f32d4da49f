//! GitHub and GitHub Enterprise Server, REST API v3 (`X-GitHub-Api-Version: 2022-11-28`).
//!
//! Endpoints (relative to `apiUrl`: `https://api.github.com`, or `https://HOST/api/v3`):
//! - `GET /repos/{owner}/{repo}/pulls?state=open&head={owner}:{branch}&base={base}`
//! - `POST /repos/{owner}/{repo}/pulls` `{title, head, base, body}`
//! - `GET /repos/{owner}/{repo}/pulls/{n}`: merged when `merged_at` is set (or `merged: true`);
//!   `merged_by.login` says who merged (list answers do not carry `merged_by`)
//! - `POST /repos/{owner}/{repo}/issues/{n}/comments` `{body}` (pull requests are issues)
//! - `PATCH /repos/{owner}/{repo}/pulls/{n}` `{state: "closed"}`
//!
//! Auth: `Authorization: Bearer <token>`.

use std::ops::ControlFlow;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::Api;
use super::{ForgeError, Operation, PrState, PullRequest};

const PER_PAGE: u32 = 100;

/// A GitHub repository's pull requests.
#[derive(Debug)]
pub struct GitHub {
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
    merged_at: Option<String>,
    /// Only in single-pull answers; lists carry `merged_at` alone.
    #[serde(default)]
    merged: Option<bool>,
    /// Only in single-pull answers (lists are `pull-request-simple`); `null` until merged.
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
}

impl GitHub {
    pub(super) fn new(api: Api, repository: &str) -> Result<GitHub, ForgeError> {
        let (owner, name) = split_owner_name(repository)?;
        Ok(GitHub { api, owner, name })
    }

    fn pr(&self, op: Operation, p: Pull) -> Result<PullRequest, ForgeError> {
        let merged = p.merged_at.is_some() || p.merged == Some(true);
        let state = match (p.state.as_str(), merged) {
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

    fn pulls_url(&self, op: Operation) -> Result<reqwest::Url, ForgeError> {
        self.api
            .url(op, &["repos", &self.owner, &self.name, "pulls"])
    }

    pub(super) async fn find_open(
        &self,
        head: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let op = Operation::FindOpen;
        let url = self.pulls_url(op)?;
        let query = [
            ("state", "open".to_string()),
            ("head", format!("{}:{head}", self.owner)),
            ("base", base.to_string()),
        ];
        let mut found = None;
        self.api
            .pages(
                op,
                &url,
                &query,
                ("per_page", PER_PAGE),
                |page: Vec<Pull>| {
                    found = page.into_iter().find(|p| {
                        p.head.name == head
                            && p.base.name == base
                            && p.state == "open"
                            && p.merged_at.is_none()
                    });
                    if found.is_some() {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                },
            )
            .await?;
        found.map(|p| self.pr(op, p)).transpose()
    }

    pub(super) async fn open(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, ForgeError> {
        let op = Operation::Open;
        let payload = json!({"title": title, "head": head, "base": base, "body": body});
        let p: Pull = self
            .api
            .json(op, Method::POST, self.pulls_url(op)?, &[], Some(&payload))
            .await?;
        self.pr(op, p)
    }

    pub(super) async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let op = Operation::Get(number);
        let n = number.to_string();
        let url = self
            .api
            .url(op, &["repos", &self.owner, &self.name, "pulls", &n])?;
        let p: Pull = self.api.json(op, Method::GET, url, &[], None).await?;
        self.pr(op, p)
    }

    pub(super) async fn latest_for_branch(
        &self,
        head: &str,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let op = Operation::LatestForBranch;
        let url = self.pulls_url(op)?;
        let query = [
            ("state", "all".to_string()),
            ("head", format!("{}:{head}", self.owner)),
            ("sort", "created".to_string()),
            ("direction", "desc".to_string()),
        ];
        let mut newest: Option<Pull> = None;
        self.api
            .pages(
                op,
                &url,
                &query,
                ("per_page", PER_PAGE),
                |page: Vec<Pull>| {
                    for p in page.into_iter().filter(|p| p.head.name == head) {
                        if newest.as_ref().is_none_or(|n| p.number > n.number) {
                            newest = Some(p);
                        }
                    }
                    ControlFlow::Continue(())
                },
            )
            .await?;
        newest.map(|p| self.pr(op, p)).transpose()
    }

    pub(super) async fn comment(&self, number: u64, text: &str) -> Result<(), ForgeError> {
        issue_comment(&self.api, &self.owner, &self.name, number, text).await
    }

    pub(super) async fn close(&self, number: u64) -> Result<(), ForgeError> {
        let op = Operation::Close(number);
        let n = number.to_string();
        let url = self
            .api
            .url(op, &["repos", &self.owner, &self.name, "pulls", &n])?;
        self.api
            .send(
                op,
                Method::PATCH,
                url,
                &[],
                Some(&json!({"state": "closed"})),
            )
            .await?;
        Ok(())
    }
}

/// `POST /repos/{owner}/{repo}/issues/{n}/comments {body}`: the same endpoint and payload on
/// GitHub and Gitea (pull requests are issues on both).
pub(super) async fn issue_comment(
    api: &Api,
    owner: &str,
    name: &str,
    number: u64,
    text: &str,
) -> Result<(), ForgeError> {
    let op = Operation::Comment(number);
    let n = number.to_string();
    let url = api.url(op, &["repos", owner, name, "issues", &n, "comments"])?;
    api.send(op, Method::POST, url, &[], Some(&json!({"body": text})))
        .await?;
    Ok(())
}

/// `owner/name` into its parts (GitHub and Gitea).
pub(super) fn split_owner_name(repository: &str) -> Result<(String, String), ForgeError> {
    match repository.split_once('/') {
        Some((owner, name))
            if !owner.is_empty()
                && !name.is_empty()
                && !name.contains('/')
                && ![owner, name].iter().any(|p| *p == "." || *p == "..") =>
        {
            Ok((owner.to_string(), name.to_string()))
        }
        _ => Err(ForgeError::Config {
            message: format!("forge.repository: expected owner/name, found {repository:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_at_or_merged_means_merged() {
        let pull = |state: &str, merged_at: Option<&str>, merged: Option<bool>| Pull {
            number: 1,
            html_url: "u".into(),
            state: state.into(),
            merged_at: merged_at.map(str::to_string),
            merged,
            merged_by: None,
            head: Ref { name: "h".into() },
            base: Ref { name: "b".into() },
        };
        let gh = GitHub::new(
            Api::new(
                &super::super::ForgeSettings {
                    kind: super::super::ForgeKind::GitHub,
                    api_url: "https://api.github.com".into(),
                    repository: "a/b".into(),
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

    #[test]
    fn repository_must_be_owner_slash_name() {
        assert!(split_owner_name("a/b").is_ok());
        for bad in ["a", "a/b/c", "/b", "a/", "../b"] {
            assert!(split_owner_name(bad).is_err(), "{bad}");
        }
    }
}
