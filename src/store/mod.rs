//! Persistent storage: sites, queues, jobs, API tokens, rejected records, and managed
//! reservations with their events and co-allocations.
//!
//! [`Store`] is implemented twice, natively: [`SqliteStore`] (the embedded default,
//! `sqlite://qbets.db`) and [`PgStore`] (PostgreSQL). The backend is chosen once, at
//! start-up, from the database URL ([`with_store`]) and passed down as a generic, so
//! nothing above this module knows which one runs. Times are Unix seconds (`i64`) on
//! both backends. Each backend's migrations (`migrations/sqlite`, `migrations/postgres`)
//! are embedded in the binary and applied by [`Store::migrate`].
//!
//! This is the only module that speaks SQL. May import: sqlx, futures-util, std,
//! serde_json (a webhook event's body, written with the change it tells of) and the
//! crate's domain types. Row structs (`rows.rs`) carry the sqlx traits; the domain types
//! here do not.

mod common;
mod postgres;
mod reservation_sql;
mod reservations;
mod rows;
mod sources;
mod sqlite;

pub use reservations::{
    Calibration, Coallocation, NewCoallocation, NewReservation, PlanFields, Replanned, Reservation,
    ReservationEvent, ReservationRequest, SiteScope, Transition, WebhookDelivery, WebhookOutcome,
};

use std::fmt;
use std::future::Future;
use std::str::FromStr;

use futures_util::Stream;

pub use postgres::PgStore;
pub use sources::{SourceProgress, SourceState};
pub use sqlite::SqliteStore;

/// The database URL used when none is given: an SQLite file in the working directory,
/// created on first start.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://qbets.db";

/// Rows per page when streaming jobs for a rebuild.
pub const REBUILD_PAGE: i64 = 10_000;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL names no backend we have (neither `sqlite:` nor `postgres:`).
    #[error(
        "unsupported database URL {0:?}: use sqlite://FILE (a file, not memory) or postgres://…"
    )]
    UnsupportedUrl(String),
    /// A uniqueness rule was broken, e.g. a token name already taken.
    #[error("{0}")]
    Conflict(String),
    /// A value the schema refuses (it names the rule).
    #[error("invalid value: {0}")]
    Invalid(String),
    /// Migrations could not be applied.
    #[error("database migration failed: {0}")]
    Migrate(String),
    /// The database failed.
    #[error("database error: {0}")]
    Database(String),
    /// The database could not be reached, or was too busy to answer (locked, a
    /// deadlock or serialization failure, no connection free in time): trying again
    /// later may succeed.
    #[error("database unavailable: {0}")]
    Unavailable(String),
}

/// The owner a revoked token's reservations are left under: no token can be named so
/// (names have no spaces or parentheses), so no later token inherits them.
pub fn revoked_owner(name: &str, token_id: i64) -> String {
    format!("{name} (revoked token {token_id})")
}

/// Result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

/// Whether a site is a trace archive or a live machine. An archive answers as of its
/// last record (a 1996 trace is not a machine down for 30 years); a live site as of now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteKind {
    /// Imported from a trace: answers speak for its last record.
    Archive,
    /// Fed by a scheduler: answers speak for now.
    Live,
}

/// A site: one machine (or one trace of one) with its queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The store's id.
    pub id: i64,
    /// Unique name, as used in URLs.
    pub name: String,
    /// Archive or live.
    pub kind: SiteKind,
    /// Free text about the machine.
    pub description: String,
    /// IANA zone name, when known (e.g. from an SWF header's `TimeZoneString`).
    pub time_zone: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
}

/// A site to create (or find, when one of the same name exists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSite {
    /// Unique name, as used in URLs.
    pub name: String,
    /// Archive or live (kept when the site exists).
    pub kind: SiteKind,
    /// Free text about the machine (an existing site of the same kind takes it unless
    /// it is empty).
    pub description: String,
    /// IANA zone name, when known (an existing site of the same kind takes it when
    /// given).
    pub time_zone: Option<String>,
}

/// A site with what the store knows of its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteSummary {
    /// The site.
    pub site: Site,
    /// How many queues it has.
    pub queues: i64,
    /// How many jobs are stored for it.
    pub jobs: i64,
    /// Latest submit or start time of any job (Unix seconds): the instant an archive
    /// site's answers speak for.
    pub last_event: Option<i64>,
}

impl SiteSummary {
    /// A site's summary from its queues' counts.
    pub fn from_queues(site: Site, queues: &[QueueStats]) -> Self {
        SiteSummary {
            site,
            queues: queues.len() as i64,
            jobs: queues.iter().map(|q| q.jobs).sum(),
            last_event: last_event(queues),
        }
    }
}

/// The latest submit or start among queues' jobs: the instant an archive's answers
/// speak for.
pub fn last_event(queues: &[QueueStats]) -> Option<i64> {
    queues
        .iter()
        .flat_map(|q| [q.last_release, q.last_submit])
        .flatten()
        .max()
}

/// A queue of a site, with its limits where known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    /// The store's id.
    pub id: i64,
    /// The site it belongs to.
    pub site_id: i64,
    /// Unique within the site.
    pub name: String,
    /// Longest walltime accepted, in seconds, when known.
    pub max_walltime_s: Option<i64>,
    /// Most nodes a job may ask for, when known.
    pub max_nodes: Option<i64>,
    /// Nodes the queue's jobs can reach in all (the partition's or the machine's), when
    /// known: a job asking for more never runs there, whatever `max_nodes` says.
    pub total_nodes: Option<i64>,
}

/// A queue to create or update. Limits given as `None` leave known limits unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewQueue {
    /// Unique within the site.
    pub name: String,
    /// Longest walltime accepted, in seconds.
    pub max_walltime_s: Option<i64>,
    /// Most nodes a job may ask for.
    pub max_nodes: Option<i64>,
    /// Nodes the queue's jobs can reach in all (the partition's or the machine's).
    pub total_nodes: Option<i64>,
}

/// A queue with counts over its stored jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStats {
    /// The queue.
    pub queue: Queue,
    /// Jobs stored for this queue.
    pub jobs: i64,
    /// Of those, jobs that have started (their waits are the history).
    pub started: i64,
    /// Latest start time (a "release" from the queue), Unix seconds.
    pub last_release: Option<i64>,
    /// Latest submit time, Unix seconds.
    pub last_submit: Option<i64>,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting in the queue.
    Pending,
    /// Started, not ended.
    Running,
    /// Ran to its end.
    Completed,
    /// Ended in failure.
    Failed,
    /// Cancelled (it may have waited, or run, first).
    Cancelled,
    /// The source does not say.
    Unknown,
}

impl JobState {
    /// Every state, in the order the schema lists them.
    pub const ALL: [JobState; 6] = [
        JobState::Pending,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Unknown,
    ];

    /// The name stored in the database and shown in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Unknown => "unknown",
        }
    }
}

impl FromStr for JobState {
    type Err = StoreError;
    fn from_str(s: &str) -> StoreResult<Self> {
        by_name(Self::ALL, Self::as_str, s, "job state")
    }
}

/// The one of `all` whose name is `s`.
fn by_name<T: Copy, const N: usize>(
    all: [T; N],
    name: fn(T) -> &'static str,
    s: &str,
    what: &str,
) -> StoreResult<T> {
    all.into_iter()
        .find(|k| name(*k) == s)
        .ok_or_else(|| StoreError::Invalid(format!("{what} {s:?}")))
}

impl SiteKind {
    /// The name stored in the database and shown in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            SiteKind::Archive => "archive",
            SiteKind::Live => "live",
        }
    }
}

impl FromStr for SiteKind {
    type Err = StoreError;
    fn from_str(s: &str) -> StoreResult<Self> {
        by_name(
            [SiteKind::Archive, SiteKind::Live],
            Self::as_str,
            s,
            "site kind",
        )
    }
}

/// A job record to store. `site_id`/`queue_id` come from [`Store::upsert_site`] and
/// [`Store::upsert_queue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// The site (see `Store::upsert_site`).
    pub site_id: i64,
    /// The queue (see `Store::upsert_queue`), of the same site.
    pub queue_id: i64,
    /// The scheduler's job id (unique per site).
    pub job_id: String,
    /// Unix seconds.
    pub submit_time: i64,
    /// `None` while pending.
    pub start_time: Option<i64>,
    /// Unix seconds, once ended.
    pub end_time: Option<i64>,
    /// Requested nodes (or processors), when known.
    pub nodes: Option<i64>,
    /// Requested walltime in seconds, when known.
    pub walltime_s: Option<i64>,
    /// Where the job is in its life.
    pub state: JobState,
    /// The scheduler's user, as a key (see [`crate::sources::JobRecord::user`]).
    pub user_key: Option<String>,
}

impl NewJob {
    /// Checks what the schema would refuse, so that one bad record is reported by name
    /// instead of failing the whole batch it travels in.
    pub fn validate(&self) -> Result<(), String> {
        check_job(
            &self.job_id,
            self.submit_time,
            self.start_time,
            self.end_time,
            self.nodes,
            self.walltime_s,
        )
    }
}

/// What the schema would refuse of a job's fields (see [`NewJob::validate`]).
pub fn check_job(
    job_id: &str,
    submit_time: i64,
    start_time: Option<i64>,
    end_time: Option<i64>,
    nodes: Option<i64>,
    walltime_s: Option<i64>,
) -> Result<(), String> {
    if job_id.is_empty() {
        return Err("job_id is empty".into());
    }
    // PostgreSQL's text cannot hold NUL, and no scheduler writes control characters in
    // an id: a file that has them is damaged there.
    if job_id.chars().any(char::is_control) {
        return Err(format!("job_id {job_id:?} contains control characters"));
    }
    // Times RFC 3339 can write (years 0 to 9999), so that every time the service
    // shows is a date and sums of times and waits stay far from overflow.
    const EARLIEST: i64 = -62_167_219_200; // 0000-01-01T00:00:00Z
    const LATEST: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    for (name, t) in [
        ("submit_time", Some(submit_time)),
        ("start_time", start_time),
        ("end_time", end_time),
    ] {
        if let Some(t) = t
            && !(EARLIEST..=LATEST).contains(&t)
        {
            return Err(format!("{name} {t} is not a time in the years 0 to 9999"));
        }
    }
    if let Some(s) = start_time
        && s < submit_time
    {
        return Err(format!(
            "start_time {s} is before submit_time {}",
            submit_time
        ));
    }
    if let Some(n) = nodes
        && n < 1
    {
        return Err(format!("nodes {n} is not positive"));
    }
    if let Some(w) = walltime_s
        && w < 1
    {
        return Err(format!("walltime_s {w} is not positive"));
    }
    match (start_time, end_time) {
        (Some(s), Some(e)) if e < s => Err(format!("end_time {e} is before start_time {s}")),
        (None, Some(e)) if e < submit_time => Err(format!(
            "end_time {e} is before submit_time {}",
            submit_time
        )),
        _ => Ok(()),
    }
}

/// A stored job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The store's own id: arrival order, the tie-breaker after submit time.
    pub id: i64,
    /// The site.
    pub site_id: i64,
    /// The queue.
    pub queue_id: i64,
    /// The scheduler's job id (unique per site).
    pub job_id: String,
    /// Unix seconds.
    pub submit_time: i64,
    /// Unix seconds; `None` while pending.
    pub start_time: Option<i64>,
    /// Unix seconds, once ended.
    pub end_time: Option<i64>,
    /// Requested nodes (or processors), when known.
    pub nodes: Option<i64>,
    /// Requested walltime in seconds, when known.
    pub walltime_s: Option<i64>,
    /// Where the job is in its life.
    pub state: JobState,
    /// The bound predicted at submission, once the live predictors have filled it.
    pub bound_s: Option<i64>,
    /// That prediction's status (`ok`, `insufficient_history`, `maybe_down`).
    pub bound_status: Option<String>,
    /// The scheduler's user, as a key: the first known for this submission. Never
    /// shown to other users.
    pub user_key: Option<String>,
}

impl Job {
    /// The wait in seconds, once the job has started.
    pub fn wait_s(&self) -> Option<i64> {
        self.start_time.map(|s| s - self.submit_time)
    }
}

/// Position in the rebuild order (submit time, then store id), for keyset paging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct JobCursor {
    /// Submit time of the last job seen.
    pub submit_time: i64,
    /// Store id of the last job seen.
    pub id: i64,
}

impl Job {
    /// The cursor just past this job.
    pub fn cursor(&self) -> JobCursor {
        JobCursor {
            submit_time: self.submit_time,
            id: self.id,
        }
    }
}

/// Jobs that started in `[since, until)`, for charts and audits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartWindow {
    /// First start time included (Unix seconds).
    pub since: i64,
    /// First start time excluded (Unix seconds).
    pub until: i64,
    /// Most jobs returned.
    pub limit: i64,
}

/// What a token may do. `admin` implies every other scope; any valid token may read.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Read answers (when reads are not public).
    Read,
    /// Send job records.
    Ingest,
    /// Make reservations.
    Reserve,
    /// Everything, including creating sites.
    Admin,
}

impl Scope {
    /// Every scope, in the order the schema lists them.
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Ingest, Scope::Reserve, Scope::Admin];

    /// The name stored in the database and used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Ingest => "ingest",
            Scope::Reserve => "reserve",
            Scope::Admin => "admin",
        }
    }

    /// Whether a token of this scope may do what `needed` allows.
    pub fn grants(self, needed: Scope) -> bool {
        self == needed || self == Scope::Admin || needed == Scope::Read
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = StoreError;
    fn from_str(s: &str) -> StoreResult<Self> {
        by_name(Self::ALL, Self::as_str, s, "scope")
    }
}

/// An API token as stored: its hash, never its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiToken {
    /// The store's id.
    pub id: i64,
    /// Unique name, to recognise the token by.
    pub name: String,
    /// What it may do.
    pub scope: Scope,
    /// The first characters of the secret, to find candidate rows.
    pub prefix: String,
    /// SHA-256 of the whole token.
    pub hash: Vec<u8>,
    /// Unix seconds.
    pub created_at: i64,
}

impl fmt::Debug for ApiToken {
    // The hash is not the secret, but it has no business in logs either.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiToken")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("scope", &self.scope)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

/// A token to store (see [`crate::service::tokens`] for how one is made).
#[derive(Clone, PartialEq, Eq)]
pub struct NewApiToken {
    /// Unique name, to recognise the token by.
    pub name: String,
    /// What it may do.
    pub scope: Scope,
    /// The first characters of the secret.
    pub prefix: String,
    /// SHA-256 of the whole token.
    pub hash: Vec<u8>,
}

/// A record that could not be read, kept with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewReject {
    /// The site it was meant for.
    pub site_id: i64,
    /// Where it came from: a file name, a sensor.
    pub source: String,
    /// Line number in `source`, when it has lines.
    pub line: Option<i64>,
    /// The record as received.
    pub raw: String,
    /// Why it was refused.
    pub reason: String,
    /// Unix seconds.
    pub received_at: i64,
}

/// A stored reject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    /// The store's id.
    pub id: i64,
    /// The site it was meant for.
    pub site_id: i64,
    /// Where it came from.
    pub source: String,
    /// Line number in `source`, when it has lines.
    pub line: Option<i64>,
    /// The record as received.
    pub raw: String,
    /// Why it was refused.
    pub reason: String,
    /// Unix seconds.
    pub received_at: i64,
}

/// The bound predicted for a job at its submission, written back by the predictors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobBound {
    /// The store's id of the job ([`Job::id`]).
    pub id: i64,
    /// The bound in seconds, when one was given.
    pub bound_s: Option<i64>,
    /// `ok`, `insufficient_history` or `maybe_down`.
    pub status: String,
}

/// The storage interface. Both implementations are cheap to clone (a pool handle).
///
/// Methods return `Send` futures so the store can be used from spawned tasks.
pub trait Store: Clone + Send + Sync + 'static {
    /// Which backend this is ("sqlite" or "postgres"), for logs and metrics.
    fn backend(&self) -> &'static str;

    /// Applies the embedded migrations that have not been applied yet.
    fn migrate(&self) -> impl Future<Output = StoreResult<()>> + Send;

    /// Checks that the database answers (for `/readyz`).
    fn ping(&self) -> impl Future<Output = StoreResult<()>> + Send;

    /// Finds the site of this name, or creates it. An existing site keeps its kind; one
    /// of the same kind takes the description (unless empty) and time zone (when given);
    /// one of the other kind is returned unchanged.
    fn upsert_site(&self, site: &NewSite) -> impl Future<Output = StoreResult<Site>> + Send;

    /// The site of this name.
    fn site(&self, name: &str) -> impl Future<Output = StoreResult<Option<Site>>> + Send;

    /// Every site with its counts, by name.
    fn sites(&self) -> impl Future<Output = StoreResult<Vec<SiteSummary>>> + Send;

    /// Finds or creates a queue of a site; limits given replace the stored ones.
    fn upsert_queue(
        &self,
        site_id: i64,
        queue: &NewQueue,
    ) -> impl Future<Output = StoreResult<Queue>> + Send;

    /// Finds or creates a queue of a site with exactly these limits: a limit given as
    /// none clears the stored one (a source that reads a queue's whole definition
    /// says "unlimited" that way).
    fn set_queue_limits(
        &self,
        site_id: i64,
        queue: &NewQueue,
    ) -> impl Future<Output = StoreResult<Queue>> + Send;

    /// The queue of this name at a site.
    fn queue(
        &self,
        site_id: i64,
        name: &str,
    ) -> impl Future<Output = StoreResult<Option<Queue>>> + Send;

    /// The latest submit or start time among a site's jobs (one index probe per
    /// queue): the instant an archive's answers speak for.
    fn site_last_event(
        &self,
        site_id: i64,
    ) -> impl Future<Output = StoreResult<Option<i64>>> + Send;

    /// Every queue of a site with counts over its jobs, by name.
    fn queue_stats(
        &self,
        site_id: i64,
    ) -> impl Future<Output = StoreResult<Vec<QueueStats>>> + Send;

    /// Inserts jobs in one batch, skipping any whose (site, job id) is already stored:
    /// re-importing changes nothing. Returns how many were new. Order is kept: the
    /// store ids follow the slice order.
    fn insert_jobs(&self, jobs: &[NewJob]) -> impl Future<Output = StoreResult<u64>> + Send;

    /// Inserts jobs or updates the stored ones of the same (site, job id) — a pending
    /// job that starts, a running job that ends. The predicted bound is kept, and so are
    /// a start or end once seen and the first known nodes and walltime, unless the
    /// record has another submit time: a job
    /// submitted anew under its id (Slurm gives a requeued job a new submit time) starts
    /// over, without the earlier submission's start, end and bound. Returns
    /// the stored jobs that were inserted or changed (a record identical to the stored
    /// one is not returned): the ones to hand to the predictors.
    fn upsert_jobs(&self, jobs: &[NewJob]) -> impl Future<Output = StoreResult<Vec<Job>>> + Send;

    /// The ingest path's write: [`Store::upsert_jobs`] with the bounds predicted at
    /// submission stored in the same write, so that each new job is written once.
    ///
    /// In one transaction, which holds off other `ingest_jobs` of the same sites: what
    /// is stored of each record's job is read, the changes worked out as `upsert_jobs`
    /// would make them (the last record of a job wins; a start or end once seen is
    /// kept for the same submit time; a record identical to the stored job changes
    /// nothing), the new jobs given their store ids (in batch order, after every
    /// stored job), and the changed jobs,
    /// sorted by id, handed to `predict`. The bounds it returns (by [`JobBound::id`],
    /// for any of those jobs) are written with the changes. Returns the changed jobs as
    /// stored, sorted by id — what `upsert_jobs` returns for the same records.
    fn ingest_jobs<F>(
        &self,
        jobs: &[NewJob],
        predict: F,
    ) -> impl Future<Output = StoreResult<Vec<Job>>> + Send
    where
        F: FnOnce(&[Job]) -> Vec<JobBound> + Send;

    /// One page of a queue's jobs in rebuild order (submit time, then store id), after
    /// `after`. See [`stream_jobs`] for the whole queue.
    fn jobs_page(
        &self,
        queue_id: i64,
        after: Option<JobCursor>,
        limit: i64,
    ) -> impl Future<Output = StoreResult<Vec<Job>>> + Send;

    /// One job of a site, by the scheduler's job id.
    fn job(
        &self,
        site_id: i64,
        job_id: &str,
    ) -> impl Future<Output = StoreResult<Option<Job>>> + Send;

    /// A site's jobs that have not ended (pending or running), by store id.
    fn open_jobs(&self, site_id: i64) -> impl Future<Output = StoreResult<Vec<Job>>> + Send;

    /// A queue's jobs that started in the window, by start time, at most `limit`.
    fn jobs_started(
        &self,
        queue_id: i64,
        window: StartWindow,
    ) -> impl Future<Output = StoreResult<Vec<Job>>> + Send;

    /// How many of a queue's jobs started in `[since, until)` (the window's `limit` is
    /// ignored).
    fn count_started(
        &self,
        queue_id: i64,
        window: StartWindow,
    ) -> impl Future<Output = StoreResult<i64>> + Send;

    /// A queue's jobs that started in the window, evenly thinned to at most `limit`
    /// (the first and the last always kept), by start time: a chart of a long window
    /// without downloading it whole. `total` is the window's count from
    /// [`Store::count_started`]; at or under `limit` every job is returned.
    fn jobs_started_thinned(
        &self,
        queue_id: i64,
        window: StartWindow,
        total: i64,
    ) -> impl Future<Output = StoreResult<Vec<Job>>> + Send;

    /// Records the bounds predicted at submission, for jobs that have none yet (a
    /// bound another writer recorded meanwhile — a requeue's — is not overwritten).
    fn set_bounds(&self, bounds: &[JobBound]) -> impl Future<Output = StoreResult<()>> + Send;

    /// Replaces the bounds predicted at submission `submit_time` (each pair's second) of
    /// jobs still submitted then: late news changed what the replay predicts for them. A
    /// job submitted anew since (a requeue) keeps its own.
    fn correct_bounds(
        &self,
        bounds: &[(JobBound, i64)],
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Stores a token; a name already taken is a [`StoreError::Conflict`].
    fn insert_token(
        &self,
        token: &NewApiToken,
    ) -> impl Future<Output = StoreResult<ApiToken>> + Send;

    /// The tokens whose secret starts with `prefix` (the caller compares hashes).
    fn tokens_with_prefix(
        &self,
        prefix: &str,
    ) -> impl Future<Output = StoreResult<Vec<ApiToken>>> + Send;

    /// Every token, by name.
    fn tokens(&self) -> impl Future<Output = StoreResult<Vec<ApiToken>>> + Send;

    /// Deletes the token of this name; whether there was one. Its reservations and
    /// co-allocations are detached from the name (their owner becomes
    /// [`revoked_owner`]), so that a new token given the same name does not see them —
    /// unless `keep_reservations` (an admin's decision) leaves them to the name.
    fn delete_token(
        &self,
        name: &str,
        keep_reservations: bool,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Keeps rejected records, each once (the same site, source, line and text). Returns
    /// how many were new.
    fn insert_rejects(
        &self,
        rejects: &[NewReject],
    ) -> impl Future<Output = StoreResult<u64>> + Send;

    /// How many rejects a site keeps.
    fn count_rejects(&self, site_id: i64) -> impl Future<Output = StoreResult<i64>> + Send;

    /// How many queues a site has.
    fn count_queues(&self, site_id: i64) -> impl Future<Output = StoreResult<i64>> + Send;

    /// A site's rejects with an id above `after`, oldest first, at most `limit`.
    fn rejects(
        &self,
        site_id: i64,
        after: i64,
        limit: i64,
    ) -> impl Future<Output = StoreResult<Vec<Reject>>> + Send;

    /// A background source's cursor and health.
    fn source_state(
        &self,
        site_id: i64,
        source: &str,
    ) -> impl Future<Output = StoreResult<Option<SourceState>>> + Send;

    /// Every source of a site, by name.
    fn source_states(
        &self,
        site_id: i64,
    ) -> impl Future<Output = StoreResult<Vec<SourceState>>> + Send;

    /// Records a successful poll: the new cursor (written after the records it covers),
    /// the counts added, failures reset.
    fn source_succeeded(
        &self,
        progress: &SourceProgress,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Records a failed poll (the cursor stays where it was).
    fn source_failed(
        &self,
        site_id: i64,
        source: &str,
        kind: &str,
        at: i64,
        error: &str,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Stores a reservation with its first event (its state and `reason`).
    fn insert_reservation(
        &self,
        r: &NewReservation,
    ) -> impl Future<Output = StoreResult<Reservation>> + Send;

    /// The reservation of this public id.
    fn reservation(
        &self,
        uid: &str,
    ) -> impl Future<Output = StoreResult<Option<Reservation>>> + Send;

    /// The reservation `owner` made with this `Idempotency-Key`, if any.
    fn reservation_by_idempotency_key(
        &self,
        owner: &str,
        key: &str,
    ) -> impl Future<Output = StoreResult<Option<Reservation>>> + Send;

    /// Reservations, newest first, of one owner (or everyone's), older than the one of
    /// store id `before` when given, at most `limit`.
    fn reservations(
        &self,
        owner: Option<&str>,
        before: Option<i64>,
        limit: i64,
    ) -> impl Future<Output = StoreResult<Vec<Reservation>>> + Send;

    /// Reservations that are not final (planned, submitted, started): the executor's work.
    fn active_reservations(&self) -> impl Future<Output = StoreResult<Vec<Reservation>>> + Send;

    /// A reservation's events, oldest first.
    fn reservation_events(
        &self,
        id: i64,
    ) -> impl Future<Output = StoreResult<Vec<ReservationEvent>>> + Send;

    /// Replaces a planned reservation's plan (not while it is leased for submission);
    /// whether it was changed.
    fn replan_reservation(
        &self,
        id: i64,
        r: &Replanned,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Atomically leases to `owner`, until `lease_until`, up to `limit` planned
    /// reservations whose submission time has come and that no live lease holds, at
    /// the sites in `scope`. A reservation is leased to one claimer only, however many
    /// replicas ask at once.
    fn claim_reservations(
        &self,
        now: i64,
        owner: &str,
        lease_until: i64,
        limit: i64,
        scope: &SiteScope,
    ) -> impl Future<Output = StoreResult<Vec<Reservation>>> + Send;

    /// Applies a state change if the reservation is still in `t.from` (compare-and-set),
    /// recording the event and dropping any lease; whether it was applied.
    fn transition_reservation(
        &self,
        id: i64,
        t: &Transition,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Marks (or clears) a reservation's remote job(s) as still to be cancelled.
    fn set_remote_cleanup(
        &self,
        id: i64,
        pending: bool,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Reservations whose remote job(s) are still to be cancelled, oldest first.
    fn remote_cleanups(&self) -> impl Future<Output = StoreResult<Vec<Reservation>>> + Send;

    /// Records that an executor is about to submit the reservation's placeholder job.
    fn mark_submit_attempt(&self, id: i64, at: i64)
    -> impl Future<Output = StoreResult<()>> + Send;

    /// Records an event that does not change the state.
    fn note_reservation(
        &self,
        id: i64,
        at: i64,
        reason: &str,
    ) -> impl Future<Output = StoreResult<()>> + Send;

    /// Gives up a submission lease (after a failed attempt, to retry later).
    fn release_lease(&self, id: i64, owner: &str) -> impl Future<Output = StoreResult<()>> + Send;

    /// Per site and queue: finished reservations, successes, mean predicted probability.
    fn calibration(&self) -> impl Future<Output = StoreResult<Vec<Calibration>>> + Send;

    /// Stores a co-allocation and its member reservations (each with its first event), all
    /// or nothing. A member's `coallocation` gives its reservation index; the id is the new
    /// co-allocation's.
    fn insert_coallocation(
        &self,
        c: &NewCoallocation,
        members: &[NewReservation],
    ) -> impl Future<Output = StoreResult<Coallocation>> + Send;

    /// The co-allocation of this public id.
    fn coallocation(
        &self,
        uid: &str,
    ) -> impl Future<Output = StoreResult<Option<Coallocation>>> + Send;

    /// The co-allocation `owner` made with this `Idempotency-Key`, if any.
    fn coallocation_by_idempotency_key(
        &self,
        owner: &str,
        key: &str,
    ) -> impl Future<Output = StoreResult<Option<Coallocation>>> + Send;

    /// A co-allocation's reservations, by reservation index.
    fn coallocation_members(
        &self,
        id: i64,
    ) -> impl Future<Output = StoreResult<Vec<Reservation>>> + Send;

    /// Atomically leases to `owner`, until `lease_until`, up to `limit` webhook outbox
    /// rows that are due at `now`, neither delivered nor given up, held by no live lease
    /// and with no earlier undelivered row of the same reservation (a reservation's
    /// events go in order). A row is leased to one claimer only.
    fn claim_webhooks(
        &self,
        now: i64,
        owner: &str,
        lease_until: i64,
        limit: i64,
    ) -> impl Future<Output = StoreResult<Vec<WebhookDelivery>>> + Send;

    /// Records an attempt's outcome on a row `owner` holds, dropping the lease; whether
    /// it still held it.
    fn record_webhook(
        &self,
        id: i64,
        owner: &str,
        outcome: &WebhookOutcome,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// A reservation's webhook outbox rows, oldest first.
    fn webhook_deliveries(
        &self,
        reservation_id: i64,
    ) -> impl Future<Output = StoreResult<Vec<WebhookDelivery>>> + Send;
}

/// Every job of a queue in rebuild order (submit time, then arrival), fetched in
/// pages of `page` rows by keyset — memory stays bounded by one page, whatever the
/// history's size.
pub fn stream_jobs<S: Store>(
    store: &S,
    queue_id: i64,
    page: i64,
) -> impl Stream<Item = StoreResult<Job>> + Send + '_ {
    use futures_util::stream::{self, StreamExt};
    let pages = stream::try_unfold(
        Some(None),
        move |cursor: Option<Option<JobCursor>>| async move {
            let Some(after) = cursor else {
                return Ok(None);
            };
            let jobs = store.jobs_page(queue_id, after, page).await?;
            let next = if (jobs.len() as i64) < page {
                None
            } else {
                jobs.last().map(|j| Some(j.cursor()))
            };
            Ok::<_, StoreError>(Some((jobs, next)))
        },
    );
    pages
        .map(|page: StoreResult<Vec<Job>>| match page {
            Ok(jobs) => stream::iter(jobs.into_iter().map(Ok)).left_stream(),
            Err(e) => stream::iter(std::iter::once(Err(e))).right_stream(),
        })
        .flatten()
}

/// The backend a database URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite:` URLs.
    Sqlite,
    /// `postgres://` and `postgresql://` URLs.
    Postgres,
}

impl Backend {
    /// Reads the scheme of a database URL.
    pub fn from_url(url: &str) -> StoreResult<Self> {
        if let Some(rest) = url.strip_prefix("sqlite:") {
            // A file, or nothing would be kept: an empty path, and an in-memory
            // database (each pooled connection would hold its own, empty one).
            let path = rest.strip_prefix("//").unwrap_or(rest);
            let path = path.split('?').next().unwrap_or("");
            if path.is_empty() || path == ":memory:" || url.contains("mode=memory") {
                return Err(StoreError::UnsupportedUrl(redact_url(url)));
            }
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::UnsupportedUrl(redact_url(url)))
        }
    }
}

/// A URL with its password (if any, in the authority or as a `password` query
/// parameter) replaced by `***`, for messages and logs.
pub fn redact_url(url: &str) -> String {
    let url = match url.split_once('?') {
        Some((base, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{base}?{}", query.join("&"))
        }
        None => url.to_string(),
    };
    let url = url.as_str();
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// Work to run against whichever store a URL names: the one place where the backend
/// is chosen, after which everything is generic over [`Store`].
pub trait StoreTask {
    /// What the task produces.
    type Output;
    /// Runs the task on an opened (and migrated) store.
    fn run<S: Store>(self, store: S) -> impl Future<Output = Self::Output>;
}

/// How the store's connections are waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Longest a query waits for a connection (PostgreSQL: an idle one, or a new one
    /// to a server that refuses or does not answer) before it fails as unavailable.
    pub acquire_timeout: std::time::Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            acquire_timeout: std::time::Duration::from_secs(5),
        }
    }
}

/// Opens the store a URL names, applies its migrations, and runs `task` on it.
pub async fn with_store<T: StoreTask>(url: &str, task: T) -> StoreResult<T::Output> {
    with_store_options(url, StoreOptions::default(), task).await
}

/// [`with_store`], with these options.
pub async fn with_store_options<T: StoreTask>(
    url: &str,
    options: StoreOptions,
    task: T,
) -> StoreResult<T::Output> {
    Ok(match Backend::from_url(url)? {
        Backend::Sqlite => {
            let store = SqliteStore::connect(url).await?;
            store.migrate().await?;
            task.run(store).await
        }
        Backend::Postgres => {
            let store = PgStore::connect_with(url, options).await?;
            store.migrate().await?;
            task.run(store).await
        }
    })
}

/// Converts a database error to ours, recognising broken uniqueness rules.
fn db_error(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e {
        if d.is_unique_violation() {
            return StoreError::Conflict(d.message().to_string());
        }
        if d.is_check_violation() || d.is_foreign_key_violation() {
            return StoreError::Invalid(d.message().to_string());
        }
        // PostgreSQL's class 22, "data exception": a value the database cannot hold,
        // such as text with a NUL character, which SQLite stores and PostgreSQL refuses.
        if let Some(pg) = d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
            if pg.code().starts_with("22") {
                return StoreError::Invalid(pg.message().to_string());
            }
            // Serialization failure, deadlock, lock not available, too many connections,
            // shutting down.
            if matches!(
                pg.code(),
                "40001" | "40P01" | "55P03" | "53300" | "57P01" | "57P03"
            ) {
                return StoreError::Unavailable(pg.message().to_string());
            }
        }
        // SQLITE_BUSY and SQLITE_LOCKED, with their extended codes: the busy timeout ran
        // out while another writer held the database.
        if d.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some()
            && d.code()
                .and_then(|c| c.parse::<i32>().ok())
                .is_some_and(|c| matches!(c & 0xff, 5 | 6))
        {
            return StoreError::Unavailable(d.message().to_string());
        }
    }
    if matches!(
        e,
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_)
    ) {
        return StoreError::Unavailable(e.to_string());
    }
    StoreError::Database(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_locked_sqlite_database_is_unavailable_not_a_failure() {
        use sqlx::ConnectOptions;
        let dir = tempfile::tempdir().unwrap();
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(dir.path().join("x.db"))
            .create_if_missing(true)
            .busy_timeout(std::time::Duration::ZERO);
        let mut holder = opts.connect().await.unwrap();
        sqlx::query("CREATE TABLE t (x INTEGER)")
            .execute(&mut holder)
            .await
            .unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut holder)
            .await
            .unwrap();
        let mut other = opts.connect().await.unwrap();
        let e = sqlx::query("INSERT INTO t VALUES (1)")
            .execute(&mut other)
            .await
            .unwrap_err();
        assert!(matches!(db_error(e), StoreError::Unavailable(_)));
    }

    #[test]
    fn backends_are_chosen_by_scheme() {
        assert_eq!(Backend::from_url("sqlite://x.db").unwrap(), Backend::Sqlite);
        assert_eq!(
            Backend::from_url("sqlite:qbets.db?mode=rwc").unwrap(),
            Backend::Sqlite
        );
        // Nothing would be kept: no file, or a database in memory.
        for url in [
            "sqlite://",
            "sqlite:",
            "sqlite://?mode=rwc",
            "sqlite::memory:",
        ] {
            assert!(
                matches!(Backend::from_url(url), Err(StoreError::UnsupportedUrl(_))),
                "{url}"
            );
        }
        assert_eq!(
            Backend::from_url("postgres://u@h/db").unwrap(),
            Backend::Postgres
        );
        assert_eq!(
            Backend::from_url("postgresql://u@h/db").unwrap(),
            Backend::Postgres
        );
        let e = Backend::from_url("mysql://u:secret@h/db").unwrap_err();
        assert!(e.to_string().contains("mysql://u:***@h/db"), "{e}");
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://qbets:hunter2@db:5432/qbets"),
            "postgres://qbets:***@db:5432/qbets"
        );
        assert_eq!(redact_url("postgres://qbets@db/q"), "postgres://qbets@db/q");
        assert_eq!(redact_url("sqlite://qbets.db"), "sqlite://qbets.db");
        assert_eq!(
            redact_url("postgres://qbets@db/q?sslmode=require&password=s3cret"),
            "postgres://qbets@db/q?sslmode=require&password=***"
        );
        assert_eq!(
            redact_url("postgres://qbets:a@db/q?Password=b"),
            "postgres://qbets:***@db/q?Password=***"
        );
    }

    #[test]
    fn admin_implies_every_scope_and_every_token_reads() {
        for s in Scope::ALL {
            assert!(Scope::Admin.grants(s));
            assert!(s.grants(Scope::Read));
            assert_eq!(s.as_str().parse::<Scope>().unwrap(), s);
        }
        assert!(!Scope::Read.grants(Scope::Ingest));
        assert!(!Scope::Ingest.grants(Scope::Reserve));
        assert!(!Scope::Reserve.grants(Scope::Admin));
    }

    #[test]
    fn job_validation_names_the_problem() {
        let ok = NewJob {
            site_id: 1,
            queue_id: 1,
            job_id: "7".into(),
            submit_time: 100,
            start_time: Some(100),
            end_time: None,
            nodes: Some(1),
            walltime_s: None,
            state: JobState::Running,
            user_key: None,
        };
        assert_eq!(ok.validate(), Ok(()));
        let early = NewJob {
            start_time: Some(99),
            ..ok.clone()
        };
        assert_eq!(
            early.validate().unwrap_err(),
            "start_time 99 is before submit_time 100"
        );
        let zero = NewJob {
            nodes: Some(0),
            ..ok.clone()
        };
        assert_eq!(zero.validate().unwrap_err(), "nodes 0 is not positive");
        let nul = NewJob {
            job_id: "7\0".into(),
            ..ok.clone()
        };
        assert_eq!(
            nul.validate().unwrap_err(),
            "job_id \"7\\0\" contains control characters"
        );
        let never = NewJob {
            start_time: Some(i64::MAX),
            ..ok.clone()
        };
        assert_eq!(
            never.validate().unwrap_err(),
            format!(
                "start_time {} is not a time in the years 0 to 9999",
                i64::MAX
            )
        );
        let last = NewJob {
            end_time: Some(253_402_300_799),
            ..ok
        };
        assert_eq!(last.validate(), Ok(()));
    }
}
