//! The `sacct` source: Slurm's accounting database read with
//! `sacct --parsable2 --noheader --allusers --allocations --duplicates` and the fixed
//! field list [`FIELDS`], one time window per run (`--starttime`/`--endtime`), run
//! locally or through ssh (the configured command, e.g. `["ssh", "login1", "sacct"]`).
//! Times are asked for as Unix seconds (`SLURM_TIME_FORMAT=%s`); ISO times (a remote
//! that ignores the variable) are read as UTC.

use std::time::Duration;

use super::{Batch, JobRecord, JobState, RecordReject, Source, SourceError, parse_duration};

/// The fields asked for, in order.
pub const FIELDS: &str = "JobIDRaw,Partition,Submit,Start,End,Timelimit,NNodes,State";

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
fn iso(unix: i64) -> String {
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
/// `None` and empty are `None`.
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
        .map(|d| Some(d.assume_utc().unix_timestamp()))
        .map_err(|_| format!("{name} {t:?} is neither Unix seconds nor YYYY-MM-DDTHH:MM:SS"))
}

/// The store's state for sacct's (`CANCELLED by 1000` reads as `CANCELLED`).
fn state(text: &str) -> JobState {
    match text.split_whitespace().next().unwrap_or("") {
        "PENDING" | "REQUEUED" => JobState::Pending,
        "RUNNING" | "SUSPENDED" | "COMPLETING" | "RESIZING" => JobState::Running,
        "COMPLETED" => JobState::Completed,
        "CANCELLED" => JobState::Cancelled,
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
    if f.len() != 8 {
        return Err(format!(
            "{} '|'-separated fields, expected 8 ({FIELDS})",
            f.len()
        ));
    }
    let id = f[0].trim();
    if id.contains('.') {
        // A step (`123.batch`): --allocations should have left it out.
        return Ok(None);
    }
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("JobIDRaw {id:?} is not a job id"));
    }
    // A job submitted to several partitions lists them all; it ran in the first.
    let queue = f[1].split(',').next().unwrap_or("").trim();
    if queue.is_empty() {
        return Err("empty Partition".into());
    }
    let submit = time_field(f[2], "Submit")?.ok_or("Submit is unknown")?;
    let st = state(f[7]);
    let start = if st == JobState::Pending {
        None
    } else {
        time_field(f[3], "Start")?
    };
    let end = if start.is_some() && st != JobState::Running {
        time_field(f[4], "End")?
    } else {
        None
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
    }))
}

/// Reads a run's output into a batch (rejects carry their line number in the output).
pub fn read_output(text: &str) -> Batch {
    let mut batch = Batch::default();
    for (i, line) in text.lines().enumerate() {
        match parse_line(line) {
            Ok(Some(r)) => batch.records.push(r),
            Ok(None) => {}
            Err(reason) => batch.rejects.push(RecordReject {
                line: None,
                raw: line.to_string(),
                reason: format!("line {} of sacct's output: {reason}", i + 1),
            }),
        }
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
        Some(c) => (c - overlap).min(now),
        None => now - backfill,
    };
    (from, (from + window).min(now).max(from))
}

/// A `sacct` source.
#[derive(Debug, Clone)]
pub struct SacctRunner {
    /// The command and its first arguments.
    pub command: Vec<String>,
    /// Time between runs.
    pub interval: Duration,
    /// Longest window one run asks for, seconds.
    pub window_s: i64,
    /// Seconds each run reaches back, for late records.
    pub overlap_s: i64,
    /// Where the first run starts, seconds before now.
    pub backfill_s: i64,
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
        let cursor = cursor.and_then(|c| c.parse::<i64>().ok());
        let (from, to) = next_window(cursor, now, self.window_s, self.overlap_s, self.backfill_s);
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
        let mut batch = read_output(&String::from_utf8_lossy(&out.stdout));
        batch.cursor = Some(to.to_string());
        batch.more = to < now;
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_output_reads() {
        // As `sacct --parsable2 --noheader -a -X -D --format=FIELDS` prints with
        // SLURM_TIME_FORMAT=%s (Slurm 22.05).
        let text = "\
41|debug|1763712000|1763712030|1763712090|00:10:00|1|COMPLETED
42|long|1763712000|1763712100|Unknown|1-00:00:00|2|RUNNING
43|debug|1763712005|Unknown|Unknown|00:05:00|1|PENDING
44|debug|1763712006|None|1763712050|00:05:00|1|CANCELLED by 0
45|debug,long|2025-11-21T08:00:10|2025-11-21T08:00:20|2025-11-21T08:01:00|UNLIMITED|1|TIMEOUT
46|debug|1763712000|1763712030|1763712090|soon|1|COMPLETED
47|debug|1763712000
";
        let b = read_output(text);
        assert_eq!(b.records.len(), 5);
        let r = &b.records;
        assert_eq!(
            (
                r[0].submit_time,
                r[0].start_time,
                r[0].end_time,
                r[0].walltime_s
            ),
            (1763712000, Some(1763712030), Some(1763712090), Some(600))
        );
        assert_eq!(
            (r[1].end_time, r[1].state, r[1].nodes),
            (None, JobState::Running, Some(2))
        );
        assert_eq!((r[2].start_time, r[2].state), (None, JobState::Pending));
        assert_eq!(
            (r[3].start_time, r[3].end_time, r[3].state),
            (None, None, JobState::Cancelled)
        );
        assert_eq!(r[4].queue, "debug");
        assert_eq!(r[4].submit_time, 1763712010);
        assert_eq!((r[4].walltime_s, r[4].state), (None, JobState::Failed));
        let why: Vec<&str> = b.rejects.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            why,
            vec![
                "line 6 of sacct's output: Timelimit \"soon\" is not a duration",
                "line 7 of sacct's output: 3 '|'-separated fields, expected 8 (JobIDRaw,Partition,Submit,Start,End,Timelimit,NNodes,State)",
            ]
        );
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
}
