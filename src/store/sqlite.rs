//! The embedded SQLite backend (the default): one file, WAL journal, foreign keys on.
//! Batches are written in one transaction each, with one prepared statement reused per
//! row — SQLite's fastest path, since a transaction, not a statement, costs a sync.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Acquire, AssertSqlSafe, SqlitePool};

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
    StoreError, StoreResult, db_error,
};
use super::{
    Calibration, Coallocation, NewCoallocation, NewReservation, Replanned, Reservation,
    ReservationEvent, SiteScope, Transition, WebhookDelivery, WebhookOutcome,
};

/// Binds a job's ten columns, in the order of the `INSERT` column lists below.
macro_rules! bind_job {
    ($query:expr, $j:expr) => {
        $query
            .bind($j.site_id)
            .bind($j.queue_id)
            .bind(&$j.job_id)
            .bind($j.submit_time)
            .bind($j.start_time)
            .bind($j.end_time)
            .bind($j.nodes)
            .bind($j.walltime_s)
            .bind($j.state.as_str())
            .bind(&$j.user_key)
    };
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// Rows per multi-row statement (an import batch's `INSERT`, a push's read of what is
/// stored and `INSERT` of what is new). Each statement is a round trip to
/// the connection's worker thread (four futex calls a row when rows went one by one,
/// 1.05 million for a 243,306-job trace), and on a busy machine every trip waits to
/// be scheduled; a hundred rows a statement (900 parameters, under SQLite's 32,766)
/// make them a hundred times fewer.
const ROWS_PER_INSERT: usize = 100;

/// `INSERT … VALUES` of `rows` jobs (their ten columns, as [`bind_job`] binds them),
/// skipping the (site, job id) already stored. The statement for a full chunk is the
/// same text each time, so the connection's statement cache keeps it prepared.
fn insert_jobs_sql(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO jobs (site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state, user_key) VALUES ",
    );
    push_tuples(&mut sql, rows, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    sql.push_str(" ON CONFLICT (site_id, job_id) DO NOTHING");
    sql
}

/// Appends `rows` copies of a placeholder tuple, comma-separated.
fn push_tuples(sql: &mut String, rows: usize, tuple: &str) {
    for i in 0..rows {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(tuple);
    }
}

/// The SQLite store. Cloning shares the pool.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Writes bounds at submission: each to a job with none yet, or, given the
    /// submission it is for, to the job still submitted then
    /// ([`Store::set_bounds`], [`Store::correct_bounds`]).
    async fn write_bounds<'a>(
        &self,
        bounds: impl Iterator<Item = (&'a JobBound, Option<i64>)>,
    ) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut tx = conn.begin().await.map_err(db_error)?;
        for (b, submit) in bounds {
            sqlx::query(
                "UPDATE jobs SET bound_s = ?1, bound_status = ?2 WHERE id = ?3 \
                 AND (submit_time = ?4 OR (?4 IS NULL AND bound_status IS NULL))",
            )
            .bind(b.bound_s)
            .bind(&b.status)
            .bind(b.id)
            .bind(submit)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)
    }

    /// Opens (creating if missing) the database file a `sqlite:` URL names.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Database(format!("{url}: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL with NORMAL sync is durable across process crashes and loses at most
            // the last transactions on power loss — SQLite's recommended pairing.
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Database(format!("{url}: {e}")))?;
        Ok(Self { pool })
    }
}

/// `SELECT` of the stored jobs among `rows` (site, job id) pairs, bound in that order.
fn stored_jobs_sql(rows: usize) -> String {
    let mut sql = String::from(concat!("SELECT ", job_columns!(), " FROM (VALUES "));
    push_tuples(&mut sql, rows, "(?, ?)");
    sql.push_str(") AS v JOIN jobs j ON j.site_id = v.column1 AND j.job_id = v.column2");
    sql
}

/// `INSERT` of `rows` new jobs with their ids and bounds (as [`bind_job`] binds a job,
/// then id, bound and its status).
fn insert_new_jobs_sql(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO jobs (site_id, queue_id, job_id, submit_time, start_time, end_time, \
           nodes, walltime_s, state, user_key, id, bound_s, bound_status) VALUES ",
    );
    push_tuples(&mut sql, rows, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    sql
}

impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn insert_jobs(&self, jobs: &[NewJob]) -> StoreResult<u64> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut tx = conn.begin().await.map_err(db_error)?;
        let mut inserted = 0;
        for chunk in jobs.chunks(ROWS_PER_INSERT) {
            let mut query = sqlx::query(AssertSqlSafe(insert_jobs_sql(chunk.len())));
            for j in chunk {
                query = bind_job!(query, j);
            }
            inserted += query
                .execute(&mut *tx)
                .await
                .map_err(db_error)?
                .rows_affected();
        }
        tx.commit().await.map_err(db_error)?;
        Ok(inserted)
    }

    async fn upsert_jobs(&self, jobs: &[NewJob]) -> StoreResult<Vec<Job>> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut tx = conn.begin().await.map_err(db_error)?;
        let mut changed = Vec::new();
        for j in last_per_job(jobs) {
            // A start or end once seen is never lost to a later record without one of the same
            // submission; a new submit time (a requeue) starts the job over (see `JobChanges::of`).
            let row = bind_job!(
                sqlx::query_as::<_, JobRow>(concat!(
                "INSERT INTO jobs (site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state, user_key) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (site_id, job_id) DO UPDATE SET ",
                job_upsert_set!(),
                "WHERE ", job_not_older!(), " AND (jobs.queue_id IS NOT excluded.queue_id OR jobs.submit_time IS NOT excluded.submit_time \
                    OR jobs.start_time IS NOT COALESCE(excluded.start_time, jobs.start_time) \
                    OR jobs.end_time IS NOT COALESCE(excluded.end_time, jobs.end_time) \
                    OR jobs.nodes IS NOT ", job_kept_size!("nodes"), " \
                    OR jobs.walltime_s IS NOT ", job_kept_size!("walltime_s"), " \
                    OR jobs.state IS NOT excluded.state) \
                 RETURNING ",
                job_columns!()
            )),
                j
            )
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
            if let Some(row) = row {
                changed.push(Job::try_from(row)?);
            }
        }
        tx.commit().await.map_err(db_error)?;
        Ok(changed)
    }

    async fn ingest_jobs<F>(&self, jobs: &[NewJob], predict: F) -> StoreResult<Vec<Job>>
    where
        F: FnOnce(&[Job]) -> Vec<JobBound> + Send,
    {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        // A write transaction from the start: other writers wait (busy timeout) until
        // commit, so what is read below stays true until the write.
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db_error)?;
        let mut stored = Vec::new();
        let latest = last_per_job(jobs);
        for chunk in latest.chunks(ROWS_PER_INSERT) {
            let mut query =
                sqlx::query_as::<_, JobRow>(AssertSqlSafe(stored_jobs_sql(chunk.len())));
            for j in chunk {
                query = query.bind(j.site_id).bind(&j.job_id);
            }
            let rows = query.fetch_all(&mut *tx).await.map_err(db_error)?;
            stored.extend(convert::<_, Job>(rows)?);
        }
        let plan = JobChanges::of(jobs, &stored);
        let updated = plan.changed.len();
        // The ids SQLite itself would give (the largest plus one), given here so that
        // the predictors know them before the write.
        let (last,): (i64,) = sqlx::query_as("SELECT COALESCE(MAX(id), 0) FROM jobs")
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        let ids: Vec<i64> = (1..=plan.new.len() as i64).map(|k| last + k).collect();
        let mut changed = plan.with_ids(&ids);
        let bounds = predict(&changed);
        apply_bounds(&mut changed, bounds);
        let (old, new) = changed.split_at(updated);
        for chunk in new.chunks(ROWS_PER_INSERT) {
            let mut query = sqlx::query(AssertSqlSafe(insert_new_jobs_sql(chunk.len())));
            for j in chunk {
                query = bind_job!(query, j)
                    .bind(j.id)
                    .bind(j.bound_s)
                    .bind(&j.bound_status);
            }
            query.execute(&mut *tx).await.map_err(db_error)?;
        }
        for j in old {
            sqlx::query(
                "UPDATE jobs SET queue_id = ?, submit_time = ?, start_time = ?, end_time = ?, \
                   nodes = ?, walltime_s = ?, state = ?, bound_s = ?, bound_status = ?, \
                   user_key = ? \
                 WHERE id = ?",
            )
            .bind(j.queue_id)
            .bind(j.submit_time)
            .bind(j.start_time)
            .bind(j.end_time)
            .bind(j.nodes)
            .bind(j.walltime_s)
            .bind(j.state.as_str())
            .bind(j.bound_s)
            .bind(&j.bound_status)
            .bind(&j.user_key)
            .bind(j.id)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
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
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut tx = conn.begin().await.map_err(db_error)?;
        let mut inserted = 0;
        for r in rejects {
            inserted += sqlx::query(
                "INSERT INTO rejects (site_id, source, line, raw, reason, received_at) \
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(r.site_id)
            .bind(&r.source)
            .bind(r.line)
            .bind(&r.raw)
            .bind(&r.reason)
            .bind(r.received_at)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?
            .rows_affected();
        }
        tx.commit().await.map_err(db_error)?;
        Ok(inserted)
    }

    common_store_methods!();
    source_store_methods!();
    reservation_store_methods!("");
}
