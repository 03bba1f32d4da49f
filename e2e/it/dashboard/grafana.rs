//! `examples/grafana/sluice.json` names only what sluice exports: every PromQL expression of
//! its panels and variables, and every `{{label}}` of a legend, is checked against a live
//! `/metrics` encoding of sluice's own registry (each series recorded once).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value as Json;

/// Sample names of the exposition, each with its label names.
fn exported() -> BTreeMap<String, BTreeSet<String>> {
    let metrics = sluice::server::Metrics::new();
    metrics.record_canary("prod", "web", "Progressing", 20, 1, 3.0);
    metrics.tick();
    metrics.push_retry(1);
    metrics.error("metric_query");
    let text = metrics.encode().unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = out.entry(line[..name_end].to_string()).or_default();
        if let Some(inner) = line[name_end..]
            .strip_prefix('{')
            .and_then(|r| r.split_once('}'))
        {
            for pair in inner.0.split(',').filter(|p| !p.is_empty()) {
                labels.insert(pair.split('=').next().unwrap().to_string());
            }
        }
    }
    out
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Identifiers of `text` outside double-quoted strings, in order.
fn identifiers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in text.chars() {
        if c == '"' {
            quoted = !quoted;
        }
        if !quoted && ident_char(c) {
            current.push(c);
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Label names an expression uses: in selectors (`name=~"..."`), in `by (...)` and
/// `without (...)`, and `label_values(metric, label)`.
fn labels_used(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut depth_brace = 0;
    let mut quoted = false;
    let mut word = String::new();
    for c in expr.chars() {
        match c {
            '"' => quoted = !quoted,
            '{' if !quoted => depth_brace += 1,
            '}' if !quoted => depth_brace -= 1,
            _ => {}
        }
        if quoted {
            continue;
        }
        if ident_char(c) {
            word.push(c);
            continue;
        }
        if depth_brace > 0 && !word.is_empty() && matches!(c, '=' | '!') {
            out.insert(word.clone());
        }
        word.clear();
    }
    let ids = identifiers(expr);
    for id in &ids {
        if id == "by" || id == "without" {
            // The identifiers up to the group's closing parenthesis.
            let after = expr.split(id.as_str()).nth(1).unwrap_or("");
            if let Some(group) = after
                .trim_start()
                .strip_prefix('(')
                .and_then(|g| g.split_once(')'))
            {
                out.extend(identifiers(group.0));
            }
        }
        if id == "label_values" {
            if let Some(last) = expr.rsplit(',').next() {
                out.extend(identifiers(last));
            }
        }
    }
    out
}

/// What `expr` (with its `legend`) names that sluice does not export.
fn unknown_names(
    expr: &str,
    legend: &str,
    exported: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let metrics: Vec<String> = identifiers(expr)
        .into_iter()
        .filter(|i| i.starts_with("sluice_"))
        .collect();
    if metrics.is_empty() {
        problems.push(format!("{expr}: names no sluice metric"));
    }
    let mut labels = BTreeSet::new();
    for m in &metrics {
        match exported.get(m) {
            Some(l) => labels.extend(l.iter().cloned()),
            None => problems.push(format!("{expr}: {m} is not exported")),
        }
    }
    let mut used = labels_used(expr);
    let mut rest = legend;
    while let Some((_, after)) = rest.split_once("{{") {
        let (name, tail) = after.split_once("}}").unwrap_or((after, ""));
        used.insert(name.trim().to_string());
        rest = tail;
    }
    for l in used {
        if !labels.contains(&l) {
            problems.push(format!("{expr}: label {l} is not on {metrics:?}"));
        }
    }
    problems
}

/// Every (expression, legend) of the dashboard: panel targets and query variables.
fn expressions(dashboard: &Json) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            out.push((
                t["expr"].as_str().unwrap().to_string(),
                t["legendFormat"].as_str().unwrap_or("").to_string(),
            ));
        }
    }
    for v in dashboard["templating"]["list"].as_array().unwrap() {
        if v["type"] == "query" {
            out.push((
                v["query"]["query"].as_str().unwrap().to_string(),
                String::new(),
            ));
        }
    }
    out
}

#[test]
fn grafana_dashboard_names_only_exported_metrics_and_labels() {
    let exported = exported();
    assert!(
        exported.contains_key("sluice_canary_weight"),
        "{exported:?}"
    );
    let dashboard: Json = serde_json::from_str(&crate::support::read_repo_file(
        "examples/grafana/sluice.json",
    ))
    .unwrap();
    let all = expressions(&dashboard);
    assert!(all.len() >= 8, "{all:?}");
    let problems: Vec<String> = all
        .iter()
        .flat_map(|(e, l)| unknown_names(e, l, &exported))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The check itself catches a wrong name and a wrong label.
    assert!(!unknown_names("sluice_canary_wieght", "", &exported).is_empty());
    assert!(!unknown_names("sum by (canary) (sluice_canary_weight)", "", &exported).is_empty());
    assert!(!unknown_names("sluice_canary_weight{ns=\"a\"}", "", &exported).is_empty());
    assert!(!unknown_names("sluice_reconcile_ticks_total", "{{kind}}", &exported).is_empty());
}
