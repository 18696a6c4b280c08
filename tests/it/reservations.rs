//! Managed reservations (VARQ, CO-VARQ): the plans and the reservation API in-process
//! with an injected clock (`api`), and the executor against the live local Slurm
//! (`executor`): submission at the planned time, never twice after a crash or between
//! two replicas, cancel, and the end-to-end run on a busy queue; and `kill -9` of real
//! `qbets serve` processes at the two dangerous points, and two replicas as processes
//! (`crash`).

/// Runs a test body on the store a URL names.
macro_rules! on_store {
    ($url:expr, $body:ident $(, $arg:expr)*) => {
        match qbets::store::Backend::from_url($url).unwrap() {
            qbets::store::Backend::Sqlite => {
                let s = qbets::store::SqliteStore::connect($url).await.unwrap();
                s.migrate().await.unwrap();
                $body(s $(, $arg)*).await
            }
            qbets::store::Backend::Postgres => {
                let s = qbets::store::PgStore::connect($url).await.unwrap();
                s.migrate().await.unwrap();
                $body(s $(, $arg)*).await
            }
        }
    };
}

pub(crate) mod api;
mod crash;
mod executor;

use qbets::config::{SiteConfig, SlurmRestSource, SourceConfig};
use qbets::submit::{SlurmRestSubmitConfig, SubmitConfig};

/// The site name the tests give the local Slurm.
pub const SITE: &str = "local";

/// `[[sites]]` for the local Slurm (`scripts/local-slurm env`); the URL defaults to
/// the script's, so in-process tests that never reach Slurm still configure. (Its
/// source only runs where a test starts `qbets serve` with it, in `crash`.)
pub fn local_site() -> SiteConfig {
    let url = std::env::var("SLURMRESTD_URL").unwrap_or_else(|_| "http://127.0.0.1:6820".into());
    SiteConfig {
        user_key: Default::default(),
        user_key_secret_env: None,
        name: SITE.into(),
        description: String::new(),
        time_zone: None,
        source: SourceConfig::SlurmRest(SlurmRestSource {
            url: url.clone(),
            api_version: "auto".parse().unwrap(),
            user: "root".into(),
            token_env: Some("SLURM_JWT".into()),
            token_file: None,
            interval_s: 15,
            timeout_s: 30,
        }),
        submit: Some(SubmitConfig::SlurmRest(SlurmRestSubmitConfig {
            url,
            api_version: std::env::var("SLURMRESTD_API_VERSION")
                .unwrap_or_else(|_| "v0.0.38".into())
                .parse()
                .expect("SLURMRESTD_API_VERSION"),
            user: std::env::var("SLURMRESTD_USER").unwrap_or_else(|_| "root".into()),
            token_env: Some("SLURM_JWT".into()),
            token_file: None,
            timeout_s: 20,
            working_dir: "/tmp".into(),
            cpus_per_task: None,
        })),
        queues: Vec::new(),
    }
}

/// A queue's history: `n` one-node jobs, one every 30 s, ending a minute before `now`,
/// each waiting `(7 i) mod 60` seconds — every wait under a minute.
pub fn history(now: i64, n: i64) -> Vec<(i64, i64)> {
    (0..n)
        .map(|i| {
            let submit = now - 60 - (n - i) * 30;
            (submit, submit + (7 * i) % 60)
        })
        .collect()
}
