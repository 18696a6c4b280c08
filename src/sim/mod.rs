//! Batch-scheduler simulator and workload models.
//!
//! - [`simulator`]: the event-driven simulator of a space-shared machine (FCFS, EASY,
//!   conservative backfilling, LOS, Cirne–Berman's and SCOJO-P's molding), driven
//!   incrementally or to completion;
//! - [`profile`]: the availability profile (conservative backfilling, SA);
//! - [`los`]: LOS's dynamic program (Shmueli);
//! - [`run`]: whole runs and per-job outcomes; [`metrics`]: the standard metrics;
//! - [`swf_jobs`]: SWF records in and out;
//! - [`cirne`]: Cirne's rigid workload model and moldability model, seeded;
//!   [`arrays`]: job arrays (one user, N tasks at one instant) injected into it;
//! - [`sa`]: SA request selection (SAcb and SAg); [`experiment`]: Cirne's Chapter 5.
//! - [`lublin`]: the Lublin–Feitelson workload model, seeded;
//! - [`mold`]: moldable jobs, speedup models and run-time classes (Barsanti & Sodan);
//! - [`scojo`]: SCOJO-P's target size, start decision and arrival forecast;
//!   [`mold_metrics`]: the paper's metrics per run-time class.
//! - [`varq_experiment`]: the VARQ generality experiment (Nurmi §5.3.4).
//! - [`timeshare`]: a time-shared machine (gang scheduling, Flexible CoScheduling,
//!   implicit coscheduling, local scheduling; Frachtenberg's thesis).
//!
//! Pure computation: may import std, serde, statrs, rand, rand_distr, rand_chacha,
//! the crate's domain types and its other pure layers (`engine`, `plan`; the VARQ
//! experiment plans with them) only — no I/O, no clock.

pub mod job;
pub mod los;
pub mod lublin;
pub mod metrics;
pub mod mold;
pub mod mold_metrics;
pub mod profile;
pub mod run;
pub mod simulator;
pub mod swf_jobs;

pub use job::{EndKind, JobOutcome, SimJob};
pub use simulator::{EventKind, Policy, ScojoPolicy, SimConfig, SimEvent, Simulator, SubmitError};
pub mod arrays;
pub mod cirne;
pub mod experiment;
pub mod sa;
pub mod scojo;
pub mod timeshare;
pub mod varq_experiment;
