//! Provider `kubernetes`: blue/green with no route object, as Flagger's `NopRouter` runs it.
//!
//! Flagger's kubernetes provider sets no routes: the apex Service always selects the primary
//! pods, the `-canary` Service the canary pods, and the analysis (its webhooks and load tests)
//! talks to `<svc>-canary` for `iterations` intervals. Promotion copies the canary's spec to
//! the primary, whose rolling update is the switch; the apex Service never changes. So this
//! router writes no file: the Services and workloads (`workload/`) are the whole output.
//!
//! Only blue/green fits: with no route object no weight can shift and no request can be
//! matched, so a weight schedule or `analysis.match` is refused (Flagger's docs list the
//! kubernetes provider for blue/green only). Route fields of `spec.service` (hosts, match,
//! retries ...) have no object to go into: Flagger ignores them with this provider, and so does
//! sluice, as the SMI router does for the fields a TrafficSplit cannot hold.
//!
//! A native `spec.route` is `{apiVersion: v1, kind: Service}` on a canary with a `source`
//! (a route-only canary would have nothing to write).

use crate::core::model::{Strategy, Target};
use crate::route::expect_api_version;
use crate::route::Canary;
use crate::route::ANALYSIS_REFUSED;
use crate::route::{
    AbInput, BuiltinMetrics, FlaggerFields, FlaggerInput, JudgePrimary, QuerySet, RouteError,
    Router,
};
use crate::route::{NativeInput, RenderInput};
use crate::yaml::node::Node;
use crate::yaml::reader::{join, Reader};

/// The kubernetes (no route object) router.
pub struct Kubernetes;

/// Nothing to configure: the Services carry everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config;

impl Router for Kubernetes {
    type Variant = ();
    type Config = Config;

    crate::route::workload_router!();

    const OBJECT: &'static str = "Kubernetes Services for blue/green";
    const PROVIDERS: &'static [(&'static str, ())] = &[("kubernetes", ())];
    const ALIASES: &'static [(&'static str, ())] = &[];
    const NATIVE_KIND: &'static str = "Service";
    const NATIVE_FIELDS: &'static [&'static str] = &[];

    fn near_miss(_text: &str) -> Option<String> {
        None
    }

    /// Reads nothing: Flagger's route fields (hosts, match, retries ..., the analysis'
    /// mirror) have no object to go into, and Flagger ignores them with this provider too.
    fn read_flagger(_r: &mut Reader, _variant: (), _input: &FlaggerInput) -> Option<Config> {
        Some(Config)
    }

    fn read_native(r: &mut Reader, native: &NativeInput) -> Option<Config> {
        expect_api_version(r, native, "v1", "Service").map(|()| Config)
    }

    /// Nothing to convert: [`check_canary`](Kubernetes::check_canary) refuses A/B.
    fn read_ab_matches(_config: &mut Config, _r: &mut Reader, _input: &AbInput) {}

    fn check_canary(_config: &Config, r: &mut Reader, canary: &Canary, spec: &Node) {
        let analysis = spec.get("analysis");
        let at = |key: &str| {
            analysis
                .and_then(|a| a.get(key))
                .or(analysis)
                .map_or(spec.line, |n| n.line)
        };
        match &canary.analysis.strategy {
            Strategy::BlueGreen { .. } => {}
            Strategy::Canary { .. } => {
                let key = ["stepWeight", "stepWeights", "steps"]
                    .into_iter()
                    .find(|k| analysis.and_then(|a| a.get(k)).is_some())
                    .unwrap_or("iterations");
                r.error(at(key), &join("spec.analysis", key), "Flagger supports only blue/green with provider kubernetes (no route object shifts weights); set analysis.iterations instead of a weight schedule, or use a provider that routes (gatewayapi:v1, osm, linkerd)");
            }
            Strategy::AB { .. } => {
                r.error(at("match"), "spec.analysis.match", "Flagger supports only blue/green with provider kubernetes (no route object can send matching requests to the canary); remove analysis.match, or use a provider that routes headers (gatewayapi:v1)");
            }
        }
        if let Target::RouteOnly { .. } = canary.target {
            let line = spec.get("routeOnly").map_or(spec.line, |n| n.line);
            r.error(line, "spec.routeOnly", "a Service route writes no route object, so a route-only canary would write nothing; use spec.source, or an HTTPRoute or TrafficSplit route");
        }
    }

    /// No route object: the Services switch the traffic.
    fn render(_config: &Config, _input: &RenderInput) -> Result<Option<String>, RouteError> {
        Ok(None)
    }

    const FLAGGER_FIELDS: FlaggerFields = FlaggerFields {
        name: "kubernetes",
        table_order: 8,
        spec_rows: &[],
        analysis_rows: ANALYSIS_REFUSED,
    };

    fn builtin_metrics(provider: &str) -> Option<BuiltinMetrics> {
        (provider == "kubernetes").then_some(BuiltinMetrics::Queries(APP_HISTOGRAM_METRICS))
    }
}

// Flagger's generic observer reads the application's seconds histogram and multiplies the
// answer by 1000 in Go; here the query does it.
/// Flagger's observer queries for http.
pub(crate) const APP_HISTOGRAM_METRICS: QuerySet = QuerySet {
    name: "http",
    success_rate: r#"
sum(rate(http_request_duration_seconds_count{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)", status!~"5.*"}[{{ interval }}]))
/
sum(rate(http_request_duration_seconds_count{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[{{ interval }}]))
* 100"#,
    duration: r#"
histogram_quantile(0.99, sum(rate(http_request_duration_seconds_bucket{kubernetes_namespace="{{ namespace }}", kubernetes_pod_name=~"{{ target }}-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)"}[{{ interval }}])) by (le))
* 1000"#,
    encode_names: None,
    judge_primary: JudgePrimary::Workload,
};
