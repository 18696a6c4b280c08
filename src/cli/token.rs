//! `qbets token create|list|revoke`: API tokens. A new token's secret is printed once,
//! on stdout, and never stored or logged (the store keeps its SHA-256 hash).

use std::process::ExitCode;

use anyhow::Context;

use super::serve::{StoreArgs, init_logging, load_config, runtime};
use crate::service::tokens;
use crate::store::{Scope, Store, StoreTask, redact_url, with_store};

/// `qbets token`.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TokenCommand,
    /// Where the store and configuration are.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The running demo's store (./qbets-demo.db, made afresh at each start of `qbets
    /// serve --demo`: make its tokens while it runs).
    #[arg(long, global = true, conflicts_with = "database_url")]
    pub demo: bool,
}

/// What to do with tokens.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it once.
    Create {
        /// A name to recognise the token by (unique).
        #[arg(long)]
        name: String,
        /// What it may do: read, ingest, reserve or admin (admin implies all).
        #[arg(long, value_parser = parse_scope)]
        scope: Scope,
    },
    /// List tokens (names, scopes, creation times — never secrets).
    List,
    /// Delete a token by name. Its reservations are detached from the name, so that a
    /// new token given the same name does not see them.
    Revoke {
        /// The token's name.
        #[arg(long)]
        name: String,
        /// Leave the token's reservations to its name: the next token created with that
        /// name sees and manages them (a token replaced, not withdrawn).
        #[arg(long)]
        keep_reservations: bool,
    },
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    s.parse::<Scope>()
        .map_err(|_| "expected read, ingest, reserve or admin".to_string())
}

/// Runs `qbets token`.
pub fn run(args: TokenArgs) -> anyhow::Result<ExitCode> {
    let mut config = load_config(&args.store, None)?;
    init_logging(&config)?;
    if args.demo {
        if !std::path::Path::new("qbets-demo.db").exists() {
            anyhow::bail!(
                "no ./qbets-demo.db here: start `qbets serve --demo` in this directory first \
                 (it makes the demo's store afresh at each start)"
            );
        }
        config.database_url = super::serve::DEMO_DATABASE_URL.to_string();
    }
    let url = config.database_url.clone();
    runtime()?.block_on(async move {
        with_store(&url, Tokens(args.command))
            .await
            .with_context(|| format!("cannot open the store at {}", redact_url(&url)))?
    })
}

struct Tokens(TokenCommand);

impl StoreTask for Tokens {
    type Output = anyhow::Result<ExitCode>;

    async fn run<S: Store>(self, store: S) -> anyhow::Result<ExitCode> {
        match self.0 {
            TokenCommand::Create { name, scope } => {
                let (secret, stored) = tokens::create(&store, &name, scope).await?;
                eprintln!(
                    "token {:?} (scope {}) created; it is shown once, store it now:",
                    stored.name, stored.scope
                );
                println!("{}", secret.expose());
            }
            TokenCommand::List => {
                for t in store.tokens().await? {
                    println!(
                        "{:<24} {:<8} created {}",
                        t.name,
                        t.scope,
                        crate::service::format_unix(t.created_at)
                    );
                }
            }
            TokenCommand::Revoke {
                name,
                keep_reservations,
            } => {
                if !store.delete_token(&name, keep_reservations).await? {
                    eprintln!("no token named {name:?}");
                    return Ok(ExitCode::from(1));
                }
                eprintln!("token {name:?} revoked");
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
