//! Jobs as the simulator sees them, and what became of them.
//!
//! May import: std, serde.

use serde::{Deserialize, Serialize};

/// A rigid job submitted to the simulated machine.
///
/// Times are whole seconds on the simulation's clock (for a trace, seconds from its
/// `UnixStartTime`). The scheduler only ever sees `procs` and `requested`; `runtime`
/// is what the job would use if nothing stopped it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimJob {
    /// Caller's job number (the SWF job number for traces); echoed in every event.
    pub id: i64,
    /// Queue number (SWF field 15; -1 when unknown). Kept in the output and used for
    /// the optional per-queue priority.
    pub queue: i32,
    /// Submit (arrival) time.
    pub submit: i64,
    /// Seconds the job would run if not killed. A job that would run longer than
    /// `requested` is killed when its requested time is up. -1: unknown, for a job of
    /// a log that its user cancelled before it ever ran (it has a `cancel_at`); if
    /// the simulation could start it before then, it is withdrawn instead
    /// ([`EndKind::Withdrawn`]).
    pub runtime: i64,
    /// Processors the job needs for its whole run.
    pub procs: u32,
    /// Requested wall time in seconds (at least 1): the scheduler's estimate and the
    /// kill limit.
    pub requested: i64,
    /// Absolute time at which the user cancels the job, if they do: a waiting job
    /// leaves the queue then, a running one is stopped then.
    pub cancel_at: Option<i64>,
}

impl SimJob {
    /// Seconds the job runs once started: its runtime, cut at its requested time.
    pub fn effective_runtime(&self) -> i64 {
        self.runtime.clamp(0, self.requested)
    }

    /// Whether the job would be killed at its requested time.
    pub fn overruns(&self) -> bool {
        self.runtime > self.requested
    }

    /// Whether its run time is unknown: a log's job that never ran (`runtime` -1).
    pub fn runtime_unknown(&self) -> bool {
        self.runtime < 0
    }
}

/// How a job left the simulated machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndKind {
    /// Ran to its end within its requested time.
    Completed,
    /// Ran until its requested time and was killed then.
    Killed,
    /// Cancelled by its user while it was running.
    CancelledRunning,
    /// Cancelled by its user while it was waiting; it never ran.
    CancelledWaiting,
    /// A log's job that never ran there (its user cancelled it while it waited) and
    /// that the simulation would have started before that cancel time: what it would
    /// have run is unknown, so it leaves the queue then without running, and it counts
    /// among the jobs that did not run rather than as a job of 0 seconds.
    Withdrawn,
}

/// The life of one job in a simulation, assembled from its events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobOutcome {
    /// The job as submitted.
    pub job: SimJob,
    /// When it started; `None` when it was cancelled or withdrawn before starting.
    pub start: Option<i64>,
    /// When it left the machine (or the queue, for a job cancelled while waiting).
    pub end: i64,
    /// How it left.
    pub kind: EndKind,
}

impl JobOutcome {
    /// Seconds spent waiting in the queue (until start, or until cancelled).
    pub fn wait(&self) -> i64 {
        self.start.unwrap_or(self.end) - self.job.submit
    }

    /// Seconds spent running (0 for a job cancelled while waiting).
    pub fn run(&self) -> i64 {
        self.start.map_or(0, |s| self.end - s)
    }

    /// Seconds from submit to end (turn-around, response or flow time).
    pub fn response(&self) -> i64 {
        self.end - self.job.submit
    }
}
