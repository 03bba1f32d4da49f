//! GitHub and GitHub Enterprise: `X-GitHub-Event: pull_request` / `pull_request_review`,
//! signed with `X-Hub-Signature-256: sha256=<hex HMAC-SHA256>`.

use super::{json, Change, Event, GithubLikePayload};

pub(super) fn parse(event: &str, body: &[u8]) -> Result<Event, String> {
    match event {
        "ping" => Ok(Event::Ping),
        "push" => Ok(Event::Push),
        "pull_request" => {
            let payload: GithubLikePayload = json(body)?;
            let change = payload.pull_request_change();
            Ok(payload.into_event(change))
        }
        // `submitted`, `edited`, `dismissed`: each may change what the reviews add up to.
        "pull_request_review" => Ok(json::<GithubLikePayload>(body)?.into_event(Change::Reviewed)),
        _ => Ok(Event::Ignored),
    }
}

#[cfg(test)]
pub(super) fn samples() -> Vec<super::tests::Sample> {
    use super::tests::pull;
    // Shaped as the `pull_request` and `pull_request_review` examples of GitHub's "Webhook
    // events and payloads" page, cut to the fields sluice reads and a few around them.
    vec![
        (
            "pull_request",
            r#"{"action":"closed","number":2,"pull_request":{"url":"https://api.github.com/repos/Codertocat/Hello/pulls/2","number":2,"state":"closed","merged":true,"merged_at":"2019-05-15T15:20:40Z","head":{"label":"Codertocat:sluice/shop/web/promote","ref":"sluice/shop/web/promote","sha":"ec26c3e57ca3a959ca5aad62de7213c562f8c821"},"base":{"ref":"main"}},"repository":{"id":186853002,"full_name":"Codertocat/Hello"},"sender":{"login":"Codertocat"}}"#,
            pull(
                "Codertocat/Hello",
                2,
                "sluice/shop/web/promote",
                Change::Merged,
            ),
        ),
        (
            "pull_request",
            r#"{"action":"closed","number":3,"pull_request":{"number":3,"state":"closed","merged":false,"head":{"ref":"sluice/shop/web/2"}},"repository":{"full_name":"acme/fleet"}}"#,
            pull("acme/fleet", 3, "sluice/shop/web/2", Change::Closed),
        ),
        (
            "pull_request",
            r#"{"action":"opened","number":4,"pull_request":{"number":4,"head":{"ref":"sluice/shop/web/2"}},"repository":{"full_name":"acme/fleet"}}"#,
            pull("acme/fleet", 4, "sluice/shop/web/2", Change::Other),
        ),
        (
            "pull_request_review",
            r#"{"action":"submitted","review":{"id":237895671,"user":{"login":"Codertocat"},"state":"approved"},"pull_request":{"number":2,"head":{"ref":"sluice/shop/web/promote"}},"repository":{"full_name":"Codertocat/Hello"}}"#,
            pull(
                "Codertocat/Hello",
                2,
                "sluice/shop/web/promote",
                Change::Reviewed,
            ),
        ),
        (
            "ping",
            r#"{"zen":"Keep it logically awesome.","hook_id":1}"#,
            Event::Ping,
        ),
        ("push", r#"{"ref":"refs/heads/main"}"#, Event::Push),
        ("issues", r#"{"action":"opened"}"#, Event::Ignored),
    ]
}
