//! Flagger's `analysis` fields that put rollout state on the VirtualService:
//! `sessionAffinity` (the cookie's attributes; its name is the core's model, the cookie itself
//! the status') and `mirror` / `mirrorWeight`.
//!
//! Refused, each at its line, where Flagger's Istio router would drop or bend what is asked:
//!
//! - `mirror` with `stepWeight(s)`: Flagger's scheduler runs one mirrored interval at weight 0
//!   before the first traffic step; sluice's schedule has no such step yet, so the mirror
//!   would never be shown.
//! - `mirror` or `sessionAffinity` with A/B (`analysis.match`): Flagger's A/B routes replace
//!   the mirror and the cookie routes, so neither works there.
//! - `sessionAffinity.primaryCookieName`: the primary's cookie needs a second cookie in the
//!   status, which sluice does not keep yet.
//! - `sessionAffinity` with `service.match` headers: Flagger's cookie route replaces them with
//!   the cookie match, so sticky requests would skip them.

use crate::route::gateway_api::{read_cookie_attributes, AnalysisMirror, CookieAttributes};
use crate::route::FlaggerInput;
use crate::yaml::node::{Node, Value};
use crate::yaml::reader::{index, join, Reader};

const ANALYSIS: &str = "spec.analysis";

/// The cookie attributes and the mirror; `None` when any had errors (reported through `r`).
pub(super) fn read(
    r: &mut Reader,
    input: &FlaggerInput,
) -> Option<(Option<CookieAttributes>, Option<AnalysisMirror>)> {
    let Some(analysis) = input.analysis else {
        return Some((None, None));
    };
    let before = r.errors.len();
    let shape = Shape::of(analysis);
    let cookie = analysis
        .get("sessionAffinity")
        .filter(|n| n.value != Value::Null)
        .and_then(|n| read_session_affinity(r, n, input.service, shape));
    let mirror = read_mirror(r, analysis, shape);
    (r.errors.len() == before).then_some((cookie, mirror))
}

/// Which strategy the analysis asks for, as far as these fields care (the spec reader checks
/// the strategy itself and reports its errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Canary,
    BlueGreen,
    AB,
}

impl Shape {
    fn of(analysis: &Node) -> Shape {
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

fn read_mirror(r: &mut Reader, analysis: &Node, shape: Shape) -> Option<AnalysisMirror> {
    let weight = analysis
        .get("mirrorWeight")
        .filter(|n| n.value != Value::Null);
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
    let path = join(ANALYSIS, "mirror");
    match shape {
        Shape::BlueGreen => {}
        Shape::Canary => {
            r.error(mirror.line, &path, "not supported yet with stepWeight(s) on Istio routes: Flagger mirrors one interval at weight 0 before the first traffic step, a step sluice's schedule does not have yet, so the mirror would never be shown; remove mirror, or use iterations without match (blue/green mirrors the whole analysis)");
            return None;
        }
        Shape::AB => {
            r.error(mirror.line, &path, "has no effect with A/B testing (analysis.match): Flagger's Istio router writes the A/B routes without the mirror; remove mirror, or use iterations without match");
            return None;
        }
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
        r.error(node.line, &path, "has no effect with A/B testing (analysis.match): Flagger's Istio router writes the A/B routes without the cookie routes; use sessionAffinity with stepWeight(s) or iterations without match");
    }
    if let Some(n) = node.get("primaryCookieName") {
        r.error(n.line, &join(&path, "primaryCookieName"), "not supported yet for Istio routes (the primary's cookie needs rollout state sluice does not keep yet); remove it, or roll this canary out without sluice");
    }
    if let Some(Value::Seq(matches)) = service.and_then(|s| s.get("match")).map(|n| &n.value) {
        for (i, m) in matches.iter().enumerate() {
            if let Some(h) = m.get("headers") {
                r.error(h.line, &join(&index("spec.service.match", i), "headers"), "cannot be combined with analysis.sessionAffinity on Istio routes: Flagger's cookie route replaces these headers with the cookie match, so sticky requests would skip them");
            }
        }
    }
    read_cookie_attributes(r, node, &path)
}
