//! The user documentation's relative links resolve: every `](path)` and `](path#anchor)` in
//! `README.md` and `docs/*.md` names a file of the repository, and an anchor into a markdown
//! file names one of its headings (as GitHub makes heading anchors).

use std::path::{Path, PathBuf};

/// `README.md` and every markdown file under `docs/`.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The targets of the inline links `[text](target)` on `line`.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        match after.find(')') {
            Some(j) => {
                out.push(&after[..j]);
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out
}

/// The anchor GitHub gives a heading: lower case, spaces to `-`, punctuation other than `-` and
/// `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' | '-' => Some('-'),
            '_' => Some('_'),
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The anchors of the headings of the markdown file at `path`.
fn anchors(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("a linked markdown file reads");
    prose_lines(&text)
        .into_iter()
        .filter(|(_, l)| l.starts_with('#'))
        .map(|(_, l)| anchor(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn docs_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents(root) {
        let text = std::fs::read_to_string(&doc).expect("a document reads");
        let name = doc.strip_prefix(root).unwrap_or(&doc).display().to_string();
        let dir = doc.parent().unwrap_or(root);
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (file, fragment) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target, None),
                };
                let path = if file.is_empty() {
                    doc.clone()
                } else {
                    dir.join(file)
                };
                if !path.exists() {
                    problems.push(format!("{name}:{n}: {target}: no such file"));
                    continue;
                }
                let Some(fragment) = fragment else { continue };
                if path.extension().is_some_and(|e| e == "md")
                    && !anchors(&path).iter().any(|a| a == fragment)
                {
                    problems.push(format!("{name}:{n}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(checked > 10, "only {checked} relative links found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn heading_anchors_are_githubs() {
    assert_eq!(
        anchor(" Repo settings (`.sluice/config.yaml`)"),
        "repo-settings-sluiceconfigyaml"
    );
    assert_eq!(
        anchor("Flagger (`flagger.app/v1beta1`)"),
        "flagger-flaggerappv1beta1"
    );
    assert_eq!(anchor("Two commands"), "two-commands");
    assert_eq!(
        link_targets("see [a](docs/a.md) and [b](b.md#x)."),
        ["docs/a.md", "b.md#x"]
    );
}
