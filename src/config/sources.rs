//! `[[sites]]`: the live sites `qbets serve` feeds from schedulers, each with one
//! `[sites.source]` whose `type` selects the scheduler interface (a `#[serde(tag =
//! "type")]` enum, one struct per kind, every field documented, defaults from
//! `const fn`s).
//!
//! May import: std, serde, and the pure types of the sources (API versions).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::sources::slurm_rest::{ApiVersionSetting, ClientConfig};

/// A live site and where its job records come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// The site's name, as used in URLs: letters, digits, `.`, `_` or `-`.
    pub name: String,
    /// Free text about the machine.
    #[serde(default)]
    pub description: String,
    /// IANA zone name of the machine, e.g. `Europe/Paris`.
    #[serde(default)]
    pub time_zone: Option<String>,
    /// Where the records come from.
    pub source: SourceConfig,
    /// Where managed reservations are submitted (`[sites.submit]`, `type =
    /// "slurm_rest"`); without it the site takes no managed reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit: Option<crate::submit::SubmitConfig>,
    /// How the scheduler's user names are stored: `"name"` (the default) or `"hmac"`,
    /// a keyed hash (HMAC-SHA256) under the secret in the environment variable
    /// `user_key_secret_env` names, so that the store names nobody. Either way no
    /// answer shows them; the engine only counts a job's own jobs pending ahead.
    #[serde(default)]
    pub user_key: UserKeyRule,
    /// The environment variable holding the secret of `user_key = "hmac"` (at least 16
    /// bytes; keep it: keys made under another secret match nobody's earlier jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_key_secret_env: Option<String>,
    /// Limits of the site's queues (`[[sites.queues]]`). A limit stated here wins over
    /// what the source learns (slurmrestd's partitions); one left out is learnt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueConfig>,
}

/// How user names are stored (see [`SiteConfig::user_key`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserKeyRule {
    /// The name itself.
    #[default]
    Name,
    /// A keyed hash of it.
    Hmac,
}

/// One `[[sites.queues]]` table: a queue's limits as the operator states them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// The queue's (partition's) name.
    pub name: String,
    /// Most nodes one job may ask for.
    #[serde(default)]
    pub max_nodes: Option<i64>,
    /// Longest walltime accepted, seconds.
    #[serde(default)]
    pub max_walltime_s: Option<i64>,
    /// Nodes the queue's jobs can reach in all (the partition's or the machine's).
    #[serde(default)]
    pub total_nodes: Option<i64>,
}

impl QueueConfig {
    /// What is wrong with the table, if anything.
    pub fn check(&self) -> Result<(), String> {
        crate::service::check_name(&self.name).map_err(|e| format!("name: {e}"))?;
        for (field, v) in [
            ("max_nodes", self.max_nodes),
            ("max_walltime_s", self.max_walltime_s),
            ("total_nodes", self.total_nodes),
        ] {
            if v.is_some_and(|v| v < 1) {
                return Err(format!("{field} must be at least 1"));
            }
        }
        Ok(())
    }
}

/// One scheduler interface, selected by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SourceConfig {
    /// Polls slurmrestd: pending, running and finished jobs.
    SlurmRest(SlurmRestSource),
    /// Runs `sacct` (locally or through ssh) by time window.
    Sacct(SacctSource),
    /// Reads slurmdbd's accounting through slurmrestd by time window (`sacct`'s
    /// records, for sites that let qbets call slurmrestd but not run `sacct`).
    SlurmdbRest(SlurmdbRestSource),
    /// Follows PBS/Torque accounting logs (one file a day).
    PbsAccounting(PbsAccountingSource),
    /// Follows the SGE `accounting` file.
    SgeAccounting(SgeAccountingSource),
    /// Imports an SWF trace file once.
    Swf(SwfSource),
}

impl SourceConfig {
    /// The kind's name, as written in `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            SourceConfig::SlurmRest(_) => "slurm_rest",
            SourceConfig::Sacct(_) => "sacct",
            SourceConfig::SlurmdbRest(_) => "slurmdb_rest",
            SourceConfig::PbsAccounting(_) => "pbs_accounting",
            SourceConfig::SgeAccounting(_) => "sge_accounting",
            SourceConfig::Swf(_) => "swf",
        }
    }

    /// Seconds between polls (`None` for a one-time import).
    pub fn interval_s(&self) -> Option<u64> {
        match self {
            SourceConfig::SlurmRest(s) => Some(s.interval_s),
            SourceConfig::Sacct(s) => Some(s.interval_s),
            SourceConfig::SlurmdbRest(s) => Some(s.interval_s),
            SourceConfig::PbsAccounting(s) => Some(s.interval_s),
            SourceConfig::SgeAccounting(s) => Some(s.interval_s),
            SourceConfig::Swf(_) => None,
        }
    }
}

/// `type = "slurm_rest"`: slurmrestd's job list, polled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmRestSource {
    /// slurmrestd's base URL, e.g. `http://127.0.0.1:6820`.
    pub url: String,
    /// The API version to speak: `auto` (the default: the newest one both qbets and the
    /// daemon speak, read from its `/openapi/v3`; the source's health says which), or
    /// `v0.0.38` (Slurm 22.05), `v0.0.40`–`v0.0.42` (23.11–24.11), `v0.0.43`–`v0.0.45`
    /// (25.05–26.05).
    #[serde(default)]
    pub api_version: ApiVersionSetting,
    /// The Slurm user the token belongs to (`X-SLURM-USER-NAME`).
    pub user: String,
    /// Name of the environment variable holding the JWT (exactly one of `token_env`
    /// and `token_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// A file holding the JWT, re-read at every request (so it can be rotated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// Seconds between polls.
    #[serde(default = "default_slurm_interval_s")]
    pub interval_s: u64,
    /// Seconds one request may take.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: u64,
}

impl SlurmRestSource {
    /// The REST client's settings.
    pub fn client(&self) -> ClientConfig {
        ClientConfig {
            url: self.url.clone(),
            api_version: self.api_version,
            user: self.user.clone(),
            token_env: self.token_env.clone(),
            token_file: self.token_file.clone(),
            timeout_s: self.timeout_s,
            connect_timeout_s: ClientConfig::default_connect_timeout_s(),
        }
    }
}

/// `type = "sacct"`: Slurm's accounting, read with `sacct --parsable2 --noheader` and a
/// fixed field list, one time window per run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SacctSource {
    /// The command and its first arguments, e.g. `["sacct"]` or, through ssh (which
    /// passes no environment), `["ssh", "login1", "TZ=UTC", "SLURM_TIME_FORMAT=%s",
    /// "sacct"]`; qbets appends its own options.
    #[serde(default = "default_sacct_command")]
    pub command: Vec<String>,
    /// Seconds between runs.
    #[serde(default = "default_sacct_interval_s")]
    pub interval_s: u64,
    /// Longest span of time one run asks for, in seconds (a long catch-up goes in
    /// several runs).
    #[serde(default = "default_sacct_window_s")]
    pub window_s: u64,
    /// Seconds each run reaches back before the previous run's end, for records that
    /// reach the accounting database late (less than `window_s`).
    #[serde(default = "default_sacct_overlap_s")]
    pub overlap_s: u64,
    /// Where the first run starts, in seconds before the service's start.
    #[serde(default = "default_sacct_backfill_s")]
    pub backfill_s: u64,
    /// Seconds one run may take.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: u64,
}

/// `type = "slurmdb_rest"`: slurmdbd's accounting through slurmrestd
/// (`GET /slurmdb/{v}/jobs`), one time window per poll as `sacct`'s source reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmdbRestSource {
    /// slurmrestd's base URL (with the `openapi/slurmdbd` plugin loaded).
    pub url: String,
    /// As for `slurm_rest`: `auto` (the default) or a version.
    #[serde(default)]
    pub api_version: ApiVersionSetting,
    /// The Slurm user the token belongs to (`X-SLURM-USER-NAME`).
    pub user: String,
    /// Name of the environment variable holding the JWT (exactly one of `token_env`
    /// and `token_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// A file holding the JWT, re-read at every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// Seconds between polls.
    #[serde(default = "default_sacct_interval_s")]
    pub interval_s: u64,
    /// Longest span of time one poll asks for, seconds.
    #[serde(default = "default_sacct_window_s")]
    pub window_s: u64,
    /// Seconds each poll reaches back before the previous one's end (less than
    /// `window_s`).
    #[serde(default = "default_sacct_overlap_s")]
    pub overlap_s: u64,
    /// Where the first poll starts, in seconds before the service's start.
    #[serde(default = "default_sacct_backfill_s")]
    pub backfill_s: u64,
    /// Seconds one request may take.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: u64,
}

impl SlurmdbRestSource {
    /// The REST client's settings.
    pub fn client(&self) -> ClientConfig {
        ClientConfig {
            url: self.url.clone(),
            api_version: self.api_version,
            user: self.user.clone(),
            token_env: self.token_env.clone(),
            token_file: self.token_file.clone(),
            timeout_s: self.timeout_s,
            connect_timeout_s: ClientConfig::default_connect_timeout_s(),
        }
    }
}

/// `type = "pbs_accounting"`: PBS/Torque accounting logs (`server_priv/accounting/`,
/// one file a day named `YYYYMMDD`), followed from where the last run stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PbsAccountingSource {
    /// The directory of daily files.
    pub dir: PathBuf,
    /// Seconds between reads.
    #[serde(default = "default_file_interval_s")]
    pub interval_s: u64,
}

/// `type = "sge_accounting"`: the SGE/OGE `accounting` file (colon-separated), followed
/// from where the last run stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SgeAccountingSource {
    /// The accounting file, e.g. `$SGE_ROOT/default/common/accounting`.
    pub path: PathBuf,
    /// Seconds between reads.
    #[serde(default = "default_file_interval_s")]
    pub interval_s: u64,
}

/// `type = "swf"`: a Standard Workload Format trace, imported once (as `qbets import`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwfSource {
    /// The trace file (`.swf` or `.swf.gz`).
    pub path: PathBuf,
}

const fn default_slurm_interval_s() -> u64 {
    15
}
const fn default_timeout_s() -> u64 {
    30
}
fn default_sacct_command() -> Vec<String> {
    vec!["sacct".to_string()]
}
const fn default_sacct_interval_s() -> u64 {
    60
}
const fn default_sacct_window_s() -> u64 {
    86_400
}
const fn default_sacct_overlap_s() -> u64 {
    600
}
const fn default_sacct_backfill_s() -> u64 {
    7 * 86_400
}
const fn default_file_interval_s() -> u64 {
    30
}

/// Checks what types alone cannot; `at` names the site in messages.
pub fn validate(sites: &[SiteConfig]) -> Result<(), (String, String)> {
    let mut names = std::collections::HashSet::new();
    for (i, site) in sites.iter().enumerate() {
        let at = |f: &str| format!("sites[{i}].{f}");
        crate::service::check_name(&site.name).map_err(|e| (at("name"), e))?;
        if !names.insert(site.name.as_str()) {
            return Err((at("name"), format!("{:?} is configured twice", site.name)));
        }
        if site.source.interval_s() == Some(0) {
            return Err((at("source.interval_s"), "must be at least 1".into()));
        }
        match &site.source {
            SourceConfig::SlurmRest(s) => check_rest(&s.client(), &at)?,
            SourceConfig::SlurmdbRest(s) => {
                check_rest(&s.client(), &at)?;
                check_windows((s.window_s, s.overlap_s, s.backfill_s), &at)?;
            }
            SourceConfig::Sacct(s) => {
                if s.command.is_empty() || s.command[0].trim().is_empty() {
                    return Err((at("source.command"), "must name a program".into()));
                }
                // ssh passes no environment: without these the remote sacct prints (and
                // reads --starttime in) its own time zone, and every time is shifted.
                let through_ssh = std::path::Path::new(&s.command[0])
                    .file_name()
                    .is_some_and(|n| n == "ssh");
                let sets = |var: &str| s.command.iter().any(|a| a == var);
                if through_ssh && !(sets("TZ=UTC") && sets("SLURM_TIME_FORMAT=%s")) {
                    return Err((
                        at("source.command"),
                        "through ssh, the remote sacct must get TZ=UTC and SLURM_TIME_FORMAT=%s \
                         (ssh passes no environment): e.g. [\"ssh\", \"login1\", \"TZ=UTC\", \
                         \"SLURM_TIME_FORMAT=%s\", \"sacct\"]"
                            .into(),
                    ));
                }
                if s.timeout_s == 0 {
                    return Err((at("source.timeout_s"), "must be at least 1".into()));
                }
                check_windows((s.window_s, s.overlap_s, s.backfill_s), &at)?;
            }
            SourceConfig::PbsAccounting(_)
            | SourceConfig::SgeAccounting(_)
            | SourceConfig::Swf(_) => {}
        }
    }
    Ok(())
}

/// The checks of a REST source's settings.
fn check_rest(c: &ClientConfig, at: &dyn Fn(&str) -> String) -> Result<(), (String, String)> {
    c.token_source()
        .map_err(|e| (at("source"), e.to_string()))?;
    if !(c.url.starts_with("http://") || c.url.starts_with("https://")) {
        return Err((
            at("source.url"),
            format!("{:?} must start with http:// or https://", c.url),
        ));
    }
    if c.timeout_s == 0 {
        return Err((at("source.timeout_s"), "must be at least 1".into()));
    }
    Ok(())
}

/// The checks of a windowed accounting source's `(window_s, overlap_s, backfill_s)`.
fn check_windows(
    (window_s, overlap_s, backfill_s): (u64, u64, u64),
    at: &dyn Fn(&str) -> String,
) -> Result<(), (String, String)> {
    // Spans of the accounting's history: ten years is more than any accounting keeps.
    const MAX_SPAN_S: u64 = 10 * 366 * 86_400;
    for (name, v) in [
        ("window_s", window_s),
        ("overlap_s", overlap_s),
        ("backfill_s", backfill_s),
    ] {
        if v > MAX_SPAN_S {
            return Err((
                at(&format!("source.{name}")),
                format!("{name} ({v}) must be at most {MAX_SPAN_S} (ten years)"),
            ));
        }
    }
    if window_s == 0 {
        return Err((at("source.window_s"), "must be at least 1".into()));
    }
    // Each run starts overlap_s before the last one's end and asks for at most
    // window_s: with overlap_s >= window_s the window never advances.
    if overlap_s >= window_s {
        return Err((
            at("source.overlap_s"),
            format!(
                "overlap_s ({overlap_s}) must be less than window_s ({window_s}), or the window never advances"
            ),
        ));
    }
    Ok(())
}
