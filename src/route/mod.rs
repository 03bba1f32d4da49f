//! Routers: one module per route provider, each behind the [`Router`] trait, chosen at load
//! time through the registry ([`Provider`] for Flagger's `spec.provider`, the native
//! `spec.route.kind`) and carried in the canary as the typed [`Route`].
//!
//! A router owns everything about its provider, and the registry (`registry.rs`) is the one
//! place a provider is named:
//! - reading and checking that provider's Flagger `service` fields (and a native `spec.route`
//!   of its kind) into its validated config type, and rendering that config into the YAML file
//!   of its route object from its one template in `templates/`, compiled into the binary;
//! - its rows of the Flagger field table ([`Router::FLAGGER_FIELDS`]: what it renders and
//!   refuses; `manifest::flagger_fields` renders the table and refuses the rest by asking the
//!   registry);
//! - its built-in metric queries for each of its provider strings, or an explicit none
//!   ([`Router::builtin_metrics`], rendered by `metrics::builtin`), each saying how the
//!   statistical judge selects the primary's series ([`QuerySet::judge_primary`], read by
//!   `metrics::judge_builtin`);
//! - the provider strings Flagger's factory sends it by prefix ([`Router::FLAGGER_PREFIXES`]);
//! - its readiness rule ([`Router::readiness`], read by `gates::readiness`) and where the
//!   revisions run ([`Router::revisions`], used by `workload` and `render`: a Knative Service
//!   runs both itself), and a target it rolls out itself ([`Router::OWN_TARGET`], checked by
//!   `manifest::canary`).
//!
//! Every value reaches a template through `tojson`, so no input can change the YAML
//! structure, and every rendered file is parsed back and its weights re-checked before it is
//! returned.
//!
//! Adding a provider: a module here (`route/<provider>.rs`, or a folder if it is big) with a
//! unit struct implementing [`Router`] (its items have no defaults where a router must say
//! something: the compiler asks for each; `workload_router!()` says the common three), its template (or none), one line in the `routers!`
//! list of `registry.rs`, its tests, and its line in `e2e/it/kustomize_every_router.rs`'s
//! fixtures (a test fails without it). Nothing outside `route/` changes: `manifest::canary` hands
//! the registry the raw nodes and stores the [`Route`] it returns, and the rest asks the
//! [`Route`] or the registry.
//!
//! Rendering is pure: no git, no files, no clock, and deterministic, so every [`RouteError`] is
//! terminal: the same input fails the same way and retrying cannot help. Reading reports every
//! problem through the spec [`Reader`] with its file, line and field.

/// The label on a Rollout's stable and canary workloads (`stable` or `canary`), in place of
/// Argo's `rollouts-pod-template-hash`: the Services' selectors and Istio's DestinationRule
/// subsets pick each workload by it.
pub const ROLLOUT_ROLE_LABEL: &str = "sluice.dev/rollout-role";

pub mod apisix;
pub mod appmesh;
pub mod contour;
pub mod copied;
pub mod gateway_api;
pub mod gloo;
mod header_match;
pub mod ingress;
pub mod istio;
pub mod knative;
pub mod kubernetes;
pub mod kuma;
mod referenced;
mod registry;
pub mod route_source;
mod rules;
pub mod smi;
pub mod traefik;

use std::fmt;

use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

use crate::core::model::Strategy;
use crate::core::status::Status;
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};
use crate::yaml::snapshot::Snapshot;

pub(crate) use header_match::{is_header_name, read_header_matches, single_header_match};
pub use registry::{
    builtin_metrics, flagger_fields, own_targets, parse_provider, provider_by_prefix,
    provider_names, route_objects, Provider, Route, FLAGGER_DEFAULT_PROVIDER,
    FLAGGER_DEFAULT_PROVIDER_NAME,
};
pub(crate) use rules::workload_router;
pub use rules::{
    BuiltinMetrics, FieldUse, FlaggerFields, JudgePrimary, OwnTarget, QuerySet, ReadyCondition,
    ReadyObject, Revisions, ANALYSIS_MATCH_ONLY, ANALYSIS_REFUSED, ANALYSIS_RENDERED,
};

/// A validated canary whose route is one of these routers (`manifest::model` names it too).
pub type Canary = crate::core::model::Canary<Route>;

/// One route provider. Implemented by a unit struct in the provider's module; the registry
/// (`registry.rs`) lists each router once and dispatches on [`Provider`] and [`Route`], whose
/// variants hold this trait's [`Variant`](Router::Variant) and [`Config`](Router::Config).
pub trait Router {
    /// What a `provider` string selects within this router (usually its object's API version).
    type Variant: Copy + fmt::Debug + PartialEq + Eq + 'static;
    /// The validated route: typed values only (parsed matches, durations), everything
    /// [`render`](Router::render) needs besides the canary's own fields.
    type Config: Clone + fmt::Debug + PartialEq;

    /// What it writes, for messages: `SMI TrafficSplit`.
    const OBJECT: &'static str;
    /// The Flagger `spec.provider` strings it serves and what each selects, in the order
    /// messages list them. Unique across routers (a registry test checks).
    const PROVIDERS: &'static [(&'static str, Self::Variant)];
    /// Provider strings it also accepts but messages do not list.
    const ALIASES: &'static [(&'static str, Self::Variant)];
    /// The native `spec.route.kind` it reads. Unique across routers.
    const NATIVE_KIND: &'static str;
    /// The fields of a native `spec.route` it reads besides `apiVersion` and `kind`; the
    /// registry rejects another router's fields before calling [`read_native`](Router::read_native).
    const NATIVE_FIELDS: &'static [&'static str];

    /// A message for a provider string that is almost one of this router's (a bare
    /// `gatewayapi`); the registry appends the supported list.
    fn near_miss(text: &str) -> Option<String>;

    /// Provider strings Flagger 1.44's router factory (`pkg/router/factory.go`, `MeshRouter`)
    /// sends to this router by prefix, in the order it tries them (the registry tries routers
    /// in its order, first match wins). `&[]` (the default): Flagger matches its names only.
    const FLAGGER_PREFIXES: &'static [FlaggerPrefix] = &[];

    /// The `spec` references this router reads (`ingressRef`, `routeRef`, `upstreamRef`); a
    /// canary naming another one is refused before [`read_flagger`](Router::read_flagger).
    const REFERENCES: &'static [&'static str] = &[];

    /// Reads a Flagger canary's route fields for `variant`; `None` when any had errors
    /// (reported through `r`).
    fn read_flagger(
        r: &mut Reader,
        variant: Self::Variant,
        input: &FlaggerInput,
    ) -> Option<Self::Config>;

    /// Reads a native `spec.route` of [`NATIVE_KIND`](Router::NATIVE_KIND) (a mapping whose
    /// keys the registry checked) with the `apiVersion` the registry read from it.
    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Self::Config>;

    /// Converts and checks an A/B canary's `analysis.match` into `config`, reporting problems
    /// through `r`. Called only when the analysis is A/B; a router that cannot route on
    /// requests says so when rendering.
    fn read_ab_matches(config: &mut Self::Config, r: &mut Reader, input: &AbInput);

    /// Checks what this router needs of the whole validated canary (its strategy, its
    /// target), reporting through `r`; `spec` is the canary's `spec` node, for lines. Most
    /// routers run every strategy and target: the default checks nothing.
    fn check_canary(_config: &Self::Config, _r: &mut Reader, _canary: &Canary, _spec: &Node) {}

    /// The `routeRef` name Flagger's metric queries call `{{ route }}` (its `toMetricModel`),
    /// for a router that reads one; `None` (the default) leaves the target's name.
    fn route_ref(_config: &Self::Config) -> Option<&str> {
        None
    }

    /// Renders the route object's YAML, sending the input's `weights` to its `backends`;
    /// `None` for a router that writes no route object (`kubernetes`: the Services alone
    /// switch traffic). The object is named after the apex Service (`canary.service.name`) in
    /// the canary's namespace, so it replaces the route Flagger would have created.
    ///
    /// The input's `state` is the rollout's route state from its status (session cookies,
    /// mirror phase); a router that cannot express it has refused the fields that produce it
    /// when reading.
    fn render(config: &Self::Config, input: &RenderInput) -> Result<Option<String>, RouteError>;

    /// Its rows of the Flagger field table: the route fields it renders and those it refuses
    /// with its own message (`&[]` when none; the rest are refused for it).
    const FLAGGER_FIELDS: FlaggerFields;

    /// Its built-in metric queries for a canary whose `spec.provider` is `provider`, when that
    /// string is this router's as Flagger's observer factory matches it (some by prefix:
    /// `gloo:v1`); `None` when the string is another router's. Every name in
    /// [`PROVIDERS`](Router::PROVIDERS) and [`ALIASES`](Router::ALIASES) gets queries or an
    /// explicit [`BuiltinMetrics::None`] (a registry test checks).
    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics>;

    /// The target it rolls out itself instead of a workload (`None`: a Deployment or
    /// DaemonSet, as for most routers).
    const OWN_TARGET: Option<OwnTarget>;

    /// Where the canary's two revisions run: in workloads behind Services (most routers) or
    /// in the route object itself.
    fn revisions(config: &Self::Config) -> Revisions<'_>;

    /// The object the readiness gate reads after the workloads (an HTTPRoute its Gateways
    /// must accept, a Knative Revision), or `None` when the workloads alone decide.
    fn readiness<'a>(config: &'a Self::Config, canary: &'a Canary) -> Option<ReadyObject<'a>>;
}

/// A provider string Flagger's router factory matches by prefix ([`Router::FLAGGER_PREFIXES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlaggerPrefix {
    /// What the provider string starts with.
    pub prefix: &'static str,
    /// The provider string it runs as (one of the router's [`Router::PROVIDERS`]).
    pub runs_as: &'static str,
    /// What sluice writes for it, for the message: `gateway.networking.k8s.io/v1 HTTPRoutes`.
    pub writes: &'static str,
}

/// The parts of a Flagger Canary's `spec` a router reads.
#[derive(Debug, Clone, Copy)]
pub struct FlaggerInput<'a> {
    /// `spec.service`; `None` when it is missing (already reported).
    pub service: Option<&'a Node>,
    /// `spec.analysis`, if present.
    pub analysis: Option<&'a Node>,
    /// The canary's `metadata` (its annotations select router options, such as Kuma's
    /// `kuma.io/mesh`); `None` when it is missing (already reported).
    pub metadata: Option<&'a Node>,
    /// The canary's whole `spec`: the references its router reads (`ingressRef`,
    /// `routeRef`, `upstreamRef`, listed in [`Router::REFERENCES`]) with their lines.
    pub spec: &'a Node,
    /// The canary's namespace (the default namespace of the objects it references).
    pub namespace: Option<&'a str>,
    /// The repo as loaded: a referenced object is looked up here by kind, namespace and name
    /// (never edited in place); one missing is an error at the reference's line.
    pub snapshot: &'a Snapshot,
}

/// A native canary's `spec.route`, as the registry hands it to its router.
#[derive(Debug, Clone, Copy)]
pub struct NativeInput<'a> {
    /// The `spec.route` mapping (its keys checked by the registry).
    pub route: &'a Node,
    /// Its `apiVersion`.
    pub api_version: &'a str,
    /// The line of its `apiVersion`.
    pub api_line: usize,
}

/// What one route file is rendered from: the canary, the two Services traffic is split
/// between, this step's weights (checked to sum to 100 by [`render_route`]) and the rollout's
/// route state.
#[derive(Debug, Clone, Copy)]
pub struct RenderInput<'a> {
    pub canary: &'a Canary,
    pub backends: &'a Backends<'a>,
    pub weights: Weights,
    pub state: &'a RouteState<'a>,
}

/// An A/B canary's matches, with what they combine with.
#[derive(Debug, Clone, Copy)]
pub struct AbInput<'a> {
    /// The `analysis.match` list node.
    pub matches: &'a Node,
    /// A Flagger canary's `spec.service`, whose route fields the matches merge with; `None`
    /// for native canaries.
    pub service: Option<&'a Node>,
}

/// The file a route is written to, inside the canary's output folder.
pub const ROUTE_FILE_NAME: &str = "route.yaml";

/// The `app.kubernetes.io/managed-by` label value on every object sluice writes.
pub const MANAGED_BY: &str = "sluice";

/// The two Services traffic is split between (their names, in the canary's namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backends<'a> {
    /// The stable Service (`<name>-primary` for Flagger canaries).
    pub primary: &'a str,
    /// The Service of the revision under test (`<name>-canary` for Flagger canaries).
    pub canary: &'a str,
}

/// Whole-percent traffic weights; `primary + canary == 100` (checked by [`render_route`]).
///
/// For an A/B canary these weights split the requests that match `analysis.match`; all other
/// requests go to the primary (Flagger's behaviour: during the analysis it sets canary 100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weights {
    pub primary: u8,
    pub canary: u8,
}

impl Weights {
    /// `canary` percent to the canary, the rest to the primary; `None` above 100.
    pub fn from_canary(canary: u8) -> Option<Weights> {
        let primary = 100u8.checked_sub(canary)?;
        Some(Weights { primary, canary })
    }

    fn check(self, canary: &Canary) -> Result<(), RouteError> {
        if u16::from(self.primary) + u16::from(self.canary) == 100 {
            Ok(())
        } else {
            Err(RouteError::Weights {
                canary: canary.id.to_string(),
                primary: self.primary,
                canary_weight: self.canary,
            })
        }
    }
}

/// What a route carries of the rollout's state besides the weights, read from the status
/// (`core::status::Status`, kept by `core::decide`): the same fields for every router.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteState<'a> {
    /// Session affinity: the cookie (`name=value`) responses from the canary set; requests
    /// carrying it go to the canary.
    pub session_cookie: Option<&'a str>,
    /// The last rollout's cookie, which the route expires.
    pub previous_session_cookie: Option<&'a str>,
    /// `primaryCookieName`: the cookie responses from the primary set while the canary takes
    /// traffic; requests carrying it go to the primary.
    pub primary_session_cookie: Option<&'a str>,
    /// Blue/green with `analysis.mirror`: requests are mirrored to the canary.
    pub mirroring: bool,
    /// While an analysis runs (progressing or waiting for approval): its step (1-based), at
    /// which an Argo Rollout's managed routes are looked up; `None` otherwise.
    pub managed_step: Option<u32>,
}

impl<'a> RouteState<'a> {
    pub fn of(status: &'a Status) -> RouteState<'a> {
        RouteState {
            session_cookie: status.session_cookie.as_deref(),
            previous_session_cookie: status.previous_session_cookie.as_deref(),
            primary_session_cookie: status.primary_session_cookie.as_deref(),
            mirroring: status.mirroring,
            managed_step: matches!(
                status.phase,
                crate::core::status::Phase::Progressing
                    | crate::core::status::Phase::WaitingApproval
            )
            .then_some(status.step),
        }
    }
}

/// A file to write into the canary's output folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedFile {
    /// File name inside the output folder ([`ROUTE_FILE_NAME`]).
    pub file_name: String,
    /// The YAML text, starting with a "generated by sluice" comment line.
    pub content: String,
}

/// Why a route could not be rendered. All variants are terminal (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The weight pair does not sum to 100.
    #[error("canary {canary}: route weights must be whole percentages that sum to 100, found primary {primary} + canary {canary_weight}")]
    Weights {
        canary: String,
        primary: u8,
        canary_weight: u8,
    },
    /// A backend Service name that Kubernetes would reject, or the same Service twice.
    #[error("canary {canary}: backend {field}: {message}")]
    Backend {
        canary: String,
        /// `primary` or `canary`.
        field: &'static str,
        message: String,
    },
    /// A canary field the route kind cannot hold (checked here because the route's schema is
    /// stricter than what the spec loader checks).
    #[error("{file}:{line}: canary {canary}: {field}: {message}")]
    Field {
        file: String,
        line: usize,
        canary: String,
        /// Dotted path of the offending field (`analysis.match[0].headers.x-canary`).
        field: String,
        message: String,
    },
    /// A strategy the route kind cannot express (A/B header matching in a TrafficSplit).
    #[error("{file}:{line}: canary {canary}: {message}")]
    Unsupported {
        file: String,
        line: usize,
        canary: String,
        message: String,
    },
    /// The template failed to render: a bug in sluice, not in the canary.
    #[error("canary {canary}: rendering template {template} failed (a sluice bug): {message}")]
    Template {
        canary: String,
        template: &'static str,
        message: String,
    },
    /// The rendered text is not YAML, or not the document it should be: a bug in sluice.
    #[error(
        "canary {canary}: the output of template {template} is wrong (a sluice bug): {message}"
    )]
    Output {
        canary: String,
        template: &'static str,
        message: String,
    },
}

impl RouteError {
    /// An A/B canary whose route has no match to send to the canary (`message` says which
    /// kind): `spec` reads the matches at load time, so this is a route built another way.
    pub(crate) fn no_ab_match(canary: &Canary, message: &str) -> RouteError {
        RouteError::Field {
            file: canary.file.clone(),
            line: canary.line,
            canary: canary.id.to_string(),
            field: "spec.analysis.match".into(),
            message: message.into(),
        }
    }

    /// A rendered document that failed its router's read-back check.
    pub(crate) fn output(canary: &Canary, template: &'static str, message: String) -> RouteError {
        RouteError::Output {
            canary: canary.id.to_string(),
            template,
            message,
        }
    }
}

/// Refuses the strategies a router that only shifts weights cannot run, as Flagger supports
/// only canary releases with it: blue/green (message `blue_green`, at `analysis.iterations`)
/// and A/B (message `ab`, at `analysis.match`), each at its key's line, else the analysis's,
/// else the spec's.
pub(crate) fn refuse_non_canary(
    r: &mut Reader,
    canary: &Canary,
    spec: &Node,
    blue_green: &str,
    ab: &str,
) {
    let analysis = spec.get("analysis");
    let at = |key: &str| {
        analysis
            .and_then(|a| a.key_line(key))
            .unwrap_or_else(|| analysis.map_or(spec.line, |n| n.line))
    };
    match &canary.analysis.strategy {
        Strategy::Canary { .. } => {}
        Strategy::BlueGreen { .. } => {
            r.error(at("iterations"), "spec.analysis.iterations", blue_green);
        }
        Strategy::AB { .. } => {
            r.error(at("match"), "spec.analysis.match", ab);
        }
    }
}

/// Checks a native `spec.route`'s `apiVersion` against the one `kind` is read at; `None` when
/// it differs (reported through `r` at the `apiVersion`'s line).
pub(crate) fn expect_api_version(
    r: &mut Reader,
    native: &NativeInput,
    expected: &str,
    kind: &str,
) -> Option<()> {
    let found = native.api_version;
    if found == expected {
        Some(())
    } else {
        r.error(
            native.api_line,
            "spec.route.apiVersion",
            format!("expected {expected} for {kind}, found {found:?}"),
        );
        None
    }
}

/// A field that is set (a `null` value counts as not set, as in Flagger).
pub(crate) fn field<'n>(node: &'n Node, key: &str) -> Option<&'n Node> {
    node.get(key).filter(|n| n.value != Value::Null)
}

/// A `service.match` prefix as Flagger's Contour and App Mesh routers read it: the
/// `uri.prefix` of the first match only; every other match and condition is refused, since
/// Flagger's `router` (named in the message) would drop it. Returns the prefix with the line
/// and field path of its node, for the router's own check of the text.
pub(crate) fn first_uri_prefix(
    r: &mut Reader,
    node: &Node,
    path: &str,
    router: &str,
) -> Option<(String, usize, String)> {
    let items = r.seq(node, path)?;
    let dropped = format!("Flagger's {router} router reads only the uri.prefix of the first service match, so this condition would be dropped; remove it, or use a router that renders it (istio, gatewayapi:v1)");
    for (i, item) in items.iter().enumerate().skip(1) {
        r.error(item.line, &index(path, i), &dropped);
    }
    let first = items.first()?;
    let at = index(path, 0);
    let Value::Map(entries) = &first.value else {
        r.error(first.line, &at, "expected a mapping with uri.prefix");
        return None;
    };
    for (key, _) in entries
        .iter()
        .filter(|(k, _)| k.text != "uri" && k.text != "name")
    {
        r.error(key.line, &join(&at, &key.text), &dropped);
    }
    let uri = r.required(first, &at, "uri")?;
    let at = join(&at, "uri");
    let Value::Map(kinds) = &uri.value else {
        r.error(uri.line, &at, "expected a mapping with prefix");
        return None;
    };
    for (key, _) in kinds.iter().filter(|(k, _)| k.text != "prefix") {
        r.error(key.line, &join(&at, &key.text), &dropped);
    }
    let n = r.required(uri, &at, "prefix")?;
    let at = join(&at, "prefix");
    let prefix = r.string(n, &at)?;
    Some((prefix, n.line, at))
}

/// The `spec.service` keys a router's Flagger field rows say it refuses, in row order: the
/// fields of other routers it must not silently drop.
pub(crate) fn refused_service_fields(
    fields: &'static FlaggerFields,
) -> impl Iterator<Item = &'static str> {
    fields
        .rows()
        .filter(|(_, how)| *how == FieldUse::Refuses)
        .filter_map(|(path, _)| path.strip_prefix("spec.service."))
}

/// Checks a rendered object's `apiVersion`, `kind`, `metadata.name` and
/// `metadata.namespace`, in that order, as [`expect_text`] does.
pub(crate) fn expect_object(
    doc: &serde_json::Value,
    api_version: &str,
    kind: &str,
    name: &str,
    namespace: &str,
) -> Result<(), String> {
    expect_text(
        doc,
        &[
            ("/apiVersion", api_version),
            ("/kind", kind),
            ("/metadata/name", name),
            ("/metadata/namespace", namespace),
        ],
    )
}

/// Checks the text at each JSON pointer of a rendered document (its apiVersion, kind, name and
/// namespace, say); the error names the first one that differs.
pub(crate) fn expect_text(
    doc: &serde_json::Value,
    expected: &[(&str, &str)],
) -> Result<(), String> {
    for (pointer, want) in expected {
        if doc.pointer(pointer).and_then(serde_json::Value::as_str) != Some(*want) {
            return Err(format!(
                "expected {pointer} = {want:?}, found {:?}",
                doc.pointer(pointer)
            ));
        }
    }
    Ok(())
}

/// Renders the route file for `canary`, sending `weights` to `backends` with the rollout's
/// `state`, with the canary's router ([`Router::render`]) after checking the weights and
/// backends; `None` when the router writes no route object.
pub fn render_route(
    canary: &Canary,
    backends: &Backends,
    weights: Weights,
    state: &RouteState,
) -> Result<Option<RenderedFile>, RouteError> {
    weights.check(canary)?;
    check_backends(canary, backends, weights)?;
    let input = RenderInput {
        canary,
        backends,
        weights,
        state,
    };
    let content = canary.route.render(&input)?;
    Ok(content.map(|content| RenderedFile {
        file_name: ROUTE_FILE_NAME.to_string(),
        content,
    }))
}

/// Service names are DNS-1035 labels; the two backends must differ or the split means nothing.
fn check_backends(
    canary: &Canary,
    backends: &Backends,
    weights: Weights,
) -> Result<(), RouteError> {
    for (field, name) in [("primary", backends.primary), ("canary", backends.canary)] {
        if let Err(message) = check_service_name(name) {
            return Err(RouteError::Backend {
                canary: canary.id.to_string(),
                field,
                message,
            });
        }
    }
    // The same backend twice only carries all traffic to it: Knative's primary and canary
    // revisions are one revision before the first rollout and after a promotion.
    if backends.primary == backends.canary && weights.canary != 0 {
        return Err(RouteError::Backend {
            canary: canary.id.to_string(),
            field: "canary",
            message: format!(
                "expected a Service other than the primary, found {:?} for both",
                backends.canary
            ),
        });
    }
    Ok(())
}

fn check_service_name(name: &str) -> Result<(), String> {
    let bytes = name.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && !name.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "expected a Service name (DNS-1035 label: at most 63 lowercase letters, digits and '-', starting with a letter, ending alphanumeric), found {name:?}"
        ))
    }
}

/// The first line of every rendered file. `canary` is `namespace/name`, two DNS-1123 names, so
/// it cannot end the comment early.
fn header_comment(canary: &Canary) -> String {
    format!(
        "# Generated by sluice for canary {}. Do not edit: sluice overwrites this file.",
        canary.id
    )
}

/// What a route template's object starts with: the header comment, its `apiVersion`, and its
/// name and namespace (the apex Service's name, the canary's namespace, so it replaces the
/// object Flagger would create). Flattened into a router's template context, so templates
/// read `header`, `api_version`, `name` and `namespace` as plain variables.
#[derive(Debug, Serialize)]
struct ObjectHead<'a> {
    header: String,
    api_version: &'static str,
    name: &'a str,
    namespace: &'a str,
}

impl<'a> ObjectHead<'a> {
    fn of(canary: &'a Canary, api_version: &'static str) -> ObjectHead<'a> {
        ObjectHead {
            header: header_comment(canary),
            api_version,
            name: canary.service.name.as_str(),
            namespace: canary.id.namespace.as_str(),
        }
    }
}

/// [`ObjectHead`] with the labels and annotations of a route object Flagger creates from
/// `service.apex` ([`apex_metadata`]), flattened into the template context the same way.
#[derive(Debug, Serialize)]
struct ApexHead<'a> {
    #[serde(flatten)]
    object: ObjectHead<'a>,
    labels: std::collections::BTreeMap<&'a str, &'a str>,
    annotations: std::collections::BTreeMap<&'a str, &'a str>,
}

impl<'a> ApexHead<'a> {
    fn of(canary: &'a Canary, api_version: &'static str) -> ApexHead<'a> {
        let (labels, annotations) = apex_metadata(canary);
        ApexHead {
            object: ObjectHead::of(canary, api_version),
            labels,
            annotations,
        }
    }
}

/// The labels and annotations of a route object Flagger creates from `service.apex` (the
/// HTTPProxy, the TraefikService): the apex labels plus `app.kubernetes.io/managed-by`, and the
/// apex annotations. Flagger also stamps Flux's `reconcile: disabled` annotations on them, to
/// keep Flux off the objects it patches; sluice's objects are Flux's to apply, so not those.
fn apex_metadata(
    canary: &Canary,
) -> (
    std::collections::BTreeMap<&str, &str>,
    std::collections::BTreeMap<&str, &str>,
) {
    let apex = &canary.service.apex;
    let mut labels: std::collections::BTreeMap<&str, &str> = apex
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    labels.insert("app.kubernetes.io/managed-by", MANAGED_BY);
    let annotations = apex
        .annotations
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    (labels, annotations)
}

/// Renders one embedded template with strict undefined behaviour.
///
/// Templates are named `*.yaml.j2`, so minijinja's default auto-escaping serializes every
/// printed value as JSON (valid YAML flow scalars); the templates also say `| tojson`
/// explicitly. Only the header comment is printed `| safe`.
fn render_template(
    canary: &Canary,
    name: &'static str,
    source: &'static str,
    context: &impl Serialize,
) -> Result<String, RouteError> {
    let template_error = |e: minijinja::Error| RouteError::Template {
        canary: canary.id.to_string(),
        template: name,
        message: error_chain(&e),
    };
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(true)
        .build()
        .map_err(template_error)?;
    env.set_syntax(syntax);
    env.add_template(name, source).map_err(template_error)?;
    let template = env.get_template(name).map_err(template_error)?;
    template
        .render(minijinja::Value::from(Serde(context)))
        .map_err(template_error)
}

/// Emits `doc` (an object copied from the user's YAML, key order kept) as YAML text, without
/// the document marker.
fn emit_yaml(
    canary: &Canary,
    template: &'static str,
    doc: &yaml_rust2::Yaml,
) -> Result<String, RouteError> {
    let mut text = String::new();
    let mut emitter = yaml_rust2::YamlEmitter::new(&mut text);
    emitter.multiline_strings(true);
    emitter.dump(doc).map_err(|e| RouteError::Output {
        canary: canary.id.to_string(),
        template,
        message: format!("the YAML emitter failed: {e}"),
    })?;
    Ok(text)
}

/// Parses rendered text back, as Flux or Argo CD will.
fn reparse(
    canary: &Canary,
    template: &'static str,
    text: &str,
) -> Result<serde_json::Value, RouteError> {
    serde_saphyr::from_str::<serde_json::Value>(text).map_err(|e| RouteError::Output {
        canary: canary.id.to_string(),
        template,
        message: format!("does not parse as YAML: {e}"),
    })
}

/// Parses rendered multi-document text back, as Flux or Argo CD will: one value per document.
fn reparse_all(
    canary: &Canary,
    template: &'static str,
    text: &str,
) -> Result<Vec<serde_json::Value>, RouteError> {
    serde_saphyr::from_multiple::<serde_json::Value>(text).map_err(|e| RouteError::Output {
        canary: canary.id.to_string(),
        template,
        message: format!("does not parse as YAML: {e}"),
    })
}

/// Renders a router's one-document template `name` with `context`, parses the text back and
/// hands the document to the router's `verify`; a failed check is a sluice bug
/// ([`RouteError::Output`]). Returns the text.
fn render_checked<C: Serialize>(
    canary: &Canary,
    name: &'static str,
    source: &'static str,
    context: &C,
    verify: impl FnOnce(&serde_json::Value) -> Result<(), String>,
) -> Result<String, RouteError> {
    let text = render_template(canary, name, source, context)?;
    let doc = reparse(canary, name, &text)?;
    verify(&doc).map_err(|message| RouteError::output(canary, name, message))?;
    Ok(text)
}

/// [`render_checked`] for a multi-document template: `verify` sees every document.
fn render_checked_all<C: Serialize>(
    canary: &Canary,
    name: &'static str,
    source: &'static str,
    context: &C,
    verify: impl FnOnce(&[serde_json::Value]) -> Result<(), String>,
) -> Result<String, RouteError> {
    let text = render_template(canary, name, source, context)?;
    let docs = reparse_all(canary, name, &text)?;
    verify(&docs).map_err(|message| RouteError::output(canary, name, message))?;
    Ok(text)
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        message.push_str(": ");
        message.push_str(&e.to_string());
        source = e.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_from_canary_sum_to_100() {
        for canary in 0..=100u8 {
            let w = Weights::from_canary(canary).expect("0..=100 is a weight");
            assert_eq!(u16::from(w.primary) + u16::from(w.canary), 100);
        }
        assert_eq!(Weights::from_canary(101), None);
        assert_eq!(Weights::from_canary(255), None);
    }

    #[test]
    fn service_names_are_dns_1035_labels() {
        assert!(check_service_name("podinfo-primary").is_ok());
        assert!(check_service_name("a").is_ok());
        for bad in [
            "",
            "1podinfo",
            "Podinfo",
            "pod_info",
            "podinfo-",
            "a.b",
            &"a".repeat(64),
        ] {
            assert!(
                check_service_name(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }
}
