//! The `slurm_rest` source: polls slurmrestd's job list (pending, running and recently
//! finished jobs) and reads each job into a [`JobRecord`]. A job's wait is known the
//! moment it starts, so each poll reports starts as they happen; pending jobs are
//! reported too (the queue length and the censored waits of qbets.md §7).
//!
//! slurmctld keeps finished jobs for `MinJobAge` seconds, and every poll reads the
//! whole list, so a poll after an outage shorter than that catches up by itself; the
//! cursor is only the time of the last successful listing.
//!
//! The `slurmdb_rest` source ([`SlurmdbRestPoller`]) reads the accounting instead, by
//! time window, as `sacct` does.

use std::collections::HashSet;
use std::time::Duration;

use super::slurm_rest::{self, ClientConfig, SlurmJob, SlurmRestClient};
use super::{Batch, JobRecord, JobState, RecordReject, Source, SourceError};

/// The store's job state for a Slurm state.
pub fn job_state(job: &SlurmJob) -> JobState {
    use slurm_rest::JobState as S;
    match &job.state {
        S::Pending => JobState::Pending,
        S::Running | S::Suspended => JobState::Running,
        // Ending: its end is known when Slurm reports it.
        S::Completing => {
            if job.end_time.is_some() {
                JobState::Completed
            } else {
                JobState::Running
            }
        }
        S::Completed => JobState::Completed,
        S::Cancelled => JobState::Cancelled,
        S::Failed
        | S::Timeout
        | S::NodeFail
        | S::Preempted
        | S::BootFail
        | S::Deadline
        | S::OutOfMemory => JobState::Failed,
        S::Other(_) => JobState::Unknown,
    }
}

/// A Slurm job as a record, or why it cannot be one.
pub fn to_record(job: &SlurmJob) -> Result<JobRecord, String> {
    let submit = job
        .submit_time
        .ok_or_else(|| format!("job {} has no submit time", job.job_id))?;
    let queue = super::slurm_queue(&job.partition);
    if queue.is_empty() {
        return Err(format!("job {} has no partition", job.job_id));
    }
    // A job Slurm put back in the queue (requeued) has a start from its earlier run;
    // its wait starts over, and the record says pending until it starts again.
    let pending = job.state.is_pending();
    Ok(JobRecord {
        job_id: job.job_id.to_string(),
        queue: queue.to_string(),
        submit_time: submit,
        start_time: if pending { None } else { job.start_time },
        end_time: if pending { None } else { job.end_time },
        nodes: job.node_count.filter(|n| *n > 0).map(i64::from),
        walltime_s: job
            .time_limit_s
            .filter(|w| *w > 0)
            .and_then(|w| i64::try_from(w).ok()),
        state: job_state(job),
        user: Some(job.user.clone()).filter(|u| !u.is_empty()),
    })
}

/// Rejects remembered as reported, at most.
const MAX_SEEN_REJECTS: usize = 100_000;

/// Reads a job list, read at `now`, into records and rejects. `seen_rejects` keeps the
/// ids (or raw text) of rejects already reported, so a bad record that stays in Slurm's
/// list is kept aside once, not at every poll.
pub fn read_list(
    list: &slurm_rest::JobList,
    now: i64,
    seen_rejects: &mut HashSet<String>,
) -> Batch {
    let mut batch = Batch::default();
    // Every job listed, read or not; none when a listed job has no id (then which
    // stored jobs are gone cannot be told).
    let mut listed: Option<HashSet<String>> =
        Some(list.jobs.iter().map(|j| j.job_id.to_string()).collect());
    for bad in &list.rejected {
        match (bad.job_id, listed.as_mut()) {
            (Some(id), Some(ids)) => {
                ids.insert(id.to_string());
            }
            _ => listed = None,
        }
    }
    batch.listed = listed;
    if seen_rejects.len() > MAX_SEEN_REJECTS {
        // The store keeps a reject once however often it comes; this only spares it
        // the writes, and must not grow for the life of the process.
        seen_rejects.clear();
    }
    for job in &list.jobs {
        match to_record(job).and_then(|r| r.checked(now)) {
            Ok(r) => batch.records.push(r),
            Err(reason) => {
                let raw = serde_json::to_string(job).unwrap_or_default();
                if seen_rejects.insert(format!("job {}", job.job_id)) {
                    batch.rejects.push(RecordReject {
                        line: None,
                        raw,
                        reason,
                    });
                }
            }
        }
    }
    for bad in &list.rejected {
        let key = match bad.job_id {
            Some(id) => format!("job {id}"),
            None => bad.raw.clone(),
        };
        if seen_rejects.insert(key) {
            batch.rejects.push(RecordReject {
                line: None,
                raw: bad.raw.clone(),
                reason: bad.reason.clone(),
            });
        }
    }
    batch
}

/// A `slurm_rest` source.
#[derive(Debug)]
pub struct SlurmRestPoller {
    client: SlurmRestClient,
    interval: Duration,
    timeout: Duration,
    seen_rejects: HashSet<String>,
    /// When the partitions' limits were last read (Unix seconds).
    limits_read_at: Option<i64>,
}

/// Seconds between reads of the partitions' limits (they change rarely).
pub const LIMITS_EVERY_S: i64 = 600;

/// The partitions' limits, when [`LIMITS_EVERY_S`] has passed since `read_at` (then
/// set to `now`); none otherwise. The limits are a help, not the job list: a failure to
/// read them (e.g. a slurmrestd serving only the accounting plugin) is logged and tried
/// again next poll, and the poll goes on.
async fn read_limits(
    client: &SlurmRestClient,
    now: i64,
    read_at: &mut Option<i64>,
) -> Vec<super::QueueLimitsSeen> {
    if read_at.is_some_and(|t| now.saturating_sub(t) < LIMITS_EVERY_S) {
        return Vec::new();
    }
    match client.partitions().await {
        Ok(parts) => {
            *read_at = Some(now);
            parts
                .into_iter()
                .map(|p| super::QueueLimitsSeen {
                    queue: p.name,
                    max_nodes: p.max_nodes,
                    max_walltime_s: p.max_time_s,
                    total_nodes: p.total_nodes,
                })
                .collect()
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read slurmrestd's partitions");
            Vec::new()
        }
    }
}

impl SlurmRestPoller {
    /// A poller with the client these settings describe.
    pub fn new(config: &ClientConfig, interval: Duration) -> Result<Self, SourceError> {
        Ok(Self {
            client: SlurmRestClient::new(config).map_err(SourceError::new)?,
            interval,
            // The client's own timeout fires first; this one covers the whole poll.
            timeout: Duration::from_secs(config.timeout_s.saturating_add(5)),
            seen_rejects: HashSet::new(),
            limits_read_at: None,
        })
    }
}

impl Source for SlurmRestPoller {
    fn kind(&self) -> &'static str {
        "slurm_rest"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn poll(&mut self, _cursor: Option<String>, now: i64) -> Result<Batch, SourceError> {
        let list = self.client.list_jobs().await.map_err(SourceError::new)?;
        let mut batch = read_list(&list, now, &mut self.seen_rejects);
        batch.cursor = Some(now.to_string());
        batch.limits = read_limits(&self.client, now, &mut self.limits_read_at).await;
        batch.detail = self
            .client
            .version_note()
            .map(|v| match &list.slurm_release {
                Some(r) if !v.contains(r.as_str()) => format!("{v}; Slurm {r} answered"),
                _ => v,
            });
        Ok(batch)
    }
}

/// The `slurmdb_rest` source: slurmdbd's accounting through slurmrestd
/// (`GET /slurmdb/{v}/jobs`), window by window from a durable cursor exactly as the
/// `sacct` source reads it ([`super::sacct::next_window`]), for sites that let qbets
/// call slurmrestd but not run `sacct`. Finished jobs come in whatever slurmctld's
/// `MinJobAge`; pending and running jobs are in the accounting too.
pub struct SlurmdbRestPoller {
    client: SlurmRestClient,
    interval: Duration,
    timeout: Duration,
    /// The windows the polls ask for.
    pub windows: super::sacct::Windows,
    /// When the partitions' limits were last read (Unix seconds).
    limits_read_at: Option<i64>,
}

impl SlurmdbRestPoller {
    /// A poller with the client these settings describe and the windows given.
    pub fn new(
        config: &ClientConfig,
        interval: Duration,
        windows: super::sacct::Windows,
    ) -> Result<Self, SourceError> {
        Ok(Self {
            client: SlurmRestClient::new(config).map_err(SourceError::new)?,
            interval,
            timeout: Duration::from_secs(config.timeout_s.saturating_add(5)),
            windows,
            limits_read_at: None,
        })
    }
}

impl Source for SlurmdbRestPoller {
    fn kind(&self) -> &'static str {
        "slurmdb_rest"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn poll(&mut self, cursor: Option<String>, now: i64) -> Result<Batch, SourceError> {
        let (from, to) = self.windows.next(cursor, now);
        let body = self
            .client
            .accounting_jobs(from, to)
            .await
            .map_err(SourceError::new)?;
        let mut batch = super::slurmdb_rest::read_jobs(&body, now)
            .map_err(|e| SourceError(format!("slurmdb jobs: {}: {}", e.reason, e.snippet)))?;
        super::sacct::Windows::close(&mut batch, to, now);
        // The same slurmrestd knows the partitions' limits when it serves slurmctld's
        // plugin too.
        batch.limits = read_limits(&self.client, now, &mut self.limits_read_at).await;
        batch.detail = self.client.version_note();
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn job(state: slurm_rest::JobState) -> SlurmJob {
        SlurmJob {
            job_id: 7,
            name: "x".into(),
            partition: "debug".into(),
            user: "root".into(),
            state,
            state_flags: vec![],
            state_reason: None,
            submit_time: Some(100),
            eligible_time: Some(100),
            start_time: Some(130),
            end_time: Some(190),
            expected_start_time: None,
            time_limit_s: Some(600),
            node_count: Some(1),
            cpus: Some(2),
            nodes: Some("n1".into()),
        }
    }

    #[test]
    fn jobs_become_records() {
        let r = to_record(&job(slurm_rest::JobState::Completed)).unwrap();
        assert_eq!(
            (
                r.submit_time,
                r.start_time,
                r.end_time,
                r.walltime_s,
                r.nodes
            ),
            (100, Some(130), Some(190), Some(600), Some(1))
        );
        assert_eq!(r.state, JobState::Completed);
        assert_eq!(r.queue, "debug");
        let requeued = to_record(&job(slurm_rest::JobState::Pending)).unwrap();
        assert_eq!(
            (requeued.start_time, requeued.state),
            (None, JobState::Pending)
        );
        let timeout = to_record(&job(slurm_rest::JobState::Timeout)).unwrap();
        assert_eq!(timeout.state, JobState::Failed);
        // Pending in several partitions: counted in the first.
        let mut several = job(slurm_rest::JobState::Pending);
        several.partition = "debug,long".into();
        assert_eq!(to_record(&several).unwrap().queue, "debug");
        // A start before the submission is kept aside with the job's text.
        let mut early = job(slurm_rest::JobState::Completed);
        early.start_time = Some(50);
        let list = slurm_rest::JobList {
            jobs: vec![early],
            ..Default::default()
        };
        let b = read_list(&list, 1_800_000_000, &mut HashSet::new());
        assert_eq!(b.records, vec![]);
        assert_eq!(
            b.rejects[0].reason,
            "start_time 50 is before submit_time 100"
        );
        assert!(
            b.rejects[0].raw.contains("\"job_id\":7"),
            "{}",
            b.rejects[0].raw
        );
        let mut none = job(slurm_rest::JobState::Running);
        none.submit_time = None;
        assert!(to_record(&none).unwrap_err().contains("no submit time"));
    }

    #[test]
    fn captured_lists_of_every_version_read() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurm");
        let mut read = 0;
        for version in ["v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42"] {
            let dir = format!("{root}/{version}");
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if !name.starts_with("job") || !name.ends_with(".json") {
                    continue;
                }
                let body = std::fs::read(&path).unwrap();
                let Ok(list) = slurm_rest::model::parse_job_list(&body) else {
                    continue;
                };
                let batch = read_list(&list, 1_800_000_000, &mut HashSet::new());
                assert_eq!(
                    batch.records.len() + batch.rejects.len(),
                    list.jobs.len() + list.rejected.len(),
                    "{version}/{name}: every job is a record or a reject"
                );
                for r in &batch.records {
                    if let Some(s) = r.start_time {
                        assert!(s >= r.submit_time, "{version}/{name}: {r:?}");
                    }
                }
                read += batch.records.len();
            }
        }
        assert!(read > 0, "the fixtures hold job lists");
    }

    /// A time as the model can hand it over: any `i64` (the model keeps only positive
    /// ones, but the conversion must not count on it), often near real dates.
    fn time() -> impl Strategy<Value = Option<i64>> {
        proptest::option::of(prop_oneof![
            any::<i64>(),
            1_700_000_000i64..1_800_000_000,
            Just(i64::MAX),
            Just(i64::MIN),
        ])
    }

    fn state() -> impl Strategy<Value = slurm_rest::JobState> {
        prop_oneof![
            Just(slurm_rest::JobState::Pending),
            Just(slurm_rest::JobState::Running),
            Just(slurm_rest::JobState::Completing),
            Just(slurm_rest::JobState::Completed),
            Just(slurm_rest::JobState::Cancelled),
            Just(slurm_rest::JobState::Timeout),
            ".{0,8}".prop_map(slurm_rest::JobState::Other),
        ]
    }

    /// Mostly names the service takes, so that records get as far as its time checks.
    fn partition() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => proptest::sample::select(vec!["debug", "debug,long", "long,", ""])
                .prop_map(String::from),
            1 => ".{0,20}",
        ]
    }

    /// Any job the model could produce, and more.
    fn slurm_job() -> impl Strategy<Value = SlurmJob> {
        (
            (any::<u64>(), partition(), state(), time(), time(), time()),
            (
                proptest::option::of(any::<u64>()),
                proptest::option::of(any::<u32>()),
                proptest::option::of(".{0,8}"),
            ),
        )
            .prop_map(
                |((job_id, partition, state, submit, start, end), (limit, count, nodes))| {
                    SlurmJob {
                        job_id,
                        name: String::new(),
                        partition,
                        user: String::new(),
                        state,
                        state_flags: vec![],
                        state_reason: None,
                        submit_time: submit,
                        eligible_time: submit,
                        start_time: start,
                        end_time: end,
                        expected_start_time: None,
                        time_limit_s: limit,
                        node_count: count,
                        cpus: count,
                        nodes,
                    }
                },
            )
    }

    proptest! {
        /// Any jobs become records the service accepts or rejects with a reason, never
        /// a panic; every job is one or the other.
        #[test]
        fn any_job_is_a_record_or_a_reject(jobs in proptest::collection::vec(slurm_job(), 0..6)) {
            let mut ids = HashSet::new();
            let jobs: Vec<SlurmJob> = jobs.into_iter().filter(|j| ids.insert(j.job_id)).collect();
            for j in &jobs {
                if let Ok(r) = to_record(j) {
                    prop_assert!(r.nodes.is_none_or(|n| n > 0));
                    prop_assert!(r.walltime_s.is_none_or(|w| w > 0));
                }
            }
            let list = slurm_rest::JobList {
                jobs: jobs.clone(),
                ..Default::default()
            };
            let b = read_list(&list, 1_800_000_000, &mut HashSet::new());
            prop_assert_eq!(b.records.len() + b.rejects.len(), jobs.len());
        }
    }
}
