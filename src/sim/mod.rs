//! Batch-scheduler simulator and workload models.
//!
//! Pure computation: may import std, serde, statrs, rand and the crate's domain types
//! only — no I/O, no clock.
