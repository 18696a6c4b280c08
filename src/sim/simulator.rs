//! The event-driven simulator of a space-shared machine under one scheduling policy.
//!
//! It is incremental: submit jobs (at or after the current time), [`Simulator::advance_to`]
//! a time and receive the events up to it, ask [`Simulator::next_event_time`], or run
//! to completion. A whole-trace run is the same calls in a loop (see `sim::run`), and
//! so is the live demo site or an experiment that stops, looks and injects jobs.
//!
//! Semantics fixed here:
//! - Events at one instant are handled in the order: ends (and kills), arrivals,
//!   cancellations; then the policy makes one scheduling pass. Ties among events of
//!   one kind go by submission sequence, so a run is deterministic.
//! - The scheduler sees requested times only; a job runs `min(runtime, requested)`
//!   and is killed at its requested time if it would run longer.
//! - A cancelled job leaves the queue at its cancel time; a running one stops then.
//! - Queue order is (priority rank, submit time, submission sequence): plain FCFS
//!   order unless priorities are configured. A job submitted with a [`Molding`]
//!   ([`Simulator::submit_moldable`]) ranks by its run-time class instead (short,
//!   medium, long: Barsanti & Sodan §5.3), and a waiting medium or long job is
//!   promoted to the top rank once it has waited five times its run time at N_opt
//!   (the paper does not say by how much its priority rises; promoting it to the top,
//!   FCFS there by submit time, is the choice made here). Ends, arrivals,
//!   cancellations, then promotions, at one instant.
//! - A moldable job's size is fixed when it starts (SCOJO-P) or arrives
//!   (Cirne–Berman); from then on it is rigid, with the run time its speedup curve
//!   gives for that size as its exact requested time. Under every other policy it runs
//!   at N_opt.
//!
//! May import: std, serde and the sibling modules.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::job::{EndKind, SimJob};
use super::los::{self, Candidate, LosTables, LosVariant};
use super::mold::{AGING_FACTOR, Molding, RunClass};
use super::profile::{Period, Profile};
use super::scojo::{self, ArrivalForecast, Choice, FutureOverlap, LoadInputs, Waiting};

/// Lookahead LOS uses when none is given (Shmueli §4.4 settles on 50).
pub const DEFAULT_LOOKAHEAD: usize = 50;

/// A scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// First come, first served: the head job starts when it fits; nobody passes it.
    Fcfs,
    /// EASY (aggressive) backfilling: a reservation for the head job only.
    Easy,
    /// Conservative backfilling: every job gets a reservation (first fit) on arrival;
    /// when a job ends early the queue is compressed in queue order (Cirne §2.2.1).
    Conservative,
    /// LOS: the head job starts if it fits, else it gets a reservation (its shadow
    /// time); the rest are chosen by dynamic programming over the first `lookahead`
    /// waiting jobs that fit now (Shmueli §3.2–3.5).
    Los {
        /// Shmueli's C.
        lookahead: usize,
        /// Tie-break among equal-utilization sets.
        variant: LosVariant,
    },
    /// Cirne–Berman as Barsanti & Sodan run it (their §3, §5.3): EASY, and a moldable
    /// job, when it arrives, takes the size among every size from N_min to N_max that
    /// completes first in a what-if simulation of the running and waiting jobs under
    /// the same scheduler (exact run times, no later arrivals; ties to the smaller
    /// size), and keeps it.
    CirneBerman,
    /// SCOJO-P (Barsanti & Sodan §4): at each pass the first waiting job gets an
    /// adaptive target size from the predicted load over its run time, starts now
    /// smaller or later bigger, and the other waiting jobs are resized by the same
    /// factor for EASY backfilling (scojo-p.md §3).
    ScojoP(ScojoPolicy),
}

/// SCOJO-P's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScojoPolicy {
    /// Whether the load estimate includes expected future arrivals (the simulator's
    /// forecast, [`Simulator::set_forecast`]); without a forecast nothing is expected.
    pub predictive: bool,
    /// How a future job's overlap with the candidate's run is counted.
    pub overlap: FutureOverlap,
    /// The ideal average load, in thousandths (900: the paper's 0.9).
    pub ideal_permille: u16,
}

impl Default for ScojoPolicy {
    fn default() -> Self {
        Self {
            predictive: true,
            overlap: FutureOverlap::Literal,
            ideal_permille: (scojo::IDEAL_LOAD * 1000.0) as u16,
        }
    }
}

impl ScojoPolicy {
    /// The ideal load as a fraction.
    pub fn ideal(&self) -> f64 {
        f64::from(self.ideal_permille) / 1000.0
    }

    /// Parses the options after `scojo-p:`: `nonpredictive`, `arrival-aware`,
    /// `ideal=X` (0 < X ≤ 2).
    fn parse<'a>(parts: impl Iterator<Item = &'a str>) -> Result<Self, String> {
        let mut p = Self::default();
        for opt in parts {
            match opt {
                "nonpredictive" => p.predictive = false,
                "predictive" => p.predictive = true,
                "arrival-aware" => p.overlap = FutureOverlap::ArrivalAware,
                "literal" => p.overlap = FutureOverlap::Literal,
                _ => {
                    let Some(v) = opt.strip_prefix("ideal=") else {
                        return Err(format!(
                            "unknown scojo-p option {opt:?} (nonpredictive, arrival-aware, ideal=X)"
                        ));
                    };
                    let x: f64 = v
                        .parse()
                        .ok()
                        .filter(|x: &f64| x.is_finite() && *x > 0.0 && *x <= 2.0)
                        .ok_or_else(|| {
                            format!(
                                "scojo-p ideal load {v:?} is not a number above 0 and at most 2"
                            )
                        })?;
                    p.ideal_permille = (x * 1000.0).round().max(1.0) as u16;
                }
            }
        }
        Ok(p)
    }
}

impl Policy {
    /// Parses `fcfs`, `easy`, `conservative`, `los`, `los:C`, `los:C:variant`,
    /// `cirne-berman` or `scojo-p[:option…]` (options `nonpredictive`,
    /// `arrival-aware`, `ideal=X`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = s.split(':');
        let name = parts.next().unwrap_or("");
        let policy = match name {
            "fcfs" => Self::Fcfs,
            "easy" => Self::Easy,
            "conservative" | "cons" => Self::Conservative,
            "cirne-berman" => Self::CirneBerman,
            "scojo-p" => Self::ScojoP(ScojoPolicy::parse(parts.by_ref())?),
            "los" => {
                let lookahead =
                    match parts.next() {
                        None | Some("") => DEFAULT_LOOKAHEAD,
                        Some(c) => c.parse::<usize>().ok().filter(|&c| c > 0).ok_or_else(|| {
                            format!("los lookahead {c:?} is not a positive integer")
                        })?,
                    };
                let variant = match parts.next() {
                    None => LosVariant::default(),
                    Some(v) => LosVariant::parse(v).ok_or_else(|| {
                        format!(
                            "unknown LOS variant {v:?} (bypassed-first, selected-first, maxjobs, max-slowdown)"
                        )
                    })?,
                };
                Self::Los { lookahead, variant }
            }
            _ => {
                return Err(format!(
                    "unknown policy {s:?} (fcfs, easy, conservative, los[:C[:variant]], \
                     cirne-berman, scojo-p[:nonpredictive][:arrival-aware][:ideal=X])"
                ));
            }
        };
        if let Some(rest) = parts.next() {
            return Err(format!("unexpected {rest:?} in policy {s:?}"));
        }
        if !matches!(policy, Self::Los { .. } | Self::ScojoP(_)) && s.contains(':') {
            return Err(format!("policy {name} takes no parameters"));
        }
        Ok(policy)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fcfs => f.write_str("fcfs"),
            Self::Easy => f.write_str("easy"),
            Self::Conservative => f.write_str("conservative"),
            Self::Los { lookahead, variant } => write!(f, "los:{lookahead}:{}", variant.name()),
            Self::CirneBerman => f.write_str("cirne-berman"),
            Self::ScojoP(p) => {
                f.write_str("scojo-p")?;
                if !p.predictive {
                    f.write_str(":nonpredictive")?;
                }
                if p.overlap == FutureOverlap::ArrivalAware {
                    f.write_str(":arrival-aware")?;
                }
                if p.ideal_permille != ScojoPolicy::default().ideal_permille {
                    write!(f, ":ideal={}", p.ideal())?;
                }
                Ok(())
            }
        }
    }
}

/// The machine and its scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimConfig {
    /// Processors of the machine.
    pub processors: u32,
    /// The scheduling policy.
    pub policy: Policy,
    /// Optional priority rank per queue number: lower ranks are served first (e.g.
    /// express 0, normal 1, low 2), FCFS within a rank. Queues not listed rank 0.
    /// Conservative backfilling gives reservations in arrival order, so there ranks
    /// only order the compression; `qbets simulate` refuses that combination.
    #[serde(default)]
    pub priority: BTreeMap<i32, i32>,
}

impl SimConfig {
    /// A machine of `processors` under `policy`, all queues equal.
    pub fn new(processors: u32, policy: Policy) -> Self {
        Self {
            processors,
            policy,
            priority: BTreeMap::new(),
        }
    }
}

/// What happened to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum EventKind {
    /// The job arrived in the queue.
    Submitted,
    /// The job started on its processors.
    Started,
    /// The job left the machine or the queue.
    Ended {
        /// How.
        how: EndKind,
    },
}

/// One event, as [`Simulator::advance_to`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimEvent {
    /// When.
    pub time: i64,
    /// What.
    #[serde(flatten)]
    pub kind: EventKind,
    /// The job's id.
    pub job: i64,
    /// Its queue number.
    pub queue: i32,
    /// Processors it asked for.
    pub procs: u32,
    /// Its requested time in seconds.
    pub requested: i64,
}

/// Why a job was refused by [`Simulator::submit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitError {
    /// Submit time before the simulator's current time.
    InThePast { submit: i64, now: i64 },
    /// More processors than the machine has (or none).
    BadSize { procs: u32, machine: u32 },
    /// Requested time below one second.
    BadRequestedTime(i64),
    /// Negative runtime, other than -1 (unknown) with a cancel time.
    BadRuntime(i64),
    /// Cancel time before the submit time.
    CancelBeforeSubmit { submit: i64, cancel_at: i64 },
    /// Another job with this id is still in the system.
    DuplicateId(i64),
    /// A moldable job whose molding does not fit the machine or its record.
    BadMolding(String),
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InThePast { submit, now } => {
                write!(
                    f,
                    "submit time {submit} is before the simulator's time {now}"
                )
            }
            Self::BadSize { procs, machine } => {
                write!(f, "{procs} processors on a machine of {machine}")
            }
            Self::BadRequestedTime(t) => write!(f, "requested time {t} s is below 1 s"),
            Self::BadRuntime(t) => write!(
                f,
                "runtime {t} s is negative (only -1, unknown, is taken, and only with a cancel time)"
            ),
            Self::CancelBeforeSubmit { submit, cancel_at } => {
                write!(f, "cancel time {cancel_at} is before submit time {submit}")
            }
            Self::DuplicateId(id) => write!(f, "job {id} is already in the system"),
            Self::BadMolding(why) => write!(f, "moldable job: {why}"),
        }
    }
}

impl std::error::Error for SubmitError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Submitted, arrival event not yet handled.
    Pending,
    /// In the queue; conservative backfilling's reservation start, once placed.
    Waiting {
        resv: Option<i64>,
    },
    Running {
        start: i64,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    job: SimJob,
    rank: i32,
    state: State,
    mold: Option<MoldState>,
}

/// A moldable job's molding and what the scheduler fixed of it so far.
#[derive(Debug, Clone, Copy)]
struct MoldState {
    m: Molding,
    /// SCOJO-P's "later minimum size" once it chose to wait for a size (0: none).
    floor: u32,
}

// Event kinds in the order they are handled within one instant.
const END: u8 = 0;
const ARRIVE: u8 = 1;
const CANCEL: u8 = 2;
/// A conservative reservation starts: only makes the scheduler look (a reservation
/// can start at an instant where nothing else happens, e.g. after compression moved
/// the job it was queued behind).
const WAKE: u8 = 3;
/// A waiting medium or long job's priority rises (aging).
const AGE: u8 = 4;

/// A queue key: (priority rank, submit time, sequence).
type QKey = (i32, i64, u64);

/// The simulator. `Clone` gives an independent copy of the whole state, which is how
/// SA's generic version asks "what if".
#[derive(Debug, Clone)]
pub struct Simulator {
    cfg: SimConfig,
    now: i64,
    next_seq: u64,
    jobs: HashMap<u64, Entry>,
    ids: HashMap<i64, u64>,
    heap: BinaryHeap<Reverse<(i64, u8, u64)>>,
    queue: BTreeSet<QKey>,
    /// Running jobs by expected end (start + requested).
    running: BTreeSet<(i64, u64)>,
    free: u32,
    /// Conservative backfilling only: the allocation list and the reservation starts.
    profile: Option<Profile>,
    resv: BTreeSet<(i64, u64)>,
    arrived: Vec<u64>,
    /// Conservative: capacity was given back since the last compression, up to this
    /// time (the latest end of the regions released); `None` when nothing was.
    released_until: Option<i64>,
    los: LosTables,
    /// EASY, LOS and SCOJO-P: the head job and its shadow time after the last pass.
    head_shadow: Option<(i64, i64)>,
    /// SCOJO-P's forecast of future arrivals (predictive variant).
    forecast: Option<Arc<ArrivalForecast>>,
}

impl Simulator {
    /// An idle machine at time `start`.
    pub fn new(cfg: SimConfig, start: i64) -> Self {
        let profile =
            (cfg.policy == Policy::Conservative).then(|| Profile::new(cfg.processors, start));
        Self {
            free: cfg.processors,
            cfg,
            now: start,
            next_seq: 0,
            jobs: HashMap::new(),
            ids: HashMap::new(),
            heap: BinaryHeap::new(),
            queue: BTreeSet::new(),
            running: BTreeSet::new(),
            profile,
            resv: BTreeSet::new(),
            arrived: Vec::new(),
            released_until: None,
            los: LosTables::default(),
            head_shadow: None,
            forecast: None,
        }
    }

    /// Gives predictive SCOJO-P its forecast of future arrivals.
    pub fn set_forecast(&mut self, forecast: Arc<ArrivalForecast>) {
        self.forecast = Some(forecast);
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// The simulator's current time.
    pub fn now(&self) -> i64 {
        self.now
    }

    /// Processors free now.
    pub fn free(&self) -> u32 {
        self.free
    }

    /// Jobs waiting in the queue.
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Jobs running.
    pub fn running_len(&self) -> usize {
        self.running.len()
    }

    /// Jobs submitted whose arrival time has not come yet.
    pub fn pending_len(&self) -> usize {
        self.jobs.len() - self.queue.len() - self.running.len()
    }

    /// Waiting jobs in queue order.
    pub fn waiting(&self) -> impl Iterator<Item = &SimJob> {
        self.queue.iter().map(|k| &self.jobs[&k.2].job)
    }

    /// Running jobs with their start times, by expected end.
    pub fn running(&self) -> impl Iterator<Item = (i64, &SimJob)> {
        self.running.iter().map(|&(_, s)| {
            let e = &self.jobs[&s];
            let State::Running { start } = e.state else {
                unreachable!("running set holds running jobs")
            };
            (start, &e.job)
        })
    }

    /// Under conservative backfilling, the reserved start of waiting job `id`.
    pub fn reservation(&self, id: i64) -> Option<i64> {
        let e = self.jobs.get(self.ids.get(&id)?)?;
        match e.state {
            State::Waiting { resv } => resv,
            _ => None,
        }
    }

    /// Under EASY or LOS, the head job's id and shadow time (when it has to wait)
    /// as of the last scheduling pass.
    pub fn head_shadow(&self) -> Option<(i64, i64)> {
        self.head_shadow
    }

    /// Under conservative backfilling, Cirne's availability list from now on.
    pub fn availability(&self) -> Option<Vec<Period>> {
        self.profile.as_ref().map(|p| p.periods(self.now))
    }

    /// The time of the next event, if any.
    pub fn next_event_time(&self) -> Option<i64> {
        self.heap.peek().map(|Reverse(e)| e.0)
    }

    /// Submits a job; it arrives at `job.submit`, which must not be in the past.
    pub fn submit(&mut self, job: SimJob) -> Result<(), SubmitError> {
        self.check(&job)?;
        let rank = self.cfg.priority.get(&job.queue).copied().unwrap_or(0);
        self.enqueue(job, rank, None);
        Ok(())
    }

    /// Submits a moldable (or rigid, `molding.moldable == false`) job with its molding:
    /// `job` is the job at N_opt (`procs == n_opt`, `runtime == requested ==
    /// runtime_opt`, as [`Molding::job`] makes it). It ranks by its run-time class and
    /// ages (see the module notes); the policy decides its size.
    pub fn submit_moldable(&mut self, job: SimJob, molding: Molding) -> Result<(), SubmitError> {
        self.check(&job)?;
        molding
            .validate(self.cfg.processors)
            .map_err(SubmitError::BadMolding)?;
        if (job.procs, job.runtime, job.requested)
            != (molding.n_opt, molding.runtime_opt, molding.runtime_opt)
        {
            return Err(SubmitError::BadMolding(format!(
                "the job must stand at N_opt: {} processors for {} s (requested {} s), \
                 not {} processors for {} s (requested {} s)",
                molding.n_opt,
                molding.runtime_opt,
                molding.runtime_opt,
                job.procs,
                job.runtime,
                job.requested
            )));
        }
        let class = molding.class();
        let aging = (class != RunClass::Short).then(|| {
            job.submit
                .saturating_add(AGING_FACTOR.saturating_mul(molding.runtime_opt))
        });
        let seq = self.enqueue(
            job,
            class.rank(),
            Some(MoldState {
                m: molding,
                floor: 0,
            }),
        );
        if let Some(t) = aging {
            self.heap.push(Reverse((t, AGE, seq)));
        }
        Ok(())
    }

    fn check(&self, job: &SimJob) -> Result<(), SubmitError> {
        if job.submit < self.now {
            return Err(SubmitError::InThePast {
                submit: job.submit,
                now: self.now,
            });
        }
        if job.procs == 0 || job.procs > self.cfg.processors {
            return Err(SubmitError::BadSize {
                procs: job.procs,
                machine: self.cfg.processors,
            });
        }
        if job.requested < 1 {
            return Err(SubmitError::BadRequestedTime(job.requested));
        }
        if job.runtime < -1 || (job.runtime == -1 && job.cancel_at.is_none()) {
            return Err(SubmitError::BadRuntime(job.runtime));
        }
        if let Some(c) = job.cancel_at
            && c < job.submit
        {
            return Err(SubmitError::CancelBeforeSubmit {
                submit: job.submit,
                cancel_at: c,
            });
        }
        if self.ids.contains_key(&job.id) {
            return Err(SubmitError::DuplicateId(job.id));
        }
        Ok(())
    }

    fn enqueue(&mut self, job: SimJob, rank: i32, mold: Option<MoldState>) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse((job.submit, ARRIVE, seq)));
        if let Some(c) = job.cancel_at {
            self.heap.push(Reverse((c, CANCEL, seq)));
        }
        self.ids.insert(job.id, seq);
        self.jobs.insert(
            seq,
            Entry {
                job,
                rank,
                state: State::Pending,
                mold,
            },
        );
        seq
    }

    /// Has the user of job `id` stop it at `at`, replacing any cancel time it had: a
    /// job still waiting then leaves the queue, a running one ends then (reported as
    /// cancelled while running). How an experiment ends a job whose run time depends on
    /// when it started (a VARQ job holds its nodes until its deadline, then works).
    /// Returns false, changing nothing, when no job `id` is in the system or `at` is
    /// before now or before the job's submit time.
    pub fn cancel_at(&mut self, id: i64, at: i64) -> bool {
        let Some(&seq) = self.ids.get(&id) else {
            return false;
        };
        let Some(e) = self.jobs.get_mut(&seq) else {
            return false;
        };
        if at < self.now || at < e.job.submit {
            return false;
        }
        e.job.cancel_at = Some(at);
        self.heap.push(Reverse((at, CANCEL, seq)));
        true
    }

    /// Handles every event up to and including time `t`, appends them to `out` in the
    /// order they happened, and moves the clock to `t` (never backwards).
    pub fn advance_to(&mut self, t: i64, out: &mut Vec<SimEvent>) {
        while let Some(&Reverse((time, _, _))) = self.heap.peek() {
            if time > t {
                break;
            }
            self.now = time;
            while let Some(&Reverse((time2, kind, seq))) = self.heap.peek() {
                if time2 != time {
                    break;
                }
                self.heap.pop();
                match kind {
                    END => self.on_end(seq, out),
                    ARRIVE => self.on_arrive(seq, out),
                    CANCEL => self.on_cancel(seq, out),
                    AGE => self.on_age(seq),
                    _ => {}
                }
            }
            self.schedule(out);
        }
        self.now = self.now.max(t);
        if let Some(p) = &mut self.profile {
            p.forget_before(self.now);
        }
    }

    /// [`Self::advance_to`] returning the events.
    pub fn advance(&mut self, t: i64) -> Vec<SimEvent> {
        let mut out = Vec::new();
        self.advance_to(t, &mut out);
        out
    }

    /// Runs until no event is left, appending every event to `out`.
    pub fn run_to_completion(&mut self, out: &mut Vec<SimEvent>) {
        while let Some(t) = self.next_event_time() {
            self.advance_to(t, out);
        }
    }

    /// A copy for SA's "what if": every job is assumed to run exactly its requested
    /// time, nobody cancels, and no job arrives after now (Cirne §2.1).
    pub fn what_if(&self) -> Self {
        let mut c = self.clone();
        let now = c.now;
        let mut drop = Vec::new();
        for (&seq, e) in c.jobs.iter_mut() {
            e.job.cancel_at = None;
            e.job.runtime = e.job.requested;
            if e.state == State::Pending && e.job.submit > now {
                drop.push(seq);
            }
        }
        for seq in drop {
            let e = c.jobs.remove(&seq).expect("present");
            c.ids.remove(&e.job.id);
        }
        // Keep the arrivals still to come and the reservation wake-ups; running jobs
        // now end at start + requested.
        let mut heap: BinaryHeap<_> = c
            .heap
            .drain()
            .filter(|Reverse((_, k, seq))| {
                matches!(*k, ARRIVE | WAKE | AGE) && c.jobs.contains_key(seq)
            })
            .collect();
        for &(end, seq) in &c.running {
            heap.push(Reverse((end, END, seq)));
        }
        c.heap = heap;
        c
    }

    fn event(&self, seq: u64, kind: EventKind) -> SimEvent {
        let j = &self.jobs[&seq].job;
        SimEvent {
            time: self.now,
            kind,
            job: j.id,
            queue: j.queue,
            procs: j.procs,
            requested: j.requested,
        }
    }

    fn key(&self, seq: u64) -> QKey {
        let e = &self.jobs[&seq];
        (e.rank, e.job.submit, seq)
    }

    fn forget(&mut self, seq: u64) {
        if let Some(e) = self.jobs.remove(&seq) {
            self.ids.remove(&e.job.id);
        }
    }

    fn on_end(&mut self, seq: u64, out: &mut Vec<SimEvent>) {
        let Some(e) = self.jobs.get(&seq) else { return };
        let State::Running { start } = e.state else {
            return;
        };
        let how = if e.job.overruns() {
            EndKind::Killed
        } else {
            EndKind::Completed
        };
        out.push(self.event(seq, EventKind::Ended { how }));
        self.stop_running(seq, start);
        self.forget(seq);
    }

    fn stop_running(&mut self, seq: u64, start: i64) {
        let e = &self.jobs[&seq];
        let (procs, expected_end) = (e.job.procs, start + e.job.requested);
        self.running.remove(&(expected_end, seq));
        self.free += procs;
        if let Some(p) = &mut self.profile
            && self.now < expected_end
        {
            p.release(self.now, expected_end, i64::from(procs));
            self.note_release(expected_end);
        }
    }

    fn on_arrive(&mut self, seq: u64, out: &mut Vec<SimEvent>) {
        if self.cfg.policy == Policy::CirneBerman {
            self.cirne_berman_size(seq);
        }
        let Some(e) = self.jobs.get_mut(&seq) else {
            return;
        };
        e.state = State::Waiting { resv: None };
        let key = self.key(seq);
        self.queue.insert(key);
        if self.profile.is_some() {
            self.arrived.push(seq);
        }
        out.push(self.event(seq, EventKind::Submitted));
    }

    fn on_cancel(&mut self, seq: u64, out: &mut Vec<SimEvent>) {
        let Some(e) = self.jobs.get(&seq) else { return };
        if e.job.cancel_at != Some(self.now) {
            // A cancel time replaced by `cancel_at`.
            return;
        }
        match e.state {
            State::Pending => return,
            State::Waiting { resv } => self.leave_queue(seq, resv, EndKind::CancelledWaiting, out),
            State::Running { start } => {
                out.push(self.event(
                    seq,
                    EventKind::Ended {
                        how: EndKind::CancelledRunning,
                    },
                ));
                self.stop_running(seq, start);
            }
        }
        self.forget(seq);
    }

    /// A waiting job leaves the queue without running: its reservation, if it has one,
    /// is given back.
    fn leave_queue(&mut self, seq: u64, resv: Option<i64>, how: EndKind, out: &mut Vec<SimEvent>) {
        let (procs, req) = {
            let j = &self.jobs[&seq].job;
            (j.procs, j.requested)
        };
        let key = self.key(seq);
        self.queue.remove(&key);
        if let Some(s) = resv {
            self.resv.remove(&(s, seq));
            if let Some(p) = &mut self.profile {
                p.release(s.max(self.now), s + req, i64::from(procs));
            }
            self.note_release(s + req);
        } else {
            self.arrived.retain(|&a| a != seq);
        }
        out.push(self.event(seq, EventKind::Ended { how }));
    }

    fn start(&mut self, seq: u64, out: &mut Vec<SimEvent>) {
        if self.jobs[&seq].job.runtime_unknown() {
            // A log's job that never ran: nothing is known of what it would run.
            let resv = match self.jobs[&seq].state {
                State::Waiting { resv } => resv,
                _ => None,
            };
            self.leave_queue(seq, resv, EndKind::Withdrawn, out);
            self.forget(seq);
            // Another pass at this instant, as after a job of 0 s: what the pass
            // planned for its processors can go to others.
            self.heap.push(Reverse((self.now, WAKE, seq)));
            return;
        }
        let key = self.key(seq);
        self.queue.remove(&key);
        let now = self.now;
        let e = self.jobs.get_mut(&seq).expect("queued job exists");
        e.state = State::Running { start: now };
        let (procs, req, run) = (e.job.procs, e.job.requested, e.job.effective_runtime());
        debug_assert!(procs <= self.free, "oversubscribed");
        self.free -= procs;
        self.running.insert((now + req, seq));
        self.heap.push(Reverse((now + run, END, seq)));
        out.push(self.event(seq, EventKind::Started));
    }

    fn schedule(&mut self, out: &mut Vec<SimEvent>) {
        self.head_shadow = None;
        match self.cfg.policy {
            Policy::Fcfs => self.start_heads(out),
            Policy::Easy => self.schedule_easy(out),
            Policy::Conservative => self.schedule_conservative(out),
            Policy::Los { lookahead, variant } => self.schedule_los(lookahead, variant, out),
            Policy::CirneBerman => self.schedule_easy(out),
            Policy::ScojoP(p) => self.schedule_scojo(p, out),
        }
    }

    /// Starts jobs from the head of the queue while they fit.
    fn start_heads(&mut self, out: &mut Vec<SimEvent>) {
        while let Some(&(_, _, seq)) = self.queue.first() {
            if self.jobs[&seq].job.procs > self.free {
                break;
            }
            self.start(seq, out);
        }
    }

    /// Shadow time and extra processors for a head job of `procs` that does not fit
    /// now: when enough running jobs will have ended (by their requested times), and
    /// how many processors are free then beyond its need.
    fn shadow(&self, procs: u32) -> (i64, u32) {
        let mut avail = self.free;
        let mut it = self.running.iter().peekable();
        while let Some(&(end, seq)) = it.next() {
            avail += self.jobs[&seq].job.procs;
            // Jobs ending at the same instant free their processors then too.
            while let Some(&&(end2, seq2)) = it.peek() {
                if end2 != end {
                    break;
                }
                avail += self.jobs[&seq2].job.procs;
                it.next();
            }
            if avail >= procs {
                return (end, avail - procs);
            }
        }
        unreachable!("a job no larger than the machine fits once everything has ended")
    }

    fn schedule_easy(&mut self, out: &mut Vec<SimEvent>) {
        self.start_heads(out);
        let Some(&(_, _, head)) = self.queue.first() else {
            return;
        };
        let head_procs = self.jobs[&head].job.procs;
        let (shadow, mut extra) = self.shadow(head_procs);
        self.head_shadow = Some((self.jobs[&head].job.id, shadow));
        let mut picks = Vec::new();
        let mut free = self.free;
        for &(_, _, seq) in self.queue.iter().skip(1) {
            if free == 0 {
                break;
            }
            let j = &self.jobs[&seq].job;
            if j.procs > free {
                continue;
            }
            if self.now + j.requested <= shadow {
                free -= j.procs;
                picks.push(seq);
            } else if j.procs <= extra {
                free -= j.procs;
                extra -= j.procs;
                picks.push(seq);
            }
        }
        for seq in picks {
            self.start(seq, out);
        }
    }

    /// Shmueli §3.2.1: the first waiting job starts if it fits, and then the shadow
    /// time is ∞ ("every produced schedule is safe") and the dynamic program chooses
    /// among all the other jobs, the new head included; otherwise the first job gets
    /// its shadow time and extra processors and the program chooses among the rest.
    /// Only the first job is started outright: starting each new head while it fits
    /// (EASY's loop) would take processors the program could pack better.
    fn schedule_los(&mut self, lookahead: usize, variant: LosVariant, out: &mut Vec<SimEvent>) {
        let Some(&(_, _, head)) = self.queue.first() else {
            return;
        };
        let head_procs = self.jobs[&head].job.procs;
        let (shadow, extra, others) = if head_procs <= self.free {
            self.start(head, out);
            (i64::MAX, 0, 0)
        } else {
            let (shadow, extra) = self.shadow(head_procs);
            self.head_shadow = Some((self.jobs[&head].job.id, shadow));
            (shadow, extra, 1)
        };
        if self.free == 0 {
            return;
        }
        let now = self.now;
        let free = self.free;
        let mut seqs = Vec::new();
        let mut cands = Vec::new();
        for &(_, _, seq) in self.queue.iter().skip(others) {
            if cands.len() == lookahead {
                break;
            }
            let j = &self.jobs[&seq].job;
            // §3.5.1: a job larger than the free capacity cannot start now.
            if j.procs > free {
                continue;
            }
            let time = j.requested as f64;
            cands.push(Candidate {
                size: j.procs,
                ssize: if now.saturating_add(j.requested) <= shadow {
                    0
                } else {
                    j.procs
                },
                slowdown: ((now - j.submit) as f64 + time) / time,
            });
            seqs.push(seq);
        }
        let chosen = los::select(&cands, free, extra, variant, &mut self.los);
        for i in chosen {
            self.start(seqs[i], out);
        }
    }

    fn schedule_conservative(&mut self, out: &mut Vec<SimEvent>) {
        let now = self.now;
        if let Some(until) = self.released_until.take() {
            self.compress_queue(until);
        }
        let arrived = std::mem::take(&mut self.arrived);
        for &seq in &arrived {
            let (procs, req) = {
                let j = &self.jobs[&seq].job;
                (i64::from(j.procs), j.requested)
            };
            let p = self.profile.as_mut().expect("conservative keeps a profile");
            let s = p
                .earliest_fit(now, procs, req)
                .expect("a job no larger than the machine fits");
            p.reserve(s, s + req, procs);
            self.resv.insert((s, seq));
            self.jobs.get_mut(&seq).expect("arrived").state = State::Waiting { resv: Some(s) };
            if s > now {
                self.heap.push(Reverse((s, WAKE, seq)));
            }
        }
        self.arrived = arrived;
        self.arrived.clear();
        while let Some(&(s, seq)) = self.resv.first() {
            if s > now {
                break;
            }
            self.resv.pop_first();
            self.start(seq, out);
        }
    }

    /// Aging: a waiting job promoted to the top rank (see the module notes).
    fn on_age(&mut self, seq: u64) {
        let Some(e) = self.jobs.get(&seq) else { return };
        let top = RunClass::Short.rank();
        if !matches!(e.state, State::Waiting { .. }) || e.rank <= top {
            return;
        }
        let old = self.key(seq);
        self.queue.remove(&old);
        self.jobs.get_mut(&seq).expect("waiting job").rank = top;
        let new = self.key(seq);
        self.queue.insert(new);
    }

    /// Starts a job with `size` processors: a moldable job takes that size and the run
    /// time its curve gives there (exact, so also its requested time); a rigid one
    /// starts as it is.
    fn start_sized(&mut self, seq: u64, size: u32, out: &mut Vec<SimEvent>) {
        let e = self.jobs.get_mut(&seq).expect("queued job exists");
        match e.mold {
            Some(st) if st.m.moldable => {
                let r = st.m.runtime(size);
                e.job.procs = size;
                e.job.runtime = r;
                e.job.requested = r;
            }
            _ => debug_assert_eq!(size, e.job.procs, "a rigid job keeps its size"),
        }
        self.start(seq, out);
    }

    /// A waiting job as SCOJO-P's load estimate sees it.
    fn waiting_view(&self, seq: u64) -> Waiting {
        let e = &self.jobs[&seq];
        Waiting {
            molding: e.mold.map(|st| st.m),
            floor: e.mold.map_or(0, |st| st.floor),
            procs: e.job.procs,
            requested: e.job.requested,
        }
    }

    /// SCOJO-P's pass (scojo-p.md §3): for the first waiting job, the adaptive target
    /// size (3.1); start it now (with the target, or smaller if that finishes sooner)
    /// and repeat with the next, or fix the size it waits for, reserve for it, and
    /// backfill the others resized by the same modifier (3.2, 3.3).
    fn schedule_scojo(&mut self, p: ScojoPolicy, out: &mut Vec<SimEvent>) {
        let forecast = self.forecast.clone();
        let future = if p.predictive {
            forecast.as_deref().map(|f| (f, p.overlap))
        } else {
            None
        };
        while let Some(&(_, _, head)) = self.queue.first() {
            let now = self.now;
            let running: Vec<(i64, u32)> = self
                .running
                .iter()
                .map(|&(end, s)| (end - now, self.jobs[&s].job.procs))
                .collect();
            let waiting: Vec<Waiting> = self
                .queue
                .iter()
                .skip(1)
                .map(|k| self.waiting_view(k.2))
                .collect();
            let view = self.waiting_view(head);
            let inputs = LoadInputs {
                machine: self.cfg.processors,
                now,
                running: &running,
                waiting: &waiting,
                head: view,
                future,
                ideal: p.ideal(),
            };
            let (target, _) = scojo::size_modifier(&inputs);
            let lower = match view.molding {
                Some(m) if m.moldable => m.n_min.max(view.floor).min(m.n_max),
                _ => view.procs,
            };
            let runtime = move |n| match view.molding {
                Some(m) if m.moldable => m.runtime(n),
                _ => view.requested,
            };
            let ends: Vec<(i64, u32)> = self
                .running
                .iter()
                .map(|&(end, s)| (end, self.jobs[&s].job.procs))
                .collect();
            match scojo::start_choice(now, self.free, &ends, target.size, lower, runtime) {
                Choice::Now(size) => self.start_sized(head, size, out),
                Choice::Later { at, size, extra } => {
                    let e = self.jobs.get_mut(&head).expect("queued job exists");
                    if let Some(st) = e.mold.as_mut()
                        && st.m.moldable
                    {
                        st.floor = size;
                    }
                    self.head_shadow = Some((e.job.id, at));
                    self.backfill_scojo(target.m, at, extra, out);
                    return;
                }
            }
        }
    }

    /// EASY backfilling behind the head's reservation (`shadow`, `extra` processors
    /// then) with every other waiting moldable job resized by the modifier `m`.
    fn backfill_scojo(&mut self, m: f64, shadow: i64, mut extra: u32, out: &mut Vec<SimEvent>) {
        let now = self.now;
        let mut free = self.free;
        let mut picks = Vec::new();
        for &(_, _, seq) in self.queue.iter().skip(1) {
            if free == 0 {
                break;
            }
            let (n, r) = self.waiting_view(seq).shape(m);
            if n > free {
                continue;
            }
            if now.saturating_add(r) <= shadow {
                free -= n;
                picks.push((seq, n));
            } else if n <= extra {
                free -= n;
                extra -= n;
                picks.push((seq, n));
            }
        }
        for (seq, n) in picks {
            self.start_sized(seq, n, out);
        }
    }

    /// Cirne–Berman at a moldable job's arrival: tries every size from N_min to N_max
    /// on a what-if copy (the running and waiting jobs only, each running exactly its
    /// requested time, nobody cancelling, EASY with the same priorities and aging) and
    /// fixes the size that completes first (ties to the smaller size).
    fn cirne_berman_size(&mut self, seq: u64) {
        let Some(st) = self.jobs.get(&seq).and_then(|e| e.mold) else {
            return;
        };
        if !st.m.moldable {
            return;
        }
        let id = self.jobs[&seq].job.id;
        let mut base = self.clone();
        base.cfg.policy = Policy::Easy;
        base.forecast = None;
        // The job knows only what is in the system: later arrivals (those at this very
        // instant not yet handled included) are unknown to it.
        let pending: Vec<u64> = base
            .jobs
            .iter()
            .filter(|&(&s, e)| s != seq && e.state == State::Pending)
            .map(|(&s, _)| s)
            .collect();
        for s in pending {
            base.forget(s);
        }
        for e in base.jobs.values_mut() {
            e.job.cancel_at = None;
            e.job.runtime = e.job.requested;
        }
        let mut heap: BinaryHeap<_> = base
            .heap
            .drain()
            .filter(|Reverse((_, k, s))| *k == AGE && base.jobs.contains_key(s))
            .collect();
        for &(end, s) in &base.running {
            heap.push(Reverse((end, END, s)));
        }
        base.heap = heap;
        let now = self.now;
        let mut best: Option<(i64, u32)> = None;
        let mut events = Vec::new();
        for n in st.m.n_min..=st.m.n_max {
            let r = st.m.runtime(n);
            let mut s = base.clone();
            {
                let e = s.jobs.get_mut(&seq).expect("the candidate is kept");
                e.job.procs = n;
                e.job.runtime = r;
                e.job.requested = r;
                if let Some(ms) = e.mold.as_mut() {
                    ms.m.moldable = false;
                }
            }
            s.heap.push(Reverse((now, ARRIVE, seq)));
            // Once it starts its end is known: stop there.
            let mut done = None;
            while done.is_none() {
                let Some(t) = s.next_event_time() else { break };
                events.clear();
                s.advance_to(t, &mut events);
                done = events
                    .iter()
                    .find(|e| e.job == id && e.kind == EventKind::Started)
                    .map(|e| e.time.saturating_add(r));
            }
            if let Some(c) = done
                && best.is_none_or(|b| (c, n) < b)
            {
                best = Some((c, n));
            }
        }
        let e = self.jobs.get_mut(&seq).expect("arriving job exists");
        if let Some((_, n)) = best {
            let r = st.m.runtime(n);
            e.job.procs = n;
            e.job.runtime = r;
            e.job.requested = r;
        }
        if let Some(ms) = e.mold.as_mut() {
            ms.m.moldable = false;
        }
    }

    fn note_release(&mut self, until: i64) {
        self.released_until = Some(self.released_until.map_or(until, |u| u.max(until)));
    }

    /// Moves every waiting job, in queue order, to its earliest fit (never later than
    /// its current reservation): Cirne's promotion of jobs into a hole left by a job
    /// that ended early, repeated until nothing moves (a job moved up can open a hole
    /// for one ahead of it in the queue).
    ///
    /// Every waiting job is at its earliest fit between compressions (placed by first
    /// fit; nothing but releases adds capacity), so a job can only move into a window
    /// that overlaps capacity released since — a start before `released_until`, which
    /// grows as moved jobs release their old slots. That bound keeps each check to the
    /// near part of the profile, and the check leaves the profile untouched unless the
    /// job moves.
    fn compress_queue(&mut self, mut released_until: i64) {
        let now = self.now;
        let keys: Vec<QKey> = self.queue.iter().copied().collect();
        // Jobs after the last one moved in a pass have seen every move of that pass;
        // a pass that has moved nothing yet can stop there.
        let mut last_moved = keys.len();
        loop {
            let mut moved_at = None;
            for (idx, &(_, _, seq)) in keys.iter().enumerate() {
                if moved_at.is_none() && idx >= last_moved {
                    break;
                }
                let e = &self.jobs[&seq];
                let State::Waiting { resv: Some(old) } = e.state else {
                    continue;
                };
                if old <= now {
                    continue;
                }
                let (procs, req) = (i64::from(e.job.procs), e.job.requested);
                let p = self.profile.as_mut().expect("conservative keeps a profile");
                let limit = old.min(released_until);
                let Some(s) =
                    p.earliest_fit_before(now, procs, req, limit, (old, old + req, procs))
                else {
                    continue;
                };
                p.release(old, old + req, procs);
                p.reserve(s, s + req, procs);
                released_until = released_until.max(old + req);
                moved_at = Some(idx);
                self.resv.remove(&(old, seq));
                self.resv.insert((s, seq));
                self.jobs.get_mut(&seq).expect("waiting").state = State::Waiting { resv: Some(s) };
                if s > now {
                    self.heap.push(Reverse((s, WAKE, seq)));
                }
            }
            match moved_at {
                Some(idx) => last_moved = idx,
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_back() {
        for s in [
            "fcfs",
            "easy",
            "conservative",
            "los:50:bypassed-first",
            "los:7:max-slowdown",
            "cirne-berman",
            "scojo-p",
            "scojo-p:nonpredictive",
            "scojo-p:arrival-aware",
            "scojo-p:nonpredictive:ideal=0.8",
        ] {
            assert_eq!(Policy::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(
            Policy::parse("los").unwrap(),
            Policy::Los {
                lookahead: DEFAULT_LOOKAHEAD,
                variant: LosVariant::BypassedFirst
            }
        );
        assert_eq!(
            Policy::parse("los:250").unwrap().to_string(),
            "los:250:bypassed-first"
        );
        for bad in [
            "",
            "sjf",
            "los:0",
            "los:x",
            "los:5:best",
            "easy:3",
            "los:5:maxjobs:1",
            "cirne-berman:2",
            "scojo-p:fast",
            "scojo-p:ideal=0",
            "scojo-p:ideal=x",
        ] {
            assert!(Policy::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cancel_at_replaces_the_cancel_time_and_refuses_the_past() {
        let mut sim = Simulator::new(SimConfig::new(4, Policy::Easy), 0);
        let j = |id, cancel_at| SimJob {
            id,
            queue: 1,
            submit: 0,
            runtime: 100,
            procs: 4,
            requested: 100,
            cancel_at,
        };
        // Job 1 runs; its user would stop it at 30, then moves that to 50.
        sim.submit(j(1, Some(30))).unwrap();
        // Job 2 waits behind it; stopped at 60 while running.
        sim.submit(j(2, None)).unwrap();
        sim.advance(10);
        assert!(sim.cancel_at(1, 50));
        assert!(!sim.cancel_at(1, 5), "in the past");
        assert!(!sim.cancel_at(99, 50), "no such job");
        let ev = sim.advance(40);
        assert!(
            ev.is_empty(),
            "the replaced cancel time 30 does nothing: {ev:?}"
        );
        assert!(sim.cancel_at(2, 60));
        let mut ev = sim.advance(1000);
        ev.retain(|e| matches!(e.kind, EventKind::Started | EventKind::Ended { .. }));
        let got: Vec<_> = ev.iter().map(|e| (e.time, e.job, e.kind)).collect();
        let cancelled = EventKind::Ended {
            how: EndKind::CancelledRunning,
        };
        assert_eq!(
            got,
            [
                (50, 1, cancelled),
                (50, 2, EventKind::Started),
                (60, 2, cancelled)
            ]
        );
    }

    /// A log's job that never ran (runtime -1) is withdrawn, not run for 0 s, when a
    /// policy would start it before its cancel time; its processors (and, under
    /// conservative backfilling, its reservation) go to the next job at once. One the
    /// machine cannot start before its cancel time leaves then, as any cancelled job.
    #[test]
    fn a_job_that_never_ran_in_its_log_is_withdrawn_when_it_would_start() {
        let j = |id, submit, procs, runtime, cancel_at| SimJob {
            id,
            queue: 1,
            submit,
            runtime,
            procs,
            requested: 100,
            cancel_at,
        };
        for policy in [
            Policy::Fcfs,
            Policy::Easy,
            Policy::Conservative,
            Policy::Los {
                lookahead: 50,
                variant: LosVariant::BypassedFirst,
            },
        ] {
            let mut sim = Simulator::new(SimConfig::new(4, policy), 0);
            // 1 never ran in its log (cancelled at 500); 2 needs the whole machine.
            sim.submit(j(1, 0, 4, -1, Some(500))).unwrap();
            sim.submit(j(2, 0, 4, 50, None)).unwrap();
            // 3 never ran either and cannot start before its cancel time at 30.
            sim.submit(j(3, 10, 4, -1, Some(30))).unwrap();
            let mut ev = sim.advance(1000);
            ev.retain(|e| matches!(e.kind, EventKind::Started | EventKind::Ended { .. }));
            let got: Vec<_> = ev.iter().map(|e| (e.time, e.job, e.kind)).collect();
            let ended = |how| EventKind::Ended { how };
            assert_eq!(
                got,
                [
                    (0, 1, ended(EndKind::Withdrawn)),
                    (0, 2, EventKind::Started),
                    (30, 3, ended(EndKind::CancelledWaiting)),
                    (50, 2, ended(EndKind::Completed)),
                ],
                "{policy}"
            );
        }
        let mut sim = Simulator::new(SimConfig::new(4, Policy::Easy), 0);
        assert_eq!(
            sim.submit(j(4, 0, 1, -1, None)),
            Err(SubmitError::BadRuntime(-1)),
            "unknown only with a cancel time"
        );
        assert_eq!(
            sim.submit(j(5, 0, 1, -2, Some(9))),
            Err(SubmitError::BadRuntime(-2))
        );
    }

    /// Starts and ends of a run of moldable jobs: (job, start, end, processors).
    fn mold_run(
        policy: Policy,
        machine: u32,
        jobs: &[(i64, i64, Molding)],
    ) -> Vec<(i64, i64, i64, u32)> {
        let mut sim = Simulator::new(SimConfig::new(machine, policy), 0);
        for &(id, submit, m) in jobs {
            sim.submit_moldable(m.job(id, submit), m).unwrap();
        }
        let mut ev = Vec::new();
        sim.run_to_completion(&mut ev);
        let mut out: Vec<(i64, i64, i64, u32)> = Vec::new();
        for e in &ev {
            match e.kind {
                EventKind::Started => out.push((e.job, e.time, -1, e.procs)),
                EventKind::Ended { .. } => {
                    let r = out.iter_mut().find(|r| r.0 == e.job).expect("started");
                    assert_eq!(r.3, e.procs);
                    r.2 = e.time;
                }
                EventKind::Submitted => {}
            }
        }
        out.sort_unstable();
        out
    }

    /// Aging (§5.3): a long job that has waited five times its run time goes ahead of
    /// a medium one. X holds the machine until 20 000; A (long, 3600 s, from t = 1)
    /// ages at 18 001 and goes first at 20 000; with 4000 s it ages only at 20 001, and
    /// the medium job B (from t = 10) goes first.
    #[test]
    fn aging_promotes_a_long_wait_past_a_younger_medium_job() {
        for (a_run, first) in [(3600, 2), (4000, 3)] {
            let x = Molding::simple(4, 20_000, 4, false);
            let a = Molding::simple(4, a_run, 4, false);
            let b = Molding::simple(4, 60, 4, false);
            let r = mold_run(Policy::Easy, 4, &[(1, 0, x), (2, 1, a), (3, 10, b)]);
            let at_20000: Vec<i64> = r.iter().filter(|r| r.1 == 20_000).map(|r| r.0).collect();
            assert_eq!(at_20000, [first], "A runs {a_run} s: {r:?}");
        }
    }

    /// SCOJO-P starts the head job smaller now (§4.4), by hand (scojo-p.md §3.1–3.2):
    /// R holds 6 of 10 processors until 1000; C (N_opt 8, 100 s, N_min 4) arrives at
    /// 10. Load(1) = (6·100 + 8·100)/(10·100) = 1.4, m = 0.643 → 5 processors, 141 s,
    /// load 1.1; m = 0.526 → 4, 163 s, load 1.0; smaller modifiers stay at N_min = 4,
    /// so the best, 4, is the target: it fits now. Under EASY (traditional) C waits
    /// for R: 1000 to 1100.
    #[test]
    fn scojo_p_starts_smaller_now_when_waiting_costs_more() {
        let r = Molding::simple(6, 990, 10, false);
        let c = Molding::simple(8, 100, 10, true);
        let scojo = Policy::ScojoP(ScojoPolicy {
            predictive: false,
            ..ScojoPolicy::default()
        });
        let got = mold_run(scojo, 10, &[(1, 10, r), (2, 10, c)]);
        assert_eq!(got, [(1, 10, 1000, 6), (2, 10, 173, 4)]);
        let easy = mold_run(Policy::Easy, 10, &[(1, 10, r), (2, 10, c)]);
        assert_eq!(easy, [(1, 10, 1000, 6), (2, 1000, 1100, 8)]);
    }

    /// SCOJO-P waits to start bigger (§4.4): R holds 6 of 10 until 50; C (N_opt 8,
    /// 1000 s) arrives at 10. Load(1) = (6·40 + 8·1000)/(10·1000) = 0.824; m = 1.092
    /// → 9 processors, 972 s, load 0.925: accepted, target 9. Now with 4 responds in
    /// 1625 s, at 50 with 9 in 40 + 972 = 1012: it waits, its size fixed at 9 as a
    /// floor, and starts at 50 with 9. Cirne–Berman, at C's arrival, tries 4 to 10:
    /// 10 at 50 completes first (50 + 5200/5.5 = 995), so C takes 10.
    #[test]
    fn scojo_p_waits_to_start_bigger_and_cirne_berman_expands() {
        let r = Molding::simple(6, 50, 10, false);
        let c = Molding::simple(8, 1000, 10, true);
        let jobs = [(1, 0, r), (2, 10, c)];
        let scojo = Policy::ScojoP(ScojoPolicy {
            predictive: false,
            ..ScojoPolicy::default()
        });
        assert_eq!(
            mold_run(scojo, 10, &jobs),
            [(1, 0, 50, 6), (2, 50, 1022, 9)]
        );
        assert_eq!(
            mold_run(Policy::CirneBerman, 10, &jobs),
            [(1, 0, 50, 6), (2, 50, 995, 10)]
        );
        assert_eq!(
            mold_run(Policy::Easy, 10, &jobs),
            [(1, 0, 50, 6), (2, 50, 1050, 8)]
        );
    }

    #[test]
    fn submit_moldable_refuses_a_job_not_at_n_opt() {
        let mut sim = Simulator::new(SimConfig::new(16, Policy::Easy), 0);
        let m = Molding::simple(8, 100, 16, true);
        let mut j = m.job(1, 0);
        j.procs = 4;
        assert!(matches!(
            sim.submit_moldable(j, m),
            Err(SubmitError::BadMolding(_))
        ));
        let big = Molding::simple(16, 100, 64, true);
        let e = sim.submit_moldable(big.job(2, 0), big).unwrap_err();
        assert_eq!(
            e.to_string(),
            "moldable job: N_max 32 is more than the machine's 16 processors"
        );
    }

    #[test]
    fn events_serialize_flat_for_clients() {
        let e = SimEvent {
            time: 7,
            kind: EventKind::Ended {
                how: EndKind::Killed,
            },
            job: 3,
            queue: 2,
            procs: 4,
            requested: 60,
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"time":7,"event":"ended","how":"killed","job":3,"queue":2,"procs":4,"requested":60}"#
        );
        assert_eq!(serde_json::from_str::<SimEvent>(&json).unwrap(), e);
    }

    #[test]
    fn submit_refuses_bad_jobs_with_reasons() {
        let mut sim = Simulator::new(SimConfig::new(8, Policy::Easy), 100);
        let ok = SimJob {
            id: 1,
            queue: 1,
            submit: 100,
            runtime: 5,
            procs: 8,
            requested: 10,
            cancel_at: None,
        };
        assert_eq!(
            sim.submit(SimJob {
                submit: 99,
                ..ok.clone()
            }),
            Err(SubmitError::InThePast {
                submit: 99,
                now: 100
            })
        );
        assert_eq!(
            sim.submit(SimJob {
                procs: 9,
                ..ok.clone()
            }),
            Err(SubmitError::BadSize {
                procs: 9,
                machine: 8
            })
        );
        assert_eq!(
            sim.submit(SimJob {
                requested: 0,
                ..ok.clone()
            }),
            Err(SubmitError::BadRequestedTime(0))
        );
        assert_eq!(
            sim.submit(SimJob {
                runtime: -1,
                ..ok.clone()
            }),
            Err(SubmitError::BadRuntime(-1))
        );
        assert_eq!(
            sim.submit(SimJob {
                cancel_at: Some(50),
                ..ok.clone()
            }),
            Err(SubmitError::CancelBeforeSubmit {
                submit: 100,
                cancel_at: 50
            })
        );
        assert_eq!(sim.submit(ok.clone()), Ok(()));
        assert_eq!(sim.submit(ok.clone()), Err(SubmitError::DuplicateId(1)));
        assert_eq!(sim.pending_len(), 1);
        let ev = sim.advance(200);
        assert_eq!(ev.len(), 3);
        assert_eq!(
            ev[2].kind,
            EventKind::Ended {
                how: EndKind::Completed
            }
        );
        // The id is free again once the job has left.
        assert_eq!(sim.submit(SimJob { submit: 200, ..ok }), Ok(()));
    }
}
