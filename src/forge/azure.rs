//! Azure DevOps Services and Server pull requests, Git REST API 7.0.
//!
//! `apiUrl` is the organization or collection URL (`https://dev.azure.com/{organization}`,
//! Server: `https://HOST/tfs/{collection}`); the repository is `{project}/{repository}`.
//! Endpoints (relative to `apiUrl/{project}/_apis/git/repositories/{repository}`, every one
//! with `api-version=7.0`; branches are full refs, `refs/heads/{branch}`):
//! - `GET /pullrequests?searchCriteria.sourceRefName=..&searchCriteria.targetRefName=..
//!   &searchCriteria.status=active|all&$top=..&$skip=..`: answers `{value, count}`; another
//!   page follows a full one
//! - `POST /pullrequests` `{sourceRefName, targetRefName, title, description}`; 409 when an
//!   active pull request for the same branches exists
//! - `GET /pullrequests/{pullRequestId}`: `status` is `active`, `completed` (merged) or
//!   `abandoned` (closed); who completed it is `closedBy.uniqueName`
//! - `POST /pullrequests/{pullRequestId}/threads`
//!   `{comments: [{parentCommentId: 0, content, commentType: 1}], status: 1}`
//! - `PATCH /pullrequests/{pullRequestId}` `{status: "abandoned"}`
//! - `GET /pullrequests/{pullRequestId}/reviewers`: `{value: [{uniqueName, vote,
//!   isContainer}]}`; `vote` 10 approved, 5 approved with suggestions, 0 no vote, -5 waiting
//!   for the author, -10 rejected; group reviewers (`isContainer`) are left out (their
//!   members vote themselves)
//! - `PATCH /pullrequests/{pullRequestId}` `{status: "completed", lastMergeSourceCommit:
//!   {commitId}}`: `lastMergeSourceCommit` is required (400 without it); the answer to one the
//!   source branch moved past is not documented, so the pull request is read first and a
//!   head other than `commitId` is refused here. The answer is the pull request: `status`
//!   `completed`, or `active` with `mergeStatus` (`queued`, `conflicts`, `rejectedByPolicy`,
//!   `failure`)
//! - `GET /commits/{commitId}`: `author` is only the name and e-mail address the commit
//!   states; the account that pushed it (`push.pushedBy.uniqueName`, in the answer of
//!   Commits - Get) stands for its author
//! - teams, relative to `apiUrl`: `GET /_apis/projects/{project}/teams/{team}/members
//!   ?$top=..&$skip=..`: `{value: [{identity: {uniqueName}}]}`
//!
//! Auth: a personal access token as HTTP basic with an empty user name
//! (`Authorization: Basic base64(":" + token)`).

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::{Answer, Api, Lookup, Numbered, Paging, PullsApi, Reading};
use super::{
    About, Auth, ForgeError, ForgeProvider, NewPull, Operation, PrState, PullRequest, Review,
    ReviewState,
};

/// 7.0: the newest version Azure DevOps Server 2022 takes; Services and later Servers take it
/// too, and the calls here are the same in 7.1.
const API_VERSION: (&str, &str) = ("api-version", "7.0");
/// Items asked for per page.
const PAGE: Paging = Paging::Skip(100);
/// Azure DevOps refuses a pull request description longer than this.
const MAX_DESCRIPTION: usize = 4000;
const HEADS: &str = "refs/heads/";

/// An Azure DevOps repository's pull requests.
#[derive(Debug)]
pub struct AzureDevOps {
    pub(super) api: Api,
    project: String,
    repository: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Pull {
    pull_request_id: u64,
    status: String,
    source_ref_name: String,
    target_ref_name: String,
    #[serde(default)]
    closed_by: Option<Identity>,
    #[serde(default)]
    repository: Option<Repository>,
    /// Set when the source branch is in a fork.
    #[serde(default)]
    fork_source: Option<serde_json::Value>,
    /// The source branch's head as the pull request last saw it.
    #[serde(default)]
    last_merge_source_commit: Option<CommitRef>,
    /// `notSet`, `queued`, `conflicts`, `succeeded`, `rejectedByPolicy` or `failure`.
    #[serde(default)]
    merge_status: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommitRef {
    commit_id: String,
}

/// A reviewer and their vote.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reviewer {
    #[serde(default)]
    unique_name: Option<String>,
    vote: i64,
    #[serde(default)]
    is_container: bool,
}

/// An Azure DevOps list answer.
#[derive(Debug, Deserialize)]
struct Listed<T> {
    value: Vec<T>,
}

/// A team member.
#[derive(Debug, Deserialize)]
struct TeamMember {
    identity: Identity,
}

/// A commit: who pushed it, when the answer says.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Commit {
    #[serde(default)]
    push: Option<Push>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Push {
    #[serde(default)]
    pushed_by: Option<Identity>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Identity {
    #[serde(default)]
    unique_name: Option<String>,
    #[serde(default)]
    display_name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Repository {
    #[serde(default)]
    web_url: Option<String>,
}

impl Numbered for Pull {
    fn number(&self) -> u64 {
        self.pull_request_id
    }
}

impl AzureDevOps {
    /// The web page of `project/repository` below the collection's address `web`.
    fn web(web: &str, repository: &str) -> String {
        let web = web.trim_end_matches('/');
        match repository.split_once('/') {
            Some((project, repo)) => format!("{web}/{project}/_git/{repo}"),
            None => format!("{web}/{repository}"),
        }
    }
}

impl PullsApi for AzureDevOps {
    const QUERY: &'static [(&'static str, &'static str)] = &[API_VERSION];

    /// Azure DevOps answers a refused token with 203 and its sign-in page instead of 401: that
    /// is a 401 here.
    fn meaning(&self, mut answer: Answer) -> Answer {
        if answer.status == reqwest::StatusCode::NON_AUTHORITATIVE_INFORMATION {
            answer.status = reqwest::StatusCode::UNAUTHORIZED;
            answer.body = b"the sign-in page: the token was not accepted".to_vec();
        }
        answer
    }

    type Pull = Pull;
    const PAGE: Paging = PAGE;

    fn api(&self) -> &Api {
        &self.api
    }

    fn pulls_url(&self, op: Operation, tail: &[&str]) -> Result<reqwest::Url, ForgeError> {
        let (project, repository) = (self.project.as_str(), self.repository.as_str());
        let prefix = [
            project,
            "_apis",
            "git",
            "repositories",
            repository,
            "pullrequests",
        ];
        self.api.url_of(op, &prefix, tail)
    }

    fn pr(&self, op: Operation, p: Pull) -> Result<PullRequest, ForgeError> {
        let state = match p.status.as_str() {
            "active" => PrState::Open,
            "completed" => PrState::Merged,
            "abandoned" => PrState::Closed,
            other => {
                return Err(self.api.unexpected(
                    op,
                    200,
                    format!("unknown pull request status {other:?}"),
                ))
            }
        };
        let branch = |name: String| match name.strip_prefix(HEADS) {
            Some(short) => short.to_string(),
            None => name,
        };
        let web = p.repository.and_then(|r| r.web_url).unwrap_or_else(|| {
            let base = self.api.url(op, &[]).map(String::from).unwrap_or_default();
            let page = Self::web(&base, &format!("{}/{}", self.project, self.repository));
            page.trim_end_matches('/').to_string()
        });
        let merged_by = match state {
            PrState::Merged => p.closed_by.and_then(|i| i.unique_name.or(i.display_name)),
            PrState::Open | PrState::Closed => None,
        };
        Ok(PullRequest {
            number: p.pull_request_id,
            url: format!("{web}/pullrequest/{}", p.pull_request_id),
            state,
            head: branch(p.source_ref_name),
            base: branch(p.target_ref_name),
            merged_by,
            head_sha: p.last_merge_source_commit.map(|c| c.commit_id),
        })
    }
}

impl ForgeProvider for AzureDevOps {
    const ABOUT: About = About {
        key: "azuredevops",
        title: "Azure DevOps",
        pr_noun: "pull request",
        pr_sign: "!",
        default_api_url: None,
        api_url_sample: "https://dev.azure.com/ORGANIZATION",
        // The API sits below the project; the settings name the collection.
        api_path: "",
        public_web: None,
        api_url_example: "https://dev.azure.com/ORGANIZATION, or https://HOST/tfs/COLLECTION \
                          for Azure DevOps Server",
        token_scopes: "the Code (Read & write) scope",
        accept: "application/json",
        headers: &[],
        auth: Auth::Basic,
    };

    /// `project/repository`.
    fn check_repository(text: &str) -> Result<(), String> {
        if text.is_empty() {
            return Err("must not be empty".into());
        }
        let parts: Vec<&str> = text.split('/').collect();
        let part_ok = |p: &&str| {
            !p.is_empty() && *p != "." && *p != ".." && !p.chars().any(|c| c.is_control())
        };
        if parts.len() == 2 && parts.iter().all(part_ok) {
            Ok(())
        } else {
            Err(format!("expected project/repository, found {text:?}"))
        }
    }

    fn commit_page(web: &str, repository: &str, sha: &str) -> String {
        format!("{}/commit/{sha}", Self::web(web, repository))
    }

    fn pulls_page(web: &str, repository: &str, branch: &str) -> String {
        let branch = super::query_encoded(branch);
        format!(
            "{}/pullrequests?_a=active&sourceRef={branch}",
            Self::web(web, repository)
        )
    }

    fn new(api: Api, repository: &str) -> Result<AzureDevOps, ForgeError> {
        match (
            Self::check_repository(repository),
            repository.split_once('/'),
        ) {
            (Ok(()), Some((project, repo))) => Ok(AzureDevOps {
                api,
                project: project.to_string(),
                repository: repo.to_string(),
            }),
            _ => Err(ForgeError::Config {
                message: format!(
                    "forge.repository: expected project/repository, found {repository:?}"
                ),
            }),
        }
    }

    #[cfg(test)]
    fn api_mut(&mut self) -> &mut Api {
        &mut self.api
    }

    async fn find_open(&self, head: &str, base: &str) -> Result<Option<PullRequest>, ForgeError> {
        let (head, base) = (format!("{HEADS}{head}"), format!("{HEADS}{base}"));
        let criteria = vec![
            ("searchCriteria.sourceRefName", head.clone()),
            ("searchCriteria.targetRefName", base.clone()),
            ("searchCriteria.status", "active".to_string()),
        ];
        let wanted = |p: &Pull| {
            p.source_ref_name == head
                && p.target_ref_name == base
                && p.status == "active"
                && p.fork_source.is_none()
        };
        let query = with_version(criteria);
        self.listed(Operation::FindOpen, &query, wanted, Lookup::First)
            .await
    }

    async fn open(&self, new: &NewPull<'_>) -> Result<PullRequest, ForgeError> {
        let payload = json!({
            "sourceRefName": format!("{HEADS}{}", new.head),
            "targetRefName": format!("{HEADS}{}", new.base),
            "title": new.title,
            "description": description(new.body),
        });
        self.call(Operation::Open, Method::POST, &[], Some(&payload))
            .await
    }

    async fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        self.get_pull(number).await
    }

    /// Listed newest first by id; all pages are read.
    async fn latest_for_branch(
        &self,
        head: &str,
        base: Option<&str>,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let head = format!("{HEADS}{head}");
        let base = base.map(|b| format!("{HEADS}{b}"));
        let mut criteria = vec![("searchCriteria.sourceRefName", head.clone())];
        criteria.extend(base.clone().map(|b| ("searchCriteria.targetRefName", b)));
        criteria.push(("searchCriteria.status", "all".to_string()));
        let wanted = |p: &Pull| {
            p.source_ref_name == head
                && base.as_ref().is_none_or(|b| p.target_ref_name == *b)
                && p.fork_source.is_none()
        };
        let which = Lookup::Newest(Reading::AllPages);
        let query = with_version(criteria);
        self.listed(Operation::LatestForBranch, &query, wanted, which)
            .await
    }

    async fn comment(&self, number: u64, text: &str) -> Result<(), ForgeError> {
        let op = Operation::Comment(number);
        let payload = json!({
            "comments": [{"parentCommentId": 0, "content": text, "commentType": 1}],
            "status": 1,
        });
        let tail = [number.to_string(), "threads".to_string()];
        let tail: Vec<&str> = tail.iter().map(String::as_str).collect();
        self.send(op, Method::POST, &tail, Some(&payload)).await?;
        Ok(())
    }

    async fn close(&self, number: u64) -> Result<(), ForgeError> {
        let op = Operation::Close(number);
        let payload = json!({"status": "abandoned"});
        self.send(op, Method::PATCH, &[&number.to_string()], Some(&payload))
            .await?;
        Ok(())
    }

    async fn reviews(&self, number: u64) -> Result<Vec<Review>, ForgeError> {
        let op = Operation::Reviews(number);
        let n = number.to_string();
        let answer = self.send(op, Method::GET, &[&n, "reviewers"], None).await?;
        let listed: Listed<Reviewer> = self.api.decode(op, &answer)?;
        let mut reviews = Vec::new();
        for r in listed.value.into_iter().filter(|r| !r.is_container) {
            let state = match r.vote {
                10 | 5 => ReviewState::Approved,
                -5 | -10 => ReviewState::ChangesRequested,
                0 => ReviewState::Pending,
                other => {
                    let what = format!("unknown reviewer vote {other}");
                    return Err(self.api.unexpected(op, 200, what));
                }
            };
            if let Some(login) = r.unique_name.filter(|n| !n.is_empty()) {
                reviews.push(Review {
                    login,
                    state,
                    commit: None,
                    stale: false,
                });
            }
        }
        Ok(reviews)
    }

    /// `team` is `project/team`; `login` is matched against the members' `uniqueName`
    /// (case-insensitively, as Azure DevOps compares them).
    async fn is_member(&self, team: &str, login: &str) -> Result<bool, ForgeError> {
        let op = Operation::Membership;
        let Some((project, name)) = team
            .split_once('/')
            .filter(|(p, t)| !p.is_empty() && !t.is_empty() && !t.contains('/'))
        else {
            return Err(self.api.unsupported(
                op,
                &format!("team {team:?} is not project/team"),
                "name the team as project/team",
            ));
        };
        let segments = ["_apis", "projects", project, "teams", name, "members"];
        let url = self.api.url(op, &segments)?;
        let query = with_version(Vec::new());
        let members: Vec<TeamMember> = self.api.all(op, &url, &query, PAGE).await?;
        Ok(members.iter().any(|m| {
            m.identity
                .unique_name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(login))
        }))
    }

    /// Azure DevOps requires `lastMergeSourceCommit` to complete, but documents no answer for
    /// one the source branch has moved past: the head is read and compared first, and the
    /// completion still names it (a push in between is the server's to refuse).
    async fn merge(&self, number: u64, head_sha: &str) -> Result<(), ForgeError> {
        let op = Operation::Merge(number);
        let n = number.to_string();
        let now = self.call(op, Method::GET, &[&n], None).await?;
        let head = now.head_sha.unwrap_or_default();
        if now.state == PrState::Open && head != head_sha {
            return Err(self.api.head_moved(op, &head, head_sha));
        }
        let payload = json!({
            "status": "completed",
            "lastMergeSourceCommit": {"commitId": head_sha},
        });
        let answer = self.send(op, Method::PATCH, &[&n], Some(&payload)).await?;
        // The answer is the pull request: completed, queued for completion (done later, seen
        // at the next read), or still active with `mergeStatus` saying why it was not merged.
        let done: Pull = self.api.decode(op, &answer)?;
        match (done.status.as_str(), done.merge_status.as_deref()) {
            ("active", Some(why @ ("conflicts" | "rejectedByPolicy" | "failure"))) => {
                Err(self.api.terminal(
                    op,
                    Some(answer.status.as_u16()),
                    format!("Azure DevOps did not complete it: mergeStatus {why}"),
                    "resolve the conflicts or the branch policies that block the pull request"
                        .into(),
                ))
            }
            _ => Ok(()),
        }
    }

    async fn commit_author(&self, sha: &str) -> Result<Option<String>, ForgeError> {
        let op = Operation::CommitAuthor;
        let (project, repository) = (self.project.as_str(), self.repository.as_str());
        let segments = [
            project,
            "_apis",
            "git",
            "repositories",
            repository,
            "commits",
            sha,
        ];
        let url = self.api.url(op, &segments)?;
        let query = with_version(Vec::new());
        let commit: Commit = self.api.json(op, Method::GET, url, &query, None).await?;
        Ok(commit
            .push
            .and_then(|p| p.pushed_by)
            .and_then(|i| i.unique_name)
            .filter(|n| !n.is_empty()))
    }
}

/// `criteria` (`searchCriteria.*`) and the `api-version` every request carries.
fn with_version(mut criteria: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
    let (key, version) = API_VERSION;
    criteria.push((key, version.to_string()));
    criteria
}

/// `body` cut at a line to fit Azure DevOps' description limit, with a note where it was cut.
fn description(body: &str) -> String {
    if body.chars().count() <= MAX_DESCRIPTION {
        return body.to_string();
    }
    let note = "\n_Cut here: an Azure DevOps pull request description holds at most 4,000 \
                characters; the commit's trailers hold the rest._";
    super::cut_with(body, MAX_DESCRIPTION - note.chars().count(), note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_description_is_cut_at_a_line_to_azure_devops_limit() {
        let short = "a\nb\n";
        assert_eq!(description(short), short);
        let long = "| row | é |\n".repeat(1000);
        let cut = description(&long);
        assert!(cut.chars().count() <= MAX_DESCRIPTION, "{}", cut.len());
        assert!(cut.chars().count() > MAX_DESCRIPTION - 200);
        assert!(cut.starts_with("| row | é |\n"));
        assert!(cut.ends_with("the commit's trailers hold the rest._"));
    }
}
