//! Schedulers we submit to: the remote side of managed VARQ reservations (`varq.md`,
//! *Managed reservations*). A reservation's placeholder job is submitted, looked up by
//! the reservation id its name carries, polled and cancelled through a [`Submitter`].
//!
//! May import: reqwest (through [`crate::sources`]' clients), serde, std. Never sqlx or
//! axum (this and `src/sources` are the only places that talk to schedulers).

pub mod demo;
pub mod slurm_rest;

use serde::{Deserialize, Serialize};

pub use crate::plan::lifecycle::RunMode;

pub use demo::DemoScheduler;
pub use slurm_rest::{SlurmRestSubmitConfig, SlurmSubmitter};

/// A placeholder job to submit for a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRequest {
    /// The reservation's public id; the remote job's name carries it.
    pub reservation: String,
    /// The queue (partition) to submit to.
    pub queue: String,
    /// Nodes.
    pub nodes: u32,
    /// The advertised walltime, seconds.
    pub time_limit_s: u64,
    /// Unix time at which the nodes must be held.
    pub start_at: i64,
    /// The user's command (run by `/bin/sh -c`).
    pub command: String,
    /// Hold until `start_at` or run at once.
    pub mode: RunMode,
}

/// What the scheduler says of a placeholder job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteStatus {
    /// The scheduler's job id.
    pub job_id: String,
    /// The scheduler's state name (e.g. `PENDING`, `RUNNING`).
    pub state: String,
    /// When it started holding nodes, if it has.
    pub started_at: Option<i64>,
    /// When it ended, if it has.
    pub ended_at: Option<i64>,
    /// Whether it still waits in the queue.
    pub pending: bool,
}

/// Why talking to a scheduler failed.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The scheduler refused the request, or the settings are wrong: retrying will not help.
    #[error("{0}")]
    Refused(String),
    /// The scheduler could not be reached or answered badly: try again later.
    #[error("{0}")]
    Transient(String),
}

impl SubmitError {
    /// Whether a later attempt may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, SubmitError::Transient(_))
    }
}

/// The remote job name that carries a reservation's id.
pub fn job_name(reservation: &str) -> String {
    format!("qbets-{reservation}")
}

/// How to submit to one site: the `[sites.submit]` table, selected by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SubmitConfig {
    /// Slurm's REST API (slurmrestd).
    SlurmRest(SlurmRestSubmitConfig),
}

impl SubmitConfig {
    /// Seconds one request to the scheduler may take.
    pub fn timeout_s(&self) -> u64 {
        match self {
            SubmitConfig::SlurmRest(c) => c.timeout_s,
        }
    }
}

/// A site's scheduler, as the executor uses it.
#[derive(Debug, Clone)]
pub enum Submitter {
    /// slurmrestd.
    SlurmRest(SlurmSubmitter),
    /// The demo site's simulated machine (`serve --demo`).
    Demo(DemoScheduler),
}

impl Submitter {
    /// The submitter a configuration names (reads no token yet).
    pub fn from_config(config: &SubmitConfig) -> Result<Self, SubmitError> {
        match config {
            SubmitConfig::SlurmRest(c) => Ok(Submitter::SlurmRest(SlurmSubmitter::new(c)?)),
        }
    }

    /// Submits a placeholder job; its id.
    pub async fn submit(&self, req: &RemoteRequest) -> Result<String, SubmitError> {
        match self {
            Submitter::SlurmRest(s) => s.submit(req).await.map(|id| id.to_string()),
            Submitter::Demo(d) => d.submit(req),
        }
    }

    /// The jobs whose name carries the reservation's id (normally none or one).
    pub async fn find(&self, reservation: &str) -> Result<Vec<RemoteStatus>, SubmitError> {
        match self {
            Submitter::SlurmRest(s) => s.find(reservation).await,
            Submitter::Demo(d) => Ok(d.find(reservation)),
        }
    }

    /// A job's status; `None` when the scheduler no longer knows it.
    pub async fn status(&self, job_id: &str) -> Result<Option<RemoteStatus>, SubmitError> {
        match self {
            Submitter::SlurmRest(s) => s.status(parse_id(job_id)?).await,
            Submitter::Demo(d) => d.status(job_id),
        }
    }

    /// Cancels a job; a job the scheduler no longer knows is not an error.
    pub async fn cancel(&self, job_id: &str) -> Result<(), SubmitError> {
        match self {
            Submitter::SlurmRest(s) => s.cancel(parse_id(job_id)?).await,
            Submitter::Demo(d) => d.cancel(job_id),
        }
    }
}

fn parse_id(job_id: &str) -> Result<u64, SubmitError> {
    job_id
        .parse()
        .map_err(|_| SubmitError::Refused(format!("{job_id:?} is not a Slurm job id")))
}

/// Quotes `text` for a POSIX shell (single quotes).
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The batch script of a placeholder job. `hold` sleeps until `start_at` before it runs
/// the command, so the nodes are held at `start_at` whenever the job started in time.
pub fn script(req: &RemoteRequest) -> String {
    let mut s = format!(
        "#!/bin/sh\n# qbets reservation {} ({})\n",
        req.reservation,
        req.mode.as_str()
    );
    if req.mode == RunMode::Hold {
        s.push_str(&format!(
            "start_at={}\nnow=$(date +%s)\nif [ \"$now\" -lt \"$start_at\" ]; then sleep $((start_at - now)); fi\n",
            req.start_at
        ));
    }
    s.push_str(&format!("exec /bin/sh -c {}\n", shell_quote(&req.command)));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(mode: RunMode) -> RemoteRequest {
        RemoteRequest {
            reservation: "r1".into(),
            queue: "debug".into(),
            nodes: 1,
            time_limit_s: 120,
            start_at: 1_000,
            command: "echo 'hi' && hostname".into(),
            mode,
        }
    }

    #[test]
    fn hold_scripts_wait_for_start_at_and_quote_the_command() {
        let s = script(&request(RunMode::Hold));
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("start_at=1000\n"));
        assert!(
            s.ends_with("exec /bin/sh -c 'echo '\\''hi'\\'' && hostname'\n"),
            "{s}"
        );
        let b = script(&request(RunMode::BestEffort));
        assert!(!b.contains("sleep"));
    }

    #[test]
    fn a_quoted_command_reads_back_through_a_real_shell() {
        let cmd = "printf '%s' \"a b\" 'c'\\''d' $HOME";
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("printf '%s' {}", shell_quote(cmd)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), cmd);
    }

    #[test]
    fn run_modes_round_trip() {
        for m in [RunMode::Hold, RunMode::BestEffort] {
            assert_eq!(RunMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(RunMode::parse("x"), None);
    }
}
