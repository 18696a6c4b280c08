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
    /// Simulate a batch scheduler on a trace or a workload model; write SWF.
    Simulate(qbets::cli::simulate::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(args) => qbets::cli::simulate::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
