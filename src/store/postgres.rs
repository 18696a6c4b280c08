//! The PostgreSQL backend. Batches travel as one statement each: the rows go as
//! column arrays and come apart with `UNNEST … WITH ORDINALITY`, so a batch of ten
//! thousand jobs is one round trip and the identity values follow the batch's order.

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::common::{common_store_methods, token_conflict};
use super::reservation_sql::{insert_reservation_in, outbox_in, reservation_store_methods};
use super::reservations::{
    CalibrationRow, CoallocationRow, EventRow, HookTarget, ReservationRow, WebhookRow,
    coallocation_columns, mode_name, reservation_columns, webhook_body, webhook_columns,
};
use super::rows::{
    JobChanges, JobRow, QueueRow, QueueStatsRow, RejectRow, SiteRow, SourceRow, TokenRow,
    apply_bounds, convert, job_columns, job_kept_size, job_not_older, job_stage, job_upsert_set,
    last_per_job, now_unix, queue_columns, reject_columns, site_columns, token_columns,
};
use super::sources::{source_columns, source_store_methods};
use super::{
    ApiToken, Job, JobBound, JobCursor, NewApiToken, NewJob, NewQueue, NewReject, NewSite, Queue,
    QueueStats, Reject, Site, SiteSummary, SourceProgress, SourceState, StartWindow, Store,
    StoreError, StoreResult, db_error, redact_url,
};
use super::{
    Calibration, Coallocation, NewCoallocation, NewReservation, Replanned, Reservation,
    ReservationEvent, SiteScope, Transition, WebhookDelivery, WebhookOutcome,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The PostgreSQL store. Cloning shares the pool.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to the database a `postgres://` URL names.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        Self::connect_with(url, super::StoreOptions::default()).await
    }

    /// [`PgStore::connect`], with these options.
    pub async fn connect_with(url: &str, opts: super::StoreOptions) -> StoreResult<Self> {
        let shown = redact_url(url);
        let options: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::Database(format!("{shown}: {e}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(opts.acquire_timeout)
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Database(format!("{shown}: {e}")))?;
        Ok(Self { pool })
    }
}

impl PgStore {
    /// Writes bounds at submission: each to a job with none yet, or, given the
    /// submission it is for, to the job still submitted then
    /// ([`Store::set_bounds`], [`Store::correct_bounds`]).
    async fn write_bounds<'a>(
        &self,
        bounds: impl Iterator<Item = (&'a JobBound, Option<i64>)>,
    ) -> StoreResult<()> {
        let (mut ids, mut values, mut statuses, mut submits) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (b, submit) in bounds {
            ids.push(b.id);
            values.push(b.bound_s);
            statuses.push(b.status.as_str());
            submits.push(submit);
        }
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE jobs SET bound_s = u.bound_s, bound_status = u.status \
             FROM UNNEST($1::int8[], $2::int8[], $3::text[], $4::int8[]) \
               AS u(id, bound_s, status, submit_time) \
             WHERE jobs.id = u.id AND (jobs.submit_time = u.submit_time \
               OR (u.submit_time IS NULL AND jobs.bound_status IS NULL))",
        )
        .bind(ids)
        .bind(values)
        .bind(statuses)
        .bind(submits)
        .execute(&self.pool)
        .await
        .map(|_| ())
        .map_err(db_error)
    }

    /// A second connection, when one is idle or the pool may open one; never waits on
    /// connections others hold (pushes each waiting for a second one could otherwise
    /// hold them all).
    async fn spare_connection(&self) -> Option<sqlx::pool::PoolConnection<sqlx::Postgres>> {
        if let Some(conn) = self.pool.try_acquire() {
            return Some(conn);
        }
        if self.pool.size() < self.pool.options().get_max_connections() {
            return self.pool.acquire().await.ok();
        }
        None
    }
}

/// The jobs of a batch as column arrays, for `UNNEST`.
#[derive(Default)]
struct JobColumns {
    site_id: Vec<i64>,
    queue_id: Vec<i64>,
    job_id: Vec<String>,
    submit_time: Vec<i64>,
    start_time: Vec<Option<i64>>,
    end_time: Vec<Option<i64>>,
    nodes: Vec<Option<i64>>,
    walltime_s: Vec<Option<i64>>,
    state: Vec<&'static str>,
    user_key: Vec<Option<String>>,
}

impl<'a> FromIterator<&'a NewJob> for JobColumns {
    fn from_iter<I: IntoIterator<Item = &'a NewJob>>(iter: I) -> Self {
        let mut c = JobColumns::default();
        for j in iter {
            c.site_id.push(j.site_id);
            c.queue_id.push(j.queue_id);
            c.job_id.push(j.job_id.clone());
            c.submit_time.push(j.submit_time);
            c.start_time.push(j.start_time);
            c.end_time.push(j.end_time);
            c.nodes.push(j.nodes);
            c.walltime_s.push(j.walltime_s);
            c.state.push(j.state.as_str());
            c.user_key.push(j.user_key.clone());
        }
        c
    }
}

/// Stored jobs as column arrays (id and bound included), for `UNNEST`.
#[derive(Default)]
struct StoredColumns<'a> {
    id: Vec<i64>,
    site_id: Vec<i64>,
    queue_id: Vec<i64>,
    job_id: Vec<&'a str>,
    submit_time: Vec<i64>,
    start_time: Vec<Option<i64>>,
    end_time: Vec<Option<i64>>,
    nodes: Vec<Option<i64>>,
    walltime_s: Vec<Option<i64>>,
    state: Vec<&'static str>,
    bound_s: Vec<Option<i64>>,
    bound_status: Vec<Option<&'a str>>,
    user_key: Vec<Option<&'a str>>,
}

impl<'a> FromIterator<&'a Job> for StoredColumns<'a> {
    fn from_iter<I: IntoIterator<Item = &'a Job>>(iter: I) -> Self {
        let mut c = StoredColumns::default();
        for j in iter {
            c.id.push(j.id);
            c.site_id.push(j.site_id);
            c.queue_id.push(j.queue_id);
            c.job_id.push(&j.job_id);
            c.submit_time.push(j.submit_time);
            c.start_time.push(j.start_time);
            c.end_time.push(j.end_time);
            c.nodes.push(j.nodes);
            c.walltime_s.push(j.walltime_s);
            c.state.push(j.state.as_str());
            c.bound_s.push(j.bound_s);
            c.bound_status.push(j.bound_status.as_deref());
            c.user_key.push(j.user_key.as_deref());
        }
        c
    }
}

/// Binds a batch's ten column arrays to `$1…$10` of [`unnest_jobs`].
macro_rules! bind_columns {
    ($query:expr, $c:expr) => {
        $query
            .bind($c.site_id)
            .bind($c.queue_id)
            .bind($c.job_id)
            .bind($c.submit_time)
            .bind($c.start_time)
            .bind($c.end_time)
            .bind($c.nodes)
            .bind($c.walltime_s)
            .bind($c.state)
            .bind($c.user_key)
    };
}

/// `SELECT` of a batch's rows from ten array parameters, in batch order.
macro_rules! unnest_jobs {
    () => {
        "SELECT site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state, user_key \
         FROM UNNEST($1::int8[], $2::int8[], $3::text[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::text[], $10::text[]) \
         WITH ORDINALITY AS u(site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state, user_key, ord) \
         ORDER BY ord"
    };
}

/// New jobs per push above which their insert is split between two connections (see
/// `ingest_jobs`): 10,000 jobs took 147–161 ms in one statement, 96–109 ms as two
/// halves at once.
const PARALLEL_INSERT_MIN: usize = 2_000;

/// Inserts new jobs with the ids and bounds they were given.
async fn insert_new_jobs(conn: &mut sqlx::PgConnection, jobs: &[Job]) -> StoreResult<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let c: StoredColumns = jobs.iter().collect();
    sqlx::query(
        "INSERT INTO jobs (id, site_id, queue_id, job_id, submit_time, start_time, end_time, \
           nodes, walltime_s, state, bound_s, bound_status, user_key) OVERRIDING SYSTEM VALUE \
         SELECT * FROM UNNEST($1::int8[], $2::int8[], $3::int8[], $4::text[], $5::int8[], \
           $6::int8[], $7::int8[], $8::int8[], $9::int8[], $10::text[], $11::int8[], $12::text[], \
           $13::text[])",
    )
    .bind(c.id)
    .bind(c.site_id)
    .bind(c.queue_id)
    .bind(c.job_id)
    .bind(c.submit_time)
    .bind(c.start_time)
    .bind(c.end_time)
    .bind(c.nodes)
    .bind(c.walltime_s)
    .bind(c.state)
    .bind(c.bound_s)
    .bind(c.bound_status)
    .bind(c.user_key)
    .execute(conn)
    .await
    .map(|_| ())
    .map_err(db_error)
}

impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn insert_jobs(&self, jobs: &[NewJob]) -> StoreResult<u64> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let c: JobColumns = jobs.iter().collect();
        let done = bind_columns!(
            sqlx::query(concat!(
            "INSERT INTO jobs (site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state, user_key) ",
            unnest_jobs!(),
            " ON CONFLICT (site_id, job_id) DO NOTHING"
        )),
            c
        )
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected())
    }

    async fn upsert_jobs(&self, jobs: &[NewJob]) -> StoreResult<Vec<Job>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let c: JobColumns = last_per_job(jobs).into_iter().collect();
        // A start or end once seen is never lost to a later record without one of the same
        // submission; a new submit time (a requeue) starts the job over (see `JobChanges::of`).
        let rows = bind_columns!(
            sqlx::query_as::<_, JobRow>(concat!(
            "INSERT INTO jobs (site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state, user_key) ",
            unnest_jobs!(),
            " ON CONFLICT (site_id, job_id) DO UPDATE SET ",
            job_upsert_set!(),
            "WHERE ", job_not_older!(), " AND (jobs.queue_id, jobs.submit_time, jobs.start_time, jobs.end_time, jobs.nodes, jobs.walltime_s, jobs.state) \
                IS DISTINCT FROM (EXCLUDED.queue_id, EXCLUDED.submit_time, COALESCE(EXCLUDED.start_time, jobs.start_time), \
                  COALESCE(EXCLUDED.end_time, jobs.end_time), ",
            job_kept_size!("nodes"), ", ", job_kept_size!("walltime_s"), ", EXCLUDED.state) \
              RETURNING ",
            job_columns!()
        )),
            c
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let mut jobs: Vec<Job> = convert(rows)?;
        // RETURNING promises no order; callers get arrival order.
        jobs.sort_by_key(|j| j.id);
        Ok(jobs)
    }

    async fn ingest_jobs<F>(&self, jobs: &[NewJob], predict: F) -> StoreResult<Vec<Job>>
    where
        F: FnOnce(&[Job]) -> Vec<JobBound> + Send,
    {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let mut sites: Vec<i64> = jobs.iter().map(|j| j.site_id).collect();
        sites.sort_unstable();
        sites.dedup();
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        // Other ingests of these sites wait here until commit, so what is read below
        // stays true until the write. (A row lock that foreign-key checks, which take
        // KEY SHARE, do not wait for.)
        sqlx::query("SELECT id FROM sites WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE")
            .bind(&sites)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        let mut stored = Vec::new();
        for &site in &sites {
            let ids: Vec<&str> = jobs
                .iter()
                .filter(|j| j.site_id == site)
                .map(|j| j.job_id.as_str())
                .collect();
            let rows = sqlx::query_as::<_, JobRow>(concat!(
                "SELECT ",
                job_columns!(),
                " FROM jobs WHERE site_id = $1 AND job_id = ANY($2)"
            ))
            .bind(site)
            .bind(ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            stored.extend(convert::<_, Job>(rows)?);
        }
        let plan = JobChanges::of(jobs, &stored);
        let (updated, inserted) = (plan.changed.len(), plan.new.len());
        let mut ids: Vec<i64> = if inserted == 0 {
            Vec::new()
        } else {
            // The sequence is looked up once: per row, the lookup costs more than the
            // nextval (38 ms against 6 ms for 10,000 ids).
            sqlx::query_scalar(
                "WITH q AS MATERIALIZED (SELECT pg_get_serial_sequence('jobs', 'id')::regclass AS seq) \
                 SELECT nextval(q.seq) FROM q, generate_series(1, $1)",
            )
            .bind(inserted as i64)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?
        };
        ids.sort_unstable();
        if ids.len() != inserted {
            return Err(StoreError::Database(format!(
                "asked for {inserted} job ids, got {}",
                ids.len()
            )));
        }
        let mut changed = plan.with_ids(&ids);
        let bounds = predict(&changed);
        apply_bounds(&mut changed, bounds);
        let (old, new) = changed.split_at(updated);
        if !old.is_empty() {
            let c: StoredColumns = old.iter().collect();
            sqlx::query(
                "UPDATE jobs SET queue_id = u.queue_id, submit_time = u.submit_time, \
                   start_time = u.start_time, end_time = u.end_time, nodes = u.nodes, \
                   walltime_s = u.walltime_s, state = u.state, bound_s = u.bound_s, \
                   bound_status = u.bound_status, user_key = u.user_key \
                 FROM UNNEST($1::int8[], $2::int8[], $3::int8[], $4::int8[], $5::int8[], \
                   $6::int8[], $7::int8[], $8::text[], $9::int8[], $10::text[], $11::text[]) \
                   AS u(id, queue_id, submit_time, start_time, end_time, nodes, walltime_s, \
                        state, bound_s, bound_status, user_key) \
                 WHERE jobs.id = u.id",
            )
            .bind(c.id)
            .bind(c.queue_id)
            .bind(c.submit_time)
            .bind(c.start_time)
            .bind(c.end_time)
            .bind(c.nodes)
            .bind(c.walltime_s)
            .bind(c.state)
            .bind(c.bound_s)
            .bind(c.bound_status)
            .bind(c.user_key)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        }
        // The insert is the server's work: a large one is split in two and written by
        // two connections at once (two server processes, on two cores) when the pool
        // has a connection free. Either half failing rolls both back. The second half
        // commits once both are written and everything else of this batch is done,
        // just before this transaction commits, which holds the sites' lock
        // throughout: another ingest of the site reads both halves or neither. Only
        // this transaction's own commit failing after the second half's would leave
        // that half stored; sending the push again stores the rest.
        let spare = if new.len() >= PARALLEL_INSERT_MIN {
            self.spare_connection().await
        } else {
            None
        };
        match spare {
            Some(mut conn) => {
                let (first, second) = new.split_at(new.len() / 2);
                let mut tx2 = sqlx::Connection::begin(&mut *conn)
                    .await
                    .map_err(db_error)?;
                let (a, b) = futures_util::future::join(
                    insert_new_jobs(&mut tx, first),
                    insert_new_jobs(&mut tx2, second),
                )
                .await;
                a?;
                b?;
                tx2.commit().await.map_err(db_error)?;
            }
            None => insert_new_jobs(&mut tx, new).await?,
        }
        tx.commit().await.map_err(db_error)?;
        Ok(changed)
    }

    async fn set_bounds(&self, bounds: &[JobBound]) -> StoreResult<()> {
        self.write_bounds(bounds.iter().map(|b| (b, None))).await
    }

    async fn correct_bounds(&self, bounds: &[(JobBound, i64)]) -> StoreResult<()> {
        self.write_bounds(bounds.iter().map(|(b, s)| (b, Some(*s))))
            .await
    }

    async fn insert_rejects(&self, rejects: &[NewReject]) -> StoreResult<u64> {
        if rejects.is_empty() {
            return Ok(0);
        }
        let site_id: Vec<i64> = rejects.iter().map(|r| r.site_id).collect();
        let source: Vec<&str> = rejects.iter().map(|r| r.source.as_str()).collect();
        let line: Vec<Option<i64>> = rejects.iter().map(|r| r.line).collect();
        let raw: Vec<&str> = rejects.iter().map(|r| r.raw.as_str()).collect();
        let reason: Vec<&str> = rejects.iter().map(|r| r.reason.as_str()).collect();
        let received_at: Vec<i64> = rejects.iter().map(|r| r.received_at).collect();
        let done = sqlx::query(
            "INSERT INTO rejects (site_id, source, line, raw, reason, received_at) \
             SELECT site_id, source, line, raw, reason, received_at \
             FROM UNNEST($1::int8[], $2::text[], $3::int8[], $4::text[], $5::text[], $6::int8[]) \
             WITH ORDINALITY AS u(site_id, source, line, raw, reason, received_at, ord) \
             ORDER BY ord ON CONFLICT DO NOTHING",
        )
        .bind(site_id)
        .bind(source)
        .bind(line)
        .bind(raw)
        .bind(reason)
        .bind(received_at)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected())
    }

    common_store_methods!();
    source_store_methods!();
    reservation_store_methods!("FOR UPDATE SKIP LOCKED");
}
