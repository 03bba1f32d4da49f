//! One case of the per-router route tests: a named canary and the Services it splits between,
//! rendered at a canary weight. Each `route_*.rs` lists its router's cases; this module only
//! renders them, so a failure names the case and the router.

use serde_json::Value as Json;
use sluice::manifest::model::Canary;
use sluice::route::{render_route, Backends, Weights};

use super::canary::{BACKENDS, NO_STATE};

/// The Services of the native `shop/frontend` canaries ([`super::canary::native_frontend`]).
pub(crate) const FRONTEND_BACKENDS: Backends<'static> = Backends {
    primary: "frontend-blue",
    canary: "frontend-green",
};

pub(crate) struct RouteCase {
    pub(crate) name: &'static str,
    pub(crate) canary: Canary,
    pub(crate) backends: Backends<'static>,
}

impl RouteCase {
    /// A case of a Flagger canary of `podinfo` (its primary and canary Services).
    pub(crate) fn podinfo(name: &'static str, canary: Canary) -> RouteCase {
        RouteCase {
            name,
            canary,
            backends: BACKENDS,
        }
    }

    /// A case of a native `shop/frontend` canary.
    pub(crate) fn frontend(name: &'static str, canary: Canary) -> RouteCase {
        RouteCase {
            name,
            canary,
            backends: FRONTEND_BACKENDS,
        }
    }

    /// The route file `router` writes for this case at `canary_weight`.
    pub(crate) fn render(&self, router: &str, canary_weight: u8) -> String {
        let weights = Weights::from_canary(canary_weight).expect("0..=100");
        render_route(&self.canary, &self.backends, weights, &NO_STATE)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
            .unwrap_or_else(|| panic!("{}: {router} writes a route file", self.name))
            .content
    }
}

/// The documents of a rendered route file.
pub(crate) fn documents(text: &str) -> Vec<Json> {
    serde_saphyr::from_multiple::<Json>(text).expect("rendered YAML parses")
}

/// Snapshots each of the cases `$cases` (a `Vec<RouteCase>`) rendered by `$render` at
/// `$weight`, under the case's name, then the case named `$ab` rendered at 100 under
/// `$ab_snapshot`: during an A/B analysis Flagger sends every matching request to the canary.
/// A macro so that the snapshots keep the calling test module's names.
macro_rules! snapshot_cases {
    ($cases:expr, $render:expr, $weight:expr, $ab:expr, $ab_snapshot:expr) => {{
        let all = $cases;
        for case in &all {
            insta::assert_snapshot!(case.name, $render(case, $weight));
        }
        let ab = all.iter().find(|c| c.name == $ab).expect("the A/B case");
        insta::assert_snapshot!($ab_snapshot, $render(ab, 100));
    }};
}
pub(crate) use snapshot_cases;
