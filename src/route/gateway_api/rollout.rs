//! Flagger's `analysis` fields that put rollout state on the HTTPRoute: `sessionAffinity`
//! (the cookie's attributes; its name is the core's) and `mirror` / `mirrorWeight`.
//!
//! Read here rather than in `spec`, since what can be rendered is this router's business:
//! Flagger's Gateway API router mirrors only blue/green analyses (its scheduler asks for a
//! mirror step on the canary strategy too, which this router cannot show, so the canary would
//! stay at weight 0), and its cookie rule would lose the A/B matches, the service match
//! headers, or make a second `ResponseHeaderModifier` in one rule (which the CRD forbids).
//! Each of those is refused with its line.

use crate::route::gateway_api::config::{AnalysisMirror, CookieAttributes};
use crate::route::FlaggerInput;
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};

const ANALYSIS: &str = "spec.analysis";

/// Why a Gateway API route does not mirror a canary or an A/B analysis.
const MIRROR_NOT_BLUE_GREEN: &str = "Gateway API routes mirror only during a blue/green analysis (iterations without match), as Flagger's router does; with stepWeight(s) Flagger would hold the canary at weight 0 and with A/B it ignores mirror. Remove mirror, or use iterations without match";

/// The cookie attributes and the mirror; `None` when any had errors (reported through `r`).
pub(super) fn read(
    r: &mut Reader,
    input: &FlaggerInput,
) -> Option<(Option<CookieAttributes>, Option<AnalysisMirror>)> {
    let Some(analysis) = input.analysis else {
        return Some((None, None));
    };
    let errors_before = r.errors.len();
    let shape = Shape::of(analysis);
    let cookie = analysis
        .get("sessionAffinity")
        .and_then(|n| read_session_affinity(r, n, input.service, shape));
    let mirror = read_mirror(
        r,
        analysis,
        analysis.get("mirrorWeight"),
        shape,
        [MIRROR_NOT_BLUE_GREEN, MIRROR_NOT_BLUE_GREEN],
    );
    (r.errors.len() == errors_before).then_some((cookie, mirror))
}

/// Which strategy the analysis asks for, as far as these fields care (the spec reader checks
/// the strategy itself and reports its errors). Istio's reader asks the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Canary,
    BlueGreen,
    AB,
}

impl Shape {
    pub(crate) fn of(analysis: &Node) -> Shape {
        let ab = matches!(analysis.get("match").map(|n| &n.value), Some(Value::Seq(items)) if !items.is_empty());
        let weighted =
            analysis.get("stepWeight").is_some() || analysis.get("stepWeights").is_some();
        let iterations = analysis
            .get("iterations")
            .and_then(Node::as_str)
            .and_then(|t| t.parse::<i64>().ok())
            .is_some_and(|i| i > 0);
        if ab {
            Shape::AB
        } else if iterations && !weighted {
            Shape::BlueGreen
        } else {
            Shape::Canary
        }
    }
}

/// A plain `true` (the spec reader reports anything else for `mirror`).
fn is_true(node: &Node) -> bool {
    matches!(&node.value, Value::Scalar { text, quoted: false } if text == "true")
}

/// `analysis.mirror` and its `mirrorWeight` (`weight`, as the router looks it up). A mirror
/// runs only during a blue/green analysis: `refused` holds the messages at `mirror` for a
/// canary and for an A/B analysis, in that order.
pub(crate) fn read_mirror(
    r: &mut Reader,
    analysis: &Node,
    weight: Option<&Node>,
    shape: Shape,
    refused: [&str; 2],
) -> Option<AnalysisMirror> {
    let Some(mirror) = analysis.get("mirror").filter(|n| is_true(n)) else {
        if let Some(w) = weight {
            r.error(
                w.line,
                &join(ANALYSIS, "mirrorWeight"),
                "applies only with analysis.mirror: true; remove it, or set mirror: true",
            );
        }
        return None;
    };
    let refusal = match shape {
        Shape::BlueGreen => None,
        Shape::Canary => Some(refused[0]),
        Shape::AB => Some(refused[1]),
    };
    if let Some(message) = refusal {
        r.error(mirror.line, &join(ANALYSIS, "mirror"), message);
        return None;
    }
    let percent = match weight {
        None => None,
        Some(w) => {
            let v = r.int(w, &join(ANALYSIS, "mirrorWeight"), 0, 100)?;
            // 0 is Flagger's "not set": every request is mirrored.
            u8::try_from(v).ok().filter(|p| *p > 0)
        }
    };
    Some(AnalysisMirror { percent })
}

fn read_session_affinity(
    r: &mut Reader,
    node: &Node,
    service: Option<&Node>,
    shape: Shape,
) -> Option<CookieAttributes> {
    let path = join(ANALYSIS, "sessionAffinity");
    if !matches!(node.value, Value::Map(_)) {
        // The spec reader reports the shape.
        return None;
    }
    if shape == Shape::AB {
        r.error(node.line, &path, "not supported with A/B testing (analysis.match) on Gateway API routes: Flagger's router puts the A/B matches in place of the cookie match, so neither works; use sessionAffinity with stepWeight(s) or iterations without match");
    }
    if let Some(response) = service
        .and_then(|s| s.get("headers"))
        .and_then(|h| h.get("response"))
    {
        r.error(response.line, "spec.service.headers.response", "cannot be combined with analysis.sessionAffinity on Gateway API routes: the rule that expires the session cookie would carry two ResponseHeaderModifier filters, which the HTTPRoute CRD forbids");
    }
    if let Some(Value::Seq(matches)) = service.and_then(|s| s.get("match")).map(|n| &n.value) {
        for (i, m) in matches.iter().enumerate() {
            if let Some(h) = m.get("headers") {
                r.error(h.line, &join(&index("spec.service.match", i), "headers"), "cannot be combined with analysis.sessionAffinity on Gateway API routes: Flagger's cookie rule replaces these headers with the cookie match, so sticky requests would skip them");
            }
        }
    }
    read_cookie_attributes(r, node, &path)
}

/// The `Set-Cookie` attributes of `analysis.sessionAffinity` (`maxAge`, `domain`, `path`,
/// `sameSite`, `httpOnly`, `partitioned`, `secure`), as every router that renders the
/// session cookie writes them; `None` when any is wrong (reported through `r`).
pub(crate) fn read_cookie_attributes(
    r: &mut Reader,
    node: &Node,
    path: &str,
) -> Option<CookieAttributes> {
    let mut cookie = CookieAttributes {
        max_age: CookieAttributes::DEFAULT_MAX_AGE,
        ..CookieAttributes::default()
    };
    if let Some(n) = node.get("maxAge") {
        let v = r.int(n, &join(path, "maxAge"), 0, i64::from(i32::MAX))?;
        // 0 is Flagger's "not set" (`GetMaxAge`).
        if let Some(seconds) = u32::try_from(v).ok().filter(|s| *s > 0) {
            cookie.max_age = seconds;
        }
    }
    for (key, slot) in [("domain", &mut cookie.domain), ("path", &mut cookie.path)] {
        if let Some(n) = node.get(key) {
            let field = join(path, key);
            let text = r.string(n, &field)?;
            if text.is_empty() || text.bytes().any(|b| b == b';' || b.is_ascii_control()) {
                r.error(n.line, &field, format!("expected a cookie attribute value (not empty, no ';' or control characters), found {text:?}"));
                return None;
            }
            *slot = Some(text);
        }
    }
    if let Some(n) = node.get("sameSite") {
        let field = join(path, "sameSite");
        let text = r.string(n, &field)?;
        if !matches!(text.as_str(), "Strict" | "Lax" | "None") {
            r.error(
                n.line,
                &field,
                format!("expected Strict, Lax or None, found {text:?}"),
            );
            return None;
        }
        cookie.same_site = Some(text);
    }
    for (key, slot) in [
        ("httpOnly", &mut cookie.http_only),
        ("partitioned", &mut cookie.partitioned),
        ("secure", &mut cookie.secure),
    ] {
        if let Some(n) = node.get(key) {
            *slot = r.bool(n, &join(path, key))?;
        }
    }
    Some(cookie)
}
