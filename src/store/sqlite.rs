//! The embedded SQLite backend (the default): one file, WAL journal, foreign keys on.
//! Batches are written in one transaction each, with one prepared statement reused per
//! row — SQLite's fastest path, since a transaction, not a statement, costs a sync.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Acquire, SqlitePool};

use super::rows::{
    JobRow, QueueRow, QueueStatsRow, RejectRow, SiteRow, SiteSummaryRow, TokenRow, convert,
    job_columns, last_per_job, now_unix, queue_columns, reject_columns, site_columns,
    token_columns,
};
use super::{
    ApiToken, Job, JobBound, JobCursor, NewApiToken, NewJob, NewQueue, NewReject, NewSite, Queue,
    QueueStats, Reject, Site, SiteSummary, StartWindow, Store, StoreError, StoreResult, db_error,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The SQLite store. Cloning shares the pool.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
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

impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn migrate(&self) -> StoreResult<()> {
        MIGRATOR
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Migrate(e.to_string()))
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map(|_| ())
            .map_err(db_error)
    }

    async fn upsert_site(&self, site: &NewSite) -> StoreResult<Site> {
        // The no-op update makes RETURNING give the existing row on a conflict.
        sqlx::query_as::<_, SiteRow>(concat!(
            "INSERT INTO sites (name, kind, description, time_zone, created_at) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING ",
            site_columns!()
        ))
        .bind(&site.name)
        .bind(site.kind.as_str())
        .bind(&site.description)
        .bind(&site.time_zone)
        .bind(now_unix())
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)?
        .try_into()
    }

    async fn site(&self, name: &str) -> StoreResult<Option<Site>> {
        sqlx::query_as::<_, SiteRow>(concat!(
            "SELECT ",
            site_columns!(),
            " FROM sites WHERE name = ?"
        ))
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .map(Site::try_from)
        .transpose()
    }

    async fn sites(&self) -> StoreResult<Vec<SiteSummary>> {
        let rows = sqlx::query_as::<_, SiteSummaryRow>(
            "SELECT s.id, s.name, s.kind, s.description, s.time_zone, s.created_at, \
                    (SELECT COUNT(*) FROM queues q WHERE q.site_id = s.id) AS queues, \
                    (SELECT COUNT(*) FROM jobs j WHERE j.site_id = s.id) AS jobs, \
                    (SELECT MAX(COALESCE(j.start_time, j.submit_time)) \
                       FROM jobs j WHERE j.site_id = s.id) AS last_event \
             FROM sites s ORDER BY s.name",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn upsert_queue(&self, site_id: i64, queue: &NewQueue) -> StoreResult<Queue> {
        Ok(sqlx::query_as::<_, QueueRow>(concat!(
            "INSERT INTO queues (site_id, name, max_walltime_s, max_nodes) VALUES (?, ?, ?, ?) \
             ON CONFLICT (site_id, name) DO UPDATE SET \
               max_walltime_s = COALESCE(excluded.max_walltime_s, queues.max_walltime_s), \
               max_nodes = COALESCE(excluded.max_nodes, queues.max_nodes) \
             RETURNING ",
            queue_columns!()
        ))
        .bind(site_id)
        .bind(&queue.name)
        .bind(queue.max_walltime_s)
        .bind(queue.max_nodes)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error)?
        .into())
    }

    async fn queue(&self, site_id: i64, name: &str) -> StoreResult<Option<Queue>> {
        Ok(sqlx::query_as::<_, QueueRow>(concat!(
            "SELECT ",
            queue_columns!(),
            " FROM queues WHERE site_id = ? AND name = ?"
        ))
        .bind(site_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .map(Queue::from))
    }

    async fn queue_stats(&self, site_id: i64) -> StoreResult<Vec<QueueStats>> {
        let rows = sqlx::query_as::<_, QueueStatsRow>(
            "SELECT q.id, q.site_id, q.name, q.max_walltime_s, q.max_nodes, \
                    COUNT(j.id) AS jobs, COUNT(j.start_time) AS started, \
                    MAX(j.start_time) AS last_release, MAX(j.submit_time) AS last_submit \
             FROM queues q LEFT JOIN jobs j ON j.queue_id = q.id \
             WHERE q.site_id = ? GROUP BY q.id ORDER BY q.name",
        )
        .bind(site_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(QueueStats::from).collect())
    }

    async fn insert_jobs(&self, jobs: &[NewJob]) -> StoreResult<u64> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut tx = conn.begin().await.map_err(db_error)?;
        let mut inserted = 0;
        for j in jobs {
            inserted += sqlx::query(
                "INSERT INTO jobs (site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (site_id, job_id) DO NOTHING",
            )
            .bind(j.site_id)
            .bind(j.queue_id)
            .bind(&j.job_id)
            .bind(j.submit_time)
            .bind(j.start_time)
            .bind(j.end_time)
            .bind(j.nodes)
            .bind(j.walltime_s)
            .bind(j.state.as_str())
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
            // A start or end once seen is never lost to a later record without one.
            let row = sqlx::query_as::<_, JobRow>(concat!(
                "INSERT INTO jobs (site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (site_id, job_id) DO UPDATE SET \
                   queue_id = excluded.queue_id, submit_time = excluded.submit_time, \
                   start_time = COALESCE(excluded.start_time, jobs.start_time), \
                   end_time = COALESCE(excluded.end_time, jobs.end_time), \
                   nodes = excluded.nodes, walltime_s = excluded.walltime_s, state = excluded.state \
                 WHERE jobs.queue_id IS NOT excluded.queue_id OR jobs.submit_time IS NOT excluded.submit_time \
                    OR jobs.start_time IS NOT COALESCE(excluded.start_time, jobs.start_time) \
                    OR jobs.end_time IS NOT COALESCE(excluded.end_time, jobs.end_time) \
                    OR jobs.nodes IS NOT excluded.nodes OR jobs.walltime_s IS NOT excluded.walltime_s \
                    OR jobs.state IS NOT excluded.state \
                 RETURNING ",
                job_columns!()
            ))
            .bind(j.site_id)
            .bind(j.queue_id)
            .bind(&j.job_id)
            .bind(j.submit_time)
            .bind(j.start_time)
            .bind(j.end_time)
            .bind(j.nodes)
            .bind(j.walltime_s)
            .bind(j.state.as_str())
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

    async fn jobs_page(
        &self,
        queue_id: i64,
        after: Option<JobCursor>,
        limit: i64,
    ) -> StoreResult<Vec<Job>> {
        let after = after.unwrap_or(JobCursor {
            submit_time: i64::MIN,
            id: i64::MIN,
        });
        let rows = sqlx::query_as::<_, JobRow>(concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE queue_id = ? AND (submit_time, id) > (?, ?) \
              ORDER BY submit_time, id LIMIT ?"
        ))
        .bind(queue_id)
        .bind(after.submit_time)
        .bind(after.id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn jobs_started(&self, queue_id: i64, w: StartWindow) -> StoreResult<Vec<Job>> {
        let rows = sqlx::query_as::<_, JobRow>(concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE queue_id = ? AND start_time >= ? AND start_time < ? \
              ORDER BY start_time, id LIMIT ?"
        ))
        .bind(queue_id)
        .bind(w.since)
        .bind(w.until)
        .bind(w.limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn set_bounds(&self, bounds: &[JobBound]) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let mut tx = conn.begin().await.map_err(db_error)?;
        for b in bounds {
            sqlx::query("UPDATE jobs SET bound_s = ?, bound_status = ? WHERE id = ?")
                .bind(b.bound_s)
                .bind(&b.status)
                .bind(b.id)
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)
    }

    async fn insert_token(&self, t: &NewApiToken) -> StoreResult<ApiToken> {
        sqlx::query_as::<_, TokenRow>(concat!(
            "INSERT INTO api_tokens (name, scope, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?) RETURNING ",
            token_columns!()
        ))
        .bind(&t.name)
        .bind(t.scope.as_str())
        .bind(&t.prefix)
        .bind(&t.hash)
        .bind(now_unix())
        .fetch_one(&self.pool)
        .await
        .map_err(|e| token_conflict(db_error(e), &t.name))?
        .try_into()
    }

    async fn tokens_with_prefix(&self, prefix: &str) -> StoreResult<Vec<ApiToken>> {
        let rows = sqlx::query_as::<_, TokenRow>(concat!(
            "SELECT ",
            token_columns!(),
            " FROM api_tokens WHERE prefix = ?"
        ))
        .bind(prefix)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn tokens(&self) -> StoreResult<Vec<ApiToken>> {
        let rows = sqlx::query_as::<_, TokenRow>(concat!(
            "SELECT ",
            token_columns!(),
            " FROM api_tokens ORDER BY name"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        convert(rows)
    }

    async fn delete_token(&self, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM api_tokens WHERE name = ?")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() > 0)
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

    async fn rejects(&self, site_id: i64, limit: i64) -> StoreResult<Vec<Reject>> {
        let rows = sqlx::query_as::<_, RejectRow>(concat!(
            "SELECT ",
            reject_columns!(),
            " FROM rejects WHERE site_id = ? ORDER BY id LIMIT ?"
        ))
        .bind(site_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(Reject::from).collect())
    }
}

/// A clearer message for the one uniqueness rule a person runs into.
pub(super) fn token_conflict(e: StoreError, name: &str) -> StoreError {
    match e {
        StoreError::Conflict(_) => {
            StoreError::Conflict(format!("a token named {name:?} already exists"))
        }
        other => other,
    }
}
