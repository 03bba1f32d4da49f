//! The table against the readers: every field list a reader passes to its unknown-field check
//! (`r.map(node, path, LIST)`, LIST a literal, a `const`, a `let` or a parameter filled by its
//! callers) is read out of the source, and each path-like name in it must have a row.

use std::collections::BTreeMap;
use std::path::Path;

use super::*;

/// Every `.rs` file under `src/` (relative path, text), without test code.
fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(&root)
        .into_iter()
        .filter_map(Result::ok)
    {
        let path = entry.path();
        let test_code =
            path.components().any(|c| c.as_os_str() == "tests") || entry.file_name() == "tests.rs";
        if path.extension().is_none_or(|e| e != "rs") || test_code {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        out.push((name, text.to_string()));
    }
    assert!(
        out.len() > 50,
        "the sources were not found under {}",
        root.display()
    );
    out
}

/// The string literals of `text`.
fn literals(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut s = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => break,
                c => s.push(c),
            }
        }
        out.push(s);
    }
    out
}

/// The text inside the bracket that opens at byte `open` of `text`.
fn inside(text: &str, open: usize) -> &str {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    &text[open + 1..]
}

/// `args` split at its top-level commas, each trimmed.
fn split_args(args: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in args.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(args[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(args[start..].trim());
    out
}

/// The `&[&str]` constants of each file: name -> [(file, body)].
fn constants(sources: &[(String, String)]) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for (file, text) in sources {
        for (at, _) in text.match_indices("const ") {
            let rest = &text[at + "const ".len()..];
            let Some((name, rest)) = rest.split_once(':') else {
                continue;
            };
            let Some((ty, rest)) = rest.split_once('=') else {
                continue;
            };
            if !name.chars().all(|c| c.is_ascii_uppercase() || c == '_') || !ty.contains("str]") {
                continue;
            }
            let body = rest.split("];").next().unwrap_or_default();
            out.entry(name.to_string())
                .or_default()
                .push((file.clone(), body.to_string()));
        }
    }
    out
}

/// The field names `arg` (an argument of `r.map` at byte `at` of `file`'s `text`) stands
/// for, or `None` when it cannot be read.
fn resolve(
    arg: &str,
    file: &str,
    text: &str,
    at: usize,
    consts: &BTreeMap<String, Vec<(String, String)>>,
) -> Option<Vec<String>> {
    let arg = arg.trim_start_matches('&').trim();
    if arg.contains('[') {
        return Some(literals(arg));
    }
    let of_const = |name: &str| -> Option<Vec<String>> {
        let defs = consts.get(name)?;
        let own: Vec<&(String, String)> = defs.iter().filter(|(f, _)| f == file).collect();
        let chosen: Vec<&(String, String)> = if own.is_empty() {
            defs.iter().collect()
        } else {
            own
        };
        Some(chosen.iter().flat_map(|(_, body)| literals(body)).collect())
    };
    if arg.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
        return of_const(arg);
    }
    let before = &text[..at];
    // A local: `let [mut] NAME = ...;`, its literals and the constants it names.
    for pattern in [format!("let {arg} ="), format!("let mut {arg} =")] {
        if let Some(start) = before.rfind(&pattern) {
            let def = before[start..].split(';').next().unwrap_or_default();
            let mut names = literals(def);
            for word in def.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.len() > 1 && word.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                    names.extend(of_const(word).unwrap_or_default());
                }
            }
            return Some(names);
        }
    }
    // A parameter of the enclosing function: what its callers in the file pass.
    let fn_at = before.rfind("fn ")?;
    let signature = &before[fn_at + 3..];
    let name_end = signature.find(['(', '<'])?;
    let function = &signature[..name_end];
    let open = fn_at + 3 + signature.find('(')?;
    let params = split_args(inside(text, open));
    let index = params
        .iter()
        .position(|p| p.split(':').next().map(str::trim) == Some(arg))?;
    let mut names = Vec::new();
    for (call, _) in text.match_indices(&format!("{function}(")) {
        if text[..call].ends_with("fn ") {
            continue;
        }
        let args = split_args(inside(text, call + function.len()));
        names.extend(resolve(args.get(index)?, file, text, call, consts)?);
    }
    Some(names)
}

/// Every field name the readers' unknown-field checks know, with the files that list it; the
/// calls whose list could not be read.
fn reader_fields(sources: &[(String, String)]) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let consts = constants(sources);
    let mut fields: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unread = Vec::new();
    for (file, text) in sources {
        for (at, _) in text.match_indices("r.map(") {
            let args = split_args(inside(text, at + "r.map".len()));
            let Some(list) = args.get(2) else { continue };
            match resolve(list, file, text, at, &consts) {
                Some(names) => {
                    for name in names {
                        fields.entry(name).or_default().push(file.clone());
                    }
                }
                None => unread.push(format!("{file}: r.map(.., .., {list})")),
            }
        }
    }
    // Lists a reader builds from other modules' (a router's fields), by their names.
    for (name, defs) in &consts {
        if name.ends_with("_KEYS") || name.ends_with("_FIELDS") {
            for (file, body) in defs {
                for field in literals(body) {
                    fields.entry(field).or_default().push(file.clone());
                }
            }
        }
    }
    (fields, unread)
}

/// The path-like fields of `fields` without a row in [`FIELDS`].
fn without_rule(fields: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    fields
        .iter()
        .filter(|(name, _)| path_like(name))
        .filter(|(name, _)| !FIELDS.iter().any(|f| last_part(f.field) == name.as_str()))
        .map(|(name, files)| format!("{name} (read in {})", files.join(", ")))
        .collect()
}

#[test]
fn every_path_like_field_a_reader_knows_has_a_rule() {
    let (fields, unread) = reader_fields(&sources());
    assert!(
        unread.is_empty(),
        "field lists this test cannot read; name them with a const: {unread:#?}"
    );
    assert!(
        fields.contains_key("secretRef") && fields.contains_key("metricsServer"),
        "{fields:?}"
    );
    let missing = without_rule(&fields);
    assert!(
        missing.is_empty(),
        "fields that name a file, folder, URL, host, Secret or object without a rule: add a row to FIELDS (src/manifest/named_paths.rs) and to docs/threat-model.md: {missing:#?}"
    );
    let stale: Vec<&str> = FIELDS
        .iter()
        .map(|f| f.field)
        .filter(|f| !fields.contains_key(last_part(f)))
        .collect();
    assert!(
        stale.is_empty(),
        "rows for fields no reader knows: {stale:?}"
    );
}

#[test]
fn a_new_path_like_field_in_any_list_form_is_caught() {
    let text = r#"
const KEYS: &[&str] = &["name", "kubeconfigPath"];
fn read_a(r: &mut Reader, n: &Node) { r.map(n, "spec", KEYS)?; }
fn read_b(r: &mut Reader, n: &Node) { r.map(
    n,
    "spec.b",
    &["name", "webhookUrl"],
)?; }
fn read_c(r: &mut Reader, n: &Node) { let keys = ["dataDir"]; r.map(n, "spec.c", &keys)?; }
fn read_d(r: &mut Reader, n: &Node, known: &[&str]) { r.map(n, "spec.d", known)?; }
fn read_e(r: &mut Reader, n: &Node) { read_d(r, n, &["bucketHost"]); }
"#;
    let sources = vec![("x.rs".to_string(), text.to_string())];
    let (fields, unread) = reader_fields(&sources);
    assert!(unread.is_empty(), "{unread:?}");
    let missing = without_rule(&fields);
    for name in ["kubeconfigPath", "webhookUrl", "dataDir", "bucketHost"] {
        assert!(
            missing.iter().any(|m| m.starts_with(name)),
            "{name}: {missing:?}"
        );
    }
    assert!(
        !missing.iter().any(|m| m.starts_with("name ")),
        "{missing:?}"
    );
}

#[test]
fn path_like_names_are_told_by_their_ending() {
    for name in [
        "tokenFile",
        "caFile",
        "secretRef",
        "apiUrl",
        "metricsServer",
        "routeSource",
        "hosts",
        "urlEnv",
        "allowedSigners",
        "kubeContext",
        "address",
        "output",
    ] {
        assert!(path_like(name), "{name}");
    }
    for name in [
        "name",
        "port",
        "interval",
        "stepWeights",
        "namespace",
        "query",
    ] {
        assert!(!path_like(name), "{name}");
    }
}

#[test]
fn the_threat_model_page_has_a_row_per_field() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/threat-model.md"))
            .unwrap();
    let missing: Vec<String> = FIELDS
        .iter()
        .map(|f| format!("| {} | `{}` |", f.kind, f.field))
        .filter(|row| !page.contains(row.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/threat-model.md lacks the rows (kind, field, rule): {missing:#?}"
    );
}
