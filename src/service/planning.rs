//! The planners' view of a live queue: a [`StartOracle`] answered by the QBETS
//! predictor of that queue, as it stands at the moment the plan is made.
//!
//! [`oracle_for`] takes a copy of the queue's live predictor ([`super::Predictors`]) at
//! the site's instant; a queue the live predictors do not hold (yet) gets one built from
//! its stored jobs in rebuild order, brought to `now` ([`queue_oracle`]) — the same
//! answers a replay gives at that instant.

use futures_util::TryStreamExt;

use crate::engine::{Config as EngineConfig, JobRecord, JobShape, predictor::QueuePredictor};
use crate::plan::{OracleAnswer, PredictorAt, StartOracle};
use crate::store::{Queue, REBUILD_PAGE, Site, Store, StoreError, StoreResult, stream_jobs};

use super::Predictors;

/// A queue's predictor, speaking for one instant.
#[derive(Debug, Clone)]
pub struct PredictorOracle {
    predictor: QueuePredictor,
    now: i64,
    max_walltime_s: Option<u64>,
    max_nodes: Option<u64>,
}

impl PredictorOracle {
    /// An oracle on `predictor` at `now`, for a queue without known limits.
    pub fn new(mut predictor: QueuePredictor, now: i64) -> Self {
        predictor.advance(now);
        Self {
            predictor,
            now,
            max_walltime_s: None,
            max_nodes: None,
        }
    }

    /// An oracle on `predictor` at `now`, for `queue` (within its limits).
    pub fn for_queue(predictor: QueuePredictor, now: i64, queue: &Queue) -> Self {
        let limit = |l: Option<i64>| l.map(|m| m.max(0) as u64);
        Self {
            max_walltime_s: limit(queue.max_walltime_s),
            // The nodes a job may ask for: the per-job limit, or all the queue
            // reaches, whichever is fewer.
            max_nodes: match (limit(queue.max_nodes), limit(queue.total_nodes)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            ..Self::new(predictor, now)
        }
    }

    /// The instant the oracle speaks for.
    pub fn now(&self) -> i64 {
        self.now
    }
}

impl PredictorOracle {
    /// The same oracle, borrowed.
    fn at(&self) -> PredictorAt<'_> {
        PredictorAt {
            predictor: &self.predictor,
            now: self.now,
            max_walltime_s: self.max_walltime_s,
            max_nodes: self.max_nodes,
        }
    }
}

impl StartOracle for PredictorOracle {
    fn start_probability(
        &self,
        nodes: u32,
        walltime_s: u64,
        within_s: u64,
        confidence: f64,
    ) -> OracleAnswer {
        self.at()
            .start_probability(nodes, walltime_s, within_s, confidence)
    }

    fn max_walltime_s(&self) -> Option<u64> {
        self.max_walltime_s
    }

    fn max_nodes(&self) -> Option<u64> {
        self.max_nodes
    }
}

/// The oracle of a stored queue at `now`, from its stored jobs.
pub async fn queue_oracle<S: Store>(
    store: &S,
    queue: &Queue,
    now: i64,
) -> StoreResult<PredictorOracle> {
    let mut jobs = Vec::new();
    let mut stream = std::pin::pin!(stream_jobs(store, queue.id, REBUILD_PAGE));
    while let Some(job) = stream.try_next().await? {
        // What had happened by `now`: later submissions and starts are not known yet.
        if job.submit_time > now {
            continue;
        }
        jobs.push(JobRecord {
            submit: job.submit_time,
            start: job.start_time.filter(|s| *s <= now),
            shape: JobShape {
                nodes: job.nodes.unwrap_or(0).max(0) as u64,
                walltime_s: job.walltime_s.unwrap_or(0).max(0) as u64,
            },
            user: None,
        });
    }
    let predictor = QueuePredictor::from_jobs(EngineConfig::default(), &jobs)
        .map_err(|e| StoreError::Invalid(format!("engine configuration: {e}")))?;
    Ok(PredictorOracle::for_queue(predictor, now, queue))
}

/// The oracle of a site's queue: the live predictor's copy at the site's instant, or
/// one built from the store at `now` when there is no live predictor.
pub async fn oracle_for<S: Store>(
    store: &S,
    predictors: Option<&Predictors>,
    site: &Site,
    queue: &Queue,
    now: i64,
) -> StoreResult<PredictorOracle> {
    if let Some(live) =
        predictors.and_then(|p| p.with_predictor(&site.name, &queue.name, |q, at| (q.clone(), at)))
    {
        return Ok(PredictorOracle::for_queue(live.0, live.1, queue));
    }
    queue_oracle(store, queue, now).await
}

/// Runs `work` (a plan: up to [`crate::plan::varq::MAX_POINTS`] oracle calls per
/// request) on the blocking pool, at most as many at once as there are cores, so that
/// planning never stalls the runtime that answers every other request. `None` when the
/// work panicked.
pub async fn compute<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    let slots = SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        tokio::sync::Semaphore::new(cores)
    });
    // The semaphore is never closed, so acquiring only waits. The permit goes with the
    // work: a request dropped meanwhile (its client gone) does not free the slot of
    // work that still runs.
    let slot = slots.acquire().await.ok()?;
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        work()
    })
    .await
    .ok()
}
