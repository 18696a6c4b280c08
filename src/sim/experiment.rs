//! A reproduction of Cirne's Chapter 5 experiment: one moldable job in a model
//! workload on a 500-processor machine under conservative backfilling; its
//! turn-around time with the user's request, with SA's choice, and with the best of
//! its requests in hindsight.
//!
//! One run: draw a workload from the rigid model (seed derived from the experiment's
//! seed and the run number), pick the target job uniformly, give it requests by the
//! moldability model, simulate up to its arrival, let SA choose (SAcb, cross-checked
//! against SAg), then simulate the workload once per request until the target ends.
//! SA's workload is the rigid one with the request SA chose, so its turn-around is
//! read off that simulation. The target is not cancelled (its turn-around is the
//! measure); everything else follows the model.
//!
//! May import: std, serde, rand, rand_chacha and the sibling modules.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::cirne::{CirneModel, RigidJob};
use super::job::SimJob;
use super::sa::{SaRequest, sa_cb, sa_g};
use super::simulator::{EventKind, Policy, SimConfig, SimEvent, Simulator};

/// Parameters of the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SaExperiment {
    /// Machine size (Cirne: 500).
    pub processors: u32,
    /// Jobs per generated workload (Cirne: 10 000).
    pub jobs: usize,
    /// Seed of the whole experiment.
    pub seed: u64,
    /// Also run SAg and count disagreements with SAcb (costs one what-if simulation
    /// per request).
    pub check_sag: bool,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SaRunRecord {
    /// Run number.
    pub run: u64,
    /// Index of the target job in its workload.
    pub target: usize,
    /// Number of requests.
    pub v: usize,
    /// Turn-around (s) with each request, by increasing partition size.
    pub turnaround: Vec<i64>,
    /// Index of the user's request.
    pub user: usize,
    /// Index SA chose.
    pub sa: usize,
    /// Whether SAg chose differently from SAcb (only when checked).
    pub sag_disagrees: bool,
    /// Load per processor D at the target's arrival (Cirne §5.3.3), seconds.
    pub load_per_processor: f64,
}

impl SaRunRecord {
    /// Turn-around of the user's request.
    pub fn user_tt(&self) -> i64 {
        self.turnaround[self.user]
    }

    /// Turn-around of SA's request.
    pub fn sa_tt(&self) -> i64 {
        self.turnaround[self.sa]
    }

    /// Best turn-around among the requests.
    pub fn best_tt(&self) -> i64 {
        *self.turnaround.iter().min().expect("at least one request")
    }
}

/// Seed of run `run`: distinct, well-mixed streams per run (SplitMix64 finalizer).
fn run_seed(seed: u64, run: u64) -> u64 {
    let mut z = seed ^ run.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Feeds `jobs` into `sim`, each just before its arrival, up to (not including)
/// time `until`.
fn feed(sim: &mut Simulator, jobs: &[SimJob], until: i64, events: &mut Vec<SimEvent>) {
    for j in jobs {
        if j.submit > sim.now() {
            sim.advance_to(j.submit - 1, events);
        }
        sim.submit(j.clone()).expect("model jobs fit the machine");
    }
    if until > sim.now() {
        sim.advance_to(until - 1, events);
    }
}

/// Runs one experiment.
pub fn sa_run(cfg: &SaExperiment, run: u64) -> SaRunRecord {
    let mut model = CirneModel::new(cfg.processors, run_seed(cfg.seed, run), None);
    let rigid: Vec<RigidJob> = (0..cfg.jobs).map(|_| model.next_rigid()).collect();
    let mut pick = ChaCha8Rng::seed_from_u64(run_seed(cfg.seed ^ 0x5A5A, run));
    let target = pick.random_range(0..rigid.len());
    let mold = model.moldable(&rigid[target]);
    let t = &rigid[target].job;
    let jobs: Vec<SimJob> = rigid.iter().map(|r| r.job.clone()).collect();

    // The machine as it stands just before the target arrives.
    let sim_cfg = SimConfig::new(cfg.processors, Policy::Conservative);
    let mut base = Simulator::new(sim_cfg, jobs[0].submit);
    let mut events = Vec::new();
    // Jobs before the target in arrival order, excluding those arriving with it.
    let before = jobs[..target].partition_point(|j| j.submit < t.submit);
    feed(&mut base, &jobs[..before], t.submit, &mut events);
    let load_per_processor = load_per_processor(&base, cfg.processors);

    let reqs: Vec<SaRequest> = mold
        .requests
        .iter()
        .map(|r| SaRequest {
            procs: r.procs,
            requested: r.requested,
        })
        .collect();
    let periods = base.availability().expect("conservative keeps a profile");
    let cb = sa_cb(&periods, t.submit, &reqs).expect("some request fits");
    let sag_disagrees = cfg.check_sag
        && sa_g(&base, t.id, t.queue, t.submit, &reqs)
            .is_none_or(|g| (g.index, g.completion) != (cb.index, cb.completion));

    // One simulation per request, until the target ends.
    let mut turnaround = Vec::with_capacity(reqs.len());
    for r in &mold.requests {
        let mut sim = base.clone();
        let mut rest: Vec<SimJob> = jobs[before..].to_vec();
        let k = target - before;
        rest[k] = SimJob {
            procs: r.procs,
            requested: r.requested,
            runtime: r.runtime,
            cancel_at: None,
            ..t.clone()
        };
        // Once the target starts its end is known (its run time, cut at its request),
        // so the simulation stops there.
        let run = rest[k].effective_runtime();
        let mut end = None;
        let mut i = 0;
        // Invariant: every job arriving at or before the clock has been submitted.
        while end.is_none() {
            let horizon = sim.next_event_time().unwrap_or(i64::MAX);
            while i < rest.len() && rest[i].submit <= horizon {
                sim.submit(rest[i].clone())
                    .expect("model jobs fit the machine");
                i += 1;
            }
            let Some(next) = sim.next_event_time() else {
                break;
            };
            events.clear();
            sim.advance_to(next, &mut events);
            end = target_start(&events, t.id).map(|s| s + run);
        }
        turnaround.push(end.expect("the target job ends") - t.submit);
    }
    SaRunRecord {
        run,
        target,
        v: reqs.len(),
        turnaround,
        user: mold.user,
        sa: cb.index,
        sag_disagrees,
        load_per_processor,
    }
}

fn target_start(events: &[SimEvent], id: i64) -> Option<i64> {
    events
        .iter()
        .find(|e| e.job == id && e.kind == EventKind::Started)
        .map(|e| e.time)
}

/// Cirne's load per processor D: requested work still ahead of the machine over its
/// size (running jobs count their remaining requested time).
fn load_per_processor(sim: &Simulator, processors: u32) -> f64 {
    let now = sim.now();
    let running: f64 = sim
        .running()
        .map(|(start, j)| f64::from(j.procs) * (j.requested - (now - start)) as f64)
        .sum();
    let waiting: f64 = sim
        .waiting()
        .map(|j| f64::from(j.procs) * j.requested as f64)
        .sum();
    (running + waiting) / f64::from(processors)
}

/// The experiment's summary, Cirne's Tables 13 and 14.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SaSummary {
    /// Runs.
    pub runs: usize,
    /// Geometric-mean turn-around of the best request, s.
    pub best: f64,
    /// Of SA's request, s.
    pub sa: f64,
    /// Of the user's request, s.
    pub user: f64,
    /// Fractions of runs where the best request / SA did better than the user's.
    pub best_better: f64,
    /// SA better than the user's request.
    pub sa_better: f64,
    /// SA the same as the user's.
    pub sa_same: f64,
    /// SA worse than the user's.
    pub sa_worse: f64,
    /// Fraction of runs with exactly two requests (Cirne: 37.1%).
    pub v_two: f64,
    /// Runs where SAg and SAcb disagreed (0 when not checked).
    pub sag_disagreements: usize,
}

/// Summarizes run records.
pub fn summarize(records: &[SaRunRecord]) -> SaSummary {
    let n = records.len().max(1) as f64;
    let geo = |f: &dyn Fn(&SaRunRecord) -> i64| {
        (records
            .iter()
            .map(|r| (f(r).max(1) as f64).ln())
            .sum::<f64>()
            / n)
            .exp()
    };
    let frac =
        |f: &dyn Fn(&SaRunRecord) -> bool| records.iter().filter(|r| f(r)).count() as f64 / n;
    SaSummary {
        runs: records.len(),
        best: geo(&SaRunRecord::best_tt),
        sa: geo(&SaRunRecord::sa_tt),
        user: geo(&SaRunRecord::user_tt),
        best_better: frac(&|r| r.best_tt() < r.user_tt()),
        sa_better: frac(&|r| r.sa_tt() < r.user_tt()),
        sa_same: frac(&|r| r.sa_tt() == r.user_tt()),
        sa_worse: frac(&|r| r.sa_tt() > r.user_tt()),
        v_two: frac(&|r| r.v == 2),
        sag_disagreements: records.iter().filter(|r| r.sag_disagrees).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_reproducible_and_consistent() {
        let cfg = SaExperiment {
            processors: 500,
            jobs: 400,
            seed: 42,
            check_sag: true,
        };
        let a = sa_run(&cfg, 3);
        let b = sa_run(&cfg, 3);
        assert_eq!(a, b);
        assert!(!a.sag_disagrees, "SAg and SAcb must agree: {a:?}");
        assert!(a.best_tt() <= a.sa_tt() && a.best_tt() <= a.user_tt());
        assert_eq!(a.turnaround.len(), a.v);
    }
}
