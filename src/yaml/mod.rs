//! The config repo's YAML, below every reader of it: one walk and parse of the work tree
//! ([`snapshot`]), parses shared by blob id ([`parses`]), the line-marked
//! document tree ([`node`]), field readers that collect every problem ([`reader`]) and the
//! `file:line: field: message` error ([`error`]).
//!
//! A leaf: it knows nothing of canaries, routes or workloads, so `spec`, `route`, `workload`
//! and `metrics` can all read YAML without using each other.

pub mod error;
pub mod node;
pub mod parses;
pub mod reader;
pub mod snapshot;
