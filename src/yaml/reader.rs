//! Walks a [`Node`] tree and collects every problem instead of stopping at the first.
//!
//! Each accessor reports a [`SpecError`] with the node's line and dotted field path and
//! returns `None`, so callers keep reading and the user sees every problem in one run.
//!
//! Most readers refuse a key they do not know. A reader of a Kubernetes custom resource
//! whose CRD is structural (a Flagger Canary) reads inside [`Reader::pruning`]: there an
//! unknown key is a warning and is skipped, as the API server prunes it before the
//! controller sees the object.

use std::time::Duration;

use crate::yaml::error::SpecError;
use crate::yaml::node::{Node, Value};

/// Collects problems for one file.
pub struct Reader {
    pub file: String,
    pub errors: Vec<SpecError>,
    /// Problems that refuse nothing (a pruned unknown key, a reference's apiVersion the
    /// controller does not read), in the order found.
    pub warnings: Vec<SpecError>,
    /// Inside [`Reader::pruning`]: unknown keys are warnings, not errors; the CRD whose
    /// schema the API server prunes with.
    prune_unknown: Option<(&'static str, &'static str)>,
}

/// `a.b` + `c` -> `a.b.c`.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `a.b` + 2 -> `a.b[2]`.
pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

fn describe(node: &Node) -> String {
    match &node.value {
        Value::Null => "null".into(),
        Value::Scalar { text, .. } => format!("{text:?}"),
        Value::Seq(_) => "a list".into(),
        Value::Map(_) => "a mapping".into(),
    }
}

impl Reader {
    pub fn new(file: impl Into<String>) -> Reader {
        Reader {
            file: file.into(),
            errors: Vec::new(),
            warnings: Vec::new(),
            prune_unknown: None,
        }
    }

    /// Runs `read` with unknown keys pruned: each is a warning (with its "did you mean"
    /// hint) and is skipped, as the Kubernetes API server prunes the fields a structural CRD
    /// does not declare. Only a reader of such a resource (a Flagger Canary) uses it; every
    /// other input keeps refusing unknown keys.
    pub fn pruning<T>(&mut self, read: impl FnOnce(&mut Reader) -> T) -> T {
        self.pruning_for("Flagger CRD", "Flagger", read)
    }

    /// [`Reader::pruning`] for another structural CRD (`crd`, read by `controller`), named
    /// in the warnings.
    pub fn pruning_for<T>(
        &mut self,
        crd: &'static str,
        controller: &'static str,
        read: impl FnOnce(&mut Reader) -> T,
    ) -> T {
        let outer = self.prune_unknown.replace((crd, controller));
        let value = read(self);
        self.prune_unknown = outer;
        value
    }

    /// Whether unknown keys are pruned with a warning here (inside [`Reader::pruning`]).
    pub fn prunes_unknown(&self) -> bool {
        self.prune_unknown.is_some()
    }

    /// An unknown key at `line`, `field`: an error, or inside [`Reader::pruning`] a warning
    /// saying it is ignored. `detail` is the hint and the expected keys.
    pub fn unknown_key(&mut self, line: usize, field: &str, detail: &str) {
        if let Some((crd, controller)) = self.prune_unknown {
            self.warn(line, field, format!("unknown field{detail}; ignored, as the Kubernetes API server prunes fields the {crd} does not declare ({controller} never sees it)"));
        } else {
            self.error(line, field, format!("unknown field{detail}"));
        }
    }

    /// A problem that refuses nothing; `sluice validate --strict` makes it an error.
    pub fn warn(&mut self, line: usize, field: &str, message: impl Into<String>) {
        self.warnings.push(SpecError {
            file: self.file.clone(),
            line,
            field: field.to_string(),
            message: message.into(),
        });
    }

    pub fn error(&mut self, line: usize, field: &str, message: impl Into<String>) {
        self.errors.push(SpecError {
            file: self.file.clone(),
            line,
            field: field.to_string(),
            message: message.into(),
        });
    }

    /// A mapping whose keys must be among `known`; unknown keys are reported with a hint.
    pub fn map<'n>(&mut self, node: &'n Node, path: &str, known: &[&str]) -> Option<&'n Node> {
        let Value::Map(entries) = &node.value else {
            self.error(
                node.line,
                path,
                format!("expected a mapping, found {}", describe(node)),
            );
            return None;
        };
        for (key, _) in entries {
            if !known.contains(&key.text.as_str()) {
                let hint = did_you_mean(&key.text, known)
                    .map(|k| format!(" (did you mean {k:?}?)"))
                    .unwrap_or_default();
                self.unknown_key(
                    key.line,
                    &join(path, &key.text),
                    &format!("{hint}; expected one of: {}", known.join(", ")),
                );
            }
        }
        let mut seen: Vec<&str> = Vec::new();
        for (key, _) in entries {
            if seen.contains(&key.text.as_str()) {
                self.error(key.line, &join(path, &key.text), "duplicate key");
            }
            seen.push(&key.text);
        }
        Some(node)
    }

    /// A required field of a mapping.
    pub fn required<'n>(&mut self, map: &'n Node, path: &str, key: &str) -> Option<&'n Node> {
        match map.get(key) {
            Some(node) if node.value != Value::Null => Some(node),
            _ => {
                self.error(map.line, &join(path, key), "required field is missing");
                None
            }
        }
    }

    pub fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match &node.value {
            Value::Scalar { text, .. } => Some(text.clone()),
            _ => {
                self.error(
                    node.line,
                    path,
                    format!("expected a string, found {}", describe(node)),
                );
                None
            }
        }
    }

    /// The value `node` names among `choices` (text, value); an error listing them otherwise.
    pub fn one_of<T: Copy>(&mut self, node: &Node, path: &str, choices: &[(&str, T)]) -> Option<T> {
        let text = self.string(node, path)?;
        if let Some((_, value)) = choices.iter().find(|(name, _)| *name == text) {
            return Some(*value);
        }
        let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
        let expected = match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => "nothing".to_string(),
        };
        self.error(
            node.line,
            path,
            format!("expected {expected}, found {text:?}"),
        );
        None
    }

    pub fn int(&mut self, node: &Node, path: &str, min: i64, max: i64) -> Option<i64> {
        let parsed = match &node.value {
            Value::Scalar {
                text,
                quoted: false,
            } => text.parse::<i64>().ok(),
            _ => None,
        };
        match parsed {
            Some(v) if (min..=max).contains(&v) => Some(v),
            Some(v) => {
                self.error(
                    node.line,
                    path,
                    format!("expected {min}..={max}, found {v}"),
                );
                None
            }
            None => {
                self.error(
                    node.line,
                    path,
                    format!(
                        "expected an integer in {min}..={max}, found {}",
                        describe(node)
                    ),
                );
                None
            }
        }
    }

    pub fn float(&mut self, node: &Node, path: &str) -> Option<f64> {
        let parsed = match &node.value {
            Value::Scalar {
                text,
                quoted: false,
            } => text.parse::<f64>().ok().filter(|v| v.is_finite()),
            _ => None,
        };
        if parsed.is_none() {
            self.error(
                node.line,
                path,
                format!("expected a number, found {}", describe(node)),
            );
        }
        parsed
    }

    pub fn bool(&mut self, node: &Node, path: &str) -> Option<bool> {
        match &node.value {
            Value::Scalar {
                text,
                quoted: false,
            } if text == "true" => Some(true),
            Value::Scalar {
                text,
                quoted: false,
            } if text == "false" => Some(false),
            _ => {
                self.error(
                    node.line,
                    path,
                    format!("expected true or false, found {}", describe(node)),
                );
                None
            }
        }
    }

    pub fn seq<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n [Node]> {
        match &node.value {
            Value::Seq(items) => Some(items),
            _ => {
                self.error(
                    node.line,
                    path,
                    format!("expected a list, found {}", describe(node)),
                );
                None
            }
        }
    }

    /// A duration: a Go/Flagger string ("30s", "1m30s", "500ms") or integer seconds.
    pub fn duration(&mut self, node: &Node, path: &str) -> Option<Duration> {
        let text = match &node.value {
            Value::Scalar { text, .. } => text.trim().to_string(),
            _ => {
                self.error(
                    node.line,
                    path,
                    format!(
                        "expected a duration such as \"30s\" or \"1m30s\", found {}",
                        describe(node)
                    ),
                );
                return None;
            }
        };
        match parse_duration(&text) {
            Ok(d) => Some(d),
            Err(why) => {
                self.error(node.line, path, why);
                None
            }
        }
    }
}

/// A reference's `apiVersion` (at `node`, field `path`) that the controller does not read:
/// it finds `object` by kind and name, and `object`'s own apiVersion decides. A value that
/// differs from the object's is a warning; `reads` says how the controller reads the object
/// (`Flagger reads the Ingress by name through networking.k8s.io/v1`).
pub fn warn_ref_api_version(
    r: &mut Reader,
    node: &Node,
    path: &str,
    object: &crate::yaml::snapshot::Object,
    reads: &str,
) {
    let Some(given) = node.as_str() else {
        return;
    };
    let actual = object.api_version.unwrap_or_default();
    if given != actual {
        r.warn(
            node.line,
            path,
            format!(
                "{given:?} is not the apiVersion of {} {} ({}:{}), which is {actual:?}; {reads} and ignores this field, as sluice does",
                object.kind, object.name, object.file, object.line
            ),
        );
    }
}

/// The top-level keys of a Kubernetes object.
pub const OBJECT_KEYS: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];

/// The keys of a Kubernetes object's `metadata` (the API server's own included, so an object
/// exported from a cluster reads as written).
pub const METADATA_KEYS: &[&str] = &[
    "name",
    "namespace",
    "labels",
    "annotations",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "finalizers",
    "ownerReferences",
    "managedFields",
    "generateName",
];

/// An object's `metadata`: its name and namespace (`default` when absent), each a DNS-1123
/// name; each bad or missing one is an error at its line, and comes back `None`.
pub fn metadata_name(
    r: &mut Reader,
    root: &Node,
) -> Option<(
    Option<sluice_core::model::Name>,
    Option<sluice_core::model::Name>,
)> {
    let meta = r.required(root, "", "metadata")?;
    r.map(meta, "metadata", METADATA_KEYS)?;
    let name = r
        .required(meta, "metadata", "name")
        .and_then(|n| name_at(r, n, "metadata.name"));
    let namespace = match meta.get("namespace") {
        Some(n) => namespace_at(r, n, "metadata.namespace"),
        None => sluice_core::model::Name::parse("default").ok(),
    };
    Some((name, namespace))
}

/// The most characters a name may have: what Kubernetes allows for an object name (a DNS-1123
/// subdomain). Names go into commit messages, trailers and status files.
pub const MAX_NAME_CHARS: usize = 253;

/// A name at `path` that Kubernetes does not shape (a metric's, a webhook's, an alert's): text
/// of at most [`MAX_NAME_CHARS`] characters without control characters (it goes into commit
/// messages and trailers, one per line). A bad one is an error at the node's line that does
/// not repeat it.
pub fn short_name(r: &mut Reader, node: &Node, path: &str) -> Option<String> {
    let text = r.string(node, path)?;
    let count = text.chars().count();
    if count > MAX_NAME_CHARS {
        r.error(
            node.line,
            path,
            format!("expected a name of at most {MAX_NAME_CHARS} characters (what Kubernetes allows for an object name), found {count} characters"),
        );
        return None;
    }
    if text.chars().any(char::is_control) {
        r.error(
            node.line,
            path,
            format!(
                "expected a name without line breaks or other control characters, found {text:?}"
            ),
        );
        return None;
    }
    Some(text)
}

/// A namespace at `path`: a DNS-1123 label, as Kubernetes allows for a namespace; a bad one is
/// an error at the node's line.
pub fn namespace_at(r: &mut Reader, node: &Node, path: &str) -> Option<sluice_core::model::Name> {
    let text = r.string(node, path)?;
    match sluice_core::model::Name::parse_label(&text) {
        Ok(n) => Some(n),
        Err(e) => {
            r.error(node.line, path, e);
            None
        }
    }
}

/// A DNS-1123 name at `path`; a bad one is an error at the node's line.
pub fn name_at(r: &mut Reader, node: &Node, path: &str) -> Option<sluice_core::model::Name> {
    let text = r.string(node, path)?;
    match sluice_core::model::Name::parse(&text) {
        Ok(n) => Some(n),
        Err(e) => {
            r.error(node.line, path, e);
            None
        }
    }
}

/// Parses "90", "90s", "1m30s", "1h", "500ms" (Go's time.ParseDuration units, no sign).
// Hand-written: jiff's friendly format is not Go's time.ParseDuration (it accepts "1 hour",
// "30 s", "PT1H" and rejects ".5s", "1s1m", "1.5h30m" and bare seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!("expected a duration such as \"30s\", \"1m30s\" or integer seconds, found {text:?}")
    };
    if text.is_empty() {
        return Err(bad());
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        let part = Duration::try_from_secs_f64(number * seconds).map_err(|_| bad())?;
        total = total.checked_add(part).ok_or_else(bad)?;
    }
    Ok(total)
}

/// The closest known key, when it is close enough to be a likely typo.
pub fn did_you_mean<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| {
            (
                strsim::jaro_winkler(&key.to_lowercase(), &k.to_lowercase()),
                *k,
            )
        })
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_go_strings_and_integer_seconds() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        for bad in ["", "s", "10x", "-5s", "1m30", "abc", "1e999s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn typos_get_a_hint() {
        let known = ["stepWeight", "stepWeights", "maxWeight", "interval"];
        assert_eq!(did_you_mean("stepweight", &known), Some("stepWeight"));
        assert_eq!(did_you_mean("maxWieght", &known), Some("maxWeight"));
        assert_eq!(did_you_mean("zzz", &known), None);
    }
}
