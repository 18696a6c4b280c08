//! Row structs as the database returns them, shared by both backends (the column types
//! are the same: `i64`, text, bytes), and their conversion to the domain types.

use super::{ApiToken, Job, Queue, QueueStats, Reject, Site, StoreError, StoreResult};

// Column lists as macros, so that queries stay `&'static str` (sqlx 0.9 takes only
// static SQL without an explicit `AssertSqlSafe`) via `concat!`.

/// Columns of `sites`, in row-struct order, for `SELECT`/`RETURNING`.
macro_rules! site_columns {
    () => {
        "id, name, kind, description, time_zone, created_at"
    };
}
/// Columns of `queues`.
macro_rules! queue_columns {
    () => {
        "id, site_id, name, max_walltime_s, max_nodes, total_nodes"
    };
}
/// Columns of `jobs`.
macro_rules! job_columns {
    () => {
        "id, site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state, bound_s, bound_status, user_key"
    };
}
/// The `SET` list of the jobs upsert (`ON CONFLICT (site_id, job_id) DO UPDATE SET`),
/// the same SQL on both backends: the record's fields win, a start or end once seen is
/// kept for the same submit time, and the bound is kept — unless the submit time
/// changed (a job submitted anew under its id): then nothing of the earlier
/// submission stays. [`JobChanges::of`] works out the same in Rust.
macro_rules! job_upsert_set {
    () => {
        concat!("queue_id = EXCLUDED.queue_id, submit_time = EXCLUDED.submit_time, \
         start_time = CASE WHEN jobs.submit_time = EXCLUDED.submit_time \
           THEN COALESCE(EXCLUDED.start_time, jobs.start_time) ELSE EXCLUDED.start_time END, \
         end_time = CASE WHEN jobs.submit_time = EXCLUDED.submit_time \
           THEN COALESCE(EXCLUDED.end_time, jobs.end_time) ELSE EXCLUDED.end_time END, \
         bound_s = CASE WHEN jobs.submit_time = EXCLUDED.submit_time THEN jobs.bound_s END, \
         bound_status = CASE WHEN jobs.submit_time = EXCLUDED.submit_time THEN jobs.bound_status END, \
         nodes = ", job_kept_size!("nodes"), ", walltime_s = ", job_kept_size!("walltime_s"), ", \
         user_key = ", job_kept_size!("user_key"), ", state = EXCLUDED.state ")
    };
}
/// The condition (for `DO UPDATE … WHERE`) that the record is not older news than the
/// stored job ([`is_older`] in Rust): not an earlier submission, nor an earlier stage
/// (0 pending, 1 started, 2 ended) of the same one.
macro_rules! job_not_older {
    () => {
        concat!(
            "(EXCLUDED.submit_time > jobs.submit_time OR (EXCLUDED.submit_time = jobs.submit_time AND ",
            job_stage!("EXCLUDED"),
            " >= ",
            job_stage!("jobs"),
            "))"
        )
    };
}
/// A job row's stage: 0 pending, 1 started, 2 ended ([`stage`] in Rust).
macro_rules! job_stage {
    ($t:literal) => {
        concat!(
            "(CASE WHEN ",
            $t,
            ".state IN ('completed', 'failed', 'cancelled') OR ",
            $t,
            ".end_time IS NOT NULL THEN 2 WHEN ",
            $t,
            ".state = 'running' OR ",
            $t,
            ".start_time IS NOT NULL THEN 1 ELSE 0 END)"
        )
    };
}
/// A job's size column after an upsert: the first known for the same submission.
macro_rules! job_kept_size {
    ($col:literal) => {
        concat!(
            "CASE WHEN jobs.submit_time = EXCLUDED.submit_time THEN COALESCE(jobs.",
            $col,
            ", EXCLUDED.",
            $col,
            ") ELSE EXCLUDED.",
            $col,
            " END"
        )
    };
}
/// Columns of `api_tokens`.
macro_rules! token_columns {
    () => {
        "id, name, scope, prefix, hash, created_at"
    };
}
/// Columns of `rejects`.
macro_rules! reject_columns {
    () => {
        "id, site_id, source, line, raw, reason, received_at"
    };
}
pub(super) use {
    job_columns, job_kept_size, job_not_older, job_stage, job_upsert_set, queue_columns,
    reject_columns, site_columns, token_columns,
};

#[derive(sqlx::FromRow)]
pub(super) struct SiteRow {
    id: i64,
    name: String,
    kind: String,
    description: String,
    time_zone: Option<String>,
    created_at: i64,
}

impl TryFrom<SiteRow> for Site {
    type Error = StoreError;
    fn try_from(r: SiteRow) -> StoreResult<Self> {
        Ok(Site {
            id: r.id,
            name: r.name,
            kind: r.kind.parse()?,
            description: r.description,
            time_zone: r.time_zone,
            created_at: r.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct QueueRow {
    id: i64,
    site_id: i64,
    name: String,
    max_walltime_s: Option<i64>,
    max_nodes: Option<i64>,
    total_nodes: Option<i64>,
}

impl From<QueueRow> for Queue {
    fn from(r: QueueRow) -> Self {
        Queue {
            id: r.id,
            site_id: r.site_id,
            name: r.name,
            max_walltime_s: r.max_walltime_s,
            max_nodes: r.max_nodes,
            total_nodes: r.total_nodes,
        }
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct QueueStatsRow {
    #[sqlx(flatten)]
    queue: QueueRow,
    jobs: i64,
    started: i64,
    last_release: Option<i64>,
    last_submit: Option<i64>,
}

impl From<QueueStatsRow> for QueueStats {
    fn from(r: QueueStatsRow) -> Self {
        QueueStats {
            queue: r.queue.into(),
            jobs: r.jobs,
            started: r.started,
            last_release: r.last_release,
            last_submit: r.last_submit,
        }
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct JobRow {
    id: i64,
    site_id: i64,
    queue_id: i64,
    job_id: String,
    submit_time: i64,
    start_time: Option<i64>,
    end_time: Option<i64>,
    nodes: Option<i64>,
    walltime_s: Option<i64>,
    state: String,
    bound_s: Option<i64>,
    bound_status: Option<String>,
    user_key: Option<String>,
}

impl TryFrom<JobRow> for Job {
    type Error = StoreError;
    fn try_from(r: JobRow) -> StoreResult<Self> {
        Ok(Job {
            id: r.id,
            site_id: r.site_id,
            queue_id: r.queue_id,
            job_id: r.job_id,
            submit_time: r.submit_time,
            start_time: r.start_time,
            end_time: r.end_time,
            nodes: r.nodes,
            walltime_s: r.walltime_s,
            state: r.state.parse()?,
            bound_s: r.bound_s,
            bound_status: r.bound_status,
            user_key: r.user_key,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct TokenRow {
    id: i64,
    name: String,
    scope: String,
    prefix: String,
    hash: Vec<u8>,
    created_at: i64,
}

impl TryFrom<TokenRow> for ApiToken {
    type Error = StoreError;
    fn try_from(r: TokenRow) -> StoreResult<Self> {
        Ok(ApiToken {
            id: r.id,
            name: r.name,
            scope: r.scope.parse()?,
            prefix: r.prefix,
            hash: r.hash,
            created_at: r.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct RejectRow {
    id: i64,
    site_id: i64,
    source: String,
    line: Option<i64>,
    raw: String,
    reason: String,
    received_at: i64,
}

impl From<RejectRow> for Reject {
    fn from(r: RejectRow) -> Self {
        Reject {
            id: r.id,
            site_id: r.site_id,
            source: r.source,
            line: r.line,
            raw: r.raw,
            reason: r.reason,
            received_at: r.received_at,
        }
    }
}

/// Converts a list of rows, failing on the first that does not fit the domain type.
pub(super) fn convert<R, T>(rows: Vec<R>) -> StoreResult<Vec<T>>
where
    T: TryFrom<R, Error = StoreError>,
{
    rows.into_iter().map(T::try_from).collect()
}

/// The current time in Unix seconds (the store stamps `created_at`/`received_at`
/// defaults with it; everything the engine sees takes time as an argument).
pub(super) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Keeps the last record for each (site, job id): one statement may not update the
/// same row twice, and the later record is the newer news.
pub(super) fn last_per_job(jobs: &[super::NewJob]) -> Vec<&super::NewJob> {
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<&super::NewJob> = jobs
        .iter()
        .rev()
        .filter(|j| seen.insert((j.site_id, j.job_id.as_str())))
        .collect();
    out.reverse();
    out
}

/// What a batch of records changes in the stored jobs (see
/// [`super::Store::ingest_jobs`]), worked out from what is stored of their jobs.
pub(super) struct JobChanges {
    /// Stored jobs the records change, merged, sorted by id.
    pub(super) changed: Vec<super::Job>,
    /// Jobs not stored yet, in batch order, their ids still to be given.
    pub(super) new: Vec<super::Job>,
}

impl JobChanges {
    /// Compares each job's last record with `stored` (the stored jobs among the
    /// records', in any order) as `upsert_jobs`' SQL does: a start or end once seen is
    /// kept, the bound and the first known nodes and walltime are kept (a pending
    /// Slurm job's size may be re-estimated; it was predicted and clustered by the
    /// first), and a record that leaves the job as it is changes
    /// nothing — unless the record's submit time differs from the stored one: then the
    /// job was submitted anew under the same id (Slurm requeues a job with a new
    /// submit time), and the earlier submission's start, end and bound go with it.
    pub(super) fn of(jobs: &[super::NewJob], stored: &[super::Job]) -> Self {
        let by_key: std::collections::HashMap<(i64, &str), &super::Job> = stored
            .iter()
            .map(|j| ((j.site_id, j.job_id.as_str()), j))
            .collect();
        let mut changed = Vec::new();
        let mut new = Vec::new();
        for r in last_per_job(jobs) {
            let stored = by_key.get(&(r.site_id, r.job_id.as_str())).copied();
            // An older record (an earlier submission, or a stage of this one the job
            // has left) changes nothing: a job's life only goes forward.
            if stored.is_some_and(|o| is_older(r, o)) {
                continue;
            }
            // What carries over from the stored job: nothing from another submission.
            let same = stored.filter(|o| o.submit_time == r.submit_time);
            let merged = super::Job {
                id: stored.map_or(0, |o| o.id),
                site_id: r.site_id,
                queue_id: r.queue_id,
                job_id: r.job_id.clone(),
                submit_time: r.submit_time,
                start_time: r.start_time.or(same.and_then(|o| o.start_time)),
                end_time: r.end_time.or(same.and_then(|o| o.end_time)),
                // The shape first known for the submission: what it was clustered by
                // (qbets.md: attributes known at submit time), live and in a rebuild.
                nodes: same.and_then(|o| o.nodes).or(r.nodes),
                walltime_s: same.and_then(|o| o.walltime_s).or(r.walltime_s),
                state: r.state,
                bound_s: same.and_then(|o| o.bound_s),
                bound_status: same.and_then(|o| o.bound_status.clone()),
                user_key: same
                    .and_then(|o| o.user_key.clone())
                    .or_else(|| r.user_key.clone()),
            };
            let fields = |j: &super::Job| {
                (
                    j.queue_id,
                    j.submit_time,
                    j.start_time,
                    j.end_time,
                    j.nodes,
                    j.walltime_s,
                    j.state,
                )
            };
            match stored {
                None => new.push(merged),
                Some(old) if fields(&merged) != fields(old) => changed.push(merged),
                Some(_) => {}
            }
        }
        changed.sort_by_key(|j| j.id);
        Self { changed, new }
    }

    /// Every change, sorted by id, once the new jobs have been given `ids` (ascending,
    /// above every stored id); the first `self.changed.len()` are stored jobs.
    pub(super) fn with_ids(self, ids: &[i64]) -> Vec<super::Job> {
        let mut all = self.changed;
        all.extend(self.new.into_iter().zip(ids).map(|(mut j, &id)| {
            j.id = id;
            j
        }));
        all
    }
}

/// How far along its life a job is by what is known of it: 0 pending, 1 started, 2
/// ended. A start or end time counts even when the state does not say (`unknown`).
pub(super) fn stage(state: super::JobState, start: Option<i64>, end: Option<i64>) -> u8 {
    use super::JobState as S;
    match state {
        S::Completed | S::Failed | S::Cancelled => 2,
        _ if end.is_some() => 2,
        S::Running => 1,
        _ if start.is_some() => 1,
        _ => 0,
    }
}

/// Whether record `r` is older news than the stored job `o`: it speaks for an earlier
/// submission (a smaller submit time), or for an earlier stage of the same one (a
/// pending record of a job seen running or ended, a running record of an ended job).
/// `job_not_older!` says the same in SQL.
pub(super) fn is_older(r: &super::NewJob, o: &super::Job) -> bool {
    r.submit_time < o.submit_time
        || (r.submit_time == o.submit_time
            && stage(r.state, r.start_time, r.end_time) < stage(o.state, o.start_time, o.end_time))
}

/// Sets the bounds given for `jobs` (sorted by id); a bound for another id is ignored.
pub(super) fn apply_bounds(jobs: &mut [super::Job], bounds: Vec<super::JobBound>) {
    for b in bounds {
        if let Ok(i) = jobs.binary_search_by_key(&b.id, |j| j.id) {
            jobs[i].bound_s = b.bound_s;
            jobs[i].bound_status = Some(b.status);
        }
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct SourceRow {
    site_id: i64,
    source: String,
    kind: String,
    cursor: Option<String>,
    last_success_at: Option<i64>,
    last_error: Option<String>,
    last_error_at: Option<i64>,
    consecutive_failures: i64,
    accepted: i64,
    rejected: i64,
    last_record_at: Option<i64>,
    detail: Option<String>,
}

impl From<SourceRow> for super::SourceState {
    fn from(r: SourceRow) -> Self {
        super::SourceState {
            site_id: r.site_id,
            source: r.source,
            kind: r.kind,
            cursor: r.cursor,
            last_success_at: r.last_success_at,
            last_error: r.last_error,
            last_error_at: r.last_error_at,
            consecutive_failures: r.consecutive_failures,
            accepted: r.accepted,
            rejected: r.rejected,
            last_record_at: r.last_record_at,
            detail: r.detail,
        }
    }
}
