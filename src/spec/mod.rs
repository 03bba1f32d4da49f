//! Input formats: YAML files in the config repo -> validated [`model::Canary`] values.
//!
//! A tick reads the repo once into a `snapshot` (one walk, one read and one YAML parse per
//! file, objects indexed by kind and name). Each document is a line-marked tree (`node`),
//! walked by `reader` helpers that collect every problem, and turned into domain types that
//! cannot hold a bad state (`load` finds the canaries).

pub mod analysis;
pub mod canary;
pub mod error;
pub mod load;
pub mod model;
pub mod node;
pub mod reader;
pub mod settings;
pub mod snapshot;
pub mod sync;
