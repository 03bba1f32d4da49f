//! Leader election through a Kubernetes Lease, for `sluice run` with more than one replica.
//! Only the holder ticks; the others wait. Safety never rests on it alone: git's
//! compare-and-swap push already keeps two writers from committing a step twice. The claim
//! rule is a pure function; updates use the Lease's resourceVersion, so two replicas never
//! both win.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

/// Where the lease lives and who we are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub duration: Duration,
}

/// What to do with the lease as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// We hold it: renew.
    Renew,
    /// Free or expired: take it.
    Take,
    /// Someone else holds a live lease.
    Wait { holder: String },
}

/// Decides from the lease's spec (if the Lease exists) at `now`.
pub fn claim(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Claim {
    let Some(spec) = spec else {
        return Claim::Take;
    };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder == me {
        return Claim::Renew;
    }
    if holder.is_empty() {
        return Claim::Take;
    }
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0);
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15).max(1));
    match renewed {
        Some(t) if now.as_second() < t.as_second().saturating_add(duration) => {
            Claim::Wait { holder }
        }
        _ => Claim::Take,
    }
}

/// Whether this replica leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    Leader,
    Follower { holder: String },
}

fn spec_for(cfg: &LeaseConfig, old: Option<&LeaseSpec>, take: bool, now: Timestamp) -> LeaseSpec {
    let transitions = old.and_then(|s| s.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(i32::try_from(cfg.duration.as_secs()).unwrap_or(15)),
        acquire_time: if take {
            Some(MicroTime(now))
        } else {
            old.and_then(|s| s.acquire_time.clone())
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if take && old.is_some() {
            transitions + 1
        } else {
            transitions
        }),
        ..LeaseSpec::default()
    }
}

/// Takes or renews the lease; a lost race (409) makes us a follower.
pub async fn acquire_or_renew(
    client: &kube::Client,
    cfg: &LeaseConfig,
    now: Timestamp,
) -> Result<Leadership, String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &cfg.namespace);
    let what = format!("Lease {}/{}", cfg.namespace, cfg.name);
    let current = api
        .get_opt(&cfg.name)
        .await
        .map_err(|e| format!("cannot read {what}: {e}; sluice needs get, create and update on leases.coordination.k8s.io"))?;
    let lost = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 409);
    match current {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec_for(cfg, None, true, now)),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Leadership::Leader),
                Err(e) if lost(&e) => Ok(Leadership::Follower {
                    holder: "another replica".into(),
                }),
                Err(e) => Err(format!("cannot create {what}: {e}")),
            }
        }
        Some(mut lease) => match claim(lease.spec.as_ref(), &cfg.identity, now) {
            Claim::Wait { holder } => Ok(Leadership::Follower { holder }),
            c @ (Claim::Renew | Claim::Take) => {
                let take = c == Claim::Take;
                lease.spec = Some(spec_for(cfg, lease.spec.as_ref(), take, now));
                // The resourceVersion read above makes this a compare-and-swap.
                match api.replace(&cfg.name, &PostParams::default(), &lease).await {
                    Ok(_) => Ok(Leadership::Leader),
                    Err(e) if lost(&e) => Ok(Leadership::Follower {
                        holder: "another replica".into(),
                    }),
                    Err(e) => Err(format!("cannot update {what}: {e}")),
                }
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: &str, renewed_at: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed_at).unwrap())),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn claims_follow_holder_and_expiry() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(claim(None, "a", now), Claim::Take);
        assert_eq!(claim(Some(&spec("a", 990)), "a", now), Claim::Renew);
        assert_eq!(
            claim(Some(&spec("b", 990)), "a", now),
            Claim::Wait { holder: "b".into() }
        );
        assert_eq!(
            claim(Some(&spec("b", 980)), "a", now),
            Claim::Take,
            "expired after 15 s"
        );
        assert_eq!(claim(Some(&spec("", 999)), "a", now), Claim::Take);
    }
}
