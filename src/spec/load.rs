//! Finds and reads every canary in files and folders: the only file IO of `spec/`.
//!
//! A bad canary is reported and skipped; the others load. Non-canary documents (Deployments,
//! Services, anything else) are ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::spec::canary::{read_flagger, read_native};
use crate::spec::error::SpecError;
use crate::spec::model::{Canary, CanaryId};
use crate::spec::node::{parse_documents, Value};
use crate::spec::reader::Reader;
use crate::spec::settings::{parse_settings, Settings, SETTINGS_PATH};

/// Largest spec file read (a config repo's YAML is small; this bounds memory on bad input).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Canaries that loaded, and every problem found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub canaries: Vec<Canary>,
    pub errors: Vec<SpecError>,
}

/// Reads the canaries in one file's text; `file` names it in errors.
pub fn load_text(file: &str, text: &str, settings: &Settings) -> Loaded {
    let mut r = Reader::new(file);
    let mut canaries = Vec::new();
    match parse_documents(text) {
        Err(e) => r.error(e.line, "", format!("YAML syntax error: {}", e.message)),
        Ok(docs) => {
            for doc in docs {
                let root = &doc.root;
                let Value::Map(_) = root.value else { continue };
                let kind = root.get("kind").and_then(|n| n.as_str());
                let api = root.get("apiVersion").and_then(|n| n.as_str());
                let canary = match (api, kind) {
                    (Some("sluice.dev/v1alpha1"), Some("Canary")) => {
                        read_native(&mut r, root, settings)
                    }
                    (Some("flagger.app/v1beta1"), Some("Canary")) => {
                        read_flagger(&mut r, root, settings)
                    }
                    (Some(api), Some("Canary"))
                        if api.starts_with("sluice.dev/") || api.starts_with("flagger.app/") =>
                    {
                        let line = root.get("apiVersion").map_or(root.line, |n| n.line);
                        r.error(line, "apiVersion", format!("expected sluice.dev/v1alpha1 or flagger.app/v1beta1, found {api:?}"));
                        None
                    }
                    _ => None,
                };
                canaries.extend(canary);
            }
        }
    }
    Loaded {
        canaries,
        errors: r.errors,
    }
}

/// Every YAML file under `path` (or `path` itself), sorted, skipping hidden folders.
pub fn yaml_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(out);
    }
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let file_type = entry.file_type()?;
            if file_type.is_dir() {
                if !name.starts_with('.') {
                    stack.push(entry.path());
                }
            } else if file_type.is_file() && (name.ends_with(".yaml") || name.ends_with(".yml")) {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Finds `.sluice/config.yaml` in `start` or its ancestors.
pub fn find_settings(start: &Path) -> Option<PathBuf> {
    let start = if start.is_file() {
        start.parent()?
    } else {
        start
    };
    start
        .ancestors()
        .map(|dir| dir.join(SETTINGS_PATH))
        .find(|p| p.is_file())
}

/// Reads the repo settings (defaults when the file is absent).
pub fn load_settings(path: Option<&Path>) -> Result<Settings, Vec<SpecError>> {
    let Some(path) = path else {
        return Ok(Settings::default());
    };
    let file = path.display().to_string();
    match read_bounded(path) {
        Ok(text) => parse_settings(&file, &text),
        Err(message) => Err(vec![SpecError {
            file,
            line: 1,
            field: String::new(),
            message,
        }]),
    }
}

/// Reads a spec file as UTF-8 text, refusing files over [`MAX_FILE_BYTES`].
pub fn read_bounded(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "file is {} bytes; spec files are limited to {MAX_FILE_BYTES} bytes",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    String::from_utf8(bytes).map_err(|_| "expected UTF-8 text".to_string())
}

/// Loads every canary under `paths`, naming files as `display(path)`.
pub fn load_paths(
    paths: &[PathBuf],
    settings: &Settings,
    display: impl Fn(&Path) -> String,
) -> Loaded {
    let mut loaded = Loaded::default();
    for root in paths {
        let files = match yaml_files(root) {
            Ok(f) => f,
            Err(e) => {
                loaded.errors.push(SpecError {
                    file: display(root),
                    line: 1,
                    field: String::new(),
                    message: format!("cannot read: {e}"),
                });
                continue;
            }
        };
        for file in files {
            let name = display(&file);
            match read_bounded(&file) {
                Ok(text) => {
                    let one = load_text(&name, &text, settings);
                    loaded.canaries.extend(one.canaries);
                    loaded.errors.extend(one.errors);
                }
                Err(message) => loaded.errors.push(SpecError {
                    file: name,
                    line: 1,
                    field: String::new(),
                    message,
                }),
            }
        }
    }
    reject_duplicates(&mut loaded);
    reject_shared_outputs(&mut loaded);
    loaded
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

/// The repo settings of a work tree (`.sluice/config.yaml`); errors name that file, and the
/// defaults stand in for settings that cannot be read.
pub fn settings_in(root: &Path) -> (Settings, Vec<SpecError>) {
    let path = root.join(crate::spec::settings::SETTINGS_PATH);
    let found = path.is_file().then_some(path);
    match load_settings(found.as_deref()) {
        Ok(s) => (s, Vec::new()),
        Err(mut errors) => {
            for e in &mut errors {
                e.file = crate::spec::settings::SETTINGS_PATH.to_string();
            }
            (Settings::default(), errors)
        }
    }
}

/// Every canary of a work tree, with errors naming repo-relative files.
pub fn load_work_tree(root: &Path, settings: &Settings) -> Loaded {
    load_paths(&[root.to_path_buf()], settings, |p| {
        p.strip_prefix(root)
            .unwrap_or(p)
            .to_string_lossy()
            .replace('\\', "/")
    })
}
