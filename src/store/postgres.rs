//! The PostgreSQL backend. Batches travel as one statement each: the rows go as
//! column arrays and come apart with `UNNEST … WITH ORDINALITY`, so a batch of ten
//! thousand jobs is one round trip and the identity values follow the batch's order.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::rows::{
    JobRow, QueueRow, QueueStatsRow, RejectRow, SiteRow, SiteSummaryRow, TokenRow, convert,
    job_columns, last_per_job, now_unix, queue_columns, reject_columns, site_columns,
    token_columns,
};
use super::sqlite::token_conflict;
use super::{
    ApiToken, Job, JobBound, JobCursor, NewApiToken, NewJob, NewQueue, NewReject, NewSite, Queue,
    QueueStats, Reject, Site, SiteSummary, StartWindow, Store, StoreError, StoreResult, db_error,
    redact_url,
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
        let shown = redact_url(url);
        let options: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::Database(format!("{shown}: {e}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Database(format!("{shown}: {e}")))?;
        Ok(Self { pool })
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
        }
        c
    }
}

/// `SELECT` of a batch's rows from nine array parameters, in batch order.
macro_rules! unnest_jobs {
    () => {
        "SELECT site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state \
         FROM UNNEST($1::int8[], $2::int8[], $3::text[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::text[]) \
         WITH ORDINALITY AS u(site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state, ord) \
         ORDER BY ord"
    };
}

impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
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
        sqlx::query_as::<_, SiteRow>(concat!(
            "INSERT INTO sites (name, kind, description, time_zone, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING ",
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
            " FROM sites WHERE name = $1"
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
            "INSERT INTO queues (site_id, name, max_walltime_s, max_nodes) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (site_id, name) DO UPDATE SET \
               max_walltime_s = COALESCE(EXCLUDED.max_walltime_s, queues.max_walltime_s), \
               max_nodes = COALESCE(EXCLUDED.max_nodes, queues.max_nodes) \
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
            " FROM queues WHERE site_id = $1 AND name = $2"
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
             WHERE q.site_id = $1 GROUP BY q.id ORDER BY q.name",
        )
        .bind(site_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(QueueStats::from).collect())
    }

    async fn insert_jobs(&self, jobs: &[NewJob]) -> StoreResult<u64> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let c: JobColumns = jobs.iter().collect();
        let done = sqlx::query(concat!(
            "INSERT INTO jobs (site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state) ",
            unnest_jobs!(),
            " ON CONFLICT (site_id, job_id) DO NOTHING"
        ))
        .bind(c.site_id)
        .bind(c.queue_id)
        .bind(c.job_id)
        .bind(c.submit_time)
        .bind(c.start_time)
        .bind(c.end_time)
        .bind(c.nodes)
        .bind(c.walltime_s)
        .bind(c.state)
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
        // A start or end once seen is never lost to a later record without one.
        let rows = sqlx::query_as::<_, JobRow>(concat!(
            "INSERT INTO jobs (site_id, queue_id, job_id, submit_time, start_time, end_time, nodes, walltime_s, state) ",
            unnest_jobs!(),
            " ON CONFLICT (site_id, job_id) DO UPDATE SET \
                queue_id = EXCLUDED.queue_id, submit_time = EXCLUDED.submit_time, \
                start_time = COALESCE(EXCLUDED.start_time, jobs.start_time), \
                end_time = COALESCE(EXCLUDED.end_time, jobs.end_time), \
                nodes = EXCLUDED.nodes, walltime_s = EXCLUDED.walltime_s, state = EXCLUDED.state \
              WHERE (jobs.queue_id, jobs.submit_time, jobs.start_time, jobs.end_time, jobs.nodes, jobs.walltime_s, jobs.state) \
                IS DISTINCT FROM (EXCLUDED.queue_id, EXCLUDED.submit_time, COALESCE(EXCLUDED.start_time, jobs.start_time), \
                  COALESCE(EXCLUDED.end_time, jobs.end_time), EXCLUDED.nodes, EXCLUDED.walltime_s, EXCLUDED.state) \
              RETURNING ",
            job_columns!()
        ))
        .bind(c.site_id)
        .bind(c.queue_id)
        .bind(c.job_id)
        .bind(c.submit_time)
        .bind(c.start_time)
        .bind(c.end_time)
        .bind(c.nodes)
        .bind(c.walltime_s)
        .bind(c.state)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let mut jobs: Vec<Job> = convert(rows)?;
        // RETURNING promises no order; callers get arrival order.
        jobs.sort_by_key(|j| j.id);
        Ok(jobs)
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
            " FROM jobs WHERE queue_id = $1 AND (submit_time, id) > ($2, $3) \
              ORDER BY submit_time, id LIMIT $4"
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
            " FROM jobs WHERE queue_id = $1 AND start_time >= $2 AND start_time < $3 \
              ORDER BY start_time, id LIMIT $4"
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
        if bounds.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = bounds.iter().map(|b| b.id).collect();
        let values: Vec<Option<i64>> = bounds.iter().map(|b| b.bound_s).collect();
        let statuses: Vec<&str> = bounds.iter().map(|b| b.status.as_str()).collect();
        sqlx::query(
            "UPDATE jobs SET bound_s = u.bound_s, bound_status = u.status \
             FROM UNNEST($1::int8[], $2::int8[], $3::text[]) AS u(id, bound_s, status) \
             WHERE jobs.id = u.id",
        )
        .bind(ids)
        .bind(values)
        .bind(statuses)
        .execute(&self.pool)
        .await
        .map(|_| ())
        .map_err(db_error)
    }

    async fn insert_token(&self, t: &NewApiToken) -> StoreResult<ApiToken> {
        sqlx::query_as::<_, TokenRow>(concat!(
            "INSERT INTO api_tokens (name, scope, prefix, hash, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING ",
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
            " FROM api_tokens WHERE prefix = $1"
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
        let done = sqlx::query("DELETE FROM api_tokens WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() > 0)
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

    async fn rejects(&self, site_id: i64, limit: i64) -> StoreResult<Vec<Reject>> {
        let rows = sqlx::query_as::<_, RejectRow>(concat!(
            "SELECT ",
            reject_columns!(),
            " FROM rejects WHERE site_id = $1 ORDER BY id LIMIT $2"
        ))
        .bind(site_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(Reject::from).collect())
    }
}
