//! Schedulers we read job records from.
//!
//! Each submodule speaks one scheduler's interface. Parsing a response or a log line is a
//! pure function tested on captured fixtures; talking to the scheduler (HTTP, commands)
//! lives beside it.
//!
//! May import: reqwest, tokio, serde and std (this and `src/submit/` are the only places
//! that talk to schedulers); never sqlx or axum.

pub mod slurm_rest;
