//! Renders metric query text: the small subset of Go's text/template that Flagger's queries use.
//!
//! Rendering is a strict substitution, not a template engine: Flagger's queries use only
//! `{{ name }}`, `{{ namespace }}`, `{{ target }}`, `{{ service }}`, `{{ ingress }}`,
//! `{{ route }}`, `{{ interval }}` and `{{ variables.KEY }}` (Go text/template calls of the
//! functions in Flagger's `MetricTemplateModel`), with optional `{{-`/`-}}` trim markers. Anything
//! else (`{{ .Namespace }}`, `{{ if }}`, pipelines) is an error at load time ([`check`]), and a
//! `variables.KEY` the metric does not set is an error at render time, as in Flagger, which
//! renders with `missingkey=error`. MetricTemplates (`metric_templates.rs`) and the built-in
//! queries (`builtin.rs`) share it. This module does no IO.

use std::collections::BTreeMap;

/// The values a query is rendered with (Flagger's `MetricTemplateModel`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryModel {
    /// The canary's name.
    pub name: String,
    pub namespace: String,
    /// The Deployment that receives the canary's traffic (Flagger's `targetRef.name`).
    pub target: String,
    /// The apex Service name.
    pub service: String,
    /// Flagger's `ingressRef.name`, which defaults to the target.
    pub ingress: String,
    /// Flagger's `routeRef.name`, which defaults to the target.
    pub route: String,
    /// The metric's range-vector window in PromQL syntax (`1m`, `30s`).
    pub interval: String,
    /// `templateVariables` of the metric.
    pub variables: BTreeMap<String, String>,
}

/// Why a query text cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("unclosed \"{{{{\" at character {at}")]
    Unclosed { at: usize },
    #[error("unsupported template action \"{{{{{action}}}}}\"; expected {SUPPORTED}")]
    Unsupported { action: String },
    #[error("{{{{ variables.{key} }}}} is used but templateVariables has no key {key:?}")]
    MissingVariable { key: String },
}

const SUPPORTED: &str = "one of {{ name }}, {{ namespace }}, {{ target }}, {{ service }}, {{ ingress }}, {{ route }}, {{ interval }}, {{ variables.KEY }}";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Name,
    Namespace,
    Target,
    Service,
    Ingress,
    Route,
    Interval,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Field(Field),
    Variable(&'a str),
}

fn is_key(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn action(inner: &str) -> Option<Piece<'_>> {
    let field = match inner {
        "name" => Field::Name,
        "namespace" => Field::Namespace,
        "target" => Field::Target,
        "service" => Field::Service,
        "ingress" => Field::Ingress,
        "route" => Field::Route,
        "interval" => Field::Interval,
        other => {
            let key = other.strip_prefix("variables.")?;
            return is_key(key).then_some(Piece::Variable(key));
        }
    };
    Some(Piece::Field(field))
}

/// Splits a query into text and actions, applying Go's trim markers to the text.
fn parse(text: &str) -> Result<Vec<Piece<'_>>, RenderError> {
    let mut pieces = Vec::new();
    let mut rest = text;
    let mut trim_next = false;
    loop {
        let Some(open) = rest.find("{{") else {
            let tail = if trim_next { rest.trim_start() } else { rest };
            pieces.push(Piece::Text(tail));
            return Ok(pieces);
        };
        let mut before = &rest[..open];
        if trim_next {
            before = before.trim_start();
        }
        let after_open = &rest[open + 2..];
        let Some(close) = after_open.find("}}") else {
            return Err(RenderError::Unclosed {
                at: text[..text.len() - rest.len() + open].chars().count() + 1,
            });
        };
        let mut inner = &after_open[..close];
        // Go's trim markers are "{{- " and " -}}": the dash must touch the braces and be
        // followed (or preceded) by white space.
        if let Some(stripped) = inner.strip_prefix('-') {
            if stripped.starts_with(char::is_whitespace) {
                before = before.trim_end();
                inner = stripped;
            }
        }
        trim_next = false;
        if let Some(stripped) = inner.strip_suffix('-') {
            if stripped.ends_with(char::is_whitespace) {
                trim_next = true;
                inner = stripped;
            }
        }
        pieces.push(Piece::Text(before));
        let inner = inner.trim();
        match action(inner) {
            Some(piece) => pieces.push(piece),
            None => {
                return Err(RenderError::Unsupported {
                    action: inner.to_string(),
                })
            }
        }
        rest = &after_open[close + 2..];
    }
}

/// Checks a query's syntax without values (load time).
pub fn check(text: &str) -> Result<(), RenderError> {
    parse(text).map(|_| ())
}

/// Renders a query with the model's values.
pub fn render(text: &str, model: &QueryModel) -> Result<String, RenderError> {
    let mut out = String::with_capacity(text.len());
    for piece in parse(text)? {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Field(f) => out.push_str(match f {
                Field::Name => &model.name,
                Field::Namespace => &model.namespace,
                Field::Target => &model.target,
                Field::Service => &model.service,
                Field::Ingress => &model.ingress,
                Field::Route => &model.route,
                Field::Interval => &model.interval,
            }),
            Piece::Variable(key) => match model.variables.get(key) {
                Some(v) => out.push_str(v),
                None => {
                    return Err(RenderError::MissingVariable {
                        key: key.to_string(),
                    })
                }
            },
        }
    }
    Ok(out)
}

/// podinfo in `test`, every object named `podinfo`, a 1m interval and no variables: the
/// model the unit tests of the metrics modules render their queries with.
#[cfg(test)]
pub(crate) fn podinfo_model() -> QueryModel {
    QueryModel {
        name: "podinfo".into(),
        namespace: "test".into(),
        target: "podinfo".into(),
        service: "podinfo".into(),
        ingress: "podinfo".into(),
        route: "podinfo".into(),
        interval: "1m".into(),
        variables: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> QueryModel {
        QueryModel {
            service: "podinfo-svc".into(),
            ingress: "podinfo-ing".into(),
            route: "podinfo-route".into(),
            variables: BTreeMap::from([("cluster".into(), "dev".into())]),
            ..podinfo_model()
        }
    }

    #[test]
    fn render_substitutes_every_field_and_variables() {
        let text = "{{ name }} {{namespace}} {{ target }} {{ service }} {{ ingress }} {{ route }} [{{ interval }}] {{ variables.cluster }}";
        assert_eq!(
            render(text, &model()).unwrap(),
            "podinfo test podinfo podinfo-svc podinfo-ing podinfo-route [1m] dev"
        );
    }

    #[test]
    fn render_reproduces_flaggers_variables_example() {
        // Flagger's render_test.go `ok_with_variables`.
        let mut m = model();
        m.variables = BTreeMap::from([
            ("cluster".into(), "dev".into()),
            ("consumer_group".into(), "my_consumer".into()),
        ]);
        let text = r#"delta(max by (consumer_group) (kafka_consumer_current_offset{cluster="{{ variables.cluster }}", consumer_group="{{ variables.consumer_group }}"}[{{ interval }}]))"#;
        assert_eq!(
            render(text, &m).unwrap(),
            r#"delta(max by (consumer_group) (kafka_consumer_current_offset{cluster="dev", consumer_group="my_consumer"}[1m]))"#
        );
    }

    #[test]
    fn missing_variable_is_an_error_not_an_empty_string() {
        let err = render("x{c=\"{{ variables.nope }}\"}", &model()).unwrap_err();
        assert_eq!(err, RenderError::MissingVariable { key: "nope".into() });
        assert!(err
            .to_string()
            .contains("templateVariables has no key \"nope\""));
    }

    #[test]
    fn unsupported_actions_are_errors() {
        for text in [
            "{{ .Namespace }}",
            "{{ if true }}x{{ end }}",
            "{{ namespace | printf \"%s\" }}",
            "{{ variables }}",
            "{{ variables.a-b }}",
            "{{}}",
            "{{ Namespace }}",
        ] {
            let err = check(text).unwrap_err();
            assert!(
                matches!(err, RenderError::Unsupported { .. }),
                "{text}: {err:?}"
            );
        }
        assert_eq!(
            check("sum(x{a=\"{{ target\"})"),
            Err(RenderError::Unclosed { at: 10 })
        );
    }

    #[test]
    fn trim_markers_eat_surrounding_white_space_like_go() {
        assert_eq!(
            render("a  {{- target -}}  b", &model()).unwrap(),
            "apodinfob"
        );
        assert_eq!(render("a {{- target }} b", &model()).unwrap(), "apodinfo b");
        assert_eq!(
            render("a {{ target -}}\n b", &model()).unwrap(),
            "a podinfob"
        );
    }

    #[test]
    fn text_without_actions_is_unchanged() {
        assert_eq!(render("vector(1)", &model()).unwrap(), "vector(1)");
        assert_eq!(render("", &model()).unwrap(), "");
        assert_eq!(render("a } b {", &model()).unwrap(), "a } b {");
    }
}
