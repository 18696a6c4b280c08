//! The live predictors' seam: one slot per (site, queue), kept in memory, rebuilt from
//! the store at start-up and fed as records arrive.
//!
//! The QBETS engine (`src/engine`, issue 2) plugs in here in issue 4's part 2: each
//! [`QueueSlot`] then holds an engine, [`Predictors::rebuild`] hands it every stored
//! job in rebuild order (submit time, then arrival — the replay's order), and
//! [`Predictors::observe`] hands it each job the ingest path inserted or changed.
//! Until then a slot records only what the rebuild and the archive's "as of" need: how
//! many jobs it was handed and the latest event among them.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;

use crate::store::{Job, Queue, REBUILD_PAGE, Site, Store, StoreResult, stream_jobs};

/// What one (site, queue) predictor knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSlot {
    /// Jobs handed to this predictor (rebuild and live).
    pub jobs_seen: u64,
    /// Latest submit or start time among them, Unix seconds.
    pub last_event: Option<i64>,
}

impl QueueSlot {
    fn feed(&mut self, job: &Job) {
        self.jobs_seen += 1;
        let event = job
            .start_time
            .unwrap_or(job.submit_time)
            .max(job.submit_time);
        self.last_event = Some(self.last_event.map_or(event, |e| e.max(event)));
    }
}

/// How a rebuild went, for the start-up log line.
#[derive(Debug, Clone, PartialEq)]
pub struct RebuildReport {
    /// Predictors built.
    pub queues: usize,
    /// Jobs handed to them.
    pub jobs: u64,
    /// Wall time of the rebuild.
    pub elapsed: Duration,
}

impl RebuildReport {
    /// Jobs per second over the whole rebuild.
    pub fn jobs_per_s(&self) -> f64 {
        self.jobs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Every predictor of the service, keyed by (site name, queue name).
#[derive(Debug, Default)]
pub struct Predictors {
    slots: RwLock<HashMap<(String, String), QueueSlot>>,
}

impl Predictors {
    /// No predictors (an empty store).
    pub fn new() -> Self {
        Self::default()
    }

    /// Total stored jobs the rebuild will walk (to size a progress bar).
    pub async fn rebuild_size<S: Store>(store: &S) -> StoreResult<u64> {
        let mut total = 0;
        for site in store.sites().await? {
            total += site.jobs.max(0) as u64;
        }
        Ok(total)
    }

    /// Builds every (site, queue) predictor from the store, streaming each queue's jobs
    /// in rebuild order by keyset pages (memory bounded by one page). `progress` is
    /// told how many jobs each page held.
    pub async fn rebuild<S: Store>(
        store: &S,
        mut progress: impl FnMut(u64),
    ) -> StoreResult<(Self, RebuildReport)> {
        let started = Instant::now();
        let mut slots = HashMap::new();
        let mut jobs = 0u64;
        for summary in store.sites().await? {
            let site = summary.site;
            for stats in store.queue_stats(site.id).await? {
                let mut slot = QueueSlot::default();
                let mut stream = std::pin::pin!(stream_jobs(store, stats.queue.id, REBUILD_PAGE));
                let mut since_report = 0u64;
                while let Some(job) = stream.try_next().await? {
                    slot.feed(&job);
                    since_report += 1;
                    if since_report == REBUILD_PAGE as u64 {
                        progress(since_report);
                        since_report = 0;
                    }
                }
                progress(since_report);
                jobs += slot.jobs_seen;
                slots.insert((site.name.clone(), stats.queue.name), slot);
            }
        }
        let report = RebuildReport {
            queues: slots.len(),
            jobs,
            elapsed: started.elapsed(),
        };
        Ok((
            Self {
                slots: RwLock::new(slots),
            },
            report,
        ))
    }

    /// Hands a predictor the jobs the ingest path inserted or changed (the store's
    /// answer to [`Store::upsert_jobs`]), in arrival order.
    pub fn observe(&self, site: &Site, queue: &Queue, jobs: &[Job]) {
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        let slot = slots
            .entry((site.name.clone(), queue.name.clone()))
            .or_default();
        for job in jobs {
            slot.feed(job);
        }
    }

    /// A copy of one predictor's state.
    pub fn slot(&self, site: &str, queue: &str) -> Option<QueueSlot> {
        let slots = self.slots.read().unwrap_or_else(|p| p.into_inner());
        slots.get(&(site.to_string(), queue.to_string())).cloned()
    }

    /// How many predictors there are.
    pub fn len(&self) -> usize {
        self.slots.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
