//! `sluice validate PATH...`: checks the repo as the loop will load it (canaries, repo
//! settings, MetricTemplates and the canaries' references to them). Exit code 0 when all is
//! valid (warnings included), 1 with every problem printed, 2 when a path cannot be read at
//! all (or the command line is wrong).
//!
//! Warnings refuse nothing: what a Flagger cluster would accept but sluice ignores (a field
//! the API server prunes from a Flagger Canary, a reference's apiVersion Flagger does not
//! read). `--strict` makes each one an error.
//!
//! `--output text` (the default) prints `file:line: field: message` on stderr, warnings as
//! `warning: file:line: field: message`.
//! `--output github` prints one GitHub Actions workflow command per problem on stdout
//! (`::error file=apps/c.yaml,line=14,title=spec.analysis.stepWeight::expected ...`, and
//! `::warning ...` for a warning), with the file relative to the git work tree holding the
//! first path, so a pull request shows the problem on the line that causes it.

use std::path::{Path, PathBuf};

use crate::cli::workflow_command::{escape_data, escape_property};
use crate::manifest::load::{find_settings, load_settings, Existing, Loaded};
use crate::manifest::model::{CanaryId, Target};
use crate::manifest::output_folder::reject_unowned_paths;
use crate::manifest::settings::Settings;
use crate::manifest::template_refs::reject_unusable_templates;
use crate::metrics::metric_templates::TemplateIndex;
use crate::render::status_file;
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
    /// How problems are printed: `text` (file:line: field: message on stderr) or `github`
    /// (GitHub Actions error annotations on stdout).
    #[arg(long, short, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Make every warning an error (exit 1): fields a Flagger cluster would prune, reference
    /// apiVersions Flagger does not read.
    #[arg(long)]
    pub strict: bool,
    /// Skip the checks of what the running loop needs from outside the repo: a Prometheus
    /// address for metrics that ask Prometheus (`prometheus.address`, `spec.metricsServer`, a
    /// template's `spec.provider.address`).
    #[arg(long)]
    pub offline: bool,
    /// Exit 0 when the paths hold no canary (by default a folder without canaries is an
    /// error: a mistyped path must not pass CI).
    #[arg(long)]
    pub allow_empty: bool,
}

/// How GitHub shows an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warning,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Github,
}

/// Loads settings and canaries the way `validate` and `plan` both need.
pub fn load(paths: &[PathBuf], config: Option<&Path>) -> (Settings, Loaded) {
    let (settings, loaded, _) = load_checked(paths, config, Needs::Offline);
    (settings, loaded)
}

/// Whether the repo is checked for what the running loop needs from outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// The spec alone (`plan`, `validate --offline`).
    Offline,
    /// Also a Prometheus address for every metric that asks Prometheus.
    Runtime,
}

/// [`load`], also saying whether the settings file was valid: when it was not, the canaries
/// were checked against default settings, which is not what the loop will use.
fn load_checked(
    paths: &[PathBuf],
    config: Option<&Path>,
    needs: Needs,
) -> (Settings, Loaded, bool) {
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
    let mut loaded = crate::manifest::load::load_in(&snapshot, &settings, existing.as_ref());
    // Waves' kube contexts, against the kubeconfig sluice is given, as in the loop.
    crate::waves::contexts::reject_unknown_contexts(
        &mut loaded,
        crate::waves::contexts::kubeconfig_contexts,
    );
    // Waves' API servers, against what the operator allows, as in the loop.
    let allow_http = std::env::var(crate::waves::servers::ALLOW_HTTP_VAR).ok();
    crate::waves::servers::reject_plain_http(
        &mut loaded,
        crate::waves::servers::allows_http(allow_http.as_deref()),
    );
    // Output folders are checked on disk as the loop checks them in its clone.
    if let Some(root) = &root {
        reject_unowned_paths(
            &mut loaded,
            &snapshot,
            &crate::manifest::output_folder::OnDisk(root),
        );
    }
    // References resolve against the whole repo's templates, as in the loop; the problems of
    // the templates in the files given are reported here.
    let (given, template_errors) = TemplateIndex::from_snapshot(&snapshot);
    let templates = match &repo {
        Some(repo) => TemplateIndex::from_snapshot(repo).0,
        None => given,
    };
    reject_unusable_templates(
        &mut loaded,
        &snapshot,
        template_errors,
        |namespace, name| templates.get(namespace, name).map(drop),
    );
    if needs == Needs::Runtime {
        let missing = crate::metrics::addresses::unaddressed(
            &loaded.canaries,
            settings.prometheus.as_deref(),
            &templates,
            &snapshot,
        );
        loaded
            .canaries
            .retain(|c| !missing.iter().any(|e| e.file == c.file));
        loaded.errors.extend(missing);
    }
    // The layout: which Kustomization or Application applies sources and outputs, in the
    // config repo whose settings were found (outputs are paths of that repo).
    let layout_root = match (config, &settings_path) {
        (None, Some(found)) => std::path::absolute(found)
            .ok()
            .and_then(|f| f.parent()?.parent().map(Path::to_path_buf)),
        (Some(_), _) => root.clone(),
        (None, None) => None,
    };
    if let Some(layout_root) = &layout_root {
        let files = if Some(layout_root) == root.as_ref() {
            None
        } else {
            Some(Snapshot::read(layout_root))
        };
        let files = files.as_ref().or(repo.as_ref());
        if let Some(files) = files {
            check_layout(layout_root, files, &mut loaded);
        }
    }
    errors.append(&mut loaded.errors);
    // AlertProviders no canary references yet are checked too, as templates are.
    errors.extend(crate::manifest::alert_provider::check_all(&snapshot));
    // Judge objects (the statistical judge's settings) are checked the same way.
    errors.extend(crate::judge::objects::check_all(&snapshot));
    // Argo Rollouts' AnalysisTemplates too, whether a Rollout runs them yet or not.
    errors.extend(crate::metrics::analysis_templates::AnalysisIndex::from_snapshot(&snapshot).1);
    resolve_autoscalers(&snapshot, &mut loaded, &mut errors);
    loaded.errors = errors;
    (settings, loaded, settings_ok)
}

/// [`crate::manifest::layout_check`] and [`crate::workload::applied_twice`] (no object both
/// a canary's output and another applied file hold) on the repo at `root` (its files
/// `files`, named repo-relative): the canaries are named repo-relative for the check, and their errors
/// named back as given.
fn check_layout(root: &Path, files: &Snapshot, loaded: &mut Loaded) {
    let appliers = crate::manifest::applied_by::appliers(files, &sourceignores(root));
    let relative = |file: &str| {
        std::path::absolute(file)
            .ok()
            .and_then(|p| p.strip_prefix(root).ok().map(Path::to_path_buf))
            .map(|p| p.to_string_lossy().replace('\\', "/"))
    };
    let mut renamed = Vec::new();
    let canaries: Vec<_> = loaded
        .canaries
        .iter()
        .filter_map(|c| {
            let rel = relative(&c.file)?;
            renamed.push((rel.clone(), c.file.clone()));
            let mut c = c.clone();
            c.file = rel;
            Some(c)
        })
        .collect();
    let mut errors = crate::manifest::layout_check::check(&canaries, files, &appliers);
    errors.extend(crate::workload::applied_twice::check(
        &canaries, files, &appliers,
    ));
    for e in &mut errors {
        if let Some((_, given)) = renamed.iter().find(|(rel, _)| *rel == e.file) {
            e.file = given.clone();
        }
    }
    loaded.canaries.retain(|c| {
        !errors.iter().any(|e| e.file == c.file && e.line == c.line)
            && !errors
                .iter()
                .any(|e| e.message.contains(&format!("canary {} ", c.id)))
    });
    loaded.errors.extend(errors);
}

/// Every `.sourceignore` under `root` by its folder (repo-relative, `""` for the root), as
/// Flux's source-controller reads them; `.git` and links are not followed.
fn sourceignores(root: &Path) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && entry.file_name() != ".git" {
                folders.push(path);
            } else if kind.is_file() && entry.file_name() == ".sourceignore" {
                if let Ok(text) = crate::yaml::snapshot::read_bounded(&path) {
                    let rel = folder
                        .strip_prefix(root)
                        .map(|p| p.to_string_lossy().replace('\\', "/"))
                        .unwrap_or_default();
                    out.insert(rel, text);
                }
            }
        }
    }
    out
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
    // A path that is not there is a wrong command line (exit 2), not a problem of the repo.
    for path in &args.paths {
        if let Err(e) = std::fs::symlink_metadata(path) {
            anyhow::bail!("cannot read {}: {e}", path.display());
        }
    }
    let needs = if args.offline {
        Needs::Offline
    } else {
        Needs::Runtime
    };
    let (_, mut loaded, settings_ok) = load_checked(&args.paths, args.config.as_deref(), needs);
    if args.strict {
        make_warnings_errors(&mut loaded);
    }
    // The settings file's problems come first (they are first in `errors`).
    match args.output {
        Format::Text => {
            for e in &loaded.errors {
                eprintln!("{e}");
            }
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
        }
        Format::Github => {
            let root = args.paths.first().and_then(|p| git_root(p));
            for e in &loaded.errors {
                outln!("{}", annotation(e, root.as_deref()));
            }
            for w in &loaded.warnings {
                outln!(
                    "{}",
                    annotation_at(Level::Warning, &w.problem, root.as_deref())
                );
            }
        }
    }
    if !loaded.warnings.is_empty() {
        eprintln!(
            "{} warning(s): a Flagger cluster accepts these canaries, and so does sluice (validate --strict refuses them)",
            loaded.warnings.len()
        );
    }
    // Orphaned output is a warning: leaving it is Flagger's behaviour without revertOnDeletion.
    for orphan in args
        .paths
        .first()
        .map(|p| crate::deleted::orphans_in_repo_of(p))
        .unwrap_or_default()
    {
        eprintln!("warning: {orphan}");
    }
    if loaded.errors.is_empty() && loaded.canaries.is_empty() && !args.allow_empty {
        eprintln!(
            "no canary found in {}: check the path (validate --allow-empty accepts a folder without canaries)",
            args.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(1)
    } else if loaded.errors.is_empty() {
        outln!("{} valid", canaries(loaded.canaries.len()));
        Ok(0)
    } else if !settings_ok {
        // Canaries checked against default settings (provider, output layout) may be valid
        // there and not under the settings the loop will read: claim nothing about them.
        eprintln!(
            "{} found; the settings file is invalid, so the canaries were checked against default settings only and none is reported valid",
            counted(loaded.errors.len(), "problem", "problems")
        );
        Ok(1)
    } else {
        eprintln!(
            "{} found; {} valid",
            counted(loaded.errors.len(), "problem", "problems"),
            canaries(loaded.canaries.len())
        );
        Ok(1)
    }
}

/// `1 canary`, `3 canaries`.
fn canaries(n: usize) -> String {
    counted(n, "canary", "canaries")
}

/// `n` and the noun in the number it takes: `1 problem`, `2 problems`.
fn counted(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// `--strict`: every warning becomes an error, and a canary that had one is not valid.
fn make_warnings_errors(loaded: &mut Loaded) {
    let warnings = std::mem::take(&mut loaded.warnings);
    loaded
        .canaries
        .retain(|c| !warnings.iter().any(|w| w.canary.as_ref() == Some(&c.id)));
    loaded
        .errors
        .extend(warnings.into_iter().map(|w| SpecError {
            message: format!("{} (an error under --strict)", w.problem.message),
            ..w.problem
        }));
}

/// The git work tree `start` is in: the nearest folder holding `.git`.
fn git_root(start: &Path) -> Option<PathBuf> {
    let start = std::path::absolute(start).ok()?;
    start
        .ancestors()
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
        .map(Path::to_path_buf)
}

/// `file` as GitHub names it in a pull request: relative to the work tree `root` (as given
/// when it is outside, or there is no work tree), without a leading `./`.
fn repo_relative(file: &str, root: Option<&Path>) -> String {
    let inside = root.and_then(|root| {
        let path = std::path::absolute(file).ok()?;
        let rel = path.strip_prefix(root).ok()?;
        Some(rel.to_string_lossy().into_owned())
    });
    let name = inside.unwrap_or_else(|| file.to_string());
    let mut name = name.as_str();
    while let Some(rest) = name.strip_prefix("./") {
        name = rest;
    }
    name.to_string()
}

/// One problem as a GitHub Actions `error` workflow command, escaped as GitHub's toolkit does
/// (`escapeData` for the message, `escapeProperty` for the properties).
pub fn annotation(e: &SpecError, root: Option<&Path>) -> String {
    annotation_at(Level::Error, e, root)
}

/// [`annotation`] at `level`: `::error` or `::warning`.
pub fn annotation_at(level: Level, e: &SpecError, root: Option<&Path>) -> String {
    let title = if e.field.is_empty() {
        "sluice validate"
    } else {
        e.field.as_str()
    };
    let command = match level {
        Level::Error => "error",
        Level::Warning => "warning",
    };
    format!(
        "::{command} file={},line={},title={}::{}",
        escape_property(&repo_relative(&e.file, root)),
        e.line,
        escape_property(title),
        escape_data(&e.message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_escape_as_githubs_toolkit_does() {
        let e = SpecError {
            file: "./apps/a,b:c%.yaml".into(),
            line: 7,
            field: "spec.x".into(),
            message: "50% of a, b: c\r\nnext".into(),
        };
        assert_eq!(
            annotation(&e, None),
            "::error file=apps/a%2Cb%3Ac%25.yaml,line=7,title=spec.x::50%25 of a, b: c%0D%0Anext"
        );
        let file_level = SpecError {
            field: String::new(),
            ..e
        };
        assert!(annotation(&file_level, None).contains(",title=sluice validate::"));
        assert!(annotation_at(Level::Warning, &file_level, None)
            .starts_with("::warning file=apps/a%2Cb%3Ac%25.yaml,line=7,"));
    }
}
