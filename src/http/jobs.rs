//! One job's own answer (`GET /v1/sites/{site}/jobs/{job_id}`): what the scheduler
//! reported of it, the bound it was given at submission and — while it waits — a bound
//! on the rest of its wait given how long it has waited and its own user's jobs still
//! ahead of it, and the probability of starting by a deadline. The job's user is used
//! to count those jobs and never shown.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::ReadAccess;
use super::bounds::{AnswerStatus, ClusterView, Deadline, ask, cluster_view, deadline};
use super::error::{ApiError, ApiResult, Problem};
use super::params::{ApiPath, ApiQuery, Fields, format_time, format_walltime, probability};
use crate::engine::JobShape;
use crate::service::AppState;
use crate::store::{Job, JobState, Store};

/// The routes of this resource.
pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new().route("/v1/sites/{site}/jobs/{job_id}", get(get_job::<S>))
}

/// Parameters of `…/jobs/{job_id}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct JobQuery {
    /// For a pending job: the deadline to give the probability of starting by, a
    /// duration after `as_of` (seconds or `[D-]HH:MM:SS`) or an RFC 3339 time.
    /// (The pattern, written for durations, leaves the RFC 3339 form out.)
    #[param(value_type = Option<String>, example = "02:00:00", pattern = r"^([1-9][0-9]{0,6}|(0?[1-9]|[1-9][0-9]):[0-5][0-9]:[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:00:(0[1-9]|[1-5][0-9])|(0?[1-9]|[1-5][0-9]):[0-5][0-9]|0{1,2}:(0[1-9]|[1-5][0-9])|([1-9]|[1-9][0-9]|[12][0-9]{2}|3[0-5][0-9]|36[0-5])-([01]?[0-9]|2[0-3])(:[0-5][0-9]){0,2})$")]
    pub deadline: Option<String>,
    /// The quantile bounded, strictly between 0 and 1 (default 0.95).
    #[param(value_type = Option<f64>, exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub quantile: Option<String>,
    /// The confidence, strictly between 0 and 1 (default 0.95).
    #[param(value_type = Option<f64>, exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub confidence: Option<String>,
}

/// A pending job's outlook.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PendingView {
    /// `ok` when `bound_s` is given.
    pub status: AnswerStatus,
    /// How long it has waited so far, seconds.
    pub waited_s: u64,
    /// With probability `confidence`, it starts within this many more seconds with
    /// probability `quantile` (from the past jobs of its cluster that had waited at
    /// least as long; its own user's jobs still ahead of it count).
    pub bound_s: Option<u64>,
    /// The same as `[D-]HH:MM:SS`.
    pub bound: Option<String>,
    /// The quantile bounded.
    pub quantile: f64,
    /// The confidence.
    pub confidence: f64,
    /// The deadline asked, if any.
    #[schema(format = DateTime)]
    pub deadline: Option<String>,
    /// With probability `confidence`, it starts by `deadline` with at least this
    /// probability.
    pub probability: Option<f64>,
    /// Its own user's jobs pending ahead of it in the queue (0 where the site's sources
    /// do not name users).
    pub own_ahead: u64,
    /// Past jobs of its cluster that had waited at least as long.
    pub history_size: usize,
    /// Its cluster (null when the queue may be down).
    pub cluster: Option<ClusterView>,
}

/// One job and what qbets says of it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    /// The site's name.
    pub site: String,
    /// The scheduler's job id.
    pub job_id: String,
    /// The queue's name.
    pub queue: String,
    /// `pending`, `running`, `completed`, `failed` or `cancelled`.
    pub state: String,
    #[schema(format = DateTime)]
    pub submit: String,
    #[schema(format = DateTime)]
    pub start: Option<String>,
    #[schema(format = DateTime)]
    pub end: Option<String>,
    /// Requested nodes, when known.
    pub nodes: Option<i64>,
    /// Requested walltime, seconds, when known.
    pub walltime_s: Option<i64>,
    /// Its wait, once started.
    pub wait_s: Option<i64>,
    /// The 0.95/0.95 bound it was given at submission, seconds (null: none given, or
    /// not yet).
    pub bound_at_submission_s: Option<i64>,
    /// Why that bound is or is not there (`ok`, `insufficient_history`, `maybe_down`).
    pub bound_at_submission_status: Option<String>,
    /// Once started with a bound: whether it started within it.
    pub within_bound: Option<bool>,
    /// While it waits: its outlook (null otherwise).
    pub pending: Option<PendingView>,
    /// The instant the answer speaks for.
    #[schema(format = DateTime)]
    pub as_of: String,
}

/// One job: what the scheduler reported, its bound at submission and, while it waits,
/// a bound on the rest of its wait and the probability of starting by a deadline.
#[utoipa::path(
    get, path = "/v1/sites/{site}/jobs/{job_id}", tag = "predictions",
    operation_id = "get_job",
    params(
        ("site" = String, Path, description = "Site name"),
        ("job_id" = String, Path, description = "The scheduler's job id"),
        JobQuery
    ),
    responses(
        (status = 200, description = "The job and its outlook", body = JobView),
        (status = 400, description = "A parameter is invalid", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site or job", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_job<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiPath((site, job_id)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<JobQuery>,
) -> ApiResult<axum::Json<JobView>> {
    let mut fields = Fields::new();
    let quantile = fields.opt("quantile", q.quantile.as_deref(), probability);
    let confidence = fields.opt("confidence", q.confidence.as_deref(), probability);
    let deadline = fields.opt("deadline", q.deadline.as_deref(), deadline);
    fields.finish()?;
    let (quantile, confidence) = (quantile.unwrap_or(0.95), confidence.unwrap_or(0.95));
    let s = state
        .store
        .site(&site)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no site named {site:?}")))?;
    let job = state
        .store
        .job(s.id, &job_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("site {site:?} has no job {job_id:?}")))?;
    let queue = state
        .store
        .queue_stats(s.id)
        .await?
        .into_iter()
        .find(|q| q.queue.id == job.queue_id)
        .map(|q| q.queue.name)
        .ok_or_else(|| ApiError::NotFound(format!("job {job_id:?} has no queue")))?;
    let waiting = job.start_time.is_none() && job.state == JobState::Pending;
    let own_ahead = if waiting {
        own_ahead(&job, &state.store.open_jobs(s.id).await?)
    } else {
        0
    };
    let shape = JobShape {
        nodes: job.nodes.map_or(0, |n| n as u64),
        walltime_s: job.walltime_s.map_or(0, |w| w as u64),
    };
    let (pending, at) = ask(&state, &site, &queue, || {
        state.predictors.with_predictor(&site, &queue, |p, at| {
            if !waiting {
                return Ok((None, at));
            }
            let deadline_s = match deadline {
                None => None,
                Some(Deadline::In(d)) => Some(d as u64),
                Some(Deadline::At(t)) if t > at => Some((t - at) as u64),
                Some(Deadline::At(_)) => {
                    return Err(ApiError::field(
                        "deadline",
                        format!(
                            "is not after {} (the instant the site speaks for)",
                            format_time(at)
                        ),
                    ));
                }
            };
            let a = p.remaining(
                at,
                job.submit_time,
                shape,
                p.view_behind(own_ahead),
                deadline_s,
                (quantile, confidence),
            );
            Ok((
                Some(PendingView {
                    status: a.status.into(),
                    waited_s: a.elapsed_s,
                    bound: a
                        .bound_s
                        .map(|b| format_walltime(i64::try_from(b).unwrap_or(i64::MAX))),
                    bound_s: a.bound_s,
                    quantile,
                    confidence,
                    deadline: deadline_s.map(|d| format_time(at.saturating_add(d as i64))),
                    probability: a.probability,
                    own_ahead,
                    history_size: a.history,
                    cluster: a.cluster.map(cluster_view),
                }),
                at,
            ))
        })
    })
    .await??;
    let wait_s = job.wait_s();
    Ok(axum::Json(JobView {
        site,
        queue,
        state: job.state.as_str().to_string(),
        submit: format_time(job.submit_time),
        start: job.start_time.map(format_time),
        end: job.end_time.map(format_time),
        nodes: job.nodes,
        walltime_s: job.walltime_s,
        wait_s,
        within_bound: match (wait_s, job.bound_s) {
            (Some(w), Some(b)) => Some(w <= b),
            _ => None,
        },
        bound_at_submission_s: job.bound_s,
        bound_at_submission_status: job.bound_status.clone(),
        pending,
        as_of: format_time(at),
        job_id: job.job_id,
    }))
}

/// The job's own user's jobs pending ahead of it in its queue (submitted before it,
/// ties by store id); 0 without a user.
fn own_ahead(job: &Job, open: &[Job]) -> u64 {
    let Some(user) = job.user_key.as_deref() else {
        return 0;
    };
    open.iter()
        .filter(|o| {
            o.queue_id == job.queue_id
                && o.start_time.is_none()
                && o.state == JobState::Pending
                && o.user_key.as_deref() == Some(user)
                && (o.submit_time, o.id) < (job.submit_time, job.id)
        })
        .count() as u64
}
