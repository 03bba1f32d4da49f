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

/// What the keys Flux reads or stamps on an object hold (`kustomize.toolkit.fluxcd.io/ssa`,
/// `kustomize.toolkit.fluxcd.io/prune`, `kustomize.toolkit.fluxcd.io/name`, ...): Flagger's
/// `toolkitMarker`. sluice keeps such keys off every object it renders from a source.
pub const TOOLKIT_MARKER: &str = "toolkit.fluxcd.io";
