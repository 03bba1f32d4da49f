//! The commits this clone's sluice made, kept in the clone (`<git dir>/sluice/made`), so that
//! the drift check of a later process takes them as sluice's without rendering them again.
//!
//! A commit sluice made for a canary's decision is sluice's by construction: it rendered those
//! files for that status on that parent. A daemon used to render each of its own commits once
//! more, on the next tick, to prove it; a one-shot `sluice reconcile` rendered every canary's
//! last commit again (a second at 1,000 canaries). The record holds commit ids and the status
//! text's blob id, named by content, so it never goes stale; what is not in it (a commit pushed
//! by anyone else, whatever its trailers claim) is still rendered and compared.
//!
//! Only sluice writes the file, in its own git dir: whoever can write there can move the
//! clone's refs and objects too. A line that does not read (a write cut short) is passed over.
//! Each line: `<namespace/name> <commit> <first parent> <status blob>`.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use git2::Oid;

/// Lines kept at most: past it the file is cut to its newest half on the next read.
pub const KEEP_LINES: usize = 10_000;

/// One commit sluice made for one canary.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Made {
    pub canary: String,
    pub commit: Oid,
    pub parent: Oid,
    /// The blob id of the status file text the commit wrote.
    pub status: Oid,
}

/// Where the record of the clone whose git dir is `git_dir` lives.
pub fn path(git_dir: &Path) -> PathBuf {
    git_dir.join("sluice").join("made")
}

/// Every record that reads, oldest first (none when there is no file). A file over
/// [`KEEP_LINES`] is cut to its newest half.
pub fn read(git_dir: &Path) -> std::io::Result<Vec<Made>> {
    let file = path(git_dir);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut made: Vec<Made> = text.lines().filter_map(parse).collect();
    if text.lines().count() > KEEP_LINES {
        made.drain(..made.len().saturating_sub(KEEP_LINES / 2));
        rewrite(&file, &made)?;
    }
    Ok(made)
}

/// Adds `made` to the record.
pub fn append(git_dir: &Path, made: &[Made]) -> std::io::Result<()> {
    if made.is_empty() {
        return Ok(());
    }
    let file = path(git_dir);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(&file)?;
    // A write cut short left a line without its end: end it, so the new lines read.
    let len = out.metadata()?.len();
    let mut text = String::new();
    if len > 0 {
        let mut last = [0u8; 1];
        out.seek(SeekFrom::Start(len - 1))?;
        out.read_exact(&mut last)?;
        if last[0] != b'\n' {
            text.push('\n');
        }
    }
    text.push_str(&lines(made));
    out.write_all(text.as_bytes())
}

fn rewrite(file: &Path, made: &[Made]) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(lines(made).as_bytes())?;
    temp.persist(file).map(drop).map_err(|e| e.error)
}

fn lines(made: &[Made]) -> String {
    made.iter()
        .map(|m| format!("{} {} {} {}\n", m.canary, m.commit, m.parent, m.status))
        .collect()
}

fn parse(line: &str) -> Option<Made> {
    let mut parts = line.split(' ');
    let canary = parts.next().filter(|c| c.contains('/'))?.to_string();
    let mut oid = || parts.next()?.parse::<Oid>().ok();
    let (commit, parent, status) = (oid()?, oid()?, oid()?);
    if parts.next().is_some() {
        return None;
    }
    Some(Made {
        canary,
        commit,
        parent,
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(i: u8) -> Made {
        let id = |b: u8| Oid::from_bytes(&[b; 20]).unwrap();
        Made {
            canary: format!("shop/web{i}"),
            commit: id(i),
            parent: id(i.wrapping_add(1)),
            status: id(i.wrapping_add(2)),
        }
    }

    #[test]
    fn records_read_back_and_lines_cut_short_are_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), []);
        append(dir.path(), &[made(1), made(2)]).unwrap();
        // A write cut short, then a whole one.
        let file = path(dir.path());
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str("shop/web3 0101");
        std::fs::write(&file, text).unwrap();
        append(dir.path(), &[made(4)]).unwrap();
        let read_back = read(dir.path()).unwrap();
        assert_eq!(read_back, [made(1), made(2), made(4)]);
        std::fs::write(&file, lines(&[made(1)]) + "x y z w\n" + &lines(&[made(5)])).unwrap();
        assert_eq!(read(dir.path()).unwrap(), [made(1), made(5)]);
    }

    #[test]
    fn a_long_record_is_cut_to_its_newest_half() {
        let dir = tempfile::tempdir().unwrap();
        let many: Vec<Made> = (0..=KEEP_LINES).map(|i| made((i % 250) as u8)).collect();
        append(dir.path(), &many).unwrap();
        let read_back = read(dir.path()).unwrap();
        assert_eq!(read_back.len(), KEEP_LINES / 2);
        assert_eq!(read_back.last(), many.last());
        assert_eq!(
            read(dir.path()).unwrap().len(),
            KEEP_LINES / 2,
            "cut on disk"
        );
    }
}
