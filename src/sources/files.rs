//! Following append-only log files: a durable cursor (file, byte offset, line number)
//! and a reader that returns only whole lines past it. PBS writes one accounting file a
//! day in a directory; SGE appends to one file (rotated by moving it aside: the cursor
//! keeps the file's inode, and the moved file's last lines are read before the new
//! one's). Reads are bounded per call, so a long backlog arrives in several batches.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SourceError;

/// Where a follower resumes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCursor {
    /// The file's name (within the directory, for daily files).
    pub file: String,
    /// Bytes of it already read (always at a line's end).
    pub offset: u64,
    /// Lines of it already read.
    pub line: u64,
    /// The file's inode when it was read: a file of the same name with another inode
    /// replaced it (SGE's accounting file moved aside and begun anew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inode: Option<u64>,
}

impl FileCursor {
    /// The start of file `name`.
    fn start_of(name: &str) -> Self {
        FileCursor {
            file: name.to_string(),
            ..Default::default()
        }
    }

    /// The cursor as stored text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A stored cursor; `None` for none or one that does not read (start over: writes
    /// are idempotent).
    pub fn from_text(text: Option<&str>) -> Option<Self> {
        serde_json::from_str(text?).ok()
    }
}

/// Lines read from a file, each with its 1-based number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lines {
    /// The file they came from.
    pub file: String,
    /// `(line number, text without the newline)`.
    pub lines: Vec<(u64, String)>,
    /// Where the next read starts.
    pub cursor: FileCursor,
    /// Whether more is ready at once (the read stopped at the byte budget, or a newer
    /// file waits).
    pub more: bool,
    /// Whether the read reached the end of the file (as long as it was when opened).
    pub at_end: bool,
}

/// Reads whole lines of `path` past `offset`, at most about `budget` bytes. A file
/// moved aside and begun anew is finished first (see [`read_lines_ending`]); one
/// shorter than the offset was truncated in place and is read from its start.
pub fn read_lines(
    path: &Path,
    name: &str,
    cursor: FileCursor,
    budget: u64,
) -> Result<Lines, SourceError> {
    read_lines_ending(path, name, cursor, budget, false)
}

/// [`read_lines`]; with `finished`, the file is no longer written, so an unterminated
/// last line (a crash, a full disk) is a line too rather than one still being written.
///
/// When the cursor's file was replaced (another inode under its name), the rest of the
/// old file is read first where it can still be found in the same directory (moved
/// aside: `accounting` → `accounting.1`), then the new file from its start.
fn read_lines_ending(
    path: &Path,
    name: &str,
    cursor: FileCursor,
    budget: u64,
    finished: bool,
) -> Result<Lines, SourceError> {
    let (f, len, inode) = open(path)?;
    let mut cursor = if cursor.file == name {
        cursor
    } else {
        FileCursor::start_of(name)
    };
    if let (Some(was), Some(is)) = (cursor.inode, inode)
        && was != is
    {
        let moved = path
            .parent()
            .and_then(|dir| find_inode(dir, was))
            .and_then(|old| open(&old).ok().map(|(f, len, _)| (old, f, len)));
        if let Some((old, f, old_len)) = moved
            && old_len > cursor.offset
        {
            // The moved-aside file's last lines, read to its end (it is written no more).
            let mut out = read_open(f, old_len, &old, name, cursor, budget, true)?;
            if out.cursor.offset >= old_len {
                out.cursor = FileCursor {
                    inode,
                    ..FileCursor::start_of(name)
                };
            }
            out.more = true;
            return Ok(out);
        }
        cursor = FileCursor::start_of(name);
    }
    if len < cursor.offset {
        // Shorter than what was read: truncated in place; read from the start.
        cursor = FileCursor::start_of(name);
    }
    let mut out = read_open(f, len, path, name, cursor, budget, finished)?;
    out.cursor.inode = inode;
    Ok(out)
}

/// An open file, its length and its inode.
fn open(path: &Path) -> Result<(std::fs::File, u64, Option<u64>), SourceError> {
    let f = std::fs::File::open(path)
        .map_err(|e| SourceError(format!("{}: cannot open: {e}", path.display())))?;
    let meta = f
        .metadata()
        .map_err(|e| SourceError(format!("{}: {e}", path.display())))?;
    Ok((f, meta.len(), inode_of(&meta)))
}

#[cfg(unix)]
fn inode_of(meta: &std::fs::Metadata) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    Some(meta.ino())
}

#[cfg(not(unix))]
fn inode_of(_: &std::fs::Metadata) -> Option<u64> {
    None
}

/// The file of `dir` with inode `inode`, if there is one.
fn find_inode(dir: &Path, inode: u64) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .find(|e| e.metadata().ok().and_then(|m| inode_of(&m)) == Some(inode))
        .map(|e| e.path())
}

/// Reads whole lines of an open file of `len` bytes past the cursor (see
/// [`read_lines_ending`]); the cursor it returns keeps the one given's inode.
fn read_open(
    mut f: std::fs::File,
    len: u64,
    path: &Path,
    name: &str,
    cursor: FileCursor,
    budget: u64,
    finished: bool,
) -> Result<Lines, SourceError> {
    f.seek(SeekFrom::Start(cursor.offset))
        .map_err(|e| SourceError(format!("{}: {e}", path.display())))?;
    let mut buf = Vec::new();
    let mut reader = std::io::BufReader::new(f);
    let cannot = |e: std::io::Error| SourceError(format!("{}: cannot read: {e}", path.display()));
    (&mut reader)
        .take(budget)
        .read_to_end(&mut buf)
        .map_err(cannot)?;
    let full = buf.len() as u64 == budget;
    if full && buf.last() != Some(&b'\n') {
        // The budget ended inside a line: finish that line, however long.
        std::io::BufRead::read_until(&mut reader, b'\n', &mut buf).map_err(cannot)?;
    }
    // No newline will come: the tail is the file's last line (a newline the file does
    // not hold, not counted in the offset).
    let added = finished && !buf.is_empty() && buf.last() != Some(&b'\n');
    if added {
        buf.push(b'\n');
    }
    // Only whole lines: a line still being written is read next time. What was read is
    // what the file holds, even past `len` (written since it was measured): the cursor
    // moves past exactly the lines given.
    let whole = buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let consumed = whole as u64 - u64::from(added);
    let mut out = Lines {
        file: name.to_string(),
        // More is ready when the budget stopped the read, but not when what is left is
        // one unterminated line (it would be read again at once, and again).
        more: full && whole > 0 && cursor.offset + consumed < len,
        at_end: cursor.offset + consumed >= len,
        ..Default::default()
    };
    if whole > 0 {
        // `whole` ends with a newline: splitting what comes before it gives the lines.
        for (i, raw) in buf[..whole - 1].split(|b| *b == b'\n').enumerate() {
            let mut text = String::from_utf8_lossy(raw).into_owned();
            if text.ends_with('\r') {
                text.pop();
            }
            out.lines.push((cursor.line + 1 + i as u64, text));
        }
    }
    out.cursor = FileCursor {
        file: name.to_string(),
        offset: cursor.offset + consumed,
        line: cursor.line + out.lines.len() as u64,
        inode: cursor.inode,
    };
    Ok(out)
}

/// Follows a directory of daily files (named so that they sort by date, as PBS's
/// `YYYYMMDD`): reads on in the cursor's file, then moves to the next one once that is
/// read to its end and a newer file exists.
pub fn read_dir_lines(
    dir: &Path,
    cursor: Option<FileCursor>,
    budget: u64,
) -> Result<Lines, SourceError> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| SourceError(format!("{}: cannot list: {e}", dir.display())))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let Some(first) = names.first().cloned() else {
        return Ok(Lines {
            cursor: cursor.unwrap_or_default(),
            ..Default::default()
        });
    };
    let cursor = cursor.unwrap_or_else(|| FileCursor::start_of(&first));
    // The cursor's file, or (when it is gone) the first file after it.
    let Some(at) = names.iter().position(|n| *n >= cursor.file) else {
        return Ok(Lines {
            cursor,
            ..Default::default()
        });
    };
    let name = &names[at];
    let start = if *name == cursor.file {
        cursor.clone()
    } else {
        FileCursor::start_of(name)
    };
    let path: PathBuf = dir.join(name);
    // A day's file is not written after the next one begins.
    let finished = at + 1 < names.len();
    let mut lines = read_lines_ending(&path, name, start, budget, finished)?;
    if !lines.more && lines.at_end && finished {
        // This day is done and a newer file exists: the next read starts there.
        lines.cursor = FileCursor::start_of(&names[at + 1]);
        lines.more = true;
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_written_after_the_file_was_measured_are_counted() {
        // Measured at 6 bytes (`a\nb\ncc`), then `c\n` written before the read: the read
        // gives three lines and its cursor is past the third, not in its middle.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acct");
        std::fs::write(&path, "a\nb\nccc\n").unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let l = read_open(
            f,
            6,
            &path,
            "acct",
            FileCursor::start_of("acct"),
            1 << 20,
            false,
        )
        .unwrap();
        let want: Vec<(u64, String)> = vec![(1, "a".into()), (2, "b".into()), (3, "ccc".into())];
        assert_eq!(l.lines, want);
        assert_eq!((l.cursor.offset, l.cursor.line), (8, 3));
        let next = read_lines(&path, "acct", l.cursor, 1 << 20).unwrap();
        assert!(next.lines.is_empty(), "{:?}", next.lines);
        // A finished file's unterminated last line: its missing newline is not counted.
        std::fs::write(&path, "a\nlast").unwrap();
        let l = read_lines_ending(&path, "acct", FileCursor::default(), 1 << 20, true).unwrap();
        assert_eq!(l.lines.last(), Some(&(2, "last".to_string())));
        assert_eq!(l.cursor.offset, 6);
    }

    #[test]
    fn lines_are_read_whole_and_resumed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acct");
        std::fs::write(&path, "a\nb\npartial").unwrap();
        let l = read_lines(&path, "acct", FileCursor::default(), 1 << 20).unwrap();
        assert_eq!(l.lines, vec![(1, "a".into()), (2, "b".into())]);
        assert_eq!((l.cursor.offset, l.cursor.line), (4, 2));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b" line\n\nc\n").unwrap();
        let l = read_lines(&path, "acct", l.cursor, 1 << 20).unwrap();
        assert_eq!(
            l.lines,
            vec![(3, "partial line".into()), (4, "".into()), (5, "c".into())]
        );
        // A budget splits a backlog; nothing is lost or repeated.
        let mut cursor = FileCursor::default();
        let mut all = Vec::new();
        loop {
            let l = read_lines(&path, "acct", cursor, 5).unwrap();
            all.extend(l.lines);
            cursor = l.cursor;
            if !l.more {
                break;
            }
        }
        assert_eq!(all.len(), 5, "{all:?}");
        assert_eq!(all[4], (5, "c".into()));
        // A rotated (shorter) file is read from its start.
        std::fs::write(&path, "z\n").unwrap();
        let l = read_lines(&path, "acct", cursor, 1 << 20).unwrap();
        assert_eq!(l.lines, vec![(1, "z".into())]);
    }

    #[test]
    fn a_file_moved_aside_is_finished_before_its_successor_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("accounting");
        std::fs::write(&path, "a\nb\n").unwrap();
        let l = read_lines(&path, "accounting", FileCursor::default(), 1 << 20).unwrap();
        assert_eq!(l.lines.len(), 2);
        // A line is appended after that read, then the file is moved aside and begun
        // anew, already longer than the old offset.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"c\n").unwrap();
        std::fs::rename(&path, dir.path().join("accounting.1")).unwrap();
        std::fs::write(&path, "first of the new\n").unwrap();
        let l = read_lines(&path, "accounting", l.cursor, 1 << 20).unwrap();
        assert_eq!((l.lines, l.more), (vec![(3, "c".into())], true));
        let l = read_lines(&path, "accounting", l.cursor, 1 << 20).unwrap();
        assert_eq!(l.lines, vec![(1, "first of the new".into())]);
        let l = read_lines(&path, "accounting", l.cursor, 1 << 20).unwrap();
        assert_eq!((l.lines, l.more), (vec![], false));
        // Moved out of reach (compressed, deleted): the new file from its start.
        let cursor = l.cursor;
        std::fs::remove_file(dir.path().join("accounting.1")).unwrap();
        std::fs::rename(&path, dir.path().join("gone")).unwrap();
        std::fs::remove_file(dir.path().join("gone")).unwrap();
        std::fs::write(&path, "x\ny\nz\n").unwrap();
        let l = read_lines(&path, "accounting", cursor, 1 << 20).unwrap();
        assert_eq!(l.lines.len(), 3);
    }

    #[test]
    fn daily_files_are_followed_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("20240101"), "1\n2\n").unwrap();
        std::fs::write(dir.path().join("20240102"), "3\n").unwrap();
        let mut cursor = None;
        let mut seen = Vec::new();
        for _ in 0..4 {
            let l = read_dir_lines(dir.path(), cursor.clone(), 1 << 20).unwrap();
            seen.extend(l.lines.iter().map(|(n, t)| (l.file.clone(), *n, t.clone())));
            cursor = Some(l.cursor);
        }
        assert_eq!(
            seen,
            vec![
                ("20240101".into(), 1, "1".into()),
                ("20240101".into(), 2, "2".into()),
                ("20240102".into(), 1, "3".into()),
            ]
        );
        // The last file grows: only the new line comes.
        std::fs::write(dir.path().join("20240102"), "3\n4\n").unwrap();
        let l = read_dir_lines(dir.path(), cursor, 1 << 20).unwrap();
        assert_eq!(l.lines, vec![(2, "4".into())]);
    }

    #[test]
    fn a_day_cut_off_mid_line_is_read_to_its_end_once_the_next_begins() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("20240101"), "1\ncut").unwrap();
        // While it is the newest file, its unterminated line may still be written.
        let l = read_dir_lines(dir.path(), None, 1 << 20).unwrap();
        assert_eq!((l.lines, l.more), (vec![(1, "1".into())], false));
        let cursor = Some(l.cursor);
        let l = read_dir_lines(dir.path(), cursor.clone(), 1 << 20).unwrap();
        assert_eq!(l.lines, vec![]);
        // Once the next day begins, the cut line is its file's last line, and the
        // follower moves on.
        std::fs::write(dir.path().join("20240102"), "2\n").unwrap();
        let l = read_dir_lines(dir.path(), cursor, 1 << 20).unwrap();
        assert_eq!((l.lines, l.more), (vec![(2, "cut".into())], true));
        let l = read_dir_lines(dir.path(), Some(l.cursor), 1 << 20).unwrap();
        assert_eq!(
            (l.file.as_str(), l.lines),
            ("20240102", vec![(1, "2".into())])
        );
    }

    #[test]
    fn an_unterminated_tail_longer_than_the_budget_is_not_read_again_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("accounting");
        let mut text = b"a\n".to_vec();
        text.extend(std::iter::repeat_n(0u8, 64));
        std::fs::write(&path, &text).unwrap();
        let l = read_lines(&path, "accounting", FileCursor::default(), 16).unwrap();
        assert_eq!((l.lines, l.cursor.offset), (vec![(1, "a".into())], 2));
        // What is left is one unterminated line: nothing more is ready until it ends.
        let l = read_lines(&path, "accounting", l.cursor, 16).unwrap();
        assert_eq!((l.lines, l.cursor.offset, l.more), (vec![], 2, false));
    }
}
