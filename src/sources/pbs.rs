//! The `pbs_accounting` source: PBS Pro / OpenPBS / Torque accounting logs, one file a
//! day (`server_priv/accounting/YYYYMMDD`), each line
//! `MM/DD/YYYY HH:MM:SS;TYPE;JOB_ID;key=value key=value ...`.
//!
//! `S` (started) and `E` (ended) records carry what a wait needs: `qtime` (when the job
//! entered its queue; `ctime` when absent), `start`, `end`, `queue`,
//! `Resource_List.walltime`, and the size (`Resource_List.nodect`, `.nodes`, `.select`
//! or `.ncpus`). Other record types (`Q`, `D`, `A`, `R`, ...) are skipped: they are
//! well formed but tell nothing a wait needs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use super::files::{FileCursor, read_dir_lines};
use super::{Batch, JobRecord, JobState, RecordReject, Source, SourceError, parse_duration};

/// What one line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PbsLine {
    /// A job record (from an `S` or `E` line).
    Job(JobRecord),
    /// A well-formed line of another type.
    Skipped,
}

/// Parses one accounting line. `Err` is the reason it cannot be read.
pub fn parse_line(line: &str) -> Result<PbsLine, String> {
    let mut parts = line.splitn(4, ';');
    let (Some(_stamp), Some(kind), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected DATE;TYPE;JOB_ID;ATTRIBUTES".into());
    };
    let attrs = parts.next().unwrap_or("");
    if kind.len() != 1 {
        return Err(format!("record type {kind:?} is not one letter"));
    }
    if kind != "S" && kind != "E" {
        return Ok(PbsLine::Skipped);
    }
    let id = id.trim();
    if id.is_empty() {
        return Err("empty job id".into());
    }
    let kv: HashMap<&str, &str> = attrs
        .split_whitespace()
        .filter_map(|p| p.split_once('='))
        .collect();
    let time = |key: &str| -> Result<Option<i64>, String> {
        match kv.get(key) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(|t| (t > 0).then_some(t))
                .map_err(|_| format!("{key}={v:?} is not a Unix time")),
        }
    };
    let submit = match time("qtime")? {
        Some(t) => t,
        None => time("ctime")?.ok_or("neither qtime nor ctime")?,
    };
    let queue = kv
        .get("queue")
        .copied()
        .filter(|q| !q.is_empty())
        .ok_or("no queue")?;
    let start = time("start")?;
    let end = if kind == "E" { time("end")? } else { None };
    let walltime_s = match kv.get("Resource_List.walltime") {
        None => None,
        Some(v) => Some(
            parse_duration(v)
                .filter(|w| *w > 0)
                .ok_or_else(|| format!("Resource_List.walltime={v:?} is not a duration"))?,
        ),
    };
    // 0 (or less) is no size, as sacct and Grid Engine report it.
    let nodes = size(&kv)?.filter(|n| *n > 0);
    let state = match (kind, start) {
        ("S", _) => JobState::Running,
        (_, None) => JobState::Cancelled,
        _ => match kv.get("Exit_status").map(|s| s.parse::<i64>()) {
            Some(Ok(0)) => JobState::Completed,
            Some(Ok(_)) => JobState::Failed,
            _ => JobState::Unknown,
        },
    };
    Ok(PbsLine::Job(JobRecord {
        job_id: id.to_string(),
        queue: queue.to_string(),
        submit_time: submit,
        start_time: start,
        end_time: end,
        nodes,
        walltime_s,
        state,
        user: kv
            .get("user")
            .filter(|u| !u.is_empty())
            .map(|u| u.to_string()),
    }))
}

/// The job's size: node count where PBS says it, else processors.
fn size(kv: &HashMap<&str, &str>) -> Result<Option<i64>, String> {
    // The counts of `+`-joined chunks, each its leading number (1 without one).
    let total = |key: &str, v: &str| -> Result<Option<i64>, String> {
        v.split('+')
            .try_fold(0i64, |sum, chunk| {
                let rest = chunk.trim_start_matches(|c: char| c.is_ascii_digit());
                let digits = &chunk[..chunk.len() - rest.len()];
                let n = if digits.is_empty() {
                    Some(1)
                } else {
                    digits.parse::<i64>().ok()
                };
                n.and_then(|n| sum.checked_add(n))
            })
            .map(Some)
            .ok_or_else(|| format!("{key}={v:?} counts more nodes than can be stored"))
    };
    if let Some(v) = kv.get("Resource_List.nodect") {
        return v
            .parse::<i64>()
            .map(Some)
            .map_err(|_| format!("Resource_List.nodect={v:?} is not a number"));
    }
    if let Some(v) = kv.get("Resource_List.nodes") {
        // `4:ppn=8`, `node1+node2`, `2:ppn=4+1:ppn=2`.
        return total("Resource_List.nodes", v);
    }
    if let Some(v) = kv.get("Resource_List.select") {
        return total("Resource_List.select", v);
    }
    if let Some(v) = kv.get("Resource_List.ncpus") {
        return v
            .parse::<i64>()
            .map(Some)
            .map_err(|_| format!("Resource_List.ncpus={v:?} is not a number"));
    }
    Ok(None)
}

/// Reads lines, read at `now`, into a batch (records and rejects with their line
/// numbers).
pub fn read_lines(lines: &[(u64, String)], now: i64) -> Batch {
    let mut batch = Batch::default();
    for (n, text) in lines {
        if text.trim().is_empty() {
            continue;
        }
        let parsed = parse_line(text).map(|l| match l {
            PbsLine::Job(r) => Some(r),
            PbsLine::Skipped => None,
        });
        batch.take(parsed, now, |reason| RecordReject {
            line: Some(*n as i64),
            raw: text.clone(),
            reason,
        });
    }
    batch
}

/// Bytes read per poll at most.
const BUDGET: u64 = 8 << 20;

/// A `pbs_accounting` source.
#[derive(Debug, Clone)]
pub struct PbsFollower {
    /// The directory of daily files.
    pub dir: PathBuf,
    /// Time between reads.
    pub interval: Duration,
}

impl Source for PbsFollower {
    fn kind(&self) -> &'static str {
        "pbs_accounting"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn poll(&mut self, cursor: Option<String>, now: i64) -> Result<Batch, SourceError> {
        let dir = self.dir.clone();
        let cursor = FileCursor::from_text(cursor.as_deref());
        let lines = tokio::task::spawn_blocking(move || read_dir_lines(&dir, cursor, BUDGET))
            .await
            .map_err(SourceError::new)??;
        let mut batch = read_lines(&lines.lines, now);
        // Rejects name their file: line numbers restart each day.
        for r in &mut batch.rejects {
            r.raw = format!("{}:{}: {}", lines.file, r.line.unwrap_or(0), r.raw);
        }
        batch.cursor = Some(lines.cursor.to_text());
        batch.more = lines.more;
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::test_lines::{mutated, numbered, reasons, well_formed};
    use proptest::prelude::*;

    const S: &str = "04/18/2024 10:05:00;S;1234.pbs01;user=alice group=g project=_pbs_project_default jobname=sim queue=workq ctime=1713434300 qtime=1713434400 etime=1713434400 start=1713434700 exec_host=n1/0*8+n2/0*8 Resource_List.ncpus=16 Resource_List.nodect=2 Resource_List.place=scatter Resource_List.select=2:ncpus=8 Resource_List.walltime=01:00:00 resource_assigned.ncpus=16";
    const E: &str = "04/18/2024 10:35:00;E;1234.pbs01;user=alice group=g jobname=sim queue=workq ctime=1713434300 qtime=1713434400 etime=1713434400 start=1713434700 exec_host=n1/0*8+n2/0*8 Resource_List.ncpus=16 Resource_List.nodect=2 Resource_List.walltime=01:00:00 session=4242 end=1713436500 Exit_status=0 resources_used.walltime=00:30:00";
    const TORQUE: &str = "04/18/2024 11:00:00;E;88.torque;user=bob group=g jobname=x queue=batch ctime=1713430000 qtime=1713430010 etime=1713430010 start=1713430100 owner=bob@h exec_host=n3/0-3 Resource_List.neednodes=1:ppn=4 Resource_List.nodes=1:ppn=4 Resource_List.walltime=2:00:00 session=1 end=1713431000 Exit_status=271 resources_used.walltime=00:15:00";

    #[test]
    fn start_and_end_records_read() {
        let PbsLine::Job(s) = parse_line(S).unwrap() else {
            panic!()
        };
        assert_eq!(s.job_id, "1234.pbs01");
        assert_eq!(s.queue, "workq");
        assert_eq!(
            (s.submit_time, s.start_time, s.end_time),
            (1713434400, Some(1713434700), None)
        );
        assert_eq!(
            (s.nodes, s.walltime_s, s.state),
            (Some(2), Some(3600), JobState::Running)
        );
        let PbsLine::Job(e) = parse_line(E).unwrap() else {
            panic!()
        };
        assert_eq!(e.end_time, Some(1713436500));
        assert_eq!(e.state, JobState::Completed);
        let PbsLine::Job(t) = parse_line(TORQUE).unwrap() else {
            panic!()
        };
        assert_eq!(
            (t.nodes, t.walltime_s, t.state),
            (Some(1), Some(7200), JobState::Failed)
        );
    }

    #[test]
    fn other_records_are_skipped_and_bad_ones_rejected_with_their_line() {
        let lines = numbered(&[
            "04/18/2024 10:00:00;Q;1234.pbs01;queue=workq",
            S,
            "garbage",
            "04/18/2024 10:05:00;S;9.pbs01;queue=workq start=5",
            "04/18/2024 10:05:00;E;10.pbs01;queue=workq qtime=100 start=200 end=300 Resource_List.walltime=soon",
            E,
            "04/18/2024 10:05:00;E;11.pbs01;queue=workq qtime=200 start=100 end=300",
            "04/18/2024 10:05:00;E;12.pbs01;queue=workq qtime=100 start=200 end=300 Resource_List.nodect=0",
            "04/18/2024 10:05:00;E;13.pbs01;queue=débug qtime=100 start=200 end=300",
            "04/18/2024 10:05:00;S;14.pbs01;queue=workq qtime=1713434400 start=1713520800",
        ]);
        // Read on 2024-04-19 at 09:00: job 14 starts an hour later.
        let b = read_lines(&lines, 1713517200);
        assert_eq!(b.records.len(), 3);
        // A size of 0 is no size, as sacct and Grid Engine report it.
        assert_eq!(
            (b.records[2].job_id.as_str(), b.records[2].nodes),
            ("12.pbs01", None)
        );
        assert_eq!(
            reasons(&b),
            vec![
                (Some(3), "expected DATE;TYPE;JOB_ID;ATTRIBUTES"),
                (Some(4), "neither qtime nor ctime"),
                (Some(5), "Resource_List.walltime=\"soon\" is not a duration"),
                // What the service would refuse is kept aside with its line.
                (Some(7), "start_time 100 is before submit_time 200"),
                (
                    Some(9),
                    "queue: must be 1 to 64 letters, digits, '.', '_' or '-', got \"débug\""
                ),
                (
                    Some(10),
                    "start 2024-04-19T10:00:00Z is later than the service's clock \
                     (2024-04-19T09:00:00Z) by more than 600 s"
                ),
            ]
        );
        assert_eq!(b.rejects[0].raw, "garbage");
    }

    #[test]
    fn node_requests_are_counted_chunk_by_chunk_and_never_overflow() {
        let nodes = |request: &str| {
            parse_line(&format!(
                "04/18/2024 10:05:00;S;1.pbs01;queue=workq qtime=100 start=200 {request}"
            ))
            .map(|l| match l {
                PbsLine::Job(j) => j.nodes,
                _ => panic!("a job line"),
            })
        };
        assert_eq!(nodes("Resource_List.nodes=2:ppn=4+1:ppn=2"), Ok(Some(3)));
        assert_eq!(nodes("Resource_List.nodes=node1+node2"), Ok(Some(2)));
        assert_eq!(nodes("Resource_List.select=4:ncpus=8"), Ok(Some(4)));
        for request in [
            "Resource_List.nodes=9223372036854775807+1",
            "Resource_List.select=99999999999999999999:ncpus=1",
        ] {
            let (key, value) = request.split_once('=').unwrap();
            assert_eq!(
                nodes(request),
                Err(format!(
                    "{key}={value:?} counts more nodes than can be stored"
                ))
            );
        }
    }

    proptest! {
        /// A damaged accounting line (an attribute's value, the fields between `;`, or
        /// arbitrary text) is a job, a skipped line or a reason, never a panic; a job
        /// has an id, a queue and a submission time, and the service's check of it
        /// answers too.
        #[test]
        fn damaged_lines_never_panic(text in prop_oneof![
            mutated(S, " "),
            mutated(E, " "),
            mutated(TORQUE, " "),
            mutated(E, ";"),
            any::<String>(),
        ]) {
            match parse_line(&text) {
                Ok(PbsLine::Job(j)) => well_formed(&j)?,
                Ok(PbsLine::Skipped) => {}
                Err(reason) => prop_assert!(!reason.is_empty()),
            }
            let b = read_lines(&numbered(&[&text, S]), 1_800_000_000);
            prop_assert!(b.records.len() + b.rejects.len() <= 2);
        }
    }
}
