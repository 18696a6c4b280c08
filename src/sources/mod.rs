//! Schedulers we read job records from.
//!
//! Each submodule speaks one scheduler's interface. Parsing a response or a log line is a
//! pure function tested on captured fixtures; talking to the scheduler (HTTP, commands,
//! files) lives beside it. Every source reads into the same [`JobRecord`]s and
//! [`RecordReject`]s, and implements [`Source`]: one poll from a cursor. The shared
//! poller (`crate::service::ingest`) owns the interval, timeout, back-off, shutdown and
//! the durable cursor.
//!
//! May import: reqwest, tokio, serde and std (this and `src/submit/` are the only places
//! that talk to schedulers), and the store's plain domain types ([`JobState`]); never
//! sqlx or axum.

pub mod files;
pub mod pbs;
pub mod sacct;
pub mod sge;
pub mod slurm_poll;
pub mod slurm_rest;
pub mod slurmdb_rest;

use std::future::Future;
use std::time::Duration;

pub use crate::store::JobState;

/// One job as a scheduler reports it, before the store assigns ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// The scheduler's job id (unique per site).
    pub job_id: String,
    /// The queue (partition) name; created at the site when new.
    pub queue: String,
    /// Unix seconds.
    pub submit_time: i64,
    /// Unix seconds; `None` while pending (or when the job never ran).
    pub start_time: Option<i64>,
    /// Unix seconds, once ended.
    pub end_time: Option<i64>,
    /// Requested nodes (or processors), when known.
    pub nodes: Option<i64>,
    /// Requested walltime in seconds, when known.
    pub walltime_s: Option<i64>,
    /// Where the job is in its life.
    pub state: JobState,
    /// The scheduler's user, when the source says (slurmrestd, sacct, a push that
    /// carries it): the name, or by the time it is stored a keyed hash of it where
    /// the site's configuration asks. The engine counts a user's own jobs pending
    /// ahead of theirs; it is never shown to other users.
    pub user: Option<String>,
}

/// How far past the service's clock a record's time may lie: a scheduler's clock and
/// the service's may differ a little.
pub const CLOCK_SKEW_S: i64 = 600;

impl JobRecord {
    /// The record, or what the service would refuse of it (a queue name no URL can
    /// carry, times out of order or range or later than `now` allows, sizes not
    /// positive), found where the record's line and text are still known.
    pub fn checked(self, now: i64) -> Result<Self, String> {
        crate::service::check_name(&self.queue).map_err(|e| format!("queue: {e}"))?;
        crate::store::check_job(
            &self.job_id,
            self.submit_time,
            self.start_time,
            self.end_time,
            self.nodes,
            self.walltime_s,
        )?;
        match self.from_the_future(now) {
            Some((field, t)) => Err(crate::service::ingest::future_reason(field, t, now)),
            None => Ok(self),
        }
    }

    /// The first of the record's times (`submit`, `start`, `end`) later than `now` by
    /// more than [`CLOCK_SKEW_S`], with its name: a record that cannot be true yet (a
    /// scheduler's clock far ahead, a date mistyped). Stored, it would be a wait of years
    /// in the history and a queue whose news all came late.
    pub fn from_the_future(&self, now: i64) -> Option<(&'static str, i64)> {
        let latest = now.saturating_add(CLOCK_SKEW_S);
        [
            ("submit", Some(self.submit_time)),
            ("start", self.start_time),
            ("end", self.end_time),
        ]
        .into_iter()
        .find_map(|(name, t)| t.filter(|&t| t > latest).map(|t| (name, t)))
    }

    /// The latest event this record tells of (submit, start or end).
    pub fn last_event(&self) -> i64 {
        [Some(self.submit_time), self.start_time, self.end_time]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(self.submit_time)
    }
}

/// The queue of a Slurm job: a job submitted to several partitions lists them all
/// (`debug,long`) while pending; it is counted in the first (once it runs, Slurm names
/// the one it runs in).
pub fn slurm_queue(partition: &str) -> &str {
    partition.split(',').next().unwrap_or("").trim()
}

/// A record that could not be read, with where it was and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordReject {
    /// Line (or record) number in its source, when it has lines.
    pub line: Option<i64>,
    /// The record as received.
    pub raw: String,
    /// Why it was refused.
    pub reason: String,
}

/// What one poll read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// Well-formed records.
    pub records: Vec<JobRecord>,
    /// Records kept aside.
    pub rejects: Vec<RecordReject>,
    /// Where the next poll resumes (`None`: the source keeps no cursor, or it did not
    /// move).
    pub cursor: Option<String>,
    /// Whether more is ready at once (a file or window only partly read): the poller
    /// polls again without waiting.
    pub more: bool,
    /// When the records are every job the scheduler holds now (slurmrestd's whole job
    /// list): the ids it listed, rejected ones included. A stored job still open
    /// (pending or running) that is not among them has left the scheduler while this
    /// service did not see it go (it keeps ended jobs only `MinJobAge` seconds), and
    /// is closed by the poller (`crate::service::ingest`) instead of staying pending
    /// for ever.
    pub listed: Option<std::collections::HashSet<String>>,
    /// Queues' limits as the scheduler states them (slurmrestd's partitions), when
    /// this poll read them: stored (where `[[sites.queues]]` does not state them) so
    /// that a job beyond them gets no bound.
    pub limits: Vec<QueueLimitsSeen>,
    /// What the source says about itself, for its health (e.g. the slurmrestd API
    /// version it chose); `None` leaves the last one said.
    pub detail: Option<String>,
}

/// A queue's limits as its scheduler states them, each as
/// [`slurm_rest::partitions::Reported`]: `None` not said, `Some(None)` unlimited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueLimitsSeen {
    /// The queue (partition).
    pub queue: String,
    /// Most nodes one job may ask for.
    pub max_nodes: Option<Option<i64>>,
    /// Longest walltime accepted, seconds.
    pub max_walltime_s: Option<Option<i64>>,
    /// Nodes the queue's jobs can reach in all.
    pub total_nodes: Option<Option<i64>>,
}

impl Batch {
    /// Takes what one line read at `now` parsed to: a record, nothing (`Ok(None)`: a
    /// comment, a line of no job) or the reason it could not be read. A record the
    /// service would refuse is kept aside here too, so that its reject keeps the line;
    /// `reject` makes a reject from a reason.
    pub fn take(
        &mut self,
        parsed: Result<Option<JobRecord>, String>,
        now: i64,
        reject: impl FnOnce(String) -> RecordReject,
    ) {
        match parsed.and_then(|r| r.map(|r| r.checked(now)).transpose()) {
            Ok(Some(r)) => self.records.push(r),
            Ok(None) => {}
            Err(reason) => self.rejects.push(reject(reason)),
        }
    }
}

/// Why a poll failed as a whole (a remote down, slow, or answering garbage).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

impl SourceError {
    /// An error from any displayable cause.
    pub fn new(e: impl std::fmt::Display) -> Self {
        SourceError(e.to_string())
    }
}

/// A scheduler interface the shared poller can run.
pub trait Source: Send + 'static {
    /// The kind (`slurm_rest`, `sacct`, ...), as in the configuration's `type`.
    fn kind(&self) -> &'static str;

    /// Time between polls.
    fn interval(&self) -> Duration;

    /// Longest a poll may take before it counts as failed.
    fn timeout(&self) -> Duration {
        Duration::from_secs(60)
    }

    /// Reads what is new since `cursor` (the last [`Batch::cursor`] stored, `None` the
    /// first time). `now` is Unix seconds. Returning records already returned before is
    /// harmless: writes are idempotent.
    fn poll(
        &mut self,
        cursor: Option<String>,
        now: i64,
    ) -> impl Future<Output = Result<Batch, SourceError>> + Send;
}

/// Parses Slurm-style and PBS-style durations: `[D-]HH:MM:SS`, `MM:SS`, or seconds.
/// `None` for anything else, including a duration too long to count in seconds.
pub fn parse_duration(text: &str) -> Option<i64> {
    let t = text.trim();
    // Whether days are given, not whether they are 0: after `D-` one number is hours
    // and two are hours and minutes, even in `0-05` (five hours) or `0-10:30`.
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d.parse::<i64>().ok()?), r),
        None => (None, t),
    };
    let parts: Vec<i64> = rest
        .split(':')
        .map(|p| p.parse::<i64>().ok().filter(|v| *v >= 0))
        .collect::<Option<_>>()?;
    let (h, m, s) = match (days, parts.as_slice()) {
        (None, &[s]) => (0, 0, s),
        (Some(_), &[h]) => (h, 0, 0),
        (None, &[m, s]) => (0, m, s),
        (Some(_), &[h, m]) => (h, m, 0),
        (_, &[h, m, s]) => (h, m, s),
        _ => return None,
    };
    days.unwrap_or(0)
        .checked_mul(86_400)?
        .checked_add(h.checked_mul(3600)?)?
        .checked_add(m.checked_mul(60)?)?
        .checked_add(s)
}

/// What the line-reading sources' tests share.
#[cfg(test)]
pub(crate) mod test_lines {
    use proptest::prelude::*;

    use super::{Batch, JobRecord};

    /// What every job a line parser reads must hold, whatever the line: an id, a queue,
    /// a submission time, and sizes above 0 where they are given; and the service's
    /// check of it answers (a record or a reason, never a panic).
    pub fn well_formed(j: &JobRecord) -> Result<(), TestCaseError> {
        prop_assert!(!j.job_id.is_empty() && !j.queue.is_empty(), "{j:?}");
        prop_assert!(j.submit_time > 0, "{j:?}");
        prop_assert!(j.nodes.is_none_or(|n| n > 0), "{j:?}");
        prop_assert!(j.walltime_s.is_none_or(|w| w > 0), "{j:?}");
        let _ = j.clone().checked(1_800_000_000);
        Ok(())
    }

    /// Lines numbered from 1, as a log file reader hands them over.
    pub fn numbered(lines: &[&str]) -> Vec<(u64, String)> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, l.to_string()))
            .collect()
    }

    /// Each reject's line number and reason, in order.
    pub fn reasons(b: &Batch) -> Vec<(Option<i64>, &str)> {
        b.rejects
            .iter()
            .map(|r| (r.line, r.reason.as_str()))
            .collect()
    }

    /// Field values that break a parser trusting its input: the ends of `i64` and just
    /// past them, the 32- and 64-bit sentinels, signs and separators alone, times out of
    /// any calendar, non-ASCII, multi-byte and invisible text, control characters, and
    /// runs of digits far longer than any number.
    pub fn hostile_field() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => proptest::sample::select(vec![
                "9223372036854775807",
                "-9223372036854775808",
                "9223372036854775808",
                "-9223372036854775809",
                "18446744073709551615",
                "4294967295",
                "4294967294",
                "100000000001",
                "253402300800",
                "-62167219201",
                "-1",
                "0",
                "+1",
                "",
                "-",
                "+",
                ":",
                ";",
                "|",
                "=",
                ",",
                " ",
                "\t",
                "\0",
                "\u{7f}",
                "\u{feff}",
                "\u{2003}",
                "é",
                "日本語",
                "😀",
                "1e308",
                "NaN",
                "-0",
                "Unknown",
                "UNLIMITED",
                "INFINITY",
                "9999-12-31T23:59:59",
                "0000-01-01T00:00:00",
                "2024-02-30T00:00:00",
                "9223372036854775807-00:00:00",
                "00:9223372036854775807:00",
                "153722867280912930:00:00",
            ])
            .prop_map(String::from),
            2 => any::<i64>().prop_map(|v| v.to_string()),
            2 => ".{0,12}",
            1 => (1usize..4_000).prop_map(|n| "9".repeat(n)),
        ]
    }

    /// One change to a line split at its separator.
    #[derive(Debug, Clone)]
    pub enum Edit {
        /// The field at this index (modulo the count) becomes this text.
        Replace(usize, String),
        /// The value after the field's first `=` becomes this text (the whole field
        /// where it has no `=`): a `key=value` attribute keeps its key.
        Value(usize, String),
        /// Two fields change places.
        Swap(usize, usize),
        /// The field goes.
        Remove(usize),
        /// The field comes twice.
        Duplicate(usize),
        /// The line is cut after this many characters (modulo its length).
        Truncate(usize),
    }

    /// `base` (a valid line) with one to five [`Edit`]s of its `sep`-separated fields,
    /// repeated up to 40 times now and then for very long lines.
    pub fn mutated(base: &'static str, sep: &'static str) -> impl Strategy<Value = String> {
        let edit = prop_oneof![
            4 => (any::<usize>(), hostile_field()).prop_map(|(i, s)| Edit::Replace(i, s)),
            4 => (any::<usize>(), hostile_field()).prop_map(|(i, s)| Edit::Value(i, s)),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Edit::Swap(i, j)),
            1 => any::<usize>().prop_map(Edit::Remove),
            1 => any::<usize>().prop_map(Edit::Duplicate),
            1 => any::<usize>().prop_map(Edit::Truncate),
        ];
        let repeat = prop_oneof![8 => Just(1usize), 1 => 2usize..40];
        (proptest::collection::vec(edit, 1..6), repeat).prop_map(move |(edits, repeat)| {
            let mut f: Vec<String> = base.split(sep).map(String::from).collect();
            for e in edits {
                let n = f.len().max(1);
                match e {
                    Edit::Replace(i, s) if !f.is_empty() => f[i % n] = s,
                    Edit::Value(i, s) if !f.is_empty() => {
                        let field = &mut f[i % n];
                        *field = match field.split_once('=') {
                            Some((k, _)) => format!("{k}={s}"),
                            None => s,
                        };
                    }
                    Edit::Swap(i, j) if !f.is_empty() => f.swap(i % n, j % n),
                    Edit::Remove(i) if !f.is_empty() => {
                        f.remove(i % n);
                    }
                    Edit::Duplicate(i) if !f.is_empty() => {
                        let d = f[i % n].clone();
                        f.insert(i % n, d);
                    }
                    Edit::Truncate(at) => {
                        let line = f.join(sep);
                        let keep = at % (line.chars().count() + 1);
                        let cut: String = line.chars().take(keep).collect();
                        f = cut.split(sep).map(String::from).collect();
                    }
                    _ => {}
                }
            }
            vec![f.join(sep); repeat].join(sep)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations_read_in_every_form() {
        assert_eq!(parse_duration("01:00:00"), Some(3600));
        assert_eq!(parse_duration("1-02:00:00"), Some(93_600));
        assert_eq!(parse_duration("10:30"), Some(630));
        assert_eq!(parse_duration("90"), Some(90));
        assert_eq!(parse_duration("2-12"), Some(216_000));
        // Zero days still make what follows hours (and minutes): `0-05` was read as five
        // seconds and `0-10:30` as ten and a half minutes.
        assert_eq!(parse_duration("0-05"), Some(18_000));
        assert_eq!(parse_duration("0-10:30"), Some(37_800));
        assert_eq!(parse_duration("0-00:00:30"), Some(30));
        assert_eq!(parse_duration("UNLIMITED"), None);
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("1:2:3:4"), None);
        // Too long to count in seconds: not a duration, never an overflow.
        assert_eq!(parse_duration("9999999999999999-00:00:00"), None);
        assert_eq!(parse_duration("9999999999999999:00:00"), None);
        assert_eq!(parse_duration("153722867280912931:00"), None);
        assert_eq!(parse_duration("9223372036854775807"), Some(i64::MAX));
    }

    /// The seconds `[D-]HH:MM:SS` stands for, counted in `i128` (no overflow): what
    /// [`parse_duration`] must give whenever it fits in `i64`.
    fn seconds(d: i64, h: i64, m: i64, s: i64) -> Option<i64> {
        let total = i128::from(d) * 86_400 + i128::from(h) * 3600 + i128::from(m) * 60;
        i64::try_from(total + i128::from(s)).ok()
    }

    proptest! {
        /// Any text is a duration or `None`, never a panic, and never a negative one.
        #[test]
        fn durations_never_panic(text in any::<String>()) {
            if let Some(s) = parse_duration(&text) {
                prop_assert!(s >= 0, "{text:?} read as {s}");
            }
        }

        /// Every part up to the ends of `i64`: the exact count, or `None` when it does
        /// not fit or a part is negative.
        #[test]
        fn durations_count_exactly_or_not_at_all(
            d in any::<i64>(),
            h in any::<i64>(),
            m in any::<i64>(),
            s in any::<i64>(),
            small in 0i64..100,
        ) {
            // Negative days read as no duration: `-` is the days' separator.
            let want = |d: i64, h, m, s| {
                if d < 0 || h < 0 || m < 0 || s < 0 { None } else { seconds(d, h, m, s) }
            };
            for (d, h, m, s) in [(d, h, m, s), (small, h, small, small), (0, small, m, s)] {
                let read = |text: String| parse_duration(&text);
                prop_assert_eq!(read(format!("{d}-{h}:{m}:{s}")), want(d, h, m, s));
                prop_assert_eq!(read(format!("{h}:{m}:{s}")), want(0, h, m, s));
                prop_assert_eq!(read(format!("{m}:{s}")), want(0, 0, m, s));
                prop_assert_eq!(read(format!("{d}-{h}")), want(d, h, 0, 0));
            }
        }
    }
}
