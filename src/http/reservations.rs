//! Virtual advance reservations: VARQ and CO-VARQ plans (`/v1/plans/…`, no side
//! effects), managed reservations (`/v1/reservations…`, token scope `reserve`, each
//! token sees only its own), co-allocations (`/v1/coallocations`) and the live
//! calibration of the promises (`/v1/calibration`).

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::{Authorized, ReadAccess, Reserve};
use super::error::{ApiError, ApiResult, Problem};
use super::params::{
    ApiJson, ApiPath, ApiQuery, Fields, format_time, format_walltime, object_only, positive,
    timestamp,
};
use super::sites::DurationIn;
use crate::plan::StartOracle;
use crate::plan::covarq::{self, CoRefusal};
use crate::plan::lifecycle::{OnFailure, ReservationState, RunMode};
use crate::plan::varq::{self, Decision, Mode, PointStatus, VarqPlan, VarqRequest};
use crate::service::AppState;
use crate::service::planning::{PredictorOracle, compute, oracle_for};
use crate::service::reservations::{self as resv, ReservationError, new_uid, plan_fields};
use crate::store::{
    NewCoallocation, NewReservation, Reservation, ReservationEvent, ReservationRequest, Store,
    StoreError, WebhookDelivery,
};

/// The routes of this resource.
pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/v1/plans/varq", post(post_varq_plan::<S>))
        .route("/v1/plans/covarq", post(post_covarq_plan::<S>))
        .route(
            "/v1/reservations",
            post(post_reservation::<S>).get(list_reservations::<S>),
        )
        .route(
            "/v1/reservations/{id}",
            get(get_reservation::<S>).delete(delete_reservation::<S>),
        )
        .route("/v1/coallocations", post(post_coallocation::<S>))
        .route("/v1/coallocations/{id}", get(get_coallocation::<S>))
        .route("/v1/calibration", get(get_calibration::<S>))
}

fn names<const N: usize>(what: &str, names: [&str; N]) -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .description(Some(what))
        .enum_values(Some(names))
        .build()
}

fn mode_schema() -> utoipa::openapi::Object {
    names(
        "`latest` (default): the last submission time meeting the probability, least \
         over-allocation; `max_probability`: the most likely submission time",
        ["latest", "max_probability"],
    )
}

fn run_mode_schema() -> utoipa::openapi::Object {
    names(
        "`hold` (default): the job holds its nodes until start_at, then runs the command; \
         `best_effort`: it runs the command as soon as it starts",
        ["hold", "best_effort"],
    )
}

fn on_failure_schema() -> utoipa::openapi::Object {
    names(
        "What becomes of the remote job when the reservation fails (it had not started by \
         start_at, or started late): `cancel` (default) or `keep` (it runs, late)",
        [OnFailure::Cancel, OnFailure::Keep].map(OnFailure::as_str),
    )
}

fn state_schema() -> utoipa::openapi::Object {
    names(
        "planned → submitted → started → succeeded | failed, or cancelled, refused, error",
        ReservationState::ALL.map(ReservationState::as_str),
    )
}

fn point_status_schema() -> utoipa::openapi::Object {
    names(
        "Why a submission time can or cannot be used",
        [
            "ok",
            "insufficient_history",
            "maybe_down",
            "walltime_above_limit",
            "nodes_above_limit",
        ],
    )
}

/// A VARQ request: have `nodes` nodes held at `start_at` for `walltime`, with
/// probability at least `min_probability`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(example = json!({
    "site": "local", "queue": "debug", "nodes": 1, "walltime": "00:02:00",
    "start_at": "2026-11-21T09:38:00Z", "min_probability": 0.5
}))]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct VarqIn {
    /// The site's name.
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub site: String,
    /// The queue's name.
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: String,
    /// Nodes.
    #[schema(minimum = 1, maximum = 100000000)]
    pub nodes: i64,
    /// Work needed once the nodes are held (W).
    pub walltime: DurationIn,
    /// When the nodes must be held (RFC 3339).
    #[schema(format = DateTime)]
    pub start_at: String,
    /// Least acceptable probability, strictly between 0 and 1.
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub min_probability: f64,
    /// Confidence level of the probabilities, strictly between 0 and 1 (default 0.95).
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub confidence: Option<f64>,
    /// How to choose the submission time.
    #[schema(schema_with = mode_schema)]
    pub mode: Option<Mode>,
    /// Spacing of candidate submission times (default 30 s).
    pub step: Option<DurationIn>,
}

/// A managed reservation: a VARQ request and what to run.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(example = json!({
    "site": "local", "queue": "debug", "nodes": 1, "walltime": "00:02:00",
    "start_at": "2026-11-21T09:38:00Z", "min_probability": 0.5,
    "command": "hostname; sleep 100"
}))]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct ReservationIn {
    /// The site's name (a site with a submit target).
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub site: String,
    /// The queue's name.
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: String,
    /// Nodes.
    #[schema(minimum = 1, maximum = 100000000)]
    pub nodes: i64,
    /// Work needed once the nodes are held (W).
    pub walltime: DurationIn,
    /// When the nodes must be held (RFC 3339).
    #[schema(format = DateTime)]
    pub start_at: String,
    /// Least acceptable probability, strictly between 0 and 1.
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub min_probability: f64,
    /// Confidence level, strictly between 0 and 1 (default 0.95).
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub confidence: Option<f64>,
    /// How to choose the submission time.
    #[schema(schema_with = mode_schema)]
    pub mode: Option<Mode>,
    /// Spacing of candidate submission times (default 30 s).
    pub step: Option<DurationIn>,
    /// The command to run on the nodes (by `/bin/sh -c`).
    #[schema(min_length = 1, max_length = 4096)]
    pub command: String,
    /// Hold the nodes until start_at (default) or run at once.
    #[schema(schema_with = run_mode_schema)]
    pub run_mode: Option<RunMode>,
    /// Cancel the remote job when the reservation fails (default) or keep it.
    #[schema(schema_with = on_failure_schema)]
    pub on_failure: Option<OnFailure>,
    /// An http or https URL its state changes (submitted, at_risk, started,
    /// succeeded, failed, cancelled, error) are POSTed to, signed (docs/reservations.md);
    /// needs `[reservations] webhook_secret_env` on the server.
    #[schema(
        max_length = 2048,
        pattern = r"^[hH][tT][tT][pP][sS]?://(([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?([/?#][!-~]*)?$"
    )]
    pub webhook: Option<String>,
}

/// One reservation of a co-allocation.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct CoItemIn {
    /// Nodes.
    #[schema(minimum = 1, maximum = 100000000)]
    pub nodes: i64,
    /// Work needed once the nodes are held.
    pub walltime: DurationIn,
    /// When the nodes must be held (RFC 3339).
    #[schema(format = DateTime)]
    pub start_at: String,
    /// The command (co-allocation requests only; ignored by plans).
    pub command: Option<String>,
}

/// A candidate site and queue.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct CandidateIn {
    /// The site's name.
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub site: String,
    /// The queue's name.
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub queue: String,
}

/// A CO-VARQ request: several reservations that must all hold.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(example = json!({
    "reservations": [
        {"nodes": 4, "walltime": "01:00:00", "start_at": "2026-11-21T14:00:00Z", "command": "./simulate part-a"},
        {"nodes": 8, "walltime": "01:00:00", "start_at": "2026-11-21T14:00:00Z", "command": "./simulate part-b"}
    ],
    "candidates": [{"site": "local", "queue": "debug"}, {"site": "local", "queue": "long"}],
    "p_all": 0.9
}))]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct CovarqIn {
    /// The reservations.
    #[schema(min_items = 1)]
    pub reservations: Vec<CoItemIn>,
    /// The site/queue pairs each may be requested at.
    #[schema(min_items = 1)]
    pub candidates: Vec<CandidateIn>,
    /// Probability that all hold, strictly between 0 and 1 (default 0.90).
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub p_all: Option<f64>,
    /// Confidence level, strictly between 0 and 1 (default 0.95).
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub confidence: Option<f64>,
    /// Spacing of candidate submission times (default 30 s).
    pub step: Option<DurationIn>,
    /// For co-allocations: hold (default) or best effort.
    #[schema(schema_with = run_mode_schema)]
    pub run_mode: Option<RunMode>,
    /// For co-allocations: cancel a request's remote job when that request fails
    /// (default) or keep it.
    #[schema(schema_with = on_failure_schema)]
    pub on_failure: Option<OnFailure>,
    /// For co-allocations: an http or https URL every member's state changes are
    /// POSTed to, signed (as a reservation's `webhook`).
    #[schema(
        max_length = 2048,
        pattern = r"^[hH][tT][tT][pP][sS]?://(([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?([/?#][!-~]*)?$"
    )]
    pub webhook: Option<String>,
}

object_only!(VarqIn, ReservationIn, CoItemIn, CandidateIn, CovarqIn);

impl serde::Serialize for CandidateIn {
    fn serialize<Se: serde::Serializer>(&self, s: Se) -> Result<Se::Ok, Se::Error> {
        CandidateIn::serialize(self, s)
    }
}

/// One candidate submission time (Figure 5.4 of the dissertation).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PointView {
    /// Candidate submission time.
    #[schema(format = DateTime)]
    pub submit_at: String,
    /// start_at − submit_at, seconds.
    pub lead_s: u64,
    /// W + lead, seconds.
    pub advertised_walltime_s: u64,
    /// Probability of holding the nodes at start_at.
    pub probability: f64,
    /// Whether the time is usable.
    #[schema(schema_with = point_status_schema)]
    pub status: PointStatus,
}

/// A chosen submission time and what it costs.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PlanView {
    /// When to submit.
    #[schema(format = DateTime)]
    pub submit_at: String,
    /// Walltime to ask for: W + (start_at − submit_at), seconds.
    pub advertised_walltime_s: u64,
    /// The same as `[D-]HH:MM:SS`.
    pub advertised_walltime: String,
    /// Predicted probability that the nodes are held at start_at.
    pub probability: f64,
    /// Worst-case allocation spent before start_at: N·(start_at − submit_at).
    pub max_overhead_node_s: u64,
    /// Allocation the work needs: N·W.
    pub required_node_s: u64,
}

fn plan_view(p: &VarqPlan) -> PlanView {
    PlanView {
        submit_at: format_time(p.submit_at),
        advertised_walltime_s: p.advertised_walltime_s,
        advertised_walltime: format_walltime(p.advertised_walltime_s as i64),
        probability: p.probability,
        max_overhead_node_s: p.max_overhead_node_s,
        required_node_s: p.required_node_s,
    }
}

/// A VARQ plan with its trajectory.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct VarqPlanOut {
    /// The site.
    pub site: String,
    /// The queue.
    pub queue: String,
    /// The instant the plan speaks for.
    #[schema(format = DateTime)]
    pub as_of: String,
    /// When the nodes must be held.
    #[schema(format = DateTime)]
    pub start_at: String,
    /// The plan.
    #[serde(flatten)]
    pub plan: PlanView,
    /// Every candidate submission time, oldest first.
    pub trajectory: Vec<PointView>,
}

/// A reservation's event.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EventView {
    /// When.
    #[schema(format = DateTime)]
    pub at: String,
    /// The state after it.
    #[schema(schema_with = state_schema)]
    pub state: ReservationState,
    /// What happened.
    pub reason: String,
}

/// The current plan of a reservation.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StoredPlanView {
    /// When it will be (or was) submitted.
    #[schema(format = DateTime)]
    pub submit_at: String,
    /// Walltime asked for, seconds.
    pub advertised_walltime_s: i64,
    /// Predicted probability.
    pub probability: f64,
}

/// A managed reservation.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReservationView {
    /// Its id; the remote job's name is `qbets-<id>`.
    pub id: String,
    /// The token name that made it.
    pub owner: String,
    /// The site.
    pub site: String,
    /// The queue.
    pub queue: String,
    /// Nodes.
    pub nodes: i64,
    /// W, seconds.
    pub walltime_s: i64,
    /// When the nodes must be held.
    #[schema(format = DateTime)]
    pub start_at: String,
    /// P.
    pub min_probability: f64,
    /// C.
    pub confidence: f64,
    /// Planner mode.
    #[schema(schema_with = mode_schema)]
    pub mode: Mode,
    /// Δ, seconds.
    pub step_s: i64,
    /// The command.
    pub command: String,
    /// Hold or best effort.
    #[schema(schema_with = run_mode_schema)]
    pub run_mode: RunMode,
    /// Cancel or keep the remote job if the reservation fails.
    #[schema(schema_with = on_failure_schema)]
    pub on_failure: OnFailure,
    /// Where it stands.
    #[schema(schema_with = state_schema)]
    pub state: ReservationState,
    /// Whether no submission time meets P any more (the best one is used).
    pub at_risk: bool,
    /// The current plan.
    pub plan: Option<StoredPlanView>,
    /// The scheduler's job id, once submitted.
    pub remote_job_id: Option<String>,
    /// When it was submitted.
    #[schema(format = DateTime)]
    pub submitted_at: Option<String>,
    /// When the remote job started holding its nodes.
    #[schema(format = DateTime)]
    pub started_at: Option<String>,
    /// When the remote job ended.
    #[schema(format = DateTime)]
    pub ended_at: Option<String>,
    /// The co-allocation reservation index, when part of one.
    pub coallocation_index: Option<i64>,
    /// When it was made.
    #[schema(format = DateTime)]
    pub created: String,
    /// Its events, oldest first (single reservation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<EventView>>,
    /// The URL its state changes are POSTed to, if any.
    pub webhook: Option<String>,
    /// Each state change sent (or to be sent) to the webhook, oldest first (single
    /// reservation with a webhook only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_deliveries: Option<Vec<DeliveryView>>,
}

/// One state change's webhook delivery.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryView {
    /// The event id (the `Qbets-Event-Id` header).
    pub event_id: String,
    /// The reservation's state it tells of (`at_risk`: re-planned at risk).
    pub state: String,
    /// `pending` (to be tried, maybe again), `delivered` or `gave_up`.
    #[schema(schema_with = delivery_status_schema)]
    pub status: String,
    /// Attempts made.
    pub attempts: i64,
    /// When the receiver took it.
    #[schema(format = DateTime)]
    pub delivered_at: Option<String>,
    /// When the next attempt is due (pending only).
    #[schema(format = DateTime)]
    pub next_attempt_at: Option<String>,
    /// When the deliverer stopped trying (24 h after the change).
    #[schema(format = DateTime)]
    pub gave_up_at: Option<String>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
}

fn delivery_status_schema() -> utoipa::openapi::Object {
    names("Delivery status", ["pending", "delivered", "gave_up"])
}

fn delivery_view(d: WebhookDelivery) -> DeliveryView {
    let status = if d.delivered_at.is_some() {
        "delivered"
    } else if d.gave_up_at.is_some() {
        "gave_up"
    } else {
        "pending"
    };
    DeliveryView {
        event_id: d.id.to_string(),
        state: d.state,
        status: status.into(),
        attempts: d.attempts,
        delivered_at: d.delivered_at.map(format_time),
        next_attempt_at: (status == "pending").then(|| format_time(d.next_attempt_at)),
        gave_up_at: d.gave_up_at.map(format_time),
        last_error: d.last_error,
    }
}

/// A reservation as shown alone: with its events and, when it names a webhook, its
/// deliveries.
async fn full_view<S: Store>(state: &AppState<S>, r: Reservation) -> ApiResult<ReservationView> {
    let events = state.store.reservation_events(r.id).await?;
    let deliveries = match r.request.webhook {
        Some(_) => Some(
            state
                .store
                .webhook_deliveries(r.id)
                .await?
                .into_iter()
                .map(delivery_view)
                .collect(),
        ),
        None => None,
    };
    let mut view = reservation_view(r, Some(events));
    view.webhook_deliveries = deliveries;
    Ok(view)
}

fn reservation_view(r: Reservation, events: Option<Vec<ReservationEvent>>) -> ReservationView {
    let q = r.request;
    ReservationView {
        id: q.uid,
        owner: q.owner,
        site: q.site,
        queue: q.queue,
        nodes: q.nodes,
        walltime_s: q.walltime_s,
        start_at: format_time(q.start_at),
        min_probability: q.min_probability,
        confidence: q.confidence,
        mode: q.mode,
        step_s: q.step_s,
        command: q.command,
        run_mode: q.run_mode,
        on_failure: q.on_failure,
        webhook: q.webhook,
        webhook_deliveries: None,
        state: r.state,
        at_risk: r.at_risk,
        plan: r.plan.map(|p| StoredPlanView {
            submit_at: format_time(p.submit_at),
            advertised_walltime_s: p.advertised_walltime_s,
            probability: p.probability,
        }),
        remote_job_id: r.remote_job_id,
        submitted_at: r.submitted_at.map(format_time),
        started_at: r.started_at.map(format_time),
        ended_at: r.ended_at.map(format_time),
        coallocation_index: r.coallocation.map(|c| c.1),
        created: format_time(r.created_at),
        events: events.map(|es| {
            es.into_iter()
                .map(|e| EventView {
                    at: format_time(e.at),
                    state: e.state,
                    reason: e.reason,
                })
                .collect()
        }),
    }
}

/// A token's reservations.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReservationsOut {
    /// Newest first, at most `limit`.
    pub reservations: Vec<ReservationView>,
    /// Whether the token has more (older) reservations than listed.
    pub truncated: bool,
    /// When truncated: the `before` that lists the next (older) ones.
    pub next: Option<String>,
}

/// Most reservations `GET /v1/reservations` lists at once (and its default `limit`).
const LIST_LIMIT: i64 = 1000;

/// Parameters of `GET /v1/reservations`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Most reservations listed, 1 to 1000 (default 1000).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// Only reservations made before this one of the token's (the `next` of the page
    /// before); 404 when the token has no such reservation.
    #[param(value_type = Option<String>, min_length = 1, max_length = 128, pattern = "^[!-~]+$")]
    pub before: Option<String>,
}

/// One request of a co-allocation plan.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CoRequestView {
    /// The site.
    pub site: String,
    /// The queue.
    pub queue: String,
    /// The VARQ plan there.
    #[serde(flatten)]
    pub plan: PlanView,
}

/// The requests that provide one reservation.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CoReservationView {
    /// The reservation's index in the request.
    pub index: usize,
    /// When its nodes must be held.
    #[schema(format = DateTime)]
    pub start_at: String,
    /// P_i = 1 − Π(1 − p) over its requests.
    pub probability: f64,
    /// Its requests, most likely first.
    pub requests: Vec<CoRequestView>,
}

/// A CO-VARQ plan.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CovarqPlanOut {
    /// The probability asked for that all hold.
    pub p_all: f64,
    /// What each must reach: P_all^(1/COUNT).
    pub p_indep: f64,
    /// Π P_i.
    pub p_expected: f64,
    /// Per reservation.
    pub reservations: Vec<CoReservationView>,
}

/// A co-allocation being executed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CoallocationOut {
    /// Its id.
    pub id: String,
    /// P_all.
    pub p_all: f64,
    /// P_indep.
    pub p_indep: f64,
    /// P_expected.
    pub p_expected: f64,
    /// Reservations it holds.
    pub count: i64,
    /// Every managed reservation made for it (`coallocation_index` says which i).
    pub requests: Vec<ReservationView>,
}

/// Calibration of one queue.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CalibrationView {
    /// The site.
    pub site: String,
    /// The queue.
    pub queue: String,
    /// Reservations finished (succeeded or failed).
    pub finished: i64,
    /// Of those, succeeded.
    pub succeeded: i64,
    /// Mean probability predicted at planning.
    pub mean_predicted_probability: f64,
    /// succeeded / finished.
    pub achieved_fraction: f64,
}

/// Whether the promises hold, per queue (the live Tables 5.2–5.4).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CalibrationOut {
    /// By site and queue.
    pub queues: Vec<CalibrationView>,
}

/// A validated VARQ request with where it goes.
struct Parsed {
    site: String,
    queue: String,
    req: VarqRequest,
}

fn probability_field(fields: &mut Fields, name: &str, v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0 && v < 1.0) {
        fields.refuse(name, format!("must lie strictly between 0 and 1, got {v}"));
    }
    v
}

#[expect(
    clippy::too_many_arguments,
    reason = "the fields of two request shapes"
)]
fn parse_varq(
    fields: &mut Fields,
    site: &str,
    queue: &str,
    nodes: i64,
    walltime: &DurationIn,
    start_at: &str,
    min_probability: f64,
    confidence: Option<f64>,
    mode: Option<Mode>,
    step: Option<&DurationIn>,
) -> Option<Parsed> {
    if let Err(e) = crate::service::check_name(site) {
        fields.refuse("site", e);
    }
    if let Err(e) = crate::service::check_name(queue) {
        fields.refuse("queue", e);
    }
    if !(1..=super::params::MAX_NODES).contains(&nodes) || nodes > i64::from(u32::MAX) {
        fields.refuse(
            "nodes",
            format!("must be a whole number from 1 to 100000000, got {nodes}"),
        );
    }
    let w = walltime
        .seconds()
        .map_err(|e| fields.refuse("walltime", e))
        .ok();
    let start = fields.req("start_at", Some(start_at), timestamp);
    let p = probability_field(fields, "min_probability", min_probability);
    let c = probability_field(
        fields,
        "confidence",
        confidence.unwrap_or(varq::DEFAULT_CONFIDENCE),
    );
    let step = match step {
        Some(s) => s.seconds().map_err(|e| fields.refuse("step", e)).ok(),
        None => Some(varq::DEFAULT_STEP_S as i64),
    };
    Some(Parsed {
        site: site.to_string(),
        queue: queue.to_string(),
        req: VarqRequest {
            nodes: nodes.clamp(1, i64::from(u32::MAX)) as u32,
            walltime_s: w? as u64,
            start_at: start?,
            min_probability: p,
            confidence: c,
            mode: mode.unwrap_or_default(),
            step_s: step? as u64,
        },
    })
}

/// The oracle of a site's queue at the site's instant (404 when either is unknown; 422
/// naming the limit when `req` asks for more nodes or walltime than the queue or the
/// machine allows, before anything is planned or submitted).
async fn oracle<S: Store>(
    state: &AppState<S>,
    site: &str,
    queue: &str,
    req: Option<&VarqRequest>,
) -> ApiResult<PredictorOracle> {
    let s = state
        .store
        .site(site)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no site named {site:?}")))?;
    let q =
        state.store.queue(s.id, queue).await?.ok_or_else(|| {
            ApiError::NotFound(format!("site {site:?} has no queue named {queue:?}"))
        })?;
    let shape = req.map(|req| crate::engine::JobShape {
        nodes: u64::from(req.nodes),
        walltime_s: req.walltime_s,
    });
    if let Some(e) = shape.and_then(|s| crate::service::predictors::QueueLimits::of(&q).exceeded(s))
    {
        return Err(ApiError::ExceedsLimits(vec![
            super::error::FieldError::new(e.field(), e.describe(queue)),
        ]));
    }
    let last = match s.kind {
        crate::store::SiteKind::Archive => state.store.site_last_event(s.id).await?,
        crate::store::SiteKind::Live => None,
    };
    let now = state.as_of(&s, last);
    Ok(oracle_for(&state.store, Some(&state.predictors), &s, &q, now).await?)
}

fn planner_errors(errs: Vec<crate::plan::FieldError>) -> ApiError {
    ApiError::Invalid(
        errs.into_iter()
            .map(|e| super::error::FieldError::new(e.field, e.reason))
            .collect(),
    )
}

/// Runs planning work off the async runtime ([`compute`]).
async fn planned<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> ApiResult<T> {
    compute(work)
        .await
        .ok_or_else(|| ApiError::Internal("the planner failed".into()))
}

/// Plans a VARQ request: the plan and its trajectory, or the 422 refusal.
async fn varq_decision(
    p: &Parsed,
    oracle: PredictorOracle,
) -> ApiResult<(VarqPlan, Vec<varq::TrajectoryPoint>)> {
    let req = p.req.clone();
    let max_nodes = oracle.max_nodes();
    let result = planned(move || varq::plan(&req, oracle.now(), &oracle))
        .await?
        .map_err(planner_errors)?;
    match result.decision {
        Decision::Planned(plan) => Ok((plan, result.trajectory)),
        Decision::Refused { best } => Err(ApiError::NoPlan {
            detail: match best {
                Some(b) => format!(
                    "no submission time before start_at gives p ≥ {}; the best is p = {:.4}, submitting at {}",
                    p.req.min_probability,
                    b.probability,
                    format_time(b.submit_at)
                ),
                None => match max_nodes {
                    Some(m) if u64::from(p.req.nodes) > m => format!(
                        "the queue gives a job at most {m} nodes; {} were asked for",
                        p.req.nodes
                    ),
                    _ => "no submission time before start_at is usable: the queue has too \
                          little history for a job of this shape, may be down, or limits the \
                          walltime"
                        .to_string(),
                },
            },
            best_probability: best.map(|b| b.probability),
            best_submit_at: best.map(|b| b.submit_at),
            reservation: None,
        }),
    }
}

/// Plans a virtual advance reservation (no side effects): when to submit a job so that
/// its nodes are held at `start_at` with at least `min_probability`.
#[utoipa::path(
    post, path = "/v1/plans/varq", tag = "reservations", operation_id = "post_varq_plan",
    request_body = VarqIn,
    responses(
        (status = 200, description = "The plan and its probability trajectory", body = VarqPlanOut),
        (status = 400, description = "A field is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site or queue", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No submission time meets the probability (the best reachable and when), or the request exceeds the queue's limits (named)", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn post_varq_plan<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiJson(b): ApiJson<VarqIn>,
) -> ApiResult<Json<VarqPlanOut>> {
    let mut fields = Fields::new();
    let parsed = parse_varq(
        &mut fields,
        &b.site,
        &b.queue,
        b.nodes,
        &b.walltime,
        &b.start_at,
        b.min_probability,
        b.confidence,
        b.mode,
        b.step.as_ref(),
    );
    fields.finish()?;
    let parsed = parsed.ok_or_else(|| ApiError::BadRequest("invalid request".into()))?;
    let oracle = oracle(&state, &parsed.site, &parsed.queue, Some(&parsed.req)).await?;
    let as_of = oracle.now();
    let (plan, trajectory) = varq_decision(&parsed, oracle).await?;
    Ok(Json(VarqPlanOut {
        site: parsed.site,
        queue: parsed.queue,
        as_of: format_time(as_of),
        start_at: format_time(parsed.req.start_at),
        plan: plan_view(&plan),
        trajectory: trajectory
            .into_iter()
            .map(|t| PointView {
                submit_at: format_time(t.submit_at),
                lead_s: t.lead_s,
                advertised_walltime_s: t.advertised_walltime_s,
                probability: t.probability,
                status: t.status,
            })
            .collect(),
    }))
}

fn check_webhook(fields: &mut Fields, name: &str, webhook: Option<&str>) {
    if let Some(url) = webhook
        && let Err(e) = crate::notify::check_url(url, true)
    {
        fields.refuse(name, e);
    }
}

/// A webhook is sent only to an address the server may reach and signed only when the
/// server has a secret: refused (422) otherwise, rather than stored and never sent.
fn webhook_signable<S: Store>(
    state: &AppState<S>,
    name: &str,
    webhook: Option<&str>,
) -> ApiResult<()> {
    // A well-formed URL this server will not send to (its own network, unless
    // allowed) is a refusal of the server's, not of the request's form.
    if let Some(url) = webhook
        && !state.config.reservations.webhook_allow_private
        && let Err(e) = crate::notify::check_url(url, false)
    {
        return Err(ApiError::Unprocessable(vec![
            super::error::FieldError::new(name, e),
        ]));
    }
    if webhook.is_some() && state.webhook_secret.is_none() {
        return Err(ApiError::Unprocessable(vec![
            super::error::FieldError::new(
                name,
                "this server sends no webhooks: it has no signing secret \
             ([reservations] webhook_secret_env in its configuration)",
            ),
        ]));
    }
    Ok(())
}

fn check_command(fields: &mut Fields, name: &str, command: &str) {
    // Characters, as the schema's maxLength counts them (not bytes).
    if command.trim().is_empty() || command.chars().count() > 4096 || command.contains('\0') {
        fields.refuse(
            name,
            "must be 1 to 4096 characters, not all blank, without NUL",
        );
    }
}

/// Longest `Idempotency-Key` taken.
const MAX_IDEMPOTENCY_KEY: usize = 255;

/// The request's `Idempotency-Key`, when it sends one: 1 to 255 visible ASCII
/// characters, bare (`abc-123`) or as a structured-field string (`"abc-123"`).
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default();
    // A structured-field string's quotes are not part of the key; `""` (nothing
    // between them) is taken as written.
    let key = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|t| !t.is_empty())
        .unwrap_or(text);
    if key.is_empty()
        || key.len() > MAX_IDEMPOTENCY_KEY
        || !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ApiError::field(
            "Idempotency-Key",
            format!("must be 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"),
        ));
    }
    Ok(Some(key.to_string()))
}

/// A key sent again with other parameters than those it made `what` with.
fn key_reused(key: &str, what: &str, uid: &str) -> ApiError {
    ApiError::Conflict(format!(
        "Idempotency-Key {key:?} already made {what} {uid} with other parameters; \
         a new request needs a new key"
    ))
}

/// The answer to a request whose key already made `existing`: that reservation as it
/// stands now (200), when the request asks for the same; a conflict when it asks for
/// something else.
async fn replayed<S: Store>(
    state: &AppState<S>,
    existing: Reservation,
    asked: &ReservationRequest,
    key: &str,
) -> ApiResult<(StatusCode, Json<ReservationView>)> {
    let same = ReservationRequest {
        uid: existing.request.uid.clone(),
        ..asked.clone()
    } == existing.request;
    if !same {
        return Err(key_reused(key, "reservation", &existing.request.uid));
    }
    Ok((StatusCode::OK, Json(full_view(state, existing).await?)))
}

/// The answer to a request whose key already made co-allocation `existing`: it as it
/// stands now (200), when the request's digest matches; a conflict otherwise.
async fn replayed_coallocation<S: Store>(
    state: &AppState<S>,
    existing: crate::store::Coallocation,
    key: &str,
    digest: &str,
) -> ApiResult<(StatusCode, Json<CoallocationOut>)> {
    if existing.request_digest.as_deref() != Some(digest) {
        return Err(key_reused(key, "co-allocation", &existing.uid));
    }
    let out = coallocation_out(state, existing).await?;
    Ok((StatusCode::OK, Json(out)))
}

/// Makes a managed reservation: planned now, re-planned while it waits, submitted at
/// its planned time through the site's scheduler. With an `Idempotency-Key`, a retried
/// request (a lost answer, a proxy's 502) gets the reservation its key already made
/// instead of a second one.
#[utoipa::path(
    post, path = "/v1/reservations", tag = "reservations", operation_id = "post_reservation",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "A key of the client's \
            choosing (1 to 255 visible ASCII characters, e.g. a UUID), unique per request it \
            means: a request with a key the token already used for the same parameters \
            answers 200 with that reservation and makes none; for other parameters, 409.",
            min_length = 1, max_length = 255, pattern = "^[!-~]{1,255}$")
    ),
    request_body = ReservationIn,
    responses(
        (status = 201, description = "The reservation, planned", body = ReservationView, links(
            ("get" = (operation_id = "get_reservation", parameters(("id" = "$response.body#/id")))),
            ("cancel" = (operation_id = "delete_reservation", parameters(("id" = "$response.body#/id"))))
        )),
        (status = 200, description = "The reservation this Idempotency-Key already made (a retried request), as it stands now", body = ReservationView),
        (status = 400, description = "A field is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site or queue", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The site takes no reservations (no submit target), or the Idempotency-Key was used for other parameters", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "No submission time meets the probability, the request exceeds the queue's limits (named), or it names a webhook and the server has no signing secret", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn post_reservation<S: Store>(
    caller: Authorized<Reserve>,
    State(state): State<AppState<S>>,
    headers: HeaderMap,
    ApiJson(b): ApiJson<ReservationIn>,
) -> ApiResult<(StatusCode, Json<ReservationView>)> {
    let key = idempotency_key(&headers)?;
    let mut fields = Fields::new();
    let parsed = parse_varq(
        &mut fields,
        &b.site,
        &b.queue,
        b.nodes,
        &b.walltime,
        &b.start_at,
        b.min_probability,
        b.confidence,
        b.mode,
        b.step.as_ref(),
    );
    check_command(&mut fields, "command", &b.command);
    check_webhook(&mut fields, "webhook", b.webhook.as_deref());
    fields.finish()?;
    webhook_signable(&state, "webhook", b.webhook.as_deref())?;
    let parsed = parsed.ok_or_else(|| ApiError::BadRequest("invalid request".into()))?;
    let request = ReservationRequest {
        uid: new_uid("r"),
        owner: caller.token.name.clone(),
        site: parsed.site.clone(),
        queue: parsed.queue.clone(),
        nodes: i64::from(parsed.req.nodes),
        walltime_s: parsed.req.walltime_s as i64,
        start_at: parsed.req.start_at,
        min_probability: parsed.req.min_probability,
        confidence: parsed.req.confidence,
        mode: parsed.req.mode,
        step_s: parsed.req.step_s as i64,
        command: b.command,
        run_mode: b.run_mode.unwrap_or_default(),
        on_failure: b.on_failure.unwrap_or_default(),
        webhook: b.webhook,
    };
    let made_with_key = async |key: &str| {
        state
            .store
            .reservation_by_idempotency_key(&request.owner, key)
            .await
    };
    if let Some(k) = &key
        && let Some(existing) = made_with_key(k).await?
    {
        return replayed(&state, existing, &request, k).await;
    }
    let oracle = oracle(&state, &parsed.site, &parsed.queue, Some(&parsed.req)).await?;
    if state.submitters.get(&parsed.site).is_none() {
        return Err(ApiError::Conflict(format!(
            "site {:?} takes no reservations: it has no submit target ([[sites]] with [sites.submit] in the configuration)",
            parsed.site
        )));
    }
    let (plan, _) = varq_decision(&parsed, oracle).await?;
    let now = state.clock.now();
    let inserted = state
        .store
        .insert_reservation(&NewReservation {
            request: request.clone(),
            state: ReservationState::Planned,
            plan: Some(plan_fields(&plan)),
            at_risk: false,
            coallocation: None,
            reason: format!(
                "planned: submit at {} with walltime {} s (p = {:.3})",
                format_time(plan.submit_at),
                plan.advertised_walltime_s,
                plan.probability
            ),
            created_at: now,
            idempotency_key: key.clone(),
        })
        .await;
    let r = match (inserted, &key) {
        // A concurrent request with the same key stored its reservation first.
        (Err(StoreError::Conflict(e)), Some(k)) => {
            let existing = made_with_key(k)
                .await?
                .ok_or_else(|| ApiError::Internal(format!("a conflict without its row: {e}")))?;
            return replayed(&state, existing, &request, k).await;
        }
        (inserted, _) => inserted?,
    };
    Ok((StatusCode::CREATED, Json(full_view(&state, r).await?)))
}

/// The caller's reservations, newest first, a page at a time (`limit`, and `before`
/// the last one listed).
#[utoipa::path(
    get, path = "/v1/reservations", tag = "reservations", operation_id = "list_reservations",
    params(ListQuery),
    responses(
        (status = 200, description = "The token's reservations", body = ReservationsOut),
        (status = 400, description = "A parameter is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`before` names no reservation of the token's", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_reservations<S: Store>(
    caller: Authorized<Reserve>,
    State(state): State<AppState<S>>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<ReservationsOut>> {
    let mut fields = Fields::new();
    let limit = fields
        .opt("limit", q.limit.as_deref(), |t| positive(t, LIST_LIMIT))
        .unwrap_or(LIST_LIMIT);
    fields.finish()?;
    let before = match q.before.as_deref() {
        None => None,
        Some(id) => match state.store.reservation(id.trim()).await? {
            Some(r) if r.request.owner == caller.token.name => Some(r.id),
            // Well formed, but naming no reservation of the caller's (a page's `next`
            // whose reservation is gone): not found, as `GET …/{id}` answers.
            _ if !id.trim().is_empty() && id.len() <= 128 => {
                return Err(ApiError::NotFound(format!(
                    "before: you have no reservation {id:?}"
                )));
            }
            _ => {
                return Err(ApiError::field(
                    "before",
                    format!("you have no reservation {id:?}"),
                ));
            }
        },
    };
    let mut list = state
        .store
        .reservations(Some(&caller.token.name), before, limit + 1)
        .await?;
    let truncated = list.len() as i64 > limit;
    list.truncate(limit as usize);
    let next = truncated
        .then(|| list.last().map(|r| r.request.uid.clone()))
        .flatten();
    Ok(Json(ReservationsOut {
        reservations: list
            .into_iter()
            .map(|r| reservation_view(r, None))
            .collect(),
        truncated,
        next,
    }))
}

/// The caller's reservation of this id; another token's is not found.
async fn own<S: Store>(
    state: &AppState<S>,
    caller: &Authorized<Reserve>,
    id: &str,
) -> ApiResult<Reservation> {
    match state.store.reservation(id).await? {
        Some(r) if r.request.owner == caller.token.name => Ok(r),
        _ => Err(ApiError::NotFound(format!(
            "you have no reservation {id:?}"
        ))),
    }
}

/// One of the caller's reservations, with its events.
#[utoipa::path(
    get, path = "/v1/reservations/{id}", tag = "reservations", operation_id = "get_reservation",
    params(("id" = String, Path, description = "The reservation's id")),
    responses(
        (status = 200, description = "The reservation and its events", body = ReservationView),
        (status = 404, description = "The caller has no such reservation", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get_reservation<S: Store>(
    caller: Authorized<Reserve>,
    State(state): State<AppState<S>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ReservationView>> {
    let r = own(&state, &caller, &id).await?;
    Ok(Json(full_view(&state, r).await?))
}

fn cancel_error(e: ReservationError) -> ApiError {
    match e {
        ReservationError::Final(s) => ApiError::Conflict(format!("the reservation is already {s}")),
        ReservationError::Store(e) => e.into(),
        ReservationError::Remote(e) => ApiError::BadGateway(format!(
            "the reservation is cancelled, but its remote job could not be cancelled yet: {e}; \
             the service tries again on its own, or cancel again to retry"
        )),
    }
}

/// Cancels one of the caller's reservations, and its remote job if there is one.
#[utoipa::path(
    delete, path = "/v1/reservations/{id}", tag = "reservations", operation_id = "delete_reservation",
    params(("id" = String, Path, description = "The reservation's id")),
    responses(
        (status = 200, description = "The reservation, cancelled, with its events", body = ReservationView),
        (status = 404, description = "The caller has no such reservation", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The reservation was refused or ended in error (no job to cancel)", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "The reservation is cancelled, but the scheduler did not cancel its job yet; the service tries again on its own, or cancel again to retry", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn delete_reservation<S: Store>(
    caller: Authorized<Reserve>,
    State(state): State<AppState<S>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ReservationView>> {
    let r = own(&state, &caller, &id).await?;
    let now = state.clock.now();
    let after = resv::cancel(
        &state.store,
        &state.submitters,
        &r,
        now,
        "cancelled by its owner",
    )
    .await
    .map_err(cancel_error)?;
    Ok(Json(full_view(&state, after).await?))
}

/// A validated CO-VARQ request.
struct ParsedCo {
    items: Vec<Parsed>,
    commands: Vec<String>,
    candidates: Vec<(String, String)>,
    p_all: f64,
}

fn parse_covarq(b: &CovarqIn, need_commands: bool) -> ApiResult<ParsedCo> {
    let mut fields = Fields::new();
    let p_all = probability_field(
        &mut fields,
        "p_all",
        b.p_all.unwrap_or(covarq::DEFAULT_P_ALL),
    );
    if b.reservations.is_empty() {
        fields.refuse("reservations", "must list at least one reservation");
    }
    if b.reservations.len() > 64 {
        fields.refuse("reservations", "at most 64");
    }
    if b.candidates.is_empty() {
        fields.refuse("candidates", "must list at least one site/queue");
    }
    if b.candidates.len() > 64 {
        fields.refuse("candidates", "at most 64");
    }
    for (j, c) in b.candidates.iter().enumerate() {
        if let Err(e) = crate::service::check_name(&c.site) {
            fields.refuse(&format!("candidates[{j}].site"), e);
        }
        if let Err(e) = crate::service::check_name(&c.queue) {
            fields.refuse(&format!("candidates[{j}].queue"), e);
        }
        // Equation 6.1 takes the requests as independent; two on one queue are not.
        if let Some(first) = b.candidates[..j]
            .iter()
            .position(|o| o.site == c.site && o.queue == c.queue)
        {
            fields.refuse(
                &format!("candidates[{j}]"),
                format!("repeats candidates[{first}] ({}/{})", c.site, c.queue),
            );
        }
    }
    let mut items = Vec::new();
    let mut commands = Vec::new();
    let mut shared = std::collections::HashSet::new();
    for (i, r) in b.reservations.iter().enumerate() {
        let mut own = Fields::new();
        let parsed = parse_varq(
            &mut own,
            "x",
            "x",
            r.nodes,
            &r.walltime,
            &r.start_at,
            0.5,
            b.confidence,
            Some(Mode::MaxProbability),
            b.step.as_ref(),
        );
        if let Err(ApiError::Invalid(errs)) = own.finish() {
            for e in errs {
                // The request's own fields, checked with each reservation: each fault
                // named once.
                if e.field == "confidence" || e.field == "step" {
                    if shared.insert((e.field.clone(), e.detail.clone())) {
                        fields.refuse(&e.field, e.detail);
                    }
                } else {
                    fields.refuse(&format!("reservations[{i}].{}", e.field), e.detail);
                }
            }
        }
        match (&r.command, need_commands) {
            (Some(c), true) => check_command(&mut fields, &format!("reservations[{i}].command"), c),
            (None, true) => fields.refuse(&format!("reservations[{i}].command"), "is required"),
            _ => {}
        }
        commands.push(r.command.clone().unwrap_or_default());
        if let Some(mut p) = parsed {
            // The highest-probability plan of each candidate (spec step 2).
            p.req.min_probability = f64::MIN_POSITIVE;
            items.push(p);
        }
    }
    fields.finish()?;
    Ok(ParsedCo {
        items,
        commands,
        candidates: b
            .candidates
            .iter()
            .map(|c| (c.site.clone(), c.queue.clone()))
            .collect(),
        p_all,
    })
}

/// Computes a CO-VARQ plan: each reservation's VARQ plan on each candidate, combined.
/// The oracles of a CO-VARQ request's candidates, in order (404 for one not known).
async fn candidate_oracles<S: Store>(
    state: &AppState<S>,
    co: &ParsedCo,
) -> ApiResult<Vec<PredictorOracle>> {
    let mut oracles = Vec::new();
    for (site, queue) in &co.candidates {
        // Each candidate's limits bound its own trajectory (a reservation beyond them
        // may fit another candidate), so no refusal here.
        oracles.push(oracle(state, site, queue, None).await?);
    }
    Ok(oracles)
}

async fn covarq_plan(
    co: &ParsedCo,
    oracles: Vec<PredictorOracle>,
) -> ApiResult<covarq::CoPlan<(String, String)>> {
    let points: u64 = co
        .items
        .iter()
        .flat_map(|item| {
            oracles.iter().map(|o| {
                // A pair over a plan's own limit is refused unplanned (that candidate
                // cannot serve it): it costs nothing.
                let points = item.req.points(o.now());
                if points > varq::MAX_POINTS { 0 } else { points }
            })
        })
        .fold(0, u64::saturating_add);
    if points > covarq::MAX_POINTS {
        return Err(ApiError::Invalid(vec![super::error::FieldError::new(
            "step",
            format!(
                "{} reservations on {} candidates need {points} candidate submission times, at most {}: a larger step, fewer candidates or nearer start times",
                co.items.len(),
                oracles.len(),
                covarq::MAX_POINTS
            ),
        )]));
    }
    let reqs: Vec<VarqRequest> = co.items.iter().map(|i| i.req.clone()).collect();
    let results = planned(move || {
        reqs.iter()
            .map(|req| {
                oracles
                    .iter()
                    .map(|o| varq::plan(req, o.now(), o))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    })
    .await?;
    let mut plans: Vec<Vec<Option<VarqPlan>>> = Vec::new();
    for (i, row) in results.into_iter().enumerate() {
        // A request no candidate can even consider (start_at past everywhere) is the
        // request's fault: named as such. One only some candidates cannot consider
        // (their present is later) is theirs: they cannot serve it.
        if row.iter().all(Result::is_err)
            && let Some(Err(errs)) = row.first()
        {
            return Err(ApiError::Invalid(
                errs.iter()
                    .map(|e| {
                        super::error::FieldError::new(
                            format!("reservations[{i}].{}", e.field),
                            e.reason.clone(),
                        )
                    })
                    .collect(),
            ));
        }
        plans.push(
            row.into_iter()
                .map(|r| match r.map(|r| r.decision) {
                    Ok(Decision::Planned(p)) => Some(p),
                    Ok(Decision::Refused { .. }) | Err(_) => None,
                })
                .collect(),
        );
    }
    let index = |k: &(String, String)| co.candidates.iter().position(|c| c == k).unwrap_or(0);
    covarq::plan(co.items.len(), &co.candidates, co.p_all, |i, k| {
        plans[i][index(k)]
    })
    .map_err(|r| match r {
        CoRefusal::Unreachable {
            reservation,
            best,
            p_indep,
        } => ApiError::NoPlan {
            detail: format!(
                "reservation {reservation} reaches at most p = {best:.4} with every candidate; it needs p_indep = {p_indep:.4}"
            ),
            best_probability: Some(best),
            best_submit_at: None,
            reservation: Some(reservation),
        },
        CoRefusal::Invalid { errors } => planner_errors(errors),
    })
}

fn covarq_view(plan: &covarq::CoPlan<(String, String)>, co: &ParsedCo) -> CovarqPlanOut {
    CovarqPlanOut {
        p_all: plan.p_all,
        p_indep: plan.p_indep,
        p_expected: plan.p_expected,
        reservations: plan
            .reservations
            .iter()
            .map(|r| CoReservationView {
                index: r.reservation,
                start_at: format_time(co.items[r.reservation].req.start_at),
                probability: r.probability,
                requests: r
                    .requests
                    .iter()
                    .map(|q| CoRequestView {
                        site: q.candidate.0.clone(),
                        queue: q.candidate.1.clone(),
                        plan: plan_view(&q.plan),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Plans a co-allocation (no side effects): which VARQ requests, on which candidate
/// queues, give every reservation P_indep so that all hold with P_all.
#[utoipa::path(
    post, path = "/v1/plans/covarq", tag = "reservations", operation_id = "post_covarq_plan",
    request_body = CovarqIn,
    responses(
        (status = 200, description = "The plan", body = CovarqPlanOut),
        (status = 400, description = "A field is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site or queue", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A reservation cannot reach P_indep: which, and the best reached", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn post_covarq_plan<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiJson(b): ApiJson<CovarqIn>,
) -> ApiResult<Json<CovarqPlanOut>> {
    let co = parse_covarq(&b, false)?;
    let plan = covarq_plan(&co, candidate_oracles(&state, &co).await?).await?;
    Ok(Json(covarq_view(&plan, &co)))
}

/// Executes a co-allocation: one managed reservation per request of the plan; once one
/// request of a reservation has started in time, the others of it are cancelled.
#[utoipa::path(
    post, path = "/v1/coallocations", tag = "reservations", operation_id = "post_coallocation",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "As for POST \
            /v1/reservations: a request with a key the token already used for the same \
            parameters answers 200 with that co-allocation and makes none; for other \
            parameters, 409.",
            min_length = 1, max_length = 255, pattern = "^[!-~]{1,255}$")
    ),
    request_body = CovarqIn,
    responses(
        (status = 201, description = "The co-allocation and its reservations", body = CoallocationOut, links(
            ("get" = (operation_id = "get_coallocation", parameters(("id" = "$response.body#/id"))))
        )),
        (status = 200, description = "The co-allocation this Idempotency-Key already made (a retried request), as it stands now", body = CoallocationOut),
        (status = 400, description = "A field is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site or queue among the candidates", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A candidate site takes no reservations, or the Idempotency-Key was used for other parameters", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A reservation cannot reach P_indep, or a webhook is named and the server has no signing secret", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn post_coallocation<S: Store>(
    caller: Authorized<Reserve>,
    State(state): State<AppState<S>>,
    headers: HeaderMap,
    ApiJson(b): ApiJson<CovarqIn>,
) -> ApiResult<(StatusCode, Json<CoallocationOut>)> {
    let key = idempotency_key(&headers)?;
    let co = parse_covarq(&b, true)?;
    let mut fields = Fields::new();
    check_webhook(&mut fields, "webhook", b.webhook.as_deref());
    fields.finish()?;
    webhook_signable(&state, "webhook", b.webhook.as_deref())?;
    let owner = &caller.token.name;
    let (run_mode, on_failure) = (
        b.run_mode.unwrap_or_default(),
        b.on_failure.unwrap_or_default(),
    );
    // With a key, the digest of what the request asks for, which a retry must match.
    let idempotency = key.map(|k| {
        let mut asked = serde_json::json!({
            "reservations": co.items.iter().zip(&co.commands)
                .map(|(p, command)| serde_json::json!({"request": p.req, "command": command}))
                .collect::<Vec<_>>(),
            "candidates": co.candidates,
            "p_all": co.p_all,
            "run_mode": run_mode,
        });
        // Only when asked for: a key used before the field existed keeps its digest.
        if on_failure != OnFailure::default() {
            asked["on_failure"] = serde_json::json!(on_failure);
        }
        if let Some(url) = &b.webhook {
            asked["webhook"] = serde_json::json!(url);
        }
        let digest = resv::request_digest(&asked);
        (k, digest)
    });
    let made_with_key = async |key: &str| {
        state
            .store
            .coallocation_by_idempotency_key(owner, key)
            .await
    };
    if let Some((k, digest)) = &idempotency
        && let Some(existing) = made_with_key(k).await?
    {
        return replayed_coallocation(&state, existing, k, digest).await;
    }
    // Unknown candidates first (404), as for a single reservation.
    let oracles = candidate_oracles(&state, &co).await?;
    for (site, _) in &co.candidates {
        if state.submitters.get(site).is_none() {
            return Err(ApiError::Conflict(format!(
                "site {site:?} takes no reservations: it has no submit target"
            )));
        }
    }
    let plan = covarq_plan(&co, oracles).await?;
    let now = state.clock.now();
    let uid = new_uid("c");
    let mut members = Vec::new();
    for r in &plan.reservations {
        let item = &co.items[r.reservation];
        for q in &r.requests {
            members.push(NewReservation {
                request: ReservationRequest {
                    uid: new_uid("r"),
                    owner: owner.clone(),
                    site: q.candidate.0.clone(),
                    queue: q.candidate.1.clone(),
                    nodes: i64::from(item.req.nodes),
                    walltime_s: item.req.walltime_s as i64,
                    start_at: item.req.start_at,
                    // Re-planned against its own promise: at risk when it falls below.
                    min_probability: q.plan.probability.clamp(1e-9, 1.0 - 1e-9),
                    confidence: item.req.confidence,
                    mode: Mode::MaxProbability,
                    step_s: item.req.step_s as i64,
                    command: co.commands[r.reservation].clone(),
                    run_mode,
                    on_failure,
                    webhook: b.webhook.clone(),
                },
                state: ReservationState::Planned,
                plan: Some(plan_fields(&q.plan)),
                at_risk: false,
                // The co-allocation's id is the store's, given as it stores them.
                coallocation: Some((0, r.reservation as i64)),
                reason: format!(
                    "planned for co-allocation {uid} reservation {}: submit at {} (p = {:.3})",
                    r.reservation,
                    format_time(q.plan.submit_at),
                    q.plan.probability
                ),
                created_at: now,
                idempotency_key: None,
            });
        }
    }
    // The co-allocation and all its members, or nothing: never one without the others.
    let inserted = state
        .store
        .insert_coallocation(
            &NewCoallocation {
                uid,
                owner: owner.clone(),
                p_all: plan.p_all,
                p_indep: plan.p_indep,
                p_expected: plan.p_expected,
                count: co.items.len() as i64,
                created_at: now,
                idempotency: idempotency.clone(),
            },
            &members,
        )
        .await;
    let c = match (inserted, &idempotency) {
        // A concurrent request with the same key stored its co-allocation first.
        (Err(StoreError::Conflict(e)), Some((k, digest))) => {
            let existing = made_with_key(k)
                .await?
                .ok_or_else(|| ApiError::Internal(format!("a conflict without its row: {e}")))?;
            return replayed_coallocation(&state, existing, k, digest).await;
        }
        (inserted, _) => inserted?,
    };
    coallocation_out(&state, c)
        .await
        .map(|o| (StatusCode::CREATED, Json(o)))
}

async fn coallocation_out<S: Store>(
    state: &AppState<S>,
    c: crate::store::Coallocation,
) -> ApiResult<CoallocationOut> {
    let members = state.store.coallocation_members(c.id).await?;
    Ok(CoallocationOut {
        id: c.uid,
        p_all: c.p_all,
        p_indep: c.p_indep,
        p_expected: c.p_expected,
        count: c.count,
        requests: members
            .into_iter()
            .map(|r| reservation_view(r, None))
            .collect(),
    })
}

/// One of the caller's co-allocations, with its reservations.
#[utoipa::path(
    get, path = "/v1/coallocations/{id}", tag = "reservations", operation_id = "get_coallocation",
    params(("id" = String, Path, description = "The co-allocation's id")),
    responses(
        (status = 200, description = "The co-allocation", body = CoallocationOut),
        (status = 404, description = "The caller has no such co-allocation", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get_coallocation<S: Store>(
    caller: Authorized<Reserve>,
    State(state): State<AppState<S>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<CoallocationOut>> {
    match state.store.coallocation(&id).await? {
        Some(c) if c.owner == caller.token.name => Ok(Json(coallocation_out(&state, c).await?)),
        _ => Err(ApiError::NotFound(format!(
            "you have no co-allocation {id:?}"
        ))),
    }
}

/// Whether the promises hold: per site and queue, finished reservations, the mean
/// predicted probability and the fraction that succeeded.
#[utoipa::path(
    get, path = "/v1/calibration", tag = "reservations", operation_id = "get_calibration",
    responses((status = 200, description = "Per site and queue", body = CalibrationOut))
)]
pub async fn get_calibration<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
) -> ApiResult<Json<CalibrationOut>> {
    let rows = state.store.calibration().await?;
    Ok(Json(CalibrationOut {
        queues: rows
            .into_iter()
            .map(|c| CalibrationView {
                achieved_fraction: if c.finished > 0 {
                    c.succeeded as f64 / c.finished as f64
                } else {
                    0.0
                },
                site: c.site,
                queue: c.queue,
                finished: c.finished,
                succeeded: c.succeeded,
                mean_predicted_probability: c.mean_probability,
            })
            .collect(),
    }))
}
