//! The standard metrics of a schedule: wait, response (turn-around), bounded slowdown,
//! utilization and makespan (Shmueli §1.1; Feitelson's bounded slowdown).
//!
//! May import: std, serde and the sibling modules.

use serde::{Deserialize, Serialize};

use super::job::{EndKind, JobOutcome};

/// Interactive threshold of the bounded slowdown, in seconds (Shmueli §4.1).
pub const TAU: f64 = 10.0;

/// Metrics over the jobs of one run. Wait, response and slowdown are over the jobs
/// that ran (a job cancelled while waiting has no response time); utilization counts
/// every processor-second used, including by jobs later killed or cancelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Jobs that started.
    pub jobs: usize,
    /// Jobs killed at their requested time.
    pub killed: usize,
    /// Jobs cancelled while running.
    pub cancelled_running: usize,
    /// Jobs cancelled while waiting.
    pub cancelled_waiting: usize,
    /// Log jobs that never ran there, taken out when the simulation would have started
    /// them ([`EndKind::Withdrawn`]).
    pub withdrawn: usize,
    /// Mean wait, seconds.
    pub mean_wait: f64,
    /// Geometric mean wait, seconds (a wait under 1 s counts as 1 s, so that the mean
    /// is defined when some jobs do not wait).
    pub geo_wait: f64,
    /// Mean response (wait + run), seconds.
    pub mean_response: f64,
    /// Geometric mean response, seconds (each at least 1 s).
    pub geo_response: f64,
    /// Mean bounded slowdown, `max(response / max(run, τ), 1)` with τ = 10 s.
    pub mean_bounded_slowdown: f64,
    /// Used processor-seconds over `processors × makespan`.
    pub utilization: f64,
    /// Last end minus first submit, seconds.
    pub makespan: i64,
}

/// Bounded slowdown of one job.
pub fn bounded_slowdown(o: &JobOutcome) -> f64 {
    let run = o.run() as f64;
    (o.response() as f64 / run.max(TAU)).max(1.0)
}

/// Computes the metrics of `outcomes` on a machine of `processors`.
pub fn metrics(outcomes: &[JobOutcome], processors: u32) -> Metrics {
    let mut m = Metrics {
        jobs: 0,
        killed: 0,
        cancelled_running: 0,
        cancelled_waiting: 0,
        withdrawn: 0,
        mean_wait: 0.0,
        geo_wait: 0.0,
        mean_response: 0.0,
        geo_response: 0.0,
        mean_bounded_slowdown: 0.0,
        utilization: 0.0,
        makespan: 0,
    };
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    let mut used = 0.0;
    let (mut lw, mut lr) = (0.0, 0.0);
    for o in outcomes {
        first = first.min(o.job.submit);
        last = last.max(o.end);
        match o.kind {
            EndKind::CancelledWaiting => {
                m.cancelled_waiting += 1;
                continue;
            }
            EndKind::Withdrawn => {
                m.withdrawn += 1;
                continue;
            }
            EndKind::Killed => m.killed += 1,
            EndKind::CancelledRunning => m.cancelled_running += 1,
            EndKind::Completed => {}
        }
        m.jobs += 1;
        let (w, r) = (o.wait() as f64, o.response() as f64);
        m.mean_wait += w;
        m.mean_response += r;
        lw += w.max(1.0).ln();
        lr += r.max(1.0).ln();
        m.mean_bounded_slowdown += bounded_slowdown(o);
        used += f64::from(o.job.procs) * o.run() as f64;
    }
    if m.jobs > 0 {
        let n = m.jobs as f64;
        m.mean_wait /= n;
        m.mean_response /= n;
        m.mean_bounded_slowdown /= n;
        m.geo_wait = (lw / n).exp();
        m.geo_response = (lr / n).exp();
    }
    if last > first {
        m.makespan = last - first;
        m.utilization = used / (f64::from(processors) * m.makespan as f64);
    }
    m
}
