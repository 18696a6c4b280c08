//! Submitting reservations' placeholder jobs through slurmrestd, with the client of
//! [`crate::sources::slurm_rest`]: submit (immediately eligible, no `--begin`), find by
//! reservation id (the job name), status and cancel.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{RemoteRequest, RemoteStatus, SubmitError, job_name, script};
use crate::sources::slurm_rest::{
    ApiVersionSetting, ClientConfig, JobSubmission, SlurmJob, SlurmRestClient, SlurmRestError,
};

/// The `[sites.submit]` keys of `type = "slurm_rest"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmRestSubmitConfig {
    /// slurmrestd's base URL, e.g. `http://127.0.0.1:6820`.
    pub url: String,
    /// The API version to speak: `auto` (the default: the newest one both qbets and the
    /// daemon speak, from its `/openapi/v3`), or `v0.0.38`, `v0.0.40`–`v0.0.45`.
    #[serde(default)]
    pub api_version: ApiVersionSetting,
    /// The Slurm user jobs are submitted as (`X-SLURM-USER-NAME`).
    pub user: String,
    /// The environment variable that holds the JWT (or use `token_file`).
    #[serde(default)]
    pub token_env: Option<String>,
    /// A file that holds the JWT, re-read at every request.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Seconds a request may take.
    #[serde(default = "SlurmRestSubmitConfig::default_timeout_s")]
    pub timeout_s: u64,
    /// The jobs' working directory on the compute node.
    #[serde(default = "SlurmRestSubmitConfig::default_working_dir")]
    pub working_dir: String,
    /// CPUs per task of the placeholder job, when not Slurm's default.
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
}

impl SlurmRestSubmitConfig {
    /// Default `timeout_s`.
    pub const fn default_timeout_s() -> u64 {
        20
    }
    /// Default `working_dir`.
    pub fn default_working_dir() -> String {
        "/tmp".into()
    }
}

/// Submits to one slurmrestd. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SlurmSubmitter {
    client: SlurmRestClient,
    working_dir: String,
    cpus_per_task: Option<u32>,
}

fn classify(e: SlurmRestError) -> SubmitError {
    if e.is_transient() {
        SubmitError::Transient(e.to_string())
    } else {
        SubmitError::Refused(e.to_string())
    }
}

impl SlurmSubmitter {
    /// A submitter from configuration (reads no token yet).
    pub fn new(c: &SlurmRestSubmitConfig) -> Result<Self, SubmitError> {
        let client = SlurmRestClient::new(&ClientConfig {
            url: c.url.clone(),
            api_version: c.api_version,
            user: c.user.clone(),
            token_env: c.token_env.clone(),
            token_file: c.token_file.clone(),
            timeout_s: c.timeout_s,
            connect_timeout_s: ClientConfig::default_connect_timeout_s(),
        })
        .map_err(|e| SubmitError::Refused(e.to_string()))?;
        Ok(Self {
            client,
            working_dir: c.working_dir.clone(),
            cpus_per_task: c.cpus_per_task,
        })
    }

    /// The job Slurm is asked for.
    pub fn submission(&self, req: &RemoteRequest) -> JobSubmission {
        JobSubmission {
            name: job_name(&req.reservation),
            partition: Some(req.queue.clone()),
            nodes: req.nodes,
            time_limit_s: req.time_limit_s,
            script: script(req),
            working_dir: self.working_dir.clone(),
            environment: vec![("QBETS_RESERVATION".into(), req.reservation.clone())],
            cpus_per_task: self.cpus_per_task,
        }
    }

    /// Submits the placeholder job; Slurm's job id.
    pub async fn submit(&self, req: &RemoteRequest) -> Result<u64, SubmitError> {
        self.client
            .submit(&self.submission(req))
            .await
            .map(|s| s.job_id)
            .map_err(classify)
    }

    /// Every job Slurm holds whose name carries the reservation's id.
    pub async fn find(&self, reservation: &str) -> Result<Vec<RemoteStatus>, SubmitError> {
        let name = job_name(reservation);
        let list = self.client.list_jobs().await.map_err(classify)?;
        Ok(list
            .jobs
            .iter()
            .filter(|j| j.name == name)
            .map(status_of)
            .collect())
    }

    /// One job's status; `None` when Slurm no longer knows it.
    pub async fn status(&self, job_id: u64) -> Result<Option<RemoteStatus>, SubmitError> {
        Ok(self
            .client
            .job(job_id)
            .await
            .map_err(classify)?
            .as_ref()
            .map(status_of))
    }

    /// Cancels a job; one Slurm no longer knows is already gone.
    pub async fn cancel(&self, job_id: u64) -> Result<(), SubmitError> {
        match self.client.cancel(job_id).await {
            Ok(()) | Err(SlurmRestError::JobNotFound { .. }) => Ok(()),
            Err(e) => Err(classify(e)),
        }
    }
}

/// What a Slurm job record says about holding nodes. A job cancelled while pending
/// carries a start time in some Slurm versions but never held nodes: only a job that was
/// given nodes counts as started.
pub fn status_of(j: &SlurmJob) -> RemoteStatus {
    let pending = j.state.is_pending();
    let held = !pending && j.nodes.as_deref().is_some_and(|n| !n.is_empty());
    let finished = !pending && !j.state.is_active();
    RemoteStatus {
        job_id: j.job_id.to_string(),
        state: j.state.as_str().to_string(),
        started_at: if held { j.start_time } else { None },
        ended_at: if finished {
            j.end_time.or(j.start_time)
        } else {
            None
        },
        pending,
    }
}
