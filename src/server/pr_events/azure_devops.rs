//! Azure DevOps Services and Server: service hooks ("Web Hooks" consumer) for
//! `git.pullrequest.merged` (merge attempted), `git.pullrequest.updated` (status, votes,
//! pushes) and `git.pullrequest.created`. The event is named in the body (`eventType`); the
//! hook authenticates with HTTP basic authentication, whose password is the shared secret
//! (the user name is not checked: Azure DevOps asks for one, any will do).

use serde::Deserialize;

use super::{json, Change, Event, PullEvent};

/// `{eventType, resource: {pullRequestId, status, sourceRefName, repository: {name,
/// project: {name}}}}`.
#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "eventType")]
    event_type: String,
    resource: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PullRequest {
    pull_request_id: u64,
    status: String,
    source_ref_name: String,
    repository: Repository,
}

#[derive(Deserialize)]
struct Repository {
    name: String,
    project: Project,
}

#[derive(Deserialize)]
struct Project {
    name: String,
}

pub(super) fn parse(_event: &str, body: &[u8]) -> Result<Event, String> {
    let payload: Payload = json(body)?;
    let pulls = [
        "git.pullrequest.merged",
        "git.pullrequest.updated",
        "git.pullrequest.created",
    ];
    if payload.event_type == "git.push" {
        return Ok(Event::Push);
    }
    if !pulls.contains(&payload.event_type.as_str()) {
        return Ok(Event::Ignored);
    }
    let resource = payload
        .resource
        .ok_or("a pull-request event without resource")?;
    let pull: PullRequest =
        serde_json::from_value(resource).map_err(|e| format!("at resource: {e}"))?;
    let change = match (payload.event_type.as_str(), pull.status.as_str()) {
        (_, "completed") => Change::Merged,
        (_, "abandoned") => Change::Closed,
        ("git.pullrequest.created", _) => Change::Other,
        // An active pull request updated: a vote, a reviewer, a push, or a reactivation.
        _ => Change::Reviewed,
    };
    Ok(Event::Pull(PullEvent {
        repository: format!("{}/{}", pull.repository.project.name, pull.repository.name),
        repository_id: None,
        number: pull.pull_request_id,
        head: pull
            .source_ref_name
            .strip_prefix("refs/heads/")
            .unwrap_or(&pull.source_ref_name)
            .to_string(),
        change,
    }))
}

#[cfg(test)]
pub(super) fn samples() -> Vec<super::tests::Sample> {
    use super::tests::pull;
    // Shaped as the "Pull request merge attempted" and "Pull request updated" sample payloads
    // of Azure DevOps' "Service hooks events" page.
    vec![
        (
            "",
            r#"{"subscriptionId":"00000000-0000-0000-0000-000000000000","notificationId":1,"eventType":"git.pullrequest.merged","publisherId":"tfs","resource":{"repository":{"id":"4bc14d40-c903-45e2-872e-0462c7748079","name":"Fabrikam","project":{"id":"6ce954b1-ce1f-45d1-b94d-e6bf2464ba2c","name":"Fabrikam"}},"pullRequestId":1,"status":"completed","createdBy":{"displayName":"Jamal Hartnett"},"title":"my first pull request","sourceRefName":"refs/heads/sluice/shop/web/promote","targetRefName":"refs/heads/main","mergeStatus":"succeeded"}}"#,
            pull(
                "Fabrikam/Fabrikam",
                1,
                "sluice/shop/web/promote",
                Change::Merged,
            ),
        ),
        (
            "",
            r#"{"eventType":"git.pullrequest.updated","resource":{"repository":{"name":"fleet","project":{"name":"ops"}},"pullRequestId":9,"status":"abandoned","sourceRefName":"refs/heads/sluice/shop/web/1"}}"#,
            pull("ops/fleet", 9, "sluice/shop/web/1", Change::Closed),
        ),
        (
            "",
            r#"{"eventType":"git.pullrequest.updated","message":{"text":"Jamal Hartnett approved pull request 9"},"resource":{"repository":{"name":"fleet","project":{"name":"ops"}},"pullRequestId":9,"status":"active","sourceRefName":"refs/heads/sluice/shop/web/1"}}"#,
            pull("ops/fleet", 9, "sluice/shop/web/1", Change::Reviewed),
        ),
        (
            "",
            r#"{"eventType":"git.pullrequest.created","resource":{"repository":{"name":"fleet","project":{"name":"ops"}},"pullRequestId":9,"status":"active","sourceRefName":"refs/heads/sluice/shop/web/1"}}"#,
            pull("ops/fleet", 9, "sluice/shop/web/1", Change::Other),
        ),
        ("", r#"{"eventType":"git.push","resource":{}}"#, Event::Push),
        (
            "",
            r#"{"eventType":"workitem.created","resource":{}}"#,
            Event::Ignored,
        ),
    ]
}
