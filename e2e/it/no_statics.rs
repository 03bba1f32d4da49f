//! No process-global mutable state: state the loop keeps between ticks (a commit's files parsed
//! by blob id, drift's verdicts, folders read from git) belongs to the runtime of one repo or to
//! the clone it describes, never to a `static`, so two repos (or two shards) in one process
//! share nothing. Checked on the source text of every `.rs` file under `src/` (all crates): a
//! `static` whose type can change after start (a lock, a once-cell, a lazy value, an atomic, a
//! cell), a `static mut`, or a `thread_local!` fails unless [`ALLOWED`] names it with why.

use std::path::Path;

/// The statics that may hold process-wide state, by file and name, and why.
const ALLOWED: &[(&str, &str, &str)] = &[
    // libgit2's options are process-wide in libgit2 itself: these record the values set once,
    // so that a second call does not write the C globals while sockets read them.
    (
        "src/crates/libgit2_opts/lib.rs",
        "APPLIED",
        "libgit2's socket timeouts are process-global in libgit2",
    ),
    (
        "src/crates/libgit2_opts/lib.rs",
        "CACHE_LIMIT",
        "libgit2's object cache limit is process-global in libgit2",
    ),
    // Built once from templates compiled into the binary: the same value for every runtime.
    (
        "src/dashboard/pages.rs",
        "ENV",
        "the dashboard's template environment is a constant built on first use",
    ),
    // The log sink (stderr, through tracing's one global subscriber) is the process's, so the
    // values it scrubs are too: a credential any runtime read is kept out of every log line,
    // and the set only grows. It caches nothing a runtime reads back.
    (
        "src/redact.rs",
        "KNOWN",
        "the credentials the process-wide log writer scrubs",
    ),
];

/// Type names whose value can change after start.
const MUTABLE: &[&str] = &[
    "Mutex",
    "RwLock",
    "OnceLock",
    "OnceCell",
    "LazyLock",
    "LazyCell",
    "Lazy",
    "Cell",
    "RefCell",
    "UnsafeCell",
    "Atomic",
];

/// `line` without a `//` comment.
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(i) if !line[..i].contains('"') => &line[..i],
        _ => line,
    }
}

/// The process-wide state `text` declares: (line number, name, declaration) of every `static`
/// of a type that can change, every `static mut`, and every `thread_local!`.
fn mutable_statics(text: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = text.lines().map(code).collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("thread_local!") {
            found.push((i + 1, "thread_local!".to_string(), line.trim().to_string()));
            continue;
        }
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        let Some(at) = words.iter().position(|w| *w == "static") else {
            continue;
        };
        // `'static` is a lifetime, not a declaration.
        let before = line.find("static").map(|s| &line[..s]).unwrap_or_default();
        if before.ends_with('\'') || before.trim_end().ends_with('&') || before.contains('<') {
            continue;
        }
        // The declaration up to its `=` or `;`, over as many lines as it takes.
        let mut declaration = String::new();
        for next in &lines[i..] {
            declaration.push_str(next.trim());
            declaration.push(' ');
            if next.contains('=') || next.contains(';') {
                break;
            }
        }
        let head = declaration
            .split(['=', ';'])
            .next()
            .unwrap_or_default()
            .to_string();
        let mutable = words.get(at + 1) == Some(&"mut")
            || head
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|w| {
                    MUTABLE
                        .iter()
                        .any(|m| w == *m || (*m == "Atomic" && w.starts_with(m)))
                });
        if !mutable {
            continue;
        }
        let name = words
            .get(at + 1..)
            .into_iter()
            .flatten()
            .find(|w| **w != "mut")
            .map_or_else(String::new, |w| w.to_string());
        found.push((i + 1, name, head.trim().to_string()));
    }
    found
}

#[test]
fn no_process_global_mutable_state_outside_the_allow_list() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    crate::support::source_files(&root.join("src"), &[], &mut files);
    assert!(files.len() > 100, "found the sources: {}", files.len());
    let mut unexpected = Vec::new();
    let mut seen = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .expect("under the manifest dir")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(file).expect("a source file is readable");
        for (line, name, declaration) in mutable_statics(&text) {
            if ALLOWED.iter().any(|(f, n, _)| *f == rel && *n == name) {
                seen.push((rel.clone(), name));
            } else {
                unexpected.push(format!("{rel}:{line}: {declaration}"));
            }
        }
    }
    assert!(
        unexpected.is_empty(),
        "process-global mutable state (move it into the runtime, `sluice::runtime::Runtime`, or \
         the repo object it belongs to; or, if it is process-wide by nature, name it in ALLOWED \
         with why):\n{}",
        unexpected.join("\n")
    );
    // Every allowed entry still exists: a stale one would allow its name back silently.
    for (file, name, _) in ALLOWED {
        assert!(
            seen.iter().any(|(f, n)| f == file && n == name),
            "ALLOWED names {file} {name}, which no longer exists: remove it"
        );
    }
}

/// The scan finds what it must and passes over what it must: a lock, a once-cell, a lazy value,
/// an atomic, a `static mut`, a `thread_local!`, a declaration over two lines; not a constant,
/// a `'static` lifetime, or a comment.
#[test]
fn the_scan_finds_every_kind_of_mutable_static() {
    let text = "\
static A: Mutex<u8> = Mutex::new(0);
pub(crate) static B: std::sync::OnceLock<String> = OnceLock::new();
    static C: LazyLock<Mutex<Kept>> = LazyLock::new(Mutex::default);
static D: AtomicUsize = AtomicUsize::new(0);
static mut E: u8 = 0;
thread_local! { static F: u8 = 0; }
static G:
    RwLock<Vec<u8>> = RwLock::new(Vec::new());
static H: &str = \"constant\";
static I: Snapshot = Snapshot::EMPTY;
fn f() -> &'static Result<Environment<'static>, String> { todo() }
// static J: Mutex<u8> = Mutex::new(0);
";
    let found: Vec<(usize, String)> = mutable_statics(text)
        .into_iter()
        .map(|(line, name, _)| (line, name))
        .collect();
    let expected = [
        (1, "A"),
        (2, "B"),
        (3, "C"),
        (4, "D"),
        (5, "E"),
        (6, "thread_local!"),
        (7, "G"),
    ]
    .map(|(line, name)| (line, name.to_string()));
    assert_eq!(found, expected);
}
