//! Output folders as they are in the repo: sluice owns each one and writes only its own
//! YAML files there, so an output that names a file, or a folder holding files that are not
//! YAML (a README, a script), is refused with the line of the canary's `output`
//! field. Otherwise the first write would fail on the file, or the human's file would sit in
//! a folder sluice rewrites and drift checks judge. Hidden files are passed over.
//!
//! YAML files sluice did not generate are judged from the snapshot by `load`; this module only
//! looks at names and file types ([`Folders`]: the head commit's tree in the loop, a folder on
//! disk for `validate --dir`); no file is read. It must not decide anything else
//! about a canary.

use std::path::Path;

use crate::manifest::load::Loaded;
use crate::manifest::model::Canary;
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::Snapshot;

/// Deepest folder level looked into below an output folder (sluice writes none; this only
/// bounds the walk).
const MAX_DEPTH: usize = 16;

/// What a path of the repo is, as output folders are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Missing,
    Folder,
    Link,
    File,
}

/// The repo's names and file types, on disk or in a commit's tree (no file is read).
pub trait Folders {
    /// What `path` (repo-relative) is; a link is never followed.
    fn kind(&self, path: &str) -> Kind;
    /// The entries of the folder `path`, each with whether it is a folder (not a link).
    fn entries(&self, path: &str) -> Vec<(String, bool)>;
}

/// A repo checked out in a folder on disk.
pub struct OnDisk<'a>(pub &'a Path);

impl Folders for OnDisk<'_> {
    fn kind(&self, path: &str) -> Kind {
        match std::fs::symlink_metadata(self.0.join(path)) {
            Err(_) => Kind::Missing,
            Ok(meta) if meta.file_type().is_symlink() => Kind::Link,
            Ok(meta) if meta.is_dir() => Kind::Folder,
            Ok(_) => Kind::File,
        }
    }

    fn entries(&self, path: &str) -> Vec<(String, bool)> {
        let Ok(entries) = std::fs::read_dir(self.0.join(path)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| {
                let dir = e.file_type().is_ok_and(|t| t.is_dir());
                (e.file_name().to_string_lossy().into_owned(), dir)
            })
            .collect()
    }
}

/// Drops, with an error, every canary whose output folder in the repo `folders` shows is a
/// file path or holds a file that is not YAML.
pub fn reject_unowned_paths(loaded: &mut Loaded, snapshot: &Snapshot, folders: &dyn Folders) {
    let errors = &mut loaded.errors;
    loaded
        .canaries
        .retain(|canary| match problem(folders, canary) {
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

/// What is wrong with the canary's output folder in `folders`, if anything.
fn problem(folders: &dyn Folders, canary: &Canary) -> Option<String> {
    let out = canary.output.as_str();
    let mut so_far = String::new();
    for part in out.split('/') {
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(part);
        let what = match folders.kind(&so_far) {
            // Not there yet: sluice creates it.
            Kind::Missing => break,
            Kind::Folder => continue,
            Kind::Link => "a symbolic link",
            Kind::File => "a file",
        };
        return Some(format!(
            "output folder {out} is a file path: {so_far} is {what}; an output is a folder sluice writes several files into. Give the canary a folder of its own"
        ));
    }
    if out.split('/').next_back().is_some_and(is_yaml) {
        return Some(format!(
            "output folder {out} is a file name; an output is a folder sluice writes several files into (e.g. {}). Give the canary a folder of its own",
            out.trim_end_matches(".yaml").trim_end_matches(".yml")
        ));
    }
    foreign_file(folders, out, 0).map(|file| {
        format!(
            "output folder {out} holds {out}/{file}, which is not YAML; sluice owns this folder and writes only its own manifests there. Move {out}/{file} out of it"
        )
    })
}

/// The first file (by name, folders in order) below `folder` whose name is not `*.yaml` or
/// `*.yml`, relative to `folder`; `None` when there is none or no folder. Hidden names
/// (`.gitkeep`, an editor's swap file, `.DS_Store` in a work tree) are passed over, as the
/// snapshot passes over hidden folders: no GitOps engine applies them.
fn foreign_file(folders: &dyn Folders, folder: &str, depth: usize) -> Option<String> {
    if depth >= MAX_DEPTH {
        return None;
    }
    let mut entries = folders.entries(folder);
    entries.sort();
    for (name, is_dir) in entries {
        if name.starts_with('.') {
            continue;
        }
        if is_dir {
            if let Some(found) = foreign_file(folders, &format!("{folder}/{name}"), depth + 1) {
                return Some(format!("{name}/{found}"));
            }
        } else if !is_yaml(&name) {
            return Some(name);
        }
    }
    None
}
