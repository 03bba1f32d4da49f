//! A/B canaries on routers that match request headers only and AND a route's conditions
//! (Contour, App Mesh): the one `analysis.match` they read, each header's one condition, and
//! what an HTTP header name is. The router checks the condition's text its own way.

use crate::route::AbInput;
use crate::yaml::node::{Key, Node, Value};
use crate::yaml::reader::{index, join, Reader};

/// The `headers` mapping of an A/B canary's one `analysis.match`, for routers that match request
/// headers only and AND a route's conditions (Contour, App Mesh): more than one match, none, a
/// non-mapping or a condition other than `headers` is an error naming the router.
pub(crate) fn single_header_match<'a>(
    r: &mut Reader,
    input: &AbInput<'a>,
    router: &str,
    why_one: &str,
) -> Option<AbHeaders<'a>> {
    let path = "spec.analysis.match";
    let items = r.seq(input.matches, path)?;
    if items.len() > 1 {
        r.error(items[1].line, &index(path, 1), format!("{why_one}; put the headers that must all match into one match, or use a router that ORs matches (gatewayapi:v1, istio)"));
        return None;
    }
    let Some(item) = items.first() else {
        r.error(
            input.matches.line,
            path,
            "expected one match for an A/B canary, found none",
        );
        return None;
    };
    let at = index(path, 0);
    let Value::Map(entries) = &item.value else {
        r.error(item.line, &at, "expected a mapping with headers");
        return None;
    };
    for (key, _) in entries.iter().filter(|(k, _)| k.text != "headers") {
        r.error(key.line, &join(&at, &key.text), format!("Flagger's {router} router matches request headers only, so this condition would be dropped; remove it, or use a router that matches it (gatewayapi:v1, istio)"));
    }
    let headers = r.required(item, &at, "headers")?;
    let at = join(&at, "headers");
    let Value::Map(headers) = &headers.value else {
        r.error(
            headers.line,
            &at,
            "expected a mapping of header names to matches",
        );
        return None;
    };
    Some(AbHeaders {
        item,
        path: at,
        headers,
    })
}

/// What [`single_header_match`] found.
pub(crate) struct AbHeaders<'a> {
    /// The one `analysis.match` item.
    pub item: &'a Node,
    /// The field path of its `headers`.
    pub path: String,
    /// Header names and their matches, in document order.
    pub headers: &'a [(Key, Node)],
}

/// One header condition of [`AbHeaders`], as [`read_header_matches`] hands it to the router.
pub(crate) struct HeaderMatchText<'a> {
    /// The header name.
    pub name: &'a Key,
    /// Its one condition: `exact`, `prefix`, `suffix` or `regex`.
    pub kind: &'a Key,
    /// The condition's value node and its string.
    pub value: &'a Node,
    pub text: String,
    /// The field path of the condition (`spec.analysis.match[0].headers.x-user.exact`).
    pub field: String,
}

/// Reads each header of `ab` in document order: a name `name_error` has no message for (else
/// that message at the name), mapped to exactly one of `exact`, `prefix`, `suffix` or `regex`
/// (`kinds` says which the router takes, for the message: `exact, prefix or suffix`) holding
/// a string. `convert` checks the text its router's way and builds its match, or reports why
/// not and returns `None`. When nothing is read and nothing was reported, the match is an
/// error: an A/B canary needs at least one header.
pub(crate) fn read_header_matches<T>(
    r: &mut Reader,
    ab: &AbHeaders,
    name_error: impl Fn(&str) -> Option<String>,
    kinds: &str,
    mut convert: impl FnMut(&mut Reader, HeaderMatchText) -> Option<T>,
) -> Vec<T> {
    let before = r.errors.len();
    let mut out = Vec::with_capacity(ab.headers.len());
    for (name, m) in ab.headers {
        let at = join(&ab.path, &name.text);
        if let Some(message) = name_error(&name.text) {
            r.error(name.line, &at, message);
            continue;
        }
        if r.map(m, &at, &["exact", "prefix", "suffix", "regex"])
            .is_none()
        {
            continue;
        }
        let Value::Map(conditions) = &m.value else {
            continue;
        };
        let [(kind, value)] = conditions.as_slice() else {
            r.error(
                m.line,
                &at,
                format!("expected one of {kinds}, found {}", conditions.len()),
            );
            continue;
        };
        let field = join(&at, &kind.text);
        let Some(text) = r.string(value, &field) else {
            continue;
        };
        let header = HeaderMatchText {
            name,
            kind,
            value,
            text,
            field,
        };
        out.extend(convert(r, header));
    }
    if out.is_empty() && r.errors.len() == before {
        r.error(ab.item.line, &ab.path, "expected at least one header match");
    }
    out
}

/// An HTTP header name (an RFC 7230 token).
pub(crate) fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_tokens() {
        assert!(is_header_name("x-canary"));
        assert!(is_header_name("Cookie"));
        assert!(!is_header_name(""));
        assert!(!is_header_name("x canary"));
        assert!(!is_header_name("x:canary"));
    }
}
