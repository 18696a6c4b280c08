//! The live predictors: one QBETS [`QueuePredictor`] per (site, queue), kept in
//! memory, rebuilt from the store at start-up and fed as records arrive.
//!
//! # What others build on
//!
//! Every question is asked by site and queue name and answered *as of* the instant the
//! site speaks for — an archive site (imported from a trace) as of its last record, a
//! live site as of now (the service's injected [`Clock`], or the site's own clock set
//! with [`Predictors::set_site_clock`], as the demo's simulated time). Each answer
//! comes with that instant (`as_of`, Unix seconds); `None` means the site or queue is
//! not known.
//!
//! - [`Predictors::bound`]: upper level-`c` bound on the `q` quantile of the wait of a
//!   job of a shape (what `/v1/bounds` answers), cached per queue by the predictor's
//!   version, the instant and the question: asked again before the predictor changes
//!   or time moves on, it is not computed again;
//! - [`Predictors::probability`]: the probability of starting within a deadline;
//! - [`Predictors::clusters`], [`Predictors::state`]: the queue's service classes and
//!   its up/maybe-down state;
//! - [`Predictors::with_predictor`]: any other read of the engine, under the queue's
//!   read lock, after the predictor has been brought to `as_of`.
//!
//! # Feeding
//!
//! [`Predictors::rebuild`] walks every stored job of a queue in the store's rebuild
//! order (submit time, then store id — the trace's order for an import) and hands the
//! predictor the event stream of qbets.md §6 ([`crate::engine::event_stream`]), exactly as
//! `qbets replay` does: for the same jobs the predictor ends in the replay's final
//! state. Jobs that never started are left out, as the replay leaves them out, except
//! on a live site the ones still waiting (they are pending: censored waits, §7). At
//! each job's arrival the bound predicted for it (q = C = 0.95, its shape) is recorded
//! and written back to the store ([`Store::set_bounds`]) when not stored yet.
//!
//! [`Predictors::ingest`] is the ingest path: it upserts records and hands the
//! predictors what changed: a new job is an arrival (and a
//! start, when it has started), a pending job that started is a start, a pending job
//! that ended without starting is a departure. The store hands over what changed
//! before it writes ([`Store::ingest_jobs`]), so a new job is written once, with its
//! bound at submission.
//!
//! A batch that tells a queue's predictor of something *before* what it was told last
//! — a PBS `S` record names a submission made before starts already heard of, an SGE
//! line arrives only when its job ends — cannot be fed on top: the replay would have
//! seen those events earlier. The predictor is wound back to a copy from before them
//! and handed the events since again, in the replay's order (`feed`); bounds at
//! submission the late news changed are written again. News later than the copy
//! reaches makes the queue's predictor be built again from the store once the batch is
//! written, keeping a copy far enough back from then on. So live answers stay the
//! replay's for the same stored records. One site's batches are fed one at a time.
//!
//! Engine configuration: the replay's default (`--features all`, binomial method).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;

use crate::engine::{
    BoundAnswer, ClusterInfo, Config as EngineConfig, JobRecord, JobShape, ProbabilityAnswer,
    QueuePredictor, QueueState,
};
use crate::store::{
    Job, JobBound, JobState, NewJob, Queue, REBUILD_PAGE, Site, SiteKind, Store, StoreResult,
    stream_jobs,
};

use super::feed::{Fed, Feeder, Handed, events_of};
use super::{Clock, SystemClock};

/// The quantile and confidence of the bound recorded at each job's submission.
pub const SUBMISSION_LEVEL: f64 = 0.95;

/// Live arrivals remembered by the scheduler's job id until their bound is surely in the
/// store, so a record sent twice in quick succession is not a second arrival — nor one
/// sent again after a write that failed once the predictor had heard of it (the store
/// gives the job another id then).
const RECENT_CAP: usize = 65_536;

/// What one (site, queue) predictor has been handed (a summary for logs and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSlot {
    /// Jobs handed to this predictor (rebuild and live), whether or not they entered
    /// its history.
    pub jobs_seen: u64,
    /// Latest submit or start time among them, Unix seconds.
    pub last_event: Option<i64>,
    /// Jobs the predictor holds as pending (arrived, not started).
    pub pending: usize,
    /// Batches that reached back before what it had been told, since start-up: wound
    /// back to a copy and handed again what came after...
    pub rewinds: u64,
    /// ... or, too late for the copy, built again from the store.
    pub rebuilds: u64,
}

/// How a rebuild went, for the start-up log line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RebuildReport {
    /// Predictors built.
    pub queues: usize,
    /// Jobs handed to them.
    pub jobs: u64,
    /// Bounds at submission computed and written back (jobs that had none stored).
    pub bounds_recorded: u64,
    /// Wall time of the rebuild.
    pub elapsed: Duration,
}

impl RebuildReport {
    /// Jobs per second over the whole rebuild.
    pub fn jobs_per_s(&self) -> f64 {
        self.jobs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The engine configuration of every live predictor: the replay's default
/// (`--features all`, the binomial method).
pub fn engine_config() -> EngineConfig {
    EngineConfig::default()
}

/// No time yet (an empty site or a predictor never advanced).
const NEVER: i64 = i64::MIN;

/// A queue's predictor and what the ingest path needs to know about its jobs.
#[derive(Debug)]
struct Live {
    feeder: Feeder,
    /// Jobs arrived and not started, by the scheduler's job id (unique in the site, and
    /// the same whatever id the store gives): their submit time and shape as the
    /// predictor was told (a start or departure must name the same).
    pending: HashMap<String, (i64, JobShape, Option<u32>)>,
    /// Job ids of recent live arrivals (see [`RECENT_CAP`]), with the submit time the
    /// predictor was told (a job submitted anew under its id is another arrival).
    recent: HashMap<Arc<str>, i64>,
    recent_order: VecDeque<Arc<str>>,
    jobs_seen: u64,
    last_event: Option<i64>,
}

impl Live {
    fn new(config: &EngineConfig) -> Self {
        Self {
            feeder: Feeder::new(
                QueuePredictor::new(config.clone())
                    .expect("the default engine configuration is valid"),
            ),
            pending: HashMap::new(),
            recent: HashMap::new(),
            recent_order: VecDeque::new(),
            jobs_seen: 0,
            last_event: None,
        }
    }

    fn saw(&mut self, job: &Job) {
        self.jobs_seen += 1;
        let event = job
            .start_time
            .unwrap_or(job.submit_time)
            .max(job.submit_time);
        self.last_event = Some(self.last_event.map_or(event, |e| e.max(event)));
    }

    fn remember(&mut self, job_id: &str, submit: i64) {
        if let Some(s) = self.recent.get_mut(job_id) {
            *s = submit;
        } else {
            let id: Arc<str> = Arc::from(job_id);
            self.recent.insert(id.clone(), submit);
            self.recent_order.push_back(id);
            if self.recent_order.len() > RECENT_CAP
                && let Some(old) = self.recent_order.pop_front()
            {
                self.recent.remove(&*old);
            }
        }
    }
}

/// One queue: its predictor under a lock, and how far it has been advanced (checked
/// under the read lock, so an answer at an instant already reached takes the read lock
/// only).
#[derive(Debug)]
struct QueueEntry {
    live: RwLock<Live>,
    advanced_to: AtomicI64,
    limits: RwLock<QueueLimits>,
    /// To be built again from the store (handed a batch too late to wind back for, or
    /// one the store did not take): its copy trailing by this many seconds (0: none
    /// kept; [`NOT_STALE`]: not to be built again).
    stale: AtomicI64,
    rewinds: AtomicU64,
    rebuilds: AtomicU64,
    /// Bumped each time the predictor is taken for writing (fed, wound back, moved on to
    /// a later instant, put in place): answers cached under an older version are not
    /// used again.
    version: AtomicU64,
    /// Recent bound answers, by what they answered (see [`BoundKey`]).
    bounds: Mutex<Vec<(BoundKey, BoundAnswer)>>,
}

/// What a bound answer is a function of: the predictor (its version), the instant it
/// speaks for, the shape and the levels. The same key gives the same answer, so a cached
/// one is never stale relative to what the predictor holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BoundKey {
    version: u64,
    at: i64,
    shape: JobShape,
    quantile: u64,
    confidence: u64,
}

/// Bound answers kept per queue: a few shapes or levels asked at once (several users
/// listing `/v1/bounds` for their jobs within the same second) are answered once each;
/// entries of an older version or instant are dropped first.
const BOUNDS_CACHED: usize = 8;

/// [`QueueEntry::stale`] of a queue that is not to be built again.
const NOT_STALE: i64 = i64::MIN;

/// The departures of jobs that moved to other queues, by the queue they left.
type Departures = HashMap<String, (Arc<QueueEntry>, Vec<Fed>)>;

/// A queue's limits, where known (a job beyond them cannot run there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLimits {
    /// Longest walltime accepted, seconds.
    pub max_walltime_s: Option<i64>,
    /// Most nodes a job may ask for.
    pub max_nodes: Option<i64>,
    /// Nodes the queue's jobs can reach in all (the partition's or the machine's).
    pub total_nodes: Option<i64>,
}

/// Which limit a job exceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The most nodes one job may ask for (`max_nodes`).
    MaxNodes,
    /// The nodes the queue reaches in all (`total_nodes`).
    TotalNodes,
    /// The longest walltime accepted (`max_walltime`).
    MaxWalltime,
}

impl Limit {
    /// The limit's name, as the API and the configuration spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::MaxNodes => "max_nodes",
            Limit::TotalNodes => "total_nodes",
            Limit::MaxWalltime => "max_walltime",
        }
    }
}

/// A limit a job exceeds, with the limit's value and what the job asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exceeded {
    /// Which limit.
    pub limit: Limit,
    /// The limit's value (nodes, or seconds for `max_walltime`).
    pub value: i64,
    /// What the job asks for (nodes, or seconds).
    pub asked: u64,
}

impl Exceeded {
    /// The request field the limit speaks of: `nodes` or `walltime`.
    pub fn field(&self) -> &'static str {
        match self.limit {
            Limit::MaxNodes | Limit::TotalNodes => "nodes",
            Limit::MaxWalltime => "walltime",
        }
    }

    /// A sentence naming the limit, for people.
    pub fn describe(&self, queue: &str) -> String {
        let hms = |s: i64| {
            let s = s.max(0);
            let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3_600, s % 3_600 / 60, s % 60);
            if d > 0 {
                format!("{d}-{h:02}:{m:02}:{sec:02}")
            } else {
                format!("{h:02}:{m:02}:{sec:02}")
            }
        };
        match self.limit {
            Limit::MaxNodes => format!(
                "queue {queue:?} gives a job at most {} nodes (max_nodes); {} asked for",
                self.value, self.asked
            ),
            Limit::TotalNodes => format!(
                "queue {queue:?} reaches {} nodes in all (total_nodes); {} asked for",
                self.value, self.asked
            ),
            Limit::MaxWalltime => format!(
                "queue {queue:?} accepts at most {} of walltime (max_walltime); {} asked for",
                hms(self.value),
                hms(i64::try_from(self.asked).unwrap_or(i64::MAX))
            ),
        }
    }
}

impl QueueLimits {
    /// The limits stored for `queue`.
    pub fn of(queue: &Queue) -> Self {
        Self {
            max_walltime_s: queue.max_walltime_s,
            max_nodes: queue.max_nodes,
            total_nodes: queue.total_nodes,
        }
    }

    /// Whether a job of `shape` fits (unknown limits admit everything).
    pub fn admits(&self, shape: JobShape) -> bool {
        self.exceeded(shape).is_none()
    }

    /// The first limit a job of `shape` exceeds (nodes before walltime, the tighter
    /// node limit first), or `None` when it fits or the limits are unknown.
    pub fn exceeded(&self, shape: JobShape) -> Option<Exceeded> {
        let over = |limit: Limit, value: Option<i64>, asked: u64| {
            value
                .filter(|&v| asked > v.max(0) as u64)
                .map(|value| Exceeded {
                    limit,
                    value,
                    asked,
                })
        };
        let mut nodes = [
            over(Limit::MaxNodes, self.max_nodes, shape.nodes),
            over(Limit::TotalNodes, self.total_nodes, shape.nodes),
        ];
        nodes.sort_by_key(|e| e.map_or(i64::MAX, |e| e.value));
        nodes
            .into_iter()
            .flatten()
            .next()
            .or_else(|| over(Limit::MaxWalltime, self.max_walltime_s, shape.walltime_s))
    }
}

impl QueueEntry {
    fn new(live: Live, limits: QueueLimits) -> Self {
        Self {
            live: RwLock::new(live),
            advanced_to: AtomicI64::new(NEVER),
            limits: RwLock::new(limits),
            stale: AtomicI64::new(NOT_STALE),
            rewinds: AtomicU64::new(0),
            rebuilds: AtomicU64::new(0),
            version: AtomicU64::new(0),
            bounds: Mutex::new(Vec::new()),
        }
    }

    /// The predictor for writing; answers cached before are not used again.
    fn write_live(&self) -> std::sync::RwLockWriteGuard<'_, Live> {
        let live = self.live.write().unwrap_or_else(|p| p.into_inner());
        self.version.fetch_add(1, Ordering::AcqRel);
        live
    }

    /// The bound for a job of `shape` submitted at `at` (the predictor brought to
    /// `horizon`), cached by [`BoundKey`].
    fn bound_at(&self, horizon: i64, at: i64, shape: JobShape, q: f64, c: f64) -> BoundAnswer {
        self.read_at(horizon, |p| {
            // Read under the predictor's read lock: no write (which bumps it) runs now.
            let key = BoundKey {
                version: self.version.load(Ordering::Acquire),
                at,
                shape,
                quantile: q.to_bits(),
                confidence: c.to_bits(),
            };
            let hit = self
                .bounds
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, a)| a.clone());
            if let Some(a) = hit {
                return a;
            }
            let a = p.bound(at, shape, q, c);
            let mut cached = self.bounds.lock().unwrap_or_else(|p| p.into_inner());
            cached.retain(|(k, _)| k.version == key.version && k.at == key.at);
            if cached.len() >= BOUNDS_CACHED {
                cached.remove(0);
            }
            cached.push((key, a.clone()));
            a
        })
    }

    /// Runs `f` on the predictor brought to `at` (its pending jobs tested up to then).
    fn read_at<T>(&self, at: i64, f: impl FnOnce(&QueuePredictor) -> T) -> T {
        {
            // Checked under the lock: a predictor put in place (a rebuild) has not been
            // advanced yet.
            let live = self.live.read().unwrap_or_else(|p| p.into_inner());
            if self.advanced_to.load(Ordering::Acquire) >= at {
                return f(&live.feeder.predictor);
            }
        }
        let mut live = self.write_live();
        if self.advanced_to.load(Ordering::Acquire) < at {
            live.feeder.predictor.advance(at);
            self.advanced_to.fetch_max(at, Ordering::AcqRel);
        }
        f(&live.feeder.predictor)
    }

    /// Takes note of what handing a batch to the predictor (held under the write lock)
    /// gave: bounds written before that changed go to `corrected`; a predictor wound
    /// back has not been moved on to any instant yet; one too late to wind back for is
    /// to be built again.
    fn took(&self, handed: &Handed, corrected: &mut Vec<(JobBound, i64)>) {
        corrected.extend(handed.corrected.iter().cloned());
        if handed.rewound {
            self.advanced_to.store(NEVER, Ordering::Release);
            self.rewinds.fetch_add(1, Ordering::AcqRel);
        }
        if let Some(h) = handed.rebuild {
            self.stale.fetch_max(h, Ordering::AcqRel);
        }
    }

    /// Puts `live` (built again from the store) in place of the predictor held.
    fn replace(&self, live: Live) {
        let mut held = self.write_live();
        *held = live;
        self.advanced_to.store(NEVER, Ordering::Release);
        self.stale.store(NOT_STALE, Ordering::Release);
        self.rebuilds.fetch_add(1, Ordering::AcqRel);
    }
}

/// One site: its kind, the instant an archive speaks for, its queues.
struct SiteEntry {
    kind: SiteKind,
    /// Latest submit or start time of any of its jobs ([`NEVER`] when none).
    last_event: AtomicI64,
    /// The instant up to which the site's news is known: when the last batch stored
    /// was read (a poll's start, a push), [`NEVER`] before the first.
    heard_until: AtomicI64,
    /// The site's own clock, when it is not the service's (the demo's simulated time).
    clock: RwLock<Option<Arc<dyn Clock>>>,
    queues: RwLock<HashMap<String, Arc<QueueEntry>>>,
    /// Held while a batch of the site is written and fed, and while its queues are
    /// built again: one site's feeds never interleave, and a queue being built again
    /// from the store misses no batch.
    feeding: tokio::sync::Mutex<()>,
    /// The site's user keys, numbered in the order first met: the engine tells users
    /// apart and never needs their names.
    users: RwLock<HashMap<String, u32>>,
}

/// Leaves a site's queues to be built again from the store when dropped while `handed`
/// is set (see [`Predictors::ingest`]), and its latest event where it was before the
/// batch (the rebuild raises it again to what the store holds).
struct StaleUnlessTaken<'a> {
    entry: &'a SiteEntry,
    handed: AtomicBool,
    last_event: i64,
}

impl<'a> StaleUnlessTaken<'a> {
    /// Taken while the site's feed is held, before the batch is handed over.
    fn new(entry: &'a SiteEntry) -> Self {
        Self {
            entry,
            handed: AtomicBool::new(false),
            last_event: entry.last_event.load(Ordering::Acquire),
        }
    }
}

impl Drop for StaleUnlessTaken<'_> {
    fn drop(&mut self) {
        if *self.handed.get_mut() {
            self.entry
                .last_event
                .store(self.last_event, Ordering::Release);
            self.entry.leave_stale(|horizon| horizon);
        }
    }
}

impl SiteEntry {
    /// Leaves every queue of the site to be built again from the store before its next
    /// batch, its copy trailing by `horizon(h)` for the `h` it keeps now (0: none).
    fn leave_stale(&self, horizon: impl Fn(i64) -> i64) {
        for q in self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            let h = q
                .live
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .feeder
                .horizon_s();
            q.stale.fetch_max(horizon(h), Ordering::AcqRel);
        }
    }

    /// The engine's number for the user of `key` (`None` when the job's source does
    /// not say).
    fn user_of(&self, key: Option<&str>) -> Option<u32> {
        let key = key?;
        if let Some(&u) = self
            .users
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
        {
            return Some(u);
        }
        let mut users = self.users.write().unwrap_or_else(|p| p.into_inner());
        let next = u32::try_from(users.len()).unwrap_or(u32::MAX);
        Some(*users.entry(key.to_string()).or_insert(next))
    }

    fn new(kind: SiteKind) -> Self {
        Self {
            kind,
            last_event: AtomicI64::new(NEVER),
            heard_until: AtomicI64::new(NEVER),
            clock: RwLock::new(None),
            queues: RwLock::new(HashMap::new()),
            feeding: tokio::sync::Mutex::new(()),
            users: RwLock::new(HashMap::new()),
        }
    }

    fn saw(&self, job: &Job) {
        let event = job
            .start_time
            .unwrap_or(job.submit_time)
            .max(job.submit_time);
        self.last_event.fetch_max(event, Ordering::AcqRel);
    }

    /// How far a query at `at` may move the predictors' pending jobs on: an archive is
    /// wholly known; a live site only up to the news stored. A job still pending at the
    /// last poll may have started since, which the next poll will tell: counting it as
    /// waiting past its bound at `at` would test it against news not yet heard (and
    /// differ from the replay of the same records).
    fn horizon(&self, at: i64) -> i64 {
        match self.kind {
            SiteKind::Archive => at,
            SiteKind::Live => at.min(self.heard_until.load(Ordering::Acquire)),
        }
    }

    fn queue(&self, name: &str) -> Option<Arc<QueueEntry>> {
        self.queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }
}

/// Every predictor of the service, by site and queue name.
pub struct Predictors {
    config: EngineConfig,
    clock: Arc<dyn Clock>,
    sites: RwLock<HashMap<String, Arc<SiteEntry>>>,
    /// How each site's user names become stored keys (a site not named: the name).
    user_keys: RwLock<HashMap<String, super::users::UserKeys>>,
}

impl std::fmt::Debug for Predictors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Predictors")
            .field("queues", &self.len())
            .finish_non_exhaustive()
    }
}

impl Default for Predictors {
    fn default() -> Self {
        Self::new()
    }
}

/// A job as the engine sees it: a record, or `None` when the predictor never hears of
/// it — on an archive site, a job without a start (the replay drops jobs without a
/// wait, qbets.md §6). On a live site a job that left the queue without starting is an
/// arrival and a departure (returned with the departure's time), as the ingest path
/// saw it.
fn record_of(job: &Job, kind: SiteKind, entry: &SiteEntry) -> Option<(JobRecord, Option<i64>)> {
    let start = job.start_time.filter(|&s| s >= job.submit_time);
    let record = JobRecord {
        submit: job.submit_time,
        start,
        shape: shape_of(job),
        user: entry.user_of(job.user_key.as_deref()),
    };
    match (start, kind) {
        (Some(_), _) => Some((record, None)),
        (None, SiteKind::Live) if waiting(job) => Some((record, None)),
        (None, SiteKind::Live) => Some((record, Some(departure_time(job, job.submit_time)))),
        (None, SiteKind::Archive) => None,
    }
}

/// When a job submitted at `submit` left the queue without starting: its end, else
/// its submission.
fn departure_time(job: &Job, submit: i64) -> i64 {
    job.end_time.unwrap_or(submit).max(submit)
}

/// Whether a job without a start is still in the queue.
fn waiting(job: &Job) -> bool {
    job.start_time.is_none()
        && !matches!(
            job.state,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
}

/// The engine's shape of a job (0 for what is not known, as the replay does).
pub fn shape_of(job: &Job) -> JobShape {
    JobShape {
        nodes: job.nodes.map_or(0, |n| n.max(0) as u64),
        walltime_s: job.walltime_s.map_or(0, |w| w.max(0) as u64),
    }
}

impl Predictors {
    /// No predictors (an empty store), on the system clock.
    pub fn new() -> Self {
        Self {
            config: engine_config(),
            clock: Arc::new(SystemClock),
            sites: RwLock::new(HashMap::new()),
            user_keys: RwLock::new(HashMap::new()),
        }
    }

    /// Site `site`'s user names become keys by `keys` from now on (its configuration's
    /// `user_key`).
    pub fn set_user_keys(&self, site: &str, keys: super::users::UserKeys) {
        self.user_keys
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(site.to_string(), keys);
    }

    /// The key stored for user `name` of site `site`.
    pub fn user_key(&self, site: &str, name: &str) -> String {
        match self
            .user_keys
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(site)
        {
            Some(keys) => keys.key(name),
            None => name.to_string(),
        }
    }

    /// The same predictors answering live sites by `clock` (the service's clock;
    /// [`crate::service::AppState::new`] sets it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Live site `site` answers by its own `clock` from now on (the demo's simulated
    /// time) instead of the service's.
    pub fn set_site_clock(&self, site: &Site, clock: Arc<dyn Clock>) {
        let entry = self.site_entry(site);
        *entry.clock.write().unwrap_or_else(|p| p.into_inner()) = Some(clock);
    }

    /// Total stored jobs the rebuild will walk (to size a progress bar).
    pub async fn rebuild_size<S: Store>(store: &S) -> StoreResult<u64> {
        let mut total = 0;
        for site in store.sites().await? {
            total += site.jobs.max(0) as u64;
        }
        Ok(total)
    }

    /// Builds every (site, queue) predictor from the store (see the module's
    /// documentation), streaming each queue's jobs by keyset pages, and writes back the
    /// bounds at submission not stored yet. `progress` is told how many jobs each page
    /// held. Live sites answer by the system clock until [`Predictors::with_clock`].
    pub async fn rebuild<S: Store>(
        store: &S,
        mut progress: impl FnMut(u64),
    ) -> StoreResult<(Self, RebuildReport)> {
        let started = Instant::now();
        let this = Self::new();
        let mut report = RebuildReport::default();
        for summary in store.sites().await? {
            this.rebuild_site_into(store, &summary.site, &mut report, &mut progress)
                .await?;
        }
        report.elapsed = started.elapsed();
        Ok((this, report))
    }

    /// Builds the predictors of every queue of `site` from the store again and puts them
    /// in place of the ones held: after a bulk load that bypassed [`Predictors::ingest`]
    /// (an SWF source's import), so that the site answers from what was loaded.
    pub async fn rebuild_site<S: Store>(
        &self,
        store: &S,
        site: &Site,
    ) -> StoreResult<RebuildReport> {
        let started = Instant::now();
        let mut report = RebuildReport::default();
        self.rebuild_site_into(store, site, &mut report, &mut |_| {})
            .await?;
        report.elapsed = started.elapsed();
        Ok(report)
    }

    async fn rebuild_site_into<S: Store>(
        &self,
        store: &S,
        site: &Site,
        report: &mut RebuildReport,
        progress: &mut impl FnMut(u64),
    ) -> StoreResult<()> {
        let entry = self.site_entry(site);
        let _feeding = entry.feeding.lock().await;
        for stats in store.queue_stats(site.id).await? {
            let live = self
                .build_queue(store, site, &entry, &stats.queue, None, report, progress)
                .await?;
            report.queues += 1;
            entry
                .queues
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(
                    stats.queue.name.clone(),
                    Arc::new(QueueEntry::new(live, QueueLimits::of(&stats.queue))),
                );
        }
        Ok(())
    }

    /// A predictor of `queue` built from its stored jobs, the bounds at submission not
    /// stored yet written back (counted in `report`, with the jobs handed over). With a
    /// `horizon` (seconds: the queue was handed news too late to wind back for), it keeps
    /// a copy trailing that far to wind back to, and writes back every bound at
    /// submission that differs from the one stored (late news changed them).
    #[allow(clippy::too_many_arguments)]
    async fn build_queue<S: Store>(
        &self,
        store: &S,
        site: &Site,
        entry: &SiteEntry,
        queue: &Queue,
        horizon: Option<i64>,
        report: &mut RebuildReport,
        progress: &mut impl FnMut(u64),
    ) -> StoreResult<Live> {
        let mut live = Live::new(&self.config);
        let mut records = Vec::new();
        let mut ids = Vec::new();
        let mut stored = Vec::new();
        let mut departs = Vec::new();
        let mut stream = std::pin::pin!(stream_jobs(store, queue.id, REBUILD_PAGE));
        let mut since_report = 0u64;
        while let Some(job) = stream.try_next().await? {
            live.saw(&job);
            entry.saw(&job);
            if let Some((r, departs_at)) = record_of(&job, site.kind, entry) {
                if let Some(at) = departs_at {
                    departs.push((records.len(), at));
                } else if r.start.is_none() {
                    live.pending
                        .insert(job.job_id.clone(), (r.submit, r.shape, r.user));
                }
                records.push(r);
                ids.push(job.id);
                stored.push(job.bound_status.map(|status| JobBound {
                    id: job.id,
                    bound_s: job.bound_s,
                    status,
                }));
            }
            since_report += 1;
            if since_report == REBUILD_PAGE as u64 {
                progress(since_report);
                since_report = 0;
            }
        }
        progress(since_report);
        let n = records.len();
        let events = events_of(
            &records,
            &ids,
            &vec![false; n],
            &vec![true; n],
            &departs,
            |i| stored[i].take(),
        );
        drop((records, stored));
        let predictor = QueuePredictor::new(self.config.clone())
            .expect("the default engine configuration is valid");
        let (feeder, built) = Feeder::build(predictor, events, horizon);
        live.feeder = feeder;
        for chunk in built.bounds.chunks(REBUILD_PAGE as usize) {
            store.set_bounds(chunk).await?;
        }
        for chunk in built.corrected.chunks(REBUILD_PAGE as usize) {
            store.correct_bounds(chunk).await?;
        }
        report.bounds_recorded += (built.bounds.len() + built.corrected.len()) as u64;
        report.jobs += live.jobs_seen;
        Ok(live)
    }

    /// The ingest path: stores `records` (inserting new jobs, updating known ones) and
    /// hands the predictors of `queues` (the records' queues, of `site`) what changed,
    /// storing the bounds predicted at the new jobs' submission with them (one
    /// transaction). Returns the stored jobs that were inserted or changed.
    pub async fn ingest<S: Store>(
        &self,
        store: &S,
        site: &Site,
        queues: &[Queue],
        records: &[NewJob],
    ) -> StoreResult<Vec<Job>> {
        let entry = self.site_entry(site);
        let _feeding = entry.feeding.lock().await;
        // Queues an earlier batch left to be built again are built before this one is
        // handed to them (if that fails, the batch is handed anyway and they stay to be
        // built again: a rebuild that keeps failing does not stop the site's news).
        if let Err(e) = self.rebuild_stale(store, site, &entry, queues).await {
            tracing::warn!(site = %site.name, error = %e, "predictors not built again yet");
        }
        // The store works out what changed and hands it over before it writes, so each
        // new job is written once, with its bound (one write instead of two).
        // Bounds at submission stored before that late news changed (written once the
        // batch is).
        let mut corrected = Vec::new();
        // The predictors handed a batch the store does not take (it fails, or the
        // caller gives up waiting: the transaction rolls back) are built again from what
        // it holds, whether the source sends the batch again or not.
        let untaken = StaleUnlessTaken::new(&entry);
        let written = store
            .ingest_jobs(records, |changed| {
                untaken.handed.store(true, Ordering::Release);
                let (moved, mut departures) = self.leave_other_queues(site, queues, changed);
                let mut bounds = Vec::new();
                for queue in queues {
                    let mut of_queue = changed.iter().filter(|j| j.queue_id == queue.id);
                    let left = departures.remove(&queue.name).map(|(_, d)| d);
                    if let Some(first) = of_queue.next() {
                        bounds.extend(self.observe_each(
                            site,
                            queue,
                            std::iter::once(first).chain(of_queue),
                            &moved,
                            left.unwrap_or_default(),
                            &mut corrected,
                        ));
                    } else if let Some(left) = left {
                        departures
                            .insert(queue.name.clone(), (self.queue_entry(site, queue), left));
                    }
                }
                // Queues that only lost jobs to others.
                for (q, left) in departures.into_values() {
                    let mut live = q.write_live();
                    let handed = live.feeder.hand(left);
                    q.took(&handed, &mut corrected);
                }
                bounds
            })
            .await;
        let changed = match written {
            Ok(changed) => {
                untaken.handed.store(false, Ordering::Release);
                changed
            }
            Err(e) => {
                let handed = untaken.handed.load(Ordering::Acquire);
                drop(untaken);
                if handed {
                    // Now, so that no answer counts what the store lacks until the next
                    // batch (with the store gone, the next batch does it).
                    if let Err(again) = self.rebuild_stale(store, site, &entry, queues).await {
                        tracing::warn!(
                            site = %site.name,
                            error = %again,
                            "predictors handed a batch the store did not take are built \
                             again before the next batch"
                        );
                    }
                }
                return Err(e);
            }
        };
        for chunk in corrected.chunks(REBUILD_PAGE as usize) {
            if let Err(e) = store.correct_bounds(chunk).await {
                // The batch is stored; the corrections are made again by a rebuild
                // before the next batch (it asks the bounds within the copy's reach
                // again; twice the horizon: the copy may have moved on past the first
                // arrival corrected).
                entry.leave_stale(|horizon| {
                    horizon.max(super::feed::MIN_HORIZON_S).saturating_mul(2)
                });
                return Err(e);
            }
        }
        // Queues handed news too late to wind back for are built again from what is
        // now stored (one whose rebuild failed, before the next batch).
        self.rebuild_stale(store, site, &entry, queues).await?;
        Ok(changed)
    }

    /// Builds again from the store the site's queues left stale (see
    /// [`QueueEntry::stale`]).
    async fn rebuild_stale<S: Store>(
        &self,
        store: &S,
        site: &Site,
        entry: &SiteEntry,
        queues: &[Queue],
    ) -> StoreResult<()> {
        for (queue, q, horizon) in self.stale_queues(store, site, entry, queues).await? {
            let started = Instant::now();
            let mut report = RebuildReport::default();
            let live = self
                .build_queue(
                    store,
                    site,
                    entry,
                    &queue,
                    (horizon > 0).then_some(horizon),
                    &mut report,
                    &mut |_| {},
                )
                .await?;
            q.replace(live);
            tracing::info!(
                site = %site.name,
                queue = %queue.name,
                jobs = report.jobs,
                bounds_recorded = report.bounds_recorded,
                duration_ms = started.elapsed().as_millis() as u64,
                "predictor built again from the store: a batch reached back before what it \
                 had been told, or the store did not take one it had been handed"
            );
        }
        Ok(())
    }

    /// The site's queues to build again (handed news too late to wind back for, in this
    /// batch or one whose rebuild failed), with their rows (the batch's, else the
    /// store's) and the horizon their copy is to keep.
    async fn stale_queues<S: Store>(
        &self,
        store: &S,
        site: &Site,
        entry: &SiteEntry,
        queues: &[Queue],
    ) -> StoreResult<Vec<(Queue, Arc<QueueEntry>, i64)>> {
        let stale: Vec<(String, Arc<QueueEntry>, i64)> = entry
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|(name, q)| {
                let horizon = q.stale.load(Ordering::Acquire);
                (horizon != NOT_STALE).then(|| (name.clone(), q.clone(), horizon))
            })
            .collect();
        let mut out = Vec::new();
        for (name, q, horizon) in stale {
            let row = match queues.iter().find(|k| k.name == name) {
                Some(k) => Some(k.clone()),
                None => store.queue(site.id, &name).await?,
            };
            if let Some(row) = row {
                out.push((row, q, horizon));
            }
        }
        Ok(out)
    }

    /// A job now in another queue than the one it waited in (Slurm names the first of
    /// several partitions while a job waits, and the one it runs in once it runs)
    /// leaves the old queue's predictor: it departs there when it starts (or now).
    /// Returns the ids of the jobs that moved, for their new queue to take in, and the
    /// departures by old queue, for each to be handed with the rest of its batch.
    fn leave_other_queues(
        &self,
        site: &Site,
        queues: &[Queue],
        changed: &[Job],
    ) -> (HashSet<String>, Departures) {
        let mut moved = HashSet::new();
        let mut departures = HashMap::new();
        // Only a job heard of before (it has a bound) can have waited elsewhere.
        let seen: Vec<(&Job, &str)> = changed
            .iter()
            .filter(|j| j.bound_status.is_some())
            .filter_map(|j| {
                let now_in = queues.iter().find(|q| q.id == j.queue_id)?;
                Some((j, now_in.name.as_str()))
            })
            .collect();
        if seen.is_empty() {
            return (moved, departures);
        }
        let others: Vec<(String, Arc<QueueEntry>)> = self
            .site_entry(site)
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(name, q)| (name.clone(), q.clone()))
            .collect();
        for (name, q) in &others {
            let mut live = q.write_live();
            let mut records = Vec::new();
            let mut ids = Vec::new();
            let mut departs = Vec::new();
            for &(job, now_in) in &seen {
                if now_in == name {
                    continue;
                }
                let Some((submit, shape, user)) = live.pending.remove(&job.job_id) else {
                    continue;
                };
                let left = job
                    .start_time
                    .unwrap_or_else(|| departure_time(job, submit));
                departs.push((records.len(), left.max(submit)));
                records.push(JobRecord {
                    submit,
                    start: None,
                    shape,
                    user,
                });
                ids.push(job.id);
                moved.insert(job.job_id.clone());
            }
            if !records.is_empty() {
                let n = records.len();
                let events = events_of(
                    &records,
                    &ids,
                    &vec![true; n],
                    &vec![false; n],
                    &departs,
                    |_| None,
                );
                departures.insert(name.clone(), (q.clone(), events));
            }
        }
        (moved, departures)
    }

    /// Hands the predictor of `queue` the jobs the ingest path inserted or changed
    /// (what [`Store::ingest_jobs`] hands over), and returns the bounds predicted at the
    /// new jobs' submission, for the store to write with them. The jobs of `moved` waited
    /// in another queue and are new to this one (their bound, predicted there, is kept);
    /// `left` are the departures of jobs of this queue that moved to others, handed with
    /// the rest.
    fn observe_each<'a>(
        &self,
        site: &Site,
        queue: &Queue,
        jobs: impl IntoIterator<Item = &'a Job>,
        moved: &HashSet<String>,
        left: Vec<Fed>,
        corrected: &mut Vec<(JobBound, i64)>,
    ) -> Vec<JobBound> {
        let entry = self.site_entry(site);
        let q = self.queue_entry(site, queue);
        let mut live = q.write_live();
        let mut records = Vec::new();
        let mut ids = Vec::new();
        let mut arrived = Vec::new();
        let mut record = Vec::new();
        let mut departs = Vec::new();
        for job in jobs {
            live.saw(job);
            entry.saw(job);
            if let Some(&(submit, shape, user)) = live.pending.get(&job.job_id) {
                // Heard of as pending: now a start, a departure, or nothing new. Or
                // submitted anew under its id (a requeue between two polls): the
                // earlier submission left the queue (a start, if it had one, was
                // missed) and the new one arrives below.
                let resubmitted = submit != job.submit_time;
                let start = job.start_time.filter(|&s| s >= submit && !resubmitted);
                if resubmitted || start.is_some() || !waiting(job) {
                    live.pending.remove(&job.job_id);
                    let i = records.len();
                    records.push(JobRecord {
                        submit,
                        start,
                        shape,
                        user,
                    });
                    ids.push(job.id);
                    arrived.push(true);
                    record.push(false);
                    if resubmitted {
                        departs.push((i, job.submit_time.max(submit)));
                    } else if start.is_none() {
                        departs.push((i, departure_time(job, submit)));
                    }
                }
                if !resubmitted {
                    continue;
                }
            }
            let came_from_another_queue = moved.contains(&job.job_id);
            let known = !came_from_another_queue
                && (job.bound_status.is_some()
                    || live.recent.get(job.job_id.as_str()) == Some(&job.submit_time));
            if known {
                // Heard of before and no longer pending: a started job's later change.
                continue;
            }
            if let Some((r, departs_at)) = record_of(job, site.kind, &entry) {
                if let Some(at) = departs_at {
                    departs.push((records.len(), at));
                } else if r.start.is_none() {
                    live.pending
                        .insert(job.job_id.clone(), (r.submit, r.shape, r.user));
                }
                live.remember(&job.job_id, r.submit);
                records.push(r);
                ids.push(job.id);
                arrived.push(false);
                record.push(!came_from_another_queue);
            }
        }
        let mut events = events_of(&records, &ids, &arrived, &record, &departs, |_| None);
        // The departures of jobs that moved to other queues, with the rest.
        events.extend(left);
        let handed = live.feeder.hand(events);
        q.took(&handed, corrected);
        handed.bounds
    }

    /// Makes sure `queue` of `site` has a predictor (empty when new), and records the
    /// queue's limits. The sites endpoint calls it when a queue is created or changed.
    pub fn register(&self, site: &Site, queue: &Queue) {
        self.queue_entry(site, queue);
    }

    fn queue_entry(&self, site: &Site, queue: &Queue) -> Arc<QueueEntry> {
        let entry = self.site_entry(site);
        let q = match entry.queue(&queue.name) {
            Some(q) => q,
            None => entry
                .queues
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .entry(queue.name.clone())
                .or_insert_with(|| {
                    Arc::new(QueueEntry::new(
                        Live::new(&self.config),
                        QueueLimits::of(queue),
                    ))
                })
                .clone(),
        };
        *q.limits.write().unwrap_or_else(|p| p.into_inner()) = QueueLimits::of(queue);
        q
    }

    /// A queue's limits as last seen, when it has a predictor.
    pub fn limits(&self, site: &str, queue: &str) -> Option<QueueLimits> {
        let (_, q) = self.find(site, queue)?;
        let l = *q.limits.read().unwrap_or_else(|p| p.into_inner());
        Some(l)
    }

    fn site_entry(&self, site: &Site) -> Arc<SiteEntry> {
        if let Some(e) = self
            .sites
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&site.name)
        {
            return e.clone();
        }
        self.sites
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(site.name.clone())
            .or_insert_with(|| Arc::new(SiteEntry::new(site.kind)))
            .clone()
    }

    fn find(&self, site: &str, queue: &str) -> Option<(Arc<SiteEntry>, Arc<QueueEntry>)> {
        let s = self
            .sites
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(site)?
            .clone();
        let q = s.queue(queue)?;
        Some((s, q))
    }

    fn as_of_entry(&self, site: &SiteEntry) -> i64 {
        match site.kind {
            SiteKind::Archive => match site.last_event.load(Ordering::Acquire) {
                NEVER => 0,
                t => t,
            },
            SiteKind::Live => match &*site.clock.read().unwrap_or_else(|p| p.into_inner()) {
                Some(c) => c.now(),
                None => self.clock.now(),
            },
        }
    }

    /// The instant a known site's answers speak for: an archive's last record, a live
    /// site's now (its own clock when it has one).
    pub fn as_of(&self, site: &str) -> Option<i64> {
        let s = self
            .sites
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(site)?
            .clone();
        Some(self.as_of_entry(&s))
    }

    /// Runs `f` on the predictor of (`site`, `queue`) brought to the instant the site
    /// speaks for, which `f` is given too. `None` when the queue is not known. `f` runs
    /// under the queue's read lock: keep it short.
    pub fn with_predictor<T>(
        &self,
        site: &str,
        queue: &str,
        f: impl FnOnce(&QueuePredictor, i64) -> T,
    ) -> Option<T> {
        let (s, q) = self.find(site, queue)?;
        let as_of = self.as_of_entry(&s);
        Some(q.read_at(s.horizon(as_of), |p| f(p, as_of)))
    }

    /// Records that `site`'s news up to `at` is stored (a source's poll that began at
    /// `at` has been written, or a push made then): queries may move its pending jobs
    /// on up to there.
    pub fn heard_until(&self, site: &Site, at: i64) {
        self.site_entry(site)
            .heard_until
            .fetch_max(at, Ordering::AcqRel);
    }

    /// Upper level-`c` bound on the `q` quantile of the wait of a job of `shape`
    /// submitted at the site's `as_of` (returned with the answer, also in its `at`).
    pub fn bound(
        &self,
        site: &str,
        queue: &str,
        shape: JobShape,
        q: f64,
        c: f64,
    ) -> Option<(BoundAnswer, i64)> {
        let (s, e) = self.find(site, queue)?;
        let at = self.as_of_entry(&s);
        Some((e.bound_at(s.horizon(at), at, shape, q, c), at))
    }

    /// The probability, at level `c`, that a job of `shape` submitted at the site's
    /// `as_of` starts within `deadline_s` seconds.
    pub fn probability(
        &self,
        site: &str,
        queue: &str,
        shape: JobShape,
        deadline_s: u64,
        c: f64,
    ) -> Option<(ProbabilityAnswer, i64)> {
        self.with_predictor(site, queue, |p, at| {
            (p.probability(at, shape, deadline_s, c), at)
        })
    }

    /// The queue's clusters (service classes) with their 0.95/0.95 bounds.
    pub fn clusters(&self, site: &str, queue: &str) -> Option<(Vec<ClusterInfo>, i64)> {
        self.with_predictor(site, queue, |p, at| (p.clusters(at), at))
    }

    /// The queue's state (up or maybe down, last release, pending jobs…).
    pub fn state(&self, site: &str, queue: &str) -> Option<(QueueState, i64)> {
        self.with_predictor(site, queue, |p, at| (p.state(at), at))
    }

    /// Every (site, queue) with a predictor, sorted.
    pub fn queues(&self) -> Vec<(String, String)> {
        let sites = self.sites.read().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<(String, String)> = sites
            .iter()
            .flat_map(|(s, e)| {
                let names: Vec<String> = e
                    .queues
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .keys()
                    .cloned()
                    .collect();
                names.into_iter().map(move |q| (s.clone(), q))
            })
            .collect();
        out.sort();
        out
    }

    /// A summary of what one predictor has been handed.
    pub fn slot(&self, site: &str, queue: &str) -> Option<QueueSlot> {
        let (_, q) = self.find(site, queue)?;
        let live = q.live.read().unwrap_or_else(|p| p.into_inner());
        Some(QueueSlot {
            jobs_seen: live.jobs_seen,
            last_event: live.last_event,
            pending: live.pending.len(),
            rewinds: q.rewinds.load(Ordering::Acquire),
            rebuilds: q.rebuilds.load(Ordering::Acquire),
        })
    }

    /// How many predictors there are.
    pub fn len(&self) -> usize {
        self.sites
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(|s| s.queues.read().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
