//! The one integration test binary of qbets (STYLE.md); each module tests one part of
//! the system through its public interface, against real services where the part has
//! one. Trace tests read the Parallel Workloads Archive traces from `$QBETS_TRACES` and
//! fail when a trace is missing.

mod replay;
mod sim;
mod slurm;
