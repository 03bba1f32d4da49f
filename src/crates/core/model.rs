//! Validated canary specs: the types `core::decide` sees.
//!
//! Every value here has passed validation (the adapters' `spec` readers): names are DNS-1123,
//! paths are relative and stay inside the repo, the schedule is non-empty and increasing. Both
//! input formats end up as one [`Canary`]. This module does no IO.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::schedule::Step;

/// A Kubernetes object name (DNS-1123 subdomain, at most 253 characters).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Name(String);

impl Name {
    /// Checks DNS-1123 subdomain rules; the error says what was wrong.
    pub fn parse(text: &str) -> Result<Name, String> {
        if text.is_empty() {
            return Err("expected a DNS-1123 name, found an empty string".into());
        }
        if text.len() > 253 {
            return Err(format!(
                "expected a DNS-1123 name of at most 253 characters, found {} characters",
                text.len()
            ));
        }
        let valid_label = |label: &str| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        };
        if !text.split('.').all(valid_label) {
            return Err(format!(
                "expected a DNS-1123 name (lowercase letters, digits, '-' and '.', starting and ending alphanumeric), found {text:?}"
            ));
        }
        Ok(Name(text.to_string()))
    }

    /// Checks DNS-1123 label rules (what Kubernetes allows for a namespace): a name without
    /// dots, of at most 63 characters.
    pub fn parse_label(text: &str) -> Result<Name, String> {
        let name = Name::parse(text)?;
        if text.contains('.') || text.len() > 63 {
            let found = if text.len() > 63 {
                format!("{} characters", text.len())
            } else {
                format!("{text:?}")
            };
            return Err(format!(
                "expected a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters, no dots), found {found}"
            ));
        }
        Ok(name)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Name {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Name::parse(&value)
    }
}

impl From<Name> for String {
    fn from(value: Name) -> Self {
        value.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A path inside the config repo: relative, '/'-separated, no `..`, no empty segments.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RepoPath(String);

impl RepoPath {
    pub fn parse(text: &str) -> Result<RepoPath, String> {
        if text.is_empty() {
            return Err("expected a path relative to the repo root, found an empty string".into());
        }
        if text.starts_with('/') || text.starts_with('\\') || text.get(1..2) == Some(":") {
            return Err(format!(
                "expected a path relative to the repo root, found the absolute path {text:?}"
            ));
        }
        let trimmed = text.trim_end_matches('/');
        let mut parts = Vec::new();
        for part in trimmed.split('/') {
            match part {
                "" | "." => continue,
                ".." => {
                    return Err(format!(
                        "expected a path inside the repo, found {text:?} (contains '..')"
                    ))
                }
                p if p.contains('\\') => {
                    return Err(format!("expected '/' as path separator, found {text:?}"))
                }
                // Git refuses to track anything under `.git` (in any case), so nothing written
                // there could ever be committed.
                p if p.eq_ignore_ascii_case(".git") => {
                    return Err(format!(
                        "expected a path git can track, found {text:?} (inside .git)"
                    ))
                }
                p => parts.push(p),
            }
        }
        if parts.is_empty() {
            return Err(format!(
                "expected a path below the repo root, found {text:?}"
            ));
        }
        Ok(RepoPath(parts.join("/")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn join(&self, child: &str) -> String {
        format!("{}/{}", self.0, child)
    }
}

impl TryFrom<String> for RepoPath {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        RepoPath::parse(&value)
    }
}

impl From<RepoPath> for String {
    fn from(value: RepoPath) -> Self {
        value.0
    }
}

impl fmt::Display for RepoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `namespace/name`: identifies a canary across the repo.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CanaryId {
    pub namespace: Name,
    pub name: Name,
}

impl fmt::Display for CanaryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Which input format a canary was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `sluice.dev/v1alpha1 Canary`.
    Native,
    /// `flagger.app/v1beta1 Canary`, read unchanged.
    Flagger,
}

/// One validated canary. `R` is the route the canary writes: the adapters' routers fill it in
/// (the core never looks at it), and core tests leave it `()`.
#[derive(Debug, Clone, PartialEq)]
pub struct Canary<R = ()> {
    pub id: CanaryId,
    /// Repo-relative file and line the canary was read from.
    pub file: String,
    pub line: usize,
    pub format: Format,
    pub target: Target,
    pub output: RepoPath,
    pub service: ServiceSpec,
    pub route: R,
    pub analysis: Analysis,
    pub skip_analysis: bool,
    /// An Argo Rollout's `spec.rollbackWindow.revisions` (0: none): a rollback to one of
    /// the revisions rolled out before the stable one is promoted at once
    /// ([`crate::rollback_window`]).
    pub rollback_window: u32,
    pub suspend: bool,
    /// Flagger's `progressDeadlineSeconds` (default 600 s).
    pub progress_deadline: Duration,
    /// The mesh or ingress serving the canary (Flagger's `provider` string, e.g. `osm`,
    /// `linkerd`, `gatewayapi:v1`); selects the PromQL of the built-in metrics.
    pub provider: Option<String>,
    /// Prometheus address for this canary (Flagger's `spec.metricsServer`).
    pub metrics_server: Option<String>,
    /// Without a sync target: how long after a commit the step's clock starts (the time the
    /// GitOps engine is given to apply it). From `.sluice/config.yaml` `settle`.
    pub settle: Duration,
    /// The GitOps object that applies this canary's output (native `spec.sync`, else the
    /// repo default); `None`: the step clock starts at push plus a settle delay.
    pub sync: Option<SyncTarget>,
    /// Flagger's `spec.autoscalerRef`: the autoscaler that owns the workload's replicas.
    pub autoscaler: Option<AutoscalerRef>,
    /// Flagger's `spec.revertOnDeletion`: when the spec is deleted, the output goes back to the
    /// target workload at the primary's spec and the apex Service selecting it. Recorded in
    /// the status file, the only place sluice still reads once the spec is gone.
    pub revert_on_deletion: bool,
    /// The wave this instance rolls out in, when the spec has waves (see the `waves` module).
    pub wave: Option<WaveOf>,
    /// The `sluice.dev/priority` annotation (default 0): under `maxConcurrentCanaries`, a
    /// higher one starts first.
    pub priority: i64,
    /// Who must approve its approval pull requests (the wave's `approval`, else the spec's
    /// `approval` or Flagger annotations, else the repo's `approval`, else `forge.approvers`);
    /// `None`: anyone who can merge approves.
    pub approval: Option<crate::approval::ApprovalPolicy>,
    /// `.sluice/config.yaml` `adoption.hold`: the repo is moving from Flagger. A first render
    /// then points the primary at Flagger's `-primary` copies of the ConfigMaps and Secrets
    /// the repo does not hold, so its pod template is the one Flagger has live.
    pub adoption_hold: bool,
}

impl<R> Canary<R> {
    /// The canary's own name: its id's name, or for a wave's instance (whose id is
    /// `<name>.<wave>`) the name the spec gives. Workloads, queries and hooks use this one.
    pub fn base_name(&self) -> &Name {
        self.wave.as_ref().map_or(&self.id.name, |w| &w.canary)
    }
}

/// What `onFailure` asks for when a wave fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// The failed wave rolls back in its own folder; the earlier waves keep the new revision,
    /// the later ones keep the old one, and the release is Failed.
    #[default]
    Hold,
    /// The failed wave rolls back in its own folder, and each earlier wave that took the
    /// failed revision is reverted to what it ran before the release reached it (one commit
    /// per wave); the later ones keep the old revision, and the release is Failed.
    Rollback,
}

impl OnFailure {
    pub const ALL: [(&'static str, OnFailure); 2] =
        [("hold", OnFailure::Hold), ("rollback", OnFailure::Rollback)];

    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Hold => "hold",
            OnFailure::Rollback => "rollback",
        }
    }
}

/// How the gates of a wave reach its cluster (sync and readiness).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cluster {
    /// A context of the kubeconfig sluice is given (`KUBECONFIG`, `~/.kube/config`).
    KubeContext(String),
    /// An API server address (`https://`, or `http://` where the operator allows it) and
    /// the Secret that holds its credentials: key `token` (a bearer token) and, optionally,
    /// `ca.crt` (the CA bundle), the keys of a ServiceAccount token Secret. The Secret is in
    /// the canary's namespace and is mapped into sluice as every `secretRef` is; the repo
    /// names no file.
    Server {
        server: String,
        namespace: Name,
        secret: Name,
    },
}

impl fmt::Display for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cluster::KubeContext(c) => write!(f, "kube context {c}"),
            Cluster::Server { server, .. } => write!(f, "API server {server}"),
        }
    }
}

/// The wave a canary instance belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct WaveOf {
    /// The canary's own name (the instance's id carries `<name>.<wave>`).
    pub canary: Name,
    /// This wave's name.
    pub name: Name,
    /// Where the wave is written: the canary's file, or its `Waves` object's; the line of
    /// the wave's entry; the field path of the entry (`spec.waves[1]`).
    pub file: String,
    pub line: usize,
    pub field: String,
    /// 0-based position in the release.
    pub index: usize,
    /// Every wave's name, in release order.
    pub waves: Vec<Name>,
    /// Whether a person approves the wave's start (the approval pull request flow).
    pub approval: bool,
    pub on_failure: OnFailure,
    /// Where the wave's sync and readiness gates look; `None`: the cluster sluice's own kube
    /// client reaches.
    pub cluster: Option<Cluster>,
    /// The line of the wave's `cluster.server` (of `cluster` for a kube context; 0 without
    /// one), for the errors the loader reports about it after reading.
    pub cluster_line: usize,
    /// `metricsSecretRef`: the Secret (in the canary's namespace, mapped into sluice as every
    /// `secretRef`) with the credentials of the wave's `metricsServer`: key `token` (bearer),
    /// else `username` and `password` (basic).
    pub metrics_secret: Option<Name>,
}

/// Flagger's `spec.autoscalerRef`: the user's autoscaler, which sluice copies for the primary
/// (`<name>-primary`) and the canary. The object itself is looked up in the repo by the
/// workload adapter; the core only carries the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoscalerRef {
    pub kind: AutoscalerKind,
    pub name: Name,
    /// Line of `spec.autoscalerRef.name` in the canary's file, for errors about the reference.
    pub line: usize,
    /// `primaryScalerReplicas.minReplicas`: replaces the primary copy's lower bound.
    pub primary_min_replicas: Option<i32>,
    /// `primaryScalerReplicas.maxReplicas`: replaces the primary copy's upper bound.
    pub primary_max_replicas: Option<i32>,
    /// `primaryScalerQueries` (ScaledObject only): trigger name -> the primary's query.
    pub primary_queries: Option<BTreeMap<String, String>>,
}

/// The autoscaler kinds Flagger reconciles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoscalerKind {
    /// `autoscaling/v2` (or `v2beta2` input) HorizontalPodAutoscaler.
    HorizontalPodAutoscaler,
    /// KEDA `keda.sh/v1alpha1` ScaledObject.
    ScaledObject,
}

impl AutoscalerKind {
    /// The kind as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            AutoscalerKind::HorizontalPodAutoscaler => "HorizontalPodAutoscaler",
            AutoscalerKind::ScaledObject => "ScaledObject",
        }
    }

    /// The apiVersion sluice writes for this kind.
    pub fn api_version(self) -> &'static str {
        match self {
            AutoscalerKind::HorizontalPodAutoscaler => "autoscaling/v2",
            AutoscalerKind::ScaledObject => "keda.sh/v1alpha1",
        }
    }
}

/// What the canary rolls out.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Native `spec.source`: the Deployment manifest humans edit.
    Source { path: RepoPath },
    /// Flagger `targetRef`: found by kind/name among the repo's manifests.
    TargetRef { kind: String, name: Name },
    /// Native `spec.routeOnly`: the user owns both workloads; sluice writes only the route.
    RouteOnly {
        services: [Name; 2],
        revision: String,
    },
    /// An Argo Rollouts `Rollout`, read unchanged: its pod template (or the Deployment its
    /// `workloadRef` names) runs as a stable and a canary workload, and its own
    /// `stableService` and `canaryService` select them. The stable one takes the promoted
    /// spec at promotion, as Flagger's primary does.
    Rollout {
        name: Name,
        stable_service: Name,
        canary_service: Name,
        /// A canary without `trafficRouting`: the pods split the traffic, so each weight is a
        /// pair of replica counts; `None` when a router splits it.
        replica_canary: Option<ReplicaCanary>,
        /// A canary with `trafficRouting` that scales beyond its traffic share
        /// (`setCanaryScale` steps, `dynamicStableScale`); `None` when it does not.
        scale: Option<crate::argo_replicas::RoutedScale>,
        /// The `setHeaderRoute` steps, in Argo's order, and the managed routes active after
        /// each (empty for a Rollout without them).
        managed_routes: Vec<ManagedStep>,
        /// Whether the Rollout names its `stableService` and its `canaryService`. Both are
        /// named, except with Istio subset-level routing (`trafficRouting.istio.destinationRule`),
        /// where Argo lets a Rollout leave either out: the DestinationRule's subsets pick the
        /// workloads, a name not given stands in as its workload's (`<rollout>-stable`,
        /// `<rollout>-canary`) and no Service is copied for it.
        services_named: [bool; 2],
        /// The `experiment` steps, in order (empty for a Rollout without them).
        experiments: Vec<crate::argo_experiment::ExperimentStep>,
        /// Whether Argo's first step is `setWeight: 0`: sluice's step 1, at weight 0, is that
        /// step. Otherwise a step at weight 0 is one of sluice's own for the steps Argo runs
        /// before its first `setWeight` (an experiment, an analysis, a managed route).
        set_weight_zero: bool,
    },
}

/// One `setHeaderRoute` step of an Argo Rollout: the sluice step it runs at (1-based, as
/// `Status::step`), Argo's words for it, and the managed routes active from it on (each by
/// the index among Argo's steps of the `setHeaderRoute` that set it, in the order the router
/// adds their rules). Argo removes every managed route when the
/// rollout ends or aborts, so none is active outside the analysis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedStep {
    pub step: u32,
    pub words: String,
    pub active: Vec<u32>,
}

/// The managed routes active at sluice step `step` (1-based): those of the last
/// `setHeaderRoute` step at or before it.
pub fn managed_routes_at(steps: &[ManagedStep], step: u32) -> &[u32] {
    steps
        .iter()
        .rev()
        .find(|m| m.step <= step)
        .map_or(&[], |m| m.active.as_slice())
}

/// An Argo Rollouts canary without `trafficRouting`: one Service (the user's, selecting
/// both workloads' pods) spreads requests over the pods, so the weight is the share of canary
/// pods ([`ReplicaSplit`](crate::argo_replicas::ReplicaSplit)). `stableService` and
/// `canaryService` are optional here; Argo still points each named one at its own pods. The
/// `Target::Rollout` service names are the named Services, or the workload names
/// (`<rollout>-stable`, `<rollout>-canary`) for one not named: no route object refers to them.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaCanary {
    pub split: crate::argo_replicas::ReplicaSplit,
    pub stable_service: Option<Name>,
    pub canary_service: Option<Name>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServiceSpec {
    /// Apex service name (defaults to the canary's name).
    pub name: Name,
    pub port: u16,
    pub target_port: Option<PortRef>,
    /// The service port's name (Flagger's `portName`, default `http`).
    pub port_name: String,
    /// The service port's `appProtocol` (Flagger's `appProtocol`).
    pub app_protocol: Option<String>,
    /// `clusterIP: None` (Flagger's `headless`).
    pub headless: bool,
    /// Also expose the pod template's other container ports (Flagger's `portDiscovery`).
    pub port_discovery: bool,
    /// The Services' `spec.trafficDistribution` (Flagger's `trafficDistribution`).
    pub traffic_distribution: Option<String>,
    /// Labels and annotations of the apex, primary and canary Services (Flagger's `apex`,
    /// `primary`, `canary`).
    pub apex: ServiceMetadata,
    pub primary: ServiceMetadata,
    pub canary: ServiceMetadata,
}

impl ServiceSpec {
    /// A Service on `port` with Flagger's defaults for everything else.
    pub fn new(name: Name, port: u16) -> ServiceSpec {
        ServiceSpec {
            name,
            port,
            target_port: None,
            port_name: "http".to_string(),
            app_protocol: None,
            headless: false,
            port_discovery: false,
            traffic_distribution: None,
            apex: ServiceMetadata::default(),
            primary: ServiceMetadata::default(),
            canary: ServiceMetadata::default(),
        }
    }
}

/// Labels and annotations for one of the three Services.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceMetadata {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef {
    Number(u16),
    Name(String),
}

/// How the rollout proceeds and what gates it.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub interval: Duration,
    /// Failed checks that trigger a rollback.
    pub threshold: u32,
    pub strategy: Strategy,
    /// Primary weight added per interval during promotion; `None` returns all traffic at once.
    pub step_weight_promotion: Option<u8>,
    pub metrics: Vec<MetricSpec>,
    pub webhooks: Vec<WebhookSpec>,
    pub approvals: Approvals,
    /// Flagger's `analysis.mirror`: a blue/green analysis mirrors requests to the canary
    /// (the route state's [`mirroring`](crate::status::Status::mirroring)).
    pub mirror: bool,
    /// Flagger's `analysis.sessionAffinity`: a user sent to the canary stays on it.
    pub session_affinity: Option<SessionAffinity>,
    /// Flagger's `analysis.primaryReadyThreshold`: the percent of the primary's updated pods
    /// that must be available before a step counts (0..=100, default 100). The readiness
    /// gate applies it; the core only carries it.
    pub primary_ready_threshold: u8,
    /// Flagger's `analysis.canaryReadyThreshold`, the same for the canary workload.
    pub canary_ready_threshold: u8,
    /// Flagger's `analysis.alerts`, and what `muteAlert` silences.
    pub alerts: Alerts,
    /// The statistical judge (native `analysis.judge`, or the `Judge` a Flagger canary's
    /// `sluice.dev/judge` annotation names): the canary's series against the primary's.
    pub judge: Option<crate::judge::JudgeSpec>,
    /// A Rollout's analysis metrics (its `analysis` steps and background analysis), judged
    /// by Argo's rules ([`crate::argo_analysis`]); empty for other formats.
    pub argo: Vec<ArgoGate>,
}

/// Flagger's alerts for one canary: `analysis.alerts` with each `providerRef` resolved to its
/// `AlertProvider` when the spec was loaded, and the approval waits a confirm-* hook's
/// `muteAlert` silences. The core never reads it: the adapters send the alerts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Alerts {
    pub alerts: Vec<Alert>,
    /// Every `confirm-rollout` hook sets `muteAlert`: waiting for it sends no alert.
    pub mute_rollout: bool,
    /// Every `confirm-traffic-increase` hook sets `muteAlert`.
    pub mute_traffic_increase: bool,
    /// Every `confirm-promotion` hook sets `muteAlert`.
    pub mute_promotion: bool,
    /// Flagger's "Traffic routing" metadata line, from the spec's own `stepWeight(s)` and
    /// `maxWeight` (the schedule alone cannot say what was written): `None` when Flagger
    /// sends none.
    pub traffic_routing: Option<String>,
}

/// One entry of `analysis.alerts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    pub name: String,
    /// The lowest severity sent (Flagger's default `info`: everything).
    pub severity: Severity,
    pub provider: AlertProvider,
}

/// Flagger's alert severities, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Info,
    Warn,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Error => "error",
        }
    }

    /// Whether an alert set to `self` is sent for an event of severity `event`, as Flagger
    /// filters them (`pkg/controller/events.go`): `info` takes every event, `warn` takes warn
    /// and error events, `error` takes error events.
    pub fn admits(self, event: Severity) -> bool {
        event >= self
    }
}

/// A `flagger.app/v1beta1 AlertProvider` from the repo, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertProvider {
    pub namespace: Name,
    pub name: Name,
    pub kind: AlertKind,
    /// `spec.channel`, Flagger's default `general`.
    pub channel: String,
    /// `spec.username`, Flagger's default `flagger`.
    pub username: String,
    pub target: AlertTarget,
    /// `spec.proxy`: an `http://` or `https://` proxy URL.
    pub proxy: Option<String>,
}

/// Where an alert provider posts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlertTarget {
    /// `spec.address`, an `http://` or `https://` URL.
    Address(String),
    /// `spec.secretRef.name`: the Secret (in the provider's namespace) whose `address` key
    /// holds the URL and whose optional `token` key a bearer token (Slack only), as the
    /// operator maps it into sluice.
    Secret(Name),
}

/// An AlertProvider's `spec.type` (Flagger's `pkg/notifier/factory.go`), one the main
/// crate's alert registry (`alert_kinds/mod.rs`) lists and parsed through it. The core
/// carries it and knows no kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertKind(&'static str);

impl AlertKind {
    /// The kind `spec.type` spells `key`; made by the alert registry, which checks it.
    pub const fn registered(key: &'static str) -> AlertKind {
        AlertKind(key)
    }

    /// As `spec.type` spells it.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

/// What the core needs of `analysis.sessionAffinity`: the cookie names, which go into the
/// cookies each rollout sets. The cookie's attributes (`maxAge`, `domain`, ...) are the
/// router's business.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionAffinity {
    /// An HTTP cookie name (an RFC 6265 token, checked by the spec reader).
    pub cookie_name: String,
    /// Flagger's `primaryCookieName`: while the canary takes traffic, responses from the
    /// primary set a cookie of this name too, so users sent to the primary stay on it for an
    /// interval. Another cookie name than `cookie_name` (checked by the spec reader).
    pub primary_cookie_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Strategy {
    /// Progressive traffic shifting through these steps (non-empty, increasing weights; a
    /// Rollout's steps repeat a weight for a pause or an analysis Argo runs after the one
    /// before it).
    Canary { steps: Vec<Step> },
    /// Blue/green: `iterations` analysis intervals, then switch all traffic.
    BlueGreen { iterations: u32 },
    /// A/B: `iterations` intervals with matching requests routed to the canary.
    /// The request matches are the router's business: they live in the canary's route.
    AB { iterations: u32 },
}

impl Strategy {
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Canary { .. } => "canary",
            Strategy::BlueGreen { .. } => "bluegreen",
            Strategy::AB { .. } => "ab",
        }
    }
}

/// Human approvals a native canary asks for (Flagger input uses confirm-* webhooks instead).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Approvals {
    pub before_rollout: bool,
    pub before_traffic_increase: bool,
    pub before_promotion: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpec {
    pub name: String,
    pub query: MetricQuery,
    pub interval: Option<Duration>,
    pub range: ThresholdRange,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MetricQuery {
    /// Flagger's `request-success-rate` / `request-duration`.
    Builtin(BuiltinMetric),
    /// A Flagger MetricTemplate in the repo.
    Template {
        name: Name,
        namespace: Name,
        variables: BTreeMap<String, String>,
    },
    /// An inline PromQL query (native only).
    Query(String),
}

pub use crate::argo_metric::ArgoGate;
pub use crate::builtin_metric::BuiltinMetric;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThresholdRange {
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl ThresholdRange {
    /// Flagger's rule: a value passes when `min <= value <= max` for the bounds that are set.
    /// A value that is not a finite number (NaN, +Inf, -Inf: a division by zero in the query)
    /// never passes, whatever the bounds.
    pub fn admits(&self, value: f64) -> bool {
        value.is_finite()
            && self.min.is_none_or(|min| value >= min)
            && self.max.is_none_or(|max| value <= max)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSpec {
    pub name: String,
    pub kind: WebhookKind,
    pub url: String,
    pub timeout: Duration,
    pub retries: u32,
    pub metadata: BTreeMap<String, String>,
    /// Flagger's `disableTLS`: skip certificate verification for this hook.
    pub disable_tls: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WebhookKind {
    ConfirmRollout,
    PreRollout,
    Rollout,
    ConfirmTrafficIncrease,
    ConfirmPromotion,
    PostRollout,
    Rollback,
    Event,
}

impl WebhookKind {
    pub const ALL: [(&'static str, WebhookKind); 8] = [
        ("confirm-rollout", WebhookKind::ConfirmRollout),
        ("pre-rollout", WebhookKind::PreRollout),
        ("rollout", WebhookKind::Rollout),
        (
            "confirm-traffic-increase",
            WebhookKind::ConfirmTrafficIncrease,
        ),
        ("confirm-promotion", WebhookKind::ConfirmPromotion),
        ("post-rollout", WebhookKind::PostRollout),
        ("rollback", WebhookKind::Rollback),
        ("event", WebhookKind::Event),
    ];
}

/// Which GitOps engine object applies a canary's output, so sluice can tell when a pushed
/// commit is live (`sync: {flux: ...}` or `sync: {argocd: ...}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SyncTarget {
    /// A Flux `kustomize.toolkit.fluxcd.io/v1 Kustomization`.
    Flux {
        kustomization: Name,
        namespace: Name,
    },
    /// An Argo CD `argoproj.io/v1alpha1 Application`.
    ArgoCd { application: Name, namespace: Name },
}

impl SyncTarget {
    /// Namespace used when `sync.flux.namespace` is not set (where `flux bootstrap` installs).
    pub const FLUX_DEFAULT_NAMESPACE: &'static str = "flux-system";
    /// Namespace used when `sync.argocd.namespace` is not set (Argo CD's install namespace).
    pub const ARGOCD_DEFAULT_NAMESPACE: &'static str = "argocd";

    /// The object's kind, as the API server names it.
    pub fn kind(&self) -> &'static str {
        match self {
            SyncTarget::Flux { .. } => "Kustomization",
            SyncTarget::ArgoCd { .. } => "Application",
        }
    }

    pub fn name(&self) -> &Name {
        match self {
            SyncTarget::Flux { kustomization, .. } => kustomization,
            SyncTarget::ArgoCd { application, .. } => application,
        }
    }

    pub fn namespace(&self) -> &Name {
        match self {
            SyncTarget::Flux { namespace, .. } | SyncTarget::ArgoCd { namespace, .. } => namespace,
        }
    }
}

impl fmt::Display for SyncTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind(), self.namespace(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_paths_inside_dot_git_are_refused_in_any_case() {
        for text in [".git/hooks", "apps/.git/x", ".GIT/hooks", "a/.Git"] {
            let e = RepoPath::parse(text).unwrap_err();
            assert!(e.contains("inside .git"), "{text}: {e}");
        }
        for text in [".github/workflows", "apps/.gitops", "clusters/prod/web"] {
            assert!(RepoPath::parse(text).is_ok(), "{text}");
        }
    }
}

/// A revision as commit subjects and the `Sluice-Revision` trailer show it: a content hash
/// (hex) cut to 7 characters, as git shortens commit ids; any other revision (a route-only
/// `revision: v2`, a Knative revision name `<svc>-<hash>`) whole, since its prefix alone would
/// not tell two revisions apart.
pub fn short_revision(revision: &str) -> &str {
    match revision.get(..7) {
        Some(prefix) if revision.bytes().all(|b| b.is_ascii_hexdigit()) => prefix,
        _ => revision,
    }
}

#[cfg(test)]
mod short_revision_tests {
    use super::short_revision;

    #[test]
    fn hashes_are_cut_and_named_revisions_kept_whole() {
        assert_eq!(short_revision("9e46dc7a1b2c3d"), "9e46dc7");
        assert_eq!(short_revision("v2"), "v2");
        assert_eq!(short_revision("podinfo-7869eea882"), "podinfo-7869eea882");
        assert_eq!(short_revision("release-2026-11"), "release-2026-11");
    }
}
