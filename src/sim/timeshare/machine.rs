//! The time-shared machine: an Ousterhout matrix (MPL rows × P PEs), heartbeats every
//! timeslice T, and, between heartbeats, each PE's CPU given to its processes by the
//! algorithm's rule; jobs progress by the model of [`super::app`].
//!
//! **Time** is slot-stepped (fcs.md §10.3): quantum `q` spans `[q·T, (q+1)·T)` and
//! row `q mod MPL` is active in it. A quantum is cut where a launch ends or a job
//! finishes, and the PEs' shares are computed again there.
//!
//! **Admission** (§4.3.3, §4.4.4) happens at heartbeats only (the machine manager
//! sleeps between them, §5.2.1): waiting jobs in arrival order, first fit of N
//! contiguous free PEs in the lowest row that has them (the thesis's buddy-tree
//! allocator's placement is not described; fcs.md §1). ICS is placed so too, though it
//! has no heartbeats; local scheduling only needs N contiguous PEs each with fewer than
//! MPL processes (the program launchers of §4.3.5: "any PL in local scheduling"). A
//! started job launches for the constant launch overhead (it holds its cells, uses no
//! CPU), then runs.
//!
//! **Shares.** On each PE the running processes are put in priority tiers; a tier
//! shares what the tiers above left, processor-sharing style: a process that wants the
//! CPU a fraction φ of the time leaves the rest to the others of its tier and to the
//! tiers below. A process that busy-waits (GS, local, FCFS) always wants it (φ = 1); one
//! that spin-blocks (FCS, ICS) wants it only to compute (§4.4.2). Its availability `a`
//! (the fraction of the PE it gets when it wants it) gives its rate of progress
//! ([`AppModel::rate`]); the job's least `a` sets its desynchronisation wait; that wait
//! sets φ; a damped fixed point settles the three.
//!
//! - GS (§4.4.1): the active row's process; on a PE whose active cell is empty, the
//!   process that ran there continues (relaxed alternate scheduling); none otherwise.
//! - FCFS: GS with MPL 1.
//! - FCS (Fig. 3.2, §3.5 items 1 and 6): the owner of the active cell if it is CS or
//!   initial CS, alone for the whole slot; if it is F, it first and its blocked time
//!   to the PE's DC processes, then F, then CS; if it is DC or the cell is empty, the
//!   PE's DC processes share the slot, then F, then CS.
//! - ICS: every process of the PE in one tier, spin-blocking (no protected slots).
//! - Local: every process of the PE in one tier, busy-waiting.
//!
//! **Progress** is kept per process (work seconds); a process may run ahead of its
//! slowest peer by at most one iteration (it then waits in the exchange), never when the
//! job does not communicate; the job ends when every process has done its work. FCS
//! classes are re-evaluated at every heartbeat.
//!
//! May import: std, serde and the sibling modules.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::app::{AppModel, AppSpec};
use super::classify::{Class, ClassState};
use super::params::{Admission, Algorithm, Params};
use super::workload::TsJob;

/// Why the simulator refused its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TsError {
    /// A setting is unusable.
    Params(String),
    /// A job is unusable.
    Job {
        /// Its number.
        id: i64,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for TsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TsError::Params(m) => write!(f, "{m}"),
            TsError::Job { id, reason } => write!(f, "job {id}: {reason}"),
        }
    }
}

impl std::error::Error for TsError {}

/// What became of one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TsOutcome {
    /// The workload's job number.
    pub id: i64,
    /// Arrival, seconds (compressed clock).
    pub arrival_s: f64,
    /// When the machine manager allocated it (its launch began).
    pub start_s: f64,
    /// When it left the machine.
    pub end_s: f64,
    /// Its application.
    pub app: AppSpec,
    /// Its FCS class when it ended (FCS only).
    pub class: Option<Class>,
    /// Its FCS classes, each with the CPU seconds per process at which it was taken.
    pub class_history: Vec<(f64, Class)>,
    /// CPU seconds its processes used, summed over them.
    pub cpu_s: f64,
}

impl TsOutcome {
    /// Seconds from arrival to start.
    pub fn wait_s(&self) -> f64 {
        self.start_s - self.arrival_s
    }
    /// Seconds from start to end (the thesis's "runtime", Table 5.1).
    pub fn runtime_s(&self) -> f64 {
        self.end_s - self.start_s
    }
    /// Seconds from arrival to end.
    pub fn response_s(&self) -> f64 {
        self.end_s - self.arrival_s
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Waiting,
    Launching { ready_s: f64 },
    Running,
    Done,
}

#[derive(Debug, Clone)]
struct Proc {
    row: u32,
    pe: u32,
    /// Work seconds done.
    progress: f64,
    /// Fraction of its PE it gets whenever it wants it.
    avail: f64,
    /// Fraction of the time it wants the CPU.
    phi: f64,
    /// Work seconds per wall second.
    rate: f64,
    /// CPU seconds per wall second.
    used: f64,
}

#[derive(Debug, Clone)]
struct JobState {
    job: TsJob,
    model: AppModel,
    phase: Phase,
    procs: Vec<Proc>,
    min_avail: f64,
    start_s: Option<f64>,
    end_s: Option<f64>,
    class: Option<ClassState>,
    cpu_s: f64,
}

impl JobState {
    fn min_progress(&self) -> f64 {
        self.procs
            .iter()
            .map(|p| p.progress)
            .fold(f64::INFINITY, f64::min)
    }

    /// Seconds until every process has done its work at the current rates.
    fn time_to_finish(&self) -> f64 {
        let w = self.job.app.work_s;
        let mut t: f64 = 0.0;
        for p in &self.procs {
            let left = w - p.progress;
            if left > 0.0 {
                if p.rate <= 0.0 {
                    return f64::INFINITY;
                }
                t = t.max(left / p.rate);
            }
        }
        t
    }
}

/// A process: its job's index and its own index in the job.
type ProcRef = (usize, u32);

/// Priority tiers on one PE (FCS uses up to four: an F owner, then DC, F, CS).
const TIERS: usize = 4;

/// Most rounds of the fixed point between availabilities and wants; it stops earlier
/// once no want moves by more than [`FIXED_POINT_TOL`].
const FIXED_POINT_ROUNDS: usize = 200;

/// Settled enough: a want that moves by less than this changes a rate by less than a
/// millionth of a per cent.
const FIXED_POINT_TOL: f64 = 1e-9;

/// The simulator, stepped one quantum at a time.
#[derive(Debug, Clone)]
pub struct TimeShareSim {
    p: Params,
    jobs: Vec<JobState>,
    next_arrival: usize,
    queue: VecDeque<usize>,
    /// `row · P + pe` → the process in that cell.
    cells: Vec<Option<ProcRef>>,
    /// GS and FCFS: the process each PE runs.
    current: Vec<Option<ProcRef>>,
    /// Jobs launching or running, by index (start order), always sorted.
    active: Vec<usize>,
    quantum: u64,
    now_s: f64,
    done: usize,
    tiers: Vec<[Vec<ProcRef>; TIERS]>,
    fill: Vec<bool>,
    /// Bumped whenever what the shares depend on changes (a start, a launch's end, an
    /// end, a class, a GS PE's process).
    generation: u64,
    /// Per active row (one entry without slots): the generation its shares were
    /// computed at and the shares, so a row that comes back unchanged every MPL
    /// quanta is not solved again.
    cache: Vec<Option<(u64, Vec<f64>)>>,
}

impl TimeShareSim {
    /// A machine with `params`, fed `jobs` (any order; run in arrival order, ties by
    /// number).
    pub fn new(params: Params, mut jobs: Vec<TsJob>) -> Result<TimeShareSim, TsError> {
        params.validate().map_err(TsError::Params)?;
        for j in &jobs {
            let bad = |reason: String| TsError::Job { id: j.id, reason };
            j.app.validate().map_err(bad)?;
            if !(j.arrival_s.is_finite() && j.arrival_s >= 0.0) {
                return Err(bad(format!(
                    "arrival: must be 0 s or later, got {}",
                    j.arrival_s
                )));
            }
            if j.app.procs > params.processors {
                return Err(bad(format!(
                    "needs {} PEs, the machine has {}",
                    j.app.procs, params.processors
                )));
            }
        }
        jobs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s).then(a.id.cmp(&b.id)));
        let fcs = params.algorithm == Algorithm::Fcs;
        let states = jobs
            .into_iter()
            .map(|job| JobState {
                model: AppModel::new(job.app, params.timeslice_s, params.msg_s, params.imbalance),
                job,
                phase: Phase::Waiting,
                procs: Vec::new(),
                min_avail: 0.0,
                start_s: None,
                end_s: None,
                class: fcs.then(ClassState::default),
                cpu_s: 0.0,
            })
            .collect();
        let pes = params.processors as usize;
        let cells = vec![None; params.mpl as usize * pes];
        Ok(TimeShareSim {
            jobs: states,
            next_arrival: 0,
            queue: VecDeque::new(),
            cells,
            current: vec![None; pes],
            active: Vec::new(),
            quantum: 0,
            now_s: 0.0,
            done: 0,
            tiers: vec![Default::default(); pes],
            fill: vec![true; pes],
            generation: 0,
            cache: vec![None; params.mpl as usize],
            p: params,
        })
    }

    /// The settings.
    pub fn params(&self) -> &Params {
        &self.p
    }

    /// The simulated time, seconds.
    pub fn now_s(&self) -> f64 {
        self.now_s
    }

    /// Jobs that have left the machine.
    pub fn finished(&self) -> usize {
        self.done
    }

    /// Whether every job has left.
    pub fn is_done(&self) -> bool {
        self.done == self.jobs.len()
    }

    /// The matrix: for each row, for each PE, the number of the job in that cell.
    pub fn occupancy(&self) -> Vec<Vec<Option<i64>>> {
        let pes = self.p.processors as usize;
        self.cells
            .chunks(pes)
            .map(|row| {
                row.iter()
                    .map(|c| c.map(|(j, _)| self.jobs[j].job.id))
                    .collect()
            })
            .collect()
    }

    /// CPU used on each PE (fraction of it) under the shares of the last sub-interval.
    pub fn pe_used(&self) -> Vec<f64> {
        let mut used = vec![0.0; self.p.processors as usize];
        for &j in &self.active {
            for pr in &self.jobs[j].procs {
                used[pr.pe as usize] += pr.used;
            }
        }
        used
    }

    /// The FCS class of job `id` now, if it runs under FCS and has started.
    pub fn class_of(&self, id: i64) -> Option<Class> {
        self.jobs
            .iter()
            .find(|j| j.job.id == id)
            .and_then(|j| j.class.as_ref().map(|c| c.class))
    }

    /// The outcomes of the jobs that have left, in arrival order.
    pub fn outcomes(&self) -> Vec<TsOutcome> {
        self.jobs
            .iter()
            .filter(|j| j.phase == Phase::Done)
            .map(|j| TsOutcome {
                id: j.job.id,
                arrival_s: j.job.arrival_s,
                start_s: j.start_s.unwrap_or(j.job.arrival_s),
                end_s: j.end_s.unwrap_or(j.job.arrival_s),
                app: j.job.app,
                class: j.class.as_ref().map(|c| c.class),
                class_history: j
                    .class
                    .as_ref()
                    .map(|c| c.history.clone())
                    .unwrap_or_default(),
                cpu_s: j.cpu_s,
            })
            .collect()
    }

    fn cell(&self, row: usize, pe: usize) -> Option<ProcRef> {
        self.cells[row * self.p.processors as usize + pe]
    }

    fn is_running(&self, j: usize) -> bool {
        self.jobs[j].phase == Phase::Running
    }

    /// Runs one quantum (skipping straight to the next arrival when the machine is
    /// empty); returns false once every job has left.
    pub fn step(&mut self) -> bool {
        if self.is_done() {
            return false;
        }
        let t = self.p.timeslice_s;
        if self.active.is_empty() && self.queue.is_empty() {
            // Nothing to run until the next arrival: its first heartbeat.
            let next = self.jobs[self.next_arrival].job.arrival_s;
            let mut q = (next / t).floor() as u64;
            while (q as f64) * t < next {
                q += 1;
            }
            self.quantum = self.quantum.max(q);
        }
        let t0 = self.quantum as f64 * t;
        let t1 = (self.quantum + 1) as f64 * t;
        self.now_s = t0;
        while self.next_arrival < self.jobs.len()
            && self.jobs[self.next_arrival].job.arrival_s <= t0
        {
            self.queue.push_back(self.next_arrival);
            self.next_arrival += 1;
        }
        self.admit(t0);
        if self.p.algorithm == Algorithm::Fcs {
            let th = self.p.fcs;
            for &j in &self.active {
                if let (Phase::Running, Some(c)) = (self.jobs[j].phase, &mut self.jobs[j].class)
                    && c.reclassify(&th, t)
                {
                    self.generation += 1;
                }
            }
        }
        let row = if self.p.algorithm.has_slots() {
            (self.quantum % u64::from(self.p.mpl)) as usize
        } else {
            0
        };
        self.heartbeat_current(row);
        loop {
            self.end_launches(row);
            self.allocate(row);
            let mut next = t1;
            let mut ends = Vec::new();
            for &j in &self.active {
                let js = &self.jobs[j];
                match js.phase {
                    Phase::Launching { ready_s } => next = next.min(ready_s),
                    Phase::Running => {
                        let end = self.now_s + js.time_to_finish();
                        ends.push((j, end));
                        next = next.min(end);
                    }
                    _ => {}
                }
            }
            let next = next.max(self.now_s);
            self.integrate(next - self.now_s);
            self.now_s = next;
            // The jobs whose last process finishes at `next` leave, whatever the
            // rounding left of their work.
            let ending: Vec<usize> = ends
                .into_iter()
                .filter(|&(_, end)| end <= next)
                .map(|(j, _)| j)
                .collect();
            self.finish_jobs(&ending);
            if self.now_s >= t1 {
                break;
            }
        }
        self.quantum += 1;
        true
    }

    /// Starts waiting jobs that fit, in arrival order (strict FCFS stops at the first
    /// that does not).
    fn admit(&mut self, now: f64) {
        let mut i = 0;
        while i < self.queue.len() {
            let j = self.queue[i];
            let n = self.jobs[j].job.app.procs as usize;
            match self.find_cells(n) {
                Some(cells) => {
                    self.queue.remove(i);
                    let pes = self.p.processors as usize;
                    let js = &mut self.jobs[j];
                    js.procs = cells
                        .iter()
                        .map(|&(row, pe)| Proc {
                            row: row as u32,
                            pe: pe as u32,
                            progress: 0.0,
                            avail: 0.0,
                            phi: 1.0,
                            rate: 0.0,
                            used: 0.0,
                        })
                        .collect();
                    js.start_s = Some(now);
                    js.phase = if self.p.launch_overhead_s > 0.0 {
                        Phase::Launching {
                            ready_s: now + self.p.launch_overhead_s,
                        }
                    } else {
                        Phase::Running
                    };
                    for (k, &(row, pe)) in cells.iter().enumerate() {
                        self.cells[row * pes + pe] = Some((j, k as u32));
                    }
                    // In start order (job index) at all times: `allocate`'s snapshots
                    // are read back in this order, so it must not change without a new
                    // generation (any-fit admission starts jobs out of arrival order).
                    let at = self.active.partition_point(|&a| a < j);
                    self.active.insert(at, j);
                    self.generation += 1;
                }
                None if self.p.admission == Admission::Fcfs => break,
                None => i += 1,
            }
        }
    }

    /// Cells for a job of `n` processes: first fit of `n` contiguous PEs.
    fn find_cells(&self, n: usize) -> Option<Vec<(usize, usize)>> {
        let pes = self.p.processors as usize;
        let rows = self.p.mpl as usize;
        if self.p.algorithm.row_bound() {
            // All in one row (the matrix's one-to-one mapping, §2.2).
            for row in 0..rows {
                let mut run = 0;
                for pe in 0..pes {
                    if self.cell(row, pe).is_none() {
                        run += 1;
                        if run == n {
                            return Some((pe + 1 - n..=pe).map(|p| (row, p)).collect());
                        }
                    } else {
                        run = 0;
                    }
                }
            }
            None
        } else {
            // Local scheduling: any free cell on each PE, at most MPL per PE.
            let free_row = |pe: usize| (0..rows).find(|&r| self.cell(r, pe).is_none());
            let mut run = 0;
            for pe in 0..pes {
                if free_row(pe).is_some() {
                    run += 1;
                    if run == n {
                        return Some(
                            (pe + 1 - n..=pe)
                                .map(|p| (free_row(p).expect("checked"), p))
                                .collect(),
                        );
                    }
                } else {
                    run = 0;
                }
            }
            None
        }
    }

    /// GS and FCFS at a heartbeat: each PE switches to the active row's process, or
    /// keeps the one it ran when that cell is empty (relaxed alternate scheduling).
    fn heartbeat_current(&mut self, row: usize) {
        if !matches!(self.p.algorithm, Algorithm::Gs | Algorithm::Fcfs) {
            return;
        }
        for pe in 0..self.p.processors as usize {
            let owner = self.cell(row, pe).filter(|&(j, _)| self.is_running(j));
            let keep = self.current[pe].filter(|&(j, _)| self.is_running(j));
            let now = owner.or(keep);
            if now != self.current[pe] {
                self.current[pe] = now;
                self.generation += 1;
            }
        }
    }

    /// Launches that have ended become running processes; under GS and FCFS they take
    /// their PEs at once if their row is active (the node manager suspends a new
    /// process only when its slot is not the current one, §4.4.1 item 6).
    fn end_launches(&mut self, row: usize) {
        let gs = matches!(self.p.algorithm, Algorithm::Gs | Algorithm::Fcfs);
        for &j in &self.active {
            if let Phase::Launching { ready_s } = self.jobs[j].phase
                && ready_s <= self.now_s
            {
                self.jobs[j].phase = Phase::Running;
                self.generation += 1;
                if gs {
                    for (k, pr) in self.jobs[j].procs.iter().enumerate() {
                        if pr.row as usize == row {
                            self.current[pr.pe as usize] = Some((j, k as u32));
                        }
                    }
                }
            }
        }
    }

    /// Fills `tiers` and `fill` for active row `row`.
    fn build_tiers(&mut self, row: usize) {
        let mut tiers = std::mem::take(&mut self.tiers);
        let rows = self.p.mpl as usize;
        for (pe, t) in tiers.iter_mut().enumerate() {
            for tier in t.iter_mut() {
                tier.clear();
            }
            self.fill[pe] = true;
            let residents = (0..rows)
                .filter_map(|r| self.cell(r, pe))
                .filter(|&(j, _)| self.is_running(j));
            match self.p.algorithm {
                Algorithm::Gs | Algorithm::Fcfs => {
                    if let Some(c) = self.current[pe] {
                        t[0].push(c);
                    }
                }
                Algorithm::Local | Algorithm::Ics => t[0].extend(residents),
                Algorithm::Fcs => {
                    let class = |j: usize| {
                        self.jobs[j]
                            .class
                            .as_ref()
                            .map_or(Class::InitialCs, |c| c.class)
                    };
                    let owner = self.cell(row, pe).filter(|&(j, _)| self.is_running(j));
                    // Tiers below the owner: DC, then F, then CS (§3.5 item 6).
                    let base = match owner {
                        Some(o) if class(o.0).cs_like() => {
                            // CS: the whole slot, not preempted, no filling (Fig. 3.2).
                            t[0].push(o);
                            self.fill[pe] = false;
                            continue;
                        }
                        Some(o) if class(o.0) == Class::F => {
                            t[0].push(o);
                            1
                        }
                        _ => 0,
                    };
                    for r in residents {
                        if base == 1 && Some(r) == owner {
                            continue;
                        }
                        let c = class(r.0);
                        let k = if c.dont_care() {
                            0
                        } else if c == Class::F {
                            1
                        } else {
                            2
                        };
                        t[base + k].push(r);
                    }
                }
            }
        }
        self.tiers = tiers;
    }

    /// Availabilities from the current wants: each tier shares what the tiers above
    /// left; a process gets `cap / (1 + Σ others' φ)` when it wants the CPU.
    fn availability(&mut self) {
        for &j in &self.active {
            for pr in &mut self.jobs[j].procs {
                pr.avail = 0.0;
            }
        }
        for pe in 0..self.tiers.len() {
            let mut cap: f64 = 1.0;
            for k in 0..TIERS {
                if self.tiers[pe][k].is_empty() || cap <= 0.0 {
                    continue;
                }
                let sum: f64 = self.tiers[pe][k]
                    .iter()
                    .map(|&(j, i)| self.jobs[j].procs[i as usize].phi)
                    .sum();
                let mut used = 0.0;
                for &(j, i) in &self.tiers[pe][k] {
                    let pr = &mut self.jobs[j].procs[i as usize];
                    pr.avail = cap / (1.0 + sum - pr.phi);
                    used += pr.avail * pr.phi;
                }
                cap = if self.fill[pe] {
                    (cap - used).max(0.0)
                } else {
                    0.0
                };
            }
        }
        for &j in &self.active {
            let js = &mut self.jobs[j];
            js.min_avail = js
                .procs
                .iter()
                .map(|p| p.avail)
                .fold(f64::INFINITY, f64::min);
        }
    }

    /// The PEs' shares and every running process's rate for active row `row`.
    fn allocate(&mut self, row: usize) {
        let slot = if self.p.algorithm.has_slots() { row } else { 0 };
        // A snapshot is laid out in the order of `active`; that order only changes
        // with the generation because `active` is kept sorted.
        debug_assert!(self.active.is_sorted(), "active jobs out of order");
        if let Some((g, snap)) = &self.cache[slot]
            && *g == self.generation
        {
            let mut it = snap.iter().copied();
            for &j in &self.active {
                let js = &mut self.jobs[j];
                js.min_avail = it.next().expect("snapshot of the same jobs");
                for pr in &mut js.procs {
                    pr.avail = it.next().expect("snapshot of the same processes");
                    pr.phi = it.next().expect("snapshot of the same processes");
                    pr.rate = it.next().expect("snapshot of the same processes");
                    pr.used = it.next().expect("snapshot of the same processes");
                }
            }
            return;
        }
        self.solve(row);
        let mut snap = Vec::new();
        for &j in &self.active {
            let js = &self.jobs[j];
            snap.push(js.min_avail);
            for pr in &js.procs {
                snap.extend([pr.avail, pr.phi, pr.rate, pr.used]);
            }
        }
        self.cache[slot] = Some((self.generation, snap));
    }

    /// Solves the shares of active row `row` afresh.
    fn solve(&mut self, row: usize) {
        self.build_tiers(row);
        let spin_block = self.p.algorithm.spin_block();
        let q = self.p.q_local_s;
        for &j in &self.active {
            let m = self.jobs[j].model;
            for pr in &mut self.jobs[j].procs {
                pr.phi = if spin_block {
                    m.cpu_per_work / m.stretch_co
                } else {
                    1.0
                };
            }
        }
        self.availability();
        if spin_block {
            for _ in 0..FIXED_POINT_ROUNDS {
                let mut moved: f64 = 0.0;
                for &j in &self.active {
                    let js = &mut self.jobs[j];
                    if js.phase != Phase::Running {
                        continue;
                    }
                    let m = js.model;
                    let delta = m.desync_per_work(js.min_avail, q);
                    for pr in &mut js.procs {
                        if pr.avail > 0.0 {
                            let want = m.cpu_per_work / (m.stretch_co + pr.avail * delta);
                            moved = moved.max((want - pr.phi).abs());
                            // Damped: the map from wants to wants is decreasing and
                            // would oscillate undamped.
                            pr.phi = 0.5 * (pr.phi + want);
                        }
                    }
                }
                self.availability();
                if moved < FIXED_POINT_TOL {
                    break;
                }
            }
        }
        for &j in &self.active {
            let js = &mut self.jobs[j];
            let m = js.model;
            let min_avail = js.min_avail;
            for pr in &mut js.procs {
                if js.phase != Phase::Running {
                    pr.rate = 0.0;
                    pr.used = 0.0;
                } else if spin_block {
                    // It uses the CPU only to compute and send: `a·φ`.
                    pr.used = pr.avail * pr.phi;
                    pr.rate = pr.used / m.cpu_per_work;
                } else {
                    // It holds its share whether it computes or spins.
                    pr.used = pr.avail;
                    pr.rate = m.rate(pr.avail, min_avail, q);
                }
            }
        }
    }

    /// Advances every running job by `dt` seconds at its current rates.
    fn integrate(&mut self, dt: f64) {
        if dt <= 0.0 {
            return;
        }
        let q = self.p.q_local_s;
        for &j in &self.active {
            let js = &mut self.jobs[j];
            if js.phase != Phase::Running {
                continue;
            }
            let work = js.job.app.work_s;
            let before = js.min_progress();
            let mut cpu = 0.0;
            for pr in &mut js.procs {
                pr.progress = (pr.progress + pr.rate * dt).min(work);
                cpu += pr.used * dt;
            }
            let after = js.min_progress();
            let slack = js.model.slack_s();
            if slack.is_finite() {
                for pr in &mut js.procs {
                    pr.progress = pr.progress.min(after + slack);
                }
            }
            js.cpu_s += cpu;
            if let Some(c) = &mut js.class {
                let m = js.model;
                let exchanges = if m.communicates() {
                    (after - before) / m.compute_s
                } else {
                    0.0
                };
                let n = f64::from(js.job.app.procs);
                c.account(cpu / n, exchanges, m.wait_per_exchange_s(js.min_avail, q));
            }
        }
    }

    /// Jobs in `ending`, and any whose every process has done its work, leave now;
    /// their cells are freed.
    fn finish_jobs(&mut self, ending: &[usize]) {
        let pes = self.p.processors as usize;
        let now = self.now_s;
        let mut k = 0;
        while k < self.active.len() {
            let j = self.active[k];
            let js = &self.jobs[j];
            let done = js.phase == Phase::Running
                && (ending.contains(&j) || js.min_progress() >= js.job.app.work_s);
            if !done {
                k += 1;
                continue;
            }
            // `remove` keeps the others in order (see `admit`).
            self.active.remove(k);
            self.generation += 1;
            let js = &mut self.jobs[j];
            js.phase = Phase::Done;
            js.end_s = Some(now);
            for pr in &mut js.procs {
                pr.progress = js.job.app.work_s;
                pr.rate = 0.0;
                pr.used = 0.0;
                pr.avail = 0.0;
                self.cells[pr.row as usize * pes + pr.pe as usize] = None;
                if self.current[pr.pe as usize].is_some_and(|(c, _)| c == j) {
                    self.current[pr.pe as usize] = None;
                }
            }
            self.done += 1;
        }
    }
}

/// Runs `jobs` on the machine of `params` to the end; `progress` is told how many
/// jobs have left after each quantum in which some did. Outcomes in arrival order.
pub fn run(
    params: &Params,
    jobs: Vec<TsJob>,
    mut progress: impl FnMut(usize),
) -> Result<Vec<TsOutcome>, TsError> {
    let mut sim = TimeShareSim::new(params.clone(), jobs)?;
    let mut last = 0;
    while sim.step() {
        if sim.finished() != last {
            last = sim.finished();
            progress(last);
        }
    }
    Ok(sim.outcomes())
}
