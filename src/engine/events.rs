//! Job records → the ordered event stream of qbets.md §6, shared by the replay and by
//! the service when it rebuilds a predictor from stored jobs.
//!
//! Jobs are walked in submit order (ties in input order). Before the arrival of a job
//! submitted at s, every earlier job (in that order) whose start is ≤ s is started, in
//! start order (ties in submit order) — so a job that waited 0 s counts for the next job
//! submitted in the same second. After the last arrival the remaining starts follow, so
//! the stream ends in the state a live predictor would have.
//!
//! May import: std, serde and the engine's own modules.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::JobShape;

/// What the predictor learns about one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Submit time, seconds.
    pub submit: i64,
    /// Start time, seconds; absent while the job is pending. A start before the submit
    /// time is treated as absent (such waits are dropped, qbets.md §6).
    pub start: Option<i64>,
    pub shape: JobShape,
    /// Who submitted it, as a number the caller gives each user (SWF field 12 in a
    /// trace; an interned user key in the service); `None` when the source does not say.
    /// Its pending jobs ahead of a new one are that job's place in its own batch
    /// (qbets.md §8).
    pub user: Option<u32>,
}

impl JobRecord {
    /// The wait in seconds, when the job has started.
    pub fn wait(&self) -> Option<u64> {
        self.start.and_then(|s| u64::try_from(s - self.submit).ok())
    }
}

/// Arrival or start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Arrival,
    Start,
}

/// One event: `job` indexes the slice the stream was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    pub job: usize,
    /// When it happened (submit time for an arrival, start time for a start).
    pub at: i64,
}

/// The §6 event stream for `jobs`: one arrival per job and one start per started job,
/// in non-decreasing time order.
pub fn event_stream(jobs: &[JobRecord]) -> Vec<Event> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| jobs[i].submit); // stable: ties stay in input order
    let mut out = Vec::with_capacity(jobs.len() * 2);
    // Pending starts keyed by (start, position in submit order).
    let mut pending: BinaryHeap<Reverse<(i64, usize, usize)>> = BinaryHeap::new();
    for (pos, &i) in order.iter().enumerate() {
        let s = jobs[i].submit;
        while let Some(&Reverse((start, _, j))) = pending.peek() {
            if start > s {
                break;
            }
            pending.pop();
            out.push(Event {
                kind: EventKind::Start,
                job: j,
                at: start,
            });
        }
        out.push(Event {
            kind: EventKind::Arrival,
            job: i,
            at: s,
        });
        if jobs[i].wait().is_some() {
            let start = jobs[i].start.expect("wait implies start");
            pending.push(Reverse((start, pos, i)));
        }
    }
    while let Some(Reverse((start, _, j))) = pending.pop() {
        out.push(Event {
            kind: EventKind::Start,
            job: j,
            at: start,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(submit: i64, wait: Option<i64>) -> JobRecord {
        JobRecord {
            submit,
            start: wait.map(|w| submit + w),
            shape: JobShape::default(),
            user: None,
        }
    }

    fn render(jobs: &[JobRecord]) -> Vec<String> {
        event_stream(jobs)
            .iter()
            .map(|e| match e.kind {
                EventKind::Arrival => format!("a{}", e.job),
                EventKind::Start => format!("s{}", e.job),
            })
            .collect()
    }

    #[test]
    fn starts_at_or_before_a_submit_come_first() {
        let jobs = [
            job(0, Some(10)), // 0 starts at 10
            job(5, Some(0)),  // 1 starts at 5
            job(5, Some(1)),  // 2 starts at 6
            job(10, None),    // 3 pending
            job(12, Some(0)), // 4 starts at 12
        ];
        assert_eq!(
            render(&jobs),
            ["a0", "a1", "s1", "a2", "s2", "s0", "a3", "a4", "s4"]
        );
    }

    #[test]
    fn zero_wait_counts_for_the_next_job_in_the_same_second() {
        let jobs = [job(7, Some(0)), job(7, Some(0)), job(7, Some(3))];
        assert_eq!(render(&jobs), ["a0", "s0", "a1", "s1", "a2", "s2"]);
    }

    #[test]
    fn input_order_need_not_be_sorted_and_ties_keep_input_order() {
        let jobs = [job(9, Some(1)), job(3, Some(20)), job(3, Some(20))];
        // Both jobs submitted at 3 start at 23: in submit (= input) order.
        assert_eq!(render(&jobs), ["a1", "a2", "a0", "s0", "s1", "s2"]);
    }

    #[test]
    fn negative_waits_never_start() {
        let jobs = [job(10, Some(-5)), job(20, Some(0))];
        assert_eq!(render(&jobs), ["a0", "a1", "s1"]);
        assert_eq!(jobs[0].wait(), None);
    }

    #[test]
    fn times_never_go_backwards() {
        let jobs: Vec<JobRecord> = (0..200)
            .map(|i| job((i * 7919) % 1000, Some((i * 104_729) % 300)))
            .collect();
        let ev = event_stream(&jobs);
        assert_eq!(ev.len(), 400);
        assert!(ev.windows(2).all(|w| w[0].at <= w[1].at));
    }
}
