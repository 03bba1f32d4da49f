//! Traefik `TraefikService` (`traefik.io/v1alpha1`), as Flagger's `pkg/router/traefik.go`
//! creates it for `provider: traefik`: named after the apex Service, `spec.weighted.services`
//! listing the primary Service and, while it has traffic, the canary Service, each in the
//! canary's namespace on the service port. The user's IngressRoute sends its traffic to this
//! TraefikService (`kind: TraefikService`, name `<svc>`); sluice never touches it. The apex
//! labels and annotations go on the object, as Flagger puts them there.
//!
//! Where sluice writes something other than Flagger: a primary weight of 0 is written
//! (`weight: 0`). Flagger's client drops it (`omitempty`), and Traefik reads a missing weight
//! in a weighted round robin as 1, so Flagger's object would keep sending about 1% of the
//! requests to the primary after a blue/green switch.
//!
//! Flagger's Traefik router runs canary and blue/green rollouts and reads no `service` field
//! besides the port: an A/B canary, the route fields of other routers (`match`, `retries`,
//! `timeout`, `hosts`, ...), the analysis `mirror`, `mirrorWeight` and `sessionAffinity`, and
//! `appProtocol: tcp` are refused, naming the field, rather than dropped.
//!
//! A native `spec.route` is `{apiVersion: traefik.io/v1alpha1, kind: TraefikService}`.

use serde::Serialize;
use serde_json::Value as Json;

use crate::core::model::Strategy;
use crate::route::expect_api_version;
use crate::route::ApexHead;
use crate::route::ANALYSIS_REFUSED;
use crate::route::{expect_object, Canary};
use crate::route::{
    refused_service_fields, render_checked, AbInput, Backends, BuiltinMetrics, FieldUse,
    FlaggerFields, FlaggerInput, JudgePrimary, QuerySet, RouteError, Router, Weights,
};
use crate::route::{NativeInput, RenderInput};
use crate::yaml::node::Node;
use crate::yaml::reader::{join, Reader};

/// The Traefik router.
pub struct Traefik;

/// The one TraefikService API version written.
pub const API_VERSION: &str = "traefik.io/v1alpha1";

/// What the TraefikService is written from.
#[derive(Debug, Clone, PartialEq)]
pub enum Config {
    /// A Flagger canary: nothing to configure, Flagger's Traefik router reads only the
    /// service port.
    Flagger,
    /// An Argo Rollout's `trafficRouting.traefik`: the user's TraefikService, copied with the
    /// weights set (`route::copied`).
    Rollout(Box<crate::route::copied::Copied>),
}

impl Router for Traefik {
    type Variant = ();
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "Traefik TraefikService";
    const PROVIDERS: &'static [(&'static str, ())] = &[("traefik", ())];
    const ALIASES: &'static [(&'static str, ())] = &[];
    const NATIVE_KIND: &'static str = "TraefikService";
    const NATIVE_FIELDS: &'static [&'static str] = &[];

    fn near_miss(text: &str) -> Option<String> {
        text.eq_ignore_ascii_case("traefik")
            .then(|| format!("provider names are lowercase: expected \"traefik\", found {text:?}"))
    }

    fn read_flagger(r: &mut Reader, _variant: (), input: &FlaggerInput) -> Option<Config> {
        let before = r.errors.len();
        if let Some(svc) = input.service {
            // The `spec.service` route fields of other routers, which Flagger's Traefik
            // router ignores.
            for key in refused_service_fields(&Traefik::FLAGGER_FIELDS) {
                if let Some(line) = svc.key_line(key) {
                    r.error(line, &join("spec.service", key), "Flagger's Traefik router ignores this field (a TraefikService only weighs the two Services; routing belongs to your IngressRoute); remove it, or use a router that renders it (istio, gatewayapi:v1)");
                }
            }
            if let Some(n) = svc.get("appProtocol") {
                if n.as_str().is_some_and(|p| p.eq_ignore_ascii_case("tcp")) {
                    r.error(n.line, "spec.service.appProtocol", "a TraefikService weighs HTTP services (TCP needs a TraefikServiceTCP, which Flagger does not write); remove it or roll this canary out without sluice");
                }
            }
        }
        if let Some(analysis) = input.analysis {
            for key in ["mirror", "mirrorWeight", "sessionAffinity"] {
                if let Some(line) = analysis.key_line(key) {
                    r.error(line, &join("spec.analysis", key), "Flagger's Traefik router does not mirror traffic or keep sessions, so this field would be dropped; remove it, or use a router that renders it (gatewayapi:v1)");
                }
            }
        }
        (r.errors.len() == before).then_some(Config::Flagger)
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        expect_api_version(r, native, API_VERSION, "TraefikService").map(|()| Config::Flagger)
    }

    /// Nothing to convert: [`check_canary`](Traefik::check_canary) refuses A/B.
    fn read_ab_matches(_config: &mut Config, _r: &mut Reader, _input: &AbInput) {}

    fn check_canary(_config: &Config, r: &mut Reader, canary: &Canary, spec: &Node) {
        if let Strategy::AB { .. } = canary.analysis.strategy {
            let line = spec
                .get("analysis")
                .and_then(|a| a.key_line("match"))
                .unwrap_or(spec.line);
            r.error(line, "spec.analysis.match", "Flagger supports canary and blue/green with provider traefik: a TraefikService weighs Services and cannot match requests; remove analysis.match, or use a router that matches headers (contour, gatewayapi:v1, istio)");
        }
    }

    // Session affinity and mirroring are refused for Traefik canaries when read.
    fn render(config: &Config, input: &RenderInput) -> Result<Option<String>, RouteError> {
        match config {
            Config::Flagger => render(input.canary, input.backends, input.weights).map(Some),
            Config::Rollout(copied) => crate::route::copied::render(copied, input).map(Some),
        }
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "traefik",
        table_order: 10,
        spec_rows: &[
            ("spec.service.backendTimeout", FieldUse::Refuses),
            ("spec.service.backends", FieldUse::Refuses),
            ("spec.service.corsPolicy", FieldUse::Refuses),
            ("spec.service.delegation", FieldUse::Refuses),
            ("spec.service.gatewayRefs", FieldUse::Refuses),
            ("spec.service.gateways", FieldUse::Refuses),
            ("spec.service.headers", FieldUse::Refuses),
            ("spec.service.hosts", FieldUse::Refuses),
            ("spec.service.match", FieldUse::Refuses),
            ("spec.service.meshName", FieldUse::Refuses),
            ("spec.service.mirror", FieldUse::Refuses),
            ("spec.service.retries", FieldUse::Refuses),
            ("spec.service.rewrite", FieldUse::Refuses),
            ("spec.service.timeout", FieldUse::Refuses),
            ("spec.service.trafficPolicy", FieldUse::Refuses),
        ],
        analysis_rows: ANALYSIS_REFUSED,
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        (provider == "traefik").then_some(BuiltinMetrics::Queries(TRAEFIK_METRICS))
    }
}

const TEMPLATE_NAME: &str = "traefikservice.yaml.j2";
const TEMPLATE: &str = include_str!("../../templates/traefikservice.yaml.j2");

#[derive(Serialize)]
struct Context<'a> {
    #[serde(flatten)]
    head: ApexHead<'a>,
    services: Vec<Service<'a>>,
}

#[derive(Serialize)]
struct Service<'a> {
    name: &'a str,
    port: u16,
    weight: u8,
}

fn render(canary: &Canary, backends: &Backends, weights: Weights) -> Result<String, RouteError> {
    if let Strategy::AB { .. } = canary.analysis.strategy {
        // `check_canary` refused it at load time.
        return Err(RouteError::Unsupported {
            file: canary.file.clone(),
            line: canary.line,
            canary: canary.id.to_string(),
            message: "A/B testing (analysis.match) routes on request headers, which a TraefikService cannot express".into(),
        });
    }
    let port = canary.service.port;
    // Flagger lists the canary only while it has traffic.
    let mut services = vec![Service {
        name: backends.primary,
        port,
        weight: weights.primary,
    }];
    if weights.canary > 0 {
        services.push(Service {
            name: backends.canary,
            port,
            weight: weights.canary,
        });
    }
    let context = Context {
        head: ApexHead::of(canary, API_VERSION),
        services,
    };
    render_checked(canary, TEMPLATE_NAME, TEMPLATE, &context, |doc| {
        verify(doc, &context, backends, weights)
    })
}

/// Reads the TraefikService back: kind, name, the primary then (with traffic) the canary in
/// the canary's namespace, with the weights asked for, summing to 100.
fn verify(
    doc: &Json,
    context: &Context,
    backends: &Backends,
    weights: Weights,
) -> Result<(), String> {
    expect_object(
        doc,
        API_VERSION,
        "TraefikService",
        context.head.object.name,
        context.head.object.namespace,
    )?;
    let services = doc
        .pointer("/spec/weighted/services")
        .and_then(Json::as_array)
        .ok_or("expected spec.weighted.services to be a list")?;
    let found: Vec<(Option<&str>, Option<&str>, Option<u64>)> = services
        .iter()
        .map(|s| {
            (
                s.get("name").and_then(Json::as_str),
                s.get("namespace").and_then(Json::as_str),
                s.get("weight").and_then(Json::as_u64),
            )
        })
        .collect();
    let ns = Some(context.head.object.namespace);
    let mut expected = vec![(Some(backends.primary), ns, Some(u64::from(weights.primary)))];
    if weights.canary > 0 {
        expected.push((Some(backends.canary), ns, Some(u64::from(weights.canary))));
    }
    if found != expected || found.iter().filter_map(|s| s.2).sum::<u64>() != 100 {
        return Err(format!(
            "expected services {expected:?} summing to 100, found {found:?}"
        ));
    }
    Ok(())
}

/// Flagger's observer queries for traefik.
pub(crate) const TRAEFIK_METRICS: QuerySet = QuerySet {
    name: "traefik",
    success_rate: r#"
sum(rate(traefik_service_request_duration_seconds_bucket{service=~"{{ namespace }}-{{ target }}-canary-[0-9a-zA-Z-]+@kubernetescrd", code!~"5..", le="+Inf"}[{{ interval }}]))
/
sum(rate(traefik_service_request_duration_seconds_bucket{service=~"{{ namespace }}-{{ target }}-canary-[0-9a-zA-Z-]+@kubernetescrd", le="+Inf"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(traefik_service_request_duration_seconds_bucket{service=~"{{ namespace }}-{{ target }}-canary-[0-9a-zA-Z-]+@kubernetescrd"}[{{ interval }}])) by (le))
* 1000"#,
    encode_names: None,
    judge_primary: JudgePrimary::Replace(&[("}}-canary-", "}}-primary-")]),
};
