//! The one integration test binary of qbets (STYLE.md); each module tests one part of
//! the system through its public interface, against real services where the part has
//! one. Trace tests read the Parallel Workloads Archive traces from `$QBETS_TRACES` and
//! fail when a trace is missing. The store and HTTP tests run on a fresh database each
//! (`support::TestDb`: SQLite, or PostgreSQL when `TEST_DATABASE_URL` is set).

mod advice;
mod bounded_input;
mod bounds;
mod browser;
mod cli;
mod connections;
mod dashboard;
mod demo;
mod http_api;
mod import_trace;
mod ingest;
mod job_life;
mod limits;
mod metrics;
mod openapi;
mod predictors;
mod rejects;
mod replay;
mod reservations;
mod sacct;
mod sensors;
mod sim;
mod slurm;
mod slurmdb;
mod smaller;
mod store_away;
mod store_story;
mod support;
mod varq_generality;
mod webdriver;
mod webhooks;
