//! The dashboard's HTML: minijinja templates embedded in the binary (`templates/dashboard/`),
//! with HTML auto-escaping on for every template (their names end in `.html`): a value from
//! the repo is text on the page, never markup. The charts' geometry comes from `chart.rs`.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use minijinja::value::Serde;
use minijinja::{context, Environment, Value};

use super::chart;
use super::model::{ReleaseView, Summary};
use super::{Detail, Overview};

/// The embedded stylesheet and script, served under `/assets/`.
pub const CSS: &str = include_str!("../../templates/dashboard/dashboard.css");
pub const JS: &str = include_str!("../../templates/dashboard/dashboard.js");

const TEMPLATES: [(&str, &str); 11] = [
    (
        "base.html",
        include_str!("../../templates/dashboard/base.html"),
    ),
    (
        "overview.html",
        include_str!("../../templates/dashboard/overview.html"),
    ),
    (
        "overview_rows.html",
        include_str!("../../templates/dashboard/overview_rows.html"),
    ),
    (
        "wait.html",
        include_str!("../../templates/dashboard/wait.html"),
    ),
    (
        "canary.html",
        include_str!("../../templates/dashboard/canary.html"),
    ),
    (
        "canary_body.html",
        include_str!("../../templates/dashboard/canary_body.html"),
    ),
    (
        "release.html",
        include_str!("../../templates/dashboard/release.html"),
    ),
    (
        "release_body.html",
        include_str!("../../templates/dashboard/release_body.html"),
    ),
    (
        "images.html",
        include_str!("../../templates/dashboard/images.html"),
    ),
    (
        "ticks.html",
        include_str!("../../templates/dashboard/ticks.html"),
    ),
    (
        "error.html",
        include_str!("../../templates/dashboard/error.html"),
    ),
];

fn env() -> &'static Result<Environment<'static>, String> {
    static ENV: OnceLock<Result<Environment<'static>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        // Explicit, whatever minijinja's default: every page escapes HTML.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
        // `2026-12-02T06:44:04.26Z` as `2026-12-02 06:44:04 UTC`; other text as it is.
        env.add_filter("when", |text: String| {
            match text.parse::<jiff::Timestamp>() {
                Ok(t) => t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
                Err(_) => text,
            }
        });
        // The judge's numbers: four significant digits, `-` for none.
        env.add_filter("num", |v: Option<f64>| crate::judge::report::num(v));
        // Path segments and query values: everything but letters and digits encoded.
        env.add_filter("urlencode", |text: String| {
            percent_encoding::utf8_percent_encode(&text, percent_encoding::NON_ALPHANUMERIC)
                .to_string()
        });
        for (name, text) in TEMPLATES {
            env.add_template(name, text).map_err(|e| e.to_string())?;
        }
        Ok(env)
    })
}

fn render(name: &str, ctx: Value) -> anyhow::Result<String> {
    let env = env()
        .as_ref()
        .map_err(|e| anyhow::anyhow!("dashboard templates: {e}"))?;
    Ok(env.get_template(name)?.render(ctx)?)
}

/// The overview's filters (`?namespace=&phase=`); empty matches all.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Filter {
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub phase: String,
}

/// A line of the overview's table: a canary, or a release heading its waves' lines.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum Line<'a> {
    Canary { c: &'a Summary },
    Release { r: &'a ReleaseView },
}

/// The overview's lines: the canaries `shown` in order, but a release's waves together (in
/// wave order) under a line for their release, where its first shown wave would be.
fn lines<'a>(o: &'a Overview, shown: &[&'a Summary]) -> Vec<Line<'a>> {
    let mut out = Vec::new();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for c in shown {
        let Some(release) = c.release.as_deref() else {
            out.push(Line::Canary { c });
            continue;
        };
        if !done.insert(release) {
            continue;
        }
        let Some(r) = o
            .releases
            .iter()
            .find(|r| format!("{}/{}", r.namespace, r.name) == release)
        else {
            out.push(Line::Canary { c });
            continue;
        };
        out.push(Line::Release { r });
        for w in &r.waves {
            if let Some(c) = shown
                .iter()
                .find(|s| s.namespace == w.canary.namespace && s.name == w.canary.name)
            {
                out.push(Line::Canary { c });
            }
        }
    }
    out
}

fn overview_context(o: &Overview, filter: &Filter) -> Value {
    let shown: Vec<&Summary> = o
        .canaries
        .iter()
        .filter(|c| filter.namespace.is_empty() || c.namespace == filter.namespace)
        .filter(|c| filter.phase.is_empty() || c.phase == filter.phase)
        .collect();
    let lines = lines(o, &shown);
    let namespaces: BTreeSet<String> = o.canaries.iter().map(|c| c.namespace.clone()).collect();
    let phases: BTreeSet<String> = o.canaries.iter().map(|c| c.phase.clone()).collect();
    context! {
        head => o.head.clone(),
        shown => shown.len(),
        lines => Serde(lines),
        total => o.canaries.len(),
        refusals => o.refusals.clone(),
        namespaces => namespaces,
        phases => phases,
        namespace => filter.namespace.clone(),
        phase => filter.phase.clone(),
    }
}

/// The overview page.
pub fn overview(o: &Overview, filter: &Filter) -> anyhow::Result<String> {
    render("overview.html", overview_context(o, filter))
}

/// The overview's live part, which the page's script fetches again.
pub fn overview_fragment(o: &Overview, filter: &Filter) -> anyhow::Result<String> {
    render("overview_rows.html", overview_context(o, filter))
}

fn canary_context(head: &str, d: &Detail) -> Value {
    // One axis for every chart: the span of every decision drawn.
    let times = d.weights.iter().map(|p| p.time.as_str()).chain(
        d.metrics
            .iter()
            .flat_map(|m| m.points.iter().map(|p| p.time.as_str())),
    );
    let axis = chart::TimeAxis::of(times);
    let wchart = chart::weights(&d.weights, &axis);
    let mcharts: Vec<chart::MetricChart> =
        d.metrics.iter().map(|m| chart::metric(m, &axis)).collect();
    context! {
        head => head.to_string(),
        c => Serde(d.clone()),
        wchart => Serde(wchart),
        mcharts => Serde(mcharts),
        width => chart::WIDTH,
        height => chart::HEIGHT,
    }
}

/// A canary's page.
pub fn canary(head: &str, d: &Detail) -> anyhow::Result<String> {
    render("canary.html", canary_context(head, d))
}

/// A canary page's live part.
pub fn canary_fragment(head: &str, d: &Detail) -> anyhow::Result<String> {
    render("canary_body.html", canary_context(head, d))
}

fn release_context(head: &str, r: &ReleaseView) -> Value {
    context! { head => head.to_string(), r => Serde(r) }
}

/// A release's page: its waves in order.
pub fn release(head: &str, r: &ReleaseView) -> anyhow::Result<String> {
    render("release.html", release_context(head, r))
}

/// A release page's live part.
pub fn release_fragment(head: &str, r: &ReleaseView) -> anyhow::Result<String> {
    render("release_body.html", release_context(head, r))
}

/// A page that says what went wrong (no canary by that name, the repo not read yet).
pub fn error(title: &str, message: &str) -> anyhow::Result<String> {
    render(
        "error.html",
        context! { head => "-------", title => title, message => message },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_escapes_repo_text() {
        let page = error("<script>x</script>", "\"><img src=x onerror=y>").unwrap();
        assert!(!page.contains("<script>x"), "{page}");
        assert!(!page.contains("<img src=x"), "{page}");
        assert!(page.contains("&lt;script&gt;x"), "{page}");
    }
}
