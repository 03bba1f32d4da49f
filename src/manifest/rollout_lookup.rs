//! Finds the objects an Argo Rollout names (its Services, routes, workloadRef) among the
//! repo's YAML files, and reports the fields a Rollout reader refuses or ignores. Shared by the
//! canary and blue/green readers (`rollout`, `rollout_blue_green`); decides nothing.

use crate::manifest::model::Name;
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{join, name_at, Reader};
use crate::yaml::snapshot::{Object, Snapshot};

/// Finds the objects a Rollout names in the repo, in its namespace, leaving out its own
/// output folder (where sluice's copies of its Services and route are).
#[derive(Clone, Copy)]
pub struct Lookup<'a> {
    pub(crate) snapshot: &'a Snapshot,
    pub(crate) namespace: &'a str,
    pub(crate) output: Option<&'a str>,
}

impl<'a> Lookup<'a> {
    pub(crate) fn find(&self, kind: &str, name: &str) -> Vec<Object<'a>> {
        self.snapshot
            .find(kind, name)
            .filter(|o| o.namespace.unwrap_or(self.namespace) == self.namespace)
            .filter(|o| !self.output.is_some_and(|out| in_folder(o.file, out)))
            .collect()
    }
}

/// Whether `file` (repo-relative, or as `sluice validate` walked it) is inside `folder`.
fn in_folder(file: &str, folder: &str) -> bool {
    let file = file.strip_prefix("./").unwrap_or(file);
    crate::manifest::applied_by::under(file, folder) || file.contains(&format!("/{folder}/"))
}

/// Reports each of `refused` present in `node` (at `path`) as an error and each of `ignored`
/// as a warning, with its reason.
pub(crate) fn refuse_and_ignore(
    r: &mut Reader,
    node: &Node,
    path: &str,
    refused: &[(&str, &str)],
    ignored: &[(&str, &str)],
) {
    for (key, why) in refused {
        if let Some(line) = node.key_line(key) {
            r.error(line, &join(path, key), *why);
        }
    }
    for (key, why) in ignored {
        if let Some(line) = node.key_line(key) {
            r.warn(line, &join(path, key), *why);
        }
    }
}

/// The Service a Rollout names at `n` (path `at`): one Service of the repo, and its first
/// port (80 when it names none).
pub(crate) fn named_service(
    r: &mut Reader,
    n: &Node,
    at: &str,
    lookup: Lookup,
) -> Option<(Name, u16)> {
    let namespace = lookup.namespace;
    let name = name_at(r, n, at)?;
    let services = lookup.find("Service", name.as_str());
    match services.as_slice() {
        [one] => {
            let port = one
                .node
                .get("spec")
                .and_then(|s| s.get("ports"))
                .and_then(|p| match &p.value {
                    Value::Seq(items) => items.first(),
                    _ => None,
                })
                .and_then(|p| p.get("port"))
                .and_then(Node::as_str)
                .and_then(|p| p.parse::<u16>().ok())
                .unwrap_or(80);
            Some((name, port))
        }
        [] => {
            r.error(
                n.line,
                at,
                format!("Service {namespace}/{name} not found among the repo's YAML files; sluice copies it to the output with the selector that picks its workload"),
            );
            None
        }
        [_, second, ..] => {
            r.error(
                n.line,
                at,
                format!(
                    "Service {namespace}/{name} is defined twice (also at {}:{})",
                    second.file, second.line
                ),
            );
            None
        }
    }
}
