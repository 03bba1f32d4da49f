//! Input formats: YAML files in the config repo -> validated [`model::Canary`] values.
//!
//! Raw YAML is read into a line-marked tree (`node`), walked by `reader` helpers that collect
//! every problem, and turned into domain types that cannot hold a bad state.

pub mod analysis;
pub mod canary;
pub mod error;
pub mod gateway;
pub mod load;
pub mod model;
pub mod node;
pub mod provider;
pub mod reader;
pub mod settings;
pub mod snapshot;
pub mod sync;
