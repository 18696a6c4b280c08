//! The `qbets` binary: parses the command line and starts the subcommand.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "qbets", version, about = "Queue wait-time bounds and virtual advance reservations for HPC batch schedulers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {}
}
