//! The pure core: weight arithmetic, phases, status and the decision function.
//!
//! Nothing here touches git, HTTP, files or the clock; `now` is an argument.

#![forbid(unsafe_code)]

pub mod decide;
pub mod model;
pub mod number;
pub mod observe;
pub mod operate;
pub mod plan;
mod route_state;
pub mod schedule;
pub mod status;
pub mod trailer;
