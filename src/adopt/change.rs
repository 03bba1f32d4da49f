//! The change `sluice adopt` commits, computed from what [`crate::adopt::discover`] found:
//! each canary's sources (the Canary, its workload, its autoscaler) moved to
//! `sources/<namespace>/<name>/` with what the engine changed on them written in (namespace,
//! images), the kustomization items that listed them dropped, one `sluice-outputs` Flux
//! Kustomization or Argo CD Application that applies `deploy/` (the output folders) and
//! nothing else, and `.sluice/config.yaml`. Then the new tree is checked as `sluice validate`
//! will check it ([`crate::manifest::applied_by`]): no applier applies a source, each output
//! folder is applied by exactly one. Pure.

use std::collections::{BTreeMap, BTreeSet};

use crate::adopt::discover::{join, parent, Discovery, Engine, Found, Repo, Source};
use crate::adopt::text::{self, Edit, Segment};
use crate::adopt::Refusal;
use crate::manifest::applied_by::Applier;
use crate::yaml::node::{Node, Value};

/// Where the sources go: outside every path the repo's appliers apply.
pub const SOURCES: &str = "sources";
/// Where the outputs go (`output: deploy/{namespace}/{name}`).
pub const OUTPUTS: &str = "deploy";
/// The name of the one applier of the outputs.
pub const OUTPUTS_APPLIER: &str = "sluice-outputs";

/// The files of the adoption commit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    /// The new text of every file written (moved, edited or new).
    pub write: BTreeMap<String, String>,
    /// Files removed (moved away whole).
    pub remove: BTreeSet<String>,
    /// What moved where, for the report: (from, to).
    pub moves: Vec<(String, String)>,
    /// The output folder of each canary, `namespace/name` to folder.
    pub outputs: BTreeMap<String, String>,
    /// The new applier of the outputs: its file.
    pub outputs_file: String,
    /// Lines the report prints under the change (what adopt could not check).
    pub notes: Vec<String>,
    /// The first commit: each source marked, where it is, so the engine leaves its object in
    /// the cluster when the second commit takes the file away ([`KEEP_FLUX`], [`KEEP_ARGOCD`]).
    pub prepare: BTreeMap<String, String>,
}

/// The annotation that keeps Flux from deleting an object whose file leaves its path.
pub const KEEP_FLUX: (&str, &str) = ("kustomize.toolkit.fluxcd.io/prune", "disabled");
/// The annotation that keeps Argo CD from pruning an object whose file leaves its path.
pub const KEEP_ARGOCD: (&str, &str) = ("argocd.argoproj.io/sync-options", "Prune=false");

/// The change for `found`, or why it cannot be made.
pub fn change(repo: &Repo<'_>, found: &Discovery, settings: &str) -> Result<Change, Vec<Refusal>> {
    let mut change = Change::default();
    let mut refusals = Vec::new();
    if repo.names.contains_key(".sluice/config.yaml") {
        refusals.push(Refusal::new(".sluice/config.yaml", 1, "the repo has sluice settings already: adopt writes them (provider, metrics server, sync, the adoption hold). Move the file aside and run adopt again, or finish the layout by hand as docs/adopt.md shows".into()));
    }
    // Every moved object, by file: (kind, name) to its destination folder.
    let mut moving: BTreeMap<&str, Vec<(&Source, String)>> = BTreeMap::new();
    for c in &found.canaries {
        let dest = format!("{SOURCES}/{}/{}", c.namespace, c.name);
        change.outputs.insert(
            format!("{}/{}", c.namespace, c.name),
            format!("{OUTPUTS}/{}/{}", c.namespace, c.name),
        );
        for s in &c.sources {
            moving
                .entry(s.file.as_str())
                .or_default()
                .push((s, dest.clone()));
        }
    }
    let keep = match found.engine {
        Engine::Flux => KEEP_FLUX,
        Engine::ArgoCd => KEEP_ARGOCD,
    };
    for (file, objects) in &moving {
        match prepare_file(repo, file, objects, keep) {
            Ok(text) => {
                change.prepare.insert((*file).to_string(), text);
            }
            Err(r) => refusals.push(r),
        }
    }
    let mut kustomization_edits: BTreeMap<String, Vec<Edit>> = BTreeMap::new();
    for (file, objects) in &moving {
        match move_file(repo, file, objects, &mut change) {
            Ok(true) => {
                for (s, _) in objects {
                    for (k, line) in &s.listed_in {
                        let edits = kustomization_edits.entry(k.clone()).or_default();
                        let edit = Edit::Delete { line: *line };
                        if !edits.contains(&edit) {
                            edits.push(edit);
                        }
                    }
                }
            }
            Ok(false) => {}
            Err(r) => refusals.push(r),
        }
    }
    for (k, edits) in kustomization_edits {
        let edited = current(repo, &change, &k).and_then(|t| text::apply(&t, &edits));
        match edited {
            Some(t) => {
                change.write.insert(k, t);
            }
            None => refusals.push(Refusal::new(&k, 1, "adopt could not drop the moved files from its resources (its layout is not one item per line): drop them by hand".into())),
        }
    }
    if let Err(mut r) = outputs_applier(repo, found, &mut change) {
        refusals.append(&mut r);
    }
    change
        .write
        .insert(".sluice/config.yaml".into(), settings.to_string());
    if refusals.is_empty() {
        Ok(change)
    } else {
        Err(refusals)
    }
}

/// The text of `path` as the change leaves it so far.
fn current(repo: &Repo<'_>, change: &Change, path: &str) -> Option<String> {
    change
        .write
        .get(path)
        .or_else(|| repo.names.get(path))
        .cloned()
}

/// Moves the documents of `objects` out of `file` into their destination folders, the
/// engine's changes written in. `Ok(true)` when the whole file went.
fn move_file(
    repo: &Repo<'_>,
    file: &str,
    objects: &[(&Source, String)],
    change: &mut Change,
) -> Result<bool, Refusal> {
    let original = repo.names.get(file).cloned().unwrap_or_default();
    let mut edits = Vec::new();
    for (s, _) in objects {
        let Some(node) = document(repo, s) else {
            return Err(Refusal::new(
                file,
                s.line,
                format!(
                    "{} {} could not be read back from its document",
                    s.kind, s.name
                ),
            ));
        };
        edits.extend(fold_edits(&original, node, s));
    }
    let edited = text::apply(&original, &edits).ok_or_else(|| {
        Refusal::new(file, 1, "adopt could not write the namespace or image kustomize sets into this file (its layout is not one field per line): write them by hand, then run adopt again".into())
    })?;
    let segments = text::segments(&edited);
    let dest_of = |seg: &Segment| {
        let (kind, name) = seg.object()?;
        objects
            .iter()
            .find(|(s, _)| s.kind == kind && s.name == name)
            .map(|(_, d)| d.clone())
    };
    let staying: Vec<&Segment> = segments
        .iter()
        .filter(|s| s.object().is_some() && dest_of(s).is_none())
        .collect();
    let dests: BTreeSet<String> = segments.iter().filter_map(dest_of).collect();
    let base = file.rsplit('/').next().unwrap_or(file);
    let whole = staying.is_empty() && dests.len() == 1;
    for dest in &dests {
        let to = join(dest, base);
        if repo.names.contains_key(&to) || change.write.contains_key(&to) {
            return Err(Refusal::new(file, 1, format!("adopt would move this file to {to}, which is taken: rename one of the files, then run adopt again")));
        }
        let text = if whole {
            edited.clone()
        } else {
            let parts: Vec<&Segment> = segments
                .iter()
                .filter(|s| dest_of(s).as_deref() == Some(dest.as_str()))
                .collect();
            text::join(&parts)
        };
        check_folds(&text, objects, file)?;
        change.write.insert(to.clone(), text);
        change.moves.push((file.to_string(), to));
    }
    if staying.is_empty() {
        change.remove.insert(file.to_string());
        return Ok(true);
    }
    change.write.insert(file.to_string(), text::join(&staying));
    Ok(false)
}

/// `file` with the annotation `keep` on each of `objects`, where it is.
fn prepare_file(
    repo: &Repo<'_>,
    file: &str,
    objects: &[(&Source, String)],
    keep: (&str, &str),
) -> Result<String, Refusal> {
    let original = repo.names.get(file).cloned().unwrap_or_default();
    let cannot = |s: &Source| {
        Refusal::new(file, s.line, format!("{} {}: adopt could not add the annotation {}: {} to it (its metadata is not one field per line): add it by hand, then run adopt again", s.kind, s.name, keep.0, keep.1))
    };
    let mut edits = Vec::new();
    for (s, _) in objects {
        let meta = document(repo, s).and_then(|n| n.get("metadata"));
        let Some(meta) = meta else {
            return Err(cannot(s));
        };
        let edit = match (meta.get("annotations"), meta.key_line("annotations")) {
            (
                Some(Node {
                    value: Value::Map(entries),
                    ..
                }),
                Some(line),
            ) if !entries.is_empty() => {
                let indent = text::indent_of(&original, entries[0].0.line);
                if entries.iter().any(|(k, _)| k.text == keep.0) {
                    continue;
                }
                Edit::InsertAfter {
                    line,
                    text: format!("{indent}{}: {}", keep.0, text::scalar(keep.1)),
                }
            }
            (None, _) => {
                let Some(name) = meta.get("name") else {
                    return Err(cannot(s));
                };
                let indent = text::indent_of(&original, name.line);
                Edit::InsertAfter {
                    line: name.line,
                    text: format!(
                        "{indent}annotations:\n{indent}  {}: {}",
                        keep.0,
                        text::scalar(keep.1)
                    ),
                }
            }
            _ => return Err(cannot(s)),
        };
        edits.push(edit);
    }
    let text = text::apply(&original, &edits).ok_or_else(|| cannot(objects[0].0))?;
    // Read back: every source carries the annotation.
    let docs = crate::yaml::node::parse_documents(&text).map_err(|_| cannot(objects[0].0))?;
    for (s, _) in objects {
        let marked = docs.iter().any(|d| {
            let meta = d.root.get("metadata");
            d.root.get("kind").and_then(Node::as_str) == Some(s.kind.as_str())
                && meta.and_then(|m| m.get("name")).and_then(Node::as_str) == Some(s.name.as_str())
                && meta
                    .and_then(|m| {
                        m.get("annotations")?
                            .get(keep.0)?
                            .as_str()
                            .map(str::to_string)
                    })
                    .as_deref()
                    == Some(keep.1)
        });
        if !marked {
            return Err(cannot(s));
        }
    }
    Ok(text)
}

/// The parsed document of the source `s`.
fn document<'s>(repo: &Repo<'s>, s: &Source) -> Option<&'s Node> {
    repo.snapshot
        .find(&s.kind, &s.name)
        .find(|o| o.file == s.file && o.line == s.line)
        .map(|o| o.node)
}

/// The line edits that write `s`'s folds into `text` (the file its document `node` is in).
fn fold_edits(text: &str, node: &Node, s: &Source) -> Vec<Edit> {
    let mut edits = Vec::new();
    let metadata = node.get("metadata");
    if let (Some(ns), Some(meta)) = (&s.folds.namespace, metadata) {
        match meta.get("namespace") {
            Some(n) if n.as_str() == Some(ns.as_str()) => {}
            Some(n) => edits.push(Edit::SetValue {
                line: n.line,
                key: "namespace".into(),
                value: text::scalar(ns),
            }),
            None => {
                if let Some(name) = meta.get("name") {
                    edits.push(Edit::InsertAfter {
                        line: name.line,
                        text: format!(
                            "{}namespace: {}",
                            text::indent_of(text, name.line),
                            text::scalar(ns)
                        ),
                    });
                }
            }
        }
    }
    for image in images(node) {
        let Some(old) = image.as_str() else { continue };
        let new = s.folds.images.iter().fold(old.to_string(), |img, rule| {
            rule.rewrite(&img).unwrap_or(img)
        });
        if new != old {
            edits.push(Edit::SetValue {
                line: image.line,
                key: "image".into(),
                value: text::scalar(&new),
            });
        }
    }
    edits
}

/// The `image` nodes of a workload's pod template.
fn images(node: &Node) -> Vec<&Node> {
    let pod = node
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("spec"));
    ["initContainers", "containers"]
        .iter()
        .filter_map(|k| match pod.and_then(|p| p.get(k)).map(|n| &n.value) {
            Some(Value::Seq(items)) => Some(items),
            _ => None,
        })
        .flatten()
        .filter_map(|c| c.get("image"))
        .collect()
}

/// The moved text holds each object with the namespace and images the engine gave it.
fn check_folds(moved: &str, objects: &[(&Source, String)], file: &str) -> Result<(), Refusal> {
    let docs = crate::yaml::node::parse_documents(moved).map_err(|e| {
        Refusal::new(
            file,
            e.line,
            format!("the moved file does not parse: {}", e.message),
        )
    })?;
    for doc in docs {
        let root = doc.root;
        let kind = root.get("kind").and_then(Node::as_str);
        let name = root
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Node::as_str);
        let Some((s, _)) = objects
            .iter()
            .find(|(s, _)| Some(s.kind.as_str()) == kind && Some(s.name.as_str()) == name)
        else {
            continue;
        };
        let ns = root
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Node::as_str);
        if let Some(want) = &s.folds.namespace {
            if ns != Some(want.as_str()) {
                return Err(Refusal::new(file, s.line, format!("{} {}: adopt could not write namespace {want} into it: write it by hand, then run adopt again", s.kind, s.name)));
            }
        }
        for image in images(&root).iter().filter_map(|n| n.as_str()) {
            if s.folds
                .images
                .iter()
                .any(|r| r.rewrite(image).is_some_and(|n| n != image))
            {
                return Err(Refusal::new(file, s.line, format!("{} {}: adopt could not write the image kustomize sets for {image}: write it by hand, then run adopt again", s.kind, s.name)));
            }
        }
    }
    Ok(())
}

/// The `sluice-outputs` Kustomization or Application, beside the applier of the first canary.
fn outputs_applier(
    repo: &Repo<'_>,
    found: &Discovery,
    change: &mut Change,
) -> Result<(), Vec<Refusal>> {
    let Some(first) = found.canaries.first() else {
        return Ok(());
    };
    let a = &first.applier;
    let folder = parent(&a.file).to_string();
    let file = join(&folder, &format!("{OUTPUTS_APPLIER}.yaml"));
    if repo.names.contains_key(&file) {
        return Err(vec![Refusal::new(&file, 1, format!("adopt writes the {OUTPUTS_APPLIER} applier here, and the file exists: move it aside, then run adopt again"))]);
    }
    let spec = repo
        .snapshot
        .find(a.kind, &a.name)
        .find(|o| o.file == a.file)
        .and_then(|o| o.node.get("spec"));
    let text = match found.engine {
        Engine::Flux => flux_outputs(a, spec),
        Engine::ArgoCd => {
            let list: Vec<String> = found
                .canaries
                .iter()
                .map(|c: &Found| format!("  - {}/{}\n", c.namespace, c.name))
                .collect();
            change.write.insert(
                format!("{OUTPUTS}/kustomization.yaml"),
                format!("# Written by `sluice adopt`: the output folders sluice renders, applied by the Application {OUTPUTS_APPLIER}.\n# Add a line for each new canary's output folder.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{}", list.concat()),
            );
            argo_outputs(a, spec)
        }
    };
    change.write.insert(file.clone(), text);
    change.outputs_file.clone_from(&file);
    // A folder built by its kustomization.yaml applies only what that lists.
    if let Some(k) = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .iter()
        .map(|k| join(&folder, k))
        .find(|k| repo.names.contains_key(k))
    {
        let node = repo.snapshot.file(&k).and_then(|f| f.documents().first());
        let last = node.and_then(|d| match d.get("resources").map(|n| &n.value) {
            Some(Value::Seq(items)) => items.last(),
            _ => None,
        });
        let Some(last) = last else {
            return Err(vec![Refusal::new(&k, 1, format!("adopt adds {OUTPUTS_APPLIER}.yaml to this kustomization's resources, and it has no resources list: add it by hand"))]);
        };
        let current = current(repo, change, &k).unwrap_or_default();
        let line = current
            .lines()
            .nth(last.line.saturating_sub(1))
            .unwrap_or("");
        let prefix = line
            .split_once("- ")
            .map_or("- ".to_string(), |(p, _)| format!("{p}- "));
        let edit = Edit::InsertAfter {
            line: last.line,
            text: format!("{prefix}{OUTPUTS_APPLIER}.yaml"),
        };
        let Some(t) = text::apply(&current, &[edit]) else {
            return Err(vec![Refusal::new(
                &k,
                last.line,
                format!(
                    "adopt could not add {OUTPUTS_APPLIER}.yaml to the resources: add it by hand"
                ),
            )]);
        };
        change.write.insert(k, t);
    }
    Ok(())
}

/// The `sourceRef` of a Flux Kustomization, as YAML lines under `sourceRef:`.
fn source_ref(spec: Option<&Node>) -> String {
    let r = spec.and_then(|s| s.get("sourceRef"));
    let field = |k: &str| r.and_then(|r| r.get(k)).and_then(Node::as_str);
    let mut out = format!(
        "    kind: {}\n    name: {}\n",
        field("kind").unwrap_or("GitRepository"),
        field("name").unwrap_or("flux-system")
    );
    if let Some(ns) = field("namespace") {
        out.push_str(&format!("    namespace: {ns}\n"));
    }
    out
}

fn flux_outputs(a: &Applier, spec: Option<&Node>) -> String {
    format!(
        "# Written by `sluice adopt`: applies sluice's output folders ({OUTPUTS}/<namespace>/<name>)\n# and nothing else; sluice waits for it (sync in .sluice/config.yaml).\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {OUTPUTS_APPLIER}\n  namespace: {}\nspec:\n  interval: 1m0s\n  path: ./{OUTPUTS}\n  prune: true\n  sourceRef:\n{}",
        a.namespace,
        source_ref(spec)
    )
}

fn argo_outputs(a: &Applier, spec: Option<&Node>) -> String {
    let source = spec.and_then(|s| {
        s.get("source")
            .or_else(|| match s.get("sources").map(|n| &n.value) {
                Some(Value::Seq(items)) => items.iter().find(|i| i.get("path").is_some()),
                _ => None,
            })
    });
    let field = |n: Option<&Node>, k: &str| {
        n.and_then(|n| n.get(k))
            .and_then(Node::as_str)
            .map(str::to_string)
    };
    let destination = spec.and_then(|s| s.get("destination"));
    let target = match (field(destination, "server"), field(destination, "name")) {
        (Some(server), _) => format!("    server: {server}\n"),
        (None, Some(name)) => format!("    name: {name}\n"),
        (None, None) => "    server: https://kubernetes.default.svc\n".to_string(),
    };
    format!(
        "# Written by `sluice adopt`: applies sluice's output folders ({OUTPUTS}/kustomization.yaml lists them)\n# and nothing else; sluice waits for it (sync in .sluice/config.yaml).\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {OUTPUTS_APPLIER}\n  namespace: {}\nspec:\n  project: {}\n  source:\n    repoURL: {}\n    targetRevision: {}\n    path: {OUTPUTS}\n  destination:\n{target}  syncPolicy:\n    automated:\n      prune: true\n      selfHeal: true\n",
        a.namespace,
        field(spec, "project").unwrap_or_else(|| "default".into()),
        field(source, "repoURL").unwrap_or_default(),
        field(source, "targetRevision").unwrap_or_else(|| "HEAD".into()),
    )
}
