//! Input formats: the config repo's YAML -> validated [`model::Canary`] values and repo
//! settings.
//!
//! A tick reads the repo once into a [`crate::yaml::snapshot::Snapshot`] (one walk, one read
//! and one YAML parse per file, objects indexed by kind and name); `load` finds the canaries in
//! it and turns each into domain types that cannot hold a bad state. The route part of a canary
//! is read by its router (`crate::route`); every problem is a `file:line: field: message`.

pub mod alert_provider;
pub mod analysis;
pub mod applied_by;
pub mod approval_policy;
pub mod canary;
pub mod flagger_fields;
pub mod layout_check;
pub mod load;
pub mod load_incremental;
pub mod model;
pub mod named_paths;
pub mod openfunction;
pub mod output_folder;
pub mod rollout;
pub mod rollout_analysis;
pub mod rollout_blue_green;
pub mod rollout_experiment;
pub mod rollout_lookup;
pub mod rollout_routers;
pub mod settings;
pub mod sync;
pub mod template_refs;
pub mod warning_log;
pub mod waves;
