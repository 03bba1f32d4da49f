//! Flagger's Istio-style route fields -> validated Gateway API HTTPRoute pieces.
//!
//! Flagger's matches are Istio `HTTPMatchRequest`s. Converted: `uri` (exact → Exact, prefix →
//! PathPrefix, regex → RegularExpression; note PathPrefix matches whole path segments where
//! Istio's prefix matches characters), `method` (exact), `headers` and `queryParams` (exact →
//! Exact, regex → RegularExpression, prefix → an anchored RegularExpression of the escaped
//! prefix, since Gateway API has no prefix match for them). Anything else is an error, never
//! dropped: a dropped condition would send more traffic to the canary than asked.
//!
//! The HTTPRoute CRD's JSON schema does not check its CEL rules, so the checks here include the
//! CEL rules a converted value could break. Pure: no IO.

use serde_json::{Map, Value as Json};

use crate::spec::model::{HttpMatch, PathMatch, ValueMatch};

/// HTTPRoute limits from the CRD (`maxItems`, `maxLength`).
pub const MAX_MATCHES_PER_RULE: usize = 64;
const MAX_HEADERS: usize = 16;
const MAX_QUERY_PARAMS: usize = 16;
const MAX_HEADER_VALUE: usize = 4096;
const MAX_QUERY_VALUE: usize = 1024;
const MAX_PATH: usize = 1024;
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// One Istio `HTTPMatchRequest`; the error is `(field, message)`, `field` starting with `at`.
pub fn convert_match(value: &Json, at: &str) -> Result<HttpMatch, (String, String)> {
    let object = value.as_object().ok_or_else(|| {
        (
            at.to_string(),
            format!("expected a match such as {{headers: {{x-canary: {{exact: insider}}}}}}, found {value}"),
        )
    })?;
    let mut out = HttpMatch::all_requests();
    if object.is_empty() {
        return Err((at.to_string(), "expected at least one of uri, method, headers, queryParams; an empty match would send every request to the canary".into()));
    }
    for (key, value) in object {
        let field = format!("{at}.{key}");
        match key.as_str() {
            "uri" => out.path = convert_path(value, &field)?,
            "method" => out.method = Some(convert_method(value, &field)?),
            "headers" => {
                out.headers = convert_named(value, &field, MAX_HEADERS, MAX_HEADER_VALUE)?
            }
            "queryParams" => {
                out.query_params =
                    convert_named(value, &field, MAX_QUERY_PARAMS, MAX_QUERY_VALUE)?
            }
            other => {
                return Err((
                    field,
                    format!("HTTPRoute has no equivalent of the Istio match field {other:?}; sluice converts uri, method, headers and queryParams"),
                ))
            }
        }
    }
    Ok(out)
}

/// An Istio `StringMatch`: exactly one of `exact`, `prefix`, `regex`, with a non-empty string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StringMatch<'a> {
    Exact(&'a str),
    Prefix(&'a str),
    Regex(&'a str),
}

fn string_match<'a>(value: &'a Json, field: &str) -> Result<StringMatch<'a>, (String, String)> {
    let wrong = || {
        (
            field.to_string(),
            format!("expected exactly one of exact, prefix or regex with a non-empty string (e.g. {{exact: insider}}), found {value}"),
        )
    };
    let object = value.as_object().ok_or_else(wrong)?;
    let mut entries = object.iter();
    let (Some((kind, text)), None) = (entries.next(), entries.next()) else {
        return Err(wrong());
    };
    let text = text.as_str().filter(|t| !t.is_empty()).ok_or_else(wrong)?;
    match kind.as_str() {
        "exact" => Ok(StringMatch::Exact(text)),
        "prefix" => Ok(StringMatch::Prefix(text)),
        "regex" => Ok(StringMatch::Regex(text)),
        _ => Err(wrong()),
    }
}

fn convert_path(value: &Json, field: &str) -> Result<PathMatch, (String, String)> {
    let (kind, text) = match string_match(value, field)? {
        StringMatch::Exact(t) => ("Exact", t),
        StringMatch::Prefix(t) => ("PathPrefix", t),
        StringMatch::Regex(t) => ("RegularExpression", t),
    };
    let problem = if text.len() > MAX_PATH {
        Some(format!("at most {MAX_PATH} characters"))
    } else if kind == "RegularExpression" {
        None
    } else {
        path_problem(text)
    };
    match problem {
        Some(problem) => Err((
            field.to_string(),
            format!("expected an HTTPRoute path ({problem}), found {text:?}"),
        )),
        None => Ok(PathMatch {
            kind,
            value: text.to_string(),
        }),
    }
}

/// The HTTPRoute CEL rules for Exact and PathPrefix paths.
fn path_problem(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some("an absolute path starting with '/'".into());
    }
    for bad in ["//", "/./", "/../", "%2f", "%2F", "#"] {
        if path.contains(bad) {
            return Some(format!("must not contain {bad:?}"));
        }
    }
    if path.ends_with("/..") || path.ends_with("/.") {
        return Some("must not end with \"/.\" or \"/..\"".into());
    }
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3);
            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                return Some("'%' must start a %XX escape".into());
            }
            i += 3;
            continue;
        }
        if !(b.is_ascii_alphanumeric() || b"-/._~!$&'()*+,;=:@".contains(&b)) {
            return Some("only letters, digits, %XX escapes and -/._~!$&'()*+,;=:@".into());
        }
        i += 1;
    }
    None
}

fn convert_method(value: &Json, field: &str) -> Result<String, (String, String)> {
    match string_match(value, field)? {
        StringMatch::Exact(method) if METHODS.contains(&method) => Ok(method.to_string()),
        _ => Err((
            field.to_string(),
            format!(
                "expected {{exact: METHOD}} with METHOD one of {}, found {value}",
                METHODS.join(", ")
            ),
        )),
    }
}

/// `headers` or `queryParams`: a map of name to `StringMatch`.
fn convert_named(
    value: &Json,
    field: &str,
    max_items: usize,
    max_value: usize,
) -> Result<Vec<ValueMatch>, (String, String)> {
    let object: &Map<String, Json> = value.as_object().ok_or_else(|| {
        (
            field.to_string(),
            format!("expected a map of name to {{exact|prefix|regex: value}}, found {value}"),
        )
    })?;
    if object.is_empty() || object.len() > max_items {
        return Err((
            field.to_string(),
            format!("expected 1 to {max_items} entries, found {}", object.len()),
        ));
    }
    let mut out = Vec::with_capacity(object.len());
    for (name, matcher) in object {
        let at = format!("{field}.{name}");
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || name.len() > 256 || !name.bytes().all(token) {
            return Err((
                at,
                format!("expected an HTTP token name (letters, digits and !#$%&'*+-.^_`|~, at most 256), found {name:?}"),
            ));
        }
        let (kind, text) = match string_match(matcher, &at)? {
            StringMatch::Exact(t) => ("Exact", t.to_string()),
            StringMatch::Regex(t) => ("RegularExpression", t.to_string()),
            StringMatch::Prefix(t) => ("RegularExpression", format!("^{}.*", regex_escape(t))),
        };
        if text.len() > max_value {
            return Err((
                at,
                format!(
                    "expected a value of at most {max_value} characters, found {}",
                    text.len()
                ),
            ));
        }
        out.push(ValueMatch {
            name: name.clone(),
            kind,
            value: text,
        });
    }
    // Sorted by name so the output never depends on map ordering features.
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Escapes regex metacharacters so a prefix matches literally in RE2, PCRE and ECMAScript.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(value: Json) -> Result<HttpMatch, (String, String)> {
        convert_match(&value, "spec.analysis.match[0]")
    }

    #[test]
    fn flagger_header_matches_become_httproute_header_matches() {
        let m = one(json!({"headers": {
            "x-canary": {"exact": "insider"},
            "user-agent": {"regex": ".*Firefox.*"},
            "cookie": {"prefix": "canary=a.b"},
        }}))
        .unwrap();
        assert_eq!(m.path, HttpMatch::all_requests().path);
        let headers: Vec<(&str, &str, &str)> = m
            .headers
            .iter()
            .map(|h| (h.name.as_str(), h.kind, h.value.as_str()))
            .collect();
        assert_eq!(
            headers,
            [
                ("cookie", "RegularExpression", "^canary=a\\.b.*"),
                ("user-agent", "RegularExpression", ".*Firefox.*"),
                ("x-canary", "Exact", "insider"),
            ]
        );
    }

    #[test]
    fn uri_method_and_query_params_convert() {
        let m = one(json!({
            "uri": {"prefix": "/api"},
            "method": {"exact": "POST"},
            "queryParams": {"canary": {"exact": "true"}},
        }))
        .unwrap();
        assert_eq!((m.path.kind, m.path.value.as_str()), ("PathPrefix", "/api"));
        assert_eq!(m.method.as_deref(), Some("POST"));
        assert_eq!(m.query_params[0].kind, "Exact");
    }

    #[test]
    fn unconvertible_matches_name_the_field() {
        let cases = [
            (
                json!({"sourceLabels": {"app": "x"}}),
                "spec.analysis.match[0].sourceLabels",
                "no equivalent",
            ),
            (
                json!({"headers": {"x-canary": {"suffix": "a"}}}),
                "spec.analysis.match[0].headers.x-canary",
                "exactly one of",
            ),
            (
                json!({"headers": {"x-canary": {}}}),
                "spec.analysis.match[0].headers.x-canary",
                "exactly one of",
            ),
            (
                json!({"headers": {"x-canary": {"exact": ""}}}),
                "spec.analysis.match[0].headers.x-canary",
                "non-empty",
            ),
            (
                json!({"headers": {"x-canary": {"exact": "a", "regex": "b"}}}),
                "spec.analysis.match[0].headers.x-canary",
                "exactly one of",
            ),
            (
                json!({"headers": {"x canary": {"exact": "a"}}}),
                "spec.analysis.match[0].headers.x canary",
                "token",
            ),
            (
                json!({"headers": {}}),
                "spec.analysis.match[0].headers",
                "1 to 16",
            ),
            (
                json!({"method": {"exact": "FETCH"}}),
                "spec.analysis.match[0].method",
                "METHOD one of",
            ),
            (
                json!({"method": {"prefix": "GE"}}),
                "spec.analysis.match[0].method",
                "METHOD one of",
            ),
            (
                json!({"uri": {"exact": "api"}}),
                "spec.analysis.match[0].uri",
                "starting with '/'",
            ),
            (
                json!({"uri": {"prefix": "/a//b"}}),
                "spec.analysis.match[0].uri",
                "\"//\"",
            ),
            (
                json!({"uri": {"prefix": "/a b"}}),
                "spec.analysis.match[0].uri",
                "only letters",
            ),
            (
                json!({"uri": {"prefix": "/a%zz"}}),
                "spec.analysis.match[0].uri",
                "%XX",
            ),
            (json!({}), "spec.analysis.match[0]", "empty match"),
            (
                json!("x-canary"),
                "spec.analysis.match[0]",
                "expected a match",
            ),
        ];
        for (value, field, message) in cases {
            let (f, m) = one(value.clone()).expect_err(&value.to_string());
            assert_eq!(f, field, "{value}");
            assert!(m.contains(message), "{value}: {m}");
        }
    }

    #[test]
    fn regex_paths_skip_the_literal_path_rules() {
        let m = one(json!({"uri": {"regex": "/api/v[0-9]+/.*"}})).unwrap();
        assert_eq!(m.path.kind, "RegularExpression");
    }

    #[test]
    fn path_rules_accept_ordinary_paths() {
        for ok in ["/", "/api", "/api/v1/", "/a%2Bb", "/~user/a.b"] {
            assert_eq!(path_problem(ok), None, "{ok}");
        }
        for bad in ["/a/.", "/a/..", "/a#b", "/a%2fb", "/a/../b"] {
            assert!(path_problem(bad).is_some(), "{bad}");
        }
    }
}
