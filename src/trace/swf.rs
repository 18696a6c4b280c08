//! Standard Workload Format (SWF, Parallel Workloads Archive v2.x): reading and writing.
//!
//! One job per line, 18 whitespace-separated fields; `-1` means unknown; lines starting
//! with `;` are header comments (`; UnixStartTime: …`, `; Queue: N name`, …).
//! Reading never panics and never drops a line silently: a malformed line comes back as
//! a [`SwfLineError`] with its line number, reason and raw text, and the caller decides
//! (the replay reports and goes on, the importer stores it aside).
//!
//! May import: std only. Files are opened by [`open`], which also undoes gzip.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;

/// Number of fields in an SWF job line.
pub const FIELDS: usize = 18;

/// Largest time a job line may give, in seconds (about 317 years): beyond any trace,
/// and small enough that sums of times (a start, an end, a header's `UnixStartTime`
/// plus a submit) cannot overflow.
pub const MAX_TIME_S: i64 = 10_000_000_000;

/// The fields that hold times or durations in seconds (0-based).
const TIME_FIELDS: [usize; 5] = [1, 2, 3, 8, 17];

/// Names of the 18 fields, 1-based in the format's documentation, 0-based here.
pub const FIELD_NAMES: [&str; FIELDS] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable number",
    "queue number",
    "partition number",
    "preceding job number",
    "think time",
];

/// One job line of an SWF file. Integer fields keep the format's `-1` for unknown;
/// use the accessors for the usual interpretations.
#[derive(Debug, Clone, PartialEq)]
pub struct SwfRecord {
    /// 1-based line number in the file it was read from (0 when built in memory).
    pub line: u64,
    pub job: i64,
    pub submit: i64,
    pub wait: i64,
    pub run: i64,
    pub alloc_procs: i64,
    /// Average CPU time; the only field real traces write with a fraction.
    pub avg_cpu: f64,
    pub used_mem: f64,
    pub req_procs: i64,
    pub req_time: i64,
    pub req_mem: f64,
    /// 1 completed, 0 failed, 5 cancelled (others exist for partial executions).
    pub status: i64,
    pub user: i64,
    pub group: i64,
    pub executable: i64,
    pub queue: i64,
    pub partition: i64,
    pub preceding: i64,
    pub think: i64,
}

/// SWF status code of a cancelled job.
pub const STATUS_CANCELLED: i64 = 5;

impl SwfRecord {
    /// A record with every field unknown (`-1`), for building traces in memory.
    pub fn unknown(job: i64, submit: i64) -> Self {
        Self {
            line: 0,
            job,
            submit,
            wait: -1,
            run: -1,
            alloc_procs: -1,
            avg_cpu: -1.0,
            used_mem: -1.0,
            req_procs: -1,
            req_time: -1,
            req_mem: -1.0,
            status: -1,
            user: -1,
            group: -1,
            executable: -1,
            queue: -1,
            partition: -1,
            preceding: -1,
            think: -1,
        }
    }

    /// The wait in seconds, when known (the format writes `-1` for unknown).
    pub fn wait(&self) -> Option<i64> {
        (self.wait >= 0).then_some(self.wait)
    }

    /// Start time (submit + wait), when the wait is known.
    pub fn start(&self) -> Option<i64> {
        self.wait().map(|w| self.submit + w)
    }

    /// Processors the job asked for: the requested count, or the allocated count where
    /// the trace does not record requests.
    pub fn procs(&self) -> Option<i64> {
        if self.req_procs > 0 {
            Some(self.req_procs)
        } else if self.alloc_procs > 0 {
            Some(self.alloc_procs)
        } else {
            None
        }
    }

    /// Requested walltime in seconds, when known.
    pub fn requested_time(&self) -> Option<i64> {
        (self.req_time > 0).then_some(self.req_time)
    }

    /// Whether the job was cancelled (status 5).
    pub fn cancelled(&self) -> bool {
        self.status == STATUS_CANCELLED
    }

    /// Parses one non-comment line. `line` is the 1-based line number to report.
    pub fn parse(text: &str, line: u64) -> Result<Self, SwfLineError> {
        let err = |reason: String| SwfLineError {
            line,
            reason,
            raw: text.to_string(),
        };
        let mut fields = [""; FIELDS];
        let mut n = 0;
        for tok in text.split_ascii_whitespace() {
            if n < FIELDS {
                fields[n] = tok;
            }
            n += 1;
        }
        // Fewer is a damaged line; more is a variant that appends fields (the
        // MetaCentrum/Alea traces have 21): the first 18 are SWF's, read as such, and
        // the reader counts such lines so that the import says so once.
        if n < FIELDS {
            return Err(err(format!("expected {FIELDS} fields, found {n}")));
        }
        let int = |i: usize| -> Result<i64, SwfLineError> {
            fields[i].parse::<i64>().map_err(|_| {
                err(format!(
                    "field {} ({}): {:?} is not an integer",
                    i + 1,
                    FIELD_NAMES[i],
                    fields[i]
                ))
            })
        };
        let real = |i: usize| -> Result<f64, SwfLineError> {
            match fields[i].parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                _ => Err(err(format!(
                    "field {} ({}): {:?} is not a number",
                    i + 1,
                    FIELD_NAMES[i],
                    fields[i]
                ))),
            }
        };
        let rec = SwfRecord {
            line,
            job: int(0)?,
            submit: int(1)?,
            wait: int(2)?,
            run: int(3)?,
            alloc_procs: int(4)?,
            avg_cpu: real(5)?,
            used_mem: real(6)?,
            req_procs: int(7)?,
            req_time: int(8)?,
            req_mem: real(9)?,
            status: int(10)?,
            user: int(11)?,
            group: int(12)?,
            executable: int(13)?,
            queue: int(14)?,
            partition: int(15)?,
            preceding: int(16)?,
            think: int(17)?,
        };
        if rec.submit < 0 {
            return Err(err(format!(
                "field 2 (submit time): {} is negative",
                rec.submit
            )));
        }
        let times = [rec.submit, rec.wait, rec.run, rec.req_time, rec.think];
        for (i, t) in TIME_FIELDS.into_iter().zip(times) {
            if t > MAX_TIME_S {
                return Err(err(format!(
                    "field {} ({}): {t} s is more than any trace spans ({MAX_TIME_S} s)",
                    i + 1,
                    FIELD_NAMES[i]
                )));
            }
        }
        Ok(rec)
    }
}

impl fmt::Display for SwfRecord {
    /// Writes the record as one SWF line (no newline), in the archive's column style.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let real = |v: f64| -> String {
            // Whole numbers without a fraction, as the archive writes them; only those an
            // `i64` holds exactly, since `as` saturates (a used memory of 1e300 would
            // otherwise be written as 9223372036854775807).
            if v.fract() == 0.0 && v.abs() < 9.0e15 {
                format!("{}", v as i64)
            } else {
                format!("{v:.2}")
            }
        };
        write!(
            f,
            "{:>7} {:>9} {:>7} {:>7} {:>5} {:>7} {:>5} {:>5} {:>7} {:>5} {:>2} {:>4} {:>3} {:>3} {:>3} {:>3} {:>3} {:>3}",
            self.job,
            self.submit,
            self.wait,
            self.run,
            self.alloc_procs,
            real(self.avg_cpu),
            real(self.used_mem),
            self.req_procs,
            self.req_time,
            real(self.req_mem),
            self.status,
            self.user,
            self.group,
            self.executable,
            self.queue,
            self.partition,
            self.preceding,
            self.think
        )
    }
}

/// A line that could not be read as a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwfLineError {
    /// 1-based line number.
    pub line: u64,
    /// Why it was rejected, e.g. `expected 18 fields, found 17`.
    pub reason: String,
    /// The line as it stood in the file.
    pub raw: String,
}

impl fmt::Display for SwfLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// What the header comments say. Every comment line is kept verbatim in `comments`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwfHeader {
    pub unix_start_time: Option<i64>,
    pub time_zone: Option<String>,
    pub max_procs: Option<i64>,
    pub max_nodes: Option<i64>,
    /// `; Queue: N name` lines (number → name; name may be empty).
    pub queues: BTreeMap<i64, String>,
    /// `; Partition: N name` lines.
    pub partitions: BTreeMap<i64, String>,
    /// Every comment line, without the leading `;` and surrounding blanks.
    pub comments: Vec<String>,
}

impl SwfHeader {
    /// Takes in one comment line (with or without its leading `;`).
    pub fn absorb(&mut self, line: &str) {
        let body = line.trim_start_matches(';').trim();
        self.comments.push(body.to_string());
        let Some((key, value)) = body.split_once(':') else {
            return;
        };
        let value = value.trim();
        let first_int = || {
            value
                .split_ascii_whitespace()
                .next()
                .and_then(|t| t.parse::<i64>().ok())
        };
        match key.trim() {
            // A start beyond MAX_TIME_S either way is not a date: ignored, so that
            // start + submit stays in range.
            "UnixStartTime" => {
                self.unix_start_time =
                    first_int().filter(|t| (-MAX_TIME_S..=MAX_TIME_S).contains(t))
            }
            "TimeZoneString" => self.time_zone = Some(value.to_string()),
            "MaxProcs" => self.max_procs = first_int(),
            "MaxNodes" => self.max_nodes = first_int(),
            k @ ("Queue" | "Partition") => {
                let mut it = value.splitn(2, char::is_whitespace);
                if let Some(Ok(n)) = it.next().map(str::parse::<i64>) {
                    let name = it.next().unwrap_or("").trim().to_string();
                    let map = if k == "Queue" {
                        &mut self.queues
                    } else {
                        &mut self.partitions
                    };
                    map.insert(n, name);
                }
            }
            _ => {}
        }
    }

    /// The name the header gives queue `n`, if it gives a non-empty one.
    pub fn queue_name(&self, n: i64) -> Option<&str> {
        self.queues
            .get(&n)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// The name the header gives partition `n`, if it gives a non-empty one.
    pub fn partition_name(&self, n: i64) -> Option<&str> {
        self.partitions
            .get(&n)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }
}

/// One item of an SWF stream.
#[derive(Debug, Clone, PartialEq)]
pub enum SwfItem {
    /// A header comment (already absorbed into the reader's header).
    Comment,
    /// A job line.
    Job(SwfRecord),
    /// A line that is neither a comment, blank, nor a well-formed job.
    Bad(SwfLineError),
}

/// Streams an SWF file line by line, collecting the header as it goes.
pub struct SwfReader<R> {
    input: R,
    buf: Vec<u8>,
    line: u64,
    header: SwfHeader,
    /// Job lines read that had more than the 18 fields (only the first 18 are read).
    pub wide_lines: u64,
}

impl<R: BufRead> SwfReader<R> {
    pub fn new(input: R) -> Self {
        Self {
            input,
            buf: Vec::new(),
            line: 0,
            header: SwfHeader::default(),
            wide_lines: 0,
        }
    }

    /// The header comments seen so far (all of them once the job lines start, in the
    /// archive's files).
    pub fn header(&self) -> &SwfHeader {
        &self.header
    }

    /// The next non-blank line, or `None` at the end. I/O errors (including a corrupt
    /// gzip stream) are returned as errors; a line that is not valid UTF-8 is a bad line.
    pub fn next_item(&mut self) -> io::Result<Option<SwfItem>> {
        loop {
            self.buf.clear();
            let n = self.input.read_until(b'\n', &mut self.buf)?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            let text = match std::str::from_utf8(&self.buf) {
                Ok(t) => t,
                Err(_) => {
                    return Ok(Some(SwfItem::Bad(SwfLineError {
                        line: self.line,
                        reason: "not valid UTF-8 text".into(),
                        raw: String::from_utf8_lossy(&self.buf).trim_end().to_string(),
                    })));
                }
            };
            // A byte-order mark (editors on Windows write one) is not part of the line.
            let trimmed = text.trim_start_matches('\u{feff}').trim();
            if trimmed.is_empty() {
                continue;
            }
            if trimmed.starts_with(';') {
                self.header.absorb(trimmed);
                return Ok(Some(SwfItem::Comment));
            }
            return Ok(Some(match SwfRecord::parse(trimmed, self.line) {
                Ok(r) => {
                    if trimmed.split_ascii_whitespace().nth(FIELDS).is_some() {
                        self.wide_lines += 1;
                    }
                    SwfItem::Job(r)
                }
                Err(e) => SwfItem::Bad(e),
            }));
        }
    }
}

/// A whole trace in memory.
#[derive(Debug, Clone, Default)]
pub struct SwfTrace {
    pub header: SwfHeader,
    /// Well-formed job lines, in file order.
    pub records: Vec<SwfRecord>,
    /// Malformed lines, in file order.
    pub bad: Vec<SwfLineError>,
    /// Job lines with more than 18 fields, of which the first 18 were read.
    pub wide_lines: u64,
}

/// Which SWF field names a job's queue in this trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum QueueField {
    /// Field 15, the usual case.
    Queue,
    /// Field 16, for traces where field 15 is never set but 16 is (CEA Curie).
    Partition,
}

impl SwfTrace {
    /// Reads every line of `input`.
    pub fn read<R: BufRead>(input: R) -> io::Result<Self> {
        let mut reader = SwfReader::new(input);
        let mut records = Vec::new();
        let mut bad = Vec::new();
        while let Some(item) = reader.next_item()? {
            match item {
                SwfItem::Job(r) => records.push(r),
                SwfItem::Bad(e) => bad.push(e),
                SwfItem::Comment => {}
            }
        }
        Ok(Self {
            wide_lines: reader.wide_lines,
            header: reader.header,
            records,
            bad,
        })
    }

    /// The field that names queues: 15, or 16 where 15 is −1 (unknown) on every job
    /// and 16 is not (qbets.md §6).
    pub fn queue_field(&self) -> QueueField {
        let any_queue = self.records.iter().any(|r| r.queue >= 0);
        let any_partition = self.records.iter().any(|r| r.partition >= 0);
        if !any_queue && any_partition {
            QueueField::Partition
        } else {
            QueueField::Queue
        }
    }

    /// The queue number of a record under this trace's queue field.
    pub fn queue_of(&self, field: QueueField, r: &SwfRecord) -> i64 {
        match field {
            QueueField::Queue => r.queue,
            QueueField::Partition => r.partition,
        }
    }

    /// The header's name for queue `n` under the given field, if any.
    pub fn queue_name(&self, field: QueueField, n: i64) -> Option<&str> {
        match field {
            QueueField::Queue => self.header.queue_name(n),
            QueueField::Partition => self.header.partition_name(n),
        }
    }
}

/// Why a trace file could not be read at all. The message names the file and the
/// I/O error's reason; the I/O error is not also given as the `source`, or a chain
/// printer (`{:#}`) would say the reason twice.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: cannot open: {cause}")]
    Open { path: String, cause: io::Error },
    #[error("{path}: cannot read: {cause}")]
    Read { path: String, cause: io::Error },
}

/// Opens an SWF file, plain or gzipped (recognised by its magic bytes, not its name).
/// `wrap` lets the caller interpose on the raw (compressed) byte stream, e.g. to drive a
/// progress bar by bytes read; pass `|r| r` otherwise.
pub fn open<W, F>(path: &Path, wrap: F) -> Result<Box<dyn BufRead>, OpenError>
where
    W: Read + 'static,
    F: FnOnce(File) -> W,
{
    let name = path.display().to_string();
    let file = File::open(path).map_err(|cause| OpenError::Open {
        path: name.clone(),
        cause,
    })?;
    let mut raw = BufReader::with_capacity(1 << 16, wrap(file));
    let magic = raw.fill_buf().map_err(|cause| OpenError::Read {
        path: name.clone(),
        cause,
    })?;
    if magic.starts_with(&[0x1f, 0x8b]) {
        let gz = flate2::bufread::MultiGzDecoder::new(raw);
        Ok(Box::new(BufReader::with_capacity(1 << 16, gz)))
    } else {
        Ok(Box::new(raw))
    }
}

/// Reads a whole trace file (plain or gzipped).
pub fn read_file(path: &Path) -> Result<SwfTrace, OpenError> {
    let input = open(path, |f| f)?;
    SwfTrace::read(input).map_err(|cause| OpenError::Read {
        path: path.display().to_string(),
        cause,
    })
}

/// Writes header comment lines, each prefixed with `; `.
pub fn write_comments<W: Write>(out: &mut W, lines: &[String]) -> io::Result<()> {
    for l in lines {
        if l.is_empty() {
            writeln!(out, ";")?;
        } else {
            writeln!(out, "; {l}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::test_lines::{hostile_field, mutated};
    use proptest::prelude::*;

    const SAMPLE: &str = "\
; Version: 2.2
; UnixStartTime: 956700003
; MaxProcs: 1152
; Queue:  1  express
; Queue:  2  high
; Partition:  1  blue

     1      0    10   100   8  50.5  -1   8  3600  -1  1  3  1  -1  1  1  -1  -1
     2      5     0    20   1  -1    -1   1   600  -1  5  3  1  -1  2  1  -1  -1
     3     -4     0    20   1  -1    -1   1   600  -1  1  3  1  -1  2  1  -1  -1
     4      9     0    20   1  -1    -1   1   600  -1  1  3  1  -1  2  1  -1
     5     10     x    20   1  -1    -1   1   600  -1  1  3  1  -1  2  1  -1  -1
";

    #[test]
    fn reads_header_jobs_and_bad_lines_with_reasons() {
        let t = SwfTrace::read(SAMPLE.as_bytes()).unwrap();
        assert_eq!(t.header.unix_start_time, Some(956700003));
        assert_eq!(t.header.max_procs, Some(1152));
        assert_eq!(t.header.queue_name(1), Some("express"));
        assert_eq!(t.header.partition_name(1), Some("blue"));
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.records[0].line, 8);
        assert_eq!(t.records[0].avg_cpu, 50.5);
        assert_eq!(t.records[0].start(), Some(10));
        assert!(t.records[1].cancelled());
        let reasons: Vec<_> = t.bad.iter().map(|e| (e.line, e.reason.as_str())).collect();
        assert_eq!(
            reasons,
            vec![
                (10, "field 2 (submit time): -4 is negative"),
                (11, "expected 18 fields, found 17"),
                (12, "field 3 (wait time): \"x\" is not an integer"),
            ]
        );
        assert!(t.bad[2].raw.starts_with("5     10     x"));
    }

    /// Issue 22: MetaCentrum/Alea's SWF variant has 21 fields a line; each such line
    /// was refused. The first 18 are read, and the lines are counted (once, not one
    /// warning a line); fewer than 18 is still a damaged line.
    #[test]
    fn lines_with_more_than_18_fields_read_the_first_18_and_are_counted() {
        let text = "; MaxProcs: 8\n\
            1 0 10 100 4 -1 -1 4 3600 -1 1 1 1 -1 1 -1 -1 -1 7 8 9\n\
            2 5 0 50 2 -1 -1 2 1800 -1 1 1 1 -1 1 -1 -1 -1\n\
            3 6 0 50 2 -1 -1 2 1800 -1 1 1 1 -1 1 -1 -1 -1 0 0 0\n\
            4 7 0 50 2 -1 -1 2 1800\n";
        let t = SwfTrace::read(text.as_bytes()).unwrap();
        assert_eq!(t.records.len(), 3, "{:?}", t.bad);
        assert_eq!((t.records[0].job, t.records[0].req_time), (1, 3600));
        assert_eq!(t.wide_lines, 2);
        assert_eq!(t.bad.len(), 1);
        assert_eq!(t.bad[0].reason, "expected 18 fields, found 9");
    }

    #[test]
    fn queue_field_falls_back_to_partition_only_when_queue_is_never_set() {
        let mut a = SwfRecord::unknown(1, 0);
        a.partition = 4;
        let t = SwfTrace {
            records: vec![a.clone()],
            ..Default::default()
        };
        assert_eq!(t.queue_field(), QueueField::Partition);
        assert_eq!(t.queue_of(QueueField::Partition, &a), 4);
        let mut b = a.clone();
        b.queue = 1;
        let t = SwfTrace {
            records: vec![a, b],
            ..Default::default()
        };
        assert_eq!(t.queue_field(), QueueField::Queue);
    }

    #[test]
    fn display_round_trips() {
        let t = SwfTrace::read(SAMPLE.as_bytes()).unwrap();
        for r in &t.records {
            let back = SwfRecord::parse(&r.to_string(), r.line).unwrap();
            assert_eq!(&back, r);
        }
    }

    #[test]
    fn gzip_is_recognised_by_content() {
        use flate2::{Compression, write::GzEncoder};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.swf"); // no .gz: detection is by magic
        let mut enc = GzEncoder::new(File::create(&path).unwrap(), Compression::fast());
        enc.write_all(SAMPLE.as_bytes()).unwrap();
        enc.finish().unwrap();
        let t = read_file(&path).unwrap();
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.bad.len(), 3);
    }

    #[test]
    fn unreadable_file_is_an_error_naming_it() {
        let e = read_file(Path::new("/nonexistent/x.swf")).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/x.swf: cannot open"));
        let dir = tempfile::tempdir().unwrap();
        let e = anyhow::Error::from(read_file(dir.path()).unwrap_err());
        let said = format!("{e:#}");
        assert!(
            said.ends_with(": cannot read: Is a directory (os error 21)"),
            "{said}"
        );
    }

    #[test]
    fn times_beyond_any_trace_are_bad_lines_not_an_overflow() {
        let line = |submit: &str, wait: &str, run: &str, req: &str| {
            format!("1 {submit} {wait} {run} 1 -1 -1 1 {req} -1 1 1 1 -1 1 1 -1 -1")
        };
        let max = MAX_TIME_S.to_string();
        let ok = SwfRecord::parse(&line(&max, &max, &max, &max), 1).unwrap();
        assert_eq!(ok.start(), Some(2 * MAX_TIME_S));
        let big = (MAX_TIME_S + 1).to_string();
        let huge = i64::MAX.to_string();
        for (text, field) in [
            (line(&huge, "0", "0", "60"), "field 2 (submit time)"),
            (line("0", &huge, "0", "60"), "field 3 (wait time)"),
            (line("0", "0", &big, "60"), "field 4 (run time)"),
            (line("0", "0", "0", &huge), "field 9 (requested time)"),
        ] {
            let e = SwfRecord::parse(&text, 7).unwrap_err();
            assert!(
                e.reason.starts_with(field) && e.reason.contains("more than any trace spans"),
                "{e}"
            );
        }
        let mut h = SwfHeader::default();
        h.absorb(&format!("; UnixStartTime: {huge}"));
        assert_eq!(h.unix_start_time, None, "not a date");
        h.absorb(&format!("; UnixStartTime: {}", i64::MIN));
        assert_eq!(h.unix_start_time, None, "not a date either");
        h.absorb("; UnixStartTime: 956700003");
        assert_eq!(h.unix_start_time, Some(956700003));
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_line() {
        let data = "\u{feff}; UnixStartTime: 100\n1 0 0 0 1 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1\n";
        let t = SwfTrace::read(data.as_bytes()).unwrap();
        assert_eq!((t.header.unix_start_time, t.records.len()), (Some(100), 1));
        assert!(t.bad.is_empty(), "{:?}", t.bad);
    }

    #[test]
    fn huge_whole_reals_are_written_as_read() {
        // Used memory 1e300 was written as i64::MAX (a saturating cast) and read back
        // as 9.2e18.
        let text = "1 0 0 0 1 -1 1e300 1 60 -1 1 1 1 -1 1 1 -1 -1";
        let r = SwfRecord::parse(text, 1).unwrap();
        let back = SwfRecord::parse(&r.to_string(), 1).unwrap();
        assert_eq!(back.used_mem, 1e300);
        assert_eq!(back, r);
    }

    #[test]
    fn invalid_utf8_is_a_bad_line_not_an_error() {
        let mut data = b"1 0 0 0 1 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1\n".to_vec();
        data.extend_from_slice(b"\xff\xfe garbage\n");
        let t = SwfTrace::read(&data[..]).unwrap();
        assert_eq!(t.records.len(), 1);
        assert_eq!(t.bad[0].line, 2);
        assert_eq!(t.bad[0].reason, "not valid UTF-8 text");
    }

    /// A job line of the archive's, every field known.
    const LINE: &str = "1 0 10 100 8 50.5 -1 8 3600 -1 1 3 1 -1 1 1 -1 -1";

    proptest! {
        /// A damaged job line is a record or a reason naming what is wrong, never a
        /// panic; a record has its times in range and prints to a line that reads back
        /// to it (reals to the two decimals the archive writes).
        #[test]
        fn job_lines_never_panic(text in prop_oneof![mutated(LINE, " "), any::<String>()]) {
            match SwfRecord::parse(&text, 3) {
                Ok(r) => {
                    prop_assert!(r.submit >= 0);
                    for t in [r.submit, r.wait, r.run, r.req_time, r.think] {
                        prop_assert!(t <= MAX_TIME_S, "{text:?}");
                    }
                    let _ = (r.start(), r.procs(), r.requested_time());
                    let back = SwfRecord::parse(&r.to_string(), 3).map_err(|e| {
                        TestCaseError::fail(format!("{text:?} printed as {r} does not read: {e}"))
                    })?;
                    let near = |a: f64, b: f64| (a - b).abs() <= 0.005 + a.abs() * 1e-15;
                    prop_assert!(
                        near(back.avg_cpu, r.avg_cpu) && near(back.used_mem, r.used_mem)
                            && near(back.req_mem, r.req_mem),
                        "{text:?} printed as {r}"
                    );
                    let ints = |r: &SwfRecord| [r.job, r.submit, r.wait, r.run, r.alloc_procs,
                        r.req_procs, r.req_time, r.status, r.user, r.group, r.executable,
                        r.queue, r.partition, r.preceding, r.think];
                    prop_assert_eq!(ints(&back), ints(&r));
                }
                Err(e) => {
                    prop_assert_eq!(e.line, 3);
                    prop_assert!(!e.reason.is_empty());
                }
            }
        }

        /// Any bytes read as a trace: each non-blank line is a comment, a record or a
        /// bad line, and the header's start is a date (within `MAX_TIME_S`).
        #[test]
        fn traces_never_panic(
            lines in proptest::collection::vec(
                prop_oneof![
                    mutated(LINE, " "),
                    hostile_field().prop_map(|v| format!("; UnixStartTime: {v}")),
                    hostile_field().prop_map(|v| format!("; Queue: {v} q{v}")),
                    hostile_field().prop_map(|v| format!("; MaxProcs: {v}")),
                    any::<String>(),
                ],
                0..8,
            ),
            junk in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut data = lines.join("\n").into_bytes();
            data.extend_from_slice(&junk);
            let t = SwfTrace::read(&data[..]).unwrap();
            let lines = data.split(|&b| b == b'\n').count();
            prop_assert!(t.records.len() + t.bad.len() <= lines);
            if let Some(start) = t.header.unix_start_time {
                prop_assert!((-MAX_TIME_S..=MAX_TIME_S).contains(&start));
            }
            let field = t.queue_field();
            for r in &t.records {
                let _ = t.queue_name(field, t.queue_of(field, r));
            }
        }
    }
}
