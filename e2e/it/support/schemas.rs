//! Compiled strict JSON schemas (e2e/schemas) that every fixture and every object the fake
//! Kubernetes API serves is checked against. The file needs nothing else of `support/`, so that
//! the bench binary can share it (and `kube.rs`) by path.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value as Json;

/// Compiled strict schemas (e2e/schemas), keyed by file name; the file is found from
/// apiVersion and kind, as `<kind>.<group>_<version>-strict.json` (core group: `core`).
#[derive(Default)]
pub struct Schemas(pub BTreeMap<String, jsonschema::Validator>);

impl Schemas {
    pub fn file_for(doc: &Json) -> String {
        let api = doc["apiVersion"].as_str().expect("apiVersion");
        let kind = doc["kind"].as_str().expect("kind").to_lowercase();
        let (group, version) = api.split_once('/').unwrap_or(("core", api));
        format!("{kind}.{group}_{version}-strict.json")
    }

    /// Every validation error for `doc`, as `path: message` lines.
    pub fn errors(&mut self, doc: &Json) -> Vec<String> {
        let file = Self::file_for(doc);
        let validator = self.0.entry(file.clone()).or_insert_with(|| {
            let schemas = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/schemas");
            let schema = match file.as_str() {
                // Flagger's own Canary schema, from the CRD it installs.
                "canary.flagger.app_v1beta1-strict.json" => flagger_canary_schema(&schemas),
                _ => {
                    let path = schemas.join(&file);
                    let text = std::fs::read_to_string(&path)
                        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    serde_json::from_str(&text).expect("schema is JSON")
                }
            };
            jsonschema::validator_for(&schema).expect("schema compiles")
        });
        validator
            .iter_errors(doc)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect()
    }

    /// Asserts that `doc` passes its strict schema (a failure names `what`, the schema file
    /// and every error); returns the schema's file name.
    pub fn assert_valid(&mut self, doc: &Json, what: &str) -> String {
        let file = Self::file_for(doc);
        let errors = self.errors(doc);
        assert!(errors.is_empty(), "{what}: {file}: {errors:#?}");
        file
    }
}

/// The `openAPIV3Schema` of Flagger's Canary CRD (v1beta1) in `schemas`.
fn flagger_canary_schema(schemas: &Path) -> Json {
    let text = std::fs::read_to_string(schemas.join("flagger.app_crds.v1.44.0.yaml")).unwrap();
    let crds: Vec<Json> = serde_saphyr::from_multiple(&text).expect("the CRDs parse");
    let canary = crds
        .iter()
        .find(|c| c["spec"]["names"]["kind"] == "Canary")
        .expect("the Canary CRD");
    canary["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}
