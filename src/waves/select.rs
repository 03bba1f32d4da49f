//! Which canary a command means: `NS/NAME`, or with waves `NS/NAME --wave WAVE` (the wave's
//! instance), and without `--wave` the wave in progress. Used by the manual operations
//! (`sluice approve ...`); reads nothing itself.

use crate::core::status::Status;
use crate::core::waves::at_rest;
use crate::manifest::model::{Canary, CanaryId};

/// The canary of `canaries` that `wanted` (`NS/NAME`) and `wave` name. Without `wave`, a
/// canary with waves means its wave in progress: the first, in release order, whose status is
/// not at rest (Initialized or Succeeded); `status_of` gives an instance's status.
pub fn select<'c>(
    canaries: &'c [Canary],
    wanted: &str,
    wave: Option<&str>,
    status_of: impl Fn(&CanaryId) -> Option<Status>,
) -> Result<&'c Canary, Unselected> {
    let instances: Vec<&Canary> = canaries
        .iter()
        .filter(|c| c.wave.is_some() && format!("{}/{}", c.id.namespace, c.base_name()) == wanted)
        .collect();
    let names = || {
        instances
            .iter()
            .filter_map(|c| c.wave.as_ref().map(|w| w.name.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match wave {
        Some(wave) if instances.is_empty() => {
            match canaries.iter().find(|c| c.id.to_string() == wanted) {
                Some(_) => Err(Unselected::Wave(format!(
                    "canary {wanted} has no waves; drop --wave {wave}"
                ))),
                None => Err(Unselected::NotFound),
            }
        }
        Some(wave) => instances
            .iter()
            .find(|c| c.wave.as_ref().is_some_and(|w| w.name.as_str() == wave))
            .copied()
            .ok_or_else(|| {
                Unselected::Wave(format!(
                    "canary {wanted} has no wave {wave} (its waves: {})",
                    names()
                ))
            }),
        None if instances.is_empty() => canaries
            .iter()
            .find(|c| c.id.to_string() == wanted)
            .ok_or(Unselected::NotFound),
        None => instances
            .iter()
            .find(|c| status_of(&c.id).is_some_and(|s| !at_rest(s.phase)))
            .copied()
            .ok_or_else(|| {
                Unselected::Wave(format!(
                    "no wave of {wanted} is in progress; name one with --wave (its waves: {})",
                    names()
                ))
            }),
    }
}

/// Why no canary was selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unselected {
    /// No canary of that name.
    NotFound,
    /// The canary is there; the wave asked for (or the one in progress) is not.
    Wave(String),
}
