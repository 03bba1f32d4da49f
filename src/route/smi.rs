//! SMI TrafficSplit (`split.smi-spec.io/v1alpha1` to `/v1alpha4`).
//!
//! Same shape as Flagger's SMI routers: named after the apex Service, `spec.service` is the
//! apex, `backends` list the canary first, then the primary. Weights:
//! - v1alpha1 (linkerd-smi): a Kubernetes quantity. sluice writes milli-units,
//!   `weight * 10` + `m` (`900m` / `100m`, summing to `1000m` = 1), as linkerd's TrafficSplit
//!   examples do. Flagger writes plain quantities (`90` / `10`); meshes read the weights as
//!   ratios, so both split traffic the same way.
//! - v1alpha2 to v1alpha4: integers summing to 100.
//!
//! Flagger's SMI routers read no `service` fields beyond the Service itself, so neither does
//! this one. A native `spec.route` is `{apiVersion: split.smi-spec.io/<version>, kind:
//! TrafficSplit}`.
//!
//! A TrafficSplit cannot route on headers by itself (v1alpha3+ needs a separate
//! HTTPRouteGroup object), so an A/B canary is an error here, not a weight split that would
//! send every request to the canary.

use serde::Serialize;
use serde_json::Value as Json;

use crate::core::model::Strategy;
use crate::route::Canary;
use crate::route::ObjectHead;
use crate::route::{
    render_checked, AbInput, Backends, BuiltinMetrics, FlaggerFields, FlaggerInput, JudgePrimary,
    QuerySet, RouteError, Router, Weights,
};
use crate::route::{NativeInput, RenderInput};
use crate::yaml::reader::Reader;

/// The SMI router.
pub struct Smi;

/// The TrafficSplit API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmiVersion {
    V1alpha1,
    V1alpha2,
    V1alpha3,
    V1alpha4,
}

impl SmiVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            SmiVersion::V1alpha1 => "split.smi-spec.io/v1alpha1",
            SmiVersion::V1alpha2 => "split.smi-spec.io/v1alpha2",
            SmiVersion::V1alpha3 => "split.smi-spec.io/v1alpha3",
            SmiVersion::V1alpha4 => "split.smi-spec.io/v1alpha4",
        }
    }
}

/// A validated TrafficSplit route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub version: SmiVersion,
    /// An Argo Rollout's TrafficSplit (`trafficRouting.smi`); `None` for Flagger's.
    pub argo: Option<ArgoSplit>,
}

/// The TrafficSplit Argo Rollouts' SMI router (`rollout/trafficrouting/smi/smi.go`) creates
/// for a Rollout: named `trafficSplitName` (default: the Rollout's name), its `spec.service`
/// the `rootService` (default: the `stableService`), its backends the canary Service with the
/// step's weight and the stable Service with the rest. Argo writes it at the API version its
/// controller is started with, `split.smi-spec.io/v1alpha1` by default, as sluice does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgoSplit {
    pub name: String,
    pub root_service: String,
}

impl Router for Smi {
    type Variant = SmiVersion;
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "SMI TrafficSplit";
    const PROVIDERS: &'static [(&'static str, SmiVersion)] = &[
        ("osm", SmiVersion::V1alpha2),
        ("linkerd", SmiVersion::V1alpha1),
        ("smi:v1alpha1", SmiVersion::V1alpha1),
        ("smi:v1alpha2", SmiVersion::V1alpha2),
        ("smi:v1alpha3", SmiVersion::V1alpha3),
        ("smi:v1alpha4", SmiVersion::V1alpha4),
    ];
    const ALIASES: &'static [(&'static str, SmiVersion)] = &[("smi", SmiVersion::V1alpha1)];
    const NATIVE_KIND: &'static str = "TrafficSplit";
    const NATIVE_FIELDS: &'static [&'static str] = &[];

    fn near_miss(_text: &str) -> Option<String> {
        None
    }

    fn read_flagger(_r: &mut Reader, version: SmiVersion, _input: &FlaggerInput) -> Option<Config> {
        Some(Config {
            version,
            argo: None,
        })
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        let version = match native.api_version {
            "split.smi-spec.io/v1alpha1" => SmiVersion::V1alpha1,
            "split.smi-spec.io/v1alpha2" => SmiVersion::V1alpha2,
            "split.smi-spec.io/v1alpha3" => SmiVersion::V1alpha3,
            "split.smi-spec.io/v1alpha4" => SmiVersion::V1alpha4,
            other => {
                r.error(native.api_line, "spec.route.apiVersion", format!("expected split.smi-spec.io/v1alpha1..v1alpha4 for TrafficSplit, found {other:?}"));
                return None;
            }
        };
        Some(Config {
            version,
            argo: None,
        })
    }

    /// Nothing to read: [`render`](Smi::render) rejects A/B, since a TrafficSplit cannot
    /// route on requests.
    fn read_ab_matches(_config: &mut Config, _r: &mut Reader, _input: &AbInput) {}

    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        render(
            input.canary,
            config.version,
            config.argo.as_ref(),
            input.backends,
            input.weights,
        )
        .map(Some)
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "osm/linkerd/smi",
        table_order: 7,
        spec_rows: &[],
        analysis_rows: &[],
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        match provider {
            "osm" => Some(BuiltinMetrics::Queries(OSM_METRICS)),
            "linkerd" => Some(BuiltinMetrics::Queries(LINKERD_METRICS)),
            p if p == "smi" || p.starts_with("smi:") => Some(BuiltinMetrics::None(
                "does not say which mesh exports the metrics (Flagger uses its own -mesh-provider, else Istio's queries); set spec.provider to linkerd or osm, or use a MetricTemplate",
            )),
            _ => None,
        }
    }
}

const TEMPLATE_NAME: &str = "trafficsplit.yaml.j2";
const TEMPLATE: &str = include_str!("../../templates/trafficsplit.yaml.j2");

#[derive(Serialize)]
struct Context<'a> {
    #[serde(flatten)]
    head: ObjectHead<'a>,
    managed_by: &'static str,
    service: &'a str,
    backends: [Backend<'a>; 2],
}

#[derive(Serialize)]
struct Backend<'a> {
    service: &'a str,
    /// An integer, or a quantity string for v1alpha1.
    weight: Json,
}

/// The weight as this TrafficSplit version writes it.
fn weight(version: SmiVersion, percent: u8) -> Json {
    match version {
        SmiVersion::V1alpha1 => Json::String(format!("{}m", u16::from(percent) * 10)),
        SmiVersion::V1alpha2 | SmiVersion::V1alpha3 | SmiVersion::V1alpha4 => Json::from(percent),
    }
}

fn render(
    canary: &Canary,
    version: SmiVersion,
    argo: Option<&ArgoSplit>,
    backends: &Backends,
    weights: Weights,
) -> Result<String, RouteError> {
    match &canary.analysis.strategy {
        Strategy::Canary { .. } | Strategy::BlueGreen { .. } => {}
        Strategy::AB { .. } => {
            return Err(RouteError::Unsupported {
                file: canary.file.clone(),
                line: canary.line,
                canary: canary.id.to_string(),
                message: format!(
                    "A/B testing (analysis.match) routes on request headers, which a {} TrafficSplit cannot express; use a Gateway API HTTPRoute (provider gatewayapi:v1) or drop analysis.match for a blue/green rollout",
                    version.api_version()
                ),
            })
        }
    }
    let mut head = ObjectHead::of(canary, version.api_version());
    let name = match argo {
        Some(split) => {
            head.name = split.name.as_str();
            split.root_service.as_str()
        }
        None => canary.service.name.as_str(),
    };
    let context = Context {
        head,
        managed_by: super::MANAGED_BY,
        service: name,
        backends: [
            Backend {
                service: backends.canary,
                weight: weight(version, weights.canary),
            },
            Backend {
                service: backends.primary,
                weight: weight(version, weights.primary),
            },
        ],
    };
    render_checked(canary, TEMPLATE_NAME, TEMPLATE, &context, |parsed| {
        verify(parsed, &context, version, weights)
    })
}

/// Reads a backend weight back as a percentage: an integer, or `<n>m` with n a multiple of 10
/// for v1alpha1.
fn read_weight(version: SmiVersion, value: &Json) -> Option<u64> {
    match version {
        SmiVersion::V1alpha1 => {
            let milli: u64 = value.as_str()?.strip_suffix('m')?.parse().ok()?;
            milli.is_multiple_of(10).then_some(milli / 10)
        }
        SmiVersion::V1alpha2 | SmiVersion::V1alpha3 | SmiVersion::V1alpha4 => value.as_u64(),
    }
}

/// Reads the rendered object back: kind, name, apex, backends canary then primary, and whole
/// weights that are the ones asked for and sum to 100.
fn verify(
    doc: &Json,
    context: &Context,
    version: SmiVersion,
    weights: Weights,
) -> Result<(), String> {
    let text = |pointer: &str| doc.pointer(pointer).and_then(Json::as_str);
    let expected = [
        ("/apiVersion", context.head.api_version),
        ("/kind", "TrafficSplit"),
        ("/metadata/name", context.head.name),
        ("/metadata/namespace", context.head.namespace),
        ("/spec/service", context.service),
        ("/spec/backends/0/service", context.backends[0].service),
        ("/spec/backends/1/service", context.backends[1].service),
    ];
    for (pointer, want) in expected {
        if text(pointer) != Some(want) {
            return Err(format!(
                "expected {pointer} = {want:?}, found {:?}",
                doc.pointer(pointer)
            ));
        }
    }
    let backends = doc
        .pointer("/spec/backends")
        .and_then(Json::as_array)
        .ok_or("expected spec.backends to be a list")?;
    let found: Vec<u64> = backends
        .iter()
        .map(|b| b.get("weight").and_then(|w| read_weight(version, w)))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            format!("expected whole-percent weights in spec.backends, found {backends:?}")
        })?;
    if found != [u64::from(weights.canary), u64::from(weights.primary)]
        || found.iter().sum::<u64>() != 100
    {
        return Err(format!(
            "expected weights [{}, {}] summing to 100, found {found:?}",
            weights.canary, weights.primary
        ));
    }
    Ok(())
}

/// Flagger's observer queries for osm.
pub(crate) const OSM_METRICS: QuerySet = QuerySet {
    name: "osm",
    success_rate: r#"
sum(rate(osm_request_total{destination_namespace="{{ namespace }}", destination_kind="Deployment", destination_name="{{ target }}", response_code!~"5.*"}[{{ interval }}]))
/
sum(rate(osm_request_total{destination_namespace="{{ namespace }}", destination_kind="Deployment", destination_name="{{ target }}"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(osm_request_duration_ms_bucket{destination_namespace="{{ namespace }}", destination_kind="Deployment", destination_name="{{ target }}"}[{{ interval }}])) by (le))"#,
    encode_names: None,
    judge_primary: JudgePrimary::Workload,
};
/// Flagger's observer queries for linkerd.
pub(crate) const LINKERD_METRICS: QuerySet = QuerySet {
    name: "linkerd",
    success_rate: r#"
sum(rate(response_total{namespace="{{ namespace }}", deployment=~"{{ target }}", classification!="failure", direction="inbound"}[{{ interval }}]))
/
sum(rate(response_total{namespace="{{ namespace }}", deployment=~"{{ target }}", direction="inbound"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(response_latency_ms_bucket{namespace="{{ namespace }}", deployment=~"{{ target }}", direction="inbound"}[{{ interval }}])) by (le))"#,
    encode_names: None,
    judge_primary: JudgePrimary::Workload,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1alpha1_weights_are_milli_quantities() {
        assert_eq!(weight(SmiVersion::V1alpha1, 90), Json::from("900m"));
        assert_eq!(weight(SmiVersion::V1alpha1, 0), Json::from("0m"));
        assert_eq!(weight(SmiVersion::V1alpha1, 100), Json::from("1000m"));
        assert_eq!(weight(SmiVersion::V1alpha4, 37), Json::from(37));
    }

    #[test]
    fn weights_read_back() {
        for percent in 0..=100u8 {
            for version in [
                SmiVersion::V1alpha1,
                SmiVersion::V1alpha2,
                SmiVersion::V1alpha3,
                SmiVersion::V1alpha4,
            ] {
                assert_eq!(
                    read_weight(version, &weight(version, percent)),
                    Some(u64::from(percent))
                );
            }
        }
        assert_eq!(read_weight(SmiVersion::V1alpha1, &Json::from("905m")), None);
        assert_eq!(read_weight(SmiVersion::V1alpha1, &Json::from(90)), None);
        assert_eq!(read_weight(SmiVersion::V1alpha2, &Json::from("90")), None);
    }
}
