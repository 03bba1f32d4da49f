//! Reads an Argo Rollouts `argoproj.io/v1alpha1` `Rollout`, unchanged, into a validated
//! [`Canary`]: its canary steps become sluice's schedule, its `stableService` and
//! `canaryService` the two Services traffic is split between, its pod template (or the
//! Deployment its `workloadRef` names) the stable and canary workloads
//! (`workload::rollout`), and its traffic router the route sluice writes.
//!
//! Argo's CRD is structural, so an unknown field is a warning (the API server prunes it and
//! Argo never sees it); a field Argo acts on is read or refused at its line with the reason.
//! Fields that change nothing sluice writes to git (history limits, scale-down delays) are
//! warnings that say why they are ignored.
//!
//! Steps map to sluice's as Argo runs them: a `setWeight` starts a step at its weight; a
//! `pause` after it holds it (with a duration: that long; without: until approved, by
//! sluice's approval pull request or `sluice promote`); a `setWeight` with no pause after it
//! holds one check interval ([`STEP_INTERVAL`]). A `pause: {}` before the first `setWeight`
//! waits for approval before the first traffic change. The steps Argo runs before its first
//! `setWeight` while the canary takes no traffic (an experiment, an analysis, a managed route)
//! stand at a step of their own at weight 0; so does a first `setWeight: 0`. After the last
//! step the Rollout is promoted, as Argo does.
//!
//! Reads one document and looks up the objects it names in the repo snapshot; decides nothing.

use std::time::Duration;

use crate::core::argo_experiment::ExperimentStep;
use crate::core::argo_replicas::{
    resolve, CanaryScale, IntOrPercent, ReplicaSplit, RoutedScale, ScaleStep,
};
use crate::core::model::{ArgoGate, ManagedStep, ReplicaCanary};
use crate::core::schedule::{Pause, Step};
use crate::manifest::model::{
    Alerts, Analysis, Approvals, Canary, CanaryId, Format, Name, RepoPath, ServiceSpec, Strategy,
    Target,
};
use crate::manifest::rollout_analysis::Found;
use crate::manifest::rollout_lookup::{named_service, refuse_and_ignore, Lookup};
use crate::manifest::settings::Settings;
use crate::route::gateway_api::header_routes::{HeaderMatch, HeaderRoute};
use crate::route::gateway_api::{self, Apex};
use crate::route::istio::managed_routes::{Managed, ManagedRoute, MirrorRoute};
use crate::route::{istio, kubernetes, smi, Route};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, metadata_name, name_at, Reader, OBJECT_KEYS};
use crate::yaml::snapshot::Snapshot;
use yaml_rust2::Yaml;

/// The API version of the Rollout this reads.
pub const API_VERSION: &str = "argoproj.io/v1alpha1";

/// How long a `setWeight` step with no `pause` after it holds before the next step (Argo
/// goes on once the weight is set and the canary is available; sluice's readiness gate waits
/// for those, then one interval).
pub const STEP_INTERVAL: Duration = Duration::from_secs(60);

/// The Gateway API plugin's name under `trafficRouting.plugins`.
pub const GATEWAY_PLUGIN: &str = "argoproj-labs/gatewayAPI";

const SPEC_KEYS: &[&str] = &[
    "replicas",
    "selector",
    "template",
    "workloadRef",
    "minReadySeconds",
    "rollbackWindow",
    "strategy",
    "revisionHistoryLimit",
    "paused",
    "progressDeadlineSeconds",
    "progressDeadlineAbort",
    "restartAt",
    "analysis",
];
const CANARY_KEYS: &[&str] = &[
    "canaryService",
    "stableService",
    "steps",
    "trafficRouting",
    "maxUnavailable",
    "maxSurge",
    "analysis",
    "antiAffinity",
    "canaryMetadata",
    "stableMetadata",
    "scaleDownDelaySeconds",
    "scaleDownDelayRevisionLimit",
    "abortScaleDownDelaySeconds",
    "dynamicStableScale",
    "pingPong",
    "minPodsPerReplicaSet",
    "replicaProgressThreshold",
];
const STEP_KEYS: &[&str] = &[
    "setWeight",
    "pause",
    "experiment",
    "analysis",
    "setCanaryScale",
    "setHeaderRoute",
    "setMirrorRoute",
    "plugin",
];
const ROUTING_KEYS: &[&str] = &[
    "istio",
    "nginx",
    "alb",
    "smi",
    "ambassador",
    "appMesh",
    "traefik",
    "managedRoutes",
    "apisix",
    "plugins",
    "maxTrafficWeight",
];
const GATEWAY_KEYS: &[&str] = &[
    "httpRoute",
    "grpcRoute",
    "tcpRoute",
    "tlsRoute",
    "namespace",
    "httpRoutes",
    "grpcRoutes",
    "tcpRoutes",
    "tlsRoutes",
    "httpRouteSelector",
    "grpcRouteSelector",
    "tcpRouteSelector",
    "tlsRouteSelector",
    "disableInProgressLabel",
    "inProgressLabelKey",
    "inProgressLabelValue",
];
/// The plugin's single-route fields and the route kind each names.
const GATEWAY_ROUTES: [(&str, &str, &str); 4] = [
    ("httpRoute", "httpRoutes", "HTTPRoute"),
    ("grpcRoute", "grpcRoutes", "GRPCRoute"),
    ("tcpRoute", "tcpRoutes", "TCPRoute"),
    ("tlsRoute", "tlsRoutes", "TLSRoute"),
];

/// `trafficRouting` kinds refused, and why.
const REFUSED_ROUTERS: &[(&str, &str)] = &[
    ("alb", "the AWS Load Balancer Controller's weights are an action annotation that Argo verifies against the live AWS target groups; a cloud-only router sluice cannot drive from git"),
    ("appMesh", "AWS App Mesh is a cloud-only mesh (and retired by AWS); sluice does not write its VirtualRouter for Rollouts"),
    ("ambassador", "Argo's Ambassador router creates and deletes canary Mappings at run time; not in this build"),
    ("managedRoutes", "managed routes serve setHeaderRoute and setMirrorRoute steps, which this build runs only for Istio VirtualServices and the Gateway API plugin's HTTPRoute and GRPCRoute"),
];

/// Why managed routes are refused with `apisix`.
const APISIX_MANAGED: &str = "managed routes serve setHeaderRoute steps, which Argo's APISIX router runs by creating a second ApisixRoute named after the managed route (a copy of yours sending only to the canary, with the step's header matches) and deleting it at the end; this build does not write that object yet (and Argo's APISIX router ignores setMirrorRoute)";

/// Canary fields refused, and why.
const REFUSED_CANARY: &[(&str, &str)] = &[
    ("antiAffinity", "anti-affinity between the stable and canary pods is not in this build; remove it, or keep this Rollout on Argo Rollouts for now"),
    ("pingPong", "ping-pong Services (which Argo runs with the ALB, Istio and plugin routers, swapping which of the two is stable at each promotion) are not in this build; name a stableService and a canaryService instead"),
    ("minPodsPerReplicaSet", "minPodsPerReplicaSet is not in this build; the canary runs ceil(replicas x weight / 100) pods, at least one"),
    ("replicaProgressThreshold", "replicaProgressThreshold is not in this build; sluice's readiness gate waits for every canary pod"),
];

/// Canary fields that change nothing sluice writes, and why they are ignored.
const IGNORED_CANARY: &[(&str, &str)] = &[
    ("scaleDownDelaySeconds", "ignored: the stable workload rolls to the promoted spec in place (a Deployment rolling update), so there is no old ReplicaSet to keep up after promotion"),
    ("scaleDownDelayRevisionLimit", "ignored: no old ReplicaSets are kept (see scaleDownDelaySeconds)"),
    ("abortScaleDownDelaySeconds", "ignored: on abort sluice scales the canary workload to zero in the rollback commit"),
];

/// Spec fields refused, and why.
const REFUSED_SPEC: &[(&str, &str)] = &[
    ("restartAt", "restartAt restarts pods at a time, a cluster action with nothing to commit; restart by changing the pod template"),
];

/// Spec fields ignored, and why.
const IGNORED_SPEC: &[(&str, &str)] = &[
    ("revisionHistoryLimit", "ignored: git keeps every revision; the stable and canary Deployments keep their own default history"),
    ("analysis", "ignored: AnalysisRun history limits; sluice keeps every result in git"),
];

/// `spec.rollbackWindow.revisions` (0 when not set): how far back a rollback is promoted at
/// once, skipping the steps (Argo's fast rollback).
fn rollback_window(r: &mut Reader, spec: &Node) -> u32 {
    let Some(n) = spec.get("rollbackWindow") else {
        return 0;
    };
    let Some(n) = r.map(n, "spec.rollbackWindow", &["revisions"]) else {
        return 0;
    };
    n.get("revisions")
        .and_then(|v| r.int(v, "spec.rollbackWindow.revisions", 0, i64::from(i32::MAX)))
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(0)
}

/// `spec.paused` (the canary held while set) and `spec.progressDeadlineSeconds` (600 s when
/// not set).
fn run_control(r: &mut Reader, spec: &Node) -> (bool, Duration) {
    let suspend = spec
        .get("paused")
        .and_then(|n| r.bool(n, "spec.paused"))
        .unwrap_or(false);
    let progress_deadline = spec
        .get("progressDeadlineSeconds")
        .and_then(|n| r.int(n, "spec.progressDeadlineSeconds", 1, 86_400 * 365))
        .and_then(|v| u64::try_from(v).ok())
        .map_or(Duration::from_secs(600), Duration::from_secs);
    (suspend, progress_deadline)
}

/// The canary strategy's `steps`. Without any (or without a `setWeight` among them) Argo
/// promotes the new revision at once, a rolling update of the stable workload: an empty
/// schedule, which the core promotes on the canary's first tick.
fn canary_steps(r: &mut Reader, canary: &Node, routed: bool) -> Option<Steps> {
    match canary.get("steps").filter(|n| n.value != Value::Null) {
        Some(n) => read_steps(r, n, routed),
        None => Some(Steps {
            routed,
            ..Steps::default()
        }),
    }
}

/// Reads a Rollout document (`root`) into a canary.
pub fn read_rollout(
    r: &mut Reader,
    root: &Node,
    settings: &Settings,
    snapshot: &Snapshot,
) -> Option<Canary> {
    r.pruning_for("Argo Rollouts CRD", "Argo Rollouts", |r| {
        read(r, root, settings, snapshot)
    })
}

fn read(r: &mut Reader, root: &Node, settings: &Settings, snapshot: &Snapshot) -> Option<Canary> {
    let before = r.errors.len();
    r.map(root, "", OBJECT_KEYS)?;
    let (name, namespace) = metadata_name(r, root)?;
    let spec = r.required(root, "", "spec")?;
    r.map(spec, "spec", SPEC_KEYS)?;
    let (name, namespace) = (name?, namespace?);
    let id = CanaryId {
        namespace: namespace.clone(),
        name: name.clone(),
    };
    let output = settings
        .output_for(namespace.as_str(), name.as_str())
        .map_err(|e| r.error(spec.line, "output", e))
        .ok();
    let lookup = Lookup {
        snapshot,
        namespace: namespace.as_str(),
        output: output.as_ref().map(|o| o.as_str()),
    };
    read_workload(r, spec, lookup);
    refuse_and_ignore(r, spec, "spec", REFUSED_SPEC, IGNORED_SPEC);
    let (suspend, progress_deadline) = run_control(r, spec);
    let window = rollback_window(r, spec);
    let strategy = r.required(spec, "spec", "strategy")?;
    r.map(strategy, "spec.strategy", &["canary", "blueGreen"])?;
    if let Some(bg) = strategy.get("blueGreen") {
        if let Some(line) = strategy.key_line("canary") {
            r.error(line, "spec.strategy", "Multiple Strategies can not be listed (Argo refuses it too): keep canary or blueGreen");
            return None;
        }
        let read = crate::manifest::rollout_blue_green::read(r, root, bg, lookup, STEP_INTERVAL)?;
        if r.errors.len() > before {
            return None;
        }
        let mut canary = blue_green_canary(id, settings, read, output?, suspend, progress_deadline);
        canary.file = r.file.clone();
        canary.line = root.line;
        canary.rollback_window = window;
        return Some(canary);
    }
    let canary = r.required(strategy, "spec.strategy", "canary")?;
    let cp = "spec.strategy.canary";
    r.map(canary, cp, CANARY_KEYS)?;
    refuse_and_ignore(r, canary, cp, REFUSED_CANARY, IGNORED_CANARY);
    let routing = canary.get("trafficRouting");
    let (services, replica_canary) = services_of(r, spec, canary, name.as_str(), lookup);
    let mut steps = canary_steps(r, canary, routing.is_some());
    let scale = routed_scale(r, spec, canary, steps.as_ref(), routing.is_some());
    let (stable, canary_service, port, services_named) = services?;
    let apex = apex_of(
        namespace.as_str(),
        [&stable, &canary_service],
        port,
        services_named,
    );
    let route = route_of(r, routing, name.as_str(), &apex, lookup, &mut steps);
    let argo = analysis_gates(r, root, canary, namespace.as_str(), snapshot, &mut steps);
    if r.errors.len() > before {
        return None;
    }
    let steps = steps?;
    let (route, managed_routes) = route?;
    let set_weight_zero = steps.set_weight_zero;
    let (steps, approvals, experiments) = (steps.steps, steps.approvals, steps.experiments);
    let mut canary = canary_of(
        id,
        settings,
        Parts {
            stable,
            canary_service,
            port,
            output: output?,
            route,
            steps,
            approvals,
            suspend,
            progress_deadline,
            argo,
            replica_canary,
            scale,
            managed_routes,
            services_named,
            experiments,
            set_weight_zero,
        },
    );
    canary.file = r.file.clone();
    canary.line = root.line;
    canary.rollback_window = window;
    if routing.is_some() {
        canary.route.check_canary(r, &canary, spec);
    }
    (r.errors.len() == before).then_some(canary)
}

/// The Rollout's route: its `trafficRouting` (none: the pods split the traffic, as Flagger's
/// kubernetes provider writes only workloads and Services), with the managed routes its
/// `setHeaderRoute` steps (taken from `steps`) set on it.
fn route_of(
    r: &mut Reader,
    routing: Option<&Node>,
    rollout: &str,
    apex: &Apex,
    lookup: Lookup,
    steps: &mut Option<Steps>,
) -> Option<(Route, Vec<ManagedStep>)> {
    let mut route = match routing {
        Some(routing) => read_routing(r, routing, rollout, apex, lookup)?,
        None => Route::Kubernetes(kubernetes::Config),
    };
    let headers = steps
        .as_mut()
        .map(|s| std::mem::take(&mut s.headers))
        .unwrap_or_default();
    let managed = managed_routes(r, routing, &mut route, headers);
    Some((route, managed))
}

/// The canary of the blue/green Rollout `id`: the core's blue/green with one iteration (the
/// preview), its switch a step of its own (`rollout_blue_green`).
fn blue_green_canary(
    id: CanaryId,
    settings: &Settings,
    read: crate::manifest::rollout_blue_green::BlueGreen,
    output: RepoPath,
    suspend: bool,
    progress_deadline: Duration,
) -> Canary {
    let mut canary = canary_of(
        id,
        settings,
        Parts {
            stable: read.active.clone(),
            // No previewService: the active one is named twice (Argo refuses the two being
            // equal, so equal names mean "no preview Service").
            canary_service: read.preview.unwrap_or(read.active),
            port: read.port,
            output,
            route: Route::Kubernetes(crate::route::kubernetes::Config),
            // Blue/green switches Services, not replica counts.
            replica_canary: None,
            scale: None,
            managed_routes: Vec::new(),
            // The activeService is required; the previewService is named or the active
            // one stands in for it (and is copied once).
            services_named: [true, true],
            experiments: Vec::new(),
            set_weight_zero: false,
            steps: Vec::new(),
            approvals: read.approvals,
            suspend,
            progress_deadline,
            argo: read.gates,
        },
    );
    canary.provider = Some("kubernetes".to_string());
    canary.analysis.strategy = Strategy::BlueGreen { iterations: 1 };
    canary.analysis.interval = read.interval;
    canary
}

/// The gates of the Rollout's inline analyses (read with its `steps`) and its background
/// analysis (`canary`'s `analysis`).
fn analysis_gates(
    r: &mut Reader,
    root: &Node,
    canary: &Node,
    namespace: &str,
    snapshot: &Snapshot,
    steps: &mut Option<Steps>,
) -> Vec<ArgoGate> {
    let mut found = Vec::new();
    if let Some(read) = steps {
        found.append(&mut read.analyses);
        match canary.get("analysis") {
            Some(background) if read.steps.is_empty() => r.error(
                background.line,
                "spec.strategy.canary.analysis",
                "a background analysis measures the canary while it takes traffic, and without a setWeight step Argo promotes at once (sluice has no step to measure at): add a setWeight step, or remove the analysis",
            ),
            Some(background) => found.extend(background_analysis(r, background, &read.at_step)),
            None => {}
        }
    }
    crate::manifest::rollout_analysis::read_gates(r, root, namespace, snapshot, &found)
}

/// `strategy.canary.analysis`: a background analysis from `startingStep` (an index of Argo's
/// steps, default 0), which starts at the sluice step that Argo step is at (at least the
/// first, which stands at weight 0 when Argo runs steps before its first `setWeight`).
/// Without templates it is none, as Argo's `reconcileBackgroundAnalysisRun` starts no run then.
fn background_analysis(r: &mut Reader, n: &Node, at_step: &[u32]) -> Option<Found> {
    let at = "spec.strategy.canary.analysis";
    let no_templates = match n.get("templates").map(|t| &t.value) {
        None | Some(Value::Null) => true,
        Some(Value::Seq(items)) => items.is_empty(),
        Some(_) => false,
    };
    if no_templates && matches!(n.value, Value::Map(_)) {
        r.warn(
            n.line,
            at,
            "ignored: it lists no templates, so Argo starts no background analysis, and neither does sluice (a templateName here is not a field of it: the API server drops it); list the AnalysisTemplates under templates to measure the canary",
        );
        return None;
    }
    let starting = match n.get("startingStep") {
        Some(s) => {
            let max = i64::try_from(at_step.len().saturating_sub(1)).unwrap_or(i64::MAX);
            usize::try_from(r.int(s, &join(at, "startingStep"), 0, max)?).ok()?
        }
        None => 0,
    };
    let step = at_step.get(starting).copied().unwrap_or(0).max(1);
    Some(Found {
        at: at.to_string(),
        node: n.clone(),
        step,
        inline: false,
        experiment: false,
    })
}

/// What a Rollout says, read.
struct Parts {
    stable: Name,
    canary_service: Name,
    /// The stable Service's first port.
    port: u16,
    output: RepoPath,
    route: Route,
    steps: Vec<Step>,
    approvals: Approvals,
    suspend: bool,
    progress_deadline: Duration,
    argo: Vec<ArgoGate>,
    /// Without trafficRouting: the replica counts per weight.
    replica_canary: Option<ReplicaCanary>,
    /// With trafficRouting: `setCanaryScale` steps and `dynamicStableScale`.
    scale: Option<RoutedScale>,
    /// The `setHeaderRoute` steps and the managed routes active after each.
    managed_routes: Vec<ManagedStep>,
    /// Whether `stable` and `canary_service` are Services the Rollout names.
    services_named: [bool; 2],
    experiments: Vec<ExperimentStep>,
    /// Whether the first step is `setWeight: 0`.
    set_weight_zero: bool,
}

/// The canary of the Rollout `id`: its parts, and sluice's defaults for what a Rollout does
/// not say (no metrics, no webhooks).
fn canary_of(id: CanaryId, settings: &Settings, p: Parts) -> Canary {
    Canary {
        settle: settings.settle,
        provider: Some(
            match p.replica_canary {
                Some(_) => "kubernetes",
                None => "gatewayapi:v1",
            }
            .to_string(),
        ),
        metrics_server: None,
        sync: settings.sync.clone(),
        autoscaler: None,
        revert_on_deletion: false,
        wave: None,
        priority: 0,
        // Adoption from Flagger points at Flagger's `-primary` configs; a Rollout has none.
        adoption_hold: false,
        approval: settings.approval_policy(),
        file: String::new(),
        line: 0,
        format: Format::Native,
        target: Target::Rollout {
            name: id.name.clone(),
            stable_service: p.stable.clone(),
            canary_service: p.canary_service,
            replica_canary: p.replica_canary,
            scale: p.scale,
            managed_routes: p.managed_routes,
            services_named: p.services_named,
            experiments: p.experiments,
            set_weight_zero: p.set_weight_zero,
        },
        output: p.output,
        service: ServiceSpec::new(p.stable, p.port),
        route: p.route,
        analysis: Analysis {
            interval: STEP_INTERVAL,
            threshold: 1,
            strategy: Strategy::Canary { steps: p.steps },
            step_weight_promotion: None,
            metrics: Vec::new(),
            webhooks: Vec::new(),
            approvals: p.approvals,
            mirror: false,
            session_affinity: None,
            primary_ready_threshold: 100,
            canary_ready_threshold: 100,
            alerts: Alerts::default(),
            judge: None,
            argo: p.argo,
        },
        id,
        skip_analysis: false,
        rollback_window: 0,
        suspend: p.suspend,
        progress_deadline: p.progress_deadline,
    }
}

/// `spec.template` or `spec.workloadRef` (one of them), and `spec.selector`.
fn read_workload(r: &mut Reader, spec: &Node, lookup: Lookup) {
    match (spec.get("template"), spec.get("workloadRef")) {
        (Some(_), Some(w)) => {
            r.error(
                w.line,
                "spec.workloadRef",
                "expected either spec.template or spec.workloadRef, found both (Argo refuses it too)",
            );
        }
        (None, None) => {
            r.error(
                spec.line,
                "spec.template",
                "required field is missing (or set spec.workloadRef)",
            );
        }
        (Some(_), None) => {
            if spec.get("selector").is_none() {
                r.error(spec.line, "spec.selector", "required field is missing");
            }
        }
        (None, Some(w)) => read_workload_ref(r, w, lookup),
    }
}

/// `spec.workloadRef`: a Deployment of the repo.
fn read_workload_ref(r: &mut Reader, w: &Node, lookup: Lookup) {
    let p = "spec.workloadRef";
    if r.map(w, p, &["apiVersion", "kind", "name", "scaleDown"])
        .is_none()
    {
        return;
    }
    if let Some(k) = w.get("kind") {
        if let Some(kind) = r.string(k, &join(p, "kind")) {
            if kind != "Deployment" {
                r.error(
                    k.line,
                    &join(p, "kind"),
                    format!(
                        "expected Deployment (the workload sluice copies into git), found {kind:?}"
                    ),
                );
            }
        }
    }
    if let Some(line) = w.key_line("scaleDown") {
        r.warn(line, &join(p, "scaleDown"), "ignored: the referenced Deployment is a source sluice reads, not an object in the cluster to scale down; keep it out of the folders your GitOps engine applies");
    }
    let Some(name) = r
        .required(w, p, "name")
        .and_then(|n| name_at(r, n, &join(p, "name")))
    else {
        return;
    };
    let namespace = lookup.namespace;
    if lookup.find("Deployment", name.as_str()).is_empty() {
        let line = w.get("name").map_or(w.line, |n| n.line);
        r.error(
            line,
            &join(p, "name"),
            format!("Deployment {namespace}/{name} not found among the repo's YAML files"),
        );
    }
}

/// The stable and canary Service names, the stable one's first port, and whether the Rollout
/// names each (a name not given stands in as its workload's).
type Services = (Name, Name, u16, [bool; 2]);

/// `canaryService` and `stableService` (both required with traffic routing), each a Service
/// of the repo, and the stable one's first port.
fn read_services(r: &mut Reader, canary: &Node, lookup: Lookup) -> Option<Services> {
    let cp = "spec.strategy.canary";
    let mut found = Vec::new();
    for key in ["stableService", "canaryService"] {
        let at = join(cp, key);
        let Some(n) = r.required(canary, cp, key) else {
            continue;
        };
        if let Some(one) = named_service(r, n, &at, lookup) {
            found.push(one);
        }
    }
    let [(stable, port), (canary_service, _)] = <[(Name, u16); 2]>::try_from(found).ok()?;
    distinct(r, canary, &stable, &canary_service)?;
    Some((stable, canary_service, port, [true, true]))
}

/// The Rollout's Services as its `trafficRouting` asks for them, and without it the replica
/// split.
fn services_of(
    r: &mut Reader,
    spec: &Node,
    canary: &Node,
    rollout: &str,
    lookup: Lookup,
) -> (Option<Services>, Option<ReplicaCanary>) {
    match canary.get("trafficRouting") {
        Some(routing) if subset_routing(routing, canary) => {
            (read_subset_services(r, spec, canary, rollout, lookup), None)
        }
        // Argo needs no stableService or canaryService with ping-pong Services, which are
        // refused at pingPong's own line.
        Some(_) if canary.get("pingPong").is_some() => (None, None),
        Some(_) => (read_services(r, canary, lookup), None),
        None => match read_replica_canary(r, spec, canary, rollout, lookup) {
            Some((services, replica)) => (Some(services), Some(replica)),
            None => (None, None),
        },
    }
}

/// The Services the routers send to. A Service the Rollout does not name is no route's
/// destination: its stand-in name is left out (`""`), so that it matches none.
fn apex_of<'a>(
    namespace: &'a str,
    services: [&'a Name; 2],
    port: u16,
    named: [bool; 2],
) -> Apex<'a> {
    let pick = |i: usize| if named[i] { services[i].as_str() } else { "" };
    Apex {
        namespace,
        service: pick(0),
        port,
        pair: Some(pick(1)),
    }
}

/// Whether `routing` is Istio subset-level routing (`istio.destinationRule`, no `pingPong`),
/// where Argo leaves `stableService` and `canaryService` optional (its validation's
/// `requireCanaryStableServices`): the VirtualService sends to the subsets of one host and
/// the DestinationRule's subsets select the workloads.
fn subset_routing(routing: &Node, canary: &Node) -> bool {
    canary.get("pingPong").is_none()
        && routing
            .get("istio")
            .is_some_and(|istio| istio.get("destinationRule").is_some())
}

/// The optional `stableService` and `canaryService` of Istio subset-level routing: each
/// named one a Service of the repo (Argo still points it at its workload's pods), each one not
/// named standing in as its workload's name.
fn read_subset_services(
    r: &mut Reader,
    spec: &Node,
    canary: &Node,
    rollout: &str,
    lookup: Lookup,
) -> Option<Services> {
    let cp = "spec.strategy.canary";
    let mut named = [None, None];
    let mut failed = false;
    for (slot, key) in named.iter_mut().zip(["stableService", "canaryService"]) {
        if let Some(n) = canary.get(key) {
            *slot = named_service(r, n, &join(cp, key), lookup);
            failed |= slot.is_none();
        }
    }
    if let [Some((s, _)), Some((c, _))] = &named {
        distinct(r, canary, s, c)?;
    }
    if failed {
        return None;
    }
    let port = named.iter().flatten().next().map_or(80, |s| s.1);
    let [stable, canary_service] = named;
    Some((
        or_workload(r, spec, rollout, stable.as_ref(), "stable")?,
        or_workload(r, spec, rollout, canary_service.as_ref(), "canary")?,
        port,
        [stable.is_some(), canary_service.is_some()],
    ))
}

/// The Service `named`, or the workload of `role` (`<rollout>-<role>`) standing in for it.
fn or_workload(
    r: &mut Reader,
    spec: &Node,
    rollout: &str,
    named: Option<&(Name, u16)>,
    role: &str,
) -> Option<Name> {
    match named {
        Some((name, _)) => Some(name.clone()),
        None => Name::parse(&format!("{rollout}-{role}"))
            .map_err(|e| {
                r.error(
                    spec.line,
                    "metadata.name",
                    format!("the {role} workload's name: {e}"),
                )
            })
            .ok(),
    }
}

/// Refuses a `canaryService` that is the `stableService`, as Argo does.
fn distinct(r: &mut Reader, canary: &Node, stable: &Name, canary_service: &Name) -> Option<()> {
    if stable != canary_service {
        return Some(());
    }
    let line = canary.get("canaryService").map_or(canary.line, |n| n.line);
    r.error(
        line,
        "spec.strategy.canary.canaryService",
        format!("expected a Service other than the stableService, found {stable} twice (Argo refuses it too)"),
    );
    None
}

/// A canary without `trafficRouting` (Argo's replica-based canary): its optional
/// `stableService` and `canaryService`, `spec.replicas` (default 1) and `maxSurge` /
/// `maxUnavailable` (default 25 % each; Argo refuses both resolving to zero). Returns the
/// `(stable, canary, port, named)` `Target::Rollout` holds (a Service not named stands in as
/// its workload's name) and the replica split.
fn read_replica_canary(
    r: &mut Reader,
    spec: &Node,
    canary: &Node,
    rollout: &str,
    lookup: Lookup,
) -> Option<(Services, ReplicaCanary)> {
    let cp = "spec.strategy.canary";
    let mut named = [None, None];
    let mut failed = false;
    for (slot, key) in named.iter_mut().zip(["stableService", "canaryService"]) {
        if let Some(n) = canary.get(key) {
            *slot = named_service(r, n, &join(cp, key), lookup);
            failed |= slot.is_none();
        }
    }
    let replicas = match spec.get("replicas") {
        Some(n) => u32::try_from(r.int(n, "spec.replicas", 0, i64::from(i32::MAX))?).ok()?,
        None => 1,
    };
    let surge = int_or_percent(r, canary, cp, "maxSurge")?;
    let unavailable = int_or_percent(r, canary, cp, "maxUnavailable")?;
    let max_surge = resolve(&surge, replicas, true);
    if max_surge == 0 && resolve(&unavailable, replicas, false) == 0 {
        let line = canary
            .get("maxSurge")
            .or(canary.get("maxUnavailable"))
            .map_or(canary.line, |n| n.line);
        r.error(line, &join(cp, "maxSurge"), "maxSurge and maxUnavailable both resolve to 0 pods, so no pod could ever be replaced (Argo refuses it too); allow at least one");
        return None;
    }
    let [stable, canary_service] = named;
    if let (Some((s, _)), Some((c, _))) = (&stable, &canary_service) {
        distinct(r, canary, s, c)?;
    }
    if failed {
        return None;
    }
    let port = stable
        .as_ref()
        .or(canary_service.as_ref())
        .map_or(80, |s| s.1);
    let names = (
        or_workload(r, spec, rollout, stable.as_ref(), "stable")?,
        or_workload(r, spec, rollout, canary_service.as_ref(), "canary")?,
        port,
        [stable.is_some(), canary_service.is_some()],
    );
    Some((
        names,
        ReplicaCanary {
            split: ReplicaSplit {
                replicas,
                max_surge,
            },
            stable_service: stable.map(|s| s.0),
            canary_service: canary_service.map(|s| s.0),
        },
    ))
}

/// `maxSurge` or `maxUnavailable` of the canary: a count or a percentage (`"25%"`, the
/// default).
fn int_or_percent(r: &mut Reader, canary: &Node, cp: &str, key: &str) -> Option<IntOrPercent> {
    let at = join(cp, key);
    let Some(n) = canary.get(key) else {
        return Some(IntOrPercent::Percent(25));
    };
    let text = r.string(n, &at)?;
    let parsed = match text.strip_suffix('%') {
        Some(p) => p.trim().parse::<u32>().ok().map(IntOrPercent::Percent),
        None => text.trim().parse::<u32>().ok().map(IntOrPercent::Int),
    };
    if parsed.is_none() {
        r.error(
            n.line,
            &at,
            format!("expected a number of pods or a percentage (\"25%\"), found {text:?}"),
        );
    }
    parsed
}

/// `strategy.canary.dynamicStableScale`; Argo allows it only with trafficRouting and without
/// `scaleDownDelaySeconds`.
fn read_dynamic_stable(r: &mut Reader, canary: &Node, routed: bool) -> bool {
    let at = "spec.strategy.canary.dynamicStableScale";
    let Some(n) = canary.get("dynamicStableScale") else {
        return false;
    };
    let Some(on) = r.bool(n, at) else {
        return false;
    };
    if on && !routed {
        r.error(n.line, at, "Canary dynamicStableScale can only be used with traffic routing (Argo refuses it too): without a router the replica counts are the traffic split; remove it");
    } else if on && canary.get("scaleDownDelaySeconds").is_some() {
        r.error(n.line, at, "Canary dynamicStableScale cannot be used with scaleDownDelaySeconds (Argo refuses it too); remove one of them");
    }
    on
}

/// The scaling of a routed canary beyond its traffic share (`routed`: it has
/// `trafficRouting`), `None` when it has none (no `setCanaryScale` step, no
/// `dynamicStableScale`) or its steps are not read.
fn routed_scale(
    r: &mut Reader,
    spec: &Node,
    canary: &Node,
    steps: Option<&Steps>,
    routed: bool,
) -> Option<RoutedScale> {
    let dynamic_stable = read_dynamic_stable(r, canary, routed);
    let steps = steps?;
    if steps.scales.is_empty() && !dynamic_stable {
        return None;
    }
    let replicas = match spec.get("replicas") {
        Some(n) => u32::try_from(r.int(n, "spec.replicas", 0, i64::from(i32::MAX))?).ok()?,
        None => 1,
    };
    Some(RoutedScale {
        replicas,
        set: steps.scales.clone(),
        dynamic_stable,
    })
}

/// `strategy.canary.steps` as sluice's steps, the approval a leading `pause: {}` asks for, and
/// the inline analyses.
fn read_steps(r: &mut Reader, n: &Node, routed: bool) -> Option<Steps> {
    let p = "spec.strategy.canary.steps";
    let items = r.seq(n, p)?;
    let before = r.errors.len();
    let mut read = Steps {
        routed,
        ..Steps::default()
    };
    for (i, item) in items.iter().enumerate() {
        let ip = index(p, i);
        let Some(item) = r.map(item, &ip, STEP_KEYS) else {
            continue;
        };
        let Value::Map(entries) = &item.value else {
            continue;
        };
        let known: Vec<_> = entries
            .iter()
            .filter(|(k, _)| STEP_KEYS.contains(&k.text.as_str()))
            .collect();
        let [(key, value)] = known.as_slice() else {
            r.error(
                item.line,
                &ip,
                format!(
                    "expected exactly one of {} in a step, found {}",
                    STEP_KEYS.join(", "),
                    known.len()
                ),
            );
            continue;
        };
        read.argo_index = u32::try_from(i).unwrap_or(u32::MAX);
        read.step(r, &key.text, value, &join(&ip, &key.text));
        read.at_step
            .push(u32::try_from(read.steps.len()).unwrap_or(u32::MAX));
    }
    if r.errors.len() > before {
        // The caller reports nothing more of a Rollout with errors, but still reads its
        // analyses, so every problem is reported at once.
        return Some(read);
    }
    Some(read)
}

/// The steps read so far.
#[derive(Default)]
struct Steps {
    steps: Vec<Step>,
    approvals: Approvals,
    /// The inline `analysis` steps, each with the sluice step it gates.
    analyses: Vec<Found>,
    /// For each of Argo's steps, in order, the sluice step it is at (0 before the first
    /// `setWeight`): where `startingStep` starts a background analysis.
    at_step: Vec<u32>,
    /// Whether the last step's pause was set by a `pause` step (a second one is refused).
    paused: bool,
    /// The index among Argo's steps of the step being read.
    argo_index: u32,
    /// The `setHeaderRoute` steps, in order.
    headers: Vec<HeaderStep>,
    /// Whether the last step already holds a pause or an inline analysis: a `pause` or
    /// `analysis` after it starts a step of its own at the same weight, so that it begins
    /// only once the one before it has ended, as Argo runs its steps one after another.
    held: bool,
    /// Whether the Rollout has trafficRouting (which `setCanaryScale` needs).
    routed: bool,
    /// The `setCanaryScale` steps, each at the sluice step it is in force from.
    scales: Vec<ScaleStep>,
    /// The `experiment` steps, each at the sluice step it runs at.
    experiments: Vec<ExperimentStep>,
    /// Whether the first step is `setWeight: 0` (sluice's step 1, at weight 0).
    set_weight_zero: bool,
}

impl Steps {
    /// One Argo step: `key` (one of [`STEP_KEYS`]) with `value`, at `at`.
    fn step(&mut self, r: &mut Reader, key: &str, value: &Node, at: &str) {
        match key {
            "setWeight" => self.set_weight(r, value, at),
            "pause" => self.pause(r, value, at),
            "analysis" => self.analysis(value, at),
            "experiment" => self.experiment(r, value, at),
            "setCanaryScale" => self.set_canary_scale(r, value, at),
            "setHeaderRoute" => self.header_route(r, value, at),
            "setMirrorRoute" => self.mirror_route(r, value, at),
            _ => r.error(
                value.line,
                at,
                "a plugin step runs the plugin's code in the cluster; sluice cannot do it in git",
            ),
        }
    }

    /// `setCanaryScale`: in force from the last step when nothing holds it yet (it stands
    /// right after that step's `setWeight`), otherwise from the next step; before the first
    /// `setWeight` and any approval pause, from step 0.
    fn set_canary_scale(&mut self, r: &mut Reader, value: &Node, at: &str) {
        if !self.routed {
            r.error(value.line, at, "SetCanaryScale requires TrafficRouting to be set (Argo refuses it too): without a router the replica counts are the traffic split; use setWeight");
            return;
        }
        let Some(n) = r.map(value, at, &["weight", "replicas", "matchTrafficWeight"]) else {
            return;
        };
        let matched = match n.get("matchTrafficWeight") {
            Some(m) => match r.bool(m, &join(at, "matchTrafficWeight")) {
                Some(b) => b,
                None => return,
            },
            None => false,
        };
        // Argo's order: matchTrafficWeight, then replicas, then weight; none of them leaves
        // the canary at its traffic weight's share.
        let scale = if matched {
            CanaryScale::MatchTrafficWeight
        } else if let Some(c) = n.get("replicas") {
            let Some(c) = r.int(c, &join(at, "replicas"), 0, i64::from(i32::MAX)) else {
                return;
            };
            CanaryScale::Replicas(u32::try_from(c).unwrap_or(0))
        } else if let Some(w) = n.get("weight") {
            let Some(w) = r.int(w, &join(at, "weight"), 0, 100) else {
                return;
            };
            CanaryScale::Weight(u8::try_from(w).unwrap_or(100))
        } else {
            CanaryScale::MatchTrafficWeight
        };
        let count = u32::try_from(self.steps.len()).unwrap_or(u32::MAX);
        let (step, after_weight) = match count {
            0 if self.approvals.before_rollout => (1, false),
            0 => (0, false),
            _ if self.held => (count + 1, false),
            _ => (count, true),
        };
        self.scales.push(ScaleStep {
            step,
            after_weight,
            scale,
        });
    }

    /// `setHeaderRoute`: `name` and `match` (each `headerName` with `headerValue` `exact`,
    /// `prefix` or `regex`); without `match` Argo removes the managed routes. It runs at the
    /// step of the `setWeight` before it, or at a step of its own at that weight when a
    /// pause or analysis runs between them (at weight 0 before the first `setWeight`).
    fn header_route(&mut self, r: &mut Reader, value: &Node, at: &str) {
        let weight = self.managed_weight();
        let Some((n, name)) = read_managed_name(r, value, at, &["name", "match"]) else {
            return;
        };
        let headers = match n.get("match").filter(|m| m.value != Value::Null) {
            None => None,
            Some(m) => match read_header_matches(r, m, &join(at, "match")) {
                Some(read) => Some(read),
                None => return,
            },
        };
        let remove = headers.is_none();
        let route = HeaderRoute {
            argo_step: self.argo_index,
            name,
            headers: headers.unwrap_or_default(),
        };
        self.push_managed(value, n, at, weight, route, remove, None);
    }

    /// `setMirrorRoute`: its matches and percentage (Argo's Istio router mirrors 100 % of
    /// the matching requests without one); no `match` removes the route.
    fn mirror_route(&mut self, r: &mut Reader, value: &Node, at: &str) {
        let weight = self.managed_weight();
        let keys = &["name", "match", "percentage"];
        let Some((n, name)) = read_managed_name(r, value, at, keys) else {
            return;
        };
        let percentage = match n.get("percentage") {
            None => Some(100),
            Some(p) => r.int(p, &join(at, "percentage"), 0, 100),
        };
        let matches = match n.get("match").filter(|m| m.value != Value::Null) {
            None => Some(Vec::new()),
            Some(m) => read_mirror_matches(r, m, &join(at, "match")),
        };
        let (Some(percentage), Some(matches)) = (percentage, matches) else {
            return;
        };
        let remove = n.get("match").is_none_or(|m| m.value == Value::Null);
        let mirror = MirrorRoute {
            matches,
            percentage: u32::try_from(percentage).unwrap_or(100),
            canary_weight: u32::from(weight),
        };
        let route = HeaderRoute {
            argo_step: self.argo_index,
            name,
            headers: Vec::new(),
        };
        self.push_managed(value, n, at, weight, route, remove, Some(mirror));
    }

    /// The canary's weight where a managed-route step stands: 0 before the first `setWeight`,
    /// where Argo sets the route while the canary takes no traffic.
    fn managed_weight(&self) -> u8 {
        self.steps.last().map_or(0, |last| last.weight)
    }

    #[allow(clippy::too_many_arguments)]
    fn push_managed(
        &mut self,
        value: &Node,
        n: &Node,
        at: &str,
        weight: u8,
        route: HeaderRoute,
        remove: bool,
        mirror: Option<MirrorRoute>,
    ) {
        // Before the first setWeight the route is set while the canary takes no traffic: a
        // step of its own at weight 0.
        if self.held || self.steps.is_empty() {
            self.steps.push(Step {
                weight,
                pause: Pause::Interval,
            });
            self.held = false;
            self.paused = false;
        }
        self.headers.push(HeaderStep {
            line: value.line,
            name_line: n.get("name").map_or(value.line, |v| v.line),
            at: at.to_string(),
            step: u32::try_from(self.steps.len()).unwrap_or(u32::MAX),
            route,
            remove,
            mirror,
        });
    }

    /// `experiment`: runs at the last step when nothing holds it yet (in place of its
    /// interval), otherwise at a step of its own at that weight (at weight 0 before the first
    /// `setWeight`, where Argo runs it while the canary takes no traffic); its analyses gate
    /// that step.
    fn experiment(&mut self, r: &mut Reader, value: &Node, at: &str) {
        let Some(read) = crate::manifest::rollout_experiment::read(r, value, at, self.routed)
        else {
            return;
        };
        match (self.held, self.steps.last_mut()) {
            (false, Some(last)) => last.pause = read.pause,
            (_, None) => self.steps.push(Step {
                weight: 0,
                pause: read.pause,
            }),
            _ => self.hold_after_last(read.pause),
        }
        self.held = true;
        self.paused = false;
        let step = u32::try_from(self.steps.len()).unwrap_or(u32::MAX);
        for (at, node) in read.analyses {
            self.analyses.push(Found {
                at,
                node,
                step,
                inline: true,
                experiment: true,
            });
        }
        self.experiments.push(ExperimentStep {
            step,
            templates: read.templates,
            analyses: read.analysis_names,
        });
    }

    /// `analysis`: gates the last step when nothing holds it yet, otherwise a step of its own
    /// at that weight (at weight 0 before the first `setWeight`, where Argo runs it while the
    /// canary takes no traffic).
    fn analysis(&mut self, value: &Node, at: &str) {
        if self.steps.is_empty() {
            self.steps.push(Step {
                weight: 0,
                pause: Pause::Interval,
            });
        }
        self.hold_after_last(Pause::Interval);
        self.held = true;
        self.paused = false;
        let step = u32::try_from(self.steps.len()).unwrap_or(u32::MAX);
        self.analyses.push(Found {
            at: at.to_string(),
            node: value.clone(),
            step,
            inline: true,
            experiment: false,
        });
    }

    fn set_weight(&mut self, r: &mut Reader, value: &Node, at: &str) {
        let Some(weight) = r.int(value, at, 0, 100) else {
            return;
        };
        if let Some(last) = self.steps.last() {
            if i64::from(last.weight) >= weight {
                r.error(value.line, at, format!("expected a weight above the previous step's {}, found {weight}: sluice's schedule only increases the canary's weight (to lower it, abort the rollout)", last.weight));
                return;
            }
        }
        // A first `setWeight: 0` is a step at weight 0, as Argo runs it (its canary scale and
        // pause then stand at no traffic).
        self.set_weight_zero |= weight == 0;
        self.steps.push(Step {
            weight: u8::try_from(weight).unwrap_or(100),
            pause: Pause::Interval,
        });
        self.paused = false;
        self.held = false;
    }

    /// When the last step already holds a pause or an analysis, starts a step at its weight
    /// with `pause`, so what comes next runs after it.
    fn hold_after_last(&mut self, pause: Pause) {
        if let (true, Some(last)) = (self.held, self.steps.last()) {
            let weight = last.weight;
            self.steps.push(Step { weight, pause });
        }
    }

    fn pause(&mut self, r: &mut Reader, value: &Node, at: &str) {
        let Some(pause) = read_pause(r, value, at) else {
            return;
        };
        match self.steps.last_mut() {
            _ if self.paused => r.error(
                value.line,
                at,
                "a second pause after one setWeight: sluice holds each weight once; merge the two pauses",
            ),
            None if pause == Pause::Approval => self.approvals.before_rollout = true,
            None if pause == Pause::Interval => {}
            None => r.error(
                value.line,
                at,
                "a timed pause before the first setWeight holds the canary at weight 0, which sluice's schedule has no step for; move it after the first setWeight, or make it pause: {} (wait for approval)",
            ),
            Some(step) if self.held => {
                // After an analysis: the pause is a step of its own at the same weight.
                if pause != Pause::Interval {
                    let weight = step.weight;
                    self.steps.push(Step { weight, pause });
                    self.paused = true;
                }
            }
            Some(step) => {
                step.pause = pause;
                self.paused = true;
                self.held = pause != Pause::Interval;
            }
        }
    }
}

/// The `setHeaderRoute` and `setMirrorRoute` steps (`headers`) on `route`: each names one
/// of `trafficRouting.managedRoutes`, and the route is the Gateway API plugin's HTTPRoute or
/// GRPCRoute (header routes only) or Argo's Istio VirtualServices. Returns the core's
/// schedule; the routes themselves are set on the route's config.
fn managed_routes(
    r: &mut Reader,
    routing: Option<&Node>,
    route: &mut Route,
    headers: Vec<HeaderStep>,
) -> Vec<ManagedStep> {
    if headers.is_empty() {
        return Vec::new();
    }
    let p = "spec.strategy.canary.trafficRouting";
    let managed = routing.and_then(|n| n.get("managedRoutes"));
    let mut names = Vec::new();
    if let Some(m) = managed {
        let mp = join(p, "managedRoutes");
        for (i, item) in r.seq(m, &mp).unwrap_or_default().iter().enumerate() {
            let ip = index(&mp, i);
            if let Some(n) = r
                .map(item, &ip, &["name"])
                .and_then(|n| r.required(n, &ip, "name"))
            {
                names.extend(r.string(n, &join(&ip, "name")));
            }
        }
    }
    match route {
        Route::Istio(istio::Config {
            argo: Some(argo), ..
        }) => return istio_managed(r, argo, headers, names),
        Route::GatewayApi(config) => {
            let source = config
                .source
                .as_deref_mut()
                .filter(|s| matches!(s.shape.kind, "HTTPRoute" | "GRPCRoute"));
            if let Some(source) = source {
                return gateway_managed(r, routing, source, headers, &names);
            }
        }
        _ => {}
    }
    for h in &headers {
        let kind = match h.mirror {
            Some(_) => "setMirrorRoute",
            None => "setHeaderRoute",
        };
        r.error(h.line, &h.at, format!("{kind} is in this build for Istio VirtualServices and the Gateway API plugin's HTTPRoute and GRPCRoute only; remove the step, or keep this Rollout on Argo Rollouts for now"));
    }
    Vec::new()
}

/// The managed route `h` names, when `trafficRouting.managedRoutes` (`names`) declares it.
fn declared(r: &mut Reader, h: &HeaderStep, names: &[String]) -> bool {
    if names.contains(&h.route.name) {
        return true;
    }
    r.error(h.name_line, &join(&h.at, "name"), format!("expected one of trafficRouting.managedRoutes ({}), found {:?}: Argo sets only the managed routes the Rollout declares", names.join(", "), h.route.name));
    false
}

/// Argo's Istio router: a step sets (or, without `match`, removes) its one named route in
/// every VirtualService; the others stay.
fn istio_managed(
    r: &mut Reader,
    argo: &mut istio::argo::ArgoIstio,
    headers: Vec<HeaderStep>,
    names: Vec<String>,
) -> Vec<ManagedStep> {
    for copy in argo.objects.iter().filter(|c| c.kind == "VirtualService") {
        let mut sr = Reader::new(&copy.file);
        if !copy.slots.iter().any(|s| s.section == "http") {
            sr.error(1, "spec.http", format!("expected an http route the Rollout weights in VirtualService {:?}: Argo's Istio router sets managed routes (setHeaderRoute, setMirrorRoute) in spec.http only", copy.name));
        }
        if let Yaml::Array(routes) = &copy.yaml["spec"]["http"] {
            for (i, route) in routes.iter().enumerate() {
                if let Some(name) = route["name"]
                    .as_str()
                    .filter(|n| names.iter().any(|m| m == n))
                {
                    sr.error(1, &format!("spec.http[{i}].name"), format!("{name:?} is one of the Rollout's managedRoutes: Argo's Istio router replaces a route of that name at its step and deletes it at the end; rename the route"));
                }
            }
        }
        r.errors.append(&mut sr.errors);
    }
    let mut out = Vec::new();
    let mut active: Vec<u32> = Vec::new();
    for h in headers {
        if !declared(r, &h, &names) {
            continue;
        }
        let words = match (&h.mirror, h.remove) {
            (Some(_), true) => format!("setMirrorRoute {} remove", h.route.name),
            (Some(m), false) => format!("setMirrorRoute {} {}%", h.route.name, m.percentage),
            (None, true) => format!("setHeaderRoute {} remove", h.route.name),
            (None, false) => format!("setHeaderRoute {}", h.route.name),
        };
        let name = h.route.name.clone();
        let routes = &argo.managed.routes;
        active.retain(|k| routes.iter().all(|m| m.argo_step != *k || m.name != name));
        if !h.remove {
            active.push(h.route.argo_step);
            argo.managed.routes.push(ManagedRoute {
                argo_step: h.route.argo_step,
                name,
                managed: match h.mirror {
                    Some(m) => Managed::Mirror(m),
                    None => Managed::Header(h.route.headers),
                },
            });
        }
        out.push(ManagedStep {
            step: h.step,
            words,
            active: active.clone(),
        });
    }
    argo.managed.order = names;
    out
}

/// The Gateway API plugin: header routes only on a route it sets them on (one of a list only
/// with `useHeaderRoutes: true`: without it the steps change nothing, as in Argo); a step
/// without `match` removes every managed route.
fn gateway_managed(
    r: &mut Reader,
    routing: Option<&Node>,
    source: &mut gateway_api::RouteSource,
    headers: Vec<HeaderStep>,
    names: &[String],
) -> Vec<ManagedStep> {
    let uses_headers = routing
        .and_then(|n| n.get("plugins"))
        .and_then(|n| n.get(GATEWAY_PLUGIN))
        .is_some_and(uses_header_routes);
    let mut out = Vec::new();
    let mut active: Vec<u32> = Vec::new();
    for h in headers {
        if h.mirror.is_some() {
            r.error(h.line, &h.at, "the Gateway API plugin's SetMirrorRoute returns without changing the route, so Argo mirrors nothing here; remove the step, or route the Rollout with Istio");
            continue;
        }
        if !declared(r, &h, names) {
            continue;
        }
        let words = match h.remove {
            true => format!("setHeaderRoute {} remove", h.route.name),
            false => format!("setHeaderRoute {}", h.route.name),
        };
        if !uses_headers {
            continue;
        }
        if h.remove {
            // The plugin removes every managed route when a step has no match.
            active.clear();
        } else {
            let name = h.route.name.clone();
            active.retain(|k| {
                source
                    .header_routes
                    .iter()
                    .all(|d| d.argo_step != *k || d.name != name)
            });
            active.push(h.route.argo_step);
            source.header_routes.push(h.route);
        }
        let both = source
            .split
            .iter()
            .filter(|s| {
                s.in_place
                    .as_ref()
                    .is_some_and(|p| !p.stable.is_empty() && !p.canary.is_empty())
            })
            .count();
        let rules = source.rules.len() + active.len() * both;
        if rules > source.shape.max_rules {
            r.error(h.line, &h.at, format!("with this header route the {} {:?} would hold {rules} rules, above the {} its CRD allows; set fewer managed routes at once", source.shape.kind, source.name, source.shape.max_rules));
        }
        out.push(ManagedStep {
            step: h.step,
            words,
            active: active.clone(),
        });
    }
    out
}

/// Whether the plugin sets header routes on the Rollout's route: one named by `httpRoute` or
/// `grpcRoute`, or a list entry with `useHeaderRoutes: true`.
fn uses_header_routes(config: &Node) -> bool {
    if config.get("httpRoute").is_some() || config.get("grpcRoute").is_some() {
        return true;
    }
    ["httpRoutes", "grpcRoutes"].iter().any(|key| {
        matches!(config.get(key).map(|n| &n.value), Some(Value::Seq(items))
            if items.iter().any(|i| i.get("useHeaderRoutes").and_then(Node::as_str) == Some("true")))
    })
}

/// A `setHeaderRoute` step read: where, at which sluice step, and its route (no headers
/// when `remove`).
struct HeaderStep {
    line: usize,
    name_line: usize,
    at: String,
    step: u32,
    route: HeaderRoute,
    remove: bool,
    /// A `setMirrorRoute` step's mirror (its `route` then has no headers).
    mirror: Option<MirrorRoute>,
}

/// A managed-route step's map (with `keys`) and its `name`.
fn read_managed_name<'n>(
    r: &mut Reader,
    value: &'n Node,
    at: &str,
    keys: &[&str],
) -> Option<(&'n Node, String)> {
    let n = r.map(value, at, keys)?;
    let name = r
        .required(n, at, "name")
        .and_then(|v| r.string(v, &join(at, "name")))?;
    Some((n, name))
}

/// `setMirrorRoute.match`: each item's `method`, `path` and `headers` (string matches with
/// one of `exact`, `prefix`, `regex`), as the Istio `HTTPMatchRequest` Argo writes (`path`
/// becomes `uri`, headers in name order).
fn read_mirror_matches(r: &mut Reader, n: &Node, at: &str) -> Option<Vec<Yaml>> {
    let mut out = Vec::new();
    for (i, item) in r.seq(n, at)?.iter().enumerate() {
        let ip = index(at, i);
        let item = r.map(item, &ip, &["method", "path", "headers"])?;
        let mut m = yaml_rust2::yaml::Hash::new();
        for (key, istio_key) in [("method", "method"), ("path", "uri")] {
            if let Some(v) = item.get(key) {
                let found = read_string_match(r, v, &join(&ip, key))?;
                m.insert(Yaml::String(istio_key.to_string()), found);
            }
        }
        if let Some(h) = item.get("headers") {
            let hp = join(&ip, "headers");
            let Value::Map(entries) = &h.value else {
                r.error(
                    h.line,
                    &hp,
                    "expected a map of header names to string matches",
                );
                return None;
            };
            let mut sorted: Vec<_> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.text.cmp(&b.0.text));
            let mut headers = yaml_rust2::yaml::Hash::new();
            for (name, v) in sorted {
                let found = read_string_match(r, v, &join(&hp, &name.text))?;
                headers.insert(Yaml::String(name.text.clone()), found);
            }
            m.insert(Yaml::String("headers".to_string()), Yaml::Hash(headers));
        }
        out.push(Yaml::Hash(m));
    }
    Some(out)
}

/// A string match (`exact`, `prefix`, `regex`), its empty values left out as Argo's JSON
/// leaves them.
fn read_string_match(r: &mut Reader, n: &Node, at: &str) -> Option<Yaml> {
    let n = r.map(n, at, &["exact", "prefix", "regex"])?;
    let mut out = yaml_rust2::yaml::Hash::new();
    for key in ["exact", "prefix", "regex"] {
        if let Some(v) = n.get(key) {
            let text = r.string(v, &join(at, key))?;
            if !text.is_empty() {
                out.insert(Yaml::String(key.to_string()), Yaml::String(text));
            }
        }
    }
    if out.is_empty() {
        r.error(n.line, at, "expected one of exact, prefix or regex");
        return None;
    }
    Some(Yaml::Hash(out))
}

/// `setHeaderRoute.match`: each `headerName` and `headerValue` (`exact`, `prefix` or
/// `regex`), as the Gateway API plugin converts them.
fn read_header_matches(r: &mut Reader, n: &Node, at: &str) -> Option<Vec<HeaderMatch>> {
    let mut out = Vec::new();
    for (i, item) in r.seq(n, at)?.iter().enumerate() {
        let ip = index(at, i);
        let item = r.map(item, &ip, &["headerName", "headerValue"])?;
        let name = r
            .required(item, &ip, "headerName")
            .and_then(|v| r.string(v, &join(&ip, "headerName")))?;
        let vp = join(&ip, "headerValue");
        let value = r.required(item, &ip, "headerValue")?;
        let value = r.map(value, &vp, &["exact", "prefix", "regex"])?;
        let text = |r: &mut Reader, key: &str| {
            value
                .get(key)
                .and_then(|v| r.string(v, &join(&vp, key)))
                .filter(|t| !t.is_empty())
        };
        let (kind, value, argo_kind, argo_value) = if let Some(t) = text(r, "exact") {
            ("Exact", t.clone(), "exact", t)
        } else if let Some(t) = text(r, "prefix") {
            ("RegularExpression", format!("{t}.*"), "prefix", t)
        } else if let Some(t) = text(r, "regex") {
            ("RegularExpression", t.clone(), "regex", t)
        } else {
            r.error(value.line, &vp, "expected one of exact, prefix or regex (the plugin refuses a header match without one)");
            return None;
        };
        out.push(HeaderMatch {
            name,
            kind,
            value,
            argo_kind,
            argo_value,
        });
    }
    Some(out)
}

/// A `pause`: `{}` waits for approval; `{duration}` (seconds as a number or a string, or a Go
/// duration) holds that long; a zero duration does not hold at all.
pub(crate) fn read_pause(r: &mut Reader, n: &Node, at: &str) -> Option<Pause> {
    if n.value == Value::Null {
        return Some(Pause::Approval);
    }
    let n = r.map(n, at, &["duration"])?;
    let Some(d) = n.get("duration") else {
        return Some(Pause::Approval);
    };
    let dp = join(at, "duration");
    let seconds = match &d.value {
        Value::Scalar { text, .. } => match text.trim().parse::<u64>() {
            Ok(s) => Some(Duration::from_secs(s)),
            Err(_) => r.duration(d, &dp),
        },
        _ => r.duration(d, &dp),
    }?;
    Some(if seconds.is_zero() {
        Pause::Interval
    } else {
        Pause::For(seconds)
    })
}

/// `strategy.canary.trafficRouting`: the Istio or SMI route (`read_mesh`), the route of
/// nginx, traefik or apisix (`rollout_routers`), the Gateway API plugin's route, or a
/// refusal. `rollout` is the Rollout's name.
fn read_routing(
    r: &mut Reader,
    routing: &Node,
    rollout: &str,
    apex: &Apex,
    lookup: Lookup,
) -> Option<Route> {
    let p = "spec.strategy.canary.trafficRouting";
    r.map(routing, p, ROUTING_KEYS)?;
    let mut refused = false;
    for (key, why) in REFUSED_ROUTERS {
        // The Gateway API plugin and Argo's Istio router set managed routes (read with the
        // steps).
        let runs = routing.get("plugins").is_some() || routing.get("istio").is_some();
        let plugin_routes = *key == "managedRoutes" && runs;
        let why = match *key == "managedRoutes" && routing.get("apisix").is_some() {
            true => APISIX_MANAGED,
            false => *why,
        };
        if let Some(line) = routing.key_line(key).filter(|_| !plugin_routes) {
            r.error(line, &join(p, key), why);
            refused = true;
        }
    }
    if let Some(n) = routing.get("maxTrafficWeight") {
        if r.int(n, &join(p, "maxTrafficWeight"), 1, i64::from(i32::MAX)) != Some(100) {
            r.error(
                n.line,
                &join(p, "maxTrafficWeight"),
                "expected 100: sluice's weights are percentages",
            );
            refused = true;
        }
    }
    let mesh = read_mesh(r, routing, p, rollout, apex, lookup);
    let mut routes: Vec<Route> = mesh.into_iter().collect();
    for key in crate::manifest::rollout_routers::ROUTERS {
        if routing.get(key).is_some() {
            match crate::manifest::rollout_routers::read(r, routing, key, rollout, apex, lookup) {
                Some(route) => routes.push(route),
                None => refused = true,
            }
        }
    }
    let kinds: Vec<&str> = ["istio", "smi", "nginx", "traefik", "apisix"]
        .into_iter()
        .filter(|k| routing.get(k).is_some())
        .collect();
    // istio with smi is refused by read_mesh.
    if kinds.len() > 1 && kinds != ["istio", "smi"] {
        r.error(routing.line, p, format!("this build routes a Rollout through one router (sluice writes one route file per Rollout); found {}", kinds.join(" and ")));
        return None;
    }
    let Some(plugins) = routing.get("plugins") else {
        if refused {
            return None;
        }
        if kinds.is_empty() {
            r.error(routing.line, p, "expected a traffic router: sluice runs istio, smi, nginx, traefik, apisix and the Gateway API plugin (plugins: {argoproj-labs/gatewayAPI: ...})");
        }
        return routes.pop();
    };
    if let Some(line) = kinds.iter().find_map(|k| routing.key_line(k)) {
        r.error(
            line,
            p,
            "this build routes a Rollout through one router; found a plugin too",
        );
        refused = true;
    }
    let pp = join(p, "plugins");
    let Value::Map(entries) = &plugins.value else {
        r.error(
            plugins.line,
            &pp,
            "expected a mapping of plugin names to their configuration",
        );
        return None;
    };
    let mut route = None;
    for (key, value) in entries {
        if key.text == GATEWAY_PLUGIN {
            route = read_gateway(r, value, &join(&pp, &key.text), apex, lookup);
        } else {
            r.error(key.line, &join(&pp, &key.text), format!("the traffic router plugin {:?} runs its own code in the cluster; sluice writes routes for {GATEWAY_PLUGIN} only", key.text));
        }
    }
    if refused {
        return None;
    }
    route
}

/// `istio` or `smi` (both at once is refused: sluice writes one route file).
fn read_mesh(
    r: &mut Reader,
    routing: &Node,
    p: &str,
    rollout: &str,
    apex: &Apex,
    lookup: Lookup,
) -> Option<Route> {
    let canary = apex.pair?;
    match (routing.get("istio"), routing.get("smi")) {
        (Some(_), Some(smi)) => {
            r.error(
                smi.line,
                &join(p, "smi"),
                "this build routes a Rollout through one router; found istio and smi",
            );
            None
        }
        (Some(istio), None) => {
            let find = |kind: &str, name: &str| lookup.find(kind, name);
            let input = istio::argo::Input {
                namespace: apex.namespace,
                stable_service: apex.service,
                canary_service: canary,
                find: &find,
            };
            let argo = istio::argo::read(r, istio, &join(p, "istio"), &input)?;
            Some(Route::Istio(istio::Config {
                argo: Some(Box::new(argo)),
                ..istio::Config::default()
            }))
        }
        (None, Some(smi)) => read_smi(r, smi, &join(p, "smi"), rollout, apex.service),
        (None, None) => None,
    }
}

/// `smi`: `rootService` and `trafficSplitName`, as Argo's SMI router defaults them.
fn read_smi(r: &mut Reader, n: &Node, p: &str, rollout: &str, stable: &str) -> Option<Route> {
    let text = |r: &mut Reader, key: &str| -> Option<Option<String>> {
        match n.get(key) {
            Some(v) => name_at(r, v, &join(p, key)).map(|name| Some(name.to_string())),
            None => Some(None),
        }
    };
    if n.value != Value::Null {
        r.map(n, p, &["rootService", "trafficSplitName"])?;
    }
    let root = text(r, "rootService")?;
    let name = text(r, "trafficSplitName")?;
    Some(Route::Smi(smi::Config {
        version: smi::SmiVersion::V1alpha1,
        argo: Some(smi::ArgoSplit {
            name: name.unwrap_or_else(|| rollout.to_string()),
            root_service: root.unwrap_or_else(|| stable.to_string()),
        }),
    }))
}

/// The Gateway API plugin's configuration: one route, named, in the Rollout's namespace.
fn read_gateway(
    r: &mut Reader,
    config: &Node,
    p: &str,
    apex: &Apex,
    lookup: Lookup,
) -> Option<Route> {
    r.map(config, p, GATEWAY_KEYS)?;
    for key in GATEWAY_KEYS.iter().filter(|k| k.ends_with("Selector")) {
        if let Some(line) = config.key_line(key) {
            r.error(line, &join(p, key), "a selector finds routes by label in the cluster; name the route (httpRoute, grpcRoute, tcpRoute or tlsRoute) so sluice can find it in git");
        }
    }
    for key in [
        "disableInProgressLabel",
        "inProgressLabelKey",
        "inProgressLabelValue",
    ] {
        if let Some(line) = config.key_line(key) {
            r.warn(line, &join(p, key), "ignored: the plugin labels the live route so Argo CD can be told to ignore its changes; sluice commits the route, so there is nothing to ignore");
        }
    }
    if let Some(n) = config.get("namespace") {
        let text = r.string(n, &join(p, "namespace"))?;
        if text != apex.namespace {
            r.error(n.line, &join(p, "namespace"), format!("expected the Rollout's namespace {:?} (sluice writes the route beside the workloads), found {text:?}", apex.namespace));
            return None;
        }
    }
    let mut named: Vec<(&Node, String, &'static str)> = Vec::new();
    for (single, list, kind) in GATEWAY_ROUTES {
        if let Some(n) = config.get(single) {
            if let Some(name) = r.string(n, &join(p, single)) {
                named.push((n, name, kind));
            }
        }
        if let Some(n) = config.get(list) {
            let lp = join(p, list);
            for (i, item) in r.seq(n, &lp).unwrap_or_default().iter().enumerate() {
                let ip = index(&lp, i);
                if r.map(item, &ip, &["name", "useHeaderRoutes"]).is_none() {
                    continue;
                }
                if let Some(name) = r
                    .required(item, &ip, "name")
                    .and_then(|v| r.string(v, &join(&ip, "name")))
                {
                    named.push((item, name, kind));
                }
            }
        }
    }
    let (node, name, kind) = match named.as_slice() {
        [one] => one,
        [] => {
            r.error(
                config.line,
                p,
                "expected a route: httpRoute, grpcRoute, tcpRoute or tlsRoute",
            );
            return None;
        }
        [_, second, ..] => {
            r.error(second.0.line, p, format!("this build routes a Rollout through one route; found {} (sluice's route file holds one)", named.len()));
            return None;
        }
    };
    let found = lookup.find(kind, name);
    let object = match found.as_slice() {
        [one] => *one,
        [] => {
            r.error(node.line, p, format!("{kind} {}/{name} not found among the repo's YAML files (sluice copies it to the output with the step's weights)", apex.namespace));
            return None;
        }
        [_, second, ..] => {
            r.error(
                node.line,
                p,
                format!(
                    "{kind} {}/{name} is defined twice (also at {}:{})",
                    apex.namespace, second.file, second.line
                ),
            );
            return None;
        }
    };
    gateway_api::read_source(r, &object, apex).map(Route::GatewayApi)
}
