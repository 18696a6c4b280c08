//! Managed reservations' executor (`varq.md`, *Managed reservations*): a background
//! task that re-plans waiting reservations, submits each at its planned time through
//! its site's scheduler, follows the remote job, and marks success or failure against
//! `start_at`.
//!
//! All state is in the store, so a restart loses nothing, and a reservation is never
//! submitted twice:
//! - submission needs a lease taken atomically in the store ([`Store::claim_reservations`]),
//!   so of several replicas on one PostgreSQL only one submits a given reservation;
//! - before submitting, the executor asks the scheduler for a job whose name carries the
//!   reservation id; after a crash between submission and its record it finds that job
//!   and records it instead of submitting another;
//! - a lease outlives any submission attempt (the scheduler client's timeout is far
//!   shorter), so a live holder is never overtaken.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::config::SiteConfig;
use crate::plan::lifecycle::{self, OnFailure, RemoteJob, ReservationState};
use crate::plan::varq::{self, Replan, VarqPlan, VarqRequest};
use crate::store::{PlanFields, Replanned, Reservation, SiteScope, Store, StoreError, Transition};
use crate::submit::{RemoteRequest, RemoteStatus, SubmitError, Submitter};

use super::Clock;
use super::Predictors;
use super::planning::oracle_for;
use super::tokens::{hash, to_hex};

/// Seconds a submission lease lasts: far longer than one submission attempt.
pub const LEASE_S: i64 = 120;
/// Reservations claimed per tick.
const CLAIM_BATCH: i64 = 32;

/// The scheduler of every site that has a submit target, by site name.
#[derive(Debug, Clone, Default)]
pub struct Submitters(HashMap<String, Submitter>);

impl Submitters {
    /// None.
    pub fn new() -> Self {
        Self::default()
    }

    /// The submitters the sites' `[sites.submit]` tables name.
    pub fn from_config(sites: &[SiteConfig]) -> Result<Self, SubmitError> {
        let mut map = HashMap::new();
        for site in sites {
            if let Some(submit) = &site.submit {
                map.insert(site.name.clone(), Submitter::from_config(submit)?);
            }
        }
        Ok(Self(map))
    }

    /// Adds (or replaces) a site's submitter.
    pub fn insert(&mut self, site: impl Into<String>, submitter: Submitter) {
        self.0.insert(site.into(), submitter);
    }

    /// The submitter of a site.
    pub fn get(&self, site: &str) -> Option<&Submitter> {
        self.0.get(site)
    }
}

/// A new public id: a prefix and 64 random bits in hex.
pub fn new_uid(prefix: &str) -> String {
    let mut bytes = [0u8; 8];
    rand::fill(&mut bytes);
    format!("{prefix}{}", to_hex(&bytes))
}

/// The digest (SHA-256, hex) of a request's parameters as read, for telling whether a
/// retry under an `Idempotency-Key` asks for the same: JSON objects serialise with their
/// keys sorted, so equal parameters give equal digests however the client wrote them.
pub fn request_digest(parameters: &serde_json::Value) -> String {
    to_hex(&hash(&parameters.to_string()))
}

/// The VARQ request a stored reservation stands for.
pub fn request_of(r: &Reservation) -> VarqRequest {
    VarqRequest {
        nodes: r.request.nodes.clamp(1, i64::from(u32::MAX)) as u32,
        walltime_s: r.request.walltime_s.max(1) as u64,
        start_at: r.request.start_at,
        min_probability: r.request.min_probability,
        confidence: r.request.confidence,
        mode: r.request.mode,
        step_s: r.request.step_s.max(1) as u64,
    }
}

/// A plan as the store keeps it.
pub fn plan_fields(p: &VarqPlan) -> PlanFields {
    PlanFields {
        submit_at: p.submit_at,
        advertised_walltime_s: p.advertised_walltime_s.min(i64::MAX as u64) as i64,
        probability: p.probability,
    }
}

/// Why a reservation operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ReservationError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The reservation is already final.
    #[error("the reservation is already {0}")]
    Final(ReservationState),
    /// The remote scheduler failed.
    #[error("the scheduler: {0}")]
    Remote(#[from] SubmitError),
}

/// Final states in which a remote job may still run: after a success (the command), a
/// failure (a job kept, `on_failure: keep`) or a cancel the scheduler did not carry out.
fn may_leave_a_job(state: ReservationState) -> bool {
    matches!(
        state,
        ReservationState::Succeeded | ReservationState::Failed | ReservationState::Cancelled
    )
}

/// Cancels a reservation (for its owner, or as a redundant co-allocation request): the state first (so an executor that is
/// submitting it at this moment cancels what it submitted), then every remote job that
/// carries its id. A reservation that already succeeded or failed keeps its outcome, but
/// its job (running the user's command, or kept after a failure) is cancelled. Returns
/// the reservation as it is afterwards.
pub async fn cancel<S: Store>(
    store: &S,
    submitters: &Submitters,
    r: &Reservation,
    now: i64,
    reason: &str,
) -> Result<Reservation, ReservationError> {
    let mut current = r.clone();
    // A few attempts: the executor may move it (planned → submitted) meanwhile.
    for _ in 0..5 {
        // A reservation that succeeded or failed keeps its outcome; cancelling it stops
        // the job. One already cancelled stays so, and its remote job is looked for
        // again (a first cancel may have found the scheduler unreachable).
        if may_leave_a_job(current.state) {
            break;
        }
        if current.state.is_final() {
            return Err(ReservationError::Final(current.state));
        }
        let t = Transition::new(current.state, ReservationState::Cancelled, now, reason);
        if store.transition_reservation(current.id, &t).await? {
            break;
        }
        current = store
            .reservation(&current.request.uid)
            .await?
            .ok_or_else(|| StoreError::Database("the reservation vanished".into()))?;
    }
    let after = store
        .reservation(&current.request.uid)
        .await?
        .ok_or_else(|| StoreError::Database("the reservation vanished".into()))?;
    if !may_leave_a_job(after.state) {
        return Err(ReservationError::Final(after.state));
    }
    cancel_remote(store, submitters, &after, now).await?;
    Ok(after)
}

/// Cancels every live remote job of `r`: the recorded one, and any an interrupted
/// submission left unrecorded. Marked beforehand as still to be done, and cleared once
/// done, so that when the scheduler cannot be reached the executor asks again on its
/// next passes ([`Executor::tick`]) instead of leaving a job to hold its nodes.
pub async fn cancel_remote<S: Store>(
    store: &S,
    submitters: &Submitters,
    r: &Reservation,
    now: i64,
) -> Result<(), ReservationError> {
    let Some(sub) = submitters.get(&r.request.site) else {
        // No submitter (any more): nothing this service submitted there can be reached.
        return Ok(());
    };
    if r.remote_job_id.is_none() && r.submit_attempted_at.is_none() {
        // Never submitted: no remote job can carry its id. (Asking anyway left a
        // reservation cancelled while planned at an unreachable scheduler retried, and
        // logged, for ever.) A flag left by an earlier version is cleared.
        store.set_remote_cleanup(r.id, false).await?;
        return Ok(());
    }
    store.set_remote_cleanup(r.id, true).await?;
    let mut live: Vec<String> = sub
        .find(&r.request.uid)
        .await?
        .into_iter()
        .filter(|j| j.ended_at.is_none())
        .map(|j| j.job_id)
        .collect();
    if let Some(id) = &r.remote_job_id
        && !live.contains(id)
        && sub.status(id).await?.is_some_and(|j| j.ended_at.is_none())
    {
        live.push(id.clone());
    }
    for id in live {
        sub.cancel(&id).await?;
        store
            .note_reservation(r.id, now, &format!("remote job {id} cancelled"))
            .await?;
    }
    store.set_remote_cleanup(r.id, false).await?;
    Ok(())
}

/// What one executor tick did (for logs and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Reservations re-planned.
    pub replanned: usize,
    /// Placeholder jobs submitted.
    pub submitted: usize,
    /// Remote jobs found already submitted (after a crash) and recorded.
    pub adopted: usize,
    /// State changes from following remote jobs.
    pub advanced: usize,
    /// Errors met (logged; the tick went on).
    pub errors: usize,
}

/// A point on the submission path where an executor can be made to stop for good, so
/// that a crash test kills the process exactly there (`QBETS_HALT_AT`, read by
/// `qbets serve`): the process stays up, holding its lease, until it is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaltPoint {
    /// After the lease is taken, before the scheduler is asked anything.
    Claimed,
    /// After the scheduler accepted the job, before the store records it.
    Submitted,
}

impl std::str::FromStr for HaltPoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "claimed" => Ok(HaltPoint::Claimed),
            "submitted" => Ok(HaltPoint::Submitted),
            other => Err(format!(
                "{other:?} is not a halt point (claimed or submitted)"
            )),
        }
    }
}

impl std::fmt::Display for HaltPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HaltPoint::Claimed => "claimed",
            HaltPoint::Submitted => "submitted",
        })
    }
}

/// The executor: one per service replica.
pub struct Executor<S: Store> {
    store: S,
    submitters: Arc<Submitters>,
    clock: Arc<dyn Clock>,
    id: String,
    predictors: Option<Arc<Predictors>>,
    lease_s: i64,
    halt_at: Option<HaltPoint>,
    /// The sites whose reservations this executor runs.
    scope: SiteScope,
    /// When remote cleanups are retried next ([`Executor::retry_remote_cleanups`]).
    next_cleanup: AtomicI64,
}

/// Seconds between retries of remote jobs still to cancel.
pub const CLEANUP_EVERY_S: i64 = 60;

impl<S: Store> Executor<S> {
    /// An executor named `id` (unique per replica: it holds leases under that name).
    pub fn new(
        store: S,
        submitters: Arc<Submitters>,
        clock: Arc<dyn Clock>,
        id: impl Into<String>,
    ) -> Self {
        Self {
            store,
            submitters,
            clock,
            id: id.into(),
            predictors: None,
            lease_s: LEASE_S,
            halt_at: None,
            scope: SiteScope::All,
            next_cleanup: AtomicI64::new(i64::MIN),
        }
    }

    /// Claims last `secs` seconds instead of [`LEASE_S`] (`[reservations] lease_s`).
    pub fn with_lease_s(mut self, secs: u64) -> Self {
        self.lease_s = i64::try_from(secs).unwrap_or(i64::MAX).max(1);
        self
    }

    /// Runs only the reservations of the sites in `scope` (the demo's run by its own
    /// clock, every other site's by the real one).
    pub fn with_scope(mut self, scope: SiteScope) -> Self {
        self.scope = scope;
        self
    }

    /// Stops this executor for good at `point` (for crash tests; see [`HaltPoint`]).
    pub fn with_halt_at(mut self, point: Option<HaltPoint>) -> Self {
        self.halt_at = point;
        self
    }

    /// Stops here for good when told to (the process is then killed by a test).
    async fn halt_if(&self, point: HaltPoint, r: &Reservation) {
        if self.halt_at == Some(point) {
            tracing::warn!(executor = %self.id, reservation = %r.request.uid, %point, "halted");
            eprintln!(
                "qbets: executor halted at {point} (reservation {})",
                r.request.uid
            );
            std::future::pending::<()>().await;
        }
    }

    /// Re-plans with the service's live predictors (otherwise with predictors built
    /// from the store at each re-plan).
    pub fn with_predictors(mut self, predictors: Arc<Predictors>) -> Self {
        self.predictors = Some(predictors);
        self
    }

    /// This executor's lease name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The earliest planned submission of this executor's sites after `now`, if any:
    /// where a driver that moves its clock in steps (the demo) stops so that the
    /// submission is made at its time.
    pub async fn next_submission(&self, now: i64) -> Result<Option<i64>, StoreError> {
        Ok(self
            .store
            .active_reservations()
            .await?
            .iter()
            .filter(|r| {
                r.state == ReservationState::Planned && self.scope.includes(&r.request.site)
            })
            .filter_map(|r| r.plan.map(|p| p.submit_at))
            .filter(|&t| t > now)
            .min())
    }

    /// Runs ticks every `interval` until `shutdown` completes.
    pub async fn run(
        self,
        interval: Duration,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let mut every = super::Every::new(interval, shutdown);
        while every.next().await {
            match self.tick().await {
                Ok(report) if report != TickReport::default() => {
                    tracing::info!(executor = %self.id, ?report, "reservations tick");
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(executor = %self.id, error = %e, "reservations tick failed")
                }
            }
        }
    }

    /// One pass: submit what is due, then re-plan what waits and follow what was
    /// submitted. Submissions come first: following asks each remote job's status, and
    /// a slow scheduler at one site must not delay what is due at every site (a late
    /// submission shortens the lead the plan's probability was computed for).
    pub async fn tick(&self) -> Result<TickReport, StoreError> {
        let mut report = TickReport::default();
        self.submit_due(&mut report).await?;
        let now = self.clock.now();
        for r in self.store.active_reservations().await? {
            if !self.scope.includes(&r.request.site) {
                continue;
            }
            let result = match r.state {
                ReservationState::Planned => self.replan(&r, now, &mut report).await,
                ReservationState::Submitted | ReservationState::Started => {
                    self.follow(&r, now, &mut report).await
                }
                _ => Ok(()),
            };
            if let Err(e) = result {
                report.errors += 1;
                tracing::warn!(reservation = %r.request.uid, error = %e, "reservation step failed");
            }
        }
        self.retry_remote_cleanups(&mut report).await?;
        Ok(report)
    }

    /// Remote jobs a cancel could not reach before are asked again, at most once every
    /// [`CLEANUP_EVERY_S`] (a scheduler that stays down is not asked, nor logged about,
    /// every pass), last in the pass. Sites without a submit target here are left for a
    /// replica that has one.
    async fn retry_remote_cleanups(&self, report: &mut TickReport) -> Result<(), StoreError> {
        let now = self.clock.now();
        if now < self.next_cleanup.load(Ordering::Acquire) {
            return Ok(());
        }
        self.next_cleanup
            .store(now.saturating_add(CLEANUP_EVERY_S), Ordering::Release);
        for r in self.store.remote_cleanups().await? {
            if !self.scope.includes(&r.request.site) {
                continue;
            }
            if let Err(e) = cancel_remote(&self.store, &self.submitters, &r, now).await {
                report.errors += 1;
                tracing::warn!(reservation = %r.request.uid, error = %e, "remote job still to cancel; retried later");
            }
        }
        Ok(())
    }

    /// Claims and submits the reservations due, one claim per submission, each at the
    /// clock's time then: a submission may take a while, and a lease dated from the
    /// start of the pass could run out before its submission did (another replica
    /// would then take it over and submit the job again).
    async fn submit_due(&self, report: &mut TickReport) -> Result<(), StoreError> {
        for _ in 0..CLAIM_BATCH {
            let now = self.clock.now();
            let claimed = self
                .store
                .claim_reservations(
                    now,
                    &self.id,
                    now.saturating_add(self.lease_s),
                    1,
                    &self.scope,
                )
                .await?;
            let Some(r) = claimed.into_iter().next() else {
                break;
            };
            if let Err(e) = self.submit(&r, now, report).await {
                report.errors += 1;
                tracing::warn!(reservation = %r.request.uid, error = %e, "submission failed");
                // Give the lease back so the next tick (of any replica) retries.
                self.store.release_lease(r.id, &self.id).await?;
            }
        }
        Ok(())
    }

    /// Re-plans a waiting reservation once per step (`varq.md`: every Δ).
    async fn replan(
        &self,
        r: &Reservation,
        now: i64,
        report: &mut TickReport,
    ) -> Result<(), ReservationError> {
        let Some(plan) = r.plan else { return Ok(()) };
        if plan.submit_at <= now
            || now - r.planned_at < r.request.step_s
            || now >= r.request.start_at
        {
            return Ok(());
        }
        let Some(site) = self.store.site(&r.request.site).await? else {
            return Ok(());
        };
        let Some(queue) = self.store.queue(site.id, &r.request.queue).await? else {
            return Ok(());
        };
        let oracle =
            oracle_for(&self.store, self.predictors.as_deref(), &site, &queue, now).await?;
        let req = request_of(r);
        let submit_at = plan.submit_at;
        // Up to `varq::MAX_POINTS` oracle calls: off the runtime, as the API's plans.
        let replanned =
            super::planning::compute(move || varq::replan(&req, submit_at, now, &oracle))
                .await
                .ok_or_else(|| StoreError::Database("the planner failed".into()))?;
        let (plan, at_risk, event) = match replanned {
            Replan::Keep { probability } => (
                PlanFields {
                    probability,
                    ..plan
                },
                false,
                r.at_risk
                    .then(|| "the plan meets the probability again".to_string()),
            ),
            Replan::Move(p) => (
                plan_fields(&p),
                false,
                Some(format!(
                    "re-planned: submit at {} (p = {:.3})",
                    super::format_unix(p.submit_at),
                    p.probability
                )),
            ),
            Replan::AtRisk(best) => {
                let best = best.map(|p| plan_fields(&p)).unwrap_or(plan);
                let event = (!r.at_risk || best.submit_at != plan.submit_at).then(|| {
                    format!(
                        "at risk: no submission time meets p ≥ {}; best p = {:.3} at {}",
                        r.request.min_probability,
                        best.probability,
                        super::format_unix(best.submit_at)
                    )
                });
                (best, true, event)
            }
        };
        let changed = self
            .store
            .replan_reservation(
                r.id,
                &Replanned {
                    plan,
                    at_risk,
                    at: now,
                    event,
                },
            )
            .await?;
        if changed {
            report.replanned += 1;
        }
        Ok(())
    }

    /// Submits a claimed reservation — unless its job is already at the scheduler.
    async fn submit(
        &self,
        r: &Reservation,
        now: i64,
        report: &mut TickReport,
    ) -> Result<(), ReservationError> {
        let leased = |to: ReservationState, reason: String| Transition {
            lease_owner: Some(self.id.clone()),
            ..Transition::new(ReservationState::Planned, to, now, reason)
        };
        self.halt_if(HaltPoint::Claimed, r).await;
        let Some(sub) = self.submitters.get(&r.request.site) else {
            self.store
                .transition_reservation(
                    r.id,
                    &leased(
                        ReservationState::Error,
                        format!("site {:?} has no submit target configured", r.request.site),
                    ),
                )
                .await?;
            return Ok(());
        };
        // Look before submitting: a job carrying this id means an earlier attempt
        // submitted it and died before recording it.
        let found = sub.find(&r.request.uid).await?;
        if let Some(job) = found
            .iter()
            .find(|j| j.ended_at.is_none())
            .or(found.first())
        {
            let t = Transition {
                remote_job_id: Some(job.job_id.clone()),
                submitted_at: Some(now),
                ..leased(
                    ReservationState::Submitted,
                    format!(
                        "remote job {} found already submitted; recorded, not submitted again",
                        job.job_id
                    ),
                )
            };
            if self.store.transition_reservation(r.id, &t).await? {
                report.adopted += 1;
            }
            return Ok(());
        }
        if now >= r.request.start_at {
            self.store
                .transition_reservation(
                    r.id,
                    &leased(
                        ReservationState::Failed,
                        "start_at passed before the reservation could be submitted".into(),
                    ),
                )
                .await?;
            return Ok(());
        }
        let Some(plan) = r.plan else {
            return Ok(());
        };
        let request = RemoteRequest {
            reservation: r.request.uid.clone(),
            queue: r.request.queue.clone(),
            nodes: r.request.nodes.clamp(1, i64::from(u32::MAX)) as u32,
            time_limit_s: plan.advertised_walltime_s.max(1) as u64,
            start_at: r.request.start_at,
            command: r.request.command.clone(),
            mode: r.request.run_mode,
        };
        // Kept before the scheduler is asked: from here on a remote job may exist even
        // if this process dies before it records one, so a cancel must look for it.
        self.store.mark_submit_attempt(r.id, now).await?;
        let job_id = match sub.submit(&request).await {
            Ok(id) => id,
            Err(e) if e.is_transient() => return Err(e.into()),
            Err(e) => {
                self.store
                    .transition_reservation(
                        r.id,
                        &leased(
                            ReservationState::Error,
                            format!("the scheduler refused the job: {e}"),
                        ),
                    )
                    .await?;
                return Ok(());
            }
        };
        report.submitted += 1;
        tracing::info!(reservation = %r.request.uid, job_id = %job_id, "submitted");
        self.halt_if(HaltPoint::Submitted, r).await;
        let t = Transition {
            remote_job_id: Some(job_id.clone()),
            submitted_at: Some(now),
            ..leased(
                ReservationState::Submitted,
                format!(
                    "submitted remote job {job_id} with walltime {} s (p = {:.3})",
                    plan.advertised_walltime_s, plan.probability
                ),
            )
        };
        if !self.store.transition_reservation(r.id, &t).await? {
            // Cancelled while we submitted, or the lease lost to another executor that
            // recorded a job of its own: this one must not stay. (An executor that took
            // the lease over and has recorded nothing yet may be adopting this very
            // job, found by the reservation's id: it stays.)
            match self.store.reservation(&r.request.uid).await? {
                // Every job carrying the id goes, retried by later passes if the
                // scheduler cannot be reached now (the cancel's own search may have run
                // before this job existed).
                Some(x) if x.state == ReservationState::Cancelled => {
                    cancel_remote(&self.store, &self.submitters, &x, now).await?;
                }
                // Only this one: the other executor's job is the reservation's.
                Some(x)
                    if x.remote_job_id
                        .as_deref()
                        .is_some_and(|other| other != job_id.as_str()) =>
                {
                    sub.cancel(&job_id).await?;
                    let note = format!(
                        "remote job {job_id} cancelled: another executor took the \
                         reservation over while it was submitted"
                    );
                    self.store.note_reservation(x.id, now, &note).await?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Follows a submitted or started reservation's remote job.
    async fn follow(
        &self,
        r: &Reservation,
        now: i64,
        report: &mut TickReport,
    ) -> Result<(), ReservationError> {
        let Some(job_id) = r.remote_job_id.as_deref() else {
            return Ok(());
        };
        let Some(sub) = self.submitters.get(&r.request.site) else {
            // This replica's configuration does not name the site's scheduler. Another
            // replica's may (a configuration being rolled out): it decides the outcome
            // by start_at. Once start_at and a lease have passed undecided, no replica
            // follows the job, and the reservation would otherwise wait for ever.
            if now < r.request.start_at.saturating_add(self.lease_s) {
                return Ok(());
            }
            let t = Transition::new(
                r.state,
                ReservationState::Error,
                now,
                format!(
                    "site {} has no submit target any more: remote job {job_id} cannot be followed",
                    r.request.site
                ),
            );
            if self.store.transition_reservation(r.id, &t).await? {
                report.advanced += 1;
            }
            return Ok(());
        };
        let status: Option<RemoteStatus> = sub.status(job_id).await?;
        let remote = RemoteJob {
            // The current run's start; for a job the scheduler forgot, the one recorded.
            started_at: match &status {
                Some(s) => s.started_at,
                None => r.started_at,
            },
            // A job the scheduler forgot has ended, when is unknown: at the latest now.
            ended_at: match &status {
                Some(s) => s.ended_at,
                None => Some(now),
            },
        };
        let mut state = r.state;
        let advance =
            |state| lifecycle::advance(state, r.request.run_mode, r.request.start_at, remote, now);
        // Whether a failed reservation's live job stays (`on_failure: keep`), decided
        // when it fails.
        let mut keep = false;
        while let Some(next) = advance(state) {
            let reason = match next {
                ReservationState::Started => format!(
                    "remote job {job_id} started at {}",
                    super::format_unix(remote.started_at.unwrap_or(now))
                ),
                ReservationState::Succeeded => match remote.ended_at {
                    Some(e) if e < r.request.start_at => format!(
                        "remote job {job_id} started in time and ended at {}, {} (best effort: its command ran at once)",
                        super::format_unix(e),
                        status
                            .as_ref()
                            .map_or("state unknown", |s| s.state.as_str())
                    ),
                    _ => format!("remote job {job_id} held its nodes at start_at"),
                },
                _ => {
                    let why = match remote.started_at {
                        Some(s) if s > r.request.start_at => format!(
                            "remote job {job_id} started late, at {}",
                            super::format_unix(s)
                        ),
                        Some(_) => format!("remote job {job_id} ended before start_at"),
                        None => format!("start_at passed and remote job {job_id} had not started"),
                    };
                    keep = r.request.on_failure == OnFailure::Keep
                        && status.as_ref().is_some_and(|s| s.ended_at.is_none());
                    // A co-allocation's request whose reservation another request holds
                    // would run the same command twice: not kept.
                    if keep && self.sibling_in_time(r).await?.is_some() {
                        keep = false;
                        format!(
                            "{why}; not kept: another request of the same reservation started in time"
                        )
                    } else if keep {
                        format!("{why}; kept, as asked (on_failure: keep)")
                    } else {
                        why
                    }
                }
            };
            let t = Transition {
                started_at: remote.started_at,
                ended_at: remote.ended_at,
                ..Transition::new(state, next, now, reason)
            };
            if !self.store.transition_reservation(r.id, &t).await? {
                break;
            }
            report.advanced += 1;
            // Its siblings are redundant once it started in time, unless the same pass
            // finds it failed after all (it ended before start_at).
            if next == ReservationState::Started
                && advance(next) != Some(ReservationState::Failed)
                && let Some((coalloc, index)) = r.coallocation
            {
                self.cancel_redundant(r, coalloc, index, now).await?;
            }
            if next == ReservationState::Failed
                && !keep
                && status.as_ref().is_some_and(|s| s.ended_at.is_none())
            {
                cancel_remote(&self.store, &self.submitters, r, now).await?;
            }
            state = next;
        }
        Ok(())
    }

    /// The request of the same co-allocation reservation as `r` that started in time
    /// (started or succeeded), if there is one.
    async fn sibling_in_time(
        &self,
        r: &Reservation,
    ) -> Result<Option<Reservation>, ReservationError> {
        let Some((coalloc, index)) = r.coallocation else {
            return Ok(None);
        };
        Ok(self
            .store
            .coallocation_members(coalloc)
            .await?
            .into_iter()
            .find(|o| {
                o.id != r.id
                    && o.coallocation.map(|c| c.1) == Some(index)
                    && matches!(
                        o.state,
                        ReservationState::Started | ReservationState::Succeeded
                    )
            }))
    }

    /// Once one request of a co-allocation's reservation has started in time, the
    /// others of that reservation are cancelled (`varq.md` §CO-VARQ).
    async fn cancel_redundant(
        &self,
        started: &Reservation,
        coalloc: i64,
        index: i64,
        now: i64,
    ) -> Result<(), ReservationError> {
        let mut first_error = None;
        for other in self.store.coallocation_members(coalloc).await? {
            // A request that failed may have kept its job (`on_failure: keep`): that job
            // is redundant too.
            let kept = other.state == ReservationState::Failed
                && other.request.on_failure == OnFailure::Keep;
            if other.id == started.id
                || other.coallocation.map(|c| c.1) != Some(index)
                || (other.state.is_final() && !kept)
            {
                continue;
            }
            let reason = format!(
                "redundant: request {} of the same reservation started in time",
                started.request.uid
            );
            // One sibling the scheduler cannot cancel now (it is marked to be retried)
            // does not keep the others running.
            match cancel(&self.store, &self.submitters, &other, now, &reason).await {
                Ok(_) | Err(ReservationError::Final(_)) => {}
                Err(e) => {
                    tracing::warn!(reservation = %other.request.uid, error = %e, "cannot cancel a redundant request now; retried");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
