//! A time-shared machine beside the space-shared simulator: gang scheduling (GS),
//! Flexible CoScheduling (FCS), implicit coscheduling (ICS), local scheduling and FCFS
//! batch, as Frachtenberg's thesis (*Flexible Coscheduling*, 2001) compares them and as
//! `../shared/spec/fcs.md` fixes them for a job-level simulator.
//!
//! The thesis measured real MPI processes on a real cluster; this simulator cannot
//! measure communication, so it *models* it per job from the synthetic application's
//! parameters (granularity G, load-imbalance variance V, pattern, N; fcs.md §10). That
//! is the honest simplification: one class per job, not per process (the thesis's
//! §5.3 job 3, whose processes end in different classes, is out of reach), and the
//! stretch of a job's iterations given by a formula, not by the machine.
//!
//! - [`params`]: the algorithms, the machine and the thesis's Table 4.1 thresholds;
//! - [`app`]: the synthetic application (Fig. 4.4) as a job-level model, with the
//!   imbalance stretch fitted to Table 5.3 or analytic;
//! - [`classify`]: FCS's statistics and its classification heuristic (Fig. 4.3);
//! - [`machine`]: the Ousterhout matrix, heartbeats and the slot-stepped simulator;
//! - [`workload`]: a workload's jobs with the §4.6 per-job draws, time-compressed;
//! - [`report`]: the §5.4 metrics, split into short and long jobs.
//!
//! Pure computation: may import std, serde, rand, rand_chacha and the sibling
//! modules of `crate::sim` only — no I/O, no clock.

pub mod app;
pub mod classify;
pub mod machine;
pub mod params;
pub mod report;
pub mod workload;

pub use app::{AppModel, AppSpec, Imbalance, Pattern};
pub use classify::{Class, ClassState};
pub use machine::{TimeShareSim, TsError, TsOutcome, run};
pub use params::{Admission, Algorithm, FcsThresholds, Params};
pub use report::{GroupMetrics, TsMetrics, ts_metrics};
pub use workload::{Skip, TsJob, WorkloadDraws, from_sim_jobs};

#[cfg(test)]
mod tests;
