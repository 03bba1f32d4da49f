//! Kubernetes Secrets named by `secretRef` in MetricTemplates and AlertProviders, as the
//! operator maps them into sluice's process. sluice never reads a Secret from git, and never
//! from the Kubernetes API: the operator hands each one over in one of two ways, looked up in
//! this order:
//!
//! 1. an environment variable `SLUICE_SECRET_<NAMESPACE>__<NAME>__<KEY>` (see [`env_var`]:
//!    upper case, every character that is not a letter or digit becomes `_`, and the three
//!    parts are joined by two underscores);
//! 2. a file `<dir>/<namespace>/<name>/<key>`, where `<dir>` is `SLUICE_SECRETS_DIR` (default
//!    [`DEFAULT_DIR`]). This is the layout a Secret volume mounted at `<dir>/<ns>/<name>` gives:
//!    one file per key. Those files are symbolic links into the volume's `..data` folder, so
//!    links are followed here, unlike in the config repo.
//!
//! Names become paths, so they are checked before anything is read: the namespace must be a
//! DNS-1123 label and the name a DNS-1123 subdomain (what Kubernetes allows for them), the key
//! what Kubernetes allows for a Secret key (letters, digits, `-`, `_`, `.`; not `.` or `..`).
//! The file read must resolve inside `<dir>/<namespace>/<name>/`: the volume's own links into
//! its `..data` folder are followed, a link that leads anywhere else is refused. It must be a
//! regular file (not a device or a FIFO) of at most 1 MiB.
//!
//! Trailing line breaks are cut from a value (a file written with `echo` ends in one). Values
//! are looked up when a metric or alert needs them, so a rotated Secret is picked up without a
//! restart. The errors name every place that was looked at and never contain a value; every
//! value read is handed to [`crate::redact`], which keeps it (and its base64 form) out of logs.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The environment variable that moves the Secret folder.
pub const DIR_VAR: &str = "SLUICE_SECRETS_DIR";

/// Where Secret volumes are mounted when [`DIR_VAR`] is not set.
pub const DEFAULT_DIR: &str = "/var/run/sluice/secrets";

/// A Secret value larger than this is refused (Kubernetes caps a whole Secret at 1 MiB).
const MAX_VALUE_BYTES: u64 = 1024 * 1024;

/// The Secrets the operator mapped: the environment snapshot taken at start and the folder.
#[derive(Debug, Clone)]
pub struct Secrets {
    vars: BTreeMap<String, String>,
    dir: PathBuf,
}

/// Why a Secret key could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Neither the variable nor the file exists.
    #[error("Secret {namespace}/{name} key {key:?} is not mapped into sluice: set {var} or mount the Secret at {dir}/{namespace}/{name} (sluice never reads Secrets from git or the cluster)")]
    Missing {
        namespace: String,
        name: String,
        key: String,
        var: String,
        dir: String,
    },
    /// The namespace, name or key cannot name a Kubernetes Secret key, so it is never turned
    /// into a path.
    #[error("Secret {namespace:?}/{name:?} key {key:?}: {reason}")]
    BadName {
        namespace: String,
        name: String,
        key: String,
        reason: String,
    },
    /// The file exists and cannot be read, is too large or is not UTF-8.
    #[error("Secret {namespace}/{name} key {key:?}: {path}: {reason}")]
    Unreadable {
        namespace: String,
        name: String,
        key: String,
        path: String,
        reason: String,
    },
}

/// The variable that holds key `key` of Secret `namespace/name`.
pub fn env_var(namespace: &str, name: &str, key: &str) -> String {
    let part = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!(
        "SLUICE_SECRET_{}__{}__{}",
        part(namespace),
        part(name),
        part(key)
    )
}

impl Secrets {
    /// The Secrets mapped through `vars` (the environment snapshot) and the folder
    /// [`DIR_VAR`] names, or [`DEFAULT_DIR`].
    pub fn from_vars(vars: BTreeMap<String, String>) -> Secrets {
        let dir = vars
            .get(DIR_VAR)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
        Secrets { vars, dir }
    }

    /// The folder Secret volumes are looked up in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Key `key` of Secret `namespace/name`: `Ok(None)` when it is mapped nowhere.
    pub fn get(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, SecretError> {
        if let Some(reason) = bad_name(namespace, name, key) {
            return Err(SecretError::BadName {
                namespace: namespace.into(),
                name: name.into(),
                key: key.into(),
                reason,
            });
        }
        if let Some(v) = self
            .vars
            .get(&env_var(namespace, name, key))
            .filter(|v| !v.is_empty())
        {
            return Ok(Some(remembered(trim(v))));
        }
        let mount = self.dir.join(namespace).join(name);
        let path = mount.join(key);
        let unreadable = |reason: String| SecretError::Unreadable {
            namespace: namespace.into(),
            name: name.into(),
            key: key.into(),
            path: path.display().to_string(),
            reason,
        };
        let resolved = match std::fs::canonicalize(&path) {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unreadable(e.to_string())),
        };
        let inside = std::fs::canonicalize(&mount).is_ok_and(|m| resolved.starts_with(m));
        if !inside {
            return Err(unreadable(format!(
                "resolves to {}, outside the Secret's folder {}; only the volume's own links are followed",
                resolved.display(),
                mount.display()
            )));
        }
        // A device or a FIFO is not a Secret key: /dev/zero never ends, a FIFO blocks the open.
        match std::fs::metadata(&resolved) {
            Ok(m) if m.is_file() => {}
            Ok(_) => {
                return Err(unreadable(format!(
                    "{} is not a regular file (a Secret key is one)",
                    resolved.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unreadable(e.to_string())),
        }
        let file = match std::fs::File::open(&resolved) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unreadable(e.to_string())),
        };
        let mut bytes = Vec::new();
        file.take(MAX_VALUE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| unreadable(e.to_string()))?;
        if bytes.len() as u64 > MAX_VALUE_BYTES {
            return Err(unreadable(format!("larger than {MAX_VALUE_BYTES} bytes")));
        }
        let text = String::from_utf8(bytes).map_err(|_| unreadable("not UTF-8".into()))?;
        Ok(Some(remembered(trim(&text))))
    }

    /// Key `key` of Secret `namespace/name`, or an error saying how to map it.
    pub fn require(&self, namespace: &str, name: &str, key: &str) -> Result<String, SecretError> {
        self.get(namespace, name, key)?
            .ok_or_else(|| SecretError::Missing {
                namespace: namespace.into(),
                name: name.into(),
                key: key.into(),
                var: env_var(namespace, name, key),
                dir: self.dir.display().to_string(),
            })
    }
}

/// Why `namespace/name` key `key` cannot be a Kubernetes Secret's key, if it cannot.
fn bad_name(namespace: &str, name: &str, key: &str) -> Option<String> {
    use crate::core::model::Name;
    if Name::parse(namespace).is_err() || namespace.contains('.') {
        return Some("the namespace must be a DNS-1123 label (a-z, 0-9, '-', at most 63 characters, starting and ending with a letter or digit)".into());
    }
    if let Err(e) = Name::parse(name) {
        return Some(format!("the Secret name: {e}"));
    }
    bad_key(key)
}

/// Why `key` cannot name a key of a Kubernetes Secret (so it is never turned into a path), or
/// `None` when it can.
pub fn bad_key(key: &str) -> Option<String> {
    let key_chars = key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if key.is_empty() || key.len() > 253 || !key_chars || key == "." || key == ".." {
        return Some("the key must be letters, digits, '-', '_' or '.' (not '.' or '..'), as Kubernetes allows for Secret keys".into());
    }
    None
}

/// `value`, just read, after telling [`crate::redact`] to keep it out of the logs.
fn remembered(value: String) -> String {
    crate::redact::remember(&value);
    value
}

fn trim(value: &str) -> String {
    value.trim_end_matches(['\n', '\r']).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(dir: &Path, vars: &[(&str, &str)]) -> Secrets {
        let mut map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.insert(DIR_VAR.into(), dir.display().to_string());
        Secrets::from_vars(map)
    }

    #[test]
    fn variable_names_join_upper_cased_parts_with_two_underscores() {
        assert_eq!(
            env_var("apps", "datadog-keys", "datadog_api_key"),
            "SLUICE_SECRET_APPS__DATADOG_KEYS__DATADOG_API_KEY"
        );
        assert_eq!(env_var("a.b", "c", "d.e"), "SLUICE_SECRET_A_B__C__D_E");
    }

    #[test]
    fn a_variable_wins_over_a_mounted_file_and_line_breaks_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let key_dir = dir.path().join("apps/slack");
        std::fs::create_dir_all(&key_dir).unwrap();
        std::fs::write(key_dir.join("address"), "https://hooks.example/file\n").unwrap();
        let s = secrets(dir.path(), &[]);
        assert_eq!(
            s.get("apps", "slack", "address").unwrap().as_deref(),
            Some("https://hooks.example/file")
        );
        let s = secrets(
            dir.path(),
            &[(
                "SLUICE_SECRET_APPS__SLACK__ADDRESS",
                "https://hooks.example/var",
            )],
        );
        assert_eq!(
            s.require("apps", "slack", "address").unwrap(),
            "https://hooks.example/var"
        );
    }

    #[test]
    fn secret_volume_files_are_read_through_their_symbolic_links() {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("apps/dd");
        std::fs::create_dir_all(mount.join("..2026_11_30")).unwrap();
        std::fs::write(mount.join("..2026_11_30/api-key"), "k3y").unwrap();
        std::os::unix::fs::symlink("..2026_11_30", mount.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/api-key", mount.join("api-key")).unwrap();
        let s = secrets(dir.path(), &[]);
        assert_eq!(s.require("apps", "dd", "api-key").unwrap(), "k3y");
    }

    #[test]
    fn an_unmapped_key_says_where_it_was_looked_for() {
        let dir = tempfile::tempdir().unwrap();
        let s = secrets(dir.path(), &[]);
        assert_eq!(s.get("apps", "dd", "api-key").unwrap(), None);
        let err = s.require("apps", "dd", "api-key").unwrap_err().to_string();
        assert!(err.contains("SLUICE_SECRET_APPS__DD__API_KEY"), "{err}");
        assert!(
            err.contains(&format!("{}/apps/dd", dir.path().display())),
            "{err}"
        );
    }

    #[test]
    fn names_that_would_leave_the_secrets_folder_are_refused_before_any_read() {
        let dir = tempfile::tempdir().unwrap();
        let secrets_dir = dir.path().join("secrets");
        std::fs::create_dir_all(&secrets_dir).unwrap();
        // What a traversal would reach.
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/token"), "host secret").unwrap();
        let s = secrets(&secrets_dir, &[]);
        for (namespace, name, key) in [
            ("..", "etc", "token"),
            ("apps", "../../etc", "token"),
            ("apps", "/abs/dir", "token"),
            ("apps", "..", "token"),
            ("apps", "dd", "../../../etc/token"),
            ("apps", "dd", ".."),
            ("Apps", "dd", "token"),
            ("", "dd", "token"),
        ] {
            let err = s.get(namespace, name, key).unwrap_err();
            assert!(
                matches!(err, SecretError::BadName { .. }),
                "{namespace}/{name}/{key}: {err}"
            );
            assert!(!err.to_string().contains("host secret"));
        }
        // A dotted Secret name and a dotted key are what Kubernetes allows.
        assert_eq!(s.get("apps", "tls.keys", "tls.crt").unwrap(), None);
    }

    #[test]
    fn a_link_out_of_the_secrets_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let secrets_dir = dir.path().join("secrets");
        let mount = secrets_dir.join("apps/dd");
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::write(dir.path().join("service-account-token"), "sa-token").unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("service-account-token"),
            mount.join("token"),
        )
        .unwrap();
        let s = secrets(&secrets_dir, &[]);
        let err = s.get("apps", "dd", "token").unwrap_err().to_string();
        assert!(err.contains("outside the Secret's folder"), "{err}");
        assert!(!err.contains("sa-token"), "{err}");
    }

    #[test]
    fn a_fifo_or_a_directory_in_the_secrets_folder_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("apps/dd");
        std::fs::create_dir_all(mount.join("folder")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(mount.join("fifo"))
            .status()
            .unwrap();
        assert!(made.success());
        let s = secrets(dir.path(), &[]);
        for key in ["fifo", "folder"] {
            let err = s.get("apps", "dd", key).unwrap_err().to_string();
            assert!(err.contains("not a regular file"), "{key}: {err}");
        }
    }

    #[test]
    fn a_value_over_one_mebibyte_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("apps/dd");
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::write(
            mount.join("big"),
            vec![b'x'; (MAX_VALUE_BYTES + 1) as usize],
        )
        .unwrap();
        let s = secrets(dir.path(), &[]);
        let err = s.get("apps", "dd", "big").unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
    }

    #[test]
    fn the_default_folder_is_used_without_the_variable() {
        let s = Secrets::from_vars(BTreeMap::new());
        assert_eq!(s.dir(), Path::new(DEFAULT_DIR));
    }
}
