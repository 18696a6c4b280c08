//! Managed reservations as stored: the reservation with its plan and remote job, its
//! events, co-allocations, and the calibration figures drawn from finished ones.

use crate::plan::lifecycle::{OnFailure, ReservationState, RunMode};
use crate::plan::varq::Mode;

use super::{StoreError, StoreResult};

/// What was asked for, fixed when a reservation is made: the part a stored
/// reservation and a reservation to store share.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationRequest {
    /// Public id, unique; the remote job's name carries it.
    pub uid: String,
    /// The token name that made it.
    pub owner: String,
    /// Site name.
    pub site: String,
    /// Queue name.
    pub queue: String,
    /// Nodes.
    pub nodes: i64,
    /// Seconds of work once the nodes are held (W).
    pub walltime_s: i64,
    /// Unix time the nodes must be held at.
    pub start_at: i64,
    /// P.
    pub min_probability: f64,
    /// C.
    pub confidence: f64,
    /// Planner mode.
    pub mode: Mode,
    /// Δ, seconds.
    pub step_s: i64,
    /// The user's command.
    pub command: String,
    /// Hold or best effort.
    pub run_mode: RunMode,
    /// Cancel the remote job when the reservation fails, or keep it.
    pub on_failure: OnFailure,
    /// The URL its state changes are POSTed to, if any.
    pub webhook: Option<String>,
}

/// A reservation to store (its first event is written with it).
#[derive(Debug, Clone, PartialEq)]
pub struct NewReservation {
    /// What was asked for.
    pub request: ReservationRequest,
    /// `planned` (or `refused`, kept for the record).
    pub state: ReservationState,
    /// The plan, when there is one.
    pub plan: Option<PlanFields>,
    /// Whether no submission time meets P (the best one is used).
    pub at_risk: bool,
    /// The co-allocation it belongs to, and its reservation index there.
    pub coallocation: Option<(i64, i64)>,
    /// Why it was created in this state (the first event's reason).
    pub reason: String,
    /// Unix seconds.
    pub created_at: i64,
    /// The client's `Idempotency-Key`, unique per owner: a second reservation with the
    /// same owner and key is refused as [`StoreError::Conflict`].
    pub idempotency_key: Option<String>,
}

/// A plan as stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanFields {
    /// When to submit.
    pub submit_at: i64,
    /// W + (start_at − submit_at).
    pub advertised_walltime_s: i64,
    /// Predicted probability.
    pub probability: f64,
}

/// A stored reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    /// The store's id.
    pub id: i64,
    /// What was asked for.
    pub request: ReservationRequest,
    /// Where it stands.
    pub state: ReservationState,
    /// The current plan.
    pub plan: Option<PlanFields>,
    /// Whether nothing meets P at the last re-plan.
    pub at_risk: bool,
    /// When it was last planned.
    pub planned_at: i64,
    /// The scheduler's job id, once submitted.
    pub remote_job_id: Option<String>,
    /// When it was submitted.
    pub submitted_at: Option<i64>,
    /// When the remote job started holding nodes.
    pub started_at: Option<i64>,
    /// When the remote job ended.
    pub ended_at: Option<i64>,
    /// The executor holding the submission lease.
    pub lease_owner: Option<String>,
    /// Until when.
    pub lease_until: Option<i64>,
    /// The co-allocation and index, when part of one.
    pub coallocation: Option<(i64, i64)>,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
    /// When an executor last set out to submit its placeholder job (before asking the
    /// scheduler); `None` with no `remote_job_id`: never submitted.
    pub submit_attempted_at: Option<i64>,
}

/// One transition or note in a reservation's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationEvent {
    /// Unix seconds.
    pub at: i64,
    /// The state after the event.
    pub state: ReservationState,
    /// Why.
    pub reason: String,
}

/// A re-plan of a planned reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct Replanned {
    /// The new plan.
    pub plan: PlanFields,
    /// Whether nothing meets P.
    pub at_risk: bool,
    /// When.
    pub at: i64,
    /// An event to record (moves and risk changes), or none (kept).
    pub event: Option<String>,
}

/// Which sites' reservations an executor runs: every site's, one site's (the demo's,
/// whose reservations run by its simulated clock), or every site's but one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SiteScope {
    #[default]
    All,
    Only(String),
    Except(String),
}

impl SiteScope {
    /// Whether reservations at `site` are in scope.
    pub fn includes(&self, site: &str) -> bool {
        match self {
            SiteScope::All => true,
            SiteScope::Only(s) => s == site,
            SiteScope::Except(s) => s != site,
        }
    }

    /// The site to keep to and the site to leave out, as a query binds them.
    pub fn binds(&self) -> (Option<&str>, Option<&str>) {
        match self {
            SiteScope::All => (None, None),
            SiteScope::Only(s) => (Some(s), None),
            SiteScope::Except(s) => (None, Some(s)),
        }
    }
}

/// A state change, applied only when the reservation is still in `from` (and, when
/// `lease_owner` is given, still leased by it): compare-and-set, so concurrent
/// executors and a user's cancel never both win.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The state it must be in.
    pub from: ReservationState,
    /// The state it moves to.
    pub to: ReservationState,
    /// The lease holder it must have, if any.
    pub lease_owner: Option<String>,
    /// The remote job id to record.
    pub remote_job_id: Option<String>,
    /// When submitted.
    pub submitted_at: Option<i64>,
    /// When started.
    pub started_at: Option<i64>,
    /// When ended.
    pub ended_at: Option<i64>,
    /// When the change happens.
    pub at: i64,
    /// Why (the event's reason).
    pub reason: String,
}

impl Transition {
    /// A change from `from` to `to` at `at` for `reason`, recording nothing else.
    pub fn new(
        from: ReservationState,
        to: ReservationState,
        at: i64,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            from,
            to,
            lease_owner: None,
            remote_job_id: None,
            submitted_at: None,
            started_at: None,
            ended_at: None,
            at,
            reason: reason.into(),
        }
    }
}

/// A co-allocation to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCoallocation {
    /// Public id.
    pub uid: String,
    /// The token name that made it.
    pub owner: String,
    /// P_all.
    pub p_all: f64,
    /// P_indep.
    pub p_indep: f64,
    /// P_expected.
    pub p_expected: f64,
    /// Reservations it holds.
    pub count: i64,
    /// Unix seconds.
    pub created_at: i64,
    /// The client's `Idempotency-Key` (unique per owner) and the digest of what the
    /// keyed request asked for.
    pub idempotency: Option<(String, String)>,
}

/// A stored co-allocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Coallocation {
    /// The store's id.
    pub id: i64,
    /// Public id.
    pub uid: String,
    /// Owner.
    pub owner: String,
    /// P_all.
    pub p_all: f64,
    /// P_indep.
    pub p_indep: f64,
    /// P_expected.
    pub p_expected: f64,
    /// Reservations it holds.
    pub count: i64,
    /// Unix seconds.
    pub created_at: i64,
    /// The digest of what its keyed request asked for, when it came with an
    /// `Idempotency-Key`.
    pub request_digest: Option<String>,
}

/// Calibration of one site and queue: finished reservations, what was promised and
/// what was achieved (the live Tables 5.2–5.4).
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// Site name.
    pub site: String,
    /// Queue name.
    pub queue: String,
    /// Reservations submitted that succeeded or failed (one that failed before it could
    /// be submitted, the service down, tested no prediction).
    pub finished: i64,
    /// Of those, how many succeeded.
    pub succeeded: i64,
    /// Mean predicted probability at submission.
    pub mean_probability: f64,
}

/// A reservation's state change waiting in (or sent from) the webhook outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookDelivery {
    /// The outbox row's id (the `Qbets-Event-Id`).
    pub id: i64,
    /// The reservation's store id.
    pub reservation_id: i64,
    /// Where it is POSTed.
    pub url: String,
    /// The state the reservation moved to (`at_risk` for a re-plan that found no time
    /// meeting P).
    pub state: String,
    /// The state it left.
    pub previous_state: String,
    /// The JSON body, the same bytes on every attempt.
    pub body: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Attempts made so far.
    pub attempts: i64,
    /// When the next attempt is due.
    pub next_attempt_at: i64,
    /// When the receiver took it (a 2xx).
    pub delivered_at: Option<i64>,
    /// When the deliverer stopped trying.
    pub gave_up_at: Option<i64>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
}

/// The outcome of one delivery attempt, recorded by its leaseholder.
#[derive(Debug, Clone, PartialEq)]
pub enum WebhookOutcome {
    /// The receiver answered 2xx at this time.
    Delivered { at: i64 },
    /// It failed at `at`; try again at `next_attempt_at`, or never (`give_up`).
    Failed {
        at: i64,
        error: String,
        next_attempt_at: i64,
        give_up: bool,
    },
}

/// Columns of `webhook_outbox`, in row-struct order.
macro_rules! webhook_columns {
    () => {
        "id, reservation_id, url, state, previous_state, body, created_at, attempts, \
         next_attempt_at, delivered_at, gave_up_at, last_error"
    };
}

#[derive(sqlx::FromRow)]
pub(super) struct WebhookRow {
    id: i64,
    reservation_id: i64,
    url: String,
    state: String,
    previous_state: String,
    body: String,
    created_at: i64,
    attempts: i64,
    next_attempt_at: i64,
    delivered_at: Option<i64>,
    gave_up_at: Option<i64>,
    last_error: Option<String>,
}

impl From<WebhookRow> for WebhookDelivery {
    fn from(r: WebhookRow) -> Self {
        WebhookDelivery {
            id: r.id,
            reservation_id: r.reservation_id,
            url: r.url,
            state: r.state,
            previous_state: r.previous_state,
            body: r.body,
            created_at: r.created_at,
            attempts: r.attempts,
            next_attempt_at: r.next_attempt_at,
            delivered_at: r.delivered_at,
            gave_up_at: r.gave_up_at,
            last_error: r.last_error,
        }
    }
}

/// What a state change's webhook row needs of its reservation.
#[derive(sqlx::FromRow)]
pub(super) struct HookTarget {
    pub(super) uid: String,
    pub(super) site: String,
    pub(super) queue: String,
    pub(super) webhook: Option<String>,
    pub(super) at_risk: bool,
}

/// The webhook body of a state change: what changed, of which reservation, when, and
/// where to read the reservation whole. Built by the store, in the transaction that
/// makes the change, so the body says exactly what was committed.
pub(super) fn webhook_body(
    uid: &str,
    site: &str,
    queue: &str,
    state: &str,
    previous_state: &str,
    at: i64,
) -> String {
    serde_json::json!({
        "type": "reservation.state_changed",
        "reservation": uid,
        "site": site,
        "queue": queue,
        "state": state,
        "previous_state": previous_state,
        "at": crate::plan::format_unix(at),
        "url": format!("/v1/reservations/{uid}"),
    })
    .to_string()
}

/// Columns of `reservations`, in row-struct order.
macro_rules! reservation_columns {
    () => {
        "id, uid, owner, site, queue, nodes, walltime_s, start_at, min_probability, confidence, \
         mode, step_s, command, run_mode, state, submit_at, advertised_walltime_s, probability, \
         at_risk, planned_at, remote_job_id, submitted_at, started_at, ended_at, lease_owner, \
         lease_until, coallocation_id, coalloc_index, created_at, updated_at, on_failure, \
         submit_attempted_at, webhook"
    };
}
/// Columns of `coallocations`.
macro_rules! coallocation_columns {
    () => {
        "id, uid, owner, p_all, p_indep, p_expected, count, created_at, request_digest"
    };
}
pub(super) use {coallocation_columns, reservation_columns, webhook_columns};

#[derive(sqlx::FromRow)]
pub(super) struct ReservationRow {
    id: i64,
    uid: String,
    owner: String,
    site: String,
    queue: String,
    nodes: i64,
    walltime_s: i64,
    start_at: i64,
    min_probability: f64,
    confidence: f64,
    mode: String,
    step_s: i64,
    command: String,
    run_mode: String,
    state: String,
    submit_at: Option<i64>,
    advertised_walltime_s: Option<i64>,
    probability: Option<f64>,
    at_risk: bool,
    planned_at: i64,
    remote_job_id: Option<String>,
    submitted_at: Option<i64>,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    lease_owner: Option<String>,
    lease_until: Option<i64>,
    coallocation_id: Option<i64>,
    coalloc_index: Option<i64>,
    created_at: i64,
    updated_at: i64,
    on_failure: String,
    submit_attempted_at: Option<i64>,
    webhook: Option<String>,
}

pub(super) fn parse_state(s: &str) -> StoreResult<ReservationState> {
    ReservationState::parse(s)
        .ok_or_else(|| StoreError::Invalid(format!("reservation state {s:?}")))
}

pub(super) fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Latest => "latest",
        Mode::MaxProbability => "max_probability",
    }
}

impl TryFrom<ReservationRow> for Reservation {
    type Error = StoreError;
    fn try_from(r: ReservationRow) -> StoreResult<Self> {
        let mode = match r.mode.as_str() {
            "latest" => Mode::Latest,
            "max_probability" => Mode::MaxProbability,
            other => return Err(StoreError::Invalid(format!("planner mode {other:?}"))),
        };
        let plan = match (r.submit_at, r.advertised_walltime_s, r.probability) {
            (Some(submit_at), Some(advertised_walltime_s), Some(probability)) => Some(PlanFields {
                submit_at,
                advertised_walltime_s,
                probability,
            }),
            _ => None,
        };
        Ok(Reservation {
            id: r.id,
            request: ReservationRequest {
                uid: r.uid,
                owner: r.owner,
                site: r.site,
                queue: r.queue,
                nodes: r.nodes,
                walltime_s: r.walltime_s,
                start_at: r.start_at,
                min_probability: r.min_probability,
                confidence: r.confidence,
                mode,
                step_s: r.step_s,
                command: r.command,
                run_mode: RunMode::parse(&r.run_mode)
                    .ok_or_else(|| StoreError::Invalid(format!("run mode {:?}", r.run_mode)))?,
                on_failure: OnFailure::parse(&r.on_failure)
                    .ok_or_else(|| StoreError::Invalid(format!("on_failure {:?}", r.on_failure)))?,
                webhook: r.webhook,
            },
            state: parse_state(&r.state)?,
            plan,
            at_risk: r.at_risk,
            planned_at: r.planned_at,
            remote_job_id: r.remote_job_id,
            submitted_at: r.submitted_at,
            started_at: r.started_at,
            ended_at: r.ended_at,
            lease_owner: r.lease_owner,
            lease_until: r.lease_until,
            coallocation: r.coallocation_id.zip(r.coalloc_index),
            created_at: r.created_at,
            updated_at: r.updated_at,
            submit_attempted_at: r.submit_attempted_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    at: i64,
    state: String,
    reason: String,
}

impl TryFrom<EventRow> for ReservationEvent {
    type Error = StoreError;
    fn try_from(r: EventRow) -> StoreResult<Self> {
        Ok(ReservationEvent {
            at: r.at,
            state: parse_state(&r.state)?,
            reason: r.reason,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CoallocationRow {
    id: i64,
    uid: String,
    owner: String,
    p_all: f64,
    p_indep: f64,
    p_expected: f64,
    count: i64,
    created_at: i64,
    request_digest: Option<String>,
}

impl From<CoallocationRow> for Coallocation {
    fn from(r: CoallocationRow) -> Self {
        Coallocation {
            id: r.id,
            uid: r.uid,
            owner: r.owner,
            p_all: r.p_all,
            p_indep: r.p_indep,
            p_expected: r.p_expected,
            count: r.count,
            created_at: r.created_at,
            request_digest: r.request_digest,
        }
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CalibrationRow {
    site: String,
    queue: String,
    finished: i64,
    succeeded: i64,
    mean_probability: Option<f64>,
}

impl From<CalibrationRow> for Calibration {
    fn from(r: CalibrationRow) -> Self {
        Calibration {
            site: r.site,
            queue: r.queue,
            finished: r.finished,
            succeeded: r.succeeded,
            mean_probability: r.mean_probability.unwrap_or(0.0),
        }
    }
}
