//! A YAML tree that remembers the line of every node.
//!
//! Spec validation reports `path:line: field: ...` for every problem in a file, which serde
//! cannot do (it stops at the first error and forgets positions). This module turns yaml-rust2's
//! marked events into a small tree; `reader.rs` walks it. It knows nothing about canaries.
//!
//! Aliases are expanded while building, bounded by [`MAX_NODES`] so a "billion laughs" document
//! is an error, not an out-of-memory.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Upper bound on nodes per file, counting every alias expansion.
pub const MAX_NODES: usize = 100_000;

/// One YAML node with the 1-based line it starts on; a mapping or list that is the value of a
/// key has the key's line, so errors about the field and "required field is missing" inside it
/// name the line of the key.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub line: usize,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    /// A scalar's text; `quoted` is true for quoted or block scalars (always strings).
    Scalar {
        text: String,
        quoted: bool,
    },
    Seq(Vec<Node>),
    /// Keys in document order; keys are the text of scalar keys.
    Map(Vec<(Key, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub text: String,
    pub line: usize,
}

/// A document of a multi-document file: its root and the line of its first node.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub root: Node,
}

/// A syntax or structure error with the line it was found on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl Node {
    pub fn kind(&self) -> &'static str {
        match &self.value {
            Value::Null => "null",
            Value::Scalar { .. } => "a scalar",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| k.text == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The line of `key` in this mapping, when it is set (not `null`): where an error about
    /// the field belongs (its first child's line is one too low for a mapping-valued field).
    pub fn key_line(&self, key: &str) -> Option<usize> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, v)| k.text == key && v.value != Value::Null)
                .map(|(k, _)| k.line),
            _ => None,
        }
    }

    /// The scalar text of this node, if it is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Converts to JSON (plain scalars become numbers/booleans/null as YAML 1.2 core says).
    pub fn to_json(&self) -> serde_json::Value {
        match &self.value {
            Value::Null => serde_json::Value::Null,
            Value::Scalar { text, quoted: true } => serde_json::Value::String(text.clone()),
            Value::Scalar {
                text,
                quoted: false,
            } => plain_scalar_json(text),
            Value::Seq(items) => {
                serde_json::Value::Array(items.iter().map(Node::to_json).collect())
            }
            Value::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.text.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

fn plain_scalar_json(text: &str) -> serde_json::Value {
    match text {
        "true" | "True" | "TRUE" => return serde_json::Value::Bool(true),
        "false" | "False" | "FALSE" => return serde_json::Value::Bool(false),
        "~" | "null" | "Null" | "NULL" | "" => return serde_json::Value::Null,
        _ => {}
    }
    if let Ok(i) = text.parse::<i64>() {
        return serde_json::Value::from(i);
    }
    if let Ok(f) = text.parse::<f64>() {
        if f.is_finite() {
            return serde_json::Value::from(f);
        }
    }
    serde_json::Value::String(text.to_string())
}

/// Parses every document of `text`. A syntax error ends parsing (YAML cannot recover).
pub fn parse_documents(text: &str) -> Result<Vec<Document>, ParseError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    let result = parser.load(&mut builder, true);
    finish(builder, result)
}

fn finish(
    mut builder: Builder,
    result: Result<(), yaml_rust2::ScanError>,
) -> Result<Vec<Document>, ParseError> {
    if let Some(err) = builder.error.take() {
        return Err(err);
    }
    if let Err(e) = result {
        return Err(ParseError {
            line: e.marker().line(),
            message: e.info().to_string(),
        });
    }
    Ok(builder.documents)
}

enum Frame {
    Seq {
        line: usize,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        line: usize,
        anchor: usize,
        entries: Vec<(Key, Node)>,
        pending_key: Option<Key>,
    },
}

#[derive(Default)]
struct Builder {
    documents: Vec<Document>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    error: Option<ParseError>,
}

impl Builder {
    fn fail(&mut self, line: usize, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(ParseError {
                line,
                message: message.into(),
            });
        }
    }

    fn count(&mut self, n: usize, line: usize) -> bool {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            self.fail(
                line,
                format!("document expands to more than {MAX_NODES} nodes (anchors and aliases are bounded)"),
            );
            return false;
        }
        true
    }

    fn push_node(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.documents.push(Document { root: node }),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries,
                pending_key,
                ..
            }) => match pending_key.take() {
                // A mapping or list under a key starts on its first child's line; an error
                // about the field belongs on the key's own line.
                Some(key) => {
                    let mut node = node;
                    if matches!(node.value, Value::Map(_) | Value::Seq(_)) {
                        node.line = node.line.min(key.line);
                    }
                    entries.push((key, node));
                }
                None => {
                    let line = node.line;
                    match node.value {
                        Value::Scalar { text, .. } => *pending_key = Some(Key { text, line }),
                        Value::Null => {
                            *pending_key = Some(Key {
                                text: String::new(),
                                line,
                            })
                        }
                        _ => self.fail(line, "mapping keys must be plain strings"),
                    }
                }
            },
        }
    }
}

fn node_size(node: &Node) -> usize {
    match &node.value {
        Value::Null | Value::Scalar { .. } => 1,
        Value::Seq(items) => 1 + items.iter().map(node_size).sum::<usize>(),
        Value::Map(entries) => 1 + entries.iter().map(|(_, v)| 1 + node_size(v)).sum::<usize>(),
    }
}

fn is_null_scalar(text: &str, style: TScalarStyle, tag: &Option<Tag>) -> bool {
    style == TScalarStyle::Plain
        && tag.is_none()
        && matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        let line = mark.line();
        match ev {
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
            Event::DocumentStart => {
                self.anchors.clear();
            }
            Event::Alias(id) => {
                let Some(node) = self.anchors.get(&id).cloned() else {
                    self.fail(line, "alias refers to an unknown anchor");
                    return;
                };
                if self.count(node_size(&node), line) {
                    self.push_node(node);
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                if !self.count(1, line) {
                    return;
                }
                let value = if is_null_scalar(&text, style, &tag) {
                    Value::Null
                } else {
                    let quoted = style != TScalarStyle::Plain
                        || tag.as_ref().is_some_and(|t| t.suffix == "str");
                    Value::Scalar { text, quoted }
                };
                let node = Node { line, value };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push_node(node);
            }
            Event::SequenceStart(anchor, _) => {
                if self.count(1, line) {
                    self.stack.push(Frame::Seq {
                        line,
                        anchor,
                        items: Vec::new(),
                    });
                }
            }
            Event::MappingStart(anchor, _) => {
                if self.count(1, line) {
                    self.stack.push(Frame::Map {
                        line,
                        anchor,
                        entries: Vec::new(),
                        pending_key: None,
                    });
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq {
                        line,
                        anchor,
                        items,
                    }) => (
                        Node {
                            line,
                            value: Value::Seq(items),
                        },
                        anchor,
                    ),
                    Some(Frame::Map {
                        line,
                        anchor,
                        entries,
                        ..
                    }) => (
                        Node {
                            line,
                            value: Value::Map(entries),
                        },
                        anchor,
                    ),
                    None => {
                        self.fail(line, "unbalanced YAML structure");
                        return;
                    }
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push_node(node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based_and_per_node() {
        let docs = parse_documents("a: 1\nb:\n  c: x\n").unwrap();
        let root = &docs[0].root;
        assert_eq!(root.get("a").unwrap().line, 1);
        assert_eq!(root.get("b").unwrap().get("c").unwrap().line, 3);
    }

    #[test]
    fn mapping_and_list_values_take_their_keys_line() {
        let docs = parse_documents("a:\n  b:\n    c: x\n  l:\n  - 1\n  f: {d: 1}\n").unwrap();
        let a = docs[0].root.get("a").unwrap();
        assert_eq!(a.line, 1, "a mapping value is on its key's line");
        assert_eq!(a.get("b").unwrap().line, 2);
        assert_eq!(
            a.get("l").unwrap().line,
            4,
            "a list value is on its key's line"
        );
        assert_eq!(a.get("l").unwrap().line, a.key_line("l").unwrap());
        assert_eq!(a.get("f").unwrap().line, 6);
    }

    #[test]
    fn multi_document_files_yield_each_document() {
        let docs = parse_documents("a: 1\n---\nb: 2\n---\n").unwrap();
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[1].root.get("b").unwrap().line, 3);
    }

    #[test]
    fn quoted_scalars_stay_strings_in_json() {
        let docs = parse_documents("a: '1'\nb: 1\nc: true\n").unwrap();
        let json = docs[0].root.to_json();
        assert_eq!(json["a"], serde_json::json!("1"));
        assert_eq!(json["b"], serde_json::json!(1));
        assert_eq!(json["c"], serde_json::json!(true));
    }

    #[test]
    fn alias_bomb_is_an_error_not_an_allocation() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = parse_documents(&text).unwrap_err();
        assert!(err.message.contains("more than"), "{err:?}");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let err = parse_documents("a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert!(err.line >= 2, "{err:?}");
    }
}
