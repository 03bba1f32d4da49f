//! Structure-aware mutations of real YAML inputs.
//!
//! A case is a seed (a real canary, settings file or MetricTemplate) plus a short list of
//! [`Mutation`]s applied line by line: delete, duplicate, swap, splice a line from another
//! seed, replace a value with an awkward one (huge numbers, `.nan`, tags, anchors, alias
//! bombs, deep nesting, control characters), replace a key with one a seed uses elsewhere,
//! re-indent, insert or delete raw text. Most results stay close enough to valid YAML that the
//! readers past the YAML parser see them. Indices are taken modulo the text's size when
//! applied, so proptest shrinks a failing case to few, small mutations.

use proptest::prelude::*;

/// Values a mutation puts where a scalar was: the edges of every reader (`int`, `float`,
/// `duration`, names, paths, URLs) and YAML's own corners (tags, anchors, block scalars).
pub const VALUES: &[&str] = &[
    "0",
    "-1",
    "1",
    "100",
    "101",
    "255",
    "65535",
    "65536",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1e309",
    "-1e309",
    "1e-400",
    ".inf",
    "-.inf",
    ".nan",
    "NaN",
    "+Inf",
    "0.5",
    "99.999",
    "1.5e3",
    "0x1F",
    "0o17",
    "0b101",
    "~",
    "null",
    "",
    "\"\"",
    "''",
    "[]",
    "{}",
    "[a, b]",
    "{a: 1}",
    "[[[]]]",
    "true",
    "yes",
    "on",
    "no",
    "1s",
    "0s",
    "-1s",
    "1m30s",
    "1h",
    "24000h",
    "9999999999999h",
    "2562047h47m16.854775807s",
    "P1D",
    "PT1M",
    "1ms",
    "1ns",
    "1.5m",
    "1x",
    "abc",
    "\"a\\u0000b\"",
    "\"\\t\\r\\n\"",
    "\"a\\r\\nb\"",
    "é",
    "\u{1F680}",
    "\u{202E}",
    "a/b",
    "../x",
    "../../etc",
    "/abs",
    ".git/hooks",
    ".git",
    "a\\b",
    "a//b",
    "./a",
    "{namespace}/{name}",
    "{name}",
    "{namespace}",
    "{other}",
    "&a x",
    "*a",
    "*undefined",
    "&a [*a]",
    "!!binary aGVsbG8=",
    "!!int 3",
    "!!str 3",
    "!!float x",
    "!!map {}",
    "!custom x",
    "|\n  block\n",
    ">-\n  folded",
    "|-",
    "? complex",
    "[? a : b]",
    "{? [a] : b}",
    "\"sha256=\"",
    "http://",
    "https://prometheus:9090",
    "http://[::1]:9090",
    "http://user:pass@host/",
    "://",
    "localhost:99999",
    "file:///etc/passwd",
    "ftp://x",
    "<>",
    "a <b@c>",
    "'%'",
    "\"{{ x }}\"",
    "\"{{\"",
    "sum(rate(x[1m]))",
    "\"rate(\"",
    "primary",
    "canary",
    "podinfo-primary",
    "-primary",
    "A",
    "UPPER",
    "a_b",
    "kube-system",
    "sluice.dev/v1alpha1",
    "flagger.app/v1beta1",
    "flagger.app/v1",
    "Canary",
    "MetricTemplate",
    "Config",
];

/// How deep a [`Mutation::Nest`] goes at most (the node limit of `yaml::node` is 100,000).
pub const MAX_NEST: u32 = 150_000;
/// How long a [`Mutation::LongValue`] gets at most.
pub const MAX_LONG: u32 = 300_000;

/// One edit of a seed's text. `usize` fields are positions taken modulo the text's size.
#[derive(Debug, Clone)]
pub enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    /// Copies line `line` of seed `seed` (of every seed the target knows) before line `at`.
    SpliceLine {
        seed: usize,
        line: usize,
        at: usize,
    },
    /// Replaces the value of line `line` with [`VALUES`]`[value]`.
    SetValue {
        line: usize,
        value: usize,
    },
    /// Replaces the key of line `line` with a key another seed uses.
    SetKey {
        line: usize,
        key: usize,
    },
    Reindent {
        line: usize,
        spaces: u8,
    },
    InsertText {
        at: usize,
        text: String,
    },
    DeleteRange {
        at: usize,
        len: u8,
    },
    Truncate(usize),
    /// Appends `---` and another seed: multi-document files.
    AppendDocument {
        seed: usize,
    },
    /// A value `len` characters long.
    LongValue {
        line: usize,
        len: u32,
    },
    /// A value nested `depth` levels deep, in flow lists or flow maps.
    Nest {
        line: usize,
        depth: u32,
        map: bool,
    },
    /// A "billion laughs" value: `levels` anchors, each aliasing the previous one `fan` times.
    AliasBomb {
        line: usize,
        levels: u8,
        fan: u8,
    },
}

/// Raw text a mutation inserts: YAML's indicators, control characters, and any character.
const SPECIALS: &[&str] = &[
    "\t",
    "\r",
    "\r\n",
    "\0",
    "\u{feff}",
    "\u{85}",
    "\u{2028}",
    ":",
    ": ",
    "- ",
    "#",
    "&",
    "*",
    "!",
    "|",
    ">",
    "'",
    "\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    "---\n",
    "...\n",
    "%YAML 1.2\n",
    "%TAG ! tag:x,2000:\n",
    "? ",
    "@",
    "`",
    "\\",
    "\n  ",
    "\n- ",
];

fn insert_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(SPECIALS).prop_map(str::to_string),
        2 => "[ -~]{1,12}",
        1 => any::<char>().prop_map(String::from),
        1 => "\\PC{1,6}",
    ]
}

/// One mutation, with the cheap line edits most likely.
pub fn mutation() -> impl Strategy<Value = Mutation> {
    let i = any::<usize>;
    prop_oneof![
        4 => i().prop_map(Mutation::DeleteLine),
        2 => i().prop_map(Mutation::DuplicateLine),
        2 => (i(), i()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        4 => (i(), i(), i()).prop_map(|(seed, line, at)| Mutation::SpliceLine { seed, line, at }),
        8 => (i(), 0..VALUES.len()).prop_map(|(line, value)| Mutation::SetValue { line, value }),
        4 => (i(), i()).prop_map(|(line, key)| Mutation::SetKey { line, key }),
        2 => (i(), 0u8..12).prop_map(|(line, spaces)| Mutation::Reindent { line, spaces }),
        4 => (i(), insert_text()).prop_map(|(at, text)| Mutation::InsertText { at, text }),
        2 => (i(), 1u8..40).prop_map(|(at, len)| Mutation::DeleteRange { at, len }),
        1 => i().prop_map(Mutation::Truncate),
        1 => i().prop_map(|seed| Mutation::AppendDocument { seed }),
        1 => (i(), prop_oneof![0u32..300, Just(253), Just(254), Just(MAX_LONG)])
            .prop_map(|(line, len)| Mutation::LongValue { line, len }),
        1 => (i(), prop_oneof![1u32..64, Just(10_000), Just(MAX_NEST)], any::<bool>())
            .prop_map(|(line, depth, map)| Mutation::Nest { line, depth, map }),
        1 => (i(), 1u8..10, 1u8..12)
            .prop_map(|(line, levels, fan)| Mutation::AliasBomb { line, levels, fan }),
    ]
}

/// A short list of mutations (most bugs need one or two).
pub fn mutations(max: usize) -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 0..=max)
}

/// What mutations draw from: every seed of the target (for splices and appended documents)
/// and every key those seeds use.
pub struct Dict {
    pub seeds: Vec<String>,
    pub keys: Vec<String>,
}

impl Dict {
    pub fn new(seeds: Vec<String>) -> Dict {
        let mut keys: Vec<String> = seeds
            .iter()
            .flat_map(|s| s.lines())
            .filter_map(|l| {
                let t = l.trim_start().trim_start_matches("- ");
                let (k, _) = t.split_once(':')?;
                (!k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c)))
                .then(|| k.to_string())
            })
            .collect();
        keys.sort();
        keys.dedup();
        if keys.is_empty() {
            keys.push("key".into());
        }
        Dict { seeds, keys }
    }
}

fn indent_of(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '-']).len()]
}

/// `line` with its value replaced by `value` (the whole line after its indentation when it
/// has no key).
fn set_value(line: &str, value: &str) -> String {
    if let Some(colon) = line.find(": ") {
        format!("{} {value}", &line[..=colon])
    } else if let Some(key) = line.strip_suffix(':') {
        format!("{key}: {value}")
    } else {
        format!("{}{value}", indent_of(line))
    }
}

fn char_boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn alias_bomb(levels: u8, fan: u8) -> String {
    let mut out = String::from("[&l0 [lol");
    for _ in 1..fan {
        out.push_str(", lol");
    }
    out.push(']');
    for level in 1..levels {
        out.push_str(&format!(", &l{level} ["));
        let alias = format!("*l{}", level - 1);
        out.push_str(&vec![alias; usize::from(fan)].join(", "));
        out.push(']');
    }
    out.push(']');
    out
}

/// Applies `mutations` to `base` in order.
pub fn apply(base: &str, mutations: &[Mutation], dict: &Dict) -> String {
    let mut lines: Vec<String> = base.split('\n').map(str::to_string).collect();
    for m in mutations {
        let n = lines.len().max(1);
        if lines.is_empty() {
            lines.push(String::new());
        }
        match m {
            Mutation::DeleteLine(l) => {
                lines.remove(l % n);
            }
            Mutation::DuplicateLine(l) => {
                let line = lines[l % n].clone();
                lines.insert(l % n, line);
            }
            Mutation::SwapLines(a, b) => lines.swap(a % n, b % n),
            Mutation::SpliceLine { seed, line, at } => {
                let from = &dict.seeds[seed % dict.seeds.len()];
                let from: Vec<&str> = from.split('\n').collect();
                let copied = from[line % from.len()].to_string();
                lines.insert(at % (n + 1), copied);
            }
            Mutation::SetValue { line, value } => {
                let l = &mut lines[line % n];
                *l = set_value(l, VALUES[value % VALUES.len()]);
            }
            Mutation::SetKey { line, key } => {
                let l = &mut lines[line % n];
                let indent = indent_of(l).to_string();
                let rest = l[indent.len()..].to_string();
                let value = rest.split_once(':').map_or("", |(_, v)| v);
                *l = format!("{indent}{}:{value}", dict.keys[key % dict.keys.len()]);
            }
            Mutation::Reindent { line, spaces } => {
                let l = &mut lines[line % n];
                *l = format!("{}{}", " ".repeat(usize::from(*spaces)), l.trim_start());
            }
            Mutation::LongValue { line, len } => {
                let l = &mut lines[line % n];
                *l = set_value(l, &"a".repeat(*len as usize));
            }
            Mutation::Nest { line, depth, map } => {
                let d = *depth as usize;
                let value = if *map {
                    format!("{}x{}", "{a: ".repeat(d), "}".repeat(d))
                } else {
                    format!("{}{}", "[".repeat(d), "]".repeat(d))
                };
                let l = &mut lines[line % n];
                *l = set_value(l, &value);
            }
            Mutation::AliasBomb { line, levels, fan } => {
                let l = &mut lines[line % n];
                *l = set_value(l, &alias_bomb(*levels, *fan));
            }
            Mutation::InsertText { .. }
            | Mutation::DeleteRange { .. }
            | Mutation::Truncate(_)
            | Mutation::AppendDocument { .. } => {
                let mut text = lines.join("\n");
                match m {
                    Mutation::InsertText { at, text: t } => {
                        let at = char_boundary(&text, *at);
                        text.insert_str(at, t);
                    }
                    Mutation::DeleteRange { at, len } => {
                        let start = char_boundary(&text, *at);
                        let end = char_boundary(&text, start + usize::from(*len)).max(start);
                        text.replace_range(start..end, "");
                    }
                    Mutation::Truncate(at) => {
                        let at = char_boundary(&text, *at);
                        text.truncate(at);
                    }
                    Mutation::AppendDocument { seed } => {
                        text.push_str("\n---\n");
                        text.push_str(&dict.seeds[seed % dict.seeds.len()]);
                    }
                    _ => unreachable!("matched above"),
                }
                lines = text.split('\n').map(str::to_string).collect();
            }
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict() -> Dict {
        Dict::new(vec!["a: 1\nb:\n  c: x\n".into(), "- d: 2\n".into()])
    }

    #[test]
    fn set_value_keeps_the_key_and_indentation() {
        assert_eq!(set_value("  port: 80", "~"), "  port: ~");
        assert_eq!(set_value("  spec:", "[]"), "  spec: []");
        assert_eq!(set_value("    - item", "x"), "    - x");
    }

    #[test]
    fn mutations_edit_lines_and_text() {
        let d = dict();
        let base = "a: 1\nb:\n  c: x";
        assert_eq!(apply(base, &[Mutation::DeleteLine(1)], &d), "a: 1\n  c: x");
        assert_eq!(
            apply(base, &[Mutation::SetValue { line: 2, value: 0 }], &d),
            "a: 1\nb:\n  c: 0"
        );
        assert_eq!(
            apply(base, &[Mutation::SetKey { line: 0, key: 3 }], &d),
            "d: 1\nb:\n  c: x"
        );
        assert_eq!(apply(base, &[Mutation::Truncate(3)], &d), "a: ");
        assert_eq!(
            apply(
                base,
                &[Mutation::Nest {
                    line: 0,
                    depth: 2,
                    map: false
                }],
                &d
            ),
            "a: [[]]\nb:\n  c: x"
        );
        assert_eq!(
            apply(
                "a: 1",
                &[Mutation::AliasBomb {
                    line: 0,
                    levels: 2,
                    fan: 2
                }],
                &d
            ),
            "a: [&l0 [lol, lol], &l1 [*l0, *l0]]"
        );
    }
}
