//! The validated model as the adapters see it: the core's types, with [`Canary`] carrying the
//! route its router writes. Everything here is defined in `sluice_core::model` or `route`
//! (the [`Route`] enum, one variant per router); this module only names the pair.

pub use crate::core::model::*;
/// A validated canary whose route is one of sluice's routers.
pub use crate::route::Canary;
pub use crate::route::Route;
