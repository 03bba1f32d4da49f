//! Reads `spec.analysis` (shared by the native and Flagger formats) into [`Analysis`].
//!
//! The two formats differ only in the weight arithmetic (Flagger's quirks vs. never passing
//! maxWeight) and in native-only fields (`steps`, `approvals`, inline `query`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::schedule::{
    flagger_step_weight, flagger_step_weights, native_step_weight, Pause, Step,
};
use crate::spec::alert_provider;
use crate::spec::model::{
    Analysis, Approvals, BuiltinMetric, Format, MetricQuery, MetricSpec, Name, SessionAffinity,
    Strategy, ThresholdRange, WebhookKind, WebhookSpec,
};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};
use crate::yaml::snapshot::Snapshot;

/// A confirm-* webhook URL that asks for a git approval (pull request or `sluice approve`)
/// instead of an HTTP call.
pub const GIT_APPROVAL_URL: &str = "sluice:approval";

/// Flagger's analysis interval when `interval` is unset (`AnalysisInterval` in
/// `pkg/apis/flagger/v1beta1/canary.go`); sluice uses it for native canaries too.
pub const FLAGGER_ANALYSIS_INTERVAL: Duration = Duration::from_secs(60);

/// The shortest analysis interval Flagger runs (`GetAnalysisInterval` in
/// `pkg/apis/flagger/v1beta1/canary.go`: `if interval < 10*time.Second { return 10s }`).
pub const FLAGGER_MIN_ANALYSIS_INTERVAL: Duration = Duration::from_secs(10);

/// Flagger's default percentage of ready pods for the primary and the canary
/// (`PrimaryReadyThreshold` and `CanaryReadyThreshold` = 100 in
/// `pkg/apis/flagger/v1beta1/canary.go`, returned by `GetAnalysisPrimaryReadyThreshold` and
/// `GetAnalysisCanaryReadyThreshold` when unset).
pub const FLAGGER_READY_THRESHOLD_PERCENT: u8 = 100;

const FLAGGER_KEYS: &[&str] = &[
    "alerts",
    "canaryReadyThreshold",
    "interval",
    "iterations",
    "match",
    "maxWeight",
    "metrics",
    "mirror",
    "mirrorWeight",
    "primaryReadyThreshold",
    "sessionAffinity",
    "stepWeight",
    "stepWeightPromotion",
    "stepWeights",
    "threshold",
    "webhooks",
];

const NATIVE_KEYS: &[&str] = &[
    "interval",
    "threshold",
    "maxWeight",
    "stepWeight",
    "stepWeights",
    "steps",
    "stepWeightPromotion",
    "iterations",
    "match",
    "metrics",
    "webhooks",
    "approvals",
    "primaryReadyThreshold",
    "canaryReadyThreshold",
];

fn weight(r: &mut Reader, node: &Node, path: &str, min: i64) -> Option<u8> {
    r.int(node, path, min, 100)
        .and_then(|v| u8::try_from(v).ok())
}

/// Reads an analysis block; `None` when it had errors (already reported).
/// `namespace` is the canary's: a `templateRef` or `providerRef` without a namespace looks
/// there, as in Flagger. `snapshot` is the repo the canary was loaded from: alert providers are
/// resolved in it.
pub fn read_analysis(
    r: &mut Reader,
    node: &Node,
    path: &str,
    format: Format,
    namespace: Option<&Name>,
    snapshot: &Snapshot,
) -> Option<Analysis> {
    let keys = match format {
        Format::Native => NATIVE_KEYS,
        Format::Flagger => FLAGGER_KEYS,
    };
    let errors_before = r.errors.len();
    r.map(node, path, keys)?;

    let interval = match node.get("interval") {
        // Flagger raises 0 to its minimum below, so only a native 0 is an error.
        Some(n) => r.duration(n, &join(path, "interval")).and_then(|d| {
            if d.is_zero() && format == Format::Native {
                r.error(
                    n.line,
                    &join(path, "interval"),
                    "expected a positive duration, found 0",
                );
                None
            } else {
                Some(d)
            }
        }),
        None => Some(FLAGGER_ANALYSIS_INTERVAL),
    };
    // Flagger (`GetAnalysisInterval`) runs an analysis at most every 10 s: a shorter
    // interval in a Flagger canary is raised to 10 s. Native canaries keep theirs.
    let interval = match format {
        Format::Flagger => interval.map(|d| d.max(FLAGGER_MIN_ANALYSIS_INTERVAL)),
        Format::Native => interval,
    };
    // Flagger (`GetAnalysisThreshold`) rolls back after 1 failed check when `threshold` is
    // unset or 0; native canaries keep sluice's own default of 5.
    let threshold = match (node.get("threshold"), format) {
        (Some(n), Format::Flagger) => r
            .int(n, &join(path, "threshold"), 0, i64::from(u32::MAX))
            .and_then(|v| u32::try_from(v).ok())
            .map(|v| v.max(1)),
        (Some(n), Format::Native) => r
            .int(n, &join(path, "threshold"), 1, i64::from(u32::MAX))
            .and_then(|v| u32::try_from(v).ok()),
        (None, Format::Flagger) => Some(1),
        (None, Format::Native) => Some(5),
    };
    let step_weight_promotion = match node.get("stepWeightPromotion") {
        Some(n) => weight(r, n, &join(path, "stepWeightPromotion"), 0),
        None => None,
    };
    let iterations = match node.get("iterations") {
        Some(n) => r
            .int(n, &join(path, "iterations"), 0, 10_000)
            .and_then(|v| u32::try_from(v).ok()),
        None => None,
    };
    // The matches themselves belong to the router (`route::Route::read_ab_matches`);
    // here they only choose A/B over blue/green.
    let has_matches = node
        .get("match")
        .and_then(|n| r.seq(n, &join(path, "match")))
        .is_some_and(|items| !items.is_empty());
    let strategy = read_strategy(r, node, path, format, iterations, has_matches);
    let metrics = match node.get("metrics") {
        Some(n) => read_metrics(r, n, &join(path, "metrics"), format, namespace),
        None => Vec::new(),
    };
    let webhooks = match node.get("webhooks") {
        Some(n) => read_webhooks(r, n, &join(path, "webhooks")),
        None => Vec::new(),
    };
    let alerts = match node.get("alerts") {
        Some(n) => alert_provider::read_alerts(r, n, &join(path, "alerts"), namespace, snapshot),
        None => Vec::new(),
    };
    let alerts = alert_provider::alerts_of(alerts, &webhooks, raw_traffic_routing(node));
    let webhooks: Vec<WebhookSpec> = webhooks.into_iter().map(|(w, _)| w).collect();
    let mut approvals = match node.get("approvals") {
        Some(n) => read_approvals(r, n, &join(path, "approvals")),
        None => Approvals::default(),
    };
    // confirm-* hooks pointing at `sluice:approval` become git approval gates.
    let (git_gates, webhooks): (Vec<WebhookSpec>, Vec<WebhookSpec>) = webhooks
        .into_iter()
        .partition(|w| w.url == GIT_APPROVAL_URL);
    for gate in git_gates {
        match gate.kind {
            WebhookKind::ConfirmRollout => approvals.before_rollout = true,
            WebhookKind::ConfirmTrafficIncrease => approvals.before_traffic_increase = true,
            WebhookKind::ConfirmPromotion => approvals.before_promotion = true,
            WebhookKind::PreRollout
            | WebhookKind::Rollout
            | WebhookKind::PostRollout
            | WebhookKind::Rollback
            | WebhookKind::Event => {}
        }
    }
    let mirror = node
        .get("mirror")
        .and_then(|n| r.bool(n, &join(path, "mirror")))
        .unwrap_or(false);
    let session_affinity = node
        .get("sessionAffinity")
        .and_then(|n| read_session_affinity(r, n, &join(path, "sessionAffinity")));
    let primary_ready_threshold = ready_threshold(r, node, path, "primaryReadyThreshold");
    let canary_ready_threshold = ready_threshold(r, node, path, "canaryReadyThreshold");
    if r.errors.len() > errors_before {
        return None;
    }
    Some(Analysis {
        interval: interval?,
        threshold: threshold?,
        strategy: strategy?,
        step_weight_promotion: step_weight_promotion.filter(|s| *s > 0),
        metrics,
        webhooks,
        approvals,
        mirror,
        session_affinity,
        alerts,
        primary_ready_threshold: primary_ready_threshold?,
        canary_ready_threshold: canary_ready_threshold?,
    })
}

/// Flagger's "Traffic routing" alert line from the block's own numbers (already checked by
/// the strategy reader; anything unreadable here counts as unset, as in Flagger).
fn raw_traffic_routing(node: &Node) -> Option<String> {
    let int = |n: &Node| n.as_str().and_then(|t| t.parse::<i64>().ok());
    let step_weight = node.get("stepWeight").and_then(int).unwrap_or(0);
    let step_weights: Vec<i64> = match node.get("stepWeights").map(|n| &n.value) {
        Some(Value::Seq(items)) => items.iter().filter_map(int).collect(),
        _ => Vec::new(),
    };
    let max_weight = node.get("maxWeight").and_then(int).unwrap_or(0);
    alert_provider::traffic_routing(step_weight, &step_weights, max_weight)
}

/// `analysis.primaryReadyThreshold` / `canaryReadyThreshold`: a percent of pods, Flagger's 100
/// when unset. Flagger does not bound it; above 100 no workload would ever be ready and below
/// 0 every one would, so both are refused.
fn ready_threshold(r: &mut Reader, node: &Node, path: &str, key: &str) -> Option<u8> {
    match node.get(key) {
        Some(n) => r
            .int(n, &join(path, key), 0, 100)
            .and_then(|v| u8::try_from(v).ok()),
        None => Some(FLAGGER_READY_THRESHOLD_PERCENT),
    }
}

/// The keys of Flagger's `analysis.sessionAffinity` (its CRD). Only `cookieName` is read
/// here; the router reads the cookie's attributes and refuses what it cannot render.
const SESSION_AFFINITY_KEYS: &[&str] = &[
    "cookieName",
    "primaryCookieName",
    "domain",
    "httpOnly",
    "maxAge",
    "partitioned",
    "path",
    "sameSite",
    "secure",
];

/// `analysis.sessionAffinity`: its `cookieName` (required by Flagger's CRD).
fn read_session_affinity(r: &mut Reader, node: &Node, path: &str) -> Option<SessionAffinity> {
    r.map(node, path, SESSION_AFFINITY_KEYS)?;
    let name_node = r.required(node, path, "cookieName")?;
    let field = join(path, "cookieName");
    let cookie_name = r.string(name_node, &field)?;
    if let Err(message) = check_cookie_name(&cookie_name) {
        r.error(name_node.line, &field, message);
        return None;
    }
    Some(SessionAffinity { cookie_name })
}

/// A cookie name the route can match safely: routers match `Cookie` headers against a regular
/// expression built from it (as Flagger does), so only characters with no meaning there.
pub fn check_cookie_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected a cookie name of letters, digits, '-' and '_' (routes match it in a regular expression), found {name:?}"
        ))
    }
}

fn read_strategy(
    r: &mut Reader,
    node: &Node,
    path: &str,
    format: Format,
    iterations: Option<u32>,
    has_matches: bool,
) -> Option<Strategy> {
    let step_weight = node.get("stepWeight");
    let step_weights = node.get("stepWeights");
    let steps = node.get("steps");
    let max_weight = node.get("maxWeight");

    if let Some(iterations) = iterations.filter(|i| *i > 0) {
        if step_weight.is_none() && step_weights.is_none() && steps.is_none() {
            return Some(if has_matches {
                Strategy::AB { iterations }
            } else {
                Strategy::BlueGreen { iterations }
            });
        }
        if let Some(n) = node.get("iterations") {
            r.error(
                n.line,
                &join(path, "iterations"),
                "expected either iterations (blue/green, A/B) or a weight schedule (stepWeight, stepWeights, steps), found both",
            );
        }
        return None;
    }

    let max = match max_weight {
        Some(n) => weight(r, n, &join(path, "maxWeight"), 1),
        None => Some(100),
    };
    let present: Vec<&str> = [
        ("stepWeight", step_weight),
        ("stepWeights", step_weights),
        ("steps", steps),
    ]
    .iter()
    .filter_map(|(k, v)| v.map(|_| *k))
    .collect();
    if present.is_empty() {
        r.error(
            node.line,
            path,
            "no schedule: expected one of stepWeight (with maxWeight), stepWeights, steps or iterations",
        );
        return None;
    }
    if present.len() > 1 && (format == Format::Native || present.contains(&"steps")) {
        let line = step_weights.or(steps).map_or(node.line, |n| n.line);
        r.error(
            line,
            path,
            format!(
                "expected only one of stepWeight, stepWeights and steps, found {}",
                present.join(" and ")
            ),
        );
        return None;
    }

    // Flagger uses stepWeights when set, ignoring stepWeight and maxWeight.
    if let Some(n) = step_weights {
        let p = join(path, "stepWeights");
        let items = r.seq(n, &p)?;
        if items.is_empty() {
            r.error(
                n.line,
                &p,
                "expected at least one weight, found an empty list",
            );
            return None;
        }
        // Flagger caps entries above 100 while stepping; native input must stay in 1..=100.
        let upper = match format {
            Format::Flagger => 1_000_000,
            Format::Native => 100,
        };
        let mut weights = Vec::new();
        for (i, item) in items.iter().enumerate() {
            weights.push(r.int(item, &index(&p, i), 1, upper));
        }
        let weights: Vec<i64> = weights.into_iter().collect::<Option<_>>()?;
        let mut ok = true;
        for (i, pair) in weights.windows(2).enumerate() {
            if pair[1] <= pair[0] {
                r.error(
                    items[i + 1].line,
                    &index(&p, i + 1),
                    format!(
                        "expected strictly increasing weights, found {} after {}",
                        pair[1], pair[0]
                    ),
                );
                ok = false;
            }
        }
        if format == Format::Native {
            if let (Some(max), Some(m)) = (max, max_weight) {
                for (i, w) in weights.iter().enumerate() {
                    if *w > i64::from(max) {
                        r.error(
                            items[i].line,
                            &index(&p, i),
                            format!("expected at most maxWeight {max}, found {w}"),
                        );
                        ok = false;
                    }
                }
                let _ = m;
            }
        }
        if !ok {
            return None;
        }
        // Capping at 100 before stepping gives the same walk as Flagger's cap on each step.
        let capped: Vec<u8> = weights
            .iter()
            .map(|w| u8::try_from((*w).min(100)).unwrap_or(100))
            .collect();
        let weights = match format {
            Format::Flagger => flagger_step_weights(&capped),
            Format::Native => capped,
        };
        return Some(Strategy::Canary {
            steps: interval_steps(&weights),
        });
    }

    if let Some(n) = step_weight {
        let p = join(path, "stepWeight");
        let step = weight(r, n, &p, 1)?;
        let max = max?;
        if step > max {
            r.error(
                n.line,
                &p,
                format!("expected at most maxWeight {max}, found {step}"),
            );
            return None;
        }
        let weights = match format {
            Format::Flagger => flagger_step_weight(step, max),
            Format::Native => native_step_weight(step, max),
        };
        return Some(Strategy::Canary {
            steps: interval_steps(&weights),
        });
    }

    let n = steps?;
    let p = join(path, "steps");
    let items = r.seq(n, &p)?;
    if items.is_empty() {
        r.error(
            n.line,
            &p,
            "expected at least one step, found an empty list",
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let ip = index(&p, i);
        let Some(item) = r.map(item, &ip, &["weight", "pause"]) else {
            ok = false;
            continue;
        };
        let w = r
            .required(item, &ip, "weight")
            .and_then(|w| weight(r, w, &join(&ip, "weight"), 1));
        let pause = match item.get("pause") {
            None => Some(Pause::Interval),
            Some(pn) => {
                let pp = join(&ip, "pause");
                match &pn.value {
                    Value::Null => Some(Pause::Approval),
                    _ => r
                        .map(pn, &pp, &["duration"])
                        .and_then(|pn| match pn.get("duration") {
                            None => Some(Pause::Approval),
                            // Zero would advance the instant the weight is committed,
                            // before any traffic reached it: never judged on its own.
                            Some(d) => {
                                let dp = join(&pp, "duration");
                                match r.duration(d, &dp) {
                                    Some(z) if z.is_zero() => {
                                        r.error(
                                            d.line,
                                            &dp,
                                            "expected a positive duration, found 0",
                                        );
                                        None
                                    }
                                    other => other.map(Pause::For),
                                }
                            }
                        }),
                }
            }
        };
        match (w, pause) {
            (Some(weight), Some(pause)) => out.push((item.line, Step { weight, pause })),
            _ => ok = false,
        }
    }
    if !ok {
        return None;
    }
    for (i, pair) in out.windows(2).enumerate() {
        if pair[1].1.weight <= pair[0].1.weight {
            r.error(
                pair[1].0,
                &join(&index(&p, i + 1), "weight"),
                format!(
                    "expected strictly increasing weights, found {} after {}",
                    pair[1].1.weight, pair[0].1.weight
                ),
            );
            ok = false;
        }
    }
    if let (Some(max), Some(_)) = (max, max_weight) {
        for (i, (line, step)) in out.iter().enumerate() {
            if step.weight > max {
                r.error(
                    *line,
                    &join(&index(&p, i), "weight"),
                    format!("expected at most maxWeight {max}, found {}", step.weight),
                );
                ok = false;
            }
        }
    }
    ok.then(|| Strategy::Canary {
        steps: out.into_iter().map(|(_, s)| s).collect(),
    })
}

fn interval_steps(weights: &[u8]) -> Vec<Step> {
    weights
        .iter()
        .map(|&weight| Step {
            weight,
            pause: Pause::Interval,
        })
        .collect()
}

fn read_approvals(r: &mut Reader, node: &Node, path: &str) -> Approvals {
    let mut approvals = Approvals::default();
    if r.map(
        node,
        path,
        &["beforeRollout", "beforeTrafficIncrease", "beforePromotion"],
    )
    .is_none()
    {
        return approvals;
    }
    let mut flag = |key: &str| {
        node.get(key)
            .and_then(|n| r.bool(n, &join(path, key)))
            .unwrap_or(false)
    };
    approvals.before_rollout = flag("beforeRollout");
    approvals.before_traffic_increase = flag("beforeTrafficIncrease");
    approvals.before_promotion = flag("beforePromotion");
    approvals
}

fn read_metrics(
    r: &mut Reader,
    node: &Node,
    path: &str,
    format: Format,
    namespace: Option<&Name>,
) -> Vec<MetricSpec> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let keys: &[&str] = match format {
        Format::Flagger => &[
            "interval",
            "name",
            "query",
            "templateRef",
            "templateVariables",
            "threshold",
            "thresholdRange",
        ],
        Format::Native => &[
            "interval",
            "name",
            "query",
            "templateRef",
            "templateVariables",
            "thresholdRange",
        ],
    };
    let mut out: Vec<MetricSpec> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = index(path, i);
        if r.map(item, &p, keys).is_none() {
            continue;
        }
        let Some(name) = r
            .required(item, &p, "name")
            .and_then(|n| r.string(n, &join(&p, "name")))
        else {
            continue;
        };
        if out.iter().any(|m| m.name == name) {
            r.error(
                item.line,
                &join(&p, "name"),
                format!("duplicate metric name {name:?}"),
            );
        }
        let interval = item
            .get("interval")
            .and_then(|n| r.duration(n, &join(&p, "interval")));
        let mut range = ThresholdRange::default();
        if let Some(tr) = item.get("thresholdRange") {
            let tp = join(&p, "thresholdRange");
            if r.map(tr, &tp, &["min", "max"]).is_some() {
                range.min = tr.get("min").and_then(|n| r.float(n, &join(&tp, "min")));
                range.max = tr.get("max").and_then(|n| r.float(n, &join(&tp, "max")));
                if let (Some(lo), Some(hi)) = (range.min, range.max) {
                    if lo > hi {
                        r.error(
                            tr.line,
                            &tp,
                            format!("expected min <= max, found min {lo} > max {hi}"),
                        );
                    }
                }
            }
        }
        let builtin = match name.as_str() {
            "request-success-rate" => Some(BuiltinMetric::RequestSuccessRate),
            "request-duration" => Some(BuiltinMetric::RequestDuration),
            _ => None,
        };
        // Flagger's deprecated `threshold` sets the bound of a built-in metric.
        if let Some(t) = item.get("threshold") {
            if let Some(v) = r.float(t, &join(&p, "threshold")) {
                match builtin {
                    Some(BuiltinMetric::RequestSuccessRate) if range.min.is_none() => {
                        range.min = Some(v)
                    }
                    Some(BuiltinMetric::RequestDuration) if range.max.is_none() => {
                        range.max = Some(v)
                    }
                    _ if range.min.is_none() && range.max.is_none() => range.max = Some(v),
                    _ => {}
                }
            }
        }
        let query = if let Some(t) = item.get("templateRef") {
            let tp = join(&p, "templateRef");
            if r.map(t, &tp, &["name", "namespace"]).is_none() {
                continue;
            }
            let tname = r
                .required(t, &tp, "name")
                .and_then(|n| r.string(n, &join(&tp, "name")))
                .and_then(|s| name_or_error(r, t, &join(&tp, "name"), &s));
            let tns = match t.get("namespace") {
                Some(n) => r
                    .string(n, &join(&tp, "namespace"))
                    .and_then(|s| name_or_error(r, n, &join(&tp, "namespace"), &s)),
                None => namespace.cloned().or_else(|| Name::parse("default").ok()),
            };
            let mut variables = BTreeMap::new();
            if let Some(v) = item.get("templateVariables") {
                let vp = join(&p, "templateVariables");
                if let Value::Map(entries) = &v.value {
                    for (k, val) in entries {
                        if let Some(s) = r.string(val, &join(&vp, &k.text)) {
                            variables.insert(k.text.clone(), s);
                        }
                    }
                } else {
                    r.error(v.line, &vp, "expected a mapping of strings");
                }
            }
            match (tname, tns) {
                (Some(name), Some(namespace)) => MetricQuery::Template {
                    name,
                    namespace,
                    variables,
                },
                _ => continue,
            }
        } else if let Some(q) = item.get("query") {
            match r.string(q, &join(&p, "query")) {
                Some(q) if !q.trim().is_empty() => MetricQuery::Query(q),
                _ => continue,
            }
        } else if let Some(b) = builtin {
            MetricQuery::Builtin(b)
        } else {
            r.error(
                item.line,
                &join(&p, "templateRef"),
                format!("metric {name:?} is not built in (built in: request-success-rate, request-duration); expected a templateRef"),
            );
            continue;
        };
        if range.min.is_none() && range.max.is_none() {
            r.error(
                item.line,
                &join(&p, "thresholdRange"),
                "expected a thresholdRange with min and/or max, found none",
            );
        }
        out.push(MetricSpec {
            name,
            query,
            interval,
            range,
        });
    }
    out
}

fn name_or_error(r: &mut Reader, node: &Node, path: &str, text: &str) -> Option<Name> {
    match Name::parse(text) {
        Ok(n) => Some(n),
        Err(e) => {
            r.error(node.line, path, e);
            None
        }
    }
}

/// The hooks, each with its `muteAlert`.
fn read_webhooks(r: &mut Reader, node: &Node, path: &str) -> Vec<(WebhookSpec, bool)> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out: Vec<(WebhookSpec, bool)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = index(path, i);
        if r.map(
            item,
            &p,
            &[
                "disableTLS",
                "metadata",
                "muteAlert",
                "name",
                "retries",
                "timeout",
                "type",
                "url",
            ],
        )
        .is_none()
        {
            continue;
        }
        let name = r
            .required(item, &p, "name")
            .and_then(|n| r.string(n, &join(&p, "name")));
        let url = r
            .required(item, &p, "url")
            .and_then(|n| r.string(n, &join(&p, "url")));
        let kind = match item.get("type") {
            None => Some(WebhookKind::Rollout),
            Some(t) => match r.string(t, &join(&p, "type")).as_deref() {
                None => None,
                Some("") => Some(WebhookKind::Rollout),
                Some(text) => {
                    let found = WebhookKind::ALL
                        .iter()
                        .find(|(k, _)| *k == text)
                        .map(|(_, v)| *v);
                    if found.is_none() {
                        let names: Vec<&str> = WebhookKind::ALL.iter().map(|(k, _)| *k).collect();
                        r.error(
                            t.line,
                            &join(&p, "type"),
                            format!("expected one of {}, found {text:?}", names.join(", ")),
                        );
                    }
                    found
                }
            },
        };
        let timeout = match item.get("timeout") {
            Some(t) => r.duration(t, &join(&p, "timeout")),
            // Flagger's default webhook timeout.
            None => Some(Duration::from_secs(10)),
        };
        let retries = match item.get("retries") {
            Some(t) => r
                .int(t, &join(&p, "retries"), 0, 100)
                .and_then(|v| u32::try_from(v).ok()),
            None => Some(0),
        };
        let mute_alert = item
            .get("muteAlert")
            .and_then(|n| r.bool(n, &join(&p, "muteAlert")))
            .unwrap_or(false);
        let disable_tls = item
            .get("disableTLS")
            .and_then(|n| r.bool(n, &join(&p, "disableTLS")))
            .unwrap_or(false);
        let mut metadata = BTreeMap::new();
        if let Some(m) = item.get("metadata") {
            let mp = join(&p, "metadata");
            if let Value::Map(entries) = &m.value {
                for (k, v) in entries {
                    if let Some(s) = r.string(v, &join(&mp, &k.text)) {
                        metadata.insert(k.text.clone(), s);
                    }
                }
            } else {
                r.error(m.line, &mp, "expected a mapping of strings");
            }
        }
        if let Some(u) = &url {
            if u == GIT_APPROVAL_URL {
                let gate = matches!(
                    kind,
                    Some(WebhookKind::ConfirmRollout)
                        | Some(WebhookKind::ConfirmTrafficIncrease)
                        | Some(WebhookKind::ConfirmPromotion)
                );
                if !gate {
                    r.error(
                        item.get("url").map_or(item.line, |n| n.line),
                        &join(&p, "url"),
                        format!("{GIT_APPROVAL_URL} is only for confirm-rollout, confirm-traffic-increase and confirm-promotion hooks"),
                    );
                    continue;
                }
            } else if !(u.starts_with("http://") || u.starts_with("https://")) {
                r.error(
                    item.get("url").map_or(item.line, |n| n.line),
                    &join(&p, "url"),
                    format!("expected an http:// or https:// URL, found {u:?}"),
                );
                continue;
            }
        }
        if let (Some(name), Some(url), Some(kind), Some(timeout), Some(retries)) =
            (name, url, kind, timeout, retries)
        {
            if out.iter().any(|(w, _)| w.name == name) {
                r.error(
                    item.line,
                    &join(&p, "name"),
                    format!("duplicate webhook name {name:?}"),
                );
            }
            out.push((
                WebhookSpec {
                    name,
                    kind,
                    url,
                    timeout,
                    retries,
                    metadata,
                    disable_tls,
                },
                mute_alert,
            ));
        }
    }
    out
}
