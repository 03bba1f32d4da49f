//! Repo settings: `.sluice/config.yaml`, committed by humans, defaults for the whole repo.
//!
//! Command-line flags override these. Later adapters (forge, sync, signing) add their blocks
//! here; every block is validated with the same file:line:field errors as canaries.

use crate::spec::error::SpecError;
use crate::spec::model::{RepoPath, SyncTarget};
use crate::spec::node::{parse_documents, Node};
use crate::spec::provider::{parse_provider, Provider};
use crate::spec::reader::{join, Reader};
use crate::spec::sync::read_sync_target;

/// Where the settings live, relative to the repo root.
pub const SETTINGS_PATH: &str = ".sluice/config.yaml";

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Route provider for Flagger canaries without `spec.provider`.
    pub provider: Option<Provider>,
    /// Output folder pattern for canaries without `spec.output`; `{namespace}` and `{name}`
    /// are replaced.
    pub output: String,
    pub author_name: String,
    pub author_email: String,
    /// Default Prometheus address for metric queries.
    pub prometheus: Option<String>,
    /// Default GitOps object (Flux Kustomization or Argo CD Application) that applies the
    /// outputs; a native canary's `spec.sync` overrides it, Flagger canaries always use it.
    pub sync: Option<SyncTarget>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            provider: None,
            output: "clusters/{namespace}/{name}".into(),
            author_name: "sluice".into(),
            author_email: "sluice@localhost".into(),
            prometheus: None,
            sync: None,
        }
    }
}

impl Settings {
    /// The output folder for one canary, from the pattern.
    pub fn output_for(&self, namespace: &str, name: &str) -> Result<RepoPath, String> {
        RepoPath::parse(
            &self
                .output
                .replace("{namespace}", namespace)
                .replace("{name}", name),
        )
    }
}

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "provider",
    "output",
    "author",
    "prometheus",
    "sync",
];

/// Parses the settings file; `file` names it in errors.
pub fn parse_settings(file: &str, text: &str) -> Result<Settings, Vec<SpecError>> {
    let mut r = Reader::new(file);
    let docs = match parse_documents(text) {
        Ok(d) => d,
        Err(e) => {
            r.error(e.line, "", format!("YAML syntax error: {}", e.message));
            return Err(r.errors);
        }
    };
    let mut settings = Settings::default();
    let Some(doc) = docs.first() else {
        return Ok(settings);
    };
    if docs.len() > 1 {
        r.error(
            docs[1].root.line,
            "",
            "expected one YAML document, found several",
        );
    }
    let root = &doc.root;
    if root.value == crate::spec::node::Value::Null {
        return Ok(settings);
    }
    if r.map(root, "", KEYS).is_some() {
        expect_const(&mut r, root, "apiVersion", "sluice.dev/v1alpha1");
        expect_const(&mut r, root, "kind", "Config");
        if let Some(n) = root.get("provider") {
            if let Some(text) = r.string(n, "provider") {
                match parse_provider(&text) {
                    Ok(p) => settings.provider = Some(p),
                    Err(e) => r.error(n.line, "provider", e),
                }
            }
        }
        if let Some(n) = root.get("output") {
            if let Some(text) = r.string(n, "output") {
                match settings_output(&text) {
                    Ok(()) => settings.output = text,
                    Err(e) => r.error(n.line, "output", e),
                }
            }
        }
        if let Some(n) = root.get("author") {
            if r.map(n, "author", &["name", "email"]).is_some() {
                if let Some(v) = n.get("name").and_then(|v| r.string(v, "author.name")) {
                    settings.author_name = v;
                }
                if let Some(v) = n.get("email").and_then(|v| r.string(v, "author.email")) {
                    settings.author_email = v;
                }
            }
        }
        if let Some(n) = root.get("prometheus") {
            if r.map(n, "prometheus", &["address"]).is_some() {
                if let Some(v) = r
                    .required(n, "prometheus", "address")
                    .and_then(|v| r.string(v, &join("prometheus", "address")))
                {
                    settings.prometheus = Some(v);
                }
            }
        }
        if let Some(n) = root.get("sync") {
            settings.sync = read_sync_target(&mut r, n, "sync");
        }
    }
    if r.errors.is_empty() {
        Ok(settings)
    } else {
        Err(r.errors)
    }
}

fn settings_output(pattern: &str) -> Result<(), String> {
    RepoPath::parse(
        &pattern
            .replace("{namespace}", "ns")
            .replace("{name}", "name"),
    )
    .map(|_| ())
}

fn expect_const(r: &mut Reader, root: &Node, key: &str, expected: &str) {
    if let Some(n) = root.get(key) {
        if let Some(text) = r.string(n, key) {
            if text != expected {
                r.error(
                    n.line,
                    key,
                    format!("expected {expected:?}, found {text:?}"),
                );
            }
        }
    }
}
