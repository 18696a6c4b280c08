//! The dissertation's VARQ generality experiment (Nurmi 2009, §5.3.4, Tables 5.5 and
//! 5.6): replay a workload through the simulator while a fraction of its jobs become
//! virtual advance reservations for deadlines every six hours, and compare the
//! probabilities VARQ promised with the fraction of reservations that held.
//!
//! The construction, following §5.3.4 where it speaks and fixing what it leaves open:
//! - Deadlines lie on a fixed grid, `origin + k·period` (period six hours; origin the
//!   first arrival unless given), "the worst case where the given percentage of jobs
//!   request reservations starting at the same time every six hours".
//! - Jobs are taken in submission order; each becomes a VARQ request with probability
//!   `fraction`, drawn from a seeded generator (one draw per job, so the choice of
//!   jobs does not depend on the probability asked for). The request is made at the
//!   job's own submit time t, for the next deadline D > t, with the job's processors N
//!   and requested time W as the work, at `min_probability` P.
//! - Planning is the VARQ planner's `latest` mode (`plan::varq`, spec `varq.md`):
//!   candidate submission times s = t, t + Δ, … < D, advertised walltime
//!   A(s) = W + (D − s), p(s) from a QBETS predictor (`engine::QueuePredictor`, the
//!   product configuration unless given) that has seen exactly the simulated machine's
//!   history before t — arrivals, starts and departures as the scheduler's log would
//!   show them, VARQ jobs included, with their advertised walltimes.
//! - An accepted request is submitted at s with requested time A(s). It holds its
//!   nodes until D and then does the job's work (its run time r, cut at W); a job
//!   that starts after D (a failed reservation) does its work at once — the `hold`
//!   script of `varq.md` without an executor to cancel it, so that the trace's work is
//!   neither lost nor duplicated. A trace cancellation of a chosen job is dropped: its
//!   user wanted the reservation.
//! - A refused request (no s meets P, including too little history) is submitted
//!   unchanged at t, as an ordinary job: the user gives up on the reservation. The
//!   dissertation's live users retried every 15 s; its simulator says no more.
//! - Judging: a reservation succeeded when its job was running at D, i.e. started at
//!   or before D (it then holds its nodes until D + r).
//! - Over-allocation (Table 5.5): over accepted requests, *required* = Σ N·r, the
//!   allocation the work needs, and *used* = Σ N·(end − start), what the VARQ jobs
//!   occupied; the ratio is used / required. The worst case Σ N·(r + D − s), known at
//!   planning time, is reported beside it.
//!
//! May import: std, serde, rand, rand_chacha, the sibling modules, and the pure engine
//! (`crate::engine`) and planner (`crate::plan`) — no I/O, no clock.

use std::collections::HashMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::job::{EndKind, SimJob};
use super::simulator::{EventKind, SimConfig, SimEvent, Simulator, SubmitError};
use crate::engine::{Config as EngineConfig, ConfigError, JobShape, QueuePredictor};
use crate::plan::varq::{self, Mode, VarqPlan, VarqRequest};
use crate::plan::{PredictorAt, StartOracle};

/// The dissertation's spacing of deadlines: six hours.
pub const DEFAULT_PERIOD_S: i64 = 6 * 3600;

/// Parameters of one run of the experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VarqExperiment {
    /// The simulated machine and its scheduler.
    pub sim: SimConfig,
    /// Chance that a job becomes a VARQ request, in [0, 1].
    pub fraction: f64,
    /// Minimum success probability P of every request, in (0, 1).
    pub probability: f64,
    /// Confidence level C of the predictor's probabilities, in (0, 1).
    pub confidence: f64,
    /// Seed of the choice of jobs.
    pub seed: u64,
    /// Seconds between deadlines.
    pub period_s: i64,
    /// First deadline grid point; `None`: the first arrival.
    pub origin: Option<i64>,
    /// Spacing of candidate submission times (Δ), seconds.
    pub step_s: u64,
    /// The QBETS predictor's configuration.
    pub engine: EngineConfig,
}

impl VarqExperiment {
    /// The dissertation's set-up on `sim`: deadlines every six hours, Δ = 30 s,
    /// confidence 0.95, the product's predictor.
    pub fn new(sim: SimConfig, fraction: f64, probability: f64, seed: u64) -> Self {
        Self {
            sim,
            fraction,
            probability,
            confidence: varq::DEFAULT_CONFIDENCE,
            seed,
            period_s: DEFAULT_PERIOD_S,
            origin: None,
            step_s: varq::DEFAULT_STEP_S,
            engine: EngineConfig::default(),
        }
    }

    /// Checks every parameter; each fault names its parameter.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.fraction.is_finite() && (0.0..=1.0).contains(&self.fraction)) {
            return Err(format!(
                "varq fraction {} is not between 0 and 1",
                self.fraction
            ));
        }
        let open = |x: f64| x.is_finite() && x > 0.0 && x < 1.0;
        if !open(self.probability) {
            return Err(format!(
                "varq probability {} is not strictly between 0 and 1",
                self.probability
            ));
        }
        if !open(self.confidence) {
            return Err(format!(
                "confidence {} is not strictly between 0 and 1",
                self.confidence
            ));
        }
        if self.period_s < 1 {
            return Err(format!("deadline period {} s is below 1 s", self.period_s));
        }
        if self.step_s < 1 {
            return Err(format!("planning step {} s is below 1 s", self.step_s));
        }
        if self.step_s as i64 > self.period_s {
            return Err(format!(
                "planning step {} s is longer than the deadline period {} s",
                self.step_s, self.period_s
            ));
        }
        self.engine
            .validate()
            .map_err(|e: ConfigError| format!("engine configuration: {e}"))
    }
}

/// The first deadline strictly after `t` on the grid `origin + k·period`.
pub fn next_deadline(t: i64, origin: i64, period_s: i64) -> i64 {
    let k = (t - origin).div_euclid(period_s) + 1;
    origin + k * period_s
}

/// The VARQ request a chosen job makes at its submit time for `deadline`.
pub fn request_for(job: &SimJob, deadline: i64, cfg: &VarqExperiment) -> VarqRequest {
    VarqRequest {
        nodes: job.procs,
        walltime_s: job.requested.max(1) as u64,
        start_at: deadline,
        min_probability: cfg.probability,
        confidence: cfg.confidence,
        mode: Mode::Latest,
        step_s: cfg.step_s,
    }
}

/// The job submitted for an accepted plan: it arrives at the planned time asking for
/// the advertised walltime. Its end is set by [`Simulator::cancel_at`] once it starts
/// (see [`end_of_varq_job`]); until then it would run its whole advertised time.
pub fn varq_job(job: &SimJob, plan: &VarqPlan) -> SimJob {
    let advertised = i64::try_from(plan.advertised_walltime_s).unwrap_or(i64::MAX);
    SimJob {
        id: job.id,
        queue: job.queue,
        submit: plan.submit_at,
        runtime: advertised,
        procs: job.procs,
        requested: advertised,
        cancel_at: None,
    }
}

/// When a VARQ job that started at `start` ends: it holds its nodes until the deadline
/// and then works `work_s`; started late, it works at once.
pub fn end_of_varq_job(start: i64, deadline: i64, work_s: i64) -> i64 {
    start.max(deadline) + work_s
}

/// Whether a reservation held: its job was running at the deadline.
pub fn succeeded(start: i64, deadline: i64) -> bool {
    start <= deadline
}

/// VARQ's `latest` decision for `req` at `now`: the last candidate submission time
/// whose probability meets P, or `None`. The same choice as `varq::plan` in `latest`
/// mode, found by walking the trajectory from its end and stopping at the first point
/// that qualifies, since the experiment needs no refused request's best point.
pub fn plan_latest(req: &VarqRequest, now: i64, oracle: &impl StartOracle) -> Option<VarqPlan> {
    if req.validate(now).is_err() {
        return None;
    }
    let step = req.step_s as i64;
    let points = (req.start_at - now + step - 1) / step;
    let limit = oracle.max_walltime_s();
    (0..points).rev().find_map(|k| {
        let p = varq::point_at(req, now + k * step, limit, oracle);
        (p.status == varq::PointStatus::Ok && p.probability >= req.min_probability).then(|| {
            VarqPlan {
                submit_at: p.submit_at,
                advertised_walltime_s: p.advertised_walltime_s,
                probability: p.probability,
                max_overhead_node_s: u64::from(req.nodes) * p.lead_s,
                required_node_s: u64::from(req.nodes) * req.walltime_s,
            }
        })
    })
}

/// One VARQ request of a run and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VarqRecord {
    /// The job's id.
    pub job: i64,
    /// Processors (N).
    pub procs: u32,
    /// Requested time of the original job (W), seconds.
    pub walltime_s: i64,
    /// The work: the job's run time cut at W, seconds.
    pub work_s: i64,
    /// When the request was made (the job's original submit time).
    pub requested_at: i64,
    /// The deadline (start_at).
    pub deadline: i64,
    /// The plan; `None` when refused (the job then ran as an ordinary job).
    pub plan: Option<VarqPlan>,
    /// When its job started; `None` if it never did (not in a finished run).
    pub start: Option<i64>,
    /// When its job ended.
    pub end: Option<i64>,
}

impl VarqRecord {
    /// Whether an accepted request held: its job started at or before the deadline.
    pub fn succeeded(&self) -> Option<bool> {
        self.plan.as_ref()?;
        Some(self.start.is_some_and(|s| succeeded(s, self.deadline)))
    }

    /// Node-seconds the VARQ job occupied (0 until it ended).
    pub fn used_node_s(&self) -> u64 {
        match (self.start, self.end) {
            (Some(s), Some(e)) => u64::from(self.procs) * (e - s).max(0) as u64,
            _ => 0,
        }
    }

    /// Node-seconds the work needs.
    pub fn required_node_s(&self) -> u64 {
        u64::from(self.procs) * self.work_s.max(0) as u64
    }
}

/// What a run measured: Table 5.6's row cell and Table 5.5's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VarqSummary {
    pub fraction: f64,
    pub probability: f64,
    pub seed: u64,
    /// Jobs in the workload.
    pub jobs: usize,
    /// Jobs chosen to become VARQ requests.
    pub requests: usize,
    /// Requests VARQ accepted (Table 5.6's *count*).
    pub accepted: usize,
    /// Requests refused (no submission time met P).
    pub refused: usize,
    /// Mean predicted success probability of the accepted requests (*pred.*).
    pub mean_predicted: f64,
    /// Accepted requests whose job was running at its deadline.
    pub succeeded: usize,
    /// `succeeded / accepted` (*act.*); 0 when nothing was accepted.
    pub achieved: f64,
    /// Standard deviation of the success count's fraction if each request succeeded
    /// independently with its predicted probability: sqrt(Σ p(1 − p)) / accepted.
    pub binomial_sd: f64,
    /// Allocation the accepted requests' work needs, node-hours (Table 5.5 *req.*).
    pub required_node_h: f64,
    /// Allocation their VARQ jobs occupied, node-hours (*used*).
    pub used_node_h: f64,
    /// `used / required` (*ratio*); 0 when nothing was required.
    pub ratio: f64,
    /// The planned worst case, Σ N·(r + D − s) / required.
    pub worst_case_ratio: f64,
    /// Mean lead D − s of the accepted requests, seconds.
    pub mean_lead_s: f64,
    /// Mean wait of the jobs that were not accepted VARQ requests, seconds.
    pub mean_wait_others_s: f64,
    /// From the first arrival to the last end, seconds.
    pub makespan_s: i64,
}

/// The result of [`run_varq_experiment`].
#[derive(Debug, Clone, Default)]
pub struct VarqRun {
    /// One record per VARQ request, in request order.
    pub records: Vec<VarqRecord>,
    /// Jobs the simulator refused, with the reason (none for validated input).
    pub refused: Vec<(SimJob, SubmitError)>,
    /// Waits of the jobs that were not accepted VARQ requests (wait until start or
    /// until cancelled).
    pub other_waits: Vec<i64>,
    /// First arrival and last event.
    pub span: (i64, i64),
}

/// What the driver remembers of a job in the system.
struct Live {
    submit: i64,
    shape: JobShape,
    /// Index of its VARQ record when it is an accepted request.
    varq: Option<usize>,
}

/// The simulation and the predictor that watches it.
struct Driver {
    sim: Simulator,
    predictor: QueuePredictor,
    live: HashMap<i64, Live>,
    records: Vec<VarqRecord>,
    other_waits: Vec<i64>,
    last: i64,
    events: Vec<SimEvent>,
}

impl Driver {
    /// Handles every event at or before `t`, one instant at a time, so that a VARQ job's
    /// end is set at the instant it starts.
    fn run_until(&mut self, t: i64) {
        while let Some(next) = self.sim.next_event_time() {
            if next > t {
                break;
            }
            self.sim.advance_to(next, &mut self.events);
            let events = std::mem::take(&mut self.events);
            for ev in &events {
                self.absorb(ev);
            }
            self.events = events;
            self.events.clear();
        }
    }

    fn absorb(&mut self, ev: &SimEvent) {
        self.last = self.last.max(ev.time);
        let Some(l) = self.live.get(&ev.job) else {
            return;
        };
        let (submit, shape, varq) = (l.submit, l.shape, l.varq);
        match ev.kind {
            EventKind::Submitted => self.predictor.observe_arrival(ev.time, shape),
            EventKind::Started => {
                self.predictor.observe_start(submit, ev.time, shape);
                match varq {
                    Some(i) => {
                        let r = &mut self.records[i];
                        r.start = Some(ev.time);
                        let end = end_of_varq_job(ev.time, r.deadline, r.work_s);
                        let set = self.sim.cancel_at(ev.job, end);
                        debug_assert!(set, "a VARQ job's end is never in the past");
                    }
                    None => self.other_waits.push(ev.time - submit),
                }
            }
            EventKind::Ended { how } => {
                if matches!(how, EndKind::CancelledWaiting | EndKind::Withdrawn) {
                    self.predictor.observe_departure(submit, ev.time, shape);
                    if varq.is_none() {
                        self.other_waits.push(ev.time - submit);
                    }
                }
                if let Some(i) = varq {
                    self.records[i].end = Some(ev.time);
                }
                self.live.remove(&ev.job);
            }
        }
    }

    fn submit(
        &mut self,
        job: SimJob,
        varq: Option<usize>,
        refused: &mut Vec<(SimJob, SubmitError)>,
    ) {
        let live = Live {
            submit: job.submit,
            shape: JobShape {
                nodes: u64::from(job.procs),
                walltime_s: job.requested.max(0) as u64,
            },
            varq,
        };
        let id = job.id;
        match self.sim.submit(job.clone()) {
            Ok(()) => {
                self.live.insert(id, live);
            }
            Err(e) => refused.push((job, e)),
        }
    }
}

/// Runs the experiment on `jobs` (nondecreasing submit order, unique ids, each fitting
/// the machine — as `swf_jobs::jobs_from_trace` gives them). `progress` is called with
/// the number of jobs handled so far.
pub fn run_varq_experiment<P>(
    cfg: &VarqExperiment,
    jobs: &[SimJob],
    progress: P,
) -> Result<VarqRun, String>
where
    P: FnMut(u64),
{
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let fraction = cfg.fraction;
    run_with_choice(cfg, jobs, |_| rng.random::<f64>() < fraction, progress)
}

/// [`run_varq_experiment`] with the jobs that become requests chosen by `choose`
/// (called once per job, in order) instead of by the seeded draw.
pub fn run_with_choice<C, P>(
    cfg: &VarqExperiment,
    jobs: &[SimJob],
    mut choose: C,
    mut progress: P,
) -> Result<VarqRun, String>
where
    C: FnMut(&SimJob) -> bool,
    P: FnMut(u64),
{
    cfg.validate()?;
    let start = jobs.first().map_or(0, |j| j.submit);
    let origin = cfg.origin.unwrap_or(start);
    let predictor = QueuePredictor::new(cfg.engine.clone()).map_err(|e| e.to_string())?;
    let mut d = Driver {
        sim: Simulator::new(cfg.sim.clone(), start),
        predictor,
        live: HashMap::new(),
        records: Vec::new(),
        other_waits: Vec::new(),
        last: start,
        events: Vec::new(),
    };
    let mut refused = Vec::new();
    for (n, job) in jobs.iter().enumerate() {
        // Everything before this arrival is history; arrivals at one instant are
        // scheduled together, as in `run::run_jobs`.
        d.run_until(job.submit - 1);
        if !choose(job) {
            d.submit(job.clone(), None, &mut refused);
        } else {
            let deadline = next_deadline(job.submit, origin, cfg.period_s);
            let req = request_for(job, deadline, cfg);
            d.predictor.advance(job.submit);
            let oracle = PredictorAt {
                predictor: &d.predictor,
                now: job.submit,
                max_walltime_s: None,
                max_nodes: None,
            };
            let plan = plan_latest(&req, job.submit, &oracle);
            let index = d.records.len();
            d.records.push(VarqRecord {
                job: job.id,
                procs: job.procs,
                walltime_s: job.requested,
                work_s: job.effective_runtime(),
                requested_at: job.submit,
                deadline,
                plan,
                start: None,
                end: None,
            });
            match plan {
                Some(p) => d.submit(varq_job(job, &p), Some(index), &mut refused),
                None => d.submit(job.clone(), None, &mut refused),
            }
        }
        if (n + 1) % 256 == 0 {
            progress(n as u64 + 1);
        }
    }
    progress(jobs.len() as u64);
    d.run_until(i64::MAX);
    Ok(VarqRun {
        records: d.records,
        refused,
        other_waits: d.other_waits,
        span: (start, d.last),
    })
}

/// Tables 5.5 and 5.6 for one run.
pub fn summarize(cfg: &VarqExperiment, jobs: usize, run: &VarqRun) -> VarqSummary {
    let accepted: Vec<&VarqRecord> = run.records.iter().filter(|r| r.plan.is_some()).collect();
    let n = accepted.len();
    let probs: Vec<f64> = accepted
        .iter()
        .filter_map(|r| r.plan.map(|p| p.probability))
        .collect();
    let succeeded = accepted
        .iter()
        .filter(|r| r.succeeded() == Some(true))
        .count();
    let mean = |xs: &[f64]| {
        if xs.is_empty() {
            0.0
        } else {
            xs.iter().sum::<f64>() / xs.len() as f64
        }
    };
    let required: u64 = accepted.iter().map(|r| r.required_node_s()).sum();
    let used: u64 = accepted.iter().map(|r| r.used_node_s()).sum();
    let worst: u64 = accepted
        .iter()
        .map(|r| r.required_node_s() + r.plan.map_or(0, |p| p.max_overhead_node_s))
        .sum();
    let leads: Vec<f64> = accepted
        .iter()
        .filter_map(|r| r.plan.map(|p| (r.deadline - p.submit_at) as f64))
        .collect();
    let waits: Vec<f64> = run.other_waits.iter().map(|&w| w as f64).collect();
    let ratio = |x: u64| {
        if required == 0 {
            0.0
        } else {
            x as f64 / required as f64
        }
    };
    VarqSummary {
        fraction: cfg.fraction,
        probability: cfg.probability,
        seed: cfg.seed,
        jobs,
        requests: run.records.len(),
        accepted: n,
        refused: run.records.len() - n,
        mean_predicted: mean(&probs),
        succeeded,
        achieved: if n == 0 {
            0.0
        } else {
            succeeded as f64 / n as f64
        },
        binomial_sd: if n == 0 {
            0.0
        } else {
            probs.iter().map(|p| p * (1.0 - p)).sum::<f64>().sqrt() / n as f64
        },
        required_node_h: required as f64 / 3600.0,
        used_node_h: used as f64 / 3600.0,
        ratio: ratio(used),
        worst_case_ratio: ratio(worst),
        mean_lead_s: mean(&leads),
        mean_wait_others_s: mean(&waits),
        makespan_s: run.span.1 - run.span.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::OracleAnswer;
    use crate::sim::Policy;

    fn job(id: i64, submit: i64, procs: u32, requested: i64, runtime: i64) -> SimJob {
        SimJob {
            id,
            queue: 1,
            submit,
            runtime,
            procs,
            requested,
            cancel_at: None,
        }
    }

    #[test]
    fn deadlines_are_the_next_grid_point_strictly_after() {
        assert_eq!(next_deadline(0, 0, 100), 100);
        assert_eq!(next_deadline(99, 0, 100), 100);
        assert_eq!(next_deadline(100, 0, 100), 200);
        assert_eq!(next_deadline(-1, 0, 100), 0);
        assert_eq!(next_deadline(1234, 1000, 21_600), 22_600);
    }

    #[test]
    fn a_varq_job_holds_until_the_deadline_then_works() {
        let j = job(7, 100, 4, 600, 500);
        let plan = VarqPlan {
            submit_at: 1000,
            advertised_walltime_s: 600 + 3000,
            probability: 0.8,
            max_overhead_node_s: 4 * 3000,
            required_node_s: 4 * 600,
        };
        let v = varq_job(&j, &plan);
        assert_eq!((v.id, v.submit, v.requested, v.procs), (7, 1000, 3600, 4));
        assert_eq!(v.cancel_at, None);
        // Started 200 s after submission: holds until 4000, works 500 s.
        assert_eq!(end_of_varq_job(1200, 4000, 500), 4500);
        assert!(succeeded(1200, 4000));
        assert!(succeeded(4000, 4000));
        // Late: works at once.
        assert_eq!(end_of_varq_job(4100, 4000, 500), 4600);
        assert!(!succeeded(4001, 4000));
        // Ending within the advertised walltime whenever it starts in time.
        assert!(end_of_varq_job(1000, 4000, 500) <= 1000 + v.requested);
    }

    /// A queue where a job starts within t seconds with probability t / (t + 1000).
    struct Curve;
    impl StartOracle for Curve {
        fn start_probability(&self, _: u32, _: u64, within_s: u64, _: f64) -> OracleAnswer {
            let t = within_s as f64;
            OracleAnswer::Probability {
                p: t / (t + 1000.0),
            }
        }
    }

    #[test]
    fn plan_latest_agrees_with_the_planner() {
        for (now, p) in [(0, 0.5), (17, 0.75), (5000, 0.5), (0, 0.9), (0, 0.99)] {
            let req = VarqRequest {
                nodes: 2,
                walltime_s: 300,
                start_at: 21_600,
                min_probability: p,
                confidence: 0.95,
                mode: Mode::Latest,
                step_s: 30,
            };
            let full = varq::plan(&req, now, &Curve).unwrap();
            let expected = match full.decision {
                varq::Decision::Planned(plan) => Some(plan),
                varq::Decision::Refused { .. } => None,
            };
            assert_eq!(plan_latest(&req, now, &Curve), expected, "now {now} p {p}");
        }
    }

    /// A tiny machine whose outcome can be worked out by hand: 4 processors, EASY,
    /// deadlines every 1000 s from 0, P = 0.5, the plain binomial predictor. 59 ordinary
    /// one-processor jobs start at once (waits of 0 s: p(s) = 0.05^(1/59) ≈ 0.95 for
    /// every lead); then two requests for the deadline 1000: job 100 (1 processor) and
    /// job 101 (the whole machine). Both are planned for the last step, 990; job 100
    /// starts and holds its processor until 1000 and works until 1050, so job 101
    /// starts only at 1050: one success, one failure.
    #[test]
    fn tiny_workload_with_a_known_outcome() {
        let sim = SimConfig::new(4, Policy::Easy);
        let mut cfg = VarqExperiment::new(sim, 1.0, 0.5, 1);
        cfg.period_s = 1000;
        cfg.step_s = 10;
        cfg.origin = Some(0);
        cfg.engine = EngineConfig::plain();
        let mut jobs: Vec<SimJob> = (0..59).map(|i| job(i, i, 1, 10, 1)).collect();
        jobs.push(job(100, 500, 1, 100, 50));
        jobs.push(job(101, 510, 4, 100, 80));
        let run = run_with_choice(&cfg, &jobs, |j| j.id >= 100, |_| {}).unwrap();
        assert!(run.refused.is_empty());
        assert_eq!(run.other_waits, vec![0; 59]);
        assert_eq!(run.records.len(), 2);
        let (r100, r101) = (&run.records[0], &run.records[1]);
        assert_eq!((r100.deadline, r101.deadline), (1000, 1000));
        assert_eq!((r100.requested_at, r101.requested_at), (500, 510));
        // Latest grid point with p ≥ 0.5: s = 500 + 10k < 1000, the last is 990.
        let p100 = r100.plan.expect("accepted");
        assert_eq!(p100.submit_at, 990);
        assert_eq!(p100.advertised_walltime_s, 100 + 10);
        assert!((p100.probability - 0.05f64.powf(1.0 / 59.0)).abs() < 1e-9);
        assert_eq!(r100.start, Some(990));
        assert_eq!(r100.end, Some(1000 + 50));
        assert_eq!(r100.succeeded(), Some(true));
        let p101 = r101.plan.expect("accepted");
        assert_eq!(p101.submit_at, 990);
        assert_eq!(r101.start, Some(1050));
        assert_eq!(r101.end, Some(1050 + 80));
        assert_eq!(r101.succeeded(), Some(false));

        let s = summarize(&cfg, jobs.len(), &run);
        assert_eq!(
            (s.requests, s.accepted, s.refused, s.succeeded),
            (2, 2, 0, 1)
        );
        assert!((s.achieved - 0.5).abs() < 1e-12);
        // required: 1·50 + 4·80 node-s; used: 1·60 + 4·80.
        assert!((s.required_node_h * 3600.0 - 370.0).abs() < 1e-9);
        assert!((s.used_node_h * 3600.0 - 380.0).abs() < 1e-9);
        assert!((s.ratio - 380.0 / 370.0).abs() < 1e-12);
        // Planned worst case: required + 1·10 + 4·10.
        assert!((s.worst_case_ratio - 420.0 / 370.0).abs() < 1e-12);
        assert_eq!(s.makespan_s, 1130);
        assert_eq!(s.mean_lead_s, 10.0);
    }

    /// Without history every request is refused and the job runs as it would have.
    #[test]
    fn refused_requests_run_as_ordinary_jobs() {
        let sim = SimConfig::new(4, Policy::Easy);
        let cfg = VarqExperiment::new(sim, 1.0, 0.5, 1);
        let jobs = vec![job(1, 0, 2, 100, 30), job(2, 5, 4, 100, 30)];
        let run = run_varq_experiment(&cfg, &jobs, |_| {}).unwrap();
        assert_eq!(run.records.len(), 2);
        assert!(
            run.records
                .iter()
                .all(|r| r.plan.is_none() && r.succeeded().is_none())
        );
        assert_eq!(run.other_waits, vec![0, 25]);
        let s = summarize(&cfg, 2, &run);
        assert_eq!((s.accepted, s.refused), (0, 2));
        assert_eq!((s.achieved, s.ratio), (0.0, 0.0));
    }

    #[test]
    fn bad_parameters_are_named() {
        let sim = SimConfig::new(4, Policy::Easy);
        let mut cfg = VarqExperiment::new(sim, 1.5, 0.5, 1);
        assert!(cfg.validate().unwrap_err().contains("fraction"));
        cfg.fraction = 0.5;
        cfg.probability = 1.0;
        assert!(cfg.validate().unwrap_err().contains("probability"));
        cfg.probability = 0.5;
        cfg.step_s = 0;
        assert!(cfg.validate().unwrap_err().contains("step"));
        cfg.step_s = 30;
        cfg.period_s = 0;
        assert!(cfg.validate().unwrap_err().contains("period"));
    }
}
