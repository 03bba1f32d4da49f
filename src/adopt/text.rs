//! Line-level edits of the user's YAML files, so a moved file keeps its comments and layout:
//! split a file into its documents, set a scalar on a known line, insert a line, drop a list
//! item's line. Pure text; the callers find the lines in the parsed tree.

use crate::yaml::node::parse_documents;

/// One document of a multi-document file: its text, the `---` line that opens it included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The 1-based line of the file it starts on.
    pub start: usize,
    pub text: String,
}

impl Segment {
    /// The `(kind, name)` of the object the document holds, when it holds one.
    pub fn object(&self) -> Option<(String, String)> {
        let docs = parse_documents(&self.text).ok()?;
        let root = &docs.first()?.root;
        let kind = root.get("kind")?.as_str()?.to_string();
        let name = root.get("metadata")?.get("name")?.as_str()?.to_string();
        Some((kind, name))
    }
}

/// Whether `line` separates documents (`---`, maybe with a comment after it).
fn is_separator(line: &str) -> bool {
    line.strip_prefix("---")
        .is_some_and(|rest| rest.trim().is_empty() || rest.trim_start().starts_with('#'))
}

/// `text` cut at each `---` line; the pieces joined give `text` back.
pub fn segments(text: &str) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    let mut current = Segment {
        start: 1,
        text: String::new(),
    };
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if is_separator(line.trim_end_matches(['\n', '\r'])) && !current.text.is_empty() {
            out.push(std::mem::replace(
                &mut current,
                Segment {
                    start: i + 1,
                    text: String::new(),
                },
            ));
        }
        current.text.push_str(line);
    }
    if !current.text.is_empty() {
        out.push(current);
    }
    out
}

/// Joins documents taken from different places into one file's text.
pub fn join(parts: &[&Segment]) -> String {
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        let body = part.text.as_str();
        let starts_with_separator = body
            .lines()
            .next()
            .is_some_and(|l| is_separator(l.trim_end()));
        if i > 0 && !starts_with_separator {
            out.push_str("---\n");
        }
        if i == 0 && starts_with_separator {
            // The first document needs no separator; keep what follows it.
            out.push_str(body.split_once('\n').map_or("", |(_, rest)| rest));
        } else {
            out.push_str(body);
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// One change to a file's lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// The scalar value of `key` on this 1-based line becomes `value`.
    SetValue {
        line: usize,
        key: String,
        value: String,
    },
    /// A new line after this 1-based line.
    InsertAfter { line: usize, text: String },
    /// This 1-based line goes.
    Delete { line: usize },
}

impl Edit {
    fn line(&self) -> usize {
        match self {
            Edit::SetValue { line, .. }
            | Edit::InsertAfter { line, .. }
            | Edit::Delete { line } => *line,
        }
    }
}

/// `text` with `edits` applied (each names a line of the original text). `None` when an edit
/// does not fit the line it names (the file is not laid out as parsed: refuse, never guess).
pub fn apply(text: &str, edits: &[Edit]) -> Option<String> {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    let mut ordered: Vec<&Edit> = edits.iter().collect();
    // Bottom up, so the line numbers of the edits still to do stay right.
    ordered.sort_by_key(|e| std::cmp::Reverse(e.line()));
    for edit in ordered {
        let at = edit.line().checked_sub(1)?;
        match edit {
            Edit::SetValue { key, value, .. } => {
                let line = lines.get_mut(at)?;
                let pos = line.find(&format!("{key}:"))?;
                let newline = if line.ends_with('\n') { "\n" } else { "" };
                *line = format!("{}{key}: {value}{newline}", &line[..pos]);
            }
            Edit::InsertAfter { text, .. } => {
                if at >= lines.len() {
                    return None;
                }
                if !lines[at].ends_with('\n') {
                    lines[at].push('\n');
                }
                lines.insert(at + 1, format!("{text}\n"));
            }
            Edit::Delete { .. } => {
                if at >= lines.len() {
                    return None;
                }
                lines.remove(at);
            }
        }
    }
    Some(lines.concat())
}

/// The indentation of the 1-based line `line` of `text`.
pub fn indent_of(text: &str, line: usize) -> String {
    text.lines()
        .nth(line.saturating_sub(1))
        .map(|l| l.chars().take_while(|c| *c == ' ').collect())
        .unwrap_or_default()
}

/// A YAML scalar for `value`: plain when it reads back as the same string, else quoted.
pub fn scalar(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._/:@=".contains(c))
        && !value.contains(": ")
        && value.parse::<f64>().is_err()
        && !["true", "false", "null", "yes", "no", "on", "off", "~"].contains(&value);
    if plain {
        value.to_string()
    } else {
        format!("{value:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_join_back_to_the_file() {
        let text = "# head\na: 1\n---\nb: 2\n--- # two\nc: 3\n";
        let s = segments(text);
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].start, 3);
        assert_eq!(s.iter().map(|s| s.text.as_str()).collect::<String>(), text);
        assert_eq!(join(&[&s[2], &s[0]]), "c: 3\n---\n# head\na: 1\n");
    }

    #[test]
    fn edits_apply_bottom_up_and_refuse_lines_that_do_not_fit() {
        let text = "metadata:\n  name: a\nspec:\n  image: x:1 # pinned\n";
        let edits = [
            Edit::SetValue {
                line: 4,
                key: "image".into(),
                value: "x:2".into(),
            },
            Edit::InsertAfter {
                line: 2,
                text: "  namespace: prod".into(),
            },
        ];
        assert_eq!(
            apply(text, &edits).unwrap(),
            "metadata:\n  name: a\n  namespace: prod\nspec:\n  image: x:2\n"
        );
        let wrong = Edit::SetValue {
            line: 1,
            key: "image".into(),
            value: "y".into(),
        };
        assert_eq!(apply(text, &[wrong]), None);
        assert_eq!(scalar("ghcr.io/a/b:6.1.0"), "ghcr.io/a/b:6.1.0");
        assert_eq!(scalar("1.5"), "\"1.5\"");
        assert_eq!(scalar("true"), "\"true\"");
        assert_eq!(scalar("Prune=false"), "Prune=false");
    }
}
