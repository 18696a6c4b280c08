//! The service's configuration: TOML layered built-in defaults → file → environment →
//! command-line flags. The commented example (`example.toml`, embedded, printed by
//! `qbets default-config`) shows every setting with its default, and a test checks that
//! it parses back to exactly [`Config::default`].
//!
//! May import: std, serde, toml. Secrets (a password in the database URL) never appear
//! in `Debug` output.

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::{DEFAULT_DATABASE_URL, redact_url};

pub mod sources;

pub use sources::{
    PbsAccountingSource, QueueConfig, SacctSource, SgeAccountingSource, SiteConfig,
    SlurmRestSource, SourceConfig, SwfSource, UserKeyRule,
};

/// The commented example configuration, with every default.
pub const EXAMPLE: &str = include_str!("example.toml");

/// Everything `qbets serve` (and the other subcommands) can be told.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP API listens on.
    pub listen: SocketAddr,
    /// The store: `sqlite://FILE` or `postgres://…`.
    pub database_url: String,
    /// HTTP settings.
    pub http: HttpConfig,
    /// How the store is waited for.
    pub store: StoreConfig,
    /// Logging.
    pub log: LogConfig,
    /// Trace import.
    pub import: ImportConfig,
    /// Bounds on what pushed records may make the service keep.
    pub ingest: IngestConfig,
    /// Managed reservations' executor.
    pub reservations: ReservationsConfig,
    /// What `/metrics` tells of each queue.
    pub metrics: MetricsConfig,
    /// Live sites fed by their schedulers (`[[sites]]`, each with a `[sites.source]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteConfig>,
}

/// What `/metrics` tells of each queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// The job shapes whose bound every queue exports (`qbets_queue_bound_seconds`), at
    /// most [`MetricsConfig::MAX_SHAPES`] (each is a series per queue).
    pub shapes: Vec<MetricsShape>,
}

/// One job shape of [`MetricsConfig::shapes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsShape {
    pub nodes: u64,
    pub walltime_s: u64,
}

impl MetricsConfig {
    /// Most shapes exported: the label set stays bounded (shapes × queues).
    pub const MAX_SHAPES: usize = 8;
}

impl Default for MetricsConfig {
    /// One node for an hour (the single short job most users ask about) and eight nodes
    /// for an hour (a small parallel job): a site sets the shapes its users submit.
    fn default() -> Self {
        Self {
            shapes: vec![
                MetricsShape {
                    nodes: 1,
                    walltime_s: 3_600,
                },
                MetricsShape {
                    nodes: 8,
                    walltime_s: 3_600,
                },
            ],
        }
    }
}

/// Settings of the managed reservations' executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReservationsConfig {
    /// Whether this replica runs the executor (several replicas may).
    pub executor: bool,
    /// Seconds between executor passes.
    pub tick_s: u64,
    /// Seconds a replica's claim on a due reservation lasts. Another replica (or this
    /// one restarted) takes a reservation over only once the claim has run out, so it
    /// must outlast one submission attempt: at least three times every site's submit
    /// `timeout_s` (a look-up and a submission, each bounded by it).
    pub lease_s: u64,
    /// The environment variable holding the secret reservation webhooks are signed with
    /// (HMAC-SHA256, at least 16 bytes). Unset: reservations with a webhook are refused.
    pub webhook_secret_env: Option<String>,
    /// Whether a webhook may reach a loopback, private, link-local or other
    /// non-public address (default false: users could otherwise make the server probe
    /// its own network and read the answers in the deliveries' errors). A URL naming
    /// such an address is refused, and a host that resolves to one is not sent to.
    pub webhook_allow_private: bool,
}

const fn default_executor() -> bool {
    true
}
const fn default_tick_s() -> u64 {
    5
}
const fn default_lease_s() -> u64 {
    crate::service::reservations::LEASE_S as u64
}

impl Default for ReservationsConfig {
    fn default() -> Self {
        Self {
            executor: default_executor(),
            tick_s: default_tick_s(),
            lease_s: default_lease_s(),
            webhook_secret_env: None,
            webhook_allow_private: false,
        }
    }
}

/// HTTP settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Whether GET requests are answered without a token.
    pub public_reads: bool,
    /// Origins allowed by CORS; `["*"]` for any, empty for none.
    pub cors_origins: Vec<String>,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Milliseconds a client may take to send a request's headers, from its first byte.
    pub header_timeout_ms: u64,
    /// Milliseconds a connection may stay open with no request in progress.
    pub idle_timeout_ms: u64,
    /// Milliseconds a client may take to send a request's body, from its headers' end.
    pub body_timeout_ms: u64,
    /// Most connections held open at once (the idle longest is closed for a newcomer).
    pub max_connections: usize,
}

/// How the store is waited for, so that a database away answers fast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Milliseconds a query waits for a database connection before it fails (503).
    pub acquire_timeout_ms: u64,
    /// Milliseconds `/readyz` (and the check that the store is back) waits for the store.
    pub ready_timeout_ms: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            acquire_timeout_ms: 5_000,
            ready_timeout_ms: 1_000,
        }
    }
}

impl StoreConfig {
    /// The store's options these settings give.
    pub fn options(&self) -> crate::store::StoreOptions {
        crate::store::StoreOptions {
            acquire_timeout: std::time::Duration::from_millis(self.acquire_timeout_ms),
        }
    }
}

/// Bounds on what records may make the service keep and answer, so that bad input
/// cannot amplify (issue 22).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestConfig {
    /// Refused records a push's answer lists with their reasons (the rest are counted).
    pub max_reasons_in_answer: usize,
    /// Refused records kept (`…/rejects`) from one push or poll; the rest are counted.
    pub max_rejects_per_request: usize,
    /// Refused records a site keeps; past it new ones are counted, not kept.
    pub max_rejects_per_site: u64,
    /// Queues a site may have; a record naming a new queue past it is kept aside.
    pub max_queues_per_site: u64,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            max_reasons_in_answer: 100,
            max_rejects_per_request: 1_000,
            max_rejects_per_site: 100_000,
            max_queues_per_site: 256,
        }
    }
}

/// Logging settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// tracing `EnvFilter` directives; `RUST_LOG` wins when set.
    pub filter: String,
}

/// Import settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImportConfig {
    /// Jobs written per transaction or statement.
    pub batch_size: usize,
}

const fn default_listen() -> SocketAddr {
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080)
}
const fn default_public_reads() -> bool {
    true
}
const fn default_max_body_bytes() -> usize {
    1 << 20
}
const fn default_header_timeout_ms() -> u64 {
    10_000
}
const fn default_idle_timeout_ms() -> u64 {
    60_000
}
const fn default_body_timeout_ms() -> u64 {
    30_000
}
const fn default_max_connections() -> usize {
    512
}
const fn default_batch_size() -> usize {
    10_000
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: default_listen(),
            database_url: DEFAULT_DATABASE_URL.to_string(),
            http: HttpConfig::default(),
            store: StoreConfig::default(),
            log: LogConfig::default(),
            import: ImportConfig::default(),
            ingest: IngestConfig::default(),
            reservations: ReservationsConfig::default(),
            metrics: MetricsConfig::default(),
            sites: Vec::new(),
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            public_reads: default_public_reads(),
            cors_origins: Vec::new(),
            max_body_bytes: default_max_body_bytes(),
            header_timeout_ms: default_header_timeout_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            body_timeout_ms: default_body_timeout_ms(),
            max_connections: default_max_connections(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            filter: "info".to_string(),
        }
    }
}

impl Default for ImportConfig {
    fn default() -> Self {
        Self {
            batch_size: default_batch_size(),
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("database_url", &redact_url(&self.database_url))
            .field("http", &self.http)
            .field("store", &self.store)
            .field("log", &self.log)
            .field("import", &self.import)
            .field("ingest", &self.ingest)
            .field("reservations", &self.reservations)
            .field("sites", &self.sites)
            .finish()
    }
}

/// Why the configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read. (The I/O error is in the message, and so not also
    /// the `source`, or `{:#}` would say it twice.)
    #[error("{path}: cannot read: {cause}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        cause: std::io::Error,
    },
    /// The file is not valid TOML for [`Config`] (the message names the key).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// An environment variable holds a value its setting cannot take.
    #[error("environment variable {name}={value:?}: {reason}")]
    Env {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// A site's setting breaks a rule its type cannot state.
    #[error("invalid setting {field}: {reason}")]
    InvalidSite {
        /// The setting, as a TOML path (`sites[0].source.url`).
        field: String,
        /// Why it was refused.
        reason: String,
    },
    /// A setting breaks a rule its type cannot state.
    #[error("invalid setting {field}: {reason}")]
    Invalid {
        /// The setting, as a TOML path.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
}

/// Overrides from the command line (each `None` leaves the lower layers' value).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// `--database-url`.
    pub database_url: Option<String>,
    /// `--header-timeout-ms`.
    pub header_timeout_ms: Option<u64>,
    /// `--idle-timeout-ms`.
    pub idle_timeout_ms: Option<u64>,
    /// `--body-timeout-ms`.
    pub body_timeout_ms: Option<u64>,
    /// `--max-connections`.
    pub max_connections: Option<usize>,
}

impl Config {
    /// Parses TOML text (a file's contents); `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_string(),
            message: e.to_string(),
        })
    }

    /// Builds the configuration from every layer: defaults, the file (if any), the
    /// environment (read through `env`, so tests need not touch the process's), then
    /// the flags.
    pub fn load(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
        flags: &Overrides,
    ) -> Result<Self, ConfigError> {
        let mut config = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
                    path: path.display().to_string(),
                    cause,
                })?;
                Self::from_toml(&text, &path.display().to_string())?
            }
            None => Self::default(),
        };
        config.apply_env(env)?;
        if let Some(listen) = flags.listen {
            config.listen = listen;
        }
        if let Some(url) = &flags.database_url {
            config.database_url = url.clone();
        }
        let http = &mut config.http;
        http.header_timeout_ms = flags.header_timeout_ms.unwrap_or(http.header_timeout_ms);
        http.idle_timeout_ms = flags.idle_timeout_ms.unwrap_or(http.idle_timeout_ms);
        http.body_timeout_ms = flags.body_timeout_ms.unwrap_or(http.body_timeout_ms);
        http.max_connections = flags.max_connections.unwrap_or(http.max_connections);
        config.validate()?;
        Ok(config)
    }

    /// The environment layer. `QBETS_DATABASE_URL` wins over the conventional
    /// `DATABASE_URL`.
    fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        fn parsed<T: std::str::FromStr>(name: &'static str, value: String) -> Result<T, ConfigError>
        where
            T::Err: fmt::Display,
        {
            value.trim().parse().map_err(|e: T::Err| ConfigError::Env {
                name,
                value: value.clone(),
                reason: e.to_string(),
            })
        }
        let get = |name: &str| env(name).filter(|v| !v.is_empty());
        if let Some(v) = get("QBETS_LISTEN") {
            self.listen = parsed("QBETS_LISTEN", v)?;
        }
        if let Some(v) = get("QBETS_DATABASE_URL").or_else(|| get("DATABASE_URL")) {
            self.database_url = v;
        }
        if let Some(v) = get("QBETS_PUBLIC_READS") {
            self.http.public_reads = parsed("QBETS_PUBLIC_READS", v)?;
        }
        if let Some(v) = get("QBETS_CORS_ORIGINS") {
            self.http.cors_origins = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
        if let Some(v) = get("QBETS_MAX_BODY_BYTES") {
            self.http.max_body_bytes = parsed("QBETS_MAX_BODY_BYTES", v)?;
        }
        Ok(())
    }

    /// Checks what types alone cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::store::Backend::from_url(&self.database_url).map_err(|e| ConfigError::Invalid {
            field: "database_url",
            reason: e.to_string(),
        })?;
        if self.metrics.shapes.len() > MetricsConfig::MAX_SHAPES {
            return Err(ConfigError::Invalid {
                field: "metrics.shapes",
                reason: format!(
                    "{} shapes; at most {} (each is a series per queue)",
                    self.metrics.shapes.len(),
                    MetricsConfig::MAX_SHAPES
                ),
            });
        }
        if self
            .metrics
            .shapes
            .iter()
            .any(|s| s.nodes == 0 || s.walltime_s == 0)
        {
            return Err(ConfigError::Invalid {
                field: "metrics.shapes",
                reason: "every shape needs nodes and walltime_s of at least 1".into(),
            });
        }
        if self.http.max_body_bytes == 0 {
            return Err(ConfigError::Invalid {
                field: "http.max_body_bytes",
                reason: "must be at least 1".into(),
            });
        }
        for (field, value) in [
            ("http.header_timeout_ms", self.http.header_timeout_ms),
            ("http.idle_timeout_ms", self.http.idle_timeout_ms),
            ("http.body_timeout_ms", self.http.body_timeout_ms),
            ("http.max_connections", self.http.max_connections as u64),
            ("store.acquire_timeout_ms", self.store.acquire_timeout_ms),
            ("store.ready_timeout_ms", self.store.ready_timeout_ms),
            (
                "ingest.max_queues_per_site",
                self.ingest.max_queues_per_site,
            ),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    field,
                    reason: "must be at least 1".into(),
                });
            }
        }
        if self.import.batch_size == 0 {
            return Err(ConfigError::Invalid {
                field: "import.batch_size",
                reason: "must be at least 1".into(),
            });
        }
        sources::validate(&self.sites)
            .map_err(|(field, reason)| ConfigError::InvalidSite { field, reason })?;
        if self.reservations.tick_s == 0 {
            return Err(ConfigError::Invalid {
                field: "reservations.tick_s",
                reason: "must be at least 1".into(),
            });
        }
        for site in &self.sites {
            let Some(timeout_s) = site.submit.as_ref().map(|s| s.timeout_s()) else {
                continue;
            };
            if self.reservations.lease_s < timeout_s.saturating_mul(3) {
                return Err(ConfigError::Invalid {
                    field: "reservations.lease_s",
                    reason: format!(
                        "{} s is shorter than a submission attempt may take at site {:?} \
                         (3 × its submit timeout_s = {} s)",
                        self.reservations.lease_s,
                        site.name,
                        timeout_s.saturating_mul(3)
                    ),
                });
            }
        }
        for origin in &self.http.cors_origins {
            if origin != "*" && !(origin.starts_with("http://") || origin.starts_with("https://")) {
                return Err(ConfigError::Invalid {
                    field: "http.cors_origins",
                    reason: format!("{origin:?} is neither \"*\" nor an http(s) origin"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_example_parses_back_to_the_defaults() {
        let parsed = Config::from_toml(EXAMPLE, "example.toml").unwrap();
        assert_eq!(parsed, Config::default());
        // And it documents every setting: serialising the defaults adds no key the
        // example lacks.
        let defaults = toml::to_string(&Config::default()).unwrap();
        for line in defaults.lines().filter(|l| l.contains(" = ")) {
            let key = line.split(" = ").next().unwrap();
            assert!(
                EXAMPLE.lines().any(|l| l.starts_with(&format!("{key} = "))),
                "example.toml lacks {key}"
            );
        }
    }

    #[test]
    fn layers_apply_in_order_defaults_file_env_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("qbets.toml");
        std::fs::write(
            &file,
            "listen = \"0.0.0.0:9000\"\ndatabase_url = \"sqlite://file.db\"\n[http]\npublic_reads = false\n",
        )
        .unwrap();
        let env: HashMap<&str, &str> = [
            ("DATABASE_URL", "postgres://u:pw@h/db"),
            ("QBETS_CORS_ORIGINS", "https://a.example, https://b.example"),
        ]
        .into();
        let get = |k: &str| env.get(k).map(|v| v.to_string());
        let c = Config::load(Some(&file), get, &Overrides::default()).unwrap();
        assert_eq!(c.listen.to_string(), "0.0.0.0:9000");
        assert_eq!(c.database_url, "postgres://u:pw@h/db");
        assert!(!c.http.public_reads);
        assert_eq!(
            c.http.cors_origins,
            vec!["https://a.example", "https://b.example"]
        );
        let flags = Overrides {
            listen: Some("127.0.0.1:1".parse().unwrap()),
            database_url: Some("sqlite://flag.db".into()),
            idle_timeout_ms: Some(1500),
            max_connections: Some(64),
            ..Default::default()
        };
        let c = Config::load(Some(&file), get, &flags).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:1");
        assert_eq!(c.database_url, "sqlite://flag.db");
        assert_eq!(c.http.idle_timeout_ms, 1500);
        assert_eq!(c.http.max_connections, 64);
        assert_eq!(c.http.header_timeout_ms, 10_000);
        // The password stays out of Debug output.
        let c = Config::load(None, get, &Overrides::default()).unwrap();
        assert!(!format!("{c:?}").contains("pw"), "{c:?}");
    }

    #[test]
    fn bad_settings_are_named() {
        let e = Config::from_toml("[http]\npublic_read = true\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("unknown field `public_read`"), "{e}");
        let e = Config::from_toml("listen = \"nowhere\"\n", "x.toml").unwrap_err();
        assert!(e.to_string().starts_with("x.toml: "), "{e}");
        let env = |k: &str| (k == "QBETS_PUBLIC_READS").then(|| "maybe".to_string());
        let e = Config::load(None, env, &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("QBETS_PUBLIC_READS"), "{e}");
        let flags = Overrides {
            database_url: Some("mysql://x".into()),
            ..Default::default()
        };
        let e = Config::load(None, no_env, &flags).unwrap_err();
        assert!(e.to_string().contains("database_url"), "{e}");
        let missing = Path::new("/nonexistent/qbets.toml");
        let e = Config::load(Some(missing), no_env, &Overrides::default()).unwrap_err();
        assert_eq!(
            format!("{:#}", anyhow::Error::from(e)),
            "/nonexistent/qbets.toml: cannot read: No such file or directory (os error 2)"
        );
        let e = Config::from_toml("[http]\ncors_origins = [\"portal\"]\n", "x")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("cors_origins"), "{e}");
        let e = Config::from_toml("[http]\nheader_timeout_ms = 0\n", "x")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("http.header_timeout_ms"), "{e}");
        // A claim must outlast a submission attempt at every site (a look-up and a
        // submission, each up to the site's submit timeout_s).
        let site = |lease_s: u64| {
            Config::from_toml(
                &format!(
                    "[reservations]\nlease_s = {lease_s}\n[[sites]]\nname = \"a\"\n\
                     [sites.source]\ntype = \"swf\"\npath = \"t.swf\"\n\
                     [sites.submit]\ntype = \"slurm_rest\"\nurl = \"http://h:6820\"\n\
                     api_version = \"v0.0.38\"\nuser = \"u\"\ntoken_file = \"/t\"\n\
                     timeout_s = 20\n"
                ),
                "x",
            )
            .unwrap()
            .validate()
        };
        site(60).unwrap();
        let e = site(59).unwrap_err();
        assert!(e.to_string().contains("reservations.lease_s"), "{e}");
        assert!(e.to_string().contains("60 s"), "{e}");
    }

    #[test]
    fn every_source_kind_reads_from_the_commented_example() {
        // The example's commented sites, uncommented, are a valid configuration.
        let uncommented: String = EXAMPLE
            .lines()
            .skip_while(|l| !l.starts_with("# [[sites]]"))
            .map(|l| l.strip_prefix("# ").unwrap_or(l))
            .map(|l| match l.split_once("  #") {
                Some((code, _)) => code.trim_end(),
                None => l,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let c = Config::from_toml(&uncommented, "example").unwrap();
        c.validate().unwrap();
        let kinds: Vec<&str> = c.sites.iter().map(|s| s.source.kind()).collect();
        assert_eq!(
            kinds,
            [
                "slurm_rest",
                "sacct",
                "slurmdb_rest",
                "pbs_accounting",
                "sge_accounting",
                "swf"
            ]
        );
        let SourceConfig::SlurmRest(s) = &c.sites[0].source else {
            panic!("{:?}", c.sites[0]);
        };
        assert_eq!(s.api_version.to_string(), "auto");
        assert_eq!(s.token_env.as_deref(), Some("SLURM_JWT"));
        let SourceConfig::Sacct(s) = &c.sites[1].source else {
            panic!("{:?}", c.sites[1]);
        };
        assert_eq!(s.command, ["sacct"]);
    }

    #[test]
    fn source_defaults_and_errors() {
        let c = Config::from_toml(
            "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"sacct\"\n\
             [[sites]]\nname = \"b\"\n[sites.source]\ntype = \"slurm_rest\"\n\
             url = \"http://h:6820\"\napi_version = \"v0.0.41\"\nuser = \"u\"\ntoken_file = \"/t\"\n",
            "x",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.sites[0].source.interval_s(), Some(60));
        assert_eq!(c.sites[1].source.interval_s(), Some(15));
        // An unknown key inside a source is named.
        let e = Config::from_toml(
            "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"sacct\"\nintervals = 3\n",
            "x",
        )
        .unwrap_err();
        assert!(e.to_string().contains("intervals"), "{e}");
        let e = Config::from_toml(
            "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"lsf\"\n",
            "x",
        )
        .unwrap_err();
        assert!(e.to_string().contains("lsf"), "{e}");
        // Rules types cannot state.
        let bad = |text: &str, field: &str| {
            let e = Config::from_toml(text, "x")
                .unwrap()
                .validate()
                .unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
        };
        bad(
            "[[sites]]\nname = \"a b\"\n[sites.source]\ntype = \"swf\"\npath = \"t.swf\"\n",
            "sites[0].name",
        );
        bad(
            "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"slurm_rest\"\nurl = \"http://h\"\n\
             api_version = \"v0.0.38\"\nuser = \"u\"\n",
            "token_env or token_file",
        );
        bad(
            "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"sacct\"\ninterval_s = 0\n",
            "sites[0].source.interval_s",
        );
        bad(
            "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"sacct\"\nwindow_s = 600\n",
            "sites[0].source.overlap_s",
        );
        // Spans past any history, which the window arithmetic could not hold.
        bad(
            "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"sacct\"\n\
             window_s = 9223372036854775808\n",
            "sites[0].source.window_s",
        );
        bad(
            "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"sacct\"\nbackfill_s = 400000000\n",
            "sites[0].source.backfill_s",
        );
        bad(
            "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"sacct\"\n\
             [[sites]]\nname = \"a\"\n[sites.source]\ntype = \"sacct\"\n",
            "configured twice",
        );
        // Through ssh, sacct runs with the remote's environment.
        let ssh = |command: &str| {
            Config::from_toml(
                &format!(
                    "[[sites]]\nname = \"a\"\n[sites.source]\ntype = \"sacct\"\ncommand = {command}\n"
                ),
                "x",
            )
            .unwrap()
            .validate()
        };
        let e = ssh(r#"["/usr/bin/ssh", "login1", "sacct"]"#).unwrap_err();
        assert!(
            e.to_string().contains("sites[0].source.command") && e.to_string().contains("TZ=UTC"),
            "{e}"
        );
        ssh(r#"["ssh", "login1", "TZ=UTC", "SLURM_TIME_FORMAT=%s", "sacct"]"#).unwrap();
    }
}
