//! qbets's integration tests, one binary (STYLE.md). Trace tests read the Parallel
//! Workloads Archive traces from `$QBETS_TRACES` and fail when a trace is missing.

mod replay;
