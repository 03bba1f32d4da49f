//! Weight arithmetic: turns a spec's stepWeight/maxWeight, stepWeights or steps into the list
//! of canary weights a rollout walks through, and the primary weights of a progressive
//! promotion. Pure functions, no IO.
//!
//! Flagger input reproduces Flagger's arithmetic exactly, quirks included, because Flagger
//! users compare the two: the bound is checked *before* a step is added, so stepWeight 20 with
//! maxWeight 50 walks 20, 40, 60. Native input never passes maxWeight.

use std::time::Duration;

/// One step of a canary rollout: route `weight` percent to the canary, then hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub weight: u8,
    pub pause: Pause,
}

/// How long a step holds before the next change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pause {
    /// One analysis interval (Flagger's steps).
    Interval,
    /// A fixed, positive duration, judging metrics every interval meanwhile (OpenFunction's
    /// steps). The spec readers refuse zero: such a step would advance the instant its weight
    /// is committed.
    For(Duration),
    /// Until a human approves the next change.
    Approval,
}

/// Flagger's stepWeight/maxWeight: add `step` while the current weight is below `max`.
pub fn flagger_step_weight(step: u8, max: u8) -> Vec<u8> {
    let mut weights = Vec::new();
    if step == 0 {
        return weights;
    }
    let mut current: u8 = 0;
    while current < max {
        current = current.saturating_add(step).min(100);
        weights.push(current);
    }
    weights
}

/// Flagger's stepWeights: the maximum is min(100, last entry); from weight `cw` the next is the
/// first entry at 0, else the entry after the one equal to `cw`; each capped at 100.
pub fn flagger_step_weights(entries: &[u8]) -> Vec<u8> {
    let Some(&last) = entries.last() else {
        return Vec::new();
    };
    let max = last.min(100);
    let mut weights = Vec::new();
    let mut current: u8 = 0;
    while current < max {
        let next = if current == 0 {
            entries[0]
        } else {
            match entries.iter().position(|&e| e == current) {
                Some(i) if i + 1 < entries.len() => entries[i + 1],
                // Flagger stops advancing when cw matches no entry; with increasing entries
                // starting from 0 that cannot happen, but never loop forever on it.
                _ => break,
            }
        };
        let step = next.saturating_sub(current).min(100 - current);
        if step == 0 {
            break;
        }
        current += step;
        weights.push(current);
    }
    weights
}

/// Native stepWeight/maxWeight: k·step for k = 1.. while below `max`, ending exactly at `max`.
pub fn native_step_weight(step: u8, max: u8) -> Vec<u8> {
    let mut weights = Vec::new();
    if step == 0 || max == 0 {
        return weights;
    }
    let mut current: u8 = 0;
    while current < max {
        current = current.saturating_add(step).min(max);
        weights.push(current);
    }
    weights
}

/// Primary weights of a progressive promotion from canary weight `canary` (Flagger's
/// stepWeightPromotion): 100 - canary + s, + 2s, ... capped at 100. `s == 0` or `None` means
/// one step straight to 100. These are the weights of the backend that runs the promoted
/// revision: the primary, or in route-only mode the canary service (`canary` is then the
/// stable service's weight).
pub fn promotion_primary_weights(canary: u8, step: Option<u8>) -> Vec<u8> {
    let mut primary = 100u8.saturating_sub(canary.min(100));
    match step {
        Some(s) if s > 0 => {
            let mut weights = Vec::new();
            while primary < 100 {
                primary = primary.saturating_add(s).min(100);
                weights.push(primary);
            }
            weights
        }
        _ if primary < 100 => vec![100],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flagger_step_weight_checks_bound_before_adding() {
        assert_eq!(flagger_step_weight(20, 50), vec![20, 40, 60]);
        assert_eq!(flagger_step_weight(50, 100), vec![50, 100]);
        assert_eq!(flagger_step_weight(10, 50), vec![10, 20, 30, 40, 50]);
        assert_eq!(flagger_step_weight(30, 100), vec![30, 60, 90, 100]);
        assert_eq!(flagger_step_weight(100, 100), vec![100]);
    }

    #[test]
    fn flagger_step_weights_cap_at_100() {
        assert_eq!(flagger_step_weights(&[1, 2, 10, 80]), vec![1, 2, 10, 80]);
        assert_eq!(flagger_step_weights(&[1, 2, 10, 200]), vec![1, 2, 10, 100]);
        assert_eq!(flagger_step_weights(&[5]), vec![5]);
    }

    #[test]
    fn native_step_weight_never_passes_max() {
        assert_eq!(native_step_weight(20, 50), vec![20, 40, 50]);
        assert_eq!(native_step_weight(25, 100), vec![25, 50, 75, 100]);
        assert_eq!(native_step_weight(60, 50), vec![50]);
    }

    #[test]
    fn progressive_promotion_raises_primary_by_step() {
        assert_eq!(
            promotion_primary_weights(50, Some(5)),
            (55..=100).step_by(5).collect::<Vec<u8>>()
        );
        assert_eq!(promotion_primary_weights(60, Some(30)), vec![70, 100]);
        assert_eq!(promotion_primary_weights(50, None), vec![100]);
        assert_eq!(promotion_primary_weights(50, Some(0)), vec![100]);
        assert_eq!(promotion_primary_weights(0, Some(5)), Vec::<u8>::new());
    }
}
