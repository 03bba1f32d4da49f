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
