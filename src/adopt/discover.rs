//! What `sluice adopt` finds in a repo that runs Flagger: every Flagger Canary that a Flux
//! Kustomization or an Argo CD Application applies, the objects it reads from the repo (its
//! target workload and autoscaler; the objects Flagger generates are not in git), which
//! kustomizations build each file and what they change on the way (a `namespace`, `images`),
//! and how Flagger itself is installed (a Flux HelmRelease or an Argo CD Application of the
//! `flagger` chart, with its `meshProvider` and `metricsServer` values). Pure: a function of
//! the repo's files.
//!
//! What it cannot carry over exactly is a [`Refusal`] naming the file and line, and what to do
//! by hand: sources built by a Helm chart, a remote kustomize base, names kustomize or Flux
//! generates (`namePrefix`, `nameSuffix`, generators), other transformations (patches,
//! labels, replicas), and sources that live outside the repo.

use std::collections::BTreeMap;

use crate::adopt::Refusal;
use crate::manifest::applied_by::{self, Applier};
use crate::workload::applied_twice;
use crate::yaml::node::{Node, Value};
use crate::yaml::snapshot::{Object, Snapshot};

/// kustomize fields that change objects in ways adopt does not carry into the files.
const TRANSFORMS: [&str; 13] = [
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "replicas",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "components",
    "transformers",
    "generators",
    "helmCharts",
    "replacements",
    "vars",
];

/// kustomize fields that give objects names other than the ones written in their files.
const NAMERS: [&str; 4] = [
    "namePrefix",
    "nameSuffix",
    "configMapGenerator",
    "secretGenerator",
];

/// The Flux Kustomization fields adopt refuses on a Kustomization that applies a source.
const FLUX_TRANSFORMS: [&str; 6] = [
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "namePrefix",
    "nameSuffix",
    "commonMetadata",
];

/// One `images` entry of a kustomization (or a Flux Kustomization).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRule {
    pub name: String,
    pub new_name: Option<String>,
    pub new_tag: Option<String>,
    pub digest: Option<String>,
}

impl ImageRule {
    /// `image` as this rule rewrites it, or `None` when the rule does not match it.
    pub fn rewrite(&self, image: &str) -> Option<String> {
        let rest = image.strip_prefix(self.name.as_str())?;
        if !(rest.is_empty() || rest.starts_with(':') || rest.starts_with('@')) {
            return None;
        }
        let name = self.new_name.as_deref().unwrap_or(&self.name);
        let suffix = match (&self.digest, &self.new_tag) {
            (Some(d), _) => format!("@{d}"),
            (None, Some(t)) => format!(":{t}"),
            (None, None) => rest.to_string(),
        };
        Some(format!("{name}{suffix}"))
    }
}

/// What the engine changes on an object between its file and the cluster, which adopt writes
/// into the moved file so sluice reads what is live.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folds {
    /// The namespace the object gets when its file says another or none.
    pub namespace: Option<String>,
    /// Image rewrites, innermost kustomization first.
    pub images: Vec<ImageRule>,
}

/// An object of the repo that sluice reads as a canary's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub kind: String,
    pub name: String,
    pub file: String,
    /// The line its document starts on.
    pub line: usize,
    pub folds: Folds,
    /// The kustomization files that list `file` directly, with the line of the item.
    pub listed_in: Vec<(String, usize)>,
}

/// A Flagger Canary to adopt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub namespace: String,
    pub name: String,
    /// The Canary first, then its target workload, then its autoscaler; then each object the
    /// output also writes that an applier applies (a Service, a ConfigMap or Secret the pod
    /// template references), which moves with them so that only the output applies it.
    pub sources: Vec<Source>,
    /// What the output writes besides the target ([`applied_twice::written`]).
    pub written: Vec<applied_twice::Written>,
    /// What applies the canary's file (`Kustomization flux-system/apps`).
    pub applier: Applier,
}

/// How Flagger is installed in the repo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flagger {
    /// `HelmRelease` or `Application`.
    pub kind: &'static str,
    pub name: String,
    pub file: String,
    pub line: usize,
    /// Where Flagger runs.
    pub namespace: Option<String>,
    /// The name of Flagger's Deployment (the release name).
    pub deployment: String,
    pub mesh_provider: Option<String>,
    pub metrics_server: Option<String>,
    /// `prometheus.install: true`: the chart's own Prometheus, which goes with Flagger.
    pub bundled_prometheus: bool,
}

/// Which engine applies the canaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Flux,
    ArgoCd,
}

/// Everything `sluice adopt` found.
#[derive(Debug, Clone)]
pub struct Discovery {
    pub engine: Engine,
    pub canaries: Vec<Found>,
    /// Canaries in the repo that nothing applies (Flagger never sees them): left alone.
    pub skipped: Vec<String>,
    pub flagger: Option<Flagger>,
}

/// The repo as adopt reads it.
pub struct Repo<'a> {
    pub snapshot: &'a Snapshot,
    pub appliers: &'a [Applier],
    /// Every file's path (YAML or not), to find kustomizations and charts.
    pub names: &'a BTreeMap<String, String>,
}

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Finds what to adopt in `repo`, or every reason it cannot be done as it stands.
pub fn discover(repo: &Repo<'_>) -> Result<Discovery, Vec<Refusal>> {
    let mut refusals = Vec::new();
    if repo.appliers.is_empty() {
        return Err(vec![Refusal::new(
            ".",
            0,
            "no Flux Kustomization (kustomize.toolkit.fluxcd.io) or Argo CD Application (argoproj.io) in the repo: adopt moves what they apply, so it needs them in git; add them, or lay the repo out by hand as docs/adopt.md shows".to_string(),
        )]);
    }
    let mut canaries = Vec::new();
    let mut skipped = Vec::new();
    for o in repo.snapshot.objects() {
        if o.kind != "Canary" || !o.api_version.unwrap_or("").starts_with("flagger.app/") {
            continue;
        }
        let Some(applier) = repo.appliers.iter().find(|a| a.applies_file(o.file)) else {
            skipped.push(format!("{}:{}: Canary {}", o.file, o.line, o.name));
            continue;
        };
        match found(repo, &o, applier) {
            Ok(f) => canaries.push(f),
            Err(mut e) => refusals.append(&mut e),
        }
    }
    if canaries.is_empty() && refusals.is_empty() {
        refusals.push(Refusal::new(
            ".",
            0,
            "no Flagger Canary (flagger.app) that a Kustomization or Application of the repo applies: nothing to adopt".to_string(),
        ));
    }
    let engine = match canaries.first().map(|c| c.applier.kind) {
        Some("Application") => Engine::ArgoCd,
        _ => Engine::Flux,
    };
    if let Some(other) = canaries
        .iter()
        .find(|c| (c.applier.kind == "Application") != (engine == Engine::ArgoCd))
    {
        refusals.push(Refusal::new(
            &other.sources[0].file,
            other.sources[0].line,
            format!(
                "Canary {}/{} is applied by {} while other canaries are applied by the other engine: adopt writes one sluice-outputs applier; adopt the canaries of one engine at a time by hand",
                other.namespace, other.name, other.applier.title()
            ),
        ));
    }
    if !refusals.is_empty() {
        // One refusal per place: a kustomization that builds several sources is named once.
        let mut seen = std::collections::BTreeSet::new();
        refusals.retain(|r| seen.insert((r.file.clone(), r.line)));
        return Err(refusals);
    }
    Ok(Discovery {
        engine,
        canaries,
        skipped,
        flagger: flagger(repo),
    })
}

/// The canary `o` applied by `applier`, its sources and their folds.
fn found(repo: &Repo<'_>, o: &Object<'_>, applier: &Applier) -> Result<Found, Vec<Refusal>> {
    let mut refusals = Vec::new();
    let canary = source(repo, o, &mut refusals);
    let Some(namespace) = namespace_of(o, &canary.folds) else {
        return Err(vec![Refusal::new(
            o.file,
            o.line,
            format!("Canary {} has no namespace (metadata.namespace, a kustomization's namespace, the Kustomization's targetNamespace or the Application's destination.namespace): set metadata.namespace in the file", o.name),
        )]);
    };
    let mut sources = vec![canary];
    let spec = o.node.get("spec");
    let refs = [("targetRef", true), ("autoscalerRef", false)];
    let mut target = None;
    for (field, required) in refs {
        let Some(r) = spec.and_then(|s| s.get(field)) else {
            if required {
                refusals.push(Refusal::new(
                    o.file,
                    o.line,
                    format!("Canary {}/{}: spec.targetRef is missing", namespace, o.name),
                ));
            }
            continue;
        };
        let kind = r.get("kind").and_then(Node::as_str).unwrap_or("");
        let name = r.get("name").and_then(Node::as_str).unwrap_or("");
        let matches: Vec<Object<'_>> = repo
            .snapshot
            .find(kind, name)
            .filter(|t| {
                let folds = folds_of(repo, t.file, &mut Vec::new());
                namespace_of(t, &folds).as_deref() == Some(namespace.as_str())
            })
            .collect();
        match matches.as_slice() {
            [t] => {
                sources.push(source(repo, t, &mut refusals));
                if field == "targetRef" {
                    target = Some(*t);
                }
            }
            [] => refusals.push(missing(repo, o, applier, r.line, field, kind, name, &namespace)),
            [a, b, ..] => refusals.push(Refusal::new(
                o.file,
                r.line,
                format!("spec.{field}: {kind} {namespace}/{name} is in the repo twice ({}:{} and {}:{}): keep one, then run adopt again", a.file, a.line, b.file, b.line),
            )),
        }
    }
    let written = target
        .map(|t| written(repo, o, &t, &namespace))
        .unwrap_or_default();
    // What the output writes that an applier also applies moves with the sources, so each
    // object has one applier: sluice's output.
    let outputs: [&str; 0] = [];
    let in_cluster = |c: &Object<'_>| namespace_of(c, &folds_of(repo, c.file, &mut Vec::new()));
    for (copy, _) in applied_twice::applied_copies(
        repo.snapshot,
        repo.appliers,
        &namespace,
        &written,
        &outputs,
        &in_cluster,
    ) {
        let moved = sources
            .iter()
            .any(|s| s.file == copy.file && s.line == copy.line);
        if !moved {
            sources.push(source(repo, &copy, &mut refusals));
        }
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    Ok(Found {
        namespace,
        name: o.name.to_string(),
        sources,
        written,
        applier: applier.clone(),
    })
}

/// What the output of the Flagger Canary `canary` (in `namespace`, its target `target`)
/// writes besides the target, as [`applied_twice::written`] says: the Service names are
/// `spec.service.name`'s, else the target's (Flagger's `GetServiceNames`).
fn written(
    repo: &Repo<'_>,
    canary: &Object<'_>,
    target: &Object<'_>,
    namespace: &str,
) -> Vec<applied_twice::Written> {
    let spec = canary.node.get("spec");
    let service = spec
        .and_then(|s| s.get("service"))
        .and_then(|s| s.get("name"))
        .and_then(Node::as_str)
        .unwrap_or(target.name);
    let autoscaler = spec.and_then(|s| s.get("autoscalerRef")).and_then(|r| {
        Some((
            r.get("kind").and_then(Node::as_str)?,
            r.get("name").and_then(Node::as_str)?,
        ))
    });
    let in_repo = |kind: &str, name: &str| {
        repo.snapshot.find(kind, name).any(|c| {
            namespace_of(&c, &folds_of(repo, c.file, &mut Vec::new()))
                .is_none_or(|ns| ns == namespace)
        })
    };
    applied_twice::written(
        (target.kind, target.name, target.yaml),
        service,
        autoscaler,
        &in_repo,
    )
}

/// The source `o` with what the engine changes on it; refusals for what cannot be carried.
fn source(repo: &Repo<'_>, o: &Object<'_>, refusals: &mut Vec<Refusal>) -> Source {
    let folds = folds_of(repo, o.file, refusals);
    Source {
        kind: o.kind.to_string(),
        name: o.name.to_string(),
        file: o.file.to_string(),
        line: o.line,
        folds,
        listed_in: listed_in(repo, o.file),
    }
}

/// Why the object a canary references is not in the repo, naming what does apply it when
/// adopt can tell.
#[allow(clippy::too_many_arguments)]
fn missing(
    repo: &Repo<'_>,
    canary: &Object<'_>,
    applier: &Applier,
    line: usize,
    field: &str,
    kind: &str,
    name: &str,
    namespace: &str,
) -> Refusal {
    let what = format!("spec.{field}: {kind} {namespace}/{name} is not in the repo");
    // The source the canary's own applier reads: this repo.
    let own = applier_spec(repo, applier).and_then(|s| {
        s.get("sourceRef")?
            .get("name")?
            .as_str()
            .map(str::to_string)
    });
    for o in repo.snapshot.objects() {
        let spec = o.node.get("spec");
        let target_ns = spec
            .and_then(|s| s.get("targetNamespace"))
            .and_then(Node::as_str)
            .or(o.namespace);
        let api = o.api_version.unwrap_or("");
        if o.kind == "HelmRelease"
            && api.starts_with("helm.toolkit.fluxcd.io/")
            && target_ns == Some(namespace)
        {
            return Refusal::new(canary.file, line, format!("{what}: HelmRelease {}/{} ({}:{}) installs a chart into {namespace}, and sluice reads sources from files, not charts. Render the chart into files (helm template) and commit them in place of the HelmRelease, or keep Flagger for this canary", o.namespace.unwrap_or("default"), o.name, o.file, o.line));
        }
        if o.kind == "Application" && api.starts_with("argoproj.io/") {
            let dest = spec
                .and_then(|s| s.get("destination"))
                .and_then(|d| d.get("namespace"))
                .and_then(Node::as_str);
            let chart = spec
                .and_then(|s| s.get("source"))
                .and_then(|s| s.get("chart"));
            if chart.is_some() && dest == Some(namespace) {
                return Refusal::new(canary.file, line, format!("{what}: Application {} ({}:{}) installs a Helm chart into {namespace}, and sluice reads sources from files, not charts. Render the chart into files and apply those instead, or keep Flagger for this canary", o.name, o.file, o.line));
            }
        }
        if o.kind == "Kustomization"
            && api.starts_with("kustomize.toolkit.fluxcd.io/")
            && target_ns == Some(namespace)
        {
            let source = spec.and_then(|s| s.get("sourceRef"));
            let source_name = source
                .and_then(|s| s.get("name"))
                .and_then(Node::as_str)
                .unwrap_or("");
            if own.as_deref().is_some_and(|own| own != source_name) {
                let url = repo
                    .snapshot
                    .find("GitRepository", source_name)
                    .chain(repo.snapshot.find("OCIRepository", source_name))
                    .find_map(|g| g.node.get("spec")?.get("url")?.as_str().map(str::to_string))
                    .unwrap_or_else(|| "another source".into());
                let ns = namespace_of(&o, &folds_of(repo, o.file, &mut Vec::new()));
                return Refusal::new(canary.file, line, format!("{what}: Kustomization {}/{} ({}:{}) applies it from {url}, outside this repo, and sluice reads its sources from this repo. Copy the workload's manifests into the repo (and stop that Kustomization applying them), then run adopt again", ns.as_deref().unwrap_or("default"), o.name, o.file, o.line));
            }
        }
    }
    let remote = remote_bases(repo, canary.file);
    if let Some((file, line, url)) = remote.first() {
        return Refusal::new(file, *line, format!("{what}; this kustomization builds the canary from the remote base {url}, which sluice cannot read or move. Copy the base into the repo (or its {kind} into a file), then run adopt again"));
    }
    Refusal::new(canary.file, line, format!("{what}: sluice reads a canary's {kind} from the repo's files; add it to the repo, or keep Flagger for this canary"))
}

/// The kustomization files that build `file`, innermost first: each lists the file (or the
/// folder of the one before it) in `resources`/`bases`.
fn chain(repo: &Repo<'_>, file: &str) -> Vec<(String, Node)> {
    let mut out = Vec::new();
    let mut target = file.to_string();
    let mut folder = parent(file).to_string();
    loop {
        if let Some((k, doc)) = kustomization(repo, &folder) {
            if !lists(&doc, &folder, &target) {
                break;
            }
            out.push((k, doc));
            target.clone_from(&folder);
        } else if !out.is_empty() {
            break;
        }
        if folder.is_empty() {
            break;
        }
        folder = parent(&folder).to_string();
    }
    out
}

/// The kustomization file of `folder` and its document.
fn kustomization(repo: &Repo<'_>, folder: &str) -> Option<(String, Node)> {
    KUSTOMIZATION_FILES.iter().find_map(|f| {
        let path = join(folder, f);
        let file = repo.snapshot.file(&path)?;
        Some((path, file.documents().first()?.clone()))
    })
}

/// The `resources`/`bases` items of a kustomization document, each with its line.
fn resources(doc: &Node) -> Vec<(&str, usize)> {
    ["resources", "bases"]
        .iter()
        .filter_map(|k| match doc.get(k).map(|n| &n.value) {
            Some(Value::Seq(items)) => Some(items),
            _ => None,
        })
        .flatten()
        .filter_map(|n| n.as_str().map(|s| (s, n.line)))
        .collect()
}

/// Whether the kustomization in `folder` lists `target` (a file or a folder).
fn lists(doc: &Node, folder: &str, target: &str) -> bool {
    resources(doc)
        .iter()
        .any(|(r, _)| normalize(folder, r).as_deref() == Some(target))
}

/// The kustomization files that list `file` itself, with the item's line.
fn listed_in(repo: &Repo<'_>, file: &str) -> Vec<(String, usize)> {
    let Some((k, doc)) = chain(repo, file).into_iter().next() else {
        return Vec::new();
    };
    let folder = parent(&k).to_string();
    resources(&doc)
        .iter()
        .filter(|(r, _)| normalize(&folder, r).as_deref() == Some(file))
        .map(|(_, line)| (k.clone(), *line))
        .collect()
}

/// Remote resources of the kustomizations that build `file`: (kustomization, line, URL).
fn remote_bases(repo: &Repo<'_>, file: &str) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    let mut chain = chain(repo, file);
    if chain.is_empty() {
        // The file's own folder may still be a kustomization (of other resources).
        chain.extend(kustomization(repo, parent(file)));
    }
    for (k, doc) in &chain {
        for (r, line) in resources(doc) {
            if r.contains("://") || r.starts_with("github.com/") || r.contains("?ref=") {
                out.push((k.clone(), line, r.to_string()));
            }
        }
    }
    out
}

/// What the kustomizations and the Flux Kustomization that build `file` change on its objects;
/// what adopt cannot carry is pushed to `refusals`.
fn folds_of(repo: &Repo<'_>, file: &str, refusals: &mut Vec<Refusal>) -> Folds {
    let mut folds = Folds::default();
    for (k, doc) in chain(repo, file) {
        for key in NAMERS {
            if let Some(line) = doc.key_line(key) {
                refusals.push(Refusal::new(&k, line, format!("{key}: kustomize generates the names of what it builds ({file} among them), and sluice reads names as written. Remove {key} and write the names into the files by hand (kubectl kustomize {} shows them), then run adopt again", parent(&k))));
            }
        }
        for key in TRANSFORMS {
            if let Some(line) = doc.key_line(key) {
                refusals.push(Refusal::new(&k, line, format!("{key}: kustomize changes what it builds ({file} among them) before it is applied, and sluice reads the files as written. Write the result into the file by hand (kubectl kustomize {} shows it) and remove {key}, then run adopt again", parent(&k))));
            }
        }
        for (r, line) in resources(&doc) {
            if r.contains("://") || r.starts_with("github.com/") || r.contains("?ref=") {
                refusals.push(Refusal::new(&k, line, format!("resources: {r} is a remote base of the kustomization that builds {file}: adopt cannot move what it does not hold. Copy the base into the repo, then run adopt again")));
            }
        }
        if let Some(ns) = doc.get("namespace").and_then(Node::as_str) {
            folds.namespace = Some(ns.to_string());
        }
        folds.images.extend(image_rules(doc.get("images")));
    }
    for a in repo.appliers.iter().filter(|a| a.applies_file(file)) {
        let Some(spec) = applier_spec(repo, a) else {
            continue;
        };
        if a.kind == "Kustomization" {
            for key in FLUX_TRANSFORMS {
                if let Some(line) = spec.key_line(key) {
                    refusals.push(Refusal::new(&a.file, line, format!("spec.{key}: {} changes {file} before it is applied, and sluice reads the file as written. Write the result into the file by hand and remove spec.{key}, then run adopt again", a.title())));
                }
            }
            if let Some(ns) = spec.get("targetNamespace").and_then(Node::as_str) {
                folds.namespace = Some(ns.to_string());
            }
            folds.images.extend(image_rules(spec.get("images")));
            let substitutes = spec.get("postBuild").is_some();
            let has_vars = repo
                .snapshot
                .file(file)
                .and_then(|f| f.text())
                .is_some_and(|t| t.contains("${"));
            if substitutes && has_vars {
                refusals.push(Refusal::new(&a.file, spec.key_line("postBuild").unwrap_or(a.line), format!("spec.postBuild: {} substitutes variables in {file}, and sluice reads the file as written. Write the values into the file by hand, then run adopt again", a.title())));
            }
        } else if folds.namespace.is_none() {
            let dest = spec
                .get("destination")
                .and_then(|d| d.get("namespace"))
                .and_then(Node::as_str);
            let written = repo
                .snapshot
                .objects()
                .any(|o| o.file == file && o.namespace.is_some());
            if !written {
                folds.namespace = dest.map(str::to_string);
            }
        }
    }
    folds
}

/// The `spec` of the applier `a`'s object.
fn applier_spec<'s>(repo: &Repo<'s>, a: &Applier) -> Option<&'s Node> {
    repo.snapshot
        .find(a.kind, &a.name)
        .find(|o| o.file == a.file)
        .and_then(|o| o.node.get("spec"))
}

/// The `images` list of a kustomization or a Flux Kustomization.
fn image_rules(node: Option<&Node>) -> Vec<ImageRule> {
    let Some(Value::Seq(items)) = node.map(|n| &n.value) else {
        return Vec::new();
    };
    let text = |n: &Node, k: &str| n.get(k).and_then(Node::as_str).map(str::to_string);
    items
        .iter()
        .filter_map(|n| {
            Some(ImageRule {
                name: text(n, "name")?,
                new_name: text(n, "newName"),
                new_tag: text(n, "newTag"),
                digest: text(n, "digest"),
            })
        })
        .collect()
}

/// The namespace `o` has in the cluster: what the engine sets, else what its file says.
fn namespace_of(o: &Object<'_>, folds: &Folds) -> Option<String> {
    folds
        .namespace
        .clone()
        .or_else(|| o.namespace.map(str::to_string))
}

/// Flagger's install: a Flux HelmRelease or an Argo CD Application of the `flagger` chart.
fn flagger<'s>(repo: &Repo<'s>) -> Option<Flagger> {
    repo.snapshot.objects().find_map(|o| {
        let api = o.api_version.unwrap_or("");
        let spec = o.node.get("spec")?;
        if o.kind == "HelmRelease" && api.starts_with("helm.toolkit.fluxcd.io/") {
            let chart = spec.get("chart")?.get("spec")?.get("chart")?.as_str()?;
            if chart != "flagger" {
                return None;
            }
            let folds = folds_of(repo, o.file, &mut Vec::new());
            let namespace = spec
                .get("targetNamespace")
                .and_then(Node::as_str)
                .map(str::to_string)
                .or_else(|| namespace_of(&o, &folds));
            let release = spec
                .get("releaseName")
                .and_then(Node::as_str)
                .unwrap_or(o.name);
            return Some(values(
                "HelmRelease",
                o.name,
                o.file,
                o.line,
                namespace,
                release,
                spec.get("values").cloned(),
            ));
        }
        if o.kind == "Application" && api.starts_with("argoproj.io/") {
            let source = spec.get("source")?;
            if source.get("chart")?.as_str()? != "flagger" {
                return None;
            }
            let helm = source.get("helm");
            let namespace = spec
                .get("destination")?
                .get("namespace")
                .and_then(Node::as_str)
                .map(str::to_string);
            let release = helm
                .and_then(|h| h.get("releaseName"))
                .and_then(Node::as_str)
                .unwrap_or(o.name);
            let from_text = helm
                .and_then(|h| h.get("values"))
                .and_then(Node::as_str)
                .and_then(|t| crate::yaml::node::parse_documents(t).ok())
                .and_then(|d| d.into_iter().next())
                .map(|d| d.root);
            let object = helm.and_then(|h| h.get("valuesObject")).cloned();
            let mut f = values(
                "Application",
                o.name,
                o.file,
                o.line,
                namespace,
                release,
                object.or(from_text),
            );
            for p in helm
                .and_then(|h| h.get("parameters"))
                .map(seq)
                .unwrap_or_default()
            {
                let value = p.get("value").and_then(Node::as_str).map(str::to_string);
                match p.get("name").and_then(Node::as_str) {
                    Some("meshProvider") => f.mesh_provider = value,
                    Some("metricsServer") => f.metrics_server = value,
                    _ => {}
                }
            }
            return Some(f);
        }
        None
    })
}

fn seq(node: &Node) -> Vec<&Node> {
    match &node.value {
        Value::Seq(items) => items.iter().collect(),
        _ => Vec::new(),
    }
}

/// A [`Flagger`] from the chart's values.
fn values(
    kind: &'static str,
    name: &str,
    file: &str,
    line: usize,
    namespace: Option<String>,
    release: &str,
    values: Option<Node>,
) -> Flagger {
    let get = |k: &str| {
        values
            .as_ref()
            .and_then(|v| v.get(k))
            .and_then(Node::as_str)
            .map(str::to_string)
    };
    let bundled = values
        .as_ref()
        .and_then(|v| {
            v.get("prometheus")?
                .get("install")?
                .as_str()
                .map(|s| s == "true")
        })
        .unwrap_or(false);
    Flagger {
        kind,
        name: name.to_string(),
        file: file.to_string(),
        line,
        namespace,
        deployment: release.to_string(),
        mesh_provider: get("meshProvider"),
        metrics_server: get("metricsServer"),
        bundled_prometheus: bundled,
    }
}

pub use applied_by::{join, normalize, parent};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_rules_rewrite_as_kustomize_does() {
        let rule = ImageRule {
            name: "ghcr.io/stefanprodan/podinfo".into(),
            new_name: None,
            new_tag: Some("6.1.0".into()),
            digest: None,
        };
        assert_eq!(
            rule.rewrite("ghcr.io/stefanprodan/podinfo:5.0.0")
                .as_deref(),
            Some("ghcr.io/stefanprodan/podinfo:6.1.0")
        );
        assert_eq!(rule.rewrite("ghcr.io/stefanprodan/podinfo-x:1"), None);
        let renamed = ImageRule {
            name: "app".into(),
            new_name: Some("registry/app".into()),
            new_tag: None,
            digest: Some("sha256:ab".into()),
        };
        assert_eq!(
            renamed.rewrite("app").as_deref(),
            Some("registry/app@sha256:ab")
        );
    }
}
