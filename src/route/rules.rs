//! What every router says besides its route object, as data the rest of sluice asks the
//! registry for: its rows of the Flagger field table (`manifest::flagger_fields`), its built-in
//! metric queries (`metrics::builtin`), its readiness rule (`gates::readiness`) and where its
//! revisions run (`workload`, `render`). The [`Router`](super::Router) items that return these
//! have no default, so a router that does not say one of them does not compile; nothing here
//! names a provider.

use std::fmt;

/// A router's part of the Flagger field table ([`Router::FLAGGER_FIELDS`](super::Router)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlaggerFields {
    /// How the table and its messages name the router: `osm/linkerd/smi`, `nginx/skipper`.
    pub name: &'static str,
    /// Where the router stands among a field's renderers in the table, lowest first. The
    /// table is older than the registry and lists renderers in its own order
    /// (`istio, gatewayapi, ...`); the generated table is kept as users know it.
    pub table_order: u8,
    /// The `spec.service` fields (`spec.service.timeout`) and `spec` references it renders or
    /// refuses with its own message, in the table's order. Every other route field is refused
    /// with this router by `manifest::flagger_fields::refuse_unread`, as Flagger's router would
    /// ignore it.
    pub spec_rows: &'static [(&'static str, FieldUse)],
    /// Its `spec.analysis` rows: one of [`ANALYSIS_RENDERED`], [`ANALYSIS_MATCH_ONLY`] and
    /// [`ANALYSIS_REFUSED`], or none.
    pub analysis_rows: &'static [(&'static str, FieldUse)],
}

impl FlaggerFields {
    /// Every row: the `spec` rows, then the `spec.analysis` ones.
    pub fn rows(&self) -> impl Iterator<Item = &'static (&'static str, FieldUse)> {
        self.spec_rows.iter().chain(self.analysis_rows)
    }
}

/// The `spec.analysis` rows of a router that renders traffic mirroring, A/B matches and
/// session affinity.
pub const ANALYSIS_RENDERED: &[(&str, FieldUse)] = &[
    ("spec.analysis.mirror", FieldUse::Renders),
    ("spec.analysis.mirrorWeight", FieldUse::Renders),
    ("spec.analysis.match", FieldUse::Renders),
    ("spec.analysis.sessionAffinity", FieldUse::Renders),
];

/// The `spec.analysis` rows of a router that renders A/B matches but refuses mirroring and
/// session affinity.
pub const ANALYSIS_MATCH_ONLY: &[(&str, FieldUse)] = &[
    ("spec.analysis.mirror", FieldUse::Refuses),
    ("spec.analysis.mirrorWeight", FieldUse::Refuses),
    ("spec.analysis.match", FieldUse::Renders),
    ("spec.analysis.sessionAffinity", FieldUse::Refuses),
];

/// The `spec.analysis` rows of a router that only shifts weights: mirroring, A/B matches and
/// session affinity are refused.
pub const ANALYSIS_REFUSED: &[(&str, FieldUse)] = &[
    ("spec.analysis.mirror", FieldUse::Refuses),
    ("spec.analysis.mirrorWeight", FieldUse::Refuses),
    ("spec.analysis.match", FieldUse::Refuses),
    ("spec.analysis.sessionAffinity", FieldUse::Refuses),
];

/// What a router does with one route field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldUse {
    /// Written into its route object.
    Renders,
    /// Refused when the canary loads, by the router's own reader with its own message.
    Refuses,
}

/// A router's built-in metrics for one `spec.provider` string
/// ([`Router::builtin_metrics`](super::Router::builtin_metrics)).
#[derive(Debug, Clone, Copy)]
pub enum BuiltinMetrics {
    /// Flagger's observer queries for this provider.
    Queries(QuerySet),
    /// No built-in queries for this string: why, completing `built-in metric
    /// request-duration: provider "smi" ` (what to do instead included).
    None(&'static str),
}

/// The PromQL of Flagger's two built-in metrics for one mesh or ingress (Flagger's observer):
/// `request-success-rate` in percent (0..100) and `request-duration` in milliseconds.
/// Templates with Flagger's variables (`{{ namespace }}`, `{{ target }}`, ...), rendered by
/// `metrics::builtin`.
#[derive(Debug, Clone, Copy)]
pub struct QuerySet {
    /// Whose metrics, for messages: `linkerd`, `http` (the application's own histogram).
    pub name: &'static str,
    pub success_rate: &'static str,
    pub duration: &'static str,
    /// How the canary's names are spelled in the metric labels when not as they are
    /// (Skipper's route ids); applied to every name variable before rendering.
    pub encode_names: Option<fn(&str) -> String>,
    /// How the statistical judge selects the primary instead of the canary with these
    /// queries (`metrics::judge_builtin` renders both).
    pub judge_primary: JudgePrimary,
}

/// How a router's built-in queries select the primary's series instead of the canary's, for
/// the statistical judge ([`QuerySet::judge_primary`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgePrimary {
    /// `{{ target }}` names the workload: the primary's query renders with `<target>-primary`.
    Workload,
    /// The query text names the canary's proxy objects (spelled with `-canary` or a `canary`
    /// label): each `from` is replaced with `to` before rendering. Only for queries that
    /// spell names as they are (no `encode_names`).
    Replace(&'static [(&'static str, &'static str)]),
    /// The queries cannot tell the primary apart (one route carries both backends, or the
    /// primary is a revision the query model does not name): the judge refuses them.
    Unselectable,
}

impl fmt::Display for QuerySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// Where a canary's two revisions run ([`Router::revisions`](super::Router::revisions)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revisions<'a> {
    /// In a primary and a canary workload, each behind its Service: sluice writes them from
    /// the target (or the user owns them, route-only), and the route splits between Services.
    Workloads,
    /// In the route object itself (a Knative Service runs both): no workload and no Service
    /// is written, the route splits between the revisions the status names, and `revision`
    /// is the one the source is at now, named by the router.
    InRoute { revision: &'a str },
}

/// An object the readiness gate reads besides the workloads
/// ([`Router::readiness`](super::Router::readiness)); one that does not exist yet is not ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadyObject<'a> {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// The resource's plural, for the API path and the permission messages name.
    pub plural: &'static str,
    /// How messages name the kind: `Knative Revision`, `HTTPRoute`.
    pub what: &'static str,
    /// Its name, in the canary's namespace.
    pub name: &'a str,
    pub condition: ReadyCondition,
}

/// How the readiness gate judges a [`ReadyObject`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadyCondition {
    /// Its `Ready` condition is `True` (Flagger's `revision.IsReady()` for Knative).
    Ready,
    /// Every parent (Gateway) in its status has accepted it.
    ParentsAccepted,
}

/// The object a router rolls out itself in place of a Deployment or DaemonSet target (a
/// Knative Service): the canary has no `service` block to require, no primary, and nothing
/// to revert on deletion ([`Router::OWN_TARGET`](super::Router::OWN_TARGET)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnTarget {
    /// The target's `apiVersion` that selects it whatever the provider.
    pub api_version: &'static str,
    /// The target's `kind`.
    pub kind: &'static str,
    /// The error at `spec.provider` when another provider names such a target.
    pub other_provider: &'static str,
    /// The error at `spec.revertOnDeletion`.
    pub no_revert: &'static str,
}

/// The three [`Router`](super::Router) items of the common router, as one line in its `impl`:
/// it rolls out no target of its own ([`OWN_TARGET`](super::Router::OWN_TARGET) `None`), its
/// revisions run in workloads behind Services, and the workloads alone decide readiness. A
/// router that differs in any of them writes all three itself. The items keep no default in
/// the trait, so a router that says neither this nor the items does not compile.
macro_rules! workload_router {
    () => {
        const OWN_TARGET: Option<$crate::route::OwnTarget> = None;

        fn revisions(_config: &Self::Config) -> $crate::route::Revisions<'_> {
            $crate::route::Revisions::Workloads
        }

        fn readiness<'a>(
            _config: &'a Self::Config,
            _canary: &'a $crate::route::Canary,
        ) -> Option<$crate::route::ReadyObject<'a>> {
            None
        }
    };
}
pub(crate) use workload_router;
