//! Batch-scheduler simulator and workload models.
//!
//! - [`simulator`]: the event-driven simulator of a space-shared machine (FCFS, EASY,
//!   conservative backfilling, LOS), driven incrementally or to completion;
//! - [`profile`]: the availability profile (conservative backfilling, SA);
//! - [`los`]: LOS's dynamic program (Shmueli);
//! - [`run`]: whole runs and per-job outcomes; [`metrics`]: the standard metrics;
//! - [`swf_jobs`]: SWF records in and out;
//! - [`cirne`]: Cirne's rigid workload model and moldability model, seeded;
//! - [`sa`]: SA request selection (SAcb and SAg); [`experiment`]: Cirne's Chapter 5.
//! - [`varq_experiment`]: the VARQ generality experiment (Nurmi §5.3.4).
//! - [`timeshare`]: a time-shared machine (gang scheduling, Flexible CoScheduling,
//!   implicit coscheduling, local scheduling; Frachtenberg's thesis).
//!
//! Pure computation: may import std, serde, statrs, rand, rand_distr, rand_chacha,
//! the crate's domain types and its other pure layers (`engine`, `plan`; the VARQ
//! experiment plans with them) only — no I/O, no clock.

pub mod job;
pub mod los;
pub mod metrics;
pub mod profile;
pub mod run;
pub mod simulator;
pub mod swf_jobs;

pub use job::{EndKind, JobOutcome, SimJob};
pub use simulator::{EventKind, Policy, SimConfig, SimEvent, Simulator, SubmitError};
pub mod cirne;
pub mod experiment;
pub mod sa;
pub mod timeshare;
pub mod varq_experiment;
