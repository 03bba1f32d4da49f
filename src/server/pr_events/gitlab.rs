//! GitLab (SaaS and self-managed): `X-Gitlab-Event: Merge Request Hook` and `Note Hook`
//! (comments on a merge request), authenticated by `X-Gitlab-Token: <secret>`.

use serde::Deserialize;

use super::{json, Change, Event, PullEvent};

#[derive(Deserialize)]
struct Project {
    /// The numeric id `forge.repository` may give instead of the path.
    #[serde(default)]
    id: Option<u64>,
    path_with_namespace: String,
}

/// `{object_kind: "merge_request", project, object_attributes: {iid, action, source_branch}}`.
#[derive(Deserialize)]
struct MergeRequestHook {
    project: Project,
    object_attributes: MergeRequest,
}

#[derive(Deserialize)]
struct MergeRequest {
    iid: u64,
    source_branch: String,
    #[serde(default)]
    action: String,
}

/// `{object_kind: "note", project, object_attributes: {noteable_type}, merge_request}`.
#[derive(Deserialize)]
struct NoteHook {
    project: Project,
    object_attributes: Note,
    merge_request: Option<MergeRequest>,
}

#[derive(Deserialize)]
struct Note {
    noteable_type: String,
}

fn event(project: Project, mr: MergeRequest, change: Change) -> Event {
    Event::Pull(PullEvent {
        repository: project.path_with_namespace,
        repository_id: project.id,
        number: mr.iid,
        head: mr.source_branch,
        change,
    })
}

pub(super) fn parse(event_name: &str, body: &[u8]) -> Result<Event, String> {
    match event_name {
        "Push Hook" => Ok(Event::Push),
        "Merge Request Hook" => {
            let hook: MergeRequestHook = json(body)?;
            let change = match hook.object_attributes.action.as_str() {
                "merge" => Change::Merged,
                "close" => Change::Closed,
                "reopen" => Change::Reopened,
                "approved" | "unapproved" | "approval" | "unapproval" => Change::Reviewed,
                _ => Change::Other,
            };
            Ok(event(hook.project, hook.object_attributes, change))
        }
        "Note Hook" => {
            let hook: NoteHook = json(body)?;
            match (
                hook.object_attributes.noteable_type.as_str(),
                hook.merge_request,
            ) {
                ("MergeRequest", Some(mr)) => Ok(event(hook.project, mr, Change::Reviewed)),
                ("MergeRequest", None) => Err("a merge request note without merge_request".into()),
                _ => Ok(Event::Ignored),
            }
        }
        _ => Ok(Event::Ignored),
    }
}

/// `event` with GitLab's project id.
#[cfg(test)]
fn with_id(mut event: Event, id: u64) -> Event {
    if let Event::Pull(pull) = &mut event {
        pull.repository_id = Some(id);
    }
    event
}

#[cfg(test)]
pub(super) fn samples() -> Vec<super::tests::Sample> {
    use super::tests::pull;
    // Shaped as the merge request and comment examples of GitLab's "Webhook events" page.
    vec![
        (
            "Merge Request Hook",
            r#"{"object_kind":"merge_request","event_type":"merge_request","user":{"username":"root"},"project":{"id":1,"path_with_namespace":"gitlabhq/gitlab-test"},"object_attributes":{"id":99,"iid":1,"target_branch":"main","source_branch":"sluice/shop/web/promote","state":"merged","action":"merge"}}"#,
            with_id(
                pull(
                    "gitlabhq/gitlab-test",
                    1,
                    "sluice/shop/web/promote",
                    Change::Merged,
                ),
                1,
            ),
        ),
        (
            "Merge Request Hook",
            r#"{"object_kind":"merge_request","project":{"path_with_namespace":"group/sub/fleet"},"object_attributes":{"iid":7,"source_branch":"sluice/shop/web/2","state":"closed","action":"close"}}"#,
            pull("group/sub/fleet", 7, "sluice/shop/web/2", Change::Closed),
        ),
        (
            "Merge Request Hook",
            r#"{"object_kind":"merge_request","project":{"path_with_namespace":"a/b"},"object_attributes":{"iid":7,"source_branch":"sluice/shop/web/2","action":"approved"}}"#,
            pull("a/b", 7, "sluice/shop/web/2", Change::Reviewed),
        ),
        (
            "Merge Request Hook",
            r#"{"object_kind":"merge_request","project":{"path_with_namespace":"a/b"},"object_attributes":{"iid":7,"source_branch":"sluice/shop/web/2","action":"update"}}"#,
            pull("a/b", 7, "sluice/shop/web/2", Change::Other),
        ),
        (
            "Note Hook",
            r#"{"object_kind":"note","project":{"path_with_namespace":"gitlab-org/gitlab-test"},"object_attributes":{"id":1244,"note":"This MR needs work.","noteable_type":"MergeRequest"},"merge_request":{"id":7,"iid":1,"source_branch":"sluice/shop/web/promote","target_branch":"main","state":"opened"}}"#,
            pull(
                "gitlab-org/gitlab-test",
                1,
                "sluice/shop/web/promote",
                Change::Reviewed,
            ),
        ),
        (
            "Note Hook",
            r#"{"object_kind":"note","project":{"path_with_namespace":"a/b"},"object_attributes":{"noteable_type":"Issue"},"issue":{"iid":3}}"#,
            Event::Ignored,
        ),
        ("Push Hook", r#"{"object_kind":"push"}"#, Event::Push),
    ]
}
