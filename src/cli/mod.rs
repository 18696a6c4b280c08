//! The `qbets` subcommands. Each submodule holds one subcommand's arguments and its
//! `run`; this is where files are opened, progress is drawn and results printed.
//!
//! May import: anything the subcommand needs; the layers below stay pure.

pub mod default_config;
pub mod import;
pub mod migrate;
pub mod output;
pub mod progress;
pub mod replay;
pub mod serve;
pub mod simulate;
pub mod token;
