//! Which Flux Kustomization or Argo CD Application in the repo applies which repo file: the
//! layout knowledge `sluice validate` checks (a canary's sources applied by none, each output
//! folder by exactly one) and `sluice adopt` will rewrite. Pure: a function of the repo's YAML
//! files (the snapshot) and the `.sourceignore` texts the caller read.
//!
//! What each engine applies, as its documentation says:
//!
//! - Flux `kustomize.toolkit.fluxcd.io` `Kustomization` (<https://fluxcd.io/flux/components/kustomize/kustomizations/#path>):
//!   `spec.path` (default the source's root). With a `kustomization.yaml` there, kustomize
//!   builds it: its `resources` (and legacy `bases`), files and folders, followed recursively.
//!   Without one, kustomize-controller generates one holding every Kubernetes manifest under
//!   the path, recursively; a subfolder that holds its own `kustomization.yaml` is taken as
//!   one resource (built by its own `resources`). Files the source excludes are never seen:
//!   `.sourceignore` files (gitignore format, at the root or in any folder) and the
//!   GitRepository's `spec.ignore` (<https://fluxcd.io/flux/components/source/gitrepositories/#excluding-files>).
//! - Argo CD `argoproj.io` `Application` (<https://argo-cd.readthedocs.io/en/stable/user-guide/directory/>):
//!   each `spec.source` / `spec.sources[]` with a `path` (one with `chart` is a Helm chart and
//!   applies no repo file here). A `kustomization.yaml` at the path makes it a Kustomize
//!   source (as above). Otherwise a directory source: the `.yaml`, `.yml` and `.json` files of
//!   the path itself, of every subfolder with `directory.recurse: true`, kept by the glob
//!   `directory.include` and dropped by `directory.exclude` (matched against the path relative
//!   to the source's path, `{a,b}` alternatives allowed).
//!
//! Remote kustomize resources (URLs) apply no repo file. `ApplicationSet`s are not read
//! (their generated paths depend on generators): the docs say so.

use std::collections::{BTreeMap, BTreeSet};

use crate::yaml::node::{Node, Value};
use crate::yaml::snapshot::Snapshot;

/// The file names kustomize reads as a folder's kustomization.
const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// How deep kustomization `resources` are followed (a cycle stops here).
const MAX_DEPTH: usize = 32;

/// A Flux Kustomization or an Argo CD Application of the repo, and what it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applier {
    /// `Kustomization` or `Application`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    /// Where it is: the file, and the line of its `path` (of the document when unset).
    pub file: String,
    pub line: usize,
    /// The field `line` is on, for messages (`spec.path`, `spec.source.path`, ...).
    pub field: String,
    /// The repo's YAML files it applies (repo-relative).
    files: BTreeSet<String>,
    /// Folders whose files it applies whatever they will hold (`true`: with subfolders), so an
    /// output folder sluice has not written yet is known as applied.
    folders: Vec<(String, bool)>,
    /// `.sourceignore`/`spec.ignore` rules its source drops files by (Flux).
    ignore: Vec<Rule>,
}

impl Applier {
    /// `Kustomization flux-system/apps` as messages name it.
    pub fn title(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }

    /// Whether it applies the repo file `path` (repo-relative).
    pub fn applies_file(&self, path: &str) -> bool {
        self.files.contains(path)
    }

    /// Whether it applies what sluice writes into `folder` (an output folder: its
    /// `kustomization.yaml` and the manifests it lists).
    pub fn applies_folder(&self, folder: &str) -> bool {
        let folder = folder.trim_end_matches('/');
        let marker = format!("{folder}/kustomization.yaml");
        if ignored(&self.ignore, &marker) {
            return false;
        }
        self.folders
            .iter()
            .any(|(root, recursive)| root == folder || (*recursive && under(folder, root)))
    }
}

/// Every Flux Kustomization and Argo CD Application in `snapshot` (named repo-relative), with
/// what each applies. `sourceignore` holds each `.sourceignore` by the folder it is in (`""`
/// for the root).
pub fn appliers(snapshot: &Snapshot, sourceignore: &BTreeMap<String, String>) -> Vec<Applier> {
    let names: BTreeSet<String> = snapshot.files().iter().map(|f| f.name.clone()).collect();
    let repo = Repo {
        snapshot,
        names: &names,
    };
    let mut out = Vec::new();
    for o in snapshot.objects() {
        let api = o.api_version.unwrap_or_default();
        let namespace = o.namespace.unwrap_or("default").to_string();
        let spec = o.node.get("spec");
        if o.kind == "Kustomization" && api.starts_with("kustomize.toolkit.fluxcd.io/") {
            let path_node = spec.and_then(|s| s.get("path"));
            let path = path_node.and_then(Node::as_str).unwrap_or("./");
            let mut ignore = Vec::new();
            for (folder, text) in sourceignore {
                ignore.extend(parse_ignore(text, folder));
            }
            if let Some(text) = git_repository_ignore(snapshot, spec, &namespace) {
                ignore.extend(parse_ignore(&text, ""));
            }
            let mut a = Applier {
                kind: "Kustomization",
                namespace,
                name: o.name.to_string(),
                file: o.file.to_string(),
                line: path_node.map_or(o.line, |n| n.line),
                field: "spec.path".into(),
                files: BTreeSet::new(),
                folders: Vec::new(),
                ignore,
            };
            let root = normalize("", path).unwrap_or_default();
            repo.flux_tree(&mut a, &root);
            a.files.retain(|f| !ignored(&a.ignore, f));
            out.push(a);
        } else if o.kind == "Application" && api.starts_with("argoproj.io/") {
            let mut sources: Vec<(&Node, String)> = Vec::new();
            if let Some(s) = spec.and_then(|s| s.get("source")) {
                sources.push((s, "spec.source".into()));
            }
            if let Some(Value::Seq(items)) = spec.and_then(|s| s.get("sources")).map(|n| &n.value) {
                for (i, s) in items.iter().enumerate() {
                    sources.push((s, format!("spec.sources[{i}]")));
                }
            }
            let mut a = Applier {
                kind: "Application",
                namespace: o.namespace.unwrap_or("argocd").to_string(),
                name: o.name.to_string(),
                file: o.file.to_string(),
                line: o.line,
                field: "spec.source.path".into(),
                files: BTreeSet::new(),
                folders: Vec::new(),
                ignore: Vec::new(),
            };
            let mut first = true;
            for (source, field) in sources {
                if source.get("chart").is_some() {
                    continue;
                }
                let Some(path_node) = source.get("path") else {
                    continue;
                };
                if first {
                    a.line = path_node.line;
                    a.field = format!("{field}.path");
                    first = false;
                }
                let Some(root) = path_node.as_str().and_then(|p| normalize("", p)) else {
                    continue;
                };
                let directory = source.get("directory");
                let flag = |key: &str| {
                    directory
                        .and_then(|d| d.get(key))
                        .and_then(Node::as_str)
                        .map(str::to_string)
                };
                repo.argo_source(
                    &mut a,
                    &root,
                    flag("recurse").as_deref() == Some("true"),
                    flag("include"),
                    flag("exclude"),
                );
            }
            out.push(a);
        }
    }
    out
}

/// The repo's files, for following paths.
struct Repo<'s> {
    snapshot: &'s Snapshot,
    names: &'s BTreeSet<String>,
}

impl Repo<'_> {
    /// The kustomization file of `folder`, when it has one.
    fn kustomization(&self, folder: &str) -> Option<String> {
        KUSTOMIZATION_FILES
            .iter()
            .map(|f| join(folder, f))
            .find(|p| self.names.contains(p))
    }

    /// Flux without a kustomization at `root`: every manifest under it, a subfolder with its
    /// own kustomization taken as that kustomization's resources.
    fn flux_tree(&self, a: &mut Applier, root: &str) {
        if self.kustomization(root).is_some() {
            self.kustomize(a, root, 0);
            return;
        }
        a.folders.push((root.to_string(), true));
        for name in self.names.iter().filter(|n| under(n, root)) {
            let folder = parent(name);
            // The nearest folder between root and the file that has its own kustomization.
            let nested = ancestors(folder)
                .take_while(|f| *f != root && under(f, root))
                .any(|f| self.kustomization(f).is_some());
            if !nested && self.is_manifest(name) {
                a.files.insert(name.clone());
            }
        }
        let nested: BTreeSet<String> = self
            .names
            .iter()
            .filter(|n| under(n, root) && KUSTOMIZATION_FILES.iter().any(|k| base(n) == *k))
            .map(|n| parent(n).to_string())
            .filter(|f| f != root)
            .collect();
        for folder in nested {
            // Only the outermost nested kustomization is a resource of the generated one.
            let outer = ancestors(parent(&folder))
                .take_while(|f| *f != root && under(f, root))
                .all(|f| self.kustomization(f).is_none());
            if outer {
                self.kustomize(a, &folder, 0);
            }
        }
    }

    /// kustomize at `folder`: its `resources` and `bases`, files and folders, recursively.
    fn kustomize(&self, a: &mut Applier, folder: &str, depth: usize) {
        a.folders.push((folder.to_string(), false));
        if depth > MAX_DEPTH {
            return;
        }
        let Some(file) = self
            .kustomization(folder)
            .and_then(|k| self.snapshot.file(&k))
        else {
            return;
        };
        let Some(doc) = file.documents().first() else {
            return;
        };
        for key in ["resources", "bases", "components"] {
            let Some(Value::Seq(items)) = doc.get(key).map(|n| &n.value) else {
                continue;
            };
            for item in items {
                let Some(r) = item.as_str() else { continue };
                if r.contains("://") || r.starts_with("github.com/") {
                    continue;
                }
                let Some(path) = normalize(folder, r) else {
                    continue;
                };
                if self.names.contains(&path) {
                    a.files.insert(path);
                } else {
                    // A folder (its own kustomization), or one not written yet: sluice's
                    // output folder before its first render.
                    self.kustomize(a, &path, depth + 1);
                }
            }
        }
    }

    /// An Argo CD source at `root`: Kustomize when it has a kustomization, else a directory.
    fn argo_source(
        &self,
        a: &mut Applier,
        root: &str,
        recurse: bool,
        include: Option<String>,
        exclude: Option<String>,
    ) {
        if self.kustomization(root).is_some() {
            self.kustomize(a, root, 0);
            return;
        }
        if include.is_none() && exclude.is_none() {
            a.folders.push((root.to_string(), recurse));
        }
        for name in self.names.iter().filter(|n| under(n, root)) {
            if !recurse && parent(name) != root {
                continue;
            }
            let rel = name
                .strip_prefix(root)
                .unwrap_or(name)
                .trim_start_matches('/');
            let kept = include.as_deref().is_none_or(|g| glob(g, rel))
                && !exclude.as_deref().is_some_and(|g| glob(g, rel));
            if kept {
                a.files.insert(name.clone());
            }
        }
    }

    /// Whether `name` holds a Kubernetes object (what kustomize's generator keeps).
    fn is_manifest(&self, name: &str) -> bool {
        self.snapshot.file(name).is_some_and(|f| {
            f.documents()
                .iter()
                .any(|d| d.get("apiVersion").is_some() && d.get("kind").is_some())
        })
    }
}

/// `spec.ignore` of the GitRepository a Flux Kustomization's `sourceRef` names.
fn git_repository_ignore(
    snapshot: &Snapshot,
    spec: Option<&Node>,
    namespace: &str,
) -> Option<String> {
    let source = spec?.get("sourceRef")?;
    if source.get("kind").and_then(Node::as_str) != Some("GitRepository") {
        return None;
    }
    let name = source.get("name").and_then(Node::as_str)?;
    let ns = source
        .get("namespace")
        .and_then(Node::as_str)
        .unwrap_or(namespace);
    snapshot
        .find("GitRepository", name)
        .find(|o| o.namespace.unwrap_or("default") == ns)
        .and_then(|o| {
            o.node
                .get("spec")?
                .get("ignore")?
                .as_str()
                .map(str::to_string)
        })
}

/// One gitignore rule, anchored at the folder of the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    folder: String,
    pattern: String,
    negated: bool,
    dir_only: bool,
    anchored: bool,
}

/// The rules of a gitignore-format text found in `folder`.
fn parse_ignore(text: &str, folder: &str) -> Vec<Rule> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (negated, l) = match l.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, l),
            };
            let dir_only = l.ends_with('/');
            let l = l.trim_end_matches('/');
            let anchored = l.contains('/');
            Rule {
                folder: folder.to_string(),
                pattern: l.trim_start_matches('/').to_string(),
                negated,
                dir_only,
                anchored,
            }
        })
        .collect()
}

/// Whether `path` is dropped by `rules` (the last rule that matches it or a folder above it
/// decides, as in gitignore).
fn ignored(rules: &[Rule], path: &str) -> bool {
    let mut out = false;
    for rule in rules {
        if !rule.folder.is_empty() && !under(path, &rule.folder) {
            continue;
        }
        let rel = path
            .strip_prefix(rule.folder.as_str())
            .unwrap_or(path)
            .trim_start_matches('/');
        // The path itself and each folder above it.
        let parts: Vec<&str> = rel.split('/').collect();
        let hit = (1..=parts.len()).any(|n| {
            let is_dir = n < parts.len();
            if rule.dir_only && !is_dir {
                return false;
            }
            if rule.anchored {
                glob(&rule.pattern, &parts[..n].join("/"))
            } else {
                glob(&rule.pattern, parts[n - 1])
            }
        });
        if hit {
            out = !rule.negated;
        }
    }
    out
}

/// A glob: `*` (no `/`), `**` (anything), `?`, `{a,b}` alternatives.
pub fn glob(pattern: &str, text: &str) -> bool {
    if let Some(open) = pattern.find('{') {
        if let Some(close) = pattern[open..].find('}').map(|c| open + c) {
            let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
            return pattern[open + 1..close]
                .split(',')
                .any(|alt| glob(&format!("{head}{alt}{tail}"), text));
        }
    }
    wildcard(pattern.as_bytes(), text.as_bytes())
}

fn wildcard(p: &[u8], t: &[u8]) -> bool {
    match p.first() {
        None => t.is_empty(),
        Some(b'*') if p.get(1) == Some(&b'*') => {
            let rest = p[2..].strip_prefix(b"/").unwrap_or(&p[2..]);
            (0..=t.len()).any(|i| wildcard(rest, &t[i..]))
        }
        Some(b'*') => (0..=t.len())
            .take_while(|&i| i == 0 || t[i - 1] != b'/')
            .any(|i| wildcard(&p[1..], &t[i..])),
        Some(b'?') => t.first().is_some_and(|c| *c != b'/') && wildcard(&p[1..], &t[1..]),
        Some(c) => t.first() == Some(c) && wildcard(&p[1..], &t[1..]),
    }
}

/// `folder/rel` with `.` and `..` resolved, without a leading `./`; `None` out of the repo.
pub fn normalize(folder: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = if rel.starts_with('/') {
        Vec::new()
    } else {
        folder.split('/').filter(|p| !p.is_empty()).collect()
    };
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// `folder/name`, or `name` in the root.
pub fn join(folder: &str, name: &str) -> String {
    if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    }
}

/// Whether `path` is inside `folder` (everything is inside the root, `""`).
pub fn under(path: &str, folder: &str) -> bool {
    folder.is_empty()
        || path
            .strip_prefix(folder)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The folder `path` is in (`""` for the root).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

fn base(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, b)| b)
}

/// `folder`, its parent, ... up to the root `""`.
fn ancestors(folder: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(folder);
    std::iter::from_fn(move || {
        let current = next?;
        next = if current.is_empty() {
            None
        } else {
            Some(parent(current))
        };
        Some(current)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_ignore_rules_match_as_documented() {
        assert!(glob("*.yaml", "a.yaml"));
        assert!(!glob("*.yaml", "b/a.yaml"));
        assert!(glob("**/*.yaml", "b/c/a.yaml"));
        assert!(glob("{config.yaml,env-use2/*}", "env-use2/x.yaml"));
        assert!(!glob("{config.yaml,env-use2/*}", "other.yaml"));
        let rules = parse_ignore("# comment\napps/\n!apps/keep.yaml\n*.json\n/top.yaml\n", "");
        assert!(ignored(&rules, "apps/podinfo/deployment.yaml"));
        assert!(!ignored(&rules, "apps"), "a file named apps is no folder");
        assert!(ignored(&rules, "x/y.json"));
        assert!(ignored(&rules, "top.yaml"));
        assert!(!ignored(&rules, "x/top.yaml"));
        let nested = parse_ignore("*.yaml", "clusters/prod");
        assert!(ignored(&nested, "clusters/prod/a/b.yaml"));
        assert!(!ignored(&nested, "apps/b.yaml"));
    }

    #[test]
    fn paths_resolve_inside_the_repo_only() {
        assert_eq!(
            normalize("", "./clusters/prod").as_deref(),
            Some("clusters/prod")
        );
        assert_eq!(normalize("a/b", "../c").as_deref(), Some("a/c"));
        assert_eq!(normalize("a", "../../c"), None);
        assert_eq!(ancestors("a/b").collect::<Vec<_>>(), ["a/b", "a", ""]);
    }
}
