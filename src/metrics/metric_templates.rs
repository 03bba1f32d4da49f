//! Flagger `MetricTemplate`s read from the repo snapshot, found by namespace and name.
//!
//! A `flagger.app/v1beta1 MetricTemplate` is looked up among the snapshot's documents
//! (multi-document files included). Problems are reported like every spec error,
//! `file:line: field: message`, and a template with problems stays in the index as invalid, so
//! a metric that refers to it fails with the reason instead of "not found". Its provider is
//! read into a typed [`MetricProvider`] by its provider's module (the registry, `registry.rs`,
//! finds it by type); a provider type sluice cannot query ([`queryable_provider`]) and a
//! provider field the type does not use are errors here, not surprises mid-rollout. The query
//! text is only checked here; `query_render.rs` renders it. This module does no IO.

use std::collections::BTreeMap;
use std::fmt;

use crate::core::model::Name;
use crate::metrics::provider::ProviderFields;
use crate::metrics::query_render::check;
use crate::metrics::registry::{self, Registered, OPTIONAL_FIELDS};
use crate::yaml::error::{first, SpecError};
use crate::yaml::node::{parse_documents, Node, Value};
use crate::yaml::reader::{join, name_at, namespace_at, Reader, METADATA_KEYS, OBJECT_KEYS};
use crate::yaml::snapshot::{Contents, Snapshot};

/// A valid MetricTemplate of a provider type sluice queries ([`queryable_provider`]).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricTemplate {
    pub name: Name,
    pub namespace: Name,
    /// Where it was read, for messages.
    pub file: String,
    pub line: usize,
    /// `spec.provider`: who answers the query, and how to reach it.
    pub provider: MetricProvider,
    /// `spec.query`, checked for template syntax; its language is the provider's.
    pub query: String,
}

pub use crate::metrics::registry::MetricProvider;

/// Flagger's provider types (the CRD's enum) that sluice refuses, and why. Every other type of
/// the CRD is in the registry ([`crate::metrics::registry`]).
const REFUSED_TYPES: &[(&str, &str)] = &[
    ("stackdriver", "Stackdriver needs signed requests (Google service-account credentials), which sluice does not make"),
    ("keptn", "Keptn is read from the cluster's Keptn resources, which sluice does not read"),
    ("externalmetrics", "external metrics are read from the cluster's Kubernetes API, which sluice does not read"),
];

/// Whether sluice can query MetricTemplates of provider type `kind` (`spec.provider.type`).
/// Every other type is refused by name when the template is read.
pub fn queryable_provider(kind: &str) -> bool {
    registry::provider(kind).is_some()
}

/// The provider types sluice queries, for messages.
fn queryable_list() -> String {
    registry::provider_types().collect::<Vec<_>>().join(", ")
}

/// Why a metric's template cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("metric template {namespace}/{name} not found: no flagger.app/v1beta1 MetricTemplate with that namespace and name in the repo")]
    NotFound { namespace: String, name: String },
    #[error("metric template {namespace}/{name} is invalid: {}", first(.errors))]
    Invalid {
        namespace: String,
        name: String,
        errors: Vec<SpecError>,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Entry {
    Valid(MetricTemplate),
    Invalid(Vec<SpecError>),
}

/// Every MetricTemplate found in the repo, by namespace and name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TemplateIndex {
    entries: BTreeMap<(String, String), (String, usize, Entry)>,
    /// The repo's Argo Rollouts AnalysisTemplates, which a Rollout's analysis metrics are
    /// queried through (read with the rest, their problems reported by the Rollouts that
    /// use them).
    pub analysis: crate::metrics::analysis_templates::AnalysisIndex,
}

const API_VERSION: &str = "flagger.app/v1beta1";
const PROVIDER_KEYS: &[&str] = &[
    "type",
    "address",
    "headers",
    "secretRef",
    "region",
    "insecureSkipVerify",
];
impl TemplateIndex {
    pub fn new() -> TemplateIndex {
        TemplateIndex::default()
    }

    /// Reads every MetricTemplate of the snapshot, in file order. Returns the index and
    /// every problem found (unreadable files and YAML syntax errors included, as spec loading
    /// reports them).
    pub fn from_snapshot(snapshot: &Snapshot) -> (TemplateIndex, Vec<SpecError>) {
        let mut index = TemplateIndex::new();
        let mut errors = Vec::new();
        for file in snapshot.files() {
            let mut r = Reader::new(file.name.as_str());
            match &*file.contents {
                Contents::Unreadable(e) => r.error(1, "", e.to_string()),
                Contents::Invalid { error, .. } => r.error(
                    error.line,
                    "",
                    format!("YAML syntax error: {}", error.message),
                ),
                Contents::Yaml { documents, .. } => index.add_documents(&mut r, documents),
            }
            errors.extend(r.errors);
        }
        index.analysis =
            crate::metrics::analysis_templates::AnalysisIndex::from_snapshot(snapshot).0;
        (index, errors)
    }

    /// Reads every MetricTemplate in one file's text (other documents are ignored); `file`
    /// names it in errors. Returns the problems found.
    pub fn add_text(&mut self, file: &str, text: &str) -> Vec<SpecError> {
        let mut r = Reader::new(file);
        match parse_documents(text) {
            Ok(docs) => {
                let roots: Vec<Node> = docs.into_iter().map(|d| d.root).collect();
                self.add_documents(&mut r, &roots);
            }
            Err(e) => r.error(e.line, "", format!("YAML syntax error: {}", e.message)),
        }
        r.errors
    }

    fn add_documents(&mut self, r: &mut Reader, roots: &[Node]) {
        for root in roots {
            let Value::Map(_) = root.value else { continue };
            if root.get("kind").and_then(Node::as_str) != Some("MetricTemplate") {
                continue;
            }
            let api_node = root.get("apiVersion");
            match api_node.and_then(Node::as_str) {
                Some(API_VERSION) => {}
                Some(api) if api.starts_with("flagger.app/") => {
                    let line = api_node.map_or(root.line, |n| n.line);
                    r.error(
                        line,
                        "apiVersion",
                        format!("expected {API_VERSION}, found {api:?}"),
                    );
                    continue;
                }
                _ => continue,
            }
            let before = r.errors.len();
            let read = read_template(r, root);
            let errors = r.errors[before..].to_vec();
            let Some((namespace, name, template)) = read else {
                continue;
            };
            let key = (namespace.to_string(), name.to_string());
            if let Some((first_file, first_line, _)) = self.entries.get(&key) {
                r.error(
                    root.line,
                    "metadata.name",
                    format!(
                        "duplicate MetricTemplate {namespace}/{name}: already defined at {first_file}:{first_line}"
                    ),
                );
                continue;
            }
            let entry = match template {
                Some(t) if errors.is_empty() => Entry::Valid(t),
                _ => Entry::Invalid(errors),
            };
            self.entries.insert(key, (r.file.clone(), root.line, entry));
        }
    }

    /// The template a metric refers to.
    pub fn get(&self, namespace: &str, name: &str) -> Result<&MetricTemplate, LookupError> {
        match self.entries.get(&(namespace.to_string(), name.to_string())) {
            Some((_, _, Entry::Valid(t))) => Ok(t),
            Some((_, _, Entry::Invalid(errors))) => Err(LookupError::Invalid {
                namespace: namespace.to_string(),
                name: name.to_string(),
                errors: errors.clone(),
            }),
            None => Err(LookupError::NotFound {
                namespace: namespace.to_string(),
                name: name.to_string(),
            }),
        }
    }

    /// Number of templates found, valid or not.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl fmt::Display for MetricTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Reads one MetricTemplate document. Returns its namespace and name when they could be
/// read (so problems can be tied to it), and the template when nothing else was wrong.
fn read_template(r: &mut Reader, root: &Node) -> Option<(Name, Name, Option<MetricTemplate>)> {
    r.map(root, "", OBJECT_KEYS)?;
    let meta = r.required(root, "", "metadata")?;
    r.map(meta, "metadata", METADATA_KEYS)?;
    let name = r
        .required(meta, "metadata", "name")
        .and_then(|n| name_at(r, n, "metadata.name"))?;
    let namespace = match meta.get("namespace") {
        Some(n) => namespace_at(r, n, "metadata.namespace")?,
        None => Name::parse("default").ok()?,
    };
    let template = read_spec(r, root, &name, &namespace);
    Some((namespace, name, template))
}

/// The template's `spec`: its query and its provider.
fn read_spec(r: &mut Reader, root: &Node, name: &Name, namespace: &Name) -> Option<MetricTemplate> {
    let spec = r.required(root, "", "spec")?;
    r.map(spec, "spec", &["provider", "query"])?;
    let provider = r
        .required(spec, "spec", "provider")
        .and_then(|p| r.map(p, "spec.provider", PROVIDER_KEYS));
    let query = read_query(r, spec);
    let (fields, entry) = read_provider_fields(r, provider?)?;
    let before = r.errors.len();
    refuse_unused(&fields, entry, r);
    let provider = (entry.read)(&fields, r)?;
    if r.errors.len() != before {
        return None;
    }
    Some(MetricTemplate {
        name: name.clone(),
        namespace: namespace.clone(),
        file: r.file.clone(),
        line: root.line,
        provider,
        query: query?,
    })
}

/// `spec.query`: not empty, and its template syntax checks.
fn read_query(r: &mut Reader, spec: &Node) -> Option<String> {
    let node = r.required(spec, "spec", "query")?;
    let text = r.string(node, "spec.query")?;
    if text.trim().is_empty() {
        r.error(
            node.line,
            "spec.query",
            "expected a query, found an empty string",
        );
        return None;
    }
    match check(&text) {
        Ok(()) => Some(text),
        Err(e) => {
            r.error(node.line, "spec.query", e.to_string());
            None
        }
    }
}

/// Reads every field of `spec.provider`; `None` when its type is missing or not queryable
/// (reported).
fn read_provider_fields<'n>(
    r: &mut Reader,
    provider: &'n Node,
) -> Option<(ProviderFields<'n>, &'static Registered)> {
    let entry = read_provider_type(r, provider);
    let websocket_ok = entry.is_some_and(|e| e.websocket_address);
    let address = provider
        .get("address")
        .and_then(|n| read_address(r, n, websocket_ok));
    let headers = provider
        .get("headers")
        .map(|n| read_headers(r, n, "spec.provider.headers"))
        .unwrap_or_default();
    let secret_ref = provider.get("secretRef").and_then(|n| {
        let path = "spec.provider.secretRef";
        r.map(n, path, &["name"])?;
        // The name becomes a path under the Secrets folder: a Kubernetes name or nothing.
        r.required(n, path, "name")
            .and_then(|v| name_at(r, v, &join(path, "name")))
            .map(String::from)
    });
    let region = provider
        .get("region")
        .and_then(|n| r.string(n, "spec.provider.region"));
    let insecure_skip_verify = provider
        .get("insecureSkipVerify")
        .and_then(|n| r.bool(n, "spec.provider.insecureSkipVerify"))
        .unwrap_or(false);
    let entry = entry?;
    let fields = ProviderFields {
        node: provider,
        kind: entry.kind.to_string(),
        address,
        headers,
        secret_ref,
        region,
        insecure_skip_verify,
    };
    Some((fields, entry))
}

/// `spec.provider.type`: one sluice queries (its registry entry).
fn read_provider_type(r: &mut Reader, provider: &Node) -> Option<&'static Registered> {
    let node = r.required(provider, "spec.provider", "type")?;
    let kind = r.string(node, "spec.provider.type")?;
    if let Some(entry) = registry::provider(&kind) {
        return Some(entry);
    }
    match REFUSED_TYPES.iter().find(|(k, _)| *k == kind.as_str()) {
        None => r.error(
            node.line,
            "spec.provider.type",
            format!(
                "expected one of {}, found {kind:?}",
                registry::provider_types()
                    .chain(REFUSED_TYPES.iter().map(|(k, _)| *k))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        Some((_, why)) => r.error(
            node.line,
            "spec.provider.type",
            format!(
                "provider type {kind:?} is not supported: {why}; sluice queries {}",
                queryable_list()
            ),
        ),
    }
    None
}

/// `spec.provider.address`: an http(s) URL, or ws(s) where `websocket_ok`.
fn read_address(r: &mut Reader, n: &Node, websocket_ok: bool) -> Option<String> {
    let text = r.string(n, "spec.provider.address")?;
    if text.starts_with("http://")
        || text.starts_with("https://")
        || (websocket_ok && (text.starts_with("ws://") || text.starts_with("wss://")))
    {
        Some(text)
    } else {
        r.error(
            n.line,
            "spec.provider.address",
            format!("expected an http:// or https:// URL, found {text:?}"),
        );
        None
    }
}

/// Refuses each optional field Flagger's provider of this type (`entry`) never reads, rather
/// than ignore it. An `insecureSkipVerify: false` is the default and passes.
fn refuse_unused(fields: &ProviderFields, entry: &Registered, r: &mut Reader) {
    for key in OPTIONAL_FIELDS {
        let set = match key {
            "insecureSkipVerify" => fields.insecure_skip_verify,
            _ => fields.node.get(key).is_some(),
        };
        if set && !entry.accepts(key) {
            unused(fields, r, key, &registry::readers_of(key));
        }
    }
}

/// Reports `key` when it is set: this type does not read it, only `used_by` does.
fn unused(fields: &ProviderFields, r: &mut Reader, key: &str, used_by: &str) {
    let kind = &fields.kind;
    if let Some(n) = fields.node.get(key) {
        r.error(
            n.line,
            &join("spec.provider", key),
            format!(
                "provider type {kind:?} does not use {key}; Flagger reads it only for {used_by}"
            ),
        );
    }
}

/// `headers: {Name: [value, ...]}` (Go's `http.Header`); names and values must be valid HTTP.
fn read_headers(r: &mut Reader, node: &Node, path: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Value::Map(entries) = &node.value else {
        r.error(
            node.line,
            path,
            format!(
                "expected a mapping of header names to lists of values, found {}",
                node.kind()
            ),
        );
        return out;
    };
    for (key, values) in entries {
        let hp = join(path, &key.text);
        if reqwest::header::HeaderName::from_bytes(key.text.as_bytes()).is_err() {
            r.error(key.line, &hp, "expected a valid HTTP header name");
            continue;
        }
        let Some(items) = r.seq(values, &hp) else {
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            let ip = format!("{hp}[{i}]");
            let Some(value) = r.string(item, &ip) else {
                continue;
            };
            if reqwest::header::HeaderValue::from_str(&value).is_err() {
                r.error(
                    item.line,
                    &ip,
                    "expected a header value without control characters",
                );
                continue;
            }
            out.push((key.text.clone(), value));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::observe::MetricValue;
    use crate::metrics::provider::Series;
    use crate::metrics::registry::{provider, PROVIDED, PROVIDERS};
    use crate::metrics::{datadog, prometheus};

    /// A MetricTemplate whose `spec.provider` is `provider` (lines indented under it).
    fn template(provider: &str) -> String {
        format!(
            "apiVersion: flagger.app/v1beta1\nkind: MetricTemplate\nmetadata:\n  name: m\nspec:\n  provider:\n{provider}  query: x\n"
        )
    }

    /// What every provider must say and provide: a unique type, the fields it reads, an
    /// example `spec.provider` that loads into its own variant, an answer its parser reads,
    /// a series rank unique among range providers, and its row in the docs' provider table
    /// naming every Secret key it reads.
    #[test]
    fn every_registered_provider_provides_what_the_registry_asks() {
        let docs = include_str!("../../docs/operations.md");
        let mut ranks = Vec::new();
        assert_eq!(PROVIDED.len(), PROVIDERS.len());
        for (i, (e, p)) in PROVIDERS.iter().zip(PROVIDED).enumerate() {
            let kind = e.kind;
            assert!(
                !kind.is_empty() && kind.chars().all(|c| c.is_ascii_lowercase()),
                "provider {i}: type {kind:?}"
            );
            assert_eq!(
                provider(kind).map(|p| p.kind),
                Some(kind),
                "{kind}: listed twice"
            );
            assert!(queryable_provider(kind), "{kind}");
            for field in e.reads.iter().chain(e.ignores) {
                assert!(OPTIONAL_FIELDS.contains(field), "{kind}: reads {field}");
            }
            let mut index = TemplateIndex::new();
            let errors = index.add_text("t.yaml", &template(p.example));
            assert!(errors.is_empty(), "{kind}: its EXAMPLE: {errors:?}");
            let loaded = index.get("default", "m").map(|t| t.provider.kind());
            assert_eq!(
                loaded,
                Ok(kind),
                "{kind}: its EXAMPLE loads as another type"
            );
            let (body, value) = p.answer;
            assert_eq!(
                (p.parse)(200, body.as_bytes()),
                MetricValue::Value(value),
                "{kind}: its ANSWER"
            );
            if let Series::Range { rank } = e.series {
                assert!(!ranks.contains(&rank), "{kind}: series rank {rank} taken");
                ranks.push(rank);
            }
            let row = docs
                .lines()
                .find(|l| l.starts_with(&format!("| `{kind}` |")))
                .unwrap_or_else(|| {
                    panic!("{kind}: no row in docs/operations.md's table of metric providers")
                });
            for key in p.secret_keys {
                assert!(
                    row.contains(&format!("`{key}`")),
                    "{kind}: docs/operations.md does not name its Secret key {key}"
                );
            }
        }
    }

    const GOOD: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: unrelated
---
apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: error-rate
  namespace: istio-system
spec:
  provider:
    type: prometheus
    address: http://prometheus.istio-system:9090
    headers:
      X-Scope-OrgID: [tenant-a]
  query: |
    100 - sum(rate(istio_requests_total{destination_workload_namespace=\"{{ namespace }}\",destination_workload=\"{{ target }}\",response_code!~\"5.*\"}[{{ interval }}]))
---
apiVersion: flagger.app/v1beta1
kind: MetricTemplate
metadata:
  name: latency
spec:
  provider:
    type: prometheus
  query: histogram_quantile(0.99, sum(rate(x_bucket[{{ interval }}])) by (le))
";

    #[test]
    fn templates_are_found_by_namespace_and_name_in_multi_document_files() {
        let mut index = TemplateIndex::new();
        let errors = index.add_text("apps/metrics.yaml", GOOD);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(index.len(), 2);
        let t = index.get("istio-system", "error-rate").unwrap();
        assert_eq!(
            t.provider,
            MetricProvider::Prometheus(prometheus::Config {
                address: Some("http://prometheus.istio-system:9090".into()),
                headers: vec![("X-Scope-OrgID".into(), "tenant-a".into())],
                secret_ref: None,
                insecure_skip_verify: false,
            })
        );
        assert_eq!((t.file.as_str(), t.line), ("apps/metrics.yaml", 6));
        assert!(t.query.contains("{{ target }}"));
        let latency = index.get("default", "latency").unwrap();
        assert!(matches!(
            latency.provider,
            MetricProvider::Prometheus(prometheus::Config { address: None, .. })
        ));
        assert_eq!(
            index.get("default", "error-rate").unwrap_err().to_string(),
            "metric template default/error-rate not found: no flagger.app/v1beta1 MetricTemplate with that namespace and name in the repo"
        );
    }

    fn errors_of(text: &str) -> Vec<String> {
        let mut index = TemplateIndex::new();
        index
            .add_text("t.yaml", text)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const HEAD: &str =
        "apiVersion: flagger.app/v1beta1\nkind: MetricTemplate\nmetadata:\n  name: m\n";

    #[test]
    fn a_secret_ref_that_is_not_a_kubernetes_name_is_refused_with_its_line() {
        for name in ["/abs/dir", "../../x", "..", "Keys", "a/b"] {
            let text = format!(
                "{HEAD}spec:\n  provider:\n    type: datadog\n    address: https://api.datadoghq.com\n    secretRef:\n      name: {name:?}\n  query: avg:x\n"
            );
            let errors = errors_of(&text);
            // One error, where the name stands: not also a "missing" secretRef.
            assert_eq!(errors.len(), 1, "{name}: {errors:?}");
            assert!(
                errors[0].starts_with(
                    "t.yaml:10: spec.provider.secretRef.name: expected a DNS-1123 name"
                ),
                "{name}: {errors:?}"
            );
        }
        let text = format!(
            "{HEAD}spec:\n  provider:\n    type: datadog\n    address: https://api.datadoghq.com\n    secretRef:\n      name: datadog.keys\n  query: avg:x\n"
        );
        assert_eq!(errors_of(&text), Vec::<String>::new());
    }

    #[test]
    fn unqueryable_provider_types_are_refused_by_name() {
        for (kind, why) in [
            ("keptn", "Keptn is read from the cluster's Keptn resources"),
            ("stackdriver", "signed requests"),
            ("externalmetrics", "Kubernetes API"),
        ] {
            assert!(!queryable_provider(kind), "{kind}");
            let text = format!("{HEAD}spec:\n  provider:\n    type: {kind}\n  query: avg:x\n");
            let errors = errors_of(&text);
            assert_eq!(errors.len(), 1, "{kind}: {errors:?}");
            assert!(
                errors[0].starts_with(&format!(
                    "t.yaml:7: spec.provider.type: provider type \"{kind}\" is not supported: "
                )) && errors[0].contains(why)
                    && errors[0].ends_with(
                        "sluice queries prometheus, datadog, newrelic, graphite, influxdb, dynatrace, splunk, cloudwatch"
                    ),
                "{}",
                errors[0]
            );
            let mut index = TemplateIndex::new();
            index.add_text("t.yaml", &text);
            let err = index.get("default", "m").unwrap_err().to_string();
            assert!(err.starts_with(&format!("metric template default/m is invalid: t.yaml:7: spec.provider.type: provider type \"{kind}\"")), "{err}");
        }
    }

    #[test]
    fn queryable_providers_are_the_ones_the_reader_builds() {
        let cases = [
            ("prometheus", "", "prometheus"),
            ("datadog", "    secretRef: {name: dd}\n", "datadog"),
            ("newrelic", "    secretRef: {name: nr}\n", "newrelic"),
            (
                "graphite",
                "    address: http://graphite:8080\n",
                "graphite",
            ),
            (
                "splunk",
                "    address: wss://stream.us1.signalfx.com\n    secretRef: {name: sf}\n",
                "splunk",
            ),
            ("cloudwatch", "    region: eu-west-1\n", "cloudwatch"),
        ];
        for (kind, extra, variant) in cases {
            assert!(queryable_provider(kind), "{kind}");
            let text =
                format!("{HEAD}spec:\n  provider:\n    type: {kind}\n{extra}  query: avg:x\n");
            let mut index = TemplateIndex::new();
            let errors = index.add_text("t.yaml", &text);
            assert!(errors.is_empty(), "{kind}: {errors:?}");
            let t = index.get("default", "m").unwrap();
            assert_eq!(t.provider.kind(), variant);
        }
        assert!(!queryable_provider("Datadog"));
        assert!(!queryable_provider("nope"));
    }

    #[test]
    fn vendor_providers_read_flaggers_defaults_and_refuse_fields_they_do_not_use() {
        let mut index = TemplateIndex::new();
        let text = format!("{HEAD}  namespace: apps\nspec:\n  provider:\n    type: datadog\n    secretRef:\n      name: dd-keys\n  query: avg:x\n");
        assert!(index.add_text("t.yaml", &text).is_empty());
        assert_eq!(
            index.get("apps", "m").unwrap().provider,
            MetricProvider::Datadog(crate::metrics::provider::SecretConfig {
                address: datadog::DEFAULT_ADDRESS.into(),
                secret_ref: "dd-keys".into()
            })
        );
        let cases: &[(&str, &str)] = &[
            (
                "    type: datadog\n",
                "t.yaml:6: spec.provider.secretRef: required field is missing: provider type \"datadog\" reads datadog_api_key and datadog_application_key from a Secret",
            ),
            (
                "    type: newrelic\n",
                "t.yaml:6: spec.provider.secretRef: required field is missing: provider type \"newrelic\" reads newrelic_account_id and newrelic_query_key from a Secret",
            ),
            (
                "    type: graphite\n",
                "t.yaml:6: spec.provider.address: required field is missing: provider type \"graphite\" has no default address",
            ),
            (
                "    type: dynatrace\n    secretRef: {name: d}\n",
                "t.yaml:6: spec.provider.address: required field is missing: provider type \"dynatrace\" has no default address",
            ),
            (
                "    type: datadog\n    secretRef: {name: d}\n    headers: {X-A: [b]}\n",
                "t.yaml:9: spec.provider.headers: provider type \"datadog\" does not use headers; Flagger reads it only for prometheus",
            ),
            (
                "    type: newrelic\n    secretRef: {name: d}\n    insecureSkipVerify: true\n",
                "t.yaml:9: spec.provider.insecureSkipVerify: provider type \"newrelic\" does not use insecureSkipVerify; Flagger reads it only for prometheus and graphite",
            ),
            (
                "    type: graphite\n    address: http://g\n    region: eu-west-1\n",
                "t.yaml:9: spec.provider.region: provider type \"graphite\" does not use region; Flagger reads it only for cloudwatch",
            ),
        ];
        for (provider, expected) in cases {
            let text = format!("{HEAD}spec:\n  provider:\n{provider}  query: avg:x\n");
            assert_eq!(errors_of(&text), vec![expected.to_string()], "{provider}");
        }
    }

    #[test]
    fn template_errors_name_file_line_and_field() {
        let cases: &[(&str, &str)] = &[
            (
                "spec:\n  provider:\n    type: prometheus\n",
                "t.yaml:5: spec.query: required field is missing",
            ),
            (
                "spec:\n  query: x\n",
                "t.yaml:5: spec.provider: required field is missing",
            ),
            (
                "spec:\n  provider:\n    type: prometheus\n  query: \"{{ .Namespace }}\"\n",
                "t.yaml:8: spec.query: unsupported template action \"{{.Namespace}}\"",
            ),
            (
                "spec:\n  provider:\n    type: promethues\n  query: x\n",
                "t.yaml:7: spec.provider.type: expected one of prometheus, datadog, newrelic, graphite, influxdb",
            ),
            (
                "spec:\n  provider:\n    type: prometheus\n    adress: http://p:9090\n  query: x\n",
                "t.yaml:8: spec.provider.adress: unknown field (did you mean \"address\"?)",
            ),
            (
                "spec:\n  provider:\n    type: prometheus\n    address: prometheus:9090\n  query: x\n",
                "t.yaml:8: spec.provider.address: expected an http:// or https:// URL, found \"prometheus:9090\"",
            ),
            (
                "spec:\n  provider:\n    type: prometheus\n    headers:\n      X-A: b\n  query: x\n",
                "t.yaml:9: spec.provider.headers.X-A: expected a list, found \"b\"",
            ),
            (
                "spec:\n  provider:\n    type: prometheus\n    insecureSkipVerify: yes\n  query: x\n",
                "t.yaml:8: spec.provider.insecureSkipVerify: expected true or false, found \"yes\"",
            ),
            (
                "spec:\n  provider:\n    type: prometheus\n  query: \"  \"\n",
                "t.yaml:8: spec.query: expected a query, found an empty string",
            ),            (
                "spec:\n  provider:\n    type: cloudwatch\n  query: \"[]\"\n",
                "t.yaml:6: spec.provider.region: required field is missing: provider type \"cloudwatch\" queries the region it names",
            ),
            (
                "spec:\n  provider:\n    type: cloudwatch\n    region: us-east-1\n    secretRef: {name: aws}\n  query: \"[]\"\n",
                "t.yaml:9: spec.provider.secretRef: provider type \"cloudwatch\" does not use secretRef: Flagger's cloudwatch provider ignores it",
            ),
            (
                "spec:\n  provider:\n    type: cloudwatch\n    region: us-east-1\n    address: http://cw\n  query: \"[]\"\n",
                "t.yaml:9: spec.provider.address: provider type \"cloudwatch\" does not use address",
            ),
            (
                "spec:\n  provider:\n    type: splunk\n    address: https://api.us1.signalfx.com\n  query: x\n",
                "t.yaml:6: spec.provider.secretRef: required field is missing: provider type \"splunk\" reads sf_token_key from a Secret",
            ),
            (
                "spec:\n  provider:\n    type: datadog\n    secretRef: {name: d}\n    region: us-east-1\n  query: x\n",
                "t.yaml:9: spec.provider.region: provider type \"datadog\" does not use region",
            ),
        ];
        let mut wrong = Vec::new();
        for (spec, expected) in cases {
            let errors = errors_of(&format!("{HEAD}{spec}"));
            if errors.len() != 1 || !errors[0].starts_with(expected) {
                wrong.push(format!(
                    "{spec}\n  found:    {errors:?}\n  expected: {expected}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn bad_names_wrong_versions_and_duplicates_are_reported() {
        let bad_name = "apiVersion: flagger.app/v1beta1\nkind: MetricTemplate\nmetadata:\n  name: Bad_Name\nspec:\n  provider:\n    type: prometheus\n  query: x\n";
        let errors = errors_of(bad_name);
        assert!(
            errors[0].starts_with("t.yaml:4: metadata.name: expected a DNS-1123 name"),
            "{errors:?}"
        );

        let old = "apiVersion: flagger.app/v1alpha3\nkind: MetricTemplate\nmetadata:\n  name: m\n";
        assert_eq!(
            errors_of(old),
            vec!["t.yaml:1: apiVersion: expected flagger.app/v1beta1, found \"flagger.app/v1alpha3\""]
        );

        let one = format!("{HEAD}spec:\n  provider:\n    type: prometheus\n  query: x\n");
        let errors = errors_of(&format!("{one}---\n{one}"));
        assert_eq!(
            errors,
            vec!["t.yaml:10: metadata.name: duplicate MetricTemplate default/m: already defined at t.yaml:1"]
        );

        let syntax = errors_of("a: [1,\n");
        assert!(syntax[0].starts_with("t.yaml:"), "{syntax:?}");
        assert!(syntax[0].contains("YAML syntax error"), "{syntax:?}");
    }

    #[test]
    fn from_snapshot_finds_templates_in_the_repos_yaml_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("apps/podinfo")).unwrap();
        std::fs::write(dir.path().join("apps/podinfo/metrics.yaml"), GOOD).unwrap();
        std::fs::write(dir.path().join("apps/podinfo/notes.txt"), "not yaml").unwrap();
        std::fs::write(dir.path().join("apps/broken.yaml"), "a: [1,\n").unwrap();
        let (index, errors) = TemplateIndex::from_snapshot(&Snapshot::read(dir.path()));
        assert_eq!(index.len(), 2);
        assert_eq!(
            index.get("istio-system", "error-rate").unwrap().file,
            "apps/podinfo/metrics.yaml"
        );
        let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("apps/broken.yaml:2: YAML syntax error:"),
            "{errors:?}"
        );
    }
}
