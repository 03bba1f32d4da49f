//! `sluice validate PATH...`: exit 0 when every canary and the repo settings are valid, 1 with
//! every problem on stderr.

use std::path::{Path, PathBuf};

use crate::spec::load::{find_settings, load_settings, Loaded};
use crate::spec::settings::Settings;
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
    let mut loaded = crate::spec::load::load(&Snapshot::read_paths(paths), &settings);
    errors.append(&mut loaded.errors);
    loaded.errors = errors;
    (settings, loaded)
}

pub fn run(args: &Args) -> anyhow::Result<i32> {
    let (_, loaded) = load(&args.paths, args.config.as_deref());
    for e in &loaded.errors {
        eprintln!("{e}");
    }
    if loaded.errors.is_empty() {
        println!("{} canaries valid", loaded.canaries.len());
        Ok(0)
    } else {
        eprintln!(
            "{} problem(s) found; {} canaries valid",
            loaded.errors.len(),
            loaded.canaries.len()
        );
        Ok(1)
    }
}
