//! Waves: a canary's `spec.waves` (native), or the `sluice.dev/v1alpha1 Waves` object a
//! Flagger canary's `sluice.dev/waves: <name>` annotation names, read and checked, and the
//! canary expanded into one instance per wave (see [`crate::core::waves`]).
//!
//! ```yaml
//! spec:
//!   onFailure: hold               # or rollback: a failed wave reverts the earlier ones too
//!   waves:
//!     - name: staging
//!       output: deploy/staging/podinfo
//!       sync: {flux: {kustomization: apps}}
//!       cluster: {kubeContext: staging}  # or {server: https://..., secretRef: {name: NAME}}
//!       metricsServer: http://prometheus.staging:9090
//!       metricsSecretRef: {name: prometheus-staging}   # its credentials (token, or username/password)
//!       analysis: {...}            # replaces the canary's analysis in this wave
//!     - name: prod-eu
//!       output: deploy/prod-eu/podinfo
//!       settle: 2m
//!       approval: true           # or a policy: {required: 2, from: [alice, team:acme/sre]}
//! ```
//!
//! Each instance is the canary with the wave's output folder, gates and analysis; its id's
//! name is `<name>.<wave>`, so it has its own status file, history and approval branches.
//! Pure: no IO; every problem is reported through the [`Reader`] with its line and field.
//! Kube contexts are checked against the kubeconfig by `crate::waves::contexts`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::waves::{instance_name, Cluster, OnFailure, WaveOf};
use crate::manifest::analysis::read_analysis;
use crate::manifest::model::{Analysis, Canary, Format, Name, RepoPath, SyncTarget};
use crate::manifest::sync::read_sync_target;
use crate::yaml::node::Node;
use crate::yaml::reader::{index, join, metadata_name, name_at, Reader, OBJECT_KEYS};
use crate::yaml::snapshot::Snapshot;

/// The annotation a Flagger canary names its `Waves` object with.
pub const ANNOTATION: &str = "sluice.dev/waves";

const WAVE_KEYS: &[&str] = &[
    "name",
    "output",
    "sync",
    "settle",
    "metricsServer",
    "metricsSecretRef",
    "cluster",
    "approval",
    "analysis",
];
const WAVES_SPEC_KEYS: &[&str] = &["waves", "onFailure"];

/// One wave as written.
#[derive(Debug, Clone)]
struct WaveSpec {
    name: Name,
    file: String,
    line: usize,
    field: String,
    output: RepoPath,
    sync: Option<SyncTarget>,
    settle: Option<Duration>,
    metrics_server: Option<String>,
    metrics_secret: Option<Name>,
    cluster: Option<(Cluster, usize)>,
    approval: bool,
    /// `approval: {required, ...}`: the wave's own policy (its start is approved too).
    policy: Option<crate::core::approval::ApprovalPolicy>,
    analysis: Option<Analysis>,
}

/// A release's waves, checked.
#[derive(Debug, Clone)]
struct Waves {
    waves: Vec<WaveSpec>,
    on_failure: OnFailure,
}

/// What the reader of a wave's analysis needs to know of the canary.
struct Context<'a> {
    format: Format,
    namespace: &'a Name,
    strategy: &'static str,
    snapshot: &'a Snapshot,
}

/// The canary `canary` read from `root` as its instances, one per wave; the canary itself
/// when it has no waves; nothing when its waves are refused (every problem reported to `r`,
/// or for a Flagger canary's `Waves` object, with that object's file).
pub fn expand(r: &mut Reader, root: &Node, canary: Canary, snapshot: &Snapshot) -> Vec<Canary> {
    let ctx = Context {
        format: canary.format,
        namespace: &canary.id.namespace,
        strategy: canary.analysis.strategy.name(),
        snapshot,
    };
    let spec = root.get("spec");
    let waves = match canary.format {
        Format::Native => match spec {
            Some(spec) if spec.get("waves").is_some() => read_waves(r, spec, "spec", &ctx),
            Some(spec) => {
                if let Some(n) = spec.get("onFailure") {
                    r.error(
                        n.line,
                        "spec.onFailure",
                        "set without spec.waves; remove it, or list the waves",
                    );
                    return Vec::new();
                }
                return vec![canary];
            }
            None => return vec![canary],
        },
        Format::Flagger => match annotation(r, root) {
            None => return vec![canary],
            Some(Err(())) => return Vec::new(),
            Some(Ok((name, line))) => read_object(r, &name, line, &ctx),
        },
    };
    match waves {
        Some(waves) => instances(r, &canary, &waves),
        None => Vec::new(),
    }
}

/// The `sluice.dev/waves` annotation of a Flagger canary: the name and its line.
fn annotation(r: &mut Reader, root: &Node) -> Option<Result<(Name, usize), ()>> {
    let n = root
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(ANNOTATION))?;
    let path = format!("metadata.annotations.{ANNOTATION}");
    Some(name_at(r, n, &path).map(|name| (name, n.line)).ok_or(()))
}

/// The `Waves` object `name` in the canary's namespace; its problems are reported with its
/// own file, and a missing one at the annotation's line.
fn read_object(r: &mut Reader, name: &Name, line: usize, ctx: &Context) -> Option<Waves> {
    let found: Vec<_> = ctx
        .snapshot
        .find("Waves", name.as_str())
        .filter(|o| o.api_version == Some("sluice.dev/v1alpha1"))
        .filter(|o| o.namespace.unwrap_or("default") == ctx.namespace.as_str())
        .collect();
    let object = match found.as_slice() {
        [one] => one,
        [] => {
            r.error(
                line,
                &format!("metadata.annotations.{ANNOTATION}"),
                format!(
                    "no sluice.dev/v1alpha1 Waves object named {name} in namespace {} in the repo",
                    ctx.namespace
                ),
            );
            return None;
        }
        [first, second, ..] => {
            r.error(
                line,
                &format!("metadata.annotations.{ANNOTATION}"),
                format!(
                    "two Waves objects named {name} in namespace {}: {}:{} and {}:{}",
                    ctx.namespace, first.file, first.line, second.file, second.line
                ),
            );
            return None;
        }
    };
    let mut own = Reader::new(object.file);
    let waves = read_waves_object(&mut own, object.node, ctx);
    let failed = !own.errors.is_empty();
    r.errors.append(&mut own.errors);
    if failed {
        return None;
    }
    waves
}

fn read_waves_object(r: &mut Reader, root: &Node, ctx: &Context) -> Option<Waves> {
    r.map(root, "", OBJECT_KEYS)?;
    metadata_name(r, root)?;
    let spec = r.required(root, "", "spec")?;
    r.map(spec, "spec", WAVES_SPEC_KEYS)?;
    if spec.get("waves").is_none() {
        r.required(spec, "spec", "waves");
        return None;
    }
    read_waves(r, spec, "spec", ctx)
}

/// `waves` and `onFailure` of the mapping `spec` (at `path`).
fn read_waves(r: &mut Reader, spec: &Node, path: &str, ctx: &Context) -> Option<Waves> {
    let before = r.errors.len();
    let on_failure = match spec.get("onFailure") {
        Some(n) => read_on_failure(r, n, &join(path, "onFailure")),
        None => Some(OnFailure::default()),
    };
    let list_path = join(path, "waves");
    let list = r.required(spec, path, "waves")?;
    let items = r.seq(list, &list_path)?;
    if items.is_empty() {
        r.error(
            list.line,
            &list_path,
            "expected at least one wave, found none",
        );
        return None;
    }
    let waves: Vec<Option<WaveSpec>> = items
        .iter()
        .enumerate()
        .map(|(i, n)| read_wave(r, n, &index(&list_path, i), ctx))
        .collect();
    let waves: Vec<WaveSpec> = waves.into_iter().flatten().collect();
    check_names(r, &waves, &list_path);
    check_outputs(r, &waves, &list_path);
    if r.errors.len() > before {
        return None;
    }
    Some(Waves {
        waves,
        on_failure: on_failure?,
    })
}

fn read_on_failure(r: &mut Reader, n: &Node, path: &str) -> Option<OnFailure> {
    r.one_of(n, path, &OnFailure::ALL)
}

fn read_wave(r: &mut Reader, node: &Node, path: &str, ctx: &Context) -> Option<WaveSpec> {
    let before = r.errors.len();
    r.map(node, path, WAVE_KEYS)?;
    let name = r.required(node, path, "name").and_then(|n| {
        let name = name_at(r, n, &join(path, "name"))?;
        if name.as_str().contains('.') {
            r.error(
                n.line,
                &join(path, "name"),
                format!("expected a wave name without dots (it ends the instance's name `<canary>.<wave>`), found \"{name}\""),
            );
            return None;
        }
        Some(name)
    });
    let output = r.required(node, path, "output").and_then(|n| {
        let text = r.string(n, &join(path, "output"))?;
        RepoPath::parse(&text)
            .map_err(|e| r.error(n.line, &join(path, "output"), e))
            .ok()
    });
    let sync = node
        .get("sync")
        .and_then(|n| read_sync_target(r, n, &join(path, "sync")));
    let settle = node
        .get("settle")
        .and_then(|n| r.duration(n, &join(path, "settle")));
    if node.get("sync").is_none() && node.get("settle").is_none() {
        r.error(
            node.line,
            path,
            "expected sync (the Flux Kustomization or Argo CD Application that applies this wave's folder) or settle (how long after a commit its cluster has applied it), found neither: sluice must know when the wave's commits are live",
        );
    }
    let metrics_server = node
        .get("metricsServer")
        .and_then(|n| read_url(r, n, &join(path, "metricsServer")));
    let metrics_secret = node
        .get("metricsSecretRef")
        .and_then(|n| read_metrics_secret(r, n, node, path));
    let cluster = node
        .get("cluster")
        .and_then(|n| read_cluster(r, n, &join(path, "cluster"), ctx.namespace));
    let (approval, policy) = match node.get("approval") {
        // A policy gates the wave's start as `approval: true` does, under that policy.
        Some(n) if matches!(n.value, crate::yaml::node::Value::Map(_)) => {
            let policy = crate::manifest::approval_policy::read(r, n, &join(path, "approval"));
            (true, policy)
        }
        Some(n) => (r.bool(n, &join(path, "approval")).unwrap_or(false), None),
        None => (false, None),
    };
    let analysis = node
        .get("analysis")
        .and_then(|n| read_wave_analysis(r, n, path, ctx));
    if r.errors.len() > before {
        return None;
    }
    Some(WaveSpec {
        name: name?,
        file: r.file.clone(),
        line: node.line,
        field: path.to_string(),
        output: output?,
        sync,
        settle,
        metrics_server,
        metrics_secret,
        cluster,
        approval,
        policy,
        analysis,
    })
}

/// `metricsSecretRef: {name: NAME}`: the Secret with the credentials of this wave's
/// `metricsServer`, which must be set beside it. The name becomes a path under the Secrets
/// folder (see `crate::secrets`), so it must be a Kubernetes name.
fn read_metrics_secret(r: &mut Reader, n: &Node, wave: &Node, path: &str) -> Option<Name> {
    let at = join(path, "metricsSecretRef");
    r.map(n, &at, &["name"])?;
    let name = r
        .required(n, &at, "name")
        .and_then(|v| name_at(r, v, &join(&at, "name")))?;
    if wave.get("metricsServer").is_none() {
        r.error(
            n.line,
            &at,
            "set without metricsServer: the Secret holds the credentials of the wave's own Prometheus; set metricsServer beside it",
        );
        return None;
    }
    Some(name)
}

/// A wave's `analysis`: a whole analysis in the canary's format, replacing the canary's in
/// this wave; its strategy must be the canary's (the route was read for that one).
fn read_wave_analysis(r: &mut Reader, n: &Node, path: &str, ctx: &Context) -> Option<Analysis> {
    let at = join(path, "analysis");
    let analysis = read_analysis(r, n, &at, ctx.format, Some(ctx.namespace), ctx.snapshot)?;
    let strategy = analysis.strategy.name();
    if strategy != ctx.strategy {
        r.error(
            n.line,
            &at,
            format!(
                "expected a {} analysis (the canary's strategy), found a {strategy} one: a wave changes the analysis, not the strategy",
                ctx.strategy
            ),
        );
        return None;
    }
    Some(analysis)
}

fn read_url(r: &mut Reader, n: &Node, path: &str) -> Option<String> {
    let text = r.string(n, path)?;
    if text.starts_with("http://") || text.starts_with("https://") {
        return Some(text);
    }
    r.error(
        n.line,
        path,
        format!("expected an http:// or https:// URL, found {text:?}"),
    );
    None
}

/// The keys of a wave's `cluster`; `tokenFile` and `caFile` only to refuse them at their line.
const CLUSTER_KEYS: &[&str] = &["kubeContext", "server", "secretRef", "tokenFile", "caFile"];

/// `cluster: {kubeContext: NAME}` or `cluster: {server: URL, secretRef: {name: NAME}}` (the
/// Secret in `namespace`, the canary's), with the line of `server` (or of `cluster`). The
/// repo names no file: `tokenFile` and `caFile` are refused (they once named host paths).
/// `http://` is read here and refused after reading unless the operator allows it (see
/// `crate::waves::servers`).
fn read_cluster(
    r: &mut Reader,
    n: &Node,
    path: &str,
    namespace: &Name,
) -> Option<(Cluster, usize)> {
    r.map(n, path, CLUSTER_KEYS)?;
    let mut files = false;
    for (key, what) in [("tokenFile", "token"), ("caFile", "ca.crt")] {
        if let Some(v) = n.get(key) {
            r.error(
                v.line,
                &join(path, key),
                format!("sluice reads no file the repo names: put the cluster's credentials in a Secret mapped into sluice (key {what}; a ServiceAccount token Secret has token and ca.crt) and name it with secretRef: {{name: NAME}} beside server"),
            );
            files = true;
        }
    }
    if files {
        return None;
    }
    match (n.get("kubeContext"), n.get("server"), n.get("secretRef")) {
        (Some(v), None, None) => {
            let text = r.string(v, &join(path, "kubeContext"))?;
            if text.trim().is_empty() {
                r.error(
                    v.line,
                    &join(path, "kubeContext"),
                    "expected a non-empty string",
                );
                return None;
            }
            Some((Cluster::KubeContext(text), n.line))
        }
        (None, Some(s), Some(secret)) => {
            let server = read_api_server(r, s, &join(path, "server"));
            let at = join(path, "secretRef");
            let secret = r.map(secret, &at, &["name"]).and_then(|secret| {
                r.required(secret, &at, "name")
                    .and_then(|v| name_at(r, v, &join(&at, "name")))
            });
            Some((
                Cluster::Server {
                    server: server?,
                    namespace: namespace.clone(),
                    secret: secret?,
                },
                s.line,
            ))
        }
        _ => {
            r.error(
                n.line,
                path,
                "expected {kubeContext: NAME} (a context of the kubeconfig sluice is given) or {server: URL, secretRef: {name: NAME}} (the Secret, mapped into sluice, with the API server's token and optional ca.crt)",
            );
            None
        }
    }
}

/// A wave cluster's `server`: an `https://` (or `http://`) URL with a host, and without
/// credentials, query or fragment.
fn read_api_server(r: &mut Reader, n: &Node, path: &str) -> Option<String> {
    let text = r.string(n, path)?;
    let problem = match url::Url::parse(&text) {
        Err(e) => Some(e.to_string()),
        Ok(url) if !matches!(url.scheme(), "https" | "http") => {
            Some(format!("the scheme is {}", url.scheme()))
        }
        Ok(url) if url.host_str().is_none_or(str::is_empty) => Some("it has no host".into()),
        Ok(url) if !url.username().is_empty() || url.password().is_some() => {
            Some("it holds credentials; put them in the Secret secretRef names".into())
        }
        Ok(url) if url.query().is_some() || url.fragment().is_some() => {
            Some("it has a query or fragment".into())
        }
        Ok(_) => None,
    };
    match problem {
        None => Some(text),
        Some(why) => {
            let shown: String = text.chars().take(200).collect();
            r.error(
                n.line,
                path,
                format!(
                    "expected the https:// URL of the cluster's API server, found {shown:?}: {why}"
                ),
            );
            None
        }
    }
}

/// Two waves with one name are an error at the second.
fn check_names(r: &mut Reader, waves: &[WaveSpec], path: &str) {
    let mut first: BTreeMap<&Name, usize> = BTreeMap::new();
    for (i, wave) in waves.iter().enumerate() {
        if let Some(line) = first.get(&wave.name) {
            r.error(
                wave.line,
                &join(&index(path, i), "name"),
                format!(
                    "duplicate wave name {}: already used by the wave at line {line}",
                    wave.name
                ),
            );
            continue;
        }
        first.insert(&wave.name, wave.line);
    }
}

/// Two waves writing one folder, or one inside the other's, are an error at the second.
fn check_outputs(r: &mut Reader, waves: &[WaveSpec], path: &str) {
    let inside = |a: &str, b: &str| a.strip_prefix(b).is_some_and(|rest| rest.starts_with('/'));
    for (i, wave) in waves.iter().enumerate() {
        let out = wave.output.as_str();
        let clash = waves[..i].iter().find(|w| {
            let other = w.output.as_str();
            other == out || inside(out, other) || inside(other, out)
        });
        if let Some(other) = clash {
            r.error(
                wave.line,
                &join(&index(path, i), "output"),
                format!(
                    "output folder {out} overlaps the output folder {} of wave {} (line {}); give each wave its own cluster folder",
                    other.output, other.name, other.line
                ),
            );
        }
    }
}

/// One instance of `canary` per wave.
fn instances(r: &mut Reader, canary: &Canary, waves: &Waves) -> Vec<Canary> {
    let names: Vec<Name> = waves.waves.iter().map(|w| w.name.clone()).collect();
    let mut out = Vec::new();
    for (i, wave) in waves.waves.iter().enumerate() {
        let id_name = match instance_name(&canary.id.name, &wave.name) {
            Ok(n) => n,
            Err(e) => {
                let at = join(&index("spec.waves", i), "name");
                r.error(wave.line, &at, format!("the wave's instance name: {e}"));
                continue;
            }
        };
        let mut c = canary.clone();
        c.id.name = id_name;
        c.output = wave.output.clone();
        c.sync = wave.sync.clone();
        c.settle = wave.settle.unwrap_or(canary.settle);
        if let Some(server) = &wave.metrics_server {
            c.metrics_server = Some(server.clone());
        }
        if let Some(analysis) = &wave.analysis {
            c.analysis = analysis.clone();
        }
        if wave.approval {
            c.analysis.approvals.before_rollout = true;
        }
        if let Some(policy) = &wave.policy {
            c.approval = Some(policy.clone());
        }
        c.wave = Some(WaveOf {
            canary: canary.id.name.clone(),
            name: wave.name.clone(),
            file: wave.file.clone(),
            line: wave.line,
            field: wave.field.clone(),
            index: i,
            waves: names.clone(),
            approval: wave.approval,
            on_failure: waves.on_failure,
            cluster: wave.cluster.as_ref().map(|(c, _)| c.clone()),
            cluster_line: wave.cluster.as_ref().map_or(0, |(_, line)| *line),
            metrics_secret: wave.metrics_secret.clone(),
        });
        out.push(c);
    }
    if out.len() != waves.waves.len() {
        return Vec::new();
    }
    out
}

/// The canary names an instance id name `<name>.<wave>` may come from (every cut at a dot,
/// since both a canary's and a wave's name may hold dots).
pub fn canary_names(id_name: &Name) -> impl Iterator<Item = &str> {
    let text = id_name.as_str();
    text.match_indices('.').map(move |(i, _)| &text[..i])
}
