//! The slurmrestd HTTP client: list jobs, get one job, submit, cancel, ping.
//!
//! Authentication is Slurm's JWT scheme: every request carries `X-SLURM-USER-NAME` and
//! `X-SLURM-USER-TOKEN`. The token is read from its source (an environment variable or a
//! file) at every request, so a token rotated by cron or `scontrol token` is picked up
//! without a restart; it is marked sensitive in the request and never appears in `Debug`
//! output, logs or errors.
//!
//! Every failure is typed ([`SlurmRestError`]): unreachable, timed out, credentials
//! rejected, job not found, Slurm's own error list, an unexpected HTTP status, or a body
//! that is not what slurmrestd sends. How a response is judged is the pure
//! [`check_response`], tested on the captured error responses of every API version.
//!
//! May import: reqwest, rustls, serde and the pure [`super::model`] and [`super::wire`].

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Once};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;

use super::discovery::{self, Offered};
use super::model::{
    self, Envelope, JobList, JobSubmission, ParseError, SlurmErrorEntry, SlurmJob, SubmittedJob,
};
use super::{ApiVersion, ApiVersionSetting, wire};

/// A JWT for slurmrestd. Its `Debug` output is redacted, and it has no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token, trimmed; accepts `scontrol token`'s `SLURM_JWT=...` form as is.
    pub fn new(token: impl AsRef<str>) -> Token {
        let t = token.as_ref().trim();
        Token(t.strip_prefix("SLURM_JWT=").unwrap_or(t).to_owned())
    }

    /// The token itself, for the request header.
    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Where the client gets its token, at every request.
#[derive(Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// The environment variable of this name.
    Env(String),
    /// This file (a token alone, or `SLURM_JWT=<token>`), re-read at each request.
    File(PathBuf),
    /// A token given directly.
    Fixed(Token),
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::Env(name) => write!(f, "Env({name:?})"),
            TokenSource::File(path) => write!(f, "File({path:?})"),
            TokenSource::Fixed(t) => write!(f, "Fixed({t:?})"),
        }
    }
}

impl TokenSource {
    /// The current token; the error says where it was looked for, never what it is.
    pub fn token(&self) -> Result<Token, SlurmRestError> {
        let token = match self {
            TokenSource::Env(name) => match std::env::var(name) {
                Ok(v) => Token::new(v),
                Err(std::env::VarError::NotPresent) => {
                    return Err(SlurmRestError::Token(format!(
                        "environment variable {name} is not set"
                    )));
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(SlurmRestError::Token(format!(
                        "environment variable {name} is not UTF-8"
                    )));
                }
            },
            // A token file is a few hundred bytes on local disk: reading it inline is
            // cheaper than handing it to a blocking pool.
            TokenSource::File(path) => match std::fs::read_to_string(path) {
                Ok(v) => Token::new(v),
                Err(e) => {
                    return Err(SlurmRestError::Token(format!(
                        "cannot read token file {}: {e}",
                        path.display()
                    )));
                }
            },
            TokenSource::Fixed(t) => t.clone(),
        };
        if token.0.is_empty() {
            return Err(SlurmRestError::Token(format!(
                "the token from {self:?} is empty"
            )));
        }
        Ok(token)
    }
}

/// How to reach one slurmrestd: the `[sites.source]` keys of a `slurm_rest` source.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ClientConfig {
    /// slurmrestd's base URL, e.g. `http://127.0.0.1:6820` (a path prefix, as behind a
    /// proxy, is kept).
    pub url: String,
    /// The API version to speak: `"auto"` (the default: the newest version both sides
    /// speak, from the daemon's `/openapi/v3`), or `"v0.0.38"` (Slurm 22.05),
    /// `"v0.0.40"` (23.11+), `"v0.0.41"` (24.05+), `"v0.0.42"` (24.11+), `"v0.0.43"`
    /// (25.05+), `"v0.0.44"` (25.11+) or `"v0.0.45"` (26.05+).
    #[serde(default)]
    pub api_version: ApiVersionSetting,
    /// The Slurm user the token belongs to (`X-SLURM-USER-NAME`).
    pub user: String,
    /// The environment variable that holds the JWT. Exactly one of `token_env` and
    /// `token_file` is required.
    #[serde(default)]
    pub token_env: Option<String>,
    /// A file that holds the JWT, re-read at every request (so it can be rotated).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Seconds a whole request may take, answer included.
    #[serde(default = "ClientConfig::default_timeout_s")]
    pub timeout_s: u64,
    /// Seconds to establish the connection.
    #[serde(default = "ClientConfig::default_connect_timeout_s")]
    pub connect_timeout_s: u64,
}

impl ClientConfig {
    /// Default `timeout_s`: a job list of tens of thousands of jobs takes seconds to build.
    pub const fn default_timeout_s() -> u64 {
        30
    }

    /// Default `connect_timeout_s`.
    pub const fn default_connect_timeout_s() -> u64 {
        5
    }

    /// The token source these settings name.
    pub fn token_source(&self) -> Result<TokenSource, SlurmRestError> {
        match (&self.token_env, &self.token_file) {
            (Some(env), None) => Ok(TokenSource::Env(env.clone())),
            (None, Some(file)) => Ok(TokenSource::File(file.clone())),
            (Some(_), Some(_)) => Err(SlurmRestError::Config(
                "set token_env or token_file, not both".into(),
            )),
            (None, None) => Err(SlurmRestError::Config(
                "token_env or token_file is required".into(),
            )),
        }
    }
}

/// What went wrong talking to slurmrestd.
#[derive(Debug, thiserror::Error)]
pub enum SlurmRestError {
    /// The client settings are unusable.
    #[error("slurm_rest configuration: {0}")]
    Config(String),
    /// No token could be read.
    #[error("slurm_rest token: {0}")]
    Token(String),
    /// A job submission Slurm would refuse, caught before sending.
    #[error("invalid job submission: {0}")]
    InvalidSubmission(String),
    /// No connection (refused, DNS, TLS, reset).
    #[error("slurmrestd at {url} is unreachable: {reason}")]
    Unreachable {
        /// The base URL.
        url: String,
        /// What failed, from the HTTP stack.
        reason: String,
    },
    /// `api_version = "auto"`, and the daemon offers no version this client speaks.
    #[error(
        "slurmrestd at {url} offers API versions {offered:?}, none of which qbets speaks \
         (it speaks v0.0.38 and v0.0.40-v0.0.45): set api_version to one both speak"
    )]
    NoCommonVersion {
        /// The base URL.
        url: String,
        /// What the daemon's OpenAPI document offers.
        offered: Vec<String>,
    },
    /// Connected or not, no complete answer in time.
    #[error("slurmrestd at {url} did not answer {what} within {timeout:?}")]
    Timeout {
        /// The base URL.
        url: String,
        /// The request, e.g. `GET /slurm/v0.0.38/jobs`.
        what: String,
        /// The configured limit.
        timeout: Duration,
    },
    /// slurmrestd or slurmctld rejected the user name or token (expired, wrong key,
    /// wrong user). Slurm 22.05 reports a bad token only as an unspecified error, which
    /// arrives as [`SlurmRestError::Slurm`].
    #[error(
        "slurmrestd rejected the credentials of user {user:?} for {what} (HTTP {status}): {detail}"
    )]
    AuthRejected {
        /// The user the request named.
        user: String,
        /// The request.
        what: String,
        /// The HTTP status.
        status: u16,
        /// What slurmrestd said.
        detail: String,
    },
    /// Slurm does not know the job (no longer, or never).
    #[error("Slurm knows no job {job_id}")]
    JobNotFound {
        /// The job asked for.
        job_id: u64,
    },
    /// Slurm answered with its error list.
    #[error("Slurm refused {what} (HTTP {status}): {}", join(errors))]
    Slurm {
        /// The request.
        what: String,
        /// The HTTP status.
        status: u16,
        /// Slurm's errors, in its order.
        errors: Vec<SlurmErrorEntry>,
    },
    /// An HTTP status with no Slurm error list to explain it.
    #[error("slurmrestd answered {what} with HTTP {status}{hint}: {snippet:?}")]
    HttpStatus {
        /// The request.
        what: String,
        /// The HTTP status.
        status: u16,
        /// A likely cause, when there is one.
        hint: &'static str,
        /// The start of the body.
        snippet: String,
    },
    /// A body that is not what slurmrestd sends for this request.
    #[error("unparsable answer to {what}: {cause}")]
    Unparsable {
        /// The request.
        what: String,
        /// What was wrong with the body (in the message, so not also a `source`).
        cause: ParseError,
    },
}

fn join(errors: &[SlurmErrorEntry]) -> String {
    let v: Vec<String> = errors.iter().map(ToString::to_string).collect();
    v.join("; ")
}

impl SlurmRestError {
    /// True when retrying later may succeed (the remote is down, slow, or overloaded);
    /// false when the request or the credentials must change first.
    pub fn is_transient(&self) -> bool {
        match self {
            SlurmRestError::Unreachable { .. } | SlurmRestError::Timeout { .. } => true,
            SlurmRestError::HttpStatus { status, .. } => *status >= 500 || *status == 429,
            // slurmctld down or busy behind a live slurmrestd: Slurm's communication
            // errors (SLURM_UNEXPECTED_MSG_ERROR .. SLURM_COMMUNICATIONS_SHUTDOWN_ERROR,
            // and SLURMCTLD_COMMUNICATIONS_*: 24.11 answers 1800 "Unable to contact slurm
            // controller"). Slurm 22.05 answers a down slurmctld, and a rejected token,
            // with a bare -1; retrying is the safe reading of that.
            SlurmRestError::Slurm { errors, .. } => errors
                .iter()
                .any(|e| matches!(e.number, Some(-1 | 1000..=1004 | 1800..=1804))),
            _ => false,
        }
    }
}

/// Judges a response: the HTTP status, the error list, and the known ways slurmrestd
/// says "who are you" (401/403 from slurmrestd itself; 511 or Slurm error 1007 when
/// slurmctld rejected the token) and "no such job" (Slurm error 2017, as HTTP 404 from
/// v0.0.40 on and HTTP 500 in v0.0.38). `job_id` is the job the request was about.
pub fn check_response(
    what: &str,
    user: &str,
    status: u16,
    body: &[u8],
    job_id: Option<u64>,
) -> Result<Envelope, SlurmRestError> {
    let envelope = model::parse_envelope(body);
    let ok_status = (200..300).contains(&status);
    let auth = |detail: String| SlurmRestError::AuthRejected {
        user: user.to_owned(),
        what: what.to_owned(),
        status,
        detail,
    };
    let envelope = match envelope {
        Ok(e) => e,
        Err(_) if matches!(status, 401 | 403 | 511) => return Err(auth(model::snippet(body))),
        Err(cause) if ok_status => {
            return Err(SlurmRestError::Unparsable {
                what: what.to_owned(),
                cause,
            });
        }
        Err(_) => return Err(http_status(what, status, body)),
    };
    let has = |n: i64| envelope.errors.iter().any(|e| e.number == Some(n));
    if matches!(status, 401 | 403 | 511) || has(SlurmErrorEntry::AUTHENTICATION) {
        let detail = if envelope.errors.is_empty() {
            model::snippet(body)
        } else {
            join(&envelope.errors)
        };
        return Err(auth(detail));
    }
    if let Some(job_id) = job_id.filter(|_| has(SlurmErrorEntry::INVALID_JOB_ID)) {
        return Err(SlurmRestError::JobNotFound { job_id });
    }
    if !envelope.errors.is_empty() {
        return Err(SlurmRestError::Slurm {
            what: what.to_owned(),
            status,
            errors: envelope.errors,
        });
    }
    if !ok_status {
        return Err(http_status(what, status, body));
    }
    Ok(envelope)
}

fn http_status(what: &str, status: u16, body: &[u8]) -> SlurmRestError {
    SlurmRestError::HttpStatus {
        what: what.to_owned(),
        status,
        hint: if status == 404 {
            " (does this slurmrestd serve that API version?)"
        } else {
            ""
        },
        snippet: model::snippet(body),
    }
}

/// An async slurmrestd client for one cluster. Cheap to clone (the connection pool is
/// shared).
#[derive(Clone)]
pub struct SlurmRestClient {
    http: reqwest::Client,
    base: String,
    setting: ApiVersionSetting,
    /// The version spoken, once known (at once when fixed; after the first request's
    /// look at `/openapi/v3` for `auto`), shared by the clones.
    version: Arc<tokio::sync::OnceCell<Negotiated>>,
    user: String,
    token: TokenSource,
    timeout: Duration,
}

impl fmt::Debug for SlurmRestClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlurmRestClient")
            .field("url", &self.base)
            .field("api_version", &self.setting)
            .field("user", &self.user)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// rustls needs one process-wide crypto provider; ring is the one built in (no C/cmake
/// toolchain for aws-lc, no OpenSSL).
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another part of the process installed one first: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl SlurmRestClient {
    /// A client from configuration (checks the settings; reads no token yet).
    pub fn new(config: &ClientConfig) -> Result<SlurmRestClient, SlurmRestError> {
        SlurmRestClient::with_token(
            &config.url,
            config.api_version,
            &config.user,
            config.token_source()?,
            Duration::from_secs(config.timeout_s),
            Duration::from_secs(config.connect_timeout_s),
        )
    }

    /// A client from parts.
    pub fn with_token(
        url: &str,
        version: impl Into<ApiVersionSetting>,
        user: &str,
        token: TokenSource,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<SlurmRestClient, SlurmRestError> {
        let base = url.trim().trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(SlurmRestError::Config(format!(
                "url {url:?} must start with http:// or https://"
            )));
        }
        if user.trim().is_empty() {
            return Err(SlurmRestError::Config("user must not be empty".into()));
        }
        if timeout.is_zero() || connect_timeout.is_zero() {
            return Err(SlurmRestError::Config("timeouts must be positive".into()));
        }
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(connect_timeout)
            .user_agent(concat!("qbets/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SlurmRestError::Config(format!("HTTP client: {}", chain(&e))))?;
        let setting = version.into();
        let version = Arc::new(match setting.fixed() {
            Some(v) => tokio::sync::OnceCell::new_with(Some(Negotiated {
                version: v,
                offered: None,
            })),
            None => tokio::sync::OnceCell::new(),
        });
        Ok(SlurmRestClient {
            http,
            base,
            setting,
            version,
            user: user.to_owned(),
            token: token.clone(),
            timeout,
        })
    }

    /// The API version as configured (`auto` or one version).
    pub fn api_version_setting(&self) -> ApiVersionSetting {
        self.setting
    }

    /// The API version this client speaks, once known: at once when configured, after
    /// the first request (or [`SlurmRestClient::negotiate`]) for `auto`.
    pub fn api_version(&self) -> Option<ApiVersion> {
        self.version.get().map(|n| n.version)
    }

    /// The version spoken and how it was chosen, in a line for a source's health, e.g.
    /// `slurmrestd API v0.0.45 (auto, from v0.0.42 v0.0.43 v0.0.44 v0.0.45 offered by
    /// Slurm 26.05.5)`; `None` while `auto` has not asked the daemon yet.
    pub fn version_note(&self) -> Option<String> {
        let n = self.version.get()?;
        Some(match &n.offered {
            None => format!("slurmrestd API {} (configured)", n.version),
            Some(o) => format!(
                "slurmrestd API {} (auto, from {} offered by Slurm {})",
                n.version,
                o.slurm.join(" "),
                o.release.as_deref().unwrap_or("of unknown release"),
            ),
        })
    }

    /// The version to speak: the configured one, or for `auto` the newest one the
    /// daemon's `GET /openapi/v3` offers that this client speaks (asked once; a failed
    /// look is asked again at the next request).
    pub async fn negotiate(&self) -> Result<ApiVersion, SlurmRestError> {
        self.version
            .get_or_try_init(|| async {
                let path = "/openapi/v3";
                let what = format!("GET {path}");
                let (status, body) = self.send(reqwest::Method::GET, path, None).await?;
                if !(200..300).contains(&status) {
                    // The document has no Slurm error list; judge the status alone.
                    check_response(&what, &self.user, status, &body, None)?;
                    return Err(http_status(&what, status, &body));
                }
                let offered = parsed(&what, discovery::parse_openapi(&body))?;
                let version =
                    offered
                        .newest_known()
                        .ok_or_else(|| SlurmRestError::NoCommonVersion {
                            url: self.base.clone(),
                            offered: offered.slurm.clone(),
                        })?;
                Ok(Negotiated {
                    version,
                    offered: Some(offered),
                })
            })
            .await
            .map(|n| n.version)
    }

    /// The path of an endpoint, e.g. `/slurm/v0.0.41/jobs`, and the version it speaks.
    async fn path(&self, rest: &str) -> Result<(String, ApiVersion), SlurmRestError> {
        let v = self.negotiate().await?;
        Ok((format!("/slurm/{v}/{rest}"), v))
    }

    /// Sends one request; returns the HTTP status and the body.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<(u16, Vec<u8>), SlurmRestError> {
        let what = format!("{method} {path}");
        let token = self.token.token()?;
        let mut headers = HeaderMap::new();
        let user = HeaderValue::from_str(&self.user).map_err(|_| {
            SlurmRestError::Config(format!("user {:?} cannot be sent in a header", self.user))
        })?;
        let mut secret = HeaderValue::from_str(token.expose()).map_err(|_| {
            SlurmRestError::Token("the token has characters a header cannot carry".into())
        })?;
        secret.set_sensitive(true);
        headers.insert("X-SLURM-USER-NAME", user);
        headers.insert("X-SLURM-USER-TOKEN", secret);
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .headers(headers);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let transport = |e: reqwest::Error| {
            if e.is_timeout() {
                SlurmRestError::Timeout {
                    url: self.base.clone(),
                    what: what.clone(),
                    timeout: self.timeout,
                }
            } else {
                SlurmRestError::Unreachable {
                    url: self.base.clone(),
                    reason: chain(&e),
                }
            }
        };
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(transport)?;
        Ok((status, bytes.to_vec()))
    }

    /// `GET /slurm/{v}/ping`: slurmrestd is up, the token is accepted, slurmctld answers.
    pub async fn ping(&self) -> Result<(), SlurmRestError> {
        let (path, _) = self.path("ping").await?;
        let (status, body) = self.send(reqwest::Method::GET, &path, None).await?;
        check_response(&format!("GET {path}"), &self.user, status, &body, None).map(drop)
    }

    /// Every job slurmctld still holds: pending, running, and finished within its
    /// `MinJobAge`. Jobs that do not read are in [`JobList::rejected`], with the reason.
    pub async fn list_jobs(&self) -> Result<JobList, SlurmRestError> {
        let (path, _) = self.path("jobs").await?;
        let (status, body) = self.send(reqwest::Method::GET, &path, None).await?;
        interpret_jobs(&format!("GET {path}"), &self.user, status, &body)
    }

    /// One job; `None` when Slurm does not know it (never did, or forgot it after
    /// `MinJobAge`).
    pub async fn job(&self, job_id: u64) -> Result<Option<SlurmJob>, SlurmRestError> {
        let (path, _) = self.path(&format!("job/{job_id}")).await?;
        let (status, body) = self.send(reqwest::Method::GET, &path, None).await?;
        interpret_job(&format!("GET {path}"), &self.user, status, &body, job_id)
    }

    /// The accounting's jobs of the window `[from, to]` (Unix seconds), as slurmdbd
    /// keeps them (`GET /slurmdb/{v}/jobs?start_time=…&end_time=…`, the `sacct`
    /// selection: jobs eligible or running at some instant of the window): the raw
    /// answer, for [`crate::sources::slurmdb_rest::read_jobs`]. A window without jobs is
    /// an empty list (Slurm 22.05 reports it as error 9003).
    pub async fn accounting_jobs(&self, from: i64, to: i64) -> Result<Vec<u8>, SlurmRestError> {
        let v = self.negotiate().await?;
        let (from, to) = (accounting_time(v, from), accounting_time(v, to));
        let path = format!("/slurmdb/{v}/jobs?start_time={from}&end_time={to}");
        let (status, body) = self.send(reqwest::Method::GET, &path, None).await?;
        let what = format!("GET {path}");
        match check_response(&what, &self.user, status, &body, None) {
            Ok(_) => Ok(body),
            Err(SlurmRestError::Slurm { errors, .. })
                if !errors.is_empty()
                    && errors
                        .iter()
                        .all(|e| e.number == Some(SlurmErrorEntry::NOTHING_FOUND)) =>
            {
                Ok(br#"{"jobs":[]}"#.to_vec())
            }
            Err(e) => Err(e),
        }
    }

    /// Every partition's limits (`GET /slurm/{v}/partitions`).
    pub async fn partitions(
        &self,
    ) -> Result<Vec<super::partitions::PartitionLimits>, SlurmRestError> {
        let (path, _) = self.path("partitions").await?;
        let (status, body) = self.send(reqwest::Method::GET, &path, None).await?;
        let what = format!("GET {path}");
        check_response(&what, &self.user, status, &body, None)?;
        parsed(&what, super::partitions::parse_partitions(&body))
    }

    /// Submits a batch job; answers with its id.
    pub async fn submit(&self, job: &JobSubmission) -> Result<SubmittedJob, SlurmRestError> {
        job.validate().map_err(SlurmRestError::InvalidSubmission)?;
        let (path, version) = self.path("job/submit").await?;
        let request = wire::submit_body(version, job);
        let (status, body) = self
            .send(reqwest::Method::POST, &path, Some(request))
            .await?;
        interpret_submit(&format!("POST {path}"), &self.user, status, &body)
    }

    /// Cancels a job (pending or running). v0.0.38 and v0.0.42 report an unknown job as
    /// [`SlurmRestError::JobNotFound`]; v0.0.40 and v0.0.41 answer success for any job
    /// id, so a caller that must know looks the job up afterwards.
    pub async fn cancel(&self, job_id: u64) -> Result<(), SlurmRestError> {
        let (path, _) = self.path(&format!("job/{job_id}")).await?;
        let (status, body) = self.send(reqwest::Method::DELETE, &path, None).await?;
        interpret_cancel(&format!("DELETE {path}"), &self.user, status, &body, job_id)
    }
}

/// The version a client speaks and, for `auto`, what the daemon offered.
#[derive(Debug, Clone)]
struct Negotiated {
    version: ApiVersion,
    offered: Option<Offered>,
}

/// A window's end as slurmdbd's query takes it: Unix seconds from v0.0.40 on (free of
/// time zones); v0.0.38 (Slurm 22.05) takes only a calendar time, read in the daemon's
/// time zone — written here in UTC, as `sacct` is run (`TZ=UTC`), colons escaped.
fn accounting_time(v: ApiVersion, unix: i64) -> String {
    if v > ApiVersion::V0_0_38 {
        return unix.to_string();
    }
    crate::sources::sacct::iso(unix).replace(':', "%3A")
}

fn parsed<T>(what: &str, r: Result<T, ParseError>) -> Result<T, SlurmRestError> {
    r.map_err(|cause| SlurmRestError::Unparsable {
        what: what.to_owned(),
        cause,
    })
}

/// The outcome of `GET .../jobs` with this status and body.
pub fn interpret_jobs(
    what: &str,
    user: &str,
    status: u16,
    body: &[u8],
) -> Result<JobList, SlurmRestError> {
    check_response(what, user, status, body, None)?;
    parsed(what, model::parse_job_list(body))
}

/// The outcome of `GET .../job/{job_id}` with this status and body: the job, or `None`
/// when Slurm does not know it. A job record that does not read is an error here, as
/// the caller asked for exactly that job.
pub fn interpret_job(
    what: &str,
    user: &str,
    status: u16,
    body: &[u8],
    job_id: u64,
) -> Result<Option<SlurmJob>, SlurmRestError> {
    match check_response(what, user, status, body, Some(job_id)) {
        Err(SlurmRestError::JobNotFound { .. }) => return Ok(None),
        other => other?,
    };
    let list = parsed(what, model::parse_job_list(body))?;
    if let Some(bad) = list.rejected.iter().find(|r| r.job_id == Some(job_id)) {
        let cause = ParseError {
            reason: format!("job {job_id}: {}", bad.reason),
            snippet: model::snippet(bad.raw.as_bytes()),
        };
        return Err(SlurmRestError::Unparsable {
            what: what.to_owned(),
            cause,
        });
    }
    Ok(list.jobs.into_iter().find(|j| j.job_id == job_id))
}

/// The outcome of `POST .../job/submit` with this status and body.
pub fn interpret_submit(
    what: &str,
    user: &str,
    status: u16,
    body: &[u8],
) -> Result<SubmittedJob, SlurmRestError> {
    check_response(what, user, status, body, None)?;
    parsed(what, model::parse_submit(body))
}

/// The outcome of `DELETE .../job/{job_id}` with this status and body.
pub fn interpret_cancel(
    what: &str,
    user: &str,
    status: u16,
    body: &[u8],
    job_id: u64,
) -> Result<(), SlurmRestError> {
    check_response(what, user, status, body, Some(job_id))?;
    let errors = parsed(what, model::parse_cancel(body))?;
    if errors
        .iter()
        .any(|e| e.number == Some(SlurmErrorEntry::INVALID_JOB_ID))
    {
        return Err(SlurmRestError::JobNotFound { job_id });
    }
    if !errors.is_empty() {
        return Err(SlurmRestError::Slurm {
            what: what.to_owned(),
            status,
            errors,
        });
    }
    Ok(())
}

/// An error and its causes on one line (reqwest's own message is only the outer layer).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.sig";

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let t = Token::new(format!("SLURM_JWT={SECRET}\n"));
        assert_eq!(t.expose(), SECRET);
        let src = TokenSource::Fixed(t);
        let client = SlurmRestClient::with_token(
            "http://127.0.0.1:6820/",
            ApiVersion::V0_0_38,
            "root",
            src.clone(),
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
        .unwrap();
        for text in [format!("{src:?}"), format!("{client:?}")] {
            assert!(
                !text.contains(SECRET) && !text.contains("c2VjcmV0"),
                "{text}"
            );
            assert!(text.contains("<redacted>"), "{text}");
        }
        assert!(
            format!("{client:?}").contains("http://127.0.0.1:6820\""),
            "trailing slash trimmed"
        );
    }

    #[test]
    fn a_missing_token_says_where_it_was_looked_for() {
        let e = TokenSource::Env("QBETS_TEST_NO_SUCH_TOKEN_VAR".into())
            .token()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "slurm_rest token: environment variable QBETS_TEST_NO_SUCH_TOKEN_VAR is not set"
        );
        let e = TokenSource::File("/nonexistent/qbets.jwt".into())
            .token()
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("slurm_rest token: cannot read token file /nonexistent/qbets.jwt"),
            "{e}"
        );
        let e = TokenSource::Fixed(Token::new("  ")).token().unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
    }

    #[test]
    fn a_token_file_is_reread_at_every_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwt");
        std::fs::write(&path, "first\n").unwrap();
        let src = TokenSource::File(path.clone());
        assert_eq!(src.token().unwrap(), Token::new("first"));
        std::fs::write(&path, "SLURM_JWT=second").unwrap();
        assert_eq!(src.token().unwrap(), Token::new("second"));
    }

    #[test]
    fn configuration_is_read_from_toml_shaped_data_and_checked() {
        let c: ClientConfig = serde_json::from_value(serde_json::json!({
            "url": "http://127.0.0.1:6820", "api_version": "v0.0.41", "user": "qbets",
            "token_env": "SLURM_JWT"
        }))
        .unwrap();
        assert_eq!(c.api_version, ApiVersion::V0_0_41.into());
        assert_eq!((c.timeout_s, c.connect_timeout_s), (30, 5));
        assert_eq!(
            c.token_source().unwrap(),
            TokenSource::Env("SLURM_JWT".into())
        );
        let e = serde_json::from_value::<ClientConfig>(serde_json::json!({
            "url": "http://x", "api_version": "v0.0.37", "user": "u", "token_env": "T"
        }))
        .unwrap_err();
        assert!(
            e.to_string().contains("unsupported slurmrestd API version"),
            "{e}"
        );
        let both = ClientConfig {
            token_file: Some("/t".into()),
            ..c.clone()
        };
        assert!(
            matches!(SlurmRestClient::new(&both), Err(SlurmRestError::Config(m)) if m.contains("not both"))
        );
        let none = ClientConfig {
            token_env: None,
            ..c.clone()
        };
        assert!(
            matches!(SlurmRestClient::new(&none), Err(SlurmRestError::Config(m)) if m.contains("required"))
        );
        let bad_url = ClientConfig {
            url: "127.0.0.1:6820".into(),
            ..c
        };
        assert!(
            matches!(SlurmRestClient::new(&bad_url), Err(SlurmRestError::Config(m)) if m.contains("http://"))
        );
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_and_transient() {
        // Bind then drop a listener: the port is free and nothing answers on it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = SlurmRestClient::with_token(
            &format!("http://127.0.0.1:{port}"),
            ApiVersion::V0_0_41,
            "root",
            TokenSource::Fixed(Token::new(SECRET)),
            Duration::from_secs(5),
            Duration::from_secs(2),
        )
        .unwrap();
        let e = client.list_jobs().await.unwrap_err();
        assert!(matches!(e, SlurmRestError::Unreachable { .. }), "{e:?}");
        assert!(e.is_transient());
        assert!(!e.to_string().contains(SECRET));
    }

    #[tokio::test]
    async fn a_server_that_never_answers_is_a_timeout() {
        // A listener that accepts (the kernel does, from the backlog) but never replies.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = SlurmRestClient::with_token(
            &format!("http://127.0.0.1:{port}"),
            ApiVersion::V0_0_38,
            "root",
            TokenSource::Fixed(Token::new(SECRET)),
            Duration::from_millis(300),
            Duration::from_secs(2),
        )
        .unwrap();
        let e = client.ping().await.unwrap_err();
        assert!(
            matches!(&e, SlurmRestError::Timeout { what, .. } if what == "GET /slurm/v0.0.38/ping"),
            "{e:?}"
        );
        assert!(e.is_transient());
        drop(listener);
    }
}
