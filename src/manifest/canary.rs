//! Reads one Canary document (native `sluice.dev/v1alpha1` or Flagger `flagger.app/v1beta1`)
//! into a validated [`Canary`], reporting every problem with its line and field.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::manifest::analysis::read_analysis;
use crate::manifest::model::{
    Analysis, AutoscalerKind, AutoscalerRef, Canary, CanaryId, Format, PortRef, RepoPath,
    ServiceMetadata, ServiceSpec, Strategy, Target,
};
use crate::manifest::settings::Settings;
use crate::manifest::sync::read_sync_target;
use crate::route::route_source::{self, SourceInput};
use crate::route::{
    parse_provider, provider_by_prefix, route_objects, AbInput, FlaggerInput, OwnTarget, Provider,
    Route, FLAGGER_DEFAULT_PROVIDER, FLAGGER_DEFAULT_PROVIDER_NAME,
};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{
    index, join, metadata_name, name_at, warn_ref_api_version, Reader, OBJECT_KEYS,
};
use crate::yaml::snapshot::Snapshot;

const NATIVE_SPEC_KEYS: &[&str] = &[
    "provider",
    "metricsServer",
    "source",
    "routeOnly",
    "routeSource",
    "output",
    "service",
    "route",
    "analysis",
    "skipAnalysis",
    "suspend",
    "progressDeadlineSeconds",
    "sync",
    // Read by `manifest::waves`.
    "waves",
    "onFailure",
    "approval",
];
const FLAGGER_SPEC_KEYS: &[&str] = &[
    "analysis",
    "autoscalerRef",
    "ingressRef",
    "metricsServer",
    "progressDeadlineSeconds",
    "provider",
    "revertOnDeletion",
    "routeRef",
    "routeSource",
    "service",
    "skipAnalysis",
    "suspend",
    "targetRef",
    "upstreamRef",
];
const FLAGGER_SERVICE_KEYS: &[&str] = &[
    "apex",
    "appProtocol",
    "backendTimeout",
    "backends",
    "canary",
    "corsPolicy",
    "delegation",
    "gatewayRefs",
    "gateways",
    "headers",
    "headless",
    "hosts",
    "match",
    "meshName",
    "mirror",
    "name",
    "port",
    "portDiscovery",
    "portName",
    "primary",
    "retries",
    "rewrite",
    "targetPort",
    "timeout",
    "trafficDistribution",
    "trafficPolicy",
    "unmanagedMetadata",
];

fn repo_path_at(r: &mut Reader, node: &Node, path: &str) -> Option<RepoPath> {
    let text = r.string(node, path)?;
    match RepoPath::parse(&text) {
        Ok(p) => Some(p),
        Err(e) => {
            r.error(node.line, path, e);
            None
        }
    }
}

fn read_id(r: &mut Reader, root: &Node) -> Option<CanaryId> {
    let (name, namespace) = metadata_name(r, root)?;
    Some(CanaryId {
        name: name?,
        namespace: namespace?,
    })
}

fn read_bool(r: &mut Reader, spec: &Node, key: &str) -> bool {
    spec.get(key)
        .and_then(|n| r.bool(n, &join("spec", key)))
        .unwrap_or(false)
}

/// The annotation that orders canaries waiting under `maxConcurrentCanaries`.
pub const PRIORITY_ANNOTATION: &str = "sluice.dev/priority";

/// `metadata.annotations["sluice.dev/priority"]`: an integer (annotations are strings, so
/// `"10"` and `10` both read); 0 when absent.
fn read_priority(r: &mut Reader, root: &Node) -> i64 {
    let Some(n) = root
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(PRIORITY_ANNOTATION))
    else {
        return 0;
    };
    let path = format!("metadata.annotations.{PRIORITY_ANNOTATION}");
    let Some(text) = r.string(n, &path) else {
        return 0;
    };
    match text.trim().parse::<i64>() {
        Ok(v) if (-1_000_000..=1_000_000).contains(&v) => v,
        _ => {
            r.error(
                n.line,
                &path,
                format!("expected an integer in -1000000..=1000000 (higher starts first), found {text:?}"),
            );
            0
        }
    }
}

fn read_deadline(r: &mut Reader, spec: &Node) -> Duration {
    spec.get("progressDeadlineSeconds")
        .and_then(|n| r.int(n, "spec.progressDeadlineSeconds", 1, 86_400 * 365))
        .and_then(|v| u64::try_from(v).ok())
        .map_or(Duration::from_secs(600), Duration::from_secs)
}

fn read_metrics_server(r: &mut Reader, spec: &Node) -> Option<String> {
    let n = spec.get("metricsServer")?;
    let text = r.string(n, "spec.metricsServer")?;
    if text.starts_with("http://") || text.starts_with("https://") {
        Some(text)
    } else {
        r.error(
            n.line,
            "spec.metricsServer",
            format!("expected an http:// or https:// URL, found {text:?}"),
        );
        None
    }
}

fn read_port(r: &mut Reader, node: &Node, path: &str) -> Option<u16> {
    r.int(node, path, 1, 65535)
        .and_then(|v| u16::try_from(v).ok())
}

fn read_target_port(r: &mut Reader, node: &Node, path: &str) -> Option<PortRef> {
    match &node.value {
        Value::Scalar {
            text,
            quoted: false,
        } if text.parse::<i64>().is_ok() => read_port(r, node, path).map(PortRef::Number),
        _ => r.string(node, path).map(PortRef::Name),
    }
}

/// Reads a native `sluice.dev/v1alpha1` Canary.
/// `snapshot` is the repo it was loaded from, where a `spec.routeSource` is found.
pub fn read_native(
    r: &mut Reader,
    root: &Node,
    settings: &Settings,
    snapshot: &Snapshot,
) -> Option<Canary> {
    let before = r.errors.len();
    let (id, spec) = read_head(r, root, NATIVE_SPEC_KEYS)?;

    let target = read_native_target(r, spec);
    let output = match spec.get("output") {
        Some(n) => repo_path_at(r, n, "spec.output"),
        None => id.as_ref().and_then(|id| {
            settings
                .output_for(id.namespace.as_str(), id.name.as_str())
                .map_err(|e| r.error(spec.line, "spec.output", e))
                .ok()
        }),
    };
    let service = r.required(spec, "spec", "service").and_then(|n| {
        read_service(
            r,
            n,
            "spec.service",
            &["name", "port", "targetPort"],
            id.as_ref(),
        )
    });
    let mut route = match spec.get("routeSource") {
        Some(n) => source_input(n, spec, snapshot, id.as_ref(), service.as_ref())
            .and_then(|input| route_source::read_native(r, &input)),
        None => r
            .required(spec, "spec", "route")
            .and_then(|n| Route::read_native(r, n)),
    };
    let analysis = r.required(spec, "spec", "analysis").and_then(|n| {
        read_analysis(
            r,
            n,
            "spec.analysis",
            Format::Native,
            id.as_ref().map(|i| &i.namespace),
            // Native canaries have no `alerts`: nothing to resolve.
            &Snapshot::EMPTY,
        )
    });
    // A/B: the router converts the matches now, as for Flagger input, so a bad one is
    // reported with its line by `sluice validate`.
    read_ab_matches(r, &mut route, analysis.as_ref(), spec, None);
    let skip_analysis = read_bool(r, spec, "skipAnalysis");
    let (suspend, priority) = (read_bool(r, spec, "suspend"), read_priority(r, root));
    let progress_deadline = read_deadline(r, spec);
    let provider = spec
        .get("provider")
        .and_then(|n| r.string(n, "spec.provider"));
    let metrics_server = read_metrics_server(r, spec);
    let ns = id.as_ref().map(|i| i.namespace.as_str());
    crate::judge::canary::check_native_sources(r, root, provider.as_deref(), ns, snapshot);
    let (sync, approval) = read_native_defaults(r, spec, settings);
    if r.errors.len() > before {
        return None;
    }
    let canary = Canary {
        settle: settings.settle,
        adoption_hold: settings.adoption_hold,
        provider,
        metrics_server,
        sync,
        approval,
        autoscaler: None,
        revert_on_deletion: false,
        wave: None,
        priority,
        id: id?,
        file: r.file.clone(),
        line: root.line,
        format: Format::Native,
        target: target?,
        output: output?,
        service: service?,
        route: route?,
        analysis: analysis?,
        skip_analysis,
        rollback_window: 0,
        suspend,
        progress_deadline,
    };
    check_route(r, canary, spec, before)
}

/// A native canary's `spec.sync` and `spec.approval`, each the repo's default when absent. A
/// bad block is reported through `r` (and fails the canary).
fn read_native_defaults(
    r: &mut Reader,
    spec: &Node,
    settings: &Settings,
) -> (
    Option<crate::manifest::model::SyncTarget>,
    Option<crate::core::approval::ApprovalPolicy>,
) {
    let sync = match spec.get("sync") {
        Some(n) => read_sync_target(r, n, "spec.sync"),
        None => settings.sync.clone(),
    };
    let approval = match spec.get("approval") {
        Some(n) => crate::manifest::approval_policy::read(r, n, "spec.approval"),
        None => settings.approval_policy(),
    };
    (sync, approval)
}

/// What `route::route_source` reads a `spec.routeSource` with (a sluice extension in both
/// formats); `None` when the canary's name or Service failed (already reported).
fn source_input<'a>(
    node: &'a Node,
    spec: &'a Node,
    snapshot: &'a Snapshot,
    id: Option<&'a CanaryId>,
    service: Option<&'a ServiceSpec>,
) -> Option<SourceInput<'a>> {
    let (id, service) = (id?, service?);
    Some(SourceInput {
        node,
        spec,
        snapshot,
        namespace: &id.namespace,
        service: &service.name,
        port: service.port,
    })
}

fn read_route_only(r: &mut Reader, node: &Node) -> Option<Target> {
    let p = "spec.routeOnly";
    r.map(node, p, &["services", "revision"])?;
    let services = r.required(node, p, "services").and_then(|n| {
        let sp = join(p, "services");
        let items = r.seq(n, &sp)?;
        if items.len() != 2 {
            r.error(
                n.line,
                &sp,
                format!("expected exactly two service names, found {}", items.len()),
            );
            return None;
        }
        let a = name_at(r, &items[0], &index(&sp, 0));
        let b = name_at(r, &items[1], &index(&sp, 1));
        let (a, b) = (a?, b?);
        if a == b {
            r.error(
                items[1].line,
                &index(&sp, 1),
                format!("expected two different services, found {a} twice"),
            );
            return None;
        }
        Some([a, b])
    });
    let revision = r.required(node, p, "revision").and_then(|n| {
        let text = r.string(n, &join(p, "revision"))?;
        if text.trim().is_empty() {
            r.error(
                n.line,
                &join(p, "revision"),
                "expected a non-empty revision string",
            );
            return None;
        }
        Some(text)
    });
    Some(Target::RouteOnly {
        services: services?,
        revision: revision?,
    })
}

fn read_service(
    r: &mut Reader,
    node: &Node,
    path: &str,
    keys: &[&str],
    id: Option<&CanaryId>,
) -> Option<ServiceSpec> {
    r.map(node, path, keys)?;
    let name = match node.get("name") {
        Some(n) => name_at(r, n, &join(path, "name")),
        None => id.map(|id| id.name.clone()),
    };
    let port = r
        .required(node, path, "port")
        .and_then(|n| read_port(r, n, &join(path, "port")));
    let target_port = match node.get("targetPort") {
        Some(n) => Some(read_target_port(r, n, &join(path, "targetPort"))?),
        None => None,
    };
    let mut spec = ServiceSpec::new(name?, port?);
    spec.target_port = target_port;
    Some(spec)
}

/// Flagger `service` fields its three Services carry: the port's name and `appProtocol`,
/// `headless`, `portDiscovery`, `trafficDistribution`, and the `apex`/`primary`/`canary`
/// labels and annotations. `unmanagedMetadata` (live metadata a GitOps apply would fight
/// over) is refused, so nobody believes it applies.
fn read_service_fields(r: &mut Reader, svc: &Node, spec: &mut ServiceSpec) {
    let at = |key: &str| join("spec.service", key);
    if let Some(v) = svc
        .get("portDiscovery")
        .and_then(|n| r.bool(n, &at("portDiscovery")))
    {
        spec.port_discovery = v;
    }
    if let Some(v) = svc.get("headless").and_then(|n| r.bool(n, &at("headless"))) {
        spec.headless = v;
    }
    if let Some(n) = svc.get("portName") {
        if let Some(name) = r.string(n, &at("portName")) {
            if is_port_name(&name) {
                spec.port_name = name;
            } else {
                r.error(n.line, &at("portName"), format!("expected a port name (at most 15 lowercase letters, digits and '-', with a letter, not starting or ending with '-'), found {name:?}"));
            }
        }
    }
    if let Some(n) = svc.get("appProtocol") {
        spec.app_protocol = r.string(n, &at("appProtocol")).filter(|p| !p.is_empty());
    }
    for key in ["apex", "primary", "canary"] {
        if let Some(n) = svc.get(key) {
            let metadata = read_custom_metadata(r, n, &at(key));
            match key {
                "apex" => spec.apex = metadata,
                "primary" => spec.primary = metadata,
                _ => spec.canary = metadata,
            }
        }
    }
    if let Some(n) = svc.get("trafficDistribution") {
        spec.traffic_distribution = read_traffic_distribution(r, n, &at("trafficDistribution"));
    }
    for (key, what) in [(
        "unmanagedMetadata",
        "keep no live metadata (unmanagedMetadata): every label and annotation is in git",
    )] {
        if let Some(n) = svc.get(key) {
            r.error(
                n.line,
                &at(key),
                format!("not supported: sluice's Services {what}; remove it, or roll this canary out without sluice"),
            );
        }
    }
}

/// The values of a Service's `spec.trafficDistribution` the Kubernetes API server accepts
/// (`PreferSameZone` and `PreferSameNode` since Kubernetes 1.33).
const TRAFFIC_DISTRIBUTIONS: [&str; 3] = ["PreferClose", "PreferSameZone", "PreferSameNode"];

/// `service.trafficDistribution`, written to the three Services as Flagger writes it; empty is
/// Flagger's "not set". Flagger's CRD takes any string and the API server then refuses the
/// Service; sluice refuses the canary at its line instead.
fn read_traffic_distribution(r: &mut Reader, n: &Node, field: &str) -> Option<String> {
    let text = r.string(n, field)?;
    if text.is_empty() {
        return None;
    }
    if TRAFFIC_DISTRIBUTIONS.contains(&text.as_str()) {
        return Some(text);
    }
    r.error(
        n.line,
        field,
        format!(
            "expected {} (the values Kubernetes accepts), found {text:?}",
            TRAFFIC_DISTRIBUTIONS.join(", ")
        ),
    );
    None
}

/// A Kubernetes port name (an IANA service name): 1..=15 lowercase letters, digits and '-',
/// at least one letter, no leading, trailing or double '-'.
fn is_port_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Flagger's `CustomMetadata`: `labels` and `annotations`, each a map of strings.
fn read_custom_metadata(r: &mut Reader, node: &Node, path: &str) -> ServiceMetadata {
    let mut metadata = ServiceMetadata::default();
    if r.map(node, path, &["labels", "annotations"]).is_none() {
        return metadata;
    }
    for key in ["labels", "annotations"] {
        let Some(n) = node.get(key) else { continue };
        let at = join(path, key);
        let Value::Map(entries) = &n.value else {
            r.error(n.line, &at, "expected a mapping of names to strings");
            continue;
        };
        let mut values = BTreeMap::new();
        for (k, v) in entries {
            if let Some(text) = r.string(v, &join(&at, &k.text)) {
                values.insert(k.text.clone(), text);
            }
        }
        if key == "labels" {
            metadata.labels = values;
        } else {
            metadata.annotations = values;
        }
    }
    metadata
}

/// Lets the router check the whole canary (the `kubernetes` router runs blue/green only);
/// `None` when it or anything before (since `before` errors) reported a problem.
fn check_route(r: &mut Reader, canary: Canary, spec: &Node, before: usize) -> Option<Canary> {
    canary.route.check_canary(r, &canary, spec);
    (r.errors.len() == before).then_some(canary)
}

/// Hands an A/B canary's `analysis.match` to its router.
fn read_ab_matches(
    r: &mut Reader,
    route: &mut Option<Route>,
    analysis: Option<&Analysis>,
    spec: &Node,
    service: Option<&Node>,
) {
    let matches = spec.get("analysis").and_then(|n| n.get("match"));
    if let (Some(route), Some(Strategy::AB { .. }), Some(matches)) =
        (route, analysis.map(|a| &a.strategy), matches)
    {
        route.read_ab_matches(r, &AbInput { matches, service });
    }
}

const AUTOSCALER_REF_KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "primaryScalerQueries",
    "primaryScalerReplicas",
];

/// Flagger's `spec.autoscalerRef`. The object it names is resolved in the repo by the
/// workload adapter (`workload::autoscaler`), which reports a missing one with this line.
fn read_autoscaler_ref(r: &mut Reader, node: &Node) -> Option<AutoscalerRef> {
    let p = "spec.autoscalerRef";
    let before = r.errors.len();
    r.map(node, p, AUTOSCALER_REF_KEYS)?;
    let kind = read_autoscaler_kind(r, node);
    let name = r
        .required(node, p, "name")
        .and_then(|n| name_at(r, n, &join(p, "name")));
    let (min, max) = node
        .get("primaryScalerReplicas")
        .map_or((None, None), |reps| read_primary_replicas(r, reps, kind));
    let queries = node
        .get("primaryScalerQueries")
        .and_then(|q| read_primary_queries(r, q, kind));
    if r.errors.len() > before {
        return None;
    }
    Some(AutoscalerRef {
        kind: kind?,
        name: name?,
        line: node.get("name").map_or(node.line, |n| n.line),
        primary_min_replicas: min,
        primary_max_replicas: max,
        primary_queries: queries,
    })
}

/// `spec.autoscalerRef.kind`. Its `apiVersion` chooses nothing: the object found by kind and
/// name decides ([`warn_autoscaler_api`]).
fn read_autoscaler_kind(r: &mut Reader, node: &Node) -> Option<AutoscalerKind> {
    let p = "spec.autoscalerRef";
    r.required(node, p, "kind").and_then(|k| {
        let text = r.string(k, &join(p, "kind"))?;
        match text.as_str() {
            "HorizontalPodAutoscaler" => Some(AutoscalerKind::HorizontalPodAutoscaler),
            "ScaledObject" => Some(AutoscalerKind::ScaledObject),
            _ => {
                r.error(
                    k.line,
                    &join(p, "kind"),
                    format!("expected HorizontalPodAutoscaler or ScaledObject (the autoscalers Flagger reconciles), found {text:?}"),
                );
                None
            }
        }
    })
}

/// A `spec.autoscalerRef.apiVersion` that differs from the autoscaler's own is a warning.
/// Flagger reads an HPA by name through `autoscaling/v2` (fluxcd/flagger
/// `pkg/canary/hpa_reconciler.go`) and a ScaledObject through `keda.sh/v1alpha1`, whatever
/// the reference says; an object of an API sluice cannot copy is refused with its own file
/// and line when it is resolved (`workload::autoscaler`).
fn warn_autoscaler_api(
    r: &mut Reader,
    node: &Node,
    reference: &AutoscalerRef,
    namespace: &str,
    snapshot: &Snapshot,
) {
    let Some(api) = node.get("apiVersion") else {
        return;
    };
    let kind = reference.kind;
    let mut found = snapshot
        .find(kind.as_str(), reference.name.as_str())
        .filter(|o| o.namespace.unwrap_or(namespace) == namespace);
    // Two of them are an error where the reference is resolved.
    if let (Some(object), None) = (found.next(), found.next()) {
        let reads = format!(
            "Flagger reads the {} by name through {}",
            kind.as_str(),
            kind.api_version()
        );
        warn_ref_api_version(r, api, "spec.autoscalerRef.apiVersion", &object, &reads);
    }
}

/// `spec.autoscalerRef.primaryScalerReplicas`: the primary autoscaler's (min, max).
fn read_primary_replicas(
    r: &mut Reader,
    reps: &Node,
    kind: Option<AutoscalerKind>,
) -> (Option<i32>, Option<i32>) {
    let rp = join("spec.autoscalerRef", "primaryScalerReplicas");
    if r.map(reps, &rp, &["minReplicas", "maxReplicas"]).is_none() {
        return (None, None);
    }
    // An HPA's minReplicas is at least 1 (0 needs the HPAScaleToZero alpha gate);
    // KEDA allows 0 (scale to zero).
    let floor = match kind {
        Some(AutoscalerKind::ScaledObject) => 0,
        _ => 1,
    };
    let min = reps
        .get("minReplicas")
        .and_then(|n| r.int(n, &join(&rp, "minReplicas"), floor, i64::from(i32::MAX)))
        .and_then(|v| i32::try_from(v).ok());
    let max = reps
        .get("maxReplicas")
        .and_then(|n| r.int(n, &join(&rp, "maxReplicas"), 1, i64::from(i32::MAX)))
        .and_then(|v| i32::try_from(v).ok());
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            r.error(
                reps.line,
                &rp,
                format!("expected minReplicas <= maxReplicas, found {lo} > {hi}"),
            );
        }
    }
    (min, max)
}

/// `spec.autoscalerRef.primaryScalerQueries`: a ScaledObject's trigger queries by name.
fn read_primary_queries(
    r: &mut Reader,
    q: &Node,
    kind: Option<AutoscalerKind>,
) -> Option<BTreeMap<String, String>> {
    let qp = join("spec.autoscalerRef", "primaryScalerQueries");
    if kind == Some(AutoscalerKind::HorizontalPodAutoscaler) {
        r.error(
            q.line,
            &qp,
            "only a ScaledObject has trigger queries; Flagger ignores this field for a HorizontalPodAutoscaler, so sluice refuses it",
        );
        return None;
    }
    let mut out = BTreeMap::new();
    if let Value::Map(entries) = &q.value {
        for (k, v) in entries {
            if let Some(text) = r.string(v, &join(&qp, &k.text)) {
                out.insert(k.text.clone(), text);
            }
        }
    } else {
        r.error(
            q.line,
            &qp,
            format!(
                "expected a map of trigger name to query, found a {}",
                q.kind()
            ),
        );
    }
    Some(out)
}

/// Reads a Flagger `flagger.app/v1beta1` Canary, unchanged.
/// `snapshot` is the repo the canary was loaded from: its router looks up the objects the
/// canary references there.
/// A Flagger canary's `spec.analysis`, with the judge its `sluice.dev/judge` annotation names.
fn read_flagger_analysis(
    r: &mut Reader,
    root: &Node,
    spec: &Node,
    id: Option<&CanaryId>,
    snapshot: &Snapshot,
) -> Option<crate::manifest::model::Analysis> {
    let analysis = r.required(spec, "spec", "analysis").and_then(|n| {
        read_analysis(
            r,
            n,
            "spec.analysis",
            Format::Flagger,
            id.map(|i| &i.namespace),
            snapshot,
        )
    });
    let judge = id.and_then(|id| {
        crate::judge::canary::read_annotation(r, root, id.namespace.as_str(), snapshot)
    });
    analysis.map(|a| crate::manifest::model::Analysis {
        judge: judge.flatten(),
        ..a
    })
}

/// The canary's object keys, its id and its `spec` (whose keys must be among `spec_keys`).
fn read_head<'n>(
    r: &mut Reader,
    root: &'n Node,
    spec_keys: &[&str],
) -> Option<(Option<CanaryId>, &'n Node)> {
    r.map(root, "", OBJECT_KEYS)?;
    let id = read_id(r, root);
    let spec = r.required(root, "", "spec")?;
    r.map(spec, "spec", spec_keys)?;
    Some((id, spec))
}

/// A native canary's workload: `spec.source` or `spec.routeOnly`, exactly one of them.
fn read_native_target(r: &mut Reader, spec: &Node) -> Option<Target> {
    match (spec.get("source"), spec.get("routeOnly")) {
        (Some(s), None) => repo_path_at(r, s, "spec.source").map(|path| Target::Source { path }),
        (None, Some(ro)) => read_route_only(r, ro),
        (Some(_), Some(ro)) => {
            r.error(
                ro.line,
                "spec.routeOnly",
                "expected either spec.source or spec.routeOnly, found both",
            );
            None
        }
        (None, None) => {
            r.error(
                spec.line,
                "spec.source",
                "required field is missing (or set spec.routeOnly)",
            );
            None
        }
    }
}

pub fn read_flagger(
    r: &mut Reader,
    root: &Node,
    settings: &Settings,
    snapshot: &Snapshot,
) -> Option<Canary> {
    let before = r.errors.len();
    let (id, spec) = read_head(r, root, FLAGGER_SPEC_KEYS)?;

    let target = r
        .required(spec, "spec", "targetRef")
        .and_then(|n| read_target_ref(r, spec, n));
    // A bad reference adds its errors to `r`, which fails the canary below.
    let autoscaler = spec.get("autoscalerRef").and_then(|n| {
        let reference = read_autoscaler_ref(r, n)?;
        if let Some(id) = &id {
            warn_autoscaler_api(r, n, &reference, id.namespace.as_str(), snapshot);
        }
        Some(reference)
    });
    let provider = read_flagger_provider(r, spec, settings);
    check_own_target(r, spec, target.as_ref(), provider);
    // A router that rolls out its own target (a Knative Service) creates no Service.
    let own_target = provider.and_then(Provider::own_target);
    let service_node = if own_target.is_some() {
        spec.get("service")
    } else {
        r.required(spec, "spec", "service")
    };
    let service = read_flagger_service(r, service_node, target.as_ref(), id.as_ref(), own_target);
    let mut route = match spec.get("routeSource") {
        Some(n) => source_input(n, spec, snapshot, id.as_ref(), service.as_ref())
            .and_then(|input| route_source::read_flagger(r, &input, provider)),
        None => provider.and_then(|p| {
            p.read_flagger(
                r,
                &FlaggerInput {
                    service: service_node,
                    analysis: spec.get("analysis"),
                    metadata: root.get("metadata"),
                    spec,
                    namespace: id.as_ref().map(|i| i.namespace.as_str()),
                    snapshot,
                },
            )
        }),
    };
    let analysis = read_flagger_analysis(r, root, spec, id.as_ref(), snapshot);
    // A/B: Flagger merges analysis.match into service.match; the router checks what that
    // would build.
    read_ab_matches(r, &mut route, analysis.as_ref(), spec, service_node);
    let output = id.as_ref().and_then(|id| {
        settings
            .output_for(id.namespace.as_str(), id.name.as_str())
            .map_err(|e| r.error(spec.line, "output", e))
            .ok()
    });
    let skip_analysis = read_bool(r, spec, "skipAnalysis");
    let suspend = read_bool(r, spec, "suspend");
    let priority = read_priority(r, root);
    let revert_on_deletion = read_bool(r, spec, "revertOnDeletion");
    if let (true, Some(own)) = (revert_on_deletion, own_target) {
        let line = spec.get("revertOnDeletion").map_or(spec.line, |n| n.line);
        r.error(line, "spec.revertOnDeletion", own.no_revert);
    }
    let progress_deadline = read_deadline(r, spec);
    let provider_name = spec
        .get("provider")
        .and_then(|n| n.as_str().map(str::to_string))
        .or_else(|| settings.provider_name.clone())
        .or_else(|| Some(FLAGGER_DEFAULT_PROVIDER_NAME.to_string()));
    let metrics_server = read_metrics_server(r, spec);
    let ns = id.as_ref().map(|i| i.namespace.as_str());
    crate::judge::canary::check_annotation_sources(r, root, provider_name.as_deref(), ns, snapshot);
    // A route field this provider's router would drop is refused, not ignored.
    if let Some(p) = provider {
        crate::manifest::flagger_fields::refuse_unread(r, p, spec, before);
    }
    let approval = crate::manifest::approval_policy::read_annotations(r, root)
        .map(|own| own.or_else(|| settings.approval_policy()));
    if r.errors.len() > before {
        return None;
    }
    let canary = Canary {
        settle: settings.settle,
        approval: approval?,
        adoption_hold: settings.adoption_hold,
        provider: provider_name,
        metrics_server,
        sync: settings.sync.clone(),
        autoscaler,
        revert_on_deletion,
        wave: None,
        priority,
        id: id?,
        file: r.file.clone(),
        line: root.line,
        format: Format::Flagger,
        target: target?,
        output: output?,
        service: service?,
        route: route?,
        analysis: analysis?,
        skip_analysis,
        rollback_window: 0,
        suspend,
        progress_deadline,
    };
    check_route(r, canary, spec, before)
}

/// `spec.targetRef`: a Deployment or DaemonSet, or the object a router rolls out itself
/// (a Knative Service) when its `apiVersion` or the canary's provider selects that router.
fn read_target_ref(r: &mut Reader, spec: &Node, n: &Node) -> Option<Target> {
    r.map(n, "spec.targetRef", &["apiVersion", "kind", "name"])?;
    let kind = r.required(n, "spec.targetRef", "kind").and_then(|k| {
        let text = r.string(k, "spec.targetRef.kind")?;
        let api_version = n.get("apiVersion").and_then(Node::as_str);
        let provider = spec
            .get("provider")
            .and_then(Node::as_str)
            .and_then(|p| parse_provider(p).ok());
        // Its router (the one that rolls such a target out) reads and checks it.
        let own = crate::route::own_targets().any(|t| {
            t.kind == text
                && (api_version == Some(t.api_version)
                    || provider.and_then(Provider::own_target) == Some(t))
        });
        if !own && !["Deployment", "DaemonSet"].contains(&text.as_str()) {
            r.error(
                k.line,
                "spec.targetRef.kind",
                format!(
                    "expected Deployment or DaemonSet (the workloads sluice manages), found {text:?}"
                ),
            );
            return None;
        }
        Some(text)
    });
    let name = r
        .required(n, "spec.targetRef", "name")
        .and_then(|v| name_at(r, v, "spec.targetRef.name"));
    Some(Target::TargetRef {
        kind: kind?,
        name: name?,
    })
}

/// `spec.provider` (default: the settings', else Flagger's), and the references
/// (`ingressRef` ...) refused when its router does not read them.
fn read_flagger_provider(r: &mut Reader, spec: &Node, settings: &Settings) -> Option<Provider> {
    let provider = match spec.get("provider") {
        Some(n) => r
            .string(n, "spec.provider")
            .and_then(|text| match parse_provider(&text) {
                Ok(p) => {
                    // `gatewayapi:v1alpha2`: say which router and API it runs as.
                    if let Some(note) = provider_by_prefix(&text) {
                        r.warn(n.line, "spec.provider", note);
                    }
                    Some(p)
                }
                Err(e) => {
                    r.error(n.line, "spec.provider", e);
                    None
                }
            }),
        // Flagger's default mesh provider is Istio: a Canary written for it names none.
        None => Some(settings.provider.unwrap_or(FLAGGER_DEFAULT_PROVIDER)),
    };
    // A reference the provider's router does not read would be dropped: refuse it.
    let reads = provider.map_or(&[][..], |p| p.references());
    for key in ["ingressRef", "upstreamRef", "routeRef"] {
        if let Some(n) = spec.get(key).filter(|_| !reads.contains(&key)) {
            r.error(
                n.line,
                &join("spec", key),
                format!("not supported: sluice routes with {} only", route_objects()),
            );
        }
    }
    provider
}

/// A target a router rolls out itself (a Knative Service) with another provider is an error
/// at `spec.provider` (Flagger refuses it too).
fn check_own_target(
    r: &mut Reader,
    spec: &Node,
    target: Option<&Target>,
    provider: Option<Provider>,
) {
    let Some(Target::TargetRef { kind, .. }) = target else {
        return;
    };
    let Some(provider) = provider else {
        return;
    };
    let Some(own) = crate::route::own_targets().find(|t| t.kind == kind) else {
        return;
    };
    if provider.own_target().is_none() {
        let line = spec.get("provider").map_or(spec.line, |n| n.line);
        r.error(line, "spec.provider", own.other_provider);
    }
}

/// `spec.service` of a Flagger canary. A router that rolls out its own target (a Knative
/// Service) needs none: the target's name stands in (its port unused).
fn read_flagger_service(
    r: &mut Reader,
    service_node: Option<&Node>,
    target: Option<&Target>,
    id: Option<&CanaryId>,
    own_target: Option<&OwnTarget>,
) -> Option<ServiceSpec> {
    let target_name = match target {
        Some(Target::TargetRef { name, .. }) => Some(name),
        _ => None,
    };
    let service = service_node.and_then(|n| {
        let target_id = target_name.map(|name| CanaryId {
            namespace: id.map_or_else(|| name.clone(), |i| i.namespace.clone()),
            name: name.clone(),
        });
        read_service(
            r,
            n,
            "spec.service",
            FLAGGER_SERVICE_KEYS,
            target_id.as_ref(),
        )
    });
    match (service, service_node) {
        (Some(mut spec), Some(n)) => {
            read_service_fields(r, n, &mut spec);
            Some(spec)
        }
        (None, None) if own_target.is_some() => {
            target_name.map(|name| ServiceSpec::new(name.clone(), 80))
        }
        (service, _) => service,
    }
}
