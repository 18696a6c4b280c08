//! The job records slurmrestd reports, read into one type whatever the API version, and
//! the pure parsers of its responses.
//!
//! Times are Unix seconds. A time is `Some` only when it has happened: Slurm also puts
//! expectations in the same fields (a pending job's `start_time` is the backfill
//! scheduler's estimate; a running job's `end_time` is start + time limit), and a job
//! cancelled while pending carries `start_time == end_time ==` the cancel time although it
//! never ran. Those are kept apart here ([`SlurmJob::expected_start_time`]) or dropped,
//! so that `start_time - submit_time` is always a real queue wait.
//!
//! May import: serde, serde_json, std, and [`super::wire`]. Pure: no I/O, no clock.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::wire::{
    RawCancelResponse, RawEnvelope, RawJob, RawJobsResponse, RawMeta, RawNumber, RawState,
    RawSubmitResponse, RawWarning,
};

/// A job as slurmrestd reports it, in any supported API version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmJob {
    /// Slurm's job id.
    pub job_id: u64,
    /// The job name (`--job-name`); a reservation's jobs carry its id here.
    pub name: String,
    /// The partition (queue) the job is in.
    pub partition: String,
    /// The user who owns the job: the name, or the numeric uid when Slurm has no name.
    pub user: String,
    /// The job's base state.
    pub state: JobState,
    /// State flags besides the base state (`COMPLETING`, `REQUEUED`, `CONFIGURING`, ...),
    /// as Slurm names them.
    pub state_flags: Vec<String>,
    /// Why a job is pending or how it ended (`Priority`, `Resources`, `TimeLimit`, ...);
    /// `None` when Slurm says `None`.
    pub state_reason: Option<String>,
    /// When the job was submitted.
    pub submit_time: Option<i64>,
    /// When the job became eligible to run (after holds, dependencies, begin times).
    pub eligible_time: Option<i64>,
    /// When the job started running; `None` until it has.
    pub start_time: Option<i64>,
    /// When the job ended; `None` until it has.
    pub end_time: Option<i64>,
    /// For a pending job, when the backfill scheduler expects it to start, if it has said.
    pub expected_start_time: Option<i64>,
    /// The requested time limit in seconds; `None` when unlimited or not set.
    pub time_limit_s: Option<u64>,
    /// Nodes requested (pending) or allocated (started).
    pub node_count: Option<u32>,
    /// CPUs requested or allocated.
    pub cpus: Option<u32>,
    /// The allocated node list (`node[01-04]`); `None` when the job holds no allocation
    /// and never did.
    pub nodes: Option<String>,
}

impl SlurmJob {
    /// Seconds the job waited in the queue, once it has started.
    pub fn wait_s(&self) -> Option<i64> {
        Some(self.start_time? - self.submit_time?)
    }
}

/// Slurm's base job states. Names a newer Slurm adds land in [`JobState::Other`] instead
/// of failing the record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum JobState {
    /// Waiting in the queue (also while held or being requeued).
    Pending,
    /// Holding its nodes and running (also while configuring or resizing).
    Running,
    /// Holding its nodes, suspended.
    Suspended,
    /// Finished; epilogs still running. Only v0.0.38 reports this without the final
    /// state.
    Completing,
    /// Ended with exit code 0.
    Completed,
    /// Cancelled by a user or an administrator (before or after it started).
    Cancelled,
    /// Ended with a non-zero exit code or another failure.
    Failed,
    /// Killed at its time limit.
    Timeout,
    /// Ended by a node failure.
    NodeFail,
    /// Ended by preemption.
    Preempted,
    /// Its nodes failed to boot.
    BootFail,
    /// Ended at its deadline.
    Deadline,
    /// Ended by running out of memory.
    OutOfMemory,
    /// A state name this model does not know.
    Other(String),
}

impl JobState {
    /// The state's name as Slurm writes it.
    pub fn as_str(&self) -> &str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completing => "COMPLETING",
            JobState::Completed => "COMPLETED",
            JobState::Cancelled => "CANCELLED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Deadline => "DEADLINE",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Other(s) => s,
        }
    }

    /// The base state named `s`, if it is one (flags such as `COMPLETING` are not).
    fn base(s: &str) -> Option<JobState> {
        Some(match s {
            "PENDING" => JobState::Pending,
            "RUNNING" => JobState::Running,
            "SUSPENDED" => JobState::Suspended,
            "COMPLETED" => JobState::Completed,
            "CANCELLED" => JobState::Cancelled,
            "FAILED" => JobState::Failed,
            "TIMEOUT" => JobState::Timeout,
            "NODE_FAIL" => JobState::NodeFail,
            "PREEMPTED" => JobState::Preempted,
            "BOOT_FAIL" => JobState::BootFail,
            "DEADLINE" => JobState::Deadline,
            "OUT_OF_MEMORY" => JobState::OutOfMemory,
            _ => return None,
        })
    }

    /// What a lone flag name means when no base state comes with it: v0.0.38 reports the
    /// most telling flag *instead of* the base state (Slurm's `job_state_string`).
    fn from_flag(s: &str) -> JobState {
        match s {
            "COMPLETING" | "STAGE_OUT" => JobState::Completing,
            "CONFIGURING" | "RESIZING" | "SIGNALING" => JobState::Running,
            "STOPPED" => JobState::Suspended,
            "REQUEUED" | "REQUEUE_FED" | "REQUEUE_HOLD" | "SPECIAL_EXIT" | "RESV_DEL_HOLD"
            | "POWER_UP_NODE" => JobState::Pending,
            other => JobState::Other(other.to_owned()),
        }
    }

    /// Reads `job_state` (one name, or a list of a base state and flags) into the base
    /// state and the remaining flags.
    fn from_names(names: &[String]) -> Option<(JobState, Vec<String>)> {
        let first = names.first()?;
        match names.iter().position(|n| JobState::base(n).is_some()) {
            Some(i) => {
                let state = JobState::base(&names[i]).expect("position found a base state");
                let flags = names.iter().enumerate().filter(|&(j, _)| j != i);
                Some((state, flags.map(|(_, n)| n.clone()).collect()))
            }
            None => {
                let state = JobState::from_flag(first);
                // Keep the flag's own name visible: `COMPLETING` read as a state is still
                // a flag to anyone who looks at flags.
                let flags = if matches!(state, JobState::Other(_)) {
                    vec![]
                } else {
                    names.to_vec()
                };
                Some((state, flags))
            }
        }
    }

    /// Waiting in the queue.
    pub fn is_pending(&self) -> bool {
        matches!(self, JobState::Pending)
    }

    /// Holding nodes: running or suspended.
    pub fn is_active(&self) -> bool {
        matches!(self, JobState::Running | JobState::Suspended)
    }

    /// Ended (or ending, for [`JobState::Completing`]), for whatever reason.
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            JobState::Completing
                | JobState::Completed
                | JobState::Cancelled
                | JobState::Failed
                | JobState::Timeout
                | JobState::NodeFail
                | JobState::Preempted
                | JobState::BootFail
                | JobState::Deadline
                | JobState::OutOfMemory
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<JobState> for String {
    fn from(s: JobState) -> String {
        s.as_str().to_owned()
    }
}

impl From<String> for JobState {
    fn from(s: String) -> JobState {
        JobState::base(&s).unwrap_or_else(|| JobState::from_flag(&s))
    }
}

/// A job list as read from `GET /slurm/{v}/jobs` or `GET /slurm/{v}/job/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobList {
    /// Every job that read cleanly, in Slurm's order.
    pub jobs: Vec<SlurmJob>,
    /// Jobs that did not, each with its reason and raw JSON: kept, never dropped.
    pub rejected: Vec<RejectedJob>,
    /// When slurmctld's job table last changed (v0.0.40+).
    pub last_update: Option<i64>,
    /// The Slurm release that answered, e.g. `"22.05.8"`.
    pub slurm_release: Option<String>,
    /// Warnings slurmrestd attached to the response.
    pub warnings: Vec<String>,
}

/// A job record that could not be read, set aside with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedJob {
    /// Its position in the response's `jobs` list.
    pub index: usize,
    /// Its job id, when that much could be read.
    pub job_id: Option<u64>,
    /// What was wrong.
    pub reason: String,
    /// The record's JSON, as received.
    pub raw: String,
}

/// One entry of a response's `errors` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmErrorEntry {
    /// Slurm's error number (`2017` is "Invalid job id specified").
    pub number: Option<i64>,
    /// Slurm's text for the number.
    pub error: Option<String>,
    /// What slurmrestd was doing.
    pub description: Option<String>,
    /// The function that failed.
    pub source: Option<String>,
}

impl SlurmErrorEntry {
    /// `ESLURM_INVALID_JOB_ID`.
    pub const INVALID_JOB_ID: i64 = 2017;
    /// slurmdbd's "Nothing found with query" (an accounting window with no jobs; Slurm
    /// 22.05 answers it as an error).
    pub const NOTHING_FOUND: i64 = 9003;
    /// `SLURM_PROTOCOL_AUTHENTICATION_ERROR`: slurmctld rejected the token.
    pub const AUTHENTICATION: i64 = 1007;
}

impl fmt::Display for SlurmErrorEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(d) = &self.description {
            parts.push(d.clone());
        }
        match (&self.error, self.number) {
            (Some(e), Some(n)) => parts.push(format!("{e} (error {n})")),
            (Some(e), None) => parts.push(e.clone()),
            (None, Some(n)) => parts.push(format!("error {n}")),
            (None, None) => {}
        }
        if let Some(s) = &self.source {
            parts.push(format!("in {s}"));
        }
        if parts.is_empty() {
            f.write_str("unspecified Slurm error")
        } else {
            f.write_str(&parts.join(": "))
        }
    }
}

/// The errors, warnings and Slurm release every response carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Envelope {
    /// The `errors` list.
    pub errors: Vec<SlurmErrorEntry>,
    /// The `warnings` list, as text.
    pub warnings: Vec<String>,
    /// The Slurm release that answered.
    pub slurm_release: Option<String>,
}

/// What `POST /slurm/{v}/job/submit` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmittedJob {
    /// The new job's id.
    pub job_id: u64,
    /// A message from the site's job_submit plugin, if any.
    pub user_message: Option<String>,
}

/// A job to submit: what VARQ reservations and the tests ask Slurm for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSubmission {
    /// The job name; a reservation puts its id here so it can find the job again.
    pub name: String,
    /// The partition; `None` for the cluster's default.
    pub partition: Option<String>,
    /// Nodes (minimum = maximum).
    pub nodes: u32,
    /// The time limit in seconds; Slurm counts whole minutes, so it is rounded up.
    pub time_limit_s: u64,
    /// The batch script, starting with `#!`.
    pub script: String,
    /// The working directory on the compute node.
    pub working_dir: String,
    /// Environment variables for the job.
    pub environment: Vec<(String, String)>,
    /// CPUs per task, when not Slurm's default of one.
    pub cpus_per_task: Option<u32>,
}

impl JobSubmission {
    /// Checks what Slurm would refuse, before sending: an error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("name: must not be empty".into());
        }
        if self.nodes == 0 {
            return Err("nodes: must be at least 1".into());
        }
        if self.time_limit_s == 0 {
            return Err("time_limit_s: must be at least 1 second".into());
        }
        if !self.script.starts_with("#!") {
            return Err(
                "script: must start with #! (Slurm refuses batch scripts without one)".into(),
            );
        }
        if self.working_dir.is_empty() {
            return Err("working_dir: must not be empty".into());
        }
        if let Some((k, _)) = self
            .environment
            .iter()
            .find(|(k, _)| k.is_empty() || k.contains('='))
        {
            return Err(format!("environment: invalid variable name {k:?}"));
        }
        if self.cpus_per_task == Some(0) {
            return Err("cpus_per_task: must be at least 1".into());
        }
        Ok(())
    }
}

/// A response body that is not what slurmrestd sends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (body starts: {snippet:?})")]
pub struct ParseError {
    /// What was wrong.
    pub reason: String,
    /// The first bytes of the body, for the log.
    pub snippet: String,
}

impl ParseError {
    pub(crate) fn new(reason: impl Into<String>, body: &[u8]) -> ParseError {
        ParseError {
            reason: reason.into(),
            snippet: snippet(body),
        }
    }
}

/// The first 200 characters of a body, lossily decoded.
pub fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(800)]);
    text.chars().take(200).collect()
}

/// Reads the errors, warnings and Slurm release of any response.
pub fn parse_envelope(body: &[u8]) -> Result<Envelope, ParseError> {
    let raw: RawEnvelope = serde_json::from_slice(body)
        .map_err(|e| ParseError::new(format!("not a slurmrestd JSON response: {e}"), body))?;
    Ok(Envelope {
        errors: raw
            .errors
            .into_iter()
            // An empty text is no text: kept, it would print as nothing (an error
            // reading only `""`) instead of "unspecified Slurm error".
            .map(|e| SlurmErrorEntry {
                number: e.error_number.and_then(RawNumber::value),
                error: e.error.filter(|e| !e.is_empty()),
                description: e.description.filter(|d| !d.is_empty()),
                source: e.source.filter(|s| !s.is_empty()),
            })
            .collect(),
        warnings: warnings_text(raw.warnings),
        slurm_release: release(raw.meta),
    })
}

fn warnings_text(warnings: Vec<RawWarning>) -> Vec<String> {
    warnings
        .into_iter()
        .filter_map(|w| match (w.description, w.source) {
            (Some(d), Some(s)) if !s.is_empty() => Some(format!("{d} (in {s})")),
            (Some(d), _) => Some(d),
            (None, Some(s)) => Some(format!("warning in {s}")),
            (None, None) => None,
        })
        .collect()
}

fn release(meta: Option<RawMeta>) -> Option<String> {
    meta.and_then(|m| m.slurm).and_then(|s| s.release)
}

/// Reads a job list (`GET .../jobs`) or a single-job response (`GET .../job/{id}`, also
/// a list). A job that cannot be read goes to [`JobList::rejected`] with its reason; only
/// a body that is not a job list at all is an error.
pub fn parse_job_list(body: &[u8]) -> Result<JobList, ParseError> {
    // One pass over the body (a big site's list is hundreds of megabytes); each job is
    // then read from its own slice.
    let raw: RawJobsResponse<'_> = serde_json::from_slice(body)
        .map_err(|e| ParseError::new(format!("not a slurmrestd job list: {e}"), body))?;
    let Some(raw_jobs) = raw.jobs else {
        return Err(ParseError::new("no \"jobs\" list in the response", body));
    };
    let mut list = JobList {
        last_update: raw
            .last_update
            .and_then(RawNumber::value)
            .filter(|&t| t > 0),
        slurm_release: release(raw.meta),
        warnings: warnings_text(raw.warnings),
        ..JobList::default()
    };
    for (index, text) in raw_jobs.into_iter().enumerate() {
        match serde_json::from_str::<RawJob>(text.get()) {
            Ok(rj) => {
                let job_id = rj
                    .job_id
                    .and_then(RawNumber::value)
                    .and_then(|v| u64::try_from(v).ok());
                match job_from_raw(rj) {
                    Ok(job) => list.jobs.push(job),
                    Err(reason) => list.rejected.push(RejectedJob {
                        index,
                        job_id,
                        reason,
                        raw: text.get().to_owned(),
                    }),
                }
            }
            Err(e) => list.rejected.push(RejectedJob {
                index,
                job_id: job_id_of(text.get()),
                reason: e.to_string(),
                raw: text.get().to_owned(),
            }),
        }
    }
    Ok(list)
}

/// The job id of a record that did not read as a job, if it has a readable one.
fn job_id_of(text: &str) -> Option<u64> {
    #[derive(Deserialize)]
    struct Id {
        job_id: u64,
    }
    serde_json::from_str::<Id>(text).ok().map(|i| i.job_id)
}

/// A time field: Slurm writes 0 for "not yet".
fn time(n: Option<RawNumber>) -> Option<i64> {
    n.and_then(RawNumber::value).filter(|&t| t > 0)
}

/// A 32-bit count or limit, with Slurm's sentinels read as "none".
fn u32_field(n: Option<RawNumber>, what: &str) -> Result<Option<u32>, String> {
    match n.map(RawNumber::u32_field) {
        None | Some(RawNumber::Unset | RawNumber::Infinite) => Ok(None),
        Some(RawNumber::Value(v)) => u32::try_from(v)
            .map(Some)
            .map_err(|_| format!("{what}: {v} is not a count")),
    }
}

fn job_from_raw(rj: RawJob) -> Result<SlurmJob, String> {
    let job_id = match rj.job_id.and_then(RawNumber::value) {
        Some(id) if id > 0 => id as u64,
        Some(id) => return Err(format!("job_id: {id} is not a job id")),
        None => return Err("job_id: missing".into()),
    };
    let RawState(names) = rj.job_state.ok_or("job_state: missing")?;
    let (state, state_flags) = JobState::from_names(&names).ok_or("job_state: empty")?;
    let nodes = rj.nodes.filter(|n| !n.trim().is_empty());
    let raw_start = time(rj.start_time);
    // A job that never got an allocation never started, whatever start_time says
    // (Slurm stamps the cancel time there).
    let start_time = if state.is_pending() || nodes.is_none() {
        None
    } else {
        raw_start
    };
    let end_time = if state.is_finished() {
        time(rj.end_time)
    } else {
        None
    };
    let time_limit_s = u32_field(rj.time_limit, "time_limit")?.map(|m| u64::from(m) * 60);
    let user = match (
        rj.user_name.filter(|u| !u.is_empty()),
        rj.user_id.and_then(RawNumber::value),
    ) {
        (Some(name), _) => name,
        (None, Some(uid)) => uid.to_string(),
        (None, None) => String::new(),
    };
    Ok(SlurmJob {
        job_id,
        name: rj.name.unwrap_or_default(),
        partition: rj.partition.unwrap_or_default(),
        user,
        state_reason: rj.state_reason.filter(|r| !r.is_empty() && r != "None"),
        submit_time: time(rj.submit_time),
        eligible_time: time(rj.eligible_time),
        start_time,
        end_time,
        expected_start_time: if state.is_pending() { raw_start } else { None },
        time_limit_s,
        node_count: u32_field(rj.node_count, "node_count")?,
        cpus: u32_field(rj.cpus, "cpus")?,
        nodes,
        state,
        state_flags,
    })
}

/// Reads the answer of `POST .../job/submit`.
pub fn parse_submit(body: &[u8]) -> Result<SubmittedJob, ParseError> {
    let raw: RawSubmitResponse = serde_json::from_slice(body)
        .map_err(|e| ParseError::new(format!("not a submit response: {e}"), body))?;
    let job_id = raw
        .job_id
        .and_then(RawNumber::value)
        .filter(|&id| id > 0)
        .ok_or_else(|| ParseError::new("submit response without a job_id", body))?;
    Ok(SubmittedJob {
        job_id: job_id as u64,
        user_message: raw.job_submit_user_msg.filter(|m| !m.is_empty()),
    })
}

/// Reads the per-job errors of `DELETE .../job/{id}` (v0.0.42's `status` list; older
/// versions report only through `errors`).
pub fn parse_cancel(body: &[u8]) -> Result<Vec<SlurmErrorEntry>, ParseError> {
    let raw: RawCancelResponse = serde_json::from_slice(body)
        .map_err(|e| ParseError::new(format!("not a cancel response: {e}"), body))?;
    Ok(raw
        .status
        .into_iter()
        .filter_map(|s| {
            let e = s.error?;
            let number = e.code.and_then(RawNumber::value);
            // Empty texts are left out, as in `parse_envelope`.
            (number.unwrap_or(0) != 0).then(|| SlurmErrorEntry {
                number,
                error: e.string.filter(|e| !e.is_empty()),
                description: e.message.filter(|m| !m.is_empty()),
                source: s
                    .step_id
                    .filter(|st| !st.is_empty())
                    .map(|st| format!("cancel of step {st}")),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn job(json: &str) -> Result<SlurmJob, String> {
        job_from_raw(serde_json::from_str(json).unwrap())
    }

    #[test]
    fn v0_0_38_flag_names_stand_for_states() {
        let (s, f) = JobState::from_names(&["COMPLETING".into()]).unwrap();
        assert_eq!(
            (s, f),
            (JobState::Completing, vec!["COMPLETING".to_string()])
        );
        let (s, _) = JobState::from_names(&["CONFIGURING".into()]).unwrap();
        assert_eq!(s, JobState::Running);
        let (s, f) = JobState::from_names(&["COMPLETING".into(), "TIMEOUT".into()]).unwrap();
        assert_eq!((s, f), (JobState::Timeout, vec!["COMPLETING".to_string()]));
        let (s, f) = JobState::from_names(&["WHATEVER_NEW".into()]).unwrap();
        assert_eq!((s, f), (JobState::Other("WHATEVER_NEW".into()), vec![]));
        assert!(JobState::from_names(&[]).is_none());
    }

    #[test]
    fn a_job_cancelled_while_pending_never_started() {
        let j = job(
            r#"{"job_id": 11, "job_state": "CANCELLED", "submit_time": 100,
            "start_time": 130, "end_time": 130, "nodes": "", "time_limit": 10}"#,
        )
        .unwrap();
        assert_eq!(
            (j.start_time, j.end_time, j.wait_s()),
            (None, Some(130), None)
        );
        assert_eq!(j.time_limit_s, Some(600));
    }

    #[test]
    fn expectations_are_not_events() {
        let pending = job(
            r#"{"job_id": 9, "job_state": ["PENDING"], "submit_time": 100,
            "start_time": {"set": true, "infinite": false, "number": 400}, "end_time": 1000}"#,
        )
        .unwrap();
        assert_eq!(pending.start_time, None);
        assert_eq!(pending.expected_start_time, Some(400));
        assert_eq!(pending.end_time, None);
        let running = job(r#"{"job_id": 5, "job_state": "RUNNING", "submit_time": 100,
            "start_time": 160, "end_time": 1960, "nodes": "vm"}"#)
        .unwrap();
        assert_eq!(
            (running.start_time, running.end_time, running.wait_s()),
            (Some(160), None, Some(60))
        );
    }

    #[test]
    fn unlimited_and_unset_limits_are_none() {
        for tl in [
            "4294967295",
            "4294967294",
            "null",
            r#"{"set":false,"infinite":true,"number":0}"#,
        ] {
            let j = job(&format!(
                r#"{{"job_id": 1, "job_state": "PENDING", "time_limit": {tl}}}"#
            ))
            .unwrap();
            assert_eq!(j.time_limit_s, None, "{tl}");
        }
    }

    #[test]
    fn records_without_id_or_state_are_rejected_with_the_reason() {
        assert_eq!(
            job(r#"{"job_state": "PENDING"}"#).unwrap_err(),
            "job_id: missing"
        );
        assert_eq!(job(r#"{"job_id": 3}"#).unwrap_err(), "job_state: missing");
        assert_eq!(
            job(r#"{"job_id": 3, "job_state": []}"#).unwrap_err(),
            "job_state: empty"
        );
        assert!(
            job(r#"{"job_id": 3, "job_state": "RUNNING", "cpus": -2}"#)
                .unwrap_err()
                .contains("cpus")
        );
    }

    #[test]
    fn one_bad_job_does_not_sink_the_list() {
        let body = br#"{"jobs": [
            {"job_id": 1, "job_state": "RUNNING", "nodes": "n1", "start_time": 5, "submit_time": 1},
            {"job_id": 2, "job_state": "RUNNING", "submit_time": "yesterday"},
            {"job_state": "PENDING"}
        ], "errors": []}"#;
        let list = parse_job_list(body).unwrap();
        assert_eq!(list.jobs.len(), 1);
        assert_eq!(list.rejected.len(), 2);
        assert_eq!(
            (list.rejected[0].index, list.rejected[0].job_id),
            (1, Some(2))
        );
        assert!(
            list.rejected[0].reason.contains("invalid type"),
            "{}",
            list.rejected[0].reason
        );
        assert!(list.rejected[0].raw.contains("yesterday"));
        assert_eq!((list.rejected[1].index, list.rejected[1].job_id), (2, None));
    }

    #[test]
    fn bodies_that_are_not_job_lists_are_parse_errors() {
        let e = parse_job_list(b"Authentication failure").unwrap_err();
        assert!(e.reason.starts_with("not a slurmrestd job list"), "{e}");
        assert_eq!(e.snippet, "Authentication failure");
        let e = parse_job_list(br#"{"errors": []}"#).unwrap_err();
        assert!(e.reason.contains("no \"jobs\""), "{e}");
    }

    #[test]
    fn empty_error_texts_are_no_texts() {
        // `"error": ""` with no number printed as an empty message.
        let e =
            parse_envelope(br#"{"errors":[{"error":"","description":"","source":""}]}"#).unwrap();
        assert_eq!(e.errors[0].error, None);
        assert_eq!(e.errors[0].to_string(), "unspecified Slurm error");
        // An empty message and step printed as ": Unknown (error 5): in cancel of step ".
        let c = parse_cancel(
            br#"{"status":[{"error":{"code":5,"string":"Unknown","message":""},"step_id":""}]}"#,
        )
        .unwrap();
        assert_eq!(c[0].to_string(), "Unknown (error 5)");
    }

    #[test]
    fn submissions_are_checked_field_by_field() {
        let ok = JobSubmission {
            name: "qbets-r1".into(),
            partition: None,
            nodes: 1,
            time_limit_s: 60,
            script: "#!/bin/sh\ntrue\n".into(),
            working_dir: "/tmp".into(),
            environment: vec![],
            cpus_per_task: None,
        };
        assert_eq!(ok.validate(), Ok(()));
        let bad = |f: fn(&mut JobSubmission)| {
            let mut s = ok.clone();
            f(&mut s);
            s.validate().unwrap_err()
        };
        assert!(bad(|s| s.nodes = 0).starts_with("nodes:"));
        assert!(bad(|s| s.time_limit_s = 0).starts_with("time_limit_s:"));
        assert!(bad(|s| s.script = "sleep 1".into()).starts_with("script:"));
        assert!(bad(|s| s.name = " ".into()).starts_with("name:"));
        assert!(
            bad(|s| s.environment = vec![("A=B".into(), "c".into())]).starts_with("environment:")
        );
    }

    /// Numbers as slurmrestd writes them and as no slurmrestd should: the ends of `i64`
    /// and `u64` and just past them, the 32- and 64-bit sentinels, doubles, number
    /// objects (nested, incomplete), and values of other types.
    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => proptest::sample::select(vec![
                "9223372036854775807",
                "-9223372036854775808",
                "9223372036854775808",
                "-9223372036854775809",
                "18446744073709551615",
                "18446744073709551614",
                "18446744073709551616",
                "4294967295",
                "4294967294",
                "4294967296",
                "0",
                "-1",
                "1.0",
                "1.5",
                "-0.0",
                "1e308",
                "-1e308",
                "9e15",
                "8999999999999998",
                "null",
                "true",
                "\"12\"",
                "[]",
                "{}",
                r#"{"set":true}"#,
                r#"{"set":true,"infinite":false,"number":{"number":{"number":7}}}"#,
                r#"{"infinite":true}"#,
            ])
            .prop_map(String::from),
            2 => any::<i64>().prop_map(|v| v.to_string()),
            1 => any::<u64>().prop_map(|v| v.to_string()),
            1 => any::<f64>().prop_filter("JSON has no NaN or infinity", |v| v.is_finite())
                .prop_map(|v| format!("{v:e}")),
            2 => (any::<bool>(), any::<bool>(), any::<i64>()).prop_map(|(set, inf, n)| {
                format!(r#"{{"set":{set},"infinite":{inf},"number":{n}}}"#)
            }),
        ]
    }

    /// A JSON string of any text, or a value of another type.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
            2 => proptest::sample::select(vec!["debug", "debug,long", ",", "", "None", "n[1-4]"])
                .prop_map(|s| format!("{s:?}")),
            1 => proptest::sample::select(vec!["null", "0", "[]", "{}"]).prop_map(String::from),
        ]
    }

    /// `job_state` in either generation's shape, with base states, flags, names no
    /// Slurm has, and values of other types.
    fn job_state() -> impl Strategy<Value = String> {
        let name = proptest::sample::select(vec![
            "PENDING",
            "RUNNING",
            "COMPLETED",
            "CANCELLED",
            "TIMEOUT",
            "COMPLETING",
            "REQUEUED",
            "CONFIGURING",
            "WHATEVER_NEW",
            "",
        ]);
        prop_oneof![
            name.clone().prop_map(|n| format!("{n:?}")),
            proptest::collection::vec(name, 0..4).prop_map(|v| format!("{v:?}")),
            text(),
            number(),
        ]
    }

    /// A job record with any of its fields left out or hostile.
    fn job_json() -> impl Strategy<Value = String> {
        let field = |key: &'static str, value: BoxedStrategy<String>| {
            proptest::option::weighted(0.8, value)
                .prop_map(move |v| v.map(|v| format!("{key:?}:{v}")))
        };
        (
            (
                field("job_id", number().boxed()),
                field("job_state", job_state().boxed()),
                field("submit_time", number().boxed()),
                field("eligible_time", number().boxed()),
                field("start_time", number().boxed()),
                field("end_time", number().boxed()),
            ),
            (
                field("time_limit", number().boxed()),
                field("node_count", number().boxed()),
                field("cpus", number().boxed()),
                field("user_id", number().boxed()),
                field("nodes", text().boxed()),
                field("partition", text().boxed()),
                field("user_name", text().boxed()),
                field("state_reason", text().boxed()),
            ),
        )
            .prop_map(|((a, b, c, d, e, f), (g, h, i, j, k, l, m, n))| {
                let fields: Vec<String> = [a, b, c, d, e, f, g, h, i, j, k, l, m, n]
                    .into_iter()
                    .flatten()
                    .collect();
                format!("{{{}}}", fields.join(","))
            })
    }

    /// A response body: a job list whose jobs are hostile, with hostile envelope
    /// fields around it; now and then not a job list at all.
    fn body() -> impl Strategy<Value = String> {
        let jobs = proptest::collection::vec(job_json(), 0..4);
        prop_oneof![
            8 => (jobs, number(), number(), text(), text()).prop_map(
                |(jobs, n, code, msg, release)| {
                    let jobs = jobs.join(",");
                    let error = format!(
                        r#"{{"error_number":{code},"error":{msg},"description":{msg},"source":{msg}}}"#
                    );
                    let status = format!(
                        r#"{{"error":{{"code":{code},"string":{msg},"message":{msg}}},"step_id":{msg}}}"#
                    );
                    format!(
                        r#"{{"jobs":[{jobs}],"last_update":{n},"job_id":{n},
                        "job_submit_user_msg":{msg},"errors":[{error}],
                        "warnings":[{{"description":{msg},"source":{msg}}}],"status":[{status}],
                        "meta":{{"slurm":{{"release":{release}}}}}}}"#
                    )
                }
            ),
            1 => any::<String>(),
        ]
    }

    proptest! {
        /// Whatever a body holds, every parser gives its answer or a [`ParseError`],
        /// never a panic; a job read has a positive id, and every job of a list is read
        /// or rejected with its reason.
        #[test]
        fn hostile_bodies_never_panic(
            body in body(),
            flip in any::<(usize, u8)>(),
            cut in any::<usize>(),
        ) {
            let mut damaged = body.clone().into_bytes();
            if !damaged.is_empty() {
                let at = flip.0 % damaged.len();
                damaged[at] = flip.1;
                damaged.truncate(damaged.len() - cut % damaged.len() / 4);
            }
            for bytes in [body.as_bytes(), &damaged[..]] {
                if let Ok(e) = parse_envelope(bytes) {
                    for e in &e.errors {
                        prop_assert!(!e.to_string().is_empty());
                    }
                }
                if let Ok(s) = parse_submit(bytes) {
                    prop_assert!(s.job_id > 0);
                }
                for e in parse_cancel(bytes).unwrap_or_default() {
                    prop_assert!(!e.to_string().is_empty());
                }
                match parse_job_list(bytes) {
                    Ok(list) => {
                        for j in &list.jobs {
                            prop_assert!(j.job_id > 0);
                            let _ = j.wait_s();
                        }
                        for r in &list.rejected {
                            prop_assert!(!r.reason.is_empty());
                        }
                    }
                    Err(e) => prop_assert!(!e.reason.is_empty()),
                }
            }
        }
    }
}
