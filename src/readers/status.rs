//! The status reader `sluice status` and the dashboard share: one row per canary (one per
//! wave for a canary with waves, each with its release's summary), read from the status
//! files of a checkout ([`Checkout`]) or of a commit's tree objects
//! ([`crate::commit_files::At`], what the dashboard reads: nothing is written out).
//! Reads files only.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::commit_files::At;
use crate::deleted::{self, Orphan};
use crate::manifest::load::{load, settings_from, Loaded};
use crate::manifest::settings::{Settings, SETTINGS_PATH};
use crate::render::status_file;
use crate::workload::Outside;
use crate::yaml::snapshot::{read_bounded, read_inside, ReadError, Snapshot};

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
    /// When the phase last changed (RFC 3339, to the second).
    pub since: String,
    /// How long ago that was, as people read it (`4m10s`, `3h`, `2d`); `-` when unknown.
    pub age: String,
    pub message: String,
    /// Held by `sluice pause` until `sluice resume` (the status file's `paused: true`).
    pub paused: bool,
    /// What keeps the canary from moving on its own, and who holds it; absent when nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
    /// Why a Failed canary failed (its status message); absent in any other phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The images of the primary and canary workloads sluice wrote (container name to image);
    /// absent for a canary without workloads of its own (route-only, revisions in the route).
    #[serde(skip_serializing_if = "Images::is_empty")]
    pub images: Images,
    /// Warnings its spec gives (`sluice validate` prints them): fields a Flagger cluster
    /// prunes, reference apiVersions Flagger does not read.
    pub warnings: usize,
    /// Files changed outside sluice that hold the canary (`drift: hold`); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    /// The canary's dashboard page, when the settings name the dashboard (`dashboard.url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// For a wave's instance (`NAME.WAVE`): the wave's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    /// For a wave's instance: where the whole release stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<Release>,
}

/// What holds a canary: its kind, who holds it and why.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Held {
    /// `settings`, `adoption`, `suspend`, `pause`, `drift`, `cluster` or `queue`: in the order
    /// the loop obeys them.
    pub kind: &'static str,
    /// Who holds it: the operator of the `sluice pause` commit (or `sluice pause` when that
    /// commit is not read), the settings file, `spec.suspend`, drift, the cluster, or
    /// `maxConcurrentCanaries` (the queue).
    pub by: String,
    pub why: String,
}

/// The images (container name to image) of the primary and of the canary workload.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Images {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub primary: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub canary: BTreeMap<String, String>,
}

impl Images {
    pub fn is_empty(&self) -> bool {
        self.primary.is_empty() && self.canary.is_empty()
    }
}

/// How a canary held for its repo settings' errors starts its message ([`settings_of`]).
pub const HELD_SETTINGS: &str = "held: ";
/// How the status of a wave held for an unreachable cluster starts (`core::verdict`).
pub const HELD_CLUSTER: &str = "Held: cluster unreachable: ";
/// Who holds a canary paused, until the `sluice pause` commit names its operator.
pub const PAUSED_BY: &str = "sluice pause";

/// `d` as people read an age: `42s`, `4m10s`, `35m`, `3h5m`, `20h`, `2d`.
pub fn age(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let (m, h, days) = (s / 60, s / 3600, s / 86_400);
    let with = |big: u64, unit: &str, small: u64, small_unit: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{small_unit}")
        }
    };
    match s {
        0..60 => format!("{s}s"),
        60..600 => with(m, "m", s % 60, "s"),
        600..3600 => format!("{m}m"),
        3600..36_000 => with(h, "h", m % 60, "m"),
        36_000..172_800 => format!("{h}h"),
        _ => format!("{days}d"),
    }
}

/// The age of `since` at `now` (zero when `since` is later).
fn age_at(since: jiff::Timestamp, now: jiff::Timestamp) -> String {
    age(std::time::Duration::from_secs(
        u64::try_from(now.as_second().saturating_sub(since.as_second())).unwrap_or(0),
    ))
}

/// `t` to the second: the status file keeps nanoseconds nobody reads.
fn to_second(t: jiff::Timestamp) -> String {
    jiff::Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

/// What holds the canary, in the order the loop obeys it (`core::decide`): broken settings,
/// `adoption.hold` (a canary with a status: one without is initialized first), `spec.suspend`,
/// `sluice pause`, drift, an unreachable cluster, `maxConcurrentCanaries`.
fn held_of(
    c: &crate::manifest::model::Canary,
    status: Option<&crate::core::status::Status>,
    (settings, adoption): (Option<&str>, bool),
) -> Option<Held> {
    if let Some(message) = settings {
        return Some(Held {
            kind: "settings",
            by: SETTINGS_PATH.to_string(),
            why: message
                .strip_prefix(HELD_SETTINGS)
                .unwrap_or(message)
                .to_string(),
        });
    }
    if adoption && status.is_some() {
        return Some(Held {
            kind: "adoption",
            by: format!("{SETTINGS_PATH} adoption.hold"),
            why: "sluice keeps each canary at its first render and starts no rollout until the adoption is released (`sluice adopt release`)".into(),
        });
    }
    if c.suspend {
        return Some(Held {
            kind: "suspend",
            by: "spec.suspend".into(),
            why: "the spec sets suspend: true; no tick acts on the canary".into(),
        });
    }
    let s = status?;
    if s.paused {
        return Some(Held {
            kind: "pause",
            by: PAUSED_BY.into(),
            why: s.message.clone(),
        });
    }
    if !s.drift.is_empty() {
        return Some(Held {
            kind: "drift",
            by: "drift".into(),
            why: format!("{} changed outside sluice", s.drift.join(", ")),
        });
    }
    if let Some(why) = s.message.strip_prefix(HELD_CLUSTER) {
        return Some(Held {
            kind: "cluster",
            by: "cluster".into(),
            why: why.to_string(),
        });
    }
    // Waiting under `maxConcurrentCanaries` (`core::concurrency`): the status says why.
    s.waiting_since.map(|_| Held {
        kind: "queue",
        by: "maxConcurrentCanaries".into(),
        why: s.message.clone(),
    })
}

/// The images of the workloads sluice wrote into `output` (the files it generates there): a
/// workload named `*-primary` is the primary, any other the canary.
fn images_in(files: &dyn Files, output: &str) -> Images {
    let mut images = Images::default();
    let mut names = files.list(output);
    names.sort();
    for name in names.iter().filter(|n| n.ends_with(".yaml")) {
        let Some(Ok(text)) = files.read(&format!("{output}/{name}")) else {
            continue;
        };
        if !text.starts_with("# Generated by sluice") {
            continue;
        }
        let Ok(docs) = yaml_rust2::YamlLoader::load_from_str(&text) else {
            continue;
        };
        for doc in docs.iter().filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some("Deployment" | "DaemonSet" | "StatefulSet")
            )
        }) {
            let primary = doc["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-primary"));
            let into = if primary {
                &mut images.primary
            } else {
                &mut images.canary
            };
            for container in doc["spec"]["template"]["spec"]["containers"]
                .as_vec()
                .into_iter()
                .flatten()
            {
                if let (Some(n), Some(image)) =
                    (container["name"].as_str(), container["image"].as_str())
                {
                    into.insert(n.to_string(), image.to_string());
                }
            }
        }
    }
    images
}

/// Every canary `rows` show, as `NS/NAME` (a wave's instance `NS/NAME.WAVE`, and its
/// release `NS/NAME`), sorted.
pub fn known_canaries(rows: &[Row]) -> Vec<String> {
    let mut known: Vec<String> = rows
        .iter()
        .map(|r| format!("{}/{}", r.namespace, r.name))
        .chain(
            rows.iter()
                .filter_map(|r| Some(r.release.as_ref()?.canary.clone())),
        )
        .collect();
    known.sort();
    known.dedup();
    known
}

/// What a command that names a canary says when the repo has none of that name: the
/// closest name when one is close enough to be a typo, else the names there are.
pub fn no_canary(wanted: &str, known: &[String]) -> String {
    let names: Vec<&str> = known.iter().map(String::as_str).collect();
    match crate::yaml::reader::did_you_mean(wanted, &names) {
        Some(name) => format!("no canary {wanted} (did you mean {name}?)"),
        None if names.is_empty() => format!("no canary {wanted} (the repo has no canaries)"),
        None => format!(
            "no canary {wanted} (the repo has {}; `sluice status` lists them)",
            names.join(", ")
        ),
    }
}

/// A canary with waves as one release: where the source's revision stands, wave by wave.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Release {
    /// `NAMESPACE/NAME` of the canary.
    pub canary: String,
    /// The revision the release rolls out: the source's (12 characters).
    pub revision: String,
    /// `InProgress`, `Failed` (a wave failed on the revision) or `Done` (every wave runs it).
    pub state: String,
    /// The wave in progress, or the one that failed; absent when done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    /// That wave's place in the release, 1-based; absent when done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wave_number: Option<usize>,
    /// Every wave, in release order.
    pub waves: Vec<String>,
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let of = self.waves.len();
        match (&self.wave, self.wave_number, self.state.as_str()) {
            (Some(wave), Some(n), "Failed") => write!(
                f,
                "{}: release of {} failed in wave {wave} ({n}/{of})",
                self.canary, self.revision
            ),
            (Some(wave), Some(n), _) => write!(
                f,
                "{}: release of {} in wave {wave} ({n}/{of}); waves {}",
                self.canary,
                self.revision,
                self.waves.join(" -> ")
            ),
            _ => write!(
                f,
                "{}: release of {} done: all {of} waves run it",
                self.canary, self.revision
            ),
        }
    }
}

/// Where the rows read the files the walk does not (settings, status files, a source in a
/// hidden folder): a checkout's folder, or a commit's tree objects.
pub trait Files {
    /// `file` (repo-relative) read as [`read_bounded`] reads a checked-out file (a link, a
    /// folder or a device refused); `None` when nothing is there.
    fn read(&self, file: &str) -> Option<Result<String, ReadError>>;
    /// The names of what is inside the folder `folder` (repo-relative); empty when none.
    fn list(&self, folder: &str) -> Vec<String>;
    /// The folder workload lookups are handed: a checkout's, or one nothing is below.
    fn root(&self) -> &Path;
    /// Where workload lookups read files outside the snapshot; `None`: from [`Files::root`].
    fn outside(&self) -> Option<&dyn Outside>;
}

/// A checkout (or any folder) on disk, read in place; links refused.
pub struct Checkout<'a>(pub &'a Path);

impl Files for Checkout<'_> {
    fn read(&self, file: &str) -> Option<Result<String, ReadError>> {
        let path = self.0.join(file);
        // `symlink_metadata`, not `exists`: a link (even a dangling one) is refused, not absent.
        std::fs::symlink_metadata(&path).ok()?;
        Some(read_inside(self.0, &path, read_bounded))
    }

    fn list(&self, folder: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.0.join(folder)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect()
    }

    fn root(&self) -> &Path {
        self.0
    }

    fn outside(&self) -> Option<&dyn Outside> {
        None
    }
}

/// The folder handed to workload lookups of a tree: nothing can be below `/dev/null`, so a
/// read that went to the disk instead of the tree would find nothing (none does).
const NO_FOLDER: &str = "/dev/null/sluice-tree";

impl Files for At<'_> {
    fn read(&self, file: &str) -> Option<Result<String, ReadError>> {
        At::read(self, file)
    }

    fn list(&self, folder: &str) -> Vec<String> {
        self.files
            .list(folder)
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    fn root(&self) -> &Path {
        Path::new(NO_FOLDER)
    }

    fn outside(&self) -> Option<&dyn Outside> {
        Some(self)
    }
}

/// The repo settings read through `files` (defaults when absent), and, when they do not
/// load, the message every row then carries: the tick decides nothing, so each row says so
/// rather than list the canaries as if they ran on defaults.
pub fn settings_of(files: &dyn Files) -> (Settings, Option<String>) {
    let Some(read) = files.read(SETTINGS_PATH) else {
        return (Settings::default(), None);
    };
    let (settings, errors) = settings_from(read);
    if errors.is_empty() {
        return (settings, None);
    }
    let held = format!(
        "{HELD_SETTINGS}{}; every canary holds until {SETTINGS_PATH} loads",
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
    (settings, Some(held))
}

/// What the rows are made of: the repo's files, their snapshot, the settings and the
/// canaries loaded from them.
pub struct Repo<'a> {
    pub files: &'a dyn Files,
    pub snapshot: &'a Snapshot,
    /// Why every canary holds (see [`settings_of`]).
    pub held: Option<&'a str>,
    pub settings: &'a Settings,
    pub loaded: &'a Loaded,
}

/// The rows of the checkout at `root` (what `sluice status` prints of a folder); `now`
/// gives their ages.
pub fn rows(root: &Path, now: jiff::Timestamp) -> anyhow::Result<Vec<Row>> {
    let files = Checkout(root);
    let (settings, held) = settings_of(&files);
    let snapshot = Snapshot::read(root);
    let loaded = load(&snapshot, &settings);
    Ok(rows_in(
        &Repo {
            files: &files,
            snapshot: &snapshot,
            held: held.as_deref(),
            settings: &settings,
            loaded: &loaded,
        },
        now,
    ))
}

/// A canary's status through `files`; `None` when it has no status file.
pub fn status(
    files: &dyn Files,
    id: &crate::manifest::model::CanaryId,
) -> Result<Option<crate::core::status::Status>, String> {
    files
        .read(&status_file::path_for(id))
        .map(|read| status_file::from_read(read).map(|(status, _)| status))
        .transpose()
}

/// The rows of `repo`; `now` gives their ages.
pub fn rows_in(repo: &Repo<'_>, now: jiff::Timestamp) -> Vec<Row> {
    let (settings, held, snapshot, loaded) = (repo.settings, repo.held, repo.snapshot, repo.loaded);
    let mut out = Vec::new();
    let mut statuses = Vec::new();
    for c in &loaded.canaries {
        let warnings = loaded.warnings_of(&c.id);
        let status = status(repo.files, &c.id);
        statuses.push(status.as_ref().ok().and_then(Clone::clone));
        let row = match status {
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
                since: to_second(s.phase_since),
                age: age_at(s.phase_since, now),
                message: s.message.clone(),
                paused: s.paused,
                held: held_of(c, Some(&s), (held, settings.adoption_hold)),
                reason: (s.phase == crate::core::status::Phase::Failed).then(|| s.message.clone()),
                images: images_in(repo.files, c.output.as_str()),
                warnings,
                drift: s.drift.clone(),
                url: None,
                wave: None,
                release: None,
            },
            Ok(None) => without_status(c, "-", "not reconciled yet".into(), warnings),
            Err(e) => without_status(c, "?", format!("unreadable status file: {e}"), warnings),
        };
        let row = Row {
            held: row
                .held
                .or_else(|| held_of(c, None, (held, settings.adoption_hold))),
            ..row
        };
        let url = settings.dashboard_page(c.id.namespace.as_str(), c.id.name.as_str());
        let wave = c.wave.as_ref().map(|w| w.name.to_string());
        out.push(match held {
            Some(message) => Row {
                message: message.to_string(),
                url,
                wave,
                ..row
            },
            None => Row { url, wave, ..row },
        });
    }
    let releases = releases(repo.files, snapshot, &loaded.canaries, &statuses);
    for (row, c) in out.iter_mut().zip(&loaded.canaries) {
        let key = (c.id.namespace.to_string(), c.base_name().to_string());
        row.release = c.wave.as_ref().and_then(|_| releases.get(&key).cloned());
    }
    out.extend(deleted_rows(repo.files, snapshot, now));
    out
}

/// The row of a canary whose status cannot be shown: `phase` and `message` say why.
fn without_status(
    c: &crate::manifest::model::Canary,
    phase: &str,
    message: String,
    warnings: usize,
) -> Row {
    Row {
        namespace: c.id.namespace.to_string(),
        name: c.id.name.to_string(),
        phase: phase.into(),
        step: 0,
        canary_weight: 0,
        failed_checks: 0,
        revision: "-".into(),
        since: "-".into(),
        age: "-".into(),
        message,
        paused: false,
        held: None,
        reason: None,
        images: Images::default(),
        warnings,
        drift: Vec::new(),
        url: None,
        wave: None,
        release: None,
    }
}

/// Each canary with waves (by namespace and name) as one release: the source's revision and
/// where it stands, by the release rule of [`crate::core::waves::release_state`]. `statuses`
/// holds each canary's status, in the order of `canaries`.
fn releases(
    files: &dyn Files,
    snapshot: &Snapshot,
    canaries: &[crate::manifest::model::Canary],
    statuses: &[Option<crate::core::status::Status>],
) -> BTreeMap<(String, String), Release> {
    use crate::core::waves::{release_state, ReleaseState, WaveState};
    let outputs: Vec<&str> = canaries.iter().map(|c| c.output.as_str()).collect();
    let index = match files.outside() {
        Some(outside) => crate::workload::Index::reading(snapshot, &outputs, outside),
        None => crate::workload::Index::new(snapshot, &outputs),
    };
    let mut members: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, c) in canaries.iter().enumerate() {
        if c.wave.is_some() {
            let key = (c.id.namespace.to_string(), c.base_name().to_string());
            members.entry(key).or_default().push(i);
        }
    }
    let mut out = BTreeMap::new();
    for ((namespace, name), mut at) in members {
        at.sort_by_key(|&i| canaries[i].wave.as_ref().map_or(0, |w| w.index));
        let Some(&first) = at.first() else { continue };
        // Every wave reads the one source: its revision is the release's.
        let revision = match crate::workload::revision(files.root(), &canaries[first], &index) {
            Ok(r) => r,
            Err(_) => continue,
        };
        let waves: Vec<WaveState<'_>> = at
            .iter()
            .filter_map(|&i| {
                let wave = canaries[i].wave.as_ref()?;
                Some(WaveState {
                    name: &wave.name,
                    status: statuses.get(i).and_then(Option::as_ref),
                })
            })
            .collect();
        let (state, wave) = match release_state(&revision, &waves) {
            ReleaseState::Done => ("Done", None),
            ReleaseState::InProgress { wave } => ("InProgress", Some(wave)),
            ReleaseState::Failed { wave } => ("Failed", Some(wave)),
        };
        let release = Release {
            canary: format!("{namespace}/{name}"),
            revision: revision.chars().take(12).collect(),
            state: state.to_string(),
            wave: wave.and_then(|w| waves.get(w)).map(|w| w.name.to_string()),
            wave_number: wave.map(|w| w + 1),
            waves: waves.iter().map(|w| w.name.to_string()).collect(),
        };
        out.insert((namespace, name), release);
    }
    out
}

/// Canaries whose spec is gone but whose status file is left: `Orphaned` (their output is
/// left as it is) or, with `revertOnDeletion` recorded, `Terminating` until the next tick
/// reverts their output.
fn deleted_rows(files: &dyn Files, snapshot: &Snapshot, now: jiff::Timestamp) -> Vec<Row> {
    let read_status = |file: &str| {
        files
            .read(file)
            .unwrap_or_else(|| Err(ReadError::Io(format!("{file} is not there"))))
    };
    deleted::find_listed(|folder| files.list(folder), snapshot, read_status)
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
                since: status.map_or_else(|| "-".into(), |s| to_second(s.phase_since)),
                age: status.map_or_else(|| "-".into(), |s| age_at(s.phase_since, now)),
                message,
                paused: status.is_some_and(|s| s.paused),
                held: None,
                reason: None,
                images: Images::default(),
                warnings: 0,
                drift: Vec::new(),
                url: None,
                wave: None,
                release: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANARY: &str = "apiVersion: sluice.dev/v1alpha1
kind: Canary
metadata: {name: web, namespace: shop}
spec:
  routeOnly: {services: [web-blue, web-green], revision: \"v2\"}
  service: {port: 8080}
  route: {apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}
  analysis: {interval: 1s, stepWeights: [50]}
  waves:
    - {name: staging, output: clusters/staging/web, settle: 1s}
    - {name: eu, output: clusters/eu/web, settle: 1s}
    - {name: us, output: clusters/us/web, settle: 1s}
";

    fn status(phase: &str, promoted: &str, canary: Option<&str>) -> String {
        let canary = canary
            .map(|c| format!("canaryRevision: {c}\n"))
            .unwrap_or_default();
        format!("phase: {phase}\nstep: 0\ncanaryWeight: 0\nprimaryWeight: 100\nfailedChecks: 0\npromotedRevision: {promoted}\n{canary}phaseSince: 2026-01-01T00:00:00Z\nstepStarted: 2026-01-01T00:00:00Z\nmessage: m\n")
    }

    fn rows_of(files: &[(&str, String)]) -> Vec<Row> {
        let dir = tempfile::tempdir().unwrap();
        for (file, text) in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        rows(dir.path(), jiff::Timestamp::UNIX_EPOCH).unwrap()
    }

    #[test]
    fn a_release_keeps_a_row_per_wave_and_says_which_wave_is_in_progress() {
        let rows = rows_of(&[
            ("apps/web/canary.yaml", CANARY.to_string()),
            (
                ".sluice/status/shop/web.staging.yaml",
                status("Succeeded", "v2", Some("v2")),
            ),
            (
                ".sluice/status/shop/web.eu.yaml",
                status("Progressing", "v1", Some("v2")),
            ),
            (
                ".sluice/status/shop/web.us.yaml",
                status("Initialized", "v1", None),
            ),
        ]);
        let names: Vec<(&str, Option<&str>, &str)> = rows
            .iter()
            .map(|r| (r.name.as_str(), r.wave.as_deref(), r.phase.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("web.staging", Some("staging"), "Succeeded"),
                ("web.eu", Some("eu"), "Progressing"),
                ("web.us", Some("us"), "Initialized"),
            ]
        );
        let release = rows[0].release.clone().expect("a release summary");
        assert!(
            rows.iter().all(|r| r.release.as_ref() == Some(&release)),
            "{rows:#?}"
        );
        assert_eq!(release.canary, "shop/web");
        assert_eq!(release.revision, "v2");
        assert_eq!(release.state, "InProgress");
        assert_eq!(release.wave.as_deref(), Some("eu"));
        assert_eq!(release.wave_number, Some(2));
        assert_eq!(release.waves, ["staging", "eu", "us"]);
        assert_eq!(
            release.to_string(),
            "shop/web: release of v2 in wave eu (2/3); waves staging -> eu -> us"
        );
    }

    #[test]
    fn a_release_every_wave_runs_is_done_and_a_failed_wave_stops_it() {
        let done = rows_of(&[
            ("apps/web/canary.yaml", CANARY.to_string()),
            (
                ".sluice/status/shop/web.staging.yaml",
                status("Succeeded", "v2", Some("v2")),
            ),
            (
                ".sluice/status/shop/web.eu.yaml",
                status("Succeeded", "v2", Some("v2")),
            ),
            (
                ".sluice/status/shop/web.us.yaml",
                status("Succeeded", "v2", Some("v2")),
            ),
        ]);
        let release = done[2].release.clone().unwrap();
        assert_eq!(
            (release.state.as_str(), release.wave.as_deref()),
            ("Done", None)
        );
        assert_eq!(
            release.to_string(),
            "shop/web: release of v2 done: all 3 waves run it"
        );
        let failed = rows_of(&[
            ("apps/web/canary.yaml", CANARY.to_string()),
            (
                ".sluice/status/shop/web.staging.yaml",
                status("Succeeded", "v2", Some("v2")),
            ),
            (
                ".sluice/status/shop/web.eu.yaml",
                status("Failed", "v1", Some("v2")),
            ),
            (
                ".sluice/status/shop/web.us.yaml",
                status("Initialized", "v1", None),
            ),
        ]);
        let release = failed[0].release.clone().unwrap();
        assert_eq!(release.state, "Failed");
        assert_eq!(
            release.to_string(),
            "shop/web: release of v2 failed in wave eu (2/3)"
        );
    }
}
