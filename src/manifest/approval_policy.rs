//! Approval policies as written: `approval: {required, from, forbidSelfApproval, merge}` in
//! the repo settings (the default), a native canary's `spec.approval` and a wave's `approval`,
//! and the `sluice.dev/approval-*` annotations of a Flagger canary. Each is read into the
//! core's [`ApprovalPolicy`]; every problem is reported with its line and field.

use crate::core::approval::{ApprovalPolicy, Approver, MergeBy};
use crate::yaml::node::Node;
use crate::yaml::reader::{index, join, Reader};

/// The keys of an `approval` block.
pub const KEYS: &[&str] = &["required", "from", "forbidSelfApproval", "merge"];

/// The largest `required` accepted.
const MAX_REQUIRED: i64 = 100;

/// The annotations of a Flagger canary's policy (annotations are strings).
pub const REQUIRED_ANNOTATION: &str = "sluice.dev/approval-required";
pub const FROM_ANNOTATION: &str = "sluice.dev/approval-from";
pub const FORBID_SELF_ANNOTATION: &str = "sluice.dev/approval-forbid-self";
pub const MERGE_ANNOTATION: &str = "sluice.dev/approval-merge";
const ANNOTATIONS: [&str; 4] = [
    REQUIRED_ANNOTATION,
    FROM_ANNOTATION,
    FORBID_SELF_ANNOTATION,
    MERGE_ANNOTATION,
];

/// An `approval` mapping at `path`.
pub fn read(r: &mut Reader, n: &Node, path: &str) -> Option<ApprovalPolicy> {
    let before = r.errors.len();
    r.map(n, path, KEYS)?;
    let required = n
        .get("required")
        .map(|v| r.int(v, &join(path, "required"), 1, MAX_REQUIRED));
    let from = n.get("from").map(|v| read_from(r, v, &join(path, "from")));
    let forbid = n
        .get("forbidSelfApproval")
        .and_then(|v| r.bool(v, &join(path, "forbidSelfApproval")));
    let merge = n
        .get("merge")
        .and_then(|v| r.one_of(v, &join(path, "merge"), &MergeBy::ALL));
    if r.errors.len() > before {
        return None;
    }
    let policy = ApprovalPolicy {
        required: required
            .flatten()
            .map_or(1, |v| u32::try_from(v).unwrap_or(1)),
        from: from.unwrap_or_default(),
        forbid_self_approval: forbid.unwrap_or(false),
        merge: merge.unwrap_or_default(),
    };
    let line = n.get("required").map_or(n.line, |v| v.line);
    reachable(r, &policy, line, &join(path, "required"))
}

/// `from`: logins and `team:<team>` entries.
fn read_from(r: &mut Reader, n: &Node, path: &str) -> Vec<Approver> {
    let mut out = Vec::new();
    let Some(items) = r.seq(n, path) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let at = index(path, i);
        let Some(text) = r.string(item, &at) else {
            continue;
        };
        match Approver::parse(&text) {
            Ok(a) => out.push(a),
            Err(e) => r.error(item.line, &at, e),
        }
    }
    out
}

/// A policy no set of approvers can meet (more required than `from` lists, with no team to
/// grow it) is refused where it is written.
fn reachable(
    r: &mut Reader,
    policy: &ApprovalPolicy,
    line: usize,
    path: &str,
) -> Option<ApprovalPolicy> {
    let logins = policy.from.len();
    let teams = policy.teams().count();
    let needed = usize::try_from(policy.required).unwrap_or(usize::MAX);
    if teams == 0 && logins > 0 && needed > logins {
        r.error(
            line,
            path,
            format!(
                "expected at most {logins} (from lists {logins} login{}), found {}: no set of approvers could meet it",
                if logins == 1 { "" } else { "s" },
                policy.required
            ),
        );
        return None;
    }
    Some(policy.clone())
}

/// A Flagger canary's `sluice.dev/approval-*` annotations; `Some(None)` without any,
/// `None` when one is wrong (reported).
pub fn read_annotations(r: &mut Reader, root: &Node) -> Option<Option<ApprovalPolicy>> {
    let Some(annotations) = root.get("metadata").and_then(|m| m.get("annotations")) else {
        return Some(None);
    };
    if ANNOTATIONS.iter().all(|a| annotations.get(a).is_none()) {
        return Some(None);
    }
    let before = r.errors.len();
    let path = |a: &str| format!("metadata.annotations.{a}");
    let text = |r: &mut Reader, a: &str| {
        annotations
            .get(a)
            .and_then(|v| Some((v.line, r.string(v, &path(a))?.trim().to_string())))
    };
    let mut policy = ApprovalPolicy::merged_by_one_of(&[]);
    if let Some((line, v)) = text(r, REQUIRED_ANNOTATION) {
        match v.parse::<u32>() {
            Ok(n) if (1..=100).contains(&n) => policy.required = n,
            _ => r.error(
                line,
                &path(REQUIRED_ANNOTATION),
                format!("expected an integer in 1..={MAX_REQUIRED}, found {v:?}"),
            ),
        }
    }
    if let Some((line, v)) = text(r, FROM_ANNOTATION) {
        for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match Approver::parse(entry) {
                Ok(a) => policy.from.push(a),
                Err(e) => r.error(
                    line,
                    &path(FROM_ANNOTATION),
                    format!("{e} (entries are separated by commas)"),
                ),
            }
        }
    }
    if let Some((line, v)) = text(r, FORBID_SELF_ANNOTATION) {
        match v.as_str() {
            "true" => policy.forbid_self_approval = true,
            "false" => policy.forbid_self_approval = false,
            _ => r.error(
                line,
                &path(FORBID_SELF_ANNOTATION),
                format!("expected \"true\" or \"false\", found {v:?}"),
            ),
        }
    }
    if let Some((line, v)) = text(r, MERGE_ANNOTATION) {
        match MergeBy::ALL.iter().find(|(name, _)| *name == v) {
            Some((_, merge)) => policy.merge = *merge,
            None => r.error(
                line,
                &path(MERGE_ANNOTATION),
                format!("expected human or sluice, found {v:?}"),
            ),
        }
    }
    if r.errors.len() > before {
        return None;
    }
    let line = annotations
        .get(REQUIRED_ANNOTATION)
        .map_or(annotations.line, |v| v.line);
    reachable(r, &policy, line, &path(REQUIRED_ANNOTATION)).map(Some)
}
