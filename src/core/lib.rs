//! The pure core: weight arithmetic, phases, status and the decision function.
//!
//! Nothing here touches git, HTTP, files or the clock; `now` is an argument.

#![forbid(unsafe_code)]
// A test may unwrap: its panic is the failure it reports. Everywhere else the workspace lints
// (Cargo.toml) reject unwrap() and expect().
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod decide;
pub mod model;
pub mod observe;
pub mod operate;
pub mod plan;
mod route_state;
pub mod schedule;
pub mod status;
pub mod trailer;
