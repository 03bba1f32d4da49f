//! [`load_in`](super::load::load_in) kept up to date from one snapshot to the next, paying for
//! what changed rather than for every canary of the repo (audit replays thousands of commits,
//! each a small change to a large repo).
//!
//! Each file's canaries are read once per content and kept with the lookups the read made in
//! the snapshot (`Snapshot::recording`: the objects, files and references it found). A change
//! reads again only the files it names and the files whose reads looked up something the
//! change touched (an object of the same kind and name, a routeSource file). The checks across
//! canaries (duplicate names, shared or nested output folders, output folders holding files
//! sluice did not generate, who owns a contested name) run over indexes by name and by output
//! folder, only for the canaries a change can concern: those it read again, those sharing a
//! name or a related output folder with them (transitively), those whose output folder holds a
//! changed file, and those whose status file changed. Each check is the one `load_in` runs,
//! over that group, so the outcome is `load_in`'s (a test compares them change after change).
//!
//! Reads nothing itself: files come from the snapshot; nothing here writes.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::load::{
    owns, read_file, reject_duplicates, reject_foreign_files, reject_shared_outputs,
    reserved_output, Existing, Loaded, Warning,
};
use crate::manifest::model::Canary;
use crate::manifest::settings::Settings;
use crate::yaml::error::SpecError;
use crate::yaml::snapshot::{object_keys, Contents, Lookup, Snapshot};

/// Where status files live: a change there can change who owns a contested name or folder.
const STATUS_PREFIX: &str = ".sluice/status/";

/// The canaries of a snapshot, as [`load_in`](super::load::load_in) loads them, kept across
/// snapshots.
#[derive(Default)]
pub struct KeptLoad {
    /// The settings the kept reads were made with: other settings read every file again.
    settings: Option<Settings>,
    files: HashMap<String, FileLoad>,
    /// Which files' reads made each lookup.
    dependents: HashMap<Lookup, BTreeSet<String>>,
    /// Every canary read, in file order, and why it is refused (`None`: it loads).
    slots: BTreeMap<Slot, Option<SpecError>>,
    /// Canaries by `namespace/name` and by output folder (not those refused for a reserved
    /// folder: `load_in` drops them before the checks across canaries).
    by_id: BTreeMap<String, BTreeSet<Slot>>,
    by_output: BTreeMap<String, BTreeSet<Slot>>,
    /// The files whose read found a problem or a warning, in walk order: what
    /// [`KeptLoad::errors`] and [`KeptLoad::warnings`] go through, so that a tick over a large
    /// repo of sound specs does not sort every file's name to find none.
    noisy: BTreeSet<Walked>,
    /// How many problems the file reads found, and how many canaries are refused.
    read_errors: usize,
    refused: usize,
    /// Files read since this was made (what a test counts).
    reads: usize,
}

/// One file's read, kept.
struct FileLoad {
    /// The parse it was read from (shared with the snapshot: no text of its own).
    contents: Arc<Contents>,
    canaries: Vec<Canary>,
    errors: Vec<SpecError>,
    warnings: Vec<Warning>,
    lookups: Vec<Lookup>,
}

/// A canary's place: its file and its position among the file's canaries; ordered as the
/// walk orders files (folder by folder, names sorted), then by position.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    file: String,
    index: usize,
}

impl Ord for Slot {
    fn cmp(&self, other: &Slot) -> Ordering {
        walk_order(&self.file, &other.file).then(self.index.cmp(&other.index))
    }
}

/// A file's name, ordered as the walk orders files (folder by folder, names sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Walked(String);

impl Ord for Walked {
    fn cmp(&self, other: &Walked) -> Ordering {
        walk_order(&self.0, &other.0)
    }
}

impl PartialOrd for Walked {
    fn partial_cmp(&self, other: &Walked) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn walk_order(a: &str, b: &str) -> Ordering {
    a.split('/').cmp(b.split('/'))
}

impl PartialOrd for Slot {
    fn partial_cmp(&self, other: &Slot) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl KeptLoad {
    /// Brings the load up to `existing.files`, which differs from the snapshot of the last
    /// refresh at most in the paths `changed` (repo-relative; files outside the walk, status
    /// files included, may be named). The first refresh reads every file.
    pub fn refresh(
        &mut self,
        settings: &Settings,
        existing: &Existing,
        changed: &BTreeSet<String>,
    ) {
        let snapshot = existing.files;
        let mut stale: BTreeSet<String> = BTreeSet::new();
        if self.settings.as_ref() != Some(settings) {
            self.settings = Some(settings.clone());
            stale.extend(self.files.keys().cloned());
            stale.extend(snapshot.files().iter().map(|f| f.name.clone()));
        } else {
            stale = self.stale(snapshot, changed);
        }
        let mut seeds: Vec<Slot> = Vec::new();
        let mut around: Vec<(String, String)> = Vec::new();
        for name in &stale {
            around.extend(self.forget(name));
            if let Some(file) = snapshot.file(name) {
                let (read, lookups) = snapshot.recording(|| read_file(file, settings, snapshot));
                self.reads += 1;
                around.extend(self.keep(name, Arc::clone(&file.contents), read, lookups));
            }
        }
        for path in changed {
            around.extend(self.holding(path));
        }
        for (id, output) in around {
            seeds.extend(self.related(&id, &output));
        }
        let group = self.closure(seeds);
        self.judge(group, existing);
    }

    /// The files to read again: the walked files `changed` names, and those whose reads looked
    /// up what they held before or hold now.
    fn stale(&self, snapshot: &Snapshot, changed: &BTreeSet<String>) -> BTreeSet<String> {
        let mut stale = BTreeSet::new();
        let mut hit = Vec::new();
        for path in changed {
            let old = self.files.get(path).map(|f| Arc::clone(&f.contents));
            let new = snapshot.file(path).map(|f| Arc::clone(&f.contents));
            if old.is_none() && new.is_none() {
                continue;
            }
            stale.insert(path.clone());
            hit.push(Lookup::File(path.clone()));
            for contents in old.iter().chain(new.iter()) {
                for (_, (kind, name)) in object_keys(contents) {
                    hit.push(Lookup::Object(kind, name));
                }
            }
        }
        if !hit.is_empty() {
            hit.push(Lookup::Everything);
        }
        for lookup in hit {
            if let Some(files) = self.dependents.get(&lookup) {
                stale.extend(files.iter().cloned());
            }
        }
        stale
    }

    /// Drops the read of `name`; gives the name and output folder of each canary it had.
    fn forget(&mut self, name: &str) -> Vec<(String, String)> {
        let Some(old) = self.files.remove(name) else {
            return Vec::new();
        };
        self.read_errors -= old.errors.len();
        self.noisy.remove(&Walked(name.to_string()));
        for lookup in &old.lookups {
            if let Some(files) = self.dependents.get_mut(lookup) {
                files.remove(name);
                if files.is_empty() {
                    self.dependents.remove(lookup);
                }
            }
        }
        let mut around = Vec::new();
        for (index, canary) in old.canaries.iter().enumerate() {
            let slot = Slot {
                file: name.to_string(),
                index,
            };
            if let Some(Some(_)) = self.slots.remove(&slot) {
                self.refused -= 1;
            }
            let (id, output) = (canary.id.to_string(), canary.output.as_str().to_string());
            remove_from(&mut self.by_id, &id, &slot);
            remove_from(&mut self.by_output, &output, &slot);
            around.push((id, output));
        }
        around
    }

    /// Keeps a file's read; gives the name and output folder of each canary it has.
    fn keep(
        &mut self,
        name: &str,
        contents: Arc<Contents>,
        read: Loaded,
        lookups: Vec<Lookup>,
    ) -> Vec<(String, String)> {
        self.read_errors += read.errors.len();
        if !read.errors.is_empty() || !read.warnings.is_empty() {
            self.noisy.insert(Walked(name.to_string()));
        }
        for lookup in &lookups {
            self.dependents
                .entry(lookup.clone())
                .or_default()
                .insert(name.to_string());
        }
        let mut around = Vec::new();
        for (index, canary) in read.canaries.iter().enumerate() {
            let slot = Slot {
                file: name.to_string(),
                index,
            };
            let reserved = reserved_output(canary);
            if reserved.is_some() {
                self.refused += 1;
            } else {
                let (id, output) = (canary.id.to_string(), canary.output.as_str().to_string());
                self.by_id
                    .entry(id.clone())
                    .or_default()
                    .insert(slot.clone());
                self.by_output
                    .entry(output.clone())
                    .or_default()
                    .insert(slot.clone());
                around.push((id, output));
            }
            self.slots.insert(slot, reserved);
        }
        self.files.insert(
            name.to_string(),
            FileLoad {
                contents,
                canaries: read.canaries,
                errors: read.errors,
                warnings: read.warnings,
                lookups,
            },
        );
        around
    }

    /// The canaries a changed path can concern besides its own file's: those whose output
    /// folder holds it, and the one whose status file it is.
    fn holding(&self, path: &str) -> Vec<(String, String)> {
        let mut around = Vec::new();
        let mut folders: Vec<&str> = ancestors(path).collect();
        if let Some(id) = path
            .strip_prefix(STATUS_PREFIX)
            .and_then(|p| p.strip_suffix(".yaml"))
        {
            for slot in self.by_id.get(id).into_iter().flatten() {
                if let Some(c) = self.canary_at(slot) {
                    around.push((id.to_string(), c.output.as_str().to_string()));
                }
            }
        }
        folders.retain(|f| self.by_output.contains_key(*f));
        for folder in folders {
            for slot in &self.by_output[folder] {
                if let Some(c) = self.canary_at(slot) {
                    around.push((c.id.to_string(), folder.to_string()));
                }
            }
        }
        around
    }

    /// The canaries named `id`, and those whose output folder is `output`, holds it or is
    /// inside it.
    fn related(&self, id: &str, output: &str) -> Vec<Slot> {
        let mut found: Vec<Slot> = self.by_id.get(id).into_iter().flatten().cloned().collect();
        for folder in ancestors(output).chain([output]) {
            found.extend(self.by_output.get(folder).into_iter().flatten().cloned());
        }
        let inside = format!("{output}/");
        for (_, slots) in self
            .by_output
            .range(inside.clone()..)
            .take_while(|(o, _)| o.starts_with(&inside))
        {
            found.extend(slots.iter().cloned());
        }
        found
    }

    /// `seeds` and every canary related to one of the group, by name or folder, transitively:
    /// what a check across canaries decides for one of them depends on these alone.
    fn closure(&self, seeds: Vec<Slot>) -> BTreeSet<Slot> {
        let mut group = BTreeSet::new();
        let mut todo = seeds;
        while let Some(slot) = todo.pop() {
            if group.contains(&slot) {
                continue;
            }
            if let Some(c) = self.canary_at(&slot) {
                todo.extend(self.related(&c.id.to_string(), c.output.as_str()));
            }
            group.insert(slot);
        }
        group
    }

    /// Runs `load_in`'s checks across canaries over `group` and keeps each one's verdict.
    fn judge(&mut self, group: BTreeSet<Slot>, existing: &Existing) {
        // Owners first, then file order, as `load_in` orders them.
        let mut order: Vec<(bool, Slot)> = group
            .into_iter()
            .filter_map(|slot| {
                let canary = self.canary_at(&slot)?;
                Some((!owns(existing, canary), slot))
            })
            .collect();
        order.sort();
        let mut verdicts: Vec<(Slot, Option<SpecError>)> = Vec::new();
        let mut left: Vec<Slot> = order.into_iter().map(|(_, slot)| slot).collect();
        let checks: [&dyn Fn(&mut Loaded); 3] = [
            &reject_duplicates,
            &reject_shared_outputs,
            &|loaded: &mut Loaded| reject_foreign_files(loaded, existing.files),
        ];
        for check in checks {
            let mut loaded = Loaded {
                canaries: left
                    .iter()
                    .filter_map(|s| self.canary_at(s).cloned())
                    .collect(),
                ..Loaded::default()
            };
            check(&mut loaded);
            let mut kept = loaded.canaries.iter().peekable();
            let mut errors = loaded.errors.into_iter();
            let mut still = Vec::new();
            for slot in left {
                let Some(canary) = self.canary_at(&slot) else {
                    continue;
                };
                if kept.peek().is_some_and(|k| same(k, canary)) {
                    kept.next();
                    still.push(slot);
                } else {
                    verdicts.push((slot, errors.next()));
                }
            }
            left = still;
        }
        verdicts.extend(left.into_iter().map(|slot| (slot, None)));
        for (slot, verdict) in verdicts {
            let was = self.slots.insert(slot, verdict.clone());
            if matches!(was, Some(Some(_))) {
                self.refused -= 1;
            }
            if verdict.is_some() {
                self.refused += 1;
            }
        }
    }

    fn canary_at(&self, slot: &Slot) -> Option<&Canary> {
        self.files.get(&slot.file)?.canaries.get(slot.index)
    }

    /// The canaries that load, in file order.
    pub fn canaries(&self) -> impl Iterator<Item = &Canary> + '_ {
        self.slots
            .iter()
            .filter(|(_, refused)| refused.is_none())
            .filter_map(|(slot, _)| self.canary_at(slot))
    }

    /// The canary `namespace/name`, when it loads.
    pub fn canary(&self, id: &str) -> Option<&Canary> {
        self.by_id
            .get(id)
            .into_iter()
            .flatten()
            .filter(|slot| matches!(self.slots.get(*slot), Some(None)))
            .find_map(|slot| self.canary_at(slot))
    }

    /// Whether any spec has a problem (`load_in` would give errors).
    pub fn has_errors(&self) -> bool {
        self.read_errors > 0 || self.refused > 0
    }

    /// Every problem: each file's, in file order, then each refused canary's.
    pub fn errors(&self) -> Vec<SpecError> {
        let mut errors: Vec<SpecError> = self
            .noisy_files()
            .flat_map(|f| f.errors.iter().cloned())
            .collect();
        if self.refused > 0 {
            errors.extend(self.slots.values().flatten().cloned());
        }
        errors
    }

    /// Every warning of the files read, in file order (as `load_in` gives them).
    pub fn warnings(&self) -> Vec<Warning> {
        self.noisy_files()
            .flat_map(|f| f.warnings.iter().cloned())
            .collect()
    }

    /// The reads with a problem or a warning, in file order.
    fn noisy_files(&self) -> impl Iterator<Item = &FileLoad> + '_ {
        self.noisy.iter().filter_map(|n| self.files.get(&n.0))
    }

    /// What [`load_in`](super::load::load_in) gives for the snapshot of the last refresh:
    /// the canaries that load, every problem and every warning.
    pub fn to_loaded(&self) -> Loaded {
        Loaded {
            canaries: self.canaries().cloned().collect(),
            errors: self.errors(),
            warnings: self.warnings(),
        }
    }

    /// How many files were read since this was made.
    pub fn reads(&self) -> usize {
        self.reads
    }
}

/// Whether two canaries are the same one of a file (what the checks keep, by place and name).
fn same(a: &Canary, b: &Canary) -> bool {
    a.file == b.file && a.line == b.line && a.id == b.id
}

fn remove_from(index: &mut BTreeMap<String, BTreeSet<Slot>>, key: &str, slot: &Slot) {
    if let Some(slots) = index.get_mut(key) {
        slots.remove(slot);
        if slots.is_empty() {
            index.remove(key);
        }
    }
}

/// The folders above `path`, outermost first (`a`, `a/b` for `a/b/c`).
fn ancestors(path: &str) -> impl Iterator<Item = &str> + '_ {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::load::load_in;
    use crate::manifest::model::CanaryId;
    use std::path::Path;

    fn spec(name: &str, output: &str, revision: &str) -> String {
        format!(
            "apiVersion: sluice.dev/v1alpha1\nkind: Canary\nmetadata: {{name: {name}, namespace: ns}}\nspec:\n  routeOnly: {{services: [{name}-a, {name}-b], revision: \"{revision}\"}}\n  output: {output}\n  service: {{port: 80}}\n  route: {{apiVersion: split.smi-spec.io/v1alpha4, kind: TrafficSplit}}\n  analysis: {{interval: 1m, stepWeights: [5, 25, 50]}}\n"
        )
    }

    /// The canaries (id, file, line) and the errors, sorted, as text.
    type Seen = (Vec<(String, String, usize)>, Vec<String>);

    fn seen<'a>(canaries: impl Iterator<Item = &'a Canary>, errors: &[SpecError]) -> Seen {
        let canaries = canaries
            .map(|c| (c.id.to_string(), c.file.clone(), c.line))
            .collect();
        let mut errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
        errors.sort();
        (canaries, errors)
    }

    /// A change to the repo at `root`: files written (`Some`) or removed (`None`).
    fn apply(root: &Path, change: &[(&str, Option<String>)]) -> BTreeSet<String> {
        for (path, text) in change {
            let at = root.join(path);
            match text {
                Some(text) => {
                    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
                    std::fs::write(at, text).unwrap();
                }
                None => std::fs::remove_file(at).unwrap(),
            }
        }
        change.iter().map(|(p, _)| (*p).to_string()).collect()
    }

    /// Change after change (duplicates, nested and shared folders, foreign files, a status
    /// file that makes a newcomer the owner, a reserved folder), the kept load gives what
    /// `load_in` gives on the whole repo, and reads only the files a change concerns.
    #[test]
    fn a_kept_load_is_load_in_change_after_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut first: Vec<(String, Option<String>)> = (0..6)
            .map(|i| {
                let name = format!("a{i}");
                let text = spec(&name, &format!("deploy/{name}"), "r1");
                (format!("specs/{name}.yaml"), Some(text))
            })
            .collect();
        first.push((
            "deploy/a5/route.yaml".into(),
            Some("# Generated by sluice for canary ns/a5.\nkind: TrafficSplit\n".into()),
        ));
        let first: Vec<(&str, Option<String>)> =
            first.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
        let generated_for_a1 = "# Generated by sluice for canary ns/a1.\nkind: TrafficSplit\n";
        let steps: Vec<Vec<(&str, Option<String>)>> = vec![
            first,
            vec![("specs/a0.yaml", Some(spec("a0", "deploy/a0", "r2")))],
            vec![("z/dup.yaml", Some(spec("a1", "deploy/z", "r1")))],
            vec![("specs/a2.yaml", Some(spec("a2", "deploy/a3/sub", "r1")))],
            vec![("deploy/a4/x.yaml", Some("kind: ConfigMap\n".into()))],
            vec![
                (
                    ".sluice/status/ns/a1.yaml",
                    Some("phase: Initialized\n".into()),
                ),
                ("deploy/z/route.yaml", Some(generated_for_a1.into())),
            ],
            vec![("deploy/a5/route.yaml", Some("kind: ConfigMap\n".into()))],
            vec![("z/dup.yaml", None), ("deploy/a4/x.yaml", None)],
            vec![("specs/a3.yaml", Some(spec("a3", ".sluice/out", "r1")))],
            vec![("specs/bad.yaml", Some("a: [1,\n".into()))],
        ];
        let settings = Settings::default();
        let mut kept = KeptLoad::default();
        for (n, step) in steps.iter().enumerate() {
            let changed = apply(root, step);
            let snapshot = Snapshot::read(root);
            let has_status =
                |id: &CanaryId| root.join(format!("{STATUS_PREFIX}{id}.yaml")).is_file();
            let existing = Existing {
                files: &snapshot,
                has_status: &has_status,
            };
            let reads = kept.reads();
            kept.refresh(&settings, &existing, &changed);
            let whole = load_in(&snapshot, &settings, Some(&existing));
            assert_eq!(
                seen(kept.canaries(), &kept.errors()),
                seen(whole.canaries.iter(), &whole.errors),
                "step {n}"
            );
            assert_eq!(kept.has_errors(), !whole.errors.is_empty(), "step {n}");
            assert_eq!(kept.to_loaded().warnings, whole.warnings, "step {n}");
            for c in &whole.canaries {
                assert_eq!(kept.canary(&c.id.to_string()).map(|k| k.line), Some(c.line));
            }
            if n == 1 {
                assert_eq!(kept.reads() - reads, 1, "one changed spec reads one file");
            }
        }
        assert!(
            kept.canary("ns/a3").is_none(),
            "a reserved folder is refused"
        );
    }
}
