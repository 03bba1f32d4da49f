//! The `Sluice-Replay` trailer: everything a decision used that git does not hold otherwise,
//! so `sluice audit` can run the same decision again from git alone.
//!
//! A commit's files say where the canary went; its parent holds the spec, the settings and the
//! status it started from. What is missing is recorded here, one trailer per canary decision
//! (in the canary's trailer group): the decision time (the tick's clock, not the commit time),
//! and either the observations `decide` judged (revision, metric values, webhook answers,
//! whether the last commit was live) or the manual operation that made the decision (its verb,
//! reason and operator).
//!
//! Format versions: commits without this trailer are format 1 and cannot be replayed. Format 2
//! is this trailer. Format 3 adds `Sluice-Approved-By` and `Sluice-Approval` on approvals and
//! `Sluice-Check` trailers, so from 3 on an approval without an approver is a finding. Format 4
//! gives every other commit sluice makes a record audit checks (record updates, reverts of
//! deleted canaries, drift holds, restores and resumes, refused approvals); before it they were
//! `other` and not replayed. Format 5 is the first whose renders carry none of Flux's
//! `*toolkit.fluxcd.io*` keys from the sources ([`FLUX_KEYS_DROPPED_FROM`]). The value is one line of JSON, so any metric name, error text or
//! reason survives git's trailer parser. Pure: no IO.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::core::model::WebhookKind;
use crate::core::observe::{MetricObservation, MetricValue, Observations, WebhookObservation};
use crate::core::operate::Operation;

/// The trailer key.
pub const REPLAY: &str = "Sluice-Replay";

/// The format version commits are written in now. History before it is not replayable.
pub const FORMAT: u32 = 5;

/// The format from which every commit sluice makes carries a record audit replays (before it,
/// `"by":"other"` ones were not replayed).
pub const EVERY_COMMIT_FROM: u32 = 4;

/// The format from which sluice keeps Flux's `*toolkit.fluxcd.io*` keys off everything it
/// renders from a source; before it they were copied onto the canary workload, its config
/// copies, its autoscaler and Services, and the canary Ingress, and audit compares such a
/// commit's files with that taken into account.
pub const FLUX_KEYS_DROPPED_FROM: u32 = 5;

/// A trailer value `sluice audit` reads back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub format: u32,
    /// The time the decision was made at (`now` of `decide` or `operate`).
    pub now: Timestamp,
    #[serde(flatten)]
    pub by: By,
}

/// What made the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "by")]
pub enum By {
    /// `core::decide` on observations.
    #[serde(rename_all = "camelCase")]
    Decide {
        revision: String,
        applied: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        metrics: Vec<Metric>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        webhooks: Vec<Webhook>,
        /// The statistical judge's series, for a judged canary.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        judge: Option<crate::judge::record::JudgeRecord>,
        /// The approval policy a merged approval met, and who met it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approval: Option<Approvals>,
    },
    /// `core::operate`: a manual operation, an approval pull request's change, or a rollback
    /// because its pull request was closed.
    #[serde(rename_all = "camelCase")]
    Operate {
        /// `approve`, `promote`, `abort`, `retry`, `pause`, `resume`.
        op: String,
        /// The reason `operate` was given.
        reason: String,
        /// `Sluice-Operator` and `Sluice-Reason` of the message.
        operator: String,
        says: String,
        /// An approval branch's change: its step clock starts when it is merged.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        clock_from_merge: bool,
    },
    /// The status file's record of the spec brought in line with it (`revertOnDeletion`).
    Record {},
    /// A deleted canary's output reverted (`revertOnDeletion: true`).
    Revert {},
    /// The route copied again from its route source (`spec.routeSource`), edited while the
    /// canary held (`render::route_refresh`).
    RouteSource {},
    /// An approval merged by a login `forge.approvers` does not allow: the canary waits again
    /// (the status before the merge). `reason` names the login, as the forge said; `operator`
    /// is the message's `Sluice-Operator` (sluice's own identity).
    #[serde(rename_all = "camelCase")]
    Refused {
        reason: String,
        operator: String,
        /// The pull request whose merge was refused (absent in records before it was kept,
        /// and for a merge without a pull request).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pr: Option<u64>,
    },
    /// Owned files changed outside sluice: held or restored, as `drift:` says.
    #[serde(rename_all = "camelCase")]
    Drift {
        /// The drifted files.
        files: Vec<String>,
        /// The newest commit that changed them, as the commit's message names it.
        changed_by: String,
        /// The commit holding sluice's version of the output folder.
        output_from: String,
        /// `hold` or `restore`.
        policy: String,
        /// Set when no commit of sluice's was found within this many commits (a hold that
        /// restores nothing); absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        beyond: Option<usize>,
    },
    /// A drift hold ends: the owned files are sluice's again.
    Resume {},
    /// A wave reverted under `onFailure: rollback` (`crate::waves::revert`): a later wave
    /// failed on `revision`, and the wave's folder is put back as it was at `from`, the
    /// commit before the release reached it.
    #[serde(rename_all = "camelCase")]
    WaveRevert { revision: String, from: String },
    /// A wave held because its cluster did not answer (the status file alone says so).
    #[serde(rename_all = "camelCase")]
    Unreachable { cluster: String, error: String },
    /// A new revision waiting under `maxConcurrentCanaries` (the status file alone says so);
    /// `reason` is the wait the limit gave, as the status says it.
    #[serde(rename_all = "camelCase")]
    Queued { reason: String },
    /// Written before format 4 by commits a replay did not rebuild: `sluice audit` lists it
    /// as not replayable in a history written before format 4, and reports it after.
    #[serde(rename_all = "camelCase")]
    Other { what: String },
}

/// A merged approval's approvers as the approval policy counted them, the policy in force
/// then (in its one-line form), the revision's author and the merger, as the forge said:
/// `sluice audit` weighs them again against the policy at the commit before the merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Approvals {
    pub policy: String,
    pub approvers: Vec<ApproverRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merger: Option<String>,
}

/// One counted approver, and the team of `from` that let them approve (absent: by login).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApproverRecord {
    pub login: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
}

impl Approvals {
    pub fn of(met: &crate::core::approval::Met) -> Approvals {
        Approvals {
            policy: met.policy.to_string(),
            approvers: met
                .approvals
                .iter()
                .map(|a| ApproverRecord {
                    login: a.login.clone(),
                    team: a.team.clone(),
                })
                .collect(),
            author: met.author.clone(),
            merger: met.merger.clone(),
        }
    }

    /// The approvals as the core weighs them.
    pub fn approvals(&self) -> Vec<crate::core::approval::Approval> {
        self.approvers
            .iter()
            .map(|a| crate::core::approval::Approval {
                login: a.login.clone(),
                team: a.team.clone(),
            })
            .collect()
    }
}

/// One metric observation. The value is Rust's shortest round-trip text of the number (so
/// `NaN` and `inf`, which JSON has no numbers for, survive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metric {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A result that is not one number (Argo's web provider), as its display reads back
    /// (`{"major": "1"}`, `"ok"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// One webhook answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Webhook {
    pub name: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a recorded value cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("{REPLAY}: not the JSON sluice writes: {0}")]
    Json(String),
    #[error("{REPLAY}: metric {name}: value {value:?} is not a number")]
    Number { name: String, value: String },
    #[error("{REPLAY}: metric {name}: result {value:?} is not a recorded value")]
    Result { name: String, value: String },
    #[error("{REPLAY}: webhook {name}: unknown kind {kind:?}")]
    Kind { name: String, kind: String },
    #[error("{REPLAY}: unknown operation {0:?}")]
    Operation(String),
}

impl Record {
    /// The record of a commit made at `now` by `by` (record updates, reverts, drift, refused
    /// approvals; see [`By`]).
    pub fn of(by: By, now: Timestamp) -> Record {
        Record {
            format: FORMAT,
            now,
            by,
        }
    }

    /// The record of a drift decision on `fact`.
    pub fn drift(fact: &crate::core::observe::DriftFact, now: Timestamp) -> Record {
        Record::of(
            By::Drift {
                files: fact.files.clone(),
                changed_by: fact.by.clone(),
                output_from: fact.output_from.clone(),
                policy: policy_name(fact.policy).to_string(),
                beyond: fact.beyond,
            },
            now,
        )
    }

    /// The record of a decision `decide` made at `now` on `obs`.
    pub fn decided(obs: &Observations, now: Timestamp) -> Record {
        let metrics = obs
            .metrics
            .iter()
            .map(|m| {
                let (value, error, result) = match &m.value {
                    MetricValue::Value(v) => (Some(v.to_string()), None, None),
                    MetricValue::NoData => (None, None, None),
                    MetricValue::Error(e) => (None, Some(e.clone()), None),
                    MetricValue::Structured(v) => (None, None, Some(v.to_string())),
                };
                Metric {
                    name: m.name.clone(),
                    value,
                    error,
                    result,
                }
            })
            .collect();
        let webhooks = obs
            .webhooks
            .iter()
            .map(|w| Webhook {
                name: w.name.clone(),
                kind: kind_name(w.kind).to_string(),
                error: w.outcome.clone().err(),
            })
            .collect();
        Record {
            format: FORMAT,
            now,
            by: By::Decide {
                revision: obs.revision.clone(),
                applied: obs.applied,
                metrics,
                webhooks,
                judge: obs
                    .judge
                    .as_ref()
                    .map(crate::judge::record::JudgeRecord::of),
                approval: None,
            },
        }
    }

    /// The record of an operation made at `now`; `operator` and `says` are the message's
    /// `Sluice-Operator` and `Sluice-Reason`.
    pub fn operated(
        op: Operation,
        reason: &str,
        operator: &str,
        says: &str,
        now: Timestamp,
    ) -> Record {
        Record {
            format: FORMAT,
            now,
            by: By::Operate {
                op: op.verb().to_string(),
                reason: reason.to_string(),
                operator: operator.to_string(),
                says: says.to_string(),
                clock_from_merge: false,
            },
        }
    }

    /// The record of an approval by merging its pull request (or its branch), for the
    /// canary waiting in `waiting`: the approval branch's commit, made at the time the wait
    /// began, whose merge starts the approved step's clock (`clockFromMerge`).
    pub fn merged_approval(waiting: &crate::core::status::Status) -> Record {
        let mut record = Record::operated(
            Operation::Approve,
            "approved by merging the pull request",
            "pull request",
            "approved by merging",
            waiting.phase_since,
        );
        if let By::Operate {
            clock_from_merge, ..
        } = &mut record.by
        {
            *clock_from_merge = true;
        }
        record
    }

    /// The trailer, as `(key, value)` for a commit message.
    pub fn trailer(&self) -> (String, String) {
        // Serializing plain strings, numbers and booleans cannot fail.
        let value = serde_json::to_string(self).unwrap_or_default();
        (REPLAY.to_string(), value)
    }

    /// The record of a decision on a merged approval that met `met`.
    pub fn with_approval(mut self, met: &crate::core::approval::Met) -> Record {
        if let By::Decide { approval, .. } = &mut self.by {
            *approval = Some(Approvals::of(met));
        }
        self
    }

    /// The approval policy a merged approval met, when the record says.
    pub fn approvals(&self) -> Option<&Approvals> {
        match &self.by {
            By::Decide { approval, .. } => approval.as_ref(),
            _ => None,
        }
    }

    /// Reads a trailer value back.
    pub fn parse(value: &str) -> Result<Record, RecordError> {
        serde_json::from_str(value).map_err(|e| RecordError::Json(e.to_string()))
    }
}

impl By {
    /// The observations of a `Decide` record.
    pub fn observations(&self) -> Result<Option<Observations>, RecordError> {
        let By::Decide {
            revision,
            applied,
            metrics,
            webhooks,
            judge,
            ..
        } = self
        else {
            return Ok(None);
        };
        let metrics = metrics
            .iter()
            .map(|m| {
                let value = match (&m.value, &m.error) {
                    (_, Some(e)) => MetricValue::Error(e.clone()),
                    (None, None) if m.result.is_some() => {
                        let text = m.result.clone().unwrap_or_default();
                        MetricValue::Structured(
                            crate::core::argo_expr::Value::parse_recorded(&text).ok_or(
                                RecordError::Result {
                                    name: m.name.clone(),
                                    value: text,
                                },
                            )?,
                        )
                    }
                    (Some(v), None) => {
                        MetricValue::Value(v.parse().map_err(|_| RecordError::Number {
                            name: m.name.clone(),
                            value: v.clone(),
                        })?)
                    }
                    (None, None) => MetricValue::NoData,
                };
                Ok(MetricObservation {
                    name: m.name.clone(),
                    value,
                })
            })
            .collect::<Result<Vec<_>, RecordError>>()?;
        let webhooks = webhooks
            .iter()
            .map(|w| {
                let kind = WebhookKind::ALL
                    .iter()
                    .find(|(n, _)| *n == w.kind)
                    .map(|(_, k)| *k)
                    .ok_or_else(|| RecordError::Kind {
                        name: w.name.clone(),
                        kind: w.kind.clone(),
                    })?;
                Ok(WebhookObservation {
                    name: w.name.clone(),
                    kind,
                    outcome: w.error.clone().map_or(Ok(()), Err),
                })
            })
            .collect::<Result<Vec<_>, RecordError>>()?;
        Ok(Some(Observations {
            revision: revision.clone(),
            metrics,
            webhooks,
            applied: *applied,
            judge: judge
                .as_ref()
                .map(|j| j.observation())
                .transpose()
                .map_err(|(name, value)| RecordError::Number { name, value })?,
        }))
    }
}

/// The operation a verb names.
pub fn operation(verb: &str) -> Result<Operation, RecordError> {
    Operation::ALL
        .into_iter()
        .find(|op| op.verb() == verb)
        .ok_or_else(|| RecordError::Operation(verb.to_string()))
}

/// The `drift:` setting's word for a policy.
pub fn policy_name(policy: crate::core::observe::DriftPolicy) -> &'static str {
    match policy {
        crate::core::observe::DriftPolicy::Hold => "hold",
        crate::core::observe::DriftPolicy::Restore => "restore",
    }
}

fn kind_name(kind: WebhookKind) -> &'static str {
    WebhookKind::ALL
        .iter()
        .find(|(_, k)| *k == kind)
        .map_or("event", |(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_survive_the_trailer_exactly() {
        let obs = Observations {
            revision: "abc123".into(),
            metrics: vec![
                MetricObservation {
                    name: "request-success-rate".into(),
                    value: MetricValue::Value(0.1 + 0.2),
                },
                MetricObservation {
                    name: "latency".into(),
                    value: MetricValue::Value(f64::INFINITY),
                },
                MetricObservation {
                    name: "nan".into(),
                    value: MetricValue::Value(f64::NAN),
                },
                MetricObservation {
                    name: "empty".into(),
                    value: MetricValue::NoData,
                },
                MetricObservation {
                    name: "down".into(),
                    value: MetricValue::Error("HTTP 500:\n\"oops\"".into()),
                },
                MetricObservation {
                    name: "web".into(),
                    value: MetricValue::Structured(crate::core::argo_expr::Value::Map(
                        [
                            (
                                "major".to_string(),
                                crate::core::argo_expr::Value::Str("1".into()),
                            ),
                            ("n".to_string(), crate::core::argo_expr::Value::Number(0.5)),
                        ]
                        .into_iter()
                        .collect(),
                    )),
                },
            ],
            webhooks: vec![WebhookObservation {
                name: "gate".into(),
                kind: WebhookKind::ConfirmPromotion,
                outcome: Err("HTTP 403".into()),
            }],
            applied: false,
            judge: None,
        };
        let now: Timestamp = "2026-11-30T10:00:00.123456789Z".parse().unwrap();
        let (key, value) = Record::decided(&obs, now).trailer();
        assert_eq!(key, REPLAY);
        assert!(!value.contains('\n'), "one line: {value}");
        let back = Record::parse(&value).unwrap();
        assert_eq!(back.now, now);
        assert_eq!(back.format, FORMAT);
        let got = back.by.observations().unwrap().unwrap();
        // NaN != NaN: compare the text.
        assert_eq!(format!("{got:?}"), format!("{obs:?}"));
    }

    #[test]
    fn operations_round_trip_and_bad_values_are_named() {
        let now: Timestamp = "2026-11-30T10:00:00Z".parse().unwrap();
        let r = Record::operated(Operation::Pause, "why", "Ann <a@x>", "why", now);
        let back = Record::parse(&r.trailer().1).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.by.observations(), Ok(None));
        for by in [
            By::Record {},
            By::Revert {},
            By::RouteSource {},
            By::Resume {},
            By::WaveRevert {
                revision: "9e46dc7a1b".into(),
                from: "abc".into(),
            },
            By::Unreachable {
                cluster: "API server https://eu.example:6443".into(),
                error: "connection refused".into(),
            },
            By::Queued {
                reason: "waiting: 2 of 2 progressing: prod/a, prod/b".into(),
            },
            By::Refused {
                reason: "eve merged".into(),
                operator: "sluice <sluice@localhost>".into(),
                pr: Some(7),
            },
            By::Drift {
                files: vec!["a/route.yaml".into()],
                changed_by: "abc1234 by Eve: x".into(),
                output_from: "abc".into(),
                policy: "hold".into(),
                beyond: Some(500),
            },
        ] {
            let r = Record::of(by, now);
            assert_eq!(Record::parse(&r.trailer().1).unwrap(), r);
        }
        assert_eq!(operation("pause"), Ok(Operation::Pause));
        assert_eq!(
            operation("explode"),
            Err(RecordError::Operation("explode".into()))
        );
        assert!(matches!(Record::parse("{"), Err(RecordError::Json(_))));
        let bad = r#"{"format":2,"now":"2026-11-30T10:00:00Z","by":"decide","revision":"r","applied":true,"metrics":[{"name":"m","value":"ten"}]}"#;
        assert_eq!(
            Record::parse(bad).unwrap().by.observations(),
            Err(RecordError::Number {
                name: "m".into(),
                value: "ten".into()
            })
        );
    }
}
