//! Reads a `sync` block (repo default in `.sluice/config.yaml`, or a native canary's
//! `spec.sync`) into a [`SyncTarget`]:
//!
//! ```yaml
//! sync: {flux: {kustomization: podinfo, namespace: flux-system}}
//! sync: {argocd: {application: podinfo, namespace: argocd}}
//! ```
//!
//! Exactly one engine; names are DNS-1123; `namespace` defaults to the engine's install
//! namespace. Pure: no IO, every problem reported through the [`Reader`].

use crate::manifest::model::{Name, SyncTarget};
use crate::yaml::node::Node;
use crate::yaml::reader::{join, name_at, namespace_at, Reader};

const ENGINES: &[&str] = &["flux", "argocd"];

/// Reads the block at `node`; `path` is its dotted field path (`sync` or `spec.sync`).
pub fn read_sync_target(r: &mut Reader, node: &Node, path: &str) -> Option<SyncTarget> {
    r.map(node, path, ENGINES)?;
    match (node.get("flux"), node.get("argocd")) {
        (Some(flux), None) => {
            let p = join(path, "flux");
            let (name, namespace) = read_object(
                r,
                flux,
                &p,
                "kustomization",
                SyncTarget::FLUX_DEFAULT_NAMESPACE,
            )?;
            Some(SyncTarget::Flux {
                kustomization: name,
                namespace,
            })
        }
        (None, Some(argo)) => {
            let p = join(path, "argocd");
            let (name, namespace) = read_object(
                r,
                argo,
                &p,
                "application",
                SyncTarget::ARGOCD_DEFAULT_NAMESPACE,
            )?;
            Some(SyncTarget::ArgoCd {
                application: name,
                namespace,
            })
        }
        (Some(flux), Some(argo)) => {
            // Point at whichever engine was written second.
            let (line, key) = if argo.line >= flux.line {
                (argo.line, "argocd")
            } else {
                (flux.line, "flux")
            };
            r.error(
                line,
                &join(path, key),
                "expected one engine (flux or argocd), found both",
            );
            None
        }
        (None, None) => {
            r.error(
                node.line,
                path,
                "expected `flux: {kustomization: NAME, namespace: NS}` or `argocd: {application: NAME, namespace: NS}`, found neither",
            );
            None
        }
    }
}

fn read_object(
    r: &mut Reader,
    node: &Node,
    path: &str,
    name_key: &str,
    default_namespace: &str,
) -> Option<(Name, Name)> {
    r.map(node, path, &[name_key, "namespace"])?;
    let name = r
        .required(node, path, name_key)
        .and_then(|n| name_at(r, n, &join(path, name_key)));
    let namespace = match node.get("namespace") {
        Some(n) => namespace_at(r, n, &join(path, "namespace")),
        None => Name::parse(default_namespace).ok(),
    };
    Some((name?, namespace?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::node::parse_documents;

    fn read(text: &str) -> (Option<SyncTarget>, Vec<String>) {
        let docs = parse_documents(text).unwrap();
        let mut r = Reader::new("f.yaml");
        let node = docs[0].root.get("sync").unwrap();
        let out = read_sync_target(&mut r, node, "sync");
        (out, r.errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn flux_and_argocd_with_and_without_namespace() {
        let (t, e) = read("sync: {flux: {kustomization: podinfo, namespace: clusters}}\n");
        assert!(e.is_empty(), "{e:?}");
        let t = t.unwrap();
        assert_eq!(t.kind(), "Kustomization");
        assert_eq!(t.to_string(), "Kustomization clusters/podinfo");

        let (t, e) = read("sync:\n  argocd:\n    application: podinfo\n");
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(t.unwrap().to_string(), "Application argocd/podinfo");

        let (t, _) = read("sync: {flux: {kustomization: apps}}\n");
        assert_eq!(t.unwrap().namespace().as_str(), "flux-system");
    }

    #[test]
    fn problems_name_line_and_field() {
        let (t, e) = read("sync:\n  flux: {kustomization: podinfo}\n  argocd: {application: x}\n");
        assert!(t.is_none());
        assert_eq!(
            e,
            ["f.yaml:3: sync.argocd: expected one engine (flux or argocd), found both"]
        );

        let (_, e) = read("sync:\n  flux:\n    namespace: flux-system\n");
        assert_eq!(
            e,
            ["f.yaml:2: sync.flux.kustomization: required field is missing"]
        );

        let (_, e) = read("sync:\n  argocd:\n    application: Pod_Info\n");
        assert_eq!(e.len(), 1);
        assert!(
            e[0].starts_with("f.yaml:3: sync.argocd.application: expected a DNS-1123 name"),
            "{e:?}"
        );

        let (_, e) = read("sync:\n  fluxcd: {kustomization: a}\n");
        assert!(
            e[0].starts_with("f.yaml:2: sync.fluxcd: unknown field (did you mean \"flux\"?)"),
            "{e:?}"
        );

        let (_, e) = read("sync: {argocd: {app: a}}\n");
        assert!(
            e.iter()
                .any(|l| l.contains("sync.argocd.app: unknown field")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|l| l.contains("sync.argocd.application: required")),
            "{e:?}"
        );

        let (_, e) = read("sync: flux\n");
        assert_eq!(e, ["f.yaml:1: sync: expected a mapping, found \"flux\""]);
    }
}
