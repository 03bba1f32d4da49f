//! Reads one Canary document (native `sluice.dev/v1alpha1` or Flagger `flagger.app/v1beta1`)
//! into a validated [`Canary`], reporting every problem with its line and field.

use std::time::Duration;

use crate::route::istio::IstioVersion;
use crate::route::{parse_provider, route_objects, AbInput, FlaggerInput, Provider, Route};
use crate::spec::analysis::read_analysis;
use crate::spec::model::{
    Analysis, Canary, CanaryId, Format, Name, PortRef, RepoPath, ServiceSpec, Strategy, Target,
};
use crate::spec::settings::Settings;
use crate::spec::sync::read_sync_target;
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};

const TOP_KEYS: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];
const METADATA_KEYS: &[&str] = &[
    "name",
    "namespace",
    "labels",
    "annotations",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "finalizers",
    "ownerReferences",
    "managedFields",
    "generateName",
];
const NATIVE_SPEC_KEYS: &[&str] = &[
    "provider",
    "metricsServer",
    "source",
    "routeOnly",
    "output",
    "service",
    "route",
    "analysis",
    "skipAnalysis",
    "suspend",
    "progressDeadlineSeconds",
    "sync",
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

/// What Flagger uses when neither the Canary nor its own flags name a provider: Istio, as
/// `provider: istio` (VirtualService `networking.istio.io/v1beta1`, Istio's metric queries).
const FLAGGER_DEFAULT_PROVIDER: Provider = Provider::Istio(IstioVersion::V1beta1);
const FLAGGER_DEFAULT_PROVIDER_NAME: &str = "istio";

fn name_at(r: &mut Reader, node: &Node, path: &str) -> Option<Name> {
    let text = r.string(node, path)?;
    match Name::parse(&text) {
        Ok(n) => Some(n),
        Err(e) => {
            r.error(node.line, path, e);
            None
        }
    }
}

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
    let meta = r.required(root, "", "metadata")?;
    r.map(meta, "metadata", METADATA_KEYS)?;
    let name = r
        .required(meta, "metadata", "name")
        .and_then(|n| name_at(r, n, "metadata.name"));
    let namespace = match meta.get("namespace") {
        Some(n) => name_at(r, n, "metadata.namespace"),
        None => Name::parse("default").ok(),
    };
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
pub fn read_native(r: &mut Reader, root: &Node, settings: &Settings) -> Option<Canary> {
    let before = r.errors.len();
    r.map(root, "", TOP_KEYS)?;
    let id = read_id(r, root);
    let spec = r.required(root, "", "spec")?;
    r.map(spec, "spec", NATIVE_SPEC_KEYS)?;

    let target = match (spec.get("source"), spec.get("routeOnly")) {
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
    };
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
    let mut route = r
        .required(spec, "spec", "route")
        .and_then(|n| Route::read_native(r, n));
    let analysis = r.required(spec, "spec", "analysis").and_then(|n| {
        read_analysis(
            r,
            n,
            "spec.analysis",
            Format::Native,
            id.as_ref().map(|i| &i.namespace),
        )
    });
    // A/B: the router converts the matches now, as for Flagger input, so a bad one is
    // reported with its line by `sluice validate`.
    read_ab_matches(r, &mut route, analysis.as_ref(), spec, None);
    let skip_analysis = read_bool(r, spec, "skipAnalysis");
    let suspend = read_bool(r, spec, "suspend");
    let progress_deadline = read_deadline(r, spec);
    let provider = spec
        .get("provider")
        .and_then(|n| r.string(n, "spec.provider"));
    let metrics_server = read_metrics_server(r, spec);
    let sync = match spec.get("sync") {
        // A bad block is reported through `r` and fails the canary below.
        Some(n) => read_sync_target(r, n, "spec.sync"),
        None => settings.sync.clone(),
    };
    if r.errors.len() > before {
        return None;
    }
    Some(Canary {
        settle: settings.settle,
        provider,
        metrics_server,
        sync,
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
        suspend,
        progress_deadline,
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
    Some(ServiceSpec {
        name: name?,
        port: port?,
        target_port,
    })
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

/// Reads a Flagger `flagger.app/v1beta1` Canary, unchanged.
pub fn read_flagger(r: &mut Reader, root: &Node, settings: &Settings) -> Option<Canary> {
    let before = r.errors.len();
    r.map(root, "", TOP_KEYS)?;
    let id = read_id(r, root);
    let spec = r.required(root, "", "spec")?;
    r.map(spec, "spec", FLAGGER_SPEC_KEYS)?;

    let target = r.required(spec, "spec", "targetRef").and_then(|n| {
        r.map(n, "spec.targetRef", &["apiVersion", "kind", "name"])?;
        let kind = r.required(n, "spec.targetRef", "kind").and_then(|k| {
            let text = r.string(k, "spec.targetRef.kind")?;
            if text != "Deployment" {
                r.error(
                    k.line,
                    "spec.targetRef.kind",
                    format!(
                        "expected Deployment (the only workload sluice manages), found {text:?}"
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
    });
    if let Some(n) = spec.get("autoscalerRef") {
        r.error(n.line, "spec.autoscalerRef", "not supported yet: sluice does not write HorizontalPodAutoscalers; remove autoscalerRef or manage the HPA yourself");
    }
    for key in ["ingressRef", "upstreamRef", "routeRef"] {
        if let Some(n) = spec.get(key) {
            r.error(
                n.line,
                &join("spec", key),
                format!("not supported: sluice routes with {} only", route_objects()),
            );
        }
    }
    let provider = match spec.get("provider") {
        Some(n) => r
            .string(n, "spec.provider")
            .and_then(|text| match parse_provider(&text) {
                Ok(p) => Some(p),
                Err(e) => {
                    r.error(n.line, "spec.provider", e);
                    None
                }
            }),
        // Flagger's default mesh provider is Istio: a Canary written for it names none.
        None => Some(settings.provider.unwrap_or(FLAGGER_DEFAULT_PROVIDER)),
    };
    let service_node = r.required(spec, "spec", "service");
    let service = service_node.and_then(|n| {
        let target_name = match &target {
            Some(Target::TargetRef { name, .. }) => Some(CanaryId {
                namespace: id
                    .as_ref()
                    .map_or_else(|| name.clone(), |i| i.namespace.clone()),
                name: name.clone(),
            }),
            _ => None,
        };
        read_service(
            r,
            n,
            "spec.service",
            FLAGGER_SERVICE_KEYS,
            target_name.as_ref(),
        )
    });
    let mut route = provider.and_then(|p| {
        p.read_flagger(
            r,
            &FlaggerInput {
                service: service_node,
                analysis: spec.get("analysis"),
            },
        )
    });
    let analysis = r.required(spec, "spec", "analysis").and_then(|n| {
        read_analysis(
            r,
            n,
            "spec.analysis",
            Format::Flagger,
            id.as_ref().map(|i| &i.namespace),
        )
    });
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
    let progress_deadline = read_deadline(r, spec);
    let provider_name = spec
        .get("provider")
        .and_then(|n| n.as_str().map(str::to_string))
        .or_else(|| settings.provider_name.clone())
        .or_else(|| Some(FLAGGER_DEFAULT_PROVIDER_NAME.to_string()));
    let metrics_server = read_metrics_server(r, spec);
    if r.errors.len() > before {
        return None;
    }
    Some(Canary {
        settle: settings.settle,
        provider: provider_name,
        metrics_server,
        sync: settings.sync.clone(),
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
        suspend,
        progress_deadline,
    })
}
