//! The status reader `sluice status` and the dashboard share: one row per canary, read from
//! the status files of a checkout (or a branch's tree written out). Reads files only.

use serde::Serialize;

use crate::deleted::{self, Orphan};
use crate::render::status_file;
use crate::spec::load::{load, load_settings};
use crate::spec::settings::SETTINGS_PATH;
use crate::yaml::snapshot::Snapshot;

/// One canary's row.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub namespace: String,
    pub name: String,
    pub phase: String,
    pub step: u32,
    pub canary_weight: u8,
    pub failed_checks: u32,
    pub revision: String,
    pub since: String,
    pub message: String,
    /// Warnings its spec gives (`sluice validate` prints them): fields a Flagger cluster
    /// prunes, reference apiVersions Flagger does not read.
    pub warnings: usize,
    /// Files changed outside sluice that hold the canary (`drift: hold`); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    /// The canary's dashboard page, when the settings name the dashboard (`dashboard.url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

pub fn rows(root: &std::path::Path) -> anyhow::Result<Vec<Row>> {
    let settings_path = root.join(SETTINGS_PATH);
    // Settings that do not load hold every canary (the tick decides nothing); say so on
    // each row rather than list them as if they ran on defaults.
    let (settings, held) =
        match load_settings(settings_path.is_file().then_some(settings_path.as_path())) {
            Ok(s) => (s, None),
            Err(errors) => (
                Default::default(),
                Some(format!(
                    "held: {}; every canary holds until {SETTINGS_PATH} loads",
                    errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                )),
            ),
        };
    let snapshot = Snapshot::read(root);
    let loaded = load(&snapshot, &settings);
    let mut out = Vec::new();
    for c in &loaded.canaries {
        let warnings = loaded.warnings_of(&c.id);
        let row = match status_file::read(root, &c.id, crate::yaml::snapshot::read_bounded) {
            Ok(Some(s)) => Row {
                namespace: c.id.namespace.to_string(),
                name: c.id.name.to_string(),
                phase: s.phase.to_string(),
                step: s.step,
                canary_weight: s.canary_weight,
                failed_checks: s.failed_checks,
                revision: s
                    .canary_revision
                    .clone()
                    .unwrap_or_else(|| s.promoted_revision.clone())
                    .chars()
                    .take(12)
                    .collect(),
                since: s.phase_since.to_string(),
                message: s.message.clone(),
                warnings,
                drift: s.drift.clone(),
                url: None,
            },
            Ok(None) => Row {
                namespace: c.id.namespace.to_string(),
                name: c.id.name.to_string(),
                phase: "-".into(),
                step: 0,
                canary_weight: 0,
                failed_checks: 0,
                revision: "-".into(),
                since: "-".into(),
                message: "not reconciled yet".into(),
                warnings,
                drift: Vec::new(),
                url: None,
            },
            Err(e) => Row {
                namespace: c.id.namespace.to_string(),
                name: c.id.name.to_string(),
                phase: "?".into(),
                step: 0,
                canary_weight: 0,
                failed_checks: 0,
                revision: "-".into(),
                since: "-".into(),
                message: format!("unreadable status file: {e}"),
                warnings,
                drift: Vec::new(),
                url: None,
            },
        };
        let url = settings.dashboard_page(c.id.namespace.as_str(), c.id.name.as_str());
        out.push(match &held {
            Some(message) => Row {
                message: message.clone(),
                url,
                ..row
            },
            None => Row { url, ..row },
        });
    }
    out.extend(deleted_rows(root, &snapshot));
    Ok(out)
}

/// Canaries whose spec is gone but whose status file is left: `Orphaned` (their output is
/// left as it is) or, with `revertOnDeletion` recorded, `Terminating` until the next tick
/// reverts their output.
fn deleted_rows(root: &std::path::Path, snapshot: &Snapshot) -> Vec<Row> {
    deleted::find(root, snapshot, crate::yaml::snapshot::read_bounded)
        .into_iter()
        .map(|d| {
            let (phase, message) = if d.reverts() {
                (
                    "Terminating",
                    "spec deleted with revertOnDeletion: the next tick reverts its output"
                        .to_string(),
                )
            } else {
                let orphan = Orphan {
                    canary: d.id.to_string(),
                    status_file: Some(d.status_file.clone()),
                    output: d.record.as_ref().map(|r| r.output.clone()),
                };
                ("Orphaned", orphan.to_string())
            };
            let status = d.status.as_ref().ok();
            Row {
                namespace: d.id.namespace.to_string(),
                name: d.id.name.to_string(),
                phase: phase.into(),
                step: status.map_or(0, |s| s.step),
                canary_weight: status.map_or(0, |s| s.canary_weight),
                failed_checks: status.map_or(0, |s| s.failed_checks),
                revision: status.map_or_else(
                    || "-".into(),
                    |s| s.promoted_revision.chars().take(12).collect(),
                ),
                since: status.map_or_else(|| "-".into(), |s| s.phase_since.to_string()),
                message,
                warnings: 0,
                drift: Vec::new(),
                url: None,
            }
        })
        .collect()
}
