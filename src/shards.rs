//! Shards by Kubernetes Lease, for `sluice run --shards N` with several replicas.
//!
//! Each replica renews a member Lease `<name>-member-<identity>`; the shard Leases
//! `<name>-shard-<i>` (coordination.k8s.io/v1) are spread over the live members by the core's
//! rule ([`crate::core::shards`]) and taken, renewed and released with the Lease's
//! resourceVersion, so that of two replicas racing for one Lease the API server lets one win
//! (409 Conflict for the other). A replica reconciles only the canaries of the shards it holds
//! ([`Owned`], in the core).
//!
//! Expiry is measured as client-go's leader election measures it: by how long *this* replica
//! has seen a Lease's record unchanged, on its own monotonic clock, never by comparing the
//! holder's `renewTime` with the local time; so clocks that differ between hosts (or the
//! stepped clock of tests) cannot expire a live replica. The renewal runs on a task of its own, every retry period
//! ([`crate::renewal`]); a replica stops counting a shard as its own at the renew deadline (two
//! thirds of a lease duration after its last renewal started), before the others can take it.
//!
//! Safety does not rest on the Leases: two replicas that both believe they own a shard push
//! with git's compare-and-swap, and the one whose push is rejected fetches and decides again
//! on the new head.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, ListParams, PostParams};

use crate::core::shards::{act, Action, Found, Owned};
use crate::leadership::{acquire_or_renew, LeaseConfig};
use crate::lease_timing::Renewal;

/// The shards of this install, and who this replica is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    /// Namespace of the Leases.
    pub namespace: String,
    /// The prefix of the Leases' names (`--lease-name`).
    pub name: String,
    pub identity: String,
    pub count: u32,
    pub duration: Duration,
}

impl ShardConfig {
    /// The name of shard `i`'s Lease.
    pub fn shard_lease(&self, i: u32) -> String {
        format!("{}-shard-{i}", self.name)
    }

    /// The prefix of every member Lease's name.
    pub fn member_prefix(&self) -> String {
        format!("{}-member-", self.name)
    }
}

/// Who holds each shard, as one replica last saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holders {
    /// Per shard, its holder (`None`: nobody).
    pub shards: BTreeMap<u32, Option<String>>,
}

impl Holders {
    /// One line per shard: `shard 3: r1` or `shard 3: nobody`.
    pub fn lines(&self, name: &str) -> Vec<String> {
        self.shards
            .iter()
            .map(|(i, h)| line(name, *i, h.as_deref().unwrap_or("nobody")))
            .collect()
    }
}

/// How `/readyz` and `sluice status` show one shard's holder.
fn line(name: &str, i: u32, who: &str) -> String {
    format!("shard {i} ({name}-shard-{i}): {who}")
}

/// How long a Lease's record was seen unchanged.
#[derive(Debug)]
struct Seen {
    version: String,
    since: Instant,
}

/// One replica's side of the shard Leases.
pub struct Shards {
    client: kube::Client,
    config: ShardConfig,
    seen: HashMap<String, Seen>,
    /// The shards held, and when each was last taken or renewed.
    held: BTreeMap<u32, Instant>,
}

fn lost(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl Shards {
    pub fn new(client: kube::Client, config: ShardConfig) -> Shards {
        Shards {
            client,
            config,
            seen: HashMap::new(),
            held: BTreeMap::new(),
        }
    }

    pub fn config(&self) -> &ShardConfig {
        &self.config
    }

    /// The canaries of the shards this replica holds at `real`: those taken or renewed less
    /// than a renew deadline ([`Renewal::renew_deadline`]) ago.
    pub fn owned(&self, real: Instant) -> Owned {
        let renewal = Renewal::new(self.config.duration);
        Owned::Shards {
            count: self.config.count,
            held: self
                .held
                .iter()
                .filter(|(_, at)| renewal.holds(**at, real))
                .map(|(i, _)| *i)
                .collect(),
            repo: String::new(),
        }
    }

    /// Each shard held and when its last take or renewal started.
    pub fn held(&self) -> BTreeMap<u32, Instant> {
        self.held.clone()
    }

    /// Renews this replica's member Lease, reads every Lease of the install and acts on each
    /// shard Lease by the core's rule; `now` (the runtime's clock) is written as the renew
    /// time, `real` (monotonic) measures expiry. Returns the holders as left.
    pub async fn sync(&mut self, now: Timestamp, real: Instant) -> Result<Holders, String> {
        let member = LeaseConfig {
            namespace: self.config.namespace.clone(),
            name: format!("{}{}", self.config.member_prefix(), self.config.identity),
            identity: self.config.identity.clone(),
            duration: self.config.duration,
        };
        acquire_or_renew(&self.client, &member, now).await?;
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let list = api.list(&ListParams::default()).await.map_err(|e| {
            format!(
                "cannot list the Leases of namespace {}: {e}; sluice --shards needs list, get, create and update on leases.coordination.k8s.io",
                self.config.namespace
            )
        })?;
        let mut by_name: BTreeMap<String, Lease> = BTreeMap::new();
        for lease in list.items {
            if let Some(name) = lease.metadata.name.clone() {
                by_name.insert(name, lease);
            }
        }
        let mut live = Vec::new();
        let prefix = self.config.member_prefix();
        for (name, lease) in &by_name {
            if name.starts_with(&prefix) && !self.expired(name, lease, real) {
                if let Some(holder) = holder(lease) {
                    live.push(holder);
                }
            }
        }
        let found: Vec<Found> = (0..self.config.count)
            .map(|i| {
                let name = self.config.shard_lease(i);
                match by_name.get(&name) {
                    Some(lease) => Found {
                        holder: holder(lease),
                        expired: self.expired(&name, lease, real),
                    },
                    None => Found {
                        holder: None,
                        expired: false,
                    },
                }
            })
            .collect();
        let actions = act(&self.config.identity, &live, &found);
        let mut holders = Holders::default();
        for ((i, action), was) in (0..self.config.count).zip(actions).zip(found) {
            let lease = by_name.remove(&self.config.shard_lease(i));
            let now_holder = match action {
                Action::Leave => {
                    self.held.remove(&i);
                    was.holder
                }
                Action::Release => {
                    self.held.remove(&i);
                    self.write(&api, i, lease, None, (now, real)).await?;
                    None
                }
                Action::Take | Action::Renew => {
                    let me = Some(self.config.identity.clone());
                    if self.write(&api, i, lease, me.clone(), (now, real)).await? {
                        self.held.insert(i, real);
                        me
                    } else {
                        self.held.remove(&i);
                        was.holder
                    }
                }
            };
            holders.shards.insert(i, now_holder);
        }
        Ok(holders)
    }

    /// Whether `lease` (named `name`) has been seen unchanged for a lease duration, by a
    /// replica other than its holder.
    fn expired(&mut self, name: &str, lease: &Lease, real: Instant) -> bool {
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let seen = self.seen.entry(name.to_string()).or_insert_with(|| Seen {
            version: version.clone(),
            since: real,
        });
        if seen.version != version {
            *seen = Seen {
                version,
                since: real,
            };
        }
        let mine = holder(lease).as_deref() == Some(self.config.identity.as_str());
        let duration = lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.config.duration, Duration::from_secs);
        !mine && real.saturating_duration_since(seen.since) >= duration
    }

    /// Writes shard `i`'s Lease with `holder` (creating it when `lease` is `None`), guarded
    /// by the resourceVersion read; false when another replica changed it first (409).
    async fn write(
        &mut self,
        api: &Api<Lease>,
        i: u32,
        lease: Option<Lease>,
        holder: Option<String>,
        (now, real): (Timestamp, Instant),
    ) -> Result<bool, String> {
        let name = self.config.shard_lease(i);
        let what = format!("Lease {}/{name}", self.config.namespace);
        let old = lease.as_ref().and_then(|l| l.spec.clone());
        let spec = spec_for(&self.config, old.as_ref(), holder, now);
        let written = match lease {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                lease.spec = Some(spec);
                // The resourceVersion read makes this a compare-and-swap.
                api.replace(&name, &PostParams::default(), &lease).await
            }
        };
        match written {
            Ok(lease) => {
                // Our own write is not a sign of life of another holder: seen from now.
                if let Some(version) = lease.metadata.resource_version {
                    self.seen.insert(
                        name,
                        Seen {
                            version,
                            since: real,
                        },
                    );
                }
                Ok(true)
            }
            Err(e) if lost(&e) => Ok(false),
            Err(e) => Err(format!("cannot write {what}: {e}")),
        }
    }
}

/// The holder a Lease names (`None`: nobody).
fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

/// The spec of a shard Lease `holder` holds (or nobody, released) at `now`, after `old`.
fn spec_for(
    config: &ShardConfig,
    old: Option<&LeaseSpec>,
    holder: Option<String>,
    now: Timestamp,
) -> LeaseSpec {
    let old_holder = old.and_then(|s| s.holder_identity.clone());
    let transitions = old.and_then(|s| s.lease_transitions).unwrap_or(0);
    let changed = holder.is_some() && holder != old_holder;
    LeaseSpec {
        acquire_time: if changed {
            Some(MicroTime(now))
        } else {
            old.and_then(|s| s.acquire_time.clone())
        },
        renew_time: holder.as_ref().map(|_| MicroTime(now)),
        lease_duration_seconds: Some(i32::try_from(config.duration.as_secs()).unwrap_or(15)),
        // Each take of an existing Lease by a new holder (after a release too) is a transition.
        lease_transitions: Some(if changed && old.is_some() {
            transitions + 1
        } else {
            transitions
        }),
        holder_identity: holder,
        ..LeaseSpec::default()
    }
}

/// Who holds each of `count` shards named after `name` in `namespace`, read from the Leases
/// (`sluice status`): a holder whose Lease's renewTime is older than its duration at `now` is
/// shown as expired.
pub async fn read_holders(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    count: u32,
    now: Timestamp,
) -> Result<Vec<String>, String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let mut lines = Vec::new();
    for i in 0..count {
        let lease_name = format!("{name}-shard-{i}");
        let lease = api
            .get_opt(&lease_name)
            .await
            .map_err(|e| format!("cannot read Lease {namespace}/{lease_name}: {e}"))?;
        let who = match lease.as_ref().and_then(|l| holder(l).map(|h| (h, l))) {
            None => "nobody".to_string(),
            Some((h, l)) => {
                let spec = l.spec.as_ref();
                let renewed = spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0);
                let duration = spec
                    .and_then(|s| s.lease_duration_seconds)
                    .map_or(15, i64::from);
                match renewed {
                    Some(t) if now.as_second() >= t.as_second().saturating_add(duration) => {
                        format!("{h} (expired: renewed {t})")
                    }
                    _ => h,
                }
            }
        };
        lines.push(line(name, i, &who));
    }
    Ok(lines)
}
