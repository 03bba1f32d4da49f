//! Route sources of each Gateway API kind a canary's `routeSource` may name, shared by the
//! route source tests and the RBAC test (which drives their readiness reads).

use crate::support::canary::{load_one, podinfo};
use crate::support::manifests::DEPLOYMENT;

pub(crate) const SOURCE_FILE: &str = "apps/podinfo/httproute.yaml";
pub(crate) const CANARY_FILE: &str = "apps/podinfo/canary.yaml";

/// The metadata every source in this file carries, which the copy keeps.
#[macro_export]
macro_rules! source_metadata {
    () => {
        "metadata:
  name: podinfo-public
  namespace: prod
  labels:
    team: web
  annotations:
    example.com/owner: web-team
"
    };
}

/// A route source's head: its API, kind, [`source_metadata`] and the one parent Gateway's
/// listener `section`, up to `spec.parentRefs`.
pub(crate) fn route_head(api_version: &str, kind: &str, section: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/{api_version}
kind: {kind}
{}spec:
  parentRefs:
    - name: public-gateway
      namespace: gateway-system
      sectionName: {section}
",
        crate::source_metadata!()
    )
}

/// The end of a rule whose one backend is podinfo, the apex Service.
pub(crate) const APEX_BACKEND: &str = "      backendRefs:
        - name: podinfo
          port: 9898
";

/// A GRPCRoute: the health service to another backend, and podinfo's Echo method with a
/// header match and a request header filter.
pub(crate) fn grpc_source() -> String {
    route_head("v1", "GRPCRoute", "grpc")
        + "  hostnames:
    - grpc.podinfo.example.com
  rules:
    - matches:
        - method:
            service: grpc.health.v1.Health
      backendRefs:
        - name: health
          port: 8080
    - matches:
        - method:
            service: podinfo.Echo
            method: Echo
          headers:
            - name: x-tenant
              value: web
      filters:
        - type: RequestHeaderModifier
          requestHeaderModifier:
            remove: [x-debug]
" + APEX_BACKEND
}

/// A TCPRoute (v1alpha2, the experimental channel): a named rule to another Service and
/// podinfo's rule.
pub(crate) fn tcp_source() -> String {
    route_head("v1alpha2", "TCPRoute", "tcp")
        + "  rules:
    - name: admin
      backendRefs:
        - name: admin
          port: 8080
    - name: podinfo
" + APEX_BACKEND
}

/// A TLSRoute (v1alpha2, passthrough by SNI): podinfo's one rule.
pub(crate) fn tls_source() -> String {
    route_head("v1alpha2", "TLSRoute", "tls-passthrough")
        + "  hostnames:
    - podinfo.example.com
  rules:
    - backendRefs:
        - name: podinfo
          port: 9898
"
}

/// The three route kinds besides HTTPRoute, with their sources.
pub(crate) fn other_kinds() -> [(&'static str, String); 3] {
    [
        ("GRPCRoute", grpc_source()),
        ("TCPRoute", tcp_source()),
        ("TLSRoute", tls_source()),
    ]
}

/// The Flagger canary on `provider`, step weight 20, with `source` as its route source.
pub(crate) fn loaded_flagger(provider: &str, source: &str) -> sluice::manifest::model::Canary {
    let canary = podinfo()
        .provider(provider)
        .refs(&format!("  routeSource: {SOURCE_FILE}\n"))
        .yaml("    stepWeight: 20");
    load_one(&[
        ("apps/podinfo/deployment.yaml", DEPLOYMENT),
        (CANARY_FILE, &canary),
        (SOURCE_FILE, source),
    ])
}
