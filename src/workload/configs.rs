//! ConfigMaps and Secrets a pod template references (volumes, projected volumes, env
//! valueFrom, envFrom; containers and initContainers), and renaming those references to the
//! primary's copies, as Flagger's config tracker does.

use std::collections::BTreeSet;

use yaml_rust2::Yaml;

/// A referenced config object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConfigRef {
    /// `ConfigMap` or `Secret`.
    pub kind: &'static str,
    pub name: String,
}

fn key(k: &str) -> Yaml {
    Yaml::String(k.to_string())
}

/// Visits every reference in a pod spec; `f` may rename it in place.
fn visit(pod_spec: &mut Yaml, f: &mut dyn FnMut(&'static str, &mut Yaml)) {
    let Yaml::Hash(spec) = pod_spec else { return };
    if let Some(Yaml::Array(volumes)) = spec.get_mut(&key("volumes")) {
        for v in volumes {
            let Yaml::Hash(v) = v else { continue };
            if let Some(Yaml::Hash(cm)) = v.get_mut(&key("configMap")) {
                if let Some(name) = cm.get_mut(&key("name")) {
                    f("ConfigMap", name);
                }
            }
            if let Some(Yaml::Hash(s)) = v.get_mut(&key("secret")) {
                if let Some(name) = s.get_mut(&key("secretName")) {
                    f("Secret", name);
                }
            }
            if let Some(Yaml::Hash(p)) = v.get_mut(&key("projected")) {
                if let Some(Yaml::Array(sources)) = p.get_mut(&key("sources")) {
                    for src in sources {
                        let Yaml::Hash(src) = src else { continue };
                        if let Some(Yaml::Hash(cm)) = src.get_mut(&key("configMap")) {
                            if let Some(name) = cm.get_mut(&key("name")) {
                                f("ConfigMap", name);
                            }
                        }
                        if let Some(Yaml::Hash(s)) = src.get_mut(&key("secret")) {
                            if let Some(name) = s.get_mut(&key("name")) {
                                f("Secret", name);
                            }
                        }
                    }
                }
            }
        }
    }
    for list in ["containers", "initContainers"] {
        let Some(Yaml::Array(containers)) = spec.get_mut(&key(list)) else {
            continue;
        };
        for c in containers {
            let Yaml::Hash(c) = c else { continue };
            if let Some(Yaml::Array(env)) = c.get_mut(&key("env")) {
                for e in env {
                    let Yaml::Hash(e) = e else { continue };
                    let Some(Yaml::Hash(from)) = e.get_mut(&key("valueFrom")) else {
                        continue;
                    };
                    if let Some(Yaml::Hash(r)) = from.get_mut(&key("configMapKeyRef")) {
                        if let Some(name) = r.get_mut(&key("name")) {
                            f("ConfigMap", name);
                        }
                    }
                    if let Some(Yaml::Hash(r)) = from.get_mut(&key("secretKeyRef")) {
                        if let Some(name) = r.get_mut(&key("name")) {
                            f("Secret", name);
                        }
                    }
                }
            }
            if let Some(Yaml::Array(env_from)) = c.get_mut(&key("envFrom")) {
                for e in env_from {
                    let Yaml::Hash(e) = e else { continue };
                    if let Some(Yaml::Hash(r)) = e.get_mut(&key("configMapRef")) {
                        if let Some(name) = r.get_mut(&key("name")) {
                            f("ConfigMap", name);
                        }
                    }
                    if let Some(Yaml::Hash(r)) = e.get_mut(&key("secretRef")) {
                        if let Some(name) = r.get_mut(&key("name")) {
                            f("Secret", name);
                        }
                    }
                }
            }
        }
    }
}

/// The references of a Deployment's pod template.
pub fn references(deployment: &Yaml) -> BTreeSet<ConfigRef> {
    let mut spec = deployment["spec"]["template"]["spec"].clone();
    let mut out = BTreeSet::new();
    visit(&mut spec, &mut |kind, name| {
        if let Some(n) = name.as_str() {
            out.insert(ConfigRef {
                kind,
                name: n.to_string(),
            });
        }
    });
    out
}

/// Renames the references that are in `tracked` to `<name>-primary`.
pub fn rename_to_primary(deployment: &mut Yaml, tracked: &BTreeSet<ConfigRef>) {
    let Yaml::Hash(d) = deployment else { return };
    let Some(Yaml::Hash(spec)) = d.get_mut(&key("spec")) else {
        return;
    };
    let Some(Yaml::Hash(template)) = spec.get_mut(&key("template")) else {
        return;
    };
    let Some(pod_spec) = template.get_mut(&key("spec")) else {
        return;
    };
    visit(pod_spec, &mut |kind, name| {
        if let Some(n) = name.as_str() {
            let r = ConfigRef {
                kind,
                name: n.to_string(),
            };
            if tracked.contains(&r) {
                *name = Yaml::String(format!("{n}-primary"));
            }
        }
    });
}

/// Renames the references to the primary's copies (`<name>-primary`, for each `(kind, name)`
/// in `copies`) back to the user's objects: [`rename_to_primary`] undone, for a revert.
pub fn rename_from_primary(deployment: &mut Yaml, copies: &BTreeSet<ConfigRef>) {
    let Yaml::Hash(d) = deployment else { return };
    let Some(Yaml::Hash(spec)) = d.get_mut(&key("spec")) else {
        return;
    };
    let Some(Yaml::Hash(template)) = spec.get_mut(&key("template")) else {
        return;
    };
    let Some(pod_spec) = template.get_mut(&key("spec")) else {
        return;
    };
    visit(pod_spec, &mut |kind, name| {
        let Some(base) = name.as_str().and_then(|n| n.strip_suffix("-primary")) else {
            return;
        };
        let r = ConfigRef {
            kind,
            name: base.to_string(),
        };
        if copies.contains(&r) {
            *name = Yaml::String(r.name);
        }
    });
}
