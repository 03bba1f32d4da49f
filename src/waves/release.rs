//! The tick's hook for waves: every wave instance's status goes through the release rule
//! ([`crate::core::waves::release`]), and a wave the release has not reached is held: it is
//! not decided this tick, so nothing is committed to its folder and its cluster keeps running
//! what it runs. Under `onFailure: rollback` an earlier wave of a failed release is reverted
//! instead (`crate::waves::revert` makes its commit). Reports why; decides nothing else.

use std::collections::BTreeMap;

use crate::core::status::Status;
use crate::core::waves::{release, OnFailure, Release, WaveState};
use crate::spec::model::{Canary, Name};

/// One canary of the tick as the hook sees it: the canary, its status, the source's revision.
pub type Item<'a> = (&'a Canary, Option<&'a Status>, &'a str);

/// For each item, in order, what the release rule says of it this tick: [`Release::Go`] (it
/// is decided as usual), held (why), or reverted. Canaries without waves always go. A wave
/// whose instance is not among `items` (its status could not be read) holds every later
/// wave, and reverts none: the rule cannot tell where the release stands.
pub fn releases(items: &[Item<'_>]) -> Vec<Release> {
    let mut out = vec![Release::Go; items.len()];
    let mut releases: BTreeMap<(&Name, &Name), Vec<usize>> = BTreeMap::new();
    for (i, (canary, _, _)) in items.iter().enumerate() {
        if canary.wave.is_some() {
            releases
                .entry((&canary.id.namespace, canary.base_name()))
                .or_default()
                .push(i);
        }
    }
    for members in releases.values() {
        let Some(first) = members.first().and_then(|&i| items[i].0.wave.as_ref()) else {
            continue;
        };
        let by_wave = |index: usize| {
            members
                .iter()
                .copied()
                .find(|&i| items[i].0.wave.as_ref().is_some_and(|w| w.index == index))
        };
        // The release's revision is the source's: every wave reads the one source.
        let Some(revision) = by_wave(0).map(|i| items[i].2) else {
            for &i in members {
                out[i] = held(format!("wave {} cannot be read this tick", first.waves[0]));
            }
            continue;
        };
        let mut states = Vec::new();
        let mut slots = Vec::new();
        let mut whole = true;
        for (index, name) in first.waves.iter().enumerate() {
            let Some(i) = by_wave(index) else {
                // Every later wave waits for this one.
                for later in (index + 1..first.waves.len()).filter_map(by_wave) {
                    out[later] = held(format!("wave {name} cannot be read this tick"));
                }
                whole = false;
                break;
            };
            states.push(WaveState {
                name,
                status: items[i].1,
            });
            slots.push(i);
        }
        // A wave that cannot be read may be the one that failed: revert nothing then.
        let on_failure = match whole {
            true => first.on_failure,
            false => OnFailure::Hold,
        };
        for (slot, decision) in slots
            .into_iter()
            .zip(release(revision, on_failure, &states))
        {
            if out[slot] == Release::Go {
                out[slot] = decision;
            }
        }
    }
    out
}

fn held(reason: String) -> Release {
    Release::Hold { reason }
}
