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
//! A TrafficSplit cannot route on headers by itself (v1alpha3+ needs a separate
//! HTTPRouteGroup object), so an A/B canary is an error here, not a weight split that would
//! send every request to the canary.

use serde::Serialize;
use serde_json::Value as Json;

use crate::route::{header_comment, render_template, reparse, Backends, RouteError, Weights};
use crate::spec::model::{Canary, SmiVersion, Strategy};

const TEMPLATE_NAME: &str = "trafficsplit.yaml.j2";
const TEMPLATE: &str = include_str!("../../templates/trafficsplit.yaml.j2");

#[derive(Serialize)]
struct Context<'a> {
    header: String,
    api_version: &'static str,
    name: &'a str,
    namespace: &'a str,
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

pub(super) fn render(
    canary: &Canary,
    version: SmiVersion,
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
    let name = canary.service.name.as_str();
    let context = Context {
        header: header_comment(canary),
        api_version: version.api_version(),
        name,
        namespace: canary.id.namespace.as_str(),
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
    let text = render_template(canary, TEMPLATE_NAME, TEMPLATE, &context)?;
    let parsed = reparse(canary, TEMPLATE_NAME, &text)?;
    verify(&parsed, &context, version, weights).map_err(|message| RouteError::Output {
        canary: canary.id.to_string(),
        template: TEMPLATE_NAME,
        message,
    })?;
    Ok(text)
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
        ("/apiVersion", context.api_version),
        ("/kind", "TrafficSplit"),
        ("/metadata/name", context.name),
        ("/metadata/namespace", context.namespace),
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
