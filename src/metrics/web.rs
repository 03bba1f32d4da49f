//! Argo Rollouts' `web` metric provider: one HTTP request to the metric's `url` (its method,
//! headers and body), and the JSON value its `jsonPath` selects as the result, as Argo's
//! `metricproviders/webmetric` takes it: a non-2xx answer is an error, a body that is not
//! JSON is the result as a string, a path that selects nothing is an error.
//!
//! The request carries only what the template writes: its arguments (a Secret's value only
//! through an argument with `valueFrom.secretKeyRef`, read from the Secrets the operator
//! mapped into the Rollout's namespace, as for every other AnalysisTemplate provider), never
//! the operator's own credentials. It judges nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value as Json;

use crate::core::argo_expr::Value;
use crate::metrics::vendor_http;

/// Argo's default `timeoutSeconds`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// `provider.web` as read from a template, its non-Secret arguments substituted.
#[derive(Debug, Clone, PartialEq)]
pub struct WebRequest {
    /// `url`; Secret-valued arguments are filled in when measuring.
    pub url: String,
    pub method: Method,
    /// `headers[]` in order (`key`, `value`).
    pub headers: Vec<(String, String)>,
    /// `body`, or `jsonBody` as JSON text (then sent as `application/json`).
    pub body: Option<Body>,
    pub timeout: Duration,
    pub insecure: bool,
    pub json_path: JsonPath,
}

/// `method`: Argo's three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
}

/// A request body.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Text(String),
    Json(String),
}

/// One step of a `jsonPath`: a member by name or an element by index.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Key(String),
    Index(i64),
}

/// The subset of Kubernetes JSONPath a web metric selects one value with: `{$}`,
/// `{$.a.b}`, `{.a[0].b}`, `{$['a b']}`. Wildcards, filters, slices, recursion and `range`
/// select several values, of which Argo takes the first; they are refused.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsonPath {
    pub steps: Vec<Step>,
}

impl JsonPath {
    /// Parses `text`; the error says what is not read.
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let t = text.trim();
        let inner = t
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .ok_or_else(|| {
                format!("expected one {{...}} expression such as {{$.status}}, found {text:?}")
            })?;
        let mut rest = inner.trim();
        rest = rest.strip_prefix('$').unwrap_or(rest);
        let mut steps = Vec::new();
        while !rest.is_empty() {
            if rest.starts_with("..") {
                return Err(format!(
                    "{text:?}: recursive descent (..) selects several values; name the path to one"
                ));
            }
            if let Some(after) = rest.strip_prefix('.') {
                let end = after.find(['.', '[']).unwrap_or(after.len());
                let key = &after[..end];
                if key.is_empty() || key == "*" {
                    return Err(format!(
                        "{text:?}: expected a member name after '.', found {:?}",
                        key
                    ));
                }
                steps.push(Step::Key(key.to_string()));
                rest = &after[end..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let close = after
                    .find(']')
                    .ok_or_else(|| format!("{text:?}: unclosed ["))?;
                let inside = after[..close].trim();
                let quoted = inside
                    .strip_prefix('\'')
                    .and_then(|s| s.strip_suffix('\''))
                    .or_else(|| inside.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
                match (quoted, inside.parse::<i64>()) {
                    (Some(key), _) => steps.push(Step::Key(key.to_string())),
                    (None, Ok(i)) => steps.push(Step::Index(i)),
                    (None, Err(_)) => {
                        return Err(format!("{text:?}: [{inside}] selects several values or filters; sluice reads one index or 'name'"))
                    }
                }
                rest = &after[close + 1..];
            } else {
                return Err(format!("{text:?}: expected .name or [index] at {rest:?}"));
            }
        }
        Ok(JsonPath { steps })
    }

    /// The value at this path in `json`, or why there is none (Argo's "is not found").
    pub fn select<'a>(&self, json: &'a Json) -> Result<&'a Json, String> {
        let mut at = json;
        for step in &self.steps {
            at = match (step, at) {
                (Step::Key(k), Json::Object(m)) => m
                    .get(k)
                    .ok_or_else(|| format!("jsonPath: {k} is not found"))?,
                (Step::Index(i), Json::Array(items)) => {
                    let len = items.len() as i64;
                    let i = if *i < 0 { i + len } else { *i };
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| items.get(i))
                        .ok_or_else(|| {
                            format!("jsonPath: index {i} out of range (array of length {len})")
                        })?
                }
                (step, other) => {
                    return Err(format!(
                        "jsonPath: cannot take {step:?} of {}",
                        vendor_http::kind_of(other)
                    ))
                }
            };
        }
        Ok(at)
    }
}

/// A JSON value as a condition's `result` (numbers as floats, as Go decodes them).
pub fn to_value(json: &Json) -> Value {
    match json {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(items) => Value::List(items.iter().map(to_value).collect()),
        Json::Object(m) => Value::Map(
            m.iter()
                .map(|(k, v)| (k.clone(), to_value(v)))
                .collect::<BTreeMap<_, _>>(),
        ),
    }
}

/// Sends `request` with `client`, its `url`, header values and body filled by `fill` (the
/// Secret-valued arguments), and returns the selected result.
pub async fn fetch(
    client: &reqwest::Client,
    request: &WebRequest,
    fill: &dyn Fn(&str) -> Result<String, String>,
) -> Result<Value, String> {
    let url = fill(&request.url)?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "url: expected an http:// or https:// URL, found {:?}",
            crate::url_credentials::redact_url(&url)
        ));
    }
    let parsed = reqwest::Url::parse(&url)
        .map_err(|e| format!("url {}: {e}", crate::url_credentials::redact_url(&url)))?;
    let mut builder = match request.method {
        Method::Get => client.get(parsed),
        Method::Post => client.post(parsed),
        Method::Put => client.put(parsed),
    };
    for (key, value) in &request.headers {
        builder = builder.header(key.as_str(), fill(value)?);
    }
    builder = match &request.body {
        None => builder,
        Some(Body::Text(text)) => builder.body(fill(text)?),
        Some(Body::Json(text)) => builder
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(fill(text)?),
    };
    let shown = crate::url_credentials::redact_url(&url);
    let (status, body) = vendor_http::post(builder, request.timeout)
        .await
        .map_err(|e| format!("{shown}: {e}"))?;
    if !(200..300).contains(&status) {
        return Err(format!("{shown}: received non 2xx response code: {status}"));
    }
    match serde_json::from_slice::<Json>(&body) {
        // Not JSON: Argo judges the body as a string.
        Err(_) => Ok(Value::Str(String::from_utf8_lossy(&body).into_owned())),
        Ok(json) => Ok(to_value(request.json_path.select(&json)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_select_one_value_and_refuse_several() {
        let json: Json =
            serde_json::from_str(r#"{"message":"ok","a":{"b":[1,{"c d":true}]}}"#).unwrap();
        let at = |p: &str| JsonPath::parse(p).and_then(|p| p.select(&json).cloned());
        assert_eq!(at("{$.message}"), Ok(Json::String("ok".into())));
        assert_eq!(at("{.a.b[0]}"), Ok(serde_json::json!(1)));
        assert_eq!(at("{$.a.b[-1]['c d']}"), Ok(Json::Bool(true)));
        assert_eq!(at("{$}"), Ok(json.clone()));
        assert!(at("{$.missing}")
            .unwrap_err()
            .contains("missing is not found"));
        assert!(at("{$.a.b[5]}").unwrap_err().contains("out of range"));
        for several in [
            "{$.a.b[*]}",
            "{..c}",
            "{$.a.b[?(@.c)]}",
            "{$.a.b[0:1]}",
            "$.message",
            "{.a.*}",
        ] {
            assert!(JsonPath::parse(several).is_err(), "{several}");
        }
    }

    #[test]
    fn json_becomes_the_conditions_result() {
        let json: Json = serde_json::from_str(r#"{"major":"1","n":[2.5,null]}"#).unwrap();
        assert_eq!(
            to_value(&json).to_string(),
            r#"{"major": "1", "n": [2.5, nil]}"#
        );
    }
}
