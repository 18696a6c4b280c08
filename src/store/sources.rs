//! Background sources' durable state: a cursor and health per (site, source), the
//! same SQL on both backends (expanded into each `impl Store`).

/// A source's stored state: where it resumes and how it has been doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceState {
    /// The site it feeds.
    pub site_id: i64,
    /// The source's name (unique per site), e.g. `slurm_rest`.
    pub source: String,
    /// The kind (`slurm_rest`, `sacct`, `pbs_accounting`, `sge_accounting`, `swf`).
    pub kind: String,
    /// Where it resumes: opaque text the source understands.
    pub cursor: Option<String>,
    /// Last successful poll, Unix seconds.
    pub last_success_at: Option<i64>,
    /// The last error's message (kept after a later success, with its time).
    pub last_error: Option<String>,
    /// When the last error happened, Unix seconds.
    pub last_error_at: Option<i64>,
    /// Failures since the last success.
    pub consecutive_failures: i64,
    /// Records stored (new, or news of a known job) over the source's life.
    pub accepted: i64,
    /// Records kept aside as rejects over the source's life.
    pub rejected: i64,
    /// Latest event (submit, start or end) among the records read, Unix seconds.
    pub last_record_at: Option<i64>,
    /// What the source last said about itself (e.g. the API version it speaks).
    pub detail: Option<String>,
}

/// A successful poll, to add to a source's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceProgress {
    /// The site it feeds.
    pub site_id: i64,
    /// The source's name.
    pub source: String,
    /// Its kind.
    pub kind: String,
    /// The new cursor (`None` keeps the stored one).
    pub cursor: Option<String>,
    /// When the poll ended, Unix seconds.
    pub at: i64,
    /// Records stored by this poll.
    pub accepted: i64,
    /// Records kept aside by this poll.
    pub rejected: i64,
    /// Latest event among the records read (`None` keeps the stored one).
    pub last_record_at: Option<i64>,
    /// What the source says about itself (`None` keeps the stored one).
    pub detail: Option<String>,
}

/// Columns of `source_states`.
macro_rules! source_columns {
    () => {
        "site_id, source, kind, cursor, last_success_at, last_error, last_error_at, \
         consecutive_failures, accepted, rejected, last_record_at, detail"
    };
}
pub(super) use source_columns;

macro_rules! source_store_methods {
    () => {
    async fn source_state(&self, site_id: i64, source: &str) -> StoreResult<Option<SourceState>> {
        Ok(sqlx::query_as::<_, SourceRow>(concat!(
            "SELECT ", source_columns!(), " FROM source_states WHERE site_id = $1 AND source = $2"
        ))
        .bind(site_id)
        .bind(source)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?
        .map(SourceState::from))
    }

    async fn source_states(&self, site_id: i64) -> StoreResult<Vec<SourceState>> {
        let rows = sqlx::query_as::<_, SourceRow>(concat!(
            "SELECT ", source_columns!(), " FROM source_states WHERE site_id = $1 ORDER BY source"
        ))
        .bind(site_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(SourceState::from).collect())
    }

    async fn source_succeeded(&self, p: &SourceProgress) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO source_states (site_id, source, kind, cursor, last_success_at, \
               consecutive_failures, accepted, rejected, last_record_at, detail) \
             VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9) \
             ON CONFLICT (site_id, source) DO UPDATE SET \
               kind = EXCLUDED.kind, \
               cursor = COALESCE(EXCLUDED.cursor, source_states.cursor), \
               last_success_at = EXCLUDED.last_success_at, \
               consecutive_failures = 0, \
               accepted = source_states.accepted + EXCLUDED.accepted, \
               rejected = source_states.rejected + EXCLUDED.rejected, \
               detail = COALESCE(EXCLUDED.detail, source_states.detail), \
               last_record_at = CASE \
                 WHEN source_states.last_record_at IS NULL THEN EXCLUDED.last_record_at \
                 WHEN EXCLUDED.last_record_at IS NULL THEN source_states.last_record_at \
                 WHEN EXCLUDED.last_record_at > source_states.last_record_at THEN EXCLUDED.last_record_at \
                 ELSE source_states.last_record_at END",
        )
        .bind(p.site_id)
        .bind(&p.source)
        .bind(&p.kind)
        .bind(&p.cursor)
        .bind(p.at)
        .bind(p.accepted)
        .bind(p.rejected)
        .bind(p.last_record_at)
        .bind(&p.detail)
        .execute(&self.pool)
        .await
        .map(drop)
        .map_err(db_error)
    }

    async fn source_failed(
        &self,
        site_id: i64,
        source: &str,
        kind: &str,
        at: i64,
        error: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO source_states (site_id, source, kind, last_error, last_error_at, consecutive_failures) \
             VALUES ($1, $2, $3, $4, $5, 1) \
             ON CONFLICT (site_id, source) DO UPDATE SET \
               kind = EXCLUDED.kind, last_error = EXCLUDED.last_error, \
               last_error_at = EXCLUDED.last_error_at, \
               consecutive_failures = source_states.consecutive_failures + 1",
        )
        .bind(site_id)
        .bind(source)
        .bind(kind)
        .bind(error)
        .bind(at)
        .execute(&self.pool)
        .await
        .map(drop)
        .map_err(db_error)
    }
    };
}
pub(super) use source_store_methods;
