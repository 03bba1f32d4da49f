//! The route state a rollout keeps in its status besides the weights: the session-affinity
//! cookies and the mirror phase (see the fields of [`Status`]).
//!
//! Derived from the status each committed decision produces, by [`update`], the one rule
//! `decide` and `operate` both apply, so every path that moves a canary keeps it in line.
//! Routers only read it. The status file round-trips it, so a restart resumes the same cookie
//! and phase. Pure like the rest of the core: the cookie's value is a hash, not a random draw.

use jiff::Timestamp;

use crate::model::{Canary, Strategy};
use crate::status::Status;

/// Letters of a cookie value, as Flagger draws them (`[a-zA-Z]`).
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
/// Length of a cookie value, as Flagger's.
const VALUE_LEN: usize = 10;

/// Brings `status`'s route state in line with its phase and weights (Flagger's rules):
///
/// - Session affinity: while the canary takes traffic the rollout has a cookie, made once
///   and kept until its canary takes none; then it becomes the previous cookie, which the
///   route expires. Without `sessionAffinity` there is no cookie.
/// - With `primaryCookieName`, the primary's cookie is made the first time a canary takes
///   traffic and kept for every later rollout (Flagger never clears
///   `status.primarySessionAffinityCookie`); routes set and match it only while the canary
///   takes traffic. A cookie of another name than the spec's is dropped and made again.
/// - Mirroring: a blue/green analysis with `mirror` mirrors from its first iteration until it
///   routes all traffic to the canary (Flagger's scheduler: "Stop traffic mirroring and route
///   all traffic to canary"), and stops on a rollback.
pub(crate) fn update<R>(canary: &Canary<R>, status: &mut Status, now: Timestamp) {
    status.mirroring = mirroring(canary, status);
    let Some(affinity) = &canary.analysis.session_affinity else {
        status.session_cookie = None;
        status.previous_session_cookie = None;
        status.primary_session_cookie = None;
        return;
    };
    // A primary cookie of another name (or none asked for any more) is not this spec's.
    let primary_name = affinity.primary_cookie_name.as_deref();
    if status
        .primary_session_cookie
        .as_deref()
        .is_some_and(|c| primary_name.is_none_or(|name| cookie_name(c) != name))
    {
        status.primary_session_cookie = None;
    }
    if status.canary_weight > 0 {
        if status.session_cookie.is_none() {
            let value = cookie_value(canary, status, now, b"");
            status.session_cookie = Some(format!("{}={value}", affinity.cookie_name));
        }
        if let (Some(name), None) = (primary_name, &status.primary_session_cookie) {
            let value = cookie_value(canary, status, now, PRIMARY_SALT);
            status.primary_session_cookie = Some(format!("{name}={value}"));
        }
    } else if let Some(cookie) = status.session_cookie.take() {
        status.previous_session_cookie = Some(cookie);
    }
}

/// Hashed after the rest for the primary's cookie, so its value differs from the canary's.
const PRIMARY_SALT: &[u8] = b"\0primary";

/// The name of a `name=value` cookie.
fn cookie_name(cookie: &str) -> &str {
    cookie.split_once('=').map_or(cookie, |(name, _)| name)
}

fn mirroring<R>(canary: &Canary<R>, status: &Status) -> bool {
    let blue_green = match canary.analysis.strategy {
        Strategy::BlueGreen { .. } => true,
        Strategy::Canary { .. } | Strategy::AB { .. } => false,
    };
    canary.analysis.mirror
        && blue_green
        && status.phase.is_analysing()
        && status.iterations >= 1
        && status.canary_weight == 0
}

/// Ten letters, different for each rollout. The core has no random source (Flagger draws one),
/// so it hashes what makes this rollout unique: canary, revision and the moment the cookie is
/// made; the status file keeps the result.
/// `salt` (empty for the canary's cookie, whose values stay what they always were) tells two
/// cookies of one rollout apart.
fn cookie_value<R>(canary: &Canary<R>, status: &Status, now: Timestamp, salt: &[u8]) -> String {
    let mut hash = Fnv1a::new();
    hash.write(canary.id.namespace.as_str().as_bytes());
    hash.write(b"/");
    hash.write(canary.id.name.as_str().as_bytes());
    hash.write(b"\0");
    hash.write(status.canary_revision.as_deref().unwrap_or("").as_bytes());
    hash.write(b"\0");
    hash.write(&now.as_nanosecond().to_le_bytes());
    hash.write(salt);
    let mut n = hash.finish();
    let base = LETTERS.len() as u64;
    (0..VALUE_LEN)
        .map(|_| {
            // `n % base` < 52: always an index of LETTERS.
            let letter = LETTERS[(n % base) as usize];
            n /= base;
            char::from(letter)
        })
        .collect()
}

/// 64-bit FNV-1a: tiny, stable across versions and platforms (std's hasher is neither
/// promised), and the core may not depend on a hashing crate.
struct Fnv1a(u64);

impl Fnv1a {
    fn new() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        for (input, expected) in [
            (&b""[..], 0xcbf2_9ce4_8422_2325_u64),
            (b"a", 0xaf63_dc4c_8601_ec8c),
            (b"foobar", 0x8594_4171_f739_67e8),
        ] {
            let mut h = Fnv1a::new();
            h.write(input);
            assert_eq!(h.finish(), expected, "{input:?}");
        }
    }
}
