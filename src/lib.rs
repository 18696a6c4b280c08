//! qbets: bounds on batch-queue waits (QBETS) and virtual advance reservations (VARQ).
//!
//! Layers, each a module:
//! - [`engine`]: the QBETS predictor and the trace-replay evaluator — pure computation.
//! - [`plan`]: VARQ and CO-VARQ planners, reservation lifecycle — pure computation.
//! - [`sim`]: the batch-scheduler simulator and workload models — pure computation.
//! - [`trace`]: workload trace formats (SWF).
//! - [`sources`]: schedulers we read job records from (Slurm's REST API).
//! - [`submit`]: schedulers we submit reservations to (Slurm's REST API).
//! - [`notify`]: reservation webhooks: signed POSTs of state changes, from the store's outbox.
//! - [`store`]: storage (SQLite and PostgreSQL) — the only module that speaks SQL.
//! - [`http`]: the REST API (axum, utoipa) — the only module that knows HTTP.
//! - [`config`]: the service configuration (TOML layered with environment and flags).
//! - [`service`]: configuration, tokens, import and start-up wiring of the service.
//! - [`client`]: a client of a qbets server, for the users' command line.
//! - [`cli`]: the `qbets` subcommands; `src/main.rs` only parses and dispatches.

pub mod cli;
pub mod client;
pub mod config;
pub mod engine;
pub mod http;
pub mod notify;
pub mod plan;
pub mod service;
pub mod sim;
pub mod sources;
pub mod store;
pub mod submit;
pub mod trace;
