//! `qbets import --site NAME FILE`: reads an SWF trace (plain or gzipped) with a
//! progress bar, stores its jobs as an archive site, keeps malformed lines as rejects,
//! and prints a summary. Importing the same file again changes nothing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::serve::{StoreArgs, init_logging, load_config, runtime};
use crate::config::Config;
use crate::service::import::{ImportOptions, ImportSummary, import_trace};
use crate::service::{Clock, SystemClock, check_name};
use crate::store::{Store, StoreTask, redact_url, with_store};
use crate::trace::swf::QueueField;

/// `qbets import`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// The site's name in the store and the API's URLs.
    #[arg(long)]
    pub site: String,
    /// The trace: an SWF file, plain or gzipped.
    pub file: PathBuf,
    /// Where the store and configuration are.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Runs `qbets import`.
pub fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(&args.store, None)?;
    init_logging(&config)?;
    let summary = runtime()?.block_on(import_file(&config, &args.site, &args.file))?;
    print!("{}", report(&summary));
    Ok(ExitCode::SUCCESS)
}

/// Imports one trace file into the store the configuration names.
pub async fn import_file(
    config: &Config,
    site: &str,
    file: &Path,
) -> anyhow::Result<ImportSummary> {
    check_name(site).map_err(|e| anyhow::anyhow!("--site: {e}"))?;
    let url = config.database_url.clone();
    let task = Import {
        site: site.to_string(),
        file: file.to_path_buf(),
        batch_size: config.import.batch_size,
    };
    with_store(&url, task)
        .await
        .with_context(|| format!("cannot open the store at {}", redact_url(&url)))?
}

struct Import {
    site: String,
    file: PathBuf,
    batch_size: usize,
}

impl StoreTask for Import {
    type Output = anyhow::Result<ImportSummary>;

    async fn run<S: Store>(self, store: S) -> anyhow::Result<ImportSummary> {
        let path = self.file.clone();
        // Reading and parsing is blocking work: off the async threads.
        let trace = tokio::task::spawn_blocking(move || super::progress::read_swf(&path))
            .await
            .context("the trace reader stopped")??;
        let bar = super::progress::bar(trace.records.len() as u64, "jobs");
        bar.set_message("storing");
        let opts = ImportOptions {
            site: self.site,
            source: crate::service::import::source_name(&self.file),
            batch_size: self.batch_size,
            now: SystemClock.now(),
            refuse_other_traces: true,
        };
        let summary = import_trace(&store, &trace, &opts, |n| bar.inc(n)).await?;
        bar.finish_and_clear();
        tracing::info!(
            site = %summary.site,
            records = summary.records,
            inserted = summary.inserted,
            rejected = summary.rejected,
            duration_ms = summary.elapsed.as_secs_f64() * 1e3,
            records_per_s = summary.records_per_s().round(),
            backend = store.backend(),
            "import done"
        );
        Ok(summary)
    }
}

/// The summary printed after an import.
pub fn report(s: &ImportSummary) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let field = match s.queue_field {
        QueueField::Queue => "field 15 (queue)",
        QueueField::Partition => "field 16 (partition)",
    };
    let _ = writeln!(
        out,
        "site {}: {} records read in {:.1} s ({:.0} records/s)",
        s.site,
        s.records,
        s.elapsed.as_secs_f64(),
        s.records_per_s()
    );
    let _ = writeln!(
        out,
        "  {} jobs stored, {} already stored, {} lines kept aside as rejects ({} new)",
        s.inserted, s.already_stored, s.rejected, s.rejects_new
    );
    let _ = writeln!(out, "  queues from {field}:");
    for (name, n) in &s.queues {
        let _ = writeln!(out, "    {name:<16} {n:>9} jobs");
    }
    for note in &s.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    if !s.sample_rejects.is_empty() {
        let _ = writeln!(out, "  rejects (first {}):", s.sample_rejects.len());
        for (line, reason) in &s.sample_rejects {
            let _ = writeln!(out, "    line {line}: {reason}");
        }
    }
    out
}
