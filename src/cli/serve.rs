//! `qbets serve`: opens the store (applying migrations), rebuilds the live predictors
//! from it, and serves the HTTP API until SIGINT/SIGTERM. Also the configuration,
//! logging and runtime set-up the other service subcommands share.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use crate::config::{Config, Overrides};
use crate::service::demo::{Demo, DemoOptions};
use crate::service::reservations::{Executor, HaltPoint, Submitters};
use crate::service::{AppState, Clock, Predictors, SystemClock};
use crate::store::{SiteScope, Store, StoreTask, redact_url, with_store_options};
use crate::submit::{DemoScheduler, Submitter};

/// Where the service's settings come from (shared by every service subcommand).
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// The store: sqlite://FILE (default sqlite://qbets.db, created on first start) or
    /// postgres://USER:PASSWORD@HOST/DB. Also DATABASE_URL.
    #[arg(long, value_name = "URL", global = true)]
    pub database_url: Option<String>,
    /// A TOML configuration file (see `qbets default-config`). Also QBETS_CONFIG (an
    /// empty value is no file).
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
}

/// `qbets serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:8080). Also QBETS_LISTEN.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Where the store and configuration are.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Start a live simulated site, "demo" (a Cirne-model workload under EASY
    /// backfilling, in accelerated time, after a pre-roll of 14 simulated days). Unless
    /// a database is given, it runs on its own SQLite file, ./qbets-demo.db, made
    /// afresh at each start (qbets.db is left alone).
    #[arg(long)]
    pub demo: bool,
    /// Milliseconds a client may take to send a request's headers (setting
    /// http.header_timeout_ms, default 10000).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_ms: Option<u64>,
    /// Milliseconds an idle keep-alive connection stays open (setting
    /// http.idle_timeout_ms, default 60000).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_ms: Option<u64>,
    /// Milliseconds a client may take to send a request's body (setting
    /// http.body_timeout_ms, default 30000).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_ms: Option<u64>,
    /// Most connections held open at once (setting http.max_connections, default 512).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..100_000_000))]
    pub max_connections: Option<u64>,
    /// With --demo: simulated seconds per real second (300: a second is five minutes).
    #[arg(long, value_name = "X", default_value_t = 300.0, requires = "demo",
          value_parser = speedup)]
    pub demo_speedup: f64,
    /// With --demo: the simulated machine's scheduler — fcfs, easy (the default),
    /// conservative (its queues then in arrival order) or los[:C[:variant]] — to see how
    /// the policy changes the bounds.
    #[arg(long, value_name = "POLICY", default_value = "easy", requires = "demo",
          value_parser = demo_policy_arg)]
    pub demo_policy: crate::sim::Policy,
}

/// `--demo-policy`: a space-shared policy for rigid jobs.
fn demo_policy_arg(s: &str) -> Result<crate::sim::Policy, String> {
    crate::service::demo::demo_policy(crate::sim::Policy::parse(s)?)
}

/// The demo's own database when none is given.
pub const DEMO_DATABASE_URL: &str = "sqlite://qbets-demo.db";

/// Loads the configuration from every layer, flags last.
pub fn load_config(store: &StoreArgs, listen: Option<SocketAddr>) -> anyhow::Result<Config> {
    load_config_with(
        store,
        Overrides {
            listen,
            ..Overrides::default()
        },
    )
}

/// Loads the configuration from every layer, with these flags last (the store's flags
/// from `store`).
pub fn load_config_with(store: &StoreArgs, flags: Overrides) -> anyhow::Result<Config> {
    // Read here rather than by clap, which takes an empty QBETS_CONFIG for a
    // `--config` given without its value.
    let config = store.config.clone().or_else(|| {
        std::env::var_os("QBETS_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    Ok(Config::load(
        config.as_deref(),
        |k| std::env::var(k).ok(),
        &Overrides {
            database_url: store.database_url.clone(),
            ..flags
        },
    )?)
}

/// Logs to stderr, filtered by `RUST_LOG` or else the configuration's `log.filter`. A
/// filter that does not parse is an error naming where it came from (tracing would
/// otherwise drop the bad directive with a note and log by what is left).
pub fn init_logging(config: &Config) -> anyhow::Result<()> {
    // An empty RUST_LOG (`Environment=RUST_LOG=`) is unset, as every other variable.
    let env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let filter = log_filter(env, &config.log.filter)?;
    // A second initialisation (tests) is harmless; ignore it.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colours only for a person at a terminal, not in log files and journals.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
    Ok(())
}

/// The log filter: `RUST_LOG` when set, else the configuration's directives.
fn log_filter(
    rust_log: Option<String>,
    configured: &str,
) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    let (origin, directives) = match rust_log {
        Some(v) => ("RUST_LOG", v),
        None => ("setting log.filter", configured.to_string()),
    };
    tracing_subscriber::EnvFilter::try_new(&directives)
        .map_err(|e| anyhow::anyhow!("invalid {origin} {directives:?}: {e}"))
}

/// The multi-threaded runtime the service subcommands run on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `--demo-speedup`: above 0, at most a million (a real second is then 11.6 simulated
/// days; more would outrun what a tick can simulate and the times the store holds).
fn speedup(s: &str) -> Result<f64, String> {
    super::number_where(s, |v| v > 0.0 && v <= 1e6, "above 0 and at most 1000000")
}

/// Runs `qbets serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let mut config = load_config_with(
        &args.store,
        Overrides {
            listen: args.listen,
            header_timeout_ms: args.header_timeout_ms,
            idle_timeout_ms: args.idle_timeout_ms,
            body_timeout_ms: args.body_timeout_ms,
            max_connections: args.max_connections.map(|n| n as usize),
            database_url: None,
        },
    )?;
    init_logging(&config)?;
    let demo = args.demo.then(|| DemoOptions {
        speedup: args.demo_speedup,
        policy: args.demo_policy,
        ..DemoOptions::default()
    });
    // Only a URL given on the command line takes the demo: one from the environment or a
    // configuration file (a container's DATABASE_URL) is the service's own store, which
    // simulated jobs must not enter.
    if demo.is_some() && args.store.database_url.is_none() {
        // A fresh demo each time, and the user's own store untouched.
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("qbets-demo.db{suffix}"));
        }
        config.database_url = DEMO_DATABASE_URL.to_string();
    }
    let url = config.database_url.clone();
    runtime()?.block_on(async move {
        let options = config.store.options();
        with_store_options(&url, options, Serve { config, demo })
            .await
            .with_context(|| format!("cannot open the store at {}", redact_url(&url)))?
    })?;
    Ok(ExitCode::SUCCESS)
}

struct Serve {
    config: Config,
    demo: Option<DemoOptions>,
}

impl StoreTask for Serve {
    type Output = anyhow::Result<()>;

    async fn run<S: Store>(self, store: S) -> anyhow::Result<()> {
        let total = Predictors::rebuild_size(&store).await?;
        let bar = super::progress::bar(total, "jobs");
        bar.set_message("rebuilding predictors");
        let (predictors, report) = Predictors::rebuild(&store, |n| bar.inc(n)).await?;
        bar.finish_and_clear();
        tracing::info!(
            queues = report.queues,
            jobs = report.jobs,
            bounds_recorded = report.bounds_recorded,
            duration_ms = report.elapsed.as_secs_f64() * 1e3,
            jobs_per_s = report.jobs_per_s().round(),
            "predictors rebuilt from the store"
        );
        let listen = self.config.listen;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        tracing::info!(
            %addr,
            backend = store.backend(),
            database = %redact_url(&self.config.database_url),
            "serving: the dashboard at http://{addr}/ui/, the API under http://{addr}/v1 (docs at http://{addr}/docs)"
        );
        let mut submitters = Submitters::from_config(&self.config.sites)
            .context("cannot set up the sites' submit targets")?;
        // The demo site takes reservations on its own simulated machine, run by its own
        // (simulated) clock: an executor of its own, and the others leave it alone.
        let demo_scheduler = self.demo.as_ref().map(|opts| {
            let scheduler = DemoScheduler::default();
            submitters.insert(opts.site.clone(), Submitter::Demo(scheduler.clone()));
            (opts.site.clone(), scheduler)
        });
        let submitters = Arc::new(submitters);
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let sites = self.config.sites.clone();
        let batch_size = self.config.import.batch_size;
        let reservations = self.config.reservations.clone();
        let webhook_secret = reservations
            .webhook_secret_env
            .as_deref()
            .map(crate::notify::WebhookSecret::from_env)
            .transpose()
            .map_err(anyhow::Error::msg)
            .context("cannot set up reservation webhooks")?;
        let state = AppState::new(store.clone(), self.config, predictors, clock.clone())
            .with_submitters(submitters.clone())
            .with_webhook_secret(webhook_secret.clone());
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let halt_at = halt_point()?;
        let executor = reservations.executor.then(|| {
            let executor = Executor::new(
                state.store.clone(),
                submitters,
                clock.clone(),
                executor_id(),
            )
            .with_predictors(state.predictors.clone())
            .with_lease_s(reservations.lease_s)
            .with_halt_at(halt_at)
            .with_scope(match &demo_scheduler {
                Some((site, _)) => SiteScope::Except(site.clone()),
                None => SiteScope::All,
            });
            tracing::info!(executor = %executor.id(), "reservations executor started");
            let tick = std::time::Duration::from_secs(reservations.tick_s.max(1));
            let mut stopped = stopped.clone();
            tokio::spawn(executor.run(tick, async move {
                let _ = stopped.wait_for(|s| *s).await;
            }))
        });
        // Reservation webhooks, sent from the store's outbox by every replica (a row is
        // leased to one sender at a time).
        let deliverer = match webhook_secret {
            Some(secret) => {
                let deliverer = crate::notify::Deliverer::new(
                    state.store.clone(),
                    clock.clone(),
                    secret,
                    format!("{}-webhooks", executor_id()),
                )
                .map_err(anyhow::Error::msg)?;
                tracing::info!("reservation webhooks deliverer started");
                let mut stopped = stopped.clone();
                Some(tokio::spawn(deliverer.run(
                    std::time::Duration::from_secs(1),
                    async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    },
                )))
            }
            None => None,
        };
        let demo = match (self.demo, demo_scheduler) {
            (Some(opts), Some((site, scheduler))) => {
                // The demo's reservations run by its clock, on its machine, inside its
                // steps (see `Demo::tick_with`): its own executor, which the demo
                // task drives.
                let (ex_store, ex_predictors) = (state.store.clone(), state.predictors.clone());
                let submitters = state.submitters.clone();
                let lease_s = reservations.lease_s;
                let executor = reservations.executor.then_some(move |demo_clock| {
                    Executor::new(
                        ex_store,
                        submitters,
                        demo_clock,
                        format!("{}-demo", executor_id()),
                    )
                    .with_predictors(ex_predictors)
                    .with_lease_s(lease_s)
                    .with_scope(SiteScope::Only(site))
                });
                let mut stopped = stopped.clone();
                let stop = async move {
                    let _ = stopped.wait_for(|s| *s).await;
                };
                Some(
                    start_demo(
                        &store,
                        &state.predictors,
                        opts,
                        clock,
                        scheduler,
                        executor,
                        stop,
                    )
                    .await?,
                )
            }
            _ => None,
        };
        // Each configured source runs in the background; one failing never stops the
        // others or the API.
        let sources = crate::service::ingest::spawn_sources(
            &state.store,
            state.predictors.clone(),
            state.clock.clone(),
            &sites,
            batch_size,
        )
        .await
        .context("cannot start the configured sources")?;
        if !sources.is_empty() {
            tracing::info!(sources = sources.len(), "sources started");
        }
        crate::http::serve(listener, state, shutdown_signal()).await?;
        sources.stop().await;
        let _ = stop.send(true);
        // The demo stops between steps (its executor inside them), like the executor.
        for task in executor.into_iter().chain(deliverer).chain(demo) {
            let _ = task.await;
        }
        tracing::info!("stopped");
        Ok(())
    }
}

/// Creates the demo site, runs its pre-roll (with a progress bar), and starts its
/// live ticks in the background.
async fn start_demo<S: Store>(
    store: &S,
    predictors: &Arc<Predictors>,
    opts: DemoOptions,
    clock: Arc<dyn Clock>,
    scheduler: DemoScheduler,
    executor: Option<impl FnOnce(Arc<dyn Clock>) -> Executor<S>>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let started = std::time::Instant::now();
    let preroll = opts.preroll_s;
    let speedup = opts.speedup;
    let mut demo = Demo::new(store, predictors, opts, clock).await?;
    demo.take_reservations(scheduler);
    let executor = executor.map(|make| make(demo.clock()));
    let bar = super::progress::bar(preroll.max(0) as u64, "simulated s");
    bar.set_message("demo pre-roll");
    let records = demo
        .preroll(store, predictors, |done| {
            bar.set_position(done.max(0) as u64)
        })
        .await?;
    bar.finish_and_clear();
    tracing::info!(
        site = %demo.site().name,
        records,
        preroll_days = preroll / 86_400,
        speedup,
        duration_ms = started.elapsed().as_secs_f64() * 1e3,
        "demo site live (try /v1/sites/demo/queues/normal/bound?nodes=8&walltime=01:00:00)"
    );
    let (store, predictors) = (store.clone(), predictors.clone());
    Ok(tokio::spawn(async move {
        demo.run(store, predictors, executor, stop).await;
    }))
}

/// `QBETS_HALT_AT`, for crash tests only: the point where the executor stops for good
/// (see [`HaltPoint`]), so that a test can `kill -9` the process exactly there.
fn halt_point() -> anyhow::Result<Option<HaltPoint>> {
    match std::env::var("QBETS_HALT_AT") {
        Ok(v) if !v.is_empty() => {
            let point = v
                .parse::<HaltPoint>()
                .map_err(|e| anyhow::anyhow!("QBETS_HALT_AT: {e}"))?;
            tracing::warn!(%point, "QBETS_HALT_AT is set: the executor will halt there (crash tests only)");
            Ok(Some(point))
        }
        _ => Ok(None),
    }
}

/// A name for this replica's executor, unique among replicas: host, process and a
/// random part (a restarted process never reuses its predecessor's leases).
fn executor_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "qbets".into());
    crate::service::reservations::new_uid(&format!("{host}-{}-", std::process::id()))
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM (`docker stop`, systemd).
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn a_log_filter_that_does_not_parse_is_refused_by_its_origin() {
        assert!(log_filter(None, "info,qbets=debug").is_ok());
        assert!(log_filter(Some("warn".into()), "info").is_ok());
        let e = log_filter(None, "[[[[").unwrap_err().to_string();
        assert!(
            e.starts_with("invalid setting log.filter \"[[[[\": "),
            "{e}"
        );
        // RUST_LOG wins over the configuration, a bad one included.
        let e = log_filter(Some("qbets=loud".into()), "info")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid RUST_LOG \"qbets=loud\": "), "{e}");
    }
}
