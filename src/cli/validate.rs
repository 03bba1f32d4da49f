//! `sluice validate PATH...`: exit 0 when every canary and the repo settings are valid, 1 with
//! every problem on stderr.

use std::path::{Path, PathBuf};

use crate::render::status_file;
use crate::spec::load::{find_settings, load_settings, Existing, Loaded};
use crate::spec::model::{CanaryId, Target};
use crate::spec::settings::Settings;
use crate::workload::{autoscaler, Index};
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::Snapshot;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or folders to check (folders are searched for *.yaml / *.yml).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Repo settings file (default: .sluice/config.yaml found above the first path).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// Loads settings and canaries the way `validate` and `plan` both need.
pub fn load(paths: &[PathBuf], config: Option<&Path>) -> (Settings, Loaded) {
    let (settings, loaded, _) = load_checked(paths, config);
    (settings, loaded)
}

/// [`load`], also saying whether the settings file was valid: when it was not, the canaries
/// were checked against default settings, which is not what the loop will use.
fn load_checked(paths: &[PathBuf], config: Option<&Path>) -> (Settings, Loaded, bool) {
    let settings_path = config
        .map(Path::to_path_buf)
        .or_else(|| paths.first().and_then(|p| find_settings(p)));
    let mut errors = Vec::new();
    let settings = match load_settings(settings_path.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            errors = e;
            Settings::default()
        }
    };
    let settings_ok = errors.is_empty();
    let snapshot = Snapshot::read_paths(paths);
    // Inside a repo, the repo's own files decide who owns a name or an output folder, as in
    // the tick, whatever part of it was given.
    let root = paths.first().and_then(|p| repo_root(p));
    let repo = root.as_deref().map(Snapshot::read);
    let has_status = |id: &CanaryId| {
        root.as_deref().is_some_and(|root| {
            std::fs::symlink_metadata(root.join(status_file::path_for(id))).is_ok()
        })
    };
    let existing = repo.as_ref().map(|files| Existing {
        files,
        has_status: &has_status,
    });
    let mut loaded = crate::spec::load::load_in(&snapshot, &settings, existing.as_ref());
    errors.append(&mut loaded.errors);
    resolve_autoscalers(&snapshot, &mut loaded, &mut errors);
    loaded.errors = errors;
    (settings, loaded, settings_ok)
}

/// The work tree `start` is in: the nearest folder holding `.git` or `.sluice`.
fn repo_root(start: &Path) -> Option<PathBuf> {
    let start = std::path::absolute(start).ok()?;
    start
        .ancestors()
        .find(|dir| {
            std::fs::symlink_metadata(dir.join(".git")).is_ok()
                || std::fs::symlink_metadata(dir.join(".sluice")).is_ok()
        })
        .map(Path::to_path_buf)
}

/// `spec.autoscalerRef` must name an autoscaler among the files read, one sluice can copy;
/// a canary whose reference does not resolve is an error (file, line, field) and dropped.
fn resolve_autoscalers(snapshot: &Snapshot, loaded: &mut Loaded, errors: &mut Vec<SpecError>) {
    let outputs: Vec<String> = loaded
        .canaries
        .iter()
        .map(|c| c.output.as_str().to_string())
        .collect();
    let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    let index = Index::new(snapshot, &outputs);
    loaded.canaries.retain(|canary| {
        let Target::TargetRef { name, .. } = &canary.target else {
            return true;
        };
        match autoscaler::resolve(canary, name.as_str(), &index) {
            Ok(_) => true,
            Err(e) => {
                errors.extend(e.0);
                false
            }
        }
    });
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let (_, loaded, settings_ok) = load_checked(&args.paths, args.config.as_deref());
    // The settings file's problems come first (they are first in `errors`).
    for e in &loaded.errors {
        eprintln!("{e}");
    }
    if loaded.errors.is_empty() {
        outln!("{} canaries valid", loaded.canaries.len());
        Ok(0)
    } else if !settings_ok {
        // Canaries checked against default settings (provider, output layout) may be valid
        // there and not under the settings the loop will read: claim nothing about them.
        eprintln!(
            "{} problem(s) found; the settings file is invalid, so the canaries were checked against default settings only and none is reported valid",
            loaded.errors.len()
        );
        Ok(1)
    } else {
        eprintln!(
            "{} problem(s) found; {} canaries valid",
            loaded.errors.len(),
            loaded.canaries.len()
        );
        Ok(1)
    }
}
