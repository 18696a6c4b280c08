//! [`QueuePredictor`]: the online QBETS predictor of one queue — what the replay drives
//! job by job and what the service keeps one of per (site, queue).
//!
//! Observations arrive as they would live: a job's arrival (submit time and shape) and
//! a job's start (its wait enters the history once it has left the queue). Queries say
//! the time they speak for; nothing reads a clock. With clustering on, the queue's
//! recent observations are stored (up to `history_cap`) and re-clustered every
//! `recluster_every` observations; each cluster keeps its own trimmed window.
//!
//! With `state` on (qbets.md §8) each job's user counts: a job behind its own user's
//! pending jobs gets the depth term of [`super::depth`]; with `misses` on every job's
//! promise is followed until it is kept or missed ([`super::guard`]). Both need the
//! pending jobs, as `censored` does.
//!
//! With `censored` on (qbets.md §7) pending jobs are known too: an arrival joins the
//! pending set and a start (or a departure without start) leaves it, each in
//! O(log n), and [`QueuePredictor::advance`] brings the predictor to an instant: every pending
//! job that has by then waited longer than its cluster's change-point bound becomes a
//! known exceedance of that cluster (oldest first). Observations advance by themselves;
//! a caller asking at a later instant advances first to get the answer the replay gives.
//!
//! May import: std, serde and the engine's own modules.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::avail::Availability;
use super::binomial::{min_history, upper_rank, valid_level};
use super::calib::Calibration;
use super::cluster::{self, Interval};
use super::depth::{self, Depth, Evidence};
use super::events::{Event, EventKind, JobRecord, event_stream};
use super::guard::Guard;
use super::series::{Series, SeriesParams};
use super::{AvailScope, Config, ConfigError, JobShape, Method};

/// Why an answer does or does not carry a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A number is given.
    Ok,
    /// The job's cluster holds too few waits for a bound at this quantile and confidence.
    InsufficientHistory,
    /// The machine may be down (availability inference); no number until the next release.
    MaybeDown,
}

impl Status {
    /// The snake_case name (as in JSON and CSV).
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::InsufficientHistory => "insufficient_history",
            Status::MaybeDown => "maybe_down",
        }
    }
}

/// An attribute a cluster range is expressed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttrKind {
    /// Requested walltime, seconds.
    WalltimeS,
    /// Requested nodes.
    Nodes,
    /// Nodes × requested walltime.
    NodeSeconds,
    /// Jobs of the same user pending ahead when the job was submitted (its place in
    /// its own batch; qbets.md §8).
    OwnAhead,
    /// Jobs pending ahead when the job was submitted, whoever submitted them.
    Ahead,
}

impl AttrKind {
    /// The value of this attribute for a job of `shape` that found the queue as `view`.
    pub fn value(self, shape: JobShape, view: QueueView) -> u64 {
        match self {
            AttrKind::WalltimeS => shape.walltime_s,
            AttrKind::Nodes => shape.nodes,
            AttrKind::NodeSeconds => shape.node_seconds(),
            AttrKind::OwnAhead => view.own_ahead,
            AttrKind::Ahead => view.ahead,
        }
    }

    /// Whether the attribute is read off the queue rather than the job.
    pub fn reads_queue(self) -> bool {
        matches!(self, AttrKind::OwnAhead | AttrKind::Ahead)
    }
}

/// What is known about the queue when a job is submitted (qbets.md §8): the jobs
/// pending ahead of it (submitted earlier, not yet started) and how many of them are
/// its own user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct QueueView {
    pub ahead: u64,
    pub own_ahead: u64,
}

/// Pending jobs of one user from which they count as a burst in a queue's state: the
/// size from which a batch is a batch in the issue that brought bursts in (20 jobs of
/// one user); it only labels what the state shows, no bound depends on it.
pub const BURST_MIN: u64 = 20;

/// What the queue's state did to an answer (qbets.md §8).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StateAnswer {
    /// The queue as a job submitted at the answer's instant finds it.
    pub view: QueueView,
    /// The depth class of `view.own_ahead`: `[lo, hi]` own jobs ahead.
    pub depth_class: (u64, u64),
    /// Seconds per own job ahead added to the class's bound at the promise level (absent
    /// with no own job ahead or no evidence at any depth).
    pub per_job_s: Option<f64>,
    /// Where that came from.
    pub evidence: Evidence,
    /// The level the class's bound was taken at: above the asked quantile while the
    /// depth class's recent promises miss too often (`misses`).
    pub level: f64,
}

/// The answer for a pending job ([`QueuePredictor::remaining`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemainingAnswer {
    pub status: Status,
    /// How long it has waited so far.
    pub elapsed_s: u64,
    /// Upper bound on the rest of its wait, seconds.
    pub bound_s: Option<u64>,
    /// Lower bound on the probability of starting by the deadline asked.
    pub probability: Option<f64>,
    /// Past jobs of its cluster that had waited at least as long.
    pub history: usize,
    pub cluster: Option<ClusterRange>,
    pub at: i64,
}

/// A range of one attribute: `[lo, hi]`, `hi` absent for the open-ended top interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrRange {
    pub attribute: AttrKind,
    pub lo: u64,
    pub hi: Option<u64>,
}

/// The attribute ranges of a cluster: which jobs it speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterRange {
    pub primary: AttrRange,
    /// The nodes range inside the walltime range (two-level clustering only).
    pub secondary: Option<AttrRange>,
}

/// Answer to a bound query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundAnswer {
    pub status: Status,
    /// The bound in whole seconds, when `status` is `ok`.
    pub bound_s: Option<u64>,
    pub quantile: f64,
    pub confidence: f64,
    /// The cluster whose history answered (absent when the queue is maybe down).
    pub cluster: Option<ClusterRange>,
    /// Waits in that cluster's window.
    pub history: usize,
    /// The queue's state behind the answer (with `state` or `misses` on and the queue
    /// up).
    pub state: Option<StateAnswer>,
    /// The time the answer speaks for (seconds, the caller's epoch).
    pub at: i64,
}

/// Answer to a deadline query: the probability of starting within `deadline_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbabilityAnswer {
    pub status: Status,
    /// With the binomial method, the Clopper–Pearson lower level-C bound on
    /// P(wait ≤ deadline); with a parametric method, its model probability.
    pub probability: Option<f64>,
    pub deadline_s: u64,
    pub confidence: f64,
    pub cluster: Option<ClusterRange>,
    pub history: usize,
    pub state: Option<StateAnswer>,
    pub at: i64,
}

/// One cluster as listed for people: range, window size and its current 0.95/0.95 bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterInfo {
    pub range: ClusterRange,
    /// Waits in the cluster's window.
    pub n: usize,
    /// Upper 0.95-confidence bound on the 0.95 quantile, seconds.
    pub bound_95_s: Option<u64>,
    /// Change points detected in this cluster's window since it was (re)built.
    pub trims: u64,
}

/// The queue's state at an instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueState {
    /// `ok` when up, `maybe_down` when availability inference says it may be down.
    pub status: Status,
    pub down_since: Option<i64>,
    pub last_release: Option<i64>,
    pub arrivals_since_release: u64,
    /// Waits that entered the history, and starts kept out because they overlapped a
    /// maybe-down period.
    pub observed: u64,
    pub excluded_down: u64,
    /// Change points detected in the wait windows (§2), censored ones included, since
    /// the predictor was made (re-clustering rebuilds do not count).
    pub change_points: u64,
    /// Jobs arrived and not yet started (or departed); tracked with `censored` on
    /// (0 otherwise).
    pub pending: usize,
    /// Pending jobs known to have waited longer than their cluster's bound (§7).
    pub censored: usize,
    /// Promises known missed (jobs that waited, or are still waiting, longer than the
    /// bound they were given at submission), with `misses` on.
    pub missed: u64,
    /// Users with pending jobs (those with a user), with how many.
    pub users_pending: usize,
    /// The pending counts of users with a burst pending (at least [`BURST_MIN`] jobs),
    /// largest first; who they are is not said.
    pub bursts: Vec<u64>,
    pub at: i64,
}

/// One cluster: its interval(s), its window and its pending jobs not yet known to
/// exceed its bound (keys of [`QueuePredictor::pending`], oldest first).
#[derive(Debug, Clone)]
struct Slot {
    primary: Interval,
    secondary: Option<Interval>,
    series: Series,
    waiting: BTreeSet<PendingKey>,
}

/// A pending job's key: submit time, then a sequence number (ties in arrival order).
type PendingKey = (i64, u64);

/// A job that has arrived and not yet started.
#[derive(Debug, Clone, Copy)]
struct Pending {
    shape: JobShape,
    user: Option<u32>,
    /// The queue as the job found it.
    view: QueueView,
    /// Its cluster's slot.
    slot: usize,
    /// Its class's bound at submission at the promise level (`state`, own jobs ahead).
    given: Option<u64>,
    /// Its whole bound at submission at the promise level, until the outcome is known
    /// (`misses`).
    promised: Option<u64>,
    /// The same bound, kept to the job's start (for [`Calibration`]).
    promise: Option<u64>,
    /// Known to exceed its cluster's bound (held in the slot's censored set).
    exceeded: bool,
}

/// A primary interval with its secondary intervals (two-level) and their slots.
#[derive(Debug, Clone)]
struct Primary {
    interval: Interval,
    /// Secondary intervals; empty for single-level clustering.
    secondary: Vec<Interval>,
    /// Index of the first slot of this primary interval in `slots`.
    first_slot: usize,
}

/// A stored observation for re-clustering.
#[derive(Debug, Clone, Copy)]
struct Obs {
    shape: JobShape,
    view: QueueView,
    wait: u64,
}

/// The online QBETS predictor of one queue.
#[derive(Debug, Clone)]
pub struct QueuePredictor {
    config: Config,
    params: SeriesParams,
    min_cluster: usize,
    primaries: Vec<Primary>,
    slots: Vec<Slot>,
    history: VecDeque<Obs>,
    since_recluster: usize,
    avail: Availability,
    observed: u64,
    excluded_down: u64,
    change_points: u64,
    reclusterings: u64,
    pending: BTreeMap<PendingKey, Pending>,
    /// Pending jobs per user (users with none are not kept).
    users: HashMap<u32, u64>,
    next_seq: u64,
    censored_now: usize,
    /// The depth term's scores (`state`).
    depth: Depth,
    /// Recent outcomes of promises (`misses`), and the open promises by deadline.
    guard: Guard,
    deadlines: BTreeSet<(i64, PendingKey)>,
    /// How the promises came out (for people and `/metrics`).
    calibration: Calibration,
}

/// The whole attribute axis, before the first clustering.
const EVERYTHING: Interval = Interval {
    lo: 0,
    hi: u64::MAX,
    n: 0,
};

impl QueuePredictor {
    /// A predictor with no history, after validating `config`.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        let params = SeriesParams {
            trim: config.features.trim,
            // The cap belongs to trimming (qbets.md §2): the plain method of Table 4.1
            // uses the whole history.
            cap: if config.features.trim {
                config.window_cap
            } else {
                usize::MAX
            },
            trim_quantile: config.trim_quantile,
            trim_confidence: config.trim_confidence,
            tail_run: config.tail_run,
        };
        let min_cluster = min_history(config.trim_quantile, config.trim_confidence);
        Ok(Self {
            primaries: vec![Primary {
                interval: EVERYTHING,
                secondary: Vec::new(),
                first_slot: 0,
            }],
            slots: vec![Slot {
                primary: EVERYTHING,
                secondary: None,
                series: Series::new(config.method, params),
                waiting: BTreeSet::new(),
            }],
            params,
            min_cluster,
            history: VecDeque::new(),
            since_recluster: 0,
            avail: Availability::new(
                params,
                config.avail_quantile,
                config.avail_confidence,
                config.avail_rule,
                config.avail_min_gap_s,
            ),
            observed: 0,
            excluded_down: 0,
            change_points: 0,
            reclusterings: 0,
            pending: BTreeMap::new(),
            users: HashMap::new(),
            next_seq: 0,
            censored_now: 0,
            depth: Depth::new(min_cluster, config.window_cap),
            guard: Guard::new(config.trim_quantile, min_cluster),
            deadlines: BTreeSet::new(),
            calibration: Calibration::default(),
            config,
        })
    }

    /// A predictor that has seen `jobs` (started ones and pending ones) in the order of
    /// qbets.md §6 — how the service rebuilds a queue's predictor from stored jobs; the
    /// replay reaches the same state after its last event.
    pub fn from_jobs(config: Config, jobs: &[JobRecord]) -> Result<Self, ConfigError> {
        let mut p = Self::new(config)?;
        for ev in event_stream(jobs) {
            p.observe(&ev, &jobs[ev.job]);
        }
        Ok(p)
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Applies one event of the stream (`job` is the record the event names).
    pub fn observe(&mut self, ev: &Event, job: &JobRecord) {
        match ev.kind {
            EventKind::Arrival => self.observe_arrival_of(job.submit, job.shape, job.user),
            EventKind::Start => {
                if let Some(start) = job.start {
                    self.observe_start_of(job.submit, start, job.shape, job.user);
                }
            }
        }
    }

    /// A job of `shape` was submitted at `at` by a user the caller does not name; it is
    /// pending until it starts.
    pub fn observe_arrival(&mut self, at: i64, shape: JobShape) {
        self.observe_arrival_of(at, shape, None);
    }

    /// A job of `shape` was submitted at `at` by `user`; it is pending until it starts.
    pub fn observe_arrival_of(&mut self, at: i64, shape: JobShape, user: Option<u32>) {
        self.advance(at);
        if self.config.features.avail {
            self.avail.observe_arrival(at);
        }
        if !self.tracks_pending() {
            // Pending jobs matter only to the features that read them; the plain path
            // stays lean.
            return;
        }
        let view = self.view(user);
        let key = (at, self.next_seq);
        self.next_seq += 1;
        let slot = self.slot_of(shape, view);
        let (q0, c0) = self.promise_level();
        let given = (self.config.features.state && view.own_ahead > 0 && self.is_up(at))
            .then(|| self.slots[slot].series.upper_at(q0, c0, at).map(seconds))
            .flatten();
        let promised = self
            .config
            .features
            .misses
            .then(|| self.bound_for(at, shape, user, q0, c0).bound_s)
            .flatten();
        if let Some(b) = promised {
            self.deadlines.insert((deadline(at, b), key));
        }
        self.pending.insert(
            key,
            Pending {
                shape,
                user,
                view,
                slot,
                given,
                promised,
                promise: promised,
                exceeded: false,
            },
        );
        if let Some(u) = user {
            *self.users.entry(u).or_insert(0) += 1;
        }
        if self.config.features.censored {
            self.slots[slot].waiting.insert(key);
        }
    }

    /// Whether pending jobs are tracked: for the features that read them.
    fn tracks_pending(&self) -> bool {
        let f = self.config.features;
        f.censored || f.state || f.misses || self.config.attribute.reads_queue()
    }

    /// The level every job's bound is recorded at when it is submitted: its promise
    /// (the change-point test's levels, 0.95/0.95).
    fn promise_level(&self) -> (f64, f64) {
        (self.config.trim_quantile, self.config.trim_confidence)
    }

    fn is_up(&self, now: i64) -> bool {
        !(self.config.features.avail && self.avail.down_since(now).is_some())
    }

    /// The queue as a job of `user` submitted now finds it (`user` `None`: a user with
    /// no job pending here). Pending jobs are known only with a feature that tracks
    /// them; otherwise the view is empty.
    pub fn view(&self, user: Option<u32>) -> QueueView {
        QueueView {
            ahead: self.pending.len() as u64,
            own_ahead: user.and_then(|u| self.users.get(&u).copied()).unwrap_or(0),
        }
    }

    /// Users with pending jobs and how many each has, most first (ties by user).
    pub fn users_pending(&self) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = self.users.iter().map(|(&u, &n)| (u, n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// A job submitted at `submit` started at `start`: it leaves the pending set and its
    /// wait (start − submit; a negative wait is ignored) enters its cluster's history,
    /// unless availability inference finds that it waited through a maybe-down period.
    pub fn observe_start(&mut self, submit: i64, start: i64, shape: JobShape) {
        self.observe_start_of(submit, start, shape, None);
    }

    /// [`QueuePredictor::observe_start`] of a job of `user`.
    pub fn observe_start_of(
        &mut self,
        submit: i64,
        start: i64,
        shape: JobShape,
        user: Option<u32>,
    ) {
        self.advance(start);
        let pending = self.take_pending(submit, shape, user);
        if let Some(p) = pending
            && let Some(b) = p.promised
        {
            // Still open at its start: a miss would have been known at its deadline.
            let kept = u64::try_from(start - submit).is_ok_and(|w| w <= b);
            self.guard.record(depth::class_of(p.view.own_ahead), !kept);
        }
        if let Some(b) = pending.and_then(|p| p.promise)
            && let Ok(w) = u64::try_from(start - submit)
        {
            self.calibration.record(w, b);
        }
        let view = pending.map_or_else(QueueView::default, |p| p.view);
        if self.config.features.avail {
            self.avail.observe_release(start);
            if self.config.exclude_down_waits && self.avail.overlaps_down(submit, start) {
                self.excluded_down += 1;
                return;
            }
        }
        let Ok(wait) = u64::try_from(start - submit) else {
            return;
        };
        self.observed += 1;
        match pending.and_then(|p| p.given.map(|g| (p.view.own_ahead, g))) {
            Some((k, given)) => self.depth.observe(k, given, wait),
            None => self.depth.observe_wait(wait),
        }
        let slot = self.slot_of(shape, view);
        if pending.is_some_and(|p| p.exceeded) {
            // Counted in the change-point test when it outlived the bound.
            self.slots[slot].series.observe_counted(wait);
        } else {
            self.change_points += u64::from(self.slots[slot].series.observe(wait));
        }
        if self.config.features.cluster {
            self.history.push_back(Obs { shape, view, wait });
            if self.history.len() > self.config.history_cap {
                self.history.pop_front();
            }
            self.since_recluster += 1;
            if self.since_recluster >= self.config.recluster_every {
                self.recluster();
            }
        }
    }

    /// A job submitted at `submit` left the queue at `at` without starting (cancelled
    /// while pending): it is no longer pending and no wait is learnt.
    pub fn observe_departure(&mut self, submit: i64, at: i64, shape: JobShape) {
        self.observe_departure_of(submit, at, shape, None);
    }

    /// [`QueuePredictor::observe_departure`] of a job of `user`.
    pub fn observe_departure_of(
        &mut self,
        submit: i64,
        at: i64,
        shape: JobShape,
        user: Option<u32>,
    ) {
        self.advance(at);
        self.take_pending(submit, shape, user);
    }

    /// A job of another queue of the same machine arrived at `at`. Counted by
    /// availability inference when its scope is the machine; ignored otherwise.
    pub fn observe_machine_arrival(&mut self, at: i64) {
        if self.config.features.avail && self.config.avail_scope == AvailScope::Machine {
            self.avail.observe_arrival(at);
        }
    }

    /// A job of another queue of the same machine started at `at` (see
    /// [`QueuePredictor::observe_machine_arrival`]).
    pub fn observe_machine_release(&mut self, at: i64) {
        if self.config.features.avail && self.config.avail_scope == AvailScope::Machine {
            self.avail.observe_release(at);
        }
    }

    /// Brings the predictor to `now` (qbets.md §7, with `censored` on): each pending job
    /// that has by now waited longer than its cluster's change-point bound is counted as
    /// a known exceedance, oldest first, and may complete a change point. Idempotent
    /// for a given `now`; a no-op without `censored`.
    pub fn advance(&mut self, now: i64) {
        // Promises outlived by now are misses, known before their jobs start.
        while let Some(&(due, key)) = self.deadlines.first() {
            if due >= now {
                break;
            }
            self.deadlines.pop_first();
            if let Some(p) = self.pending.get_mut(&key) {
                p.promised = None;
                self.guard.record(depth::class_of(p.view.own_ahead), true);
            }
        }
        if !self.config.features.censored {
            return;
        }
        let (q, c) = (self.config.trim_quantile, self.config.trim_confidence);
        for slot in &mut self.slots {
            while let Some(&key) = slot.waiting.first() {
                // The bound is re-read each time: a change point moves it.
                // §2's upper bound of the observed window: measured against the bound
                // with the censored waits in (EVALUATION.md), it catches bursts sooner.
                let Some(b) = slot.series.upper(q, c) else {
                    break;
                };
                if (now.saturating_sub(key.0) as f64) <= b {
                    break;
                }
                slot.waiting.pop_first();
                if let Some(p) = self.pending.get_mut(&key) {
                    p.exceeded = true;
                }
                self.censored_now += 1;
                self.change_points += u64::from(slot.series.observe_exceedance(key.0));
            }
        }
    }

    /// Removes the pending job `(submit, shape, user)` (the first arrived of identical
    /// ones) from the pending set, its user's count, its cluster and the open promises.
    fn take_pending(&mut self, submit: i64, shape: JobShape, user: Option<u32>) -> Option<Pending> {
        let key = self
            .pending
            .range((submit, 0)..=(submit, u64::MAX))
            .find(|(_, p)| p.shape == shape && p.user == user)
            .map(|(k, _)| *k)?;
        let p = self.pending.remove(&key)?;
        if let Some(b) = p.promised {
            self.deadlines.remove(&(deadline(key.0, b), key));
        }
        if let Some(u) = p.user
            && let Some(n) = self.users.get_mut(&u)
        {
            *n -= 1;
            if *n == 0 {
                self.users.remove(&u);
            }
        }
        let slot = &mut self.slots[p.slot];
        if p.exceeded {
            slot.series.forget_censored(submit);
            self.censored_now -= 1;
        } else {
            slot.waiting.remove(&key);
        }
        Some(p)
    }

    fn primary_value(&self, shape: JobShape, view: QueueView) -> u64 {
        self.config.attribute.levels().0.value(shape, view)
    }

    fn secondary_value(&self, shape: JobShape, view: QueueView) -> u64 {
        self.config
            .attribute
            .levels()
            .1
            .map_or(0, |a| a.value(shape, view))
    }

    fn primary_name(&self) -> AttrKind {
        self.config.attribute.levels().0
    }

    fn slot_of(&self, shape: JobShape, view: QueueView) -> usize {
        let p = if self.primaries.len() == 1 {
            0
        } else {
            let v = self.primary_value(shape, view);
            self.primaries
                .partition_point(|pr| pr.interval.lo <= v)
                .saturating_sub(1)
        };
        let pr = &self.primaries[p];
        if pr.secondary.is_empty() {
            pr.first_slot
        } else {
            pr.first_slot + cluster::assign(&pr.secondary, self.secondary_value(shape, view))
        }
    }

    /// Re-clusters on the stored history and rebuilds the windows of clusters whose
    /// ranges changed by running §2 over their series; a cluster whose ranges are
    /// unchanged keeps its window, which is what that rebuild would reproduce.
    fn recluster(&mut self) {
        self.since_recluster = 0;
        self.reclusterings += 1;
        let primary: Vec<Interval> = cluster::cluster(
            self.history
                .iter()
                .map(|o| (self.primary_value(o.shape, o.view), o.wait)),
            self.min_cluster,
            self.config.k_max,
        );
        if primary.is_empty() {
            return;
        }
        let two_level = self.config.attribute.levels().1.is_some();
        let mut primaries = Vec::with_capacity(primary.len());
        let mut layout: Vec<(Interval, Option<Interval>)> = Vec::new();
        for (i, iv) in primary.iter().enumerate() {
            let secondary = if two_level {
                let v = self
                    .history
                    .iter()
                    .filter(|o| cluster::assign(&primary, self.primary_value(o.shape, o.view)) == i)
                    .map(|o| (self.secondary_value(o.shape, o.view), o.wait));
                cluster::cluster(v, self.min_cluster, self.config.k_max)
            } else {
                Vec::new()
            };
            primaries.push(Primary {
                interval: *iv,
                secondary: secondary.clone(),
                first_slot: layout.len(),
            });
            if secondary.is_empty() {
                layout.push((*iv, None));
            } else {
                layout.extend(secondary.iter().map(|s| (*iv, Some(*s))));
            }
        }
        // Effective ranges (what assignment uses) decide whether a cluster is unchanged.
        let key = |prims: &[Primary],
                   slot: usize,
                   slots_layout: &[(Interval, Option<Interval>)]| {
            let (pi, si) = slots_layout[slot];
            let p_idx = prims
                .iter()
                .position(|p| p.interval == pi)
                .expect("slot's primary exists");
            let p_range = effective(&prims.iter().map(|p| p.interval).collect::<Vec<_>>(), p_idx);
            let s_range = si.map(|s| {
                let secs = &prims[p_idx].secondary;
                let j = secs
                    .iter()
                    .position(|x| *x == s)
                    .expect("slot's secondary exists");
                effective(secs, j)
            });
            (p_range, s_range)
        };
        let old_layout: Vec<(Interval, Option<Interval>)> = self
            .slots
            .iter()
            .map(|s| (s.primary, s.secondary))
            .collect();
        let old_keys: Vec<_> = (0..self.slots.len())
            .map(|i| key(&self.primaries, i, &old_layout))
            .collect();
        let mut old_slots: Vec<Option<Slot>> = std::mem::take(&mut self.slots)
            .into_iter()
            .map(Some)
            .collect();
        let new_keys: Vec<_> = (0..layout.len())
            .map(|i| key(&primaries, i, &layout))
            .collect();

        let mut slots: Vec<Option<Slot>> = vec![None; layout.len()];
        let mut rebuild = vec![false; layout.len()];
        for (i, k) in new_keys.iter().enumerate() {
            if let Some(j) = old_keys.iter().position(|o| o == k)
                && let Some(mut s) = old_slots[j].take()
            {
                s.primary = layout[i].0;
                s.secondary = layout[i].1;
                slots[i] = Some(s);
            } else {
                rebuild[i] = true;
            }
        }
        self.primaries = primaries;
        if rebuild.iter().any(|&r| r) {
            let mut values: Vec<Vec<u64>> = vec![Vec::new(); layout.len()];
            for o in &self.history {
                let s = self.slot_of(o.shape, o.view);
                if rebuild[s] {
                    values[s].push(o.wait);
                }
            }
            for (i, vals) in values.into_iter().enumerate() {
                if rebuild[i] {
                    slots[i] = Some(Slot {
                        primary: layout[i].0,
                        secondary: layout[i].1,
                        series: Series::replayed(self.config.method, self.params, vals),
                        waiting: BTreeSet::new(),
                    });
                }
            }
        }
        self.slots = slots
            .into_iter()
            .map(|s| s.expect("every slot filled"))
            .collect();
        self.reslot_pending();
    }

    /// Puts every pending job into the cluster its shape now falls in; known
    /// exceedances stay known (they are not counted again).
    fn reslot_pending(&mut self) {
        for slot in &mut self.slots {
            slot.waiting.clear();
            slot.series.clear_censored();
        }
        let to: Vec<usize> = self
            .pending
            .values()
            .map(|p| self.slot_of(p.shape, p.view))
            .collect();
        for ((key, p), slot) in self.pending.iter_mut().zip(to) {
            p.slot = slot;
            if p.exceeded {
                self.slots[slot].series.add_censored(key.0);
            } else {
                self.slots[slot].waiting.insert(*key);
            }
        }
    }

    fn range_of(&self, slot: usize) -> ClusterRange {
        let s = &self.slots[slot];
        let prims: Vec<Interval> = self.primaries.iter().map(|p| p.interval).collect();
        let p_idx = prims.iter().position(|p| *p == s.primary).unwrap_or(0);
        let (lo, hi) = effective(&prims, p_idx);
        let secondary = s.secondary.and_then(|sec| {
            let secs = &self.primaries[p_idx].secondary;
            let j = secs.iter().position(|x| *x == sec)?;
            let (lo, hi) = effective(secs, j);
            Some(AttrRange {
                attribute: self.config.attribute.levels().1.unwrap_or(AttrKind::Nodes),
                lo,
                hi,
            })
        });
        ClusterRange {
            primary: AttrRange {
                attribute: self.primary_name(),
                lo,
                hi,
            },
            secondary,
        }
    }

    /// The slot that answers for a job of `shape` and `user` at `now`, with the queue as
    /// it finds it, or `None` while availability inference says the queue may be down.
    fn answering(&self, now: i64, shape: JobShape, view: QueueView) -> Option<(usize, QueueView)> {
        if !self.is_up(now) {
            return None;
        }
        Some((self.slot_of(shape, view), view))
    }

    /// The queue as a job with `own_ahead` of its user's jobs pending ahead finds it
    /// (what a caller who does not name the user says of them).
    pub fn view_behind(&self, own_ahead: u64) -> QueueView {
        QueueView {
            own_ahead,
            ..self.view(None)
        }
    }

    /// The level a job of depth class `class` is answered at for `quantile`: raised while
    /// the class's recent promises miss too often (`misses`), but never past the level at
    /// which a window of `n` values (with confidence `confidence`) still gives a bound.
    fn level(&self, class: usize, quantile: f64, confidence: f64, n: usize) -> f64 {
        if !self.config.features.misses {
            return quantile;
        }
        let raised = self.guard.level(class, quantile);
        if raised <= quantile {
            return quantile;
        }
        // The bound exists iff 1 − q^n ≥ C; step down to a level that gives one.
        let top = (1.0 - confidence).powf(1.0 / n.max(1) as f64);
        let level = raised.min(top);
        if level > quantile && upper_rank(n, level, confidence).is_some() {
            level
        } else {
            quantile
        }
    }

    /// Upper level-`confidence` bound on the `quantile` of the wait of a job of `shape`
    /// submitted at `now` by a user with no job pending here. Levels outside (0, 1) give
    /// `insufficient_history`.
    pub fn bound(&self, now: i64, shape: JobShape, quantile: f64, confidence: f64) -> BoundAnswer {
        self.bound_for(now, shape, None, quantile, confidence)
    }

    /// [`QueuePredictor::bound`] for a job of `user`: its own pending jobs ahead of it
    /// count (qbets.md §8).
    pub fn bound_for(
        &self,
        now: i64,
        shape: JobShape,
        user: Option<u32>,
        quantile: f64,
        confidence: f64,
    ) -> BoundAnswer {
        self.bound_in(now, shape, self.view(user), quantile, confidence)
    }

    /// [`QueuePredictor::bound`] for a job that finds the queue as `view` says (e.g.
    /// [`QueuePredictor::view_behind`]).
    pub fn bound_in(
        &self,
        now: i64,
        shape: JobShape,
        view: QueueView,
        quantile: f64,
        confidence: f64,
    ) -> BoundAnswer {
        let found = self.answering(now, shape, view);
        let levels_ok = valid_level(quantile) && valid_level(confidence);
        let mut state = None;
        let bound = found.and_then(|(slot, view)| {
            let series = &self.slots[slot].series;
            let class = depth::class_of(view.own_ahead);
            let level = if levels_ok {
                self.level(
                    class,
                    quantile,
                    confidence,
                    series.len() + series.censored_len(),
                )
            } else {
                quantile
            };
            let mut answer = StateAnswer {
                view,
                depth_class: depth::class_range(class),
                per_job_s: None,
                evidence: Evidence::None,
                level,
            };
            let base = levels_ok
                .then(|| series.upper_at(level, confidence, now))
                .flatten();
            let bound = match base {
                Some(base) if self.config.features.state && view.own_ahead > 0 => {
                    let (q0, c0) = self.promise_level();
                    // Behind its own jobs with no evidence at or below its depth, the
                    // class's bound answers alone (the state says so).
                    match series.upper_at(q0, c0, now).and_then(|base0| {
                        self.depth
                            .bound(view.own_ahead, base, base0, quantile, confidence)
                    }) {
                        Some((b, t)) => {
                            answer.per_job_s = Some(t.per_job_s);
                            answer.evidence = t.evidence;
                            Some(b)
                        }
                        None => Some(base),
                    }
                }
                other => other,
            };
            state = self.shows_state().then_some(answer);
            bound
        });
        BoundAnswer {
            status: status(found.is_some(), bound.is_some()),
            bound_s: bound.map(seconds),
            quantile,
            confidence,
            history: found.map_or(0, |(slot, _)| self.slots[slot].series.len()),
            cluster: found.map(|(slot, _)| self.range_of(slot)),
            state,
            at: now,
        }
    }

    /// The bound on the rest of the wait of a pending job of `shape` that finds the
    /// queue as `view` says, submitted at `submit` and still waiting at `now`, and the
    /// probability that it starts by `now + deadline_s` (when asked): both from the past
    /// jobs of its cluster that waited at least as long (qbets.md §8). Its own jobs
    /// still ahead add the depth term as for a new job.
    pub fn remaining(
        &self,
        now: i64,
        submit: i64,
        shape: JobShape,
        view: QueueView,
        deadline_s: Option<u64>,
        (quantile, confidence): (f64, f64),
    ) -> RemainingAnswer {
        let elapsed = u64::try_from(now.saturating_sub(submit)).unwrap_or(0);
        let found = self.answering(now, shape, view);
        let levels_ok = valid_level(quantile) && valid_level(confidence);
        let (mut bound, n, mut probability) = match found {
            Some((slot, _)) if levels_ok => {
                let series = &self.slots[slot].series;
                let (b, n) = series.remaining_upper(elapsed, quantile, confidence);
                let p =
                    deadline_s.and_then(|d| series.remaining_probability(elapsed, d, confidence));
                (b, n, p)
            }
            _ => (None, 0, None),
        };
        if let (Some(b), Some((slot, view))) = (bound, found)
            && self.config.features.state
            && view.own_ahead > 0
        {
            let series = &self.slots[slot].series;
            let (q0, c0) = self.promise_level();
            if let Some(base0) = series.upper_at(q0, c0, now)
                && let Some((whole, _)) =
                    self.depth
                        .bound(view.own_ahead, 0.0, base0, quantile, confidence)
            {
                // Behind its own jobs: at least what is left of the depth term.
                bound = Some(b.max(seconds((whole - elapsed as f64).max(0.0))));
                if let Some(d) = deadline_s
                    && let Some((pd, _)) = self.depth.probability(
                        view.own_ahead,
                        base0,
                        d.saturating_add(elapsed),
                        confidence,
                    )
                {
                    probability = probability.map(|p| p.min(pd));
                }
            }
        }
        RemainingAnswer {
            status: status(found.is_some(), bound.is_some()),
            elapsed_s: elapsed,
            bound_s: bound,
            probability,
            history: n,
            cluster: found.map(|(slot, _)| self.range_of(slot)),
            at: now,
        }
    }

    /// Whether answers carry the queue's state.
    fn shows_state(&self) -> bool {
        self.config.features.state || self.config.features.misses
    }

    /// The probability that a job of `shape` submitted at `now` starts within
    /// `deadline_s` seconds, at level `confidence` (qbets.md §1, the inverted QBETS), for
    /// a user with no job pending here.
    pub fn probability(
        &self,
        now: i64,
        shape: JobShape,
        deadline_s: u64,
        confidence: f64,
    ) -> ProbabilityAnswer {
        self.probability_for(now, shape, None, deadline_s, confidence)
    }

    /// [`QueuePredictor::probability`] for a job of `user`. It is the inverse of
    /// [`QueuePredictor::bound_for`]: with own jobs ahead, the depth class's scores say
    /// how likely the deadline is (the least of that and the class's own probability);
    /// while the class's promises miss too often, the chance of missing is scaled up
    /// as the bound's level is.
    pub fn probability_for(
        &self,
        now: i64,
        shape: JobShape,
        user: Option<u32>,
        deadline_s: u64,
        confidence: f64,
    ) -> ProbabilityAnswer {
        self.probability_in(now, shape, self.view(user), deadline_s, confidence)
    }

    /// [`QueuePredictor::probability`] for a job that finds the queue as `view` says.
    pub fn probability_in(
        &self,
        now: i64,
        shape: JobShape,
        view: QueueView,
        deadline_s: u64,
        confidence: f64,
    ) -> ProbabilityAnswer {
        let found = self.answering(now, shape, view);
        let mut state = None;
        let p = found.and_then(|(slot, view)| {
            if !valid_level(confidence) {
                return None;
            }
            let series = &self.slots[slot].series;
            let class = depth::class_of(view.own_ahead);
            let mut p = series.probability_within(deadline_s, confidence)?;
            let mut answer = StateAnswer {
                view,
                depth_class: depth::class_range(class),
                per_job_s: None,
                evidence: Evidence::None,
                level: 0.0,
            };
            if self.config.features.state && view.own_ahead > 0 {
                let (q0, c0) = self.promise_level();
                if let Some(base0) = series.upper_at(q0, c0, now)
                    && let Some((pd, evidence)) =
                        self.depth
                            .probability(view.own_ahead, base0, deadline_s, confidence)
                {
                    p = p.min(pd);
                    answer.evidence = evidence;
                }
            }
            if self.config.features.misses {
                let rho = self.guard.scale(class);
                p = (1.0 - (1.0 - p) / rho).max(0.0);
            }
            let q0 = self.promise_level().0;
            answer.level = if self.config.features.misses {
                self.guard.level(class, q0)
            } else {
                q0
            };
            state = self.shows_state().then_some(answer);
            Some(p)
        });
        ProbabilityAnswer {
            status: status(found.is_some(), p.is_some()),
            probability: p,
            deadline_s,
            confidence,
            history: found.map_or(0, |(slot, _)| self.slots[slot].series.len()),
            cluster: found.map(|(slot, _)| self.range_of(slot)),
            state,
            at: now,
        }
    }

    /// The clusters, in attribute order, each with the 0.95/0.95 bound a job of its
    /// shape submitted at `now` gets from [`Predictor::bound`]: none while the queue
    /// may be down, and counting the waits of its jobs still pending at `now`.
    pub fn clusters(&self, now: i64) -> Vec<ClusterInfo> {
        let up = !(self.config.features.avail && self.avail.down_since(now).is_some());
        (0..self.slots.len())
            .map(|i| {
                let s = &self.slots[i].series;
                ClusterInfo {
                    range: self.range_of(i),
                    n: s.len(),
                    bound_95_s: up
                        .then(|| s.upper_at(0.95, 0.95, now))
                        .flatten()
                        .map(seconds),
                    trims: s.trims(),
                }
            })
            .collect()
    }

    /// How many clusters (service classes) the queue is split into.
    pub fn cluster_count(&self) -> usize {
        self.slots.len()
    }

    /// The queue's state at `now`.
    pub fn state(&self, now: i64) -> QueueState {
        let down_since = if self.config.features.avail {
            self.avail.down_since(now)
        } else {
            None
        };
        QueueState {
            status: if down_since.is_some() {
                Status::MaybeDown
            } else {
                Status::Ok
            },
            down_since,
            last_release: self.avail_last_release(),
            arrivals_since_release: self.avail.arrivals_since_release(),
            observed: self.observed,
            excluded_down: self.excluded_down,
            change_points: self.change_points,
            pending: self.pending.len(),
            censored: self.censored_now,
            missed: self.guard.misses(),
            users_pending: self.users.len(),
            bursts: self
                .users_pending()
                .into_iter()
                .map(|(_, n)| n)
                .take_while(|&n| n >= BURST_MIN)
                .collect(),
            at: now,
        }
    }

    fn avail_last_release(&self) -> Option<i64> {
        self.avail.last_release()
    }

    /// How the queue's promises came out (promises are recorded with `misses`).
    pub fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    /// How many times the queue has been re-clustered.
    pub fn reclusterings(&self) -> u64 {
        self.reclusterings
    }

    /// The method bounds are computed with.
    pub fn method(&self) -> Method {
        self.config.method
    }
}

/// The status of an answer: maybe down when no window answered, else whether it had a
/// number.
fn status(up: bool, answered: bool) -> Status {
    match (up, answered) {
        (false, _) => Status::MaybeDown,
        (true, true) => Status::Ok,
        (true, false) => Status::InsufficientHistory,
    }
}

/// When a promise of `bound` seconds made at `submit` is outlived.
fn deadline(submit: i64, bound: u64) -> i64 {
    submit.saturating_add(i64::try_from(bound).unwrap_or(i64::MAX))
}

/// A bound in seconds rounded up to a whole second (parametric bounds are real).
fn seconds(b: f64) -> u64 {
    if b.is_nan() || b <= 0.0 {
        0
    } else if b >= u64::MAX as f64 {
        u64::MAX
    } else {
        b.ceil() as u64
    }
}

/// The range an interval speaks for under [`cluster::assign`]: from its own lower end
/// (0 for the first) to just below the next interval's lower end (open for the last).
fn effective(ivs: &[Interval], i: usize) -> (u64, Option<u64>) {
    let lo = if i == 0 { 0 } else { ivs[i].lo };
    let hi = ivs.get(i + 1).map(|n| n.lo - 1);
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Features;

    fn shape(nodes: u64, walltime_s: u64) -> JobShape {
        JobShape { nodes, walltime_s }
    }

    #[test]
    fn the_predictor_can_be_shared_across_threads() {
        fn check<T: Send + Sync + Clone + std::fmt::Debug + 'static>() {}
        check::<QueuePredictor>();
    }

    #[test]
    fn online_use_answers_with_status_cluster_and_time() {
        let mut p = QueuePredictor::new(Config {
            features: Features::NONE,
            ..Config::default()
        })
        .unwrap();
        let s = shape(4, 3600);
        let a = p.bound(100, s, 0.95, 0.95);
        assert_eq!(a.status, Status::InsufficientHistory);
        assert_eq!((a.bound_s, a.history, a.at), (None, 0, 100));
        for i in 0..59 {
            p.observe_arrival(i * 10, s);
            p.observe_start(i * 10, i * 10 + i, s); // waits 0..=58
        }
        let a = p.bound(1000, s, 0.95, 0.95);
        assert_eq!((a.status, a.bound_s, a.history), (Status::Ok, Some(58), 59));
        assert_eq!(a.cluster.unwrap().primary.lo, 0);
        // The deadline probability is consistent with the bound.
        let d = p.probability(1000, s, 58, 0.95);
        assert!(d.probability.unwrap() > 0.95, "{d:?}");
        let d = p.probability(1000, s, 29, 0.95);
        let q = d.probability.unwrap();
        assert!(q > 0.3 && q < 0.5, "{q}");
        let b = p.bound(1000, s, q, 0.95).bound_s.unwrap();
        assert!(b <= 29, "bound at q* = {b} must be within the deadline");
        // Invalid levels are an answer, not a panic.
        assert_eq!(
            p.bound(1000, s, 1.5, 0.95).status,
            Status::InsufficientHistory
        );
        let json = serde_json::to_value(p.bound(1000, s, 0.95, 0.95)).unwrap();
        assert_eq!(json["status"], "ok");
        assert_eq!(json["cluster"]["primary"]["attribute"], "nodes");
        let st = p.state(1000);
        assert_eq!((st.status, st.observed), (Status::Ok, 59));
    }

    #[test]
    fn a_stopped_queue_is_maybe_down_until_the_next_release() {
        let mut p = QueuePredictor::new(Config::default()).unwrap();
        let s = shape(1, 600);
        let mut t = 0;
        for i in 0..400 {
            t += 60;
            p.observe_arrival(t, s);
            p.observe_start(t, t + 5 + i % 7, s);
        }
        let last = t + 5; // the last job (i = 399) waited 5 + 399 % 7 = 5 s
        assert_eq!(p.bound(last + 30, s, 0.95, 0.95).status, Status::Ok);
        assert!(p.clusters(last + 30)[0].bound_95_s.is_some());
        // No release for a day while jobs keep arriving.
        for k in 1..=100 {
            p.observe_arrival(last + k * 60, s);
        }
        let day = last + 86_400;
        assert_eq!(p.bound(day, s, 0.95, 0.95).status, Status::MaybeDown);
        let st = p.state(day);
        assert_eq!(st.status, Status::MaybeDown);
        assert!(st.down_since.unwrap() > last && st.down_since.unwrap() < last + 600);
        // Nor do its clusters show a bound meanwhile.
        assert_eq!(p.clusters(day)[0].bound_95_s, None);
        p.observe_start(day - 100, day, s);
        assert_eq!(p.bound(day, s, 0.95, 0.95).status, Status::Ok);
        assert_eq!(
            p.clusters(day)[0].bound_95_s,
            p.bound(day, s, 0.95, 0.95).bound_s
        );
        assert_eq!(p.state(day).last_release, Some(day));
    }

    /// Pending jobs are derived from arrivals, starts and departures; with `censored`,
    /// a burst that outlives its cluster's bound completes a change point before any
    /// of it starts, and the bound answered at an instant rises to the recent window's
    /// longest wait — where without it the old bound stands until the burst starts.
    #[test]
    fn a_burst_outliving_the_bound_is_seen_before_it_starts() {
        let s = shape(4, 3600);
        let run = |censored: bool| {
            let mut p = QueuePredictor::new(Config {
                // No availability inference: nothing starts during the burst.
                features: Features {
                    censored,
                    avail: false,
                    // Only censored waits track pending jobs here.
                    state: false,
                    misses: false,
                    ..Features::ALL
                },
                ..Config::default()
            })
            .unwrap();
            let mut t = 0;
            for i in 0..300 {
                t += 60;
                p.observe_arrival(t, s);
                // Waits 30..=89 s, and 2 000 s once in 50 (too rare to move the bound).
                let wait = if i % 50 == 25 { 2_000 } else { 30 + i % 60 };
                p.observe_start(t, t + wait, s);
            }
            let old = p.bound(t, s, 0.95, 0.95).bound_s.unwrap();
            assert!(old < 90, "{old}");
            // A burst of 20 jobs; one other job arrives and departs unstarted.
            p.observe_arrival(t + 1, shape(1, 60));
            for k in 0..20 {
                p.observe_arrival(t + 2 + k, s);
            }
            p.observe_departure(t + 1, t + 25, shape(1, 60));
            assert_eq!(p.state(t + 30).pending, if censored { 20 } else { 0 });
            // An hour later none has started.
            let later = t + 3600;
            p.advance(later);
            (p, old, later)
        };
        let (p, old, later) = run(true);
        let st = p.state(later);
        assert_eq!((st.pending, st.censored), (20, 20));
        let trims = p.clusters(later)[0].trims;
        assert!(trims >= 1, "change points from censored waits");
        assert_eq!(st.change_points, trims);
        assert_eq!(p.bound(later, s, 0.95, 0.95).bound_s, Some(2_000));
        let (p, old_plain, later) = run(false);
        assert_eq!(old_plain, old);
        assert_eq!(p.state(later).censored, 0);
        assert_eq!(p.clusters(later)[0].trims, 0);
        assert_eq!(p.bound(later, s, 0.95, 0.95).bound_s, Some(old));
        // The burst's starts take it out of the pending set; their waits enter the
        // window without being tested again.
        let (mut p, _, later) = run(true);
        for k in 0..20 {
            p.observe_start(later - 3600 + 2 + k, later + k, s);
        }
        let st = p.state(later + 20);
        assert_eq!((st.pending, st.censored), (0, 0));
        assert_eq!(p.clusters(later + 20)[0].trims, trims);
    }

    /// Machine scope: a queue whose own releases are rare stays up while the machine's
    /// other queues keep releasing; queue scope ignores the other queues.
    #[test]
    fn machine_scope_counts_the_other_queues() {
        use crate::engine::{AvailRule, AvailScope};
        let s = shape(1, 600);
        for scope in [AvailScope::Queue, AvailScope::Machine] {
            let mut p = QueuePredictor::new(Config {
                avail_rule: AvailRule::Either,
                avail_quantile: 0.95,
                avail_scope: scope,
                ..Config::default()
            })
            .unwrap();
            let mut t = 0;
            for _ in 0..200 {
                t += 60;
                p.observe_arrival(t, s);
                p.observe_start(t, t + 5, s);
            }
            // Two hours in which only the other queues release, every minute.
            for k in 1..=120 {
                p.observe_machine_arrival(t + k * 60 - 10);
                p.observe_machine_release(t + k * 60);
            }
            let down = p.state(t + 2 * 3600 + 1).status == Status::MaybeDown;
            assert_eq!(down, scope == AvailScope::Queue, "{scope}");
        }
    }
}
