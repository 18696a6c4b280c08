//! Whole runs: feed a stream of jobs through a [`Simulator`] and collect what became
//! of each one. Jobs are submitted lazily, just before their arrival, so a run over an
//! endless workload generator holds only the jobs in the system.
//!
//! May import: std and the sibling modules.

use std::collections::HashMap;
use std::sync::Arc;

use super::job::{EndKind, JobOutcome, SimJob};
use super::mold::Molding;
use super::scojo::ArrivalForecast;
use super::simulator::{EventKind, SimConfig, SimEvent, Simulator, SubmitError};

/// The result of [`run_jobs`].
#[derive(Debug, Clone, Default)]
pub struct RunResult {
    /// Every job that left the system, in the order it left.
    pub outcomes: Vec<JobOutcome>,
    /// Jobs the simulator refused, with the reason (none for validated input).
    pub refused: Vec<(SimJob, SubmitError)>,
}

/// Turns the simulator's events into per-job outcomes.
#[derive(Debug, Default)]
pub struct OutcomeCollector {
    live: HashMap<i64, (SimJob, Option<i64>)>,
}

impl OutcomeCollector {
    /// Remembers a submitted job until it leaves.
    pub fn submitted(&mut self, job: SimJob) {
        self.live.insert(job.id, (job, None));
    }

    /// Consumes events, appending an outcome for each job that left.
    pub fn absorb(&mut self, events: &[SimEvent], out: &mut Vec<JobOutcome>) {
        for ev in events {
            match ev.kind {
                EventKind::Submitted => {}
                EventKind::Started => {
                    if let Some(l) = self.live.get_mut(&ev.job) {
                        l.1 = Some(ev.time);
                        // A moldable job started with the size its policy chose, and
                        // runs exactly the requested time that size gives.
                        if (ev.procs, ev.requested) != (l.0.procs, l.0.requested) {
                            l.0.procs = ev.procs;
                            l.0.requested = ev.requested;
                            l.0.runtime = ev.requested;
                        }
                    }
                }
                EventKind::Ended { how } => {
                    if let Some((job, start)) = self.live.remove(&ev.job) {
                        debug_assert_eq!(
                            start.is_none(),
                            matches!(how, EndKind::CancelledWaiting | EndKind::Withdrawn)
                        );
                        out.push(JobOutcome {
                            job,
                            start,
                            end: ev.time,
                            kind: how,
                        });
                    }
                }
            }
        }
    }
}

/// Runs `jobs` (in nondecreasing submit order) on a fresh machine from time `start`
/// to completion. `progress` is called with the number of jobs submitted so far.
pub fn run_jobs<I, P>(cfg: SimConfig, start: i64, jobs: I, progress: P) -> RunResult
where
    I: IntoIterator<Item = SimJob>,
    P: FnMut(u64),
{
    let sim = Simulator::new(cfg, start);
    run_on(sim, jobs.into_iter().map(|j| (j, None)), progress)
}

/// [`run_jobs`] for jobs with moldings (each submitted with
/// [`Simulator::submit_moldable`]), and, for predictive SCOJO-P, the forecast of
/// future arrivals.
pub fn run_moldable_jobs<I, P>(
    cfg: SimConfig,
    start: i64,
    jobs: I,
    forecast: Option<Arc<ArrivalForecast>>,
    progress: P,
) -> RunResult
where
    I: IntoIterator<Item = (SimJob, Molding)>,
    P: FnMut(u64),
{
    let mut sim = Simulator::new(cfg, start);
    if let Some(f) = forecast {
        sim.set_forecast(f);
    }
    run_on(sim, jobs.into_iter().map(|(j, m)| (j, Some(m))), progress)
}

fn run_on<I, P>(mut sim: Simulator, jobs: I, mut progress: P) -> RunResult
where
    I: Iterator<Item = (SimJob, Option<Molding>)>,
    P: FnMut(u64),
{
    let mut collector = OutcomeCollector::default();
    let mut events = Vec::new();
    let mut result = RunResult::default();
    let mut n = 0u64;
    for (job, molding) in jobs {
        // Handle everything strictly before this arrival, so that arrivals at one
        // instant are scheduled in one pass, as when submitted all at once.
        if job.submit > sim.now() {
            sim.advance_to(job.submit - 1, &mut events);
            collector.absorb(&events, &mut result.outcomes);
            events.clear();
        }
        let submitted = match molding {
            Some(m) => sim.submit_moldable(job.clone(), m),
            None => sim.submit(job.clone()),
        };
        match submitted {
            Ok(()) => collector.submitted(job),
            Err(e) => result.refused.push((job, e)),
        }
        n += 1;
        if n.is_multiple_of(1024) {
            progress(n);
        }
    }
    progress(n);
    sim.run_to_completion(&mut events);
    collector.absorb(&events, &mut result.outcomes);
    result
}
