//! Flagger's `analysis` fields that put rollout state on the VirtualService:
//! `sessionAffinity` (the cookie's attributes; its names, `cookieName` and
//! `primaryCookieName`, are the core's model, the cookies themselves the status') and
//! `mirror` / `mirrorWeight`.
//!
//! Refused, each at its line, where Flagger's Istio router would drop or bend what is asked:
//!
//! - `mirror` with `stepWeight(s)`: Flagger's scheduler runs one mirrored interval at weight 0
//!   before the first traffic step; sluice's schedule has no such step yet, so the mirror
//!   would never be shown.
//! - `mirror` or `sessionAffinity` with A/B (`analysis.match`): Flagger's A/B routes replace
//!   the mirror and the cookie routes, so neither works there.
//! - `sessionAffinity` with `service.match` headers: Flagger's cookie route replaces them with
//!   the cookie match, so sticky requests would skip them.

use crate::route::gateway_api::{
    read_cookie_attributes, read_mirror, AnalysisMirror, CookieAttributes, Shape,
};
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
    let weight = analysis
        .get("mirrorWeight")
        .filter(|n| n.value != Value::Null);
    let mirror = read_mirror(r, analysis, weight, shape, [MIRROR_CANARY, MIRROR_AB]);
    (r.errors.len() == before).then_some((cookie, mirror))
}

const MIRROR_CANARY: &str = "not supported yet with stepWeight(s) on Istio routes: Flagger mirrors one interval at weight 0 before the first traffic step, a step sluice's schedule does not have yet, so the mirror would never be shown; remove mirror, or use iterations without match (blue/green mirrors the whole analysis)";
const MIRROR_AB: &str = "has no effect with A/B testing (analysis.match): Flagger's Istio router writes the A/B routes without the mirror; remove mirror, or use iterations without match";

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
    if let Some(Value::Seq(matches)) = service.and_then(|s| s.get("match")).map(|n| &n.value) {
        for (i, m) in matches.iter().enumerate() {
            if let Some(h) = m.get("headers") {
                r.error(h.line, &join(&index("spec.service.match", i), "headers"), "cannot be combined with analysis.sessionAffinity on Istio routes: Flagger's cookie route replaces these headers with the cookie match, so sticky requests would skip them");
            }
        }
    }
    read_cookie_attributes(r, node, &path)
}
