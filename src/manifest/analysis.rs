//! Reads `spec.analysis` (shared by the native and Flagger formats) into [`Analysis`].
//!
//! The two formats differ only in the weight arithmetic (Flagger's quirks vs. never passing
//! maxWeight) and in native-only fields (`steps`, `approvals`, inline `query`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::schedule::{
    flagger_step_weight, flagger_step_weights, native_step_weight, Pause, Step,
};
use crate::manifest::alert_provider;
use crate::manifest::model::{
    Analysis, Approvals, BuiltinMetric, Format, MetricQuery, MetricSpec, Name, SessionAffinity,
    Strategy, ThresholdRange, WebhookKind, WebhookSpec,
};
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, short_name, Reader};
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
    "judge",
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

    let interval = read_interval(r, node, path, format);
    let threshold = read_threshold(r, node, path, format);
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
    let webhooks = take_git_gates(webhooks, &mut approvals);
    let mirror = node
        .get("mirror")
        .and_then(|n| r.bool(n, &join(path, "mirror")))
        .unwrap_or(false);
    let session_affinity = node
        .get("sessionAffinity")
        .and_then(|n| read_session_affinity(r, n, &join(path, "sessionAffinity")));
    let primary_ready_threshold = ready_threshold(r, node, path, "primaryReadyThreshold");
    let canary_ready_threshold = ready_threshold(r, node, path, "canaryReadyThreshold");
    let judge = match format {
        Format::Native => crate::judge::canary::read_native(r, node, path),
        Format::Flagger => Some(None),
    };
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
        judge: judge?,
        argo: Vec::new(),
    })
}

/// `analysis.interval`: Flagger's 60 s when unset.
fn read_interval(r: &mut Reader, node: &Node, path: &str, format: Format) -> Option<Duration> {
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
    // interval in a Flagger canary is raised to 10 s, and said (the text reads otherwise).
    // Native canaries keep theirs.
    match format {
        Format::Flagger => {
            if let (Some(d), Some(n)) = (interval, node.get("interval")) {
                if d < FLAGGER_MIN_ANALYSIS_INTERVAL {
                    warn_short_interval(r, n, &join(path, "interval"));
                }
            }
            interval.map(|d| d.max(FLAGGER_MIN_ANALYSIS_INTERVAL))
        }
        Format::Native => interval,
    }
}

/// A Flagger `interval` under Flagger's 10 s floor: what sluice (and Flagger) run instead.
fn warn_short_interval(r: &mut Reader, n: &Node, path: &str) {
    let text = match &n.value {
        Value::Scalar { text, .. } => text.trim().to_string(),
        _ => String::new(),
    };
    let floor = FLAGGER_MIN_ANALYSIS_INTERVAL.as_secs();
    r.warn(
        n.line,
        path,
        format!("{text} is below Flagger's {floor}s floor (GetAnalysisInterval): sluice analyses and steps every {floor}s, as Flagger does; write `interval: {floor}s` to say so"),
    );
}

/// `analysis.threshold`: how many failed checks roll back.
fn read_threshold(r: &mut Reader, node: &Node, path: &str, format: Format) -> Option<u32> {
    // Flagger (`GetAnalysisThreshold`) rolls back after 1 failed check when `threshold` is
    // unset or 0; native canaries keep sluice's own default of 5.
    match (node.get("threshold"), format) {
        (Some(n), Format::Flagger) => r
            .int(n, &join(path, "threshold"), 0, i64::from(u32::MAX))
            .and_then(|v| u32::try_from(v).ok())
            .map(|v| v.max(1)),
        (Some(n), Format::Native) => r
            .int(n, &join(path, "threshold"), 1, i64::from(u32::MAX))
            .and_then(|v| u32::try_from(v).ok()),
        (None, Format::Flagger) => Some(1),
        (None, Format::Native) => Some(5),
    }
}

/// Turns the confirm-* hooks pointing at `sluice:approval` into git approval gates; returns
/// the hooks left to call over HTTP.
fn take_git_gates(webhooks: Vec<WebhookSpec>, approvals: &mut Approvals) -> Vec<WebhookSpec> {
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
    webhooks
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

/// The keys of Flagger's `analysis.sessionAffinity` (its CRD). The cookie names are read
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

/// `analysis.sessionAffinity`: its `cookieName` (required by Flagger's CRD) and
/// `primaryCookieName` (empty is Flagger's "not set"; the same name as `cookieName` is refused,
/// as Flagger's `verifySessionAffinity` refuses it).
fn read_session_affinity(r: &mut Reader, node: &Node, path: &str) -> Option<SessionAffinity> {
    r.map(node, path, SESSION_AFFINITY_KEYS)?;
    let name_node = r.required(node, path, "cookieName")?;
    let field = join(path, "cookieName");
    let cookie_name = r.string(name_node, &field)?;
    if let Err(message) = check_cookie_name(&cookie_name) {
        r.error(name_node.line, &field, message);
        return None;
    }
    let mut primary_cookie_name = None;
    if let Some(n) = node.get("primaryCookieName") {
        let field = join(path, "primaryCookieName");
        let name = r.string(n, &field)?;
        if name == cookie_name {
            r.error(n.line, &field, format!("expected another name than cookieName {cookie_name:?}: the primary's cookie and the canary's must differ (Flagger refuses the same name too)"));
            return None;
        }
        if !name.is_empty() {
            if let Err(message) = check_cookie_name(&name) {
                r.error(n.line, &field, message);
                return None;
            }
            primary_cookie_name = Some(name);
        }
    }
    Some(SessionAffinity {
        cookie_name,
        primary_cookie_name,
    })
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

/// The weight schedule: `iterations` (blue/green, A/B), `stepWeights`, `stepWeight` with
/// `maxWeight`, or native `steps`.
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
        let has_schedule = step_weight.is_some() || step_weights.is_some() || steps.is_some();
        return iteration_strategy(r, node, path, iterations, has_matches, has_schedule);
    }

    let max = match max_weight {
        Some(n) => weight(r, n, &join(path, "maxWeight"), 1),
        None => Some(100),
    };
    if !check_one_schedule(r, node, path, format) {
        return None;
    }
    // A listed weight is bounded by maxWeight only when the block sets it.
    let listed_max = max.filter(|_| max_weight.is_some());

    // Flagger uses stepWeights when set, ignoring stepWeight and maxWeight.
    if let Some(n) = step_weights {
        return read_step_weights(r, n, &join(path, "stepWeights"), format, listed_max);
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
    read_steps(r, steps?, &join(path, "steps"), listed_max)
}

/// `iterations` alone: blue/green, or A/B when the block has matches. With a weight schedule
/// as well it is an error.
fn iteration_strategy(
    r: &mut Reader,
    node: &Node,
    path: &str,
    iterations: u32,
    has_matches: bool,
    has_schedule: bool,
) -> Option<Strategy> {
    if !has_schedule {
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
    None
}

/// Checks the block has a weight schedule, and only one where the format asks for that
/// (Flagger takes stepWeights over stepWeight; `steps` is native). Reports what is wrong.
fn check_one_schedule(r: &mut Reader, node: &Node, path: &str, format: Format) -> bool {
    let present: Vec<&str> = ["stepWeight", "stepWeights", "steps"]
        .into_iter()
        .filter(|k| node.get(k).is_some())
        .collect();
    if present.is_empty() {
        r.error(
            node.line,
            path,
            "no schedule: expected one of stepWeight (with maxWeight), stepWeights, steps or iterations",
        );
        return false;
    }
    if present.len() > 1 && (format == Format::Native || present.contains(&"steps")) {
        let at = ["stepWeights", "steps"]
            .into_iter()
            .find_map(|k| node.get(k));
        let line = at.map_or(node.line, |n| n.line);
        r.error(
            line,
            path,
            format!(
                "expected only one of stepWeight, stepWeights and steps, found {}",
                present.join(" and ")
            ),
        );
        return false;
    }
    true
}

/// `analysis.stepWeights` at `p`: the canary's weights in order. `max` is maxWeight when set.
fn read_step_weights(
    r: &mut Reader,
    n: &Node,
    p: &str,
    format: Format,
    max: Option<u8>,
) -> Option<Strategy> {
    let items = r.seq(n, p)?;
    if items.is_empty() {
        r.error(
            n.line,
            p,
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
        weights.push(r.int(item, &index(p, i), 1, upper));
    }
    let weights: Vec<i64> = weights.into_iter().collect::<Option<_>>()?;
    let listed: Vec<ListedWeight> = items
        .iter()
        .zip(&weights)
        .enumerate()
        .map(|(i, (item, w))| ListedWeight {
            line: item.line,
            field: index(p, i),
            weight: *w,
        })
        .collect();
    // Flagger ignores maxWeight beside stepWeights.
    let max = max.filter(|_| format == Format::Native);
    if !check_listed_weights(r, &listed, max) {
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
    Some(Strategy::Canary {
        steps: interval_steps(&weights),
    })
}

/// Native `analysis.steps` at `p`: each a weight and a pause. `max` is maxWeight when set.
fn read_steps(r: &mut Reader, n: &Node, p: &str, max: Option<u8>) -> Option<Strategy> {
    let items = r.seq(n, p)?;
    if items.is_empty() {
        r.error(n.line, p, "expected at least one step, found an empty list");
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match read_step(r, item, &index(p, i)) {
            Some(step) => out.push((item.line, step)),
            None => ok = false,
        }
    }
    if !ok {
        return None;
    }
    let listed: Vec<ListedWeight> = out
        .iter()
        .enumerate()
        .map(|(i, (line, step))| ListedWeight {
            line: *line,
            field: join(&index(p, i), "weight"),
            weight: i64::from(step.weight),
        })
        .collect();
    check_listed_weights(r, &listed, max).then(|| Strategy::Canary {
        steps: out.into_iter().map(|(_, s)| s).collect(),
    })
}

/// One of `analysis.steps`, at `ip`: its `weight` and its `pause`.
fn read_step(r: &mut Reader, item: &Node, ip: &str) -> Option<Step> {
    let item = r.map(item, ip, &["weight", "pause"])?;
    let weight = r
        .required(item, ip, "weight")
        .and_then(|w| weight(r, w, &join(ip, "weight"), 1));
    let pause = match item.get("pause") {
        None => Some(Pause::Interval),
        Some(pn) => read_pause(r, pn, &join(ip, "pause")),
    };
    Some(Step {
        weight: weight?,
        pause: pause?,
    })
}

/// A step's `pause` at `pp`: empty waits for an approval, `{duration: D}` holds for D.
fn read_pause(r: &mut Reader, pn: &Node, pp: &str) -> Option<Pause> {
    if pn.value == Value::Null {
        return Some(Pause::Approval);
    }
    let pn = r.map(pn, pp, &["duration"])?;
    let Some(d) = pn.get("duration") else {
        return Some(Pause::Approval);
    };
    // Zero would advance the instant the weight is committed, before any traffic reached
    // it: never judged on its own.
    let dp = join(pp, "duration");
    match r.duration(d, &dp) {
        Some(z) if z.is_zero() => {
            r.error(d.line, &dp, "expected a positive duration, found 0");
            None
        }
        other => other.map(Pause::For),
    }
}

/// A weight from `stepWeights` or `steps` and where it was written, for the checks that look
/// across the list.
struct ListedWeight {
    line: usize,
    field: String,
    weight: i64,
}

/// Checks listed weights increase strictly and stay within `max` when it is set; reports each
/// one that does not. True when all pass.
fn check_listed_weights(r: &mut Reader, weights: &[ListedWeight], max: Option<u8>) -> bool {
    let mut ok = true;
    for pair in weights.windows(2) {
        if pair[1].weight <= pair[0].weight {
            r.error(
                pair[1].line,
                &pair[1].field,
                format!(
                    "expected strictly increasing weights, found {} after {}",
                    pair[1].weight, pair[0].weight
                ),
            );
            ok = false;
        }
    }
    if let Some(max) = max {
        for w in weights {
            if w.weight > i64::from(max) {
                r.error(
                    w.line,
                    &w.field,
                    format!("expected at most maxWeight {max}, found {}", w.weight),
                );
                ok = false;
            }
        }
    }
    ok
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

/// The keys of one `analysis.metrics` entry; `threshold` is Flagger's deprecated bound.
const FLAGGER_METRIC_KEYS: &[&str] = &[
    "interval",
    "name",
    "query",
    "templateRef",
    "templateVariables",
    "threshold",
    "thresholdRange",
];

const NATIVE_METRIC_KEYS: &[&str] = &[
    "interval",
    "name",
    "query",
    "templateRef",
    "templateVariables",
    "thresholdRange",
];

/// `analysis.metrics`: the checks judged every interval. An entry with errors is left out
/// (its errors are reported).
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
    let keys = match format {
        Format::Flagger => FLAGGER_METRIC_KEYS,
        Format::Native => NATIVE_METRIC_KEYS,
    };
    let mut out: Vec<MetricSpec> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = index(path, i);
        if r.map(item, &p, keys).is_none() {
            continue;
        }
        if let Some(metric) = read_metric(r, item, &p, namespace, &out) {
            out.push(metric);
        }
    }
    out
}

/// One `analysis.metrics` entry at `p`; `earlier` are the entries before it, whose names it
/// must not repeat.
fn read_metric(
    r: &mut Reader,
    item: &Node,
    p: &str,
    namespace: Option<&Name>,
    earlier: &[MetricSpec],
) -> Option<MetricSpec> {
    let name = r
        .required(item, p, "name")
        .and_then(|n| short_name(r, n, &join(p, "name")))?;
    if earlier.iter().any(|m| m.name == name) {
        r.error(
            item.line,
            &join(p, "name"),
            format!("duplicate metric name {name:?}"),
        );
    }
    let interval = item
        .get("interval")
        .and_then(|n| r.duration(n, &join(p, "interval")));
    let mut range = read_threshold_range(r, item, p);
    let builtin = match name.as_str() {
        "request-success-rate" => Some(BuiltinMetric::RequestSuccessRate),
        "request-duration" => Some(BuiltinMetric::RequestDuration),
        _ => None,
    };
    if let Some(t) = item.get("threshold") {
        if let Some(v) = r.float(t, &join(p, "threshold")) {
            apply_deprecated_threshold(&mut range, builtin, v);
        }
    }
    let query = read_metric_query(r, item, p, &name, builtin, namespace)?;
    if range.min.is_none() && range.max.is_none() {
        r.error(
            item.line,
            &join(p, "thresholdRange"),
            "expected a thresholdRange with min and/or max, found none",
        );
    }
    Some(MetricSpec {
        name,
        query,
        interval,
        range,
    })
}

/// A metric's `thresholdRange`: its `min` and `max`, each optional, `min <= max`.
fn read_threshold_range(r: &mut Reader, item: &Node, p: &str) -> ThresholdRange {
    let mut range = ThresholdRange::default();
    let Some(tr) = item.get("thresholdRange") else {
        return range;
    };
    let tp = join(p, "thresholdRange");
    if r.map(tr, &tp, &["min", "max"]).is_none() {
        return range;
    }
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
    range
}

/// Flagger's deprecated `threshold` sets the bound of a built-in metric (the minimum success
/// rate, the maximum duration) or else the maximum, unless thresholdRange already set it.
fn apply_deprecated_threshold(
    range: &mut ThresholdRange,
    builtin: Option<BuiltinMetric>,
    value: f64,
) {
    match builtin {
        Some(BuiltinMetric::RequestSuccessRate) if range.min.is_none() => range.min = Some(value),
        Some(BuiltinMetric::RequestDuration) if range.max.is_none() => range.max = Some(value),
        _ if range.min.is_none() && range.max.is_none() => range.max = Some(value),
        _ => {}
    }
}

/// What a metric queries: its `templateRef`, else its inline `query`, else the built-in
/// metric of its name. `None` when that is missing or has errors.
fn read_metric_query(
    r: &mut Reader,
    item: &Node,
    p: &str,
    name: &str,
    builtin: Option<BuiltinMetric>,
    namespace: Option<&Name>,
) -> Option<MetricQuery> {
    if let Some(t) = item.get("templateRef") {
        return read_template_ref(r, item, t, p, namespace);
    }
    if let Some(q) = item.get("query") {
        return match r.string(q, &join(p, "query")) {
            Some(q) if !q.trim().is_empty() => Some(MetricQuery::Query(q)),
            _ => None,
        };
    }
    if let Some(b) = builtin {
        return Some(MetricQuery::Builtin(b));
    }
    r.error(
        item.line,
        &join(p, "templateRef"),
        format!("metric {name:?} is not built in (built in: request-success-rate, request-duration); expected a templateRef"),
    );
    None
}

/// A metric's `templateRef` (`t`) and its `templateVariables`; the template's namespace is
/// the canary's (or `default`) when the reference names none.
fn read_template_ref(
    r: &mut Reader,
    item: &Node,
    t: &Node,
    p: &str,
    namespace: Option<&Name>,
) -> Option<MetricQuery> {
    let tp = join(p, "templateRef");
    r.map(t, &tp, &["name", "namespace"])?;
    let tname = r
        .required(t, &tp, "name")
        .and_then(|n| r.string(n, &join(&tp, "name")))
        .and_then(|s| name_or_error(r, t, &join(&tp, "name"), &s));
    let tns = match t.get("namespace") {
        Some(n) => r
            .string(n, &join(&tp, "namespace"))
            .and_then(|s| label_or_error(r, n, &join(&tp, "namespace"), &s)),
        None => namespace.cloned().or_else(|| Name::parse("default").ok()),
    };
    let variables = match item.get("templateVariables") {
        Some(v) => read_string_map(r, v, &join(p, "templateVariables")),
        None => BTreeMap::new(),
    };
    Some(MetricQuery::Template {
        name: tname?,
        namespace: tns?,
        variables,
    })
}

/// A mapping of strings (`templateVariables`, a webhook's `metadata`); entries that are not
/// strings are reported and left out.
fn read_string_map(r: &mut Reader, node: &Node, path: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Value::Map(entries) = &node.value {
        for (k, val) in entries {
            if let Some(s) = r.string(val, &join(path, &k.text)) {
                out.insert(k.text.clone(), s);
            }
        }
    } else {
        r.error(node.line, path, "expected a mapping of strings");
    }
    out
}

/// [`name_or_error`] for a namespace: a DNS-1123 label.
fn label_or_error(r: &mut Reader, node: &Node, path: &str, text: &str) -> Option<Name> {
    match Name::parse_label(text) {
        Ok(n) => Some(n),
        Err(e) => {
            r.error(node.line, path, e);
            None
        }
    }
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

/// The keys of one `analysis.webhooks` entry.
const WEBHOOK_KEYS: &[&str] = &[
    "disableTLS",
    "metadata",
    "muteAlert",
    "name",
    "retries",
    "timeout",
    "type",
    "url",
];

/// The hooks, each with its `muteAlert`.
fn read_webhooks(r: &mut Reader, node: &Node, path: &str) -> Vec<(WebhookSpec, bool)> {
    let Some(items) = r.seq(node, path) else {
        return Vec::new();
    };
    let mut out: Vec<(WebhookSpec, bool)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = index(path, i);
        if r.map(item, &p, WEBHOOK_KEYS).is_none() {
            continue;
        }
        if let Some(hook) = read_webhook(r, item, &p, &out) {
            out.push(hook);
        }
    }
    out
}

/// One `analysis.webhooks` entry at `p`, with its `muteAlert`; `earlier` are the entries
/// before it, whose names it must not repeat.
fn read_webhook(
    r: &mut Reader,
    item: &Node,
    p: &str,
    earlier: &[(WebhookSpec, bool)],
) -> Option<(WebhookSpec, bool)> {
    let name = r
        .required(item, p, "name")
        .and_then(|n| short_name(r, n, &join(p, "name")));
    let url = r
        .required(item, p, "url")
        .and_then(|n| r.string(n, &join(p, "url")));
    let kind = match item.get("type") {
        None => Some(WebhookKind::Rollout),
        Some(t) => read_webhook_kind(r, t, &join(p, "type")),
    };
    let timeout = match item.get("timeout") {
        Some(t) => r.duration(t, &join(p, "timeout")),
        // Flagger's default webhook timeout.
        None => Some(Duration::from_secs(10)),
    };
    let retries = match item.get("retries") {
        Some(t) => r
            .int(t, &join(p, "retries"), 0, 100)
            .and_then(|v| u32::try_from(v).ok()),
        None => Some(0),
    };
    let mute_alert = item
        .get("muteAlert")
        .and_then(|n| r.bool(n, &join(p, "muteAlert")))
        .unwrap_or(false);
    let disable_tls = item
        .get("disableTLS")
        .and_then(|n| r.bool(n, &join(p, "disableTLS")))
        .unwrap_or(false);
    let metadata = match item.get("metadata") {
        Some(m) => read_string_map(r, m, &join(p, "metadata")),
        None => BTreeMap::new(),
    };
    if let Some(u) = &url {
        if !check_webhook_url(r, item, p, u, kind) {
            return None;
        }
    }
    let (name, url, kind, timeout, retries) = (name?, url?, kind?, timeout?, retries?);
    if earlier.iter().any(|(w, _)| w.name == name) {
        r.error(
            item.line,
            &join(p, "name"),
            format!("duplicate webhook name {name:?}"),
        );
    }
    Some((
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
    ))
}

/// A webhook's `type` (node `t`, at `tp`); empty is Flagger's default, `rollout`.
fn read_webhook_kind(r: &mut Reader, t: &Node, tp: &str) -> Option<WebhookKind> {
    let text = r.string(t, tp)?;
    if text.is_empty() {
        return Some(WebhookKind::Rollout);
    }
    let found = WebhookKind::ALL
        .iter()
        .find(|(k, _)| *k == text)
        .map(|(_, v)| *v);
    if found.is_none() {
        let names: Vec<&str> = WebhookKind::ALL.iter().map(|(k, _)| *k).collect();
        r.error(
            t.line,
            tp,
            format!("expected one of {}, found {text:?}", names.join(", ")),
        );
    }
    found
}

/// Checks a webhook's URL: `sluice:approval` only on confirm-* hooks, anything else over
/// http:// or https://. Reports and returns false when it is neither.
fn check_webhook_url(
    r: &mut Reader,
    item: &Node,
    p: &str,
    url: &str,
    kind: Option<WebhookKind>,
) -> bool {
    let line = item.get("url").map_or(item.line, |n| n.line);
    if url == GIT_APPROVAL_URL {
        let gate = matches!(
            kind,
            Some(WebhookKind::ConfirmRollout)
                | Some(WebhookKind::ConfirmTrafficIncrease)
                | Some(WebhookKind::ConfirmPromotion)
        );
        if !gate {
            r.error(
                line,
                &join(p, "url"),
                format!("{GIT_APPROVAL_URL} is only for confirm-rollout, confirm-traffic-increase and confirm-promotion hooks"),
            );
        }
        return gate;
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        r.error(
            line,
            &join(p, "url"),
            format!("expected an http:// or https:// URL, found {url:?}"),
        );
        return false;
    }
    true
}
