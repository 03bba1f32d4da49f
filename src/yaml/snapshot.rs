//! One read of the config repo per tick: a single walk, and one read and one YAML parse of each
//! file, indexed by kind and name.
//!
//! Spec loading (`manifest::load`), MetricTemplate lookup (`metrics::metric_templates`) and source
//! and config lookups (`workload::source`) all read a [`Snapshot`] instead of the disk, so a tick
//! sees one consistent repo and pays for each file once. Every file is read through the one
//! function handed to [`Snapshot::read_with`] ([`read_bounded`] by default), so a test can count
//! the reads. This module knows files, YAML and each object's kind and name; it does not
//! interpret documents.
//!
//! The walk keeps the rules of the three walks it replaced: files ending in `.yaml` or `.yml`
//! (a file named as a root is read whatever its name), sorted by path; folders whose name
//! starts with `.` (`.git`, `.sluice`, any hidden folder) skipped; symbolic links below a root
//! not followed (a linked `.yaml` file is reported unreadable, a linked folder not entered); files over [`MAX_FILE_BYTES`] or not UTF-8 reported, not parsed. Files read
//! outside the walk (settings, status files, a primary in a hidden output folder) go through
//! [`read_inside`], which refuses a symbolic link anywhere from the repo root to the file. sluice's own
//! output folders are read like any folder (spec loading reports problems in them); workload
//! lookups leave them out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use yaml_rust2::{Yaml, YamlLoader};

use crate::yaml::node::{parse_documents, Node, ParseError, Value};

/// Largest file read (a config repo's YAML is small; this bounds memory on bad input).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Why a file's text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read: {0}")]
    Io(String),
    #[error("file is {bytes} bytes; spec files are limited to {MAX_FILE_BYTES} bytes")]
    TooLarge { bytes: u64 },
    #[error("expected UTF-8 text")]
    NotUtf8,
    /// The file is a symbolic link: a committed link can point anywhere on the host (a token
    /// file, `/dev/zero`), so sluice never follows one.
    #[error(
        "is a symbolic link; sluice reads only regular files inside the repo and does not follow links"
    )]
    Symlink,
    /// A folder on the way from the repo root (`link`, repo-relative) is a symbolic link.
    #[error(
        "goes through the symbolic link {link}; sluice reads only regular files inside the repo and does not follow links"
    )]
    SymlinkFolder { link: String },
    #[error("not a regular file (a device, a pipe or a folder)")]
    NotAFile,
}

/// Reads a file as UTF-8 text. Refuses a symbolic link (even one pointing inside the repo:
/// a reader must not depend on where a link leads), anything but a regular file, and files
/// over [`MAX_FILE_BYTES`]; the size is bounded while reading, not only by the size the file
/// system reports (a device reports 0 and never ends).
pub fn read_bounded(path: &Path) -> Result<String, ReadError> {
    use std::io::Read;
    let io = |e: std::io::Error| ReadError::Io(e.to_string());
    if std::fs::symlink_metadata(path).map_err(io)?.is_symlink() {
        return Err(ReadError::Symlink);
    }
    let file = std::fs::File::open(path).map_err(io)?;
    // The opened file's type, so a link swapped in after the check above is still refused.
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile);
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge { bytes: meta.len() });
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge {
            bytes: bytes.len() as u64,
        });
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8)
}

/// Refuses `path` when a folder between `root` (the repo's work tree) and it is a symbolic
/// link, or when it is not below `root` at all; the file itself is checked by the reader.
/// Paths that do not exist pass (the read that follows says so).
pub fn check_inside(root: &Path, path: &Path) -> Result<(), ReadError> {
    let Ok(relative) = path.strip_prefix(root) else {
        return Err(ReadError::Io(format!(
            "{} is outside the repo {}",
            path.display(),
            root.display()
        )));
    };
    let mut current = root.to_path_buf();
    let mut walked = Vec::new();
    let mut parts = relative.components().peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            break;
        }
        let std::path::Component::Normal(part) = part else {
            return Err(ReadError::Io(format!(
                "{} is not a plain path inside the repo",
                relative.display()
            )));
        };
        current.push(part);
        walked.push(part.to_string_lossy().into_owned());
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.is_symlink() => {
                return Err(ReadError::SymlinkFolder {
                    link: walked.join("/"),
                })
            }
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Reads `path`, a file of the repo whose work tree is `root`, with `read`, after
/// [`check_inside`]: the way to read a repo file the walk did not read (settings, status).
pub fn read_inside(
    root: &Path,
    path: &Path,
    read: impl FnOnce(&Path) -> Result<String, ReadError>,
) -> Result<String, ReadError> {
    check_inside(root, path)?;
    read(path)
}

/// What one walked file holds.
#[derive(Debug, Clone)]
pub enum Contents {
    /// The text could not be read; for a root that could not be walked, why.
    Unreadable(ReadError),
    /// The text is not YAML.
    Invalid { text: String, error: ParseError },
    /// Every document, as the line-marked tree spec readers walk, and as yaml-rust2's
    /// order-preserving tree (`Err` when yaml-rust2 rejects the text, e.g. a repeated key).
    /// The second is built from the text in memory the first time a copy needs it
    /// ([`File::yaml`]): most files (canary specs, outputs) never need it, and holding it for
    /// every file of a large repo for the whole tick costs more memory than parsing the few
    /// sources and references again.
    Yaml {
        text: String,
        documents: Vec<Node>,
        yaml: OnceLock<Result<Vec<Yaml>, ParseError>>,
    },
}

/// One file of the snapshot.
#[derive(Debug, Clone)]
pub struct File {
    /// How messages name it: repo-relative with `/` ([`Snapshot::read`]), or the walked path
    /// as given ([`Snapshot::read_paths`]).
    pub name: String,
    /// Shared with the files of other snapshots that have the same content: a daemon keeps
    /// what it parsed across ticks, keyed by blob id (`crate::commit_files`, `yaml::parses`).
    pub contents: Arc<Contents>,
}

impl File {
    /// A file named `name` from what reading it gave, parsed as the walk parses (for files
    /// read from somewhere else than a folder, e.g. git objects).
    pub fn from_read(name: String, read: Result<String, ReadError>) -> File {
        let contents = match read {
            Ok(text) => parse(text),
            Err(e) => Contents::Unreadable(e),
        };
        File {
            name,
            contents: contents.into(),
        }
    }

    /// The file's text, when it could be read.
    pub fn text(&self) -> Option<&str> {
        match &*self.contents {
            Contents::Unreadable(_) => None,
            Contents::Invalid { text, .. } | Contents::Yaml { text, .. } => Some(text),
        }
    }

    /// yaml-rust2's order-preserving tree of every document (`None` when the file is
    /// unreadable or not YAML), parsed on first use from the text already read.
    pub fn yaml(&self) -> Option<&Result<Vec<Yaml>, ParseError>> {
        match &*self.contents {
            Contents::Yaml { text, yaml, .. } => Some(yaml.get_or_init(|| {
                YamlLoader::load_from_str(text).map_err(|e| ParseError {
                    line: e.marker().line(),
                    message: e.to_string(),
                })
            })),
            Contents::Unreadable(_) | Contents::Invalid { .. } => None,
        }
    }

    /// The root node of every document (none when the file is unreadable or not YAML).
    pub fn documents(&self) -> &[Node] {
        match &*self.contents {
            Contents::Yaml { documents, .. } => documents,
            Contents::Unreadable(_) | Contents::Invalid { .. } => &[],
        }
    }
}

/// A Kubernetes object of the snapshot: a document whose `kind` and `metadata.name` are
/// strings (read as yaml-rust2 types them, so `name: 123` is a number, not a name).
#[derive(Debug, Clone, Copy)]
pub struct Object<'s> {
    /// The file's name (see [`File::name`]).
    pub file: &'s str,
    /// The line the document starts on.
    pub line: usize,
    pub api_version: Option<&'s str>,
    pub kind: &'s str,
    pub name: &'s str,
    /// `None` when the object does not set one; what it defaults to is the caller's rule.
    pub namespace: Option<&'s str>,
    /// The line-marked tree.
    pub node: &'s Node,
    /// The order-preserving tree, for copying.
    pub yaml: &'s Yaml,
}

/// Where an object is: its file's and document's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct At {
    file: usize,
    document: usize,
}

/// The walk's order: folder by folder, names sorted (so `a/z.yaml` walks before `a-b/c.yaml`).
pub fn walks_before(a: &str, b: &str) -> bool {
    a.split('/').lt(b.split('/'))
}

/// Every YAML file of a work tree (or of paths given on the command line), read once.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    files: Vec<File>,
    /// File names to positions in `files` (the first, when paths given twice overlap).
    by_name: BTreeMap<String, usize>,
    /// (kind, name) to every object with them, in file order.
    objects: BTreeMap<(String, String), Vec<At>>,
    /// What the lookups asked for while [`Snapshot::recording`] runs.
    lookups: Lookups,
}

/// One lookup a reader made in a snapshot: what a result read through it depends on, so a
/// loader that keeps results across snapshots (`manifest::load_incremental`) knows which to read
/// again when a file changes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lookup {
    /// [`Snapshot::find`] of this kind and name.
    Object(String, String),
    /// [`Snapshot::file`] of this name.
    File(String),
    /// A look over every file or object.
    Everything,
}

/// The lookups noted while recording (inside: `None` when not recording, nothing is noted).
/// Behind a pointer, so [`Snapshot::EMPTY`] (which has none, and records nothing) is a plain
/// constant.
#[derive(Debug)]
struct Lookups(Option<Arc<Mutex<Option<Vec<Lookup>>>>>);

impl Default for Lookups {
    fn default() -> Lookups {
        Lookups(Some(Arc::default()))
    }
}

impl Lookups {
    const NONE: Lookups = Lookups(None);

    fn note(&self, lookup: impl FnOnce() -> Lookup) {
        let Some(noted) = &self.0 else { return };
        if let Ok(mut noted) = noted.lock() {
            if let Some(noted) = noted.as_mut() {
                noted.push(lookup());
            }
        }
    }
}

impl Clone for Lookups {
    /// A copy records nothing: recording belongs to the one snapshot it was started on.
    fn clone(&self) -> Lookups {
        Lookups::default()
    }
}

impl Snapshot {
    /// A snapshot of nothing.
    pub const EMPTY: Snapshot = Snapshot {
        files: Vec::new(),
        by_name: BTreeMap::new(),
        objects: BTreeMap::new(),
        lookups: Lookups::NONE,
    };

    /// Reads a config repo's work tree; files are named repo-relative with `/`.
    pub fn read(work_tree: &Path) -> Snapshot {
        Snapshot::read_with(work_tree, read_bounded)
    }

    /// [`Snapshot::read`] with every file read by `read`, the snapshot's only file IO (tests
    /// count reads with it).
    pub fn read_with(
        work_tree: &Path,
        mut read: impl FnMut(&Path) -> Result<String, ReadError>,
    ) -> Snapshot {
        let mut snapshot = Snapshot::default();
        snapshot.add_root(
            work_tree,
            |p| {
                p.strip_prefix(work_tree)
                    .unwrap_or(p)
                    .to_string_lossy()
                    .replace('\\', "/")
            },
            &mut read,
        );
        snapshot
    }

    /// Reads files or folders named on the command line, in the order given; files are named
    /// as walked (`apps/podinfo/canary.yaml` for the folder `apps`).
    pub fn read_paths(paths: &[PathBuf]) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for root in paths {
            snapshot.add_root(root, |p| p.display().to_string(), &mut read_bounded);
        }
        snapshot
    }

    fn add_root(
        &mut self,
        root: &Path,
        name: impl Fn(&Path) -> String,
        read: &mut impl FnMut(&Path) -> Result<String, ReadError>,
    ) {
        match yaml_files(root) {
            Ok(paths) => {
                for path in paths {
                    let contents = match read(&path) {
                        Ok(text) => parse(text),
                        Err(e) => Contents::Unreadable(e),
                    };
                    self.push(File {
                        name: name(&path),
                        contents: Arc::new(contents),
                    });
                }
            }
            // As before the snapshot, a root that cannot be walked is one problem and none of
            // its files are read.
            Err(e) => self.push(File {
                name: name(root),
                contents: Arc::new(Contents::Unreadable(ReadError::Io(e.to_string()))),
            }),
        }
    }

    pub(super) fn push(&mut self, file: File) {
        let at = self.files.len();
        if let Contents::Yaml { documents, .. } = &*file.contents {
            for (document, node) in documents.iter().enumerate() {
                if let (Some(kind), Some(name)) = (
                    typed_string(node.get("kind")),
                    typed_string(node.get("metadata").and_then(|m| m.get("name"))),
                ) {
                    self.objects
                        .entry((kind.to_string(), name.to_string()))
                        .or_default()
                        .push(At { file: at, document });
                }
            }
        }
        self.by_name.entry(file.name.clone()).or_insert(at);
        self.files.push(file);
    }

    /// Puts `file` in place of the file of its name, or, when there is none, before the first
    /// file it walks before by `walks_before(a, b)` (at the end when none): a snapshot kept in
    /// step with a changing tree pays for the files that changed, not for the repo.
    pub fn put(&mut self, file: File, walks_before: impl Fn(&str, &str) -> bool) {
        if let Some(&at) = self.by_name.get(&file.name) {
            self.unindex(at);
            self.files[at] = file;
            self.index(at);
            return;
        }
        // The files are in walk order: the first one the new file walks before.
        let at = self
            .files
            .partition_point(|f| !walks_before(&file.name, &f.name));
        self.shift(at, 1);
        self.by_name.insert(file.name.clone(), at);
        self.files.insert(at, file);
        self.index(at);
    }

    /// Takes the file of this name out (`None` when there is none).
    pub fn remove(&mut self, name: &str) -> Option<File> {
        let at = self.by_name.remove(name)?;
        self.unindex(at);
        let file = self.files.remove(at);
        self.shift(at + 1, -1);
        Some(file)
    }

    /// Moves every position at or after `from` by `by` (a file went in or out before them).
    fn shift(&mut self, from: usize, by: isize) {
        let moved = |i: &mut usize| {
            if *i >= from {
                *i = i.saturating_add_signed(by);
            }
        };
        self.by_name.values_mut().for_each(moved);
        for ats in self.objects.values_mut() {
            ats.iter_mut().for_each(|a| moved(&mut a.file));
        }
    }

    /// The (kind, name) keys of the objects of the file at `at`, by document.
    fn keys(&self, at: usize) -> Vec<(usize, (String, String))> {
        object_keys(&self.files[at].contents)
    }

    fn unindex(&mut self, at: usize) {
        for (_, key) in self.keys(at) {
            if let Some(ats) = self.objects.get_mut(&key) {
                ats.retain(|a| a.file != at);
                if ats.is_empty() {
                    self.objects.remove(&key);
                }
            }
        }
    }

    /// Indexes the objects of the file at `at`, each list kept in file order.
    fn index(&mut self, at: usize) {
        for (document, key) in self.keys(at) {
            let ats = self.objects.entry(key).or_default();
            let new = At { file: at, document };
            let i = ats.partition_point(|a| (a.file, a.document) < (at, document));
            ats.insert(i, new);
        }
    }

    /// Runs `read` and returns what it gave with every lookup it made in this snapshot.
    pub fn recording<T>(&self, read: impl FnOnce() -> T) -> (T, Vec<Lookup>) {
        let Some(lookups) = &self.lookups.0 else {
            // Nothing can be noted: the result depends on anything.
            return (read(), vec![Lookup::Everything]);
        };
        if let Ok(mut noted) = lookups.lock() {
            *noted = Some(Vec::new());
        }
        let out = read();
        let noted = match lookups.lock() {
            Ok(mut noted) => noted.take(),
            Err(_) => None,
        };
        // A lock that failed noted nothing: the result depends on anything.
        (out, noted.unwrap_or_else(|| vec![Lookup::Everything]))
    }

    /// Every file, in walk order.
    pub fn files(&self) -> &[File] {
        self.lookups.note(|| Lookup::Everything);
        &self.files
    }

    /// The files inside `folder` (names starting with `folder/`), in walk order, found
    /// through the sorted names rather than by going over every file.
    pub fn files_under<'s>(&'s self, folder: &str) -> impl Iterator<Item = &'s File> + 's {
        self.lookups.note(|| Lookup::Everything);
        let prefix = format!("{folder}/");
        let mut at: Vec<usize> = self
            .by_name
            .range(prefix.clone()..)
            .take_while(|(name, _)| name.starts_with(&prefix))
            .map(|(_, &i)| i)
            .collect();
        at.sort_unstable();
        at.into_iter().filter_map(|i| self.files.get(i))
    }

    /// The file with this name (see [`File::name`]).
    pub fn file(&self, name: &str) -> Option<&File> {
        self.lookups.note(|| Lookup::File(name.to_string()));
        self.by_name.get(name).map(|&i| &self.files[i])
    }

    /// Every object with this kind and name, in file order, whatever its namespace.
    pub fn find<'s>(&'s self, kind: &str, name: &str) -> impl Iterator<Item = Object<'s>> + 's {
        self.placed(kind, name).filter_map(|at| self.object(*at))
    }

    /// Where every object with this kind and name is, in file order (a lookup, noted).
    fn placed<'s>(&'s self, kind: &str, name: &str) -> impl Iterator<Item = &'s At> + 's {
        self.lookups
            .note(|| Lookup::Object(kind.to_string(), name.to_string()));
        self.objects
            .get(&(kind.to_string(), name.to_string()))
            .into_iter()
            .flatten()
    }

    /// The namespace of every object with this kind and name, in file order (`None`: it sets
    /// none), read from the line-marked tree: unlike [`Snapshot::find`], it never builds a
    /// file's order-preserving tree, which a daemon would then hold for every spec of the
    /// repo. A file yaml-rust2 rejects (a repeated key) counts here; `find` passes over it.
    pub fn namespaces<'s>(
        &'s self,
        kind: &str,
        name: &str,
    ) -> impl Iterator<Item = Option<&'s str>> + 's {
        self.placed(kind, name).filter_map(|at| {
            let node = self.files.get(at.file)?.documents().get(at.document)?;
            Some(typed_string(
                node.get("metadata").and_then(|m| m.get("namespace")),
            ))
        })
    }

    /// Every object, in file order.
    pub fn objects(&self) -> impl Iterator<Item = Object<'_>> + '_ {
        self.lookups.note(|| Lookup::Everything);
        let mut all: Vec<At> = self.objects.values().flatten().copied().collect();
        all.sort_by_key(|at| (at.file, at.document));
        all.into_iter().filter_map(|at| self.object(at))
    }

    /// The objects of one file, in document order.
    pub fn objects_in<'s>(&'s self, file: &'s File) -> impl Iterator<Item = Object<'s>> + 's {
        let yaml: &[Yaml] = match file.yaml() {
            Some(Ok(y)) => y,
            _ => &[],
        };
        yaml.iter()
            .zip(file.documents())
            .filter_map(|(yaml, node)| object(&file.name, node, yaml))
    }

    fn object(&self, at: At) -> Option<Object<'_>> {
        let file = self.files.get(at.file)?;
        let Some(Ok(yaml)) = file.yaml() else {
            return None;
        };
        object(
            &file.name,
            file.documents().get(at.document)?,
            yaml.get(at.document)?,
        )
    }
}

fn object<'s>(file: &'s str, node: &'s Node, yaml: &'s Yaml) -> Option<Object<'s>> {
    Some(Object {
        file,
        line: node.line,
        api_version: yaml["apiVersion"].as_str(),
        kind: yaml["kind"].as_str()?,
        name: yaml["metadata"]["name"].as_str()?,
        namespace: yaml["metadata"]["namespace"].as_str(),
        node,
        yaml,
    })
}

/// The (kind, name) of each document of `contents` that [`Snapshot::find`] finds by them, with
/// the document's position.
pub fn object_keys(contents: &Contents) -> Vec<(usize, (String, String))> {
    let Contents::Yaml { documents, .. } = contents else {
        return Vec::new();
    };
    documents
        .iter()
        .enumerate()
        .filter_map(|(document, node)| {
            let kind = typed_string(node.get("kind"))?;
            let name = typed_string(node.get("metadata").and_then(|m| m.get("name")))?;
            Some((document, (kind.to_string(), name.to_string())))
        })
        .collect()
}

/// The contents of a file whose text is `text`: its documents, or why it is not YAML.
pub(crate) fn parse(text: String) -> Contents {
    // kubectl and the API server's YAML reader skip a leading byte-order mark; kept, it would
    // turn the first key into "\u{feff}apiVersion" and hide the file's kind.
    let text = match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    };
    match parse_documents(&text) {
        Ok(documents) => Contents::Yaml {
            documents: documents.into_iter().map(|d| d.root).collect(),
            yaml: OnceLock::new(),
            text,
        },
        Err(error) => Contents::Invalid { text, error },
    }
}

/// A scalar's text when yaml-rust2 would type it a string (so `name: 123` is a number, not a
/// name, as when the index was built from yaml-rust2's tree).
fn typed_string(node: Option<&Node>) -> Option<&str> {
    let node = node?;
    match &node.value {
        Value::Scalar { text, quoted: true } => Some(text),
        Value::Scalar {
            text,
            quoted: false,
        } => Yaml::from_str(text)
            .as_str()
            .is_some()
            .then_some(text.as_str()),
        Value::Null | Value::Seq(_) | Value::Map(_) => None,
    }
}

/// Every YAML file under `root` (or `root` itself when it is a file), sorted by path.
fn yaml_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let walk = walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !(e.file_type().is_dir() && is_hidden(e)));
    let mut out = Vec::new();
    for entry in walk {
        let entry = entry.map_err(|e| match e.into_io_error() {
            Some(io) => io,
            None => std::io::Error::other("file system loop"),
        })?;
        let file_type = entry.file_type();
        let name = entry.file_name().to_string_lossy();
        // A linked YAML file is listed so its read is refused and reported (a link is never
        // followed); a linked folder is not entered.
        let wanted = if entry.depth() == 0 {
            !file_type.is_dir()
        } else {
            (file_type.is_file() || file_type.is_symlink())
                && (name.ends_with(".yaml") || name.ends_with(".yml"))
        };
        if wanted {
            out.push(entry.into_path());
        }
    }
    Ok(out)
}

fn is_hidden(entry: &walkdir::DirEntry) -> bool {
    entry.file_name().to_string_lossy().starts_with('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, file: &str, text: &str) {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn names(snapshot: &Snapshot) -> Vec<&str> {
        snapshot.files().iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn the_walk_reads_yaml_files_sorted_and_skips_hidden_folders() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for file in [
            "b.yml",
            "a/z.yaml",
            "a.yaml",
            "a-b/c.yaml",
            ".hidden.yaml",
            "notes.txt",
            "a/README.md",
            ".git/config.yaml",
            ".sluice/config.yaml",
            ".sluice/status/prod/podinfo.yaml",
            "apps/.cache/x.yaml",
        ] {
            write(root, file, "a: 1\n");
        }
        std::os::unix::fs::symlink(root.join("a.yaml"), root.join("link.yaml")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("linked-dir")).unwrap();
        let snapshot = Snapshot::read(root);
        // Path order, component by component (as the walks before the snapshot sorted), not
        // string order, which would put "a-b/" and "a.yaml" before "a/"; hidden files are read,
        // hidden folders, other extensions and linked folders are not; a linked file is listed
        // as refused, never read.
        assert_eq!(
            names(&snapshot),
            [
                ".hidden.yaml",
                "a/z.yaml",
                "a-b/c.yaml",
                "a.yaml",
                "b.yml",
                "link.yaml"
            ]
        );
        assert!(matches!(
            *snapshot.file("link.yaml").unwrap().contents,
            Contents::Unreadable(ReadError::Symlink)
        ));
    }

    /// A committed link can point at a secret or at a device that never ends: the walk and
    /// every read outside it refuse links, and the size limit holds while reading.
    #[test]
    fn links_out_of_the_repo_and_endless_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        write(&outside, "token.yaml", "token: s3cret-token\n");
        let root = dir.path().join("repo");
        write(&root, "apps/canary.yaml", "a: 1\n");
        std::os::unix::fs::symlink(outside.join("token.yaml"), root.join("apps/leak.yaml"))
            .unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("apps/zero.yaml")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join(".sluice")).unwrap();
        let snapshot = Snapshot::read(&root);
        for name in ["apps/leak.yaml", "apps/zero.yaml"] {
            let file = snapshot.file(name).unwrap();
            assert!(
                matches!(*file.contents, Contents::Unreadable(ReadError::Symlink)),
                "{name}: {:?}",
                file.contents
            );
        }
        assert_eq!(
            read_bounded(&root.join("apps/leak.yaml")),
            Err(ReadError::Symlink)
        );
        assert_eq!(
            read_inside(&root, &root.join(".sluice/token.yaml"), read_bounded),
            Err(ReadError::SymlinkFolder {
                link: ".sluice".into()
            })
        );
        // A device is refused even when reached without a link; and had it been read, the
        // read would have stopped at the limit.
        assert_eq!(
            read_bounded(Path::new("/dev/zero")),
            Err(ReadError::NotAFile)
        );
        assert_eq!(
            read_inside(&root, &root.join("apps/canary.yaml"), read_bounded).as_deref(),
            Ok("a: 1\n")
        );
    }

    #[test]
    fn unreadable_files_are_kept_with_the_reason_and_not_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "big.yaml",
            &"a: 1\n".repeat(1 + MAX_FILE_BYTES as usize / 5),
        );
        std::fs::write(root.join("latin1.yaml"), b"a: \xe9\n").unwrap();
        write(root, "bad.yaml", "a: [1,\n");
        let snapshot = Snapshot::read(root);
        let reason = |name: &str| match &*snapshot.file(name).unwrap().contents {
            Contents::Unreadable(e) => e.to_string(),
            Contents::Invalid { error, .. } => format!("invalid at {}", error.line),
            Contents::Yaml { .. } => "yaml".into(),
        };
        assert_eq!(
            reason("big.yaml"),
            format!(
                "file is {} bytes; spec files are limited to {MAX_FILE_BYTES} bytes",
                5 * (1 + MAX_FILE_BYTES / 5)
            )
        );
        assert_eq!(reason("latin1.yaml"), "expected UTF-8 text");
        assert_eq!(reason("bad.yaml"), "invalid at 2");
        assert_eq!(snapshot.file("bad.yaml").unwrap().text(), Some("a: [1,\n"));
    }

    #[test]
    fn a_root_that_cannot_be_walked_is_one_unreadable_entry() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let snapshot = Snapshot::read_paths(std::slice::from_ref(&missing));
        assert_eq!(names(&snapshot), [missing.display().to_string()]);
        assert!(matches!(
            &*snapshot.files()[0].contents,
            Contents::Unreadable(ReadError::Io(m)) if m.contains("No such file")
        ));
    }

    #[test]
    fn paths_given_are_named_as_walked_and_a_file_root_is_read_whatever_its_name() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "apps/x.yaml", "a: 1\n");
        write(dir.path(), "notes.txt", "a: 1\n");
        let apps = dir.path().join("apps");
        let notes = dir.path().join("notes.txt");
        let snapshot = Snapshot::read_paths(&[apps.clone(), notes.clone()]);
        assert_eq!(
            names(&snapshot),
            [
                apps.join("x.yaml").display().to_string(),
                notes.display().to_string()
            ]
        );
    }

    #[test]
    fn objects_are_found_by_kind_and_name_with_file_line_and_namespace() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "apps/podinfo.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: env}\n---\n# a comment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\n  namespace: prod\n---\nkind: Deployment\nmetadata: {name: 123}\n",
        );
        write(
            dir.path(),
            "other/podinfo.yaml",
            "kind: Deployment\nmetadata: {name: podinfo, namespace: test}\n",
        );
        let snapshot = Snapshot::read(dir.path());
        let found: Vec<(&str, usize, Option<&str>, Option<&str>)> = snapshot
            .find("Deployment", "podinfo")
            .map(|o| (o.file, o.line, o.namespace, o.api_version))
            .collect();
        assert_eq!(
            found,
            [
                ("apps/podinfo.yaml", 6, Some("prod"), Some("apps/v1")),
                ("other/podinfo.yaml", 1, Some("test"), None)
            ]
        );
        let env = snapshot.find("ConfigMap", "env").next().unwrap();
        assert_eq!(
            (env.namespace, env.yaml["metadata"]["name"].as_str()),
            (None, Some("env"))
        );
        // `name: 123` is a number to yaml-rust2, so not an object name (as before).
        assert_eq!(snapshot.objects().count(), 3);
        assert_eq!(snapshot.find("Deployment", "123").count(), 0);
    }

    /// The order-preserving tree is built only for files whose objects are looked up: a large
    /// repo's canary specs and outputs never pay for it.
    #[test]
    fn only_files_whose_objects_are_used_get_the_order_preserving_tree() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "a.yaml",
            "kind: ConfigMap\nmetadata: {name: env}\n",
        );
        write(
            dir.path(),
            "b.yaml",
            "kind: Canary\nmetadata: {name: web}\n",
        );
        let snapshot = Snapshot::read(dir.path());
        let built = |name: &str| match &*snapshot.file(name).unwrap().contents {
            Contents::Yaml { yaml, .. } => yaml.get().is_some(),
            Contents::Unreadable(_) | Contents::Invalid { .. } => panic!("{name} parses"),
        };
        assert!(
            !built("a.yaml") && !built("b.yaml"),
            "nothing built by the walk"
        );
        assert_eq!(snapshot.find("ConfigMap", "env").count(), 1);
        assert!(built("a.yaml"), "built for the object looked up");
        assert!(!built("b.yaml"), "not for the file nobody copies from");
    }
}
