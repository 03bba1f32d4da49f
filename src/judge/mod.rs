//! The statistical judge's adapters: its settings read from YAML ([`config`]) and resolved
//! for a canary ([`canary`]), the repo's `Judge` objects checked ([`objects`]), the replay
//! record of the tick's series ([`record`]; the range queries are
//! `metrics::judge_series`), series read from files ([`series`]), and a judgement printed as
//! a table or JSON ([`report`]) or written as commit trailers ([`trailers`]), and the marginal
//! judgement a waiting canary's approval pull request shows (`src/approval/judge_table.rs`). The judging
//! itself is pure and lives in the core (`sluice_core::judge`).

pub mod canary;
pub mod config;
pub mod objects;
pub mod record;
pub mod report;
pub mod series;
pub mod trailers;
