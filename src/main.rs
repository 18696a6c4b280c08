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

/// Rust ignores SIGPIPE, so output to a pipe closed early (`qbets replay … --json |
/// head`) makes `print!` panic. The commands that write results end quietly instead, as
/// other command-line tools do. Not the server: it writes to sockets its peers close.
#[cfg(unix)]
fn end_quietly_on_a_closed_pipe() {
    // SAFETY: called first thing in `main`, before any thread starts; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn end_quietly_on_a_closed_pipe() {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        end_quietly_on_a_closed_pipe();
    }
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
