//! The `qbets` binary: parses the command line and starts the subcommand.

use clap::{Parser, Subcommand};

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
    Replay(qbets::cli::replay::Args),
    /// Simulate a batch scheduler on a trace or a workload model; write SWF.
    Simulate(qbets::cli::simulate::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(args) => qbets::cli::replay::run(args),
        Command::Simulate(args) => qbets::cli::simulate::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("qbets: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
