//! Bitbucket Cloud: `X-Event-Key: pullrequest:fulfilled` (merged), `pullrequest:rejected`
//! (declined), `pullrequest:approved` and the other review keys, signed with
//! `X-Hub-Signature: sha256=<hex HMAC-SHA256>` (Bitbucket's header has GitHub's old name but
//! SHA-256).

use serde::Deserialize;

use super::{json, Change, Event, FullName, PullEvent};

/// `{pullrequest: {id, source: {branch: {name}}}, repository: {full_name}}`.
#[derive(Deserialize)]
struct Payload {
    pullrequest: PullRequest,
    repository: FullName,
}

#[derive(Deserialize)]
struct PullRequest {
    id: u64,
    source: Source,
}

#[derive(Deserialize)]
struct Source {
    branch: Branch,
}

#[derive(Deserialize)]
struct Branch {
    name: String,
}

pub(super) fn parse(event: &str, body: &[u8]) -> Result<Event, String> {
    let change = match event {
        "repo:push" => return Ok(Event::Push),
        "pullrequest:fulfilled" => Change::Merged,
        "pullrequest:rejected" => Change::Closed,
        "pullrequest:approved"
        | "pullrequest:unapproved"
        | "pullrequest:changes_request_created"
        | "pullrequest:changes_request_removed"
        | "pullrequest:comment_created" => Change::Reviewed,
        key if key.starts_with("pullrequest:") => Change::Other,
        _ => return Ok(Event::Ignored),
    };
    let payload: Payload = json(body)?;
    Ok(Event::Pull(PullEvent {
        repository: payload.repository.full_name,
        repository_id: None,
        number: payload.pullrequest.id,
        head: payload.pullrequest.source.branch.name,
        change,
    }))
}

#[cfg(test)]
pub(super) fn samples() -> Vec<super::tests::Sample> {
    use super::tests::pull;
    // Shaped as Bitbucket Cloud's "Event payloads" page: the Pull Request entity under
    // `pullrequest`, the Repository entity under `repository`.
    let merged = r#"{"actor":{"display_name":"Alice"},"pullrequest":{"id":5,"title":"web: promote","state":"MERGED","source":{"branch":{"name":"sluice/shop/web/promote"},"commit":{"hash":"d3c2f8a"}},"destination":{"branch":{"name":"main"}}},"repository":{"type":"repository","full_name":"acme/fleet","uuid":"{1}"}}"#;
    vec![
        (
            "pullrequest:fulfilled",
            merged,
            pull("acme/fleet", 5, "sluice/shop/web/promote", Change::Merged),
        ),
        (
            "pullrequest:rejected",
            r#"{"pullrequest":{"id":6,"state":"DECLINED","source":{"branch":{"name":"sluice/shop/web/1"}}},"repository":{"full_name":"acme/fleet"}}"#,
            pull("acme/fleet", 6, "sluice/shop/web/1", Change::Closed),
        ),
        (
            "pullrequest:approved",
            r#"{"approval":{"user":{"display_name":"Bob"}},"pullrequest":{"id":6,"source":{"branch":{"name":"sluice/shop/web/1"}}},"repository":{"full_name":"acme/fleet"}}"#,
            pull("acme/fleet", 6, "sluice/shop/web/1", Change::Reviewed),
        ),
        (
            "pullrequest:created",
            r#"{"pullrequest":{"id":6,"source":{"branch":{"name":"sluice/shop/web/1"}}},"repository":{"full_name":"acme/fleet"}}"#,
            pull("acme/fleet", 6, "sluice/shop/web/1", Change::Other),
        ),
        ("repo:push", r#"{"push":{"changes":[]}}"#, Event::Push),
        ("issue:created", r#"{}"#, Event::Ignored),
    ]
}
