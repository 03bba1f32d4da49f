//! The pure core: weight arithmetic, phases, status, and every decision the loop makes:
//! [`verdict::verdict`] weighs the tick's facts (drift, approvals), then [`decide::decide`]'s
//! rollout rules; [`operate`] holds the manual operations' rules, [`simulate`] the `sluice plan`
//! simulator. A [`decide::Decision`] can only be built here.
//!
//! Nothing here touches git, HTTP, files or the clock; `now` is an argument.

#![forbid(unsafe_code)]
// A test may unwrap: its panic is the failure it reports. Everywhere else the workspace lints
// (Cargo.toml) reject unwrap() and expect().
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod approval;
pub mod argo_analysis;
pub mod argo_experiment;
pub mod argo_expr;
pub mod argo_metric;
pub mod argo_replicas;
pub mod builtin_metric;
pub mod concurrency;
pub mod decide;
pub mod judge;
pub mod judged;
pub mod live;
pub mod model;
pub mod number;
pub mod observe;
pub mod operate;
pub mod rollback_window;
mod route_state;
pub mod schedule;
pub mod shards;
pub mod simulate;
pub mod status;
pub mod trailer;
pub mod verdict;
pub mod waves;
