//! Argo Rollouts' `AnalysisTemplate` and `ClusterAnalysisTemplate` (`argoproj.io/v1alpha1`),
//! read unchanged from the repo snapshot and found by namespace and name (a cluster template by
//! name alone).
//!
//! Reading checks what does not depend on the arguments: `args` (`value`,
//! `valueFrom.secretKeyRef`), each metric's `interval`, `initialDelay`, `count`, the limits,
//! `successCondition`/`failureCondition` in Argo's condition language (syntax outside the
//! subset sluice evaluates refused with its column) and its `provider`: `prometheus` (address,
//! query, timeout, insecure, headers) and `graphite` (address, query) map onto sluice's
//! providers; every other provider is refused by name at its line with the reason. A field
//! that holds `{{args.NAME}}` is checked once the arguments are known: [`AnalysisIndex::run`]
//! substitutes them as Argo does (every `{{args.NAME}}` in every string; an argument without a
//! value is refused) and reads the metrics again. Problems are `file:line: field: message`.
//! No IO: `analysis_run.rs` measures.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_core::argo_analysis::{MetricRules, DEFAULT_CONSECUTIVE_ERROR_LIMIT};
use sluice_core::argo_expr;

use crate::yaml::error::first;
use crate::yaml::error::SpecError;
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, name_at, namespace_at, Reader, METADATA_KEYS, OBJECT_KEYS};
use crate::yaml::snapshot::{Contents, Snapshot};

const API_VERSION: &str = "argoproj.io/v1alpha1";
const NAMESPACED: &str = "AnalysisTemplate";
const CLUSTER: &str = "ClusterAnalysisTemplate";

/// Providers Argo Rollouts has that sluice does not query, and why.
const REFUSED_PROVIDERS: &[(&str, &str)] = &[
    ("newrelic", "Argo's newrelic provider reads its account and key from the Secret \"newrelic\" of the controller's namespace and its result is a map of the NRQL row; sluice's New Relic client reads one value through a Flagger MetricTemplate's secretRef"),
    ("cloudwatch", "Argo's cloudwatch result is the MetricDataResults list (result[0].Values[...]), which sluice's CloudWatch client does not return"),
    ("influxdb", "Argo's influxdb provider reads its address and token from the Secret \"influxdb\" of the controller's namespace; sluice reads provider credentials only from a Flagger MetricTemplate's secretRef"),
    ("kayenta", "Kayenta runs its own canary judge service; sluice's statistical judge is spec.analysis.judge"),
    ("wavefront", "sluice has no Wavefront client"),
    ("skywalking", "sluice has no SkyWalking client"),
    ("plugin", "sluice does not load Argo Rollouts metric plugins"),
    ("opensearch", "sluice has no OpenSearch client"),
];

/// Which kind of object a template is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// `AnalysisTemplate`, in a namespace.
    Namespaced,
    /// `ClusterAnalysisTemplate` (`clusterScope: true` in a reference).
    Cluster,
}

/// One of a template's `args`.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgDefault {
    /// No value: the caller must give one.
    None,
    Value(String),
    /// `valueFrom.secretKeyRef`: read when measuring through sluice's Secrets (never from git).
    Secret {
        name: String,
        key: String,
    },
}

/// A template read from the repo; its metrics are read again with arguments ([`AnalysisIndex::run`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisTemplate {
    pub scope: Scope,
    pub name: String,
    /// `None` for a ClusterAnalysisTemplate.
    pub namespace: Option<String>,
    pub file: String,
    pub line: usize,
    pub args: Vec<(String, ArgDefault)>,
    /// `spec.metrics`, as written.
    metrics: Node,
}

/// Where one metric's query goes.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricSource {
    /// `provider.prometheus`; `address` `None`: the repo's `prometheus.address`.
    Prometheus {
        address: Option<String>,
        query: String,
        timeout: Option<Duration>,
        insecure: bool,
        headers: Vec<(String, String)>,
    },
    /// `provider.graphite`.
    Graphite { address: String, query: String },
    /// `provider.datadog` with `apiVersion: v1`: `query` over the last `interval` (Argo's
    /// default 5m), the keys from the Secret `secret` (`address`, `api-key`, `app-key`, as
    /// Argo names them) mapped into sluice in the Rollout's namespace.
    Datadog {
        query: String,
        interval: Duration,
        secret: String,
        timeout: Duration,
    },
    /// `provider.job`: the Job's `metadata` (labels, annotations) and `spec`, as JSON; sluice
    /// commits the Job and reads its conditions back (`render/analysis_job.rs`,
    /// `gates/analysis_job.rs`).
    Job { template: serde_json::Value },
    /// `provider.web`: one HTTP request, the result what its `jsonPath` selects.
    Web(crate::metrics::web::WebRequest),
}

/// Argo's Secret of Datadog keys when `secretRef` names none.
pub const DATADOG_SECRET: &str = "datadog";
/// Argo's default `provider.datadog.interval`: the query's window, not the polling rate.
const DATADOG_INTERVAL: Duration = Duration::from_secs(300);
/// Argo's default `provider.datadog.requestTimeout`.
const DATADOG_TIMEOUT: Duration = Duration::from_secs(10);

/// One metric of a run, its arguments substituted and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisMetric {
    pub name: String,
    /// Where it is written, for messages.
    pub file: String,
    pub line: usize,
    pub interval: Option<Duration>,
    pub initial_delay: Option<Duration>,
    pub rules: MetricRules,
    pub source: MetricSource,
}

/// A template reference of a Rollout (`templates[]`): `templateName`, `clusterScope`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateRef {
    pub name: String,
    pub cluster: bool,
}

/// An argument a caller passes, already resolved to its text (a Rollout's `args[].value`, or
/// the value of its `valueFrom`: [`crate::metrics::analysis_run::pod_template_hash_arg`]).
pub type Arg = (String, String);

/// Why a run cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("{kind} {name} not found: no argoproj.io/v1alpha1 {kind} with that {} in the repo", if *.kind == CLUSTER { "name" } else { "namespace and name" })]
    NotFound { kind: &'static str, name: String },
    #[error("{kind} {name} is invalid: {}", first(.errors))]
    Invalid {
        kind: &'static str,
        name: String,
        errors: Vec<SpecError>,
    },
    #[error("{0}")]
    Resolve(SpecError),
    #[error("{}", first(.0))]
    Metrics(Vec<SpecError>),
}

#[derive(Debug, Clone, PartialEq)]
enum Entry {
    Valid(AnalysisTemplate),
    Invalid(Vec<SpecError>),
}

/// Every AnalysisTemplate and ClusterAnalysisTemplate of the repo.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnalysisIndex {
    /// By scope, namespace ("" for cluster templates) and name.
    entries: BTreeMap<(Scope, String, String), (String, usize, Entry)>,
}

/// A run: the metrics of its templates, merged, with the arguments substituted.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisRun {
    pub metrics: Vec<AnalysisMetric>,
    /// Arguments read from Secrets (in the Rollout's namespace) when measuring: (arg name,
    /// Secret name, key); their `{{args.NAME}}` stay in the metrics until then.
    pub secret_args: Vec<(String, String, String)>,
}

impl AnalysisIndex {
    /// Reads every template of the snapshot. Returns the index and every problem found.
    pub fn from_snapshot(snapshot: &Snapshot) -> (AnalysisIndex, Vec<SpecError>) {
        let mut index = AnalysisIndex::default();
        let mut errors = Vec::new();
        for file in snapshot.files() {
            if let Contents::Yaml { documents, .. } = &*file.contents {
                let mut r = Reader::new(file.name.as_str());
                for root in documents {
                    index.add(&mut r, root);
                }
                errors.extend(r.errors);
            }
        }
        (index, errors)
    }

    /// Reads every template in one file's text; `file` names it in errors.
    pub fn add_text(&mut self, file: &str, text: &str) -> Vec<SpecError> {
        let mut r = Reader::new(file);
        match crate::yaml::node::parse_documents(text) {
            Ok(docs) => {
                for d in docs {
                    self.add(&mut r, &d.root);
                }
            }
            Err(e) => r.error(e.line, "", format!("YAML syntax error: {}", e.message)),
        }
        r.errors
    }

    fn add(&mut self, r: &mut Reader, root: &Node) {
        let scope = match root.get("kind").and_then(Node::as_str) {
            Some(NAMESPACED) => Scope::Namespaced,
            Some(CLUSTER) => Scope::Cluster,
            _ => return,
        };
        let api = root.get("apiVersion");
        match api.and_then(Node::as_str) {
            Some(API_VERSION) => {}
            Some(other) if other.starts_with("argoproj.io/") => {
                r.error(
                    api.map_or(root.line, |n| n.line),
                    "apiVersion",
                    format!("expected {API_VERSION}, found {other:?}"),
                );
                return;
            }
            _ => return,
        }
        let before = r.errors.len();
        let Some((namespace, name, template)) = read_template(r, root, scope) else {
            return;
        };
        let errors = r.errors[before..].to_vec();
        let key = (scope, namespace.clone().unwrap_or_default(), name.clone());
        if let Some((file, line, _)) = self.entries.get(&key) {
            r.error(
                root.line,
                "metadata.name",
                format!(
                    "duplicate {} {name}: already defined at {file}:{line}",
                    kind(scope)
                ),
            );
            return;
        }
        let entry = match template {
            Some(t) if errors.is_empty() => Entry::Valid(t),
            _ => Entry::Invalid(errors),
        };
        self.entries.insert(key, (r.file.clone(), root.line, entry));
    }

    /// The template a reference names, from a Rollout in `namespace`.
    pub fn get(
        &self,
        namespace: &str,
        reference: &TemplateRef,
    ) -> Result<&AnalysisTemplate, RunError> {
        let (scope, ns) = if reference.cluster {
            (Scope::Cluster, String::new())
        } else {
            (Scope::Namespaced, namespace.to_string())
        };
        let shown = if reference.cluster {
            reference.name.clone()
        } else {
            format!("{namespace}/{}", reference.name)
        };
        match self.entries.get(&(scope, ns, reference.name.clone())) {
            Some((_, _, Entry::Valid(t))) => Ok(t),
            Some((_, _, Entry::Invalid(errors))) => Err(RunError::Invalid {
                kind: kind(scope),
                name: shown,
                errors: errors.clone(),
            }),
            None => Err(RunError::NotFound {
                kind: kind(scope),
                name: shown,
            }),
        }
    }

    /// The run a Rollout in `namespace` starts with `templates` and `args`, as Argo builds it:
    /// the templates' args and metrics merged (a metric name twice is refused), each
    /// `{{args.NAME}}` replaced by the caller's value, else the template's; an argument with
    /// neither is refused, as is a metric that reads wrong once substituted.
    pub fn run(
        &self,
        namespace: &str,
        templates: &[TemplateRef],
        args: &[Arg],
    ) -> Result<AnalysisRun, RunError> {
        let mut values: BTreeMap<String, String> = BTreeMap::new();
        let mut secret_args = Vec::new();
        let mut found = Vec::new();
        for reference in templates {
            let t = self.get(namespace, reference)?;
            for (name, default) in &t.args {
                let given = args.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
                match (given, default) {
                    (Some(v), _) => {
                        values.insert(name.clone(), v);
                    }
                    (None, ArgDefault::Value(v)) => {
                        values.insert(name.clone(), v.clone());
                    }
                    (None, ArgDefault::Secret { name: secret, key }) => {
                        secret_args.push((name.clone(), secret.clone(), key.clone()));
                    }
                    (None, ArgDefault::None) => {
                        return Err(RunError::Resolve(SpecError {
                            file: t.file.clone(),
                            line: t.line,
                            field: "spec.args".into(),
                            message: format!("args.{name} has no value: pass it in the Rollout's analysis args, or give it a value in the template"),
                        }))
                    }
                }
            }
            found.push(t);
        }
        let mut metrics = Vec::new();
        let mut errors = Vec::new();
        for t in found {
            let mut r = Reader::new(t.file.as_str());
            let substituted =
                substitute_node(&t.metrics, &values, &secret_args, &mut r, "spec.metrics");
            if let Some(node) = substituted {
                metrics.extend(read_metrics(&mut r, &node, true));
            }
            errors.extend(r.errors);
        }
        for (i, m) in metrics.iter().enumerate() {
            if let MetricSource::Job { template } = &m.source {
                let text = template.to_string();
                if let Some((arg, _, _)) = secret_args
                    .iter()
                    .find(|(a, _, _)| text.contains(&format!("args.{a}")))
                {
                    errors.push(SpecError {
                        file: m.file.clone(),
                        line: m.line,
                        field: "provider.job".into(),
                        message: format!("the Job uses args.{arg}, whose value is read from a Secret: sluice commits the Job to git and never writes a Secret's value there; read the Secret in the Job (env valueFrom.secretKeyRef)"),
                    });
                }
            }
            if metrics[..i].iter().any(|o| o.name == m.name) {
                errors.push(SpecError {
                    file: m.file.clone(),
                    line: m.line,
                    field: "spec.metrics".into(),
                    message: format!("two metrics are named {:?}: Argo refuses a run whose templates repeat a metric name", m.name),
                });
            }
        }
        if !errors.is_empty() {
            return Err(RunError::Metrics(errors));
        }
        Ok(AnalysisRun {
            metrics,
            secret_args,
        })
    }

    /// Number of templates found, valid or not.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn kind(scope: Scope) -> &'static str {
    match scope {
        Scope::Namespaced => NAMESPACED,
        Scope::Cluster => CLUSTER,
    }
}

fn read_template(
    r: &mut Reader,
    root: &Node,
    scope: Scope,
) -> Option<(Option<String>, String, Option<AnalysisTemplate>)> {
    r.map(root, "", OBJECT_KEYS)?;
    let meta = r.required(root, "", "metadata")?;
    r.map(meta, "metadata", METADATA_KEYS)?;
    let name = r
        .required(meta, "metadata", "name")
        .and_then(|n| name_at(r, n, "metadata.name"))?
        .to_string();
    let namespace = match (scope, meta.get("namespace")) {
        (Scope::Cluster, _) => None,
        (Scope::Namespaced, Some(n)) => Some(namespace_at(r, n, "metadata.namespace")?.to_string()),
        (Scope::Namespaced, None) => Some("default".to_string()),
    };
    let template = read_spec(r, root).map(|(args, metrics)| AnalysisTemplate {
        scope,
        name: name.clone(),
        namespace: namespace.clone(),
        file: r.file.clone(),
        line: root.line,
        args,
        metrics,
    });
    Some((namespace, name, template))
}

fn read_spec(r: &mut Reader, root: &Node) -> Option<(Vec<(String, ArgDefault)>, Node)> {
    let spec = r.required(root, "", "spec")?;
    r.map(
        spec,
        "spec",
        &["args", "metrics", "dryRun", "measurementRetention"],
    )?;
    if let Some(n) = spec.get("dryRun") {
        r.error(
            n.line,
            "spec.dryRun",
            "sluice does not run dry-run metrics: every metric it measures decides; remove the metric or its dryRun entry",
        );
    }
    if let Some(n) = spec.get("measurementRetention") {
        r.warn(
            n.line,
            "spec.measurementRetention",
            "ignored: sluice keeps each measurement in its commit's trailers, not in a status",
        );
    }
    let args = match spec.get("args") {
        Some(n) => read_args(r, n)?,
        None => Vec::new(),
    };
    let metrics = r.required(spec, "spec", "metrics")?;
    let before = r.errors.len();
    read_metrics(r, metrics, false);
    (r.errors.len() == before).then(|| (args, metrics.clone()))
}

fn read_args(r: &mut Reader, node: &Node) -> Option<Vec<(String, ArgDefault)>> {
    let items = r.seq(node, "spec.args")?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = index("spec.args", i);
        let Some(item) = r.map(item, &path, &["name", "value", "valueFrom"]) else {
            continue;
        };
        let Some(name) = r
            .required(item, &path, "name")
            .and_then(|n| r.string(n, &join(&path, "name")))
        else {
            continue;
        };
        let default = match (item.get("value"), item.get("valueFrom")) {
            (Some(v), None) => r.string(v, &join(&path, "value")).map(ArgDefault::Value),
            (None, Some(from)) => read_value_from(r, from, &join(&path, "valueFrom")),
            (None, None) => Some(ArgDefault::None),
            (Some(v), Some(_)) => {
                r.error(v.line, &path, "set value or valueFrom, not both");
                None
            }
        };
        if out.iter().any(|(n, _): &(String, ArgDefault)| *n == name) {
            r.error(
                item.line,
                &join(&path, "name"),
                format!("args.{name} is declared twice"),
            );
        }
        if let Some(d) = default {
            out.push((name, d));
        }
    }
    Some(out)
}

fn read_value_from(r: &mut Reader, from: &Node, path: &str) -> Option<ArgDefault> {
    let from = r.map(
        from,
        path,
        &["secretKeyRef", "fieldRef", "podTemplateHashValue"],
    )?;
    for key in ["fieldRef", "podTemplateHashValue"] {
        if let Some(n) = from.get(key) {
            r.error(
                n.line,
                &join(path, key),
                format!("{key} is set by the Rollout that runs the template (its analysis args), not in the template"),
            );
            return None;
        }
    }
    let secret = r.required(from, path, "secretKeyRef")?;
    let sp = join(path, "secretKeyRef");
    let secret = r.map(secret, &sp, &["name", "key"])?;
    let name = r
        .required(secret, &sp, "name")
        .and_then(|n| name_at(r, n, &join(&sp, "name")))?;
    let key = r
        .required(secret, &sp, "key")
        .and_then(|n| r.string(n, &join(&sp, "key")))?;
    Some(ArgDefault::Secret {
        name: name.to_string(),
        key,
    })
}

/// Whether a scalar still holds an argument placeholder (checked once arguments are known).
fn templated(node: &Node) -> bool {
    node.as_str().is_some_and(|t| t.contains("{{"))
}

/// `spec.metrics`; `resolved`: the arguments are substituted, so every field is checked.
fn read_metrics(r: &mut Reader, node: &Node, resolved: bool) -> Vec<AnalysisMetric> {
    let Some(items) = r.seq(node, "spec.metrics") else {
        return Vec::new();
    };
    if items.is_empty() {
        r.error(node.line, "spec.metrics", "expected at least one metric");
    }
    items
        .iter()
        .enumerate()
        .filter_map(|(i, m)| read_metric(r, m, &index("spec.metrics", i), resolved))
        .collect()
}

const METRIC_KEYS: &[&str] = &[
    "name",
    "interval",
    "initialDelay",
    "count",
    "successCondition",
    "failureCondition",
    "failureLimit",
    "inconclusiveLimit",
    "consecutiveErrorLimit",
    "consecutiveSuccessLimit",
    "provider",
];

fn read_metric(r: &mut Reader, m: &Node, path: &str, resolved: bool) -> Option<AnalysisMetric> {
    let m = r.map(m, path, METRIC_KEYS)?;
    let before = r.errors.len();
    let name = r
        .required(m, path, "name")
        .and_then(|n| r.string(n, &join(path, "name")));
    let field = |key: &str| m.get(key).filter(|n| resolved || !templated(n));
    let duration =
        |r: &mut Reader, key: &str| field(key).and_then(|n| r.duration(n, &join(path, key)));
    let interval = duration(r, "interval");
    let initial_delay = duration(r, "initialDelay");
    // Argo's counts and limits are IntOrString: "3" (what `{{args.runs}}` gives) is 3.
    let int = |r: &mut Reader, key: &str, min: i64| {
        field(key).and_then(|n| {
            let unquoted = match &n.value {
                Value::Scalar { text, quoted: true } if text.trim().parse::<i64>().is_ok() => {
                    Node {
                        value: Value::Scalar {
                            text: text.trim().to_string(),
                            quoted: false,
                        },
                        ..n.clone()
                    }
                }
                _ => n.clone(),
            };
            r.int(&unquoted, &join(path, key), min, i64::from(u32::MAX))
        })
    };
    let count = int(r, "count", 0).map(|n| n as u32);
    let failure_limit = int(r, "failureLimit", -1).unwrap_or(0);
    let inconclusive_limit = int(r, "inconclusiveLimit", 0).unwrap_or(0) as u32;
    let consecutive_error_limit =
        int(r, "consecutiveErrorLimit", 0).map_or(DEFAULT_CONSECUTIVE_ERROR_LIMIT, |n| n as u32);
    let consecutive_success_limit = int(r, "consecutiveSuccessLimit", 0).unwrap_or(0) as u32;
    let condition = |r: &mut Reader, key: &str| -> Option<argo_expr::Condition> {
        let n = field(key)?;
        let text = r.string(n, &join(path, key))?;
        match argo_expr::parse(&text) {
            Ok(c) => Some(c),
            Err(e) => {
                r.error(n.line, &join(path, key), format!("{e}: {text:?}: sluice evaluates the subset of Argo's expression language AnalysisTemplates use (see docs/rollouts.md)"));
                None
            }
        }
    };
    let success = condition(r, "successCondition");
    let failure = condition(r, "failureCondition");
    let source = r
        .required(m, path, "provider")
        .and_then(|p| read_provider(r, p, &join(path, "provider"), resolved));
    if r.errors.len() != before {
        return None;
    }
    Some(AnalysisMetric {
        name: name?,
        file: r.file.clone(),
        line: m.line,
        interval,
        initial_delay,
        rules: MetricRules {
            success,
            failure,
            count,
            has_interval: m.get("interval").is_some(),
            failure_limit,
            inconclusive_limit,
            consecutive_error_limit,
            consecutive_success_limit,
            interval,
            initial_delay,
        },
        source: source?,
    })
}

fn read_provider(r: &mut Reader, p: &Node, path: &str, resolved: bool) -> Option<MetricSource> {
    let Value::Map(entries) = &p.value else {
        r.error(
            p.line,
            path,
            format!("expected a mapping with one provider, found {}", p.kind()),
        );
        return None;
    };
    let [(key, node)] = entries.as_slice() else {
        r.error(
            p.line,
            path,
            format!("expected exactly one provider, found {}", entries.len()),
        );
        return None;
    };
    let pp = join(path, &key.text);
    let text = |r: &mut Reader, n: &Node, f: &str| r.string(n, &join(&pp, f));
    let address = |r: &mut Reader, n: &Node| read_address(r, n, &pp, resolved);
    match key.text.as_str() {
        "prometheus" => read_prometheus(r, node, &pp, resolved),
        "graphite" => {
            let n = r.map(node, &pp, &["address", "query"])?;
            let address = r.required(n, &pp, "address").and_then(|a| address(r, a));
            let query = r
                .required(n, &pp, "query")
                .and_then(|q| text(r, q, "query"));
            Some(MetricSource::Graphite {
                address: address?,
                query: query?,
            })
        }
        "datadog" => read_datadog(r, node, &pp),
        "job" => read_job(r, node, &pp),
        "web" => read_web(r, node, &pp, resolved),
        other => {
            let why = REFUSED_PROVIDERS
                .iter()
                .find(|(k, _)| *k == other)
                .map_or("Argo Rollouts has no such provider", |(_, why)| why);
            r.error(
                key.line,
                &pp,
                format!("provider {other:?} is not supported: {why}; sluice measures prometheus, graphite, datadog, job and web"),
            );
            None
        }
    }
}

/// What a job metric's Job is judged by: Complete is `1` and Failed `0` (the observation
/// `gates/analysis_job.rs` makes), so the recorded value replays to the same phase. Argo
/// judges a job metric by its Job's end alone; its conditions do not apply.
pub fn job_rules(written: &MetricRules) -> MetricRules {
    MetricRules {
        success: argo_expr::parse("result == 1").ok(),
        failure: None,
        ..written.clone()
    }
}

/// `provider.job` (at `pp`): `metadata` (only `labels` and `annotations`: sluice names the
/// Job) and `spec` with a pod `template`, which the cluster checks when it applies the Job.
/// A Job that needs the value of a Secret argument is refused by [`AnalysisIndex::run`]:
/// sluice would write the Secret's value into git.
fn read_job(r: &mut Reader, node: &Node, pp: &str) -> Option<MetricSource> {
    let n = r.map(node, pp, &["metadata", "spec"])?;
    let before = r.errors.len();
    if let Some(m) = n.get("metadata") {
        let mp = join(pp, "metadata");
        if let Some(m) = r.map(m, &mp, &["labels", "annotations"]) {
            for key in ["labels", "annotations"] {
                if let Some(entries) = m.get(key).filter(|e| !matches!(e.value, Value::Map(_))) {
                    let found = entries.kind();
                    r.error(
                        entries.line,
                        &join(&mp, key),
                        format!("expected a mapping, found {found}"),
                    );
                }
            }
        }
    }
    let spec = r.required(n, pp, "spec");
    if let Some(spec) = spec {
        let sp = join(pp, "spec");
        if !matches!(spec.value, Value::Map(_)) {
            r.error(
                spec.line,
                &sp,
                format!("expected a batch/v1 JobSpec mapping, found {}", spec.kind()),
            );
        } else if spec.get("template").is_none() {
            r.error(
                spec.line,
                &sp,
                "expected a template: the Job's pod template",
            );
        }
    }
    if r.errors.len() != before {
        return None;
    }
    Some(MetricSource::Job {
        template: node.to_json(),
    })
}

/// `provider.datadog` (at `pp`): `apiVersion: v1` (the default), `query`, `interval`,
/// `requestTimeout`, `secretRef`; v2's `queries`, `formula` and `aggregator` are refused.
fn read_datadog(r: &mut Reader, node: &Node, pp: &str) -> Option<MetricSource> {
    let keys = &[
        "apiVersion",
        "query",
        "queries",
        "formula",
        "aggregator",
        "interval",
        "requestTimeout",
        "secretRef",
    ];
    let n = r.map(node, pp, keys)?;
    let before = r.errors.len();
    if let Some(v) = n.get("apiVersion") {
        let version = r.string(v, &join(pp, "apiVersion"));
        if version.as_deref().is_some_and(|v| v != "v1") {
            r.error(v.line, &join(pp, "apiVersion"), format!("expected v1, found {:?}: sluice's Datadog client asks Datadog's /api/v1/query (v2's scalar queries and formulas are not in this build); write the query for v1", version.unwrap_or_default()));
        }
    }
    for key in ["queries", "formula", "aggregator"] {
        if let Some(line) = n.key_line(key) {
            r.error(line, &join(pp, key), "a Datadog v2 field: sluice asks Datadog's /api/v1/query with one query; write it as query");
        }
    }
    let query = r
        .required(n, pp, "query")
        .and_then(|q| r.string(q, &join(pp, "query")));
    let duration = |r: &mut Reader, key: &str, default: Duration| match n.get(key) {
        Some(d) => r.duration(d, &join(pp, key)),
        None => Some(default),
    };
    let interval = duration(r, "interval", DATADOG_INTERVAL);
    let timeout = duration(r, "requestTimeout", DATADOG_TIMEOUT);
    let secret = match n.get("secretRef") {
        None => Some(DATADOG_SECRET.to_string()),
        Some(s) => {
            let sp = join(pp, "secretRef");
            let s = r.map(s, &sp, &["name", "namespaced"])?;
            match s.get("name") {
                Some(name) => r.string(name, &join(&sp, "name")),
                None => Some(DATADOG_SECRET.to_string()),
            }
        }
    };
    if r.errors.len() != before {
        return None;
    }
    Some(MetricSource::Datadog {
        query: query?,
        interval: interval?,
        secret: secret?,
        timeout: timeout?,
    })
}

/// `provider.web` (at `pp`): `url`, `method`, `headers`, `body` or `jsonBody`,
/// `timeoutSeconds`, `insecure`, `jsonPath`; `authentication` (OAuth2) is refused.
fn read_web(r: &mut Reader, node: &Node, pp: &str, resolved: bool) -> Option<MetricSource> {
    use crate::metrics::web::{JsonPath, Method, WebRequest, DEFAULT_TIMEOUT};
    let keys = &[
        "url",
        "method",
        "headers",
        "body",
        "jsonBody",
        "timeoutSeconds",
        "insecure",
        "jsonPath",
        "authentication",
    ];
    let n = r.map(node, pp, keys)?;
    let before = r.errors.len();
    let field = |key: &str| n.get(key).filter(|v| resolved || !templated(v));
    if let Some(line) = n.key_line("authentication") {
        r.error(line, &join(pp, "authentication"), "sluice does not make OAuth2 requests for a web metric; pass a token through an argument with valueFrom.secretKeyRef and send it in a header");
    }
    let url = r.required(n, pp, "url").and_then(|u| {
        let text = r.string(u, &join(pp, "url"))?;
        let checked = !text.contains("{{");
        if checked && !(text.starts_with("http://") || text.starts_with("https://")) {
            r.error(
                u.line,
                &join(pp, "url"),
                format!("expected an http:// or https:// URL, found {text:?}"),
            );
            return None;
        }
        Some(text)
    });
    let method = match field("method") {
        None => Some(Method::Get),
        Some(m) => r.one_of(
            m,
            &join(pp, "method"),
            &[
                ("GET", Method::Get),
                ("POST", Method::Post),
                ("PUT", Method::Put),
            ],
        ),
    };
    let headers = n
        .get("headers")
        .map(|h| read_web_headers(r, h, &join(pp, "headers")))
        .unwrap_or_default();
    let body = read_web_body(r, n, pp, method);
    let timeout = field("timeoutSeconds")
        .and_then(|t| r.int(t, &join(pp, "timeoutSeconds"), 0, 3600))
        .map_or(DEFAULT_TIMEOUT, |s| match s {
            0 => DEFAULT_TIMEOUT,
            s => Duration::from_secs(s as u64),
        });
    let insecure = field("insecure")
        .and_then(|t| r.bool(t, &join(pp, "insecure")))
        .unwrap_or(false);
    let json_path = match field("jsonPath") {
        None => Some(JsonPath::default()),
        Some(p) => {
            let text = r.string(p, &join(pp, "jsonPath"))?;
            match JsonPath::parse(&text) {
                Ok(path) => Some(path),
                Err(e) => {
                    r.error(p.line, &join(pp, "jsonPath"), e);
                    None
                }
            }
        }
    };
    if r.errors.len() != before {
        return None;
    }
    Some(MetricSource::Web(WebRequest {
        url: url?,
        method: method?,
        headers,
        body,
        timeout,
        insecure,
        json_path: json_path?,
    }))
}

/// A web metric's `body` or `jsonBody` (as JSON text), which Argo sends only with POST or PUT.
fn read_web_body(
    r: &mut Reader,
    n: &Node,
    pp: &str,
    method: Option<crate::metrics::web::Method>,
) -> Option<crate::metrics::web::Body> {
    use crate::metrics::web::{Body, Method};
    let body = match (n.get("body"), n.get("jsonBody")) {
        (Some(b), Some(_)) => {
            r.error(
                b.line,
                &join(pp, "body"),
                "use either body or jsonBody, as Argo refuses both",
            );
            None
        }
        (Some(b), None) => r.string(b, &join(pp, "body")).map(Body::Text),
        (None, Some(j)) => Some(Body::Json(j.to_json().to_string())),
        (None, None) => None,
    };
    if let (Some(Method::Get), Some(_)) = (method, &body) {
        let key = if n.get("body").is_some() {
            "body"
        } else {
            "jsonBody"
        };
        r.error(
            n.key_line(key).unwrap_or(n.line),
            &join(pp, key),
            "a body is sent only with method POST or PUT, as Argo requires",
        );
    }
    body
}

/// A web metric's `headers[]`: `key` and `value`, as Argo's; a Secret reaches a header only
/// through an argument (`value: "Bearer {{args.token}}"`), so `valueFrom` is refused here.
fn read_web_headers(r: &mut Reader, node: &Node, path: &str) -> Vec<(String, String)> {
    if let Value::Seq(items) = &node.value {
        let mut refused = false;
        for (i, h) in items.iter().enumerate() {
            if let Some(line) = h.key_line("valueFrom") {
                r.error(line, &join(&index(path, i), "valueFrom"), "Argo's web headers take a value only: declare an argument with valueFrom.secretKeyRef in spec.args and write value: \"{{args.<name>}}\"");
                refused = true;
            }
        }
        if refused {
            return Vec::new();
        }
    }
    read_headers(r, node, path)
}

/// A provider's `address`: an http(s) URL (checked once its arguments are substituted).
fn read_address(r: &mut Reader, n: &Node, pp: &str, resolved: bool) -> Option<String> {
    let a = r.string(n, &join(pp, "address"))?;
    if (resolved || !a.contains("{{")) && !(a.starts_with("http://") || a.starts_with("https://")) {
        r.error(
            n.line,
            &join(pp, "address"),
            format!("expected an http:// or https:// URL, found {a:?}"),
        );
        return None;
    }
    Some(a)
}

/// `provider.prometheus` (at `pp`).
fn read_prometheus(r: &mut Reader, node: &Node, pp: &str, resolved: bool) -> Option<MetricSource> {
    let pp = pp.to_string();
    let text = |r: &mut Reader, n: &Node, f: &str| r.string(n, &join(&pp, f));
    let address = |r: &mut Reader, n: &Node| read_address(r, n, &pp, resolved);
    let n = r.map(
        node,
        &pp,
        &[
            "address",
            "query",
            "timeout",
            "insecure",
            "headers",
            "authentication",
        ],
    )?;
    if let Some(line) = n
        .get("authentication")
        .map(|a| n.key_line("authentication").unwrap_or(a.line))
    {
        r.error(
                line,
                &join(&pp, "authentication"),
                "sluice does not make sigv4 or oauth2 requests: it sends the operator's Prometheus credentials (SLUICE_PROMETHEUS_*) to the addresses the operator allows; remove authentication",
            );
    }
    let address = n.get("address").and_then(|a| address(r, a));
    let query = r
        .required(n, &pp, "query")
        .and_then(|q| text(r, q, "query"));
    let timeout = n
        .get("timeout")
        .filter(|t| resolved || !templated(t))
        .and_then(|t| r.int(t, &join(&pp, "timeout"), 1, 3600))
        .map(|s| Duration::from_secs(s as u64));
    let insecure = n
        .get("insecure")
        .filter(|t| resolved || !templated(t))
        .and_then(|t| r.bool(t, &join(&pp, "insecure")))
        .unwrap_or(false);
    let headers = n
        .get("headers")
        .map(|h| read_headers(r, h, &join(&pp, "headers")))
        .unwrap_or_default();
    Some(MetricSource::Prometheus {
        address,
        query: query?,
        timeout,
        insecure,
        headers,
    })
}

/// `headers: [{key, value}]`.
fn read_headers(r: &mut Reader, node: &Node, path: &str) -> Vec<(String, String)> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, h) in items.iter().enumerate() {
        let hp = index(path, i);
        let Some(h) = r.map(h, &hp, &["key", "value"]) else {
            continue;
        };
        let key = r
            .required(h, &hp, "key")
            .and_then(|k| r.string(k, &join(&hp, "key")));
        let value = r
            .required(h, &hp, "value")
            .and_then(|v| r.string(v, &join(&hp, "value")));
        if let (Some(k), Some(v)) = (key, value) {
            if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err() {
                r.error(
                    h.line,
                    &join(&hp, "key"),
                    format!("expected a valid HTTP header name, found {k:?}"),
                );
                continue;
            }
            out.push((k, v));
        }
    }
    out
}

/// `node` with every `{{args.NAME}}` in its strings replaced, as Argo resolves a run's
/// arguments. A Secret-valued argument stays a placeholder (`{{args.NAME}}`) until the
/// measurement reads it; any other unknown `{{args.NAME}}` is reported where it stands.
fn substitute_node(
    node: &Node,
    values: &BTreeMap<String, String>,
    secret_args: &[(String, String, String)],
    r: &mut Reader,
    path: &str,
) -> Option<Node> {
    let value = match &node.value {
        Value::Scalar { text, quoted } => match substitute(text, values, secret_args) {
            Ok(text) => Value::Scalar {
                text,
                quoted: *quoted,
            },
            Err(e) => {
                r.error(node.line, path, e);
                return None;
            }
        },
        Value::Seq(items) => Value::Seq(
            items
                .iter()
                .enumerate()
                .map(|(i, n)| substitute_node(n, values, secret_args, r, &index(path, i)))
                .collect::<Option<Vec<_>>>()?,
        ),
        Value::Map(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, n)| {
                    Some((
                        k.clone(),
                        substitute_node(n, values, secret_args, r, &join(path, &k.text))?,
                    ))
                })
                .collect::<Option<Vec<_>>>()?,
        ),
        Value::Null => Value::Null,
    };
    Some(Node {
        line: node.line,
        value,
    })
}

/// `text` with each `{{args.NAME}}` replaced by its value; Secret-valued ones kept.
pub(crate) fn substitute(
    text: &str,
    values: &BTreeMap<String, String>,
    kept: &[(String, String, String)],
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let tag = after[..end].trim();
        match tag.strip_prefix("args.") {
            Some(name) => match values.get(name) {
                Some(v) => out.push_str(v),
                None if kept.iter().any(|(n, _, _)| n == name) => out.push_str(&rest[start..start + 2 + end + 2]),
                None => return Err(format!("failed to resolve {{{{{tag}}}}}: the run has no argument {name:?}; declare it in spec.args")),
            },
            None => out.push_str(&rest[start..start + 2 + end + 2]),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_metric_is_judged_by_its_end_alone() {
        use sluice_core::argo_analysis::{measure, Answer, Phase};
        use sluice_core::argo_expr::Value;
        let written = MetricRules {
            success: argo_expr::parse("result[0] > 5").ok(),
            failure: argo_expr::parse("result[0] < 1").ok(),
            count: None,
            has_interval: false,
            failure_limit: 0,
            inconclusive_limit: 0,
            consecutive_error_limit: 4,
            consecutive_success_limit: 0,
            interval: None,
            initial_delay: None,
        };
        let r = job_rules(&written);
        let phase = |n: f64| measure(&r, &Answer::Value(Value::Number(n))).phase;
        assert_eq!(phase(1.0), Phase::Successful);
        assert_eq!(phase(0.0), Phase::Failed);
    }

    /// Argo's `count` and limits are IntOrString: an argument's text such as "3" counts.
    #[test]
    fn a_count_from_an_argument_is_a_number() {
        let text = "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: w, namespace: prod}
spec:
  args: [{name: runs}, {name: limit}]
  metrics:
  - name: m
    count: \"{{args.runs}}\"
    failureLimit: \"{{args.limit}}\"
    interval: 5s
    provider:
      web: {url: http://status.example/}
";
        let mut index = AnalysisIndex::default();
        assert_eq!(index.add_text("w.yaml", text), vec![]);
        let reference = TemplateRef {
            name: "w".into(),
            cluster: false,
        };
        let run = index
            .run(
                "prod",
                std::slice::from_ref(&reference),
                &[("runs".into(), "3".into()), ("limit".into(), "1".into())],
            )
            .unwrap();
        assert_eq!(
            (
                run.metrics[0].rules.count,
                run.metrics[0].rules.failure_limit
            ),
            (Some(3), 1)
        );
        assert!(index
            .run(
                "prod",
                &[reference],
                &[
                    ("runs".into(), "three".into()),
                    ("limit".into(), "1".into())
                ]
            )
            .is_err());
    }

    const TEMPLATE: &str = "\
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: success-rate
  namespace: prod
spec:
  args:
  - name: service-name
  - name: threshold
    value: \"0.95\"
  metrics:
  - name: success-rate
    interval: 1m
    count: \"{{args.count}}\"
    successCondition: result[0] >= {{args.threshold}}
    failureLimit: 2
    provider:
      prometheus:
        address: http://prometheus:9090
        query: sum(rate(http_requests_total{service=\"{{args.service-name}}\",code!~\"5..\"}[1m]))
  - name: errors
    failureCondition: len(result) > 0 && result[0] > 1
    provider:
      graphite:
        address: http://graphite:8080
        query: errors.{{args.service-name}}
";

    fn reference(name: &str) -> TemplateRef {
        TemplateRef {
            name: name.into(),
            cluster: false,
        }
    }

    fn arg(name: &str, value: &str) -> Arg {
        (name.into(), value.into())
    }

    #[test]
    fn a_template_resolves_with_its_arguments_as_argo_does() {
        let mut index = AnalysisIndex::default();
        let text = TEMPLATE.replace("count: \"{{args.count}}\"", "count: 3");
        assert_eq!(index.add_text("t.yaml", &text), vec![]);
        let run = index
            .run(
                "prod",
                &[reference("success-rate")],
                &[arg("service-name", "api")],
            )
            .unwrap();
        let m = &run.metrics[0];
        assert_eq!(m.rules.count, Some(3));
        assert_eq!(m.rules.failure_limit, 2);
        assert_eq!(m.interval, Some(Duration::from_secs(60)));
        assert_eq!((m.file.as_str(), m.line), ("t.yaml", 12));
        let MetricSource::Prometheus { query, address, .. } = &m.source else {
            panic!()
        };
        assert!(query.contains("service=\"api\""), "{query}");
        assert_eq!(address.as_deref(), Some("http://prometheus:9090"));
        assert_eq!(
            m.rules.success,
            Some(argo_expr::parse("result[0] >= 0.95").unwrap())
        );
        assert_eq!(
            run.metrics[1].source,
            MetricSource::Graphite {
                address: "http://graphite:8080".into(),
                query: "errors.api".into()
            }
        );
        // A value the Rollout passes wins over the template's.
        let run = index
            .run(
                "prod",
                &[reference("success-rate")],
                &[arg("service-name", "api"), arg("threshold", "0.5")],
            )
            .unwrap();
        assert_eq!(
            run.metrics[0].rules.success,
            Some(argo_expr::parse("result[0] >= 0.5").unwrap())
        );
    }

    #[test]
    fn missing_arguments_and_bad_substituted_fields_are_refused() {
        let mut index = AnalysisIndex::default();
        assert_eq!(index.add_text("t.yaml", TEMPLATE), vec![]);
        let e = index
            .run("prod", &[reference("success-rate")], &[])
            .unwrap_err();
        assert!(
            e.to_string().contains("args.service-name has no value"),
            "{e}"
        );
        let e = index
            .run(
                "prod",
                &[reference("success-rate")],
                &[arg("service-name", "api")],
            )
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("t.yaml:14: spec.metrics[0].count: failed to resolve {{args.count}}"),
            "{e}"
        );
        let e = index
            .run(
                "prod",
                &[reference("success-rate")],
                &[arg("service-name", "api"), arg("count", "many")],
            )
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t.yaml:14: spec.metrics[0].count:"),
            "{e}"
        );
        let e = index
            .run("other", &[reference("success-rate")], &[])
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("AnalysisTemplate other/success-rate not found"),
            "{e}"
        );
    }

    #[test]
    fn unsupported_providers_conditions_and_fields_are_refused_at_their_lines() {
        let text = "\
apiVersion: argoproj.io/v1alpha1
kind: ClusterAnalysisTemplate
metadata:
  name: checks
spec:
  args:
  - name: key
    valueFrom:
      podTemplateHashValue: Stable
  metrics:
  - name: a
    successCondition: \"result[0] >= 0.9 ? true : false\"
    provider:
      kayenta:
        address: http://kayenta
  - name: b
    provider:
      job:
        spec: {}
  - name: c
    provider:
      prometheus:
        query: up
        authentication:
          sigv4:
            region: us-east-1
";
        let mut index = AnalysisIndex::default();
        let errors: Vec<String> = index
            .add_text("c.yaml", text)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(errors[0].starts_with("c.yaml:9: spec.args[0].valueFrom.podTemplateHashValue: podTemplateHashValue is set by the Rollout"), "{errors:?}");
        assert!(
            errors[1].starts_with("c.yaml:12: spec.metrics[0].successCondition: column 18: "),
            "{errors:?}"
        );
        assert!(errors[2].starts_with("c.yaml:14: spec.metrics[0].provider.kayenta: provider \"kayenta\" is not supported: Kayenta"), "{errors:?}");
        assert!(
            errors[3]
                .starts_with("c.yaml:19: spec.metrics[1].provider.job.spec: expected a template"),
            "{errors:?}"
        );
        assert!(errors[4].starts_with("c.yaml:24: spec.metrics[2].provider.prometheus.authentication: sluice does not make sigv4"), "{errors:?}");
        assert_eq!(errors.len(), 5, "{errors:?}");
        let e = index
            .run(
                "any",
                &[TemplateRef {
                    name: "checks".into(),
                    cluster: true,
                }],
                &[],
            )
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("ClusterAnalysisTemplate checks is invalid: c.yaml:9:"),
            "{e}"
        );
    }

    #[test]
    fn substitution_keeps_secret_placeholders_and_other_tags() {
        let values = BTreeMap::from([("a".to_string(), "1".to_string())]);
        let kept = [("s".to_string(), "sec".to_string(), "k".to_string())];
        assert_eq!(
            substitute("{{args.a}}-{{ args.s }}-{{other}}", &values, &kept).unwrap(),
            "1-{{ args.s }}-{{other}}"
        );
        assert!(substitute("{{args.b}}", &values, &kept)
            .unwrap_err()
            .contains("no argument \"b\""));
        assert_eq!(substitute("{{args.a", &values, &kept).unwrap(), "{{args.a");
    }
}
