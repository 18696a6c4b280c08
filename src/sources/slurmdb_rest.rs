//! Reading Slurm's accounting through slurmrestd (`GET /slurmdb/{v}/jobs/`, the
//! `openapi/slurmdbd` plugin), for sites that let qbets call slurmrestd but not run
//! `sacct`: the same job records, read the same way as [`super::sacct`] reads its
//! output (the same state mapping; a job never allocated has no start; a pending or
//! running job no end; the node count allocated, or requested while none is).
//!
//! The response is parsed here by a pure function, tested on answers captured from a
//! real slurmdbd beside `sacct`'s output for the same window
//! (`tests/fixtures/slurm/slurmdb-v0.0.45/`), and live beside `sacct` on both local
//! Slurms (`tests/it/slurmdb.rs`). The windowed poller around it is
//! [`super::slurm_poll::SlurmdbRestPoller`] (windows as [`super::sacct::next_window`]).
//!
//! May import: serde, serde_json, std, and the sources' plain types. Pure: no I/O, no
//! clock.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::slurm_rest::model::{ParseError, snippet};
use super::slurm_rest::wire::RawNumber;
use super::{Batch, JobRecord, RecordReject};

/// `GET /slurmdb/{v}/jobs/`: each job kept as its raw text, so one bad job is set aside
/// with its reason instead of failing the whole answer.
#[derive(Deserialize)]
struct RawDbJobs<'a> {
    #[serde(borrow, default)]
    jobs: Option<Vec<&'a RawValue>>,
}

/// The fields of an accounting job read here (v0.0.38 and v0.0.40 to v0.0.45 shapes).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawDbJob {
    job_id: Option<RawNumber>,
    partition: Option<String>,
    state: Option<RawDbState>,
    time: Option<RawDbTime>,
    allocation_nodes: Option<RawNumber>,
    tres: Option<RawDbTres>,
    user: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawDbState {
    current: RawDbStates,
}

/// The state: a list of names from v0.0.40 on, one name in v0.0.38.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawDbStates {
    One(String),
    Many(Vec<String>),
}

impl Default for RawDbStates {
    fn default() -> Self {
        RawDbStates::Many(Vec::new())
    }
}

impl RawDbStates {
    fn first(&self) -> Option<&str> {
        match self {
            RawDbStates::One(s) => Some(s.as_str()),
            RawDbStates::Many(v) => v.first().map(String::as_str),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawDbTime {
    submission: Option<RawNumber>,
    start: Option<RawNumber>,
    end: Option<RawNumber>,
    /// Minutes.
    limit: Option<RawNumber>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawDbTres {
    requested: Vec<RawTres>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawTres {
    #[serde(rename = "type")]
    kind: Option<String>,
    count: Option<RawNumber>,
}

fn time(n: Option<RawNumber>) -> Option<i64> {
    n.and_then(RawNumber::value).filter(|&t| t > 0)
}

/// One accounting job as a record, or why it cannot be one.
fn record(j: RawDbJob) -> Result<JobRecord, String> {
    let id = match j.job_id.and_then(RawNumber::value) {
        Some(id) if id > 0 => id,
        Some(id) => return Err(format!("job_id: {id} is not a job id")),
        None => return Err("job_id: missing".into()),
    };
    let queue = super::slurm_queue(j.partition.as_deref().unwrap_or("")).to_string();
    if queue.is_empty() {
        return Err(format!("job {id}: empty partition"));
    }
    let state = super::sacct::state(
        j.state
            .as_ref()
            .and_then(|s| s.current.first())
            .unwrap_or(""),
    );
    let t = j.time.unwrap_or_default();
    let submit = time(t.submission).ok_or_else(|| format!("job {id}: no submission time"))?;
    let alloc = j.allocation_nodes.and_then(RawNumber::value);
    // Never allocated (cancelled while pending): its start, if any, is the cancel time.
    let start = if state == super::JobState::Pending || alloc == Some(0) {
        None
    } else {
        time(t.start)
    };
    let end = match state {
        super::JobState::Pending | super::JobState::Running => None,
        _ => time(t.end),
    };
    let walltime_s = match t.limit.map(RawNumber::u32_field) {
        Some(RawNumber::Value(m)) if m > 0 => Some(m.saturating_mul(60)),
        _ => None,
    };
    let requested_nodes = j
        .tres
        .iter()
        .flat_map(|t| &t.requested)
        .find(|t| t.kind.as_deref() == Some("node"))
        .and_then(|t| t.count.and_then(RawNumber::value));
    let nodes = alloc
        .filter(|&n| n > 0)
        .or(requested_nodes)
        .filter(|&n| n > 0);
    Ok(JobRecord {
        job_id: id.to_string(),
        queue,
        submit_time: submit,
        start_time: start,
        end_time: end,
        nodes,
        walltime_s,
        state,
        user: j.user.filter(|u| !u.is_empty()),
    })
}

/// Reads an answer of `GET /slurmdb/{v}/jobs/` at `now` into records and rejects (each
/// with its position in the list and its JSON); an error only when the body is not such
/// an answer at all.
pub fn read_jobs(body: &[u8], now: i64) -> Result<Batch, ParseError> {
    let raw: RawDbJobs<'_> = serde_json::from_slice(body).map_err(|e| ParseError {
        reason: format!("not a slurmdb job list: {e}"),
        snippet: snippet(body),
    })?;
    let jobs = raw.jobs.ok_or_else(|| ParseError {
        reason: "no \"jobs\" list in the response".into(),
        snippet: snippet(body),
    })?;
    let mut batch = Batch::default();
    for (i, text) in jobs.into_iter().enumerate() {
        let parsed = serde_json::from_str::<RawDbJob>(text.get())
            .map_err(|e| e.to_string())
            .and_then(record)
            .map(Some);
        batch.take(parsed, now, |reason| RecordReject {
            line: None,
            raw: text.get().to_owned(),
            reason: format!("job {} of the slurmdb answer: {reason}", i + 1),
        });
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::JobState;

    #[test]
    fn a_job_reads_as_sacct_reads_it() {
        let body = br#"{"jobs":[
          {"job_id":6,"partition":"debug","state":{"current":["COMPLETED"]},
           "time":{"submission":100,"start":101,"end":103,"limit":{"set":true,"infinite":false,"number":5}},
           "allocation_nodes":1,"tres":{"requested":[{"type":"node","count":1}]}},
          {"job_id":7,"partition":"debug,long","state":{"current":["CANCELLED"]},
           "time":{"submission":100,"start":130,"end":130,"limit":{"set":false,"infinite":true,"number":0}},
           "allocation_nodes":0,"tres":{"requested":[{"type":"node","count":2}]}},
          {"job_id":8,"partition":"long","state":{"current":["PENDING"]},
           "time":{"submission":100,"start":0,"end":0}},
          {"partition":"long","state":{"current":["PENDING"]}}
        ]}"#;
        let b = read_jobs(body, 1_000).unwrap();
        assert_eq!(b.records.len(), 3);
        let r = &b.records[0];
        assert_eq!(
            (r.start_time, r.end_time, r.walltime_s, r.nodes, r.state),
            (
                Some(101),
                Some(103),
                Some(300),
                Some(1),
                JobState::Completed
            )
        );
        let c = &b.records[1];
        assert_eq!(
            (
                c.queue.as_str(),
                c.start_time,
                c.end_time,
                c.walltime_s,
                c.nodes
            ),
            ("debug", None, Some(130), None, Some(2))
        );
        assert_eq!(
            (b.records[2].start_time, b.records[2].end_time),
            (None, None)
        );
        assert_eq!(b.rejects.len(), 1);
        assert!(
            b.rejects[0].reason.contains("job_id: missing"),
            "{:?}",
            b.rejects
        );
        assert!(
            read_jobs(b"{}", 0)
                .unwrap_err()
                .reason
                .contains("no \"jobs\"")
        );
        assert!(read_jobs(b"Authentication failure", 0).is_err());
    }
}
