//! `qbets migrate`: applies the store's pending migrations and exits (`qbets serve`
//! also applies them at start-up; this is for deployments that migrate separately).

use std::process::ExitCode;

use anyhow::Context;

use super::serve::{StoreArgs, init_logging, load_config, runtime};
use crate::store::{Store, StoreTask, redact_url, with_store};

/// `qbets migrate`.
#[derive(Debug, Clone, clap::Args)]
pub struct MigrateArgs {
    /// Where the store and configuration are.
    #[command(flatten)]
    pub store: StoreArgs,
}

struct Migrated;

impl StoreTask for Migrated {
    type Output = &'static str;
    async fn run<S: Store>(self, store: S) -> &'static str {
        store.backend()
    }
}

/// Runs `qbets migrate`.
pub fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(&args.store, None)?;
    init_logging(&config)?;
    let url = config.database_url.clone();
    let backend = runtime()?
        .block_on(with_store(&url, Migrated))
        .with_context(|| format!("cannot migrate the store at {}", redact_url(&url)))?;
    println!(
        "{} ({backend}): schema up to date",
        redact_url(&config.database_url)
    );
    Ok(ExitCode::SUCCESS)
}
