//! The `qbets` subcommands. Each submodule holds one subcommand's arguments and its
//! `run`; this is where files are opened, progress is drawn and results printed.
//!
//! May import: anything the subcommand needs; the layers below stay pure.

pub mod advise;
pub mod ask;
pub mod default_config;
pub mod import;
pub mod migrate;
pub mod output;
pub mod progress;
pub mod remote;
pub mod replay;
pub mod reserve;
pub mod serve;
pub mod simulate;
pub mod simulate_mold;
pub mod simulate_timeshare;
pub mod token;

/// A finite number given on the command line that `ok` accepts; `want` says which
/// numbers it takes, for the error clap shows beside the flag.
pub(crate) fn number_where(s: &str, ok: impl Fn(f64) -> bool, want: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && ok(v) => Ok(v),
        Ok(v) if v.is_finite() => Err(format!("must be {want}, got {v}")),
        _ => Err(format!("{s:?} is not a number")),
    }
}
