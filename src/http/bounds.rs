//! Predictions: a queue's bound on a job's wait, the probability of starting by a
//! deadline, its clusters, and bounds over many queues at once (`/v1/sites/{site}/
//! queues/{queue}/bound|deadline|clusters`, `/v1/bounds`). Answers come from the live
//! predictors ([`crate::service::Predictors`]) and say the instant they speak for.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::ReadAccess;
use super::error::{ApiError, ApiResult, FieldError, Problem};
use super::params::{
    ApiJson, ApiPath, ApiQuery, Fields, format_time, format_walltime, nodes, object_only,
    probability, timestamp, walltime,
};
use super::sites::DurationIn;
use crate::engine::{
    AttrKind, AttrRange, BoundAnswer, ClusterInfo, ClusterRange, JobShape, ProbabilityAnswer,
    Status,
};
use crate::service::AppState;
use crate::service::predictors::Exceeded;
use crate::store::Store;

/// The routes of this resource.
pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/v1/sites/{site}/queues/{queue}/bound", get(get_bound::<S>))
        .route(
            "/v1/sites/{site}/queues/{queue}/deadline",
            get(get_deadline::<S>),
        )
        .route(
            "/v1/sites/{site}/queues/{queue}/clusters",
            get(list_clusters::<S>),
        )
        .route("/v1/bounds", get(list_bounds::<S>).post(post_bounds::<S>))
}

/// The default quantile and confidence (as the original QBETS service).
pub(super) const DEFAULT_LEVEL: f64 = 0.95;

/// Most queries in one `POST /v1/bounds`.
pub const MAX_BATCH: usize = 1_000;

/// Why an answer does or does not carry a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStatus {
    /// A number is given.
    Ok,
    /// The job's cluster holds too few waits for a number at these levels.
    InsufficientHistory,
    /// The queue may be down (no release for unusually long); no number until the next
    /// job starts.
    MaybeDown,
    /// The job asks for more than the queue or machine allows (`limit` says which): it
    /// would never start there, so no number is given.
    ExceedsLimits,
}

/// A limit a job exceeds.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LimitView {
    /// `max_nodes` (most nodes one job may ask for), `total_nodes` (the nodes the queue
    /// reaches in all) or `max_walltime` (longest walltime accepted).
    pub name: String,
    /// The limit: nodes, or seconds for `max_walltime`.
    pub value: i64,
    /// What the job asks for, in the same unit.
    pub asked: u64,
    /// The limit in words.
    pub detail: String,
}

/// The view of an exceeded limit of `queue`.
pub fn limit_view(queue: &str, e: Exceeded) -> LimitView {
    LimitView {
        name: e.limit.as_str().to_string(),
        value: e.value,
        asked: e.asked,
        detail: e.describe(queue),
    }
}

impl From<Status> for AnswerStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Ok => AnswerStatus::Ok,
            Status::InsufficientHistory => AnswerStatus::InsufficientHistory,
            Status::MaybeDown => AnswerStatus::MaybeDown,
        }
    }
}

/// The attribute a cluster's range is expressed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Attribute {
    /// Requested walltime, seconds.
    WalltimeS,
    /// Requested nodes.
    Nodes,
    /// Nodes × requested walltime, node-seconds.
    NodeSeconds,
    /// The asking user's own jobs pending ahead at submission.
    OwnAhead,
    /// All jobs pending ahead at submission.
    Ahead,
}

/// A range of one attribute, `[lo, hi]`; `hi` is null for the open-ended top range.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RangeView {
    /// What `lo` and `hi` measure.
    pub attribute: Attribute,
    /// Lowest value in the range.
    pub lo: u64,
    /// Highest value in the range (null: no upper end).
    pub hi: Option<u64>,
}

/// A cluster (service class): the jobs whose attributes fall in its ranges share one
/// history of waits.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterView {
    /// The range of the clustering attribute.
    pub primary: RangeView,
    /// The nodes range inside it (two-level clustering only).
    pub secondary: Option<RangeView>,
}

fn range_view(r: AttrRange) -> RangeView {
    RangeView {
        attribute: match r.attribute {
            AttrKind::WalltimeS => Attribute::WalltimeS,
            AttrKind::Nodes => Attribute::Nodes,
            AttrKind::NodeSeconds => Attribute::NodeSeconds,
            AttrKind::OwnAhead => Attribute::OwnAhead,
            AttrKind::Ahead => Attribute::Ahead,
        },
        lo: r.lo,
        hi: r.hi,
    }
}

/// The view of an engine cluster range.
pub fn cluster_view(c: ClusterRange) -> ClusterView {
    ClusterView {
        primary: range_view(c.primary),
        secondary: c.secondary.map(range_view),
    }
}

/// The queue as the job finds it, and what that did to the answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StateView {
    /// Jobs pending in the queue now (submitted, not started), as the site's sources
    /// report them (a source that reports jobs only once they end, such as SGE's
    /// accounting file, shows none).
    pub jobs_ahead: u64,
    /// The asker's own jobs pending ahead (`own_ahead` of the query).
    pub own_ahead: u64,
    /// The depth class those fall in, `[lo, hi]` own jobs ahead: past jobs of the same
    /// class tell how much longer a job waits behind its own.
    pub depth_class: [u64; 2],
    /// Seconds added per own job ahead (null with none ahead, or without evidence).
    pub per_job_s: Option<f64>,
    /// `class` (the class's own past jobs), `extrapolated` (a shallower class's, capped
    /// at the longest wait the queue has shown) or `none`.
    pub evidence: String,
    /// The quantile the answer was taken at: above the asked one while recent promises
    /// of this depth class have missed more often than they may.
    pub level: f64,
}

fn state_view(s: crate::engine::StateAnswer) -> StateView {
    StateView {
        jobs_ahead: s.view.ahead,
        own_ahead: s.view.own_ahead,
        depth_class: [s.depth_class.0, s.depth_class.1],
        per_job_s: s.per_job_s.map(|v| v.max(0.0).round()),
        evidence: match s.evidence {
            crate::engine::Evidence::Class => "class",
            crate::engine::Evidence::Extrapolated => "extrapolated",
            crate::engine::Evidence::None => "none",
        }
        .to_string(),
        level: s.level,
    }
}

/// A queue's bound for one job shape.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BoundView {
    /// The site's name.
    pub site: String,
    /// The queue's name.
    pub queue: String,
    /// Requested nodes.
    pub nodes: i64,
    /// Requested walltime, seconds.
    pub walltime_s: i64,
    /// The quantile bounded.
    pub quantile: f64,
    /// The confidence of the bound.
    pub confidence: f64,
    /// `ok` when `bound_s` is given.
    pub status: AnswerStatus,
    /// The limit the job exceeds (`status` is `exceeds_limits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitView>,
    /// With probability `confidence`, a job of this shape submitted at `as_of` waits
    /// at most this many seconds with probability `quantile`.
    pub bound_s: Option<u64>,
    /// The same as `[D-]HH:MM:SS`.
    pub bound: Option<String>,
    /// The cluster whose history answered (null when the queue may be down).
    pub cluster: Option<ClusterView>,
    /// Waits in that cluster's history window.
    pub history_size: usize,
    /// The queue's state the answer used (null when the queue may be down).
    pub state: Option<StateView>,
    /// The instant the answer speaks for: the archive's last record, or now.
    #[schema(format = DateTime)]
    pub as_of: String,
}

fn bound_view(site: &str, queue: &str, shape: JobShape, a: BoundAnswer) -> BoundView {
    BoundView {
        site: site.to_string(),
        queue: queue.to_string(),
        nodes: shape.nodes as i64,
        walltime_s: shape.walltime_s as i64,
        quantile: a.quantile,
        confidence: a.confidence,
        status: a.status.into(),
        limit: None,
        bound: a
            .bound_s
            .map(|b| format_walltime(i64::try_from(b).unwrap_or(i64::MAX))),
        bound_s: a.bound_s,
        cluster: a.cluster.map(cluster_view),
        history_size: a.history,
        state: a.state.map(state_view),
        as_of: format_time(a.at),
    }
}

/// `v` without its number when the job exceeds one of the queue's limits.
fn bound_within(mut v: BoundView, exceeded: Option<Exceeded>) -> BoundView {
    if let Some(e) = exceeded {
        v.status = AnswerStatus::ExceedsLimits;
        v.limit = Some(limit_view(&v.queue, e));
        (v.bound_s, v.bound, v.cluster, v.history_size) = (None, None, None, 0);
    }
    v
}

/// The limit of `site`/`queue` a job of `shape` exceeds, as the live predictors last
/// saw the queue's limits.
fn exceeded<S: Store>(
    state: &AppState<S>,
    site: &str,
    queue: &str,
    shape: JobShape,
) -> Option<Exceeded> {
    state.predictors.limits(site, queue)?.exceeded(shape)
}

/// A queue's probability of starting a job by a deadline.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadlineView {
    /// The site's name.
    pub site: String,
    /// The queue's name.
    pub queue: String,
    /// Requested nodes.
    pub nodes: i64,
    /// Requested walltime, seconds.
    pub walltime_s: i64,
    /// The deadline, seconds after `as_of`.
    pub deadline_s: u64,
    /// The deadline as a time.
    #[schema(format = DateTime)]
    pub deadline: String,
    /// The confidence of the probability.
    pub confidence: f64,
    /// `ok` when `probability` is given.
    pub status: AnswerStatus,
    /// The limit the job exceeds (`status` is `exceeds_limits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitView>,
    /// With probability `confidence`, a job of this shape submitted at `as_of` starts
    /// within `deadline_s` with at least this probability.
    pub probability: Option<f64>,
    /// The cluster whose history answered (null when the queue may be down).
    pub cluster: Option<ClusterView>,
    /// Waits in that cluster's history window.
    pub history_size: usize,
    /// The queue's state the answer used (null when the queue may be down).
    pub state: Option<StateView>,
    /// The instant the answer speaks for.
    #[schema(format = DateTime)]
    pub as_of: String,
}

fn deadline_view(site: &str, queue: &str, shape: JobShape, a: ProbabilityAnswer) -> DeadlineView {
    DeadlineView {
        site: site.to_string(),
        queue: queue.to_string(),
        nodes: shape.nodes as i64,
        walltime_s: shape.walltime_s as i64,
        deadline_s: a.deadline_s,
        deadline: format_time(a.at.saturating_add(a.deadline_s as i64)),
        confidence: a.confidence,
        status: a.status.into(),
        limit: None,
        probability: a.probability,
        cluster: a.cluster.map(cluster_view),
        history_size: a.history,
        state: a.state.map(state_view),
        as_of: format_time(a.at),
    }
}

/// One cluster of a queue with its current 0.95/0.95 bound.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterInfoView {
    /// Which jobs it speaks for.
    pub range: ClusterView,
    /// Waits in its history window.
    pub history_size: usize,
    /// Upper 0.95-confidence bound on the 0.95 quantile of the wait, seconds: what
    /// `…/bound` answers now for a job of this cluster. Null while the queue may be
    /// down or the cluster's history is too short.
    pub bound_95_s: Option<u64>,
    /// Change points found in its window since it was (re)built (history trimmed).
    pub change_points: u64,
}

/// The view of an engine cluster.
pub fn cluster_info_view(c: ClusterInfo) -> ClusterInfoView {
    ClusterInfoView {
        range: cluster_view(c.range),
        history_size: c.n,
        bound_95_s: c.bound_95_s,
        change_points: c.trims,
    }
}

/// A queue's clusters.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClustersResponse {
    /// The site's name.
    pub site: String,
    /// The queue's name.
    pub queue: String,
    /// The instant the answer speaks for.
    #[schema(format = DateTime)]
    pub as_of: String,
    /// In attribute order.
    pub clusters: Vec<ClusterInfoView>,
}

/// Parameters of `…/bound`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct BoundQuery {
    /// Requested nodes (or processors), at least 1.
    #[param(value_type = i64, minimum = 1, maximum = 100000000)]
    pub nodes: Option<String>,
    /// Requested walltime: seconds or `[D-]HH:MM:SS`.
    #[param(value_type = String, example = "01:30:00", pattern = r"^([1-9][0-9]{0,6}|(0?[1-9]|[1-9][0-9]):[0-5][0-9]:[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:00:(0[1-9]|[1-5][0-9])|(0?[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9])|([1-9]|[1-9][0-9]|[12][0-9]{2}|3[0-5][0-9]|36[0-5])-([01]?[0-9]|2[0-3])(:[0-5][0-9]){0,2})$")]
    pub walltime: Option<String>,
    /// The quantile bounded, strictly between 0 and 1 (default 0.95).
    #[param(value_type = Option<f64>, exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub quantile: Option<String>,
    /// The confidence of the bound, strictly between 0 and 1 (default 0.95).
    #[param(value_type = Option<f64>, exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub confidence: Option<String>,
    /// Your own jobs already pending in this queue that this one would queue behind
    /// (default 0; e.g. the tasks of your job array before this one).
    #[param(value_type = Option<i64>, minimum = 0, maximum = 1000000)]
    pub own_ahead: Option<String>,
}

/// Parameters of `…/deadline`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeadlineQuery {
    /// Requested nodes (or processors), at least 1.
    #[param(value_type = i64, minimum = 1, maximum = 100000000)]
    pub nodes: Option<String>,
    /// Requested walltime: seconds or `[D-]HH:MM:SS`.
    #[param(value_type = String, example = "01:30:00", pattern = r"^([1-9][0-9]{0,6}|(0?[1-9]|[1-9][0-9]):[0-5][0-9]:[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:00:(0[1-9]|[1-5][0-9])|(0?[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9])|([1-9]|[1-9][0-9]|[12][0-9]{2}|3[0-5][0-9]|36[0-5])-([01]?[0-9]|2[0-3])(:[0-5][0-9]){0,2})$")]
    pub walltime: Option<String>,
    /// The deadline: a duration after `as_of` (seconds or `[D-]HH:MM:SS`, at least 1 s),
    /// or an RFC 3339 time after `as_of` (which the pattern, written for durations,
    /// leaves out).
    #[param(value_type = String, example = "04:00:00", pattern = r"^([1-9][0-9]{0,6}|(0?[1-9]|[1-9][0-9]):[0-5][0-9]:[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:00:(0[1-9]|[1-5][0-9])|(0?[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9])|([1-9]|[1-9][0-9]|[12][0-9]{2}|3[0-5][0-9]|36[0-5])-([01]?[0-9]|2[0-3])(:[0-5][0-9]){0,2})$")]
    pub deadline: Option<String>,
    /// The confidence, strictly between 0 and 1 (default 0.95).
    #[param(value_type = Option<f64>, exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub confidence: Option<String>,
    /// Your own jobs already pending in this queue that this one would queue behind
    /// (default 0).
    #[param(value_type = Option<i64>, minimum = 0, maximum = 1000000)]
    pub own_ahead: Option<String>,
}

/// Most bounds one `GET /v1/bounds` lists when `limit` is given: a page of the best
/// queues, not the whole fleet (the listing without `limit` has no cap).
pub const MAX_LIMIT: usize = 10_000;

/// Parameters of `GET /v1/bounds`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct BoundsQuery {
    /// Requested nodes (or processors), at least 1.
    #[param(value_type = i64, minimum = 1, maximum = 100000000)]
    pub nodes: Option<String>,
    /// Requested walltime: seconds or `[D-]HH:MM:SS`.
    #[param(value_type = String, example = "01:30:00", pattern = r"^([1-9][0-9]{0,6}|(0?[1-9]|[1-9][0-9]):[0-5][0-9]:[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:00:(0[1-9]|[1-5][0-9])|(0?[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9])|([1-9]|[1-9][0-9]|[12][0-9]{2}|3[0-5][0-9]|36[0-5])-([01]?[0-9]|2[0-3])(:[0-5][0-9]){0,2})$")]
    pub walltime: Option<String>,
    /// The quantile bounded, strictly between 0 and 1 (default 0.95).
    #[param(value_type = Option<f64>, exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub quantile: Option<String>,
    /// The confidence of the bound, strictly between 0 and 1 (default 0.95).
    #[param(value_type = Option<f64>, exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub confidence: Option<String>,
    /// Not accepted here (and not in the document): one's own jobs ahead are one
    /// queue's (ask that queue's `…/bound`); named so that the refusal says so.
    #[param(ignore)]
    pub own_ahead: Option<String>,
    /// Only this site's queues (its exact name; none listed when no site has it).
    #[param(value_type = Option<String>)]
    pub site: Option<String>,
    /// Only queues of this name, at any site (or at `site`).
    #[param(value_type = Option<String>)]
    pub queue: Option<String>,
    /// List only the best this many (1 to 10000; default: all). `truncated` says whether
    /// more were left off.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 10000)]
    pub limit: Option<String>,
}

fn limit(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number from 1 to {MAX_LIMIT}")),
    }
}

/// Every queue's bound for one job, best first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BoundsResponse {
    /// Queues with a bound, smallest first; then the others, by site and queue —
    /// among them the queues whose known limits the job exceeds (`exceeds_limits`).
    /// Only those `site` and `queue` name, and the first `limit` of them.
    pub bounds: Vec<BoundView>,
    /// More queues matched than `limit` listed (false without `limit`).
    #[serde(default)]
    pub truncated: bool,
}

/// One query of `POST /v1/bounds`. Values are checked query by query: a bad one gives
/// that query's `error` (naming `queries[i].field`), not a refusal of the whole call,
/// so the schema states the rules in words only.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct BoundQueryIn {
    /// The site's name.
    pub site: String,
    /// The queue's name.
    pub queue: String,
    /// Requested nodes: at least 1, at most 100000000.
    pub nodes: i64,
    /// Requested walltime: whole seconds, or `[D-]HH:MM:SS` (1 s to 366 days).
    #[schema(schema_with = any_duration)]
    pub walltime: DurationIn,
    /// The quantile bounded, strictly between 0 and 1 (default 0.95).
    pub quantile: Option<f64>,
    /// The confidence, strictly between 0 and 1 (default 0.95).
    pub confidence: Option<f64>,
}

/// A duration as whole seconds or text, its rules checked per query.
fn any_duration() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
    OneOfBuilder::new()
        .description(Some("Whole seconds, or Slurm's [D-]HH:MM:SS forms"))
        .item(ObjectBuilder::new().schema_type(Type::Integer))
        .item(ObjectBuilder::new().schema_type(Type::String))
        .build()
        .into()
}

/// Many bound queries.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({"queries": [
    {"site": "local", "queue": "debug", "nodes": 1, "walltime": "00:05:00"},
    {"site": "local", "queue": "long", "nodes": 4, "walltime": "02:00:00", "quantile": 0.5}
]}))]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct BoundsIn {
    /// At most 1000 queries. Each is read on its own: one that is not a query (a
    /// string for `nodes`, a field missing or unknown) gets its own `error`.
    #[schema(schema_with = any_queries)]
    pub queries: Vec<serde_json::Value>,
}

/// The queries of `POST /v1/bounds`: any JSON values, each read on its own (the schema
/// of one must not promise a refusal of the whole call the server does not give).
fn any_queries() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType};
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(SchemaType::AnyValue)
                .description(Some(
                    "A query, as the BoundQueryIn schema describes. One that is not a valid \
                     BoundQueryIn gets its own `error`; the others are answered.",
                )),
        )
        // No maxItems (the 1000-query limit is the field's description), as for the
        // records of a push: schemathesis 4.32's coverage phase crashed in Python
        // generating arrays of any values near such a bound.
        .description(Some(format!("At most {MAX_BATCH} queries.")))
        .build()
        .into()
}

object_only!(BoundQueryIn, BoundsIn);

/// One result of `POST /v1/bounds`: the answer, or why there is none.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BoundResult {
    /// The answer (absent on error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<BoundView>,
    /// The problem with this query (fields named as `queries[i].nodes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Problem>,
}

/// The answers of `POST /v1/bounds`, in query order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BoundsOut {
    /// One per query.
    pub results: Vec<BoundResult>,
}

/// Runs `ask` on the live predictors; when they do not know the queue, asks the store
/// whether it exists (404 otherwise) and gives it an empty predictor.
pub(super) async fn ask<S: Store, T>(
    state: &AppState<S>,
    site: &str,
    queue: &str,
    ask: impl Fn() -> Option<T>,
) -> ApiResult<T> {
    if let Some(t) = ask() {
        return Ok(t);
    }
    let s = state
        .store
        .site(site)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no site named {site:?}")))?;
    let q =
        state.store.queue(s.id, queue).await?.ok_or_else(|| {
            ApiError::NotFound(format!("site {site:?} has no queue named {queue:?}"))
        })?;
    state.predictors.register(&s, &q);
    ask().ok_or_else(|| ApiError::Internal(format!("no predictor for {site}/{queue}")))
}

/// A job's shape from the `nodes` and `walltime` parameters.
/// Most own jobs ahead a query may name (a million: beyond any queue's length).
const MAX_OWN_AHEAD: u64 = 1_000_000;

fn own_ahead(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n <= MAX_OWN_AHEAD => Ok(n),
        _ => Err(format!("must be a whole number from 0 to {MAX_OWN_AHEAD}")),
    }
}

fn shape(fields: &mut Fields, n: Option<&str>, w: Option<&str>) -> Option<JobShape> {
    let n = fields.req("nodes", n, nodes);
    let w = fields.req("walltime", w, walltime);
    Some(JobShape {
        nodes: n? as u64,
        walltime_s: w? as u64,
    })
}

/// The bound on the wait of a job submitted now: with probability `confidence`, the
/// `quantile` of the wait of a job of this shape is at most `bound_s`.
#[utoipa::path(
    get, path = "/v1/sites/{site}/queues/{queue}/bound", tag = "predictions",
    operation_id = "get_bound",
    params(
        ("site" = String, Path, description = "Site name"),
        ("queue" = String, Path, description = "Queue name"),
        BoundQuery
    ),
    responses(
        (status = 200, description = "The bound, or why there is none", body = BoundView),
        (status = 400, description = "A parameter is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site or queue", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_bound<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiPath((site, queue)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<BoundQuery>,
) -> ApiResult<axum::Json<BoundView>> {
    let mut fields = Fields::new();
    let shape = shape(&mut fields, q.nodes.as_deref(), q.walltime.as_deref());
    let quantile = fields.opt("quantile", q.quantile.as_deref(), probability);
    let confidence = fields.opt("confidence", q.confidence.as_deref(), probability);
    let own = fields.opt("own_ahead", q.own_ahead.as_deref(), own_ahead);
    fields.finish()?;
    let shape = shape.expect("checked");
    let (quantile, confidence) = (
        quantile.unwrap_or(DEFAULT_LEVEL),
        confidence.unwrap_or(DEFAULT_LEVEL),
    );
    let own = own.unwrap_or(0);
    let v = bound_answer(&state, &site, &queue, shape, (quantile, confidence), own).await?;
    Ok(axum::Json(v))
}

/// `GET …/bound`'s answer for a job of `shape` behind `own` of the asker's jobs, at
/// `levels` (quantile, confidence): the number, or why there is none (also when the
/// job exceeds the queue's limits). 404 for an unknown site or queue.
pub(super) async fn bound_answer<S: Store>(
    state: &AppState<S>,
    site: &str,
    queue: &str,
    shape: JobShape,
    (quantile, confidence): (f64, f64),
    own: u64,
) -> ApiResult<BoundView> {
    let a = ask(state, site, queue, || {
        state.predictors.with_predictor(site, queue, |p, at| {
            p.bound_in(at, shape, p.view_behind(own), quantile, confidence)
        })
    })
    .await?;
    let v = bound_view(site, queue, shape, a);
    Ok(bound_within(v, exceeded(state, site, queue, shape)))
}

/// A deadline: a duration from `as_of`, or a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Deadline {
    In(i64),
    At(i64),
}

pub(super) fn deadline(text: &str) -> Result<Deadline, String> {
    if super::params::looks_like_a_time(text) || text.contains(['T', 't']) {
        return timestamp(text).map(Deadline::At);
    }
    walltime(text)
        .map(Deadline::In)
        .map_err(|e| format!("{e}; or give an RFC 3339 time such as 2024-05-01T12:00:00Z"))
}

/// The probability that a job submitted now starts within a deadline (the inverse of
/// the bound): with probability `confidence`, at least `probability`.
#[utoipa::path(
    get, path = "/v1/sites/{site}/queues/{queue}/deadline", tag = "predictions",
    operation_id = "get_deadline",
    params(
        ("site" = String, Path, description = "Site name"),
        ("queue" = String, Path, description = "Queue name"),
        DeadlineQuery
    ),
    responses(
        (status = 200, description = "The probability, or why there is none", body = DeadlineView),
        (status = 400, description = "A parameter is invalid (a deadline time before `as_of` too)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site or queue", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_deadline<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiPath((site, queue)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<DeadlineQuery>,
) -> ApiResult<axum::Json<DeadlineView>> {
    let mut fields = Fields::new();
    let shape = shape(&mut fields, q.nodes.as_deref(), q.walltime.as_deref());
    let when = fields.req("deadline", q.deadline.as_deref(), deadline);
    let confidence = fields.opt("confidence", q.confidence.as_deref(), probability);
    let own = fields
        .opt("own_ahead", q.own_ahead.as_deref(), own_ahead)
        .unwrap_or(0);
    fields.finish()?;
    let (shape, when) = (shape.expect("checked"), when.expect("checked"));
    let confidence = confidence.unwrap_or(DEFAULT_LEVEL);
    match deadline_answer(&state, &site, &queue, shape, when, confidence, own).await? {
        Ok(v) => Ok(axum::Json(v)),
        Err(at) => Err(ApiError::field(
            "deadline",
            format!(
                "is not after {} (the instant the site speaks for)",
                format_time(at)
            ),
        )),
    }
}

/// `GET …/deadline`'s answer for a job of `shape` behind `own` of the asker's jobs:
/// the probability of starting by `when`, or why there is none; `Err(as_of)` when
/// `when` is a time not after the instant the site speaks for. 404 for an unknown site
/// or queue.
pub(super) async fn deadline_answer<S: Store>(
    state: &AppState<S>,
    site: &str,
    queue: &str,
    shape: JobShape,
    when: Deadline,
    confidence: f64,
    own: u64,
) -> ApiResult<Result<DeadlineView, i64>> {
    let answer = ask(state, site, queue, || {
        state.predictors.with_predictor(site, queue, |p, at| {
            let deadline_s = match when {
                Deadline::In(s) => s,
                Deadline::At(t) if t > at => t - at,
                Deadline::At(_) => return Err(at),
            };
            Ok(p.probability_in(at, shape, p.view_behind(own), deadline_s as u64, confidence))
        })
    })
    .await?;
    Ok(answer.map(|answer| {
        let mut v = deadline_view(site, queue, shape, answer);
        if let Some(e) = exceeded(state, site, queue, shape) {
            v.status = AnswerStatus::ExceedsLimits;
            v.limit = Some(limit_view(queue, e));
            (v.probability, v.cluster, v.history_size) = (None, None, 0);
        }
        v
    }))
}

/// A queue's clusters (service classes) with their current 0.95/0.95 bounds.
#[utoipa::path(
    get, path = "/v1/sites/{site}/queues/{queue}/clusters", tag = "predictions",
    operation_id = "list_clusters",
    params(
        ("site" = String, Path, description = "Site name"),
        ("queue" = String, Path, description = "Queue name"),
    ),
    responses(
        (status = 200, description = "The queue's clusters, in attribute order", body = ClustersResponse),
        (status = 404, description = "No such site or queue", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_clusters<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiPath((site, queue)): ApiPath<(String, String)>,
) -> ApiResult<axum::Json<ClustersResponse>> {
    let (clusters, at) = ask(&state, &site, &queue, || {
        state.predictors.clusters(&site, &queue)
    })
    .await?;
    Ok(axum::Json(ClustersResponse {
        site,
        queue,
        as_of: format_time(at),
        clusters: clusters.into_iter().map(cluster_info_view).collect(),
    }))
}

/// Orders bounds best first: numbers, smallest first; then the rest by site and queue.
fn best_first(bounds: &mut [BoundView]) {
    bounds.sort_by(|a, b| {
        let key = |v: &BoundView| (v.bound_s.is_none(), v.bound_s.unwrap_or(0));
        key(a)
            .cmp(&key(b))
            .then_with(|| (&a.site, &a.queue).cmp(&(&b.site, &b.queue)))
    });
}

/// Every site's and queue's bound for one job, best first — where to submit it.
#[utoipa::path(
    get, path = "/v1/bounds", tag = "predictions", operation_id = "list_bounds",
    params(BoundsQuery),
    responses(
        (status = 200, description = "Bounds, best first", body = BoundsResponse),
        (status = 400, description = "A parameter is invalid", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn list_bounds<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiQuery(q): ApiQuery<BoundsQuery>,
) -> ApiResult<axum::Json<BoundsResponse>> {
    let mut fields = Fields::new();
    let shape = shape(&mut fields, q.nodes.as_deref(), q.walltime.as_deref());
    let quantile = fields.opt("quantile", q.quantile.as_deref(), probability);
    let confidence = fields.opt("confidence", q.confidence.as_deref(), probability);
    // One's own jobs ahead are a queue's; the list would apply one count to all.
    fields.opt("own_ahead", q.own_ahead.as_deref(), |_| {
        Err::<u64, _>("applies to one queue: ask /v1/sites/{site}/queues/{queue}/bound".to_string())
    });
    let limit = fields.opt("limit", q.limit.as_deref(), limit);
    fields.finish()?;
    let shape = shape.expect("checked");
    let (quantile, confidence) = (
        quantile.unwrap_or(DEFAULT_LEVEL),
        confidence.unwrap_or(DEFAULT_LEVEL),
    );
    let p = &state.predictors;
    let mut bounds: Vec<BoundView> = p
        .queues()
        .into_iter()
        .filter(|(s, qn)| {
            q.site.as_deref().is_none_or(|w| w == s) && q.queue.as_deref().is_none_or(|w| w == qn)
        })
        .filter_map(|(s, q)| {
            let (a, _) = p.bound(&s, &q, shape, quantile, confidence)?;
            let over = p.limits(&s, &q).and_then(|l| l.exceeded(shape));
            Some(bound_within(bound_view(&s, &q, shape, a), over))
        })
        .collect();
    best_first(&mut bounds);
    let truncated = limit.is_some_and(|l| bounds.len() > l);
    if let Some(l) = limit {
        bounds.truncate(l);
    }
    Ok(axum::Json(BoundsResponse { bounds, truncated }))
}

/// Many bound queries in one call; each gets its answer or its own problem.
#[utoipa::path(
    post, path = "/v1/bounds", tag = "predictions", operation_id = "post_bounds",
    request_body = BoundsIn,
    responses(
        (status = 200, description = "One result per query, in order", body = BoundsOut),
        (status = 400, description = "The body is invalid as a whole", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn post_bounds<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiJson(body): ApiJson<BoundsIn>,
) -> ApiResult<axum::Json<BoundsOut>> {
    if body.queries.len() > MAX_BATCH {
        return Err(ApiError::field(
            "queries",
            format!(
                "at most {MAX_BATCH} queries per call, got {}",
                body.queries.len()
            ),
        ));
    }
    let mut results = Vec::with_capacity(body.queries.len());
    for (i, q) in body.queries.into_iter().enumerate() {
        let at = |f: &str| format!("queries[{i}].{f}");
        let q: BoundQueryIn = match serde_path_to_error::deserialize(q) {
            Ok(q) => q,
            Err(e) => {
                let reason = e.inner().to_string();
                let (field, detail) = super::params::field_at_fault(&e.path().to_string(), &reason)
                    .map_or((format!("queries[{i}]"), reason), |(f, d)| (at(&f), d));
                results.push(BoundResult {
                    bound: None,
                    error: Some(ApiError::Invalid(vec![FieldError::new(field, detail)]).problem()),
                });
                continue;
            }
        };
        let mut errors = Vec::new();
        let mut check = |field: &str, r: Result<(), String>| {
            if let Err(e) = r {
                errors.push(FieldError::new(at(field), e));
            }
        };
        let n = nodes(&q.nodes.to_string());
        check("nodes", n.as_ref().map(|_| ()).map_err(Clone::clone));
        let w = q.walltime.seconds();
        check("walltime", w.as_ref().map(|_| ()).map_err(Clone::clone));
        let level = |v: Option<f64>| -> Result<f64, String> {
            match v {
                None => Ok(DEFAULT_LEVEL),
                Some(p) if p > 0.0 && p < 1.0 => Ok(p),
                Some(p) => Err(format!("must be strictly between 0 and 1, got {p}")),
            }
        };
        let quantile = level(q.quantile);
        check(
            "quantile",
            quantile.as_ref().map(|_| ()).map_err(Clone::clone),
        );
        let confidence = level(q.confidence);
        check(
            "confidence",
            confidence.as_ref().map(|_| ()).map_err(Clone::clone),
        );
        let outcome = match (n, w, quantile, confidence) {
            (Ok(n), Ok(w), Ok(quantile), Ok(confidence)) if errors.is_empty() => {
                let shape = JobShape {
                    nodes: n as u64,
                    walltime_s: w as u64,
                };
                ask(&state, &q.site, &q.queue, || {
                    state
                        .predictors
                        .bound(&q.site, &q.queue, shape, quantile, confidence)
                })
                .await
                .map(|(a, _)| {
                    let v = bound_view(&q.site, &q.queue, shape, a);
                    bound_within(v, exceeded(&state, &q.site, &q.queue, shape))
                })
            }
            _ => Err(ApiError::Invalid(errors)),
        };
        results.push(match outcome {
            Ok(v) => BoundResult {
                bound: Some(v),
                error: None,
            },
            // A fault of the server is the whole call's, not one query's.
            Err(e @ (ApiError::Internal(_) | ApiError::Unavailable(_))) => return Err(e),
            Err(e) => BoundResult {
                bound: None,
                error: Some(e.problem()),
            },
        });
    }
    Ok(axum::Json(BoundsOut { results }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_are_durations_or_times() {
        assert!(matches!(deadline("3600"), Ok(Deadline::In(3600))));
        assert!(matches!(deadline("1-00:00:00"), Ok(Deadline::In(86_400))));
        assert!(matches!(
            deadline("2000-04-25T21:20:03Z"),
            Ok(Deadline::At(956_697_603))
        ));
        for bad in ["0", "soon", "2000-04-25", "2000-04-25Tnoon"] {
            assert!(deadline(bad).is_err(), "{bad}");
        }
    }
}
