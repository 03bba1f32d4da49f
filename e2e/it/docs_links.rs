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

/// The README is a first read: at most 300 lines, with the comparison with Flagger, Argo
/// Rollouts and Kargo (each row's facts linked upstream), the threat model and the
/// performance table on pages of their own.
#[test]
fn the_readme_is_a_first_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md reads");
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines; at most 300");
    let table = comparison_table(&readme);
    assert!(
        table.len() >= 6,
        "README.md lacks the comparison table (a header row naming sluice, Flagger, Argo Rollouts and Kargo, then its rows): {table:?}"
    );
    for upstream in ["fluxcd.io/flagger", "argo-rollouts", "kargo.io"] {
        assert!(
            table.iter().any(|row| row.contains(upstream)),
            "the comparison table links nothing of {upstream}"
        );
    }
    for page in [
        "docs/threat-model.md",
        "docs/performance.md",
        "docs/install.md",
    ] {
        assert!(
            readme.contains(&format!("]({page})")),
            "README.md links no {page}"
        );
    }
    for moved in ["## Threat model", "## Performance"] {
        assert!(
            !readme.lines().any(|l| l == moved),
            "README.md has a section {moved:?}; it lives in docs/"
        );
    }
}

/// The rows of the README's comparison table: from the header row that names all four tools
/// to the table's end.
fn comparison_table(readme: &str) -> Vec<&str> {
    let mut rows = readme
        .lines()
        .skip_while(|l| {
            !(l.starts_with('|')
                && ["sluice", "Flagger", "Argo Rollouts", "Kargo"]
                    .iter()
                    .all(|tool| l.contains(tool)))
        })
        .take_while(|l| l.starts_with('|'));
    let header = rows.next();
    header.into_iter().chain(rows).collect()
}

/// What of a line names this project's own tracker: "issue 27", "Issue #14", "issues 3",
/// "item 5", "third round", "round two". An upstream reference (`argo-rollouts#1153`, a URL's
/// `/issues/208`) is not one.
fn tracker_words(line: &str) -> Vec<String> {
    // URLs name upstream trackers (`.../issues/208`): left out.
    let lower: Vec<String> = line
        .to_lowercase()
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '<' | '>'))
        .filter(|token| !token.contains("://"))
        .map(str::to_string)
        .collect();
    let words: Vec<&str> = lower
        .iter()
        .flat_map(|token| token.split(|c: char| !(c.is_alphanumeric() || c == '#')))
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = Vec::new();
    for pair in words.windows(2) {
        let numbered = pair[1]
            .trim_start_matches('#')
            .starts_with(|c: char| c.is_ascii_digit());
        let tracker = matches!(pair[0], "issue" | "issues" | "item" | "items") && numbered
            || pair[1] == "round"
                && matches!(
                    pair[0],
                    "first" | "second" | "third" | "fourth" | "this" | "last"
                )
            || pair[0] == "round" && matches!(pair[1], "one" | "two" | "three" | "four");
        if tracker {
            found.push(pair.join(" "));
        }
    }
    found
}

#[test]
fn user_docs_never_name_our_own_tracker() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    let mut read = documents(root);
    read.push(root.join("CHANGELOG.md"));
    for doc in read {
        let text = std::fs::read_to_string(&doc).expect("a document reads");
        let name = doc.strip_prefix(root).unwrap_or(&doc).display().to_string();
        for (i, line) in text.lines().enumerate() {
            for words in tracker_words(line) {
                problems.push(format!("{name}:{}: {words:?}", i + 1));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "user docs speak of the project's own tracker; say what changed instead:\n{}",
        problems.join("\n")
    );
}

#[test]
fn tracker_words_are_found_and_upstream_references_are_not() {
    assert_eq!(
        tracker_words("(issue 27's third round)"),
        ["issue 27", "third round"]
    );
    assert_eq!(tracker_words("Issue #14 item 7"), ["issue #14", "item 7"]);
    assert_eq!(
        tracker_words("in this round, round two"),
        ["this round", "round two"]
    );
    assert!(tracker_words(
        "declined ([argo-rollouts#1153](https://github.com/argoproj/argo-rollouts/issues/1153))"
    )
    .is_empty());
    assert!(tracker_words("an issue with the route; items of a list; around 5").is_empty());
}

/// `.ci/run` runs exactly the README's test command, and the README's two commands are its
/// two `sh` blocks.
#[test]
fn ci_runs_the_readme_test_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md reads");
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in readme.lines() {
        match &mut current {
            None if line == "```sh" => current = Some(Vec::new()),
            Some(block) if line == "```" => {
                blocks.push(block.join("\n"));
                current = None;
            }
            Some(block) => block.push(line),
            None => {}
        }
    }
    assert_eq!(
        blocks,
        ["cargo run -- demo", "e2e/run"],
        "README.md's sh blocks"
    );
    let ci = std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run reads");
    let commands: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        commands.last(),
        Some(&"exec e2e/run"),
        ".ci/run must end by running the README's test command"
    );
}
