//! The `sge_accounting` source: the Sun/Oracle/Son of Grid Engine `accounting` file,
//! one colon-separated line per finished job (accounting(5)): `qname` (field 1),
//! `job_number` (6), `submission_time` (9), `start_time` (10), `end_time` (11),
//! `failed` (12), `exit_status` (13), `slots` (35), `task_number` (36) and `category`
//! (40, the request: `-q all.q -l h_rt=3600,...`). Times are Unix seconds (milliseconds
//! in newer Grid Engines, recognised by their size). Lines starting with `#` are
//! comments.

use std::path::PathBuf;
use std::time::Duration;

use super::files::{FileCursor, read_lines as read_file_lines};
use super::{Batch, JobRecord, JobState, RecordReject, Source, SourceError, parse_duration};

/// Fields a line must have (up to `category`).
const MIN_FIELDS: usize = 40;

/// A time field: seconds, or milliseconds when it is too large to be seconds; `0` (never)
/// is `None`.
fn time(field: &str, name: &str) -> Result<Option<i64>, String> {
    let v: i64 = field
        .trim()
        .parse()
        .map_err(|_| format!("{name} {field:?} is not a number"))?;
    Ok(match v {
        v if v <= 0 => None,
        v if v > 100_000_000_000 => Some(v / 1000),
        v => Some(v),
    })
}

/// `h_rt` from the category's `-l` requests, in seconds.
fn h_rt(category: &str) -> Result<Option<i64>, String> {
    for part in category.split([' ', ',']) {
        if let Some(v) = part
            .strip_prefix("h_rt=")
            .or_else(|| part.strip_prefix("hard_runtime="))
        {
            // Grid Engine's "no limit".
            if v.eq_ignore_ascii_case("infinity") {
                return Ok(None);
            }
            return parse_duration(v)
                .filter(|s| *s > 0)
                .map(Some)
                .ok_or_else(|| format!("h_rt={v:?} is not a duration"));
        }
    }
    Ok(None)
}

/// Whether colon-separated field `next` continues the time value the category read so
/// far (`sofar`) ends with: `sofar` ends in `name=` and fewer than three `:`-separated
/// numbers (`h_rt=1`, `h_rt=0:10`), and `next` is one or two digits (minutes or
/// seconds, as the user wrote them: `0`, `00`, `5`) up to its end, a comma or a space
/// (`0`, `00,h_vmem=2G`, `30 -pe mpi 8`). The field after the category, `iow`, is
/// written with `%f` (`0.000000`: `sge_write_rusage`), so it is never taken for one.
fn continues_a_time(sofar: &str, next: &str) -> bool {
    let token = sofar.rsplit([' ', ',']).next().unwrap_or("");
    let Some((_, value)) = token.split_once('=') else {
        return false;
    };
    let parts = value.split(':');
    let number = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if parts.clone().count() >= 3 || !parts.into_iter().all(number) {
        return false;
    }
    let digits = next.bytes().take_while(u8::is_ascii_digit).count();
    (1..=2).contains(&digits) && matches!(next.as_bytes().get(digits), None | Some(b',' | b' '))
}

/// Parses one accounting line (`Ok(None)` for a comment or an empty line).
pub fn parse_line(line: &str) -> Result<Option<JobRecord>, String> {
    if line.trim().is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let f: Vec<&str> = line.split(':').collect();
    if f.len() < MIN_FIELDS {
        return Err(format!(
            "{} colon-separated fields, expected at least {MIN_FIELDS}",
            f.len()
        ));
    }
    let queue = f[0].trim();
    if queue.is_empty() {
        return Err("empty qname".into());
    }
    let number = f[5].trim();
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("job_number {number:?} is not a number"));
    }
    let failed: i64 = f[11]
        .trim()
        .parse()
        .map_err(|_| format!("failed {:?} is not a number", f[11]))?;
    let exit: i64 = f[12]
        .trim()
        .parse()
        .map_err(|_| format!("exit_status {:?} is not a number", f[12]))?;
    let slots: i64 = f[34]
        .trim()
        .parse()
        .map_err(|_| format!("slots {:?} is not a number", f[34]))?;
    let task: i64 = f[35]
        .trim()
        .parse()
        .map_err(|_| format!("task_number {:?} is not a number", f[35]))?;
    // The category (field 40) may itself hold colons (`-l h_rt=1:00:00`, `h_rt=1:0:0`):
    // the fields that continue its time values are taken into it.
    let mut category = f[39].to_string();
    let mut category_end = 39;
    while let Some(next) = f.get(category_end + 1)
        && continues_a_time(&category, next)
    {
        category.push(':');
        category.push_str(next);
        category_end += 1;
    }
    let Some(submit) = time(f[8], "submission_time")? else {
        // The records of the tasks of a tightly integrated parallel job (`pe_taskid`
        // set) have no submission time: they are parts of the job's own record.
        let pe_taskid = f.get(category_end + 2).map_or("", |s| s.trim());
        if !pe_taskid.is_empty() && !pe_taskid.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        return Err("submission_time is 0".into());
    };
    let start = time(f[9], "start_time")?;
    let end = time(f[10], "end_time")?;
    let job_id = if task > 0 {
        format!("{number}.{task}")
    } else {
        number.to_string()
    };
    let state = match (start, failed, exit) {
        (None, _, _) => JobState::Cancelled,
        (_, 0, 0) => JobState::Completed,
        _ => JobState::Failed,
    };
    Ok(Some(JobRecord {
        job_id,
        queue: queue.to_string(),
        submit_time: submit,
        start_time: start,
        end_time: if start.is_some() { end } else { None },
        nodes: (slots > 0).then_some(slots),
        walltime_s: h_rt(&category)?,
        state,
        // The owner (field 4); the file says nothing of jobs until they end.
        user: f
            .get(3)
            .map(|u| u.trim())
            .filter(|u| !u.is_empty())
            .map(str::to_string),
    }))
}

/// Reads lines, read at `now`, into a batch (records and rejects with their line
/// numbers).
pub fn read_lines(lines: &[(u64, String)], now: i64) -> Batch {
    let mut batch = Batch::default();
    for (n, text) in lines {
        batch.take(parse_line(text), now, |reason| RecordReject {
            line: Some(*n as i64),
            raw: text.clone(),
            reason,
        });
    }
    batch
}

/// Bytes read per poll at most.
const BUDGET: u64 = 8 << 20;

/// An `sge_accounting` source.
#[derive(Debug, Clone)]
pub struct SgeFollower {
    /// The accounting file.
    pub path: PathBuf,
    /// Time between reads.
    pub interval: Duration,
}

impl Source for SgeFollower {
    fn kind(&self) -> &'static str {
        "sge_accounting"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn poll(&mut self, cursor: Option<String>, now: i64) -> Result<Batch, SourceError> {
        let path = self.path.clone();
        let cursor = FileCursor::from_text(cursor.as_deref()).unwrap_or_default();
        let lines = tokio::task::spawn_blocking(move || {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            read_file_lines(&path, &name, cursor, BUDGET)
        })
        .await
        .map_err(SourceError::new)??;
        let mut batch = read_lines(&lines.lines, now);
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

    /// A line as Son of Grid Engine 8.1.9 writes it (45 fields).
    const LINE: &str = "all.q:node01:users:alice:sim.sh:4711:sge:0:1713434400:1713434700:1713436500:0:0:1800:1.5:0.2:1024:0:0:0:0:100:0:0:0:0:0:0:0:10:2:NONE:defaultdepartment:mpi:8:0:12.0:0.5:0.1:-U users -q all.q -l h_rt=3600,h_vmem=2G -pe mpi 8:0.0:NONE:2048:0:0";

    #[test]
    fn a_finished_job_reads() {
        let r = parse_line(LINE).unwrap().unwrap();
        assert_eq!(r.job_id, "4711");
        assert_eq!(r.queue, "all.q");
        assert_eq!(
            (r.submit_time, r.start_time, r.end_time),
            (1713434400, Some(1713434700), Some(1713436500))
        );
        assert_eq!(
            (r.nodes, r.walltime_s, r.state),
            (Some(8), Some(3600), JobState::Completed)
        );
        // Milliseconds (newer Grid Engines) read as seconds; an array task has its own id.
        let ms = LINE
            .replace(
                ":1713434400:1713434700:1713436500:",
                ":1713434400000:1713434700000:1713436500000:",
            )
            .replace(":mpi:8:0:", ":mpi:8:3:");
        let r = parse_line(&ms).unwrap().unwrap();
        assert_eq!((r.submit_time, r.job_id.as_str()), (1713434400, "4711.3"));
    }

    #[test]
    fn a_category_with_colons_reads_whole() {
        // `h_rt` given as a time of day, last and in the middle of the category.
        let r = parse_line(&LINE.replace("h_rt=3600,h_vmem=2G", "h_vmem=2G,h_rt=1:00:00"))
            .unwrap()
            .unwrap();
        assert_eq!((r.walltime_s, r.nodes), (Some(3600), Some(8)));
        let r = parse_line(&LINE.replace("h_rt=3600", "h_rt=0:30:00"))
            .unwrap()
            .unwrap();
        assert_eq!(r.walltime_s, Some(1800));
        let r = parse_line(&LINE.replace("-l h_rt=3600,h_vmem=2G -pe mpi 8", "-l h_rt=2:00:00"))
            .unwrap()
            .unwrap();
        assert_eq!(r.walltime_s, Some(7200));
        // No limit.
        let r = parse_line(&LINE.replace("h_rt=3600", "h_rt=INFINITY"))
            .unwrap()
            .unwrap();
        assert_eq!((r.walltime_s, r.nodes), (None, Some(8)));
        // Minutes and seconds as the user wrote them, one digit each.
        for (h_rt, seconds) in [
            ("1:0:0", 3600),
            ("0:10:0", 600),
            ("0:5:0", 300),
            ("1:30:0", 5400),
            ("24:0:0", 86_400),
            ("10:5", 605),
        ] {
            for category in [
                format!("-l h_rt={h_rt}"),
                format!("-l h_rt={h_rt},h_vmem=2G -pe mpi 8"),
                format!("-pe mpi 8 -l h_vmem=2G,h_rt={h_rt}"),
            ] {
                let line = LINE.replace(
                    "-U users -q all.q -l h_rt=3600,h_vmem=2G -pe mpi 8",
                    &category,
                );
                let r = parse_line(&line).unwrap().unwrap();
                assert_eq!(r.walltime_s, Some(seconds), "{category}");
            }
        }
        // The `iow` after a category ending in a number (`%f`: `0.000000`) stays `iow`,
        // and a time has at most three parts.
        let r = parse_line(&LINE.replace(
            "-l h_rt=3600,h_vmem=2G -pe mpi 8:0.0:",
            "-l h_rt=600:0.000000:",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(r.walltime_s, Some(600));
        assert!(!continues_a_time("-l h_rt=1:0:0", "0"));
        assert!(!continues_a_time("-pe mpi 8", "0"), "not a name=value time");
    }

    #[test]
    fn parallel_task_records_are_not_jobs() {
        // A task of a tightly integrated parallel job: no submission time, `pe_taskid` set.
        let task = LINE
            .replace(":1713434400:", ":0:")
            .replace(":0.0:NONE:", ":0.0:1.node01:");
        assert_eq!(parse_line(&task), Ok(None));
        // Without `pe_taskid` a missing submission time is still an error.
        assert_eq!(
            parse_line(&LINE.replace(":1713434400:", ":0:")),
            Err("submission_time is 0".to_string())
        );
    }

    #[test]
    fn comments_are_skipped_and_bad_lines_rejected() {
        let lines = numbered(&[
            "# Version: 8.1.9",
            LINE,
            "all.q:too:few",
            &LINE.replace(":1713434400:", ":yesterday:"),
            &LINE.replace("h_rt=3600", "h_rt=forever"),
            &LINE.replace(":mpi:8:0:", ":mpi:8:x:"),
        ]);
        let b = read_lines(&lines, 1_800_000_000);
        assert_eq!(b.records.len(), 1);
        assert_eq!(
            reasons(&b),
            vec![
                (Some(3), "3 colon-separated fields, expected at least 40"),
                (Some(4), "submission_time \"yesterday\" is not a number"),
                (Some(5), "h_rt=\"forever\" is not a duration"),
                (Some(6), "task_number \"x\" is not a number"),
            ]
        );
    }

    proptest! {
        /// A damaged accounting line (its fields between `:`, the words of its category,
        /// or arbitrary text) is a job, nothing or a reason, never a panic; a job has an
        /// id, a queue and a submission time, and the service's check of it answers too.
        #[test]
        fn damaged_lines_never_panic(text in prop_oneof![
            mutated(LINE, ":"),
            mutated(LINE, " "),
            mutated(LINE, ","),
            any::<String>(),
        ]) {
            match parse_line(&text) {
                Ok(Some(j)) => well_formed(&j)?,
                Ok(None) => {}
                Err(reason) => prop_assert!(!reason.is_empty()),
            }
            let b = read_lines(&numbered(&[&text, LINE]), 1_800_000_000);
            prop_assert!(b.records.len() + b.rejects.len() <= 2);
        }
    }
}
