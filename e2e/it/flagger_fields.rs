//! The audit of Flagger's fields (`sluice::manifest::flagger_fields`): it lists exactly the fields
//! of Flagger's CRDs, each refused field is refused with file:line:field, and the table in
//! `docs/flagger-fields.md` is the one the code renders.

use std::collections::BTreeSet;

use serde_json::Value;
use sluice::manifest::flagger_fields::{markdown, parent, use_of, Field, Kind, Support, FIELDS};
use sluice::manifest::load::load_text;
use sluice::manifest::settings::Settings;
use sluice::route::{parse_provider, FieldUse};

/// Flagger v1.44.0's CRDs, copied from the shared schema set (see `e2e/schemas/README.md`).
const CRDS: &str = include_str!("../schemas/flagger.app_crds.v1.44.0.yaml");

/// Every field path under `schema` (an openAPIV3Schema object), `[]` for list items.
fn walk(schema: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(props) = schema["properties"].as_object() {
        for (key, sub) in props {
            let p = format!("{path}.{key}");
            out.push(p.clone());
            walk(sub, &p, out);
        }
    }
    if schema["type"].as_str() == Some("array") {
        walk(&schema["items"], &format!("{path}[]"), out);
    }
}

fn crd_fields(kind: Kind) -> Vec<String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(CRDS).expect("the CRD file parses");
    let crd = docs
        .iter()
        .find(|d| d["spec"]["names"]["kind"].as_str() == Some(kind.as_str()))
        .unwrap_or_else(|| panic!("no CRD for {}", kind.as_str()));
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let mut out = Vec::new();
    for v in versions {
        let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert!(spec.is_object(), "{} has no spec schema", kind.as_str());
        walk(spec, "spec", &mut out);
    }
    out
}

#[test]
fn the_field_table_lists_exactly_the_fields_of_flaggers_crds() {
    let mut problems = Vec::new();
    for kind in Kind::ALL {
        let crd: BTreeSet<String> = crd_fields(kind).into_iter().collect();
        assert!(crd.len() > 5, "{}: walked only {crd:?}", kind.as_str());
        let rows: Vec<&str> = FIELDS
            .iter()
            .filter(|f| f.kind == kind)
            .map(|f| f.path)
            .collect();
        let table: BTreeSet<String> = rows.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            rows.len(),
            table.len(),
            "a {} row is listed twice",
            kind.as_str()
        );
        for missing in crd.difference(&table) {
            problems.push(format!("{} {missing}: in the CRD, not in the table (implement it as Flagger does or refuse it, then add its row)", kind.as_str()));
        }
        for extra in table.difference(&crd) {
            problems.push(format!(
                "{} {extra}: in the table, not in the CRD",
                kind.as_str()
            ));
        }
    }
    for f in FIELDS.iter().filter(|f| f.support == Support::WithParent) {
        if parent(f.kind, f.path).is_none() {
            problems.push(format!("{}: WithParent but no parent row", f.path));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A sample value for each field that is refused with some provider, placed where it goes:
/// `spec.<key>`, `spec.service.<key>` or `spec.analysis.<key>`.
const SAMPLES: &[(&str, &str)] = &[
    (
        "spec.ingressRef",
        "ingressRef: {apiVersion: networking.k8s.io/v1, kind: Ingress, name: web}",
    ),
    (
        "spec.routeRef",
        "routeRef: {apiVersion: apisix.apache.org/v2, kind: ApisixRoute, name: web}",
    ),
    (
        "spec.upstreamRef",
        "upstreamRef: {apiVersion: gloo.solo.io/v1, kind: Upstream, name: web}",
    ),
    (
        "spec.service.unmanagedMetadata",
        "unmanagedMetadata: {labels: {a: b}}",
    ),
    ("spec.service.timeout", "timeout: 5s"),
    ("spec.service.backendTimeout", "backendTimeout: 5s"),
    ("spec.service.meshName", "meshName: global"),
    ("spec.service.backends", "backends: [backend.example.com]"),
    ("spec.service.hosts", "hosts: [web.example.com]"),
    ("spec.service.delegation", "delegation: true"),
    ("spec.service.match", "match: [{uri: {prefix: /api}}]"),
    (
        "spec.service.retries",
        "retries: {attempts: 3, perTryTimeout: 1s}",
    ),
    ("spec.service.rewrite", "rewrite: {uri: /}"),
    (
        "spec.service.mirror",
        "mirror: [{backendRef: {name: shadow, port: 80}}]",
    ),
    (
        "spec.service.headers",
        "headers: {request: {add: {x-a: b}}}",
    ),
    ("spec.service.gateways", "gateways: [public]"),
    ("spec.service.gatewayRefs", "gatewayRefs: [{name: gw}]"),
    (
        "spec.service.corsPolicy",
        "corsPolicy: {allowOrigin: ['*']}",
    ),
    (
        "spec.service.trafficPolicy",
        "trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}",
    ),
    ("spec.analysis.mirror", "mirror: true"),
    ("spec.analysis.mirrorWeight", "mirrorWeight: 10"),
    (
        "spec.analysis.match",
        "match: [{headers: {x-canary: {exact: insider}}}]",
    ),
    (
        "spec.analysis.sessionAffinity",
        "sessionAffinity: {cookieName: canary}",
    ),
];

/// A Flagger canary for `provider` with `sample` under `spec`, `spec.service` or
/// `spec.analysis` (as `path` says), and the 1-based line of the sample.
fn canary_with(provider: &str, path: &str, sample: &str) -> (String, usize) {
    let (mut spec, mut service, mut analysis) = (String::new(), String::new(), String::new());
    // A/B needs iterations; everything else runs a weight schedule.
    let schedule = if path == "spec.analysis.match" {
        "iterations: 5"
    } else {
        "stepWeight: 10"
    };
    match path.rsplit_once('.').map(|(p, _)| p) {
        Some("spec.service") => service = format!("    {sample}\n"),
        Some("spec.analysis") => analysis = format!("    {sample}\n"),
        _ => spec = format!("  {sample}\n"),
    }
    let text = format!(
        "apiVersion: flagger.app/v1beta1
kind: Canary
metadata:
  name: web
  namespace: prod
spec:
  provider: {provider}
{spec}  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
  service:
    port: 9898
{service}  analysis:
    {schedule}
{analysis}"
    );
    let line = text
        .lines()
        .position(|l| l.trim_start() == sample)
        .expect("sample placed")
        + 1;
    (text, line)
}

/// A provider whose router neither renders nor refuses `f` itself (so [`refuse_unread`] or
/// the reference check must), or one that refuses it itself.
fn refusing_provider(f: &Field) -> &'static str {
    let provider = "osm";
    let router = parse_provider(provider).expect("osm is a provider");
    if use_of(router, f.path) == Some(FieldUse::Renders) {
        panic!("{}: pick another provider for the test", f.path)
    }
    provider
}

/// Every field refused with some provider (all of them for a Refused row) is refused at spec
/// load, and so by `sluice validate`, as `file:line: field: ...` on the field's own line.
#[test]
fn refused_fields_are_refused_naming_file_line_and_field() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in FIELDS.iter().filter(|f| f.kind == Kind::Canary) {
        if matches!(f.support, Support::Implemented(_) | Support::WithParent) {
            continue;
        }
        let Some((_, sample)) = SAMPLES.iter().find(|(p, _)| *p == f.path) else {
            problems.push(format!(
                "{}: refused somewhere but no sample in SAMPLES",
                f.path
            ));
            continue;
        };
        let provider = refusing_provider(f);
        let (text, line) = canary_with(provider, f.path, sample);
        let file = "apps/web/canary.yaml";
        let errors: Vec<String> = load_text(file, &text, &Settings::default())
            .errors
            .iter()
            .map(ToString::to_string)
            .collect();
        let expected = format!("{file}:{line}: {}: ", f.path);
        if !errors.iter().any(|e| e.starts_with(&expected)) {
            problems.push(format!(
                "{} with provider {provider}: expected an error starting {expected:?}, got {errors:#?}",
                f.path
            ));
        }
        checked += 1;
    }
    for f in FIELDS.iter().filter(|f| f.kind != Kind::Canary) {
        if let Support::Refused(_) = f.support {
            problems.push(format!(
                "{} {}: refused, but this test checks Canary fields only",
                f.kind.as_str(),
                f.path
            ));
        }
    }
    assert!(checked >= 20, "checked only {checked} fields");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Each router that renders a route field accepts it with the sample value (the refusal above
/// is about the provider, not the value).
#[test]
fn route_fields_load_with_a_provider_that_renders_them() {
    let providers = ["istio", "contour", "appmesh:v1beta2"];
    let mut problems = Vec::new();
    for f in FIELDS {
        let Support::Routed { .. } = f.support else {
            continue;
        };
        if !f.path.starts_with("spec.service.") {
            continue;
        }
        let Some((_, sample)) = SAMPLES.iter().find(|(p, _)| *p == f.path) else {
            continue;
        };
        let renders = |provider: &&&str| {
            parse_provider(provider).is_ok_and(|p| use_of(p, f.path) == Some(FieldUse::Renders))
        };
        for provider in providers.iter().filter(renders) {
            let (text, _) = canary_with(provider, f.path, sample);
            let errors = load_text("c.yaml", &text, &Settings::default()).errors;
            if !errors.is_empty() {
                problems.push(format!("{} with {provider}: {errors:?}", f.path));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const START: &str = "<!-- flagger-fields:start -->\n";
const END: &str = "<!-- flagger-fields:end -->";

/// The Flagger field reference the docs give, and that the test reads and rewrites.
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/flagger-fields.md");

/// `docs/flagger-fields.md` holds the table the code renders. With `SLUICE_UPDATE_DOCS=1` (or
/// its earlier name `SLUICE_UPDATE_README=1`) the test writes the rendered table between the
/// markers instead.
#[test]
fn docs_flagger_field_table_is_the_one_the_code_renders() {
    let doc = std::fs::read_to_string(DOC).expect("docs/flagger-fields.md");
    let start = doc
        .find(START)
        .expect("docs/flagger-fields.md has the flagger-fields:start marker")
        + START.len();
    let end = doc[start..]
        .find(END)
        .map(|i| start + i)
        .expect("docs/flagger-fields.md has the flagger-fields:end marker");
    let section = &doc[start..end];
    let expected = markdown();
    if std::env::var_os("SLUICE_UPDATE_DOCS").is_some()
        || std::env::var_os("SLUICE_UPDATE_README").is_some()
    {
        let updated = format!("{}{expected}{}", &doc[..start], &doc[end..]);
        std::fs::write(DOC, updated).expect("write docs/flagger-fields.md");
        return;
    }
    assert!(
        section == expected,
        "docs/flagger-fields.md's Flagger field table differs from src/manifest/flagger_fields.rs; replace the text between the markers with:\n{expected}"
    );
    for f in FIELDS {
        assert!(section.contains(&format!("| `{}` |", f.path)), "{}", f.path);
    }
}
