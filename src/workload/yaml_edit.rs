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
pub const TOOLKIT_MARKER: &str = "toolkit.fluxcd.io";

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
