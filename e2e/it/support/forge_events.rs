//! The pull-request webhooks each forge sends when an approval pull request is merged or
//! closed without merging: the documented payload (the fields sluice reads, shaped as each
//! forge's "webhook events" page shows them) under the forge's own event header and
//! authentication, for `/hooks/<forge>`.

use base64::Engine;

use super::forge::Kind;
use super::github_signature;

/// `shop/web` at `revision`, waiting for approval before its first traffic change, its next
/// metric check ten minutes away: while it waits, only a poll or a webhook makes the daemon
/// look at the approval pull request again.
pub(crate) fn gated_canary(revision: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: web, namespace: shop}}\nspec:\n  routeOnly: {{services: [web-blue, web-green], revision: \"{revision}\"}}\n  service: {{port: 8080}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis:\n    interval: 10m\n    stepWeights: [20]\n    approvals: {{beforeRollout: true}}\n"
    )
}

/// What happened to the pull request the event reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Outcome {
    Merged,
    /// Closed without merging: declined (Bitbucket), abandoned (Azure DevOps).
    Closed,
}

/// One delivery: the path it is posted to, its headers and its body.
pub(crate) struct Delivery {
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Delivery {
    pub(crate) fn headers(&self) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

/// The `/hooks/<forge>` segment of `kind`.
pub(crate) fn hook_key(kind: Kind) -> &'static str {
    match kind {
        Kind::GitHub => "github",
        Kind::GitLab => "gitlab",
        Kind::Gitea => "gitea",
        Kind::Forgejo => "forgejo",
        Kind::Bitbucket => "bitbucket",
        Kind::AzureDevOps => "azure-devops",
    }
}

/// The event `kind` sends when pull request `number` from `branch` of `repository`
/// (`owner/name`; Azure DevOps: `project/repository`) had `outcome`, authenticated with
/// the webhook `secret`.
pub(crate) fn pull_event(
    kind: Kind,
    repository: &str,
    number: u64,
    branch: &str,
    outcome: Outcome,
    secret: &str,
) -> Delivery {
    let merged = outcome == Outcome::Merged;
    let github_like = || {
        format!(
            r#"{{"action":"closed","number":{number},"pull_request":{{"number":{number},"state":"closed","merged":{merged},"head":{{"ref":"{branch}"}},"base":{{"ref":"main"}}}},"repository":{{"full_name":"{repository}"}}}}"#
        )
    };
    let (event, body) = match kind {
        Kind::GitHub | Kind::Gitea | Kind::Forgejo => ("pull_request", github_like()),
        Kind::GitLab => {
            let (state, action) = if merged {
                ("merged", "merge")
            } else {
                ("closed", "close")
            };
            (
                "Merge Request Hook",
                format!(
                    r#"{{"object_kind":"merge_request","event_type":"merge_request","user":{{"username":"alice"}},"project":{{"id":7,"path_with_namespace":"{repository}"}},"object_attributes":{{"iid":{number},"source_branch":"{branch}","target_branch":"main","state":"{state}","action":"{action}"}}}}"#
                ),
            )
        }
        Kind::Bitbucket => {
            let (key, state) = if merged {
                ("pullrequest:fulfilled", "MERGED")
            } else {
                ("pullrequest:rejected", "DECLINED")
            };
            (
                key,
                format!(
                    r#"{{"actor":{{"display_name":"Alice"}},"pullrequest":{{"id":{number},"state":"{state}","source":{{"branch":{{"name":"{branch}"}}}},"destination":{{"branch":{{"name":"main"}}}}}},"repository":{{"type":"repository","full_name":"{repository}"}}}}"#
                ),
            )
        }
        Kind::AzureDevOps => {
            let (project, name) = repository.split_once('/').expect("project/repository");
            let (event_type, status) = if merged {
                ("git.pullrequest.merged", "completed")
            } else {
                ("git.pullrequest.updated", "abandoned")
            };
            (
                "",
                format!(
                    r#"{{"eventType":"{event_type}","publisherId":"tfs","resource":{{"repository":{{"name":"{name}","project":{{"name":"{project}"}}}},"pullRequestId":{number},"status":"{status}","sourceRefName":"refs/heads/{branch}","targetRefName":"refs/heads/main"}}}}"#
                ),
            )
        }
    };
    let signature = github_signature(secret, &body);
    let hex = signature.trim_start_matches("sha256=").to_string();
    let mut headers: Vec<(&str, String)> = match kind {
        Kind::GitHub => vec![
            ("X-GitHub-Event", event.into()),
            ("X-Hub-Signature-256", signature),
        ],
        Kind::GitLab => vec![
            ("X-Gitlab-Event", event.into()),
            ("X-Gitlab-Token", secret.into()),
        ],
        Kind::Gitea => vec![("X-Gitea-Event", event.into()), ("X-Gitea-Signature", hex)],
        // Forgejo sends its own names (and Gitea's too; its own suffice).
        Kind::Forgejo => vec![
            ("X-Forgejo-Event", event.into()),
            ("X-Forgejo-Signature", hex),
        ],
        // Bitbucket Cloud: GitHub's old header name, SHA-256.
        Kind::Bitbucket => vec![
            ("X-Event-Key", event.into()),
            ("X-Hub-Signature", signature),
        ],
        Kind::AzureDevOps => {
            let basic =
                base64::engine::general_purpose::STANDARD.encode(format!("sluice:{secret}"));
            vec![("Authorization", format!("Basic {basic}"))]
        }
    };
    headers.push(("Content-Type", "application/json".into()));
    Delivery {
        path: format!("/hooks/{}", hook_key(kind)),
        headers: headers
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        body,
    }
}
