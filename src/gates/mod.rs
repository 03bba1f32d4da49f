//! Gates: what must be true in the outside world before the loop moves a canary on (webhook
//! answers, the GitOps engine having applied the last commit).
//!
//! Each gate reads the world and returns plain data (an observation), plus pure functions that
//! judge that data; the decision itself stays in `core`.

pub mod analysis_job;
pub mod readiness;
pub mod sync;
pub mod webhook;
