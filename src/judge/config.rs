//! The judge's settings as YAML holds them: the spec of a `sluice.dev/v1alpha1` `Judge` object
//! (also the file `sluice judge --config` reads) into validated [`JudgeSpec`] values, every
//! problem an error at its file, line and field.
//!
//! ```yaml
//! thresholds: {pass: 95, marginal: 75}
//! window: 5m            # optional: the span of the series (default: the step's interval)
//! step: 5s              # optional: the range query's resolution (61 values over 5m)
//! minSamples: 50        # optional: values each series needs before its metric may pass
//! groups: {latency: 60} # optional weights; groups without one share what is left of 100
//! metrics:
//!   - name: request-duration
//!     query: 'histogram_quantile(0.99, ... {deployment="{{ workload }}"} ...)'
//!     # or: builtin: request-duration (the canary's mesh or ingress query, in ms)
//!     # or: templateRef: {name: latency, namespace: prod} (a Flagger MetricTemplate)
//!     direction: increase        # increase | decrease | either (default; a builtin's own)
//!     group: latency             # default: "default"
//!     critical: false
//!     mustHaveData: false
//!     muted: false
//!     nanStrategy: remove        # remove (default) | replace
//!     outliers: keep             # keep (default) | remove
//!     outlierFactor: 3
//!     effectSize: {measure: meanRatio, allowedIncrease: 1.1, criticalIncrease: 2}
//! ```

use sluice_core::judge::config::{most_values, step_for, DEFAULT_MIN_SAMPLES, MAX_POINTS};
use sluice_core::judge::{
    Direction, EffectMeasure, EffectSize, JudgeQuery, MetricRule, NanStrategy, Outliers, Thresholds,
};
use sluice_core::model::BuiltinMetric;

use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{
    index, join, namespace_at, short_name, Reader, METADATA_KEYS, OBJECT_KEYS,
};

/// The API version and kind of a `Judge` object.
pub const API_VERSION: &str = "sluice.dev/v1alpha1";
pub const KIND: &str = "Judge";

pub use sluice_core::judge::config::{JudgeMetric, JudgeSpec, DEFAULT_GROUP};

const SPEC_KEYS: &[&str] = &[
    "thresholds",
    "window",
    "step",
    "minSamples",
    "groups",
    "metrics",
];
const METRIC_KEYS: &[&str] = &[
    "name",
    "query",
    "builtin",
    "templateRef",
    "direction",
    "group",
    "critical",
    "mustHaveData",
    "muted",
    "nanStrategy",
    "outliers",
    "outlierFactor",
    "effectSize",
];
const EFFECT_KEYS: &[&str] = &[
    "measure",
    "allowedIncrease",
    "allowedDecrease",
    "criticalIncrease",
    "criticalDecrease",
];

/// A `Judge` object: its name and validated spec.
pub fn read_object(r: &mut Reader, root: &Node) -> Option<(String, JudgeSpec)> {
    r.map(root, "", OBJECT_KEYS)?;
    if let Some(v) = r.required(root, "", "apiVersion") {
        if v.as_str() != Some(API_VERSION) {
            r.error(v.line, "apiVersion", format!("expected {API_VERSION}"));
        }
    }
    let meta = r.required(root, "", "metadata")?;
    r.map(meta, "metadata", METADATA_KEYS)?;
    let name = r
        .required(meta, "metadata", "name")
        .and_then(|n| short_name(r, n, "metadata.name"));
    let spec = r
        .required(root, "", "spec")
        .and_then(|s| read_spec(r, s, "spec"));
    Some((name?, spec?))
}

/// A judge's settings at `path` (a `Judge`'s `spec`, or a native canary's `analysis.judge`).
pub fn read_spec(r: &mut Reader, node: &Node, path: &str) -> Option<JudgeSpec> {
    r.map(node, path, SPEC_KEYS)?;
    let errors_before = r.errors.len();
    let thresholds = read_thresholds(r, node, path);
    let window = node
        .get("window")
        .and_then(|n| r.duration(n, &join(path, "window")));
    let step = node
        .get("step")
        .and_then(|n| r.duration(n, &join(path, "step")));
    if let (Some(s), Some(line)) = (step, node.key_line("step")) {
        if s.is_zero() {
            r.error(line, &join(path, "step"), "expected more than 0s");
        }
    }
    let min_samples = read_min_samples(r, node, path, window, step);
    let group_weights = read_weights(r, node, path);
    let metrics = read_metrics(r, node, path);
    check_groups(r, node, path, &group_weights, &metrics);
    if r.errors.len() > errors_before {
        return None;
    }
    Some(JudgeSpec {
        metrics,
        group_weights,
        thresholds: thresholds?,
        window,
        step,
        min_samples: min_samples?,
    })
}

/// `minSamples` (default [`DEFAULT_MIN_SAMPLES`]): at least 1, at most the values a series
/// can hold. With a `window`, the series it gives at the step (`step`, or the one the judge
/// chooses) must be able to hold that many, else no metric could ever pass: an error at the
/// field that makes it so.
fn read_min_samples(
    r: &mut Reader,
    node: &Node,
    path: &str,
    window: Option<std::time::Duration>,
    step: Option<std::time::Duration>,
) -> Option<usize> {
    let at = join(path, "minSamples");
    let min_samples = match node.get("minSamples") {
        Some(n) => {
            let v = r.int(n, &at, 1, i64::from(MAX_POINTS))?;
            usize::try_from(v).ok()?
        }
        None => DEFAULT_MIN_SAMPLES,
    };
    let Some(window) = window else {
        return Some(min_samples);
    };
    let chosen = step_for(window, step, min_samples);
    let Some(most) = most_values(window, chosen) else {
        return Some(min_samples);
    };
    if most < min_samples as u128 {
        let (line, field) = match (node.key_line("minSamples"), node.key_line("step")) {
            (Some(line), _) => (line, at),
            (None, Some(line)) => (line, join(path, "step")),
            (None, None) => (
                node.key_line("window").unwrap_or(node.line),
                join(path, "window"),
            ),
        };
        let given = if node.get("minSamples").is_some() {
            "minSamples"
        } else {
            "minSamples (default)"
        };
        r.error(
            line,
            &field,
            format!(
                "window {} at step {} gives at most {most} values per series, fewer than the \
                 {min_samples} of {given}: no metric could pass; set a longer window, a finer \
                 step or a lower minSamples",
                humantime(window),
                humantime(chosen)
            ),
        );
        return None;
    }
    Some(min_samples)
}

/// A duration as the settings write it: `10s`, `1500ms`.
fn humantime(d: std::time::Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn read_thresholds(r: &mut Reader, node: &Node, spec_path: &str) -> Option<Thresholds> {
    let path = join(spec_path, "thresholds");
    let t = r.required(node, spec_path, "thresholds")?;
    r.map(t, &path, &["pass", "marginal"])?;
    let pass = r
        .required(t, &path, "pass")
        .and_then(|n| score_at(r, n, &join(&path, "pass")));
    let marginal = r
        .required(t, &path, "marginal")
        .and_then(|n| score_at(r, n, &join(&path, "marginal")));
    let (pass, marginal) = (pass?, marginal?);
    if marginal > pass {
        r.error(
            t.line,
            &join(&path, "marginal"),
            format!("expected at most pass ({pass}), found {marginal}"),
        );
        return None;
    }
    Some(Thresholds { pass, marginal })
}

/// A score threshold: a number in 0..=100.
fn score_at(r: &mut Reader, node: &Node, path: &str) -> Option<f64> {
    let v = r.float(node, path)?;
    if !(0.0..=100.0).contains(&v) {
        r.error(node.line, path, format!("expected 0..=100, found {v}"));
        return None;
    }
    Some(v)
}

fn read_weights(r: &mut Reader, node: &Node, path: &str) -> Vec<(String, f64)> {
    let path = join(path, "groups");
    let Some(groups) = node.get("groups") else {
        return Vec::new();
    };
    let Value::Map(entries) = &groups.value else {
        r.error(
            groups.line,
            &path,
            format!(
                "expected a mapping of group names to weights, found {}",
                groups.kind()
            ),
        );
        return Vec::new();
    };
    let mut weights = Vec::new();
    for (key, value) in entries {
        if let Some(w) = score_at(r, value, &join(&path, &key.text)) {
            weights.push((key.text.clone(), w));
        }
    }
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    if total > 100.0 {
        r.error(
            groups.line,
            &path,
            format!("expected weights summing to at most 100, found {total}"),
        );
    }
    weights
}

fn read_metrics(r: &mut Reader, node: &Node, spec_path: &str) -> Vec<JudgeMetric> {
    let path = join(spec_path, "metrics");
    let Some(items) = r
        .required(node, spec_path, "metrics")
        .and_then(|n| r.seq(n, &path))
    else {
        return Vec::new();
    };
    if items.is_empty() {
        r.error(
            node.key_line("metrics").unwrap_or(node.line),
            &path,
            "expected at least one metric",
        );
    }
    let mut metrics: Vec<JudgeMetric> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = index(&path, i);
        let Some(metric) = read_metric(r, item, &at) else {
            continue;
        };
        if metrics.iter().any(|m| m.name == metric.name) {
            r.error(
                item.line,
                &join(&at, "name"),
                format!("duplicate metric {:?}", metric.name),
            );
        }
        metrics.push(metric);
    }
    metrics
}

fn read_metric(r: &mut Reader, item: &Node, path: &str) -> Option<JudgeMetric> {
    r.map(item, path, METRIC_KEYS)?;
    let name = r
        .required(item, path, "name")
        .and_then(|n| short_name(r, n, &join(path, "name")));
    let flag = |r: &mut Reader, key: &str| {
        item.get(key)
            .and_then(|n| r.bool(n, &join(path, key)))
            .unwrap_or(false)
    };
    let (critical, must_have_data, muted) = (
        flag(r, "critical"),
        flag(r, "mustHaveData"),
        flag(r, "muted"),
    );
    let text =
        |r: &mut Reader, key: &str| item.get(key).and_then(|n| r.string(n, &join(path, key)));
    let query = read_query(r, item, path);
    let group = text(r, "group").unwrap_or_else(|| DEFAULT_GROUP.to_string());
    let direction = match item.get("direction") {
        Some(n) => r.one_of(
            n,
            &join(path, "direction"),
            &[
                ("increase", Direction::Increase),
                ("decrease", Direction::Decrease),
                ("either", Direction::Either),
            ],
        ),
        None => Some(default_direction(query.as_ref().and_then(Option::as_ref))),
    };
    let nan_strategy = choice(
        r,
        item,
        path,
        "nanStrategy",
        &[
            ("remove", NanStrategy::Remove),
            ("replace", NanStrategy::Replace),
        ],
    );
    let outliers = read_outliers(r, item, path);
    let effect_size = read_effect_size(r, item, path);
    Some(JudgeMetric {
        name: name?,
        query: query?,
        group,
        muted,
        rule: MetricRule {
            direction: direction?,
            critical,
            must_have_data,
            nan_strategy: nan_strategy?,
            outliers: outliers?,
            effect_size: effect_size?,
            ..MetricRule::default()
        },
    })
}

/// The built-in judge metrics and their names.
pub const BUILTINS: &[(&str, BuiltinMetric)] = &[
    ("request-success-rate", BuiltinMetric::RequestSuccessRate),
    ("request-duration", BuiltinMetric::RequestDuration),
];

/// A metric's source: one of `query`, `builtin` and `templateRef`, or none (`sluice judge`
/// reads series from files; the loop asks for one). `None` when it has errors (reported).
fn read_query(r: &mut Reader, item: &Node, path: &str) -> Option<Option<JudgeQuery>> {
    let given: Vec<&str> = ["query", "builtin", "templateRef"]
        .into_iter()
        .filter(|k| item.get(k).is_some())
        .collect();
    if given.len() > 1 {
        let line = item.key_line(given[1]).unwrap_or(item.line);
        r.error(
            line,
            &join(path, given[1]),
            format!(
                "expected one of query, builtin and templateRef, found {}",
                given.join(" and ")
            ),
        );
        return None;
    }
    if let Some(n) = item.get("query") {
        return r
            .string(n, &join(path, "query"))
            .map(|q| Some(JudgeQuery::Promql(q)));
    }
    if let Some(n) = item.get("builtin") {
        return r
            .one_of(n, &join(path, "builtin"), BUILTINS)
            .map(|b| Some(JudgeQuery::Builtin(b)));
    }
    let Some(n) = item.get("templateRef") else {
        return Some(None);
    };
    let at = join(path, "templateRef");
    r.map(n, &at, &["name", "namespace"])?;
    let name = r
        .required(n, &at, "name")
        .and_then(|v| short_name(r, v, &join(&at, "name")));
    let namespace = n
        .get("namespace")
        .and_then(|v| namespace_at(r, v, &join(&at, "namespace")))
        .map(|ns| ns.as_str().to_string());
    Some(Some(JudgeQuery::Template {
        name: name?,
        namespace,
    }))
}

/// The direction of a metric that names none: a built-in success rate is only bad when it
/// falls, a built-in duration only when it rises; anything else is judged both ways.
fn default_direction(query: Option<&JudgeQuery>) -> Direction {
    match query {
        Some(JudgeQuery::Builtin(BuiltinMetric::RequestSuccessRate)) => Direction::Decrease,
        Some(JudgeQuery::Builtin(BuiltinMetric::RequestDuration)) => Direction::Increase,
        _ => Direction::default(),
    }
}

/// An enumerated field; its default (the choice of `T::default()`) when absent.
fn choice<T: Copy + Default>(
    r: &mut Reader,
    item: &Node,
    path: &str,
    key: &str,
    choices: &[(&str, T)],
) -> Option<T> {
    match item.get(key) {
        Some(n) => r.one_of(n, &join(path, key), choices),
        None => Some(T::default()),
    }
}

fn read_outliers(r: &mut Reader, item: &Node, path: &str) -> Option<Outliers> {
    let remove = choice(
        r,
        item,
        path,
        "outliers",
        &[("keep", false), ("remove", true)],
    )?;
    let factor = match item.get("outlierFactor") {
        Some(n) => positive(r, n, &join(path, "outlierFactor"))?,
        None => 3.0,
    };
    Some(if remove {
        Outliers::Remove { factor }
    } else {
        Outliers::Keep
    })
}

fn read_effect_size(r: &mut Reader, item: &Node, path: &str) -> Option<EffectSize> {
    let Some(node) = item.get("effectSize") else {
        return Some(EffectSize::default());
    };
    let path = join(path, "effectSize");
    r.map(node, &path, EFFECT_KEYS)?;
    let measure = choice(
        r,
        node,
        &path,
        "measure",
        &[
            ("meanRatio", EffectMeasure::MeanRatio),
            ("cles", EffectMeasure::Cles),
        ],
    )?;
    let neutral = EffectSize::neutral(measure);
    let mut value = |key: &str, default: f64| match node.get(key) {
        Some(n) => positive(r, n, &join(&path, key)),
        None => Some(default),
    };
    Some(EffectSize {
        measure,
        allowed_increase: value("allowedIncrease", neutral.allowed_increase)?,
        allowed_decrease: value("allowedDecrease", neutral.allowed_decrease)?,
        critical_increase: value("criticalIncrease", neutral.critical_increase)?,
        critical_decrease: value("criticalDecrease", neutral.critical_decrease)?,
    })
}

fn positive(r: &mut Reader, node: &Node, path: &str) -> Option<f64> {
    let v = r.float(node, path)?;
    if v <= 0.0 {
        r.error(
            node.line,
            path,
            format!("expected a number above 0, found {v}"),
        );
        return None;
    }
    Some(v)
}

/// A weighted group no metric belongs to is a typo the score would hide.
fn check_groups(
    r: &mut Reader,
    node: &Node,
    path: &str,
    weights: &[(String, f64)],
    metrics: &[JudgeMetric],
) {
    let Some(groups) = node.get("groups") else {
        return;
    };
    for (group, _) in weights {
        if !metrics.is_empty() && !metrics.iter().any(|m| &m.group == group) {
            let line = groups.key_line(group).unwrap_or(groups.line);
            r.error(
                line,
                &join(&join(path, "groups"), group),
                "no metric is in this group",
            );
        }
    }
}
