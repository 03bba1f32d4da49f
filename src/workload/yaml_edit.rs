//! Small edits of order-preserving YAML trees that the workload renderers share: set a key in
//! place, reach a nested mapping, rename an object. A leaf: it uses no other workload file.

use yaml_rust2::Yaml;

/// A string key (or value).
pub fn key(k: &str) -> Yaml {
    Yaml::String(k.to_string())
}

/// Sets `k` in place when present (keeping the source's key order), else appends it.
pub fn set(map: &mut yaml_rust2::yaml::Hash, k: &str, value: Yaml) {
    match map.get_mut(&key(k)) {
        Some(slot) => *slot = value,
        None => {
            map.insert(key(k), value);
        }
    }
}

/// Mutable access to a mapping at `path`, creating empty mappings on the way.
pub fn map_at<'a>(doc: &'a mut Yaml, path: &[&str]) -> Option<&'a mut yaml_rust2::yaml::Hash> {
    let mut cur = doc;
    for p in path {
        let Yaml::Hash(h) = cur else { return None };
        if !h.contains_key(&key(p)) {
            h.insert(key(p), Yaml::Hash(Default::default()));
        }
        cur = h.get_mut(&key(p))?;
    }
    match cur {
        Yaml::Hash(h) => Some(h),
        _ => None,
    }
}

/// Renames an object and pins its namespace to the canary's.
pub fn rename(doc: &mut Yaml, name: &str, namespace: &str) {
    if let Some(meta) = map_at(doc, &["metadata"]) {
        set(meta, "name", key(name));
        set(meta, "namespace", key(namespace));
    }
}

/// Labels and annotations Flagger leaves out of what it generates (`filterMetadata`,
/// `makeAnnotations`, `makePrimaryLabels`): the ones Flux stamps on the objects it applies,
/// or reads as instructions (`kustomize.toolkit.fluxcd.io/ssa: IfNotPresent`).
pub use crate::yaml::TOOLKIT_MARKER;

/// A copy of `labels`/`annotations` without the keys holding [`TOOLKIT_MARKER`]; `None`
/// when nothing is left.
pub fn without_toolkit_keys(map: &Yaml) -> Option<Yaml> {
    let Yaml::Hash(h) = map else { return None };
    let kept: yaml_rust2::yaml::Hash = h
        .iter()
        .filter(|(k, _)| !k.as_str().is_some_and(|k| k.contains(TOOLKIT_MARKER)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!kept.is_empty()).then_some(Yaml::Hash(kept))
}

/// Where sluice takes Flux's keys off what it renders from a source: the object's labels and
/// annotations, and its pod template's.
const TOOLKIT_PATHS: [&[&str]; 4] = [
    &["metadata", "labels"],
    &["metadata", "annotations"],
    &["spec", "template", "metadata", "labels"],
    &["spec", "template", "metadata", "annotations"],
];

/// Takes the keys holding [`TOOLKIT_MARKER`] off an object sluice renders from a source (a
/// workload, a ConfigMap or Secret copy): its labels and annotations and its pod template's.
/// They are instructions to Flux about the *source's* object (`kustomize.toolkit.fluxcd.io/ssa:
/// IfNotPresent` would keep Flux from ever updating sluice's copy, so a new revision would
/// stall; `kustomize.toolkit.fluxcd.io/prune: disabled`, which `sluice adopt` puts on the
/// sources, would keep the applier of the outputs from deleting what sluice stops writing) or
/// marks Flux stamps on what it applied. What sluice renders is sluice's, applied and pruned
/// by the applier of its output folder.
pub fn drop_toolkit_metadata(doc: &mut Yaml) {
    for path in TOOLKIT_PATHS {
        drop_toolkit_keys(doc, path);
    }
}

/// Takes the keys holding [`TOOLKIT_MARKER`] out of the mapping at `path` (the whole field
/// when nothing is left); a path that is not there is left as it is, nothing is created.
pub fn drop_toolkit_keys(doc: &mut Yaml, path: &[&str]) {
    let Some((field, parents)) = path.split_last() else {
        return;
    };
    let mut cur = doc;
    for p in parents {
        let Yaml::Hash(h) = cur else { return };
        let Some(next) = h.get_mut(&key(p)) else {
            return;
        };
        cur = next;
    }
    let Yaml::Hash(parent) = cur else { return };
    let Some(map @ Yaml::Hash(_)) = parent.get(&key(field)) else {
        return;
    };
    match without_toolkit_keys(map) {
        Some(kept) => {
            set(parent, field, kept);
        }
        None => {
            parent.remove(&key(field));
        }
    }
}

/// Whether `committed` is `rendered` with `*toolkit.fluxcd.io*` keys in the places
/// [`drop_toolkit_metadata`] clears: what a sluice that copied them from the sources rendered.
/// The same header comment, and the same documents once those keys are taken off
/// `committed`'s.
pub fn same_but_flux_keys(committed: &str, rendered: &str) -> bool {
    let header = |t: &str| -> Vec<String> {
        t.lines()
            .take_while(|l| l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    if header(committed) != header(rendered) {
        return false;
    }
    let (Ok(mut old), Ok(new)) = (
        yaml_rust2::YamlLoader::load_from_str(committed),
        yaml_rust2::YamlLoader::load_from_str(rendered),
    ) else {
        return false;
    };
    for doc in &mut old {
        drop_toolkit_metadata(doc);
    }
    old == new
}
