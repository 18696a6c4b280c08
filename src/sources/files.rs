//! Following append-only log files: a durable cursor (file, byte offset, line number)
//! and a reader that returns only whole lines past it. PBS writes one accounting file a
//! day in a directory; SGE appends to one file (rotated by moving it aside). Reads are
//! bounded per call, so a long backlog arrives in several batches.

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
}

impl FileCursor {
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
}

/// Reads whole lines of `path` past `offset`, at most about `budget` bytes. A file
/// shorter than the offset was replaced (rotated or truncated): it is read from the
/// start.
pub fn read_lines(
    path: &Path,
    name: &str,
    mut cursor: FileCursor,
    budget: u64,
) -> Result<Lines, SourceError> {
    let mut f = std::fs::File::open(path)
        .map_err(|e| SourceError(format!("{}: cannot open: {e}", path.display())))?;
    let len = f
        .metadata()
        .map_err(|e| SourceError(format!("{}: {e}", path.display())))?
        .len();
    if cursor.file != name || len < cursor.offset {
        cursor = FileCursor {
            file: name.to_string(),
            offset: 0,
            line: 0,
        };
    }
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
    // Only whole lines: a line still being written is read next time.
    let whole = buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut out = Lines {
        file: name.to_string(),
        more: full && cursor.offset + (whole as u64) < len,
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
        offset: cursor.offset + whole as u64,
        line: cursor.line + out.lines.len() as u64,
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
    let cursor = cursor.unwrap_or(FileCursor {
        file: first.clone(),
        offset: 0,
        line: 0,
    });
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
        FileCursor {
            file: name.clone(),
            offset: 0,
            line: 0,
        }
    };
    let path: PathBuf = dir.join(name);
    let mut lines = read_lines(&path, name, start, budget)?;
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if !lines.more && lines.cursor.offset >= len && at + 1 < names.len() {
        // This day is done and a newer file exists: the next read starts there. (A day's
        // file is not written after the next one begins.)
        lines.cursor = FileCursor {
            file: names[at + 1].clone(),
            offset: 0,
            line: 0,
        };
        lines.more = true;
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
}
