//! The `qbets` binary: parses the command line and starts the subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use qbets::cli;

#[derive(Parser)]
#[command(
    name = "qbets",
    version,
    about = "Queue wait-time bounds and virtual advance reservations for HPC batch schedulers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay an SWF workload trace through QBETS and score its bounds (Tables 4.1/4.2).
    Replay(cli::replay::Args),
    /// Serve the HTTP API (rebuilds the predictors from the store first).
    Serve(cli::serve::ServeArgs),
    /// Import an SWF workload trace (plain or gzipped) as an archive site.
    Import(cli::import::ImportArgs),
    /// Create, list or revoke API tokens.
    Token(cli::token::TokenArgs),
    /// Apply the store's pending migrations.
    Migrate(cli::migrate::MigrateArgs),
    /// Print a commented example configuration with every default.
    DefaultConfig,
    /// Simulate a batch scheduler on a trace or a workload model; write SWF.
    Simulate(cli::simulate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(args) => cli::replay::run(args).map(|()| ExitCode::SUCCESS),
        Command::Serve(args) => cli::serve::run(args),
        Command::Import(args) => cli::import::run(args),
        Command::Token(args) => cli::token::run(args),
        Command::Migrate(args) => cli::migrate::run(args),
        Command::DefaultConfig => Ok(cli::default_config::run()),
        Command::Simulate(args) => cli::simulate::run(args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("qbets: {e:#}");
            ExitCode::FAILURE
        }
    }
}
