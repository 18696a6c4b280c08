//! The `qbets` binary: parses the command line and starts the subcommand.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use qbets::cli;

#[derive(Parser)]
#[command(
    name = "qbets",
    version,
    about = "Queue wait-time bounds and virtual advance reservations for HPC batch schedulers",
    after_help = cli::remote::EXIT_CODES_HELP
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
    /// Ask a server: how long a job of this shape waits in a queue (95% of such jobs
    /// start within the bound).
    Bound(cli::ask::BoundArgs),
    /// Ask a server: the probability that a job of this shape starts by a time.
    Deadline(cli::ask::DeadlineArgs),
    /// Ask a server about one job: its wait and the bound it was given.
    Job(cli::ask::JobArgs),
    /// Ask a server: every queue's bound for a job of this shape, shortest first.
    Rank(cli::ask::RankArgs),
    /// Ask a server: which of a job's shapes (nodes × walltime, or a moldable job's
    /// sizes) finishes first, by the bound on its wait plus its walltime.
    Advise(cli::advise::AdviseArgs),
    /// Plan, make, follow or cancel virtual advance reservations on a server.
    Reserve(cli::reserve::ReserveArgs),
    /// Print a shell's completion script, e.g. `qbets completions bash >
    /// ~/.local/share/bash-completion/completions/qbets`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
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
        Command::Bound(args) => cli::ask::bound(args),
        Command::Deadline(args) => cli::ask::deadline(args),
        Command::Job(args) => cli::ask::job(args),
        Command::Rank(args) => cli::ask::rank(args),
        Command::Advise(args) => cli::advise::run(args),
        Command::Reserve(args) => cli::reserve::run(args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "qbets", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("qbets: {e:#}");
            ExitCode::FAILURE
        }
    }
}
