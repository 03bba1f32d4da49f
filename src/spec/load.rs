//! Reads every canary of a [`Snapshot`], and the repo settings.
//!
//! A bad canary is reported and skipped; the others load. Non-canary documents (Deployments,
//! Services, anything else) are ignored. The only file IO here is the settings file; canary
//! files come from the snapshot.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::spec::canary::{read_flagger, read_native};
use crate::spec::model::{Canary, CanaryId};
use crate::spec::settings::{parse_settings, Settings, SETTINGS_PATH};
use crate::yaml::error::SpecError;
use crate::yaml::node::{parse_documents, Node, Value};
use crate::yaml::reader::Reader;
use crate::yaml::snapshot::{read_bounded, read_inside, Contents, ReadError, Snapshot};

/// Canaries that loaded, and every problem found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub canaries: Vec<Canary>,
    pub errors: Vec<SpecError>,
}

/// Every canary of the snapshot, in file order; duplicates and shared output folders are
/// errors and dropped.
pub fn load(snapshot: &Snapshot, settings: &Settings) -> Loaded {
    let mut loaded = Loaded::default();
    for file in snapshot.files() {
        let mut r = Reader::new(file.name.as_str());
        match &file.contents {
            Contents::Unreadable(e) => r.error(1, "", e.to_string()),
            Contents::Invalid { error, .. } => syntax_error(&mut r, error.line, &error.message),
            Contents::Yaml { documents, .. } => {
                loaded
                    .canaries
                    .extend(read_canaries(&mut r, documents, settings, snapshot));
            }
        }
        loaded.errors.extend(r.errors);
    }
    reject_duplicates(&mut loaded);
    reject_shared_outputs(&mut loaded);
    loaded
}

/// Reads the canaries in one file's text; `file` names it in errors.
pub fn load_text(file: &str, text: &str, settings: &Settings) -> Loaded {
    let mut r = Reader::new(file);
    let canaries = match parse_documents(text) {
        Err(e) => {
            syntax_error(&mut r, e.line, &e.message);
            Vec::new()
        }
        Ok(docs) => {
            let roots: Vec<Node> = docs.into_iter().map(|d| d.root).collect();
            // One file alone: references to other files' objects are not found.
            read_canaries(&mut r, &roots, settings, &Snapshot::EMPTY)
        }
    };
    Loaded {
        canaries,
        errors: r.errors,
    }
}

fn syntax_error(r: &mut Reader, line: usize, message: &str) {
    r.error(line, "", format!("YAML syntax error: {message}"));
}

fn read_canaries(
    r: &mut Reader,
    roots: &[Node],
    settings: &Settings,
    snapshot: &Snapshot,
) -> Vec<Canary> {
    let mut canaries = Vec::new();
    for root in roots {
        let Value::Map(_) = root.value else { continue };
        let kind = root.get("kind").and_then(|n| n.as_str());
        let api = root.get("apiVersion").and_then(|n| n.as_str());
        let canary = match (api, kind) {
            (Some("sluice.dev/v1alpha1"), Some("Canary")) => read_native(r, root, settings),
            (Some("flagger.app/v1beta1"), Some("Canary")) => {
                read_flagger(r, root, settings, snapshot)
            }
            (Some(api), Some("Canary"))
                if api.starts_with("sluice.dev/") || api.starts_with("flagger.app/") =>
            {
                let line = root.get("apiVersion").map_or(root.line, |n| n.line);
                r.error(
                    line,
                    "apiVersion",
                    format!("expected sluice.dev/v1alpha1 or flagger.app/v1beta1, found {api:?}"),
                );
                None
            }
            _ => None,
        };
        canaries.extend(canary);
    }
    canaries
}

/// Finds `.sluice/config.yaml` in `start` or its ancestors.
pub fn find_settings(start: &Path) -> Option<PathBuf> {
    let start = if start.is_file() {
        start.parent()?
    } else {
        start
    };
    // Found as soon as anything is there, a link included, so a linked settings file is
    // refused by the read rather than passed over.
    start
        .ancestors()
        .map(|dir| dir.join(SETTINGS_PATH))
        .find(|p| std::fs::symlink_metadata(p).is_ok())
}

/// Reads the repo settings (defaults when the file is absent).
pub fn load_settings(path: Option<&Path>) -> Result<Settings, Vec<SpecError>> {
    let Some(path) = path else {
        return Ok(Settings::default());
    };
    let file = path.display().to_string();
    // The repo root is the folder holding `.sluice/`: no folder on the way may be a link.
    let read = match path.parent().and_then(Path::parent) {
        Some(root) => read_inside(root, path, read_bounded),
        None => read_bounded(path),
    };
    match read {
        Ok(text) => parse_settings(&file, &text),
        Err(e) => Err(vec![SpecError {
            file,
            line: 1,
            field: String::new(),
            message: e.to_string(),
        }]),
    }
}

/// Two canaries writing one output folder would overwrite each other's route: the later ones
/// are errors and are dropped.
pub fn reject_shared_outputs(loaded: &mut Loaded) {
    let mut first: BTreeMap<String, (String, String, usize)> = BTreeMap::new();
    let mut keep = Vec::new();
    for canary in std::mem::take(&mut loaded.canaries) {
        let out = canary.output.as_str().to_string();
        if let Some((id, file, line)) = first.get(&out) {
            loaded.errors.push(SpecError {
                file: canary.file.clone(),
                line: canary.line,
                field: "spec.output".into(),
                message: format!(
                    "output folder {out} is already written by canary {id} ({file}:{line}); give each canary its own folder"
                ),
            });
            continue;
        }
        first.insert(
            out,
            (canary.id.to_string(), canary.file.clone(), canary.line),
        );
        keep.push(canary);
    }
    loaded.canaries = keep;
}

/// Two canaries with one namespace/name: the later ones are errors and are dropped.
pub fn reject_duplicates(loaded: &mut Loaded) {
    let mut first: BTreeMap<CanaryId, (String, usize)> = BTreeMap::new();
    let mut keep = Vec::new();
    for canary in std::mem::take(&mut loaded.canaries) {
        if let Some((file, line)) = first.get(&canary.id) {
            loaded.errors.push(SpecError {
                file: canary.file.clone(),
                line: canary.line,
                field: "metadata.name".into(),
                message: format!(
                    "duplicate canary {}: already defined at {file}:{line}",
                    canary.id
                ),
            });
            continue;
        }
        first.insert(canary.id.clone(), (canary.file.clone(), canary.line));
        keep.push(canary);
    }
    loaded.canaries = keep;
}

/// The repo settings of a work tree (`.sluice/config.yaml`, read with `read`); errors name
/// that file, and the defaults stand in for settings that cannot be read.
pub fn settings_in(
    root: &Path,
    read: impl FnOnce(&Path) -> Result<String, ReadError>,
) -> (Settings, Vec<SpecError>) {
    let path = root.join(crate::spec::settings::SETTINGS_PATH);
    // Absent means defaults; anything there (a link, a folder) is read and refused.
    if std::fs::symlink_metadata(&path).is_err() {
        return (Settings::default(), Vec::new());
    }
    let file = crate::spec::settings::SETTINGS_PATH;
    let parsed = match read_inside(root, &path, read) {
        Ok(text) => parse_settings(file, &text),
        Err(e) => Err(vec![SpecError {
            file: file.to_string(),
            line: 1,
            field: String::new(),
            message: e.to_string(),
        }]),
    };
    match parsed {
        Ok(s) => (s, Vec::new()),
        Err(mut errors) => {
            for e in &mut errors {
                e.file = file.to_string();
            }
            (Settings::default(), errors)
        }
    }
}
