//! The `sacct` source: Slurm's accounting database read with
//! `sacct --parsable2 --noheader --allusers --allocations --duplicates` and the fixed
//! field list [`FIELDS`], one time window per run (`--starttime`/`--endtime`), run
//! locally or through ssh (the configured command, e.g. `["ssh", "login1", "TZ=UTC",
//! "SLURM_TIME_FORMAT=%s", "sacct"]`: ssh passes no environment, and sacct reads
//! `--starttime`/`--endtime` in its own time zone).
//! Times are asked for as Unix seconds (`SLURM_TIME_FORMAT=%s`); ISO times (a remote
//! that ignores the variable) are read as UTC.
//!
//! What real sacct output (Slurm 22.05 with slurmdbd) holds, and how it is read:
//! - a job's steps (`123.batch`, `123.0`) are left out by `--allocations`, and skipped
//!   should they come anyway;
//! - a pending job's Start and End are `Unknown`; a running job's End is `Unknown`;
//! - a job cancelled while pending has never run, yet sacct shows either Start `None`
//!   or Start == End == the cancel time: AllocNodes `0` tells it never got an
//!   allocation, so it is stored without a start (its End, the cancel time, is kept);
//! - a job submitted to several partitions lists them all (`debug,long`) while pending;
//! - records reach slurmdbd a few seconds after the event, hence the overlap between
//!   windows;
//! - a window selects the jobs that were eligible, running or ended in it, so a long
//!   job is read again in every window it spans and its record updated in place.

use std::time::Duration;

use super::{Batch, JobRecord, JobState, RecordReject, Source, SourceError, parse_duration};

/// The fields asked for, in order.
/// `User` comes last, so that the output of a site wrapper that leaves it out (nine
/// fields) still reads, without users.
pub const FIELDS: &str =
    "JobIDRaw,Partition,Submit,Start,End,Timelimit,NNodes,State,AllocNodes,User";

/// How many fields [`FIELDS`] names.
const FIELD_COUNT: usize = 10;

/// The arguments after the configured command for the window `[from, to)`.
pub fn arguments(from: i64, to: i64) -> Vec<String> {
    vec![
        "--parsable2".into(),
        "--noheader".into(),
        "--allusers".into(),
        "--allocations".into(),
        "--duplicates".into(),
        format!("--format={FIELDS}"),
        format!("--starttime={}", iso(from)),
        format!("--endtime={}", iso(to)),
    ]
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC (what sacct's `--starttime` takes; the command runs
/// with `TZ=UTC`).
pub(crate) fn iso(unix: i64) -> String {
    let t =
        time::OffsetDateTime::from_unix_timestamp(unix).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        t.month() as u8,
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// A time field: Unix seconds, or ISO `YYYY-MM-DDTHH:MM:SS` read as UTC; `Unknown`,
/// `None` and empty are `None`, and so is a time at or before 1970 in either form
/// (Slurm's 0 for "not yet"; no job ran before there was a Slurm).
fn time_field(text: &str, name: &str) -> Result<Option<i64>, String> {
    let t = text.trim();
    if t.is_empty() || t == "Unknown" || t == "None" {
        return Ok(None);
    }
    if let Ok(v) = t.parse::<i64>() {
        return Ok((v > 0).then_some(v));
    }
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    time::PrimitiveDateTime::parse(t, format)
        .map(|d| Some(d.assume_utc().unix_timestamp()).filter(|&v| v > 0))
        .map_err(|_| format!("{name} {t:?} is neither Unix seconds nor YYYY-MM-DDTHH:MM:SS"))
}

/// The store's state for sacct's (`CANCELLED by 1000` reads as `CANCELLED`).
pub(crate) fn state(text: &str) -> JobState {
    match text.split_whitespace().next().unwrap_or("") {
        "PENDING" | "REQUEUED" => JobState::Pending,
        "RUNNING" | "SUSPENDED" | "COMPLETING" | "RESIZING" => JobState::Running,
        "COMPLETED" => JobState::Completed,
        // A federated job's copy on a cluster that did not run it: it left that queue.
        "CANCELLED" | "REVOKED" => JobState::Cancelled,
        "FAILED" | "TIMEOUT" | "NODE_FAIL" | "PREEMPTED" | "BOOT_FAIL" | "DEADLINE"
        | "OUT_OF_MEMORY" => JobState::Failed,
        _ => JobState::Unknown,
    }
}

/// Parses one line of output (`Ok(None)` for an empty line or a job step).
pub fn parse_line(line: &str) -> Result<Option<JobRecord>, String> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let f: Vec<&str> = line.split('|').collect();
    if f.len() != FIELD_COUNT && f.len() != FIELD_COUNT - 1 {
        return Err(format!(
            "{} '|'-separated fields, expected {FIELD_COUNT} ({FIELDS}; {} without User)",
            f.len(),
            FIELD_COUNT - 1
        ));
    }
    let user = f
        .get(9)
        .map(|u| u.trim())
        .filter(|u| !u.is_empty())
        .map(str::to_string);
    let id = f[0].trim();
    if id.contains('.') {
        // A step (`123.batch`): --allocations should have left it out.
        return Ok(None);
    }
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("JobIDRaw {id:?} is not a job id"));
    }
    let queue = super::slurm_queue(f[1]);
    if queue.is_empty() {
        return Err("empty Partition".into());
    }
    let submit = time_field(f[2], "Submit")?.ok_or("Submit is unknown")?;
    let st = state(f[7]);
    let alloc_nodes = match f[8].trim() {
        "" => None,
        n => Some(
            n.parse::<i64>()
                .map_err(|_| format!("AllocNodes {n:?} is not a number"))?,
        ),
    };
    // Never allocated (cancelled while pending): the Start sacct shows, if any, is the
    // cancel time, not a start. A requeued job waits again: its earlier run's times go.
    let start = if st == JobState::Pending || alloc_nodes == Some(0) {
        None
    } else {
        time_field(f[3], "Start")?
    };
    let end = match st {
        JobState::Pending | JobState::Running => None,
        _ => time_field(f[4], "End")?,
    };
    let walltime_s = match f[5].trim() {
        "" | "UNLIMITED" | "Partition_Limit" | "INVALID" => None,
        w => Some(
            parse_duration(w)
                .filter(|s| *s > 0)
                .ok_or_else(|| format!("Timelimit {w:?} is not a duration"))?,
        ),
    };
    let nodes = match f[6].trim() {
        "" => None,
        n => Some(
            n.parse::<i64>()
                .map_err(|_| format!("NNodes {n:?} is not a number"))?,
        )
        .filter(|n| *n > 0),
    };
    Ok(Some(JobRecord {
        job_id: id.to_string(),
        queue: queue.to_string(),
        submit_time: submit,
        start_time: start,
        end_time: end,
        nodes,
        walltime_s,
        state: st,
        user,
    }))
}

/// Reads the output of a run at `now` into a batch (rejects carry their line number in
/// the output).
pub fn read_output(text: &str, now: i64) -> Batch {
    let mut batch = Batch::default();
    for (i, line) in text.lines().enumerate() {
        batch.take(parse_line(line), now, |reason| RecordReject {
            line: None,
            raw: line.to_string(),
            reason: format!("line {} of sacct's output: {reason}", i + 1),
        });
    }
    batch
}

/// The window the next run asks for: from the cursor (less the overlap; or `backfill`
/// before now the first time) to at most `window` later, and not past now.
pub fn next_window(
    cursor: Option<i64>,
    now: i64,
    window: i64,
    overlap: i64,
    backfill: i64,
) -> (i64, i64) {
    let from = match cursor {
        Some(c) => c.saturating_sub(overlap).min(now),
        None => now.saturating_sub(backfill),
    };
    (from, from.saturating_add(window).min(now).max(from))
}

/// The windows of an accounting source (`sacct`, `slurmdb_rest`): each poll reads
/// `[from, to]` from the durable cursor as [`next_window`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    /// Longest window one poll asks for, seconds.
    pub window_s: i64,
    /// Seconds each poll reaches back, for late records.
    pub overlap_s: i64,
    /// Where the first poll starts, seconds before now.
    pub backfill_s: i64,
}

impl Windows {
    /// The window to read after `cursor` (as stored: the last window's end) at `now`.
    pub fn next(&self, cursor: Option<String>, now: i64) -> (i64, i64) {
        let cursor = cursor.and_then(|c| c.parse::<i64>().ok());
        next_window(cursor, now, self.window_s, self.overlap_s, self.backfill_s)
    }

    /// Marks `batch` as the window ending at `to`: its cursor, and whether more is due.
    pub fn close(batch: &mut Batch, to: i64, now: i64) {
        batch.cursor = Some(to.to_string());
        batch.more = to < now;
    }
}

/// A `sacct` source.
#[derive(Debug, Clone)]
pub struct SacctRunner {
    /// The command and its first arguments.
    pub command: Vec<String>,
    /// Time between runs.
    pub interval: Duration,
    /// The windows the runs ask for.
    pub windows: Windows,
    /// Longest a run may take.
    pub timeout: Duration,
}

impl Source for SacctRunner {
    fn kind(&self) -> &'static str {
        "sacct"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn poll(&mut self, cursor: Option<String>, now: i64) -> Result<Batch, SourceError> {
        let (from, to) = self.windows.next(cursor, now);
        let (program, first) = self
            .command
            .split_first()
            .ok_or_else(|| SourceError("the sacct command is empty".into()))?;
        let out = tokio::process::Command::new(program)
            .args(first)
            .args(arguments(from, to))
            .env("SLURM_TIME_FORMAT", "%s")
            .env("TZ", "UTC")
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| SourceError(format!("cannot run {program:?}: {e}")))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(SourceError(format!(
                "{program} exited with {}: {}",
                out.status,
                err.trim().chars().take(500).collect::<String>()
            )));
        }
        let mut batch = read_output(&String::from_utf8_lossy(&out.stdout), now);
        Windows::close(&mut batch, to, now);
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::test_lines::{mutated, well_formed};
    use proptest::prelude::*;

    #[test]
    fn captured_output_reads() {
        // Lines 1-7 as the real `sacct --parsable2 --noheader -a -X -D --format=FIELDS`
        // printed them with SLURM_TIME_FORMAT=%s (Slurm 22.05.8 with slurmdbd on
        // MariaDB, scripts/local-slurm); line 3 is a step as it comes without -X.
        let text = "\
1|debug|1795259946|1795259948|1795259950|00:05:00|1|COMPLETED|1
2|long|1795259946|1795259948|1795259951|01:30:00|1|COMPLETED|1
1.batch||1795259948|1795259948|1795259950||1|COMPLETED|1
3|debug|1795259946|None|1795259967|00:01:00|1|CANCELLED by 0|0
4|long|1795259967|1795259968|Unknown|00:10:00|1|RUNNING|1
5|debug|1795259967|1795259969|1795259969|00:10:00|1|CANCELLED by 0|0
6|debug,long|1795259967|Unknown|Unknown|00:10:00|1|PENDING|0
45|debug|2025-11-21T08:00:10|2025-11-21T08:00:20|2025-11-21T08:01:00|UNLIMITED|2|TIMEOUT|2

46|debug|1763712000|1763712030|1763712090|soon|1|COMPLETED|1
47|debug|1763712000
48|debug|1763712000|1763712030|1763712090|00:10:00|1|COMPLETED|one
";
        let b = read_output(text, 1_800_000_000);
        let got: Vec<_> = b
            .records
            .iter()
            .map(|r| {
                (
                    r.job_id.as_str(),
                    r.queue.as_str(),
                    r.submit_time,
                    r.start_time,
                    r.end_time,
                    r.walltime_s,
                    r.nodes,
                    r.state,
                )
            })
            .collect();
        let t = 1795259946;
        assert_eq!(
            got,
            vec![
                (
                    "1",
                    "debug",
                    t,
                    Some(t + 2),
                    Some(t + 4),
                    Some(300),
                    Some(1),
                    JobState::Completed
                ),
                (
                    "2",
                    "long",
                    t,
                    Some(t + 2),
                    Some(t + 5),
                    Some(5400),
                    Some(1),
                    JobState::Completed
                ),
                // Cancelled while pending: no start, the cancel time as its end.
                (
                    "3",
                    "debug",
                    t,
                    None,
                    Some(t + 21),
                    Some(60),
                    Some(1),
                    JobState::Cancelled
                ),
                (
                    "4",
                    "long",
                    t + 21,
                    Some(t + 22),
                    None,
                    Some(600),
                    Some(1),
                    JobState::Running
                ),
                // Start == End == the cancel time, but it never got a node.
                (
                    "5",
                    "debug",
                    t + 21,
                    None,
                    Some(t + 23),
                    Some(600),
                    Some(1),
                    JobState::Cancelled
                ),
                (
                    "6",
                    "debug",
                    t + 21,
                    None,
                    None,
                    Some(600),
                    Some(1),
                    JobState::Pending
                ),
                (
                    "45",
                    "debug",
                    1763712010,
                    Some(1763712020),
                    Some(1763712060),
                    None,
                    Some(2),
                    JobState::Failed
                ),
            ]
        );
        let why: Vec<&str> = b.rejects.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            why,
            vec![
                "line 10 of sacct's output: Timelimit \"soon\" is not a duration",
                "line 11 of sacct's output: 3 '|'-separated fields, expected 10 (JobIDRaw,Partition,Submit,Start,End,Timelimit,NNodes,State,AllocNodes,User; 9 without User)",
                "line 12 of sacct's output: AllocNodes \"one\" is not a number",
            ]
        );
    }

    #[test]
    fn the_user_is_read_when_sacct_gives_it_and_absent_otherwise() {
        let with = parse_line(&format!("{DONE}|alice")).unwrap().unwrap();
        assert_eq!(with.user.as_deref(), Some("alice"));
        let blank = parse_line(&format!("{DONE}| ")).unwrap().unwrap();
        assert_eq!(blank.user, None);
        let without = parse_line(DONE).unwrap().unwrap();
        assert_eq!(without.user, None);
        assert_eq!(
            (with.job_id, with.submit_time),
            (without.job_id, without.submit_time)
        );
    }

    #[test]
    fn iso_times_before_1970_are_not_times_as_in_unix_seconds() {
        // `0000-01-01T00:00:00` was a submission in year 0 (accepted by the store's
        // range), where Unix seconds `0` or less are "unknown".
        for submit in ["0000-01-01T00:00:00", "1970-01-01T00:00:00", "0", "-5"] {
            assert_eq!(
                parse_line(&format!(
                    "7|debug|{submit}|Unknown|Unknown|00:10:00|1|PENDING|0"
                )),
                Err("Submit is unknown".to_string()),
                "{submit}"
            );
        }
        let r = parse_line("7|debug|1700000000|1960-01-01T00:00:00|1700000300|00:10:00|1|FAILED|1")
            .unwrap()
            .unwrap();
        assert_eq!((r.start_time, r.end_time), (None, Some(1700000300)));
    }

    #[test]
    fn states_that_leave_the_queue_end_the_wait() {
        // A federated job's copy revoked on this cluster left the queue without running
        // here: not a job waiting for ever.
        let r = parse_line("88|debug|1700000000|None|1700000300|01:00:00|1|REVOKED|0")
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.state, r.start_time, r.end_time),
            (JobState::Cancelled, None, Some(1700000300))
        );
        for (name, want) in [
            ("REQUEUED", JobState::Pending),
            ("RESIZING", JobState::Running),
            ("CANCELLED by 1000", JobState::Cancelled),
            ("PREEMPTED", JobState::Failed),
            ("OUT_OF_MEMORY", JobState::Failed),
            ("SOMETHING_NEW", JobState::Unknown),
        ] {
            assert_eq!(state(name), want, "{name}");
        }
    }

    #[test]
    fn windows_advance_with_overlap_and_catch_up_in_steps() {
        assert_eq!(next_window(None, 10_000, 3_000, 100, 5_000), (5_000, 8_000));
        assert_eq!(
            next_window(Some(8_000), 10_000, 3_000, 100, 5_000),
            (7_900, 10_000)
        );
        assert_eq!(
            next_window(Some(10_000), 10_000, 3_000, 100, 5_000),
            (9_900, 10_000)
        );
        let args = arguments(0, 86_400);
        assert!(args.contains(&"--starttime=1970-01-01T00:00:00".to_string()));
        assert!(args.contains(&"--endtime=1970-01-02T00:00:00".to_string()));
    }

    /// Lines as sacct prints them: a finished job, one with ISO times, a pending one
    /// submitted to two partitions.
    const DONE: &str = "1|debug|1795259946|1795259948|1795259950|1-00:05:00|1|COMPLETED|1";
    const ISO: &str = "45|debug|2025-11-21T08:00:10|2025-11-21T08:00:20|2025-11-21T08:01:00|UNLIMITED|2|TIMEOUT|2";
    const PENDING: &str = "6|debug,long|1795259967|Unknown|Unknown|00:10:00|1|PENDING|0";

    proptest! {
        /// A damaged line (its fields between `|`, or arbitrary text) is a job, nothing
        /// or a reason, never a panic; a job has an id, a queue and a submission time,
        /// and the service's check of it answers too.
        #[test]
        fn damaged_lines_never_panic(text in prop_oneof![
            mutated(DONE, "|"),
            mutated(ISO, "|"),
            mutated(PENDING, "|"),
            mutated(ISO, "-"),
            any::<String>(),
        ]) {
            match parse_line(&text) {
                Ok(Some(j)) => well_formed(&j)?,
                Ok(None) => {}
                Err(reason) => prop_assert!(!reason.is_empty()),
            }
            let b = read_output(&format!("{text}\n{DONE}"), 1_800_000_000);
            prop_assert!(b.records.len() + b.rejects.len() <= text.lines().count() + 1);
        }
    }
}
