//! Output folders as they are in the work tree: sluice owns each one and writes only its own
//! YAML files there, so an output that names a file, or a folder holding files that are not
//! YAML (a README, a script), is refused with the line of the canary's `output`
//! field. Otherwise the first write would fail on the file, or the human's file would sit in
//! a folder sluice rewrites and drift checks judge. Hidden files are passed over.
//!
//! YAML files sluice did not generate are judged from the snapshot by `load`; this module only
//! looks at names and file types on disk (no file is read). It must not decide anything else
//! about a canary.

use std::path::Path;

use crate::spec::load::Loaded;
use crate::spec::model::Canary;
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::Snapshot;

/// Deepest folder level looked into below an output folder (sluice writes none; this only
/// bounds the walk).
const MAX_DEPTH: usize = 16;

/// Drops, with an error, every canary whose output folder in the work tree `root` is a file
/// path or holds a file that is not YAML.
pub fn reject_unowned_paths(loaded: &mut Loaded, snapshot: &Snapshot, root: &Path) {
    let errors = &mut loaded.errors;
    loaded
        .canaries
        .retain(|canary| match problem(root, canary) {
            None => true,
            Some(message) => {
                errors.push(SpecError {
                    file: canary.file.clone(),
                    line: output_line(snapshot, canary),
                    field: "spec.output".into(),
                    message,
                });
                false
            }
        });
}

/// The line of `spec.output` in the canary's document, or the canary's own line when the
/// folder comes from the settings' output pattern.
fn output_line(snapshot: &Snapshot, canary: &Canary) -> usize {
    snapshot
        .file(&canary.file)
        .and_then(|f| f.documents().iter().find(|d| d.line == canary.line))
        .and_then(|d| d.get("spec")?.get("output"))
        .map_or(canary.line, |n| n.line)
}

fn is_yaml(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml")
}

/// What is wrong with the canary's output folder in `root`, if anything.
fn problem(root: &Path, canary: &Canary) -> Option<String> {
    let out = canary.output.as_str();
    let mut path = root.to_path_buf();
    let mut so_far = String::new();
    for part in out.split('/') {
        path.push(part);
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(part);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            // Not there yet: sluice creates it.
            break;
        };
        if !meta.is_dir() {
            let what = if meta.file_type().is_symlink() {
                "a symbolic link"
            } else {
                "a file"
            };
            return Some(format!(
                "output folder {out} is a file path: {so_far} is {what}; an output is a folder sluice writes several files into. Give the canary a folder of its own"
            ));
        }
    }
    if out.split('/').next_back().is_some_and(is_yaml) {
        return Some(format!(
            "output folder {out} is a file name; an output is a folder sluice writes several files into (e.g. {}). Give the canary a folder of its own",
            out.trim_end_matches(".yaml").trim_end_matches(".yml")
        ));
    }
    foreign_file(&root.join(out)).map(|file| {
        format!(
            "output folder {out} holds {out}/{file}, which is not YAML; sluice owns this folder and writes only its own manifests there. Move {out}/{file} out of it"
        )
    })
}

/// The first file (by name, folders in order) below `folder` whose name is not `*.yaml` or
/// `*.yml`, relative to `folder`; `None` when there is none or no folder. Hidden names
/// (`.gitkeep`, an editor's swap file, `.DS_Store` in a work tree) are passed over, as the
/// snapshot passes over hidden folders: no GitOps engine applies them.
fn foreign_file(folder: &Path) -> Option<String> {
    let walk = walkdir::WalkDir::new(folder)
        .max_depth(MAX_DEPTH)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walk.filter_map(Result::ok) {
        if entry.file_type().is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy();
        if !is_yaml(&name) {
            let relative = entry.path().strip_prefix(folder).ok()?;
            return Some(relative.to_string_lossy().replace('\\', "/"));
        }
    }
    None
}
