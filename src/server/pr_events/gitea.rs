//! Gitea: `X-Gitea-Event: pull_request` (and `pull_request_approved`, `_rejected`, `_comment`
//! for reviews), signed with `X-Gitea-Signature: <hex HMAC-SHA256>`. The payload is shaped as
//! GitHub's. Forgejo sends the same with its own header names (`forgejo.rs`).

use super::{json, Change, Event, GithubLikePayload};

/// Reads a Gitea or Forgejo event (`event`: the value of `X-Gitea-Event` or `X-Forgejo-Event`).
pub(super) fn parse(event: &str, body: &[u8]) -> Result<Event, String> {
    match event {
        "push" => Ok(Event::Push),
        "pull_request" => {
            let payload: GithubLikePayload = json(body)?;
            let change = payload.pull_request_change();
            Ok(payload.into_event(change))
        }
        // The review events' header values (Gitea 1.x; `pull_request_review_*` is the
        // type's name in the settings and in `X-Gitea-Event-Type`).
        "pull_request_approved"
        | "pull_request_rejected"
        | "pull_request_comment"
        | "pull_request_review_approved"
        | "pull_request_review_rejected"
        | "pull_request_review_comment" => {
            Ok(json::<GithubLikePayload>(body)?.into_event(Change::Reviewed))
        }
        _ => Ok(Event::Ignored),
    }
}

#[cfg(test)]
pub(super) fn samples() -> Vec<super::tests::Sample> {
    shared_samples()
}

/// The samples Gitea and Forgejo share (the same payloads under each one's header).
#[cfg(test)]
pub(super) fn shared_samples() -> Vec<super::tests::Sample> {
    use super::tests::pull;
    // Shaped as Gitea's `PullRequestPayload` (modules/structs/hook.go): action, number,
    // pull_request, repository, sender, review.
    vec![
        (
            "pull_request",
            r#"{"action":"closed","number":12,"pull_request":{"id":12,"number":12,"state":"closed","merged":true,"merged_by":{"login":"user1"},"head":{"label":"sluice/shop/web/promote","ref":"sluice/shop/web/promote","sha":"2020558fe2e34debb818a514715839cabd25e778"},"base":{"ref":"main"}},"repository":{"id":1,"name":"repo","full_name":"test/repo"},"sender":{"login":"user1"}}"#,
            pull("test/repo", 12, "sluice/shop/web/promote", Change::Merged),
        ),
        (
            "pull_request",
            r#"{"action":"reopened","number":12,"pull_request":{"number":12,"merged":false,"head":{"ref":"sluice/shop/web/1"}},"repository":{"full_name":"test/repo"}}"#,
            pull("test/repo", 12, "sluice/shop/web/1", Change::Reopened),
        ),
        (
            "pull_request_approved",
            r#"{"action":"reviewed","number":12,"pull_request":{"number":12,"head":{"ref":"sluice/shop/web/1"}},"repository":{"full_name":"test/repo"},"review":{"type":"pull_request_review_approved","content":"good job"}}"#,
            pull("test/repo", 12, "sluice/shop/web/1", Change::Reviewed),
        ),
        ("issues", r#"{"action":"opened"}"#, Event::Ignored),
    ]
}
