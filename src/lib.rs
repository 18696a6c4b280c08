//! qbets: bounds on batch-queue waits (QBETS) and virtual advance reservations (VARQ).
//!
//! Layers, each a module:
//! - [`engine`]: the QBETS predictor and the trace-replay evaluator — pure computation.
//! - [`plan`]: VARQ and CO-VARQ planners, reservation lifecycle — pure computation.
//! - [`sim`]: the batch-scheduler simulator and workload models — pure computation.
//! - [`trace`]: workload trace formats (SWF).
//! - [`sources`]: schedulers we read job records from (Slurm's REST API).
//! - [`cli`]: the `qbets` subcommands; `src/main.rs` only parses and dispatches.

pub mod cli;
pub mod engine;
pub mod plan;
pub mod sim;
pub mod sources;
pub mod trace;
