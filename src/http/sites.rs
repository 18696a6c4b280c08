//! Sites, their queues, the waits of their jobs, and the ingest of job records:
//! `/v1/sites…`.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Admin, Authorized, ReadAccess};
use super::error::{ApiError, ApiResult, Problem};
use super::params::{
    ApiJson, ApiPath, ApiQuery, Fields, format_time, format_walltime, object_only, positive,
    serialize_remote, timestamp, walltime,
};
use crate::service::{AppState, check_name};
use crate::store::{
    Job, JobState, NewQueue, NewSite, Queue, QueueStats, Site, SiteKind, StartWindow, Store,
    last_event,
};

/// The routes of this resource.
pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/v1/sites", get(list_sites::<S>))
        .route("/v1/sites/{site}", axum::routing::put(put_site::<S>))
        .route("/v1/sites/{site}/queues", get(list_queues::<S>))
        .route(
            "/v1/sites/{site}/queues/{queue}/waits",
            get(list_waits::<S>),
        )
}

/// The schema of a [`SiteKind`] (the store's type, serialised by its own serde).
fn site_kind_schema() -> utoipa::openapi::Object {
    names_schema(
        "`archive`: imported from a trace, answers speak for its last record; \
         `live`: fed by a scheduler, answers speak for now",
        [SiteKind::Archive, SiteKind::Live].map(SiteKind::as_str),
    )
}

/// The schema of a [`JobState`].
pub(super) fn job_state_schema() -> utoipa::openapi::Object {
    names_schema(
        "Where the job is in its life",
        JobState::ALL.map(JobState::as_str),
    )
}

fn names_schema<const N: usize>(what: &str, names: [&str; N]) -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .description(Some(what))
        .enum_values(Some(names))
        .build()
}

/// A site.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SiteView {
    /// The site's name, as used in URLs.
    pub name: String,
    /// Archive (from a trace) or live.
    #[schema(schema_with = site_kind_schema)]
    pub kind: SiteKind,
    /// Free text, e.g. the installation and machine from a trace header.
    pub description: String,
    /// IANA time zone of the machine, when known.
    pub time_zone: Option<String>,
    /// When the site was created in this service (RFC 3339, UTC).
    #[schema(format = DateTime)]
    pub created: String,
    /// Number of queues.
    pub queues: i64,
    /// Number of stored jobs.
    pub jobs: i64,
    /// The instant this site's answers speak for: its last record (archive) or now (live).
    #[schema(format = DateTime)]
    pub as_of: String,
}

/// Every site.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SitesResponse {
    /// By name.
    pub sites: Vec<SiteView>,
}

/// A queue of a site.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct QueueView {
    /// The queue's name, as used in URLs.
    pub name: String,
    /// Longest walltime the queue accepts, in seconds, when known.
    pub max_walltime_s: Option<i64>,
    /// The same as `[D-]HH:MM:SS`.
    pub max_walltime: Option<String>,
    /// Most nodes a job may ask for, when known.
    pub max_nodes: Option<i64>,
    /// Nodes the queue's jobs can reach in all (the partition's or the machine's), when
    /// known. A job asking for more than this or `max_nodes`, or for a walltime above
    /// `max_walltime_s`, gets no bound (`exceeds_limits`).
    pub total_nodes: Option<i64>,
    /// Jobs whose wait is known (they have started): the history bounds are drawn from.
    pub history_size: i64,
    /// Stored jobs, started or not.
    pub jobs: i64,
    /// Latest start (release from the queue), RFC 3339.
    #[schema(format = DateTime)]
    pub last_release: Option<String>,
    /// Latest submission, RFC 3339.
    #[schema(format = DateTime)]
    pub last_submit: Option<String>,
    /// `up`, or `maybe_down` when no job has started for unusually long while jobs
    /// wait (availability inference); as of the site's `as_of`.
    pub state: QueueStateName,
    /// Since when the queue may be down (null when up).
    #[schema(format = DateTime)]
    pub since: Option<String>,
    /// Jobs waiting in the queue, as the predictor knows them.
    pub pending: usize,
    /// Users with jobs waiting (where the site's sources name users).
    pub users_pending: usize,
    /// Users with a burst waiting (20 jobs or more each: an array, a bag of tasks): how
    /// many each has, largest first. Who they are is not shown.
    pub bursts_pending: Vec<u64>,
    /// The queue's clusters (service classes) with their 0.95/0.95 bounds.
    pub clusters: Vec<super::bounds::ClusterInfoView>,
}

/// A queue's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueStateName {
    /// Jobs start as usual.
    Up,
    /// No job has started for unusually long while jobs wait.
    MaybeDown,
}

/// The queues of a site.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct QueuesResponse {
    /// The site's name.
    pub site: String,
    /// The instant these answers speak for.
    #[schema(format = DateTime)]
    pub as_of: String,
    /// By name.
    pub queues: Vec<QueueView>,
}

/// Parameters of `…/waits`. Times are RFC 3339; the window is `[since, until)`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WaitsQuery {
    /// Start of the window (default: `until` minus one day); not after `until` (equal
    /// to it: the empty window).
    #[param(value_type = Option<String>, format = DateTime)]
    pub since: Option<String>,
    /// End of the window, exclusive (default: just after the site's `as_of`).
    #[param(value_type = Option<String>, format = DateTime)]
    pub until: Option<String>,
    /// Most jobs returned, 1 to 10000 (default 1000).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 10000)]
    pub limit: Option<String>,
    /// `true`: when the window holds more than `limit` jobs, return `limit` of them
    /// spread evenly over it (the first and the last included) instead of the first
    /// `limit` — for charts of long windows (default `false`).
    #[param(value_type = Option<bool>)]
    pub thin: Option<String>,
}

/// Default and largest `limit` of `…/waits`.
const WAITS_LIMIT: (i64, i64) = (1_000, 10_000);

/// One job that started in the window.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WaitView {
    /// The scheduler's job id.
    pub job_id: String,
    /// When the job was submitted.
    #[schema(format = DateTime)]
    pub submit: String,
    /// When the job started.
    #[schema(format = DateTime)]
    pub start: String,
    /// Seconds from submission to start.
    pub wait_s: i64,
    /// Requested nodes (or processors), when known.
    pub nodes: Option<i64>,
    /// Requested walltime in seconds, when known.
    pub walltime_s: Option<i64>,
    /// The same as `[D-]HH:MM:SS`.
    pub walltime: Option<String>,
    /// Where the job is in its life.
    #[schema(schema_with = job_state_schema)]
    pub state: JobState,
    /// The bound predicted when the job was submitted (null until predicted).
    pub bound_s: Option<i64>,
    /// That prediction's status (`ok`, `insufficient_history`, `maybe_down`).
    pub bound_status: Option<String>,
}

/// Jobs of a queue that started in a window.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WaitsResponse {
    /// The site's name.
    pub site: String,
    /// The queue's name.
    pub queue: String,
    /// Start of the window (inclusive).
    #[schema(format = DateTime)]
    pub since: String,
    /// End of the window (exclusive).
    #[schema(format = DateTime)]
    pub until: String,
    /// The instant the site's answers speak for.
    #[schema(format = DateTime)]
    pub as_of: String,
    /// Whether the window held more jobs than `limit` (then `jobs` holds the first
    /// `limit`, or with `thin` an even selection).
    pub truncated: bool,
    /// How many jobs started in the window (counted when `thin` is asked for).
    pub total: Option<i64>,
    /// By start time.
    pub jobs: Vec<WaitView>,
}

/// A duration: whole seconds, or text in Slurm's `[D-]HH:MM:SS` forms.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DurationIn {
    /// Whole seconds.
    Seconds(i64),
    /// A JSON number written with a fraction (`5400.0`): JSON Schema's integers include
    /// it, so it is taken when the fraction is zero.
    Number(f64),
    /// Slurm's `[D-]HH:MM:SS` forms.
    Text(String),
}

/// The durations the OpenAPI document promises are accepted: whole seconds from 1 to
/// 9999999, `HH:MM:SS`, `MM:SS`, and `D-HH[:MM[:SS]]` up to 365 days — never zero, never
/// past [`super::params::MAX_DURATION_S`]. (The server reads a few more spellings, e.g.
/// more seconds or three-digit hours, within the same bounds.) The query parameters'
/// attributes repeat it (utoipa takes a literal there); a test keeps them equal.
pub const DURATION_PATTERN: &str = r"^([1-9][0-9]{0,6}|(0?[1-9]|[1-9][0-9]):[0-5][0-9]:[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:00:(0[1-9]|[1-5][0-9])|(0?[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9])|([1-9]|[1-9][0-9]|[12][0-9]{2}|3[0-5][0-9]|36[0-5])-([01]?[0-9]|2[0-3])(:[0-5][0-9]){0,2})$";

impl utoipa::PartialSchema for DurationIn {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .description(Some(
                "Whole seconds, or Slurm's [D-]HH:MM:SS forms (MM:SS, D-HH, D-HH:MM too)",
            ))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(1))
                    .maximum(Some(super::params::MAX_DURATION_S)),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(DURATION_PATTERN)),
            )
            .into()
    }
}

impl ToSchema for DurationIn {}

impl DurationIn {
    /// The duration in seconds, or why it is not one.
    pub fn seconds(&self) -> Result<i64, String> {
        match self {
            DurationIn::Seconds(s) => walltime(&s.to_string()),
            DurationIn::Number(x) if x.fract() == 0.0 && x.abs() < 1e15 => {
                walltime(&(*x as i64).to_string())
            }
            DurationIn::Number(x) => Err(format!("must be whole seconds, got {x}")),
            DurationIn::Text(t) => walltime(t),
        }
    }
}

/// A queue to create or update.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct QueueIn {
    /// The queue's name: letters, digits, '.', '_' or '-'.
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub name: String,
    /// Longest walltime accepted.
    pub max_walltime: Option<DurationIn>,
    /// Most nodes a job may ask for.
    #[schema(minimum = 1, maximum = 100000000)]
    pub max_nodes: Option<i64>,
    /// Nodes the queue's jobs can reach in all (the partition's or the machine's).
    #[schema(minimum = 1, maximum = 100000000)]
    pub total_nodes: Option<i64>,
}

/// A live site to create, with queues to add or update.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[schema(example = json!({
    "description": "Campus cluster, jobs pushed by its PBS accounting hook",
    "time_zone": "Europe/Paris",
    "queues": [{"name": "debug", "max_walltime": "01:00:00", "max_nodes": 4}, {"name": "long"}]
}))]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct SiteIn {
    /// Free text about the machine; replaces the site's when given (not empty).
    pub description: String,
    /// IANA time zone, e.g. `Europe/Paris`; replaces the site's when given.
    pub time_zone: Option<String>,
    /// Queues to create, or whose limits to update (a limit left out is kept).
    pub queues: Vec<QueueIn>,
}

object_only!(SiteIn, QueueIn);
serialize_remote!(SiteIn, QueueIn);

pub(super) async fn find_site<S: Store>(state: &AppState<S>, name: &str) -> ApiResult<Site> {
    state
        .store
        .site(name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no site named {name:?}")))
}

async fn find_queue<S: Store>(state: &AppState<S>, site: &Site, name: &str) -> ApiResult<Queue> {
    state.store.queue(site.id, name).await?.ok_or_else(|| {
        ApiError::NotFound(format!("site {:?} has no queue named {name:?}", site.name))
    })
}

/// A site's queues with their counts, as of the site's instant.
async fn queues_response<S: Store>(
    state: &AppState<S>,
    site: Site,
) -> ApiResult<axum::Json<QueuesResponse>> {
    let stats = state.store.queue_stats(site.id).await?;
    let as_of = state.as_of(&site, last_event(&stats));
    let queues = stats
        .into_iter()
        .map(|q| {
            state.predictors.register(&site, &q.queue);
            let (st, clusters) = state
                .predictors
                .with_predictor(&site.name, &q.queue.name, |p, at| {
                    (Some(p.state(at)), p.clusters(at))
                })
                .unwrap_or((None, Vec::new()));
            queue_view(q, st, clusters)
        })
        .collect();
    Ok(axum::Json(QueuesResponse {
        as_of: format_time(as_of),
        site: site.name,
        queues,
    }))
}

fn queue_view(
    q: QueueStats,
    st: Option<crate::engine::QueueState>,
    clusters: Vec<crate::engine::ClusterInfo>,
) -> QueueView {
    let down = st.as_ref().and_then(|s| s.down_since);
    QueueView {
        state: if down.is_some() {
            QueueStateName::MaybeDown
        } else {
            QueueStateName::Up
        },
        since: down.map(format_time),
        pending: st.as_ref().map_or(0, |s| s.pending),
        users_pending: st.as_ref().map_or(0, |s| s.users_pending),
        bursts_pending: st.as_ref().map_or_else(Vec::new, |s| s.bursts.clone()),
        clusters: clusters
            .into_iter()
            .map(super::bounds::cluster_info_view)
            .collect(),
        max_walltime: q.queue.max_walltime_s.map(format_walltime),
        name: q.queue.name,
        max_walltime_s: q.queue.max_walltime_s,
        max_nodes: q.queue.max_nodes,
        total_nodes: q.queue.total_nodes,
        history_size: q.started,
        jobs: q.jobs,
        last_release: q.last_release.map(format_time),
        last_submit: q.last_submit.map(format_time),
    }
}

fn wait_view(j: Job) -> Option<WaitView> {
    let start = j.start_time?;
    Some(WaitView {
        wait_s: start - j.submit_time,
        submit: format_time(j.submit_time),
        start: format_time(start),
        walltime: j.walltime_s.map(format_walltime),
        job_id: j.job_id,
        nodes: j.nodes,
        walltime_s: j.walltime_s,
        state: j.state,
        bound_s: j.bound_s,
        bound_status: j.bound_status,
    })
}

/// Every site.
#[utoipa::path(
    get, path = "/v1/sites", tag = "sites", operation_id = "list_sites",
    responses((status = 200, description = "Every site, by name", body = SitesResponse))
)]
pub async fn list_sites<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
) -> ApiResult<axum::Json<SitesResponse>> {
    let sites = state
        .store
        .sites()
        .await?
        .into_iter()
        .map(|s| SiteView {
            as_of: format_time(state.as_of(&s.site, s.last_event)),
            name: s.site.name,
            kind: s.site.kind,
            description: s.site.description,
            time_zone: s.site.time_zone,
            created: format_time(s.site.created_at),
            queues: s.queues,
            jobs: s.jobs,
        })
        .collect();
    Ok(axum::Json(SitesResponse { sites }))
}

/// Creates a live site, or adds and updates queues of an existing live one.
#[utoipa::path(
    put, path = "/v1/sites/{site}", tag = "sites", operation_id = "put_site",
    params(("site" = String, Path, description = "Site name: letters, digits, '.', '_', '-'")),
    request_body = SiteIn,
    responses(
        (status = 200, description = "The site's queues after the change", body = QueuesResponse),
        (status = 409, description = "The site is an archive", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn put_site<S: Store>(
    _caller: Authorized<Admin>,
    State(state): State<AppState<S>>,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<SiteIn>,
) -> ApiResult<axum::Json<QueuesResponse>> {
    let mut fields = Fields::new();
    if let Err(e) = check_name(&name) {
        fields.refuse("site", e);
    }
    let mut queues = Vec::new();
    for (i, q) in body.queues.iter().enumerate() {
        if let Err(e) = check_name(&q.name) {
            fields.refuse(&format!("queues[{i}].name"), e);
        }
        let max_walltime_s = q.max_walltime.as_ref().and_then(|w| {
            w.seconds()
                .map_err(|e| fields.refuse(&format!("queues[{i}].max_walltime"), e))
                .ok()
        });
        let max_nodes = q.max_nodes.and_then(|n| {
            positive(&n.to_string(), super::params::MAX_NODES)
                .map_err(|e| fields.refuse(&format!("queues[{i}].max_nodes"), e))
                .ok()
        });
        let total_nodes = q.total_nodes.and_then(|n| {
            positive(&n.to_string(), super::params::MAX_NODES)
                .map_err(|e| fields.refuse(&format!("queues[{i}].total_nodes"), e))
                .ok()
        });
        queues.push(NewQueue {
            name: q.name.clone(),
            max_walltime_s,
            max_nodes,
            total_nodes,
        });
    }
    fields.finish()?;
    let site = state
        .store
        .upsert_site(&NewSite {
            name: name.clone(),
            kind: SiteKind::Live,
            description: body.description,
            time_zone: body.time_zone,
        })
        .await?;
    if site.kind != SiteKind::Live {
        return Err(ApiError::Conflict(format!(
            "site {name:?} is an archive imported from a trace; live sites need another name"
        )));
    }
    // The site's bound on queues (ingest.max_queues_per_site) holds here too.
    let mut new = std::collections::BTreeSet::new();
    for q in &queues {
        if state.store.queue(site.id, &q.name).await?.is_none() {
            new.insert(q.name.as_str());
        }
    }
    let max = state.config.ingest.max_queues_per_site;
    let have = state.store.count_queues(site.id).await?.max(0) as u64;
    if !new.is_empty() && have + new.len() as u64 > max {
        return Err(ApiError::field(
            "queues",
            format!(
                "the site has {have} queues and may have at most {max} \
                 (setting ingest.max_queues_per_site); {} would be new",
                new.len()
            ),
        ));
    }
    for q in &queues {
        let q = state.store.upsert_queue(site.id, q).await?;
        // Answers for a queue with no jobs yet, and its limits for site selection.
        state.predictors.register(&site, &q);
    }
    queues_response(&state, site).await
}

/// The queues of a site, with their limits and history.
#[utoipa::path(
    get, path = "/v1/sites/{site}/queues", tag = "sites", operation_id = "list_queues",
    params(("site" = String, Path, description = "Site name")),
    responses(
        (status = 200, description = "The site's queues, by name", body = QueuesResponse),
        (status = 404, description = "No such site", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_queues<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<axum::Json<QueuesResponse>> {
    let site = find_site(&state, &name).await?;
    queues_response(&state, site).await
}

/// The jobs of a queue that started in a window, with their waits and the bound that
/// was predicted at their submission — for charts and audits.
#[utoipa::path(
    get, path = "/v1/sites/{site}/queues/{queue}/waits", tag = "sites", operation_id = "list_waits",
    params(
        ("site" = String, Path, description = "Site name"),
        ("queue" = String, Path, description = "Queue name"),
        WaitsQuery
    ),
    responses(
        (status = 200, description = "Jobs that started in [since, until), by start time", body = WaitsResponse),
        (status = 400, description = "A parameter is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site or queue", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_waits<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiPath((site_name, queue_name)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<WaitsQuery>,
) -> ApiResult<axum::Json<WaitsResponse>> {
    let mut fields = Fields::new();
    let since = fields.opt("since", q.since.as_deref(), timestamp);
    let until = fields.opt("until", q.until.as_deref(), timestamp);
    let limit = fields
        .opt("limit", q.limit.as_deref(), |t| positive(t, WAITS_LIMIT.1))
        .unwrap_or(WAITS_LIMIT.0);
    let thin = fields
        .opt("thin", q.thin.as_deref(), super::params::flag)
        .unwrap_or(false);
    fields.finish()?;

    let site = find_site(&state, &site_name).await?;
    let queue = find_queue(&state, &site, &queue_name).await?;
    let last = match site.kind {
        SiteKind::Archive => state.store.site_last_event(site.id).await?,
        // A live site speaks for now; no need to ask the store.
        SiteKind::Live => None,
    };
    let as_of = state.as_of(&site, last);
    let until = until.unwrap_or(as_of.saturating_add(1));
    // A window that ends where or before it begins (`until` before `since`, or
    // `since` after the present when `until` is not given) is empty: no job started in
    // it, and the answer says so; the document's formats allow it, and JSON Schema
    // cannot order two parameters.
    let since = since.unwrap_or(until.saturating_sub(86_400));
    let window = StartWindow {
        since,
        until,
        limit,
    };
    let (jobs, truncated, total) = if thin {
        let total = state.store.count_started(queue.id, window).await?;
        let jobs = state
            .store
            .jobs_started_thinned(queue.id, window, total)
            .await?;
        (jobs, total > limit, Some(total))
    } else {
        // One more than asked tells whether the window was cut short.
        let mut jobs = state
            .store
            .jobs_started(
                queue.id,
                StartWindow {
                    limit: limit + 1,
                    ..window
                },
            )
            .await?;
        let truncated = jobs.len() as i64 > limit;
        jobs.truncate(limit as usize);
        (jobs, truncated, None)
    };
    Ok(axum::Json(WaitsResponse {
        site: site.name,
        queue: queue.name,
        since: format_time(since),
        until: format_time(until),
        as_of: format_time(as_of),
        truncated,
        total,
        jobs: jobs.into_iter().filter_map(wait_view).collect(),
    }))
}
