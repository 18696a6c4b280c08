//! Workload trace formats read and written by the command line and the importers.
//!
//! May import: std, serde, flate2. No network, no database: callers hand the parsed
//! records to the engine, the simulator or the store.

pub mod swf;
