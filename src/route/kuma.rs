//! Kuma TrafficRoute (`kuma.io/v1alpha1`), as Flagger's `pkg/router/kuma.go` writes it.
//!
//! One TrafficRoute named after the apex Service. It is cluster-scoped: no namespace, and the
//! mesh is the top-level `mesh` field, from the Canary's `kuma.io/mesh` annotation (`default`
//! without one). Traffic from every service (`kuma.io/service: "*"`) to the apex
//! (`<svc>_<namespace>_svc_<port>`, Kuma's name for a Kubernetes Service port) is split between
//! `<primary>_<namespace>_svc_<port>` and `<canary>_<namespace>_svc_<port>`, primary first.
//! The apex's `labels` and `annotations` (`spec.service.apex`) go on the TrafficRoute, as in
//! Flagger. Flagger also adds `kustomize.toolkit.fluxcd.io/reconcile: disabled` and
//! `helm.toolkit.fluxcd.io/driftDetection: disabled` there, to keep Flux off an object it
//! patches live; sluice commits the object for Flux to apply, so it adds neither.
//!
//! Strategies: canary and blue/green (Flagger's Kuma router sets weights only). An A/B canary
//! is refused: a TrafficRoute split cannot match requests. `analysis.mirror`, `mirrorWeight`
//! and `sessionAffinity` are refused too: Flagger's Kuma router ignores them, so the mirror or
//! the sticky sessions they ask for would silently not happen. The other route fields of
//! `spec.service` (hosts, match, retries ...) have no place in a TrafficRoute and Flagger
//! ignores them with this provider, as the SMI router does.
//!
//! A native `spec.route` is `{apiVersion: kuma.io/v1alpha1, kind: TrafficRoute}` with an
//! optional `mesh`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as Json;

use crate::core::model::Strategy;
use crate::route::expect_api_version;
use crate::route::Canary;
use crate::route::ANALYSIS_REFUSED;
use crate::route::{apex_metadata, NativeInput, RenderInput};
use crate::route::{
    header_comment, render_checked, AbInput, BuiltinMetrics, FlaggerFields, FlaggerInput,
    JudgePrimary, QuerySet, RouteError, Router,
};
use crate::yaml::node::Node;
use crate::yaml::reader::{join, name_at, Reader};

/// The Kuma router.
pub struct Kuma;

/// The Canary annotation naming the mesh, as Flagger reads it.
pub const MESH_ANNOTATION: &str = "kuma.io/mesh";

/// The mesh without a `kuma.io/mesh` annotation (Flagger's default, Kuma's default mesh).
pub const DEFAULT_MESH: &str = "default";

/// A validated TrafficRoute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The Kuma mesh the TrafficRoute belongs to.
    pub mesh: String,
}

impl Router for Kuma {
    type Variant = ();
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "Kuma TrafficRoute";
    const PROVIDERS: &'static [(&'static str, ())] = &[("kuma", ())];
    const ALIASES: &'static [(&'static str, ())] = &[];
    const NATIVE_KIND: &'static str = "TrafficRoute";
    const NATIVE_FIELDS: &'static [&'static str] = &["mesh"];

    fn near_miss(_text: &str) -> Option<String> {
        None
    }

    fn read_flagger(r: &mut Reader, _variant: (), input: &FlaggerInput) -> Option<Config> {
        let before = r.errors.len();
        refuse_ignored(r, input.analysis, "Kuma");
        let path = format!("metadata.annotations.{MESH_ANNOTATION}");
        let mesh = input
            .metadata
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(MESH_ANNOTATION))
            .map(|n| name_at(r, n, &path).map(|name| name.to_string()));
        let mesh = match mesh {
            Some(mesh) => mesh?,
            None => DEFAULT_MESH.to_string(),
        };
        (r.errors.len() == before).then_some(Config { mesh })
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        let route = native.route;
        expect_api_version(r, native, "kuma.io/v1alpha1", "TrafficRoute")?;
        let mesh = match route.get("mesh") {
            Some(n) => name_at(r, n, "spec.route.mesh")?.to_string(),
            None => DEFAULT_MESH.to_string(),
        };
        Some(Config { mesh })
    }

    /// Nothing to read: [`check_canary`](Kuma::check_canary) refuses A/B.
    fn read_ab_matches(_config: &mut Config, _r: &mut Reader, _input: &AbInput) {}

    fn check_canary(_config: &Config, r: &mut Reader, canary: &Canary, spec: &Node) {
        if let Strategy::AB { .. } = canary.analysis.strategy {
            let line = spec
                .get("analysis")
                .and_then(|a| a.get("match"))
                .map_or(spec.line, |n| n.line);
            r.error(line, "spec.analysis.match", "a Kuma TrafficRoute splits traffic by weight and cannot match requests (Flagger runs canary and blue/green only with provider kuma); remove analysis.match, or use a provider that routes on headers (istio, gatewayapi:v1)");
        }
    }

    /// Route state comes from session affinity and analysis mirroring, both refused when read.
    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        render(config, input).map(Some)
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "kuma",
        table_order: 9,
        spec_rows: &[],
        analysis_rows: ANALYSIS_REFUSED,
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        (provider == "kuma").then_some(BuiltinMetrics::Queries(KUMA_METRICS))
    }
}

/// Refuses the analysis fields that need route state (`mirror`, `mirrorWeight`,
/// `sessionAffinity`): Flagger's `router` router ignores them, and so would the object
/// sluice writes, so the mirror or the sticky sessions asked for would silently not happen.
pub(super) fn refuse_ignored(r: &mut Reader, analysis: Option<&Node>, router: &str) {
    for key in ["mirror", "mirrorWeight", "sessionAffinity"] {
        if let Some(line) = analysis.and_then(|a| a.key_line(key)) {
            r.error(line, &join("spec.analysis", key), format!("Flagger's {router} router ignores this field, and the {router} objects sluice writes cannot express it either; remove it (use provider istio or gatewayapi:v1 for traffic mirroring or session affinity)"));
        }
    }
}

const TEMPLATE_NAME: &str = "kuma.yaml.j2";
const TEMPLATE: &str = include_str!("../../templates/kuma.yaml.j2");

#[derive(Serialize)]
struct Context<'a> {
    header: String,
    name: &'a str,
    mesh: &'a str,
    labels: BTreeMap<&'a str, &'a str>,
    annotations: BTreeMap<&'a str, &'a str>,
    /// The apex's Kuma service name.
    apex: String,
    /// Primary then canary.
    split: [Split; 2],
}

#[derive(Serialize)]
struct Split {
    weight: u8,
    service: String,
}

/// Kuma's name for port `port` of Service `name` in `namespace`.
fn kuma_service(name: &str, namespace: &str, port: u16) -> String {
    format!("{name}_{namespace}_svc_{port}")
}

fn render(config: &Config, input: &RenderInput) -> Result<String, RouteError> {
    let (canary, backends, weights) = (input.canary, input.backends, input.weights);
    let namespace = canary.id.namespace.as_str();
    let port = canary.service.port;
    let (labels, annotations) = apex_metadata(canary);
    let context = Context {
        header: header_comment(canary),
        name: canary.service.name.as_str(),
        mesh: &config.mesh,
        labels,
        annotations,
        apex: kuma_service(canary.service.name.as_str(), namespace, port),
        split: [
            Split {
                weight: weights.primary,
                service: kuma_service(backends.primary, namespace, port),
            },
            Split {
                weight: weights.canary,
                service: kuma_service(backends.canary, namespace, port),
            },
        ],
    };
    render_checked(canary, TEMPLATE_NAME, TEMPLATE, &context, |doc| {
        verify(doc, &context)
    })
}

/// Reads the TrafficRoute back: cluster-scoped (no namespace) in its mesh, from every service
/// to the apex, split primary then canary with the weights asked for, summing to 100.
fn verify(doc: &Json, context: &Context) -> Result<(), String> {
    let expected = [
        ("/apiVersion", Json::from("kuma.io/v1alpha1")),
        ("/kind", Json::from("TrafficRoute")),
        ("/mesh", Json::from(context.mesh)),
        ("/metadata/name", Json::from(context.name)),
        (
            "/spec/sources",
            serde_json::json!([{"match": {"kuma.io/service": "*"}}]),
        ),
        (
            "/spec/destinations",
            serde_json::json!([{"match": {"kuma.io/service": context.apex}}]),
        ),
        (
            "/spec/conf/split",
            serde_json::json!([
                {"weight": context.split[0].weight, "destination": {"kuma.io/service": context.split[0].service}},
                {"weight": context.split[1].weight, "destination": {"kuma.io/service": context.split[1].service}},
            ]),
        ),
    ];
    for (pointer, want) in expected {
        if doc.pointer(pointer) != Some(&want) {
            return Err(format!(
                "expected {pointer} = {want}, found {:?}",
                doc.pointer(pointer)
            ));
        }
    }
    if doc.pointer("/metadata/namespace").is_some() {
        return Err("a TrafficRoute is cluster-scoped: expected no metadata.namespace".into());
    }
    if u16::from(context.split[0].weight) + u16::from(context.split[1].weight) != 100 {
        return Err("expected split weights summing to 100".into());
    }
    Ok(())
}

/// Flagger's observer queries for kuma.
pub(crate) const KUMA_METRICS: QuerySet = QuerySet {
    name: "kuma",
    success_rate: r#"
sum(rate(envoy_cluster_upstream_rq{service=~"{{ target }}-canary_{{ namespace }}_svc_[0-9a-zA-Z-]+", envoy_response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(envoy_cluster_upstream_rq{service=~"{{ target }}-canary_{{ namespace }}_svc_[0-9a-zA-Z-]+"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(envoy_cluster_upstream_rq_time_bucket{service=~"{{ target }}-canary_{{ namespace }}_svc_[0-9a-zA-Z-]+"}[{{ interval }}])) by (le))"#,
    encode_names: None,
    judge_primary: JudgePrimary::Replace(&[("}}-canary_", "}}-primary_")]),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kuma_service_names_are_name_namespace_svc_port() {
        assert_eq!(
            kuma_service("podinfo-primary", "test", 9898),
            "podinfo-primary_test_svc_9898"
        );
    }
}
