//! From SWF records to simulator jobs, and from outcomes back to SWF records.
//!
//! Trace jobs are replayed with their real submit time, run time, processors and
//! requested time. The choices for what a trace leaves unknown:
//! - processors: the requested count, else the allocated one ([`SwfRecord::procs`]);
//!   no count at all → set aside;
//! - requested time unknown → the job's own run time (an exact estimate), counted;
//! - run time unknown → set aside, unless the job was cancelled (then it never ran);
//! - a cancelled job (status 5) that never ran (run time ≤ 0) leaves the queue at its
//!   original cancel time, `submit + wait` (its cancel lag is kept under load
//!   scaling), or, if the simulation would start it before then, at that moment
//!   without running ([`EndKind::Withdrawn`]: what it would have run is unknown);
//!   a cancelled job that ran is replayed as run, its record keeping status 5;
//! - more processors than the machine → left out and counted (the rule).
//!
//! May import: std and the crate's SWF domain types (no I/O).

use std::collections::HashSet;

use crate::trace::swf::{STATUS_CANCELLED, SwfRecord, SwfTrace};

use super::job::{EndKind, JobOutcome, SimJob};

/// Why a record was not simulated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// More processors than the simulated machine has.
    TooLarge { procs: i64, machine: u32 },
    /// Neither requested nor allocated processors are known.
    UnknownProcs,
    /// The run time is unknown and the job was not cancelled.
    UnknownRuntime,
    /// A job number seen before in the same trace.
    DuplicateJobNumber,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge { procs, machine } => {
                write!(f, "{procs} processors is more than the machine's {machine}")
            }
            Self::UnknownProcs => f.write_str("processor count unknown (fields 5 and 8 are -1)"),
            Self::UnknownRuntime => f.write_str("run time unknown (field 4 is -1)"),
            Self::DuplicateJobNumber => f.write_str("job number already used in this trace"),
        }
    }
}

/// A record set aside, with its line and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// 1-based line in the trace file.
    pub line: u64,
    /// The job number.
    pub job: i64,
    /// Why.
    pub reason: SkipReason,
}

/// Jobs ready to simulate, and what was set aside or filled in.
#[derive(Debug, Clone, Default)]
pub struct TraceJobs {
    /// Jobs in nondecreasing submit order (file order among equal submits).
    pub jobs: Vec<SimJob>,
    /// Index into the trace's records of each job, parallel to `jobs`.
    pub record_index: Vec<usize>,
    /// Records not simulated.
    pub skipped: Vec<Skipped>,
    /// Jobs whose unknown requested time was set to their run time.
    pub requested_from_runtime: usize,
}

/// Converts a trace's records into jobs for a machine of `processors`, multiplying
/// arrival offsets (from the first submit) by `load_scale` (Shmueli §4.1: a factor
/// below 1 raises the offered load).
pub fn jobs_from_trace(trace: &SwfTrace, processors: u32, load_scale: f64) -> TraceJobs {
    let field = trace.queue_field();
    let t0 = trace.records.iter().map(|r| r.submit).min().unwrap_or(0);
    let mut out = TraceJobs::default();
    let mut seen = HashSet::new();
    let mut staged: Vec<(SimJob, usize)> = Vec::with_capacity(trace.records.len());
    for (idx, r) in trace.records.iter().enumerate() {
        let skip = |reason| Skipped {
            line: r.line,
            job: r.job,
            reason,
        };
        if !seen.insert(r.job) {
            out.skipped.push(skip(SkipReason::DuplicateJobNumber));
            continue;
        }
        let Some(procs) = r.procs() else {
            out.skipped.push(skip(SkipReason::UnknownProcs));
            continue;
        };
        if procs > i64::from(processors) {
            out.skipped.push(skip(SkipReason::TooLarge {
                procs,
                machine: processors,
            }));
            continue;
        }
        let never_ran = r.cancelled() && r.run <= 0;
        let runtime = if never_ran {
            -1
        } else if r.run >= 0 {
            r.run
        } else {
            out.skipped.push(skip(SkipReason::UnknownRuntime));
            continue;
        };
        let requested = match r.requested_time() {
            Some(t) => t,
            None => {
                out.requested_from_runtime += 1;
                runtime.max(1)
            }
        };
        let submit = t0 + ((r.submit - t0) as f64 * load_scale).round() as i64;
        let cancel_at = never_ran.then(|| submit + r.wait.max(0));
        let queue = trace.queue_of(field, r);
        staged.push((
            SimJob {
                id: r.job,
                queue: i32::try_from(queue).unwrap_or(-1),
                submit,
                runtime,
                procs: procs as u32,
                requested,
                cancel_at,
            },
            idx,
        ));
    }
    // Stable: file order among equal submit times.
    staged.sort_by_key(|(j, _)| j.submit);
    for (j, idx) in staged {
        out.jobs.push(j);
        out.record_index.push(idx);
    }
    out
}

/// Offered load of `jobs` on `processors`: the processor-seconds they will use over
/// the capacity during the span of their arrivals (Shmueli §4.1).
pub fn offered_load(jobs: &[SimJob], processors: u32) -> f64 {
    let (Some(first), Some(last)) = (jobs.first(), jobs.last()) else {
        return 0.0;
    };
    let span = (last.submit - first.submit).max(1) as f64;
    let work: f64 = jobs
        .iter()
        .filter(|j| j.cancel_at.is_none() || j.runtime > 0)
        .map(|j| f64::from(j.procs) * j.effective_runtime() as f64)
        .sum();
    work / (f64::from(processors) * span)
}

/// The SWF record of a simulated job: the original record (when there is one) with
/// the simulated wait, run time and status. Status: 1 completed, 0 killed at its
/// requested time (SWF's "failed"), 5 cancelled.
pub fn outcome_record(o: &JobOutcome, original: Option<&SwfRecord>) -> SwfRecord {
    let mut r = match original {
        Some(r) => {
            let mut r = r.clone();
            r.line = 0;
            r
        }
        None => {
            let mut r = SwfRecord::unknown(o.job.id, o.job.submit);
            r.queue = i64::from(o.job.queue);
            r
        }
    };
    r.job = o.job.id;
    r.submit = o.job.submit;
    r.wait = o.wait();
    r.run = o.run();
    r.req_procs = i64::from(o.job.procs);
    r.req_time = o.job.requested;
    r.alloc_procs = if o.start.is_some() {
        i64::from(o.job.procs)
    } else {
        -1
    };
    if original.is_some() && o.start.is_none() {
        r.avg_cpu = -1.0;
    }
    r.status = match o.kind {
        EndKind::Completed => {
            if original.is_some_and(SwfRecord::cancelled) {
                STATUS_CANCELLED
            } else {
                1
            }
        }
        EndKind::Killed => 0,
        EndKind::CancelledRunning | EndKind::CancelledWaiting | EndKind::Withdrawn => {
            STATUS_CANCELLED
        }
    };
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        job: i64,
        submit: i64,
        wait: i64,
        run: i64,
        procs: i64,
        req: i64,
        status: i64,
    ) -> SwfRecord {
        let mut r = SwfRecord::unknown(job, submit);
        r.line = job as u64;
        r.wait = wait;
        r.run = run;
        r.req_procs = procs;
        r.req_time = req;
        r.status = status;
        r.queue = 1;
        r
    }

    #[test]
    fn conversion_sets_aside_with_reasons_and_fills_unknowns() {
        let trace = SwfTrace {
            records: vec![
                rec(1, 0, 5, 100, 4, 200, 1),
                rec(2, 10, 30, -1, 4, 200, 5), // cancelled in queue after 30 s
                rec(3, 20, 0, 50, 64, 200, 1), // too large
                rec(4, 30, 0, -1, 4, 200, 1),  // run unknown
                rec(5, 40, 0, 70, 4, -1, 1),   // requested unknown
                rec(5, 50, 0, 70, 4, 100, 1),  // duplicate number
                rec(6, 60, 0, 70, -1, 100, 1), // no size
            ],
            ..Default::default()
        };
        let t = jobs_from_trace(&trace, 32, 0.5);
        let ids: Vec<i64> = t.jobs.iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![1, 2, 5]);
        assert_eq!(t.jobs[1].submit, 5, "arrival offsets halved");
        assert_eq!(t.jobs[1].cancel_at, Some(35), "cancel lag kept");
        assert!(t.jobs[1].runtime_unknown(), "it never ran: -1, not 0 s");
        assert!(!t.jobs[0].runtime_unknown());
        assert_eq!(t.jobs[2].requested, 70);
        assert_eq!(t.requested_from_runtime, 1);
        let why: Vec<(u64, &SkipReason)> = t.skipped.iter().map(|s| (s.line, &s.reason)).collect();
        assert_eq!(
            why,
            vec![
                (
                    3,
                    &SkipReason::TooLarge {
                        procs: 64,
                        machine: 32
                    }
                ),
                (4, &SkipReason::UnknownRuntime),
                (5, &SkipReason::DuplicateJobNumber),
                (6, &SkipReason::UnknownProcs),
            ]
        );
    }
}
