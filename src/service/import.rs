//! Importing an SWF workload trace into the store as an archive site.
//!
//! Queue numbers become names from the header's `Queue:` lines (or `Partition:` lines
//! where the trace keeps its queues in field 16, as CEA Curie does — the same choice
//! as the replay, [`SwfTrace::queue_field`]); a number without a name keeps its digits.
//! Times become absolute Unix seconds (`UnixStartTime` + the record's offsets).
//! Malformed lines, and records the schema would refuse, are kept as rejects with their
//! line number and reason. Re-importing the same file changes nothing.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::store::{JobState, NewJob, NewQueue, NewReject, NewSite, SiteKind, Store, StoreError};
use crate::trace::swf::{QueueField, SwfHeader, SwfRecord, SwfTrace};

/// What to import and how.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The site's name in the store (and the API's URLs).
    pub site: String,
    /// Where the records came from, kept with each reject (the file's name).
    pub source: String,
    /// Jobs per store batch.
    pub batch_size: usize,
    /// When the import runs (Unix seconds), stamped on rejects.
    pub now: i64,
    /// Refuse a site that holds another machine's trace (the command line, where the
    /// site is the user's choice; a configured source's site is its file's).
    pub refuse_other_traces: bool,
}

/// What an import did.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportSummary {
    /// The site's name.
    pub site: String,
    /// Which SWF field named the queues.
    pub queue_field: QueueField,
    /// Well-formed job records read.
    pub records: u64,
    /// Newly stored jobs.
    pub inserted: u64,
    /// Records already stored (an earlier import of the same trace).
    pub already_stored: u64,
    /// Lines kept aside as rejects (malformed, or refused), by this import.
    pub rejected: u64,
    /// Of those, not stored before.
    pub rejects_new: u64,
    /// Accepted records by queue name.
    pub queues: BTreeMap<String, u64>,
    /// First few rejects, for the summary printed to the user.
    pub sample_rejects: Vec<(u64, String)>,
    /// What the reader should know of how the trace was read (a header it lacked, a
    /// queue name it could not use).
    pub notes: Vec<String>,
    /// Wall time of the import (after reading).
    pub elapsed: Duration,
}

impl ImportSummary {
    /// Well-formed records per second.
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Why an import failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The site exists and is live: a trace is not mixed into a live site's records.
    #[error(
        "site {0:?} is a live site; traces are imported into archive sites (choose another --site name)"
    )]
    LiveSite(String),
    /// The site holds another trace (another machine's, by its header): the two would
    /// mix, and job numbers the first already used would be taken for its jobs.
    #[error(
        "site {site:?} holds another trace ({held}); this one is {new}: import it under another --site"
    )]
    OtherTrace {
        /// The site.
        site: String,
        /// What the site holds (its description and time zone).
        held: String,
        /// What the new trace is.
        new: String,
    },
    /// Not one line of the file is a job: not an SWF trace, or an empty one.
    #[error(
        "no job lines in the trace ({bad} {} kept aside as malformed); nothing imported",
        if *.bad == 1 { "line" } else { "lines" }
    )]
    NoJobs {
        /// Lines that were neither comments nor jobs.
        bad: usize,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A trace's identity as the header gives it, for messages: its description and zone.
fn identity(description: &str, time_zone: Option<&str>) -> String {
    let d = if description.is_empty() {
        "no description"
    } else {
        description
    };
    match time_zone {
        Some(z) => format!("{d}, {z}"),
        None => d.to_string(),
    }
}

/// The name a trace's rejects are kept under: its file's name, the same whether the
/// command line or a configured source imports it (so that a reject is kept once).
pub fn source_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// How many rejects the summary quotes.
const SAMPLE_REJECTS: usize = 5;

/// The queue name of a record: the header's name for its number when it is a name
/// the service can use, else the number. The second value is why a name the header
/// gives was not used.
pub fn queue_name(trace: &SwfTrace, field: QueueField, number: i64) -> (String, Option<String>) {
    match trace.queue_name(field, number) {
        // A name that is a number could be another queue's digits (CEA-Curie calls its
        // partition 13 "-1"); names with other characters (`test,batch`, `z+i5U=:`)
        // could not be asked for. Either keeps its number.
        Some(name) if name.parse::<i64>().is_ok() => (
            number.to_string(),
            Some(format!(
                "queue {number} is named {name:?} in the header, a number; it is stored as \"{number}\""
            )),
        ),
        Some(name) => match super::check_name(name) {
            Ok(()) => (name.to_string(), None),
            Err(e) => (
                number.to_string(),
                Some(format!(
                    "queue {number}'s name in the header {e}; it is stored as \"{number}\""
                )),
            ),
        },
        // Unnamed numbers keep their digits, `-1` (unknown) included.
        None => (number.to_string(), None),
    }
}

/// The job state an SWF status code means.
pub fn job_state(rec: &SwfRecord) -> JobState {
    match rec.status {
        // 1 completed; 2 and 3 are parts of a checkpointed job that ran.
        1..=3 => JobState::Completed,
        0 | 4 => JobState::Failed,
        5 => JobState::Cancelled,
        _ => JobState::Unknown,
    }
}

/// A human description from the header (`Installation:` and `Computer:` lines).
pub fn describe(header: &SwfHeader) -> String {
    let field = |key: &str| {
        header.comments.iter().find_map(|c| {
            c.split_once(':')
                .filter(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_string())
        })
    };
    match (field("Installation"), field("Computer")) {
        (Some(i), Some(c)) => format!("{i} ({c})"),
        (Some(i), None) => i,
        (None, Some(c)) => c,
        (None, None) => String::new(),
    }
}

/// Imports a trace read into memory (the whole trace is needed first: which field
/// names the queues depends on every record). `progress` is told how many records each
/// batch held.
pub async fn import_trace<S: Store>(
    store: &S,
    trace: &SwfTrace,
    opts: &ImportOptions,
    mut progress: impl FnMut(u64),
) -> Result<ImportSummary, ImportError> {
    let started = Instant::now();
    if trace.records.is_empty() {
        return Err(ImportError::NoJobs {
            bad: trace.bad.len(),
        });
    }
    let description = describe(&trace.header);
    if opts.refuse_other_traces
        && let Some(held) = store.site(&opts.site).await?
        && held.kind == SiteKind::Archive
        && (held.description != description || held.time_zone != trace.header.time_zone)
        && store.site_last_event(held.id).await?.is_some()
    {
        return Err(ImportError::OtherTrace {
            site: held.name.clone(),
            held: identity(&held.description, held.time_zone.as_deref()),
            new: identity(&description, trace.header.time_zone.as_deref()),
        });
    }
    let site = store
        .upsert_site(&NewSite {
            name: opts.site.clone(),
            kind: SiteKind::Archive,
            description,
            time_zone: trace.header.time_zone.clone(),
        })
        .await?;
    if site.kind != SiteKind::Archive {
        return Err(ImportError::LiveSite(site.name));
    }
    let field = trace.queue_field();
    let base = trace.header.unix_start_time.unwrap_or(0);

    let mut queue_ids: HashMap<i64, (i64, String)> = HashMap::new();
    let mut refused = 0u64;
    let mut rejects: Vec<NewReject> = trace
        .bad
        .iter()
        .map(|b| NewReject {
            site_id: site.id,
            source: opts.source.clone(),
            line: Some(b.line as i64),
            raw: b.raw.clone(),
            reason: b.reason.clone(),
            received_at: opts.now,
        })
        .collect();
    let mut seen_jobs: HashMap<i64, u64> = HashMap::new();
    let mut batch: Vec<NewJob> = Vec::with_capacity(opts.batch_size);
    let mut summary = ImportSummary {
        site: site.name.clone(),
        queue_field: field,
        records: 0,
        inserted: 0,
        already_stored: 0,
        rejected: 0,
        rejects_new: 0,
        queues: BTreeMap::new(),
        sample_rejects: Vec::new(),
        notes: Vec::new(),
        elapsed: Duration::ZERO,
    };
    if trace.header.unix_start_time.is_none() {
        summary.notes.push(
            "the header gives no UnixStartTime: times count from 1970-01-01T00:00:00Z".into(),
        );
    }
    if trace.wide_lines > 0 {
        summary.notes.push(format!(
            "{} job lines have more than SWF's 18 fields (a variant such as MetaCentrum/Alea's 21): the first 18 of each were read",
            trace.wide_lines
        ));
    }

    let machine = [trace.header.max_procs, trace.header.max_nodes]
        .into_iter()
        .flatten()
        .filter(|&n| n > 0)
        .max();
    if let Some(n) = machine {
        summary.notes.push(format!(
            "the header gives the machine {n} processors: each queue's total_nodes is {n}, and a job asking for more gets no bound (exceeds_limits)"
        ));
    }
    for rec in &trace.records {
        summary.records += 1;
        let number = trace.queue_of(field, rec);
        let (queue_id, name) = match queue_ids.get(&number) {
            Some(q) => q.clone(),
            None => {
                let (name, note) = queue_name(trace, field, number);
                summary.notes.extend(note);
                let q = store
                    .upsert_queue(
                        site.id,
                        &NewQueue {
                            name: name.clone(),
                            max_walltime_s: None,
                            max_nodes: None,
                            // The machine's size from the header (issue 22): jobs
                            // count processors, so MaxProcs; MaxNodes where it is
                            // larger (never the tighter of two units).
                            total_nodes: machine,
                        },
                    )
                    .await?;
                queue_ids.insert(number, (q.id, name.clone()));
                (q.id, name)
            }
        };
        let job = to_job(rec, site.id, queue_id, base);
        let first = *seen_jobs.entry(rec.job).or_insert(rec.line);
        let refusal = if first != rec.line {
            Some(format!(
                "job number {} already appears at line {first}",
                rec.job
            ))
        } else {
            job.validate().err()
        };
        if let Some(reason) = refusal {
            refused += 1;
            rejects.push(NewReject {
                site_id: site.id,
                source: opts.source.clone(),
                line: Some(rec.line as i64),
                raw: rec.to_string(),
                reason,
                received_at: opts.now,
            });
            continue;
        }
        *summary.queues.entry(name).or_default() += 1;
        batch.push(job);
        if batch.len() >= opts.batch_size {
            summary.inserted += flush(store, &mut batch, &mut progress).await?;
        }
    }
    summary.inserted += flush(store, &mut batch, &mut progress).await?;

    rejects.sort_by_key(|r| r.line);
    summary.rejected = rejects.len() as u64;
    summary.sample_rejects = rejects
        .iter()
        .take(SAMPLE_REJECTS)
        .map(|r| (r.line.unwrap_or(0) as u64, r.reason.clone()))
        .collect();
    for chunk in rejects.chunks(opts.batch_size.max(1)) {
        summary.rejects_new += store.insert_rejects(chunk).await?;
    }
    summary.already_stored = summary.records - refused - summary.inserted;
    summary.elapsed = started.elapsed();
    Ok(summary)
}

/// Writes one batch; returns how many jobs were new.
async fn flush<S: Store>(
    store: &S,
    batch: &mut Vec<NewJob>,
    progress: &mut impl FnMut(u64),
) -> Result<u64, StoreError> {
    if batch.is_empty() {
        return Ok(0);
    }
    let inserted = store.insert_jobs(batch).await?;
    progress(batch.len() as u64);
    batch.clear();
    Ok(inserted)
}

/// The store's record of an SWF job. A wait the trace does not know (`-1`) leaves the
/// job without a start: it never enters a wait history (qbets.md §6 drops waits < 0).
pub fn to_job(rec: &SwfRecord, site_id: i64, queue_id: i64, base: i64) -> NewJob {
    let submit = base + rec.submit;
    let start = rec.start().map(|s| base + s);
    let end = match (start, rec.run) {
        (Some(s), run) if run >= 0 => Some(s + run),
        _ => None,
    };
    NewJob {
        site_id,
        queue_id,
        job_id: rec.job.to_string(),
        submit_time: submit,
        start_time: start,
        end_time: end,
        nodes: rec.procs(),
        walltime_s: rec.requested_time(),
        state: job_state(rec),
        // SWF's user id (field 12), as the replay reads it.
        user_key: u32::try_from(rec.user).ok().map(|u| u.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_become_absolute_jobs() {
        let rec =
            SwfRecord::parse("7 100 20 300 8 -1 -1 16 3600 -1 1 3 1 -1 2 1 -1 -1", 9).unwrap();
        let job = to_job(&rec, 1, 2, 1_000_000);
        assert_eq!(job.job_id, "7");
        assert_eq!(job.submit_time, 1_000_100);
        assert_eq!(job.start_time, Some(1_000_120));
        assert_eq!(job.end_time, Some(1_000_420));
        assert_eq!(job.nodes, Some(16));
        assert_eq!(job.walltime_s, Some(3600));
        assert_eq!(job.state, JobState::Completed);
        let pending =
            SwfRecord::parse("8 100 -1 -1 8 -1 -1 -1 -1 -1 5 3 1 -1 2 1 -1 -1", 10).unwrap();
        let job = to_job(&pending, 1, 2, 0);
        assert_eq!((job.start_time, job.end_time), (None, None));
        assert_eq!(job.nodes, Some(8), "allocated when requested is unknown");
        assert_eq!(job.walltime_s, None);
        assert_eq!(job.state, JobState::Cancelled);
    }

    #[test]
    fn header_names_are_used_when_they_can_be_asked_for() {
        let text = "; Queue: 1 batch\n; Queue: 2 test,batch\n; Queue: 3 -1\n\
                    1 0 0 1 1 -1 -1 1 60 -1 1 1 1 -1 1 -1 -1 -1\n";
        let trace = SwfTrace::read(std::io::Cursor::new(text)).unwrap();
        let name = |n| queue_name(&trace, QueueField::Queue, n);
        assert_eq!(name(1), ("batch".to_string(), None));
        // Not a name a URL can hold: the number, and a note that says so.
        let (two, note) = name(2);
        assert_eq!(two, "2");
        assert!(note.unwrap().contains("\"test,batch\""));
        // A name that is a number would be the unknown queue's "-1".
        let (three, note) = name(3);
        assert_eq!(three, "3");
        assert!(note.unwrap().contains("\"-1\" in the header, a number"));
        assert_eq!(name(-1), ("-1".to_string(), None));
    }

    #[test]
    fn descriptions_come_from_the_header() {
        let mut h = SwfHeader::default();
        h.absorb("; Computer: IBM SP");
        h.absorb("; Installation: SDSC Blue Horizon");
        assert_eq!(describe(&h), "SDSC Blue Horizon (IBM SP)");
        assert_eq!(describe(&SwfHeader::default()), "");
    }
}
