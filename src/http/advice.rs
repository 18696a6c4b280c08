//! "Which shape waits less" (`POST /v1/advice`): candidate shapes of one job — a list,
//! or a moldable job's sizes with walltimes from a speedup model — each asked of the
//! queues it may run on through the same code as `GET …/bound` (and, with a deadline,
//! `GET …/deadline`), ranked by the bound on the wait plus the walltime
//! ([`crate::service::advice`]).

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::ReadAccess;
use super::bounds::{
    AnswerStatus, DEFAULT_LEVEL, Deadline, LimitView, MAX_BATCH, bound_answer, deadline,
    deadline_answer,
};
use super::error::{ApiError, ApiResult, FieldError, Problem};
use super::params::{ApiJson, MAX_DURATION_S, format_time, format_walltime, object_only};
use super::sites::DurationIn;
use crate::engine::JobShape;
use crate::service::AppState;
use crate::service::advice::{self, MAX_CANDIDATES, Moldable, RankKey};
use crate::sim::mold::Speedup;
use crate::store::Store;

/// The routes of this resource.
pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new().route("/v1/advice", post(post_advice::<S>))
}

/// One candidate shape.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct ShapeIn {
    /// Nodes: at least 1, at most 100000000.
    #[schema(minimum = 1, maximum = 100000000)]
    pub nodes: i64,
    /// Walltime: whole seconds or `[D-]HH:MM:SS` (1 s to 366 days).
    pub walltime: DurationIn,
    /// Only this site's queues (default: the request's `site`, or every site).
    pub site: Option<String>,
    /// Only queues of this name (default: the request's `queue`, or every queue).
    pub queue: Option<String>,
}

/// A speedup model (as the moldable-job simulator's, `src/sim/mold.rs`).
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum SpeedupIn {
    /// Barsanti & Sodan's piecewise-linear curve (efficiency 0.8, 0.65, 0.4 at
    /// `at`/2, `at`, 2·`at`).
    Simple,
    /// Downey's curve: maximum speedup `a` (at least 1) and scalability `sigma` (at
    /// least 0).
    Downey {
        /// Maximum speedup A.
        a: f64,
        /// σ.
        sigma: f64,
    },
}

/// A node range, both ends included.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct NodeRangeIn {
    /// Fewest nodes.
    pub min: i64,
    /// Most nodes.
    pub max: i64,
}

/// A moldable job: the candidates are every power of two in `nodes` plus its ends and
/// `at`, each with the run time the speedup model gives there.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct MoldableIn {
    /// The speedup model.
    pub speedup: SpeedupIn,
    /// The run time at `at` nodes: whole seconds or `[D-]HH:MM:SS`.
    pub runtime: DurationIn,
    /// The node count the run time is known at (N_opt), within `nodes`.
    pub at: i64,
    /// The node counts the job may take.
    pub nodes: NodeRangeIn,
}

/// Which shape waits less: `candidates` or `moldable` (one of them).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(example = json!({
    "candidates": [
        {"nodes": 4, "walltime": "01:00:00"},
        {"nodes": 16, "walltime": "00:20:00"}
    ],
    "deadline": "04:00:00"
}))]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct AdviceIn {
    /// 1 to 64 shapes (more: 422).
    #[schema(min_items = 1, max_items = 64)]
    pub candidates: Option<Vec<ShapeIn>>,
    /// A moldable job whose shapes are derived.
    pub moldable: Option<MoldableIn>,
    /// Only this site's queues, for candidates that name none.
    pub site: Option<String>,
    /// Only queues of this name, for candidates that name none.
    pub queue: Option<String>,
    /// The quantile bounded, strictly between 0 and 1 (default 0.95).
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub quantile: Option<f64>,
    /// The confidence, strictly between 0 and 1 (default 0.95).
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 1.0)]
    pub confidence: Option<f64>,
    /// When the job must have finished: a duration after each site's `as_of` (seconds
    /// or `[D-]HH:MM:SS`) or an RFC 3339 time. Each row then gives the probability of
    /// starting by the deadline less its walltime.
    pub deadline: Option<String>,
}

object_only!(ShapeIn, NodeRangeIn, MoldableIn, AdviceIn);

/// How the deadline's probability came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeadlineStatus {
    /// A probability is given.
    Ok,
    /// Too few waits for a probability at this confidence.
    InsufficientHistory,
    /// The queue may be down.
    MaybeDown,
    /// The shape exceeds the queue's limits.
    ExceedsLimits,
    /// The walltime alone runs past the deadline: the job cannot finish by it.
    TooLate,
}

impl From<AnswerStatus> for DeadlineStatus {
    fn from(s: AnswerStatus) -> Self {
        match s {
            AnswerStatus::Ok => Self::Ok,
            AnswerStatus::InsufficientHistory => Self::InsufficientHistory,
            AnswerStatus::MaybeDown => Self::MaybeDown,
            AnswerStatus::ExceedsLimits => Self::ExceedsLimits,
        }
    }
}

/// A row's chance of finishing by the deadline.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadlineAdvice {
    /// The latest start that still finishes by the deadline (the deadline less the
    /// walltime).
    #[schema(format = DateTime)]
    pub start_by: String,
    /// `ok` when `probability` is given.
    pub status: DeadlineStatus,
    /// With probability `confidence`, a job of this shape submitted at `as_of` starts by
    /// `start_by` with at least this probability (as `GET …/deadline` answers).
    pub probability: Option<f64>,
}

/// One candidate on one queue.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AdviceRow {
    /// 1 for the best; null for a row without a number.
    pub rank: Option<usize>,
    /// The site's name.
    pub site: String,
    /// The queue's name.
    pub queue: String,
    /// Nodes.
    pub nodes: i64,
    /// Walltime, seconds.
    pub walltime_s: i64,
    /// The same as `[D-]HH:MM:SS`.
    pub walltime: String,
    /// `ok` when `bound_s` is given (as `GET …/bound`).
    pub status: AnswerStatus,
    /// Why there is no number (null when there is one).
    pub reason: Option<String>,
    /// The limit the shape exceeds (`status` is `exceeds_limits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitView>,
    /// The bound on the wait, seconds (as `GET …/bound` answers).
    pub bound_s: Option<u64>,
    /// The same as `[D-]HH:MM:SS`.
    pub bound: Option<String>,
    /// `bound_s` plus `walltime_s`: what the rows are ranked by.
    pub finish_s: Option<u64>,
    /// Waits in the history the bound came from.
    pub history_size: usize,
    /// The deadline's probability (only with `deadline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DeadlineAdvice>,
    /// The instant the answer speaks for.
    #[schema(format = DateTime)]
    pub as_of: String,
}

/// The candidates ranked.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AdviceOut {
    /// The quantile bounded.
    pub quantile: f64,
    /// The confidence of bounds and probabilities.
    pub confidence: f64,
    /// Rows with a number, by `finish_s` ascending (ties: fewer nodes, then site and
    /// queue); then the rows without one, unranked, each with its status and reason.
    pub rows: Vec<AdviceRow>,
    /// How many rows have a rank.
    pub ranked: usize,
}

fn reason(status: AnswerStatus, limit: Option<&LimitView>) -> Option<String> {
    match status {
        AnswerStatus::Ok => None,
        AnswerStatus::InsufficientHistory => Some(
            "too few jobs like this have started there for a bound at these levels".into(),
        ),
        AnswerStatus::MaybeDown => Some(
            "the queue may be down (no job has started for unusually long); no bound until one does"
                .into(),
        ),
        AnswerStatus::ExceedsLimits => Some(limit.map_or_else(
            || "the shape asks for more than the queue allows".to_string(),
            |l| l.detail.clone(),
        )),
    }
}

fn level(field: &str, v: Option<f64>, errors: &mut Vec<FieldError>) -> f64 {
    match v {
        None => DEFAULT_LEVEL,
        Some(p) if p > 0.0 && p < 1.0 => p,
        Some(p) => {
            errors.push(FieldError::new(
                field,
                format!("must be strictly between 0 and 1, got {p}"),
            ));
            DEFAULT_LEVEL
        }
    }
}

/// A candidate checked: its shape and where to ask.
struct Shape {
    nodes: i64,
    walltime_s: i64,
    site: Option<String>,
    queue: Option<String>,
}

/// The candidates of the request, or every field at fault.
fn candidates(body: &AdviceIn) -> ApiResult<Vec<Shape>> {
    let mut errors = Vec::new();
    let shapes = match (&body.candidates, &body.moldable) {
        (Some(_), Some(_)) => {
            return Err(ApiError::field(
                "moldable",
                "give either candidates or moldable, not both",
            ));
        }
        (None, None) => {
            return Err(ApiError::field(
                "candidates",
                "is required (or give moldable)",
            ));
        }
        (Some(list), None) => {
            if list.is_empty() {
                return Err(ApiError::field(
                    "candidates",
                    "must list at least one shape",
                ));
            }
            if list.len() > MAX_CANDIDATES {
                return Err(ApiError::Unprocessable(vec![FieldError::new(
                    "candidates",
                    format!(
                        "at most {MAX_CANDIDATES} shapes per call, got {}",
                        list.len()
                    ),
                )]));
            }
            let mut shapes = Vec::with_capacity(list.len());
            for (i, c) in list.iter().enumerate() {
                let nodes = super::params::nodes(&c.nodes.to_string());
                if let Err(e) = &nodes {
                    errors.push(FieldError::new(format!("candidates[{i}].nodes"), e));
                }
                let walltime = c.walltime.seconds();
                if let Err(e) = &walltime {
                    errors.push(FieldError::new(format!("candidates[{i}].walltime"), e));
                }
                if let (Ok(nodes), Ok(walltime_s)) = (nodes, walltime) {
                    shapes.push(Shape {
                        nodes,
                        walltime_s,
                        site: c.site.clone().or_else(|| body.site.clone()),
                        queue: c.queue.clone().or_else(|| body.queue.clone()),
                    });
                }
            }
            shapes
        }
        (None, Some(m)) => {
            let field = |f: &str| format!("moldable.{f}");
            let runtime = m.runtime.seconds();
            if let Err(e) = &runtime {
                errors.push(FieldError::new(field("runtime"), e));
            }
            let count = |name: &str, v: i64, errors: &mut Vec<FieldError>| {
                super::params::nodes(&v.to_string())
                    .map(|n| n as u32)
                    .map_err(|e| errors.push(FieldError::new(field(name), e)))
                    .ok()
            };
            let at = count("at", m.at, &mut errors);
            let min = count("nodes.min", m.nodes.min, &mut errors);
            let max = count("nodes.max", m.nodes.max, &mut errors);
            let speedup = match m.speedup {
                SpeedupIn::Simple => Speedup::Simple,
                SpeedupIn::Downey { a, sigma } => Speedup::Downey { a, sigma },
            };
            let mut shapes = Vec::new();
            if let (Ok(runtime_s), Some(at), Some(min), Some(max)) = (runtime, at, min, max) {
                let mold = Moldable {
                    speedup,
                    runtime_s,
                    at,
                    min,
                    max,
                };
                match advice::derive(&mold) {
                    Ok(derived) => {
                        for (n, w) in derived {
                            if w > MAX_DURATION_S {
                                errors.push(FieldError::new(
                                    field("runtime"),
                                    format!(
                                        "gives {w} s at {n} nodes, more than the longest \
                                         walltime accepted ({MAX_DURATION_S} s)"
                                    ),
                                ));
                                break;
                            }
                            shapes.push(Shape {
                                nodes: i64::from(n),
                                walltime_s: w,
                                site: body.site.clone(),
                                queue: body.queue.clone(),
                            });
                        }
                    }
                    Err(e) => errors.push(FieldError::new(field(e.field), e.detail)),
                }
            }
            shapes
        }
    };
    if errors.is_empty() {
        Ok(shapes)
    } else {
        Err(ApiError::Invalid(errors))
    }
}

/// The queues a candidate is asked of: the one it names, or every queue the
/// predictors know that matches its site and queue (404 when a named site or queue
/// matches none).
async fn queues_for<S: Store>(state: &AppState<S>, c: &Shape) -> ApiResult<Vec<(String, String)>> {
    if let (Some(s), Some(q)) = (&c.site, &c.queue) {
        return Ok(vec![(s.clone(), q.clone())]);
    }
    let list: Vec<(String, String)> = state
        .predictors
        .queues()
        .into_iter()
        .filter(|(s, q)| {
            c.site.as_deref().is_none_or(|w| w == s) && c.queue.as_deref().is_none_or(|w| w == q)
        })
        .collect();
    if list.is_empty() {
        if let Some(site) = &c.site
            && state.store.site(site).await?.is_none()
        {
            return Err(ApiError::NotFound(format!("no site named {site:?}")));
        }
        if let Some(queue) = &c.queue {
            return Err(ApiError::NotFound(match &c.site {
                Some(site) => format!("site {site:?} has no queue {queue:?}"),
                None => format!("no site has a queue {queue:?}"),
            }));
        }
    }
    Ok(list)
}

/// Ranks candidate shapes of one job by the bound on their wait plus their walltime
/// (Cirne's SA with QBETS bounds): which shape, on which queue, finishes first.
#[utoipa::path(
    post, path = "/v1/advice", tag = "predictions", operation_id = "post_advice",
    request_body = AdviceIn,
    responses(
        (status = 200, description = "The candidates ranked, rows without a number last", body = AdviceOut),
        (status = 400, description = "A field is invalid (named as `candidates[3].nodes`)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such site or queue", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "More than 64 candidates, or more than 1,000 shape-and-queue pairs", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn post_advice<S: Store>(
    _caller: ReadAccess,
    State(state): State<AppState<S>>,
    ApiJson(body): ApiJson<AdviceIn>,
) -> ApiResult<axum::Json<AdviceOut>> {
    let mut errors = Vec::new();
    let quantile = level("quantile", body.quantile, &mut errors);
    let confidence = level("confidence", body.confidence, &mut errors);
    let when = match body.deadline.as_deref().map(deadline) {
        Some(Err(e)) => {
            errors.push(FieldError::new("deadline", e));
            None
        }
        Some(Ok(w)) => Some(w),
        None => None,
    };
    let shapes = match candidates(&body) {
        Ok(s) => s,
        Err(ApiError::Invalid(more)) => {
            errors.extend(more);
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    if !errors.is_empty() {
        return Err(ApiError::Invalid(errors));
    }
    // Each row is a bound (and with a deadline a second query): as many as a batch of
    // POST /v1/bounds may ask at most, counted before any is computed.
    let mut asked = Vec::with_capacity(shapes.len());
    for c in &shapes {
        asked.push(queues_for(&state, c).await?);
    }
    let total: usize = asked.iter().map(Vec::len).sum();
    if total > MAX_BATCH {
        return Err(ApiError::Unprocessable(vec![FieldError::new(
            "candidates",
            format!(
                "{total} shape-and-queue pairs to answer, at most {MAX_BATCH} per call: name a site or queue, or fewer shapes"
            ),
        )]));
    }
    let mut rows = Vec::new();
    for (c, queues) in shapes.iter().zip(asked) {
        let shape = JobShape {
            nodes: c.nodes as u64,
            walltime_s: c.walltime_s as u64,
        };
        for (site, queue) in queues {
            let b = bound_answer(&state, &site, &queue, shape, (quantile, confidence), 0).await?;
            let deadline = match when {
                None => None,
                Some(w) => Some(start_by(&state, &site, &queue, shape, w, confidence).await?),
            };
            rows.push(AdviceRow {
                rank: None,
                reason: reason(b.status, b.limit.as_ref()),
                finish_s: b.bound_s.map(|s| s.saturating_add(shape.walltime_s)),
                site: b.site,
                queue: b.queue,
                nodes: b.nodes,
                walltime_s: b.walltime_s,
                walltime: format_walltime(b.walltime_s),
                status: b.status,
                limit: b.limit,
                bound_s: b.bound_s,
                bound: b.bound,
                history_size: b.history_size,
                deadline,
                as_of: b.as_of,
            });
        }
    }
    let ranks = advice::rank(&mut rows, |r| RankKey {
        total_s: r.finish_s,
        nodes: r.nodes as u64,
        site: &r.site,
        queue: &r.queue,
    });
    for (r, k) in rows.iter_mut().zip(&ranks) {
        r.rank = *k;
    }
    Ok(axum::Json(AdviceOut {
        quantile,
        confidence,
        ranked: ranks.iter().flatten().count(),
        rows,
    }))
}

/// The probability that a job of `shape` starts by `when` less its walltime, through
/// `GET …/deadline`'s code.
async fn start_by<S: Store>(
    state: &AppState<S>,
    site: &str,
    queue: &str,
    shape: JobShape,
    when: Deadline,
    confidence: f64,
) -> ApiResult<DeadlineAdvice> {
    let w = shape.walltime_s as i64;
    let too_late = |start_by: i64| DeadlineAdvice {
        start_by: format_time(start_by),
        status: DeadlineStatus::TooLate,
        probability: None,
    };
    let shifted = match when {
        Deadline::In(d) if d <= w => {
            let at = state.predictors.as_of(site).unwrap_or_default();
            return Ok(too_late(at + d - w));
        }
        Deadline::In(d) => Deadline::In(d - w),
        Deadline::At(t) => Deadline::At(t - w),
    };
    Ok(
        match deadline_answer(state, site, queue, shape, shifted, confidence, 0).await? {
            Ok(v) => DeadlineAdvice {
                start_by: v.deadline,
                status: v.status.into(),
                probability: v.probability,
            },
            Err(_) => too_late(match shifted {
                Deadline::At(t) | Deadline::In(t) => t,
            }),
        },
    )
}
