//! What GitHub and Gitea serve alike: Gitea's v1 API copies GitHub's v3 for pull requests, so
//! both answer `POST /repos/{owner}/{repo}/pulls`, `GET` and `PATCH /repos/{owner}/{repo}/pulls/{n}`
//! and `POST /repos/{owner}/{repo}/issues/{n}/comments` (pull requests are issues on both) with
//! the same payloads, and describe a pull request with the same fields.
//!
//! Only the requests and the shared fields live here; how to read "merged" and which lookups to
//! make stay in `github.rs` and `gitea.rs`.

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::{Api, Numbered, Reading};
use super::{ForgeError, NewPull, Operation, PrState, PullRequest, Review, ReviewState};

/// `owner/name` of a GitHub or Gitea repository.
#[derive(Debug)]
pub(super) struct OwnerRepo {
    pub(super) owner: String,
    pub(super) name: String,
}

/// A pull request as GitHub and Gitea answer it.
#[derive(Debug, Deserialize)]
pub(super) struct Pull {
    pub(super) number: u64,
    pub(super) html_url: String,
    pub(super) state: String,
    /// GitHub: set once merged, the only merge field of list answers.
    #[serde(default)]
    pub(super) merged_at: Option<String>,
    /// GitHub: only in single-pull answers; Gitea: in every answer.
    #[serde(default)]
    pub(super) merged: Option<bool>,
    /// Who merged; `null` until merged. GitHub sends it only in single-pull answers (lists are
    /// `pull-request-simple`), Gitea in list and single answers alike.
    #[serde(default)]
    pub(super) merged_by: Option<User>,
    pub(super) head: Ref,
    pub(super) base: Ref,
}

#[derive(Debug, Deserialize)]
pub(super) struct User {
    pub(super) login: String,
}

/// A review as GitHub and Gitea answer `GET /repos/{owner}/{repo}/pulls/{n}/reviews`.
#[derive(Debug, Deserialize)]
struct ReviewAnswer {
    /// `null` for a deleted account.
    #[serde(default)]
    user: Option<User>,
    state: String,
    #[serde(default)]
    commit_id: Option<String>,
    /// Gitea: given on an older head than the pull request's.
    #[serde(default)]
    stale: bool,
    /// Gitea: dismissed (GitHub says so in `state`).
    #[serde(default)]
    dismissed: bool,
}

/// A commit as GitHub (`GET /repos/{o}/{r}/commits/{sha}`) and Gitea
/// (`GET /repos/{o}/{r}/git/commits/{sha}`) answer it: `author` is the account the author's
/// e-mail address belongs to, `null` when none.
#[derive(Debug, Deserialize)]
struct CommitAnswer {
    #[serde(default)]
    author: Option<User>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Ref {
    #[serde(rename = "ref")]
    pub(super) name: String,
    #[serde(default)]
    pub(super) sha: Option<String>,
    #[serde(default)]
    pub(super) repo: Option<Repo>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Repo {
    #[serde(default)]
    pub(super) full_name: Option<String>,
}

impl Numbered for Pull {
    fn number(&self) -> u64 {
        self.number
    }
}

impl Pull {
    /// The pull request as sluice needs it; `merged` is the provider's reading of its merge
    /// fields. An unknown `state` is an unexpected answer.
    pub(super) fn into_pull_request(
        self,
        api: &Api,
        op: Operation,
        merged: bool,
    ) -> Result<PullRequest, ForgeError> {
        let state = match (self.state.as_str(), merged) {
            (_, true) => PrState::Merged,
            ("open", false) => PrState::Open,
            ("closed", false) => PrState::Closed,
            (other, false) => {
                return Err(api.unexpected(
                    op,
                    200,
                    format!("unknown pull request state {other:?}"),
                ))
            }
        };
        Ok(PullRequest {
            number: self.number,
            url: self.html_url,
            state,
            head: self.head.name,
            base: self.base.name,
            merged_by: self.merged_by.map(|u| u.login),
            head_sha: self.head.sha,
        })
    }
}

impl OwnerRepo {
    /// `owner/name` into its parts.
    pub(super) fn parse(repository: &str) -> Result<OwnerRepo, ForgeError> {
        match repository.split_once('/') {
            Some((owner, name))
                if !owner.is_empty()
                    && !name.is_empty()
                    && !name.contains('/')
                    && ![owner, name].iter().any(|p| *p == "." || *p == "..") =>
            {
                Ok(OwnerRepo {
                    owner: owner.to_string(),
                    name: name.to_string(),
                })
            }
            _ => Err(ForgeError::Config {
                message: format!("forge.repository: expected owner/name, found {repository:?}"),
            }),
        }
    }

    /// `repos/{owner}/{repo}/pulls` followed by `tail`.
    pub(super) fn pulls_url(
        &self,
        api: &Api,
        op: Operation,
        tail: &[&str],
    ) -> Result<reqwest::Url, ForgeError> {
        let mut segments = vec!["repos", self.owner.as_str(), self.name.as_str(), "pulls"];
        segments.extend_from_slice(tail);
        api.url(op, &segments)
    }
}

/// `org/team-slug`, as GitHub, Gitea and Forgejo name a team in a policy, into its parts; a
/// terminal error otherwise.
pub(super) fn org_team<'t>(api: &Api, team: &'t str) -> Result<(&'t str, &'t str), ForgeError> {
    match team.split_once('/') {
        Some((org, slug)) if !org.is_empty() && !slug.is_empty() && !slug.contains('/') => {
            Ok((org, slug))
        }
        _ => Err(api.unsupported(
            Operation::Membership,
            &format!("team {team:?} is not org/team-slug"),
            "name the team as org/team-slug",
        )),
    }
}

/// `owner/name`, as GitHub and Gitea name repositories in `forge.repository`.
pub(super) fn check_owner_name(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".into());
    }
    let parts: Vec<&str> = text.split('/').collect();
    if parts.len() == 2 && parts.iter().all(|p| super::repository_segment_ok(p)) {
        Ok(())
    } else {
        Err(format!("expected owner/name, found {text:?}"))
    }
}

/// The [`ForgeProvider`](super::ForgeProvider) items GitHub and Gitea share, as one line in
/// their `impl`: the calls of [`SharedPulls`], their repository check and their commit page.
macro_rules! shared_pulls_provider {
    () => {
        fn check_repository(text: &str) -> Result<(), String> {
            super::github_like::check_owner_name(text)
        }

        fn commit_page(web: &str, repository: &str, sha: &str) -> String {
            format!("{web}/{repository}/commit/{sha}")
        }

        #[cfg(test)]
        fn api_mut(&mut self) -> &mut Api {
            &mut self.api
        }

        async fn open(&self, new: &super::NewPull<'_>) -> Result<PullRequest, ForgeError> {
            SharedPulls::open(self, new).await
        }

        async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
            SharedPulls::get(self, number).await
        }

        async fn comment(&self, number: u64, text: &str) -> Result<(), ForgeError> {
            SharedPulls::comment(self, number, text).await
        }

        async fn close(&self, number: u64) -> Result<(), ForgeError> {
            SharedPulls::close(self, number).await
        }

        async fn reviews(&self, number: u64) -> Result<Vec<super::Review>, ForgeError> {
            SharedPulls::reviews(self, number).await
        }

        async fn commit_author(&self, sha: &str) -> Result<Option<String>, ForgeError> {
            SharedPulls::commit_author(self, sha).await
        }
    };
}
pub(super) use shared_pulls_provider;

/// A GitHub or Gitea repository's pull requests: the calls both make alike. Each forge says
/// where its API and repository are and how it reads "merged".
pub(super) trait SharedPulls {
    fn api(&self) -> &Api;
    fn repo(&self) -> &OwnerRepo;
    /// Whether `p` is merged, by this forge's reading of its merge fields.
    fn merged(p: &Pull) -> bool;
    /// The page-size parameter of the `pulls` list and the size asked for.
    const PAGE_SIZE: (&'static str, u32);
    /// The path of one commit below the repository: GitHub `commits`, Gitea `git/commits`.
    const COMMIT_PATH: &'static [&'static str];

    /// The pull request as sluice needs it.
    fn pr(&self, op: Operation, p: Pull) -> Result<PullRequest, ForgeError> {
        let merged = Self::merged(&p);
        p.into_pull_request(self.api(), op, merged)
    }

    /// The first pull request of `GET /repos/{owner}/{repo}/pulls?{query}` that `wanted`
    /// accepts.
    async fn find_listed(
        &self,
        op: Operation,
        query: &[(&str, String)],
        wanted: impl Fn(&Pull) -> bool,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let url = self.repo().pulls_url(self.api(), op, &[])?;
        let api = self.api();
        let found = api.find(op, &url, query, Self::PAGE_SIZE, wanted).await?;
        found.map(|p| self.pr(op, p)).transpose()
    }

    /// The newest pull request of `GET /repos/{owner}/{repo}/pulls?{query}` that `wanted`
    /// accepts, reading the pages `reading` says.
    async fn newest_listed(
        &self,
        op: Operation,
        query: &[(&str, String)],
        wanted: impl Fn(&Pull) -> bool,
        reading: Reading,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let url = self.repo().pulls_url(self.api(), op, &[])?;
        let size = Self::PAGE_SIZE;
        let newest = self.api().newest(op, &url, query, size, wanted, reading);
        newest.await?.map(|p| self.pr(op, p)).transpose()
    }

    /// `POST /repos/{owner}/{repo}/pulls {head, base, title, body}`.
    async fn open(&self, new: &NewPull<'_>) -> Result<PullRequest, ForgeError> {
        let (api, op) = (self.api(), Operation::Open);
        let payload =
            json!({"title": new.title, "head": new.head, "base": new.base, "body": new.body});
        let url = self.repo().pulls_url(api, op, &[])?;
        let p = api.json(op, Method::POST, url, &[], Some(&payload)).await?;
        self.pr(op, p)
    }

    /// `GET /repos/{owner}/{repo}/pulls/{n}`.
    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let (api, op) = (self.api(), Operation::Get(number));
        let url = self.repo().pulls_url(api, op, &[&number.to_string()])?;
        let p = api.json(op, Method::GET, url, &[], None).await?;
        self.pr(op, p)
    }

    /// `POST /repos/{owner}/{repo}/issues/{n}/comments {body}`.
    async fn comment(&self, number: u64, text: &str) -> Result<(), ForgeError> {
        let (api, op, repo) = (self.api(), Operation::Comment(number), self.repo());
        let n = number.to_string();
        let segments = ["repos", &repo.owner, &repo.name, "issues", &n, "comments"];
        let url = api.url(op, &segments)?;
        api.send(op, Method::POST, url, &[], Some(&json!({"body": text})))
            .await?;
        Ok(())
    }

    /// `GET /repos/{owner}/{repo}/pulls/{n}/reviews`, every page, oldest first. Reviews of a
    /// deleted account (`user: null`) are left out: nobody can be that approver.
    async fn reviews(&self, number: u64) -> Result<Vec<Review>, ForgeError> {
        let (api, op) = (self.api(), Operation::Reviews(number));
        let url = self
            .repo()
            .pulls_url(api, op, &[&number.to_string(), "reviews"])?;
        let answers: Vec<ReviewAnswer> = api.all(op, &url, &[], Self::PAGE_SIZE).await?;
        let mut reviews = Vec::new();
        for r in answers {
            let Some(user) = r.user else { continue };
            // GitHub spells the states APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED,
            // PENDING; Gitea APPROVED, REQUEST_CHANGES, COMMENT, PENDING, REQUEST_REVIEW
            // (a review asked for, not given).
            let state = match r.state.as_str() {
                _ if r.dismissed => ReviewState::Dismissed,
                "APPROVED" => ReviewState::Approved,
                "CHANGES_REQUESTED" | "REQUEST_CHANGES" => ReviewState::ChangesRequested,
                "COMMENTED" | "COMMENT" => ReviewState::Commented,
                "DISMISSED" => ReviewState::Dismissed,
                "PENDING" | "REQUEST_REVIEW" => ReviewState::Pending,
                other => {
                    return Err(api.unexpected(op, 200, format!("unknown review state {other:?}")))
                }
            };
            reviews.push(Review {
                login: user.login,
                state,
                commit: r.commit_id.filter(|c| !c.is_empty()),
                stale: r.stale || r.dismissed || state == ReviewState::Dismissed,
            });
        }
        Ok(reviews)
    }

    /// The login of the account commit `sha`'s author belongs to ([`Self::COMMIT_PATH`]).
    async fn commit_author(&self, sha: &str) -> Result<Option<String>, ForgeError> {
        let (api, op, repo) = (self.api(), Operation::CommitAuthor, self.repo());
        let mut segments = vec!["repos", repo.owner.as_str(), repo.name.as_str()];
        segments.extend_from_slice(Self::COMMIT_PATH);
        segments.push(sha);
        let url = api.url(op, &segments)?;
        let commit: CommitAnswer = api.json(op, Method::GET, url, &[], None).await?;
        Ok(commit.author.map(|u| u.login).filter(|l| !l.is_empty()))
    }

    /// `PATCH /repos/{owner}/{repo}/pulls/{n} {state: "closed"}`.
    async fn close(&self, number: u64) -> Result<(), ForgeError> {
        let (api, op) = (self.api(), Operation::Close(number));
        let url = self.repo().pulls_url(api, op, &[&number.to_string()])?;
        let payload = json!({"state": "closed"});
        api.send(op, Method::PATCH, url, &[], Some(&payload))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_must_be_owner_slash_name() {
        assert!(OwnerRepo::parse("a/b").is_ok());
        for bad in ["a", "a/b/c", "/b", "a/", "../b"] {
            assert!(OwnerRepo::parse(bad).is_err(), "{bad}");
        }
    }
}
