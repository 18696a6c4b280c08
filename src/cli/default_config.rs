//! `qbets default-config`: prints the commented example configuration (every setting
//! with its default), embedded in the binary.

use std::process::ExitCode;

/// Runs `qbets default-config`.
pub fn run() -> ExitCode {
    print!("{}", crate::config::EXAMPLE);
    ExitCode::SUCCESS
}
